/* SPDX-License-Identifier: MIT
 * net/sockread.c - reading a plain socket into its bufferevent's input without
 * libevent's FIONREAD (see net/sockread.h).
 * Owns:    the reader's event and its input drain callback, never the bufferevent.
 * Threads: the owning worker's loop only.
 * See:     net/sockread.h, docs/perf.md ("ioctl(FIONREAD)")
 */
#include "net/sockread.h"

#include <errno.h>
#include <sys/socket.h>

#include <event2/buffer.h>

/* Bytes asked of one read: libevent reads at most 4096 after its FIONREAD; a larger
 * read takes a paced stream's burst or a long body in fewer calls. */
#define NET_SOCKREAD_CHUNK 16384

static bool
over_hiwat(const struct net_sockread *r)
{
    return r->hiwat && evbuffer_get_length(bufferevent_get_input(r->bev)) >= r->hiwat;
}

/* Adds or deletes the event to match: on, and not paused by the high watermark. While
 * paused by it, the input's drain callback watches for the way back under it. */
static void
update(struct net_sockread *r)
{
    bool full = r->on && over_hiwat(r);
    bool want = r->on && !full;

    if (r->drain_cb) {
        if (full)
            evbuffer_cb_set_flags(bufferevent_get_input(r->bev), r->drain_cb, EVBUFFER_CB_ENABLED);
        else
            evbuffer_cb_clear_flags(bufferevent_get_input(r->bev), r->drain_cb,
                                    EVBUFFER_CB_ENABLED);
    }
    if (want && !r->added) {
        event_add(&r->ev, r->tmo.tv_sec || r->tmo.tv_usec ? &r->tmo : NULL);
        r->added = true;
    } else if (!want && r->added) {
        event_del(&r->ev);
        r->added = false;
    }
}

static void
on_drain(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    struct net_sockread *r = arg;

    (void)buf;
    if (info->n_deleted > 0)
        update(r);
}

/* Tells the bufferevent's owner what the bufferevent would: <what> with
 * BEV_EVENT_READING, after reading is disabled. Nothing of r is touched after. */
static void
report(struct net_sockread *r, short what)
{
    struct bufferevent *bev = r->bev;
    bufferevent_event_cb eventcb;
    void *arg;

    bufferevent_getcb(bev, NULL, NULL, &eventcb, &arg);
    net_sockread_disable(r);
    if (eventcb)
        eventcb(bev, (short)(BEV_EVENT_READING | what), arg);
}

static void
on_readable(evutil_socket_t fd, short what, void *arg)
{
    /* Read here: parsed where it lies when the owner takes bytes (net_sockread_set_bytes)
     * and nothing waits in the input, else copied into the input, which gets a chain the
     * size of what came, where space reserved in it for a full read would be a large
     * allocation every time. */
    static _Thread_local char scratch[NET_SOCKREAD_CHUNK];
    struct net_sockread *r = arg;
    struct bufferevent *bev = r->bev;
    struct evbuffer *in = bufferevent_get_input(bev);
    bufferevent_data_cb readcb;
    void *cbarg;
    size_t want = sizeof(scratch);
    ssize_t n;

    if (what & EV_TIMEOUT) {
        report(r, BEV_EVENT_TIMEOUT);
        return;
    }
    if (r->hiwat) {
        size_t len = evbuffer_get_length(in);

        if (len >= r->hiwat) {
            update(r);
            return;
        }
        if (r->hiwat - len < want)
            want = r->hiwat - len;
    }
    /* recv, not read: read goes through the file layer first (its position lock,
     * vfs_read, the socket's read_iter), recv to the socket (about half a percent of
     * gwd's cycles under perf). */
    do
        n = recv(fd, scratch, want, 0);
    while (n < 0 && errno == EINTR);
    if (n <= 0) {
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        report(r, n == 0 ? BEV_EVENT_EOF : BEV_EVENT_ERROR);
        return;
    }
    bufferevent_getcb(bev, &readcb, NULL, NULL, &cbarg);
    /* Nothing waits in the input: the owner parses the bytes where they lie. */
    if (r->bytes && readcb == r->bytes_for && evbuffer_get_length(in) == 0) {
        r->bytes(cbarg, scratch, (size_t)n); /* may free r: nothing after */
        return;
    }
    net_sockread_deliver(r, scratch, (size_t)n); /* may free r: nothing after */
}

