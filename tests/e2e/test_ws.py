# SPDX-License-Identifier: MIT
# tests/e2e/test_ws.py - the OpenAI Responses API's WebSocket mode (DESIGN.md 12, issue 14
# point 4): GET /v1/responses upgraded to a WebSocket, each response.create its own turn
# through the pipeline. With the official openai npm SDK's ResponsesWS (sdk/ws.js): two
# turns chained by previous_response_id against an upstream of each shape (Chat and
# Responses with store true and false, Messages, Gemini, Bedrock), a turn refused by a
# key limit while the socket stays open, a client close mid-turn (upstream stream
# aborted, slot and permit freed). With a raw socket: a malformed message, a second
# response.create while one runs, an oversized message, a bad key or a bad handshake at
# the upgrade, ping/pong, the idle timeout, a client that reads nothing, a busy turn
# (response.failed gw.key_busy), priced rows, an upstream cut mid-turn, a drain
# closing with 1001, turns over TLS, stream_id tagging a turn's events, and a ping
# flood from a client that reads nothing.

import base64
import json
import os
import signal
import socket
import struct
import subprocess

import pytest

from gwtest import (ALICE_KEY, AWS_BENCH_ARGS, config, overview, provider, sha256_hex, squeeze,
                    wait_until)
from test_sdk import SDK, ensure_node_modules

MODEL = "gpt-test"
TEXT = "ws "
TEXT_EVENTS = ["response.created", "response.in_progress", "response.output_item.added",
               "response.content_part.added", "response.output_text.delta",
               "response.output_text.done", "response.content_part.done",
               "response.output_item.done", "response.completed"]


def run_ws_js(g, turns, key=ALICE_KEY):
    p = subprocess.run(["node", str(SDK / "ws.js"), g.url + "/v1", key, json.dumps(turns)],
                       capture_output=True, timeout=120)
    out = p.stdout.decode()
    assert p.returncode == 0, out + p.stderr.decode()
    return json.loads(out.strip().splitlines()[-1])


def rows(g, n):
    """The newest <n> traffic rows, oldest first, once there are that many."""
    def got():
        r = g.traffic()
        return r if len(r) >= n else None
    return list(reversed(wait_until(got, what=f"{n} traffic rows")[:n]))


