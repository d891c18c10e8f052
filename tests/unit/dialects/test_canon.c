/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/test_canon.c - what the hub does itself (dialects/canon.c): the
 * same-shape model splice keeps every other byte, the dropped list keeps one copy of a
 * name and says when it overflows, the input estimate counts every part kind, content
 * events are what the hold waits for, events fold into an answer, and a signature made
 * by another shape's upstream goes to a client tagged and comes back knowing its origin.
 * See: dialects/canon.c
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dialects/canon.h"

static void
test_canon_splice_model_keeps_every_other_byte(void **state)
{
    const char body[] = "{ \"a\" : [1,{\"model\":\"inner\"}],\n \"model\" :\"x\\u0041\" , \"z\":2}";
    const char want[] =
        "{ \"a\" : [1,{\"model\":\"inner\"}],\n \"model\" :\"new \\\"m\\\"\" , \"z\":2}";
    struct gw_buf out = {0};

    (void)state;
    assert_int_equal(dl_splice_model(body, sizeof(body) - 1, GW_STR_LIT("new \"m\""), &out), GW_OK);
    assert_int_equal(out.len, sizeof(want) - 1);
    assert_memory_equal(out.data, want, out.len);
    gw_buf_fini(&out);
}

static void
test_canon_splice_model_refuses_what_has_no_model(void **state)
{
    static const char *const bad[] = {"{\"a\":1}", "[{\"model\":\"x\"}]", "{\"model\":\"x\"",
                                      "{\"model\":\"x\"} tail", ""};
    struct gw_buf out = {0};
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(dl_splice_model(bad[i], strlen(bad[i]), GW_STR_LIT("m"), &out),
                         GW_E_BAD_REQUEST);
        assert_int_equal(out.len, 0);
    }
    gw_buf_fini(&out);
}

static void
test_canon_dropped_names_once_and_notes_overflow(void **state)
{
    struct dl_dropped d;
    char names[DL_DROPPED_MAX + 1][8];
    size_t i;

    (void)state;
    memset(&d, 0, sizeof(d));
    dl_dropped_add(&d, GW_STR_LIT("top_k"));
    dl_dropped_add(&d, GW_STR_LIT("top_k"));
    assert_int_equal(d.n, 1);
    for (i = 0; i <= DL_DROPPED_MAX; i++) {
        snprintf(names[i], sizeof(names[i]), "f%zu", i);
        dl_dropped_add(&d, gw_str_c(names[i]));
    }
    assert_int_equal(d.n, DL_DROPPED_MAX);
    assert_true(d.more);
}

static void
test_canon_input_estimate_counts_every_part(void **state)
{
    struct dl_part sys = {.kind = DL_PART_TEXT, .text = GW_STR_LIT("12345678")};
    struct dl_part inner = {.kind = DL_PART_TEXT, .text = GW_STR_LIT("abcd")};
    struct dl_part parts[3] = {
        {.kind = DL_PART_IMAGE}, /* 1000 */
        {.kind = DL_PART_TOOL_CALL, .name = GW_STR_LIT("fn"), .arguments = GW_STR_LIT("{}")},
        {.kind = DL_PART_TOOL_RESULT, .content = &inner, .n_content = 1},
    };
    struct dl_message m = {.role = DL_ROLE_USER, .parts = parts, .n_parts = 3};
    struct dl_tool t = {.name = GW_STR_LIT("fn"), .parameters = GW_STR_LIT("{\"a\":1}")};
    struct dl_request r;

    (void)state;
    memset(&r, 0, sizeof(r));
    r.system = &sys;
    r.n_system = 1;
    r.messages = &m;
    r.n_messages = 1;
    r.tools = &t;
    r.n_tools = 1;
    /* 8 + 1000 + 2 + 2 + 4 + 2 + 7 = 1025 bytes */
    assert_int_equal(dl_request_input_estimate(&r), 1025 / 4);
}

static void
test_canon_content_is_a_delta_with_text_or_a_tool_call_start(void **state)
{
    struct dl_event e;

    (void)state;
    memset(&e, 0, sizeof(e));
    e.kind = DL_EV_START;
    assert_false(dl_event_is_content(&e));
    e.kind = DL_EV_BLOCK_START;
    e.block = DL_BLOCK_TEXT;
    assert_false(dl_event_is_content(&e));
    e.block = DL_BLOCK_TOOL_CALL;
    assert_true(dl_event_is_content(&e));
    e.kind = DL_EV_DELTA;
    e.text = GW_STR_LIT("");
    assert_false(dl_event_is_content(&e));
    e.text = GW_STR_LIT("hi!");
    assert_true(dl_event_is_content(&e));
    assert_int_equal(dl_event_content_bytes(&e), 3);
    e.kind = DL_EV_USAGE;
    assert_int_equal(dl_event_content_bytes(&e), 0);
}

