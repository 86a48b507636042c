/*
 * stats.c - mean, sd and t-intervals; p-values, Holm's correction, the
 * power of the paired t test and the sequential seeds rule (al_stats.h).
 */
#include "al_stats.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_randist.h>
#include <math.h>
#include <stdlib.h>

double al_t975(int dof)
{
    return gsl_cdf_tdist_Pinv(0.975, (double)dof);
}

double al_t_quantile(double p, int dof)
{
    return gsl_cdf_tdist_Pinv(p, (double)dof);
}

/* Two passes: the mean first, then squared deviations from it, which
 * stays accurate for losses that agree to many digits. */
void al_stat_of(const double *x, int n, al_stat *s)
{
    double sum = 0, ss = 0;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(x[i])) sum += x[i], k++;
    s->n = k;
    s->mean = k ? sum / k : NAN;
    s->sd = s->ci95 = NAN;
    if (k < 2) return;
    for (int i = 0; i < n; i++)
        if (isfinite(x[i])) ss += (x[i] - s->mean) * (x[i] - s->mean);
    s->sd = sqrt(ss / (k - 1));
    s->ci95 = al_t975(k - 1) * s->sd / sqrt((double)k);
}

/* Shares averaged over depths in another order differ in the 16th digit:
 * differences that agree to rounding count as equal. A real difference
 * between seeds is never this tight (a loss's moves by 1e-3 or more). */
#define ROUNDING 1e-12   /* an absolute difference this small is rounding, not a result */

static int pairs_equal(double mean, double sd)
{
    return isfinite(sd) && sd <= 1e-9 * fabs(mean) + ROUNDING;
}

int al_stat_all_equal(const al_stat *d)
{
    return d->n >= 2 && isfinite(d->mean) && pairs_equal(d->mean, d->sd);
}

int al_stat_resolved(const al_stat *d)
{
    if (al_stat_all_equal(d)) return al_stat_p(d) < 0.05;   /* the sign test, below */
    return d->n >= 2 && isfinite(d->ci95) && fabs(d->mean) > d->ci95;
}

/* sum (x - mx)(y - my) / sum (x - mx)^2, means first (as al_stat_of). */
double al_ls_slope(const double *x, const double *y, int n)
{
    double mx = 0, my = 0, sxy = 0, sxx = 0;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(y[i])) mx += x[i], my += y[i], k++;
    if (k < 2) return NAN;
    mx /= k, my /= k;
    for (int i = 0; i < n; i++)
        if (isfinite(y[i])) sxy += (x[i] - mx) * (y[i] - my), sxx += (x[i] - mx) * (x[i] - mx);
    return sxx > 0 ? sxy / sxx : NAN;
}

/* ------------------------------------------------------------ p and Holm */

/* Every pair differing by the same amount (sd 0) makes t infinite, yet
 * says nothing of the spread: two seeds whose passkey shares over 100 keys
 * both moved by +0.03 are no proof. Such pairs fall back on the sign test,
 * which needs no spread: n differences all on one side have probability
 * 2^(1-n), two-sided, when there is no difference (AL_SIGN_TEST_PAIRS = 6
 * pairs for p < 0.05). */
double al_stat_p(const al_stat *d)
{
    if (d->n < 2 || !isfinite(d->mean) || !isfinite(d->sd)) return NAN;
    if (al_stat_all_equal(d))
        return fabs(d->mean) <= ROUNDING ? 1.0 : fmin(1.0, ldexp(1.0, 1 - d->n));
    double t = fabs(d->mean) / (d->sd / sqrt((double)d->n));
    return 2 * gsl_cdf_tdist_Q(t, (double)(d->n - 1));
}

typedef struct ranked { double p; int i; } ranked;

static int by_p(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->p != y->p) return x->p < y->p ? -1 : 1;
    return x->i - y->i;   /* ties in a fixed order: the result does not depend on qsort */
}

/* Holm (1979): with the p-values sorted, p(1) <= ... <= p(m), reject
 * H(1..j) for the largest j with p(i) <= alpha / (m - i + 1) for every
 * i <= j. Controls the family-wise error at alpha under any dependence. */
int al_holm(int m, const double *p, double alpha, int *reject)
{
    ranked *r = malloc((size_t)(m + 1) * sizeof *r);
    int count = 0;
    for (int i = 0; i < m; i++) {
        r[i] = (ranked){isnan(p[i]) ? 1.0 : p[i], i};
        reject[i] = 0;
    }
    qsort(r, (size_t)m, sizeof *r, by_p);
    for (int k = 0; k < m && r[k].p <= alpha / (m - k); k++) reject[r[k].i] = 1, count++;
    free(r);
    return count;
}

/* Holm's adjusted p-values (Wright 1992): with the p-values sorted, p(1)
 * <= ... <= p(m), adj(k) = max over j <= k of min(1, (m - j + 1) p(j)).
 * adj[i] <= alpha when al_holm rejects i at alpha (up to rounding), so a table can
 * print one number per comparison instead of a verdict at one level. */
void al_holm_adjust(int m, const double *p, double *adj)
{
    ranked *r = malloc((size_t)(m + 1) * sizeof *r);
    for (int i = 0; i < m; i++) r[i] = (ranked){isnan(p[i]) ? 1.0 : p[i], i};
    qsort(r, (size_t)m, sizeof *r, by_p);
    double run = 0;
    for (int k = 0; k < m; k++) {
        double a = fmin(1.0, (double)(m - k) * r[k].p);
        run = a > run ? a : run;
        adj[r[k].i] = run;
    }
    free(r);
}

