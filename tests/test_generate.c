/*
 * test_generate.c - generation end to end: in process (al_generate over a
 * model trained here until it knows a repeated string by heart, and its
 * refusals), and as a user runs it (`attnlab generate`, `attnlab
 * bench-decode`, the cache bytes `attnlab kv` reports).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_csv.h"
#include "al_decode.h"
#include "al_optim.h"
#include "al_registry.h"
#include "al_test.h"
#include "al_test_model.h"

/* ------------------------------------------------------------ generation */

static const char period[] = "hello world! ";

/* Train a byte model of variant v on `period` repeated until it has it by
 * heart: windows at random offsets, AdamW at a constant rate. */
static void overfit(al_model *m, const al_variant *v, int seq_len, int steps)
{
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, v, 1, 32, 4, 8, seq_len, 256), 0);
    al_err e;
    ck_assert_int_eq(al_model_init(m, &c, &e), 0);
    al_model_init_weights(m, 3);
    enum { B = 8 };
    int P = (int)strlen(period), in[B * 64], tgt[B * 64];
    ck_assert_int_le(seq_len, 64);
    ck_assert_int_eq(al_model_reserve(m, B, seq_len, &e), 0);
    al_adamw o;
    al_adamw_init(&o, m->n_params, 0.9, 0.99, 0.0);
    al_rng r;
    al_rng_seed(&r, 8);
    double loss = 0;
    for (int s = 0; s < steps; s++) {
        for (int b = 0; b < B; b++) {
            int off = (int)al_rng_below(&r, P);
            for (int t = 0; t < seq_len; t++) {
                in[b * seq_len + t] = (unsigned char)period[(off + t) % P];
                tgt[b * seq_len + t] = (unsigned char)period[(off + t + 1) % P];
            }
        }
        al_model_zero_grad(m);
        loss = al_model_forward(m, in, tgt, NULL, B, seq_len);
        al_model_backward(m);
        al_adamw_step(&o, m, 3e-3);
    }
    ck_assert_msg(loss < 0.1, "%s did not overfit: loss %g", v->name, loss);
    al_adamw_free(&o);
}

/* Text the repeated string continues with after `prompt` (a prefix). */
static void continuation(char *out, size_t prompt_len, size_t n)
{
    size_t P = strlen(period);
    for (size_t i = 0; i < n; i++) out[i] = period[(prompt_len + i) % P];
    out[n] = 0;
}

/* al_generate into memory streams; returns its status, out and err text;
 * the number of bytes written to out is left in gen_out_len. */
static size_t gen_out_len;
static int gen(al_model *m, const char *prompt, long tokens, double temp, long context,
               int dtype, char **out, char **err, al_generate_stats *st, al_err *e)
{
    size_t no, ne;
    FILE *fo = open_memstream(out, &no), *fe = open_memstream(err, &ne);
    al_generate_opts o = {.prompt = (const unsigned char *)prompt, .prompt_len = strlen(prompt),
                          .tokens = tokens, .temperature = temp, .seed = 9, .context = context,
                          .dtype = dtype, .stats = 1};
    int rc = al_generate(m, &o, fo, fe, st, e);
    fclose(fo), fclose(fe);
    gen_out_len = no;
    return rc;
}

static void check_overfit_generation(const al_variant *v)
{
    al_model m;
    overfit(&m, v, 24, 150);
    char *out, *err, want[64];
    al_generate_stats st;
    al_err e;
    int rc = gen(&m, "hello w", 17, 0.0, 0, -1, &out, &err, &st, &e);
    ck_assert_msg(rc == 0, "%s", e.msg);
    continuation(want, 7, 17);
    ck_assert_msg(!strcmp(out, want), "%s: greedy gave '%s', want '%s'", v->name, out, want);
    ck_assert_int_eq(st.generated, 17);
    ck_assert_int_eq(st.context, 24);
    ck_assert_uint_eq(st.kv_bytes_per_token, al_kv_bytes_per_token(&m.cfg, AL_KV_F32));
    ck_assert_uint_eq(st.cache_bytes, al_model_kv_bytes_at(&m.cfg, AL_KV_F32, 24));
    if (v->decode->kv_rows(m.layers[0].ctx, 24) == 24)   /* one row per token; local's ring holds fewer */
        ck_assert_uint_eq(st.cache_bytes, 24 * al_kv_bytes_per_token(&m.cfg, AL_KV_F32));
    char line[128];
    snprintf(line, sizeof line, "kv_bytes_per_token=%zu", st.kv_bytes_per_token);
    ck_assert_msg(strstr(err, line), "%s", err);
    free(out), free(err);
    al_model_free(&m);
}

