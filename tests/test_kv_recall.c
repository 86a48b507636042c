/*
 * test_kv_recall.c - recall through quantized caches (issue 38 item 5,
 * docs/kv-quant-recall.md): a sweep's `eval` answers passkey and MQAR
 * examples through f32, int8 and int4 caches at each kv_quant_residuals
 * entry. An int8/int4 cache whose residual holds the whole context answers
 * as f32 does; f32 through the cache answers as the plain forward pass;
 * the per-cell and the report's paired differences, McNemar and Holm
 * p-values equal a computation of this file's own from the per-example
 * outcomes in recall.csv; the report shows the table (report.md and
 * index.html); bad keys are refused with file:line:col.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "al_checkpoint.h"
#include "al_csv.h"
#include "al_data.h"
#include "al_kvcache.h"
#include "al_score.h"
#include "al_sweep_spec.h"
#include "al_test.h"

/* ------------------------------------------------------------ helpers */

static char *write_text(const char *dir)
{
    static const char *const words[] = {"the ", "king ", "and ", "queen ", "of ", "a ",
                                        "land ", "sea ", "shall ", "be ", ".\n"};
    return al_test_write_words(dir, words, 11, 6000, 777);
}

static double num(const al_csv *t, int r, const char *col)
{
    ck_assert_int_ge(r, 0);
    return strtod(al_csv_cell(t, r, col), NULL);
}

static const char *cell(const al_csv *t, int r, const char *col) { return al_csv_cell(t, r, col); }

/* ---- the independent statistics: binomial sums and Holm written out
 * here, not through stats.c */

/* Two-sided exact McNemar: 2 P(X <= min(b, c)), X ~ Binomial(b + c, 1/2), at most 1. */
static double mcnemar(long b, long c)
{
    long n = b + c, k = b < c ? b : c;
    if (n == 0) return 1.0;
    double s = 0;
    for (long i = 0; i <= k; i++)
        s += exp(lgamma(n + 1.0) - lgamma(i + 1.0) - lgamma(n - i + 1.0) - n * log(2.0));
    return s * 2 > 1 ? 1 : s * 2;
}

/* Holm-adjusted p by brute force: adj_i = max over j with p_j <= p_i
 * (ties by index) of min(1, (m - rank_j) p_j). */
static void holm(int m, const double *p, double *adj)
{
    for (int i = 0; i < m; i++) {
        int rank_i = 0;
        for (int j = 0; j < m; j++) rank_i += p[j] < p[i] || (p[j] == p[i] && j < i);
        adj[i] = 0;
        for (int j = 0; j < m; j++) {
            int rank_j = 0;
            for (int k = 0; k < m; k++) rank_j += p[k] < p[j] || (p[k] == p[j] && k < j);
            if (rank_j > rank_i) continue;
            double a = (m - rank_j) * p[j];
            a = a > 1 ? 1 : a;
            adj[i] = a > adj[i] ? a : adj[i];
        }
    }
}

/* One comparison's tallies from recall.csv rows. */
typedef struct tally {
    char task[16], dtype[16], residual[16];
    int length;
    long n, exact, f32_exact, only_f32, only_this;
    double loss, f32_loss, p, adj;   /* losses summed over the examples */
} tally;

/* The f32 row of outcome row r: same task, length, depth and example. */
static int f32_twin(const al_csv *t, int r)
{
    for (int i = 0; i < t->n_rows; i++)
        if (!strcmp(cell(t, i, "kv_dtype"), "f32") && !strcmp(cell(t, i, "task"), cell(t, r, "task")) &&
            !strcmp(cell(t, i, "length"), cell(t, r, "length")) &&
            !strcmp(cell(t, i, "depth"), cell(t, r, "depth")) &&
            !strcmp(cell(t, i, "example"), cell(t, r, "example")))
            return i;
    ck_abort_msg("no f32 row for row %d", r);
    return -1;
}

