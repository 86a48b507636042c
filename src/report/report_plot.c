/*
 * report_plot.c - the report's pictures: data files and gnuplot scripts
 * written into the results directory (kept there to edit and re-run), then
 * gnuplot run on them. See report_plot.h.
 */
#include "report_plot.h"
#include "al_gnuplot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

FILE *al_report_open(const al_report_analysis *A, const char *name, char *path, char *tmp,
                     al_err *e)
{
    snprintf(path, DIR_LEN + 64, "%s/%s", A->dir, name);
    return al_open_atomic(path, tmp, DIR_LEN + 96, e);
}

void al_report_gp_terminal(FILE *f, const char *size)
{
    fprintf(f, "do for [fmt in \"png svg\"] {\n"
            "  if (fmt eq \"png\") {\n"
            "    set terminal pngcairo noenhanced size %s font \",11\"\n"
            "    set output out_png\n"
            "  } else {\n"
            "    set terminal svg noenhanced size %s dynamic font \",11\"\n"
            "    set output out_svg\n  }\n", size, size);
}

void al_report_gp_header(FILE *f, const char *base)
{
    fprintf(f, "# %s.gp - written by `attnlab report`; re-run with `gnuplot %s.gp` in "
            "this directory.\n"
            "if (!exists(\"out_png\")) out_png = \"%s.png\"\n"
            "if (!exists(\"out_svg\")) out_svg = \"%s.svg\"\n", base, base, base, base);
}

/* ------------------------------------------------------------ trade-offs */

/* One plot of quality against a cost: its files (<base>.dat, <front>,
 * <base>.gp), what its x axis says, and whether the front's places carry
 * their resolution by seeds (the bytes-held front's, report_analyze.c). */
typedef struct cost_axis {
    int cost;                 /* enum al_report_cost */
    const char *base, *front, *column, *what, *xlabel;
    int log_base, resolves;
} cost_axis;

static const cost_axis axes[AL_REPORT_NCOSTS] = {
    {AL_COST_HELD, "tradeoff", "front.dat", "kv_bytes_per_token", "KV cache",
     "KV-cache bytes per token (f32, all layers; log scale)", 2, 1},
    {AL_COST_READ, "tradeoff_read", "front_read.dat", "decode_bytes_per_token",
     "bytes read per decoded token", "bytes one decode step reads per token at the report "
     "context (cache rows and weights, batch 1; log scale)", 2, 0},
    {AL_COST_FLOPS, "tradeoff_flops", "front_flops.dat", "train_flops", "training FLOPs",
     "training FLOPs (matrix products, forward and backward; log scale)", 10, 0},
};

/* A configuration drawn on an axis: a mean, a causal model, a cost. */
static int on_axis(const group *g, const cost_axis *ax)
{
    double c = al_report_cost_of(g->first, ax->cost);
    return !isnan(g->quality.q.mean) && c > 0 && g->first->causal != 0;
}

/* <base>.dat: one line per configuration that can be drawn; <front>: the
 * front of the means along the axis. Returns the points written. */
static int write_tradeoff_data(const al_report_analysis *A, const cost_axis *ax, al_err *e)
{
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96], name[64];
    snprintf(name, sizeof name, "%s.dat", ax->base);
    FILE *f = al_report_open(A, name, path, tmp, e);
    if (!f) return -1;
    fprintf(f, "# %s mean ci95 \"configuration\" on_front n resolved\n"
            "# ci95: half-width of the 95 %% t-interval over seeds (0: one seed, no interval);\n"
            "# resolved: 1 when its place on or off the Pareto front is beyond seed noise\n",
            ax->column);
    int n = 0;
    for (int k = 0; k < A->n_groups; k++) {
        const group *g = &A->g[k];
        if (!on_axis(g, ax)) continue;
        fprintf(f, "%.0f %.9g %.9g \"%s%s\" %d %d %d\n", al_report_cost_of(g->first, ax->cost),
                g->quality.q.mean, g->quality.q.n > 1 ? g->quality.q.ci95 : 0.0, g->first->group,
                g->quality.q.n == 1 ? " (n=1)" : "", g->front.on_cost[ax->cost], g->quality.q.n,
                ax->resolves ? g->front.resolved : 1);
        n++;
    }
    if (al_commit_atomic(f, tmp, path, e)) return -1;
    if (!(f = al_report_open(A, ax->front, path, tmp, e))) return -1;
    fprintf(f, "# the Pareto front of the means, by %s\n", ax->what);
    int *order = al_calloc((size_t)A->n_groups + 1, sizeof *order), m = 0;
    for (int k = 0; k < A->n_groups; k++)
        if (A->g[k].front.on_cost[ax->cost] && on_axis(&A->g[k], ax)) order[m++] = k;
    for (int i = 1; i < m; i++)   /* cheapest first: a step line */
        for (int j = i; j > 0 && al_report_cost_of(A->g[order[j]].first, ax->cost) <
                                     al_report_cost_of(A->g[order[j - 1]].first, ax->cost); j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    for (int i = 0; i < m; i++)
        fprintf(f, "%.0f %.9g\n", al_report_cost_of(A->g[order[i]].first, ax->cost),
                A->g[order[i]].quality.q.mean);
    free(order);
    return al_commit_atomic(f, tmp, path, e) ? -1 : n;
}

