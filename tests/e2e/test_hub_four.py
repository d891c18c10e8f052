# SPDX-License-Identifier: MIT
# tests/e2e/test_hub_four.py - issue 10 through the hub, raw HTTP: every client shape
# (Chat, Responses, Messages, Gemini) to every upstream shape (dialects openai,
# responses, anthropic, gemini), streamed and not, text and a parallel tool-call round
# trip with ids kept; each client's refusals and broken-stream frame in its own shape;
# Gemini's URL (model, ?key=, ?alt=sse or a JSON array, /v1 as well as /v1beta,
# listings, countTokens); Responses state (previous_response_id routed back to the
# Responses upstream that made it, or expanded from what the gateway kept, store false,
# a restart); a reasoning signature going back only to the shape that made it. The
# official SDKs and Codex run in test_sdk_responses.py, test_sdk_gemini.py and
# test_codex.py.

import json
import re

import pytest

from gwtest import ALICE_KEY, BOB_KEY, REQ_ID_RE, config, http_request, provider

SHAPES = ["chat", "responses", "messages", "gemini"]
DIALECT = {"chat": "openai", "responses": "responses", "messages": "anthropic",
           "gemini": "gemini"}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = ["get_weather", "get_time"]
TEXT = "hello hello hello "


# ---- requests in each client shape ----

