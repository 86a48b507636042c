/*
 * report_scaling_write.c - the writers of the Scaling section
 * (report_scaling.h): scaling.csv, the plots (loss against compute per
 * design; the gap to the baseline against compute with its band), and the
 * section of report.md. They read the analysis and compute nothing.
 */
#include "report_scaling.h"
#include "report_plot.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------ scaling.csv */

static void put(FILE *f, double v)
{
    if (isfinite(v)) fprintf(f, ",%.6g", v);
    else fputs(",", f);
}

static void put_iv(FILE *f, const al_interval *v)
{
    put(f, v->est), put(f, v->lo), put(f, v->hi);
}

/* "closes", or "closes; held-out check failed" (its own or the baseline's). */
static void verdict_text(char *buf, size_t n, const scaling_design *d)
{
    snprintf(buf, n, "%s%s%s%s", al_report_scaling_verdict_name(d->verdict),
             d->n_seed < 2 ? "; one seed: no interval" : "",
             d->ho_failed ? "; held-out check failed" : "",
             d->base_ho_failed ? "; the baseline's held-out check failed" : "");
}

static int write_csv(const al_report_analysis *A, const scaling_analysis *S, al_err *e)
{
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96], v[128];
    FILE *f = al_report_open(A, "scaling.csv", path, tmp, e);
    if (!f) return -1;
    fputs("attention,n_budgets,n_seeds,E,E_lo,E_hi,A,alpha,alpha_lo,alpha_hi,gap_at_max,"
          "gap_at_max_lo,gap_at_max_hi,gap_10x,gap_10x_lo,gap_10x_hi,gap_100x,gap_100x_lo,"
          "gap_100x_hi,gap_change_10x,gap_change_10x_lo,gap_change_10x_hi,heldout_predicted,"
          "heldout_lo,heldout_hi,heldout_measured,heldout_error,heldout_inside,verdict,E_at_bound\n",
          f);
    for (int k = 0; k < S->n_design; k++) {
        const scaling_design *d = &S->d[k];
        al_interval none = {NAN, NAN, NAN}, zero = {0, 0, 0};
        const al_interval *g = d->is_base ? (al_interval[3]){zero, zero, zero} : d->gap;
        fprintf(f, "%s,%d,%d", d->name, S->n_budget, d->n_seed);
        put_iv(f, d->fit_ok ? &d->fit.E : &none);
        put(f, d->fit_ok ? d->fit.fit.A : NAN);
        put_iv(f, d->fit_ok ? &d->fit.alpha : &none);
        for (int i = 0; i < 3; i++) put_iv(f, d->fit_ok ? &g[i] : &none);
        put_iv(f, d->is_base ? &zero : d->fit_ok ? &d->change : &none);
        put(f, d->ho.predicted), put(f, d->ho.lo), put(f, d->ho.hi);
        put(f, d->ho.measured), put(f, d->ho.error);
        fprintf(f, ",%s", d->ho.ok ? (d->ho.inside ? "true" : "false") : "");
        verdict_text(v, sizeof v, d);
        fprintf(f, ",%s,%s\n", v, d->fit_ok && d->fit.fit.E_at_bound ? "true" : "false");
    }
    return al_commit_atomic(f, tmp, path, e);
}

/* ------------------------------------------------------------ plots */

/* scaling_loss.dat: per design (index k) the points (C size mean ci95);
 * scaling_fit.dat: per design the frontier (index 2k: C loss) and the fit
 * (index 2k+1: C loss, from the smallest budget to 100x the largest). */