class RawWS:
    """A minimal WebSocket client on a plain socket (RFC 6455 framing, masked frames):
    enough to send what the SDK never sends (malformed messages, pings, oversized
    frames) and to read close codes."""

    def __init__(self, port, key=ALICE_KEY, headers=None, rcvbuf=None, tls=None,
                 path="/v1/responses"):
        self.s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:  # a small window: a client that stops reading stalls the gateway soon
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.s.settimeout(20)
        self.s.connect(("127.0.0.1", port))
        if tls:  # an ssl.SSLContext: wss://
            self.s = tls.wrap_socket(self.s, server_hostname="localhost")
        nonce = base64.b64encode(os.urandom(16)).decode()
        h = {"Host": f"127.0.0.1:{port}", "Connection": "Upgrade", "Upgrade": "websocket",
             "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": nonce}
        if key is not None:
            h["Authorization"] = f"Bearer {key}"
        h.update(headers or {})
        req = f"GET {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items())
        self.s.sendall((req + "\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            d = self.s.recv(65536)
            if not d:
                break
            self.buf += d
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {k.lower(): v.strip() for k, _, v in
                        (ln.partition(":") for ln in lines[1:])}
        if self.status != 101:  # an HTTP answer: its body follows
            n = int(self.headers.get("content-length", "0"))
            while len(self.buf) < n:
                d = self.s.recv(65536)
                if not d:
                    break
                self.buf += d
            self.body = self.buf[:n]

    def send_frame(self, payload, opcode=1, fin=True):
        if isinstance(payload, str):
            payload = payload.encode()
        n = len(payload)
        b0 = (0x80 if fin else 0) | opcode
        if n < 126:
            hdr = struct.pack("!BB", b0, 0x80 | n)
        elif n < 65536:
            hdr = struct.pack("!BBH", b0, 0x80 | 126, n)
        else:
            hdr = struct.pack("!BBQ", b0, 0x80 | 127, n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload)) if n < 65536 else \
            (int.from_bytes(payload, "big") ^ int.from_bytes((mask * (n // 4 + 1))[:n], "big")
             ).to_bytes(n, "big")
        self.s.sendall(hdr + mask + masked)

    def send_json(self, obj):
        self.send_frame(json.dumps(obj))

    def _need(self, n):
        while len(self.buf) < n:
            d = self.s.recv(65536)
            if not d:
                raise EOFError("the gateway closed the socket")
            self.buf += d

    def recv_frame(self):
        """(opcode, payload) of the next frame from the gateway (never masked)."""
        self._need(2)
        b0, b1 = self.buf[0], self.buf[1]
        assert not b1 & 0x80, "a server frame must not be masked"
        n, off = b1 & 0x7F, 2
        if n == 126:
            self._need(4)
            n, off = struct.unpack("!H", self.buf[2:4])[0], 4
        elif n == 127:
            self._need(10)
            n, off = struct.unpack("!Q", self.buf[2:10])[0], 10
        self._need(off + n)
        payload, self.buf = self.buf[off:off + n], self.buf[off + n:]
        assert b0 & 0x80, "the gateway sends whole messages"
        return b0 & 0x0F, payload

    def recv_event(self):
        op, p = self.recv_frame()
        assert op == 1, (op, p)
        return json.loads(p)

    def recv_close(self):
        """The close code of the gateway's close frame (skipping messages before it)."""
        while True:
            op, p = self.recv_frame()
            if op == 8:
                return struct.unpack("!H", p[:2])[0] if len(p) >= 2 else None

    def turn(self, body):
        """Sends one response.create; returns its events up to the final one."""
        self.send_json({"type": "response.create", **body})
        return self.events_until_final()

    def events_until_final(self):
        evs = []
        while True:
            ev = self.recv_event()
            evs.append(ev)
            if ev["type"] in ("response.completed", "response.failed", "response.incomplete",
                              "error"):
                return evs

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def ws_gwd(tmp_path, bench, gwd, server=None, clients=None, bench_args=(), **top):
    b = bench("--chunks", 3, "--text", TEXT, *bench_args)
    g = gwd(config(tmp_path, [provider("up", b)], server=server, clients=clients, **top))
    return b, g


# ---------------------------------------------------------------- the official SDK

@pytest.mark.parametrize("dialect,store", [("openai", True), ("openai", False),
                                           ("responses", True), ("responses", False),
                                           ("anthropic", False), ("gemini", True),
                                           ("bedrock", False)])
def test_sdk_two_turns_chained_by_previous_response_id(tmp_path, bench, gwd, dialect, store):
    """Two response.create turns on one ResponsesWS socket, the second continuing the
    first by previous_response_id: each is answered with the Responses stream events, each
    is its own row with its usage; the upstream got the first turn (a Responses upstream
    by the id when the response was stored, otherwise the history in its own shape, from
    the connection's memory when store is false)."""
    ensure_node_modules()
    aws = AWS_BENCH_ARGS if dialect == "bedrock" else []  # SigV4 checked
    b = bench(*aws, "--chunks", 3, "--text", TEXT)
    g = gwd(config(tmp_path, [provider("up", b, dialect=dialect)]))
    res = run_ws_js(g, [
        {"body": {"model": MODEL, "input": "first question", "store": store}},
        {"body": {"model": MODEL, "input": "second question", "store": store}, "chain": True}])
    assert len(res["turns"]) == 2, res
    ids = []
    for t in res["turns"]:
        assert t["error"] is None, t
        assert squeeze(t["events"]) == TEXT_EVENTS, t["events"]
        assert t["text"] == TEXT * 3, t
        r = t["final"]["response"]
        assert r["status"] == "completed" and r["usage"]["output_tokens"] == 3, r
        ids.append(r["id"])
    assert ids[0] != ids[1], ids
    assert res["close"]["code"] == 1000, res  # closed by the client, cleanly

    sent = b.last_body()
    text = json.dumps(sent)
    if dialect == "responses" and store:
        assert sent.get("previous_response_id") == ids[0], sent
    else:  # the history, in order, and no id the upstream cannot know
        i1, i2, i3 = (text.find(s) for s in ("first question", TEXT * 3, "second question"))
        assert 0 <= i1 < i2 < i3, text
        assert "previous_response_id" not in text, text
    # one row per turn, streamed, with the upstream's usage
    got = rows(g, 2)
    assert [(r["status"], r["upstream"], r["stream"], r["usage"]["output_tokens"])
            for r in got] == [(200, "up", True, 3)] * 2, got
    assert [r["usage"]["input_tokens"] > 0 for r in got] == [True, True], got


def test_sdk_turn_refused_by_a_key_limit_keeps_the_socket(tmp_path, bench, gwd):
    """A turn refused by the key's token limit (its input estimate does not fit what is
    left) gets response.failed with the gw code; the socket stays open and the next,
    small turn is answered."""
    ensure_node_modules()
    key = "sk-limited-ws"
    _, g = ws_gwd(tmp_path, bench, gwd, clients=[
        {"name": "lim", "key_sha256": sha256_hex(key),
         "limits": [{"per": "day", "tokens": 300}]}])
    res = run_ws_js(g, [{"body": {"model": MODEL, "input": "small"}},
                        {"body": {"model": MODEL, "input": "big " * 2000}},
                        {"body": {"model": MODEL, "input": "small again"}}], key=key)
    first, refused, third = res["turns"]
    assert first["final"]["type"] == "response.completed", first
    assert refused["final"] and refused["final"]["type"] == "response.failed", refused
    err = refused["final"]["response"]["error"]
    assert err["code"] == "gw.key_limit.tokens_per_period", err
    assert refused["final"]["response"]["status"] == "failed", refused
    assert third["final"]["type"] == "response.completed", third
    assert third["text"] == TEXT * 3, third
    assert res["close"]["code"] == 1000, res
    got = rows(g, 3)
    assert [(r["status"], r["code"]) for r in got] == [
        (200, None), (429, "gw.key_limit.tokens_per_period"), (200, None)], got


def test_sdk_client_close_mid_turn_cancels_it(tmp_path, bench, gwd):
    """The client closes its socket in the middle of a turn: the upstream stream is
    aborted, the row says 499 gw.client.cancelled, and the upstream slot and the key's
    permit are free again (the overview counts nothing in flight)."""
    ensure_node_modules()
    b = bench("--chunks", 100, "--text", TEXT, "--interval-ms", 100)
    g = gwd(config(tmp_path, [provider("up", b, max_concurrent=1)], clients=[
        {"name": "alice", "key_sha256": sha256_hex(ALICE_KEY), "max_concurrent": 1}]))
    res = run_ws_js(g, [{"body": {"model": MODEL, "input": "long"}, "close_after": 6}])
    (t,) = res["turns"]
    assert t["final"] is None and len(t["events"]) >= 6, t
    assert "response.output_text.delta" in t["events"], t
    b.wait_stat(lambda s: s["streams_aborted"] == 1, "the upstream stream aborted")
    (row,) = rows(g, 1)
    assert (row["status"], row["code"]) == (499, "gw.client.cancelled"), row
    ov = overview(g)
    assert [p["in_flight"] for p in ov["providers"] if p["name"] == "up"] == [0], ov
    assert [k["in_flight"] for k in ov["keys"] if k["name"] == "alice"] == [0], ov


# ---------------------------------------------------------------- raw sockets

def test_bad_key_is_refused_before_the_upgrade(tmp_path, bench, gwd):
    _, g = ws_gwd(tmp_path, bench, gwd)
    for key, code in (("sk-wrong", "gw.auth.invalid_key"), (None, "gw.auth.missing_key")):
        w = RawWS(g.port, key=key)
        assert w.status == 401, (w.status, w.headers)
        assert w.headers["x-gw-code"] == code, w.headers
        assert "upgrade" not in w.headers, w.headers
        assert json.loads(w.body)["error"]["code"] == code, w.body
        w.close()
    # a handshake with a bad Sec-WebSocket-Key, another version or no Connection: Upgrade
    # is no upgrade either
    for h in ({"Sec-WebSocket-Key": "short"}, {"Sec-WebSocket-Version": "8"},
              {"Connection": "keep-alive"}):
        w = RawWS(g.port, headers=h)
        assert w.status == 400 and w.headers["x-gw-code"] == "gw.http.bad_request", \
            (h, w.headers)
        w.close()
    # the key in the query, as ?key= (DESIGN 4): the upgrade and every turn use it
    w = RawWS(g.port, key=None, path=f"/v1/responses?key={ALICE_KEY}")
    assert w.status == 101, w.headers
    for _ in range(2):
        assert w.turn({"model": MODEL, "input": "hi"})[-1]["type"] == "response.completed"
    w.close()


def test_malformed_messages_get_error_events_and_the_socket_stays(tmp_path, bench, gwd):
    _, g = ws_gwd(tmp_path, bench, gwd)
    w = RawWS(g.port)
    assert w.status == 101, w.headers
    for bad in ("not json", "[1,2]", '{"no":"type"}', '{"type":"response.steer"}',
                '{"type":"response.create","model":"x","background":true}',
                '{"type":"response.create","model":"x","generate":false}'):
        w.send_frame(bad)
        ev = w.recv_event()
        assert ev["type"] == "error", (bad, ev)
        assert ev["error"]["code"] == "gw.ws.bad_message" and ev["status"] == 400, (bad, ev)
    w.send_frame(b"\x00\x01", opcode=2)  # binary
    ev = w.recv_event()
    assert ev["type"] == "error" and ev["error"]["code"] == "gw.ws.bad_message", ev
    # a request the pipeline refuses (no model): response.failed, not an error event
    evs = w.turn({"input": "hi"})
    assert [e["type"] for e in evs] == ["response.failed"], evs
    assert evs[0]["response"]["error"]["code"] == "gw.bad_request", evs
    evs = w.turn({"model": MODEL, "input": "hi"})
    assert evs[-1]["type"] == "response.completed", evs
    w.close()


def test_a_second_create_while_one_runs_gets_an_error(tmp_path, bench, gwd):
    _, g = ws_gwd(tmp_path, bench, gwd, bench_args=("--interval-ms", 100))
    w = RawWS(g.port)
    w.send_json({"type": "response.create", "model": MODEL, "input": "one"})
    first = w.recv_event()
    assert first["type"] == "response.created", first
    w.send_json({"type": "response.create", "model": MODEL, "input": "two"})
    evs = w.events_until_final()
    errors = [e for e in evs if e["type"] == "error"]
    assert len(errors) == 1 and errors[0]["error"]["code"] == "gw.ws.turn_running", evs
    # the first turn goes on to its end; the error was the second's answer
    rest = evs if evs[-1]["type"] != "error" else w.events_until_final()
    assert rest[-1]["type"] == "response.completed", rest
    assert rest[-1]["response"]["output"][0]["content"][0]["text"] == TEXT * 3, rest
    got = rows(g, 1)
    assert len(g.traffic()) == 1, got  # the refused create never became a request
    w.close()


def test_oversized_message_closes_with_1009(tmp_path, bench, gwd):
    _, g = ws_gwd(tmp_path, bench, gwd)  # max_body_mb 1
    w = RawWS(g.port)
    w.send_frame(json.dumps({"type": "response.create", "model": MODEL,
                             "input": "x" * (1024 * 1024 + 10)}))
    assert w.recv_close() == 1009
    w.close()


def test_ping_is_answered_with_pong(tmp_path, bench, gwd):
    _, g = ws_gwd(tmp_path, bench, gwd)
    w = RawWS(g.port)
    w.send_frame(b"are you there", opcode=9)
    assert w.recv_frame() == (10, b"are you there")
    evs = w.turn({"model": MODEL, "input": "hi"})
    assert evs[-1]["type"] == "response.completed", evs
    w.close()


def test_idle_socket_is_closed_with_1001(tmp_path, bench, gwd):
    _, g = ws_gwd(tmp_path, bench, gwd, server={"idle_timeout_secs": 1})
    w = RawWS(g.port)
    assert w.recv_close() == 1001
    w.close()


def test_drain_closes_with_1001_after_the_running_turn(tmp_path, bench, gwd):
    _, g = ws_gwd(tmp_path, bench, gwd, bench_args=("--interval-ms", 150))
    idle = RawWS(g.port)
    w = RawWS(g.port)
    w.send_json({"type": "response.create", "model": MODEL, "input": "one"})
    assert w.recv_event()["type"] == "response.created"
    g.signal(signal.SIGTERM)
    assert idle.recv_close() == 1001  # no turn: closed at once
    evs = w.events_until_final()
    assert evs[-1]["type"] == "response.completed", evs  # the running turn ends first
    assert w.recv_close() == 1001
    assert g.wait_exit() == 0
    w.close()
    idle.close()


def test_upstream_failing_mid_turn_fails_the_turn(tmp_path, bench, gwd):
    """An upstream stream cut after its first deltas: the turn ends with response.failed
    gw.ws.upstream_closed, and the socket stays open for the next turn (which the same
    fault header cuts again)."""
    _, g = ws_gwd(tmp_path, bench, gwd, bench_args=("--interval-ms", 20))
    w = RawWS(g.port, headers={"x-bench-fault": "drop-mid", "x-bench-drop-after": "2"})
    for _ in range(2):
        evs = w.turn({"model": MODEL, "input": "hi"})
        types = [e["type"] for e in evs]
        assert "response.output_text.delta" in types, types
        assert types[-1] == "response.failed", types
        err = evs[-1]["response"]["error"]
        assert "gw.ws.upstream_closed" in (err.get("code"), err.get("gw_code")), err
    got = rows(g, 2)
    assert [r["code"] for r in got] == ["gw.ws.upstream_closed"] * 2, got
    w.close()


def test_a_client_that_reads_nothing_is_closed_and_its_turn_cancelled(tmp_path, bench, gwd):
    """A client that sends a turn and never reads: once the socket has taken no byte for
    idle_timeout_secs the gateway closes it, and the turn is cancelled (row 499, the
    upstream stream aborted) instead of holding its slot."""
    b = bench("--chunks", 10000, "--text", "x" * 4000, "--interval-ms", 1)
    g = gwd(config(tmp_path, [provider("up", b)], server={"idle_timeout_secs": 1}))
    w = RawWS(g.port, rcvbuf=4096)
    w.send_json({"type": "response.create", "model": MODEL, "input": "flood"})
    (row,) = rows(g, 1)
    assert (row["status"], row["code"]) == (499, "gw.client.cancelled"), row
    b.wait_stat(lambda s: s["streams_aborted"] == 1, "the upstream stream aborted")
    g.err.wait_for(r"code=ws_stalled")
    w.close()


def test_busy_turn_gets_response_failed_and_the_socket_stays(tmp_path, bench, gwd):
    """The key's one permit is held by a turn on another socket and slot_wait_secs is 0:
    the turn is refused busy with response.failed gw.key_busy; once the other turn ended
    the same socket's next turn runs."""
    b = bench("--chunks", 3, "--text", TEXT)
    g = gwd(config(tmp_path, [provider("up", b)], failover={"slot_wait_secs": 0},
                   clients=[{"name": "alice", "key_sha256": sha256_hex(ALICE_KEY),
                             "max_concurrent": 1}]))
    holder = RawWS(g.port, headers={"x-bench-interval-ms": "300"})
    holder.send_json({"type": "response.create", "model": MODEL, "input": "hold"})
    assert holder.recv_event()["type"] == "response.created"
    w = RawWS(g.port)
    evs = w.turn({"model": MODEL, "input": "refused"})
    assert [e["type"] for e in evs] == ["response.failed"], evs
    r = evs[0]["response"]
    assert r["status"] == "failed" and r["error"]["code"] == "gw.key_busy", r
    assert holder.events_until_final()[-1]["type"] == "response.completed"
    evs = w.turn({"model": MODEL, "input": "now"})
    assert evs[-1]["type"] == "response.completed", evs
    got = rows(g, 3)
    assert sorted((r["status"], r["code"]) for r in got) == [
        (200, None), (200, None), (429, "gw.key_busy")], got
    holder.close()
    w.close()


def test_turn_rows_are_priced(tmp_path, bench, gwd):
    """Each turn's row carries its usage priced from the price table."""
    (tmp_path / "prices.yaml").write_text(
        "models:\n  - {model: m1, input: 2.0, output: 8.0, cache_read: 0.5}\n")
    b = bench("--chunks", 5, "--text", TEXT)
    g = gwd(config(tmp_path, [provider("up", b)], prices="prices.yaml"))
    w = RawWS(g.port)
    for _ in range(2):
        assert w.turn({"model": "m1", "input": "price me"})[-1]["type"] == "response.completed"
    for row in rows(g, 2):
        u = row["usage"]
        assert u["output_tokens"] == 5 and not u["estimated"], row
        want = (u["input_tokens"] * 2.0 + u["output_tokens"] * 8.0) / 1e6
        assert row["cost_usd"] == pytest.approx(want, abs=1e-6) and row["cost_usd"] > 0, row
    w.close()


def test_turns_over_tls(tmp_path, bench, gwd):
    """wss://: the upgrade and the turns on a TLS listener (HTTP/1.1 by ALPN)."""
    import ssl

    from test_tls_listen import make_pki, tls_config, tls_port

    make_pki(tmp_path)
    b = bench("--chunks", 3, "--text", TEXT)
    g = gwd(tls_config(tmp_path, b))
    ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    ctx.set_alpn_protocols(["http/1.1"])
    w = RawWS(tls_port(g), tls=ctx)
    assert w.status == 101, w.headers
    for _ in range(2):
        evs = w.turn({"model": MODEL, "input": "secret"})
        assert evs[-1]["type"] == "response.completed", evs
        assert evs[-1]["response"]["output"][0]["content"][0]["text"] == TEXT * 3, evs
    w.send_frame(struct.pack("!H", 1000), opcode=8)
    assert w.recv_close() == 1000
    w.close()


def test_stream_id_tags_every_event_of_its_turn(tmp_path, bench, gwd):
    """A create with a stream_id (OpenAI's lanes): every event of its turn carries it, and
    so does the error answering a create on another lane while the turn runs (one turn at
    a time)."""
    _, g = ws_gwd(tmp_path, bench, gwd, bench_args=("--interval-ms", 100))
    w = RawWS(g.port)
    w.send_json({"type": "response.create", "model": MODEL, "input": "a", "stream_id": "lane-1"})
    first = w.recv_event()
    assert first["type"] == "response.created" and first["stream_id"] == "lane-1", first
    w.send_json({"type": "response.create", "model": MODEL, "input": "b", "stream_id": "lane-2"})
    evs = [first] + w.events_until_final()
    errors = [e for e in evs if e["type"] == "error"]
    assert [(e["error"]["code"], e["stream_id"]) for e in errors] == [
        ("gw.ws.turn_running", "lane-2")], errors
    rest = [e for e in evs if e["type"] != "error"]
    if rest[-1]["type"] != "response.completed":
        rest += w.events_until_final()
    assert rest[-1]["type"] == "response.completed", rest
    assert {e["stream_id"] for e in rest} == {"lane-1"}, rest
    # the next turn without a stream_id has none
    evs = w.turn({"model": MODEL, "input": "c"})
    assert evs[-1]["type"] == "response.completed" and all("stream_id" not in e for e in evs)
    w.close()


def test_a_ping_flood_from_a_client_that_reads_nothing_stops_being_read(tmp_path, bench,
                                                                         gwd):
    """Pings sent without reading the pongs: once the answers waiting for the client pass
    a bound the gateway reads no more of its input, so the client's sends block (the
    memory held for it stays bounded) instead of the pongs piling up."""
    _, g = ws_gwd(tmp_path, bench, gwd)
    w = RawWS(g.port, rcvbuf=4096)
    mask = b"\x01\x02\x03\x04"
    frame = bytes([0x89, 0x80 | 125]) + mask + bytes(b ^ mask[i % 4]
                                                     for i, b in enumerate(b"p" * 125))
    blob = frame * 2000
    w.s.settimeout(2)
    sent = 0
    try:
        while sent < 128 * 1024 * 1024:
            sent += w.s.send(blob)
    except socket.timeout:
        pass
    assert sent < 64 * 1024 * 1024, sent  # kernel buffers and 256 KiB of pongs at most
    w.close()
    other = RawWS(g.port)  # the gateway serves on
    assert other.turn({"model": MODEL, "input": "hi"})[-1]["type"] == "response.completed"
    other.close()
