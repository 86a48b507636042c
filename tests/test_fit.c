/*
 * test_fit.c - compute-scaling fits (src/base/fit.c): known parameters
 * recovered from exact frontiers, intervals that cover the truth at their
 * nominal rate over noisy draws, the held-out check flagging a frontier
 * bent on purpose, paired gaps, and parity with scipy's curve_fit.
 */
#include "al_test.h"
#include "al_fit.h"
#include "al_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Four budgets spanning 32x, at the scale of attnlab's runs. */
static const double budgets[4] = {2e12, 8e12, 2.4e13, 6.4e13};

typedef struct truth {
    double E, A, alpha;
} truth;

static double law(const truth *t, double C) { return t->E + t->A * pow(C, -t->alpha); }

/* A grid of n_size sizes (size s is worse by 0.08 s, so the frontier is
 * size 0 when the noise is small) with per-seed noise of sd `noise`; the
 * same seed's noise is shared by every cell when `shared` (a seed's data
 * order helps or hurts every budget alike). */
static void make_grid(double *loss, const truth *t, int n_size, int n_seed, double noise,
                      int shared, al_rng *r)
{
    double seed_off[64];
    for (int k = 0; k < n_seed; k++) seed_off[k] = noise * al_rng_normal(r);
    for (int s = 0; s < n_size; s++)
        for (int b = 0; b < 4; b++)
            for (int k = 0; k < n_seed; k++)
                loss[(s * 4 + b) * n_seed + k] = law(t, budgets[b]) + 0.08 * s +
                    (shared ? seed_off[k] : noise * al_rng_normal(r));
}

START_TEST(exact_frontiers_give_their_parameters_back)
{
    static const truth cases[] = {
        {1.20, 3000.0, 0.28}, {0.80, 150.0, 0.15}, {2.10, 4.0e5, 0.45}, {1.50, 40.0, 0.10},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double L[4];
        for (int b = 0; b < 4; b++) L[b] = law(&cases[i], budgets[b]);
        al_pow_fit f;
        ck_assert_int_eq(al_fit_power_law(budgets, L, 4, &f), 0);
        ck_assert_msg(fabs(f.E / cases[i].E - 1) < 0.02 && fabs(f.A / cases[i].A - 1) < 0.02 &&
                          fabs(f.alpha / cases[i].alpha - 1) < 0.02,
                      "case %zu: E %.6g A %.6g alpha %.6g", i, f.E, f.A, f.alpha);
        for (int b = 0; b < 4; b++)
            ck_assert_double_eq_tol(al_pow_eval(&f, budgets[b]), L[b], 1e-6);
    }
}
END_TEST

START_TEST(too_few_points_are_refused)
{
    double C[3] = {1e12, 2e12, NAN}, L[3] = {2.0, 1.9, 1.8};
    al_pow_fit f;
    L[2] = NAN;
    ck_assert_int_eq(al_fit_power_law(C, L, 3, &f), -1);   /* two usable points */
    ck_assert_int_eq(f.ok, 0);
}
END_TEST

/* The frontier takes the lowest seed mean over sizes, per budget, over
 * the seeds a resample lists (one seed twice counts twice). */
START_TEST(frontier_is_lowest_seed_mean_over_sizes)
{
    /* 2 sizes x 4 budgets x 2 seeds */
    const double loss[16] = {
        3.0, 3.2,  2.0, 2.2,  1.5, 1.9,  1.2, NAN,   /* size 0 */
        2.9, 3.5,  2.2, 2.4,  1.4, 1.6,  1.3, 1.0,   /* size 1 */
    };
    al_scaling_grid g = {2, 4, 2, budgets, loss};
    double front[4];
    al_scaling_frontier(&g, NULL, 0, front);
    ck_assert_double_eq_tol(front[0], 3.1, 1e-12);    /* size 0: 3.1 < 3.2 */
    ck_assert_double_eq_tol(front[1], 2.1, 1e-12);
    ck_assert_double_eq_tol(front[2], 1.5, 1e-12);    /* size 1: 1.5 < 1.7 */
    ck_assert_double_eq_tol(front[3], 1.15, 1e-12);   /* size 0 on its one seed: 1.2 */
    int idx[2] = {1, 1};
    al_scaling_frontier(&g, idx, 2, front);
    ck_assert_double_eq_tol(front[0], 3.2, 1e-12);    /* 3.2 < 3.5 */
    ck_assert_double_eq_tol(front[2], 1.6, 1e-12);    /* 1.6 < 1.9 */
    ck_assert_double_eq_tol(front[3], 1.0, 1e-12);    /* size 0 has no seed 1 */
}
END_TEST

