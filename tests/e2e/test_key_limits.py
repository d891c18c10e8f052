# SPDX-License-Identifier: MIT
# tests/e2e/test_key_limits.py - clients[].limits (DESIGN.md 8): a calendar limit used
# up refuses with 429, Retry-After to the period's end, x-should-retry: false and the
# OpenAI type insufficient_quota; a rolling limit answers 429 with the exact
# Retry-After when it cannot be waited for; refused requests do not count; totals are
# rebuilt from the store after a restart.

import datetime
import http.client
import json
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.request

import pytest

from gwtest import (CONTROL_TOKEN, Lines, base_env, binary, chat_body, config, http_request,
                    provider, sha256_hex, wait_until)

KEY = "limited-key"


def limited(tmp_path, b, limits, **failover):
    return config(tmp_path, [provider("up", b)],
                  clients=[{"name": "lim", "key_sha256": sha256_hex(KEY), "limits": limits}],
                  failover=failover or None)


def test_day_request_limit_refuses_until_midnight_and_survives_a_restart(tmp_path, bench,
                                                                         gwd, restart):
    b = bench()
    g = gwd(limited(tmp_path, b, [{"per": "day", "requests": 2}]))
    for _ in range(2):
        r = g.chat(chat_body(), key=KEY)
        assert r.status == 200, r
    r = g.chat(chat_body(), key=KEY)
    assert r.status == 429, r
    assert r.headers["x-gw-code"] == "gw.key_limit.requests_per_period"
    assert r.headers["x-should-retry"] == "false"
    assert 1 <= int(r.headers["retry-after"]) <= 86400
    err = r.json()["error"]
    assert err["type"] == "insufficient_quota" and err["code"] == "insufficient_quota"
    assert err["gw_code"] == "gw.key_limit.requests_per_period"
    # Retry-After runs to the day's end, the reset the key view shows
    day = [x for x in [k for k in g.control("/control/v1/overview").json()["keys"]
                       if k["name"] == "lim"][0]["limits"] if x["per"] == "day"][0]
    reset = datetime.datetime.fromisoformat(day["resets_at"].replace("Z", "+00:00")).timestamp()
    assert abs(int(r.headers["retry-after-ms"]) / 1000 - (reset - time.time())) < 10
    assert b.stats()["requests"] == 2  # the refused one never reached the upstream
    row = g.wait_row(r.headers["x-request-id"])
    assert row["status"] == 429 and row["attempts"] == []
    key = [k for k in g.control("/control/v1/overview").json()["keys"] if k["name"] == "lim"][0]
    lim = [x for x in key["limits"] if x["per"] == "day" and x["measure"] == "requests"][0]
    assert (lim["used"], lim["max"], lim["reached"]) == (2, 2, True)
    assert lim["resets_at"] is not None

    # the day's two requests are rebuilt from the store: still refused after a restart
    g2 = restart(g)
    r = g2.chat(chat_body(), key=KEY)
    assert r.status == 429 and r.headers["x-gw-code"] == "gw.key_limit.requests_per_period"


def test_rolling_minute_limit_answers_the_exact_retry_after(tmp_path, bench, gwd):
    b = bench()
    g = gwd(limited(tmp_path, b, [{"per": "minute", "requests": 1}], slot_wait_secs=0))
    r = g.chat(chat_body(), key=KEY)
    assert r.status == 200, r
    r = g.chat(chat_body(), key=KEY)
    assert r.status == 429, r
    assert r.headers["x-gw-code"] == "gw.key_limit.requests_rolling"
    assert r.headers["x-should-retry"] == "true"
    ms = int(r.headers["retry-after-ms"])
    assert 0 < ms <= 60000
    assert int(r.headers["retry-after"]) == (ms + 999) // 1000
    assert r.json()["error"]["type"] == "rate_limit_error"
    assert b.stats()["requests"] == 1


def test_rolling_minute_limit_is_waited_for_within_the_deadline(tmp_path, bench, gwd):
    # DESIGN.md 8: a rolling limit used up makes the request wait, within slot_wait_secs,
    # until enough usage has left the window (here: the first request, up to 60 s).
    b = bench()
    g = gwd(limited(tmp_path, b, [{"per": "minute", "requests": 1}], slot_wait_secs=70))
    r = g.chat(chat_body(), key=KEY)
    assert r.status == 200, r

    r = http_request(g.port, "POST", "/v1/chat/completions", chat_body(),
                     headers={"Authorization": f"Bearer {KEY}"}, timeout=90)

    assert r.status == 200, r
    row = g.wait_row(r.headers["x-request-id"])
    assert row["queued_ms"] > 0 and [a["outcome"] for a in row["attempts"]] == ["ok"], row
    assert b.stats()["requests"] == 2


