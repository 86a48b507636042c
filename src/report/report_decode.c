/*
 * report_decode.c - a sweep's measured decode speed (eval.decode): each
 * counted trial's <trial>/eval/decode.csv gathered per configuration,
 * context and batch into decode_configs.csv and a section of report.md.
 * Speed is a figure of the machine, so the section names the CPU, the
 * OpenBLAS core and the threads it was timed on, and says when the trials
 * of the table were timed on more than one.
 */
#include "report_decode.h"
#include "report_plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "al_stats.h"

#define DC_MAX 4096   /* (configuration, context, batch) cells */

typedef struct dc_cell {
    int g, context, batch, n;
    double *v;        /* tokens/s, one per trial (seed) */
    al_stat s;
} dc_cell;

typedef struct dc {
    int n;
    dc_cell c[DC_MAX];
    char where[3][256];   /* the first trial's cpu, core, threads */
    int mixed;            /* some trial timed elsewhere */
} dc;

static dc_cell *cell_of(dc *D, int g, int context, int batch, int cap)
{
    for (int i = 0; i < D->n; i++)
        if (D->c[i].g == g && D->c[i].context == context && D->c[i].batch == batch)
            return &D->c[i];
    if (D->n == DC_MAX) return NULL;
    dc_cell *c = &D->c[D->n++];
    *c = (dc_cell){g, context, batch, 0, al_malloc((size_t)cap * sizeof(double)), {0}};
    return c;
}

static void note_where(dc *D, const al_csv *t, int r)
{
    const char *w[3] = {al_csv_cell(t, r, "cpu_model"), al_csv_cell(t, r, "blas_core"),
                        al_csv_cell(t, r, "threads")};
    for (int k = 0; k < 3; k++) {
        if (!D->where[k][0]) snprintf(D->where[k], sizeof D->where[k], "%s", w[k]);
        else if (strcmp(D->where[k], w[k]) != 0) D->mixed = 1;
    }
}

static int cmp_cell(const void *a, const void *b)
{
    const dc_cell *x = a, *y = b;
    if (x->g != y->g) return x->g - y->g;
    if (x->context != y->context) return x->context - y->context;
    return x->batch - y->batch;
}

/* Every counted trial's rows, one value per trial in each cell. */
static void collect(const al_report_analysis *A, dc *D)
{
    memset(D, 0, sizeof *D);
    for (int i = 0; i < A->sm.n; i++) {
        const row *w = &A->sm.rows[i];
        char path[DIR_LEN + 512];
        al_csv t;
        al_err e;
        int g = al_report_group_of(A, w);
        if (!al_report_row_ok(w) || !w->selected || g < 0) continue;
        snprintf(path, sizeof path, "%s/%s/eval/decode.csv", A->dir, w->trial);
        if (al_csv_read(path, &t, &e) != 0) continue;
        for (int r = 0; r < t.n_rows; r++) {
            int C = atoi(al_csv_cell(&t, r, "context")), B = atoi(al_csv_cell(&t, r, "batch"));
            double v = strtod(al_csv_cell(&t, r, "tokens_per_s"), NULL);
            dc_cell *c = C > 0 && B > 0 && isfinite(v) ? cell_of(D, g, C, B, A->sm.n) : NULL;
            if (!c) continue;
            c->v[c->n++] = v;
            note_where(D, &t, r);
        }
        al_csv_free(&t);
    }
    for (int i = 0; i < D->n; i++) al_stat_of(D->c[i].v, D->c[i].n, &D->c[i].s);
    qsort(D->c, (size_t)D->n, sizeof *D->c, cmp_cell);
}

static void dc_free(dc *D)
{
    for (int i = 0; i < D->n; i++) free(D->c[i].v);
}

int al_report_decode_write(const al_report_analysis *A, al_err *e)
{
    dc *D = al_malloc(sizeof *D);
    collect(A, D);
    int rc = 0;
    if (D->n) {
        char path[DIR_LEN + 64], tmp[DIR_LEN + 96];
        FILE *f = al_report_open(A, "decode_configs.csv", path, tmp, e);
        rc = f ? 0 : -1;
        if (f) {
            fputs("config,variant,context,batch,n,tokens_per_s_mean,tokens_per_s_ci95\n", f);
            for (int i = 0; i < D->n; i++) {
                const dc_cell *c = &D->c[i];
                fprintf(f, "%s,%s,%d,%d,%d,%.1f,", A->g[c->g].first->group,
                        A->g[c->g].first->variant, c->context, c->batch, c->s.n, c->s.mean);
                if (c->s.n > 1) fprintf(f, "%.1f", c->s.ci95);
                fputc('\n', f);
            }
            rc = al_commit_atomic(f, tmp, path, e);
        }
    }
    dc_free(D);
    free(D);
    return rc;
}

void al_report_decode_md(FILE *f, const al_report_analysis *A)
{
    dc *D = al_malloc(sizeof *D);
    collect(A, D);
    if (D->n) {
        fprintf(f, "\n## Measured decode speed\n\n"
                "Each ok trial's final checkpoint decoded after training (the experiment's "
                "`eval.decode`): every sequence's cache filled to the context, then the timed "
                "steps, each one token for every sequence of the batch; tokens/s counts them "
                "all, and a trial's figure is the median of its timed runs (as `attnlab "
                "bench-decode --repeats` times). Mean ± 95 %% t-interval over seeds. Timed on "
                "%s, OpenBLAS core %s, %s thread(s)%s. The numbers: `decode_configs.csv`.\n\n"
                "| configuration | context | batch | decode tokens/s | seeds |\n"
                "|---|---:|---:|---:|---:|\n",
                D->where[0], D->where[1], D->where[2],
                D->mixed ? " (some trials were timed on another CPU, core or thread count: "
                           "compare with care)" : "");
        for (int i = 0; i < D->n; i++) {
            const dc_cell *c = &D->c[i];
            fprintf(f, "| %s | %d | %d | %.0f", A->g[c->g].first->group, c->context,
                    c->batch, c->s.mean);
            if (c->s.n > 1) fprintf(f, " ± %.0f", c->s.ci95);
            fprintf(f, " | %d |\n", c->s.n);
        }
    }
    dc_free(D);
    free(D);
}
