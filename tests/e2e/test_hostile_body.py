# SPDX-License-Identifier: MIT
# tests/e2e/test_hostile_body.py - issue 8, one body per request: a body holding twice a
# top-level field the gateway reads ({"model":"allowed","model":"other"}) is refused with
# 400 gw.bad_request naming the field, before anything reaches the upstream, whichever
# copy comes first and whatever shape the upstream speaks; a duplicate the gateway
# never reads passes as it was sent. Requests go out as raw bytes on a socket, so the
# duplicates reach gwd exactly as written.

import http.client
import socket

import pytest

from gwtest import REQ_ID_RE, WAIT_TIMEOUT, Resp, config, provider, sha256_hex

SCOPED_KEY = "gw-key-scoped-issue-8-0123456789"


def raw_chat(port, body, key=SCOPED_KEY):
    """POST <body> (bytes, sent as they are) to /v1/chat/completions; returns Resp."""
    s = socket.create_connection(("127.0.0.1", port), timeout=WAIT_TIMEOUT)
    try:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"
                  b"Authorization: Bearer " + key.encode() + b"\r\n"
                  b"Content-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        resp = http.client.HTTPResponse(s, method="POST")
        resp.begin()
        data = resp.read()
        return Resp(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
    finally:
        s.close()


@pytest.fixture(params=["openai", "anthropic"])
def gw_scoped(request, tmp_path, bench, gwd):
    """gwd in front of one upstream of the given shape offering "allowed" and "other";
    the key SCOPED_KEY may use "allowed" only."""
    b = bench()
    up = provider("up", b, models=["allowed", "other"], dialect=request.param)
    g = gwd(config(tmp_path, [up], clients=[
        {"name": "scoped", "key_sha256": sha256_hex(SCOPED_KEY), "models": ["allowed"]}]))
    return g, b


def assert_duplicate_refused(g, r, field):
    assert r.status == 400, r
    assert r.headers.get("x-gw-code") == "gw.bad_request", r.headers
    assert REQ_ID_RE.match(r.headers.get("x-request-id", "")), r.headers
    err = r.json()["error"]
    assert err["code"] == "gw.bad_request", err
    assert err["message"] == f'duplicate key "{field}" in the request body', err
    row = g.wait_row(r.headers["x-request-id"])
    assert row["code"] == "gw.bad_request" and row["attempts"] == [], row


MSGS = b'"messages":[{"role":"user","content":"say hello"}]'


@pytest.mark.parametrize("body", [
    b'{"model":"allowed","model":"other",' + MSGS + b'}',
    b'{"model":"other",' + MSGS + b',"model":"allowed"}',
    b'{"model":"allowed",' + MSGS + b',"mod\\u0065l":"other"}',
    b'{"model":"allowed","model":"allowed",' + MSGS + b'}',
], ids=["allowed-first", "allowed-last", "escaped-spelling", "same-value"])
def test_issue_8_duplicate_model_is_refused_and_nothing_reaches_the_upstream(gw_scoped, body):
    g, b = gw_scoped

    r = raw_chat(g.port, body)

    assert_duplicate_refused(g, r, "model")
    assert b.stats()["requests"] == 0


@pytest.mark.parametrize("body,field", [
    (b'{"model":"allowed",' + MSGS + b',' + MSGS + b'}', "messages"),
    (b'{"model":"allowed",' + MSGS + b',"stream":false,"stream":true}', "stream"),
    (b'{"model":"allowed",' + MSGS + b',"max_tokens":1,"max_tokens":100000}', "max_tokens"),
    (b'{"model":"allowed",' + MSGS + b',"stream":true,'
     b'"stream_options":{"include_usage":false,"include_usage":true}}',
     "stream_options.include_usage"),
], ids=["messages", "stream", "max_tokens", "include_usage"])
def test_issue_8_other_duplicate_read_fields_are_refused(gw_scoped, body, field):
    g, b = gw_scoped

    r = raw_chat(g.port, body)

    assert_duplicate_refused(g, r, field)
    assert b.stats()["requests"] == 0


def test_issue_8_the_same_body_without_the_duplicate_is_served(gw_scoped):
    g, b = gw_scoped

    assert raw_chat(g.port, b'{"model":"other",' + MSGS + b'}').status == 403
    r = raw_chat(g.port, b'{"model":"allowed",' + MSGS + b'}')

    assert r.status == 200, r
    assert b.stats()["requests"] == 1
    assert b.last_body()["model"] == "allowed"


def test_issue_8_a_duplicate_the_gateway_does_not_read_is_forwarded_as_sent(tmp_path, bench,
                                                                           gwd):
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b, models=["allowed"])], clients=[
        {"name": "scoped", "key_sha256": sha256_hex(SCOPED_KEY), "models": ["allowed"]}]))
    body = b'{"model":"allowed",' + MSGS + b',"temperature":0.1,"temperature":0.7}'

    r = raw_chat(g.port, body)

    assert r.status == 200, r
    assert b.stats()["requests"] == 1
    assert b.last_body_bytes() == body  # nothing it decided depends on the copy read
