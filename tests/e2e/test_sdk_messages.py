# SPDX-License-Identifier: MIT
# tests/e2e/test_sdk_messages.py - the official `@anthropic-ai/sdk` npm package (pinned
# in sdk/package.json) talks to gwd's Anthropic Messages endpoints (DESIGN.md 4, 11;
# issue 9), through (a) an Anthropic Messages upstream (same shape: spliced), (b) a
# Chat Completions upstream (converted through the hub) and (c) an AWS Bedrock Converse
# upstream (converted, signed; issue 15): messages.create, messages.stream
# and the events the SDK sees, a tool use round trip with the ids kept (one call, then
# two parallel streamed calls), messages.countTokens (forwarded to (a), the gateway's
# estimate for (b) and (c)), models.list in the Anthropic shape, every refusal of a bad key as
# AuthenticationError with the Anthropic error body, and the traffic rows.
# The upstream is `gwbench upstream --tool-call get_weather` (docs/gwbench.md).
# Needs node and npm; `npm ci` installs sdk/node_modules from the lock file when missing.

import json
import subprocess

import pytest

from gwtest import (ALICE_KEY, AWS_BENCH_ARGS, UP_KEY_A, ceil_div, config, http_request,
                    provider, wait_until)
from test_sdk import SDK, ensure_node_modules

MODEL = "claude-test"
VERSION = {"anthropic-version": "2023-06-01"}


def run_messages_js(g, model=MODEL):
    p = subprocess.run(["node", str(SDK / "messages.js"), g.url, ALICE_KEY, model],
                       capture_output=True, timeout=120)
    out = p.stdout.decode()
    assert p.returncode == 0, out + p.stderr.decode()
    return json.loads(out.strip().splitlines()[-1])


def ok(res, step):
    """res[step], asserting the SDK raised nothing there (else the status, body and
    gateway headers it got)."""
    v = res[step]
    assert "error" not in v, f"{step}: {json.dumps(v, indent=1)}"
    return v


def block_events(*blocks):
    """The SDK's event list for a message made of <blocks> ((kind, delta kind, n))."""
    ev = ["message_start"]
    for kind, delta, n in blocks:
        ev += [f"content_block_start:{kind}"] + [f"content_block_delta:{delta}"] * n
        ev += ["content_block_stop"]
    return ev + ["message_delta", "message_stop"]


def up_provider(dialect, b):
    return provider("up", b, dialect=dialect, models=[MODEL, "claude-other"])


