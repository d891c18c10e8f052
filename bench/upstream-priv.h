/* SPDX-License-Identifier: MIT
 * bench/upstream-priv.h - what the files of `gwbench upstream` share: one connection and
 * the knobs of its answer, the process settings, the writers of HTTP chunks and events,
 * and the table of templates each API shape fills in (one file per shape:
 * upstream_chat.c, upstream_messages.c, upstream_responses.c, upstream_gemini.c,
 * upstream_bedrock.c).
 * Only bench/upstream*.c include it (STYLE.md 4).
 * Owns:    nothing.
 * Threads: a connection's worker; the settings are read-only once the workers run.
 * See:     bench/upstream.c, docs/gwbench.md
 */
#ifndef GW_BENCH_UPSTREAM_PRIV_H
#define GW_BENCH_UPSTREAM_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/event_struct.h>
#include <http_parser.h>
#include <jansson.h>

#include "core/str.h"

#define BENCH_UP_MAX_PACE 32u   /* segments of a --pace profile */
#define BENCH_UP_MAX_TOOLS 4u   /* tools of one --tool-call answer (parallel calls) */
#define BENCH_UP_TOOL_NAME 64u  /* the longest tool name every API accepts */
#define BENCH_UP_TOOL_PIECES 4u /* a tool call's head and its arguments in 3 pieces */

/* What the garbage faults send where JSON is due: a proxy's error page. */
#define BENCH_UP_GARBAGE "<html><body><h1>502 Bad Gateway</h1></body></html>"

/* The text of one reasoning delta (--reasoning), and the opaque token every shape
 * hands back with its reasoning (Messages signature, Responses encrypted_content,
 * Gemini thoughtSignature): base64 of "gwbench reasoning". */
#define BENCH_UP_THINK "thinking "
#define BENCH_UP_SIGNATURE "Z3diZW5jaCByZWFzb25pbmc="

enum bench_up_fault {
    BENCH_UP_FAULT_NONE,
    BENCH_UP_FAULT_STATUS,
    BENCH_UP_FAULT_HANG_HEADERS,
    BENCH_UP_FAULT_HANG_CONTENT,
    BENCH_UP_FAULT_DROP_BEFORE,
    BENCH_UP_FAULT_DROP_MID,
    BENCH_UP_FAULT_ERROR_MID,
    BENCH_UP_FAULT_GARBAGE_BODY,
    BENCH_UP_FAULT_GARBAGE_SSE,
    BENCH_UP_FAULT_GARBAGE_LINES,
    BENCH_UP_FAULT_GOAWAY, /* HTTP/2: GOAWAY; HTTP/1.1: as drop-before */
};

/* One segment of a pace profile: <count> paced deltas, each <gap_ms> after the
 * previous one (the very first delta of an answer comes at ttft, whatever its gap). */
struct bench_up_pace_seg {
    uint32_t count;
    uint32_t gap_ms;
};

/* The knobs of one answer: the flags' values, overridden per request by x-bench-*. */
struct bench_up_params {
    char tool[BENCH_UP_MAX_TOOLS][BENCH_UP_TOOL_NAME + 1]; /* --tool-call names */
    unsigned tool_n;                                       /* 0: never answer with a tool call */
    uint64_t ttft_ms;
    uint64_t chunks;    /* content chunks (plan_answer() sets it for tool answers) */
    uint64_t reasoning; /* reasoning deltas before the content (0 on the chat route) */
    uint64_t interval_ms;
    uint64_t status;
    uint64_t retry_after; /* meaningful when has_retry_after */
    uint64_t drop_after;
    uint64_t cached;
    uint64_t cache_write; /* Messages cache_creation_input_tokens, Responses cache_write_tokens */
    enum bench_up_fault fault;
    bool has_retry_after;
    /* --fault-key: the fault applies only to requests whose credential (Authorization
     * Bearer, x-api-key, x-goog-api-key) is one of these, comma-separated; "" = all */
    char fault_key[256];
    unsigned pace_n; /* 0: no profile, deltas are interval_ms apart */
    struct bench_up_pace_seg pace[BENCH_UP_MAX_PACE];
};

