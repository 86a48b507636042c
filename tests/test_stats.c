/*
 * test_stats.c - the report's statistics against values worked by hand and
 * t-table quantiles, and that linking GSL left OpenBLAS doing the products.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include <cblas.h>

#include "al_stats.h"
#include "al_test.h"

/* Student t 0.975 quantiles from a printed table (to the digits given). */
START_TEST(t_quantiles_match_the_table)
{
    static const struct { int dof; double t; } table[] = {
        {1, 12.706204736}, {2, 4.302652730}, {3, 3.182446305}, {4, 2.776445105},
        {9, 2.262157163}, {29, 2.045229642}, {100, 1.983971519},
    };
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        ck_assert_msg(fabs(al_t975(table[i].dof) - table[i].t) < 1e-8, "dof %d: %.10f",
                      table[i].dof, al_t975(table[i].dof));
}
END_TEST

/* {1, 2, 4}: mean 7/3, squared deviations 16/9 + 1/9 + 25/9 = 42/9, sd
 * sqrt(21/9); half-width t(0.975, 2) sd / sqrt(3). NaN and Inf are not
 * values. */
START_TEST(mean_sd_and_interval_by_hand)
{
    double x[] = {1, NAN, 2, INFINITY, 4};
    al_stat s;
    al_stat_of(x, 5, &s);
    ck_assert_int_eq(s.n, 3);
    ck_assert_double_eq_tol(s.mean, 7.0 / 3, 1e-15);
    ck_assert_double_eq_tol(s.sd, sqrt(21.0 / 9), 1e-15);
    ck_assert_double_eq_tol(s.ci95, 4.302652729911275 * sqrt(21.0 / 9) / sqrt(3), 1e-9);
    /* equal values far from 0: the two-pass sd stays near 0, where one pass
     * (sum of squares minus square of sum) would lose every digit */
    double y[] = {1e8 + 0.1, 1e8 + 0.1, 1e8 + 0.1};
    al_stat_of(y, 3, &s);
    ck_assert_msg(s.sd < 1e-6, "%g", s.sd);
}
END_TEST

START_TEST(one_value_has_no_interval_and_none_has_no_mean)
{
    double x[] = {2.5};
    al_stat s;
    al_stat_of(x, 1, &s);
    ck_assert_int_eq(s.n, 1);
    ck_assert(s.mean == 2.5 && isnan(s.sd) && isnan(s.ci95));
    ck_assert_int_eq(al_stat_resolved(&s), 0);   /* one pair decides nothing */
    al_stat_of(x, 0, &s);
    ck_assert(s.n == 0 && isnan(s.mean));
}
END_TEST

START_TEST(resolved_means_the_interval_excludes_zero)
{
    double d1[] = {0.20, 0.21, 0.19}, d2[] = {0.03, 0.02, 0.05}, d3[] = {-0.2, -0.21, -0.19};
    al_stat s;
    al_stat_of(d1, 3, &s);
    ck_assert_int_eq(al_stat_resolved(&s), 1);
    al_stat_of(d2, 3, &s);   /* mean 0.0333, half-width 0.0379 */
    ck_assert_int_eq(al_stat_resolved(&s), 0);
    al_stat_of(d3, 3, &s);
    ck_assert_int_eq(al_stat_resolved(&s), 1);
}
END_TEST

/* ------------------------------------------------------------ Holm */

/* A family worked by hand: p = {0.010, 0.040, 0.030, 0.005}, m = 4.
 * Sorted: 0.005 <= 0.05/4 = 0.0125 (reject), 0.010 <= 0.05/3 = 0.0167
 * (reject), 0.030 > 0.05/2 = 0.025: stop. Unadjusted, all four are below
 * 0.05. */
