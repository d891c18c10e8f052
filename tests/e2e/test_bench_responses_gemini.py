# SPDX-License-Identifier: MIT
# tests/e2e/test_bench_responses_gemini.py - `gwbench upstream` answering the OpenAI
# Responses API (POST .../v1/responses) and the Google Gemini API (POST
# .../v1beta/models/{model}:generateContent, :streamGenerateContent with and without
# alt=sse, :countTokens, GET .../v1beta/models), spoken to directly without gwd: the
# answers and their usage (cached, cache writes, reasoning), the event order and
# sequence numbers, the JSON-array stream, tool calls and the tool-result echo,
# --reasoning (also Messages thinking blocks), every fault mode, --no-usage, pacing,
# /_bench/last, and `gwbench load --api responses|gemini` against it.

import importlib.util
import json
import re
import select
import socket
import subprocess
import time
from pathlib import Path

import pytest

from gwtest import WAIT_TIMEOUT, binary, ceil_div, http_request, wait_until
from test_bench_anthropic import named_events

# bench/run.py, for the pooling of gwbench load's histograms that `make bench` relies on
_spec = importlib.util.spec_from_file_location(
    "bench_run", Path(__file__).resolve().parents[2] / "bench" / "run.py")
bench_run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_run)

SIG = "Z3diZW5jaCByZWFzb25pbmc="  # base64("gwbench reasoning"), every shape's signature
ARGS = [{"city": "Paris"}, {"city": "Tokyo"}]
FAULTS = ["none", "status", "hang-headers", "hang-content", "drop-before", "drop-mid",
          "error-mid", "garbage-body", "garbage-sse", "garbage-lines"]
PAGE = b"<html><body><h1>502 Bad Gateway</h1></body></html>"


def dumps(b):
    return json.dumps(b, separators=(",", ":")).encode()


# ---------------------------------------------------------------- Responses helpers

def resp_body(stream=False, tools=False, input="say hello", model="gpt-r", **extra):
    b = {"model": model, "input": input}
    if stream:
        b["stream"] = True
    if tools:
        b["tools"] = [{"type": "function", "name": "get_weather",
                       "parameters": {"type": "object", "properties": {}}}]
    b.update(extra)
    return dumps(b)


def post_resp(up, body, headers=None, path="/v1/responses"):
    return http_request(up.port, "POST", path, body, headers)


def resp_events(raw):
    """[(event, data)] of a Responses stream; asserts the event names match the data's
    type and that sequence numbers count 0, 1, 2, ..."""
    evs = named_events(raw)
    for i, (name, data) in enumerate(evs):
        assert data["type"] == name, (name, data)
        assert data["sequence_number"] == i, (i, data)
    return evs


RESP_OPEN = ["response.created", "response.in_progress"]
RESP_MSG_OPEN = ["response.output_item.added", "response.content_part.added"]
RESP_MSG_CLOSE = ["response.output_text.done", "response.content_part.done",
                  "response.output_item.done"]
RESP_REASONING = (["response.output_item.added", "response.reasoning_summary_part.added"],
                  ["response.reasoning_summary_text.done", "response.reasoning_summary_part.done",
                   "response.output_item.done"])


# ---------------------------------------------------------------- Gemini helpers

GEM_TEXT = {"contents": [{"role": "user", "parts": [{"text": "say hello"}]}]}


def gem_path(method, model="gemini-x", query="", prefix=""):
    return f"{prefix}/v1beta/models/{model}:{method}{query}"


def post_gem(up, method, body=None, headers=None, **kw):
    return http_request(up.port, "POST", gem_path(method, **kw), dumps(body or GEM_TEXT), headers)


def gem_sse(raw):
    """The JSON chunks of a Gemini SSE body; asserts the framing: every event is
    `data: JSON` ended by \\r\\n\\r\\n, nothing else."""
    assert raw.endswith(b"\r\n\r\n"), raw[-40:]
    out = []
    for block in raw[:-4].split(b"\r\n\r\n"):
        assert block.startswith(b"data: ") and b"\n" not in block, block
        out.append(json.loads(block[6:]))
    return out


def gem_array(raw):
    """The elements of a Gemini JSON-array stream; asserts the layout of the real API:
    "[" then elements separated by "\\r\\n," and "\\r\\n]" at the end."""
    assert raw.startswith(b"[{") and raw.endswith(b"}\r\n]"), raw[:20] + raw[-20:]
    arr = json.loads(raw)
    assert isinstance(arr, list)
    assert raw.count(b"\r\n,") == len(arr) - 1
    return arr


