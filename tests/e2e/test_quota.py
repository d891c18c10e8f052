# SPDX-License-Identifier: MIT
# tests/e2e/test_quota.py - upstream credentials and their quotas in the request path
# (DESIGN.md 10, issue 11) through real gwd and gwbench processes: every key of a provider
# is used (turns without quota), a 429 / 402 / 403 from one credential cools it (source,
# until) and the same request goes on to another credential of the same provider, a body
# stating a TPM limit is learned, an RPM of M against N > M parallel requests dispatches
# exactly M and answers the rest 429 gw.quota_all with Retry-After, a short cooldown is
# waited for within slot_wait_secs, a restart keeps the windows (rows carry the
# credential's fingerprint, never the secret), dry-run names the next credential.
# gwbench's --fault-key applies a fault to one credential only; its stats count requests
# per credential.

import concurrent.futures
import hashlib
import json
import re
import signal
import time

import pytest

from gwtest import (base_env, chat_body, config, dry_run, gwctl_run, overview, parse_ts,
                    provider, wait_until, write_config)
from test_events_logs import EventStream

K1, K2, K3 = "up-key-one", "up-key-two", "up-key-three"


def fp(secret):
    """The credential's fingerprint as rows and views show it (core/quota.h)."""
    return hashlib.sha256(secret.encode()).hexdigest()[:12]


def prov(bench, keys, quota=None, name="a"):
    return provider(name, bench, keys=[{"value": k} for k in keys],
                    quota=dict({"local_cooldown_cap_secs": 0}, **(quota or {})))


def creds_of(row):
    return [(a["outcome"], a["status"], a["credential"]) for a in row["attempts"]]


def quota_units(g, provider_name="a", model="gpt-test"):
    """{fingerprint: unit view} of <provider_name>'s set for <model> in the overview."""
    q = overview(g)["quota"][provider_name]
    for s in q["sets"]:
        if s["model"] == model:
            return {c["fp"]: c for c in s["credentials"]}
    raise AssertionError(f"no quota set for {model}: {q}")


def ok(g, **kw):
    r = g.chat(chat_body(text=f"q {time.monotonic_ns()}"), **kw)
    assert r.status == 200, r
    return g.wait_row(r.headers["x-request-id"])


def first_hit_on(g, bad):
    """Sends requests until one has a hop on credential <bad> (at most 3: turns), returns
    that request's row."""
    for _ in range(3):
        row = ok(g)
        if any(a["credential"] == fp(bad) for a in row["attempts"]):
            return row
    raise AssertionError(f"no request was sent with {bad}")


# ---------------------------------------------------------------- turns

def test_two_and_three_credentials_take_turns_without_quota(tmp_path, bench, gwd):
    for keys in ([K1, K2], [K1, K2, K3]):
        b = bench("--chunks", 1)
        g = gwd(config(tmp_path / str(len(keys)), [prov(b, keys)]))
        rows = [ok(g) for _ in range(2 * len(keys))]

        used = [row["attempts"][-1]["credential"] for row in rows]
        assert sorted(set(used)) == sorted(fp(k) for k in keys), used
        # round robin: each credential once per turn, in a fixed order
        assert used[:len(keys)] == used[len(keys):], used
        assert b.stats()["keys"] == {k: 2 for k in keys}, b.stats()
        # the secret is never on a row
        assert not any(k in json.dumps(rows) for k in keys)


@pytest.mark.parametrize("dialect", ["anthropic", "gemini", "responses"])
def test_each_upstream_shape_sends_the_chosen_credential(tmp_path, bench, gwd, dialect):
    b = bench("--chunks", 1)
    p = prov(b, [K1, K2])
    p["dialect"] = dialect
    g = gwd(config(tmp_path, [p]))
    rows = [ok(g) for _ in range(4)]

    assert b.stats()["keys"] == {K1: 2, K2: 2}, b.stats()
    assert sorted(row["attempts"][-1]["credential"] for row in rows) == \
        sorted([fp(K1), fp(K2)] * 2), rows


# ---------------------------------------------------------------- cooldowns

