# SPDX-License-Identifier: MIT
# tests/e2e/test_saves.py - the control API's saves of whole entries (DESIGN.md 14, 15):
# PUT and DELETE /control/v1/groups|keys|providers/{name} and `gwctl group|key|provider
# set|rm`. Each save edits only its own entry of a config file written by hand (comments,
# blank lines, block and flow styles), so the bytes before and after the entry are
# compared exactly; the reload takes effect (overview, a request routed through a new
# group); a refused save answers its config.*/engine.* code and leaves the file
# byte-identical; a renamed key keeps its usage totals across the reload and a restart.

import errno
import http.server
import json
import os
import subprocess
import threading

from gwtest import (ALICE_KEY, CONTROL_TOKEN, UP_KEY_A, base_env, bearer, binary, chat_body,
                    gwctl_run, http_request, overview, sha256_hex, wait_until)

LIM_KEY = "gw-key-limited-save-0123456789"


def config_text(tmp_path, b):
    """A hand-written config: comments everywhere, a flow provider in a block list, a
    block provider, a flow list of groups, an indentless block list of clients."""
    return f"""# team gateway (hand-written)
server:
  listen: ["127.0.0.1:0"]   # any port
  workers: 2
control: {{listen: "127.0.0.1:0", token_env: GW_CONTROL_TOKEN}}
store:
  path: {json.dumps(str(tmp_path / "store"))}

providers:
  # the main upstream
  - name: up-a
    dialect: openai
    base_url: "{b.url}"
    keys: [{{value: {UP_KEY_A}}}]   # inline secret
    models: ["*"]
  - {{name: up-b, dialect: openai, base_url: "{b.url}", keys: [{{value: {UP_KEY_A}}}], models: [m-b]}}
  # spare
  - name: up-c
    dialect: openai
    base_url: "{b.url}"
    keys:
      - value: {UP_KEY_A}
    models: [m-c]

# groups, flow style
groups: [{{name: grp-one, providers: [up-a]}}, {{name: grp-two, providers: [up-b]}}]

clients:
- name: alice   # the demo key
  key_sha256: "{sha256_hex(ALICE_KEY)}"
- name: lim
  key_sha256: "{sha256_hex(LIM_KEY)}"
  models: [grp-one, gpt-test]
  limits:
    - {{per: day, requests: 100}}
# end of file
"""


