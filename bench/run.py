#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# bench/run.py - what `make bench` runs: direct vs gwd vs nginx on loopback, cells of
# the hub (a Chat client and an Anthropic Messages client, each to a Chat and to a
# Messages upstream: "gwd", "gwd-conv", "gwd-msg", "gwd-msg-conv"; a Responses client
# spliced and converted to Chat: "gwd-resp", "gwd-resp-conv"; a Gemini client spliced
# and converted to Messages: "gwd-gem", "gwd-gem-conv"; a Chat client converted to AWS
# Bedrock's Converse, signed and read from eventstream: "gwd-br-conv"; the Chat splice
# with HTTP/2 (h2c) to the upstream: "gwd-h2up") and
# the admission scenario (gwd against "gwd+adm", the same gwd with key and upstream
# slots, key limits, and three upstream credentials with all four quota windows). Starts `gwbench upstream`, the gwds (temporary
# configs) and Debian's nginx (temporary prefix), checks with one request each that
# every gwd takes the path its column names (exit 1 if not), runs the scenarios below
# interleaved with `gwbench load --json`, checks in gwd+adm's control overview that
# its requests went through admission and quota (exit 1 if not), measures gwd, gwd+adm and
# nginx again with two workers each, runs HTTP/2 with h2load, prints four tables and writes
# them as markdown to build/bench/results.md. Everything it starts is stopped in a
# finally block. See docs/gwbench.md.
#
# usage: bench/run.py [--bin DIR] [--rounds N] [--quick] [--out FILE] [--gwd-workers N]
#                     [--base-bin DIR]
import argparse
import hashlib
import json
import os
import re
import resource
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

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

    def cpu(self):
        """CPU seconds of the process and of its children (nginx's workers when it runs
        with a master process), see cpu_secs."""
        return sum(cpu_secs(p) for p in [self.pid] + children(self.pid))

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(5)


def cpu_secs(pid):
    """CPU time of every thread of <pid>, in seconds: the sum of the threads' run time
    in nanoseconds (/proc/PID/task/TID/schedstat), so that a run of a tenth of a
    second is measured to better than a clock tick; utime + stime (/proc/PID/stat, in
    ticks of 10 ms) where schedstat is missing. A thread that ended between two
    readings takes its time with it: gwd's and nginx's threads live as long as they."""
    try:
        total = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except FileNotFoundError:
                pass  # a thread that just ended
        return total / 1e9
    except (FileNotFoundError, ValueError, IndexError):
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK


def children(pid):
    """The pids of the processes whose parent is <pid>."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass  # a process that just ended
    return out


def busy_secs():
    """CPU seconds the whole machine spent busy since boot (/proc/stat, all CPUs)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / TICK  # all but idle and iowait; guest is in user


def own_secs(procs):
    """CPU seconds spent so far by this script, the children it waited for (the load
    runs) and the processes in <procs> still running."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    total = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    for p in procs:
        if p.alive():
            try:
                total += p.cpu()
            except OSError:
                pass
    return total


def rss_kb(pid):
    """(VmRSS, RssAnon) of <pid> in kB. VmRSS includes file pages mapped and touched,
    for gwd mostly its LMDB store, which grows with the rows written; RssAnon is the
    process's own memory (heap, stacks, buffers)."""
    vm = anon = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                vm = int(line.split()[1])
            elif line.startswith("RssAnon:"):
                anon = int(line.split()[1])
    return vm, anon


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


# gwd's log level in every cell: `warn` leaves out the `request` line that `info` writes
# per request, as nginx runs with `access_log off`; both still do the rest (gwd its row
# in LMDB). tools/profile.sh measures at the same level.
GWD_LOG_LEVEL = "warn"


# The AWS credentials gwd-br-conv signs with and the upstream checks (SigV4).
AWS_REGION, AWS_KEY_ID, AWS_SECRET = "us-east-1", "AKIDBENCH", "bench-aws-secret"


def start_upstream(bindir, procs, name="upstream", args=None):
    """`gwbench upstream` on a free port, with <args> (by default the AWS credentials
    gwd-br-conv signs with); its port (the process is procs[-1]). bench/scale.py and
    bench/soak.py start theirs here too."""
    if args is None:
        args = ["--aws-access-key-id", AWS_KEY_ID, "--aws-secret-access-key", AWS_SECRET,
                "--aws-region", AWS_REGION]
    p = Proc(name, [os.path.join(bindir, "gwbench"), "upstream", "--listen", "127.0.0.1:0",
                    "--threads", "1", "--quiet"] + args, stdout=subprocess.PIPE, text=True)
    procs.append(p)
    line = p.p.stdout.readline()
    m = re.search(r"listening on ([\d.]+):(\d+)", line)
    if not m:
        raise SystemExit(f"bench: gwbench upstream {name} did not start: {line!r}")
    return int(m.group(2))


# The admission scenario's gwd ("gwd+adm"): every gate of DESIGN.md 7-9 on the request
# path, none of them ever the bottleneck (the 64-connection run never reaches ADM_SLOTS,
# no limit is approached). The key's limits are three periods and three measures.
ADM_SLOTS = 100
ADM_LIMITS = [("minute", "requests", 100000000), ("day", "tokens", 10000000000),
              ("month", "cost", 1000000.0)]
ADM_PRICE = (1.0, 4.0)  # mock-model, USD per 1M input / output tokens: costs count
# gwd+adm's provider holds ADM_CREDS upstream credentials with every quota window
# configured (DESIGN.md 10): each request chooses the credential with the most headroom
# over four known limits and takes and settles a lease; none is ever approached.
ADM_CREDS = 3
ADM_QUOTA = [("rpm", 10**9), ("tpm", 10**12), ("rpd", 10**10), ("tpd", 10**13)]
# gwd's and gwd+adm's 1-connection runs of a round are cut in SLICES alternating slices
SLICES = 10
# The pinned A/B of the admission scenario: gwd and gwd+adm (every thread) on the last
# CPU, the load and the upstream on the first, PINNED_SLICES alternated runs of
# PINNED_N requests each. Unpinned, a 1-connection p50 on 2 cores flips between two
# levels with where the scheduler puts the threads; pinned, only the code differs.
PINNED_SLICES = 20
PINNED_N = 1000
# Pinned the same way, nginx joins those runs (its own PINNED_N requests each time), and
# gwd, gwd+adm and nginx take turns at PINNED_TPUT_RUNS 64-connection runs each, for the
# throughput and the proxy CPU per request with the code the only difference: unpinned,
# nginx's CPU per request moved between 20 and 45 us from run to run on one day with
# where the scheduler put it beside the load and the upstream (gwd's between 26 and 31).
# Pinned, gwd's store writer shares the worker's CPU, so its commits sit on the
# worker's latency (the 1-connection p99) as they do not unpinned.
PINNED_TPUT_RUNS = 6
# The converted paths of issue 13's point 5 and the Messages splice they compare with
# join those 64-connection runs (not the 1-connection ones): unpinned, a cell's CPU per
# request moved between 20 and 42 us from round to round in one run, as far from its
# splice as the conversion could ever be.
# Each pair is a converted cell and the splice of its client's shape it is held to.
PINNED_PAIRS = (("gwd-conv", "gwd"), ("gwd-msg-conv", "gwd-msg"))
# The cells the pairs add to the pinned runs (gwd is in them already).
PINNED_CONV = tuple(n for pair in PINNED_PAIRS for n in pair[::-1] if n != "gwd")
# Each converted cell runs right beside the splice it is held to (gwd-conv before gwd,
# gwd-msg-conv after gwd-msg, in that order and then reversed), and the tables give,
# beside the ratio of the medians, the median of the runs' own ratios: a slow phase of
# the machine covers a pair's two runs more often than runs a round apart.
PINNED_ORDER = ("gwd-conv", "gwd", "gwd+adm", "nginx", "gwd-msg", "gwd-msg-conv")
# The API shapes: the path and the gwbench load --api of each, and the upstream route a
# gwd's provider dialect sends to.
API_PATH = {"chat": "/v1/chat/completions", "messages": "/v1/messages",
            "responses": "/v1/responses",
            "gemini": "/v1beta/models/mock-model:generateContent"}
