# SPDX-License-Identifier: MIT
# tests/e2e/test_no_secrets.py - issue 12 point 8: after a session with failures (wrong,
# missing and misplaced gateway keys, an upstream refusing its key and echoing it, a
# refused reload, bad control calls), nothing an operator can see shows a secret: gwd's
# log, the control views, /metrics, the event stream, gwctl's outputs, the error
# bodies the clients got and the store's files on disk. Run with log.format text and json
# (issue 12 point 6: every json line parses); the events include request_finished and
# upstream_paused (point 4). Also: without a control token only /healthz, /readyz and
# /metrics answer, and gwd says so at startup.

import json
import signal
import subprocess

import pytest

from gwtest import (Lines, base_env, binary, chat_body, config, http_request, sha256_hex,
                    wait_until, write_config)

CTL_TOKEN = "CONTROL-TOKEN-SECRET-7f3a9c2e51"
GW_KEY_HASHED = "GATEWAY-KEY-SECRET-hashed-4b8d1e"   # given to gwd as key_sha256
GW_KEY_ENV = "GATEWAY-KEY-SECRET-from-env-9c2f7a"    # given to gwd by key_env
GW_KEY_WRONG = "GATEWAY-KEY-SECRET-wrong-1d5e8b"     # sent, never configured
UP_KEY_VALUE = "UPSTREAM-SECRET-by-value-3e7c1f"     # the failing provider's key, {value}
UP_KEY_ENV = "UPSTREAM-SECRET-from-env-8a2d6b"       # the answering provider's key, {env}
UP_KEY_NEW = "UPSTREAM-SECRET-in-refused-reload-5f0"  # only in the refused config
SECRETS = (CTL_TOKEN, GW_KEY_HASHED, GW_KEY_ENV, GW_KEY_WRONG, UP_KEY_VALUE, UP_KEY_ENV,
           UP_KEY_NEW)


def env():
    e = base_env()
    e["GW_CONTROL_TOKEN"] = CTL_TOKEN
    e["SEC_GW_KEY"] = GW_KEY_ENV
    e["SEC_UP_KEY"] = UP_KEY_ENV
    return e


def session_config(tmp_path, bad, good, log_format="text"):
    return config(
        tmp_path,
        [{"name": "up-bad", "dialect": "openai", "base_url": bad.url,
          "keys": [{"value": UP_KEY_VALUE}], "models": ["*"]},
         {"name": "up-good", "dialect": "openai", "base_url": good.url,
          "keys": [{"env": "SEC_UP_KEY"}], "models": ["gpt-test"]}],
        clients=[{"name": "hashed", "key_sha256": sha256_hex(GW_KEY_HASHED),
                  "limits": [{"per": "day", "requests": 1000}]},
                 {"name": "fromenv", "key_env": "SEC_GW_KEY",
                  "limits": [{"per": "day", "requests": 2}]}],
        failover={"failures_to_pause": 2},  # up-bad pauses: upstream_paused is seen too
        log={"format": log_format})


def gwctl(g, *args):
    p = subprocess.run([binary("gwctl"), "--url", g.control_url, "--token", CTL_TOKEN,
                        *args], env=env(), stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=30)
    return f"gwctl {' '.join(args)} rc={p.returncode}\n{p.stdout.decode()}{p.stderr.decode()}"


def gemini_body():
    return json.dumps({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}).encode()


def post(g, path, body, headers=None):
    return http_request(g.port, "POST", path, body, headers or {})


