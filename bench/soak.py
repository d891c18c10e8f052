#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# bench/soak.py - the long run of issue 13 (DESIGN.md 17): one gwd with the admission
# path configured (a gateway key with max_concurrent and three limits, providers with
# max_concurrent slots, an upstream with three credentials under quota windows, one of
# them always answering 429, a fallback group whose first member always fails) under
# steady open-loop loads of every kind at once for --secs (default 600): non-streamed
# Chat requests, paced Chat streams, paced Messages streams (converted to Chat), the
# failover group, a model whose only upstream answers 500, streams whose upstream drops
# the connection mid-way, and clients that hang up mid-stream (gwbench load
# --timeout-ms shorter than the stream). gwd's VmRSS, RssAnon, RssFile and the Rss of
# its store's data.mdb are sampled every SAMPLE_SECS; once the loads end, the control
# overview and /metrics must show nothing held (key and provider in_flight and waiting,
# quota leases open or dropped by the sweep, client connections, rows queued for the
# store). Exit 1 when something is held, a request is lost (neither answered nor failed
# at the transport), a load ends other than as its kind must, gwd's rows do not count
# every request, the run did not go through what the config sets up, or gwd dies.
# Prints the RSS curve and two tables; writes them as markdown (--out), the final
# overview and /metrics beside it (-overview.json). See docs/gwbench.md.
#
# usage: bench/soak.py [--bin DIR] [--secs N] [--workers N] [--out FILE]
import argparse
import hashlib
import json
import os
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import (ROOT, Proc, cpu_secs, fmt_table, free_port, md_table,  # noqa: E402
                 overview, rss_kb, start_upstream)

SAMPLE_SECS = 10
SETTLE_SECS = 30  # how long the held counters may take to return to zero after the loads
UP_KEYS = ["soak-cred-0", "soak-cred-1", "soak-cred-bad"]  # the last always answers 429
LIMITS = [("minute", "requests", 100000000), ("day", "tokens", 10000000000),
          ("month", "cost", 1000000.0)]
# mock's credentials: the windows are never reached, but the rpm limit is set so that the
# two good credentials run at about 70% of it (the MIX's rate to mock, split in two). A
# credential never seen answering counts as half used (DESIGN.md 10), so once the good
# ones pass 50% the bad one is chosen again each time its cooldown ends (at most 5 s on
# loopback), answers 429, and the request moves on to another credential.
QUOTA_RPM_SHARE = 0.7
KEY_SLOTS, MOCK_SLOTS, SIDE_SLOTS = 200, 150, 50
PACED = {"x-bench-chunks": "10", "x-bench-interval-ms": "50"}   # ~0.5 s, read to its end
LONG = {"x-bench-chunks": "100", "x-bench-interval-ms": "50"}   # ~5 s, cut by the client
HANGUP_MS = 1000  # the disconnecting clients' --timeout-ms: mid-way through LONG

# The loads: name, requests per second, --api, model, --stream, headers, --timeout-ms,
# what each request must end as: "ok" (2xx in full), "fail" (never 2xx in full: an
# error status, a cut stream or a reset), "hangup" (the client's timeout, mid-stream).
MIX = [
    ("chat", 100, "chat", "mock-model", False, {}, None, "ok"),
    ("chat-stream", 30, "chat", "mock-model", True, PACED, None, "ok"),
    ("msg-stream", 10, "messages", "mock-model", True, PACED, None, "ok"),
    ("failover", 20, "chat", "soak-fallback", False, {}, None, "ok"),
    ("upstream-500", 10, "chat", "broken-model", False, {}, None, "fail"),
    ("drop-mid", 10, "chat", "drop-model", True, PACED, None, "fail"),
    ("hangup", 10, "chat", "mock-model", True, LONG, HANGUP_MS, "hangup"),
]
API_PATH = {"chat": "/v1/chat/completions", "messages": "/v1/messages"}
TRANSPORT = ("connect", "timeout", "reset", "parse")  # gwbench's errors without an answer


def quota_windows(secs):
    """mock's quota.default for a run of <secs>: (window, limit) pairs (QUOTA_RPM_SHARE;
    a run shorter than a minute fills the minute window only that far)."""
    to_mock = sum(m[1] for m in MIX if m[3] in ("mock-model", "soak-fallback"))
    rpm = int(to_mock * min(secs, 60) / (len(UP_KEYS) - 1) / QUOTA_RPM_SHARE)
    return [("rpm", rpm), ("tpm", rpm * 10**4), ("rpd", 10**8), ("tpd", 10**11)]