START_TEST(greedy_generation_reproduces_an_overfit_string)
{
    int n = 0;
    for (int i = 0; i < al_variant_count(); i++)
        if (al_variant_at(i)->decode) check_overfit_generation(al_variant_at(i)), n++;
    ck_assert_int_ge(n, 4);
}
END_TEST

static void expect_error(al_model *m, const char *prompt, long tokens, double temp, long ctx,
                         const char *what)
{
    char *out, *err;
    al_err e;
    int rc = gen(m, prompt, tokens, temp, ctx, -1, &out, &err, NULL, &e);
    ck_assert_msg(rc == -1, "prompt '%s' tokens %ld T %g ctx %ld: accepted", prompt, tokens,
                  temp, ctx);
    ck_assert_msg(strstr(e.msg, what), "'%s' lacks '%s'", e.msg, what);
    ck_assert_msg(!strchr(e.msg, '\n'), "not one line: %s", e.msg);
    ck_assert_str_eq(out, "");
    free(out), free(err);
}

START_TEST(generate_refuses_bad_options_with_one_line)
{
    al_model m;
    al_model_config c;
    al_err e;
    ck_assert_int_eq(al_test_tiny_config(&c, al_variant_find("gqa"), 1, 16, 4, 4, 8, 256), 0);
    ck_assert_int_eq(al_model_init(&m, &c, &e), 0);
    al_model_init_weights(&m, 1);
    expect_error(&m, "", 2, 0, 0, "empty");
    expect_error(&m, "abcdefghi", 0, 0, 0, "longer than the context (8)");
    expect_error(&m, "abcdefghi", 0, 0, 6, "longer than the context (6)");
    expect_error(&m, "abc", 6, 0, 0, "--context 9");
    expect_error(&m, "abc", 2, -1, 0, "--temperature");
    expect_error(&m, "abc", 2, NAN, 0, "--temperature");
    expect_error(&m, "abc", 2, INFINITY, 0, "--temperature");
    expect_error(&m, "abcdefgh", -1, 0, 0, "fills the context");
    al_generate_opts bad = {.prompt = (const unsigned char *)"abc", .prompt_len = 3, .tokens = 2,
                            .temperature = 1.0, .top_k = -1, .dtype = -1};
    ck_assert_int_eq(al_generate(&m, &bad, stdout, stderr, NULL, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "--top-k"));
    /* the defaults fill the context; a larger context extrapolates */
    char *out, *err;
    ck_assert_int_eq(gen(&m, "abc", -1, 0, 0, -1, &out, &err, NULL, &e), 0);
    ck_assert_uint_eq(gen_out_len, 5);
    free(out), free(err);
    ck_assert_int_eq(gen(&m, "abc", 20, 0.8, 23, AL_KV_F16, &out, &err, NULL, &e), 0);
    ck_assert_uint_eq(gen_out_len, 20);
    ck_assert_ptr_nonnull(strstr(err, "kv_dtype=f16 batch=1\n"));
    ck_assert_ptr_nonnull(strstr(err, "context=23"));
    char *again, *err2;   /* same seed, same bytes */
    ck_assert_int_eq(gen(&m, "abc", 20, 0.8, 23, AL_KV_F16, &again, &err2, NULL, &e), 0);
    ck_assert(memcmp(out, again, 20) == 0);
    free(again), free(err2);
    free(out), free(err);
    al_model_free(&m);
    /* a byte outside a smaller vocabulary */
    ck_assert_int_eq(al_test_tiny_config(&c, al_variant_find("mha"), 1, 16, 4, 4, 8, 50), 0);
    ck_assert_int_eq(al_model_init(&m, &c, &e), 0);
    expect_error(&m, "a", 1, 0, 0, "outside the model's vocabulary (50)");
    al_model_free(&m);
}
END_TEST