UP_PATH = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages",
           "responses": "/v1/responses", "gemini": "/v1beta/models/mock-model:generateContent",
           "bedrock": "/model/mock-model/converse"}
# The gwd columns of the main table: name -> (client API, provider dialect, what it is).
# gwd+adm is the admission table's; gwd-base (--base-bin) another build's Chat relay.
CELLS = {
    "gwd": ("chat", "openai", "Chat client, Chat upstream: splice"),
    "gwd-conv": ("chat", "anthropic", "Chat client, Messages upstream: converted"),
    "gwd-msg": ("messages", "anthropic", "Messages client, Messages upstream: splice"),
    "gwd-msg-conv": ("messages", "openai", "Messages client, Chat upstream: converted"),
    "gwd-resp": ("responses", "responses", "Responses client, Responses upstream: splice"),
    "gwd-resp-conv": ("responses", "openai", "Responses client, Chat upstream: converted"),
    "gwd-gem": ("gemini", "gemini", "Gemini client, Gemini upstream: splice"),
    "gwd-gem-conv": ("gemini", "anthropic", "Gemini client, Messages upstream: converted"),
    "gwd-br-conv": ("chat", "bedrock",
                    "Chat client, Bedrock upstream: converted, SigV4-signed, eventstream"),
    "gwd-base": ("chat", "openai", "Chat client, Chat upstream, the --base-bin build"),
    "gwd-h2up": ("chat", "openai",
                 "Chat client, Chat upstream over h2c (providers[].http2: on): splice"),
}
# The open-loop scenario (issue 13: added latency at ~200 req/s as well as at one request
# at a time): RATE requests/s on a fixed schedule, RATE_N requests a run, over
# RATE_CONNS connections (a request finds one idle: the proxy is never the queue), for
# the targets in RATE_TARGETS (and their two-worker twins).
RATE, RATE_N, RATE_CONNS = 200, 1000, 8
# Each latency run (one connection, paced, pinned) first sends SERIAL_WARMUP requests on
# its connection (RATE_WARMUP on each paced connection) that its figures leave out
# (gwbench load --warmup). A new gwbench process's first requests run on cold caches: they
# sat at the p99 of a 500-request slice (1-connection p99s tens of us higher than over
# 5000 requests in one run), and each run of the same target paid them again.
SERIAL_WARMUP, RATE_WARMUP = 50, 5
RATE_TARGETS = ("direct", "gwd", "gwd+adm", "nginx")

# The two-worker targets' suffix, and their rounds (five: with three, one slow round of
# one target moved its median by several percent; about 25 s a round). Their 64-connection
# runs come after those rounds, back to back in W2_TPUT_ROUNDS alternated rounds of their
# own (a few seconds a round): when each sat in its target's latency round, 7 s of paced
# load apart from the next target's, the machine's phases put gwd+adm against gwd
# anywhere from 0.85x to 1.29x round by round (session 23).
W2, W2_ROUNDS, W2_TPUT_ROUNDS = "-2w", 5, 10

# Cells whose provider speaks HTTP/2 to the upstream (gwbench answers h2c).
H2_UP_CELLS = {"gwd-h2up"}


def start_gwd(bindir, tmp, up_port, key, workers, procs, name="gwd", admission=False,
              dialect="openai", log_level=GWD_LOG_LEVEL):
    """Returns (port, proc, control, note); port None when gwd is missing or did not
    start; control is (port, token) of its control API. Each gwd gets a folder of its
    own under tmp (config, store, log, and for admission its price table)."""
    gwd = os.path.join(bindir, "gwd")
    if not os.access(gwd, os.X_OK):
        return None, None, None, f"gwd not found at {gwd}: {name} column skipped"
    home = os.path.join(tmp, name)
    os.makedirs(home, exist_ok=True)
    cfg = os.path.join(home, "gw.yaml")
    ctl_port = free_port()
    token = secrets.token_hex(16)
    prov_extra = client_extra = ""
    keys = "keys: [{ value: bench-upstream-key }]"
    if name in H2_UP_CELLS:
        prov_extra += "    http2: on\n"
    if dialect == "bedrock":
        keys = (f"aws: {{ region: {AWS_REGION}, access_key_id: {{ value: {AWS_KEY_ID} }}, "
                f"secret_access_key: {{ value: {AWS_SECRET} }} }}")
    if admission:
        keys = "keys: [" + ", ".join(f"{{ value: bench-upstream-key-{i} }}"
                                     for i in range(ADM_CREDS)) + "]"
        prov_extra += ("    quota:\n      default: { "
                       + ", ".join(f"{w}: {v}" for w, v in ADM_QUOTA) + " }\n")
        with open(os.path.join(home, "prices.yaml"), "w") as f:
            f.write("models:\n  - { model: mock-model, input: %.2f, output: %.2f }\n"
                    % ADM_PRICE)
        prov_extra += f"    max_concurrent: {ADM_SLOTS}\n"
        client_extra = f"    max_concurrent: {ADM_SLOTS}\n"
        if ADM_LIMITS:
            client_extra += "    limits:\n" + "".join(
                f"      - {{ per: {per}, {m}: {v} }}\n" for per, m, v in ADM_LIMITS)
    # Ports picked here rather than 0, so that a gwd that refuses port 0 still runs.
    # Without `prices:` a prices.yaml next to the config is used: only gwd+adm has one.
    data_port = free_port()
    with open(cfg, "w") as f:
        f.write(f"""server:
  listen: ["127.0.0.1:{data_port}"]
  workers: {workers}
control:
  listen: 127.0.0.1:{ctl_port}
  token_env: GW_BENCH_CONTROL_TOKEN
store:
  path: {os.path.join(home, "store")}
log:
  level: {log_level}
providers:
  - name: mock
    dialect: {dialect}
    base_url: http://127.0.0.1:{up_port}
    {keys}
    models: ["*"]
{prov_extra}clients:
  - name: bench
    key_sha256: "{hashlib.sha256(key.encode()).hexdigest()}"
{client_extra}""")
    log = os.path.join(home, "gwd.log")
    env = dict(os.environ, GW_BENCH_CONTROL_TOKEN=token)
    with open(log, "w") as lf:
        p = Proc(name, [gwd, "-c", cfg], stdout=lf, stderr=lf, env=env)
    procs.append(p)
    # The ready line is at level info, which the cells do not log: the data port
    # accepting connections is the sign (gwd binds it once its workers run).
    if wait_port(data_port, p, 15):
        return data_port, p, (ctl_port, token), None
    with open(log) as lf:
        tail = lf.read()[-2000:]
    p.stop()
    return None, None, None, f"{name} did not become ready: {name} column skipped\n" + tail


