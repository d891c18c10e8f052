# SPDX-License-Identifier: MIT
# tests/e2e/test_reload.py - POST /control/v1/reload (issue 12 point 2, DESIGN.md 14):
# the answer names what changed, a refused file keeps the running config and answers
# the problems with their codes, concurrent asks each get their own answer, SIGHUP runs
# the same reload, and every reload is announced on GET /control/v1/events
# (config_reloaded / config_refused, never a secret). The stress run is in
# test_reload_stress.py.

import json
import signal
import subprocess
import threading

from gwtest import (CONTROL_TOKEN, Lines, base_env, binary, config, control_post,
                    http_request, overview, provider, wait_until, write_config)


def reload(g, token=CONTROL_TOKEN):
    return control_post(g, "/control/v1/reload", {}, token=token)


def changed(ans):
    """(providers, groups, clients) each as (added, removed, changed) of answer <ans>."""
    c = ans["changed"]
    return tuple(tuple(tuple(c[k][w]) for w in ("added", "removed", "changed"))
                 for k in ("providers", "groups", "clients"))


class Events:
    """`gwctl --json events` on gwd <g>, subscribed (the control plane counts it) before
    the constructor returns; .out holds its lines (one event's JSON each)."""

    def __init__(self, g):
        self.p = subprocess.Popen([binary("gwctl"), "--url", g.control_url, "--token",
                                   CONTROL_TOKEN, "--json", "events"], env=base_env(),
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        self.out = Lines(self.p.stdout, "gwctl events")

        def subscribed():
            r = http_request(g.control_port, "GET", "/metrics")
            return "gw_events_subscribers 1" in r.body.decode()

        wait_until(subscribed, what="gwctl events to subscribe")

    def next(self, type_, start):
        """The first event of <type_> from line <start> on, parsed."""
        return json.loads(self.out.wait_for(r'"type":"%s"' % type_, start=start).string)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.p.terminate()
        self.p.wait(5)


def test_reload_answers_what_changed(tmp_path, bench, gwd):
    b = bench()
    cfg = config(tmp_path, [provider("up", b), provider("old", b, models=["m-old"])],
                 groups=[{"name": "grp", "providers": ["up", "old"]}])
    g = gwd(cfg)

    r = reload(g)  # the same file again
    assert r.status == 200, r
    same = r.json()
    assert same["reloaded"] is True and same["settings"] == []
    assert changed(same) == (((), (), ()),) * 3
    gen = same["generation"]

    cfg["providers"] = [provider("new", b, models=["m-new"]),
                        provider("up", b, max_concurrent=7)]
    cfg["groups"] = [{"name": "grp", "providers": ["up"]},
                     {"name": "grp2", "providers": ["new"]}]
    cfg["clients"] = cfg["clients"][:1]  # bob goes
    cfg["failover"] = {"pause_secs": 9}
    write_config(tmp_path, cfg)
    r = reload(g)

    assert r.status == 200, r
    ans = r.json()
    assert ans["reloaded"] is True and ans["generation"] == gen + 1
    assert changed(ans) == ((("new",), ("old",), ("up",)),
                            (("grp2",), (), ("grp",)),
                            ((), ("bob",), ()))
    assert ans["settings"] == ["failover"]
    assert [p["name"] for p in overview(g)["providers"]] == ["new", "up"]


def test_a_refused_file_keeps_the_running_config(tmp_path, bench, gwd):
    b = bench()
    cfg = config(tmp_path, [provider("up", b)])
    g = gwd(cfg)
    gen = reload(g).json()["generation"]
    good = (tmp_path / "gw.yaml").read_text()

    cfg["providers"] = [provider("up", b, dialect="klingon",
                                 keys=[{"value": "sk-e2e-SEKRIT-reload"}]),
                        provider("up", b)]
    write_config(tmp_path, cfg)
    with Events(g) as ev:
        start = ev.out.count()
        r = reload(g)

        assert r.status == 409, r
        err = r.json()["error"]
        assert err["code"] == "gw.control.config_invalid"
        codes = {(p["path"], p["code"]) for p in err["problems"]}
        assert ("providers[0] (up).dialect", "config.bad_dialect") in codes, err
        assert any(p["code"] == "config.duplicate_name" for p in err["problems"]), err
        assert r.json()["reloaded"] is False and r.json()["generation"] == gen
        refused = ev.next("config_refused", start)
        assert refused["source"] == "control" and refused["error"]["problems"], refused
        assert "SEKRIT" not in r.body.decode() + ev.out.text() + g.err.text()
    assert g.chat().status == 200  # the running config serves

    (tmp_path / "gw.yaml").unlink()
    r = reload(g)
    assert r.status == 500 and r.json()["error"]["code"] == "gw.control.config_io", r

    (tmp_path / "gw.yaml").write_text(good)
    r = reload(g)
    assert r.status == 200 and r.json()["generation"] == gen + 1, r


def test_reload_needs_the_token_and_post(tmp_path, bench, gwd):
    g = gwd(config(tmp_path, [provider("up", bench())]))
    assert reload(g, token="wrong").status == 401
    r = http_request(g.control_port, "GET", "/control/v1/reload",
                     headers={"Authorization": f"Bearer {CONTROL_TOKEN}"})
    assert r.status == 405 and r.headers.get("allow") == "POST", r


def test_concurrent_reloads_each_get_their_own_answer(tmp_path, bench, gwd):
    g = gwd(config(tmp_path, [provider("up", bench())]))
    gen = reload(g).json()["generation"]
    answers = []
    lock = threading.Lock()

    def ask():
        r = reload(g)
        with lock:
            answers.append(r)

    threads = [threading.Thread(target=ask) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert [a.status for a in answers] == [200] * 12, answers
    # one reload each, run one at a time: twelve distinct generations, none skipped
    assert sorted(a.json()["generation"] for a in answers) == list(range(gen + 1, gen + 13))


def test_sighup_reloads_the_same_way_and_both_are_announced(tmp_path, bench, gwd):
    b = bench()
    cfg = config(tmp_path, [provider("up", b)])
    g = gwd(cfg)
    with Events(g) as ev:
        start = ev.out.count()
        cfg["providers"].append(provider("extra", b, models=["m-x"]))
        write_config(tmp_path, cfg)
        mark = g.err.count()
        g.signal(signal.SIGHUP)
        e = ev.next("config_reloaded", start)
        assert e["source"] == "signal" and e["changed"]["providers"]["added"] == ["extra"], e
        g.err.wait_for(r"code=reloaded\b.*providers \+extra", start=mark)

        start = ev.out.count()
        cfg["providers"].pop()
        write_config(tmp_path, cfg)
        r = reload(g)
        assert r.status == 200 and r.json()["changed"]["providers"]["removed"] == ["extra"]
        e = ev.next("config_reloaded", start)
        assert e["source"] == "control" and e["generation"] == r.json()["generation"], e
        assert e["changed"] == r.json()["changed"]


def test_gwctl_reload_prints_what_changed_or_the_refusal(tmp_path, bench, gwd):
    b = bench()
    cfg = config(tmp_path, [provider("up", b)])
    g = gwd(cfg)

    def gwctl(*args):
        p = subprocess.run([binary("gwctl"), "--url", g.control_url, "--token", CONTROL_TOKEN,
                            *args], env=base_env(), capture_output=True, timeout=30)
        return p.returncode, p.stdout.decode(), p.stderr.decode()

    gen = reload(g).json()["generation"]
    cfg["providers"] = [provider("up", b), provider("spare", b, models=["m-spare"])]
    cfg["failover"] = {"pause_secs": 9}
    write_config(tmp_path, cfg)
    rc, out, err = gwctl("reload")
    assert rc == 0, err
    assert out.splitlines() == ["providers added: spare", "settings changed: failover",
                                f"reloaded (generation {gen + 1})"]
    rc, out, err = gwctl("reload")
    assert (rc, out) == (0, f"reloaded (generation {gen + 2}): nothing changed\n"), err

    cfg["groups"] = [{"name": "grp", "providers": ["nobody"]}]
    write_config(tmp_path, cfg)
    rc, out, err = gwctl("reload")
    assert rc == 1 and out == ""
    assert "gw.control.config_invalid" in err and "engine.group_unknown_member" in err, err
    assert [p["name"] for p in overview(g)["providers"]] == ["up", "spare"]
    rc, out, err = gwctl("reload", "now")
    assert rc == 2
