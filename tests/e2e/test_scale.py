# SPDX-License-Identifier: MIT
# tests/e2e/test_scale.py - what bench/scale.py (many concurrent streams) relies on:
# gwbench upstream's streams_open / streams_open_max in /_bench/stats count the streams
# open at once (over HTTP/1.1 and over h2c, ended by the upstream or cut by the client),
# gwbench load's open loop (--rate) gives each thread its own share of the requests, so
# that with as many connections as requests every request finds an idle connection at
# once (a thread that ticked ahead once took the other's share and queued it behind its
# own busy connections); and gwd listens with the largest accept queue the kernel
# allows (net.core.somaxconn), so a burst of connects waits in the queue instead of
# having SYNs dropped.

import json
import shutil
import subprocess

import pytest

from gwtest import ALICE_KEY, Stream, bearer, binary, chat_body, config, provider


def open_streams(port, n, chunks, interval_ms, path="/v1/chat/completions", key=None):
    """<n> streams held open, each read up to its first content chunk."""
    hdr = {"x-bench-chunks": str(chunks), "x-bench-interval-ms": str(interval_ms)}
    if key:
        hdr.update(bearer(key))
    out = []
    for _ in range(n):
        s = Stream(port, chat_body(stream=True), headers=hdr, path=path)
        assert s.status == 200
        s.next_content()
        out.append(s)
    return out


def test_streams_open_and_its_peak_count_streams_held_at_once(bench):
    b = bench("--quiet")
    st = b.stats()
    assert st["streams_open"] == 0 and st["streams_open_max"] == 0, st

    # two that the upstream ends after 1.5 s, one that the client cuts long before its end
    held = (open_streams(b.port, 2, chunks=2, interval_ms=1500)
            + open_streams(b.port, 1, chunks=2, interval_ms=60000))
    b.wait_stat(lambda s: s["streams_open"] == 3, "three streams open")
    for s in held[:2]:
        assert s.rest()[-1] == "[DONE]"  # ended by the upstream
        s.close()
    held[2].close()  # cut by the client mid-stream
    b.wait_stat(lambda s: s["streams_open"] == 0, "no stream open")

    st = b.stats()
    assert st["streams_open_max"] == 3, st
    assert st["streams_completed"] == 2 and st["streams_aborted"] == 1, st
    # a later, smaller wave leaves the peak where it was
    for s in open_streams(b.port, 1, chunks=1, interval_ms=0):
        s.rest()
        s.close()
    b.wait_stat(lambda s: s["streams_open"] == 0, "no stream open")
    assert b.stats()["streams_open_max"] == 3


def test_streams_open_counts_h2_streams_through_gwd(tmp_path, bench, gwd):
    b = bench("--quiet")
    g = gwd(config(tmp_path, [provider("a", b, http2="on")], server={"workers": 1}))

    held = open_streams(g.port, 4, chunks=2, interval_ms=1500, key=ALICE_KEY)
    b.wait_stat(lambda s: s["streams_open"] == 4, "four h2 streams open")
    st = b.stats()
    assert st["h2_connections"] == 1 and st["h2_max_concurrent_streams"] == 4, st
    for s in held:
        assert s.rest()[-1] == "[DONE]"
        s.close()
    b.wait_stat(lambda s: s["streams_open"] == 0, "no stream open")
    assert b.stats()["streams_open_max"] == 4


@pytest.mark.skipif(not shutil.which("ss"), reason="needs ss (iproute2)")
def test_gwd_listens_with_the_largest_backlog_the_kernel_allows(tmp_path, bench, gwd):
    b = bench("--quiet")
    g = gwd(config(tmp_path, [provider("a", b)], server={"workers": 2}))
    with open("/proc/sys/net/core/somaxconn") as f:
        somaxconn = int(f.read())

    # ss shows a listening socket's backlog in Send-Q: one listener per worker
    out = subprocess.run(["ss", "-ltnH", f"sport = :{g.port}"], stdout=subprocess.PIPE,
                         text=True, check=True).stdout.split("\n")
    backlogs = [int(line.split()[2]) for line in out if line.strip()]

    assert backlogs == [min(somaxconn, 65535)] * 2, (out, somaxconn)


def test_open_loop_gives_every_request_its_own_connection(bench):
    # each stream lasts until its second chunk: a request queued behind another would
    # wait for that; released all at once over two threads
    up = bench("--quiet", "--chunks", 2, "--interval-ms", 1500)
    n = 400

    p = subprocess.run([binary("gwbench"), "load", "--json", "--quiet", "--stream",
                        "--url", f"{up.url}/v1/chat/completions", "--connections", str(n),
                        "--requests", str(n), "--threads", "2", "--rate", "1000000"],
                       capture_output=True, timeout=60)

    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert (s["requests"], s["ok"], s["errors"]) == (n, n, {}), s
    assert s["queued_max"] == 0, s  # no request waited for a connection
    assert up.stats()["streams_open_max"] == n  # all of them open at once
