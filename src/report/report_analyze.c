/*
 * report_analyze.c - the analysis: a results directory's trials become
 * configurations with their statistics, verdicts and Pareto front, and a
 * sweep in rounds learns whether another round of seeds is due. Reads
 * files (report_summary.c, report_trend.c), writes none: the writers
 * (report_md.c, report_configs.c, report_plot.c, ...) read its result.
 *
 * Every number it computes about quality is a statement about seeds: a
 * mean with its sample sd and 95 % t-interval, a difference paired by seed
 * with its interval, and whether that interval excludes 0 ("resolved").
 * See report_rows.h for how trials become configurations and seeds.
 */
#include "al_report.h"
#include "report_files.h"
#include "report_rows.h"
#include "report_scaling.h"
#include "report_trend.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ Pareto */

static int better_eq(double a, double b, int maximize) { return maximize ? a >= b : a <= b; }

int al_pareto_front(int n, const double *cost, const double *quality, int maximize,
                    int *on_front)
{
    int count = 0;
    for (int i = 0; i < n; i++) {
        on_front[i] = !isnan(cost[i]) && !isnan(quality[i]);
        for (int j = 0; j < n && on_front[i]; j++) {
            if (j == i || isnan(cost[j]) || isnan(quality[j])) continue;
            int weak = cost[j] <= cost[i] && better_eq(quality[j], quality[i], maximize);
            int strict = cost[j] < cost[i] || quality[j] != quality[i];
            if (weak && strict) on_front[i] = 0;
        }
        count += on_front[i];
    }
    return count;
}

/* ------------------------------------------------------------ selection */

static int is_final(const row *w)
{
    return al_report_row_ok(w) || strcmp(w->status, "diverged") == 0;
}

/* The validation result select compares, signed so that smaller is better. */
static double select_score(const row *w)
{
    if (strcmp(w->select_by, "val_accuracy") == 0) return -w->val_acc;
    if (strcmp(w->select_by, "best_val_loss") == 0) return w->best_val_loss;
    return w->val_loss;
}

static int same_seed(const row *a, const row *b)
{
    return a->seed == b->seed || (isnan(a->seed) && a == b);
}

/* For every configuration and seed, mark the trial that stands for it:
 * among the trials that differ only in the select axes, the one with the
 * best validation result (ties: the first in the summary). A seed is left
 * out while any of its candidates has not finished (a later run could
 * change the choice), and when none of them ended ok. */
static void select_trials(al_report_analysis *A)
{
    for (int i = 0; i < A->sm.n; i++) {
        row *w = &A->sm.rows[i];
        int best = -1, open = 0, first = 1;
        for (int j = 0; j < A->sm.n; j++) {
            const row *c = &A->sm.rows[j];
            if (strcmp(c->group, w->group) != 0 || !same_seed(c, w)) continue;
            if (j < i) first = 0;
            open |= !is_final(c);
            if (al_report_row_ok(c) && !isnan(select_score(c)) &&
                (best < 0 || select_score(c) < select_score(&A->sm.rows[best])))
                best = j;
        }
        w->selected = !open && best == i;
        if (first && open) {   /* count each open seed once, at its first trial */
            for (int k = 0; k < A->n_groups; k++)
                if (strcmp(A->g[k].first->group, w->group) == 0) A->g[k].n_open++;
        }
    }
}

/* ------------------------------------------------------------ groups */

static void build_groups(al_report_analysis *A)
{
    A->g = al_calloc((size_t)A->sm.n + 1, sizeof *A->g);
    for (int i = 0; i < A->sm.n; i++) {
        const row *w = &A->sm.rows[i];
        int k = 0;
        while (k < A->n_groups && strcmp(A->g[k].first->group, w->group) != 0) k++;
        if (k == A->n_groups) A->g[A->n_groups++].first = w;
        A->g[k].n++;
        A->g[k].n_ok += al_report_row_ok(w);
        A->n_ok += al_report_row_ok(w);
        A->any_select |= w->tuned[0] != 0;
    }
}

/* The metric: accuracy when every configuration that finished has one
 * (recall tasks), else loss; on the test split when the trials have one,
 * else (summaries from before the test split) on validation. */
