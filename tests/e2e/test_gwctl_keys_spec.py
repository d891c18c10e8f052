# SPDX-License-Identifier: MIT
# tests/e2e/test_gwctl_keys_spec.py - `gwctl keys` (each key's concurrency and limits
# with used/max/resets/reached, DESIGN.md 14, 18) and the model-spec save:
# PUT /control/v1/provider-model-spec and `gwctl spec set|rm` edit one
# providers[].model_specs entry of the config file, leave every other byte as it was,
# reload, and the entry wins in GET /v1/models; refused edits leave the file alone.

import json

from gwtest import (CONTROL_TOKEN, bearer, chat_body, config, gwctl_run, http_request, provider,
                    sha256_hex, to_yaml, wait_until)

KEY = "gw-key-limited-0123456789"


def key_view(g, name):
    r = g.control("/control/v1/overview")
    assert r.status == 200, r
    for k in r.json()["keys"]:
        if k["name"] == name:
            return k
    raise AssertionError(f"key {name} not in the overview")


def test_gwctl_keys_shows_each_limit_with_used_max_and_reached(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b)],
                   clients=[{"name": "lim", "key_sha256": sha256_hex(KEY), "max_concurrent": 3,
                             "limits": [{"per": "day", "requests": 2},
                                        {"per": "month", "cost": 5.0},
                                        {"per": "hour", "tokens": 1000000}]},
                            {"name": "free", "key_sha256": sha256_hex("free-key")}]))
    for _ in range(2):
        r = g.chat(chat_body(), key=KEY)
        assert r.status == 200, r

    def settled():
        k = key_view(g, "lim")
        day = [x for x in k["limits"] if x["per"] == "day"][0]
        return k if day["used"] == 2 else None
    k = wait_until(settled, what="two requests counted on the day limit")

    # --json: the API's keys array as it is
    rc, out, err = gwctl_run(g, "keys", json_out=True)
    assert rc == 0, err
    keys = json.loads(out)["keys"]
    lim = [x for x in keys if x["name"] == "lim"][0]
    assert lim["max_concurrent"] == 3 and lim["in_flight"] == 0 and lim["waiting"] == 0
    by = {(x["per"], x["measure"]): x for x in lim["limits"]}
    assert (by["day", "requests"]["used"], by["day", "requests"]["max"],
            by["day", "requests"]["reached"]) == (2, 2, True)
    assert by["month", "cost"]["max"] == 5.0 and by["month", "cost"]["reached"] is False
    assert by["hour", "tokens"]["used"] > 0 and by["hour", "tokens"]["reached"] is False
    assert lim["unpriced_models"] == ["gpt-test"]  # no price table: the cost limit is blind
    assert [x for x in keys if x["name"] == "free"][0]["limits"] == []
    assert k["limits"] == lim["limits"]

    # the table: one line per limit, concurrency on the key's first line
    rc, out, err = gwctl_run(g, "keys")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["NAME", "IN", "FLIGHT", "WAITING"]
    day = [ln for ln in lines if ln.startswith("lim ") and " day " in ln][0]
    assert day.split()[:7] == ["lim", "0/3", "0", "day", "requests", "2", "2"]
    assert day.rstrip().endswith("REACHED") and "100%" in day
    month = [ln for ln in lines if ln.startswith("lim ") and " month " in ln][0]
    assert "$0.00" in month and "$5.00" in month and "REACHED" not in month
    hour = [ln for ln in lines if ln.startswith("lim ") and " hour " in ln][0]
    assert "tokens" in hour and "1000000" in hour
    free = [ln for ln in lines if ln.startswith("free ")]
    assert len(free) == 1 and free[0].split()[:3] == ["free", "0", "0"]
    assert "lim: unpriced models, not counted by its cost limit: gpt-test" in lines


# ---------------------------------------------------------------- model specs

