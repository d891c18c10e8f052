# SPDX-License-Identifier: MIT
# tests/e2e/test_events_logs.py - issue 12 points 4 and 6: the event stream
# (GET /control/v1/events) with its filters (type, client, sample) and `gwctl events`;
# request_finished with the traffic row's fields, upstream_paused and upstream_resumed;
# log.format json (every line an object, one `request` line per request, the request id
# on every line of a request), log.level, and a reload that switches the format.
#
# Ordering used as synchronisation (no sleeps): the control thread hands each follower
# the events of one tick as one chunk, in the order they were queued, and the events of
# a later tick after them. So once a follower has seen an event queued after a set of
# requests finished, it has seen everything of theirs it was going to see.

import json
import re
import signal
import socket
import subprocess
import threading

from gwtest import (ALICE_KEY, BOB_KEY, CONTROL_TOKEN, UP_KEY_A, UP_KEY_ENV, Lines,
                    base_env, binary, chat_body, config, provider, wait_until,
                    write_config)


class EventStream:
    """GET /control/v1/events?<query> on gwd <g>, read on a thread; subscribed (its
    ": subscribed" comment read) when the constructor returns."""

    def __init__(self, g, query=""):
        self.sock = socket.create_connection(("127.0.0.1", g.control_port), timeout=30)
        path = "/control/v1/events" + (f"?{query}" if query else "")
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: x\r\n"
                           f"Authorization: Bearer {CONTROL_TOKEN}\r\n\r\n").encode())
        self.out = Lines(self.sock.makefile("rb"), f"events?{query}")
        self.out.wait_for(r"^: subscribed")

    def events(self):
        """[(name, document)] so far, in order."""
        evs, name = [], None
        for line in self.out.text().splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                evs.append((name, json.loads(line[6:])))
        return evs

    def wait_event(self, pred, what):
        return wait_until(lambda: next((d for n, d in self.events() if pred(n, d)), None),
                          what=what)

    def close(self):
        self.sock.close()


def ev_config(tmp_path, b, bad=None, **top):
    provs = [provider("good", b, models=["gpt-test"])]
    if bad is not None:  # serves only "bad-only": its failures pause it (the sentinel)
        provs.append(provider("bad", bad, models=["bad-only"]))
    return config(tmp_path, provs, failover={"failures_to_pause": 1, "pause_secs": 1}, **top)