def parts(chunk):
    return chunk["candidates"][0]["content"]["parts"]


# ---------------------------------------------------------------- raw sockets

def raw_send(port, method, path, body, headers=None):
    s = socket.create_connection(("127.0.0.1", port), timeout=WAIT_TIMEOUT)
    h = {"Host": "127.0.0.1", "Content-Type": "application/json",
         "Content-Length": str(len(body))}
    h.update(headers or {})
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items())
    s.sendall(head.encode() + b"\r\n" + body)
    return s


def read_until(s, marker, got=b""):
    """<got> and what <s> brings until <marker> is in it (a read may bring more)."""
    deadline = time.monotonic() + WAIT_TIMEOUT
    while marker not in got:
        assert time.monotonic() < deadline, got
        d = s.recv(65536)
        assert d, got
        got += d
    return got


def quiet_for(s, secs=0.3):
    """True when nothing arrives on <s> for <secs> (the connection stays open and mute)."""
    r, _, _ = select.select([s], [], [], secs)
    return not r


# ================================================================= Responses answers

def test_responses_non_streamed_answer_is_a_response_object(bench):
    up = bench("--chunks", 3, "--cached", 2, "--cache-write", 1)
    body = resp_body(model="gpt-5-x")

    r = post_resp(up, body, path="/openai/v1/responses")  # any prefix

    assert r.status == 200, r
    assert r.headers["content-type"] == "application/json"
    j = r.json()
    assert re.fullmatch(r"resp_\w+", j["id"])
    assert j["object"] == "response" and j["status"] == "completed"
    assert j["model"] == "gpt-5-x"
    assert isinstance(j["created_at"], int)
    assert j["error"] is None and j["incomplete_details"] is None
    assert len(j["output"]) == 1
    msg = j["output"][0]
    assert re.fullmatch(r"msg_\w+", msg["id"])
    assert {k: msg[k] for k in ("type", "role", "status")} == {
        "type": "message", "role": "assistant", "status": "completed"}
    assert msg["content"] == [{"type": "output_text", "text": "hello hello hello ",
                               "annotations": [], "logprobs": []}]
    p = ceil_div(len(body), 4)
    assert j["usage"] == {"input_tokens": p,
                          "input_tokens_details": {"cached_tokens": 2, "cache_write_tokens": 1},
                          "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 0},
                          "total_tokens": p + 3}
    assert up.last()["path"] == "/openai/v1/responses"


def test_responses_streamed_answer_sends_the_event_sequence(bench):
    up = bench("--chunks", 3, "--cached", 1)
    body = resp_body(stream=True)

    r = post_resp(up, body, {"Authorization": "Bearer sk-r"})

    assert r.status == 200, r
    assert r.headers["content-type"] == "text/event-stream"
    assert not r.incomplete
    evs = resp_events(r.body)
    assert [n for n, _ in evs] == (RESP_OPEN + RESP_MSG_OPEN +
                                   ["response.output_text.delta"] * 3 +
                                   RESP_MSG_CLOSE + ["response.completed"])
    for _, d in evs[:2]:
        assert d["response"]["status"] == "in_progress" and d["response"]["output"] == []
        assert d["response"]["usage"] is None
    rid = evs[0][1]["response"]["id"]
    item = evs[2][1]
    assert item["output_index"] == 0
    assert item["item"] == {"id": item["item"]["id"], "type": "message", "status": "in_progress",
                            "content": [], "role": "assistant"}
    mid = item["item"]["id"]
    assert evs[3][1]["part"] == {"type": "output_text", "annotations": [], "logprobs": [],
                                 "text": ""}
    for _, d in evs[4:7]:
        assert (d["item_id"], d["output_index"], d["content_index"], d["delta"]) == (
            mid, 0, 0, "hello ")
    assert evs[7][1]["text"] == "hello hello hello "
    assert evs[8][1]["part"]["text"] == "hello hello hello "
    assert evs[9][1]["item"]["status"] == "completed"
    done = evs[-1][1]["response"]
    assert done["id"] == rid and done["status"] == "completed"
    assert done["output"] == [evs[9][1]["item"]]
    p = ceil_div(len(body), 4)
    assert done["usage"]["input_tokens"] == p
    assert done["usage"]["input_tokens_details"]["cached_tokens"] == 1
    assert done["usage"]["output_tokens"] == 3 and done["usage"]["total_tokens"] == p + 3
    up.wait_stat(lambda s: s["streams_completed"] == 1, "the stream counted as completed")
    assert up.last()["headers"]["authorization"] == "Bearer sk-r"


