/* SPDX-License-Identifier: MIT
 * dialects/canon.c - what the hub does itself (see dialects/canon.h): the dropped-field
 * list, the input estimate of a canonical request, what counts as content in an event,
 * folding events into a non-streamed answer, and the table of the shapes' operations.
 * Owns:    nothing; a dl_answer's text buffers until dl_answer_fini.
 * Threads: any; one request on one thread.
 * See:     dialects/canon.h, tests/unit/dialects/test_canon.c
 */
#include "dialects/canon.h"

#include <string.h>

#include "dialects/json_scan.h"

/* Each shape's file defines its row (dialects/openai.c, dialects/responses.c,
 * dialects/anthropic.c, dialects/gemini.c, dialects/bedrock.c). */
extern const struct dl_shape_ops dl_openai_shape;
extern const struct dl_shape_ops dl_responses_shape;
extern const struct dl_shape_ops dl_anthropic_shape;
extern const struct dl_shape_ops dl_gemini_shape;
extern const struct dl_shape_ops dl_bedrock_shape;

#define DL_IMAGE_ESTIMATE_BYTES 1000u

/* ---- dropped fields ---- */

void
dl_dropped_add(struct dl_dropped *d, struct gw_str name)
{
    size_t i;

    for (i = 0; i < d->n; i++)
        if (gw_str_eq(d->name[i], name))
            return;
    if (d->n == DL_DROPPED_MAX) {
        d->more = true;
        return;
    }
    d->name[d->n++] = name;
}

/* ---- tools only some shapes have ---- */

void
dl_request_drop_offered(const struct dl_request *r, enum dl_shape target, struct dl_dropped *d)
{
    static const struct {
        const char *type, *name;
    } names[] = {{"namespace", "tools.namespace"}, {"tool_search", "tools.tool_search"}};
    size_t i, k;

    if (target == r->source)
        return;
    for (i = 0; i < r->n_offered; i++) {
        struct gw_str name = GW_STR_LIT("tools");

        for (k = 0; k < sizeof(names) / sizeof(names[0]); k++)
            if (gw_str_eq(r->offered[i].name, gw_str_c(names[k].type)))
                name = gw_str_c(names[k].name);
        dl_dropped_add(d, name);
    }
}

const struct dl_tool *
dl_request_freeform(const struct dl_request *r, struct gw_str name)
{
    size_t i;

    for (i = 0; r && i < r->n_tools; i++)
        if (r->tools[i].freeform.len && gw_str_eq(r->tools[i].name, name))
            return &r->tools[i];
    return NULL;
}

/* ---- the input estimate ---- */

static uint64_t
parts_bytes(const struct dl_part *p, size_t n)
{
    uint64_t b = 0;
    size_t i;

    for (i = 0; i < n; i++) {
        switch (p[i].kind) {
        case DL_PART_TEXT:
        case DL_PART_REASONING: b += p[i].text.len; break;
        case DL_PART_IMAGE:
        case DL_PART_DOCUMENT: b += DL_IMAGE_ESTIMATE_BYTES; break;
        case DL_PART_TOOL_CALL: b += p[i].name.len + p[i].arguments.len; break;
        case DL_PART_TOOL_RESULT: b += parts_bytes(p[i].content, p[i].n_content); break;
        case DL_PART_OTHER: b += p[i].data.len; break;
        }
    }
    return b;
}

uint64_t
dl_request_input_estimate(const struct dl_request *r)
{
    uint64_t b = parts_bytes(r->system, r->n_system);
    size_t i;

    for (i = 0; i < r->n_messages; i++)
        b += parts_bytes(r->messages[i].parts, r->messages[i].n_parts);
    for (i = 0; i < r->n_tools; i++)
        b += r->tools[i].name.len + r->tools[i].description.len + r->tools[i].parameters.len +
             r->tools[i].hosted.len;
    return b / 4;
}

/* ---- events ---- */