def build(shape, model, stream, turns, tools=False, key=ALICE_KEY, extra=None):
    """(path, headers, body) of a request in <shape>. <turns>: ("user", text),
    ("calls", [(id, name, args_json)]), ("results", [(id, name, text)])."""
    if shape == "chat":
        msgs = [{"role": "system", "content": "be brief"}]
        for kind, v in turns:
            if kind == "user":
                msgs.append({"role": "user", "content": v})
            elif kind == "calls":
                msgs.append({"role": "assistant", "content": None, "tool_calls": [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                    for i, n, a in v]})
            else:
                msgs += [{"role": "tool", "tool_call_id": i, "content": t} for i, _, t in v]
        body = {"model": model, "messages": msgs, "stream": stream}
        if tools:
            body["tools"] = [{"type": "function", "function": {"name": n, "parameters": SCHEMA}}
                             for n in TOOLS]
        path, hdr = "/v1/chat/completions", {"Authorization": f"Bearer {key}"}
    elif shape == "responses":
        items = []
        for kind, v in turns:
            if kind == "user":
                items.append({"role": "user", "content": v})
            elif kind == "calls":
                items += [{"type": "function_call", "call_id": i, "name": n, "arguments": a}
                          for i, n, a in v]
            else:
                items += [{"type": "function_call_output", "call_id": i, "output": t}
                          for i, _, t in v]
        body = {"model": model, "instructions": "be brief", "input": items, "stream": stream}
        if tools:
            body["tools"] = [{"type": "function", "name": n, "parameters": SCHEMA}
                             for n in TOOLS]
        path, hdr = "/v1/responses", {"Authorization": f"Bearer {key}"}
    elif shape == "messages":
        msgs = []
        for kind, v in turns:
            if kind == "user":
                msgs.append({"role": "user", "content": v})
            elif kind == "calls":
                msgs.append({"role": "assistant", "content": [
                    {"type": "tool_use", "id": i, "name": n, "input": json.loads(a)}
                    for i, n, a in v]})
            else:
                msgs.append({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": i, "content": t} for i, _, t in v]})
        body = {"model": model, "system": "be brief", "max_tokens": 256, "messages": msgs,
                "stream": stream}
        if tools:
            body["tools"] = [{"name": n, "input_schema": SCHEMA} for n in TOOLS]
        path, hdr = "/v1/messages", {"x-api-key": key, "anthropic-version": "2023-06-01"}
    else:
        contents = []
        for kind, v in turns:
            if kind == "user":
                contents.append({"role": "user", "parts": [{"text": v}]})
            elif kind == "calls":
                contents.append({"role": "model", "parts": [
                    {"functionCall": dict({"name": n, "args": json.loads(a)},
                                          **({"id": i} if i else {}))} for i, n, a in v]})
            else:
                contents.append({"role": "user", "parts": [
                    {"functionResponse": dict({"name": n, "response": {"output": t}},
                                              **({"id": i} if i else {}))}
                    for i, n, t in v]})
        body = {"contents": contents, "systemInstruction": {"parts": [{"text": "be brief"}]}}
        if tools:
            body["tools"] = [{"functionDeclarations": [{"name": n, "parameters": SCHEMA}
                                                       for n in TOOLS]}]
        verb = "streamGenerateContent?alt=sse" if stream else "generateContent"
        path, hdr = f"/v1beta/models/{model}:{verb}", {"x-goog-api-key": key}
    body.update(extra or {})
    return path, hdr, body


def send(g, shape, model, stream, turns, **kw):
    path, hdr, body = build(shape, model, stream, turns, **kw)
    return http_request(g.port, "POST", path, json.dumps(body), hdr)


def sse(raw):
    """The (event name, data JSON) of each SSE event."""
    out = []
    for block in raw.decode().replace("\r\n", "\n").split("\n\n"):
        ev, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                ev = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data and data != ["[DONE]"]:
            out.append((ev, json.loads("\n".join(data))))
    return out


# ---- answers in each client shape: (text, [(id, name, args)]) ----

def read_chat(r, stream):
    if not stream:
        m = r.json()["choices"][0]["message"]
        return m.get("content") or "", [(c["id"], c["function"]["name"],
                                         c["function"]["arguments"])
                                        for c in m.get("tool_calls") or []]
    text, calls = "", {}
    for _, d in sse(r.body):
        for ch in d.get("choices") or []:
            delta = ch.get("delta") or {}
            text += delta.get("content") or ""
            for tc in delta.get("tool_calls") or []:
                c = calls.setdefault(tc["index"], ["", "", ""])
                c[0] = tc.get("id") or c[0]
                c[1] = (tc.get("function") or {}).get("name") or c[1]
                c[2] += (tc.get("function") or {}).get("arguments") or ""
    return text, [tuple(calls[k]) for k in sorted(calls)]


def responses_output(resp):
    text, calls = "", []
    for item in resp["output"]:
        if item["type"] == "message":
            text += "".join(p["text"] for p in item["content"] if p["type"] == "output_text")
        elif item["type"] == "function_call":
            calls.append((item["call_id"], item["name"], item["arguments"]))
    return text, calls


def read_responses(r, stream):
    if not stream:
        return responses_output(r.json())
    ev = sse(r.body)
    names = [e for e, _ in ev]
    assert names[0] == "response.created" and names[1] == "response.in_progress", names
    assert names[-1] == "response.completed", names
    seq = [d["sequence_number"] for _, d in ev]
    assert seq == sorted(seq) and len(set(seq)) == len(seq), seq
    assert all(e == d["type"] for e, d in ev), ev
    deltas = "".join(d["delta"] for e, d in ev if e == "response.output_text.delta")
    text, calls = responses_output(ev[-1][1]["response"])
    assert deltas == text, (deltas, text)
    return text, calls


def read_messages(r, stream):
    if not stream:
        content = r.json()["content"]
        return ("".join(b["text"] for b in content if b["type"] == "text"),
                [(b["id"], b["name"], json.dumps(b["input"], separators=(",", ":")))
                 for b in content if b["type"] == "tool_use"])
    ev = sse(r.body)
    assert ev[0][0] == "message_start" and ev[-1][0] == "message_stop", ev
    text, blocks = "", {}
    for e, d in ev:
        if e == "content_block_start" and d["content_block"]["type"] == "tool_use":
            blocks[d["index"]] = [d["content_block"]["id"], d["content_block"]["name"], ""]
        elif e == "content_block_delta":
            if d["delta"]["type"] == "text_delta":
                text += d["delta"]["text"]
            elif d["delta"]["type"] == "input_json_delta":
                blocks[d["index"]][2] += d["delta"]["partial_json"]
    return text, [tuple(blocks[k]) for k in sorted(blocks)]


def read_gemini(r, stream):
    chunks = [d for _, d in sse(r.body)] if stream else [r.json()]
    text, calls = "", []
    for c in chunks:
        for p in c["candidates"][0]["content"]["parts"]:
            if "text" in p and not p.get("thought"):
                text += p["text"]
            if "functionCall" in p:
                f = p["functionCall"]
                calls.append((f.get("id", ""), f["name"],
                              json.dumps(f["args"], separators=(",", ":"))))
    assert "finishReason" in chunks[-1]["candidates"][0], chunks[-1]
    return text, calls


READ = {"chat": read_chat, "responses": read_responses, "messages": read_messages,
        "gemini": read_gemini}


def gwd_for(tmp_path, bench, gwd, upstream, *bench_args, **cfg):
    b = bench("--chunks", 3, "--text", "hello ", *bench_args)
    g = gwd(config(tmp_path, [provider("up", b, dialect=DIALECT[upstream], models=["m"])],
                   **cfg))
    return b, g


# ---- the matrix ----

@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("upstream", SHAPES)
def test_issue_10_every_client_shape_reaches_every_upstream_shape(tmp_path, bench, gwd,
                                                                  upstream, stream):
    b, g = gwd_for(tmp_path, bench, gwd, upstream)
    for client in SHAPES:
        r = send(g, client, "m", stream, [("user", "say hello")])

        assert r.status == 200, (client, r)
        assert REQ_ID_RE.match(r.headers["x-request-id"]), r.headers
        ctype = r.headers["content-type"]
        assert ctype.startswith("text/event-stream" if stream else "application/json"), ctype
        text, calls = READ[client](r, stream)
        assert text == TEXT and calls == [], (client, text, calls)
        # the upstream got its own shape on its own route
        last = b.last()
        want = {"openai": "/v1/chat/completions", "responses": "/v1/responses",
                "anthropic": "/v1/messages",
                "gemini": "/v1beta/models/m:" + ("streamGenerateContent?alt=sse" if stream
                                                  else "generateContent")}[DIALECT[upstream]]
        assert last["path"] == want, (client, last["path"])
        row = g.wait_row(r.headers["x-request-id"])
        assert row["upstream"] == "up" and row["status"] == 200, row
        assert row["usage"]["output_tokens"] > 0 and not row["usage"]["estimated"], row


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("upstream", SHAPES)
def test_issue_10_parallel_tool_calls_round_trip_with_ids_kept(tmp_path, bench, gwd, upstream,
                                                               stream):
    b, g = gwd_for(tmp_path, bench, gwd, upstream, "--tool-call", ",".join(TOOLS))
    for client in SHAPES:
        ask = [("user", "weather and time in Paris?")]
        r = send(g, client, "m", stream, ask, tools=True)

        assert r.status == 200, (client, r)
        text, calls = READ[client](r, stream)
        assert [(n, json.loads(a)) for _, n, a in calls] == [
            ("get_weather", {"city": "Paris"}), ("get_time", {"city": "Tokyo"})], (client, calls)
        ids = [i for i, _, _ in calls]
        if client != "gemini":
            assert all(ids) and len(set(ids)) == 2, (client, ids)
        results = [(i, n, t) for (i, n, _), t in zip(calls, ["sunny", "noon"])]
        r = send(g, client, "m", stream, ask + [("calls", calls), ("results", results)],
                 tools=True)

        assert r.status == 200, (client, r)
        text, calls2 = READ[client](r, stream)
        assert calls2 == [], (client, calls2)
        # the upstream echoes each result with the id it received with it: the call's
        # own id (a Gemini upstream has none: the function's name). A Gemini client's
        # result is its response object, sent on as that JSON.
        said = re.findall(r"tool said: (.*?) \[([^\]]*)\]", text)
        assert [("sunny" in c, "noon" in c) for c, _ in said] == [(True, False),
                                                                 (False, True)], (client, text)
        got = [i for _, i in said]
        if upstream == "gemini":
            assert got == TOOLS, (client, text)
        elif client != "gemini":
            assert got == ids, (client, text, ids)
        else:
            # a Gemini client's calls carry no ids: stable generated ones, each result
            # matched to its call by name
            assert all(got) and len(set(got)) == 2, (client, text)


# ---- errors in the client's shape ----

def assert_refusal(client, r, status, code):
    assert r.status == status, (client, r)
    assert r.headers.get("x-gw-code") == code, (client, r.headers)
    body = r.json()
    if client == "messages":
        assert body["type"] == "error" and code in body["error"]["message"] or \
            body["error"]["type"], body
    elif client == "gemini":
        err = body["error"]
        assert err["code"] == status, body
        assert err["status"] == {401: "UNAUTHENTICATED", 404: "NOT_FOUND",
                                 400: "INVALID_ARGUMENT"}[status], body
        assert code in json.dumps(err), body
    else:
        assert body["error"]["code"] == code, body


@pytest.mark.parametrize("client", SHAPES)
def test_issue_10_refusals_come_in_the_client_shape(tmp_path, bench, gwd, client):
    _, g = gwd_for(tmp_path, bench, gwd, "chat")

    assert_refusal(client, send(g, client, "m", False, [("user", "x")], key="wrong"), 401,
                   "gw.auth.invalid_key")
    assert_refusal(client, send(g, client, "nope", False, [("user", "x")]), 404,
                   "gw.model_not_found")


@pytest.mark.parametrize("client", SHAPES)
def test_issue_10_stream_broken_after_content_ends_with_the_client_frame(tmp_path, bench, gwd,
                                                                          client):
    _, g = gwd_for(tmp_path, bench, gwd, "chat", "--fault", "drop-mid", "--drop-after", 2)

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
        assert last[1]["response"]["status"] == "failed", last
        assert last[1]["response"]["error"]["code"] == "server_error", last
        # the stream's own response, at its next sequence number (the SDK checks both)
        assert last[1]["response"]["id"] == ev[0][1]["response"]["id"], (ev[0], last)
        assert last[1]["sequence_number"] == ev[-2][1]["sequence_number"] + 1, ev[-2:]
    else:
        assert last[1]["error"]["status"] == "UNAVAILABLE", last
        assert last[1]["error"]["code"] == 503, last
    row = g.wait_row(r.headers["x-request-id"])
    assert row["code"] == "gw.upstream.dropped", row


def test_issue_10_gemini_json_array_stream_broken_after_content_is_closed(tmp_path, bench,
                                                                         gwd):
    _, g = gwd_for(tmp_path, bench, gwd, "chat", "--fault", "drop-mid", "--drop-after", 2)
    body = json.dumps({"contents": [{"role": "user", "parts": [{"text": "x"}]}]})

    r = http_request(g.port, "POST", "/v1beta/models/m:streamGenerateContent", body,
                     {"x-goog-api-key": ALICE_KEY})

    assert r.status == 200, r
    chunks = json.loads(r.body)  # still one JSON array, closed after the error
    assert "hello hello " == "".join(p.get("text", "") for c in chunks[:-1]
                                     for p in c["candidates"][0]["content"]["parts"]), chunks
    assert chunks[-1]["error"]["status"] == "UNAVAILABLE", chunks[-1]


# ---- Gemini's URL ----

def test_issue_10_gemini_key_in_the_query_is_used_and_never_sent_on(tmp_path, bench, gwd):
    b, g = gwd_for(tmp_path, bench, gwd, "gemini")
    body = json.dumps({"contents": [{"role": "user", "parts": [{"text": "x"}]}]})

    r = http_request(g.port, "POST", f"/v1beta/models/m:generateContent?key={ALICE_KEY}", body)

    assert r.status == 200, r
    last = b.last()
    assert last["path"] == "/v1beta/models/m:generateContent", last
    assert ALICE_KEY not in json.dumps(last), last
    assert last["headers"]["x-goog-api-key"] == "up-key-a", last
    r = http_request(g.port, "POST", "/v1beta/models/m:generateContent?key=wrong", body)
    assert_refusal("gemini", r, 401, "gw.auth.invalid_key")
    r = http_request(g.port, "POST", "/v1beta/models/m:generateContent", body)
    assert_refusal("gemini", r, 401, "gw.auth.missing_key")


@pytest.mark.parametrize("upstream", ["gemini", "chat"])
def test_issue_10_gemini_stream_without_alt_sse_is_one_json_array(tmp_path, bench, gwd,
                                                                  upstream):
    b, g = gwd_for(tmp_path, bench, gwd, upstream)
    body = json.dumps({"contents": [{"role": "user", "parts": [{"text": "x"}]}]})

    r = http_request(g.port, "POST", "/v1beta/models/m:streamGenerateContent", body,
                     {"x-goog-api-key": ALICE_KEY})

    assert r.status == 200, r
    assert r.headers["content-type"].startswith("application/json"), r.headers
    chunks = json.loads(r.body)
    assert isinstance(chunks, list) and len(chunks) >= 2, chunks
    text = "".join(p.get("text", "") for c in chunks
                   for p in c["candidates"][0]["content"]["parts"])
    assert text == TEXT, chunks
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP", chunks[-1]
    assert chunks[-1]["usageMetadata"]["candidatesTokenCount"] > 0, chunks[-1]
    if upstream == "gemini":  # asked for SSE all the same, and rendered as the array
        assert b.last()["path"].endswith(":streamGenerateContent?alt=sse"), b.last()


def test_issue_10_gemini_under_v1_as_the_sdk_default_and_listings(tmp_path, bench, gwd):
    _, g = gwd_for(tmp_path, bench, gwd, "messages")
    h = {"x-goog-api-key": ALICE_KEY}
    body = json.dumps({"contents": [{"role": "user", "parts": [{"text": "x"}]}]})

    r = http_request(g.port, "POST", "/v1/models/m:generateContent", body, h)
    assert r.status == 200 and read_gemini(r, False)[0] == TEXT, r
    for path in ("/v1beta/models", "/v1/models"):
        r = http_request(g.port, "GET", path, None, h)
        assert r.status == 200, (path, r)
        assert "models/m" in [m["name"] for m in r.json()["models"]], r.json()
    r = http_request(g.port, "GET", "/v1beta/models/m", None, h)
    assert r.status == 200 and r.json()["name"] == "models/m", r
    r = http_request(g.port, "GET", "/v1beta/models/nope", None, h)
    assert_refusal("gemini", r, 404, "gw.model_not_found")
    # the OpenAI listing is unchanged for a Bearer client
    r = http_request(g.port, "GET", "/v1/models", None, {"Authorization": f"Bearer {ALICE_KEY}"})
    assert r.status == 200 and r.json()["object"] == "list", r


@pytest.mark.parametrize("upstream", ["gemini", "chat"])
def test_issue_10_gemini_count_tokens_forwarded_or_estimated(tmp_path, bench, gwd, upstream):
    b, g = gwd_for(tmp_path, bench, gwd, upstream)
    body = json.dumps({"contents": [{"role": "user", "parts": [{"text": "x" * 400}]}]})

    r = http_request(g.port, "POST", "/v1beta/models/m:countTokens", body,
                     {"x-goog-api-key": ALICE_KEY})

    assert r.status == 200, r
    assert isinstance(r.json()["totalTokens"], int) and r.json()["totalTokens"] > 0, r
    if upstream == "gemini":
        assert b.last()["path"] == "/v1beta/models/m:countTokens", b.last()
        assert "x-gw-estimated" not in r.headers, r.headers
    else:
        assert r.headers.get("x-gw-estimated") == "true", r.headers


# ---- Responses state ----

def responses(g, model, text, prev=None, key=ALICE_KEY, **extra):
    body = {"model": model, "input": text}
    if prev:
        body["previous_response_id"] = prev
    body.update(extra)
    return http_request(g.port, "POST", "/v1/responses", json.dumps(body),
                        {"Authorization": f"Bearer {key}"})


def upstream_text(b):
    """Every text the upstream's last request carried, in order (any shape)."""
    out = []

    def walk(v):
        if isinstance(v, dict):
            for k, x in v.items():
                if k in ("text", "content", "input") and isinstance(x, str):
                    out.append(x)
                else:
                    walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    walk(b.last_body())
    return out


@pytest.mark.parametrize("upstream", ["chat", "messages", "gemini"])
def test_issue_10_previous_response_id_is_expanded_for_other_shapes(tmp_path, bench, gwd,
                                                                    upstream):
    b, g = gwd_for(tmp_path, bench, gwd, upstream)

    r1 = responses(g, "m", "first question")
    assert r1.status == 200, r1
    r2 = responses(g, "m", "second question", prev=r1.json()["id"])
    assert r2.status == 200, r2
    assert upstream_text(b) == ["first question", TEXT, "second question"], b.last_body()
    r3 = responses(g, "m", "third", prev=r2.json()["id"])
    assert r3.status == 200, r3
    assert upstream_text(b) == ["first question", TEXT, "second question", TEXT, "third"]


def test_a_stored_conversation_continues_only_for_the_client_that_made_it(tmp_path, bench,
                                                                         gwd):
    """The conversations gwd keeps are its clients' bodies: another gateway key naming
    one in previous_response_id gets what an unknown id gets (400 gw.unconvertible on an
    upstream that needs it expanded), and nothing of it reaches the upstream; the maker
    still continues it."""
    b, g = gwd_for(tmp_path, bench, gwd, "chat")
    r1 = responses(g, "m", "alice's secret question")
    assert r1.status == 200, r1
    sent = b.stats()["requests"]

    other = responses(g, "m", "what did she ask?", prev=r1.json()["id"], key=BOB_KEY)

    assert other.status == 400, other
    assert other.headers.get("x-gw-code") == "gw.unconvertible", other.headers
    assert b.stats()["requests"] == sent  # nothing went upstream
    unknown = responses(g, "m", "what did she ask?", prev="resp_" + "0" * 32, key=BOB_KEY)
    assert (unknown.status, unknown.headers.get("x-gw-code")) == (400, "gw.unconvertible")
    # told the same as for an id never made: whether it exists is not said either
    said = json.dumps(other.json()).replace(r1.json()["id"], "ID")
    assert said == json.dumps(unknown.json()).replace("resp_" + "0" * 32, "ID"), said
    mine = responses(g, "m", "and again", prev=r1.json()["id"])
    assert mine.status == 200, mine
    assert upstream_text(b) == ["alice's secret question", TEXT, "and again"], b.last_body()


def test_issue_10_previous_response_id_goes_back_to_the_upstream_that_made_it(tmp_path, bench,
                                                                              gwd):
    b1 = bench("--chunks", 1, "--text", "one ")
    b2 = bench("--chunks", 1, "--text", "two ")
    g = gwd(config(tmp_path, [provider("r1", b1, dialect="responses", models=["m"]),
                              provider("r2", b2, dialect="responses", models=["m"])],
                   groups=[{"name": "m", "type": "load-balance",
                            "providers": ["r1", "r2"]}]))
    first = responses(g, "m", "hi")
    maker = g.wait_row(first.headers["x-request-id"])["upstream"]
    bm = b1 if maker == "r1" else b2
    for _ in range(4):  # round-robin would alternate; the chain stays on its maker
        before = bm.stats()["requests"]
        r = responses(g, "m", "again", prev=first.json()["id"])
        assert r.status == 200, r
        assert g.wait_row(r.headers["x-request-id"])["upstream"] == maker
        assert bm.stats()["requests"] == before + 1
        # the body went as it came: the upstream continues its own response
        assert bm.last_body()["previous_response_id"] == first.json()["id"], bm.last_body()


def test_issue_10_encrypted_reasoning_goes_to_no_other_upstream(tmp_path, bench, gwd):
    # The maker of a response is gone: the next turn is expanded for the other Responses
    # upstream, with the reasoning's summary but not the maker's encrypted content.
    b1 = bench("--chunks", 1, "--text", "one ", "--reasoning", 2)
    b2 = bench("--chunks", 1, "--text", "two ")
    g = gwd(config(tmp_path, [provider("r1", b1, dialect="responses", models=["m"]),
                              provider("r2", b2, dialect="responses", models=["m"])],
                   groups=[{"name": "m", "providers": ["r1", "r2"]}]))  # fallback: r1 first
    first = responses(g, "m", "think first")
    assert first.status == 200, first
    made = [i for i in first.json()["output"] if i["type"] == "reasoning"]
    assert made and made[0].get("encrypted_content"), first.json()
    b1.stop()

    r = responses(g, "m", "again", prev=first.json()["id"])

    assert r.status == 200, r
    assert g.wait_row(r.headers["x-request-id"])["upstream"] == "r2"
    sent = b2.last_body()
    assert "previous_response_id" not in sent, sent
    kept = [i for i in sent["input"] if i.get("type") == "reasoning"]
    assert kept and "encrypted_content" not in kept[0], sent["input"]
    assert kept[0]["summary"], kept[0]
    assert made[0]["encrypted_content"] not in json.dumps(sent)


def test_issue_10_unknown_or_unkept_previous_response_is_unconvertible(tmp_path, bench, gwd):
    _, g = gwd_for(tmp_path, bench, gwd, "chat")

    r = responses(g, "m", "x", prev="resp_nobody_kept_this")
    assert_refusal("responses", r, 400, "gw.unconvertible")
    first = responses(g, "m", "x", store=False)
    assert first.status == 200, first
    r = responses(g, "m", "y", prev=first.json()["id"])
    assert_refusal("responses", r, 400, "gw.unconvertible")


def test_issue_10_kept_responses_survive_a_restart_and_can_be_turned_off(tmp_path, bench, gwd):
    b = bench("--chunks", 3, "--text", "hello ")
    cfg = config(tmp_path, [provider("up", b, dialect="openai", models=["m"])])
    g = gwd(cfg)
    first = responses(g, "m", "first question")
    assert first.status == 200, first
    assert g.stop() == 0
    g = gwd(cfg)
    r = responses(g, "m", "second", prev=first.json()["id"])
    assert r.status == 200, r
    assert upstream_text(b) == ["first question", TEXT, "second"], b.last_body()
    assert g.stop() == 0

    cfg["store"]["responses"] = False
    g = gwd(cfg)
    kept_not = responses(g, "m", "x")
    r = responses(g, "m", "y", prev=kept_not.json()["id"])
    assert_refusal("responses", r, 400, "gw.unconvertible")


# ---- signatures go back only to their maker ----

def test_issue_10_reasoning_signature_goes_back_to_its_own_shape_only(tmp_path, bench, gwd):
    # A Messages client of a Responses upstream gets the reasoning item's encrypted
    # content as a thinking signature, tagged with its origin; sent back, the Responses
    # upstream gets the encrypted content as it made it.
    b = bench("--chunks", 1, "--text", "ok ", "--reasoning", 2)
    g = gwd(config(tmp_path, [provider("up", b, dialect="responses", models=["m"])]))

    r = send(g, "messages", "m", False, [("user", "think")])
    assert r.status == 200, r
    thinking = [c for c in r.json()["content"] if c["type"] == "thinking"]
    assert thinking and thinking[0]["signature"].startswith("gw1.responses."), r.json()
    made = thinking[0]["signature"][len("gw1.responses."):]
    path, hdr, body = build("messages", "m", False, [("user", "think")])
    body["messages"].append({"role": "assistant", "content": thinking + [
        {"type": "text", "text": "ok"}]})
    body["messages"].append({"role": "user", "content": "more"})
    r = http_request(g.port, "POST", path, json.dumps(body), hdr)
    assert r.status == 200, r
    sent = [i for i in b.last_body()["input"] if i.get("type") == "reasoning"]
    assert sent and sent[0]["encrypted_content"] == made, b.last_body()


# ---- what each cell carries over ----

SYS = "answer in one line"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
FORMAT_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}},
                 "required": ["city"]}