@pytest.mark.parametrize("how", ["flag", "header"])
def test_responses_reasoning_item_and_reasoning_tokens(bench, how):
    up = bench("--chunks", 2, *(["--reasoning", 3] if how == "flag" else []))
    h = {"x-bench-reasoning": "3"} if how == "header" else {}

    r = post_resp(up, resp_body(), h)
    s = post_resp(up, resp_body(stream=True), h)

    out = r.json()["output"]
    assert out[0] == {"id": out[0]["id"], "type": "reasoning",
                      "summary": [{"type": "summary_text", "text": "thinking " * 3}],
                      "encrypted_content": SIG}
    assert out[1]["type"] == "message"
    u = r.json()["usage"]
    assert u["output_tokens"] == 5 and u["output_tokens_details"] == {"reasoning_tokens": 3}
    evs = resp_events(s.body)
    assert [n for n, _ in evs] == (RESP_OPEN + RESP_REASONING[0] +
                                   ["response.reasoning_summary_text.delta"] * 3 +
                                   RESP_REASONING[1] + RESP_MSG_OPEN +
                                   ["response.output_text.delta"] * 2 + RESP_MSG_CLOSE +
                                   ["response.completed"])
    assert evs[2][1]["item"] == {"id": out[0]["id"].replace("_1", "_2"), "type": "reasoning",
                                 "summary": []}
    assert all(d["delta"] == "thinking " and d["output_index"] == 0 and d["summary_index"] == 0
               for n, d in evs if n == "response.reasoning_summary_text.delta")
    assert evs[9][1]["item"]["encrypted_content"] == SIG
    assert evs[10][1]["output_index"] == 1  # the message comes after the reasoning item
    done = evs[-1][1]["response"]
    assert [o["type"] for o in done["output"]] == ["reasoning", "message"]
    assert done["usage"]["output_tokens_details"]["reasoning_tokens"] == 3


def test_responses_parallel_tool_calls(bench):
    up = bench("--tool-call", "get_weather,get_time", "--reasoning", 1)

    r = post_resp(up, resp_body(tools=True))
    s = post_resp(up, resp_body(tools=True, stream=True))

    out = r.json()["output"]
    assert out[0]["type"] == "reasoning"
    assert out[1:] == [
        {"id": "fc_bench_1_0", "type": "function_call", "status": "completed",
         "arguments": json.dumps(ARGS[0], separators=(",", ":")),
         "call_id": "call_bench_1_0", "name": "get_weather"},
        {"id": "fc_bench_1_1", "type": "function_call", "status": "completed",
         "arguments": json.dumps(ARGS[1], separators=(",", ":")),
         "call_id": "call_bench_1_1", "name": "get_time"}]
    assert r.json()["usage"]["output_tokens"] == 9  # 4 chunks per call and 1 reasoning
    evs = resp_events(s.body)
    call = ["response.output_item.added"] + ["response.function_call_arguments.delta"] * 3 + [
        "response.function_call_arguments.done", "response.output_item.done"]
    assert [n for n, _ in evs] == (RESP_OPEN + RESP_REASONING[0] +
                                   ["response.reasoning_summary_text.delta"] +
                                   RESP_REASONING[1] + call + call + ["response.completed"])
    args = {}
    for n, d in evs:
        if n == "response.output_item.added" and d["item"]["type"] == "function_call":
            assert d["item"]["arguments"] == "" and d["item"]["status"] == "in_progress"
            args[d["output_index"]] = [d["item"]["id"], d["item"]["name"], ""]
        elif n == "response.function_call_arguments.delta":
            assert d["item_id"] == args[d["output_index"]][0]
            args[d["output_index"]][2] += d["delta"]
        elif n == "response.function_call_arguments.done":
            assert d["arguments"] == args[d["output_index"]][2]
            assert d["name"] == args[d["output_index"]][1]
    assert {i: (n, json.loads(a)) for i, (_, n, a) in args.items()} == {
        1: ("get_weather", ARGS[0]), 2: ("get_time", ARGS[1])}
    done = evs[-1][1]["response"]
    assert [o.get("call_id") for o in done["output"]] == [None, "call_bench_2_0",
                                                          "call_bench_2_1"]


