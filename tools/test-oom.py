#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# tools/test-oom.py - what `make test-oom` runs (STYLE.md 11): each unit test again,
# with its allocations made to fail one at a time, in an ASan build. Every run must end
# cleanly: the test may fail its assertions (they expect success), but the process must
# not crash, trip ASan or UBSan, hit a GW_ASSERT, hang, or leak.
#
# How (tests/unit/oom.c, linked into every unit binary, does the test side):
# 1. each binary lists its tests (GW_OOM_LIST); each test runs alone (GW_OOM_TEST) with
#    GW_OOM_FAIL=0: the baseline, which must pass cleanly, counts its allocations and
#    records the stack of each (GW_OOM_SITES);
# 2. the allocations are grouped by site: the same --depth return addresses (the
#    allocating function and two callers by default), so that a loop's 20000 identical
#    allocations are one site; then GW_OOM_FAIL=k for the first allocation of each site,
#    one run each, at most --cap runs and --budget seconds (from the baseline's time)
#    per test, spread evenly over the sites when there are more;
# 3. leaks: when a test is left by a failed assertion, oom.c runs LeakSanitizer at that
#    moment, while the test's frame still holds its objects, so what it reports was
#    lost by the code under test; otherwise LSan runs at exit.
# Runs go without symbols (fast); failing runs are grouped by their first frames, and
# one run of each group is repeated with symbols and the stack of the failed
# allocation, then grouped again by source line and printed with the command that
# repeats it. A finding whose first frame of gw's sources is in tests/ is marked "in
# the test's own code" (a NULL from its setup used unchecked, threads left running).
# The last line reads "N runs, N clean, N failing (N distinct findings)"; exit 1 on
# any finding.
#
# jansson allocates with malloc, not gw_malloc, so its allocations do not fail unless
# --jansson routes them through gw_malloc (jansson 2.14 itself then crashes in
# json_loadb on some).
#
# usage: tools/test-oom.py BUILD_DIR [--jobs J] [--depth D] [--cap N] [--budget SECS]
#                          [--timeout SECS] [--jansson] [--list] [--quiet] [NAME...]
#   BUILD_DIR  an ASan build (`make MODE=asan O=BUILD_DIR unit-bins`)
#   NAME       only binaries or tests whose name contains one of these
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# allow_user_segv_handler=0: ASan, not cmocka, reports a SEGV (with its stack)
ASAN = "detect_leaks=1:leak_check_at_exit=0:allow_user_segv_handler=0:symbolize=%d"
UBSAN = "print_stacktrace=1:halt_on_error=1:symbolize=%d"
SYMBOLIZER = "/usr/bin/llvm-symbolizer"
JANSSON = False  # --jansson


def env_for(test, k, symbols=False, stack=False, sites=None):
    e = dict(os.environ)
    e.pop("GW_OOM_SITES", None)
    e.pop("GW_OOM_LIST", None)
    if JANSSON:
        e["GW_OOM_JANSSON"] = "1"
    if sites:
        e["GW_OOM_SITES"] = sites
    e["GW_OOM_FAIL"] = str(k)
    e["GW_OOM_TEST"] = test
    e["ASAN_OPTIONS"] = ASAN % (1 if symbols else 0)
    e["UBSAN_OPTIONS"] = UBSAN % (1 if symbols else 0)
    if symbols and os.path.exists(SYMBOLIZER):
        e["ASAN_SYMBOLIZER_PATH"] = SYMBOLIZER
    if stack:
        e["GW_OOM_STACK"] = "1"
    else:
        e.pop("GW_OOM_STACK", None)
    return e


def run(binary, test, k, timeout, symbols=False, stack=False, sites=None):
    """One run: (kind or None for clean, output, seconds, allocations counted)."""
    t0 = time.monotonic()
    try:
        p = subprocess.run([binary], env=env_for(test, k, symbols, stack, sites), cwd=ROOT,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout)
        out = p.stdout.decode("utf-8", "replace")
        rc = p.returncode
    except subprocess.TimeoutExpired as ex:
        out = (ex.stdout or b"").decode("utf-8", "replace")
        return "hang", out, time.monotonic() - t0, None
    secs = time.monotonic() - t0
    m = re.search(r"^gw-oom: allocations=(\d+)", out, re.M)
    n = int(m.group(1)) if m else None
    return classify(out, rc, n), out, secs, n


