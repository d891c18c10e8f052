# SPDX-License-Identifier: MIT
# tests/e2e/test_codex.py - the Codex CLI (npm @openai/codex, pinned in codex/package.json)
# answers a one-line task through gwd: `codex exec --json` with a custom model provider
# (wire_api "responses", base_url at gwd, the gateway key from env_key) in a fresh
# CODEX_HOME, through an upstream of every shape: Chat Completions (`openai`), Responses
# (same shape: spliced, the body as Codex sent it), Anthropic Messages and Gemini; and
# through a fallback group whose first member fails (gwbench --fault status) and whose
# second answers. Codex runs its default tool set (function tools, the freeform `custom`
# apply_patch, tool_search) but for the hosted web_search, which only OpenAI runs: gwd
# refuses a hosted tool for another shape (DESIGN.md 11), so the config says
# `web_search = "disabled"`, as README tells Codex users to; otherwise only quiet and
# offline by its own settings (no update check, analytics, feedback, plugins or apps; no
# retries, so a failure shows at once). It sends only POST /v1/responses, streamed, with its system
# prompt as a developer message (no `instructions`), store false, reasoning,
# include ["reasoning.encrypted_content"], prompt_cache_key and client_metadata; and it
# needs response.output_item.done (the item it shows) and response.completed with an id.
#
# No request leaves the machine: codex runs in its own network namespace through
# claude-code/netns_run.py (the same way out as test_claude_code.py: a Unix socket this
# test relays to gwd, every HTTP exchange recorded); codex/base_url_arg.py hands codex
# that address. The test asserts that codex exited 0 with the fake upstream's text and
# usage, that each exchange was answered 200 (no endpoint missing), and that codex's log
# shows no network failure (so the isolation made nothing fail).
# Needs node, npm and unshare; `npm ci` installs codex/node_modules when missing.

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gwtest import ALICE_KEY, UP_KEY_A, config, free_port, provider, wait_until
from test_claude_code import CC, Bridge, netns_prefix

CODEX = Path(__file__).resolve().parent / "codex"
TEXT = "gw-codex-hello "
MODEL = "gpt-5.5"  # a model of Codex's own catalog: its full default tool set
TASK = "Reply with one short line: say hello."

# ~/.codex/config.toml: the provider, and Codex's own switches for what would reach the
# network besides the model (update check, analytics, feedback, the plugin and app
# syncs with github.com and chatgpt.com). Retries off: a failure must show, not repeat.
# web_search off: a hosted tool cannot go to a non-Responses upstream.
CONFIG = """\
model = "{model}"
model_provider = "gw"
check_for_update_on_startup = false
web_search = "disabled"

[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false
apps = false

[model_providers.gw]
name = "gw"
wire_api = "responses"
env_key = "GW_E2E_CODEX_KEY"
request_max_retries = 0
stream_max_retries = 0
"""
# Lines of codex's log that would mean it tried to reach something and could not.
NET_FAILURE_RE = re.compile(
    r"error sending request|dns error|failed to lookup|Could not resolve|"
    r"Network is unreachable|Connection refused|connection error|ENETUNREACH|timed out",
    re.IGNORECASE)


def ensure_codex():
    assert shutil.which("node"), "node is not installed (apt-get install nodejs npm)"
    exe = CODEX / "node_modules" / ".bin" / "codex"
    if not exe.exists():
        assert shutil.which("npm"), "npm is not installed"
        p = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                           cwd=CODEX, capture_output=True, timeout=900)
        assert p.returncode == 0, p.stdout.decode() + p.stderr.decode()
    return str(exe)


def run_codex(g, tmp_path, model=MODEL, task=TASK):
    """Runs `codex exec --json TASK` against gwd <g>; returns (process, exchanges,
    events): the JSONL events codex printed, parsed."""
    exe = ensure_codex()
    prefix = netns_prefix()
    if prefix is None:
        pytest.skip("needs unshare -n (or -r -n) and ip: the run must not reach the network")
    home, codex_home, work, tmp = (Path(tmp_path) / d for d in ("home", "codex", "work", "tmp"))
    for d in (home, codex_home, work, tmp):
        d.mkdir()
    (codex_home / "config.toml").write_text(CONFIG.format(model=model))
    closed = f"http://127.0.0.1:{free_port()}"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
           "CODEX_HOME": str(codex_home), "TMPDIR": str(tmp), "LANG": "C.UTF-8",
           "TERM": "dumb", "RUST_LOG": "warn", "GW_E2E_CODEX_KEY": ALICE_KEY,
           "HTTPS_PROXY": closed, "HTTP_PROXY": closed, "ALL_PROXY": closed,
           "NO_PROXY": "127.0.0.1,localhost"}
    bridge = Bridge(g.port)
    try:
        p = subprocess.run([*prefix, sys.executable, str(CC / "netns_run.py"), bridge.path,
                            "--", sys.executable, str(CODEX / "base_url_arg.py"), "--",
                            exe, "exec", "--json", "--ephemeral", "--color", "never",
                            "--skip-git-repo-check", "-C", str(work),
                            "-c", 'model_providers.gw.base_url="@BASE_URL@/v1"', task],
                           env=env, cwd=work, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=240)
        ex = bridge.exchanges()
    finally:
        bridge.close()
    events = []
    for line in p.stdout.decode(errors="replace").splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
    return p, ex, events