/* Over many noisy draws of 4 seeds, the 95 % interval of alpha and of the
 * loss predicted at 10x the largest budget hold the truth at close to
 * their nominal rate (a percentile bootstrap of 4 seeds covers about
 * 75 %: the t-scaled one should not). */
START_TEST(intervals_cover_the_truth_at_their_rate)
{
    const truth t = {1.20, 3000.0, 0.28};
    const int n_seed = 4, draws = 300;
    double loss[2 * 4 * 4], at = 10 * budgets[3];
    int cover_a = 0, cover_p = 0, fitted = 0;
    al_rng r;
    al_rng_seed(&r, 12345);
    for (int d = 0; d < draws; d++) {
        make_grid(loss, &t, 2, n_seed, 0.004, 0, &r);
        al_scaling_grid g = {2, 4, n_seed, budgets, loss};
        al_scaling_fit f;
        if (al_scaling_fit_design(&g, -1, &at, 1, 200, 1000 + d, &f) != 0) continue;
        fitted++;
        cover_a += f.alpha.lo <= t.alpha && t.alpha <= f.alpha.hi;
        cover_p += f.pred[0].lo <= law(&t, at) && law(&t, at) <= f.pred[0].hi;
    }
    ck_assert_int_eq(fitted, draws);
    double ca = (double)cover_a / draws, cp = (double)cover_p / draws;
    fprintf(stderr, "fit: coverage over %d draws: alpha %.3f, prediction at 10x %.3f\n", draws,
            ca, cp);
    ck_assert_msg(ca > 0.88 && ca < 0.995, "alpha coverage %.3f", ca);
    ck_assert_msg(cp > 0.88 && cp < 0.995, "prediction coverage %.3f", cp);
}
END_TEST

/* A frontier that bends up at its largest budget (+0.1 nats: the curve
 * stops improving) fails the held-out check; the same frontier unbent
 * passes it in most noisy draws. */
START_TEST(heldout_check_flags_a_bent_frontier)
{
    const truth t = {1.20, 3000.0, 0.28};
    double loss[2 * 4 * 3];
    int inside = 0, flagged = 0;
    al_rng r;
    al_rng_seed(&r, 777);
    for (int d = 0; d < 100; d++) {
        make_grid(loss, &t, 2, 3, 0.004, 0, &r);
        al_scaling_grid g = {2, 4, 3, budgets, loss};
        al_heldout h;
        ck_assert_int_eq(al_scaling_heldout(&g, 200, d, &h), 0);
        inside += h.inside;
        ck_assert(fabs(h.error - (h.predicted - h.measured)) < 1e-12);
        for (int s = 0; s < 2; s++)
            for (int k = 0; k < 3; k++) loss[(s * 4 + 3) * 3 + k] += 0.1;
        ck_assert_int_eq(al_scaling_heldout(&g, 200, d, &h), 0);
        flagged += !h.inside;
        ck_assert_msg(h.error < -0.05, "draw %d: bent frontier's error %.4f", d, h.error);
    }
    ck_assert_msg(inside >= 85, "unbent frontiers inside: %d of 100", inside);
    ck_assert_int_eq(flagged, 100);
    al_scaling_grid three = {2, 3, 3, budgets, loss};
    al_heldout h;
    /* 3 budgets: nothing to hold out */
    ck_assert_int_eq(al_scaling_heldout(&three, 10, 1, &h), -1);
    ck_assert_int_eq(h.ok, 0);
}
END_TEST

