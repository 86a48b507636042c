/*
 * report_eval.c - what a sweep's `eval` adds to the report: every
 * configuration's checkpoints scored after training through the KV cache
 * at each dtype and context (<trial>/eval.csv), and their loss by position
 * (<trial>/eval/by_position_C/by_position.csv), both written by the runner
 * with `attnlab score`'s code (cmd/sweep_eval.c).
 *
 * One point per (configuration, dtype) at each context: the mean loss over
 * the configuration's selected ok trials (one per seed) against the whole
 * cache of one window of that context, its precision, scales and f32
 * residual window included. Those points make one Pareto picture per
 * context (eval_pareto_C.png): a cheaper precision of a larger cache is
 * set beside a smaller cache at f32. The loss-by-position curves, one per
 * configuration (mean over the same trials, bucket by bucket), make
 * eval_by_position_C.png. The numbers are in eval_configs.csv.
 *
 * Passkey trials have <trial>/eval/passkey.csv instead: a table of each
 * configuration's exact-match and digit accuracy by window length, and one
 * of the answer's loss, each the mean over depths and seeds. They have no
 * loss by position: they learnt the key's digits, not their filler.
 */
#include "report_eval.h"
#include "report_plot.h"
#include "report_recall.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "al_kvcache.h"

#define EV_MAX_CONTEXTS 16
#define EV_MAX_BUCKETS 4096

typedef struct ev_point {
    const group *g;
    int dtype, context;
    double bytes;
    al_stat loss;
    int front;              /* no other point at its context is as small and better */
} ev_point;

typedef struct ev_curve {
    const group *g;
    int context, n;         /* buckets */
    int seeds;              /* trials averaged */
    double *lo, *hi, *loss; /* (n) the bucket's positions [lo, hi), the mean loss */
} ev_curve;

typedef struct ev {
    int n_contexts, contexts[EV_MAX_CONTEXTS];   /* ascending */
    int n_points;
    ev_point *p;
    int n_curves;
    ev_curve *c;
} ev;

/* One row of a trial's eval.csv. */
typedef struct ev_rec {
    int g, dtype, context;
    double loss, bytes;
} ev_rec;

static void add_context(ev *V, int c)
{
    int k = 0;
    while (k < V->n_contexts && V->contexts[k] < c) k++;
    if ((k < V->n_contexts && V->contexts[k] == c) || V->n_contexts == EV_MAX_CONTEXTS) return;
    memmove(V->contexts + k + 1, V->contexts + k, (size_t)(V->n_contexts - k) * sizeof(int));
    V->contexts[k] = c, V->n_contexts++;
}

/* Every counted trial's eval.csv rows, appended to *recs (grown). A trial
 * without one (not evaluated yet) adds nothing. */
static int read_recs(const al_report_analysis *A, ev *V, ev_rec **recs)
{
    int n = 0, cap = 0;
    for (int i = 0; i < A->sm.n; i++) {
        const row *w = &A->sm.rows[i];
        char path[DIR_LEN + 512];
        al_csv t;
        al_err e;
        int g = al_report_group_of(A, w);
        snprintf(path, sizeof path, "%s/%s/eval.csv", A->dir, w->trial);
        if (!al_report_row_counts(w) || g < 0 || al_csv_read(path, &t, &e) != 0) {
            if (al_report_row_counts(w) && g >= 0) al_csv_free(&t);
            continue;
        }
        for (int r = 0; r < t.n_rows; r++) {
            ev_rec x = {g, al_kv_dtype_parse(al_csv_cell(&t, r, "kv_dtype")),
                        atoi(al_csv_cell(&t, r, "context")),
                        strtod(al_csv_cell(&t, r, "loss"), NULL),
                        strtod(al_csv_cell(&t, r, "kv_cache_bytes"), NULL)};
            if (x.dtype < 0 || x.context <= 0 || !isfinite(x.loss)) continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                *recs = realloc(*recs, (size_t)cap * sizeof **recs);
                AL_ASSERT(*recs != NULL);
            }
            (*recs)[n++] = x;
            add_context(V, x.context);
        }
        al_csv_free(&t);
    }
    return n;
}

/* The point of (g, dtype, context), when some trial has that row. */
static int make_point(const al_report_analysis *A, const ev_rec *x, int n, int g, int dtype,
                      int context,
                      ev_point *p)
{
    double *v = al_malloc((size_t)(n + 1) * sizeof *v);
    int m = 0;
    *p = (ev_point){.g = &A->g[g], .dtype = dtype, .context = context, .bytes = NAN};
    for (int i = 0; i < n; i++)
        if (x[i].g == g && x[i].dtype == dtype && x[i].context == context)
            v[m++] = x[i].loss, p->bytes = x[i].bytes;
    al_stat_of(v, m, &p->loss);
    free(v);
    return m > 0;
}

