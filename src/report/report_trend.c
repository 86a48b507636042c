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
static int read_evals(const report *R, const row *w, double **step, double **loss,
                      double **acc)
{
    char path[DIR_LEN + 300];
    al_csv m;
    al_err e;
    snprintf(path, sizeof path, "%s/%s/metrics.csv", R->dir, w->trial);
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

double al_report_tail_slope(const double *step, const double *loss, int n, double steps)
{
    double last = 0, *y = al_calloc((size_t)n + 1, sizeof *y);
    for (int r = 0; r < n; r++) last = step[r] > last ? step[r] : last;
    if (!(steps > 0)) steps = last;   /* older summaries: the last eval step */
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
static void group_trend(const report *R, group *g)
{
    double sum = 0, *first = al_calloc((size_t)R->sm.n + 1, sizeof *first);
    g->slope_n = g->solved_step_n = 0;
    for (int i = 0; i < R->sm.n; i++) {
        const row *w = &R->sm.rows[i];
        if (!w->selected || strcmp(w->group, g->first->group) != 0) continue;
        double *step, *loss, *acc;
        int n = read_evals(R, w, &step, &loss, &acc);
        double s = al_report_tail_slope(step, loss, n, w->steps);
        if (isfinite(s)) sum += s, g->slope_n++;
        for (int r = 0; r < n; r++)
            if (acc[r] >= AL_SOLVED_ACCURACY) {
                first[g->solved_step_n++] = step[r];
                break;
            }
        free(step), free(loss), free(acc);
    }
    g->slope = g->slope_n ? sum / g->slope_n : NAN;
    g->solved_step = median(first, g->solved_step_n);
    free(first);
}

void al_report_trends(report *R)
{
    for (int k = 0; k < R->n_groups; k++) group_trend(R, &R->g[k]);
}