@pytest.mark.parametrize("stream", [False, True])
def test_responses_function_call_outputs_are_echoed_as_text(bench, stream):
    up = bench("--tool-call", "get_weather")
    items = [{"role": "user", "content": "weather?"},
             {"type": "function_call", "call_id": "call_a", "name": "get_weather",
              "arguments": "{}"},
             {"type": "function_call_output", "call_id": "call_a", "output": "sunny"},
             {"type": "function_call_output", "call_id": "call_b",
              "output": [{"type": "input_text", "text": "rain"}]}]

    r = post_resp(up, resp_body(input=items, tools=True, stream=stream))

    want = "tool said: sunny [call_a] tool said: rain [call_b]"
    if not stream:
        assert r.json()["output"][0]["content"][0]["text"] == want
        assert r.json()["usage"]["output_tokens"] == 1
        return
    evs = resp_events(r.body)
    assert "".join(d["delta"] for n, d in evs if n == "response.output_text.delta") == want


def test_responses_without_usage(bench):
    up = bench("--no-usage", "--chunks", 2)

    r = post_resp(up, resp_body())
    s = post_resp(up, resp_body(stream=True))

    assert "usage" not in r.json()
    assert "usage" not in resp_events(s.body)[-1][1]["response"]


# ================================================================= Gemini answers

def test_gemini_non_streamed_answer_has_the_generate_content_shape(bench):
    up = bench("--chunks", 3, "--cached", 2, "--reasoning", 2)
    body = dumps(GEM_TEXT)

    r = http_request(up.port, "POST", gem_path("generateContent", model="gemini-2.5-x",
                                               prefix="/google"), body,
                     {"x-goog-api-key": "gk-1"})

    assert r.status == 200, r
    assert r.headers["content-type"] == "application/json"
    j = r.json()
    cand = j["candidates"]
    assert len(cand) == 1 and cand[0]["index"] == 0 and cand[0]["finishReason"] == "STOP"
    assert cand[0]["content"] == {"role": "model", "parts": [
        {"text": "thinking thinking ", "thought": True},
        {"text": "hello hello hello ", "thoughtSignature": SIG}]}
    p = ceil_div(len(body), 4)
    assert j["usageMetadata"] == {"promptTokenCount": p, "candidatesTokenCount": 3,
                                  "totalTokenCount": p + 5, "cachedContentTokenCount": 2,
                                  "thoughtsTokenCount": 2,
                                  "promptTokensDetails": [{"modality": "TEXT",
                                                           "tokenCount": p}]}
    assert j["modelVersion"] == "gemini-2.5-x"
    assert isinstance(j["responseId"], str) and j["responseId"]
    last = up.last()
    assert last["path"] == "/google/v1beta/models/gemini-2.5-x:generateContent"
    assert last["headers"]["x-goog-api-key"] == "gk-1"
    assert json.loads(last["body"]) == GEM_TEXT


def test_gemini_usage_leaves_out_zero_cache_and_thoughts(bench):
    up = bench("--chunks", 1)

    r = post_gem(up, "generateContent", query="?key=k-in-query")

    u = r.json()["usageMetadata"]
    assert "cachedContentTokenCount" not in u and "thoughtsTokenCount" not in u
    assert r.json()["candidates"][0]["content"]["parts"] == [{"text": "hello "}]
    assert up.last()["path"].endswith(":generateContent?key=k-in-query")


def test_gemini_sse_stream_one_chunk_per_delta_the_last_with_usage(bench):
    up = bench("--chunks", 3, "--reasoning", 1)

    r = post_gem(up, "streamGenerateContent", query="?alt=sse")

    assert r.status == 200, r
    assert r.headers["content-type"] == "text/event-stream"
    chunks = gem_sse(r.body)
    assert len(chunks) == 4
    assert parts(chunks[0]) == [{"text": "thinking ", "thought": True}]
    assert parts(chunks[1]) == [{"text": "hello ", "thoughtSignature": SIG}]
    assert [parts(c) for c in chunks[2:]] == [[{"text": "hello "}]] * 2
    for c in chunks[:-1]:
        assert "finishReason" not in c["candidates"][0] and "usageMetadata" not in c
        assert c["candidates"][0]["content"]["role"] == "model"
        assert c["modelVersion"] == "gemini-x"
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert chunks[-1]["usageMetadata"]["candidatesTokenCount"] == 3
    assert chunks[-1]["usageMetadata"]["thoughtsTokenCount"] == 1
    assert len({c["responseId"] for c in chunks}) == 1
    up.wait_stat(lambda s: s["streams_completed"] == 1, "the stream counted as completed")


