/* SPDX-License-Identifier: MIT
 * net/worker.c - worker threads and their listeners. Main binds every socket before
 * the threads start (so startup errors are reported at once and a port 0 is chosen
 * once); each worker wraps its sockets in evconnlisteners on its own event_base.
 * A worker's base has no lock (EVENT_BASE_FLAG_NOLOCK): only its own thread touches it;
 * other threads leave work in the worker's memory (drain_requested, the grant stack)
 * and wake it through its mailbox, an eventfd (net_worker_mail).
 * Draining: main sets drain_requested and mails the worker; the worker closes its
 * listeners, closes idle connections, lets busy ones finish, and leaves its loop when
 * none is left or the drain deadline passes.
 * Owns:    struct net_workers, each worker's thread, base, dns base, pool, listeners.
 * Threads: start/stop on main; worker_main and callbacks on each worker.
 * See:     net/worker.h, net/http1.c
 */
#include "net/worker.h"

#include <arpa/inet.h>
#include <ck_pr.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/thread.h>

#include "core/alloc.h"
#include "core/log.h"
#include "core/slots.h"
#include "net/logger.h"
#include "net/net-priv.h"
#include "net/probe.h"
#include "net/upstream.h"

struct net_workers {
    struct net_worker *v;
    unsigned n;
    SSL_CTX *ssl_ctx;
    unsigned drain_secs;
};

static void
on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen, void *arg)
{
    (void)l;
    (void)sa;
    (void)salen;
    net_conn_accept(arg, fd);
}

static void
on_accept_tls(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
              void *arg)
{
    (void)l;
    (void)sa;
    (void)salen;
    net_conn_accept_tls(arg, fd);
}

/* Out of descriptors (or memory) on accept: stop accepting on this worker for a short
 * back-off instead of spinning on a listener that stays readable (nginx does the same),
 * then listen again. Other errors are logged and accepting goes on. Lines of this kind
 * are written at most once a second, with the count of those held back. */
#define NET_ACCEPT_BACKOFF_MS 500
/* The listen backlog asked for: the kernel caps it at net.core.somaxconn, so this is
 * the most the machine allows. A burst of connects (thousands of streams opened at
 * once) then waits in the accept queue instead of overflowing it, which drops SYNs
 * and leaves each client to retry a second or more later. */
#define NET_LISTEN_BACKLOG 65535

static void
on_accept_error(struct evconnlistener *l, void *arg)
{
    static struct gw_log_rate rate;
    struct net_worker *w = arg;
    struct gw_log_ctx ctx = {(int)w->id, 0, NULL};
    int err = EVUTIL_SOCKET_ERROR();
    bool backoff = err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
    uint64_t suppressed;
    size_t i;

    (void)l;
    if (gw_log_rate_pass(&rate, &suppressed))
        GW_LOG(GW_LOG_WARN, &ctx, "accept_error",
               "accept failed: %s%s (%llu more such lines since the last one)", strerror(err),
               backoff ? "; not accepting for 500 ms" : "", (unsigned long long)suppressed);
    if (!backoff || w->draining)
        return;
    for (i = 0; i < w->n_fds; i++)
        if (w->listeners[i])
            evconnlistener_disable(w->listeners[i]);
    if (!evtimer_pending(w->accept_backoff, NULL)) {
        struct timeval tv = {0, NET_ACCEPT_BACKOFF_MS * 1000};

        evtimer_add(w->accept_backoff, &tv);
    }
}

static void
on_accept_backoff(evutil_socket_t fd, short what, void *arg)
{
    struct net_worker *w = arg;
    size_t i;

    (void)fd;
    (void)what;
    if (w->draining)
        return; /* the listeners are gone */
    for (i = 0; i < w->n_fds; i++)
        if (w->listeners[i])
            evconnlistener_enable(w->listeners[i]);
}

static void
on_drain_tick(evutil_socket_t fd, short what, void *arg)
{
    struct net_worker *w = arg;

    (void)fd;
    (void)what;
    if (w->n_conns == 0)
        event_base_loopbreak(w->base);
}