def overview(control):
    """GET /control/v1/overview of a gwd started above; the parsed answer."""
    port, token = control
    req = urllib.request.Request(f"http://127.0.0.1:{port}/control/v1/overview",
                                 headers={"Authorization": f"Bearer {token}"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no http_proxy
    with opener.open(req, timeout=10) as r:
        return json.loads(r.read())


def check_quota(ov, n_ok, day):
    """Problems with the claim that gwd+adm's <n_ok> requests each chose one of its
    ADM_CREDS credentials under all four windows: the overview's quota section lists
    the ones used with the configured limits, no cooldown, every lease settled, and
    (when the UTC day <day> did not change during the run) their day counts summing to
    n_ok. Not every credential need be used: one not yet seen answering counts as half
    used (DESIGN.md 10, core/quota.c), so it is chosen only while the others are tied
    with it, at the very start, and whether a first request reaches it is timing."""
    q = (ov.get("quota") or {}).get("mock")
    creds = [c for st in (q or {}).get("sets", []) for c in st.get("credentials", [])
             if any(c["windows"][w]["used"] for w in ("rpm", "rpd"))]
    if not 1 <= len(creds) <= ADM_CREDS:
        return [f"quota: {len(creds)} credentials used, want 1 to {ADM_CREDS}"]
    bad = []
    for c in creds:
        for w, v in ADM_QUOTA:
            if c["windows"][w]["limit"] != v:
                bad.append(f"quota {c['fp']} {w}: limit {c['windows'][w]['limit']}, want {v}")
        if c.get("cooldown") or c.get("leases") or c.get("leases_dropped"):
            bad.append(f"quota {c['fp']}: cooldown {c.get('cooldown')}, leases "
                       f"{c.get('leases')}, dropped {c.get('leases_dropped')}")
    rpd = sum(c["windows"]["rpd"]["used"] for c in creds)
    if day == time.gmtime().tm_yday and rpd != n_ok:
        bad.append(f"quota: the credentials' day windows count {rpd} requests, want {n_ok}")
    return bad


def check_admission(control, n_ok, base_control, day=None):
    """Problems (a list of strings; empty: fine) with the claim that gwd+adm's <n_ok>
    answered requests went through admission and the baseline gwd's did not: its
    overview shows the key and provider slots configured and all returned, and every
    limit charged (requests and tokens exactly: each request is charged alike) and
    never reached, and its upstream credentials' quota windows (check_quota)."""
    bad = []
    try:
        ov = overview(control)
    except (OSError, ValueError) as e:
        return [f"GET /control/v1/overview failed: {e}"]
    keys = [k for k in ov.get("keys", []) if k.get("name") == "bench"]
    provs = [p for p in ov.get("providers", []) if p.get("name") == "mock"]
    if not keys or not provs:
        return ["the overview lists no key 'bench' or no provider 'mock'"]
    k, pv = keys[0], provs[0]
    if k.get("max_concurrent") != ADM_SLOTS or pv.get("max_concurrent") != ADM_SLOTS:
        bad.append(f"max_concurrent: key {k.get('max_concurrent')}, provider "
                   f"{pv.get('max_concurrent')}, want {ADM_SLOTS}")
    if k.get("in_flight") or k.get("waiting"):
        bad.append(f"key permits not all returned: in_flight {k.get('in_flight')}, "
                   f"waiting {k.get('waiting')}")
    lims = {(x.get("per"), x.get("measure")): x for x in k.get("limits") or []}
    for per, measure, mx in ADM_LIMITS:
        x = lims.get((per, measure))
        if x is None:
            bad.append(f"limit {per} {measure} not in the overview")
            continue
        used = x.get("used") or 0
        if x.get("reached"):
            bad.append(f"limit {per} {measure} reached ({used} of {mx})")
        if not used > 0:
            bad.append(f"limit {per} {measure}: used {used}, want > 0")
        elif measure == "tokens" and (used % n_ok or used < 2 * n_ok):
            bad.append(f"limit {per} tokens: used {used} is not the same charge "
                       f"for each of the {n_ok} requests")
    bad += check_quota(ov, n_ok, day)
    try:
        base = overview(base_control) if base_control else None
    except (OSError, ValueError) as e:
        return bad + [f"GET /control/v1/overview of the baseline gwd failed: {e}"]
    if base:
        bk = [x for x in base.get("keys", []) if x.get("name") == "bench"]
        if not bk or bk[0].get("limits") or bk[0].get("max_concurrent") is not None:
            bad.append("the baseline gwd's key is not free of limits")
    return bad


def http(port, path, body=None, headers=None):
    """One request to 127.0.0.1:<port> (no proxy); (status, parsed JSON body or None)."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body,
                                 headers=headers or {})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=10) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, None


def check_path(name, port, key, up_port, api, dialect):
    """Problems (a list of strings; empty: fine) with the claim that target <name> takes
    the path its column names: one non-streamed request in the <api> shape answered
    200 in that shape, and the upstream's last request on the route of <dialect>."""
    if api == "messages":
        body = {"model": "mock-model", "max_tokens": 256, "stream": False,
                "messages": [{"role": "user", "content": "Say hello."}]}
        hdr = {"x-api-key": key, "anthropic-version": "2023-06-01"}
    elif api == "responses":
        body = {"model": "mock-model", "input": "Say hello."}
        hdr = {"Authorization": f"Bearer {key}"}
    elif api == "gemini":
        body = {"contents": [{"role": "user", "parts": [{"text": "Say hello."}]}]}
        hdr = {"x-goog-api-key": key}
    else:
        body = {"model": "mock-model", "stream": False,
                "messages": [{"role": "user", "content": "Say hello."}]}
        hdr = {"Authorization": f"Bearer {key}"}
    hdr["Content-Type"] = "application/json"
    try:
        status, ans = http(port, API_PATH[api], json.dumps(body).encode(), hdr)
        _, last = http(up_port, "/_bench/last")
    except OSError as e:
        return [f"{name}: the path check request failed: {e}"]
    bad = []
    shape = {"messages": (ans or {}).get("type"),
             "gemini": "candidates" if "candidates" in (ans or {}) else None}.get(
                 api, (ans or {}).get("object"))
    want = {"messages": "message", "responses": "response",
            "gemini": "candidates"}.get(api, "chat.completion")
    if status != 200 or shape != want:
        bad.append(f"{name}: answered {status} {str(ans)[:120]}, want 200 and a {want}")
    got = (last or {}).get("path", "").split("?")[0]
    if got != UP_PATH[dialect]:
        bad.append(f"{name}: the upstream got {got or 'nothing'}, want {UP_PATH[dialect]}")
    return bad


def start_nginx(tmp, up_port, procs, workers=1, name="nginx"):
    """Returns (port, proc, note, h2c port): HTTP/1.1 on the port, HTTP/2 in cleartext
    with prior knowledge (`listen ... http2`) on the h2c port, both proxying to the
    upstream over one keep-alive pool. One worker: a single process (no master); more:
    a master and <workers> worker processes (proc.cpu() counts them)."""
    if not os.access(NGINX, os.X_OK):
        return None, None, f"{NGINX} not found: nginx column skipped", None
    prefix = os.path.join(tmp, name)
    os.makedirs(os.path.join(prefix, "logs"), exist_ok=True)
    port, h2port = free_port(), free_port()
    conf = os.path.join(prefix, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off;
master_process {"off" if workers == 1 else "on"};
worker_processes {workers};
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
    server {{
        listen 127.0.0.1:{h2port} http2;
        http2_max_concurrent_streams 128;
        location / {{
            proxy_pass http://up;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }}
    }}
}}
""")
    p = Proc(name, [NGINX, "-p", prefix, "-c", conf, "-e", os.path.join(prefix, "error.log")],
             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    procs.append(p)
    if not wait_port(port, p):
        err = p.p.stderr.read() if not p.alive() else ""
        p.stop()
        return None, None, f"nginx did not start: {err.strip()}", None
    return port, p, None, h2port


# ---- load runs ----

def pin(pid, cpus):
    """Sets the CPU affinity of every thread of process <pid> to the set <cpus>."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except OSError:
            pass  # a thread that just ended


def load(bindir, port, key, args, proxy=None, sample_rss=False, cpu=None, api="chat"):
    """Runs gwbench load in the <api> shape (on CPU <cpu> when given); returns
    (summary dict, proxy cpu seconds, [peak VmRSS kB, peak RssAnon kB]) (the peaks only
    with sample_rss)."""
    path = API_PATH[api]
    if api == "gemini" and "--stream" in args:
        path = "/v1beta/models/mock-model:streamGenerateContent?alt=sse"
    argv = [os.path.join(bindir, "gwbench"), "load", "--json", "--quiet", "--api", api,
            "--url", f"http://127.0.0.1:{port}{path}", "--key", key] + args
    if cpu is not None:
        argv = ["taskset", "-c", str(cpu)] + argv
    peak = [0, 0]
    stop = threading.Event()

    def sampler():
        while not stop.is_set():
            try:
                vm, anon = rss_kb(proxy.pid)
                peak[0], peak[1] = max(peak[0], vm), max(peak[1], anon)
            except OSError:
                return
            stop.wait(0.05)

    c0 = proxy.cpu() if proxy else 0.0
    th = None
    if proxy and sample_rss:
        th = threading.Thread(target=sampler, daemon=True)
        th.start()
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=600)
    stop.set()
    if th:
        th.join()
    c1 = proxy.cpu() if proxy else 0.0
    if out.returncode != 0:
        raise SystemExit(f"bench: gwbench load failed: {out.stderr.strip()}")
    return json.loads(out.stdout), c1 - c0, peak


def pooled_pct(hists, p):
    """Percentile <p> of several runs' latencies pooled into one histogram, as gwbench
    load reports it for one run: <hists> holds each run's "hist" ([value, count] pairs,
    values as gwbench reports them), the rank rounded as bench_hist_pct does."""
    counts = {}
    for h in hists:
        for v, n in h:
            counts[v] = counts.get(v, 0) + n
    total = sum(counts.values())
    if total == 0:
        return 0
    want = min(total, max(1, int(p / 100.0 * total + 0.5)))
    seen = 0
    for v in sorted(counts):
        seen += counts[v]
        if seen >= want:
            return v
    return max(counts)


# ---- HTTP/2 (h2load, Debian's nghttp2-client) ----

H2_CONNS, H2_STREAMS = 4, 32  # h2load -c, -m: many streams over few connections
H1_CONNS = 64                 # h2load --h1 -c: the same load over HTTP/1.1
IDLE_CONNS = 500              # idle HTTP/2 connections held for the memory figure


def h2load(port, key, n, proxy, h1=False):
    """h2load of <n> non-streamed Chat requests; returns (req/s, proxy CPU us per
    request, failed requests) or None when h2load is missing."""
    if not shutil.which("h2load"):
        return None
    body = os.path.join(tempfile.gettempdir(), f"gwbench-h2-{os.getpid()}.json")
    with open(body, "w") as f:
        json.dump({"model": "mock-model", "stream": False,
                   "messages": [{"role": "user", "content": "Say hello."}]}, f)
    argv = ["h2load", "-n", str(n), "-d", body, "-H", f"authorization: Bearer {key}",
            "-H", "content-type: application/json"]
    argv += ["--h1", "-c", str(H1_CONNS)] if h1 else ["-c", str(H2_CONNS), "-m", str(H2_STREAMS)]
    argv.append(f"http://127.0.0.1:{port}/v1/chat/completions")
    c0 = proxy.cpu()
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=600)
    c1 = proxy.cpu()
    os.unlink(body)
    m = re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out.stdout)
    ok = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) "
                   r"failed", out.stdout)
    st = re.search(r"status codes: (\d+) 2xx", out.stdout)
    if not m or not ok:
        raise SystemExit(f"bench: h2load failed: {out.stdout[-500:]}")
    good = int(st.group(1)) if st else int(ok.group(1))
    return float(m.group(1)), (c1 - c0) * 1e6 / max(1, good), n - good


