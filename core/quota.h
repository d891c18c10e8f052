/* SPDX-License-Identifier: MIT
 * core/quota.h - upstream credentials and their quotas (DESIGN.md 10, issue 11): RPM/TPM
 * over a sliding minute and RPD/TPD over the UTC day per credential unit, leases that
 * count a request in flight, the credential with the most headroom, cooldowns with their
 * source, learned limits and the probe schedule. Pure: the clock is the <now_ms>
 * argument (ms since the epoch, UTC day boundaries computed from it), entropy a seed.
 *
 * Units and sets. A *unit* is what one credential's quota and cooldown are kept for:
 * (provider, model, credential), or (provider, credential) with `pool: account`. A *set*
 * holds the units that compete for one choice: the credentials of one provider for one
 * model (or for every model with pool account), in the order of `providers[].keys`. The
 * registry (gw_quota_reg) keeps sets by (provider, model) for the life of the process,
 * so counts survive reloads.
 *
 * Windows and how exact they are. Minute: 60 buckets of one second. Usage counted at
 * second s = floor(ms / 1000) stops counting at (s + 60) * 1000 ms: the window is the
 * current second plus the 59 before it, so a request leaves it between 59 and 60 s after
 * its admission (the same rule as key limits, core/limits.h). Admission is O(1) amortised
 * (advancing clears at most 60 buckets once each); memory is fixed. Day: the UTC day of
 * now_ms, [d * 86400000, (d + 1) * 86400000); a new day starts from zero.
 *
 * Leases. gw_quota_choose takes a lease on the unit it picks, in the same critical
 * section as the choice (check-then-act is one operation): 1 request and the token
 * estimate count in the minute bucket and the day of admission at once. settle replaces
 * the estimate with the real usage in those same buckets however late it comes (a bucket
 * that left its window, or an ended day, is not touched). A lease neither settled nor
 * kept (gw_quota_lease_keep) for GW_QUOTA_LEASE_TTL_MS is dropped by the sweep: it stops
 * counting as open and is counted in dropped; what it counted stays counted (a backstop
 * against a bug, never the normal path); a late settle still corrects the usage.
 *
 * Limits. Effective limit per window = the smaller of the configured one (quota.default
 * and quota.models) and the learned one; 0 = not known. A learned limit replaces the
 * previous learned value on its window but never loosens a configured one.
 *
 * Owns:    the registry owns its sets; a set owns its units. Leases, choices, views and
 *          facts are caller-owned plain data.
 * Threads: every gw_quota_set_* call on any thread. One gw_spin per set guards all its
 *          units: a choice reads every credential and takes the lease under it, so two
 *          workers can never both take the last unit of a window. Held for a few hundred
 *          instructions (advance <= 60 buckets per window, <= GW_QUOTA_MAX_CREDS units),
 *          never across an allocation. Registry lookups are lock-free (RELEASE/ACQUIRE
 *          publication, as core/limits.c).
 * See:     core/quota.c, core/quota_learn.h, tests/unit/core/test_quota.c, docs/ARCHITECTURE.md
 */
#ifndef GW_CORE_QUOTA_H
#define GW_CORE_QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/conf.h"
#include "core/row-t.h"

#define GW_QUOTA_MAX_CREDS 16           /* credentials of one provider that are used */
#define GW_QUOTA_FP_LEN 12              /* fingerprint: 12 hex characters (48 bits) */
#define GW_QUOTA_ORIGIN_MAX 48          /* where a learned limit came from */
#define GW_QUOTA_LEASE_TTL_MS 120000ull /* an unsettled, unkept lease is dropped after */
#define GW_QUOTA_DAY_MS 86400000ull
#define GW_QUOTA_TRANSIENT_MS 90000ull      /* 429 with healthy day counters */
#define GW_QUOTA_UNKNOWN_CAP_MS 600000ull   /* unknown limits escalate up to 10 min */
#define GW_QUOTA_PROBE_EVERY_MS 60000ull    /* one probe pass a minute */
#define GW_QUOTA_PROBE_MIN_LEFT_MS 60000ull /* a probe only with that much cooldown left */
#define GW_QUOTA_PROBES_PER_PASS 3
/* Sets a registry creates at most: what clients' model names on a "*" provider can cost. */
#define GW_QUOTA_MAX_SETS 4096

/* The four windows, in this order everywhere. */
enum gw_quota_win { GW_QUOTA_RPM = 0, GW_QUOTA_TPM, GW_QUOTA_RPD, GW_QUOTA_TPD, GW_QUOTA_WINS };

