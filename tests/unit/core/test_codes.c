/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_codes.c - the message code table: stable strings, HTTP statuses,
 * lookups and counters.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/codes.h"

static void
test_codes_pinned_strings_and_statuses(void **state)
{
    (void)state;
    assert_string_equal(gw_code_str(GW_OK), "ok");
    assert_string_equal(gw_code_str(GW_E_AUTH_MISSING_KEY), "gw.auth.missing_key");
    assert_int_equal(gw_code_http_status(GW_E_AUTH_MISSING_KEY), 401);
    assert_string_equal(gw_code_str(GW_E_MODEL_NOT_FOUND), "gw.model_not_found");
    assert_int_equal(gw_code_http_status(GW_E_MODEL_NOT_FOUND), 404);
    assert_string_equal(gw_code_str(GW_E_BODY_TOO_LARGE), "gw.body_too_large");
    assert_int_equal(gw_code_http_status(GW_E_BODY_TOO_LARGE), 413);
    assert_string_equal(gw_code_str(GW_E_UPSTREAM_FAILED), "gw.upstream.failed");
    assert_int_equal(gw_code_http_status(GW_E_UPSTREAM_FAILED), 502);
    assert_string_equal(gw_code_str(GW_E_UPSTREAM_TIMEOUT), "gw.upstream.timeout");
    assert_int_equal(gw_code_http_status(GW_E_UPSTREAM_TIMEOUT), 504);
    assert_string_equal(gw_code_str((enum gw_code)9999), "unknown");
}

static void
test_codes_every_string_is_unique_and_dotted(void **state)
{
    unsigned i, j;

    (void)state;
    for (i = 1; i < GW_CODE__COUNT; i++) {
        const char *a = gw_code_str((enum gw_code)i);

        assert_non_null(strchr(a, '.'));
        assert_int_equal(gw_code_from_str(a, strlen(a)), i);
        for (j = i + 1; j < GW_CODE__COUNT; j++)
            assert_string_not_equal(a, gw_code_str((enum gw_code)j));
    }
    assert_int_equal(gw_code_from_str("nope.nope", 9), GW_CODE__COUNT);
}

static void
test_codes_counter_counts(void **state)
{
    uint64_t before = gw_code_counter(GW_E_BUSY_ALL);

    (void)state;
    assert_int_equal(gw_code_count(GW_E_BUSY_ALL), GW_E_BUSY_ALL);
    gw_code_count(GW_E_BUSY_ALL);
    assert_int_equal(gw_code_counter(GW_E_BUSY_ALL), before + 2);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codes_pinned_strings_and_statuses),
        cmocka_unit_test(test_codes_every_string_is_unique_and_dotted),
        cmocka_unit_test(test_codes_counter_counts),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
