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
 * Writes (each atomically) DIR/report.md; DIR/tradeoff.gp, tradeoff.dat,
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

typedef struct al_report_stats {
    int n_trials, n_ok, n_configs, n_front;
    int plots;                   /* enum al_plot_state */
    int seq_on;                  /* the sweep adds seeds in rounds (sweep.json) */
    int seq_looks;               /* rounds its finished seeds reach */
    int seq_done;                /* every comparison with the baseline resolved (Holm,
                                    by the rounds' rule), or the last round taken */
} al_report_stats;

/* Read DIR/summary.csv, write the report. Returns 0; -1 when the summary
 * is missing or malformed (bad input); -2 when a write failed. Errors name
 * the file and, for rows, the line. */
int al_report_write(const char *dir, al_report_stats *st, al_err *e);

#endif
