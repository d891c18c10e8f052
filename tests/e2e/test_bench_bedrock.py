# SPDX-License-Identifier: MIT
# tests/e2e/test_bench_bedrock.py - `gwbench upstream` answering AWS Bedrock's Converse
# and ConverseStream (POST .../model/{modelId}/converse, .../converse-stream) directly,
# without gwd. The test signs its requests with its own SigV4 signer (checked first
# against AWS's published test vectors) and reads the application/vnd.amazon.eventstream
# body with its own decoder (binascii.crc32): an implementation independent of both
# bench/ and dialects/. Covered: the answer and its usage, every frame's CRCs and
# headers, the event order for text, tool calls and reasoning, the tool-result echo,
# percent-encoded model ids, the refusals of bad signatures (wrong secret, unknown key,
# stale date, body hash, scope, session token) with AWS's bodies, their count and their
# stderr line, the status, error-mid, garbage-sse, drop-mid and hang-content faults in
# Bedrock's shape, and --fault-key matching the access key id.

import binascii
import hashlib
import hmac
import http.client
import json
import re
import struct
import time
import urllib.parse

import pytest

from gwtest import WAIT_TIMEOUT, ceil_div
from test_bench_responses_gemini import quiet_for, raw_send, read_until

KEY_ID = "AKIDBENCHEXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYbenchKEY"
REGION = "us-west-2"
MODEL = "anthropic.claude-3-5-sonnet-20240620-v1:0"
ARN = "arn:aws:bedrock:us-west-2:123456789012:inference-profile/us.anthropic.claude-x-v1:0"
SIG = "Z3diZW5jaCByZWFzb25pbmc="  # base64("gwbench reasoning"), every shape's signature
BAD_SIG = ("The request signature we calculated does not match the signature you provided. "
           "Check your AWS Secret Access Key and signing method. Consult the service "
           "documentation for details.")
BAD_TOKEN = "The security token included in the request is invalid."
THROTTLED = "Too many requests, please wait before trying again."
ES_CTYPE = "application/vnd.amazon.eventstream"
EVENT_HEADERS = {":content-type", ":event-type", ":message-type"}


def dumps(b):
    return json.dumps(b, separators=(",", ":")).encode()


# ---------------------------------------------------------------- the SigV4 signer

def amz_date(t=None):
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if t is None else t))


def canonical_uri(path):
    """AWS's non-S3 rule: the wire path normalized, then URI-encoded once more."""
    segs = []
    for s in path.split("/"):
        if s in ("", "."):
            continue
        if s == "..":
            if segs:
                segs.pop()
        else:
            segs.append(s)
    norm = "/" + "/".join(segs) + ("/" if segs and path.endswith("/") else "")
    return urllib.parse.quote(norm, safe="/-_.~")


def canonical_query(query):
    pairs = []
    for item in query.split("&") if query else []:
        k, _, v = item.partition("=")
        pairs.append((urllib.parse.quote(urllib.parse.unquote(k), safe="-_.~"),
                      urllib.parse.quote(urllib.parse.unquote(v), safe="-_.~")))
    return "&".join(f"{k}={v}" for k, v in sorted(pairs))


def hmac256(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def sign(method, target, headers, body, key_id=KEY_ID, secret=SECRET, region=REGION,
         service="bedrock", date=None, payload_hash=None):
    """Adds Authorization (and x-amz-date unless given) to <headers> (dict of lower-case
    names) for <method> <target> (path?query as sent) with <body>; every header signed."""
    headers.setdefault("x-amz-date", date or amz_date())
    d = headers["x-amz-date"]
    path, _, query = target.partition("?")
    names = sorted(headers)
    creq = "\n".join([
        method, canonical_uri(path), canonical_query(query),
        "".join(f"{n}:{' '.join(str(headers[n]).split())}\n" for n in names),
        ";".join(names),
        payload_hash or hashlib.sha256(body).hexdigest()])
    scope = f"{d[:8]}/{region}/{service}/aws4_request"
    sts = "\n".join(["AWS4-HMAC-SHA256", d, scope, hashlib.sha256(creq.encode()).hexdigest()])
    k = hmac256(("AWS4" + secret).encode(), d[:8])
    for part in (region, service, "aws4_request"):
        k = hmac256(k, part)
    sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={key_id}/{scope}, "
                                f"SignedHeaders={';'.join(names)}, Signature={sig}")
    return headers


