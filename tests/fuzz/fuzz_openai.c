/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_openai.c - fuzz target for the OpenAI Chat dialect: request parse,
 * render (checked: the output is a JSON object with the new model and, for a stream,
 * include_usage true; unchanged renders are the input byte for byte), chunk inspection,
 * answer usage and error bodies, all on the same input.
 * Owns:    one input at a time.
 * Threads: single-threaded.
 * See:     dialects/openai.c, tests/fuzz/corpus/openai/
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dialects/openai.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts unless <out> is a JSON object whose model is <model> and, when <stream>, whose
 * stream_options.include_usage is true. */
static void
t_check_render(const struct gw_buf *out, struct gw_str model, bool stream)
{
    json_error_t err;
    json_t *root, *m;

    root = json_loadb(out->data, out->len, JSON_ALLOW_NUL, &err);
    if (!root || !json_is_object(root))
        abort();
    m = json_object_get(root, "model");
    if (!json_is_string(m) || json_string_length(m) != model.len ||
        memcmp(json_string_value(m), model.ptr, model.len) != 0)
        abort();
    if (stream &&
        !json_is_true(json_object_get(json_object_get(root, "stream_options"), "include_usage")))
        abort();
    json_decref(root);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    struct dl_openai_req *r = NULL;
    struct dl_openai_chunk c;
    struct gw_buf why = {0}, out = {0};
    struct gw_usage u;
    size_t bytes;
    enum gw_code rc;

    rc = dl_openai_req_parse(body, size, &r, &why);
    if (rc == GW_OK) {
        struct gw_str asked = dl_openai_req_model(r);
        struct gw_str other = GW_STR_LIT("fuzz-\xc3\xa9-model\"\n");

        (void)dl_openai_req_input_estimate(r);
        if (dl_openai_req_render(r, body, size, asked, &out) != GW_OK)
            abort();
        if (!dl_openai_req_is_stream(r) || dl_openai_req_wants_usage(r)) {
            if (out.len != size || memcmp(out.data, body, size) != 0)
                abort();
        } else {
            t_check_render(&out, asked, true);
        }
        gw_buf_reset(&out);
        if (dl_openai_req_render(r, body, size, other, &out) != GW_OK)
            abort();
        t_check_render(&out, other, dl_openai_req_is_stream(r));
        dl_openai_req_free(r);
    } else if (rc != GW_E_BAD_REQUEST || r != NULL || why.len == 0) {
        abort();
    }
    if (dl_openai_chunk_inspect((struct gw_str){body, size}, &c) != GW_OK)
        abort();
    if (c.has_content != (c.content_bytes > 0) || (c.usage_only && !c.has_usage))
        abort();
    (void)dl_openai_answer_usage((struct gw_str){body, size}, &u, &bytes);
    gw_buf_reset(&out);
    if (size > 0 &&
        dl_openai_error_chunk((enum gw_code)(1 + data[0] % (GW_CODE__COUNT - 1)),
                              (struct gw_str){body, size < 64 ? size : 64}, &out) != GW_OK)
        abort();
    gw_buf_fini(&out);
    gw_buf_fini(&why);
    return 0;
}
