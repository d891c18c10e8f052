/* SPDX-License-Identifier: MIT
 * bench/upstream.c - `gwbench upstream`: a fake LLM API server speaking OpenAI Chat
 * Completions, OpenAI Responses, Anthropic Messages, Google Gemini and AWS Bedrock
 * Converse.
 * Each worker thread runs its own event_base and its own SO_REUSEPORT listener
 * on the same port. A connection reads into its input buffer, http_parser
 * frames one request at a time (the parser is paused at the end of each
 * message so pipelined bytes wait their turn), and the route picks the API
 * shape whose templates (bench/upstream_<shape>.c, never dialects/) render the
 * answer. This file decides everything but the bytes: the knobs, the pacing
 * (one timer per connection; every event is its own write(2)), the faults,
 * keep-alive and the /_bench/ endpoints.
 * Owns:    listeners, connections (freed when closed), the /_bench/last record.
 * Threads: main parses flags, binds, starts the workers and waits for a
 *          signal; a connection lives on one worker; the counters are atomics
 *          and the last-request record is behind a mutex.
 * See:     bench/upstream.h, bench/upstream-priv.h, docs/gwbench.md
 */
#include "bench/upstream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <http_parser.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <jansson.h>

#include "bench/upstream-priv.h"
#include "bench/util.h"
#include "core/alloc.h"
#include "core/str.h"

#define UP_MAX_THREADS 64
#define UP_MAX_INPUT (64u << 20) /* bytes buffered per connection before we give up */
#define UP_MAX_CHUNKS 100000u
#define UP_READ_SIZE 16384u

static const char *const fault_names[] = {
    "none",      "status",       "hang-headers", "hang-content",  "drop-before", "drop-mid",
    "error-mid", "garbage-body", "garbage-sse",  "garbage-lines", "goaway",
};

struct bench_up_settings bench_up_g;

/* Settings of the server itself, written by main before the workers start. */
static struct {
    struct sockaddr_in addr;
    unsigned threads;
    bool quiet;
} srv;

/* Counters of /_bench/stats; relaxed atomics: they are independent tallies
 * read only by the stats endpoint, which needs no ordering between them. */
static struct {
    atomic_uint_fast64_t requests;
    atomic_uint_fast64_t active;
    atomic_uint_fast64_t conns_total;
    atomic_uint_fast64_t closed_by_peer;
    atomic_uint_fast64_t streams_started;
    atomic_uint_fast64_t streams_completed;
    atomic_uint_fast64_t streams_aborted;
    atomic_uint_fast64_t streams_open;     /* streams started and not yet ended */
    atomic_uint_fast64_t streams_open_max; /* the most open at once since the start */
    atomic_uint_fast64_t models;           /* model listings (GET .../models) */
    atomic_uint_fast64_t auth_refused;     /* Bedrock requests refused for their signature */
} st;

void
bench_up_count_auth_refused(void)
{
    atomic_fetch_add_explicit(&st.auth_refused, 1, memory_order_relaxed);
}

/* Requests per credential (/_bench/stats "keys"), the first BENCH_UP_KEYS seen. */
#define BENCH_UP_KEYS 16
static pthread_mutex_t keys_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char key[128];
    uint64_t n;
} keys[BENCH_UP_KEYS];

static void
count_key(const char *key)
{
    size_t i;

    if (!key[0])
        return;
    pthread_mutex_lock(&keys_mu);
    for (i = 0; i < BENCH_UP_KEYS; i++) {
        if (!keys[i].key[0])
            snprintf(keys[i].key, sizeof(keys[i].key), "%s", key);
        if (strcmp(keys[i].key, key) == 0) {
            keys[i].n++;
            break;
        }
    }
    pthread_mutex_unlock(&keys_mu);
}

/* True when <key> is one of the comma-separated <list>. */
static bool
key_listed(const char *list, const char *key)
{
    size_t kl = strlen(key);

    while (*list) {
        const char *end = strchr(list, ',');
        size_t n = end ? (size_t)(end - list) : strlen(list);

        if (n == kl && memcmp(list, key, n) == 0)
            return true;
        if (!end)
            break;
        list = end + 1;
    }
    return false;
}

/* The last request of an API route, rendered as JSON; swapped in under the mutex. */
static pthread_mutex_t last_mu = PTHREAD_MUTEX_INITIALIZER;
static struct gw_buf last_json;