/* Why a unit is cooling down (DESIGN.md 10). */
enum gw_quota_source {
    GW_QUOTA_SRC_NONE = 0,
    GW_QUOTA_SRC_TRANSIENT, /* 429 with healthy day counters: 90 s, no escalation */
    GW_QUOTA_SRC_DAY,       /* daily exhaustion: 2 min, 10 min, 1 h, 24 h */
    GW_QUOTA_SRC_UNKNOWN,   /* no limit known: 90 s, 2 min, 10 min (two 429s within 1 h) */
    GW_QUOTA_SRC_CREDIT,    /* 402 */
    GW_QUOTA_SRC_TIER,      /* 403 */
};

/* A cooldown as views and events show it. */
struct gw_quota_cooldown {
    enum gw_quota_source source; /* NONE: not cooling */
    uint64_t since_ms, until_ms;
    uint32_t hits;      /* quota failures of this unit since its last success */
    bool authoritative; /* an upstream's Retry-After set until_ms (no probe shortens it) */
    bool capped;        /* a local upstream's cap (quota.local_cooldown_cap_secs) applied */
};

/* A learned limit on one window. */
struct gw_quota_learned {
    uint64_t limit;                       /* 0: none learned */
    uint64_t at_ms;                       /* when */
    char origin[GW_QUOTA_ORIGIN_MAX + 1]; /* header name or body phrase */
};

/* What gw_quota_choose counted; caller-owned, settle exactly once (a second settle and a
 * settle of a zeroed lease do nothing). */
struct gw_quota_lease {
    bool active;
    uint8_t unit;        /* index in its set */
    uint64_t sec;        /* minute bucket it counts in */
    uint64_t day;        /* UTC day it counts in */
    uint64_t open_sec;   /* second of its open-lease slot (moved by keep) */
    uint64_t est_tokens; /* estimate counted */
};

/* Why a unit was not chosen (or that it was). */
enum gw_quota_skip {
    GW_QUOTA_CHOSEN = 0,
    GW_QUOTA_SKIP_COOLING,     /* cooldown: see cool */
    GW_QUOTA_SKIP_WINDOW_FULL, /* window `win` admits again at frees_at_ms */
    GW_QUOTA_SKIP_HEADROOM,    /* admitted, but another had more headroom (or the turn) */
};

struct gw_quota_verdict {
    enum gw_quota_skip skip;
    struct gw_quota_cooldown cool; /* SKIP_COOLING */
    enum gw_quota_win win;         /* SKIP_WINDOW_FULL */
    uint64_t frees_at_ms;          /* SKIP_COOLING: until; WINDOW_FULL: when it admits */
    uint32_t headroom_ppm;         /* admitting units: 1e6 - worst used/limit ratio */
};

/* The outcome of a choice over a set: every unit's verdict. */
struct gw_quota_choice {
    int chosen;           /* unit index, -1 when none admits */
    uint64_t retry_at_ms; /* none admits: the earliest moment one will (0 if chosen) */
    size_t n;
    struct gw_quota_verdict v[GW_QUOTA_MAX_CREDS];
};

/* One window as the control plane shows it. */
struct gw_quota_win_view {
    uint64_t used;          /* leases included */
    uint64_t limit;         /* effective; 0 = not known */
    uint64_t resets_at_ms;  /* minute: when the oldest counted usage leaves; day: midnight UTC */
    uint64_t held_until_ms; /* an upstream said remaining 0 until then (0: not held) */
};

struct gw_quota_unit_view {
    char fp[GW_QUOTA_FP_LEN + 1];
    struct gw_quota_win_view win[GW_QUOTA_WINS];
    struct gw_quota_learned learned[GW_QUOTA_WINS];
    struct gw_quota_cooldown cool;
    uint32_t open_leases;
    uint64_t leases_dropped;
    bool seen; /* has answered since start (or was rebuilt from rows) */
};

/* What an upstream said about one window, from core/quota_learn.h. */
struct gw_quota_fact {
    enum gw_quota_win win;
    uint64_t limit;    /* 0: not stated */
    int64_t remaining; /* -1: not stated */
    uint64_t reset_ms; /* relative to now; 0: not stated */
    char origin[GW_QUOTA_ORIGIN_MAX + 1];
};

#define GW_QUOTA_MAX_FACTS 8
struct gw_quota_facts {
    size_t n;
    struct gw_quota_fact f[GW_QUOTA_MAX_FACTS];
    uint64_t retry_after_ms; /* Retry-After, retry-after-ms or a delay in the body; 0 none */
    bool day_exhausted;      /* the upstream named a per-day quota as the one exceeded */
};

