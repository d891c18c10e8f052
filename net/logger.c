/* SPDX-License-Identifier: MIT
 * net/logger.c - drains queued log lines to stderr on its own thread, so that workers
 * never block on output. Wakes every LOGGER_TICK_MS while lines come, backing off to
 * LOGGER_IDLE_MS when idle; a line waits at most that long.
 * Owns:    the logger thread.
 * Threads: start/stop on main; the drain loop on the logger thread.
 * See:     net/logger.h, core/log.c
 */
#include "net/logger.h"

#include <ck_pr.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "core/alloc.h"
#include "core/log.h"

#define LOGGER_TICK_MS 5
#define LOGGER_IDLE_MS 100
#define LOGGER_BUF_BYTES (64 * 1024)

static pthread_t logger_thread;
static unsigned logger_stop_flag;
static int logger_running;

/* The turn's readings; 0: not read in this turn (neither clock reads 0 once booted). */
static _Thread_local struct {
    bool on;
    uint64_t now_ms;
    uint64_t mono_us;
} tl_clock;

void
net_clock_turn(void)
{
    tl_clock.on = true;
    tl_clock.now_ms = 0;
    tl_clock.mono_us = 0;
}

uint64_t
net_now_ms(void)
{
    struct timespec ts;
    uint64_t ms;

    if (tl_clock.now_ms)
        return tl_clock.now_ms;
    clock_gettime(CLOCK_REALTIME, &ts);
    ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
    if (tl_clock.on)
        tl_clock.now_ms = ms;
    return ms;
}

uint64_t
net_mono_us(void)
{
    struct timespec ts;
    uint64_t us;

    if (tl_clock.mono_us)
        return tl_clock.mono_us;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    us = (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
    if (tl_clock.on)
        tl_clock.mono_us = us;
    return us;
}

static int
drain(void)
{
    char *line;
    int n = 0;

    while ((line = gw_log_take()) != NULL) {
        fputs(line, stderr);
        gw_free(line);
        n++;
    }
    /* One write for the whole batch (stderr is fully buffered once this thread runs);
     * also sends what other threads printed to stderr directly (a refused reload's
     * problems). Nothing buffered: no system call. */
    fflush(stderr);
    return n;
}

static void *
logger_main(void *arg)
{
    long ms = LOGGER_TICK_MS;

    (void)arg;
    pthread_setname_np(pthread_self(), "gw-log");
    /* Acquire load: pairs with the release store in net_logger_stop. */
    while (!ck_pr_load_uint(&logger_stop_flag)) {
        struct timespec tick;

        /* Lines are rare on a healthy gateway: back off while idle, so this thread does
         * not wake the CPUs hundreds of times a second; the first line after a quiet
         * spell waits at most LOGGER_IDLE_MS. */
        ms = drain() ? LOGGER_TICK_MS : (ms * 2 > LOGGER_IDLE_MS ? LOGGER_IDLE_MS : ms * 2);
        tick.tv_sec = 0;
        tick.tv_nsec = ms * 1000000L;
        nanosleep(&tick, NULL);
    }
    drain();
    return NULL;
}

void
net_logger_start(void)
{
    gw_log_set_clock(net_now_ms);
    /* Fully buffered: at one `request` line per request (log.level info) a write per
     * line cost more than the line; drain() flushes each batch, so a line still reaches
     * the file within LOGGER_TICK_MS..LOGGER_IDLE_MS. */
    setvbuf(stderr, NULL, _IOFBF, LOGGER_BUF_BYTES);
    gw_log_attach();
    if (pthread_create(&logger_thread, NULL, logger_main, NULL) != 0) {
        gw_log_detach();
        return;
    }
    logger_running = 1;
}

void
net_logger_stop(void)
{
    if (!logger_running)
        return;
    ck_pr_fence_store();
    ck_pr_store_uint(&logger_stop_flag, 1);
    pthread_join(logger_thread, NULL);
    gw_log_detach();
    drain(); /* lines queued between the last drain and the detach */
    logger_running = 0;
}
