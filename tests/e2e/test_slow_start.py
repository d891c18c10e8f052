# SPDX-License-Identifier: MIT
# tests/e2e/test_slow_start.py - failover.next_on_slow_start (DESIGN.md 6): a streamed hop
# with no content stream_start_wait_secs (5) after it was sent is given up for the next
# candidate (attempt outcome slow_start, its connection dropped, not counted as a failure
# nor paused); the last candidate always waits. Each switch costs >= 5 s, so the cases
# here are few.

import json
import subprocess

import pytest

from gwtest import (base_env, binary, chat_body, config, content_of, overview_provider,
                    provider, sse_events, write_config)

SLOW_START = {"next_on_slow_start": True, "stream_start_wait_secs": 5}


def test_slow_first_candidate_is_given_up_for_the_next_one(tmp_path, bench, gwd):
    slow = bench("--ttft-ms", 8000, "--chunks", 2, "--text", "slow ")
    fast = bench("--chunks", 2, "--text", "fast ")
    (tmp_path / "prices.yaml").write_text(
        "models:\n  - {model: gpt-test, input: 1000.0, output: 1000.0}\n")
    g = gwd(config(tmp_path, [provider("slow", slow), provider("fast", fast)],
                   failover=SLOW_START, prices="prices.yaml"))

    r = g.chat(chat_body(stream=True))

    assert r.status == 200, r
    evs = sse_events(r.body)
    assert "".join(content_of(e) for e in evs) == "fast fast ", evs
    assert evs[-1] == "[DONE]"
    row = g.wait_row(r.headers["x-request-id"])
    assert [(a["upstream"], a["outcome"]) for a in row["attempts"]] == [
        ("slow", "slow_start"), ("fast", "ok")], row
    assert row["upstream"] == "fast"
    assert row["outcome"] == "ok"
    # the given-up hop's input is kept (estimated) and priced with the rest
    u = row["usage"]
    assert u["estimated"] is True
    assert row["cost_usd"] == pytest.approx((u["input_tokens"] + u["output_tokens"]) * 0.001,
                                            abs=1e-6)
    # the slow hop's connection was dropped, so the upstream saw its stream aborted
    slow.wait_stat(lambda s: s["streams_aborted"] == 1, "the slow stream aborted")
    assert slow.stats()["streams_completed"] == 0
    # not a failure, not paused
    ov = overview_provider(g, "slow")
    assert ov["state"] == "ok", ov
    assert ov["consecutive_failures"] == 0, ov
    assert ov["paused_until"] is None, ov


def test_last_candidate_waits_for_its_slow_start(tmp_path, bench, gwd):
    slow = bench("--ttft-ms", 6500, "--chunks", 2, "--text", "late ")
    g = gwd(config(tmp_path, [provider("slow", slow)], failover=SLOW_START))

    r = g.chat(chat_body(stream=True))

    assert r.status == 200, r
    evs = sse_events(r.body)
    assert "".join(content_of(e) for e in evs) == "late late ", evs
    assert evs[-1] == "[DONE]"
    row = g.wait_row(r.headers["x-request-id"])
    assert [(a["upstream"], a["outcome"]) for a in row["attempts"]] == [("slow", "ok")], row
    assert slow.stats()["requests"] == 1
    assert slow.stats()["streams_completed"] == 1


def test_check_refuses_a_slow_start_wait_below_5_seconds(tmp_path):
    cfg = config(tmp_path, [provider("up", base_url="http://127.0.0.1:9")],
                 failover={"next_on_slow_start": True, "stream_start_wait_secs": 4})
    p = subprocess.run([binary("gwd"), "--check", str(write_config(tmp_path, cfg))],
                       env=base_env(), stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    out = (p.stdout + p.stderr).decode()
    assert p.returncode != 0, out
    assert "failover.stream_start_wait_secs: 4 (config.slow_start_too_short)" in out, out
