/* SPDX-License-Identifier: MIT
 * tests/unit/net/test_http2.c - what net/http2.c decides without a socket: the client
 * preface of h2c with prior knowledge, whole, in pieces, and what is not it (an
 * HTTP/1.1 request line, a PRI line of another version).
 * The session itself is tested end to end: tests/e2e/test_http2.py.
 * See: net/http2.c
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "net/net-priv.h"

static void
test_h2_preface_whole_prefix_and_not(void **state)
{
    static const char p[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    size_t i;

    (void)state;
    assert_int_equal(net_h2_preface(p, 24), 1);
    assert_int_equal(net_h2_preface("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00", 26), 1);
    for (i = 0; i < 24; i++)
        assert_int_equal(net_h2_preface(p, i), 0); /* wait for more */
    assert_int_equal(net_h2_preface("POST /v1/chat/completions HTTP/1.1\r\n", 24), -1);
    assert_int_equal(net_h2_preface("PRI * HTTP/1.1\r\n", 16), -1);
    assert_int_equal(net_h2_preface("G", 1), -1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_h2_preface_whole_prefix_and_not),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
