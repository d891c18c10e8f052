# SPDX-License-Identifier: MIT
# tests/e2e/test_bedrock.py - issue 15: AWS Bedrock upstreams (dialect bedrock, the
# Converse API) through gwd, raw HTTP against `gwbench upstream` started with --aws-*
# keys, so every request's SigV4 signature is checked there (a wrong one is refused with
# 403 and AWS's body). Every client shape reaches Bedrock, streamed (ConverseStream's
# binary eventstream) and not, with a parallel tool-call round trip, ids kept; model ids
# with ':' and ARNs percent-encoded in the path and signed as AWS signs them; a session
# token sent and signed; a wrong secret refused and failed over; a throttling answer and
# a throttlingException in the stream before content cool the credential and fail over;
# one after content ends the client's stream with its shape's error frame; a frame whose
# CRC is wrong is gw.upstream.protocol; a ValidationException goes back in the client's
# shape with Bedrock's type; usage and cost in the row; no AWS secret anywhere. The
# official SDKs run against a Bedrock upstream in test_sdk.py and test_sdk_messages.py.

import json
import subprocess

import pytest

from gwtest import (AWS_BENCH_ARGS, AWS_KEY_ID as AK, AWS_REGION as REGION, AWS_SECRET as SK,
                    REQ_ID_RE, base_env, binary, config, dry_run, overview, provider,
                    write_config)
from test_hub_four import READ, SHAPES, TEXT, TOOLS, send, sse

TOKEN = "gw-test-session-token-0123456789"
BR_MODEL = "anthropic.claude-3-5-sonnet-20240620-v1:0"


def br_bench(bench, *args, token=None):
    """A gwbench upstream that checks SigV4 with the test's credentials."""
    extra = ["--aws-session-token", token] if token else []
    return bench(*AWS_BENCH_ARGS, *extra, "--chunks", 3, "--text", "hello ", *args)


def br_provider(name, b, models=("m",), secret=SK, token=None, **extra):
    aws = {"region": REGION, "access_key_id": {"value": AK},
           "secret_access_key": {"value": secret}}
    if token:
        aws["session_token"] = {"value": token}
    p = {"name": name, "dialect": "bedrock", "base_url": b.url, "aws": aws,
         "models": list(models)}
    p.update(extra)
    return p


def headers_of(last):
    return {k.lower(): v for k, v in last["headers"].items()}


# ---- every client shape, streamed and not ----

@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_every_client_shape_reaches_a_bedrock_upstream(tmp_path, bench, gwd, stream):
    b = br_bench(bench)
    g = gwd(config(tmp_path, [br_provider("br", b)]))
    for client in SHAPES:
        r = send(g, client, "m", stream, [("user", "say hello")])

        assert r.status == 200, (client, r)
        assert REQ_ID_RE.match(r.headers["x-request-id"]), r.headers
        text, calls = READ[client](r, stream)
        assert text == TEXT and calls == [], (client, text, calls)
        last = b.last()
        assert last["path"] == "/model/m/converse" + ("-stream" if stream else ""), last
        h = headers_of(last)
        assert h["authorization"].startswith(
            f"AWS4-HMAC-SHA256 Credential={AK}/"), h  # the bench checked it: 200
        assert f"/{REGION}/bedrock/aws4_request" in h["authorization"], h
        assert h["content-type"] == "application/json", h
        assert "x-amz-date" in h and "x-amz-content-sha256" in h, h
        row = g.wait_row(r.headers["x-request-id"])
        assert row["upstream"] == "br" and row["status"] == 200, row
        assert row["usage"]["output_tokens"] == 3 and not row["usage"]["estimated"], row
        assert row["usage"]["input_tokens"] > 0, row
    assert b.stats()["aws_auth_refused"] == 0


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_parallel_tool_calls_round_trip_through_bedrock_with_ids_kept(tmp_path, bench, gwd,
                                                                      stream):
    b = br_bench(bench, "--tool-call", ",".join(TOOLS))
    g = gwd(config(tmp_path, [br_provider("br", b)]))
    for client in SHAPES:
        ask = [("user", "weather and time in Paris?")]
        r = send(g, client, "m", stream, ask, tools=True)

        assert r.status == 200, (client, r)
        text, calls = READ[client](r, stream)
        assert [(n, json.loads(a)) for _, n, a in calls] == [
            ("get_weather", {"city": "Paris"}), ("get_time", {"city": "Tokyo"})], (client, calls)
        # the tools reached Bedrock as toolConfig
        sent = b.last_body()
        assert [t["toolSpec"]["name"] for t in sent["toolConfig"]["tools"]] == TOOLS, sent
        ids = [i for i, _, _ in calls]
        if client != "gemini":
            assert all(ids) and len(set(ids)) == 2, (client, ids)
        results = [(i, n, t) for (i, n, _), t in zip(calls, ["sunny", "noon"])]
        r = send(g, client, "m", stream, ask + [("calls", calls), ("results", results)],
                 tools=True)

        assert r.status == 200, (client, r)
        text, calls2 = READ[client](r, stream)
        assert calls2 == [], (client, calls2)
        # Bedrock got toolUse and toolResult blocks with the same ids
        sent = b.last_body()
        uses = [c["toolUse"]["toolUseId"] for m in sent["messages"] for c in m["content"]
                if "toolUse" in c]
        res = [c["toolResult"]["toolUseId"] for m in sent["messages"] for c in m["content"]
               if "toolResult" in c]
        assert len(uses) == 2 and res == uses, sent
        if client != "gemini":
            assert uses == ids, (client, uses, ids)
        roles = [m["role"] for m in sent["messages"]]
        assert roles == ["user", "assistant", "user"], roles  # alternating, results as user