bool
net_sockread_keep(struct net_sockread *r, const char *p, size_t n)
{
    struct evbuffer *in = bufferevent_get_input(r->bev);
    int rc;

    /* A socket bufferevent keeps its input's end frozen but while it reads itself. */
    evbuffer_unfreeze(in, 0);
    rc = evbuffer_add(in, p, n);
    evbuffer_freeze(in, 0);
    if (rc != 0) {
        errno = ENOMEM;
        report(r, BEV_EVENT_ERROR);
        return false;
    }
    if (r->hiwat)
        update(r);
    return true;
}

void
net_sockread_deliver(struct net_sockread *r, const char *p, size_t n)
{
    struct bufferevent *bev = r->bev;
    bufferevent_data_cb readcb;
    void *cbarg;

    if (!net_sockread_keep(r, p, n))
        return;
    bufferevent_getcb(bev, &readcb, NULL, NULL, &cbarg);
    if (readcb)
        readcb(bev, cbarg); /* may free r: nothing after */
}

void
net_sockread_set_bytes(struct net_sockread *r, bufferevent_data_cb readcb,
                       net_sockread_bytes_cb bytes)
{
    r->bytes_for = readcb;
    r->bytes = bytes;
}

bool
net_sockread_init(struct net_sockread *r, struct event_base *base, struct bufferevent *bev,
                  bool own)
{
    *r = (struct net_sockread){.bev = bev, .own = own};
    if (own && event_assign(&r->ev, base, bufferevent_getfd(bev), EV_READ | EV_PERSIST, on_readable,
                            r) != 0) {
        r->own = false;
        return false;
    }
    return true;
}

void
net_sockread_fini(struct net_sockread *r)
{
    if (!r || !r->own)
        return;
    if (r->added)
        event_del(&r->ev);
    r->added = r->on = false;
    if (r->drain_cb)
        evbuffer_remove_cb_entry(bufferevent_get_input(r->bev), r->drain_cb);
    r->drain_cb = NULL;
}

void
net_sockread_enable(struct net_sockread *r)
{
    if (!r->own) {
        bufferevent_enable(r->bev, EV_READ);
        return;
    }
    r->on = true;
    update(r);
}

void
net_sockread_disable(struct net_sockread *r)
{
    if (!r->own) {
        bufferevent_disable(r->bev, EV_READ);
        return;
    }
    r->on = false;
    update(r);
}

void
net_sockread_set_timeout(struct net_sockread *r, const struct timeval *tv)
{
    if (!r->own) {
        bufferevent_set_timeouts(r->bev, tv, NULL);
        return;
    }
    r->tmo = tv ? *tv : (struct timeval){0, 0};
    if (!r->added)
        return; /* update() adds it with the timeout */
    /* Neither call touches the socket's registration (no epoll_ctl): an idle upstream
     * connection taken for a request pays no system call for its timeout. */
    if (tv)
        event_add(&r->ev, &r->tmo);
    else
        event_remove_timer(&r->ev);
}

void
net_sockread_set_hiwat(struct net_sockread *r, size_t hiwat)
{
    if (!r->own) {
        bufferevent_setwatermark(r->bev, EV_READ, 0, hiwat);
        return;
    }
    r->hiwat = hiwat;
    if (hiwat && !r->drain_cb)
        r->drain_cb = evbuffer_add_cb(bufferevent_get_input(r->bev), on_drain, r);
    update(r);
}
