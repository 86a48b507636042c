/*
 * al_fit.h - compute-scaling fits: the loss a design reaches against the
 * training compute C, L(C) = E + A * C^-alpha, fitted by GSL's nonlinear
 * least squares (gsl_multifit_nlinear, trust region with Levenberg-Marquardt
 * steps); the compute frontier of a grid of sizes x budgets x seeds; and
 * intervals by bootstrap over seeds, paired across designs by drawing the
 * same seed indices for each.
 *
 * Pure numerics: no file, no report. Who frees what: nothing here allocates
 * what the caller keeps; results are plain structs.
 */
#ifndef AL_FIT_H
#define AL_FIT_H

#include <stdint.h>

/* L(C) = E + A * C^-alpha. */
typedef struct al_pow_fit {
    double E, A, alpha;
    double rss;        /* residual sum of squares at the fit */
    int ok;            /* 1: the solver converged to finite parameters */
    int E_at_bound;    /* 1: the free fit's E was below 0; this is the best fit with E = 0 */
} al_pow_fit;

/* Fit L(C) to n points (n >= 3, every C > 0, finite L; points with NaN L
 * are skipped) by least squares with E >= 0 (a loss floor is not
 * negative: where the free fit's E is below 0 the fit is redone with E
 * held at 0, and E_at_bound says so). Returns 0, or -1 (fewer than 3
 * usable points, or no convergence) with f->ok = 0. */
int al_fit_power_law(const double *C, const double *L, int n, al_pow_fit *f);

/* The fitted loss at compute C. */
double al_pow_eval(const al_pow_fit *f, double C);

/* A scaling grid of one design: loss[(s * n_budget + b) * n_seed + k] is
 * size s, budget b, seed k (NaN: missing). C[b] is budget b's compute. */
typedef struct al_scaling_grid {
    int n_size, n_budget, n_seed;
    const double *C;
    const double *loss;
} al_scaling_grid;

/* The frontier: for each budget, the lowest seed-mean loss over sizes,
 * where the mean is over the seeds listed in idx[0..n_idx) (a bootstrap
 * draw may list one seed twice; idx NULL: every seed once). front[b] is NaN
 * when no size has a value at budget b. */
void al_scaling_frontier(const al_scaling_grid *g, const int *idx, int n_idx, double *front);

/* Intervals: the point estimate from all seeds, and 95 % limits from
 * n_boot resamples of the seeds (with replacement) as
 * estimate -/+ t(0.975, n_seed - 1) * sqrt(n_seed / (n_seed - 1)) * sd_boot:
 * for a mean of seeds that is the t interval itself, which a percentile
 * bootstrap of three or four seeds is far narrower than. Here n_seed counts
 * the seeds that carry a loss somewhere in the grid (in both grids, for a
 * paired gap), and only those are resampled: a seed not yet run is no
 * sample. With fewer than two, lo and hi are NaN: one seed has no
 * interval, not one of width 0. */
typedef struct al_interval {
    double est, lo, hi;
} al_interval;

/* How many of g's seeds carry a loss somewhere in it (-1: over 1024). */
int al_scaling_seeds_present(const al_scaling_grid *g);

#define AL_SCALING_MAX_AT 8   /* computes at which predictions are asked */

typedef struct al_scaling_fit {
    al_pow_fit fit;                   /* on the frontier of every seed */
    al_interval alpha, E;
    al_interval pred[AL_SCALING_MAX_AT];   /* L at the asked computes */
    int n_boot_ok;                    /* resamples whose fit converged */
} al_scaling_fit;

/* Fit one design's frontier over every budget but `skip` (-1: none; the
 * held-out check skips the largest) and predict at at[0..n_at). Resamples are drawn from
 * rng_seed alone, so two designs with the same n_seed and rng_seed get the
 * same seed indices: their intervals are paired. Returns 0, or -1 when the
 * point fit fails (fewer than 3 budgets with a frontier). */
int al_scaling_fit_design(const al_scaling_grid *g, int skip, const double *at, int n_at,
                          int n_boot, uint64_t rng_seed, al_scaling_fit *r);

/* The gap of a design to a baseline, L_d(C) - L_base(C) from each one's
 * fit, at at[0..n_at), with paired intervals (the same resampled seeds for
 * both: they must have the same n_seed). Returns 0 or -1 as above. */
int al_scaling_gap(const al_scaling_grid *d, const al_scaling_grid *base, int skip,
                   const double *at, int n_at, int n_boot, uint64_t rng_seed,
                   al_interval *gap);

/* How the gap changes from compute c0 to c1 (> 0 both): gap(c1) -
 * gap(c0) from the fits on every budget, with its paired interval (the
 * same resampled seeds for both designs and both computes), so that a
 * verdict on the trend reads one interval rather than two overlapping
 * ones. Returns 0 or -1 as above. */
int al_scaling_gap_change(const al_scaling_grid *d, const al_scaling_grid *base, double c0,
                          double c1, int n_boot, uint64_t rng_seed, al_interval *change);

/* The held-out check: fit on every budget but the largest, predict the
 * largest with its interval, compare with the measured frontier there. */
typedef struct al_heldout {
    /* lo, hi: the 95 % limits the prediction must fall in, centred on the
     * measured frontier, their width that of predicted - measured over
     * resampled seeds (the measurement is a mean of seeds too) */
    double predicted, lo, hi, measured;
    double error;      /* predicted - measured */
    int inside;        /* lo <= predicted <= hi */
    int ok;            /* 0: too few budgets to leave one out (needs 4), or fewer
                          than two seeds (no interval to judge by) */
} al_heldout;

int al_scaling_heldout(const al_scaling_grid *g, int n_boot, uint64_t rng_seed, al_heldout *h);

#endif
