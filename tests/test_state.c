/*
 * test_state.c - decode storage that is a state rewritten in place
 * (AL_KV_STATE, attnlab_variant.h), through a test-only variant: "runsum",
 * whose layer output is wo . (the mean of wv . x over the tokens so far),
 * and whose decode keeps the running sum of wv . x, D floats whatever the
 * context. The core must allocate it once as f32 whatever kv_dtype says,
 * count its bytes as held at every context and none per token, and decode
 * through it exactly as the training forward computes.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "al_decode.h"
#include "al_kvcache.h"
#include "al_registry.h"
#include "al_test.h"
#include "al_test_model.h"

/* ------------------------------------------------------------ runsum */

static int rs_D(const void *ctx) { return al_ctx_shape(ctx)->d_model; }

static int rs_params(const void *ctx, al_param_spec *out)
{
    int D = rs_D(ctx);
    out[0] = (al_param_spec){"wv", D, D, AL_INIT_NORMAL};
    out[1] = (al_param_spec){"wo", D, D, AL_INIT_RESID};
    return 2;
}

/* v (BT, D) | y (BT, D): y_t = mean of v_0 .. v_t (per sequence). */
static size_t rs_act(const void *ctx, int B, int T) { return 2 * (size_t)B * T * rs_D(ctx); }
static size_t rs_scratch(const void *ctx, int B, int T) { return 2 * (size_t)B * T * rs_D(ctx); }

static void rs_forward(const void *ctx, float *out, float *act, float *scratch, const float *x,
                       float *const *p, int B, int T)
{
    int D = rs_D(ctx), BT = B * T;
    float *v = act, *y = act + (size_t)BT * D;
    al_linear_forward(v, x, p[0], BT, D, D);   /* v = x . wv^T */
    for (int b = 0; b < B; b++)
        for (int j = 0; j < D; j++) {
            double sum = 0;   /* in double, as decode keeps it in f32: compared to 1e-5 */
            for (int t = 0; t < T; t++) {
                sum += v[((size_t)b * T + t) * D + j];
                y[((size_t)b * T + t) * D + j] = (float)(sum / (t + 1));
            }
        }
    al_linear_forward(out, y, p[1], BT, D, D);   /* out = y . wo^T */
}

/* Adds (no AL_VARIANT_WRITES_GRADS): dy = dout . wo, dv_u = sum_{t >= u}
 * dy_t / (t + 1), then the products' gradients. */
static void rs_backward(const void *ctx, float *dx, float *const *dp, float *scratch,
                        const float *dout, const float *x, const float *act, float *const *p,
                        int B, int T)
{
    int D = rs_D(ctx), BT = B * T;
    const float *y = act + (size_t)BT * D;
    float *dy = scratch, *dv = scratch + (size_t)BT * D;
    memset(dy, 0, (size_t)BT * D * sizeof(float));
    memset(dv, 0, (size_t)BT * D * sizeof(float));
    al_linear_backward(dy, dp[1], dout, y, p[1], BT, D, D);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < D; j++) {
            double acc = 0;
            for (int t = T - 1; t >= 0; t--) {
                acc += dy[((size_t)b * T + t) * D + j] / (t + 1);
                dv[((size_t)b * T + t) * D + j] = (float)acc;
            }
        }
    al_linear_backward(dx, dp[0], dv, x, p[0], BT, D, D);
}

/* The state: the running sum of v, D floats. */
static size_t rs_state(const void *ctx) { return (size_t)rs_D(ctx); }

static void rs_prefill(const void *ctx, al_kv_cache *cache, const float *act, float *const *p,
                       int T)
{
    int D = rs_D(ctx);
    const float *y = act + (size_t)T * D;   /* B = 1: the sum is the last mean times T */
    float sum[64];
    AL_ASSERT(D <= 64);
    for (int j = 0; j < D; j++) sum[j] = y[(size_t)(T - 1) * D + j] * (float)T;
    al_kv_row_put(cache, 0, sum);
}

/* v (D) | the state (D) | y (D) */
static size_t rs_dscratch(const void *ctx, int context) { return 3 * (size_t)rs_D(ctx); }

static void rs_decode(const void *ctx, float *out, float *scratch, const float *x,
                      float *const *p, al_kv_cache *cache, int pos)
{
    int D = rs_D(ctx);
    float *v = scratch, *sum = v + D, *y = sum + D;
    al_linear_row(v, x, p[0], D, D);
    if (pos == 0) memset(sum, 0, (size_t)D * sizeof(float));
    else al_kv_row_get(cache, 0, sum);
    for (int j = 0; j < D; j++) sum[j] += v[j], y[j] = sum[j] / (float)(pos + 1);
    al_kv_row_put(cache, 0, sum);   /* rewritten in place */
    al_linear_row(out, y, p[1], D, D);
}

static const al_variant_train rs_train = {rs_params, rs_act, rs_scratch, rs_forward,
                                          rs_backward, 0};
static const al_variant_decode rs_decode_table = {
    .storage = AL_KV_STATE, .kv_elems = rs_state, .prefill = rs_prefill,
    .scratch_floats = rs_dscratch, .decode = rs_decode};
