# SPDX-License-Identifier: MIT
# tests/e2e/test_bench_tls.py - `gwbench upstream --tls-cert --tls-key [--tls-alpn]`
# (docs/gwbench.md, TLS): every connection is TLS with the test certificate; ALPN h2
# goes to the bench's HTTP/2 server, http/1.1 or nothing to HTTP/1.1. First the bench
# alone (a Python ssl client without ALPN, curl --http2 and --http1.1, a slow reader of
# a large stream, a plaintext client, the flags' checks), then gwd's https upstream path
# against it (providers[].http2, docs/config.md "HTTP/2 to upstreams"): auto takes h2,
# off keeps HTTP/1.1, with the answers of the same bench on plain TCP, and faults before
# and after content fail over or end the stream as on h2c. What ALPN gwd offers in each
# mode (on with a bench restricted to http/1.1 included) is tests/e2e/test_h2_upstream.py's.
# The CA and the certificate for localhost/127.0.0.1 are made in the test's folder with
# the openssl CLI (test_egress.make_pki).

import json
import socket
import subprocess

import pytest

from gwtest import (START_TIMEOUT, WAIT_TIMEOUT, base_env, binary, chat_body, config, content_of,
                    provider, sse_events)
from test_egress import make_pki
from test_h2_upstream import https_provider, normalized, run_concurrently


@pytest.fixture
def pki(tmp_path):
    make_pki(tmp_path)
    return tmp_path


def curl(b, *args):
    """curl against bench <b> with its CA; returns (HTTP version, body)."""
    p = subprocess.run(["curl", "-sS", "-N", "--cacert", str(b.ca), "-w", "\n%{http_version}",
                        *args], capture_output=True, timeout=WAIT_TIMEOUT)
    assert p.returncode == 0, p.stderr.decode()
    body, _, version = p.stdout.rpartition(b"\n")
    return version.decode(), body


# ---------------------------------------------------------------- the bench alone

@pytest.mark.parametrize("stream", [False, True])
def test_a_python_ssl_client_without_alpn_gets_http1(tls_bench, stream):
    b = tls_bench("--chunks", 3)

    r = b.request("POST", "/v1/chat/completions", chat_body(stream=stream))

    assert r.status == 200, r
    if stream:
        evs = sse_events(r.body)
        assert evs[-1] == "[DONE]"
        assert "".join(content_of(e) for e in evs) == "hello hello hello "
    else:
        assert r.json()["choices"][0]["message"]["content"] == "hello hello hello "
    s = b.stats()
    # the chat request's connection and the stats one's: neither offered ALPN
    assert s["tls_connections"] == 2 and s["tls_alpn_none"] == 2, s
    assert s["tls_alpn_h2"] == 0 and s["h2_streams"] == 0 and s["requests"] == 1, s
    assert s["connections_total"] == 2, s


@pytest.mark.parametrize("flag,version,alpn", [("--http2", "2", "tls_alpn_h2"),
                                               ("--http1.1", "1.1", "tls_alpn_http1")])
@pytest.mark.parametrize("stream", [False, True])
def test_curl_gets_the_same_answer_over_h2_and_http1(tls_bench, bench, flag, version, alpn,
                                                     stream):
    b = tls_bench("--chunks", 3, "--interval-ms", 20)
    plain = bench("--chunks", 3, "--interval-ms", 20)
    body = chat_body(stream=stream)

    v, got = curl(b, flag, f"{b.url}/v1/chat/completions", "-H",
                  "Content-Type: application/json", "-d", body)
    pv, want = curl(b, "--http1.1", f"{plain.url}/v1/chat/completions", "-H",
                    "Content-Type: application/json", "-d", body)

    assert v == version and pv == "1.1"
    assert normalized(got) == normalized(want)
    s = b.stats()
    assert s[alpn] == 1 and s["tls_handshake_failures"] == 0, s
    assert s["h2_streams"] == (1 if version == "2" else 0), s
    assert s["requests"] == 1 and (s["streams_completed"] == 1) == stream, s


@pytest.mark.parametrize("flag", ["--http2", "--http1.1"])
def test_a_large_answer_crosses_the_relay_whole(tls_bench, bench, flag):
    # 16 MB of stream read at 16 MB/s, more than the kernel's socket buffers take: the
    # relay stops reading the bench side when 256 KB wait for the client, and resumes as
    # they go out
    args = ("--chunks", 16000, "--text", "x" * 1000)
    b, plain = tls_bench(*args), bench(*args)
    body = chat_body(stream=True)

    _, got = curl(b, flag, "--limit-rate", "16M", f"{b.url}/v1/chat/completions", "-d", body)
    _, want = curl(b, f"{plain.url}/v1/chat/completions", "-d", body)

    assert len(want) > 16_000_000
    assert normalized(got) == normalized(want)


def test_tls_alpn_restricts_what_alpn_chooses(tls_bench):
    b = tls_bench("--tls-alpn", "http/1.1")

    v, _ = curl(b, "--http2", f"{b.url}/v1/models")
    r = b.request("GET", "/v1/models", alpn=["h2"])  # nothing in common: HTTP/1.1

    assert v == "1.1"
    assert r.status == 200, r
    s = b.stats()
    assert s["tls_alpn_http1"] == 1 and s["tls_alpn_none"] == 2, s  # curl, then ours, stats
    assert s["tls_alpn_h2"] == 0 and s["h2_connections"] == 0, s


def test_a_plaintext_client_gets_no_answer(tls_bench):
    b = tls_bench()
    s = socket.create_connection(("127.0.0.1", b.port), timeout=WAIT_TIMEOUT)
    s.sendall(b"GET /_bench/stats HTTP/1.1\r\nHost: x\r\n\r\n")
    got = b""
    try:
        while (d := s.recv(4096)):
            got += d
    except ConnectionResetError:
        pass
    s.close()

    assert not got.startswith(b"HTTP/"), got  # a TLS alert at most, then the close
    st = b.stats()
    assert st["tls_handshake_failures"] == 1 and st["requests"] == 0, st


