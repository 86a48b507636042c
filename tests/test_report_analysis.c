/*
 * test_report_analysis.c - the report's analysis on its own
 * (al_report_analyze): it writes no file, it holds the configurations and
 * the sequential seeds decision the written report then shows, and that
 * decision (al_report_seeds_due, what `attnlab sweep` asks between rounds)
 * follows the rounds' rule on hand-made trial results.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "al_csv.h"
#include "al_report.h"
#include "al_stats.h"
#include "al_test.h"
#include "al_util.h"

#include "../src/report/report_rows.h"

/* ------------------------------------------------------------ helpers */

static const char header[] = "trial,config,seed,kv_bytes_per_token,val_loss,status\n";

/* A results directory: summary.csv from rows, and a sweep.json whose
 * seeds come in rounds {min, max, step 1} (max 0: no sweep.json). */
static char *results_dir(const char *rows, int min, int max)
{
    char *dir = al_test_tmpdir(), text[4096];
    snprintf(text, sizeof text, "%s%s", header, rows);
    free(al_test_write(dir, "summary.csv", text));
    if (max) {
        snprintf(text, sizeof text, "{\"experiment\": \"rounds\", \"seeds_until\": "
                 "{\"min\": %d, \"max\": %d, \"step\": 1}}\n", min, max);
        free(al_test_write(dir, "sweep.json", text));
    }
    return dir;
}

/* The names in dir, sorted, one per line (malloc'ed). */
static char *listing(const char *dir)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, alphasort);
    ck_assert_int_ge(n, 0);
    char *out = al_calloc(1, 1);
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        size_t k = strlen(ents[i]->d_name);
        out = realloc(out, len + k + 2);
        memcpy(out + len, ents[i]->d_name, k);
        len += k;
        out[len++] = '\n';
        out[len] = 0;
        free(ents[i]);
    }
    free(ents);
    return out;
}

static __attribute__((noinline)) char *read_in(const char *dir, const char *name)
{
    char path[4200], *t = NULL;
    size_t n;
    al_err e;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ck_assert_msg(al_read_file(path, &t, &n, &e) == 0, "%s", e.msg);
    return t;
}

static al_report_analysis *analyze(const char *dir)
{
    al_report_analysis *A;
    al_err e;
    ck_assert_msg(al_report_analyze(dir, &A, &e) == 0, "%s", e.msg);
    return A;
}

/* Two configurations, baseline `a` and `b`, whose val losses differ by
 * seed as given (b minus a), a at 2.0 + 0.1 s for seed s. */
static char *pairs_dir(const double *diff, int n_seeds, int min, int max)
{
    char rows[2048] = "";
    for (int s = 1; s <= n_seeds; s++) {
        size_t len = strlen(rows);
        double a = 2.0 + 0.1 * s;
        snprintf(rows + len, sizeof rows - len, "a_seed%d,a,%d,4096,%.6f,ok\n"
                 "b_seed%d,b,%d,1024,%.6f,ok\n", s, s, a, s, s, a + diff[s - 1]);
    }
    return results_dir(rows, min, max);
}

/* The paired t statistic of x[0..n) and, by hand, whether it passes the
 * first look's level of the plan (one comparison: no Holm step). An
 * independent path to the decision: no al_seq_decide, no report code. */
static int resolved_at_first_look(const double *x, int n, const al_seq_plan *p)
{
    double alpha[AL_SEQ_MAX_LOOKS], mean = 0, ss = 0;
    al_seq_looks(p, NULL, alpha);
    for (int i = 0; i < n; i++) mean += x[i] / n;
    for (int i = 0; i < n; i++) ss += (x[i] - mean) * (x[i] - mean);
    double t = mean / (sqrt(ss / (n - 1)) / sqrt((double)n));
    return fabs(t) > al_t_quantile(1 - alpha[0] / 2, n - 1);
}

/* ------------------------------------------------------------ no file */

/* The analysis alone leaves the directory as it was; the report written
 * from it shows the same configurations, verdicts and decision. */
