# SPDX-License-Identifier: MIT
# tests/e2e/test_cost.py - every row is priced from its usage (DESIGN.md 8, 9): the
# answering upstream's prices for the model it was asked (providers[].model_specs over
# the price table), billing: free and unpriced models at $0.

import pytest

from gwtest import chat_body, config, provider, sha256_hex


PRICES = ("models:\n"
          "  - {model: m1, input: 2.0, output: 8.0, cache_read: 0.5, cache_write: 2.0}\n")


@pytest.mark.parametrize("stream", [False, True])
def test_row_cost_follows_usage_and_the_price_table(tmp_path, bench, gwd, stream):
    (tmp_path / "prices.yaml").write_text(PRICES)
    b = bench("--chunks", 5, "--cached", 4)
    g = gwd(config(tmp_path, [provider("up", b)], prices="prices.yaml"))

    r = g.chat(chat_body(model="m1", stream=stream, include_usage=True if stream else None))
    assert r.status == 200, r
    row = g.wait_row(r.headers["x-request-id"])
    u = row["usage"]
    assert u["cache_read_tokens"] == 4 and u["output_tokens"] == 5 and not u["estimated"]
    want = (u["input_tokens"] * 2.0 + u["output_tokens"] * 8.0 + u["cache_read_tokens"] * 0.5
            + u["cache_write_tokens"] * 2.0) / 1e6
    assert row["cost_usd"] == pytest.approx(want, abs=1e-6)
    assert row["cost_usd"] > 0


@pytest.mark.parametrize("client", ["chat", "responses", "messages", "gemini"])
def test_every_client_shape_is_priced(tmp_path, bench, gwd, client):
    # The model a Messages or Responses client names was a slice of its body, which the
    # price lookup read past its end (those rows cost $0): each shape's row is priced.
    from test_hub_four import send
    (tmp_path / "prices.yaml").write_text(PRICES)
    b = bench("--chunks", 5, "--cached", 4)
    g = gwd(config(tmp_path, [provider("up", b)], prices="prices.yaml"))

    r = send(g, client, "m1", False, [("user", "hi")])

    assert r.status == 200, r
    row = g.wait_row(r.headers["x-request-id"])
    u = row["usage"]
    assert u["cache_read_tokens"] == 4 and u["output_tokens"] == 5 and not u["estimated"], row
    want = (u["input_tokens"] * 2.0 + u["output_tokens"] * 8.0 + 4 * 0.5) / 1e6
    assert row["cost_usd"] == pytest.approx(want, abs=1e-6) and want > 0, row


def test_model_specs_win_and_free_billing_and_unpriced_models_cost_nothing(tmp_path, bench,
                                                                          gwd):
    (tmp_path / "prices.yaml").write_text(PRICES)
    b = bench("--chunks", 5)
    spec = provider("spec", b, model_specs={"m1": {"input": 10.0, "output": 20.0}})
    free = provider("free", b, billing="free")
    g = gwd(config(tmp_path, [spec, free], prices="prices.yaml",
                   groups=[{"name": "via-free", "type": "fallback", "model": "m1",
                            "providers": ["free"]}]))

    r = g.chat(chat_body(model="m1"))
    row = g.wait_row(r.headers["x-request-id"])
    assert row["upstream"] == "spec"
    u = row["usage"]
    assert row["cost_usd"] == pytest.approx(
        (u["input_tokens"] * 10.0 + u["output_tokens"] * 20.0) / 1e6, abs=1e-6)

    r = g.chat(chat_body(model="via-free"))
    row = g.wait_row(r.headers["x-request-id"])
    assert row["upstream"] == "free" and row["cost_usd"] == 0

    r = g.chat(chat_body(model="not-in-any-table"))
    row = g.wait_row(r.headers["x-request-id"])
    assert row["status"] == 200 and row["cost_usd"] == 0


def test_a_cost_limited_key_lists_the_unpriced_models_it_used(tmp_path, bench, gwd):
    # DESIGN.md 8 / issue 4: an unpriced model costs $0, so a cost limit cannot see it;
    # the key's view names such models.
    (tmp_path / "prices.yaml").write_text(PRICES)
    b = bench()
    g = gwd(config(tmp_path, [provider("up", b)], prices="prices.yaml",
                   clients=[{"name": "cap", "key_sha256": sha256_hex("cap-key"),
                             "limits": [{"per": "day", "cost": 5.0}]}]))
    for model in ("m1", "mystery-model", "mystery-model"):
        r = g.chat(chat_body(model=model), key="cap-key")
        assert r.status == 200, r
        g.wait_row(r.headers["x-request-id"])
    key = [k for k in g.control("/control/v1/overview").json()["keys"] if k["name"] == "cap"][0]
    assert key["unpriced_models"] == ["mystery-model"]