def test_requests_that_never_reach_an_upstream_do_not_count(tmp_path, bench, gwd):
    # DESIGN.md 8: a request counts only if some hop was sent; refusals (a bad body, a
    # model nobody offers) give back what they reserved.
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b, models=["m1"])],
                   clients=[{"name": "lim", "key_sha256": sha256_hex(KEY),
                             "limits": [{"per": "day", "requests": 2}]}]))
    assert g.chat(chat_body(model="m1"), key=KEY).status == 200
    assert g.chat('{"model": "", "messages": []}', key=KEY).status == 400
    assert g.chat(chat_body(model="nobody-offers-this"), key=KEY).status == 404
    assert g.chat(chat_body(model="m1"), key=KEY).status == 200  # still the 2nd counted
    r = g.chat(chat_body(model="m1"), key=KEY)
    assert r.status == 429 and r.headers["x-gw-code"] == "gw.key_limit.requests_per_period"
    assert b.stats()["requests"] == 2


def test_a_busy_refusal_gives_its_reservation_back(tmp_path, bench, gwd):
    # The key gate and the usage limit admitted the request (its reservation counted),
    # then every upstream was full: the 429 gw.busy_all gives the request back.
    b = bench("--chunks", 5, "--interval-ms", 100)
    g = gwd(config(tmp_path, [provider("up", b, max_concurrent=1)],
                   clients=[{"name": "lim", "key_sha256": sha256_hex(KEY),
                             "limits": [{"per": "day", "requests": 2}]}],
                   failover={"slot_wait_secs": 0}))
    s = g.stream(chat_body(stream=True), key=KEY)  # 1st counted, holds the only slot
    assert s.status == 200
    s.next_content()
    r = g.chat(chat_body(), key=KEY)
    assert r.status == 429 and r.headers["x-gw-code"] == "gw.busy_all"
    s.rest()
    b.wait_stat(lambda x: x["streams_completed"] == 1, "the first stream to end")
    r = g.chat(chat_body(), key=KEY)  # the 2nd counted request: the busy one was given back
    assert r.status == 200, r
    r = g.chat(chat_body(), key=KEY)
    assert r.status == 429 and r.headers["x-gw-code"] == "gw.key_limit.requests_per_period"


def _day_cost_limit(tmp_path, b):
    (tmp_path / "prices.yaml").write_text(
        "models:\n  - {model: m1, input: 1000.0, output: 1000.0}\n")  # dear: cents a call
    return config(tmp_path, [provider("up", b)], prices="prices.yaml",
                  clients=[{"name": "lim", "key_sha256": sha256_hex(KEY),
                            "limits": [{"per": "day", "cost": 1000.0}]}])


def test_a_running_request_holds_its_input_cost_against_the_limit(tmp_path, bench, gwd):
    # DESIGN.md 8: a running request reserves its input estimate's cost at the first
    # candidate's input price; a second request that would overspend with it is refused
    # while the first still runs, and the key view shows the reservation.
    b = bench()
    (tmp_path / "prices.yaml").write_text(
        "models:\n  - {model: m1, input: 10.0, output: 0.0}\n")  # 1000 tokens: $0.01
    g = gwd(config(tmp_path, [provider("up", b)], prices="prices.yaml",
                   clients=[{"name": "lim", "key_sha256": sha256_hex(KEY),
                             "limits": [{"per": "day", "cost": 0.015}]}]))
    body = chat_body(model="m1", stream=True, text="x" * 4000)  # estimate: 1000 tokens

    s = g.stream(body, key=KEY, headers={"x-bench-pace": "1x0,1x60000"})  # then ~60 s idle
    assert s.status == 200
    s.next_content()
    assert 0.01 <= _day_cost(g) <= 0.0105  # the reservation (estimate: ~1000 tokens)
    r = g.chat(chat_body(model="m1", text="x" * 4000), key=KEY)
    assert r.status == 429, r
    assert r.headers["x-gw-code"] == "gw.key_limit.cost_per_period"
    s.close()


