/* SPDX-License-Identifier: MIT
 * tests/unit/net/test_control.c - the control API: the traffic row renderer (every
 * field, nulls, RFC 3339 times) and, over a real loopback socket, /healthz, the bearer
 * token check, /control/v1/version, 404s and the traffic query checks.
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
#include "core/row.h"
#include "core/snap.h"
#include "net/control.h"
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
    assert_int_equal(json_object_size(j), 16);
    assert_int_equal(json_object_size(a0), 7);
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

/* One blocking HTTP/1.0 exchange; returns the status and copies the body into <body>. */
static int
t_get(uint16_t port, const char *method, const char *path, const char *auth, char *body,
      size_t size)
{
    struct sockaddr_in sa = {0};
    char req[512], resp[65536];
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

    assert_int_equal(t_get(s->port, "GET", "/healthz", NULL, body, sizeof(body)), 200);
    assert_string_equal(body, "{\"status\":\"ok\"}");
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
    struct t_srv *s = *state;
    char body[1024];

    assert_int_equal(t_get(s->port, "GET", "/control/v1/traffic?limit=abc", "Bearer s3cret-token",
                           body, sizeof(body)),
                     400);
    assert_non_null(strstr(body, "\"gw.bad_request\""));
    assert_int_equal(t_get(s->port, "GET", "/control/v1/traffic?limit=0", "Bearer s3cret-token",
                           body, sizeof(body)),
                     400);
    assert_int_equal(t_get(s->port, "GET", "/control/v1/traffic?cursor=-1", "Bearer s3cret-token",
                           body, sizeof(body)),
                     400);
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
        assert_int_equal(store_row_submit(s.st, &r), GW_OK);
    }
    store_writer_stop(s.st);
    assert_non_null(c);
    c->control.token = gw_strdup("tok");
    gw_conf_publish(&t_thr, c);
    assert_int_equal(net_control_start(&listen, s.st, &s.ctl, err, sizeof(err)), GW_OK);
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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_row_json_renders_every_field),
        cmocka_unit_test(test_row_json_renders_refused_row_with_nulls),
        cmocka_unit_test(test_row_json_pads_milliseconds_and_handles_leap_day),
        cmocka_unit_test(test_row_json_replaces_invalid_utf8_and_caps_attempts),
        cmocka_unit_test(test_row_json_model_fills_whole_field_without_nul),
        cmocka_unit_test_setup_teardown(test_healthz_needs_no_token, t_setup, t_teardown),
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
    };

    int rc;

    evthread_use_pthreads();
    gw_snap_init();
    gw_thread_register(&t_thr);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    gw_thread_unregister(&t_thr);
    return rc;
}
