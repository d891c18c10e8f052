# SPDX-License-Identifier: MIT
# tests/e2e/test_http2.py - HTTP/2 for clients in cleartext with prior knowledge (h2c,
# net/http2.c): curl and h2load against gwd for plain and streamed Chat requests (the same
# answer as HTTP/1.1's), many streams on one connection, the stream cap, and the
# protections against the HTTP/2 attacks of recent years, each with a raw client
# (Debian's python3-h2 / hyperframe / hpack): rapid reset, CONTINUATION floods, header
# lists over the limit, SETTINGS and PING floods, a zero window held past the idle
# timeout. Also: a drain sends GOAWAY and lets a running stream end; a client that goes
# away cancels its running streams.

import json
import re
import signal
import socket
import subprocess
import threading
import time

import h2.config
import h2.connection
import h2.events
import h2.settings
import hpack
import pytest
from hyperframe.frame import (ContinuationFrame, DataFrame, Frame, GoAwayFrame, HeadersFrame,
                              PingFrame, RstStreamFrame, SettingsFrame, WindowUpdateFrame)

from gwtest import (ALICE_KEY, WAIT_TIMEOUT, bearer, chat_body, config, content_of, provider,
                    sse_events, wait_until)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
ENHANCE_YOUR_CALM = 11
REFUSED_STREAM = 7
CANCEL = 8


def _normalize(raw):
    raw = re.sub(rb'"id"\s*:\s*"[^"]*"', b'"id":"-"', raw)
    return re.sub(rb'"created"\s*:\s*[0-9]+', b'"created":0', raw)


def curl_h2(g, body, extra=()):
    """curl --http2-prior-knowledge: (http version, status, headers, body)."""
    p = subprocess.run(
        ["curl", "-sS", "--http2-prior-knowledge", "-D", "-", "-o", "-",
         "-H", f"authorization: Bearer {ALICE_KEY}", "-H", "content-type: application/json",
         "--data-binary", "@-", *extra, f"{g.url}/v1/chat/completions"],
        input=body, capture_output=True, timeout=WAIT_TIMEOUT)
    assert p.returncode == 0, p.stderr
    head, _, rest = p.stdout.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    version, status = lines[0].split()[:2]
    hdrs = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    return version, int(status), hdrs, rest


