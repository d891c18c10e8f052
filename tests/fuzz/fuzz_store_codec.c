/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_store_codec.c - fuzz target for the store's value codecs
 * (store/codec.c): a stored request row and a stored Responses value's head, read back
 * from bytes that may be anything (a damaged or foreign data.mdb). The input is given
 * whole to both readers.
 *
 * - A row that decodes encodes again (within STORE_ROW_ENC_MAX), and that encoding is a
 *   fixed point: decoded and encoded once more it gives the same bytes. Its client is
 *   what store_row_decode_client reads from the input.
 * - A response head that decodes gives names of at most GW_NAME_MAX bytes and an items
 *   offset within the input; written again with its fields (the current version) it
 *   reads back the same fields, its items starting where the writer said.
 * Owns:    one input at a time.
 * Threads: single-threaded.
 * See:     store/codec.c, tests/fuzz/corpus/store_codec/
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/store-priv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct gw_row row_a, row_b; /* about 4 KB each: not on the fuzzer's stack */
static unsigned char enc_a[STORE_ROW_ENC_MAX], enc_b[STORE_ROW_ENC_MAX];

static void
check_row(const uint8_t *data, size_t size)
{
    char client[GW_NAME_MAX + 1];
    size_t na, nb;

    if (!store_row_decode(data, size, &row_a))
        return;
    if (!store_row_decode_client(data, size, client) || strcmp(client, row_a.client) != 0)
        abort();
    na = store_row_encode(&row_a, enc_a, sizeof enc_a);
    if (na == 0 || !store_row_decode(enc_a, na, &row_b))
        abort();
    nb = store_row_encode(&row_b, enc_b, sizeof enc_b);
    if (nb != na || memcmp(enc_a, enc_b, na) != 0)
        abort();
}

static void
check_resp_head(const uint8_t *data, size_t size)
{
    char provider[GW_NAME_MAX + 1], client[GW_NAME_MAX + 1];
    char provider2[GW_NAME_MAX + 1], client2[GW_NAME_MAX + 1];
    unsigned char head[STORE_RESP_HEAD_MAX];
    uint64_t ts, ts2;
    unsigned flags, flags2;
    size_t off, off2, plen, clen, hlen;
    int shape, shape2;

    if (!store_resp_head_decode(data, size, &ts, provider, client, &shape, &flags, &off))
        return;
    plen = strlen(provider);
    clen = strlen(client);
    if (off > size || plen > GW_NAME_MAX || clen > GW_NAME_MAX || shape < 0 || shape > 255)
        abort();
    hlen = store_resp_head_encode(head, ts, provider, plen, client, clen, shape, flags);
    if (hlen > sizeof head ||
        !store_resp_head_decode(head, hlen, &ts2, provider2, client2, &shape2, &flags2, &off2))
        abort();
    if (ts2 != ts || strcmp(provider2, provider) != 0 || strcmp(client2, client) != 0 ||
        shape2 != shape || flags2 != flags || off2 != hlen)
        abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_row(data, size);
    check_resp_head(data, size);
    return 0;
}