def send(g, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    return http_request(g.control_port, method, path, data, headers=bearer(CONTROL_TOKEN))


def changed_span(before, after):
    """(a, end_before, end_after): the bytes that differ are before[a:end_before] and
    after[a:end_after]; everything else is equal byte for byte."""
    a = 0
    n = min(len(before), len(after))
    while a < n and before[a] == after[a]:
        a += 1
    z = 0
    while z < n - a and before[len(before) - 1 - z] == after[len(after) - 1 - z]:
        z += 1
    return a, len(before) - z, len(after) - z


def assert_only(before, after, old_part, new_part):
    """<after> is <before> with <old_part> (found once) replaced by <new_part>: every other
    byte is as it was."""
    assert before.count(old_part) == 1, old_part
    i = before.index(old_part)
    assert after == before[:i] + new_part + before[i + len(old_part):], (before, after)


def names(g, what):
    return [x["name"] for x in overview(g)[what]]


def test_put_group_adds_it_to_a_flow_list_reloads_and_routes(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config_text(tmp_path, b))
    before = g.config_path.read_bytes()

    r = send(g, "PUT", "/control/v1/groups/grp-new",
             {"type": "fallback", "providers": [{"name": "up-c", "model": "m-c"}, "up-a"],
              "model": "gpt-test"})
    assert r.status == 200, r
    ans = r.json()
    reload = ans.pop("reload")
    assert ans == {"kind": "group", "name": "grp-new", "saved": True, "reloaded": True,
                   "created": True, "removed": False, "renamed_from": None}
    # the answer is the reload's that read the saved file: it added exactly this group
    assert reload["reloaded"] is True
    assert reload["changed"]["groups"] == {"added": ["grp-new"], "removed": [], "changed": []}
    assert reload["changed"]["providers"] == {"added": [], "removed": [], "changed": []}
    after = g.config_path.read_bytes()
    assert_only(before, after, b"{name: grp-two, providers: [up-b]}]",
                b"{name: grp-two, providers: [up-b]}, {name: grp-new, type: fallback, "
                b"providers: [{name: up-c, model: m-c}, up-a], model: gpt-test}]")
    assert "grp-new" in names(g, "groups")
    r = g.chat(chat_body(model="grp-new"))
    assert r.status == 200, r
    rows = wait_until(lambda: g.traffic() or None, what="the request's traffic row")
    assert rows[0]["model"] == "grp-new" and rows[0]["upstream"] == "up-c", rows[0]


def test_put_provider_replaces_block_and_flow_entries_and_delete_removes_lines(tmp_path, bench,
                                                                               gwd):
    b = bench()
    g = gwd(config_text(tmp_path, b))
    t0 = g.config_path.read_bytes().decode()

    # a block entry: rewritten in block style at its indentation
    r = send(g, "PUT", "/control/v1/providers/up-c",
             {"dialect": "openai", "base_url": b.url, "keys": [{"value": UP_KEY_A}],
              "models": ["m-c", "m-c2"], "max_concurrent": 3})
    assert r.status == 200, r
    assert r.json()["created"] is False and r.json()["reloaded"] is True
    t1 = g.config_path.read_bytes().decode()
    assert_only(t0, t1,
                f'name: up-c\n    dialect: openai\n    base_url: "{b.url}"\n    keys:\n'
                f'      - value: {UP_KEY_A}\n    models: [m-c]',
                f'name: up-c\n    dialect: openai\n    base_url: "{b.url}"\n'
                f'    keys: [{{value: {UP_KEY_A}}}]\n    models: [m-c, m-c2]\n'
                f'    max_concurrent: 3')
    up_c = [p for p in overview(g)["providers"] if p["name"] == "up-c"][0]
    assert up_c["max_concurrent"] == 3, up_c

    # a flow entry inside a block list stays one flow mapping
    r = send(g, "PUT", "/control/v1/providers/up-b",
             {"name": "up-b", "dialect": "openai", "base_url": b.url,
              "keys": [{"value": UP_KEY_A}], "models": ["m-b", "m-b2"]})
    assert r.status == 200, r
    t2 = g.config_path.read_bytes().decode()
    assert_only(t1, t2, "models: [m-b]}", "models: [m-b, m-b2]}")

    # DELETE: up-c is in no group; its lines go, the comment above it stays
    r = send(g, "DELETE", "/control/v1/providers/up-c")
    assert r.status == 200, r
    assert r.json()["removed"] is True and r.json()["reloaded"] is True
    t3 = g.config_path.read_bytes().decode()
    a, zb, za = changed_span(t2, t3)
    assert za == a and t2[a:zb].startswith("  - name: up-c\n"), t2[a:zb]
    assert t2[a:zb].endswith("max_concurrent: 3\n")
    assert "up-c" not in names(g, "providers")
    assert "  # spare\n" in t3


def test_gwctl_key_set_and_rm_edit_the_indentless_client_list(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config_text(tmp_path, b))
    t0 = g.config_path.read_bytes().decode()
    entry = tmp_path / "carol.json"
    entry.write_text(json.dumps({"key_sha256": sha256_hex("gw-key-carol-000111222"),
                                 "max_concurrent": 2, "models": ["gpt-test"]}))

    rc, out, err = gwctl_run(g, "key", "set", "carol", "--file", entry)
    assert rc == 0, err
    assert "carol" in out and "saved" in out and "reloaded" in out
    t1 = g.config_path.read_bytes().decode()
    assert_only(t0, t1, "    - {per: day, requests: 100}\n",
                "    - {per: day, requests: 100}\n"
                f"- name: carol\n  key_sha256: {sha256_hex('gw-key-carol-000111222')}\n"
                "  max_concurrent: 2\n  models: [gpt-test]\n")
    assert "carol" in names(g, "keys")
    r = g.chat(chat_body(), key="gw-key-carol-000111222")
    assert r.status == 200, r  # the new key works

    rc, out, err = gwctl_run(g, "key", "rm", "carol", json_out=True)
    assert rc == 0, err
    assert json.loads(out)["removed"] is True
    assert g.config_path.read_bytes().decode() == t0
    assert "carol" not in names(g, "keys")


def test_gwctl_group_and_provider_set_from_stdin_and_rm(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config_text(tmp_path, b))
    t0 = g.config_path.read_bytes().decode()
    p = subprocess.run([binary("gwctl"), "--url", g.control_url, "--token", CONTROL_TOKEN,
                        "provider", "set", "up-d", "--file", "-"],
                       input=json.dumps({"dialect": "openai", "base_url": b.url,
                                         "keys": [{"env": "GW_TEST_UP_KEY"}],
                                         "models": ["m-d"]}).encode(),
                       env=base_env(), capture_output=True, timeout=30)
    # the environment variable is unset in gwd: refused with the config code, file unchanged
    assert p.returncode == 1, p
    assert b"config.env_unset" in p.stderr, p.stderr
    assert g.config_path.read_bytes().decode() == t0

    p = subprocess.run([binary("gwctl"), "--url", g.control_url, "--token", CONTROL_TOKEN,
                        "provider", "set", "up-d", "--file", "-"],
                       input=json.dumps({"dialect": "openai", "base_url": b.url,
                                         "keys": [{"value": "sk-secret-d-123"}],
                                         "models": ["m-d"]}).encode(),
                       env=base_env(), capture_output=True, timeout=30)
    assert p.returncode == 0, p
    assert b"sk-secret-d-123" not in p.stdout + p.stderr  # never echoed
    assert "sk-secret-d-123" not in g.log(400)
    t1 = g.config_path.read_bytes().decode()
    assert_only(t0, t1, "    models: [m-c]\n",
                "    models: [m-c]\n  - name: up-d\n    dialect: openai\n"
                f'    base_url: "{b.url}"\n    keys: [{{value: sk-secret-d-123}}]\n'
                "    models: [m-d]\n")
    rc, out, err = gwctl_run(g, "group", "rm", "grp-two")
    assert rc == 0, err
    t2 = g.config_path.read_bytes().decode()
    assert_only(t1, t2, ", {name: grp-two, providers: [up-b]}", "")
    assert "grp-two" not in names(g, "groups")
    rc, out, err = gwctl_run(g, "provider", "rm", "up-d")
    assert rc == 0, err
    assert "up-d: removed in the config file, saved and reloaded" in out, out
    assert_only(t0, g.config_path.read_bytes().decode(),
                ", {name: grp-two, providers: [up-b]}", "")


def test_refused_saves_answer_their_code_and_leave_the_file_alone(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config_text(tmp_path, b))
    t0 = g.config_path.read_bytes()

    def refused(method, path, body, status, code):
        r = send(g, method, path, body)
        assert r.status == status, r
        assert r.json()["error"]["code"] == code, r.json()
        assert g.config_path.read_bytes() == t0
        return r.json()["error"]

    e = refused("PUT", "/control/v1/groups/grp-bad", {"providers": ["nope"]}, 400,
                "engine.group_unknown_member")
    assert any(p["code"] == "engine.group_unknown_member" for p in e["problems"])
    # a provider still used by a group
    refused("DELETE", "/control/v1/providers/up-a", None, 400, "engine.group_unknown_member")
    # a group still named by a key's scope
    e = refused("DELETE", "/control/v1/groups/grp-one", None, 409, "config.group_in_use")
    assert "lim" in e["message"]
    # renaming a group away from a key's scope is the same
    refused("PUT", "/control/v1/groups/grp-one", {"name": "grp-uno", "providers": ["up-a"]},
            409, "config.group_in_use")
    refused("PUT", "/control/v1/keys/lim", {"key_sha256": "abc"}, 400, "config.bad_key_sha256")
    refused("PUT", "/control/v1/providers/up-a", {"bogus_field": 1}, 400,
            "config.unknown_field")
    # a refused provider's credential is not echoed in the answer
    r = send(g, "PUT", "/control/v1/providers/up-z",
             {"dialect": "openai", "base_url": "ftp://x", "keys": [{"value": "sk-leak-999"}],
              "models": ["m"]})
    assert r.status == 400 and r.json()["error"]["code"] == "config.bad_url", r
    assert b"sk-leak-999" not in r.body and g.config_path.read_bytes() == t0
    refused("DELETE", "/control/v1/groups/nope", None, 404, "gw.control.unknown_group")
    # gpt-test is in lim's scope but is no group: not found, not "in use"
    refused("DELETE", "/control/v1/groups/gpt-test", None, 404, "gw.control.unknown_group")
    refused("DELETE", "/control/v1/keys/nope", None, 404, "gw.control.unknown_client")
    refused("PUT", "/control/v1/keys/lim", [1, 2], 400, "gw.bad_request")
    r = http_request(g.control_port, "PUT", "/control/v1/groups/x", b"{}")
    assert r.status == 401 and g.config_path.read_bytes() == t0
    rc, out, err = gwctl_run(g, "group", "rm", "grp-one")
    assert rc == 1 and "config.group_in_use" in err, (out, err)


def key_used(g, name):
    for k in overview(g)["keys"]:
        if k["name"] == name:
            return [x for x in k["limits"] if x["per"] == "day"][0]["used"]
    return None


def test_renamed_key_keeps_its_totals_across_reload_and_restart(tmp_path, bench, gwd, restart):
    b = bench()
    g = gwd(config_text(tmp_path, b))
    for _ in range(2):
        r = g.chat(chat_body(), key=LIM_KEY)
        assert r.status == 200, r
    wait_until(lambda: key_used(g, "lim") == 2, what="two requests counted for lim")

    r = send(g, "PUT", "/control/v1/keys/lim",
             {"name": "lim2", "key_sha256": sha256_hex(LIM_KEY),
              "models": ["grp-one", "gpt-test"], "limits": [{"per": "day", "requests": 100}]})
    assert r.status == 200, r
    assert r.json()["renamed_from"] == "lim" and r.json()["name"] == "lim2"
    assert r.json()["reloaded"] is True
    assert "lim" not in names(g, "keys")
    assert key_used(g, "lim2") == 2
    r = g.chat(chat_body(), key=LIM_KEY)
    assert r.status == 200, r
    wait_until(lambda: key_used(g, "lim2") == 3, what="the third request counted for lim2")

    g2 = restart(g)
    assert key_used(g2, "lim2") == 3
    assert "name: lim2\n" in g2.config_path.read_text()


def test_the_control_api_answers_while_a_save_waits_for_the_disk(tmp_path, bench, gwd):
    """The file work runs off the control loop: with the config file swapped for a FIFO,
    a save blocks reading it, and the control API still answers; once the FIFO gives the
    text, the save completes and a regular file replaces the FIFO."""
    b = bench()
    g = gwd(config_text(tmp_path, b))
    text = g.config_path.read_bytes()
    g.config_path.unlink()
    os.mkfifo(g.config_path)
    got = {}

    def save():
        got["r"] = send(g, "PUT", "/control/v1/groups/grp-new", {"providers": ["up-a"]})
    t = threading.Thread(target=save)
    t.start()

    def reader_waits():  # a non-blocking open for writing succeeds once a reader has it open
        try:
            return os.open(g.config_path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno == errno.ENXIO:
                return None
            raise
    fd = wait_until(reader_waits, what="the save reading the config FIFO")
    try:
        r = g.control("/control/v1/overview")  # answered while the save is blocked
        assert r.status == 200, r
        assert "grp-new" not in [x["name"] for x in r.json()["groups"]]
        assert "r" not in got
        os.set_blocking(fd, True)
        os.write(fd, text)
    finally:
        os.close(fd)
    t.join(30)
    assert got["r"].status == 200, got["r"]
    assert got["r"].json()["reloaded"] is True
    assert g.config_path.is_file()
    assert "grp-new" in names(g, "groups")


def test_concurrent_saves_each_keep_the_others_entry(tmp_path, bench, gwd):
    """Saves run one at a time: eight saves sent at once each read the file as the one
    before left it, so every entry is in the file at the end and the rest is unchanged."""
    b = bench()
    g = gwd(config_text(tmp_path, b))
    t0 = g.config_path.read_text()
    got = {}

    def save(i):
        got[i] = send(g, "PUT", f"/control/v1/groups/grp-c{i}", {"providers": ["up-a"]})
    ts = [threading.Thread(target=save, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert all(got[i].status == 200 and got[i].json()["reloaded"] for i in range(8)), got
    t1 = g.config_path.read_text()
    a, zb, za = changed_span(t0, t1)
    assert zb == a  # only added bytes, in one place: the end of the groups list
    added = t1[a:za]
    assert sorted(added.split(", {name: ")[1:]) == sorted(
        f"grp-c{i}, providers: [up-a]}}" for i in range(8)), added
    groups = names(g, "groups")
    assert all(f"grp-c{i}" in groups for i in range(8)), groups
