/*
 * report_claims.c - the "Claims under test" section: each claim of
 * sweep.claims with the paired difference this run measured between its
 * two configurations, and a verdict read off that difference's 95 %
 * t-interval (the same interval as every other comparison in the report).
 *
 * Let w be how much worse `config` is than `versus` (config minus versus
 * for a loss, versus minus config for an accuracy), [lo, hi] its interval:
 *   better    supported when hi < 0, contradicted when lo > 0
 *   worse     supported when lo > 0, contradicted when hi < 0
 *   no_worse  supported when hi < margin (worse by less than the margin at
 *             the interval's far end: a non-inferiority test), contradicted
 *             when lo > margin
 *   (none)    resolved when the interval excludes 0
 * Anything else is "cannot tell". A sweep makes several claims, and some
 * would come out "resolved" by chance at 95 % each; so the verdicts read
 * Bonferroni's simultaneous intervals over the m comparisons (the t
 * quantile at 1 - 0.025 / m: together they hold at 95 %), and the table
 * shows the plain 95 % interval beside them. One bound of an interval is a
 * one-sided test.
 */
#include "report_claims.h"

#include <math.h>
#include <string.h>

#include "al_util.h"

void al_report_claims_read(report_marker *mk, const json_t *claims)
{
    mk->n_claims = 0;
    for (size_t i = 0; i < json_array_size(claims) && mk->n_claims < AL_SWEEP_MAX_CLAIMS; i++) {
        const json_t *o = json_array_get(claims, i);
        const char *text = json_string_value(json_object_get(o, "claim"));
        const char *cfg = json_string_value(json_object_get(o, "config"));
        const char *vs = json_string_value(json_object_get(o, "versus"));
        const char *ex = json_string_value(json_object_get(o, "expect"));
        if (!text || !cfg || !vs) continue;
        al_sweep_claim *c = &mk->claims[mk->n_claims];
        memset(c, 0, sizeof *c);
        snprintf(c->text, sizeof c->text, "%s", text);
        snprintf(c->config, sizeof c->config, "%s", cfg);
        snprintf(c->versus, sizeof c->versus, "%s", vs);
        c->expect = ex ? al_claim_expect_parse(ex) : AL_CLAIM_ANY;
        c->margin = json_number_value(json_object_get(o, "margin"));
        if (c->expect < 0 || (c->expect == AL_CLAIM_NO_WORSE && !(c->margin > 0))) continue;
        mk->n_claims++;
    }
}

const char *al_report_claim_verdict(const al_sweep_claim *c, const al_stat *d, int maximize,
                                    char *why, size_t n)
{
    why[0] = 0;
    if (d->n < 2 || isnan(d->ci95)) {
        snprintf(why, n, "%d paired seed%s, no interval", d->n, d->n == 1 ? "" : "s");
        return "cannot tell";
    }
    if (al_stat_all_equal(d) && al_stat_p(d) < 1 && !al_stat_resolved(d)) {
        /* a zero-width interval from equal differences is no certainty
         * (al_stat_p); from AL_SIGN_TEST_PAIRS pairs on, the sign test
         * resolves it, unadjusted for the number of claims */
        snprintf(why, n, "all %d pairs differ by the same amount, no spread to size; "
                 "the sign test needs %d", d->n, AL_SIGN_TEST_PAIRS);
        return "cannot tell";
    }
    double w = maximize ? -d->mean : d->mean, lo = w - d->ci95, hi = w + d->ci95;
    switch (c->expect) {
    case AL_CLAIM_BETTER:
        if (hi < 0) return snprintf(why, n, "resolved better"), "supported";
        if (lo > 0) return snprintf(why, n, "resolved worse"), "contradicted";
        return snprintf(why, n, "not resolved"), "cannot tell";
    case AL_CLAIM_WORSE:
        if (lo > 0) return snprintf(why, n, "resolved worse"), "supported";
        if (hi < 0) return snprintf(why, n, "resolved better"), "contradicted";
        return snprintf(why, n, "not resolved"), "cannot tell";
    case AL_CLAIM_NO_WORSE:
        if (hi < c->margin)
            return snprintf(why, n, "worse by less than %g at the interval's end", c->margin),
                   "supported";
        if (lo > c->margin)
            return snprintf(why, n, "worse by more than %g", c->margin), "contradicted";
        return snprintf(why, n, "%sthe interval straddles the margin %g",
                        lo > 0 ? "resolved worse, but " : "", c->margin),
               "cannot tell";
    default:
        if (hi < 0) return snprintf(why, n, "better"), "resolved";
        if (lo > 0) return snprintf(why, n, "worse"), "resolved";
        return "not resolved";
    }
}

