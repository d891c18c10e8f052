/* SPDX-License-Identifier: MIT
 * core/speed.h - the minimum-speed judge of one streamed answer (providers[].min_speed,
 * DESIGN.md section 6). The caller feeds token arrivals (estimated one per 4 bytes of
 * content delta until the upstream reports usage, DESIGN.md section 18) and, once a
 * second from the first token on, asks for a verdict. Pure: times are arguments.
 * Owns:    nothing; struct gw_speed lives in the caller's memory (no allocation).
 * Threads: one stream on one thread.
 * See:     core/speed.c, tests/unit/core/test_speed.c
 */
#ifndef GW_CORE_SPEED_H
#define GW_CORE_SPEED_H

#include <stdbool.h>
#include <stdint.h>

/* Longest window the judge keeps (min_speed.window_secs is 5..120). */
#define GW_SPEED_MAX_WINDOW_SECS 120
/* Per-second buckets in the ring: a power of two above the longest window + 1, since a
 * span of window_secs touches up to window_secs + 1 buckets. */
#define GW_SPEED_BUCKETS 128
/* A gap between token arrivals of this length or more is a silence. */
#define GW_SPEED_SILENCE_MS 5000

/* Arrivals within one second of the grid that starts at the first token. Internal. */
struct gw_speed_bucket {
    uint64_t tokens;     /* 0: empty */
    uint64_t first_ms;   /* first arrival in this second (also names the second) */
    uint64_t last_ms;    /* last arrival in this second */
    uint64_t silence_ms; /* length of the silence that ended at first_ms, 0 when none */
};

/* One stream's judge. Fields are internal; callers use the functions below. */
struct gw_speed {
    uint64_t window_ms; /* window_secs * 1000 */
    uint64_t min_tps;   /* 0: never too slow */
    uint64_t first_ms;  /* first token (valid when started) */
    uint64_t last_ms;   /* latest arrival */
    bool started;       /* a token has arrived */
    struct gw_speed_bucket ring[GW_SPEED_BUCKETS];
};

enum gw_speed_verdict {
    GW_SPEED_NOT_JUDGED, /* no token yet, or less than half a window of non-silent time */
    GW_SPEED_OK,
    GW_SPEED_TOO_SLOW,
};

/* Prepares <s> for one answer: the average over the last <window_secs> seconds must
 * reach <min_tps> tokens per second. <window_secs> is clamped to
 * 1..GW_SPEED_MAX_WINDOW_SECS (the config allows 5..120); <min_tps> 0 never judges
 * too slow (the rate is still measured). No allocation; no gw_speed_fini is needed. */
void gw_speed_init(struct gw_speed *s, unsigned window_secs, unsigned min_tps);

/* Records that <tokens> tokens arrived at <now_ms>: estimated (one per 4 bytes of content
 * delta) or, once the upstream reports usage, the difference it reports. The first call
 * with <tokens> > 0 marks the first token and starts the per-second grid; calls with
 * <tokens> 0 are ignored (they are not arrivals). A <now_ms> earlier than the previous
 * arrival is taken as that arrival's time (clocks must not run backwards). */
void gw_speed_add(struct gw_speed *s, uint64_t now_ms, uint64_t tokens);

/* Judges the stream at <now_ms>; the caller calls it once a second from the first token
 * on. The measured span runs from the window's start to <now_ms>:
 * - the window starts <window_secs> before <now_ms>, but not before the first token; that
 *   start is rounded up to the per-second grid that begins at the first token, so with
 *   calls on that grid (first token + k s) the span is exactly the window, and otherwise
 *   it is at most one second shorter;
 * - the tokens counted are those that arrived within the span, ends included;
 * - silences are taken out of the span's time entirely: a gap of GW_SPEED_SILENCE_MS or
 *   more between consecutive arrivals, and the trailing gap from the last arrival to
 *   <now_ms> when it is that long (the parts of them that fall inside the span);
 * - when the time left is less than half a window: GW_SPEED_NOT_JUDGED;
 * - else tokens / time left (in seconds) below min_tps: GW_SPEED_TOO_SLOW, otherwise
 *   GW_SPEED_OK.
 * Before the first token: GW_SPEED_NOT_JUDGED. <tps> (may be NULL) receives the measured
 * rate in every case (0 when there is no non-silent time). A stream whose every gap is a
 * silence is never judged: idle upstreams are the timeouts' business, not this one's. */
enum gw_speed_verdict gw_speed_judge(struct gw_speed *s, uint64_t now_ms, double *tps);

/* The same average as gw_speed_judge at <now_ms>, for the row's tokens_per_sec, whether or
 * not half a window of non-silent time has passed. 0 before the first token or when the
 * span has no non-silent time. */
double gw_speed_rate(const struct gw_speed *s, uint64_t now_ms);

#endif
