/*
 * fit.c - compute-scaling fits, frontiers and their seed bootstrap
 * (al_fit.h).
 */
#include "al_fit.h"
#include "al_stats.h"
#include "al_util.h"

#include <gsl/gsl_errno.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ the fit */

/* The solver works in x = ln(C / Cref), Cref the geometric mean of the
 * computes, with L = E + exp(b - alpha x): C spans 1e12 and more, and
 * A * C^-alpha in raw units would leave the Jacobian's columns 10^6
 * apart. A = exp(b) * Cref^alpha afterwards. */
typedef struct pts {
    const double *x, *y;
    size_t n;
} pts;

/* The parameters are (E, b, alpha), or (b, alpha) with E held at 0 when
 * the vector has two (the fit at E's bound). */
static void params(const gsl_vector *t, double *E, double *b, double *a)
{
    int k = t->size == 3;
    *E = k ? gsl_vector_get(t, 0) : 0.0;
    *b = gsl_vector_get(t, k), *a = gsl_vector_get(t, k + 1);
}

static int resid_f(const gsl_vector *t, void *data, gsl_vector *f)
{
    const pts *p = data;
    double E, b, a;
    params(t, &E, &b, &a);
    for (size_t i = 0; i < p->n; i++)
        gsl_vector_set(f, i, E + exp(b - a * p->x[i]) - p->y[i]);
    return GSL_SUCCESS;
}

static int resid_df(const gsl_vector *t, void *data, gsl_matrix *J)
{
    const pts *p = data;
    double E, b, a;
    params(t, &E, &b, &a);
    int k = t->size == 3;
    for (size_t i = 0; i < p->n; i++) {
        double e = exp(b - a * p->x[i]);
        if (k) gsl_matrix_set(J, i, 0, 1.0);
        gsl_matrix_set(J, i, k, e);
        gsl_matrix_set(J, i, k + 1, -p->x[i] * e);
    }
    return GSL_SUCCESS;
}

static double rss_at(const pts *p, double E, double b, double a)
{
    double r = 0;
    for (size_t i = 0; i < p->n; i++) {
        double d = E + exp(b - a * p->x[i]) - p->y[i];
        r += d * d;
    }
    return r;
}

/* The least-squares line of ln(L - E) in x, as L = E + exp(b - a x):
 * b and a (every L above E). */
static void log_line(const pts *p, double E, double *b, double *a)
{
    double z[64], mz = 0, mx = 0;
    for (size_t i = 0; i < p->n; i++) z[i] = log(p->y[i] - E);
    *a = -al_ls_slope(p->x, z, (int)p->n);
    for (size_t i = 0; i < p->n; i++) mz += z[i], mx += p->x[i];
    *b = (mz + *a * mx) / (double)p->n;
}

/* A start the solver cannot miss by much: for E on a grid below the
 * lowest loss, ln(L - E) is a line in x; take the E whose line fits L
 * best. */
static void start_point(const pts *p, double t[3])
{
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < p->n; i++) {
        lo = fmin(lo, p->y[i]);
        hi = fmax(hi, p->y[i]);
    }
    double span = hi > lo ? hi - lo : fmax(fabs(lo), 1.0) * 1e-3, best = INFINITY;
    for (int g = 0; g <= 60; g++) {
        double E = lo - span * pow(10.0, -3.0 + g * 0.1), b, a;
        if (p->n > 64) break;
        log_line(p, E, &b, &a);
        double r = rss_at(p, E, b, a);
        if (isfinite(r) && r < best) best = r, t[0] = E, t[1] = b, t[2] = a;
    }
}

/* Least squares from t: all three parameters, or with np 2 (b, alpha) at
 * t + 1 with E held at t[0] = 0. */