def run_parallel(fns):
    out = [None] * len(fns)

    def run(i):
        out[i] = fns[i]()

    ts = [threading.Thread(target=run, args=(i,)) for i in range(len(fns))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    return out


# The gateway's sampling (core/events.c, gw_event_sampled): FNV-1a over the id, a
# murmur3-style finaliser, the top 32 bits compared with rate * 2^32.
def sampled(req_id, rate):
    m = (1 << 64) - 1
    h = 0xcbf29ce484222325
    for c in req_id.encode():
        h = ((h ^ c) * 0x100000001b3) & m
    h ^= h >> 33
    h = (h * 0xff51afd7ed558ccd) & m
    h ^= h >> 33
    h = (h * 0xc4ceb9fe1a85ec53) & m
    h ^= h >> 33
    if rate <= 0:
        return False
    if rate >= 1:
        return True
    return (h >> 32) < int(rate * 4294967296.0)


# ---------------------------------------------------------------- events

def test_request_finished_filtered_by_client_carries_the_row_fields(tmp_path, bench, gwd):
    b = bench("--chunks", 2)
    g = gwd(ev_config(tmp_path, b))
    alice_only = EventStream(g, "type=request_finished&client=alice")
    everything = EventStream(g)
    try:
        answers = run_parallel(
            [lambda: g.chat(key=ALICE_KEY) for _ in range(5)] +
            [lambda: g.chat(chat_body(stream=True, include_usage=True), key=BOB_KEY)
             for _ in range(5)] +
            [lambda: g.chat(key="not-a-gateway-key")])
        assert [r.status for r in answers] == [200] * 10 + [401], answers
        ids = [r.headers["x-request-id"] for r in answers]
        alice, bob, nobody = set(ids[:5]), set(ids[5:10]), ids[10]
        # the sentinel: an alice request after all the others finished
        last = g.chat(key=ALICE_KEY)
        assert last.status == 200, last
        alice.add(last.headers["x-request-id"])
        alice_only.wait_event(lambda n, d: d.get("id") == last.headers["x-request-id"],
                              "the sentinel's request_finished")
        got = alice_only.events()
        assert [n for n, _ in got] == ["request_finished"] * 6, got
        assert {d["id"] for _, d in got} == alice, (got, alice)
        # the unfiltered follower saw every recorded request; the one refused before its
        # key was known has no row, so no event (its log line is tested below)
        everything.wait_event(lambda n, d: d.get("id") == last.headers["x-request-id"],
                              "the sentinel, unfiltered")
        all_ids = {d["id"] for n, d in everything.events() if n == "request_finished"}
        assert all_ids == alice | bob, (all_ids, alice | bob)
        assert nobody not in all_ids

        # the fields are the traffic row's, as GET /control/v1/traffic renders it
        for n, d in got:
            row = g.wait_row(d["id"])
            assert d["type"] == "request_finished"
            ev = {k: v for k, v in d.items() if k != "type"}
            assert ev == row, (ev, row)
            assert (d["client"], d["model"], d["upstream"], d["status"], d["code"]) == \
                ("alice", "gpt-test", "good", 200, None), d
            assert [a["outcome"] for a in d["attempts"]] == ["ok"], d
            assert d["usage"]["output_tokens"] > 0 and d["duration_ms"] >= 0, d
        bob_ev = [d for n, d in everything.events() if d.get("id") in bob]
        assert len(bob_ev) == 5 and all(d["client"] == "bob" and d["stream"] for d in bob_ev)
        # never a body, a key or a credential
        text = alice_only.out.text() + everything.out.text()
        for secret in (ALICE_KEY, BOB_KEY, UP_KEY_A, UP_KEY_ENV, CONTROL_TOKEN, "say hello",
                       "not-a-gateway-key"):
            assert secret not in text, secret
    finally:
        alice_only.close()
        everything.close()


def test_sample_zero_gives_none_one_gives_all_and_a_rate_the_predicted_ids(
        tmp_path, bench, gwd):
    b = bench("--chunks", 1)
    bad = bench("--fault", "status", "--status", 500)
    g = gwd(ev_config(tmp_path, b, bad))
    none = EventStream(g, "sample=0")
    half = EventStream(g, "sample=0.5")
    every = EventStream(g, "type=request_finished&sample=1")
    try:
        ids = []
        for i in range(24):
            r = g.chat(key=ALICE_KEY if i % 2 else BOB_KEY)
            assert r.status == 200, r
            ids.append(r.headers["x-request-id"])
        every.wait_event(lambda n, d: d.get("id") == ids[-1], "the last request, sample=1")
        assert [d["id"] for n, d in every.events()] == ids  # all, in order
        # the sentinel: an upstream pause, queued after every request above was taken
        s = g.chat(chat_body(model="bad-only"), key=ALICE_KEY)
        assert s.status >= 500, s
        ids.append(s.headers["x-request-id"])
        for f in (none, half):
            f.wait_event(lambda n, d: n == "upstream_paused", "the sentinel pause")
        every.wait_event(lambda n, d: d.get("id") == ids[-1], "the sentinel's request")
        # sample applies to request_finished only: the pause went through sample=0
        assert [n for n, _ in none.events() if n == "request_finished"] == []
        assert [n for n, _ in none.events()][:1] == ["upstream_paused"]
        # the rate picks by request id, the same way every time
        half.wait_event(lambda n, d: n == "upstream_resumed", "the pause's end")
        got = {d["id"] for n, d in half.events() if n == "request_finished"}
        want = {i for i in ids if sampled(i, 0.5)}
        assert got == want, (sorted(got), sorted(want))
        assert 0 < len(want) < len(ids)
    finally:
        for f in (none, half, every):
            f.close()


def test_bad_filters_are_refused_with_a_code(tmp_path, bench, gwd):
    g = gwd(ev_config(tmp_path, bench()))
    for q in ("type=nope", "type=", "sample=2", "sample=abc", "client="):
        r = g.control(f"/control/v1/events?{q}")
        assert r.status == 400, (q, r)
        assert r.json()["error"]["code"] == "gw.bad_request", (q, r)
    assert "nope" in g.control("/control/v1/events?type=nope").json()["error"]["message"]


def test_a_failing_upstream_emits_paused_then_resumed(tmp_path, bench, gwd):
    a = bench("--fault", "status", "--status", 503)
    b = bench("--chunks", 1)
    g = gwd(config(tmp_path, [provider("a", a), provider("b", b)],
                   failover={"failures_to_pause": 1, "pause_secs": 1}))
    ups = EventStream(g, "type=upstream_paused,upstream_resumed")
    try:
        r = g.chat()
        assert r.status == 200, r
        row = g.wait_row(r.headers["x-request-id"])
        assert [(x["upstream"], x["outcome"]) for x in row["attempts"]] == \
            [("a", "failed"), ("b", "ok")], row
        paused = ups.wait_event(lambda n, d: n == "upstream_paused", "upstream_paused")
        assert paused["provider"] == "a" and paused["reason"] == "failures", paused
        assert paused["status"] == 503 and paused["code"].startswith("gw.upstream"), paused
        assert 0 < paused["pause_ms"] <= 1000 and paused["pauses"] == 1, paused
        resumed = ups.wait_event(lambda n, d: n == "upstream_resumed", "upstream_resumed")
        assert resumed == {"type": "upstream_resumed", "provider": "a", "reason": "expired",
                           "paused_until": paused["until"]}, (paused, resumed)
        assert [n for n, _ in ups.events()] == ["upstream_paused", "upstream_resumed"]
        # the log says the same
        g.err.wait_for(r"code=upstream_paused\b.*upstream a paused")
        g.err.wait_for(r"code=upstream_resumed\b.*upstream a resumed \(expired\)")
    finally:
        ups.close()


def test_a_success_ends_a_pause_and_says_so(tmp_path, bench, gwd):
    # The only upstream fails once (the x-bench-fault header of the first request) and
    # pauses for a minute; the next request tries it anyway (every candidate paused)
    # and it answers: upstream_resumed at once, reason "answered".
    a = bench("--chunks", 1)
    g = gwd(config(tmp_path, [provider("a", a)],
                   failover={"failures_to_pause": 1, "pause_secs": 60}))
    ups = EventStream(g, "type=upstream_paused,upstream_resumed")
    try:
        r = g.chat(headers={"x-bench-fault": "status"})
        assert r.status >= 500, r
        paused = ups.wait_event(lambda n, d: n == "upstream_paused", "upstream_paused")
        assert paused["provider"] == "a" and 50000 < paused["pause_ms"] <= 60000, paused
        r = g.chat()
        assert r.status == 200, r
        resumed = ups.wait_event(lambda n, d: n == "upstream_resumed", "upstream_resumed")
        assert resumed == {"type": "upstream_resumed", "provider": "a", "reason": "answered",
                           "paused_until": None}, resumed
        g.err.wait_for(r"code=upstream_resumed\b.*req=" + r.headers["x-request-id"] +
                       r".*upstream a resumed \(answered\)")
    finally:
        ups.close()


def gwctl_events(g, *args):
    p = subprocess.Popen([binary("gwctl"), "--url", g.control_url, "--token", CONTROL_TOKEN,
                          *args], env=base_env(), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p, Lines(p.stdout, "gwctl " + " ".join(args))


def test_gwctl_events_follows_one_client(tmp_path, bench, gwd):
    b = bench("--chunks", 1)
    g = gwd(ev_config(tmp_path, b))
    human, hl = gwctl_events(g, "events", "--client", "alice", "--type", "request_finished")
    js, jl = gwctl_events(g, "--json", "events", "--client=alice")
    try:
        def subscribed():
            return "gw_events_subscribers 2" in g.control("/metrics", token=None).body.decode()

        wait_until(subscribed, what="both gwctl events to subscribe")
        rb = g.chat(key=BOB_KEY)
        ra = g.chat(key=ALICE_KEY)
        assert rb.status == ra.status == 200
        ida, idb = ra.headers["x-request-id"], rb.headers["x-request-id"]
        line = hl.wait_for(re.escape(ida)).string
        assert re.match(rf"request_finished +{ida} alice +gpt-test +-> good +200 ", line), line
        doc = json.loads(jl.wait_for(re.escape(ida)).string)
        assert (doc["type"], doc["client"], doc["upstream"]) == \
            ("request_finished", "alice", "good"), doc
        assert idb not in hl.text() and idb not in jl.text()
    finally:
        for p in (human, js):
            p.terminate()
            p.wait(5)
    for bad in (("--type", "nope"), ("--sample", "2"), ("--client",), ("--what",)):
        p = subprocess.run([binary("gwctl"), "--url", g.control_url, "--token", CONTROL_TOKEN,
                            "events", *bad], env=base_env(), capture_output=True, timeout=30)
        assert p.returncode == 2, (bad, p)


# ---------------------------------------------------------------- logs

def json_lines(g):
    out = []
    for line in g.err.text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"not a JSON line: {line!r}\n{g.err.text()}")
    return out


def test_json_log_one_request_line_per_request_and_the_id_on_every_line(
        tmp_path, bench, gwd):
    good = bench("--chunks", 2)
    failing = bench("--fault", "status", "--status", 500,
                    "--error-body", json.dumps({"error": {"message": f"bad {UP_KEY_A}"}}))
    cfg = config(tmp_path, [provider("a-failing", failing), provider("b-good", good,
                                                                    keys=[{"env": "GW_E2E_UP_KEY"}])],
                 failover={"failures_to_pause": 100}, log={"format": "json"})
    g = gwd(cfg)
    answers = run_parallel(
        [lambda: g.chat(key=ALICE_KEY) for _ in range(3)] +
        [lambda: g.chat(chat_body(stream=True), key=BOB_KEY) for _ in range(3)] +
        [lambda: g.chat(key="wrong-key-" + ALICE_KEY)])
    assert [r.status for r in answers] == [200] * 6 + [401], answers
    ids = [r.headers["x-request-id"] for r in answers]
    for i in ids[:6]:
        g.wait_row(i)
    assert g.stop() == 0
    lines = json_lines(g)
    assert lines, g.err.text()
    for d in lines:
        assert list(d)[:6] == ["ts", "lvl", "code", "wrk", "conn", "req"], d
        assert list(d)[-1] == "msg", d
    assert any(d["code"] == "ready" for d in lines)

    for i, r in zip(ids, answers):
        req_lines = [d for d in lines if d["code"] == "request" and d["req"] == i]
        assert len(req_lines) == 1, (i, req_lines)
        d = req_lines[0]
        assert d["lvl"] == "info" and d["status"] == r.status, d
        if r.status == 200:
            assert d["client"] in ("alice", "bob") and d["model"] == "gpt-test", d
            assert d["upstream"] == "b-good" and d["gw_code"] is None, d
            assert d["attempts"] == 2 and d["attempt_outcomes"] == "a-failing/failed,b-good/ok", d
            assert d["output_tokens"] > 0 and d["duration_ms"] >= 0, d
            assert isinstance(d["cost_usd"], float) and d["stream"] == (d["client"] == "bob"), d
            # the failed attempt was logged with the request's id
            assert any(x["req"] == i and x["lvl"] == "warn" and x["code"].startswith("gw.upstream")
                       for x in lines), i
        else:
            assert d["client"] is None and d["gw_code"].startswith("gw."), d
            assert d["attempts"] == 0 and d["upstream"] is None, d
    # every line logged while handling a request carries its id: each line of a worker
    # about a request (an upstream failure, the request line) names one of ours
    for d in lines:
        if d["code"] == "request" or d["code"].startswith("gw.upstream"):
            assert d["req"] in ids, d
    text = g.err.text()
    for secret in (ALICE_KEY, BOB_KEY, UP_KEY_A, UP_KEY_ENV, CONTROL_TOKEN, "say hello"):
        assert secret not in text, secret


def test_a_reload_switches_the_format_and_the_level(tmp_path, bench, gwd):
    b = bench("--chunks", 1)
    bad = bench("--fault", "status", "--status", 500)
    cfg = ev_config(tmp_path, b)  # text, info (the defaults)
    g = gwd(cfg)
    r = g.chat()
    assert r.status == 200
    g.err.wait_for(r"code=request\b.*req=" + r.headers["x-request-id"])

    # json at warn; the reload also adds a provider whose failure shows it is in force
    mark = g.err.count()
    cfg = ev_config(tmp_path, b, bad, log={"format": "json", "level": "warn"})
    write_config(tmp_path, cfg)
    g.signal(signal.SIGHUP)

    def bad_failed():
        x = g.chat(chat_body(model="bad-only"))
        return x if x.status >= 500 else None

    failed = wait_until(bad_failed, what="the reloaded config")
    g.err.wait_for(r'^\{"ts":.*"lvl":"warn",.*"req":"' + failed.headers["x-request-id"],
                   start=mark)
    quiet = g.chat()
    assert quiet.status == 200

    # back to info: the reload's own line is the mark that every earlier line is out
    cfg["log"] = {"format": "json", "level": "info"}
    write_config(tmp_path, cfg)
    g.signal(signal.SIGHUP)
    g.err.wait_for(r'^\{"ts":.*"code":"reloaded"', start=mark)
    r = g.chat()
    assert r.status == 200
    line = g.err.wait_for(r'"code":"request",.*"req":"' + r.headers["x-request-id"],
                          start=mark).string
    assert json.loads(line)["client"] == "alice"
    after = g.err.text().splitlines()[mark:]
    # requests sent before the first reload was in force were logged in text
    after = after[next(i for i, x in enumerate(after) if x.startswith("{")):]
    # at warn no request line was written: not for the answered request, not for the
    # failed one (its warn lines were)
    assert not [x for x in after if '"code":"request"' in x and
                (quiet.headers["x-request-id"] in x or failed.headers["x-request-id"] in x)]
    assert all(json.loads(x)["lvl"] in ("warn", "error") for x in
               after[:next(i for i, x in enumerate(after) if '"reloaded"' in x)])
    # from the reload on, every line is JSON
    for x in after:
        json.loads(x)