static void choose_metric(al_report_analysis *A)
{
    int all_acc = 1, any = 0;
    for (int i = 0; i < A->sm.n; i++) {
        const row *w = &A->sm.rows[i];
        if (!w->selected) continue;
        any = 1;
        all_acc &= !isnan(w->val_acc) || !isnan(w->test_acc);
        A->use_test |= !isnan(w->test_loss);
    }
    A->use_acc = any && all_acc;
    snprintf(A->metric, sizeof A->metric, "%s %s", A->use_test ? "test" : "val",
             A->use_acc ? "accuracy" : "loss");
    for (int i = 0; i < A->sm.n; i++) {
        row *w = &A->sm.rows[i];
        double acc = A->use_test ? w->test_acc : w->val_acc;
        double loss = A->use_test ? w->test_loss : w->val_loss;
        w->q = w->selected ? (A->use_acc ? acc : loss) : NAN;
    }
}

/* Statistic of field `off` over a group's selected trials. */
static void group_stat(const al_report_analysis *A, const group *g, size_t off, al_stat *s)
{
    double *x = al_calloc((size_t)A->sm.n + 1, sizeof *x);
    int n = 0;
    for (int i = 0; i < A->sm.n; i++) {
        const row *w = &A->sm.rows[i];
        if (w->selected && strcmp(w->group, g->first->group) == 0)
            x[n++] = *(const double *)((const char *)w + off);
    }
    al_stat_of(x, n, s);
    free(x);
}

/* "lr1.0e-3 x2, lr3.0e-3 x1": the select axes' values chosen. */
static void tuned_counts(const al_report_analysis *A, group *g)
{
    g->tuned[0] = 0;
    for (int i = 0; i < A->sm.n; i++) {
        const row *w = &A->sm.rows[i];
        if (!w->selected || !w->tuned[0] || strcmp(w->group, g->first->group) != 0) continue;
        int seen = 0, count = 0;
        for (int j = 0; j < A->sm.n; j++) {
            const row *v = &A->sm.rows[j];
            if (!v->selected || strcmp(v->group, w->group) || strcmp(v->tuned, w->tuned)) continue;
            seen |= j < i;
            count++;
        }
        size_t len = strlen(g->tuned);
        if (!seen)
            snprintf(g->tuned + len, sizeof g->tuned - len, "%s%s ×%d", len ? "; " : "",
                     w->tuned, count);
    }
}

/* Where a group's trials ran: "" when all on one CPU model, OpenBLAS core
 * and thread count (or none recorded: older summaries), else each distinct
 * "cpu / core / N threads" and how many trials ran so. */
static void machines(const al_report_analysis *A, group *g)
{
    int kinds = 0;
    g->machine[0] = 0;
    for (int i = 0; i < A->sm.n; i++) {
        const row *w = &A->sm.rows[i], *v = NULL;
        if (!w->selected || strcmp(w->group, g->first->group) != 0 || !w->cpu[0]) continue;
        int count = 0, seen = 0;
        for (int j = 0; j < A->sm.n; j++) {
            v = &A->sm.rows[j];
            if (!v->selected || strcmp(v->group, w->group) || strcmp(v->cpu, w->cpu) ||
                strcmp(v->blas_core, w->blas_core) || strcmp(v->threads, w->threads))
                continue;
            seen |= j < i;
            count++;
        }
        if (seen) continue;
        size_t len = strlen(g->machine);
        snprintf(g->machine + len, sizeof g->machine - len, "%s%s / %s / %s threads ×%d",
                 len ? "; " : "", w->cpu, w->blas_core, w->threads, count);
        kinds++;
    }
    if (kinds < 2) g->machine[0] = 0;
}

static void group_stats(al_report_analysis *A)
{
    for (int k = 0; k < A->n_groups; k++) {
        group *g = &A->g[k];
        al_stat s;
        group_stat(A, g, offsetof(row, q), &g->quality.q);
        group_stat(A, g, A->use_test ? offsetof(row, test_loss) : offsetof(row, val_loss),
                   &g->quality.loss);
        group_stat(A, g, A->use_test ? offsetof(row, test_acc) : offsetof(row, val_acc),
                   &g->quality.acc);
        group_stat(A, g, offsetof(row, val_loss), &g->quality.val);
        group_stat(A, g, offsetof(row, train_loss), &s);
        g->quality.train_loss = s.mean;
        group_stat(A, g, offsetof(row, tok_s), &s);
        g->quality.tok_s = s.mean;
        for (int i = 0; i < A->sm.n; i++) {
            const row *w = &A->sm.rows[i];
            double acc = A->use_test ? w->test_acc : w->val_acc;
            g->solved.seeds += w->selected && strcmp(w->group, g->first->group) == 0 &&
                         acc >= AL_SOLVED_ACCURACY;
        }
        tuned_counts(A, g);
        machines(A, g);
    }
}

