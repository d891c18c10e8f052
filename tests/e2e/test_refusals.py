# SPDX-License-Identifier: MIT
# tests/e2e/test_refusals.py - what gwd refuses on its own: keys, models, bodies, slow
# clients. Every refusal carries x-gw-code, x-request-id and the OpenAI error shape.

import http.client
import socket
import time

import pytest

from gwtest import (ALICE_KEY, REQ_ID_RE, WAIT_TIMEOUT, Resp, chat_body, config, http_request,
                    provider, sha256_hex)


def assert_refusal(r, status, code):
    assert r.status == status, r
    assert r.headers.get("x-gw-code") == code, r.headers
    assert REQ_ID_RE.match(r.headers.get("x-request-id", "")), r.headers
    err = r.json()["error"]
    assert err["code"] == code
    assert err["status"] == status
    assert isinstance(err["message"], str) and err["message"]
    assert isinstance(err["type"], str) and err["type"]


@pytest.fixture
def gw_one(tmp_path, bench, gwd):
    b = bench()
    cfg = config(tmp_path, [provider("up", b, models=["gpt-test", "gpt-other"])],
                 clients=[{"name": "alice", "key_sha256": sha256_hex(ALICE_KEY)},
                          {"name": "scoped", "key_sha256": sha256_hex("scoped-key-1"),
                           "models": ["gpt-test"]}])
    return gwd(cfg), b


def test_missing_key_is_401(gw_one):
    g, b = gw_one
    assert_refusal(g.chat(key=None), 401, "gw.auth.missing_key")
    assert b.stats()["requests"] == 0


@pytest.mark.parametrize("form", ["authorization", "x-api-key"])
def test_invalid_key_is_401(gw_one, form):
    g, b = gw_one
    h = {"Authorization": "Bearer wrong-key"} if form == "authorization" else \
        {"x-api-key": "wrong-key"}
    assert_refusal(g.chat(key=None, headers=h), 401, "gw.auth.invalid_key")
    assert b.stats()["requests"] == 0


def test_unknown_model_is_404(gw_one):
    g, b = gw_one
    assert_refusal(g.chat(chat_body(model="no-such-model")), 404, "gw.model_not_found")
    assert b.stats()["requests"] == 0


def test_model_outside_the_key_scope_is_403(gw_one):
    g, b = gw_one
    assert_refusal(g.chat(chat_body(model="gpt-other"), key="scoped-key-1"), 403,
                   "gw.model_not_allowed")
    assert g.chat(chat_body(model="gpt-test"), key="scoped-key-1").status == 200


def test_body_over_max_body_mb_is_413(gw_one):
    g, b = gw_one
    big = chat_body(text="x" * (1024 * 1024 + 100))
    s = socket.create_connection(("127.0.0.1", g.port), timeout=WAIT_TIMEOUT)
    try:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"
                  b"Authorization: Bearer " + ALICE_KEY.encode() + b"\r\n"
                  b"Content-Type: application/json\r\n"
                  b"Content-Length: " + str(len(big)).encode() + b"\r\n\r\n")
        try:
            s.sendall(big)
        except (BrokenPipeError, ConnectionResetError):
            pass  # gwd may refuse before reading the whole body
        resp = http.client.HTTPResponse(s, method="POST")
        resp.begin()
        body = resp.read()
        r = Resp(resp.status, {k.lower(): v for k, v in resp.getheaders()}, body)
    finally:
        s.close()
    assert_refusal(r, 413, "gw.body_too_large")
    assert b.stats()["requests"] == 0


@pytest.mark.parametrize("body", [b"{not json", b'{"messages":[]}', b"[1,2]"],
                         ids=["bad-json", "no-model", "not-an-object"])
def test_bad_request_body_is_400(gw_one, body):
    g, b = gw_one
    assert_refusal(g.chat(body), 400, "gw.bad_request")
    assert b.stats()["requests"] == 0


def test_half_sent_header_is_closed_after_header_timeout(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b)], server={"header_timeout_secs": 1}))
    s = socket.create_connection(("127.0.0.1", g.port), timeout=WAIT_TIMEOUT)
    try:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n")
        got = b""
        deadline = time.monotonic() + WAIT_TIMEOUT
        while time.monotonic() < deadline:
            try:
                d = s.recv(4096)
            except ConnectionResetError:
                d = b""
            except socket.timeout:
                raise AssertionError(f"gwd kept the half-sent request open; got {got!r}")
            if not d:
                break
            got += d
        else:
            raise AssertionError("gwd kept the half-sent request open")
        # a 408 before closing is allowed; anything else is not
        assert got == b"" or got.startswith(b"HTTP/1.1 408"), got
    finally:
        s.close()


def test_idle_keep_alive_connection_is_closed_after_idle_timeout(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b)], server={"idle_timeout_secs": 1}))
    conn = http.client.HTTPConnection("127.0.0.1", g.port, timeout=WAIT_TIMEOUT)
    try:
        r = g.chat(conn=conn)
        assert r.status == 200, r
        assert conn.sock is not None, "gwd closed the connection right after the answer"
        conn.sock.settimeout(WAIT_TIMEOUT)
        try:
            got = conn.sock.recv(1)
        except ConnectionResetError:
            got = b""
        except socket.timeout:
            raise AssertionError("gwd kept an idle keep-alive connection open")
        assert got == b""
    finally:
        conn.close()


def test_a_kept_alive_connection_is_not_closed_before_its_idle_timeout(tmp_path, bench, gwd):
    """The idle deadline moves with each answer; the timer added for an earlier one (kept
    while the deadline moves less than a second) must not close the connection before
    the later deadline. The second answer comes 0.9 s after the first, so a timer kept
    from the first would close it 3.1 s after the second; the request at 3.5 s after it
    must still be served (the idle timeout is 4 s)."""
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b)], server={"idle_timeout_secs": 4}))
    conn = http.client.HTTPConnection("127.0.0.1", g.port, timeout=WAIT_TIMEOUT)
    try:
        assert g.chat(conn=conn).status == 200
        time.sleep(0.9)  # pacing: the deadline moves by less than the timer's slack
        assert g.chat(conn=conn).status == 200
        sock = conn.sock
        time.sleep(3.5)  # pacing: past the first answer's deadline, before the second's
        r = g.chat(conn=conn)
        assert r.status == 200, r
        assert conn.sock is sock, "gwd closed the connection before its idle timeout"
    finally:
        conn.close()


def test_data_plane_healthz_answers_200(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b)]))
    r = http_request(g.port, "GET", "/healthz")
    assert r.status == 200, r