def rich(shape, fmt=False):
    """(path, headers, body): a system prompt, text and an image, a stop sequence (not in
    Responses, which has none), temperature 0.25, 77 output tokens, two tools with one
    forced by name, and with <fmt> a JSON-schema response format."""
    path, hdr, body = build(shape, "m", False, [("user", "look")], tools=True)
    if shape == "chat":
        body["messages"] = [{"role": "system", "content": SYS}, {"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]}]
        body.update(stop=["STOP1"], temperature=0.25, max_completion_tokens=77,
                    tool_choice={"type": "function", "function": {"name": "get_time"}})
        if fmt:
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "place", "schema": FORMAT_SCHEMA}}
    elif shape == "responses":
        body["instructions"] = SYS
        body["input"] = [{"role": "user", "content": [
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"}]}]
        body.update(temperature=0.25, max_output_tokens=77,
                    tool_choice={"type": "function", "name": "get_time"})
        if fmt:
            body["text"] = {"format": {"type": "json_schema", "name": "place",
                                       "schema": FORMAT_SCHEMA}}
    elif shape == "messages":
        body["system"] = SYS
        body["messages"] = [{"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": PNG}}]}]
        body.update(stop_sequences=["STOP1"], temperature=0.25, max_tokens=77,
                    tool_choice={"type": "tool", "name": "get_time"})
    else:
        body["systemInstruction"] = {"parts": [{"text": SYS}]}
        body["contents"] = [{"role": "user", "parts": [
            {"text": "look"}, {"inlineData": {"mimeType": "image/png", "data": PNG}}]}]
        body["generationConfig"] = {"temperature": 0.25, "maxOutputTokens": 77,
                                    "stopSequences": ["STOP1"]}
        body["toolConfig"] = {"functionCallingConfig": {"mode": "ANY",
                                                        "allowedFunctionNames": ["get_time"]}}
        if fmt:
            body["generationConfig"].update(responseMimeType="application/json",
                                            responseJsonSchema=FORMAT_SCHEMA)
    return path, hdr, body


