# SPDX-License-Identifier: MIT
# tests/e2e/test_h2_upstream.py - HTTP/2 to upstreams (providers[].http2): gwd speaks h2c
# with prior knowledge to a gwbench upstream (`http2: on` on an http:// base_url); the
# answers equal HTTP/1.1's, many requests share one connection per worker, the
# upstream's SETTINGS_MAX_CONCURRENT_STREAMS holds, a GOAWAY or a reset before content
# fails over, a reset after content ends the client's stream with the error chunk, and
# `http2: off` (and auto on http://) keeps HTTP/1.1. Over https (gwbench with the test
# CA's certificate, --tls-cert), ALPN decides: auto takes h2 when the server chooses it
# and HTTP/1.1 otherwise, off offers only http/1.1, on only h2.

import json
import re
import subprocess
import threading
import time

import pytest

from gwtest import (base_env, binary, chat_body, config, content_of, provider, sse_events,
                    write_config)
from test_egress import ConnectProxy


def normalized(body):
    """An answer without what differs from run to run (ids, timestamps)."""
    text = body.decode() if isinstance(body, bytes) else body
    text = re.sub(r'"created":\d+', '"created":0', text)
    return re.sub(r'"(id|created_at)":"[^"]*"', r'"\1":""', text)


def one(tmp_path, b, workers=2, **prov):
    return config(tmp_path, [provider("a", b, **prov)], server={"workers": workers})


@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [False, True])
def test_h2c_answers_equal_http1(tmp_path, bench, gwd, dialect, stream):
    h1 = bench("--chunks", 3)
    h2 = bench("--chunks", 3)
    g1 = gwd(one(tmp_path, h1, dialect=dialect), name="h1.yaml")
    g2 = gwd(one(tmp_path, h2, dialect=dialect, http2="on"), name="h2.yaml")

    r1 = g1.chat(chat_body(stream=stream))
    r2 = g2.chat(chat_body(stream=stream))

    assert r1.status == 200 and r2.status == 200, (r1, r2)
    assert normalized(r2.body) == normalized(r1.body)
    if stream:
        assert sse_events(r2.body)[-1] == "[DONE]"
    s1, s2 = h1.stats(), h2.stats()
    assert s1["h2_connections"] == 0 and s1["h2_streams"] == 0
    assert s2["h2_connections"] == 1 and s2["h2_streams"] == 1
    # the upstream saw the same request (path, body, the headers gwd sends)
    l1, l2 = h1.last(), h2.last()
    assert l2["path"] == l1["path"]
    assert l2["body"] == l1["body"]
    for h in ("authorization", "x-api-key", "content-type", "anthropic-version"):
        assert l2["headers"].get(h) == l1["headers"].get(h), h


def test_a_large_request_body_crosses_the_flow_control_windows(tmp_path, bench, gwd):
    b = bench("--chunks", 1)
    g = gwd(one(tmp_path, b, http2="on"))
    text = "y" * (700 * 1024)  # beyond the 64 KB initial stream and connection windows

    r = g.chat(chat_body(text=text))

    assert r.status == 200, r
    assert text in b.last_body_bytes().decode()
    assert b.stats()["h2_streams"] == 1


