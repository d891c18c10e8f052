# SPDX-License-Identifier: MIT
# tests/e2e/test_sdk.py - the official `openai` npm package (pinned in sdk/package.json)
# talks to gwd: chat.completions.create non-streamed and streamed.
# Needs node and npm; `npm ci` installs sdk/node_modules from the lock file when missing.

import json
import shutil
import subprocess
from pathlib import Path

from gwtest import ALICE_KEY, config, provider, wait_until

SDK = Path(__file__).resolve().parent / "sdk"


def ensure_node_modules():
    assert shutil.which("node"), "node is not installed (apt-get install nodejs npm)"
    if (SDK / "node_modules" / "openai" / "package.json").exists():
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
