# SPDX-License-Identifier: MIT
# tests/e2e/test_relay.py - the OpenAI Chat relay: non-streamed and streamed answers reach
# the client as the upstream sent them, the upstream sees the provider's key, and the
# usage lands on the traffic row.

import http.client
import json
import re
import socket
import threading
import time

import pytest

from gwtest import (ALICE_KEY, BOB_KEY, CONTROL_TOKEN, REQ_ID_RE, UP_KEY_A, UP_KEY_ENV,
                    LoopbackServer, bearer, ceil_div, chat_body, config, content_of,
                    http_request, is_usage_chunk, provider, recv_request, sse_events)


def _normalize(raw):
    """Response bytes with the per-response fields ("id", "created") blanked out."""
    raw = re.sub(rb'"id"\s*:\s*"[^"]*"', b'"id":"-"', raw)
    return re.sub(rb'"created"\s*:\s*[0-9]+', b'"created":0', raw)


def test_non_stream_relay_returns_upstream_content_and_usage(tmp_path, bench, gwd):
    b = bench("--chunks", 3, "--text", "hi ", "--cached", 2)
    g = gwd(config(tmp_path, [provider("up", b)]))
    body = chat_body(model="gpt-test", temperature=0.5)

    r = g.chat(body)

    assert r.status == 200, r
    assert REQ_ID_RE.match(r.headers.get("x-request-id", "")), r.headers
    j = r.json()
    assert j["object"] == "chat.completion"
    assert j["choices"][0]["message"]["content"] == "hi hi hi "
    sent = b.last_body_bytes()
    assert j["usage"]["completion_tokens"] == 3
    assert j["usage"]["prompt_tokens"] == ceil_div(len(sent), 4)
    assert j["usage"]["prompt_tokens_details"]["cached_tokens"] == 2


@pytest.mark.parametrize("key_header", ["authorization", "x-api-key"])
def test_upstream_sees_the_provider_key_and_the_body_with_only_model_rewritten(
        tmp_path, bench, gwd, key_header):
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b, models=["gpt-test"])]))
    body = chat_body(model="gpt-test", temperature=0.25, max_tokens=7, user="u1")
    hdr = bearer(ALICE_KEY) if key_header == "authorization" else {"x-api-key": ALICE_KEY}

    r = g.chat(body, key=None, headers=hdr)

    assert r.status == 200, r
    last = b.last()
    assert last["method"] == "POST"
    assert last["path"] == "/v1/chat/completions"
    headers = {k.lower(): v for k, v in last["headers"].items()}
    assert headers.get("authorization") == f"Bearer {UP_KEY_A}"
    for k, v in headers.items():
        assert ALICE_KEY not in v, f"gateway key leaked to the upstream in {k}"
    assert b.last_body() == json.loads(body)


def test_client_key_from_env_is_accepted(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b)]))

    r = g.chat(key=None, headers={"x-api-key": BOB_KEY})

    assert r.status == 200, r
    row = g.wait_row(r.headers["x-request-id"])
    assert row["client"] == "bob"


def test_stream_is_relayed_byte_exact_when_client_asked_for_usage(tmp_path, bench, gwd):
    """Byte-exact modulo "id" and "created": the same body gwd sent upstream is asked
    straight from gwbench, both answers get id/created blanked, the bytes must match."""
    b = bench("--chunks", 4, "--interval-ms", 5, "--text", "ab ")
    g = gwd(config(tmp_path, [provider("up", b)]))
    body = chat_body(stream=True, include_usage=True)

    r = g.chat(body)

    assert r.status == 200, r
    assert not r.incomplete, r
    assert REQ_ID_RE.match(r.headers.get("x-request-id", "")), r.headers
    assert r.headers.get("content-type", "").startswith("text/event-stream")
    sent = b.last_body_bytes()
    direct = http_request(b.port, "POST", "/v1/chat/completions", sent,
                          {"Authorization": f"Bearer {UP_KEY_A}"})
    assert direct.status == 200
    assert _normalize(r.body) == _normalize(direct.body)
    evs = sse_events(r.body)
    assert evs[-1] == "[DONE]"
    assert sum(1 for e in evs if is_usage_chunk(e)) == 1
    assert "".join(content_of(e) for e in evs) == "ab " * 4


