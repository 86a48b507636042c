/*
 * test_tpa.c - variants/tpa.c, tensor product attention (T6): the
 * factorised decode equals an independent naive decode that expands every
 * cached token's K and V per head, across cache blocks and storage
 * dtypes; the 1/R of each factorisation; cache sizes by the paper's
 * formula, through `attnlab kv` too; settings and convert refused with
 * messages that name why. (Gradients, decode parity with the full
 * forward, batched decode, cache bytes and PyTorch parity are the generic
 * loops' in test_variants.c, test_decode.c and test_torch.c.)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_convert.h"
#include "al_kvcache.h"
#include "al_registry.h"
#include "al_test.h"
#include "al_test_model.h"

static const al_variant *tpa(void)
{
    const al_variant *v = al_variant_find("tpa");
    ck_assert_ptr_nonnull(v);
    return v;
}

/* A layer's parameters by name. */
typedef struct layer {
    al_attn_shape s;
    al_param_spec spec[AL_MAX_ATTN_PARAMS];
    float *p[AL_MAX_ATTN_PARAMS];
    int np;
} layer;

static void layer_init(layer *L, int D, int H, int dh, int rq, int rk, int rv, double std,
                       uint64_t seed)
{
    L->s = (al_attn_shape){D, H, dh, 8, 1, 10000.0f, 1e-5f, {rq, rk, rv}, .rope = {.base = 0}};
    L->np = tpa()->train->params(al_test_ctx_of(tpa(), &L->s), L->spec);
    al_rng r;
    al_rng_seed(&r, seed);
    for (int i = 0; i < L->np; i++) {
        size_t n = (size_t)L->spec[i].rows * (L->spec[i].cols ? L->spec[i].cols : 1);
        L->p[i] = malloc(n * sizeof(float));
        for (size_t j = 0; j < n; j++) L->p[i][j] = (float)(std * al_rng_normal(&r));
    }
}

static void layer_free(layer *L)
{
    for (int i = 0; i < L->np; i++) free(L->p[i]);
}

static const float *param(const layer *L, const char *name)
{
    for (int i = 0; i < L->np; i++)
        if (!strcmp(L->spec[i].name, name)) return L->p[i];
    ck_abort_msg("no parameter '%s'", name);
    return NULL;
}

/* ------------------------------------------------------------ naive decode */

/* y (n) = w (n, m) . x (m), in double */
static void matvec(double *y, const float *w, const double *x, int n, int m)
{
    for (int i = 0; i < n; i++) {
        double acc = 0;
        for (int j = 0; j < m; j++) acc += (double)w[(size_t)i * m + j] * x[j];
        y[i] = acc;
    }
}

/* Rotate-half RoPE of one width-dh vector at position pos (README's
 * convention: i pairs with i + dh/2, angle pos * base^(-2i/dh)). */
static void rope(double *v, int dh, int pos, double base)
{
    for (int i = 0; i < dh / 2; i++) {
        double a = pos * pow(base, -2.0 * i / dh), x1 = v[i], x2 = v[i + dh / 2];
        v[i] = x1 * cos(a) - x2 * sin(a);
        v[i + dh / 2] = x2 * cos(a) + x1 * sin(a);
    }
}

/* head (H, dh) = (1/R) A (H, R) . B (R, dh), A and B as stored (floats). */
static void expand(double *head, const float *A, const float *B, int H, int R, int dh)
{
    for (int h = 0; h < H; h++)
        for (int j = 0; j < dh; j++) {
            double acc = 0;
            for (int r = 0; r < R; r++) acc += (double)A[h * R + r] * B[r * dh + j];
            head[h * dh + j] = acc / R;
        }
}

/* The output of the token x at position pos over cache rows 0..pos,
 * computed the textbook way: q from x, every cached token's k_h and v_h
 * expanded from its factors, softmax(q_h . k_h / sqrt(dh)) . v_h, wo. The
 * row layout is the one tpa.c documents: [A_K | B_K | A_V | B_V]. */