double al_mcnemar_p(int b, int c)
{
    if (b < 0 || c < 0) return NAN;
    int n = b + c, k = b < c ? b : c;
    if (n == 0) return 1.0;
    double tail = 0, term = ldexp(1.0, -n);   /* C(n, 0) / 2^n */
    for (int i = 0; i <= k; i++) {
        tail += term;
        term *= (double)(n - i) / (i + 1);    /* C(n, i + 1) / 2^n */
    }
    return fmin(1.0, 2 * tail);
}

/* ------------------------------------------------------------ power */

/* P(|T| > c) for T noncentral t with nu degrees of freedom and
 * noncentrality lambda. T = (Z + lambda) / S with S = sqrt(V / nu), V
 * chi-square(nu) independent of Z, so conditioning on S = s:
 *   P(|T| > c) = E[ Phi(lambda - c s) + Phi(-lambda - c s) ].
 * The expectation is integrated over s by composite Simpson on the range
 * holding all but 2e-12 of S's mass (S has density 2 nu s f_chi2(nu s^2)).
 * 4000 panels give about 1e-9 (checked against scipy's nct). */
static double nct_two_sided_tail(double c, int nu, double lambda)
{
    const int n = 4000;
    double lo = sqrt(gsl_cdf_chisq_Pinv(1e-12, nu) / nu);
    double hi = sqrt(gsl_cdf_chisq_Qinv(1e-12, nu) / nu), h = (hi - lo) / n, sum = 0;
    for (int i = 0; i <= n; i++) {
        double s = lo + i * h, w = i == 0 || i == n ? 1 : i % 2 ? 4 : 2;
        double dens = 2 * nu * s * gsl_ran_chisq_pdf(nu * s * s, nu);
        sum += w * dens * (gsl_cdf_ugaussian_P(lambda - c * s) +
                           gsl_cdf_ugaussian_P(-lambda - c * s));
    }
    return sum * h / 3;
}

double al_paired_power(double effect, int n, double alpha)
{
    if (n < 2 || !isfinite(effect)) return NAN;
    double c = gsl_cdf_tdist_Qinv(alpha / 2, n - 1);
    return nct_two_sided_tail(c, n - 1, fabs(effect) * sqrt((double)n));
}

/* Power grows with n for a fixed effect: bisect on [2, cap]. */
int al_seeds_needed(double mean, double sd, double power, int cap)
{
    if (!isfinite(mean) || !isfinite(sd) || sd < 0 || fabs(mean) <= ROUNDING) return 0;
    if (pairs_equal(mean, sd)) return AL_SIGN_TEST_PAIRS <= cap ? AL_SIGN_TEST_PAIRS : cap + 1;
    double effect = fabs(mean) / sd;
    if (al_paired_power(effect, cap, 0.05) < power) return cap + 1;
    int lo = 2, hi = cap;   /* power(hi) >= power */
    if (al_paired_power(effect, lo, 0.05) >= power) return lo;
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (al_paired_power(effect, mid, 0.05) >= power) hi = mid;
        else lo = mid;
    }
    return hi;
}

/* ------------------------------------------------------------ sequential */

/* Lan-DeMets alpha spending with Pocock's spending function,
 * alpha(t) = alpha ln(1 + (e - 1) t), t the fraction of the maximum seeds. */
static double pocock_spent(double t, double alpha)
{
    return alpha * log(1 + (exp(1.0) - 1) * (t < 1 ? t : 1));
}

int al_seq_looks(const al_seq_plan *p, int *n_at, double *alpha_at)
{
    int k = 0;
    double spent = 0;
    for (int n = p->min;; n += p->step) {
        n = n < p->max ? n : p->max;
        double now = pocock_spent((double)n / p->max, p->alpha);
        if (n_at) n_at[k] = n;
        if (alpha_at) alpha_at[k] = now - spent;
        spent = now;
        k++;
        if (n == p->max || k == AL_SEQ_MAX_LOOKS) return k;
    }
}

int al_seq_decide(const al_seq_plan *p, int m, const double *x, int n_seeds, int *resolved)
{
    int n_at[AL_SEQ_MAX_LOOKS], looks = al_seq_looks(p, n_at, NULL), done = 0;
    double alpha_at[AL_SEQ_MAX_LOOKS];
    double *pv = malloc((size_t)(m + 1) * sizeof *pv);
    int *open = malloc((size_t)(m + 1) * sizeof *open), *rej = malloc((size_t)(m + 1) * sizeof *rej);
    al_seq_looks(p, NULL, alpha_at);
    for (int i = 0; i < m; i++) resolved[i] = 0;
    for (int k = 0; k < looks && n_at[k] <= n_seeds; k++, done++) {
        int n_open = 0;
        for (int i = 0; i < m; i++) {
            if (resolved[i]) continue;
            al_stat d;
            al_stat_of(x + (size_t)i * n_seeds, n_at[k], &d);
            pv[n_open] = al_stat_p(&d);
            open[n_open++] = i;
        }
        al_holm(n_open, pv, alpha_at[k], rej);
        for (int j = 0; j < n_open; j++) resolved[open[j]] |= rej[j];
    }
    free(pv), free(open), free(rej);
    return done;
}
