/*
 * report_md.c - report.md: the analysis (report_analyze.c) as tables and
 * prose, section by section, in the table's order. It formats, and picks
 * which columns and notes apply; the sections on what lies beyond
 * summary.csv (evaluations through the cache, stages, the heads and the
 * causal mask) read their own files (report_eval.c, report_stages.c,
 * report_headstats.c, report_ablation.c).
 */
#include "al_report.h"
#include "report_plot.h"
#include "report_rows.h"
#include "report_claims.h"
#include "report_decode.h"
#include "report_eval.h"
#include "report_scaling.h"
#include "report_md.h"
#include "report_stages.h"
#include "report_table.h"
#include "report_trend.h"

#include "al_report_ablation.h"
#include "al_report_headstats.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const group *base_group(const al_report_analysis *A)
{
    for (int k = 0; k < A->n_groups; k++)
        if (A->g[k].is_base) return &A->g[k];
    return NULL;
}

/* ------------------------------------------------------------ report.md */

/* A table's cells (report_table.c), as markdown: heading, rule, rows, in
 * the tables' order (cheapest first). */
typedef int (*table_row_fn)(const al_report_analysis *, const group *, al_report_cell *);

static void md_table(FILE *f, const al_report_analysis *A, table_row_fn row_of)
{
    if (!A->n_groups) {
        fputs("No configurations.\n", f);
        return;
    }
    al_report_cell *c = al_calloc((size_t)al_report_table_width(A), sizeof *c);
    int *ix = al_calloc((size_t)A->n_groups, sizeof *ix);
    al_report_table_order(A, ix);
    int n = row_of(A, &A->g[0], c);
    fputc('|', f);
    for (int i = 0; i < n; i++) fprintf(f, " %s |", c[i].head);
    fputs("\n|", f);
    for (int i = 0; i < n; i++) fputs(" --- |", f);
    fputc('\n', f);
    for (int k = 0; k < A->n_groups; k++) {
        n = row_of(A, &A->g[ix[k]], c);
        fputc('|', f);
        for (int i = 0; i < n; i++) fprintf(f, " %s |", c[i].text);
        fputc('\n', f);
    }
    free(ix), free(c);
}

static void md_configs(FILE *f, const al_report_analysis *A)
{
    fprintf(f, "\n## Configurations\n\n");
    md_table(f, A, al_report_table_row);
    fprintf(f, "\nCheapest first: by the KV cache held at the report context, then by %s. "
            "*variant*: the attention and its settings. "
            "*seeds*: seeds in the statistics (a `+`: more are still running or "
            "pending). *Δ vs baseline*: the "
            "%s minus the baseline's, paired by seed (same seed: the same initialisation "
            "stream and the same batches), with its 95 %% t-interval; *resolved*: the "
            "interval excludes 0, after Holm's correction over the comparisons with the baseline "
            "(see below). With one seed there is a value but no interval.%s The model's shape, "
            "the sd over seeds, the validation loss, the trend and speed of training and the "
            "other costs are in the next table, *More about each configuration*; every "
            "trial's own figures are in `summary.csv`.\n", A->metric, A->metric,
            A->use_acc ? " *solved*: seeds whose accuracy reached 0.9; the median step: over "
            "the seeds whose validation accuracy reached 0.9 at an evaluation, the first "
            "such step; *vs baseline b:c*: seeds only the baseline solved and seeds only "
            "this one solved, paired by seed, with the exact McNemar p (**differs**: "
            "still below 0.05 after Holm over the comparisons with the baseline). One seed "
            "stuck on a plateau can keep the mean difference from resolving while the "
            "solved counts differ beyond chance." : "");
}