static void naive_decode(double *out, const layer *L, const float *x, const al_kv_cache *c,
                         int pos)
{
    int D = L->s.d_model, H = L->s.n_head, dh = L->s.d_head;
    int rq = (int)L->s.set[0], rk = (int)L->s.set[1], rv = (int)L->s.set[2], n = pos + 1;
    size_t E = al_kv_cache_elems(c);
    double *xd = malloc(D * sizeof(double)), *aq = malloc(H * rq * sizeof(double));
    double *bq = malloc(rq * dh * sizeof(double)), *q = calloc(H * dh, sizeof(double));
    double *K = malloc((size_t)n * H * dh * sizeof(double)), *V = malloc((size_t)n * H * dh * sizeof(double));
    double *y = calloc(H * dh, sizeof(double)), *sc = malloc(n * sizeof(double));
    float *row = malloc(E * sizeof(float));
    for (int j = 0; j < D; j++) xd[j] = x[j];
    matvec(aq, param(L, "wa_q"), xd, H * rq, D);
    matvec(bq, param(L, "wb_q"), xd, rq * dh, D);
    for (int r = 0; r < rq; r++) rope(bq + r * dh, dh, pos, L->s.rope_base);
    for (int h = 0; h < H; h++)
        for (int j = 0; j < dh; j++) {
            for (int r = 0; r < rq; r++) q[h * dh + j] += aq[h * rq + r] * bq[r * dh + j];
            q[h * dh + j] /= rq;
        }
    for (int t = 0; t < n; t++) {
        al_kv_row_get(c, t, row);
        const float *ak = row, *bk = ak + H * rk, *av = bk + rk * dh, *bv = av + H * rv;
        expand(K + (size_t)t * H * dh, ak, bk, H, rk, dh);
        expand(V + (size_t)t * H * dh, av, bv, H, rv, dh);
    }
    for (int h = 0; h < H; h++) {
        double mx = -INFINITY, sum = 0;
        for (int t = 0; t < n; t++) {
            double s = 0;
            for (int j = 0; j < dh; j++) s += q[h * dh + j] * K[((size_t)t * H + h) * dh + j];
            sc[t] = s / sqrt(dh);
            mx = fmax(mx, sc[t]);
        }
        for (int t = 0; t < n; t++) sum += sc[t] = exp(sc[t] - mx);
        for (int t = 0; t < n; t++)
            for (int j = 0; j < dh; j++) y[h * dh + j] += sc[t] / sum * V[((size_t)t * H + h) * dh + j];
    }
    matvec(out, param(L, "wo"), y, D, H * dh);
    free(xd), free(aq), free(bq), free(q), free(K), free(V), free(y), free(sc), free(row);
}

/* Decode n tokens one by one through the ops table; after each, the
 * naive decode over the same cache. Returns the largest difference over
 * the largest |output|. */
static double decode_vs_naive(const layer *L, int n, int dtype, double *amax)
{
    const al_variant *v = tpa();
    int D = L->s.d_model;
    al_rng r;
    al_rng_seed(&r, 5);
    float *x = malloc((size_t)n * D * sizeof(float)), *out = malloc(D * sizeof(float));
    for (size_t j = 0; j < (size_t)n * D; j++) x[j] = (float)al_rng_normal(&r);
    double *want = malloc(D * sizeof(double)), worst = 0;
    al_kv_cache *c = al_kv_cache_new(v->decode->kv_elems(al_test_ctx_of(v, &L->s)), n, dtype);
    float *sc = calloc(v->decode->scratch_floats(al_test_ctx_of(v, &L->s), n), sizeof(float));
    for (int t = 0; t < n; t++) {
        v->decode->decode(al_test_ctx_of(v, &L->s), out, sc, x + (size_t)t * D, L->p, c, t);
        naive_decode(want, L, x + (size_t)t * D, c, t);
        for (int j = 0; j < D; j++) {
            worst = fmax(worst, fabs(out[j] - want[j]));
            *amax = fmax(*amax, fabs(want[j]));
        }
    }
    al_kv_cache_free(c);
    free(x), free(out), free(want), free(sc);
    return worst / *amax;
}

START_TEST(factorised_decode_equals_a_naive_decode_that_expands_k_and_v)
{
    /* 300 tokens: past one cache block (AL_KV_TILE = 256), so the online
     * softmax across blocks is covered; ranks of 1 and above, K and V
     * ranks different so a swapped factor shows */
    static const int ranks[][3] = {{6, 2, 2}, {1, 1, 1}, {3, 2, 4}};
    for (int i = 0; i < 3; i++)
        for (int dt = 0; dt < AL_KV_NDTYPES; dt++) {
            layer L;
            layer_init(&L, 24, 4, 8, ranks[i][0], ranks[i][1], ranks[i][2], 0.4, 11 + i);
            double amax = 0, err = decode_vs_naive(&L, 300, dt, &amax);
            ck_assert_msg(err < 1e-5, "ranks %d/%d/%d %s: factorised vs naive %g (largest %g)",
                          ranks[i][0], ranks[i][1], ranks[i][2], al_kv_dtype_name(dt), err, amax);
            ck_assert_msg(amax > 0.5, "outputs too small (%g) for the test to bite", amax);
            layer_free(&L);
        }
}
END_TEST