@pytest.mark.parametrize("include_usage", [None, False])
def test_stream_usage_chunk_is_stripped_when_client_did_not_ask(tmp_path, bench, gwd,
                                                                 include_usage):
    b = bench("--chunks", 3)
    g = gwd(config(tmp_path, [provider("up", b)]))

    r = g.chat(chat_body(stream=True, include_usage=include_usage))

    assert r.status == 200, r
    assert not r.incomplete, r
    evs = sse_events(r.body)
    assert evs[-1] == "[DONE]"
    assert not [e for e in evs if is_usage_chunk(e)], evs
    assert "".join(content_of(e) for e in evs) == "hello " * 3
    # gwd forced the usage chunk on upstream so it can count the tokens
    assert b.last_body()["stream_options"]["include_usage"] is True


@pytest.mark.parametrize("stream", [False, True])
def test_usage_is_recorded_on_the_traffic_row(tmp_path, bench, gwd, stream):
    b = bench("--chunks", 5, "--cached", 3)
    g = gwd(config(tmp_path, [provider("up", b)]))

    r = g.chat(chat_body(model="gpt-test", stream=stream))

    assert r.status == 200, r
    rid = r.headers["x-request-id"]
    prompt = ceil_div(len(b.last_body_bytes()), 4)
    row = g.wait_row(rid)
    assert row["client"] == "alice"
    assert row["model"] == "gpt-test"
    assert row["upstream"] == "up"
    assert row["status"] == 200
    assert row["code"] is None
    assert row["outcome"] == "ok"
    assert row["stream"] is stream
    u = row["usage"]
    assert u["input_tokens"] == prompt - 3
    assert u["output_tokens"] == 5
    assert u["cache_read_tokens"] == 3
    assert u["estimated"] is False
    assert [a["outcome"] for a in row["attempts"]] == ["ok"]
    assert row["attempts"][0]["upstream"] == "up"


def test_keep_alive_serves_several_requests_on_one_connection(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b)]))
    conn = http.client.HTTPConnection("127.0.0.1", g.port, timeout=10)
    try:
        conn.connect()
        local = conn.sock.getsockname()
        ids = set()
        for stream in (False, True, False, True):
            r = g.chat(chat_body(stream=stream), conn=conn)
            assert r.status == 200, r
            assert r.headers.get("connection", "").lower() != "close"
            ids.add(r.headers["x-request-id"])
            assert conn.sock is not None and conn.sock.getsockname() == local
        assert len(ids) == 4
    finally:
        conn.close()


def test_request_ids_begin_with_the_time_they_were_made(tmp_path, bench, gwd):
    """An x-request-id's first 12 hex digits are the wall clock's milliseconds when the
    request came (so ids, and the Responses ids made of them, sort by time); the other
    20 differ between requests made in the same millisecond."""
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b)]))
    ids, before, after = [], [], []
    for _ in range(20):
        before.append(int(time.time() * 1000))
        r = g.chat(chat_body())
        after.append(int(time.time() * 1000))
        assert r.status == 200, r
        ids.append(r.headers["x-request-id"])
    for i, rid in enumerate(ids):
        assert REQ_ID_RE.match(rid), rid
        assert before[i] <= int(rid[:12], 16) <= after[i], (rid, before[i], after[i])
    # made one after another: their times never go back, and never collide as a whole
    assert [i[:12] for i in ids] == sorted(i[:12] for i in ids), ids
    assert len({i[12:] for i in ids}) == len(ids), ids


def test_x_bench_request_headers_reach_the_upstream(tmp_path, bench, gwd):
    b = bench("--chunks", 1)
    g = gwd(config(tmp_path, [provider("up", b)]))

    r = g.chat(headers={"x-bench-chunks": "4"})

    assert r.status == 200, r
    assert r.json()["choices"][0]["message"]["content"] == "hello " * 4
    assert b.last()["headers"].get("x-bench-chunks") == "4"