bool
dl_event_is_content(const struct dl_event *ev)
{
    if (ev->kind == DL_EV_DELTA)
        return ev->text.len > 0;
    return ev->kind == DL_EV_BLOCK_START && ev->block == DL_BLOCK_TOOL_CALL;
}

size_t
dl_event_content_bytes(const struct dl_event *ev)
{
    return ev->kind == DL_EV_DELTA ? ev->text.len : 0;
}

/* ---- folding events into an answer ---- */

void
dl_answer_init(struct dl_answer *a, struct gw_arena *arena)
{
    memset(a, 0, sizeof(*a));
    a->arena = arena;
}

void
dl_answer_fini(struct dl_answer *a)
{
    size_t i;

    for (i = 0; i < a->n_blocks; i++) {
        gw_buf_fini(&a->blocks[i].text);
        gw_buf_fini(&a->blocks[i].signature);
    }
    a->n_blocks = 0;
}

/* The fold fails: out of memory (500), or an index an upstream's answer gave that must
 * not size the arena (502: Messages numbers its blocks itself). Returns 1 (stop). */
static int
fold_failed(struct dl_answer *a, int status, struct gw_str message)
{
    a->failed = true;
    a->status = status;
    a->error_type = GW_STR_LIT("api_error");
    a->message = message;
    return 1;
}

static int
fold_nomem(struct dl_answer *a)
{
    return fold_failed(a, 500, GW_STR_LIT("out of memory"));
}

/* The block of <index>, started now when it is new: blocks are numbered in the order they
 * start, and a delta for a block never started starts it (some shapes have no block
 * events: Chat's deltas carry their index). NULL when out of memory, or when <index> is
 * more than DL_ANSWER_MAX_GAP past the blocks so far or not below DL_ANSWER_MAX_BLOCKS,
 * with a->failed set either way. */
static struct dl_answer_block *
fold_block(struct dl_answer *a, unsigned index, enum dl_block kind)
{
    if (index >= DL_ANSWER_MAX_BLOCKS || index > a->n_blocks + DL_ANSWER_MAX_GAP) {
        fold_failed(a, 502, GW_STR_LIT("the upstream's answer numbers its blocks out of order"));
        return NULL;
    }
    while (a->n_blocks <= index) {
        struct dl_answer_block *b = gw_arena_push(a->arena, (void **)&a->blocks, &a->n_blocks,
                                                  &a->cap_blocks, sizeof(*a->blocks));

        if (!b) {
            fold_nomem(a);
            return NULL;
        }
        b->block = kind;
    }
    return &a->blocks[index];
}

int
dl_answer_fold(void *arg, const struct dl_event *ev)
{
    struct dl_answer *a = arg;
    struct dl_answer_block *b;

    switch (ev->kind) {
    case DL_EV_START:
        a->id = gw_arena_str(a->arena, ev->id);
        a->model = gw_arena_str(a->arena, ev->model);
        a->created = ev->created;
        if ((ev->id.len && !a->id.ptr) || (ev->model.len && !a->model.ptr))
            return fold_nomem(a);
        break;
    case DL_EV_BLOCK_START:
        b = fold_block(a, ev->index, ev->block);
        if (!b)
            return 1;
        b->block = ev->block;
        b->redacted = ev->redacted;
        if (ev->block == DL_BLOCK_TOOL_CALL) {
            b->id = gw_arena_str(a->arena, ev->id);
            b->name = gw_arena_str(a->arena, ev->name);
            if ((ev->id.len && !b->id.ptr) || (ev->name.len && !b->name.ptr) ||
                gw_buf_append_str(&b->signature, ev->signature) != GW_OK)
                return fold_nomem(a);
        }
        break;
    case DL_EV_DELTA:
        b = fold_block(a, ev->index, ev->block);
        if (!b)
            return 1;
        if (gw_buf_append_str(&b->text, ev->text) != GW_OK ||
            gw_buf_append_str(&b->signature, ev->signature) != GW_OK)
            return fold_nomem(a);
        break;
    case DL_EV_BLOCK_STOP: break;
    case DL_EV_USAGE:
        a->usage = ev->usage;
        a->usage_seen = true;
        break;
    case DL_EV_FINISH:
        a->finish = ev->finish;
        a->stop_sequence = gw_arena_str(a->arena, ev->stop_sequence);
        break;
    case DL_EV_ERROR:
        a->failed = true;
        a->error_type = gw_arena_str(a->arena, ev->error_type);
        a->message = gw_arena_str(a->arena, ev->message);
        a->status = ev->status;
        break;
    }
    return 0;
}

