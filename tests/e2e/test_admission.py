# SPDX-License-Identifier: MIT
# tests/e2e/test_admission.py - concurrency limits through real processes (DESIGN.md 7, 18):
# providers[].max_concurrent (a full candidate is skipped as busy, the sticky one and the
# last ones are waited for, 429 gw.busy_all when the wait runs out), a full load-balance
# member sitting the round out, clients[].max_concurrent (held until a streamed answer
# ends, 429 gw.key_busy), a client giving up while it waits, SIGHUP raising or removing a
# limit, the limits in /control/v1/overview, and a waiter handed the key's slot admitted
# against the usage the request that gave it back settled.
# A slot is held by a paced stream: HOLD (~20 s, closed by the test: "the client is gone")
# or SLOW (~2 s, read to its end). A test that needs a request queued before it acts waits
# for the overview's `waiting` counter; nothing sleeps and no duration is asserted.

import http.client
import signal
import socket
import threading
import time

import pytest

from gwtest import (ALICE_KEY, BOB_KEY, REQ_ID_RE, WAIT_TIMEOUT, LoopbackServer, Resp, bearer,
                    chat_body, chat_messages_body, config, content_of, dry_run, overview,
                    provider, recv_request, sha256_hex, sse_events, wait_until, write_config)

HOLD = {"x-bench-chunks": "100", "x-bench-interval-ms": "200"}  # ~20 s, closed by the test
SLOW = {"x-bench-chunks": "10", "x-bench-interval-ms": "200"}   # ~2 s, read to its end


# ---------------------------------------------------------------- helpers

class Pending:
    """A request sent now whose answer is read later (or never: close())."""

    def __init__(self, g, body, key=ALICE_KEY, headers=None):
        self.conn = http.client.HTTPConnection("127.0.0.1", g.port, timeout=WAIT_TIMEOUT)
        h = {"Content-Type": "application/json"}
        h.update(bearer(key))
        h.update(headers or {})
        self.conn.request("POST", "/v1/chat/completions", body=body, headers=h)

    def response(self):
        r = self.conn.getresponse()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        try:
            out = Resp(r.status, hdrs, r.read())
        except http.client.IncompleteRead as e:
            out = Resp(r.status, hdrs, e.partial, incomplete=True)
        self.conn.close()
        return out

    def close(self):
        try:
            if self.conn.sock is not None:
                self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()


@pytest.fixture
def streams(gwd):
    """Registers streams / pending requests to close before the gwds are stopped (a held
    stream would otherwise make the SIGTERM drain wait for it)."""
    opened = []

    def add(s):
        opened.append(s)
        return s

    yield add
    for s in opened:
        s.close()


def new_text(tag):
    return f"{tag} {time.monotonic_ns()}"


def hold(g, streams, headers=HOLD, key=ALICE_KEY, model="gpt-test", body=None):
    """A streamed request that has relayed its first content (so it holds its slots)."""
    s = streams(g.stream(body or chat_body(model=model, stream=True, text=new_text("hold")),
                         key=key, headers=headers))
    assert s.status == 200, (s.status, s.resp.read())
    s.next_content()
    return s


def outcomes(row):
    return [(a["upstream"], a["outcome"]) for a in row["attempts"]]


def ov_entry(g, section, name):
    for e in overview(g)[section]:
        if e["name"] == name:
            return e
    raise AssertionError(f"{name} not in the overview's {section}")


def wait_waiting(g, section, name, n=1):
    """Until the overview counts <n> requests waiting on <section>'s <name>."""
    return wait_until(lambda: ov_entry(g, section, name)["waiting"] == n,
                      what=f"overview {section}[{name}].waiting == {n}")


def assert_busy_refusal(r, code):
    assert r.status == 429, r
    assert r.headers.get("x-gw-code") == code, r.headers
    assert REQ_ID_RE.match(r.headers.get("x-request-id", "")), r.headers
    assert r.headers.get("x-should-retry") == "true", r.headers
    err = r.json()["error"]
    assert err["code"] == code, err
    assert err["status"] == 429, err
    assert isinstance(err["message"], str) and err["message"], err
    assert isinstance(err["type"], str) and err["type"], err


