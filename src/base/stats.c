/*
 * stats.c - mean, sd and t-intervals (al_stats.h).
 */
#include "al_stats.h"

#include <gsl/gsl_cdf.h>
#include <math.h>

double al_t975(int dof)
{
    return gsl_cdf_tdist_Pinv(0.975, (double)dof);
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

int al_stat_resolved(const al_stat *d)
{
    return d->n >= 2 && isfinite(d->ci95) && fabs(d->mean) > d->ci95;
}