/* The columns the main table leaves out, in its order. */
static void md_details(FILE *f, const al_report_analysis *A)
{
    if (!A->n_groups) return;
    fprintf(f, "\n## More about each configuration\n\n");
    md_table(f, A, al_report_detail_row);
    fprintf(f, "\nIn the order of the table above. *sd*: sample standard deviation of the "
            "%s over seeds. *slope/100 steps*: "
            "the least-squares slope of the validation loss over the eval points of the last "
            "25 %% of training, per 100 steps, mean over seeds (a `*`: still improving, "
            "the loss fell more than %.2f nats over that quarter).%s\n", A->metric,
            AL_STILL_IMPROVING_FALL,
            al_report_any_col(A, offsetof(row, train_flops))
            ? " The costs (docs/costs.md): *train FLOPs* trained with; at the report context, "
              "the bytes one decode step reads per token, its FLOPs per token and their "
              "ratio." : "");
}

/* Parameter counts that differ make a loss gap mix cache size with model
 * size: say so, unless the sweep matched them. */
static void md_params(FILE *f, const al_report_analysis *A)
{
    double lo = INFINITY, hi = 0;
    int matched = 0;
    for (int k = 0; k < A->n_groups; k++) {
        const row *w = A->g[k].first;
        if (isnan(w->params)) continue;
        lo = w->params < lo ? w->params : lo;
        hi = w->params > hi ? w->params : hi;
        matched |= !isnan(w->params_to);
    }
    if (!(hi > 0) || (hi - lo) / hi < 0.01) return;
    char a[64], b[64];
    al_report_fmt_int(a, sizeof a, lo);
    al_report_fmt_int(b, sizeof b, hi);
    fprintf(f, "\n**Parameter counts differ** (%s to %s, %.1f %%)%s\n", a, b,
            100 * (hi - lo) / hi, matched
            ? ": `model.match_params` matched them as closely as its step allows (the "
              "*matched to* column), or some configurations were not matched."
            : ": a difference in quality mixes the cache with the model's size. Set "
              "`model.match_params: {to: {variant: ...}, by: d_ff}` (or `by: n_layer`) to "
              "compare at equal parameters.");
}

/* Configurations that are one model under two names (gqa with n_kv_head =
 * n_head beside mha), or that differ only outside `model`: summary.csv's
 * model hash says so (al_sweep_model_hash). One line per set, naming
 * every configuration of it. */
static void md_same_model(FILE *f, const al_report_analysis *A)
{
    int *done = al_calloc((size_t)A->n_groups + 1, sizeof *done), head = 0;
    for (int k = 0; k < A->n_groups; k++) {
        const char *h = A->g[k].first->model;
        if (done[k] || !h || !h[0]) continue;
        int n = 1;
        for (int j = k + 1; j < A->n_groups; j++)
            n += !done[j] && A->g[j].first->model && !strcmp(A->g[j].first->model, h);
        if (n < 2) continue;
        if (!head++)
            fputs("\n**The same model under more than one configuration.** Their resolved "
                  "`model` keys are equal (mha, mqa and gqa counted as gqa with their K/V "
                  "heads): whatever else differs between them lies outside `model`, and "
                  "where nothing does, their difference is seed noise.\n\n", f);
        fprintf(f, "- %s", A->g[k].first->group);
        for (int j = k + 1, i = 1; j < A->n_groups; j++)
            if (!done[j] && A->g[j].first->model && !strcmp(A->g[j].first->model, h)) {
                done[j] = 1;
                fprintf(f, "%s%s", ++i == n ? " and " : ", ", A->g[j].first->group);
            }
        fputs(" are the same model.\n", f);
    }
    free(done);
}

/* "yes", or "not resolved; about N seeds would resolve a difference this
 * size" (the seeds for 80 % power at the observed mean and sd). */
static void fmt_verdict(char *buf, size_t n, const group_vs_base *v)
{
    if (v->resolved) snprintf(buf, n, "**yes**");
    else if (!v->seeds_needed)
        snprintf(buf, n, v->delta.n < 2 ? "no (too few pairs to size)"
                                        : "no (no difference to size)");
    else if (v->seeds_needed > AL_SEEDS_NEEDED_CAP)
        snprintf(buf, n, "not resolved; more than %d seeds would be needed for a difference "
                 "this size", AL_SEEDS_NEEDED_CAP);
    else snprintf(buf, n, "not resolved; about %d seeds would resolve a difference this size",
                  v->seeds_needed);
}

