# SPDX-License-Identifier: MIT
# tests/e2e/test_sdk.py - the official `openai` npm package (pinned in sdk/package.json)
# talks to gwd: chat.completions.create non-streamed and streamed; and, against a Chat,
# an Anthropic Messages and an AWS Bedrock (Converse, SigV4 checked by gwbench) upstream,
# a tool call round trip (one call, then two parallel streamed calls) with the tool ids
# kept.
# Needs node and npm; `npm ci` installs sdk/node_modules from the lock file when missing.

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from gwtest import ALICE_KEY, AWS_BENCH_ARGS, config, provider, wait_until

SDK = Path(__file__).resolve().parent / "sdk"


def ensure_node_modules():
    assert shutil.which("node"), "node is not installed (apt-get install nodejs npm)"
    if all((SDK / "node_modules" / p / "package.json").exists()
           for p in ("openai", "@anthropic-ai/sdk")):
        return
    assert shutil.which("npm"), "npm is not installed"
    p = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=SDK,
                       capture_output=True, timeout=300)
    assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()


def test_openai_node_sdk_through_the_gateway(tmp_path, bench, gwd):
    ensure_node_modules()
    b = bench("--chunks", 3, "--text", "sdk ", "--cached", 1)
    g = gwd(config(tmp_path, [provider("up", b)]))

    p = subprocess.run(["node", str(SDK / "chat.js"), g.url + "/v1", ALICE_KEY, "gpt-test"],
                       capture_output=True, timeout=60)

    out = p.stdout.decode()
    assert p.returncode == 0, out + p.stderr.decode()
    res = json.loads(out.strip().splitlines()[-1])
    assert res["plain"]["content"] == "sdk sdk sdk "
    assert res["plain"]["usage"]["completion_tokens"] == 3
    assert res["plain"]["usage"]["prompt_tokens"] > 0
    assert res["plain"]["usage"]["prompt_tokens_details"]["cached_tokens"] == 1
    assert res["stream"]["content"] == "sdk sdk sdk "
    assert res["stream"]["usage"]["completion_tokens"] == 3
    assert res["stream"]["usage"]["prompt_tokens"] > 0
    # both calls were recorded for the key, one streamed and one not
    rows = wait_until(lambda: (lambda rs: rs if len(rs) >= 2 else None)(
        [r for r in g.traffic() if r["client"] == "alice"]), what="two rows for alice")
    assert sorted(r["stream"] for r in rows) == [False, True]
    assert all(r["status"] == 200 for r in rows)


@pytest.mark.parametrize("dialect", ["openai", "anthropic", "bedrock"])
def test_openai_node_sdk_tool_round_trip_through_the_gateway(tmp_path, bench, gwd, dialect):
    ensure_node_modules()
    aws = AWS_BENCH_ARGS if dialect == "bedrock" else []
    b = bench(*aws, "--chunks", 3, "--text", "sdk ", "--cached", 1, "--tool-call", "get_weather")
    g = gwd(config(tmp_path, [provider("up", b, dialect=dialect)]))
    prefix = {"openai": "call_bench_", "anthropic": "toolu_bench_",
              "bedrock": "tooluse_bench_"}[dialect]

    p = subprocess.run(["node", str(SDK / "chat.js"), g.url + "/v1", ALICE_KEY, "gpt-test",
                        "tools"], capture_output=True, timeout=60)

    out = p.stdout.decode()
    assert p.returncode == 0, out + p.stderr.decode()
    res = json.loads(out.strip().splitlines()[-1])
    assert res["plain"]["content"] == "sdk sdk sdk "
    assert res["plain"]["usage"]["completion_tokens"] == 3
    assert res["plain"]["usage"]["prompt_tokens_details"]["cached_tokens"] == 1
    assert res["stream"]["content"] == "sdk sdk sdk "
    assert res["stream"]["usage"]["completion_tokens"] == 3
    t = res["tools"]
    # one call: the upstream's id kept as given, its arguments whole
    first = t["first"]
    assert first["finish_reason"] == "tool_calls", first
    assert len(first["tool_calls"]) == 1, first
    call = first["tool_calls"][0]
    assert call["id"].startswith(prefix), call
    assert (call["type"], call["name"]) == ("function", "get_weather")
    assert json.loads(call["arguments"]) == {"city": "Paris"}
    assert first["usage"]["completion_tokens"] == 4
    # the tool message reached the upstream with that id (gwbench echoes it)
    assert t["second"]["content"] == f"tool said: 18C in Paris [{call['id']}]", t["second"]
    assert t["second"]["finish_reason"] == "stop"
    # two parallel calls, streamed, put together by index
    sf = t["stream"]["first"]
    assert sf["finish_reason"] == "tool_calls", sf
    assert [(c["name"], json.loads(c["arguments"])) for c in sf["tool_calls"]] == [
        ("get_weather", {"city": "Paris"}), ("get_time", {"city": "Tokyo"})], sf
    ids = [c["id"] for c in sf["tool_calls"]]
    assert all(i.startswith(prefix) for i in ids) and len(set(ids)) == 2, ids
    assert sf["usage"]["completion_tokens"] == 8
    ss = t["stream"]["second"]
    assert ss["content"] == (f"tool said: get_weather ok for Paris [{ids[0]}] "
                             f"tool said: get_time ok for Tokyo [{ids[1]}]"), ss
    assert ss["finish_reason"] == "stop"
    if dialect == "bedrock":  # every request signed as AWS checks it
        assert b.stats()["aws_auth_refused"] == 0
    # six calls, six rows
    rows = wait_until(lambda: (lambda rs: rs if len(rs) >= 6 else None)(
        [r for r in g.traffic() if r["client"] == "alice"]), what="six rows for alice")
    assert all(r["status"] == 200 and r["upstream"] == "up" for r in rows), rows
    assert sorted((r["stream"], r["usage"]["output_tokens"]) for r in rows) == [
        (False, 1), (False, 3), (False, 4), (True, 1), (True, 3), (True, 8)], rows
