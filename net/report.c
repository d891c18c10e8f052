/* SPDX-License-Identifier: MIT
 * net/report.c - the request line and request_finished event of every finished request,
 * and the upstream_paused / upstream_resumed events and lines.
 * The request line carries the row's fields (names, numbers, codes): a row holds no
 * body, key or credential, so neither can the line. request_finished is built (jansson,
 * the traffic view's rendering) only when a subscriber wants that request: workers pay
 * nothing for it while nobody follows the events.
 * Owns:    nothing beyond one call.
 * Threads: workers (request, paused, resumed by a success); the control thread (sweep).
 * See:     net/report.h, core/events.h, core/log.h
 */
#include "net/report.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "core/conf.h"
#include "core/events.h"
#include "core/health.h"
#include "core/row.h"
#include "core/str.h"
#include "net/control.h"

/* ---- the request ---- */

/* "up-a/failed,up-b/ok" from the row's attempts, as many as fit in <n> bytes. */
static void
attempt_outcomes(const struct gw_row *r, char *out, size_t n)
{
    unsigned i, na = r->n_attempts < GW_ROW_MAX_ATTEMPTS ? r->n_attempts : GW_ROW_MAX_ATTEMPTS;
    size_t off = 0;

    out[0] = '\0';
    for (i = 0; i < na && off < n; i++) {
        int w = snprintf(out + off, n - off, "%s%s/%s", i ? "," : "", r->attempts[i].upstream,
                         gw_outcome_str((enum gw_outcome)r->attempts[i].outcome));

        if (w < 0 || (size_t)w >= n - off) {
            out[off] = '\0'; /* cut at the last whole attempt */
            break;
        }
        off += (size_t)w;
    }
}

static struct gw_log_field
f_str(const char *key, const char *s)
{
    return (struct gw_log_field){key, GW_LF_STR, {.s = s}};
}

static struct gw_log_field
f_u64(const char *key, uint64_t v)
{
    return (struct gw_log_field){key, GW_LF_U64, {.u = v}};
}

static struct gw_log_field
f_raw(const char *key, const char *s)
{
    return (struct gw_log_field){key, GW_LF_RAW, {.s = s}};
}

static void
log_request(const struct gw_row *r, const struct gw_log_ctx *ctx)
{
    char outcomes[GW_ROW_MAX_ATTEMPTS * (GW_NAME_MAX + 24)], cost[32];
    uint64_t micros = r->cost_micros < 0 ? 0 : (uint64_t)r->cost_micros;
    struct gw_log_field f[18];
    size_t n = 0;

    attempt_outcomes(r, outcomes, sizeof(outcomes));
    snprintf(cost, sizeof(cost), "%llu.%06llu", (unsigned long long)(micros / 1000000),
             (unsigned long long)(micros % 1000000));
    f[n++] = f_str("client", r->client[0] ? r->client : NULL);
    f[n++] = f_str("model", r->model[0] ? r->model : NULL);
    f[n++] = f_str("upstream", r->upstream[0] ? r->upstream : NULL);
    f[n++] = f_u64("status", r->status);
    f[n++] = f_str("gw_code", r->code == GW_OK ? NULL : gw_code_str((enum gw_code)r->code));
    f[n++] = f_str("outcome", gw_outcome_str((enum gw_outcome)r->outcome));
    f[n++] = f_raw("stream", r->stream ? "true" : "false");
    f[n++] = f_u64("attempts", r->n_attempts);
    f[n++] = f_str("attempt_outcomes", outcomes[0] ? outcomes : NULL);
    f[n++] = f_u64("input_tokens", r->usage.input_tokens);
    f[n++] = f_u64("output_tokens", r->usage.output_tokens);
    f[n++] = f_u64("cache_read_tokens", r->usage.cache_read_tokens);
    f[n++] = f_u64("cache_write_tokens", r->usage.cache_write_tokens);
    f[n++] = f_raw("tokens_estimated", r->usage.estimated ? "true" : "false");
    f[n++] = f_raw("cost_usd", cost);
    f[n++] = r->ttfb_ms < 0 ? f_str("ttfb_ms", NULL) : f_u64("ttfb_ms", (uint64_t)r->ttfb_ms);
    f[n++] = f_u64("duration_ms", r->duration_ms);
    f[n++] = f_u64("queued_ms", r->queued_ms);
    gw_log_fields(GW_LOG_INFO, ctx, "request", f, n, "%s %u in %u ms", r->model[0] ? r->model : "-",
                  (unsigned)r->status, (unsigned)r->duration_ms);
}