# ---- the path and the signature ----

def test_model_ids_and_arns_are_percent_encoded_and_signed(tmp_path, bench, gwd):
    arn = ("arn:aws:bedrock:us-west-2:123456789012:inference-profile/"
           "us.anthropic.claude-3-haiku-20240307-v1:0")
    b = br_bench(bench)
    g = gwd(config(tmp_path, [br_provider("br", b, models=[BR_MODEL, arn])]))

    for model, path in [(BR_MODEL, "anthropic.claude-3-5-sonnet-20240620-v1%3A0"),
                        (arn, "arn%3Aaws%3Abedrock%3Aus-west-2%3A123456789012%3Ainference-"
                              "profile%2Fus.anthropic.claude-3-haiku-20240307-v1%3A0")]:
        for stream in (False, True):
            r = send(g, "chat", model, stream, [("user", "hi")])
            assert r.status == 200, (model, r)
            assert READ["chat"](r, stream)[0] == TEXT
            want = f"/model/{path}/converse" + ("-stream" if stream else "")
            assert b.last()["path"] == want, b.last()
    assert b.stats()["aws_auth_refused"] == 0


def test_session_token_is_sent_and_signed(tmp_path, bench, gwd):
    b = br_bench(bench, token=TOKEN)
    g = gwd(config(tmp_path, [br_provider("br", b, token=TOKEN)]))

    r = send(g, "messages", "m", True, [("user", "hi")])

    assert r.status == 200, r
    h = headers_of(b.last())
    assert h["x-amz-security-token"] == TOKEN, h
    assert "x-amz-security-token" in h["authorization"].split("SignedHeaders=")[1], h
    assert b.stats()["aws_auth_refused"] == 0


def test_a_wrong_secret_is_refused_by_aws_and_fails_over(tmp_path, bench, gwd):
    b = br_bench(bench)
    other = bench("--chunks", 2, "--text", "other ")
    g = gwd(config(tmp_path, [br_provider("br", b, secret="not-the-secret"),
                              provider("chat", other, models=["m"])]))

    r = send(g, "chat", "m", False, [("user", "hi")])

    assert r.status == 200, r
    assert READ["chat"](r, False)[0] == "other other ", r
    assert b.stats()["aws_auth_refused"] == 1
    row = g.wait_row(r.headers["x-request-id"])
    first = row["attempts"][0]
    assert first["upstream"] == "br" and first["status"] == 403, row
    assert row["upstream"] == "chat", row
    log = g.log(400)
    assert SK not in log and "not-the-secret" not in log, "a secret in the log"


# ---- failures ----

def test_throttling_answer_cools_the_credential_and_fails_over(tmp_path, bench, gwd):
    b = br_bench(bench, "--fault", "status", "--status", 429)
    other = bench("--chunks", 2, "--text", "other ")
    g = gwd(config(tmp_path, [br_provider("br", b), provider("chat", other, models=["m"])]))

    r = send(g, "chat", "m", True, [("user", "hi")])

    assert r.status == 200 and READ["chat"](r, True)[0] == "other other ", r
    row = g.wait_row(r.headers["x-request-id"])
    assert [(a["upstream"], a["status"]) for a in row["attempts"]][:1] == [("br", 429)], row
    # the credential (the secret access key's fingerprint) cools, as for a 429 answer
    sets = overview(g)["quota"]["br"]["sets"]
    (cred,) = [c for s in sets for c in s["credentials"] if c.get("cooldown")]
    assert cred["cooldown"]["hits"] == 1 and cred["fp"] == row["attempts"][0]["credential"], sets