/* The family: every comparison with the baseline, Holm-corrected at 5 %. */
static void holm_verdicts(al_report_analysis *A)
{
    double *p = al_calloc((size_t)A->n_groups + 1, sizeof *p);
    int *rej = al_calloc((size_t)A->n_groups + 1, sizeof *rej), m = 0;
    for (int k = 0; k < A->n_groups; k++)
        if (!A->g[k].is_base) p[m++] = A->g[k].vs.p;
    al_holm(m, p, 0.05, rej);
    for (int k = 0, i = 0; k < A->n_groups; k++)
        if (!A->g[k].is_base) A->g[k].vs.resolved = rej[i++];
    free(p), free(rej);
}

/* Recall tasks: do the seeds solved differ from the baseline's? Exact
 * McNemar on the seeds both have, Holm over the same family. Why beside
 * the paired t test: one seed left on the plateau can widen the interval
 * of the mean accuracy past 0 while 5 of 10 seeds failing where the
 * baseline solved all is no chance result (mqar_variants: mla-16). */
static void solved_verdicts(al_report_analysis *A)
{
    double *p = al_calloc((size_t)A->n_groups + 1, sizeof *p);
    int *rej = al_calloc((size_t)A->n_groups + 1, sizeof *rej), m = 0;
    for (int k = 0; k < A->n_groups; k++) {
        group *g = &A->g[k];
        g->solved.p = NAN;
        if (g->is_base || !A->use_acc) continue;
        al_report_solved_pairs(A, &A->g[g->base], g, &g->solved.only_base,
                               &g->solved.only_this);
        p[m++] = g->solved.p = al_mcnemar_p(g->solved.only_base, g->solved.only_this);
    }
    al_holm(m, p, 0.05, rej);
    for (int k = 0, i = 0; k < A->n_groups; k++)
        if (!A->g[k].is_base && A->use_acc) A->g[k].solved.holm = rej[i++];
    free(p), free(rej);
}

/* Selected metric of group g at seed value s (NAN: none). */
static double seed_q(const al_report_analysis *A, const group *g, double s)
{
    for (int i = 0; i < A->sm.n; i++) {
        const row *w = &A->sm.rows[i];
        if (w->selected && w->seed == s && strcmp(w->group, g->first->group) == 0) return w->q;
    }
    return NAN;
}

/* A sweep run in rounds (seeds 1..max): the rule of al_seq_decide over
 * the looks the finished seeds reach. A look counts once every
 * configuration has ended each of its seeds (none is open). Sets the
 * sequential seeds decision (A->seq), which the sweep reads through
 * al_report_seeds_due before it trains another round. */
static void sequential_verdicts(al_report_analysis *A, const group *base)
{
    int m = 0, open = 0, reached = 0;
    for (int k = 0; k < A->n_groups; k++) open |= A->g[k].n_open;
    for (int s = 1; s <= A->seq.plan.max; s++)
        if (!isnan(seed_q(A, base, s))) reached = s;
    double *x = al_calloc((size_t)(A->n_groups * reached) + 1, sizeof *x);
    int *res = al_calloc((size_t)A->n_groups + 1, sizeof *res);
    for (int k = 0; k < A->n_groups; k++) {
        if (A->g[k].is_base) continue;
        for (int s = 0; s < reached; s++)
            x[m * reached + s] = seed_q(A, &A->g[k], s + 1) -
                                 seed_q(A, &A->g[A->g[k].base], s + 1);
        m++;
    }
    A->seq.looks = open ? 0 : al_seq_decide(&A->seq.plan, m, x, reached, res);
    int all = 1;
    for (int k = 0, i = 0; k < A->n_groups; k++)
        if (!A->g[k].is_base) all &= A->g[k].vs.resolved = res[i++];
    A->seq.done = !open && (all || reached >= A->seq.plan.max);
    free(x), free(res);
}

/* Under sweep.scaling the summary marks a design at every size and
 * budget: g's baseline is the marked configuration in g's cell. */
static int same_cell(const row *a, const row *b)
{
    return (isnan(a->scaling_size) || a->scaling_size == b->scaling_size) &&
           (isnan(a->scaling_flops) || a->scaling_flops == b->scaling_flops);
}

