/* SPDX-License-Identifier: MIT
 * tests/unit/net/test_sockread.c - the socket reader that fills a bufferevent's input
 * without FIONREAD: bytes reach the bufferevent's read callback, EOF and errors its
 * event callback with BEV_EVENT_READING, disable stops reading, the high watermark
 * pauses reading until the input drains, the read timeout fires and is cleared, a
 * bufferevent given new callbacks (a connection handed over) is read for them, and an
 * owner's bytes callback takes a read's bytes where they lie only while the input is
 * empty and its read callback is the bufferevent's, keeping what it leaves.
 * Owns:    its fixtures (a socketpair, an event_base).
 * Threads: one (the test's event_base).
 * See:     net/sockread.c
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "net/sockread.h"

struct fx {
    struct event_base *base;
    struct bufferevent *bev;
    struct net_sockread rd;
    int peer; /* the other end: what the test writes and closes */
    unsigned reads, reads2;
    short events;
    size_t drain_to; /* on each read, drain the input down to this many bytes */
    bool drain;
    unsigned bytes_calls;
    char bytes[64]; /* what the bytes callback was given, the last call */
    size_t n_bytes;
    size_t leave; /* the bytes callback keeps its last <leave> bytes in the input */
};

static void
on_read(struct bufferevent *bev, void *arg)
{
    struct fx *f = arg;
    struct evbuffer *in = bufferevent_get_input(bev);

    f->reads++;
    if (f->drain && evbuffer_get_length(in) > f->drain_to)
        evbuffer_drain(in, evbuffer_get_length(in) - f->drain_to);
    event_base_loopbreak(f->base);
}

static void
on_read2(struct bufferevent *bev, void *arg)
{
    struct fx *f = arg;

    (void)bev;
    f->reads2++;
    event_base_loopbreak(f->base);
}

static void
on_event(struct bufferevent *bev, short what, void *arg)
{
    struct fx *f = arg;

    (void)bev;
    f->events = what;
    event_base_loopbreak(f->base);
}

static void
on_bytes(void *arg, const char *p, size_t n)
{
    struct fx *f = arg;

    f->bytes_calls++;
    f->n_bytes = n < sizeof(f->bytes) ? n : sizeof(f->bytes);
    memcpy(f->bytes, p, f->n_bytes);
    if (f->leave)
        assert_true(net_sockread_keep(&f->rd, p + n - f->leave, f->leave));
    event_base_loopbreak(f->base);
}

static int
setup(void **state)
{
    static struct fx f;
    int sv[2];

    memset(&f, 0, sizeof(f));
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    evutil_make_socket_nonblocking(sv[0]);
    f.peer = sv[1];
    f.base = event_base_new();
    assert_non_null(f.base);
    f.bev = bufferevent_socket_new(f.base, sv[0], BEV_OPT_CLOSE_ON_FREE);
    assert_non_null(f.bev);
    bufferevent_setcb(f.bev, on_read, NULL, on_event, &f);
    assert_true(net_sockread_init(&f.rd, f.base, f.bev, true));
    *state = &f;
    return 0;
}

static int
teardown(void **state)
{
    struct fx *f = *state;

    net_sockread_fini(&f->rd);
    bufferevent_free(f->bev);
    if (f->peer >= 0)
        close(f->peer);
    event_base_free(f->base);
    return 0;
}

/* Runs the loop once around: until a callback breaks it, or 200 ms pass. */
static void
run(struct fx *f)
{
    struct timeval tv = {0, 200000};

    event_base_loopexit(f->base, &tv);
    event_base_dispatch(f->base);
}

static size_t
in_len(struct fx *f)
{
    return evbuffer_get_length(bufferevent_get_input(f->bev));
}

static void
test_bytes_reach_the_read_callback(void **state)
{
    struct fx *f = *state;
    char got[6] = {0};

    net_sockread_enable(&f->rd);
    assert_int_equal(write(f->peer, "hello", 5), 5);
    run(f);
    assert_int_equal(f->reads, 1);
    assert_int_equal(evbuffer_remove(bufferevent_get_input(f->bev), got, 5), 5);
    assert_string_equal(got, "hello");
    assert_int_equal(f->events, 0);
}