static int is_true(const al_csv *t, int r)
{
    const char *x = cell(t, r, "exact");
    ck_assert_msg(!strcmp(x, "true") || !strcmp(x, "false"), "exact '%s'", x);
    return !strcmp(x, "true");
}

/* Adds recall.csv's outcomes to the tallies (one per task, length, dtype,
 * residual); returns their number. */
static int tally_file(const char *path, tally *T, int n)
{
    al_csv t;
    al_test_read_csv(path, &t);
    for (int r = 0; r < t.n_rows; r++) {
        int k = 0, L = atoi(cell(&t, r, "length"));
        while (k < n && (strcmp(T[k].task, cell(&t, r, "task")) || T[k].length != L ||
                         strcmp(T[k].dtype, cell(&t, r, "kv_dtype")) ||
                         strcmp(T[k].residual, cell(&t, r, "residual"))))
            k++;
        if (k == n) {
            memset(&T[n], 0, sizeof T[n]);
            snprintf(T[n].task, 16, "%s", cell(&t, r, "task"));
            snprintf(T[n].dtype, 16, "%s", cell(&t, r, "kv_dtype"));
            snprintf(T[n].residual, 16, "%s", cell(&t, r, "residual"));
            T[n++].length = L;
        }
        int q = is_true(&t, r), b = is_true(&t, f32_twin(&t, r));
        ck_assert_int_eq(q, atoi(cell(&t, r, "right")) == atoi(cell(&t, r, "answers")));
        T[k].n++, T[k].exact += q, T[k].f32_exact += b;
        T[k].only_f32 += b && !q, T[k].only_this += q && !b;
        T[k].loss += num(&t, r, "loss"), T[k].f32_loss += num(&t, f32_twin(&t, r), "loss");
    }
    al_csv_free(&t);
    return n;
}

/* p and Holm over the non-f32 tallies. */
static void tally_stats(tally *T, int n)
{
    double p[256] = {0}, adj[256] = {0};
    int m = 0;
    for (int k = 0; k < n; k++)
        if (strcmp(T[k].dtype, "f32")) p[m++] = T[k].p = mcnemar(T[k].only_f32, T[k].only_this);
    holm(m, p, adj);
    for (int k = 0, j = 0; k < n; k++)
        if (strcmp(T[k].dtype, "f32")) T[k].adj = adj[j++];
}

/* Every row of a summary (recall_summary.csv or eval_recall.csv, whose
 * columns agree) equals its tally; config (eval_recall.csv) picks rows. */
static void summary_equals(const char *path, const char *config, const tally *T, int n)
{
    al_csv t;
    int seen = 0;
    al_test_read_csv(path, &t);
    for (int r = 0; r < t.n_rows; r++) {
        if (config && strcmp(cell(&t, r, "config"), config)) continue;
        int k = 0;
        while (k < n && (strcmp(T[k].task, cell(&t, r, "task")) ||
                         T[k].length != atoi(cell(&t, r, "length")) ||
                         strcmp(T[k].dtype, cell(&t, r, "kv_dtype")) ||
                         strcmp(T[k].residual, cell(&t, r, "residual"))))
            k++;
        ck_assert_msg(k < n, "%s: row %d has no outcomes", path, r);
        const tally *x = &T[k];
        seen++;
        ck_assert_double_eq_tol(num(&t, r, "exact_rate"), (double)x->exact / x->n, 1e-9);
        ck_assert_double_eq_tol(num(&t, r, "f32_exact_rate"), (double)x->f32_exact / x->n, 1e-9);
        ck_assert_double_eq_tol(num(&t, r, "delta"), (double)(x->exact - x->f32_exact) / x->n,
                                1e-9);
        ck_assert_int_eq((long)num(&t, r, "only_f32"), x->only_f32);
        ck_assert_int_eq((long)num(&t, r, "only_this"), x->only_this);
        ck_assert_double_eq_tol(num(&t, r, "loss"), x->loss / x->n, 1e-7);
        ck_assert_double_eq_tol(num(&t, r, "f32_loss"), x->f32_loss / x->n, 1e-7);
        if (!strcmp(x->dtype, "f32")) {
            ck_assert_str_eq(cell(&t, r, "p_holm"), "");
            continue;
        }
        ck_assert_double_eq_tol(num(&t, r, "p_mcnemar"), x->p, 1e-9);
        ck_assert_double_eq_tol(num(&t, r, "p_holm"), x->adj, 1e-9);
    }
    ck_assert_int_eq(seen, n);
    al_csv_free(&t);
}

