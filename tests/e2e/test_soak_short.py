# SPDX-License-Identifier: MIT
# tests/e2e/test_soak_short.py - the short form of bench/soak.py (issue 13 point 4): one
# gwd with the admission path configured tight enough that requests queue (a key with
# max_concurrent and three limits, providers with max_concurrent, three upstream
# credentials under quota windows, one answering 429, a fallback group whose first member
# always fails) takes, at once, bounded open-loop loads of every kind: non-streamed Chat,
# paced Chat and Messages streams, the fallback group, a model whose only upstream
# answers 500, streams the upstream cuts mid-way, and clients that hang up mid-stream or
# while they wait for a slot. Once the loads are over, every counter of something held
# must return to zero: key and provider in_flight and waiting, quota leases (open, and
# none dropped by the sweep), client connections; every request has its row; and the
# key's limits count exactly what the rows say (no reservation left unsettled).
# Synchronisation: the loads are processes waited for; the counters are polled with a
# deadline (wait_until); nothing sleeps a fixed time.

import json
import subprocess
import threading

from gwtest import (ALICE_KEY, base_env, binary, chat_body, config, overview, provider,
                    sha256_hex, wait_until)
from test_http2 import H2  # a python3-h2 client (prior knowledge)

UP_KEYS = ["soak-cred-0", "soak-cred-1", "soak-cred-bad"]  # the last always answers 429
PACED = ["x-bench-chunks: 10", "x-bench-interval-ms: 30"]   # ~0.3 s, read to its end
LONG = ["x-bench-chunks: 100", "x-bench-interval-ms: 50"]   # ~5 s, cut by the client
HANGUP_MS = 700
# name, --api, model, --stream, headers, --timeout-ms, --rate, --requests, expect
MIX = [
    ("chat", "chat", "mock-model", False, [], None, 40, 240, "ok"),
    ("chat-stream", "chat", "mock-model", True, PACED, None, 10, 60, "ok"),
    ("msg-stream", "messages", "mock-model", True, PACED, None, 5, 30, "ok"),
    ("failover", "chat", "soak-fallback", False, [], None, 10, 60, "ok"),
    ("upstream-500", "chat", "broken-model", False, [], None, 5, 30, "fail"),
    ("drop-mid", "chat", "drop-model", True, PACED, None, 5, 30, "fail"),
    ("hangup", "chat", "mock-model", True, LONG, HANGUP_MS, 5, 30, "hangup"),
]
TRANSPORT = ("connect", "timeout", "reset", "parse")
# HTTP/2 clients, one after the other during the loads: each opens H2_STREAMS long
# streams on one connection, resets the first (RST_STREAM CANCEL) once any of them has
# an answer (the others running or waiting for a slot), then closes the connection.
H2_CONNS, H2_STREAMS = 8, 3
# Slots: the streams and hang-ups alone keep about 8 requests on mock at once, so
# requests queue for its 6 slots and the key's 8 permits (and hang up while queued).
KEY_SLOTS, MOCK_SLOTS = 8, 6
# mock's rpm: its 420 requests (all of MIX but broken-model and drop-model, within the
# minute) put each of the two good credentials at 70% of it; a credential never seen
# answering counts as half used (DESIGN.md 10), so once the good ones pass 50% the bad one
# is chosen (429, cooled, the request moves on to another credential) whatever the timing.
RPM = 300
PATHS = {"chat": "/v1/chat/completions", "messages": "/v1/messages"}


def soak_config(tmp_path, mock, dead, dropper):
    c = config(
        tmp_path,
        [provider("mock", mock, models=["mock-model"], keys=[{"value": k} for k in UP_KEYS],
                  max_concurrent=MOCK_SLOTS,
                  quota={"default": {"rpm": RPM, "tpm": 100000000, "rpd": 100000000,
                                     "tpd": 10000000000}},
                  model_specs={"mock-model": {"input": 1.0, "output": 4.0}}),
         provider("dead", dead, models=["broken-model"], keys=[{"value": "soak-dead"}],
                  max_concurrent=2),
         provider("dropper", dropper, models=["drop-model"], keys=[{"value": "soak-drop"}],
                  max_concurrent=2)],
        clients=[{"name": "alice", "key_sha256": sha256_hex(ALICE_KEY),
                  "max_concurrent": KEY_SLOTS,
                  "limits": [{"per": "hour", "requests": 1000000},
                             {"per": "hour", "tokens": 1000000000},
                             {"per": "month", "cost": 1000000}]}],
        failover={"failures_to_pause": 3, "pause_secs": 1, "max_pause_secs": 2,
                  "slot_wait_secs": 20})
    c["groups"] = [{"name": "soak-fallback", "type": "fallback",
                    "providers": [{"name": "dead", "model": "broken-model"},
                                  {"name": "mock", "model": "mock-model"}]}]
    return c


def start_loads(g):
    """Starts every load of MIX as its own `gwbench load` process; [(mix entry, Popen)]."""
    runs = []
    for m in MIX:
        name, api, model, stream, headers, tmo, rate, n, _ = m
        conns = max(4, int(rate * (2 if tmo or stream else 1)))
        argv = [binary("gwbench"), "load", "--json", "--quiet", "--api", api,
                "--url", f"{g.url}{PATHS[api]}", "--key", ALICE_KEY, "--model", model,
                "--rate", str(rate), "--requests", str(n), "--connections", str(conns),
                "--threads", "1"]
        argv += ["--stream"] if stream else []
        for h in headers:
            argv += ["--header", h]
        argv += ["--timeout-ms", str(tmo)] if tmo else []
        runs.append((m, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         env=base_env())))
    return runs