@pytest.mark.parametrize("args,says", [
    (["--tls-cert", "{d}/srv.pem"], "go together"),
    (["--tls-alpn", "h2"], "go together"),
    (["--tls-cert", "{d}/srv.pem", "--tls-key", "{d}/srv.key", "--tls-alpn", "h3"], "--tls-alpn"),
    (["--tls-cert", "{d}/srv.pem", "--tls-key", "{d}/srv.key", "--tls-alpn", "h2,"],
     "--tls-alpn"),
    (["--tls-cert", "{d}/none.pem", "--tls-key", "{d}/srv.key"], "certificate chain"),
    (["--tls-cert", "{d}/srv.pem", "--tls-key", "{d}/other.key"], "private key"),
])
def test_bad_tls_flags_exit_2(pki, args, says):
    argv = [binary("gwbench"), "upstream", "--listen", "127.0.0.1:0",
            *(a.format(d=pki) for a in args)]
    p = subprocess.run(argv, env=base_env(), stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=START_TIMEOUT)

    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert says in p.stderr.decode(), p.stderr.decode()


# ---------------------------------------------------------------- gwd's https upstreams

@pytest.mark.parametrize("stream", [False, True])
def test_auto_reaches_the_bench_over_h2_with_plain_tcps_answers(tmp_path, bench, tls_bench,
                                                                  gwd, stream):
    b = tls_bench("--chunks", 3, "--ttft-ms", 200)
    plain = bench("--chunks", 3, "--ttft-ms", 200)
    g = gwd(config(tmp_path, [https_provider(b, http2="auto")], server={"workers": 1}))
    gp = gwd(config(tmp_path, [provider("a", plain)], server={"workers": 1}), name="plain.yaml")

    rs = run_concurrently(4, lambda i: g.chat(chat_body(stream=stream)))
    want = gp.chat(chat_body(stream=stream))

    assert all(r is not None and r.status == 200 for r in rs), rs
    assert want.status == 200, want
    for r in rs:
        assert normalized(r.body) == normalized(want.body)
    if stream:
        assert sse_events(rs[0].body)[-1] == "[DONE]"
    s = b.stats()
    # one TLS connection chose h2 and carried the four requests as streams
    assert s["tls_alpn_h2"] == 1 and s["h2_connections"] == 1, s
    assert s["h2_streams"] == 4 and s["requests"] == 4, s


@pytest.mark.parametrize("stream", [False, True])
def test_off_reaches_the_bench_over_http1_with_plain_tcps_answers(tmp_path, bench, tls_bench,
                                                                    gwd, stream):
    b = tls_bench("--chunks", 3)
    plain = bench("--chunks", 3)
    g = gwd(config(tmp_path, [https_provider(b, http2="off")]))
    gp = gwd(config(tmp_path, [provider("a", plain)]), name="plain.yaml")

    r = g.chat(chat_body(stream=stream))
    want = gp.chat(chat_body(stream=stream))

    assert r.status == 200 and want.status == 200, (r, want)
    assert normalized(r.body) == normalized(want.body)
    s = b.stats()
    assert s["tls_alpn_http1"] >= 1 and s["tls_alpn_h2"] == 0, s
    assert s["h2_connections"] == 0 and s["h2_streams"] == 0 and s["requests"] == 1, s


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_a_drop_after_content_over_tls_ends_the_stream_with_the_error_chunk(tmp_path, tls_bench,
                                                                            bench, gwd, mode):
    a = tls_bench("--chunks", 6, "--fault", "drop-mid", "--drop-after", 2)
    b = bench()
    g = gwd(config(tmp_path, [https_provider(a, http2=mode), provider("b", b)]))

    r = g.chat(chat_body(stream=True))

    assert r.status == 200, r
    evs = sse_events(r.body)
    assert "[DONE]" not in evs, evs
    assert [content_of(e) for e in evs if content_of(e)] == ["hello ", "hello "], evs
    assert json.loads(evs[-1])["error"]["code"] == "gw.upstream.dropped", evs
    assert b.stats()["requests"] == 0  # content was relayed: no failover after it
    assert a.stats()["h2_streams"] == (1 if mode == "auto" else 0)


@pytest.mark.parametrize("fault", ["goaway", "drop-before"])
def test_a_failure_before_content_over_tls_fails_over(tmp_path, tls_bench, bench, gwd, fault):
    a = tls_bench("--fault", fault)
    b = bench("--chunks", 2)
    g = gwd(config(tmp_path, [https_provider(a), provider("b", b)]))

    r = g.chat(chat_body(stream=True))

    assert r.status == 200, r
    assert "".join(content_of(e) for e in sse_events(r.body)) == "hello hello "
    row = g.wait_row(r.headers["x-request-id"])
    assert row["attempts"][0]["code"] == "gw.upstream.dropped", row["attempts"]
    s = a.stats()
    assert s["tls_alpn_h2"] >= 1 and s["h2_goaways"] == (1 if fault == "goaway" else 0), s
    assert b.stats()["requests"] == 1


def test_on_reaches_a_bench_restricted_to_h2(tmp_path, tls_bench, gwd):
    b = tls_bench("--tls-alpn", "h2")
    g = gwd(config(tmp_path, [https_provider(b, http2="on")]))

    r = g.chat(chat_body(stream=True))

    assert r.status == 200, r
    assert sse_events(r.body)[-1] == "[DONE]"
    s = b.stats()
    assert s["tls_alpn_h2"] == 1 and s["h2_streams"] == 1, s
