# SPDX-License-Identifier: MIT
# tests/e2e/test_bench_tools.py - `gwbench upstream`'s tool calls, spoken to directly
# (no gwd): with --tool-call / x-bench-tool-call and a request carrying tools, the
# answer is a call to each named tool in the wire shape of its route (Chat
# message.tool_calls and delta.tool_calls; Messages tool_use blocks and input_json_delta),
# streamed and not, parallel calls included; a request ending with tool results is
# answered with text saying what they said; without tools nothing changes. Also
# POST /v1/messages/count_tokens.

import json

import pytest

from gwtest import ceil_div, http_request, sse_events
from test_bench_anthropic import named_events

VERSION = {"anthropic-version": "2023-06-01"}
CHAT_TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
MSG_TOOLS = [{"name": "get_weather", "description": "weather of a city",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
ARGS = ['{"city":"Paris"}', '{"city":"Tokyo"}']


def dumps(b):
    return json.dumps(b, separators=(",", ":")).encode()


def chat(up, body, headers=None):
    return http_request(up.port, "POST", "/v1/chat/completions", dumps(body), headers)


def messages(up, body, headers=None):
    h = dict(VERSION)
    h.update(headers or {})
    return http_request(up.port, "POST", "/v1/messages", dumps(body), h)


def chat_body(stream=False, tools=True, msgs=None):
    b = {"model": "m", "messages": msgs or [{"role": "user", "content": "weather?"}]}
    if tools:
        b["tools"] = CHAT_TOOLS
    if stream:
        b["stream"] = True
        b["stream_options"] = {"include_usage": True}
    return b


def msg_body(stream=False, tools=True, msgs=None):
    b = {"model": "claude-x", "max_tokens": 64,
         "messages": msgs or [{"role": "user", "content": "weather?"}]}
    if tools:
        b["tools"] = MSG_TOOLS
    if stream:
        b["stream"] = True
    return b


# ---------------------------------------------------------------- Chat Completions

def test_chat_tool_call_non_streamed(bench):
    up = bench("--tool-call", "get_weather")
    body = chat_body()

    r = chat(up, body)

    assert r.status == 200, r
    j = r.json()
    ch = j["choices"][0]
    assert ch["finish_reason"] == "tool_calls"
    assert ch["message"] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_bench_1_0", "type": "function",
         "function": {"name": "get_weather", "arguments": ARGS[0]}}]}
    assert j["usage"]["completion_tokens"] == 4
    assert j["usage"]["prompt_tokens"] == ceil_div(len(dumps(body)), 4)


