/* SPDX-License-Identifier: MIT
 * core/confdiff.h - what a reload changes (DESIGN.md 1, 14): the providers, groups and
 * clients added, removed and changed between two configs, by name, and the top-level
 * settings sections that differ. An entry is "changed" when any field the file gives it
 * differs: each entry is written to a canonical byte form (every configured field,
 * secrets included, runtime pointers and file positions left out) and the two forms
 * compared, so a field is never forgotten by a hand-written comparison. The answer
 * holds names only, never a value, so it may be logged and sent to operators.
 * Owns:    a struct gw_confdiff owns its name copies.
 * Threads: any; pure (reads the two configs, touches nothing shared).
 * See:     core/confdiff.c, net/reload.h (the reload that reports it),
 *          tests/unit/core/test_confdiff.c
 */
#ifndef GW_CORE_CONFDIFF_H
#define GW_CORE_CONFDIFF_H

#include <stdbool.h>
#include <stddef.h>

#include "core/codes.h"
#include "core/conf.h"

/* A list of names (owned copies), in file order. */
struct gw_confdiff_names {
    char **v;
    size_t n;
};

struct gw_confdiff_set {
    struct gw_confdiff_names added;   /* in the new config only, in its order */
    struct gw_confdiff_names removed; /* in the old config only, in its order */
    struct gw_confdiff_names changed; /* in both, some field differs, in the new order */
};

struct gw_confdiff {
    struct gw_confdiff_set providers;
    struct gw_confdiff_set groups;
    struct gw_confdiff_set clients; /* the file's clients[] (gateway keys) */
    /* Top-level sections that differ: "server", "control", "store", "retention",
     * "failover", "prices" (the prices path or the loaded table). Static strings. */
    const char *settings[8];
    size_t n_settings;
};

/* Compares <old> with <neu> into <*out> (zeroed first; free with gw_confdiff_fini).
 * <old> NULL counts every entry of <neu> as added (a first load). A position change
 * alone (the same entry moved in its list) is no change. GW_OK, or GW_E_NOMEM with
 * <*out> empty. Any thread holding both configs; no I/O. */
enum gw_code gw_confdiff_build(const struct gw_conf *old, const struct gw_conf *neu,
                               struct gw_confdiff *out);

/* Frees the names of <d>; <d> is empty and reusable afterwards. */
void gw_confdiff_fini(struct gw_confdiff *d);

/* True when nothing was added, removed or changed and no section differs. */
bool gw_confdiff_is_empty(const struct gw_confdiff *d);

/* One line for the log into <buf> (NUL-terminated, cut with "..." to <size>):
 * "providers +a -b ~c; groups ~g; clients -k; settings failover", or "no change".
 * Sections with nothing to say are left out. */
void gw_confdiff_format(const struct gw_confdiff *d, char *buf, size_t size);

#endif