static int solve(const pts *p, double t[3], int np)
{
    gsl_set_error_handler_off();   /* errors come back as statuses */
    gsl_multifit_nlinear_parameters par = gsl_multifit_nlinear_default_parameters();
    gsl_multifit_nlinear_workspace *w =
        gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &par, p->n, (size_t)np);
    if (!w) return -1;
    gsl_multifit_nlinear_fdf fdf = {resid_f, resid_df, NULL, p->n, (size_t)np, (void *)p,
                                    0, 0, 0};
    double *u = t + 3 - np;
    gsl_vector_view v = gsl_vector_view_array(u, (size_t)np);
    int info = 0, st = gsl_multifit_nlinear_init(&v.vector, &fdf, w);
    if (st == GSL_SUCCESS)
        st = gsl_multifit_nlinear_driver(500, 1e-12, 1e-12, 1e-14, NULL, NULL, &info, w);
    const gsl_vector *x = gsl_multifit_nlinear_position(w);
    for (int i = 0; i < np; i++) u[i] = gsl_vector_get(x, (size_t)i);
    gsl_multifit_nlinear_free(w);
    /* a fit whose step limit ran out still stands if it improved on the start */
    return st == GSL_SUCCESS || st == GSL_EMAXITER ? 0 : -1;
}

/* E is a loss no compute goes below, so it is not negative. Where the
 * free fit puts it below 0 (a frontier nearly straight in log-log, whose
 * best curve has a floor of -2000 and a tiny alpha: a log-linear decline
 * that its extrapolation would carry on without end), the fit is the
 * best one with E at its bound, 0: L = A C^-alpha, started from the line
 * through (x, ln L). t on return: (0, b, alpha). */
static int bound_fit(const pts *p, double t[3])
{
    for (size_t i = 0; i < p->n; i++)
        if (!(p->y[i] > 0)) return -1;   /* a loss of 0 or less: no power law through it */
    double u[3] = {0, 0, 0}, u0[3];
    log_line(p, 0.0, &u[1], &u[2]);
    memcpy(u0, u, sizeof u);
    if (solve(p, u, 2) != 0 || !(rss_at(p, 0, u[1], u[2]) <= rss_at(p, 0, u0[1], u0[2])))
        memcpy(u, u0, sizeof u);
    if (!isfinite(u[1]) || !isfinite(u[2])) return -1;
    memcpy(t, u, sizeof u);
    return 0;
}

int al_fit_power_law(const double *C, const double *L, int n, al_pow_fit *f)
{
    double x[64], y[64], lc = 0;
    size_t m = 0;
    memset(f, 0, sizeof *f);
    for (int i = 0; i < n && m < 64; i++) {
        if (!(C[i] > 0) || !isfinite(L[i])) continue;
        x[m] = log(C[i]);
        y[m++] = L[i];
        lc += log(C[i]);
    }
    if (m < 3) return -1;
    lc /= (double)m;
    for (size_t i = 0; i < m; i++) x[i] -= lc;
    pts p = {x, y, m};
    double t[3] = {0, 0, 0}, t0[3];
    start_point(&p, t);
    memcpy(t0, t, sizeof t);
    if (solve(&p, t, 3) != 0 || !(rss_at(&p, t[0], t[1], t[2]) <= rss_at(&p, t0[0], t0[1], t0[2])))
        memcpy(t, t0, sizeof t);
    if (t[0] < 0 && bound_fit(&p, t) == 0) f->E_at_bound = 1;
    f->E = t[0];
    f->alpha = t[2];
    f->A = exp(t[1] + t[2] * lc);
    f->rss = rss_at(&p, t[0], t[1], t[2]);
    f->ok = isfinite(f->E) && isfinite(f->A) && isfinite(f->alpha);
    return f->ok ? 0 : -1;
}

double al_pow_eval(const al_pow_fit *f, double C) { return f->E + f->A * pow(C, -f->alpha); }

/* ------------------------------------------------------------ frontier */

void al_scaling_frontier(const al_scaling_grid *g, const int *idx, int n_idx, double *front)
{
    if (!idx) n_idx = g->n_seed;
    for (int b = 0; b < g->n_budget; b++) {
        front[b] = NAN;
        for (int s = 0; s < g->n_size; s++) {
            const double *v = g->loss + ((size_t)s * g->n_budget + b) * g->n_seed;
            double sum = 0;
            int k = 0;
            for (int j = 0; j < n_idx; j++) {
                double x = v[idx ? idx[j] : j];
                if (isfinite(x)) sum += x, k++;
            }
            /* a size that lost a seed is compared on the seeds it has */
            if (k && !(front[b] <= sum / k)) front[b] = sum / k;
        }
    }
}

/* ------------------------------------------------------------ bootstrap */

/* The fit of g's frontier over the n_idx seeds idx (NULL: all), every
 * budget but skip. */
