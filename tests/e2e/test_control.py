# SPDX-License-Identifier: MIT
# tests/e2e/test_control.py - the control API (healthz, version, traffic) and gwctl
# (status, health, traffic --json, check; exit codes 0/1/2).

import json
import re
import subprocess

import pytest

from gwtest import (CONTROL_TOKEN, base_env, binary, chat_body, config, free_port,
                    http_request, provider, write_config)


@pytest.fixture
def gw_running(tmp_path, bench, gwd):
    b = bench("--chunks", 2)
    return gwd(config(tmp_path, [provider("up", b)])), b


def gwctl(g, *args, token=CONTROL_TOKEN, json_out=False):
    argv = [binary("gwctl"), "--url", g.control_url, "--token", token]
    if json_out:
        argv.append("--json")
    argv += [str(a) for a in args]
    p = subprocess.run(argv, env=base_env(), stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=30)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def test_healthz_needs_no_token(gw_running):
    g, _ = gw_running
    r = http_request(g.control_port, "GET", "/healthz")
    assert r.status == 200, r


def test_control_api_needs_the_token(gw_running):
    g, _ = gw_running
    assert g.control("/control/v1/version", token=None).status == 401
    assert g.control("/control/v1/version", token="wrong-token").status == 401
    r = g.control("/control/v1/version")
    assert r.status == 200, r
    assert "control_api_version" in r.json()


def test_traffic_lists_rows_newest_first_with_their_fields(gw_running):
    g, _ = gw_running
    ids = []
    for stream in (False, True, False):
        r = g.chat(chat_body(stream=stream))
        assert r.status == 200, r
        ids.append(r.headers["x-request-id"])
    g.wait_row(ids[-1])
    for i in ids:
        g.wait_row(i)

    r = g.control("/control/v1/traffic?limit=2")
    assert r.status == 200, r
    page = r.json()
    assert len(page["rows"]) == 2
    assert "next" in page
    rows = g.traffic()
    got = [row["id"] for row in rows]
    assert got == list(reversed(ids)), got
    row = rows[0]
    for f in ("id", "ts", "client", "model", "upstream", "status", "code", "outcome", "usage",
              "cost_usd", "ttfb_ms", "duration_ms", "tokens_per_sec", "queued_ms", "stream",
              "attempts"):
        assert f in row, f
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}", row["ts"]), row["ts"]
    for f in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
              "estimated"):
        assert f in row["usage"], f
    for f in ("upstream", "model", "outcome", "status", "code", "queued_ms", "ttfb_ms"):
        assert f in row["attempts"][0], f


def test_gwctl_status_exits_0(gw_running):
    g, _ = gw_running
    rc, out, err = gwctl(g, "status")
    assert rc == 0, (out, err)
    assert out.strip()
    rc, out, err = gwctl(g, "status", json_out=True)
    assert rc == 0, (out, err)
    json.loads(out)


def test_gwctl_health_needs_no_token_and_exits_0(gw_running):
    g, _ = gw_running
    rc, out, err = gwctl(g, "health", token="wrong-token")
    assert rc == 0, (out, err)
    assert out.strip() == "ok"


def test_gwctl_health_exits_1_when_nothing_answers():
    argv = [binary("gwctl"), "--url", "http://127.0.0.1:%d" % free_port(), "health"]
    p = subprocess.run(argv, env=base_env(), stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=30)
    assert p.returncode == 1, p
    assert b"cannot connect" in p.stderr


def test_gwctl_traffic_json_lists_the_request(gw_running):
    g, _ = gw_running
    r = g.chat()
    assert r.status == 200
    rid = r.headers["x-request-id"]
    g.wait_row(rid)

    rc, out, err = gwctl(g, "traffic", "--limit", 5, json_out=True)

    assert rc == 0, (out, err)
    j = json.loads(out)
    rows = j["rows"] if isinstance(j, dict) else j
    assert rid in [row["id"] for row in rows]
    rc, out, err = gwctl(g, "traffic", "--limit", 5)
    assert rc == 0, (out, err)
    assert rid[-8:] in out


def test_gwctl_traffic_pages_with_the_cursor_it_prints(gw_running):
    """The table mode prints the command for the next page; following it gives the
    next older rows, none twice, until no more is printed."""
    g, _ = gw_running
    ids = []
    for _ in range(3):
        r = g.chat()
        assert r.status == 200, r
        ids.append(r.headers["x-request-id"])
    for i in ids:
        g.wait_row(i)
    newest = [row["id"] for row in g.traffic()]
    seen, args = [], ["traffic", "--limit", 2]
    while True:
        rc, out, err = gwctl(g, *args)
        assert rc == 0, (out, err)
        seen += [line.split()[2] for line in out.splitlines()[1:] if line.strip()]
        m = re.search(r"more: gwctl traffic --limit 2 --cursor (\S+)", err)
        if not m:
            break
        assert re.fullmatch(r"\d+-\d+", m.group(1)), m.group(1)
        args = ["traffic", "--limit", 2, "--cursor", m.group(1)]
    assert seen == [i[-8:] for i in newest], (seen, newest)
    assert all(i[-8:] in seen for i in ids)


def test_gwctl_with_a_wrong_token_exits_1(gw_running):
    g, _ = gw_running
    rc, out, err = gwctl(g, "status", token="wrong-token")
    assert rc == 1, (out, err)


def test_gwctl_usage_error_exits_2(gw_running):
    g, _ = gw_running
    rc, out, err = gwctl(g, "no-such-subcommand")
    assert rc == 2, (out, err)


def test_gwctl_check_reports_problems(gw_running, tmp_path):
    g, _ = gw_running
    ok = write_config(tmp_path, config(tmp_path, [provider("up", base_url="http://127.0.0.1:9")]),
                      "ok.yaml")
    rc, out, err = gwctl(g, "check", ok)
    assert rc == 0, (out, err)
    bad = write_config(tmp_path, config(tmp_path, [provider("up", base_url="http://127.0.0.1:9",
                                                            dialect="klingon")]), "bad.yaml")
    rc, out, err = gwctl(g, "check", bad)
    assert rc == 1, (out, err)
    assert "config.bad_dialect" in out + err