def carried(dialect, b):
    """What an upstream body of <dialect> carries: (system text, an image is there, stop
    sequences, temperature, max output tokens, the forced tool, a JSON schema format)."""
    if dialect == "openai":
        sys_ = " ".join(m["content"] if isinstance(m["content"], str) else
                        " ".join(p.get("text", "") for p in m["content"])
                        for m in b["messages"] if m["role"] in ("system", "developer"))
        image = any(isinstance(m.get("content"), list) and
                    any(p.get("type") == "image_url" for p in m["content"])
                    for m in b["messages"])
        stop = b.get("stop")
        stop = [stop] if isinstance(stop, str) else stop
        return (sys_, image, stop, b.get("temperature"),
                b.get("max_completion_tokens", b.get("max_tokens")),
                (b.get("tool_choice") or {}).get("function", {}).get("name"),
                (b.get("response_format") or {}).get("type") == "json_schema")
    if dialect == "responses":
        image = any(isinstance(i.get("content"), list) and
                    any(p.get("type") == "input_image" for p in i["content"])
                    for i in b["input"])
        return (b.get("instructions", ""), image, None, b.get("temperature"),
                b.get("max_output_tokens"), (b.get("tool_choice") or {}).get("name"),
                ((b.get("text") or {}).get("format") or {}).get("type") == "json_schema")
    if dialect == "anthropic":
        sys_ = b.get("system", "")
        sys_ = sys_ if isinstance(sys_, str) else " ".join(x["text"] for x in sys_)
        image = any(isinstance(m["content"], list) and
                    any(p.get("type") == "image" for p in m["content"]) for m in b["messages"])
        return (sys_, image, b.get("stop_sequences"), b.get("temperature"),
                b.get("max_tokens"), (b.get("tool_choice") or {}).get("name"), False)
    gc = b.get("generationConfig", {})
    fcc = (b.get("toolConfig") or {}).get("functionCallingConfig") or {}
    names = fcc.get("allowedFunctionNames") or [None]
    return (" ".join(p["text"] for p in (b.get("systemInstruction") or {}).get("parts", [])),
            any("inlineData" in p for c in b["contents"] for p in c["parts"]),
            gc.get("stopSequences"), gc.get("temperature"), gc.get("maxOutputTokens"),
            names[0] if fcc.get("mode") == "ANY" else None,
            gc.get("responseMimeType") == "application/json" and
            ("responseJsonSchema" in gc or "responseSchema" in gc))


