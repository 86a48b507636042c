/*
 * report.c - summary.csv in; report.md, configs.csv and plots out.
 *
 * The report reads only files (summary.csv, sweep.json, the trials'
 * metrics.csv and checkpoints), so it works on any results directory,
 * including one written by hand or by another executor. Every number it
 * prints about quality is a statement about seeds: a mean with its sample
 * sd and 95 % t-interval, a difference paired by seed with its interval,
 * and whether that interval excludes 0 ("resolved"). See report_rows.h
 * for how trials become configurations and seeds, and which columns are
 * the variants' settings.
 */
#include "al_report.h"
#include "report_plot.h"
#include "report_rows.h"
#include "report_claims.h"
#include "report_eval.h"
#include "report_stages.h"
#include "report_trend.h"

#include "al_report_ablation.h"
#include "al_report_headstats.h"

#include <jansson.h>
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

/* ------------------------------------------------------------ rows */

/* A numeric cell: blank (or absent) is NAN. */
static int num_cell(const al_csv *t, int r, const char *col, const char *path, double *v,
                    al_err *e)
{
    const char *s = al_csv_cell(t, r, col);
    char *end;
    if (!s[0]) {
        *v = NAN;
        return 0;
    }
    *v = strtod(s, &end);
    if (*end)
        return al_errf(e, "%s:%d: error: column '%s': '%.40s' is not a number", path,
                       t->line[r], col, s);
    return 0;
}

/* "gqa-kv2_seed1" -> "gqa-kv2": the configuration of a trial. */
static void strip_seed(char *out, size_t n, const char *trial)
{
    snprintf(out, n, "%s", trial);
    char *u = strrchr(out, '_');
    if (u && strncmp(u, "_seed", 5) == 0 && u[5] && !u[5 + strspn(u + 5, "0123456789")])
        *u = 0;
}

static int parse_row(const al_csv *t, int r, const char *path, row *w, al_err *e)
{
    static const char *const cols[] = {"kv_bytes_per_token", "params", "params_to",
        "n_layer", "d_ff", "seed", "tokens_per_step", "final_train_loss", "val_loss",
        "best_val_loss", "val_accuracy", "test_loss", "test_accuracy", "tokens_per_s",
        "wall_s", "baseline", "steps", "kv_context", "kv_bytes_at_context", NULL};
    double base, *dst[] = {&w->kv, &w->params, &w->params_to, &w->n_layer, &w->d_ff,
        &w->seed, &w->tokens_per_step, &w->train_loss, &w->val_loss, &w->best_val_loss,
        &w->val_acc, &w->test_loss, &w->test_acc, &w->tok_s, &w->wall_s, &base, &w->steps,
        &w->kv_context, &w->kv_at};
    for (int i = 0; cols[i]; i++)
        if (num_cell(t, r, cols[i], path, dst[i], e)) return -1;
    w->trial = al_csv_cell(t, r, "trial");
    w->variant = al_csv_cell(t, r, "variant");
    w->status = al_csv_cell(t, r, "status");
    w->reason = al_csv_cell(t, r, "reason");
    w->tuned = al_csv_cell(t, r, "tuned");
    w->select_by = al_csv_cell(t, r, "select_by");
    w->cpu = al_csv_cell(t, r, "cpu_model");
    w->blas_core = al_csv_cell(t, r, "blas_core");
    w->threads = al_csv_cell(t, r, "threads");
    if (!w->trial[0]) return al_errf(e, "%s:%d: error: empty 'trial'", path, t->line[r]);
    const char *cfg = al_csv_cell(t, r, "config"), *grp = al_csv_cell(t, r, "group");
    const char *causal = al_csv_cell(t, r, "causal");
    if (cfg[0]) snprintf(w->config, sizeof w->config, "%s", cfg);
    else strip_seed(w->config, sizeof w->config, w->trial);
    snprintf(w->group, sizeof w->group, "%s", grp[0] ? grp : w->config);
    w->causal = !causal[0] ? -1 : strcmp(causal, "false") != 0;
    w->baseline = base == 1;
    w->q = NAN;
    return 0;
}

/* The columns summary.csv has besides the settings (al_sweep_results.h),
 * whether or not this file reads them: every other column is a setting. */
static const char *const own_cols[] = {"trial", "config", "group", "tuned", "select_by",
    "baseline", "variant", "causal", "seed", "n_layer", "d_ff", "params", "params_to",
    "kv_bytes_per_token", "kv_context", "kv_bytes_at_context", "steps", "tokens_per_step",
    "final_train_loss", "val_loss",
    "best_val_loss", "val_accuracy", "test_loss", "test_accuracy", "tokens_per_s", "wall_s",
    "status", "reason", "stage", "upstream", "init_convert", "upstream_steps",
    "init_val_loss", "cpu_model", "blas_core", "threads", NULL};

static void find_settings(summary *s)
{
    s->set_col = al_calloc((size_t)s->t.n_cols + 1, sizeof *s->set_col);
    for (int c = 0; c < s->t.n_cols; c++) {
        int own = 0;
        for (int i = 0; own_cols[i] && !own; i++) own = strcmp(s->t.head[c], own_cols[i]) == 0;
        if (!own) s->set_col[s->n_set++] = c;
    }
}

static int summary_read(const char *dir, summary *s, al_err *e)
{
    static const char *const required[] = {"trial", "kv_bytes_per_token", "val_loss",
                                           "status", NULL};
    char path[DIR_LEN + 32];
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    memset(s, 0, sizeof *s);
    if (al_csv_read(path, &s->t, e)) return -1;
    for (int i = 0; required[i]; i++)
        if (al_csv_col(&s->t, required[i]) < 0)
            return al_errf(e, "%s:1: error: no column '%s' (a sweep's summary has trial, "
                           "kv_bytes_per_token, val_loss, status, ...)", path, required[i]);
    find_settings(s);
    s->rows = al_calloc((size_t)s->t.n_rows + 1, sizeof *s->rows);
    for (int r = 0; r < s->t.n_rows; r++)
        if (parse_row(&s->t, r, path, &s->rows[r], e)) return -1;
    s->n = s->t.n_rows;
    return 0;
}

