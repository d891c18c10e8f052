/* SPDX-License-Identifier: MIT
 * net/logger.h - the logger thread: drains core/log.c's ring to stderr.
 * Owns:    its thread.
 * Threads: start/stop on main.
 * See:     net/logger.c, core/log.h
 */
#ifndef GW_NET_LOGGER_H
#define GW_NET_LOGGER_H

#include <stdint.h>

/* Attaches the ring and starts draining it to stderr every few milliseconds. */
void net_logger_start(void);
/* Drains what is left, detaches and joins the thread. */
void net_logger_stop(void);

/* Wall clock in ms since the epoch (the stamp of log lines and rows). */
uint64_t net_now_ms(void);
/* Monotonic clock in microseconds. */
uint64_t net_mono_us(void);

/* A worker's clock is read once per loop turn, as nginx reads its own (a request read
 * it 17 times, 1.7% of gwd's cycles under perf): net_clock_turn, called before each turn
 * of the thread's event loop, makes the two clocks above answer, until the next call,
 * what they answered first after it. The first net_clock_turn call on a thread turns
 * this on for that thread; threads that never call it read the clocks each time.
 * Within a turn the clocks stand still: what a turn measures spans turns (a request's
 * time to first byte is the upstream's read turn less the send's turn), late by at most
 * the work of a turn. */
void net_clock_turn(void);

#endif