def assert_stream_complete(r, chunks):
    assert r.status == 200, r
    evs = sse_events(r.body)
    assert sum(1 for e in evs if content_of(e)) == chunks, evs
    assert evs[-1] == "[DONE]", evs


def alice(max_concurrent=None):
    c = {"name": "alice", "key_sha256": sha256_hex(ALICE_KEY)}
    if max_concurrent is not None:
        c["max_concurrent"] = max_concurrent
    return c


def bob():
    return {"name": "bob", "key_env": "GW_KEY_BOB"}


def reload(g, tmp_path, cfg):
    """Rewrites gwd <g>'s config and sends SIGHUP; returns once `code=reloaded` is logged."""
    start = g.err.count()
    write_config(tmp_path, cfg)
    g.signal(signal.SIGHUP)
    g.err.wait_for(r"code=reloaded\b", start=start)


# ---------------------------------------------------------------- upstream slots

def test_full_upstream_is_skipped_as_busy_and_the_next_candidate_answers(tmp_path, bench,
                                                                          gwd, streams):
    a = bench("--chunks", 1)
    b = bench("--chunks", 1)
    g = gwd(config(tmp_path, [provider("a", a, max_concurrent=1), provider("b", b)],
                   failover={"slot_wait_secs": 2}))
    h = hold(g, streams)
    assert a.stats()["streams_started"] == 1

    r = g.chat()

    assert r.status == 200, r
    row = g.wait_row(r.headers["x-request-id"])
    assert row["upstream"] == "b", row
    assert row["code"] is None, row
    assert a.stats()["requests"] == 1  # the full upstream was never sent to
    assert b.stats()["requests"] == 1
    # DESIGN.md 6: a hop that cannot serve (busy) is recorded as skipped with its reason
    assert outcomes(row) == [("a", "skipped:busy"), ("b", "ok")], row
    h.close()


@pytest.mark.parametrize("end", ["relayed_to_its_end", "client_gone"])
def test_waiter_gets_the_only_upstream_when_the_running_stream_ends(tmp_path, bench, gwd,
                                                                     streams, end):
    a = bench("--chunks", 1)
    g = gwd(config(tmp_path, [provider("a", a, max_concurrent=1)],
                   failover={"slot_wait_secs": 10}))
    h = hold(g, streams, headers=SLOW if end == "relayed_to_its_end" else HOLD)
    w = streams(Pending(g, chat_body()))
    wait_waiting(g, "providers", "a", 1)  # queued while ~1.8 s of the stream are left

    if end == "relayed_to_its_end":
        rest = h.rest()  # the running stream ends: its slot passes to the waiter
        assert rest[-1] == "[DONE]", rest
    else:
        h.close()
    r = w.response()

    assert r.status == 200, r
    row = g.wait_row(r.headers["x-request-id"])
    assert outcomes(row) == [("a", "skipped:busy"), ("a", "ok")], row
    assert row["code"] is None, row
    assert a.stats()["requests"] == 2
    ov = ov_entry(g, "providers", "a")
    assert ov["waiting"] == 0, ov
    if end == "relayed_to_its_end":
        # it waited for the rest of the stream (>= one 200 ms interval)
        assert row["attempts"][1]["queued_ms"] > 0, row  # the hop that waited
        assert row["queued_ms"] > 0, row
    else:
        # (closed right after the wait was seen: it may have lasted under 1 ms, and
        # queued_ms is whole ms, so it is not checked here)
        a.wait_stat(lambda x: x["streams_aborted"] == 1, "the held stream aborted")
        held = wait_until(lambda: [x for x in g.traffic() if x["id"] != row["id"]],
                          what="the held stream's row")
        assert [(x["status"], x["code"]) for x in held] == [(499, "gw.client.cancelled")], held


