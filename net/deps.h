/* SPDX-License-Identifier: MIT
 * net/deps.h - the process-wide objects the data plane and the control thread share,
 * created by main before any thread starts and freed after every thread has stopped.
 * Owns:    nothing (main owns each object).
 * Threads: the pointers are set once on main; each object is thread-safe by itself.
 */
#ifndef GW_NET_DEPS_H
#define GW_NET_DEPS_H

struct store;
struct gw_sticky;
struct gw_quota_reg;
struct net_reload;

struct net_deps {
    struct store *store;        /* rows (store_row_submit, store_rows_page) */
    struct gw_sticky *sticky;   /* conversation -> upstream (core/sticky.h) */
    const char *conf_path;      /* the config file gwd was started with (control API saves) */
    struct net_reload *reload;  /* reloads run on main's loop (net/reload.h) */
    struct gw_quota_reg *quota; /* upstream credentials' quota sets (core/quota.h) */
};

#endif
