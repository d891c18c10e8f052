# SPDX-License-Identifier: MIT
# tests/e2e/test_reload_stress.py - issue 12 point 2: 50 reloads through
# POST /control/v1/reload while 100 streams run. The config alternates between two files
# that add and remove a provider the streams do not use; each answer must name exactly
# that change. Every stream must end complete and byte-exact (modulo "id" and "created")
# against what gwbench sends for the same request, and afterwards no provider slot, key
# permit or waiter may be left. The provider allows 75 streams at once, so 25 wait for a
# slot during the first reloads and get the first wave's slots during later ones.
# Run before resolving under the sanitizer builds too (GW_BIN=build/<asan|tsan>/bin,
# TSAN_OPTIONS as tools/test.sh sets them); gwd must exit 0 after SIGTERM.

import re
import shutil
import threading
import time

from gwtest import (ALICE_KEY, UP_KEY_A, bearer, chat_body, config, control_post,
                    http_request, overview, provider, sha256_hex, wait_until, write_config)

STREAMS = 100
RELOADS = 50
SLOTS = 75  # the provider's max_concurrent: STREAMS - SLOTS wait for a slot
# Each stream takes about WAVE_SECS; the reloads are spread over about 1.5 waves.
CHUNKS, INTERVAL_MS = 40, 100
WAVE_SECS = CHUNKS * INTERVAL_MS / 1000
PACE = {"x-bench-chunks": str(CHUNKS), "x-bench-interval-ms": str(INTERVAL_MS)}


def _normalize(raw):
    """Response bytes with the per-response fields ("id", "created") blanked out."""
    raw = re.sub(rb'"id"\s*:\s*"[^"]*"', b'"id":"-"', raw)
    return re.sub(rb'"created"\s*:\s*[0-9]+', b'"created":0', raw)


def _entry(items, name):
    return next(i for i in items if i["name"] == name)


def test_fifty_reloads_while_a_hundred_streams_run(tmp_path, bench, gwd):
    b = bench()
    base = config(tmp_path, [provider("up", b, models=["gpt-test"], max_concurrent=SLOTS)],
                  clients=[{"name": "alice", "key_sha256": sha256_hex(ALICE_KEY),
                            "max_concurrent": STREAMS}],
                  failover={"slot_wait_secs": 60})
    with_spare = dict(base)
    with_spare["providers"] = base["providers"] + [provider("spare", b, models=["spare-model"])]
    file_a = write_config(tmp_path, base, "a.yaml")
    file_b = write_config(tmp_path, with_spare, "b.yaml")
    g = gwd(base)
    path = g.config_path

    body = chat_body(stream=True, include_usage=True)
    results = [None] * STREAMS

    def run(i):
        h = bearer(ALICE_KEY)
        h.update(PACE)
        results[i] = http_request(g.port, "POST", "/v1/chat/completions", body, h, timeout=120)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(STREAMS)]
    for t in threads:
        t.start()

    def all_admitted():
        o = overview(g)
        up = _entry(o["providers"], "up")
        return up["in_flight"] == SLOTS and up["waiting"] == STREAMS - SLOTS

    wait_until(all_admitted, timeout=30, what=f"{SLOTS} streams in flight, the rest waiting")

    seen = []  # (in_flight, waiting) of "up" after each reload
    started = time.monotonic()
    for i in range(RELOADS):
        adding = i % 2 == 0
        shutil.copyfile(file_b if adding else file_a, path)
        r = control_post(g, "/control/v1/reload", {})
        assert r.status == 200, f"reload {i}: {r!r}"
        ans = r.json()
        assert ans["reloaded"] is True, ans
        prov = ans["changed"]["providers"]
        assert (prov["added"], prov["removed"], prov["changed"]) == (
            (["spare"], [], []) if adding else ([], ["spare"], [])), f"reload {i}: {ans}"
        assert ans["changed"]["groups"] == {"added": [], "removed": [], "changed": []}
        assert ans["changed"]["clients"] == {"added": [], "removed": [], "changed": []}
        assert ans["settings"] == []
        o = overview(g)
        assert [p["name"] for p in o["providers"]] == (["up", "spare"] if adding else ["up"])
        up = _entry(o["providers"], "up")
        seen.append((up["in_flight"], up["waiting"]))
        # Pacing, not synchronisation: spreads the reloads over both waves of streams
        # (the first, with STREAMS - SLOTS waiting; the hand-off of its slots; the second).
        time.sleep(WAVE_SECS * 1.5 / RELOADS)
    print(f"{RELOADS} reloads in {time.monotonic() - started:.2f} s: {seen}")  # with -s

    # The reloads ran while streams were in flight: with the second wave waiting, and
    # after it got the first wave's slots.
    assert seen[0] == (SLOTS, STREAMS - SLOTS), seen
    assert any(w == 0 and 0 < f for f, w in seen), seen

    for t in threads:
        t.join(120)
    assert all(not t.is_alive() for t in threads), "a stream did not end"

    # what gwbench sends for the same request (gwd passes the x-bench headers on)
    sent = b.last_body_bytes()
    h = {"Authorization": f"Bearer {UP_KEY_A}", "x-bench-chunks": str(CHUNKS),
         "x-bench-interval-ms": "0"}
    direct = http_request(b.port, "POST", "/v1/chat/completions", sent, h)
    assert direct.status == 200, direct
    want = _normalize(direct.body)
    assert want.count(b'"content"') >= CHUNKS
    bad = [(i, r) for i, r in enumerate(results)
           if r is None or r.status != 200 or r.incomplete or _normalize(r.body) != want]
    assert not bad, f"{len(bad)} streams differ; first: {bad[0]!r}\nwant: {want[:400]!r}"

    def nothing_held():
        o = overview(g)
        up = _entry(o["providers"], "up")
        alice = _entry(o["keys"], "alice")
        return (up["in_flight"], up["waiting"], alice["in_flight"], alice["waiting"]) == (
            0, 0, 0, 0) and o

    o = wait_until(nothing_held, what="every slot and key permit released")
    assert _entry(o["keys"], "alice")["max_concurrent"] == STREAMS