def seen(resp):
    return f"{resp.status} {json.dumps(resp.headers)} {resp.body.decode(errors='replace')}"


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_no_secret_shows_anywhere_after_a_session_with_failures(tmp_path, bench, gwd,
                                                                 log_format):
    # The failing upstream refuses its key and echoes it, as real providers partly do.
    bad = bench("--fault", "status", "--status", 401, "--error-body",
                json.dumps({"error": {"message": f"bad key {UP_KEY_VALUE}"}}))
    good = bench()
    g = gwd(session_config(tmp_path, bad, good, log_format), env=env())
    seen_by_clients = []

    class EventLines:
        def __init__(self):
            self.p = subprocess.Popen([binary("gwctl"), "--url", g.control_url, "--token",
                                       CTL_TOKEN, "--json", "events"], env=env(),
                                      stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE)
            self.out = Lines(self.p.stdout, "gwctl events")

    def subscribed():
        return "gw_events_subscribers 1" in g.control("/metrics", token=None).body.decode()

    ev = EventLines()
    try:
        wait_until(subscribed, what="gwctl events to subscribe")
        chat = body = chat_body()
        cc = "/v1/chat/completions"
        gem = "/v1beta/models/gpt-test:generateContent"
        for key in (GW_KEY_HASHED, GW_KEY_ENV, GW_KEY_ENV):  # fromenv reaches its limit
            seen_by_clients.append(g.chat(chat, key=key))
        seen_by_clients += [
            g.chat(chat, key=GW_KEY_WRONG),
            g.chat(chat, key=None),
            post(g, cc, body, {"authorization": "Basic " + GW_KEY_WRONG}),
            post(g, cc, body, {"x-api-key": GW_KEY_WRONG}),
            post(g, f"{gem}?key={GW_KEY_WRONG}", gemini_body()),
            post(g, f"{gem}?key={GW_KEY_HASHED}", gemini_body()),
            post(g, f"{gem}?alt=sse&key={GW_KEY_HASHED}".replace(
                "generateContent", "streamGenerateContent"), gemini_body()),
            post(g, gem, gemini_body(), {"x-goog-api-key": GW_KEY_WRONG}),
            post(g, gem, gemini_body(), {"x-goog-api-key": GW_KEY_HASHED}),
            post(g, "/v1/messages", json.dumps({
                "model": "gpt-test", "max_tokens": 16,
                "messages": [{"role": "user", "content": "hi"}]}).encode(),
                {"x-api-key": GW_KEY_HASHED, "anthropic-version": "2023-06-01"}),
            # only the failing upstream serves this model: its refusal reaches the client
            g.chat(chat_body(model="bad-only"), key=GW_KEY_HASHED),
            g.chat(chat_body(model="bad-only", stream=True), key=GW_KEY_HASHED),
        ]
        statuses = [r.status for r in seen_by_clients]
        # the session had what it is meant to have: answers after failover, refusals
        # (fromenv's two requests are within its limit of two: its alert is at 100%)
        assert statuses[:3] == [200, 200, 200], statuses
        assert statuses[3:8] == [401] * 5 and statuses[10] == 401, statuses
        assert statuses[8] == statuses[9] == statuses[11] == statuses[12] == 200, statuses
        assert statuses[13] >= 400 and statuses[14] >= 400, statuses
        assert bad.stats()["requests"] >= 2, bad.stats()
        ev.out.wait_for(r'"key_limit_alert"')  # fromenv's limit: one event at least

        # control plane: wrong and missing tokens, a bad body, a refused reload
        for tok in (GW_KEY_HASHED, "wrong-" + CTL_TOKEN[:-1], None):
            seen_by_clients.append(g.control("/control/v1/overview", token=tok))
        seen_by_clients.append(http_request(
            g.control_port, "PUT", "/control/v1/provider-model-spec",
            json.dumps({"provider": UP_KEY_VALUE, "model": GW_KEY_ENV}).encode(),
            headers={"authorization": "Bearer " + CTL_TOKEN}))
        seen_by_clients.append(http_request(
            g.control_port, "POST", "/control/v1/dry-run",
            json.dumps({"model": GW_KEY_HASHED, "key": GW_KEY_HASHED}).encode(),
            headers={"authorization": "Bearer " + CTL_TOKEN}))
        refused = session_config(tmp_path, bad, good, log_format)
        refused["providers"][0]["keys"] = [{"value": UP_KEY_NEW, "env": "SEC_UP_KEY"}]
        refused["providers"][1]["base_url"] = f"http://u:{UP_KEY_NEW}@127.0.0.1:1"
        write_config(tmp_path, refused)
        mark = g.err.count()
        g.signal(signal.SIGHUP)
        g.err.wait_for(r'(code=|"code":")reload_failed', start=mark)

        views = [seen(g.control(p)) for p in (
            "/control/v1/overview", "/control/v1/traffic?limit=100", "/control/v1/version",
            "/metrics", "/healthz", "/readyz")]
        cli = [gwctl(g, *a) for a in (
            ("status",), ("providers",), ("groups",), ("keys",), ("traffic",),
            ("--json", "status"), ("--json", "providers"), ("--json", "groups"),
            ("--json", "keys"), ("--json", "traffic"))]
    finally:
        ev.p.terminate()
        ev.p.wait(5)
    events = ev.out.text()
    assert g.stop() == 0
    log = g.out.text() + g.err.text()
    store = "".join(f.read_bytes().decode("latin-1")
                    for f in sorted((tmp_path / "store").rglob("*")) if f.is_file())

    everything = {
        "gwd log": log,
        "events": events,
        "control views": "\n".join(views),
        "gwctl": "\n".join(cli),
        "client answers": "\n".join(seen(r) for r in seen_by_clients),
        "store files": store,
    }
    assert "reload_failed" in log and "key_limit_alert" in events and "gpt-test" in store
    assert "request_finished" in events and "upstream_paused" in events, events
    assert "code=request" in log or '"code":"request"' in log
    if log_format == "json":  # every line of gwd's log is one JSON object
        for line in g.err.text().splitlines():
            json.loads(line)
        assert '"code":"reload_problem"' in log
    leaks = [(where, s) for where, text in everything.items() for s in SECRETS if s in text]
    assert not leaks, "secrets shown: " + "; ".join(
        f"{s} in {where}: ...{text[max(0, text.find(s) - 300):text.find(s) + 60]}..."
        for where, s in leaks for text in [everything[where]])


