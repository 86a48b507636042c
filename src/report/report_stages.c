/*
 * report_stages.c - what a staged sweep adds to the report: every
 * configuration that started from another stage's checkpoints (a summary
 * row with an `upstream`), its converted model before any update (the val
 * loss at step 0), after uptraining, and what uptraining cost (steps, and
 * their share of the upstream run's); beside the configuration it came from
 * and the one trained from scratch with the same attention. One table and
 * one plot, stages.png, of validation loss against KV-cache size.
 *
 * Validation, not test, loss throughout this section: the converted model
 * is scored at step 0 on the validation batches only, and the same batches
 * then score the uptrained and the base models, so every point is the same
 * measurement. (Nothing in a stage is selected on validation.)
 */
#include "report_stages.h"
#include "report_plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One configuration that started from another stage's checkpoints. */
typedef struct up {
    const row *first;
    const char *from;          /* the upstream configuration */
    const char *method;        /* train.init_convert */
    double steps, base_steps;  /* its train.steps, the upstream's */
    al_stat conv, val;         /* step-0 and final val loss over its ok trials */
    const group *base, *scratch;
} up;

typedef struct ups {
    int n;
    up *u;
} ups;

static const char *cell(const al_report_analysis *A, const row *w, const char *col)
{
    return al_csv_cell(&A->sm.t, (int)(w - A->sm.rows), col);
}

static const row *find_trial(const al_report_analysis *A, const char *id)
{
    for (int i = 0; i < A->sm.n; i++)
        if (strcmp(A->sm.rows[i].trial, id) == 0) return &A->sm.rows[i];
    return NULL;
}

static const group *find_group(const al_report_analysis *A, const char *name)
{
    for (int k = 0; k < A->n_groups; k++)
        if (strcmp(A->g[k].first->group, name) == 0) return &A->g[k];
    return NULL;
}

/* The same variant with the same settings (and cache). */
static int same_attention(const al_report_analysis *A, const row *a, const row *b)
{
    if (strcmp(a->variant, b->variant) != 0 || a->kv != b->kv) return 0;
    for (int k = 0; k < A->sm.n_set; k++)
        if (strcmp(al_report_setting(&A->sm, a, k), al_report_setting(&A->sm, b, k)) != 0)
            return 0;
    return 1;
}

/* The configuration with w's attention trained from scratch (no upstream). */
static const group *scratch_of(const al_report_analysis *A, const row *w)
{
    for (int k = 0; k < A->n_groups; k++) {
        const row *f = A->g[k].first;
        if (!cell(A, f, "upstream")[0] && same_attention(A, f, w)) return &A->g[k];
    }
    return NULL;
}

static double num(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    return s[0] && !*end ? v : NAN;
}

/* Step-0 and final val loss of the ok trials of configuration u. */
static void up_stats(const al_report_analysis *A, up *u)
{
    double *a = al_malloc((size_t)A->sm.n * sizeof *a), *b = al_malloc((size_t)A->sm.n * sizeof *b);
    int n = 0;
    for (int i = 0; i < A->sm.n; i++) {
        const row *w = &A->sm.rows[i];
        if (strcmp(w->group, u->first->group) != 0 || !al_report_row_ok(w)) continue;
        a[n] = num(cell(A, w, "init_val_loss"));
        b[n++] = w->val_loss;
    }
    al_stat_of(a, n, &u->conv);
    al_stat_of(b, n, &u->val);
    free(a), free(b);
}

static void collect(const al_report_analysis *A, ups *U)
{
    memset(U, 0, sizeof *U);
    U->u = al_calloc((size_t)A->sm.n + 1, sizeof *U->u);
    for (int i = 0; i < A->sm.n; i++) {
        const row *w = &A->sm.rows[i], *from = find_trial(A, cell(A, w, "upstream"));
        if (!from) continue;
        int seen = 0;
        for (int k = 0; k < U->n && !seen; k++) seen = strcmp(U->u[k].first->group, w->group) == 0;
        if (seen) continue;
        up *u = &U->u[U->n++];
        u->first = w, u->from = from->group, u->method = cell(A, w, "init_convert");
        u->steps = num(cell(A, w, "steps"));
        u->base_steps = num(cell(A, w, "upstream_steps"));
        u->base = find_group(A, from->group);
        u->scratch = scratch_of(A, w);
        up_stats(A, u);
    }
}

/* ------------------------------------------------------------ plot */

/* Converted points of one conversion (the same `from`, attention and
 * method, whatever the uptraining) are one point: the first such u. */
static int first_of_conversion(const al_report_analysis *A, const ups *U, int k)
{
    const up *a = &U->u[k];
    for (int j = 0; j < k; j++) {
        const up *b = &U->u[j];
        if (strcmp(a->from, b->from) == 0 && strcmp(a->method, b->method) == 0 &&
            same_attention(A, a->first, b->first))
            return 0;
    }
    return 1;
}