@pytest.mark.parametrize("dialect", ["anthropic", "openai", "bedrock"])
def test_anthropic_sdk_through_the_gateway(tmp_path, bench, gwd, dialect):
    ensure_node_modules()
    aws = AWS_BENCH_ARGS if dialect == "bedrock" else []
    b = bench(*aws, "--chunks", 3, "--text", "hi ", "--cached", 1, "--tool-call", "get_weather")
    g = gwd(config(tmp_path, [up_provider(dialect, b)]))
    same = dialect == "anthropic"
    prefix = {"anthropic": "toolu_bench_", "openai": "call_bench_",
              "bedrock": "tooluse_bench_"}[dialect]

    res = run_messages_js(g)

    # messages.create
    plain = ok(res, "plain")
    assert plain["type"] == "message" and plain["role"] == "assistant", plain
    assert plain["model"] == MODEL
    assert plain["content_types"] == ["text"] and plain["text"] == "hi hi hi ", plain
    assert plain["stop_reason"] == "end_turn" and plain["stop_sequence"] is None, plain
    assert plain["usage"]["output_tokens"] == 3, plain
    assert plain["usage"]["input_tokens"] > 0, plain
    assert plain["usage"]["cache_read_input_tokens"] == 1, plain
    if same:
        assert plain["id"].startswith("msg_bench_"), plain  # relayed as is
    # messages.stream: the events the SDK saw, in order (pings are not shown)
    st = ok(res, "stream")
    assert st["events"] == block_events(("text", "text_delta", 3)), st["events"]
    assert st["text"] == "hi hi hi "
    assert st["final"]["stop_reason"] == "end_turn", st["final"]
    assert st["final"]["usage"]["output_tokens"] == 3, st["final"]
    assert st["final"]["usage"]["input_tokens"] > 0, st["final"]
    assert st["final"]["usage"]["cache_read_input_tokens"] == 1, st["final"]
    # tool use, non-streamed: the upstream's id kept as given, the input whole
    t = ok(res, "tools")
    assert t["first"]["stop_reason"] == "tool_use", t["first"]
    assert t["first"]["content_types"] == ["tool_use"], t["first"]
    (use,) = t["first"]["tool_uses"]
    assert use["id"].startswith(prefix), use
    assert use["name"] == "get_weather" and use["input"] == {"city": "Paris"}, use
    assert t["first"]["usage"]["output_tokens"] == 4
    # the tool_result reached the upstream with that id (gwbench echoes it)
    assert t["second"]["text"] == f"tool said: 18C in Paris [{use['id']}]", t["second"]
    assert t["second"]["stop_reason"] == "end_turn"
    # tool use, streamed, two parallel calls
    ts = ok(res, "tools_stream")
    f = ts["first"]
    assert f["events"] == block_events(("tool_use", "input_json_delta", 3),
                                       ("tool_use", "input_json_delta", 3)), f["events"]
    assert f["final"]["stop_reason"] == "tool_use", f["final"]
    assert [(u["name"], u["input"]) for u in f["final"]["tool_uses"]] == [
        ("get_weather", {"city": "Paris"}), ("get_time", {"city": "Tokyo"})], f["final"]
    ids = [u["id"] for u in f["final"]["tool_uses"]]
    assert all(i.startswith(prefix) for i in ids) and len(set(ids)) == 2, ids
    assert f["final"]["usage"]["output_tokens"] == 8
    s2 = ts["second"]
    assert s2["events"] == block_events(("text", "text_delta", 1)), s2["events"]
    assert s2["text"] == (f"tool said: get_weather ok for Paris [{ids[0]}] "
                          f"tool said: get_time ok for Tokyo [{ids[1]}]"), s2
    assert s2["final"]["stop_reason"] == "end_turn"
    # messages.countTokens: forwarded to a Messages upstream, else the gateway's estimate
    c = ok(res, "count")
    assert isinstance(c["input_tokens"], int) and c["input_tokens"] > 0, c
    if same:
        assert "x-gw-estimated" not in c["headers"], c
        last = b.last()  # nothing after the count reached the upstream
        assert last["path"].split("?")[0] == "/v1/messages/count_tokens", last
        assert c["input_tokens"] == ceil_div(len(last["body"].encode()), 4), (c, last)
        h = {k.lower(): v for k, v in last["headers"].items()}
        assert h.get("x-api-key") == UP_KEY_A and "anthropic-version" in h, h
        assert ALICE_KEY not in json.dumps(last), last
    else:
        assert c["headers"].get("x-gw-estimated") == "true", c
        assert b.last()["path"] != "/v1/messages/count_tokens"
    # models.list in the Anthropic shape (the SDK sends anthropic-version)
    m = ok(res, "models")
    assert sorted(m["ids"]) == ["claude-other", MODEL], m
    assert m["has_more"] is False, m
    for item in m["data"]:
        assert item["type"] == "model", item
        assert isinstance(item["display_name"], str) and item["display_name"], item
        assert isinstance(item["created_at"], str), item
    assert m["first_id"] == m["data"][0]["id"] and m["last_id"] == m["data"][-1]["id"], m
    # a bad key: AuthenticationError, 401, the Anthropic error body, on every endpoint
    for call, e in res["bad_key"].items():
        assert e.get("authentication_error") is True, (call, e)
        assert e["status"] == 401, (call, e)
        assert e["body"]["type"] == "error", (call, e)
        assert e["body"]["error"]["type"] == "authentication_error", (call, e)
        assert isinstance(e["body"]["error"]["message"], str), (call, e)
        assert e["headers"].get("x-gw-code") == "gw.auth.invalid_key", (call, e)
    # the rows: one per messages call (counts and listings are not calls), with usage
    rows = wait_until(lambda: (lambda rs: rs if len(rs) >= 6 else None)(
        [r for r in g.traffic() if r["client"] == "alice"]), what="six rows for alice")
    assert len(rows) == 6, rows
    assert all(r["status"] == 200 and r["upstream"] == "up" and r["model"] == MODEL
               for r in rows), rows
    assert sorted((r["stream"], r["usage"]["output_tokens"]) for r in rows) == [
        (False, 1), (False, 3), (False, 4), (True, 1), (True, 3), (True, 8)], rows
    by_id = {r["id"]: r for r in rows}
    for step_out in (plain, st["final"]):
        row = by_id[step_out["headers"]["x-request-id"]]
        assert row["usage"]["input_tokens"] == step_out["usage"]["input_tokens"], (row, step_out)
        assert row["usage"]["cache_read_tokens"] == 1, row
        assert row["usage"]["estimated"] is False, row
    if dialect == "bedrock":  # every request signed as AWS checks it
        assert b.stats()["aws_auth_refused"] == 0


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
def test_anthropic_sdk_unknown_model_is_a_not_found_error(tmp_path, bench, gwd, dialect):
    """A model no provider serves: 404 not_found_error, so the SDK raises NotFoundError."""
    b = bench()
    g = gwd(config(tmp_path, [up_provider(dialect, b)]))

    r = http_request(g.port, "POST", "/v1/messages", json.dumps(
        {"model": "no-such-model", "max_tokens": 16,
         "messages": [{"role": "user", "content": "hi"}]}),
        dict(VERSION, **{"x-api-key": ALICE_KEY}))

    assert r.status == 404, r
    assert r.json()["type"] == "error", r
    assert r.json()["error"]["type"] == "not_found_error", r
    assert r.headers.get("x-gw-code") == "gw.model_not_found", r
    assert b.stats()["requests"] == 0