static void
on_drain_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct net_worker *w = arg;

    (void)fd;
    (void)what;
    event_base_loopbreak(w->base);
}

/* The worker whose thread this is (NULL on other threads). */
static _Thread_local struct net_worker *tl_worker;

/* Wakes <w> from another thread: the first mail since the worker last read its
 * eventfd writes it; later ones find the flag set and leave it (the worker reads what
 * was left before them, or after: it clears the flag before it looks). */
static void
net_worker_mail(struct net_worker *w)
{
    uint64_t one = 1;

    if (__atomic_exchange_n(&w->mail_pending, 1, __ATOMIC_ACQ_REL))
        return;
    while (write(w->mail_fd, &one, sizeof(one)) < 0 && errno == EINTR)
        ;
}

static void
start_drain(struct net_worker *w)
{
    struct timeval tick = {0, 20000};
    struct timeval deadline;
    unsigned secs;
    size_t i;

    /* Acquire load: pairs with the release store in net_workers_stop. */
    secs = ck_pr_load_uint(&w->drain_requested);
    if (!secs || w->draining)
        return;
    w->draining = true;
    for (i = 0; i < w->n_fds; i++) {
        if (w->listeners[i])
            evconnlistener_free(w->listeners[i]); /* closes the socket: no more accepts */
        w->listeners[i] = NULL;
    }
    net_conns_drain(w);
    deadline.tv_sec = (time_t)(secs - 1);
    deadline.tv_usec = 0;
    event_add(w->drain_timer, &deadline);
    /* A persistent tick notices when the last connection has gone. */
    event_add(w->drain_tick, &tick);
}

/* ---- slot grants (core/slots.h) ---- */

void
net_slots_granted(void *ctx, struct gw_slots_wait *g, unsigned index)
{
    struct net_workers *ws = ctx;
    struct net_stream *s = g->owner, *head;
    struct net_worker *w;

    (void)index; /* the stream reads it back from gw_slots_wait_cancel */
    if (!ws || g->worker >= ws->n)
        return; /* no worker can be waiting (startup): nothing to deliver */
    w = &ws->v[g->worker];
    /* The waiter sees the limits as the request that gave the slot back left them:
     * the releasing worker's settlements first (net/settle.c). */
    if (tl_worker)
        net_settle_apply(tl_worker);
    /* Treiber push: release on success so the owner sees the stream's state. */
    head = __atomic_load_n(&w->grants, __ATOMIC_RELAXED);
    do
        net_stream_set_grant_next(s, head);
    while (!__atomic_compare_exchange_n(&w->grants, &head, s, true, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED));
    if (tl_worker == w)
        event_active(w->grant_ev, EV_READ, 0);
    else
        net_worker_mail(w);
}

static void
on_grants(evutil_socket_t fd, short what, void *arg)
{
    struct net_worker *w = arg;
    struct net_stream *s, *rev = NULL, *next;

    (void)fd;
    (void)what;
    /* Take the whole stack (acquire pairs with the pushers' release), then restore
     * the order of arrival. */
    s = __atomic_exchange_n(&w->grants, NULL, __ATOMIC_ACQUIRE);
    for (; s; s = next) {
        next = net_stream_grant_next(s);
        net_stream_set_grant_next(s, rev);
        rev = s;
    }
    for (s = rev; s; s = next) {
        next = net_stream_grant_next(s);
        net_stream_on_grant(s);
    }
}

/* The mailbox: read the eventfd, then clear the flag, then look at what was left (in
 * that order: a mail after the clear writes the eventfd again; one before it left its
 * work before its flag, so the looks below see it). */
static void
on_mail(evutil_socket_t fd, short what, void *arg)
{
    struct net_worker *w = arg;
    uint64_t n;

    (void)what;
    while (read(fd, &n, sizeof(n)) < 0 && errno == EINTR)
        ;
    __atomic_store_n(&w->mail_pending, 0, __ATOMIC_SEQ_CST);
    on_grants(-1, 0, w);
    start_drain(w);
}