def h2_hangups(g, out):
    """The HTTP/2 clients above; out["h2"]: streams opened, or the error that stopped them."""
    opened = 0
    try:
        for i in range(H2_CONNS):
            c = H2(g.port)
            sids = [c.request(chat_body(model="mock-model", stream=True, text=f"h2 {i} {k}"),
                              headers=[(h.split(": ")[0].lower(), h.split(": ")[1])
                                       for h in LONG]) for k in range(H2_STREAMS)]
            opened += len(sids)
            c.pump(lambda: any(c.streams[s]["status"] for s in sids), timeout=30,
                   what="an answer on one of the streams")
            c.conn.reset_stream(sids[0])
            c.flush()
            c.close()
        out["h2"] = opened
    except Exception as e:  # reported by the test
        out["h2"] = f"{e!r} after {opened} streams"


def metric(g, name):
    """The value of an unlabelled series of gwd <g>'s /metrics."""
    r = g.control("/metrics", token=None)
    assert r.status == 200, r
    for line in r.body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def held(g):
    """Every counter of the overview and /metrics that names something held and is not
    zero, as "where: value" strings."""
    ov, bad = overview(g), []
    for sec in ("providers", "keys"):
        for e in ov[sec]:
            for f in ("in_flight", "waiting"):
                if e[f]:
                    bad.append(f"{sec}[{e['name']}].{f}: {e[f]}")
    for prov, q in ov["quota"].items():
        for st in q["sets"]:
            for c in st["credentials"]:
                if c["leases"]:
                    bad.append(f"quota[{prov}/{c['fp']}].leases: {c['leases']}")
    if metric(g, "gw_client_connections"):
        bad.append(f"gw_client_connections: {metric(g, 'gw_client_connections')}")
    return bad


def all_rows(g):
    """Every traffic row of gwd <g>, newest first (pages of 500)."""
    rows, cursor = [], ""
    while True:
        r = g.control(f"/control/v1/traffic?limit=500&cursor={cursor}")
        assert r.status == 200, r
        page = r.json()
        rows += page["rows"]
        if not page["next"]:
            return rows
        cursor = page["next"]


def counts_for_limits(row):
    """The rule of core/limits.h: a row counts when some hop was sent to an upstream."""
    return any(a["outcome"] not in ("none", "refused") and not a["outcome"].startswith("skipped")
               for a in row["attempts"])


def test_mixed_load_leaves_nothing_held(bench, gwd, tmp_path):
    mock = bench("--fault", "status", "--status", "429", "--fault-key", UP_KEYS[-1])
    dead = bench("--fault", "status")
    dropper = bench("--fault", "drop-mid")
    g = gwd(soak_config(tmp_path, mock, dead, dropper))

    res = {}
    runs = start_loads(g)
    h2 = threading.Thread(target=h2_hangups, args=(g, res))
    h2.start()
    for m, p in runs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, (m[0], err)
        res[m[0]] = json.loads(out)
    h2.join(120)
    assert res["h2"] == H2_CONNS * H2_STREAMS, res["h2"]
    issued = res["h2"]
    for name, *_, n, kind in MIX:
        s = res[name]
        errs = s["errors"]
        issued += s["requests"]
        assert s["requests"] == n, (name, s)
        # nothing lost: each request was answered or failed at the transport
        assert s["completed"] + sum(errs.get(k, 0) for k in TRANSPORT) == n, (name, s)
        if kind == "ok":
            assert s["ok"] == n, (name, s)
        elif kind == "fail":
            assert s["ok"] == 0 and s["completed"] == n, (name, s)
        else:  # every one cut by its client, queued for a slot or mid-stream
            assert errs.get("timeout") == n, (name, s)

    # the loads are over: everything held is given back, every request has its row
    wait_until(lambda: not held(g), what="nothing held")
    wait_until(lambda: metric(g, "gw_store_rows_committed_total") == issued,
               what=f"{issued} rows committed")
    ov = overview(g)
    creds = ov["quota"]["mock"]["sets"][0]["credentials"]
    assert [c["leases_dropped"] for c in creds] == [0, 0, 0], creds
    # the bad credential was chosen too (see RPM), its 429s moved on to another
    assert all(c["windows"]["rpd"]["used"] > 0 for c in creds), [(c["fp"], c["windows"]["rpd"], c["seen"]) for c in creds]

    # the key's limits hold exactly what its rows say: no reservation left unsettled
    rows = [r for r in all_rows(g) if r["client"] == "alice"]
    assert len(rows) == issued
    counted = [r for r in rows if counts_for_limits(r)]
    tokens = sum(r["usage"]["input_tokens"] - r["usage"]["cache_read_tokens"]
                 + r["usage"]["cache_write_tokens"] + r["usage"]["output_tokens"]
                 for r in counted)
    cost = sum(r["cost_usd"] for r in counted)
    lims = {(x["per"], x["measure"]): x["used"]
            for x in next(k for k in ov["keys"] if k["name"] == "alice")["limits"]}
    assert lims[("hour", "requests")] == len(counted), (lims, len(counted))
    assert lims[("hour", "tokens")] == tokens, (lims, tokens)
    assert abs(lims[("month", "cost")] - cost) < 1e-6 * (len(counted) + 1), (lims, cost)
    assert {r["code"] for r in rows} >= {None, "gw.upstream.failed", "gw.client.cancelled"}
    assert any(r["queued_ms"] > 0 for r in rows), "no request waited for a slot"
