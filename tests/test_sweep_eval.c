/*
 * test_sweep_eval.c - a sweep's `eval` (issue 24 item 5): added to a
 * finished sweep it scores the kept trials' checkpoints without
 * retraining; each row equals `attnlab score` run by hand on the same
 * checkpoint and text; the report's new files read back the trials'
 * numbers; a second run computes nothing; bad `eval` keys are refused with
 * file:line:col.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "al_cost.h"
#include "al_csv.h"
#include "al_kvcache.h"
#include "al_sweep_spec.h"
#include "al_test.h"

/* ------------------------------------------------------------ helpers */

/* 6000 bytes of words from a small set: tiny models learn something. */
static char *write_text(const char *dir)
{
    static const char *const words[] = {"the ", "king ", "and ", "queen ", "of ", "a ",
                                        "land ", "sea ", "shall ", "be ", ".\n"};
    return al_test_write_words(dir, words, 11, 6000, 777);
}

/* The tiny base config (data, mha and mqa), then `tail` from line 6. */
static char *write_exp(const char *dir, const char *tail)
{
    char *data = write_text(dir), text[8192];
    snprintf(text, sizeof text,
             "name: ev\n"
             "data: {source: text, path: %s, test_fraction: 0.2}\n"
             "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16, attention: {variant: mha}}\n"
             "train: {batch_size: 4, eval_batches: 2, threads: 1, warmup_steps: 2, steps: 20}\n"
             "sweep: {grid: {model.attention: [{variant: mha}, {variant: mqa}]}}\n"
             "%s", data, tail);
    free(data);
    return al_test_write(dir, "exp.yaml", text);
}

/* A passkey sweep of mha and mqa (seq_len 112, 6 steps) with `eval` as
 * given, run into DIR/r (its path in r); returns the sweep's output. */
static char *run_passkey_sweep(const char *dir, const char *name, const char *eval, char *r,
                               size_t rn)
{
    char *data = write_text(dir), text[4096], *out;
    snprintf(text, sizeof text,
             "name: %s\n"
             "data: {source: passkey, path: %s, test_fraction: 0.2, test_examples: 4}\n"
             "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 112,\n"
             "        attention: {variant: mha}}\n"
             "train: {batch_size: 4, eval_batches: 1, threads: 1, warmup_steps: 2, steps: 6}\n"
             "sweep: {grid: {model.attention: [{variant: mha}, {variant: mqa}]}}\n"
             "eval: %s\n",
             name, data, eval);
    char *exp = al_test_write(dir, "pk.yaml", text);
    snprintf(r, rn, "%s/r", dir);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s --jobs 2", exp, r), 0);
    free(exp), free(data);
    return out;
}

/* The row of t whose columns a and b hold va and vb. */
static int find_row(const al_csv *t, const char *a, const char *va, const char *b,
                    const char *vb)
{
    for (int i = 0; i < t->n_rows; i++)
        if (!strcmp(al_csv_cell(t, i, a), va) && !strcmp(al_csv_cell(t, i, b), vb)) return i;
    return -1;
}

static double num(const al_csv *t, int r, const char *col)
{
    ck_assert_int_ge(r, 0);
    return strtod(al_csv_cell(t, r, col), NULL);
}

/* A number after "key": in attnlab score --json's line. */
static double json_num(const char *out, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(out, pat);
    ck_assert_msg(p != NULL, "%s in %s", key, out);
    return strtod(p + strlen(pat), NULL);
}

static long mtime_ns(const char *path)
{
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    return (long)st.st_mtim.tv_sec * 1000000000L + st.st_mtim.tv_nsec;
}

/* ------------------------------------------------------------ tests */

static const char eval_tail[] =
    "eval: {kv_dtypes: [f32, int8, int4], contexts: [16, 64], by_position: true, buckets: 4,\n"
    "       tokens: 1024}\n";

/* One trial's rows against `attnlab score` by hand; returns its f32 loss
 * at context 64. */
