/* SPDX-License-Identifier: MIT
 * net/reload.c - the queue of reload asks between the control thread (or any loop) and
 * main, the JSON of an outcome and its operator event.
 * Owns:    the queue (mutex, list, main's event), each ask until its answer ran, and the
 *          process-wide reload counters.
 * Threads: see net/reload.h: asks on any loop's thread, runs on main, answers on the
 *          asker's loop. The ask's result is written by main before it makes the
 *          asker's event active and read by the asker in that event's callback: the
 *          event_base lock of libevent (evthread_use_pthreads) orders the two.
 * See:     net/reload.h
 */
#include "net/reload.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "core/alloc.h"
#include "core/events.h"
#include "core/str.h"

struct reload_ask {
    struct reload_ask *next;
    struct event *done_ev; /* on the asker's base; made active by main */
    net_reload_done_fn done;
    void *arg;
    const char *source;
    struct net_reload_result res; /* written by main, read by the asker */
};

/* Reloads announced since start, by outcome; __atomic, relaxed (statistics for /metrics). */
static uint64_t reloads_ok, reloads_refused;

struct net_reload {
    pthread_mutex_t mu; /* guards the fields below it */
    struct reload_ask *head, **tail;
    size_t n_pending;
    bool closed;
    struct event *ev; /* on main's base: serve the queue */
    net_reload_run_fn run;
    void *run_arg;
};

void
net_reload_result_fini(struct net_reload_result *res)
{
    gw_confdiff_fini(&res->diff);
    gw_conf_problems_fini(&res->problems);
}

/* ---- the asker's side ---- */

static void
on_answer(evutil_socket_t fd, short what, void *arg)
{
    struct reload_ask *a = arg;

    (void)fd;
    (void)what;
    a->done(a->arg, &a->res);
    net_reload_result_fini(&a->res);
    event_free(a->done_ev); /* not pending: it fired once */
    gw_free(a);
}

enum gw_code
net_reload_ask(struct net_reload *r, struct event_base *base, const char *source,
               net_reload_done_fn done, void *arg)
{
    struct reload_ask *a;
    enum gw_code rc = GW_OK;
    bool serve;

    a = gw_calloc(1, sizeof(*a));
    if (!a)
        return GW_E_NOMEM;
    a->done_ev = event_new(base, -1, 0, on_answer, a);
    if (!a->done_ev) {
        gw_free(a);
        return GW_E_NOMEM;
    }
    a->done = done;
    a->arg = arg;
    a->source = source;
    pthread_mutex_lock(&r->mu);
    if (r->closed) {
        rc = GW_E_SHUTTING_DOWN;
    } else if (r->n_pending >= NET_RELOAD_MAX_PENDING) {
        rc = GW_E_BUSY;
    } else {
        *r->tail = a;
        r->tail = &a->next;
        r->n_pending++;
    }
    serve = rc == GW_OK && r->ev;
    if (serve)
        event_active(r->ev, EV_READ, 0); /* under mu: close frees nothing before it */
    pthread_mutex_unlock(&r->mu);
    if (rc != GW_OK) {
        event_free(a->done_ev);
        gw_free(a);
    }
    return rc;
}

/* ---- main's side ---- */

static struct reload_ask *
take_all(struct net_reload *r)
{
    struct reload_ask *list;

    pthread_mutex_lock(&r->mu);
    list = r->head;
    r->head = NULL;
    r->tail = &r->head;
    r->n_pending = 0;
    pthread_mutex_unlock(&r->mu);
    return list;
}

/* Hands <a> back to its asker's loop; it is the asker's from here on. */
static void
answer(struct reload_ask *a)
{
    event_active(a->done_ev, EV_TIMEOUT, 0);
}

/* Runs every queued ask, in order, one reload each. */
static void
on_asks(evutil_socket_t fd, short what, void *arg)
{
    struct net_reload *r = arg;
    struct reload_ask *a, *next;

    (void)fd;
    (void)what;
    for (a = take_all(r); a; a = next) {
        next = a->next;
        r->run(r->run_arg, a->source, &a->res);
        answer(a);
    }
}

struct net_reload *
net_reload_new(net_reload_run_fn run, void *arg)
{
    struct net_reload *r = gw_calloc(1, sizeof(*r));

    if (!r)
        return NULL;
    if (pthread_mutex_init(&r->mu, NULL) != 0) {
        gw_free(r);
        return NULL;
    }
    r->tail = &r->head;
    r->run = run;
    r->run_arg = arg;
    return r;
}