def run_concurrently(n, fn):
    out = [None] * n

    def one_call(i):
        out[i] = fn(i)

    ts = [threading.Thread(target=one_call, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    return out


def test_many_requests_share_one_connection_per_worker(tmp_path, bench, gwd):
    b = bench("--chunks", 2, "--ttft-ms", 300)
    g = gwd(one(tmp_path, b, workers=2, http2="on"))

    rs = run_concurrently(50, lambda i: g.chat(chat_body(stream=i % 2 == 1)))

    assert all(r is not None and r.status == 200 for r in rs), rs
    s = b.stats()
    assert s["h2_streams"] == 50, s
    assert 1 <= s["h2_connections"] <= 2, s  # one per worker at most
    # every connection the bench accepted was one of those, or this stats request's
    assert s["connections_total"] == s["h2_connections"] + 1, s
    assert s["h2_max_concurrent_streams"] > 1, s  # multiplexed, not one at a time


def test_settings_max_concurrent_streams_is_respected(tmp_path, bench, gwd):
    b = bench("--chunks", 1, "--ttft-ms", 200, "--h2-max-streams", 3)
    g = gwd(one(tmp_path, b, workers=1, http2="on"))

    rs = run_concurrently(12, lambda i: g.chat(chat_body()))

    assert all(r is not None and r.status == 200 for r in rs), rs
    s = b.stats()
    assert s["h2_streams"] == 12, s
    assert s["h2_connections"] == 1, s  # waited for a stream, no second connection
    assert s["h2_max_concurrent_streams"] == 3, s


def _rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_slow_client_holds_back_the_h2_stream(tmp_path, bench, gwd):
    # As test_lifecycle's slow-client test, over h2c: a paused exchange keeps DATA in its
    # stream window (the window is given back only as the client reads), so the
    # upstream holds the rest and gwd stays small; then everything arrives in order.
    chunks, text = 3000, "x" * 20000  # ~60 MB of events
    b = bench("--chunks", chunks, "--text", text)
    g = gwd(one(tmp_path, b, http2="on"))
    rss0 = _rss_kb(g.p.pid)

    s = g.stream(chat_body(stream=True))
    assert s.status == 200
    s.next_content()
    b.wait_stat(lambda x: x["streams_completed"] == 1, "the upstream to send all it has")
    # An observation window for a negative property (nothing to wait for).
    deadline = time.monotonic() + 1.5
    peak = rss0
    while time.monotonic() < deadline:
        peak = max(peak, _rss_kb(g.p.pid))
        time.sleep(0.1)
    assert peak - rss0 < 24 * 1024, f"gwd grew by {peak - rss0} KB while the client stalled"
    rest = s.resp.read()
    assert rest.rstrip().endswith(b"data: [DONE]")
    assert rest.count(b'"content":"' + text.encode() + b'"') == chunks - 1
    assert b.stats()["h2_streams"] == 1


def two(tmp_path, a, b, **prov_a):
    return config(tmp_path, [provider("a", a, **prov_a), provider("b", b)])


def assert_failed_then_ok(row):
    assert row["status"] == 200 and row["upstream"] == "b", row
    assert [x["outcome"] for x in row["attempts"]] == ["failed", "ok"], row["attempts"]


@pytest.mark.parametrize("stream", [False, True])
def test_goaway_before_content_fails_over(tmp_path, bench, gwd, stream):
    a = bench("--fault", "goaway")
    b = bench("--chunks", 2)
    g = gwd(two(tmp_path, a, b, http2="on"))

    r = g.chat(chat_body(stream=stream))

    assert r.status == 200, r
    if stream:
        evs = sse_events(r.body)
        assert "".join(content_of(e) for e in evs) == "hello hello "
        assert evs[-1] == "[DONE]"
    assert a.stats()["h2_goaways"] == 1
    assert b.stats()["requests"] == 1
    row = g.wait_row(r.headers["x-request-id"])
    assert_failed_then_ok(row)
    assert row["attempts"][0]["code"] == "gw.upstream.dropped", row["attempts"]


def test_after_goaway_new_requests_use_a_new_connection(tmp_path, bench, gwd):
    a = bench("--chunks", 1)
    g = gwd(one(tmp_path, a, workers=1, http2="on"))  # both requests on one pool

    r = g.chat(chat_body(), headers={"x-bench-fault": "goaway"})
    assert r.status == 502 and r.headers.get("x-gw-code") == "gw.upstream.failed", r
    row = g.wait_row(r.headers["x-request-id"])
    assert row["attempts"][0]["code"] == "gw.upstream.dropped", row["attempts"]
    r = g.chat(chat_body())
    assert r.status == 200, r
    s = a.stats()
    assert s["h2_goaways"] == 1, s
    # the answered request came on a connection opened after the GOAWAY
    assert s["requests"] == 1 and s["h2_streams"] == 2, s
    assert s["h2_connections"] == 2, s


def test_goaway_lets_earlier_streams_finish(tmp_path, bench, gwd):
    a = bench("--chunks", 3, "--interval-ms", 100)
    g = gwd(one(tmp_path, a, workers=1, http2="on"))
    s1 = g.stream(chat_body(stream=True))  # stream 1, running
    first, _ = s1.next_content()

    # stream 3 gets GOAWAY with last_stream_id 1: refused, while stream 1 goes on
    r2 = g.chat(chat_body(), headers={"x-bench-fault": "goaway"})
    assert r2.status == 502, r2
    rest = s1.rest()
    assert first + "".join(content_of(e) for e in rest) == "hello " * 3
    assert rest[-1] == "[DONE]"
    r3 = g.chat(chat_body())
    assert r3.status == 200, r3
    st = a.stats()
    assert st["h2_goaways"] == 1 and st["h2_connections"] == 2, st
    assert st["streams_completed"] == 1, st


def test_client_gone_resets_only_its_stream(tmp_path, bench, gwd):
    a = bench("--chunks", 20, "--interval-ms", 50)
    g = gwd(one(tmp_path, a, workers=1, http2="on"))
    s1 = g.stream(chat_body(stream=True))
    s1.next_content()
    s2 = g.stream(chat_body(stream=True))
    c2, _ = s2.next_content()

    s1.close()
    a.wait_stat(lambda x: x["streams_aborted"] == 1, "the upstream to see stream 1 reset")
    rest = s2.rest()
    assert c2 + "".join(content_of(e) for e in rest) == "hello " * 20
    assert rest[-1] == "[DONE]"
    st = a.stats()
    assert st["h2_connections"] == 1 and st["h2_streams"] == 2, st


def test_reset_before_content_fails_over(tmp_path, bench, gwd):
    a = bench("--fault", "drop-before")
    b = bench()
    g = gwd(two(tmp_path, a, b, http2="on"))

    r = g.chat(chat_body(stream=True))

    assert r.status == 200, r
    assert a.stats()["h2_streams"] == 1
    row = g.wait_row(r.headers["x-request-id"])
    assert_failed_then_ok(row)
    assert row["attempts"][0]["code"] == "gw.upstream.dropped", row["attempts"]


def test_reset_after_content_ends_stream_with_error_chunk(tmp_path, bench, gwd):
    a = bench("--chunks", 6, "--fault", "drop-mid", "--drop-after", 2)
    b = bench()
    g = gwd(two(tmp_path, a, b, http2="on"))

    r = g.chat(chat_body(stream=True))

    assert r.status == 200, r
    assert not r.incomplete, r
    evs = sse_events(r.body)
    assert "[DONE]" not in evs, evs
    assert [content_of(e) for e in evs if content_of(e)] == ["hello ", "hello "], evs
    err = json.loads(evs[-1])["error"]
    assert err["code"] == "gw.upstream.dropped", err
    assert b.stats()["requests"] == 0  # content was relayed: no failover after it
    assert a.stats()["h2_streams"] == 1


@pytest.mark.parametrize("mode", ["off", None], ids=["off", "auto-on-http"])
def test_http2_off_and_auto_on_http_keep_http1(tmp_path, bench, gwd, mode):
    b = bench("--chunks", 2)
    extra = {"http2": mode} if mode else {}
    g = gwd(one(tmp_path, b, **extra))

    for stream in (False, True):
        assert g.chat(chat_body(stream=stream)).status == 200
    s = b.stats()
    assert s["requests"] == 2
    assert s["h2_connections"] == 0 and s["h2_streams"] == 0, s


def test_check_refuses_a_bad_http2_value(tmp_path):
    bad = config(tmp_path, [provider("a", base_url="http://127.0.0.1:9", http2="yes")])
    p = subprocess.run([binary("gwd"), "--check", str(write_config(tmp_path, bad))],
                       env=base_env(), stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    out = (p.stdout + p.stderr).decode()
    assert p.returncode != 0, out
    assert "providers[0] (a).http2: yes" in out and "auto, on, off" in out, out
    good = config(tmp_path, [provider("a", base_url="http://127.0.0.1:9", http2="on")])
    p = subprocess.run([binary("gwd"), "--check", str(write_config(tmp_path, good, "ok.yaml"))],
                       env=base_env(), stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    assert p.returncode == 0, (p.stdout + p.stderr).decode()


# ---------------------------------------------------------------- https: ALPN
# gwbench with the test certificate (tls_bench: --tls-cert, docs/gwbench.md TLS), whose
# tls_alpn_* counters say what ALPN chose on each connection.

def chosen(b):
    """What ALPN chose on the connections of gwd to bench <b> (the test's own ones to it,
    stats requests that offer no ALPN, left out), sorted."""
    s = b.stats()
    return sorted(["h2"] * s["tls_alpn_h2"] + ["http/1.1"] * s["tls_alpn_http1"] +
                  ["none"] * (s["tls_alpn_none"] - b.own_connections))


def https_provider(b, **extra):
    return provider("a", base_url=b.url, ca_file=str(b.ca), **extra)


def test_auto_over_https_takes_h2_when_alpn_chooses_it(tmp_path, tls_bench, gwd):
    b = tls_bench("--chunks", 2, "--ttft-ms", 200)
    g = gwd(config(tmp_path, [https_provider(b)], server={"workers": 1}))

    rs = run_concurrently(10, lambda i: g.chat(chat_body(stream=i % 2 == 1)))

    assert all(r is not None and r.status == 200 for r in rs), rs
    assert sse_events(rs[1].body)[-1] == "[DONE]"
    assert chosen(b) == ["h2"]  # one TLS connection, h2: the others waited for it
    s = b.stats()
    assert s["h2_connections"] == 1 and s["h2_streams"] == 10, s


def test_auto_over_https_stays_http1_when_alpn_does_not_offer_h2(tmp_path, tls_bench, gwd):
    b = tls_bench("--chunks", 2, "--ttft-ms", 200, "--tls-alpn", "http/1.1")
    g = gwd(config(tmp_path, [https_provider(b)], server={"workers": 1}))

    rs = run_concurrently(6, lambda i: g.chat(chat_body(stream=i % 2 == 1)))

    assert all(r is not None and r.status == 200 for r in rs), rs
    c = chosen(b)
    assert c and set(c) == {"http/1.1"}, c
    s = b.stats()
    assert s["h2_connections"] == 0 and s["requests"] == 6, s


def test_off_over_https_offers_only_http1(tmp_path, tls_bench, gwd):
    b = tls_bench()  # ALPN h2 first, then http/1.1
    g = gwd(config(tmp_path, [https_provider(b, http2="off")]))

    assert g.chat(chat_body()).status == 200
    assert chosen(b) == ["http/1.1"]
    assert b.stats()["h2_connections"] == 0


def test_on_over_https_needs_h2_from_alpn(tmp_path, tls_bench, gwd):
    b = tls_bench("--tls-alpn", "http/1.1")
    g = gwd(config(tmp_path, [https_provider(b, http2="on")]))

    r = g.chat(chat_body())

    assert r.status == 502, r
    row = g.wait_row(r.headers["x-request-id"])
    assert row["attempts"][0]["code"] == "gw.upstream.protocol", row["attempts"]
    g.err.wait_for(r"code=gw\.upstream\.protocol .*ALPN did not choose h2")
    assert b.stats()["requests"] == 0
    assert chosen(b) == ["none"]  # gwd offered h2 only: nothing in common


def test_h2_through_a_connect_proxy(tmp_path, bench, tls_bench, gwd):
    # h2 inside the tunnel: ALPN h2 over https through a CONNECT proxy, then h2c (http://)
    t = tls_bench("--chunks", 2, "--ttft-ms", 100)
    b = bench("--chunks", 2, "--ttft-ms", 100)
    px = ConnectProxy()
    try:
        g = gwd(config(tmp_path, [
            provider("tls", base_url=f"https://127.0.0.1:{t.port}", ca_file=str(t.ca),
                     proxy=f"http://127.0.0.1:{px.port}", models=["m1"]),
            provider("h2c", b, http2="on", proxy=f"http://127.0.0.1:{px.port}",
                     models=["m2"])], server={"workers": 1}))

        rs = run_concurrently(8, lambda i: g.chat(chat_body(model=f"m{1 + i % 2}",
                                                            stream=i % 4 < 2)))

        assert all(r is not None and r.status == 200 for r in rs), rs
        assert chosen(t) == ["h2"]
        # one tunnel per upstream, every request a stream in it
        assert sorted(px.tunnels) == sorted([f"127.0.0.1:{t.port}", f"127.0.0.1:{b.port}"])
        for x in (t, b):
            s = x.stats()
            assert s["h2_connections"] == 1 and s["h2_streams"] == 4, s
    finally:
        px.close()
