/*
 * test_kvquant.c - int8/int4 KV caches (KIVI-style, al_kvcache.h): one
 * quantize/dequantize against the hand computation, the bytes against the
 * formula written out here, and every decodable variant decoding from them.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "al_decode.h"
#include "al_kvcache.h"
#include "al_registry.h"
#include "al_test.h"
#include "al_test_model.h"

/* A cache of rows of 6: 4 key channels (per channel), 2 value channels
 * (per token); groups of 4, 3 recent rows kept, 16 rows. The ring is then
 * 7 rows, so the group of rows 4..7 wraps around it. */
enum { EL = 6, KEL = 4, GRP = 4, RES = 3, CTXQ = 16 };

static void fill_rows(float x[CTXQ][EL], uint64_t seed)
{
    al_rng r;
    al_rng_seed(&r, seed);
    for (int t = 0; t < CTXQ; t++)
        for (int j = 0; j < EL; j++)   /* channels of very different ranges */
            x[t][j] = (float)(al_rng_normal(&r) * (j == 1 ? 40.0 : 1.0) + (j == 2 ? 5.0 : 0.0));
    for (int t = 0; t < CTXQ; t++) x[t][3] = 0.25f;   /* a constant channel: scale 0 */
}

/* code * scale + min, by the formula of the header, for n numbers. */
static float hand(float x, const float *grp, int n, int stride, int bits, float *scale)
{
    float mn = grp[0], mx = grp[0];
    for (int i = 1; i < n; i++) mn = fminf(mn, grp[i * stride]), mx = fmaxf(mx, grp[i * stride]);
    *scale = (mx - mn) / (float)((1 << bits) - 1);
    if (*scale == 0) return mn;
    float c = floorf((x - mn) / *scale + 0.5f);
    c = fminf(fmaxf(c, 0), (float)((1 << bits) - 1));
    return c * *scale + mn;
}

static void check_round_trip(int dt)
{
    int bits = al_kv_dtype_bits(dt);
    float x[CTXQ][EL], back[EL];
    fill_rows(x, 7 + (uint64_t)bits);
    al_kv_cache *c = al_kv_cache_new_quant(EL, KEL, CTXQ, dt, GRP, RES);
    for (int t = 0; t < CTXQ; t++) {   /* keys and values written apart, as prefill does */
        al_kv_put(c, t, 0, KEL, x[t]);
        al_kv_put(c, t, KEL, EL - KEL, x[t] + KEL);
    }
    /* after row 15: groups up to row 15 - RES = 12 are quantized: rows 0..11 */
    double worst = 0;
    for (int t = 0; t < CTXQ; t++) {
        al_kv_row_get(c, t, back);
        for (int j = 0; j < EL; j++) {
            float scale = 0, want = x[t][j];
            if (t < 12 && j < KEL)   /* per channel, over the group's 4 tokens */
                want = hand(x[t][j], &x[t / GRP * GRP][j], GRP, EL, bits, &scale);
            else if (t < 12)         /* per token, over its 2 value channels */
                want = hand(x[t][j], &x[t][KEL], EL - KEL, 1, bits, &scale);
            ck_assert_msg(fabsf(back[j] - want) <= 1e-5f * fmaxf(1.0f, fabsf(want)),
                          "%s row %d ch %d: %g, by hand %g", al_kv_dtype_name(dt), t, j,
                          back[j], want);
            ck_assert_msg(fabsf(back[j] - x[t][j]) <= scale / 2 * (1 + 1e-5f) + 1e-6f,
                          "%s row %d ch %d: off by %g, half a scale %g", al_kv_dtype_name(dt),
                          t, j, fabsf(back[j] - x[t][j]), scale / 2);
            if (t >= 12) ck_assert_float_eq(back[j], x[t][j]);   /* the f32 window */
            if (t < 12 && j == 3) ck_assert_float_eq(back[j], 0.25f);   /* constant: exact */
            worst = fmax(worst, fabs(back[j] - x[t][j]));
        }
    }
    ck_assert_msg(worst > 1e-4, "%s: nothing was quantized", al_kv_dtype_name(dt));
    /* al_kv_rows reads the same rows in one block */
    float tmp[CTXQ * EL];
    const float *rows = al_kv_rows(c, 0, CTXQ, tmp);
    for (int t = 0; t < CTXQ; t++) {
        al_kv_row_get(c, t, back);
        ck_assert_int_eq(memcmp(back, rows + t * EL, sizeof back), 0);
    }
    al_kv_cache_free(c);
}

START_TEST(one_quantize_dequantize_matches_the_hand_computation)
{
    check_round_trip(AL_KV_INT8);
    check_round_trip(AL_KV_INT4);
}
END_TEST

START_TEST(writing_row_zero_again_starts_a_new_sequence)
{
    float x[CTXQ][EL], y[CTXQ][EL], back[EL];
    fill_rows(x, 1), fill_rows(y, 2);
    al_kv_cache *c = al_kv_cache_new_quant(EL, KEL, CTXQ, AL_KV_INT8, GRP, RES);
    for (int t = 0; t < CTXQ; t++) al_kv_row_put(c, t, x[t]);
    for (int t = 0; t < 6; t++) al_kv_row_put(c, t, y[t]);   /* nothing quantized yet */
    for (int t = 0; t < 6; t++) {
        al_kv_row_get(c, t, back);
        ck_assert_int_eq(memcmp(back, y[t], sizeof back), 0);
    }
    al_kv_cache_free(c);
}
END_TEST