static void *
worker_main(void *arg)
{
    struct net_worker *w = arg;
    struct gw_row *row;
    size_t i;

    tl_worker = w;
    gw_thread_register(&w->gt);
    {
        char name[16]; /* the kernel keeps 15 bytes: top -H, ps -L, perf show it */

        snprintf(name, sizeof name, "gw-worker-%u", w->id);
        pthread_setname_np(pthread_self(), name);
    }
    /* event_base_dispatch, one turn at a time: each turn reads the clock afresh
     * (net_clock_turn) and ends with the settlements of the requests it ended, then the
     * bytes that waited for them (net/settle.c). A turn returns 0, also when a callback
     * broke the loop; 1 when no event is left, -1 on an error. */
    for (;;) {
        int rc;

        net_clock_turn();
        rc = event_base_loop(w->base, EVLOOP_ONCE);
        net_settle_turn_end(w);
        if (rc != 0 || event_base_got_break(w->base) || event_base_got_exit(w->base))
            break;
    }
    for (i = 0; i < w->n_fds; i++) {
        if (w->listeners[i])
            evconnlistener_free(w->listeners[i]);
        w->listeners[i] = NULL;
    }
    net_conns_free_all(w);
    net_stream_cache_free(w); /* after the streams of the connections went there */
    net_uppool_free(w->pool);
    w->pool = NULL;
    net_probe_free(w->probe); /* after the pool: a probe in flight gets no callback */
    w->probe = NULL;
    net_settle_turn_end(w); /* what the streams settled as their connections and upstreams
                             * went, and their rows */
    while ((row = net_settle_spare_row(w)) != NULL)
        gw_free(row);
    dl_sigv4_cache_wipe(&w->aws_keys); /* copies of secrets */
    gw_thread_unregister(&w->gt);
    return NULL;
}

/* ---- sockets ---- */

/* One data-plane address: server.listen (plain, or TLS when server.tls has no listen)
 * or server.tls.listen. */
struct listen_addr {
    const struct gw_conf_addr *a;
    bool tls;
    const char *key; /* its config key, for errors */
};

/* The data-plane addresses of <conf> into <out> (plain first); how many, or -1 when
 * there are more than NET_MAX_LISTEN. */
static int
listen_addrs(const struct gw_conf *conf, struct listen_addr out[NET_MAX_LISTEN])
{
    bool tls = conf->server.tls_cert != NULL;
    size_t i, n = 0;

    if (conf->server.n_listen + (tls ? conf->server.n_tls_listen : 0) > NET_MAX_LISTEN)
        return -1;
    for (i = 0; i < conf->server.n_listen; i++)
        out[n++] = (struct listen_addr){&conf->server.listen[i], tls && conf->server.tls_on_listen,
                                        "server.listen"};
    for (i = 0; tls && i < conf->server.n_tls_listen; i++)
        out[n++] = (struct listen_addr){&conf->server.tls_listen[i], true, "server.tls.listen"};
    return (int)n;
}

static int
bind_one(const struct listen_addr *la, uint16_t port, uint16_t *bound_port, char *err,
         size_t errlen)
{
    const struct gw_conf_addr *a = la->a;
    struct addrinfo hints, *res = NULL;
    char portstr[8];
    int fd = -1, one = 1, rc;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    snprintf(portstr, sizeof(portstr), "%u", port);
    rc = getaddrinfo(a->host, portstr, &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "%s %s:%u: %s", la->key, a->host, a->port, gai_strerror(rc));
        return -1;
    }
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, NET_LISTEN_BACKLOG) != 0) {
        snprintf(err, errlen, "%s %s:%u: %s", la->key, a->host, a->port, strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    if (bound_port) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);

        getsockname(fd, (struct sockaddr *)&ss, &sl);
        *bound_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                     : ((struct sockaddr_in *)&ss)->sin_port);
    }
    return fd;
}

