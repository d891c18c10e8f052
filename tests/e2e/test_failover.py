# SPDX-License-Identifier: MIT
# tests/e2e/test_failover.py - failover across the providers that list a model (file
# order), the stream-start hold, request errors passed back at once, and the error chunk
# that ends a stream broken after content.

import json

import pytest

from gwtest import (UP_KEY_ENV, chat_body, config, content_of, free_port, provider,
                    sse_events)


def two_providers(tmp_path, first, second, **cfg):
    """Provider "a" (key up-key-a) then provider "b" (key from the environment)."""
    return config(tmp_path, [provider("a", first),
                             provider("b", second, keys=[{"env": "GW_E2E_UP_KEY"}])], **cfg)


def assert_failed_then_ok(row, status=None):
    assert row["status"] == 200
    assert row["upstream"] == "b"
    assert row["outcome"] == "ok"
    att = row["attempts"]
    assert [a["upstream"] for a in att] == ["a", "b"], att
    assert [a["outcome"] for a in att] == ["failed", "ok"], att
    if status is not None:
        assert att[0]["status"] == status, att
    assert att[1]["status"] == 200, att


@pytest.mark.parametrize("status", [500, 503, 429, 401, 403])
@pytest.mark.parametrize("stream", [False, True])
def test_failover_on_upstream_status_answers_from_the_next(tmp_path, bench, gwd, status,
                                                           stream):
    a = bench("--fault", "status", "--status", status)
    b = bench("--chunks", 2)
    g = gwd(two_providers(tmp_path, a, b))

    r = g.chat(chat_body(stream=stream))

    assert r.status == 200, r
    if stream:
        evs = sse_events(r.body)
        assert "".join(content_of(e) for e in evs) == "hello hello "
        assert evs[-1] == "[DONE]"
    else:
        assert r.json()["choices"][0]["message"]["content"] == "hello hello "
    assert a.stats()["requests"] == 1
    assert b.stats()["requests"] == 1
    assert b.last()["headers"].get("authorization") == f"Bearer {UP_KEY_ENV}"
    assert_failed_then_ok(g.wait_row(r.headers["x-request-id"]), status)


@pytest.mark.parametrize("fault", [("--fault", "drop-before"),
                                   ("--fault", "drop-mid", "--drop-after", 0)],
                         ids=["drop-before", "drop-mid-after-0"])
@pytest.mark.parametrize("stream", [False, True])
def test_failover_on_drop_before_content(tmp_path, bench, gwd, fault, stream):
    a = bench("--chunks", 3, *fault)
    b = bench("--chunks", 3)
    g = gwd(two_providers(tmp_path, a, b))

    r = g.chat(chat_body(stream=stream))

    assert r.status == 200, r
    if stream:
        evs = sse_events(r.body)
        # the hold: nothing of the broken hop reached the client
        assert "".join(content_of(e) for e in evs) == "hello " * 3
        assert evs[-1] == "[DONE]"
        assert not [e for e in evs if '"error"' in e]
    assert_failed_then_ok(g.wait_row(r.headers["x-request-id"]))


def test_failover_on_connect_error(tmp_path, bench, gwd):
    b = bench()
    dead = f"http://127.0.0.1:{free_port()}"
    g = gwd(config(tmp_path, [provider("a", base_url=dead), provider("b", b)]))

    r = g.chat(chat_body(stream=True))

    assert r.status == 200, r
    assert sse_events(r.body)[-1] == "[DONE]"
    assert_failed_then_ok(g.wait_row(r.headers["x-request-id"]))


@pytest.mark.parametrize("fault,stream,failover", [
    ("hang-headers", False, {"first_byte_timeout_secs": 1}),
    ("hang-content", True, {"read_idle_timeout_secs": 1}),
])
def test_failover_on_upstream_timeout(tmp_path, bench, gwd, fault, stream, failover):
    a = bench("--fault", fault)
    b = bench()
    g = gwd(two_providers(tmp_path, a, b, failover=failover))

    r = g.chat(chat_body(stream=stream))

    assert r.status == 200, r
    assert_failed_then_ok(g.wait_row(r.headers["x-request-id"]))


def test_first_byte_timeout_holds_on_exchanges_used_before(tmp_path, bench, gwd):
    # The exchange's timer is lazy: it stays pending when an exchange ends and is cached,
    # and a reused exchange keeps it when the new deadline is close after it. Each of the
    # requests before the slow one reuses exchanges with such timers; the slow one must
    # still time out (4 s of the upstream's against the 1 s first-byte timeout).
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b)], server={"workers": 1},
                   failover={"first_byte_timeout_secs": 1}))
    for _ in range(20):
        assert g.chat(chat_body()).status == 200

    r = g.chat(chat_body(), headers={"x-bench-ttft-ms": "4000"})

    assert r.status == 504, r
    assert r.json()["error"]["code"] == "gw.upstream.timeout"
    assert g.chat(chat_body()).status == 200  # and the next exchange is answered


@pytest.mark.parametrize("status", [400, 413, 422])
@pytest.mark.parametrize("stream", [False, True])
def test_request_error_from_upstream_is_passed_back_without_failover(tmp_path, bench, gwd,
                                                                      status, stream):
    err = {"error": {"message": "bad parameter zeta", "type": "invalid_request_error",
                     "param": "zeta", "code": "bad_param"}}
    a = bench("--fault", "status", "--status", status, "--error-body", json.dumps(err))
    b = bench()
    g = gwd(two_providers(tmp_path, a, b))

    r = g.chat(chat_body(stream=stream))

    assert r.status == status, r
    assert "bad parameter zeta" in r.json()["error"]["message"]
    assert a.stats()["requests"] == 1
    assert b.stats()["requests"] == 0
    row = g.wait_row(r.headers["x-request-id"])
    assert row["status"] == status
    assert [a_["upstream"] for a_ in row["attempts"]] == ["a"]


def test_all_upstreams_failing_is_502(tmp_path, bench, gwd):
    a = bench("--fault", "status", "--status", 500)
    b = bench("--fault", "status", "--status", 503)
    g = gwd(two_providers(tmp_path, a, b))

    r = g.chat()

    assert r.status in (500, 502, 503), r
    assert r.headers.get("x-request-id")
    row = g.wait_row(r.headers["x-request-id"])
    assert [x["outcome"] for x in row["attempts"]] == ["failed", "failed"]


def test_drop_after_content_ends_stream_with_error_chunk(tmp_path, bench, gwd):
    a = bench("--chunks", 6, "--fault", "drop-mid", "--drop-after", 2)
    b = bench()
    g = gwd(two_providers(tmp_path, a, b))

    r = g.chat(chat_body(stream=True))

    assert r.status == 200, r
    assert not r.incomplete, f"the stream was not ended properly after the error chunk: {r!r}"
    evs = sse_events(r.body)
    assert "[DONE]" not in evs, evs
    assert [content_of(e) for e in evs if content_of(e)] == ["hello ", "hello "], evs
    last = json.loads(evs[-1])
    err = last["error"]
    assert isinstance(err["message"], str)
    assert err["code"].startswith("gw."), err
    assert isinstance(err["status"], int) and err["status"] >= 500, err
    assert "type" in err
    # content was relayed: no failover after it
    assert b.stats()["requests"] == 0
    row = g.wait_row(r.headers["x-request-id"])
    assert row["code"] is not None
    assert row["usage"]["output_tokens"] >= 1
    assert row["usage"]["estimated"] is True
