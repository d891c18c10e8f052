/* SPDX-License-Identifier: MIT
 * bench/util.h - small helpers shared by gwbench's subcommands: the monotonic
 * clock, number and address parsing, socket options.
 * Owns:    nothing.
 * Threads: any; no shared state.
 * See:     bench/util.c, docs/gwbench.md
 */
#ifndef GW_BENCH_UTIL_H
#define GW_BENCH_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <netinet/in.h>

/* Microseconds on CLOCK_MONOTONIC. Any thread; never blocks. */
static inline uint64_t
bench_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Parses the decimal <s> (whole string) into <*out>, at most <max>. false when
 * <s> is empty, not a number, or too large. */
bool bench_parse_u64(const char *s, uint64_t max, uint64_t *out);

/* Same for a slice <s> of <len> bytes (header values); leading and trailing
 * blanks are ignored. */
bool bench_parse_u64n(const char *s, size_t len, uint64_t max, uint64_t *out);

/* Parses "HOST:PORT" (IPv4 literal or "localhost"; port 0..65535) into <*sa>.
 * false on anything else. */
bool bench_parse_addr(const char *s, struct sockaddr_in *sa);

/* Sets O_NONBLOCK and FD_CLOEXEC on <fd>, and TCP_NODELAY when <tcp>. Returns
 * false when fcntl fails. */
bool bench_sock_prepare(int fd, bool tcp);

/* Command-line helper: when argv[*i] is "<name> VALUE" or "<name>=VALUE",
 * sets <*val>, advances <*i> past what it used and returns 1; returns 0 when
 * argv[*i] is another flag, -1 when <name> is given without a value. */
int bench_arg(int argc, char **argv, int *i, const char *name, const char **val);

#endif
