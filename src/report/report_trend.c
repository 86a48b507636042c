/*
 * report_trend.c - what each configuration's eval log says beyond its
 * final numbers (report_trend.h): whether the validation loss was still
 * falling when training stopped, and, on recall tasks, when accuracy
 * first reached AL_SOLVED_ACCURACY.
 */
#include "report_trend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The eval points of one trial's metrics.csv (step, val_loss and
 * val_accuracy; NAN where blank). Returns the number of rows, 0 when the
 * file is missing or lacks the columns. */
static int read_evals(const al_report_analysis *A, const row *w, double **step, double **loss,
                      double **acc)
{
    char path[DIR_LEN + 300];
    al_csv m;
    al_err e;
    snprintf(path, sizeof path, "%s/%s/metrics.csv", A->dir, w->trial);
    *step = *loss = *acc = NULL;
    int rc = al_csv_read(path, &m, &e), cs = rc ? -1 : al_csv_col(&m, "step");
    int cl = rc ? -1 : al_csv_col(&m, "val_loss"), ca = rc ? -1 : al_csv_col(&m, "val_accuracy");
    int n = cs >= 0 && cl >= 0 ? m.n_rows : 0;
    *step = al_calloc((size_t)n + 1, sizeof **step);
    *loss = al_calloc((size_t)n + 1, sizeof **loss);
    *acc = al_calloc((size_t)n + 1, sizeof **acc);
    for (int r = 0; r < n; r++) {
        const char *a = ca >= 0 ? m.cells[r][ca] : "", *l = m.cells[r][cl];
        (*step)[r] = atof(m.cells[r][cs]);
        (*loss)[r] = l[0] ? atof(l) : NAN;
        (*acc)[r] = a[0] ? atof(a) : NAN;
    }
    al_csv_free(&m);   /* also after a failed read: it may hold part of the file */
    return n;
}

/* The trial's planned steps; older summaries lack them: its last eval step. */
static double planned_steps(const double *step, int n, double steps)
{
    double last = 0;
    for (int r = 0; r < n; r++) last = step[r] > last ? step[r] : last;
    return steps > 0 ? steps : last;
}