/* Methods side by side at one cache size: a small shift on the log axis;
 * the shifted ones label to the right, the others to the left. */
static double shift(const char *method)
{
    return !strcmp(method, "random") ? 1.08 : !strcmp(method, "first") ? 1.04 : 1.0;
}

static int right_side(const char *method) { return shift(method) > 1.0; }

static double ci(const al_stat *s) { return s->n > 1 ? s->ci95 : 0.0; }

/* "75 steps (5%)": the uptraining and its share of the upstream run's. */
static void fmt_cost(char *buf, size_t n, const up *u, const char *prefix)
{
    if (u->base_steps > 0)
        snprintf(buf, n, "%s%.0f steps (%.3g%%)", prefix, u->steps,
                 100.0 * u->steps / u->base_steps);
    else
        snprintf(buf, n, "%s%.0f steps", prefix, u->steps);
}

/* stages.dat: index 0 the configurations trained from scratch, 1 the
 * converted models (step 0), 2 the uptrained ones, 3 arrows from each
 * converted point to its uptrained one. */
static int write_data(const al_report_analysis *A, const ups *U, al_err *e)
{
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96], cost[64];
    FILE *f = al_report_open(A, "stages.dat", path, tmp, e);
    if (!f) return -1;
    fputs("# kv_bytes_per_token val_loss ci95 \"label\" label_right   (index 0: from scratch, "
          "1: converted at step 0, 2: uptrained, 3: arrows x y dx dy)\n", f);
    for (int k = 0; k < A->n_groups; k++) {
        const group *g = &A->g[k];
        if (!cell(A, g->first, "upstream")[0] && isfinite(g->quality.val.mean) && g->first->kv > 0)
            fprintf(f, "%.0f %.9g %.9g \"%s\"\n", g->first->kv, g->quality.val.mean,
                    ci(&g->quality.val), g->first->group);
    }
    fputs("\n\n", f);
    for (int k = 0; k < U->n; k++)
        if (first_of_conversion(A, U, k) && isfinite(U->u[k].conv.mean))
            fprintf(f, "%.9g %.9g %.9g \"%s\" %d\n", U->u[k].first->kv * shift(U->u[k].method),
                    U->u[k].conv.mean, ci(&U->u[k].conv), U->u[k].method,
                    right_side(U->u[k].method));
    fputs("\n\n", f);
    for (int k = 0; k < U->n; k++) {
        const up *u = &U->u[k];
        fmt_cost(cost, sizeof cost, u, "+");
        if (isfinite(u->val.mean))
            fprintf(f, "%.9g %.9g %.9g \"%s %s\" %d\n", u->first->kv * shift(u->method),
                    u->val.mean, ci(&u->val), u->method, cost, right_side(u->method));
    }
    fputs("\n\n", f);
    for (int k = 0; k < U->n; k++) {
        const up *u = &U->u[k];
        if (isfinite(u->val.mean) && isfinite(u->conv.mean))
            fprintf(f, "%.9g %.9g 0 %.9g\n", u->first->kv * shift(u->method), u->conv.mean,
                    u->val.mean - u->conv.mean);
    }
    return al_commit_atomic(f, tmp, path, e);
}

static int write_script(const al_report_analysis *A, al_err *e)
{
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96];
    FILE *f = al_report_open(A, "stages.gp", path, tmp, e);
    if (!f) return -1;
    al_report_gp_header(f, "stages");
    al_report_gp_terminal(f, "1100,750");
    fprintf(f, "  set title \"%s: converted and uptrained models (val loss, mean over seeds, "
            "95 %% intervals)\"\n"
            "  set xlabel \"KV-cache bytes per token (f32, all layers; log scale)\"\n"
            "  set ylabel \"validation loss (nats/token)\"\n  set logscale x 2\n  set grid\n"
            "  set key top right\n  set offsets graph 0.25, graph 0.3, graph 0.08, graph 0.08\n"
            "  plot \"stages.dat\" index 3 using 1:2:3:4 with vectors nohead dt 3 lc rgb "
            "\"#888888\" notitle, \\\n"
            "       \"\" index 0 using 1:2:3 with yerrorbars pt 7 ps 1.4 lc rgb \"#1f5fa8\" "
            "title \"trained from scratch\", \\\n"
            "       \"\" index 0 using 1:2:4 with labels left offset char 1,0.8 notitle, \\\n"
            "       \"\" index 1 using 1:2:3 with yerrorbars pt 8 ps 1.4 lc rgb \"#c03030\" "
            "title \"converted (step 0, before uptraining)\", \\\n"
            "       \"\" index 1 using 1:($5 == 1 ? NaN : $2):4 with labels right offset char -1,0 "
            "notitle, \\\n"
            "       \"\" index 1 using 1:($5 == 1 ? $2 : NaN):4 with labels left offset char 1,0 "
            "notitle, \\\n"
            "       \"\" index 2 using 1:2:3 with yerrorbars pt 9 ps 1.4 lc rgb \"#208040\" "
            "title \"uptrained\", \\\n"
            "       \"\" index 2 using 1:($5 == 1 ? NaN : $2):4 with labels right offset char -1,0 "
            "font \",9\" notitle, \\\n"
            "       \"\" index 2 using 1:($5 == 1 ? $2 : NaN):4 with labels left offset char 1,0 "
            "font \",9\" notitle\n  unset output\n}\n", A->mk.name);
    return al_commit_atomic(f, tmp, path, e);
}