/* ---- bytes */

/* The header's formula, written out again. */
static size_t bytes_by_hand(size_t el, size_t kel, int ctx, int bits, int g, int r)
{
    size_t q = ctx - 1 - r > 0 ? (size_t)((ctx - 1 - r) / g * g) : 0;
    size_t ring = (size_t)(ctx < r + g ? ctx : r + g);
    return q * ((el * bits + 7) / 8) + 8 * (q / g) * kel + 8 * q * ((el - kel + g - 1) / g) +
           4 * ring * el;
}

START_TEST(bytes_equal_the_formula_with_scales_and_residual)
{
    /* one case counted on paper: 12 rows quantized (3 groups); int4 codes
     * 3 bytes a row (36); key scales and zeros 3 x 4 x 8 (96); value ones
     * 12 x 1 x 8 (96); the ring 7 rows of 6 f32 (168) */
    ck_assert_uint_eq(al_kv_cache_bytes_for(EL, KEL, CTXQ, AL_KV_INT4, GRP, RES), 396);
    static const int cases[][5] = {{6, 4, 16, 4, 3}, {64, 32, 256, 32, 32}, {64, 64, 100, 32, 0},
                                   {7, 0, 50, 8, 5}, {10, 5, 20, 32, 32}, {33, 33, 1, 32, 32}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int dt = AL_KV_INT8; dt <= AL_KV_INT4; dt++) {
            const int *k = cases[i];
            size_t want = bytes_by_hand(k[0], k[1], k[2], al_kv_dtype_bits(dt), k[3], k[4]);
            size_t live0 = al_kv_bytes_live();
            al_kv_cache *c = al_kv_cache_new_quant(k[0], k[1], k[2], dt, k[3], k[4]);
            ck_assert_uint_eq(al_kv_cache_bytes(c), want);
            ck_assert_uint_eq(al_kv_cache_bytes_for(k[0], k[1], k[2], dt, k[3], k[4]), want);
            ck_assert_uint_eq(al_kv_bytes_live() - live0, want);
            al_kv_cache_free(c);
            ck_assert_uint_eq(al_kv_bytes_live(), live0);
        }
}
END_TEST

/* ---- every variant */

enum { SEQ = 8, LONG = 40, VOCAB = 13 };

static int decodable(const al_variant *v)
{
    return al_variant_decodes(v);
}

static void make_model(al_model *m, const al_variant *v)
{
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, v, 2, 16, 4, 4, SEQ, VOCAB), 0);
    c.kv_quant_group = 4;   /* so that a short context quantizes */
    c.kv_quant_residual = 3;
    al_err e;
    ck_assert_msg(al_model_init(m, &c, &e) == 0, "%s", e.msg);
    al_model_init_weights(m, 5);
    for (size_t i = 0; i < m->n_params; i++) m->params[i] *= 4.0f;
}

/* Logits (LONG, VOCAB) from position SEQ - 1 on: a prefill of SEQ tokens
 * (which quantizes the first group already), then one step at a time, at
 * dtype; the decoder's bytes checked against the formula. */
static void decode_all(al_model *m, const int *tok, int dt, float *out)
{
    al_decoder d;
    al_err e;
    ck_assert_msg(al_decoder_init(&d, m, LONG, dt, &e) == 0, "%s", e.msg);
    size_t el = m->layers[0].attn->decode->kv_elems(m->layers[0].ctx);
    const char *n = m->cfg.attn->name;
    size_t kel = !strcmp(n, "mha") || !strcmp(n, "mqa") || !strcmp(n, "gqa") ? el / 2 : el;
    /* a bounded ring (local) holds fewer rows, and keeps them all f32 */
    int rows = al_model_layer_kv_rows(&m->cfg, 0, LONG), res = rows < LONG ? rows : 3;
    ck_assert_uint_eq(al_decoder_cache_bytes(&d),
                      m->cfg.n_layer * (dt >= AL_KV_INT8
                                            ? bytes_by_hand(el, kel, rows, al_kv_dtype_bits(dt), 4, res)
                                            : el * 4 * rows));
    ck_assert_uint_eq(al_decoder_cache_bytes(&d), al_model_kv_bytes_at(&m->cfg, dt, LONG));
    ck_assert_msg(al_decoder_prefill(&d, tok, SEQ, &e) == 0, "%s", e.msg);
    memcpy(out + (SEQ - 1) * VOCAB, d.logits, VOCAB * sizeof(float));
    for (int t = SEQ; t < LONG; t++)
        memcpy(out + t * VOCAB, al_decoder_step(&d, tok[t]), VOCAB * sizeof(float));
    al_decoder_free(&d);
}

