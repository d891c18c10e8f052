/* SPDX-License-Identifier: MIT
 * bench/load.c - `gwbench load`: an HTTP/1.1 load generator.
 * The request bytes are rendered once at startup and shared read-only. Each
 * worker thread owns an event_base, a slice of the connections and its own
 * histograms and counters; nothing is allocated per request. Closed loop: a
 * connection sends its next request as soon as the previous answer is
 * complete. Open loop (--rate): a per-thread timer releases requests on a
 * fixed schedule to idle connections; requests that find no idle connection
 * wait in a counter (reported as queued_max). Answers are framed by
 * http_parser (content-length, chunked or until close). --api picks the shape
 * of the request: Chat Completions (default), Anthropic Messages, OpenAI
 * Responses or Google Gemini. For streams, small matchers find the content
 * deltas in the body bytes (Chat: "content":"<non-empty>"; the others: a fixed
 * pattern per event, see ld_patterns), the first one giving the time to first
 * content and the next ones the gaps, and the stream's end event (Chat: [DONE];
 * the others: a pattern too), without which a 2xx stream counts as unfinished.
 * Owns:    connections, histograms, counters; freed after the threads joined.
 * Threads: main (flags, progress line, summary) and --threads workers; the only
 *          shared mutable state is the request counter (atomic) and progress
 *          counters (relaxed atomics).
 * See:     bench/load.h, bench/hist.h, docs/gwbench.md
 */
#include "bench/load.h"

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
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "bench/hist.h"
#include "bench/util.h"
#include "core/alloc.h"
#include "core/str.h"

#define LD_MAX_THREADS 64
#define LD_MAX_CONNS 100000
#define LD_RBUF (64u * 1024u)
#define LD_CONNECT_RETRY_MS 10

enum ld_err {
    LD_E_CONNECT,
    LD_E_TIMEOUT,
    LD_E_RESET,
    LD_E_PARSE,
    LD_E_UNFINISHED, /* a 2xx stream complete in HTTP terms but without its end event */
    LD_E_COUNT,
};

static const char *const err_names[LD_E_COUNT] = {"connect", "timeout", "reset", "parse",
                                                  "unfinished"};

/* The request and answer shape (--api). */
enum ld_api { LD_API_CHAT, LD_API_MESSAGES, LD_API_RESPONSES, LD_API_GEMINI, LD_API_COUNT };

static const char *const api_names[LD_API_COUNT] = {"chat", "messages", "responses", "gemini"};

/* What the stream matchers look for in the body bytes of the shapes other than Chat:
 * each <delta> is one content delta, <end> the stream's end. Each pattern's first byte
 * occurs nowhere else in it but as its last (see match_step()), and each can only be
 * seen where the shape puts it: a quote inside a JSON string is escaped, and event:
 * lines carry no quotes. */
struct ld_pattern {
    const char *delta, *end;
    unsigned delta_len, end_len;
};

#define LD_PAT(d, e)                                                                               \
    {                                                                                              \
        d, e, sizeof(d) - 1, sizeof(e) - 1                                                         \
    }
static const struct ld_pattern ld_patterns[LD_API_COUNT] = {
    /* Messages: the type of a content_block_delta event (text, tool input, thinking) */
    [LD_API_MESSAGES] = LD_PAT("\"content_block_delta\"", "\"message_stop\""),
    /* Responses: the end of every ...delta type (output text, function call arguments,
     * reasoning summary); the end is response.completed */
    [LD_API_RESPONSES] = LD_PAT(".delta\"", "\"response.completed\""),
    /* Gemini: one candidates member per chunk; the last chunk has the finishReason */
    [LD_API_GEMINI] = LD_PAT("\"candidates\"", "\"finishReason\""),
};
#undef LD_PAT

/* The Anthropic API version sent with --api messages. */
#define LD_ANTHROPIC_VERSION "2023-06-01"
/* max_tokens of the generated Messages body (the shape requires one). */
#define LD_MESSAGES_MAX_TOKENS 256

/* Settings, written by main before the workers start, then read-only. */
static struct {
    struct sockaddr_in addr;
    char url[512];
    struct gw_buf req; /* the whole request: head and body */
    enum ld_api api;
    bool stream;
    bool json;
    bool quiet;
    unsigned conns;
    unsigned threads;
    double rate;
    uint64_t requests; /* 0 = no limit (with --duration) */
    uint64_t duration_us;
    uint64_t timeout_ms;
    uint64_t warmup; /* answers of each connection left out of the histograms */
    uint64_t start_us;
    uint64_t deadline_us; /* 0 = none */
} g;

/* Shared run state. issued: claimed request numbers (relaxed: a counter whose
 * only reader is the fetch-add itself and the summary after the joins).
 * stop: set once the duration is over (relaxed: a late reader claims at most
 * one more request per connection, which the deadline check also refuses).
 * done/ok_total/threads_done: progress line only. */
static atomic_uint_fast64_t issued;
static atomic_bool stop_flag;
static atomic_uint_fast64_t done_total;
static atomic_uint_fast64_t ok_total;
static atomic_uint threads_done;

struct ld_thread;

enum ld_cstate { LD_C_CLOSED, LD_C_CONNECTING, LD_C_OPEN };

