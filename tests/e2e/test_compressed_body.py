# SPDX-License-Identifier: MIT
# tests/e2e/test_compressed_body.py - request bodies sent with a Content-Encoding (coding
# CLIs compress what they send; Codex uses zstd): gzip, x-gzip, deflate, br, zstd and a
# stacked "gzip, br" (also as two header lines) are decoded, and the upstream receives
# the plain JSON without Content-Encoding; a body whose decoded size passes
# max_body_mb gets 413 gw.body_too_large in the client's shape; a 10 GiB gzip bomb is
# stopped at the limit (413, gwd's peak memory far below what it would inflate to);
# corrupt data gets 400 gw.bad_request naming the coding; an unknown coding 415
# gw.unsupported_encoding (Chat and Messages shapes); the decoded body is what counts in
# max_buffered_body_mb while it is held, and a body that fits the budget alone is not
# refused for having been held twice while it was decoded. Bodies are made with
# Python's zlib and Debian's python3-brotli and python3-zstandard.

import base64
import http.client
import json
import random
import re
import socket
import zlib

import brotli  # python3-brotli (tools/deps.sh)
import pytest
import zstandard  # python3-zstandard (tools/deps.sh)

from gwtest import (ALICE_KEY, REQ_ID_RE, WAIT_TIMEOUT, Resp, bearer, chat_body, config,
                    http_request, provider, wait_until)

VERSION = {"anthropic-version": "2023-06-01"}


def gzip_of(b):
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    return c.compress(b) + c.flush()


def raw_deflate_of(b):
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return c.compress(b) + c.flush()


ENCODERS = {
    "gzip": gzip_of,
    "x-gzip": gzip_of,
    "deflate": zlib.compress,
    "br": brotli.compress,
    "zstd": lambda b: zstandard.ZstdCompressor().compress(b),
}


def post(g, path, body, encoding, headers=None, key=ALICE_KEY):
    h = {"Content-Encoding": encoding} if encoding is not None else {}
    h.update(bearer(key))
    h.update(headers or {})
    return http_request(g.port, "POST", path, body, h)


def raw_post(port, body, header_lines):
    """POST <body> with <header_lines> (bytes, repeated names allowed) on a socket."""
    s = socket.create_connection(("127.0.0.1", port), timeout=WAIT_TIMEOUT)
    try:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"
                  b"Authorization: Bearer " + ALICE_KEY.encode() + b"\r\n"
                  b"Content-Type: application/json\r\n" + b"".join(
                      h + b"\r\n" for h in header_lines) +
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        resp = http.client.HTTPResponse(s, method="POST")
        resp.begin()
        return Resp(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        s.close()


def assert_chat_refusal(r, status, code, message_has):
    assert r.status == status, r
    assert r.headers.get("x-gw-code") == code, r.headers
    assert REQ_ID_RE.match(r.headers.get("x-request-id", "")), r.headers
    err = r.json()["error"]
    assert err["code"] == code, err
    assert message_has in err["message"], err


def upstream_headers(b):
    return {k.lower(): v for k, v in b.last()["headers"].items()}


def gauge(g, name):
    r = http_request(g.control_port, "GET", "/metrics")
    return int(re.search("^" + name + r" (\d+)$", r.body.decode(), re.M).group(1))


def peak_rss_kib(g):
    with open(f"/proc/{g.p.pid}/status") as f:
        return int(re.search(r"^VmHWM:\s+(\d+) kB", f.read(), re.M).group(1))


@pytest.fixture
def gw_one(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b, models=["gpt-test"])]))
    return g, b