START_TEST(holm_rejects_the_hand_worked_family)
{
    double p[] = {0.010, 0.040, 0.030, 0.005};
    int rej[4], want[] = {1, 0, 0, 1};
    ck_assert_int_eq(al_holm(4, p, 0.05, rej), 2);
    for (int i = 0; i < 4; i++) ck_assert_msg(rej[i] == want[i], "test %d", i);
    /* a step-down stops at the first failure: 0.03 > 0.05/2 keeps 0.045,
     * below 0.05/1, unresolved too */
    double q[] = {0.001, 0.03, 0.045};
    int want_q[] = {1, 0, 0};
    ck_assert_int_eq(al_holm(3, q, 0.05, rej), 1);
    for (int i = 0; i < 3; i++) ck_assert_msg(rej[i] == want_q[i], "q %d", i);
    /* a test without a p-value stays in the family (m = 2): 0.03 > 0.025 */
    double r[] = {NAN, 0.03};
    ck_assert_int_eq(al_holm(2, r, 0.05, rej), 0);
    double one[] = {0.049};
    ck_assert_int_eq(al_holm(1, one, 0.05, rej), 1);   /* m = 1: the plain test */
}
END_TEST

/* Exact McNemar by hand: n discordant pairs split b:c, p = 2 P(X <= min)
 * for X ~ Binomial(n, 1/2). 5:0 -> 2/32; 9:0 -> 2/512; 7:0 -> 2/128; 3:5 ->
 * 2 (1 + 8 + 28 + 56)/256 = 186/256; a tie caps at 1; no discordant pair
 * says nothing (1). */
START_TEST(mcnemar_exact_p_by_hand)
{
    ck_assert_double_eq_tol(al_mcnemar_p(5, 0), 0.0625, 1e-15);
    ck_assert_double_eq_tol(al_mcnemar_p(0, 5), 0.0625, 1e-15);
    ck_assert_double_eq_tol(al_mcnemar_p(9, 0), 0.00390625, 1e-15);
    ck_assert_double_eq_tol(al_mcnemar_p(7, 0), 0.015625, 1e-15);
    ck_assert_double_eq_tol(al_mcnemar_p(3, 5), 186.0 / 256, 1e-15);
    ck_assert_double_eq_tol(al_mcnemar_p(5, 3), 186.0 / 256, 1e-15);
    ck_assert_double_eq(al_mcnemar_p(10, 10), 1.0);
    ck_assert_double_eq(al_mcnemar_p(0, 0), 1.0);
    ck_assert(isnan(al_mcnemar_p(-1, 2)));
    /* large n stays finite and matches the normal approximation's order:
     * 60:40 (z = 2.0, two-sided about 0.0569 exact) */
    double p = al_mcnemar_p(60, 40);
    ck_assert_msg(p > 0.05 && p < 0.06, "%g", p);
}
END_TEST

/* p < 0.05 exactly when the 95 % interval excludes 0; the p-value of
 * {0.20, 0.21, 0.19} from scipy.stats.ttest_1samp: 0.0008322931113192272. */
START_TEST(p_value_agrees_with_the_interval)
{
    double d1[] = {0.20, 0.21, 0.19}, d2[] = {0.03, 0.05, 0.07}, d3[] = {0.03, 0.02, 0.05};
    al_stat s;
    al_stat_of(d1, 3, &s);
    ck_assert_double_eq_tol(al_stat_p(&s), 0.0008322931113192272, 1e-12);
    al_stat_of(d2, 3, &s);   /* scipy: 0.04941362421328313 */
    ck_assert_double_eq_tol(al_stat_p(&s), 0.04941362421328313, 1e-12);
    ck_assert_int_eq(al_stat_resolved(&s), 1);
    al_stat_of(d3, 3, &s);
    ck_assert(al_stat_p(&s) > 0.05 && !al_stat_resolved(&s));
    al_stat_of(d1, 1, &s);
    ck_assert(isnan(al_stat_p(&s)));
}
END_TEST

/* Pairs that all moved by the same amount (sd 0; a share over 100 keys
 * moves in steps of 0.01, so two seeds agree often): t would be infinite.
 * The sign test instead: n differences on one side, p = 2 / 2^n. Two pairs
 * 0.5, five 1/16, six 1/32 (the first below 0.05); no difference at all 1. */