static void
test_canon_events_fold_into_an_answer(void **state)
{
    struct gw_arena arena;
    struct dl_answer a;
    struct dl_event e[8];
    size_t i;

    (void)state;
    gw_arena_init(&arena);
    dl_answer_init(&a, &arena);
    memset(e, 0, sizeof(e));
    e[0] = (struct dl_event){
        .kind = DL_EV_START, .id = GW_STR_LIT("msg_1"), .model = GW_STR_LIT("m"), .created = 7};
    e[1] = (struct dl_event){.kind = DL_EV_DELTA, .index = 0, .text = GW_STR_LIT("he")};
    e[2] = (struct dl_event){.kind = DL_EV_DELTA, .index = 0, .text = GW_STR_LIT("llo")};
    e[3] = (struct dl_event){.kind = DL_EV_BLOCK_START,
                             .index = 1,
                             .block = DL_BLOCK_TOOL_CALL,
                             .id = GW_STR_LIT("call_1"),
                             .name = GW_STR_LIT("fn")};
    e[4] = (struct dl_event){.kind = DL_EV_DELTA,
                             .index = 1,
                             .block = DL_BLOCK_TOOL_CALL,
                             .text = GW_STR_LIT("{\"a\":1}")};
    e[5] = (struct dl_event){.kind = DL_EV_FINISH, .finish = DL_FINISH_TOOL_CALLS};
    e[6] = (struct dl_event){.kind = DL_EV_USAGE, .usage = {.input_tokens = 3, .output_tokens = 4}};
    for (i = 0; i < 7; i++)
        assert_int_equal(dl_answer_fold(&a, &e[i]), 0);
    assert_memory_equal(a.id.ptr, "msg_1", 5);
    assert_int_equal(a.created, 7);
    assert_int_equal(a.n_blocks, 2);
    assert_int_equal(a.blocks[0].block, DL_BLOCK_TEXT);
    assert_int_equal(a.blocks[0].text.len, 5);
    assert_memory_equal(a.blocks[0].text.data, "hello", 5);
    assert_int_equal(a.blocks[1].block, DL_BLOCK_TOOL_CALL);
    assert_memory_equal(a.blocks[1].id.ptr, "call_1", 6);
    assert_memory_equal(a.blocks[1].text.data, "{\"a\":1}", 7);
    assert_int_equal(a.finish, DL_FINISH_TOOL_CALLS);
    assert_true(a.usage_seen);
    assert_int_equal(a.usage.output_tokens, 4);
    assert_false(a.failed);
    dl_answer_fini(&a);
    gw_arena_fini(&arena);
}

/* A Messages upstream numbers its own blocks: a delta for block 4 000 000 000 must fail
 * the answer as the upstream's error, not start four billion blocks. */
static void
test_canon_fold_refuses_a_block_index_far_past_the_last(void **state)
{
    struct gw_arena arena;
    struct dl_answer a;
    struct dl_event e = {.kind = DL_EV_DELTA, .block = DL_BLOCK_TEXT, .text = GW_STR_LIT("x")};
    unsigned i;

    (void)state;
    gw_arena_init(&arena);
    dl_answer_init(&a, &arena);
    /* a gap up to DL_ANSWER_MAX_GAP starts the blocks before it */
    e.index = DL_ANSWER_MAX_GAP;
    assert_int_equal(dl_answer_fold(&a, &e), 0);
    assert_int_equal(a.n_blocks, DL_ANSWER_MAX_GAP + 1);
    assert_false(a.failed);
    /* one further is refused, with nothing started */
    e.index = 2 * DL_ANSWER_MAX_GAP + 2;
    assert_int_not_equal(dl_answer_fold(&a, &e), 0);
    assert_true(a.failed);
    assert_int_equal(a.status, 502);
    assert_int_equal(a.n_blocks, DL_ANSWER_MAX_GAP + 1);
    dl_answer_fini(&a);

    /* a block start far away: the same */
    dl_answer_init(&a, &arena);
    e.kind = DL_EV_BLOCK_START;
    e.index = 4000000000u;
    assert_int_not_equal(dl_answer_fold(&a, &e), 0);
    assert_true(a.failed);
    assert_int_equal(a.status, 502);
    assert_int_equal(a.n_blocks, 0);
    dl_answer_fini(&a);

    /* blocks in order stop at DL_ANSWER_MAX_BLOCKS */
    dl_answer_init(&a, &arena);
    for (i = 0; i < DL_ANSWER_MAX_BLOCKS; i++) {
        e.index = i;
        assert_int_equal(dl_answer_fold(&a, &e), 0);
    }
    e.index = DL_ANSWER_MAX_BLOCKS;
    assert_int_not_equal(dl_answer_fold(&a, &e), 0);
    assert_int_equal(a.status, 502);
    assert_int_equal(a.n_blocks, DL_ANSWER_MAX_BLOCKS);
    dl_answer_fini(&a);
    gw_arena_fini(&arena);
}

