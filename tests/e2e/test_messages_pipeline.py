# SPDX-License-Identifier: MIT
# tests/e2e/test_messages_pipeline.py - issue 9 point 4: failover, the stream-start hold,
# min_speed, key limits and the row work the same for Anthropic Messages clients as for
# Chat clients, against a Messages upstream (splice) and a Chat upstream (converted),
# and every refusal comes in the Anthropic error shape. Raw HTTP (http.client), so the
# exact frames and headers are seen; the official SDK runs are in test_sdk_messages.py.

import json

import pytest

from gwtest import (ALICE_KEY, REQ_ID_RE, config, http_request, provider, sha256_hex,
                    wait_until)

VERSION = {"anthropic-version": "2023-06-01"}


def messages(g, body, key=ALICE_KEY, timeout=None):
    h = dict(VERSION)
    if key is not None:
        h["x-api-key"] = key
    kw = {"timeout": timeout} if timeout else {}
    return http_request(g.port, "POST", "/v1/messages", json.dumps(body), h, **kw)


def msg_body(model="m", stream=False, text="say hello"):
    return {"model": model, "max_tokens": 64, "stream": stream,
            "messages": [{"role": "user", "content": text}]}


def sse(raw):
    """The (event, data) pairs of an event stream."""
    out = []
    for block in raw.decode().split("\n\n"):
        ev, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                ev = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if ev or data:
            out.append((ev, json.loads("\n".join(data)) if data else None))
    return out


def text_of(events):
    return "".join(d["delta"]["text"] for e, d in events
                   if e == "content_block_delta" and d["delta"].get("type") == "text_delta")


def assert_anthropic_error(r, status, code, etype):
    assert r.status == status, r
    assert r.headers.get("x-gw-code") == code, r.headers
    assert REQ_ID_RE.match(r.headers.get("x-request-id", "")), r.headers
    body = r.json()
    assert body["type"] == "error", body
    assert body["error"]["type"] == etype, body
    assert body["error"]["message"], body


def up(name, b, dialect):
    return provider(name, b, dialect=dialect, models=["m"])


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
def test_issue_9_messages_client_fails_over_to_the_next_upstream(tmp_path, bench, gwd, dialect):
    bad = bench("--fault", "status", "--status", 503)
    good = bench("--chunks", 2, "--text", "ok ")
    g = gwd(config(tmp_path, [up("bad", bad, dialect), up("good", good, dialect)]))

    r = messages(g, msg_body(stream=True))

    assert r.status == 200, r
    ev = sse(r.body)
    assert [e for e, _ in ev][0] == "message_start" and ev[-1][0] == "message_stop", ev
    assert text_of(ev) == "ok ok "
    row = g.wait_row(r.headers["x-request-id"])
    assert [a["outcome"] for a in row["attempts"]] == ["failed", "ok"], row
    assert row["upstream"] == "good" and row["usage"]["output_tokens"] > 0, row


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
def test_issue_9_messages_stream_broken_after_content_ends_with_overloaded_error(
        tmp_path, bench, gwd, dialect):
    b = bench("--chunks", 5, "--text", "hi ", "--fault", "drop-mid", "--drop-after", 2)
    g = gwd(config(tmp_path, [up("u", b, dialect)]))

    r = messages(g, msg_body(stream=True))

    assert r.status == 200, r
    ev = sse(r.body)
    assert text_of(ev) == "hi hi ", ev
    assert ev[-1][0] == "error", ev
    assert ev[-1][1]["error"]["type"] == "overloaded_error", ev[-1]
    assert "message_stop" not in [e for e, _ in ev]
    row = g.wait_row(r.headers["x-request-id"])
    assert row["outcome"] == "failed" and row["code"] == "gw.upstream.dropped", row


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
def test_issue_9_messages_client_is_cut_below_min_speed(tmp_path, bench, gwd, dialect):
    # 1 token (4 bytes) a second, below 20 tokens/s over 5 s: cut after the window
    b = bench("--chunks", 60, "--text", "abcd", "--interval-ms", 1000)
    g = gwd(config(tmp_path, [provider("u", b, dialect=dialect, models=["m"],
                                       min_speed={"tokens_per_sec": 20, "window_secs": 5})]))

    r = messages(g, msg_body(stream=True), timeout=60)

    ev = sse(r.body)
    assert ev[-1][0] == "error" and ev[-1][1]["error"]["type"] == "overloaded_error", ev[-3:]
    row = g.wait_row(r.headers["x-request-id"])
    assert row["code"] == "gw.upstream.too_slow" and row["outcome"] == "too_slow", row


def test_issue_9_messages_refusals_are_in_the_anthropic_shape(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config(tmp_path, [up("u", b, "anthropic")],
                   clients=[{"name": "alice", "key_sha256": sha256_hex(ALICE_KEY),
                             "models": ["m"],
                             "limits": [{"per": "day", "requests": 1}]}]))

    assert_anthropic_error(messages(g, msg_body(), key=None), 401, "gw.auth.missing_key",
                           "authentication_error")
    assert_anthropic_error(messages(g, msg_body(), key="wrong"), 401, "gw.auth.invalid_key",
                           "authentication_error")
    assert_anthropic_error(messages(g, msg_body(model="other")), 403, "gw.model_not_allowed",
                           "permission_error")
    r = http_request(g.port, "POST", "/v1/messages", "{not json",
                     {**VERSION, "x-api-key": ALICE_KEY})
    assert_anthropic_error(r, 400, "gw.bad_request", "invalid_request_error")
    assert messages(g, msg_body()).status == 200  # the day's one request
    r = messages(g, msg_body())
    assert_anthropic_error(r, 429, "gw.key_limit.requests_per_period", "rate_limit_error")
    assert r.headers.get("retry-after"), r.headers
    assert b.stats()["requests"] == 1


def test_issue_9_messages_splice_forwards_the_body_with_only_the_model_rewritten(
        tmp_path, bench, gwd):
    b = bench("--chunks", 1)
    g = gwd(config(tmp_path, [provider("u", b, dialect="anthropic", models=["real-model"])],
                   groups=[{"name": "alias", "type": "fallback", "model": "real-model",
                            "providers": ["u"]}]))
    body = {"model": "alias", "max_tokens": 9, "temperature": 0.25, "top_k": 3,
            "metadata": {"user_id": "u-1"}, "unknown_future_field": {"x": [1, 2]},
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi",
                                                       "cache_control": {"type": "ephemeral"}}]}]}

    r = messages(g, body)

    assert r.status == 200, r
    assert "x-gw-dropped" not in r.headers
    sent = b.last_body()
    assert sent["model"] == "real-model"
    del sent["model"], body["model"]
    assert sent == body  # every other field as the client sent it


def test_issue_9_messages_to_chat_names_what_it_dropped(tmp_path, bench, gwd):
    b = bench("--chunks", 1)
    g = gwd(config(tmp_path, [up("u", b, "openai")]))
    body = msg_body()
    body["top_k"] = 5
    body["metadata"] = {"user_id": "u-1"}

    r = messages(g, body)

    assert r.status == 200, r
    dropped = [x.strip() for x in r.headers["x-gw-dropped"].split(",")]
    assert "top_k" in dropped and "metadata" in dropped, dropped
    sent = b.last_body()
    assert "top_k" not in sent and "metadata" not in sent, sent
    row = wait_until(lambda: (lambda rs: rs[0] if rs else None)(
        [x for x in g.traffic() if x["id"] == r.headers["x-request-id"]]), what="the row")
    assert "top_k" in row["dropped"] and "metadata" in row["dropped"], row