static void md_deltas_rule(FILE *f, const al_report_analysis *A, int m)
{
    if (!A->seq.on) {
        fprintf(f, "\n*unadjusted*: the pair's own 95 %% interval excludes 0 (p < 0.05). "
                "*resolved (Holm)*: still so after Holm's correction over the family of the "
                "%d comparisons with the baseline%s (the smallest p against 0.05/%d, the next "
                "against 0.05/%d, ...; the chance of any false \"resolved\" stays at most "
                "5 %%). The verdicts above and the Pareto front use the Holm-adjusted ones. "
                "*seeds for 80 %%*: the seeds at which a two-sided paired t test at 5 %% has "
                "80 %% power if the true difference and sd are the ones observed (noncentral "
                "t, integrated numerically).\n", m, al_report_n_bases(A) > 1 ? "s" : "", m,
                m > 1 ? m - 1 : 1);
        return;
    }
    int n_at[AL_SEQ_MAX_LOOKS], looks = al_seq_looks(&A->seq.plan, n_at, NULL);
    fprintf(f, "\nSeeds were added in rounds (`sweep.seeds: {min: %d, max: %d, until: "
            "resolved}`): looks at", A->seq.plan.min, A->seq.plan.max);
    for (int k = 0; k < looks; k++) fprintf(f, "%s %d", k ? "," : "", n_at[k]);
    fprintf(f, " seeds; %d taken. At each look the comparisons not yet resolved are "
            "Holm-corrected at that look's share of 5 %% (Pocock-type alpha spending, "
            "α ln(1 + (e − 1) n/max)); once resolved stays resolved, so the chance of any "
            "false \"resolved\" over all looks is at most 5 %%. *resolved (Holm)* is that "
            "verdict; *unadjusted* is the last look's own 95 %% interval. %s\n",
            A->seq.looks, A->seq.done ? "The rounds are over." : "More rounds are due.");
}

