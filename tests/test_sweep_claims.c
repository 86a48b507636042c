/*
 * test_sweep_claims.c - sweep.claims (sweep_claims.c) and the report's
 * "Claims under test" section (report_claims.c): the file's claims checked
 * against the configurations the sweep expands to, refusals as one line at
 * file:line:col, verdicts against hand-worked intervals, and the section's
 * differences against a paired difference computed here.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_report.h"
#include "al_sweep_spec.h"
#include "al_test.h"
#include "../src/report/report_claims.h"

/* An experiment with configurations mha, gqa-kv1 and mqa, 2 seeds. */
static char *write_exp(const char *dir, const char *claims)
{
    char text[8192], corpus[4097];
    for (int i = 0; i < 4096; i++) corpus[i] = "abcdefgh \n"[(i * 7 + i / 13) % 10];
    corpus[4096] = 0;
    char *data = al_test_write(dir, "data.txt", corpus);
    snprintf(text, sizeof text,
             "name: claims\n"
             "data: {source: text, path: %s}\n"
             "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16}\n"
             "train: {steps: 2, batch_size: 2, threads: 1}\n"
             "sweep:\n"
             "  seeds: 2\n"
             "  grid:\n"
             "    model.attention: [{variant: mha}, {variant: gqa, n_kv_head: 1}, {variant: mqa}]\n"
             "%s", data, claims);
    free(data);
    return al_test_write(dir, "exp.yaml", text);
}

