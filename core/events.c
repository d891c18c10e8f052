/* SPDX-License-Identifier: MIT
 * core/events.c - the operator event rings (two MPSC ck_rings of heap entries: bulk for
 * request_finished, priority for the rest), the interest workers read, and the pure
 * filter of one subscriber.
 * Owns:    the rings and the entries on them.
 * Threads: push on any thread; take, interest and filters on the control thread.
 * See:     core/events.h
 */
#include "core/events.h"

#include <ck_pr.h>
#include <ck_ring.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/tsan.h"

/* Powers of two; each holds size - 1 events. The control thread empties both every
 * 100 ms: the bulk ring carries up to ~40 000 request_finished a second before it drops,
 * the priority ring a thousand rare events in one tick. */
#define EVENTS_BULK_SIZE 4096
#define EVENTS_PRIO_SIZE 1024

struct ev_ring {
    ck_ring_t ring;
    ck_ring_buffer_t *slots;
};

static ck_ring_buffer_t bulk_slots[EVENTS_BULK_SIZE];
static ck_ring_buffer_t prio_slots[EVENTS_PRIO_SIZE];
static struct ev_ring bulk = {.slots = bulk_slots};
static struct ev_ring prio = {.slots = prio_slots};
static uint64_t ev_drops[GW_EV__COUNT];
/* Interest: a mask of event bits and the largest request_finished sample rate, as
 * rate * 2^32 (so one atomic word; 2^32 and more = all). */
static uint32_t ev_mask;
static uint64_t ev_rate_fix;

static const char *const ev_names[GW_EV__COUNT] = {
#define GW_EVENT(e, s) [e] = s,
#include "core/events.def"
#undef GW_EVENT
};

void
gw_events_init(void)
{
    ck_ring_init(&bulk.ring, EVENTS_BULK_SIZE);
    ck_ring_init(&prio.ring, EVENTS_PRIO_SIZE);
    ck_pr_store_32(&ev_mask, 0);
    ck_pr_store_64(&ev_rate_fix, 0);
}

const char *
gw_event_str(enum gw_event_name e)
{
    return (unsigned)e < GW_EV__COUNT ? ev_names[e] : "unknown";
}

bool
gw_event_from_str(const char *name, size_t len, enum gw_event_name *out)
{
    unsigned i;

    for (i = 0; i < GW_EV__COUNT; i++) {
        if (strlen(ev_names[i]) == len && memcmp(ev_names[i], name, len) == 0) {
            *out = (enum gw_event_name)i;
            return true;
        }
    }
    return false;
}

void
gw_event_count_drop(enum gw_event_name e)
{
    if ((unsigned)e < GW_EV__COUNT)
        ck_pr_inc_64(&ev_drops[e]); /* relaxed: a statistic */
}

/* Copies at most <cap> - 1 bytes of <s> (NULL = "") into <dst>, NUL-terminated. */
static void
copy_cut(char *dst, size_t cap, const char *s)
{
    size_t n = s ? strnlen(s, cap - 1) : 0;

    memcpy(dst, s ? s : "", n);
    dst[n] = '\0';
}

void
gw_event_push_about(enum gw_event_name e, const char *client, const char *id, const char *json)
{
    struct ev_ring *r = e == GW_EV_REQUEST_FINISHED ? &bulk : &prio;
    size_t n = strlen(json);
    struct gw_event *x;

    x = gw_malloc(sizeof(*x) + n + 1);
    if (!x) {
        gw_event_count_drop(e);
        return;
    }
    x->name = e;
    copy_cut(x->client, sizeof(x->client), client);
    copy_cut(x->id, sizeof(x->id), id);
    memcpy(x->json, json, n + 1);
    GW_TSAN_RELEASE(&r->ring); /* the entry is handed to the control thread */
    if (!ck_ring_enqueue_mpsc(&r->ring, r->slots, x)) {
        gw_event_count_drop(e);
        gw_free(x);
    }
}

void
gw_event_push(enum gw_event_name e, const char *json)
{
    gw_event_push_about(e, NULL, NULL, json);
}

struct gw_event *
gw_event_take(void)
{
    struct gw_event *x;

    /* The priority ring first: a rare event never waits behind a burst of the bulk. */
    if (ck_ring_dequeue_mpsc(&prio.ring, prio.slots, &x)) {
        GW_TSAN_ACQUIRE(&prio.ring);
        return x;
    }
    if (ck_ring_dequeue_mpsc(&bulk.ring, bulk.slots, &x)) {
        GW_TSAN_ACQUIRE(&bulk.ring);
        return x;
    }
    return NULL;
}