static void rows_equal_score_by_hand(const char *r, const char *trial)
{
    char path[4400], *out;
    al_csv t;
    snprintf(path, sizeof path, "%s/%s/eval.csv", r, trial);
    al_test_read_csv(path, &t);
    ck_assert_int_eq(t.n_rows, 6);
    static const char *const dtypes[] = {"f32", "int8", "int4"};
    for (int c = 0; c < 2; c++)
        for (int k = 0; k < 3; k++) {
            int T = c ? 64 : 16;
            char ctx[16];
            snprintf(ctx, sizeof ctx, "%d", T);
            int i = find_row(&t, "kv_dtype", dtypes[k], "context", ctx);
            ck_assert_int_eq(al_test_attnlabf(&out,
                                              "score %s/%s/model.safetensors %s/%s/eval/test.txt "
                                              "--seq-len %d --through-cache --kv-dtype %s --json",
                                              r, trial, r, trial, T, dtypes[k]),
                             0);
            ck_assert_double_eq_tol(num(&t, i, "loss"), json_num(out, "loss"), 1e-7);
            ck_assert_double_eq(num(&t, i, "kv_cache_bytes"), json_num(out, "kv_cache_bytes"));
            ck_assert_double_eq(num(&t, i, "tokens"), json_num(out, "tokens"));
            free(out);
        }
    al_csv_free(&t);
}

/* The report's rows equal the trial's (one seed: the mean is the value),
 * and its loss-by-position curve the trial's by_position.csv. */
static void report_reads_back(const char *r, const char *config)
{
    char path[4400], trial[64];
    al_csv rep, tr, pos;
    snprintf(trial, sizeof trial, "%s_seed1", config);
    snprintf(path, sizeof path, "%s/eval_configs.csv", r);
    al_test_read_csv(path, &rep);
    snprintf(path, sizeof path, "%s/%s/eval.csv", r, trial);
    al_test_read_csv(path, &tr);
    for (int i = 0; i < tr.n_rows; i++) {
        const char *d = al_csv_cell(&tr, i, "kv_dtype"), *c = al_csv_cell(&tr, i, "context");
        int j = -1;
        for (int k = 0; k < rep.n_rows && j < 0; k++)
            if (!strcmp(al_csv_cell(&rep, k, "config"), config) &&
                !strcmp(al_csv_cell(&rep, k, "kv_dtype"), d) &&
                !strcmp(al_csv_cell(&rep, k, "context"), c))
                j = k;
        ck_assert_double_eq_tol(num(&rep, j, "loss_mean"), num(&tr, i, "loss"), 1e-8);
        ck_assert_double_eq(num(&rep, j, "kv_cache_bytes"), num(&tr, i, "kv_cache_bytes"));
    }
    snprintf(path, sizeof path, "%s/%s/eval/by_position_64/by_position.csv", r, trial);
    al_test_read_csv(path, &pos);
    ck_assert_int_eq(pos.n_rows, 4);
    char *dat = NULL, want[64];
    size_t n;
    al_err e;
    snprintf(path, sizeof path, "%s/eval_by_position_64.dat", r);
    ck_assert_msg(al_read_file(path, &dat, &n, &e) == 0, "%s", e.msg);
    snprintf(want, sizeof want, "# \"%s\"\n", config);
    const char *p = strstr(dat, want);
    ck_assert_msg(p != NULL, "%s", dat);
    p += strlen(want);
    for (int b = 0; b < 4; b++) {
        double mid, loss;
        ck_assert_int_eq(sscanf(p, "%lf %lf", &mid, &loss), 2);
        ck_assert_double_eq_tol(mid, (num(&pos, b, "bucket_start") + num(&pos, b, "bucket_end")
                                      - 1) / 2, 1e-9);
        ck_assert_double_eq_tol(loss, num(&pos, b, "loss"), 1e-6);
        p = strchr(p, '\n') + 1;
    }
    free(dat);
    al_csv_free(&rep), al_csv_free(&tr), al_csv_free(&pos);
}

