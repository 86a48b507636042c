/*
 * test_ablation.c - the causal-mask section of a report (src/report/report_ablation.c),
 * on two tiny models trained here on random letters, one with and one
 * without the mask: the masked model scores the same with the mask
 * applied, the unmasked one much worse (on random text only the future
 * helps); only the unmasked model attends to the next token; both are
 * drawn and sampled through the KV cache; a sweep without an unmasked
 * trial gets no section; `attnlab report`'s report.md carries the
 * section and the head summary.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "al_config_io.h"
#include "al_report_ablation.h"
#include "al_report.h"
#include "al_test.h"
#include "al_train.h"

static struct {
    char *dir;
    char error[AL_ERR_LEN + 128];
} F;

/* Trains DIR/<trial> on DIR/letters.txt. */
static int train(const char *trial, int causal)
{
    al_config c;
    al_err e;
    al_config_defaults(&c);
    snprintf(c.data.source, sizeof c.data.source, "text");
    snprintf(c.data.path, sizeof c.data.path, "%s/letters.txt", F.dir);
    c.model.n_layer = 1, c.model.d_model = 32, c.model.n_head = 2, c.model.d_head = 16;
    c.model.seq_len = 24;
    c.model.causal = causal;
    c.train = (al_train_config){.steps = 200, .batch_size = 8, .lr = 1e-2, .min_lr = 1e-3,
                                .warmup_steps = 5, .weight_decay = 0.1, .beta1 = 0.9,
                                .beta2 = 0.99, .grad_clip = 1.0, .eval_every = 200,
                                .eval_batches = 4, .seed = 1, .eval_seed = 2, .threads = 1};
    char out[4200];
    snprintf(out, sizeof out, "%s/%s", F.dir, trial);
    al_train_opts o = {.outdir = out};
    al_train_result r;
    if (al_train(&c, &o, &r, &e) != 0) {
        snprintf(F.error, sizeof F.error, "%s: %s", trial, e.msg);
        return -1;
    }
    return 0;
}

static void setup(void)
{
    F.dir = al_test_tmpdir();
    static char text[30001];
    al_rng r;
    al_rng_seed(&r, 9);
    for (int i = 0; i < 30000; i++) {
        int k = (int)al_rng_below(&r, 27);
        text[i] = k == 26 ? ' ' : (char)('a' + k);
    }
    free(al_test_write(F.dir, "letters.txt", text));
    if (train("causal-true_seed1", 1) == 0) train("causal-false_seed1", 0);
}

static void teardown(void) { free(F.dir); }

static const al_hs_trial trials[] = {
    {"causal-true_seed1", "causal-true", 1, 1, 256, 3.0, 3.0},
    {"causal-false_seed1", "causal-false", 1, 0, 256, 1.0, 1.0},
};

/* noinline: GCC 12 inlines it and imagines a dangling pointer. */
__attribute__((noinline)) static char *section(const al_hs_trial *t, int n)
{
    char *md;
    size_t len;
    al_err e;
    FILE *f = open_memstream(&md, &len);
    int rc = al_ablation_section(f, F.dir, t, n, &e);
    fclose(f);
    ck_assert_msg(rc == 0, "%s", e.msg);
    return md;
}

/* The numbers after `prefix` in md. */
static int numbers(const char *md, const char *prefix, const char *fmt, double *a, double *b)
{
    const char *p = strstr(md, prefix);
    ck_assert_msg(p != NULL, "no '%s' in:\n%s", prefix, md);
    return sscanf(p + strlen(prefix), fmt, a, b);
}

