# SPDX-License-Identifier: MIT
# tests/e2e/test_sdk_gemini.py - the official `@google/genai` npm package (pinned in
# sdk/package.json) talks to gwd's Gemini endpoints (POST /v1beta/models/{m}:
# generateContent, :streamGenerateContent?alt=sse, :countTokens; GET /v1beta/models(/m);
# the key in x-goog-api-key; DESIGN.md 4, 11) through an upstream of every shape: Chat
# Completions (`openai`), Responses, Anthropic Messages and Gemini (same shape: spliced),
# all served by `gwbench upstream --tool-call get_weather` (docs/gwbench.md). Per shape,
# through sdk/gemini.js: generateContent; generateContentStream (the SDK splits the SSE
# body itself and yields each chunk); a function calling round trip (one call, then two
# parallel streamed calls) with the calls' ids kept when they have one; countTokens
# (forwarded to a Gemini upstream, the gateway's estimate for the others); models.list
# and models.get in the Gemini shape; every call with a bad key refused with the SDK's
# ApiError, status 401, naming the gw code; one traffic row per generate call with usage.
# The SDK's own default API version is v1 (3.x), not v1beta: the tests pass v1beta, and
# test_gemini_sdk_default_api_version runs it without (/v1/models/{m}:generateContent, and
# GET /v1/models with x-goog-api-key for the listing).
# Needs node and npm; `npm ci` installs sdk/node_modules from the lock file when missing.

import json
import shutil
import subprocess

import pytest

from gwtest import ALICE_KEY, AWS_BENCH_ARGS, UP_KEY_A, config, provider, wait_until
from test_sdk import SDK

MODEL = "gemini-test"
OTHER = "gemini-other"
SHAPES = ["openai", "responses", "anthropic", "gemini", "bedrock"]
TEXT = "gem "


def ensure_node_modules():
    """sdk/node_modules with @google/genai (a checkout installed before it was added to
    sdk/package.json lacks it: `npm ci` again)."""
    assert shutil.which("node"), "node is not installed (apt-get install nodejs npm)"
    if all((SDK / "node_modules" / p / "package.json").exists()
           for p in ("openai", "@anthropic-ai/sdk", "@google/genai")):
        return
    assert shutil.which("npm"), "npm is not installed"
    p = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=SDK,
                       capture_output=True, timeout=300)
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()


def run_gemini_js(g, version="v1beta", model=MODEL):
    p = subprocess.run(["node", str(SDK / "gemini.js"), g.url, ALICE_KEY, model, version],
                       capture_output=True, timeout=120)
    out = p.stdout.decode()
    assert p.returncode == 0, out + p.stderr.decode()
    return json.loads(out.strip().splitlines()[-1])


def ok(res, step):
    """res[step], asserting the SDK raised nothing there (else the status and message)."""
    v = res[step]
    assert not (isinstance(v, dict) and "error" in v), f"{step}: {json.dumps(v, indent=1)}"
    return v


def up_provider(dialect, b):
    return provider("up", b, dialect=dialect, models=[MODEL, OTHER])


def check_usage(u, output_tokens, cached=1):
    assert u["candidatesTokenCount"] == output_tokens, u
    assert u["promptTokenCount"] > 0, u
    assert u["totalTokenCount"] == u["promptTokenCount"] + output_tokens + \
        u.get("thoughtsTokenCount", 0), u
    if cached is not None:
        assert u.get("cachedContentTokenCount") == cached, u


def call_tokens(dialect):
    """Output tokens gwbench counts per tool call: 4 chunks (a head and 3 argument
    pieces), 1 on the Gemini route, which sends a call whole (docs/gwbench.md)."""
    return 1 if dialect == "gemini" else 4


def check_echo(text, result, call):
    """gwbench answers a tool result with "tool said: CONTENT [ID]": the result reached
    the upstream (CONTENT holds it, whatever shape the conversion gave it) with the id
    the client answered when the call had one (a Gemini upstream: its name)."""
    assert text.startswith("tool said: ") and result in text, (text, result, call)
    assert f"[{call.get('id') or call['name']}]" in text, (text, call)


