# SPDX-License-Identifier: MIT
# tests/e2e/test_sdk_responses.py - the official `openai` npm package (pinned in
# sdk/package.json) talks to gwd's OpenAI Responses endpoint (POST /v1/responses,
# DESIGN.md 4, 11) through an upstream of every shape: Chat Completions (`openai`),
# Responses (same shape: spliced), Anthropic Messages and Gemini, all served by
# `gwbench upstream --tool-call get_weather` (docs/gwbench.md). Per shape, through
# sdk/responses.js: responses.create; responses.stream with the events the SDK emits in
# order (its ResponseStream validates every event against the response it accumulates,
# so a malformed frame fails the step) and finalResponse(); a function call round trip
# with the call ids kept (one call, then two parallel streamed calls); previous_response_id
# across two turns (continued on a Responses upstream, expanded from the gateway's store
# for the others), also with a function_call_output as the whole second turn; a bad key
# refused with AuthenticationError; and one traffic row per call with its usage.
# Needs node and npm; `npm ci` installs sdk/node_modules from the lock file when missing.

import json
import subprocess

import pytest

from gwtest import ALICE_KEY, AWS_BENCH_ARGS, config, provider, squeeze, wait_until
from test_sdk import SDK, ensure_node_modules

MODEL = "gpt-test"
SHAPES = ["openai", "responses", "anthropic", "gemini", "bedrock"]
TEXT = "sdk "


