/* SPDX-License-Identifier: MIT
 * core/proxy.c - NO_PROXY matching and proxy URL parsing (see core/proxy.h for the
 * rules). Pure: no lookups, no environment; the caller passes the strings.
 * Owns:    nothing beyond what a parse returns.
 * Threads: any.
 * See:     core/proxy.h, tests/unit/core/test_proxy.c
 */
#include "core/proxy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "core/str.h"

#define NP_ENTRY_MAX 300 /* longest NO_PROXY entry looked at; longer ones match nothing */

/* ---- addresses ---- */

struct np_addr {
    int family; /* 4, 6 or 0: not an address */
    unsigned char b[16];
};

/* A dotted quad "a.b.c.d" (each 0..255, decimal) into <out>. Parsed here rather than
 * with inet_pton so that core stays free of network headers (make check-deps). */
static bool
parse_v4(const char *s, unsigned char out[4])
{
    unsigned i;

    for (i = 0; i < 4; i++) {
        unsigned v = 0, n = 0;

        while (*s >= '0' && *s <= '9' && n < 4) {
            v = v * 10 + (unsigned)(*s++ - '0');
            n++;
        }
        if (n == 0 || n > 3 || v > 255)
            return false;
        out[i] = (unsigned char)v;
        if (i < 3 && *s++ != '.')
            return false;
    }
    return *s == '\0';
}

/* An IPv6 address (with "::" and an optional dotted-quad tail; a "%zone" is set aside)
 * into <out>. */
static bool
parse_v6(const char *s, unsigned char out[16])
{
    unsigned char w[16];
    int n = 0, gap = -1, i;

    if (s[0] == ':' && s[1] == ':') {
        gap = 0;
        s += 2;
    } else if (s[0] == ':') {
        return false;
    }
    while (*s && *s != '%') {
        unsigned v = 0, digits = 0;
        const char *start = s;

        if (n == 16)
            return false;
        while (digits < 5) {
            char ch = *s;
            int d = ch >= '0' && ch <= '9'   ? ch - '0'
                    : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                    : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                             : -1;

            if (d < 0)
                break;
            v = v * 16 + (unsigned)d;
            digits++;
            s++;
        }
        if (*s == '.') { /* the IPv4 tail: the last 4 bytes */
            char tail[16];
            size_t tl = strcspn(start, "%");

            if (n > 12 || tl >= sizeof(tail))
                return false;
            memcpy(tail, start, tl);
            tail[tl] = '\0';
            if (!parse_v4(tail, w + n))
                return false;
            n += 4;
            s = start + tl;
            break;
        }
        if (digits == 0 || digits > 4 || n > 14)
            return false;
        w[n++] = (unsigned char)(v >> 8);
        w[n++] = (unsigned char)v;
        if (*s == ':') {
            s++;
            if (*s == ':') {
                if (gap >= 0)
                    return false;
                gap = n;
                s++;
            } else if (!*s || *s == '%') {
                return false;
            }
        } else if (*s && *s != '%') {
            return false;
        }
    }
    if (gap < 0 && n != 16)
        return false;
    if (gap >= 0 && n > 14)
        return false;
    memset(out, 0, 16);
    if (gap < 0) {
        memcpy(out, w, 16);
    } else {
        memcpy(out, w, (size_t)gap);
        for (i = 0; i < n - gap; i++)
            out[16 - (n - gap) + i] = w[gap + i];
    }
    return true;
}

static void
addr_parse(const char *s, struct np_addr *a)
{
    a->family = 0;
    if (parse_v4(s, a->b))
        a->family = 4;
    else if (strchr(s, ':') && parse_v6(s, a->b))
        a->family = 6;
}

/* The first <bits> bits of <a> and <b> are equal. */
static bool
prefix_eq(const unsigned char *a, const unsigned char *b, unsigned bits)
{
    unsigned full = bits / 8, rest = bits % 8;

    if (memcmp(a, b, full) != 0)
        return false;
    if (rest == 0)
        return true;
    return ((a[full] ^ b[full]) & (unsigned char)(0xff << (8 - rest))) == 0;
}

/* ---- NO_PROXY ---- */

static bool
is_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

/* Splits a ":port" off <e> (in place) when it has one: "[v6]:p", "[v6]", "name:p",
 * "v4:p". A bare IPv6 address (two colons or more) has no port. Returns false when the
 * entry is malformed (a port that is not a number 1..65535). */