static void
test_eof_is_an_event_with_reading(void **state)
{
    struct fx *f = *state;

    net_sockread_enable(&f->rd);
    close(f->peer);
    f->peer = -1;
    run(f);
    assert_int_equal(f->events, BEV_EVENT_READING | BEV_EVENT_EOF);
    assert_false(f->rd.on); /* reading is off after it, as a bufferevent's */
}

static void
test_disabled_reads_nothing(void **state)
{
    struct fx *f = *state;

    net_sockread_enable(&f->rd);
    net_sockread_disable(&f->rd);
    assert_int_equal(write(f->peer, "x", 1), 1);
    run(f);
    assert_int_equal(f->reads, 0);
    assert_int_equal(in_len(f), 0);
    net_sockread_enable(&f->rd);
    run(f);
    assert_int_equal(f->reads, 1);
    assert_int_equal(in_len(f), 1);
}

/* With the input at the high watermark, nothing more is read; draining below it reads
 * on without any other call. */
static void
test_high_watermark_pauses_until_drained(void **state)
{
    struct fx *f = *state;
    char big[300];

    memset(big, 'a', sizeof(big));
    net_sockread_set_hiwat(&f->rd, 100);
    net_sockread_enable(&f->rd);
    assert_int_equal(write(f->peer, big, sizeof(big)), (ssize_t)sizeof(big));
    run(f);
    assert_int_equal(in_len(f), 100); /* a read asks no more than the room left */
    run(f);
    assert_int_equal(f->reads, 1); /* paused: the rest waits in the socket */
    assert_int_equal(in_len(f), 100);
    evbuffer_drain(bufferevent_get_input(f->bev), 100);
    run(f);
    assert_int_equal(f->reads, 2);
    assert_int_equal(in_len(f), 100);
}

static void
test_read_timeout_fires_and_is_cleared(void **state)
{
    struct fx *f = *state;
    struct timeval tv = {0, 20000};

    net_sockread_enable(&f->rd);
    net_sockread_set_timeout(&f->rd, &tv);
    run(f);
    assert_int_equal(f->events, BEV_EVENT_READING | BEV_EVENT_TIMEOUT);
    assert_false(f->rd.on);

    f->events = 0;
    net_sockread_enable(&f->rd);
    net_sockread_set_timeout(&f->rd, NULL); /* cleared while reading is on */
    run(f);                                 /* 200 ms: no timeout, no read */
    assert_int_equal(f->events, 0);
    assert_int_equal(f->reads, 0);
    assert_int_equal(write(f->peer, "y", 1), 1); /* and reading still works */
    run(f);
    assert_int_equal(f->reads, 1);
}

/* A connection handed to other code (HTTP/2, WebSocket) gets new callbacks: the reader
 * calls the bufferevent's current ones. */
static void
test_new_callbacks_are_used(void **state)
{
    struct fx *f = *state;

    net_sockread_enable(&f->rd);
    bufferevent_setcb(f->bev, on_read2, NULL, on_event, f);
    assert_int_equal(write(f->peer, "z", 1), 1);
    run(f);
    assert_int_equal(f->reads, 0);
    assert_int_equal(f->reads2, 1);
}

/* Not own mode (TLS): calls pass through to the bufferevent, which reads itself. */
static void
test_pass_through_reads_by_the_bufferevent(void **state)
{
    struct fx *f = *state;

    net_sockread_fini(&f->rd);
    assert_true(net_sockread_init(&f->rd, f->base, f->bev, false));
    net_sockread_enable(&f->rd);
    assert_true(bufferevent_get_enabled(f->bev) & EV_READ);
    assert_int_equal(write(f->peer, "w", 1), 1);
    run(f);
    assert_int_equal(f->reads, 1);
    net_sockread_disable(&f->rd);
    assert_false(bufferevent_get_enabled(f->bev) & EV_READ);
}