uint64_t
gw_events_dropped(void)
{
    uint64_t n = 0;
    unsigned i;

    for (i = 0; i < GW_EV__COUNT; i++)
        n += ck_pr_load_64(&ev_drops[i]);
    return n;
}

uint64_t
gw_events_dropped_of(enum gw_event_name e)
{
    return (unsigned)e < GW_EV__COUNT ? ck_pr_load_64(&ev_drops[e]) : 0;
}

/* ---- sampling and interest ---- */

/* The id's place in [0, 2^32): FNV-1a over its bytes, then a murmur3-style finaliser so
 * that ids differing in one hex digit land far apart. */
static uint32_t
id_point(const char *id)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (; id && *id; id++) {
        h ^= (unsigned char)*id;
        h *= 0x100000001b3ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return (uint32_t)(h >> 32);
}

/* <rate> as a fraction of 2^32, clamped: 0 for none, 2^32 for all. */
static uint64_t
rate_fix(double rate)
{
    if (!(rate > 0)) /* NaN too */
        return 0;
    if (rate >= 1)
        return 1ull << 32;
    return (uint64_t)(rate * 4294967296.0);
}

static bool
sampled_fix(const char *id, uint64_t fix)
{
    return (uint64_t)id_point(id) < fix;
}

bool
gw_event_sampled(const char *id, double rate)
{
    return sampled_fix(id, rate_fix(rate));
}

void
gw_events_set_interest(uint32_t mask, double max_sample)
{
    /* Relaxed stores: workers act on either the old or the new value, and both are
     * right for some instant around the subscriber's arrival or departure. */
    ck_pr_store_64(&ev_rate_fix, rate_fix(max_sample));
    ck_pr_store_32(&ev_mask, mask);
}

bool
gw_event_wanted(enum gw_event_name e)
{
    return (ck_pr_load_32(&ev_mask) & GW_EVENT_MASK(e)) != 0;
}

bool
gw_event_wanted_request(const char *id)
{
    return gw_event_wanted(GW_EV_REQUEST_FINISHED) && sampled_fix(id, ck_pr_load_64(&ev_rate_fix));
}

/* ---- one subscriber's filter ---- */

void
gw_event_filter_init(struct gw_event_filter *f)
{
    f->types = (1u << GW_EV__COUNT) - 1;
    f->client[0] = '\0';
    f->sample = 1.0;
}

enum gw_code
gw_event_filter_set_types(struct gw_event_filter *f, const char *types, const char **bad,
                          size_t *bad_len)
{
    uint32_t mask = 0;
    const char *p = types;

    *bad = types;
    *bad_len = 0;
    for (;;) {
        size_t n = strcspn(p, ",");
        enum gw_event_name e;

        if (!gw_event_from_str(p, n, &e)) {
            *bad = p;
            *bad_len = n;
            return GW_E_BAD_REQUEST;
        }
        mask |= GW_EVENT_MASK(e);
        if (!p[n])
            break;
        p += n + 1;
    }
    f->types = mask;
    return GW_OK;
}

enum gw_code
gw_event_filter_set_client(struct gw_event_filter *f, const char *client)
{
    size_t n = strlen(client);

    if (n == 0 || n > GW_NAME_MAX)
        return GW_E_BAD_REQUEST;
    memcpy(f->client, client, n + 1);
    return GW_OK;
}

enum gw_code
gw_event_filter_set_sample(struct gw_event_filter *f, const char *rate)
{
    char *end = NULL;
    double v;

    /* Digits and one point only: strtod alone would take "nan", "inf", hex, " 1". */
    if (!*rate || strspn(rate, "0123456789.") != strlen(rate))
        return GW_E_BAD_REQUEST;
    v = strtod(rate, &end);
    if (!end || *end || !(v >= 0 && v <= 1))
        return GW_E_BAD_REQUEST;
    f->sample = v;
    return GW_OK;
}

static bool
is_about_a_client(enum gw_event_name e)
{
    return e == GW_EV_REQUEST_FINISHED || e == GW_EV_KEY_LIMIT_ALERT;
}

bool
gw_event_filter_pass(const struct gw_event_filter *f, const struct gw_event *ev)
{
    if (ev->name == GW_EV_EVENTS_DROPPED)
        return true;
    if (!(f->types & GW_EVENT_MASK(ev->name)))
        return false;
    /* A request or a key limit is always some client's (a request refused before its key
     * was known is nobody's: it does not match); an upstream or config event is
     * everyone's, unless it names a client. */
    if (f->client[0] && (ev->client[0] || is_about_a_client(ev->name)) &&
        strcmp(f->client, ev->client) != 0)
        return false;
    if (ev->name == GW_EV_REQUEST_FINISHED && !gw_event_sampled(ev->id, f->sample))
        return false;
    return true;
}