def spec_config(tmp_path, b):
    """A config file with comments, a flow-style provider and a price-carrying entry, so
    the bytes outside the edited entry have something to lose."""
    cfg = config(tmp_path, [provider("first", b, models=["m1"]),
                            provider("second", b, models=["m2"],
                                     model_specs={"m2": {"context_window": 2000,
                                                         "input": 1.5}})])
    text = to_yaml(cfg)
    text = text.replace('providers:\n', 'providers:   # upstreams\n\n  # the first one\n', 1)
    return "# team gateway\n" + text + "\n# end of file\n"


def split_around_first(text):
    """(prefix, suffix): the bytes before and after provider first's entry."""
    a = text.index('  - name: "first"')
    z = text.index('  - name: "second"')
    return text[:a], text[z:]


def models_by_id(g):
    r = http_request(g.port, "GET", "/v1/models", headers=bearer("gw-key-alice-0123456789abcdef"))
    assert r.status == 200, r
    return {m["id"]: m for m in r.json()["data"]}


def test_gwctl_spec_set_saves_only_the_entry_reloads_and_wins_in_models(tmp_path, bench, gwd):
    b = bench()
    g = gwd(spec_config(tmp_path, b))
    path = g.config_path
    before = path.read_bytes().decode()
    assert "context_window" not in models_by_id(g)["m1"]

    rc, out, err = gwctl_run(g, "spec", "set", "first", "m1", "--context-window", 64000,
                             "--max-output-tokens", 8192, json_out=True)
    assert rc == 0, err
    ans = json.loads(out)
    reload = ans.pop("reload")
    assert ans == {"provider": "first", "model": "m1", "context_window": 64000,
                   "max_output_tokens": 8192, "present": True, "saved": True,
                   "reloaded": True}
    assert reload["changed"]["providers"]["changed"] == ["first"]
    after = path.read_bytes().decode()
    pre, suf = split_around_first(before)
    assert after.startswith(pre) and after.endswith(suf)
    # inside the entry: the old lines are all there, one line was added
    old_entry = before[len(pre):len(before) - len(suf)]
    new_entry = after[len(pre):len(after) - len(suf)]
    added = [ln for ln in new_entry.splitlines() if ln not in old_entry.splitlines()]
    assert added == ['    model_specs: {"m1": {context_window: 64000, max_output_tokens: 8192}}']
    m = models_by_id(g)["m1"]  # answered after the reload: the entry is live
    assert (m["context_window"], m["max_output_tokens"]) == (64000, 8192)

    # one field at a time; the table output for people
    rc, out, err = gwctl_run(g, "spec", "set", "first", "m1", "--max-output-tokens", "none")
    assert rc == 0, err
    assert "context_window" in out and "64000" in out and "reloaded" in out
    m = models_by_id(g)["m1"]
    assert m["context_window"] == 64000 and "max_output_tokens" not in m

    # rm: the entry goes, and with it model_specs; the file is what it was
    rc, out, err = gwctl_run(g, "spec", "rm", "first", "m1", json_out=True)
    assert rc == 0, err
    ans = json.loads(out)
    assert (ans["present"], ans["context_window"], ans["max_output_tokens"],
            ans["reloaded"]) == (False, None, None, True)
    assert path.read_bytes().decode() == before
    assert "context_window" not in models_by_id(g)["m1"]

    # removing what is not there saves nothing
    rc, out, err = gwctl_run(g, "spec", "rm", "first", "m1", json_out=True)
    assert rc == 0, err
    assert json.loads(out)["saved"] is False
    assert "reloaded" in g.err.text()


def test_spec_set_keeps_the_prices_of_an_existing_entry(tmp_path, bench, gwd):
    b = bench()
    g = gwd(spec_config(tmp_path, b))
    before = g.config_path.read_bytes().decode()
    rc, out, err = gwctl_run(g, "spec", "set", "second", "m2", "--max-output-tokens", 500)
    assert rc == 0, err
    after = g.config_path.read_bytes().decode()
    assert after.startswith(before[:before.index('  - name: "second"')])
    assert "m2: {context_window: 2000, input: 1.5, max_output_tokens: 500}" in after
    m = models_by_id(g)["m2"]
    assert (m["context_window"], m["max_output_tokens"]) == (2000, 500)
    rc, out, err = gwctl_run(g, "spec", "rm", "second", "m2")
    assert rc == 0, err
    # both fields gone, the price keeps the entry
    assert "m2: {input: 1.5}" in g.config_path.read_bytes().decode()


