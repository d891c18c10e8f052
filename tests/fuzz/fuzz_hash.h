/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_hash.h - the one hash the fuzz oracles fold what they saw into, so that
 * two runs over the same input (whole, and split at every byte) compare in a word.
 * Owns:    nothing.
 * Threads: any.
 * See:     tests/fuzz/fuzz_h1req.c, fuzz_sse.c, fuzz_ws.c, fuzz_bedrock_es.c
 */
#ifndef GW_TESTS_FUZZ_HASH_H
#define GW_TESTS_FUZZ_HASH_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a's offset basis: where a hash starts. */
#define FUZZ_HASH_START 14695981039346656037ull

/* <h> with the <n> bytes at <p> folded in (FNV-1a), then a separator, so that the
 * fields "a","b" and "ab","" hash apart. */
static inline uint64_t
fuzz_hash(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;

    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return (h ^ 0xff) * 1099511628211ull;
}

#endif
