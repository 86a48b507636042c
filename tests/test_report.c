/*
 * test_report.c - the report from a hand-made summary.csv: the Pareto
 * front against a hand-worked answer, seed means and sample standard
 * deviations computed here, curves averaged over seeds, plots with and
 * without gnuplot, and malformed summaries as one-line errors.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "al_report.h"
#include "al_test.h"

/* ------------------------------------------------------------ helpers */

static const char header[] =
    "trial,config,variant,n_kv_head,d_latent,d_rope,causal,seed,params,kv_bytes_per_token,"
    "steps,tokens_per_step,final_train_loss,val_loss,best_val_loss,val_accuracy,"
    "tokens_per_s,wall_s,status,reason\n";

/* Five configurations: mha 2 seeds (2.0, 2.2), gqa 2 seeds (2.3, 2.3),
 * mqa one ok and one failed, mla one seed, "big" dominated by mha.
 * By hand: mla (1536, 2.25) beats gqa (2048, 2.3) on both, mha (4096,
 * 2.1) beats big (8192, 2.6); the front is mqa, mla, mha. */
static const char rows[] =
    "mha_seed1,mha,mha,4,,,true,1,1000,4096,100,64,1.9,2.0,2.0,,1000,1.0,ok,\n"
    "mha_seed2,mha,mha,4,,,true,2,1000,4096,100,64,2.1,2.2,2.2,,1200,1.0,ok,\n"
    "gqa_seed1,gqa,gqa,2,,,true,1,900,2048,100,64,2.2,2.3,2.3,,1100,1.0,ok,\n"
    "gqa_seed2,gqa,gqa,2,,,true,2,900,2048,100,64,2.2,2.3,2.3,,1100,1.0,ok,\n"
    "mqa_seed1,mqa,mqa,1,,,true,1,850,1024,100,64,2.4,2.5,2.5,,1300,1.0,ok,\n"
    "mqa_seed2,mqa,mqa,1,,,true,2,850,1024,100,64,,,,,,0.5,failed,\"exit status 1: boom, with a comma\"\n"
    "mla_seed1,mla,mla,,32,16,true,1,1100,1536,100,64,2.1,2.25,2.25,,900,1.0,ok,\n"
    "big_seed1,big,mha,8,,,true,1,2000,8192,100,64,2.5,2.6,2.6,,500,1.0,ok,\n";

static char *summary_dir(const char *body)
{
    char *dir = al_test_tmpdir(), text[8192];
    snprintf(text, sizeof text, "%s%s", header, body);
    free(al_test_write(dir, "summary.csv", text));
    return dir;
}

/* noinline: inlined into callers, gcc 12 mistakes the returned buffer for
 * a pointer to the local that received it (-Wdangling-pointer). */
static __attribute__((noinline)) char *read_in(const char *dir, const char *name)
{
    char path[4200], *t = NULL;
    size_t n;
    al_err e;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ck_assert_msg(al_read_file(path, &t, &n, &e) == 0, "%s", e.msg);
    return t;
}

/* The report.md table row of a configuration ("| name | ..."). */
static char *table_row(const char *md, const char *config)
{
    char key[128];
    snprintf(key, sizeof key, "\n| %s | ", config);
    const char *p = strstr(md, key);
    if (!p) return strdup("(no such row)");
    return strndup(p + 1, strcspn(p + 1, "\n"));
}

static int file_starts_with(const char *dir, const char *name, const char *magic)
{
    char path[4200], buf[16] = {0};
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(buf, 1, strlen(magic), f);
    fclose(f);
    return n == strlen(magic) && memcmp(buf, magic, n) == 0;
}

/* ------------------------------------------------------------ Pareto */

START_TEST(pareto_front_keeps_the_undominated_points)
{
    /* cost, loss: (1, 5) (2, 4) (2, 6) (3, 4) (4, 1) (5, 1) (NaN) */
    double cost[] = {1, 2, 2, 3, 4, 5, 2}, loss[] = {5, 4, 6, 4, 1, 1, NAN};
    int on[7], want[] = {1, 1, 0, 0, 1, 0, 0};
    ck_assert_int_eq(al_pareto_front(7, cost, loss, 0, on), 3);
    for (int i = 0; i < 7; i++) ck_assert_msg(on[i] == want[i], "point %d", i);
    /* maximising: (1, 5) beats every costlier point but (2, 6) */
    int want_max[] = {1, 0, 1, 0, 0, 0, 0};
    ck_assert_int_eq(al_pareto_front(7, cost, loss, 1, on), 2);
    for (int i = 0; i < 7; i++) ck_assert_msg(on[i] == want_max[i], "max point %d", i);
    /* identical points do not dominate each other */
    double c2[] = {1, 1}, q2[] = {2, 2};
    ck_assert_int_eq(al_pareto_front(2, c2, q2, 0, on), 2);
}
END_TEST