class Events:
    """`gwctl --json events` on gwd <g>, subscribed (the control plane counts it) before
    the constructor returns; .out holds its lines; use as a context manager."""

    def __init__(self, g):
        self.p = subprocess.Popen([binary("gwctl"), "--url", g.control_url, "--token",
                                   CONTROL_TOKEN, "--json", "events"], env=base_env(),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        self.out = Lines(self.p.stdout, "gwctl events")

        def subscribed():
            with urllib.request.urlopen(g.control_url + "/metrics", timeout=5) as r:
                return "gw_events_subscribers 1" in r.read().decode()

        wait_until(subscribed, what="gwctl events to subscribe")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.p.terminate()
        self.p.wait(5)


def test_an_alert_crossed_at_admission_is_sent_while_the_request_runs(tmp_path, bench, gwd):
    # The 80% threshold crossed by a long stream's reservation reaches the event stream
    # at once, not when the stream ends; the amounts are exact numbers.
    b = bench()
    cfg = limited(tmp_path, b, [{"per": "day", "tokens": 1_000_003}])
    cfg["server"]["max_body_mb"] = 8
    g = gwd(cfg)
    with Events(g) as ev:
        body = chat_body(stream=True, text="x" * 3_300_000)  # ~825 k tokens estimated
        s = g.stream(body, key=KEY, headers={"x-bench-pace": "1x0,1x60000"})
        assert s.status == 200
        s.next_content()
        alert = json.loads(ev.out.wait_for(r'"percent":80').string)
        assert alert["measure"] == "tokens" and alert["max"] == 1_000_003  # not 1e+06
        assert isinstance(alert["used"], int) and alert["used"] >= 800_003
        s.close()


def _day_cost(g):
    key = [k for k in g.control("/control/v1/overview").json()["keys"] if k["name"] == "lim"][0]
    return [x for x in key["limits"] if x["per"] == "day"][0]["used"]


def test_a_days_spending_is_kept_across_a_time_zone_change(tmp_path, bench, gwd):
    # DESIGN.md 8: totals follow the machine's local calendar and are rebuilt from the
    # store with the live counting rule; a restart under another time zone keeps what
    # was spent today (the requests were made seconds ago, inside "today" in both zones
    # unless the test runs within an hour of a midnight, which it skips).
    now = time.time()
    for tz_hours in (0, 1):
        if time.gmtime(now + tz_hours * 3600).tm_hour in (0, 23):
            pytest.skip("too close to a midnight in one of the two zones")
    b = bench("--chunks", 5)
    cfg = _day_cost_limit(tmp_path, b)
    env_utc = dict(base_env(), TZ="UTC")
    g = gwd(cfg, env=env_utc)
    ids = []
    for _ in range(3):
        r = g.chat(chat_body(model="m1"), key=KEY)
        assert r.status == 200, r
        ids.append(r.headers["x-request-id"])
    rows = [g.wait_row(i) for i in ids]
    spent = sum(r["cost_usd"] for r in rows)
    assert spent > 0
    assert _day_cost(g) == pytest.approx(spent, abs=1e-6)
    assert g.stop() == 0

    env_plus1 = dict(env_utc, TZ="Etc/GMT-1")  # UTC+1
    g2 = gwd(cfg, name="gw-tz.yaml", env=env_plus1)
    assert _day_cost(g2) == pytest.approx(spent, abs=1e-6)


def _zone_file(tmp_path, name, offset_secs):
    """A compiled time zone (TZif) fixed at UTC+<offset_secs>, made by zic."""
    sign = "-" if offset_secs < 0 else ""
    o = abs(offset_secs)
    src = tmp_path / f"{name}.zi"
    src.write_text(f"Zone GW/{name} {sign}{o // 3600}:{o // 60 % 60:02d}:{o % 60:02d} - GWT\n")
    subprocess.run(["zic", "-d", str(tmp_path / "zones"), str(src)], check=True)
    return (tmp_path / "zones" / "GW" / name).read_bytes()


def _offset_for_midnight_at(utc_secs):
    """The offset (whole seconds, within +-12 h) whose local midnight is at <utc_secs>."""
    off = -int(utc_secs) % 86400
    return off - 86400 if off > 43200 else off


def _private_localtime_works():
    return (shutil.which("unshare") and shutil.which("zic") and
            subprocess.run(["unshare", "-Urm", "true"], stderr=subprocess.DEVNULL).returncode == 0)


def _ts_secs(row):
    return datetime.datetime.fromisoformat(row["ts"].replace("Z", "+00:00")).timestamp()


def test_a_zone_change_under_a_running_gateway_recounts_the_day_from_the_rows(tmp_path,
                                                                             bench, gwd):
    # DESIGN.md 8: when a period's start moves under a running gateway (/etc/localtime
    # replaced), the key's totals are read again from the store. gwd runs in a private
    # mount namespace whose /etc/localtime is a file of ours: first a zone where it is
    # noon, then one whose midnight fell between two requests, so the new day holds
    # only the second one (keeping the running total would still count both).
    if not _private_localtime_works():
        pytest.skip("needs unshare -Urm (user and mount namespaces) and zic")
    b = bench("--chunks", 2)
    cfg = _day_cost_limit(tmp_path, b)
    zone = tmp_path / "localtime"
    zone.write_bytes(_zone_file(tmp_path, "Noon", _offset_for_midnight_at(time.time() - 43200)))
    env = base_env()
    env.pop("TZ", None)  # the zone comes from /etc/localtime
    wrap = ["unshare", "-Urm", "sh", "-c", 'mount --bind "$0" /etc/localtime && exec "$@"',
            str(zone)]
    g = gwd(cfg, env=env, wrap=wrap)

    r1 = g.chat(chat_body(model="m1"), key=KEY)
    assert r1.status == 200, r1
    row1 = g.wait_row(r1.headers["x-request-id"])
    midnight = int(_ts_secs(row1)) + 1  # after the first request started
    wait_until(lambda: time.time() > midnight + 0.05, 5, "the clock to pass the new midnight")
    r2 = g.chat(chat_body(model="m1"), key=KEY)
    assert r2.status == 200, r2
    row2 = g.wait_row(r2.headers["x-request-id"])
    assert _ts_secs(row2) >= midnight
    assert _day_cost(g) == pytest.approx(row1["cost_usd"] + row2["cost_usd"], abs=1e-6)

    new_zone = _zone_file(tmp_path, "Moved", _offset_for_midnight_at(midnight))
    with open(zone, "r+b") as f:  # in place: the bind mount follows the inode
        f.truncate(0)
        f.write(new_zone)
    st = zone.stat()
    os.utime(zone, (st.st_atime, st.st_mtime + 10))  # glibc looks at the mtime
    g.err.wait_for(r"code=key_totals_recounted", timeout=15)
    key = [k for k in g.control("/control/v1/overview").json()["keys"] if k["name"] == "lim"][0]
    day = [x for x in key["limits"] if x["per"] == "day"][0]
    assert day["used"] == pytest.approx(row2["cost_usd"], abs=1e-6)
    resets = datetime.datetime.fromisoformat(day["resets_at"].replace("Z", "+00:00"))
    assert resets.timestamp() == midnight + 86400


def test_totals_rebuilt_after_sigkill_match_the_rows(tmp_path, bench, gwd):
    # A crash loses at most the rows not yet committed; whatever the store kept is what
    # the rebuilt totals count, by the same rule as live settlement. Four clients keep
    # streams of ~100 ms running, so the kill lands mid-load.
    b = bench("--chunks", 5, "--interval-ms", 20)
    cfg = _day_cost_limit(tmp_path, b)
    g = gwd(cfg)
    stop = threading.Event()
    done, cut, wrong = [0], [0], []

    def client():
        while not stop.is_set():
            try:
                r = g.chat(chat_body(model="m1", stream=True), key=KEY)
            except (OSError, http.client.HTTPException):
                r = None
            if r is None or r.incomplete:
                cut[0] += 1  # the kill cut this request off
                return
            if r.status != 200:
                wrong.append(r)
                return
            done[0] += 1

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    wait_until(lambda: len(g.traffic()) >= 10, 30, "ten committed rows")
    g.signal(signal.SIGKILL)
    g.wait_exit()
    gwd.started.remove(g)  # killed on purpose: not held to the exit-0 rule
    stop.set()
    for t in threads:
        t.join(30)
    assert not wrong, wrong
    assert cut[0] >= 1, "no request was in flight at the kill"
    g2 = gwd(cfg, name="gw-after-kill.yaml")
    rows = g2.traffic(500)
    assert 10 <= len(rows) <= done[0] + cut[0]
    assert _day_cost(g2) == pytest.approx(sum(r["cost_usd"] for r in rows), abs=1e-6)


def test_totals_stay_exact_when_two_workers_settle_many_requests_a_turn(tmp_path, bench, gwd):
    # A worker settles the requests a loop turn ended together, at the turn's end (one
    # lock per key and per credential set; net/settle.c): sixteen HTTP/1.1 clients at
    # once on two workers, streamed and not, and h2load's streams over HTTP/2, every one
    # an answer. Afterwards the key's day totals and the credentials' windows hold
    # exactly what the rows hold: no settlement lost, none applied twice, nothing left
    # reserved.
    b = bench("--chunks", 3, "--interval-ms", 1)
    (tmp_path / "prices.yaml").write_text(
        "models:\n  - {model: m1, input: 1.0, output: 2.0}\n")
    g = gwd(config(tmp_path,
                   [provider("up", b, keys=[{"value": "k1"}, {"value": "k2"}],
                             quota={"default": {"rpm": 1000000, "tpm": 1000000000}})],
                   prices="prices.yaml",
                   clients=[{"name": "lim", "key_sha256": sha256_hex(KEY),
                             "limits": [{"per": "day", "tokens": 1000000000},
                                        {"per": "day", "cost": 1000.0},
                                        {"per": "minute", "requests": 1000000}]}]))
    n_clients, each = 16, 20
    bad = []

    def client(i):
        conn = http.client.HTTPConnection("127.0.0.1", g.port, timeout=30)
        for k in range(each):
            body = chat_body(model="m1", text=f"c{i} r{k} " + "w " * (k % 7),
                             stream=(k % 3 == 0))
            r = g.chat(body, key=KEY, conn=conn if k % 2 else None)
            if r.status != 200:
                bad.append(r)
        conn.close()

    def h2():
        body = tmp_path / "body.json"
        body.write_bytes(chat_body(model="m1"))
        p = subprocess.run(["h2load", "-n", "100", "-c", "2", "-m", "20", "-d", str(body),
                            "-H", f"authorization: Bearer {KEY}",
                            "-H", "content-type: application/json",
                            f"http://127.0.0.1:{g.port}/v1/chat/completions"],
                           capture_output=True, text=True, timeout=120)
        if "100 succeeded" not in p.stdout or "status codes: 100 2xx" not in p.stdout:
            bad.append(p.stdout[-600:])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n_clients)]
    threads.append(threading.Thread(target=h2))
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not bad, bad[:3]
    n = n_clients * each + 100  # under the traffic page's 500
    wait_until(lambda: len(g.traffic(n + 10)) == n, 30, f"{n} rows")
    rows = g.traffic(n + 10)
    usage = [r["usage"] for r in rows]
    tokens = sum(u["input_tokens"] + u["output_tokens"] + u["cache_write_tokens"] for u in usage)
    ov = g.control("/control/v1/overview").json()
    key = [k for k in ov["keys"] if k["name"] == "lim"][0]
    used = {(x["per"], x["measure"]): x["used"] for x in key["limits"]}
    assert used[("day", "tokens")] == tokens
    assert used[("day", "cost")] == pytest.approx(sum(r["cost_usd"] for r in rows), abs=1e-6)
    assert used[("minute", "requests")] == n
    creds = [c for s in ov["quota"]["up"]["sets"] for c in s["credentials"]]
    assert sum(c["windows"]["rpm"]["used"] for c in creds) == n
    assert sum(c["windows"]["tpm"]["used"] for c in creds) == sum(
        u["input_tokens"] + u["cache_read_tokens"] + u["cache_write_tokens"] + u["output_tokens"]
        for u in usage)


def test_key_limit_alerts_reach_the_event_stream_and_gwctl_events(tmp_path, bench, gwd):
    # DESIGN.md 8: key_limit_alert once per period at 80% and at the limit, on
    # GET /control/v1/events (SSE) and `gwctl events`.
    b = bench()
    g = gwd(limited(tmp_path, b, [{"per": "day", "requests": 5}]))
    with Events(g) as ev:
        out = ev.out
        ok = [g.chat(chat_body(), key=KEY).status for _ in range(6)]
        assert ok == [200] * 5 + [429]
        first = json.loads(out.wait_for(r'"percent":80').string)
        second = json.loads(out.wait_for(r'"percent":100').string)
        for e, used in ((first, 4), (second, 5)):
            assert e["type"] == "key_limit_alert" and e["client"] == "lim"
            assert (e["per"], e["measure"], e["used"], e["max"]) == ("day", "requests", used, 5)
        assert g.chat(chat_body(), key=KEY).status == 429
        # once per period: no second 100% alert
        assert len([l for l in out.text().splitlines() if '"percent":100' in l]) == 1