/* One client connection; lives in its thread's array for the whole run. */
struct ld_conn {
    struct ld_thread *t;
    int fd;
    enum ld_cstate state;
    struct event rev, wev, tmo, retry;
    http_parser parser;
    bool wev_added;
    bool rev_added;
    bool has_req; /* a request is claimed and not finished */
    bool msg_done;
    bool got_first; /* a content delta was seen */
    bool got_end;   /* the stream's end event was seen */
    bool keep_alive;
    unsigned status;
    uint64_t answered;  /* answers read on this connection (for --warmup) */
    unsigned match;     /* content-delta matcher state */
    unsigned match_end; /* end-event matcher state */
    size_t wofs;        /* bytes of the request written */
    uint64_t t_send;
    uint64_t t_last;
};

struct ld_thread {
    struct event_base *base;
    pthread_t tid;
    struct ld_conn *conns;
    unsigned nconns;
    struct ld_conn **idle; /* open loop: connections without a request */
    unsigned nidle;
    unsigned active; /* connections with a request */
    const struct timeval *tmo_tv;
    struct event tick;
    double rate;        /* open loop: this thread's requests per second */
    uint64_t scheduled; /* open loop: requests released so far */
    uint64_t quota;     /* open loop: this thread's share of --requests (UINT64_MAX: none) */
    uint64_t pending;   /* open loop: released, waiting for a connection */
    uint64_t pending_max;
    bool ticking;
    struct bench_hist *lat, *ttft, *gap;
    uint64_t completed, ok, chunks;
    uint64_t status_err[1000];
    uint64_t kind_err[LD_E_COUNT];
    char rbuf[LD_RBUF];
};

static void conn_next(struct ld_conn *c);
static void conn_next_later(struct ld_conn *c);
static void on_read(evutil_socket_t fd, short what, void *arg);
static void on_write(evutil_socket_t fd, short what, void *arg);

/* ---- claiming requests ---- */

static bool
claim(void)
{
    uint64_t n;

    if (atomic_load_explicit(&stop_flag, memory_order_relaxed))
        return false;
    if (g.deadline_us && bench_now_us() >= g.deadline_us) {
        atomic_store_explicit(&stop_flag, true, memory_order_relaxed);
        return false;
    }
    n = atomic_fetch_add_explicit(&issued, 1, memory_order_relaxed);
    if (g.requests && n >= g.requests) {
        atomic_fetch_sub_explicit(&issued, 1, memory_order_relaxed);
        atomic_store_explicit(&stop_flag, true, memory_order_relaxed);
        return false;
    }
    return true;
}

static void
thread_check_done(struct ld_thread *t)
{
    if (t->active == 0 && t->pending == 0 && !t->ticking)
        event_base_loopbreak(t->base);
}

/* ---- connection handling ---- */

static void
conn_close(struct ld_conn *c)
{
    if (c->state == LD_C_CLOSED)
        return;
    event_del(&c->rev);
    event_del(&c->wev);
    c->rev_added = c->wev_added = false;
    close(c->fd);
    c->fd = -1;
    c->state = LD_C_CLOSED;
}

/* Ends the current request with <kind> (transport error) or as an answer. */
static void
req_finish(struct ld_conn *c, int kind)
{
    struct ld_thread *t = c->t;
    uint64_t now = bench_now_us();

    event_del(&c->tmo);
    c->has_req = false;
    t->active--;
    atomic_fetch_add_explicit(&done_total, 1, memory_order_relaxed);
    if (kind >= 0) {
        t->kind_err[kind]++;
        conn_close(c);
        return;
    }
    t->completed++;
    if (c->answered++ >= g.warmup)
        bench_hist_add(t->lat, now - c->t_send);
    if (c->status >= 200 && c->status < 300 && g.stream && !c->got_end) {
        t->kind_err[LD_E_UNFINISHED]++; /* answered, but the stream did not end as it should */
    } else if (c->status >= 200 && c->status < 300) {
        t->ok++;
        atomic_fetch_add_explicit(&ok_total, 1, memory_order_relaxed);
    } else {
        t->status_err[c->status < 1000 ? c->status : 999]++;
    }
    if (!c->keep_alive)
        conn_close(c);
}

static void
conn_write_req(struct ld_conn *c)
{
    ssize_t w = send(c->fd, g.req.data + c->wofs, g.req.len - c->wofs, MSG_NOSIGNAL);

    if (w < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            w = 0;
        else {
            req_finish(c, LD_E_RESET);
            conn_next(c);
            return;
        }
    }
    c->wofs += (size_t)w;
    if (c->wofs < g.req.len) {
        if (!c->wev_added) {
            event_add(&c->wev, NULL);
            c->wev_added = true;
        }
    } else if (c->wev_added) {
        event_del(&c->wev);
        c->wev_added = false;
    }
}

static void
conn_send(struct ld_conn *c)
{
    c->wofs = 0;
    c->msg_done = false;
    c->got_first = false;
    c->got_end = false;
    c->status = 0;
    c->match = 0;
    c->match_end = 0;
    c->keep_alive = true;
    if (!c->rev_added) {
        event_add(&c->rev, NULL);
        c->rev_added = true;
    }
    c->t_send = bench_now_us();
    conn_write_req(c);
}