START_TEST(eval_added_to_a_finished_sweep_scores_its_checkpoints_as_score_does)
{
    char *dir = al_test_tmpdir(), *out, r[4200], path[4400];
    char *exp = write_exp(dir, "");
    snprintf(r, sizeof r, "%s/r", dir);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s --jobs 2", exp, r), 0);
    ck_assert_msg(strstr(out, "2 ok, 0 diverged, 0 failed, 0 kept"), "%s", out);
    free(out), free(exp);
    snprintf(path, sizeof path, "%s/mha_seed1/result.json", r);
    long trained = mtime_ns(path);
    exp = write_exp(dir, eval_tail);   /* the same trials, now with eval */
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s", exp, r), 0);
    ck_assert_msg(strstr(out, "0 ok, 0 diverged, 0 failed, 2 kept from before") &&
                  strstr(out, "eval: 16 result(s) computed over 2 ok trial(s)"), "%s", out);
    free(out);
    ck_assert(mtime_ns(path) == trained);   /* not retrained */
    rows_equal_score_by_hand(r, "mha_seed1");
    rows_equal_score_by_hand(r, "mqa_seed1");
    report_reads_back(r, "mha");
    report_reads_back(r, "mqa");
    char *md = NULL;
    size_t n;
    al_err e;
    snprintf(path, sizeof path, "%s/report.md", r);
    ck_assert(al_read_file(path, &md, &n, &e) == 0);
    ck_assert_msg(strstr(md, "## Checkpoints through the cache") && strstr(md, "### Context 64"),
                  "%s", md);
    free(md);
    /* resumed: a second run computes nothing and leaves eval.csv alone */
    snprintf(path, sizeof path, "%s/mqa_seed1/eval.csv", r);
    long evaluated = mtime_ns(path);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s", exp, r), 0);
    ck_assert_msg(!strstr(out, "result(s) computed"), "%s", out);
    free(out);
    ck_assert(mtime_ns(path) == evaluated);
    free(exp), free(dir);
}
END_TEST

/* A row removed by hand is the only one computed again. */
START_TEST(an_evaluation_cut_short_resumes_with_the_missing_rows)
{
    char *dir = al_test_tmpdir(), *out, r[4200], path[4400];
    char *exp = write_exp(dir, "eval: {kv_dtypes: [f32, bf16], tokens: 256}\n");
    snprintf(r, sizeof r, "%s/r", dir);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s --jobs 2", exp, r), 0);
    /* each worker scored its trial: the sweep's pass found nothing left */
    ck_assert_msg(!strstr(out, "result(s) computed"), "%s", out);
    free(out);
    snprintf(path, sizeof path, "%s/mha_seed1/eval.csv", r);
    char *text = NULL, *cut;
    size_t n;
    al_err e;
    ck_assert(al_read_file(path, &text, &n, &e) == 0);
    ck_assert_msg((cut = strstr(text, "bf16,16,")) != NULL, "%s", text);   /* contexts: seq_len */
    *cut = 0;
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s", exp, r), 0);
    ck_assert_msg(strstr(out, "eval: 1 result(s) computed over 2 ok trial(s)"), "%s", out);
    free(out), free(text);
    al_csv t;
    al_test_read_csv(path, &t);
    ck_assert_int_eq(t.n_rows, 2);
    ck_assert_int_ge(find_row(&t, "kv_dtype", "bf16", "context", "16"), 0);
    al_csv_free(&t), free(exp), free(dir);
}
END_TEST

/* A trial's worker scores it as soon as it has trained (so results come
 * with each trial, and a sweep cut short keeps them), all but eval.decode's
 * timing, which the sweep's pass at the end runs with no trial training
 * beside it; that pass then computes only the decode rows. */
START_TEST(a_trials_worker_evaluates_it_and_leaves_decode_timing_to_the_sweep)
{
    char *dir = al_test_tmpdir(), *out, r[4200], path[4400], dpath[4400];
    char *exp = write_exp(dir, "eval: {kv_dtypes: [f32, int8], tokens: 256,\n"
                               "       decode: {contexts: [16], batch: [1], tokens: 4, repeats: 1}}\n");
    snprintf(r, sizeof r, "%s/r", dir);
    /* 2 eval.csv rows and 1 decode row a trial: the pass computed the decodes alone */
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s --jobs 2", exp, r), 0);
    ck_assert_msg(strstr(out, "2 ok, 0 diverged") &&
                  strstr(out, "eval: 2 result(s) computed over 2 ok trial(s)"), "%s", out);
    free(out);
    al_csv t;
    snprintf(dpath, sizeof dpath, "%s/mqa_seed1/eval/decode.csv", r);
    long timed = mtime_ns(dpath);
    ck_assert(timed > 0);
    /* the worker by itself: its trial scored again where the rows went missing */
    snprintf(path, sizeof path, "%s/mqa_seed1/eval.csv", r);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(al_test_attnlabf(&out, "trial %s --index 1 --out %s --threads 1", exp, r), 0);
    ck_assert_msg(strstr(out, "trial mqa_seed1: ok") &&
                  strstr(out, "trial mqa_seed1: eval: 2 result(s)"), "%s", out);
    free(out);
    al_test_read_csv(path, &t);
    ck_assert_int_eq(t.n_rows, 2);
    ck_assert_int_ge(find_row(&t, "kv_dtype", "int8", "context", "16"), 0);
    al_csv_free(&t);
    ck_assert_msg(mtime_ns(dpath) == timed, "the worker timed decoding beside other trials");
    free(exp), free(dir);
}
END_TEST

