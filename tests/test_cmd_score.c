/*
 * test_cmd_score.c - `attnlab score` against an independent computation
 * (one window at a time through al_model_forward, cross-entropy computed
 * here in double), its window rule, --json and errors; `attnlab grads`
 * against the model's own backward pass in this process.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "al_checkpoint.h"
#include "al_registry.h"
#include "al_safetensors.h"
#include "al_test.h"
#include "al_test_model.h"

typedef struct fixture {
    char *dir, ckpt[4200], text[4200];
    al_model m;
    unsigned char *bytes;
    size_t n;
} fixture;

/* An mla model with larger-than-init weights (so positions matter), saved;
 * and a text whose length leaves a partial last window for T = 8 and 20. */
static void fixture_open(fixture *f, int n_bytes)
{
    memset(f, 0, sizeof *f);
    f->dir = al_test_tmpdir();
    al_model_config c;
    const al_variant *mla = al_variant_find("mla");
    ck_assert_int_eq(al_test_tiny_config(&c, mla, 2, 16, 2, 8, 8, 256), 0);
    c.attn_set[al_variant_setting_index(mla, "d_rope")] = 4;
    al_err e;
    ck_assert_int_eq(al_model_init(&f->m, &c, &e), 0);
    al_model_init_weights(&f->m, 11);
    for (size_t i = 0; i < f->m.n_params; i++) f->m.params[i] *= 5.0f;
    snprintf(f->ckpt, sizeof f->ckpt, "%s/m.safetensors", f->dir);
    ck_assert_int_eq(al_checkpoint_save(f->ckpt, &f->m, 42, &e), 0);
    f->bytes = malloc(n_bytes + 1);
    const char *s = "Now is the winter of our discontent, made glorious summer. ";
    for (int i = 0; i < n_bytes; i++) f->bytes[i] = (unsigned char)s[(i * 5 + i / 7) % strlen(s)];
    f->bytes[n_bytes] = 0;
    f->n = n_bytes;
    char *p = al_test_write(f->dir, "text.txt", (const char *)f->bytes);
    snprintf(f->text, sizeof f->text, "%s", p);
    free(p);
}

static void fixture_close(fixture *f)
{
    al_model_free(&f->m);
    free(f->bytes);
    free(f->dir);
}

/* Mean CE over windows [jT, jT+T) -> [jT+1, jT+T+1), one window per forward,
 * the softmax done here in double. Returns the mean; *tokens the count. */
static double reference_score(fixture *f, int T, long *tokens)
{
    al_err e;
    ck_assert_int_eq(al_model_reserve(&f->m, 1, T, &e), 0);
    int V = f->m.cfg.vocab_size, *in = malloc(T * sizeof(int));
    long W = (long)((f->n - 1) / T);
    double sum = 0;
    for (long j = 0; j < W; j++) {
        for (int t = 0; t < T; t++) in[t] = f->bytes[j * T + t];
        al_model_forward(&f->m, in, NULL, NULL, 1, T);
        for (int t = 0; t < T; t++) {
            const float *row = f->m.logits + (size_t)t * V;
            double mx = row[0], z = 0;
            for (int v = 1; v < V; v++) mx = fmax(mx, row[v]);
            for (int v = 0; v < V; v++) z += exp((double)row[v] - mx);
            sum += mx + log(z) - row[f->bytes[j * T + t + 1]];
        }
    }
    free(in);
    *tokens = W * T;
    return sum / (double)(W * T);
}

/* The last line's loss= and tokens=. */
static double parse_score(const char *out, long *tokens)
{
    const char *last = out, *p;
    while ((p = strstr(last, "loss=")) != NULL) last = p + 1;
    ck_assert_msg(last != out, "no loss= in: %s", out);
    double loss;
    ck_assert_msg(sscanf(last - 1, "loss=%lf tokens=%ld", &loss, tokens) == 2, "%s", out);
    ck_assert_msg(strchr(last, '\n') == last + strlen(last) - 1, "not the last line: %s", out);
    return loss;
}