static void
conn_connect(struct ld_conn *c)
{
    struct ld_thread *t = c->t;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        req_finish(c, LD_E_CONNECT);
        conn_next_later(c);
        return;
    }
    (void)bench_sock_prepare(fd, true);
    c->fd = fd;
    c->state = LD_C_CONNECTING;
    event_assign(&c->rev, t->base, fd, EV_READ | EV_PERSIST, on_read, c);
    event_assign(&c->wev, t->base, fd, EV_WRITE | EV_PERSIST, on_write, c);
    if (connect(fd, (struct sockaddr *)&g.addr, sizeof(g.addr)) < 0 && errno != EINPROGRESS) {
        req_finish(c, LD_E_CONNECT);
        conn_next_later(c);
        return;
    }
    event_add(&c->wev, NULL);
    c->wev_added = true;
}

/* Starts a claimed request on <c>: connects first when needed. */
static void
conn_start(struct ld_conn *c)
{
    struct ld_thread *t = c->t;

    c->has_req = true;
    t->active++;
    event_add(&c->tmo, t->tmo_tv); /* covers the connect too */
    if (c->state == LD_C_CLOSED) {
        conn_connect(c);
        return;
    }
    conn_send(c);
}

/* <c> has no request: give it the next one, or park it. */
static void
conn_next(struct ld_conn *c)
{
    struct ld_thread *t = c->t;

    if (c->has_req)
        return;
    if (t->rate > 0) {
        if (t->pending > 0) {
            t->pending--;
            conn_start(c);
        } else {
            t->idle[t->nidle++] = c;
            thread_check_done(t);
        }
        return;
    }
    if (claim())
        conn_start(c);
    else
        thread_check_done(t);
}

/* A connect failure: retry this connection a little later, not in a hot loop. */
static void
conn_next_later(struct ld_conn *c)
{
    struct timeval tv = {0, LD_CONNECT_RETRY_MS * 1000};

    c->t->active++; /* keeps the thread alive until the retry runs */
    evtimer_add(&c->retry, &tv);
}

static void
on_retry(evutil_socket_t fd, short what, void *arg)
{
    struct ld_conn *c = arg;

    (void)fd;
    (void)what;
    c->t->active--;
    conn_next(c);
}

/* ---- answer parsing ---- */

static int
on_headers_complete(http_parser *p)
{
    struct ld_conn *c = p->data;

    c->status = p->status_code;
    return 0;
}

/* One content delta of a stream arrived on <c>: the first gives the time to
 * first content, the next ones a gap each. <now> is read once per recv. */
static void
content_delta(struct ld_conn *c, uint64_t *now)
{
    if (*now == 0)
        *now = bench_now_us();
    c->t->chunks++;
    if (!c->got_first) {
        c->got_first = true;
        if (c->answered >= g.warmup)
            bench_hist_add(c->t->ttft, *now - c->t_send);
    } else if (c->answered >= g.warmup) {
        bench_hist_add(c->t->gap, *now - c->t_last);
    }
    c->t_last = *now;
}

/* Advances <*m>, the state of a matcher of the fixed pattern <pat> (<len>
 * bytes; its first byte occurs nowhere else in it but as its last), by <ch>.
 * True when the pattern has just been seen whole. */
static inline bool
match_step(const char *pat, unsigned len, unsigned *m, char ch)
{
    if (ch == pat[*m]) {
        if (++*m < len)
            return false;
        *m = 0;
        return true;
    }
    *m = ch == pat[0] ? 1 : 0;
    return false;
}

/* Chat: matches "content" ws* : ws* " X with X not '"'; each match is one
 * content delta. The stream ends with data: [DONE]. */
static int
on_body_chat(http_parser *p, const char *at, size_t n)
{
    static const char pat[] = "\"content\"", done[] = "[DONE]";
    struct ld_conn *c = p->data;
    unsigned m = c->match;
    uint64_t now = 0;

    for (size_t i = 0; i < n; i++) {
        char ch = at[i];

        if (!c->got_end && match_step(done, sizeof(done) - 1, &c->match_end, ch))
            c->got_end = true;
        if (m < 9) {
            if (ch == pat[m])
                m++;
            else
                m = ch == '"' ? 1 : 0;
        } else if (m == 9) { /* before ':' */
            if (ch == ':')
                m = 10;
            else if (ch != ' ')
                m = ch == '"' ? 1 : 0;
        } else if (m == 10) { /* before the opening quote */
            if (ch == '"')
                m = 11;
            else if (ch != ' ')
                m = 0;
        } else { /* first character of the value */
            m = 0;
            if (ch == '"')
                continue; /* empty content (the role chunk) */
            content_delta(c, &now);
        }
    }
    c->match = m;
    return 0;
}

/* Messages, Responses, Gemini: each match of the shape's delta pattern is one
 * content delta; its end pattern ends the stream. */
static int
on_body_events(http_parser *p, const char *at, size_t n)
{
    const struct ld_pattern *pat = &ld_patterns[g.api];
    struct ld_conn *c = p->data;
    uint64_t now = 0;

    for (size_t i = 0; i < n; i++) {
        char ch = at[i];

        if (match_step(pat->delta, pat->delta_len, &c->match, ch))
            content_delta(c, &now);
        if (!c->got_end && match_step(pat->end, pat->end_len, &c->match_end, ch))
            c->got_end = true;
    }
    return 0;
}

