/* SPDX-License-Identifier: MIT
 * net/sockread.h - reading a plain socket into its bufferevent's input without
 * libevent's FIONREAD. A socket bufferevent reads with evbuffer_read(), which asks the
 * kernel how much is readable (ioctl FIONREAD) before every read: one system call more
 * per read on both sides of every request (docs/perf.md). A reader in own mode keeps the
 * bufferevent's reading disabled and reads from an event of its own into reserved space
 * of the input, then calls the bufferevent's read callback, or its event callback at
 * EOF, error or read timeout, as the bufferevent would. Writing stays the bufferevent's.
 * A reader not in own mode (TLS bufferevents, HTTP/2 upstream sessions) passes every
 * call through to the bufferevent. The callbacks are the bufferevent's current ones
 * (bufferevent_getcb), so a connection handed to HTTP/2 or WebSocket code reads on.
 * Owns:    its event; never the bufferevent.
 * Threads: the owning worker's loop only.
 * See:     net/sockread.c, net/http1.c (client connections), net/upstream.c (HTTP/1.1
 *          upstream connections)
 */
#ifndef GW_NET_SOCKREAD_H
#define GW_NET_SOCKREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/time.h>

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/event_struct.h>

struct net_sockread {
    struct bufferevent *bev;
    struct event ev;                    /* EV_READ | EV_PERSIST on the socket (own mode) */
    struct timeval tmo;                 /* read timeout; 0: none */
    size_t hiwat;                       /* stop reading while the input holds this much; 0: none */
    struct evbuffer_cb_entry *drain_cb; /* resumes reading below hiwat */
    bool own;                           /* this reads; the bufferevent's reading stays off */
    bool on;                            /* reading enabled (own mode) */
    bool added;                         /* ev is added */
};

/* Starts <r> for <bev>: in own mode when <own> (a plain socket bufferevent), else
 * passing through. Reading starts disabled. False when out of memory. */
bool net_sockread_init(struct net_sockread *r, struct event_base *base, struct bufferevent *bev,
                       bool own);
/* Deletes the event; the bufferevent is not touched (free it after). NULL-safe. */
void net_sockread_fini(struct net_sockread *r);
void net_sockread_enable(struct net_sockread *r);
void net_sockread_disable(struct net_sockread *r);
/* The read timeout (NULL: none), reset by every read, as bufferevent_set_timeouts. */
void net_sockread_set_timeout(struct net_sockread *r, const struct timeval *tv);
/* Reading pauses while the input holds <hiwat> bytes or more (0: never), as a
 * bufferevent's read high watermark. */
void net_sockread_set_hiwat(struct net_sockread *r, size_t hiwat);

#endif