/* ------------------------------------------------------------ passkey */

static const char pk_exp[] =
    "name: kvr\n"
    "data: {source: passkey, path: %s, test_fraction: 0.2, test_examples: 4}\n"
    "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 112, attention: {variant: mha}}\n"
    "train: {batch_size: 4, eval_batches: 1, threads: 1, warmup_steps: 2, steps: 6}\n"
    "sweep: {seeds: 2, grid: {model.attention: [{variant: mha},\n"
    "                                           {variant: mla, d_latent: 16, d_rope: 4}]}}\n"
    "eval: {kv_dtypes: [f32, int8, int4], kv_quant_residuals: [0, default, 4096],\n"
    "       passkey_lengths: [112, 180], passkey_depths: [0, 0.5], passkey_examples: 5}\n";

static const char *const pk_trials[] = {"mha_seed1", "mla-latent16-rope4_seed1", "mha_seed2",
                                        "mla-latent16-rope4_seed2"};

/* Residual 4096 (past every window) answers as f32 on every example;
 * residual 0 int4 changes some answer's loss (the cache is quantized);
 * the default is the checkpoint's 32. */
static void residual_past_the_context_is_f32(const char *r, const char *trial)
{
    char path[4400];
    al_csv t;
    int changed = 0, wide = 0;
    snprintf(path, sizeof path, "%s/%s/eval/recall.csv", r, trial);
    al_test_read_csv(path, &t);
    ck_assert_int_eq(t.n_rows, 7 * 2 * 2 * 5);   /* f32 + (int8, int4) x 3 residuals */
    for (int i = 0; i < t.n_rows; i++) {
        const char *res = cell(&t, i, "residual");
        int f = f32_twin(&t, i);
        if (!strcmp(res, "4096")) {
            wide++;
            ck_assert_str_eq(cell(&t, i, "kv_quant_residual"), "4096");
            ck_assert_str_eq(cell(&t, i, "right"), cell(&t, f, "right"));
            ck_assert_str_eq(cell(&t, i, "exact"), cell(&t, f, "exact"));
            ck_assert_double_eq_tol(num(&t, i, "loss"), num(&t, f, "loss"),
                                    1e-5 * fabs(num(&t, f, "loss")));
        }
        if (!strcmp(res, "default")) ck_assert_str_eq(cell(&t, i, "kv_quant_residual"), "32");
        if (!strcmp(res, "0") && !strcmp(cell(&t, i, "kv_dtype"), "int4"))
            changed += fabs(num(&t, i, "loss") - num(&t, f, "loss")) > 1e-4;
    }
    ck_assert_int_eq(wide, 2 * 2 * 2 * 5);
    ck_assert_msg(changed > 0, "%s: int4 with no residual changed no answer's loss", trial);
    al_csv_free(&t);
}

/* f32 through the cache against the plain forward pass of score --passkey
 * (passkey.csv, the same grid): per cell the same digits right, up to one
 * argmax flipped by rounding, and the same mean loss. */