static int
on_message_complete(http_parser *p)
{
    struct ld_conn *c = p->data;

    c->msg_done = true;
    c->keep_alive = http_should_keep_alive(p) != 0;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings settings_plain = {
    .on_headers_complete = on_headers_complete,
    .on_message_complete = on_message_complete,
};

static const http_parser_settings settings_stream_chat = {
    .on_headers_complete = on_headers_complete,
    .on_body = on_body_chat,
    .on_message_complete = on_message_complete,
};

static const http_parser_settings settings_stream_events = {
    .on_headers_complete = on_headers_complete,
    .on_body = on_body_events,
    .on_message_complete = on_message_complete,
};

static const http_parser_settings *
parser_settings(void)
{
    if (!g.stream)
        return &settings_plain;
    return g.api == LD_API_CHAT ? &settings_stream_chat : &settings_stream_events;
}

static void
on_read(evutil_socket_t fd, short what, void *arg)
{
    struct ld_conn *c = arg;
    struct ld_thread *t = c->t;
    const http_parser_settings *s = parser_settings();
    ssize_t n;

    (void)what;
    n = recv(fd, t->rbuf, LD_RBUF, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (!c->has_req) { /* the server closed (or talked) between requests */
        conn_close(c);
        return;
    }
    if (n <= 0) {
        if (n == 0)
            http_parser_execute(&c->parser, s, NULL, 0); /* answers ended by close */
        if (c->msg_done) {
            http_parser_pause(&c->parser, 0);
            c->keep_alive = false;
            req_finish(c, -1);
        } else {
            req_finish(c, LD_E_RESET);
        }
        conn_close(c);
        conn_next(c);
        return;
    }
    http_parser_execute(&c->parser, s, t->rbuf, (size_t)n);
    if (c->msg_done) {
        http_parser_pause(&c->parser, 0);
        req_finish(c, -1);
        conn_next(c);
        return;
    }
    if (HTTP_PARSER_ERRNO(&c->parser) != HPE_OK) {
        req_finish(c, LD_E_PARSE);
        conn_next(c);
    }
}

static void
on_write(evutil_socket_t fd, short what, void *arg)
{
    struct ld_conn *c = arg;
    int err = 0;
    socklen_t el = sizeof(err);

    (void)what;
    if (c->state == LD_C_CONNECTING) {
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err != 0) {
            conn_close(c);
            req_finish(c, LD_E_CONNECT);
            conn_next_later(c);
            return;
        }
        c->state = LD_C_OPEN;
        http_parser_init(&c->parser, HTTP_RESPONSE);
        c->parser.data = c;
        event_del(&c->wev);
        c->wev_added = false;
        conn_send(c);
        return;
    }
    conn_write_req(c);
}

static void
on_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct ld_conn *c = arg;

    (void)fd;
    (void)what;
    if (!c->has_req)
        return;
    req_finish(c, LD_E_TIMEOUT);
    conn_close(c);
    conn_next(c);
}

/* ---- open loop ---- */

static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct ld_thread *t = arg;
    uint64_t now = bench_now_us(), target, next_us;
    struct timeval tv;

    (void)fd;
    (void)what;
    target = (uint64_t)((double)(now - g.start_us) * t->rate / 1e6) + 1;
    /* Only this thread's share: a thread that ticks ahead of a busy one must not take
     * requests the other's idle connections were to serve (they would wait here for
     * a connection of this thread to finish its answer). */
    if (target > t->quota)
        target = t->quota;
    while (t->scheduled < target) {
        if (!claim()) {
            t->ticking = false;
            break;
        }
        t->scheduled++;
        t->pending++;
    }
    if (t->scheduled >= t->quota)
        t->ticking = false;
    while (t->pending > 0 && t->nidle > 0) {
        t->pending--;
        conn_start(t->idle[--t->nidle]);
    }
    if (t->pending > t->pending_max) /* those that found no idle connection */
        t->pending_max = t->pending;
    if (!t->ticking) {
        thread_check_done(t);
        return;
    }
    next_us = g.start_us + (uint64_t)((double)t->scheduled * 1e6 / t->rate);
    next_us = next_us > now ? next_us - now : 0;
    tv.tv_sec = (time_t)(next_us / 1000000);
    tv.tv_usec = (suseconds_t)(next_us % 1000000);
    evtimer_add(&t->tick, &tv);
}

static void *
thread_main(void *arg)
{
    struct ld_thread *t = arg;

    if (t->rate > 0) {
        for (unsigned i = 0; i < t->nconns; i++)
            t->idle[t->nidle++] = &t->conns[t->nconns - 1 - i];
        t->ticking = true;
        on_tick(-1, 0, t);
    } else {
        for (unsigned i = 0; i < t->nconns; i++)
            conn_next(&t->conns[i]);
    }
    if (t->active > 0 || t->pending > 0 || t->ticking)
        event_base_dispatch(t->base);
    for (unsigned i = 0; i < t->nconns; i++) {
        event_del(&t->conns[i].tmo);
        event_del(&t->conns[i].retry);
        conn_close(&t->conns[i]);
    }
    atomic_fetch_add_explicit(&threads_done, 1, memory_order_release);
    return NULL;
}

/* ---- flags and setup ---- */

static void
usage(void)
{
    fprintf(stderr, "usage: gwbench load [--url URL] [--api chat|messages|responses|gemini]\n"
                    "         [--key KEY] [--header 'Name: value']... [--model M] [--stream]\n"
                    "         [--body FILE] [--connections C] [--threads T]\n"
                    "         [--rate R] [--requests N | --duration SECS] [--timeout-ms MS]\n"
                    "         [--warmup N]\n"
                    "         [--json] [--quiet]\n"
                    "see docs/gwbench.md\n");
}