static void mark_front(ev *V)
{
    for (int i = 0; i < V->n_points; i++) {
        ev_point *a = &V->p[i];
        a->front = 1;
        for (int j = 0; j < V->n_points && a->front; j++) {
            const ev_point *b = &V->p[j];
            if (j == i || b->context != a->context) continue;
            if ((b->bytes <= a->bytes && b->loss.mean < a->loss.mean) ||
                (b->bytes < a->bytes && b->loss.mean <= a->loss.mean))
                a->front = 0;
        }
    }
}

static void collect_points(const al_report_analysis *A, ev *V)
{
    ev_rec *x = NULL;
    int n = read_recs(A, V, &x);
    V->p = al_calloc((size_t)A->n_groups * AL_KV_NALL * EV_MAX_CONTEXTS + 1, sizeof *V->p);
    for (int c = 0; c < V->n_contexts; c++)
        for (int g = 0; g < A->n_groups; g++)
            for (int d = 0; d < AL_KV_NALL; d++)
                V->n_points += make_point(A, x, n, g, d, V->contexts[c], &V->p[V->n_points]);
    free(x);
    mark_front(V);
}

/* A passkey trial (it has eval/passkey.csv) learnt the key's digits alone:
 * by_position files that an earlier attnlab made over its filler are of
 * bytes it never learnt to predict, and are not shown. */
static int is_passkey_trial(const al_report_analysis *A, const row *w)
{
    char path[DIR_LEN + 512];
    snprintf(path, sizeof path, "%s/%s/eval/passkey.csv", A->dir, w->trial);
    return access(path, F_OK) == 0;
}

/* g's loss by position at context C: its counted trials' by_position.csv,
 * bucket by bucket (trials cut otherwise are left out). */
static void make_curve(const al_report_analysis *A, int g, int C, ev_curve *cv)
{
    int m = 0;
    *cv = (ev_curve){.g = &A->g[g], .context = C};
    for (int i = 0; i < A->sm.n; i++) {
        const row *w = &A->sm.rows[i];
        char path[DIR_LEN + 512];
        al_csv t;
        al_err e;
        if (!al_report_row_counts(w) || strcmp(w->group, A->g[g].first->group) != 0 ||
            is_passkey_trial(A, w))
            continue;
        snprintf(path, sizeof path, "%s/%s/eval/by_position_%d/by_position.csv", A->dir,
                 w->trial, C);
        if (al_csv_read(path, &t, &e) != 0 || t.n_rows < 1 || t.n_rows > EV_MAX_BUCKETS ||
            (m && t.n_rows != cv->n)) {
            al_csv_free(&t);
            continue;
        }
        if (!m) {
            cv->n = t.n_rows;
            cv->lo = al_calloc((size_t)cv->n, sizeof *cv->lo);
            cv->hi = al_calloc((size_t)cv->n, sizeof *cv->hi);
            cv->loss = al_calloc((size_t)cv->n, sizeof *cv->loss);
        }
        for (int b = 0; b < cv->n; b++) {
            cv->lo[b] = atof(al_csv_cell(&t, b, "bucket_start"));
            cv->hi[b] = atof(al_csv_cell(&t, b, "bucket_end"));
            cv->loss[b] += strtod(al_csv_cell(&t, b, "loss"), NULL);
        }
        m++;
        al_csv_free(&t);
    }
    for (int b = 0; b < cv->n; b++) cv->loss[b] /= m;
    cv->seeds = m;
}

/* The contexts of every counted trial's eval/by_position_C directories
 * (a context scored by position alone has no eval.csv row to name it). */
static void scan_position_contexts(const al_report_analysis *A, ev *V)
{
    for (int i = 0; i < A->sm.n; i++) {
        const row *w = &A->sm.rows[i];
        char path[DIR_LEN + 512];
        if (!al_report_row_counts(w) || is_passkey_trial(A, w)) continue;
        snprintf(path, sizeof path, "%s/%s/eval", A->dir, w->trial);
        DIR *d = opendir(path);
        if (!d) continue;
        for (struct dirent *x; (x = readdir(d));) {
            int c, end = 0;
            if (sscanf(x->d_name, "by_position_%d%n", &c, &end) == 1 && !x->d_name[end] && c > 0)
                add_context(V, c);
        }
        closedir(d);
    }
}

static void collect(const al_report_analysis *A, ev *V)
{
    memset(V, 0, sizeof *V);
    collect_points(A, V);
    scan_position_contexts(A, V);
    V->c = al_calloc((size_t)A->n_groups * V->n_contexts + 1, sizeof *V->c);
    for (int c = 0; c < V->n_contexts; c++)
        for (int g = 0; g < A->n_groups; g++) {
            make_curve(A, g, V->contexts[c], &V->c[V->n_curves]);
            V->n_curves += V->c[V->n_curves].n > 0;
        }
}

static void ev_free(ev *V)
{
    for (int i = 0; i < V->n_curves; i++) free(V->c[i].lo), free(V->c[i].hi), free(V->c[i].loss);
    free(V->c);
    free(V->p);
}

