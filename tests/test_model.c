/*
 * test_model.c - the whole model: gradient check against finite differences,
 * causal property, GQA equivalences, initialisation.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "al_registry.h"
#include "al_test.h"
#include "al_test_model.h"

/* Scale every 2-D weight up so that gradients are well above float noise. */
static void scale_weights(al_model *m, float s)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].ndim == 2)
            for (size_t j = 0; j < m->tensors[i].numel; j++)
                m->params[m->tensors[i].offset + j] *= s;
}

static void random_tokens(int *x, int n, int V, unsigned seed)
{
    al_rng r;
    al_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) x[i] = (int)al_rng_below(&r, V);
}

/* Central differences on up to `samples` elements of every tensor. */
static void check_model_grads(const al_variant *v, int causal, int weighted)
{
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, v, 2, 16, 4, 4, 6, 11), 0);
    c.causal = causal;
    al_model m;
    al_err e;
    ck_assert_int_eq(al_model_init(&m, &c, &e), 0);
    al_model_init_weights(&m, 7);
    scale_weights(&m, 20.0f);
    int B = 2, T = 6, in[12], tgt[12];
    float w[12];
    random_tokens(in, 12, 11, 1);
    random_tokens(tgt, 12, 11, 2);
    for (int i = 0; i < 12; i++) w[i] = (i % 3 == 1) ? 0.0f : 1.0f;
    const float *wp = weighted ? w : NULL;
    ck_assert_int_eq(al_model_reserve(&m, B, T, &e), 0);
    al_model_zero_grad(&m);
    al_model_forward(&m, in, tgt, wp, B, T);
    al_model_backward(&m);
    al_rng r;
    al_rng_seed(&r, 3);
    for (int t = 0; t < m.n_tensors; t++) {
        const al_tensor *ts = &m.tensors[t];
        double err = al_check_model_fd(&m, ts, in, tgt, wp, B, T, 24, &r);
        ck_assert_msg(err < 2e-2, "%s %s: grad rel err %g", v->name, ts->name, err);
    }
    al_model_free(&m);
}

/* ---- gradients written, not accumulated */

/* An accumulating variant as the contract has always allowed: mha's
 * backward computed into buffers of its own and ADDED to dx and dp, no
 * AL_VARIANT_WRITES_GRADS. The core must hand it zeroed buffers. */
static al_variant adder;
static float *adder_dx, *adder_dp[4];
static size_t adder_n, adder_np[4];

static al_variant_train adder_train;
enum { ADDER_D = 16 };   /* the d_model of grads_after's model */

static void adder_backward(const void *ctx, float *dx, float *const *dp, float *scratch,
                           const float *dout, const float *x, const float *act,
                           float *const *p, int B, int T)
{
    const al_variant *mha = al_variant_find("mha");
    AL_ASSERT((size_t)B * T * ADDER_D <= adder_n);
    mha->train->backward(ctx, adder_dx, adder_dp, scratch, dout, x, act, p, B, T);
    for (size_t j = 0; j < (size_t)B * T * ADDER_D; j++) dx[j] += adder_dx[j];
    for (int i = 0; i < 4; i++)
        for (size_t j = 0; j < adder_np[i]; j++) dp[i][j] += adder_dp[i][j];
}

/* grads after forward + backward from grads that held `fill` (malloc'ed). */
static float *grads_after(const al_variant *v, float fill, size_t *n)
{
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, v, 2, 16, 4, 4, 6, 11), 0);
    al_model m;
    al_err e;
    ck_assert_int_eq(al_model_init(&m, &c, &e), 0);
    al_model_init_weights(&m, 7);
    scale_weights(&m, 20.0f);
    int in[12], tgt[12];
    random_tokens(in, 12, 11, 1);
    random_tokens(tgt, 12, 11, 2);
    ck_assert_int_eq(al_model_reserve(&m, 2, 6, &e), 0);
    for (size_t j = 0; j < m.n_params; j++) m.grads[j] = fill;
    for (size_t j = 0; j < (size_t)12 * 16; j++) m.dtmp[j] = m.dx[j] = fill;
    al_model_forward(&m, in, tgt, NULL, 2, 6);
    al_model_backward(&m);
    *n = m.n_params;
    float *g = malloc(*n * sizeof(float));
    memcpy(g, m.grads, *n * sizeof(float));
    al_model_free(&m);
    return g;
}