static bool
read_file(const char *path, struct gw_buf *b)
{
    FILE *f = fopen(path, "rb");
    char tmp[65536];
    size_t n;

    if (f == NULL)
        return false;
    while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0) {
        if (gw_buf_append(b, tmp, n) != GW_OK) {
            fclose(f);
            return false;
        }
    }
    fclose(f);
    return true;
}

static int
build_request(const char *url, const char *key, const char *model, const char *body_file,
              const struct gw_buf *extra)
{
    struct http_parser_url u;
    struct gw_buf body = {0};
    char host[256], hp[300];
    const char *path = "/";
    size_t pathlen = 1;
    uint16_t port = 80;

    http_parser_url_init(&u);
    if (strncmp(url, "http://", 7) != 0 || http_parser_parse_url(url, strlen(url), 0, &u) != 0 ||
        !(u.field_set & (1 << UF_HOST))) {
        fprintf(stderr, "gwbench load: --url wants http://HOST:PORT/PATH, got '%s'\n", url);
        return 2;
    }
    if (u.field_data[UF_HOST].len >= sizeof(host))
        return 2;
    memcpy(host, url + u.field_data[UF_HOST].off, u.field_data[UF_HOST].len);
    host[u.field_data[UF_HOST].len] = '\0';
    if (u.field_set & (1 << UF_PORT))
        port = u.port;
    if (u.field_set & (1 << UF_PATH)) {
        path = url + u.field_data[UF_PATH].off;
        pathlen = strlen(path); /* path and query */
    }
    snprintf(hp, sizeof(hp), "%s:%u", host, port);
    if (!bench_parse_addr(hp, &g.addr)) {
        fprintf(stderr, "gwbench load: the host must be an IPv4 address, got '%s'\n", host);
        return 2;
    }
    snprintf(g.url, sizeof(g.url), "%s", url);
    if (body_file) {
        if (!read_file(body_file, &body)) {
            fprintf(stderr, "gwbench load: cannot read --body %s\n", body_file);
            return 1;
        }
    } else if (g.api == LD_API_MESSAGES) {
        (void)gw_buf_append_str(&body, GW_STR_LIT("{\"model\":"));
        (void)gw_buf_append_json_str(&body, gw_str_c(model));
        (void)gw_buf_printf(&body,
                            ",\"max_tokens\":%d,\"messages\":[{\"role\":\"user\","
                            "\"content\":\"Say hello.\"}],\"stream\":%s}",
                            LD_MESSAGES_MAX_TOKENS, g.stream ? "true" : "false");
    } else if (g.api == LD_API_RESPONSES) {
        (void)gw_buf_append_str(&body, GW_STR_LIT("{\"model\":"));
        (void)gw_buf_append_json_str(&body, gw_str_c(model));
        (void)gw_buf_printf(&body, ",\"input\":\"Say hello.\",\"stream\":%s}",
                            g.stream ? "true" : "false");
    } else if (g.api == LD_API_GEMINI) {
        /* the model and the stream are in the path */
        (void)gw_buf_append_str(&body,
                                GW_STR_LIT("{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":"
                                           "\"Say hello.\"}]}]}"));
    } else {
        (void)gw_buf_append_str(&body, GW_STR_LIT("{\"model\":"));
        (void)gw_buf_append_json_str(&body, gw_str_c(model));
        (void)gw_buf_append_str(
            &body, GW_STR_LIT(",\"messages\":[{\"role\":\"user\",\"content\":\"Say hello.\"}]"));
        if (g.stream)
            (void)gw_buf_append_str(
                &body, GW_STR_LIT(",\"stream\":true,\"stream_options\":{\"include_usage\":true}}"));
        else
            (void)gw_buf_append_str(&body, GW_STR_LIT(",\"stream\":false}"));
    }
    (void)gw_buf_printf(&g.req, "POST %.*s HTTP/1.1\r\nHost: %s\r\nUser-Agent: gwbench\r\n",
                        (int)pathlen, path, hp);
    (void)gw_buf_printf(&g.req, "Content-Type: application/json\r\nContent-Length: %zu\r\n",
                        body.len);
    if (g.stream)
        (void)gw_buf_append_str(&g.req, GW_STR_LIT("Accept: text/event-stream\r\n"));
    if (g.api == LD_API_MESSAGES) {
        /* the Anthropic SDK's headers: the key in x-api-key, the version always */
        if (key)
            (void)gw_buf_printf(&g.req, "x-api-key: %s\r\n", key);
        (void)gw_buf_append_str(&g.req,
                                GW_STR_LIT("anthropic-version: " LD_ANTHROPIC_VERSION "\r\n"));
    } else if (g.api == LD_API_GEMINI) {
        if (key) /* the Google Gen AI SDK's header */
            (void)gw_buf_printf(&g.req, "x-goog-api-key: %s\r\n", key);
    } else if (key) {
        (void)gw_buf_printf(&g.req, "Authorization: Bearer %s\r\n", key);
    }
    if (extra->len)
        (void)gw_buf_append(&g.req, extra->data, extra->len);
    (void)gw_buf_append(&g.req, "\r\n", 2);
    if (gw_buf_append(&g.req, body.data, body.len) != GW_OK) {
        gw_buf_fini(&body);
        return 1;
    }
    gw_buf_fini(&body);
    return 0;
}

