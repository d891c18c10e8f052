# SPDX-License-Identifier: MIT
# tests/e2e/test_hostile_http.py - issue 8: what a hostile but fair client can send
# over raw sockets. Request-smuggling shapes and every framing ambiguity get 400
# gw.http.bad_request and a closed connection, and nothing reaches the upstream; a
# request without a valid key gets its 401 on the head, before its body is read, so
# clients without a key cost no memory; bodies buffered at once are bounded
# server-wide (503 gw.busy); a body has one deadline (408); connections are capped
# (server.max_connections) and an exhausted descriptor table neither spins gwd nor
# takes the control port down.

import http.client
import os
import re
import socket
import threading
import time

import pytest

from gwtest import (ALICE_KEY, CONTROL_TOKEN, REQ_ID_RE, WAIT_TIMEOUT, Resp, base_env, chat_body,
                    config, http_request, provider, sha256_hex, wait_until)

KEY_HDR = b"Authorization: Bearer " + ALICE_KEY.encode() + b"\r\n"


def read_response(s):
    """The one HTTP response on socket <s> as a Resp."""
    resp = http.client.HTTPResponse(s, method="POST")
    resp.begin()
    body = resp.read()
    return Resp(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)


def closed_by_peer(s, timeout=WAIT_TIMEOUT):
    """True once gwd has closed <s> (EOF or reset) before <timeout>."""
    s.settimeout(timeout)
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def exchange(port, raw, timeout=WAIT_TIMEOUT):
    """Sends <raw> bytes, reads one response; returns (Resp, closed after it)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        try:
            s.sendall(raw)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before all of it was read
        r = read_response(s)
        return r, closed_by_peer(s)
    finally:
        s.close()


def assert_refusal(r, status, code):
    assert r.status == status, r
    assert r.headers.get("x-gw-code") == code, r.headers
    assert REQ_ID_RE.match(r.headers.get("x-request-id", "")), r.headers
    err = r.json()["error"]
    assert err["code"] == code and err["status"] == status, err
    assert err["message"]


def anon_kb(g):
    """gwd's anonymous resident memory (KiB), from /proc."""
    with open(f"/proc/{g.p.pid}/status") as f:
        return int(re.search(r"RssAnon:\s+(\d+)", f.read()).group(1))


def metric(g, code):
    r = http_request(g.control_port, "GET", "/metrics")
    m = re.search(r'gw_code_total\{code="' + re.escape(code) + r'"\} (\d+)', r.body.decode())
    return int(m.group(1)) if m else 0


def gauge(g, name):
    r = http_request(g.control_port, "GET", "/metrics")
    return int(re.search("^" + name + r" (\d+)$", r.body.decode(), re.M).group(1))


@pytest.fixture
def gw_one(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b, models=["gpt-test"])],
                   clients=[{"name": "alice", "key_sha256": sha256_hex(ALICE_KEY)}]))
    return g, b


BODY = chat_body()


def head(*lines, body=BODY, cl=True):
    h = b"POST /v1/chat/completions HTTP/1.1\r\n" + b"".join(x + b"\r\n" for x in lines)
    if cl:
        h += b"Content-Length: " + str(len(body)).encode() + b"\r\n"
    return h + b"\r\n" + body


# ---------------------------------------------------------------- 1. framing

