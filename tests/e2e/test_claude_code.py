# SPDX-License-Identifier: MIT
# tests/e2e/test_claude_code.py - Claude Code (npm @anthropic-ai/claude-code, pinned in
# claude-code/package.json) answers a one-line prompt through gwd (issue 9): `claude -p`
# with ANTHROPIC_BASE_URL at gwd and ANTHROPIC_API_KEY the gateway key, HOME and TMPDIR in
# the test's folder (no state), through (a) an Anthropic Messages upstream (spliced) and
# (b) a Chat Completions upstream (converted: thinking, context_management, output_config,
# metadata, cache_control and the anthropic-beta header dropped and named in x-gw-dropped
# and in the row). gwd's provider has models ["*"], so whatever model Claude Code asks
# for routes.
#
# No request leaves the machine: claude runs in its own network namespace (`unshare -n`,
# or `-r -n` when not root) with only a loopback, through claude-code/netns_run.py, whose
# one way out is a Unix socket this test relays to gwd; everything else has no route and
# no DNS. Every HTTP exchange on that path is recorded (request line, status, headers),
# and the test asserts that each was answered (no endpoint missing), that claude exited 0
# with the fake upstream's text, and that its debug log shows no network failure (so the
# isolation made nothing fail). HTTPS_PROXY/HTTP_PROXY point at a closed port as well.
# Needs node, npm and unshare; `npm ci` installs claude-code/node_modules when missing.

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from gwtest import ALICE_KEY, UP_KEY_A, config, free_port, provider, wait_until

CC = Path(__file__).resolve().parent / "claude-code"
TEXT = "gw-e2e-hello "

# What Claude Code reads to stay quiet: no telemetry, error reports, update checks,
# feedback or other nonessential traffic (its own flags, read from the binary's docs).
QUIET_ENV = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_UPDATES": "1",
    "DISABLE_BUG_COMMAND": "1",
    "DISABLE_FEEDBACK_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
    "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
}
# Lines of claude's debug log that would mean it tried to reach something and could not.
NET_FAILURE_RE = re.compile(
    r"ENETUNREACH|EHOSTUNREACH|EAI_AGAIN|ENOTFOUND|getaddrinfo|ECONNREFUSED|ECONNRESET|"
    r"ETIMEDOUT|socket hang up|Unable to connect|fetch failed|network error|proxy",
    re.IGNORECASE)


def ensure_claude_code():
    assert shutil.which("node"), "node is not installed (apt-get install nodejs npm)"
    exe = CC / "node_modules" / ".bin" / "claude"
    if not exe.exists():
        assert shutil.which("npm"), "npm is not installed"
        p = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                           cwd=CC, capture_output=True, timeout=900)
        assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()
    return str(exe)


def netns_prefix():
    """argv that runs the rest in a new network namespace, or None when not possible."""
    if not shutil.which("unshare") or not shutil.which("ip"):
        return None
    for argv in (["unshare", "-n"], ["unshare", "-r", "-n"]):
        if subprocess.run(argv + ["ip", "link", "set", "lo", "up"],
                          stderr=subprocess.DEVNULL).returncode == 0:
            return argv
    return None


# ---------------------------------------------------------------- the way out: a Unix socket

class Sniff:
    """Reads one direction of an HTTP/1.1 connection and records each message's start
    line and headers (and up to 4 MiB of a request's body)."""

    def __init__(self, response):
        self.response = response
        self.buf = b""
        self.state = "head"
        self.left = 0
        self.msgs = []

    def feed(self, data):
        self.buf += data
        while self.buf:
            if self.state == "head":
                i = self.buf.find(b"\r\n\r\n")
                if i < 0:
                    return
                lines = self.buf[:i].decode("latin-1").split("\r\n")
                self.buf = self.buf[i + 4:]
                hdrs = {}
                for ln in lines[1:]:
                    k, _, v = ln.partition(":")
                    hdrs[k.strip().lower()] = v.strip()
                self.msgs.append({"line": lines[0], "headers": hdrs, "body": b""})
                n = int(hdrs.get("content-length") or 0)
                if "chunked" in hdrs.get("transfer-encoding", "").lower():
                    self.state = "size"
                elif n > 0:
                    self.state, self.left = "body", n
                elif self.response and "content-length" not in hdrs:
                    self.state = "eof"
            elif self.state in ("body", "chunk"):
                take = min(self.left, len(self.buf))
                if not self.response and len(self.msgs[-1]["body"]) < (4 << 20):
                    self.msgs[-1]["body"] += self.buf[:take]
                self.buf, self.left = self.buf[take:], self.left - take
                if self.left:
                    return
                self.state = "size" if self.state == "chunk" else "head"
            elif self.state == "size":
                i = self.buf.find(b"\r\n")
                if i < 0:
                    return
                size = int(self.buf[:i].split(b";")[0] or b"0", 16)
                self.buf = self.buf[i + 2:]
                self.state, self.left = ("trailer", 0) if size == 0 else ("chunk", size + 2)
            elif self.state == "trailer":
                i = self.buf.find(b"\r\n")
                if i < 0:
                    return
                line, self.buf = self.buf[:i], self.buf[i + 2:]
                if not line:
                    self.state = "head"
            else:  # "eof": a body read until the connection closes
                self.buf = b""