START_TEST(score_equals_an_independent_window_by_window_computation)
{
    fixture f;
    fixture_open(&f, 1000);   /* 999 / 8 = 124 windows (7 bytes left), 999 / 20 = 49 */
    char args[9000], *out;
    long tokens, ref_tokens;
    snprintf(args, sizeof args, "score %s %s --threads 1", f.ckpt, f.text);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    double loss = parse_score(out, &tokens), ref = reference_score(&f, 8, &ref_tokens);
    ck_assert_int_eq(tokens, 992);
    ck_assert_int_eq(tokens, ref_tokens);
    /* the 7 bytes past the last window are said, not dropped silently */
    ck_assert_msg(strstr(out, " left_out=7\n") &&
                  strstr(out, "score: the last 7 byte(s) of "), "%s", out);
    ck_assert_msg(fabs(loss - ref) < 1e-5 * ref, "score %.7f, reference %.7f", loss, ref);
    ck_assert_msg(fabs(ref - log(256.0)) > 0.05, "an untrained-looking model tests little");
    free(out);
    /* longer than the trained seq_len (RoPE extrapolates), odd batches */
    snprintf(args, sizeof args, "score %s %s --seq-len 20 --batch 3", f.ckpt, f.text);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    loss = parse_score(out, &tokens);
    ref = reference_score(&f, 20, &ref_tokens);
    ck_assert_int_eq(tokens, 980);
    ck_assert_msg(fabs(loss - ref) < 1e-5 * ref, "T=20: score %.7f, reference %.7f", loss, ref);
    free(out);
    fixture_close(&f);
}
END_TEST

START_TEST(score_json_carries_the_same_figures)
{
    fixture f;
    fixture_open(&f, 500);
    char args[9000], *out;
    long tokens;
    snprintf(args, sizeof args, "score %s %s", f.ckpt, f.text);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    double loss = parse_score(out, &tokens);
    ck_assert_ptr_nonnull(strstr(out, "variant=mla"));
    free(out);
    snprintf(args, sizeof args, "score %s %s --json", f.ckpt, f.text);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    ck_assert_msg(j != NULL, "%s: %s", je.text, out);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "tokens")), tokens);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "windows")), 62);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "left_out")), 499 - 62 * 8);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "seq_len")), 8);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "step")), 42);
    ck_assert_str_eq(json_string_value(json_object_get(j, "variant")), "mla");
    ck_assert(fabs(json_real_value(json_object_get(j, "loss")) - loss) < 1e-6);
    json_decref(j);
    free(out);
    fixture_close(&f);
}
END_TEST

/* ---- --by-position and --through-cache */

/* Per-token losses of every window of T, computed as reference_score
 * does, summed into the N buckets [floor(iT/N), floor((i+1)T/N)). */
static void reference_buckets(fixture *f, int T, int N, double *mean, long *count)
{
    al_err e;
    ck_assert_int_eq(al_model_reserve(&f->m, 1, T, &e), 0);
    int V = f->m.cfg.vocab_size, *in = malloc(T * sizeof(int));
    long W = (long)((f->n - 1) / T);
    for (int i = 0; i < N; i++) mean[i] = 0, count[i] = 0;
    for (long j = 0; j < W; j++) {
        for (int t = 0; t < T; t++) in[t] = f->bytes[j * T + t];
        al_model_forward(&f->m, in, NULL, NULL, 1, T);
        for (int t = 0; t < T; t++) {
            const float *row = f->m.logits + (size_t)t * V;
            double mx = row[0], z = 0;
            for (int v = 1; v < V; v++) mx = fmax(mx, row[v]);
            for (int v = 0; v < V; v++) z += exp((double)row[v] - mx);
            int b = 0;
            while ((long)(b + 1) * T / N <= t) b++;
            mean[b] += mx + log(z) - row[f->bytes[j * T + t + 1]];
            count[b]++;
        }
    }
    for (int i = 0; i < N; i++) mean[i] /= (double)count[i];
    free(in);
}

