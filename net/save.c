/* SPDX-License-Identifier: MIT
 * net/save.c - the file work of a control API save (see net/save.h): read the config
 * file, check it is accepted as it is, edit one entry (core/yaml_edit.h), validate the
 * whole new text with gw_conf_parse exactly as the reload will (the process environment,
 * SHA-256), and replace the file: a temp file in the same folder, fsync, rename, the
 * folder fsynced. A key renamed (keys/{name} saved with another name) is recorded in the
 * store first, so its usage totals follow it (store_client_renamed).
 * One lock serializes the saves of the process: two saves never read the same old text,
 * so neither loses the other's entry.
 * Owns:    the save lock; the buffers of one save.
 * Threads: net_save_run on the control API's save helper threads; blocks on disk.
 * See:     net/save.h, net/control.c, tests/e2e/test_saves.py
 */
#include "net/save.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/str.h"
#include "net/egress.h"
#include "store/store.h"

#define SAVE_MAX_CONF (16 * 1024 * 1024)
#define SAVE_SYNC_MS 5000 /* a rename waits this long for queued rows to be committed */

static pthread_mutex_t save_lock = PTHREAD_MUTEX_INITIALIZER;

static char *
file_read(const char *path, size_t *lenp)
{
    struct gw_buf b = {0};
    char chunk[16384];
    FILE *f = fopen(path, "rb");
    size_t n;

    if (!f)
        return NULL;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (b.len + n > SAVE_MAX_CONF || gw_buf_append(&b, chunk, n) != GW_OK) {
            fclose(f);
            gw_buf_fini(&b);
            errno = b.len + n > SAVE_MAX_CONF ? EFBIG : ENOMEM;
            return NULL;
        }
    }
    if (ferror(f)) {
        fclose(f);
        gw_buf_fini(&b);
        errno = EIO;
        return NULL;
    }
    fclose(f);
    *lenp = b.len;
    if (!b.data) /* an empty file */
        return gw_calloc(1, 1);
    return b.data;
}

/* Replaces <path> by <len> bytes of <data>: a temp file in the same folder, with the
 * old file's mode, written, fsynced and renamed over it, then the folder fsynced. A
 * symlinked config is followed, so the link stays and its target is replaced. */
static bool
file_replace(const char *path, const char *data, size_t len, char *why, size_t whylen)
{
    char real[PATH_MAX], rcopy[PATH_MAX], tmp[PATH_MAX + 32];
    const char *dir;
    struct stat st;
    size_t off = 0;
    int fd, dfd, n;

    if (!realpath(path, real) || stat(real, &st) != 0) {
        snprintf(why, whylen, "%.300s: %s", path, strerror(errno));
        return false;
    }
    memcpy(rcopy, real, sizeof(rcopy));
    dir = dirname(rcopy);
    n = snprintf(tmp, sizeof(tmp), "%s/.gw-save-XXXXXX", dir);
    if (n < 0 || (size_t)n >= sizeof(tmp)) {
        snprintf(why, whylen, "%.300s: the path is too long", real);
        return false;
    }
    fd = mkstemp(tmp);
    if (fd < 0) {
        snprintf(why, whylen, "cannot create a file in %.300s: %s", dir, strerror(errno));
        return false;
    }
    if (fchmod(fd, st.st_mode & 07777) != 0)
        goto fail;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            goto fail;
        off += (size_t)w;
    }
    if (fsync(fd) != 0) /* the bytes are on disk before the name points at them */
        goto fail;
    if (close(fd) != 0) {
        fd = -1;
        goto fail;
    }
    fd = -1;
    if (rename(tmp, real) != 0)
        goto fail;
    dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) { /* the rename itself is durable once the folder is synced */
        fsync(dfd);
        close(dfd);
    }
    return true;
fail:
    snprintf(why, whylen, "cannot write %.300s: %s", real, strerror(errno));
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return false;
}

/* ---- one save ---- */

const char *
net_save_list(enum net_save_kind kind)
{
    switch (kind) {
    case NET_SAVE_PROVIDER: return "providers";
    case NET_SAVE_GROUP: return "groups";
    case NET_SAVE_CLIENT: return "clients";
    case NET_SAVE_SPEC: break;
    }
    return NULL;
}

struct net_save *
net_save_new(enum net_save_kind kind, const char *conf_path, struct store *store)
{
    struct net_save *s = gw_calloc(1, sizeof(*s));

    if (s) {
        s->kind = kind;
        s->conf_path = conf_path;
        s->store = store;
    }
    return s;
}

void
net_save_free(struct net_save *s)
{
    if (!s)
        return;
    gw_conf_problems_fini(&s->probs);
    gw_free(s->entry);
    gw_free(s->model);
    gw_free(s);
}

