/*
 * csv.c - the CSV reader (al_csv.h).
 */
#include "al_csv.h"

#include <stdlib.h>
#include <string.h>

/* One field from *p (RFC 4180 quoting); advances past its separator and
 * sets *eol at the end of a record. */
static char *csv_field(const char **p, int *line, int *eol)
{
    const char *s = *p;
    size_t cap = 64, n = 0;
    char *out = al_malloc(cap);
    int quoted = *s == '"';
    if (quoted) s++;
    for (; *s; s++) {
        if (quoted && *s == '"' && s[1] == '"') s++;
        else if (quoted && *s == '"') { quoted = 0; continue; }
        else if (!quoted && (*s == ',' || *s == '\n' || *s == '\r')) break;
        if (*s == '\n') (*line)++;
        if (n + 2 > cap) out = realloc(out, cap *= 2);
        AL_ASSERT(out != NULL);
        out[n++] = *s;
    }
    out[n] = 0;
    *eol = *s != ',';
    if (*s == '\r') s++;
    if (*s == '\n' || *s == ',') s++;
    if (*eol) (*line)++;
    *p = s;
    return out;
}

/* Fields of one record into a fresh array; returns how many. */
static int csv_record(const char **p, int *line, char ***out)
{
    int n = 0, eol = 0;
    char **f = NULL;
    while (!eol) {
        f = realloc(f, (size_t)(n + 1) * sizeof *f);
        AL_ASSERT(f != NULL);
        f[n++] = csv_field(p, line, &eol);
    }
    *out = f;
    return n;
}

static void free_fields(char **f, int n)
{
    for (int i = 0; i < n; i++) free(f[i]);
    free(f);
}

int al_csv_read(const char *path, al_csv *t, al_err *e)
{
    char *text;
    size_t len;
    memset(t, 0, sizeof t[0]);
    if (al_read_file(path, &text, &len, e)) return -1;
    const char *p = text;
    int line = 1;
    if (!*p) {
        free(text);
        return al_errf(e, "%s: empty (no header line)", path);
    }
    t->n_cols = csv_record(&p, &line, &t->head);
    while (*p) {
        char **f;
        int start = line, n = csv_record(&p, &line, &f);
        if (n == 1 && !f[0][0]) { free_fields(f, n); continue; }   /* blank line */
        t->cells = realloc(t->cells, (size_t)(t->n_rows + 1) * sizeof *t->cells);
        t->line = realloc(t->line, (size_t)(t->n_rows + 1) * sizeof *t->line);
        AL_ASSERT(t->cells && t->line);
        if (n > t->n_cols) {
            free_fields(f, n);
            free(text);
            return al_errf(e, "%s:%d: error: %d fields, the header has %d", path, start, n,
                           t->n_cols);
        }
        f = realloc(f, (size_t)t->n_cols * sizeof *f);
        AL_ASSERT(f != NULL);
        for (int i = n; i < t->n_cols; i++) f[i] = calloc(1, 1);
        t->cells[t->n_rows] = f;
        t->line[t->n_rows++] = start;
    }
    free(text);
    return 0;
}

void al_csv_free(al_csv *t)
{
    free_fields(t->head, t->n_cols);
    for (int r = 0; r < t->n_rows; r++) free_fields(t->cells[r], t->n_cols);
    free(t->cells);
    free(t->line);
}

int al_csv_col(const al_csv *t, const char *name)
{
    for (int i = 0; i < t->n_cols; i++)
        if (strcmp(t->head[i], name) == 0) return i;
    return -1;
}

const char *al_csv_cell(const al_csv *t, int r, const char *name)
{
    int c = al_csv_col(t, name);
    return c < 0 ? "" : t->cells[r][c];
}

int al_csv_bool(const char *s, int *out)
{
    if (!s[0]) return -1;
    if (!strcmp(s, "true") || !strcmp(s, "1")) return *out = 1, 0;
    if (!strcmp(s, "false") || !strcmp(s, "0")) return *out = 0, 0;
    return -2;
}
