/*
 * report_plot.c - the report's pictures: data files and gnuplot scripts
 * written into the results directory (kept there to edit and re-run), then
 * gnuplot run on them. See report_plot.h.
 */
#include "report_plot.h"
#include "al_gnuplot.h"
#include "report_files.h"

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
    al_report_files_add(A->files, name);
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
     "KV-cache bytes per token (f32, all layers; log scale)", 2, 1},   /* older summaries */
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

/* How a point is drawn under a resolving front: its place resolved by the
 * comparisons that decide it, not resolved, or decided by none (the
 * cheapest front point: no cheaper front neighbour to be resolved from). */
enum point_class { PT_NOT_RESOLVED, PT_RESOLVED, PT_NOTHING_TO_RESOLVE, PT_CLASSES };

static int point_class(const group *g, const cost_axis *ax)
{
    if (!ax->resolves) return PT_RESOLVED;
    if (g->front.on && !g->front.compared) return PT_NOTHING_TO_RESOLVE;
    return g->front.resolved ? PT_RESOLVED : PT_NOT_RESOLVED;
}

/* The label of each drawn configuration (its name, "(n=1)" for one seed),
 * and one label for points that coincide: the same cost and means within 2 %
 * of the drawn range print as "a / b" at the first, the others unlabelled,
 * so that no two labels print over each other. lab[k] for group k. */
static void point_labels(const al_report_analysis *A, const cost_axis *ax, char (*lab)[512])
{
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < A->n_groups; k++) {
        const group *g = &A->g[k];
        snprintf(lab[k], 512, "%s%s", g->first->group, g->quality.q.n == 1 ? " (n=1)" : "");
        if (!on_axis(g, ax)) continue;
        lo = fmin(lo, g->quality.q.mean), hi = fmax(hi, g->quality.q.mean);
    }
    double tol = 0.02 * (hi - lo);
    for (int k = 0; k < A->n_groups; k++) {
        const group *g = &A->g[k];
        if (!on_axis(g, ax) || !lab[k][0]) continue;
        for (int j = k + 1; j < A->n_groups; j++) {
            const group *h = &A->g[j];
            if (!on_axis(h, ax) || !lab[j][0] ||
                al_report_cost_of(h->first, ax->cost) != al_report_cost_of(g->first, ax->cost) ||
                fabs(h->quality.q.mean - g->quality.q.mean) > tol)
                continue;
            /* lab[k] += " / " lab[j], cut at 511 bytes (two rows of one
             * array, never the same one: j > k) */
            size_t l = strlen(lab[k]), n = strlen(lab[j]), room = 511 - l;
            if (room >= 3) {
                memcpy(lab[k] + l, " / ", 3);
                n = n < room - 3 ? n : room - 3;
                memcpy(lab[k] + l + 3, lab[j], n);
                lab[k][l + 3 + n] = 0;
            }
            lab[j][0] = 0;
        }
    }
}

/* <base>.dat: one line per configuration that can be drawn; <front>: the
 * front of the means along the axis. Returns the points written; counts
 * the points of each class in cls. */
static int write_tradeoff_data(const al_report_analysis *A, const cost_axis *ax, int *cls,
                               al_err *e)
{
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96], name[64];
    snprintf(name, sizeof name, "%s.dat", ax->base);
    FILE *f = al_report_open(A, name, path, tmp, e);
    if (!f) return -1;
    fprintf(f, "# %s mean ci95 \"label\" on_front n resolved class\n"
            "# ci95: half-width of the 95 %% t-interval over seeds (0: one seed, no interval);\n"
            "# resolved: 1 when its place on or off the Pareto front is beyond seed noise;\n"
            "# class: 1 resolved, 0 not resolved, 2 nothing to resolve (the cheapest front\n"
            "# point: no cheaper front neighbour); label: \"\" where an earlier point at the\n"
            "# same place carries both names\n", ax->column);
    char (*lab)[512] = al_calloc((size_t)A->n_groups + 1, sizeof *lab);
    point_labels(A, ax, lab);
    int n = 0;
    for (int k = 0; k < A->n_groups; k++) {
        const group *g = &A->g[k];
        if (!on_axis(g, ax)) continue;
        int c = point_class(g, ax);
        cls[c]++;
        fprintf(f, "%.0f %.9g %.9g \"%s\" %d %d %d %d\n", al_report_cost_of(g->first, ax->cost),
                g->quality.q.mean, g->quality.q.n > 1 ? g->quality.q.ci95 : 0.0, lab[k],
                g->front.on_cost[ax->cost], g->quality.q.n,
                ax->resolves ? g->front.resolved : 1, c);
        n++;
    }
    free(lab);
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