static const char *or_empty(const char *s) { return s ? s : ""; }

/* The configuration the trial w started from ("" in a first stage or a
 * plain sweep): its upstream trial's group. */
static const char *upstream_group(const al_report_analysis *A, const row *w)
{
    const char *u = or_empty(w->upstream);
    for (int i = 0; u[0] && i < A->sm.n; i++)
        if (strcmp(A->sm.rows[i].trial, u) == 0) return A->sm.rows[i].group;
    return "";
}

/* Is b, a configuration the summary marks, g's own baseline? In g's cell,
 * in g's stage and from g's upstream configuration: a later stage's
 * sweep.baseline (say rope_scaling none) is compared within each
 * configuration it continues, never across them. */
static int baseline_for(const al_report_analysis *A, const group *b, const group *g)
{
    return b->first->baseline && same_cell(b->first, g->first) &&
           strcmp(or_empty(b->first->stage), or_empty(g->first->stage)) == 0 &&
           strcmp(upstream_group(A, b->first), upstream_group(A, g->first)) == 0;
}

/* The baseline: the configuration the summary marks (a first stage's
 * before a later one's), else the first; a group without one of its own
 * (baseline_for) is compared with it. */
static void baseline_deltas(al_report_analysis *A)
{
    group *base = NULL;
    for (int pass = 0; pass < 2 && !base; pass++)
        for (int k = 0; k < A->n_groups && !base; k++)
            if (A->g[k].first->baseline && (pass || !upstream_group(A, A->g[k].first)[0]))
                base = &A->g[k];
    if (!base && A->n_groups) base = &A->g[0];
    for (int k = 0; k < A->n_groups; k++) {
        group *g = &A->g[k], *cell = base;
        for (int j = 0; j < A->n_groups; j++)
            if (baseline_for(A, &A->g[j], g)) {
                cell = &A->g[j];
                break;
            }
        g->is_base = g == cell;
        g->base = (int)(cell - A->g);
        g->base_first = cell->first;
        if (g == cell) memset(&g->vs.delta, 0, sizeof g->vs.delta), g->vs.delta.mean = NAN;
        else al_report_paired(A, g, cell, &g->vs.delta);
        g->vs.p = g->is_base ? NAN : al_stat_p(&g->vs.delta);
        g->vs.seeds_needed = g->is_base ? 0
                             : al_seeds_needed(g->vs.delta.mean, g->vs.delta.sd, 0.8,
                                               AL_SEEDS_NEEDED_CAP);
    }
    if (base && A->seq.on) sequential_verdicts(A, base);
    else holm_verdicts(A);
    if (base) solved_verdicts(A), al_report_gap_trends(A);
}

/* ------------------------------------------------------------ the front */

/* The comparisons that decide a place on or off the front: for a front
 * configuration, against each cheaper front configuration; for one off
 * it, against each front configuration that dominates it. Appends the
 * pairs (i, j) to cmp and their p-values to p; returns the new count. */
static int front_comparisons(al_report_analysis *A, int i, int m, int (*cmp)[2], double *p)
{
    group *gi = &A->g[i];
    for (int j = 0; j < A->n_groups; j++) {
        group *gj = &A->g[j];
        if (gj == gi || !gj->front.on || !al_report_drawable(gj)) continue;
        double ci = al_report_held(gi->first), cj = al_report_held(gj->first);
        int relevant = gi->front.on ? cj < ci
                                 : cj <= ci && better_eq(gj->quality.q.mean, gi->quality.q.mean,
                                                         A->use_acc);
        if (!relevant) continue;
        al_stat d;
        al_report_paired(A, gi, gj, &d);
        cmp[m][0] = i, cmp[m][1] = j;
        p[m++] = al_stat_p(&d);
    }
    return m;
}

/* Is each place on or off the front beyond seed noise? Resolved when
 * every comparison that decides it is, after Holm over the family of all
 * those comparisons (of every configuration) at 5 %; otherwise `against`
 * names the first one it is not resolved from. */