static void
workers_free(struct net_workers *ws)
{
    unsigned i;
    size_t j;

    for (i = 0; i < ws->n; i++) {
        struct net_worker *w = &ws->v[i];

        for (j = 0; j < w->n_fds; j++) {
            if (w->listeners[j])
                evconnlistener_free(w->listeners[j]); /* closes the socket */
            else if (w->fds[j] >= 0 && !w->draining)
                close(w->fds[j]);
        }
        if (w->pool)
            net_uppool_free(w->pool);
        net_probe_free(w->probe);
        if (w->mail_ev)
            event_free(w->mail_ev);
        if (w->mail_fd >= 0)
            close(w->mail_fd);
        if (w->drain_timer)
            event_free(w->drain_timer);
        if (w->drain_tick)
            event_free(w->drain_tick);
        if (w->grant_ev)
            event_free(w->grant_ev);
        if (w->accept_backoff)
            event_free(w->accept_backoff);
        if (w->dns)
            evdns_base_free(w->dns, 0);
        if (w->base)
            event_base_free(w->base);
    }
    if (ws->ssl_ctx)
        SSL_CTX_free(ws->ssl_ctx);
    gw_free(ws->v);
    gw_free(ws);
}

/* A worker's base: without libevent's lock, which every event_add, event_del and loop
 * turn would take and drop (evthread_use_pthreads makes it the default for every base). */
static struct event_base *
worker_base_new(void)
{
    struct event_config *cfg = event_config_new();
    struct event_base *base = NULL;

    if (cfg && event_config_set_flag(cfg, EVENT_BASE_FLAG_NOLOCK) == 0)
        base = event_base_new_with_config(cfg);
    if (cfg)
        event_config_free(cfg);
    return base;
}

/* Appends "host:port" to <buf> (space-separated; NULL: nothing). */
static void
bound_add(char *buf, size_t len, const char *host, uint16_t port)
{
    size_t off = buf && len ? strlen(buf) : len;

    if (off < len)
        snprintf(buf + off, len - off, "%s%s:%u", off ? " " : "", host, port);
}

