/* SPDX-License-Identifier: MIT
 * net/linktest.c - measures connect (+ TLS handshake) time to url-test upstreams once at
 * startup and seeds their health state with it. Blocking calls on a thread of its own.
 * Owns:    the thread and, while it runs, a config reference and one SSL_CTX.
 * Threads: its own; start/join on main.
 * See:     net/linktest.h
 */
#include "net/linktest.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "core/alloc.h"
#include "core/health.h"
#include "core/log.h"
#include "core/snap.h"
#include "net/logger.h"
#include "net/upstream.h"

#define LINKTEST_TIMEOUT_SECS 5

struct net_linktest {
    pthread_t thread;
};

static bool
in_url_test_group(const struct gw_conf *c, const struct gw_conf_provider *p)
{
    size_t g, m;

    for (g = 0; g < c->n_groups; g++) {
        if (c->groups[g].type != GW_GROUP_URL_TEST)
            continue;
        for (m = 0; m < c->groups[g].n_members; m++)
            if (strcmp(c->groups[g].members[m].provider, p->name) == 0)
                return true;
    }
    return false;
}

/* Connect (+ handshake) time in ms, -1 on failure. */
static int
measure(const struct gw_conf_provider *p, SSL_CTX *ctx)
{
    struct timeval tv = {LINKTEST_TIMEOUT_SECS, 0};
    struct addrinfo hints, *res = NULL;
    char port[8];
    uint64_t t0;
    int fd, ms = -1, one = 1;

    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    snprintf(port, sizeof(port), "%u", p->port);
    t0 = net_mono_us();
    if (getaddrinfo(p->host, port, &hints, &res) != 0)
        return -1;
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
            if (!p->tls) {
                ms = (int)((net_mono_us() - t0) / 1000);
            } else if (ctx) {
                SSL *ssl = SSL_new(ctx);

                if (ssl && SSL_set_fd(ssl, fd) == 1 &&
                    SSL_set_tlsext_host_name(ssl, p->host) == 1 &&
                    SSL_set1_host(ssl, p->host) == 1 && SSL_connect(ssl) == 1)
                    ms = (int)((net_mono_us() - t0) / 1000);
                SSL_free(ssl);
            }
        }
        close(fd);
    }
    freeaddrinfo(res);
    return ms;
}

static void *
linktest_main(void *arg)
{
    struct gw_thread gt;
    struct gw_conf *c;
    SSL_CTX *ctx = NULL;
    size_t i;

    (void)arg;
    pthread_setname_np(pthread_self(), "gw-linktest");
    gw_thread_register(&gt);
    c = gw_conf_acquire(&gt);
    for (i = 0; c && i < c->n_providers; i++) {
        const struct gw_conf_provider *p = &c->providers[i];
        int ms;

        if (!p->enabled || !p->state || !in_url_test_group(c, p))
            continue;
        if (p->proxy_host) { /* a direct connect would measure the wrong path */
            GW_LOG(GW_LOG_INFO, NULL, "link_test", "upstream %s: not measured (through a proxy)",
                   p->name);
            continue;
        }
        if (p->tls && !ctx && !p->tls_ctx)
            ctx = net_upstream_ssl_ctx_new();
        ms = measure(p, p->tls_ctx ? p->tls_ctx : ctx);
        if (ms >= 0)
            gw_upstate_link_seed(p->state, (uint32_t)ms);
        GW_LOG(GW_LOG_INFO, NULL, "link_test", "upstream %s: %s %d ms", p->name,
               ms >= 0 ? "reached in" : "unreachable within",
               ms >= 0 ? ms : LINKTEST_TIMEOUT_SECS * 1000);
    }
    if (ctx)
        SSL_CTX_free(ctx);
    gw_conf_release(c);
    gw_thread_unregister(&gt);
    return NULL;
}

struct net_linktest *
net_linktest_start(void)
{
    struct net_linktest *t = gw_calloc(1, sizeof(*t));

    if (!t)
        return NULL;
    if (pthread_create(&t->thread, NULL, linktest_main, NULL) != 0) {
        gw_free(t);
        return NULL;
    }
    return t;
}

void
net_linktest_join(struct net_linktest *t)
{
    if (!t)
        return;
    pthread_join(t->thread, NULL);
    gw_free(t);
}