static void md_deltas(FILE *f, const al_report_analysis *A)
{
    const group *base = base_group(A);
    if (!base || A->n_groups < 2) return;
    int unresolved = 0;
    if (al_report_n_bases(A) > 1)
        fputs("\n## Paired differences against each configuration's baseline\n\n", f);
    else fprintf(f, "\n## Paired differences against the baseline (%s)\n\n", base->first->group);
    fprintf(f, "| configuration | KV bytes/token | pairs | Δ %s | 95 %% interval | p | "
            "unadjusted | resolved (Holm) | seeds for 80 %% |\n"
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n", A->metric);
    for (int k = 0; k < A->n_groups; k++) {
        const group *g = &A->g[k];
        if (g->is_base) continue;
        char kv[64], lo[32] = "–", hi[32] = "–", p[32] = "–", need[32] = "–", v[160], nm[600];
        al_report_fmt_int(kv, sizeof kv, g->first->kv);
        if (g->vs.delta.n > 1) {
            snprintf(lo, sizeof lo, "%+.4f", g->vs.delta.mean - g->vs.delta.ci95);
            snprintf(hi, sizeof hi, "%+.4f", g->vs.delta.mean + g->vs.delta.ci95);
        }
        if (!isnan(g->vs.p)) snprintf(p, sizeof p, "%.2g", g->vs.p);
        if (g->vs.seeds_needed > AL_SEEDS_NEEDED_CAP)
            snprintf(need, sizeof need, "> %d", AL_SEEDS_NEEDED_CAP);
        else if (g->vs.seeds_needed) snprintf(need, sizeof need, "%d", g->vs.seeds_needed);
        unresolved += !g->vs.resolved;
        char mean[32] = "–";
        if (!isnan(g->vs.delta.mean)) snprintf(mean, sizeof mean, "%+.4f", g->vs.delta.mean);
        fmt_verdict(v, sizeof v, &g->vs);
        fprintf(f, "| %s | %s | %d | %s | [%s, %s] | %s | %s | %s | %s |\n",
                al_report_vs_name(A, g, nm, sizeof nm), kv, g->vs.delta.n, mean, lo, hi, p,
                al_stat_resolved(&g->vs.delta) ? "yes" : "no", v, need);
    }
    md_deltas_rule(f, A, A->n_groups - al_report_n_bases(A));
    fprintf(f, "\n%s\n", unresolved
            ? "A difference that is not resolved could change sign with other seeds: do not "
              "read a ranking into it. More seeds narrow the interval (as 1/sqrt(n))."
            : "Every difference is resolved, after the correction.");
}

/* Still improving: the ranking is one of learning speed, not of where the
 * models end. */
static void md_trend(FILE *f, const al_report_analysis *A)
{
    int n = 0, any = 0;
    for (int k = 0; k < A->n_groups; k++) {
        any |= A->g[k].trend.n > 0;
        n += al_report_still_improving(&A->g[k].trend);
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
            "eval points there times the quarter's steps, mean over seeds):", n, A->n_groups,
            AL_STILL_IMPROVING_FALL);
    for (int k = 0, i = 0; k < A->n_groups; k++)
        if (al_report_still_improving(&A->g[k].trend))
            fprintf(f, "%s %s (%.4f)", i++ ? "," : "", A->g[k].first->group,
                    A->g[k].trend.tail_fall);
    fputs(". The comparison is then one of how fast the models learn, not of where they "
          "end: train longer to rank the end points.\n", f);
}

/* Did the gaps to the baseline move over the last quarter? A gap that
 * narrows there is partly one of learning speed: something the slope alone
 * cannot say. The converse is no promise (the note printed below). */
static void md_gaps(FILE *f, const al_report_analysis *A)
{
    const group *base = base_group(A);
    int any = 0, narrowing = 0;
    for (int k = 0; k < A->n_groups; k++) any |= A->g[k].gap.change.n > 0;
    if (!base || !any) return;
    fprintf(f, "\n### Did the gaps to %s move over the last quarter?\n\n| configuration | seeds "
            "| val Δ at 75 %% | val Δ at the end | change [95 %%] | p | trend (Holm) |\n"
            "|---|---:|---|---|---|---:|---|\n",
            al_report_n_bases(A) > 1 ? "each one's baseline" : base->first->group);
    for (int k = 0; k < A->n_groups; k++) {
        const group *g = &A->g[k];
        if (g->is_base || !g->gap.change.n) continue;
        char q[64], e[64], c[96], p[32] = "–", nm[600];
        al_report_fmt_delta(c, sizeof c, &g->gap.change);
        if (g->gap.change.n > 1) snprintf(p, sizeof p, "%.3g", al_stat_p(&g->gap.change));
        snprintf(q, sizeof q, "%+.4f (step %.0f)", g->gap.q.mean, g->gap.q_step);
        snprintf(e, sizeof e, "%+.4f (step %.0f)", g->gap.end.mean, g->gap.end_step);
        const char *t = al_report_gap_trend(&g->gap);
        narrowing += strcmp(t, "narrowing") == 0;
        fprintf(f, "| %s | %d | %s | %s | %s | %s | %s |\n",
                al_report_vs_name(A, g, nm, sizeof nm), g->gap.change.n, q, e, c, p,
                t[0] ? t : "one seed: no verdict");
    }
    fprintf(f, "\n*val Δ*: the configuration's validation loss minus %s's, paired by seed, mean "
            "over seeds, at the first eval at or after 75 %% of training and at the last; "
            "*change*: the end's minus the first's, per seed, with its 95 %% t-interval; "
            "*trend*: narrowing or widening when the change is beyond seed noise after Holm's "
            "correction over the comparisons with the baseline, else steady. Steady or widening "
            "does not show that a gap will hold: under a cosine schedule the last quarter is "
            "the annealing, and gaps that held steady or widened there have shrunk with "
            "longer training (docs/sweeps.md, \"Did the gaps move?\").",
            al_report_n_bases(A) > 1 ? "its baseline" : base->first->group);
    fputs(narrowing ? " **A narrowing gap is partly one of learning speed**: the configuration "
          "was catching up when training stopped, so longer training may shrink the gap "
          "further, and a ranking that rests on it may not hold where the models end.\n"
          : "\n", f);
}

/* Trials of one configuration on different CPUs, OpenBLAS cores or thread
 * counts: their numbers may differ in the last bits (README,
 * "Reproducibility"). */
static void md_machines(FILE *f, const al_report_analysis *A)
{
    int n = 0;
    for (int k = 0; k < A->n_groups; k++) n += A->g[k].machine[0] != 0;
    if (!n) return;
    fputs("\n**Trials of one configuration ran on different machines** (CPU model, "
          "OpenBLAS core, threads), so they are not bit-for-bit comparable:\n\n", f);
    for (int k = 0; k < A->n_groups; k++)
        if (A->g[k].machine[0]) fprintf(f, "- %s: %s\n", A->g[k].first->group, A->g[k].machine);
}

static void md_tuning(FILE *f, const al_report_analysis *A)
{
    if (!A->any_select) return;
    const char *by = "";
    for (int i = 0; i < A->sm.n && !by[0]; i++) by = A->sm.rows[i].select_by;
    fprintf(f, "\n## Tuned, then compared\n\nFor every configuration and seed the trial with "
            "the best %s among the values of the select axes stands for it (the others "
            "trained too and are in `summary.csv`); its %s is what the tables above use. "
            "The values chosen:\n\n| configuration | chosen (times) |\n| --- | --- |\n",
            by[0] ? by : "validation loss", A->metric);
    for (int k = 0; k < A->n_groups; k++)
        fprintf(f, "| %s | %s |\n", A->g[k].first->group,
                A->g[k].tuned[0] ? A->g[k].tuned : "–");
}

/* The front in order of cache size, with what is and is not resolved. */
static void md_front(FILE *f, const al_report_analysis *A)
{
    long ctx = al_report_held_context(A);
    char at[64] = "bytes/token";
    if (ctx) {
        fprintf(f, "\n## Pareto front: %s against memory held at %ld tokens\n\n", A->metric,
                ctx);
        snprintf(at, sizeof at, "bytes held at %ld tokens", ctx);
    } else {
        fprintf(f, "\n## Pareto front: %s against KV-cache bytes per token\n\n", A->metric);
    }
    if (!A->n_front) {
        fputs("No configuration finished, so there is no front.\n", f);
        return;
    }
    if (ctx)
        fputs("Memory held is every layer's KV cache and state at the report context "
              "(`report.context`; f32): a state layer's fixed state, a window's bounded rows. ",
              f);
    fprintf(f, "On the means, no other configuration has both a smaller (or equal) cache and "
            "a %s%s. A place is *resolved* when every comparison that decides it is resolved "
            "(paired t test, Holm-corrected over the family of all these comparisons at "
            "5 %%): for a front configuration, against each cheaper front configuration; for "
            "one off the front, against each that dominates it. "
            "From the smallest cache up:\n\n", A->use_acc ? "higher (or equal) accuracy"
            : "lower (or equal) loss", al_report_any_unmasked(A) ? " (configurations without the causal "
            "mask are left out: their loss is not comparable)" : "");
    for (int k = A->n_groups - 1; k >= 0; k--) {
        const group *g = &A->g[k];
        if (!g->front.on) continue;
        char kv[64], m[64];
        al_report_fmt_int(kv, sizeof kv, al_report_held(g->first));
        al_report_fmt_ci(m, sizeof m, &g->quality.q);
        fprintf(f, "- **%s**: %s %s, %s %s", g->first->group, kv, at, A->metric, m);
        if (!g->front.resolved)
            fprintf(f, "; *not resolved from %s* (within seed noise)", g->front.against);
        fputs("\n", f);
    }
    int off = 0;
    for (int k = 0; k < A->n_groups; k++)
        off += !A->g[k].front.on && al_report_drawable(&A->g[k]) && !A->g[k].front.resolved;
    if (!off) return;
    fputs("\nOff the front but not resolved from the front configuration that dominates "
          "it (it may be as good):", f);
    for (int k = 0, i = 0; k < A->n_groups; k++) {
        const group *g = &A->g[k];
        if (g->front.on || !al_report_drawable(g) || g->front.resolved) continue;
        fprintf(f, "%s %s (vs %s)", i++ ? "," : "", g->first->group, g->front.against);
    }
    fputs(".\n", f);
}

static void md_unfinished(FILE *f, const al_report_analysis *A)
{
    int n = 0;
    for (int i = 0; i < A->sm.n; i++) n += !al_report_row_ok(&A->sm.rows[i]);
    if (!n) return;
    fprintf(f, "\n## Trials that did not finish (%d)\n\nNot in the statistics above. A "
            "diverged trial is a result (its loss became NaN or Inf); a failed, killed, "
            "interrupted or pending one runs again on the next `attnlab sweep` of the same "
            "file.\n\n| trial | status | reason |\n| --- | --- | --- |\n", n);
    for (int i = 0; i < A->sm.n; i++) {
        const row *w = &A->sm.rows[i];
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
static void md_models(FILE *f, const al_report_analysis *A)
{
    al_hs_trial *t = al_calloc((size_t)A->sm.n + 1, sizeof *t);
    int n = 0;
    al_err e;
    for (int k = 0; k < A->n_groups; k++)
        for (int i = 0; i < A->sm.n; i++) {
            const row *w = &A->sm.rows[i];
            if (strcmp(w->group, A->g[k].first->group) == 0)
                t[n++] = (al_hs_trial){w->trial, w->group, al_report_row_ok(w) && w->selected,
                                       w->causal, w->kv, w->val_loss, w->q};
        }
    if (al_headstats_section(f, A->dir, A->metric, t, n, &e) ||
        al_ablation_section(f, A->dir, t, n, &e))
        fprintf(f, "\n**Incomplete:** %s\n", e.msg);
    free(t);
}

/* The plots against the other costs, each with its own front, when the
 * summary has them (docs/costs.md). */
static void md_cost_plots(FILE *f, const al_report_analysis *A)
{
    if (al_report_cost_plotted(A, AL_COST_READ))
        fprintf(f, "![%s against bytes read per decoded token](tradeoff_read.png)\n\n"
                "The same configurations against the bytes one decode step reads per token "
                "at the report context (the cache rows at their storage dtype and every "
                "weight, batch 1), with that axis's own Pareto front. "
                "[SVG](tradeoff_read.svg)\n\n", A->metric);
    if (al_report_cost_plotted(A, AL_COST_FLOPS))
        fprintf(f, "![%s against training FLOPs](tradeoff_flops.png)\n\n"
                "And against the FLOPs each configuration trained with (its "
                "train_flops_per_token times the tokens of its steps), with its own front: "
                "under train.flops every configuration sits at one compute. "
                "[SVG](tradeoff_flops.svg)\n\n", A->metric);
}

static void md_plots(FILE *f, const al_report_analysis *A, int plots)
{
    fputs("\n## Plots\n\n", f);
    long ctx = al_report_held_context(A);
    char held[64] = "KV-cache bytes per token";
    if (ctx) snprintf(held, sizeof held, "memory held at %ld tokens", ctx);
    if (plots == AL_PLOTS_DRAWN) {
        fprintf(f, "![%s against %s](tradeoff.png)\n\n"
                "Each point is one configuration: the mean over seeds, with its 95 %% "
                "t-interval as error bars (none for one seed). The dashed line is the Pareto "
                "front of the means; a hollow point is not resolved from a front neighbour "
                "(see above), so its place could change with other seeds; the square is the "
                "cheapest front point, which has no cheaper neighbour to be resolved from; "
                "points at the same place share one label%s. "
                "[SVG](tradeoff.svg)\n\n"
                "![validation loss curves](curves.png)\n\n"
                "Validation loss against optimizer step (and against tokens trained, in a "
                "second panel, when the configurations train different tokens per step): the "
                "mean over seeds, with a band from the lowest to the highest seed. "
                "[SVG](curves.svg)\n\n", A->metric, held,
                al_report_any_unmasked(A) ? "; configurations without the causal mask are not drawn"
                : "");
        md_cost_plots(f, A);
        fputs("The plots are drawn by gnuplot from `tradeoff.gp` and `curves.gp` (and their "
              "`.dat` files), kept here to edit and re-run.\n", f);
    } else if (plots == AL_PLOTS_NO_GNUPLOT) {
        fputs("**No plots: gnuplot was not found.** Install it (Debian: `apt-get install "
              "gnuplot-nox`) and run `attnlab report` on this directory again; the scripts "
              "`tradeoff.gp` and `curves.gp` are already here.\n", f);
    } else if (plots == AL_PLOTS_FAILED) {
        fputs("**No plots: gnuplot failed** (its messages are in `gnuplot.log`); the scripts "
              "`tradeoff.gp` and `curves.gp` are here.\n", f);
    } else {
        fputs("No plots: no trial finished.\n", f);
    }
}

static void md_write(FILE *f, const al_report_analysis *A, int plots)
{
    int counts[2] = {0};
    fprintf(f, "# Sweep report: %s\n\n", A->mk.name);
    if (A->mk.description[0]) fprintf(f, "%s\n\n", A->mk.description);
    if (A->mk.file[0])
        fprintf(f, "Experiment file: `%s`; re-run (finished trials are kept) with `attnlab "
                "sweep %s%s`.\n\n", A->mk.file, A->mk.file, A->mk.sets);
    for (int i = 0; i < A->sm.n; i++) counts[al_report_row_ok(&A->sm.rows[i])]++;
    if (counts[0])
        fprintf(f, "%d trials: %d ok, %d did not finish (listed below). ", A->sm.n, counts[1],
                counts[0]);
    else
        fprintf(f, "%d trials, all ok. ", A->sm.n);
    fprintf(f, "%d configurations. Quality is the **%s**%s, as the mean over seeds with a 95 %% "
            "Student-t interval; KV bytes/token is the f32 K/V cache of one token summed over "
            "all layers. Losses are in nats per token. The same numbers, one row per "
            "configuration, are in `configs.csv`.\n", A->n_groups, A->metric, A->use_test
            ? " (the held-out test split, scored once at the end of each trial; validation "
              "only steered training and selection)"
            : " (these trials have no test split, so validation stands in for it)");
    al_report_claims_md(f, A);
    md_configs(f, A);
    md_params(f, A);
    md_same_model(f, A);
    md_details(f, A);
    md_deltas(f, A);
    md_trend(f, A);
    md_gaps(f, A);
    md_machines(f, A);
    md_tuning(f, A);
    md_front(f, A);
    md_plots(f, A, plots);
    al_report_stages_md(f, A, plots);
    al_report_eval_md(f, A, plots);
    al_report_decode_md(f, A);
    al_report_scaling_md(f, A, plots);
    md_models(f, A);
    md_unfinished(f, A);
}

char *al_report_md_text(const al_report_analysis *A, int plots, size_t *len)
{
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    AL_ASSERT(f);
    md_write(f, A, plots);
    AL_ASSERT(fclose(f) == 0);
    return text;
}

int al_report_write_md(const al_report_analysis *A, const char *text, size_t len, al_err *e)
{
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96];
    FILE *f = al_report_open(A, "report.md", path, tmp, e);
    if (!f) return -1;
    fwrite(text, 1, len, f);
    return al_commit_atomic(f, tmp, path, e);
}