START_TEST(claims_expand_versus_lists_and_keep_their_words)
{
    char *dir = al_test_tmpdir();
    char *path = write_exp(dir, "  claims:\n"
                                "    - {claim: \"MQA: nearly MHA's quality\", config: mqa,\n"
                                "       versus: [mha, gqa-kv1], expect: no_worse, margin: 0.02}\n"
                                "    - {claim: plain, config: gqa-kv1, versus: mha}\n");
    al_sweep s;
    al_err e;
    ck_assert_msg(al_sweep_load(path, NULL, 0, NULL, 0, &s, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(s.n_claims, 3);
    ck_assert_str_eq(s.claims[0].text, "MQA: nearly MHA's quality");
    ck_assert_str_eq(s.claims[0].config, "mqa");
    ck_assert_str_eq(s.claims[0].versus, "mha");
    ck_assert_str_eq(s.claims[1].versus, "gqa-kv1");
    ck_assert_int_eq(s.claims[1].expect, AL_CLAIM_NO_WORSE);
    ck_assert_double_eq(s.claims[1].margin, 0.02);
    ck_assert_int_eq(s.claims[2].expect, AL_CLAIM_ANY);
    /* claims are no part of a trial: the same file without them gives the same hashes */
    char *bare = write_exp(dir, "");
    al_sweep t;
    ck_assert_msg(al_sweep_load(bare, NULL, 0, NULL, 0, &t, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(s.n_trials, t.n_trials);
    for (int i = 0; i < s.n_trials; i++) ck_assert_str_eq(s.trials[i].hash, t.trials[i].hash);
    al_sweep_free(&s), al_sweep_free(&t);
    free(bare), free(path), free(dir);
}
END_TEST

typedef struct {
    const char *claims, *want;
} bad_case;

static const bad_case bad[] = {
    {"  claims:\n    - {claim: x, config: gqa-kv2, versus: mha}\n",
     "10:26: error: 'sweep.claims[0].config': no configuration 'gqa-kv2' in this sweep (its "
     "configurations: mha, gqa-kv1, mqa)"},
    {"  claims:\n    - {claim: x, config: mqa, versus: [mha, mqa]}\n",
     "10:45: error: 'sweep.claims[0]' compares 'mqa' with itself"},
    {"  claims:\n    - {claim: x, config: mqa, versus: mha, expect: no_worse}\n",
     "10:52: error: 'sweep.claims[0]': expect no_worse needs a 'margin' (how much worse still "
     "counts as the same quality, in the metric)"},
    {"  claims:\n    - {claim: x, config: mqa, versus: mha, expect: better, margin: 0.1}\n",
     "10:68: error: 'sweep.claims[0].margin' goes with expect: no_worse"},
    {"  claims:\n    - {claim: x, config: mqa, versus: mha, expect: same}\n",
     "10:52: error: 'sweep.claims[0].expect' must be better, no_worse or worse"},
    {"  claims:\n    - {claim: x, config: mqa, versus: mha, expect: no_worse, margin: -1}\n",
     "10:70: error: 'sweep.claims[0].margin' must be a positive number (at most 1e6), got '-1'"},
    {"  claims:\n    - {claim: x, config: mqa, vs: mha}\n",
     "10:31: error: unknown key 'vs' in 'sweep.claims[0]' (known: claim, config, versus, "
     "expect, margin)"},
    {"  claims:\n    - {claim: x, config: mqa}\n",
     "10:7: error: 'sweep.claims[0]' needs 'versus' (claim, config and versus are required)"},
    {"  claims: {claim: x}\n", "9:11: error: 'sweep.claims' must be a list of claims"},
    {"  claims:\n    - mqa\n",
     "10:7: error: 'sweep.claims[0]' must be a mapping (claim, config, versus, expect, margin)"},
    {"  claim:\n    - {claim: x, config: mqa, versus: mha}\n",
     "9:3: error: unknown key 'claim' in 'sweep' (did you mean 'claims'?)"},
};

START_TEST(bad_claims_are_one_line_at_file_line_column)
{
    const bad_case *b = &bad[_i];
    char *dir = al_test_tmpdir(), *path = write_exp(dir, b->claims), want[1024];
    al_sweep s;
    al_err e;
    snprintf(want, sizeof want, "%s:%s", path, b->want);
    ck_assert_int_eq(al_sweep_load(path, NULL, 0, NULL, 0, &s, &e), -1);
    ck_assert_str_eq(e.msg, want);
    free(path), free(dir);
}
END_TEST

/* Verdicts by hand. A difference of mean m and half-width h has the
 * interval [m - h, m + h] on the "worse" axis of a loss; an accuracy
 * flips the sign (a positive difference is better). */
static const char *verdict(int expect, double margin, int n, double m, double h, int maximize)
{
    static char why[128];
    al_sweep_claim c = {.expect = expect, .margin = margin};
    al_stat d = {.n = n, .mean = m, .sd = NAN, .ci95 = h};
    return al_report_claim_verdict(&c, &d, maximize, why, sizeof why);
}

START_TEST(verdicts_read_the_interval_as_worked_by_hand)
{
    /* better: [-0.05, -0.01] lies below 0; [0.01, 0.05] above; [-0.01, 0.03] straddles */
    ck_assert_str_eq(verdict(AL_CLAIM_BETTER, 0, 4, -0.03, 0.02, 0), "supported");
    ck_assert_str_eq(verdict(AL_CLAIM_BETTER, 0, 4, 0.03, 0.02, 0), "contradicted");
    ck_assert_str_eq(verdict(AL_CLAIM_BETTER, 0, 4, 0.01, 0.02, 0), "cannot tell");
    ck_assert_str_eq(verdict(AL_CLAIM_WORSE, 0, 4, 0.03, 0.02, 0), "supported");
    ck_assert_str_eq(verdict(AL_CLAIM_WORSE, 0, 4, -0.03, 0.02, 0), "contradicted");
    /* an accuracy higher by [0.01, 0.05] is better */
    ck_assert_str_eq(verdict(AL_CLAIM_BETTER, 0, 4, 0.03, 0.02, 1), "supported");
    /* no_worse, margin 0.01: [0.002, 0.008] is inside; [0.004, 0.016] straddles 0.01;
     * [0.012, 0.02] lies beyond it; a resolved improvement is also no worse */
    ck_assert_str_eq(verdict(AL_CLAIM_NO_WORSE, 0.01, 4, 0.005, 0.003, 0), "supported");
    ck_assert_str_eq(verdict(AL_CLAIM_NO_WORSE, 0.01, 4, 0.010, 0.006, 0), "cannot tell");
    char why[128];
    al_sweep_claim nw = {.expect = AL_CLAIM_NO_WORSE, .margin = 0.01};
    al_stat straddle = {.n = 4, .mean = 0.010, .sd = NAN, .ci95 = 0.006},
            near0 = {.n = 4, .mean = 0.005, .sd = NAN, .ci95 = 0.008};
    al_report_claim_verdict(&nw, &straddle, 0, why, sizeof why);   /* [0.004, 0.016] */
    ck_assert_str_eq(why, "resolved worse, but the interval straddles the margin 0.01");
    al_report_claim_verdict(&nw, &near0, 0, why, sizeof why);      /* [-0.003, 0.013] */
    ck_assert_str_eq(why, "the interval straddles the margin 0.01");
    ck_assert_str_eq(verdict(AL_CLAIM_NO_WORSE, 0.01, 4, 0.016, 0.004, 0), "contradicted");
    ck_assert_str_eq(verdict(AL_CLAIM_NO_WORSE, 0.01, 4, -0.05, 0.01, 0), "supported");
    ck_assert_str_eq(verdict(AL_CLAIM_ANY, 0, 4, 0.03, 0.02, 0), "resolved");
    ck_assert_str_eq(verdict(AL_CLAIM_ANY, 0, 4, 0.01, 0.02, 0), "not resolved");
    /* one pair has no interval: never a verdict */
    ck_assert_str_eq(verdict(AL_CLAIM_BETTER, 0, 1, -0.5, NAN, 0), "cannot tell");
    /* two pairs that both moved by -0.03 (sd 0): a zero-width interval, but
     * the sign test's p is 0.5, so no verdict; six such pairs give 1/32 */
    al_sweep_claim better = {.expect = AL_CLAIM_BETTER};
    al_stat same2 = {.n = 2, .mean = -0.03, .sd = 0, .ci95 = 0};
    ck_assert_str_eq(al_report_claim_verdict(&better, &same2, 0, why, sizeof why), "cannot tell");
    ck_assert_str_eq(why, "all 2 pairs differ by the same amount, no spread to size; "
                          "the sign test needs 6");
    al_stat same6 = {.n = 6, .mean = -0.03, .sd = 0, .ci95 = 0};
    ck_assert_str_eq(al_report_claim_verdict(&better, &same6, 0, why, sizeof why), "supported");
}
END_TEST

/* The section from a summary and a sweep.json written here: b - a over
 * seeds 1..3 is {-0.03, -0.02, -0.05}, mean -0.03333, sd 0.0152753, half-
 * width t(0.975, 2) sd / sqrt(3) = 0.037946: straddles 0, so "better" is
 * "cannot tell"; c - a = {0.20, 0.21, 0.19}: [0.1752, 0.2248], so c is
 * resolved worse and "better" is contradicted. e - a = {0.015, 0.03,
 * 0.0225}: mean 0.0225, sd 0.0075, resolved worse at 95 % on its own
 * ([+0.0039, +0.0411]) but not within the simultaneous intervals of the 4
 * claims, t(1 - 0.025 / 4, 2) = 8.860200034654257 (scipy.stats.t.ppf):
 * [-0.0159, +0.0609], so "E beats A" is "cannot tell", not "contradicted". */
START_TEST(report_section_pairs_by_seed_and_gives_verdicts)
{
    static const char head[] =
        "trial,config,group,baseline,variant,seed,params,kv_bytes_per_token,steps,"
        "tokens_per_step,final_train_loss,val_loss,best_val_loss,test_loss,tokens_per_s,"
        "wall_s,status,reason\n";
    double a[] = {2.00, 2.10, 2.05}, b[] = {1.97, 2.08, 2.00}, c[] = {2.20, 2.31, 2.24};
    double e4[] = {2.015, 2.13, 2.0725};
    char text[4096], *dir = al_test_tmpdir();
    snprintf(text, sizeof text, "%s", head);
    const char *names[] = {"a", "b", "c", "e"};
    const double *loss[] = {a, b, c, e4};
    int kv[] = {1000, 250, 500, 125};
    for (int s = 0; s < 3; s++)
        for (int k = 0; k < 4; k++) {
            size_t len = strlen(text);
            snprintf(text + len, sizeof text - len, "%s_seed%d,%s,%s,%d,mha,%d,100,%d,10,64,2,2,2,"
                     "%.17g,1000,1,ok,\n", names[k], s + 1, names[k], names[k], k == 0, s + 1,
                     kv[k], loss[k][s]);
        }
    free(al_test_write(dir, "summary.csv", text));
    free(al_test_write(dir, "sweep.json",
                       "{\"experiment\": \"x\", \"file\": \"x.yaml\", \"description\": \"\","
                       " \"sets\": [], \"claims\": ["
                       "{\"claim\": \"B beats A\", \"config\": \"b\", \"versus\": \"a\","
                       " \"expect\": \"better\"},"
                       "{\"claim\": \"C beats A\", \"config\": \"c\", \"versus\": \"a\","
                       " \"expect\": \"better\"},"
                       "{\"claim\": \"C as good as B\", \"config\": \"c\", \"versus\": \"b\","
                       " \"expect\": \"no_worse\", \"margin\": 0.5},"
                       "{\"claim\": \"E beats A\", \"config\": \"e\", \"versus\": \"a\","
                       " \"expect\": \"better\"}]}"));
    setenv("AL_GNUPLOT", "/nonexistent/gnuplot", 1);
    al_report_stats st;
    al_err e;
    ck_assert_msg(al_report_write(dir, &st, &e) == 0, "%s", e.msg);
    unsetenv("AL_GNUPLOT");
    char path[4200], *md = NULL, want[512];
    size_t n;
    snprintf(path, sizeof path, "%s/report.md", dir);
    ck_assert_msg(al_read_file(path, &md, &n, &e) == 0, "%s", e.msg);
    double sd = sqrt((pow(-0.03 + 0.1 / 3, 2) + pow(-0.02 + 0.1 / 3, 2) + pow(-0.05 + 0.1 / 3, 2)) /
                     2), h = 4.302652729911275 * sd / sqrt(3);
    double hs = 8.860200034654257 * sd / sqrt(3);   /* simultaneous over the 4 */
    snprintf(want, sizeof want, "| B beats A | b | a | better | 250 vs 1000 B/token (0.25x) | "
             "%+.4f [%+.4f, %+.4f] | [%+.4f, %+.4f] | 3 | **cannot tell**: not resolved |",
             -0.1 / 3, -0.1 / 3 - h, -0.1 / 3 + h, -0.1 / 3 - hs, -0.1 / 3 + hs);
    ck_assert_msg(strstr(md, want), "%s\nwant %s", md, want);
    ck_assert_msg(strstr(md, "| C beats A | c | a | better | 500 vs 1000 B/token (0.50x) | "
                             "+0.2000 ["), "%s", md);
    ck_assert_msg(strstr(md, "| 3 | **contradicted**: resolved worse |"), "%s", md);
    /* c - b = {0.23, 0.23, 0.24}: far below the margin 0.5 */
    ck_assert_msg(strstr(md, "| C as good as B | c | b | no_worse (margin 0.5) |"), "%s", md);
    ck_assert_msg(strstr(md, "**supported**: worse by less than 0.5"), "%s", md);
    snprintf(want, sizeof want, "| E beats A | e | a | better | 125 vs 1000 B/token (0.12x) | "
             "+0.0225 [%+.4f, %+.4f] | [%+.4f, %+.4f] | 3 | **cannot tell**: not resolved |",
             0.0225 - 4.302652729911275 * 0.0075 / sqrt(3),
             0.0225 + 4.302652729911275 * 0.0075 / sqrt(3),
             0.0225 - 8.860200034654257 * 0.0075 / sqrt(3),
             0.0225 + 8.860200034654257 * 0.0075 / sqrt(3));
    ck_assert_msg(strstr(md, want), "%s\nwant %s", md, want);
    /* in the header: before the configurations table */
    ck_assert(strstr(md, "## Claims under test") < strstr(md, "## Configurations"));
    free(md), free(dir);
}
END_TEST

/* A bounded layer's per-token bytes equal a global one's; its saving shows
 * in the whole cache at report.context, which the row then compares. */
START_TEST(claims_compare_whole_caches_at_the_report_context)
{
    static const char head[] =
        "trial,config,group,baseline,variant,seed,params,kv_bytes_per_token,kv_context,"
        "kv_bytes_at_context,steps,tokens_per_step,final_train_loss,val_loss,best_val_loss,"
        "test_loss,tokens_per_s,wall_s,status,reason\n";
    char text[2048], *dir = al_test_tmpdir();
    snprintf(text, sizeof text, "%s"
             "g_seed1,g,g,1,mha,1,100,100,1024,102400,10,64,2,2,2,2.00,1000,1,ok,\n"
             "l_seed1,l,l,0,local,1,100,100,1024,6800,10,64,2,2,2,2.01,1000,1,ok,\n"
             "g_seed2,g,g,1,mha,2,100,100,1024,102400,10,64,2,2,2,2.10,1000,1,ok,\n"
             "l_seed2,l,l,0,local,2,100,100,1024,6800,10,64,2,2,2,2.12,1000,1,ok,\n", head);
    free(al_test_write(dir, "summary.csv", text));
    free(al_test_write(dir, "sweep.json",
                       "{\"experiment\": \"x\", \"claims\": [{\"claim\": \"L as good\", "
                       "\"config\": \"l\", \"versus\": \"g\", \"expect\": \"no_worse\", "
                       "\"margin\": 0.1}]}"));
    setenv("AL_GNUPLOT", "/nonexistent/gnuplot", 1);
    al_report_stats st;
    al_err e;
    ck_assert_msg(al_report_write(dir, &st, &e) == 0, "%s", e.msg);
    unsetenv("AL_GNUPLOT");
    char path[4200], *md = NULL;
    size_t n;
    snprintf(path, sizeof path, "%s/report.md", dir);
    ck_assert_msg(al_read_file(path, &md, &n, &e) == 0, "%s", e.msg);
    ck_assert_msg(strstr(md, "| L as good | l | g | no_worse (margin 0.1) | 6800 vs 102400 B at "
                             "1024 tokens (0.07x) |"), "%s", md);
    free(md), free(dir);
}
END_TEST

Suite *sweep_claims_suite(void)
{
    Suite *s = suite_create("sweep_claims");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, claims_expand_versus_lists_and_keep_their_words);
    tcase_add_loop_test(tc, bad_claims_are_one_line_at_file_line_column, 0,
                        (int)(sizeof bad / sizeof bad[0]));
    tcase_add_test(tc, verdicts_read_the_interval_as_worked_by_hand);
    tcase_add_test(tc, report_section_pairs_by_seed_and_gives_verdicts);
    tcase_add_test(tc, claims_compare_whole_caches_at_the_report_context);
    suite_add_tcase(s, tc);
    return s;
}