/* The points: under a resolving front, resolved ones filled and the
 * others hollow; otherwise all filled. */
static void gp_points(FILE *f, const cost_axis *ax)
{
    if (ax->resolves)
        fprintf(f, "  plot \"%s.dat\" using 1:($7 == 1 ? $2 : NaN):3 with yerrorbars pt 7 "
                "ps 1.3 lw 1.5 lc rgb \"#1f5fa8\" title \"resolved from its front neighbours\", "
                "\\\n"
                "       \"\" using 1:($7 == 0 ? $2 : NaN):3 with yerrorbars pt 6 ps 1.6 lw 1.5 "
                "lc rgb \"#1f5fa8\" title \"not resolved: within seed noise of a front point\", "
                "\\\n", ax->base);
    else
        fprintf(f, "  plot \"%s.dat\" using 1:2:3 with yerrorbars pt 7 ps 1.3 lw 1.5 "
                "lc rgb \"#1f5fa8\" title \"mean over seeds, 95 %% interval\", \\\n", ax->base);
}

/* Returns the points drawn. Without any (an older summary lacks the
 * cost), no script but the bytes-held one, which is always written. */
static int write_tradeoff(const al_report_analysis *A, const cost_axis *ax, al_err *e)
{
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96], name[64];
    int n = write_tradeoff_data(A, ax, e);
    if (n < 0 || (n == 0 && ax->cost != AL_COST_HELD)) return n;
    snprintf(name, sizeof name, "%s.gp", ax->base);
    FILE *f = al_report_open(A, name, path, tmp, e);
    if (!f) return -1;
    al_report_gp_header(f, ax->base);
    al_report_gp_terminal(f, "1000,700");
    fprintf(f, "  set title \"%s: %s against %s (mean over seeds, 95 %% intervals)\"\n"
            "  set xlabel \"%s\"\n"
            "  set ylabel \"%s\"\n  set logscale x %d\n  set grid\n  set key %s\n"
            "  set offsets graph 0.08, graph 0.15, graph 0.08, graph 0.08\n", A->mk.name,
            A->metric, ax->what, ax->xlabel, A->use_acc ? A->metric : "loss (nats/token)",
            ax->log_base, A->use_acc ? "bottom right" : "top right");
    gp_points(f, ax);
    fprintf(f, "       \"\" using 1:2:4 with labels left offset char 1,0.7 notitle, \\\n"
            "       \"%s\" using 1:2 with steps lw 2 dt 2 lc rgb \"#c03030\" "
            "title \"Pareto front (means)\"\n  unset output\n}\n", ax->front);
    return al_commit_atomic(f, tmp, path, e) ? -1 : n;
}

/* ------------------------------------------------------------ curves */

int al_report_group_curve(const al_report_analysis *A, const group *g, double **step, double **val)
{
    int n = 0, *cnt = NULL;
    *step = *val = NULL;
    for (int i = 0; i < A->sm.n; i++) {
        const row *w = &A->sm.rows[i];
        if (strcmp(w->group, g->first->group) != 0 || !w->selected) continue;
        char path[DIR_LEN + 300];
        al_csv m;
        al_err e;
        snprintf(path, sizeof path, "%s/%s/metrics.csv", A->dir, w->trial);
        if (al_csv_read(path, &m, &e)) {
            al_csv_free(&m);
            continue;
        }
        int cs = al_csv_col(&m, "step"), cv = al_csv_col(&m, "val_loss");
        if (!n && cs >= 0 && cv >= 0) {
            n = m.n_rows;
            *step = al_calloc((size_t)n + 1, sizeof **step);
            *val = al_calloc((size_t)n + 1, sizeof **val);
            cnt = al_calloc((size_t)n + 1, sizeof *cnt);
            for (int r = 0; r < n; r++) (*step)[r] = atof(m.cells[r][cs]);
        }
        for (int r = 0; cs >= 0 && cv >= 0 && r < n && r < m.n_rows; r++) {
            if (atof(m.cells[r][cs]) != (*step)[r] || !m.cells[r][cv][0]) continue;
            (*val)[r] += atof(m.cells[r][cv]);
            cnt[r]++;
        }
        al_csv_free(&m);
    }
    for (int r = 0; r < n; r++) (*val)[r] = cnt[r] ? (*val)[r] / cnt[r] : NAN;
    free(cnt);
    return n;
}

/* curves.dat: one block per configuration (gnuplot `index`); returns the
 * number of blocks, their group numbers in which[]. *ytop gets the highest
 * loss after the first evaluation that follows step 0, so that the plot
 * shows learning rather than the initial loss (NAN: let gnuplot choose). */