def test_429_moves_the_request_to_the_next_credential_and_cools_the_first(tmp_path, bench, gwd):
    b = bench("--chunks", 1, "--fault", "status", "--status", 429, "--fault-key", K1)
    g = gwd(config(tmp_path, [prov(b, [K1, K2])]))

    t0 = time.time()
    row = first_hit_on(g, K1)

    # one provider, two hops: the 429 of K1, then K2 answers
    assert creds_of(row) == [("failed", 429, fp(K1)), ("ok", 200, fp(K2))], row
    assert [a["upstream"] for a in row["attempts"]] == ["a", "a"], row
    u = quota_units(g)[fp(K1)]
    cool = u["cooldown"]
    assert cool["source"] == "unknown" and cool["hits"] == 1, u  # no limit known: 90 s
    assert t0 + 90 - 10 <= parse_ts(cool["until"]) <= time.time() + 90 + 5, (cool, t0)
    assert quota_units(g)[fp(K2)]["cooldown"] is None
    assert overview(g)["providers"][0]["state"] == "ok"  # a quota failure pauses no provider
    g.err.wait_for("credential_cooldown")
    # while K1 cools every request goes to K2 without trying K1
    for _ in range(3):
        assert creds_of(ok(g)) == [("ok", 200, fp(K2))]
    assert b.stats()["keys"][K1] == 1, b.stats()
    # dry-run names the credential the next request would use and why K1 is skipped
    q = dry_run(g, "gpt-test")["candidates"][0]["quota"]
    assert q["chosen"] == fp(K2), q
    verdicts = {c["fp"]: c["verdict"] for c in q["credentials"]}
    assert verdicts[fp(K1)].startswith("cooling: unknown"), verdicts
    rc, out, err = gwctl_run(g, "dry-run", "gpt-test")
    assert rc == 0, (out, err)
    assert re.search(rf"(?m)^credentials of a:\n  {fp(K1)}  cooling: unknown.*\n  {fp(K2)}  chosen",
                     out), out
    # gwctl quota: a table per provider with the cooldown's source, until and hits
    rc, out, err = gwctl_run(g, "quota")
    assert rc == 0, (out, err)
    assert re.search(rf"(?m)^a \(pool model\)$", out), out
    assert re.search(rf"(?m)^gpt-test\s+{fp(K1)}\s.*unknown until \+\d+s, 1 hits", out), out
    assert re.search(rf"(?m)^gpt-test\s+{fp(K2)}\s+\d+\s.*\s-\s+-$", out), out
    rc, out, err = gwctl_run(g, "quota", "a", json_out=True)
    assert rc == 0, (out, err)
    assert json.loads(out)["pool"] == "model", out


def test_retry_after_sets_an_authoritative_cooldown(tmp_path, bench, gwd):
    b = bench("--chunks", 1, "--fault", "status", "--status", 429, "--retry-after", 300,
              "--fault-key", K1)
    g = gwd(config(tmp_path, [prov(b, [K1, K2])]))

    t0 = time.time()
    first_hit_on(g, K1)

    cool = quota_units(g)[fp(K1)]["cooldown"]
    assert cool["authoritative"] is True, cool
    assert t0 + 300 - 10 <= parse_ts(cool["until"]) <= time.time() + 300 + 5, (cool, t0)


def test_a_body_stating_a_tpm_limit_is_learned_and_cools_as_transient(tmp_path, bench, gwd,
                                                                     restart):
    err = {"error": {"message": "Rate limit reached for model `m` in organization `o` on "
                                "tokens per min (TPM): Limit 30000, Used 29000, Requested 3400."
                                " Please try again in 4.2s.",
                     "type": "tokens", "code": "rate_limit_exceeded"}}
    b = bench("--chunks", 1, "--fault", "status", "--status", 429, "--fault-key", K1,
              "--error-body", json.dumps(err))
    g = gwd(config(tmp_path, [prov(b, [K1, K2])]))

    first_hit_on(g, K1)

    u = quota_units(g)[fp(K1)]
    assert u["learned"]["tpm"]["limit"] == 30000, u
    assert u["learned"]["tpm"]["origin"], u
    assert u["windows"]["tpm"]["limit"] == 30000, u
    assert u["cooldown"]["source"] == "transient", u  # a known limit, healthy day counters

    # the learned limit is kept across a restart, with where it came from
    g = restart(g)
    v = quota_units(g)[fp(K1)]
    assert v["learned"]["tpm"] == u["learned"]["tpm"], (u, v)
    assert v["windows"]["tpm"]["limit"] == 30000, v


