/* SPDX-License-Identifier: MIT
 * dialects/canon.h - the hub (DESIGN.md 11): one canonical request and one stream of
 * canonical events that every API shape parses into and renders from, so N shapes cost
 * N parsers and N renderers, never N x N converters.
 *
 * A shape's file (dialects/openai.c for Chat Completions, responses.c for Responses,
 * anthropic.c for Messages, later gemini.c, bedrock.c) provides, under its prefix
 * dl_<shape>_:
 *   request  parse  bytes -> struct dl_request      (a client's body; refusals get codes)
 *            render struct dl_request -> bytes      (the body for an upstream of the shape)
 *   events   parse  one upstream frame -> dl_event* (through a dl_event_fn, with state)
 *            render one dl_event -> client frames   (appended to a gw_buf, with state)
 *   answer   parse  a non-streamed body -> the same dl_event* it would have streamed
 *            render struct dl_answer (events folded, canon.c) -> a non-streamed body
 *   error    render a gw code or an upstream error -> body, and -> a stream frame
 *   usage    read from the shape's usage objects into struct gw_usage
 *   models   render a model listing
 * The pipeline calls these through the table of struct dl_shape_ops (canon.c), so a new
 * shape is one file and one row there.
 *
 * Same shape on both sides skips the hub: the body is forwarded with only the model
 * rewritten, the answer relayed byte for byte while the shape's event parser reads it
 * (usage, first content, speed) without any render.
 *
 * Memory: everything a parse produces lives in the request's arena (core/arena.h);
 * strings are slices into the body where no unescaping was needed, arena copies where
 * it was. A dl_event's slices are valid only during the dl_event_fn call.
 * Pure: no I/O, no clock (times are arguments), no threads.
 * Owns:    nothing; the arena owns what is built in it.
 * Threads: any; one request on one thread.
 * See:     dialects/canon.c, dialects/openai.c, dialects/anthropic.c, docs/ARCHITECTURE.md
 */
#ifndef GW_DIALECTS_CANON_H
#define GW_DIALECTS_CANON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/codes.h"
#include "core/row-t.h"
#include "core/str.h"

/* ---- shapes ---- */

enum dl_shape {
    DL_SHAPE_CHAT = 0,  /* OpenAI Chat Completions */
    DL_SHAPE_RESPONSES, /* OpenAI Responses */
    DL_SHAPE_MESSAGES,  /* Anthropic Messages */
    DL_SHAPE_GEMINI,    /* Google Gemini generateContent */
    DL_SHAPE_BEDROCK,   /* AWS Bedrock Converse (upstream side only) */
    DL_SHAPE__COUNT,
};

/* ---- the canonical request ---- */

enum dl_role {
    DL_ROLE_USER = 0,
    DL_ROLE_ASSISTANT,
    DL_ROLE_TOOL, /* tool results (Chat's role "tool"; Messages puts them in a user turn) */
};

enum dl_part_kind {
    DL_PART_TEXT = 0,
    DL_PART_IMAGE,       /* url, or media_type + base64 data */
    DL_PART_DOCUMENT,    /* a file (PDF...): url or media_type + data, title */
    DL_PART_TOOL_CALL,   /* assistant: id, name, arguments (JSON text of an object) */
    DL_PART_TOOL_RESULT, /* call_id, content parts, is_error */
    DL_PART_REASONING,   /* text and signature; redacted: the opaque data in signature */
    DL_PART_OTHER,       /* a block the canonical form does not model (Messages server tool
                          * blocks, search results, file sources...): its type in name, its
                          * JSON in data. Only a renderer of the request's source shape can
                          * send it; every other one refuses (GW_E_UNCONVERTIBLE, naming it) */
};