def test_the_hop_drops_client_only_headers_and_passes_the_rest(tmp_path, bench, gwd):
    """Hop-by-hop headers, the client's credentials and cookies stay at the gateway; other
    headers, of the same lengths as dropped ones or not, reach the upstream as sent."""
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b)]))
    dropped = {"cookie": "a=1", "proxy-authorization": "Basic eA==", "x-api-key": "k1",
               "x-goog-api-key": "k2", "keep-alive": "timeout=5", "te": "trailers",
               "trailer": "x-t", "anthropic-version": "2023-06-01",
               "proxy-connection": "keep-alive", "accept-encoding": "identity"}
    passed = {"x-bench-chunks": "2", "cookie2": "b", "x-custom-header": "c",
              "x-request-tag-17ch": "d", "ab": "e", "user-agent": "gw-e2e/1", "x-upgrade": "f"}

    r = g.chat(headers={**dropped, **passed})

    assert r.status == 200, r
    got = b.last()["headers"]
    for name in dropped:
        assert name not in got, (name, got)
    for name, value in passed.items():
        assert got.get(name) == value, (name, got)
    assert got.get("authorization") == f"Bearer {UP_KEY_A}", got  # the provider's, not ours


def test_secrets_never_appear_in_logs_or_rows(tmp_path, bench, gwd):
    a = bench("--fault", "status", "--status", 500)
    b = bench()
    g = gwd(config(tmp_path, [provider("a", a),
                              provider("b", b, keys=[{"env": "GW_E2E_UP_KEY"}])]))
    assert g.chat().status == 200
    assert g.chat(chat_body(stream=True), key=None, headers={"x-api-key": BOB_KEY}).status == 200
    assert g.chat(key=ALICE_KEY + "x").status == 401
    r = g.chat(chat_body(stream=True))
    g.wait_row(r.headers["x-request-id"])
    rows = json.dumps(g.traffic())
    logs = g.err.text() + g.out.text()
    for secret in (ALICE_KEY, BOB_KEY, UP_KEY_A, UP_KEY_ENV, CONTROL_TOKEN):
        assert secret not in logs, f"{secret} in gwd's log"
        assert secret not in rows, f"{secret} in a traffic row"


def test_candidates_are_the_enabled_providers_that_list_the_model(tmp_path, bench, gwd):
    other = bench()
    off = bench()
    on = bench()
    g = gwd(config(tmp_path, [provider("other", other, models=["other-model"]),
                              provider("off", off, enabled=False),
                              provider("on", on, models=["gpt-x", "gpt-test"])]))

    r = g.chat(chat_body(model="gpt-test"))

    assert r.status == 200, r
    row = g.wait_row(r.headers["x-request-id"])
    assert row["upstream"] == "on"
    assert [a["upstream"] for a in row["attempts"] if a["outcome"] == "ok"] == ["on"]
    assert other.stats()["requests"] == 0
    assert off.stats()["requests"] == 0
    assert on.stats()["requests"] == 1