/* The points, one series per class that has any (a key entry names only
 * what is drawn): under a resolving front, resolved ones filled, the others
 * hollow, the cheapest front point a filled square; otherwise all filled. */
static void gp_points(FILE *f, const cost_axis *ax, const int *cls)
{
    static const struct { int pt; double ps; const char *title; } look[PT_CLASSES] = {
        [PT_NOT_RESOLVED] = {6, 1.6, "not resolved: within seed noise of a front point"},
        [PT_RESOLVED] = {7, 1.3, "resolved from its front neighbours"},
        [PT_NOTHING_TO_RESOLVE] = {5, 1.2, "cheapest on the front (no cheaper point to resolve from)"},
    };
    if (!ax->resolves) {
        fprintf(f, "  plot \"%s.dat\" using 1:2:3 with yerrorbars pt 7 ps 1.3 lw 1.5 "
                "lc rgb \"#1f5fa8\" title \"mean over seeds, 95 %% interval\", \\\n", ax->base);
        return;
    }
    int any = 0;
    for (int c = 0; c < PT_CLASSES; c++) any |= cls[c] > 0;
    for (int c = 0, first = 1; c < PT_CLASSES; c++) {
        if (!cls[c] && (any || c != PT_RESOLVED)) continue;
        char file[80];   /* "" after the first: the same file */
        snprintf(file, sizeof file, "%s%s", first ? ax->base : "", first ? ".dat" : "");
        fprintf(f, "%s\"%s\" using 1:($8 == %d ? $2 : NaN):3 with yerrorbars pt %d ps %.1f "
                "lw 1.5 lc rgb \"#1f5fa8\" title \"%s\", \\\n", first ? "  plot " : "       ",
                file, c, look[c].pt, look[c].ps, look[c].title);
        first = 0;
    }
}

/* Returns the points drawn. Without any (an older summary lacks the
 * cost), no script but the bytes-held one, which is always written. */
static int write_tradeoff(const al_report_analysis *A, const cost_axis *ax, al_err *e)
{
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96], name[64];
    int cls[PT_CLASSES] = {0};
    int n = write_tradeoff_data(A, ax, cls, e);
    if (n < 0 || (n == 0 && ax->cost != AL_COST_HELD)) return n;
    snprintf(name, sizeof name, "%s.gp", ax->base);
    FILE *f = al_report_open(A, name, path, tmp, e);
    if (!f) return -1;
    al_report_gp_header(f, ax->base);
    al_report_gp_terminal(f, "1000,700");
    fprintf(f, "  set title \"%s: %s against %s (mean over seeds, 95 %% intervals)\"\n"
            "  set xlabel \"%s\"\n"
            "  set ylabel \"%s%s\"\n  set logscale x %d\n  set grid\n  set key %s\n"
            "  set offsets graph 0.08, graph 0.15, graph 0.08, graph 0.08\n", A->mk.name,
            A->metric, ax->what, ax->xlabel, A->metric, A->use_acc ? "" : " (nats/token)",
            ax->log_base, A->use_acc ? "bottom right" : "top right");
    if (ax->cost != AL_COST_FLOPS)   /* bytes as 16 kB, 1 MB, not 1.04858e+06 */
        fputs("  set format x \"%.0s %cB\"\n", f);
    gp_points(f, ax, cls);
    fprintf(f, "       \"\" using 1:2:4 with labels left offset char 1,0.7 notitle, \\\n"
            "       \"%s\" using 1:2 with steps lw 2 dt 2 lc rgb \"#c03030\" "
            "title \"Pareto front (means)\"\n  unset output\n}\n", ax->front);
    return al_commit_atomic(f, tmp, path, e) ? -1 : n;
}

/* ------------------------------------------------------------ curves */

/* A configuration's curve (al_report_group_curve) with the lowest and
 * highest of its seeds at each point: the spread the curves plot draws as
 * a band. */
typedef struct curve {
    int n;
    double *step, *val, *lo, *hi;   /* n each (NULL when n is 0) */
} curve;