def test_402_cools_as_credit_and_403_as_tier(tmp_path, bench, gwd):
    for status, source in ((402, "credit"), (403, "tier")):
        b = bench("--chunks", 1, "--fault", "status", "--status", status, "--fault-key", K1)
        g = gwd(config(tmp_path / str(status), [prov(b, [K1, K2])]))

        row = first_hit_on(g, K1)

        assert creds_of(row) == [("failed", status, fp(K1)), ("ok", 200, fp(K2))], row
        assert quota_units(g)[fp(K1)]["cooldown"]["source"] == source


def test_every_credential_cooling_fails_over_to_the_next_provider(tmp_path, bench, gwd):
    a = bench("--chunks", 1, "--fault", "status", "--status", 429)
    b = bench("--chunks", 1)
    g = gwd(config(tmp_path, [prov(a, [K1, K2]), provider("b", b)]))

    row = ok(g)

    assert [(x["upstream"], x["outcome"]) for x in row["attempts"]] == \
        [("a", "failed"), ("a", "failed"), ("b", "ok")], row
    assert {x["credential"] for x in row["attempts"][:2]} == {fp(K1), fp(K2)}, row
    # both cooling: the next request skips a for quota
    row = ok(g)
    assert [(x["upstream"], x["outcome"]) for x in row["attempts"]] == \
        [("a", "skipped:quota"), ("b", "ok")], row
    assert a.stats()["requests"] == 2


# ---------------------------------------------------------------- windows

def test_leases_settle_to_the_real_usage_streamed_or_not(tmp_path, bench, gwd):
    b = bench("--chunks", 5)
    g = gwd(config(tmp_path, [prov(b, [K1], quota={"default": {"tpm": 1000000}})]))
    total = 0
    for stream in (False, True):
        r = g.chat(chat_body(stream=stream, include_usage=True if stream else None,
                             text=f"usage {stream}"))
        assert r.status == 200, r
        u = g.wait_row(r.headers["x-request-id"])["usage"]
        assert not u["estimated"], u
        total += u["input_tokens"] + u["output_tokens"] + u["cache_read_tokens"] + \
            u["cache_write_tokens"]
        w = quota_units(g)[fp(K1)]
        assert w["windows"]["tpm"]["used"] == total, (w, u)
        assert w["windows"]["tpd"]["used"] == total, (w, u)
        assert w["leases"] == 0, w
    assert quota_units(g)[fp(K1)]["windows"]["rpm"]["used"] == 2


def test_rpm_of_m_dispatches_exactly_m_of_n_parallel_requests(tmp_path, bench, gwd):
    m, n = 3, 8
    b = bench("--chunks", 1, "--ttft-ms", 300)
    g = gwd(config(tmp_path, [prov(b, [K1], quota={"default": {"rpm": m}})],
                   failover={"slot_wait_secs": 0}))

    with concurrent.futures.ThreadPoolExecutor(n) as ex:
        resps = list(ex.map(lambda i: g.chat(chat_body(text=f"burst {i}")), range(n)))

    codes = sorted(r.status for r in resps)
    assert codes == [200] * m + [429] * (n - m), codes
    assert b.stats()["requests"] == m
    for r in resps:
        if r.status == 429:
            assert r.headers["x-gw-code"] == "gw.quota_all", r
            assert 1 <= int(r.headers["retry-after"]) <= 60, r.headers
            assert r.json()["error"]["code"] == "gw.quota_all" or \
                r.json()["error"].get("gw_code") == "gw.quota_all", r.json()
    row = g.wait_row(next(r for r in resps if r.status == 429).headers["x-request-id"])
    assert [x["outcome"] for x in row["attempts"]] == ["skipped:quota"], row
    assert quota_units(g)[fp(K1)]["windows"]["rpm"]["used"] == m


