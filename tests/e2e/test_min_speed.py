# SPDX-License-Identifier: MIT
# tests/e2e/test_min_speed.py - providers[].min_speed (DESIGN.md 6, 18): judged once a
# second from the first token over the last window_secs, one token per 4 bytes of content
# delta, silences of 5 s or more taken out, nothing judged before half a window of
# non-silent time. The fake upstream's --pace profile shapes one stream; every chunk is
# 40 bytes of text, i.e. 10 tokens, so "NxMS" with MS = 100 is 100 tokens/s.
#
# Why the numbers (first token at t = 0, judgements at whole seconds):
# - fast:      40x100, window 5, min 35: 100 tokens/s throughout.
# - slowdown:  30x100,3x1000,20x100, window 10, min 35: 3 s at 10 tokens/s, but the
#              window's average never drops below ~55 tokens/s.
# - pause:     30x100,1x7000,10x100, window 10, min 35: a 7 s silence; while it is under
#              5 s the average is >= 42 tokens/s (300 tokens over <= 7 s), once it is 5 s
#              it is taken out (counted, it would give 300/9 = 33 < 35 at t = 9).
# - sustained: 10x100,30x1000, window 5, min 35: after 1 s at 100 tokens/s the stream
#              goes on at 10 tokens/s; by t = 5 the window holds 150 tokens over 5 s = 30.

import json

from gwtest import (chat_body, config, content_of, overview_provider, provider)

TEXT = "0123456789" * 4  # 40 bytes: 10 tokens a chunk


def gw_with_min_speed(tmp_path, bench, gwd, pace, tps, window):
    b = bench("--pace", pace, "--text", TEXT)
    g = gwd(config(tmp_path, [provider("up", b, min_speed={"tokens_per_sec": tps,
                                                            "window_secs": window})]))
    return g, b


def read_stream(g):
    s = g.stream(chat_body(stream=True))
    assert s.status == 200, s.status
    evs = s.rest()
    s.close()
    return s, evs


def assert_whole_answer(g, s, evs, chunks):
    assert [content_of(e) for e in evs if content_of(e)] == [TEXT] * chunks, evs[-3:]
    assert evs[-1] == "[DONE]", evs[-3:]
    assert not [e for e in evs if '"error"' in e], evs
    row = g.wait_row(s.headers["x-request-id"])
    assert row["code"] is None, row
    assert row["outcome"] == "ok", row
    assert [(a["upstream"], a["outcome"]) for a in row["attempts"]] == [("up", "ok")], row
    return row


def test_fast_upstream_is_never_cut(tmp_path, bench, gwd):
    g, b = gw_with_min_speed(tmp_path, bench, gwd, "40x100", 35, 5)

    s, evs = read_stream(g)

    row = assert_whole_answer(g, s, evs, 40)
    assert row["tokens_per_sec"] >= 35, row
    assert overview_provider(g, "up")["consecutive_failures"] == 0


def test_short_slowdown_within_the_window_average_survives(tmp_path, bench, gwd):
    g, b = gw_with_min_speed(tmp_path, bench, gwd, "30x100,3x1000,20x100", 35, 10)

    s, evs = read_stream(g)

    assert_whole_answer(g, s, evs, 53)


def test_long_pause_is_taken_out_and_the_stream_survives(tmp_path, bench, gwd):
    g, b = gw_with_min_speed(tmp_path, bench, gwd, "30x100,1x7000,10x100", 35, 10)

    s, evs = read_stream(g)

    assert_whole_answer(g, s, evs, 41)
    assert b.stats()["streams_completed"] == 1


def test_sustained_slowdown_is_cut_with_an_error_chunk(tmp_path, bench, gwd):
    g, b = gw_with_min_speed(tmp_path, bench, gwd, "10x100,30x1000", 35, 5)

    s, evs = read_stream(g)

    assert "[DONE]" not in evs, evs
    got = [content_of(e) for e in evs if content_of(e)]
    assert 10 <= len(got) < 40, evs
    err = json.loads(evs[-1])["error"]
    assert err["code"] == "gw.upstream.too_slow", err
    assert err["status"] == 503, err
    assert isinstance(err["message"], str) and "type" in err, err
    row = g.wait_row(s.headers["x-request-id"])
    assert row["code"] == "gw.upstream.too_slow", row
    assert row["outcome"] == "too_slow", row
    assert [(a["upstream"], a["outcome"]) for a in row["attempts"]] == [("up", "too_slow")], row
    assert row["usage"]["output_tokens"] >= 10, row
    assert row["tokens_per_sec"] is not None and row["tokens_per_sec"] < 35, row
    # the upstream connection was dropped, and one failure counts for the upstream
    b.wait_stat(lambda st: st["streams_aborted"] == 1, "the cut stream aborted upstream")
    ov = overview_provider(g, "up")
    assert ov["consecutive_failures"] == 1, ov
    assert ov["state"] == "ok", ov  # failures_to_pause is 3