static void f32_cache_is_the_forward_pass(const char *r, const char *trial)
{
    char path[4400];
    al_csv t, pk;
    snprintf(path, sizeof path, "%s/%s/eval/recall.csv", r, trial);
    al_test_read_csv(path, &t);
    snprintf(path, sizeof path, "%s/%s/eval/passkey.csv", r, trial);
    al_test_read_csv(&path[0], &pk);
    ck_assert_int_eq(pk.n_rows, 4);
    for (int c = 0; c < pk.n_rows; c++) {
        double right = 0, loss = 0;
        int n = 0;
        for (int i = 0; i < t.n_rows; i++)
            if (!strcmp(cell(&t, i, "kv_dtype"), "f32") &&
                !strcmp(cell(&t, i, "length"), cell(&pk, c, "length")) &&
                num(&t, i, "depth") == num(&pk, c, "depth"))
                right += num(&t, i, "right"), loss += num(&t, i, "loss"), n++;
        ck_assert_int_eq(n, 5);
        ck_assert_double_eq_tol(right / (5.0 * n), num(&pk, c, "digit_accuracy"), 1.01 / 25);
        ck_assert_double_eq_tol(loss / n, num(&pk, c, "loss"), 1e-4);
    }
    al_csv_free(&t), al_csv_free(&pk);
}

/* Hand-made outcomes through a trial's files (al_recall_write), so that
 * the pooled statistics have discordant pairs to count: example k of
 * cache c is right on its answers with a pattern of (seed, c, k). */
static void write_made_up(const char *dir, unsigned seed)
{
    static const int dtypes[] = {AL_KV_F32, AL_KV_INT8, AL_KV_INT4};
    static const int residuals[] = {0, AL_RECALL_RESIDUAL_DEFAULT, 4096};
    al_recall rc;
    al_err e;
    al_recall_init(&rc, dtypes, 3, residuals, 3);
    ck_assert_int_eq(rc.n_caches, 7);
    rc.per = 40;
    rc.cap = rc.per * rc.n_caches;
    rc.o = calloc((size_t)rc.cap, sizeof *rc.o);
    uint64_t z = seed * 2654435761u + 1;
    for (int c = 0; c < rc.n_caches; c++) {
        rc.caches[c].tokens = rc.caches[c].residual == AL_RECALL_RESIDUAL_DEFAULT ? 32
                              : rc.caches[c].residual;
        for (long k = 0; k < rc.per; k++) {
            z = z * 6364136223846793005ULL + 1442695040888963407ULL;
            int good = (int)(z >> 60) < 11 - 2 * c;   /* cheaper caches fail more often */
            rc.o[rc.n++] = (al_recall_outcome){AL_RECALL_PASSKEY, k < 20 ? 112 : 180,
                                               k % 2 ? 0.5 : 0, k % 20, 5, good ? 5 : 3,
                                               good ? 0.1 : 2.0};
        }
    }
    ck_assert_msg(al_recall_write(dir, &rc, &e) == 0, "%s", e.msg);
    al_recall_free(&rc);
}