enum gw_code
net_reload_attach(struct net_reload *r, struct event_base *main_base)
{
    struct event *ev = event_new(main_base, -1, 0, on_asks, r);

    if (!ev)
        return GW_E_NOMEM;
    pthread_mutex_lock(&r->mu);
    r->ev = ev;
    if (r->head)
        event_active(ev, EV_READ, 0);
    pthread_mutex_unlock(&r->mu);
    return GW_OK;
}

void
net_reload_close(struct net_reload *r)
{
    struct reload_ask *a, *next;

    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->closed = true;
    pthread_mutex_unlock(&r->mu);
    for (a = take_all(r); a; a = next) {
        next = a->next;
        a->res.code = GW_E_SHUTTING_DOWN;
        snprintf(a->res.message, sizeof(a->res.message),
                 "the gateway is stopping; the config was not reloaded");
        answer(a);
    }
}

void
net_reload_free(struct net_reload *r)
{
    if (!r)
        return;
    if (r->ev)
        event_free(r->ev);
    pthread_mutex_destroy(&r->mu);
    gw_free(r);
}

/* ---- JSON and the event ---- */

static json_t *
names_json(const struct gw_confdiff_names *l)
{
    json_t *a = json_array();
    size_t i;

    for (i = 0; a && i < l->n; i++)
        if (json_array_append_new(a, json_string(l->v[i])) != 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *
set_json(const struct gw_confdiff_set *s)
{
    return json_pack("{s:o,s:o,s:o}", "added", names_json(&s->added), "removed",
                     names_json(&s->removed), "changed", names_json(&s->changed));
}

static json_t *
problems_json(const struct gw_conf_problems *p)
{
    json_t *a = json_array();
    size_t i;

    for (i = 0; a && i < p->n && i < 20; i++) {
        json_t *o =
            json_pack("{s:s,s:s,s:s,s:s}", "code", gw_code_str(p->v[i].code), "path",
                      p->v[i].path ? p->v[i].path : "", "value", p->v[i].value ? p->v[i].value : "",
                      "message", p->v[i].msg ? p->v[i].msg : "");

        if (!o || json_array_append_new(a, o) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

json_t *
net_reload_result_json(const struct net_reload_result *res)
{
    json_t *settings, *j;
    struct gw_buf msg = {0};
    char line[1024];
    size_t i;

    if (!res->reloaded) {
        /* the message names the problems too (up to 20), as a refused save's does, so a
         * reader of the message alone (gwctl, a log) learns what is wrong */
        gw_buf_append_cstr(&msg, res->message);
        for (i = 0; i < res->problems.n && i < 20; i++) {
            gw_conf_problem_format(&res->problems.v[i], line, sizeof(line));
            gw_buf_printf(&msg, "%s%s", i ? "; " : ": ", line);
        }
        j = json_pack("{s:b,s:I,s:{s:s,s:s,s:o}}", "reloaded", 0, "generation",
                      (json_int_t)res->generation, "error", "code", gw_code_str(res->code),
                      "message", msg.data ? msg.data : res->message, "problems",
                      problems_json(&res->problems));
        gw_buf_fini(&msg);
        return j;
    }
    settings = json_array();
    for (i = 0; settings && i < res->diff.n_settings; i++)
        json_array_append_new(settings, json_string(res->diff.settings[i]));
    return json_pack("{s:b,s:I,s:{s:o,s:o,s:o},s:o}", "reloaded", 1, "generation",
                     (json_int_t)res->generation, "changed", "providers",
                     set_json(&res->diff.providers), "groups", set_json(&res->diff.groups),
                     "clients", set_json(&res->diff.clients), "settings", settings);
}

void
net_reload_announce(const struct net_reload_result *res, const char *source)
{
    enum gw_event_name e = res->reloaded ? GW_EV_CONFIG_RELOADED : GW_EV_CONFIG_REFUSED;
    json_t *j;
    char *s;

    __atomic_fetch_add(res->reloaded ? &reloads_ok : &reloads_refused, 1, __ATOMIC_RELAXED);
    j = net_reload_result_json(res);
    if (!j || json_object_set_new(j, "type", json_string(gw_event_str(e))) != 0 ||
        json_object_set_new(j, "source", json_string(source)) != 0) {
        json_decref(j);
        return; /* out of memory: the log line still says it */
    }
    s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s)
        return;
    gw_event_push(e, s);
    free(s); /* jansson's allocator */
}

void
net_reload_counts(uint64_t *reloaded, uint64_t *refused)
{
    *reloaded = __atomic_load_n(&reloads_ok, __ATOMIC_RELAXED);
    *refused = __atomic_load_n(&reloads_refused, __ATOMIC_RELAXED);
}