def describe(p, ex):
    """Everything a failure should show: exit code, output, the exchanges."""
    return (f"codex exit {p.returncode}\nstdout: {p.stdout.decode(errors='replace')[-3000:]}\n"
            f"stderr: {p.stderr.decode(errors='replace')[-3000:]}\nexchanges:\n" +
            "\n".join(f"  {e['request']} -> {e['status']} "
                      f"{ {k: v for k, v in e['headers'].items() if k.startswith('x-gw')} }"
                      for e in ex))


def agent_text(events):
    """The text of codex's last agent message ("" when none)."""
    texts = [e["item"]["text"] for e in events
             if e.get("type") == "item.completed" and e["item"].get("type") == "agent_message"]
    return texts[-1] if texts else ""


def check_common(p, ex, events, output_tokens=2, text=TEXT * 2):
    """codex answered with the upstream's text through /v1/responses only, every exchange
    200, nothing failed for want of a network; returns the exchanges."""
    why = describe(p, ex)
    assert p.returncode == 0, why
    assert agent_text(events).strip() == text.strip(), why
    done = [e for e in events if e.get("type") == "turn.completed"]
    assert done, why
    assert done[-1]["usage"]["output_tokens"] == output_tokens, done[-1]
    assert done[-1]["usage"]["input_tokens"] > 0, done[-1]
    assert ex, "codex made no request through the gateway\n" + why
    for e in ex:
        assert e["request"] == "POST /v1/responses", f"{e['request']}\n{why}"
        assert e["status"] == 200, f"{e['request']} answered {e['status']}\n{why}"
        assert e["request_headers"].get("authorization") == f"Bearer {ALICE_KEY}", e
        # zstd bodies are for OpenAI's own backend (ChatGPT login), not an API-key provider
        assert "content-encoding" not in e["request_headers"], e
    net = [ln for ln in p.stderr.decode(errors="replace").splitlines()
           if NET_FAILURE_RE.search(ln)]
    assert not net, "network failures in codex's log:\n" + "\n".join(net[:20])
    return ex


def rows_for(g, n):
    return wait_until(lambda: (lambda rs: rs if len(rs) >= n else None)(
        [r for r in g.traffic() if r["client"] == "alice"]), what=f"{n} rows for alice")


UPSTREAM_PATH = {
    "openai": "/v1/chat/completions",
    "responses": "/v1/responses",
    "anthropic": "/v1/messages",
    "gemini": f"/v1beta/models/{MODEL}:streamGenerateContent",
}


@pytest.mark.parametrize("dialect", ["openai", "responses", "anthropic", "gemini"])
def test_codex_through_an_upstream_of_each_shape(tmp_path, bench, gwd, dialect):
    b = bench("--chunks", 2, "--text", TEXT)
    g = gwd(config(tmp_path, [provider("up", b, dialect=dialect)]))

    p, ex, events = run_codex(g, tmp_path)

    ex = check_common(p, ex, events)
    sent = json.loads(ex[-1]["body"])
    assert sent["model"] == MODEL and sent["stream"] is True, list(sent)
    last = b.last()
    assert last["path"].split("?")[0] == UPSTREAM_PATH[dialect], last
    up = b.last_body()
    assert ALICE_KEY not in json.dumps(last), last
    assert any(UP_KEY_A in v for v in last["headers"].values()), last["headers"]
    if dialect == "responses":
        # same shape: spliced, the body as codex sent it, nothing dropped
        assert up == sent, "a Responses upstream gets the body as sent"
        assert "x-gw-dropped" not in ex[-1]["headers"], ex[-1]
    else:
        # converted: codex's function tools reach the upstream by name; what the shape
        # cannot express is named in x-gw-dropped and in the row (DESIGN.md 11)
        fn_names = [t["name"] for t in sent["tools"] if t.get("type") == "function"]
        assert fn_names, sent["tools"]
        for name in fn_names:
            assert name in json.dumps(up), f"function tool {name} did not reach the upstream"
    rows = rows_for(g, len(ex))
    assert all(r["status"] == 200 and r["upstream"] == "up" for r in rows), rows
    row = [r for r in rows if r["id"] == ex[-1]["headers"].get("x-request-id")]
    assert row, (rows, ex[-1]["headers"])
    assert row[0]["model"] == MODEL and row[0]["stream"] is True, row[0]
    assert row[0]["usage"]["output_tokens"] == 2, row[0]
    assert row[0]["usage"]["input_tokens"] > 0, row[0]
    dropped = [x.strip() for x in ex[-1]["headers"].get("x-gw-dropped", "").split(",")
               if x.strip()]
    assert sorted(row[0]["dropped"]) == sorted(dropped), (row[0], dropped)