static void summary_free(summary *s)
{
    al_csv_free(&s->t);
    free(s->rows);
    free(s->set_col);
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
static void select_trials(report *R)
{
    for (int i = 0; i < R->sm.n; i++) {
        row *w = &R->sm.rows[i];
        int best = -1, open = 0, first = 1;
        for (int j = 0; j < R->sm.n; j++) {
            const row *c = &R->sm.rows[j];
            if (strcmp(c->group, w->group) != 0 || !same_seed(c, w)) continue;
            if (j < i) first = 0;
            open |= !is_final(c);
            if (al_report_row_ok(c) && !isnan(select_score(c)) &&
                (best < 0 || select_score(c) < select_score(&R->sm.rows[best])))
                best = j;
        }
        w->selected = !open && best == i;
        if (first && open) {   /* count each open seed once, at its first trial */
            for (int k = 0; k < R->n_groups; k++)
                if (strcmp(R->g[k].first->group, w->group) == 0) R->g[k].n_open++;
        }
    }
}

/* ------------------------------------------------------------ groups */

static void build_groups(report *R)
{
    R->g = al_calloc((size_t)R->sm.n + 1, sizeof *R->g);
    for (int i = 0; i < R->sm.n; i++) {
        const row *w = &R->sm.rows[i];
        int k = 0;
        while (k < R->n_groups && strcmp(R->g[k].first->group, w->group) != 0) k++;
        if (k == R->n_groups) R->g[R->n_groups++].first = w;
        R->g[k].n++;
        R->g[k].n_ok += al_report_row_ok(w);
        R->n_ok += al_report_row_ok(w);
        R->any_select |= w->tuned[0] != 0;
    }
}

/* The metric: accuracy when every configuration that finished has one
 * (recall tasks), else loss; on the test split when the trials have one,
 * else (summaries from before the test split) on validation. */
static void choose_metric(report *R)
{
    int all_acc = 1, any = 0;
    for (int i = 0; i < R->sm.n; i++) {
        const row *w = &R->sm.rows[i];
        if (!w->selected) continue;
        any = 1;
        all_acc &= !isnan(w->val_acc) || !isnan(w->test_acc);
        R->use_test |= !isnan(w->test_loss);
    }
    R->use_acc = any && all_acc;
    snprintf(R->metric, sizeof R->metric, "%s %s", R->use_test ? "test" : "val",
             R->use_acc ? "accuracy" : "loss");
    for (int i = 0; i < R->sm.n; i++) {
        row *w = &R->sm.rows[i];
        double acc = R->use_test ? w->test_acc : w->val_acc;
        double loss = R->use_test ? w->test_loss : w->val_loss;
        w->q = w->selected ? (R->use_acc ? acc : loss) : NAN;
    }
}

/* Statistic of field `off` over a group's selected trials. */
static void group_stat(const report *R, const group *g, size_t off, al_stat *s)
{
    double *x = al_calloc((size_t)R->sm.n + 1, sizeof *x);
    int n = 0;
    for (int i = 0; i < R->sm.n; i++) {
        const row *w = &R->sm.rows[i];
        if (w->selected && strcmp(w->group, g->first->group) == 0)
            x[n++] = *(const double *)((const char *)w + off);
    }
    al_stat_of(x, n, s);
    free(x);
}

/* "lr1.0e-3 x2, lr3.0e-3 x1": the select axes' values chosen. */
static void tuned_counts(const report *R, group *g)
{
    g->tuned[0] = 0;
    for (int i = 0; i < R->sm.n; i++) {
        const row *w = &R->sm.rows[i];
        if (!w->selected || !w->tuned[0] || strcmp(w->group, g->first->group) != 0) continue;
        int seen = 0, count = 0;
        for (int j = 0; j < R->sm.n; j++) {
            const row *v = &R->sm.rows[j];
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
static void machines(const report *R, group *g)
{
    int kinds = 0;
    g->machine[0] = 0;
    for (int i = 0; i < R->sm.n; i++) {
        const row *w = &R->sm.rows[i], *v = NULL;
        if (!w->selected || strcmp(w->group, g->first->group) != 0 || !w->cpu[0]) continue;
        int count = 0, seen = 0;
        for (int j = 0; j < R->sm.n; j++) {
            v = &R->sm.rows[j];
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

static void group_stats(report *R)
{
    for (int k = 0; k < R->n_groups; k++) {
        group *g = &R->g[k];
        al_stat s;
        group_stat(R, g, offsetof(row, q), &g->q);
        group_stat(R, g, R->use_test ? offsetof(row, test_loss) : offsetof(row, val_loss),
                   &g->loss);
        group_stat(R, g, R->use_test ? offsetof(row, test_acc) : offsetof(row, val_acc),
                   &g->acc);
        group_stat(R, g, offsetof(row, val_loss), &g->val);
        group_stat(R, g, offsetof(row, train_loss), &s);
        g->train_loss = s.mean;
        group_stat(R, g, offsetof(row, tok_s), &s);
        g->tok_s = s.mean;
        for (int i = 0; i < R->sm.n; i++) {
            const row *w = &R->sm.rows[i];
            double acc = R->use_test ? w->test_acc : w->val_acc;
            g->solved += w->selected && strcmp(w->group, g->first->group) == 0 &&
                         acc >= AL_SOLVED_ACCURACY;
        }
        tuned_counts(R, g);
        machines(R, g);
    }
}

/* The family: every comparison with the baseline, Holm-corrected at 5 %. */
static void holm_verdicts(report *R)
{
    double *p = al_calloc((size_t)R->n_groups + 1, sizeof *p);
    int *rej = al_calloc((size_t)R->n_groups + 1, sizeof *rej), m = 0;
    for (int k = 0; k < R->n_groups; k++)
        if (!R->g[k].is_base) p[m++] = R->g[k].p;
    al_holm(m, p, 0.05, rej);
    for (int k = 0, i = 0; k < R->n_groups; k++)
        if (!R->g[k].is_base) R->g[k].resolved_holm = rej[i++];
    free(p), free(rej);
}

/* Recall tasks: do the seeds solved differ from the baseline's? Exact
 * McNemar on the seeds both have, Holm over the same family. Why beside
 * the paired t test: one seed left on the plateau can widen the interval
 * of the mean accuracy past 0 while 5 of 10 seeds failing where the
 * baseline solved all is no chance result (mqar_variants: mla-16). */
static void solved_verdicts(report *R, const group *base)
{
    double *p = al_calloc((size_t)R->n_groups + 1, sizeof *p);
    int *rej = al_calloc((size_t)R->n_groups + 1, sizeof *rej), m = 0;
    for (int k = 0; k < R->n_groups; k++) {
        group *g = &R->g[k];
        g->solved_p = NAN;
        if (g->is_base || !R->use_acc) continue;
        al_report_solved_pairs(R, base, g, &g->solved_only_base, &g->solved_only_this);
        p[m++] = g->solved_p = al_mcnemar_p(g->solved_only_base, g->solved_only_this);
    }
    al_holm(m, p, 0.05, rej);
    for (int k = 0, i = 0; k < R->n_groups; k++)
        if (!R->g[k].is_base && R->use_acc) R->g[k].solved_holm = rej[i++];
    free(p), free(rej);
}

/* Selected metric of group g at seed value s (NAN: none). */
static double seed_q(const report *R, const group *g, double s)
{
    for (int i = 0; i < R->sm.n; i++) {
        const row *w = &R->sm.rows[i];
        if (w->selected && w->seed == s && strcmp(w->group, g->first->group) == 0) return w->q;
    }
    return NAN;
}

/* A sweep run in rounds (seeds 1..max): the rule of al_seq_decide over
 * the looks the finished seeds reach. A look counts once every
 * configuration has ended each of its seeds (none is open). */
static void sequential_verdicts(report *R, const group *base)
{
    int m = 0, open = 0, reached = 0;
    for (int k = 0; k < R->n_groups; k++) open |= R->g[k].n_open;
    for (int s = 1; s <= R->seq.max; s++)
        if (!isnan(seed_q(R, base, s))) reached = s;
    double *x = al_calloc((size_t)(R->n_groups * reached) + 1, sizeof *x);
    int *res = al_calloc((size_t)R->n_groups + 1, sizeof *res);
    for (int k = 0; k < R->n_groups; k++) {
        if (R->g[k].is_base) continue;
        for (int s = 0; s < reached; s++)
            x[m * reached + s] = seed_q(R, &R->g[k], s + 1) - seed_q(R, base, s + 1);
        m++;
    }
    R->seq_looks = open ? 0 : al_seq_decide(&R->seq, m, x, reached, res);
    int all = 1;
    for (int k = 0, i = 0; k < R->n_groups; k++)
        if (!R->g[k].is_base) all &= R->g[k].resolved_holm = res[i++];
    R->seq_done = !open && (all || reached >= R->seq.max);
    free(x), free(res);
}

/* The baseline: the configuration the summary marks, else the first. */
static void baseline_deltas(report *R)
{
    group *base = R->n_groups ? &R->g[0] : NULL;
    for (int k = 0; k < R->n_groups; k++)
        if (R->g[k].first->baseline) {
            base = &R->g[k];
            break;
        }
    for (int k = 0; k < R->n_groups; k++) {
        group *g = &R->g[k];
        g->is_base = g == base;
        if (g == base) memset(&g->delta, 0, sizeof g->delta), g->delta.mean = NAN;
        else al_report_paired(R, g, base, &g->delta);
        g->p = g->is_base ? NAN : al_stat_p(&g->delta);
        g->seeds_needed = g->is_base ? 0 : al_seeds_needed(g->delta.mean, g->delta.sd, 0.8,
                                                           AL_SEEDS_NEEDED_CAP);
    }
    if (base && R->seq_on) sequential_verdicts(R, base);
    else holm_verdicts(R);
    if (base) solved_verdicts(R, base), al_report_gap_trends(R, base);
}

/* ------------------------------------------------------------ the front */

static int drawable(const group *g)
{
    return g->first->causal != 0 && !isnan(g->q.mean);   /* unmasked loss is not comparable */
}

/* The comparisons that decide a place on or off the front: for a front
 * configuration, against each cheaper front configuration; for one off
 * it, against each front configuration that dominates it. Appends the
 * pairs (i, j) to cmp and their p-values to p; returns the new count. */
static int front_comparisons(report *R, int i, int m, int (*cmp)[2], double *p)
{
    group *gi = &R->g[i];
    for (int j = 0; j < R->n_groups; j++) {
        group *gj = &R->g[j];
        if (gj == gi || !gj->front || !drawable(gj)) continue;
        double ci = gi->first->kv, cj = gj->first->kv;
        int relevant = gi->front ? cj < ci
                                 : cj <= ci && better_eq(gj->q.mean, gi->q.mean, R->use_acc);
        if (!relevant) continue;
        al_stat d;
        al_report_paired(R, gi, gj, &d);
        cmp[m][0] = i, cmp[m][1] = j;
        p[m++] = al_stat_p(&d);
    }
    return m;
}

/* Is each place on or off the front beyond seed noise? Resolved when
 * every comparison that decides it is, after Holm over the family of all
 * those comparisons (of every configuration) at 5 %; otherwise `against`
 * names the first one it is not resolved from. */
static void resolve_front(report *R)
{
    int n = R->n_groups, m = 0, (*cmp)[2] = al_calloc((size_t)(n * n) + 1, sizeof *cmp);
    double *p = al_calloc((size_t)(n * n) + 1, sizeof *p);
    int *rej = al_calloc((size_t)(n * n) + 1, sizeof *rej);
    for (int i = 0; i < n; i++) {
        R->g[i].resolved = drawable(&R->g[i]);
        if (drawable(&R->g[i])) m = front_comparisons(R, i, m, cmp, p);
    }
    al_holm(m, p, 0.05, rej);
    for (int c = 0; c < m; c++) {
        group *gi = &R->g[cmp[c][0]];
        if (rej[c] || !gi->resolved) continue;
        gi->resolved = 0;
        snprintf(gi->against, sizeof gi->against, "%s", R->g[cmp[c][1]].first->group);
    }
    free(cmp), free(p), free(rej);
}

static void mark_front(report *R)
{
    int n = R->n_groups, *on = al_calloc((size_t)n + 1, sizeof *on);
    double *cost = al_calloc((size_t)n + 1, sizeof *cost);
    double *q = al_calloc((size_t)n + 1, sizeof *q);
    for (int k = 0; k < n; k++) {
        cost[k] = drawable(&R->g[k]) ? R->g[k].first->kv : NAN;
        q[k] = R->g[k].q.mean;
    }
    R->n_front = al_pareto_front(n, cost, q, R->use_acc, on);
    for (int k = 0; k < n; k++) R->g[k].front = on[k];
    resolve_front(R);
    free(on), free(cost), free(q);
}

/* Largest cache first, then better quality first: the table's order. */
static int by_cache(const void *a, const void *b, void *ctx)
{
    const group *x = a, *y = b;
    const report *R = ctx;
    if (x->first->kv != y->first->kv) return x->first->kv < y->first->kv ? 1 : -1;
    double qx = R->use_acc ? -x->q.mean : x->q.mean, qy = R->use_acc ? -y->q.mean : y->q.mean;
    if (isnan(qx) != isnan(qy)) return isnan(qx) ? 1 : -1;
    return qx < qy ? -1 : qx > qy;
}

static void read_marker(report *R)
{
    char path[DIR_LEN + 32];
    const char *base = strrchr(R->dir, '/');
    snprintf(R->name, sizeof R->name, "%s", base && base[1] ? base + 1 : R->dir);
    snprintf(path, sizeof path, "%s/sweep.json", R->dir);
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    if (!j) return;
    const char *v;
    if ((v = json_string_value(json_object_get(j, "experiment")))) snprintf(R->name, sizeof R->name, "%s", v);
    if ((v = json_string_value(json_object_get(j, "file")))) snprintf(R->file, sizeof R->file, "%s", v);
    if ((v = json_string_value(json_object_get(j, "description"))))
        snprintf(R->description, sizeof R->description, "%s", v);
    const json_t *q = json_object_get(j, "seeds_until");
    int mn = (int)json_integer_value(json_object_get(q, "min"));
    int mx = (int)json_integer_value(json_object_get(q, "max"));
    int st = (int)json_integer_value(json_object_get(q, "step"));
    if (q && mn >= 2 && mx >= mn && mx <= 1000 && st >= 1)   /* else: not a plan, ignored */
        R->seq_on = 1, R->seq = (al_seq_plan){mn, mx, st, 0.05};
    const json_t *sets = json_object_get(j, "sets");
    for (size_t i = 0; i < json_array_size(sets); i++) {
        size_t len = strlen(R->sets);
        if ((v = json_string_value(json_array_get(sets, i))))
            snprintf(R->sets + len, sizeof R->sets - len, " --set '%s'", v);
    }
    al_report_claims_read(R, json_object_get(j, "claims"));
    json_decref(j);
}

/* ------------------------------------------------------------ formatting */

static void fmt_int(char *buf, size_t n, double v)
{
    if (isnan(v)) {
        snprintf(buf, n, "–");
        return;
    }
    char digits[32];
    snprintf(digits, sizeof digits, "%.0f", v);
    size_t len = strlen(digits), o = 0;
    for (size_t i = 0; i < len && o + 2 < n; i++) {
        if (i && (len - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = 0;
}

/* "-0.0412*" (a star: still improving), "–" without curves. */
static void fmt_slope(char *buf, size_t n, const group *g)
{
    if (!g->slope_n) snprintf(buf, n, "–");
    else snprintf(buf, n, "%+.4f%s", g->slope, al_report_still_improving(g) ? "*" : "");
}

/* "1.5175 ± 0.0021" (mean ± 95 % half-width), "1.5175" for one seed. */
static void fmt_ci(char *buf, size_t n, const al_stat *s)
{
    if (isnan(s->mean)) snprintf(buf, n, "–");
    else if (s->n > 1) snprintf(buf, n, "%.4f ± %.4f", s->mean, s->ci95);
    else snprintf(buf, n, "%.4f", s->mean);
}

static void fmt_sd(char *buf, size_t n, const al_stat *s)
{
    if (s->n > 1) snprintf(buf, n, "%.4f", s->sd);
    else snprintf(buf, n, "–");
}

/* A difference: "+0.0123 [+0.0031, +0.0215]", or its mean alone with
 * "(n = 1)" when one pair cannot give an interval. */
static void fmt_delta(char *buf, size_t n, const al_stat *d)
{
    if (isnan(d->mean) || d->n == 0) snprintf(buf, n, "–");
    else if (d->n > 1)
        snprintf(buf, n, "%+.4f [%+.4f, %+.4f]", d->mean, d->mean - d->ci95, d->mean + d->ci95);
    else snprintf(buf, n, "%+.4f (n = 1, no interval)", d->mean);
}

static void fmt_setting(char *buf, size_t n, double v)
{
    if (isnan(v)) snprintf(buf, n, "–");
    else snprintf(buf, n, "%.0f", v);
}

static int any_col(const report *R, size_t off)
{
    for (int i = 0; i < R->sm.n; i++)
        if (!isnan(*(const double *)((const char *)&R->sm.rows[i] + off))) return 1;
    return 0;
}

/* Does any trial have setting k (a variant of the sweep that lacks it
 * leaves its cell blank)? */
static int any_setting(const report *R, int k)
{
    for (int i = 0; i < R->sm.n; i++)
        if (al_report_setting(&R->sm, &R->sm.rows[i], k)[0]) return 1;
    return 0;
}

static int any_unmasked(const report *R)
{
    for (int i = 0; i < R->sm.n; i++)
        if (R->sm.rows[i].causal == 0) return 1;
    return 0;
}

static const group *base_group(const report *R)
{
    for (int k = 0; k < R->n_groups; k++)
        if (R->g[k].is_base) return &R->g[k];
    return NULL;
}

/* ------------------------------------------------------------ report.md */

typedef struct cols {
    int unmasked, matched, acc, kv_at;
} cols;

static cols which_cols(const report *R)
{
    return (cols){any_unmasked(R), any_col(R, offsetof(row, params_to)), R->use_acc,
                  any_col(R, offsetof(row, kv_at))};
}

static void md_table_head(FILE *f, const report *R)
{
    cols c = which_cols(R);
    int n = 11;
    fputs("| configuration | variant |", f);
    for (int k = 0; k < R->sm.n_set; k++)
        if (any_setting(R, k)) fprintf(f, " %s |", al_report_setting_name(&R->sm, k)), n++;
    if (c.unmasked) fputs(" causal |", f), n++;
    fputs(" n_layer | d_ff | params |", f);
    if (c.matched) fputs(" matched to |", f), n++;
    fputs(" KV bytes/token |", f);
    if (c.kv_at) fputs(" KV cache at context (tokens) |", f), n++;
    fprintf(f, " seeds | %s (mean ± 95 %%) | sd |", R->metric);
    if (c.acc) fputs(" solved |", f), n++;
    fprintf(f, " Δ vs baseline [95 %%] | resolved (Holm) | val loss | slope/100 steps |"
            " tokens/s | Pareto |\n|");
    for (int i = 0; i < n + 4; i++) fputs(" --- |", f);
    fputc('\n', f);
}

static void md_table_row(FILE *f, const report *R, const group *g)
{
    const row *w = g->first;
    cols c = which_cols(R);
    char a[96], b[96], d[96];
    fprintf(f, "| %s%s | %s |", g->first->group, g->is_base ? " (baseline)" : "",
            w->variant[0] ? w->variant : "–");
    for (int k = 0; k < R->sm.n_set; k++) {
        const char *v = al_report_setting(&R->sm, w, k);
        if (any_setting(R, k)) fprintf(f, " %s |", v[0] ? v : "–");
    }
    if (c.unmasked) fprintf(f, " %s |", w->causal ? "true" : "**false**");
    fmt_setting(a, sizeof a, w->n_layer);
    fmt_setting(b, sizeof b, w->d_ff);
    fmt_int(d, sizeof d, w->params);
    fprintf(f, " %s | %s | %s |", a, b, d);
    if (c.matched) fmt_int(a, sizeof a, w->params_to), fprintf(f, " %s |", a);
    fmt_int(a, sizeof a, w->kv);
    fprintf(f, " %s |", a);
    if (c.kv_at) {   /* "139,264 (256)": the whole cache at report.context */
        fmt_int(a, sizeof a, w->kv_at);
        fmt_int(b, sizeof b, w->kv_context);
        fprintf(f, isnan(w->kv_at) ? " %s |" : " %s (%s) |", a, b);
    }
    fmt_ci(b, sizeof b, &g->q);
    if (!g->q.n) snprintf(b, sizeof b, "– (%s)", g->n_ok ? "pending" : w->status);
    fmt_sd(d, sizeof d, &g->q);
    fprintf(f, " %d%s | %s | %s |", g->q.n, g->n_open ? "+" : "", b, d);
    if (c.acc) {
        fprintf(f, " %d/%d", g->solved, g->q.n);
        if (g->solved_step_n) fprintf(f, " (median step %.0f)", g->solved_step);
        if (isfinite(g->solved_p))
            fprintf(f, "; vs baseline %d:%d, p %.2g%s", g->solved_only_base,
                    g->solved_only_this, g->solved_p, g->solved_holm ? ", **differs**" : "");
        fputs(" |", f);
    }
    fmt_delta(a, sizeof a, &g->delta);
    fprintf(f, " %s | %s |", g->is_base ? "(baseline)" : a,
            g->is_base ? "" : g->resolved_holm ? "**yes**" : "no");
    fmt_ci(a, sizeof a, &g->val);
    fmt_slope(d, sizeof d, g);
    fmt_int(b, sizeof b, g->tok_s);
    fprintf(f, " %s | %s | %s | %s |\n", a, d, b,
            g->front ? (g->resolved ? "**yes**" : "yes (not resolved)") : "");
}

static void md_configs(FILE *f, const report *R)
{
    fprintf(f, "\n## Configurations\n\n");
    md_table_head(f, R);
    for (int k = 0; k < R->n_groups; k++) md_table_row(f, R, &R->g[k]);
    fprintf(f, "\n*seeds*: seeds in the statistics (a `+`: more are still running or "
            "pending). *sd*: sample standard deviation over seeds. *Δ vs baseline*: the "
            "%s minus the baseline's, paired by seed (same seed: the same initialisation "
            "stream and the same batches), with its 95 %% t-interval; *resolved*: the "
            "interval excludes 0, after Holm's correction over the comparisons with the baseline "
            "(see below). With one seed there is a value but no interval. *slope/100 steps*: "
            "the least-squares slope of the validation loss over the eval points of the last "
            "25 %% of training, per 100 steps, mean over seeds (a `*`: still improving, "
            "the loss fell more than %.2f nats over that quarter).%s\n", R->metric,
            AL_STILL_IMPROVING_FALL,
            R->use_acc ? " *solved*: seeds whose accuracy reached 0.9; the median step: over "
            "the seeds whose validation accuracy reached 0.9 at an evaluation, the first "
            "such step; *vs baseline b:c*: seeds only the baseline solved and seeds only "
            "this one solved, paired by seed, with the exact McNemar p (**differs**: "
            "still below 0.05 after Holm over the comparisons with the baseline). One seed "
            "stuck on a plateau can keep the mean difference from resolving while the "
            "solved counts differ beyond chance." : "");
}

/* Parameter counts that differ make a loss gap mix cache size with model
 * size: say so, unless the sweep matched them. */
static void md_params(FILE *f, const report *R)
{
    double lo = INFINITY, hi = 0;
    int matched = 0;
    for (int k = 0; k < R->n_groups; k++) {
        const row *w = R->g[k].first;
        if (isnan(w->params)) continue;
        lo = w->params < lo ? w->params : lo;
        hi = w->params > hi ? w->params : hi;
        matched |= !isnan(w->params_to);
    }
    if (!(hi > 0) || (hi - lo) / hi < 0.01) return;
    char a[64], b[64];
    fmt_int(a, sizeof a, lo);
    fmt_int(b, sizeof b, hi);
    fprintf(f, "\n**Parameter counts differ** (%s to %s, %.1f %%)%s\n", a, b,
            100 * (hi - lo) / hi, matched
            ? ": `model.match_params` matched them as closely as its step allows (the "
              "*matched to* column), or some configurations were not matched."
            : ": a difference in quality mixes the cache with the model's size. Set "
              "`model.match_params: {to: {variant: ...}, by: d_ff}` (or `by: n_layer`) to "
              "compare at equal parameters.");
}

/* "yes", or "not resolved; about N seeds would resolve a difference this
 * size" (the seeds for 80 % power at the observed mean and sd). */
static void fmt_verdict(char *buf, size_t n, const group *g)
{
    if (g->resolved_holm) snprintf(buf, n, "**yes**");
    else if (!g->seeds_needed)
        snprintf(buf, n, g->delta.n < 2 ? "no (too few pairs to size)"
                                        : "no (no difference to size)");
    else if (g->seeds_needed > AL_SEEDS_NEEDED_CAP)
        snprintf(buf, n, "not resolved; more than %d seeds would be needed for a difference "
                 "this size", AL_SEEDS_NEEDED_CAP);
    else snprintf(buf, n, "not resolved; about %d seeds would resolve a difference this size",
                  g->seeds_needed);
}

static void md_deltas_rule(FILE *f, const report *R, int m)
{
    if (!R->seq_on) {
        fprintf(f, "\n*unadjusted*: the pair's own 95 %% interval excludes 0 (p < 0.05). "
                "*resolved (Holm)*: still so after Holm's correction over the family of the "
                "%d comparisons with the baseline (the smallest p against 0.05/%d, the next "
                "against 0.05/%d, ...; the chance of any false \"resolved\" stays at most "
                "5 %%). The verdicts above and the Pareto front use the Holm-adjusted ones. "
                "*seeds for 80 %%*: the seeds at which a two-sided paired t test at 5 %% has "
                "80 %% power if the true difference and sd are the ones observed (noncentral "
                "t, integrated numerically).\n", m, m, m > 1 ? m - 1 : 1);
        return;
    }
    int n_at[AL_SEQ_MAX_LOOKS], looks = al_seq_looks(&R->seq, n_at, NULL);
    fprintf(f, "\nSeeds were added in rounds (`sweep.seeds: {min: %d, max: %d, until: "
            "resolved}`): looks at", R->seq.min, R->seq.max);
    for (int k = 0; k < looks; k++) fprintf(f, "%s %d", k ? "," : "", n_at[k]);
    fprintf(f, " seeds; %d taken. At each look the comparisons not yet resolved are "
            "Holm-corrected at that look's share of 5 %% (Pocock-type alpha spending, "
            "α ln(1 + (e − 1) n/max)); once resolved stays resolved, so the chance of any "
            "false \"resolved\" over all looks is at most 5 %%. *resolved (Holm)* is that "
            "verdict; *unadjusted* is the last look's own 95 %% interval. %s\n",
            R->seq_looks, R->seq_done ? "The rounds are over." : "More rounds are due.");
}

static void md_deltas(FILE *f, const report *R)
{
    const group *base = base_group(R);
    if (!base || R->n_groups < 2) return;
    int unresolved = 0;
    fprintf(f, "\n## Paired differences against the baseline (%s)\n\n", base->first->group);
    fprintf(f, "| configuration | KV bytes/token | pairs | Δ %s | 95 %% interval | p | "
            "unadjusted | resolved (Holm) | seeds for 80 %% |\n"
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n", R->metric);
    for (int k = 0; k < R->n_groups; k++) {
        const group *g = &R->g[k];
        if (g->is_base) continue;
        char kv[64], lo[32] = "–", hi[32] = "–", p[32] = "–", need[32] = "–", v[160];
        fmt_int(kv, sizeof kv, g->first->kv);
        if (g->delta.n > 1) {
            snprintf(lo, sizeof lo, "%+.4f", g->delta.mean - g->delta.ci95);
            snprintf(hi, sizeof hi, "%+.4f", g->delta.mean + g->delta.ci95);
        }
        if (!isnan(g->p)) snprintf(p, sizeof p, "%.2g", g->p);
        if (g->seeds_needed) snprintf(need, sizeof need, g->seeds_needed > AL_SEEDS_NEEDED_CAP
                                      ? "> %d" : "%d", g->seeds_needed > AL_SEEDS_NEEDED_CAP
                                      ? AL_SEEDS_NEEDED_CAP : g->seeds_needed);
        unresolved += !g->resolved_holm;
        char mean[32] = "–";
        if (!isnan(g->delta.mean)) snprintf(mean, sizeof mean, "%+.4f", g->delta.mean);
        fmt_verdict(v, sizeof v, g);
        fprintf(f, "| %s | %s | %d | %s | [%s, %s] | %s | %s | %s | %s |\n", g->first->group,
                kv, g->delta.n, mean, lo, hi, p, al_stat_resolved(&g->delta) ? "yes" : "no",
                v, need);
    }
    md_deltas_rule(f, R, R->n_groups - 1);
    fprintf(f, "\n%s\n", unresolved
            ? "A difference that is not resolved could change sign with other seeds: do not "
              "read a ranking into it. More seeds narrow the interval (as 1/sqrt(n))."
            : "Every difference is resolved, after the correction.");
}

/* Still improving: the ranking is one of learning speed, not of where the
 * models end. */
static void md_trend(FILE *f, const report *R)
{
    int n = 0, any = 0;
    for (int k = 0; k < R->n_groups; k++) {
        any |= R->g[k].slope_n > 0;
        n += al_report_still_improving(&R->g[k]);
    }
    if (!any) return;
    fprintf(f, "\n## Has training ended?\n\n");
    if (!n) {
        fprintf(f, "No configuration's validation loss fell more than %.2f nats over the last "
                "quarter of training (the least-squares slope of the eval points there times "
                "the quarter's steps, mean over seeds).\n", AL_STILL_IMPROVING_FALL);
        return;
    }
    fprintf(f, "**Still improving:** the validation loss of %d of %d configurations fell more "
            "than %.2f nats over the last quarter of training (the least-squares slope of the "
            "eval points there times the quarter's steps, mean over seeds):", n, R->n_groups,
            AL_STILL_IMPROVING_FALL);
    for (int k = 0, i = 0; k < R->n_groups; k++)
        if (al_report_still_improving(&R->g[k]))
            fprintf(f, "%s %s (%.4f)", i++ ? "," : "", R->g[k].first->group, R->g[k].tail_fall);
    fputs(". The comparison is then one of how fast the models learn, not of where they "
          "end: train longer to rank the end points.\n", f);
}

/* Did the gaps to the baseline move over the last quarter? A gap that
 * narrows there is partly one of learning speed: something the slope alone
 * cannot say. The converse is no promise (the note printed below). */
static void md_gaps(FILE *f, const report *R)
{
    const group *base = base_group(R);
    int any = 0, narrowing = 0;
    for (int k = 0; k < R->n_groups; k++) any |= R->g[k].gap_change.n > 0;
    if (!base || !any) return;
    fprintf(f, "\n### Did the gaps to %s move over the last quarter?\n\n| configuration | seeds "
            "| val Δ at 75 %% | val Δ at the end | change [95 %%] | p | trend (Holm) |\n"
            "|---|---:|---|---|---|---:|---|\n", base->first->group);
    for (int k = 0; k < R->n_groups; k++) {
        const group *g = &R->g[k];
        if (g == base || !g->gap_change.n) continue;
        char q[64], e[64], c[96], p[32] = "–";
        fmt_delta(c, sizeof c, &g->gap_change);
        if (g->gap_change.n > 1) snprintf(p, sizeof p, "%.3g", al_stat_p(&g->gap_change));
        snprintf(q, sizeof q, "%+.4f (step %.0f)", g->gap_q.mean, g->gap_q_step);
        snprintf(e, sizeof e, "%+.4f (step %.0f)", g->gap_end.mean, g->gap_end_step);
        const char *t = al_report_gap_trend(g);
        narrowing += strcmp(t, "narrowing") == 0;
        fprintf(f, "| %s | %d | %s | %s | %s | %s | %s |\n", g->first->group, g->gap_change.n, q, e,
                c, p, t[0] ? t : "one seed: no verdict");
    }
    fprintf(f, "\n*val Δ*: the configuration's validation loss minus %s's, paired by seed, mean "
            "over seeds, at the first eval at or after 75 %% of training and at the last; "
            "*change*: the end's minus the first's, per seed, with its 95 %% t-interval; "
            "*trend*: narrowing or widening when the change is beyond seed noise after Holm's "
            "correction over the comparisons with the baseline, else steady. Steady or widening "
            "does not show that a gap will hold: under a cosine schedule the last quarter is "
            "the annealing, and gaps that held steady or widened there have shrunk with "
            "longer training (README, \"Did the gaps move?\").",
            base->first->group);
    fputs(narrowing ? " **A narrowing gap is partly one of learning speed**: the configuration "
          "was catching up when training stopped, so longer training may shrink the gap "
          "further, and a ranking that rests on it may not hold where the models end.\n"
          : "\n", f);
}

/* Trials of one configuration on different CPUs, OpenBLAS cores or thread
 * counts: their numbers may differ in the last bits (README,
 * "Reproducibility"). */
static void md_machines(FILE *f, const report *R)
{
    int n = 0;
    for (int k = 0; k < R->n_groups; k++) n += R->g[k].machine[0] != 0;
    if (!n) return;
    fputs("\n**Trials of one configuration ran on different machines** (CPU model, "
          "OpenBLAS core, threads), so they are not bit-for-bit comparable:\n\n", f);
    for (int k = 0; k < R->n_groups; k++)
        if (R->g[k].machine[0]) fprintf(f, "- %s: %s\n", R->g[k].first->group, R->g[k].machine);
}

static void md_tuning(FILE *f, const report *R)
{
    if (!R->any_select) return;
    const char *by = "";
    for (int i = 0; i < R->sm.n && !by[0]; i++) by = R->sm.rows[i].select_by;
    fprintf(f, "\n## Tuned, then compared\n\nFor every configuration and seed the trial with "
            "the best %s among the values of the select axes stands for it (the others "
            "trained too and are in `summary.csv`); its %s is what the tables above use. "
            "The values chosen:\n\n| configuration | chosen (times) |\n| --- | --- |\n",
            by[0] ? by : "validation loss", R->metric);
    for (int k = 0; k < R->n_groups; k++)
        fprintf(f, "| %s | %s |\n", R->g[k].first->group,
                R->g[k].tuned[0] ? R->g[k].tuned : "–");
}

/* The front in order of cache size, with what is and is not resolved. */
static void md_front(FILE *f, const report *R)
{
    fprintf(f, "\n## Pareto front: %s against KV-cache bytes per token\n\n", R->metric);
    if (!R->n_front) {
        fputs("No configuration finished, so there is no front.\n", f);
        return;
    }
    fprintf(f, "On the means, no other configuration has both a smaller (or equal) cache and "
            "a %s%s. A place is *resolved* when every comparison that decides it is resolved "
            "(paired t test, Holm-corrected over the family of all these comparisons at "
            "5 %%): for a front configuration, against each cheaper front configuration; for "
            "one off the front, against each that dominates it. "
            "From the smallest cache up:\n\n", R->use_acc ? "higher (or equal) accuracy"
            : "lower (or equal) loss", any_unmasked(R) ? " (configurations without the causal "
            "mask are left out: their loss is not comparable)" : "");
    for (int k = R->n_groups - 1; k >= 0; k--) {
        const group *g = &R->g[k];
        if (!g->front) continue;
        char kv[64], m[64];
        fmt_int(kv, sizeof kv, g->first->kv);
        fmt_ci(m, sizeof m, &g->q);
        fprintf(f, "- **%s**: %s bytes/token, %s %s", g->first->group, kv, R->metric, m);
        if (!g->resolved) fprintf(f, "; *not resolved from %s* (within seed noise)", g->against);
        fputs("\n", f);
    }
    int off = 0;
    for (int k = 0; k < R->n_groups; k++) off += !R->g[k].front && drawable(&R->g[k]) &&
                                                 !R->g[k].resolved;
    if (!off) return;
    fputs("\nOff the front but not resolved from the front configuration that dominates "
          "it (it may be as good):", f);
    for (int k = 0, i = 0; k < R->n_groups; k++) {
        const group *g = &R->g[k];
        if (g->front || !drawable(g) || g->resolved) continue;
        fprintf(f, "%s %s (vs %s)", i++ ? "," : "", g->first->group, g->against);
    }
    fputs(".\n", f);
}

static void md_unfinished(FILE *f, const report *R)
{
    int n = 0;
    for (int i = 0; i < R->sm.n; i++) n += !al_report_row_ok(&R->sm.rows[i]);
    if (!n) return;
    fprintf(f, "\n## Trials that did not finish (%d)\n\nNot in the statistics above. A "
            "diverged trial is a result (its loss became NaN or Inf); a failed, killed, "
            "interrupted or pending one runs again on the next `attnlab sweep` of the same "
            "file.\n\n| trial | status | reason |\n| --- | --- | --- |\n", n);
    for (int i = 0; i < R->sm.n; i++) {
        const row *w = &R->sm.rows[i];
        if (al_report_row_ok(w)) continue;
        fprintf(f, "| %s | %s | ", w->trial, w->status);
        for (const char *p = w->reason; *p; p++) {
            if (*p == '|') fputc('\\', f);   /* a table cell */
            fputc(*p, f);
        }
        fputs(" |\n", f);
    }
}

/* ------------------------------------------------------------ models */

/* What the heads learned, and the causal mask shown (headstats.c,
 * ablation.c), from the trials' checkpoints, in the table's order. */
static void md_models(FILE *f, const report *R)
{
    al_hs_trial *t = al_calloc((size_t)R->sm.n + 1, sizeof *t);
    int n = 0;
    al_err e;
    for (int k = 0; k < R->n_groups; k++)
        for (int i = 0; i < R->sm.n; i++) {
            const row *w = &R->sm.rows[i];
            if (strcmp(w->group, R->g[k].first->group) == 0)
                t[n++] = (al_hs_trial){w->trial, w->group, al_report_row_ok(w) && w->selected,
                                       w->causal, w->kv, w->val_loss, w->q};
        }
    if (al_headstats_section(f, R->dir, R->metric, t, n, &e) ||
        al_ablation_section(f, R->dir, t, n, &e))
        fprintf(f, "\n**Incomplete:** %s\n", e.msg);
    free(t);
}

static void md_plots(FILE *f, const report *R)
{
    fputs("\n## Plots\n\n", f);
    if (R->plots == AL_PLOTS_DRAWN) {
        fprintf(f, "![%s against KV-cache bytes per token](tradeoff.png)\n\n"
                "Each point is one configuration: the mean over seeds, with its 95 %% "
                "t-interval as error bars (none for one seed). The dashed line is the Pareto "
                "front of the means; a hollow point is not resolved from a front neighbour "
                "(see above), so its place could change with other seeds%s. "
                "[SVG](tradeoff.svg)\n\n"
                "![validation loss curves](curves.png)\n\n"
                "Validation loss against optimizer step and against tokens trained (mean "
                "over seeds). [SVG](curves.svg)\n\n", R->metric,
                any_unmasked(R) ? "; configurations without the causal mask are not drawn"
                : "");
        fputs("The plots are drawn by gnuplot from `tradeoff.gp` and `curves.gp` (and their "
              "`.dat` files), kept here to edit and re-run.\n", f);
    } else if (R->plots == AL_PLOTS_NO_GNUPLOT) {
        fputs("**No plots: gnuplot was not found.** Install it (Debian: `apt-get install "
              "gnuplot-nox`) and run `attnlab report` on this directory again; the scripts "
              "`tradeoff.gp` and `curves.gp` are already here.\n", f);
    } else if (R->plots == AL_PLOTS_FAILED) {
        fputs("**No plots: gnuplot failed** (its messages are in `gnuplot.log`); the scripts "
              "`tradeoff.gp` and `curves.gp` are here.\n", f);
    } else {
        fputs("No plots: no trial finished.\n", f);
    }
}

static void md_write(FILE *f, const report *R)
{
    int counts[2] = {0};
    fprintf(f, "# Sweep report: %s\n\n", R->name);
    if (R->description[0]) fprintf(f, "%s\n\n", R->description);
    if (R->file[0])
        fprintf(f, "Experiment file: `%s`; re-run (finished trials are kept) with `attnlab "
                "sweep %s%s`.\n\n", R->file, R->file, R->sets);
    for (int i = 0; i < R->sm.n; i++) counts[al_report_row_ok(&R->sm.rows[i])]++;
    if (counts[0])
        fprintf(f, "%d trials: %d ok, %d did not finish (listed below). ", R->sm.n, counts[1],
                counts[0]);
    else
        fprintf(f, "%d trials, all ok. ", R->sm.n);
    fprintf(f, "%d configurations. Quality is the **%s**%s, as the mean over seeds with a 95 %% "
            "Student-t interval; KV bytes/token is the f32 K/V cache of one token summed over "
            "all layers. Losses are in nats per token. The same numbers, one row per "
            "configuration, are in `configs.csv`.\n", R->n_groups, R->metric, R->use_test
            ? " (the held-out test split, scored once at the end of each trial; validation "
              "only steered training and selection)"
            : " (these trials have no test split, so validation stands in for it)");
    al_report_claims_md(f, R);
    md_configs(f, R);
    md_params(f, R);
    md_deltas(f, R);
    md_trend(f, R);
    md_gaps(f, R);
    md_machines(f, R);
    md_tuning(f, R);
    md_front(f, R);
    md_plots(f, R);
    al_report_stages_md(f, R);
    al_report_eval_md(f, R);
    md_models(f, R);
    md_unfinished(f, R);
}

/* ------------------------------------------------------------ public */

int al_report_write(const char *dir, al_report_stats *st, al_err *e)
{
    report R;
    memset(&R, 0, sizeof R);
    R.dir = dir;
    memset(st, 0, sizeof *st);
    if (strlen(dir) >= DIR_LEN - 300) return al_errf(e, "%s: path too long", dir);
    int rc = summary_read(dir, &R.sm, e);
    if (rc == 0) {
        read_marker(&R);
        build_groups(&R);
        select_trials(&R);
        choose_metric(&R);
        group_stats(&R);
        al_report_trends(&R);
        baseline_deltas(&R);
        mark_front(&R);
        qsort_r(R.g, (size_t)R.n_groups, sizeof *R.g, by_cache, &R);
        rc = al_report_write_configs(&R, e) || al_report_draw_plots(&R, e) ||
             al_report_stages_plot(&R, e) || al_report_eval_plot(&R, e) ? -2 : 0;
    }
    if (rc == 0) {
        char path[DIR_LEN + 64], tmp[DIR_LEN + 96];
        FILE *f = al_report_open(&R, "report.md", path, tmp, e);
        if (!f) rc = -2;
        else md_write(f, &R), rc = al_commit_atomic(f, tmp, path, e) ? -2 : 0;
    }
    *st = (al_report_stats){R.sm.n, R.n_ok, R.n_groups, R.n_front, R.plots, R.seq_on,
                            R.seq_looks, R.seq_done};
    summary_free(&R.sm);
    free(R.g);
    return rc;
}
