# SPDX-License-Identifier: MIT
# tests/e2e/test_upstream_protocol.py - issue 8, point 5: an upstream answer that is not
# the shape it claims (a 2xx body that is not JSON, an event stream of garbage lines or
# of data that is not JSON, an event over the 8 MiB cap) is a failed attempt with
# gw.upstream.protocol: failed over while nothing reached the client, the client's stream
# ended with an error chunk after content, and never recorded as ok.

import json
import socket

import pytest

from gwtest import (ALICE_KEY, UP_KEY_ENV, LoopbackServer, bearer, chat_body, config,
                    content_of, http_request, provider, recv_request, sse_events)

PROTOCOL = "gw.upstream.protocol"
SSE_CAP = 8 << 20  # core/sse.c: the most one event may take


def up(name, b, dialect, **extra):
    return provider(name, b, dialect=dialect, **extra)


def two_providers(tmp_path, first, second, dialect="openai"):
    """Provider "a" (of <dialect>) then provider "b" (OpenAI)."""
    return config(tmp_path, [up("a", first, dialect),
                             provider("b", second, keys=[{"env": "GW_E2E_UP_KEY"}])])


# (fault flags, streamed request): each is an answer that is not the shape it claims
GARBAGE = [
    (("--fault", "garbage-body"), False),
    (("--fault", "garbage-body"), True),  # a streamed request answered without SSE
    (("--fault", "garbage-sse", "--drop-after", 0), True),
    (("--fault", "garbage-lines"), True),
]
GARBAGE_IDS = ["body", "body-to-stream", "sse-data-not-json", "sse-no-data-lines"]


def assert_attempt_protocol(att, upstream="a"):
    assert att["upstream"] == upstream, att
    assert att["outcome"] == "failed", att
    assert att["code"] == PROTOCOL, att
    assert att["status"] == 200, att


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
@pytest.mark.parametrize("fault,stream", GARBAGE, ids=GARBAGE_IDS)
def test_garbage_answer_fails_over_to_the_next_upstream(tmp_path, bench, gwd, fault, stream,
                                                        dialect):
    a = bench("--chunks", 2, *fault)
    b = bench("--chunks", 2)
    g = gwd(two_providers(tmp_path, a, b, dialect))

    r = g.chat(chat_body(stream=stream))

    assert r.status == 200, r
    if stream:
        evs = sse_events(r.body)
        assert "".join(content_of(e) for e in evs) == "hello hello ", evs
        assert evs[-1] == "[DONE]"
        assert "<html>" not in r.body.decode(), r  # nothing of the first hop relayed
    else:
        assert r.json()["choices"][0]["message"]["content"] == "hello hello "
    assert a.stats()["requests"] == 1
    assert b.stats()["requests"] == 1
    assert b.last()["headers"].get("authorization") == f"Bearer {UP_KEY_ENV}"
    row = g.wait_row(r.headers["x-request-id"])
    assert row["outcome"] == "ok" and row["upstream"] == "b", row
    att = row["attempts"]
    assert [x["upstream"] for x in att] == ["a", "b"], att
    assert_attempt_protocol(att[0])
    assert att[1]["outcome"] == "ok" and att[1]["code"] is None, att
    assert row["usage"]["output_tokens"] == 2 and row["usage"]["estimated"] is False, row


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
@pytest.mark.parametrize("fault,stream", GARBAGE, ids=GARBAGE_IDS)
def test_garbage_answer_from_the_only_upstream_is_a_502_never_ok(tmp_path, bench, gwd, fault,
                                                                 stream, dialect):
    a = bench("--chunks", 2, *fault)
    g = gwd(config(tmp_path, [up("a", a, dialect)]))

    r = g.chat(chat_body(stream=stream))

    # hop_next answers the failure of every candidate as gw.upstream.failed; the
    # attempt says why
    assert r.status == 502, r
    assert r.headers.get("x-gw-code") == "gw.upstream.failed", r
    assert "<html>" not in r.body.decode(), r
    row = g.wait_row(r.headers["x-request-id"])
    assert row["status"] == 502 and row["outcome"] == "failed", row
    assert row["code"] == "gw.upstream.failed", row
    assert len(row["attempts"]) == 1, row
    assert_attempt_protocol(row["attempts"][0])


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_garbage_after_content_ends_the_stream_with_a_protocol_error_chunk(tmp_path, bench,
                                                                           gwd, dialect):
    a = bench("--chunks", 6, "--fault", "garbage-sse", "--drop-after", 2)
    b = bench()
    g = gwd(two_providers(tmp_path, a, b, dialect))

    r = g.chat(chat_body(stream=True))

    assert r.status == 200, r
    assert not r.incomplete, f"the stream was not ended properly after the error chunk: {r!r}"
    evs = sse_events(r.body)
    assert "[DONE]" not in evs, evs
    assert [content_of(e) for e in evs if content_of(e)] == ["hello ", "hello "], evs
    assert "<html>" not in r.body.decode(), r
    err = json.loads(evs[-1])["error"]
    assert err["code"] == PROTOCOL, err
    assert err["status"] == 502, err
    assert b.stats()["requests"] == 0  # content was relayed: no failover after it
    row = g.wait_row(r.headers["x-request-id"])
    assert row["outcome"] == "failed" and row["code"] == PROTOCOL, row
    assert row["upstream"] == "a", row
    assert len(row["attempts"]) == 1, row
    assert_attempt_protocol(row["attempts"][0])