def test_throttling_exception_before_content_fails_over(tmp_path, bench, gwd):
    b = br_bench(bench, "--fault", "error-mid", "--drop-after", 0)
    other = bench("--chunks", 2, "--text", "other ")
    g = gwd(config(tmp_path, [br_provider("br", b), provider("chat", other, models=["m"])]))

    r = send(g, "chat", "m", True, [("user", "hi")])

    assert r.status == 200 and READ["chat"](r, True)[0] == "other other ", r
    row = g.wait_row(r.headers["x-request-id"])
    first = row["attempts"][0]
    assert first["upstream"] == "br" and first["status"] == 429, row  # throttling: a 429


@pytest.mark.parametrize("client", SHAPES)
def test_exception_after_content_ends_with_the_client_frame(tmp_path, bench, gwd, client):
    b = br_bench(bench, "--fault", "error-mid", "--drop-after", 2)
    g = gwd(config(tmp_path, [br_provider("br", b)]))

    r = send(g, client, "m", True, [("user", "x")])

    assert r.status == 200, r
    ev = sse(r.body)
    last = ev[-1]
    if client == "chat":
        assert "error" in last[1], ev
    elif client == "messages":
        assert last[0] == "error" and last[1]["error"]["type"] == "overloaded_error", ev
    elif client == "responses":
        assert last[0] == "response.failed", ev
    else:
        assert last[1]["error"]["status"] == "UNAVAILABLE", last
    row = g.wait_row(r.headers["x-request-id"])
    assert row["outcome"] == "failed" or row["code"] != "ok", row


def test_a_frame_with_a_bad_crc_is_a_protocol_failure(tmp_path, bench, gwd):
    # gwbench's garbage-sse on the Bedrock route: after two good deltas, a frame whose
    # message CRC is one bit off (its prelude CRC right)
    b = br_bench(bench, "--fault", "garbage-sse")
    g = gwd(config(tmp_path, [br_provider("br", b)]))

    r = send(g, "chat", "m", True, [("user", "hi")])

    assert r.status == 200, r
    ev = sse(r.body)
    assert ev[-1][1]["error"]["code"] == "gw.upstream.protocol", ev  # Chat's error chunk
    row = g.wait_row(r.headers["x-request-id"])
    assert row["code"] == "gw.upstream.protocol", row
    assert row["attempts"][0]["outcome"] == "failed", row


@pytest.mark.parametrize("client", ["chat", "messages"])
def test_validation_error_goes_back_in_the_client_shape(tmp_path, bench, gwd, client):
    b = br_bench(bench, "--fault", "status", "--status", 400)
    g = gwd(config(tmp_path, [br_provider("br", b)]))

    r = send(g, client, "m", False, [("user", "hi")])

    assert r.status == 400, r
    body = r.json()
    # Bedrock's message as it sent it; its x-amzn-ErrorType (ValidationException) as
    # the client shape's own type, which the SDKs map to BadRequestError
    if client == "messages":
        assert body["type"] == "error", body
    assert body["error"]["type"] == "invalid_request_error", body
    assert body["error"]["message"] == "fake failure", body  # gwbench's {"message"}


# ---- everything else as for other upstreams ----

def test_slow_start_and_min_speed_judge_the_eventstream(tmp_path, bench, gwd):
    # slow start: a first token later than stream_start_wait_secs moves the request on
    slow = br_bench(bench, "--ttft-ms", 8000)
    fast = bench("--chunks", 2, "--text", "fast ")
    g = gwd(config(tmp_path, [br_provider("br", slow), provider("chat", fast, models=["m"])],
                   failover={"next_on_slow_start": True, "stream_start_wait_secs": 5}))

    r = send(g, "chat", "m", True, [("user", "hi")])

    assert r.status == 200 and READ["chat"](r, True)[0] == "fast fast ", r
    row = g.wait_row(r.headers["x-request-id"])
    assert [(a["upstream"], a["outcome"]) for a in row["attempts"]] == [
        ("br", "slow_start"), ("chat", "ok")], row
    slow.wait_stat(lambda s: s["streams_aborted"] == 1, "the slow eventstream aborted")


