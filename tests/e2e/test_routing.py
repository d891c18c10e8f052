# SPDX-License-Identifier: MIT
# tests/e2e/test_routing.py - the routing engine through real processes (DESIGN.md 3, 5,
# 6, 18): group types (fallback, load-balance, url-test, cheapest), member model
# resolution, failover chains, pauses (consecutive failures, 429 Retry-After, every
# candidate paused), the dry-run agreeing with the data plane while the balance factors
# move, gwctl dry-run, stickiness within and across turns, and `gwd --check` for every
# engine.group_* code.

import json
import re
import subprocess
import time

import pytest

from gwtest import (ALICE_KEY, base_env, binary, chat_body, chat_messages_body, config,
                    content_of, dry_run, gwctl_run, overview, overview_provider, parse_ts,
                    provider, rows_of, sse_events, wait_until, write_config)


def ids_of(resps):
    return [r.headers["x-request-id"] for r in resps]


def answered_by(g, resps):
    """The upstream that answered each of <resps> (from the traffic rows), in order."""
    return [row["upstream"] for row in rows_of(g, ids_of(resps))]


def send(g, n, model, stream=False, text=None):
    """<n> sequential requests for <model>, each a new conversation; asserts 200."""
    out = []
    for i in range(n):
        r = g.chat(chat_body(model=model, stream=stream,
                             text=text or f"new conversation {i} {time.monotonic_ns()}"))
        assert r.status == 200, r
        out.append(r)
    return out


def outcomes(row):
    return [(a["upstream"], a["outcome"]) for a in row["attempts"]]


# ---------------------------------------------------------------- group types

def test_fallback_group_tries_members_in_group_order_not_file_order(tmp_path, bench, gwd):
    a = bench("--chunks", 1)
    b = bench("--chunks", 1)
    c = bench("--fault", "status", "--status", 500)
    g = gwd(config(tmp_path, [provider("a", a), provider("b", b), provider("c", c)],
                   groups=[{"name": "fb", "type": "fallback", "providers": ["c", "b", "a"]}]))

    d = dry_run(g, "fb")
    assert [k["provider"] for k in d["candidates"]] == ["c", "b", "a"], d
    r = g.chat(chat_body(model="fb"))

    assert r.status == 200, r
    row = g.wait_row(r.headers["x-request-id"])
    assert outcomes(row) == [("c", "failed"), ("b", "ok")], row
    assert row["upstream"] == "b"
    assert a.stats()["requests"] == 0