/* One failure of a hop that is about quota (429, 402, 403). */
struct gw_quota_hit {
    unsigned status;
    const struct gw_quota_facts *facts; /* may be NULL */
};

/* Per-set settings from the provider's config. */
struct gw_quota_set_conf {
    uint64_t limit[GW_QUOTA_WINS]; /* configured, 0 = none */
    bool local;                    /* loopback / private-network upstream */
    uint64_t local_cap_ms;         /* 0: cap off */
};

struct gw_quota_set;
struct gw_quota_reg;

/* ---- fingerprint ---- */

/* The credential's short fingerprint into <out> (GW_QUOTA_FP_LEN hex characters and a
 * NUL): the first 6 bytes of SHA-256(secret). Shown in views and stored on rows in place
 * of the secret. Any thread; pure. */
void gw_quota_fingerprint(const char *secret, size_t len, char out[GW_QUOTA_FP_LEN + 1]);

/* The set settings of provider <p> for <model>: its configured limits (NULL model: the
 * provider default; a quota.models entry overrides the default axis by axis), whether its
 * base_url host is loopback or private (local), and quota.local_cooldown_cap_secs. Pure. */
void gw_quota_set_conf_of(const struct gw_conf_provider *p, const char *model,
                          struct gw_quota_set_conf *out);

/* True when <host> (no brackets) is a loopback or private-network address or "localhost":
 * 127/8, 10/8, 172.16/12, 192.168/16, 169.254/16, ::1, fc00::/7, fe80::/10. Pure. */
bool gw_quota_host_is_local(const char *host);

/* The tokens an upstream's quota counts for one answer: all input (uncached, cache reads
 * and cache writes) plus output. Cache reads are counted although some upstreams leave
 * them out of their limits (Anthropic's ITPM): counting more keeps gw under the limit.
 * <u> NULL: 0. Pure. */
uint64_t gw_quota_usage_tokens(const struct gw_usage *u);

/* True for the statuses that are about a credential's quota (429, 402, 403): the hop's
 * credential cools (gw_quota_fail) and the provider is not counted as failing. Pure. */
static inline bool
gw_quota_status_is_quota(unsigned status)
{
    return status == 429 || status == 402 || status == 403;
}

/* ---- sets ---- */

/* A set of <n> units (n <= GW_QUOTA_MAX_CREDS) with fingerprints <fps>, configured by <c>.
 * NULL when out of memory or n is 0 or too large. */
struct gw_quota_set *gw_quota_set_new(const char (*fps)[GW_QUOTA_FP_LEN + 1], size_t n,
                                      const struct gw_quota_set_conf *c);
void gw_quota_set_free(struct gw_quota_set *s);

/* Installs new configured limits and local settings (a reload); counts, leases, learned
 * limits and cooldowns stay. Any thread. */
void gw_quota_set_configure(struct gw_quota_set *s, const struct gw_quota_set_conf *c);

size_t gw_quota_set_size(const struct gw_quota_set *s);
/* The unit index of fingerprint <fp>, or -1. */
int gw_quota_set_find(const struct gw_quota_set *s, const char *fp);

/* Chooses the unit for a request of <est_tokens> at <now_ms>: among units not cooling
 * whose every window admits it (used + need <= limit, or the window is empty; windows
 * without a known limit always admit), the one with the most headroom: 1 - the worst
 * used/limit ratio over its windows with a known limit, a unit not yet seen answering
 * counting at least half used on those; no known limit = full headroom. Ties take turns
 * (round robin from the unit after the last chosen). The chosen unit's lease is taken in
 * the same critical section: <*lease> active. <*why> gets every unit's verdict and, when
 * none admits, retry_at_ms: the earliest moment one will (cooldown end or window freeing,
 * whichever is later per unit). Returns the index or -1. <why> may be NULL. */
int gw_quota_choose(struct gw_quota_set *s, uint64_t now_ms, uint64_t est_tokens,
                    struct gw_quota_lease *lease, struct gw_quota_choice *why);

/* The same decision without taking a lease or moving the turn (dry-run). */
int gw_quota_peek(struct gw_quota_set *s, uint64_t now_ms, uint64_t est_tokens,
                  struct gw_quota_choice *why);

/* Settles <lease> at <now_ms>: <sent> (the hop reached the upstream) replaces the token
 * estimate with <real_tokens>; otherwise the request and its estimate are given back.
 * The lease becomes inactive. */