def rss_detail(pid):
    """(VmRSS, RssAnon, RssFile, Rss of the LMDB store's data.mdb mapping) of <pid> in kB:
    how much of VmRSS is gwd's own memory and how much the pages of its store touched."""
    vm, anon = rss_kb(pid)
    fil = mdb = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssFile:"):
                fil = int(line.split()[1])
    with open(f"/proc/{pid}/smaps") as f:
        in_mdb = False
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                in_mdb = line.rstrip().endswith("/data.mdb")
            elif in_mdb and line.startswith("Rss:"):
                mdb += int(line.split()[1])
    return vm, anon, fil, mdb


def write_config(home, ports, key, workers, ctl_port, secs):
    """gwd's config: provider mock (three credentials, quota windows, slots), dead (500
    always), dropper (streams cut mid-way), group soak-fallback (dead, then mock), the
    key with max_concurrent and LIMITS; a price table so that costs count."""
    with open(os.path.join(home, "prices.yaml"), "w") as f:
        f.write("models:\n  - { model: mock-model, input: 1.00, output: 4.00 }\n")
    quota = ", ".join(f"{w}: {v}" for w, v in quota_windows(secs))
    limits = "".join(f"      - {{ per: {per}, {m}: {v} }}\n" for per, m, v in LIMITS)
    cfg = os.path.join(home, "gw.yaml")
    with open(cfg, "w") as f:
        f.write(f"""server:
  listen: ["127.0.0.1:{free_port()}"]
  workers: {workers}
control:
  listen: 127.0.0.1:{ctl_port}
  token_env: GW_SOAK_CONTROL_TOKEN
store:
  path: {os.path.join(home, "store")}
failover:
  failures_to_pause: 3
  pause_secs: 2
  max_pause_secs: 4
providers:
  - name: mock
    dialect: openai
    base_url: http://127.0.0.1:{ports["mock"]}
    keys: [{", ".join(f"{{ value: {k} }}" for k in UP_KEYS)}]
    models: ["mock-model"]
    max_concurrent: {MOCK_SLOTS}
    quota:
      default: {{ {quota} }}
  - name: dead
    dialect: openai
    base_url: http://127.0.0.1:{ports["dead"]}
    keys: [{{ value: soak-dead }}]
    models: ["broken-model"]
    max_concurrent: {SIDE_SLOTS}
  - name: dropper
    dialect: openai
    base_url: http://127.0.0.1:{ports["dropper"]}
    keys: [{{ value: soak-drop }}]
    models: ["drop-model"]
    max_concurrent: {SIDE_SLOTS}
groups:
  - name: soak-fallback
    type: fallback
    providers:
      - {{ name: dead, model: broken-model }}
      - {{ name: mock, model: mock-model }}
clients:
  - name: soak
    key_sha256: "{hashlib.sha256(key.encode()).hexdigest()}"
    max_concurrent: {KEY_SLOTS}
    limits:
{limits}""")
    return cfg


def start_gwd(bindir, home, cfg, token, procs):
    """Starts gwd on <cfg>; its data port once it logged code=ready."""
    log = os.path.join(home, "gwd.log")
    env = dict(os.environ, GW_SOAK_CONTROL_TOKEN=token)
    for v in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"):
        env.pop(v, None)
    with open(log, "w") as lf:
        p = Proc("gwd", [os.path.join(bindir, "gwd"), "-c", cfg], stdout=lf, stderr=lf,
                 env=env)
    procs.append(p)
    end = time.time() + 15
    while time.time() < end and p.alive():
        with open(log) as lf:
            m = re.search(r"code=ready.*?data=([\d.]+):(\d+)", lf.read())
        if m:
            return int(m.group(2)), p
        time.sleep(0.05)
    with open(log) as lf:
        raise SystemExit("soak: gwd did not become ready\n" + lf.read()[-2000:])


def metrics(control):
    """gwd's /metrics as {series: value} (series with labels keep them in the name)."""
    port, _ = control
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, val = line.rpartition(" ")
            try:
                out[name] = float(val)
            except ValueError:
                pass
    return out