@pytest.mark.parametrize("query,want", [
    ("", "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
    ("Param2=value2&Param1=value1",
     "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"),
])
def test_the_tests_signer_matches_aws_published_vectors(query, want):
    # get-vanilla and get-vanilla-query-order-key-case of AWS's SigV4 test suite: the
    # signer the rest of this file trusts is AWS's, not gwbench's mirror image.
    h = sign("GET", "/?" + query if query else "/", {"host": "example.amazonaws.com"}, b"",
             key_id="AKIDEXAMPLE", secret="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
             region="us-east-1", service="service", date="20150830T123600Z")
    assert h["authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        f"SignedHeaders=host;x-amz-date, Signature={want}")


# ---------------------------------------------------------------- the eventstream decoder

def es_headers(block):
    out, i = {}, 0
    while i < len(block):
        n = block[i]
        name = block[i + 1:i + 1 + n].decode()
        t = block[i + 1 + n]
        i += 2 + n
        if t in (0, 1):
            v = t == 0
        elif t in (2, 3, 4, 5, 8):
            size = {2: 1, 3: 2, 4: 4, 5: 8, 8: 8}[t]
            v = int.from_bytes(block[i:i + size], "big", signed=True)
            i += size
        elif t in (6, 7):
            ln = int.from_bytes(block[i:i + 2], "big")
            v = block[i + 2:i + 2 + ln]
            v = v.decode() if t == 7 else v
            i += 2 + ln
        elif t == 9:
            v = block[i:i + 16]
            i += 16
        else:
            raise AssertionError(f"header value type {t}")
        assert name not in out, name
        out[name] = v
    assert i == len(block)
    return out


def es_frames(raw):
    """[(headers, payload bytes, message CRC ok)] of an eventstream body; asserts that
    the frames tile the body exactly and that every prelude CRC holds."""
    out, i = [], 0
    while i < len(raw):
        assert len(raw) - i >= 16, raw[i:]
        total, hlen, pcrc = struct.unpack(">III", raw[i:i + 12])
        assert binascii.crc32(raw[i:i + 8]) == pcrc, "prelude CRC"
        assert 16 + hlen <= total <= len(raw) - i, (total, hlen, len(raw) - i)
        msg = raw[i:i + total]
        (mcrc,) = struct.unpack(">I", msg[-4:])
        out.append((es_headers(msg[12:12 + hlen]), msg[12 + hlen:-4],
                    binascii.crc32(msg[:-4]) == mcrc))
        i += total
    return out


def es_events(raw):
    """[(event type, payload JSON)] of a body of events only; asserts every message's
    CRCs and its headers (exactly :event-type, :content-type application/json and
    :message-type event) and the padding member "p" of each payload, then drops it."""
    out = []
    for h, payload, crc_ok in es_frames(raw):
        assert crc_ok, ("message CRC", h)
        assert set(h) == EVENT_HEADERS, h
        assert h[":message-type"] == "event" and h[":content-type"] == "application/json", h
        j = json.loads(payload)
        assert isinstance(j.pop("p"), str), j
        out.append((h[":event-type"], j))
    return out


# ---------------------------------------------------------------- requests

def path_of(model=MODEL, stream=False, prefix=""):
    op = "converse-stream" if stream else "converse"
    return f"{prefix}/model/{urllib.parse.quote(model, safe='')}/{op}"


def converse_body(text="say hello", tools=False, **extra):
    b = {"messages": [{"role": "user", "content": [{"text": text}]}],
         "inferenceConfig": {"maxTokens": 64}}
    if tools:
        b["toolConfig"] = {"tools": [{"toolSpec": {"name": "get_weather",
                                                   "inputSchema": {"json": {"type": "object"}}}}]}
    b.update(extra)
    return dumps(b)


def send(up, target, body, headers=None, signed=True, method="POST", **sign_kw):
    """One request on its own connection; <headers> are added before signing (x-bench-*
    ones included, as a gateway would sign what it forwards)."""
    h = {"host": f"127.0.0.1:{up.port}", "content-type": "application/json",
         "x-amz-content-sha256": hashlib.sha256(body).hexdigest()}
    h.update({k.lower(): v for k, v in (headers or {}).items()})
    if signed:
        sign(method, target, h, body, **sign_kw)
    conn = http.client.HTTPConnection("127.0.0.1", up.port, timeout=WAIT_TIMEOUT)
    try:
        conn.request(method, target, body=body, headers=h)
        r = conn.getresponse()
        status, hdrs = r.status, {k.lower(): v for k, v in r.getheaders()}
        try:
            data, complete = r.read(), True
        except http.client.IncompleteRead as e:
            data, complete = e.partial, False
        return status, hdrs, data, complete
    finally:
        conn.close()


def bedrock(bench, *args):
    return bench("--aws-access-key-id", KEY_ID, "--aws-secret-access-key", SECRET,
                 "--aws-region", REGION, *args)


# ================================================================= answers

def test_converse_answers_the_converse_shape_with_split_usage(bench):
    up = bedrock(bench, "--chunks", 3, "--cached", 2, "--cache-write", 1)
    body = converse_body()
    target = path_of()

    status, h, data, _ = send(up, target, body)

    assert status == 200, data
    assert h["content-type"] == "application/json"
    j = json.loads(data)
    assert j["output"] == {"message": {"role": "assistant",
                                       "content": [{"text": "hello hello hello "}]}}
    assert j["stopReason"] == "end_turn"
    p = ceil_div(len(body), 4)
    assert j["usage"] == {"inputTokens": p - 3, "outputTokens": 3, "totalTokens": p + 3,
                          "cacheReadInputTokens": 2, "cacheWriteInputTokens": 1}
    assert isinstance(j["metrics"]["latencyMs"], int)
    last = up.last()
    assert last["path"] == target and "%3A0/converse" in target
    assert last["headers"]["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={KEY_ID}/")
    assert last["body"] == body.decode()
    s = up.stats()
    assert s["aws_auth_refused"] == 0 and s["requests"] == 1
    assert s["keys"] == {KEY_ID: 1}  # a SigV4 request's credential is its access key id


def test_converse_stream_frames_every_event_with_crcs_and_headers(bench):
    up = bedrock(bench, "--chunks", 3)
    body = converse_body()

    status, h, data, complete = send(up, path_of(stream=True), body)

    assert status == 200 and complete, data
    assert h["content-type"] == ES_CTYPE
    evs = es_events(data)
    assert [t for t, _ in evs] == (["messageStart"] + ["contentBlockDelta"] * 3 +
                                   ["contentBlockStop", "messageStop", "metadata"])
    assert evs[0][1] == {"role": "assistant"}
    for _, d in evs[1:4]:
        assert d == {"contentBlockIndex": 0, "delta": {"text": "hello "}}
    assert evs[4][1] == {"contentBlockIndex": 0}
    assert evs[5][1] == {"stopReason": "end_turn"}
    p = ceil_div(len(body), 4)
    meta = evs[6][1]
    assert meta["usage"] == {"inputTokens": p, "outputTokens": 3, "totalTokens": p + 3}
    assert isinstance(meta["metrics"]["latencyMs"], int)
    up.wait_stat(lambda s: s["streams_completed"] == 1, "the stream counted as completed")


def test_converse_tool_calls_non_streamed_are_tooluse_blocks(bench):
    up = bedrock(bench, "--tool-call", "get_weather,get_time")

    status, _, data, _ = send(up, path_of(), converse_body(tools=True))

    assert status == 200, data
    j = json.loads(data)
    content = j["output"]["message"]["content"]
    assert [c["toolUse"]["name"] for c in content] == ["get_weather", "get_time"]
    assert [c["toolUse"]["input"] for c in content] == [{"city": "Paris"}, {"city": "Tokyo"}]
    ids = [c["toolUse"]["toolUseId"] for c in content]
    assert len(set(ids)) == 2 and all(i.startswith("tooluse_") for i in ids)
    assert j["stopReason"] == "tool_use"
    assert j["usage"]["outputTokens"] == 8


def test_converse_stream_tool_calls_start_delta_stop_per_block(bench):
    up = bedrock(bench)

    status, _, data, _ = send(up, path_of(stream=True), converse_body(tools=True),
                              {"x-bench-tool-call": "get_weather,get_time"})

    assert status == 200, data
    evs = es_events(data)
    block = ["contentBlockStart"] + ["contentBlockDelta"] * 3 + ["contentBlockStop"]
    assert [t for t, _ in evs] == ["messageStart"] + block * 2 + ["messageStop", "metadata"]
    for i, (city, name) in enumerate([("Paris", "get_weather"), ("Tokyo", "get_time")]):
        ev = evs[1 + 5 * i:6 + 5 * i]
        start = ev[0][1]
        assert start["contentBlockIndex"] == i
        assert start["start"]["toolUse"]["name"] == name
        assert start["start"]["toolUse"]["toolUseId"].startswith("tooluse_")
        pieces = [d["delta"]["toolUse"]["input"] for _, d in ev[1:4]]
        assert all(d["contentBlockIndex"] == i for _, d in ev[1:5])
        assert json.loads("".join(pieces)) == {"city": city}
    assert evs[-2][1] == {"stopReason": "tool_use"}
    assert evs[-1][1]["usage"]["outputTokens"] == 8


def test_converse_tool_results_are_echoed_as_text(bench):
    up = bedrock(bench, "--tool-call", "get_weather")
    body = converse_body(tools=True, messages=[
        {"role": "user", "content": [{"text": "weather?"}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "tu1", "name": "get_weather",
                                                       "input": {"city": "Paris"}}}]},
        {"role": "user", "content": [
            {"toolResult": {"toolUseId": "tu1", "content": [{"text": "sunny"}]}},
            {"toolResult": {"toolUseId": "tu2", "content": [{"json": {"temp": 18}}]}}]}])

    status, _, data, _ = send(up, path_of(), body)

    assert status == 200, data
    j = json.loads(data)
    assert j["output"]["message"]["content"] == [
        {"text": 'tool said: sunny [tu1] tool said: {"temp":18} [tu2]'}]
    assert j["stopReason"] == "end_turn"


