# SPDX-License-Identifier: MIT
# tests/e2e/test_tls_listen.py - server.tls (issue 14 point 1): TLS for clients on the
# addresses of server.tls.listen beside the plain ones of server.listen (or on every
# server.listen address when tls has no listen), TLS 1.2 and 1.3 only, ALPN http/1.1,
# the certificate re-read on every reload (a broken one keeps the old and is reported
# with its code), `gwd --check` naming a bad pair, and the hostile cases: a client that
# never handshakes (closed at header_timeout_secs) and garbage instead of a ClientHello.
# Made here, in the test's folder, with the openssl CLI: a CA and two server
# certificates for localhost/127.0.0.1 it signed, with distinct serial numbers.

import json
import http.client
import re
import shutil
import signal
import socket
import ssl
import subprocess
import time

import pytest

from gwtest import (ALICE_KEY, CONTROL_TOKEN, WAIT_TIMEOUT, base_env, bearer, binary, chat_body,
                    config, control_post, http_request, provider, write_config)

SERIAL_A, SERIAL_B = "0A11CE", "0B0B00"
TLS_RE = re.compile(r"code=ready\b.*\btls=\[?([0-9a-fA-F.:]+?)\]?:(\d+)\b")


def make_pki(d):
    """ca.pem; srv-a.pem/srv-a.key (serial SERIAL_A) and srv-b.pem/srv-b.key (SERIAL_B),
    both for localhost and 127.0.0.1; server.pem/server.key start as a copy of srv-a."""
    def run(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True, timeout=60)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=gw tls test CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    (d / "srv.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                               "basicConstraints=CA:FALSE\n"
                               "extendedKeyUsage=serverAuth\n")
    for name, serial in (("srv-a", SERIAL_A), ("srv-b", SERIAL_B)):
        run("req", "-new", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", "/CN=localhost")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-set_serial", f"0x{serial}", "-out", f"{name}.pem", "-days", "2",
            "-extfile", "srv.ext")
    use_pair(d, "srv-a")


def use_pair(d, name):
    shutil.copy(d / f"{name}.pem", d / "server.pem")
    shutil.copy(d / f"{name}.key", d / "server.key")


@pytest.fixture
def pki(tmp_path):
    make_pki(tmp_path)
    return tmp_path


def tls_config(tmp_path, b, tls=None, **server):
    t = {"cert": "server.pem", "key": "server.key", "listen": ["127.0.0.1:0"]}
    t.update(tls or {})
    t = {k: v for k, v in t.items() if v is not None}
    return config(tmp_path, [provider("up", b)], server={"tls": t, **server})


def tls_port(g):
    return int(g.err.wait_for(TLS_RE).group(2))


def client_ctx(pki, **kw):
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    for k, v in kw.items():
        setattr(ctx, k, v)
    return ctx


def https(pki, port, **kw):
    return http.client.HTTPSConnection("localhost", port, timeout=WAIT_TIMEOUT,
                                       context=client_ctx(pki, **kw))


def serial_of(conn):
    return conn.sock.getpeercert()["serialNumber"]


def tls_exchange(pki, port, raw):
    """Sends <raw> on a new TLS connection and reads until gwd closes it; the end must
    be a close_notify (suppress_ragged_eofs off)."""
    got = b""
    ctx = client_ctx(pki)
    # Debian's Python sets OpenSSL's "ignore unexpected EOF": off, to see a ragged end.
    ctx.options &= ~getattr(ssl, "OP_IGNORE_UNEXPECTED_EOF", 0)
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_TIMEOUT) as s:
        with ctx.wrap_socket(s, server_hostname="localhost", suppress_ragged_eofs=False) as t:
            t.sendall(raw)
            while True:
                d = t.recv(65536)
                if not d:
                    return got
                got += d


def chat(conn, body=None):
    return http_request(None, "POST", "/v1/chat/completions",
                        chat_body() if body is None else body, bearer(ALICE_KEY), conn=conn)


# ---------------------------------------------------------------- serving

