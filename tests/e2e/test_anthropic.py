# SPDX-License-Identifier: MIT
# tests/e2e/test_anthropic.py - a Chat Completions client served by an Anthropic
# Messages upstream (DESIGN.md 9, 11): the request converted (max_tokens from the
# model's spec when the client sets none), the answer, the stream and request errors
# converted back, usage and cost on the row, failover across shapes, and requests the
# Messages API cannot express refused with gw.unconvertible.

import json

import pytest

from gwtest import (ALICE_KEY, UP_KEY_A, chat_body, config, content_of, is_usage_chunk,
                    provider, sha256_hex)


def anthropic(name, b, **extra):
    return provider(name, b, dialect="anthropic", **extra)


def _headers(last):
    return {k.lower(): v for k, v in last["headers"].items()}


def test_non_streamed_chat_request_is_converted_and_max_tokens_comes_from_the_spec(
        tmp_path, bench, gwd):
    b = bench("--chunks", 3, "--text", "hi ")
    g = gwd(config(tmp_path, [anthropic("claude", b, models=["claude-x"],
                                        model_specs={"claude-x": {"max_output_tokens": 777}})]))

    r = g.chat(chat_body(model="claude-x", text="say hello"))

    assert r.status == 200, r
    j = r.json()
    assert j["object"] == "chat.completion"
    assert j["choices"][0]["message"] == {"role": "assistant", "content": "hi hi hi "}
    assert j["choices"][0]["finish_reason"] == "stop"
    assert j["usage"]["completion_tokens"] == 3
    last = b.last()
    assert last["path"] == "/v1/messages"
    h = _headers(last)
    assert h.get("x-api-key") == UP_KEY_A
    assert h.get("anthropic-version") == "2023-06-01"
    assert "authorization" not in h
    for k, v in h.items():
        assert ALICE_KEY not in v, f"gateway key leaked to the upstream in {k}"
    sent = b.last_body()
    assert sent["model"] == "claude-x"
    assert sent["max_tokens"] == 777
    assert sent["messages"] == [{"role": "user", "content": "say hello"}]
    row = g.wait_row(r.headers["x-request-id"])
    assert row["upstream"] == "claude"
    assert row["usage"]["output_tokens"] == 3
    assert row["usage"]["input_tokens"] == j["usage"]["prompt_tokens"]
    assert row["usage"]["estimated"] is False


def test_client_max_tokens_wins_and_an_unknown_model_gets_the_fallback(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config(tmp_path, [anthropic("claude", b, models=["claude-x", "claude-y"],
                                        model_specs={"claude-x": {"max_output_tokens": 777}})]))

    r = g.chat(chat_body(model="claude-x", max_completion_tokens=50, max_tokens=60))
    assert r.status == 200, r
    assert b.last_body()["max_tokens"] == 50
    r = g.chat(chat_body(model="claude-x", max_tokens=60))
    assert r.status == 200, r
    assert b.last_body()["max_tokens"] == 60
    r = g.chat(chat_body(model="claude-y"))  # no spec, no price entry
    assert r.status == 200, r
    assert b.last_body()["max_tokens"] == 4096


def test_streamed_answer_is_converted_to_chat_chunks(tmp_path, bench, gwd):
    b = bench("--chunks", 4, "--text", "ab")
    g = gwd(config(tmp_path, [anthropic("claude", b, models=["claude-x"])]))

    s = g.stream(chat_body(model="claude-x", stream=True, include_usage=True))
    assert s.status == 200
    assert s.resp.getheader("content-type").startswith("text/event-stream")
    events = s.rest()
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert "".join(content_of(e) for e in events) == "abababab"
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finish[-1] == "stop"
    usage = [c["usage"] for c in chunks if c.get("usage")]
    assert len(usage) == 1 and usage[0]["completion_tokens"] == 4
    assert b.last_body()["stream"] is True
    row = g.wait_row(s.resp.getheader("x-request-id"))
    assert row["usage"]["output_tokens"] == 4
    assert row["usage"]["input_tokens"] == usage[0]["prompt_tokens"]


def test_usage_chunk_is_left_out_when_the_client_did_not_ask(tmp_path, bench, gwd):
    b = bench("--chunks", 2)
    g = gwd(config(tmp_path, [anthropic("claude", b, models=["claude-x"])]))

    s = g.stream(chat_body(model="claude-x", stream=True))
    events = s.rest()
    assert events[-1] == "[DONE]"
    assert not any(is_usage_chunk(e) for e in events)
    row = g.wait_row(s.resp.getheader("x-request-id"))
    assert row["usage"]["output_tokens"] == 2  # still counted


def test_request_error_is_answered_in_the_clients_shape(tmp_path, bench, gwd):
    b = bench()
    g = gwd(config(tmp_path, [anthropic("claude", b, models=["claude-x"])]))

    r = g.chat(chat_body(model="claude-x"),
               headers={"x-bench-fault": "status", "x-bench-status": "400"})

    assert r.status == 400, r
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error"
    assert isinstance(err["message"], str) and err["message"]


