/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_proxy.c - fuzz target for egress's parsers, which read the process
 * environment (NO_PROXY, HTTPS_PROXY): the input is "<no_proxy list>\n<host>\n<url>",
 * with the port taken from its first two bytes. Checks: no crash or leak; "*" in front of
 * any list exempts every host; the same call answers the same; a URL accepted without
 * userinfo has no credential, one accepted has a host and a port 1..65535, and its
 * shown form has no '@' but the hidden marker's.
 * Owns:    one input at a time.
 * Threads: single-threaded.
 * See:     core/proxy.c, tests/fuzz/corpus/proxy/
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/proxy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The next '\n'-ended piece of [*p, end) as a NUL-terminated copy. */
static char *
piece(const uint8_t **p, const uint8_t *end)
{
    const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
    size_t n = nl ? (size_t)(nl - *p) : (size_t)(end - *p);
    char *s = malloc(n + 1);

    if (!s)
        abort();
    memcpy(s, *p, n);
    s[n] = '\0';
    *p = nl ? nl + 1 : end;
    return s;
}

static void
check_url(const char *url, bool userinfo)
{
    struct gw_proxy_url u;
    const char *why = gw_proxy_url_parse(url, userinfo, &u);
    char shown[512];
    const char *at;

    if (why) {
        if (u.host || u.auth)
            abort(); /* a refusal leaves nothing behind */
        return;
    }
    if (!u.host || !u.host[0] || u.port == 0 || (!userinfo && u.auth))
        abort();
    gw_proxy_url_shown(url, shown, sizeof(shown));
    at = strchr(shown, '@');
    if (at && (at < shown + 8 || strncmp(at - 8, "(hidden)", 8) != 0))
        abort();
    gw_proxy_url_fini(&u);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data, *end = data + size;
    uint16_t port;
    char *list, *host, *url, *star;
    bool m;

    if (size < 2)
        return 0;
    port = (uint16_t)(data[0] | data[1] << 8);
    p += 2;
    list = piece(&p, end);
    host = piece(&p, end);
    url = piece(&p, end);
    m = gw_no_proxy_match(list, host, port);
    if (m != gw_no_proxy_match(list, host, port))
        abort();
    star = malloc(strlen(list) + 3);
    if (!star)
        abort();
    memcpy(star, "*,", 2);
    memcpy(star + 2, list, strlen(list) + 1);
    if (host[0] && strlen(host) < 250 && !gw_no_proxy_match(star, host, port))
        abort();
    check_url(url, false);
    check_url(url, true);
    free(star);
    free(list);
    free(host);
    free(url);
    return 0;
}