/* Add one trial's metrics.csv to cv (its step column fixed by the first). */
static void curve_add(curve *cv, int *cnt, const al_csv *m, int cs, int cv_col)
{
    if (!cv->n) {
        cv->n = m->n_rows;
        cv->step = al_calloc((size_t)cv->n + 1, sizeof *cv->step);
        cv->val = al_calloc((size_t)cv->n + 1, sizeof *cv->val);
        cv->lo = al_calloc((size_t)cv->n + 1, sizeof *cv->lo);
        cv->hi = al_calloc((size_t)cv->n + 1, sizeof *cv->hi);
        for (int r = 0; r < cv->n; r++) {
            cv->step[r] = atof(m->cells[r][cs]);
            cv->lo[r] = INFINITY, cv->hi[r] = -INFINITY;
        }
    }
    for (int r = 0; r < cv->n && r < m->n_rows; r++) {
        if (atof(m->cells[r][cs]) != cv->step[r] || !m->cells[r][cv_col][0]) continue;
        double v = atof(m->cells[r][cv_col]);
        cv->val[r] += v;
        cv->lo[r] = fmin(cv->lo[r], v), cv->hi[r] = fmax(cv->hi[r], v);
        cnt[r]++;
    }
}

static curve group_curve(const al_report_analysis *A, const group *g)
{
    curve cv = {0};
    int *cnt = NULL;
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
        int cs = al_csv_col(&m, "step"), cvl = al_csv_col(&m, "val_loss");
        if (cs >= 0 && cvl >= 0 && (cv.n || m.n_rows)) {
            if (!cv.n && m.n_rows) cnt = al_calloc((size_t)m.n_rows + 1, sizeof *cnt);
            curve_add(&cv, cnt, &m, cs, cvl);
        }
        al_csv_free(&m);
    }
    for (int r = 0; r < cv.n; r++) {
        cv.val[r] = cnt[r] ? cv.val[r] / cnt[r] : NAN;
        if (!cnt[r]) cv.lo[r] = cv.hi[r] = NAN;
    }
    free(cnt);
    return cv;
}

static void curve_free(curve *cv)
{
    free(cv->step), free(cv->val), free(cv->lo), free(cv->hi);
}

int al_report_group_curve(const al_report_analysis *A, const group *g, double **step, double **val,
                          double **lo, double **hi)
{
    curve cv = group_curve(A, g);
    *step = cv.step, *val = cv.val;
    if (lo) *lo = cv.lo;
    else free(cv.lo);
    if (hi) *hi = cv.hi;
    else free(cv.hi);
    return cv.n;
}

int al_report_tokens_per_step_differ(const al_report_analysis *A)
{
    double first = NAN;
    int seen = 0;
    for (int k = 0; k < A->n_groups; k++) {
        double t = A->g[k].first->tokens_per_step;
        if (!A->g[k].n_ok) continue;
        if (seen++ && !(t == first) && !(isnan(t) && isnan(first))) return 1;
        first = t;
    }
    return 0;
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
    fputs("# step tokens val_loss lowest highest: one block per configuration, the mean over\n"
          "# seeds and the lowest and highest seed at each step\n", f);
    for (int k = 0; k < A->n_groups; k++) {
        curve cv = group_curve(A, &A->g[k]);
        int wrote = 0;
        double tps = A->g[k].first->tokens_per_step;
        for (int r = 0; r < cv.n; r++) {
            if (isnan(cv.val[r])) continue;
            if (!wrote++) fprintf(f, "%s# %s\n", blocks ? "\n\n" : "", A->g[k].first->group);
            fprintf(f, "%.0f %.9g %.9g %.9g %.9g\n", cv.step[r],
                    isnan(tps) ? cv.step[r] : cv.step[r] * tps, cv.val[r], cv.lo[r], cv.hi[r]);
            if (r == 1 && cv.n > 2 && !(cv.hi[r] <= *ytop)) *ytop = cv.hi[r];
        }
        if (wrote) which[blocks++] = k;
        curve_free(&cv);
    }
    return al_commit_atomic(f, tmp, path, e) ? -1 : blocks;
}

/* Curve colours, dark enough to read on white and apart from each other
 * (no yellow): block b takes colour b modulo their number. */