double al_report_tail_slope(const double *step, const double *loss, int n, double steps)
{
    double *y = al_calloc((size_t)n + 1, sizeof *y);
    steps = planned_steps(step, n, steps);
    for (int r = 0; r < n; r++) y[r] = step[r] >= 0.75 * steps ? loss[r] : NAN;
    double s = al_ls_slope(step, y, n) * 100;
    free(y);
    return s;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n)
{
    if (!n) return NAN;
    qsort(x, (size_t)n, sizeof *x, by_value);
    return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

/* Slope and first solved step of group g, over its selected trials. */
static void trend_of(const al_report_analysis *A, group *g)
{
    double sum = 0, fall = 0, *first = al_calloc((size_t)A->sm.n + 1, sizeof *first);
    g->trend.n = g->solved.step_n = 0;
    for (int i = 0; i < A->sm.n; i++) {
        const row *w = &A->sm.rows[i];
        if (!w->selected || strcmp(w->group, g->first->group) != 0) continue;
        double *step, *loss, *acc;
        int n = read_evals(A, w, &step, &loss, &acc);
        double s = al_report_tail_slope(step, loss, n, w->steps);
        if (isfinite(s))   /* the slope over the quarter's length: the fall in nats */
            sum += s, fall -= s * planned_steps(step, n, w->steps) / 400, g->trend.n++;
        for (int r = 0; r < n; r++)
            if (acc[r] >= AL_SOLVED_ACCURACY) {
                first[g->solved.step_n++] = step[r];
                break;
            }
        free(step), free(loss), free(acc);
    }
    g->trend.slope = g->trend.n ? sum / g->trend.n : NAN;
    g->trend.tail_fall = g->trend.n ? fall / g->trend.n : NAN;
    g->solved.step = median(first, g->solved.step_n);
    free(first);
}

void al_report_trends(al_report_analysis *A)
{
    for (int k = 0; k < A->n_groups; k++) trend_of(A, &A->g[k]);
}

/* The val loss of a curve at eval step s (NAN: no such finite point; a
 * row of that step without a val loss is passed over). */
static double loss_at(const double *step, const double *loss, int n, double s)
{
    for (int r = 0; r < n; r++)
        if (step[r] == s && isfinite(loss[r])) return loss[r];
    return NAN;
}

/* The two steps a pair of curves is compared at: the last eval both have
 * with a finite loss (*end), and the first such one at or after 75 % of
 * `steps` (NAN or 0: of *end). 0 when there are not two such points. */
static int gap_steps(const double *sa, const double *la, int na, const double *sb,
                     const double *lb, int nb, double steps, double *q, double *end)
{
    *q = *end = NAN;
    for (int r = 0; r < na; r++)
        if (isfinite(la[r]) && isfinite(loss_at(sb, lb, nb, sa[r])) && !(*end >= sa[r]))
            *end = sa[r];
    double from = 0.75 * (steps > 0 ? steps : *end);
    for (int r = 0; r < na; r++)
        if (isfinite(la[r]) && isfinite(loss_at(sb, lb, nb, sa[r])) && sa[r] >= from &&
            !(*q <= sa[r]))
            *q = sa[r];
    return isfinite(*q) && *q < *end;
}

/* gap_q, gap_end and gap_change of g against base, over the seed pairs
 * whose curves share two such steps. */
static void gap_of(const al_report_analysis *A, group *g, const group *base)
{
    int *ia = al_calloc((size_t)A->sm.n + 1, sizeof *ia);
    int *ib = al_calloc((size_t)A->sm.n + 1, sizeof *ib), m = 0;
    double *x = al_calloc(3 * (size_t)A->sm.n + 3, sizeof *x), *xq = x, *xe = x + A->sm.n + 1,
           *xc = xe + A->sm.n + 1;
    int np = al_report_seed_pairs(A, g, base, ia, ib);
    g->gap.q_step = g->gap.end_step = NAN;
    for (int k = 0; k < np; k++) {
        const row *wa = &A->sm.rows[ia[k]], *wb = &A->sm.rows[ib[k]];
        double *sa, *la, *aa, *sb, *lb, *ab, q, end;
        int na = read_evals(A, wa, &sa, &la, &aa), nb = read_evals(A, wb, &sb, &lb, &ab);
        if (gap_steps(sa, la, na, sb, lb, nb, wa->steps, &q, &end)) {
            xq[m] = loss_at(sa, la, na, q) - loss_at(sb, lb, nb, q);
            xe[m] = loss_at(sa, la, na, end) - loss_at(sb, lb, nb, end);
            xc[m] = xe[m] - xq[m];
            if (!m++) g->gap.q_step = q, g->gap.end_step = end;
        }
        free(sa), free(la), free(aa), free(sb), free(lb), free(ab);
    }
    al_stat_of(xq, m, &g->gap.q);
    al_stat_of(xe, m, &g->gap.end);
    al_stat_of(xc, m, &g->gap.change);
    free(ia), free(ib), free(x);
}

void al_report_gap_trends(al_report_analysis *A)
{
    double *p = al_calloc((size_t)A->n_groups + 1, sizeof *p);
    int *rej = al_calloc((size_t)A->n_groups + 1, sizeof *rej), m = 0;
    for (int k = 0; k < A->n_groups; k++) {
        group *g = &A->g[k];
        al_stat_of(p, 0, &g->gap.q);   /* none yet: n 0, mean NAN */
        g->gap.end = g->gap.change = g->gap.q;
        g->gap.holm = 0;
        g->gap.q_step = g->gap.end_step = NAN;
        if (g->is_base) continue;
        gap_of(A, g, &A->g[g->base]);
        p[m++] = al_stat_p(&g->gap.change);
    }
    al_holm(m, p, 0.05, rej);
    for (int k = 0, i = 0; k < A->n_groups; k++)
        if (!A->g[k].is_base) A->g[k].gap.holm = rej[i++];
    free(p), free(rej);
}

const char *al_report_gap_trend(const group_gap *g)
{
    if (g->change.n < 2) return "";
    if (!g->holm) return "steady";
    /* narrowing: the change points back towards 0 from where the gap stood */
    return (g->change.mean < 0) == (g->q.mean > 0) ? "narrowing" : "widening";
}