def test_converse_stream_reasoning_comes_first_with_its_signature(bench):
    up = bedrock(bench, "--chunks", 2)

    status, _, data, _ = send(up, path_of(stream=True), converse_body(),
                              {"x-bench-reasoning": "2"})

    assert status == 200, data
    evs = es_events(data)
    assert [t for t, _ in evs] == (["messageStart"] + ["contentBlockDelta"] * 3 +
                                   ["contentBlockStop"] + ["contentBlockDelta"] * 2 +
                                   ["contentBlockStop", "messageStop", "metadata"])
    assert [d["delta"] for _, d in evs[1:4]] == [
        {"reasoningContent": {"text": "thinking "}}, {"reasoningContent": {"text": "thinking "}},
        {"reasoningContent": {"signature": SIG}}]
    assert evs[4][1] == {"contentBlockIndex": 0}
    assert [d for _, d in evs[5:7]] == [{"contentBlockIndex": 1, "delta": {"text": "hello "}}] * 2
    assert evs[7][1] == {"contentBlockIndex": 1}
    assert evs[-1][1]["usage"]["outputTokens"] == 4

    status, _, data, _ = send(up, path_of(), converse_body(), {"x-bench-reasoning": "2"})
    content = json.loads(data)["output"]["message"]["content"]
    assert content == [{"reasoningContent": {"reasoningText": {"text": "thinking thinking ",
                                                              "signature": SIG}}},
                       {"text": "hello hello "}]