@pytest.mark.parametrize("dialect", SHAPES)
def test_gemini_sdk_through_the_gateway(tmp_path, bench, gwd, dialect):
    ensure_node_modules()
    aws = AWS_BENCH_ARGS if dialect == "bedrock" else []  # SigV4 checked
    b = bench(*aws, "--chunks", 3, "--text", TEXT, "--cached", 1, "--tool-call", "get_weather")
    g = gwd(config(tmp_path, [up_provider(dialect, b)]))

    res = run_gemini_js(g)

    # generateContent: the text, the finish reason, usageMetadata with the cached tokens
    plain = ok(res, "plain")
    assert plain["text"] == TEXT * 3, plain
    assert plain["finish_reason"] == "STOP" and plain["candidates"] == 1, plain
    assert plain["content"]["role"] == "model", plain
    check_usage(plain["usage"], 3)
    assert plain["headers"].get("x-request-id"), plain
    # generateContentStream: the chunks put together, the last one finished with usage
    st = ok(res, "stream")
    assert st["text"] == TEXT * 3, st
    assert st["chunks"] >= 1 and st["finish_reasons"][-1] == "STOP", st
    assert all(f in (None, "STOP") for f in st["finish_reasons"]), st
    check_usage(st["usage"], 3)
    # function calling, non-streamed: the call, and its response echoed by the upstream
    t = ok(res, "tools")
    first = t["first"]
    assert [(c["name"], c["args"]) for c in first["function_calls"]] == [
        ("get_weather", {"city": "Paris"})], first
    assert first["finish_reason"] == "STOP", first
    assert first["usage"]["candidatesTokenCount"] == call_tokens(dialect), first
    (call,) = first["function_calls"]
    check_echo(t["second"]["text"], "18C in Paris", call)
    assert t["second"]["finish_reason"] == "STOP", t["second"]
    # two parallel calls, streamed: both, in order, with their arguments whole
    ts = ok(res, "tools_stream")
    calls = ts["first"]["function_calls"]
    assert [(c["name"], c["args"]) for c in calls] == [
        ("get_weather", {"city": "Paris"}), ("get_time", {"city": "Tokyo"})], ts["first"]
    ids = [c.get("id") for c in calls]
    assert ids == [None, None] or (all(ids) and len(set(ids)) == 2), ids
    assert ts["first"]["usage"]["candidatesTokenCount"] == 2 * call_tokens(dialect), \
        ts["first"]
    text2 = ts["second"]["text"]
    i1, i2 = text2.find("get_weather ok for Paris"), text2.find("get_time ok for Tokyo")
    assert 0 <= i1 < i2, text2
    for c in calls:
        assert f"[{c.get('id') or c['name']}]" in text2, (text2, c)
    # countTokens: forwarded to a Gemini upstream, else the gateway's estimate
    c = ok(res, "count")
    assert isinstance(c["total_tokens"], int) and c["total_tokens"] > 0, c
    if dialect == "gemini":
        assert "x-gw-estimated" not in c["headers"], c
        last = b.last()
        assert last["path"].split("?")[0] == f"/v1beta/models/{MODEL}:countTokens", last
        h = {k.lower(): v for k, v in last["headers"].items()}
        assert h.get("x-goog-api-key") == UP_KEY_A, h
        assert ALICE_KEY not in json.dumps(last), last
    else:
        assert c["headers"].get("x-gw-estimated") == "true", c
    # models.list and models.get in the Gemini shape ("models/<id>")
    m = ok(res, "models")
    assert sorted(m["names"]) == [f"models/{OTHER}", f"models/{MODEL}"], m
    mg = ok(res, "model_get")
    assert mg["name"] == f"models/{MODEL}", mg
    # a bad key: ApiError 401 on every call, its message naming the gw code
    for name, e in res["bad_key"].items():
        assert e.get("api_error") is True, (name, e)
        assert e["status"] == 401, (name, e)
        assert "gw.auth.invalid_key" in (e["message"] or ""), (name, e)
    # the rows: one per generate call (counts and listings are not calls), with usage
    rows = wait_until(lambda: (lambda rs: rs if len(rs) >= 6 else None)(
        [r for r in g.traffic() if r["client"] == "alice"]), what="six rows for alice")
    assert len(rows) == 6, rows
    assert all(r["status"] == 200 and r["upstream"] == "up" and r["model"] == MODEL
               for r in rows), rows
    k = call_tokens(dialect)
    assert sorted((r["stream"], r["usage"]["output_tokens"]) for r in rows) == sorted([
        (False, 1), (False, 3), (False, k), (True, 1), (True, 3), (True, 2 * k)]), rows
    by_id = {r["id"]: r for r in rows}
    row = by_id[plain["headers"]["x-request-id"]]
    # the row's input tokens are the uncached ones (promptTokenCount includes the cached)
    assert row["usage"]["cache_read_tokens"] == 1, row
    assert row["usage"]["input_tokens"] == plain["usage"]["promptTokenCount"] - 1, (row, plain)
    assert row["usage"]["estimated"] is False, row


def test_gemini_sdk_default_api_version(tmp_path, bench, gwd):
    """@google/genai 3.x without httpOptions.apiVersion asks /v1/models/{m}:generateContent
    (and GET /v1/models with x-goog-api-key): the same answers as under /v1beta."""
    ensure_node_modules()
    b = bench("--chunks", 2, "--text", TEXT)
    g = gwd(config(tmp_path, [up_provider("openai", b)]))

    res = run_gemini_js(g, version="")

    assert ok(res, "plain")["text"] == TEXT * 2, res["plain"]
    assert ok(res, "stream")["text"] == TEXT * 2, res["stream"]
    assert ok(res, "count")["total_tokens"] > 0, res["count"]
    assert sorted(ok(res, "models")["names"]) == [f"models/{OTHER}", f"models/{MODEL}"], \
        res["models"]
    assert ok(res, "model_get")["name"] == f"models/{MODEL}", res["model_get"]
    for name, e in res["bad_key"].items():
        assert e.get("api_error") is True and e["status"] == 401, (name, e)