/* Process-wide settings, written by main before the workers start, then read-only. */
struct bench_up_settings {
    struct bench_up_params def;
    struct gw_buf text;       /* --text, JSON-escaped, without quotes */
    struct gw_buf error_body; /* --error-body, raw */
    bool error_body_set;      /* --error-body given: every route sends it as is */
    bool no_usage;
    bool quiet; /* --quiet: no diagnostics on stderr */
    /* --aws-*: the credentials the Bedrock route checks SigV4 signatures against; no
     * check while aws_key_id is NULL. aws_token NULL: no x-amz-security-token expected. */
    const char *aws_key_id, *aws_secret, *aws_region, *aws_token;
};

extern struct bench_up_settings bench_up_g;

/* What an answer carries (decided per request by plan_answer()). */
enum bench_up_answer {
    BENCH_UP_ANS_TEXT,        /* --text, chunks times */
    BENCH_UP_ANS_TOOL_CALL,   /* a call to each --tool-call tool */
    BENCH_UP_ANS_TOOL_RESULT, /* one chunk: what the request's tool results said */
};

enum bench_up_state {
    BENCH_UP_ST_IDLE,    /* reading a request */
    BENCH_UP_ST_WAIT,    /* a non-streamed answer waits for its timer */
    BENCH_UP_ST_STREAM,  /* streaming: the timer sends the next event */
    BENCH_UP_ST_HANG,    /* never answers; waits for the peer to go */
    BENCH_UP_ST_DRAINING /* the answer is queued; close or go idle once written */
};

/* One worker thread: its loop, its listener and the scratch buffers of its answers. */
struct bench_up_thread {
    struct event_base *base;
    int lfd;
    struct event accept_ev;
    struct gw_buf body;  /* scratch: an answer body or one event's data */
    struct gw_buf frame; /* scratch: headers or a chunk frame */
    struct gw_buf last;  /* scratch: the next /_bench/last record */
    struct gw_buf es;    /* scratch: one eventstream message (the Bedrock route) */
};

struct bench_up_shape;

/* One client connection. Owned by its worker; freed by conn_free() at the end
 * of the callback that set closing. */
struct bench_up_conn {
    struct bench_up_thread *t;
    const struct bench_up_shape *shape; /* the API of the request being answered */
    int fd;
    struct event rev, wev, tev;
    struct evbuffer *out; /* bytes the socket did not take yet */
    http_parser parser;
    struct gw_buf in; /* unparsed input */
    struct gw_buf url, hname, hval;
    struct gw_buf hjson; /* the request's headers as JSON members */
    struct gw_buf hraw;  /* the same as "name\0value\0" pairs, names lower-cased */
    struct gw_buf body;
    struct gw_buf model;  /* request model, JSON-escaped, without quotes */
    struct gw_buf answer; /* BENCH_UP_ANS_TOOL_RESULT: the text, JSON-escaped, no quotes */
    struct bench_up_params p;
    enum bench_up_answer ans;
    enum bench_up_state state;
    bool in_value;
    bool msg_done;
    bool busy; /* a request is being answered; parsing waits */
    bool keep_alive;
    bool stream;
    bool include_usage;
    bool has_version;    /* an anthropic-version header was sent */
    bool has_max_tokens; /* the body has a numeric top-level max_tokens */
    bool counting;       /* a token-counting route (no answer, just the count) */
    bool gemini_stream;  /* the Gemini route's method is streamGenerateContent */
    bool gemini_sse;     /* ... with ?alt=sse (else the stream is one JSON array) */
    bool bedrock_stream; /* the Bedrock route is .../converse-stream */
    bool stream_active;  /* stream headers sent, its end not yet */
    bool close_after_write;
    bool closing;
    bool by_peer;
    bool wev_added;
    bool sniffed;          /* the first bytes were checked for the HTTP/2 preface */
    size_t path_model_off; /* the Gemini and Bedrock routes: the model's place in <url> */
    size_t path_model_len;
    uint64_t id;
    uint64_t created;
    uint64_t sent;   /* paced deltas sent: reasoning first, then content chunks */
    uint64_t events; /* events (or array elements) of this stream sent */
    uint64_t t0_us;  /* when the answer started; deltas are due at fixed offsets */
    uint64_t prompt_tokens;
    char cred[128]; /* the request's credential (see fault_key), "" when none */
};

/* The templates of one API shape. The server (upstream.c) decides when (pacing,
 * faults, keep-alive); these decide the bytes. Every function renders into the
 * thread's scratch buffers and writes with the bench_up_send_* helpers below. */