static const group *find_group(const al_report_analysis *A, const char *label)
{
    for (int k = 0; k < A->n_groups; k++)
        if (strcmp(A->g[k].first->group, label) == 0) return &A->g[k];
    return NULL;
}

static void claim_row(FILE *f, const al_report_analysis *A, const al_sweep_claim *c)
{
    const group *a = find_group(A, c->config), *b = find_group(A, c->versus);
    const char *exp = c->expect ? al_claim_expect_name(c->expect) : "–";
    fprintf(f, "| %s | %s | %s | %s", c->text, c->config, c->versus, exp);
    if (c->expect == AL_CLAIM_NO_WORSE) fprintf(f, " (margin %g)", c->margin);
    if (!a || !b) {
        fprintf(f, " | – | – | – | – | cannot tell: no finished trials of %s |\n",
                a ? c->versus : c->config);
        return;
    }
    al_stat d, adj;
    char why[128];
    al_report_paired(A, a, b, &d);
    adj = d;   /* simultaneous over the claims: Bonferroni */
    if (d.n >= 2)
        adj.ci95 = al_t_quantile(1 - 0.025 / A->mk.n_claims, d.n - 1) * d.sd / sqrt((double)d.n);
    const char *v = al_report_claim_verdict(c, &adj, A->use_acc, why, sizeof why);
    /* the whole cache at report.context when the summary has it (a bounded
     * layer's per-token figure says nothing of its saving), else per token */
    const row *x = a->first, *y = b->first;
    if (x->kv_at > 0 && y->kv_at > 0 && x->kv_context == y->kv_context)
        fprintf(f, " | %.0f vs %.0f B at %.0f tokens (%.2fx) | ", x->kv_at, y->kv_at,
                x->kv_context, x->kv_at / y->kv_at);
    else
        fprintf(f, " | %.0f vs %.0f B/token (%.2fx) | ", x->kv, y->kv,
                y->kv > 0 ? x->kv / y->kv : NAN);
    if (d.n >= 2)
        fprintf(f, "%+.4f [%+.4f, %+.4f] | [%+.4f, %+.4f]", d.mean, d.mean - d.ci95,
                d.mean + d.ci95, adj.mean - adj.ci95, adj.mean + adj.ci95);
    else if (d.n == 1) fprintf(f, "%+.4f | –", d.mean);
    else fprintf(f, "– | –");
    fprintf(f, " | %d | **%s**%s%s |\n", d.n, v, why[0] ? ": " : "", why);
}

void al_report_claims_md(FILE *f, const al_report_analysis *A)
{
    if (!A->mk.n_claims) return;
    fprintf(f, "\n## Claims under test\n\nWhat the papers claim, beside what this run measured "
            "(Δ: %s of the configuration minus that of the one it is compared with, paired by "
            "seed, with its 95 %% t-interval and the simultaneous interval over the %d "
            "comparisons; the two caches, whole at the report's context when the summary has "
            "it, else per token, and their ratio).\n\n",
            A->metric, A->mk.n_claims);
    fprintf(f, "| claim | configuration | versus | expect | KV cache | Δ %s [95 %%] | "
            "simultaneous [95 %%, Bonferroni] | pairs | verdict |\n", A->metric);
    fprintf(f, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (int i = 0; i < A->mk.n_claims; i++) claim_row(f, A, &A->mk.claims[i]);
    fprintf(f, "\n*supported* / *contradicted*: the simultaneous interval lies wholly on the "
            "claim's side or wholly against it (for no_worse: below the margin, or above it); "
            "*cannot tell*: it straddles. The simultaneous intervals (Bonferroni over the %d "
            "comparison%s) hold together at 95 %%, so a verdict is not one of the few that "
            "chance gives among many; the plain 95 %% interval is shown beside. A verdict holds "
            "at this run's scale (model, data, steps) only.\n", A->mk.n_claims,
            A->mk.n_claims == 1 ? "" : "s");
}
