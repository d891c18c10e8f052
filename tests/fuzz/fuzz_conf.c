/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_conf.c - feeds arbitrary bytes to the configuration loader.
 * Every input must end in a config or a list of problems, never a crash or a leak.
 * A fake environment answers every variable (so env resolution and the client-key
 * digest run) except names starting with "UNSET", which stay unset. An accepted config
 * also goes through the model-spec resolve function, and its groups must hold what
 * validation promises (every member names a provider, weights 1..100).
 * Owns:    one parse at a time.
 * Threads: single-threaded.
 * See:     core/conf.h, tests/fuzz/corpus/conf/
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *
fuzz_getenv(void *arg, const char *name)
{
    (void)arg;
    return strncmp(name, "UNSET", 5) == 0 ? NULL : "fuzz-secret-value";
}

static void
fuzz_sha256(const void *data, size_t len, unsigned char out[32])
{
    const unsigned char *d = data;
    size_t i;

    memset(out, 0, 32);
    for (i = 0; i < len; i++)
        out[i % 32] ^= d[i];
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const struct gw_conf_env env = {fuzz_getenv, fuzz_sha256, NULL, NULL, NULL};
    struct gw_conf_problems p = {0};
    struct gw_conf *c = NULL;
    char line[512];
    bool secret_in_input;
    size_t i;

    if (gw_conf_parse((const char *)data, size, "/fuzz", &env, &c, &p) == GW_OK) {
        const struct gw_conf_provider *out[4];
        static const unsigned char zero[32];

        struct gw_model_spec spec;
        size_t j;

        (void)gw_conf_candidates(c, "m", 1, out, 4);
        (void)gw_conf_client_by_digest(c, zero);
        for (i = 0; i < c->n_clients; i++)
            (void)gw_conf_client_allows(&c->clients[i], "m", 1);
        /* the resolve function over every provider and each model it names, plus the
         * members of every group (a member always names a provider of the file) */
        for (i = 0; i < c->n_providers; i++) {
            const struct gw_conf_provider *pv = &c->providers[i];

            gw_conf_model_spec(c, pv, "m", &spec);
            for (j = 0; j < pv->n_model_specs; j++) {
                gw_conf_model_spec(c, pv, pv->model_specs[j].model, &spec);
                if (pv->billing == GW_BILLING_FREE && !(spec.input_known && spec.input == 0))
                    __builtin_trap();
                (void)gw_conf_price_input(c, pv, pv->model_specs[j].model);
            }
        }
        for (i = 0; i < c->n_groups; i++)
            for (j = 0; j < c->groups[i].n_members; j++) {
                const struct gw_conf_member *m = &c->groups[i].members[j];

                if (!m->provider || m->weight < 1 || m->weight > 100)
                    __builtin_trap();
            }
    }
    /* The environment's secret must never reach a problem (unless the input itself
     * holds those bytes, e.g. as a key name). */
    secret_in_input = memmem(data, size, "fuzz-secret-value", 17) != NULL;
    for (i = 0; i < p.n; i++) {
        gw_conf_problem_format(&p.v[i], line, sizeof(line));
        if (!secret_in_input && strstr(line, "fuzz-secret-value"))
            __builtin_trap();
    }
    gw_conf_free(c);
    gw_conf_problems_fini(&p);
    return 0;
}