static int
parse_flags(int argc, char **argv)
{
    const char *url = NULL, *key = NULL, *api = "chat";
    const char *model = "mock-model", *body_file = NULL, *v;
    char gemini_url[512];
    struct gw_buf extra = {0};
    uint64_t x, requests = 10000, duration = 0;
    bool have_requests = false;
    int rc;

    g.conns = 64;
    g.threads = 2;
    g.timeout_ms = 30000;
    for (int i = 1; i < argc; i++) {
        int r;

#define NUM(flag, dst, max)                                                                        \
    if ((r = bench_arg(argc, argv, &i, flag, &v)) != 0) {                                          \
        if (r < 0 || !bench_parse_u64(v, max, &x)) {                                               \
            fprintf(stderr, "gwbench load: %s needs a number (0..%llu)\n", flag,                   \
                    (unsigned long long)(max));                                                    \
            gw_buf_fini(&extra);                                                                   \
            return 2;                                                                              \
        }                                                                                          \
        dst = x;                                                                                   \
        continue;                                                                                  \
    }
#define STR(flag, dst)                                                                             \
    if ((r = bench_arg(argc, argv, &i, flag, &v)) != 0) {                                          \
        if (r < 0) {                                                                               \
            fprintf(stderr, "gwbench load: %s needs a value\n", flag);                             \
            gw_buf_fini(&extra);                                                                   \
            return 2;                                                                              \
        }                                                                                          \
        dst = v;                                                                                   \
        continue;                                                                                  \
    }
        STR("--url", url)
        STR("--api", api)
        STR("--key", key)
        STR("--model", model)
        STR("--body", body_file)
        NUM("--connections", g.conns, LD_MAX_CONNS)
        NUM("--threads", g.threads, LD_MAX_THREADS)
        NUM("--timeout-ms", g.timeout_ms, 86400000)
        NUM("--warmup", g.warmup, UINT64_MAX / 2)
        NUM("--duration", duration, 86400)
        if ((r = bench_arg(argc, argv, &i, "--requests", &v)) != 0) {
            if (r < 0 || !bench_parse_u64(v, UINT64_MAX / 2, &requests)) {
                fprintf(stderr, "gwbench load: --requests needs a number\n");
                gw_buf_fini(&extra);
                return 2;
            }
            have_requests = true;
            continue;
        }
        if ((r = bench_arg(argc, argv, &i, "--rate", &v)) != 0) {
            char *end;

            g.rate = r > 0 ? strtod(v, &end) : -1;
            if (r < 0 || *end != '\0' || g.rate < 0) {
                fprintf(stderr, "gwbench load: --rate needs a number of requests/s\n");
                gw_buf_fini(&extra);
                return 2;
            }
            continue;
        }
        if ((r = bench_arg(argc, argv, &i, "--header", &v)) != 0) {
            if (r < 0 || strchr(v, ':') == NULL || strpbrk(v, "\r\n") != NULL) {
                fprintf(stderr, "gwbench load: --header wants 'Name: value'\n");
                gw_buf_fini(&extra);
                return 2;
            }
            (void)gw_buf_printf(&extra, "%s\r\n", v);
            continue;
        }
#undef NUM
#undef STR
        if (strcmp(argv[i], "--stream") == 0)
            g.stream = true;
        else if (strcmp(argv[i], "--json") == 0)
            g.json = true;
        else if (strcmp(argv[i], "--quiet") == 0)
            g.quiet = true;
        else {
            if (strcmp(argv[i], "-h") != 0 && strcmp(argv[i], "--help") != 0)
                fprintf(stderr, "gwbench load: unknown flag '%s'\n", argv[i]);
            usage();
            gw_buf_fini(&extra);
            return 2;
        }
    }
    if (g.conns == 0)
        g.conns = 1;
    if (g.threads == 0)
        g.threads = 1;
    if (g.threads > g.conns)
        g.threads = g.conns;
    if (g.timeout_ms == 0)
        g.timeout_ms = 30000;
    g.requests = (duration > 0 && !have_requests) ? 0 : requests;
    g.duration_us = duration * 1000000u;
    g.api = LD_API_COUNT;
    for (unsigned i = 0; i < LD_API_COUNT; i++)
        if (strcmp(api, api_names[i]) == 0)
            g.api = (enum ld_api)i;
    if (g.api == LD_API_COUNT) {
        fprintf(stderr, "gwbench load: --api wants chat, messages, responses or gemini, got '%s'\n",
                api);
        gw_buf_fini(&extra);
        return 2;
    }
    if (url == NULL && g.api == LD_API_GEMINI) {
        snprintf(gemini_url, sizeof(gemini_url), "http://127.0.0.1:8080/v1beta/models/%s:%s", model,
                 g.stream ? "streamGenerateContent?alt=sse" : "generateContent");
        url = gemini_url;
    } else if (url == NULL) {
        static const char *const urls[LD_API_COUNT] = {"http://127.0.0.1:8080/v1/chat/completions",
                                                       "http://127.0.0.1:8080/v1/messages",
                                                       "http://127.0.0.1:8080/v1/responses", NULL};

        url = urls[g.api];
    }
    rc = build_request(url, key, model, body_file, &extra);
    gw_buf_fini(&extra);
    return rc;
}