struct dl_part {
    enum dl_part_kind kind;
    struct gw_str text;       /* TEXT, REASONING; DOCUMENT: title */
    struct gw_str url;        /* IMAGE, DOCUMENT: http(s) or data: URL */
    struct gw_str media_type; /* IMAGE, DOCUMENT with data */
    struct gw_str data;       /* base64 bytes; OTHER: the block's raw JSON */
    struct gw_str detail;     /* IMAGE: Chat's "detail" (low/high/auto), when given */
    struct gw_str id;         /* TOOL_CALL: the call's id, as given (kept across shapes; a
                               * shape without ids gets stable generated ones); REASONING:
                               * the Responses item id ("rs_..."), when a Responses client
                               * sent one (its renderer sends it back with the item) */
    struct gw_str name;       /* TOOL_CALL: the function's name; TOOL_RESULT: the called
                               * function's name when the shape gives it (Gemini needs it);
                               * OTHER: the block's type */
    struct gw_str arguments;  /* TOOL_CALL: JSON text of the arguments object */
    struct gw_str call_id;    /* TOOL_RESULT: the id of the call it answers */
    struct dl_part *content;  /* TOOL_RESULT: its parts (TEXT, IMAGE) */
    size_t n_content;
    bool is_error;           /* TOOL_RESULT */
    struct gw_str signature; /* REASONING: Messages signature / Responses encrypted content /
                              * Gemini thoughtSignature; TOOL_CALL: Gemini thoughtSignature */
    enum dl_shape sig_shape; /* the shape whose upstream made <signature>: opaque to every
                              * other provider, so a renderer sends it only to its own
                              * shape and drops it (by name) for any other */
    bool redacted;           /* REASONING: redacted_thinking (data in signature) */
    bool cache;              /* a cache hint on this part (Messages cache_control) */
    struct gw_str cache_ttl; /* ... its ttl when given ("5m", "1h") */
};

struct dl_message {
    enum dl_role role;
    struct dl_part *parts;
    size_t n_parts;
    struct gw_str name; /* Chat's participant name, when given */
};

struct dl_tool {
    struct gw_str name;
    struct gw_str description;
    struct gw_str parameters;        /* the JSON schema, raw JSON text ("" when none) */
    bool strict;                     /* OpenAI strict mode */
    bool cache;                      /* a cache hint on the tool (Messages cache_control) */
    struct gw_str hosted;            /* a tool the provider defines or runs (web search, code
                                      * execution, computer use...): its JSON as the source shape
                                      * wrote it, "" for a function tool. Parse also sets
                                      * DL_NEED_F_HOSTED_TOOLS; only a renderer of the request's
                                      * source shape can send it */
    struct gw_str source_parameters; /* the schema as the source shape wrote it when parse
                                      * rewrote it into <parameters> for JSON Schema
                                      * consumers (Gemini's OpenAPI subset with upper-case
                                      * types): only a renderer of the source shape sends
                                      * it, "" otherwise */
    struct gw_str freeform;          /* a client tool taking free-form text (Responses
                                      * "custom", e.g. Codex's apply_patch): its JSON as
                                      * written. It is also a function tool of one string
                                      * parameter "input" (name, description, parameters
                                      * set), so every shape can offer it; a call's
                                      * arguments are then {"input": TEXT} */
};

enum dl_tool_choice {
    DL_TOOL_CHOICE_UNSET = 0,
    DL_TOOL_CHOICE_AUTO,
    DL_TOOL_CHOICE_NONE,
    DL_TOOL_CHOICE_REQUIRED, /* Chat "required", Messages "any" */
    DL_TOOL_CHOICE_NAMED,    /* one function, by name */
};

enum dl_format {
    DL_FORMAT_TEXT = 0,
    DL_FORMAT_JSON_OBJECT,
    DL_FORMAT_JSON_SCHEMA,
};

/* A field of the source shape that the canonical form does not model, kept so that a
 * renderer of the same shape family may pass it on and every other renderer drops it by
 * name (DESIGN.md 11: nothing is dropped silently). */
struct dl_extra {
    struct gw_str name; /* the field's name in the source shape, e.g. "context_management" */
    struct gw_str raw;  /* its JSON value, raw text */
};

/* What a request asks for that some shapes cannot give; a renderer for a shape that
 * cannot refuses with GW_E_UNCONVERTIBLE naming the field. Set by parse. */