static const al_variant runsum = {.api_version = AL_VARIANT_API_VERSION, .name = "runsum",
                                  .description = "test: the running mean of wv . x",
                                  .train = &rs_train, .decode = &rs_decode_table};

static const al_variant *register_runsum(void)
{
    al_err e;
    if (!al_variant_find("runsum"))
        ck_assert_msg(al_variant_register(&runsum, "test_state.c", &e) == 0, "%s", e.msg);
    return al_variant_find("runsum");
}

/* ------------------------------------------------------------ tests */

/* Forward, gradients against finite differences, causality, decode and
 * prefill parity, batches, every cache dtype, cache bytes: the conformance
 * suite of any variant passes. */
START_TEST(a_state_layer_passes_the_conformance_suite)
{
    al_test_variant_generic(register_runsum());
}
END_TEST

/* The registry settles a state's rows (one) and keys (all of it). */
START_TEST(a_state_is_one_row_of_its_floats_at_any_context)
{
    const al_variant *v = register_runsum();
    al_attn_shape s = {16, 2, 8, 8, 1, 10000.0f, 1e-5f, {0}, .rope = {.base = 0}};
    const void *ctx = al_test_ctx_of(v, &s);
    for (int n = 1; n <= 1000; n *= 10) ck_assert_int_eq(v->decode->kv_rows(ctx, n), 1);
    ck_assert_uint_ge(v->decode->kv_key_elems(ctx), 16);
}
END_TEST

/* Allocated once, f32 whatever the dtype asked, the same bytes held at
 * every context (counted and measured), none per token. */
START_TEST(a_state_is_held_whole_at_f32_at_every_context)
{
    const al_variant *v = register_runsum();
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, v, 3, 16, 2, 8, 8, 11), 0);
    al_model m;
    al_err e;
    ck_assert_msg(al_model_init(&m, &c, &e) == 0, "%s", e.msg);
    size_t want = 3 * 16 * sizeof(float);   /* 3 layers of D floats */
    ck_assert_uint_eq(al_model_kv_elems_per_token(&c), 0);
    static const int dtypes[] = {AL_KV_F32, AL_KV_BF16, AL_KV_F16, AL_KV_INT8, AL_KV_INT4};
    for (int i = 0; i < 5; i++)
        for (int n = 1; n <= 1000; n *= 10) {
            ck_assert_uint_eq(al_model_kv_bytes_at(&c, dtypes[i], n), want);
            size_t live0 = al_kv_bytes_live();
            al_decoder d;
            ck_assert_msg(al_decoder_init(&d, &m, n, dtypes[i], &e) == 0, "%s", e.msg);
            ck_assert_uint_eq(al_kv_bytes_live() - live0, want);
            ck_assert_uint_eq(al_decoder_cache_bytes(&d), want);
            for (int l = 0; l < 3; l++) {
                ck_assert_int_eq(al_kv_cache_dtype(d.cache[l]), AL_KV_F32);
                ck_assert_int_eq(al_kv_cache_context(d.cache[l]), 1);
            }
            al_decoder_free(&d);
        }
    al_model_free(&m);
}
END_TEST

/* Decoding 40 tokens through the state, from an int8 decoder, gives the
 * forward pass's logits at every position: the state was not quantized. */
START_TEST(decoding_through_the_state_equals_the_forward_pass)
{
    const al_variant *v = register_runsum();
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, v, 2, 16, 2, 8, 40, 11), 0);
    al_model m, ref;
    al_err e;
    ck_assert_int_eq(al_model_init(&m, &c, &e), 0);
    ck_assert_int_eq(al_model_init(&ref, &c, &e), 0);
    al_model_init_weights(&m, 3);
    memcpy(ref.params, m.params, m.n_params * sizeof(float));
    int tok[40];
    for (int i = 0; i < 40; i++) tok[i] = (i * 7 + 3) % 11;
    ck_assert_int_eq(al_model_reserve(&ref, 1, 40, &e), 0);
    al_model_forward(&ref, tok, NULL, NULL, 1, 40);
    al_decoder d;
    ck_assert_int_eq(al_decoder_init(&d, &m, 40, AL_KV_INT8, &e), 0);
    ck_assert_int_eq(al_decoder_prefill(&d, tok, 5, &e), 0);
    double worst = 0;
    for (int i = 5; i < 40; i++) {
        const float *lg = al_decoder_step(&d, tok[i]);
        for (int k = 0; k < 11; k++)
            worst = fmax(worst, fabs(lg[k] - ref.logits[(size_t)i * 11 + k]));
    }
    ck_assert_msg(worst < 1e-4, "decode vs forward: %g", worst);
    al_decoder_free(&d);
    al_model_free(&m), al_model_free(&ref);
}
END_TEST

Suite *state_suite(void)
{
    Suite *s = suite_create("state");
    TCase *tc = tcase_create("state");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_state_layer_passes_the_conformance_suite);
    tcase_add_test(tc, a_state_is_one_row_of_its_floats_at_any_context);
    tcase_add_test(tc, a_state_is_held_whole_at_f32_at_every_context);
    tcase_add_test(tc, decoding_through_the_state_equals_the_forward_pass);
    suite_add_tcase(s, tc);
    return s;
}