START_TEST(passkey_examples_through_each_cache_pair_with_f32_and_reach_the_report)
{
    char *dir = al_test_tmpdir(), *data = write_text(dir), text[4096], *out, r[4200], path[4400];
    snprintf(text, sizeof text, pk_exp, data);
    char *exp = al_test_write(dir, "kvr.yaml", text);
    snprintf(r, sizeof r, "%s/r", dir);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s --jobs 2", exp, r), 0);
    /* each trial's worker scored it (sweep_eval's tests): nothing left for the sweep's pass */
    ck_assert_msg(strstr(out, "4 ok, 0 diverged") && !strstr(out, "result(s) computed"), "%s",
                  out);
    free(out);
    tally T[64];
    for (int k = 0; k < 4; k++) {
        residual_past_the_context_is_f32(r, pk_trials[k]);
        f32_cache_is_the_forward_pass(r, pk_trials[k]);
        snprintf(path, sizeof path, "%s/%s/eval/recall.csv", r, pk_trials[k]);
        int n = tally_file(path, T, 0);
        ck_assert_int_eq(n, 14);   /* 2 lengths x 7 caches */
        tally_stats(T, n);
        snprintf(path, sizeof path, "%s/%s/eval/recall_summary.csv", r, pk_trials[k]);
        summary_equals(path, NULL, T, n);
    }
    /* made-up outcomes with discordant pairs: each trial's summary, and the
     * report's pooled table (mha over its two seeds) */
    for (int k = 0; k < 4; k++) {
        snprintf(path, sizeof path, "%s/%s/eval", r, pk_trials[k]);
        write_made_up(path, (unsigned)k + 1);
        snprintf(path, sizeof path, "%s/%s/eval/recall.csv", r, pk_trials[k]);
        int n = tally_file(path, T, 0);
        tally_stats(T, n);
        snprintf(path, sizeof path, "%s/%s/eval/recall_summary.csv", r, pk_trials[k]);
        summary_equals(path, NULL, T, n);
    }
    ck_assert_int_eq(al_test_attnlabf(&out, "report %s", r), 0);
    free(out);
    /* pooled by configuration over its seeds; one Holm family over both */
    tally M[64], L[64];
    int nm = 0, nl = 0;
    for (int s = 0; s < 2; s++) {
        snprintf(path, sizeof path, "%s/mha_seed%d/eval/recall.csv", r, s + 1);
        nm = tally_file(path, M, nm);
        snprintf(path, sizeof path, "%s/mla-latent16-rope4_seed%d/eval/recall.csv", r, s + 1);
        nl = tally_file(path, L, nl);
    }
    ck_assert_int_eq(nm, 14);
    ck_assert_int_eq(nl, 14);
    memcpy(T, M, sizeof M[0] * nm);
    memcpy(T + nm, L, sizeof L[0] * nl);
    tally_stats(T, nm + nl);
    snprintf(path, sizeof path, "%s/eval_recall.csv", r);
    summary_equals(path, "mha", T, nm);
    summary_equals(path, "mla-latent16-rope4", T + nm, nl);
    /* the table, in report.md and in index.html in the same words */
    char *md = NULL, *html = NULL;
    size_t len;
    al_err e;
    snprintf(path, sizeof path, "%s/report.md", r);
    ck_assert(al_read_file(path, &md, &len, &e) == 0);
    ck_assert_msg(strstr(md, "## Checkpoints through the cache") &&
                  strstr(md, "### Recall through quantized caches") &&
                  strstr(md, "| configuration | task | length | KV dtype | residual |") &&
                  strstr(md, "\n| mha | passkey | 180 | int4 | 0 | 2 | ") &&
                  strstr(md, "\n| mla-latent16-rope4 | passkey | 112 | f32 | none | 2 | "), "%s", md);
    snprintf(path, sizeof path, "%s/index.html", r);
    ck_assert(al_read_file(path, &html, &len, &e) == 0);
    ck_assert_msg(strstr(html, "Recall through quantized caches") &&
                  strstr(html, "<td>mha</td><td>passkey</td><td>180</td><td>int4</td><td>0</td>"),
                  "%s", html);
    free(md), free(html), free(exp), free(data), free(dir);
}
END_TEST

/* ------------------------------------------------------------ mqar */

static const char mq_exp[] =
    "name: kvm\n"
    "data: {source: mqar, vocab_size: 32, num_kv_pairs: 2, train_examples: 200,\n"
    "       test_examples: 12, power_a: 1}\n"
    "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 64, attention: {variant: mha}}\n"
    "train: {batch_size: 4, eval_batches: 1, threads: 1, warmup_steps: 2, steps: 6}\n"
    "sweep: {seeds: 1}\n"
    "%s";

static int argmax(const float *x, int V)
{
    int best = 0;
    for (int v = 1; v < V; v++)
        if (x[v] > x[best]) best = v;
    return best;
}