static inline void
count(atomic_uint_fast64_t *c)
{
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

static inline uint64_t
load_count(atomic_uint_fast64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

/* Marks <c>'s stream open or ended, keeping streams_open and its peak streams_open_max
 * (what a benchmark of many concurrent streams reads to know they were all held at
 * once, rather than inferring it). Every change of stream_active goes through here. */
static void
stream_mark(struct bench_up_conn *c, bool active)
{
    if (c->stream_active == active)
        return;
    c->stream_active = active;
    if (active) {
        uint_fast64_t n = atomic_fetch_add_explicit(&st.streams_open, 1, memory_order_relaxed) + 1;
        uint_fast64_t cur = load_count(&st.streams_open_max);

        while (n > cur &&
               !atomic_compare_exchange_weak_explicit(&st.streams_open_max, &cur, n,
                                                      memory_order_relaxed, memory_order_relaxed))
            ;
    } else {
        atomic_fetch_sub_explicit(&st.streams_open, 1, memory_order_relaxed);
    }
}

/* The routes; an API route also names its shape (see dispatch()). */
enum up_route {
    UP_ROUTE_NONE,
    UP_ROUTE_ANSWER, /* a model answer of any shape */
    UP_ROUTE_COUNT,  /* token counting: Messages count_tokens, Gemini countTokens */
    UP_ROUTE_MODELS, /* Gemini's model listing */
    UP_ROUTE_STATS,
    UP_ROUTE_LAST
};

/* ---- small parsers and renderers ---- */

static const char *
reason(unsigned s)
{
    switch (s) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 529: return "Overloaded";
    default: return "Status";
    }
}

static bool
parse_fault(const char *s, size_t n, enum bench_up_fault *f)
{
    for (unsigned i = 0; i < sizeof(fault_names) / sizeof(fault_names[0]); i++) {
        if (strlen(fault_names[i]) == n && memcmp(fault_names[i], s, n) == 0) {
            *f = (enum bench_up_fault)i;
            return true;
        }
    }
    return false;
}

/* Parses a pace profile "COUNTxMS[,COUNTxMS...]" (e.g. "5x100,3x6000,20x100": 5 chunks
 * 100 ms apart, then 3 chunks 6 s apart, then 20 chunks 100 ms apart) from <s>/<n> into
 * <q>; blanks around items are allowed. false (and <q> untouched) when it does not parse,
 * a count is 0, the chunks add up to more than UP_MAX_CHUNKS or there are more than
 * BENCH_UP_MAX_PACE segments. */
static bool
parse_pace(const char *s, size_t n, struct bench_up_params *q)
{
    struct bench_up_pace_seg seg[BENCH_UP_MAX_PACE];
    unsigned k = 0;
    uint64_t total = 0;
    size_t i = 0;

    while (i < n) {
        size_t end = i, x;
        uint64_t cnt, gap;

        while (end < n && s[end] != ',')
            end++;
        for (x = i; x < end && s[x] != 'x' && s[x] != 'X'; x++)
            ;
        if (x == end || k == BENCH_UP_MAX_PACE ||
            !bench_parse_u64n(s + i, x - i, UP_MAX_CHUNKS, &cnt) ||
            !bench_parse_u64n(s + x + 1, end - x - 1, 3600000, &gap) || cnt == 0)
            return false;
        total += cnt;
        if (total > UP_MAX_CHUNKS)
            return false;
        seg[k++] = (struct bench_up_pace_seg){(uint32_t)cnt, (uint32_t)gap};
        i = end < n ? end + 1 : end;
        if (end < n && i == n)
            return false; /* a trailing comma */
    }
    if (k == 0)
        return false;
    memcpy(q->pace, seg, k * sizeof(seg[0]));
    q->pace_n = k;
    return true;
}

/* Parses a --tool-call list "NAME[,NAME...]" (1..BENCH_UP_MAX_TOOLS names of 1..64 bytes
 * of [A-Za-z0-9_-], the tool names every API accepts, so they need no escaping) into
 * <q>. false (and <q> untouched) when it does not parse. */
static bool
parse_tool_names(const char *s, size_t n, struct bench_up_params *q)
{
    char tool[BENCH_UP_MAX_TOOLS][BENCH_UP_TOOL_NAME + 1];
    unsigned k = 0;
    size_t i = 0;

    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    if (i == n)
        return false;
    for (;;) {
        size_t len = 0;

        if (k == BENCH_UP_MAX_TOOLS)
            return false;
        while (i < n && s[i] != ',') {
            char ch = s[i++];

            if (len == BENCH_UP_TOOL_NAME ||
                !((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '_' || ch == '-'))
                return false;
            tool[k][len++] = ch;
        }
        if (len == 0)
            return false;
        tool[k++][len] = '\0';
        if (i == n)
            break;
        i++; /* the comma */
    }
    memcpy(q->tool, tool, sizeof(tool));
    q->tool_n = k;
    return true;
}

/* Streamed one per chunk; a non-streamed answer joins them. */
const char *const bench_up_tool_args[BENCH_UP_MAX_TOOLS][BENCH_UP_TOOL_PIECES - 1] = {
    {"{\"city\"", ":\"Par", "is\"}"},
    {"{\"city\"", ":\"Tok", "yo\"}"},
    {"{\"city\"", ":\"Lim", "a\"}"},
    {"{\"city\"", ":\"Osl", "o\"}"},
};

/* Total paced deltas of <q>'s pace profile. */
static uint64_t
pace_total(const struct bench_up_params *q)
{
    uint64_t t = 0;

    for (unsigned i = 0; i < q->pace_n; i++)
        t += q->pace[i].count;
    return t;
}

/* Offset in ms of paced delta <k> (0-based) from the first one under <q>'s profile;
 * deltas past the profile's count (reasoning deltas make more) keep its last gap. */
static uint64_t
pace_offset_ms(const struct bench_up_params *q, uint64_t k)
{
    uint64_t off = 0, idx = 0;

    for (unsigned i = 0; i < q->pace_n && idx <= k; i++) {
        uint64_t last = idx + q->pace[i].count - 1, from = idx == 0 ? 1 : idx;

        if (last > k)
            last = k;
        if (last >= from)
            off += (last - from + 1) * q->pace[i].gap_ms;
        idx += q->pace[i].count;
    }
    if (q->pace_n > 0 && k >= idx)
        off += (k - idx + 1) * q->pace[q->pace_n - 1].gap_ms;
    return off;
}

enum gw_code
bench_up_append_json_inner(struct gw_buf *b, const char *s, size_t n)
{
    size_t before = b->len;
    enum gw_code rc = gw_buf_append_json_str(b, (struct gw_str){s, n});

    if (rc != GW_OK)
        return rc;
    /* drop the opening and closing quotes gw_buf_append_json_str wrote */
    memmove(b->data + before, b->data + before + 1, b->len - before - 2);
    b->len -= 2;
    b->data[b->len] = '\0';
    return GW_OK;
}

void
bench_up_append_tool_args(struct gw_buf *b, unsigned i, bool escaped)
{
    for (unsigned k = 0; k < BENCH_UP_TOOL_PIECES - 1; k++) {
        const char *piece = bench_up_tool_args[i][k];

        if (escaped)
            (void)bench_up_append_json_inner(b, piece, strlen(piece));
        else
            (void)gw_buf_append_str(b, gw_str_c(piece));
    }
}

/* ---- a tiny JSON scanner for the request body ----
 * Reads only model, stream, stream_options.include_usage and (whether there is a
 * numeric) max_tokens at the top level; any malformed input simply leaves the
 * defaults. (The Gemini route takes the model and the stream from its path.) */

static const char *
skip_ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* <p> at '"'; returns past the closing quote, or NULL. */
static const char *
skip_string(const char *p, const char *e)
{
    for (p++; p < e; p++) {
        if (*p == '\\')
            p++;
        else if (*p == '"')
            return p + 1;
    }
    return NULL;
}

static const char *
skip_value(const char *p, const char *e, int depth)
{
    if (depth > 64)
        return NULL;
    p = skip_ws(p, e);
    if (p >= e)
        return NULL;
    if (*p == '"')
        return skip_string(p, e);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';

        p = skip_ws(p + 1, e);
        if (p < e && *p == close)
            return p + 1;
        for (;;) {
            if (close == '}') {
                if (p >= e || *p != '"' || (p = skip_string(p, e)) == NULL)
                    return NULL;
                p = skip_ws(p, e);
                if (p >= e || *p != ':')
                    return NULL;
                p++;
            }
            if ((p = skip_value(p, e, depth + 1)) == NULL)
                return NULL;
            p = skip_ws(p, e);
            if (p >= e)
                return NULL;
            if (*p == close)
                return p + 1;
            if (*p != ',')
                return NULL;
            p = skip_ws(p + 1, e);
        }
    }
    while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' && *p != '\r' &&
           *p != '\t')
        p++;
    return p;
}

static bool
key_is(const char *k, const char *kend, const char *want)
{
    size_t n = strlen(want);

    return (size_t)(kend - k) == n + 2 && memcmp(k + 1, want, n) == 0;
}

static bool
is_true(const char *p, const char *e)
{
    return e - p >= 4 && memcmp(p, "true", 4) == 0;
}

/* Walks the top-level object of <body>; fills <c>'s model, stream, include_usage,
 * has_max_tokens. */
static void
scan_request(struct bench_up_conn *c, const char *p, size_t n)
{
    const char *e = p + n, *k, *kend, *v;

    c->stream = false;
    c->include_usage = false;
    c->has_max_tokens = false;
    gw_buf_reset(&c->model);
    p = skip_ws(p, e);
    if (p >= e || *p != '{')
        return;
    p = skip_ws(p + 1, e);
    while (p < e && *p == '"') {
        k = p;
        if ((kend = skip_string(p, e)) == NULL)
            return;
        p = skip_ws(kend, e);
        if (p >= e || *p != ':')
            return;
        v = skip_ws(p + 1, e);
        if ((p = skip_value(v, e, 0)) == NULL)
            return;
        if (key_is(k, kend, "model") && *v == '"') {
            (void)gw_buf_append(&c->model, v + 1, (size_t)(p - v - 2));
        } else if (key_is(k, kend, "stream")) {
            c->stream = is_true(v, e);
        } else if (key_is(k, kend, "max_tokens")) {
            c->has_max_tokens = *v >= '0' && *v <= '9';
        } else if (key_is(k, kend, "stream_options") && *v == '{') {
            const char *q = skip_ws(v + 1, p);

            while (q < p && *q == '"') {
                const char *qk = q, *qkend = skip_string(q, p), *qv;

                if (qkend == NULL)
                    break;
                q = skip_ws(qkend, p);
                if (q >= p || *q != ':')
                    break;
                qv = skip_ws(q + 1, p);
                if ((q = skip_value(qv, p, 1)) == NULL)
                    break;
                if (key_is(qk, qkend, "include_usage"))
                    c->include_usage = is_true(qv, p);
                q = skip_ws(q, p);
                if (q < p && *q == ',')
                    q = skip_ws(q + 1, p);
            }
        }
        p = skip_ws(p, e);
        if (p < e && *p == ',')
            p = skip_ws(p + 1, e);
    }
}

/* ---- tool calls and tool results ----
 * Only when a --tool-call (x-bench-tool-call) list applies is the body parsed in
 * full (with jansson): an answer without tools stays on the scanner above. */

/* Appends the text of a tool result's <content>, JSON-escaped without the quotes. */
static void
append_result_text(struct gw_buf *b, json_t *content)
{
    size_t i;
    json_t *part;

    if (json_is_string(content)) {
        (void)bench_up_append_json_inner(b, json_string_value(content),
                                         json_string_length(content));
        return;
    }
    if (json_is_object(content)) {
        struct gw_buf tmp = {0};
        size_t n = json_dumpb(content, NULL, 0, JSON_COMPACT | JSON_PRESERVE_ORDER);

        if (n > 0 && gw_buf_reserve(&tmp, n) == GW_OK &&
            json_dumpb(content, tmp.data, n, JSON_COMPACT | JSON_PRESERVE_ORDER) == n)
            (void)bench_up_append_json_inner(b, tmp.data, n);
        gw_buf_fini(&tmp);
        return;
    }
    json_array_foreach(content, i, part)
    {
        json_t *text = json_object_get(part, "text");

        if (json_is_string(text))
            (void)bench_up_append_json_inner(b, json_string_value(text), json_string_length(text));
    }
}

