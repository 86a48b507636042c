/*
 * test_stats.c - the report's statistics against values worked by hand and
 * t-table quantiles, and that linking GSL left OpenBLAS doing the products.
 */
#include <dlfcn.h>
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
    suite_add_tcase(s, tc);
    return s;
}