static void refuse(struct net_save *s, enum gw_code code, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
refuse(struct net_save *s, enum gw_code code, int status, const char *fmt, ...)
{
    va_list ap;

    s->code = code;
    s->status = status;
    va_start(ap, fmt);
    vsnprintf(s->why, sizeof(s->why), fmt, ap);
    va_end(ap);
}

/* The model_specs entry <model> of provider <prov> in <c> as written (NULL if none). */
static const struct gw_conf_model_spec *
spec_entry(const struct gw_conf *c, const char *prov, const char *model)
{
    const struct gw_conf_provider *p = c ? gw_conf_provider_find(c, prov, strlen(prov)) : NULL;
    size_t i;

    for (i = 0; p && i < p->n_model_specs; i++)
        if (strcmp(p->model_specs[i].model, model) == 0)
            return &p->model_specs[i];
    return NULL;
}

static int
spec_status(enum gw_code rc)
{
    switch (rc) {
    case GW_E_CFG_MODEL_SPEC_BLANK_MODEL:
    case GW_E_CFG_MODEL_SPEC_WILDCARD:
    case GW_E_CFG_MODEL_SPEC_ZERO:
    case GW_E_CFG_RANGE:
    case GW_E_CFG_WRONG_TYPE: return 400;
    default: return 0; /* the code's own */
    }
}

/* Whether <c> holds an entry named <name> of the list a save of <kind> edits. */
static bool
has_entry(const struct gw_conf *c, enum net_save_kind kind, const char *name)
{
    size_t n = strlen(name);

    switch (kind) {
    case NET_SAVE_PROVIDER: return gw_conf_provider_find(c, name, n) != NULL;
    case NET_SAVE_GROUP: return gw_conf_group_find(c, name, n) != NULL;
    case NET_SAVE_CLIENT: return gw_conf_client_find(c, name, n) != NULL;
    case NET_SAVE_SPEC: break;
    }
    return false;
}

/* A group that goes away (removed or renamed) while a key's `models` scope names it
 * would silently turn that scope into a plain model id: refused. */
static bool
group_still_named(struct net_save *s, const struct gw_conf *old)
{
    size_t i, j;

    if (s->kind != NET_SAVE_GROUP || (s->entry && strcmp(s->name, s->new_name) == 0) ||
        !has_entry(old, NET_SAVE_GROUP, s->name)) /* not a group: nothing goes away */
        return false;
    for (i = 0; i < old->n_clients; i++) {
        for (j = 0; j < old->clients[i].n_models; j++) {
            if (strcmp(old->clients[i].models[j], s->name) == 0) {
                refuse(s, GW_E_CFG_GROUP_IN_USE, 409,
                       "clients[%zu] (%s).models[%zu]: %s (config.group_in_use) the key's "
                       "scope names this group: change that key first; the file is unchanged",
                       i, old->clients[i].name, j, s->name);
                return true;
            }
        }
    }
    return false;
}

/* The edit of the text <data>/<len> into <text>; false when refused (s->code set). */
static bool
edit_text(struct net_save *s, const char *data, size_t len, const struct gw_conf *old,
          struct gw_buf *text)
{
    enum gw_code rc;

    if (s->kind == NET_SAVE_SPEC) {
        if (!gw_conf_provider_find(old, s->name, strlen(s->name))) {
            refuse(s, GW_E_CONTROL_UNKNOWN_PROVIDER, 0,
                   "no provider named \"%.64s\" in the config file", s->name);
            return false;
        }
        rc = gw_yaml_set_model_spec(data, len, s->name, s->model, &s->spec, text, s->why,
                                    sizeof(s->why));
        if (rc != GW_OK) {
            s->code = rc;
            s->status = spec_status(rc);
            return false;
        }
        return true;
    }
    if (group_still_named(s, old))
        return false;
    rc = gw_yaml_set_entry(data, len, net_save_list(s->kind), s->name, s->entry, s->entry_len, text,
                           &s->created, s->why, sizeof(s->why));
    if (rc != GW_OK) {
        s->code = rc;
        s->status = rc == GW_E_BAD_REQUEST ? 400 : 0;
        return false;
    }
    return true;
}

/* Whether the config <live> holds what save <s> wrote (the entry saved with its name, the
 * old name gone after a rename; the entry gone after a removal; the model spec with the
 * saved values). */
static bool
is_published(const struct net_save *s, const struct gw_conf *live)
{
    const struct gw_conf_model_spec *e;

    if (s->kind == NET_SAVE_SPEC) {
        e = spec_entry(live, s->name, s->model);
        return s->spec_present
                   ? e && e->context_window == s->spec_cw && e->max_output_tokens == s->spec_mo
                   : !e;
    }
    if (s->entry)
        return has_entry(live, s->kind, s->new_name) &&
               (strcmp(s->name, s->new_name) == 0 || !has_entry(live, s->kind, s->name));
    return !has_entry(live, s->kind, s->name);
}

/* The saved text holds what was asked; false (an internal error) otherwise. */
static bool
check_result(struct net_save *s, const struct gw_conf *old, const struct gw_conf *neu)
{
    const struct gw_conf_model_spec *os, *ns;
    uint64_t cw, mo;

    if (s->kind != NET_SAVE_SPEC)
        return is_published(s, neu);
    os = spec_entry(old, s->name, s->model);
    ns = spec_entry(neu, s->name, s->model);
    cw = s->spec.context_window_op == GW_YAML_SET      ? s->spec.context_window
         : s->spec.context_window_op == GW_YAML_REMOVE ? 0
         : os                                          ? os->context_window
                                                       : 0;
    mo = s->spec.max_output_tokens_op == GW_YAML_SET      ? s->spec.max_output_tokens
         : s->spec.max_output_tokens_op == GW_YAML_REMOVE ? 0
         : os                                             ? os->max_output_tokens
                                                          : 0;
    s->spec_present = ns != NULL;
    s->spec_cw = ns ? ns->context_window : 0;
    s->spec_mo = ns ? ns->max_output_tokens : 0;
    return ns ? ns->context_window == cw && ns->max_output_tokens == mo : !(cw || mo);
}

/* Records a key's rename in the store before the file names it (the reload rebuilds the
 * new name's totals from the rows of both); false when the store refused. */
static bool
record_rename(struct net_save *s)
{
    enum gw_code rc;

    if (s->kind != NET_SAVE_CLIENT || !s->entry || strcmp(s->name, s->new_name) == 0 || !s->store)
        return true;
    store_sync(s->store, SAVE_SYNC_MS); /* the old name's last rows are on disk first */
    rc = store_client_renamed(s->store, s->name, s->new_name);
    if (rc != GW_OK) {
        refuse(s, rc, 500, "cannot record the rename of key %s in the store; the file is unchanged",
               s->name);
        return false;
    }
    return true;
}

static void
run_locked(struct net_save *s)
{
    struct gw_conf *old = NULL, *neu = NULL;
    struct gw_buf text = {0};
    char dir[PATH_MAX], *data, *dcopy;
    size_t len = 0;
    enum gw_code rc;

    data = file_read(s->conf_path, &len);
    if (!data) {
        refuse(s, GW_E_CONTROL_CONFIG_IO, 0, "cannot read the config file %.300s: %s", s->conf_path,
               strerror(errno));
        return;
    }
    /* the folder relative paths resolve against, as gwd's loader has it */
    dcopy = gw_strdup(s->conf_path);
    if (!dcopy || !realpath(dirname(dcopy), dir))
        snprintf(dir, sizeof(dir), ".");
    gw_free(dcopy);
    rc = gw_conf_parse(data, len, dir, &net_conf_env, &old, &s->probs);
    if (rc != GW_OK) {
        s->code = rc == GW_E_NOMEM ? rc : GW_E_CONTROL_CONFIG_INVALID;
        s->status = rc == GW_E_NOMEM ? 0 : 409;
        s->lead = "the config file is refused as it is now (fix it by hand first)";
        goto out;
    }
    if (!edit_text(s, data, len, old, &text))
        goto out;
    if (text.len == len && memcmp(text.data ? text.data : "", data, len) == 0) {
        check_result(s, old, old);
        goto out; /* nothing to change: GW_OK, not changed */
    }
    rc = gw_conf_parse(text.data, text.len, dir, &net_conf_env, &neu, &s->probs);
    if (rc != GW_OK) {
        s->code = rc;
        s->status = rc == GW_E_NOMEM ? 0 : 400;
        s->lead = "the edited config is refused; the file is unchanged";
        goto out;
    }
    if (!check_result(s, old, neu)) {
        refuse(s, GW_E_INTERNAL, 500,
               "the edit did not give the entry asked for; the file is unchanged");
        goto out;
    }
    if (!record_rename(s))
        goto out;
    if (!file_replace(s->conf_path, text.data, text.len, s->why, sizeof(s->why))) {
        s->code = GW_E_CONTROL_CONFIG_IO;
        goto out;
    }
    s->changed = true;
out:
    gw_conf_free(old);
    gw_conf_free(neu);
    gw_buf_fini(&text);
    gw_free(data);
}

void
net_save_run(struct net_save *s)
{
    s->code = GW_OK;
    s->status = 0;
    s->why[0] = '\0';
    pthread_mutex_lock(&save_lock);
    run_locked(s);
    pthread_mutex_unlock(&save_lock);
}