def test_an_arn_model_id_any_prefix_dot_segments_and_a_query_are_signed_as_aws_does(bench):
    # The ARN's ':' and '/' arrive as %3A and %2F; the canonical URI encodes them again
    # (%253A, %252F) and drops dot segments; the query is sorted. A verifier that got
    # any of this wrong would refuse the signature.
    up = bedrock(bench)
    target = "/bedrock/x/.." + path_of(model=ARN) + "?b=2&a=1%3A"

    status, _, data, _ = send(up, target, converse_body())

    assert status == 200, data
    assert "%2F" in up.last()["path"] and up.stats()["aws_auth_refused"] == 0


def test_without_aws_flags_nothing_is_checked(bench):
    up = bench()

    status, _, data, _ = send(up, path_of(), converse_body(), signed=False)

    assert status == 200, data
    assert up.stats()["aws_auth_refused"] == 0


# ================================================================= refusals

def stale():
    return amz_date(time.time() - 20 * 60)


@pytest.mark.parametrize("case,kw,etype,message", [
    ("wrong secret", {"secret": "not-the-secret"}, "InvalidSignatureException", BAD_SIG),
    ("unknown key", {"key_id": "AKIDSOMEONEELSE"}, "UnrecognizedClientException", BAD_TOKEN),
    ("other region", {"region": "eu-west-1"}, "InvalidSignatureException",
     "Credential should be scoped to a valid region. "),
    ("other service", {"service": "s3"}, "InvalidSignatureException",
     "Credential should be scoped to correct service: 'bedrock'. "),
    ("stale date", {"date": "STALE"}, "InvalidSignatureException", "Signature expired: "),
    ("body hash", {"payload_hash": hashlib.sha256(b"another body").hexdigest()},
     "InvalidSignatureException", BAD_SIG),
])
def test_a_bad_signature_is_refused_with_aws_403_and_counted(bench, case, kw, etype, message):
    up = bedrock(bench)
    body = converse_body()
    headers = {}
    if kw.get("date") == "STALE":
        kw = {"date": stale()}
    if "payload_hash" in kw:  # the client signed and announced another body's hash
        headers["x-amz-content-sha256"] = kw["payload_hash"]

    status, h, data, _ = send(up, path_of(stream=True), body, headers, **kw)

    assert status == 403, (case, data)
    assert h["x-amzn-errortype"].split(":")[0] == etype, h
    assert h["content-type"] == "application/json"
    j = json.loads(data)
    assert list(j) == ["message"]
    if message.endswith(": "):
        assert j["message"].startswith(message) and j["message"].endswith(" - 15 min.)"), j
    else:
        assert j["message"] == message
    s = up.stats()
    assert s["aws_auth_refused"] == 1 and s["streams_started"] == 0
    assert up.last()["headers"]["authorization"]  # refused requests are recorded too


