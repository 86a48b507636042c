/*
 * al_csv.h - reading the CSV files attnlab writes (summary.csv,
 * metrics.csv) and ones a user wrote by hand: RFC 4180 quoting, a header
 * line, rows shorter than the header padded with "" and longer ones an
 * error naming the file and line.
 *
 * Memory: al_csv_read fills t with malloc'ed strings; al_csv_free releases
 * them. Cells stay valid until then.
 */
#ifndef AL_CSV_H
#define AL_CSV_H

#include "al_util.h"

typedef struct al_csv {
    int n_cols, n_rows;
    char **head;       /* n_cols */
    char ***cells;     /* n_rows x n_cols ("" when a row is short) */
    int *line;         /* where each row starts, 1-based */
} al_csv;

/* Read path. On error e names the file (and line) and t holds what was read
 * so far: al_csv_free releases it either way. */
int al_csv_read(const char *path, al_csv *t, al_err *e);
void al_csv_free(al_csv *t);
/* Index of the column named name, or -1. */
int al_csv_col(const al_csv *t, const char *name);
/* Cell of row r in the column named name; "" when there is no such column. */
const char *al_csv_cell(const al_csv *t, int r, const char *name);
/* A boolean cell. attnlab writes true/false in every CSV (docs/first-run.md);
 * older files wrote some as 1/0, read alike. 1 or 0 into *out, -1 when
 * empty, -2 when s is none of these. */
int al_csv_bool(const char *s, int *out);
/* The text attnlab writes for a boolean: "true" or "false". */
static inline const char *al_csv_bool_text(int v)
{
    return v ? "true" : "false";
}

#endif