void
bench_up_append_tool_said(struct gw_buf *b, json_t *content, json_t *id)
{
    if (b->len > 0)
        (void)gw_buf_append(b, " ", 1);
    (void)gw_buf_append_str(b, GW_STR_LIT("tool said: "));
    append_result_text(b, content);
    (void)gw_buf_append_str(b, GW_STR_LIT(" ["));
    if (json_is_string(id))
        (void)bench_up_append_json_inner(b, json_string_value(id), json_string_length(id));
    (void)gw_buf_append(b, "]", 1);
}

/* Decides what the answer carries and sets c->p.chunks for it. With a --tool-call
 * list: a request that ends with tool results gets one text chunk saying what they
 * said; else a request with a non-empty "tools" array gets one call to each listed
 * tool. Anything else (or a body that is not JSON) gets --text. */
static void
plan_answer(struct bench_up_conn *c)
{
    json_t *root, *tools;

    c->ans = BENCH_UP_ANS_TEXT;
    gw_buf_reset(&c->answer);
    if (c->p.tool_n == 0)
        return;
    root = json_loadb(c->body.data ? c->body.data : "", c->body.len, 0, NULL);
    if (root == NULL)
        return;
    tools = json_object_get(root, "tools");
    if (tools == NULL) /* Bedrock Converse: toolConfig.tools */
        tools = json_object_get(json_object_get(root, "toolConfig"), "tools");
    if (c->shape->tool_results(c, root)) {
        c->ans = BENCH_UP_ANS_TOOL_RESULT;
        c->p.chunks = 1;
    } else if (json_is_array(tools) && json_array_size(tools) > 0) {
        c->ans = BENCH_UP_ANS_TOOL_CALL;
        c->p.chunks = (uint64_t)c->p.tool_n * c->shape->tool_chunks;
    }
    json_decref(root);
}

struct gw_str
bench_up_chunk_text(const struct bench_up_conn *c)
{
    if (c->ans == BENCH_UP_ANS_TOOL_RESULT)
        return (struct gw_str){c->answer.data ? c->answer.data : "", c->answer.len};
    return (struct gw_str){bench_up_g.text.data, bench_up_g.text.len};
}

/* ---- connection output ---- */

static void
mark_peer_gone(struct bench_up_conn *c)
{
    c->by_peer = true;
    c->closing = true;
}

static void
want_write(struct bench_up_conn *c)
{
    if (!c->wev_added) {
        event_add(&c->wev, NULL);
        c->wev_added = true;
    }
}

/* Writes <iov> now if nothing is queued, queueing what the socket does not take. */
static void
conn_writev(struct bench_up_conn *c, struct iovec *iov, int n)
{
    size_t total = 0, done = 0;
    ssize_t w = 0;

    if (c->closing)
        return;
    for (int i = 0; i < n; i++)
        total += iov[i].iov_len;
    if (evbuffer_get_length(c->out) == 0) {
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};

        w = sendmsg(c->fd, &m, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                mark_peer_gone(c);
                return;
            }
            w = 0;
        }
        done = (size_t)w;
        if (done == total)
            return;
    }
    for (int i = 0; i < n; i++) {
        if (done >= iov[i].iov_len) {
            done -= iov[i].iov_len;
            continue;
        }
        evbuffer_add(c->out, (const char *)iov[i].iov_base + done, iov[i].iov_len - done);
        done = 0;
    }
    want_write(c);
}

void
bench_up_write(struct bench_up_conn *c, const void *p, size_t n)
{
    struct iovec iov = {(void *)(uintptr_t)p, n};

    conn_writev(c, &iov, 1);
}

static void conn_answer_done(struct bench_up_conn *c);

/* Called when everything of the current answer is queued. */
static void
conn_drain_then(struct bench_up_conn *c, bool close_after)
{
    if (close_after || !c->keep_alive)
        c->close_after_write = true;
    if (c->close_after_write) {
        c->state = BENCH_UP_ST_DRAINING;
        if (evbuffer_get_length(c->out) == 0)
            c->closing = true;
        return;
    }
    conn_answer_done(c);
}

void
bench_up_send_simple(struct bench_up_conn *c, unsigned status, const char *ctype, const char *extra,
                     const char *body, size_t blen)
{
    struct bench_up_thread *t = c->t;
    struct iovec iov[2];

    gw_buf_reset(&t->frame);
    (void)gw_buf_printf(&t->frame,
                        "HTTP/1.1 %u %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s%s\r\n",
                        status, reason(status), ctype, blen, extra ? extra : "",
                        c->keep_alive ? "" : "Connection: close\r\n");
    iov[0] = (struct iovec){t->frame.data, t->frame.len};
    iov[1] = (struct iovec){(void *)(uintptr_t)body, blen};
    conn_writev(c, iov, 2);
    conn_drain_then(c, false);
}

void
bench_up_send_chunk(struct bench_up_conn *c, const char *pre, const struct gw_buf *body,
                    const char *post, bool last)
{
    struct bench_up_thread *t = c->t;
    size_t npre = pre ? strlen(pre) : 0, npost = post ? strlen(post) : 0;
    size_t n = npre + (body ? body->len : 0) + npost;

    gw_buf_reset(&t->frame);
    if (n > 0) {
        (void)gw_buf_printf(&t->frame, "%zx\r\n", n);
        (void)gw_buf_append(&t->frame, pre, npre);
        if (body)
            (void)gw_buf_append(&t->frame, body->data, body->len);
        (void)gw_buf_append(&t->frame, post, npost);
        (void)gw_buf_append_str(&t->frame, GW_STR_LIT("\r\n"));
    }
    if (last)
        (void)gw_buf_append_str(&t->frame, GW_STR_LIT("0\r\n\r\n"));
    bench_up_write(c, t->frame.data, t->frame.len);
    c->events++;
}

void
bench_up_send_event(struct bench_up_conn *c, const struct gw_buf *ev, bool last)
{
    bench_up_send_chunk(c, "data: ", ev, "\n\n", last);
}

void
bench_up_send_named_event(struct bench_up_conn *c, const char *name, const struct gw_buf *ev,
                          bool last)
{
    char pre[96];

    snprintf(pre, sizeof(pre), "event: %s\ndata: ", name);
    bench_up_send_chunk(c, pre, ev, "\n\n", last);
}

/* ---- answers: the server's half ----
 * When and how much; c->shape's templates render the bytes. */

static void
send_completion(struct bench_up_conn *c)
{
    struct bench_up_thread *t = c->t;
    struct iovec iov[2];
    bool half = c->p.fault == BENCH_UP_FAULT_DROP_MID;

    c->shape->render_answer(c, &t->body);
    gw_buf_reset(&t->frame);
    (void)gw_buf_printf(&t->frame,
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        "Content-Length: %zu\r\n%s\r\n",
                        t->body.len, c->keep_alive ? "" : "Connection: close\r\n");
    iov[0] = (struct iovec){t->frame.data, t->frame.len};
    iov[1] = (struct iovec){t->body.data, half ? t->body.len / 2 : t->body.len};
    conn_writev(c, iov, 2);
    conn_drain_then(c, half);
}

/* The 200 headers of a chunked stream of <ctype>. */
static void
send_stream_head(struct bench_up_conn *c, const char *ctype)
{
    struct bench_up_thread *t = c->t;

    gw_buf_reset(&t->frame);
    (void)gw_buf_printf(&t->frame,
                        "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nCache-Control: no-cache\r\n"
                        "Transfer-Encoding: chunked\r\n%s\r\n",
                        ctype, c->keep_alive ? "" : "Connection: close\r\n");
    bench_up_write(c, t->frame.data, t->frame.len);
}

static void
send_stream_start(struct bench_up_conn *c)
{
    send_stream_head(c, c->shape->stream_ctype ? c->shape->stream_ctype(c) : "text/event-stream");
    stream_mark(c, true);
    c->events = 0;
    count(&st.streams_started);
    c->shape->stream_open(c);
}

static void
send_stream_end(struct bench_up_conn *c)
{
    c->shape->stream_close(c);
    if (c->closing)
        return;
    stream_mark(c, false);
    count(&st.streams_completed);
    conn_drain_then(c, false);
}

/* --fault error-mid: the shape's in-stream error, then the end of the body; the
 * connection stays open. The stream counts as neither completed nor aborted. */
static void
send_stream_error(struct bench_up_conn *c)
{
    c->shape->stream_error(c);
    if (c->closing)
        return;
    stream_mark(c, false); /* we end it, not the peer */
    conn_drain_then(c, false);
}

