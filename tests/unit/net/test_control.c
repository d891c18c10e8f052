/* SPDX-License-Identifier: MIT
 * tests/unit/net/test_control.c - the control API: the traffic row renderer (every
 * field, nulls, RFC 3339 times) and, over a real loopback socket, /healthz, the bearer
 * token check, /control/v1/version, 404s, the traffic query checks, the dry-run (order
 * and pick per group type, errors, stickiness, no round advanced) and the overview
 * (every field, a paused and a disabled provider, groups, keys, failover).
 * See: net/control.c
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/thread.h>
#include <jansson.h>

#include "core/alloc.h"
#include "core/codes.h"
#include "core/conf.h"
#include "core/health.h"
#include "core/route.h"
#include "core/row.h"
#include "core/snap.h"
#include "core/sticky.h"
#include "dialects/openai.h"
#include "net/control.h"
#include "net/deps.h"
#include "net/logger.h"
#include "net/net-priv.h"
#include "store/store.h"

/* ---- row rendering ---- */

static void
t_row_fill(struct gw_row *r)
{
    memset(r, 0, sizeof(*r));
    strcpy(r->id, "0123456789abcdef0123456789abcdef");
    r->ts_ms = 1796011262345ull; /* 2026-11-30T04:01:02.345Z */
    strcpy(r->client, "alice");
    strcpy(r->model, "gpt-4o");
    strcpy(r->upstream, "openai-b");
    r->status = 200;
    r->code = GW_OK;
    r->outcome = GW_OUT_OK;
    r->stream = 1;
    r->usage.input_tokens = 1200;
    r->usage.output_tokens = 350;
    r->usage.cache_read_tokens = 64;
    r->usage.cache_write_tokens = 8;
    r->usage.estimated = false;
    r->cost_micros = 1500;
    r->ttfb_ms = 123;
    r->duration_ms = 2048;
    r->queued_ms = 7;
    r->tokens_per_sec = 42.5;
    r->n_attempts = 2;
    strcpy(r->attempts[0].upstream, "openai-a");
    strcpy(r->attempts[0].model, "gpt-4o-2024");
    r->attempts[0].outcome = GW_OUT_FAILED;
    r->attempts[0].status = 500;
    r->attempts[0].code = GW_E_UPSTREAM_STATUS;
    r->attempts[0].queued_ms = 3;
    r->attempts[0].ttfb_ms = -1;
    strcpy(r->attempts[1].upstream, "openai-b");
    strcpy(r->attempts[1].model, "gpt-4o");
    r->attempts[1].outcome = GW_OUT_OK;
    r->attempts[1].status = 200;
    r->attempts[1].code = GW_OK;
    r->attempts[1].queued_ms = 4;
    r->attempts[1].ttfb_ms = 120;
    strcpy(r->attempts[1].cred, "0a1b2c3d4e5f"); /* the credential's fingerprint */
}

