# SPDX-License-Identifier: MIT
# tests/e2e/test_models.py - GET /v1/models and /v1/models/{id} in the OpenAI shape
# (DESIGN.md 9, 18): a gateway key is needed; groups and the models providers list by
# name, only those the key may use; context_window and max_output_tokens from the one
# resolve function (model_specs over the price table), described by the first upstream.


from gwtest import bearer, chat_body, config, http_request, provider, sha256_hex

PRICES = ("models:\n"
          "  - {model: m1, input: 1.0, output: 2.0, context_window: 128000,"
          " max_output_tokens: 16384}\n")


def test_models_listing_needs_a_key_and_describes_each_model(tmp_path, bench, gwd):
    (tmp_path / "prices.yaml").write_text(PRICES)
    b = bench()
    first = provider("first", b, models=["m1", "m2"],
                     model_specs={"m2": {"context_window": 32000}})
    second = provider("second", b, models=["m1", "m3"],
                      model_specs={"m1": {"context_window": 999}})
    g = gwd(config(tmp_path, [first, second], prices="prices.yaml",
                   groups=[{"name": "smart", "type": "fallback", "model": "m2",
                            "providers": ["first"]}],
                   clients=[{"name": "alice", "key_sha256": sha256_hex("alice-key")},
                            {"name": "scoped", "key_sha256": sha256_hex("scoped-key"),
                             "models": ["m3"]}]))

    r = http_request(g.port, "GET", "/v1/models")
    assert r.status == 401 and r.headers["x-gw-code"] == "gw.auth.missing_key"

    r = http_request(g.port, "GET", "/v1/models", headers=bearer("alice-key"))
    assert r.status == 200, r
    body = r.json()
    assert body["object"] == "list"
    by_id = {m["id"]: m for m in body["data"]}
    assert list(by_id) == ["smart", "m1", "m2", "m3"]
    # m1 is described by the first upstream offering it (the table's figures), not by
    # the second's model_specs
    assert by_id["m1"]["owned_by"] == "first"
    assert by_id["m1"]["context_window"] == 128000
    assert by_id["m1"]["max_output_tokens"] == 16384
    assert by_id["m2"]["context_window"] == 32000
    assert "context_window" not in by_id["m3"]
    assert by_id["smart"]["owned_by"] == "gw"
    assert by_id["smart"]["context_window"] == 32000  # its first member asked for m2

    r = http_request(g.port, "GET", "/v1/models/m1", headers=bearer("alice-key"))
    assert r.status == 200 and r.json()["id"] == "m1"
    r = http_request(g.port, "GET", "/v1/models/nope", headers=bearer("alice-key"))
    assert r.status == 404 and r.headers["x-gw-code"] == "gw.model_not_found"

    # a scoped key sees only its models
    r = http_request(g.port, "GET", "/v1/models", headers=bearer("scoped-key"))
    assert [m["id"] for m in r.json()["data"]] == ["m3"]
    r = http_request(g.port, "GET", "/v1/models/m1", headers=bearer("scoped-key"))
    assert r.status == 404


def test_request_too_large_for_a_context_window_is_rerouted_or_refused(tmp_path, bench,
                                                                        gwd):
    # DESIGN.md 9: the estimated input must fit the chosen model's context window; a
    # candidate it does not fit is skipped (skipped:context), and when none fits the
    # request is refused with 400 before anything reaches an upstream.
    (tmp_path / "prices.yaml").write_text(
        "models:\n  - {model: small, input: 1.0, output: 1.0, context_window: 100}\n")
    a, b = bench(), bench()
    roomy = provider("roomy", b, models=["small"],
                     model_specs={"small": {"context_window": 1000000}})
    g = gwd(config(tmp_path, [provider("tight", a, models=["small"]), roomy],
                   prices="prices.yaml"))
    big = chat_body(model="small", text="x" * 2000)  # ~500 tokens by the 4-byte estimate

    r = g.chat(big)
    assert r.status == 200, r
    row = g.wait_row(r.headers["x-request-id"])
    assert [(x["upstream"], x["outcome"]) for x in row["attempts"]] == [
        ("tight", "skipped:context"), ("roomy", "ok")]
    assert a.stats()["requests"] == 0

    r = g.chat(chat_body(model="small"))  # a small request fits the tight one
    assert r.status == 200 and g.wait_row(r.headers["x-request-id"])["upstream"] == "tight"

    g2 = gwd(config(tmp_path, [provider("tight", a, models=["small"])], prices="prices.yaml",
                    store={"path": str(tmp_path / "store2")}),
             name="only-tight.yaml")
    r = g2.chat(big)
    assert r.status == 400, r
    assert r.headers["x-gw-code"] == "gw.context_length_exceeded"
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error"
    assert err["code"] == "context_length_exceeded"  # OpenAI's own, which agents act on
    assert err["gw_code"] == "gw.context_length_exceeded"
    assert a.stats()["requests"] == 1  # only the small request above reached it