START_TEST(every_variant_decodes_from_int8_and_int4_caches)
{
    int tok[LONG], n = 0;
    al_rng r;
    al_rng_seed(&r, 3);
    for (int i = 0; i < LONG; i++) tok[i] = (int)al_rng_below(&r, VOCAB);
    for (int i = 0; i < al_variant_count(); i++) {
        const al_variant *v = al_variant_at(i);
        if (!decodable(v)) continue;
        al_model m;
        make_model(&m, v);
        float f32[LONG * VOCAB], q8[LONG * VOCAB], q4[LONG * VOCAB];
        decode_all(&m, tok, AL_KV_F32, f32);
        decode_all(&m, tok, AL_KV_INT8, q8);
        decode_all(&m, tok, AL_KV_INT4, q4);
        double d8 = 0, d4 = 0, amax = 0;
        for (int k = (SEQ - 1) * VOCAB; k < LONG * VOCAB; k++) {
            ck_assert_msg(isfinite(q8[k]) && isfinite(q4[k]), "%s: not finite", v->name);
            d8 = fmax(d8, fabs(q8[k] - f32[k])), d4 = fmax(d4, fabs(q4[k] - f32[k]));
            amax = fmax(amax, fabs(f32[k]));
        }
        /* int8 steps are 16 times finer than int4's; a bounded ring is f32 */
        if (al_model_layer_kv_rows(&m.cfg, 0, LONG) < LONG)
            ck_assert_msg(d8 == 0 && d4 == 0, "%s: a ring cache changed: %g %g", v->name, d8, d4);
        else
            ck_assert_msg(d8 < 0.02 * amax && d8 < d4 && d4 > 1e-6,
                          "%s: int8 %g int4 %g (logits to %g)", v->name, d8, d4, amax);
        fprintf(stderr, "kvquant: %s logits off by int8 %.2g, int4 %.2g (largest %.3g)\n",
                v->name, d8, d4, amax);
        al_model_free(&m);
        n++;
    }
    ck_assert_int_ge(n, 7);   /* mha mqa gqa mla gta gla tpa */
}
END_TEST

START_TEST(int_dtypes_parse_and_name)
{
    ck_assert_int_eq(al_kv_dtype_parse("int8"), AL_KV_INT8);
    ck_assert_int_eq(al_kv_dtype_parse("int4"), AL_KV_INT4);
    ck_assert_int_eq(al_kv_dtype_parse("int2"), -1);
    ck_assert_str_eq(al_kv_dtype_name(AL_KV_INT4), "int4");
    ck_assert_int_eq(al_kv_dtype_bits(AL_KV_INT8), 8);
    ck_assert_int_eq(al_kv_dtype_bits(AL_KV_F16), 0);
}
END_TEST

/* model.kv_dtype takes int8/int4 and the two keys are checked like any. */
START_TEST(config_files_take_the_int_dtypes_and_check_the_keys)
{
    char *dir = al_test_tmpdir(), *out;
    char *ok = al_test_write(dir, "ok.yaml",
                             "model: {n_layer: 1, d_model: 32, n_head: 4, seq_len: 64,\n"
                             "        kv_dtype: int4, kv_quant_group: 8, kv_quant_residual: 0}\n");
    char *bad = al_test_write(dir, "bad.yaml", "model: {kv_dtype: int8, kv_quant_group: 0}\n");
    char *neg = al_test_write(dir, "neg.yaml", "model: {kv_quant_residual: -1}\n");
    char args[4400];
    snprintf(args, sizeof args, "kv %s", ok);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    /* rows of 64 (K 32 | V 32), context 64, group 8, residual 0: 56 rows
     * quantized; codes 56 x 32, key scales 7 x 32 x 8, value ones 56 x 4 x
     * 8, ring 8 x 64 x 4: 1792 + 1792 + 1792 + 2048 = 7424, over 64: 116 */
    ck_assert_msg(strstr(out, "kv_dtype: int4 kv_bytes_per_token=116\n"), "%s", out);
    free(out);
    snprintf(args, sizeof args, "kv %s", bad);
    ck_assert_int_eq(al_test_attnlab(args, &out), 2);
    ck_assert_msg(strstr(out, "'model.kv_quant_group' (0) must be positive"), "%s", out);
    free(out);
    snprintf(args, sizeof args, "kv %s", neg);
    ck_assert_int_eq(al_test_attnlab(args, &out), 2);
    ck_assert_msg(strstr(out, "kv_quant_residual"), "%s", out);
    free(out);
    free(ok), free(bad), free(neg), free(dir);
}
END_TEST

Suite *kvquant_suite(void)
{
    Suite *s = suite_create("kvquant");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, one_quantize_dequantize_matches_the_hand_computation);
    tcase_add_test(tc, writing_row_zero_again_starts_a_new_sequence);
    tcase_add_test(tc, bytes_equal_the_formula_with_scales_and_residual);
    tcase_add_test(tc, every_variant_decodes_from_int8_and_int4_caches);
    tcase_add_test(tc, int_dtypes_parse_and_name);
    tcase_add_test(tc, config_files_take_the_int_dtypes_and_check_the_keys);
    suite_add_tcase(s, tc);
    return s;
}