static int write_curve_data(const al_report_analysis *A, int *which, double *ytop, al_err *e)
{
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96];
    FILE *f = al_report_open(A, "curves.dat", path, tmp, e);
    if (!f) return -1;
    int blocks = 0;
    *ytop = NAN;
    fputs("# step tokens val_loss, one block per configuration\n", f);
    for (int k = 0; k < A->n_groups; k++) {
        double *step, *val;
        int n = al_report_group_curve(A, &A->g[k], &step, &val), wrote = 0;
        double tps = A->g[k].first->tokens_per_step;
        for (int r = 0; r < n; r++) {
            if (isnan(val[r])) continue;
            if (!wrote++) fprintf(f, "%s# %s\n", blocks ? "\n\n" : "", A->g[k].first->group);
            fprintf(f, "%.0f %.9g %.9g\n", step[r], isnan(tps) ? step[r] : step[r] * tps, val[r]);
            if (r == 1 && n > 2 && !(val[r] <= *ytop)) *ytop = val[r];
        }
        if (wrote) which[blocks++] = k;
        free(step), free(val);
    }
    return al_commit_atomic(f, tmp, path, e) ? -1 : blocks;
}

static void gp_curve_plot(FILE *f, const al_report_analysis *A, const int *which, int n, int xcol)
{
    fputs("  plot ", f);
    for (int b = 0; b < n; b++)
        fprintf(f, "%s\"curves.dat\" index %d using %d:3 with linespoints pt 7 ps 0.5 lw 1.5 "
                "title \"%s\"", b ? ", \\\n       " : "", b, xcol, A->g[which[b]].first->group);
    fputs("\n", f);
}

static int write_curves(const al_report_analysis *A, al_err *e)
{
    int *which = al_calloc((size_t)A->n_groups + 1, sizeof *which);
    double ytop;
    int n = write_curve_data(A, which, &ytop, e);
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96];
    FILE *f = n < 0 ? NULL : al_report_open(A, "curves.gp", path, tmp, e);
    if (!f) {
        free(which);
        return -1;
    }
    al_report_gp_header(f, "curves");
    al_report_gp_terminal(f, "1400,600");
    fprintf(f, "  set multiplot layout 1,2 title \"%s: validation loss (mean over seeds)\"\n"
            "  set ylabel \"validation loss (nats/token)\"\n"
            "  set grid\n  set key top right\n  set xlabel \"optimizer step\"\n", A->mk.name);
    if (!isnan(ytop)) fprintf(f, "  set yrange [*:%.4g]\n", ytop * 1.02);
    if (n) gp_curve_plot(f, A, which, n, 1);
    fputs("  set xlabel \"tokens trained\"\n  set format x \"%.1s%c\"\n", f);
    if (n) gp_curve_plot(f, A, which, n, 2);
    fputs("  unset multiplot\n  unset output\n}\n", f);
    free(which);
    return al_commit_atomic(f, tmp, path, e);
}

/* ------------------------------------------------------------ gnuplot */

/* Run gnuplot on DIR/<base>.gp (al_gnuplot.h). Returns an enum al_plot_state. */
_Static_assert((int)AL_GNUPLOT_DRAWN == (int)AL_PLOTS_DRAWN &&
               (int)AL_GNUPLOT_MISSING == (int)AL_PLOTS_NO_GNUPLOT &&
               (int)AL_GNUPLOT_FAILED == (int)AL_PLOTS_FAILED,
               "al_gnuplot_result and al_plot_state agree");
int al_report_gnuplot(const al_report_analysis *A, const char *base)
{
    return al_gnuplot_run(A->dir, base);
}

int al_report_draw_plots(const al_report_analysis *A, int *plots, al_err *e)
{
    char log[DIR_LEN + 32];
    int drawn[AL_REPORT_NCOSTS];
    for (int k = 0; k < AL_REPORT_NCOSTS; k++)
        if ((drawn[k] = write_tradeoff(A, &axes[k], e)) < 0) return -1;
    if (write_curves(A, e)) return -1;
    if (!A->n_ok) return *plots = AL_PLOTS_NOTHING, 0;
    snprintf(log, sizeof log, "%s/gnuplot.log", A->dir);
    unlink(log);
    *plots = al_report_gnuplot(A, "tradeoff");
    if (*plots == AL_PLOTS_DRAWN) *plots = al_report_gnuplot(A, "curves");
    for (int k = AL_COST_HELD + 1; k < AL_REPORT_NCOSTS && *plots == AL_PLOTS_DRAWN; k++)
        if (drawn[k] > 0) *plots = al_report_gnuplot(A, axes[k].base);
    return 0;
}

int al_report_cost_plotted(const al_report_analysis *A, int cost)
{
    for (int k = 0; k < A->n_groups; k++)
        if (on_axis(&A->g[k], &axes[cost])) return 1;
    return 0;
}
