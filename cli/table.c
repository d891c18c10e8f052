/* SPDX-License-Identifier: MIT
 * cli/table.c - aligned text tables (see cli/table.h). Widths count UTF-8 characters,
 * not bytes, so a model name with an accent does not shift the columns after it.
 * Owns:    the cell copies and the width array of each table.
 * Threads: the main thread only.
 * See:     cli/table.h
 */
#include "cli/table.h"

#include <string.h>

#include "core/alloc.h"

/* Display width: UTF-8 characters (continuation bytes do not count). */
static size_t
text_width(const char *s)
{
    size_t n = 0;

    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            n++;
    return n;
}

int
cli_table_init(struct cli_table *t, const struct cli_col *cols, size_t ncols)
{
    memset(t, 0, sizeof(*t));
    t->cols = cols;
    t->ncols = ncols;
    t->width = gw_calloc(ncols, sizeof(*t->width));
    return t->width ? 0 : -1;
}

int
cli_table_add(struct cli_table *t, const char *const *cells)
{
    size_t i, base;

    if (t->nrows == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        char **v = gw_realloc(t->cells, cap * t->ncols * sizeof(*v));

        if (!v)
            return -1;
        t->cells = v;
        t->cap = cap;
    }
    base = t->nrows * t->ncols;
    for (i = 0; i < t->ncols; i++) {
        t->cells[base + i] = gw_strdup(cells[i] ? cells[i] : "-");
        if (!t->cells[base + i]) {
            while (i-- > 0)
                gw_free(t->cells[base + i]);
            return -1;
        }
    }
    t->nrows++;
    return 0;
}

static void
print_row(const struct cli_table *t, FILE *f, const char *const *cells)
{
    size_t i, w, pad;

    for (i = 0; i < t->ncols; i++) {
        bool last = i + 1 == t->ncols;

        w = text_width(cells[i]);
        pad = w < t->width[i] ? t->width[i] - w : 0;
        if (i > 0)
            fputs("  ", f);
        if (t->cols[i].right)
            fprintf(f, "%*s", (int)pad, "");
        fputs(cells[i], f);
        if (!t->cols[i].right && !last)
            fprintf(f, "%*s", (int)pad, "");
    }
    fputc('\n', f);
}

void
cli_table_flush(struct cli_table *t, FILE *f)
{
    size_t r, i;

    if (!t->printed) {
        const char **heads = gw_calloc(t->ncols, sizeof(*heads));

        for (i = 0; i < t->ncols; i++) {
            size_t w = t->cols[i].head ? text_width(t->cols[i].head) : 0;

            t->width[i] = w > t->cols[i].min_width ? w : t->cols[i].min_width;
            for (r = 0; r < t->nrows; r++) {
                w = text_width(t->cells[r * t->ncols + i]);
                if (w > t->width[i])
                    t->width[i] = w;
            }
        }
        if (heads && t->cols[0].head) {
            for (i = 0; i < t->ncols; i++)
                heads[i] = t->cols[i].head ? t->cols[i].head : "";
            print_row(t, f, heads);
        }
        gw_free(heads);
        t->printed = true;
    }
    for (r = 0; r < t->nrows; r++) {
        print_row(t, f, (const char *const *)&t->cells[r * t->ncols]);
        for (i = 0; i < t->ncols; i++)
            gw_free(t->cells[r * t->ncols + i]);
    }
    t->nrows = 0;
    fflush(f);
}

void
cli_table_fini(struct cli_table *t)
{
    size_t i;

    for (i = 0; i < t->nrows * t->ncols; i++)
        gw_free(t->cells[i]);
    gw_free(t->cells);
    gw_free(t->width);
    memset(t, 0, sizeof(*t));
}