int al_report_stages_plot(const al_report_analysis *A, int plots, al_err *e)
{
    ups U;
    collect(A, &U);
    int rc = 0;
    if (U.n && (write_data(A, &U, e) || write_script(A, e))) rc = -1;
    if (rc == 0 && U.n && plots == AL_PLOTS_DRAWN && al_report_gnuplot(A, "stages") !=
        AL_PLOTS_DRAWN)
        fprintf(stderr, "attnlab: report: gnuplot could not draw stages.png (see "
                "gnuplot.log)\n");
    free(U.u);
    return rc;
}

/* ------------------------------------------------------------ markdown */

static void fmt_stat(char *buf, size_t n, const al_stat *s)
{
    if (isnan(s->mean)) snprintf(buf, n, "-");
    else if (s->n > 1) snprintf(buf, n, "%.4f ± %.4f", s->mean, s->ci95);
    else snprintf(buf, n, "%.4f", s->mean);
}

/* "gqa, n_kv_head 2": the variant and the settings it has. */
static void fmt_attention(char *buf, size_t n, const al_report_analysis *A, const row *w)
{
    size_t len = (size_t)snprintf(buf, n, "%s", w->variant);
    for (int k = 0; k < A->sm.n_set && len < n; k++) {
        const char *v = al_report_setting(&A->sm, w, k);
        if (v[0])
            len += (size_t)snprintf(buf + len, n - len, ", %s %s",
                                    al_report_setting_name(&A->sm, k), v);
    }
}

static void md_row(FILE *f, const al_report_analysis *A, const up *u)
{
    char conv[64], val[64], base[64], scr[64], cost[64], att[512];
    fmt_stat(conv, sizeof conv, &u->conv);
    fmt_stat(val, sizeof val, &u->val);
    fmt_stat(base, sizeof base, u->base ? &u->base->quality.val : &(al_stat){0, NAN, NAN, NAN});
    fmt_stat(scr, sizeof scr, u->scratch ? &u->scratch->quality.val : &(al_stat){0, NAN, NAN, NAN});
    fmt_cost(cost, sizeof cost, u, "");
    const row *w = u->first;
    fmt_attention(att, sizeof att, A, w);
    fprintf(f, "| %s | %s | %s | %.0f | %s | %s | %s | %s | %s (%s) | %s |\n", w->group, u->from,
            att, w->kv, u->method, cost, conv, val, scr,
            u->scratch ? u->scratch->first->group : "none", base);
}

void al_report_stages_md(FILE *f, const al_report_analysis *A, int plots)
{
    ups U;
    collect(A, &U);
    if (!U.n) return free(U.u);
    fputs("\n## Converted and uptrained\n\n"
          "Configurations that started from another stage's checkpoints, converted by the "
          "method shown (`attnlab convert`; `train.init_convert`), then trained for the steps "
          "shown (their share of the run they started from in brackets). *Converted* is the "
          "model before any update (step 0), *uptrained* after; *scratch* is the "
          "configuration with the same attention trained from a random init for its full "
          "budget, *base* the one converted from. **Validation loss** throughout (mean ± 95 % "
          "t-interval over seeds): the converted model is only scored on the validation "
          "batches, and the same batches score every column.\n\n"
          "| configuration | from | attention | KV bytes/token | method | uptraining | "
          "converted (step 0) | uptrained | scratch | base |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n", f);
    for (int k = 0; k < U.n; k++) md_row(f, A, &U.u[k]);
    if (plots == AL_PLOTS_DRAWN)
        fputs("\n![converted and uptrained models](stages.png)\n\nBlue: trained from "
              "scratch; red: converted, before uptraining; green: uptrained, labelled with "
              "the method and the uptraining cost (a dotted line joins each to its converted "
              "start). Methods sit slightly apart on the cache axis so that their points do "
              "not overlap. [SVG](stages.svg); data and script: `stages.dat`, `stages.gp`.\n",
              f);
    free(U.u);
}