static int any_point(const ev *V, int C)
{
    for (int i = 0; i < V->n_points; i++)
        if (V->p[i].context == C) return 1;
    return 0;
}

static int any_curve(const ev *V, int C)
{
    for (int i = 0; i < V->n_curves; i++)
        if (V->c[i].context == C) return 1;
    return 0;
}

/* ------------------------------------------------------------ files */

static double ci(const al_stat *s) { return s->n > 1 ? s->ci95 : 0.0; }

static int write_csv(const al_report_analysis *A, const ev *V, al_err *e)
{
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96];
    FILE *f = al_report_open(A, "eval_configs.csv", path, tmp, e);
    if (!f) return -1;
    fputs("config,variant,kv_dtype,context,kv_cache_bytes,n,loss_mean,loss_ci95,front\n", f);
    for (int i = 0; i < V->n_points; i++) {
        const ev_point *p = &V->p[i];
        fprintf(f, "%s,%s,%s,%d,%.0f,%d,%.9g,", p->g->first->group, p->g->first->variant,
                al_kv_dtype_name(p->dtype), p->context, p->bytes, p->loss.n, p->loss.mean);
        if (p->loss.n > 1) fprintf(f, "%.9g", p->loss.ci95);
        fprintf(f, ",%s\n", p->front ? "true" : "false");
    }
    return al_commit_atomic(f, tmp, path, e);
}

/* eval_pareto_C.dat: index 0 every point (bytes loss ci95 "label" dtype),
 * index 1 the front by bytes, for its staircase. */
static int write_pareto(const al_report_analysis *A, const ev *V, int C, al_err *e)
{
    char name[64], path[DIR_LEN + 64], tmp[DIR_LEN + 96];
    snprintf(name, sizeof name, "eval_pareto_%d.dat", C);
    FILE *f = al_report_open(A, name, path, tmp, e);
    if (!f) return -1;
    fprintf(f, "# kv_cache_bytes loss ci95 \"configuration dtype\" dtype_index (context %d)\n",
            C);
    for (int i = 0; i < V->n_points; i++)
        if (V->p[i].context == C)
            fprintf(f, "%.0f %.9g %.9g \"%s %s\" %d\n", V->p[i].bytes, V->p[i].loss.mean,
                    ci(&V->p[i].loss), V->p[i].g->first->group, al_kv_dtype_name(V->p[i].dtype),
                    V->p[i].dtype + 1);
    fputs("\n\n", f);
    double last = -1;
    for (int k = 0; k < V->n_points; k++) {   /* front points in increasing bytes */
        const ev_point *best = NULL;
        for (int i = 0; i < V->n_points; i++) {
            const ev_point *p = &V->p[i];
            if (p->context == C && p->front && p->bytes > last && (!best || p->bytes < best->bytes))
                best = p;
        }
        if (!best) break;
        fprintf(f, "%.0f %.9g\n", best->bytes, best->loss.mean);
        last = best->bytes;
    }
    return al_commit_atomic(f, tmp, path, e);
}

static int write_pareto_gp(const al_report_analysis *A, int C, al_err *e)
{
    char base[64], name[72], path[DIR_LEN + 64], tmp[DIR_LEN + 96];
    snprintf(base, sizeof base, "eval_pareto_%d", C);
    snprintf(name, sizeof name, "%s.gp", base);
    FILE *f = al_report_open(A, name, path, tmp, e);
    if (!f) return -1;
    al_report_gp_header(f, base);
    al_report_gp_terminal(f, "1000,700");
    fprintf(f, "  set title \"%s: loss through the KV cache at context %d (mean over seeds)\"\n"
            "  set xlabel \"KV-cache bytes of one %d-token window (precision, scales and "
            "residual included; log scale)\"\n"
            "  set ylabel \"loss (nats/token)\"\n  set logscale x 2\n  set grid\n"
            "  set key top right\n  set offsets graph 0.08, graph 0.25, graph 0.08, graph 0.08\n"
            "  plot \"%s.dat\" index 0 using 1:2:3:5 with yerrorbars pt 7 ps 1.2 lc variable "
            "notitle, \\\n"
            "       \"\" index 0 using 1:2:4 with labels left offset char 1,0.6 font \",9\" "
            "notitle, \\\n"
            "       \"\" index 1 using 1:2 with steps lw 2 dt 2 lc rgb \"#c03030\" "
            "title \"Pareto front\"\n  unset output\n}\n", A->mk.name, C, C, base);
    return al_commit_atomic(f, tmp, path, e);
}

