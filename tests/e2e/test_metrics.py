# SPDX-License-Identifier: MIT
# tests/e2e/test_metrics.py - GET /metrics (issue 12 point 3, docs/metrics.md) read with a
# real Prometheus text parser (Debian's python3-prometheus-client, tools/deps.sh): a parse
# error fails the test. Requests of two clients over three upstreams, with a failover, a
# failure, streams and a refused sender, must show up exactly: requests by client, model,
# upstream, status class and code; attempts by upstream and outcome; one histogram
# observation per request; tokens and cost as the rows have them (gwbench's usage); the
# upstream and key-limit gauges as the overview has them; store batches; reloads. No
# label value holds a key, a credential or the model an unauthenticated sender wrote.
# The config runs two workers; each request comes on a new connection, which the kernel
# spreads over both listening sockets (SO_REUSEPORT), so totals that equal what was sent
# are the sums of both workers' tables.

import collections

import pytest
from prometheus_client.parser import text_string_to_metric_families  # python3-prometheus-client

from gwtest import (ALICE_KEY, BOB_KEY, CONTROL_TOKEN, UP_KEY_A, UP_KEY_ENV, chat_body, config,
                    overview, provider, rows_of, sha256_hex, wait_until, write_config)

PRICES = "models:\n  - {model: m1, input: 2.0, output: 8.0, cache_read: 0.5}\n"
BAD_KEY = "gw-key-nobody-secret-42"
SECRET_MODEL = "sk-model-looks-like-a-secret-77"
CHUNKS = 3
CACHED = 2


def scrape(g):
    """{sample name: [(labels dict, value)]} of one /metrics page, and its text."""
    r = g.control("/metrics", token=None)
    assert r.status == 200, r
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = r.body.decode("utf-8")
    out = collections.defaultdict(list)
    types = {}
    for fam in text_string_to_metric_families(text):  # raises on any malformed line
        types[fam.name] = fam.type
        for s in fam.samples:
            out[s.name].append((dict(s.labels), s.value))
    return out, types, text


def one(samples, name, **labels):
    got = [v for lab, v in samples[name] if lab == labels]
    assert len(got) == 1, f"{name}{labels}: {got} in {samples[name]}"
    return got[0]


def by(samples, name, *keys):
    """Counter values of <name> summed by the label tuple <keys>."""
    out = collections.Counter()
    for lab, v in samples[name]:
        out[tuple(lab[k] for k in keys)] += v
    return out


def metrics_cfg(tmp_path, fail, ok1, ok2):
    (tmp_path / "prices.yaml").write_text(PRICES)
    return config(
        tmp_path,
        [provider("a", fail, models=["m1", "m3"]),
         provider("b", ok1, models=["m1"], max_concurrent=4,
                  keys=[{"env": "GW_E2E_UP_KEY"}]),
         provider("c", ok2, models=["m2"])],
        clients=[{"name": "alice", "key_sha256": sha256_hex(ALICE_KEY),
                  "limits": [{"per": "day", "requests": 1000}]},
                 {"name": "bob", "key_env": "GW_KEY_BOB"}],
        failover={"failures_to_pause": 100},
        prices="prices.yaml")


