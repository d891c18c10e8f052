# SPDX-License-Identifier: MIT
# tests/e2e/test_egress.py - upstream egress as companies run it: an https upstream whose
# certificate comes from a private CA (providers[].ca_file), an HTTP CONNECT proxy
# (providers[].proxy with proxy_auth from the environment, or the environment's
# HTTPS_PROXY / HTTP_PROXY, NO_PROXY), and their failures: an untrusted certificate
# (gw.upstream.tls_verify) and a proxy refusing the tunnel (gw.upstream.proxy), each
# failing over to the next provider.
# Made here, in the test's folder: a CA and a server certificate for localhost/127.0.0.1
# (openssl CLI), a TLS front (Python ssl) that forwards to a plain gwbench upstream, and a
# threaded CONNECT proxy that counts tunnels and checks Proxy-Authorization.

import base64
import shutil
import signal
import socket
import ssl
import subprocess
import threading

import pytest

from gwtest import (LoopbackServer, base_env, binary, chat_body, config, overview_provider, provider,
                    write_config)

PROXY_USER, PROXY_PASS = "alice", "pr0xy-s3cret"


# ---------------------------------------------------------------- test PKI

def make_pki(d):
    """A CA (ca.pem) and a server certificate for localhost and 127.0.0.1 it signed
    (srv.pem, srv.key), in folder <d>."""
    def run(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True, timeout=60)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", "/CN=gw test CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    run("req", "-new", *ec, "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=localhost")
    (d / "srv.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                               "basicConstraints=CA:FALSE\n"
                               "extendedKeyUsage=serverAuth\n")
    run("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "srv.pem", "-days", "2", "-extfile", "srv.ext")
    # The same CA's certificate for another name only (other.pem, other.key).
    run("req", "-new", *ec, "-keyout", "other.key", "-out", "other.csr",
        "-subj", "/CN=other.example")
    (d / "other.ext").write_text("subjectAltName=DNS:other.example\n"
                                 "extendedKeyUsage=serverAuth\n")
    run("x509", "-req", "-in", "other.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "other.pem", "-days", "2", "-extfile", "other.ext")
    return d / "ca.pem"


# ---------------------------------------------------------------- relays

def pump(src, dst):
    try:
        while True:
            b = src.recv(65536)
            if not b:
                break
            dst.sendall(b)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def splice(a, b):
    threading.Thread(target=pump, args=(a, b), daemon=True).start()
    threading.Thread(target=pump, args=(b, a), daemon=True).start()


class TlsFront(LoopbackServer):
    """TLS on the outside (the test CA's certificate <cert>), plain HTTP to <port>.
    Keeps the server name (SNI) each client sent."""

    def __init__(self, pki_dir, port, cert="srv"):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(pki_dir / f"{cert}.pem", pki_dir / f"{cert}.key")
        self.ctx.sni_callback = self._on_sni
        self.target = port
        self.handshakes = 0
        self.sni = []
        super().__init__()

    def _on_sni(self, sock, name, ctx):
        with self.lock:
            self.sni.append(name)

    def handle(self, c):
        try:
            t = self.ctx.wrap_socket(c, server_side=True)
        except (ssl.SSLError, OSError):
            c.close()  # a client that refused our certificate
            return
        with self.lock:
            self.handshakes += 1
        splice(t, socket.create_connection(("127.0.0.1", self.target)))


class ConnectProxy(LoopbackServer):
    """An HTTP CONNECT proxy: counts tunnels, keeps every request head, and when <auth>
    ("user:pass") is set answers 407 to a request without the right Basic credential."""

    def __init__(self, auth=None):
        self.auth = auth
        self.heads = []
        self.tunnels = []  # the "host:port" of each tunnel opened
        self.refused = 0
        super().__init__()

    def handle(self, c):
        head = b""
        while b"\r\n\r\n" not in head:
            b = c.recv(4096)
            if not b:
                c.close()
                return
            head += b
        text = head.decode("latin-1")
        lines = text.split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        hdrs = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                hdrs[k.strip().lower()] = v.strip()
        with self.lock:
            self.heads.append((lines[0], hdrs))
        want = self.auth and "Basic " + base64.b64encode(self.auth.encode()).decode()
        if method != "CONNECT" or (want and hdrs.get("proxy-authorization") != want):
            with self.lock:
                self.refused += 1
            c.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                      b"Proxy-Authenticate: Basic realm=\"corp\"\r\nContent-Length: 0\r\n"
                      b"Connection: close\r\n\r\n")
            c.close()
            return
        host, port = target.rsplit(":", 1)
        up = socket.create_connection((host.strip("[]"), int(port)))
        with self.lock:
            self.tunnels.append(target)
        c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        splice(c, up)


@pytest.fixture
def pki(tmp_path):
    return make_pki(tmp_path)


@pytest.fixture
def servers():
    started = []

    def start(s):
        started.append(s)
        return s

    yield start
    for s in started:
        s.close()


def env_with(**kv):
    e = base_env()
    e.update(kv)
    return e


def attempts_of(row):
    return [(a["upstream"], a["outcome"], a["code"]) for a in row["attempts"]]


def assert_no_proxy_secret(g):
    log = g.log(400)
    assert PROXY_PASS not in log
    assert base64.b64encode(f"{PROXY_USER}:{PROXY_PASS}".encode()).decode() not in log


# ---------------------------------------------------------------- ca_file

def test_https_upstream_trusted_through_ca_file(tmp_path, pki, bench, gwd, servers):
    b = bench()
    front = servers(TlsFront(tmp_path, b.port))
    # A relative ca_file is read next to the config file.
    g = gwd(config(tmp_path, [provider("corp", base_url=f"https://localhost:{front.port}",
                                       ca_file="ca.pem")]))

    r = g.chat(chat_body())

    assert r.status == 200, r
    assert r.json()["choices"][0]["message"]["content"]
    assert front.handshakes >= 1
    assert front.sni == ["localhost"]  # SNI names the upstream
    assert b.stats()["requests"] == 1
    row = g.wait_row(r.headers["x-request-id"])
    assert attempts_of(row) == [("corp", "ok", None)], row


def test_https_upstream_by_ip_address_is_verified_against_its_ip(tmp_path, pki, bench, gwd,
                                                                 servers):
    b = bench()
    front = servers(TlsFront(tmp_path, b.port))
    g = gwd(config(tmp_path, [provider("corp", base_url=f"https://127.0.0.1:{front.port}",
                                       ca_file=str(pki))]))

    r = g.chat(chat_body())

    assert r.status == 200, r
    assert front.sni == [None]  # no SNI for an address (RFC 6066)


def test_a_certificate_for_another_name_is_refused(tmp_path, pki, bench, gwd, servers):
    b = bench()
    front = servers(TlsFront(tmp_path, b.port, cert="other"))
    g = gwd(config(tmp_path, [provider("corp", base_url=f"https://localhost:{front.port}",
                                       ca_file="ca.pem")]))

    r = g.chat(chat_body())

    assert r.status == 502, r
    assert b.stats()["requests"] == 0
    row = g.wait_row(r.headers["x-request-id"])
    assert attempts_of(row) == [("corp", "failed", "gw.upstream.tls_verify")], row
    g.err.wait_for(r"code=gw\.upstream\.tls_verify .*certificate refused: hostname mismatch")


def test_without_ca_file_the_certificate_is_refused_and_the_next_serves(tmp_path, pki, bench,
                                                                         gwd, servers):
    b = bench()
    front = servers(TlsFront(tmp_path, b.port))
    nxt = bench()
    g = gwd(config(tmp_path, [provider("corp", base_url=f"https://localhost:{front.port}"),
                              provider("next", nxt)]))

    r = g.chat(chat_body())

    assert r.status == 200, r
    assert b.stats()["requests"] == 0  # nothing went to the untrusted upstream
    assert nxt.stats()["requests"] == 1
    row = g.wait_row(r.headers["x-request-id"])
    assert attempts_of(row) == [("corp", "failed", "gw.upstream.tls_verify"),
                                ("next", "ok", None)], row
    g.err.wait_for(r"code=gw\.upstream\.tls_verify .*certificate refused: "
                   r"unable to get local issuer certificate")


def reload(g):
    start = g.err.count()
    g.signal(signal.SIGHUP)
    return g.err.wait_for(r"code=(reloaded|reload_failed)\b", start=start).group(1), start


def test_a_reload_reads_a_changed_ca_file_and_refuses_a_broken_one(tmp_path, pki, bench, gwd,
                                                                   servers):
    other = tmp_path / "other"
    other.mkdir()
    make_pki(other)  # another CA: it did not sign the front's certificate
    shutil.copy(other / "ca.pem", tmp_path / "trust.pem")
    b = bench()
    front = servers(TlsFront(tmp_path, b.port))
    g = gwd(config(tmp_path, [provider("corp", base_url=f"https://localhost:{front.port}",
                                       ca_file="trust.pem")]))

    r = g.chat(chat_body())
    assert r.status == 502, r
    assert attempts_of(g.wait_row(r.headers["x-request-id"])) == [
        ("corp", "failed", "gw.upstream.tls_verify")]

    # Same path, new content: the reload trusts it.
    shutil.copy(tmp_path / "ca.pem", tmp_path / "trust.pem")
    assert reload(g)[0] == "reloaded"
    r = g.chat(chat_body())
    assert r.status == 200, r

    # A file that no longer holds a certificate: the reload is refused, named, and the
    # running config keeps its trust.
    (tmp_path / "trust.pem").write_text("garbage\n")
    what, start = reload(g)
    assert what == "reload_failed"
    g.err.wait_for(rf"providers\[0\] \(corp\)\.ca_file: {tmp_path}/trust\.pem "
                   r"\(config\.ca_file\) holds no PEM certificate", start=start)
    r = g.chat(chat_body())
    assert r.status == 200, r


# ---------------------------------------------------------------- proxy

def test_proxy_from_the_file_with_credentials_from_the_environment(tmp_path, pki, bench, gwd,
                                                                   servers):
    b = bench()
    front = servers(TlsFront(tmp_path, b.port))
    px = servers(ConnectProxy(auth=f"{PROXY_USER}:{PROXY_PASS}"))
    g = gwd(config(tmp_path, [provider("corp", base_url=f"https://localhost:{front.port}",
                                       ca_file="ca.pem",
                                       proxy=f"http://127.0.0.1:{px.port}",
                                       proxy_auth={"env": "GW_E2E_PROXY_AUTH"})]),
            env=env_with(GW_E2E_PROXY_AUTH=f"{PROXY_USER}:{PROXY_PASS}"))

    r = g.chat(chat_body())
    r2 = g.chat(chat_body(stream=True))

    assert r.status == 200, r
    assert r2.status == 200, r2
    assert px.refused == 0
    # One tunnel per upstream connection (two workers: one or two), each to the upstream
    # itself, TLS end to end with the upstream's name.
    assert 1 <= len(px.tunnels) <= 2 and set(px.tunnels) == {f"localhost:{front.port}"}
    line, hdrs = px.heads[0]
    assert line == f"CONNECT localhost:{front.port} HTTP/1.1"
    assert hdrs["host"] == f"localhost:{front.port}"
    assert b.stats()["requests"] == 2
    assert b.last()["headers"].get("host") == f"localhost:{front.port}"
    assert overview_provider(g, "corp")["egress"] == {
        "proxy": f"127.0.0.1:{px.port}", "proxy_from": "proxy",
        "ca_file": str(tmp_path / "ca.pem")}
    assert_no_proxy_secret(g)
    assert PROXY_PASS not in g.control("/control/v1/overview").body.decode()


def test_https_proxy_from_the_environment_with_userinfo(tmp_path, pki, bench, gwd, servers):
    b = bench()
    front = servers(TlsFront(tmp_path, b.port))
    px = servers(ConnectProxy(auth=f"{PROXY_USER}:{PROXY_PASS}"))
    g = gwd(config(tmp_path, [provider("corp", base_url=f"https://localhost:{front.port}",
                                       ca_file="ca.pem")]),
            env=env_with(HTTPS_PROXY=f"http://{PROXY_USER}:{PROXY_PASS}@127.0.0.1:{px.port}"))

    r = g.chat(chat_body())

    assert r.status == 200, r
    assert px.tunnels == [f"localhost:{front.port}"]
    assert px.refused == 0
    assert overview_provider(g, "corp")["egress"]["proxy_from"] == "HTTPS_PROXY"
    assert_no_proxy_secret(g)
    assert PROXY_PASS not in g.control("/control/v1/overview").body.decode()


def test_http_proxy_from_the_environment_tunnels_a_plain_upstream(tmp_path, bench, gwd,
                                                                  servers):
    b = bench()
    px = servers(ConnectProxy())
    g = gwd(config(tmp_path, [provider("plain", b)]),
            env=env_with(http_proxy=f"http://127.0.0.1:{px.port}"))

    r = g.chat(chat_body())

    assert r.status == 200, r
    assert px.tunnels == [f"127.0.0.1:{b.port}"]
    assert b.stats()["requests"] == 1


@pytest.mark.parametrize("no_proxy", ["localhost", ".localhost", "127.0.0.1,localhost",
                                      "*"])
def test_no_proxy_exempts_the_upstream(tmp_path, pki, bench, gwd, servers, no_proxy):
    b = bench()
    front = servers(TlsFront(tmp_path, b.port))
    px = servers(ConnectProxy())
    g = gwd(config(tmp_path, [provider("corp", base_url=f"https://localhost:{front.port}",
                                       ca_file="ca.pem")]),
            env=env_with(HTTPS_PROXY=f"http://127.0.0.1:{px.port}", NO_PROXY=no_proxy))

    r = g.chat(chat_body())

    assert r.status == 200, r
    assert px.heads == []  # never asked
    assert front.handshakes == 1
    assert overview_provider(g, "corp")["egress"]["proxy"] is None


def test_proxy_none_turns_the_environment_proxy_off(tmp_path, bench, gwd, servers):
    b = bench()
    px = servers(ConnectProxy())
    g = gwd(config(tmp_path, [provider("plain", b, proxy="none")]),
            env=env_with(HTTP_PROXY=f"http://127.0.0.1:{px.port}"))

    r = g.chat(chat_body())

    assert r.status == 200, r
    assert px.heads == []


def test_proxy_refusing_the_tunnel_fails_over_to_the_next_provider(tmp_path, bench, gwd,
                                                                    servers):
    b = bench()
    nxt = bench()
    px = servers(ConnectProxy(auth=f"{PROXY_USER}:{PROXY_PASS}"))
    # No proxy_auth: the proxy answers 407.
    g = gwd(config(tmp_path, [provider("via-proxy", b, proxy=f"http://127.0.0.1:{px.port}"),
                              provider("next", nxt)]))

    r = g.chat(chat_body(stream=True))

    assert r.status == 200, r
    assert px.refused == 1 and px.tunnels == []
    assert b.stats()["requests"] == 0
    assert nxt.stats()["requests"] == 1
    row = g.wait_row(r.headers["x-request-id"])
    assert attempts_of(row) == [("via-proxy", "failed", "gw.upstream.proxy"),
                                ("next", "ok", None)], row
    g.err.wait_for(rf"code=gw\.upstream\.proxy .*proxy 127\.0\.0\.1:{px.port}, CONNECT "
                   rf"127\.0\.0\.1:{b.port}: the proxy refused the tunnel: HTTP 407")


def test_proxy_with_wrong_credentials_is_refused_and_nothing_leaks(tmp_path, bench, gwd,
                                                                   servers):
    b = bench()
    px = servers(ConnectProxy(auth="bob:other"))
    g = gwd(config(tmp_path, [provider("via-proxy", b, proxy=f"http://127.0.0.1:{px.port}",
                                       proxy_auth={"env": "GW_E2E_PROXY_AUTH"})]),
            env=env_with(GW_E2E_PROXY_AUTH=f"{PROXY_USER}:{PROXY_PASS}"))

    r = g.chat(chat_body())

    assert r.status == 502, r
    assert r.json()["error"]["code"] == "gw.upstream.failed", r.json()  # every hop failed
    row = g.wait_row(r.headers["x-request-id"])
    assert attempts_of(row) == [("via-proxy", "failed", "gw.upstream.proxy")], row
    assert px.refused == 1
    want = base64.b64encode(f"{PROXY_USER}:{PROXY_PASS}".encode()).decode()
    assert px.heads[0][1]["proxy-authorization"] == f"Basic {want}"  # sent, refused
    assert_no_proxy_secret(g)
    assert PROXY_PASS not in r.body.decode()


# ---------------------------------------------------------------- gwd --check

def check(path, env=None, argv=("gwd", "--check")):
    p = subprocess.run([binary(argv[0]), *argv[1:], str(path)], env=env or base_env(),
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    return p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace")


def test_check_names_a_bad_ca_file_and_proxy(tmp_path, pki):
    (tmp_path / "notes.txt").write_text("not a certificate\n")
    cfg = config(tmp_path, [
        provider("good", base_url="https://localhost:1", ca_file="ca.pem"),
        provider("missing", base_url="https://localhost:1", ca_file="nope.pem"),
        provider("nocert", base_url="https://localhost:1", ca_file="notes.txt"),
        provider("badproxy", base_url="https://localhost:1",
                 proxy="http://alice:pw@proxy.corp:3128"),
    ])

    rc, out = check(write_config(tmp_path, cfg))

    assert rc == 1, out
    assert (f"providers[1] (missing).ca_file: {tmp_path}/nope.pem (config.ca_file) cannot read "
            "the file: No such file or directory") in out, out
    assert (f"providers[2] (nocert).ca_file: {tmp_path}/notes.txt (config.ca_file) holds no "
            "PEM certificate") in out, out
    assert ("providers[3] (badproxy).proxy: http://(hidden)@proxy.corp:3128 (config.proxy) "
            "credentials in the proxy URL are not allowed") in out, out
    assert "providers[0]" not in out, out
    assert ":pw@" not in out
    # gwctl check reads the files as gwd does: the same lines.
    rc2, out2 = check(write_config(tmp_path, cfg), argv=("gwctl", "check"))
    assert rc2 == 1, out2
    assert sorted(out2.splitlines()) == sorted(out.splitlines()), (out, out2)


def test_check_accepts_ca_file_and_names_an_unusable_environment_proxy(tmp_path, pki):
    cfg = config(tmp_path, [provider("good", base_url="https://localhost:1",
                                     ca_file="ca.pem")])
    path = write_config(tmp_path, cfg)

    rc, out = check(path)
    assert rc == 0, out

    rc, out = check(path, env_with(https_proxy="socks5://u:hunter2@s.corp:1080"))
    assert rc == 1, out
    assert ("providers[0] (good).proxy: socks5://(hidden)@s.corp:1080 (config.proxy) only "
            "http:// proxies are supported") in out, out
    assert "from the environment variable https_proxy" in out, out
    assert "hunter2" not in out
