/* SPDX-License-Identifier: MIT
 * net/control.c - the control thread: one event_base and one evhttp server on
 * control.listen answering /healthz, /metrics (Prometheus text) and the bearer-token
 * protected /control/v1/ JSON API (DESIGN.md 14, 18).
 * Each request acquires the live config snapshot (for the token) and releases it before
 * the handler returns; traffic pages are read from the store in their own read
 * transaction (store_rows_page), so nothing is held across callbacks.
 * Owns:    the thread, its event_base, the evhttp server and listener, the stop event.
 * Threads: net_control_start/stop on main; every handler on the control thread, which
 *          blocks only on its own sockets and short LMDB reads.
 * See:     net/control.h, cli/ (gwctl), tests/unit/net/test_control.c, docs/gwctl.md
 */
#include "net/control.h"

#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/evp.h>

#include "core/alloc.h"
#include "core/codes.h"
#include "core/row.h"
#include "core/snap.h"
#include "core/str.h"
#include "store/store.h"

#define CONTROL_LIMIT_DEFAULT 50
#define CONTROL_LIMIT_MAX 500
#define CONTROL_MAX_BODY (64 * 1024)
#define CONTROL_MAX_HEADERS (16 * 1024)
#define CONTROL_TIMEOUT_SECS 30
#define CONTROL_PREFIX "/control/v1/"
/* "2026-11-30T04:01:02.345Z" and its NUL */
#define CONTROL_TS_LEN 25

struct net_control {
    struct event_base *base;          /* owned; run by the thread only */
    struct evhttp *http;              /* owned */
    struct evhttp_bound_socket *sock; /* owned by http */
    struct event *stop_ev;            /* owned; made active by net_control_stop */
    struct store *store;              /* borrowed; may be NULL */
    uint16_t port;
    bool running; /* the thread was started */
    pthread_t thread;
    struct gw_thread thr; /* the control thread's epoch record */
};

/* ---- JSON helpers ---- */

/* A JSON string from the fixed-size row field <s> (at most <cap> bytes, NUL within),
 * null when empty. Not-UTF-8 input (a model id cut mid-character) becomes '?'s. */
static json_t *
json_field(const char *s, size_t cap)
{
    size_t n = strnlen(s, cap), i;
    char tmp[256];
    json_t *j;

    if (n == 0)
        return json_null();
    j = json_stringn(s, n);
    if (j || n > sizeof(tmp))
        return j;
    for (i = 0; i < n; i++)
        tmp[i] = (unsigned char)s[i] >= 0x80 ? '?' : s[i];
    return json_stringn(tmp, n);
}

static json_t *
json_code_or_null(unsigned code)
{
    return code == GW_OK ? json_null() : json_string(gw_code_str((enum gw_code)code));
}

static json_t *
json_ms_or_null(int32_t ms)
{
    return ms < 0 ? json_null() : json_integer(ms);
}

/* RFC 3339 UTC with milliseconds; out-of-range times clamp to the year 9999. */
static void
format_ts(uint64_t ts_ms, char out[CONTROL_TS_LEN])
{
    time_t secs = (time_t)(ts_ms / 1000);
    struct tm tm;

    if (ts_ms / 1000 > 253402300799ull || !gmtime_r(&secs, &tm)) {
        snprintf(out, CONTROL_TS_LEN, "9999-12-31T23:59:59.999Z");
        return;
    }
    /* 19 characters, then ".mmmZ" */
    if (strftime(out, CONTROL_TS_LEN, "%Y-%m-%dT%H:%M:%S", &tm) != 19) {
        snprintf(out, CONTROL_TS_LEN, "9999-12-31T23:59:59.999Z");
        return;
    }
    snprintf(out + 19, CONTROL_TS_LEN - 19, ".%03uZ", (unsigned)(ts_ms % 1000));
}