@pytest.mark.parametrize("encoding", ["gzip", "x-gzip", "deflate", "br", "zstd"])
def test_compressed_chat_body_reaches_the_upstream_decoded(gw_one, encoding):
    g, b = gw_one
    body = chat_body(temperature=0.5, text="say hello " * 200)

    r = post(g, "/v1/chat/completions", ENCODERS[encoding](body), encoding)

    assert r.status == 200, r
    assert r.json()["object"] == "chat.completion"
    assert b.last_body() == json.loads(body)
    h = upstream_headers(b)
    assert "content-encoding" not in h, h
    assert int(h["content-length"]) == len(b.last_body_bytes())


def test_raw_deflate_and_identity_are_taken(gw_one):
    g, b = gw_one
    body = chat_body(text="raw deflate, as some clients send it")

    assert post(g, "/v1/chat/completions", raw_deflate_of(body), "deflate").status == 200
    assert b.last_body() == json.loads(body)
    assert post(g, "/v1/chat/completions", body, "identity").status == 200
    assert b.last_body() == json.loads(body)


def test_stacked_codings_are_undone_from_the_last(gw_one):
    g, b = gw_one
    body = chat_body(text="gzip first, then br")
    twice = brotli.compress(gzip_of(body))

    r = post(g, "/v1/chat/completions", twice, "gzip, br")
    assert r.status == 200, r
    assert b.last_body() == json.loads(body)
    # the same list over two header lines (RFC 9110 5.3)
    r = raw_post(g.port, twice, [b"Content-Encoding: gzip", b"Content-Encoding: br"])
    assert r.status == 200, r
    assert b.stats()["requests"] == 2
    assert "content-encoding" not in upstream_headers(b)


def test_decoded_size_over_max_body_mb_is_413(gw_one):
    g, b = gw_one
    body = chat_body(text="x" * (2 << 20))  # 2 MiB of JSON, 1 MiB allowed
    packed = gzip_of(body)
    assert len(packed) < 64 << 10  # the raw body itself is far under the limit

    r = post(g, "/v1/chat/completions", packed, "gzip")

    assert_chat_refusal(r, 413, "gw.body_too_large", "server.max_body_mb")
    assert r.json()["error"]["type"] == "invalid_request_error"
    row = g.wait_row(r.headers["x-request-id"])
    assert row["code"] == "gw.body_too_large", row
    assert b.stats()["requests"] == 0


def test_a_gzip_bomb_stops_at_the_limit(tmp_path, bench, gwd):
    """10 GiB of zeros in about 10 MiB of gzip: each MiB deflated with a full flush is the
    same bytes, so the body is one chunk repeated (a valid gzip member up to its
    trailer, which the gateway never reaches)."""
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b, models=["gpt-test"])],
                   server={"max_body_mb": 16, "max_buffered_body_mb": 64}))
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    mib = bytes(1 << 20)
    head = c.compress(mib) + c.flush(zlib.Z_FULL_FLUSH)
    chunk = c.compress(mib) + c.flush(zlib.Z_FULL_FLUSH)
    bomb = head + chunk * (10 * 1024 - 1) + c.flush()
    assert len(bomb) < 16 << 20
    before = peak_rss_kib(g)

    r = post(g, "/v1/chat/completions", bomb, "gzip")

    assert_chat_refusal(r, 413, "gw.body_too_large", "decoded request body")
    assert b.stats()["requests"] == 0
    # held: the raw body and at most 16 MiB decoded, nowhere near 10 GiB
    assert peak_rss_kib(g) - before < 128 << 10, (before, peak_rss_kib(g))
    wait_until(lambda: gauge(g, "gw_request_body_bytes") == 0, what="the budget given back")


@pytest.mark.parametrize("encoding,data", [
    ("gzip", b'{"model":"gpt-test"}'),
    ("br", b"\xff\xff\xff\xff not brotli at all"),
    ("zstd", b"\x28\xb5\x2f\xfd garbage after a zstd magic"),
], ids=["gzip", "br", "zstd"])
def test_corrupt_body_is_400_naming_the_coding(gw_one, encoding, data):
    g, b = gw_one

    r = post(g, "/v1/chat/completions", data, encoding)

    assert_chat_refusal(r, 400, "gw.bad_request",
                        f"the request body is not valid {encoding}: ")
    assert b.stats()["requests"] == 0