START_TEST(mqar_examples_through_each_cache_match_the_forward_pass_at_f32)
{
    char *dir = al_test_tmpdir(), text[4096], *out, r[4200], path[4400];
    snprintf(text, sizeof text, mq_exp,
             "eval: {kv_dtypes: [int4, f32], kv_quant_residuals: [0, 64], mqar_examples: 10}\n");
    char *exp = al_test_write(dir, "kvm.yaml", text);
    snprintf(r, sizeof r, "%s/r", dir);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s", exp, r), 0);
    ck_assert_msg(strstr(out, "1 ok, 0 diverged") && !strstr(out, "result(s) computed"), "%s",
                  out);
    free(out);
    al_csv t;
    snprintf(path, sizeof path, "%s/base_seed1/eval/recall.csv", r);
    al_test_read_csv(path, &t);
    ck_assert_int_eq(t.n_rows, 3 * 10);
    /* the independent answer: the plain forward pass over each example */
    al_sweep s;
    al_err e;
    al_model m;
    al_data d = {0};
    long step;
    ck_assert_msg(al_sweep_load(exp, NULL, 0, NULL, 0, &s, &e) == 0, "%s", e.msg);
    char ckpt[4500];
    snprintf(ckpt, sizeof ckpt, "%.4400s", path);
    *strstr(ckpt, "/eval/recall.csv") = 0;
    strcat(ckpt, "/model.safetensors");
    ck_assert_msg(al_checkpoint_load_run(ckpt, &m, &step, &e) == 0, "%s", e.msg);
    ck_assert_msg(al_data_open(&d, &s.trials[0].cfg.data, 64, &e) == 0, "%s", e.msg);
    ck_assert(al_model_reserve(&m, 1, 64, &e) == 0);
    int in[64], tgt[64], exact_seen = 0, changed = 0;
    float w[64];
    for (int k = 0; k < 10; k++) {
        al_data_examples(&d, AL_SPLIT_TEST, k, 1, 64, in, tgt, w);
        al_model_forward(&m, in, tgt, w, 1, 64);
        int right = 0, answers = 0;
        for (int i = 0; i < 64; i++)
            if (w[i] > 0) answers++, right += argmax(m.logits + (size_t)i * 32, 32) == tgt[i];
        for (int i = 0; i < t.n_rows; i++) {
            if (atoi(cell(&t, i, "example")) != k) continue;
            ck_assert_str_eq(cell(&t, i, "task"), "mqar");
            ck_assert_int_eq(atoi(cell(&t, i, "answers")), answers);
            if (!strcmp(cell(&t, i, "kv_dtype"), "f32") || !strcmp(cell(&t, i, "residual"), "64"))
                ck_assert_int_eq(atoi(cell(&t, i, "right")), right);   /* as f32 */
            exact_seen += !strcmp(cell(&t, i, "kv_dtype"), "f32");
            if (!strcmp(cell(&t, i, "residual"), "0"))   /* quantized: some answer moves */
                changed += fabs(num(&t, i, "loss") - num(&t, f32_twin(&t, i), "loss")) > 1e-4;
        }
    }
    ck_assert_int_eq(exact_seen, 10);
    ck_assert_msg(changed > 0, "int4 with no residual changed no MQAR answer");
    al_data_close(&d);
    al_model_free(&m);
    al_sweep_free(&s);
    al_csv_free(&t);
    /* the summary from the outcomes */
    tally T[16];
    int n = tally_file(path, T, 0);
    ck_assert_int_eq(n, 3);
    tally_stats(T, n);
    *strstr(path, "recall.csv") = 0;
    strcat(path, "recall_summary.csv");
    summary_equals(path, NULL, T, n);
    free(exp), free(dir);
}
END_TEST

/* Hand-checked: 7 examples only f32 answered, 1 only int4 did:
 * p = 2 (1 + 8) / 2^8; Holm over it and a p of 1 doubles the smaller. */
