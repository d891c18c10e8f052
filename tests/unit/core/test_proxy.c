/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_proxy.c - NO_PROXY matching (a table of curl's cases and gw's
 * port extension) and proxy URL parsing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/proxy.h"

struct np_case {
    const char *list;
    const char *host;
    uint16_t port;
    bool direct; /* expected: exempt from the proxy */
};

static const struct np_case np_cases[] = {
    /* nothing exempts nothing */
    {NULL, "api.example.com", 443, false},
    {"", "api.example.com", 443, false},
    {" , ,", "api.example.com", 443, false},
    /* the wildcard */
    {"*", "api.example.com", 443, true},
    {"example.org, *", "10.1.2.3", 80, true},
    {"*.example.com", "api.example.com", 443, false}, /* no globs: "*" alone only */
    /* names: the name itself and names under it, case-insensitive */
    {"example.com", "example.com", 443, true},
    {"example.com", "api.example.com", 443, true},
    {"example.com", "a.b.example.com", 443, true},
    {"example.com", "notexample.com", 443, false},
    {"example.com", "example.com.evil.net", 443, false},
    {".example.com", "api.example.com", 443, true},
    {".example.com", "example.com", 443, true}, /* curl drops the leading dot */
    {"EXAMPLE.com", "Api.Example.COM", 443, true},
    {"example.com.", "api.example.com", 443, true}, /* trailing dots do not matter */
    {"example.com", "api.example.com.", 443, true},
    {"api.example.com", "example.com", 443, false},
    {"other.net,example.com", "api.example.com", 443, true},
    {"other.net example.com", "api.example.com", 443, true}, /* blanks separate too */
    {" other.net ,\texample.com ", "api.example.com", 443, true},
    {"localhost", "localhost", 8080, true},
    {".", "example.com", 443, false},
    /* addresses: exact, never a name, CIDR ranges */
    {"127.0.0.1", "127.0.0.1", 9000, true},
    {"127.0.0.1", "127.0.0.2", 9000, false},
    {"127.0.0.1", "localhost", 9000, false}, /* no lookups */
    {"localhost", "127.0.0.1", 9000, false},
    {"10.0.0.0/8", "10.200.3.4", 443, true},
    {"10.0.0.0/8", "11.0.0.1", 443, false},
    {"192.168.1.0/24", "192.168.1.77", 443, true},
    {"192.168.1.0/24", "192.168.2.1", 443, false},
    {"192.168.1.128/25", "192.168.1.127", 443, false},
    {"0.0.0.0/0", "8.8.8.8", 443, true},
    {"10.0.0.0/33", "10.0.0.1", 443, false}, /* a bad range matches nothing */
    {"10.0.0.0/x", "10.0.0.1", 443, false},
    {"::1", "::1", 443, true},
    {"[::1]", "::1", 443, true},
    {"::1", "[::1]", 443, true},
    {"fd00::/8", "fd12:3456::1", 443, true},
    {"fd00::/8", "fe80::1", 443, false},
    {"10.0.0.0/8", "fd00::1", 443, false}, /* families differ */
    {"2001:db8::/32", "2001:db8:0:0:0:0:0:1", 443, true},
    {"2001:db8::/32", "2001:db9::1", 443, false},
    {"2001:DB8::1", "2001:db8::0:1", 443, true},
    {"::ffff:10.0.0.0/104", "::ffff:10.9.8.7", 443, true},
    {"fe80::1", "fe80::1%eth0", 443, true}, /* a zone is set aside */
    {"256.1.1.1", "256.1.1.1", 443, true},  /* not an address: compared as a name */
    {"1::2::3", "1::2::3", 443, true},      /* likewise */
    {"10.0.0.0/8", "10.0.0.1.example.com", 443, false},
    {"1.2.3.4", "api.example.com", 443, false},
    /* ports (Go's and Python's extension): that port only */
    {"example.com:8443", "api.example.com", 8443, true},
    {"example.com:8443", "api.example.com", 443, false},
    {"127.0.0.1:9000", "127.0.0.1", 9000, true},
    {"127.0.0.1:9000", "127.0.0.1", 9001, false},
    {"[::1]:9000", "::1", 9000, true},
    {"[::1]:9000", "::1", 9001, false},
    {"example.com:99999", "example.com", 443, false}, /* a bad port matches nothing */
    {"example.com:abc", "example.com", 443, false},
};

