#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# bench/run.py - what `make bench` runs: direct vs gwd vs nginx on loopback.
# Starts `gwbench upstream`, `gwd` (temporary config) and Debian's nginx (temporary
# prefix), runs the scenarios below interleaved with `gwbench load --json`, prints
# one table and writes it as markdown to build/bench/results.md. Everything it
# starts is stopped in a finally block. See docs/gwbench.md.
#
# usage: bench/run.py [--bin DIR] [--rounds N] [--quick] [--out FILE] [--gwd-workers N]
import argparse
import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NGINX = "/usr/sbin/nginx"
TICK = os.sysconf("SC_CLK_TCK")


# ---- processes ----

class Proc:
    """One process we started; stop() ends it (SIGTERM, then SIGKILL)."""

    def __init__(self, name, argv, **kw):
        self.name = name
        self.p = subprocess.Popen(argv, **kw)

    @property
    def pid(self):
        return self.p.pid

    def alive(self):
        return self.p.poll() is None

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(5)


def cpu_secs(pid):
    """utime + stime of every thread of <pid>, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc, secs=10):
    end = time.time() + secs
    while time.time() < end:
        if not proc.alive():
            return False
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def start_upstream(bindir, procs):
    p = Proc("upstream", [os.path.join(bindir, "gwbench"), "upstream", "--listen",
                          "127.0.0.1:0", "--threads", "1", "--quiet"],
             stdout=subprocess.PIPE, text=True)
    procs.append(p)
    line = p.p.stdout.readline()
    m = re.search(r"listening on ([\d.]+):(\d+)", line)
    if not m:
        raise SystemExit(f"bench: gwbench upstream did not start: {line!r}")
    return int(m.group(2))


def start_gwd(bindir, tmp, up_port, key, workers, procs):
    """Returns (port, proc, note); port None when gwd is missing or did not start."""
    gwd = os.path.join(bindir, "gwd")
    if not os.access(gwd, os.X_OK):
        return None, None, f"gwd not found at {gwd}: gwd column skipped"
    cfg = os.path.join(tmp, "gw.yaml")
    # Ports picked here rather than 0, so that a gwd that refuses port 0 still runs.
    with open(cfg, "w") as f:
        f.write(f"""server:
  listen: ["127.0.0.1:{free_port()}"]
  workers: {workers}
control:
  listen: 127.0.0.1:{free_port()}
  token_env: GW_BENCH_CONTROL_TOKEN
store:
  path: {os.path.join(tmp, "store")}
providers:
  - name: mock
    dialect: openai
    base_url: http://127.0.0.1:{up_port}
    keys: [{{ value: bench-upstream-key }}]
    models: ["*"]
clients:
  - name: bench
    key_sha256: "{hashlib.sha256(key.encode()).hexdigest()}"
""")
    log = os.path.join(tmp, "gwd.log")
    env = dict(os.environ, GW_BENCH_CONTROL_TOKEN=secrets.token_hex(16))
    with open(log, "w") as lf:
        p = Proc("gwd", [gwd, "-c", cfg], stdout=lf, stderr=lf, env=env)
    procs.append(p)
    end = time.time() + 15
    while time.time() < end:
        with open(log) as lf:
            text = lf.read()
        m = re.search(r"code=ready.*?data=([\d.]+):(\d+)", text)
        if m:
            return int(m.group(2)), p, None
        if not p.alive():
            break
        time.sleep(0.05)
    with open(log) as lf:
        tail = lf.read()[-2000:]
    p.stop()
    return None, None, "gwd did not become ready: gwd column skipped\n" + tail


def start_nginx(tmp, up_port, procs):
    if not os.access(NGINX, os.X_OK):
        return None, None, f"{NGINX} not found: nginx column skipped"
    prefix = os.path.join(tmp, "nginx")
    os.makedirs(os.path.join(prefix, "logs"), exist_ok=True)
    port = free_port()
    conf = os.path.join(prefix, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off;
master_process off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 8192; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/client_body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    keepalive_requests 10000000;
    upstream up {{
        server 127.0.0.1:{up_port};
        keepalive 64;
        keepalive_requests 10000000;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://up;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }}
    }}
}}
""")
    p = Proc("nginx", [NGINX, "-p", prefix, "-c", conf, "-e", os.path.join(prefix, "error.log")],
             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    procs.append(p)
    if not wait_port(port, p):
        err = p.p.stderr.read() if not p.alive() else ""
        p.stop()
        return None, None, f"nginx did not start: {err.strip()}"
    return port, p, None


# ---- load runs ----

def load(bindir, port, key, args, proxy=None, sample_rss=False):
    """Runs gwbench load; returns (summary dict, proxy cpu seconds, peak rss kB)."""
    argv = [os.path.join(bindir, "gwbench"), "load", "--json", "--quiet",
            "--url", f"http://127.0.0.1:{port}/v1/chat/completions", "--key", key] + args
    peak = [0]
    stop = threading.Event()

    def sampler():
        while not stop.is_set():
            try:
                peak[0] = max(peak[0], rss_kb(proxy.pid))
            except OSError:
                return
            stop.wait(0.05)

    c0 = cpu_secs(proxy.pid) if proxy else 0.0
    th = None
    if proxy and sample_rss:
        th = threading.Thread(target=sampler, daemon=True)
        th.start()
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=600)
    stop.set()
    if th:
        th.join()
    c1 = cpu_secs(proxy.pid) if proxy else 0.0
    if out.returncode != 0:
        raise SystemExit(f"bench: gwbench load failed: {out.stderr.strip()}")
    return json.loads(out.stdout), c1 - c0, peak[0]