START_TEST(analysis_writes_no_file_and_holds_what_the_report_shows)
{
    double diff[] = {0.30, 0.31};
    char *dir = pairs_dir(diff, 2, 2, 4);
    char *before = listing(dir);
    al_report_analysis *A = analyze(dir);
    char *after = listing(dir);
    ck_assert_str_eq(after, before);
    ck_assert_str_eq(after, ".\n..\nsummary.csv\nsweep.json\n");
    al_report_rounds r = al_report_rounds_of(A);
    ck_assert_int_eq(r.on, 1);
    ck_assert_int_eq(r.looks, 1);
    ck_assert_int_eq(r.done, 1);
    ck_assert_int_eq(al_report_seeds_due(A), 0);
    ck_assert_int_eq(A->n_groups, 2);
    ck_assert_str_eq(A->g[0].first->group, "a");   /* the table's order: larger cache first */
    ck_assert_str_eq(A->g[1].first->group, "b");
    ck_assert_int_eq(A->g[0].is_base, 1);
    ck_assert_int_eq(A->g[1].vs.resolved, 1);
    ck_assert_double_eq_tol(A->g[1].vs.delta.mean, 0.305, 1e-9);

    setenv("AL_GNUPLOT", "/nonexistent/gnuplot", 1);   /* tables only, quickly */
    al_report_stats st;
    al_err e;
    ck_assert_msg(al_report_write_analysis(A, &st, &e) == 0, "%s", e.msg);
    unsetenv("AL_GNUPLOT");
    ck_assert_int_eq(st.n_configs, A->n_groups);
    ck_assert_int_eq(st.n_front, A->n_front);
    char *md = read_in(dir, "report.md");
    const char *ra = strstr(md, "\n| a (baseline) |"), *rb = strstr(md, "\n| b |");
    ck_assert_msg(ra && rb && rb < ra, "%s", md);   /* the table: cheaper first */
    ck_assert_msg(strstr(md, "looks at 2, 3, 4 seeds; 1 taken") &&
                  strstr(md, "The rounds are over."), "%s", md);
    ck_assert_msg(strstr(rb, "| +0.3050 [") && strstr(rb, "] | **yes** |"), "%.400s", rb);
    free(md);
    char *csv = read_in(dir, "configs.csv");
    ck_assert_msg(strstr(csv, "\nb,") && strstr(strstr(csv, "\nb,"), ",0,true,"), "%s", csv);
    free(csv);
    al_report_analysis_free(A);
    free(before), free(after), free(dir);
}
END_TEST

/* Bad input is the analysis's error, before any writer runs. */
START_TEST(analysis_of_a_missing_summary_is_an_error)
{
    static char sentinel;
    char *dir = al_test_tmpdir();
    al_report_analysis *A = (al_report_analysis *)&sentinel;
    al_err e;
    ck_assert_int_eq(al_report_analyze(dir, &A, &e), -1);
    ck_assert_ptr_null(A);
    ck_assert_msg(strstr(e.msg, "summary.csv"), "%s", e.msg);
    char *names = listing(dir);
    ck_assert_str_eq(names, ".\n..\n");
    free(names), free(dir);
}
END_TEST

/* ------------------------------------------------------------ rounds */

/* The sweep's question between rounds, on trial results the rule
 * resolves at the first look (stop) and on ones it does not (go on), with
 * the verdict checked against the paired t test done by hand. */