def test_a_cooldown_ending_within_slot_wait_secs_is_waited_for(tmp_path, bench, gwd):
    b = bench("--chunks", 1)
    g = gwd(config(tmp_path, [prov(b, [K1], quota={"local_cooldown_cap_secs": 2})],
                   failover={"slot_wait_secs": 10}))
    evs = EventStream(g, "type=credential_cooldown,credential_recovered")
    try:
        # the only credential answers 429 once (a per-request fault): it cools for 2 s (the
        # local cap); that request reached the upstream, so it is answered at once
        r = g.chat(chat_body(), headers={"x-bench-fault": "status", "x-bench-status": "429"})
        assert r.status == 429 and r.headers["x-gw-code"] == "gw.quota_all", r
        assert 1 <= int(r.headers["retry-after"]) <= 2, r.headers
        cool = evs.wait_event(lambda n, d: n == "credential_cooldown", "credential_cooldown")
        assert (cool["provider"], cool["credential"], cool["status"], cool["capped"]) == \
            ("a", fp(K1), 429, True), cool
        t0 = time.monotonic()
        row = ok(g)  # skipped for quota, then waited for the cooldown's end

        assert time.monotonic() - t0 >= 1.0
        assert [x["outcome"] for x in row["attempts"]] == ["ok"], row
        assert row["queued_ms"] >= 1000, row
        rec = evs.wait_event(lambda n, d: n == "credential_recovered", "credential_recovered")
        assert (rec["credential"], rec["reason"]) == (fp(K1), "answered"), rec
        assert [n for n, _ in evs.events()] == ["credential_cooldown", "credential_recovered"]
    finally:
        evs.close()


def test_a_restart_keeps_the_windows(tmp_path, bench, gwd, restart):
    b = bench("--chunks", 1)
    g = gwd(config(tmp_path, [prov(b, [K1], quota={"default": {"rpm": 2}})],
                   failover={"slot_wait_secs": 0}))
    for _ in range(2):
        ok(g)

    g = restart(g)

    assert quota_units(g)[fp(K1)]["windows"]["rpm"]["used"] == 2
    r = g.chat(chat_body())
    assert r.status == 429 and r.headers["x-gw-code"] == "gw.quota_all", r
    assert b.stats()["requests"] == 2


def reload(g, tmp_path, cfg):
    start = g.err.count()
    write_config(tmp_path, cfg)
    g.signal(signal.SIGHUP)
    g.err.wait_for(r"code=reloaded\b", start=start)


def test_a_reload_keeps_the_counts_and_new_keys_are_rebuilt_from_rows(tmp_path, bench, gwd):
    b = bench("--chunks", 1)
    cfg = lambda keys, rpm: config(tmp_path, [prov(b, keys, quota={"default": {"rpm": rpm}})],
                                   failover={"slot_wait_secs": 0})
    g = gwd(cfg([K1], 2))
    for _ in range(2):
        ok(g)
    assert g.chat(chat_body()).headers.get("x-gw-code") == "gw.quota_all"

    reload(g, tmp_path, cfg([K1], 3))  # a higher limit, the same key: the count stays
    w = quota_units(g)[fp(K1)]["windows"]["rpm"]
    assert (w["used"], w["limit"]) == (2, 3), w
    ok(g)
    assert g.chat(chat_body()).headers.get("x-gw-code") == "gw.quota_all"

    reload(g, tmp_path, cfg([K1, K2], 3))  # keys changed: new sets, rebuilt from the rows
    units = quota_units(g)
    assert units[fp(K1)]["windows"]["rpm"]["used"] == 3, units
    assert units[fp(K2)]["windows"]["rpm"]["used"] == 0, units
    assert creds_of(ok(g)) == [("ok", 200, fp(K2))]


def test_pool_account_counts_one_quota_across_models(tmp_path, bench, gwd):
    b = bench("--chunks", 1)
    g = gwd(config(tmp_path, [prov(b, [K1], quota={"pool": "account", "default": {"rpm": 2}})],
                   failover={"slot_wait_secs": 0}))
    for model in ("m-one", "m-two"):
        r = g.chat(chat_body(model=model))
        assert r.status == 200, r
    r = g.chat(chat_body(model="m-three"))
    assert r.status == 429 and r.headers["x-gw-code"] == "gw.quota_all", r

    q = overview(g)["quota"]["a"]
    assert q["pool"] == "account" and [s["model"] for s in q["sets"]] == [""], q
    assert q["sets"][0]["credentials"][0]["windows"]["rpm"] == \
        {"used": 2, "limit": 2, "resets_at": q["sets"][0]["credentials"][0]["windows"]["rpm"]
         ["resets_at"]}, q
    rc, out, err = gwctl_run(g, "quota")
    assert rc == 0 and re.search(rf"(?m)^\(all\)\s+{fp(K1)}\s+2/2\s", out), (out, err)