/* ------------------------------------------------------------ the command line */

/* The figure `attnlab kv` prints for the configured kv_dtype, by hand:
 * mla caches d_latent + d_rope per layer, here 3 * (32 + 16) elements. */
START_TEST(kv_reports_the_configured_kv_dtype)
{
    char *dir = al_test_tmpdir();
    char *cfg = al_test_write(dir, "c.yaml",
                              "data: {path: /nonexistent}\n"
                              "model: {n_layer: 3, d_model: 64, n_head: 4, kv_dtype: f16,\n"
                              "  attention: {variant: mla, d_latent: 32, d_rope: 16}}\n");
    char args[4200], *out;
    snprintf(args, sizeof args, "kv %s", cfg);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    ck_assert_msg(strstr(out, "kv_bytes_per_token: f32=576 bf16=288 f16=288\n"), "%s", out);
    ck_assert_msg(strstr(out, "kv_dtype: f16 kv_bytes_per_token=288\n"), "%s", out);
    free(out), free(cfg), free(dir);
}
END_TEST

/* bench-decode: one CSV row per (variant, context) with the cache bytes the
 * decoder held and the parameter bytes a step reads, against hand
 * formulas; bad lists are one-line errors. */
START_TEST(bench_decode_writes_a_table_and_csv)
{
    char *dir = al_test_tmpdir();
    char *cfg = al_test_write(dir, "c.yaml",
                              "data: {path: /nonexistent}\n"
                              "model: {n_layer: 2, d_model: 32, n_head: 4, d_head: 8}\n");
    char args[4400], *out, path[4200];
    snprintf(args, sizeof args, "bench-decode %s --contexts 16,40 --tokens 4 --kv-dtype bf16 "
             "--variants 'mqa; gqa n_kv_head=2; mla d_latent=8 d_rope=4' --out %s/b/d.csv "
             "--read-mib 8", cfg, dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    ck_assert_msg(strstr(out, "tokens_per_s"), "%s", out);
    free(out);
    snprintf(path, sizeof path, "%s/b/d.csv", dir);
    char *csv;
    size_t n;
    al_err e;
    ck_assert_int_eq(al_read_file(path, &csv, &n, &e), 0);
    /* bf16, 2 layers: mqa 2*2*8*2 = 64 B/token, gqa 2*2*16*2 = 128, mla 2*12*2 = 48.
     * Weights, 4 B per parameter: tok_emb 256*32 + final norm 32 + per layer
     * two norms 64, MLP 2*128*32 and attention: mqa wq, wo 32*32, wk, wv 8*32
     * (29856 parameters); gqa wk, wv 16*32 (30880); mla wq, wo 32*32, wqr
     * 16*32, wdkv 8*32, kv_norm 8, wkr 4*32, wuk, wuv 32*8 (31664). */
    static const char *const want[] = {
        "\"mqa\",16,bf16,4,", ",64,1024,119424,1,1,", "\"mqa\",40,bf16,4,", ",64,2560,119424,1,1,",
        "\"gqa n_kv_head=2\",16,bf16,4,", ",128,2048,123520,1,1,", "\"gqa n_kv_head=2\",40,",
        ",128,5120,123520,1,1,", "\"mla d_latent=8 d_rope=4\",16,", ",48,768,126656,1,1,",
        "\"mla d_latent=8 d_rope=4\",40,", ",48,1920,126656,1,1,",
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        ck_assert_msg(strstr(csv, want[i]), "'%s' not in\n%s", want[i], csv);
    free(csv);
    /* the bound: a step at context C reads C cached rows and every weight
     * once (batch 1); bound = bandwidth / those bytes; the fraction is the
     * measured speed over it */
    al_csv t;
    ck_assert_msg(al_csv_read(path, &t, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(t.n_rows, 6);
    for (int r = 0; r < t.n_rows; r++) {
        double C = atof(al_csv_cell(&t, r, "context")), kv = atof(al_csv_cell(&t, r, "kv_bytes_per_token"));
        double w = atof(al_csv_cell(&t, r, "weight_bytes")), read = atof(al_csv_cell(&t, r, "decode_bytes_per_token"));
        double bw = atof(al_csv_cell(&t, r, "read_bandwidth")), bound = atof(al_csv_cell(&t, r, "bound_tokens_per_s"));
        double tps = atof(al_csv_cell(&t, r, "tokens_per_s")), frac = atof(al_csv_cell(&t, r, "bound_fraction"));
        ck_assert_msg(read == C * kv + w, "row %d: read %.0f, want %.0f", r, read, C * kv + w);
        ck_assert_msg(bw > 1e8 && fabs(bound - bw / read) <= 0.05 + 1e-9 * bound, "row %d: %g %g", r, bound, bw / read);
        ck_assert_msg(fabs(frac - tps / bound) <= 1e-4 + 1e-3 * frac, "row %d: %g vs %g", r, frac, tps / bound);
    }
    al_csv_free(&t);
    /* a batch: each sequence holds its own cache, the row reports one */
    snprintf(args, sizeof args, "bench-decode %s --contexts 40 --tokens 4 --kv-dtype bf16 "
             "--variants mqa --batch 3 --threads 2 --out %s/b/d.csv --read-mib 8", cfg, dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    free(out);
    ck_assert_int_eq(al_read_file(path, &csv, &n, &e), 0);
    ck_assert_msg(strstr(csv, ",64,2560,119424,3,2,"), "%s", csv);
    free(csv);
    snprintf(args, sizeof args, "bench-decode %s --contexts 16,x", cfg);
    ck_assert_int_eq(al_test_attnlab(args, &out), 2);
    ck_assert_msg(strstr(out, "--contexts") && strchr(out, '\n') == out + strlen(out) - 1,
                  "%s", out);
    free(out);
    snprintf(args, sizeof args, "bench-decode %s --variants 'gqa n_kv_head' --out %s/x.csv",
             cfg, dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 2);
    ck_assert_msg(strstr(out, "'n_kv_head' is not key=value"), "%s", out);
    free(out);
    snprintf(args, sizeof args, "bench-decode %s --variants 'gqa n_kv_head=3' --out %s/x.csv",
             cfg, dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 2);
    ck_assert_msg(strstr(out, "must divide"), "%s", out);
    free(out), free(cfg), free(dir);
}
END_TEST

/* ------------------------------------------------------------ attnlab generate */

/* One checkpoint for the generate tests, trained once by `attnlab train`
 * (an unchecked fixture runs in the runner's process, before the forks):
 * mqa overfit on "hello world! " repeated. */
static char *ck_dir, *ck_cfg, ck_path[4200];

static void train_checkpoint(void)
{
    ck_dir = al_test_tmpdir();
    char text[5201], yaml[8192], args[8400], *out;
    for (int i = 0; i < 5200; i++) text[i] = period[i % 13];
    text[5200] = 0;
    char *data = al_test_write(ck_dir, "d.txt", text);
    snprintf(yaml, sizeof yaml,
             "data: {source: text, path: %s}\n"
             "model: {n_layer: 1, d_model: 32, n_head: 4, d_head: 8, seq_len: 24,\n"
             "        attention: {variant: mqa}}\n"
             "train: {steps: 150, batch_size: 8, lr: 3e-3, min_lr: 3e-3, warmup_steps: 0,\n"
             "        weight_decay: 0, eval_every: 150, eval_batches: 2, threads: 1}\n", data);
    ck_cfg = al_test_write(ck_dir, "t.yaml", yaml);
    snprintf(args, sizeof args, "train %s --out %s/run", ck_cfg, ck_dir);
    int rc = al_test_attnlab(args, &out);
    if (rc != 0) fprintf(stderr, "train failed (%d): %s\n", rc, out);
    free(out), free(data);
    snprintf(ck_path, sizeof ck_path, "%s/run/model.safetensors", ck_dir);
}

static void drop_checkpoint(void)
{
    free(ck_cfg), free(ck_dir);
}

/* Runs `attnlab generate CHECKPOINT ARGS` with standard error to a file:
 * *out holds standard output alone, *err the error file. */
static int generate(const char *ckpt, const char *args, char **out, char **err)
{
    char errpath[4300];
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", ck_dir);
    size_t len = strlen(al_test_binary()) + strlen(ckpt) + strlen(args) + strlen(errpath) + 32;
    char *cmd = malloc(len);
    snprintf(cmd, len, "{ %s generate %s %s 2>%s; }", al_test_binary(), ckpt, args, errpath);
    int rc = al_test_run(cmd, out);
    free(cmd);
    size_t n;
    al_err e;
    if (al_read_file(errpath, err, &n, &e) != 0) *err = strdup("");
    return rc;
}

/* The number after `key` in text, or -1. */
static long number_after(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? atol(p + strlen(key)) : -1;
}

START_TEST(generate_streams_only_the_generated_bytes)
{
    char *out, *err, want[64];
    ck_assert_int_eq(generate(ck_path, "--prompt 'hello w' --tokens 17 --temperature 0", &out,
                              &err), 0);
    continuation(want, 7, 17);
    ck_assert_msg(!strcmp(out, want), "stdout '%s', want '%s' (stderr: %s)", out, want, err);
    free(out), free(err);
    char *pf = al_test_write(ck_dir, "prompt.txt", "hello w"), args[4400];
    snprintf(args, sizeof args, "--prompt-file %s --tokens 17 --temperature 0 --top-k 3", pf);
    ck_assert_int_eq(generate(ck_path, args, &out, &err), 0);
    ck_assert_msg(!strcmp(out, want), "stdout '%s'", out);
    free(out), free(err), free(pf);
    /* sampling: the same seed gives the same bytes */
    char *again;
    ck_assert_int_eq(generate(ck_path, "--prompt h --tokens 20 --temperature 1.5 --seed 4",
                              &out, &err), 0);
    free(err);
    ck_assert_int_eq(generate(ck_path, "--prompt h --tokens 20 --temperature 1.5 --seed 4",
                              &again, &err), 0);
    ck_assert_uint_eq(strlen(out), 20);
    ck_assert_str_eq(out, again);
    free(out), free(again), free(err);
}
END_TEST

/* --stats measures the bytes its caches hold; they equal `attnlab kv`'s
 * figure for the same config and dtype. */
/* Generate's batch output: the text after "==> sample N <==\n" up to the
 * newline that ends it (samples here hold no newline), or NULL. */
static char *sample_text(const char *out, int n)
{
    char head[64];
    snprintf(head, sizeof head, "==> sample %d <==\n", n);
    const char *p = strstr(out, head);
    if (!p) return NULL;
    p += strlen(head);
    const char *end = strchr(p, '\n');
    return strndup(p, end ? (size_t)(end - p) : strlen(p));
}

/* Samples of one prompt decoded together are the runs of their own seeds
 * (seed + N); prompts of different lengths decoded together are their
 * own runs; --out writes the same bytes into files. */
START_TEST(generate_decodes_samples_and_prompts_in_a_batch)
{
    char *out, *err, *alone, args[4400];
    ck_assert_int_eq(generate(ck_path, "--prompt h --tokens 20 --temperature 1.5 --seed 4 "
                              "--batch 3 --threads 2", &out, &err), 0);
    for (int n = 0; n < 3; n++) {
        char *got = sample_text(out, n), *e2;
        ck_assert_msg(got != NULL, "no sample %d in '%s'", n, out);
        snprintf(args, sizeof args, "--prompt h --tokens 20 --temperature 1.5 --seed %d", 4 + n);
        ck_assert_int_eq(generate(ck_path, args, &alone, &e2), 0);
        ck_assert_msg(!strcmp(got, alone), "sample %d '%s', alone '%s'", n, got, alone);
        free(got), free(alone), free(e2);
    }
    free(out), free(err);
    char *pf = al_test_write(ck_dir, "prompts.txt", "hello w\nh\r\nworld! hel\n"), want[64];
    snprintf(args, sizeof args, "--prompts-file %s --tokens 9 --temperature 0", pf);
    ck_assert_int_eq(generate(ck_path, args, &out, &err), 0);
    static const int plen[] = {7, 1, 10};   /* offsets into the overfit period */
    static const int start[] = {0, 0, 6};
    for (int n = 0; n < 3; n++) {
        char *got = sample_text(out, n);
        continuation(want, start[n] + plen[n], 9);
        ck_assert_msg(got && !strcmp(got, want), "prompt %d: '%s', want '%s'\n%s", n, got, want,
                      out);
        free(got);
    }
    free(out), free(err);
    snprintf(args, sizeof args, "--prompts-file %s --tokens 9 --temperature 0 --out %s/gen", pf,
             ck_dir);
    ck_assert_int_eq(generate(ck_path, args, &out, &err), 0);
    ck_assert_str_eq(out, "");
    ck_assert_msg(strstr(err, "wrote 3 samples"), "%s", err);
    free(out), free(err);
    for (int n = 0; n < 3; n++) {
        char path[4400], *text;
        size_t len;
        al_err e;
        snprintf(path, sizeof path, "%s/gen/sample-%03d.txt", ck_dir, n);
        ck_assert_int_eq(al_read_file(path, &text, &len, &e), 0);
        continuation(want, start[n] + plen[n], 9);
        ck_assert_uint_eq(len, 9);
        ck_assert(!memcmp(text, want, 9));
        free(text);
    }
    free(pf);
}
END_TEST

START_TEST(generate_stats_match_attnlab_kv)
{
    static const char *const dtypes[] = {"f32", "bf16", "f16"};
    for (int i = 0; i < 3; i++) {
        char args[4400], *out, *err, *kv;
        snprintf(args, sizeof args, "--prompt hello --tokens 5 --kv-dtype %s --stats", dtypes[i]);
        ck_assert_int_eq(generate(ck_path, args, &out, &err), 0);
        ck_assert_uint_eq(strlen(out), 5);
        long got = number_after(err, "kv_bytes_per_token=");
        snprintf(args, sizeof args, "kv %s --set model.kv_dtype=%s", ck_cfg, dtypes[i]);
        ck_assert_int_eq(al_test_attnlab(args, &kv), 0);
        ck_assert_ptr_nonnull(strstr(kv, "kv_dtype: "));
        long want = number_after(strstr(kv, "kv_dtype: "), "kv_bytes_per_token=");
        /* by hand: 1 layer, mqa: 2 * 8 floats per token */
        ck_assert_int_eq(want, 16 * (i ? 2 : 4));
        ck_assert_msg(got == want, "%s: generate measured %ld, kv says %ld\n%s", dtypes[i], got,
                      want, err);
        ck_assert_int_eq(number_after(err, "kv_cache_bytes="), 24 * want);   /* seq_len 24 */
        free(out), free(err), free(kv);
    }
}
END_TEST

/* With a batch the bytes --stats prints are per sequence, and it says so
 * with the whole batch's bytes; a batch of one says nothing more. */
START_TEST(generate_stats_say_when_bytes_are_per_sequence)
{
    char *out, *err;
    ck_assert_int_eq(generate(ck_path, "--prompt hello --tokens 5 --batch 3 --stats", &out, &err),
                     0);
    long one = number_after(err, "kv_cache_bytes=");
    ck_assert_int_eq(one, 24 * 16 * 4);   /* seq_len 24, mqa's 2 * 8 f32 per token */
    char want[128];
    snprintf(want, sizeof want, "(each per sequence; the batch of 3 holds %ld bytes)", 3 * one);
    ck_assert_msg(strstr(err, want), "%s", err);
    free(out), free(err);
    ck_assert_int_eq(generate(ck_path, "--prompt hello --tokens 5 --stats", &out, &err), 0);
    ck_assert_ptr_null(strstr(err, "per sequence"));
    free(out), free(err);
}
END_TEST

/* Bad input: one line on standard error, exit 2, nothing on standard output. */
static void expect_cli_error(const char *ckpt, const char *args, const char *what)
{
    char *out, *err;
    int rc = generate(ckpt, args, &out, &err);
    ck_assert_msg(rc == 2, "'%s' gave %d: %s", args, rc, err);
    ck_assert_msg(strstr(err, what), "'%s': '%s' lacks '%s'", args, err, what);
    ck_assert_msg(strlen(err) > 0 && strchr(err, '\n') == err + strlen(err) - 1,
                  "'%s': not one line: %s", args, err);
    ck_assert_msg(!strcmp(out, ""), "'%s' wrote '%s'", args, out);
    free(out), free(err);
}

START_TEST(generate_refuses_bad_input)
{
    char missing[4300], corrupt[4300], truncated[4300];
    snprintf(missing, sizeof missing, "%s/nope.safetensors", ck_dir);
    expect_cli_error(missing, "--prompt hi", "nope.safetensors");
    char *junk = al_test_write(ck_dir, "junk.safetensors", "this is not a checkpoint");
    snprintf(corrupt, sizeof corrupt, "%s", junk);
    expect_cli_error(corrupt, "--prompt hi", "junk.safetensors");
    char *data;
    size_t n;
    al_err e;
    ck_assert_int_eq(al_read_file(ck_path, &data, &n, &e), 0);
    snprintf(truncated, sizeof truncated, "%s/cut.safetensors", ck_dir);
    ck_assert_int_eq(al_write_atomic(truncated, data, n / 2, &e), 0);
    expect_cli_error(truncated, "--prompt hi", "cut.safetensors");
    expect_cli_error(ck_path, "--prompt ''", "the prompt is empty");
    expect_cli_error(ck_path, "--prompt 'hello world, hello world, hello'", "longer than the context (24)");
    expect_cli_error(ck_path, "--prompt hello --context 3", "longer than the context (3)");
    expect_cli_error(ck_path, "--prompt hello --tokens 30", "--context 35");
    expect_cli_error(ck_path, "--prompt hi --temperature -1", "--temperature");
    expect_cli_error(ck_path, "--prompt hi --temperature abc", "--temperature");
    expect_cli_error(ck_path, "--prompt hi --temperature nan", "--temperature");
    expect_cli_error(ck_path, "--prompt hi --top-k -2", "--top-k");
    expect_cli_error(ck_path, "--prompt hi --kv-dtype f8", "--kv-dtype");
    expect_cli_error(ck_path, "", "--prompt");
    expect_cli_error(ck_path, "--prompt hi --prompt-file x", "exactly one");
    expect_cli_error(ck_path, "--prompt-file /nonexistent/p.txt", "/nonexistent/p.txt");
    expect_cli_error(ck_path, "--prompt hi --frobnicate 1", "--frobnicate");
    expect_cli_error(ck_path, "--prompt hi --batch 0", "--batch");
    char *two = al_test_write(ck_dir, "two.txt", "hi\n\nthere\n"), args[4400];
    snprintf(args, sizeof args, "--prompts-file %s", two);
    expect_cli_error(ck_path, args, "two.txt:2: empty line");
    char *three = al_test_write(ck_dir, "three.txt", "a\nb\nc\n");
    snprintf(args, sizeof args, "--prompts-file %s --batch 2", three);
    expect_cli_error(ck_path, args, "does not match the 3 prompts");
    free(two), free(three);
    free(data), free(junk);
}
END_TEST

Suite *generate_suite(void)
{
    Suite *s = suite_create("generate");
    TCase *tc = tcase_create("generate");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, greedy_generation_reproduces_an_overfit_string);
    tcase_add_test(tc, generate_refuses_bad_options_with_one_line);
    tcase_add_test(tc, kv_reports_the_configured_kv_dtype);
    tcase_add_test(tc, bench_decode_writes_a_table_and_csv);
    suite_add_tcase(s, tc);
    TCase *cli = tcase_create("generate_cli");
    tcase_set_timeout(cli, 300);
    tcase_add_unchecked_fixture(cli, train_checkpoint, drop_checkpoint);
    tcase_add_test(cli, generate_streams_only_the_generated_bytes);
    tcase_add_test(cli, generate_stats_match_attnlab_kv);
    tcase_add_test(cli, generate_stats_say_when_bytes_are_per_sequence);
    tcase_add_test(cli, generate_decodes_samples_and_prompts_in_a_batch);
    tcase_add_test(cli, generate_refuses_bad_input);
    suite_add_tcase(s, cli);
    return s;
}
