/*
 * test_gla.c - grouped latent attention (variants/gla.c): what the generic
 * loops (test_variants, test_decode, test_torch) cannot say about it.
 *
 * The absorbed decode against the naive oracle (al_test_latent.h) and the
 * training forward; with one latent head, GLA is MLA given the same
 * tensors; check() names the key; `attnlab kv` counts h_c latents plus one
 * RoPE key; convert refuses to build it with a reason.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_convert.h"
#include "al_decode.h"
#include "al_registry.h"
#include "al_test.h"
#include "al_test_model.h"
#include "al_test_latent.h"

enum { D = 16, H = 4, DH = 4, SEQ = 8, VOCAB = 13 };

static double max_abs_diff(const float *a, const float *b, int n, double *amax)
{
    double d = 0;
    for (int i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        if (amax) *amax = fmax(*amax, fabs((double)b[i]));
    }
    return d;
}

static const al_variant *gla(void)
{
    const al_variant *v = al_variant_find("gla");
    ck_assert_ptr_nonnull(v);
    return v;
}

/* settings in gla's order: d_latent, d_rope, n_latent_head, d_q_latent */
static al_attn_shape shape(int dc, int dr, int hc, int dq)
{
    return (al_attn_shape){D, H, DH, SEQ, 1, 10000.0f, 1e-5f, {dc, dr, hc, dq}, .rope = {.base = 0}};
}

/* ------------------------------------------------------------ absorbed decode */

/* One layer, random weights of scale 0.5 (sharp attention): the absorbed
 * decode, the naive decode and the training forward agree at each of n
 * positions. */
static void check_absorbed(int hc, int dq, int dtype)
{
    const al_variant *v = gla();
    al_attn_shape s = shape(6, 4, hc, dq);
    al_param_spec spec[AL_MAX_ATTN_PARAMS];
    int np = v->train->params(al_test_ctx_of(v, &s), spec), n = 20;
    float *p[AL_MAX_ATTN_PARAMS];
    al_rng r;
    al_rng_seed(&r, 77 + hc);
    for (int i = 0; i < np; i++) {
        size_t k = (size_t)spec[i].rows * (spec[i].cols ? spec[i].cols : 1);
        p[i] = malloc(k * sizeof(float));
        for (size_t j = 0; j < k; j++)
            p[i][j] = (float)(spec[i].init == AL_INIT_ONES ? 1 + 0.1 * al_rng_normal(&r)
                                                           : 0.5 * al_rng_normal(&r));
    }
    float *x = malloc((size_t)n * D * sizeof(float)), *fwd = malloc((size_t)n * D * sizeof(float));
    for (int j = 0; j < n * D; j++) x[j] = (float)al_rng_normal(&r);
    float *act = calloc(v->train->act_floats(al_test_ctx_of(v, &s), 1, n), sizeof(float));
    float *fs = calloc(v->train->scratch_floats(al_test_ctx_of(v, &s), 1, n), sizeof(float));
    v->train->forward(al_test_ctx_of(v, &s), fwd, act, fs, x, p, 1, n);
    al_kv_cache *ca = al_kv_cache_new(v->decode->kv_elems(al_test_ctx_of(v, &s)), n, dtype);
    al_kv_cache *cb = al_kv_cache_new(v->decode->kv_elems(al_test_ctx_of(v, &s)), n, dtype);
    float *sa = calloc(v->decode->scratch_floats(al_test_ctx_of(v, &s), n), sizeof(float));
    al_test_latent lat = {6, 4, hc, dq};
    float *sb = calloc(al_test_latent_scratch(&s, lat, n), sizeof(float));
    float oa[D], ob[D];
    double worst = 0, worst_fwd = 0, amax = 0;
    for (int t = 0; t < n; t++) {
        v->decode->decode(al_test_ctx_of(v, &s), oa, sa, x + t * D, p, ca, t);
        al_test_latent_decode(&s, lat, ob, sb, x + t * D, p, cb, t);
        worst = fmax(worst, max_abs_diff(oa, ob, D, &amax));
        worst_fwd = fmax(worst_fwd, max_abs_diff(ob, fwd + t * D, D, NULL));
    }
    ck_assert_msg(worst < 1e-4, "hc=%d dq=%d %s: absorbed vs naive %g", hc, dq,
                  al_kv_dtype_name(dtype), worst);
    ck_assert_msg(amax > 1.0, "outputs too small (%g)", amax);
    if (dtype == AL_KV_F32)
        ck_assert_msg(worst_fwd < 1e-4, "hc=%d dq=%d: naive vs forward %g", hc, dq, worst_fwd);
    for (int i = 0; i < np; i++) free(p[i]);
    free(x), free(fwd), free(act), free(fs), free(sa), free(sb);
    al_kv_cache_free(ca), al_kv_cache_free(cb);
}