/* ------------------------------------------------------------ report.md */

START_TEST(report_aggregates_seeds_and_marks_the_front)
{
    char *dir = summary_dir(rows);
    setenv("AL_GNUPLOT", "/nonexistent/gnuplot", 1);   /* tables only, quickly */
    al_report_stats st;
    al_err e;
    ck_assert_msg(al_report_write(dir, &st, &e) == 0, "%s", e.msg);
    unsetenv("AL_GNUPLOT");
    ck_assert_int_eq(st.n_trials, 8);
    ck_assert_int_eq(st.n_ok, 7);
    ck_assert_int_eq(st.n_configs, 5);
    ck_assert_int_eq(st.n_front, 3);
    char *md = read_in(dir, "report.md");
    /* sample sd of {2.0, 2.2} = 0.1414; of {2.3, 2.3} = 0 */
    double sd = sqrt(((2.0 - 2.1) * (2.0 - 2.1) + (2.2 - 2.1) * (2.2 - 2.1)) / 1);
    char want[64];
    snprintf(want, sizeof want, "| 2.1000 ± %.4f |", sd);
    char *r = table_row(md, "mha");
    ck_assert_msg(strstr(r, want) && strstr(r, "| 2/2 | **yes** |"), "%s", r);
    ck_assert_msg(strstr(r, "| 4 | – | – |") && strstr(r, "| 1,000 | 4,096 |"), "%s", r);
    ck_assert_msg(strstr(r, "| 1,100 |"), "%s", r);   /* tokens/s mean */
    free(r);
    r = table_row(md, "gqa");
    ck_assert_msg(strstr(r, "| 2.3000 ± 0.0000 |") && strstr(r, "| 2/2 |  |"), "%s", r);
    free(r);
    r = table_row(md, "mqa");
    ck_assert_msg(strstr(r, "| 2.5000 |") && strstr(r, "| 1/2 | **yes** |"), "%s", r);
    free(r);
    r = table_row(md, "mla");
    ck_assert_msg(strstr(r, "| – | 32 | 16 |") && strstr(r, "**yes**"), "%s", r);
    free(r);
    r = table_row(md, "big");
    ck_assert_msg(!strstr(r, "**yes**"), "%s", r);
    free(r);
    /* largest cache first */
    ck_assert(strstr(md, "| big |") < strstr(md, "| mha |"));
    ck_assert(strstr(md, "| mha |") < strstr(md, "| mqa |"));
    ck_assert_ptr_nonnull(strstr(md, "- **mqa**: 1,024 bytes/token (8x smaller than big), val loss 2.5000 (-0.1000)"));
    ck_assert_ptr_nonnull(strstr(md, "| mqa_seed2 | failed | exit status 1: boom, with a comma |"));
    ck_assert_ptr_nonnull(strstr(md, "gnuplot was not found"));
    ck_assert_int_eq(st.plots, AL_PLOTS_NO_GNUPLOT);
    char *front = read_in(dir, "front.dat"), *gp = read_in(dir, "tradeoff.gp");
    ck_assert_str_eq(strchr(front, '\n') + 1, "1024 2.5\n1536 2.25\n4096 2.1\n");
    ck_assert_ptr_nonnull(strstr(gp, "set logscale x"));
    free(front), free(gp), free(md), free(dir);
}
END_TEST

START_TEST(accuracy_is_the_measure_when_every_config_has_one)
{
    char *dir = summary_dir(
        "a_seed1,a,mha,4,,,true,1,10,100,10,8,1.0,1.0,1.0,0.90,1,1,ok,\n"
        "b_seed1,b,mqa,1,,,true,1,10,50,10,8,1.2,1.2,1.2,0.95,1,1,ok,\n"
        "c_seed1,c,gqa,2,,,false,1,10,75,10,8,0.1,0.1,0.1,0.50,1,1,ok,\n");
    setenv("AL_GNUPLOT", "/nonexistent/gnuplot", 1);
    al_report_stats st;
    al_err e;
    ck_assert_msg(al_report_write(dir, &st, &e) == 0, "%s", e.msg);
    unsetenv("AL_GNUPLOT");
    ck_assert_int_eq(st.n_front, 1);   /* b: smallest cache, best accuracy */
    char *md = read_in(dir, "report.md");
    ck_assert_ptr_nonnull(strstr(md, "## Pareto front: val accuracy against"));
    char *r = table_row(md, "b");
    ck_assert_msg(strstr(r, "**yes**"), "%s", r);
    free(r);
    r = table_row(md, "c");
    ck_assert_msg(strstr(r, "| **false** |"), "%s", r);   /* the unmasked ablation is named */
    free(r);
    ck_assert_ptr_nonnull(strstr(md, "## The causal mask"));
    free(md), free(dir);
}
END_TEST