# ---------------------------------------------------------------- the 8 MiB cap

class RawUpstream(LoopbackServer):
    """Answers every request with the same raw bytes and closes: for answers gwbench's
    templates do not make (an event over the SSE cap)."""

    def __init__(self, answer):
        self.answer = answer
        self.requests = 0
        super().__init__()

    def handle(self, c):
        with c:
            recv_request(c)
            with self.lock:
                self.requests += 1
            c.sendall(self.answer)
            c.shutdown(socket.SHUT_WR)
            while c.recv(65536):  # until gwd closes (it may cancel early)
                pass


@pytest.fixture
def raw_upstream():
    started = []

    def start(answer):
        u = RawUpstream(answer)
        started.append(u)
        return u

    yield start
    for u in started:
        u.close()


def chunk(content):
    d = {"role": "assistant", "content": ""} if content is None else {"content": content}
    return ("data: " + json.dumps({"id": "c1", "object": "chat.completion.chunk", "created": 1,
                                   "model": "gpt-test",
                                   "choices": [{"index": 0, "delta": d,
                                                "finish_reason": None}]}) + "\n\n").encode()


def chat_slow(g, body):
    """A chat request with room for 8 MiB to pass through gwd slowly: sanitizer builds
    (make tsan) take several seconds over it, past the usual deadline."""
    return http_request(g.port, "POST", "/v1/chat/completions", body, bearer(ALICE_KEY),
                        timeout=120)


def oversized_stream(contents):
    """An event stream: the role chunk, a chunk per item of <contents>, then one event
    one byte over the cap (its blank line included)."""
    big = b"data: " + b"x" * (SSE_CAP + 1 - 8) + b"\n\n"
    assert len(big) == SSE_CAP + 1
    return (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" +
            chunk(None) + b"".join(chunk(c) for c in contents) + big)


def test_sse_event_over_the_8_mib_cap_before_content_fails_over(tmp_path, bench, gwd,
                                                                 raw_upstream):
    a = raw_upstream(oversized_stream([]))
    b = bench("--chunks", 2)
    g = gwd(config(tmp_path, [provider("a", base_url=a.url), provider("b", b)]))

    r = chat_slow(g, chat_body(stream=True))

    assert r.status == 200, r
    evs = sse_events(r.body)
    assert "".join(content_of(e) for e in evs) == "hello hello ", evs
    assert evs[-1] == "[DONE]"
    assert a.requests == 1
    row = g.wait_row(r.headers["x-request-id"])
    assert [x["outcome"] for x in row["attempts"]] == ["failed", "ok"], row
    assert_attempt_protocol(row["attempts"][0])


def test_sse_event_over_the_8_mib_cap_after_content_ends_the_stream_with_an_error_chunk(
        tmp_path, bench, gwd, raw_upstream):
    a = raw_upstream(oversized_stream(["one ", "two "]))
    b = bench()
    g = gwd(config(tmp_path, [provider("a", base_url=a.url), provider("b", b)]))

    r = chat_slow(g, chat_body(stream=True))

    assert r.status == 200, r
    evs = sse_events(r.body)
    assert [content_of(e) for e in evs if content_of(e)] == ["one ", "two "], evs
    assert "[DONE]" not in evs, evs
    assert json.loads(evs[-1])["error"]["code"] == PROTOCOL, evs[-1]
    assert len(r.body) < 1 << 20, "the oversized event reached the client"
    assert b.stats()["requests"] == 0
    row = g.wait_row(r.headers["x-request-id"])
    assert row["outcome"] == "failed" and row["code"] == PROTOCOL, row
    assert_attempt_protocol(row["attempts"][0])