SMUGGLING = {
    # a second length hidden behind a space before the colon
    "content-length-space": head(b"Host: gw", KEY_HDR.rstrip(),
                                 b"Content-Length : " + str(len(BODY) - 10).encode(),
                                 b"Content-Type: application/json"),
    "transfer-encoding-space": head(b"Host: gw", KEY_HDR.rstrip(),
                                    b"Transfer-Encoding : chunked"),
    "host-space": head(b"Host: gw", b"Host : evil.example", KEY_HDR.rstrip()),
    "authorization-space": head(b"Host: gw", KEY_HDR.rstrip(),
                                b"Authorization : Bearer someone-elses-key"),
    "tab-in-name": head(b"Host: gw", KEY_HDR.rstrip(), b"X-Foo\t: bar"),
    "no-host": head(KEY_HDR.rstrip()),
    "two-hosts": head(b"Host: gw", b"Host: other", KEY_HDR.rstrip()),
    "te-and-cl": head(b"Host: gw", KEY_HDR.rstrip(), b"Transfer-Encoding: chunked"),
    "te-not-chunked": head(b"Host: gw", KEY_HDR.rstrip(), b"Transfer-Encoding: gzip, chunked",
                           cl=False),
    "two-te": (b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n" + KEY_HDR +
               b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    "two-cl": head(b"Host: gw", KEY_HDR.rstrip(), b"Content-Length: 5"),
    "control-char-in-value": head(b"Host: gw", KEY_HDR.rstrip(), b"X-Foo: a\x01b"),
    "chunk-size-overflow": (b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n" + KEY_HDR +
                            b"Transfer-Encoding: chunked\r\n\r\n"
                            b"fffffffffffffffffff\r\n"),
    "te-http10": (b"POST /v1/chat/completions HTTP/1.0\r\nHost: gw\r\n" + KEY_HDR +
                  b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
}


@pytest.mark.parametrize("name", sorted(SMUGGLING))
def test_issue_8_ambiguous_framing_is_400_and_closed(gw_one, name):
    g, b = gw_one
    # the deadlines are far away: the refusal must come at once, not after a timeout
    r, closed = exchange(g.port, SMUGGLING[name], timeout=5)
    assert_refusal(r, 400, "gw.http.bad_request")
    assert r.headers.get("connection") == "close"
    assert closed, "gwd kept the connection open after a framing refusal"
    assert b.stats()["requests"] == 0


def test_issue_8_chunk_over_body_limit_is_413_at_once(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b, models=["gpt-test"])],
                   clients=[{"name": "alice", "key_sha256": sha256_hex(ALICE_KEY)}],
                   server={"max_body_mb": 1, "body_timeout_secs": 600, "idle_timeout_secs": 600}))
    raw = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n" + KEY_HDR +
           b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % (2 << 20) + b"{")
    r, closed = exchange(g.port, raw, timeout=5)
    assert_refusal(r, 413, "gw.body_too_large")
    assert closed
    assert b.stats()["requests"] == 0


def test_issue_8_headers_sent_upstream_are_rebuilt_from_parsed_pairs(gw_one):
    g, b = gw_one
    raw = head(b"Host: gw", KEY_HDR.rstrip(), b"X-Trace:   spaced value  \t",
               b"Content-Type: application/json")
    r, _ = exchange(g.port, raw)
    assert r.status == 200, r
    hdrs = b.last()["headers"]
    assert hdrs.get("x-trace") == "spaced value", hdrs
    assert "authorization" in hdrs and ALICE_KEY not in hdrs["authorization"]


def test_issue_8_http10_without_host_is_served(gw_one):
    g, b = gw_one
    raw = (b"POST /v1/chat/completions HTTP/1.0\r\n" + KEY_HDR +
           b"Content-Length: " + str(len(BODY)).encode() + b"\r\n\r\n" + BODY)
    r, closed = exchange(g.port, raw)
    assert r.status == 200, r
    assert closed  # HTTP/1.0: one request per connection


def test_http10_stream_is_not_chunked_and_ends_with_the_connection(gw_one):
    g, b = gw_one
    body = chat_body(stream=True)
    s = socket.create_connection(("127.0.0.1", g.port), timeout=WAIT_TIMEOUT)
    try:
        s.sendall(b"POST /v1/chat/completions HTTP/1.0\r\n" + KEY_HDR +
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        got = b""
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
    finally:
        s.close()
    head, _, rest = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    assert b"transfer-encoding" not in head.lower(), head
    assert rest.startswith(b"data: ") and rest.rstrip().endswith(b"data: [DONE]"), rest[-200:]


# ---------------------------------------------------------------- 2. auth on the head

@pytest.mark.parametrize("key", [None, b"Bearer wrong-key"], ids=["missing", "invalid"])
def test_issue_8_no_valid_key_is_401_before_the_body(gw_one, key):
    g, b = gw_one
    s = socket.create_connection(("127.0.0.1", g.port), timeout=WAIT_TIMEOUT)
    try:
        # a large body is declared and not one byte of it is sent: the 401 must come anyway
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n" +
                  (b"Authorization: " + key + b"\r\n" if key else b"") +
                  b"Content-Length: 30000000\r\n\r\n")
        r = read_response(s)
        code = "gw.auth.missing_key" if key is None else "gw.auth.invalid_key"
        assert_refusal(r, 401, code)
        assert r.headers.get("connection") == "close"
        assert closed_by_peer(s)
    finally:
        s.close()
    assert b.stats()["requests"] == 0


def test_issue_8_expect_100_continue_is_not_granted_without_a_key(gw_one):
    g, b = gw_one
    s = socket.create_connection(("127.0.0.1", g.port), timeout=WAIT_TIMEOUT)
    try:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"
                  b"Expect: 100-continue\r\nContent-Length: 1000\r\n\r\n")
        first = s.recv(12)
        assert first == b"HTTP/1.1 401", first
    finally:
        s.close()