static void
test_no_proxy_table(void **state)
{
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(np_cases) / sizeof(np_cases[0]); i++) {
        const struct np_case *c = &np_cases[i];
        bool got = gw_no_proxy_match(c->list, c->host, c->port);

        if (got != c->direct)
            fail_msg("NO_PROXY=\"%s\" host %s port %u: got %s, expected %s",
                     c->list ? c->list : "(null)", c->host, c->port, got ? "direct" : "proxy",
                     c->direct ? "direct" : "proxy");
    }
}

static void
test_proxy_url_forms(void **state)
{
    struct gw_proxy_url u;

    (void)state;
    assert_null(gw_proxy_url_parse("http://proxy.corp:3128", false, &u));
    assert_string_equal(u.host, "proxy.corp");
    assert_int_equal(u.port, 3128);
    assert_null(u.auth);
    gw_proxy_url_fini(&u);
    assert_null(u.host);

    assert_null(gw_proxy_url_parse("HTTP://10.0.0.5:8080/", false, &u));
    assert_string_equal(u.host, "10.0.0.5");
    assert_int_equal(u.port, 8080);
    gw_proxy_url_fini(&u);

    /* no scheme: http, as curl reads it; no port: 1080, curl's default */
    assert_null(gw_proxy_url_parse("proxy.corp", false, &u));
    assert_string_equal(u.host, "proxy.corp");
    assert_int_equal(u.port, 1080);
    gw_proxy_url_fini(&u);

    assert_null(gw_proxy_url_parse("http://[::1]:3128", false, &u));
    assert_string_equal(u.host, "::1");
    assert_int_equal(u.port, 3128);
    gw_proxy_url_fini(&u);
}

static void
test_proxy_url_userinfo_only_from_the_environment(void **state)
{
    struct gw_proxy_url u;
    const char *why;

    (void)state;
    why = gw_proxy_url_parse("http://alice:s3cret@proxy.corp:3128", false, &u);
    assert_non_null(why);
    assert_non_null(strstr(why, "proxy_auth"));
    assert_null(u.host);

    assert_null(gw_proxy_url_parse("http://alice:s%40cr%3At@proxy.corp:3128", true, &u));
    assert_string_equal(u.auth, "alice:s@cr:t");
    assert_string_equal(u.host, "proxy.corp");
    gw_proxy_url_fini(&u);

    assert_null(gw_proxy_url_parse("http://bob@proxy.corp:3128", true, &u));
    assert_string_equal(u.auth, "bob:"); /* no password: an empty one */
    gw_proxy_url_fini(&u);

    assert_non_null(gw_proxy_url_parse("http://bob:%zz@proxy.corp:3128", true, &u));
    assert_null(u.auth);
}

static void
test_proxy_url_refused(void **state)
{
    static const char *const bad[] = {
        "https://proxy.corp:3128",
        "socks5://proxy.corp:1080",
        "http://",
        "http://:3128",
        "http://proxy.corp:0",
        "http://proxy.corp:65536",
        "http://proxy.corp:x",
        "http://proxy.corp/path",
        "http://proxy corp:3128",
        "http://proxy.corp:3128?a=b",
        "http://[::1:3128",
        "http://pro$xy:3128",
    };
    struct gw_proxy_url u;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *why = gw_proxy_url_parse(bad[i], true, &u);

        if (!why || !why[0])
            fail_msg("%s was accepted", bad[i]);
        assert_null(u.host);
        assert_null(u.auth);
    }
}

static void
test_proxy_url_shown_hides_userinfo(void **state)
{
    char out[128];

    (void)state;
    gw_proxy_url_shown("http://alice:s3cret@proxy.corp:3128", out, sizeof(out));
    assert_string_equal(out, "http://(hidden)@proxy.corp:3128");
    assert_null(strstr(out, "s3cret"));
    gw_proxy_url_shown("alice:pw@proxy.corp:3128", out, sizeof(out));
    assert_string_equal(out, "(hidden)@proxy.corp:3128");
    gw_proxy_url_shown("socks5://u:p@ss@s.corp:1080", out, sizeof(out));
    assert_string_equal(out, "socks5://(hidden)@s.corp:1080");
    gw_proxy_url_shown("http://proxy.corp:3128", out, sizeof(out));
    assert_string_equal(out, "http://proxy.corp:3128");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_proxy_table),
        cmocka_unit_test(test_proxy_url_forms),
        cmocka_unit_test(test_proxy_url_userinfo_only_from_the_environment),
        cmocka_unit_test(test_proxy_url_refused),
        cmocka_unit_test(test_proxy_url_shown_hides_userinfo),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