@pytest.mark.parametrize("upstream", SHAPES)
def test_issue_10_every_converted_cell_carries_system_image_sampling_and_tool_choice(
        tmp_path, bench, gwd, upstream):
    b, g = gwd_for(tmp_path, bench, gwd, upstream)
    for client in SHAPES:
        if client == upstream:
            continue  # the splice: the body as it came (test above)
        path, hdr, body = rich(client)
        r = http_request(g.port, "POST", path, json.dumps(body), hdr)

        assert r.status == 200, (client, r)
        sys_, image, stop, temp, max_out, forced, fmt = carried(DIALECT[upstream],
                                                                b.last_body())
        assert SYS in sys_ and image, (client, b.last_body())
        assert temp == 0.25 and max_out == 77 and forced == "get_time", (client, b.last_body())
        if client == "responses":
            assert not stop, (client, stop)  # Responses has no stop sequences
        elif upstream == "responses":
            # nor can a Responses upstream take them: dropped, and named
            assert stop is None and "stop" in r.headers.get("x-gw-dropped", ""), (client, r)
        else:
            assert stop == ["STOP1"], (client, b.last_body())
        assert not fmt


@pytest.mark.parametrize("upstream", SHAPES)
def test_issue_10_json_schema_format_is_kept_or_refused(tmp_path, bench, gwd, upstream):
    b, g = gwd_for(tmp_path, bench, gwd, upstream)
    for client in ("chat", "responses", "gemini"):
        if client == upstream:
            continue
        path, hdr, body = rich(client, fmt=True)
        r = http_request(g.port, "POST", path, json.dumps(body), hdr)

        if upstream == "messages":
            # a schema Anthropic's API would not enforce: refused, not dropped
            assert_refusal(client, r, 400, "gw.unconvertible")
            continue
        assert r.status == 200, (client, r)
        assert carried(DIALECT[upstream], b.last_body())[6], (client, b.last_body())