# ---------------------------------------------------------------- /metrics

def test_metrics_show_the_cooling_credential_and_windows_as_sent(tmp_path, bench, gwd):
    from test_metrics import one, scrape

    b = bench("--chunks", 1, "--fault", "status", "--status", 429, "--fault-key", K1)
    g = gwd(config(tmp_path, [prov(b, [K1, K2], quota={"default": {"rpm": 1000, "tpd": 10**9}})]))
    row = first_hit_on(g, K1)
    t_hit = time.time()
    for _ in range(3):
        ok(g)

    s, types, text = scrape(g)

    sent = b.stats()["keys"]  # requests gwbench received per credential
    assert sent[K1] == 1 and sent[K2] >= 4, sent
    lab = {"provider": "a", "model": "gpt-test"}
    for k in (K1, K2):
        for w in ("rpm", "rpd"):
            assert one(s, "gw_quota_window_used", credential=fp(k), window=w, **lab) == sent[k]
        assert one(s, "gw_quota_leases", credential=fp(k), **lab) == 0
        assert one(s, "gw_quota_leases_dropped_total", credential=fp(k), **lab) == 0
    assert one(s, "gw_quota_window_limit", credential=fp(K1), window="rpm", **lab) == 1000
    assert one(s, "gw_quota_window_limit", credential=fp(K2), window="tpd", **lab) == 10**9
    assert not [x for x in s["gw_quota_window_limit"] if x[0]["window"] in ("tpm", "rpd")]
    # K1 cools with its source (a limit is known, day counters healthy: transient); K2 not
    assert one(s, "gw_quota_cooling", credential=fp(K1), source="transient", **lab) == 1
    assert one(s, "gw_quota_cooling", credential=fp(K2), source="none", **lab) == 0
    until = one(s, "gw_quota_cooldown_until_seconds", credential=fp(K1), **lab)
    assert abs(until - parse_ts(quota_units(g)[fp(K1)]["cooldown"]["until"])) < 0.002
    assert t_hit + 90 - 15 <= until <= t_hit + 90 + 5, (until, t_hit)
    assert one(s, "gw_quota_cooldown_until_seconds", credential=fp(K2), **lab) == 0
    assert types["gw_quota_cooling"] == "gauge" and types["gw_quota_leases_dropped"] == "counter"
    assert one(s, "gw_quota_units_omitted") == 0
    # fingerprints only, never a secret
    assert K1 not in text and K2 not in text
    assert row["attempts"][0]["credential"] == fp(K1)


# ---------------------------------------------------------------- probes

# GW_TEST_QUOTA_PROBE_DIV=60 (net/probe.h, for tests only): a probe pass every second and a
# probe once a heuristic cooldown has served half with at least 1 s left (60 s / 60), so a
# cooldown capped at 8 s is probed between 4 s and 7 s into it, well before it ends.
PROBE_ENV = {"GW_TEST_QUOTA_PROBE_DIV": "60"}
PROBE_CAP = 8


def probe_gwd(gwd, cfg):
    return gwd(cfg, env=dict(base_env(), **PROBE_ENV))


def cool_by_one_429(g, model="gpt-test"):
    """One request whose only credential answers 429 (a per-request fault: the upstream
    is healthy again right after)."""
    r = g.chat(chat_body(model=model),
               headers={"x-bench-fault": "status", "x-bench-status": "429"})
    assert r.status == 429 and r.headers["x-gw-code"] == "gw.quota_all", r
    g.wait_row(r.headers["x-request-id"])