START_TEST(equal_differences_fall_back_on_the_sign_test)
{
    double up[6] = {0.03, 0.03, 0.03, 0.03, 0.03, 0.03}, down[6], zero[3] = {0, 0, 0};
    for (int i = 0; i < 6; i++) down[i] = -up[i];
    al_stat s;
    al_stat_of(up, 2, &s);
    ck_assert(s.sd == 0 && s.ci95 == 0);
    ck_assert_double_eq(al_stat_p(&s), 0.5);
    ck_assert_int_eq(al_stat_resolved(&s), 0);
    al_stat_of(down, 5, &s);
    ck_assert_double_eq(al_stat_p(&s), 0.0625);
    ck_assert_int_eq(al_stat_resolved(&s), 0);
    al_stat_of(down, 6, &s);
    ck_assert_double_eq(al_stat_p(&s), 0.03125);
    ck_assert_int_eq(al_stat_resolved(&s), 1);
    al_stat_of(zero, 3, &s);
    ck_assert_double_eq(al_stat_p(&s), 1.0);
    ck_assert_int_eq(al_stat_resolved(&s), 0);
    /* equal to rounding: 0.1 + 0.2 and 0.3 differ in the 17th digit, a sd of
     * 4e-17 that the t test would read as near-certainty (p about 1e-15) */
    double r[2] = {0.1 + 0.2, 0.3}, noise[3] = {1e-17, -1e-17, 2e-17}, near[2] = {1e-3, 1.5e-3};
    al_stat_of(r, 2, &s);
    ck_assert(s.sd > 0 && al_stat_all_equal(&s));
    ck_assert_double_eq(al_stat_p(&s), 0.5);
    ck_assert_int_eq(al_stat_resolved(&s), 0);
    al_stat_of(noise, 3, &s);   /* rounding around 0: no difference */
    ck_assert_double_eq(al_stat_p(&s), 1.0);
    al_stat_of(near, 2, &s);    /* a real, if small, spread: the t test */
    ck_assert(!al_stat_all_equal(&s) && al_stat_p(&s) > 0.05 && al_stat_p(&s) < 0.5);
    /* the seeds such a difference needs are the sign test's 6 (or beyond a smaller cap) */
    ck_assert_int_eq(al_seeds_needed(0.03, 0.0, 0.8, 10000), AL_SIGN_TEST_PAIRS);
    ck_assert_int_eq(al_seeds_needed(0.03, 0.0, 0.8, 4), 5);
    ck_assert_int_eq(al_seeds_needed(0.0, 0.0, 0.8, 10000), 0);
}
END_TEST

/* ------------------------------------------------------------ power */

/* Pairs for 80 % power, two-sided paired t at 5 %, from the printed table
 * of Cohen (1988) as G*Power gives it: d_z 0.2 -> 199, 0.5 -> 34,
 * 0.8 -> 15, 1.0 -> 10 (also scipy's nct, the test below). */
START_TEST(seeds_needed_matches_the_power_table)
{
    static const struct { double d; int n; } table[] = {
        {0.2, 199}, {0.5, 34}, {0.8, 15}, {1.0, 10}, {1.5, 6}, {2.0, 5}, {3.0, 4},
    };
    for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
        int n = al_seeds_needed(table[i].d * 0.03, 0.03, 0.8, 10000);
        ck_assert_msg(n == table[i].n, "d %.1f: %d seeds, the table says %d", table[i].d, n,
                      table[i].n);
        ck_assert_int_eq(al_seeds_needed(-table[i].d, 1.0, 0.8, 10000), table[i].n);
    }
    ck_assert_int_eq(al_seeds_needed(0.0, 1.0, 0.8, 10000), 0);     /* nothing to size */
    ck_assert_int_eq(al_seeds_needed(0.1, NAN, 0.8, 10000), 0);     /* one pair: no sd */
    ck_assert_int_eq(al_seeds_needed(0.001, 1.0, 0.8, 10000), 10001);   /* beyond the cap */
}
END_TEST

static const char *python(void)
{
    const char *p = getenv("AL_TORCH_PYTHON");
    return p ? p : "/usr/bin/python3";
}

/* The power itself against scipy.stats.nct (an independent noncentral t),
 * over a grid of effects and pairs; skipped without scipy. */