def test_without_a_token_only_health_and_metrics_answer_and_gwd_says_so(tmp_path, bench, gwd):
    b = bench()
    e = base_env()
    del e["GW_CONTROL_TOKEN"]
    cfg = config(tmp_path, [{"name": "up", "dialect": "openai", "base_url": b.url,
                             "keys": [{"value": "k"}], "models": ["*"]}])
    g = gwd(cfg, env=e)
    line = g.err.wait_for(r"code=control_no_token\b.*").string
    assert "GW_CONTROL_TOKEN" in line and "/healthz" in line and "/metrics" in line, line

    for path in ("/healthz", "/readyz", "/metrics"):
        assert http_request(g.control_port, "GET", path).status == 200, path
    for tok in (None, "anything", ""):
        for path in ("/control/v1/version", "/control/v1/overview", "/control/v1/traffic",
                     "/control/v1/events"):
            r = g.control(path, token=tok)
            assert r.status == 401, (path, r)
            assert r.json()["error"]["code"] == "gw.control.unauthorized", r
            assert "GW_CONTROL_TOKEN" in r.json()["error"]["message"], r
    r = http_request(g.control_port, "PUT", "/control/v1/provider-model-spec",
                     b'{"provider":"up","model":"m","context_window":5}')
    assert r.status == 401, r
    assert http_request(g.control_port, "GET", "/control/v1/nothing").status == 401


def test_with_a_token_gwd_does_not_log_control_no_token(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config(tmp_path, [{"name": "up", "dialect": "openai", "base_url": b.url,
                               "keys": [{"value": "k"}], "models": ["*"]}]))
    assert g.stop() == 0
    assert "control_no_token" not in g.err.text() + g.out.text()