static json_t *
attempt_json(const struct gw_attempt *a)
{
    json_t *o = json_object();
    int rc = 0;

    rc |= json_object_set_new(o, "upstream", json_field(a->upstream, sizeof(a->upstream)));
    rc |= json_object_set_new(o, "model", json_field(a->model, sizeof(a->model)));
    rc |=
        json_object_set_new(o, "outcome", json_string(gw_outcome_str((enum gw_outcome)a->outcome)));
    rc |= json_object_set_new(o, "status", a->status ? json_integer(a->status) : json_null());
    rc |= json_object_set_new(o, "code", json_code_or_null(a->code));
    rc |= json_object_set_new(o, "queued_ms", json_integer(a->queued_ms));
    rc |= json_object_set_new(o, "ttfb_ms", json_ms_or_null(a->ttfb_ms));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *
net_control_row_json(const struct gw_row *r)
{
    char ts[CONTROL_TS_LEN];
    json_t *o = json_object(), *usage = json_object(), *attempts = json_array();
    unsigned i, n = r->n_attempts < GW_ROW_MAX_ATTEMPTS ? r->n_attempts : GW_ROW_MAX_ATTEMPTS;
    double tps = isfinite(r->tokens_per_sec) ? r->tokens_per_sec : 0.0;
    int rc = 0;

    format_ts(r->ts_ms, ts);
    rc |=
        json_object_set_new(usage, "input_tokens", json_integer((json_int_t)r->usage.input_tokens));
    rc |= json_object_set_new(usage, "output_tokens",
                              json_integer((json_int_t)r->usage.output_tokens));
    rc |= json_object_set_new(usage, "cache_read_tokens",
                              json_integer((json_int_t)r->usage.cache_read_tokens));
    rc |= json_object_set_new(usage, "cache_write_tokens",
                              json_integer((json_int_t)r->usage.cache_write_tokens));
    rc |= json_object_set_new(usage, "estimated", json_boolean(r->usage.estimated));
    for (i = 0; i < n; i++)
        rc |= json_array_append_new(attempts, attempt_json(&r->attempts[i]));

    rc |= json_object_set_new(o, "id", json_field(r->id, sizeof(r->id)));
    rc |= json_object_set_new(o, "ts", json_string(ts));
    rc |= json_object_set_new(o, "client", json_field(r->client, sizeof(r->client)));
    rc |= json_object_set_new(o, "model", json_field(r->model, sizeof(r->model)));
    rc |= json_object_set_new(o, "upstream", json_field(r->upstream, sizeof(r->upstream)));
    rc |= json_object_set_new(o, "status", json_integer(r->status));
    rc |= json_object_set_new(o, "code", json_code_or_null(r->code));
    rc |=
        json_object_set_new(o, "outcome", json_string(gw_outcome_str((enum gw_outcome)r->outcome)));
    rc |= json_object_set_new(o, "usage", usage);
    rc |= json_object_set_new(o, "cost_usd", json_real((double)r->cost_micros / 1e6));
    rc |= json_object_set_new(o, "ttfb_ms", json_ms_or_null(r->ttfb_ms));
    rc |= json_object_set_new(o, "duration_ms", json_integer(r->duration_ms));
    rc |= json_object_set_new(o, "tokens_per_sec", json_real(tps));
    rc |= json_object_set_new(o, "queued_ms", json_integer(r->queued_ms));
    rc |= json_object_set_new(o, "stream", json_boolean(r->stream != 0));
    rc |= json_object_set_new(o, "attempts", attempts);
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- replies ---- */

static const char *
reason_of(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 503: return "Service Unavailable";
    default: return "Internal Server Error";
    }
}

static void
send_body(struct evhttp_request *req, int status, const char *ctype, const char *body, size_t len)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    struct evbuffer *b = evbuffer_new();

    evhttp_add_header(h, "Content-Type", ctype);
    evhttp_add_header(h, "Cache-Control", "no-store");
    if (!b) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    if (evbuffer_add(b, body, len) != 0) {
        evbuffer_free(b);
        evhttp_send_error(req, 500, NULL);
        return;
    }
    evhttp_send_reply(req, status, reason_of(status), b);
    evbuffer_free(b);
}

/* Sends <j> (consumed) as the JSON body. */
static void
send_json(struct evhttp_request *req, int status, json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
    static const char nomem[] =
        "{\"error\":{\"code\":\"gw.internal.nomem\",\"message\":\"out of memory\"}}";

    json_decref(j);
    if (!s) {
        send_body(req, 500, "application/json", nomem, sizeof(nomem) - 1);
        return;
    }
    send_body(req, status, "application/json", s, strlen(s));
    free(s); /* jansson's allocator */
}