static int
thread_init(struct ld_thread *t, unsigned nconns)
{
    struct timeval tv = {(time_t)(g.timeout_ms / 1000), (suseconds_t)(g.timeout_ms % 1000) * 1000};

    struct event_config *cfg = event_config_new();

    /* timerfd-backed timers: the open-loop schedule needs better than milliseconds */
    if (cfg == NULL)
        return 1;
    event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
    t->base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    t->conns = gw_calloc(nconns, sizeof(*t->conns));
    t->idle = gw_calloc(nconns, sizeof(*t->idle));
    t->lat = bench_hist_new();
    t->ttft = bench_hist_new();
    t->gap = bench_hist_new();
    if (!t->base || !t->conns || !t->idle || !t->lat || !t->ttft || !t->gap)
        return 1;
    t->nconns = nconns;
    t->tmo_tv = event_base_init_common_timeout(t->base, &tv);
    if (t->tmo_tv == NULL)
        return 1;
    t->rate = g.rate / g.threads;
    t->quota = UINT64_MAX;
    evtimer_assign(&t->tick, t->base, on_tick, t);
    for (unsigned i = 0; i < nconns; i++) {
        struct ld_conn *c = &t->conns[i];

        c->t = t;
        c->fd = -1;
        c->state = LD_C_CLOSED;
        evtimer_assign(&c->tmo, t->base, on_timeout, c);
        evtimer_assign(&c->retry, t->base, on_retry, c);
    }
    return 0;
}

static void
thread_fini(struct ld_thread *t)
{
    bench_hist_free(t->lat);
    bench_hist_free(t->ttft);
    bench_hist_free(t->gap);
    gw_free(t->conns);
    gw_free(t->idle);
    if (t->base)
        event_base_free(t->base);
}

/* ---- summary ---- */

struct ld_sum {
    uint64_t completed, ok, chunks, queued_max;
    uint64_t status_err[1000];
    uint64_t kind_err[LD_E_COUNT];
    struct bench_hist *lat, *ttft, *gap;
    double secs;
};

static void
print_pcts(struct gw_buf *b, const struct bench_hist *h, bool json)
{
    if (json) {
        unsigned i = 0;
        uint64_t v, n;
        bool first = true;

        (void)gw_buf_printf(b,
                            "{\"p50\":%llu,\"p90\":%llu,\"p99\":%llu,\"max\":%llu,\"n\":%llu,"
                            "\"hist\":[",
                            (unsigned long long)bench_hist_pct(h, 50),
                            (unsigned long long)bench_hist_pct(h, 90),
                            (unsigned long long)bench_hist_pct(h, 99), (unsigned long long)h->max,
                            (unsigned long long)h->count);
        /* Every bucket with a count, as [value, count]: runs pool into one histogram. */
        while (bench_hist_next(h, &i, &v, &n)) {
            (void)gw_buf_printf(b, "%s[%llu,%llu]", first ? "" : ",", (unsigned long long)v,
                                (unsigned long long)n);
            first = false;
        }
        (void)gw_buf_append_str(b, GW_STR_LIT("]}"));
        return;
    }
    (void)gw_buf_printf(b, "p50 %8llu  p90 %8llu  p99 %8llu  max %8llu  (n=%llu)\n",
                        (unsigned long long)bench_hist_pct(h, 50),
                        (unsigned long long)bench_hist_pct(h, 90),
                        (unsigned long long)bench_hist_pct(h, 99), (unsigned long long)h->max,
                        (unsigned long long)h->count);
}

static void
print_summary(const struct ld_sum *s)
{
    struct gw_buf b = {0};
    uint64_t req = atomic_load(&issued);
    double rps = s->secs > 0 ? (double)s->completed / s->secs : 0;
    bool first = true;

    if (g.json) {
        (void)gw_buf_printf(&b, "{\"url\":");
        (void)gw_buf_append_json_str(&b, gw_str_c(g.url));
        (void)gw_buf_printf(&b,
                            ",\"api\":\"%s\",\"stream\":%s,\"connections\":%u,\"threads\":%u,"
                            "\"rate\":%g,\"requests\":%llu,\"completed\":%llu,\"ok\":%llu,"
                            "\"errors\":{",
                            api_names[g.api], g.stream ? "true" : "false", g.conns, g.threads,
                            g.rate, (unsigned long long)req, (unsigned long long)s->completed,
                            (unsigned long long)s->ok);
        for (unsigned i = 0; i < 1000; i++) {
            if (s->status_err[i]) {
                (void)gw_buf_printf(&b, "%s\"%u\":%llu", first ? "" : ",", i,
                                    (unsigned long long)s->status_err[i]);
                first = false;
            }
        }
        for (unsigned i = 0; i < LD_E_COUNT; i++) {
            if (s->kind_err[i]) {
                (void)gw_buf_printf(&b, "%s\"%s\":%llu", first ? "" : ",", err_names[i],
                                    (unsigned long long)s->kind_err[i]);
                first = false;
            }
        }
        (void)gw_buf_printf(&b, "},\"duration_s\":%.6f,\"rps\":%.1f,\"latency_us\":", s->secs, rps);
        print_pcts(&b, s->lat, true);
        (void)gw_buf_append_str(&b, GW_STR_LIT(",\"ttft_us\":"));
        print_pcts(&b, s->ttft, true);
        (void)gw_buf_append_str(&b, GW_STR_LIT(",\"gap_us\":"));
        print_pcts(&b, s->gap, true);
        (void)gw_buf_printf(&b, ",\"chunks\":%llu,\"queued_max\":%llu}\n",
                            (unsigned long long)s->chunks, (unsigned long long)s->queued_max);
    } else {
        (void)gw_buf_printf(&b, "gwbench load  %s  (%s, %s, %s, %u connections, %u threads)\n",
                            g.url, api_names[g.api], g.stream ? "stream" : "non-stream",
                            g.rate > 0 ? "open loop" : "closed loop", g.conns, g.threads);
        if (g.rate > 0)
            (void)gw_buf_printf(&b, "rate         %.1f req/s target, queued max %llu\n", g.rate,
                                (unsigned long long)s->queued_max);
        (void)gw_buf_printf(&b, "requests     %llu sent, %llu completed, %llu ok\n",
                            (unsigned long long)req, (unsigned long long)s->completed,
                            (unsigned long long)s->ok);
        (void)gw_buf_append_str(&b, GW_STR_LIT("errors      "));
        for (unsigned i = 0; i < 1000; i++) {
            if (s->status_err[i]) {
                (void)gw_buf_printf(&b, " %u: %llu", i, (unsigned long long)s->status_err[i]);
                first = false;
            }
        }
        for (unsigned i = 0; i < LD_E_COUNT; i++) {
            if (s->kind_err[i]) {
                (void)gw_buf_printf(&b, " %s: %llu", err_names[i],
                                    (unsigned long long)s->kind_err[i]);
                first = false;
            }
        }
        (void)gw_buf_printf(&b, "%s\n", first ? " none" : "");
        (void)gw_buf_printf(&b, "duration     %.3f s\nrps          %.1f\nlatency us   ", s->secs,
                            rps);
        print_pcts(&b, s->lat, false);
        if (g.stream) {
            (void)gw_buf_append_str(&b, GW_STR_LIT("ttft us      "));
            print_pcts(&b, s->ttft, false);
            (void)gw_buf_append_str(&b, GW_STR_LIT("gap us       "));
            print_pcts(&b, s->gap, false);
        }
    }
    fwrite(b.data, 1, b.len, stdout);
    fflush(stdout);
    gw_buf_fini(&b);
}