/* eval_by_position_C.dat: one index per configuration (middle loss). */
static int write_positions(const al_report_analysis *A, const ev *V, int C, al_err *e)
{
    char name[64], path[DIR_LEN + 64], tmp[DIR_LEN + 96];
    snprintf(name, sizeof name, "eval_by_position_%d.dat", C);
    FILE *f = al_report_open(A, name, path, tmp, e);
    if (!f) return -1;
    int k = 0;
    for (int i = 0; i < V->n_curves; i++) {
        const ev_curve *cv = &V->c[i];
        if (cv->context != C) continue;
        fprintf(f, "%s# \"%s\"\n", k++ ? "\n\n" : "", cv->g->first->group);
        for (int b = 0; b < cv->n; b++)
            fprintf(f, "%.1f %.9g\n", (cv->lo[b] + cv->hi[b] - 1) / 2.0, cv->loss[b]);
    }
    return al_commit_atomic(f, tmp, path, e);
}

static int write_positions_gp(const al_report_analysis *A, const ev *V, int C, al_err *e)
{
    char base[64], name[72], path[DIR_LEN + 64], tmp[DIR_LEN + 96];
    snprintf(base, sizeof base, "eval_by_position_%d", C);
    snprintf(name, sizeof name, "%s.gp", base);
    FILE *f = al_report_open(A, name, path, tmp, e);
    if (!f) return -1;
    al_report_gp_header(f, base);
    al_report_gp_terminal(f, "1000,600");
    fprintf(f, "  set title \"%s: loss by position in a %d-token window (mean over seeds)\"\n"
            "  set xlabel \"position in the window\"\n  set ylabel \"loss (nats/token)\"\n"
            "  set grid\n  set key outside right\n  plot", A->mk.name, C);
    int k = 0;
    for (int i = 0; i < V->n_curves; i++)
        if (V->c[i].context == C)
            fprintf(f, "%s \"%s.dat\" index %d using 1:2 with linespoints pt 7 ps 0.6 "
                    "title \"%s\"", k ? ", \\\n      " : "", base, k, V->c[i].g->first->group),
                k++;
    fputs("\n  unset output\n}\n", f);
    return al_commit_atomic(f, tmp, path, e);
}

static void draw(const al_report_analysis *A, int plots, const char *kind, int C)
{
    char base[64];
    snprintf(base, sizeof base, "eval_%s_%d", kind, C);
    if (plots == AL_PLOTS_DRAWN && al_report_gnuplot(A, base) != AL_PLOTS_DRAWN)
        fprintf(stderr, "attnlab: report: gnuplot could not draw %s.png (see gnuplot.log)\n",
                base);
}

int al_report_eval_plot(const al_report_analysis *A, int plots, al_err *e)
{
    ev V;
    collect(A, &V);
    int rc = V.n_points ? write_csv(A, &V, e) : 0;
    if (!rc) rc = al_report_recall_write(A, e);
    for (int c = 0; c < V.n_contexts && !rc; c++) {
        int C = V.contexts[c];
        if (any_point(&V, C)) {   /* passkey trials have curves only */
            if (write_pareto(A, &V, C, e) || write_pareto_gp(A, C, e)) rc = -1;
            else draw(A, plots, "pareto", C);
        }
        if (!rc && any_curve(&V, C)) {
            if (write_positions(A, &V, C, e) || write_positions_gp(A, &V, C, e)) rc = -1;
            else draw(A, plots, "by_position", C);
        }
    }
    ev_free(&V);
    return rc;
}

/* ------------------------------------------------------------ markdown */

static int by_bytes(const void *a, const void *b)
{
    const ev_point *x = *(const ev_point *const *)a, *y = *(const ev_point *const *)b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? -1 : 1;
    if (x->loss.mean != y->loss.mean) return x->loss.mean < y->loss.mean ? -1 : 1;
    return x->dtype - y->dtype;
}

static void md_context(FILE *f, int plots, const ev *V, int C)
{
    const ev_point **s = al_malloc((size_t)(V->n_points + 1) * sizeof *s);
    int n = 0;
    for (int i = 0; i < V->n_points; i++)
        if (V->p[i].context == C) s[n++] = &V->p[i];
    qsort(s, (size_t)n, sizeof *s, by_bytes);
    fprintf(f, "\n### Context %d\n\n| configuration | KV dtype | cache bytes | loss | seeds | "
            "front |\n| --- | --- | --- | --- | --- | --- |\n", C);
    for (int i = 0; i < n; i++) {
        fprintf(f, "| %s | %s | %.0f | %.5f", s[i]->g->first->group, al_kv_dtype_name(s[i]->dtype),
                s[i]->bytes, s[i]->loss.mean);
        if (s[i]->loss.n > 1) fprintf(f, " ± %.5f", s[i]->loss.ci95);
        fprintf(f, " | %d | %s |\n", s[i]->loss.n, s[i]->front ? "yes" : "");
    }
    free(s);
    if (plots == AL_PLOTS_DRAWN)
        fprintf(f, "\n![loss against cache bytes at context %d](eval_pareto_%d.png)\n", C, C);
}

/* Context C's loss-by-position curves as a table: a column per bucket
 * (the first curve's buckets; every curve of a sweep has the same). */