def test_concurrent_streams_all_complete_and_are_recorded(tmp_path, bench, gwd):
    n = 16
    b = bench("--chunks", 5, "--interval-ms", 20, "--threads", 2)
    g = gwd(config(tmp_path, [provider("up", b)]))
    results = [None] * n

    def one(i):
        try:
            r = g.chat(chat_body(stream=True, text=f"request {i}"))
            results[i] = (r.status, r.incomplete, r.headers.get("x-request-id"),
                          "".join(content_of(e) for e in sse_events(r.body)),
                          sse_events(r.body)[-1:])
        except Exception as e:  # reported below with the others
            results[i] = repr(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for res in results:
        assert isinstance(res, tuple), results
        status, incomplete, rid, content, last = res
        assert status == 200 and not incomplete, res
        assert content == "hello " * 5 and last == ["[DONE]"], res
    ids = {res[2] for res in results}
    assert len(ids) == n
    for rid in ids:
        row = g.wait_row(rid)
        assert row["usage"]["output_tokens"] == 5


@pytest.mark.parametrize("stream", [False, True])
def test_a_row_times_the_upstream_s_wait_and_pace(tmp_path, bench, gwd, stream):
    """A worker reads its clock once per loop turn (net_clock_turn): the row's and the
    attempt's time to first byte still hold the upstream's wait, and the duration its
    pace, no more than the client itself waited."""
    b = bench("--chunks", 3, "--ttft-ms", 150, "--interval-ms", 60)
    g = gwd(config(tmp_path, [provider("up", b)]))
    t0 = time.monotonic()
    if stream:
        r = g.stream(chat_body(stream=True))
        r.rest()
    else:
        r = g.chat(chat_body())
    waited_ms = (time.monotonic() - t0) * 1000

    assert r.status == 200, r
    row = g.wait_row(r.headers["x-request-id"])
    # non-streamed, the whole answer waits for its last chunk: 150 + 2 * 60 ms; the
    # attempt's is the upstream's head, which a stream's upstream sends at once
    first = 150 if stream else 270
    assert first <= row["ttfb_ms"] <= waited_ms, row
    assert (0 if stream else 270) <= row["attempts"][0]["ttfb_ms"] <= row["ttfb_ms"], row
    assert 270 <= row["duration_ms"] <= waited_ms + 1, row


def _sse_chunk(delta, finish=None):
    return ("data: " + json.dumps({"id": "c1", "object": "chat.completion.chunk", "created": 1,
                                   "model": "gpt-test",
                                   "choices": [{"index": 0, "delta": delta,
                                                "finish_reason": finish}]}) + "\n\n").encode()


def _http_chunk(data):
    return b"%x\r\n%s\r\n" % (len(data), data)


class TwoWriteUpstream(LoopbackServer):
    """Answers one streamed Chat request in two writes: the head and the events of
    <first> (each event its own HTTP/1.1 chunk) at once, then, when told, the rest."""

    def __init__(self, first, rest):
        self.first, self.rest = first, rest
        self.go = threading.Event()
        super().__init__()

    def handle(self, c):
        with c:
            recv_request(c)
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\n" +
                      b"".join(_http_chunk(e) for e in self.first))
            self.go.wait(30)
            c.sendall(b"".join(_http_chunk(e) for e in self.rest) + b"0\r\n\r\n")
            c.recv(1)  # until gwd closes or keeps it idle

    def close(self):
        self.go.set()
        super().close()


def _read_http_chunk(f):
    """One HTTP/1.1 chunk's data from the file <f> (the terminal chunk gives b"")."""
    size = int(f.readline().split(b";")[0], 16)
    data = f.read(size)
    assert f.read(2) == b"\r\n"
    return data


def test_a_read_holding_several_upstream_events_reaches_the_client_in_one_write(tmp_path,
                                                                              gwd):
    """The events of one upstream read are relayed in one write, not one per event: over
    HTTP/1.1 the client's first chunk holds every event of the upstream's first write
    (gwd's own chunk framing shows the writes), and the rest follows when it comes."""
    contents = ["one ", "two ", "three ", "four "]
    first = [_sse_chunk({"role": "assistant", "content": ""})]
    first += [_sse_chunk({"content": c}) for c in contents]
    rest = [_sse_chunk({}, "stop"), b"data: [DONE]\n\n"]
    up = TwoWriteUpstream(first, rest)
    try:
        g = gwd(config(tmp_path, [provider("up", base_url=up.url)]))
        body = chat_body(stream=True)
        s = socket.create_connection(("127.0.0.1", g.port), timeout=10)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"
                  b"Authorization: Bearer " + ALICE_KEY.encode() + b"\r\n"
                  b"Content-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        f = s.makefile("rb")
        status = f.readline()
        assert status.startswith(b"HTTP/1.1 200"), status
        head = {}
        while (line := f.readline()) != b"\r\n":
            k, _, v = line.decode().partition(":")
            head[k.strip().lower()] = v.strip()
        assert head.get("transfer-encoding") == "chunked", head

        first_write = _read_http_chunk(f)

        assert [content_of(e) for e in sse_events(first_write)] == [""] + contents, first_write
        up.go.set()
        later = b""
        while data := _read_http_chunk(f):
            later += data
        evs = sse_events(later)
        assert evs[-1] == "[DONE]", later
        assert json.loads(evs[0])["choices"][0]["finish_reason"] == "stop", later
        s.close()
    finally:
        up.close()