START_TEST(mcnemar_and_holm_of_hand_counted_pairs)
{
    double p[2] = {al_mcnemar_p(7, 1), al_mcnemar_p(2, 2)}, adj[2];
    ck_assert_double_eq_tol(p[0], 18.0 / 256, 1e-15);
    ck_assert_double_eq_tol(p[1], 1.0, 1e-15);
    al_holm_adjust(2, p, adj);
    ck_assert_double_eq_tol(adj[0], 36.0 / 256, 1e-15);
    ck_assert_double_eq_tol(adj[1], 1.0, 1e-15);
    double q[4] = {0.01, 0.04, 0.03, NAN}, qa[4], want[4];
    al_holm_adjust(4, q, qa);
    holm(4, (double[]){0.01, 0.04, 0.03, 1.0}, want);
    for (int i = 0; i < 4; i++) ck_assert_double_eq_tol(qa[i], want[i], 1e-15);
    ck_assert_double_eq_tol(qa[0], 0.04, 1e-15);   /* 4 x 0.01 */
    ck_assert_double_eq_tol(qa[2], 0.09, 1e-15);   /* 3 x 0.03 */
    ck_assert_double_eq_tol(qa[1], 0.09, 1e-15);   /* 2 x 0.04 = 0.08, raised to 0.09 */
}
END_TEST

/* ------------------------------------------------------------ bad keys */

typedef struct bad_case {
    const char *tail, *want;
} bad_case;

static const bad_case bad[] = {
    {"eval: {kv_dtypes: [int4], kv_quant_residuals: [0, defualt]}\n",
     "7:51: error: 'eval.kv_quant_residuals[1]' must be a token count in [0, 16777216] or "
     "'default'"},
    {"eval: {kv_quant_residuals: [default, 0, default]}\n",
     "7:41: error: 'eval.kv_quant_residuals': default is listed twice"},
    {"eval: {kv_quant_residuals: 32}\n",
     "7:28: error: 'eval.kv_quant_residuals' must be a list of 1 to 8 token counts or 'default'"},
    {"eval: {kv_quant_residuals: [-1]}\n",
     "7:29: error: 'eval.kv_quant_residuals[0]' must be a token count in [0, 16777216] or "
     "'default'"},
    {"eval: {mqar_examples: 0}\n",
     "7:23: error: 'eval.mqar_examples' must be an integer in [1, 16777216], got '0'"},
    {"eval: {kv_quant_residual: [0]}\n",
     "7:8: error: unknown key 'eval.kv_quant_residual' (known: kv_dtypes, contexts, by_position, "
     "buckets, tokens, passkey_lengths, passkey_depths, passkey_examples, kv_quant_residuals, "
     "mqar_examples, decode)"},
    {"eval: {contexts: [64]}\n",
     "7:7: error: 'eval' answers mqar trials' examples through the caches of 'eval.kv_dtypes': "
     "trial base_seed1 reads data.source mqar and eval gives none of kv_dtypes, kv_quant_residuals, "
     "mqar_examples"},
};

START_TEST(bad_recall_keys_name_file_line_and_column)
{
    char *dir = al_test_tmpdir(), text[4096], want[8192];
    snprintf(text, sizeof text, mq_exp, bad[_i].tail);
    char *exp = al_test_write(dir, "kvm.yaml", text);
    al_sweep s;
    al_err e;
    snprintf(want, sizeof want, "%s:%s", exp, bad[_i].want);
    ck_assert_int_eq(al_sweep_load(exp, NULL, 0, NULL, 0, &s, &e), -1);
    ck_assert_str_eq(e.msg, want);
    free(exp), free(dir);
}
END_TEST

Suite *kv_recall_suite(void)
{
    Suite *s = suite_create("kv_recall");
    TCase *tc = tcase_create("recall");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, passkey_examples_through_each_cache_pair_with_f32_and_reach_the_report);
    tcase_add_test(tc, mqar_examples_through_each_cache_match_the_forward_pass_at_f32);
    tcase_add_test(tc, mcnemar_and_holm_of_hand_counted_pairs);
    tcase_add_loop_test(tc, bad_recall_keys_name_file_line_and_column, 0,
                        (int)(sizeof bad / sizeof bad[0]));
    suite_add_tcase(s, tc);
    return s;
}