def put_spec(g, body, token=CONTROL_TOKEN):
    return http_request(g.control_port, "PUT", "/control/v1/provider-model-spec",
                        json.dumps(body), headers=bearer(token))


def test_spec_refusals_leave_the_file_byte_identical(tmp_path, bench, gwd):
    b = bench()
    g = gwd(spec_config(tmp_path, b))
    before = g.config_path.read_bytes()

    rc, out, err = gwctl_run(g, "spec", "set", "first", "m1", "--context-window", 0)
    assert rc == 1
    assert "config.model_spec_zero" in err and "HTTP 400" in err
    rc, out, err = gwctl_run(g, "spec", "set", "first", "m1", "--context-window", 100000001)
    assert rc == 1 and "config.range" in err
    rc, out, err = gwctl_run(g, "spec", "set", "nobody", "m1", "--context-window", 1000)
    assert rc == 1 and "gw.control.unknown_provider" in err and "HTTP 404" in err
    rc, out, err = gwctl_run(g, "spec", "set", "first", "*", "--context-window", 1000)
    assert rc == 1 and "config.model_spec_wildcard" in err
    rc, out, err = gwctl_run(g, "spec", "set", "first", "m1", "--context-window", "lots")
    assert rc == 2  # a usage error: never sent
    rc, out, err = gwctl_run(g, "spec", "set", "first", "m1")
    assert rc == 2

    cases = [
        ({"provider": "first", "model": "m1", "context_window": "big"}, 400,
         "config.wrong_type"),
        ({"provider": "first", "model": "m1", "context_window": 1.5}, 400, "config.wrong_type"),
        ({"provider": "first", "model": "m1", "context_window": -3}, 400, "config.range"),
        ({"provider": "first", "model": " ", "context_window": 10}, 400,
         "config.model_spec_blank_model"),
        ({"provider": "first", "model": "m1"}, 400, "gw.bad_request"),
        ({"provider": "first", "model": "m1", "context": 5}, 400, "gw.bad_request"),
        ({"model": "m1", "context_window": 5}, 400, "gw.bad_request"),
        ({"provider": "ghost", "model": "m1", "context_window": 5}, 404,
         "gw.control.unknown_provider"),
    ]
    for body, status, code in cases:
        r = put_spec(g, body)
        assert r.status == status, (body, r)
        assert r.json()["error"]["code"] == code, (body, r)
    r = http_request(g.control_port, "PUT", "/control/v1/provider-model-spec", "{not json",
                     headers=bearer(CONTROL_TOKEN))
    assert r.status == 400 and r.json()["error"]["code"] == "gw.bad_request"
    r = http_request(g.control_port, "GET", "/control/v1/provider-model-spec",
                     headers=bearer(CONTROL_TOKEN))
    assert r.status == 405 and r.headers["allow"] == "PUT"
    r = put_spec(g, {"provider": "first", "model": "m1", "context_window": 5}, token="wrong")
    assert r.status == 401
    assert g.config_path.read_bytes() == before


def test_spec_on_a_file_that_no_longer_loads_is_refused_untouched(tmp_path, bench, gwd):
    b = bench()
    g = gwd(spec_config(tmp_path, b))
    broken = g.config_path.read_bytes().replace(b"drain_secs: 10", b"drain_secs: oops")
    g.config_path.write_bytes(broken)
    r = put_spec(g, {"provider": "first", "model": "m1", "context_window": 5})
    assert r.status == 409, r
    err = r.json()["error"]
    assert err["code"] == "gw.control.config_invalid", r
    assert err["problems"][0]["code"] == "config.wrong_type", r
    assert g.config_path.read_bytes() == broken