static int write_loss_data(const al_report_analysis *A, const scaling_analysis *S, al_err *e)
{
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96];
    FILE *f = al_report_open(A, "scaling_loss.dat", path, tmp, e);
    if (!f) return -1;
    fprintf(f, "# compute size mean_%s ci95, one block per design\n", S->metric[0] == 't'
            ? "test_loss" : "val_loss");
    for (int k = 0; k < S->n_design; k++) {
        fprintf(f, "%s# %s\n", k ? "\n\n" : "", S->d[k].name);
        for (int s = 0; s < S->n_size; s++)
            for (int b = 0; b < S->n_budget; b++)
                if (isfinite(S->d[k].mean[s][b]))
                    fprintf(f, "%.6g %d %.9g %.9g\n", S->C[b], s, S->d[k].mean[s][b],
                            S->d[k].ci95[s][b]);
    }
    if (al_commit_atomic(f, tmp, path, e) || !(f = al_report_open(A, "scaling_fit.dat", path,
                                                                   tmp, e)))
        return -1;
    fputs("# per design: the frontier (compute loss), then the fit (compute loss)\n", f);
    for (int k = 0; k < S->n_design; k++) {
        const scaling_design *d = &S->d[k];
        fprintf(f, "%s# %s frontier\n", k ? "\n\n" : "", d->name);
        for (int b = 0; b < S->n_budget; b++)
            if (isfinite(d->front[b])) fprintf(f, "%.6g %.9g\n", S->C[b], d->front[b]);
        fprintf(f, "\n\n# %s fit\n", d->name);
        for (int i = 0; d->fit_ok && i < AL_SCALING_BAND; i++)
            fprintf(f, "%.6g %.9g\n", S->band_C[i], al_pow_eval(&d->fit.fit, S->band_C[i]));
        if (!d->fit_ok) fputs("NaN NaN\n", f);   /* an empty block would end the file */
    }
    return al_commit_atomic(f, tmp, path, e);
}

static int write_loss_script(const al_report_analysis *A, const scaling_analysis *S, al_err *e)
{
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96];
    FILE *f = al_report_open(A, "scaling_loss.gp", path, tmp, e);
    if (!f) return -1;
    int cols = S->n_design < 3 ? S->n_design : 3, rows = (S->n_design + cols - 1) / cols;
    char size[32];
    snprintf(size, sizeof size, "%d,%d", 480 * cols, 400 * rows);
    al_report_gp_header(f, "scaling_loss");
    al_report_gp_terminal(f, size);
    fprintf(f, "  set multiplot layout %d,%d title \"%s: %s against training compute (mean "
            "over seeds, 95 %% intervals)\"\n  set logscale x 10\n  set grid\n  set key top "
            "right\n  set xlabel \"training FLOPs\"\n  set ylabel \"%s (nats/token)\"\n"
            "  set format x \"%%.0e\"\n", rows, cols, A->mk.name, S->metric, S->metric);
    for (int k = 0; k < S->n_design; k++)
        fprintf(f, "  set title \"%s\"\n"
                "  plot \"scaling_loss.dat\" index %d using 1:3:4:($2 + 2) with yerrorbars pt 7 ps 0.7 "
                "lc variable title \"sizes (colour: size)\", \\\n"
                "       \"scaling_fit.dat\" index %d using 1:2 with linespoints pt 5 lw 2 "
                "lc rgb \"#202020\" title \"frontier\", \\\n"
                "       \"\" index %d using 1:2 with lines dt 2 lw 2 lc rgb \"#c03030\" "
                "title \"fit E + A C^-alpha\"\n", S->d[k].name, k, 2 * k, 2 * k + 1);
    fputs("  unset multiplot\n  unset output\n}\n", f);
    return al_commit_atomic(f, tmp, path, e);
}

/* scaling_gap.dat: per design but the baseline, the measured frontier gap
 * (index 2j: C gap) and the fitted gap with its band (2j+1: C gap lo hi). */
static int write_gap_data(const al_report_analysis *A, const scaling_analysis *S, al_err *e)
{
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96];
    FILE *f = al_report_open(A, "scaling_gap.dat", path, tmp, e);
    if (!f) return -1;
    fputs("# per design: measured frontier gap (compute gap), then the fitted gap "
          "(compute gap lo95 hi95)\n", f);
    for (int k = 0, j = 0; k < S->n_design; k++) {
        const scaling_design *d = &S->d[k];
        if (d->is_base) continue;
        fprintf(f, "%s# %s measured\n", j++ ? "\n\n" : "", d->name);
        for (int b = 0; b < S->n_budget; b++)
            if (isfinite(d->gap_meas[b])) fprintf(f, "%.6g %.9g\n", S->C[b], d->gap_meas[b]);
        fprintf(f, "\n\n# %s fit\n", d->name);
        int any = 0;
        for (int i = 0; d->fit_ok && i < AL_SCALING_BAND; i++)
            if (isfinite(d->band[i].est))
                any++, fprintf(f, "%.6g %.9g %.9g %.9g\n", S->band_C[i], d->band[i].est,
                               d->band[i].lo, d->band[i].hi);
        if (!any) fputs("NaN NaN NaN NaN\n", f);
    }
    return al_commit_atomic(f, tmp, path, e);
}