def run_responses_js(g, model=MODEL):
    p = subprocess.run(["node", str(SDK / "responses.js"), g.url + "/v1", ALICE_KEY, model],
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


def text_events(n):
    """What the official API sends for an answer of one text item with n deltas."""
    return (["response.created", "response.in_progress", "response.output_item.added",
             "response.content_part.added"] + ["response.output_text.delta"] * n +
            ["response.output_text.done", "response.content_part.done",
             "response.output_item.done", "response.completed"])


def call_tokens(dialect):
    """Output tokens gwbench counts per tool call: 4 chunks (a head and 3 argument
    pieces), 1 on the Gemini route, which sends a call whole (docs/gwbench.md)."""
    return 1 if dialect == "gemini" else 4


def echo_id(dialect, call):
    """The id gwbench echoes for a tool result: the one the upstream received; a Gemini
    upstream gets no ids from a non-Gemini client, and gwbench echoes the name then."""
    return call["name"] if dialect == "gemini" else call["call_id"]


CALL_EVENTS = ["response.output_item.added", "response.function_call_arguments.delta",
               "response.function_call_arguments.done", "response.output_item.done"]


def check_sequence(st):
    """sequence_number, when sent, counts every event from 0 (the API's contract)."""
    if st["seq"]:
        assert st["seq"] == list(range(len(st["events"]))), st


def check_completed(r, text=None, output_tokens=None):
    assert r["status"] == "completed", r
    assert isinstance(r["id"], str) and r["id"], r
    if text is not None:
        assert r["output_text"] == text, r
        assert r["output_types"] == ["message"], r
    if output_tokens is not None:
        assert r["usage"]["output_tokens"] == output_tokens, r
        assert r["usage"]["input_tokens"] > 0, r
        assert r["usage"]["total_tokens"] == r["usage"]["input_tokens"] + output_tokens, r


@pytest.mark.parametrize("dialect", SHAPES)
def test_openai_responses_sdk_through_the_gateway(tmp_path, bench, gwd, dialect):
    ensure_node_modules()
    aws = AWS_BENCH_ARGS if dialect == "bedrock" else []  # SigV4 checked
    b = bench(*aws, "--chunks", 3, "--text", TEXT, "--cached", 1, "--tool-call", "get_weather")
    g = gwd(config(tmp_path, [provider("up", b, dialect=dialect)]))

    res = run_responses_js(g)

    # responses.create: the text, usage with the cached tokens, the gateway's request id
    plain = ok(res, "plain")
    check_completed(plain, TEXT * 3, 3)
    assert plain["object"] == "response" and plain["model"] == MODEL, plain
    assert plain["usage"]["input_tokens_details"]["cached_tokens"] == 1, plain
    assert plain["headers"].get("x-request-id"), plain
    # responses.stream: the official event order, finalResponse() complete
    st = ok(res, "stream")
    assert squeeze(st["events"]) == squeeze(text_events(1)), st["events"]
    assert st["events"].count("response.output_text.delta") >= 1, st["events"]
    check_sequence(st)
    assert st["text"] == TEXT * 3, st
    check_completed(st["final"], TEXT * 3, 3)
    assert st["final"]["usage"]["input_tokens_details"]["cached_tokens"] == 1, st["final"]
    # a function call: its call_id kept; the function_call_output reached the upstream
    # with that id (gwbench echoes "tool said: CONTENT [ID]")
    t = ok(res, "tools")
    check_completed(t["first"], output_tokens=call_tokens(dialect))
    assert t["first"]["output_types"] == ["function_call"], t["first"]
    (call,) = t["first"]["calls"]
    assert call["name"] == "get_weather", call
    assert json.loads(call["arguments"]) == {"city": "Paris"}, call
    assert isinstance(call["call_id"], str) and call["call_id"], call
    check_completed(t["second"], f"tool said: 18C in Paris [{echo_id(dialect, call)}]", 1)
    # two parallel calls, streamed
    ts = ok(res, "tools_stream")
    f = ts["first"]
    assert squeeze(f["events"]) == (["response.created", "response.in_progress"] +
                                    CALL_EVENTS * 2 + ["response.completed"]), f["events"]
    check_sequence(f)
    check_completed(f["final"], output_tokens=2 * call_tokens(dialect))
    assert [(c["name"], json.loads(c["arguments"])) for c in f["final"]["calls"]] == [
        ("get_weather", {"city": "Paris"}), ("get_time", {"city": "Tokyo"})], f["final"]
    ids = [c["call_id"] for c in f["final"]["calls"]]
    assert all(ids) and len(set(ids)) == 2, ids
    echoed = [echo_id(dialect, c) for c in f["final"]["calls"]]
    s2 = ts["second"]
    assert squeeze(s2["events"]) == squeeze(text_events(1)), s2["events"]
    check_completed(s2["final"], (f"tool said: get_weather ok for Paris [{echoed[0]}] "
                                  f"tool said: get_time ok for Tokyo [{echoed[1]}]"), 1)
    # previous_response_id: the second turn is answered, and the upstream got the first
    # turn (a Responses upstream by its id, any other as the stored conversation)
    pv = ok(res, "previous")
    check_completed(pv["first"], TEXT * 3, 3)
    check_completed(pv["second"], TEXT * 3, 3)
    assert pv["second"]["id"] != pv["first"]["id"], pv
    # previous_response_id carrying only a function_call_output: the upstream got the
    # call from the first turn and the result with its id
    pt = ok(res, "previous_tools")
    (pcall,) = pt["first"]["calls"]
    check_completed(pt["second"], f"tool said: 18C in Paris [{echo_id(dialect, pcall)}]", 1)
    # the last request the upstream saw is that second turn: in its own shape, the call
    # and its result (and, expanded, the first turn's question)
    last = b.last()
    sent = json.dumps(last["body"]) if not isinstance(last["body"], str) else last["body"]
    if dialect == "responses":
        body = json.loads(sent) if isinstance(last["body"], str) else last["body"]
        assert body.get("previous_response_id") == pt["first"]["id"], body
    else:
        assert "What is the weather in Paris?" in sent, last
        assert "previous_response_id" not in sent, last
    assert ALICE_KEY not in json.dumps(last), last
    # a bad key: AuthenticationError, 401, the OpenAI error body, the gw code
    for call_name, e in res["bad_key"].items():
        assert e.get("authentication_error") is True, (call_name, e)
        assert e["status"] == 401, (call_name, e)
        assert isinstance(e["body"], dict) and isinstance(e["body"].get("message"), str), \
            (call_name, e)
        assert e["headers"].get("x-gw-code") == "gw.auth.invalid_key", (call_name, e)
    # the rows: one per call, each with the upstream's usage
    rows = wait_until(lambda: (lambda rs: rs if len(rs) >= 10 else None)(
        [r for r in g.traffic() if r["client"] == "alice"]), what="ten rows for alice")
    assert len(rows) == 10, rows
    assert all(r["status"] == 200 and r["upstream"] == "up" and r["model"] == MODEL
               for r in rows), rows
    k = call_tokens(dialect)
    assert sorted((r["stream"], r["usage"]["output_tokens"]) for r in rows) == sorted(
        [(False, 3), (True, 3), (False, k), (False, 1), (True, 2 * k), (True, 1),
         (False, 3), (False, 3), (False, k), (False, 1)]), rows
    by_id = {r["id"]: r for r in rows}
    row = by_id[plain["headers"]["x-request-id"]]
    # the row's input tokens are the uncached ones (docs/fields-responses.md)
    assert row["usage"]["cache_read_tokens"] == 1, row
    assert row["usage"]["input_tokens"] == plain["usage"]["input_tokens"] - 1, (row, plain)
    assert row["usage"]["estimated"] is False, row


@pytest.mark.parametrize("dialect", ["openai", "anthropic", "gemini", "bedrock"])
def test_previous_response_id_is_expanded_for_other_shapes(tmp_path, bench, gwd, dialect):
    """The second turn of a previous_response_id chain, as a non-Responses upstream
    receives it: the first turn's question and answer before the new question, and not
    the first turn's instructions (the API does not carry them over)."""
    ensure_node_modules()
    aws = AWS_BENCH_ARGS if dialect == "bedrock" else []
    b = bench(*aws, "--chunks", 2, "--text", "kiwi ")
    g = gwd(config(tmp_path, [provider("up", b, dialect=dialect)]))
    script = """
const OpenAI = require('openai');
(async () => {
    const [baseURL, apiKey, model] = process.argv.slice(1);
    const c = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 20000 });
    const first = await c.responses.create({ model, input: 'first question', instructions: 'be brief' });
    const second = await c.responses.create({ model, input: 'second question', previous_response_id: first.id });
    process.stdout.write(JSON.stringify({ first: first.output_text, second: second.output_text }) + '\\n');
})().catch((e) => { process.stdout.write(JSON.stringify({ error: String(e), status: e.status, body: e.error }) + '\\n'); process.exit(1); });
"""
    p = subprocess.run(["node", "-e", script, g.url + "/v1", ALICE_KEY, MODEL], cwd=SDK,
                       capture_output=True, timeout=60)
    out = p.stdout.decode()
    assert p.returncode == 0, out + p.stderr.decode()
    res = json.loads(out.strip().splitlines()[-1])
    assert res == {"first": "kiwi kiwi ", "second": "kiwi kiwi "}, res

    sent = b.last()["body"]
    text = sent if isinstance(sent, str) else json.dumps(sent)
    # in order: the first question, the first answer, the second question
    i1, i2, i3 = (text.find(s) for s in ("first question", "kiwi kiwi ", "second question"))
    assert 0 <= i1 < i2 < i3, text
    assert "be brief" not in text, text
    assert "previous_response_id" not in text, text
