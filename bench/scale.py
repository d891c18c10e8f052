#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# bench/scale.py - many concurrent paced streams held at once (DESIGN.md 17, issue 13
# point 3), measured rather than extrapolated. Cells, each with fresh processes:
#   direct   gwbench load -> gwbench upstream (HTTP/1.1), --streams streams;
#   gwd-h1   through gwd, HTTP/1.1 on both sides: two descriptors per stream, so at
#            most H1_MAX streams under the 20 000 open files a process may have;
#   gwd-h2up through gwd, clients over HTTP/1.1, the upstream over h2c
#            (providers[].http2: on, one connection per worker and upstream): one
#            descriptor per stream, so --streams.
# gwd cells run with each of --workers. The load opens the streams at an even rate over
# --ramp-secs (gwbench load --rate: one stream per connection, connected when its turn
# comes), each stream paced long enough (--chunks x --interval-ms) that all of them are
# open at once for several seconds. During the run it samples the upstreams'
# /_bench/stats (streams_open: streams the upstream is sending right now), gwd's
# /metrics (gw_client_connections) and gwd's memory (/proc/PID/status); the row
# "streams held at once" is the upstream's streams_open_max (exact) or, with several
# upstreams, the most they had open together at one sample (a lower bound). It prints one
# table and writes it as markdown (--out); exit 1 when a stream failed or was lost, when
# not every stream was held at once, or when a process died. Everything it starts is
# stopped in a finally block. See docs/gwbench.md ("bench/scale.py").
#
# usage: bench/scale.py [--bin DIR] [--streams N] [--workers 1,2] [--quick] [--out FILE]
import argparse
import hashlib
import json
import math
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import (ROOT, Proc, busy_secs, cpu_secs, fmt_table, free_port, md_table,  # noqa: E402
                 start_upstream,
                 own_secs, rss_kb)

# Open files a process may have here (hard limit) and what each process keeps for
# itself: the cells are sized so that nothing runs into the limit but what is measured.
NOFILE = 20000
RESERVE = 400
H1_MAX = 9500  # gwd with HTTP/1.1 on both sides: two descriptors per stream
KEY = "bench-scale-key"


def opener():
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no http_proxy


def get(url, timeout=5):
    with opener().open(url, timeout=timeout) as r:
        return r.read().decode()


def listen_overflows():
    """The machine's count of connects dropped by a full accept queue (TcpExt
    ListenOverflows of /proc/net/netstat; every process's listeners), or None."""
    try:
        with open("/proc/net/netstat") as f:
            lines = f.read().splitlines()
        for names, vals in zip(lines[::2], lines[1::2]):
            if names.startswith("TcpExt:"):
                return int(vals.split()[names.split().index("ListenOverflows")])
    except (OSError, ValueError, IndexError):
        pass
    return None


def start_gwd(bindir, home, ups, workers, h2, max_conns, procs):
    """gwd with one provider per upstream port in <ups> (a load-balance group
    `mock-model` over them when there are several), `http2: on` when <h2>,
    server.max_connections <max_conns>. Returns (data port, proc, control port)."""
    os.makedirs(home, exist_ok=True)
    cfg, log = os.path.join(home, "gw.yaml"), os.path.join(home, "gwd.log")
    port, ctl = free_port(), free_port()
    provs = "".join(f"""  - name: mock-{i}
    dialect: openai
    base_url: http://127.0.0.1:{u}
    keys: [{{ value: bench-upstream-key }}]
    models: ["*"]
""" + ("    http2: on\n" if h2 else "") for i, u in enumerate(ups))
    group = ""
    if len(ups) > 1:
        group = ("groups:\n  - name: mock-model\n    type: load-balance\n    providers: ["
                 + ", ".join(f"mock-{i}" for i in range(len(ups))) + "]\n")
    with open(cfg, "w") as f:
        f.write(f"""server:
  listen: ["127.0.0.1:{port}"]
  workers: {workers}
  max_connections: {max_conns}
control:
  listen: 127.0.0.1:{ctl}
  token_env: GW_SCALE_CONTROL_TOKEN
store:
  path: {os.path.join(home, "store")}
providers:
{provs}{group}clients:
  - name: bench
    key_sha256: "{hashlib.sha256(KEY.encode()).hexdigest()}"
""")
    env = dict(os.environ, GW_SCALE_CONTROL_TOKEN=secrets.token_hex(16))
    with open(log, "w") as lf:
        p = Proc("gwd", [os.path.join(bindir, "gwd"), "-c", cfg], stdout=lf, stderr=lf, env=env)
    procs.append(p)
    end = time.time() + 15
    while time.time() < end and p.alive():
        with open(log) as lf:
            if re.search(r"code=ready", lf.read()):
                return port, p, ctl
        time.sleep(0.05)
    with open(log) as lf:
        raise SystemExit("scale: gwd did not become ready:\n" + lf.read()[-2000:])