/* --fault garbage-body: a 200 that claims JSON and is not (any route, streamed or
 * not: a streamed request thus gets no event stream at all). */
static void
send_garbage_body(struct bench_up_conn *c)
{
    static const char body[] = BENCH_UP_GARBAGE;

    bench_up_send_simple(c, 200, "application/json", NULL, body, sizeof(body) - 1);
}

/* --fault garbage-sse: after --drop-after paced deltas, one event whose data is not
 * JSON, then the end of the body; the connection stays open. The stream counts as
 * neither completed nor aborted. */
static void
send_stream_garbage(struct bench_up_conn *c)
{
    c->shape->stream_garbage(c);
    if (c->closing)
        return;
    stream_mark(c, false); /* we end it, not the peer */
    conn_drain_then(c, false);
}

/* --fault garbage-lines: the 200 headers of an event stream, then lines that are no
 * SSE field a client reads (no data:, no event:) and the end of the body. */
static void
send_garbage_lines(struct bench_up_conn *c)
{
    static const char lines[] = BENCH_UP_GARBAGE "\nupstream error\n\n";
    static const struct gw_buf ev = {(char *)(uintptr_t)lines, sizeof(lines) - 1, 0};

    send_stream_head(c, "text/event-stream");
    bench_up_send_chunk(c, NULL, &ev, NULL, true);
    count(&st.streams_started);
    if (c->closing)
        return;
    conn_drain_then(c, false);
}

static void
arm_timer_us(struct bench_up_conn *c, uint64_t us)
{
    struct timeval tv = {(time_t)(us / 1000000), (suseconds_t)(us % 1000000)};

    evtimer_add(&c->tev, &tv);
}

/* Paced delta <k> (0-based) is due ttft + k * interval after the start, so the pace
 * does not drift with timer lateness. */
static uint64_t
delta_due_us(const struct bench_up_conn *c, uint64_t k)
{
    if (c->p.pace_n)
        return c->t0_us + (c->p.ttft_ms + pace_offset_ms(&c->p, k)) * 1000u;
    return c->t0_us + (c->p.ttft_ms + k * c->p.interval_ms) * 1000u;
}

/* Sends the paced deltas that are due; arms the timer for the next one. */
static void
stream_step(struct bench_up_conn *c)
{
    for (;;) {
        uint64_t now, due;

        if (c->p.fault == BENCH_UP_FAULT_DROP_MID && c->sent >= c->p.drop_after) {
            stream_mark(c, false); /* we end it, not the peer */
            conn_drain_then(c, true);
            return;
        }
        if (c->p.fault == BENCH_UP_FAULT_ERROR_MID && c->sent >= c->p.drop_after) {
            send_stream_error(c);
            return;
        }
        if (c->p.fault == BENCH_UP_FAULT_GARBAGE_SSE && c->sent >= c->p.drop_after) {
            send_stream_garbage(c);
            return;
        }
        if (c->sent >= bench_up_steps(c)) {
            send_stream_end(c);
            return;
        }
        due = delta_due_us(c, c->sent);
        now = bench_now_us();
        if (due > now) {
            arm_timer_us(c, due - now);
            return;
        }
        c->shape->stream_delta(c);
        c->sent++;
        if (c->closing)
            return;
    }
}

static void
record_last(struct bench_up_conn *c)
{
    struct bench_up_thread *t = c->t;
    struct gw_buf tmp;
    const char *m = http_method_str((enum http_method)c->parser.method);

    gw_buf_reset(&t->last);
    (void)gw_buf_printf(&t->last, "{\"method\":\"%s\",\"path\":", m);
    (void)gw_buf_append_json_str(&t->last, (struct gw_str){c->url.data, c->url.len});
    (void)gw_buf_append_str(&t->last, GW_STR_LIT(",\"headers\":{"));
    (void)gw_buf_append(&t->last, c->hjson.data, c->hjson.len);
    (void)gw_buf_append_str(&t->last, GW_STR_LIT("},\"body\":"));
    (void)gw_buf_append_json_str(&t->last, (struct gw_str){c->body.data, c->body.len});
    (void)gw_buf_append(&t->last, "}", 1);
    pthread_mutex_lock(&last_mu);
    tmp = last_json;
    last_json = t->last;
    t->last = tmp;
    pthread_mutex_unlock(&last_mu);
}

/* Answers the status fault: --status with --error-body (as given) or, without
 * --error-body, the route's own error body when its shape has one. */
static void
send_status_fault(struct bench_up_conn *c)
{
    struct bench_up_thread *t = c->t;
    char extra[256] = "";

    if (c->p.has_retry_after)
        snprintf(extra, sizeof(extra), "Retry-After: %llu\r\n",
                 (unsigned long long)c->p.retry_after);
    if (c->shape->error_headers != NULL)
        snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra), "%s",
                 c->shape->error_headers((unsigned)c->p.status));
    if (c->shape->error_body != NULL && !bench_up_g.error_body_set) {
        c->shape->error_body(&t->body, (unsigned)c->p.status);
        bench_up_send_simple(c, (unsigned)c->p.status, "application/json", extra, t->body.data,
                             t->body.len);
        return;
    }
    bench_up_send_simple(c, (unsigned)c->p.status, "application/json", extra,
                         bench_up_g.error_body.data, bench_up_g.error_body.len);
}

/* What every API request does first: its number, the estimate of its prompt, the
 * scan of its body, the /_bench/last record, then the shape's checks. true when
 * the shape answered a refusal. */
static bool
start_request(struct bench_up_conn *c)
{
    c->id = atomic_fetch_add_explicit(&st.requests, 1, memory_order_relaxed) + 1;
    c->created = (uint64_t)time(NULL);
    c->prompt_tokens = (c->body.len + 3) / 4;
    c->sent = 0;
    c->events = 0;
    c->t0_us = bench_now_us();
    scan_request(c, c->body.data ? c->body.data : "", c->body.len);
    record_last(c);
    return c->shape->prepare != NULL && c->shape->prepare(c);
}

/* Answers a model request of any shape. */
static void
answer_model(struct bench_up_conn *c)
{
    uint64_t wait, steps;

    if (start_request(c))
        return;
    if (c->p.pace_n)
        c->p.chunks = pace_total(&c->p);
    if (c->p.chunks > UP_MAX_CHUNKS)
        c->p.chunks = UP_MAX_CHUNKS;
    if (!c->shape->reasoning)
        c->p.reasoning = 0;
    plan_answer(c);
    switch (c->p.fault) {
    case BENCH_UP_FAULT_STATUS: send_status_fault(c); return;
    case BENCH_UP_FAULT_HANG_HEADERS: c->state = BENCH_UP_ST_HANG; return;
    case BENCH_UP_FAULT_DROP_BEFORE:
    case BENCH_UP_FAULT_GOAWAY: c->closing = true; return;
    case BENCH_UP_FAULT_HANG_CONTENT:
        c->state = BENCH_UP_ST_HANG;
        if (c->stream)
            send_stream_start(c);
        return;
    case BENCH_UP_FAULT_ERROR_MID:
        if (!c->stream) {
            send_status_fault(c); /* no stream to break: the status fault instead */
            return;
        }
        break;
    case BENCH_UP_FAULT_GARBAGE_BODY: send_garbage_body(c); return;
    case BENCH_UP_FAULT_GARBAGE_SSE:
    case BENCH_UP_FAULT_GARBAGE_LINES:
        if (!c->stream) {
            send_garbage_body(c); /* no stream to spoil: the garbage body instead */
            return;
        }
        if (c->p.fault == BENCH_UP_FAULT_GARBAGE_LINES) {
            send_garbage_lines(c);
            return;
        }
        break;
    case BENCH_UP_FAULT_NONE:
    case BENCH_UP_FAULT_DROP_MID: break;
    }
    if (c->stream) {
        c->state = BENCH_UP_ST_STREAM;
        send_stream_start(c);
        if (!c->closing)
            stream_step(c);
        return;
    }
    steps = bench_up_steps(c);
    if (c->p.pace_n)
        wait = c->p.ttft_ms + (steps > 0 ? pace_offset_ms(&c->p, steps - 1) : 0);
    else
        wait = c->p.ttft_ms + (steps > 1 ? (steps - 1) * c->p.interval_ms : 0);
    if (wait > 0) {
        c->state = BENCH_UP_ST_WAIT;
        arm_timer_us(c, wait * 1000u);
        return;
    }
    send_completion(c);
}