def test_metrics_count_what_was_sent_summed_over_workers(tmp_path, bench, gwd):
    fail = bench("--fault", "status", "--status", 500)
    ok1 = bench("--chunks", CHUNKS, "--cached", CACHED)
    ok2 = bench("--chunks", CHUNKS)
    g = gwd(metrics_cfg(tmp_path, fail, ok1, ok2))

    sent = []  # (key, model, stream)
    for _ in range(6):
        sent += [(ALICE_KEY, "m1", False),   # a fails, b answers: a failover
                 (ALICE_KEY, "m1", True),    # the same, streamed
                 (BOB_KEY, "m2", True),      # c answers a stream
                 (BOB_KEY, "m3", False)]     # only a: a failure
    ids = []
    for key, model, stream in sent:
        r = g.chat(chat_body(model=model, stream=stream,
                             include_usage=True if stream else None), key=key)
        ids.append(r.headers["x-request-id"])
    for _ in range(2):  # refused before the client is known: counted, but no row
        r = g.chat(chat_body(model=SECRET_MODEL), key=BAD_KEY)
        assert r.status == 401, r
    rows = rows_of(g, ids)
    assert [row["upstream"] for row in rows[:4]] == ["b", "b", "c", None]
    # Both workers answered some (each logs the failures of upstream a with its number).
    log = g.err.text()
    assert "wrk=0" in log and "wrk=1" in log, log

    m, types, text = scrape(g)

    # Requests by client, model, upstream, status class and code: as the rows say.
    want = collections.Counter(
        (row["client"], row["model"], row["upstream"] or "", f"{row['status'] // 100}xx",
         row["code"] or "ok") for row in rows)
    want[("", "", "", "4xx", "gw.auth.invalid_key")] += 2
    assert by(m, "gw_requests_total", "client", "model", "upstream", "status_class",
              "code") == want
    assert sum(want.values()) == len(sent) + 2
    assert want[("alice", "m1", "b", "2xx", "ok")] == 12
    assert want[("bob", "m2", "c", "2xx", "ok")] == 6
    assert want[("", "", "", "4xx", "gw.auth.invalid_key")] == 2
    assert sum(v for k, v in want.items() if k[:3] == ("bob", "m3", "")) == 6

    # Attempts by upstream and outcome.
    att = collections.Counter((a["upstream"], a["outcome"]) for row in rows
                              for a in row["attempts"])
    assert by(m, "gw_attempts_total", "upstream", "outcome") == att
    assert att[("a", "failed")] == 18 and att[("b", "ok")] == 12 and att[("c", "ok")] == 6

    # Histograms: one observation per request, by answering upstream.
    assert types["gw_request_duration_seconds"] == "histogram"
    # (the two refused at the head were not timed: no observation)
    per_up = collections.Counter(row["upstream"] or "" for row in rows)
    for up, n in per_up.items():
        assert one(m, "gw_request_duration_seconds_count", upstream=up) == n
        assert one(m, "gw_request_duration_seconds_bucket", upstream=up, le="+Inf") == n
        buckets = [(float(lab["le"]), v) for lab, v in m["gw_request_duration_seconds_bucket"]
                   if lab["upstream"] == up]
        assert [float(b) for b in ("0.005", "120.0", "inf")] == \
            [buckets[0][0], buckets[-2][0], buckets[-1][0]]
        assert [v for _, v in buckets] == sorted(v for _, v in buckets)  # cumulative
    ttfc = collections.Counter(row["upstream"] or "" for row in rows
                               if row["ttfb_ms"] is not None)
    assert by(m, "gw_time_to_first_content_seconds_count", "upstream") == \
        collections.Counter({(k,): v for k, v in ttfc.items()})
    assert ttfc["b"] == 12 and ttfc["c"] == 6

    # Tokens and cost by client and model: the rows' usage, which is gwbench's.
    tokens = collections.Counter()
    cost = collections.Counter()
    for row in rows:
        for kind in ("input", "output", "cache_read", "cache_write"):
            tokens[(row["client"], row["model"], kind)] += row["usage"][kind + "_tokens"]
        cost[(row["client"], row["model"])] += row["cost_usd"]
    got = by(m, "gw_tokens_total", "client", "model", "kind")
    assert {k: v for k, v in got.items() if v} == {k: v for k, v in tokens.items() if v}
    assert got[("alice", "m1", "output")] == 12 * CHUNKS
    assert got[("alice", "m1", "cache_read")] == 12 * CACHED
    assert got[("bob", "m2", "output")] == 6 * CHUNKS
    c = by(m, "gw_cost_usd_total", "client", "model")
    assert c[("alice", "m1")] == pytest.approx(cost[("alice", "m1")], abs=1e-5)
    assert c[("alice", "m1")] > 0

    # Upstream state and key limits: as the overview has them.
    ov = overview(g)
    for p in ov["providers"]:
        lab = {"upstream": p["name"]}
        assert one(m, "gw_upstream_paused", **lab) == (1 if p["state"] == "paused" else 0)
        assert one(m, "gw_upstream_consecutive_failures", **lab) == p["consecutive_failures"]
        assert one(m, "gw_upstream_in_flight", **lab) == p["in_flight"] == 0
        assert one(m, "gw_upstream_waiting", **lab) == p["waiting"] == 0
        assert one(m, "gw_upstream_slots", **lab) == (p["max_concurrent"] or 0)
    assert one(m, "gw_upstream_consecutive_failures", upstream="a") == 18
    assert one(m, "gw_upstream_slots", upstream="b") == 4
    assert one(m, "gw_key_limit_used", client="alice", per="day", measure="requests") == 12
    assert one(m, "gw_key_limit_max", client="alice", per="day", measure="requests") == 1000

    # Store: once the writer is idle, every committed row was in a batch and every
    # batch's commit was timed (the writer adds its counters just after a commit, so a
    # scrape may come between the two: wait for it to be idle).
    def store_idle():
        s = scrape(g)[0]
        idle = (one(s, "gw_store_queue_depth") == 0
                and one(s, "gw_store_batch_rows_sum") == one(s, "gw_store_rows_committed_total")
                and one(s, "gw_store_commit_seconds_count") == one(s, "gw_store_batches_total"))
        return s if idle else None
    st = wait_until(store_idle, what="the store writer idle with its counters agreeing")
    assert one(st, "gw_store_batch_rows_sum") >= len(ids)
    assert one(st, "gw_store_batch_rows_count") == one(st, "gw_store_batches_total") > 0

    # The process counters of before are still there.
    assert one(m, "gw_code_total", code="gw.auth.invalid_key") == 2

    # No label value holds a key, a credential, a digest or an unauthenticated model.
    secrets = [ALICE_KEY, BOB_KEY, BAD_KEY, CONTROL_TOKEN, UP_KEY_A, UP_KEY_ENV,
               sha256_hex(ALICE_KEY), SECRET_MODEL]
    for name, samples in m.items():
        for lab, _ in samples:
            for v in lab.values():
                assert not any(s in v for s in secrets), (name, lab)
    assert not any(s in text for s in secrets)


def test_metrics_count_reloads_by_outcome(tmp_path, bench, gwd):
    b = bench()
    cfg = config(tmp_path, [provider("a", b)])
    g = gwd(cfg)
    m, _, _ = scrape(g)
    assert one(m, "gw_reloads_total", outcome="ok") == 0
    assert one(m, "gw_reloads_total", outcome="refused") == 0

    g.signal(1)  # SIGHUP, same file
    g.err.wait_for(r"reloaded")
    write_config(tmp_path, "providers: [not a mapping\n")
    g.signal(1)
    g.err.wait_for(r"reload_failed")

    m, _, _ = scrape(g)
    assert one(m, "gw_reloads_total", outcome="ok") == 1
    assert one(m, "gw_reloads_total", outcome="refused") == 1
    write_config(tmp_path, cfg)  # the fixture's SIGTERM needs no valid file, but be tidy