@pytest.mark.parametrize("n", [10, 20])
def test_load_balance_7_3_interleaves_in_smooth_wrr_order(tmp_path, bench, gwd, n):
    a = bench("--chunks", 1)
    b = bench("--chunks", 1)
    g = gwd(config(tmp_path, [provider("a", a), provider("b", b)],
                   groups=[{"name": "lb", "type": "load-balance",
                            "providers": [{"name": "a", "weight": 7},
                                          {"name": "b", "weight": 3}]}]))

    resps = send(g, n, "lb")

    assert a.stats()["requests"] == 7 * n // 10
    assert b.stats()["requests"] == 3 * n // 10
    rows = rows_of(g, ids_of(resps))
    by_time = sorted(range(n), key=lambda i: (rows[i]["ts"], i))
    seq = "".join(rows[i]["upstream"] for i in by_time)
    assert seq == "abaaabaaba" * (n // 10), seq
    assert "aaaaaaa" not in seq


def test_url_test_prefers_the_faster_upstream_once_samples_exist(tmp_path, bench, gwd):
    slow = bench("--ttft-ms", 150, "--chunks", 1)
    fast = bench("--ttft-ms", 5, "--chunks", 1)
    g = gwd(config(tmp_path, [provider("slow", slow), provider("fast", fast)],
                   groups=[{"name": "ut", "type": "url-test",
                            "providers": ["slow", "fast"]}]))
    g.err.wait_for(r"code=link_test\b.*\bslow\b")
    g.err.wait_for(r"code=link_test\b.*\bfast\b")

    # seed: streamed requests until both members have 3 real samples (whichever is
    # first takes requests until its samples make it slower than the other's seed)
    def seeded():
        send(g, 1, "ut", stream=True)
        ps = {p["name"]: p for p in overview(g)["providers"]}
        return all(ps[n]["samples"] >= 3 for n in ("slow", "fast"))
    wait_until(seeded, timeout=20, what="3 TTFC samples on both members", interval=0)

    d = dry_run(g, "ut")
    assert [k["provider"] for k in d["candidates"]] == ["fast", "slow"], d
    assert d["pick"] == "fast", d
    before = slow.stats()["requests"]
    resps = send(g, 4, "ut", stream=True)
    assert answered_by(g, resps) == ["fast"] * 4
    assert slow.stats()["requests"] == before


@pytest.mark.parametrize("spec_on_dear", [False, True],
                         ids=["price_table", "model_specs_wins"])
def test_cheapest_group_tries_the_cheapest_members_model_first(tmp_path, bench, gwd,
                                                                 spec_on_dear):
    dear = bench("--chunks", 1)
    cheap = bench("--chunks", 1)
    (tmp_path / "my-prices.yaml").write_text(
        "models:\n"
        "  - { model: dear-m, input: 5.0, output: 10.0 }\n"
        "  - { model: cheap-m, input: 1.0, output: 2.0 }\n")
    p_dear = provider("dear", dear)
    if spec_on_dear:
        # providers[].model_specs wins over the table: dear-m at 0.25 is now cheapest
        p_dear["model_specs"] = {"dear-m": {"input": 0.25}}
    g = gwd(config(tmp_path, [p_dear, provider("cheap", cheap)],
                   prices="my-prices.yaml",
                   groups=[{"name": "cg", "type": "cheapest",
                            "providers": [{"name": "dear", "model": "dear-m"},
                                          {"name": "cheap", "model": "cheap-m"}]}]))
    want_first, want_model, other = (("dear", "dear-m", cheap) if spec_on_dear
                                      else ("cheap", "cheap-m", dear))

    d = dry_run(g, "cg")
    assert d["candidates"][0]["provider"] == want_first, d
    r = g.chat(chat_body(model="cg"))

    assert r.status == 200, r
    row = g.wait_row(r.headers["x-request-id"])
    assert row["upstream"] == want_first, row
    assert row["attempts"][0]["model"] == want_model, row
    first_bench = dear if spec_on_dear else cheap
    assert first_bench.last_body()["model"] == want_model
    assert other.stats()["requests"] == 0


def test_member_model_resolution_member_then_group_then_requested(tmp_path, bench, gwd):
    a = bench("--fault", "status", "--status", 500)
    b = bench("--fault", "status", "--status", 503)
    c = bench("--chunks", 1)
    g = gwd(config(tmp_path, [provider("a", a), provider("b", b), provider("c", c)],
                   groups=[{"name": "smart", "model": "group-model",
                            "providers": [{"name": "a", "model": "member-model"}, "b"]},
                           {"name": "plain", "providers": ["b", "c"]}]))

    r = g.chat(chat_body(model="smart"))
    # a and b both fail: every candidate failed
    assert r.status >= 500, r
    assert a.last_body()["model"] == "member-model"
    assert b.last_body()["model"] == "group-model"
    row = g.wait_row(r.headers["x-request-id"])
    assert [(x["upstream"], x["model"]) for x in row["attempts"]] == [
        ("a", "member-model"), ("b", "group-model")], row

    r = g.chat(chat_body(model="plain"))
    assert r.status == 200, r
    assert b.last_body()["model"] == "plain"
    assert c.last_body()["model"] == "plain"
    assert r.json()["model"] == "plain"


# ---------------------------------------------------------------- failover chains

@pytest.mark.parametrize("stream", [False, True])
def test_failover_chain_500_then_drop_before_then_ok(tmp_path, bench, gwd, stream):
    a = bench("--fault", "status", "--status", 500)
    b = bench("--fault", "drop-before")
    c = bench("--chunks", 2)
    g = gwd(config(tmp_path, [provider("a", a), provider("b", b), provider("c", c)]))

    r = g.chat(chat_body(stream=stream))

    assert r.status == 200, r
    if stream:
        evs = sse_events(r.body)
        assert "".join(content_of(e) for e in evs) == "hello hello "
        assert evs[-1] == "[DONE]"
    row = g.wait_row(r.headers["x-request-id"])
    assert outcomes(row) == [("a", "failed"), ("b", "failed"), ("c", "ok")], row
    assert row["attempts"][0]["status"] == 500, row
    assert row["upstream"] == "c"
    assert [x.stats()["requests"] for x in (a, b, c)] == [1, 1, 1]


# ---------------------------------------------------------------- pauses

def test_consecutive_failures_pause_the_upstream_and_it_is_skipped(tmp_path, bench, gwd):
    a = bench("--fault", "status", "--status", 500)
    b = bench("--chunks", 1)
    g = gwd(config(tmp_path, [provider("a", a), provider("b", b)],
                   failover={"failures_to_pause": 2, "pause_secs": 60}))

    first = send(g, 2, "gpt-test")
    for row in rows_of(g, ids_of(first)):
        assert outcomes(row) == [("a", "failed"), ("b", "ok")], row
    assert a.stats()["requests"] == 2
    t0 = time.time()
    ov = overview_provider(g, "a")
    assert ov["state"] == "paused", ov
    until = parse_ts(ov["paused_until"])
    assert t0 + 60 - 15 <= until <= t0 + 60 + 15, (ov, t0)

    later = send(g, 3, "gpt-test")
    rows = rows_of(g, ids_of(later))
    assert a.stats()["requests"] == 2  # never sent to while paused
    assert [row["upstream"] for row in rows] == ["b"] * 3
    for row in rows:
        # the skip is recorded on the row (DESIGN.md 6: "recorded as skipped with its reason")
        assert outcomes(row) == [("a", "skipped:paused"), ("b", "ok")], row
    assert overview_provider(g, "b")["state"] == "ok"


def test_429_with_retry_after_pauses_at_once_until_then(tmp_path, bench, gwd):
    a = bench("--fault", "status", "--status", 429, "--retry-after", 120)
    b = bench("--chunks", 1)
    g = gwd(config(tmp_path, [provider("a", a), provider("b", b)],
                   failover={"failures_to_pause": 3, "pause_secs": 10}))

    t0 = time.time()
    r = g.chat()
    assert r.status == 200, r
    row = g.wait_row(r.headers["x-request-id"])
    assert outcomes(row) == [("a", "failed"), ("b", "ok")], row
    assert row["attempts"][0]["status"] == 429, row

    ov = overview_provider(g, "a")
    assert ov["state"] == "paused", ov
    until = parse_ts(ov["paused_until"])
    assert t0 + 120 - 15 <= until <= t0 + 120 + 15, (ov, t0)

    r = g.chat()
    assert r.status == 200, r
    row = g.wait_row(r.headers["x-request-id"])
    assert a.stats()["requests"] == 1  # never sent to while paused
    assert row["upstream"] == "b", row
    assert outcomes(row) == [("a", "skipped:paused"), ("b", "ok")], row


def test_429_retry_after_stated_in_the_body_pauses_until_then(tmp_path, bench, gwd):
    err = {"error": {"message": "Rate limit reached. Please try again in 90s.",
                     "type": "rate_limit_error"}}
    a = bench("--fault", "status", "--status", 429, "--error-body", json.dumps(err))
    b = bench("--chunks", 1)
    g = gwd(config(tmp_path, [provider("a", a), provider("b", b)],
                   failover={"failures_to_pause": 3, "pause_secs": 10}))

    t0 = time.time()
    r = g.chat()
    assert r.status == 200, r
    ov = overview_provider(g, "a")
    assert ov["state"] == "paused", ov
    until = parse_ts(ov["paused_until"])
    assert t0 + 90 - 15 <= until <= t0 + 90 + 15, (ov, t0)


def test_when_every_candidate_is_paused_the_one_whose_pause_ends_first_is_tried(
        tmp_path, bench, gwd):
    # a: always 429 with Retry-After 300 -> paused ~300 s
    # b: fails once (the x-bench-fault header of the first request) -> paused 60 s
    a = bench("--fault", "status", "--status", 429, "--retry-after", 300)
    b = bench("--chunks", 1)
    g = gwd(config(tmp_path, [provider("a", a), provider("b", b)],
                   failover={"failures_to_pause": 1, "pause_secs": 60}))

    r = g.chat(headers={"x-bench-fault": "status"})
    assert r.status >= 500, r
    wait_until(lambda: all(overview_provider(g, n)["state"] == "paused" for n in ("a", "b")),
               what="a and b paused")
    ua = parse_ts(overview_provider(g, "a")["paused_until"])
    ub = parse_ts(overview_provider(g, "b")["paused_until"])
    assert ub < ua, (ua, ub)
    d = dry_run(g, "gpt-test")
    assert d["pick"] == "b", d

    r = g.chat()

    assert r.status == 200, r
    row = g.wait_row(r.headers["x-request-id"])
    assert row["upstream"] == "b", row
    assert outcomes(row)[-1] == ("b", "ok"), row
    assert all(o == "skipped:paused" for u, o in outcomes(row) if u == "a"), row
    assert a.stats()["requests"] == 1
    assert b.stats()["requests"] == 2


# ---------------------------------------------------------------- dry-run

def test_dry_run_names_the_upstream_each_new_conversation_takes_while_factors_move(
        tmp_path, bench, gwd):
    fast = bench("--ttft-ms", 5, "--chunks", 1)
    slow = bench("--ttft-ms", 120, "--chunks", 1)
    bad = bench("--fault", "status", "--status", 500)
    g = gwd(config(tmp_path, [provider("fast", fast), provider("slow", slow),
                              provider("bad", bad)],
                   failover={"failures_to_pause": 100, "pause_secs": 60},
                   groups=[{"name": "lh", "type": "load-balance",
                            "balance_by": "latency-health",
                            "providers": [{"name": "fast", "weight": 2},
                                          {"name": "slow", "weight": 4},
                                          {"name": "bad", "weight": 4}]}]))

    factors_seen = set()
    picks = []
    for i in range(24):
        body = chat_body(model="lh", stream=True, text=f"conversation number {i}")
        d = dry_run(g, "lh", client="alice", body=body)
        factors_seen.add(tuple(round(k["factor"], 3) for k in
                               sorted(d["candidates"], key=lambda k: k["provider"])))
        r = g.chat(body)
        assert r.status == 200, r
        row = g.wait_row(r.headers["x-request-id"])
        picks.append(d["pick"])
        assert row["attempts"][0]["upstream"] == d["pick"], (i, d, row)
        tried = [a["upstream"] for a in row["attempts"]]
        assert tried == [k["provider"] for k in d["candidates"]][:len(tried)], (i, d, row)
    # the factors did move (samples and outcomes came in), and every member was picked
    assert len(factors_seen) >= 3, factors_seen
    assert set(picks) == {"fast", "slow", "bad"}, picks
    last = dry_run(g, "lh")
    f = {k["provider"]: k for k in last["candidates"]}
    assert f["bad"]["factor"] < f["fast"]["factor"], last
    assert f["slow"]["factor"] < f["fast"]["factor"], last


def test_gwctl_dry_run_shows_the_order_and_the_pick(tmp_path, bench, gwd):
    a = bench("--chunks", 1)
    b = bench("--chunks", 1)
    g = gwd(config(tmp_path, [provider("a", a, models=["m1"]), provider("b", b, models=["m1"])],
                   groups=[{"name": "fb", "type": "fallback", "model": "m1",
                            "providers": ["b", "a"]}]))

    rc, out, err = gwctl_run(g, "dry-run", "fb", "--key", "alice", json_out=True)
    assert rc == 0, (out, err)
    j = json.loads(out)
    assert j["pick"] == "b", j
    assert [k["provider"] for k in j["candidates"]] == ["b", "a"], j

    rc, out, err = gwctl_run(g, "dry-run", "fb", "--key", "alice")
    assert rc == 0, (out, err)
    lines = out.splitlines()
    pos_b = next(i for i, l in enumerate(lines) if re.search(r"\bb\b", l) and "pick" not in l)
    pos_a = next(i for i, l in enumerate(lines) if re.search(r"\ba\b", l)
                 and "pick" not in l and i != pos_b)
    assert pos_b < pos_a, out
    assert re.search(r"(?m)^pick: b$", out), out

    rc, out, err = gwctl_run(g, "dry-run", "no-such-model")  # nobody lists it: 404
    assert rc == 1, (out, err)


def test_dry_run_does_not_advance_the_round_robin(tmp_path, bench, gwd):
    a = bench("--chunks", 1)
    b = bench("--chunks", 1)
    g = gwd(lb_1_1(tmp_path, a, b))

    for want in ["a", "b", "a", "b"]:
        picks = [dry_run(g, "lb")["pick"] for _ in range(3)]
        assert picks == [want] * 3, picks
        assert answered_by(g, send(g, 1, "lb")) == [want]


def test_gwctl_providers_and_groups_show_pause_and_weights(tmp_path, bench, gwd):
    a = bench("--fault", "status", "--status", 429, "--retry-after", 120)
    b = bench("--chunks", 1)
    g = gwd(config(tmp_path, [provider("a", a), provider("b", b)],
                   groups=[{"name": "lb", "type": "load-balance", "balance_by": "health",
                            "providers": [{"name": "a", "weight": 7},
                                          {"name": "b", "weight": 3}]}]))
    r = g.chat(chat_body(model="lb"))
    assert r.status == 200, r
    assert overview_provider(g, "a")["state"] == "paused"

    rc, out, err = gwctl_run(g, "providers", json_out=True)
    assert rc == 0, (out, err)
    ps = {p["name"]: p for p in json.loads(out)["providers"]}
    assert ps["a"]["state"] == "paused" and ps["a"]["paused_until"], ps
    assert ps["b"]["state"] == "ok", ps
    rc, out, err = gwctl_run(g, "providers")
    assert rc == 0, (out, err)
    assert re.search(r"(?m)^\s*a\s.*\bpaused\b", out), out

    rc, out, err = gwctl_run(g, "groups", json_out=True)
    assert rc == 0, (out, err)
    grp = json.loads(out)["groups"][0]
    assert (grp["name"], grp["type"], grp["providers"], grp["weights"], grp["balance_by"]) == \
        ("lb", "load-balance", ["a", "b"], [7, 3], "health"), grp
    rc, out, err = gwctl_run(g, "groups")
    assert rc == 0, (out, err)
    assert "lb" in out and "load-balance" in out, out


def test_overview_lists_groups_with_weights_and_balance_by(tmp_path, bench, gwd):
    a = bench()
    b = bench()
    g = gwd(config(tmp_path, [provider("a", a), provider("b", b)],
                   groups=[{"name": "lb", "type": "load-balance", "balance_by": "latency",
                            "providers": [{"name": "a", "weight": 7}, "b"]}]))

    ov = overview(g)
    grp = next(x for x in ov["groups"] if x["name"] == "lb")
    assert grp["type"] == "load-balance"
    assert grp["providers"] == ["a", "b"]
    assert grp["weights"] == [7, 1]
    assert grp["balance_by"] == "latency"
    assert {p["name"]: p["state"] for p in ov["providers"]} == {"a": "ok", "b": "ok"}
    assert "failures_to_pause" in ov["failover"]


# ---------------------------------------------------------------- stickiness

def lb_1_1(tmp_path, a, b):
    return config(tmp_path, [provider("a", a), provider("b", b)],
                  groups=[{"name": "lb", "type": "load-balance",
                           "providers": [{"name": "a", "weight": 1},
                                         {"name": "b", "weight": 1}]}])


def test_sticky_within_a_turn_stays_on_the_upstream_wrr_would_leave(tmp_path, bench, gwd):
    a = bench("--chunks", 1)
    b = bench("--chunks", 1)
    g = gwd(lb_1_1(tmp_path, a, b))
    sess = {"x-session-id": "sess-within-turn-1"}
    user = {"role": "user", "content": "what is the weather in Paris?"}
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}]}
    tools = [{"type": "function", "function": {"name": "weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]

    r1 = g.chat(chat_messages_body([user], model="lb", tools=tools), headers=sess)
    assert r1.status == 200, r1
    first = answered_by(g, [r1])[0]
    msgs = [user, call]
    resps = []
    for k in range(3):
        msgs = msgs + [{"role": "tool", "tool_call_id": f"call_{k + 1}",
                        "content": f"sunny {k}"}]
        r = g.chat(chat_messages_body(msgs, model="lb", tools=tools), headers=sess)
        assert r.status == 200, r
        resps.append(r)
        msgs = msgs + [{"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{k + 2}", "type": "function",
             "function": {"name": "weather", "arguments": "{}"}}]}]
    assert answered_by(g, resps) == [first] * 3
    # WRR 1:1 would have alternated: the other member got nothing of this conversation
    other = b if first == "a" else a
    assert other.stats()["requests"] == 0


def test_sticky_member_is_charged_so_new_conversations_even_out_the_shares(tmp_path, bench,
                                                                          gwd):
    # 1:1. A conversation holds "a" for 4 requests (1 new + 3 within its turn); each is
    # charged to a in the round-robin, so the next 4 new conversations all go to b.
    a = bench("--chunks", 1)
    b = bench("--chunks", 1)
    g = gwd(lb_1_1(tmp_path, a, b))
    sess = {"x-session-id": "sess-charged"}
    msgs = [{"role": "user", "content": "look this up"}]
    resps = []
    for k in range(4):
        r = g.chat(chat_messages_body(msgs, model="lb"), headers=sess)
        assert r.status == 200, r
        resps.append(r)
        msgs = msgs + [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{k}", "type": "function",
                 "function": {"name": "lookup", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": f"call_{k}", "content": f"result {k}"}]
    resps += send(g, 4, "lb")

    assert answered_by(g, resps) == ["a"] * 4 + ["b"] * 4
    assert a.stats()["requests"] == 4
    assert b.stats()["requests"] == 4


@pytest.mark.parametrize("cached,stays", [(1500, True), (0, False)],
                         ids=["cache_1500_stays", "no_cache_moves"])
def test_sticky_across_turns_only_with_1024_cached_tokens(tmp_path, bench, gwd, cached,
                                                          stays):
    a = bench("--chunks", 1)
    b = bench("--chunks", 1)
    g = gwd(lb_1_1(tmp_path, a, b))
    sess = {"x-session-id": f"sess-across-{cached}", "x-bench-cached": str(cached)}
    # prompt_tokens = ceil(body bytes / 4) must exceed the cached tokens reported
    system = {"role": "system", "content": "You are terse. " + "context " * 1000}
    msgs = [system, {"role": "user", "content": "first question"}]

    r1 = g.chat(chat_messages_body(msgs, model="lb"), headers=sess)
    assert r1.status == 200, r1
    row1 = g.wait_row(r1.headers["x-request-id"])
    assert row1["usage"]["cache_read_tokens"] == cached, row1
    msgs = msgs + [{"role": "assistant", "content": "first answer"},
                   {"role": "user", "content": "second question"}]
    r2 = g.chat(chat_messages_body(msgs, model="lb"), headers=sess)
    assert r2.status == 200, r2

    first, second = answered_by(g, [r1, r2])
    if stays:
        assert second == first
    else:
        assert second != first  # WRR 1:1 moves a new turn without a warm cache


# ---------------------------------------------------------------- gwd --check

LINE_RE = re.compile(r"^(?P<path>\S+(?: \([^)]*\)\S*)*): (?P<value>.*) \((?P<code>[a-z]+\.[a-z0-9_.]+)\) "
                     r"(?P<msg>\S.*)$")
DEAD = "http://127.0.0.1:9"


def check(path):
    p = subprocess.run([binary("gwd"), "--check", str(path)], env=base_env(),
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    out = (p.stdout + p.stderr).decode("utf-8", "replace")
    return p.returncode, out, [m.groupdict() for m in map(LINE_RE.match, out.splitlines())
                               if m]


GROUP_CASES = [
    # (groups, code, path, value shown)
    ([{"name": "g", "type": "load-balance", "providers": [{"name": "up", "weight": 101}]}],
     "engine.group_weight_out_of_range", "groups[0] (g).providers[0] (up).weight", "101"),
    ([{"name": "g", "type": "load-balance", "providers": [{"name": "up", "weight": 0}]}],
     "engine.group_weight_out_of_range", "groups[0] (g).providers[0] (up).weight", "0"),
    ([{"name": "g", "type": "fallback", "providers": [{"name": "up", "weight": 2}]}],
     "engine.group_weight_not_load_balance", "groups[0] (g).providers[0] (up).weight", "2"),
    ([{"name": "g", "type": "url-test", "balance_by": "latency", "providers": ["up"]}],
     "engine.group_balance_not_load_balance", "groups[0] (g).balance_by", "latency"),
    ([{"name": "g", "providers": ["up", "nope"]}],
     "engine.group_unknown_member", "groups[0] (g).providers[1] (nope)", "nope"),
    ([{"name": "g", "providers": ["up", "other", "up"]}],
     "engine.group_duplicate_member", "groups[0] (g).providers[2] (up)", "up"),
    ([{"name": "g", "providers": []}],
     "engine.group_empty", "groups[0] (g).providers", None),
    ([{"name": "g", "providers": ["up"]}, {"name": "g", "providers": ["other"]}],
     "engine.group_duplicate_name", "groups[1] (g).name", "g"),
]


@pytest.mark.parametrize("groups,code,path,value", GROUP_CASES,
                         ids=[f"{c[1]}-{i}" for i, c in enumerate(GROUP_CASES)])
def test_check_names_path_value_and_code_of_each_group_problem(tmp_path, groups, code, path,
                                                               value):
    cfg = config(tmp_path, [provider("up", base_url=DEAD), provider("other", base_url=DEAD)],
                 groups=groups)
    rc, out, problems = check(write_config(tmp_path, cfg))

    assert rc != 0, out
    hits = [p for p in problems if p["code"] == code]
    assert hits, out
    assert hits[0]["path"] == path, out
    if value is not None:
        assert hits[0]["value"].strip("\"'") == value, out


def test_check_accepts_a_config_with_every_group_type(tmp_path):
    cfg = config(tmp_path, [provider("up", base_url=DEAD), provider("other", base_url=DEAD)],
                 groups=[
                     {"name": "g1", "type": "fallback", "providers": ["up", "other"]},
                     {"name": "g2", "type": "load-balance", "balance_by": "latency-health",
                      "providers": [{"name": "up", "weight": 7},
                                    {"name": "other", "weight": 3, "model": "m2"}]},
                     {"name": "g3", "type": "url-test", "model": "m",
                      "providers": ["up", {"name": "other", "model": "m3"}]},
                     {"name": "g4", "type": "cheapest", "providers": ["other", "up"]}])
    rc, out, problems = check(write_config(tmp_path, cfg))
    assert rc == 0, out
    assert problems == [], out