static int write_gap_script(const al_report_analysis *A, const scaling_analysis *S, al_err *e)
{
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96];
    FILE *f = al_report_open(A, "scaling_gap.gp", path, tmp, e);
    if (!f) return -1;
    al_report_gp_header(f, "scaling_gap");
    al_report_gp_terminal(f, "1000,650");
    fprintf(f, "  set title \"%s: gap to %s in %s against training compute (fit with its "
            "95 %% band; points: measured frontiers)\"\n  set logscale x 10\n  set grid\n"
            "  set key outside right\n  set xlabel \"training FLOPs (dotted: largest budget)\"\n"
            "  set ylabel \"gap (nats/token)\"\n  set format x \"%%.0e\"\n"
            "  set arrow from %.6g, graph 0 to %.6g, graph 1 nohead dt 3\n  plot 0 with lines "
            "lc rgb \"#808080\" notitle", A->mk.name, S->d[S->base].name, S->metric,
            S->C[S->n_budget - 1], S->C[S->n_budget - 1]);
    for (int k = 0, j = 0; k < S->n_design; k++) {
        if (S->d[k].is_base) continue;
        fprintf(f, ", \\\n       \"scaling_gap.dat\" index %d using 1:3:4 with filledcurves "
                "fs transparent solid 0.15 lc %d notitle, \\\n"
                "       \"\" index %d using 1:2 with lines lw 2 lc %d title \"%s\", \\\n"
                "       \"\" index %d using 1:2 with points pt 7 lc %d notitle", 2 * j + 1, j + 1,
                2 * j + 1, j + 1, S->d[k].name, 2 * j, j + 1);
        j++;
    }
    fputs("\n  unset output\n}\n", f);
    return al_commit_atomic(f, tmp, path, e);
}

int al_report_scaling_write(const al_report_analysis *A, int plots, al_err *e)
{
    const scaling_analysis *S = A->scaling;
    if (!S || !S->n_design) return 0;
    if (write_csv(A, S, e) || write_loss_data(A, S, e) || write_loss_script(A, S, e))
        return -1;
    if (S->n_design > 1 && (write_gap_data(A, S, e) || write_gap_script(A, S, e))) return -1;
    if (plots != AL_PLOTS_DRAWN) return 0;
    int st = al_report_gnuplot(A, "scaling_loss");
    if (st == AL_PLOTS_DRAWN && S->n_design > 1) st = al_report_gnuplot(A, "scaling_gap");
    if (st != AL_PLOTS_DRAWN)
        fprintf(stderr, "attnlab: report: gnuplot could not draw the scaling plots (see "
                "gnuplot.log)\n");
    return 0;
}

/* ------------------------------------------------------------ report.md */

static void fmt_iv(char *buf, size_t n, const al_interval *v, int sign)
{
    if (!isfinite(v->est)) snprintf(buf, n, "-");
    else if (!isfinite(v->lo)) snprintf(buf, n, sign ? "%+.4f" : "%.4f", v->est);
    else snprintf(buf, n, sign ? "%+.4f [%+.4f, %+.4f]" : "%.4f [%.4f, %.4f]", v->est, v->lo,
                  v->hi);
}

static void md_frontier(FILE *f, const scaling_analysis *S)
{
    fputs("\nThe compute frontier (the lowest seed-mean loss over sizes at each budget; the "
          "size that reaches it in brackets):\n\n| design |", f);
    for (int b = 0; b < S->n_budget; b++) fprintf(f, " %.3g FLOPs |", S->C[b]);
    fputs("\n| --- |", f);
    for (int b = 0; b < S->n_budget; b++) fputs(" --- |", f);
    for (int k = 0; k < S->n_design; k++) {
        fprintf(f, "\n| %s%s |", S->d[k].name, S->d[k].is_base ? " (baseline)" : "");
        for (int b = 0; b < S->n_budget; b++)
            if (isfinite(S->d[k].front[b]))
                fprintf(f, " %.4f (size %d) |", S->d[k].front[b], S->d[k].front_size[b]);
            else fputs(" - |", f);
    }
    fputs("\n", f);
}