#define DL_NEED_F_N_CHOICES 0x01u    /* n > 1 */
#define DL_NEED_F_LOGPROBS 0x02u     /* logprobs / top_logprobs */
#define DL_NEED_F_HOSTED_TOOLS 0x04u /* web search, code interpreter, file search, computer use */
#define DL_NEED_F_AUDIO_OUT 0x08u    /* audio output (modalities) */
#define DL_NEED_F_IMAGE_OUT 0x10u    /* image output */

struct dl_request {
    enum dl_shape source; /* the shape it was parsed from: its extras, hosted tools and OTHER
                           * parts can be sent only to that shape */
    struct gw_str model;
    struct dl_part *system; /* TEXT parts (Chat system/developer messages, Messages system) */
    size_t n_system;
    struct dl_message *messages;
    size_t n_messages;
    struct dl_tool *tools;
    size_t n_tools;
    struct dl_tool *offered; /* client tools only the source shape can express (Responses
                              * namespace, tool_search): <hosted> holds their JSON, <name>
                              * their type. The model may use them, the answer does not
                              * depend on them: another shape's upstream gets the request
                              * without them, each dropped by name (dl_request_drop_offered) */
    size_t n_offered;
    enum dl_tool_choice tool_choice;
    struct gw_str tool_choice_name; /* DL_TOOL_CHOICE_NAMED */
    int parallel_tool_calls;        /* -1 unset, 0 no, 1 yes */
    /* sampling; has_* say which were given */
    bool has_temperature, has_top_p, has_top_k, has_seed, has_presence, has_frequency;
    double temperature, top_p, presence_penalty, frequency_penalty;
    int64_t top_k, seed;
    struct gw_str *stop; /* stop sequences */
    size_t n_stop;
    uint64_t max_output_tokens; /* 0: unset */
    /* response format */
    enum dl_format format;
    struct gw_str format_name;          /* JSON_SCHEMA: its name */
    struct gw_str format_schema;        /* JSON_SCHEMA: raw JSON text */
    struct gw_str format_source_schema; /* JSON_SCHEMA: as the source shape wrote it when
                                         * parse rewrote it into <format_schema> (see
                                         * dl_tool.source_parameters), "" otherwise */
    bool format_strict;
    /* reasoning: an effort (Chat/Responses "low".."high") or a budget (Messages, Gemini) */
    bool thinking;                  /* reasoning asked for */
    struct gw_str reasoning_effort; /* "" when unset */
    uint64_t thinking_budget;       /* tokens; 0 when unset */
    /* streaming */
    bool stream;
    bool stream_usage; /* Chat: the client asked for stream_options.include_usage */
    /* cache, identity */
    struct gw_str prompt_cache_key;
    struct gw_str user;     /* Chat user / Messages metadata.user_id */
    struct gw_str metadata; /* raw JSON object, "" when none */
    /* Responses state (DESIGN.md 11) */
    struct gw_str previous_response_id; /* "" when none */
    int store;                          /* -1 unset (the shape's default: kept), 0, 1 */
    unsigned needs;                     /* DL_NEED_F_* */
    struct dl_extra *extras;
    size_t n_extras;
};

/* The fields a render dropped (DESIGN.md 11), for the row and x-gw-dropped. Names are
 * static strings or slices that live as long as the request's arena. */
#define DL_DROPPED_MAX 24

struct dl_dropped {
    struct gw_str name[DL_DROPPED_MAX];
    size_t n;
    bool more; /* more were dropped than fit */
};

/* Adds <name> once (no duplicates). */
void dl_dropped_add(struct dl_dropped *d, struct gw_str name);

/* Names in <d> each tool of <r>->offered as dropped ("tools.<type>") when <target> is not
 * the request's source shape. */
void dl_request_drop_offered(const struct dl_request *r, enum dl_shape target,
                             struct dl_dropped *d);

/* The tool of <r> named <name> when it is a free-form one, else NULL. */
const struct dl_tool *dl_request_freeform(const struct dl_request *r, struct gw_str name);

/* Estimated input tokens of <r>: bytes of text, tool arguments and results, tool schemas
 * and system parts, divided by 4 (DESIGN.md 18), images counted as a fixed 1 000 bytes. */