def _send_big_without_key(port, size, results, i):
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"
                  b"Content-Type: application/json\r\n"
                  b"Content-Length: " + str(size).encode() + b"\r\n\r\n")
        chunk = b"x" * (1 << 20)
        sent = 0
        try:
            while sent < size:
                s.sendall(chunk[:min(len(chunk), size - sent)])
                sent += min(len(chunk), size - sent)
        except (BrokenPipeError, ConnectionResetError):
            pass
        results[i] = read_response(s)
    except Exception as e:  # noqa: BLE001 - reported by the test
        results[i] = e
    finally:
        s.close()


def test_issue_8_clients_without_a_key_cost_no_body_memory(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b, models=["gpt-test"])],
                   clients=[{"name": "alice", "key_sha256": sha256_hex(ALICE_KEY)}],
                   server={"max_body_mb": 32}),
            # ASan keeps freed memory in quarantine (256 MiB by default): it would count
            # the discarded bytes as held. Without ASan this option does nothing.
            env={**base_env(), "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "detect_leaks=1")
                 + ":quarantine_size_mb=4"})
    before = anon_kb(g)
    n, size = 20, 30 << 20  # 20 bodies of 30 MiB: 600 MiB if they were buffered
    results = [None] * n
    peak = [before]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], anon_kb(g))
            done.wait(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    threads = [threading.Thread(target=_send_big_without_key, args=(g.port, size, results, i))
               for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    done.set()
    sampler.join()
    for r in results:
        assert isinstance(r, Resp), r  # the client read its 401, not a reset
        assert_refusal(r, 401, "gw.auth.missing_key")
    grown_mb = (peak[0] - before) / 1024
    assert grown_mb < 32, f"gwd's anonymous memory grew by {grown_mb:.0f} MiB"
    assert b.stats()["requests"] == 0


# ---------------------------------------------------------------- 2. the body budget

def _open_partial(port, total, sent_part):
    s = socket.create_connection(("127.0.0.1", port), timeout=WAIT_TIMEOUT)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n" + KEY_HDR +
              b"Content-Type: application/json\r\n"
              b"Content-Length: " + str(total).encode() + b"\r\n\r\n" + sent_part)
    return s


def test_issue_8_buffered_bodies_are_bounded_server_wide(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b, models=["gpt-test"])],
                   clients=[{"name": "alice", "key_sha256": sha256_hex(ALICE_KEY)}],
                   server={"max_body_mb": 1, "max_buffered_body_mb": 2}))
    pad = "y" * (900 * 1024)
    body = chat_body(text=pad)
    half = len(body) // 2
    held = [_open_partial(g.port, len(body), body[:half]) for _ in range(2)]
    try:
        # two bodies of 0.9 MiB are being read (their whole length is reserved at the
        # head) ...
        wait_until(lambda: gauge(g, "gw_request_body_bytes") == 2 * len(body),
                   what="both declared bodies counted in gw_request_body_bytes")
        # ... so a third does not fit in 2 MiB
        third_body = chat_body(text="z" * (300 * 1024))
        r, closed = exchange(g.port, head(b"Host: gw", KEY_HDR.rstrip(), body=third_body))
        assert_refusal(r, 503, "gw.busy")
        assert r.headers.get("retry-after") == "1"
        assert closed
        # a chunked body is counted as it grows
        raw = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n" + KEY_HDR +
               b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % len(third_body) +
               third_body + b"\r\n0\r\n\r\n")
        r, closed = exchange(g.port, raw)
        assert_refusal(r, 503, "gw.busy")
        assert b.stats()["requests"] == 0
        # the held bodies complete and are answered; their memory is given back
        for s in held:
            s.sendall(body[half:])
            assert read_response(s).status == 200
    finally:
        for s in held:
            s.close()
    wait_until(lambda: gauge(g, "gw_request_body_bytes") == 0,
               what="every body's bytes given back")
    r, _ = exchange(g.port, head(b"Host: gw", KEY_HDR.rstrip(), body=third_body))
    assert r.status == 200, r


# ---------------------------------------------------------------- 3. deadlines, connections