/* A token-counting request (Messages count_tokens, Gemini countTokens): the count of
 * P = ceil(body bytes / 4), the same estimate as a model request's prompt, after the
 * shape's checks; of the faults only status (and error-mid, answered like it) applies. */
static void
answer_count(struct bench_up_conn *c)
{
    struct bench_up_thread *t = c->t;

    if (start_request(c))
        return;
    if (c->p.fault == BENCH_UP_FAULT_STATUS || c->p.fault == BENCH_UP_FAULT_ERROR_MID) {
        send_status_fault(c);
        return;
    }
    c->shape->count_answer(c, &t->body);
    bench_up_send_simple(c, 200, "application/json", NULL, t->body.data, t->body.len);
}

/* The model listing (GET .../v1/models: OpenAI and Anthropic; .../v1beta/models: Gemini): recorded
 * and counted like the other API requests; of the faults only status (and error-mid). */
static void
answer_models(struct bench_up_conn *c)
{
    struct bench_up_thread *t = c->t;

    c->id = atomic_fetch_add_explicit(&st.requests, 1, memory_order_relaxed) + 1;
    atomic_fetch_add_explicit(&st.models, 1, memory_order_relaxed);
    record_last(c);
    if (c->p.fault == BENCH_UP_FAULT_STATUS || c->p.fault == BENCH_UP_FAULT_ERROR_MID) {
        send_status_fault(c);
        return;
    }
    c->shape->models_answer(c, &t->body);
    bench_up_send_simple(c, 200, "application/json", NULL, t->body.data, t->body.len);
}

static void
answer_stats(struct bench_up_conn *c)
{
    char b[512];
    struct gw_buf *out = &c->t->body;
    size_t i;
    int n = snprintf(b, sizeof(b),
                     "{\"requests\":%llu,\"active_connections\":%llu,\"connections_total\":%llu,"
                     "\"connections_closed_by_peer\":%llu,\"streams_started\":%llu,"
                     "\"streams_completed\":%llu,\"streams_aborted\":%llu,"
                     "\"streams_open\":%llu,\"streams_open_max\":%llu,\"models\":%llu,"
                     "\"aws_auth_refused\":%llu,\"keys\":{",
                     (unsigned long long)load_count(&st.requests),
                     (unsigned long long)load_count(&st.active),
                     (unsigned long long)load_count(&st.conns_total),
                     (unsigned long long)load_count(&st.closed_by_peer),
                     (unsigned long long)load_count(&st.streams_started),
                     (unsigned long long)load_count(&st.streams_completed),
                     (unsigned long long)load_count(&st.streams_aborted),
                     (unsigned long long)load_count(&st.streams_open),
                     (unsigned long long)load_count(&st.streams_open_max),
                     (unsigned long long)load_count(&st.models),
                     (unsigned long long)load_count(&st.auth_refused));

    gw_buf_reset(out);
    (void)gw_buf_append(out, b, (size_t)n);
    pthread_mutex_lock(&keys_mu);
    for (i = 0; i < BENCH_UP_KEYS && keys[i].key[0]; i++) {
        if (i)
            (void)gw_buf_append(out, ",", 1);
        (void)gw_buf_append_json_str(out, gw_str_c(keys[i].key));
        n = snprintf(b, sizeof(b), ":%llu", (unsigned long long)keys[i].n);
        (void)gw_buf_append(out, b, (size_t)n);
    }
    pthread_mutex_unlock(&keys_mu);
    (void)gw_buf_append(out, "}", 1);
    bench_up_h2_stats(out);
    bench_up_tls_stats(out);
    (void)gw_buf_append(out, "}", 1);
    bench_up_send_simple(c, 200, "application/json", NULL, out->data, out->len);
}

static void
answer_last(struct bench_up_conn *c)
{
    struct bench_up_thread *t = c->t;

    gw_buf_reset(&t->body);
    pthread_mutex_lock(&last_mu);
    if (last_json.len > 0)
        (void)gw_buf_append(&t->body, last_json.data, last_json.len);
    pthread_mutex_unlock(&last_mu);
    if (t->body.len == 0)
        (void)gw_buf_append_str(&t->body, GW_STR_LIT("{}"));
    bench_up_send_simple(c, 200, "application/json", NULL, t->body.data, t->body.len);
}

/* Whether the path <u>/<n> ends with <suffix>. */
static bool
path_ends_with(const char *u, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);

    return n >= k && memcmp(u + n - k, suffix, k) == 0;
}

/* Whether the query of <url> (after '?') has the parameter <param> ("alt=sse"). */
static bool
query_has(const struct gw_buf *url, const char *param)
{
    const char *u = url->data ? url->data : "", *q = strchr(u, '?');
    size_t k = strlen(param);

    while (q != NULL) {
        q++;
        if (strncmp(q, param, k) == 0 && (q[k] == '\0' || q[k] == '&'))
            return true;
        q = strchr(q, '&');
    }
    return false;
}

/* A Gemini method path: <prefix>/v1beta/models/{model}:{method}. Sets c's model place
 * in the URL and returns the method (NULL when the path is not one). */
static const char *
gemini_method(struct bench_up_conn *c, const char *u, size_t n)
{
    static const char mark[] = "/v1beta/models/";
    const char *m = NULL, *colon;

    for (const char *p = u; (p = memmem(p, n - (size_t)(p - u), mark, sizeof(mark) - 1)) != NULL;
         p++)
        m = p + sizeof(mark) - 1; /* the last one */
    if (m == NULL || (colon = memrchr(m, ':', n - (size_t)(m - u))) == NULL || colon == m ||
        memchr(m, '/', (size_t)(colon - m)) != NULL)
        return NULL;
    c->path_model_off = (size_t)(m - u);
    c->path_model_len = (size_t)(colon - m);
    return colon + 1;
}

static void
dispatch(struct bench_up_conn *c)
{
    static const char nf[] = "{\"error\":{\"message\":\"not found\",\"type\":\"not_found\"}}";
    const char *u = c->url.data ? c->url.data : "", *gm;
    size_t n = strcspn(u, "?"), mlen;
    enum up_route r = UP_ROUTE_NONE;
    unsigned m = c->parser.method;

    c->counting = false;
#define PATH_IS(s) (n == sizeof(s) - 1 && memcmp(u, s, n) == 0)
    if (m == HTTP_POST && (PATH_IS("/v1/chat/completions") || PATH_IS("/chat/completions"))) {
        c->shape = &bench_up_chat;
        r = UP_ROUTE_ANSWER;
    } else if (m == HTTP_POST && (PATH_IS("/v1/messages") || PATH_IS("/messages"))) {
        c->shape = &bench_up_messages;
        r = UP_ROUTE_ANSWER;
    } else if (m == HTTP_POST &&
               (PATH_IS("/v1/messages/count_tokens") || PATH_IS("/messages/count_tokens"))) {
        c->shape = &bench_up_messages;
        r = UP_ROUTE_COUNT;
    } else if (m == HTTP_POST && (path_ends_with(u, n, "/v1/responses") || PATH_IS("/responses"))) {
        c->shape = &bench_up_responses;
        r = UP_ROUTE_ANSWER;
    } else if (m == HTTP_POST && (gm = gemini_method(c, u, n)) != NULL) {
        mlen = n - (size_t)(gm - u);
        c->shape = &bench_up_gemini;
        c->gemini_stream = mlen == 21 && memcmp(gm, "streamGenerateContent", 21) == 0;
        c->gemini_sse = query_has(&c->url, "alt=sse");
        if (c->gemini_stream || (mlen == 15 && memcmp(gm, "generateContent", 15) == 0))
            r = UP_ROUTE_ANSWER;
        else if (mlen == 11 && memcmp(gm, "countTokens", 11) == 0)
            r = UP_ROUTE_COUNT;
    } else if (m == HTTP_POST && bench_up_bedrock_route(c, u, n)) {
        c->shape = &bench_up_bedrock;
        r = UP_ROUTE_ANSWER;
    } else if (m == HTTP_GET && (path_ends_with(u, n, "/v1/models") || PATH_IS("/models"))) {
        c->shape = &bench_up_chat; /* its listing reads as OpenAI's and as Anthropic's */
        r = UP_ROUTE_MODELS;
    } else if (m == HTTP_GET && path_ends_with(u, n, "/v1beta/models")) {
        c->shape = &bench_up_gemini;
        r = UP_ROUTE_MODELS;
    } else if (m == HTTP_GET && PATH_IS("/_bench/stats")) {
        r = UP_ROUTE_STATS;
    } else if (m == HTTP_GET && PATH_IS("/_bench/last")) {
        r = UP_ROUTE_LAST;
    }
#undef PATH_IS
    switch (r) {
    case UP_ROUTE_ANSWER: answer_model(c); break;
    case UP_ROUTE_COUNT:
        c->counting = true;
        answer_count(c);
        break;
    case UP_ROUTE_MODELS: answer_models(c); break;
    case UP_ROUTE_STATS: answer_stats(c); break;
    case UP_ROUTE_LAST: answer_last(c); break;
    case UP_ROUTE_NONE:
        bench_up_send_simple(c, 404, "application/json", NULL, nf, sizeof(nf) - 1);
        break;
    }
}

/* ---- http_parser callbacks ---- */

static int
on_message_begin(http_parser *p)
{
    struct bench_up_conn *c = p->data;

    gw_buf_reset(&c->url);
    gw_buf_reset(&c->hname);
    gw_buf_reset(&c->hval);
    gw_buf_reset(&c->hjson);
    gw_buf_reset(&c->hraw);
    gw_buf_reset(&c->body);
    c->in_value = false;
    c->has_version = false;
    c->cred[0] = '\0';
    c->p = bench_up_g.def;
    return 0;
}

static int
on_url(http_parser *p, const char *at, size_t n)
{
    struct bench_up_conn *c = p->data;

    return gw_buf_append(&c->url, at, n) == GW_OK ? 0 : -1;
}

static void
apply_override(struct bench_up_conn *c, const char *name, const char *v, size_t vl)
{
    struct bench_up_params *q = &c->p;
    uint64_t x;

    if (strcmp(name, "fault") == 0) {
        (void)parse_fault(v, vl, &q->fault);
        return;
    }
    if (strcmp(name, "pace") == 0) {
        (void)parse_pace(v, vl, q);
        return;
    }
    if (strcmp(name, "tool-call") == 0) {
        (void)parse_tool_names(v, vl, q);
        return;
    }
    if (strcmp(name, "fault-key") == 0) {
        if (vl < sizeof(q->fault_key)) {
            memcpy(q->fault_key, v, vl);
            q->fault_key[vl] = '\0';
        }
        return;
    }
    if (!bench_parse_u64n(v, vl, UINT32_MAX, &x))
        return;
    if (strcmp(name, "ttft-ms") == 0)
        q->ttft_ms = x;
    else if (strcmp(name, "chunks") == 0)
        q->chunks = x;
    else if (strcmp(name, "interval-ms") == 0)
        q->interval_ms = x;
    else if (strcmp(name, "status") == 0)
        q->status = x;
    else if (strcmp(name, "retry-after") == 0) {
        q->retry_after = x;
        q->has_retry_after = true;
    } else if (strcmp(name, "drop-after") == 0)
        q->drop_after = x;
    else if (strcmp(name, "cached") == 0)
        q->cached = x;
    else if (strcmp(name, "cache-write") == 0)
        q->cache_write = x;
    else if (strcmp(name, "reasoning") == 0 && x <= UP_MAX_CHUNKS)
        q->reasoning = x;
}

/* When <v>/<n> is a SigV4 Authorization ("AWS4-HMAC-SHA256 Credential=ID/..."), copies
 * ID into <cred> (sizeof bench_up_conn.cred) and returns true. */
static bool
aws_key_id(const char *v, size_t n, char *cred)
{
    static const char alg[] = "AWS4-HMAC-SHA256 ";
    const char *id, *end;

    if (v == NULL || n < sizeof(alg) - 1 || memcmp(v, alg, sizeof(alg) - 1) != 0 ||
        (id = memmem(v, n, "Credential=", 11)) == NULL)
        return false;
    id += 11;
    end = memchr(id, '/', n - (size_t)(id - v));
    if (end == NULL || (size_t)(end - id) >= sizeof(((struct bench_up_conn *)0)->cred))
        return false;
    memcpy(cred, id, (size_t)(end - id));
    cred[end - id] = '\0';
    return true;
}

static void
finish_header(struct bench_up_conn *c)
{
    char *nm;

    if (gw_buf_reserve(&c->hname, 1) != GW_OK)
        return;
    nm = c->hname.data;
    for (size_t i = 0; i < c->hname.len; i++)
        if (nm[i] >= 'A' && nm[i] <= 'Z')
            nm[i] = (char)(nm[i] + 32);
    nm[c->hname.len] = '\0';
    if (c->hjson.len > 0)
        (void)gw_buf_append(&c->hjson, ",", 1);
    (void)gw_buf_append_json_str(&c->hjson, (struct gw_str){nm, c->hname.len});
    (void)gw_buf_append(&c->hjson, ":", 1);
    (void)gw_buf_append_json_str(&c->hjson, (struct gw_str){c->hval.data, c->hval.len});
    (void)gw_buf_append(&c->hraw, nm, c->hname.len + 1);
    (void)gw_buf_append(&c->hraw, c->hval.data ? c->hval.data : "", c->hval.len);
    (void)gw_buf_append(&c->hraw, "", 1);
    if (c->hname.len == 17 && memcmp(nm, "anthropic-version", 17) == 0)
        c->has_version = true;
    if (c->hname.len > 8 && memcmp(nm, "x-bench-", 8) == 0)
        apply_override(c, nm + 8, c->hval.data ? c->hval.data : "", c->hval.len);
    /* SigV4 (the Bedrock route): the credential is the access key id */
    if (strcmp(nm, "authorization") == 0 && aws_key_id(c->hval.data, c->hval.len, c->cred)) {
        gw_buf_reset(&c->hname);
        gw_buf_reset(&c->hval);
        c->in_value = false;
        return;
    }
    if ((strcmp(nm, "authorization") == 0 || strcmp(nm, "x-api-key") == 0 ||
         strcmp(nm, "x-goog-api-key") == 0) &&
        c->hval.len < sizeof(c->cred)) {
        size_t skip = c->hval.len > 7 && strncasecmp(c->hval.data, "Bearer ", 7) == 0 ? 7 : 0;

        memcpy(c->cred, c->hval.data + skip, c->hval.len - skip);
        c->cred[c->hval.len - skip] = '\0';
    }
    gw_buf_reset(&c->hname);
    gw_buf_reset(&c->hval);
    c->in_value = false;
}

static int
on_header_field(http_parser *p, const char *at, size_t n)
{
    struct bench_up_conn *c = p->data;

    if (c->in_value)
        finish_header(c);
    return gw_buf_append(&c->hname, at, n) == GW_OK ? 0 : -1;
}

static int
on_header_value(http_parser *p, const char *at, size_t n)
{
    struct bench_up_conn *c = p->data;

    c->in_value = true;
    return gw_buf_append(&c->hval, at, n) == GW_OK ? 0 : -1;
}

static int
on_headers_complete(http_parser *p)
{
    struct bench_up_conn *c = p->data;

    if (c->in_value)
        finish_header(c);
    count_key(c->cred);
    if (c->p.fault_key[0] && !key_listed(c->p.fault_key, c->cred))
        c->p.fault = BENCH_UP_FAULT_NONE; /* the fault is for other credentials */
    return 0;
}

static int
on_body(http_parser *p, const char *at, size_t n)
{
    struct bench_up_conn *c = p->data;

    if (c->body.len + n > UP_MAX_INPUT)
        return -1;
    return gw_buf_append(&c->body, at, n) == GW_OK ? 0 : -1;
}

static int
on_message_complete(http_parser *p)
{
    struct bench_up_conn *c = p->data;

    c->msg_done = true;
    c->keep_alive = http_should_keep_alive(p) != 0;
    http_parser_pause(p, 1); /* the next request waits until this one is answered */
    return 0;
}

static const http_parser_settings parser_settings = {
    .on_message_begin = on_message_begin,
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

/* ---- connection lifecycle ---- */

static void
conn_free(struct bench_up_conn *c)
{
    if (c->by_peer) {
        count(&st.closed_by_peer);
        if (c->stream_active)
            count(&st.streams_aborted);
    }
    stream_mark(c, false);
    event_del(&c->rev);
    event_del(&c->wev);
    event_del(&c->tev);
    if (c->fd >= 0)
        close(c->fd);
    evbuffer_free(c->out);
    gw_buf_fini(&c->in);
    gw_buf_fini(&c->url);
    gw_buf_fini(&c->hname);
    gw_buf_fini(&c->hval);
    gw_buf_fini(&c->hjson);
    gw_buf_fini(&c->hraw);
    gw_buf_fini(&c->body);
    gw_buf_fini(&c->model);
    gw_buf_fini(&c->answer);
    gw_free(c);
    atomic_fetch_sub_explicit(&st.active, 1, memory_order_relaxed);
}

/* Parses buffered input while no answer is pending. */
static void
conn_parse(struct bench_up_conn *c)
{
    while (!c->busy && !c->closing && c->in.len > 0) {
        size_t used = http_parser_execute(&c->parser, &parser_settings, c->in.data, c->in.len);

        if (c->msg_done) {
            c->msg_done = false;
            http_parser_pause(&c->parser, 0);
            gw_buf_consume(&c->in, used);
            c->busy = true;
            dispatch(c);
            continue;
        }
        if (HTTP_PARSER_ERRNO(&c->parser) != HPE_OK) {
            static const char bad[] = "{\"error\":{\"message\":\"bad request\"}}";

            c->busy = true;
            c->keep_alive = false;
            bench_up_send_simple(c, 400, "application/json", NULL, bad, sizeof(bad) - 1);
            return;
        }
        gw_buf_consume(&c->in, used);
    }
}

static void
conn_answer_done(struct bench_up_conn *c)
{
    c->busy = false;
    c->state = BENCH_UP_ST_IDLE;
    /* pipelined bytes may be waiting: let the read handler parse them next turn */
    if (c->in.len > 0)
        event_active(&c->rev, EV_READ, 0);
}

static void
on_read(evutil_socket_t fd, short what, void *arg)
{
    struct bench_up_conn *c = arg;
    ssize_t n;

    (void)what;
    if (c->in.len > UP_MAX_INPUT) {
        c->closing = true;
        goto out;
    }
    if (gw_buf_reserve(&c->in, UP_READ_SIZE) != GW_OK) {
        c->closing = true;
        goto out;
    }
    n = recv(fd, c->in.data + c->in.len, UP_READ_SIZE, 0);
    if (n == 0) {
        mark_peer_gone(c);
        goto out;
    }
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            mark_peer_gone(c);
        else
            conn_parse(c); /* woken by event_active for pipelined input */
        goto out;
    }
    c->in.len += (size_t)n;
    c->in.data[c->in.len] = '\0';
    if (!c->sniffed && bench_up_h2_may_be_preface(c->in.data, c->in.len))
        goto out;      /* too few bytes to tell yet */
    if (!c->sniffed) { /* HTTP/2 with prior knowledge goes to bench/upstream_h2.c */
        c->sniffed = true;
        if (bench_up_h2_is_preface(c->in.data, c->in.len) &&
            bench_up_h2_take(c->t, fd, c->in.data, c->in.len)) {
            c->fd = -1;
            c->closing = true;
            goto out;
        }
    }
    conn_parse(c);
out:
    if (c->closing)
        conn_free(c);
}

static void
on_write(evutil_socket_t fd, short what, void *arg)
{
    struct bench_up_conn *c = arg;

    (void)what;
    if (evbuffer_write(c->out, fd) < 0 && errno != EAGAIN && errno != EINTR)
        mark_peer_gone(c);
    if (!c->closing && evbuffer_get_length(c->out) == 0) {
        event_del(&c->wev);
        c->wev_added = false;
        if (c->close_after_write)
            c->closing = true;
    }
    if (c->closing)
        conn_free(c);
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct bench_up_conn *c = arg;

    (void)fd;
    (void)what;
    if (c->state == BENCH_UP_ST_WAIT)
        send_completion(c);
    else if (c->state == BENCH_UP_ST_STREAM)
        stream_step(c);
    if (c->closing)
        conn_free(c);
}

bool
bench_up_conn_open(struct bench_up_thread *t, int fd, bool counted)
{
    struct bench_up_conn *c = gw_calloc(1, sizeof(*c));

    if (c == NULL || (c->out = evbuffer_new()) == NULL) {
        gw_free(c);
        close(fd);
        return false;
    }
    c->t = t;
    c->fd = fd;
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    event_assign(&c->rev, t->base, fd, EV_READ | EV_PERSIST, on_read, c);
    event_assign(&c->wev, t->base, fd, EV_WRITE | EV_PERSIST, on_write, c);
    evtimer_assign(&c->tev, t->base, on_timer, c);
    event_add(&c->rev, NULL);
    if (counted)
        count(&st.conns_total);
    else
        c->sniffed = true; /* our own socketpair: HTTP/1.1 */
    count(&st.active);
    return true;
}

static void
on_accept(evutil_socket_t lfd, short what, void *arg)
{
    struct bench_up_thread *t = arg;

    (void)what;
    for (int i = 0; i < 64; i++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd < 0)
            return;
        (void)bench_sock_prepare(fd, true);
        if (bench_up_tls_on) { /* bench/upstream_tls.c relays it to bench_up_conn_open */
            count(&st.conns_total);
            bench_up_tls_take(t, fd);
            continue;
        }
        (void)bench_up_conn_open(t, fd, true);
    }
}

/* ---- startup ---- */