enum gw_code
net_workers_start(const struct gw_conf *conf, unsigned n_workers, const struct net_deps *deps,
                  struct net_workers **out, char *bound, size_t bound_len, char *tls_bound,
                  size_t tls_bound_len, char *err, size_t errlen)
{
    struct listen_addr addrs[NET_MAX_LISTEN];
    int n_listen = listen_addrs(conf, addrs);
    struct net_workers *ws;
    unsigned i;
    size_t j;

    *out = NULL;
    if (n_listen < 0) {
        snprintf(err, errlen, "server.listen and server.tls.listen: at most %d addresses",
                 NET_MAX_LISTEN);
        return GW_E_INTERNAL;
    }
    if (bound && bound_len)
        bound[0] = '\0';
    if (tls_bound && tls_bound_len)
        tls_bound[0] = '\0';
    ws = gw_calloc(1, sizeof(*ws));
    if (!ws || !(ws->v = gw_calloc(n_workers, sizeof(*ws->v)))) {
        gw_free(ws);
        return GW_E_NOMEM;
    }
    ws->n = n_workers;
    ws->ssl_ctx = net_upstream_ssl_ctx_new();
    for (i = 0; i < n_workers; i++) {
        struct net_worker *w = &ws->v[i];

        w->id = i;
        w->ws = ws;
        w->store = deps->store;
        w->sticky = deps->sticky;
        w->tls_ctx0 = conf->server.tls_ctx;
        w->mail_fd = -1;
        for (j = 0; j < NET_MAX_LISTEN; j++)
            w->fds[j] = -1;
        if (getrandom(w->rng, sizeof(w->rng), 0) != sizeof(w->rng) || (!w->rng[0] && !w->rng[1]))
            w->rng[0] = 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() ^ i, w->rng[1] = 42 + i;
    }
    /* Bind: the first socket of an address fixes its port, the others share it. */
    for (j = 0; j < (size_t)n_listen; j++) {
        uint16_t port = addrs[j].a->port;

        for (i = 0; i < n_workers; i++) {
            int fd = bind_one(&addrs[j], port, i == 0 ? &port : NULL, err, errlen);

            if (fd < 0) {
                workers_free(ws);
                return GW_E_INTERNAL;
            }
            ws->v[i].fds[j] = fd;
            ws->v[i].n_fds = j + 1;
            if (addrs[j].tls)
                ws->v[i].tls_fds |= 1u << j;
        }
        bound_add(bound, bound_len, addrs[j].a->host, port);
        if (addrs[j].tls)
            bound_add(tls_bound, tls_bound_len, addrs[j].a->host, port);
    }
    for (i = 0; i < n_workers; i++) {
        struct net_worker *w = &ws->v[i];

        w->base = worker_base_new();
        w->mail_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (!w->base || w->mail_fd < 0) {
            snprintf(err, errlen, "worker %u: %s failed", i,
                     w->base ? "eventfd" : "event_base_new");
            workers_free(ws);
            return GW_E_INTERNAL;
        }
        w->dns = evdns_base_new(w->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                             EVDNS_BASE_DISABLE_WHEN_INACTIVE);
        w->pool = net_uppool_new(w->base, w->dns, ws->ssl_ctx);
        w->mail_ev = event_new(w->base, w->mail_fd, EV_READ | EV_PERSIST, on_mail, w);
        w->drain_timer = evtimer_new(w->base, on_drain_deadline, w);
        w->drain_tick = event_new(w->base, -1, EV_PERSIST, on_drain_tick, w);
        w->grant_ev = event_new(w->base, -1, 0, on_grants, w);
        w->accept_backoff = evtimer_new(w->base, on_accept_backoff, w);
        if (!w->pool || !w->mail_ev || event_add(w->mail_ev, NULL) != 0 || !w->drain_timer ||
            !w->drain_tick || !w->grant_ev || !w->accept_backoff ||
            (i == 0 && !(w->probe = net_probe_new(w)))) {
            snprintf(err, errlen, "worker %u: out of memory", i);
            workers_free(ws);
            return GW_E_NOMEM;
        }
        for (j = 0; j < w->n_fds; j++) {
            w->listeners[j] =
                evconnlistener_new(w->base, (w->tls_fds & (1u << j)) ? on_accept_tls : on_accept, w,
                                   LEV_OPT_CLOSE_ON_FREE, 0, w->fds[j]);
            if (!w->listeners[j]) {
                snprintf(err, errlen, "worker %u: evconnlistener_new failed", i);
                workers_free(ws);
                return GW_E_INTERNAL;
            }
            evconnlistener_set_error_cb(w->listeners[j], on_accept_error);
        }
    }
    for (i = 0; i < n_workers; i++) {
        if (pthread_create(&ws->v[i].thread, NULL, worker_main, &ws->v[i]) != 0) {
            snprintf(err, errlen, "cannot start worker thread %u", i);
            /* Threads already started are stopped the normal way. */
            ws->n = i;
            net_workers_stop(ws, 0);
            return GW_E_INTERNAL;
        }
    }
    *out = ws;
    return GW_OK;
}

void
net_workers_stop(struct net_workers *ws, unsigned drain_secs)
{
    unsigned i;

    if (!ws)
        return;
    for (i = 0; i < ws->n; i++) {
        /* Release store: the worker's acquire load in start_drain sees the deadline. */
        ck_pr_fence_store();
        ck_pr_store_uint(&ws->v[i].drain_requested, drain_secs + 1);
        net_worker_mail(&ws->v[i]);
    }
    for (i = 0; i < ws->n; i++) {
        pthread_join(ws->v[i].thread, NULL);
        ws->v[i].draining = true; /* its listeners are freed */
    }
    workers_free(ws);
}