static const char *
t_str(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static json_int_t
t_int(json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

static void
test_row_json_renders_every_field(void **state)
{
    struct gw_row r;
    json_t *j, *u, *a0, *a1;

    (void)state;
    t_row_fill(&r);
    j = net_control_row_json(&r);
    assert_non_null(j);
    assert_string_equal(t_str(j, "id"), "0123456789abcdef0123456789abcdef");
    assert_string_equal(t_str(j, "ts"), "2026-11-30T04:01:02.345Z");
    assert_string_equal(t_str(j, "client"), "alice");
    assert_string_equal(t_str(j, "model"), "gpt-4o");
    assert_string_equal(t_str(j, "upstream"), "openai-b");
    assert_int_equal(t_int(j, "status"), 200);
    assert_true(json_is_null(json_object_get(j, "code")));
    assert_string_equal(t_str(j, "outcome"), "ok");
    u = json_object_get(j, "usage");
    assert_int_equal(t_int(u, "input_tokens"), 1200);
    assert_int_equal(t_int(u, "output_tokens"), 350);
    assert_int_equal(t_int(u, "cache_read_tokens"), 64);
    assert_int_equal(t_int(u, "cache_write_tokens"), 8);
    assert_true(json_is_false(json_object_get(u, "estimated")));
    assert_true(json_is_real(json_object_get(j, "cost_usd")));
    assert_true(json_real_value(json_object_get(j, "cost_usd")) == 0.0015);
    assert_int_equal(t_int(j, "ttfb_ms"), 123);
    assert_int_equal(t_int(j, "duration_ms"), 2048);
    assert_true(json_real_value(json_object_get(j, "tokens_per_sec")) == 42.5);
    assert_int_equal(t_int(j, "queued_ms"), 7);
    assert_true(json_is_true(json_object_get(j, "stream")));
    assert_int_equal(json_array_size(json_object_get(j, "attempts")), 2);
    a0 = json_array_get(json_object_get(j, "attempts"), 0);
    a1 = json_array_get(json_object_get(j, "attempts"), 1);
    assert_string_equal(t_str(a0, "upstream"), "openai-a");
    assert_string_equal(t_str(a0, "model"), "gpt-4o-2024");
    assert_string_equal(t_str(a0, "outcome"), "failed");
    assert_int_equal(t_int(a0, "status"), 500);
    assert_string_equal(t_str(a0, "code"), "gw.upstream.status");
    assert_int_equal(t_int(a0, "queued_ms"), 3);
    assert_true(json_is_null(json_object_get(a0, "ttfb_ms")));
    assert_string_equal(t_str(a1, "outcome"), "ok");
    assert_true(json_is_null(json_object_get(a1, "code")));
    assert_int_equal(t_int(a1, "ttfb_ms"), 120);
    assert_true(json_is_null(json_object_get(a0, "credential"))); /* none sent */
    assert_string_equal(t_str(a1, "credential"), "0a1b2c3d4e5f");
    /* the fields a conversion dropped (issue 9): empty here, an array all the same */
    assert_true(json_is_array(json_object_get(j, "dropped")));
    assert_int_equal(json_array_size(json_object_get(j, "dropped")), 0);
    assert_int_equal(json_object_size(j), 17);
    assert_int_equal(json_object_size(a0), 8);
    json_decref(j);
}

/* Issue 9: the row's ", "-separated dropped fields come back as a list of names. */
static void
test_row_json_dropped_fields_are_a_list(void **state)
{
    struct gw_row r;
    json_t *j, *d;

    (void)state;
    memset(&r, 0, sizeof(r));
    snprintf(r.dropped, sizeof(r.dropped), "%s", "cache_control, thinking, anthropic-beta");
    j = net_control_row_json(&r);
    assert_non_null(j);
    d = json_object_get(j, "dropped");
    assert_int_equal(json_array_size(d), 3);
    assert_string_equal(json_string_value(json_array_get(d, 0)), "cache_control");
    assert_string_equal(json_string_value(json_array_get(d, 1)), "thinking");
    assert_string_equal(json_string_value(json_array_get(d, 2)), "anthropic-beta");
    json_decref(j);
}

static void
test_row_json_renders_refused_row_with_nulls(void **state)
{
    struct gw_row r;
    json_t *j;

    (void)state;
    memset(&r, 0, sizeof(r));
    strcpy(r.id, "ffffffffffffffffffffffffffffffff");
    strcpy(r.model, "m");
    r.status = 401;
    r.code = GW_E_AUTH_INVALID_KEY;
    r.outcome = GW_OUT_REFUSED;
    r.ttfb_ms = -1;
    r.usage.estimated = true;
    j = net_control_row_json(&r);
    assert_non_null(j);
    assert_true(json_is_null(json_object_get(j, "client")));
    assert_true(json_is_null(json_object_get(j, "upstream")));
    assert_true(json_is_null(json_object_get(j, "ttfb_ms")));
    assert_string_equal(t_str(j, "code"), "gw.auth.invalid_key");
    assert_string_equal(t_str(j, "outcome"), "refused");
    assert_string_equal(t_str(j, "ts"), "1970-01-01T00:00:00.000Z");
    assert_true(json_is_false(json_object_get(j, "stream")));
    assert_true(json_is_true(json_object_get(json_object_get(j, "usage"), "estimated")));
    assert_int_equal(json_array_size(json_object_get(j, "attempts")), 0);
    assert_true(json_real_value(json_object_get(j, "cost_usd")) == 0.0);
    json_decref(j);
}

static void
test_row_json_pads_milliseconds_and_handles_leap_day(void **state)
{
    struct gw_row r;
    json_t *j;

    (void)state;
    memset(&r, 0, sizeof(r));
    r.ts_ms = 1709164800007ull; /* 2024-02-29T00:00:00.007Z */
    j = net_control_row_json(&r);
    assert_non_null(j);
    assert_string_equal(t_str(j, "ts"), "2024-02-29T00:00:00.007Z");
    json_decref(j);
}

static void
test_row_json_replaces_invalid_utf8_and_caps_attempts(void **state)
{
    struct gw_row r;
    json_t *j;

    (void)state;
    t_row_fill(&r);
    strcpy(r.model, "caf\xc3"); /* cut in the middle of a two-byte character */
    r.n_attempts = GW_ROW_MAX_ATTEMPTS + 5;
    j = net_control_row_json(&r);
    assert_non_null(j);
    assert_string_equal(t_str(j, "model"), "caf?");
    assert_int_equal(json_array_size(json_object_get(j, "attempts")), GW_ROW_MAX_ATTEMPTS);
    json_decref(j);
}

static void
test_row_json_model_fills_whole_field_without_nul(void **state)
{
    struct gw_row r;
    json_t *j;

    (void)state;
    t_row_fill(&r);
    memset(r.upstream, 'u', sizeof(r.upstream)); /* no NUL inside the field */
    j = net_control_row_json(&r);
    assert_non_null(j);
    assert_int_equal(strlen(t_str(j, "upstream")), sizeof(r.upstream));
    json_decref(j);
}

/* ---- the server over loopback ---- */

/* The test thread's epoch record: registered once (records are recycled, not freed). */
static struct gw_thread t_thr;

struct t_srv {
    struct net_control *ctl;
    struct store *st;
    char dir[64];
    uint16_t port;
};

/* One blocking HTTP/1.0 exchange sending <reqbody> (NULL: none); returns the status and
 * copies the response body into <body>. */
static int
t_req(uint16_t port, const char *method, const char *path, const char *auth, const char *reqbody,
      char *body, size_t size)
{
    struct sockaddr_in sa = {0};
    char req[8192], resp[65536];
    size_t got = 0;
    ssize_t n;
    int fd, status = -1;
    const char *p;

    fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    if (reqbody)
        snprintf(req, sizeof(req),
                 "%s %s HTTP/1.0\r\nHost: x\r\n%s%s%sContent-Type: application/json\r\n"
                 "Content-Length: %zu\r\n\r\n%s",
                 method, path, auth ? "Authorization: " : "", auth ? auth : "", auth ? "\r\n" : "",
                 strlen(reqbody), reqbody);
    else
        snprintf(req, sizeof(req), "%s %s HTTP/1.0\r\nHost: x\r\n%s%s%s\r\n", method, path,
                 auth ? "Authorization: " : "", auth ? auth : "", auth ? "\r\n" : "");
    assert_int_equal(send(fd, req, strlen(req), 0), (ssize_t)strlen(req));
    while ((n = recv(fd, resp + got, sizeof(resp) - 1 - got, 0)) > 0)
        got += (size_t)n;
    close(fd);
    resp[got] = '\0';
    sscanf(resp, "HTTP/1.%*d %d", &status);
    p = strstr(resp, "\r\n\r\n");
    snprintf(body, size, "%s", p ? p + 4 : "");
    return status;
}

static int
t_get(uint16_t port, const char *method, const char *path, const char *auth, char *body,
      size_t size)
{
    return t_req(port, method, path, auth, NULL, body, size);
}

static int
t_setup_with_token(void **state, const char *token)
{
    static struct t_srv s;
    struct gw_conf *c = gw_calloc(1, sizeof(*c));
    static char host[] = "127.0.0.1";
    struct gw_conf_addr listen = {host, 0};
    char err[256];

    memset(&s, 0, sizeof(s));
    assert_non_null(c);
    c->control.token_env = gw_strdup("GW_CONTROL_TOKEN");
    c->control.token = token ? gw_strdup(token) : NULL;
    gw_conf_publish(&t_thr, c);
    assert_int_equal(net_control_start(&listen, NULL, &s.ctl, err, sizeof(err)), GW_OK);
    s.port = net_control_port(s.ctl);
    assert_true(s.port != 0);
    *state = &s;
    return 0;
}

static int
t_setup(void **state)
{
    return t_setup_with_token(state, "s3cret-token");
}

static int
t_setup_no_token(void **state)
{
    return t_setup_with_token(state, NULL);
}

static int
t_teardown(void **state)
{
    struct t_srv *s = *state;

    net_control_stop(s->ctl);
    gw_snap_shutdown(&t_thr);
    return 0;
}

static void
test_healthz_needs_no_token(void **state)
{
    struct t_srv *s = *state;
    char body[1024];

    net_control_set_phase(s->ctl, NET_CONTROL_SERVING);
    assert_int_equal(t_get(s->port, "GET", "/healthz", NULL, body, sizeof(body)), 200);
    assert_string_equal(body, "{\"status\":\"ok\"}");
}

/* issue 8: /healthz answers only once the data port accepts; /readyz also says
 * draining (DESIGN.md 4). */
static void
test_issue_8_healthz_and_readyz_follow_the_phase(void **state)
{
    struct t_srv *s = *state;
    char body[1024];

    assert_int_equal(t_get(s->port, "GET", "/healthz", NULL, body, sizeof(body)), 503);
    assert_non_null(strstr(body, "\"gw.starting\""));
    assert_int_equal(t_get(s->port, "GET", "/readyz", NULL, body, sizeof(body)), 503);
    assert_non_null(strstr(body, "\"gw.starting\""));

    net_control_set_phase(s->ctl, NET_CONTROL_SERVING);
    assert_int_equal(t_get(s->port, "GET", "/healthz", NULL, body, sizeof(body)), 200);
    assert_int_equal(t_get(s->port, "GET", "/readyz", NULL, body, sizeof(body)), 200);
    assert_string_equal(body, "{\"status\":\"ready\"}");

    net_control_set_phase(s->ctl, NET_CONTROL_DRAINING);
    assert_int_equal(t_get(s->port, "GET", "/healthz", NULL, body, sizeof(body)), 200);
    assert_int_equal(t_get(s->port, "GET", "/readyz", NULL, body, sizeof(body)), 503);
    assert_non_null(strstr(body, "\"gw.shutting_down\""));
}

static void
test_version_without_token_is_401(void **state)
{
    struct t_srv *s = *state;
    char body[1024];

    assert_int_equal(t_get(s->port, "GET", "/control/v1/version", NULL, body, sizeof(body)), 401);
    assert_non_null(strstr(body, "\"gw.control.unauthorized\""));
}

static void
test_version_with_wrong_token_is_401(void **state)
{
    struct t_srv *s = *state;
    char body[1024];

    assert_int_equal(
        t_get(s->port, "GET", "/control/v1/version", "Bearer s3cret-tokem", body, sizeof(body)),
        401);
    assert_int_equal(
        t_get(s->port, "GET", "/control/v1/version", "Bearer s3cret", body, sizeof(body)), 401);
    assert_int_equal(
        t_get(s->port, "GET", "/control/v1/version", "Basic s3cret-token", body, sizeof(body)),
        401);
}

static void
test_version_with_token_answers_api_version(void **state)
{
    struct t_srv *s = *state;
    char body[1024];

    assert_int_equal(
        t_get(s->port, "GET", "/control/v1/version", "Bearer s3cret-token", body, sizeof(body)),
        200);
    assert_string_equal(body, "{\"control_api_version\":1,\"gw_version\":\"0.1.0\"}");
}

static void
test_unknown_paths_are_404_json(void **state)
{
    struct t_srv *s = *state;
    char body[1024];

    assert_int_equal(t_get(s->port, "GET", "/nope", NULL, body, sizeof(body)), 404);
    assert_non_null(strstr(body, "\"gw.not_found\""));
    assert_int_equal(
        t_get(s->port, "GET", "/control/v1/nope", "Bearer s3cret-token", body, sizeof(body)), 404);
    assert_non_null(strstr(body, "\"gw.not_found\""));
}

static void
test_post_is_405(void **state)
{
    struct t_srv *s = *state;
    char body[1024];

    assert_int_equal(t_get(s->port, "POST", "/healthz", NULL, body, sizeof(body)), 405);
    assert_non_null(strstr(body, "\"gw.method_not_allowed\""));
}

static void
test_traffic_rejects_bad_limit_and_cursor(void **state)
{
    /* A cursor is TS-SEQ; the sequence alone (an older gw's cursor) is refused. */
    static const char *bad[] = {"limit=abc", "limit=0",    "cursor=-1",
                                "cursor=12", "cursor=12-", "cursor=1-2-3"};
    struct t_srv *s = *state;
    char body[1024], path[64];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(path, sizeof(path), "/control/v1/traffic?%s", bad[i]);
        assert_int_equal(t_get(s->port, "GET", path, "Bearer s3cret-token", body, sizeof(body)),
                         400);
        assert_non_null(strstr(body, "\"gw.bad_request\""));
    }
}

static void
test_traffic_without_store_is_503(void **state)
{
    struct t_srv *s = *state;
    char body[1024];

    assert_int_equal(
        t_get(s->port, "GET", "/control/v1/traffic", "Bearer s3cret-token", body, sizeof(body)),
        503);
}

static void
test_metrics_lists_counted_codes(void **state)
{
    struct t_srv *s = *state;
    char body[16384];

    gw_code_count(GW_E_BUSY_ALL);
    assert_int_equal(t_get(s->port, "GET", "/metrics", NULL, body, sizeof(body)), 200);
    assert_non_null(strstr(body, "gw_code_total{code=\"gw.busy_all\"} "));
    assert_null(strstr(body, "code=\"gw.upstream.tls\""));
}

static void
test_no_token_configured_says_token_env_unset(void **state)
{
    struct t_srv *s = *state;
    char body[1024];

    assert_int_equal(
        t_get(s->port, "GET", "/control/v1/version", "Bearer anything", body, sizeof(body)), 401);
    assert_non_null(strstr(body, "control.token_env (GW_CONTROL_TOKEN) is unset"));
}

static void
test_start_reports_a_port_in_use(void **state)
{
    struct t_srv *s = *state;
    static char host[] = "127.0.0.1";
    struct gw_conf_addr listen = {host, s->port};
    struct net_control *other = NULL;
    char err[256] = "";

    assert_int_equal(net_control_start(&listen, NULL, &other, err, sizeof(err)), GW_E_INTERNAL);
    assert_null(other);
    assert_non_null(strstr(err, "cannot bind"));
}

/* Five rows committed through the writer (stopped, so every row is on disk). */
static int
t_setup_store(void **state)
{
    static struct t_srv s;
    static char host[] = "127.0.0.1";
    struct gw_conf *c = gw_calloc(1, sizeof(*c));
    struct gw_conf_addr listen = {host, 0};
    struct net_deps deps = {0};
    char err[256];
    unsigned i;

    memset(&s, 0, sizeof(s));
    snprintf(s.dir, sizeof(s.dir), "/tmp/gw-test-control-XXXXXX");
    assert_non_null(mkdtemp(s.dir));
    assert_int_equal(store_open(s.dir, 16, &s.st, err, sizeof(err)), GW_OK);
    assert_int_equal(store_writer_start(s.st, 10, 31), GW_OK);
    for (i = 0; i < 5; i++) {
        struct gw_row *r = gw_malloc(sizeof(*r));

        assert_non_null(r);
        t_row_fill(r);
        snprintf(r->id, sizeof(r->id), "%032u", i);
        r->ts_ms += i * 1000;
        assert_int_equal(store_row_submit(s.st, r), GW_OK);
        gw_free(r);
    }
    store_writer_stop(s.st);
    assert_non_null(c);
    c->control.token = gw_strdup("tok");
    gw_conf_publish(&t_thr, c);
    deps.store = s.st;
    assert_int_equal(net_control_start(&listen, &deps, &s.ctl, err, sizeof(err)), GW_OK);
    s.port = net_control_port(s.ctl);
    *state = &s;
    return 0;
}

static int
t_teardown_store(void **state)
{
    struct t_srv *s = *state;
    char cmd[128];

    t_teardown(state);
    store_close(s->st);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s->dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static void
test_traffic_pages_newest_first_with_cursor(void **state)
{
    struct t_srv *s = *state;
    char body[65536], path[128];
    json_t *page, *rows;
    const char *next;

    assert_int_equal(
        t_get(s->port, "GET", "/control/v1/traffic?limit=3", "Bearer tok", body, sizeof(body)),
        200);
    page = json_loads(body, 0, NULL);
    assert_non_null(page);
    rows = json_object_get(page, "rows");
    assert_int_equal(json_array_size(rows), 3);
    assert_string_equal(t_str(json_array_get(rows, 0), "id"), "00000000000000000000000000000004");
    assert_string_equal(t_str(json_array_get(rows, 2), "id"), "00000000000000000000000000000002");
    assert_string_equal(t_str(json_array_get(rows, 0), "ts"), "2026-11-30T04:01:06.345Z");
    next = t_str(page, "next");
    assert_non_null(next);
    snprintf(path, sizeof(path), "/control/v1/traffic?limit=3&cursor=%s", next);
    json_decref(page);
    assert_int_equal(t_get(s->port, "GET", path, "Bearer tok", body, sizeof(body)), 200);
    page = json_loads(body, 0, NULL);
    assert_non_null(page);
    rows = json_object_get(page, "rows");
    assert_int_equal(json_array_size(rows), 2);
    assert_string_equal(t_str(json_array_get(rows, 1), "id"), "00000000000000000000000000000000");
    assert_true(json_is_null(json_object_get(page, "next")));
    json_decref(page);
}

static void
test_metrics_reports_store_counters(void **state)
{
    struct t_srv *s = *state;
    char body[16384];

    assert_int_equal(t_get(s->port, "GET", "/metrics", NULL, body, sizeof(body)), 200);
    assert_non_null(strstr(body, "\ngw_store_rows_committed_total 5\n"));
    assert_non_null(strstr(body, "\ngw_store_rows_dropped_total 0\n"));
}

/* ---- dry-run and overview over loopback ---- */

#define T_SHA_A "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\""
#define T_SHA_B "\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\""
#define T_PROV(n, extra)                                                                           \
    "  - {name: " n ", dialect: openai, base_url: \"http://h\", keys: [{value: v}], "              \
    "models: [m]" extra "}\n"

/* a, b, c and the disabled d serve model m; groups of every kind over them. */
static const char t_route_yaml[] =
    "server: {listen: [\"127.0.0.1:8080\"]}\n"
    "failover: {failures_to_pause: 2, pause_secs: 60, max_pause_secs: 600}\n"
    "providers:\n" T_PROV("a", "") T_PROV("b", ", max_concurrent: 4") T_PROV("c", "")
        T_PROV("d", ", enabled: false") "groups:\n"
                                        "  - {name: fb, type: fallback, model: real-m, providers: "
                                        "[c, a, d, b]}\n"
                                        "  - {name: lb, type: load-balance, providers: [{name: a, "
                                        "weight: 7}, {name: b, weight: "
                                        "3}], balance_by: health}\n"
                                        "clients:\n"
                                        "  - {name: alice, key_sha256: " T_SHA_A
                                        ", max_concurrent: 2}\n"
                                        "  - {name: bob, key_sha256: " T_SHA_B ", models: [fb]}\n";

struct t_rsrv {
    struct net_control *ctl;
    struct gw_routes *routes;
    struct gw_sticky *sticky;
    struct gw_conf *conf; /* the published snapshot (the live pointer owns it) */
    uint16_t port;
};

static int
t_setup_route(void **state)
{
    static struct t_rsrv s;
    static char host[] = "127.0.0.1";
    struct gw_conf_addr listen = {host, 0};
    struct gw_conf_problems p = {0};
    struct net_deps deps = {0};
    char err[256];

    memset(&s, 0, sizeof(s));
    assert_int_equal(gw_conf_parse(t_route_yaml, strlen(t_route_yaml), NULL, NULL, &s.conf, &p),
                     GW_OK);
    gw_free(s.conf->control.token);
    s.conf->control.token = gw_strdup("tok");
    s.routes = gw_routes_new();
    s.sticky = gw_sticky_new(64);
    assert_non_null(s.routes);
    assert_non_null(s.sticky);
    assert_int_equal(gw_routes_attach(s.routes, s.conf), GW_OK);
    gw_conf_publish(&t_thr, s.conf);
    deps.sticky = s.sticky;
    assert_int_equal(net_control_start(&listen, &deps, &s.ctl, err, sizeof(err)), GW_OK);
    s.port = net_control_port(s.ctl);
    *state = &s;
    return 0;
}

static int
t_teardown_route(void **state)
{
    struct t_rsrv *s = *state;

    net_control_stop(s->ctl);
    gw_snap_shutdown(&t_thr);
    gw_sticky_free(s->sticky);
    gw_routes_free(s->routes);
    return 0;
}

static struct gw_upstate *
t_upstate(const struct gw_conf *c, const char *name)
{
    size_t i;

    for (i = 0; i < c->n_providers; i++)
        if (strcmp(c->providers[i].name, name) == 0)
            return c->providers[i].state;
    fail_msg("no provider %s", name);
    return NULL;
}

/* Pauses <name>: failures_to_pause (2) consecutive failures now. */
static void
t_pause(const struct gw_conf *c, const char *name)
{
    struct gw_upstate *u = t_upstate(c, name);
    uint64_t now = net_now_ms();

    gw_upstate_failure(u, now, c, 0);
    assert_true(gw_upstate_failure(u, now, c, 0));
}

/* POSTs <req> to the dry-run; returns the status, the parsed answer in <*out>. */
static int
t_dry_run(struct t_rsrv *s, const char *req, json_t **out)
{
    static char body[65536];
    int st = t_req(s->port, "POST", "/control/v1/dry-run", "Bearer tok", req, body, sizeof(body));

    *out = json_loads(body, 0, NULL);
    assert_non_null(*out);
    return st;
}

/* The candidates' providers as a string of first letters. */
static void
t_order(json_t *ans, char *buf)
{
    json_t *cands = json_object_get(ans, "candidates"), *k;
    size_t i;

    json_array_foreach(cands, i, k)
    {
        buf[i] = t_str(k, "provider")[0];
    }
    buf[json_array_size(cands)] = '\0';
}

static const char *
t_err_code(json_t *ans)
{
    return t_str(json_object_get(ans, "error"), "code");
}

static void
test_dry_run_fallback_group_answers_file_order_and_pick(void **state)
{
    struct t_rsrv *s = *state;
    json_t *ans, *k0, *kd;
    char order[8];

    assert_int_equal(t_dry_run(s, "{\"model\":\"fb\"}", &ans), 200);
    t_order(ans, order);
    /* disabled members are listed last, never picked */
    assert_string_equal(order, "cabd");
    assert_string_equal(t_str(ans, "pick"), "c");
    assert_string_equal(t_str(ans, "group"), "fb");
    assert_string_equal(t_str(ans, "type"), "fallback");
    assert_true(json_is_null(json_object_get(ans, "client")));
    k0 = json_array_get(json_object_get(ans, "candidates"), 0);
    assert_string_equal(t_str(k0, "model"), "real-m");
    assert_int_equal(t_int(k0, "weight"), 1);
    assert_true(json_real_value(json_object_get(k0, "factor")) == 1.0);
    assert_true(json_is_integer(json_object_get(k0, "effective_weight")));
    assert_true(json_is_null(json_object_get(k0, "ttfc_ms")));
    assert_true(json_is_null(json_object_get(k0, "success_rate")));
    assert_true(json_is_null(json_object_get(k0, "paused_until")));
    assert_string_equal(t_str(k0, "state"), "ok");
    assert_true(json_is_false(json_object_get(k0, "sticky")));
    kd = json_array_get(json_object_get(ans, "candidates"), 3);
    assert_string_equal(t_str(kd, "state"), "disabled");
    json_decref(ans);
}

static void
test_dry_run_puts_paused_member_last_with_its_pause_end(void **state)
{
    struct t_rsrv *s = *state;
    json_t *ans, *kc;
    char order[8];

    t_pause(s->conf, "c");
    assert_int_equal(t_dry_run(s, "{\"model\":\"fb\",\"client\":\"alice\"}", &ans), 200);
    t_order(ans, order);
    assert_string_equal(order, "abcd");
    assert_string_equal(t_str(ans, "pick"), "a");
    assert_string_equal(t_str(ans, "client"), "alice");
    kc = json_array_get(json_object_get(ans, "candidates"), 2);
    assert_string_equal(t_str(kc, "state"), "paused");
    assert_true(json_is_string(json_object_get(kc, "paused_until")));
    json_decref(ans);
}

static void
test_dry_run_implicit_group_lists_enabled_providers_of_the_model(void **state)
{
    struct t_rsrv *s = *state;
    json_t *ans;
    char order[8];

    assert_int_equal(t_dry_run(s, "{\"model\":\"m\"}", &ans), 200);
    t_order(ans, order);
    assert_string_equal(order, "abc");
    assert_string_equal(t_str(ans, "pick"), "a");
    assert_true(json_is_null(json_object_get(ans, "group")));
    assert_string_equal(t_str(ans, "model"), "m");
    json_decref(ans);
}

static void
test_dry_run_takes_the_model_from_the_body(void **state)
{
    struct t_rsrv *s = *state;
    json_t *ans;

    assert_int_equal(
        t_dry_run(s,
                  "{\"body\":{\"model\":\"fb\",\"messages\":[{\"role\":\"user\",\"content\":"
                  "\"hi\"}]}}",
                  &ans),
        200);
    assert_string_equal(t_str(ans, "group"), "fb");
    assert_string_equal(t_str(ans, "pick"), "c");
    json_decref(ans);
}

static void
test_dry_run_unknown_client_is_404(void **state)
{
    struct t_rsrv *s = *state;
    json_t *ans;

    assert_int_equal(t_dry_run(s, "{\"model\":\"fb\",\"client\":\"mallory\"}", &ans), 404);
    assert_string_equal(t_err_code(ans), "gw.control.unknown_client");
    json_decref(ans);
}

static void
test_dry_run_bad_json_and_bad_fields_are_400(void **state)
{
    struct t_rsrv *s = *state;
    json_t *ans;

    assert_int_equal(t_dry_run(s, "{\"model\":", &ans), 400);
    assert_string_equal(t_err_code(ans), "gw.bad_request");
    json_decref(ans);
    assert_int_equal(t_dry_run(s, "[\"fb\"]", &ans), 400);
    json_decref(ans);
    assert_int_equal(t_dry_run(s, "{\"model\":7}", &ans), 400);
    json_decref(ans);
    assert_int_equal(t_dry_run(s, "{\"model\":\"fb\",\"key\":\"alice\"}", &ans), 400);
    json_decref(ans);
    assert_int_equal(t_dry_run(s, "{}", &ans), 400);
    json_decref(ans);
    /* the body goes through the data plane's parser: messages are required */
    assert_int_equal(t_dry_run(s, "{\"model\":\"fb\",\"body\":{\"model\":\"fb\"}}", &ans), 400);
    assert_string_equal(t_err_code(ans), "gw.bad_request");
    json_decref(ans);
}

static void
test_dry_run_unknown_model_is_404(void **state)
{
    struct t_rsrv *s = *state;
    json_t *ans;

    assert_int_equal(t_dry_run(s, "{\"model\":\"nope\"}", &ans), 404);
    assert_string_equal(t_err_code(ans), "gw.model_not_found");
    json_decref(ans);
}

static void
test_dry_run_model_outside_client_scope_is_403(void **state)
{
    struct t_rsrv *s = *state;
    json_t *ans;

    assert_int_equal(t_dry_run(s, "{\"model\":\"lb\",\"client\":\"bob\"}", &ans), 403);
    assert_string_equal(t_err_code(ans), "gw.model_not_allowed");
    json_decref(ans);
    assert_int_equal(t_dry_run(s, "{\"model\":\"fb\",\"client\":\"bob\"}", &ans), 200);
    json_decref(ans);
}

static void
test_dry_run_needs_token_and_post(void **state)
{
    struct t_rsrv *s = *state;
    char body[1024];

    assert_int_equal(t_req(s->port, "POST", "/control/v1/dry-run", NULL, "{\"model\":\"fb\"}", body,
                           sizeof(body)),
                     401);
    assert_int_equal(t_get(s->port, "GET", "/control/v1/dry-run", "Bearer tok", body, sizeof(body)),
                     405);
    assert_non_null(strstr(body, "\"gw.method_not_allowed\""));
    assert_int_equal(
        t_req(s->port, "POST", "/control/v1/overview", "Bearer tok", "{}", body, sizeof(body)),
        405);
}

static void
test_dry_run_does_not_advance_the_load_balance_round(void **state)
{
    struct t_rsrv *s = *state;
    struct gw_route_cand out[GW_ROUTE_MAX];
    struct gw_route_result res;
    struct gw_route_req rq;
    json_t *a1, *a2, *k0;
    char first[8];
    int i;

    for (i = 0; i < 3; i++) {
        const char *want;

        assert_int_equal(t_dry_run(s, "{\"model\":\"lb\"}", &a1), 200);
        assert_int_equal(t_dry_run(s, "{\"model\":\"lb\"}", &a2), 200);
        assert_string_equal(t_str(a1, "pick"), t_str(a2, "pick"));
        assert_string_equal(t_str(a1, "type"), "load-balance");
        k0 = json_array_get(json_object_get(a1, "candidates"), 0);
        assert_int_equal(t_int(k0, "effective_weight"),
                         !strcmp(t_str(k0, "provider"), "a") ? 7000 : 3000);
        snprintf(first, sizeof(first), "%s", t_str(a1, "pick"));
        json_decref(a1);
        json_decref(a2);
        /* the data plane's next charging call picks what the dry-run showed */
        memset(&rq, 0, sizeof(rq));
        rq.model = "lb";
        rq.model_len = 2;
        rq.now_ms = net_now_ms();
        assert_int_equal(gw_route_order(s->conf, &rq, true, out, &res), GW_OK);
        assert_true(res.pick >= 0);
        want = out[res.pick].prov->name;
        assert_string_equal(first, want);
    }
}

static void
test_dry_run_shows_the_sticky_upstream_first(void **state)
{
    struct t_rsrv *s = *state;
    static const char chat[] =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
        "{\"role\":\"user\",\"content\":\"hello\"}]}";
    struct dl_openai_req *r = NULL;
    struct gw_buf why = {0};
    char req[1024], order[8];
    json_t *ans, *k0;

    assert_int_equal(dl_openai_req_parse(chat, strlen(chat), &r, &why), GW_OK);
    gw_sticky_record(s->sticky, net_conversation_key("alice", (struct gw_str){NULL, 0}, r), "b",
                     net_now_ms(), 4096);
    dl_openai_req_free(r);
    gw_buf_fini(&why);

    snprintf(req, sizeof(req), "{\"model\":\"m\",\"client\":\"alice\",\"body\":%s}", chat);
    assert_int_equal(t_dry_run(s, req, &ans), 200);
    t_order(ans, order);
    assert_string_equal(order, "bac");
    assert_string_equal(t_str(ans, "pick"), "b");
    assert_string_equal(t_str(ans, "sticky"), "b");
    k0 = json_array_get(json_object_get(ans, "candidates"), 0);
    assert_true(json_is_true(json_object_get(k0, "sticky")));
    json_decref(ans);
    /* another client's conversation with the same text is not stuck */
    snprintf(req, sizeof(req), "{\"model\":\"m\",\"client\":\"bob\",\"body\":%s}", chat);
    assert_int_equal(t_dry_run(s, req, &ans), 403); /* bob may use fb only */
    json_decref(ans);
    /* without a client there is no stickiness */
    snprintf(req, sizeof(req), "{\"model\":\"m\",\"body\":%s}", chat);
    assert_int_equal(t_dry_run(s, req, &ans), 200);
    assert_string_equal(t_str(ans, "pick"), "a");
    assert_true(json_is_null(json_object_get(ans, "sticky")));
    json_decref(ans);
}

static json_t *
t_find(json_t *arr, const char *name)
{
    json_t *o;
    size_t i;

    json_array_foreach(arr, i, o)
    {
        if (strcmp(t_str(o, "name"), name) == 0)
            return o;
    }
    fail_msg("no entry %s", name);
    return NULL;
}

static void
test_overview_renders_providers_groups_keys_failover(void **state)
{
    struct t_rsrv *s = *state;
    static char body[65536];
    json_t *ov, *provs, *p, *g, *k, *fo;
    static const char *const prov_fields[] = {
        "name",      "dialect",        "state",   "paused_until", "consecutive_failures",
        "in_flight", "max_concurrent", "waiting", "ttfc_ms",      "success_rate",
        "samples",   "outcomes"};
    size_t i;

    t_pause(s->conf, "b");
    gw_upstate_failure(t_upstate(s->conf, "c"), net_now_ms(), s->conf, 0);
    assert_int_equal(
        t_get(s->port, "GET", "/control/v1/overview", "Bearer tok", body, sizeof(body)), 200);
    ov = json_loads(body, 0, NULL);
    assert_non_null(ov);
    provs = json_object_get(ov, "providers");
    assert_int_equal(json_array_size(provs), 4);
    json_array_foreach(provs, i, p)
    {
        size_t f;

        for (f = 0; f < sizeof(prov_fields) / sizeof(prov_fields[0]); f++)
            if (!json_object_get(p, prov_fields[f]))
                fail_msg("providers[%zu] has no %s", i, prov_fields[f]);
    }
    p = t_find(provs, "a");
    assert_string_equal(t_str(p, "dialect"), "openai");
    assert_string_equal(t_str(p, "state"), "ok");
    assert_true(json_is_null(json_object_get(p, "max_concurrent")));
    assert_true(json_is_null(json_object_get(p, "paused_until")));
    assert_int_equal(t_int(p, "in_flight"), 0);
    p = t_find(provs, "b");
    assert_string_equal(t_str(p, "state"), "paused");
    assert_true(json_is_string(json_object_get(p, "paused_until")));
    /* a pause starts the count over */
    assert_int_equal(t_int(p, "consecutive_failures"), 0);
    assert_int_equal(t_int(p, "max_concurrent"), 4);
    p = t_find(provs, "c");
    assert_string_equal(t_str(p, "state"), "ok");
    assert_int_equal(t_int(p, "consecutive_failures"), 1);
    assert_string_equal(t_str(t_find(provs, "d"), "state"), "disabled");

    g = t_find(json_object_get(ov, "groups"), "lb");
    assert_string_equal(t_str(g, "type"), "load-balance");
    assert_string_equal(t_str(g, "balance_by"), "health");
    assert_string_equal(json_string_value(json_array_get(json_object_get(g, "providers"), 1)), "b");
    assert_int_equal(json_integer_value(json_array_get(json_object_get(g, "weights"), 0)), 7);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(g, "weights"), 1)), 3);
    g = t_find(json_object_get(ov, "groups"), "fb");
    assert_string_equal(t_str(g, "type"), "fallback");
    assert_true(json_is_null(json_object_get(g, "balance_by")));
    assert_int_equal(json_array_size(json_object_get(g, "providers")), 4);
    assert_int_equal(json_array_size(json_object_get(g, "weights")), 4);

    k = t_find(json_object_get(ov, "keys"), "alice");
    assert_int_equal(t_int(k, "max_concurrent"), 2);
    assert_int_equal(t_int(k, "in_flight"), 0);
    assert_int_equal(t_int(k, "waiting"), 0);
    assert_true(json_is_array(json_object_get(k, "limits")));
    k = t_find(json_object_get(ov, "keys"), "bob");
    assert_true(json_is_null(json_object_get(k, "max_concurrent")));

    fo = json_object_get(ov, "failover");
    assert_int_equal(t_int(fo, "failures_to_pause"), 2);
    assert_int_equal(t_int(fo, "pause_secs"), 60);
    assert_int_equal(t_int(fo, "max_pause_secs"), 600);
    assert_int_equal(t_int(fo, "stream_start_wait_secs"), 15);
    assert_true(json_is_false(json_object_get(fo, "next_on_slow_start")));
    assert_int_equal(t_int(fo, "slot_wait_secs"), 30);
    json_decref(ov);
}

