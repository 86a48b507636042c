/*
 * report_scaling.h - the report's Scaling section: a sweep.scaling grid
 * (summary.csv's scaling_size and scaling_flops) fitted per design by
 * al_fit.h. The analysis (report_scaling.c, called by report_analyze.c)
 * computes everything and writes nothing; the writers
 * (report_scaling_write.c) make scaling.csv, the plots and the section of
 * report.md from it. The rules are in docs/scaling.md. Not a public
 * interface.
 *
 * A design is a configuration without its size and budget: the summary's
 * `group` with its "size<i>" and "flops<C>" parts taken out. Its loss at a
 * (size, budget, seed) is the selected ok trial's test loss (validation
 * loss when the trials have no test split).
 */
#ifndef AL_REPORT_SCALING_H
#define AL_REPORT_SCALING_H

#include <stdio.h>

#include "al_fit.h"
#include "report_rows.h"

#define AL_SCALING_MIN_BUDGETS 4    /* fewer: no fit, no verdict */
#define AL_SCALING_MAX_DESIGNS 32
#define AL_SCALING_MAX_SIZES 32
#define AL_SCALING_MAX_BUDGETS 32
#define AL_SCALING_MAX_SEEDS 256
#define AL_SCALING_BOOT 400         /* bootstrap resamples of the seeds */
#define AL_SCALING_BAND 24          /* computes the gap's band is drawn at */
/* "holds": the change of the gap from the largest budget to 10x lies
 * within this many nats either way (its whole 95 % interval). */
#define AL_SCALING_HOLD_NATS 0.01

enum al_scaling_verdict { AL_SCALING_CANNOT_TELL = 0, AL_SCALING_CLOSES, AL_SCALING_HOLDS,
                          AL_SCALING_WIDENS, AL_SCALING_BASELINE };

typedef struct scaling_design {
    char name[256];
    int is_base;
    int n_seed;                         /* seeds with a loss somewhere (< 2: no intervals) */
    double *loss;                       /* [size][budget][seed], NaN: missing (owned) */
    double mean[AL_SCALING_MAX_SIZES][AL_SCALING_MAX_BUDGETS];   /* over seeds */
    double ci95[AL_SCALING_MAX_SIZES][AL_SCALING_MAX_BUDGETS];   /* t half-width (0: 1 seed) */
    double front[AL_SCALING_MAX_BUDGETS];  /* lowest seed-mean loss over sizes */
    int front_size[AL_SCALING_MAX_BUDGETS];/* ... at this size (-1: none) */
    int fit_ok;                         /* enough budgets, and the fit converged */
    al_scaling_fit fit;                 /* pred[0..2]: at C_max, 10x, 100x */
    al_interval gap[3];                 /* to the baseline at C_max, 10x, 100x */
    al_interval change;                 /* gap(10 C_max) - gap(C_max) */
    double gap_meas[AL_SCALING_MAX_BUDGETS];  /* frontier minus the baseline's */
    al_interval band[AL_SCALING_BAND];  /* the fitted gap at band_C */
    al_heldout ho;
    int verdict;                        /* enum al_scaling_verdict */
    int ho_failed, base_ho_failed;      /* its own, the baseline's held-out check failed */
} scaling_design;

typedef struct scaling_analysis {
    int n_design, n_size, n_budget, n_seed;
    int base;                           /* the baseline design's index */
    int enough;                         /* n_budget >= AL_SCALING_MIN_BUDGETS */
    double C[AL_SCALING_MAX_BUDGETS];   /* the budgets, ascending */
    double seed[AL_SCALING_MAX_SEEDS];
    double band_C[AL_SCALING_BAND];     /* from the smallest budget to 100x the largest */
    char metric[32];                    /* "test loss" or "val loss" */
    char skipped[256];                  /* why there is no analysis, when rows were left out */
    scaling_design d[AL_SCALING_MAX_DESIGNS];
} scaling_analysis;

/* report_scaling.c: the analysis of A's rows that carry a scaling_size
 * (NULL when none does); freed with al_report_scaling_free. */
scaling_analysis *al_report_scaling_analyze(const al_report_analysis *A);
void al_report_scaling_free(scaling_analysis *S);
const char *al_report_scaling_verdict_name(int verdict);

/* report_scaling_write.c: scaling.csv and scaling_loss.{dat,gp},
 * scaling_gap.{dat,gp} (their pictures by gnuplot when plots, an enum
 * al_plot_state, says the others were drawn); nothing without a scaling
 * grid; -1 when a file could not be written. Then the section of
 * report.md. */
int al_report_scaling_write(const al_report_analysis *A, int plots, al_err *e);
void al_report_scaling_md(FILE *f, const al_report_analysis *A, int plots);

#endif
