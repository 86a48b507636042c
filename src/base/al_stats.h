/*
 * al_stats.h - the statistics a report prints about seeds: mean, sample
 * standard deviation, Student-t 95 % intervals, paired differences.
 *
 * The t quantile comes from GSL (gsl_cdf_tdist_Pinv), a well-kept library,
 * not a hand-written table. One value has a mean and nothing else: its sd
 * and interval are NAN (never a zero-width interval that would claim a
 * certainty no single seed gives).
 */
#ifndef AL_STATS_H
#define AL_STATS_H

typedef struct al_stat {
    int n;          /* finite values */
    double mean;    /* NAN when n == 0 */
    double sd;      /* sample standard deviation (n - 1); NAN when n < 2 */
    double ci95;    /* half-width of the 95 % t-interval, t(0.975, n - 1) sd / sqrt(n);
                       NAN when n < 2 */
} al_stat;

/* Over the finite values of x[0..n) (NaN and Inf are skipped). */
void al_stat_of(const double *x, int n, al_stat *s);
/* The 0.975 quantile of Student's t with dof degrees of freedom (dof >= 1). */
double al_t975(int dof);
/* 1 when the 95 % interval of a difference excludes 0 (n >= 2 and
 * |mean| > ci95); 0 otherwise, including too few pairs. */
int al_stat_resolved(const al_stat *d);

#endif