/* Two designs whose seeds share their noise (the same data order) differ
 * by a constant 0.05: the paired gap interval is narrow around 0.05 at
 * every compute, where the designs' own intervals are wide. */
START_TEST(paired_gap_removes_the_seeds_shared_noise)
{
    const truth tb = {1.20, 3000.0, 0.28}, td = {1.25, 3000.0, 0.28};
    double lb[1 * 4 * 5], ld[1 * 4 * 5];
    al_rng r;
    al_rng_seed(&r, 99);
    make_grid(lb, &tb, 1, 5, 0.03, 1, &r);
    for (int b = 0; b < 4; b++)
        for (int k = 0; k < 5; k++)
            ld[b * 5 + k] = lb[b * 5 + k] - law(&tb, budgets[b]) + law(&td, budgets[b]);
    al_scaling_grid gb = {1, 4, 5, budgets, lb}, gd = {1, 4, 5, budgets, ld};
    double at[2] = {budgets[3], 100 * budgets[3]};
    al_interval gap[2];
    al_scaling_fit fb;
    ck_assert_int_eq(al_scaling_gap(&gd, &gb, -1, at, 2, 200, 5, gap), 0);
    ck_assert_int_eq(al_scaling_fit_design(&gb, -1, at, 2, 200, 5, &fb), 0);
    for (int k = 0; k < 2; k++) {
        ck_assert_double_eq_tol(gap[k].est, 0.05, 1e-6);
        ck_assert_msg(gap[k].lo <= 0.05 + 1e-9 && 0.05 - 1e-9 <= gap[k].hi, "gap %d [%g, %g]", k,
                      gap[k].lo, gap[k].hi);
        ck_assert_msg(gap[k].hi - gap[k].lo < 0.1 * (fb.pred[k].hi - fb.pred[k].lo),
                      "gap %d width %g against the baseline's %g", k, gap[k].hi - gap[k].lo,
                      fb.pred[k].hi - fb.pred[k].lo);
    }
}
END_TEST

/* A seed with no loss anywhere (a sweep still running, or a seed that
 * failed throughout) is no sample: the intervals are those of the seeds
 * that ran, bit for bit, and one seed gives no interval (NaN), not one of
 * width 0, nor a held-out check to judge. */
