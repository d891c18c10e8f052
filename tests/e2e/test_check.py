# SPDX-License-Identifier: MIT
# tests/e2e/test_check.py - `gwd --check FILE`: one line per problem,
# "<path>: <value> (<code>) <message>", non-zero exit; exit 0 on a good config; values
# that may hold a secret shown as (hidden), also in the lines of a failed reload.

import re
import signal
import subprocess

import pytest

from gwtest import REPO, base_env, binary, config, provider, write_config

# A path is by index, each list entry that has a name followed by " (NAME)":
# groups[0] (grp-bad).providers[0] (g-alpha).weight
LINE_RE = re.compile(r"^(?P<path>\S+(?: \([^)]*\)\S*)*): (?P<value>.*) \((?P<code>[a-z]+\.[a-z0-9_.]+)\) "
                     r"(?P<msg>\S.*)$")
UPSTREAM = "http://127.0.0.1:9"


def check(path, env=None):
    p = subprocess.run([binary("gwd"), "--check", str(path)], env=env or base_env(),
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    out = (p.stdout + p.stderr).decode("utf-8", "replace")
    problems = [m.groupdict() for m in map(LINE_RE.match, out.splitlines()) if m]
    return p.returncode, out, problems


def good(tmp_path):
    return config(tmp_path, [provider("up", base_url=UPSTREAM)])


def test_check_accepts_a_good_config(tmp_path):
    rc, out, problems = check(write_config(tmp_path, good(tmp_path)))
    assert rc == 0, out
    assert problems == [], out


def test_check_accepts_the_example_config():
    path = REPO / "etc" / "gw.example.yaml"
    text = path.read_text()
    env = base_env()
    for name in re.findall(r"\b(?:env|key_env|token_env)\s*:\s*[\"']?([A-Za-z_][A-Za-z0-9_]*)",
                           text):
        env.setdefault(name, f"dummy-secret-for-{name.lower()}")
    rc, out, problems = check(path, env)
    assert rc == 0, out
    assert problems == [], out


def _set(cfg, dotted, value):
    node = cfg
    parts = dotted.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


CASES = [
    # (field to set, value, expected path, expected code)
    ("server.bogus_field", 1, "server.bogus_field", "config.unknown_field"),
    ("server.workers", "many", "server.workers", "config.wrong_type"),
    ("server.listen", ["nowhere"], "server.listen[0]", "config.bad_listen"),
    ("providers.0.dialect", "klingon", "providers[0] (up).dialect", "config.bad_dialect"),
    ("providers.0.base_url", "ftp://example.net", "providers[0] (up).base_url", "config.bad_url"),
    ("providers.0.name", "Bad Name!", "providers[0] (Bad Name!).name", "config.bad_name"),
    ("providers.0.keys", [{"env": "GW_E2E_SURELY_UNSET"}], "providers[0] (up).keys[0]",
     "config.env_unset"),
    ("providers.0.models", [], "providers[0] (up).models", "config.provider_no_models"),
    ("clients.0.key_sha256", "abc123", "clients[0] (alice).key_sha256", "config.bad_key_sha256"),
]


@pytest.mark.parametrize("field,value,path,code", CASES, ids=[c[3] for c in CASES])
def test_check_names_the_field_value_and_code_of_a_problem(tmp_path, field, value, path,
                                                            code):
    cfg = good(tmp_path)
    _set(cfg, field, value)
    rc, out, problems = check(write_config(tmp_path, cfg))
    assert rc != 0, out
    assert problems, f"no '<path>: <value> (<code>) <message>' line in:\n{out}"
    hits = [p for p in problems if p["code"] == code]
    assert hits, out
    assert hits[0]["path"].startswith(path), out


def test_check_reports_every_problem_and_no_secret(tmp_path):
    cfg = good(tmp_path)
    cfg["providers"][0]["dialect"] = "klingon"
    cfg["providers"][0]["keys"] = [{"value": "sekret-upstream-value-42"}]
    cfg["providers"].append(provider("up", base_url="ftp://nope"))
    rc, out, problems = check(write_config(tmp_path, cfg))
    assert rc != 0, out
    codes = {p["code"] for p in problems}
    assert {"config.bad_dialect", "config.bad_url", "config.duplicate_name"} <= codes, out
    assert "sekret-upstream-value-42" not in out


def test_check_of_a_missing_file_fails(tmp_path):
    rc, out, problems = check(tmp_path / "nope.yaml")
    assert rc != 0, out
    assert out.strip(), "no message for a missing file"


def test_check_refuses_a_broken_price_table_and_gwctl_agrees(tmp_path):
    # The config names a price table (DESIGN.md 9): gwd --check loads it like gwd does,
    # a refused table refuses the config, and gwctl check prints the same lines.
    cfg = good(tmp_path)
    cfg["prices"] = "prices.yaml"
    (tmp_path / "prices.yaml").write_text(
        "models:\n  - {model: m1, input: 1.0, output: 2.0}\n  - {model: m1, input: 3.0}\n")
    path = write_config(tmp_path, cfg)
    rc, out, _ = check(path)
    assert rc != 0, out
    assert "config.price_duplicate_model" in out, out
    assert str(tmp_path / "prices.yaml") in out, out
    ctl = subprocess.run([binary("gwctl"), "check", str(path)], env=base_env(),
                         stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    assert ctl.returncode == 1
    assert ctl.stdout.decode() == out

    # A missing explicit table is an error too; a missing default one is no table.
    (tmp_path / "prices.yaml").unlink()
    rc, out, _ = check(path)
    assert rc != 0 and "config.io" in out, out
    del cfg["prices"]
    rc, out, _ = check(write_config(tmp_path, cfg))
    assert rc == 0, out


# issue 8: a refused value that may hold a secret is shown as (hidden), by --check and in
# the lines a failed reload prints.
SECRET_CASES = [
    ("providers.0.base_url", "https://api.example.net/v1?api_key=sk-e2e-SEKRIT-q",
     "providers[0] (up).base_url", "config.bad_url"),
    ("providers.0.base_url", "https://u:sk-e2e-SEKRIT-u@api.example.net",
     "providers[0] (up).base_url", "config.bad_url"),
    ("providers.0.keys", [{"env": "sk-e2e-SEKRIT-env"}], "providers[0] (up).keys[0].env",
     "config.bad_value"),
    ("clients.1.key_env", "gw-e2e-SEKRIT-key", "clients[1] (bob).key_env", "config.bad_value"),
]


@pytest.mark.parametrize("field,value,path,code", SECRET_CASES,
                         ids=["query", "userinfo", "key-env", "client-key-env"])
def test_issue_8_check_hides_a_refused_value_that_may_hold_a_secret(tmp_path, field, value,
                                                                     path, code):
    cfg = good(tmp_path)
    _set(cfg, field, value)
    rc, out, problems = check(write_config(tmp_path, cfg))
    assert rc != 0, out
    hits = [p for p in problems if p["path"] == path and p["code"] == code]
    assert hits and hits[0]["value"] == "(hidden)", out
    assert "SEKRIT" not in out, out


def test_issue_8_reload_failed_hides_a_refused_secret(tmp_path, bench, gwd):
    cfg = config(tmp_path, [provider("up", bench())])
    g = gwd(cfg)
    start = g.err.count()
    cfg["providers"][0]["base_url"] = "https://api.example.net/v1?api_key=sk-e2e-SEKRIT-q"
    write_config(tmp_path, cfg)
    g.signal(signal.SIGHUP)
    g.err.wait_for(r"code=reload_failed\b", start=start)
    text = g.err.text()
    assert "providers[0] (up).base_url: (hidden) (config.bad_url)" in text, text
    assert "SEKRIT" not in text + g.out.text(), text
    assert g.chat().status == 200  # the running config stays


# issue 12: every problem of a file in one run, schema problems (unknown keys, wrong
# types) included, each path naming the entries it goes through; gwd -c refusing to start
# prints the same lines.
ISSUE_12_FILE = """\
server:
  listen: ["127.0.0.1:0"]
  workers: many-workers
  colour: blue
providers:
  - name: g-alpha
    dialect: openai
    base_url: http://127.0.0.1:9
    keys: [{value: v}]
    models: ["*"]
    max_concurrent: lots
  - {name: g-beta, dialect: klingon, base_url: "http://127.0.0.1:9", keys: [{value: w}],
     models: ["*"]}
groups:
  - name: grp-bad
    type: fallback
    providers: [{name: g-alpha, weight: 5}, nope]
"""
ISSUE_12_LINES = [
    "server.workers: many-workers (config.wrong_type) expected an integer (line 3)",
    "server.colour: colour (config.unknown_field) unknown key 'colour' (line 4)",
    "providers[0] (g-alpha).max_concurrent: lots (config.wrong_type) expected an integer "
    "(line 11)",
    "providers[1] (g-beta).dialect: klingon (config.bad_dialect) must be one of openai, "
    "responses, anthropic, gemini, bedrock",
    "groups[0] (grp-bad).providers[0] (g-alpha).weight: 5 "
    "(engine.group_weight_not_load_balance) weights apply to load-balance groups only; "
    "remove it or set type: load-balance",
    "groups[0] (grp-bad).providers[1] (nope): nope (engine.group_unknown_member) no provider "
    "has this name",
]


def test_issue_12_check_reports_every_problem_with_names_in_one_run(tmp_path):
    path = tmp_path / "gw.yaml"
    path.write_text(ISSUE_12_FILE)
    rc, out, problems = check(path)
    assert rc == 1, out
    assert out.splitlines() == ISSUE_12_LINES, out
    assert [p["path"] for p in problems][4] == "groups[0] (grp-bad).providers[0] (g-alpha).weight"


def test_issue_12_gwd_refusing_to_start_prints_the_same_lines(tmp_path):
    path = tmp_path / "gw.yaml"
    path.write_text(ISSUE_12_FILE)
    p = subprocess.run([binary("gwd"), "-c", str(path)], env=base_env(), cwd=tmp_path,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    out = (p.stdout + p.stderr).decode("utf-8", "replace")
    assert p.returncode == 1, out
    lines = out.splitlines()
    # every problem line, in order, as --check prints them (gwd may add its own lines)
    assert [ln for ln in lines if LINE_RE.match(ln)] == ISSUE_12_LINES, out
