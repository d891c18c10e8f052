/* SPDX-License-Identifier: MIT
 * core/snap.h - the live configuration snapshot (DESIGN.md 1, STYLE.md 9).
 * The config is immutable once published. Readers take a counted reference inside a
 * ck_epoch section; the publisher swaps one pointer and retires the old snapshot,
 * which is freed once its grace period has passed and its last reference is gone.
 * Owns:    the live pointer and one reference on the live snapshot.
 * Threads: publish and poll on main; acquire/release on any registered thread.
 * See:     core/snap.c, tests/unit/core/test_snap.c
 */
#ifndef GW_CORE_SNAP_H
#define GW_CORE_SNAP_H

#include <ck_epoch.h>

#include "core/conf.h"

/* Per-thread state: each thread that reads snapshots embeds one and registers it. */
struct gw_thread {
    ck_epoch_record_t *epoch;
};

/* Before any thread starts; sets the epoch up once per process (later calls, in
 * tests, only clear the live pointer). */
void gw_snap_init(void);
/* Registers <t> (its epoch record); call on the thread itself when it starts. */
void gw_thread_register(struct gw_thread *t);
void gw_thread_unregister(struct gw_thread *t);

/* The live config with a reference taken; NULL before the first publish. The caller
 * calls gw_conf_release() when done (may hold it across callbacks, e.g. a stream). */
struct gw_conf *gw_conf_acquire(struct gw_thread *t);
void gw_conf_release(struct gw_conf *c);

/* Publishes <c> (takes ownership) and retires the previous snapshot. Main thread. */
void gw_conf_publish(struct gw_thread *t, struct gw_conf *c);
/* Frees retired snapshots whose grace period passed; main thread, now and then. */
void gw_snap_poll(struct gw_thread *t);
/* At exit: retires the live snapshot and frees it once unreferenced (blocks on epoch). */
void gw_snap_shutdown(struct gw_thread *t);

#endif