def load_argv(bindir, port, n, rate, a, paced=True):
    """`gwbench load` of <n> streams, one a connection, released at <rate> a second;
    paced by --chunks and --interval-ms, or the upstream's default (instant) answer."""
    argv = [os.path.join(bindir, "gwbench"), "load", "--json", "--quiet", "--url",
            f"http://127.0.0.1:{port}/v1/chat/completions", "--key", KEY, "--model",
            "mock-model", "--stream", "--connections", str(n), "--requests", str(n),
            "--threads", "2", "--rate", f"{rate:.1f}", "--timeout-ms", "120000"]
    if paced:
        argv += ["--header", f"x-bench-chunks: {a.chunks}",
                 "--header", f"x-bench-interval-ms: {a.interval_ms}"]
    return argv


def run_load(bindir, ports, n, a):
    """Opens <n> streams over --ramp-secs with as many `gwbench load` processes as the
    open-file limit needs, and at least one per port of <ports> (load process i sends
    to port i modulo their count); returns their JSON summaries."""
    procs = max(len(ports), math.ceil(n / (NOFILE - RESERVE)))
    share = [n // procs + (1 if i < n % procs else 0) for i in range(procs)]
    rate = n / max(0.1, a.ramp_secs)
    ps = [subprocess.Popen(load_argv(bindir, ports[i % len(ports)], k, rate * k / n, a),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
          for i, k in enumerate(share)]
    out = []
    for p in ps:
        so, se = p.communicate(timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"scale: gwbench load failed: {se.strip()}")
        out.append(json.loads(so))
    return out


def merge(runs):
    """One summary of several load processes: counts summed, each percentile the
    highest of the processes' (conservative: the true merged one is not above it)."""
    m = {"ok": sum(r["ok"] for r in runs), "completed": sum(r["completed"] for r in runs),
         "errors": {}, "procs": len(runs)}
    for r in runs:
        for k, v in r["errors"].items():
            m["errors"][k] = m["errors"].get(k, 0) + v
    for h in ("ttft_us", "gap_us"):
        m[h] = {q: max(r[h][q] for r in runs) for q in ("p50", "p99", "max")}
    return m


class Sampler:
    """Samples, until stop(): gwd's VmRSS and RssAnon (every 0.1 s), the sum of the
    upstreams' streams_open (every 0.25 s) and gwd's gw_client_connections (every
    second: the page costs gwd a little CPU). Keeps the peaks."""

    def __init__(self, gwd, ups, ctl, trace=None):
        self.gwd, self.ups, self.ctl, self.trace = gwd, ups, ctl, trace
        self.t0 = time.time()
        self.cpu0 = self.cpus()
        self.rss = self.anon = self.held = self.conns = 0
        self.ev = threading.Event()
        self.th = threading.Thread(target=self.loop, daemon=True)
        self.th.start()

    def cpus(self):
        """CPU seconds so far of gwd and of the upstreams (with --trace)."""
        if not self.trace:
            return (0.0, 0.0)
        return (cpu_secs(self.gwd.pid) if self.gwd else 0.0,
                sum(cpu_secs(p.pid) for p in self.trace))

    def loop(self):
        k = 0
        while not self.ev.is_set():
            if self.gwd and self.gwd.alive():
                try:
                    vm, anon = rss_kb(self.gwd.pid)
                    self.rss, self.anon = max(self.rss, vm), max(self.anon, anon)
                except OSError:
                    pass
            try:
                if k % 3 == 0:
                    st = [json.loads(get(f"http://127.0.0.1:{u}/_bench/stats")) for u in self.ups]
                    self.held = max(self.held, sum(x["streams_open"] for x in st))
                    if self.trace:
                        c = self.cpus()
                        print(f"scale: {time.time() - self.t0:5.1f} s: upstream streams open "
                              f"{sum(x['streams_open'] for x in st)}, started "
                              f"{sum(x['streams_started'] for x in st)}, completed "
                              f"{sum(x['streams_completed'] for x in st)}; gwd client "
                              f"connections {self.conns}, RSS {self.rss // 1024} MB; CPU s gwd "
                              f"{c[0] - self.cpu0[0]:.1f}, upstreams {c[1] - self.cpu0[1]:.1f}",
                              file=sys.stderr)
                if self.ctl and k % 10 == 0:
                    m = re.search(r"^gw_client_connections (\d+)",
                                  get(f"http://127.0.0.1:{self.ctl}/metrics"), re.M)
                    if m:
                        self.conns = max(self.conns, int(m.group(1)))
            except (OSError, ValueError, KeyError):
                pass
            k += 1
            self.ev.wait(0.1)

    def stop(self):
        self.ev.set()
        self.th.join()


def cell(bindir, tmp, name, n, workers, h2, a):
    """Runs one cell with processes of its own; returns its figures (a dict)."""
    procs = []
    r = {"name": name, "workers": workers, "requested": n}
    try:
        # gwbench upstream answers an h2 stream through a socketpair: two descriptors a
        # stream, so the h2 cell spreads its streams over enough upstreams
        per_up = (NOFILE - RESERVE) // (2 if h2 else 1)
        # (each cell starts its own upstreams: their streams_open_max starts at 0)
        ups = []  # (port, process)
        for i in range(max(1, math.ceil(n / per_up))):
            ups.append((start_upstream(bindir, procs, f"upstream-{i}", []), procs[-1]))
        up_ports = [u for u, _ in ups]
        gwd = ctl = None
        port = up_ports[0]
        if name != "direct":
            port, gwd, ctl = start_gwd(bindir, os.path.join(tmp, f"{name}-w{workers}"),
                                       up_ports, workers, h2, n + 100, procs)
            # warm-up: the upstream connections (h2: one per worker and upstream) exist
            # before the idle figure is taken
            n_warm = 8 * workers * len(ups)
            warm = subprocess.run(load_argv(bindir, port, n_warm, 1000, a, paced=False),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  timeout=120)
            if warm.returncode != 0 or json.loads(warm.stdout)["ok"] != n_warm:
                raise SystemExit(f"scale: {name} warm-up failed: {warm.stdout} {warm.stderr}")
            time.sleep(0.5)
            r["rss_idle"], r["anon_idle"] = rss_kb(gwd.pid)
        s = Sampler(gwd, up_ports, ctl, [p for _, p in ups] if a.trace else None)
        c0 = cpu_secs(gwd.pid) if gwd else 0.0
        o0 = listen_overflows()
        b0, own0 = busy_secs(), own_secs(procs)
        t0 = time.time()
        res = merge(run_load(bindir, [port] if gwd else up_ports, n, a))
        r["secs"] = time.time() - t0
        # other work on the machine during the run: what it was busy with, less ours
        # (this script, the load processes, gwd and the upstreams)
        r["other"] = max(0.0, (busy_secs() - b0) - (own_secs(procs) - own0))
        o1 = listen_overflows()
        r["overflows"] = o1 - o0 if o0 is not None and o1 is not None else None
        s.stop()
        r.update(res)
        r["held"], r["conns"] = s.held, s.conns
        stats = [json.loads(get(f"http://127.0.0.1:{u}/_bench/stats")) for u in up_ports]
        r["peak_open"] = sum(x["streams_open_max"] for x in stats)
        if len(stats) == 1:
            r["held"] = r["peak_open"]  # exact: one upstream counts every stream
        r["h2_streams"] = sum(x.get("h2_streams", 0) for x in stats)
        r["h2"] = h2
        if gwd:
            r["cpu"] = cpu_secs(gwd.pid) - c0
            r["rss_peak"], r["anon_peak"] = s.rss, s.anon
            r["alive"] = gwd.alive()
        r["ups"] = len(ups)
    finally:
        for p in reversed(procs):
            p.stop()
    return r


def main():
    ap = argparse.ArgumentParser(description="Concurrent paced streams held at once, "
                                 "directly and through gwd (docs/gwbench.md).")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/release/bin"))
    ap.add_argument("--streams", type=int, default=10000)
    ap.add_argument("--workers", default="1,2", help="gwd worker counts, e.g. 1,2")
    ap.add_argument("--chunks", type=int, default=30, help="chunks per stream")
    ap.add_argument("--interval-ms", type=int, default=1000, help="between chunks")
    ap.add_argument("--ramp-secs", type=float, default=10.0,
                    help="the streams are opened at an even rate over this time")
    ap.add_argument("--cells", default="direct,gwd-h1,gwd-h2up",
                    help="which cells to run, e.g. gwd-h2up")
    ap.add_argument("--keep", action="store_true",
                    help="keep the temporary folder (gwd's configs and logs)")
    ap.add_argument("--trace", action="store_true",
                    help="print the samples on stderr as they are taken")
    ap.add_argument("--quick", action="store_true",
                    help="500 streams of 20 chunks 100 ms apart, 1 worker (a smoke test)")
    ap.add_argument("--out", default=os.path.join(ROOT, "build/bench/scale.md"))
    a = ap.parse_args()
    if a.quick:
        a.streams, a.chunks, a.interval_ms, a.ramp_secs, a.workers = 500, 20, 100, 0.5, "1"
    workers = [int(w) for w in a.workers.split(",") if w.strip()]
    n_h1 = min(a.streams, H1_MAX)
    plan = [("direct", a.streams, 0, False)]
    for w in workers:
        plan += [("gwd-h1", n_h1, w, False), ("gwd-h2up", a.streams, w, True)]
    tmp = tempfile.mkdtemp(prefix="gw-scale-")
    cells = []
    plan = [c for c in plan if c[0] in a.cells.split(",")]
    try:
        for name, n, w, h2 in plan:
            print(f"scale: {name}" + (f", {w} worker(s)" if w else "") + f", {n} streams",
                  file=sys.stderr)
            cells.append(cell(a.bin, tmp, name, n, w, h2, a))
    finally:
        if a.keep:
            print(f"scale: kept {tmp} (gwd configs and logs)", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    table, bad = report(cells, a)
    head = (f"{a.streams} streams (gwd-h1: {n_h1}, two descriptors a stream under the "
            f"{NOFILE} open files a process may have), each one connection and {a.chunks} "
            f"chunks every {a.interval_ms} ms, opened at an even rate over {a.ramp_secs:g} s "
            f"by gwbench load; gwd-h2up: clients over HTTP/1.1, providers[].http2: on (h2c), "
            f"a load-balance group over its upstreams when there are several; held at once: "
            f"the upstream's streams_open_max, or with several upstreams the most they had "
            f"open together at one sample (every 0.25 s: a lower bound); RSS: "
            f"gwd's VmRSS after a warm-up (idle) and its peak during the run (every 0.1 s); "
            f"percentiles of several load processes: the highest of theirs; "
            f"{os.cpu_count()} CPUs")
    print("\n".join(fmt_table(table)))
    print(head)
    for b in bad:
        print("FAILED: " + b)
    md = ["# gw: concurrent streams", "", head, ""] + md_table(table) + [""]
    md += ["- FAILED: " + b for b in bad]
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        f.write("\n".join(md) + "\n")
    print(f"scale: wrote {a.out}", file=sys.stderr)
    if bad:
        raise SystemExit(1)


def report(cells, a):
    """(the table: a row per figure, a column per cell; the problems found)."""
    def f(v, fmt):
        return "-" if v is None else fmt.format(v)

    rows = [
        ("streams requested", lambda r: f(r["requested"], "{}")),
        ("streams held at once", lambda r: f(r["held"], "{}")),
        ("upstreams' peak open streams (sum of each's peak)", lambda r: f(r["peak_open"], "{}")),
        ("gwd client connections, peak (sampled /metrics)",
         lambda r: f(r["conns"], "{}") if r.get("workers") else "-"),
        ("ok", lambda r: f(r["ok"], "{}")),
        ("errors", lambda r: ",".join(f"{k}:{v}" for k, v in r["errors"].items()) or "0"),
        ("gwd RSS idle (MB)", lambda r: f(r["rss_idle"] / 1024, "{:.1f}") if "rss_idle" in r
         else "-"),
        ("gwd RSS peak (MB)", lambda r: f(r["rss_peak"] / 1024, "{:.1f}") if "rss_peak" in r
         else "-"),
        ("gwd RSS per stream: (peak - idle) / streams (KB)",
         lambda r: f((r["rss_peak"] - r["rss_idle"]) / r["requested"], "{:.1f}")
         if "rss_peak" in r else "-"),
        ("gwd anon RSS idle / peak (MB)",
         lambda r: f"{r['anon_idle'] / 1024:.1f} / {r['anon_peak'] / 1024:.1f}"
         if "anon_peak" in r else "-"),
        ("ttft p50 / p99 (ms)",
         lambda r: f"{r['ttft_us']['p50'] / 1000:.1f} / {r['ttft_us']['p99'] / 1000:.1f}"),
        ("chunk gap p50 / p99 (ms)",
         lambda r: f"{r['gap_us']['p50'] / 1000:.1f} / {r['gap_us']['p99'] / 1000:.1f}"),
        ("gwd CPU (s)", lambda r: f(r.get("cpu"), "{:.2f}")),
        ("gwd CPU per stream (us)",
         lambda r: f(r["cpu"] * 1e6 / r["requested"], "{:.0f}") if "cpu" in r else "-"),
        ("other work on the machine (CPU s, % of the CPUs)",
         lambda r: f"{r['other']:.1f}, {100 * r['other'] / (r['secs'] * os.cpu_count()):.0f}%"),
        ("accept queue overflows (machine-wide)", lambda r: f(r["overflows"], "{}")),
        ("upstreams / load processes", lambda r: f"{r['ups']} / {r['procs']}"),
    ]
    head = ["figure"] + [r["name"] + (f" w{r['workers']}" if r["workers"] else "") for r in cells]
    table = [head] + [[label] + [fn(r) for r in cells] for label, fn in rows]
    bad = []
    for r in cells:
        c = head[1 + cells.index(r)]
        if r["ok"] != r["requested"] or r["errors"]:
            bad.append(f"{c}: {r['ok']} of {r['requested']} streams ok, errors {r['errors']}")
        if r["held"] < r["requested"]:
            bad.append(f"{c}: {r['held']} of {r['requested']} streams held at once")
        if r["h2"] and r["h2_streams"] < r["ok"]:
            bad.append(f"{c}: the upstreams got {r['h2_streams']} HTTP/2 streams for "
                       f"{r['ok']} streams answered (not all went over h2c)")
        if r.get("alive") is False:
            bad.append(f"{c}: gwd died")
    return table, bad


if __name__ == "__main__":
    main()
