/* SPDX-License-Identifier: MIT
 * cli/table.h - aligned text tables for people. Columns are sized on the first flush
 * (the widest cell, the header, or the column's minimum) and then kept, so a table can
 * be printed in batches (traffic -f) without its columns moving.
 * Owns:    copies of the cells added and not yet flushed.
 * Threads: the main thread only.
 * See:     cli/table.c
 */
#ifndef GW_CLI_TABLE_H
#define GW_CLI_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct cli_col {
    const char *head; /* NULL in the first column: no header line */
    size_t min_width; /* display columns */
    bool right;       /* right-aligned (numbers) */
};

struct cli_table {
    const struct cli_col *cols; /* borrowed, <ncols> of them */
    size_t ncols;
    size_t *width; /* frozen after the first flush */
    bool printed;  /* header and widths are out */
    char **cells;  /* nrows * ncols copies */
    size_t nrows, cap;
};

/* Sets up <t> for <ncols> columns described by <cols> (borrowed; must outlive <t>).
 * -1 when out of memory. */
int cli_table_init(struct cli_table *t, const struct cli_col *cols, size_t ncols);
/* Appends one row; <cells> holds <ncols> strings (copied; NULL prints "-"). -1 when out of
 * memory. */
int cli_table_add(struct cli_table *t, const char *const *cells);
/* Prints the header (first time only) and the rows added since the last flush. */
void cli_table_flush(struct cli_table *t, FILE *f);
void cli_table_fini(struct cli_table *t);

#endif