static bool
entry_split_port(char *e, char **host, long *port)
{
    char *colon;

    *port = -1;
    if (e[0] == '[') {
        char *close = strchr(e, ']');

        if (!close)
            return false;
        *close = '\0';
        *host = e + 1;
        if (close[1] == '\0')
            return true;
        if (close[1] != ':' || !is_digits(close + 2))
            return false;
        *port = strtol(close + 2, NULL, 10);
        return *port >= 1 && *port <= 65535;
    }
    *host = e;
    colon = strchr(e, ':');
    if (!colon || strchr(colon + 1, ':'))
        return true; /* no port, or a bare IPv6 address */
    if (!is_digits(colon + 1))
        return false;
    *port = strtol(colon + 1, NULL, 10);
    *colon = '\0';
    return *port >= 1 && *port <= 65535;
}

/* One entry (trimmed, NUL-terminated, writable) against the host. */
static bool
entry_match(char *e, const char *host, const struct np_addr *ha, uint16_t port)
{
    char *h, *slash;
    long eport;
    size_t hl, el;

    if (strcmp(e, "*") == 0)
        return true;
    if (!entry_split_port(e, &h, &eport))
        return false;
    if (eport >= 0 && eport != port)
        return false;
    slash = strchr(h, '/');
    if (slash || ha->family) { /* an address or a range: compared as addresses */
        struct np_addr ea;
        unsigned bits, max;

        if (slash)
            *slash = '\0';
        addr_parse(h, &ea);
        if (!ea.family || ea.family != ha->family)
            return false;
        max = ea.family == 4 ? 32 : 128;
        bits = max;
        if (slash) {
            if (!is_digits(slash + 1) || strlen(slash + 1) > 3)
                return false;
            bits = (unsigned)strtol(slash + 1, NULL, 10);
            if (bits > max)
                return false;
        }
        return prefix_eq(ea.b, ha->b, bits);
    }
    /* A name: leading dots and a trailing dot do not matter. */
    while (*h == '.')
        h++;
    el = strlen(h);
    if (el > 0 && h[el - 1] == '.')
        h[--el] = '\0';
    if (el == 0)
        return false;
    hl = strlen(host);
    if (hl > 0 && host[hl - 1] == '.')
        hl--;
    if (hl == el)
        return strncasecmp(host, h, el) == 0;
    return hl > el && host[hl - el - 1] == '.' && strncasecmp(host + hl - el, h, el) == 0;
}

static bool
is_sep(char ch)
{
    return ch == ',' || ch == ' ' || ch == '\t';
}

bool
gw_no_proxy_match(const char *list, const char *host, uint16_t port)
{
    struct np_addr ha;
    char hbuf[NP_ENTRY_MAX], e[NP_ENTRY_MAX];
    const char *p;
    size_t hl;

    if (!list || !host || !host[0])
        return false;
    hl = strlen(host);
    if (hl >= sizeof(hbuf))
        return false;
    /* The host as an address: brackets and an IPv6 zone ("fe80::1%eth0") set aside. */
    memcpy(hbuf, host, hl + 1);
    if (hbuf[0] == '[' && hl > 2 && hbuf[hl - 1] == ']') {
        memmove(hbuf, hbuf + 1, hl - 2);
        hbuf[hl - 2] = '\0';
    }
    addr_parse(hbuf, &ha);
    for (p = list; *p;) {
        size_t n = 0;

        while (*p && is_sep(*p))
            p++;
        while (p[n] && !is_sep(p[n]))
            n++;
        if (n > 0 && n < sizeof(e)) {
            memcpy(e, p, n);
            e[n] = '\0';
            if (entry_match(e, hbuf, &ha, port))
                return true;
        }
        p += n;
    }
    return false;
}

/* ---- proxy URLs ---- */

/* Percent-decodes <n> bytes of <s> into a new string; NULL when out of memory or
 * malformed or decoding to a NUL byte (*bad set then). */
static char *
pct_decode(const char *s, size_t n, bool *bad)
{
    char *d = gw_malloc(n + 1);
    int len;

    if (!d)
        return NULL;
    len = gw_pct_decode((struct gw_str){s, n}, d, n);
    if (len < 0 || memchr(d, '\0', (size_t)len)) {
        explicit_bzero(d, n);
        gw_free(d);
        *bad = true;
        return NULL;
    }
    d[len] = '\0';
    return d;
}

static bool
is_host_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '-' || ch == '_';
}