START_TEST(a_seed_not_yet_run_is_no_sample)
{
    const truth t = {1.20, 3000.0, 0.28};
    double two[2 * 4 * 2], three[2 * 4 * 3];
    al_rng r;
    al_rng_seed(&r, 31);
    make_grid(two, &t, 2, 2, 0.01, 0, &r);
    for (int c = 0; c < 2 * 4; c++) {   /* the same losses, and a third seed not run */
        three[c * 3] = two[c * 2], three[c * 3 + 1] = two[c * 2 + 1];
        three[c * 3 + 2] = NAN;
    }
    al_scaling_grid g2 = {2, 4, 2, budgets, two}, g3 = {2, 4, 3, budgets, three};
    ck_assert_int_eq(al_scaling_seeds_present(&g2), 2);
    ck_assert_int_eq(al_scaling_seeds_present(&g3), 2);
    double at[1] = {10 * budgets[3]};
    al_scaling_fit f2, f3;
    ck_assert_int_eq(al_scaling_fit_design(&g2, -1, at, 1, 200, 3, &f2), 0);
    ck_assert_int_eq(al_scaling_fit_design(&g3, -1, at, 1, 200, 3, &f3), 0);
    ck_assert(isfinite(f2.alpha.lo) && f2.alpha.hi > f2.alpha.lo);
    ck_assert_double_eq(f3.alpha.lo, f2.alpha.lo);
    ck_assert_double_eq(f3.alpha.hi, f2.alpha.hi);
    ck_assert_double_eq(f3.pred[0].lo, f2.pred[0].lo);
    al_heldout h2, h3;
    ck_assert_int_eq(al_scaling_heldout(&g2, 200, 3, &h2), 0);
    ck_assert_int_eq(al_scaling_heldout(&g3, 200, 3, &h3), 0);
    ck_assert_double_eq(h3.lo, h2.lo);
    ck_assert_double_eq(h3.hi, h2.hi);

    /* only seed 0 has run: a point estimate, no interval, nothing judged */
    for (int c = 0; c < 2 * 4; c++) three[c * 3 + 1] = NAN;
    ck_assert_int_eq(al_scaling_seeds_present(&g3), 1);
    ck_assert_int_eq(al_scaling_fit_design(&g3, -1, at, 1, 200, 3, &f3), 0);
    ck_assert(isfinite(f3.fit.alpha) && isnan(f3.alpha.lo) && isnan(f3.alpha.hi));
    ck_assert(isnan(f3.E.lo) && isnan(f3.pred[0].lo));
    ck_assert_int_eq(al_scaling_heldout(&g3, 200, 3, &h3), -1);
    ck_assert(isfinite(h3.predicted) && h3.ok == 0 && h3.inside == 0);

    /* a pair shares one seed (the baseline has two): no gap interval */
    al_interval gap[1];
    ck_assert_int_eq(al_scaling_gap(&g3, &(al_scaling_grid){2, 4, 3, budgets, three}, -1, at,
                                    1, 200, 3, gap), 0);
    ck_assert(isfinite(gap[0].est) && isnan(gap[0].lo));
    double base[2 * 4 * 3];
    for (int c = 0; c < 2 * 4; c++)
        base[c * 3] = two[c * 2] + 0.05, base[c * 3 + 1] = two[c * 2 + 1] + 0.05,
        base[c * 3 + 2] = NAN;
    al_scaling_grid gb = {2, 4, 3, budgets, base};
    ck_assert_int_eq(al_scaling_gap(&g3, &gb, -1, at, 1, 200, 3, gap), 0);
    ck_assert(isfinite(gap[0].est) && isnan(gap[0].lo) && isnan(gap[0].hi));
}
END_TEST

/* A floor below zero is no loss: on a frontier whose best free curve has
 * E < 0 (here exactly -0.5, every loss still positive) the fit holds E at
 * 0 and is the least-squares A C^-alpha: nudging A or alpha either way
 * only raises the residual sum of squares. A floor above zero is left
 * free (exact_frontiers_give_their_parameters_back). */
static double rss_of(const double *C, const double *L, int n, double A, double alpha)
{
    double r = 0;
    for (int i = 0; i < n; i++) r += pow(A * pow(C[i], -alpha) - L[i], 2);
    return r;
}

START_TEST(a_floor_below_zero_is_held_at_zero)
{
    const truth t = {-0.5, 3000.0, 0.2};
    double L[4];
    for (int b = 0; b < 4; b++) L[b] = law(&t, budgets[b]);
    ck_assert(L[3] > 0.5);
    al_pow_fit f;
    ck_assert_int_eq(al_fit_power_law(budgets, L, 4, &f), 0);
    ck_assert_int_eq(f.E_at_bound, 1);
    ck_assert_double_eq(f.E, 0.0);
    ck_assert(f.alpha > 0 && f.A > 0);
    double r = rss_of(budgets, L, 4, f.A, f.alpha);
    ck_assert_double_eq_tol(f.rss, r, 1e-12 + 1e-9 * r);
    for (int s = -1; s <= 1; s += 2) {
        ck_assert_msg(rss_of(budgets, L, 4, f.A * (1 + s * 1e-4), f.alpha) > r, "A %+d", s);
        ck_assert_msg(rss_of(budgets, L, 4, f.A, f.alpha + s * 1e-5) > r, "alpha %+d", s);
    }
    /* positive floors stay free */
    const truth u = {0.3, 3000.0, 0.2};
    for (int b = 0; b < 4; b++) L[b] = law(&u, budgets[b]);
    ck_assert_int_eq(al_fit_power_law(budgets, L, 4, &f), 0);
    ck_assert_int_eq(f.E_at_bound, 0);
    ck_assert_double_eq_tol(f.E, 0.3, 0.3 * 0.02);
}
END_TEST