START_TEST(by_position_buckets_equal_an_independent_computation)
{
    fixture f;
    fixture_open(&f, 1000);   /* T = 20, past the trained 8: 49 windows */
    char args[9000], path[4200], *out, *csv;
    snprintf(args, sizeof args, "score %s %s --seq-len 20 --by-position --buckets 3 --out %s/bp",
             f.ckpt, f.text, f.dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    long tokens, ref_tokens, count[3];
    double loss = parse_score(out, &tokens), ref = reference_score(&f, 20, &ref_tokens), mean[3];
    ck_assert_msg(fabs(loss - ref) < 1e-5 * ref, "score %.7f, reference %.7f", loss, ref);
    free(out);
    reference_buckets(&f, 20, 3, mean, count);
    snprintf(path, sizeof path, "%s/bp/by_position.csv", f.dir);
    size_t n;
    al_err e;
    ck_assert_int_eq(al_read_file(path, &csv, &n, &e), 0);
    ck_assert_msg(!strncmp(csv, "bucket_start,bucket_end,loss,tokens\n", 36), "%s", csv);
    const char *p = strchr(csv, '\n') + 1;
    static const long edges[] = {0, 6, 13, 20};
    for (int i = 0; i < 3; i++) {
        long lo, hi, tok;
        double l;
        ck_assert_int_eq(sscanf(p, "%ld,%ld,%lf,%ld", &lo, &hi, &l, &tok), 4);
        ck_assert_int_eq(lo, edges[i]);
        ck_assert_int_eq(hi, edges[i + 1]);
        ck_assert_int_eq(tok, count[i]);
        ck_assert_int_eq(tok, 49 * (hi - lo));
        ck_assert_msg(fabs(l - mean[i]) < 1e-5 * mean[i], "bucket %d: %.7f, reference %.7f", i,
                      l, mean[i]);
        p = strchr(p, '\n') + 1;
    }
    ck_assert_str_eq(p, "");
    snprintf(path, sizeof path, "%s/bp/by_position.gp", f.dir);
    ck_assert_int_eq(access(path, F_OK), 0);
    free(csv);
    fixture_close(&f);
}
END_TEST

START_TEST(through_cache_at_f32_equals_score_and_reports_its_cache)
{
    fixture f;
    fixture_open(&f, 1000);
    char args[9000], *out;
    long tokens, ref_tokens;
    double ref = reference_score(&f, 20, &ref_tokens);
    snprintf(args, sizeof args, "score %s %s --seq-len 20 --through-cache --kv-dtype f32",
             f.ckpt, f.text);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    double loss = parse_score(out, &tokens);
    ck_assert_int_eq(tokens, ref_tokens);
    ck_assert_msg(fabs(loss - ref) < 1e-4, "through the cache %.7f, reference %.7f", loss, ref);
    ck_assert_ptr_nonnull(strstr(out, "through_cache=1 kv_dtype=f32"));
    free(out);
    snprintf(args, sizeof args, "score %s %s --seq-len 20 --through-cache --kv-dtype int8 --json",
             f.ckpt, f.text);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    json_t *j = json_loads(out, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(json_string_value(json_object_get(j, "kv_dtype")), "int8");
    ck_assert(json_is_true(json_object_get(j, "through_cache")));
    /* mla: rows of d_latent + d_rope = 8 + 4 (whole row per channel), 2 layers; with the
     * default group and residual of 32 a window of 20 is all f32 ring */
    ck_assert_int_eq(json_integer_value(json_object_get(j, "kv_cache_bytes")), 2 * 20 * 12 * 4);
    json_decref(j);
    free(out);
    fixture_close(&f);
}
END_TEST

static void expect_fail(const char *args, int status, const char *want)
{
    char *out;
    ck_assert_int_eq(al_test_attnlab(args, &out), status);
    ck_assert_msg(strstr(out, want), "'%s' not in: %s", want, out);
    ck_assert_msg(strchr(out, '\n') == out + strlen(out) - 1, "not one line: %s", out);
    free(out);
}

START_TEST(score_errors_are_one_line)
{
    fixture f;
    fixture_open(&f, 100);
    char args[9000], want[4300];
    char *tiny = al_test_write(f.dir, "tiny.txt", "12345678");
    snprintf(args, sizeof args, "score %s %s", f.ckpt, tiny);
    snprintf(want, sizeof want, "%s: too short: 8 bytes, one window of 8 tokens needs 9", tiny);
    expect_fail(args, 2, want);
    snprintf(args, sizeof args, "score %s/none.safetensors %s", f.dir, f.text);
    expect_fail(args, 2, "none.safetensors: cannot open");
    snprintf(args, sizeof args, "score %s %s", f.text, f.text);
    expect_fail(args, 2, "not a safetensors file");
    snprintf(args, sizeof args, "score %s %s --seq-len 0", f.ckpt, f.text);
    expect_fail(args, 2, "score: --seq-len wants an integer in [1, 16777216], got '0'");
    snprintf(args, sizeof args, "score %s %s --frobnicate", f.ckpt, f.text);
    expect_fail(args, 2, "score: unknown option '--frobnicate'");
    snprintf(args, sizeof args, "score %s", f.ckpt);
    expect_fail(args, 2, "score: missing the FILE argument");
    snprintf(args, sizeof args, "grads %s %s", f.ckpt, f.text);
    expect_fail(args, 2, "grads: missing --out GRADS.safetensors");
    snprintf(args, sizeof args, "score %s %s --kv-dtype int8", f.ckpt, f.text);
    expect_fail(args, 2, "--kv-dtype needs --through-cache");
    snprintf(args, sizeof args, "score %s %s --through-cache --kv-dtype int3", f.ckpt, f.text);
    expect_fail(args, 2, "int3");
    snprintf(args, sizeof args, "score %s %s --by-position", f.ckpt, f.text);
    expect_fail(args, 2, "--by-position needs --out DIR");
    snprintf(args, sizeof args, "score %s %s --by-position --out %s/bp --buckets 9", f.ckpt,
             f.text, f.dir);
    expect_fail(args, 2, "--buckets (9) must be at most the window length T (8)");
    snprintf(args, sizeof args, "score %s %s --buckets 2", f.ckpt, f.text);
    expect_fail(args, 2, "--buckets needs --by-position");
    free(tiny);
    fixture_close(&f);
}
END_TEST

/* grads writes every parameter's gradient of the mean loss over the first
 * B windows: the same numbers as forward + backward on those windows here. */
START_TEST(grads_writes_the_loss_and_every_gradient_of_the_first_windows)
{
    fixture f;
    fixture_open(&f, 300);
    char args[13000], out_path[4300], *out;
    snprintf(out_path, sizeof out_path, "%s/g.safetensors", f.dir);
    snprintf(args, sizeof args, "grads %s %s --out %s --batch 3 --threads 1", f.ckpt, f.text,
             out_path);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    ck_assert_msg(strstr(out, "tokens=24"), "%s", out);
    free(out);
    int in[24], tgt[24];
    for (int i = 0; i < 24; i++) in[i] = f.bytes[i], tgt[i] = f.bytes[i + 1];
    al_err e;
    ck_assert_int_eq(al_model_reserve(&f.m, 3, 8, &e), 0);
    al_model_zero_grad(&f.m);
    double loss = al_model_forward(&f.m, in, tgt, NULL, 3, 8);
    al_model_backward(&f.m);
    al_st_file g;
    ck_assert_int_eq(al_st_read(out_path, &g, &e), 0);
    ck_assert_int_eq(g.n, f.m.n_tensors);
    ck_assert(fabs(strtod(al_st_meta(&g, "attnlab.loss"), NULL) - loss) < 1e-6 * loss);
    ck_assert_str_eq(al_st_meta(&g, "attnlab.windows"), "3");
    for (int i = 0; i < f.m.n_tensors; i++) {
        const al_tensor *x = &f.m.tensors[i];
        const al_st_tensor *t = al_st_find(&g, x->name);
        ck_assert_msg(t != NULL, "%s missing", x->name);
        ck_assert_uint_eq(t->numel, x->numel);
        double *a = malloc(x->numel * sizeof(double)), *b = malloc(x->numel * sizeof(double));
        for (size_t k = 0; k < x->numel; k++) {
            float v;
            memcpy(&v, t->data + 4 * k, 4);
            a[k] = v;
            b[k] = f.m.grads[x->offset + k];
        }
        ck_assert_msg(al_check_rel_err(a, b, x->numel) < 1e-5, "%s", x->name);
        free(a), free(b);
    }
    al_st_free(&g);
    fixture_close(&f);
}
END_TEST

Suite *cmd_score_suite(void)
{
    Suite *s = suite_create("cmd_score");
    TCase *tc = tcase_create("cmd_score");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, score_equals_an_independent_window_by_window_computation);
    tcase_add_test(tc, score_json_carries_the_same_figures);
    tcase_add_test(tc, score_errors_are_one_line);
    tcase_add_test(tc, by_position_buckets_equal_an_independent_computation);
    tcase_add_test(tc, through_cache_at_f32_equals_score_and_reports_its_cache);
    tcase_add_test(tc, grads_writes_the_loss_and_every_gradient_of_the_first_windows);
    suite_add_tcase(s, tc);
    return s;
}