static const char *const curve_colours[] = {
    "#1f5fa8", "#c03030", "#2a8a3a", "#7a3fa0", "#d06a00",
    "#107e86", "#8a5a2b", "#c2378a", "#505050", "#1a1a80",
};
#define N_CURVE_COLOURS ((int)(sizeof curve_colours / sizeof *curve_colours))

const char *al_report_curve_colour(int b)
{
    return curve_colours[b % N_CURVE_COLOURS];
}

/* Each configuration: its seeds' spread as a faint band of its colour,
 * then the mean as a line over it. */
static void gp_curve_plot(FILE *f, const al_report_analysis *A, const int *which, int n, int xcol)
{
    fputs("  plot ", f);
    for (int b = 0; b < n; b++)
        fprintf(f, "%s\"curves.dat\" index %d using %d:4:5 with filledcurves "
                "fs transparent solid 0.18 noborder lc rgb \"%s\" notitle, \\\n"
                "       \"curves.dat\" index %d using %d:3 with linespoints pt 7 ps 0.5 lw 1.5 "
                "lc rgb \"%s\" title \"%s\"", b ? ", \\\n       " : "", b, xcol,
                al_report_curve_colour(b), b, xcol, al_report_curve_colour(b),
                A->g[which[b]].first->group);
    fputs("\n", f);
}

/* One panel by optimizer step when every configuration trains the same
 * tokens per step (a panel by tokens would repeat it with another axis);
 * two, by step and by tokens, when they differ. */
static int write_curves(const al_report_analysis *A, al_err *e)
{
    int *which = al_calloc((size_t)A->n_groups + 1, sizeof *which);
    int two = al_report_tokens_per_step_differ(A);
    double ytop;
    int n = write_curve_data(A, which, &ytop, e);
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96];
    FILE *f = n < 0 ? NULL : al_report_open(A, "curves.gp", path, tmp, e);
    if (!f) {
        free(which);
        return -1;
    }
    al_report_gp_header(f, "curves");
    al_report_gp_terminal(f, two ? "1400,600" : "1000,600");
    const char *title = "validation loss (mean over seeds; band: lowest to highest seed)";
    if (two) fprintf(f, "  set multiplot layout 1,2 title \"%s: %s\"\n", A->mk.name, title);
    else fprintf(f, "  set title \"%s: %s\"\n", A->mk.name, title);
    fprintf(f, "  set ylabel \"validation loss (nats/token)\"\n"
            "  set grid\n  set key top right\n  set xlabel \"optimizer step%s\"\n",
            two ? "" : " (every configuration trains the same tokens per step)");
    if (!isnan(ytop)) fprintf(f, "  set yrange [*:%.4g]\n", ytop * 1.02);
    if (n) gp_curve_plot(f, A, which, n, 1);
    else   /* still a picture, saying why it is empty (a line above its range) */
        fputs("  set label 1 \"no validation curves (no metrics.csv with val_loss)\" at graph "
              "0.5, graph 0.5 center\n  set xrange [0:1]\n  set yrange [0:1]\n"
              "  plot 2 notitle\n", f);
    if (two) {
        fputs("  set xlabel \"tokens trained\"\n  set format x \"%.1s%c\"\n", f);
        if (n) gp_curve_plot(f, A, which, n, 2);
        fputs("  unset multiplot\n", f);
    }
    fputs("  unset output\n}\n", f);
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

/* The bytes-held axis of this summary: at the report context (the cache
 * and any state, al_report_held) where it has it, else per token. */
static cost_axis held_axis(const al_report_analysis *A, char *xlabel, size_t n)
{
    cost_axis ax = axes[AL_COST_HELD];
    long c = al_report_held_context(A);
    if (!c) return ax;
    snprintf(xlabel, n, "bytes held at %ld tokens: KV cache and state (f32, all layers; log "
             "scale)", c);
    ax.column = "kv_bytes_at_context", ax.what = "memory held", ax.xlabel = xlabel;
    return ax;
}

int al_report_draw_plots(const al_report_analysis *A, int *plots, al_err *e)
{
    char log[DIR_LEN + 32], xlabel[160];
    int drawn[AL_REPORT_NCOSTS];
    cost_axis held = held_axis(A, xlabel, sizeof xlabel);
    for (int k = 0; k < AL_REPORT_NCOSTS; k++)
        if ((drawn[k] = write_tradeoff(A, k == AL_COST_HELD ? &held : &axes[k], e)) < 0)
            return -1;
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