class H2:
    """A client on python3-h2 over a plain socket (prior knowledge)."""

    def __init__(self, port, window=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_TIMEOUT)
        self.conn = h2.connection.H2Connection(
            config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        if window is not None:
            self.conn.local_settings = h2.settings.Settings(
                client=True, initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        self.conn.initiate_connection()
        self.streams = {}
        self.goaway = None
        self.closed = False
        self.read_window = window is None  # False: DATA is never acknowledged
        self.flush()

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def request(self, body, path="/v1/chat/completions", key=ALICE_KEY, headers=()):
        sid = self.conn.get_next_available_stream_id()
        h = [(":method", "POST" if body is not None else "GET"), (":path", path),
             (":scheme", "http"), (":authority", "gw")]
        if key:
            h.append(("authorization", f"Bearer {key}"))
        if body is not None:
            h.append(("content-type", "application/json"))
        h.extend(headers)
        self.conn.send_headers(sid, h, end_stream=body is None)
        self.streams[sid] = {"status": None, "headers": {}, "data": b"", "ended": False,
                             "reset": None}
        while body is not None:
            # what the windows allow; then wait for the server's WINDOW_UPDATE
            st = self.streams[sid]
            n = min(len(body), self.conn.local_flow_control_window(sid),
                    self.conn.max_outbound_frame_size)
            if n or not body:
                self.conn.send_data(sid, body[:n], end_stream=n == len(body))
                body = body[n:] if n < len(body) else None
                self.flush()
                continue
            self.pump(lambda: st["ended"] or st["reset"] is not None
                      or self.conn.local_flow_control_window(sid) > 0, what="window")
            if st["ended"] or st["reset"] is not None:
                break  # answered (refused) before the whole body was sent
        self.flush()
        return sid

    def pump(self, until, timeout=WAIT_TIMEOUT, what="condition"):
        """Reads and handles frames until until() holds or the server closes."""
        deadline = time.monotonic() + timeout
        while not until():
            if self.closed:
                raise AssertionError(f"connection closed before {what}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out waiting for {what}")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                data = b""
            if not data:
                self.closed = True
                continue
            for ev in self.conn.receive_data(data):
                self._on(ev)
            self.flush()

    def _on(self, ev):
        st = self.streams.get(getattr(ev, "stream_id", None))
        if isinstance(ev, h2.events.ResponseReceived):
            st["headers"] = dict(ev.headers)
            st["status"] = int(st["headers"][":status"])
        elif isinstance(ev, h2.events.DataReceived):
            st["data"] += ev.data
            if self.read_window:
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.StreamEnded):
            st["ended"] = True
        elif isinstance(ev, h2.events.StreamReset):
            if st is not None:
                st["reset"] = ev.error_code
        elif isinstance(ev, h2.events.ConnectionTerminated):
            self.goaway = ev

    def wait_closed(self, timeout=WAIT_TIMEOUT):
        self.pump(lambda: False if not self.closed else True, timeout, "the close")

    def close(self):
        self.sock.close()


class Raw:
    """Frames written by hand (hyperframe, hpack): what a well-behaved library refuses
    to send. Reads the server's frames until it closes."""

    def __init__(self, port, rcvbuf=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:  # before connect: the TCP window stays small
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(WAIT_TIMEOUT)
        self.sock.connect(("127.0.0.1", port))
        self.enc = hpack.Encoder()
        self.sock.sendall(PREFACE + SettingsFrame(0).serialize())

    def block(self, path="/healthz", method="GET", extra=()):
        return self.enc.encode([(":method", method), (":path", path), (":scheme", "http"),
                                (":authority", "gw"), *extra])

    def send(self, frames):
        try:
            self.sock.sendall(b"".join(f.serialize() for f in frames))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may close before it read everything

    def _read(self, n):
        out = b""
        while len(out) < n:
            try:
                d = self.sock.recv(n - len(out))
            except ConnectionResetError:
                d = b""
            if not d:
                return None
            out += d
        return out

    def next_frame(self):
        """The server's next frame, or None once it closed the connection."""
        hd = self._read(9)
        if hd is None:
            return None
        f, length = Frame.parse_frame_header(memoryview(hd))
        body = self._read(length) if length else b""
        if body is None:
            return None
        f.parse_body(memoryview(body))
        return f

    def frames(self, timeout=WAIT_TIMEOUT):
        """The server's frames until it closes the connection (a deadline fails)."""
        self.sock.settimeout(timeout)
        out = []
        while True:
            f = self.next_frame()
            if f is None:
                return out
            out.append(f)

    def close(self):
        self.sock.close()


def goaways(frames):
    return [f for f in frames if isinstance(f, GoAwayFrame)]


@pytest.fixture
def up(bench):
    return bench("--chunks", 4, "--text", "hi ")


# ---------------------------------------------------------------- requests

def test_curl_plain_chat_over_h2c_is_the_http1_answer(tmp_path, up, gwd):
    g = gwd(config(tmp_path, [provider("up", up)]))
    body = chat_body(temperature=0.5)

    version, status, hdrs, got = curl_h2(g, body)
    h1 = g.chat(body)

    assert version == "HTTP/2", version
    assert status == 200 and h1.status == 200
    assert re.match(r"^[0-9a-f]{32}$", hdrs.get("x-request-id", "")), hdrs
    assert hdrs.get("content-length") == str(len(got))
    assert json.loads(got)["choices"][0]["message"]["content"] == "hi hi hi hi "
    assert _normalize(got) == _normalize(h1.body)


def test_curl_streamed_chat_over_h2c_is_the_http1_answer(tmp_path, up, gwd):
    g = gwd(config(tmp_path, [provider("up", up)]))
    body = chat_body(stream=True, include_usage=True)

    version, status, hdrs, got = curl_h2(g, body)
    h1 = g.chat(body)

    assert version == "HTTP/2" and status == 200, (version, status)
    assert hdrs.get("content-type", "").startswith("text/event-stream"), hdrs
    evs = sse_events(got)
    assert "".join(content_of(e) or "" for e in evs) == "hi hi hi hi "
    assert evs[-1] == "[DONE]"
    assert _normalize(got) == _normalize(h1.body)
    row = g.wait_row(hdrs["x-request-id"])
    assert row["status"] == 200 and row["stream"] is True, row


def test_refusal_on_an_h2_stream_is_in_the_client_shape(tmp_path, up, gwd):
    g = gwd(config(tmp_path, [provider("up", up)]))
    c = H2(g.port)
    sid = c.request(chat_body(), key="wrong-key")
    c.pump(lambda: c.streams[sid]["ended"], what="the refusal")
    st = c.streams[sid]
    assert st["status"] == 401, st
    assert st["headers"].get("x-gw-code") == "gw.auth.invalid_key", st["headers"]
    assert json.loads(st["data"])["error"]["code"] == "gw.auth.invalid_key"
    # the connection goes on
    sid2 = c.request(chat_body())
    c.pump(lambda: c.streams[sid2]["ended"], what="the second answer")
    assert c.streams[sid2]["status"] == 200
    c.close()


def test_many_concurrent_streams_on_one_connection(tmp_path, bench, gwd):
    b = bench("--chunks", 3, "--text", "x ", "--interval-ms", 20)
    g = gwd(config(tmp_path, [provider("up", b)]))
    c = H2(g.port)
    sids = [c.request(chat_body(stream=bool(i % 2), text=f"n{i}")) for i in range(60)]
    c.pump(lambda: all(c.streams[s]["ended"] for s in sids), what="60 answers")
    for i, s in enumerate(sids):
        st = c.streams[s]
        assert st["status"] == 200, st
        if i % 2:
            assert "".join(content_of(e) or "" for e in sse_events(st["data"])) == "x x x "
        else:
            assert json.loads(st["data"])["choices"][0]["message"]["content"] == "x x x "
    assert not c.closed
    c.close()


def test_h2load_many_streams_over_few_connections(tmp_path, up, gwd):
    g = gwd(config(tmp_path, [provider("up", up)]))
    body = tmp_path / "body.json"
    body.write_bytes(chat_body())
    p = subprocess.run(["h2load", "-n", "200", "-c", "2", "-m", "20", "-d", str(body),
                        "-H", f"authorization: Bearer {ALICE_KEY}",
                        "-H", "content-type: application/json",
                        f"{g.url}/v1/chat/completions"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "200 succeeded, 0 failed, 0 errored" in p.stdout, p.stdout
    assert re.search(r"status codes: 200 2xx", p.stdout), p.stdout


# ---------------------------------------------------------------- limits

def test_streams_over_max_concurrent_streams_are_refused(tmp_path, up, gwd):
    g = gwd(config(tmp_path, [provider("up", up)]))
    r = Raw(g.port)
    # 101 requests whose bodies have not come, sent before the server's SETTINGS is read
    frames = []
    for i in range(101):
        frames.append(HeadersFrame(2 * i + 1, r.block("/v1/chat/completions", "POST",
                                                      [("authorization", f"Bearer {ALICE_KEY}")]),
                                   flags=["END_HEADERS"]))
    body = chat_body()
    frames.append(DataFrame(1, body, flags=["END_STREAM"]))
    r.send(frames)
    seen, rst = [], {}
    r.sock.settimeout(WAIT_TIMEOUT)
    deadline = time.monotonic() + WAIT_TIMEOUT
    while time.monotonic() < deadline and not (201 in rst and any(
            isinstance(f, DataFrame) and f.stream_id == 1 and "END_STREAM" in f.flags
            for f in seen)):
        hd = r._read(9)
        assert hd is not None, "closed"
        f, length = Frame.parse_frame_header(memoryview(hd))
        f.parse_body(memoryview(r._read(length) if length else b""))
        seen.append(f)
        if isinstance(f, RstStreamFrame):
            rst[f.stream_id] = f.error_code
    assert rst == {201: REFUSED_STREAM}, rst  # only the 101st
    assert not goaways(seen)
    r.close()


def test_header_list_over_the_limit_is_refused_on_its_stream(tmp_path, up, gwd):
    g = gwd(config(tmp_path, [provider("up", up)], server={"max_header_kb": 4}))
    c = H2(g.port)
    big = [(f"x-pad-{i}", "v" * 1000) for i in range(8)]
    sid = c.request(chat_body(), headers=big)
    c.pump(lambda: c.streams[sid]["ended"] or c.streams[sid]["reset"] is not None,
           what="the refusal")
    st = c.streams[sid]
    assert st["status"] == 431, st
    assert st["headers"].get("x-gw-code") == "gw.headers_too_large"
    sid2 = c.request(chat_body())
    c.pump(lambda: c.streams[sid2]["ended"], what="a request after it")
    assert c.streams[sid2]["status"] == 200
    c.close()


def test_body_over_max_body_is_refused_on_its_stream(tmp_path, up, gwd):
    g = gwd(config(tmp_path, [provider("up", up)], server={"max_body_mb": 1}))
    c = H2(g.port)
    big = chat_body(text="b" * (1100 * 1024))
    sid = c.request(big)
    c.pump(lambda: c.streams[sid]["ended"] or c.streams[sid]["reset"] is not None,
           what="the refusal")
    assert c.streams[sid]["status"] == 413, c.streams[sid]
    assert c.streams[sid]["headers"].get("x-gw-code") == "gw.body_too_large"
    sid2 = c.request(chat_body())
    c.pump(lambda: c.streams[sid2]["ended"], what="a request after it")
    assert c.streams[sid2]["status"] == 200
    c.close()


def test_header_block_not_ended_in_time_closes_the_connection(tmp_path, up, gwd):
    g = gwd(config(tmp_path, [provider("up", up)], server={"header_timeout_secs": 1}))
    r = Raw(g.port)
    t0 = time.monotonic()
    r.send([HeadersFrame(1, r.block())])  # no END_HEADERS, and no CONTINUATION
    r.frames(timeout=15)  # until the server closes
    assert time.monotonic() - t0 >= 0.9
    g.err.wait_for(r"h2_head_timeout")
    r.close()


def test_body_not_sent_in_time_is_answered_408(tmp_path, up, gwd):
    g = gwd(config(tmp_path, [provider("up", up)], server={"body_timeout_secs": 1}))
    r = Raw(g.port)
    r.send([HeadersFrame(1, r.block("/v1/chat/completions", "POST",
                                    [("authorization", f"Bearer {ALICE_KEY}")]),
                         flags=["END_HEADERS"]),
            DataFrame(1, b'{"model":')])  # and nothing more
    t0 = time.monotonic()
    heads = []
    while not heads:
        f = r.next_frame()
        assert f is not None, "closed"
        if isinstance(f, HeadersFrame) and f.stream_id == 1:
            heads.append(hpack.Decoder().decode(f.data))
    assert time.monotonic() - t0 >= 0.9
    assert dict(heads[0])[":status"] == "408", heads
    r.close()


def test_hpack_bomb_gets_goaway_enhance_your_calm(tmp_path, up, gwd):
    g = gwd(config(tmp_path, [provider("up", up)], server={"max_header_kb": 4}))
    r = Raw(g.port)
    # one 4000-byte header into the dynamic table, then referenced by index (one byte
    # each) thousands of times: a small block that decodes into megabytes
    first = r.enc.encode([("x-bomb", "b" * 4000)])
    ref = r.enc.encode([("x-bomb", "b" * 4000)])
    assert len(ref) == 1, ref
    block = r.block() + first + ref * 8000
    r.send([HeadersFrame(1, block[:16000]),
            ContinuationFrame(1, block[16000:], flags=["END_HEADERS"])])
    got = goaways(r.frames())
    assert [f.error_code for f in got] == [ENHANCE_YOUR_CALM], got
    r.close()


def test_continuation_flood_closes_the_connection(tmp_path, up, gwd):
    g = gwd(config(tmp_path, [provider("up", up)]))
    r = Raw(g.port)
    block = r.block(extra=[(f"x-h{i}", "y" * 40) for i in range(64)])
    step = len(block) // 40 + 1
    parts = [block[i:i + step] for i in range(0, len(block), step)]
    frames = [HeadersFrame(1, parts[0])]
    frames += [ContinuationFrame(1, p) for p in parts[1:-1]]  # never END_HEADERS
    assert len(frames) > 20
    r.send(frames)
    got = goaways(r.frames())
    assert got and got[0].error_code != 0, got
    r.close()


def test_rapid_reset_gets_goaway_enhance_your_calm(tmp_path, up, gwd):
    g = gwd(config(tmp_path, [provider("up", up)]))
    r = Raw(g.port)
    frames = []
    for i in range(400):
        sid = 2 * i + 1
        frames.append(HeadersFrame(sid, r.block(), flags=["END_HEADERS"]))
        frames.append(RstStreamFrame(sid, error_code=8))
    r.send(frames)
    got = goaways(r.frames())
    assert [f.error_code for f in got] == [ENHANCE_YOUR_CALM], got
    assert g.err.wait_for(r"h2_enhance_your_calm.*rapid reset")
    r.close()


def test_streams_the_server_must_reset_count_as_rapid_reset(tmp_path, up, gwd):
    g = gwd(config(tmp_path, [provider("up", up)]))
    r = Raw(g.port)
    frames = []
    for i in range(400):
        sid = 2 * i + 1
        # an upper-case header name is a stream error: the server resets the stream
        frames.append(HeadersFrame(sid, r.block(extra=[("X-Upper", "v")]),
                                   flags=["END_HEADERS", "END_STREAM"]))
    r.send(frames)
    got = r.frames()
    assert [f.error_code for f in goaways(got)] == [ENHANCE_YOUR_CALM], goaways(got)
    assert sum(isinstance(f, RstStreamFrame) for f in got) <= 101
    r.close()


def test_a_few_resets_are_allowed(tmp_path, up, gwd):
    g = gwd(config(tmp_path, [provider("up", up)]))
    c = H2(g.port)
    for _ in range(30):
        sid = c.request(chat_body())
        c.conn.reset_stream(sid)
        c.flush()
    sid = c.request(chat_body())
    c.pump(lambda: c.streams[sid]["ended"], what="an answer after 30 resets")
    assert c.streams[sid]["status"] == 200 and c.goaway is None
    c.close()


@pytest.mark.parametrize("kind", ["settings", "ping", "tiny_window_update"])
def test_settings_and_ping_floods_get_goaway_enhance_your_calm(tmp_path, up, gwd, kind):
    g = gwd(config(tmp_path, [provider("up", up)]))
    r = Raw(g.port)
    if kind == "settings":
        frames = [SettingsFrame(0, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 65535})
                  for _ in range(1000)]
    elif kind == "ping":
        frames = [PingFrame(0, opaque_data=i.to_bytes(8, "big")) for i in range(1000)]
    else:  # the data dribble: a window opened a byte at a time
        frames = [WindowUpdateFrame(0, window_increment=1) for _ in range(1000)]
    r.send(frames)
    got = goaways(r.frames())
    assert [f.error_code for f in got] == [ENHANCE_YOUR_CALM], got
    r.close()


def test_answer_waits_for_the_window_and_resumes(tmp_path, bench, gwd):
    b = bench("--chunks", 40, "--text", "w" * 1000)
    g = gwd(config(tmp_path, [provider("up", b)]))
    c = H2(g.port, window=16384)  # DATA is not acknowledged until told
    sid = c.request(chat_body(stream=True))
    st = c.streams[sid]
    c.pump(lambda: len(st["data"]) >= 16384, what="a full window")
    assert len(st["data"]) == 16384 and not st["ended"]  # not a byte past the window
    c.read_window = True
    c.conn.acknowledge_received_data(16384, sid)
    c.flush()
    c.pump(lambda: st["ended"], what="the rest once the window opens")
    evs = sse_events(st["data"])
    assert "".join(content_of(e) or "" for e in evs) == "w" * 40000
    assert evs[-1] == "[DONE]"
    c.close()


def test_zero_window_stream_is_reset_at_the_idle_timeout(tmp_path, bench, gwd):
    # 400 KB: more than the relay queues before it pauses the upstream read (256 KiB),
    # so the request is still running when the stall ends it
    b = bench("--chunks", 200, "--text", "z" * 2000)
    g = gwd(config(tmp_path, [provider("up", b)], server={"idle_timeout_secs": 2}))
    c = H2(g.port, window=0)
    sid = c.request(chat_body(stream=True))
    c.pump(lambda: c.streams[sid]["status"] is not None, what="the head")
    t0 = time.monotonic()
    c.pump(lambda: c.streams[sid]["reset"] is not None, timeout=15, what="the reset")
    took = time.monotonic() - t0
    assert c.streams[sid]["reset"] == CANCEL
    assert c.streams[sid]["data"] == b"" and not c.streams[sid]["ended"]
    assert 1.5 <= took <= 10, took
    g.err.wait_for(r"h2_stalled")
    row = g.wait_row(c.streams[sid]["headers"]["x-request-id"])
    assert row["status"] == 499 and row["code"] == "gw.client.cancelled", row
    # with no stream left the connection itself is idle: GOAWAY and closed
    c.wait_closed(timeout=15)
    assert c.goaway is not None and c.goaway.error_code == 0


def test_client_that_does_not_read_is_closed_at_the_idle_timeout(tmp_path, bench, gwd):
    # 8 MB: more than the socket buffers hold (the kernel's, gwd's output, the stream's)
    b = bench("--chunks", 2000, "--text", "r" * 4000)
    g = gwd(config(tmp_path, [provider("up", b)], server={"idle_timeout_secs": 2}))
    # a large HTTP/2 window: the server may send; the client never reads its socket
    r = Raw(g.port, rcvbuf=4096)
    r.send([SettingsFrame(0, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 2**31 - 1}),
            WindowUpdateFrame(0, window_increment=2**31 - 65536),
            HeadersFrame(1, r.block("/v1/chat/completions", "POST",
                                    [("authorization", f"Bearer {ALICE_KEY}")]),
                         flags=["END_HEADERS"]),
            DataFrame(1, chat_body(stream=True), flags=["END_STREAM"])])
    g.err.wait_for(r"h2_stalled.*connection closed", timeout=20)
    rows = wait_until(lambda: [x for x in g.traffic() if x["status"] == 499] or None,
                      what="the cancelled row")
    assert rows[0]["code"] == "gw.client.cancelled"
    r.close()


# ---------------------------------------------------------------- lifecycle

def test_drain_sends_goaway_and_lets_the_running_stream_end(tmp_path, bench, gwd):
    b = bench("--chunks", 10, "--text", "d ", "--interval-ms", 100)
    g = gwd(config(tmp_path, [provider("up", b)]))
    r = Raw(g.port)
    r.send([HeadersFrame(1, r.block("/v1/chat/completions", "POST",
                                    [("authorization", f"Bearer {ALICE_KEY}")]),
                         flags=["END_HEADERS"]),
            DataFrame(1, chat_body(stream=True), flags=["END_STREAM"])])
    got, goaway_at = [], None
    while True:
        f = r.next_frame()
        assert f is not None, f"closed before the first bytes: {got}"
        got.append(f)
        if isinstance(f, DataFrame) and f.data:
            break
    g.signal(signal.SIGTERM)
    while True:
        f = r.next_frame()
        if f is None:
            break
        if isinstance(f, GoAwayFrame) and goaway_at is None:
            goaway_at = len(got)
        got.append(f)
    ends = [i for i, f in enumerate(got) if isinstance(f, DataFrame) and "END_STREAM" in f.flags]
    assert goaway_at is not None and got[goaway_at].error_code == 0, got
    assert got[goaway_at].last_stream_id == 1
    assert ends and ends[0] > goaway_at, "the stream ended after the GOAWAY"
    evs = sse_events(b"".join(f.data for f in got if isinstance(f, DataFrame)))
    assert "".join(content_of(e) or "" for e in evs) == "d " * 10
    assert evs[-1] == "[DONE]"
    assert g.wait_exit() == 0


def test_client_gone_cancels_every_running_stream(tmp_path, bench, gwd):
    b = bench("--chunks", 50, "--text", "s ", "--interval-ms", 200)
    g = gwd(config(tmp_path, [provider("up", b)],
                   clients=[{"name": "alice", "key_sha256": __import__("gwtest").sha256_hex(
                       ALICE_KEY), "max_concurrent": 2}]))
    c = H2(g.port)
    sids = [c.request(chat_body(stream=True, text=f"t{i}")) for i in range(2)]
    c.pump(lambda: all(c.streams[s]["data"] for s in sids), what="both streams running")
    ids = [c.streams[s]["headers"]["x-request-id"] for s in sids]
    c.close()
    for rid in ids:
        row = g.wait_row(rid)
        assert row["status"] == 499 and row["code"] == "gw.client.cancelled", row
    # the key's two permits are free again: two more run at once
    c2 = H2(g.port)
    more = [c2.request(chat_body(stream=True, text=f"u{i}")) for i in range(2)]
    c2.pump(lambda: all(c2.streams[s]["data"] for s in more), what="two new streams")
    assert all(c2.streams[s]["status"] == 200 for s in more)
    c2.close()