def test_gemini_stream_without_alt_sse_is_one_json_array(bench):
    up = bench("--chunks", 3)

    r = post_gem(up, "streamGenerateContent")

    assert r.status == 200, r
    assert r.headers["content-type"] == "application/json"
    assert r.headers["transfer-encoding"] == "chunked"
    arr = gem_array(r.body)
    assert [parts(c) for c in arr] == [[{"text": "hello "}]] * 3
    assert arr[-1]["candidates"][0]["finishReason"] == "STOP"
    assert "usageMetadata" in arr[-1] and "usageMetadata" not in arr[0]


def test_gemini_streams_are_paced_one_chunk_at_a_time(bench):
    up = bench("--chunks", 4, "--ttft-ms", 100, "--interval-ms", 50)
    s = raw_send(up.port, "POST", gem_path("streamGenerateContent", query="?alt=sse"),
                 dumps(GEM_TEXT))
    t0 = time.monotonic()
    try:
        got = read_until(s, b"finishReason")
        elapsed = time.monotonic() - t0
    finally:
        s.close()

    assert got.count(b"data: ") == 4
    assert elapsed >= 0.25  # ttft 100 + 3 gaps of 50 ms, at fixed offsets


def test_gemini_parallel_function_calls(bench):
    up = bench("--tool-call", "get_weather,get_time")
    body = dict(GEM_TEXT, tools=[{"functionDeclarations": [{"name": "get_weather"}]}])

    r = post_gem(up, "generateContent", body)
    s = post_gem(up, "streamGenerateContent", body, query="?alt=sse")

    cand = r.json()["candidates"][0]
    assert cand["content"]["parts"] == [
        {"functionCall": {"name": "get_weather", "args": ARGS[0]}},
        {"functionCall": {"name": "get_time", "args": ARGS[1]}}]
    assert cand["finishReason"] == "STOP"
    assert r.json()["usageMetadata"]["candidatesTokenCount"] == 2  # one chunk per call
    chunks = gem_sse(s.body)
    assert [parts(c) for c in chunks] == [
        [{"functionCall": {"name": "get_weather", "args": ARGS[0]}}],
        [{"functionCall": {"name": "get_time", "args": ARGS[1]}}]]
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"


def test_gemini_function_responses_are_echoed_as_text(bench):
    up = bench("--tool-call", "get_weather")
    body = {"contents": [
        {"role": "user", "parts": [{"text": "weather?"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {}}}]},
        {"role": "user", "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"output": "sunny"}}},
            {"functionResponse": {"id": "fc-2", "name": "get_time",
                                  "response": {"temp": 18, "sky": "clear"}}}]}],
        "tools": [{"functionDeclarations": [{"name": "get_weather"}]}]}

    r = post_gem(up, "generateContent", body)
    s = post_gem(up, "streamGenerateContent", body)

    want = ('tool said: sunny [get_weather] '
            'tool said: {"temp":18,"sky":"clear"} [fc-2]')
    assert r.json()["candidates"][0]["content"]["parts"] == [{"text": want}]
    assert "".join(p["text"] for c in gem_array(s.body) for p in parts(c)) == want


def test_gemini_without_usage(bench):
    up = bench("--no-usage", "--chunks", 2)

    r = post_gem(up, "generateContent")
    s = post_gem(up, "streamGenerateContent", query="?alt=sse")

    assert "usageMetadata" not in r.json()
    chunks = gem_sse(s.body)
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert all("usageMetadata" not in c for c in chunks)


