/*
 * test_kv_share.c - model.kv_share: cross-layer K/V sharing (CLA). The
 * consumers' tensors (no K/V projections) and the parameter count against
 * one written out here, also under match_params; refusals naming the
 * variant and the key; gradients through shared groups (a shorter last
 * group, gqa, local with sinks) against finite differences; cached decode
 * against the full forward past one cache tile for mqa share 2 and local
 * share 2 with sinks, single and batched; measured cache bytes against the
 * producers-only formula at every storage dtype (int8, int4 too); `attnlab kv` halving a 4-layer mqa;
 * generate --stats; checkpoints, resume, a sweep over the key; PyTorch
 * (scripts/attnlab_torch.py) against attnlab's score and gradients.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "al_checkpoint.h"
#include "al_config_io.h"
#include "al_decode.h"
#include "al_registry.h"
#include "al_test.h"
#include "al_test_model.h"
#include "al_train.h"

enum { D = 16, H = 4, DH = 4 };
enum { SET_WINDOW, SET_N_KV_HEAD, SET_SINKS };   /* local's settings */

/* ------------------------------------------------------------ helpers */

static const al_variant *V(const char *name)
{
    const al_variant *v = al_variant_find(name);
    ck_assert_ptr_nonnull(v);
    return v;
}

/* n_layer layers of `name` sharing K/V in groups of S. */
static al_model_config shared(const char *name, int n_layer, int S, int seq_len, int vocab)
{
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, V(name), n_layer, D, H, DH, seq_len, vocab), 0);
    c.kv_share = S;
    return c;
}

/* local with window 5, 2 K/V heads and 2 sinks. */
static al_model_config shared_local(int n_layer, int S, int seq_len, int vocab)
{
    al_model_config c = shared("local", n_layer, S, seq_len, vocab);
    c.attn_set[SET_WINDOW] = 5, c.attn_set[SET_N_KV_HEAD] = 2, c.attn_set[SET_SINKS] = 2;
    return c;
}

static void random_tokens(int *x, int n, int V, uint64_t seed)
{
    al_rng r;
    al_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) x[i] = (int)al_rng_below(&r, V);
}

static void scale_weights(al_model *m, float s)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].ndim == 2)
            for (size_t j = 0; j < m->tensors[i].numel; j++)
                m->params[m->tensors[i].offset + j] *= s;
}

static int has_tensor(const al_model *m, const char *name)
{
    return al_model_tensor(m, name) != NULL;
}

static int load_text(const char *text, al_config *c, al_err *e)
{
    char *dir = al_test_tmpdir(), *path = al_test_write(dir, "exp.yaml", text);
    e->msg[0] = 0;
    int rc = al_config_load(path, NULL, 0, c, e);
    unlink(path);
    rmdir(dir);
    free(path), free(dir);
    return rc;
}

/* ------------------------------------------------------------ parameters */

/* A consumer has wq, wo; its group's first layer wq wk wv wo. 3 layers in
 * groups of 2: [0, 1], [2] (the last group shorter: layer 2 projects its
 * own). The count drops by the consumers' wk, wv exactly. */
START_TEST(consumers_have_no_kv_projections_and_the_count_drops_by_them)
{
    al_model_config plain = shared("gqa", 3, 1, 8, 256), c = plain;
    plain.attn_set[0] = c.attn_set[0] = 2;   /* n_kv_head */
    c.kv_share = 2;
    al_model m;
    al_err e;
    ck_assert_msg(al_model_init(&m, &c, &e) == 0, "%s", e.msg);
    static const char *const has[] = {"blocks.0.attn.wk.weight", "blocks.0.attn.wv.weight",
                                      "blocks.1.attn.wq.weight", "blocks.1.attn.wo.weight",
                                      "blocks.2.attn.wk.weight", "blocks.2.attn.wv.weight"};
    for (int i = 0; i < 6; i++) ck_assert_msg(has_tensor(&m, has[i]), "no %s", has[i]);
    ck_assert(!has_tensor(&m, "blocks.1.attn.wk.weight"));
    ck_assert(!has_tensor(&m, "blocks.1.attn.wv.weight"));
    ck_assert_int_eq(m.layers[1].kv_src, 0);
    ck_assert_int_eq(m.layers[2].kv_src, 2);
    size_t wkv = 2 * (size_t)(2 * DH) * D;   /* wk and wv of 2 K/V heads */
    ck_assert_uint_eq(al_model_param_count(&plain, &e), m.n_params + wkv);
    /* the cache: layers 0 and 2 only */
    ck_assert_uint_eq(al_model_kv_elems_per_token(&c), 2 * (2 * 2 * DH));
    ck_assert_uint_eq(al_model_layer_kv_bytes(&c, 1, AL_KV_F32, 8), 0);
    al_model_free(&m);
}
END_TEST