@pytest.mark.parametrize("upstream", SHAPES)
def test_issue_10_an_upstream_request_error_comes_back_in_the_client_shape(tmp_path, bench,
                                                                           gwd, upstream):
    bodies = {  # each upstream's own 400
        "chat": '{"error":{"message":"bad temperature","type":"invalid_request_error"}}',
        "responses": '{"error":{"message":"bad temperature","type":"invalid_request_error"}}',
        "messages": '{"type":"error","error":{"type":"invalid_request_error",'
                    '"message":"bad temperature"}}',
        "gemini": '{"error":{"code":400,"message":"bad temperature",'
                  '"status":"INVALID_ARGUMENT"}}'}
    _, g = gwd_for(tmp_path, bench, gwd, upstream, "--fault", "status", "--status", 400,
                   "--error-body", bodies[upstream])
    for client in SHAPES:
        r = send(g, client, "m", False, [("user", "x")])

        assert r.status == 400, (client, r)
        err = r.json()
        if client == "messages":
            assert err["type"] == "error", err
            assert err["error"]["type"] == "invalid_request_error", err
            assert "bad temperature" in err["error"]["message"], err
        elif client == "gemini":
            assert err["error"]["status"] == "INVALID_ARGUMENT", err
            assert err["error"]["code"] == 400 and "bad temperature" in err["error"]["message"]
        else:
            assert err["error"]["type"] == "invalid_request_error", err
            assert "bad temperature" in err["error"]["message"], err