/* {"error":{"code":"...","message":"..."}} with <status> (the code's own when 0). */
static void
send_error(struct evhttp_request *req, enum gw_code code, int status, const char *msg)
{
    json_t *j;

    if (status == 0)
        status = gw_code_http_status(code);
    j = json_pack("{s:{s:s,s:s}}", "error", "code", gw_code_str(code), "message", msg);
    send_json(req, status, j);
}

/* ---- handlers ---- */

static void
on_healthz(struct evhttp_request *req)
{
    send_json(req, 200, json_pack("{s:s}", "status", "ok"));
}

static void
on_metrics(struct net_control *c, struct evhttp_request *req)
{
    struct gw_buf b = {0};
    bool fail = false;
    unsigned i;

    fail |= gw_buf_printf(&b, "# HELP gw_code_total Occurrences of each gateway message code.\n"
                              "# TYPE gw_code_total counter\n") != GW_OK;
    for (i = 1; i < GW_CODE__COUNT; i++) {
        uint64_t n = gw_code_counter((enum gw_code)i);

        if (n)
            fail |= gw_buf_printf(&b, "gw_code_total{code=\"%s\"} %llu\n",
                                  gw_code_str((enum gw_code)i), (unsigned long long)n) != GW_OK;
    }
    if (c->store) {
        struct store_stats st;

        store_stats_get(c->store, &st);
        fail |= gw_buf_printf(&b,
                              "# HELP gw_store_rows_committed_total Request rows committed.\n"
                              "# TYPE gw_store_rows_committed_total counter\n"
                              "gw_store_rows_committed_total %llu\n"
                              "# HELP gw_store_rows_dropped_total Request rows dropped "
                              "(store queue full).\n"
                              "# TYPE gw_store_rows_dropped_total counter\n"
                              "gw_store_rows_dropped_total %llu\n"
                              "# HELP gw_store_batches_total Store write transactions "
                              "committed.\n"
                              "# TYPE gw_store_batches_total counter\n"
                              "gw_store_batches_total %llu\n"
                              "# HELP gw_store_rows_pruned_total Request rows removed by "
                              "retention.\n"
                              "# TYPE gw_store_rows_pruned_total counter\n"
                              "gw_store_rows_pruned_total %llu\n",
                              (unsigned long long)st.rows_committed,
                              (unsigned long long)st.rows_dropped, (unsigned long long)st.batches,
                              (unsigned long long)st.rows_pruned) != GW_OK;
    }
    if (fail)
        send_error(req, GW_E_NOMEM, 0, "out of memory");
    else
        send_body(req, 200, "text/plain; version=0.0.4; charset=utf-8", b.data ? b.data : "",
                  b.len);
    gw_buf_fini(&b);
}

static void
on_version(struct evhttp_request *req)
{
    send_json(req, 200,
              json_pack("{s:i,s:s}", "control_api_version", NET_CONTROL_API_VERSION, "gw_version",
                        NET_CONTROL_GW_VERSION));
}