def test_issue_8_trickled_body_is_cut_at_body_timeout(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b, models=["gpt-test"])],
                   clients=[{"name": "alice", "key_sha256": sha256_hex(ALICE_KEY)}],
                   server={"body_timeout_secs": 2, "idle_timeout_secs": 60}))
    s = _open_partial(g.port, len(BODY), b"")
    try:
        s.settimeout(0.3)
        got = b""
        deadline = time.monotonic() + WAIT_TIMEOUT
        i = 0
        # one byte every 0.3 s: each byte arrives well within the idle timeout, the whole
        # body never within body_timeout_secs
        while time.monotonic() < deadline and b"\r\n\r\n" not in got:
            try:
                s.sendall(BODY[i:i + 1])
                i += 1
            except (BrokenPipeError, ConnectionResetError):
                pass
            try:
                d = s.recv(4096)
                if not d:
                    break
                got += d
            except socket.timeout:
                pass
        assert got.startswith(b"HTTP/1.1 408"), got
        assert b"gw.http.request_timeout" in got
        assert i < len(BODY)
    finally:
        s.close()
    assert b.stats()["requests"] == 0


def _held_connection(port):
    """A keep-alive connection gwd has accepted (it answered /healthz on it)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_TIMEOUT)
    c.request("GET", "/healthz")
    r = c.getresponse()
    r.read()
    assert r.status == 200
    return c


def test_issue_8_connections_over_max_connections_are_closed_and_counted(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b, models=["gpt-test"])],
                   clients=[{"name": "alice", "key_sha256": sha256_hex(ALICE_KEY)}],
                   server={"max_connections": 5, "workers": 1}))
    held = [_held_connection(g.port) for _ in range(5)]
    try:
        s = socket.create_connection(("127.0.0.1", g.port), timeout=WAIT_TIMEOUT)
        try:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
            assert closed_by_peer(s)
        finally:
            s.close()
        wait_until(lambda: metric(g, "gw.http.too_many_connections") >= 1,
                   what="the refused connection counted in /metrics")
        g.err.wait_for(r"code=gw\.http\.too_many_connections")
    finally:
        held.pop().close()
    # one slot is free again: a new connection is served
    def served():
        try:
            c = _held_connection(g.port)
            c.close()
            return True
        except (ConnectionError, http.client.HTTPException, OSError):
            return None

    wait_until(served, what="a connection accepted after one closed")
    for c in held:
        c.close()


def test_issue_8_default_max_connections_follows_the_descriptor_limit(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b, models=["gpt-test"])],
                   clients=[{"name": "alice", "key_sha256": sha256_hex(ALICE_KEY)}],
                   server={"workers": 1}),
            wrap=["prlimit", "--nofile=256:256", "--"])
    m = g.err.find(r"max_connections=(\d+) \(descriptor limit 256\)")
    assert m, g.log()
    assert int(m.group(1)) == (256 - 64 - 8) // 2


def test_issue_8_descriptor_exhaustion_neither_spins_nor_takes_control_down(tmp_path, bench,
                                                                            gwd):
    b = bench()
    # max_connections well above what 128 descriptors allow: accept() itself runs out
    g = gwd(config(tmp_path, [provider("up", b, models=["gpt-test"])],
                   clients=[{"name": "alice", "key_sha256": sha256_hex(ALICE_KEY)}],
                   server={"max_connections": 10000, "workers": 1}),
            wrap=["prlimit", "--nofile=128:128", "--"])
    socks = []
    try:
        for _ in range(200):
            socks.append(socket.create_connection(("127.0.0.1", g.port), timeout=WAIT_TIMEOUT))
        g.err.wait_for(r"code=accept_error .*Too many open files")
        cpu0 = _cpu_ticks(g)
        lines0 = g.err.count()
        t0 = time.monotonic()
        # the control port answers while the data port is out of descriptors
        for _ in range(5):
            r = http_request(g.control_port, "GET", "/healthz")
            assert r.status == 200, r
            r = http_request(g.control_port, "GET", "/control/v1/overview",
                             headers={"Authorization": "Bearer " + CONTROL_TOKEN})
            assert r.status == 200, r
        # an observation window: pressure held, lines and CPU counted over it
        time.sleep(3)
        secs = time.monotonic() - t0
        grown = g.err.count() - lines0
        assert grown <= 3 * secs + 3, f"{grown} log lines in {secs:.1f} s\n{g.log()}"
        cpu = (_cpu_ticks(g) - cpu0) / _clk_tck()
        assert cpu < 0.5 * secs, f"gwd used {cpu:.2f} s of CPU in {secs:.1f} s: spinning"
        assert re.search(r"more such lines since the last one", g.err.text())
    finally:
        for s in socks:
            s.close()

    def served():
        try:
            r = http_request(g.port, "GET", "/healthz")
            return r.status == 200 or None
        except OSError:
            return None

    wait_until(served, what="the data port serving again once descriptors are free")


def _clk_tck():
    return os.sysconf("SC_CLK_TCK")


def _cpu_ticks(g):
    with open(f"/proc/{g.p.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime
