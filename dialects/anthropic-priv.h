/* SPDX-License-Identifier: MIT
 * dialects/anthropic-priv.h - what the files of the Anthropic Messages shape share
 * (dialects/anthropic.c, anthropic_request.c, anthropic_answer.c) and their unit and
 * fuzz tests: the shape's operations one by one, a small field collector over
 * dialects/json_scan.h, the error type table, number writing. The OpenAI Responses
 * shape's files (dialects/responses*.c) use the collector and the number writers too.
 * Owns:    nothing beyond each call.
 * Threads: any; a stream state belongs to one thread at a time.
 * See:     dialects/anthropic.c, tests/unit/dialects/test_anthropic*.c,
 *          tests/fuzz/fuzz_anthropic.c, tests/fuzz/fuzz_messages.c
 */
#ifndef GW_DIALECTS_ANTHROPIC_PRIV_H
#define GW_DIALECTS_ANTHROPIC_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/str.h"
#include "dialects/anthropic.h"
#include "dialects/canon.h"
#include "dialects/json_scan.h"

/* ---- the shape's operations (the rows of dl_anthropic_shape; contracts in canon.h) ---- */

/* anthropic_request.c */
enum gw_code dl_anthropic_request_parse(struct gw_arena *a, const char *body, size_t len,
                                        struct dl_request *out, struct gw_buf *why);
enum gw_code dl_anthropic_request_render(const struct dl_request *r, struct gw_str model,
                                         uint64_t max_output_default, struct dl_dropped *dropped,
                                         struct gw_buf *out, struct gw_buf *why);
/* anthropic_answer.c: upstream side */
void dl_anthropic_parse_init(struct dl_parse_state *st);
enum gw_code dl_anthropic_event_parse(struct dl_parse_state *st, struct gw_str event,
                                      struct gw_str data, dl_event_fn emit, void *arg);
enum gw_code dl_anthropic_answer_parse(const char *body, size_t len, dl_event_fn emit, void *arg);
bool dl_anthropic_answer_usage(const char *body, size_t len, struct gw_usage *usage);
/* anthropic_answer.c: client side */
void dl_anthropic_render_init(struct dl_render_state *st, const struct dl_render_ctx *ctx);
enum gw_code dl_anthropic_event_render(struct dl_render_state *st, const struct dl_event *ev,
                                       struct gw_buf *out);
enum gw_code dl_anthropic_render_end(struct dl_render_state *st, struct gw_buf *out);
enum gw_code dl_anthropic_answer_render(const struct dl_answer *a, const struct dl_render_ctx *ctx,
                                        struct gw_buf *out);
/* anthropic.c: errors */
enum gw_code dl_anthropic_error_render(enum gw_code code, struct gw_str message,
                                       struct gw_buf *out);
enum gw_code dl_anthropic_error_frame(enum gw_code code, struct gw_str message, struct gw_buf *out);
enum gw_code dl_anthropic_upstream_error_render(int status, struct gw_str type,
                                                struct gw_str message, struct gw_buf *out);
void dl_anthropic_upstream_error_read(const char *body, size_t len, int status, struct gw_str *type,
                                      struct gw_str *message);

/* ---- shared helpers (anthropic.c) ---- */

/* What a JSON value is, from its first byte. */
enum dl_anth_kind {
    DA_ABSENT = 0,
    DA_NULL,
    DA_TRUE,
    DA_FALSE,
    DA_STR,
    DA_NUM,
    DA_OBJ,
    DA_ARR,
};

/* One member of interest of an object, as the last occurrence of its key left it. */
struct dl_anth_field {
    const char *name;
    size_t len;
    enum dl_anth_kind kind;
    size_t at, end;            /* the value's bytes */
    struct dl_json_str str;    /* DA_STR */
    struct dl_json_num num;    /* DA_NUM */
    unsigned count;            /* occurrences of the key */
    struct dl_anth_field *sub; /* when set, an object value is scanned in place for these */
    size_t nsub;
};

#define DL_ANTH_FIELD(lit)                                                                         \
    {                                                                                              \
        lit, sizeof(lit) - 1, DA_ABSENT, 0, 0, {0}, {0}, 0, NULL, 0                                \
    }

/* At '{': validates the object and fills the <n> <fields> it holds (others skipped); a
 * field with <sub> has its object value's members collected into them in the same pass
 * (a later copy of the key starts them afresh). False on a scan error (in j->err). */
bool dl_anthropic_fields(struct dl_json *j, struct dl_anth_field *fields, size_t n);

/* A cursor on the already validated value at <at> of the bytes of <doc>. */
static inline struct dl_json
dl_anthropic_at(const struct dl_json *doc, size_t at)
{
    struct dl_json j;

    dl_json_init(&j, doc->s, doc->n);
    j.i = at;
    return j;
}

/* True when the string field <f> is <lit>. */
static inline bool
dl_anthropic_is(const struct dl_json *j, const struct dl_anth_field *f, const char *lit)
{
    return f->kind == DA_STR && dl_json_key_is(j, &f->str, lit, strlen(lit));
}

/* Appends <v> as JSON: the shortest decimal that reads back as the same double, with a
 * ".0" when it would read back as an integer. */
enum gw_code dl_anthropic_append_double(struct gw_buf *out, double v);

/* The Messages error type for an HTTP <status> (the one table, STYLE.md 7), and the
 * status an error type stands for (0 when unknown). */
const char *dl_anthropic_error_type(int status);
int dl_anthropic_error_status(struct gw_str type);

#endif