/* Parses a decimal unsigned integer of 1..20 digits; false on anything else. */
static bool
parse_u64(const char *s, uint64_t *out)
{
    size_t n = strlen(s), i;
    unsigned long long v;
    char *end;

    if (n == 0 || n > 20)
        return false;
    for (i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

static void
on_traffic(struct net_control *c, struct evhttp_request *req)
{
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct evkeyvalq q = {0}; /* an empty queue; parse_query_str fills it */
    const char *v;
    uint64_t limit = CONTROL_LIMIT_DEFAULT, cursor = 0, next = 0;
    struct gw_row *rows = NULL;
    size_t n = 0, i;
    enum gw_code rc;
    json_t *page, *arr;
    int jrc = 0;

    if (query && evhttp_parse_query_str(query, &q) != 0) {
        send_error(req, GW_E_BAD_REQUEST, 400, "malformed query string");
        goto out;
    }
    v = evhttp_find_header(&q, "limit");
    if (v && (!parse_u64(v, &limit) || limit == 0)) {
        send_error(req, GW_E_BAD_REQUEST, 400, "limit: expected an integer from 1 to 500");
        goto out;
    }
    if (limit > CONTROL_LIMIT_MAX)
        limit = CONTROL_LIMIT_MAX;
    v = evhttp_find_header(&q, "cursor");
    if (v && *v && !parse_u64(v, &cursor)) {
        send_error(req, GW_E_BAD_REQUEST, 400,
                   "cursor: expected the \"next\" value of a previous page");
        goto out;
    }
    if (!c->store) {
        send_error(req, GW_E_STORE_IO, 503, "the store is not open");
        goto out;
    }
    rows = gw_malloc((size_t)limit * sizeof(*rows));
    if (!rows) {
        send_error(req, GW_E_NOMEM, 0, "out of memory");
        goto out;
    }
    rc = store_rows_page(c->store, cursor, rows, (size_t)limit, &n, &next);
    if (rc != GW_OK) {
        send_error(req, rc, 0, "cannot read the request rows");
        goto out;
    }
    page = json_object();
    arr = json_array();
    for (i = 0; i < n; i++)
        jrc |= json_array_append_new(arr, net_control_row_json(&rows[i]));
    jrc |= json_object_set_new(page, "rows", arr);
    if (next) {
        char buf[24];

        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)next);
        jrc |= json_object_set_new(page, "next", json_string(buf));
    } else {
        jrc |= json_object_set_new(page, "next", json_null());
    }
    if (jrc) {
        json_decref(page);
        send_error(req, GW_E_NOMEM, 0, "out of memory");
        goto out;
    }
    send_json(req, 200, page);
out:
    gw_free(rows);
    evhttp_clear_headers(&q);
}

static void
sha256(const void *p, size_t n, unsigned char out[32])
{
    unsigned int len = 32;

    if (!EVP_Digest(p, n, out, &len, EVP_sha256(), NULL))
        memset(out, 0, 32);
}

/* True when the request carries "Authorization: Bearer <token>". The digests are
 * compared, not the strings, so neither the token's length nor its bytes leak through
 * timing. Otherwise sets <*why> to the message for the 401. */
static bool
authorized(struct evhttp_request *req, const struct gw_conf *conf, const char **why)
{
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    unsigned char want[32], got[32];
    const char *tok;

    if (!conf || !conf->control.token || !*conf->control.token) {
        *why = "the control API is disabled: the variable named by control.token_env is unset";
        return false;
    }
    if (!h) {
        *why = "missing Authorization: Bearer <token>";
        return false;
    }
    if (strncasecmp(h, "Bearer ", 7) != 0) {
        *why = "the Authorization header must be: Bearer <token>";
        return false;
    }
    tok = h + 7;
    while (*tok == ' ')
        tok++;
    sha256(tok, strlen(tok), got);
    sha256(conf->control.token, strlen(conf->control.token), want);
    if (!gw_ct_equal(got, want, sizeof(want))) {
        *why = "invalid control token";
        return false;
    }
    return true;
}

static void
on_control(struct net_control *c, struct evhttp_request *req, const char *sub)
{
    struct gw_conf *conf = gw_conf_acquire(&c->thr);
    const char *why = NULL;
    char msg[160];

    if (!authorized(req, conf, &why)) {
        if (conf && !conf->control.token && conf->control.token_env) {
            snprintf(msg, sizeof(msg),
                     "the control API is disabled: control.token_env (%s) is unset",
                     conf->control.token_env);
            why = msg;
        }
        evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate", "Bearer");
        /* Counted (a /metrics signal of token guessing); other control errors are not,
         * so gw_code_total stays about the data plane. */
        gw_code_count(GW_E_CONTROL_UNAUTHORIZED);
        send_error(req, GW_E_CONTROL_UNAUTHORIZED, 401, why);
    } else if (strcmp(sub, "version") == 0) {
        on_version(req);
    } else if (strcmp(sub, "traffic") == 0) {
        on_traffic(c, req);
    } else {
        send_error(req, GW_E_NOT_FOUND, 404, "no such control endpoint");
    }
    gw_conf_release(conf);
}

