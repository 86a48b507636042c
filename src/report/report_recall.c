/*
 * report_recall.c - recall through quantized caches (report_recall.h):
 * each counted trial's <trial>/eval/recall_summary.csv (score_recall.c:
 * per task, window length and cache, the examples answered exactly
 * through it and through f32, and the discordant pairs) pooled over the
 * configuration's checkpoints. Pooling the discordant counts pairs every
 * example with itself through f32 on the same checkpoint: the exact
 * McNemar test of the pooled counts, Holm-adjusted over every non-f32 row
 * of the table. Beside each row the KJV loss through the same cache at
 * the same context from eval.csv: the configuration's own, or else that
 * of the same attention design trained on text in the same sweep
 * (same_design); eval.csv is scored at the checkpoint's residual, so only
 * the rows at the default residual, or of a dtype without one, show it.
 */
#include "report_recall.h"
#include "report_plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RC_NAME 32

/* One row of the table: (configuration, task, length, dtype, residual). */
typedef struct rc_row {
    int g, length, order;             /* order: first seen, to keep a file's cache order */
    char task[RC_NAME], dtype[RC_NAME], residual[RC_NAME];
    int checkpoints;
    long examples, exact, f32_exact, only_f32, only_this;
    double loss, f32_loss;            /* answer loss summed over examples */
    double p, p_holm, kjv;            /* kjv: NAN where there is none */
} rc_row;

typedef struct rc_set {
    int n, cap;
    rc_row *r;
} rc_set;

static int trial_csv(const al_report_analysis *A, const row *w, const char *name, al_csv *t)
{
    char path[DIR_LEN + 512];
    al_err e;
    snprintf(path, sizeof path, "%s/%s/%s", A->dir, w->trial, name);
    if (access(path, F_OK) != 0) return -1;
    if (al_csv_read(path, t, &e) == 0) return 0;
    al_csv_free(t);
    return -1;
}

/* ------------------------------------------------------------ gather */

static rc_row *find(rc_set *S, int g, const al_csv *t, int i)
{
    const char *task = al_csv_cell(t, i, "task"), *dt = al_csv_cell(t, i, "kv_dtype");
    const char *res = al_csv_cell(t, i, "residual");
    int L = atoi(al_csv_cell(t, i, "length"));
    for (int k = 0; k < S->n; k++) {
        rc_row *x = &S->r[k];
        if (x->g == g && x->length == L && !strcmp(x->task, task) && !strcmp(x->dtype, dt) &&
            !strcmp(x->residual, res))
            return x;
    }
    if (S->n == S->cap) {
        S->cap = S->cap ? 2 * S->cap : 32;
        S->r = realloc(S->r, (size_t)S->cap * sizeof *S->r);
        AL_ASSERT(S->r != NULL);
    }
    rc_row *x = &S->r[S->n];
    *x = (rc_row){.g = g, .length = L, .order = S->n, .p = NAN, .p_holm = NAN, .kjv = NAN};
    snprintf(x->task, RC_NAME, "%s", task);
    snprintf(x->dtype, RC_NAME, "%s", dt);
    snprintf(x->residual, RC_NAME, "%s", res);
    S->n++;
    return x;
}

static void add_file(rc_set *S, int g, const al_csv *t)
{
    for (int i = 0; i < t->n_rows; i++) {
        long n = atol(al_csv_cell(t, i, "examples"));
        if (n <= 0 || atoi(al_csv_cell(t, i, "length")) <= 0) continue;
        rc_row *x = find(S, g, t, i);
        x->checkpoints++;
        x->examples += n;
        x->exact += atol(al_csv_cell(t, i, "exact"));
        x->f32_exact += atol(al_csv_cell(t, i, "f32_exact"));
        x->only_f32 += atol(al_csv_cell(t, i, "only_f32"));
        x->only_this += atol(al_csv_cell(t, i, "only_this"));
        x->loss += strtod(al_csv_cell(t, i, "loss"), NULL) * n;
        x->f32_loss += strtod(al_csv_cell(t, i, "f32_loss"), NULL) * n;
    }
}

/* One attention design: the same variant, its settings and the same
 * parameter count (the shape), whatever data trained it, so that a
 * passkey configuration finds the KJV loss of its twin trained on text. */