struct bench_up_shape {
    /* The Content-Type of a stream. NULL: text/event-stream. */
    const char *(*stream_ctype)(const struct bench_up_conn *c);
    unsigned tool_chunks; /* content chunks of one tool call */
    bool reasoning;       /* --reasoning applies (else it counts as 0) */
    /* After the body scan: adjusts what the scan read to the route, or answers a
     * refusal itself and returns true. NULL: nothing to do. */
    bool (*prepare)(struct bench_up_conn *c);
    /* Fills c->answer with "tool said: ..." for each tool result that ends the
     * request <root>; true when there was at least one. */
    bool (*tool_results)(struct bench_up_conn *c, json_t *root);
    /* The non-streamed answer into <b> (replaced). */
    void (*render_answer)(struct bench_up_conn *c, struct gw_buf *b);
    /* What a stream sends at once with its headers. */
    void (*stream_open)(struct bench_up_conn *c);
    /* Paced delta number c->sent (reasoning deltas first, then content chunks). */
    void (*stream_delta)(struct bench_up_conn *c);
    /* The end of a complete stream, up to the terminating zero-size chunk. */
    void (*stream_close)(struct bench_up_conn *c);
    /* --fault error-mid: the shape's in-stream error, then the terminating chunk. */
    void (*stream_error)(struct bench_up_conn *c);
    /* --fault garbage-sse: an event whose data is not JSON, then the terminating chunk. */
    void (*stream_garbage)(struct bench_up_conn *c);
    /* The error body of an HTTP <status> answer when --error-body was not given, into
     * <b> (replaced). NULL: the default --error-body (OpenAI's shape). */
    void (*error_body)(struct gw_buf *b, unsigned status);
    /* Header lines (each ending in \r\n) every error answer of <status> carries, with or
     * without --error-body. NULL: none. */
    const char *(*error_headers)(unsigned status);
    /* The token-counting route's answer into <b> (replaced). NULL: no such route. */
    void (*count_answer)(struct bench_up_conn *c, struct gw_buf *b);
    /* The model listing into <b> (replaced). NULL: no such route. */
    void (*models_answer)(struct bench_up_conn *c, struct gw_buf *b);
};

extern const struct bench_up_shape bench_up_chat;
extern const struct bench_up_shape bench_up_messages;
extern const struct bench_up_shape bench_up_responses;
extern const struct bench_up_shape bench_up_gemini;
extern const struct bench_up_shape bench_up_bedrock;

/* Whether <path>/<n> (no query) is a Bedrock route, <prefix>/model/{modelId}/converse or
 * .../converse-stream with a non-empty modelId holding no '/': then sets c's model place
 * in the URL and c->bedrock_stream (bench/upstream_bedrock.c). */
bool bench_up_bedrock_route(struct bench_up_conn *c, const char *path, size_t n);

/* Counts a request refused for its SigV4 signature (/_bench/stats "aws_auth_refused"). */
void bench_up_count_auth_refused(void);

/* The arguments of tool call <i> of an answer, as JSON, in BENCH_UP_TOOL_PIECES - 1
 * pieces: {"city":"Paris"} for the first call, then Tokyo, Lima and Oslo, so that the
 * arguments of parallel calls cannot be mixed up unnoticed. */
extern const char *const bench_up_tool_args[BENCH_UP_MAX_TOOLS][BENCH_UP_TOOL_PIECES - 1];

/* ---- helpers (bench/upstream.c); a connection's worker only, never block ---- */

/* Appends <s>/<n> JSON-escaped without the quotes. */
enum gw_code bench_up_append_json_inner(struct gw_buf *b, const char *s, size_t n);

/* Appends the arguments of tool call <i>, all pieces: JSON-escaped (for a JSON string)
 * when <escaped>, else as the JSON object itself. */
void bench_up_append_tool_args(struct gw_buf *b, unsigned i, bool escaped);

/* Appends "tool said: CONTENT [ID]" to <b> (a space first unless <b> is empty),
 * JSON-escaped. CONTENT: <content> if a string, the "text" members of its elements
 * joined if an array, its compact JSON if an object; ID: <id> if a string. */
void bench_up_append_tool_said(struct gw_buf *b, json_t *content, json_t *id);

