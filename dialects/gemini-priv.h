/* SPDX-License-Identifier: MIT
 * dialects/gemini-priv.h - what the files of the Gemini shape share (gemini.c,
 * gemini_request.c, gemini_config.c, gemini_render.c, gemini_answer.c, gemini_frames.c)
 * and their unit and fuzz tests: the shape's operations one by one, the request parse's
 * walk, a field collector over dialects/json_scan.h that knows both spellings of a
 * field (the API reads lowerCamel and the proto's snake_case alike), the error status
 * table, number writing.
 * Owns:    nothing beyond each call.
 * Threads: any; a stream state belongs to one thread at a time.
 * See:     dialects/gemini.h, tests/unit/dialects/test_gemini*.c, tests/fuzz/fuzz_gemini.c
 */
#ifndef GW_DIALECTS_GEMINI_PRIV_H
#define GW_DIALECTS_GEMINI_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/str.h"
#include "dialects/canon.h"
#include "dialects/gemini.h"
#include "dialects/json_scan.h"

/* ---- the shape's operations (the rows of dl_gemini_shape; contracts in canon.h) ---- */

/* gemini_request.c */
enum gw_code dl_gemini_request_parse(struct gw_arena *a, const char *body, size_t len,
                                     struct dl_request *out, struct gw_buf *why);
/* gemini_render.c */
enum gw_code dl_gemini_request_render(const struct dl_request *r, struct gw_str model,
                                      uint64_t max_output_default, struct dl_dropped *dropped,
                                      struct gw_buf *out, struct gw_buf *why);
/* gemini_answer.c: upstream side */
void dl_gemini_parse_init(struct dl_parse_state *st);
enum gw_code dl_gemini_event_parse(struct dl_parse_state *st, struct gw_str event,
                                   struct gw_str data, dl_event_fn emit, void *arg);
enum gw_code dl_gemini_answer_parse(const char *body, size_t len, dl_event_fn emit, void *arg);
bool dl_gemini_answer_usage(const char *body, size_t len, struct gw_usage *usage);
/* gemini_frames.c: client side */
void dl_gemini_render_init(struct dl_render_state *st, const struct dl_render_ctx *ctx);
enum gw_code dl_gemini_event_render(struct dl_render_state *st, const struct dl_event *ev,
                                    struct gw_buf *out);
enum gw_code dl_gemini_render_end(struct dl_render_state *st, struct gw_buf *out);
enum gw_code dl_gemini_answer_render(const struct dl_answer *a, const struct dl_render_ctx *ctx,
                                     struct gw_buf *out);
/* gemini.c: errors */
enum gw_code dl_gemini_error_render(enum gw_code code, struct gw_str message, struct gw_buf *out);
enum gw_code dl_gemini_error_frame(enum gw_code code, struct gw_str message, struct gw_buf *out);
enum gw_code dl_gemini_upstream_error_render(int status, struct gw_str type, struct gw_str message,
                                             struct gw_buf *out);
void dl_gemini_upstream_error_read(const char *body, size_t len, int status, struct gw_str *type,
                                   struct gw_str *message);

/* ---- the request parse's walk (gemini_request.c, gemini_config.c) ---- */

/* A growing array of parts in the arena. */
struct dl_gm_plist {
    struct dl_part *v;
    size_t n, cap;
};

struct dl_gm_field;

/* One request parse: the body, where its results go, and what the walk carries. */
struct dl_gm_rp {
    struct dl_json j; /* the body */
    struct gw_arena *a;
    struct dl_request *r;
    struct gw_buf *why;
    size_t cap_messages, cap_system, cap_tools, cap_stop, cap_extras;
    struct dl_gm_plist model; /* the open run of model contents: one assistant message */
    bool model_open;          /* a model content was read since the last user content */
    char *run_buf;            /* the text buffer of the last reasoning run, when joined */
    size_t run_cap;           /* its size */
    size_t tool_config_at;    /* toolConfig's value, read once the tools are known */
    bool has_tool_config;
};

/* A refusal: GW_E_BAD_REQUEST with the reason in p->why (ours, never the body's bytes);
 * GW_E_NOMEM when it cannot be written. */