def test_gemini_count_tokens_and_model_listing(bench):
    up = bench()
    body = dumps(GEM_TEXT)

    c = http_request(up.port, "POST", gem_path("countTokens"), body)
    p = ceil_div(len(body), 4)
    assert c.status == 200, c
    assert c.json() == {"totalTokens": p,
                        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": p}]}
    assert up.last()["path"] == "/v1beta/models/gemini-x:countTokens"

    m = http_request(up.port, "GET", "/v1beta/models?key=k", headers={"x-goog-api-key": "g"})
    assert m.status == 200, m
    models = m.json()["models"]
    assert len(models) >= 1
    for x in models:
        assert x["name"].startswith("models/")
        assert "generateContent" in x["supportedGenerationMethods"]
    last = up.last()
    assert (last["method"], last["path"]) == ("GET", "/v1beta/models?key=k")
    assert up.stats()["requests"] == 2

    f = http_request(up.port, "POST", gem_path("countTokens"), body,
                     {"x-bench-fault": "status", "x-bench-status": "429"})
    assert f.status == 429 and f.json()["error"]["status"] == "RESOURCE_EXHAUSTED", f


def test_gemini_unknown_method_is_not_found(bench):
    up = bench()
    assert post_gem(up, "embedContent").status == 404
    assert post_gem(up, "generateContent", model="").status == 404


# ================================================================= Messages thinking

@pytest.mark.parametrize("stream", [False, True])
def test_messages_reasoning_is_a_thinking_block_with_a_signature(bench, stream):
    up = bench("--chunks", 2, "--reasoning", 2)
    b = {"model": "claude-x", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    if stream:
        b["stream"] = True

    r = http_request(up.port, "POST", "/v1/messages", dumps(b),
                     {"anthropic-version": "2023-06-01"})

    assert r.status == 200, r
    if not stream:
        assert r.json()["content"] == [
            {"type": "thinking", "thinking": "thinking thinking ", "signature": SIG},
            {"type": "text", "text": "hello hello "}]
        assert r.json()["usage"]["output_tokens"] == 4
        return
    evs = named_events(r.body)
    assert [(n, d.get("index"), (d.get("delta") or d.get("content_block") or {}).get("type"))
            for n, d in evs] == [
        ("message_start", None, None), ("content_block_start", 0, "thinking"),
        ("ping", None, None),
        ("content_block_delta", 0, "thinking_delta"), ("content_block_delta", 0, "thinking_delta"),
        ("content_block_delta", 0, "signature_delta"), ("content_block_stop", 0, None),
        ("content_block_start", 1, "text"),
        ("content_block_delta", 1, "text_delta"), ("content_block_delta", 1, "text_delta"),
        ("content_block_stop", 1, None), ("message_delta", None, None),
        ("message_stop", None, None)]
    assert evs[5][1]["delta"]["signature"] == SIG
    assert evs[-2][1]["usage"] == {"output_tokens": 4}


def test_chat_ignores_reasoning(bench):
    up = bench("--chunks", 2, "--reasoning", 3)
    r = http_request(up.port, "POST", "/v1/chat/completions", b'{"model":"m"}')
    assert r.json()["choices"][0]["message"]["content"] == "hello hello "
    assert r.json()["usage"]["completion_tokens"] == 2


def test_reasoning_deltas_are_paced_before_the_content(bench):
    # ttft 0, 60 ms apart: 2 reasoning deltas and 2 chunks = 4 paced deltas, the last
    # at 180 ms; a non-streamed answer waits for it
    up = bench("--chunks", 2, "--interval-ms", 60, "--reasoning", 2)
    t0 = time.monotonic()
    r = post_resp(up, resp_body())
    assert r.status == 200 and time.monotonic() - t0 >= 0.18, r


def test_bad_reasoning_flag_is_a_usage_error():
    p = subprocess.run([binary("gwbench"), "upstream", "--listen", "127.0.0.1:0",
                        "--reasoning", "x"], capture_output=True, timeout=10)
    assert p.returncode == 2, p.stderr


# ================================================================= faults, both shapes

def gem_stream_path(sse):
    return gem_path("streamGenerateContent", query="?alt=sse" if sse else "")


SHAPES = {
    "responses": ("/v1/responses", resp_body(stream=True), resp_body()),
    "gemini-sse": (gem_stream_path(True), dumps(GEM_TEXT), dumps(GEM_TEXT)),
    "gemini-array": (gem_stream_path(False), dumps(GEM_TEXT), dumps(GEM_TEXT)),
}


def plain_path(shape):
    return SHAPES[shape][0] if shape == "responses" else gem_path("generateContent")


def deltas_of(shape, raw):
    """The content deltas seen in a (possibly cut) stream body of <shape>."""
    if shape == "responses":
        return raw.count(b"event: response.output_text.delta\n")
    return raw.count(b'"candidates"')


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("fault", FAULTS)
def test_every_fault_mode(bench, shape, fault):
    path, sbody, pbody = SHAPES[shape]
    up = bench("--chunks", 4, "--drop-after", 2, "--status", 503, "--retry-after", 9)
    h = {"x-bench-fault": fault}

    if fault in ("hang-headers", "hang-content"):
        s = raw_send(up.port, "POST", path, sbody, h)
        try:
            if fault == "hang-headers":
                wait_until(lambda: up.last().get("path") == path, what="the request read")
                assert quiet_for(s)
            else:
                got = read_until(s, b"\r\n\r\n")
                assert got.startswith(b"HTTP/1.1 200 ")
                if shape == "responses":
                    # the head and the first events may come in one read
                    got = read_until(s, b"response.in_progress\n", got)
                    assert b"output_item" not in got
                assert quiet_for(s)
                assert up.stats()["streams_started"] == 1
        finally:
            s.close()
        return
    if fault == "drop-before":
        s = raw_send(up.port, "POST", path, sbody, h)
        try:
            assert s.recv(100) == b""
        finally:
            s.close()
        return

    r = http_request(up.port, "POST", path, sbody, h)
    n = http_request(up.port, "POST", plain_path(shape), pbody, h)

    if fault == "none":
        assert r.status == 200 and not r.incomplete and deltas_of(shape, r.body) == 4
        assert n.status == 200 and not n.incomplete
    elif fault in ("status", "error-mid"):
        if fault == "status":
            for x in (r, n):
                assert x.status == 503 and x.headers["retry-after"] == "9", x
                if shape == "responses":
                    assert x.json() == {"error": {"message": "fake failure",
                                                  "type": "server_error"}}
                else:
                    assert x.json() == {"error": {"code": 503, "message": "fake failure",
                                                  "status": "UNAVAILABLE"}}
        else:  # error-mid: the shape's in-stream error after 2 deltas; non-streamed: status
            assert r.status == 200 and not r.incomplete, r
            assert n.status == 503, n
            if shape == "responses":
                evs = resp_events(r.body)
                assert [x for x, _ in evs].count("response.output_text.delta") == 2
                assert evs[-1][0] == "response.failed"
                fr = evs[-1][1]["response"]
                assert fr["status"] == "failed" and fr["error"]["code"] == "server_error"
                assert "response.completed" not in [x for x, _ in evs]
            else:
                els = gem_sse(r.body) if shape == "gemini-sse" else gem_array(r.body)
                assert [parts(c) for c in els[:2]] == [[{"text": "hello "}]] * 2
                assert els[2:] == [{"error": {
                    "code": 503, "message": "The model is overloaded. Please try again later.",
                    "status": "UNAVAILABLE"}}]
            s = up.stats()
            assert s["streams_started"] == 1 and s["streams_completed"] == 0
    elif fault == "drop-mid":
        assert r.status == 200 and r.incomplete and deltas_of(shape, r.body) == 2, r
        assert n.status == 200 and n.incomplete, n
    elif fault == "garbage-body":
        for x in (r, n):
            assert x.status == 200 and x.body == PAGE, x
    elif fault == "garbage-sse":
        assert r.status == 200 and not r.incomplete, r
        # 2 deltas, then the page (on Responses named like a delta)
        assert deltas_of(shape, r.body) == 2 + (shape == "responses")
        assert r.body.count(PAGE) == 1
        if shape == "responses":
            assert r.body.endswith(b"event: response.output_text.delta\ndata: " + PAGE + b"\n\n")
        elif shape == "gemini-sse":
            assert r.body.endswith(b"data: " + PAGE + b"\r\n\r\n")
        else:
            assert r.body.endswith(b"\r\n," + PAGE)
        assert n.body == PAGE
    elif fault == "garbage-lines":
        assert r.status == 200 and r.headers["content-type"] == "text/event-stream", r
        assert r.body == PAGE + b"\nupstream error\n\n"
        assert n.body == PAGE


def test_error_body_flag_is_sent_as_is_on_the_new_routes(bench):
    up = bench("--fault", "status", "--status", 500, "--error-body", '{"custom":1}')

    for r in (post_resp(up, resp_body()), post_gem(up, "generateContent"),
              post_gem(up, "countTokens")):
        assert (r.status, r.body) == (500, b'{"custom":1}'), r


@pytest.mark.parametrize("status,name", [(400, "INVALID_ARGUMENT"), (401, "UNAUTHENTICATED"),
                                         (403, "PERMISSION_DENIED"), (404, "NOT_FOUND"),
                                         (429, "RESOURCE_EXHAUSTED"), (500, "INTERNAL"),
                                         (503, "UNAVAILABLE"), (504, "DEADLINE_EXCEEDED")])
def test_gemini_status_fault_answers_the_google_error_shape(bench, status, name):
    up = bench("--fault", "status", "--status", status)

    r = post_gem(up, "streamGenerateContent", query="?alt=sse")

    assert r.status == status, r
    assert r.json() == {"error": {"code": status, "message": "fake failure", "status": name}}


# ================================================================= gwbench load

def run_load(*args):
    p = subprocess.run([binary("gwbench"), "load", "--json", "--quiet", "--connections", "2",
                        "--threads", "1", *map(str, args)], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("api", ["responses", "gemini"])
@pytest.mark.parametrize("stream", [False, True])
def test_load_speaks_the_new_shapes(bench, api, stream):
    up = bench("--chunks", 3, "--reasoning", 1)
    url = (f"{up.url}/v1/responses" if api == "responses" else
           f"{up.url}/v1beta/models/gm:" +
           ("streamGenerateContent?alt=sse" if stream else "generateContent"))

    s = run_load("--api", api, "--url", url, "--key", "k-1", "--model", "gm",
                 "--requests", 10, *(["--stream"] if stream else []))

    assert s["api"] == api and s["stream"] == stream
    assert (s["requests"], s["completed"], s["ok"], s["errors"]) == (10, 10, 10, {})
    # every paced delta counts, the reasoning one too: 1 + 3 per answer
    assert s["chunks"] == (40 if stream else 0)
    assert s["ttft_us"]["n"] == (10 if stream else 0)
    assert s["gap_us"]["n"] == (30 if stream else 0)
    last = up.last()
    body = json.loads(last["body"])
    if api == "responses":
        assert last["headers"]["authorization"] == "Bearer k-1"
        assert body == {"model": "gm", "input": "Say hello.", "stream": stream}
    else:
        assert last["headers"]["x-goog-api-key"] == "k-1"
        assert "authorization" not in last["headers"]
        assert body == {"contents": [{"role": "user", "parts": [{"text": "Say hello."}]}]}
    assert up.stats()["requests"] == 10


def test_load_warmup_leaves_the_first_answers_out_of_the_histograms(bench):
    up = bench("--chunks", 3)

    s = run_load("--url", f"{up.url}/v1/chat/completions", "--stream", "--connections", 1,
                 "--requests", 10, "--warmup", 2)

    # all ten are sent, checked and counted; the figures are of the last eight
    assert (s["requests"], s["completed"], s["ok"], s["errors"]) == (10, 10, 10, {})
    assert s["chunks"] == 30
    assert (s["latency_us"]["n"], s["ttft_us"]["n"], s["gap_us"]["n"]) == (8, 8, 16)
    assert up.stats()["requests"] == 10


def test_load_prints_each_histogram_whole(bench):
    up = bench("--chunks", 2)

    s = run_load("--url", f"{up.url}/v1/chat/completions", "--stream", "--requests", 20)

    for name, n in (("latency_us", 20), ("ttft_us", 20), ("gap_us", 20)):
        h = s[name]["hist"]
        values = [v for v, _ in h]
        assert values == sorted(set(values)), name  # one pair a bucket, in order
        assert sum(c for _, c in h) == s[name]["n"] == n, name
        assert values[-1] <= s[name]["max"], name  # a midpoint, never above it
        # bench/run.py's pooling reads the percentiles back as gwbench computed them
        for p in (50, 90, 99):
            assert bench_run.pooled_pct([h], p) == s[name][f"p{p}"], (name, p)


@pytest.mark.parametrize("api", ["responses", "gemini"])
def test_load_counts_a_stream_without_its_end_as_unfinished(bench, api):
    up = bench("--fault", "error-mid", "--drop-after", 1)
    url = (f"{up.url}/v1/responses" if api == "responses" else
           f"{up.url}/v1beta/models/gm:streamGenerateContent?alt=sse")

    s = run_load("--api", api, "--url", url, "--stream", "--requests", 4)

    assert s["ok"] == 0 and s["errors"] == {"unfinished": 4}
    assert s["chunks"] == 4


def test_load_refuses_an_unknown_api():
    p = subprocess.run([binary("gwbench"), "load", "--api", "nope"], capture_output=True,
                       timeout=10)
    assert p.returncode == 2 and b"responses or gemini" in p.stderr