def test_a_refusal_is_said_on_stderr_with_the_canonical_request(bench):
    # What a gateway's signer got wrong is read off gwbench's stderr: the reason and the
    # canonical request it computed, the model id's %3A encoded once more (%253A).
    up = bedrock(bench)

    send(up, path_of(), converse_body(), secret="not-the-secret")

    up.err.wait_for(r"refused: InvalidSignatureException \(signature differs\)")
    uri = "/model/" + urllib.parse.quote(urllib.parse.quote(MODEL, safe=""), safe="") + "/converse"
    up.err.wait_for("^" + re.escape(uri) + "$")
    assert "%253A0" in uri


def test_a_body_changed_after_signing_is_refused(bench):
    up = bedrock(bench)
    h = {"host": f"127.0.0.1:{up.port}", "content-type": "application/json"}
    sign("POST", path_of(), h, converse_body(text="signed"))

    status, rh, data, _ = send(up, path_of(), converse_body(text="sent"), h, signed=False)

    assert status == 403 and rh["x-amzn-errortype"].startswith("InvalidSignatureException")
    assert json.loads(data) == {"message": BAD_SIG}


def test_no_authorization_is_a_missing_token(bench):
    up = bedrock(bench)

    status, h, data, _ = send(up, path_of(), converse_body(), signed=False)

    assert status == 403
    assert h["x-amzn-errortype"].startswith("MissingAuthenticationTokenException")
    assert json.loads(data) == {"message": "Missing Authentication Token"}
    assert up.stats()["aws_auth_refused"] == 1