static void md_fits(FILE *f, const scaling_analysis *S)
{
    char e[96], al[96], g[3][96], ch[96], v[128];
    fprintf(f, "\nThe fit L(C) = E + A·C^-α to each frontier, and the gap to **%s** "
            "(this design's fitted loss minus the baseline's, nats) at the largest budget "
            "C_max = %.3g, extrapolated to 10x and 100x, and its change from C_max to 10x; "
            "95 %% intervals in brackets, from %d bootstrap resamples of the seeds paired "
            "across designs:\n\n"
            "| design | E | A | α | gap at C_max | gap at 10x | gap at 100x | change to 10x | "
            "verdict |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
            S->d[S->base].name, S->C[S->n_budget - 1], AL_SCALING_BOOT);
    for (int k = 0; k < S->n_design; k++) {
        const scaling_design *d = &S->d[k];
        fmt_iv(e, sizeof e, &d->fit.E, 0);
        if (d->fit_ok && d->fit.fit.E_at_bound)   /* docs/scaling.md: E >= 0 */
            snprintf(e + strlen(e), sizeof e - strlen(e), " (bound)");
        fmt_iv(al, sizeof al, &d->fit.alpha, 0);
        for (int i = 0; i < 3; i++) fmt_iv(g[i], sizeof g[i], &d->gap[i], 1);
        fmt_iv(ch, sizeof ch, &d->change, 1);
        verdict_text(v, sizeof v, d);
        if (!d->fit_ok) fprintf(f, "| %s | the fit failed | | | | | | | %s |\n", d->name, v);
        else if (d->is_base) fprintf(f, "| %s | %s | %.4g | %s | | | | | baseline%s |\n",
                                     d->name, e, d->fit.fit.A, al,
                                     d->ho_failed ? "; held-out check failed" : "");
        else fprintf(f, "| %s | %s | %.4g | %s | %s | %s | %s | %s | **%s** |\n", d->name, e,
                     d->fit.fit.A, al, g[0], g[1], g[2], ch, v);
    }
    for (int k = 0; k < S->n_design; k++)
        if (S->d[k].fit_ok && S->d[k].fit.fit.E_at_bound) {
            fputs("\nE (bound): the free fit put that frontier's floor below 0, which no loss "
                  "is; the fit shown is the best one with E = 0, a pure power law (its "
                  "frontier is nearly straight in log-log over these budgets).\n", f);
            break;
        }
}

static void md_heldout(FILE *f, const scaling_analysis *S)
{
    fprintf(f, "\n**Held-out check.** Each frontier fitted again without its largest budget "
            "(%.3g FLOPs); the fit's prediction there against the measured frontier. The "
            "limits are the measured value -/+ the 95 %% half-width of predicted - measured "
            "over the same resampled seeds:\n\n| design | predicted | measured | error | "
            "95 %% limits | inside |\n| --- | --- | --- | --- | --- | --- |\n",
            S->C[S->n_budget - 1]);
    for (int k = 0; k < S->n_design; k++) {
        const al_heldout *h = &S->d[k].ho;
        if (!isfinite(h->predicted)) {
            fprintf(f, "| %s | the fit failed | | | | |\n", S->d[k].name);
            continue;
        }
        char lim[64] = "-";   /* one seed: no interval */
        if (isfinite(h->lo)) snprintf(lim, sizeof lim, "[%.4f, %.4f]", h->lo, h->hi);
        fprintf(f, "| %s | %.4f | %.4f | %+.4f | %s | %s |\n", S->d[k].name, h->predicted,
                h->measured, h->error, lim, !h->ok ? "-" : h->inside ? "yes" : "**no**");
    }
    for (int k = 0; k < S->n_design; k++)
        if (S->d[k].ho_failed)
            fprintf(f, "\n**%s: the held-out check failed.** Fitted on the smaller budgets, "
                    "the power law missed the largest by %+.4f nats, outside its interval: "
                    "the frontier bends away from E + A·C^-α over these budgets, so its "
                    "extrapolation (and a verdict resting on it) is not to be believed.\n",
                    S->d[k].name, S->d[k].ho.error);
}