@pytest.mark.parametrize("second", ["responses", "openai"])
def test_codex_through_a_fallback_group(tmp_path, bench, gwd, second):
    """The group's first member (a Responses upstream) answers 503; the gateway fails
    over to the second (same shape, or Chat) before anything reached codex, which sees
    one clean answer. The group's name is no model codex knows: it then sends its
    fallback tool set (a `namespace` of function tools among them)."""
    a = bench("--fault", "status", "--status", 503)
    b = bench("--chunks", 2, "--text", TEXT)
    g = gwd(config(tmp_path, [provider("a", a, dialect="responses"),
                              provider("b", b, dialect=second)],
                   groups=[{"name": "codex-group", "type": "fallback", "model": "up-model",
                            "providers": ["a", "b"]}]))

    p, ex, events = run_codex(g, tmp_path, model="codex-group")

    ex = check_common(p, ex, events)
    assert a.stats()["requests"] >= 1, a.stats()
    assert b.last_body()["model"] == "up-model", b.last()
    rows = rows_for(g, len(ex))
    for r in rows:
        assert r["status"] == 200 and r["upstream"] == "b", r
        assert r["model"] == "codex-group", r
        assert [(x["upstream"], x["outcome"]) for x in r["attempts"]] == [
            ("a", "failed"), ("b", "ok")], r["attempts"]
        assert r["attempts"][0]["status"] == 503, r["attempts"]


# The id a tool result reaches each upstream shape with, as gwbench echoes it: the call's
# id (Chat and Responses call_bench_1_0, Anthropic toolu_bench_1_0); a Gemini upstream
# gets no ids, gwbench echoes the function's name (docs/gwbench.md, Tool calls).
ECHOED_ID = {"openai": "call_bench_1_0", "responses": "call_bench_1_0",
             "anthropic": "toolu_bench_1_0", "gemini": "get_weather"}


@pytest.mark.parametrize("dialect", ["openai", "responses", "anthropic", "gemini"])
def test_codex_tool_call_round_trip(tmp_path, bench, gwd, dialect):
    """The upstream calls a function codex does not have (get_weather); codex answers the
    call with a function_call_output under the call's id, and the upstream's second answer
    (gwbench echoes the result and the id it got) is codex's final message."""
    b = bench("--chunks", 2, "--text", TEXT, "--tool-call", "get_weather")
    g = gwd(config(tmp_path, [provider("up", b, dialect=dialect)]))

    p, ex, events = run_codex(g, tmp_path)

    text = agent_text(events)
    assert text.startswith("tool said: ") and "get_weather" in text, describe(p, ex)
    # codex sums a turn's usage: the call (4 chunks, 1 on the Gemini route) and the text
    ex = check_common(p, ex, events, output_tokens=(1 if dialect == "gemini" else 4) + 1,
                      text=text)
    assert len(ex) == 2, describe(p, ex)
    assert text.endswith(f" [{ECHOED_ID[dialect]}]"), text
    # codex's second request: the call as it got it, then its output under the same id
    second = json.loads(ex[1]["body"])
    items = [i for i in second["input"] if i.get("type") in ("function_call",
                                                              "function_call_output")]
    assert [i["type"] for i in items] == ["function_call", "function_call_output"], items
    assert items[0]["name"] == "get_weather", items[0]
    assert items[0]["call_id"] and items[0]["call_id"] == items[1]["call_id"], items
    rows = rows_for(g, 2)
    assert all(r["status"] == 200 and r["upstream"] == "up" for r in rows), rows