static int same_design(const al_report_analysis *A, const row *a, const row *b)
{
    if (strcmp(a->variant, b->variant) != 0 || a->params != b->params) return 0;
    for (int k = 0; k < A->sm.n_set; k++)
        if (strcmp(al_report_setting(&A->sm, a, k), al_report_setting(&A->sm, b, k)) != 0)
            return 0;
    return 1;
}

/* The mean eval.csv loss at (dtype, context) of the configuration's
 * counted trials, or when it has none of its design's (same_design). */
static double kjv_loss(const al_report_analysis *A, const rc_row *x)
{
    double sum = 0;
    int n = 0;
    if (strcmp(x->residual, "default") != 0 && strcmp(x->residual, "none") != 0) return NAN;
    for (int pass = 0; pass < 2 && !n; pass++)
        for (int i = 0; i < A->sm.n; i++) {
            const row *w = &A->sm.rows[i];
            al_csv t;
            int own = al_report_group_of(A, w) == x->g;
            if (!al_report_row_counts(w) || !(pass ? same_design(A, w, A->g[x->g].first) : own) ||
                trial_csv(A, w, "eval.csv", &t) != 0)
                continue;
            for (int r = 0; r < t.n_rows; r++)
                if (!strcmp(al_csv_cell(&t, r, "kv_dtype"), x->dtype) &&
                    atoi(al_csv_cell(&t, r, "context")) == x->length) {
                    double v = strtod(al_csv_cell(&t, r, "loss"), NULL);
                    if (isfinite(v)) sum += v, n++;
                }
            al_csv_free(&t);
        }
    return n ? sum / n : NAN;
}

static int by_table(const void *a, const void *b)
{
    const rc_row *x = a, *y = b;
    int c = x->g != y->g ? x->g - y->g : strcmp(x->task, y->task);
    if (c) return c;
    return x->length != y->length ? x->length - y->length : x->order - y->order;
}

static void stats(const al_report_analysis *A, rc_set *S)
{
    double *p = al_calloc((size_t)S->n + 1, sizeof *p), *adj = al_calloc((size_t)S->n + 1,
                                                                          sizeof *adj);
    int m = 0;
    for (int k = 0; k < S->n; k++) {
        rc_row *x = &S->r[k];
        x->kjv = kjv_loss(A, x);
        if (strcmp(x->dtype, "f32") == 0) continue;
        x->p = al_mcnemar_p((int)x->only_f32, (int)x->only_this);
        p[m++] = x->p;
    }
    al_holm_adjust(m, p, adj);
    for (int k = 0, j = 0; k < S->n; k++)
        if (strcmp(S->r[k].dtype, "f32") != 0) S->r[k].p_holm = adj[j++];
    free(p), free(adj);
}

static void gather(const al_report_analysis *A, rc_set *S)
{
    memset(S, 0, sizeof *S);
    for (int i = 0; i < A->sm.n; i++) {
        const row *w = &A->sm.rows[i];
        int g = al_report_group_of(A, w);
        al_csv t;
        if (!al_report_row_counts(w) || g < 0 ||
            trial_csv(A, w, "eval/recall_summary.csv", &t) != 0)
            continue;
        add_file(S, g, &t);
        al_csv_free(&t);
    }
    if (S->n) qsort(S->r, (size_t)S->n, sizeof *S->r, by_table);
    stats(A, S);
}

int al_report_recall_any(const al_report_analysis *A)
{
    for (int i = 0; i < A->sm.n; i++) {
        const row *w = &A->sm.rows[i];
        char path[DIR_LEN + 512];
        snprintf(path, sizeof path, "%s/%s/eval/recall_summary.csv", A->dir, w->trial);
        if (al_report_row_counts(w) && access(path, F_OK) == 0) return 1;
    }
    return 0;
}

/* ------------------------------------------------------------ writers */

static double rate(long k, long n) { return n ? (double)k / n : NAN; }

static void put_num(FILE *f, double v)
{
    if (isfinite(v)) fprintf(f, "%.9g", v);
}