START_TEST(backward_writes_every_gradient_whatever_the_buffers_held)
{
    size_t n, n2;
    for (int i = 0; i < al_variant_count(); i++) {
        const al_variant *v = al_variant_at(i);
        float *zero = grads_after(v, 0.0f, &n), *junk = grads_after(v, NAN, &n2);
        ck_assert_uint_eq(n, n2);
        for (size_t j = 0; j < n; j++)
            ck_assert_msg(zero[j] == junk[j], "%s: grads[%zu] %g over zeros, %g over NaN",
                          v->name, j, zero[j], junk[j]);
        free(zero), free(junk);
    }
    /* an accumulating variant gets zeroed buffers: the same bits as mha */
    adder = *al_variant_find("mha");
    adder.name = "adder";
    adder_train = *adder.train;
    adder_train.flags = 0;
    adder_train.backward = adder_backward;
    adder.train = &adder_train;
    al_param_spec spec[AL_MAX_ATTN_PARAMS];
    al_attn_shape s = {ADDER_D, 4, 4, 6, 1, 10000.0f, 1e-5f, {0}, .rope = {.base = 0}};
    char err[8];
    void *ctx = al_variant_init(&adder, &s, err, sizeof err);
    ck_assert_int_eq(adder.train->params(ctx, spec), 4);
    adder.fini(ctx);
    adder_n = 12 * 16;
    adder_dx = malloc(adder_n * sizeof(float));
    for (int i = 0; i < 4; i++) {
        adder_np[i] = (size_t)spec[i].rows * spec[i].cols;
        adder_dp[i] = malloc(adder_np[i] * sizeof(float));
    }
    float *ref = grads_after(al_variant_find("mha"), 0.0f, &n);
    float *acc = grads_after(&adder, 7.0f, &n2);
    ck_assert_uint_eq(n, n2);
    for (size_t j = 0; j < n; j++)
        ck_assert_msg(ref[j] == acc[j], "adder: grads[%zu] %g, mha %g", j, acc[j], ref[j]);
    free(ref), free(acc), free(adder_dx);
    for (int i = 0; i < 4; i++) free(adder_dp[i]);
}
END_TEST

START_TEST(whole_model_gradients_match_finite_differences)
{
    for (int i = 0; i < al_variant_count(); i++) {
        check_model_grads(al_variant_at(i), 1, 0);
        check_model_grads(al_variant_at(i), 0, 0);
    }
}
END_TEST

START_TEST(masked_loss_gradients_match_finite_differences)
{
    check_model_grads(al_variant_find("mha"), 1, 1);
}
END_TEST

/* Logits at positions <= t never depend on tokens after t. */
static double max_change_before(const al_variant *v, int causal, int t_cut)
{
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, v, 2, 16, 4, 4, 8, 13), 0);
    c.causal = causal;
    al_model m;
    al_err e;
    ck_assert_int_eq(al_model_init(&m, &c, &e), 0);
    al_model_init_weights(&m, 5);
    scale_weights(&m, 10.0f);
    al_model_reserve(&m, 1, 8, &e);
    int a[8], b[8];
    random_tokens(a, 8, 13, 9);
    memcpy(b, a, sizeof a);
    for (int t = t_cut + 1; t < 8; t++) b[t] = (a[t] + 1 + t) % 13;
    size_t n = (size_t)(t_cut + 1) * 13;
    float *la = malloc(n * sizeof(float));
    al_model_forward(&m, a, NULL, NULL, 1, 8);
    memcpy(la, m.logits, n * sizeof(float));
    al_model_forward(&m, b, NULL, NULL, 1, 8);
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs(la[i] - m.logits[i]));
    free(la);
    al_model_free(&m);
    return d;
}

START_TEST(causal_model_ignores_future_tokens)
{
    for (int i = 0; i < al_variant_count(); i++)
        for (int t = 0; t < 7; t += 3)
            ck_assert_double_le(max_change_before(al_variant_at(i), 1, t), 1e-6);
}
END_TEST

/* (A state layer, AL_KV_STATE, is causal by construction: the ablation
 * leaves it causal, docs/state-layers.md.) */
START_TEST(non_causal_model_sees_future_tokens)
{
    for (int i = 0; i < al_variant_count(); i++)
        if (al_variant_at(i)->decode->storage != AL_KV_STATE)
            ck_assert_double_gt(max_change_before(al_variant_at(i), 0, 3), 1e-4);
}
END_TEST

