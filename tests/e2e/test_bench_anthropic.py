# SPDX-License-Identifier: MIT
# tests/e2e/test_bench_anthropic.py - `gwbench upstream` answering the Anthropic Messages
# API (POST /v1/messages) directly, without gwd: the answer and its usage, the streamed
# event sequence, the request checks (anthropic-version, max_tokens), the status and
# in-stream error faults, and the chat route left as it was.

import http.client
import json
import re

import pytest

from gwtest import ceil_div, content_of, http_request, sse_events

VERSION = {"anthropic-version": "2023-06-01"}


def messages_body(model="claude-test", stream=False, max_tokens=64, text="say hello",
                  **extra):
    b = {"model": model, "messages": [{"role": "user", "content": text}]}
    if max_tokens is not None:
        b["max_tokens"] = max_tokens
    if stream:
        b["stream"] = True
    b.update(extra)
    return json.dumps(b, separators=(",", ":")).encode()


def post_messages(up, body, headers=None, path="/v1/messages", conn=None):
    h = dict(VERSION)
    h.update(headers or {})
    return http_request(up.port, "POST", path, body, h, conn=conn)


def named_events(raw):
    """[(event name, data as JSON)] of the SSE body <raw> (bytes); asserts that every
    event has exactly one `event:` and one `data:` line."""
    out = []
    for block in re.split(rb"\n\n", raw):
        if not block.strip():
            continue
        lines = block.split(b"\n")
        names = [ln[len(b"event: "):].decode() for ln in lines if ln.startswith(b"event: ")]
        datas = [ln[len(b"data: "):].decode() for ln in lines if ln.startswith(b"data: ")]
        assert len(names) == 1 and len(datas) == 1 and len(lines) == 2, block
        out.append((names[0], json.loads(datas[0])))
    return out


def test_messages_non_streamed_answer_has_the_message_shape_and_split_usage(bench):
    up = bench("--chunks", 3, "--cached", 2, "--cache-write", 1)
    body = messages_body(model="claude-x")

    r = post_messages(up, body)

    assert r.status == 200, r
    assert r.headers["content-type"] == "application/json"
    j = r.json()
    assert j["id"].startswith("msg_")
    assert j["type"] == "message"
    assert j["role"] == "assistant"
    assert j["model"] == "claude-x"
    assert j["content"] == [{"type": "text", "text": "hello hello hello "}]
    assert j["stop_reason"] == "end_turn"
    assert j["stop_sequence"] is None
    assert j["usage"] == {"input_tokens": ceil_div(len(body), 4) - 3,
                          "cache_creation_input_tokens": 1,
                          "cache_read_input_tokens": 2,
                          "output_tokens": 3}


def test_messages_usage_follows_the_x_bench_headers(bench):
    up = bench()
    body = messages_body()

    r = post_messages(up, body, {"x-bench-chunks": "2", "x-bench-cached": "4",
                                 "x-bench-cache-write": "5"})

    assert r.status == 200, r
    u = r.json()["usage"]
    assert u["input_tokens"] == ceil_div(len(body), 4) - 9
    assert u["cache_read_input_tokens"] == 4
    assert u["cache_creation_input_tokens"] == 5
    assert u["output_tokens"] == 2
    assert r.json()["content"][0]["text"] == "hello hello "


