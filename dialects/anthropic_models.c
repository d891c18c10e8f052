/* SPDX-License-Identifier: MIT
 * dialects/anthropic_models.c - the model listing in the Anthropic shape (GET /v1/models
 * and /v1/models/{id} when the request carries anthropic-version, DESIGN.md 4):
 * {"data":[{"type":"model","id","display_name","created_at"}],"has_more","first_id",
 * "last_id"}, as the Anthropic SDK's models.list pages it, with context_window and
 * max_output_tokens added when known. Pure renderer into a gw_buf.
 * Owns:    nothing.
 * Threads: any.
 * See:     dialects/canon.h, net/listing.c, dialects/openai_models.c
 */
#include "dialects/canon.h"
#include "dialects/openai.h" /* struct dl_model_entry */

static enum gw_code
model_object(const struct dl_model_entry *e, struct gw_buf *out)
{
    enum gw_code rc = gw_buf_append_cstr(out, "{\"type\":\"model\",\"id\":");

    if (rc == GW_OK)
        rc = gw_buf_append_json_str(out, gw_str_c(e->id));
    if (rc == GW_OK)
        rc = gw_buf_append_cstr(out, ",\"display_name\":");
    if (rc == GW_OK)
        rc = gw_buf_append_json_str(out, gw_str_c(e->id));
    /* Listings carry no dates of their own: the epoch, in the RFC 3339 form the SDK reads. */
    if (rc == GW_OK)
        rc = gw_buf_append_cstr(out, ",\"created_at\":\"1970-01-01T00:00:00Z\"");
    if (rc == GW_OK)
        rc = dl_model_limits_append(e, out);
    if (rc == GW_OK)
        rc = gw_buf_append(out, "}", 1);
    return rc;
}

enum gw_code
dl_anthropic_models_render(const struct dl_model_entry *v, size_t n, bool single,
                           struct gw_buf *out)
{
    enum gw_code rc;
    size_t i;

    if (single)
        return n ? model_object(&v[0], out) : GW_E_INTERNAL;
    rc = gw_buf_append_cstr(out, "{\"data\":[");
    for (i = 0; rc == GW_OK && i < n; i++) {
        if (i)
            rc = gw_buf_append(out, ",", 1);
        if (rc == GW_OK)
            rc = model_object(&v[i], out);
    }
    if (rc == GW_OK)
        rc = gw_buf_append_cstr(out, "],\"has_more\":false,\"first_id\":");
    if (rc == GW_OK)
        rc = n ? gw_buf_append_json_str(out, gw_str_c(v[0].id)) : gw_buf_append_cstr(out, "null");
    if (rc == GW_OK)
        rc = gw_buf_append_cstr(out, ",\"last_id\":");
    if (rc == GW_OK)
        rc = n ? gw_buf_append_json_str(out, gw_str_c(v[n - 1].id))
               : gw_buf_append_cstr(out, "null");
    if (rc == GW_OK)
        rc = gw_buf_append(out, "}", 1);
    return rc;
}