def test_chat_and_a_stream_through_https_beside_plain_http(tmp_path, pki, bench, gwd):
    g = gwd(tls_config(tmp_path, bench()))
    port = tls_port(g)
    assert port != g.port

    c = https(pki, port)
    r = chat(c)
    assert r.status == 200, r
    assert r.json()["choices"][0]["message"]["content"]
    assert c.sock.version() in ("TLSv1.2", "TLSv1.3")
    assert c.sock.selected_alpn_protocol() is None  # http.client offers no ALPN
    # The same connection streams next (keep-alive through TLS).
    c.request("POST", "/v1/chat/completions", body=chat_body(stream=True),
              headers={**bearer(ALICE_KEY), "Content-Type": "application/json"})
    resp = c.getresponse()
    assert resp.status == 200
    assert resp.getheader("transfer-encoding") == "chunked"
    body = resp.read().decode()
    events = [ln[6:] for ln in body.splitlines() if ln.startswith("data: ")]
    assert len(events) >= 3 and events[-1] == "[DONE]", body
    c.close()

    # Answers that end the connection are read whole, then TLS ends with close_notify
    # before TCP does (a ragged end would raise SSLEOFError here): a refusal made while
    # reading (a body over max_body_mb, lingering close), then Connection: close.
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " +
            ALICE_KEY.encode() + b"\r\nContent-Type: application/json\r\n")
    for req, status in ((head + b"Content-Length: %d\r\n\r\n" % (2 << 20), b"413"),
                        (head + b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" %
                         (len(chat_body()), chat_body()), b"200")):
        got = tls_exchange(pki, port, req)
        assert got.startswith(b"HTTP/1.1 " + status), got[:200]

    # Plain HTTP stays on server.listen, and plain bytes are no TLS there.
    assert g.chat().status == 200
    with pytest.raises(ssl.SSLError):
        chat(https(pki, g.port))

    # curl verifies the chain against the test CA and speaks what ALPN chose: HTTP/1.1
    # when asked for it, else HTTP/2 (net/http2.c over TLS), the same answer either way.
    for flag, proto in (("--http1.1", "http/1.1"), ("--http2", "h2")):
        p = subprocess.run(["curl", "-sS", "-v", flag, "--cacert", str(pki / "ca.pem"),
                            "-H", f"Authorization: Bearer {ALICE_KEY}",
                            "-H", "Content-Type: application/json", "--data-binary",
                            chat_body().decode(),
                            f"https://localhost:{port}/v1/chat/completions"],
                           capture_output=True, timeout=30)
        err = p.stderr.decode()
        assert p.returncode == 0, err
        assert (f"ALPN: server accepted {proto}" in err
                or f"ALPN, server accepted to use {proto}" in err), err
        assert json.loads(p.stdout)["choices"][0]["message"]["content"], p.stdout
        # and a stream on the same protocol, whole to its [DONE]
        p = subprocess.run(["curl", "-sS", "-N", flag, "--cacert", str(pki / "ca.pem"),
                            "-H", f"Authorization: Bearer {ALICE_KEY}",
                            "-H", "Content-Type: application/json", "--data-binary",
                            chat_body(stream=True).decode(),
                            f"https://localhost:{port}/v1/chat/completions"],
                           capture_output=True, timeout=30)
        assert p.returncode == 0, p.stderr.decode()
        assert p.stdout.rstrip().endswith(b"data: [DONE]"), (proto, p.stdout[-200:])
    assert b'"choices"' in p.stdout


def test_alpn_chooses_h2_when_offered_else_http_1_1(tmp_path, pki, bench, gwd):
    g = gwd(tls_config(tmp_path, bench()))
    port = tls_port(g)
    for offer, chosen in ((["h2", "http/1.1"], "h2"), (["http/1.1", "h2"], "h2"),
                          (["http/1.1"], "http/1.1"), (["h2"], "h2"), (["spdy/3"], None)):
        ctx = client_ctx(pki)
        ctx.set_alpn_protocols(offer)
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT_TIMEOUT) as s:
            with ctx.wrap_socket(s, server_hostname="localhost") as t:
                assert t.selected_alpn_protocol() == chosen, offer


def test_tls_without_listen_serves_tls_on_server_listen(tmp_path, pki, bench, gwd):
    g = gwd(tls_config(tmp_path, bench(), tls={"listen": None}))
    assert tls_port(g) == g.port
    c = https(pki, g.port)
    assert chat(c).status == 200
    c.close()
    with pytest.raises((http.client.HTTPException, ConnectionError, OSError)):
        r = g.chat()  # plain HTTP on a TLS address: no HTTP answer
        assert r.status != 200