def classify(out, rc, n):
    if "ERROR: AddressSanitizer" in out:
        return "asan"
    if "ERROR: LeakSanitizer" in out:
        return "leak"
    if "runtime error:" in out:
        return "ubsan"
    if "gw: assertion failed" in out:
        return "assert"
    if "Test failed with exception" in out:
        return "signal"
    if rc < 0:
        return "signal"
    if n is None:
        # the exit hook did not run: the process ended without returning from main
        return "exit"
    if "[==========] 0 test(s) run." in out:
        return "no-test"
    return None


FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ .*?\(([^()]+)\+(0x[0-9a-f]+)\)", re.M)
SRC_FRAME = re.compile(r"^\s*#\d+ 0x[0-9a-f]+ in (\S+) (\S+?):(\d+)", re.M)
UB_LINE = re.compile(r"^(\S+?:\d+):\d+: runtime error: (.*)$", re.M)


def raw_signature(kind, binary, out):
    """Groups unsymbolised runs: the first frames inside the test binary."""
    frames = [off for mod, off in FRAME.findall(out) if mod == binary][:4]
    if kind == "ubsan":
        m = UB_LINE.search(out)
        frames = [m.group(1)] if m else frames
    return (kind, binary, tuple(frames))


def first_report(out):
    """The sanitizer report's part of a symbolised run (the first direct leak only)."""
    lines = out.splitlines()
    start = 0
    for i, l in enumerate(lines):
        if ("ERROR: " in l and "Sanitizer" in l) or "runtime error:" in l or \
                "gw: assertion failed" in l or "Test failed with exception" in l:
            start = i
            break
    body = lines[start:]
    if body and "LeakSanitizer" in body[0]:
        # keep the header and the first "Direct leak" block
        keep, seen = [body[0]], False
        for l in body[1:]:
            if l.startswith("Direct leak") or l.startswith("Indirect leak"):
                if seen:
                    break
                seen = l.startswith("Direct leak")
            if seen:
                keep.append(l)
        body = keep
    return body[:40]


def source_signature(kind, out):
    """Groups symbolised findings across binaries: the first frames in gw's sources."""
    report = "\n".join(first_report(out))
    if kind == "ubsan":
        m = UB_LINE.search(out)
        if m:
            return (kind, m.group(1))
    frames = []
    for fn, path, line in SRC_FRAME.findall(report):
        rel = os.path.relpath(path, ROOT) if os.path.isabs(path) else path
        if rel.startswith("..") or rel in ("core/alloc.c", "tests/unit/oom.c"):
            continue
        frames.append("%s %s:%s" % (fn, rel, line))
        if len(frames) == 3:
            break
    return (kind,) + tuple(frames)


def failed_at(out):
    """The frames of gw's sources where the failed allocation was made."""
    m = out.find("gw-oom: allocation ")
    if m < 0:
        return []
    block = out[m:].split("\n\n")[0]
    frames = []
    for fn, path, line in SRC_FRAME.findall(block):
        rel = os.path.relpath(path, ROOT) if os.path.isabs(path) else path
        if rel.startswith("..") or rel in ("core/alloc.c", "tests/unit/oom.c"):
            continue
        frames.append("%s %s:%s" % (fn, rel, line))
    return frames[:4]


def list_tests(binary, timeout):
    """The tests of a binary, from oom.c's GW_OOM_LIST (which runs none)."""
    e = dict(os.environ)
    e["GW_OOM_LIST"] = "1"
    try:
        p = subprocess.run([binary], env=e, cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout)
    except subprocess.TimeoutExpired:
        return []
    return re.findall(r"^gw-oom: test (\S+)$", p.stdout.decode("utf-8", "replace"), re.M)