void gw_quota_settle(struct gw_quota_set *s, struct gw_quota_lease *lease, uint64_t now_ms,
                     uint64_t real_tokens, bool sent);

/* A settlement kept to be applied later with others (gw_quota_settle_all):
 * gw_quota_settle's arguments, the lease copied. */
struct gw_quota_settlement {
    struct gw_quota_set *set;
    struct gw_quota_lease lease;
    uint64_t now_ms, real_tokens;
    bool sent;
};

/* Applies <v>[0..n) as gw_quota_settle would one after the other, each set locked once
 * for all of its settlements. Each entry's set becomes NULL. Any thread. */
void gw_quota_settle_all(struct gw_quota_settlement *v, size_t n);

/* Tells the sweep that the request holding <lease> is alive (a long stream): call at
 * least once per GW_QUOTA_LEASE_TTL_MS while it runs. */
void gw_quota_lease_keep(struct gw_quota_set *s, struct gw_quota_lease *lease, uint64_t now_ms);

/* Drops leases of every unit not settled or kept for GW_QUOTA_LEASE_TTL_MS; returns how
 * many this call dropped (also added to each unit's leases_dropped). Call from a timer,
 * e.g. the control thread once a minute: it holds the set lock for a scan of 128 slots
 * per unit (a few microseconds), longer than a choice. */
size_t gw_quota_sweep(struct gw_quota_set *s, uint64_t now_ms);

/* ---- outcomes ---- */

/* Unit <i> answered (2xx, or a client error): it is seen, its ladder and hit count are
 * cleared (DESIGN.md 10: "cleared by a success"); a cooldown is not shortened. True when
 * it had cooled before (hits cleared: the caller tells credential_recovered). */
bool gw_quota_success(struct gw_quota_set *s, size_t i, uint64_t now_ms);

/* Unit <i> failed with a quota status (<h->status> 429, 402 or 403) at <now_ms>: learns
 * the facts' limits, then cools the unit: 402 credit and 403 tier climb the day ladder
 * under their own source; 429 with a day quota named exhausted (facts: a body naming a
 * per-day quota, or a day window's remaining stated 0) or the unit's own day counters at
 * a known limit -> day ladder (2 min, 10 min, 1 h, 24 h; the step rises
 * with each hit within a rolling day of the first); 429 with a known limit and healthy day
 * counters -> 90 s transient, no escalation; 429 with no limit known -> 90 s, and a 429
 * within an hour of the previous one escalates (2 min, then 10 min, capped). A longer
 * Retry-After (facts) wins and marks the cooldown authoritative, capped at a day. A local
 * upstream with a cap is then capped (the cap wins over Retry-After too, so a local test
 * upstream never benches for long) and does not climb a ladder while capped. An active
 * cooldown is never shortened. <out> (may be NULL) gets the result. */
void gw_quota_fail(struct gw_quota_set *s, size_t i, uint64_t now_ms, const struct gw_quota_hit *h,
                   struct gw_quota_cooldown *out);

/* Applies what an upstream said about unit <i> (any answer, 2xx included): each stated
 * limit becomes the unit's learned limit on its window (with its origin); a stated
 * remaining of 0 with a reset holds that window full until now + reset. */
void gw_quota_learn_apply(struct gw_quota_set *s, size_t i, uint64_t now_ms,
                          const struct gw_quota_facts *f);

/* Restores a learned limit read back from the store at startup. */
void gw_quota_learned_restore(struct gw_quota_set *s, size_t i, enum gw_quota_win w,
                              const struct gw_quota_learned *l);

/* ---- probes ---- */

/* The probe schedule of a process: one pass every <every_ms> (GW_QUOTA_PROBE_EVERY_MS),
 * the first one a jitter in [0, every_ms) after start, drawn from <seed>; a unit is probed
 * only with at least <min_left_ms> (GW_QUOTA_PROBE_MIN_LEFT_MS) of its cooldown left. */
struct gw_quota_prober {
    uint64_t next_pass_ms;
    uint64_t every_ms;
    uint64_t min_left_ms;
};
void gw_quota_prober_init(struct gw_quota_prober *p, uint64_t start_ms, uint64_t seed);

/* For tests only (gwd's GW_TEST_QUOTA_PROBE_DIV): gw_quota_prober_init with the pass
 * interval and the minimum time left divided by <div> (1 = the real schedule; 0 is 1). */
void gw_quota_prober_init_scaled(struct gw_quota_prober *p, uint64_t start_ms, uint64_t seed,
                                 unsigned div);