/* The naive decode is the textbook attention, so it must itself agree
 * with the training forward (which materialises q, k, v its own way);
 * otherwise the comparison above would be of two equal wrongs. */
START_TEST(naive_decode_equals_the_training_forward)
{
    const al_variant *v = tpa();
    layer L;
    layer_init(&L, 24, 4, 8, 3, 2, 4, 0.4, 3);
    int n = 20, D = 24;
    al_rng r;
    al_rng_seed(&r, 8);
    float *x = malloc((size_t)n * D * sizeof(float)), *fwd = malloc((size_t)n * D * sizeof(float));
    for (int j = 0; j < n * D; j++) x[j] = (float)al_rng_normal(&r);
    float *act = calloc(v->train->act_floats(al_test_ctx_of(v, &L.s), 1, n), sizeof(float));
    float *fs = calloc(v->train->scratch_floats(al_test_ctx_of(v, &L.s), 1, n), sizeof(float));
    v->train->forward(al_test_ctx_of(v, &L.s), fwd, act, fs, x, L.p, 1, n);
    al_kv_cache *c = al_kv_cache_new(v->decode->kv_elems(al_test_ctx_of(v, &L.s)), n, AL_KV_F32);
    v->decode->prefill(al_test_ctx_of(v, &L.s), c, act, L.p, n);
    double want[24], worst = 0, amax = 0;
    for (int t = 0; t < n; t++) {
        naive_decode(want, &L, x + t * D, c, t);   /* rows 0..t of the prefilled cache */
        for (int j = 0; j < D; j++) {
            worst = fmax(worst, fabs(fwd[t * D + j] - want[j]));
            amax = fmax(amax, fabs(want[j]));
        }
    }
    ck_assert_msg(worst < 1e-4 * amax, "forward vs naive %g (largest %g)", worst, amax);
    al_kv_cache_free(c);
    free(x), free(fwd), free(act), free(fs);
    layer_free(&L);
}
END_TEST

/* ------------------------------------------------------------ 1/R */

/* Each factorisation is divided by its rank (the paper's 1/R_Q, 1/R_K,
 * 1/R_V): R identical rank-one terms give exactly the rank-one layer. */
START_TEST(r_identical_terms_equal_one_term)
{
    const al_variant *v = tpa();
    int D = 16, H = 4, dh = 4, T = 6, R = 3;
    layer one, three;
    layer_init(&one, D, H, dh, 1, 1, 1, 0.5, 21);
    layer_init(&three, D, H, dh, R, R, R, 0.5, 22);
    /* wa_* rows (H*R, D): head h, term r = one's row h; wb_* rows (R*dh, D):
     * term r = one's dh rows */
    for (int i = 0; i < 6; i++) {
        int is_a = three.spec[i].name[1] == 'a';
        for (int row = 0; row < three.spec[i].rows; row++) {
            int src = is_a ? row / R : row % dh;
            memcpy(three.p[i] + (size_t)row * D, one.p[i] + (size_t)src * D, D * sizeof(float));
        }
    }
    memcpy(three.p[6], one.p[6], (size_t)D * H * dh * sizeof(float));   /* wo */
    al_rng r;
    al_rng_seed(&r, 4);
    float x[6 * 16], o1[6 * 16], o3[6 * 16];
    for (int j = 0; j < T * D; j++) x[j] = (float)al_rng_normal(&r);
    layer *L[2] = {&one, &three};
    float *o[2] = {o1, o3};
    for (int k = 0; k < 2; k++) {
        float *act = calloc(v->train->act_floats(al_test_ctx_of(v, &L[k]->s), 1, T), sizeof(float));
        const void *ctx = al_test_ctx_of(v, &L[k]->s);
        float *sc = calloc(v->train->scratch_floats(ctx, 1, T), sizeof(float));
        v->train->forward(al_test_ctx_of(v, &L[k]->s), o[k], act, sc, x, L[k]->p, 1, T);
        free(act), free(sc);
    }
    double worst = 0, amax = 0;
    for (int j = 0; j < T * D; j++) {
        worst = fmax(worst, fabs(o1[j] - o3[j]));
        amax = fmax(amax, fabs(o1[j]));
    }
    ck_assert_msg(worst < 1e-5 * amax, "rank 3 of copies vs rank 1: %g (largest %g)", worst, amax);
    ck_assert_double_gt(amax, 0.1);
    layer_free(&one), layer_free(&three);
}
END_TEST

/* ------------------------------------------------------------ sizes, settings */