START_TEST(absorbed_decode_equals_the_naive_decode)
{
    for (int dt = 0; dt < AL_KV_NDTYPES; dt++)
        for (int hc = 1; hc <= H; hc *= 2) {
            check_absorbed(hc, 0, dt);
            check_absorbed(hc, 6, dt);
        }
}
END_TEST

/* ------------------------------------------------------------ gla(1) = mla */

static void tiny_model(al_model *m, const al_variant *v, const double *set, int n)
{
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, v, 2, D, H, DH, SEQ, VOCAB), 0);
    for (int i = 0; i < n; i++) c.attn_set[i] = set[i];
    al_err e;
    ck_assert_msg(al_model_init(m, &c, &e) == 0, "%s", e.msg);
}

/* Every tensor of dst from the tensor of src with its name and shape. */
static void copy_by_name(al_model *dst, const al_model *src)
{
    ck_assert_int_eq(dst->n_tensors, src->n_tensors);
    for (int i = 0; i < dst->n_tensors; i++) {
        const al_tensor *t = &dst->tensors[i], *s = al_model_tensor(src, t->name);
        ck_assert_msg(s != NULL, "mla has no %s", t->name);
        ck_assert_int_eq(s->ndim, t->ndim);
        for (int k = 0; k < t->ndim; k++) ck_assert_int_eq(s->shape[k], t->shape[k]);
        memcpy(dst->params + t->offset, src->params + s->offset, t->numel * sizeof(float));
    }
}

/* Logits (n - P, VOCAB) of decoding tok[P..n) after a prefill of P. */
static void decode_logits(al_model *m, const int *tok, int P, int n, float *out)
{
    al_decoder d;
    al_err e;
    ck_assert_msg(al_decoder_init(&d, m, n, AL_KV_F32, &e) == 0, "%s", e.msg);
    ck_assert_msg(al_decoder_prefill(&d, tok, P, &e) == 0, "%s", e.msg);
    for (int t = P; t < n; t++)
        memcpy(out + (size_t)(t - P) * VOCAB, al_decoder_step(&d, tok[t]), VOCAB * sizeof(float));
    al_decoder_free(&d);
}

/* MLA with random weights scaled up (sharp attention, O(1) logits), and
 * GLA with n_latent_head 1 given its tensors: the same logits forward and
 * decoded, to 1e-5 of the largest. */
static void check_gla1_is_mla(int dq)
{
    enum { N = 24 };
    const al_variant *mv = al_variant_find("mla");
    double mset[] = {6, 4, dq}, gset[] = {6, 4, 1, dq};
    al_model mla, g1;
    tiny_model(&mla, mv, mset, 3);
    tiny_model(&g1, gla(), gset, 4);
    al_model_init_weights(&mla, 5);
    for (int i = 0; i < mla.n_tensors; i++)
        if (mla.tensors[i].ndim == 2)
            for (size_t j = 0; j < mla.tensors[i].numel; j++)
                mla.params[mla.tensors[i].offset + j] *= 20.0f;
    copy_by_name(&g1, &mla);
    int tok[N];
    al_rng r;
    al_rng_seed(&r, 3);
    for (int i = 0; i < N; i++) tok[i] = (int)al_rng_below(&r, VOCAB);
    static float a[N * VOCAB], b[N * VOCAB];
    al_err e;
    ck_assert_int_eq(al_model_reserve(&mla, 1, N, &e), 0);
    ck_assert_int_eq(al_model_reserve(&g1, 1, N, &e), 0);
    al_model_forward(&mla, tok, NULL, NULL, 1, N);
    al_model_forward(&g1, tok, NULL, NULL, 1, N);
    double amax = 0, df = max_abs_diff(g1.logits, mla.logits, N * VOCAB, &amax);
    ck_assert_msg(amax > 1.0, "logits too small (%g) for the test to bite", amax);
    ck_assert_msg(df <= 1e-5 * amax, "dq=%d forward: gla(1) - mla = %g (largest %g)", dq, df, amax);
    decode_logits(&mla, tok, 3, N, a);
    decode_logits(&g1, tok, 3, N, b);
    double dd = max_abs_diff(b, a, (N - 3) * VOCAB, NULL);
    ck_assert_msg(dd <= 1e-5 * amax, "dq=%d decode: gla(1) - mla = %g (largest %g)", dq, dd, amax);
    al_model_free(&mla);
    al_model_free(&g1);
}