def test_tool_round_trip_is_converted_for_a_chat_upstream(tmp_path, bench, gwd):
    """The second turn of a tool round trip, as the Chat upstream receives it: the
    assistant's tool_use as tool_calls (id, name, arguments), the tool_result as a tool
    message with that id, the tools as functions."""
    b = bench("--tool-call", "get_weather")
    g = gwd(config(tmp_path, [up_provider("openai", b)]))
    tools = [{"name": "get_weather", "description": "The weather of a city",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    body = {"model": MODEL, "max_tokens": 100, "system": "be brief", "tools": tools,
            "messages": [
                {"role": "user", "content": "weather in Paris?"},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "let me look"},
                    {"type": "tool_use", "id": "toolu_01abc", "name": "get_weather",
                     "input": {"city": "Paris"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01abc", "content": "18C"}]}]}

    r = http_request(g.port, "POST", "/v1/messages", json.dumps(body),
                     dict(VERSION, **{"x-api-key": ALICE_KEY}))

    assert r.status == 200, r
    assert r.json()["content"] == [{"type": "text", "text": "tool said: 18C [toolu_01abc]"}], r
    assert r.json()["stop_reason"] == "end_turn"
    sent = b.last_body()
    assert b.last()["path"] == "/v1/chat/completions"
    msgs = sent["messages"]
    assert msgs[0] == {"role": "system", "content": "be brief"} or \
        msgs[0]["role"] in ("system", "developer"), msgs
    assert msgs[1] == {"role": "user", "content": "weather in Paris?"} or \
        (msgs[1]["role"] == "user" and "weather in Paris?" in json.dumps(msgs[1])), msgs
    a = msgs[2]
    assert a["role"] == "assistant", msgs
    assert "let me look" in json.dumps(a.get("content")), a
    (tc,) = a["tool_calls"]
    assert tc["id"] == "toolu_01abc" and tc["type"] == "function", tc
    assert tc["function"]["name"] == "get_weather", tc
    assert json.loads(tc["function"]["arguments"]) == {"city": "Paris"}, tc
    tm = msgs[3]
    assert tm["role"] == "tool" and tm["tool_call_id"] == "toolu_01abc", tm
    assert tm["content"] in ("18C", [{"type": "text", "text": "18C"}]), tm
    assert len(msgs) == 4, msgs
    (fn,) = sent["tools"]
    assert fn["type"] == "function", fn
    assert fn["function"]["name"] == "get_weather", fn
    assert fn["function"]["description"] == "The weather of a city", fn
    assert fn["function"]["parameters"] == tools[0]["input_schema"], fn
    assert sent.get("max_tokens") == 100 or sent.get("max_completion_tokens") == 100, sent