static void md_positions(FILE *f, int plots, const ev *V, int C)
{
    const ev_curve *first = NULL;
    for (int i = 0; i < V->n_curves && !first; i++)
        if (V->c[i].context == C) first = &V->c[i];
    if (!first) return;
    fprintf(f, "\n### Context %d\n\n| configuration | seeds |", C);
    for (int b = 0; b < first->n; b++) fprintf(f, " %.0f-%.0f |", first->lo[b], first->hi[b] - 1);
    fputs("\n| --- | --- |", f);
    for (int b = 0; b < first->n; b++) fputs(" --- |", f);
    fputc('\n', f);
    for (int i = 0; i < V->n_curves; i++) {
        const ev_curve *cv = &V->c[i];
        if (cv->context != C) continue;
        fprintf(f, "| %s | %d |", cv->g->first->group, cv->seeds);
        for (int b = 0; b < first->n; b++)
            if (b < cv->n) fprintf(f, " %.4f |", cv->loss[b]);
            else fputs(" - |", f);
        fputc('\n', f);
    }
    if (plots == AL_PLOTS_DRAWN)
        fprintf(f, "\n![loss by position at context %d](eval_by_position_%d.png)\n", C, C);
}

/* ------------------------------------------------------------ passkey */

#define PK_MAX_LENGTHS 16

typedef struct pk_sum {
    int n_lengths, lengths[PK_MAX_LENGTHS];     /* ascending, from every trial's file */
    double *exact, *digits, *loss;              /* (rows, lengths): each trial's mean over
                                                   depths; NAN where it has none */
} pk_sum;

static int pk_length_index(const pk_sum *P, int L)
{
    int k = 0;
    while (k < P->n_lengths && P->lengths[k] < L) k++;
    if (k < P->n_lengths && P->lengths[k] == L) return k;
    return -1;
}

/* Pass 0 gathers the lengths; pass 1 averages trial i's cells over depths. */
static void pk_add_file(pk_sum *P, int i, const al_csv *t, int pass)
{
    double ex[PK_MAX_LENGTHS] = {0}, dg[PK_MAX_LENGTHS] = {0}, ls[PK_MAX_LENGTHS] = {0};
    int n[PK_MAX_LENGTHS] = {0};
    for (int r = 0; r < t->n_rows; r++) {
        int L = atoi(al_csv_cell(t, r, "length"));
        if (pass == 0 && L > 0 && pk_length_index(P, L) < 0 && P->n_lengths < PK_MAX_LENGTHS) {
            int k = 0;
            while (k < P->n_lengths && P->lengths[k] < L) k++;
            memmove(P->lengths + k + 1, P->lengths + k, (size_t)(P->n_lengths - k) * sizeof(int));
            P->lengths[k] = L, P->n_lengths++;
        }
        int k = pass ? pk_length_index(P, L) : -1;
        if (k < 0) continue;
        ex[k] += strtod(al_csv_cell(t, r, "exact"), NULL);
        dg[k] += strtod(al_csv_cell(t, r, "digit_accuracy"), NULL);
        ls[k] += strtod(al_csv_cell(t, r, "loss"), NULL);
        n[k]++;
    }
    for (int k = 0; pass && k < P->n_lengths; k++)
        if (n[k]) {
            P->exact[i * PK_MAX_LENGTHS + k] = ex[k] / n[k];
            P->digits[i * PK_MAX_LENGTHS + k] = dg[k] / n[k];
            P->loss[i * PK_MAX_LENGTHS + k] = ls[k] / n[k];
        }
}

/* Two passes over the counted trials' passkey.csv: the lengths, then each
 * trial's means. */
static void pk_collect(const al_report_analysis *A, pk_sum *P)
{
    memset(P, 0, sizeof *P);
    size_t cells = (size_t)A->sm.n * PK_MAX_LENGTHS + 1;
    P->exact = al_malloc(cells * sizeof *P->exact);
    P->digits = al_malloc(cells * sizeof *P->digits);
    P->loss = al_malloc(cells * sizeof *P->loss);
    for (size_t c = 0; c < cells; c++) P->exact[c] = P->digits[c] = P->loss[c] = NAN;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < A->sm.n; i++) {
            const row *w = &A->sm.rows[i];
            char path[DIR_LEN + 512];
            al_csv t;
            al_err e;
            if (!al_report_row_counts(w) || al_report_group_of(A, w) < 0) continue;
            snprintf(path, sizeof path, "%s/%s/eval/passkey.csv", A->dir, w->trial);
            if (access(path, F_OK) != 0) continue;
            if (al_csv_read(path, &t, &e) == 0) pk_add_file(P, i, &t, pass);
            al_csv_free(&t);   /* what was read, either way (al_csv.h) */
        }
}

/* Over the seeds of group g at length k: the trials' values (v) or, with
 * base, each seed's value minus the baseline's at the same seed (the
 * pairs of al_report_seed_pairs, both trials ok). */