static const char *python(void)
{
    const char *p = getenv("AL_TORCH_PYTHON");
    return p ? p : "/usr/bin/python3";
}

/* E and alpha equal scipy.optimize.curve_fit's on the same noisy frontier
 * (an independent solver from its own start) to 1e-3 relative. */
START_TEST(fit_agrees_with_scipy_curve_fit)
{
    const truth t = {1.20, 3000.0, 0.28};
    double L[4], C[4];
    char cmd[4096], *out;
    al_rng r;
    al_rng_seed(&r, 4);
    int n = snprintf(cmd, sizeof cmd, "%s -c '\n"
                     "import warnings; warnings.simplefilter(\"ignore\")\n"
                     "import numpy as np\n"
                     "from scipy.optimize import curve_fit\n"
                     "C = np.array([", python());
    for (int b = 0; b < 4; b++) {
        C[b] = budgets[b];
        L[b] = law(&t, C[b]) + 0.01 * al_rng_normal(&r);
        n += snprintf(cmd + n, sizeof cmd - n, "%.17g,", C[b]);
    }
    n += snprintf(cmd + n, sizeof cmd - n, "])\nL = np.array([");
    for (int b = 0; b < 4; b++) n += snprintf(cmd + n, sizeof cmd - n, "%.17g,", L[b]);
    snprintf(cmd + n, sizeof cmd - n,
             "])\n"
             "f = lambda c, E, A, a: E + A * c ** -a\n"
             "p, _ = curve_fit(f, C, L, p0=[1.0, 1000.0, 0.25], maxfev=200000,\n"
             "                 xtol=1e-15, ftol=1e-15, gtol=1e-15)\n"
             "print(\"%%.15g %%.15g %%.15g\" %% tuple(p))\n"
             "' 2>&1");
    if (al_test_run(cmd, &out) != 0) {
        fprintf(stderr, "fit: skipped fit_agrees_with_scipy_curve_fit: %s has no scipy "
                "(apt-get install python3-scipy): %s\n", python(), out ? out : "");
        free(out);
        return;
    }
    double E, A, a;
    ck_assert_int_eq(sscanf(out, "%lf %lf %lf", &E, &A, &a), 3);
    free(out);
    al_pow_fit f;
    ck_assert_int_eq(al_fit_power_law(C, L, 4, &f), 0);
    ck_assert_msg(fabs(f.E / E - 1) < 1e-3 && fabs(f.alpha / a - 1) < 1e-3,
                  "attnlab E %.8g alpha %.8g, scipy E %.8g alpha %.8g", f.E, f.alpha, E, a);
}
END_TEST

Suite *fit_suite(void)
{
    Suite *s = suite_create("fit");
    TCase *tc = tcase_create("fit");
    tcase_add_test(tc, exact_frontiers_give_their_parameters_back);
    tcase_add_test(tc, too_few_points_are_refused);
    tcase_add_test(tc, frontier_is_lowest_seed_mean_over_sizes);
    tcase_add_test(tc, intervals_cover_the_truth_at_their_rate);
    tcase_add_test(tc, heldout_check_flags_a_bent_frontier);
    tcase_add_test(tc, paired_gap_removes_the_seeds_shared_noise);
    tcase_add_test(tc, a_seed_not_yet_run_is_no_sample);
    tcase_add_test(tc, a_floor_below_zero_is_held_at_zero);
    tcase_add_test(tc, fit_agrees_with_scipy_curve_fit);
    suite_add_tcase(s, tc);
    return s;
}
