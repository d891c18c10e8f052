/* SPDX-License-Identifier: MIT
 * dialects/openai_models.c - the model listing in the OpenAI shape (GET /v1/models,
 * GET /v1/models/{id}), with context_window and max_output_tokens when known
 * (DESIGN.md 9, 18). Pure renderer into a gw_buf.
 * Owns:    nothing.
 * Threads: any.
 * See:     dialects/openai.h, net/pipeline.c
 */
#include "dialects/openai.h"

enum gw_code
dl_model_limits_append(const struct dl_model_entry *e, struct gw_buf *out)
{
    enum gw_code rc = GW_OK;

    if (e->context_window) {
        rc = gw_buf_append_cstr(out, ",\"context_window\":");
        if (rc == GW_OK)
            rc = gw_buf_append_u64(out, e->context_window);
    }
    if (rc == GW_OK && e->max_output_tokens) {
        rc = gw_buf_append_cstr(out, ",\"max_output_tokens\":");
        if (rc == GW_OK)
            rc = gw_buf_append_u64(out, e->max_output_tokens);
    }
    return rc;
}

static enum gw_code
model_object(const struct dl_model_entry *e, struct gw_buf *out)
{
    enum gw_code rc = gw_buf_append_cstr(out, "{\"id\":");

    if (rc == GW_OK)
        rc = gw_buf_append_json_str(out, gw_str_c(e->id));
    if (rc == GW_OK)
        rc = gw_buf_append_cstr(out, ",\"object\":\"model\",\"created\":0,\"owned_by\":");
    if (rc == GW_OK)
        rc = gw_buf_append_json_str(out, gw_str_c(e->owned_by));
    if (rc == GW_OK)
        rc = dl_model_limits_append(e, out);
    if (rc == GW_OK)
        rc = gw_buf_append(out, "}", 1);
    return rc;
}

enum gw_code
dl_openai_models_render(const struct dl_model_entry *v, size_t n, bool single, struct gw_buf *out)
{
    enum gw_code rc = GW_OK;
    size_t i;

    if (single)
        return n ? model_object(&v[0], out) : GW_E_INTERNAL;
    rc = gw_buf_append_cstr(out, "{\"object\":\"list\",\"data\":[");
    for (i = 0; rc == GW_OK && i < n; i++) {
        if (i)
            rc = gw_buf_append(out, ",", 1);
        if (rc == GW_OK)
            rc = model_object(&v[i], out);
    }
    if (rc == GW_OK)
        rc = gw_buf_append(out, "]}", 2);
    return rc;
}
