/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_quota_learn.c - fuzz target for the quota learning parser
 * (core/quota_learn.c). Input: the first byte picks the vendor (low bit); then
 * "name: value" header lines up to an empty line, then the error body. Checked: at most
 * GW_QUOTA_MAX_FACTS facts, one per window, each on a real window with a NUL-terminated
 * origin and a remaining of -1 or more; the Retry-After within a week; the same input read
 * twice gives the same facts; and the facts, applied through gw_quota_fail to a unit, give
 * a cooldown of at most a day that a choice then honours.
 * Owns:    one input at a time.
 * Threads: single-threaded.
 * See:     core/quota_learn.c, tests/fuzz/corpus/quota_learn/
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/quota_learn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define T_NOW 1796011200000ull
#define T_MAX_HDRS 16

static size_t
t_headers(const char *s, size_t n, struct gw_quota_header *h, size_t *used)
{
    size_t i = 0, k = 0;

    while (i < n) {
        const char *line = s + i, *nl = memchr(line, '\n', n - i), *colon;
        size_t len = nl ? (size_t)(nl - line) : n - i;

        i += len + (nl ? 1 : 0);
        if (len == 0)
            break; /* the empty line: the body follows */
        colon = memchr(line, ':', len);
        if (!colon || k == T_MAX_HDRS)
            continue;
        h[k].name = (struct gw_str){line, (size_t)(colon - line)};
        h[k].value = (struct gw_str){colon + 1, len - (size_t)(colon - line) - 1};
        k++;
    }
    *used = i;
    return k;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char fps[1][GW_QUOTA_FP_LEN + 1] = {"000000000000"};
    struct gw_quota_header h[T_MAX_HDRS];
    struct gw_quota_facts f, again;
    struct gw_quota_set_conf conf = {.limit = {0}};
    struct gw_quota_cooldown c;
    struct gw_quota_lease l;
    struct gw_quota_set *s;
    enum gw_quota_vendor v;
    struct gw_str body;
    size_t n, used;

    if (size < 1)
        return 0;
    v = (data[0] & 1) ? GW_QUOTA_VENDOR_GROQ : GW_QUOTA_VENDOR_GENERIC;
    n = t_headers((const char *)data + 1, size - 1, h, &used);
    body = (struct gw_str){(const char *)data + 1 + used, size - 1 - used};

    gw_quota_learn(v, h, n, body, T_NOW, &f);
    if (f.n > GW_QUOTA_MAX_FACTS || f.retry_after_ms > 7ull * 86400000)
        abort();
    for (size_t i = 0; i < f.n; i++) {
        if ((unsigned)f.f[i].win >= GW_QUOTA_WINS || f.f[i].remaining < -1 ||
            memchr(f.f[i].origin, '\0', sizeof(f.f[i].origin)) == NULL)
            abort();
        for (size_t k = 0; k < i; k++)
            if (f.f[k].win == f.f[i].win)
                abort();
    }
    gw_quota_learn(v, h, n, body, T_NOW, &again);
    if (memcmp(&f, &again, sizeof(f)) != 0)
        abort();

    s = gw_quota_set_new(fps, 1, &conf);
    if (!s)
        return 0;
    gw_quota_fail(s, 0, T_NOW, &(struct gw_quota_hit){.status = 429, .facts = &f}, &c);
    if (c.until_ms <= T_NOW || c.until_ms - T_NOW > 86400000ull || c.source == GW_QUOTA_SRC_NONE)
        abort();
    if (gw_quota_choose(s, T_NOW, 1, &l, NULL) != -1 || l.active)
        abort();
    gw_quota_set_free(s);
    return 0;
}