static void cell_stat(const al_report_analysis *A, const double *v, int stride, int g, int base,
                      int k, al_stat *s)
{
    double *x = al_calloc((size_t)A->sm.n + 1, sizeof *x);
    int m = 0, n = 0, *ia = al_calloc((size_t)A->sm.n + 1, sizeof *ia);
    int *ib = al_calloc((size_t)A->sm.n + 1, sizeof *ib);
    if (base < 0)
        for (int i = 0; i < A->sm.n; i++) {
            const row *w = &A->sm.rows[i];
            double vi = v[i * stride + k];
            if (al_report_row_counts(w) && al_report_group_of(A, w) == g && !isnan(vi))
                x[m++] = vi;
        }
    else n = al_report_seed_pairs(A, &A->g[g], &A->g[base], ia, ib);
    for (int p = 0; p < n; p++) {
        double a = v[ia[p] * stride + k], b = v[ib[p] * stride + k];
        if (al_report_row_counts(&A->sm.rows[ia[p]]) &&
            al_report_row_counts(&A->sm.rows[ib[p]]) && !isnan(a) && !isnan(b))
            x[m++] = a - b;
    }
    al_stat_of(x, m, s);
    free(x), free(ia), free(ib);
}

static void pk_stat(const al_report_analysis *A, const double *v, int g, int base, int k,
                    al_stat *s)
{
    cell_stat(A, v, PK_MAX_LENGTHS, g, base, k, s);
}

static void pk_table_head(FILE *f, const pk_sum *P)
{
    fputs("| configuration |", f);
    for (int k = 0; k < P->n_lengths; k++) fprintf(f, " %d |", P->lengths[k]);
    fputs("\n| --- |", f);
    for (int k = 0; k < P->n_lengths; k++) fputs(" --- |", f);
    fputc('\n', f);
}

/* A table of v (rows x stride, n_cols used) minus each configuration's
 * baseline's (group.base: in a later stage with its own sweep.baseline, the
 * same upstream model's), paired by seed, Holm over every (configuration,
 * column) cell; what says what v is, heads[k] names column k. */
static void paired_table(FILE *f, const al_report_analysis *A, const double *v, int stride,
                         int n_cols, char heads[][24], const char *what, const char *fmt)
{
    int cells = A->n_groups * n_cols, m = 0, unresolved = 0, same = 0;
    al_stat *d = al_calloc((size_t)cells + 1, sizeof *d);
    double *p = al_calloc((size_t)cells + 1, sizeof *p);
    int *rej = al_calloc((size_t)cells + 1, sizeof *rej);
    for (int g = 0; g < A->n_groups; g++)
        for (int k = 0; !A->g[g].is_base && k < n_cols; k++) {
            cell_stat(A, v, stride, g, A->g[g].base, k, &d[g * n_cols + k]);
            if (d[g * n_cols + k].n) p[m++] = al_stat_p(&d[g * n_cols + k]);
        }
    al_holm(m, p, 0.05, rej);
    if (!m) goto out;
    char nm[600], num[3][32];
    if (al_report_n_bases(A) > 1) snprintf(nm, sizeof nm, "its baseline");
    else snprintf(nm, sizeof nm, "%s", A->g[A->g[0].base].first->group);
    fprintf(f, "\n%s minus %s's, paired by seed, with its 95 %% t-interval; **resolved** when p "
            "< 0.05 still after Holm over the %d cells below:\n\n| configuration |", what, nm, m);
    for (int k = 0; k < n_cols; k++) fprintf(f, " %s |", heads[k]);
    fputs("\n| --- |", f);
    for (int k = 0; k < n_cols; k++) fputs(" --- |", f);
    fputc('\n', f);
    for (int g = 0, i = 0; g < A->n_groups; g++) {
        int shown = 0;
        for (int k = 0; !A->g[g].is_base && k < n_cols; k++) shown |= d[g * n_cols + k].n > 0;
        if (!shown) continue;
        fprintf(f, "| %s |", al_report_vs_name(A, &A->g[g], nm, sizeof nm));
        for (int k = 0; k < n_cols; k++) {
            const al_stat *s = &d[g * n_cols + k];
            if (!s->n) {
                fputs(" - |", f);
                continue;
            }
            int res = rej[i++];
            unresolved += !res;
            snprintf(num[0], sizeof num[0], fmt, s->mean);
            snprintf(num[1], sizeof num[1], fmt, s->mean - s->ci95);
            snprintf(num[2], sizeof num[2], fmt, s->mean + s->ci95);
            if (s->n < 2) fprintf(f, " %s (1 seed) |", num[0]);
            else if (al_stat_all_equal(s) && al_stat_p(s) < 1)   /* no interval: al_stat_p */
                fprintf(f, " %s (each of %d seeds; sign test)%s |", num[0], s->n,
                        res ? " **resolved**" : ""), same++;
            else fprintf(f, " %s [%s, %s]%s |", num[0], num[1], num[2], res ? " **resolved**" : "");
        }
        fputc('\n', f);
    }
    if (same)
        fprintf(f, "\n*each of N seeds*: every seed's difference was the same (a share over a "
                "few keys moves in steps), so the t test cannot size its spread; the cell takes "
                "the sign test's p = 2^(1 - N) instead, which needs %d seeds to resolve.\n",
                AL_SIGN_TEST_PAIRS);
    if (unresolved)
        fputs("\nA difference that is not resolved could change sign with other seeds: do not "
              "read a ranking into it.\n", f);
out:
    free(d), free(p), free(rej);
}