int al_report_recall_write(const al_report_analysis *A, al_err *e)
{
    rc_set S;
    gather(A, &S);
    int rc = 0;
    if (S.n) {
        char path[DIR_LEN + 64], tmp[DIR_LEN + 96];
        FILE *f = al_report_open(A, "eval_recall.csv", path, tmp, e);
        rc = f ? 0 : -1;
        if (f) {
            fputs("config,variant,task,length,kv_dtype,residual,checkpoints,examples,exact_rate,"
                  "f32_exact_rate,delta,only_f32,only_this,p_mcnemar,p_holm,kjv_loss,loss,"
                  "f32_loss\n", f);
            for (int k = 0; k < S.n; k++) {
                const rc_row *x = &S.r[k];
                double a = rate(x->exact, x->examples), b = rate(x->f32_exact, x->examples);
                fprintf(f, "%s,%s,%s,%d,%s,%s,%d,%ld,%.9g,%.9g,%.9g,%ld,%ld,",
                        A->g[x->g].first->group, A->g[x->g].first->variant, x->task, x->length,
                        x->dtype, x->residual, x->checkpoints, x->examples, a, b, a - b,
                        x->only_f32, x->only_this);
                put_num(f, x->p);
                fputc(',', f);
                put_num(f, x->p_holm);
                fputc(',', f);
                put_num(f, x->kjv);
                fprintf(f, ",%.9g,%.9g\n", x->loss / x->examples, x->f32_loss / x->examples);
            }
            rc = al_commit_atomic(f, tmp, path, e);
        }
    }
    free(S.r);
    return rc;
}

static void md_row(FILE *f, const al_report_analysis *A, const rc_row *x)
{
    double a = rate(x->exact, x->examples), b = rate(x->f32_exact, x->examples);
    fprintf(f, "| %s | %s | %d | %s | %s | %d | %.3f |", A->g[x->g].first->group, x->task,
            x->length, x->dtype, x->residual, x->checkpoints, a);
    if (strcmp(x->dtype, "f32") == 0) fputs(" - | - | - |", f);
    else
        fprintf(f, " %+.3f | %ld / %ld | %.3g%s |", a - b, x->only_f32, x->only_this, x->p_holm,
                x->p_holm < 0.05 ? " **resolved**" : "");
    double l = x->loss / x->examples, l0 = x->f32_loss / x->examples;
    if (strcmp(x->dtype, "f32") == 0) fprintf(f, " %.4f |", l);
    else fprintf(f, " %.4f (%+.4f) |", l, l - l0);
    if (isfinite(x->kjv)) fprintf(f, " %.5f |\n", x->kjv);
    else fputs(" - |\n", f);
}

void al_report_recall_md(FILE *f, const al_report_analysis *A)
{
    rc_set S;
    gather(A, &S);
    int m = 0;
    for (int k = 0; k < S.n; k++) m += strcmp(S.r[k].dtype, "f32") != 0;
    if (S.n) {
        fprintf(f, "\n### Recall through quantized caches\n\n"
                "Each ok passkey and MQAR trial's checkpoint answered its test examples "
                "through an f32 cache and through each cache of `eval.kv_dtypes`, int8 and "
                "int4 at each f32 residual of `eval.kv_quant_residuals` (*residual*: the "
                "tokens asked for, *default* the checkpoint's `model.kv_quant_residual`, "
                "*none* for a cache that is not quantized): the prompt prefilled, the answers "
                "teacher-forced through the cache (`<trial>/eval/recall.csv`, "
                "`recall_summary.csv`). *Exact match*: the share of examples with every "
                "answer right (all five passkey digits), pooled over the checkpoints; "
                "*Δ vs f32* the same examples through f32 subtracted; *only f32 / only this*: "
                "the examples only f32 answered exactly and those only this cache did, over "
                "which the exact McNemar test runs, paired by checkpoint and example; its p "
                "Holm-adjusted over the %d comparisons of this table (**resolved** below "
                "0.05). *Answer loss*: the mean cross-entropy on the answers (nats), and in "
                "brackets minus f32's on the same examples: it moves before exact match does. "
                "*KJV loss*: the loss through that cache at that context from the "
                "table above (text trials, at the default residual): the configuration's "
                "own, or that of the same attention design (variant, settings and "
                "parameters) trained on text in this sweep. The numbers: "
                "`eval_recall.csv`.\n\n"
                "| configuration | task | length | KV dtype | residual | checkpoints | "
                "exact match | Δ vs f32 | only f32 / only this | p (Holm) | answer loss | KJV loss |\n"
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n", m);
        for (int k = 0; k < S.n; k++) md_row(f, A, &S.r[k]);
    }
    free(S.r);
}