@pytest.mark.parametrize("slot_wait_secs", [0, 1], ids=["never_wait", "wait_1s"])
def test_every_candidate_full_answers_429_busy_all(tmp_path, bench, gwd, streams,
                                                   slot_wait_secs):
    a = bench("--chunks", 1)
    b = bench("--chunks", 1)
    g = gwd(config(tmp_path, [provider("a", a, max_concurrent=1),
                              provider("b", b, max_concurrent=1)],
                   failover={"slot_wait_secs": slot_wait_secs, "failures_to_pause": 1}))
    hold(g, streams)  # on a
    hb = hold(g, streams)  # a is full: on b
    assert (a.stats()["requests"], b.stats()["requests"]) == (1, 1)

    r = g.chat()

    assert_busy_refusal(r, "gw.busy_all")
    assert r.headers.get("retry-after") == "1", r.headers
    assert r.headers.get("retry-after-ms") == "1000", r.headers
    assert (a.stats()["requests"], b.stats()["requests"]) == (1, 1)  # nothing sent
    row = g.wait_row(r.headers["x-request-id"])
    assert row["status"] == 429, row
    assert row["code"] == "gw.busy_all", row
    assert row["upstream"] is None, row
    assert outcomes(row) == [("a", "skipped:busy"), ("b", "skipped:busy")], row
    if slot_wait_secs == 0:
        assert row["queued_ms"] == 0, row  # 0 = never wait
    else:
        assert row["queued_ms"] > 0, row
    # waiting is not a failure: no pause (failures_to_pause 1), no count, no outcome
    for name in ("a", "b"):
        ov = ov_entry(g, "providers", name)
        assert ov["state"] == "ok", ov
        assert ov["consecutive_failures"] == 0, ov
        assert ov["outcomes"] == 0, ov
    assert hb.next_event() is not None  # the stream holding b runs on


def test_all_full_waits_for_whichever_candidate_frees_first(tmp_path, bench, gwd, streams):
    a = bench("--chunks", 1)
    b = bench("--chunks", 1)
    g = gwd(config(tmp_path, [provider("a", a, max_concurrent=1),
                              provider("b", b, max_concurrent=1)],
                   failover={"slot_wait_secs": 10}))
    hold(g, streams)  # a, held until the end of the test
    hb = hold(g, streams, headers=SLOW)  # b, ends in ~2 s
    w = streams(Pending(g, chat_body()))
    wait_waiting(g, "providers", "a", 1)  # one request waits on both
    wait_waiting(g, "providers", "b", 1)

    assert hb.rest()[-1] == "[DONE]"
    r = w.response()

    assert r.status == 200, r
    row = g.wait_row(r.headers["x-request-id"])
    assert outcomes(row) == [("a", "skipped:busy"), ("b", "skipped:busy"), ("b", "ok")], row
    assert row["attempts"][2]["queued_ms"] > 0, row
    assert row["upstream"] == "b", row
    assert a.stats()["requests"] == 1
    assert b.stats()["requests"] == 2


TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}}}}]