def test_truncated_body_is_400(gw_one):
    g, b = gw_one
    packed = gzip_of(chat_body(text="cut short " * 100))

    r = post(g, "/v1/chat/completions", packed[:len(packed) // 2], "gzip")

    assert_chat_refusal(r, 400, "gw.bad_request", "truncated")
    assert b.stats()["requests"] == 0


def test_unknown_coding_is_415(gw_one):
    g, b = gw_one

    r = post(g, "/v1/chat/completions", chat_body(), "compress")

    assert_chat_refusal(r, 415, "gw.unsupported_encoding", '"compress" is not supported')
    assert r.json()["error"]["type"] == "invalid_request_error"
    assert b.stats()["requests"] == 0


def test_messages_compressed_body_and_refusal_shape(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b, dialect="anthropic", models=["m"])]))
    body = json.dumps({"model": "m", "max_tokens": 16,
                       "messages": [{"role": "user", "content": "hi"}]}).encode()
    h = {**VERSION, "x-api-key": ALICE_KEY}

    r = http_request(g.port, "POST", "/v1/messages", zstandard.ZstdCompressor().compress(body),
                     {**h, "Content-Encoding": "zstd"})
    assert r.status == 200, r
    assert b.last_body() == json.loads(body)
    assert "content-encoding" not in upstream_headers(b)

    r = http_request(g.port, "POST", "/v1/messages", body, {**h, "Content-Encoding": "lz4"})
    assert r.status == 415, r
    assert r.headers.get("x-gw-code") == "gw.unsupported_encoding", r.headers
    err = r.json()
    assert err["type"] == "error", err
    assert err["error"]["type"] == "invalid_request_error", err
    assert '"lz4"' in err["error"]["message"], err
    assert b.stats()["requests"] == 1


def test_decoded_body_counts_in_the_buffered_budget(tmp_path, bench, gwd):
    """max_buffered_body_mb 1 and max_body_mb 1: a body of 1 000 000 bytes that barely
    compresses (random base64) is held raw and decoded at once for a moment, more than
    the budget; it is not refused for that: it reaches the upstream (which then hangs,
    so the request stays in flight), the gauge shows the decoded body and its NUL
    while it is held, and 0 once the client is gone."""
    b = bench("--fault", "hang-content")
    g = gwd(config(tmp_path, [provider("up", b, models=["gpt-test"])],
                   server={"max_body_mb": 1, "max_buffered_body_mb": 1}))
    rnd = random.Random(8)
    text = base64.b64encode(bytes(rnd.getrandbits(8) for _ in range(700_000))).decode()
    body = chat_body(stream=True, text=text)
    body = body[:-1] + b" " * (1_000_000 - len(body)) + body[-1:]  # exactly 1 000 000
    assert len(body) == 1_000_000 and json.loads(body)
    packed = gzip_of(body)
    assert len(packed) + len(body) > 1 << 20  # both at once pass the budget

    s = socket.create_connection(("127.0.0.1", g.port), timeout=WAIT_TIMEOUT)
    try:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"
                  b"Authorization: Bearer " + ALICE_KEY.encode() + b"\r\n"
                  b"Content-Type: application/json\r\nContent-Encoding: gzip\r\n"
                  b"Content-Length: " + str(len(packed)).encode() + b"\r\n\r\n" + packed)
        b.wait_stat(lambda st: st["requests"] == 1, "the request reached the upstream")
        assert b.last_body()["messages"] == json.loads(body)["messages"]
        wait_until(lambda: gauge(g, "gw_request_body_bytes") == len(body) + 1,
                   what="the decoded body counted, the raw one given back")
    finally:
        s.close()
    wait_until(lambda: gauge(g, "gw_request_body_bytes") == 0, what="the budget given back")