def held(ov, met):
    """Every counter of the overview and /metrics that names something still held, as
    "where: value" strings for the non-zero ones (empty: nothing held)."""
    bad = []
    for sec in ("providers", "keys"):
        for e in ov.get(sec, []):
            for f in ("in_flight", "waiting"):
                if e.get(f):
                    bad.append(f"{sec}[{e['name']}].{f}: {e[f]}")
    for prov, q in (ov.get("quota") or {}).items():
        for st in q.get("sets", []):
            for c in st.get("credentials", []):
                for f in ("leases", "leases_dropped"):
                    if c.get(f):
                        bad.append(f"quota[{prov}/{st['model'] or '-'}/{c['fp']}].{f}: {c[f]}")
    for name in ("gw_client_connections", "gw_store_queue_depth"):
        if met.get(name):
            bad.append(f"/metrics {name}: {met[name]:.0f}")
    return bad


def exercised(ov):
    """Problems with the claim that the run went through what the config sets up (empty:
    fine): every credential of mock chosen (the one answering 429 included), each of the
    key's limits charged and none reached, the key's and mock's max_concurrent in force."""
    bad = []
    creds = [c for st in ((ov.get("quota") or {}).get("mock") or {}).get("sets", [])
             for c in st.get("credentials", [])]
    used = [c for c in creds if c["windows"]["rpd"]["used"]]
    if len(used) != len(UP_KEYS):
        bad.append(f"{len(used)} of mock's {len(UP_KEYS)} credentials chosen")
    keys = [k for k in ov.get("keys", []) if k["name"] == "soak"]
    lims = keys[0].get("limits", []) if keys else []
    if len(lims) != len(LIMITS) or any(not x["used"] or x["reached"] for x in lims):
        bad.append(f"key limits not all charged (or one reached): {lims}")
    slots = {p["name"]: p.get("max_concurrent") for p in ov.get("providers", [])}
    if not keys or keys[0].get("max_concurrent") != KEY_SLOTS or slots.get("mock") != MOCK_SLOTS:
        bad.append("max_concurrent of the key or of mock not in force")
    return bad


def run_load(bindir, port, key, name, rate, api, model, stream, headers, tmo, secs, out):
    """One gwbench load of the mix, open loop at <rate> for <secs>; its summary in out."""
    conns = max(8, int(rate * (6 if tmo or stream else 1)))
    argv = [os.path.join(bindir, "gwbench"), "load", "--json", "--quiet", "--api", api,
            "--url", f"http://127.0.0.1:{port}{API_PATH[api]}", "--key", key,
            "--model", model, "--rate", str(rate), "--duration", str(secs),
            "--connections", str(conns), "--threads", "1"]
    if stream:
        argv.append("--stream")
    for h, v in headers.items():
        argv += ["--header", f"{h}: {v}"]
    if tmo:
        argv += ["--timeout-ms", str(tmo)]
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=secs + 120)
    try:
        out[name] = json.loads(r.stdout)
    except ValueError:
        out[name] = {"failed": f"gwbench load exited {r.returncode}: {r.stderr.strip()[-300:]}"}


def verdict(kind, s):
    """Problems with load summary <s> of a load of <kind> (empty: fine)."""
    if "failed" in s:
        return [s["failed"]]
    errs = s.get("errors", {})
    transport = sum(errs.get(k, 0) for k in TRANSPORT)
    bad = []
    lost = s["requests"] - s["completed"] - transport
    if lost:
        bad.append(f"{lost} requests neither answered nor failed")
    if kind == "ok" and s["ok"] != s["requests"]:
        bad.append(f"{s['requests'] - s['ok']} not answered 2xx in full: {errs}")
    if kind == "fail" and s["ok"]:
        bad.append(f"{s['ok']} answered 2xx in full, want none")
    if kind == "hangup" and errs.get("timeout", 0) != s["requests"]:
        bad.append(f"{errs.get('timeout', 0)} of {s['requests']} cut by the client: {errs}")
    return bad


def minute(samples, lo, hi, k):
    v = [s[k] for s in samples if lo <= s["t"] < hi]
    return (statistics.mean(v), max(v)) if v else (0.0, 0.0)


def slope(samples, since, k):
    """Least-squares slope of <k> over the samples from <since> s on, in kB per minute."""
    pts = [(s["t"], s[k]) for s in samples if s["t"] >= since]
    if len(pts) < 2:
        return 0.0
    mt, mv = statistics.mean(p[0] for p in pts), statistics.mean(p[1] for p in pts)
    den = sum((t - mt) ** 2 for t, _ in pts)
    return 60 * sum((t - mt) * (v - mv) for t, v in pts) / den if den else 0.0