static void
on_request(struct evhttp_request *req, void *arg)
{
    struct net_control *c = arg;
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));

    if (!path || !*path)
        path = "/";
    if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET");
        send_error(req, GW_E_METHOD_NOT_ALLOWED, 405, "only GET is served here");
    } else if (strcmp(path, "/healthz") == 0) {
        on_healthz(req);
    } else if (strcmp(path, "/metrics") == 0) {
        on_metrics(c, req);
    } else if (strncmp(path, CONTROL_PREFIX, strlen(CONTROL_PREFIX)) == 0) {
        on_control(c, req, path + strlen(CONTROL_PREFIX));
    } else {
        send_error(req, GW_E_NOT_FOUND, 404, "no such path");
    }
}

/* ---- thread ---- */

static void
on_stop(evutil_socket_t fd, short what, void *arg)
{
    struct net_control *c = arg;

    (void)fd;
    (void)what;
    event_base_loopbreak(c->base);
}

static void *
control_main(void *arg)
{
    struct net_control *c = arg;

    gw_thread_register(&c->thr);
    event_base_dispatch(c->base);
    gw_thread_unregister(&c->thr);
    return NULL;
}

/* ---- lifecycle ---- */

static void
control_free(struct net_control *c)
{
    if (c->http)
        evhttp_free(c->http);
    if (c->stop_ev)
        event_free(c->stop_ev);
    if (c->base)
        event_base_free(c->base);
    gw_free(c);
}

enum gw_code
net_control_start(const struct gw_conf_addr *listen, struct store *st, struct net_control **out,
                  char *err, size_t errlen)
{
    struct net_control *c = gw_calloc(1, sizeof(*c));
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    const char *host = listen->host && *listen->host ? listen->host : "127.0.0.1";
    int e;

    *out = NULL;
    if (!c) {
        snprintf(err, errlen, "control: out of memory");
        return GW_E_NOMEM;
    }
    c->store = st;
    c->base = event_base_new();
    c->http = c->base ? evhttp_new(c->base) : NULL;
    c->stop_ev = c->base ? event_new(c->base, -1, 0, on_stop, c) : NULL;
    if (!c->http || !c->stop_ev) {
        snprintf(err, errlen, "control: cannot create the event loop");
        control_free(c);
        return GW_E_INTERNAL;
    }
    evhttp_set_allowed_methods(c->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_PATCH |
                                            EVHTTP_REQ_OPTIONS);
    evhttp_set_max_body_size(c->http, CONTROL_MAX_BODY);
    evhttp_set_max_headers_size(c->http, CONTROL_MAX_HEADERS);
    evhttp_set_timeout(c->http, CONTROL_TIMEOUT_SECS);
    evhttp_set_gencb(c->http, on_request, c);
    errno = 0;
    c->sock = evhttp_bind_socket_with_handle(c->http, host, listen->port);
    if (!c->sock) {
        snprintf(err, errlen, "control.listen %s:%u: cannot bind: %s", host, (unsigned)listen->port,
                 errno ? strerror(errno) : "address not usable");
        control_free(c);
        return GW_E_INTERNAL;
    }
    if (getsockname(evhttp_bound_socket_get_fd(c->sock), (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET)
            c->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        else if (ss.ss_family == AF_INET6)
            c->port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    if (!c->port)
        c->port = listen->port;
    e = pthread_create(&c->thread, NULL, control_main, c);
    if (e != 0) {
        snprintf(err, errlen, "control: cannot start the thread: %s", strerror(e));
        control_free(c);
        return GW_E_INTERNAL;
    }
    c->running = true;
    *out = c;
    return GW_OK;
}

uint16_t
net_control_port(const struct net_control *c)
{
    return c->port;
}

void
net_control_stop(struct net_control *c)
{
    if (!c)
        return;
    if (c->running) {
        /* event_active is thread-safe once evthread_use_pthreads() ran: it takes the
         * base's lock and wakes the loop, which breaks out on the control thread. An
         * activation before the loop starts stays pending and is run by its first turn. */
        event_active(c->stop_ev, EV_READ, 0);
        pthread_join(c->thread, NULL);
    }
    control_free(c);
}