/* True when a pass is due at <now_ms>; it then moves the next pass every_ms on. */
bool gw_quota_prober_due(struct gw_quota_prober *p, uint64_t now_ms);

/* A probe to send. */
struct gw_quota_probe {
    struct gw_quota_set *set;
    size_t unit;
};

/* Picks up to <max> (at most GW_QUOTA_PROBES_PER_PASS) units of <sets> to probe at
 * <now_ms>: cooling with a heuristic (not authoritative) cooldown that has served half its
 * time with at least 60 s left, and whose probe backoff has passed; those cooling longest
 * first. Returns how many it wrote. */
size_t gw_quota_probe_pick(struct gw_quota_set *const *sets, size_t n_sets, uint64_t now_ms,
                           struct gw_quota_probe *out, size_t max);
/* The same with the minimum time left of <p> (a test's scaled prober). */
size_t gw_quota_probe_pick_by(const struct gw_quota_prober *p, struct gw_quota_set *const *sets,
                              size_t n_sets, uint64_t now_ms, struct gw_quota_probe *out,
                              size_t max);

/* The probe of unit <i> passed (clears the cooldown and the ladder) or failed (the next
 * probe waits 2, 4, 8, then 15 min; the cooldown is never lengthened). */
void gw_quota_probe_done(struct gw_quota_set *s, size_t i, uint64_t now_ms, bool pass);

/* ---- rebuild and views ---- */

/* Counts one stored row of unit <i>: 1 request and <tokens> at <ts_ms>, in the minute
 * window and the day when they still hold it at <now_ms>; marks the unit seen. */
void gw_quota_rebuild_add(struct gw_quota_set *s, size_t i, uint64_t ts_ms, uint64_t tokens,
                          uint64_t now_ms);

/* Unit <i> as seen at <now_ms>. */
void gw_quota_view(struct gw_quota_set *s, size_t i, uint64_t now_ms,
                   struct gw_quota_unit_view *out);

/* ---- registry ---- */

struct gw_quota_reg *gw_quota_reg_new(void);
void gw_quota_reg_free(struct gw_quota_reg *reg);

/* The set of (<provider>, <model>) (model "" with pool account), created with <fps>/<n>
 * and <c> on first use (<*created> true: the caller rebuilds it). Lock-free when it
 * exists; creation allocates, then publishes under the registry lock. NULL when out of
 * memory, a name is longer than 128 bytes, or the registry already holds
 * GW_QUOTA_MAX_SETS sets (a "*" provider asked for endless model names): the caller then
 * uses the provider's (provider, "") set, created before the limit at startup. An existing set
 * keeps its units (a reload that changes a provider's keys needs a new set: see
 * docs/ARCHITECTURE.md). */
struct gw_quota_set *gw_quota_reg_get(struct gw_quota_reg *reg, const char *provider,
                                      const char *model, const char (*fps)[GW_QUOTA_FP_LEN + 1],
                                      size_t n, const struct gw_quota_set_conf *c, bool *created);
struct gw_quota_set *gw_quota_reg_find(const struct gw_quota_reg *reg, const char *provider,
                                       const char *model);

/* Rebuild from one stored row tuple: finds the set of (provider, model) (then of
 * (provider, "")) and its unit of fingerprint <fp>, and counts it as gw_quota_rebuild_add;
 * false when no such set or unit exists. */
bool gw_quota_reg_rebuild_add(struct gw_quota_reg *reg, uint64_t ts_ms, const char *provider,
                              const char *model, const char *fp, uint64_t tokens, uint64_t now_ms);

/* Calls <fn> for every set (control views, the sweep, probes). */
void gw_quota_reg_each(const struct gw_quota_reg *reg,
                       void (*fn)(void *arg, const char *provider, const char *model,
                                  struct gw_quota_set *s),
                       void *arg);

/* One line saying why a unit was or was not chosen, for dry-run, logs and the skipped
 * attempt's note, into <buf> (always NUL-terminated; cut to <len>): "chosen (headroom
 * 62%)", "less headroom (40%)", "cooling: day until +120 s, 2 hits, authoritative",
 * "tpm window full, admits in 12 s". Times relative to <now_ms>, rounded up to a second.
 * Returns <buf>. Pure. */
const char *gw_quota_verdict_str(const struct gw_quota_verdict *v, uint64_t now_ms, char *buf,
                                 size_t len);

const char *gw_quota_win_str(enum gw_quota_win w);       /* "rpm", "tpm", "rpd", "tpd" */
const char *gw_quota_source_str(enum gw_quota_source s); /* "none", "transient", "day", ... */

#endif
