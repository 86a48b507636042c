/*
 * al_report.h - `attnlab report DIR`: a sweep's results as report.md and
 * plots, from DIR/summary.csv (and each trial's metrics.csv for curves).
 *
 * Trials are grouped by the summary's `group` column (a configuration
 * with `sweep.select` folds its tuned values into one group; empty: the
 * `config` column, the trial id without its "_seedN"); each group's val loss and
 * accuracy are the mean and sample standard deviation over its trials
 * with status ok. The quality measure is val accuracy when every group
 * has one (recall tasks), else val loss. A configuration is on the Pareto
 * front when no other has a smaller-or-equal KV cache and a better-or-
 * equal quality with one of the two strictly better.
 *
 * Two steps: the analysis (al_report_analyze) computes everything and
 * writes no file; the writers (al_report_write_analysis) read it. A sweep
 * in rounds asks the analysis whether another round of seeds is due.
 *
 * Writes (each atomically) DIR/report.md; DIR/index.html (the same report
 * as one self-contained page, docs/report-page.md); DIR/tradeoff.gp, tradeoff.dat,
 * front.dat, curves.gp, curves.dat; and, by running gnuplot (the program
 * named by $AL_GNUPLOT, default "gnuplot") in DIR, tradeoff.png/.svg and
 * curves.png/.svg. Without gnuplot the report says so and keeps the tables.
 */
#ifndef AL_REPORT_H
#define AL_REPORT_H

#include "al_util.h"

/* Mark on_front[i] = 1 for the points no other point dominates: cost is
 * minimised, quality minimised (maximize = 0) or maximised. NaN points are
 * never on the front. Returns how many are. */
int al_pareto_front(int n, const double *cost, const double *quality, int maximize,
                    int *on_front);

enum al_plot_state { AL_PLOTS_DRAWN = 0, AL_PLOTS_NO_GNUPLOT = 1, AL_PLOTS_FAILED = 2,
                     AL_PLOTS_NOTHING = 3 };

/* The analysis of a results directory: its configurations with their
 * statistics and verdicts, the Pareto front, and whether a sweep in
 * rounds is due another round of seeds. Opaque here (report_rows.h). */
typedef struct al_report_analysis al_report_analysis;

/* Read DIR/summary.csv and DIR/sweep.json (and each trial's metrics.csv)
 * and compute everything the report shows. Writes no file. Returns 0 with
 * *out set (the caller frees it with al_report_analysis_free); -1 when the
 * summary is missing or malformed (bad input), e naming the file and, for
 * rows, the line. */
int al_report_analyze(const char *dir, al_report_analysis **out, al_err *e);
void al_report_analysis_free(al_report_analysis *A);

/* Where a sweep in rounds (sweep.seeds: {min, max, until: resolved})
 * stands, by the rule of al_seq_decide (al_stats.h). */
typedef struct al_report_rounds {
    int on;                      /* the sweep adds seeds in rounds (sweep.json) */
    int looks;                   /* rounds its finished seeds reach (0: a seed is open) */
    int done;                    /* every comparison with the baseline resolved (Holm,
                                    by the rounds' rule), or the last round taken */
} al_report_rounds;
al_report_rounds al_report_rounds_of(const al_report_analysis *A);
/* The sequential seeds decision for a sweep in rounds: 1 while another
 * round is due (a comparison with the baseline is not resolved by the
 * rounds' rule, or a seed is still open, and the plan has rounds left), 0
 * once the rounds are over. Without a plan in sweep.json the analysis has
 * no rule to end them by: 1. */
int al_report_seeds_due(const al_report_analysis *A);

typedef struct al_report_stats {
    int n_trials, n_ok, n_configs, n_front;
    int plots;                   /* enum al_plot_state */
} al_report_stats;

/* Write the report of A's directory: report.md, index.html, configs.csv
 * and the plots (each atomically). Returns 0, or -2 when a write failed (e says which). */
int al_report_write_analysis(const al_report_analysis *A, al_report_stats *st, al_err *e);

/* al_report_analyze, then al_report_write_analysis: -1 on bad input, -2
 * when a write failed. */
int al_report_write(const char *dir, al_report_stats *st, al_err *e);

#endif