START_TEST(gla_with_one_latent_head_equals_mla_given_the_same_weights)
{
    check_gla1_is_mla(0);
    check_gla1_is_mla(6);
}
END_TEST

/* Each group reads its own latent head alone: with wo blind to group 1's
 * heads, changing latent head 1's down-projection leaves the output's
 * bits alone; blind to group 0's instead, the output moves. */
static double perturbed_change(int blind_group)
{
    const al_variant *v = gla();
    al_attn_shape s = shape(6, 4, 2, 0);
    al_param_spec spec[AL_MAX_ATTN_PARAMS];
    int np = v->train->params(al_test_ctx_of(v, &s), spec), n = 5, Gd = (H / 2) * DH;
    float *p[AL_MAX_ATTN_PARAMS], *wdkv = NULL, *wo = NULL;
    al_rng r;
    al_rng_seed(&r, 11);
    for (int i = 0; i < np; i++) {
        size_t k = (size_t)spec[i].rows * (spec[i].cols ? spec[i].cols : 1);
        p[i] = malloc(k * sizeof(float));
        for (size_t j = 0; j < k; j++) p[i][j] = (float)(0.5 * al_rng_normal(&r));
        if (!strcmp(spec[i].name, "wdkv")) wdkv = p[i];
        if (!strcmp(spec[i].name, "wo")) wo = p[i];
    }
    ck_assert(wdkv && wo);
    for (int o = 0; o < D; o++)   /* wo (D, H*dh): columns of the blind group's heads */
        memset(wo + (size_t)o * H * DH + (size_t)blind_group * Gd, 0, Gd * sizeof(float));
    float x[5 * D], a[5 * D], b[5 * D];
    for (int j = 0; j < n * D; j++) x[j] = (float)al_rng_normal(&r);
    float *act = calloc(v->train->act_floats(al_test_ctx_of(v, &s), 1, n), sizeof(float));
    float *fs = calloc(v->train->scratch_floats(al_test_ctx_of(v, &s), 1, n), sizeof(float));
    v->train->forward(al_test_ctx_of(v, &s), a, act, fs, x, p, 1, n);
    for (int j = 6 * D; j < 12 * D; j++) wdkv[j] += 0.3f;   /* latent head 1's rows */
    v->train->forward(al_test_ctx_of(v, &s), b, act, fs, x, p, 1, n);
    double d = max_abs_diff(a, b, n * D, NULL);
    for (int i = 0; i < np; i++) free(p[i]);
    free(act), free(fs);
    return d;
}

START_TEST(each_group_reads_only_its_own_latent_head)
{
    ck_assert_msg(perturbed_change(1) == 0.0, "group 0 saw latent head 1: %g",
                  perturbed_change(1));
    ck_assert_msg(perturbed_change(0) > 1e-3, "group 1 ignores latent head 1: %g",
                  perturbed_change(0));
}
END_TEST

/* ------------------------------------------------------------ settings */