/* Curves average the seeds' metrics.csv at each step; tokens = step x
 * tokens_per_step. */
START_TEST(curves_average_seeds_per_step)
{
    char *dir = summary_dir(rows), sub[4200];
    static const char *const m[] = {"step,train_loss,val_loss\n0,,5.0\n100,1.9,2.0\n",
                                    "step,train_loss,val_loss\n0,,5.2\n100,2.1,2.2\n"};
    for (int i = 0; i < 2; i++) {
        snprintf(sub, sizeof sub, "%s/mha_seed%d", dir, i + 1);
        mkdir(sub, 0777);
        free(al_test_write(sub, "metrics.csv", m[i]));
    }
    setenv("AL_GNUPLOT", "/nonexistent/gnuplot", 1);
    al_report_stats st;
    al_err e;
    ck_assert_msg(al_report_write(dir, &st, &e) == 0, "%s", e.msg);
    unsetenv("AL_GNUPLOT");
    char *d = read_in(dir, "curves.dat"), *gp = read_in(dir, "curves.gp");
    ck_assert_msg(strstr(d, "# mha\n0 0 5.1\n100 6400 2.1\n"), "%s", d);
    ck_assert_ptr_nonnull(strstr(gp, "\"curves.dat\" index 0 using 1:3"));
    ck_assert_ptr_nonnull(strstr(gp, "title \"mha\""));
    free(d), free(gp), free(dir);
}
END_TEST

START_TEST(gnuplot_draws_png_and_svg_beside_its_script)
{
    if (al_test_run("command -v gnuplot", NULL) != 0) {
        fprintf(stderr, "skipped: gnuplot is not installed\n");
        return;
    }
    char *dir = summary_dir(rows);
    al_report_stats st;
    al_err e;
    ck_assert_msg(al_report_write(dir, &st, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(st.plots, AL_PLOTS_DRAWN);
    ck_assert(file_starts_with(dir, "tradeoff.png", "\x89PNG"));
    ck_assert(file_starts_with(dir, "curves.png", "\x89PNG"));
    ck_assert(file_starts_with(dir, "tradeoff.svg", "<?xml"));
    ck_assert(file_starts_with(dir, "tradeoff.gp", "# tradeoff.gp"));
    char *md = read_in(dir, "report.md");
    ck_assert_ptr_nonnull(strstr(md, "![val loss against KV-cache bytes per token](tradeoff.png)"));
    free(md), free(dir);
}
END_TEST

/* ------------------------------------------------------------ errors */

START_TEST(bad_summaries_are_one_line_errors)
{
    al_report_stats st;
    al_err e;
    char *dir = al_test_tmpdir(), want[4300];
    ck_assert_int_eq(al_report_write(dir, &st, &e), -1);
    snprintf(want, sizeof want, "%s/summary.csv: cannot open", dir);
    ck_assert_msg(strstr(e.msg, want), "%s", e.msg);
    free(al_test_write(dir, "summary.csv", "trial,status,kv_bytes_per_token\nx,ok,1\n"));
    ck_assert_int_eq(al_report_write(dir, &st, &e), -1);
    snprintf(want, sizeof want, "%s/summary.csv:1: error: no column 'val_loss'", dir);
    ck_assert_msg(strstr(e.msg, want), "%s", e.msg);
    free(al_test_write(dir, "summary.csv",
                       "trial,status,kv_bytes_per_token,val_loss\nx,ok,1,2\ny,ok,1,abc\n"));
    ck_assert_int_eq(al_report_write(dir, &st, &e), -1);
    snprintf(want, sizeof want, "%s/summary.csv:3: error: column 'val_loss': 'abc' is not a number",
             dir);
    ck_assert_str_eq(e.msg, want);
    char cmd[4400], *out;
    snprintf(cmd, sizeof cmd, "%s report %s", al_test_binary(), dir);
    ck_assert_int_eq(al_test_run(cmd, &out), 2);
    ck_assert_msg(strstr(out, "'abc' is not a number"), "%s", out);
    free(out), free(dir);
}
END_TEST

Suite *report_suite(void)
{
    Suite *s = suite_create("report");
    TCase *tc = tcase_create("report");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, pareto_front_keeps_the_undominated_points);
    tcase_add_test(tc, report_aggregates_seeds_and_marks_the_front);
    tcase_add_test(tc, accuracy_is_the_measure_when_every_config_has_one);
    tcase_add_test(tc, curves_average_seeds_per_step);
    tcase_add_test(tc, gnuplot_draws_png_and_svg_beside_its_script);
    tcase_add_test(tc, bad_summaries_are_one_line_errors);
    suite_add_tcase(s, tc);
    return s;
}