def test_chat_parallel_tool_calls_streamed(bench):
    up = bench()

    r = chat(up, chat_body(stream=True), {"x-bench-tool-call": "get_weather,get_time"})

    assert r.status == 200, r
    evs = sse_events(r.body)
    assert evs[-1] == "[DONE]"
    chunks = [json.loads(e) for e in evs[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    deltas = [c["choices"][0]["delta"] for c in chunks[1:-2]]
    assert len(deltas) == 8  # per call: its head, then the arguments in 3 pieces
    calls = {}
    for d in deltas:
        assert list(d) == ["tool_calls"] and len(d["tool_calls"]) == 1
        tc = d["tool_calls"][0]
        if "id" in tc:  # the head of a call: index, id, type, name, empty arguments
            assert tc == {"index": tc["index"], "id": f"call_bench_1_{tc['index']}",
                          "type": "function",
                          "function": {"name": tc["function"]["name"], "arguments": ""}}
            calls[tc["index"]] = [tc["function"]["name"], ""]
        else:
            assert set(tc) == {"index", "function"} and set(tc["function"]) == {"arguments"}
            calls[tc["index"]][1] += tc["function"]["arguments"]
    assert calls == {0: ["get_weather", ARGS[0]], 1: ["get_time", ARGS[1]]}
    assert chunks[-2]["choices"] == [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 8
    assert up.stats()["streams_completed"] == 1


def test_chat_tool_results_are_echoed_as_text(bench):
    up = bench("--tool-call", "get_weather")
    msgs = [{"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_a", "type": "function",
                 "function": {"name": "get_weather", "arguments": ARGS[0]}},
                {"id": "call_b", "type": "function",
                 "function": {"name": "get_weather", "arguments": ARGS[1]}}]},
            {"role": "tool", "tool_call_id": "call_a", "content": 'sunny "18C"'},
            {"role": "tool", "tool_call_id": "call_b",
             "content": [{"type": "text", "text": "rain"}]}]

    r = chat(up, chat_body(msgs=msgs))
    s = chat(up, chat_body(msgs=msgs, stream=True))

    assert r.status == 200, r
    want = 'tool said: sunny "18C" [call_a] tool said: rain [call_b]'
    ch = r.json()["choices"][0]
    assert ch["message"] == {"role": "assistant", "content": want}
    assert ch["finish_reason"] == "stop"
    assert r.json()["usage"]["completion_tokens"] == 1
    chunks = [json.loads(e) for e in sse_events(s.body)[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == want
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"


def test_chat_without_tools_or_without_the_mode_answers_text(bench):
    up = bench("--chunks", 2)
    r = chat(up, chat_body(), {"x-bench-tool-call": "bad name!"})  # ignored: not a name
    assert r.json()["choices"][0]["message"] == {"role": "assistant", "content": "hello hello "}
    r = chat(up, chat_body(tools=False), {"x-bench-tool-call": "get_weather"})
    assert r.json()["choices"][0]["message"] == {"role": "assistant", "content": "hello hello "}
    assert r.json()["choices"][0]["finish_reason"] == "stop"


# ---------------------------------------------------------------- Anthropic Messages

def test_messages_tool_use_non_streamed(bench):
    up = bench("--tool-call", "get_weather,get_time")

    r = messages(up, msg_body())

    assert r.status == 200, r
    j = r.json()
    assert j["content"] == [
        {"type": "tool_use", "id": "toolu_bench_1_0", "name": "get_weather",
         "input": json.loads(ARGS[0])},
        {"type": "tool_use", "id": "toolu_bench_1_1", "name": "get_time",
         "input": json.loads(ARGS[1])}]
    assert j["stop_reason"] == "tool_use"
    assert j["stop_sequence"] is None
    assert j["usage"]["output_tokens"] == 8


def test_messages_tool_use_streamed(bench):
    up = bench()

    r = messages(up, msg_body(stream=True), {"x-bench-tool-call": "get_weather"})

    assert r.status == 200, r
    evs = named_events(r.body)
    assert [n for n, _ in evs] == [
        "message_start", "ping", "content_block_start", "content_block_delta",
        "content_block_delta", "content_block_delta", "content_block_stop", "message_delta",
        "message_stop"]
    assert all(d["type"] == n for n, d in evs)
    assert evs[2][1] == {"type": "content_block_start", "index": 0, "content_block": {
        "type": "tool_use", "id": "toolu_bench_1_0", "name": "get_weather", "input": {}}}
    pieces = [d["delta"] for _, d in evs[3:6]]
    assert all(p["type"] == "input_json_delta" and d["index"] == 0
               for p, (_, d) in zip(pieces, evs[3:6]))
    assert "".join(p["partial_json"] for p in pieces) == ARGS[0]
    assert evs[6][1] == {"type": "content_block_stop", "index": 0}
    assert evs[7][1]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}
    assert evs[7][1]["usage"] == {"output_tokens": 4}


def test_messages_parallel_tool_use_streamed_block_by_block(bench):
    up = bench("--tool-call", "get_weather,get_time")

    r = messages(up, msg_body(stream=True))

    evs = named_events(r.body)
    blocks = {}
    order = []
    for n, d in evs:
        if n == "content_block_start":
            blocks[d["index"]] = [d["content_block"], ""]
            order.append(("start", d["index"]))
        elif n == "content_block_delta":
            blocks[d["index"]][1] += d["delta"]["partial_json"]
        elif n == "content_block_stop":
            order.append(("stop", d["index"]))
    assert order == [("start", 0), ("stop", 0), ("start", 1), ("stop", 1)]
    assert blocks[0][0]["id"] == "toolu_bench_1_0" and blocks[0][0]["name"] == "get_weather"
    assert blocks[1][0]["id"] == "toolu_bench_1_1" and blocks[1][0]["name"] == "get_time"
    assert [json.loads(b[1]) for b in (blocks[0], blocks[1])] == [json.loads(a) for a in ARGS]
    assert evs[-2][1]["delta"]["stop_reason"] == "tool_use"


@pytest.mark.parametrize("stream", [False, True])
def test_messages_tool_results_are_echoed_as_text(bench, stream):
    up = bench("--tool-call", "get_weather")
    msgs = [{"role": "user", "content": "weather?"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_a", "name": "get_weather",
                 "input": {"city": "Paris"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "sunny"},
                {"type": "tool_result", "tool_use_id": "toolu_b",
                 "content": [{"type": "text", "text": "rain"}]},
                {"type": "text", "text": "and?"}]}]

    r = messages(up, msg_body(msgs=msgs, stream=stream))

    assert r.status == 200, r
    want = "tool said: sunny [toolu_a] tool said: rain [toolu_b]"
    if not stream:
        assert r.json()["content"] == [{"type": "text", "text": want}]
        assert r.json()["stop_reason"] == "end_turn"
        return
    evs = named_events(r.body)
    assert "".join(d["delta"]["text"] for n, d in evs if n == "content_block_delta") == want
    assert evs[-2][1]["delta"]["stop_reason"] == "end_turn"


def test_messages_without_tools_answers_text(bench):
    up = bench("--tool-call", "get_weather", "--chunks", 1)
    r = messages(up, msg_body(tools=False))
    assert r.json()["content"] == [{"type": "text", "text": "hello "}]


def test_bad_tool_call_flag_is_a_usage_error(tmp_path):
    import subprocess
    from gwtest import binary
    for bad in ["", "a,,b", "no spaces", "a,b,c,d,e", "x" * 65]:
        p = subprocess.run([binary("gwbench"), "upstream", "--listen", "127.0.0.1:0",
                            "--tool-call", bad], capture_output=True, timeout=10)
        assert p.returncode == 2, (bad, p.stderr)


# ---------------------------------------------------------------- count_tokens

def test_messages_count_tokens_answers_the_prompt_estimate(bench):
    up = bench()
    body = dumps({"model": "claude-x", "messages": [{"role": "user", "content": "hi"}]})

    r = http_request(up.port, "POST", "/v1/messages/count_tokens", body, VERSION)
    assert r.status == 200, r
    assert r.json() == {"input_tokens": ceil_div(len(body), 4)}
    last = up.last()
    assert last["path"] == "/v1/messages/count_tokens"
    assert json.loads(last["body"]) == json.loads(body)

    r = http_request(up.port, "POST", "/v1/messages/count_tokens", body)
    assert r.status == 400 and r.json()["error"]["type"] == "invalid_request_error", r
    r = http_request(up.port, "POST", "/v1/messages/count_tokens", body,
                     dict(VERSION, **{"x-bench-fault": "status", "x-bench-status": "529"}))
    assert r.status == 529 and r.json()["error"]["type"] == "overloaded_error", r