def test_tls_1_1_and_lower_are_refused_1_2_and_1_3_served(tmp_path, pki, bench, gwd):
    g = gwd({**tls_config(tmp_path, bench()), "log": {"level": "debug"}})
    port = tls_port(g)
    for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        c = https(pki, port, minimum_version=v, maximum_version=v)
        assert chat(c).status == 200
        assert c.sock.version() == {ssl.TLSVersion.TLSv1_2: "TLSv1.2",
                                    ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[v]
        c.close()
    # A client that can only speak TLS 1.1 or 1.0 (its own security level lowered so
    # that the refusal is the server's): the server answers protocol_version.
    for v in ("TLSv1_1", "TLSv1"):
        ctx = client_ctx(pki)
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
        with pytest.warns(DeprecationWarning):
            ctx.minimum_version = getattr(ssl.TLSVersion, v)
            ctx.maximum_version = getattr(ssl.TLSVersion, v)
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT_TIMEOUT) as s:
            with pytest.raises(ssl.SSLError) as e:
                ctx.wrap_socket(s, server_hostname="localhost")
        assert "PROTOCOL_VERSION" in str(e.value).upper(), e.value
    # Logged (debug) with OpenSSL's reason, so an operator sees why such clients fail.
    g.err.wait_for(r"code=tls_handshake_failed .*unsupported protocol")
    p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-tls1_1",
                        "-cipher", "DEFAULT@SECLEVEL=0"], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=30)
    assert p.returncode != 0
    assert "alert protocol version" in p.stderr.decode(), p.stderr.decode()
    assert chat(https(pki, port)).status == 200  # and gwd serves on


# ---------------------------------------------------------------- reloads and checks

def reload(g):
    return control_post(g, "/control/v1/reload", {}, token=CONTROL_TOKEN)


def test_a_reload_switches_to_a_new_certificate_and_old_connections_go_on(tmp_path, pki,
                                                                          bench, gwd):
    g = gwd(tls_config(tmp_path, bench()))
    port = tls_port(g)
    old = https(pki, port)
    assert chat(old).status == 200
    assert serial_of(old) == SERIAL_A

    use_pair(pki, "srv-b")  # a renewed certificate at the same paths
    r = reload(g)
    assert r.status == 200 and r.json()["reloaded"] is True, r
    assert "server" in r.json()["settings"], r.json()

    new = https(pki, port)
    assert chat(new).status == 200
    assert serial_of(new) == SERIAL_B
    # The connection made before the reload keeps its session and serves on.
    assert chat(old).status == 200
    assert serial_of(old) == SERIAL_A
    # The same files again: no change, the same context.
    r = reload(g)
    assert r.status == 200 and "server" not in r.json()["settings"], r.json()
    old.close()
    new.close()


def test_a_reload_with_a_broken_key_keeps_the_old_certificate_and_says_why(tmp_path, pki,
                                                                           bench, gwd):
    g = gwd(tls_config(tmp_path, bench()))
    port = tls_port(g)
    gen = reload(g).json()["generation"]

    (pki / "server.key").write_text("-----BEGIN PRIVATE KEY-----\nbroken\n"
                                    "-----END PRIVATE KEY-----\n")
    r = reload(g)
    assert r.status == 409, r
    err = r.json()["error"]
    assert r.json()["reloaded"] is False and r.json()["generation"] == gen
    assert ("server.tls.key", "config.tls_key") in {(p["path"], p["code"])
                                                     for p in err["problems"]}, err
    c = https(pki, port)
    assert chat(c).status == 200
    assert serial_of(c) == SERIAL_A
    c.close()

    # The other certificate's key with the running certificate: they do not match.
    shutil.copy(pki / "srv-b.key", pki / "server.key")
    r = reload(g)
    assert r.status == 409, r
    probs = r.json()["error"]["problems"]
    assert any(p["code"] == "config.tls_key" and "does not match" in p["message"]
               for p in probs), probs
    # SIGHUP runs the same reload: refused, logged with the code.
    start = g.err.count()
    g.signal(signal.SIGHUP)
    g.err.wait_for(r"server\.tls\.key: \S+server\.key \(config\.tls_key\) the private key does "
                   r"not match", start=start)
    g.err.wait_for(r"code=reload_failed\b", start=start)
    c = https(pki, port)
    assert chat(c).status == 200 and serial_of(c) == SERIAL_A
    c.close()