def main():
    ap = argparse.ArgumentParser(description="gwd under a steady mixed load for a long "
                                 "time: RSS sampled, nothing held at the end")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/release/bin"))
    ap.add_argument("--secs", type=int, default=600, help="load duration (default 600)")
    ap.add_argument("--workers", type=int, default=1, help="gwd workers (default 1)")
    ap.add_argument("--out", default=os.path.join(ROOT, "build/bench/soak.md"))
    a = ap.parse_args()
    bindir = os.path.abspath(a.bin)
    for b in ("gwd", "gwbench"):
        if not os.access(os.path.join(bindir, b), os.X_OK):
            raise SystemExit(f"soak: no {b} in {bindir}")
    if a.secs < SAMPLE_SECS:
        raise SystemExit(f"soak: --secs must be at least {SAMPLE_SECS}")
    key = "gw-soak-" + secrets.token_hex(8)
    token = secrets.token_hex(16)
    procs = []
    tmp = tempfile.mkdtemp(prefix="gwsoak-")
    samples, res, problems = [], {}, {}
    try:
        ports = {
            "mock": start_upstream(bindir, procs, "mock", [
                "--fault", "status", "--status", "429", "--fault-key", UP_KEYS[-1]]),
            "dead": start_upstream(bindir, procs, "dead", ["--fault", "status"]),
            "dropper": start_upstream(bindir, procs, "dropper", ["--fault", "drop-mid"]),
        }
        ctl = (free_port(), token)
        cfg = write_config(tmp, ports, key, a.workers, ctl[0], a.secs)
        port, gwd = start_gwd(bindir, tmp, cfg, token, procs)
        rows0 = metrics(ctl).get("gw_store_rows_committed_total", 0)
        print(f"soak: {len(MIX)} loads for {a.secs} s against gwd (pid {gwd.pid}, "
              f"{a.workers} worker(s)), RSS every {SAMPLE_SECS} s", file=sys.stderr)
        threads = [threading.Thread(target=run_load, args=(bindir, port, key, *m[:7], a.secs,
                                                           res)) for m in MIX]
        t0 = time.time()
        cpu0 = cpu_secs(gwd.pid)
        for th in threads:
            th.start()
        nxt = t0
        while any(th.is_alive() for th in threads) and gwd.alive():
            now = time.time()
            if now >= nxt and now - t0 <= a.secs:
                vm, anon, fil, mdb = rss_detail(gwd.pid)
                samples.append({"t": round(now - t0), "vm": vm, "anon": anon, "file": fil,
                                "mdb": mdb})
                print(f"soak: t={now - t0:4.0f} s  VmRSS {vm / 1024:.1f} MB  RssAnon "
                      f"{anon / 1024:.1f} MB  RssFile {fil / 1024:.1f} MB (data.mdb "
                      f"{mdb / 1024:.1f} MB)", file=sys.stderr)
                nxt += SAMPLE_SECS
            time.sleep(0.2)
        for th in threads:
            th.join()
        elapsed = time.time() - t0
        cpu = cpu_secs(gwd.pid) - cpu0 if gwd.alive() else 0.0
        if not gwd.alive():
            problems["gwd"] = [f"gwd exited {gwd.p.returncode} during the run"]
        for m in MIX:
            problems[m[0]] = verdict(m[7], res.get(m[0], {"failed": "no summary"}))
        # the loads are over: every held counter must return to zero (what is still
        # settling gets SETTLE_SECS), and every request must have its row
        issued = sum(res[m[0]].get("requests", 0) for m in MIX if m[0] in res)
        left, end, ov, met, rows = ["not read"], time.time() + SETTLE_SECS, {}, {}, 0
        while gwd.alive() and time.time() < end:
            ov, met = overview(ctl), metrics(ctl)
            left = held(ov, met)
            rows = (met.get("gw_store_rows_committed_total", 0) - rows0
                    + met.get("gw_store_rows_dropped_total", 0))
            if not left and rows >= issued:
                break
            time.sleep(0.5)
        settle = time.time() - end + SETTLE_SECS
        with open(os.path.splitext(os.path.abspath(a.out))[0] + "-overview.json", "w") as f:
            json.dump({"overview": ov, "metrics": met}, f, indent=1)
        problems["held"] = left
        problems["exercised"] = exercised(ov) if ov else ["no overview"]
        problems["rows"] = ([] if rows == issued else
                            [f"gwd committed {rows:.0f} rows for {issued} requests issued"])
        final_rss = rss_kb(gwd.pid) if gwd.alive() else (0, 0)
        # gwd must drain and exit 0 on SIGTERM (a sanitizer build: also without a leak)
        if gwd.alive():
            gwd.stop()
            if gwd.p.returncode != 0:
                with open(os.path.join(tmp, "gwd.log")) as lf:
                    problems["exit"] = [f"gwd exited {gwd.p.returncode} after SIGTERM: "
                                        + lf.read()[-1500:].replace("\n", " | ")]
    finally:
        for p in reversed(procs):
            p.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    # the table of the loads
    table = [["load", "req/s", "expect", "requests", "completed", "2xx", "errors", "check"]]
    for name, rate, api, model, stream, _, _, kind in MIX:
        s = res.get(name, {})
        errs = ", ".join(f"{k} {v}" for k, v in sorted(s.get("errors", {}).items())) or "-"
        table.append([f"{name} ({api}{', stream' if stream else ''}, {model})", str(rate),
                      kind, str(s.get("requests", "-")), str(s.get("completed", "-")),
                      str(s.get("ok", "-")), errs, "ok" if not problems[name] else "FAILED"])
    # the RSS curve, its first and last minute
    last = samples[-1]["t"] if samples else 0
    rss = [["RSS (MB)", "first minute mean", "first minute max", "last minute mean",
            "last minute max", "growth (last - first mean)", "second half slope (MB/min)"]]
    for label, k in (("VmRSS", "vm"), ("RssAnon: gwd's own memory", "anon"),
                     ("RssFile: files mapped", "file"), ("of which the store's data.mdb", "mdb")):
        f, la = minute(samples, 0, 60, k), minute(samples, max(0, last - 59), last + 1, k)
        rss.append([label, f"{f[0] / 1024:.1f}", f"{f[1] / 1024:.1f}", f"{la[0] / 1024:.1f}",
                    f"{la[1] / 1024:.1f}", f"{(la[0] - f[0]) / 1024:+.1f}",
                    f"{slope(samples, last / 2, k) / 1024:+.2f}"])
    curve = " ".join(f"{s['t']}:{s['vm'] / 1024:.1f}/{s['anon'] / 1024:.1f}" for s in samples)
    rows_kb = (samples[-1]["mdb"] - samples[0]["mdb"]) / max(1, issued) if samples else 0
    head = (f"soak: {a.secs} s of {len(MIX)} steady open-loop loads at once "
            f"({sum(m[1] for m in MIX)} req/s in all) through one gwd ({a.workers} "
            f"worker(s)): key max_concurrent {KEY_SLOTS} and limits "
            + ", ".join(f"{p} {m} {v:g}" for p, m, v in LIMITS)
            + f"; mock: {len(UP_KEYS)} credentials (one always 429) under quota windows "
            + ", ".join(f"{w} {v}" for w, v in quota_windows(a.secs)) + ", "
            f"max_concurrent {MOCK_SLOTS}; dead (500) and dropper (drop-mid) "
            f"max_concurrent {SIDE_SLOTS}; soak-fallback = dead then mock; hangup: the "
            f"client closes after {HANGUP_MS} ms of a ~5 s stream. {issued} requests, "
            f"gwd CPU {cpu:.0f} s ({100 * cpu / max(elapsed, 1e-9):.0f}% of a core)")
    notes = [f"RSS curve, t(s):VmRSS/RssAnon (MB): {curve}",
             f"after the loads: RSS {final_rss[0] / 1024:.1f}/{final_rss[1] / 1024:.1f} MB; "
             f"held counters checked {settle:.1f} s after the loads ended: "
             + ("none held" if not problems["held"] else "; ".join(problems["held"])),
             "VmRSS includes the pages of the LMDB store that gwd touched: they grow with "
             f"the rows written (here {rows_kb * 1024:.0f} bytes of data.mdb per request) and "
             "are file pages the kernel can reclaim; RssAnon is gwd's own memory (heap, "
             "stacks, buffers), the figure that must level off; expect it to rise over the "
             "first 65536 requests while the store's row queue (65536 pointers, 512 KB) is "
             "touched once round, and the allocator's arenas warm up"]
    for k, v in problems.items():
        if v and k != "held":
            notes.append(f"{k}: " + "; ".join(v))
    print("\n".join(fmt_table(table)))
    print()
    print("\n".join(fmt_table(rss)))
    print(head)
    for n in notes:
        print("note: " + n)
    md = ["# gw soak", "", head, ""] + md_table(table) + [""] + md_table(rss) + [""]
    md += ["- " + n for n in notes]
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        f.write("\n".join(md) + "\n")
    print(f"soak: wrote {a.out}", file=sys.stderr)
    bad = [k for k, v in problems.items() if v]
    if bad:
        raise SystemExit("soak: FAILED: " + ", ".join(bad))


if __name__ == "__main__":
    main()
