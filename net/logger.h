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

#endif