static void resolve_front(al_report_analysis *A)
{
    int n = A->n_groups, m = 0, (*cmp)[2] = al_calloc((size_t)(n * n) + 1, sizeof *cmp);
    double *p = al_calloc((size_t)(n * n) + 1, sizeof *p);
    int *rej = al_calloc((size_t)(n * n) + 1, sizeof *rej);
    for (int i = 0; i < n; i++) {
        A->g[i].front.resolved = al_report_drawable(&A->g[i]);
        int m0 = m;
        if (al_report_drawable(&A->g[i])) m = front_comparisons(A, i, m, cmp, p);
        A->g[i].front.compared = m - m0;
    }
    al_holm(m, p, 0.05, rej);
    for (int c = 0; c < m; c++) {
        group *gi = &A->g[cmp[c][0]];
        if (rej[c] || !gi->front.resolved) continue;
        gi->front.resolved = 0;
        snprintf(gi->front.against, sizeof gi->front.against, "%s", A->g[cmp[c][1]].first->group);
    }
    free(cmp), free(p), free(rej);
}

static void mark_front(al_report_analysis *A)
{
    int n = A->n_groups, *on = al_calloc((size_t)n + 1, sizeof *on);
    double *cost = al_calloc((size_t)n + 1, sizeof *cost);
    double *q = al_calloc((size_t)n + 1, sizeof *q);
    for (int k = 0; k < n; k++) {
        cost[k] = al_report_drawable(&A->g[k]) ? al_report_held(A->g[k].first) : NAN;
        q[k] = A->g[k].quality.q.mean;
    }
    A->n_front = al_pareto_front(n, cost, q, A->use_acc, on);
    for (int k = 0; k < n; k++) A->g[k].front.on = A->g[k].front.on_cost[AL_COST_HELD] = on[k];
    resolve_front(A);
    for (int c = AL_COST_HELD + 1; c < AL_REPORT_NCOSTS; c++) {   /* each plot's own front */
        for (int k = 0; k < n; k++)
            cost[k] = al_report_drawable(&A->g[k]) ? al_report_cost_of(A->g[k].first, c) : NAN;
        al_pareto_front(n, cost, q, A->use_acc, on);
        for (int k = 0; k < n; k++) A->g[k].front.on_cost[c] = on[k];
    }
    free(on), free(cost), free(q);
}

/* Largest cache first, then better quality first: the order of A->g (the
 * tables show them cheapest first, al_report_table_order). */
static int by_cache(const void *a, const void *b, void *ctx)
{
    const group *x = a, *y = b;
    const al_report_analysis *A = ctx;
    double hx = al_report_held(x->first), hy = al_report_held(y->first);
    if (hx != hy) return hx < hy ? 1 : -1;
    double qx = A->use_acc ? -x->quality.q.mean : x->quality.q.mean;
    double qy = A->use_acc ? -y->quality.q.mean : y->quality.q.mean;
    if (isnan(qx) != isnan(qy)) return isnan(qx) ? 1 : -1;
    return qx < qy ? -1 : qx > qy;
}

/* ------------------------------------------------------------ public */

int al_report_analyze(const char *dir, al_report_analysis **out, al_err *e)
{
    *out = NULL;
    if (strlen(dir) >= DIR_LEN - 300) return al_errf(e, "%s: path too long", dir);
    al_report_analysis *A = al_calloc(1, sizeof *A);
    snprintf(A->dir, sizeof A->dir, "%s", dir);
    A->files = al_report_files_new();
    if (al_report_summary_read(dir, &A->sm, e)) {
        al_report_analysis_free(A);
        return -1;
    }
    al_report_read_marker(dir, &A->mk, &A->seq);
    build_groups(A);
    select_trials(A);
    choose_metric(A);
    group_stats(A);
    al_report_trends(A);
    baseline_deltas(A);
    mark_front(A);
    A->scaling = al_report_scaling_analyze(A);
    qsort_r(A->g, (size_t)A->n_groups, sizeof *A->g, by_cache, A);
    for (int k = 0; k < A->n_groups; k++)   /* group.base, in the sorted order */
        for (int j = 0; j < A->n_groups; j++)
            if (A->g[j].first == A->g[k].base_first) A->g[k].base = j;
    *out = A;
    return 0;
}

void al_report_analysis_free(al_report_analysis *A)
{
    if (!A) return;
    al_report_scaling_free(A->scaling);
    al_report_files_free(A->files);
    al_report_summary_free(&A->sm);
    free(A->g);
    free(A);
}

al_report_rounds al_report_rounds_of(const al_report_analysis *A)
{
    return (al_report_rounds){A->seq.on, A->seq.looks, A->seq.done};
}

int al_report_seeds_due(const al_report_analysis *A)
{
    return !A->seq.done;
}
