# SPDX-License-Identifier: MIT
# tests/e2e/test_lifecycle.py - connections and the process: a client gone mid-stream,
# a client too slow to read (backpressure), SIGTERM draining a running stream, rows
# surviving a restart, a refused config, the threads' names.

import os
import re
import signal
import time

from gwtest import (Proc, base_env, binary, chat_body, config, content_of, provider,
                    write_config)


def test_client_disconnect_mid_stream_closes_the_upstream_connection(tmp_path, bench, gwd):
    b = bench("--chunks", 200, "--interval-ms", 50)
    g = gwd(config(tmp_path, [provider("up", b)]))

    s = g.stream(chat_body(stream=True))
    assert s.status == 200
    s.next_content()
    st = b.stats()
    assert st["streams_started"] == 1
    assert st["streams_aborted"] == 0
    s.close()

    # streams_aborted: the peer (gwd) closed the connection of a stream in progress.
    # (connections_closed_by_peer also counts our own /_bench/stats connections.)
    b.wait_stat(lambda x: x["streams_aborted"] >= 1, "gwd to close the upstream connection")
    assert b.stats()["streams_completed"] == 0


def test_rows_survive_a_restart_on_the_same_store(tmp_path, bench, gwd, restart):
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b)]))
    ids = []
    for stream in (False, True):
        r = g.chat(chat_body(stream=stream))
        assert r.status == 200, r
        ids.append(r.headers["x-request-id"])
    before = {i: g.wait_row(i) for i in ids}

    g2 = restart(g)

    for i in ids:
        row = g2.wait_row(i)
        assert row["usage"] == before[i]["usage"]
        assert row["client"] == "alice"
    # the restarted gateway keeps adding rows next to the old ones
    r = g2.chat()
    assert r.status == 200
    g2.wait_row(r.headers["x-request-id"])
    got = [row["id"] for row in g2.traffic()]
    assert set(ids) <= set(got)


def test_sigterm_lets_a_running_stream_finish(tmp_path, bench, gwd, restart):
    b = bench("--chunks", 10, "--interval-ms", 100, "--text", "t ")
    g = gwd(config(tmp_path, [provider("up", b)], server={"drain_secs": 20}))

    s = g.stream(chat_body(stream=True))
    assert s.status == 200
    first, _ = s.next_content()
    g.signal(signal.SIGTERM)
    rest = s.rest()

    contents = [first] + [content_of(e) for e in rest if content_of(e)]
    assert contents == ["t "] * 10, rest
    assert rest[-1] == "[DONE]"
    rc = g.wait_exit()
    assert rc == 0, g.log()

    g2 = restart(g)
    row = g2.wait_row(s.headers["x-request-id"])
    assert row["status"] == 200
    assert row["usage"]["output_tokens"] == 10


def test_threads_are_named_for_top_and_perf(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b)]))  # workers: 2
    assert g.chat(chat_body()).status == 200

    task = f"/proc/{g.p.pid}/task"
    names = sorted(open(f"{task}/{t}/comm").read().strip() for t in os.listdir(task))
    # main keeps the program's name; each thread of its own says what it is
    for want in ("gwd", "gw-worker-0", "gw-worker-1", "gw-store", "gw-log", "gw-control"):
        assert want in names, names


def test_gwd_refuses_to_start_on_a_bad_config(tmp_path, bench):
    b = bench()
    cfg = config(tmp_path, [provider("up", b, dialect="klingon")])
    p = Proc([binary("gwd"), "-c", str(write_config(tmp_path, cfg))], base_env(), "gwd")
    rc = p.wait_exit()
    assert rc not in (0, -9), p.log()
    text = p.err.text() + "\n" + p.out.text()
    assert re.search(r"providers\[0\] \(up\)\.dialect: .*klingon.* \(config\.[a-z_.]+\) ", text), text


def _rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_slow_client_holds_back_the_upstream_and_memory_stays_bounded(tmp_path, bench, gwd):
    # A client that stops reading a long stream: gwd stops reading the upstream once its
    # own output queue is full (backpressure), so gwd's memory does not grow with the
    # answer (without it gwd would take in all ~60 MB at loopback speed within the
    # window). Then the client reads everything, byte for byte as the upstream sent it.
    # (gwbench counts a stream complete once it has queued it, so its counters cannot
    # show the hold-back; gwd's memory can.)
    chunks, text = 3000, "x" * 20000  # ~60 MB of events, far beyond every socket buffer
    b = bench("--chunks", chunks, "--text", text)
    g = gwd(config(tmp_path, [provider("up", b)]))
    rss0 = _rss_kb(g.p.pid)

    s = g.stream(chat_body(stream=True))
    assert s.status == 200
    s.next_content()
    b.wait_stat(lambda x: x["streams_completed"] == 1, "the upstream to send all it has")
    # An observation window for a negative property (nothing to wait for): the client
    # reads nothing, and gwd must stay small.
    deadline = time.monotonic() + 1.5
    peak = rss0
    while time.monotonic() < deadline:
        peak = max(peak, _rss_kb(g.p.pid))
        time.sleep(0.1)
    assert peak - rss0 < 24 * 1024, f"gwd grew by {peak - rss0} KB while the client stalled"

    # Read the rest in bulk (Stream.rest() keeps a copy of every line: too slow for 60 MB).
    rest = s.resp.read()
    assert rest.rstrip().endswith(b"data: [DONE]")
    assert rest.count(b'"content":"' + text.encode() + b'"') == chunks - 1  # one read above
