/* SPDX-License-Identifier: MIT
 * dialects/gemini_models.c - the model listing in the Gemini shape (GET /v1beta/models
 * and /v1beta/models/{id}, DESIGN.md 4) as @google/genai's models.list pages it:
 * {"models":[{"name":"models/<id>","baseModelId","version","displayName",
 * "inputTokenLimit","outputTokenLimit","supportedGenerationMethods"}]} with no
 * nextPageToken (one page); and the countTokens answer {"totalTokens":n}.
 * Decisions: the gateway knows no version of its own: "version" is "1". The limits are
 * the model's spec (context window, max output), left out when unknown. Every model
 * supports generateContent, streamGenerateContent and countTokens (what the gateway
 * serves for it).
 * Pure renderer into a gw_buf.
 * Owns:    nothing.
 * Threads: any.
 * See:     dialects/gemini.h, dialects/openai_models.c, net/listing.c
 */
#include "dialects/gemini.h"

#include "dialects/openai.h" /* struct dl_model_entry */

static enum gw_code
limit(struct gw_buf *out, const char *key, uint64_t v)
{
    enum gw_code rc;

    if (!v)
        return GW_OK;
    rc = gw_buf_append_cstr(out, key);
    return rc == GW_OK ? gw_buf_append_u64(out, v) : rc;
}

static enum gw_code
model_object(const struct dl_model_entry *e, struct gw_buf *out)
{
    struct gw_str id = gw_str_c(e->id);
    enum gw_code rc = gw_buf_append_cstr(out, "{\"name\":\"models/");

    /* the id escaped, inside the quotes already opened */
    if (rc == GW_OK) {
        size_t at = out->len;

        rc = gw_buf_append_json_str(out, id);
        if (rc == GW_OK) {
            memmove(out->data + at, out->data + at + 1, out->len - at - 1);
            out->data[--out->len] = '\0';
        }
    }
    if (rc == GW_OK)
        rc = gw_buf_append_cstr(out, ",\"baseModelId\":");
    if (rc == GW_OK)
        rc = gw_buf_append_json_str(out, id);
    if (rc == GW_OK)
        rc = gw_buf_append_cstr(out, ",\"version\":\"1\",\"displayName\":");
    if (rc == GW_OK)
        rc = gw_buf_append_json_str(out, id);
    if (rc == GW_OK)
        rc = limit(out, ",\"inputTokenLimit\":", e->context_window);
    if (rc == GW_OK)
        rc = limit(out, ",\"outputTokenLimit\":", e->max_output_tokens);
    if (rc == GW_OK)
        rc = gw_buf_append_cstr(out, ",\"supportedGenerationMethods\":[\"generateContent\","
                                     "\"streamGenerateContent\",\"countTokens\"]}");
    return rc;
}

enum gw_code
dl_gemini_models_render(const struct dl_model_entry *v, size_t n, bool single, struct gw_buf *out)
{
    size_t start = out->len, i;
    enum gw_code rc;

    if (single)
        rc = n ? model_object(&v[0], out) : GW_E_INTERNAL;
    else {
        rc = gw_buf_append_cstr(out, "{\"models\":[");
        for (i = 0; rc == GW_OK && i < n; i++) {
            if (i)
                rc = gw_buf_append(out, ",", 1);
            if (rc == GW_OK)
                rc = model_object(&v[i], out);
        }
        if (rc == GW_OK)
            rc = gw_buf_append_cstr(out, "]}");
    }
    if (rc != GW_OK) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
    }
    return rc;
}

enum gw_code
dl_gemini_count_render(uint64_t n, struct gw_buf *out)
{
    size_t start = out->len;

    if (gw_buf_append_cstr(out, "{\"totalTokens\":") != GW_OK ||
        gw_buf_append_u64(out, n) != GW_OK || gw_buf_append_cstr(out, "}") != GW_OK) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
        return GW_E_NOMEM;
    }
    return GW_OK;
}