static void md_rule(FILE *f)
{
    fprintf(f, "\n**The verdict's rule** (docs/scaling.md): with the gap g at C_max signed so "
            "that positive is away from zero, the change of the fitted gap from C_max to "
            "10 C_max decides: *closes* when its whole 95 %% interval is below zero (the gap "
            "shrinks toward zero), *widens* when it is above zero, *holds* when it lies "
            "within ±%.2f nats, and *cannot tell* otherwise, or with fewer than %d budgets "
            "or a fit that failed. A verdict whose own or the baseline's held-out check "
            "failed says so. What it can say: where the trend of the gap points over about "
            "one decade beyond the budgets measured, at these small sizes and on this data. "
            "What it cannot say: anything about 1B-scale models, which lie many decades "
            "beyond, where other terms of the loss (data, context, optimisation at scale) "
            "dominate; a fitted E is a property of the fit over these budgets, not the "
            "loss a large model reaches.\n", AL_SCALING_HOLD_NATS, AL_SCALING_MIN_BUDGETS);
}

void al_report_scaling_md(FILE *f, const al_report_analysis *A, int plots)
{
    const scaling_analysis *S = A->scaling;
    if (!S) return;
    fputs("\n## Scaling\n\n", f);
    if (!S->n_design) {
        fprintf(f, "No scaling analysis: %s.\n", S->skipped);
        return;
    }
    int fewest = S->n_seed;   /* a sweep still running, or a seed that failed throughout */
    for (int k = 0; k < S->n_design; k++)
        if (S->d[k].n_seed < fewest) fewest = S->d[k].n_seed;
    fprintf(f, "sweep.scaling: %d designs at %d sizes and %d budgets (%.3g to %.3g training "
            "FLOPs, %.3gx), %s%d seeds; loss is the %s of each trial.\n", S->n_design,
            S->n_size, S->n_budget, S->C[0], S->C[S->n_budget - 1],
            S->C[S->n_budget - 1] / S->C[0],
            fewest < S->n_seed ? "some designs with fewer than " : "", S->n_seed, S->metric);
    if (fewest < 2)
        fputs("\nA design with results from one seed has no interval: its verdict is *cannot "
              "tell* and its held-out check is not judged.\n", f);
    md_frontier(f, S);
    if (!S->enough) {
        fprintf(f, "\n**Fits need at least %d budgets; this sweep has %d**, so there is no "
                "fit, no extrapolation, no held-out check and no verdict.\n",
                AL_SCALING_MIN_BUDGETS, S->n_budget);
        return;
    }
    md_fits(f, S);
    md_heldout(f, S);
    md_rule(f);
    if (plots == AL_PLOTS_DRAWN)
        fprintf(f, "\n![loss against compute](scaling_loss.png)\n\nPer design: each size's "
                "mean loss with its 95 %% interval at each budget, the frontier (black) and "
                "the fit (red, dashed, drawn to 100x the largest budget). "
                "[SVG](scaling_loss.svg)%s\n", S->n_design > 1 ? "" : "; data and script: "
                "`scaling_loss.dat`, `scaling_fit.dat`, `scaling_loss.gp`.");
    if (plots == AL_PLOTS_DRAWN && S->n_design > 1)
        fputs("\n![gap against compute](scaling_gap.png)\n\nThe gap of each design to the "
              "baseline: the fitted gap with its 95 % band (paired bootstrap over seeds), the "
              "measured frontier gaps as points, the largest budget dotted. "
              "[SVG](scaling_gap.svg); data and scripts: `scaling_loss.dat`, "
              "`scaling_fit.dat`, `scaling_gap.dat`, `scaling_loss.gp`, `scaling_gap.gp`.\n", f);
    fputs("\nOne row per design, with every interval: `scaling.csv`.\n", f);
}