/* match_params counts the shared model: mqa share 2 matched to mha needs a
 * wider MLP than plain mqa matched to mha, and both land near mha's count. */
START_TEST(match_params_sees_the_shared_count)
{
    const char *fmt = "model:\n  n_layer: 4\n  d_model: 64\n  n_head: 4\n  vocab_size: 256\n"
                      "  attention: {variant: mqa}\n  kv_share: %d\n"
                      "  match_params: {to: {variant: mha}, by: d_ff}\n";
    char text[512];
    al_config a, b;
    al_err e;
    snprintf(text, sizeof text, fmt, 1);
    ck_assert_msg(load_text(text, &a, &e) == 0, "%s", e.msg);
    snprintf(text, sizeof text, fmt, 2);
    ck_assert_msg(load_text(text, &b, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(b.model.kv_share, 2);
    ck_assert_uint_eq(a.model.match.params_to, b.model.match.params_to);   /* unshared mha */
    ck_assert_int_gt(b.model.d_ff, a.model.d_ff);
    ck_assert_uint_eq(b.model.match.params, al_model_param_count(&b.model, &e));
    double gap = fabs((double)b.model.match.params - (double)b.model.match.params_to);
    ck_assert_msg(gap <= 2.0 * 8 * 64 * 4, "gap %g", gap);   /* within one d_ff step */
}
END_TEST

/* ------------------------------------------------------------ refusals */

static void expect_refusal(const char *text, const char *want)
{
    al_config c;
    al_err e;
    ck_assert_int_eq(load_text(text, &c, &e), -1);
    ck_assert_msg(strstr(e.msg, want), "'%s' not in: %s", want, e.msg);
    ck_assert_ptr_null(strchr(e.msg, '\n'));
}

START_TEST(a_variant_that_cannot_share_is_refused_in_one_line)
{
    expect_refusal("model:\n  n_layer: 4\n  attention: {variant: mla, d_latent: 16, d_rope: 8}\n"
                   "  kv_share: 2\n",
                   "error: model.kv_share: variant 'mla' cannot share K/V across layers "
                   "(model.kv_share 2)");
    expect_refusal("model:\n  n_layer: 4\n  attention: {variant: gla, d_latent: 8, d_rope: 4, "
                   "n_latent_head: 2}\n  kv_share: 2\n", "variant 'gla' cannot share");
    expect_refusal("model:\n  n_layer: 4\n  layer_attention: [{variant: mqa}, {variant: mha}]\n"
                   "  kv_share: 2\n",
                   "error: model.kv_share: layers 0 and 1 share K/V (model.kv_share 2) but "
                   "their attentions differ ('mqa' and 'mha'");
    expect_refusal("model:\n  n_layer: 4\n  layer_attention:\n"
                   "    - {variant: gqa, n_kv_head: 2}\n    - {variant: gqa, n_kv_head: 1}\n"
                   "  kv_share: 2\n", "layers 0 and 1 share K/V");
    expect_refusal("model:\n  kv_share: 0\n", "'model.kv_share' (0) must be positive");
    /* the same stack with groups that keep to one attention is fine */
    al_config c;
    al_err e;
    ck_assert_msg(load_text("model:\n  n_layer: 4\n  layer_attention: [{variant: mqa}, "
                            "{variant: mqa}, {variant: mha}, {variant: mha}]\n  kv_share: 2\n",
                            &c, &e) == 0, "%s", e.msg);
    /* and a model built in code hears the same at init */
    al_model_config mc = shared("tpa", 2, 2, 8, 256);
    al_model m;
    mc.attn_set[0] = 2, mc.attn_set[1] = 2;
    if (al_model_init(&m, &mc, &e) == 0) al_model_free(&m), ck_abort_msg("tpa shared");
    ck_assert_msg(strstr(e.msg, "model.kv_share: variant 'tpa' cannot share"), "%s", e.msg);
}
END_TEST

/* A version-3 table (a plugin built before sharing) registers without
 * the share_* members, and a kv_share over it is refused naming it; the
 * same table at version 4 shares. */
START_TEST(a_version_3_table_cannot_share_and_is_refused_naming_it)
{
    al_err e;
    int before = al_variant_count();
    void *old = al_test_old_table(3, "mqa_v3");
    ck_assert_int_eq(al_variant_register(old, "v3.so", &e), 0);
    const al_variant *got = al_variant_find("mqa_v3");
    ck_assert_ptr_nonnull(got);
    ck_assert_ptr_null(got->share);
    ck_assert_ptr_nonnull(al_variant_find("mqa")->share);
    al_model_config c = shared("mqa_v3", 2, 2, 8, 256);
    snprintf(c.variant, sizeof c.variant, "mqa_v3");
    al_model m;
    if (al_model_init(&m, &c, &e) == 0) al_model_free(&m), ck_abort_msg("a v3 table shared");
    ck_assert_str_eq(e.msg, "model.kv_share: variant 'mqa_v3' cannot share K/V across layers "
                            "(model.kv_share 2); the GQA family (mha, mqa, gqa) and local can");
    c.kv_share = 1;   /* unshared, it builds as ever */
    ck_assert_msg(al_model_init(&m, &c, &e) == 0, "%s", e.msg);
    al_model_free(&m);
    al_variant_truncate(before);
    free(old);
}
END_TEST

/* ------------------------------------------------------------ gradients */

static void check_grads(al_model_config c, const char *what)
{
    al_model m;
    al_err e;
    ck_assert_msg(al_model_init(&m, &c, &e) == 0, "%s", e.msg);
    al_model_init_weights(&m, 7);
    scale_weights(&m, 20.0f);
    int B = 2, T = 8, in[16], tgt[16];
    random_tokens(in, 16, 11, 1);
    random_tokens(tgt, 16, 11, 2);
    ck_assert_int_eq(al_model_reserve(&m, B, T, &e), 0);
    al_model_forward(&m, in, tgt, NULL, B, T);
    al_model_backward(&m);
    al_rng r;
    al_rng_seed(&r, 3);
    for (int t = 0; t < m.n_tensors; t++) {
        const al_tensor *ts = &m.tensors[t];
        double err = al_check_model_fd(&m, ts, in, tgt, NULL, B, T, 16, &r);
        ck_assert_msg(err < 2e-2, "%s: %s: grad rel err %g", what, ts->name, err);
    }
    al_model_free(&m);
}

/* The producers' wk, wv carry their consumers' gradients: a miss there
 * fails the check on blocks.0.attn.wk. */
START_TEST(shared_gradients_match_finite_differences)
{
    check_grads(shared("mqa", 3, 2, 8, 11), "mqa share 2 over 3 layers");
    al_model_config g = shared("gqa", 4, 3, 8, 11);
    g.attn_set[0] = 2;
    check_grads(g, "gqa-kv2 share 3 over 4 layers");
    check_grads(shared_local(4, 2, 8, 11), "local w5 s2 share 2");
}
END_TEST

/* ------------------------------------------------------------ decode */

enum { N_LONG = 2 * AL_KV_TILE + 3, VOC = 64, SEQ = 16 };

static void full_logits(al_model *m, const int *tok, int n, float *out)
{
    al_err e;
    ck_assert_int_eq(al_model_reserve(m, 1, n, &e), 0);
    al_model_forward(m, tok, NULL, NULL, 1, n);
    memcpy(out, m->logits, (size_t)n * VOC * sizeof(float));
}

static double worst_diff(const float *a, const float *b, int n, double *amax)
{
    double w = 0;
    for (int i = 0; i < n; i++) {
        w = fmax(w, fabs((double)a[i] - b[i]));
        *amax = fmax(*amax, fabs((double)b[i]));
    }
    return w;
}

/* Cache bytes of the producers alone, rows each at context n. */
static size_t producer_bytes(const al_model_config *c, int n)
{
    size_t want = 0;
    for (int l = 0; l < c->n_layer; l += c->kv_share) {
        al_attn_shape s;
        al_config_layer_shape(c, l, &s);
        const al_variant *v = al_config_layer_attn(c, l).attn;
        int rows = v->decode->kv_rows(al_test_ctx_of(v, &s), n);
        want += (size_t)rows * v->decode->kv_elems(al_test_ctx_of(v, &s)) * sizeof(float);
    }
    return want;
}

/* Prefill SEQ tokens, decode to N_LONG: every position's logits as the
 * full forward's; then two sequences batched, each as its own forward. */
static void check_long_decode(al_model_config c, const char *what)
{
    enum { N = N_LONG };
    al_model m;
    al_err e;
    ck_assert_msg(al_model_init(&m, &c, &e) == 0, "%s", e.msg);
    al_model_init_weights(&m, 29);
    scale_weights(&m, 8.0f);
    int *tok = malloc(2 * N * sizeof(int));
    float *full = malloc((size_t)2 * N * VOC * sizeof(float));
    random_tokens(tok, 2 * N, VOC, 8);
    full_logits(&m, tok, N, full);
    full_logits(&m, tok + N, N, full + (size_t)N * VOC);
    al_decoder d;
    ck_assert_msg(al_decoder_init(&d, &m, N, AL_KV_F32, &e) == 0, "%s", e.msg);
    ck_assert_msg(al_decoder_prefill(&d, tok, SEQ, &e) == 0, "%s", e.msg);
    double worst = 0, amax = 0;
    for (int t = SEQ; t < N; t++)
        worst = fmax(worst, worst_diff(al_decoder_step(&d, tok[t]), full + (size_t)t * VOC, VOC,
                                       &amax));
    ck_assert_msg(worst < 1e-4, "%s: max |decode - forward| over %d positions = %g", what, N,
                  worst);
    ck_assert_msg(amax > 1.0, "logits too small (%g) for the test to bite", amax);
    ck_assert_uint_eq(al_decoder_cache_bytes(&d), producer_bytes(&c, N));
    ck_assert_uint_eq(al_decoder_cache_bytes(&d), al_model_kv_bytes_at(&c, AL_KV_F32, N));
    al_decoder_free(&d);
    /* batched: two sequences at different positions */
    ck_assert_int_eq(al_decoder_init_batch(&d, &m, 2, N, AL_KV_F32, &e), 0);
    ck_assert_int_eq(al_decoder_prefill_seq(&d, 0, tok, SEQ, &e), 0);
    ck_assert_int_eq(al_decoder_prefill_seq(&d, 1, tok + N, SEQ + 5, &e), 0);
    worst = 0;
    for (int t = SEQ; t + 5 < N; t++) {
        int two[2] = {tok[t], tok[N + t + 5]};
        const float *lg = al_decoder_step_batch(&d, two);
        worst = fmax(worst, worst_diff(lg, full + (size_t)t * VOC, VOC, &amax));
        worst = fmax(worst, worst_diff(lg + VOC, full + (size_t)(N + t + 5) * VOC, VOC, &amax));
    }
    ck_assert_msg(worst < 1e-4, "%s: batched: max |decode - forward| = %g", what, worst);
    al_decoder_free(&d);
    al_model_free(&m);
    free(tok), free(full);
}

START_TEST(cached_decode_of_mqa_share_2_equals_the_full_forward_past_a_tile)
{
    check_long_decode(shared("mqa", 4, 2, SEQ, VOC), "mqa share 2");
    check_long_decode(shared("mqa", 3, 2, SEQ, VOC), "mqa share 2, 3 layers");
}
END_TEST

START_TEST(cached_decode_of_local_share_2_with_sinks_equals_the_full_forward)
{
    al_model_config c = shared_local(4, 2, SEQ, VOC);
    ck_assert_int_eq(al_model_layer_kv_rows(&c, 0, N_LONG), 7);   /* 2 sinks + window 5 */
    ck_assert_uint_eq(al_model_kv_bytes_at(&c, AL_KV_F32, N_LONG), 2 * 7 * (2 * 2 * DH) * 4);
    check_long_decode(c, "local share 2");
}
END_TEST

/* Every storage dtype, int8 and int4 (quantized groups) included: the
 * decoder allocates the producers' caches only, as the formula counts
 * them, and the consumers still follow the full forward closely. */
START_TEST(every_cache_dtype_holds_the_producers_only)
{
    enum { N = AL_KV_TILE + 40 };
    al_model_config c = shared("mqa", 4, 2, SEQ, VOC);
    al_model m;
    al_err e;
    ck_assert_int_eq(al_model_init(&m, &c, &e), 0);
    al_model_init_weights(&m, 3);
    scale_weights(&m, 8.0f);
    int *tok = malloc(N * sizeof(int));
    float *full = malloc((size_t)N * VOC * sizeof(float));
    random_tokens(tok, N, VOC, 4);
    full_logits(&m, tok, N, full);
    for (int dt = 0; dt < AL_KV_NALL; dt++) {
        al_decoder d;
        ck_assert_msg(al_decoder_init(&d, &m, N, dt, &e) == 0, "%s", e.msg);
        ck_assert_uint_eq(al_decoder_cache_bytes(&d), al_model_kv_bytes_at(&c, dt, N));
        c.kv_share = 1;   /* half the plain model's */
        ck_assert_uint_eq(2 * al_decoder_cache_bytes(&d), al_model_kv_bytes_at(&c, dt, N));
        c.kv_share = 2;
        ck_assert_int_eq(al_decoder_prefill(&d, tok, SEQ, &e), 0);
        double worst = 0, amax = 0;
        for (int t = SEQ; t < N; t++)
            worst = fmax(worst, worst_diff(al_decoder_step(&d, tok[t]), full + (size_t)t * VOC,
                                           VOC, &amax));
        /* measured: f32 ~1e-6, bf16, f16, int8 ~1e-3, int4 ~0.06 of logits up to ~3 */
        double tol = dt == AL_KV_F32 ? 1e-4 : dt == AL_KV_INT4 ? 0.2 : 1e-2;
        ck_assert_msg(worst < tol, "%s: %g", al_kv_dtype_name(dt), worst);
        ck_assert_msg(amax > 1.0, "logits too small (%g) for the test to bite", amax);
        al_decoder_free(&d);
    }
    al_model_free(&m);
    free(tok), free(full);
}
END_TEST

/* generate --stats measures the producers' caches. */
START_TEST(generate_stats_measure_the_shared_cache)
{
    al_model_config c = shared("mqa", 4, 2, SEQ, 256);
    al_model m;
    al_err e;
    ck_assert_int_eq(al_model_init(&m, &c, &e), 0);
    al_model_init_weights(&m, 5);
    char *out, *err;
    size_t no, ne;
    FILE *fo = open_memstream(&out, &no), *fe = open_memstream(&err, &ne);
    al_generate_opts o = {.prompt = (const unsigned char *)"abc", .prompt_len = 3,
                          .tokens = 20, .seed = 1, .context = 1024, .dtype = -1, .stats = 1};
    al_generate_stats st;
    ck_assert_msg(al_generate(&m, &o, fo, fe, &st, &e) == 0, "%s", e.msg);
    fclose(fo), fclose(fe);
    /* 2 producers of one K/V head: 1024 rows of 2 * 4 floats each */
    ck_assert_uint_eq(st.cache_bytes, 2 * 1024 * 2 * DH * 4);
    ck_assert_uint_eq(st.kv_bytes_per_token, 2 * 2 * DH * 4);
    ck_assert_msg(strstr(err, "kv_cache_bytes=65536 kv_bytes_per_token=64"), "%s", err);
    free(out), free(err);
    al_model_free(&m);
}
END_TEST

/* ------------------------------------------------------------ kv */

static size_t kv_field(const char *out, const char *key)
{
    const char *p = strstr(out, key);
    ck_assert_msg(p != NULL, "no '%s' in:\n%s", key, out);
    return (size_t)strtoull(p + strlen(key), NULL, 10);
}

/* `attnlab kv`: a 4-layer mqa with kv_share 2 prints half the plain
 * model's bytes, per token and at the context. */
START_TEST(kv_of_mqa_share_2_is_half_the_plain_model)
{
    char *dir = al_test_tmpdir(), args[4200], *out[2];
    for (int s = 0; s < 2; s++) {
        char text[256];
        snprintf(text, sizeof text, "model:\n  n_layer: 4\n  seq_len: 64\n  vocab_size: 256\n"
                 "  attention: {variant: mqa}\n  kv_share: %d\n", s + 1);
        char *path = al_test_write(dir, "kv.yaml", text);
        snprintf(args, sizeof args, "kv %s", path);
        ck_assert_int_eq(al_test_attnlab(args, &out[s]), 0);
        unlink(path);
        free(path);
    }
    ck_assert_msg(strstr(out[1], "variant: mqa-share2\n"), "%s", out[1]);
    ck_assert_msg(strstr(out[1], "kv_layer_1: variant=mqa rows=64 f32=0 bf16=0 f16=0 "
                                 "kv_from=0\n"), "%s", out[1]);
    const char *keys[] = {"kv_bytes_per_token: f32=", "kv_bytes_at_context_64: f32=",
                          "kv_elements_per_token: "};
    for (int k = 0; k < 3; k++) {
        size_t plain = kv_field(out[0], keys[k]), half = kv_field(out[1], keys[k]);
        ck_assert_uint_gt(half, 0);
        ck_assert_uint_eq(2 * half, plain);
    }
    ck_assert_uint_eq(kv_field(out[1], "kv_bytes_at_context_64: f32="), 2 * 64 * 2 * 32 * 4);
    free(out[0]), free(out[1]);
    rmdir(dir);
    free(dir);
}
END_TEST

/* ------------------------------------------------------------ checkpoints */

START_TEST(a_shared_checkpoint_round_trips_and_says_kv_share)
{
    al_model_config c = shared_local(3, 2, 8, 256);
    al_model a, b;
    al_err e;
    long step;
    ck_assert_int_eq(al_model_init(&a, &c, &e), 0);
    al_model_init_weights(&a, 5);
    char *dir = al_test_tmpdir(), path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ck_assert_msg(al_checkpoint_save(path, &a, 3, &e) == 0, "%s", e.msg);
    ck_assert_msg(al_checkpoint_load(path, &b, &step, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(b.cfg.kv_share, 2);
    ck_assert_int_eq(b.layers[1].kv_src, 0);
    ck_assert_uint_eq(a.n_params, b.n_params);
    ck_assert_mem_eq(a.params, b.params, a.n_params * sizeof(float));
    char *json = al_checkpoint_config_json(&b);
    ck_assert_msg(strstr(json, "\"kv_share\":2"), "%s", json);
    free(json);
    al_model_free(&a), al_model_free(&b);
    /* unshared: no key written, as every checkpoint before it */
    c.kv_share = 1;
    ck_assert_int_eq(al_model_init(&a, &c, &e), 0);
    ck_assert_int_eq(al_checkpoint_save(path, &a, 1, &e), 0);
    ck_assert_msg(al_checkpoint_load(path, &b, &step, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(b.cfg.kv_share, 1);
    json = al_checkpoint_config_json(&b);
    ck_assert_msg(!strstr(json, "kv_share"), "%s", json);
    free(json);
    al_model_free(&a), al_model_free(&b);
    unlink(path);
    rmdir(dir);
    free(dir);
}
END_TEST

START_TEST(resume_refuses_a_changed_kv_share)
{
    char *dir = al_test_tmpdir(), text[4001];
    const char *s = "It is a truth universally acknowledged, that a single man in possession ";
    for (int i = 0; i < 4000; i++) text[i] = s[(i * 7 + i / 13) % strlen(s)];
    text[4000] = 0;
    char *data = al_test_write(dir, "data.txt", text);
    al_config c;
    al_config_defaults(&c);
    snprintf(c.data.source, sizeof c.data.source, "text");
    snprintf(c.data.path, sizeof c.data.path, "%s", data);
    c.model = shared("mqa", 4, 2, 16, 256);
    c.train.steps = 12;
    c.train.batch_size = 2;
    c.train.lr = 1e-2;
    c.train.warmup_steps = 2;
    c.train.eval_every = 4;
    c.train.eval_batches = 1;
    c.train.threads = 1;
    al_train_opts o = {.outdir = dir, .stop_after = 4};
    al_train_result r;
    al_err e;
    ck_assert_msg(al_train(&c, &o, &r, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(r.status, AL_TRAIN_STOPPED);
    al_config d = c;
    d.model.kv_share = 4;
    o.resume = 1;
    o.stop_after = 0;
    ck_assert_int_ne(al_train(&d, &o, &r, &e), 0);
    ck_assert_msg(strstr(e.msg, "cannot resume") && strstr(e.msg, "model.kv_share"), "%s",
                  e.msg);
    ck_assert_ptr_null(strchr(e.msg, '\n'));
    ck_assert_msg(al_train(&c, &o, &r, &e) == 0, "%s", e.msg);   /* unchanged, it resumes */
    ck_assert_int_eq(r.status, AL_TRAIN_OK);
    char args[8400], *out;
    snprintf(args, sizeof args, "rm -rf %s", dir);
    ck_assert_int_eq(al_test_run(args, &out), 0);
    free(out), free(data), free(dir);
}
END_TEST

/* ------------------------------------------------------------ sweep */

/* The number in column `col` of the summary row of `trial`. */
static long csv_long(const char *csv, const char *trial, const char *col)
{
    int k = 0;
    const char *p = csv, *nl = strchr(csv, '\n');
    size_t n = strlen(col);
    while (p < nl && !(strncmp(p, col, n) == 0 && (p[n] == ',' || p[n] == '\n'))) {
        p = strchr(p, ',');
        ck_assert_msg(p && p < nl, "no column %s", col);
        p++, k++;
    }
    char head[128];
    snprintf(head, sizeof head, "\n%s,", trial);
    const char *row = strstr(csv, head);
    ck_assert_msg(row != NULL, "no row %s", trial);
    row++;
    for (int i = 0; i < k; i++) row = strchr(row, ',') + 1;
    return strtol(row, NULL, 10);
}

START_TEST(a_sweep_axis_over_kv_share)
{
    const char *data = al_test_corpus();
    char *dir = al_test_tmpdir(), text[2048];
    snprintf(text, sizeof text,
             "data: {source: text, path: %s}\n"
             "model: {n_layer: 2, d_model: 16, n_head: 2, seq_len: 16, "
             "attention: {variant: mqa}}\n"
             "train: {steps: 4, batch_size: 2, eval_every: 4, eval_batches: 1, threads: 1}\n"
             "sweep:\n  grid:\n    model.kv_share: [1, 2]\n", data);
    char *path = al_test_write(dir, "s.yaml", text), args[8400], *out;
    snprintf(args, sizeof args, "sweep %s --out %s/res --jobs 1", path, dir);
    ck_assert_msg(al_test_attnlab(args, &out) == 0, "%s", out);
    free(out);
    char sum[4300], *csv;
    size_t n;
    al_err e;
    snprintf(sum, sizeof sum, "%s/res/summary.csv", dir);
    ck_assert_msg(al_read_file(sum, &csv, &n, &e) == 0, "%s", e.msg);
    ck_assert_msg(strstr(csv, "\nshare2_seed1,") && strstr(csv, ",mqa-share2,"), "%s", csv);
    ck_assert_msg(strstr(csv, "\nshare1_seed1,"), "%s", csv);
    /* the summary's KV bytes, as the report reads them: half under share 2
     * (mqa, d_head 8: 2 * 8 floats a layer) */
    ck_assert_int_eq(csv_long(csv, "share1_seed1", "kv_bytes_per_token"), 2 * 2 * 8 * 4);
    ck_assert_int_eq(csv_long(csv, "share2_seed1", "kv_bytes_per_token"), 2 * 8 * 4);
    ck_assert_int_eq(csv_long(csv, "share2_seed1", "kv_bytes_at_context"), 16 * 2 * 8 * 4);
    free(csv);
    snprintf(args, sizeof args, "rm -rf %s", dir);
    ck_assert_int_eq(al_test_run(args, &out), 0);
    free(out), free(path), free(dir);
}
END_TEST

/* ------------------------------------------------------------ PyTorch */

static const char *python(void)
{
    const char *p = getenv("AL_TORCH_PYTHON");
    return p ? p : "/usr/bin/python3";
}

static double field(const char *out, const char *key)
{
    const char *p = strstr(out, key);
    ck_assert_msg(p != NULL, "no '%s' in:\n%s", key, out);
    return strtod(p + strlen(key), NULL);
}

/* attnlab score and grads of a shared checkpoint against the PyTorch
 * loader's own score (to 1e-4) and autograd gradients (rel err 1e-4). */
static void check_torch(al_model_config c, const char *dir, const char *data, int k)
{
    al_model m;
    al_err e;
    char ckpt[4300], grads[4300], cmd[13000], *out;
    ck_assert_int_eq(al_model_init(&m, &c, &e), 0);
    al_model_init_weights(&m, 40 + k);
    scale_weights(&m, 6.0f);
    snprintf(ckpt, sizeof ckpt, "%s/m%d.safetensors", dir, k);
    snprintf(grads, sizeof grads, "%s/g%d.safetensors", dir, k);
    ck_assert_int_eq(al_checkpoint_save(ckpt, &m, 0, &e), 0);
    al_model_free(&m);
    snprintf(cmd, sizeof cmd, "%s score %s %s --threads 1", al_test_binary(), ckpt, data);
    ck_assert_msg(al_test_run(cmd, &out) == 0, "%s", out);
    double ours = field(out, "\nloss=");
    free(out);
    snprintf(cmd, sizeof cmd, "%s %s/scripts/attnlab_torch.py score %s %s", python(),
             al_test_srcdir(), ckpt, data);
    ck_assert_msg(al_test_run(cmd, &out) == 0, "%s", out);
    double theirs = field(out, "\nloss=");
    ck_assert_msg(strstr(out, "-share2"), "%s", out);
    free(out);
    ck_assert_msg(fabs(ours - theirs) <= 1e-4, "case %d: attnlab %.6f, torch %.6f", k, ours,
                  theirs);
    ck_assert_msg(ours > 0.5, "a loss of %g says nothing", ours);
    snprintf(cmd, sizeof cmd, "%s grads %s %s --out %s --threads 1", al_test_binary(), ckpt,
             data, grads);
    ck_assert_msg(al_test_run(cmd, &out) == 0, "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s %s/scripts/attnlab_torch.py grads %s %s %s", python(),
             al_test_srcdir(), ckpt, data, grads);
    int rc = al_test_run(cmd, &out);
    ck_assert_msg(rc == 0 && strstr(out, "grads ok"), "case %d:\n%s", k, out);
    ck_assert_msg(strstr(out, "blocks.0.attn.wk.weight") &&
                  !strstr(out, "blocks.1.attn.wk.weight"), "%s", out);
    free(out);
}

/* `attnlab attention` over a shared model (consumers' maps by
 * share_probs) against the PyTorch loader's probabilities. */
static void check_torch_maps(al_model_config c, const char *dir, int k)
{
    al_model m;
    al_err e;
    char ckpt[4300], maps[4300], cmd[13000], *out;
    ck_assert_int_eq(al_model_init(&m, &c, &e), 0);
    al_model_init_weights(&m, 60 + k);
    scale_weights(&m, 20.0f);
    snprintf(ckpt, sizeof ckpt, "%s/p%d.safetensors", dir, k);
    snprintf(maps, sizeof maps, "%s/maps%d", dir, k);
    ck_assert_int_eq(al_checkpoint_save(ckpt, &m, 0, &e), 0);
    al_model_free(&m);
    snprintf(cmd, sizeof cmd, "AL_GNUPLOT=/nonexistent %s attention %s --prompt 'Romeo, O' "
             "--out %s --threads 1", al_test_binary(), ckpt, maps);
    ck_assert_msg(al_test_run(cmd, &out) == 0, "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s %s/scripts/attnlab_torch.py attention %s %s", python(),
             al_test_srcdir(), ckpt, maps);
    int rc = al_test_run(cmd, &out);
    ck_assert_msg(rc == 0 && strstr(out, "attention ok heads=16 "), "%s", out);   /* 4 x 4 */
    free(out);
}

START_TEST(torch_scores_and_gradients_of_shared_models_equal_attnlab)
{
    char cmd[4200], *out;
    snprintf(cmd, sizeof cmd, "%s -c 'import torch' 2>/dev/null", python());
    int rc = al_test_run(cmd, &out);
    free(out);
    if (rc != 0) {
        fprintf(stderr, "kv_share: skipped PyTorch: %s with torch not found\n", python());
        return;
    }
    char *dir = al_test_tmpdir(), text[1601];
    const char *s = "O Romeo, Romeo! wherefore art thou Romeo? Deny thy father. ";
    for (int i = 0; i < 1600; i++) text[i] = s[(i * 3 + i / 11) % strlen(s)];
    text[1600] = 0;
    char *data = al_test_write(dir, "data.txt", text);
    check_torch(shared("mqa", 3, 2, 8, 256), dir, data, 0);
    check_torch(shared_local(4, 2, 8, 256), dir, data, 1);
    check_torch_maps(shared_local(4, 2, 8, 256), dir, 2);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(al_test_run(cmd, &out), 0);
    free(out), free(data), free(dir);
}
END_TEST

Suite *kv_share_suite(void)
{
    Suite *s = suite_create("kv_share");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, consumers_have_no_kv_projections_and_the_count_drops_by_them);
    tcase_add_test(tc, match_params_sees_the_shared_count);
    tcase_add_test(tc, a_variant_that_cannot_share_is_refused_in_one_line);
    tcase_add_test(tc, a_version_3_table_cannot_share_and_is_refused_naming_it);
    tcase_add_test(tc, shared_gradients_match_finite_differences);
    tcase_add_test(tc, cached_decode_of_mqa_share_2_equals_the_full_forward_past_a_tile);
    tcase_add_test(tc, cached_decode_of_local_share_2_with_sinks_equals_the_full_forward);
    tcase_add_test(tc, every_cache_dtype_holds_the_producers_only);
    tcase_add_test(tc, generate_stats_measure_the_shared_cache);
    tcase_add_test(tc, kv_of_mqa_share_2_is_half_the_plain_model);
    tcase_add_test(tc, a_shared_checkpoint_round_trips_and_says_kv_share);
    tcase_add_test(tc, resume_refuses_a_changed_kv_share);
    tcase_add_test(tc, a_sweep_axis_over_kv_share);
    tcase_add_test(tc, torch_scores_and_gradients_of_shared_models_equal_attnlab);
    suite_add_tcase(s, tc);
    return s;
}