enum gw_code dl_gm_bad(struct dl_gm_rp *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The refusal of bytes the scanner refused (in <j>): their position only. */
enum gw_code dl_gm_bad_json(struct dl_gm_rp *p, const struct dl_json *j);
/* The bytes of string token <t> of <j> (a slice, or an arena copy when escaped) into
 * <out>; false when out of memory. */
bool dl_gm_take_str(struct dl_gm_rp *p, const struct dl_json *j, const struct dl_json_str *t,
                    struct gw_str *out);
/* The string field <f> into <out>: GW_OK, or a refusal naming <path>.<f> (null and absent
 * leave <out> as it is unless <required>). */
enum gw_code dl_gm_want_str(struct dl_gm_rp *p, const struct dl_json *j,
                            const struct dl_gm_field *f, const char *path, bool required,
                            struct gw_str *out);
/* <x> + <y> copied into <a>; {NULL, 0} when out of memory. */
struct gw_str dl_gm_cat(struct gw_arena *a, struct gw_str x, struct gw_str y);
/* Adds the extra <name> = <raw>; a later copy of a name replaces the earlier one. */
enum gw_code dl_gm_extra(struct dl_gm_rp *p, struct gw_str name, struct gw_str raw);
/* The extra "<prefix><key>" (the key as the client spelt it) = <raw>. */
enum gw_code dl_gm_extra_at(struct dl_gm_rp *p, const char *prefix, const struct dl_json *j,
                            const struct dl_json_str *key, struct gw_str raw);

/* gemini_config.c: the request's tools, toolConfig and generationConfig, at <f>'s value
 * (toolConfig: p->tool_config_at, once the tools are read). */
enum gw_code dl_gm_parse_tools(struct dl_gm_rp *p, const struct dl_gm_field *f);
enum gw_code dl_gm_parse_tool_config(struct dl_gm_rp *p);
enum gw_code dl_gm_parse_generation(struct dl_gm_rp *p, const struct dl_gm_field *f);

/* ---- shared helpers (gemini.c) ---- */

/* What a JSON value is, from its first byte. */
enum dl_gm_kind {
    GK_ABSENT = 0,
    GK_NULL,
    GK_TRUE,
    GK_FALSE,
    GK_STR,
    GK_NUM,
    GK_OBJ,
    GK_ARR,
};

/* One member of interest of an object, as the last occurrence of its key left it. */
struct dl_gm_field {
    const char *name;       /* lowerCamel; the snake_case spelling matches too */
    enum dl_gm_kind kind;   /* GK_ABSENT when the object does not hold it */
    size_t at, end;         /* the value's bytes */
    struct dl_json_str str; /* GK_STR */
    struct dl_json_num num; /* GK_NUM */
    unsigned count;         /* occurrences of the key, either spelling */
};

#define DL_GM_FIELD(lit)                                                                           \
    {                                                                                              \
        lit, GK_ABSENT, 0, 0, {0}, {0}, 0                                                          \
    }

/* True when the decoded key <key> is <camel> ("functionCall") or its snake_case
 * spelling ("function_call"). */
bool dl_gm_key_is(const struct dl_json *j, const struct dl_json_str *key, const char *camel);

/* The kind of the value whose first byte is <c>. */
enum dl_gm_kind dl_gm_kind_of(int c);

/* At '{': validates the object and fills the <n> <fields> it holds (others skipped).
 * False on a scan error (in j->err), or when the value is not an object (E_SYNTAX). */
bool dl_gm_fields(struct dl_json *j, struct dl_gm_field *fields, size_t n);

/* At a value: reads it into <f> (kind, span, string or number token). False on a scan
 * error. */
bool dl_gm_value(struct dl_json *j, struct dl_gm_field *f);

/* A cursor on the already validated value at <at> of the bytes of <doc>. */
static inline struct dl_json
dl_gm_at(const struct dl_json *doc, size_t at)
{
    struct dl_json j;

    dl_json_init(&j, doc->s, doc->n);
    j.i = at;
    return j;
}

/* The raw JSON bytes of field <f>. */
static inline struct gw_str
dl_gm_raw(const struct dl_json *j, const struct dl_gm_field *f)
{
    return (struct gw_str){j->s + f->at, f->end - f->at};
}

/* True when field <f> holds a value (neither absent nor null). */
static inline bool
dl_gm_given(const struct dl_gm_field *f)
{
    return f->kind != GK_ABSENT && f->kind != GK_NULL;
}

/* The number <num> as an integer: an integer, or a real without a fraction (40.0);
 * false otherwise. */
bool dl_gm_int(struct dl_json *j, const struct dl_json_num *num, int64_t *out);
/* True when the string field <f> is <lit>. */
bool dl_gm_is(const struct dl_json *j, const struct dl_gm_field *f, const char *lit);

/* The google.rpc status name for an HTTP <status> (the one table, STYLE.md 7):
 * 400 INVALID_ARGUMENT, 401 UNAUTHENTICATED, ... */
const char *dl_gemini_status_name(int status);
/* The HTTP status a google.rpc status name stands for (0 when unknown). */
int dl_gemini_status_code(struct gw_str name);

/* The generated id of a call without one in a request: "call_<name>_<turn>_<part>"
 * (<turn> the index in contents, <part> in its parts), so that the same history always
 * gets the same ids. Into <a>; {NULL, 0} when out of memory. */
struct gw_str dl_gemini_call_id(struct gw_arena *a, struct gw_str name, size_t turn, size_t part);
/* True when <id> is what dl_gemini_call_id makes for a call named <name>: a renderer
 * for a Gemini upstream does not send ids the client never gave. */
bool dl_gemini_call_id_is_generated(struct gw_str id, struct gw_str name);

#endif