@pytest.mark.parametrize("client", SHAPES)
def test_issue_10_an_answer_without_usage_is_estimated(tmp_path, bench, gwd, client):
    _, g = gwd_for(tmp_path, bench, gwd, "chat" if client != "chat" else "messages",
                   "--no-usage")
    for stream in (False, True):
        r = send(g, client, "m", stream, [("user", "say hello")])

        assert r.status == 200, (client, r)
        row = g.wait_row(r.headers["x-request-id"])
        assert row["usage"]["estimated"] is True, row
        assert row["usage"]["output_tokens"] > 0 and row["usage"]["input_tokens"] > 0, row


def test_a_conversation_is_kept_from_the_hop_that_answered_after_a_failover(tmp_path, bench,
                                                                          gwd):
    # The first upstream answers 200 with an error body (the hop fails over); the
    # conversation kept is the second's answer alone, and the next turn expands it.
    bad = bench("--fault", "status", "--status", 200, "--error-body",
                '{"error":{"message":"overloaded","type":"server_error"}}')
    good = bench("--chunks", 3, "--text", "hello ")
    g = gwd(config(tmp_path, [provider("bad", bad, dialect="openai", models=["m"]),
                              provider("good", good, dialect="openai", models=["m"])],
                   groups=[{"name": "m", "providers": ["bad", "good"]}]))
    r1 = responses(g, "m", "first question")
    assert r1.status == 200, r1
    row = g.wait_row(r1.headers["x-request-id"])
    assert [a["upstream"] for a in row["attempts"]] == ["bad", "good"], row

    r2 = responses(g, "m", "second question", prev=r1.json()["id"])

    assert r2.status == 200, r2
    assert upstream_text(good) == ["first question", TEXT, "second question"], good.last_body()
