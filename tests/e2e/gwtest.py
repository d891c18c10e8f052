# SPDX-License-Identifier: MIT
# tests/e2e/gwtest.py - helpers of the end-to-end suite: start gwd and `gwbench upstream`
# as real processes on 127.0.0.1, wait for their log lines, talk HTTP to them.
# Standard library only (http.client, socket, subprocess, threading).
# Binaries come from $GW_BIN (a folder; `make test` sets it), else <repo>/bin.
# Synchronisation is always on events (a log line, a counter, a traffic row, a process
# exit) with a deadline; nothing sleeps a fixed time to wait for something to happen.

import hashlib
import http.client
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Deadlines are generous: the suite must pass on a loaded 2-core machine.
START_TIMEOUT = 15.0
WAIT_TIMEOUT = 10.0
EXIT_TIMEOUT = 20.0

CONTROL_TOKEN = "ctl-token-e2e-0123456789"
ALICE_KEY = "gw-key-alice-0123456789abcdef"
BOB_KEY = "gw-key-bob-from-env-987654321"
UP_KEY_A = "up-key-a"
UP_KEY_ENV = "up-key-from-env-b"
REQ_ID_RE = re.compile(r"^[0-9a-f]{32}$")


def bin_dir():
    return Path(os.environ.get("GW_BIN") or (REPO / "bin"))


def binary(name):
    """Absolute path of one of gw's binaries; fails the test when it is not built."""
    p = bin_dir() / name
    if not p.exists():
        raise AssertionError(f"{p} does not exist: build it (make) or set GW_BIN")
    return str(p)


def sha256_hex(s):
    return hashlib.sha256(s.encode()).hexdigest()


def base_env():
    env = dict(os.environ)
    # gwd honours the proxy variables (docs/config.md, providers): a proxy set on the
    # machine running the tests must not route the tests' 127.0.0.1 upstreams.
    for v in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
        env.pop(v, None)
    env["GW_CONTROL_TOKEN"] = CONTROL_TOKEN
    env["GW_KEY_BOB"] = BOB_KEY
    env["GW_E2E_UP_KEY"] = UP_KEY_ENV
    # `make tsan`: reports from the uninstrumented libck are suppressed in tests/tsan.supp
    # (STYLE.md 12); any other report makes gwd exit 66 and fails the test.
    supp = REPO / "tests" / "tsan.supp"
    if supp.exists() and "suppressions=" not in env.get("TSAN_OPTIONS", ""):
        env["TSAN_OPTIONS"] = (env.get("TSAN_OPTIONS", "") + f" suppressions={supp}").strip()
    return env


# ---------------------------------------------------------------- YAML (block style)

def _scalar(v):
    if v is True:
        return "true"
    if v is False:
        return "false"
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        return str(v)
    return json.dumps(str(v))  # a JSON string is a valid double-quoted YAML scalar


def to_yaml(obj, indent=0):
    """Block-style YAML for dicts/lists/scalars (enough for gw's config)."""
    pad = "  " * indent
    out = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            if isinstance(v, (dict, list)) and v:
                out.append(f"{pad}{k}:")
                out.append(to_yaml(v, indent + 1))
            elif isinstance(v, list):
                out.append(f"{pad}{k}: []")
            elif isinstance(v, dict):
                out.append(f"{pad}{k}: {{}}")
            else:
                out.append(f"{pad}{k}: {_scalar(v)}")
    elif isinstance(obj, list):
        for v in obj:
            if isinstance(v, (dict, list)) and v:
                inner = to_yaml(v, indent + 1).split("\n")
                first = inner[0].lstrip()
                out.append(f"{pad}- {first}")
                out.extend(inner[1:])
            else:
                out.append(f"{pad}- {_scalar(v)}")
    else:
        out.append(pad + _scalar(obj))
    return "\n".join(out)


# ---------------------------------------------------------------- output collection