START_TEST(the_unmasked_model_is_scored_with_the_mask_drawn_and_sampled)
{
    ck_assert_msg(!F.error[0], "setup: %s", F.error);
    char *md = section(trials, 2);
    ck_assert_ptr_nonnull(strstr(md, "\n## The causal mask\n"));
    double a, b;
    ck_assert_int_eq(numbers(md, "| causal-true | true | 1 | ", "%lf | %lf", &a, &b), 2);
    ck_assert_double_eq(a, b);   /* the mask it was trained with changes nothing */
    ck_assert_int_eq(numbers(md, "| causal-false | **false** | 1 | ", "%lf | %lf", &a, &b), 2);
    ck_assert_msg(b > a + 1.0, "unmasked: %.4f as trained, %.4f with the mask", a, b);
    /* next-token scores, in the table's column order: masked first */
    const char *row = "| next-token score: mean over heads (largest head) | ";
    ck_assert_int_eq(numbers(md, row, "%lf (%lf", &a, &b), 2);
    ck_assert_double_eq(a, 0.0);
    ck_assert_double_eq(b, 0.0);
    const char *second = strstr(strstr(md, row) + strlen(row), "| ");
    ck_assert_int_eq(sscanf(second, "| %lf (%lf", &a, &b), 2);
    ck_assert_msg(b > 0.5, "the unmasked model's most next-token head: %.3f", b);
    ck_assert_ptr_nonnull(strstr(md, "decoded with the mask applied"));
    ck_assert_int_eq(numbers(md, "**causal-true** (causal true, val loss ",
                             "%lf as trained, %lf with the mask", &a, &b), 2);
    ck_assert_double_eq(a, b);
    ck_assert_int_eq(numbers(md, "**causal-false** (causal false, val loss ",
                             "%lf as trained, %lf with the mask", &a, &b), 2);
    ck_assert(b > a + 1.0);
    ck_assert_ptr_nonnull(strstr(md, " with the mask applied; trial `causal-false_seed1`):"));
    const char *fence = "):\n\n```text\nThe ";
    ck_assert_ptr_nonnull(strstr(strstr(md, "**causal-false**"), fence));
    char png[4400];
    snprintf(png, sizeof png, "%s/attention/causal-false/layer0.gp", F.dir);
    ck_assert_int_eq(access(png, F_OK), 0);
    snprintf(png, sizeof png, "%s/attention/causal-false/layer0.png", F.dir);
    if (access(png, F_OK) == 0)
        ck_assert_ptr_nonnull(strstr(md, "![causal-false layer 0](attention/causal-false/"
                                         "layer0.png)"));
    else
        ck_assert_ptr_nonnull(strstr(md, "no picture: gnuplot"));
    free(md);
}
END_TEST

START_TEST(without_an_unmasked_trial_there_is_no_section)
{
    ck_assert_msg(!F.error[0], "setup: %s", F.error);
    char *md = section(trials, 1);
    ck_assert_str_eq(md, "");
    free(md);
}
END_TEST

START_TEST(report_md_carries_the_head_summary_and_the_causal_section)
{
    ck_assert_msg(!F.error[0], "setup: %s", F.error);
    char path[4400];
    snprintf(path, sizeof path, "%s/summary.csv", F.dir);
    FILE *f = fopen(path, "w");
    fputs("trial,kv_bytes_per_token,val_loss,status,causal\n"
          "causal-true_seed1,256,3.0,ok,true\ncausal-false_seed1,256,1.0,ok,false\n", f);
    fclose(f);
    al_report_stats st;
    al_err e;
    ck_assert_msg(al_report_write(F.dir, &st, &e) == 0, "%s", e.msg);
    char *md = NULL;
    size_t n;
    snprintf(path, sizeof path, "%s/report.md", F.dir);
    ck_assert_int_eq(al_read_file(path, &md, &n, &e), 0);
    const char *h = strstr(md, "\n## What the heads learned\n"), *c = strstr(md, "\n## The causal mask\n");
    ck_assert_msg(h && c && h < c, "%s", md);
    ck_assert_ptr_nonnull(strstr(md, "| causal-false (no causal mask) | 256 | 1.0000 | 2 | "));
    free(md);
}
END_TEST

Suite *ablation_suite(void)
{
    Suite *s = suite_create("ablation");
    TCase *tc = tcase_create("ablation");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, the_unmasked_model_is_scored_with_the_mask_drawn_and_sampled);
    tcase_add_test(tc, without_an_unmasked_trial_there_is_no_section);
    tcase_add_test(tc, report_md_carries_the_head_summary_and_the_causal_section);
    suite_add_tcase(s, tc);
    return s;
}