START_TEST(power_agrees_with_scipy_nct)
{
    static const double d[] = {0.1, 0.3, 0.5, 1.0, 2.0, 4.0};
    static const int n[] = {2, 3, 5, 10, 30, 200};
    char cmd[2048], *out;
    snprintf(cmd, sizeof cmd, "%s -c '\n"
             "import warnings; warnings.simplefilter(\"ignore\")\n"
             "from scipy import stats\n"
             "for d in (0.1, 0.3, 0.5, 1.0, 2.0, 4.0):\n"
             "  for n in (2, 3, 5, 10, 30, 200):\n"
             "    c = stats.t.isf(0.025, n - 1); lam = d * n ** 0.5\n"
             "    print(\"%%.15g\" %% (stats.nct.sf(c, n - 1, lam) + stats.nct.cdf(-c, n - 1, lam)))\n"
             "' 2>&1", python());
    if (al_test_run(cmd, &out) != 0) {
        fprintf(stderr, "stats: skipped power_agrees_with_scipy_nct: %s has no scipy "
                "(apt-get install python3-scipy)\n", python());
        free(out);
        return;
    }
    char *p = out;
    for (size_t i = 0; i < 6; i++)
        for (size_t j = 0; j < 6; j++) {
            double want = strtod(p, &p), got = al_paired_power(d[i], n[j], 0.05);
            ck_assert_msg(fabs(got - want) < 1e-7, "d %.1f n %d: %.12f, scipy %.12f", d[i],
                          n[j], got, want);
        }
    free(out);
}
END_TEST

/* ------------------------------------------------------------ sequential */

/* The looks of {min 3, max 10, step 2}: 3, 5, 7, 9, 10; their levels sum
 * to 0.05 and each is the Pocock-type spending increment. */
START_TEST(sequential_looks_spend_five_percent)
{
    al_seq_plan p = {3, 10, 2, 0.05};
    int n[AL_SEQ_MAX_LOOKS], want[] = {3, 5, 7, 9, 10};
    double a[AL_SEQ_MAX_LOOKS], sum = 0;
    ck_assert_int_eq(al_seq_looks(&p, n, a), 5);
    for (int k = 0; k < 5; k++) {
        ck_assert_int_eq(n[k], want[k]);
        sum += a[k];
    }
    ck_assert_double_eq_tol(sum, 0.05, 1e-15);
    ck_assert_double_eq_tol(a[0], 0.05 * log(1 + (exp(1.0) - 1) * 0.3), 1e-15);
    al_seq_plan q = {4, 4, 1, 0.05};   /* min == max: one look at the full level */
    ck_assert_int_eq(al_seq_looks(&q, n, a), 1);
    ck_assert_double_eq_tol(a[0], 0.05, 1e-15);
}
END_TEST

/* xorshift64* and Box-Muller: a fixed stream, the same on every machine. */
static double uniform(unsigned long long *s)
{
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return ((*s * 2685821657736338717ULL) >> 11) * 0x1.0p-53 + 0x1.0p-54;
}