def idle_h2_kb(port, proxy):
    """KB of the proxy's RSS per idle HTTP/2 connection: IDLE_CONNS connections that sent
    the preface and an empty SETTINGS frame, held until the RSS settles."""
    preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
    before = rss_kb(proxy.pid)[0]
    socks = []
    try:
        for _ in range(IDLE_CONNS):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(preface)
            socks.append(s)
        for s in socks:  # each answered with its SETTINGS: the session exists
            s.recv(64)
        after = rss_kb(proxy.pid)[0]
    finally:
        for s in socks:
            s.close()
    return max(0, after - before) / IDLE_CONNS


def idle_ws_kb(port, key, proxy):
    """KB of gwd's RSS per idle Responses WebSocket connection: IDLE_CONNS upgrades of
    GET /v1/responses (each answered 101), held until the RSS is read."""
    req = (f"GET /v1/responses HTTP/1.1\r\nHost: gw\r\nUpgrade: websocket\r\n"
           f"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
           f"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {key}\r\n\r\n").encode()
    before = rss_kb(proxy.pid)[0]
    socks = []
    try:
        for _ in range(IDLE_CONNS):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(req)
            socks.append(s)
        for s in socks:
            head = s.recv(256)
            if not head.startswith(b"HTTP/1.1 101"):
                raise SystemExit(f"bench: the WebSocket upgrade was answered {head[:40]!r}")
        after = rss_kb(proxy.pid)[0]
    finally:
        for s in socks:
            s.close()
    return max(0, after - before) / IDLE_CONNS


def fmt_table(table):
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    text = []
    for i, r in enumerate(table):
        text.append("  ".join(c.ljust(widths[j]) if j == 0 else c.rjust(widths[j])
                              for j, c in enumerate(r)))
        if i == 0:
            text.append("  ".join("-" * w for w in widths))
    return text


def md_table(table):
    md = ["| " + " | ".join(table[0]) + " |",
          "|" + "|".join(["---"] + ["---:"] * (len(table[0]) - 1)) + "|"]
    for r in table[1:]:
        md.append("| " + " | ".join(r) + " |")
    return md


def compare(g, n, cmp):
    """How <g> compares to <n>: a difference, a percentage or a ratio."""
    if g is None or n is None:
        return "-"
    if cmp == "diff":
        return f"{g - n:+.0f} us"
    if cmp == "pct":
        return f"{100.0 * g / n:.0f}%" if n else "-"
    return f"{g / n:.2f}x" if n else "-"