/* The text of one content chunk: --text, or the tool results' echo (JSON-escaped). */
struct gw_str bench_up_chunk_text(const struct bench_up_conn *c);

/* The model of the request, JSON-escaped: a printf "%.*s" pair is (int)len, ptr. */
static inline struct gw_str
bench_up_model(const struct bench_up_conn *c)
{
    return (struct gw_str){c->model.data ? c->model.data : "", c->model.len};
}

/* Paced deltas of the answer: its reasoning deltas and content chunks. */
static inline uint64_t
bench_up_steps(const struct bench_up_conn *c)
{
    return c->p.reasoning + c->p.chunks;
}

/* Whether delta c->sent is a reasoning delta. */
static inline bool
bench_up_in_reasoning(const struct bench_up_conn *c)
{
    return c->sent < c->p.reasoning;
}

/* The index of content chunk c->sent among the content chunks (after the reasoning). */
static inline uint64_t
bench_up_content_index(const struct bench_up_conn *c)
{
    return c->sent - c->p.reasoning;
}

/* Writes <n> bytes now if nothing is queued, queueing what the socket does not take. */
void bench_up_write(struct bench_up_conn *c, const void *p, size_t n);

/* Writes one HTTP chunk holding <pre>, <body> and <post> (either string may be NULL);
 * <last> appends the terminating zero-size chunk. */
void bench_up_send_chunk(struct bench_up_conn *c, const char *pre, const struct gw_buf *body,
                         const char *post, bool last);

/* One SSE event "data: <ev>\n\n" as its own HTTP chunk; <last> ends the body. */
void bench_up_send_event(struct bench_up_conn *c, const struct gw_buf *ev, bool last);

/* One SSE event "event: <name>\ndata: <ev>\n\n" as its own HTTP chunk; <last> ends the body. */
void bench_up_send_named_event(struct bench_up_conn *c, const char *name, const struct gw_buf *ev,
                               bool last);

/* Answers <status> with <body>/<blen> of <ctype> and Content-Length; <extra> is more
 * header lines (each ending in \r\n) or NULL. The answer is then done. */
void bench_up_send_simple(struct bench_up_conn *c, unsigned status, const char *ctype,
                          const char *extra, const char *body, size_t blen);

/* A bench connection on <fd> (accepted, or the bench's end of an HTTP/2 stream's
 * socketpair: <counted> false keeps it out of connections_total). false when out of
 * memory (fd closed). */
bool bench_up_conn_open(struct bench_up_thread *t, int fd, bool counted);

/* HTTP/2 with prior knowledge (bench/upstream_h2.c). */
extern unsigned bench_up_h2_max_streams; /* --h2-max-streams; 0: not announced */
/* true when the first bytes <p>/<n> of a connection begin the HTTP/2 preface; may:
 * fewer than 4 bytes that could still become it. */
bool bench_up_h2_is_preface(const char *p, size_t n);
bool bench_up_h2_may_be_preface(const char *p, size_t n);
/* Takes the connection on <fd> whose first bytes are <first>/<n> as an h2 session.
 * false when out of memory before the fd was taken (it is still the caller's); true
 * once taken, even when the session then failed (the fd is closed). */
bool bench_up_h2_take(struct bench_up_thread *t, int fd, const char *first, size_t n);
/* Appends the h2 members of /_bench/stats (",\"h2_connections\":N,..."). */
void bench_up_h2_stats(struct gw_buf *b);

/* TLS on the listener (bench/upstream_tls.c). */
extern bool bench_up_tls_on; /* --tls-cert given: every accepted connection is TLS */
/* Loads the PEM certificate chain <cert> and key <key> and keeps ALPN to <alpn>
 * ("h2,http/1.1" when NULL); before the workers start. false with a line on stderr. */
bool bench_up_tls_init(const char *cert, const char *key, const char *alpn);
/* Takes the accepted <fd> (always: closed on failure) for a TLS handshake, after which
 * ALPN h2 goes to bench_up_h2_take and anything else to an HTTP/1.1 bench connection. */
void bench_up_tls_take(struct bench_up_thread *t, int fd);
/* Appends the TLS members of /_bench/stats (",\"tls_connections\":N,..."). */
void bench_up_tls_stats(struct gw_buf *b);

#endif