static void
test_overview_reports_samples_and_success_rate(void **state)
{
    struct t_rsrv *s = *state;
    struct gw_upstate *u = t_upstate(s->conf, "a");
    uint64_t now = net_now_ms();
    json_t *ov, *p;
    unsigned i;

    for (i = 0; i < 5; i++) {
        gw_upstate_success(u, now);
        gw_upstate_sample(u, now, 100 + i * 10);
    }
    ov = net_control_overview_json(s->conf, now);
    assert_non_null(ov);
    p = t_find(json_object_get(ov, "providers"), "a");
    assert_int_equal(t_int(p, "ttfc_ms"), 120);
    assert_true(json_real_value(json_object_get(p, "success_rate")) == 1.0);
    assert_int_equal(t_int(p, "samples"), 5);
    assert_int_equal(t_int(p, "outcomes"), 5);
    json_decref(ov);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_row_json_renders_every_field),
        cmocka_unit_test(test_row_json_dropped_fields_are_a_list),
        cmocka_unit_test(test_row_json_renders_refused_row_with_nulls),
        cmocka_unit_test(test_row_json_pads_milliseconds_and_handles_leap_day),
        cmocka_unit_test(test_row_json_replaces_invalid_utf8_and_caps_attempts),
        cmocka_unit_test(test_row_json_model_fills_whole_field_without_nul),
        cmocka_unit_test_setup_teardown(test_healthz_needs_no_token, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_issue_8_healthz_and_readyz_follow_the_phase, t_setup,
                                        t_teardown),
        cmocka_unit_test_setup_teardown(test_version_without_token_is_401, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_version_with_wrong_token_is_401, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_version_with_token_answers_api_version, t_setup,
                                        t_teardown),
        cmocka_unit_test_setup_teardown(test_unknown_paths_are_404_json, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_post_is_405, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_traffic_rejects_bad_limit_and_cursor, t_setup,
                                        t_teardown),
        cmocka_unit_test_setup_teardown(test_traffic_without_store_is_503, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_metrics_lists_counted_codes, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_no_token_configured_says_token_env_unset,
                                        t_setup_no_token, t_teardown),
        cmocka_unit_test_setup_teardown(test_start_reports_a_port_in_use, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_traffic_pages_newest_first_with_cursor, t_setup_store,
                                        t_teardown_store),
        cmocka_unit_test_setup_teardown(test_metrics_reports_store_counters, t_setup_store,
                                        t_teardown_store),
        cmocka_unit_test_setup_teardown(test_dry_run_fallback_group_answers_file_order_and_pick,
                                        t_setup_route, t_teardown_route),
        cmocka_unit_test_setup_teardown(test_dry_run_puts_paused_member_last_with_its_pause_end,
                                        t_setup_route, t_teardown_route),
        cmocka_unit_test_setup_teardown(
            test_dry_run_implicit_group_lists_enabled_providers_of_the_model, t_setup_route,
            t_teardown_route),
        cmocka_unit_test_setup_teardown(test_dry_run_takes_the_model_from_the_body, t_setup_route,
                                        t_teardown_route),
        cmocka_unit_test_setup_teardown(test_dry_run_unknown_client_is_404, t_setup_route,
                                        t_teardown_route),
        cmocka_unit_test_setup_teardown(test_dry_run_bad_json_and_bad_fields_are_400, t_setup_route,
                                        t_teardown_route),
        cmocka_unit_test_setup_teardown(test_dry_run_unknown_model_is_404, t_setup_route,
                                        t_teardown_route),
        cmocka_unit_test_setup_teardown(test_dry_run_model_outside_client_scope_is_403,
                                        t_setup_route, t_teardown_route),
        cmocka_unit_test_setup_teardown(test_dry_run_needs_token_and_post, t_setup_route,
                                        t_teardown_route),
        cmocka_unit_test_setup_teardown(test_dry_run_does_not_advance_the_load_balance_round,
                                        t_setup_route, t_teardown_route),
        cmocka_unit_test_setup_teardown(test_dry_run_shows_the_sticky_upstream_first, t_setup_route,
                                        t_teardown_route),
        cmocka_unit_test_setup_teardown(test_overview_renders_providers_groups_keys_failover,
                                        t_setup_route, t_teardown_route),
        cmocka_unit_test_setup_teardown(test_overview_reports_samples_and_success_rate,
                                        t_setup_route, t_teardown_route),
    };

    int rc;

    evthread_use_pthreads();
    gw_snap_init();
    gw_thread_register(&t_thr);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    gw_thread_unregister(&t_thr);
    return rc;
}