def spread(ks, cap):
    if len(ks) <= cap:
        return ks
    if cap == 1:
        return ks[:1]
    return [ks[i] for i in sorted({(i * (len(ks) - 1)) // (cap - 1) for i in range(cap)})]


def baseline(binary, test, timeout, tmp, depth):
    """The test alone, counting: (kind, output, seconds, allocations, the k to fail,
    sites). The k are the first allocation of each site: the same <depth> return
    addresses (the allocator, the allocating function and its callers), so a loop's
    20000 identical allocations are one run."""
    path = os.path.join(tmp, "%s.%s.sites" % (os.path.basename(binary), test))
    kind, out, secs, n = run(binary, test, 0, timeout, sites=path)
    first = {}
    try:
        with open(path) as f:
            for line in f:
                w = line.split()
                if w:
                    first.setdefault(tuple(w[1:1 + depth]), int(w[0]))
        os.unlink(path)
    except OSError:
        pass
    return kind, out, secs, n, sorted(first.values()), len(first)


def main():
    ap = argparse.ArgumentParser(description="make test-oom")
    ap.add_argument("build")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--depth", type=int, default=int(os.environ.get("OOM_DEPTH", "6")),
                    help="return addresses that tell allocation sites apart (default 6: "
                    "the hook, the allocator, the allocating function and 2 callers; "
                    "at most 16; OOM_DEPTH)")
    ap.add_argument("--cap", type=int, default=int(os.environ.get("OOM_CAP", "200")),
                    help="most runs per test (default 200, OOM_CAP)")
    ap.add_argument("--budget", type=float,
                    default=float(os.environ.get("OOM_BUDGET", "15")),
                    help="seconds one test's runs may take, from its baseline time "
                    "(default 15, OOM_BUDGET)")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds before a run counts as a hang (default 60)")
    ap.add_argument("--jansson", action="store_true",
                    help="fail jansson's allocations in turn too (jansson 2.14 crashes in "
                    "json_loadb on some of them)")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--list", action="store_true",
                    help="only list each test's allocations and baseline time")
    a = ap.parse_args()
    global JANSSON
    JANSSON = a.jansson

    tmp = tempfile.mkdtemp(prefix="gw-oom.")
    try:
        return test_oom(a, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_oom(a, tmp):
    started = time.monotonic()
    unit = os.path.join(a.build, "tests", "unit")
    binaries = sorted(os.path.join(d, f) for d, _, fs in os.walk(unit) for f in fs
                      if f.startswith("test_") and os.access(os.path.join(d, f), os.X_OK)
                      and "." not in f)
    if not binaries:
        print("test-oom: no unit binaries in %s (make MODE=asan O=%s unit-bins)"
              % (unit, a.build))
        return 2
    binaries = [os.path.abspath(b) for b in binaries]

    def wanted(b, t=None):
        if not a.names:
            return True
        return any(n in os.path.basename(b) or (t and n in t) for n in a.names)

    # ---- 1: tests and their baselines ----
    findings = {}  # raw signature -> list of (binary, test, k, out)
    tests = []
    with ThreadPoolExecutor(a.jobs) as pool:
        base = {}
        for b in binaries:
            for t in list_tests(b, a.timeout):
                if wanted(b, t):
                    base[(b, t)] = pool.submit(baseline, b, t, a.timeout * 10, tmp, a.depth)
        for (b, t), f in base.items():
            kind, out, secs, n, ks, nsites = f.result()
            if kind is None and not re.search(r"^\[  FAILED  \]", out, re.M):
                tests.append((b, t, n, secs, ks, nsites))
            else:
                kind = kind or "baseline-fails"
                findings.setdefault((kind + " (baseline)", b, (t,)), []).append((b, t, 0, out))

    if a.list:
        for b, t, n, secs, ks, nsites in tests:
            print("%-70s %7d allocations %5d sites %5d k %6.2f s"
                  % (os.path.basename(b) + " " + t, n, nsites, len(ks), secs))
        print("%d tests, %d allocations, %d sites, %d k"
              % (len(tests), sum(x[2] for x in tests), sum(x[5] for x in tests),
                 sum(len(x[4]) for x in tests)))
        return 0

    # ---- 2: the runs ----
    jobs = []
    capped = []
    for b, t, n, secs, ks, _ in tests:
        fit = int(a.budget / max(secs, 0.001))
        chosen = spread(ks, max(1, min(a.cap, fit)))
        if len(chosen) < len(ks):
            capped.append("%s %s (%d of %d sites)" % (os.path.basename(b), t, len(chosen), len(ks)))
        for k in chosen:
            jobs.append((b, t, k, max(a.timeout, 20 * secs)))
    print("test-oom: %d tests, %d allocations at %d sites: %d runs, %d at a time (%.0f s so far)"
          % (len(tests), sum(x[2] for x in tests), sum(len(x[4]) for x in tests), len(jobs),
             a.jobs, time.monotonic() - started), flush=True)
    if capped and not a.quiet:
        print("test-oom: sites spread by --cap/--budget in " + "; ".join(capped), flush=True)
    clean = 0
    unit = os.path.join(os.path.abspath(a.build), "tests", "unit")
    stats = None  # binary, runs, failing, cpu seconds

    def show(st):
        if st and not a.quiet:
            print("test-oom: %-28s %3d tests %6d runs %5d failing %7.1f s"
                  % (os.path.relpath(st[0], unit), sum(1 for x in tests if x[0] == st[0]),
                     st[1], st[2], st[3]), flush=True)

    with ThreadPoolExecutor(a.jobs) as pool:
        futs = [(j, pool.submit(run, j[0], j[1], j[2], j[3])) for j in jobs]
        for (b, t, k, _), f in futs:
            kind, out, secs, _ = f.result()
            if not stats or stats[0] != b:
                show(stats)
                stats = [b, 0, 0, 0.0]
            stats[1] += 1
            stats[3] += secs
            if kind is None:
                clean += 1
                continue
            stats[2] += 1
            findings.setdefault(raw_signature(kind, b, out), []).append((b, t, k, out))
        show(stats)

    # ---- 3: one run of each group again, with symbols ----
    distinct = {}  # source signature -> [runs, example, report, failed_at]
    for sig, runs in findings.items():
        b, t, k, out = runs[0]
        kind = sig[0]
        if k and not kind.endswith("(baseline)") and kind != "hang":
            kind2, out2, _, _ = run(b, t, k, a.timeout * 2, symbols=True, stack=True)
            if kind2 is not None:
                kind, out = kind2, out2
        ss = source_signature(kind, out) if "(baseline)" not in sig[0] else sig
        d = distinct.setdefault(ss, [0, (b, t, k), first_report(out), failed_at(out)])
        d[0] += len(runs)

    for ss, (count, (b, t, k), report, where) in sorted(distinct.items(), key=lambda x: -x[1][0]):
        # The first of gw's frames in the report is the test's own: it used a NULL its
        # setup got, or left threads running; the code under test may be fine.
        own = len(ss) > 1 and str(ss[1]).split(" ")[-1].startswith("tests/")
        print()
        print("FINDING %s%s, %d run%s, e.g. allocation %d of %s in %s"
              % (ss[0], " in the test's own code" if own else "", count,
                 "" if count == 1 else "s", k, t, os.path.relpath(b, ROOT)))
        if where:
            print("  the failed allocation: " + " <- ".join(where))
        print("  again: GW_OOM_TEST=%s GW_OOM_FAIL=%d GW_OOM_STACK=1 ASAN_OPTIONS=%s %s"
              % (t, k, ASAN % 1, os.path.relpath(b, ROOT)))
        for l in report:
            print("  | " + l)

    failing = sum(len(r) for r in findings.values())
    print()
    print("test-oom: %d tests, %.0f s" % (len(tests), time.monotonic() - started))
    print("%d runs, %d clean, %d failing (%d distinct findings)"
          % (len(jobs), clean, failing, len(distinct)))
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
