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

/* ------------------------------------------------------------ trade-off */

/* tradeoff.dat: one line per configuration that can be drawn. */
static int write_tradeoff_data(const al_report_analysis *A, al_err *e)
{
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96];
    FILE *f = al_report_open(A, "tradeoff.dat", path, tmp, e);
    if (!f) return -1;
    fputs("# kv_bytes_per_token mean ci95 \"configuration\" on_front n resolved\n"
          "# ci95: half-width of the 95 % t-interval over seeds (0: one seed, no interval);\n"
          "# resolved: 1 when its place on or off the Pareto front is beyond seed noise\n", f);
    for (int k = 0; k < A->n_groups; k++) {
        const group *g = &A->g[k];
        if (isnan(g->quality.q.mean) || !(g->first->kv > 0) || g->first->causal == 0) continue;
        fprintf(f, "%.0f %.9g %.9g \"%s%s\" %d %d %d\n", g->first->kv, g->quality.q.mean,
                g->quality.q.n > 1 ? g->quality.q.ci95 : 0.0, g->first->group,
                g->quality.q.n == 1 ? " (n=1)" : "",
                g->front.on, g->quality.q.n, g->front.resolved);
    }
    if (al_commit_atomic(f, tmp, path, e)) return -1;
    if (!(f = al_report_open(A, "front.dat", path, tmp, e))) return -1;
    fputs("# the Pareto front of the means, by cache size\n", f);
    for (int k = A->n_groups - 1; k >= 0; k--)
        if (A->g[k].front.on && A->g[k].first->kv > 0)
            fprintf(f, "%.0f %.9g\n", A->g[k].first->kv, A->g[k].quality.q.mean);
    return al_commit_atomic(f, tmp, path, e);
}

static int write_tradeoff(const al_report_analysis *A, al_err *e)
{
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96];
    if (write_tradeoff_data(A, e)) return -1;
    FILE *f = al_report_open(A, "tradeoff.gp", path, tmp, e);
    if (!f) return -1;
    al_report_gp_header(f, "tradeoff");
    al_report_gp_terminal(f, "1000,700");
    fprintf(f, "  set title \"%s: %s against KV cache (mean over seeds, 95 %% intervals)\"\n"
            "  set xlabel \"KV-cache bytes per token (f32, all layers; log scale)\"\n"
            "  set ylabel \"%s\"\n  set logscale x 2\n  set grid\n  set key %s\n"
            "  set offsets graph 0.08, graph 0.15, graph 0.08, graph 0.08\n"
            "  plot \"tradeoff.dat\" using 1:($7 == 1 ? $2 : NaN):3 with yerrorbars pt 7 "
            "ps 1.3 lw 1.5 lc rgb \"#1f5fa8\" title \"resolved from its front neighbours\", "
            "\\\n"
            "       \"\" using 1:($7 == 0 ? $2 : NaN):3 with yerrorbars pt 6 ps 1.6 lw 1.5 "
            "lc rgb \"#1f5fa8\" title \"not resolved: within seed noise of a front point\", "
            "\\\n"
            "       \"\" using 1:2:4 with labels left offset char 1,0.7 notitle, \\\n"
            "       \"front.dat\" using 1:2 with steps lw 2 dt 2 lc rgb \"#c03030\" "
            "title \"Pareto front (means)\"\n  unset output\n}\n", A->mk.name, A->metric,
            A->use_acc ? A->metric : "loss (nats/token)",
            A->use_acc ? "bottom right" : "top right");
    return al_commit_atomic(f, tmp, path, e);
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
    if (write_tradeoff(A, e) || write_curves(A, e)) return -1;
    if (!A->n_ok) return *plots = AL_PLOTS_NOTHING, 0;
    snprintf(log, sizeof log, "%s/gnuplot.log", A->dir);
    unlink(log);
    *plots = al_report_gnuplot(A, "tradeoff");
    if (*plots == AL_PLOTS_DRAWN) *plots = al_report_gnuplot(A, "curves");
    return 0;
}