/* Exact-match accuracy against each configuration's baseline's, by length. */
static void pk_deltas(FILE *f, const al_report_analysis *A, const pk_sum *P)
{
    char heads[PK_MAX_LENGTHS][24];
    for (int k = 0; k < P->n_lengths; k++) snprintf(heads[k], sizeof heads[k], "%d", P->lengths[k]);
    paired_table(f, A, P->exact, PK_MAX_LENGTHS, P->n_lengths, heads, "Exact-match accuracy",
                 "%+.3f");
}

/* Each counted trial's loss at each of V's contexts from its
 * by_position.csv (rows x EV_MAX_CONTEXTS; NAN where it has none): over
 * the whole window (buckets weighted by their tokens) into whole, and in
 * the window's last bucket, the positions furthest past the trained
 * length, into last. */
static void pos_values(const al_report_analysis *A, const ev *V, double *whole, double *last)
{
    for (int i = 0; i < A->sm.n; i++)
        for (int c = 0; c < V->n_contexts; c++) {
            const row *w = &A->sm.rows[i];
            char path[DIR_LEN + 512];
            al_csv t;
            al_err e;
            whole[i * EV_MAX_CONTEXTS + c] = last[i * EV_MAX_CONTEXTS + c] = NAN;
            if (!al_report_row_counts(w) || al_report_group_of(A, w) < 0 || is_passkey_trial(A, w))
                continue;
            snprintf(path, sizeof path, "%s/%s/eval/by_position_%d/by_position.csv", A->dir,
                     w->trial, V->contexts[c]);
            if (access(path, F_OK) != 0) continue;
            if (al_csv_read(path, &t, &e) == 0 && t.n_rows > 0) {
                double sum = 0, tokens = 0;
                for (int b = 0; b < t.n_rows; b++) {
                    double n = strtod(al_csv_cell(&t, b, "tokens"), NULL);
                    sum += n * strtod(al_csv_cell(&t, b, "loss"), NULL), tokens += n;
                }
                if (tokens > 0) whole[i * EV_MAX_CONTEXTS + c] = sum / tokens;
                last[i * EV_MAX_CONTEXTS + c] = strtod(al_csv_cell(&t, t.n_rows - 1, "loss"), NULL);
            }
            al_csv_free(&t);
        }
}

/* Loss by position against each configuration's baseline, paired by seed:
 * the whole window's and its last bucket's, a column per context. */
static void pos_deltas(FILE *f, const al_report_analysis *A, const ev *V)
{
    size_t cells = (size_t)A->sm.n * EV_MAX_CONTEXTS + 1;
    double *whole = al_malloc(cells * sizeof *whole), *last = al_malloc(cells * sizeof *last);
    char heads[EV_MAX_CONTEXTS][24], what[160];
    const ev_curve *first[EV_MAX_CONTEXTS] = {0};
    for (int i = 0; i < V->n_curves; i++)
        for (int c = 0; c < V->n_contexts; c++)
            if (V->c[i].context == V->contexts[c] && !first[c]) first[c] = &V->c[i];
    pos_values(A, V, whole, last);
    for (int c = 0; c < V->n_contexts; c++) snprintf(heads[c], sizeof heads[c], "%d", V->contexts[c]);
    paired_table(f, A, whole, EV_MAX_CONTEXTS, V->n_contexts, heads,
                 "Loss over the whole window (nats/token) at each context", "%+.4f");
    for (int c = 0; c < V->n_contexts; c++)
        if (first[c] && first[c]->n)
            snprintf(heads[c], sizeof heads[c], "%d: %.0f-%.0f", V->contexts[c],
                     first[c]->lo[first[c]->n - 1], first[c]->hi[first[c]->n - 1] - 1);
    snprintf(what, sizeof what, "Loss in the window's last bucket of positions (nats/token; "
             "the positions furthest past the trained length)");
    paired_table(f, A, last, EV_MAX_CONTEXTS, V->n_contexts, heads, what, "%+.4f");
    free(whole), free(last);
}

/* The answer's loss by length: where exact match falls to 0 at once past
 * the trained length, the loss of the key's digits says how far a model
 * still leans toward the key (its rise is where a position scheme stops
 * extending, experiments/long_context.yaml). */