class Bridge:
    """A Unix socket in a short temporary folder; each connection is relayed to gwd's
    data port, and both directions are sniffed."""

    def __init__(self, port):
        self.port = port
        self.dir = tempfile.mkdtemp(prefix="gwcc-")
        self.path = os.path.join(self.dir, "gw.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(64)
        self.conns = []  # (request Sniff, response Sniff)
        self.threads = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            up = socket.create_connection(("127.0.0.1", self.port))
            req, resp = Sniff(False), Sniff(True)
            self.conns.append((req, resp))
            for a, b, s in ((c, up, req), (up, c, resp)):
                t = threading.Thread(target=self._pipe, args=(a, b, s), daemon=True)
                t.start()
                self.threads.append(t)

    @staticmethod
    def _pipe(src, dst, sniff):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                sniff.feed(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
                try:
                    s.shutdown(how)
                except OSError:
                    pass

    def exchanges(self):
        """[{request, status, headers (of the answer), body (of the request)}] in order."""
        for t in self.threads:
            t.join(5)
        out = []
        for req, resp in self.conns:
            for i, m in enumerate(req.msgs):
                r = resp.msgs[i] if i < len(resp.msgs) else None
                out.append({"request": m["line"].rsplit(" ", 1)[0],
                            "request_headers": m["headers"],
                            "body": m["body"],
                            "status": int(r["line"].split()[1]) if r else None,
                            "headers": r["headers"] if r else {}})
        return out

    def close(self):
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def run_claude(g, tmp_path, prompt="say hello in one word"):
    exe = ensure_claude_code()
    prefix = netns_prefix()
    if prefix is None:
        pytest.skip("needs unshare -n (or -r -n) and ip: the run must not reach the network")
    home, work, tmp = (Path(tmp_path) / d for d in ("home", "work", "tmp"))
    for d in (home, work, tmp):
        d.mkdir()
    closed = f"http://127.0.0.1:{free_port()}"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
           "TMPDIR": str(tmp), "LANG": "C.UTF-8", "TERM": "dumb",
           "ANTHROPIC_API_KEY": ALICE_KEY,
           "HTTPS_PROXY": closed, "HTTP_PROXY": closed, "ALL_PROXY": closed,
           "NO_PROXY": "127.0.0.1,localhost"}
    env.update(QUIET_ENV)
    debug = Path(tmp_path) / "claude-debug.log"
    bridge = Bridge(g.port)
    try:
        p = subprocess.run([*prefix, sys.executable, str(CC / "netns_run.py"), bridge.path,
                            "--", exe, "-p", prompt, "--debug-file", str(debug)],
                           env=env, cwd=work, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=240)
        ex = bridge.exchanges()
    finally:
        bridge.close()
    log = debug.read_text(errors="replace") if debug.exists() else ""
    return p, ex, log


def describe(p, ex, log):
    """Everything a failure should show: exit code, output, the exchanges, log errors."""
    errs = [ln for ln in log.splitlines() if "[ERROR]" in ln or NET_FAILURE_RE.search(ln)]
    return (f"claude exit {p.returncode}\nstdout: {p.stdout.decode(errors='replace')[-2000:]}\n"
            f"stderr: {p.stderr.decode(errors='replace')[-3000:]}\nexchanges:\n" +
            "\n".join(f"  {e['request']} -> {e['status']} "
                      f"{ {k: v for k, v in e['headers'].items() if k.startswith('x-gw')} }"
                      for e in ex) +
            "\ndebug log errors:\n" + "\n".join(errs[-30:]))


def check_common(p, ex, log):
    why = describe(p, ex, log)
    assert p.returncode == 0, why
    assert p.stdout.decode().strip() == (TEXT * 2).strip(), why
    assert ex, "claude made no request through the gateway\n" + why
    # every request it made through the gateway was answered: no endpoint missing
    for e in ex:
        assert e["status"] == 200, f"{e['request']} answered {e['status']}\n{why}"
        assert e["request_headers"].get("x-api-key") == ALICE_KEY or \
            e["request_headers"].get("authorization") == f"Bearer {ALICE_KEY}", e
    msgs = [e for e in ex if e["request"].split("?")[0] == "POST /v1/messages"]
    assert msgs, why
    # nothing failed for want of a network
    net = [ln for ln in log.splitlines() if NET_FAILURE_RE.search(ln)]
    assert not net, "network failures in claude's debug log:\n" + "\n".join(net[:20])
    return msgs


def rows_for(g, n):
    return wait_until(lambda: (lambda rs: rs if len(rs) >= n else None)(
        [r for r in g.traffic() if r["client"] == "alice"]), what=f"{n} rows for alice")


def test_claude_code_through_a_messages_upstream(tmp_path, bench, gwd):
    b = bench("--chunks", 2, "--text", TEXT)
    g = gwd(config(tmp_path, [provider("up", b, dialect="anthropic")]))

    p, ex, log = run_claude(g, tmp_path)

    msgs = check_common(p, ex, log)
    sent = json.loads(msgs[-1]["body"])
    for e in msgs:
        assert "x-gw-dropped" not in e["headers"], e  # same shape: nothing dropped
    # spliced: the body as Claude Code sent it (its extra fields kept), its beta flags too
    last = b.last()
    assert last["path"].split("?")[0] == "/v1/messages", last
    up = json.loads(last["body"])
    assert up == sent, "a Messages upstream gets the body as sent"
    h = {k.lower(): v for k, v in last["headers"].items()}
    assert h.get("x-api-key") == UP_KEY_A, h
    assert h.get("anthropic-beta") == msgs[-1]["request_headers"].get("anthropic-beta"), h
    assert ALICE_KEY not in json.dumps(last)
    rows = rows_for(g, len(msgs))
    assert all(r["status"] == 200 and r["upstream"] == "up" for r in rows), rows
    assert any(r["model"] == sent["model"] and r["stream"] == bool(sent.get("stream"))
               for r in rows), (rows, sent["model"])
    assert all(r["dropped"] == [] for r in rows), rows
    assert all(r["usage"]["output_tokens"] == 2 for r in rows), rows


def test_claude_code_through_a_chat_upstream(tmp_path, bench, gwd):
    b = bench("--chunks", 2, "--text", TEXT)
    g = gwd(config(tmp_path, [provider("up", b)]))

    p, ex, log = run_claude(g, tmp_path)

    msgs = check_common(p, ex, log)
    sent = json.loads(msgs[-1]["body"])
    last = b.last()
    assert last["path"] == "/v1/chat/completions", last
    up = json.loads(last["body"])
    assert up["model"] == sent["model"]
    assert up.get("stream") is True and sent.get("stream") is True
    # what the Chat shape cannot express and the answer does not need is dropped, named
    # in x-gw-dropped and in the row (DESIGN.md 11); it is not sent upstream
    wanted = [f for f in ("thinking", "context_management", "output_config", "metadata")
              if f in sent]
    assert wanted, f"Claude Code sent none of the fields this test is about: {list(sent)}"
    for f in wanted:
        assert f not in up, f"{f} reached the Chat upstream"
    assert "cache_control" not in last["body"]
    dropped = [x.strip() for x in msgs[-1]["headers"].get("x-gw-dropped", "").split(",")
               if x.strip()]
    for f in wanted + ["cache_control"]:
        assert f in dropped, (f, dropped)
    if msgs[-1]["request_headers"].get("anthropic-beta"):
        assert "anthropic-beta" in dropped, dropped
        assert "anthropic-beta" not in {k.lower() for k in last["headers"]}
    assert ALICE_KEY not in json.dumps(last)
    rows = rows_for(g, len(msgs))
    assert all(r["status"] == 200 and r["upstream"] == "up" for r in rows), rows
    row = [r for r in rows if r["id"] == msgs[-1]["headers"].get("x-request-id")]
    assert row, (rows, msgs[-1]["headers"])
    assert sorted(row[0]["dropped"]) == sorted(dropped), (row[0], dropped)
    assert row[0]["usage"]["output_tokens"] == 2, row[0]
    assert row[0]["usage"]["input_tokens"] > 0, row[0]