static void
publish_request(const struct gw_row *r)
{
    json_t *o = net_control_row_json(r);
    char *s = NULL;

    if (o && json_object_set_new(o, "type", json_string("request_finished")) == 0)
        s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (s)
        gw_event_push_about(GW_EV_REQUEST_FINISHED, r->client, r->id, s);
    else
        gw_event_count_drop(GW_EV_REQUEST_FINISHED); /* out of memory: lost, not silently */
    free(s);                                         /* jansson's default allocator */
}

void
net_report_request(const struct gw_row *r, const struct gw_log_ctx *ctx)
{
    if (gw_log_enabled(GW_LOG_INFO))
        log_request(r, ctx);
    if (gw_event_wanted_request(r->id))
        publish_request(r);
}

void
net_report_unrecorded(const struct gw_log_ctx *ctx, const char *client, int status,
                      enum gw_code code, enum gw_outcome outcome, uint32_t duration_ms)
{
    struct gw_row r;

    if (!gw_log_enabled(GW_LOG_INFO))
        return;
    /* The row's head only: n_attempts is 0, so the attempts are never read. */
    memset(&r, 0, offsetof(struct gw_row, attempts));
    if (client)
        snprintf(r.client, sizeof(r.client), "%s", client);
    r.status = (uint16_t)status;
    r.code = (uint16_t)code;
    r.outcome = (uint8_t)outcome;
    r.ttfb_ms = -1;
    r.duration_ms = duration_ms;
    log_request(&r, ctx);
}

/* ---- upstream pauses ---- */

void
net_report_paused(const struct gw_conf_provider *p, uint64_t now_ms, int status, enum gw_code code,
                  uint64_t retry_ms, const struct gw_log_ctx *ctx)
{
    struct gw_upfacts f;
    const char *reason;
    char until[64], json[512], st[16];

    gw_upstate_facts(p->state, now_ms, &f);
    /* A Retry-After at least as long as the pause is what set its end. */
    reason = retry_ms && f.paused_until_ms && f.paused_until_ms - now_ms <= retry_ms ? "retry_after"
                                                                                     : "failures";
    gw_fmt_iso_ms(f.paused_until_ms ? f.paused_until_ms : now_ms, until);
    snprintf(st, sizeof(st), "%d", status);
    snprintf(json, sizeof(json),
             "{\"type\":\"upstream_paused\",\"provider\":\"%s\",\"reason\":\"%s\","
             "\"code\":%s%s%s,\"status\":%s,\"until\":\"%s\",\"pause_ms\":%llu,\"pauses\":%u}",
             p->name, reason, code == GW_OK ? "" : "\"", code == GW_OK ? "null" : gw_code_str(code),
             code == GW_OK ? "" : "\"", status > 0 ? st : "null", until,
             (unsigned long long)(f.paused_until_ms > now_ms ? f.paused_until_ms - now_ms : 0),
             f.pauses);
    gw_event_push(GW_EV_UPSTREAM_PAUSED, json);
    GW_LOG(GW_LOG_WARN, ctx, "upstream_paused", "upstream %s paused until %s (%s, %s)", p->name,
           until, reason, code == GW_OK ? "-" : gw_code_str(code));
}

void
net_report_resumed(const struct gw_conf_provider *p, const char *reason, uint64_t until_ms,
                   const struct gw_log_ctx *ctx)
{
    char until[72] = "null", json[256];

    if (until_ms) {
        until[0] = '"';
        gw_fmt_iso_ms(until_ms, until + 1);
        strcat(until, "\"");
    }
    snprintf(json, sizeof(json),
             "{\"type\":\"upstream_resumed\",\"provider\":\"%s\",\"reason\":\"%s\","
             "\"paused_until\":%s}",
             p->name, reason, until);
    gw_event_push(GW_EV_UPSTREAM_RESUMED, json);
    GW_LOG(GW_LOG_INFO, ctx, "upstream_resumed", "upstream %s resumed (%s)", p->name, reason);
}

void
net_report_sweep(const struct gw_conf *c, uint64_t now_ms)
{
    size_t i;
    uint64_t until;

    for (i = 0; c && i < c->n_providers; i++) {
        const struct gw_conf_provider *p = &c->providers[i];

        if (p->state && gw_upstate_take_resumed(p->state, now_ms, &until))
            net_report_resumed(p, "expired", until, NULL);
    }
}