static void
test_canon_signature_of_another_shape_is_tagged_and_read_back(void **state)
{
    struct gw_buf out = {0};
    struct gw_str sig;

    (void)state;
    /* the same shape: as it came */
    assert_int_equal(
        dl_sig_append_json(&out, DL_SHAPE_MESSAGES, DL_SHAPE_MESSAGES, GW_STR_LIT("abc")), GW_OK);
    assert_string_equal(out.data, "\"abc\"");
    gw_buf_reset(&out);
    /* another shape: tagged, escapes kept */
    assert_int_equal(
        dl_sig_append_json(&out, DL_SHAPE_MESSAGES, DL_SHAPE_RESPONSES, GW_STR_LIT("a\"b")), GW_OK);
    assert_string_equal(out.data, "\"gw1.responses.a\\\"b\"");
    gw_buf_fini(&out);

    sig = GW_STR_LIT("gw1.gemini.XYZ");
    assert_int_equal(dl_sig_origin(&sig, DL_SHAPE_MESSAGES), DL_SHAPE_GEMINI);
    assert_int_equal(sig.len, 3);
    assert_memory_equal(sig.ptr, "XYZ", 3);
    sig = GW_STR_LIT("plain");
    assert_int_equal(dl_sig_origin(&sig, DL_SHAPE_RESPONSES), DL_SHAPE_RESPONSES);
    assert_int_equal(sig.len, 5);
    sig = GW_STR_LIT("gw1.nosuch.X"); /* not a tag of ours: the client's own */
    assert_int_equal(dl_sig_origin(&sig, DL_SHAPE_CHAT), DL_SHAPE_CHAT);
    assert_int_equal(sig.len, 12);
    sig = GW_STR_LIT("gw1.chat."); /* a tag with nothing after it */
    assert_int_equal(dl_sig_origin(&sig, DL_SHAPE_GEMINI), DL_SHAPE_GEMINI);
}

static void
test_canon_offered_tools_are_dropped_by_name_for_other_shapes(void **state)
{
    /* Codex's namespace and tool_search tools, parsed from a Responses body */
    static const char body[] =
        "{\"model\":\"m\",\"input\":\"hi\",\"tools\":[{\"type\":\"namespace\",\"name\":"
        "\"multi_agent_v1\",\"tools\":[]},{\"type\":\"tool_search\",\"execution\":\"client\"},"
        "{\"type\":\"function\",\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}]}";
    struct gw_arena a;
    struct dl_request r;
    struct gw_buf why = {0}, out = {0};
    struct dl_dropped d = {0};

    (void)state;
    gw_arena_init(&a);
    assert_int_equal(
        dl_shape_ops(DL_SHAPE_RESPONSES)->request_parse(&a, body, sizeof(body) - 1, &r, &why),
        GW_OK);
    assert_int_equal(r.n_tools, 1);
    assert_int_equal(r.n_offered, 2);
    assert_int_equal(r.needs, 0); /* not hosted: nothing to refuse */
    dl_request_drop_offered(&r, DL_SHAPE_RESPONSES, &d);
    assert_int_equal(d.n, 0);
    dl_request_drop_offered(&r, DL_SHAPE_CHAT, &d);
    assert_int_equal(d.n, 2);
    assert_true(gw_str_eq(d.name[0], GW_STR_LIT("tools.namespace")));
    assert_true(gw_str_eq(d.name[1], GW_STR_LIT("tools.tool_search")));
    /* a Chat upstream gets the function alone; a Responses one all three */
    assert_int_equal(
        dl_shape_ops(DL_SHAPE_CHAT)->request_render(&r, GW_STR_LIT("m"), 0, &d, &out, &why), GW_OK);
    assert_null(strstr(out.data, "namespace"));
    assert_non_null(strstr(out.data, "\"f\""));
    gw_buf_reset(&out);
    assert_int_equal(
        dl_shape_ops(DL_SHAPE_RESPONSES)->request_render(&r, GW_STR_LIT("m"), 0, &d, &out, &why),
        GW_OK);
    assert_non_null(strstr(out.data, "\"multi_agent_v1\""));
    assert_non_null(strstr(out.data, "\"tool_search\""));
    gw_buf_fini(&out);
    gw_buf_fini(&why);
    gw_arena_fini(&a);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_canon_splice_model_keeps_every_other_byte),
        cmocka_unit_test(test_canon_splice_model_refuses_what_has_no_model),
        cmocka_unit_test(test_canon_dropped_names_once_and_notes_overflow),
        cmocka_unit_test(test_canon_input_estimate_counts_every_part),
        cmocka_unit_test(test_canon_content_is_a_delta_with_text_or_a_tool_call_start),
        cmocka_unit_test(test_canon_events_fold_into_an_answer),
        cmocka_unit_test(test_canon_fold_refuses_a_block_index_far_past_the_last),
        cmocka_unit_test(test_canon_signature_of_another_shape_is_tagged_and_read_back),
        cmocka_unit_test(test_canon_offered_tools_are_dropped_by_name_for_other_shapes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
