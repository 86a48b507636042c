/*
 * al_stats.h - the statistics a report prints about seeds: mean, sample
 * standard deviation, Student-t 95 % intervals, paired differences, their
 * p-values corrected for many comparisons (Holm), the seeds a difference
 * would need, and the rule that adds seeds in rounds.
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
/* The p quantile of Student's t (0 < p < 1, dof >= 1). */
double al_t_quantile(double p, int dof);
/* 1 when the 95 % interval of a difference excludes 0 (n >= 2 and
 * |mean| > ci95); 0 otherwise, including too few pairs. Pairs that all
 * differ by the same amount (al_stat_all_equal, a zero-width interval) are
 * resolved only by the sign test (al_stat_p): AL_SIGN_TEST_PAIRS or more. */
int al_stat_resolved(const al_stat *d);

/* 1 when n >= 2 and the values agree to rounding: sd <= 1e-9 |mean| +
 * 1e-12 (the same share averaged in another order), so their sd is 0 in
 * all but the last digits and no spread can be learnt from them. */
int al_stat_all_equal(const al_stat *d);

/* Least-squares slope of y on x over the n points with finite y (NAN
 * when fewer than 2, or all x equal). */
double al_ls_slope(const double *x, const double *y, int n);

/* Two-sided p-value of the one-sample (paired) t test of mean 0 on d:
 * NAN when n < 2. When every pair moved by the same amount
 * (al_stat_all_equal, as shares over a few keys do) and that amount is not
 * 0, the sign test's 2^(1-n): the t statistic would be infinite with
 * nothing learnt of the spread; 1 when it is 0. p < 0.05 exactly when
 * al_stat_resolved. */
#define AL_SIGN_TEST_PAIRS 6   /* the fewest equal-signed pairs with 2^(1-n) < 0.05 */
double al_stat_p(const al_stat *d);
/* Holm-Bonferroni over a family of m tests at family-wise level alpha:
 * reject[i] = 1 for the rejected ("resolved") ones; returns their number.
 * A NAN p-value (too few pairs) stays in the family, never rejected. */
int al_holm(int m, const double *p, double alpha, int *reject);

/* Holm's adjusted p-values of the same family: adj[i] is the smallest
 * family-wise level at which al_holm would reject test i (a NAN p counts
 * as 1). */
void al_holm_adjust(int m, const double *p, double *adj);

/* Two-sided exact McNemar test of paired binary outcomes: b pairs where
 * only the first succeeded, c where only the second did. Under "no
 * difference" each of the n = b + c discordant pairs goes either way with
 * probability 1/2, so p = min(1, 2 P(Binomial(n, 1/2) <= min(b, c))); 1
 * when n = 0; NAN for a negative count. Why this test for "seeds solved": seeds are paired (the same
 * seed, the same initialisation stream and batches), as the paired t test
 * of the means pairs them. */
double al_mcnemar_p(int b, int c);

/* Power of the two-sided paired t test at level alpha with n pairs when
 * the true mean difference is `effect` standard deviations of the pairs
 * (Cohen's d_z): the noncentral t tail, integrated numerically (stats.c;
 * GSL has no noncentral t). NAN when n < 2. */
double al_paired_power(double effect, int n, double alpha);
/* Seeds (pairs) for `power` (0.8) at level 0.05 when the difference and
 * the sd of the paired differences are the observed mean and sd: the
 * smallest n >= 2 that reaches it; cap + 1 when even cap does not; 0 when
 * there is nothing to size (mean 0, no sd). With pairs all equal (sd 0
 * to rounding) and a difference, AL_SIGN_TEST_PAIRS (what the sign test
 * al_stat_p falls back on needs). */
int al_seeds_needed(double mean, double sd, double power, int cap);

/* The sequential seeds rule (sweep.seeds: {min, max, until: resolved}).
 * Looks at n = min, min + step, ..., max seeds. At look k, the paired t
 * test of every comparison not yet resolved is Holm-corrected at level
 * alpha_k = a(t_k) - a(t_{k-1}), where a(t) = alpha ln(1 + (e - 1) t) is
 * the Lan-DeMets Pocock-type spending function and t_k = n_k / max; a
 * comparison once resolved stays resolved. The levels sum to alpha(1) =
 * alpha, so by the union bound over looks (Holm at each look) the chance
 * of any false "resolved" over the whole run is at most alpha, whatever
 * the correlation between looks (conservative: exact group-sequential
 * boundaries would spend a little more). */
#define AL_SEQ_MAX_LOOKS 64
typedef struct al_seq_plan {
    int min, max, step;   /* 2 <= min <= max; step >= 1 */
    double alpha;         /* 0.05 */
} al_seq_plan;
/* The looks: n_at[k] seeds and level alpha_at[k] (either may be NULL);
 * returns how many (at most AL_SEQ_MAX_LOOKS). */
int al_seq_looks(const al_seq_plan *p, int *n_at, double *alpha_at);
/* Decide m comparisons whose paired differences by seed are
 * x[i * n_seeds + s] (seed s + 1; NAN: missing) with n_seeds columns
 * available: resolved[i] as the rule above over the looks the data
 * reaches (n_k <= n_seeds). Returns the number of looks taken. */
int al_seq_decide(const al_seq_plan *p, int m, const double *x, int n_seeds, int *resolved);

#endif