uint64_t dl_request_input_estimate(const struct dl_request *r);

/* ---- canonical events (one stream for streamed and non-streamed answers) ---- */

enum dl_event_kind {
    DL_EV_START = 0,   /* id, model, created */
    DL_EV_BLOCK_START, /* index, block; TOOL_CALL: id, name */
    DL_EV_DELTA,       /* index, block; text (text, argument fragment, reasoning) or signature */
    DL_EV_BLOCK_STOP,  /* index */
    DL_EV_USAGE,       /* usage (cumulative: the latest replaces the earlier) */
    DL_EV_FINISH,      /* finish, stop_sequence; the last event of a good answer */
    DL_EV_ERROR,       /* error_type, message, status: the upstream failed in its stream */
};

enum dl_block {
    DL_BLOCK_TEXT = 0,
    DL_BLOCK_TOOL_CALL,
    DL_BLOCK_REASONING,
};

enum dl_finish {
    DL_FINISH_NONE = 0,
    DL_FINISH_STOP,           /* end of turn, or a stop sequence */
    DL_FINISH_LENGTH,         /* max tokens */
    DL_FINISH_TOOL_CALLS,     /* the model called tools */
    DL_FINISH_CONTENT_FILTER, /* refusal / safety */
    DL_FINISH_ERROR,
};

struct dl_event {
    enum dl_event_kind kind;
    unsigned index;          /* BLOCK_*, DELTA: the block's index, 0.. in order of start */
    enum dl_block block;     /* BLOCK_START, DELTA */
    struct gw_str id;        /* START: the answer's id; BLOCK_START of a tool call: the call's id */
    struct gw_str model;     /* START */
    uint64_t created;        /* START: seconds since the epoch (0: unknown) */
    struct gw_str name;      /* BLOCK_START of a tool call: the function's name */
    struct gw_str text;      /* DELTA: text, argument JSON fragment or reasoning text */
    struct gw_str signature; /* DELTA of reasoning: the signature (Messages), encrypted
                              * content (Responses), thoughtSignature (Gemini); BLOCK_START
                              * of a tool call: Gemini's thoughtSignature on the call */
    bool redacted;           /* BLOCK_START of reasoning: redacted (data in signature) */
    struct gw_usage usage;   /* USAGE */
    enum dl_finish finish;   /* FINISH */
    struct gw_str stop_sequence; /* FINISH: the stop sequence that ended it, when known */
    struct gw_str error_type;    /* ERROR: the shape's error type, e.g. overloaded_error */
    struct gw_str message;       /* ERROR: its message (logged, never shown to clients) */
    int status;                  /* ERROR: an HTTP status it maps to (0: unknown) */
};

/* Receives one event. A non-zero return stops the parse at once: the parser emits
 * nothing more for that input and returns GW_OK (the receiver knows why it stopped). */
typedef int (*dl_event_fn)(void *arg, const struct dl_event *ev);

/* A parser's receiver and whether it said stop: once it has, nothing more is emitted. */
struct dl_emitter {
    dl_event_fn fn;
    void *arg;
    bool stopped;
};

/* Hands <ev> to the receiver unless it said stop; false once it has. */
static inline bool
dl_emit(struct dl_emitter *e, const struct dl_event *ev)
{
    if (!e->stopped && e->fn(e->arg, ev) != 0)
        e->stopped = true;
    return !e->stopped;
}

/* True when <ev> is content in the sense of the stream-start hold and the latency
 * sample (DESIGN.md 5): a non-empty delta of text, arguments or reasoning, or the start
 * of a tool call. Role and start frames are not. */
bool dl_event_is_content(const struct dl_event *ev);
/* Bytes of content in <ev> (text, argument fragments, reasoning text): the
 * 4-bytes-a-token estimate of DESIGN.md 18. */
size_t dl_event_content_bytes(const struct dl_event *ev);

/* ---- a non-streamed answer: events folded ---- */

struct dl_answer_block {
    enum dl_block block;
    struct gw_str id, name; /* TOOL_CALL */
    struct gw_buf text;     /* text, arguments JSON, or reasoning text (owned, see fini) */
    struct gw_buf signature;
    bool redacted;
};