def tool_turn(msgs, k):
    return msgs + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{k}", "type": "function",
             "function": {"name": "lookup", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": f"call_{k}", "content": f"result {k}"}]


def test_sticky_upstream_is_waited_for_not_skipped(tmp_path, bench, gwd, streams):
    a = bench("--chunks", 1)
    b = bench("--chunks", 1)
    g = gwd(config(tmp_path, [provider("a", a, max_concurrent=1),
                              provider("b", b, max_concurrent=1)],
                   failover={"slot_wait_secs": 10},
                   groups=[{"name": "lb", "type": "load-balance",
                            "providers": [{"name": "a", "weight": 1},
                                          {"name": "b", "weight": 1}]}]))
    sess = {"x-session-id": "sess-sticky-wait"}
    msgs = [{"role": "user", "content": "look this up"}]
    r1 = g.chat(chat_messages_body(msgs, model="lb", tools=TOOLS), headers=sess)
    assert r1.status == 200, r1
    first = g.wait_row(r1.headers["x-request-id"])["upstream"]
    other = b if first == "a" else a
    # within the turn: the stream stays on <first> and holds its only slot
    msgs = tool_turn(msgs, 1)
    h = hold(g, streams, headers={**sess, **SLOW},
             body=chat_messages_body(msgs, model="lb", tools=TOOLS, stream=True))
    msgs = tool_turn(msgs, 2)
    w = streams(Pending(g, chat_messages_body(msgs, model="lb", tools=TOOLS), headers=sess))
    wait_waiting(g, "providers", first, 1)

    assert h.rest()[-1] == "[DONE]"
    r = w.response()

    assert r.status == 200, r
    row = g.wait_row(r.headers["x-request-id"])
    assert outcomes(row) == [(first, "ok")], row  # waited for, never skipped
    assert row["attempts"][0]["queued_ms"] > 0, row
    assert row["queued_ms"] > 0, row
    assert other.stats()["requests"] == 0


def test_after_a_failure_the_request_waits_for_a_full_candidate(tmp_path, bench, gwd, streams):
    # DESIGN.md 7: when every remaining candidate is full the request waits for the first
    # to free, also after a hop that reached an upstream failed.
    a = bench("--chunks", 1)
    b = bench("--fault", "status", "--status", 503)
    g = gwd(config(tmp_path, [provider("a", a, max_concurrent=1), provider("b", b)],
                   failover={"slot_wait_secs": 10}))
    h = hold(g, streams, headers=SLOW)  # a's only slot
    w = streams(Pending(g, chat_body(text=new_text("after-failure"))))
    wait_waiting(g, "providers", "a", 1)  # b failed, a is waited for

    assert h.rest()[-1] == "[DONE]"
    r = w.response()

    assert r.status == 200, r
    row = g.wait_row(r.headers["x-request-id"])
    assert outcomes(row) == [("a", "skipped:busy"), ("b", "failed"), ("a", "ok")], row
    assert row["attempts"][2]["queued_ms"] > 0, row


def test_after_a_failure_a_wait_that_runs_out_answers_the_failure(tmp_path, bench, gwd,
                                                                   streams):
    a = bench("--chunks", 1)
    b = bench("--fault", "status", "--status", 503)
    g = gwd(config(tmp_path, [provider("a", a, max_concurrent=1), provider("b", b)],
                   failover={"slot_wait_secs": 1}))
    hold(g, streams)  # a's only slot, for longer than the wait

    r = g.chat(chat_body(text=new_text("runs-out")))

    assert r.status == 502, r  # the last real failure, not gw.busy_all
    assert r.headers["x-gw-code"] == "gw.upstream.failed", r.headers
    row = g.wait_row(r.headers["x-request-id"])
    assert outcomes(row) == [("a", "skipped:busy"), ("b", "failed")], row


def test_a_key_refusal_has_an_empty_attempt_chain(tmp_path, bench, gwd, streams):
    # DESIGN.md 8: a refused request is recorded with its code and no attempt, even when
    # routing found a candidate full or paused before the key's limits refused it.
    a = bench("--chunks", 1)
    b = bench("--chunks", 1)
    lim = alice()
    lim["limits"] = [{"per": "day", "requests": 1}]
    g = gwd(config(tmp_path, [provider("a", a, max_concurrent=1), provider("b", b)],
                   clients=[lim, bob()]))
    hold(g, streams)  # alice's one request of the day, holding a's slot

    r = g.chat(chat_body(text=new_text("refused")))

    assert r.status == 429, r
    assert r.headers["x-gw-code"] == "gw.key_limit.requests_per_period"
    row = g.wait_row(r.headers["x-request-id"])
    assert row["code"] == "gw.key_limit.requests_per_period" and row["attempts"] == [], row


def lb_a_full(tmp_path, a, b):
    return config(tmp_path, [provider("a", a, max_concurrent=1), provider("b", b)],
                  failover={"slot_wait_secs": 2},
                  groups=[{"name": "lb", "type": "load-balance",
                           "providers": [{"name": "a", "weight": 1},
                                         {"name": "b", "weight": 1}]}])


def test_full_load_balance_member_sits_the_round_out(tmp_path, bench, gwd, streams):
    a = bench("--chunks", 1)
    b = bench("--chunks", 1)
    g = gwd(lb_a_full(tmp_path, a, b))
    hold(g, streams, model="lb")
    assert a.stats()["requests"] == 1  # 1:1 starts on a, which is now full

    resps = [g.chat(chat_body(model="lb", text=new_text("round"))) for _ in range(3)]

    for r in resps:
        assert r.status == 200, r
        row = g.wait_row(r.headers["x-request-id"])
        assert row["upstream"] == "b", row
        # a sat the round out: b is tried first; a is at most recorded as skipped busy
        tried = [x for x in outcomes(row) if x != ("a", "skipped:busy")]
        assert tried == [("b", "ok")], row
    assert a.stats()["requests"] == 1
    assert b.stats()["requests"] == 3


def test_dry_run_puts_a_full_load_balance_member_last(tmp_path, bench, gwd, streams):
    a = bench("--chunks", 1)
    b = bench("--chunks", 1)
    g = gwd(lb_a_full(tmp_path, a, b))
    h = hold(g, streams, model="lb")
    assert a.stats()["requests"] == 1

    d = dry_run(g, "lb")

    assert [c["provider"] for c in d["candidates"]] == ["b", "a"], d
    assert d["pick"] == "b", d
    h.close()


# ---------------------------------------------------------------- key permits

def test_key_limit_1_second_stream_waits_until_the_first_ends(tmp_path, bench, gwd, streams):
    up = bench("--chunks", 2)
    g = gwd(config(tmp_path, [provider("up", up)], clients=[alice(1), bob()],
                   failover={"slot_wait_secs": 10}))
    h = hold(g, streams, headers=SLOW)
    w = streams(Pending(g, chat_body(stream=True)))
    wait_waiting(g, "keys", "alice", 1)  # queued while ~1.8 s of the first are left
    assert up.stats()["requests"] == 1  # the second is not sent meanwhile

    assert h.rest()[-1] == "[DONE]"
    r = w.response()

    assert_stream_complete(r, 2)
    row = g.wait_row(r.headers["x-request-id"])
    assert outcomes(row) == [("up", "ok")], row
    assert row["queued_ms"] > 0, row  # it waited for the key's permit
    assert up.stats()["requests"] == 2
    assert up.stats()["streams_started"] == 2


class HeldUpstream(LoopbackServer):
    """A Chat upstream whose first request is answered only when told (.go); every answer
    says it used one input and one output token, whatever the request's size."""

    ANSWER = (b'{"id":"c","object":"chat.completion","created":1,"model":"gpt-test",'
              b'"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},'
              b'"finish_reason":"stop"}],'
              b'"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}')

    def __init__(self):
        self.got_first, self.go = threading.Event(), threading.Event()
        self.n = 0
        super().__init__()

    def handle(self, c):
        with c:
            while True:
                head, _ = recv_request(c)
                if not head:
                    return
                with self.lock:
                    self.n += 1
                    first = self.n == 1
                if first:
                    self.got_first.set()
                    self.go.wait(WAIT_TIMEOUT)
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n" % len(self.ANSWER) + self.ANSWER)

    def close(self):
        self.go.set()
        super().close()


def test_a_waiter_handed_the_key_slot_sees_the_finished_requests_usage(tmp_path, gwd,
                                                                        streams):
    # The request that gives the key's slot back has its usage settled before the waiter
    # is admitted (net_slots_granted applies the worker's held settlements first,
    # net/settle.c): the first request reserved ~1000 tokens of the key's 1500 a minute
    # and used 2, so the second (~1000 more) fits; against the reservation it would not,
    # and the rolling window's ~60 s is past its slot wait: 429 at once.
    up = HeldUpstream()
    try:
        lim = dict(alice(1), limits=[{"per": "minute", "tokens": 1500}])
        g = gwd(config(tmp_path, [provider("up", base_url=up.url)], clients=[lim],
                       failover={"slot_wait_secs": 30}))
        first = streams(Pending(g, chat_body(text="x" * 4000)))
        assert up.got_first.wait(WAIT_TIMEOUT)
        second = streams(Pending(g, chat_body(text="y" * 4000)))
        wait_waiting(g, "keys", "alice", 1)

        up.go.set()
        r1, r2 = first.response(), second.response()

        assert r1.status == 200, r1
        assert r2.status == 200, r2
        used = {(x["per"], x["measure"]): x["used"]
                for x in ov_entry(g, "keys", "alice")["limits"]}
        assert used[("minute", "tokens")] == 4  # the two answers' usage, nothing reserved
    finally:
        up.close()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_key_limit_wait_runs_out_429_key_busy(tmp_path, bench, gwd, streams, stream):
    up = bench("--chunks", 1)
    g = gwd(config(tmp_path, [provider("up", up)], clients=[alice(1), bob()],
                   failover={"slot_wait_secs": 1}))
    hold(g, streams)

    r = g.chat(chat_body(stream=stream))

    assert_busy_refusal(r, "gw.key_busy")
    assert up.stats()["requests"] == 1  # never sent
    row = g.wait_row(r.headers["x-request-id"])
    assert row["status"] == 429, row
    assert row["code"] == "gw.key_busy", row
    assert row["attempts"] == [], row
    # another key is not limited by alice's permit
    rb = g.chat(key=BOB_KEY)
    assert rb.status == 200, rb


# ---------------------------------------------------------------- giving up, reload

@pytest.mark.parametrize("limit", ["provider", "key"])
def test_client_giving_up_while_waiting_does_not_leak_the_slot(tmp_path, bench, gwd, streams,
                                                               limit):
    # ... nor counts against the key's limits, nor shows an attempt that never was
    up = bench("--chunks", 1)
    counted = alice(1 if limit == "key" else None)
    counted["limits"] = [{"per": "day", "requests": 100}]
    if limit == "provider":
        cfg = config(tmp_path, [provider("up", up, max_concurrent=1)],
                     clients=[counted, bob()], failover={"slot_wait_secs": 2})
        section, name = "providers", "up"
    else:
        cfg = config(tmp_path, [provider("up", up)], clients=[counted, bob()],
                     failover={"slot_wait_secs": 2})
        section, name = "keys", "alice"
    g = gwd(cfg)
    h = hold(g, streams)
    w = streams(Pending(g, chat_body()))
    wait_waiting(g, section, name, 1)

    w.close()  # gives up while waiting
    wait_waiting(g, section, name, 0)
    gave_up = wait_until(lambda: next((x for x in g.traffic()
                                       if x["code"] == "gw.client.cancelled"), None),
                         what="the row of the request that gave up")
    assert all(a["outcome"] != "cancelled" for a in gave_up["attempts"]), gave_up
    assert ov_entry(g, "keys", "alice")["limits"][0]["used"] == 1  # the held one only
    h.close()  # the held slot goes back too
    wait_until(lambda: ov_entry(g, section, name)["in_flight"] == 0,
               what=f"overview {section}[{name}].in_flight == 0")

    r = g.chat()
    assert r.status == 200, r
    row = g.wait_row(r.headers["x-request-id"])
    assert outcomes(row) == [("up", "ok")], row  # in at once: no busy skip ...
    assert row["queued_ms"] == 0, row  # ... and no wait
    assert up.stats()["requests"] == 2  # the one that gave up was never sent
    assert ov_entry(g, "keys", "alice")["limits"][0]["used"] == 2


@pytest.mark.parametrize("change", ["raised", "removed"])
@pytest.mark.parametrize("limit", ["provider", "key"])
def test_reload_raising_or_removing_a_limit_lets_the_waiter_in(tmp_path, bench, gwd, streams,
                                                               limit, change):
    up = bench("--chunks", 1)
    new = 2 if change == "raised" else None

    def cfg_with(n):
        if limit == "provider":
            p = provider("up", up) if n is None else provider("up", up, max_concurrent=n)
            return config(tmp_path, [p], failover={"slot_wait_secs": 30})
        return config(tmp_path, [provider("up", up)], clients=[alice(n), bob()],
                      failover={"slot_wait_secs": 30})
    section, name = ("providers", "up") if limit == "provider" else ("keys", "alice")
    g = gwd(cfg_with(1))
    hold(g, streams)  # ~20 s: only the reload can let the waiter in before it ends
    w = streams(Pending(g, chat_body()))
    wait_waiting(g, section, name, 1)

    reload(g, tmp_path, cfg_with(new))
    r = w.response()

    assert r.status == 200, r
    st = up.stats()
    assert st["streams_completed"] == 0 and st["streams_aborted"] == 0, st  # still held
    row = g.wait_row(r.headers["x-request-id"])
    if limit == "provider":
        assert outcomes(row) == [("up", "skipped:busy"), ("up", "ok")], row
    else:
        assert outcomes(row) == [("up", "ok")], row
    assert ov_entry(g, section, name)["max_concurrent"] == new


def test_reload_removing_the_provider_lets_its_waiter_in(tmp_path, bench, gwd, streams):
    # The waiter was routed under the old config, which still names "up": with the
    # provider gone from the new one, its limit goes and the waiter is sent at once.
    up = bench("--chunks", 1)
    other = bench("--chunks", 1)
    g = gwd(config(tmp_path, [provider("up", up, max_concurrent=1)],
                   failover={"slot_wait_secs": 30}))
    hold(g, streams)  # ~20 s: only the reload can let the waiter in before it ends
    w = streams(Pending(g, chat_body()))
    wait_waiting(g, "providers", "up", 1)

    reload(g, tmp_path, config(tmp_path, [provider("other", other)],
                               failover={"slot_wait_secs": 30}))
    r = w.response()

    assert r.status == 200, r
    row = g.wait_row(r.headers["x-request-id"])
    assert outcomes(row) == [("up", "skipped:busy"), ("up", "ok")], row


# ---------------------------------------------------------------- overview

def test_overview_shows_the_limits_and_one_in_flight(tmp_path, bench, gwd, streams):
    a = bench("--chunks", 1)
    b = bench("--chunks", 1)
    g = gwd(config(tmp_path, [provider("a", a, max_concurrent=3), provider("b", b)],
                   clients=[alice(2), bob()]))
    h = hold(g, streams)  # on a, with alice's permit

    ov = overview(g)

    provs = {p["name"]: p for p in ov["providers"]}
    keys = {k["name"]: k for k in ov["keys"]}
    assert provs["a"]["max_concurrent"] == 3, provs
    assert provs["b"]["max_concurrent"] is None, provs
    assert keys["alice"]["max_concurrent"] == 2, keys
    assert keys["bob"]["max_concurrent"] is None, keys
    for e in (provs["a"], keys["alice"]):
        assert e["in_flight"] == 1, e
        assert e["waiting"] == 0, e
    assert provs["b"]["in_flight"] == 0, provs
    assert keys["bob"]["in_flight"] == 0, keys
    h.close()  # the client is gone: both go back
    wait_until(lambda: ov_entry(g, "providers", "a")["in_flight"] == 0, what="a in_flight 0")
    wait_until(lambda: ov_entry(g, "keys", "alice")["in_flight"] == 0,
               what="alice in_flight 0")


def test_overview_counts_in_flight_requests_without_a_limit_too(tmp_path, bench, gwd, streams):
    up = bench("--chunks", 1)
    g = gwd(config(tmp_path, [provider("up", up)]))
    h = hold(g, streams)

    assert ov_entry(g, "providers", "up")["in_flight"] == 1
    assert ov_entry(g, "providers", "up")["max_concurrent"] is None
    assert ov_entry(g, "keys", "alice")["in_flight"] == 1
    assert ov_entry(g, "keys", "alice")["max_concurrent"] is None
    h.close()
    wait_until(lambda: ov_entry(g, "providers", "up")["in_flight"] == 0, what="up in_flight 0")
    wait_until(lambda: ov_entry(g, "keys", "alice")["in_flight"] == 0, what="alice in_flight 0")