/* ---- same shape: the model spliced ---- */

enum gw_code
dl_splice_model(const char *body, size_t len, struct gw_str model, struct gw_buf *out)
{
    struct dl_json j;
    struct dl_json_str k;
    bool first = true, found = false;
    size_t vstart = 0, vend = 0;
    int r;

    dl_json_init(&j, body, len);
    if (dl_json_peek(&j) != '{' || !dl_json_obj_enter(&j))
        return GW_E_BAD_REQUEST;
    while ((r = dl_json_obj_next(&j, &first, &k)) > 0) {
        size_t at = j.i;

        if (!dl_json_skip(&j, NULL))
            return GW_E_BAD_REQUEST;
        if (j.depth == 1 && dl_json_key_is(&j, &k, "model", 5)) {
            /* The last one, as the parse read it (a duplicate "model" is refused there). */
            vstart = at;
            vend = j.i;
            found = true;
        }
    }
    if (r < 0 || !found || !dl_json_end(&j))
        return GW_E_BAD_REQUEST;
    if (gw_buf_reserve(out, len + model.len + 8) != GW_OK ||
        gw_buf_append(out, body, vstart) != GW_OK || gw_buf_append_json_str(out, model) != GW_OK ||
        gw_buf_append(out, body + vend, len - vend) != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

/* ---- signatures across shapes ---- */

static const char *const shape_names[DL_SHAPE__COUNT] = {"chat", "responses", "messages", "gemini",
                                                         "bedrock"};

const char *
dl_shape_name(enum dl_shape shape)
{
    return (unsigned)shape < DL_SHAPE__COUNT ? shape_names[shape] : "unknown";
}

enum gw_code
dl_sig_append_json(struct gw_buf *out, enum dl_shape client, enum dl_shape origin,
                   struct gw_str sig)
{
    if (origin == client || sig.len == 0 || (unsigned)origin >= DL_SHAPE__COUNT)
        return gw_buf_append_json_str(out, sig);
    if (gw_buf_append(out, "\"gw1.", 5) != GW_OK ||
        gw_buf_append_cstr(out, shape_names[origin]) != GW_OK ||
        gw_buf_append(out, ".", 1) != GW_OK || gw_buf_append_json_inner(out, sig) != GW_OK ||
        gw_buf_append(out, "\"", 1) != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

enum dl_shape
dl_sig_origin(struct gw_str *sig, enum dl_shape own)
{
    unsigned i;

    if (sig->len < 5 || memcmp(sig->ptr, "gw1.", 4) != 0)
        return own;
    for (i = 0; i < DL_SHAPE__COUNT; i++) {
        size_t n = strlen(shape_names[i]);

        if (sig->len > 5 + n && memcmp(sig->ptr + 4, shape_names[i], n) == 0 &&
            sig->ptr[4 + n] == '.') {
            sig->ptr += 5 + n;
            sig->len -= 5 + n;
            return (enum dl_shape)i;
        }
    }
    return own;
}

/* ---- the shapes' table ---- */

const struct dl_shape_ops *
dl_shape_ops(enum dl_shape shape)
{
    switch (shape) {
    case DL_SHAPE_CHAT: return &dl_openai_shape;
    case DL_SHAPE_RESPONSES: return &dl_responses_shape;
    case DL_SHAPE_MESSAGES: return &dl_anthropic_shape;
    case DL_SHAPE_GEMINI: return &dl_gemini_shape;
    case DL_SHAPE_BEDROCK: return &dl_bedrock_shape;
    case DL_SHAPE__COUNT: break;
    }
    return NULL;
}