def main():
    ap = argparse.ArgumentParser(description="direct vs gwd vs nginx on loopback, and "
                                 "gwd with admission (key and upstream slots, key limits)")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/release/bin"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="smaller runs (a smoke test)")
    ap.add_argument("--out", default=os.path.join(ROOT, "build/bench/results.md"))
    ap.add_argument("--gwd-workers", type=int, default=1,
                    help="gwd workers (default 1, like nginx's one worker process)")
    ap.add_argument("--base-bin", help="also measure the gwd of this folder (another "
                    "build, e.g. an older commit's) as a Chat relay: column gwd-base")
    a = ap.parse_args()
    bindir = os.path.abspath(a.bin)
    if not os.access(os.path.join(bindir, "gwbench"), os.X_OK):
        raise SystemExit(f"bench: no gwbench in {bindir}")
    if a.base_bin and not os.access(os.path.join(a.base_bin, "gwd"), os.X_OK):
        raise SystemExit(f"bench: no gwd in {a.base_bin}")
    n_serial = 1000 if a.quick else 5000
    n_tput = 10000 if a.quick else 50000
    n_warm = 2000
    streams, chunks, interval = 200, 20, 50
    key = "gw-bench-" + secrets.token_hex(8)

    procs = []
    tmp = tempfile.mkdtemp(prefix="gwbench-")
    notes = []
    adm_bad = []
    path_bad = []
    api = {}  # target name -> the shape gwbench load sends: chat unless a Messages cell
    w2_ctl = {}  # two-worker gwd -> its control (port, token)
    day0 = time.gmtime().tm_yday  # the quota check counts the UTC day's windows
    try:
        up_port = start_upstream(bindir, procs)
        upstream = procs[-1]
        targets = [("direct", up_port, None)]
        gport, gproc, gctl, note = start_gwd(bindir, tmp, up_port, key, a.gwd_workers, procs)
        if note:
            notes.append(note)
        if gport:
            targets.append(("gwd", gport, gproc))
        aport, aproc, actl, note = start_gwd(bindir, tmp, up_port, key, a.gwd_workers, procs,
                                             name="gwd+adm", admission=True)
        if note:
            notes.append(note)
        if aport:
            targets.append(("gwd+adm", aport, aproc))
        # the other cells of the hub (CELLS), each its own gwd: the converted paths of
        # DESIGN.md 17 and the Messages splice; and another build's Chat relay, if asked
        for cell in (["gwd-conv", "gwd-msg", "gwd-msg-conv", "gwd-resp", "gwd-resp-conv",
                      "gwd-gem", "gwd-gem-conv", "gwd-br-conv", "gwd-h2up"]
                     + (["gwd-base"] if a.base_bin else [])):
            cport, cproc, _, note = start_gwd(
                os.path.abspath(a.base_bin) if cell == "gwd-base" else bindir, tmp, up_port,
                key, a.gwd_workers, procs, name=cell, dialect=CELLS[cell][1])
            if note:
                notes.append(note)
            if cport:
                targets.append((cell, cport, cproc))
        nport, nproc, note, nh2port = start_nginx(tmp, up_port, procs)
        if note:
            notes.append(note)
        if nport:
            # next to gwd in every round (ABBA: just before it, then just after), so that
            # the machine's drift over a round's minutes does not fall between the two
            # columns whose ratio is the bar
            targets.insert(1, ("nginx", nport, nproc))
        names = [t[0] for t in targets]
        api = {n: CELLS[n][0] if n in CELLS else "chat" for n in names}
        print(f"bench: upstream :{up_port}; targets: "
              + ", ".join(f"{n} :{p}" for n, p, _ in targets), file=sys.stderr)
        # each gwd takes the path its column names (one request each, before any load)
        # (not gwd+adm: its check counts the tokens of the load's requests alone)
        for name, port, _ in targets:
            if name in CELLS:
                path_bad += check_path(name, port, key, up_port, api[name], CELLS[name][1])

        res = {n: {} for n in names}
        errs = {n: 0 for n in names}
        oks = {n: 0 for n in names}

        def add(name, k, v):
            res[name].setdefault(k, []).append(v)

        def run(name, port, proc, argv, sample_rss=False, cpu=None):
            s, cpu, peak = load(bindir, port, key, argv, proc, sample_rss, cpu, api[name])
            errs[name] += s["requests"] - s["ok"]
            oks[name] += s["ok"]
            return s, cpu, peak

        # warm-up: connections, pools, caches
        for name, port, proc in targets:
            run(name, port, proc, ["--connections", "8", "--threads", "1",
                                   "--requests", str(n_warm)])

        def serial(name, port, proc, n, record=True):
            s, _, _ = run(name, port, proc, ["--connections", "1", "--threads", "1",
                                             "--warmup", str(SERIAL_WARMUP),
                                             "--requests", str(n + SERIAL_WARMUP)])
            if record:
                add(name, "serial_p50", s["latency_us"]["p50"])
                add(name, "serial_p99", s["latency_us"]["p99"])
            return s["latency_us"]["hist"]

        def paced(name, port, proc):
            s, _, _ = run(name, port, proc, ["--rate", str(RATE), "--connections",
                                             str(RATE_CONNS), "--threads", "1",
                                             "--warmup", str(RATE_WARMUP), "--requests",
                                             str(RATE_N // (4 if a.quick else 1)
                                                 + RATE_CONNS * RATE_WARMUP)])
            add(name, "rate_p50", s["latency_us"]["p50"])
            add(name, "rate_p99", s["latency_us"]["p99"])

        pair = [t for t in targets if t[0] in ("gwd", "gwd+adm")]
        t_start = time.time()
        busy0, own0 = busy_secs(), own_secs(procs)
        for r in range(a.rounds):
            # the order is reversed every other round (ABBA), so that drift within a
            # round favours no target over another, gwd and gwd+adm included
            order = list(targets) if r % 2 == 0 else list(reversed(targets))
            for name, port, proc in order:
                print(f"bench: round {r + 1}/{a.rounds} {name}", file=sys.stderr)
                # (1) one request at a time; gwd's and gwd+adm's runs are cut in SLICES
                # slices each, alternated, so that whatever else runs on the machine
                # hits both alike
                if len(pair) < 2 or name not in ("gwd", "gwd+adm"):
                    serial(name, port, proc, n_serial)
                elif name == next(t[0] for t in order if t in pair):
                    # the slices pooled into one histogram per target: the round's
                    # p50 and p99 are those of its n_serial requests, as for the others
                    # (a median of the slices' own p99s, 5th slowest of 500 each, sits
                    # tens of us above the p99 of the 5000)
                    hists = {t[0]: [] for t in pair}
                    for k in range(SLICES):
                        for t in (pair if (r + k) % 2 == 0 else pair[::-1]):
                            hists[t[0]].append(serial(*t, n_serial // SLICES, record=False))
                    for t in pair:
                        add(t[0], "serial_p50", pooled_pct(hists[t[0]], 50))
                        add(t[0], "serial_p99", pooled_pct(hists[t[0]], 99))
                # (1b) at RATE requests/s, open loop
                if name in RATE_TARGETS:
                    paced(name, port, proc)
                # (2)+(3) throughput ceiling and proxy CPU per request
                s, cpu, _ = run(name, port, proc, ["--connections", "64", "--threads", "2",
                                                   "--requests", str(n_tput)])
                add(name, "rps", s["rps"])
                if proc:
                    add(name, "cpu_req", cpu * 1e6 / max(1, s["completed"]))
                if name == "gwd+adm":
                    continue  # admission is measured on (1)-(3) only
                # (4) concurrent paced streams
                s, cpu, peak = run(name, port, proc, [
                    "--stream", "--connections", str(streams), "--threads", "2",
                    "--requests", str(streams), "--header", f"x-bench-chunks: {chunks}",
                    "--header", f"x-bench-interval-ms: {interval}",
                    "--header", "x-bench-ttft-ms: 20"], sample_rss=True)
                add(name, "ttft_p99", s["ttft_us"]["p99"])
                add(name, "gap_p99", s["gap_us"]["p99"])
                if proc:
                    add(name, "cpu_stream", cpu * 1e6 / max(1, s["completed"]))
                    add(name, "rss_mb", peak[0] / 1024.0)
                    add(name, "anon_mb", peak[1] / 1024.0)
        cpus = sorted(os.sched_getaffinity(0))
        if len(pair) == 2 and len(cpus) >= 2 and shutil.which("taskset"):
            # the pinned runs (PINNED_SLICES and PINNED_TPUT_RUNS above)
            lo, hi = cpus[0], cpus[-1]
            pinned = pair + [t for t in targets if t[0] == "nginx" and t[2]]
            tput = sorted(pinned + [t for t in targets if t[0] in PINNED_CONV],
                          key=lambda t: PINNED_ORDER.index(t[0]))
            pin(upstream.pid, {lo})
            for _, _, proc in tput:
                pin(proc.pid, {hi})
            print("bench: pinned runs (admission A/B, nginx, converted cells)", file=sys.stderr)
            for k in range(4 if a.quick else PINNED_SLICES):
                for name, port, proc in (pinned if k % 2 == 0 else pinned[::-1]):
                    s, _, _ = run(name, port, proc, ["--connections", "1", "--threads", "1",
                                                     "--warmup", str(SERIAL_WARMUP),
                                                     "--requests", str(PINNED_N + SERIAL_WARMUP)],
                                  cpu=lo)
                    add(name, "pinned_p50", s["latency_us"]["p50"])
                    add(name, "pinned_p99", s["latency_us"]["p99"])
            for k in range(2 if a.quick else PINNED_TPUT_RUNS):
                for name, port, proc in (tput if k % 2 == 0 else tput[::-1]):
                    s, cpu, _ = run(name, port, proc, ["--connections", "64", "--threads", "2",
                                                       "--requests", str(n_tput)], cpu=lo)
                    add(name, "pinned_rps", s["rps"])
                    add(name, "pinned_cpu", cpu * 1e6 / max(1, s["completed"]))
            for proc in [upstream] + [t[2] for t in tput]:
                pin(proc.pid, set(cpus))
        elapsed = time.time() - t_start
        if aport:
            # the gwd+adm figures count only if its requests went through admission;
            # checked at once: the minute limit's window must still hold the rounds'
            adm_bad += check_admission(actl, oks["gwd+adm"], gctl, day0)
            if errs["gwd+adm"]:
                adm_bad.append(f"{errs['gwd+adm']} requests were not answered 2xx")
        # other work on the machine during the rounds: what it was busy with, less ours
        other = max(0.0, (busy_secs() - busy0) - (own_secs(procs) - own0))
        # HTTP/2: h2load, many streams over few connections, beside the same load over
        # HTTP/1.1, gwd (h2c on its plain port) against nginx's http2 port; then the
        # memory of idle HTTP/2 connections
        h2_targets = [(n, p, h, pr) for n, p, h, pr in
                      (("gwd", gport, gport, gproc), ("nginx", nport, nh2port, nproc))
                      if p and pr]
        n_h2 = 5000 if a.quick else 20000
        h2_failed = 0
        for r in range(1 if a.quick else 3):
            for name, port, h2port, proc in (h2_targets if r % 2 == 0 else h2_targets[::-1]):
                print(f"bench: http2 round {r + 1} {name}", file=sys.stderr)
                got = h2load(h2port, key, n_h2, proc)
                if got is None:
                    break
                add(name, "h2_rps", got[0])
                add(name, "h2_cpu", got[1])
                h2_failed += got[2]
                got = h2load(port, key, n_h2, proc, h1=True)
                add(name, "h1_rps", got[0])
                add(name, "h1_cpu", got[1])
                h2_failed += got[2]
        if not shutil.which("h2load"):
            notes.append("h2load not found (apt-get install nghttp2-client): HTTP/2 table "
                         "skipped")
        elif h2_failed:
            notes.append(f"http2: {h2_failed} h2load requests failed (figures include them)")
        for name, port, h2port, proc in h2_targets:
            add(name, "h2_idle_kb", idle_h2_kb(h2port, proc))
        if gport and gproc:
            add("gwd", "ws_idle_kb", idle_ws_kb(gport, key, gproc))
        # Two workers each (issue 13 asks for 1 and 2): a gwd with `workers: 2`, the same
        # with admission, and nginx with a master and two worker processes, measured in
        # scenarios 1-3 (one request at a time, 64 connections) in W2_ROUNDS alternated
        # rounds after the one-worker rounds (direct's figures are the rounds' above).
        w2 = []
        for cell, adm in (("gwd", False), ("gwd+adm", True)):
            port, proc, ctl, note = start_gwd(bindir, tmp, up_port, key, 2, procs,
                                              name=cell + W2, admission=adm)
            if note:
                notes.append(note)
            if port:
                w2.append((cell + W2, port, proc))
                w2_ctl[cell + W2] = ctl
        port, proc, note, _ = start_nginx(tmp, up_port, procs, workers=2, name="nginx" + W2)
        if note:
            notes.append(note)
        if port:
            w2.insert(0, ("nginx" + W2, port, proc))  # next to gwd, as above
        for name, port, proc in w2:
            api[name] = "chat"
            res[name], errs[name], oks[name] = {}, 0, 0
            run(name, port, proc, ["--connections", "8", "--threads", "1",
                                   "--requests", str(n_warm)])
        for r in range(1 if a.quick else W2_ROUNDS):
            for name, port, proc in (w2 if r % 2 == 0 else w2[::-1]):
                print(f"bench: two workers, round {r + 1} {name}", file=sys.stderr)
                serial(name, port, proc, n_serial)
                paced(name, port, proc)
        # the 64-connection runs, each right beside the other targets' of its round (the
        # order reversed every other round), so that a ratio compares one phase
        for r in range(1 if a.quick else W2_TPUT_ROUNDS):
            for name, port, proc in (w2 if r % 2 == 0 else w2[::-1]):
                print(f"bench: two workers, 64 connections, round {r + 1} {name}",
                      file=sys.stderr)
                s, cpu, _ = run(name, port, proc, ["--connections", "64", "--threads", "2",
                                                   "--requests", str(n_tput)])
                add(name, "rps", s["rps"])
                add(name, "cpu_req", cpu * 1e6 / max(1, s["completed"]))
        if "gwd+adm" + W2 in w2_ctl:
            adm_bad += [W2.strip("-") + ": " + b for b in check_admission(
                w2_ctl["gwd+adm" + W2], oks["gwd+adm" + W2], w2_ctl.get("gwd" + W2), day0)]
            if errs["gwd+adm" + W2]:
                adm_bad.append(f"{errs['gwd+adm' + W2]} requests of gwd+adm{W2} were not "
                               f"answered 2xx")
    finally:
        for p in reversed(procs):
            p.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    def med(name, k):
        v = [x for x in res.get(name, {}).get(k, []) if x is not None]
        return statistics.median(v) if v else None

    def run_ratio(name, base, k):
        """The median over the runs of <name>'s figure over <base>'s in the same run."""
        v = [x / y for x, y in zip(res.get(name, {}).get(k, []), res.get(base, {}).get(k, []))
             if x is not None and y]
        return f"{statistics.median(v):.2f}x" if v else "-"

    rows = [
        # label, key, format, how gwd compares to nginx
        ("1 conn: latency p50 (us)", "serial_p50", "{:.0f}", "diff"),
        ("1 conn: latency p99 (us)", "serial_p99", "{:.0f}", "diff"),
        ("1 conn: added p50 vs direct (us)", "added_p50", "{:+.0f}", "diff"),
        ("1 conn: added p99 vs direct (us)", "added_p99", "{:+.0f}", "diff"),
        (f"{RATE} req/s: latency p50 (us)", "rate_p50", "{:.0f}", "diff"),
        (f"{RATE} req/s: latency p99 (us)", "rate_p99", "{:.0f}", "diff"),
        (f"{RATE} req/s: added p50 vs direct (us)", "rate_added_p50", "{:+.0f}", "diff"),
        (f"{RATE} req/s: added p99 vs direct (us)", "rate_added_p99", "{:+.0f}", "diff"),
        ("64 conns: throughput (req/s)", "rps", "{:.0f}", "pct"),
        ("proxy CPU per request (us)", "cpu_req", "{:.1f}", "ratio"),
        (f"{streams} streams x {chunks}: ttft p99 (us)", "ttft_p99", "{:.0f}", "diff"),
        (f"{streams} streams x {chunks}: chunk gap p99 (us)", "gap_p99", "{:.0f}", "diff"),
        ("proxy CPU per stream (us)", "cpu_stream", "{:.0f}", "ratio"),
        (f"proxy CPU per chunk: (stream - request) / {chunks} (us)", "cpu_chunk", "{:.1f}",
         "ratio"),
        (f"proxy RSS peak, {streams} streams (MB)", "rss_mb", "{:.1f}", "ratio"),
        (f"proxy anon RSS peak, {streams} streams (MB)", "anon_mb", "{:.1f}", "ratio"),
    ]
    def added(n):
        """What <n> adds over direct, at one request at a time and at RATE req/s."""
        for k, base in (("serial", "direct"), ("rate", "direct")):
            for q in ("p50", "p99"):
                v, d = med(n, f"{k}_{q}"), med(base, f"{k}_{q}")
                res.setdefault(n, {})[f"{'' if k == 'serial' else 'rate_'}added_{q}"] = (
                    [v - d] if v is not None and d is not None else [])
    for n in names:
        cs, cr = med(n, "cpu_stream"), med(n, "cpu_req")
        # what a relayed chunk costs beyond the request it belongs to
        res[n]["cpu_chunk"] = [(cs - cr) / chunks] if cs is not None and cr is not None else []
        if n != "direct":
            added(n)
    cols = ["direct"] + [c for c in CELLS if c in names] + ["nginx"]
    if "gwd" not in cols:
        cols.insert(1, "gwd")  # an empty column, so that the comparison has its operand
    table = [["scenario"] + cols + ["gwd vs nginx"]]
    for label, k, fmt, cmp in rows:
        line = [label]
        vals = {}
        for c in cols:
            v = med(c, k) if c in names else None
            vals[c] = v
            line.append(fmt.format(v) if v is not None else "-")
        line.append(compare(vals["gwd"], vals["nginx"], cmp))
        table.append(line)

    # admission: gwd+adm against gwd, both measured in the same rounds
    adm_table = None
    if "gwd" in names and "gwd+adm" in names:
        g50, a50 = med("gwd", "serial_p50"), med("gwd+adm", "serial_p50")
        g99, a99 = med("gwd", "serial_p99"), med("gwd+adm", "serial_p99")
        adm_rows = [
            ("admission: 1 conn latency p50 (us)", g50, a50, "{:.0f}", "diff"),
            ("admission: 1 conn latency p99 (us)", g99, a99, "{:.0f}", "diff"),
            ("admission: added p50 vs gwd (us)", None, a50 - g50, "{:+.0f}", None),
            ("admission: added p99 vs gwd (us)", None, a99 - g99, "{:+.0f}", None),
            (f"admission: {RATE} req/s latency p50 (us)", med("gwd", "rate_p50"),
             med("gwd+adm", "rate_p50"), "{:.0f}", "diff"),
            (f"admission: {RATE} req/s latency p99 (us)", med("gwd", "rate_p99"),
             med("gwd+adm", "rate_p99"), "{:.0f}", "diff"),
            ("admission: 64 conns throughput (req/s)", med("gwd", "rps"),
             med("gwd+adm", "rps"), "{:.0f}", "pct"),
            ("admission: proxy CPU per request (us)", med("gwd", "cpu_req"),
             med("gwd+adm", "cpu_req"), "{:.1f}", "ratio"),
        ]
        adm_table = [["scenario", "gwd", "gwd+adm", "gwd+adm vs gwd"]]
        for label, g, v, fmt, cmp in adm_rows:
            adm_table.append([label, fmt.format(g) if g is not None else "-",
                              fmt.format(v) if v is not None else "-",
                              compare(v, g, cmp) if cmp else "-"])
        if "pinned_p50" in res["gwd"]:
            pg50, pa50 = med("gwd", "pinned_p50"), med("gwd+adm", "pinned_p50")
            pd = sorted(b - x for x, b in zip(res["gwd"]["pinned_p50"],
                                              res["gwd+adm"]["pinned_p50"]))
            for label, g, v, fmt, cmp in [
                    ("admission, pinned: 1 conn latency p50 (us)", pg50, pa50, "{:.0f}",
                     "diff"),
                    ("admission, pinned: 1 conn latency p99 (us)", med("gwd", "pinned_p99"),
                     med("gwd+adm", "pinned_p99"), "{:.0f}", "diff"),
                    ("admission, pinned: added p50 vs gwd, median of pairs (us)", None,
                     statistics.median(pd), "{:+.1f}", None)]:
                adm_table.append([label, fmt.format(g) if g is not None else "-",
                                  fmt.format(v), compare(v, g, cmp) if cmp else "-"])
        d = sorted(b - x for x, b in zip(res["gwd"]["serial_p50"],
                                         res["gwd+adm"]["serial_p50"]))
        q = statistics.quantiles(d, n=4) if len(d) > 1 else [d[0], d[0], d[0]]
        notes.append(f"admission p50 minus gwd p50 over the {len(d)} paired slices (us): "
                     f"median {q[1]:+.0f}, quartiles {q[0]:+.0f}..{q[2]:+.0f}, "
                     f"range {d[0]:+.0f}..{d[-1]:+.0f}")
        if adm_bad:
            notes.append("ADMISSION CHECK FAILED, the gwd+adm figures do not measure "
                         "admission: " + "; ".join(adm_bad))
        else:
            notes.append(f"admission checked: the overview of gwd+adm shows its "
                         f"{oks['gwd+adm']} requests charged to all {len(ADM_LIMITS)} "
                         f"limits (none reached), every key permit returned, and each "
                         f"counted in the quota windows of one of its {ADM_CREDS} "
                         f"credentials (every lease settled)")

    # pinned: gwd, gwd+adm and nginx with one placement (PINNED_TPUT_RUNS above)
    pin_table = None
    if med("gwd", "pinned_cpu") is not None and med("nginx", "pinned_cpu") is not None:
        pin_table = [["scenario", "gwd", "gwd+adm", "nginx", "gwd vs nginx",
                      "gwd+adm vs gwd"]]
        for label, k, fmt, cmp in [
                ("pinned, 1 conn: latency p50 (us)", "pinned_p50", "{:.0f}", "diff"),
                ("pinned, 1 conn: latency p99 (us)", "pinned_p99", "{:.0f}", "diff"),
                ("pinned, 64 conns: throughput (req/s)", "pinned_rps", "{:.0f}", "pct"),
                ("pinned: proxy CPU per request (us)", "pinned_cpu", "{:.1f}", "ratio")]:
            g, ad, ng = med("gwd", k), med("gwd+adm", k), med("nginx", k)
            pin_table.append([label] + [fmt.format(v) if v is not None else "-"
                                        for v in (g, ad, ng)]
                             + [compare(g, ng, cmp), compare(ad, g, cmp)])
        pin_table.append(["pinned: proxy CPU per request, median of the runs' ratios", "-",
                          "-", "-", run_ratio("gwd", "nginx", "pinned_cpu"),
                          run_ratio("gwd+adm", "gwd", "pinned_cpu")])
        runs = [f"{n} " + " ".join(f"{v:.1f}" for v in res[n]["pinned_cpu"])
                for n in ("nginx", "gwd", "gwd+adm") if res.get(n, {}).get("pinned_cpu")]
        notes.append("noise: pinned 64 conns proxy CPU per request in each run (us): "
                     + "; ".join(runs))

    # pinned, the converted paths against the splice of the client's shape (PINNED_CONV)
    conv_table = None
    conv = tuple(n for pair in PINNED_PAIRS for n in pair[::-1])  # each splice, its cell
    if all(med(n, "pinned_cpu") is not None for n in conv):
        conv_table = [["scenario", *conv] + [f"{c} vs {b}" for c, b in PINNED_PAIRS]]
        for label, k, fmt, cmp in [
                ("pinned, converted: 64 conns throughput (req/s)", "pinned_rps", "{:.0f}",
                 "pct"),
                ("pinned, converted: proxy CPU per request (us)", "pinned_cpu", "{:.1f}",
                 "ratio")]:
            conv_table.append([label] + [fmt.format(med(n, k)) for n in conv]
                              + [compare(med(c, k), med(b, k), cmp) for c, b in PINNED_PAIRS])
        conv_table.append(["pinned, converted: proxy CPU per request, median of the runs' "
                           "ratios"] + ["-"] * len(conv)
                          + [run_ratio(c, b, "pinned_cpu") for c, b in PINNED_PAIRS])
        notes.append("noise: pinned 64 conns proxy CPU per request in each run, converted "
                      "paths (us): " + "; ".join(
                          f"{n} " + " ".join(f"{x:.1f}" for x in res[n]["pinned_cpu"])
                          for n in PINNED_CONV))

    h2_table = None
    if med("gwd", "h2_rps") is not None:
        h2_table = [["scenario", "gwd", "nginx", "gwd vs nginx"]]
        for label, k, fmt, cmp in [
                (f"HTTP/2, {H2_CONNS} conns x {H2_STREAMS} streams: throughput (req/s)",
                 "h2_rps", "{:.0f}", "pct"),
                ("HTTP/2: proxy CPU per request (us)", "h2_cpu", "{:.1f}", "ratio"),
                (f"HTTP/1.1 (h2load --h1), {H1_CONNS} conns: throughput (req/s)", "h1_rps",
                 "{:.0f}", "pct"),
                ("HTTP/1.1 (h2load --h1): proxy CPU per request (us)", "h1_cpu", "{:.1f}",
                 "ratio"),
                (f"RSS per idle HTTP/2 connection, {IDLE_CONNS} held (KB)", "h2_idle_kb",
                 "{:.1f}", "ratio"),
                (f"RSS per idle Responses WebSocket, {IDLE_CONNS} held (KB)", "ws_idle_kb",
                 "{:.1f}", None)]:
            g, ng = med("gwd", k), med("nginx", k)
            h2_table.append([label, fmt.format(g) if g is not None else "-",
                             fmt.format(ng) if ng is not None else "-",
                             compare(g, ng, cmp) if cmp else "-"])

    w2_table = None
    if med("gwd" + W2, "rps") is not None:
        w2_table = [["scenario", "gwd", "gwd+adm", "nginx", "gwd vs nginx",
                     "gwd+adm vs gwd"]]
        for n in ("gwd" + W2, "gwd+adm" + W2, "nginx" + W2):
            added(n)
        for label, k, fmt, cmp in [
                ("2 workers, 1 conn: latency p50 (us)", "serial_p50", "{:.0f}", "diff"),
                ("2 workers, 1 conn: latency p99 (us)", "serial_p99", "{:.0f}", "diff"),
                ("2 workers, 1 conn: added p50 vs direct (us)", "added_p50", "{:+.0f}", "diff"),
                ("2 workers, 1 conn: added p99 vs direct (us)", "added_p99", "{:+.0f}", "diff"),
                (f"2 workers, {RATE} req/s: added p50 vs direct (us)", "rate_added_p50",
                 "{:+.0f}", "diff"),
                (f"2 workers, {RATE} req/s: added p99 vs direct (us)", "rate_added_p99",
                 "{:+.0f}", "diff"),
                ("2 workers, 64 conns: throughput (req/s)", "rps", "{:.0f}", "pct"),
                ("2 workers: proxy CPU per request (us)", "cpu_req", "{:.1f}", "ratio")]:
            g, ad, ng = med("gwd" + W2, k), med("gwd+adm" + W2, k), med("nginx" + W2, k)
            w2_table.append([label] + [fmt.format(v) if v is not None else "-"
                                       for v in (g, ad, ng)]
                            + [compare(g, ng, cmp), compare(ad, g, cmp)])
        w2_table.append(["2 workers: proxy CPU per request, median of the rounds' ratios",
                         "-", "-", "-", run_ratio("gwd" + W2, "nginx" + W2, "cpu_req"),
                         run_ratio("gwd+adm" + W2, "gwd" + W2, "cpu_req")])

    spread = [f"{n} {min(res[n]['serial_p50']):.0f}..{max(res[n]['serial_p50']):.0f}"
              for n in names if res[n].get("serial_p50")]
    notes.append("noise: 1 conn p50 range over the runs (us): " + ", ".join(spread))
    # each round's figure, in the order of the rounds: a column whose median sits apart
    # from its neighbours' shows here whether one round or all of them put it there
    rounds_cpu = [f"{n} " + " ".join(f"{v:.1f}" for v in res[n]["cpu_req"])
                  for n in names if res[n].get("cpu_req")]
    notes.append("noise: 64 conns proxy CPU per request in each round (us): "
                 + "; ".join(rounds_cpu))
    rounds_w2 = [f"{n} " + " ".join(f"{v:.1f}" for v in res[n]["cpu_req"])
                 for n in res if n.endswith(W2) and res[n].get("cpu_req")]
    if rounds_w2:
        notes.append("noise: two workers, 64 conns proxy CPU per request in each round (us): "
                     + "; ".join(rounds_w2))
    notes.append(f"noise: other work on the machine took {other:.0f} CPU-seconds during the "
                 f"rounds ({100.0 * other / max(1e-9, elapsed * os.cpu_count()):.0f}% of "
                 f"{os.cpu_count()} CPUs for {elapsed:.0f} s)")
    for n in names + [n for n in errs if n not in names]:
        if errs[n]:
            notes.append(f"{n}: {errs[n]} requests were not answered 2xx in full (figures "
                         f"include them)")
    if path_bad:
        notes.append("PATH CHECK FAILED, a column does not measure what it names: "
                     + "; ".join(path_bad))
    head = (f"rounds {a.rounds} (median), serial {n_serial} requests (after "
            f"{SERIAL_WARMUP} left out), {RATE} req/s: "
            f"{RATE_N // (4 if a.quick else 1)} requests on a fixed schedule over "
            f"{RATE_CONNS} connections (after {RATE_WARMUP} on each left out; "
            f"{', '.join(RATE_TARGETS)}), throughput {n_tput} "
            f"requests on 64 connections, {streams} streams of {chunks} chunks every "
            f"{interval} ms after a 20 ms ttft; {os.cpu_count()} CPUs; {elapsed:.0f} s; "
            + "; ".join(f"{c}: {CELLS[c][2]}" for c in cols if c in CELLS and c in names)
            + "; direct and nginx are sent the Chat shape (a plain proxy relays any body)")
    adm_head = (f"gwd+adm: the same gwd config plus key and provider max_concurrent "
                f"{ADM_SLOTS}, key limits "
                + ", ".join(f"{per} {m} {v:.0f}" + (" USD" if m == "cost" else "")
                            for per, m, v in ADM_LIMITS)
                + f", and {ADM_CREDS} upstream credentials with quota windows "
                + ", ".join(f"{w} {v:.0e}" for w, v in ADM_QUOTA)
                + f" (mock-model priced {ADM_PRICE[0]:g} USD input, {ADM_PRICE[1]:g} USD "
                f"output per 1M tokens); scenarios 1-3 in the same rounds as gwd, the 1-connection "
                f"runs of both in {SLICES} alternated slices of {n_serial // SLICES} requests "
                f"(each after {SERIAL_WARMUP} left out), pooled into one histogram a round; "
                f"pinned: after the rounds, both gwds on the last CPU and the load and upstream "
                f"on the first, {4 if a.quick else PINNED_SLICES} alternated runs of "
                f"{PINNED_N} requests each")
    h2_head = (f"HTTP/2: h2load (nghttp2-client) sends {n_h2} non-streamed Chat requests per "
               f"run, {1 if a.quick else 3} runs each (median), gwd in cleartext with prior "
               f"knowledge on its plain port, nginx on a `listen ... http2` port; HTTP/1.1 the "
               f"same with h2load --h1; idle connections: preface and SETTINGS sent (a "
               f"WebSocket: the upgrade answered 101; gwd only), the proxy's RSS growth "
               f"divided by {IDLE_CONNS}")
    w2_head = (f"two workers: gwd with `workers: 2` (gwd+adm: the admission config above), "
               f"nginx with a master and two worker processes (CPU: all three); "
               f"{1 if a.quick else W2_ROUNDS} alternated rounds of the 1-connection "
               f"({n_serial} requests) and {RATE} req/s runs, after the one-worker rounds, "
               f"then {1 if a.quick else W2_TPUT_ROUNDS} alternated rounds of the "
               f"64-connection runs ({n_tput} requests) back to back; medians, and the "
               f"median of the rounds' own ratios; added latency against direct's figures "
               f"above")
    pin_head = (f"pinned: every thread of the proxy on the last CPU, the load and the "
                f"upstream on the first (the same for gwd, gwd+adm and nginx, one worker "
                f"each), after the rounds: {4 if a.quick else PINNED_SLICES} alternated "
                f"1-connection runs of {PINNED_N} requests (after {SERIAL_WARMUP} left out), "
                f"then {2 if a.quick else PINNED_TPUT_RUNS} alternated 64-connection runs of "
                f"{n_tput} requests in the order {', '.join(PINNED_ORDER)}, then reversed; "
                f"medians, and the median of the runs' own ratios")
    conv_head = (f"pinned, converted: the same placement, {', '.join(PINNED_CONV)} in the "
                 f"alternated 64-connection runs, each converted cell right beside its splice "
                 f"({2 if a.quick else PINNED_TPUT_RUNS} each); medians, and the median of the "
                 f"runs' own ratios")
    print("\n".join(fmt_table(table)))
    if w2_table:
        print()
        print("\n".join(fmt_table(w2_table)))
    if adm_table:
        print()
        print("\n".join(fmt_table(adm_table)))
    if pin_table:
        print()
        print("\n".join(fmt_table(pin_table)))
    if conv_table:
        print()
        print("\n".join(fmt_table(conv_table)))
    if h2_table:
        print()
        print("\n".join(fmt_table(h2_table)))
    print(head)
    if w2_table:
        print(w2_head)
    if adm_table:
        print(adm_head)
    if pin_table:
        print(pin_head)
    if conv_table:
        print(conv_head)
    if h2_table:
        print(h2_head)
    for note in notes:
        print("note: " + note.splitlines()[0])

    md = ["# gw benchmark", "", head, ""] + md_table(table) + [""]
    if w2_table:
        md += [w2_head, ""] + md_table(w2_table) + [""]
    if adm_table:
        md += [adm_head, ""] + md_table(adm_table) + [""]
    if pin_table:
        md += [pin_head, ""] + md_table(pin_table) + [""]
    if conv_table:
        md += [conv_head, ""] + md_table(conv_table) + [""]
    if h2_table:
        md += [h2_head, ""] + md_table(h2_table) + [""]
    for note in notes:
        md.append("- " + note.splitlines()[0])
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write("\n".join(md) + "\n")
    print(f"bench: wrote {a.out}", file=sys.stderr)
    if adm_bad or path_bad:
        raise SystemExit("bench: " + "; ".join(
            (["admission check failed: " + "; ".join(adm_bad)] if adm_bad else [])
            + (["path check failed: " + "; ".join(path_bad)] if path_bad else [])))


if __name__ == "__main__":
    main()
