/* SPDX-License-Identifier: MIT
 * bench/util.c - small helpers shared by gwbench's subcommands.
 * Owns:    nothing.
 * Threads: any; no shared state.
 * See:     bench/util.h
 */
#include "bench/util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

bool
bench_parse_u64n(const char *s, size_t len, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    size_t i = 0;

    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    while (i < len && (s[i] == ' ' || s[i] == '\t'))
        i++;
    if (i == len)
        return false;
    for (; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        if (v > (max - (uint64_t)(s[i] - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return true;
}

bool
bench_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    return s != NULL && bench_parse_u64n(s, strlen(s), max, out);
}

bool
bench_parse_addr(const char *s, struct sockaddr_in *sa)
{
    const char *colon = strrchr(s, ':');
    char host[64];
    uint64_t port;
    size_t hl;

    if (colon == NULL)
        return false;
    hl = (size_t)(colon - s);
    if (hl == 0 || hl >= sizeof(host))
        return false;
    memcpy(host, s, hl);
    host[hl] = '\0';
    if (!bench_parse_u64(colon + 1, 65535, &port))
        return false;
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    if (strcmp(host, "localhost") == 0)
        strcpy(host, "127.0.0.1");
    return inet_pton(AF_INET, host, &sa->sin_addr) == 1;
}

bool
bench_sock_prepare(int fd, bool tcp)
{
    int fl = fcntl(fd, F_GETFL, 0);
    int one = 1;

    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return false;
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
        return false;
    if (tcp)
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return true;
}

int
bench_arg(int argc, char **argv, int *i, const char *name, const char **val)
{
    const char *a = argv[*i];
    size_t nl = strlen(name);

    if (strncmp(a, name, nl) != 0)
        return 0;
    if (a[nl] == '=') {
        *val = a + nl + 1;
        return 1;
    }
    if (a[nl] != '\0')
        return 0;
    if (*i + 1 >= argc)
        return -1;
    *i += 1;
    *val = argv[*i];
    return 1;
}