/* An answer's blocks: at most this many, and a block may start at most this many past
 * the last one started (an index further on fails the answer as the upstream's protocol
 * error: a Messages upstream numbers its own blocks). */
#define DL_ANSWER_MAX_BLOCKS 4096
#define DL_ANSWER_MAX_GAP 16

struct dl_answer {
    struct gw_str id, model; /* arena copies */
    uint64_t created;
    struct dl_answer_block *blocks; /* in index order */
    size_t n_blocks, cap_blocks;
    struct gw_usage usage;
    bool usage_seen;
    enum dl_finish finish;
    struct gw_str stop_sequence;
    bool failed; /* an ERROR event was folded */
    struct gw_str error_type, message;
    int status;
    struct gw_arena *arena; /* where the copies live */
};

/* Prepares <a> to fold events; copies go to <arena>. */
void dl_answer_init(struct dl_answer *a, struct gw_arena *arena);
/* Frees the text buffers (the arena keeps the rest). */
void dl_answer_fini(struct dl_answer *a);
/* Folds one event into <a>: a dl_event_fn (arg: struct dl_answer *). Returns non-zero
 * (stop) with a->failed set: status 500 when out of memory, 502 for a block index out
 * of the bounds above. */
int dl_answer_fold(void *arg, const struct dl_event *ev);

/* ---- the shapes' table ---- */

/* Stream-parse state of any shape: opaque storage each shape's parser uses as it wants
 * (its own struct must fit; checked with a static assert in its file). */
struct dl_parse_state {
    union {
        uint64_t u64[32];
        void *ptr[32];
    } u;
};

/* Stream-render state of any shape (same rule). */
struct dl_render_state {
    union {
        uint64_t u64[48];
        void *ptr[48];
    } u;
};

/* What a render for a client needs besides the events: the model name the client asked
 * for (answers carry it), the answer's id and created time when the upstream gave none. */
struct dl_render_ctx {
    struct gw_str model;    /* the model the client asked for */
    struct gw_str id;       /* fallback id, e.g. from the request id */
    uint64_t created;       /* seconds since the epoch */
    bool stream_usage;      /* Chat: send the usage chunk (include_usage) */
    enum dl_shape upstream; /* the shape the events came from (signatures, below) */
    bool json_array;        /* Gemini: a stream asked without ?alt=sse is one JSON array
                             * ("[" obj "," obj ... "]"), not SSE */
    struct gw_arena *arena;
    const struct dl_request *req; /* the client's request when parsed (NULL: unknown): a
                                   * renderer may look up its tools (free-form ones) */
};