START_TEST(another_round_is_due_until_the_rule_resolves_or_max_is_reached)
{
    static const struct {
        double diff[4];
        int n_seeds, min, max, due, resolved;
        const char *why;
    } cases[] = {
        {{0.30, 0.31}, 2, 2, 4, 0, 1, "differences that agree: resolved at 2 seeds"},
        {{0.10, 0.50}, 2, 2, 4, 1, 0, "noisy differences at 2 of at most 4 seeds"},
        {{0.10, 0.50, -0.2}, 3, 2, 4, 1, 0, "still noisy at 3 of 4"},
        {{0.10, 0.50, -0.2}, 3, 2, 3, 0, 0, "noisy, but the last round (3 of 3) is taken"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *dir = pairs_dir(cases[i].diff, cases[i].n_seeds, cases[i].min, cases[i].max);
        al_report_analysis *A = analyze(dir);
        al_seq_plan p = {cases[i].min, cases[i].max, 1, 0.05};
        ck_assert_msg(al_report_seeds_due(A) == cases[i].due, "%s", cases[i].why);
        ck_assert_int_eq(al_report_rounds_of(A).done, !cases[i].due);
        if (cases[i].n_seeds == cases[i].min)   /* one look: the t test by hand */
            ck_assert_int_eq(resolved_at_first_look(cases[i].diff, cases[i].n_seeds, &p),
                             !cases[i].due);
        ck_assert_msg(A->g[1].vs.resolved == cases[i].resolved, "%s", cases[i].why);
        al_report_analysis_free(A);
        free(dir);
    }
}
END_TEST

/* A seed still running (not ok, not diverged) leaves the look open: no
 * decision can be taken, so the rounds go on; once it has ended, the
 * same results decide. */
START_TEST(an_open_seed_keeps_the_rounds_going)
{
    char *dir = results_dir("a_seed1,a,1,4096,2.1,ok\nb_seed1,b,1,1024,2.4,ok\n"
                            "a_seed2,a,2,4096,2.2,ok\nb_seed2,b,2,1024,,running\n", 2, 4);
    al_report_analysis *A = analyze(dir);
    ck_assert_int_eq(al_report_seeds_due(A), 1);
    ck_assert_int_eq(al_report_rounds_of(A).looks, 0);
    al_report_analysis_free(A);
    free(dir);
    dir = results_dir("a_seed1,a,1,4096,2.1,ok\nb_seed1,b,1,1024,2.4,ok\n"
                      "a_seed2,a,2,4096,2.2,ok\nb_seed2,b,2,1024,2.51,ok\n", 2, 4);
    A = analyze(dir);
    ck_assert_int_eq(al_report_seeds_due(A), 0);
    ck_assert_int_eq(al_report_rounds_of(A).looks, 1);
    al_report_analysis_free(A);
    free(dir);
}
END_TEST

/* Without sweep.json the analysis knows no plan of rounds. */
START_TEST(no_plan_no_rounds)
{
    double diff[] = {0.30, 0.31};
    char *dir = pairs_dir(diff, 2, 0, 0);
    al_report_analysis *A = analyze(dir);
    al_report_rounds r = al_report_rounds_of(A);
    ck_assert_int_eq(r.on, 0);
    ck_assert_int_eq(r.done, 0);
    ck_assert_int_eq(A->g[1].vs.resolved, 1);   /* Holm over the one comparison */
    al_report_analysis_free(A);
    free(dir);
}
END_TEST

/* ------------------------------------------------------------ a later stage's baseline */

/* A group by name (-1: none). */
static int group_named(const al_report_analysis *A, const char *name)
{
    for (int k = 0; k < A->n_groups; k++)
        if (strcmp(A->g[k].first->group, name) == 0) return k;
    return -1;
}

/* Two base models (mha the first stage's baseline, mqa), each continued by
 * a stage `long` with scaling none (that stage's own baseline) and yarn,
 * and by a stage `tune` with no baseline of its own. Each long_*_yarn is
 * compared with the long_*_none from the same base model, paired by seed,
 * never with another model's; tune falls back on base_mha; the report
 * names each row's baseline, and its passkey table pairs the same way. */
START_TEST(a_later_stages_baseline_is_compared_within_each_upstream_model)
{
    static const char *const up[] = {"mha", "mqa"};
    char rows[8192] = "", path[4400];
    double want_yarn[2] = {0, 0}, want_pk[2] = {0, 0}, want_tune = 0;
    char *dir = al_test_tmpdir();
    for (int s = 1; s <= 3; s++)
        for (int u = 0; u < 2; u++) {
            /* losses whose differences differ by model, and by seed */
            double b = 2.0 + 0.1 * s + 0.3 * u, none = b - 0.4 - 0.01 * s * s,
                   yarn = none - 0.05 * (u + 1) + 0.013 * s, tune = b - 0.2 + 0.02 * s * u;
            double pk_none = 0.2 * u + 0.05 * s, pk_yarn = 0.5 + 0.1 * s * (u + 1) / 3.0;
            want_yarn[u] += (yarn - none) / 3, want_pk[u] += (pk_yarn - pk_none) / 3;
            if (u == 1) want_tune += (tune - (2.0 + 0.1 * s)) / 3;
            size_t n = strlen(rows);
            snprintf(rows + n, sizeof rows - n,
                     "base_%s_seed%d,base_%s,base_%s,%s,%d,4096,%.6f,ok,base,\n"
                     "long_base_%s_none_seed%d,long_base_%s_none,long_base_%s_none,true,%d,"
                     "4096,%.6f,ok,long,base_%s_seed%d\n"
                     "long_base_%s_yarn_seed%d,long_base_%s_yarn,long_base_%s_yarn,false,%d,"
                     "4096,%.6f,ok,long,base_%s_seed%d\n"
                     "tune_base_%s_seed%d,tune_base_%s,tune_base_%s,false,%d,4096,%.6f,ok,tune,"
                     "base_%s_seed%d\n",
                     up[u], s, up[u], up[u], u ? "false" : "true", s, b,
                     up[u], s, up[u], up[u], s, none, up[u], s,
                     up[u], s, up[u], up[u], s, yarn, up[u], s,
                     up[u], s, up[u], up[u], s, tune, up[u], s);
            const char *kind[] = {"none", "yarn"};
            for (int k = 0; k < 2; k++) {
                char cmd[4500], csv[256];
                snprintf(path, sizeof path, "%s/long_base_%s_%s_seed%d", dir, up[u], kind[k], s);
                snprintf(cmd, sizeof cmd, "mkdir -p '%s/eval'", path);
                ck_assert_int_eq(system(cmd), 0);
                snprintf(csv, sizeof csv, "length,depth,exact,digit_accuracy,loss\n"
                         "512,0,%.6f,0.5,1.0\n", k ? pk_yarn : pk_none);
                free(al_test_write(path, "eval/passkey.csv", csv));
            }
        }
    char text[9000];
    snprintf(text, sizeof text, "trial,config,group,baseline,seed,kv_bytes_per_token,val_loss,"
             "status,stage,upstream\n%s", rows);
    free(al_test_write(dir, "summary.csv", text));
    al_report_analysis *A = analyze(dir);
    int base = group_named(A, "base_mha");
    ck_assert_int_ge(base, 0);
    ck_assert(A->g[base].is_base);
    for (int u = 0; u < 2; u++) {
        char name[64];
        snprintf(name, sizeof name, "long_base_%s_none", up[u]);
        int none = group_named(A, name);
        snprintf(name, sizeof name, "long_base_%s_yarn", up[u]);
        int yarn = group_named(A, name);
        ck_assert(none >= 0 && yarn >= 0 && A->g[none].is_base && !A->g[yarn].is_base);
        ck_assert_int_eq(A->g[yarn].base, none);
        ck_assert_int_eq(A->g[yarn].vs.delta.n, 3);
        ck_assert_msg(fabs(A->g[yarn].vs.delta.mean - want_yarn[u]) < 1e-5, "%s: %g, want %g",
                      name, A->g[yarn].vs.delta.mean, want_yarn[u]);
    }
    int mqa = group_named(A, "base_mqa"), tune = group_named(A, "tune_base_mqa");
    ck_assert_int_eq(A->g[mqa].base, base);
    ck_assert_int_eq(A->g[tune].base, base);
    ck_assert(fabs(A->g[tune].vs.delta.mean - want_tune) < 1e-5);
    al_report_analysis_free(A);

    char *out;
    ck_assert_int_eq(al_test_attnlabf(&out, "report %s", dir), 0);
    free(out);
    char *md = read_in(dir, "report.md");
    ck_assert_msg(strstr(md, "## Paired differences against each configuration's baseline"),
                  "%s", md);
    ck_assert_msg(strstr(md, "\n| long_base_mqa_yarn (vs long_base_mqa_none) | "), "%s", md);
    ck_assert_msg(strstr(md, "\n| tune_base_mqa (vs base_mha) | "), "%s", md);
    /* 8 configurations, 3 of them baselines: Holm over the other 5 */
    ck_assert_msg(strstr(md, "family of the 5 comparisons with the baselines"), "%s", md);
    const char *pk = strstr(md, "Exact-match accuracy minus its baseline's");
    ck_assert_msg(pk != NULL, "%s", md);
    for (int u = 0; u < 2; u++) {
        char want[160];
        snprintf(want, sizeof want, "\n| long_base_%s_yarn (vs long_base_%s_none) | %+.3f [", up[u],
                 up[u], want_pk[u]);
        ck_assert_msg(strstr(pk, want), "want %s in\n%s", want, pk);
    }
    free(md);
    /* the page's tooltips name it too */
    char *html = read_in(dir, "index.html");
    const char *o = strstr(html, "\"name\":\"long_base_mqa_yarn\"");
    ck_assert_msg(o && strstr(o, "\"vs\":\"long_base_mqa_none\"") &&
                      strstr(o, "\"vs\":\"long_base_mqa_none\"") < strchr(o, '}'),
                  "%s", o ? o : html);
    free(html), free(dir);
}
END_TEST

/* ------------------------------------------------------------ equal differences */

/* Two seeds whose differences are equal (sd 0): mqa's loss is 0.25 above
 * mha's at both, its passkey share 0.25 below. A t test would call both
 * resolved (p = 0); the report must not: the sign test gives 0.5. Values
 * exact in binary, so the sd is exactly 0. */
START_TEST(two_equal_differences_are_not_resolved)
{
    char rows[1024] = "", text[1400], path[4400], *out;
    char *dir = al_test_tmpdir();
    const char *name[] = {"mha", "mqa"};
    for (int s = 1; s <= 2; s++)
        for (int v = 0; v < 2; v++) {
            size_t n = strlen(rows);
            snprintf(rows + n, sizeof rows - n, "%s_seed%d,%s,%s,%s,%d,4096,%.2f,ok\n", name[v],
                     s, name[v], name[v], v ? "false" : "true", s, 1.5 + 0.5 * s + 0.25 * v);
            char csv[128], cmd[4500];
            snprintf(path, sizeof path, "%s/%s_seed%d", dir, name[v], s);
            snprintf(cmd, sizeof cmd, "mkdir -p '%s/eval'", path);
            ck_assert_int_eq(system(cmd), 0);
            snprintf(csv, sizeof csv, "length,depth,exact,digit_accuracy,loss\n512,0,%.2f,0.5,1\n",
                     0.5 - 0.25 * v);
            free(al_test_write(path, "eval/passkey.csv", csv));
        }
    snprintf(text, sizeof text, "trial,config,group,baseline,seed,kv_bytes_per_token,val_loss,"
             "status\n%s", rows);
    free(al_test_write(dir, "summary.csv", text));
    ck_assert_int_eq(al_test_attnlabf(&out, "report %s", dir), 0);
    free(out);
    al_csv t;
    al_err e;
    snprintf(path, sizeof path, "%s/configs.csv", dir);
    ck_assert_msg(al_csv_read(path, &t, &e) == 0, "%s", e.msg);
    int found = 0;
    for (int r = 0; r < t.n_rows; r++) {
        if (strcmp(al_csv_cell(&t, r, "config"), "mqa") != 0) continue;
        found = 1;
        ck_assert_str_eq(al_csv_cell(&t, r, "delta_vs_baseline"), "0.25");
        ck_assert_str_eq(al_csv_cell(&t, r, "resolved"), "false");
        ck_assert_str_eq(al_csv_cell(&t, r, "resolved_holm"), "false");
        ck_assert_str_eq(al_csv_cell(&t, r, "p_value"), "0.5");
        ck_assert_str_eq(al_csv_cell(&t, r, "seeds_needed"), "6");
    }
    al_csv_free(&t);
    ck_assert(found);
    char *md = read_in(dir, "report.md");
    const char *pk = strstr(md, "Exact-match accuracy minus mha's");
    ck_assert_msg(pk && strstr(pk, "\n| mqa | -0.250 (each of 2 seeds; sign test) |"), "%s", md);
    ck_assert_msg(!strstr(pk, "sign test) **resolved**"), "%s", pk);
    free(md), free(dir);
}
END_TEST

/* ------------------------------------------------------------ loss by position, paired */

/* mha (the baseline) and yarn over 3 seeds, scored by position at 256 and
 * 1,024 in two buckets of unequal tokens (the last holds a quarter): the
 * report pairs each seed's whole-window loss (token-weighted) and its last
 * bucket's with the baseline's, and the means agree with sums by hand. */
START_TEST(loss_by_position_is_paired_with_the_baseline)
{
    static const char *const name[] = {"mha", "yarn"};
    static const int ctx[] = {256, 1024};
    char rows[1024] = "", text[1400], path[4400], *out;
    double want_whole[2] = {0, 0}, want_last[2] = {0, 0};
    char *dir = al_test_tmpdir();
    for (int s = 1; s <= 3; s++)
        for (int v = 0; v < 2; v++) {
            size_t n = strlen(rows);
            snprintf(rows + n, sizeof rows - n, "%s_seed%d,%s,%s,%s,%d,4096,%.3f,ok\n", name[v], s,
                     name[v], name[v], v ? "false" : "true", s, 2.0 + 0.01 * s);
            for (int c = 0; c < 2; c++) {
                /* yarn's far bucket falls with context, by seed */
                double near = 1.5 + 0.02 * s + 0.001 * v * s,
                       far = 1.8 + 0.3 * c + 0.05 * s - v * (0.1 + 0.2 * c + 0.013 * s * s);
                int t0 = 3 * ctx[c] / 4, t1 = ctx[c] / 4;
                char csv[256], cmd[4500];
                snprintf(path, sizeof path, "%s/%s_seed%d/eval/by_position_%d", dir, name[v], s,
                         ctx[c]);
                snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
                ck_assert_int_eq(system(cmd), 0);
                snprintf(csv, sizeof csv, "bucket_start,bucket_end,loss,tokens\n0,%d,%.6f,%d\n"
                         "%d,%d,%.6f,%d\n", t0, near, t0, t0, ctx[c], far, t1);
                free(al_test_write(path, "by_position.csv", csv));
                double whole = (near * t0 + far * t1) / (t0 + t1), sign = v ? 1 : -1;
                want_whole[c] += sign * whole / 3, want_last[c] += sign * far / 3;
            }
        }
    snprintf(text, sizeof text, "trial,config,group,baseline,seed,kv_bytes_per_token,val_loss,"
             "status\n%s", rows);
    free(al_test_write(dir, "summary.csv", text));
    ck_assert_int_eq(al_test_attnlabf(&out, "report %s", dir), 0);
    free(out);
    char *md = read_in(dir, "report.md"), want[160];
    const char *w = strstr(md, "Loss over the whole window (nats/token) at each context minus mha's");
    const char *l = strstr(md, "Loss in the window's last bucket of positions");
    ck_assert_msg(w && l && w < l, "%s", md);
    ck_assert_msg(strstr(l, "| configuration | 256: 192-255 | 1024: 768-1023 |"), "%s", l);
    snprintf(want, sizeof want, "\n| yarn | %+.4f [", want_whole[0]);
    ck_assert_msg(strstr(w, want) && strstr(w, want) < l, "want %s in %s", want, w);
    snprintf(want, sizeof want, " | %+.4f [", want_whole[1]);
    ck_assert_msg(strstr(w, want) && strstr(w, want) < l, "want %s in %s", want, w);
    snprintf(want, sizeof want, "\n| yarn | %+.4f [", want_last[0]);
    ck_assert_msg(strstr(l, want), "want %s in %s", want, l);
    snprintf(want, sizeof want, " | %+.4f [", want_last[1]);
    ck_assert_msg(strstr(l, want), "want %s in %s", want, l);
    free(md), free(dir);
}
END_TEST

/* ------------------------------------------------------------ files it no longer writes */

static int exists_in(const char *dir, const char *name)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* A report removes the files its last run wrote and this one does not (a
 * stage taken out of the sweep: its stages.* plot), and nothing else: not
 * a file it never wrote, not summary.csv even when a list names it. */
START_TEST(a_report_removes_the_files_it_no_longer_writes)
{
    char rows[4096] = "", text[4600], *out;
    char *dir = al_test_tmpdir();
    for (int s = 1; s <= 2; s++) {
        size_t n = strlen(rows);
        snprintf(rows + n, sizeof rows - n,
                 "base_mha_seed%d,base_mha,base_mha,true,%d,4096,%.3f,ok,base,\n"
                 "long_mha_seed%d,long_mha,long_mha,false,%d,4096,%.3f,ok,long,base_mha_seed%d\n",
                 s, s, 2.0 + 0.1 * s, s, s, 1.8 + 0.05 * s, s);
    }
    snprintf(text, sizeof text, "trial,config,group,baseline,seed,kv_bytes_per_token,val_loss,"
             "status,stage,upstream\n%s", rows);
    free(al_test_write(dir, "summary.csv", text));
    ck_assert_int_eq(al_test_attnlabf(&out, "report %s", dir), 0);
    free(out);
    ck_assert(exists_in(dir, "stages.gp") && exists_in(dir, "stages.dat"));
    char *list = read_in(dir, ".report_files");
    ck_assert_msg(strstr(list, "stages.gp\n") && strstr(list, "report.md\n") &&
                      !strstr(list, "summary.csv"), "%s", list);
    free(list);

    /* the stage taken out; a note of the user's; a list that names summary.csv */
    snprintf(text, sizeof text, "trial,config,group,baseline,seed,kv_bytes_per_token,val_loss,"
             "status\nbase_mha_seed1,base_mha,base_mha,true,1,4096,2.1,ok\n"
             "base_mqa_seed1,base_mqa,base_mqa,false,1,1024,2.3,ok\n");
    free(al_test_write(dir, "summary.csv", text));
    free(al_test_write(dir, "notes.dat", "mine\n"));
    list = read_in(dir, ".report_files");
    char more[8192];
    snprintf(more, sizeof more, "%ssummary.csv\n../escape.dat\n", list);
    free(list);
    free(al_test_write(dir, ".report_files", more));
    ck_assert_int_eq(al_test_attnlabf(&out, "report %s", dir), 0);
    free(out);
    ck_assert(!exists_in(dir, "stages.gp") && !exists_in(dir, "stages.dat"));
    ck_assert(!exists_in(dir, "stages.png") && !exists_in(dir, "stages.svg"));
    ck_assert(exists_in(dir, "report.md") && exists_in(dir, "configs.csv"));
    ck_assert(exists_in(dir, "summary.csv") && exists_in(dir, "notes.dat"));
    list = read_in(dir, ".report_files");
    ck_assert_msg(!strstr(list, "stages.") && !strstr(list, "summary.csv") &&
                      !strstr(list, "escape"), "%s", list);
    free(list), free(dir);
}
END_TEST

Suite *report_analysis_suite(void)
{
    Suite *s = suite_create("report_analysis");
    TCase *tc = tcase_create("analysis");
    tcase_add_test(tc, analysis_writes_no_file_and_holds_what_the_report_shows);
    tcase_add_test(tc, analysis_of_a_missing_summary_is_an_error);
    tcase_add_test(tc, another_round_is_due_until_the_rule_resolves_or_max_is_reached);
    tcase_add_test(tc, an_open_seed_keeps_the_rounds_going);
    tcase_add_test(tc, no_plan_no_rounds);
    tcase_add_test(tc, a_later_stages_baseline_is_compared_within_each_upstream_model);
    tcase_add_test(tc, a_report_removes_the_files_it_no_longer_writes);
    tcase_add_test(tc, two_equal_differences_are_not_resolved);
    tcase_add_test(tc, loss_by_position_is_paired_with_the_baseline);
    suite_add_tcase(s, tc);
    return s;
}