static double normal(unsigned long long *s)
{
    double u = uniform(s), v = uniform(s);
    return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

/* Synthetic null data: 3 comparisons, every paired difference N(0, 1),
 * looks at 2, 3, ..., 10 seeds (9 looks). The rule's rate of any false
 * "resolved" must stay <= 5 %; with 20000 replicates its standard error
 * is about 0.15 %, so an excess of one point would show. Testing every look
 * at the full 5 % (the naive rule) must exceed it, or the simulation could
 * not tell the two apart. */
START_TEST(sequential_rule_keeps_false_resolutions_under_five_percent)
{
    enum { REPS = 20000, M = 3, SEEDS = 10 };
    al_seq_plan p = {2, SEEDS, 1, 0.05}, naive = {2, SEEDS, 1, 0.05};
    unsigned long long rng = 0x9e3779b97f4a7c15ULL;
    double x[M * SEEDS];
    int res[M], false_rule = 0, false_naive = 0;
    for (int r = 0; r < REPS; r++) {
        for (int i = 0; i < M * SEEDS; i++) x[i] = normal(&rng);
        al_seq_decide(&p, M, x, SEEDS, res);
        false_rule += res[0] | res[1] | res[2];
        int any = 0;   /* naive: Holm at 5 % at every look */
        for (int n = naive.min; n <= SEEDS && !any; n++) {
            double pv[M];
            for (int i = 0; i < M; i++) {
                al_stat d;
                al_stat_of(x + i * SEEDS, n, &d);
                pv[i] = al_stat_p(&d);
            }
            any = al_holm(M, pv, 0.05, res) > 0;
        }
        false_naive += any;
    }
    double rate = (double)false_rule / REPS, naive_rate = (double)false_naive / REPS;
    fprintf(stderr, "stats: false resolved on null data: rule %.4f, naive %.4f\n", rate,
            naive_rate);
    ck_assert_msg(rate <= 0.05, "the rule resolved %.4f of null replicates", rate);
    ck_assert_msg(naive_rate > 0.06, "naive looks gave only %.4f", naive_rate);
}
END_TEST

/* Data with a real difference (1 sd) is resolved, early: at a look
 * before the last. */
START_TEST(sequential_rule_resolves_a_real_difference)
{
    al_seq_plan p = {3, 20, 1, 0.05};
    unsigned long long rng = 12345;
    double x[2 * 20];
    int res[2], hits = 0, early = 0;
    for (int r = 0; r < 200; r++) {
        for (int i = 0; i < 40; i++) x[i] = normal(&rng) + (i < 20 ? 2.0 : -2.0);
        for (int n = 3; n <= 20; n++)
            if (al_seq_decide(&p, 2, x, n, res) && res[0] && res[1]) {
                early += n < 20;
                break;
            }
        hits += res[0] && res[1];
    }
    ck_assert_msg(hits >= 190, "%d of 200", hits);
    ck_assert_msg(early >= 190, "%d of 200 before the last look", early);
}
END_TEST

/* ------------------------------------------------------------ slope */

/* y = 3 - 0.02 x + {+0.1, -0.1, -0.1, +0.1} at x = 0, 1, 2, 3: by hand,
 * mean x 1.5, sum (x - 1.5)^2 = 5, sum (x - 1.5)(e) = -0.15 + 0.05 - 0.05
 * + 0.15 = 0, so the slope is exactly -0.02; a NaN point is skipped. */
START_TEST(least_squares_slope_by_hand)
{
    double x[] = {0, 1, 2, 3, 4}, y[] = {3.1, 2.88, 2.86, 3.04, NAN};
    ck_assert_double_eq_tol(al_ls_slope(x, y, 5), -0.02, 1e-12);
    double y2[] = {1, 2, 4, NAN, NAN};   /* (0,1) (1,2) (2,4): 3/2 by hand */
    ck_assert_double_eq_tol(al_ls_slope(x, y2, 5), 1.5, 1e-12);
    ck_assert(isnan(al_ls_slope(x, y2, 1)));
}
END_TEST

/* libgsl pulls in its own reference cblas (libgslcblas): the products must
 * still come from OpenBLAS. */
START_TEST(openblas_still_provides_cblas)
{
    Dl_info info;
    void *sym = dlsym(RTLD_DEFAULT, "cblas_sgemm");
    ck_assert_ptr_nonnull(sym);
    ck_assert(dladdr(sym, &info) != 0);
    ck_assert_msg(strstr(info.dli_fname, "openblas") != NULL, "cblas_sgemm comes from %s",
                  info.dli_fname);
}
END_TEST

Suite *stats_suite(void)
{
    Suite *s = suite_create("stats");
    TCase *tc = tcase_create("stats");
    tcase_add_test(tc, t_quantiles_match_the_table);
    tcase_add_test(tc, mean_sd_and_interval_by_hand);
    tcase_add_test(tc, one_value_has_no_interval_and_none_has_no_mean);
    tcase_add_test(tc, resolved_means_the_interval_excludes_zero);
    tcase_add_test(tc, openblas_still_provides_cblas);
    tcase_add_test(tc, holm_rejects_the_hand_worked_family);
    tcase_add_test(tc, mcnemar_exact_p_by_hand);
    tcase_add_test(tc, p_value_agrees_with_the_interval);
    tcase_add_test(tc, seeds_needed_matches_the_power_table);
    tcase_add_test(tc, equal_differences_fall_back_on_the_sign_test);
    tcase_add_test(tc, power_agrees_with_scipy_nct);
    tcase_add_test(tc, sequential_looks_spend_five_percent);
    tcase_add_test(tc, sequential_rule_keeps_false_resolutions_under_five_percent);
    tcase_add_test(tc, sequential_rule_resolves_a_real_difference);
    tcase_add_test(tc, least_squares_slope_by_hand);
    suite_add_tcase(s, tc);
    return s;
}