class Lines:
    """Collects the lines of a pipe on a thread; tests wait for a regex with a deadline."""

    def __init__(self, stream, name):
        self.name = name
        self.lines = []
        self.eof = False
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self.thread.start()

    def _run(self, stream):
        try:
            for raw in iter(stream.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                with self.cond:
                    self.lines.append(line)
                    self.cond.notify_all()
        finally:
            with self.cond:
                self.eof = True
                self.cond.notify_all()

    def count(self):
        with self.cond:
            return len(self.lines)

    def text(self, last=None):
        with self.cond:
            lines = self.lines if last is None else self.lines[-last:]
            return "\n".join(lines)

    def find(self, pattern, start=0):
        rx = re.compile(pattern)
        with self.cond:
            for line in self.lines[start:]:
                m = rx.search(line)
                if m:
                    return m
        return None

    def wait_for(self, pattern, timeout=WAIT_TIMEOUT, start=0):
        """The first match of <pattern> in a line from index <start> on; raises
        AssertionError (with the tail of the output) on deadline or end of output."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        i = start
        with self.cond:
            while True:
                while i < len(self.lines):
                    m = rx.search(self.lines[i])
                    i += 1
                    if m:
                        return m
                if self.eof:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(left)
            why = "output ended" if self.eof else f"no match within {timeout}s"
            tail = "\n".join(self.lines[-40:])
        raise AssertionError(f"{self.name}: {why} for /{pattern}/; last lines:\n{tail}")


def wait_until(fn, timeout=WAIT_TIMEOUT, what="condition", interval=0.02):
    """Polls fn() until it returns a truthy value (returned) or the deadline passes."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = fn()
        except (OSError, http.client.HTTPException) as e:
            last = e
            v = None
        else:
            v = last
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")
        time.sleep(interval)


# ---------------------------------------------------------------- HTTP

class Resp:
    def __init__(self, status, headers, body, incomplete=False):
        self.status = status
        self.headers = headers  # lowercase name -> value (last wins)
        self.body = body
        self.incomplete = incomplete  # the body ended early (no final chunk, short length)

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        inc = ", INCOMPLETE" if self.incomplete else ""
        return f"Resp({self.status}, {self.headers!r}, {self.body[:800]!r}{inc})"


def _headers_of(resp):
    return {k.lower(): v for k, v in resp.getheaders()}


def http_request(port, method, path, body=None, headers=None, timeout=WAIT_TIMEOUT,
                 conn=None):
    """One request on a new connection (or on <conn>); returns Resp with the whole body."""
    own = conn is None
    if own:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        h = {"Content-Type": "application/json"} if body is not None else {}
        h.update(headers or {})
        if isinstance(body, str):
            body = body.encode()
        conn.request(method, path, body=body, headers=h)
        r = conn.getresponse()
        try:
            return Resp(r.status, _headers_of(r), r.read())
        except http.client.IncompleteRead as e:
            return Resp(r.status, _headers_of(r), e.partial, incomplete=True)
    finally:
        if own:
            conn.close()


def get_json(port, path, headers=None):
    r = http_request(port, "GET", path, headers=headers)
    assert r.status == 200, f"GET {path}: {r!r}"
    return r.json()


def chat_body(model="gpt-test", stream=False, include_usage=None, text="say hello", **extra):
    b = {"model": model, "messages": [{"role": "user", "content": text}]}
    if stream:
        b["stream"] = True
    if include_usage is not None:
        b["stream_options"] = {"include_usage": include_usage}
    b.update(extra)
    return json.dumps(b, separators=(",", ":")).encode()


def bearer(key):
    return {"Authorization": f"Bearer {key}"}


class Stream:
    """A streamed answer read event by event (SSE), over http.client."""

    def __init__(self, port, body, headers=None, path="/v1/chat/completions",
                 timeout=WAIT_TIMEOUT):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        self.conn.request("POST", path, body=body, headers=h)
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = _headers_of(self.resp)
        self.raw = b""

    def next_event(self):
        """The data of the next SSE event (str, several data lines joined by \\n), or
        None at the end of the body."""
        datas = []
        while True:
            line = self.resp.readline()
            if not line:
                return "\n".join(datas) if datas else None
            self.raw += line
            s = line.rstrip(b"\r\n")
            if not s:
                if datas:
                    return "\n".join(datas)
                continue
            if s.startswith(b"data:"):
                d = s[5:]
                if d.startswith(b" "):
                    d = d[1:]
                datas.append(d.decode())

    def next_content(self):
        """Reads until an event carrying delta content; returns (content, events_read)."""
        seen = []
        while True:
            ev = self.next_event()
            if ev is None:
                raise AssertionError(f"stream ended before content; events: {seen!r}")
            seen.append(ev)
            c = content_of(ev)
            if c:
                return c, seen

    def rest(self):
        out = []
        while True:
            ev = self.next_event()
            if ev is None:
                return out
            out.append(ev)

    def close(self):
        try:
            if self.conn.sock is not None:
                self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()


def sse_events(raw):
    """The data strings of the SSE events in <raw> (bytes)."""
    out = []
    for block in re.split(rb"\r?\n\r?\n", raw):
        datas = []
        for line in re.split(rb"\r?\n", block):
            if line.startswith(b"data:"):
                d = line[5:]
                if d.startswith(b" "):
                    d = d[1:]
                datas.append(d.decode())
        if datas:
            out.append("\n".join(datas))
    return out


def content_of(ev):
    """The concatenated delta content of one chat chunk event (str), '' when none."""
    if ev == "[DONE]":
        return ""
    try:
        j = json.loads(ev)
    except ValueError:
        return ""
    s = ""
    for ch in j.get("choices") or []:
        c = (ch.get("delta") or {}).get("content")
        if isinstance(c, str):
            s += c
    return s


def is_usage_chunk(ev):
    if ev == "[DONE]":
        return False
    try:
        j = json.loads(ev)
    except ValueError:
        return False
    return j.get("usage") is not None


def free_port():
    """A loopback port that nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def ceil_div(a, b):
    return -(-a // b)


class LoopbackServer:
    """A threaded TCP server on 127.0.0.1:0 (port, url): handle(conn) runs on a thread per
    connection and owns it; close() stops accepting. For upstreams and fronts the tests
    script byte by byte."""

    def __init__(self):
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(c,), daemon=True).start()

    def _handle(self, c):
        try:
            self.handle(c)
        except OSError:
            c.close()

    def handle(self, c):
        raise NotImplementedError

    def close(self):
        self.lsock.close()


def recv_request(c):
    """Reads one HTTP/1.1 request with a Content-Length body (or none) from the socket
    <c>, for the tests' raw upstreams; (head, body) as bytes, short if the peer closed."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = c.recv(65536)
        if not d:
            break
        buf += d
    head, _, body = buf.partition(b"\r\n\r\n")
    m = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    n = int(m.group(1)) if m else 0
    while len(body) < n:
        d = c.recv(65536)
        if not d:
            break
        body += d
    return head, body


# ---------------------------------------------------------------- processes

class Proc:
    def __init__(self, argv, env, name):
        self.name = name
        self.argv = argv
        self.p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.out = Lines(self.p.stdout, f"{name} stdout")
        self.err = Lines(self.p.stderr, f"{name} stderr")
        self.rc = None

    def signal(self, sig):
        if self.p.poll() is None:
            self.p.send_signal(sig)

    def wait_exit(self, timeout=EXIT_TIMEOUT):
        """Waits for the exit; kills (and returns -9) after the deadline."""
        if self.rc is not None:
            return self.rc
        try:
            self.rc = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            self.rc = -9
        self.out.thread.join(5)
        self.err.thread.join(5)
        return self.rc

    def stop(self, timeout=EXIT_TIMEOUT):
        """SIGTERM, then wait for the exit; returns the exit code."""
        if self.rc is None:
            self.signal(signal.SIGTERM)
        return self.wait_exit(timeout)

    def log(self, last=60):
        return (f"--- {self.name} ({' '.join(self.argv)}) rc={self.rc}\n"
                f"stdout:\n{self.out.text(last)}\nstderr:\n{self.err.text(last)}")


class Bench(Proc):
    """`gwbench upstream` on 127.0.0.1:0."""

    def __init__(self, *args, env=None):
        argv = [binary("gwbench"), "upstream", "--listen", "127.0.0.1:0", *map(str, args)]
        super().__init__(argv, env or base_env(), "gwbench")
        m = self.out.wait_for(r"gwbench upstream listening on ([0-9.]+):(\d+)",
                              timeout=START_TIMEOUT)
        self.port = int(m.group(2))
        self.url = f"http://127.0.0.1:{self.port}"

    def stats(self):
        return get_json(self.port, "/_bench/stats")

    def last(self):
        return get_json(self.port, "/_bench/last")

    def last_body_bytes(self):
        b = self.last()["body"]
        if isinstance(b, str):
            return b.encode()
        return json.dumps(b, separators=(",", ":")).encode()

    def last_body(self):
        b = self.last()["body"]
        return json.loads(b) if isinstance(b, str) else b

    def wait_stat(self, pred, what, timeout=WAIT_TIMEOUT):
        return wait_until(lambda: (lambda s: s if pred(s) else None)(self.stats()),
                          timeout, what)


class TlsBench(Bench):
    """`gwbench upstream --tls-cert --tls-key` with the test certificate for localhost in
    folder <pki> (test_egress.make_pki: srv.pem, srv.key, ca.pem); url is https, and
    stats() goes over TLS too; own_connections counts the connections made here (each
    offers no ALPN unless asked: it counts in tls_alpn_none)."""

    def __init__(self, pki, *args, env=None):
        super().__init__("--tls-cert", Path(pki) / "srv.pem", "--tls-key", Path(pki) / "srv.key",
                         *args, env=env)
        self.ca = Path(pki) / "ca.pem"
        self.url = f"https://localhost:{self.port}"
        self.own_connections = 0

    def conn(self, alpn=None):
        self.own_connections += 1
        ctx = ssl.create_default_context(cafile=str(self.ca))
        if alpn:
            ctx.set_alpn_protocols(alpn)
        return http.client.HTTPSConnection("localhost", self.port, context=ctx,
                                           timeout=WAIT_TIMEOUT)

    def request(self, method, path, body=None, alpn=None):
        return http_request(self.port, method, path, body, conn=self.conn(alpn))

    def stats(self):
        r = self.request("GET", "/_bench/stats")
        assert r.status == 200, f"GET /_bench/stats: {r!r}"
        return r.json()

    def last(self):
        r = self.request("GET", "/_bench/last")
        assert r.status == 200, f"GET /_bench/last: {r!r}"
        return r.json()


# The `ready` line, in either log.format (text: code=ready, json: "code":"ready").
READY_RE = (r"(?:code=|\"code\":\")ready\b.*data=\[?([0-9a-fA-F.:]+?)\]?:(\d+)\b.*"
            r"control=\[?([0-9a-fA-F.:]+?)\]?:(\d+)\b")


class Gwd(Proc):
    """gwd -c CONFIG, started and waited for until its `code=ready` line. <wrap>: argv
    that execs the rest (gwd keeps the pid), e.g. unshare for a private /etc/localtime."""

    def __init__(self, config_path, env=None, wrap=None):
        super().__init__([*(wrap or []), binary("gwd"), "-c", str(config_path)],
                         env or base_env(), "gwd")
        self.config_path = config_path
        try:
            m = self.err.wait_for(READY_RE, timeout=START_TIMEOUT)
        except AssertionError:
            self.wait_exit(2)
            raise AssertionError("gwd did not become ready\n" + self.log())
        self.port = int(m.group(2))
        self.control_port = int(m.group(4))
        self.url = f"http://127.0.0.1:{self.port}"
        self.control_url = f"http://127.0.0.1:{self.control_port}"

    # data plane
    def chat(self, body=None, key=ALICE_KEY, headers=None, conn=None):
        h = bearer(key) if key is not None else {}
        h.update(headers or {})
        return http_request(self.port, "POST", "/v1/chat/completions",
                            chat_body() if body is None else body, h, conn=conn)

    def stream(self, body, key=ALICE_KEY, headers=None):
        h = bearer(key) if key is not None else {}
        h.update(headers or {})
        return Stream(self.port, body, h)

    # control plane
    def control(self, path, token=CONTROL_TOKEN):
        return http_request(self.control_port, "GET", path,
                            headers=bearer(token) if token else None)

    def traffic(self, limit=100):
        r = self.control(f"/control/v1/traffic?limit={limit}")
        assert r.status == 200, f"traffic: {r!r}"
        return r.json()["rows"]

    def wait_row(self, req_id, pred=None, timeout=WAIT_TIMEOUT):
        """The traffic row with id <req_id> (optionally once pred(row) holds)."""
        def find():
            for row in self.traffic():
                if row.get("id") == req_id and (pred is None or pred(row)):
                    return row
            return None
        return wait_until(find, timeout, f"traffic row {req_id}")


# ---------------------------------------------------------------- configs

# The AWS credentials of a `dialect: bedrock` provider made by provider(), and the
# gwbench upstream flags that make it check their SigV4 signatures (issue 15).
AWS_REGION = "us-west-2"
AWS_KEY_ID = "AKIDGWTESTEXAMPLE"
AWS_SECRET = "gw-test-secret/K7MDENG+bPxRfiCYEXAMPLEKEY"
AWS_BENCH_ARGS = ["--aws-access-key-id", AWS_KEY_ID, "--aws-secret-access-key", AWS_SECRET,
                  "--aws-region", AWS_REGION]


def provider(name, bench=None, base_url=None, models=("*",), keys=None, **extra):
    p = {
        "name": name,
        "dialect": "openai",
        "base_url": base_url or bench.url,
        "keys": keys if keys is not None else [{"value": UP_KEY_A}],
        "models": list(models),
    }
    p.update(extra)
    if p["dialect"] == "bedrock" and keys is None:  # signs with aws:, has no keys
        del p["keys"]
        p.setdefault("aws", {"region": AWS_REGION, "access_key_id": {"value": AWS_KEY_ID},
                             "secret_access_key": {"value": AWS_SECRET}})
    return p


def config(tmp_path, providers, clients=None, server=None, failover=None, **top):
    c = {
        "server": {"listen": ["127.0.0.1:0"], "workers": 2, "max_body_mb": 1,
                   "drain_secs": 10},
        "control": {"listen": "127.0.0.1:0", "token_env": "GW_CONTROL_TOKEN"},
        "store": {"path": str(Path(tmp_path) / "store")},
        "retention": {"row_days": 31},
    }
    c["server"].update(server or {})
    if failover:
        c["failover"] = dict(failover)
    c["providers"] = list(providers)
    c["clients"] = clients if clients is not None else [
        {"name": "alice", "key_sha256": sha256_hex(ALICE_KEY)},
        {"name": "bob", "key_env": "GW_KEY_BOB"},
    ]
    c.update(top)
    return c


def write_config(tmp_path, cfg, name="gw.yaml"):
    p = Path(tmp_path) / name
    p.write_text(cfg if isinstance(cfg, str) else to_yaml(cfg) + "\n")
    return p


# ---------------------------------------------------------------- routing helpers
# (added for test_routing.py, test_slow_start.py, test_min_speed.py)

def control_post(g, path, body, token=CONTROL_TOKEN):
    """POST <body> (a dict, sent as JSON) to gwd <g>'s control API; returns Resp."""
    return http_request(g.control_port, "POST", path,
                        json.dumps(body, separators=(",", ":")).encode(),
                        headers=bearer(token) if token else None)


def overview(g):
    r = g.control("/control/v1/overview")
    assert r.status == 200, f"overview: {r!r}"
    return r.json()


def overview_provider(g, name):
    """The overview's entry of provider <name>."""
    for p in overview(g)["providers"]:
        if p["name"] == name:
            return p
    raise AssertionError(f"provider {name} not in the overview")


def dry_run(g, model, client="alice", body=None):
    """POST /control/v1/dry-run; returns the answer (asserting 200)."""
    req = {"model": model, "client": client}
    if body is not None:
        req["body"] = json.loads(body) if isinstance(body, (bytes, str)) else body
    r = control_post(g, "/control/v1/dry-run", req)
    assert r.status == 200, f"dry-run: {r!r}"
    return r.json()


def gwctl_run(g, *args, json_out=False, token=CONTROL_TOKEN):
    """Runs gwctl against gwd <g>; returns (exit code, stdout, stderr)."""
    argv = [binary("gwctl"), "--url", g.control_url, "--token", token]
    if json_out:
        argv.append("--json")
    argv += [str(a) for a in args]
    p = subprocess.run(argv, env=base_env(), stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=30)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def parse_ts(s):
    """Unix seconds (float) of an RFC 3339 timestamp such as 2026-01-02T03:04:05.678Z."""
    from datetime import datetime
    if s.endswith("Z") or s.endswith("z"):
        s = s[:-1] + "+00:00"
    return datetime.fromisoformat(s).timestamp()


def rows_of(g, ids, timeout=WAIT_TIMEOUT):
    """The traffic rows of the request ids <ids>, in the order of <ids> (waits for all)."""
    want = list(ids)

    def find():
        got = {}
        for row in g.traffic(limit=max(100, 2 * len(want))):
            if row.get("id") in want:
                got[row["id"]] = row
        return got if len(got) == len(set(want)) else None
    got = wait_until(find, timeout, f"{len(want)} traffic rows")
    return [got[i] for i in want]


def chat_messages_body(messages, model="gpt-test", stream=False, **extra):
    """A Chat Completions body with the given <messages> list."""
    b = {"model": model, "messages": messages}
    if stream:
        b["stream"] = True
    b.update(extra)
    return json.dumps(b, separators=(",", ":")).encode()


def squeeze(events):
    """The event list with runs of the same delta event folded into one (how many deltas
    an upstream's chunks make is the upstream's business)."""
    out = []
    for e in events:
        if e.endswith(".delta") and out and out[-1] == e:
            continue
        out.append(e)
    return out