static int fit_frontier(const al_scaling_grid *g, const int *idx, int n_idx, int skip,
                        al_pow_fit *f)
{
    double front[64], C[64];
    int m = 0;
    if (g->n_budget > 64) return -1;
    al_scaling_frontier(g, idx, n_idx, front);
    for (int b = 0; b < g->n_budget; b++)
        if (b != skip) C[m] = g->C[b], front[m++] = front[b];
    return al_fit_power_law(C, front, m, f);
}

/* The seeds that carry a loss somewhere in g (and in h, when given: a
 * paired comparison needs both), into seeds; returns how many. A seed
 * that has not run yet (a sweep in progress) or failed everywhere is no
 * sample: resampling it, or counting it in t's degrees of freedom, would
 * give one seed an interval of width 0. */
static int seeds_present(const al_scaling_grid *g, const al_scaling_grid *h, int *seeds)
{
    size_t cells = (size_t)g->n_size * g->n_budget;
    int m = 0;
    for (int k = 0; k < g->n_seed; k++) {
        int in_g = 0, in_h = !h;
        for (size_t c = 0; c < cells && !in_g; c++) in_g = isfinite(g->loss[c * g->n_seed + k]);
        for (size_t c = 0; h && c < (size_t)h->n_size * h->n_budget && !in_h; c++)
            in_h = isfinite(h->loss[c * h->n_seed + k]);
        if (in_g && in_h) seeds[m++] = k;
    }
    return m;
}

int al_scaling_seeds_present(const al_scaling_grid *g)
{
    int seeds[1024];
    return g->n_seed > 1024 ? -1 : seeds_present(g, NULL, seeds);
}

/* n seeds drawn with replacement from seeds[0..n). */
static void draw(al_rng *r, const int *seeds, int n, int *idx)
{
    for (int j = 0; j < n; j++) idx[j] = seeds[al_rng_below(r, (uint64_t)n)];
}

/* Running sums of resampled values, turned into est -/+ the interval. */
typedef struct acc {
    double s, ss;
    int n;
} acc;

static void acc_add(acc *a, double v)
{
    if (!isfinite(v)) return;
    a->s += v, a->ss += v * v, a->n++;
}

static al_interval acc_interval(const acc *a, double est, int n_seed)
{
    al_interval r = {est, NAN, NAN};
    if (a->n < 2 || n_seed < 2) return r;
    double m = a->s / a->n, var = (a->ss - a->n * m * m) / (a->n - 1);
    double half = al_t975(n_seed - 1) * sqrt(n_seed / (n_seed - 1.0)) * sqrt(fmax(var, 0));
    r.lo = est - half, r.hi = est + half;
    return r;
}

int al_scaling_fit_design(const al_scaling_grid *g, int skip, const double *at, int n_at,
                          int n_boot, uint64_t rng_seed, al_scaling_fit *r)
{
    memset(r, 0, sizeof *r);
    if (n_at > AL_SCALING_MAX_AT || g->n_seed > 1024) return -1;
    if (fit_frontier(g, NULL, g->n_seed, skip, &r->fit) != 0) return -1;
    acc aa = {0}, ae = {0}, ap[AL_SCALING_MAX_AT] = {{0}};
    int idx[1024], seeds[1024], n = seeds_present(g, NULL, seeds);
    al_rng rng;
    al_rng_seed(&rng, rng_seed);
    for (int i = 0; i < n_boot && n > 1; i++) {
        al_pow_fit f;
        draw(&rng, seeds, n, idx);
        if (fit_frontier(g, idx, n, skip, &f) != 0) continue;
        r->n_boot_ok++;
        acc_add(&aa, f.alpha);
        acc_add(&ae, f.E);
        for (int k = 0; k < n_at; k++) acc_add(&ap[k], al_pow_eval(&f, at[k]));
    }
    r->alpha = acc_interval(&aa, r->fit.alpha, n);
    r->E = acc_interval(&ae, r->fit.E, n);
    if (r->E.lo < 0) r->E.lo = 0;   /* E's bound: no interval reaches below it */
    for (int k = 0; k < n_at; k++)
        r->pred[k] = acc_interval(&ap[k], al_pow_eval(&r->fit, at[k]), n);
    return 0;
}

/* The gaps at at[0..n_at), each less the gap at `from` when from > 0
 * (the change of the gap from there), with paired intervals. */