static void pk_loss_md(FILE *f, const al_report_analysis *A, const pk_sum *P)
{
    fputs("\nThe answer's loss in nats per digit (the mean cross-entropy of the key's five "
          "digits, teacher-forced; for scale, an even guess among the ten digits is ln 10 = "
          "2.303), each trial's the mean over depths, mean over seeds ± 95 % t-interval:\n\n",
          f);
    pk_table_head(f, P);
    for (int g = 0; g < A->n_groups; g++) {
        al_stat ls;
        int any = 0;
        for (int k = 0; k < P->n_lengths; k++) {
            pk_stat(A, P->loss, g, -1, k, &ls);
            any |= ls.n > 0;
        }
        if (!any) continue;
        fprintf(f, "| %s |", A->g[g].first->group);
        for (int k = 0; k < P->n_lengths; k++) {
            pk_stat(A, P->loss, g, -1, k, &ls);
            if (!ls.n) fputs(" - |", f);
            else if (ls.n < 2) fprintf(f, " %.3f |", ls.mean);
            else fprintf(f, " %.3f ± %.3f |", ls.mean, ls.ci95);
        }
        fputc('\n', f);
    }
}

static void pk_md(FILE *f, const al_report_analysis *A)
{
    pk_sum P;
    pk_collect(A, &P);
    int shown = 0;
    if (P.n_lengths) {
        fputs("\n## Passkey retrieval\n\nEach ok passkey trial's checkpoint on the grid of "
              "`eval.passkey_lengths` x `eval.passkey_depths` (`attnlab score --passkey`; "
              "`<trial>/eval/passkey.csv`): the share of keys answered exactly by greedy "
              "decoding (mean over seeds ± 95 % t-interval) and in brackets the share of "
              "digits right, each trial's value the mean over depths, by window length.\n\n", f);
        pk_table_head(f, &P);
        for (int g = 0; g < A->n_groups; g++) {
            al_stat ex, dg;
            int any = 0;
            for (int k = 0; k < P.n_lengths; k++) {
                pk_stat(A, P.exact, g, -1, k, &ex);
                any |= ex.n > 0;
            }
            if (!any) continue;
            shown++;
            fprintf(f, "| %s |", A->g[g].first->group);
            for (int k = 0; k < P.n_lengths; k++) {
                pk_stat(A, P.exact, g, -1, k, &ex);
                pk_stat(A, P.digits, g, -1, k, &dg);
                if (!ex.n) fputs(" - |", f);
                else if (ex.n < 2) fprintf(f, " %.3f (%.3f) |", ex.mean, dg.mean);
                else fprintf(f, " %.3f ± %.3f (%.3f) |", ex.mean, ex.ci95, dg.mean);
            }
            fputc('\n', f);
        }
        if (shown > 1) pk_deltas(f, A, &P);
        pk_loss_md(f, A, &P);
    }
    free(P.exact), free(P.digits), free(P.loss);
}

void al_report_eval_md(FILE *f, const al_report_analysis *A, int plots)
{
    pk_md(f, A);
    ev V;
    collect(A, &V);
    int recall = al_report_recall_any(A);
    if (V.n_points || recall) fputs("\n## Checkpoints through the cache\n", f);
    if (V.n_points) {
        fputs("\nEach ok trial's final checkpoint scored after training (the experiment's "
              "`eval`), on the first tokens of its test split (`<trial>/eval/test.txt`), "
              "teacher-forced through the KV cache at each dtype: `attnlab score "
              "<trial>/model.safetensors <trial>/eval/test.txt --seq-len C --through-cache "
              "--kv-dtype D` gives the same number. *Cache bytes* is the whole cache of one "
              "C-token window, its precision, quantization scales and f32 residual window "
              "included. Loss is the mean ± 95 % t-interval over seeds; *front*: no other "
              "(configuration, dtype) at that context has as small a cache and a lower loss. "
              "The numbers: `eval_configs.csv`.\n", f);
        for (int c = 0; c < V.n_contexts; c++)
            if (any_point(&V, V.contexts[c])) md_context(f, plots, &V, V.contexts[c]);
    }
    if (recall) al_report_recall_md(f, A);
    if (V.n_curves) {
        fputs("\n## Loss by position\n\nEach ok trial's final checkpoint scored after training "
              "(the experiment's `eval.by_position`) over whole C-token windows of its test split "
              "(not a passkey trial's: it learnt the key's digits, not its filler), the plain forward pass (`attnlab score "
              "<trial>/model.safetensors <trial>/eval/test.txt --seq-len C --by-position`; "
              "`<trial>/eval/by_position_C/`): the loss in each bucket of positions, mean over "
              "seeds. Past a model's trained length, the position where its loss starts to rise "
              "is where its position scheme stops extending. The numbers: "
              "`eval_by_position_C.dat`.\n", f);
        for (int c = 0; c < V.n_contexts; c++) md_positions(f, plots, &V, V.contexts[c]);
        pos_deltas(f, A, &V);   /* nothing when no configuration has a baseline to pair */
    }
    ev_free(&V);
}