START_TEST(check_names_the_bad_key)
{
    static const struct {
        int dc, dr, hc, dq;
        const char *want;
    } c[] = {
        {0, 4, 2, 0, "'d_latent' (0) must be positive"},
        {8, 3, 2, 0, "'d_rope' (3) must be even and positive for RoPE"},
        {8, 4, 0, 0, "'n_latent_head' (0) must be positive"},
        {8, 4, 3, 0, "'n_latent_head' (3) must divide 'n_head' (4)"},
        {8, 4, 2, -1, "'d_q_latent' (-1) must be 0 (no query compression) or positive"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        al_attn_shape s = shape(c[i].dc, c[i].dr, c[i].hc, c[i].dq);
        char err[256] = "";
        ck_assert_int_eq(al_variant_check(gla(), &s, err, sizeof err), -1);
        ck_assert_str_eq(err, c[i].want);
    }
    al_attn_shape ok = shape(8, 4, 4, 0);
    char err[256];
    ck_assert_int_eq(al_variant_check(gla(), &ok, err, sizeof err), 0);
}
END_TEST

/* h_c latents of d_latent and one RoPE key: (2 * 32 + 16) per token per
 * layer. Parameters by hand: wq, wqr, wdkv (h_c*d_c rows), kv_norm, wkr,
 * wuk, wuv (d_c columns), wo. */
START_TEST(kv_reports_latent_heads_plus_rope_bytes)
{
    char *dir = al_test_tmpdir();
    char *cfg = al_test_write(dir, "gla.yaml",
                              "data: {path: /nonexistent}\n"
                              "model:\n  n_layer: 4\n  d_model: 128\n  n_head: 4\n  d_head: 32\n"
                              "  attention: {variant: gla, n_latent_head: 2, d_latent: 32, "
                              "d_rope: 16}\n");
    char args[4200], *out, want[128];
    snprintf(args, sizeof args, "kv %s --context 1000", cfg);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    size_t Dm = 128, Hd = 4 * 32, L = 2 * 32, dc = 32, dr = 16;
    size_t attn = Hd * Dm + 4 * dr * Dm + L * Dm + L + dr * Dm + 2 * Hd * dc + Dm * Hd;
    snprintf(want, sizeof want, "parameters: %zu\n",
             256 * Dm + 4 * (2 * Dm + attn + 8 * Dm * Dm) + Dm);
    ck_assert_msg(strstr(out, want), "%s", out);
    /* 4 layers * (2 * 32 + 16) = 320 elements */
    ck_assert_msg(strstr(out, "kv_elements_per_token: 320\n"), "%s", out);
    ck_assert_msg(strstr(out, "kv_bytes_per_token: f32=1280 bf16=640 f16=640"), "%s", out);
    free(out);
    free(cfg);
    free(dir);
}
END_TEST

/* No method builds GLA's grouped latents from an mha/gqa checkpoint except
 * a fresh draw ('random'); the others are refused in one line saying so. */
START_TEST(convert_into_gla_is_refused_except_random)
{
    double gset[] = {8, 4, 2, 0};
    al_model src, dst;
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, al_variant_find("mha"), 2, D, H, DH, SEQ, VOCAB), 0);
    al_err e;
    ck_assert_int_eq(al_model_init(&src, &c, &e), 0);
    tiny_model(&dst, gla(), gset, 4);
    for (int m = 0; m < AL_CONVERT_N_METHODS; m++) {
        int rc = al_convert_check(&src.cfg, &dst.cfg, m, &e);
        if (m == AL_CONVERT_RANDOM) {
            ck_assert_msg(rc == 0, "%s", e.msg);
            continue;
        }
        ck_assert_int_eq(rc, -1);
        ck_assert_msg(strstr(e.msg, "gla") && !strchr(e.msg, '\n'), "%s", e.msg);
        ck_assert_msg(strstr(e.msg, "grouped latents"), "%s", e.msg);
    }
    al_model_free(&src);
    al_model_free(&dst);
}
END_TEST

Suite *gla_suite(void)
{
    Suite *s = suite_create("gla");
    TCase *tc = tcase_create("gla");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, absorbed_decode_equals_the_naive_decode);
    tcase_add_test(tc, gla_with_one_latent_head_equals_mla_given_the_same_weights);
    tcase_add_test(tc, each_group_reads_only_its_own_latent_head);
    tcase_add_test(tc, check_names_the_bad_key);
    tcase_add_test(tc, kv_reports_latent_heads_plus_rope_bytes);
    tcase_add_test(tc, convert_into_gla_is_refused_except_random);
    suite_add_tcase(s, tc);
    return s;
}