def test_min_speed_cuts_a_slow_eventstream(tmp_path, bench, gwd):
    text = "0123456789" * 4  # 40 bytes: 10 tokens a delta
    b = bench(*AWS_BENCH_ARGS, "--pace", "10x100,30x1000", "--text", text)
    g = gwd(config(tmp_path, [br_provider("br", b, min_speed={"tokens_per_sec": 35,
                                                              "window_secs": 5})]))

    r = send(g, "chat", "m", True, [("user", "hi")])

    assert r.status == 200, r
    ev = sse(r.body)
    assert ev[-1][1]["error"]["code"] == "gw.upstream.too_slow", ev[-1]
    row = g.wait_row(r.headers["x-request-id"])
    assert row["outcome"] == "too_slow" and row["code"] == "gw.upstream.too_slow", row
    assert row["usage"]["output_tokens"] >= 10, row
    b.wait_stat(lambda s: s["streams_aborted"] == 1, "the cut eventstream aborted")


def test_cost_dry_run_metrics_and_no_secret_shown(tmp_path, bench, gwd):
    b = br_bench(bench, "--cached", 2)
    (tmp_path / "prices.yaml").write_text(
        "models:\n  - {model: m, input: 3.0, output: 15.0, cache_read: 0.3}\n")
    g = gwd(config(tmp_path, [br_provider("br", b)], prices="prices.yaml"))

    r = send(g, "messages", "m", False, [("user", "hi")])

    assert r.status == 200, r
    row = g.wait_row(r.headers["x-request-id"])
    u = row["usage"]
    assert u["output_tokens"] == 3 and u["cache_read_tokens"] == 2 and not u["estimated"], row
    assert row["cost_usd"] == pytest.approx(
        (u["input_tokens"] * 3.0 + u["output_tokens"] * 15.0 + 2 * 0.3) / 1e6, abs=1e-6), row
    assert row["cost_usd"] > 0, row
    assert r.json()["usage"]["cache_read_input_tokens"] == 2, r.json()
    (cand,) = dry_run(g, "m")["candidates"]
    assert cand["provider"] == "br", cand
    page = g.control("/metrics", token=None).body.decode()
    assert 'upstream="br"' in page, page[:2000]
    # the AWS secret never leaves the config: not in views, pages, rows or logs
    seen = (json.dumps(overview(g)) + page + json.dumps(g.traffic()) + g.log(400)
            + json.dumps(b.last()))
    assert SK not in seen, "the AWS secret was shown"


def test_check_validates_the_aws_block_without_showing_secrets(tmp_path):
    bad = config(tmp_path, [{"name": "br", "dialect": "bedrock", "models": ["m"],
                             "aws": {"region": "us-west-2",
                                     "access_key_id": {"value": AK},
                                     "secret_access_key": {"env": "GW_TEST_UNSET_AWS"}}},
                            {"name": "br2", "dialect": "bedrock", "models": ["m"],
                             "keys": [{"value": SK}]}])
    p = subprocess.run([binary("gwd"), "--check", str(write_config(tmp_path, bad))],
                       env=base_env(), stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    out = (p.stdout + p.stderr).decode()
    assert p.returncode != 0, out
    assert ("providers[0] (br).aws.secret_access_key.env: GW_TEST_UNSET_AWS "
            "(config.env_unset)") in out, out
    assert "providers[1] (br2).keys: (keys) (config.aws)" in out, out
    assert SK not in out, out
    good = config(tmp_path, [br_provider("br", type("B", (), {"url": "http://127.0.0.1:9"}))])
    p = subprocess.run([binary("gwd"), "--check", str(write_config(tmp_path, good, "ok.yaml"))],
                       env=base_env(), stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    assert p.returncode == 0, (p.stdout + p.stderr).decode()


def test_a_model_error_424_fails_over(tmp_path, bench, gwd):
    b = br_bench(bench, "--fault", "status", "--status", 424)  # ModelErrorException
    other = bench("--chunks", 2, "--text", "other ")
    g = gwd(config(tmp_path, [br_provider("br", b), provider("chat", other, models=["m"])]))

    r = send(g, "chat", "m", False, [("user", "hi")])

    assert r.status == 200 and READ["chat"](r, False)[0] == "other other ", r
    row = g.wait_row(r.headers["x-request-id"])
    assert [(a["upstream"], a["status"]) for a in row["attempts"]] == [("br", 424),
                                                                       ("chat", 200)], row
