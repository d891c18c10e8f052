/* SPDX-License-Identifier: MIT
 * net/save.h - the file work of a control API save (DESIGN.md 14): read the config file,
 * validate it, edit one entry (core/yaml_edit.h), validate the whole new text as a reload
 * would, and replace the file atomically. Run on a helper thread of the control API
 * (net/control.c) so that its event loop never waits for the disk; the caller then
 * sends SIGHUP and waits for the reload to publish the saved entry.
 * Owns:    nothing beyond one save; saves of one process are serialized by a lock.
 * Threads: net_save_run on any thread (blocks on disk and on other saves); the rest on
 *          the thread that owns the save.
 * See:     net/save.c, net/control.c, core/yaml_edit.h, tests/e2e/test_saves.py
 */
#ifndef GW_NET_SAVE_H
#define GW_NET_SAVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codes.h"
#include "core/conf.h"
#include "core/row-t.h"
#include "core/yaml_edit.h"

struct store;

enum net_save_kind {
    NET_SAVE_SPEC,     /* PUT provider-model-spec: one model_specs entry */
    NET_SAVE_PROVIDER, /* providers/{name} */
    NET_SAVE_GROUP,    /* groups/{name} */
    NET_SAVE_CLIENT,   /* keys/{name}: a clients entry */
};

/* One save: the request (in), then what happened (out). */
struct net_save {
    /* in */
    enum net_save_kind kind;
    const char *conf_path;          /* borrowed: gwd's config path */
    struct store *store;            /* borrowed, may be NULL: a client rename is recorded there */
    char name[GW_NAME_MAX + 1];     /* the entry in the path (SPEC: the provider) */
    char new_name[GW_NAME_MAX + 1]; /* the saved entry's name (== name unless renamed) */
    char *entry;                    /* owned: the new entry as JSON; NULL removes it */
    size_t entry_len;
    char *model; /* owned: SPEC only, the model id */
    struct gw_yaml_spec_edit spec;
    /* out */
    enum gw_code code;             /* GW_OK when saved or nothing to change */
    int status;                    /* the HTTP status of a refusal; 0: the code's own */
    char why[1024];                /* the refusal, for the operator (no secret values) */
    struct gw_conf_problems probs; /* a refused config's problems (when n > 0) */
    const char *lead;              /* their one-line summary */
    bool changed;                  /* the file was replaced */
    bool created;                  /* the entry was added */
    bool spec_present;             /* SPEC: the entry exists in the saved file ... */
    uint64_t spec_cw, spec_mo;     /* ... with these values (0: not written) */
};

/* A save of <kind> for the config file <conf_path>; NULL when out of memory. */
struct net_save *net_save_new(enum net_save_kind kind, const char *conf_path, struct store *store);

/* Frees <s> and what it owns. NULL is fine. */
void net_save_free(struct net_save *s);

/* Does the file work of <s> and fills its out fields. Blocks on disk, and while another
 * save of this process runs. Never answers, never signals. */
void net_save_run(struct net_save *s);

/* The config list a save of <kind> edits ("providers", "groups", "clients"); NULL for
 * SPEC. */
const char *net_save_list(enum net_save_kind kind);

#endif