START_TEST(cache_holds_the_k_and_v_factors)
{
    al_attn_shape s = {256, 8, 32, 64, 1, 10000.0f, 1e-5f, {6, 2, 2}, .rope = {.base = 0}};
    /* 160, MHA: 512 */
    ck_assert_uint_eq(tpa()->decode->kv_elems(al_test_ctx_of(tpa(), &s)), (2 + 2) * (8 + 32));
    s.set[1] = 1, s.set[2] = 3;
    ck_assert_uint_eq(tpa()->decode->kv_elems(al_test_ctx_of(tpa(), &s)), (1 + 3) * (8 + 32));
    s.set[0] = 12;   /* the query rank is not cached */
    ck_assert_uint_eq(tpa()->decode->kv_elems(al_test_ctx_of(tpa(), &s)), (1 + 3) * (8 + 32));
}
END_TEST

/* `attnlab kv` on a 4-layer tpa model with the default ranks: (2 + 2) *
 * (4 + 32) = 144 elements per layer. Parameters by hand: the six factor
 * projections and wo. */
START_TEST(kv_reports_the_factor_bytes)
{
    char *dir = al_test_tmpdir();
    char *cfg = al_test_write(dir, "tpa.yaml",
                              "data: {path: /nonexistent}\n"
                              "model:\n  n_layer: 4\n  d_model: 128\n  n_head: 4\n  d_head: 32\n"
                              "  attention: {variant: tpa}\n");
    char args[4200], *out, want[128];
    snprintf(args, sizeof args, "kv %s --context 1000", cfg);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    size_t D = 128, H = 4, dh = 32, rq = 6, rk = 2, rv = 2;
    size_t attn = (rq + rk + rv) * (H + dh) * D + D * H * dh;
    snprintf(want, sizeof want, "parameters: %zu\n",
             256 * D + 4 * (2 * D + attn + 8 * D * D) + D);
    ck_assert_msg(strstr(out, want), "%s", out);
    ck_assert_msg(strstr(out, "kv_elements_per_token: 576\n"), "%s", out);   /* 4 * 144 */
    ck_assert_msg(strstr(out, "kv_bytes_per_token: f32=2304 bf16=1152 f16=1152"), "%s", out);
    free(out);
    free(cfg);
    free(dir);
}
END_TEST

START_TEST(settings_are_refused_with_the_key_named)
{
    char err[256];
    for (int i = 0; i < 3; i++) {
        al_attn_shape s = {16, 4, 4, 8, 1, 10000.0f, 1e-5f, {6, 2, 2}, .rope = {.base = 0}};
        s.set[i] = i - 1;   /* -1, 0, 1: the last is fine */
        int rc = al_variant_check(tpa(), &s, err, sizeof err);
        if (i == 2) {
            ck_assert_int_eq(rc, 0);
            continue;
        }
        char want[64];
        snprintf(want, sizeof want, "'%s' (%d) must be positive", tpa()->settings[i].name, i - 1);
        ck_assert_int_ne(rc, 0);
        ck_assert_str_eq(err, want);
    }
}
END_TEST

/* No conversion reaches tpa: its K and V are products of two projections
 * of the token, which no linear K/V weights map onto. */
START_TEST(convert_into_tpa_is_refused_with_the_reason)
{
    al_model_config src, dst;
    ck_assert_int_eq(al_test_tiny_config(&src, al_variant_find("mha"), 2, 32, 4, 8, 16, 256), 0);
    ck_assert_int_eq(al_test_tiny_config(&dst, tpa(), 2, 32, 4, 8, 16, 256), 0);
    for (int m = 0; m < AL_CONVERT_N_METHODS; m++) {
        al_err e = {""};
        ck_assert_int_eq(al_convert_check(&src, &dst, m, &e), -1);
        ck_assert_msg(strstr(e.msg, "'tpa'") && strstr(e.msg, "products"), "%s", e.msg);
        ck_assert_ptr_null(strchr(e.msg, '\n'));
    }
    al_err e = {""};   /* a tpa checkpoint copied as it is stays possible */
    ck_assert_int_eq(al_convert_check(&dst, &dst, AL_CONVERT_MEAN, &e), 0);
}
END_TEST

Suite *tpa_suite(void)
{
    Suite *s = suite_create("tpa");
    TCase *tc = tcase_create("tpa");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, factorised_decode_equals_a_naive_decode_that_expands_k_and_v);
    tcase_add_test(tc, naive_decode_equals_the_training_forward);
    tcase_add_test(tc, r_identical_terms_equal_one_term);
    tcase_add_test(tc, cache_holds_the_k_and_v_factors);
    tcase_add_test(tc, kv_reports_the_factor_bytes);
    tcase_add_test(tc, settings_are_refused_with_the_key_named);
    tcase_add_test(tc, convert_into_tpa_is_refused_with_the_reason);
    suite_add_tcase(s, tc);
    return s;
}