struct dl_shape_ops {
    enum dl_shape shape;
    const char *name; /* "chat", "messages", ... for logs and docs */
    /* request */
    enum gw_code (*request_parse)(struct gw_arena *a, const char *body, size_t len,
                                  struct dl_request *out, struct gw_buf *why);
    enum gw_code (*request_render)(const struct dl_request *r, struct gw_str model,
                                   uint64_t max_output_default, struct dl_dropped *dropped,
                                   struct gw_buf *out, struct gw_buf *why);
    /* stream events: one SSE event (its event name and data) of an upstream */
    void (*parse_init)(struct dl_parse_state *st);
    enum gw_code (*event_parse)(struct dl_parse_state *st, struct gw_str event, struct gw_str data,
                                dl_event_fn emit, void *arg);
    /* a non-streamed answer body of an upstream, as the events it would have streamed */
    enum gw_code (*answer_parse)(const char *body, size_t len, dl_event_fn emit, void *arg);
    /* client side: frames of one event, and the whole answer folded */
    void (*render_init)(struct dl_render_state *st, const struct dl_render_ctx *ctx);
    enum gw_code (*event_render)(struct dl_render_state *st, const struct dl_event *ev,
                                 struct gw_buf *out);
    /* the end of a good stream: called once, after the last event, when the upstream's
     * stream ended after a FINISH (a stream that ends without one is broken: the caller
     * writes error_frame instead). Writes what the renderer held back: a FINISH may be
     * held so that a USAGE coming after it (Chat sends usage after the finish chunk) is
     * in the frame that ends the answer (Messages message_delta + message_stop). NULL
     * when a shape holds nothing back. */
    enum gw_code (*render_end)(struct dl_render_state *st, struct gw_buf *out);
    enum gw_code (*answer_render)(const struct dl_answer *a, const struct dl_render_ctx *ctx,
                                  struct gw_buf *out);
    /* errors, client side: the body of a gateway refusal with <code> (its HTTP status is
     * gw_code_http_status(code); the shape's own error type and the SDK-visible code
     * come from one mapping table in the shape's file), and the frame that ends a
     * stream broken after content (DESIGN.md 11: Chat data: {"error":...}, Messages
     * event: error with overloaded_error, ...) */
    enum gw_code (*error_render)(enum gw_code code, struct gw_str message, struct gw_buf *out);
    enum gw_code (*error_frame)(enum gw_code code, struct gw_str message, struct gw_buf *out);
    /* ... the same end for a stream this renderer wrote (a converted one), when the frame
     * needs its state: Responses' response.failed names the stream's own response, a
     * Gemini JSON array is closed after the error object. NULL when error_frame serves. */
    enum gw_code (*render_abort)(struct dl_render_state *st, enum gw_code code,
                                 struct gw_str message, struct gw_buf *out);
    /* an upstream's own error answer (a 4xx passed back) in this shape for the client:
     * <status> and what upstream_error_read found */
    enum gw_code (*upstream_error_render)(int status, struct gw_str type, struct gw_str message,
                                          struct gw_buf *out);
    /* upstream side: read an error body of this shape (type and message slices into
     * <body>; generic ones from <status> when it is not one) */
    void (*upstream_error_read)(const char *body, size_t len, int status, struct gw_str *type,
                                struct gw_str *message);
    /* usage of a non-streamed answer body of this shape, without a full parse; false
     * when it carries none */
    bool (*answer_usage)(const char *body, size_t len, struct gw_usage *usage);
};

/* Same shape on both sides (DESIGN.md 11): appends to <out> the client's <body> with the
 * value of its top-level "model" replaced by <model> (a JSON string), every other byte
 * as it came. GW_OK; GW_E_BAD_REQUEST when <body> is not a JSON object with a "model";
 * GW_E_NOMEM. */
enum gw_code dl_splice_model(const char *body, size_t len, struct gw_str model, struct gw_buf *out);

/* Model listings in the Messages shape (dialects/anthropic_models.c); the Chat shape's
 * is dl_openai_models_render. <single>: one model object, else the paged list. */
struct dl_model_entry;
enum gw_code dl_anthropic_models_render(const struct dl_model_entry *v, size_t n, bool single,
                                        struct gw_buf *out);
/* ... and in the Gemini shape (dialects/gemini.c). */
enum gw_code dl_gemini_models_render(const struct dl_model_entry *v, size_t n, bool single,
                                     struct gw_buf *out);

/* Signatures across shapes. A reasoning signature (Messages signature, Responses
 * encrypted content, Gemini thoughtSignature) is opaque to every provider but the one
 * that made it. When a client of another shape gets one, the renderer writes it tagged
 * with its origin, "gw1.<shape name>." + signature, so that when the client sends it
 * back the parser knows where it came from (dl_part.sig_shape) and only a renderer of
 * that shape sends it on. */
/* Appends <sig> as a JSON string for a client of <client> shape, tagged when <origin>
 * differs. */
enum gw_code dl_sig_append_json(struct gw_buf *out, enum dl_shape client, enum dl_shape origin,
                                struct gw_str sig);
/* The shape that made <*sig> as a client of <own> shape sent it back: the tag's, with
 * <*sig> narrowed to what follows the tag, else <own>. */
enum dl_shape dl_sig_origin(struct gw_str *sig, enum dl_shape own);
/* "chat", "responses", "messages", "gemini", "bedrock". */
const char *dl_shape_name(enum dl_shape shape);

/* The operations of <shape>, or NULL when this build has none. */
const struct dl_shape_ops *dl_shape_ops(enum dl_shape shape);

#endif