def test_a_probe_clears_a_cooled_credential_whose_upstream_recovered(tmp_path, bench, gwd):
    from test_metrics import by, scrape

    b = bench("--chunks", 1)
    g = probe_gwd(gwd, config(tmp_path, [prov(b, [K1], quota={
        "local_cooldown_cap_secs": PROBE_CAP})], failover={"slot_wait_secs": 0}))
    evs = EventStream(g, "type=credential_cooldown,credential_recovered")
    try:
        cool_by_one_429(g)
        cool = evs.wait_event(lambda n, d: n == "credential_cooldown", "credential_cooldown")
        until = parse_ts(cool["until"])
        assert (cool["credential"], cool["source"], cool["authoritative"]) == \
            (fp(K1), "unknown", False), cool

        rec = evs.wait_event(lambda n, d: n == "credential_recovered", "credential_recovered")
        t_rec = time.time()

        assert (rec["provider"], rec["credential"], rec["reason"]) == ("a", fp(K1), "probe"), rec
        # cleared early: half served, more than the 1 s minimum left
        assert t_rec < until - 0.5, (t_rec, until)
        assert quota_units(g)[fp(K1)]["cooldown"] is None
        g.err.wait_for(rf"code=quota_probe .*credential {fp(K1)} probe passed: status 200")
        # one probe: the model listing with that credential, no completion
        st = b.stats()
        assert (st["models"], st["keys"][K1], st["requests"]) == (1, 2, 2), st
        # the probe is no client's request: no row, no count in the credential's windows
        assert quota_units(g)[fp(K1)]["windows"]["rpm"]["used"] == 1
        s, _, _ = scrape(g)
        assert sum(by(s, "gw_requests_total", "client").values()) == 1, s["gw_requests_total"]
        # and the credential serves at once, long before its cooldown would have ended
        assert creds_of(ok(g)) == [("ok", 200, fp(K1))]
        assert [n for n, _ in evs.events()] == ["credential_cooldown", "credential_recovered"]
    finally:
        evs.close()


def test_a_failed_probe_leaves_the_cooldown_and_backs_off(tmp_path, bench, gwd):
    # K1 still refuses everything, model listings included
    b = bench("--chunks", 1, "--fault", "status", "--status", 429, "--fault-key", K1)
    g = probe_gwd(gwd, config(tmp_path, [prov(b, [K1, K2], quota={
        "local_cooldown_cap_secs": PROBE_CAP})]))
    first_hit_on(g, K1)
    before = quota_units(g)[fp(K1)]["cooldown"]

    g.err.wait_for(rf"code=quota_probe .*credential {fp(K1)} probe failed: status 429")

    assert quota_units(g)[fp(K1)]["cooldown"] == before  # neither cleared nor lengthened
    # the next probe waits 2 min: none more within this cooldown, which ends as it was
    wait_until(lambda: quota_units(g)[fp(K1)]["cooldown"] is None, what="cooldown end",
               timeout=PROBE_CAP + 5)
    assert time.time() >= parse_ts(before["until"]) - 0.05
    assert b.stats()["models"] == 1, b.stats()


def test_no_probe_with_quota_probes_false(tmp_path, bench, gwd):
    # a (probes off) and b (probes on) cool the same way; b is probed, a never is
    ba, bb = bench("--chunks", 1), bench("--chunks", 1)
    pa = prov(ba, [K1], quota={"local_cooldown_cap_secs": PROBE_CAP, "probes": False}, name="a")
    pb = prov(bb, [K2], quota={"local_cooldown_cap_secs": PROBE_CAP}, name="b")
    pa["models"], pb["models"] = ["m-a"], ["m-b"]
    g = probe_gwd(gwd, config(tmp_path, [pa, pb], failover={"slot_wait_secs": 0}))
    cool_by_one_429(g, "m-a")
    cool_by_one_429(g, "m-b")
    until_a = parse_ts(quota_units(g, "a", "m-a")[fp(K1)]["cooldown"]["until"])

    g.err.wait_for(rf"code=credential_recovered .*credential {fp(K2)} probe")
    wait_until(lambda: quota_units(g, "a", "m-a")[fp(K1)]["cooldown"] is None,
               what="a's cooldown end", timeout=PROBE_CAP + 5)

    assert time.time() >= until_a - 0.05  # a's cooldown ran its whole course
    assert bb.stats()["models"] == 1, bb.stats()
    assert ba.stats()["models"] == 0, ba.stats()
    assert f"credential {fp(K1)} probe" not in g.err.text()