static int gap_intervals(const al_scaling_grid *d, const al_scaling_grid *base, int skip,
                         const double *at, int n_at, double from, int n_boot,
                         uint64_t rng_seed, al_interval *gap)
{
    al_pow_fit fd, fb;
    if (d->n_seed != base->n_seed || d->n_seed > 1024 || n_at > AL_SCALING_MAX_AT) return -1;
    if (fit_frontier(d, NULL, d->n_seed, skip, &fd) != 0 ||
        fit_frontier(base, NULL, base->n_seed, skip, &fb) != 0)
        return -1;
    acc a[AL_SCALING_MAX_AT] = {{0}};
    int idx[1024], seeds[1024], n = seeds_present(d, base, seeds);
    al_rng rng;
    al_rng_seed(&rng, rng_seed);
    for (int i = 0; i < n_boot && n > 1; i++) {
        al_pow_fit bd, bb;
        draw(&rng, seeds, n, idx);   /* the same seeds for both: paired */
        if (fit_frontier(d, idx, n, skip, &bd) != 0 || fit_frontier(base, idx, n, skip, &bb) != 0)
            continue;
        double g0 = from > 0 ? al_pow_eval(&bd, from) - al_pow_eval(&bb, from) : 0;
        for (int k = 0; k < n_at; k++)
            acc_add(&a[k], al_pow_eval(&bd, at[k]) - al_pow_eval(&bb, at[k]) - g0);
    }
    double g0 = from > 0 ? al_pow_eval(&fd, from) - al_pow_eval(&fb, from) : 0;
    for (int k = 0; k < n_at; k++)
        gap[k] = acc_interval(&a[k], al_pow_eval(&fd, at[k]) - al_pow_eval(&fb, at[k]) - g0, n);
    return 0;
}

int al_scaling_gap(const al_scaling_grid *d, const al_scaling_grid *base, int skip,
                   const double *at, int n_at, int n_boot, uint64_t rng_seed,
                   al_interval *gap)
{
    return gap_intervals(d, base, skip, at, n_at, 0, n_boot, rng_seed, gap);
}

int al_scaling_gap_change(const al_scaling_grid *d, const al_scaling_grid *base, double c0,
                          double c1, int n_boot, uint64_t rng_seed, al_interval *change)
{
    AL_ASSERT(c0 > 0);
    return gap_intervals(d, base, -1, &c1, 1, c0, n_boot, rng_seed, change);
}

/* The interval is the one of predicted - measured under the same
 * resampled seeds: the measured frontier is a mean of seeds too, and its
 * own noise must not read as a bent curve. lo/hi are measured-centred
 * limits for the prediction: predicted lies in them when the error's
 * interval holds 0. */
int al_scaling_heldout(const al_scaling_grid *g, int n_boot, uint64_t rng_seed, al_heldout *h)
{
    memset(h, 0, sizeof *h);
    h->predicted = h->lo = h->hi = h->measured = h->error = NAN;
    if (g->n_budget < 4 || g->n_budget > 64 || g->n_seed > 1024) return -1;
    int top = 0, idx[1024], seeds[1024], n = seeds_present(g, NULL, seeds);
    for (int b = 1; b < g->n_budget; b++)
        if (g->C[b] > g->C[top]) top = b;
    double front[64];
    al_pow_fit f;
    al_scaling_frontier(g, NULL, g->n_seed, front);
    if (fit_frontier(g, NULL, g->n_seed, top, &f) != 0) return -1;
    h->predicted = al_pow_eval(&f, g->C[top]);
    h->measured = front[top];
    h->error = h->predicted - h->measured;
    acc a = {0};
    al_rng rng;
    al_rng_seed(&rng, rng_seed);
    for (int i = 0; i < n_boot && n > 1; i++) {
        al_pow_fit bf;
        draw(&rng, seeds, n, idx);
        if (fit_frontier(g, idx, n, top, &bf) != 0) continue;
        al_scaling_frontier(g, idx, n, front);
        acc_add(&a, al_pow_eval(&bf, g->C[top]) - front[top]);
    }
    al_interval e = acc_interval(&a, h->error, n);
    h->lo = h->measured - (e.hi - e.lo) / 2;
    h->hi = h->measured + (e.hi - e.lo) / 2;
    h->inside = e.lo <= 0 && 0 <= e.hi;
    h->ok = isfinite(e.lo);
    return h->ok ? 0 : -1;
}