/* The input empty and the read callback the one named: the bytes go to the bytes
 * callback, not through the input; what it keeps is in the input after. */
static void
test_bytes_callback_takes_a_read_while_the_input_is_empty(void **state)
{
    struct fx *f = *state;
    char got[4] = {0};

    net_sockread_set_bytes(&f->rd, on_read, on_bytes);
    net_sockread_enable(&f->rd);
    f->leave = 3;
    assert_int_equal(write(f->peer, "hello", 5), 5);
    run(f);
    assert_int_equal(f->bytes_calls, 1);
    assert_int_equal(f->reads, 0);
    assert_int_equal(f->n_bytes, 5);
    assert_memory_equal(f->bytes, "hello", 5);
    assert_int_equal(in_len(f), 3);
    assert_int_equal(evbuffer_remove(bufferevent_get_input(f->bev), got, 3), 3);
    assert_string_equal(got, "llo");
}

/* Bytes left in the input come first: a read behind them is added to the input and the
 * read callback is called, as without a bytes callback. */
static void
test_bytes_wait_behind_the_input(void **state)
{
    struct fx *f = *state;
    char got[8] = {0};

    net_sockread_set_bytes(&f->rd, on_read, on_bytes);
    net_sockread_enable(&f->rd);
    f->leave = 2;
    assert_int_equal(write(f->peer, "abcd", 4), 4);
    run(f);
    assert_int_equal(f->bytes_calls, 1);
    assert_int_equal(in_len(f), 2);
    assert_int_equal(write(f->peer, "ef", 2), 2);
    run(f);
    assert_int_equal(f->bytes_calls, 1);
    assert_int_equal(f->reads, 1);
    assert_int_equal(evbuffer_remove(bufferevent_get_input(f->bev), got, 4), 4);
    assert_string_equal(got, "cdef");
}

/* A connection handed over (new callbacks) is read for them, never for the bytes
 * callback of the read callback it had. */
static void
test_bytes_callback_only_beside_its_read_callback(void **state)
{
    struct fx *f = *state;

    net_sockread_set_bytes(&f->rd, on_read, on_bytes);
    net_sockread_enable(&f->rd);
    bufferevent_setcb(f->bev, on_read2, NULL, on_event, f);
    assert_int_equal(write(f->peer, "z", 1), 1);
    run(f);
    assert_int_equal(f->bytes_calls, 0);
    assert_int_equal(f->reads2, 1);
    assert_int_equal(in_len(f), 1);
}

/* What a bytes callback keeps counts toward the high watermark: at it, reading pauses
 * until the input drains. */
static void
test_kept_bytes_count_toward_the_high_watermark(void **state)
{
    struct fx *f = *state;
    char big[300];

    memset(big, 'b', sizeof(big));
    net_sockread_set_hiwat(&f->rd, 100);
    net_sockread_set_bytes(&f->rd, on_read, on_bytes);
    net_sockread_enable(&f->rd);
    f->leave = 100;
    assert_int_equal(write(f->peer, big, sizeof(big)), (ssize_t)sizeof(big));
    run(f);
    assert_int_equal(f->bytes_calls, 1);
    assert_int_equal(in_len(f), 100);
    run(f);
    assert_int_equal(f->bytes_calls, 1); /* paused: the rest waits in the socket */
    assert_int_equal(f->reads, 0);
    evbuffer_drain(bufferevent_get_input(f->bev), 100);
    f->leave = 0;
    run(f);
    assert_int_equal(f->bytes_calls, 2);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bytes_reach_the_read_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eof_is_an_event_with_reading, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disabled_reads_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_high_watermark_pauses_until_drained, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_timeout_fires_and_is_cleared, setup, teardown),
        cmocka_unit_test_setup_teardown(test_new_callbacks_are_used, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pass_through_reads_by_the_bufferevent, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_bytes_callback_takes_a_read_while_the_input_is_empty,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_bytes_wait_behind_the_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bytes_callback_only_beside_its_read_callback, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kept_bytes_count_toward_the_high_watermark, setup,
                                        teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