/* Passkey trials: the grid into <trial>/eval/passkey.csv, the same CSV
 * as score --passkey by hand, and a row per configuration in the report. */
START_TEST(passkey_trials_are_evaluated_on_the_passkey_grid)
{
    char *dir = al_test_tmpdir(), r[4200], path[4400];
    char *out = run_passkey_sweep(dir, "pk", "{passkey_lengths: [112, 180], passkey_depths: [0, "
                                  "0.5], passkey_examples: 5}", r, sizeof r);
    ck_assert_msg(strstr(out, "2 ok, 0 diverged") && !strstr(out, "result(s) computed"), "%s",
                  out);   /* each worker scored its own */
    free(out);
    char *csv = NULL, *md = NULL;
    size_t n;
    al_err e;
    snprintf(path, sizeof path, "%s/mqa_seed1/eval/passkey.csv", r);
    ck_assert_msg(al_read_file(path, &csv, &n, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(
        al_test_attnlabf(&out,
                         "score %s/mqa_seed1/model.safetensors %s/mqa_seed1/eval/test.txt "
                         "--passkey --lengths 112,180 --depths 0,0.5 --examples 5 --seed 1",
                         r, r),
        0);
    ck_assert_str_eq(out, csv);
    ck_assert_msg(strstr(csv, "\n180,0.5,5,"), "%s", csv);
    free(out);
    snprintf(path, sizeof path, "%s/report.md", r);
    ck_assert(al_read_file(path, &md, &n, &e) == 0);
    ck_assert_msg(strstr(md, "## Passkey retrieval") && strstr(md, "| configuration | 112 | 180 |")
                  && strstr(md, "\n| mqa | "), "%s", md);
    free(md), free(csv), free(dir);
}
END_TEST

/* Passkey trials learn the key's digits alone, so the loss of their filler
 * by position says nothing: eval.by_position over passkey trials is refused
 * at load time naming the key, and the report shows instead the answer's
 * loss by length, each cell the mean over depths of the trial's own
 * passkey.csv (one seed: the mean is that value). */
START_TEST(passkey_trials_report_their_answer_loss_not_their_fillers)
{
    char *dir = al_test_tmpdir(), r[4200], path[4400];
    char *data = write_text(dir), text[4096], *out;
    snprintf(text, sizeof text,
             "name: pkpos\n"
             "data: {source: passkey, path: %s, test_fraction: 0.2, test_examples: 4}\n"
             "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 112}\n"
             "train: {batch_size: 4, eval_batches: 1, threads: 1, warmup_steps: 2, steps: 6}\n"
             "sweep: {grid: {model.attention: [{variant: mha}, {variant: mqa}]}}\n"
             "eval: {passkey_lengths: [112], by_position: true}\n", data);
    char *exp = al_test_write(dir, "bad.yaml", text);
    snprintf(r, sizeof r, "%s/bad", dir);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s", exp, r), 2);
    ck_assert_msg(strstr(out, "bad.yaml:6:45: error: 'eval.by_position' is a text model's loss "
                              "by position, but trial ") &&
                  strstr(out, "is a passkey trial, trained on the key's digits alone"), "%s", out);
    free(out), free(exp), free(data);
    ck_assert_msg(access(r, F_OK) != 0, "a refused sweep made %s", r);

    free(run_passkey_sweep(dir, "pkpos", "{passkey_lengths: [112, 180], passkey_depths: [0, "
                           "0.5], passkey_examples: 2}", r, sizeof r));
    char *md = NULL;
    size_t n;
    al_err e;
    snprintf(path, sizeof path, "%s/report.md", r);
    ck_assert(al_read_file(path, &md, &n, &e) == 0);
    const char *sec = strstr(md, "The answer's loss in nats per digit");
    ck_assert_msg(sec && !strstr(md, "## Loss by position"), "%s", md);
    al_csv t;
    snprintf(path, sizeof path, "%s/mqa_seed1/eval/passkey.csv", r);
    ck_assert_msg(al_csv_read(path, &t, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(t.n_rows, 4);   /* 2 lengths x 2 depths */
    double mean[2] = {0, 0};
    for (int i = 0; i < 4; i++) mean[atoi(al_csv_cell(&t, i, "length")) == 180] += num(&t, i, "loss") / 2;
    al_csv_free(&t);
    char want[256];
    snprintf(want, sizeof want, "\n| mqa | %.3f | %.3f |", mean[0], mean[1]);
    ck_assert_msg(strstr(sec, want), "want %s in\n%s", want, sec);
    free(md), free(dir);
}
END_TEST

/* eval.decode alone: each checkpoint's decode timed at every (context,
 * batch) into <trial>/eval/decode.csv, with the cache bytes of one
 * sequence as the formula gives them (K and V rows, f32); nothing scored;
 * summary.csv carries the report context's batch-1 figure and report.md
 * the table; a second run times nothing again. */
START_TEST(eval_decode_times_each_checkpoint_at_every_context_and_batch)
{
    char *dir = al_test_tmpdir(), *out, r[4200], path[4400];
    char *exp = write_exp(dir, "eval: {decode: {contexts: [16, 40], batch: [1, 3], tokens: 8,\n"
                               "                repeats: 3}}\n");
    snprintf(r, sizeof r, "%s/r", dir);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s --jobs 2", exp, r), 0);
    ck_assert_msg(strstr(out, "eval: 8 result(s) computed over 2 ok trial(s)"), "%s", out);
    free(out);
    const char *trials[] = {"mha_seed1", "mqa_seed1"};
    const int row_bytes[] = {2 * 16 * 4, 2 * 8 * 4};   /* K and V: 2 heads of 8, or 1 */
    for (int k = 0; k < 2; k++) {
        al_csv t;
        snprintf(path, sizeof path, "%s/%s/eval/decode.csv", r, trials[k]);
        al_test_read_csv(path, &t);
        ck_assert_int_eq(t.n_rows, 4);
        for (int i = 0; i < 4; i++) {
            int C = atoi(al_csv_cell(&t, i, "context"));
            ck_assert_msg(num(&t, i, "cache_bytes") == (double)C * row_bytes[k], "%s: %s at %d",
                          trials[k], al_csv_cell(&t, i, "cache_bytes"), C);
            double lo = num(&t, i, "tokens_per_s_min"), mid = num(&t, i, "tokens_per_s"),
                   hi = num(&t, i, "tokens_per_s_max");
            ck_assert_msg(lo > 0 && lo <= mid && mid <= hi, "%g %g %g", lo, mid, hi);
            ck_assert_str_eq(al_csv_cell(&t, i, "repeats"), "3");
        }
        ck_assert_int_ge(find_row(&t, "context", "40", "batch", "3"), 0);
        /* the summary: context 16 (the report context, seq_len) at batch 1 */
        al_csv sm;
        snprintf(path, sizeof path, "%s/summary.csv", r);
        al_test_read_csv(path, &sm);
        int sr = find_row(&sm, "trial", trials[k], "status", "ok");
        ck_assert_str_eq(al_csv_cell(&sm, sr, "decode_context"), "16");
        ck_assert_str_eq(al_csv_cell(&sm, sr, "decode_batch"), "1");
        ck_assert_str_eq(al_csv_cell(&sm, sr, "decode_tokens_per_s"),
                         al_csv_cell(&t, find_row(&t, "context", "16", "batch", "1"),
                                     "tokens_per_s"));
        al_csv_free(&sm), al_csv_free(&t);
        snprintf(path, sizeof path, "%s/%s/eval.csv", r, trials[k]);
        ck_assert_msg(access(path, F_OK) != 0, "decode alone scored %s", trials[k]);
    }
    char *md = NULL;
    size_t n;
    al_err e;
    snprintf(path, sizeof path, "%s/report.md", r);
    ck_assert(al_read_file(path, &md, &n, &e) == 0);
    ck_assert_msg(strstr(md, "## Measured decode speed") && strstr(md, "\n| mqa | 40 | 3 | "),
                  "%s", md);
    free(md);
    snprintf(path, sizeof path, "%s/mha_seed1/eval/decode.csv", r);
    long before = mtime_ns(path);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s", exp, r), 0);
    ck_assert_msg(!strstr(out, "eval:"), "timed again: %s", out);
    ck_assert_int_eq(mtime_ns(path), before);
    free(out), free(exp), free(dir);
}
END_TEST

typedef struct bad_case {
    const char *tail, *want;
} bad_case;

static const bad_case bad[] = {
    {"eval: {kv_dtypes: [f32, int3]}\n", "6:25: error: 'eval.kv_dtypes[1]' must be one of f32, "
                                         "bf16, f16, int8, int4"},
    {"eval: {kv_dtype: [f32]}\n", "6:8: error: unknown key 'eval.kv_dtype' (known: kv_dtypes, "
                                  "contexts, by_position, buckets, tokens, passkey_lengths, "
                                  "passkey_depths, passkey_examples, kv_quant_residuals, "
                                  "mqar_examples, decode)"},
    {"eval: {contexts: [16, 16]}\n", "6:23: error: 'eval.contexts': 16 is listed twice"},
    {"eval: {contexts: [64], tokens: 32}\n", "6:7: error: 'eval.tokens' (32) must be at least "
                                              "every context (64)"},
    {"eval: {buckets: 4}\n", "6:7: error: 'eval.buckets' needs 'eval.by_position: true'"},
    {"eval: {by_position: yes}\n", "6:21: error: 'eval.by_position' must be true or false"},
    {"eval: {passkey_depths: [0, 1]}\n", "6:28: error: 'eval.passkey_depths[1]' must be a "
                                          "number in [0, 1)"},
    {"eval: [f32]\n", "6:7: error: 'eval' must be a mapping (kv_dtypes, contexts, by_position, "
                      "buckets, tokens, passkey_*, kv_quant_residuals, mqar_examples, decode)"},
    {"eval: {decode: {contexts: [64], batchs: 2}}\n",
     "6:33: error: unknown key 'eval.decode.batchs' (known: contexts, batch, tokens, repeats)"},
    {"eval: {decode: {contexts: [64], tokens: 63}}\n",
     "6:16: error: 'eval.decode.contexts' (64) must exceed 'eval.decode.tokens' (63) + 1: the "
     "timed steps decode after the filled cache"},
    {"eval: {decode: {batch: 2}}\n", "6:16: error: 'eval.decode' needs 'contexts' (the context "
                                     "lengths to time decode at)"},
    {"eval: {decode: {contexts: [64], batch: [1, 0]}}\n",
     "6:44: error: 'eval.decode.batch' must be an integer in [1, 4096], got '0'"},
};

START_TEST(bad_eval_keys_name_file_line_and_column)
{
    char *dir = al_test_tmpdir(), *exp = write_exp(dir, bad[_i].tail), want[8192];
    al_sweep s;
    al_err e;
    snprintf(want, sizeof want, "%s:%s", exp, bad[_i].want);
    ck_assert_int_eq(al_sweep_load(exp, NULL, 0, NULL, 0, &s, &e), -1);
    ck_assert_str_eq(e.msg, want);
    free(exp), free(dir);
}
END_TEST

/* Forward FLOPs a token at window T, counted by the cost model directly. */
static double prefill_at(const al_sweep_trial *t, int T)
{
    al_model_config m = t->cfg.model;
    m.seq_len = T;
    al_cost_opts o = {T, 1, AL_KV_F32};
    al_model_cost c;
    al_err e;
    ck_assert_msg(al_cost_of_model(&m, &o, &c, &e) == 0, "%s", e.msg);
    return c.prefill_flops_per_token;
}

/* The ETA counts eval after training: each context's tokens once per kv
 * dtype and once more by position; a passkey trial's grid, a key a window
 * of its length (score --passkey's defaults when eval names none); an mqar
 * trial's examples and a sweep without eval add nothing. */
START_TEST(the_eta_counts_evals_forward_flops)
{
    char *dir = al_test_tmpdir(), *data = write_text(dir), text[4096];
    char *exp = write_exp(dir, "eval: {contexts: [16, 64], kv_dtypes: [f32, int8], "
                               "by_position: true, tokens: 1000}\n");
    al_sweep s;
    al_err e;
    ck_assert_msg(al_sweep_load(exp, NULL, 0, NULL, 0, &s, &e) == 0, "%s", e.msg);
    for (int i = 0; i < s.n_trials; i++) {
        const al_sweep_trial *t = &s.trials[i];
        double want = 1000.0 * 3 * (prefill_at(t, 16) + prefill_at(t, 64)) / 1e3;
        ck_assert_msg(prefill_at(t, 64) > prefill_at(t, 16), "attention grows with the window");
        ck_assert_msg(fabs((double)al_sweep_trial_eval_work(&s.eval, t) - want) <= 1,
                      "%s: %ld, want %.0f", t->id, al_sweep_trial_eval_work(&s.eval, t), want);
    }
    s.eval.on = 0;
    ck_assert_int_eq(al_sweep_trial_eval_work(&s.eval, &s.trials[0]), 0);
    al_sweep_free(&s);
    free(exp);
    const char *pk[] = {"eval: {passkey_lengths: [112, 224], passkey_depths: [0, 0.5], "
                        "passkey_examples: 5}", "eval: {}"};
    for (int k = 0; k < 2; k++) {
        snprintf(text, sizeof text,
                 "name: pk\ndata: {source: passkey, path: %s, test_fraction: 0.2}\n"
                 "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 112}\n"
                 "train: {batch_size: 4, threads: 1, warmup_steps: 2, steps: 6}\n%s\n", data, pk[k]);
        exp = al_test_write(dir, "pk.yaml", text);
        ck_assert_msg(al_sweep_load(exp, NULL, 0, NULL, 0, &s, &e) == 0, "%s", e.msg);
        const al_sweep_trial *t = &s.trials[0];
        double want = k == 0 ? 2.0 * 5 * (112 * prefill_at(t, 112) + 224 * prefill_at(t, 224))
                             : 4.0 * 20 * (112 * prefill_at(t, 112) + 224 * prefill_at(t, 224) +
                                           448 * prefill_at(t, 448));
        ck_assert_msg(fabs((double)al_sweep_trial_eval_work(&s.eval, t) - want / 1e3) <= 1,
                      "%s: %ld, want %.0f", pk[k], al_sweep_trial_eval_work(&s.eval, t), want / 1e3);
        al_sweep_free(&s);
        free(exp);
    }
    snprintf(text, sizeof text,
             "name: mq\ndata: {source: mqar, vocab_size: 40, num_kv_pairs: 3}\n"
             "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 32}\n"
             "train: {batch_size: 4, threads: 1, warmup_steps: 2, steps: 6}\n"
             "eval: {mqar_examples: 50}\n");
    exp = al_test_write(dir, "mq.yaml", text);
    ck_assert_msg(al_sweep_load(exp, NULL, 0, NULL, 0, &s, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(al_sweep_trial_eval_work(&s.eval, &s.trials[0]), 0);
    al_sweep_free(&s);
    free(exp), free(data), free(dir);
}
END_TEST

Suite *sweep_eval_suite(void)
{
    Suite *s = suite_create("sweep_eval");
    TCase *tc = tcase_create("eval");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, eval_added_to_a_finished_sweep_scores_its_checkpoints_as_score_does);
    tcase_add_test(tc, an_evaluation_cut_short_resumes_with_the_missing_rows);
    tcase_add_test(tc, a_trials_worker_evaluates_it_and_leaves_decode_timing_to_the_sweep);
    tcase_add_test(tc, passkey_trials_are_evaluated_on_the_passkey_grid);
    tcase_add_test(tc, passkey_trials_report_their_answer_loss_not_their_fillers);
    tcase_add_test(tc, eval_decode_times_each_checkpoint_at_every_context_and_batch);
    tcase_add_test(tc, the_eta_counts_evals_forward_flops);
    tcase_add_loop_test(tc, bad_eval_keys_name_file_line_and_column, 0,
                        (int)(sizeof bad / sizeof bad[0]));
    suite_add_tcase(s, tc);
    return s;
}