def test_messages_streamed_answer_sends_the_anthropic_event_sequence(bench):
    up = bench("--chunks", 3, "--cached", 2)
    body = messages_body(stream=True, model="claude-s")

    r = post_messages(up, body)

    assert r.status == 200, r
    assert r.headers["content-type"] == "text/event-stream"
    assert not r.incomplete
    evs = named_events(r.body)
    assert [n for n, _ in evs] == (["message_start", "content_block_start", "ping"] +
                                   ["content_block_delta"] * 3 +
                                   ["content_block_stop", "message_delta", "message_stop"])
    for name, data in evs:
        assert data["type"] == name
    msg = evs[0][1]["message"]
    assert msg["role"] == "assistant" and msg["model"] == "claude-s"
    assert msg["content"] == [] and msg["stop_reason"] is None
    assert msg["usage"] == {"input_tokens": ceil_div(len(body), 4) - 2,
                            "cache_creation_input_tokens": 0,
                            "cache_read_input_tokens": 2, "output_tokens": 1}
    assert evs[1][1] == {"type": "content_block_start", "index": 0,
                         "content_block": {"type": "text", "text": ""}}
    for _, d in evs[3:6]:
        assert d == {"type": "content_block_delta", "index": 0,
                     "delta": {"type": "text_delta", "text": "hello "}}
    assert evs[6][1] == {"type": "content_block_stop", "index": 0}
    assert evs[7][1] == {"type": "message_delta",
                         "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                         "usage": {"output_tokens": 3}}
    up.wait_stat(lambda s: s["streams_completed"] == 1, "the stream counted as completed")


def test_messages_short_path_is_served_too(bench):
    up = bench("--chunks", 1)

    r = post_messages(up, messages_body(), path="/messages")

    assert r.status == 200, r
    assert r.json()["content"][0]["text"] == "hello "


def test_messages_without_anthropic_version_answers_400_anthropic_error(bench):
    up = bench()

    r = http_request(up.port, "POST", "/v1/messages", messages_body())

    assert r.status == 400, r
    assert r.json() == {"type": "error",
                        "error": {"type": "invalid_request_error",
                                  "message": "anthropic-version header is required"}}
    assert up.stats()["streams_started"] == 0


def test_messages_without_max_tokens_answers_400_invalid_request(bench):
    up = bench()

    r = post_messages(up, messages_body(max_tokens=None, stream=True))

    assert r.status == 400, r
    j = r.json()
    assert j["type"] == "error"
    assert j["error"]["type"] == "invalid_request_error"
    assert "max_tokens" in j["error"]["message"]


@pytest.mark.parametrize("status,etype", [(429, "rate_limit_error"), (529, "overloaded_error"),
                                          (500, "api_error"), (503, "api_error"),
                                          (400, "invalid_request_error"),
                                          (401, "authentication_error"),
                                          (403, "permission_error"), (404, "not_found_error")])
def test_messages_status_fault_answers_anthropic_error_body(bench, status, etype):
    up = bench("--fault", "status", "--status", status, "--retry-after", 7)

    r = post_messages(up, messages_body(stream=True))

    assert r.status == status, r
    assert r.headers["retry-after"] == "7"
    j = r.json()
    assert j["type"] == "error"
    assert j["error"]["type"] == etype
    assert isinstance(j["error"]["message"], str) and j["error"]["message"]


def test_messages_status_fault_from_headers_keeps_the_connection(bench):
    up = bench()
    conn = http.client.HTTPConnection("127.0.0.1", up.port, timeout=10)
    try:
        r = post_messages(up, messages_body(), {"x-bench-fault": "status",
                                                "x-bench-status": "429",
                                                "x-bench-retry-after": "3"}, conn=conn)
        again = post_messages(up, messages_body(), conn=conn)
    finally:
        conn.close()

    assert r.status == 429 and r.headers["retry-after"] == "3", r
    assert r.json()["error"]["type"] == "rate_limit_error"
    assert again.status == 200, again
    assert up.stats()["connections_total"] == 2  # ours and the stats request's


def test_error_body_flag_applies_to_both_routes_as_written(bench):
    up = bench("--fault", "status", "--status", 503, "--error-body", '{"custom":true}')

    m = post_messages(up, messages_body())
    c = http_request(up.port, "POST", "/v1/chat/completions", b'{"model":"m"}')

    assert (m.status, m.body) == (503, b'{"custom":true}'), m
    assert (c.status, c.body) == (503, b'{"custom":true}'), c


def test_chat_route_keeps_its_openai_error_body(bench):
    up = bench("--fault", "status", "--status", 429)

    r = http_request(up.port, "POST", "/v1/chat/completions", b'{"model":"m"}')

    assert r.status == 429, r
    assert r.json() == {"error": {"message": "fake failure", "type": "server_error"}}


def test_messages_error_mid_sends_an_error_event_after_n_deltas(bench):
    up = bench("--chunks", 5, "--fault", "error-mid", "--drop-after", 2)

    r = post_messages(up, messages_body(stream=True))

    assert r.status == 200, r
    assert not r.incomplete  # the body ends properly after the error event
    evs = named_events(r.body)
    assert [n for n, _ in evs] == ["message_start", "content_block_start", "ping",
                                   "content_block_delta", "content_block_delta", "error"]
    assert evs[-1][1] == {"type": "error",
                          "error": {"type": "overloaded_error", "message": "Overloaded"}}
    s = up.stats()
    assert s["streams_started"] == 1 and s["streams_completed"] == 0
    assert s["streams_aborted"] == 0


def test_messages_drop_mid_closes_after_n_deltas(bench):
    up = bench("--chunks", 5)

    r = post_messages(up, messages_body(stream=True), {"x-bench-fault": "drop-mid",
                                                       "x-bench-drop-after": "1"})

    assert r.status == 200
    assert r.incomplete, r
    names = [n for n, _ in named_events(r.body)]
    assert names == ["message_start", "content_block_start", "ping", "content_block_delta"]


def test_messages_request_is_recorded_by_bench_last(bench):
    up = bench("--chunks", 1)
    body = messages_body()

    r = post_messages(up, body, {"x-api-key": "sk-ant-test"})

    assert r.status == 200, r
    last = up.last()
    assert last["method"] == "POST"
    assert last["path"] == "/v1/messages"
    assert last["headers"]["anthropic-version"] == "2023-06-01"
    assert last["headers"]["x-api-key"] == "sk-ant-test"
    assert last["body"] == body.decode()
    assert up.stats()["requests"] == 1


def test_chat_error_mid_sends_an_openai_error_event_without_done(bench):
    up = bench("--chunks", 4, "--fault", "error-mid", "--drop-after", 1)

    r = http_request(up.port, "POST", "/v1/chat/completions", b'{"model":"m","stream":true}')

    assert r.status == 200, r
    assert not r.incomplete
    evs = sse_events(r.body)
    assert len(evs) == 3, evs  # role chunk, one content chunk, the error
    assert content_of(evs[1]) == "hello "
    assert json.loads(evs[2]) == {"error": {"message": "fake failure", "type": "server_error"}}


def test_error_mid_on_a_non_streamed_request_answers_like_the_status_fault(bench):
    up = bench("--fault", "error-mid", "--status", 529)

    r = post_messages(up, messages_body())

    assert r.status == 529, r
    assert r.json()["error"]["type"] == "overloaded_error"