/* "host[:port]" or "[v6][:port]" of <n> bytes into <out>. NULL or the reason. */
static const char *
hostport_parse(const char *s, size_t n, struct gw_proxy_url *out)
{
    const char *h = s, *ps = NULL;
    size_t hl = n, i;
    bool v6 = false;

    if (n > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', n);

        if (!close)
            return "an IPv6 address needs its closing ]";
        h = s + 1;
        hl = (size_t)(close - h);
        v6 = true;
        if (close + 1 < s + n) {
            if (close[1] != ':')
                return "the host is malformed";
            ps = close + 2;
        }
    } else {
        const char *colon = memchr(s, ':', n);

        if (colon) {
            hl = (size_t)(colon - s);
            ps = colon + 1;
        }
    }
    if (hl == 0 || hl > 253)
        return "the proxy's host is missing or too long";
    for (i = 0; i < hl; i++)
        if (!(is_host_char(h[i]) || (v6 && (h[i] == ':' || h[i] == '%'))))
            return "the proxy's host is malformed";
    out->port = 1080;
    if (ps) {
        size_t pl = (size_t)(s + n - ps);
        unsigned long v = 0;

        if (pl < 1 || pl > 5)
            return "the port must be 1..65535";
        for (i = 0; i < pl; i++) {
            if (ps[i] < '0' || ps[i] > '9')
                return "the port must be 1..65535";
            v = v * 10 + (unsigned long)(ps[i] - '0');
        }
        if (v < 1 || v > 65535)
            return "the port must be 1..65535";
        out->port = (uint16_t)v;
    }
    out->host = gw_strndup(h, hl);
    return out->host ? NULL : "";
}

const char *
gw_proxy_url_parse(const char *url, bool allow_userinfo, struct gw_proxy_url *out)
{
    const char *rest = url, *end, *at;
    const char *why;
    size_t n;

    memset(out, 0, sizeof(*out));
    if (strncasecmp(url, "http://", 7) == 0)
        rest = url + 7;
    else if (strstr(url, "://"))
        return "only http:// proxies are supported (CONNECT; no https://, socks)";
    for (end = rest; *end; end++)
        if ((unsigned char)*end <= ' ' || *end == 0x7f || *end == '?' || *end == '#' ||
            *end == '\\')
            return "a proxy URL holds no spaces, query (?) or fragment (#)";
    n = strcspn(rest, "/");
    if (rest[n] == '/' && rest[n + 1] != '\0')
        return "a proxy URL has no path";
    at = NULL; /* the last '@': an unescaped one in the password stays in it */
    for (end = rest; end < rest + n; end++)
        if (*end == '@')
            at = end;
    if (at) {
        bool bad = false;

        if (!allow_userinfo)
            return "credentials in the proxy URL are not allowed; use proxy_auth: {env: NAME}";
        out->auth = pct_decode(rest, (size_t)(at - rest), &bad);
        if (!out->auth)
            return bad ? "the user:password part has a bad %-escape" : "";
        if (!strchr(out->auth, ':')) { /* "user@": an empty password, as curl sends it */
            size_t al = strlen(out->auth);
            char *a = gw_realloc(out->auth, al + 2);

            if (!a) {
                gw_proxy_url_fini(out);
                return "";
            }
            a[al] = ':';
            a[al + 1] = '\0';
            out->auth = a;
        }
        n -= (size_t)(at + 1 - rest);
        rest = at + 1;
    }
    why = hostport_parse(rest, n, out);
    if (why)
        gw_proxy_url_fini(out);
    return why;
}

void
gw_proxy_url_fini(struct gw_proxy_url *u)
{
    if (u->auth)
        explicit_bzero(u->auth, strlen(u->auth));
    gw_free(u->auth);
    gw_free(u->host);
    memset(u, 0, sizeof(*u));
}

void
gw_proxy_url_shown(const char *url, char *out, size_t size)
{
    const char *scheme = strstr(url, "://");
    const char *rest = scheme ? scheme + 3 : url; /* any scheme: a refused one too */
    size_t n = strcspn(rest, "/");
    const char *at = NULL, *q;

    for (q = rest; q < rest + n; q++) /* the last '@', as the parser splits */
        if (*q == '@')
            at = q;
    if (at)
        snprintf(out, size, "%.*s(hidden)@%s", (int)(rest - url), url, at + 1);
    else
        snprintf(out, size, "%s", url);
}