def test_overloaded_anthropic_upstream_fails_over_to_an_openai_one(tmp_path, bench, gwd):
    ba = bench("--fault", "status", "--status", 529)
    bo = bench("--text", "from openai ")
    g = gwd(config(tmp_path, [anthropic("claude", ba, models=["m"]),
                              provider("oai", bo, models=["m"])]))

    r = g.chat(chat_body(model="m"))

    assert r.status == 200, r
    assert r.json()["choices"][0]["message"]["content"].startswith("from openai")
    row = g.wait_row(r.headers["x-request-id"])
    assert [(a["upstream"], a["outcome"], a["status"]) for a in row["attempts"]] == [
        ("claude", "failed", 529), ("oai", "ok", 200)]


def test_request_the_messages_api_cannot_express_is_refused_or_sent_elsewhere(
        tmp_path, bench, gwd):
    ba = bench()
    bo = bench()
    g = gwd(config(tmp_path, [anthropic("claude", ba, models=["only-claude", "both"]),
                              provider("oai", bo, models=["both"])]))

    r = g.chat(chat_body(model="only-claude", n=2))
    assert r.status == 400, r
    assert r.headers["x-gw-code"] == "gw.unconvertible"
    err = r.json()["error"]
    assert err["code"] == "gw.unconvertible" and "n" in err["message"]
    row = g.wait_row(r.headers["x-request-id"])
    assert row["code"] == "gw.unconvertible", row
    assert [(a["upstream"], a["outcome"], a["code"]) for a in row["attempts"]] == [
        ("claude", "skipped:unconvertible", "gw.unconvertible")], row
    assert ba.stats()["requests"] == 0

    r = g.chat(chat_body(model="both", n=2))  # the OpenAI member can take it as it is
    assert r.status == 200, r
    assert bo.stats()["requests"] == 1 and ba.stats()["requests"] == 0
    row = g.wait_row(r.headers["x-request-id"])
    assert [a["outcome"] for a in row["attempts"]] in (["ok"], ["skipped:unconvertible", "ok"])


def test_error_event_after_content_ends_the_stream_with_an_error_chunk(tmp_path, bench, gwd):
    b = bench("--chunks", 5, "--text", "hi ", "--fault", "error-mid", "--drop-after", 2)
    g = gwd(config(tmp_path, [anthropic("claude", b, models=["claude-x"])]))

    s = g.stream(chat_body(model="claude-x", stream=True))
    events = s.rest()

    assert "".join(content_of(e) for e in events) == "hi hi "
    assert "[DONE]" not in events
    # DESIGN.md 11: whatever the upstream sent, a stream broken after content ends with
    # the client shape's own error frame, carrying gw's code
    err = json.loads(events[-1])["error"]
    assert err["code"] == "gw.upstream.status" and err["message"], err


def test_error_event_before_content_fails_over(tmp_path, bench, gwd):
    ba = bench("--fault", "error-mid", "--drop-after", 0)
    bo = bench("--chunks", 2, "--text", "ok ")
    g = gwd(config(tmp_path, [anthropic("claude", ba, models=["m"]),
                              provider("oai", bo, models=["m"])]))

    s = g.stream(chat_body(model="m", stream=True))
    events = s.rest()

    assert "".join(content_of(e) for e in events) == "ok ok "
    assert events[-1] == "[DONE]"
    row = g.wait_row(s.resp.getheader("x-request-id"))
    assert [(a["upstream"], a["outcome"]) for a in row["attempts"]] == [
        ("claude", "failed"), ("oai", "ok")]


def test_cache_reads_and_writes_are_recorded_and_priced(tmp_path, bench, gwd):
    (tmp_path / "prices.yaml").write_text(
        "models:\n  - {model: claude-x, input: 3.0, output: 15.0, cache_read: 0.3, "
        "cache_write: 3.75}\n")
    b = bench("--chunks", 3, "--cached", 40, "--cache-write", 100, "--text", "x" * 20)
    g = gwd(config(tmp_path, [anthropic("claude", b, models=["claude-x"])],
                   prices="prices.yaml"))

    r = g.chat(chat_body(model="claude-x", text="y" * 1000))

    assert r.status == 200, r
    u = r.json()["usage"]
    assert u["prompt_tokens_details"]["cached_tokens"] == 40
    row = g.wait_row(r.headers["x-request-id"])
    ru = row["usage"]
    assert (ru["cache_read_tokens"], ru["cache_write_tokens"], ru["output_tokens"]) == (40, 100, 3)
    assert u["prompt_tokens"] == ru["input_tokens"] + 40 + 100
    want = (ru["input_tokens"] * 3.0 + 3 * 15.0 + 40 * 0.3 + 100 * 3.75) / 1e6
    assert row["cost_usd"] == pytest.approx(want, abs=1e-6)


def test_an_unconvertible_request_gives_back_its_reservation(tmp_path, bench, gwd):
    # DESIGN.md 8: unconvertible requests do not count against the key's limits.
    b = bench()
    g = gwd(config(tmp_path, [anthropic("claude", b, models=["claude-x"])],
                   clients=[{"name": "alice", "key_sha256": sha256_hex(ALICE_KEY),
                             "limits": [{"per": "day", "requests": 1}]}]))

    r = g.chat(chat_body(model="claude-x", n=2))
    assert r.status == 400 and r.headers["x-gw-code"] == "gw.unconvertible", r
    r = g.chat(chat_body(model="claude-x"))  # the day's one request is still there
    assert r.status == 200, r
    r = g.chat(chat_body(model="claude-x"))
    assert r.status == 429 and r.headers["x-gw-code"] == "gw.key_limit.requests_per_period", r