def main():
    ap = argparse.ArgumentParser(description="direct vs gwd vs nginx on loopback")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/release/bin"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smaller runs (a smoke test)")
    ap.add_argument("--out", default=os.path.join(ROOT, "build/bench/results.md"))
    ap.add_argument("--gwd-workers", type=int, default=1,
                    help="gwd workers (default 1, like nginx's one worker process)")
    a = ap.parse_args()
    bindir = os.path.abspath(a.bin)
    if not os.access(os.path.join(bindir, "gwbench"), os.X_OK):
        raise SystemExit(f"bench: no gwbench in {bindir}")
    n_serial = 1000 if a.quick else 5000
    n_tput = 10000 if a.quick else 50000
    streams, chunks, interval = 200, 20, 50
    key = "gw-bench-" + secrets.token_hex(8)

    procs = []
    tmp = tempfile.mkdtemp(prefix="gwbench-")
    notes = []
    try:
        up_port = start_upstream(bindir, procs)
        upstream = procs[-1]
        targets = [("direct", up_port, None)]
        gport, gproc, note = start_gwd(bindir, tmp, up_port, key, a.gwd_workers, procs)
        if note:
            notes.append(note)
        if gport:
            targets.append(("gwd", gport, gproc))
        nport, nproc, note = start_nginx(tmp, up_port, procs)
        if note:
            notes.append(note)
        if nport:
            targets.append(("nginx", nport, nproc))
        names = [t[0] for t in targets]
        print(f"bench: upstream :{up_port}; targets: "
              + ", ".join(f"{n} :{p}" for n, p, _ in targets), file=sys.stderr)

        # warm-up: connections, pools, caches
        for name, port, proc in targets:
            load(bindir, port, key, ["--connections", "8", "--threads", "1", "--requests", "2000"])

        res = {n: {} for n in names}
        errs = {n: 0 for n in names}

        def add(name, k, v):
            res[name].setdefault(k, []).append(v)

        t_start = time.time()
        for r in range(a.rounds):
            for name, port, proc in targets:
                print(f"bench: round {r + 1}/{a.rounds} {name}", file=sys.stderr)
                # (1) one request at a time
                s, _, _ = load(bindir, port, key, ["--connections", "1", "--threads", "1",
                                                   "--requests", str(n_serial)])
                errs[name] += s["requests"] - s["ok"]
                add(name, "serial_p50", s["latency_us"]["p50"])
                add(name, "serial_p99", s["latency_us"]["p99"])
                # (2)+(3) throughput ceiling and proxy CPU per request
                s, cpu, _ = load(bindir, port, key, ["--connections", "64", "--threads", "2",
                                                     "--requests", str(n_tput)], proc)
                errs[name] += s["requests"] - s["ok"]
                add(name, "rps", s["rps"])
                if proc:
                    add(name, "cpu_req", cpu * 1e6 / max(1, s["completed"]))
                else:
                    add(name, "cpu_req_up", None)
                # (4) concurrent paced streams
                s, cpu, peak = load(bindir, port, key, [
                    "--stream", "--connections", str(streams), "--threads", "2",
                    "--requests", str(streams), "--header", f"x-bench-chunks: {chunks}",
                    "--header", f"x-bench-interval-ms: {interval}",
                    "--header", "x-bench-ttft-ms: 20"], proc, sample_rss=True)
                errs[name] += s["requests"] - s["ok"]
                add(name, "ttft_p99", s["ttft_us"]["p99"])
                add(name, "gap_p99", s["gap_us"]["p99"])
                if proc:
                    add(name, "cpu_stream", cpu * 1e6 / max(1, s["completed"]))
                    add(name, "rss_mb", peak / 1024.0)
        elapsed = time.time() - t_start
    finally:
        for p in reversed(procs):
            p.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    def med(name, k):
        v = [x for x in res[name].get(k, []) if x is not None]
        return statistics.median(v) if v else None

    rows = [
        # label, key, format, how gwd compares to nginx
        ("1 conn: latency p50 (us)", "serial_p50", "{:.0f}", "diff"),
        ("1 conn: latency p99 (us)", "serial_p99", "{:.0f}", "diff"),
        ("1 conn: added p50 vs direct (us)", "added_p50", "{:+.0f}", "diff"),
        ("1 conn: added p99 vs direct (us)", "added_p99", "{:+.0f}", "diff"),
        ("64 conns: throughput (req/s)", "rps", "{:.0f}", "pct"),
        ("proxy CPU per request (us)", "cpu_req", "{:.1f}", "ratio"),
        (f"{streams} streams x {chunks}: ttft p99 (us)", "ttft_p99", "{:.0f}", "diff"),
        (f"{streams} streams x {chunks}: chunk gap p99 (us)", "gap_p99", "{:.0f}", "diff"),
        ("proxy CPU per stream (us)", "cpu_stream", "{:.0f}", "ratio"),
        (f"proxy RSS peak, {streams} streams (MB)", "rss_mb", "{:.1f}", "ratio"),
    ]
    direct_p50, direct_p99 = med("direct", "serial_p50"), med("direct", "serial_p99")
    for n in names:
        if n != "direct":
            p50, p99 = med(n, "serial_p50"), med(n, "serial_p99")
            res[n]["added_p50"] = [p50 - direct_p50] if p50 is not None else []
            res[n]["added_p99"] = [p99 - direct_p99] if p99 is not None else []
    cols = ["direct", "gwd", "nginx"]
    table = [["scenario"] + cols + ["gwd vs nginx"]]
    for label, k, fmt, cmp in rows:
        line = [label]
        vals = {}
        for c in cols:
            v = med(c, k) if c in names else None
            vals[c] = v
            line.append(fmt.format(v) if v is not None else "-")
        g, n = vals["gwd"], vals["nginx"]
        if g is None or n is None:
            line.append("-")
        elif cmp == "diff":
            line.append(f"{g - n:+.0f} us")
        elif cmp == "pct":
            line.append(f"{100.0 * g / n:.0f}%" if n else "-")
        else:
            line.append(f"{g / n:.2f}x" if n else "-")
        table.append(line)
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    text = []
    for i, r in enumerate(table):
        text.append("  ".join(c.ljust(widths[j]) if j == 0 else c.rjust(widths[j])
                              for j, c in enumerate(r)))
        if i == 0:
            text.append("  ".join("-" * w for w in widths))
    for n in names:
        if errs[n]:
            notes.append(f"{n}: {errs[n]} requests were not answered 2xx (figures include them)")
    head = (f"rounds {a.rounds} (median), serial {n_serial} requests, throughput {n_tput} "
            f"requests on 64 connections, {streams} streams of {chunks} chunks every "
            f"{interval} ms after a 20 ms ttft; {os.cpu_count()} CPUs; {elapsed:.0f} s")
    print("\n".join(text))
    print(head)
    for note in notes:
        print("note: " + note.splitlines()[0])

    md = ["# gw benchmark", "", head, "",
          "| " + " | ".join(table[0]) + " |",
          "|" + "|".join(["---"] + ["---:"] * (len(table[0]) - 1)) + "|"]
    for r in table[1:]:
        md.append("| " + " | ".join(r) + " |")
    md.append("")
    for note in notes:
        md.append("- " + note.splitlines()[0])
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write("\n".join(md) + "\n")
    print(f"bench: wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