static int
listen_socket(struct sockaddr_in *sa)
{
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
        bind(fd, (struct sockaddr *)sa, sizeof(*sa)) < 0 || listen(fd, 4096) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A base whose timers use timerfd (microseconds), not epoll's milliseconds,
 * so that paced chunks leave on time. */
static struct event_base *
precise_base(void)
{
    struct event_config *cfg = event_config_new();
    struct event_base *b;

    if (cfg == NULL)
        return NULL;
    event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
    b = event_base_new_with_config(cfg);
    event_config_free(cfg);
    return b;
}

/* Binds <sa> without SO_REUSEPORT, learns the port, closes. false with errno set. */
static bool
probe_port(struct sockaddr_in *sa)
{
    socklen_t sl = sizeof(*sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    bool ok;

    if (fd < 0)
        return false;
    /* SO_REUSEADDR: sockets in TIME_WAIT do not count, a listener still does */
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    ok = bind(fd, (struct sockaddr *)sa, sizeof(*sa)) == 0 &&
         getsockname(fd, (struct sockaddr *)sa, &sl) == 0;
    close(fd);
    return ok;
}

static void *
thread_main(void *arg)
{
    struct bench_up_thread *t = arg;

    event_base_dispatch(t->base);
    return NULL;
}

static void
usage(void)
{
    fprintf(stderr,
            "usage: gwbench upstream [--listen HOST:PORT] [--threads N] [--ttft-ms N]\n"
            "         [--chunks N] [--interval-ms N] [--text STR] [--cached N]\n"
            "         [--cache-write N] [--reasoning N]\n"
            "         [--fault none|status|hang-headers|hang-content|drop-before|drop-mid|\n"
            "                  error-mid|garbage-body|garbage-sse|garbage-lines|goaway]\n"
            "         [--status N] [--retry-after SECS] [--fault-key KEY,..] [--error-body JSON] "
            "[--drop-after N]\n"
            "         [--pace COUNTxMS[,COUNTxMS...]] [--tool-call NAME[,NAME...]]\n"
            "         [--aws-access-key-id ID --aws-secret-access-key SECRET]\n"
            "         [--aws-region REGION] [--aws-session-token TOKEN]\n"
            "         [--h2-max-streams N] [--tls-cert PEM --tls-key PEM]\n"
            "         [--tls-alpn h2,http/1.1|http/1.1|h2] [--no-usage] [--quiet]\n"
            "see docs/gwbench.md\n");
}

static int
parse_flags(int argc, char **argv)
{
    const char *listen_s = "127.0.0.1:9100", *text = "hello ", *v;
    const char *err_body = "{\"error\":{\"message\":\"fake failure\",\"type\":\"server_error\"}}";
    const char *tls_cert = NULL, *tls_key = NULL, *tls_alpn = NULL;
    uint64_t x;

    srv.threads = 1;
    bench_up_g.def.chunks = 5;
    bench_up_g.def.status = 500;
    bench_up_g.def.drop_after = 2;
    for (int i = 1; i < argc; i++) {
        int r;

#define NUM(flag, dst, max)                                                                        \
    if ((r = bench_arg(argc, argv, &i, flag, &v)) != 0) {                                          \
        if (r < 0 || !bench_parse_u64(v, max, &x)) {                                               \
            fprintf(stderr, "gwbench upstream: %s needs a number (0..%llu)\n", flag,               \
                    (unsigned long long)(max));                                                    \
            return 2;                                                                              \
        }                                                                                          \
        dst = x;                                                                                   \
        continue;                                                                                  \
    }
#define STR(flag, dst)                                                                             \
    if ((r = bench_arg(argc, argv, &i, flag, &v)) != 0) {                                          \
        if (r < 0) {                                                                               \
            fprintf(stderr, "gwbench upstream: %s needs a value\n", flag);                         \
            return 2;                                                                              \
        }                                                                                          \
        dst = v;                                                                                   \
        continue;                                                                                  \
    }
        STR("--listen", listen_s)
        STR("--aws-access-key-id", bench_up_g.aws_key_id)
        STR("--aws-secret-access-key", bench_up_g.aws_secret)
        STR("--aws-region", bench_up_g.aws_region)
        STR("--aws-session-token", bench_up_g.aws_token)
        STR("--tls-cert", tls_cert)
        STR("--tls-key", tls_key)
        STR("--tls-alpn", tls_alpn)
        NUM("--threads", srv.threads, UP_MAX_THREADS)
        NUM("--h2-max-streams", bench_up_h2_max_streams, UINT32_MAX)
        NUM("--ttft-ms", bench_up_g.def.ttft_ms, 3600000)
        NUM("--chunks", bench_up_g.def.chunks, UP_MAX_CHUNKS)
        NUM("--interval-ms", bench_up_g.def.interval_ms, 3600000)
        STR("--text", text)
        NUM("--cached", bench_up_g.def.cached, UINT32_MAX)
        NUM("--cache-write", bench_up_g.def.cache_write, UINT32_MAX)
        NUM("--reasoning", bench_up_g.def.reasoning, UP_MAX_CHUNKS)
        NUM("--status", bench_up_g.def.status, 999)
        NUM("--drop-after", bench_up_g.def.drop_after, UP_MAX_CHUNKS)
        if ((r = bench_arg(argc, argv, &i, "--error-body", &v)) != 0) {
            if (r < 0) {
                fprintf(stderr, "gwbench upstream: --error-body needs a value\n");
                return 2;
            }
            err_body = v;
            bench_up_g.error_body_set = true;
            continue;
        }
        if ((r = bench_arg(argc, argv, &i, "--fault-key", &v)) != 0) {
            if (r < 0 || strlen(v) >= sizeof(bench_up_g.def.fault_key)) {
                fprintf(stderr, "gwbench upstream: --fault-key needs KEY[,KEY...] (< 256 bytes)\n");
                return 2;
            }
            snprintf(bench_up_g.def.fault_key, sizeof(bench_up_g.def.fault_key), "%s", v);
            continue;
        }
        if ((r = bench_arg(argc, argv, &i, "--retry-after", &v)) != 0) {
            if (r < 0 || !bench_parse_u64(v, UINT32_MAX, &bench_up_g.def.retry_after)) {
                fprintf(stderr, "gwbench upstream: --retry-after needs a number\n");
                return 2;
            }
            bench_up_g.def.has_retry_after = true;
            continue;
        }
        if ((r = bench_arg(argc, argv, &i, "--pace", &v)) != 0) {
            if (r < 0 || !parse_pace(v, strlen(v), &bench_up_g.def)) {
                fprintf(stderr,
                        "gwbench upstream: --pace wants COUNTxMS[,COUNTxMS...] (counts 1.., "
                        "at most %u segments), got '%s'\n",
                        BENCH_UP_MAX_PACE, r < 0 ? "" : v);
                return 2;
            }
            continue;
        }
        if ((r = bench_arg(argc, argv, &i, "--tool-call", &v)) != 0) {
            if (r < 0 || !parse_tool_names(v, strlen(v), &bench_up_g.def)) {
                fprintf(stderr,
                        "gwbench upstream: --tool-call wants NAME[,NAME...] (1 to %u names of "
                        "1 to %u characters A-Z a-z 0-9 _ -), got '%s'\n",
                        BENCH_UP_MAX_TOOLS, BENCH_UP_TOOL_NAME, r < 0 ? "" : v);
                return 2;
            }
            continue;
        }
        if ((r = bench_arg(argc, argv, &i, "--fault", &v)) != 0) {
            if (r < 0 || !parse_fault(v, strlen(v), &bench_up_g.def.fault)) {
                fprintf(stderr, "gwbench upstream: unknown --fault '%s'\n", r < 0 ? "" : v);
                return 2;
            }
            continue;
        }
#undef NUM
#undef STR
        if (strcmp(argv[i], "--no-usage") == 0) {
            bench_up_g.no_usage = true;
            continue;
        }
        if (strcmp(argv[i], "--quiet") == 0) {
            srv.quiet = true;
            bench_up_g.quiet = true;
            continue;
        }
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage();
            return 2;
        }
        fprintf(stderr, "gwbench upstream: unknown flag '%s'\n", argv[i]);
        usage();
        return 2;
    }
    if (srv.threads == 0)
        srv.threads = 1;
    if ((bench_up_g.aws_key_id == NULL) != (bench_up_g.aws_secret == NULL)) {
        fprintf(stderr, "gwbench upstream: --aws-access-key-id and --aws-secret-access-key "
                        "go together\n");
        return 2;
    }
    if ((tls_cert == NULL) != (tls_key == NULL) || (tls_alpn && !tls_cert)) {
        fprintf(stderr, "gwbench upstream: --tls-cert and --tls-key go together "
                        "(and --tls-alpn needs them)\n");
        return 2;
    }
    if (tls_cert && !bench_up_tls_init(tls_cert, tls_key, tls_alpn))
        return 2;
    if (bench_up_g.aws_region == NULL)
        bench_up_g.aws_region = "us-east-1";
    if (bench_up_g.def.status < 100)
        bench_up_g.def.status = 500;
    if (!bench_parse_addr(listen_s, &srv.addr)) {
        fprintf(stderr, "gwbench upstream: --listen wants HOST:PORT, got '%s'\n", listen_s);
        return 2;
    }
    if (bench_up_append_json_inner(&bench_up_g.text, text, strlen(text)) != GW_OK ||
        gw_buf_append(&bench_up_g.error_body, err_body, strlen(err_body)) != GW_OK)
        return 1;
    if (bench_up_g.text.data == NULL)
        (void)gw_buf_reserve(&bench_up_g.text, 1);
    return 0;
}

int
bench_upstream_main(int argc, char **argv)
{
    static struct bench_up_thread threads[UP_MAX_THREADS];
    static pthread_t tids[UP_MAX_THREADS];
    struct sockaddr_in sa;
    char host[32];
    sigset_t sigs;
    int rc, sig;

    if ((rc = parse_flags(argc, argv)) != 0)
        return rc;
    signal(SIGPIPE, SIG_IGN);
    sa = srv.addr;
    /* A plain bind first: it fails when anyone already holds the port (a second
     * SO_REUSEPORT listener would silently share it), and it picks the port when
     * 0 was asked for. The listeners then bind that port with SO_REUSEPORT. */
    if (!probe_port(&sa)) {
        fprintf(stderr, "gwbench upstream: cannot listen on %s:%u: %s\n",
                inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host)), ntohs(sa.sin_port),
                strerror(errno));
        return 1;
    }
    for (unsigned i = 0; i < srv.threads; i++) {
        struct bench_up_thread *t = &threads[i];

        t->lfd = listen_socket(&sa);
        if (t->lfd < 0) {
            fprintf(stderr, "gwbench upstream: cannot listen on %s:%u: %s\n",
                    inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host)), ntohs(sa.sin_port),
                    strerror(errno));
            return 1;
        }
        t->base = precise_base();
        if (t->base == NULL)
            return 1;
        event_assign(&t->accept_ev, t->base, t->lfd, EV_READ | EV_PERSIST, on_accept, t);
        event_add(&t->accept_ev, NULL);
    }
    /* Block the stop signals before the workers start so that only sigwait sees them. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    for (unsigned i = 0; i < srv.threads; i++) {
        if (pthread_create(&tids[i], NULL, thread_main, &threads[i]) != 0) {
            fprintf(stderr, "gwbench upstream: cannot start a thread\n");
            return 1;
        }
    }
    printf("gwbench upstream listening on %s:%u\n",
           inet_ntop(AF_INET, &sa.sin_addr, host, sizeof(host)), ntohs(sa.sin_port));
    fflush(stdout);
    while (sigwait(&sigs, &sig) != 0)
        ;
    fflush(stdout);
    _exit(0);
}