def test_a_session_token_must_be_the_one_configured(bench):
    up = bedrock(bench, "--aws-session-token", "tok-1")

    ok = send(up, path_of(), converse_body(), {"x-amz-security-token": "tok-1"})
    wrong = send(up, path_of(), converse_body(), {"x-amz-security-token": "tok-2"})
    missing = send(up, path_of(), converse_body())

    assert ok[0] == 200, ok
    for status, h, data, _ in (wrong, missing):
        assert status == 403
        assert h["x-amzn-errortype"].startswith("UnrecognizedClientException")
        assert json.loads(data) == {"message": BAD_TOKEN}
    assert up.stats()["aws_auth_refused"] == 2


# ================================================================= faults

@pytest.mark.parametrize("code,etype", [
    (429, "ThrottlingException"), (503, "ServiceUnavailableException"),
    (400, "ValidationException"), (500, "InternalServerException"),
])
def test_status_fault_answers_bedrock_errors(bench, code, etype):
    up = bedrock(bench)

    status, h, data, _ = send(up, path_of(stream=True), converse_body(),
                              {"x-bench-fault": "status", "x-bench-status": str(code)})

    assert status == code
    assert h["x-amzn-errortype"].split(":")[0] == etype
    j = json.loads(data)
    assert list(j) == ["message"] and j["message"]
    if code == 429:
        assert j["message"] == THROTTLED


def test_error_mid_sends_a_throttling_exception_then_ends_the_stream(bench):
    up = bedrock(bench, "--chunks", 5)

    status, _, data, complete = send(up, path_of(stream=True), converse_body(),
                                     {"x-bench-fault": "error-mid", "x-bench-drop-after": "2"})

    assert status == 200 and complete
    frames = es_frames(data)
    assert all(ok for _, _, ok in frames)
    assert [h.get(":event-type") for h, _, _ in frames[:3]] == [
        "messageStart", "contentBlockDelta", "contentBlockDelta"]
    h, payload, _ = frames[-1]
    assert len(frames) == 4
    assert h == {":message-type": "exception", ":exception-type": "throttlingException",
                 ":content-type": "application/json"}
    assert json.loads(payload) == {"message": THROTTLED}


def test_garbage_sse_sends_a_frame_whose_message_crc_is_wrong(bench):
    up = bedrock(bench, "--chunks", 5)

    status, _, data, complete = send(up, path_of(stream=True), converse_body(),
                                     {"x-bench-fault": "garbage-sse", "x-bench-drop-after": "1"})

    assert status == 200 and complete
    frames = es_frames(data)  # the preludes all hold
    assert [ok for _, _, ok in frames] == [True, True, False]
    assert frames[-1][0][":event-type"] == "contentBlockDelta"


def test_drop_mid_cuts_the_stream_inside_the_eventstream(bench):
    up = bedrock(bench, "--chunks", 5)

    status, _, data, complete = send(up, path_of(stream=True), converse_body(),
                                     {"x-bench-fault": "drop-mid", "x-bench-drop-after": "2"})

    assert status == 200 and not complete
    assert [t for t, _ in es_events(data)] == ["messageStart"] + ["contentBlockDelta"] * 2


def test_hang_content_sends_the_headers_and_message_start_then_nothing(bench):
    up = bench()  # no --aws-* keys: unsigned requests are answered
    s = raw_send(up.port, "POST", path_of(stream=True), converse_body(),
                 {"x-bench-fault": "hang-content"})
    try:
        got = read_until(s, b"\r\n\r\n")
        while True:  # the headers and one HTTP chunk: size line, messageStart, CRLF
            head, _, rest = got.partition(b"\r\n\r\n")
            size_line, sep, after = rest.partition(b"\r\n")
            if sep and len(after) >= int(size_line, 16) + 2:
                break
            d = s.recv(65536)
            assert d, got
            got += d
        assert b"content-type: application/vnd.amazon.eventstream" in head.lower()
        frame = after[:int(size_line, 16)]
        assert [t for t, _ in es_events(frame)] == ["messageStart"]
        assert quiet_for(s)
    finally:
        s.close()


def test_fault_key_picks_the_access_key_id(bench):
    up = bedrock(bench, "--fault", "status", "--status", "429", "--fault-key", "AKIDOTHER")

    status, _, data, _ = send(up, path_of(), converse_body())

    assert status == 200, data  # our key id is not the faulted one
