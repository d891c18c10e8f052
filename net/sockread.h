/* SPDX-License-Identifier: MIT
 * net/sockread.h - reading a plain socket into its bufferevent's input without
 * libevent's FIONREAD. A socket bufferevent reads with evbuffer_read(), which asks the
 * kernel how much is readable (ioctl FIONREAD) before every read: one system call more
 * per read on both sides of every request (docs/perf.md). A reader in own mode keeps the
 * bufferevent's reading disabled and reads from an event of its own into reserved space
 * of the input, then calls the bufferevent's read callback, or its event callback at
 * EOF, error or read timeout, as the bufferevent would. Writing stays the bufferevent's.
 * An owner may take the bytes of a read itself (net_sockread_set_bytes): while its read
 * callback is the bufferevent's and the input is empty, a read's bytes go to its bytes
 * callback, to be parsed where they lie (no input chain allocated, copied, drained and
 * freed per read); what it does not use it keeps with net_sockread_keep.
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

/* The bytes of one read, <n> > 0 of them at <p>, valid only during the call; <arg> is the
 * bufferevent's callback argument. May free the reader. */
typedef void (*net_sockread_bytes_cb)(void *arg, const char *p, size_t n);

struct net_sockread {
    struct bufferevent *bev;
    struct event ev;                    /* EV_READ | EV_PERSIST on the socket (own mode) */
    struct timeval tmo;                 /* read timeout; 0: none */
    size_t hiwat;                       /* stop reading while the input holds this much; 0: none */
    struct evbuffer_cb_entry *drain_cb; /* resumes reading below hiwat */
    bufferevent_data_cb bytes_for;      /* the read callback <bytes> stands in for */
    net_sockread_bytes_cb bytes;        /* takes a read's bytes while the input is empty */
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

/* Reads while the bufferevent's read callback is <readcb> and its input is empty hand
 * their bytes to <bytes> instead of adding them to the input and calling <readcb>
 * (own mode only; NULL: none). */
void net_sockread_set_bytes(struct net_sockread *r, bufferevent_data_cb readcb,
                            net_sockread_bytes_cb bytes);
/* Adds <n> bytes at <p> to the input (what a bytes callback did not use). False when out
 * of memory: that is reported as a read error through the event callback, which may
 * have freed the owner (touch nothing of it after false). */
bool net_sockread_keep(struct net_sockread *r, const char *p, size_t n);
/* What a reader without a bytes callback does with a read: keeps the bytes, then calls
 * the read callback (or reports the error, as net_sockread_keep). May free the owner. */
void net_sockread_deliver(struct net_sockread *r, const char *p, size_t n);

#endif