def test_a_control_save_reads_the_pair_too(tmp_path, pki, bench, gwd):
    g = gwd(tls_config(tmp_path, bench()))
    before = g.config_path.read_bytes()
    (pki / "server.key").write_text("not a key\n")
    r = http_request(g.control_port, "PUT", "/control/v1/groups/grp-new",
                     b'{"providers": ["up"]}', bearer(CONTROL_TOKEN))
    assert r.status == 409, r
    err = r.json()["error"]
    assert ("server.tls.key", "config.tls_key") in {(p["path"], p["code"])
                                                     for p in err["problems"]}, err
    assert g.config_path.read_bytes() == before
    # With the key back, the same save goes through (and reloads).
    use_pair(pki, "srv-a")
    r = http_request(g.control_port, "PUT", "/control/v1/groups/grp-new",
                     b'{"providers": ["up"]}', bearer(CONTROL_TOKEN))
    assert r.status == 200 and r.json()["reloaded"] is True, r


def check(path, argv=("gwd", "--check")):
    p = subprocess.run([binary(argv[0]), *argv[1:], str(path)], env=base_env(),
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    return p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace")


def test_check_names_a_bad_pair(tmp_path, pki, bench):
    b = bench()
    good = write_config(tmp_path, tls_config(tmp_path, b))
    rc, out = check(good)
    assert rc == 0, out

    cases = [
        ({"key": "srv-b.key"}, f"server.tls.key: {pki}/srv-b.key (config.tls_key) the private key "
                               "does not match the certificate of server.tls.cert"),
        ({"cert": "nope.pem"}, f"server.tls.cert: {pki}/nope.pem (config.tls_cert) cannot read the "
                               "file: No such file or directory"),
        ({"cert": "srv-a.key"}, f"server.tls.cert: {pki}/srv-a.key (config.tls_cert) holds no PEM "
                                "certificate"),
        ({"key": "srv-a.pem"}, f"server.tls.key: {pki}/srv-a.pem (config.tls_key) holds no PEM "
                               "private key"),
    ]
    for tls, want in cases:
        path = write_config(tmp_path, tls_config(tmp_path, b, tls=tls), name="bad.yaml")
        rc, out = check(path)
        assert rc == 1 and want in out, (tls, out)
        # gwctl check reads the pair as gwd does: the same line.
        rc2, out2 = check(path, argv=("gwctl", "check"))
        assert rc2 == 1 and want in out2, (tls, out2)


# ---------------------------------------------------------------- hostile clients

def test_a_client_that_never_handshakes_is_closed_at_header_timeout(tmp_path, pki, bench, gwd):
    g = gwd(tls_config(tmp_path, bench(), header_timeout_secs=1))
    port = tls_port(g)
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_TIMEOUT) as s:
        t0 = time.monotonic()
        assert s.recv(1) == b""  # blocks until gwd closes it (or the deadline fails it)
        took = time.monotonic() - t0
    assert 0.8 <= took < WAIT_TIMEOUT, took
    # A handshake that stops half-way is bounded the same way.
    ctx = client_ctx(pki)
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_TIMEOUT) as s:
        with ctx.wrap_socket(s, server_hostname="localhost") as t:
            t0 = time.monotonic()
            assert t.recv(1) == b""  # handshake done, no request: closed at the same bound
            assert 0.8 <= time.monotonic() - t0 < WAIT_TIMEOUT


@pytest.mark.parametrize("garbage", [
    b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n",
    bytes(range(256)) * 8,
    b"\x16\x03\x01\xff\xff" + b"\x01" * 300,  # a TLS record header announcing a huge hello
])
def test_garbage_instead_of_a_client_hello_closes_the_connection(tmp_path, pki, bench, gwd,
                                                                  garbage):
    g = gwd(tls_config(tmp_path, bench()))
    port = tls_port(g)
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_TIMEOUT) as s:
        s.sendall(garbage)
        got = b""
        while True:
            try:
                d = s.recv(4096)
            except ConnectionResetError:
                break
            if not d:
                break
            got += d
        assert b"HTTP/" not in got  # at most a TLS alert, never an HTTP answer
    c = https(pki, port)
    assert chat(c).status == 200  # gwd is alive and serves
    c.close()