/* Logits of `a` with the weights of `b` copied tensor by tensor. */
static double max_logit_diff(al_model_config *ca, al_model_config *cb)
{
    al_model a, b;
    al_err e;
    ck_assert_int_eq(al_model_init(&a, ca, &e), 0);
    ck_assert_int_eq(al_model_init(&b, cb, &e), 0);
    ck_assert_uint_eq(a.n_params, b.n_params);
    al_model_init_weights(&a, 11);
    scale_weights(&a, 10.0f);
    memcpy(b.params, a.params, a.n_params * sizeof(float));
    al_model_reserve(&a, 2, 8, &e);
    al_model_reserve(&b, 2, 8, &e);
    int in[16];
    random_tokens(in, 16, 17, 4);
    size_t n = 16 * 17;
    float *la = malloc(n * sizeof(float));
    al_model_forward(&a, in, NULL, NULL, 2, 8);
    memcpy(la, a.logits, n * sizeof(float));
    al_model_forward(&b, in, NULL, NULL, 2, 8);
    double d = 0, mag = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs(la[i] - b.logits[i]));
        mag = fmax(mag, fabs(la[i]));
    }
    ck_assert_double_gt(mag, 1e-3);
    free(la);
    al_model_free(&a);
    al_model_free(&b);
    return d;
}

START_TEST(gqa_with_all_heads_should_equal_mha)
{
    al_model_config g, h;
    al_test_tiny_config(&g, al_variant_find("gqa"), 2, 16, 4, 4, 8, 17);
    al_test_tiny_config(&h, al_variant_find("mha"), 2, 16, 4, 4, 8, 17);
    g.attn_set[0] = 4;
    ck_assert_double_le(max_logit_diff(&g, &h), 1e-6);
}
END_TEST

START_TEST(gqa_with_one_head_should_equal_mqa)
{
    al_model_config g, q;
    al_test_tiny_config(&g, al_variant_find("gqa"), 2, 16, 4, 4, 8, 17);
    al_test_tiny_config(&q, al_variant_find("mqa"), 2, 16, 4, 4, 8, 17);
    g.attn_set[0] = 1;
    ck_assert_double_le(max_logit_diff(&g, &q), 1e-6);
}
END_TEST

START_TEST(init_follows_the_spec)
{
    al_model_config c;
    al_test_tiny_config(&c, al_variant_find("mha"), 4, 64, 4, 16, 8, 256);
    al_model m;
    al_err e;
    ck_assert_int_eq(al_model_init(&m, &c, &e), 0);
    al_model_init_weights(&m, 1);
    for (int i = 0; i < m.n_tensors; i++) {
        const al_tensor *t = &m.tensors[i];
        double ss = 0;
        for (size_t j = 0; j < t->numel; j++) ss += (double)m.params[t->offset + j] * m.params[t->offset + j];
        double rms = sqrt(ss / t->numel);
        double want = t->init == AL_INIT_ONES ? 1.0 : t->init == AL_INIT_RESID ? 0.02 / sqrt(8.0) : 0.02;
        ck_assert_msg(fabs(rms - want) < 0.1 * want, "%s rms %g want %g", t->name, rms, want);
    }
    ck_assert_ptr_nonnull(al_model_tensor(&m, "blocks.3.attn.wo.weight"));
    ck_assert_int_eq(al_model_tensor(&m, "blocks.0.attn.wo.weight")->init, AL_INIT_RESID);
    ck_assert_int_eq(al_model_tensor(&m, "blocks.0.mlp.w2.weight")->init, AL_INIT_RESID);
    ck_assert_int_eq(al_model_tensor(&m, "tok_emb.weight")->shape[0], 256);
    al_model_free(&m);
}
END_TEST

Suite *model_suite(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, whole_model_gradients_match_finite_differences);
    tcase_add_test(tc, backward_writes_every_gradient_whatever_the_buffers_held);
    tcase_add_test(tc, masked_loss_gradients_match_finite_differences);
    tcase_add_test(tc, causal_model_ignores_future_tokens);
    tcase_add_test(tc, non_causal_model_sees_future_tokens);
    tcase_add_test(tc, gqa_with_all_heads_should_equal_mha);
    tcase_add_test(tc, gqa_with_one_head_should_equal_mqa);
    tcase_add_test(tc, init_follows_the_spec);
    suite_add_tcase(s, tc);
    return s;
}