int
bench_load_main(int argc, char **argv)
{
    static struct ld_thread threads[LD_MAX_THREADS];
    struct ld_sum sum = {0};
    bool tty;
    uint64_t last_print, end;
    int rc;

    if ((rc = parse_flags(argc, argv)) != 0)
        return rc;
    signal(SIGPIPE, SIG_IGN);
    tty = !g.quiet && isatty(2);
    for (unsigned i = 0; i < g.threads; i++) {
        unsigned n = g.conns / g.threads + (i < g.conns % g.threads ? 1 : 0);

        if (thread_init(&threads[i], n) != 0) {
            fprintf(stderr, "gwbench load: out of memory\n");
            return 1;
        }
        if (g.requests)
            threads[i].quota = g.requests / g.threads + (i < g.requests % g.threads ? 1 : 0);
    }
    sum.lat = bench_hist_new();
    sum.ttft = bench_hist_new();
    sum.gap = bench_hist_new();
    if (!sum.lat || !sum.ttft || !sum.gap)
        return 1;
    g.start_us = bench_now_us();
    if (g.duration_us)
        g.deadline_us = g.start_us + g.duration_us;
    for (unsigned i = 0; i < g.threads; i++) {
        if (pthread_create(&threads[i].tid, NULL, thread_main, &threads[i]) != 0) {
            fprintf(stderr, "gwbench load: cannot start a thread\n");
            return 1;
        }
    }
    last_print = g.start_us;
    while (atomic_load_explicit(&threads_done, memory_order_acquire) < g.threads) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        uint64_t now;

        nanosleep(&ts, NULL);
        now = bench_now_us();
        if (tty && now - last_print >= 1000000) {
            uint64_t d = atomic_load_explicit(&done_total, memory_order_relaxed);
            double secs = (double)(now - g.start_us) / 1e6;

            last_print = now;
            fprintf(stderr, "\r%7.1fs  sent %llu  done %llu  ok %llu  rps %.0f   ", secs,
                    (unsigned long long)atomic_load(&issued), (unsigned long long)d,
                    (unsigned long long)atomic_load_explicit(&ok_total, memory_order_relaxed),
                    secs > 0 ? (double)d / secs : 0.0);
        }
    }
    end = bench_now_us();
    if (tty && end - g.start_us >= 1000000)
        fprintf(stderr, "\n");
    for (unsigned i = 0; i < g.threads; i++) {
        struct ld_thread *t = &threads[i];

        pthread_join(t->tid, NULL);
        sum.completed += t->completed;
        sum.ok += t->ok;
        sum.chunks += t->chunks;
        if (t->pending_max > sum.queued_max)
            sum.queued_max = t->pending_max;
        for (unsigned k = 0; k < 1000; k++)
            sum.status_err[k] += t->status_err[k];
        for (unsigned k = 0; k < LD_E_COUNT; k++)
            sum.kind_err[k] += t->kind_err[k];
        bench_hist_merge(sum.lat, t->lat);
        bench_hist_merge(sum.ttft, t->ttft);
        bench_hist_merge(sum.gap, t->gap);
        thread_fini(t);
    }
    sum.secs = (double)(end - g.start_us) / 1e6;
    print_summary(&sum);
    bench_hist_free(sum.lat);
    bench_hist_free(sum.ttft);
    bench_hist_free(sum.gap);
    gw_buf_fini(&g.req);
    return 0;
}
