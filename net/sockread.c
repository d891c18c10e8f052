/* SPDX-License-Identifier: MIT
 * net/sockread.c - reading a plain socket into its bufferevent's input without
 * libevent's FIONREAD (see net/sockread.h).
 * Owns:    the reader's event and its input drain callback, never the bufferevent.
 * Threads: the owning worker's loop only.
 * See:     net/sockread.h, docs/perf.md ("ioctl(FIONREAD)")
 */
#include "net/sockread.h"

#include <errno.h>
#include <sys/uio.h>

#include <event2/buffer.h>

/* Bytes asked of one read: libevent reads at most 4096 after its FIONREAD; a larger
 * read takes a paced stream's burst or a long body in fewer calls. The space is
 * reserved in the input (no copy) and what is not filled is given back at once. */
#define NET_SOCKREAD_CHUNK 8192

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
    struct net_sockread *r = arg;
    struct bufferevent *bev = r->bev;
    struct evbuffer *in = bufferevent_get_input(bev);
    struct evbuffer_iovec v[2];
    bufferevent_data_cb readcb;
    void *cbarg;
    size_t want = NET_SOCKREAD_CHUNK, room, left;
    ssize_t n;
    int nv;

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
    /* A socket bufferevent keeps its input's end frozen but while it reads itself. */
    evbuffer_unfreeze(in, 0);
    nv = evbuffer_reserve_space(in, (ev_ssize_t)want, v, 2);
    if (nv < 1) {
        evbuffer_freeze(in, 0);
        errno = ENOMEM;
        report(r, BEV_EVENT_ERROR);
        return;
    }
    room = want;
    for (int i = 0; i < nv; i++) { /* the space given may be more than asked */
        if (v[i].iov_len > room)
            v[i].iov_len = room;
        room -= v[i].iov_len;
    }
    do
        n = readv(fd, (struct iovec *)v, nv);
    while (n < 0 && errno == EINTR);
    if (n <= 0) {
        int e = errno;

        v[0].iov_len = 0;
        evbuffer_commit_space(in, v, 1);
        evbuffer_freeze(in, 0);
        if (n < 0 && (e == EAGAIN || e == EWOULDBLOCK))
            return;
        errno = e;
        report(r, n == 0 ? BEV_EVENT_EOF : BEV_EVENT_ERROR);
        return;
    }
    left = (size_t)n;
    for (int i = 0; i < nv; i++) {
        if (v[i].iov_len > left)
            v[i].iov_len = left;
        left -= v[i].iov_len;
    }
    evbuffer_commit_space(in, v, nv);
    evbuffer_freeze(in, 0);
    if (r->hiwat)
        update(r);
    bufferevent_getcb(bev, &readcb, NULL, NULL, &cbarg);
    if (readcb)
        readcb(bev, cbarg); /* may free r: nothing after */
}

bool
net_sockread_init(struct net_sockread *r, struct event_base *base, struct bufferevent *bev,
                  bool own)
{
    *r = (struct net_sockread){.bev = bev, .own = own};
    if (own && event_assign(&r->ev, base, bufferevent_getfd(bev), EV_READ | EV_PERSIST,
                            on_readable, r) != 0) {
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
