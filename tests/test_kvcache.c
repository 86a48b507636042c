/*
 * test_kvcache.c - the cache's number formats against known bit patterns
 * and independent conversions (the compiler's _Float16; bf16 rounded in
 * double), the storage it holds, and the shared decode attention against
 * plain loops.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "al_kvcache.h"
#include "al_parallel.h"
#include "al_test.h"
#include "al_util.h"

START_TEST(f16_converts_known_values)
{
    static const struct { float f; uint16_t h; } cases[] = {
        {0.0f, 0x0000}, {-0.0f, 0x8000}, {1.0f, 0x3C00}, {-2.0f, 0xC000},
        {0.5f, 0x3800}, {65504.0f, 0x7BFF},                 /* largest half */
        {65519.0f, 0x7BFF}, {65520.0f, 0x7C00},             /* half-way to 65536 rounds up: inf */
        {1e10f, 0x7C00}, {-1e10f, 0xFC00},
        {0x1p-14f, 0x0400},                                 /* smallest normal */
        {0x1p-24f, 0x0001},                                 /* smallest subnormal */
        {0x1p-25f, 0x0000},                                 /* tie: to even (0) */
        {0x1.8p-25f, 0x0001},                               /* above the tie */
        {0x3p-25f, 0x0002},                                 /* 1.5 units: tie to even (2) */
        {0x1.ffcp-15f, 0x0400},                             /* 1023.5 units: tie, up to normal */
        {0x1.ff8p-15f, 0x03FF},                             /* largest subnormal */
        {1.0f + 0x1p-11f, 0x3C00},                          /* tie: to even (down) */
        {1.0f + 0x3p-11f, 0x3C02},                          /* tie: to even (up) */
        {1.0f + 0x1.8p-11f, 0x3C01},                        /* above the tie */
        {0.1f, 0x2E66}, {3.14159265f, 0x4248},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        ck_assert_msg(al_f32_to_f16(cases[i].f) == cases[i].h, "%a -> 0x%04x, want 0x%04x",
                      (double)cases[i].f, al_f32_to_f16(cases[i].f), cases[i].h);
    ck_assert_uint_eq(al_f32_to_f16(INFINITY), 0x7C00);
    ck_assert_uint_eq(al_f32_to_f16(-INFINITY), 0xFC00);
    uint16_t n = al_f32_to_f16(NAN);
    ck_assert_msg((n & 0x7C00) == 0x7C00 && (n & 0x3FF), "NaN -> 0x%04x", n);
    ck_assert(isnan(al_f16_to_f32(n)));
    ck_assert(isinf(al_f16_to_f32(0x7C00)) && al_f16_to_f32(0xFC00) < 0);
    ck_assert(al_f16_to_f32(0x0001) == 0x1p-24f);
    ck_assert(al_f16_to_f32(0x03FF) == 0x3FFp-24f);
    ck_assert(al_f16_to_f32(0x8001) == -0x1p-24f);
    ck_assert(al_f16_to_f32(0x7BFF) == 65504.0f);
}
END_TEST

/* Every half goes to f32 and back unchanged (NaNs stay NaNs), and matches
 * the compiler's own _Float16 widening. */
START_TEST(f16_round_trips_every_half)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = al_f16_to_f32((uint16_t)h);
        int is_nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
        if (is_nan) {
            if (!isnan(f)) ck_abort_msg("0x%04x", h);
            continue;
        }
        if (al_f32_to_f16(f) != h)
            ck_abort_msg("0x%04x -> %a -> 0x%04x", h, (double)f, al_f32_to_f16(f));
        _Float16 ref;
        uint16_t hb = (uint16_t)h;
        memcpy(&ref, &hb, sizeof ref);
        if (al_test_f32_bits(f) != al_test_f32_bits((float)ref))
            ck_abort_msg("0x%04x vs _Float16", h);
    }
}
END_TEST

/* Narrowing matches the compiler's _Float16 (round to nearest even) on
 * random bit patterns and on every float near the subnormal, normal and
 * overflow boundaries. */
START_TEST(f16_narrowing_matches_the_compiler)
{
    al_rng r;
    al_rng_seed(&r, 7);
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = (uint32_t)al_rng_u64(&r);
        if (i % 2) u = (u & 0x80000000u) | (0x32000000u + u % 0x16000000u); /* half range */
        float f = al_test_bits_f32(u);
        if (isnan(f)) continue;
        _Float16 ref = (_Float16)f;
        uint16_t rb;
        memcpy(&rb, &ref, sizeof rb);
        if (al_f32_to_f16(f) != rb)   /* (ck_assert per value would dominate the run) */
            ck_abort_msg("%a: 0x%04x want 0x%04x", (double)f, al_f32_to_f16(f), rb);
    }
}
END_TEST

/* bf16 by another route: scale to the target precision in double and round
 * with rint (ties to even); 8 significant bits for normals, units of
 * 2^-133 below 2^-126; past the largest bf16 (half an ulp up) it is inf. */
static float bf16_ref(float f)
{
    double x = f, a = fabs(x);
    if (a == 0 || isinf(x)) return f;
    int e;
    frexp(a, &e);                      /* a = m 2^e, m in [0.5, 1) */
    double unit = a < 0x1p-126 ? 0x1p-133 : ldexp(1.0, e - 8);
    double q = rint(a / unit) * unit;
    if (q >= 0x1p128) q = INFINITY;     /* rounded past the largest, (2 - 2^-7) 2^127 */
    return (float)(x < 0 ? -q : q);
}

START_TEST(bf16_converts_known_values_and_matches_rounding_in_double)
{
    ck_assert_uint_eq(al_f32_to_bf16(1.0f), 0x3F80);
    ck_assert_uint_eq(al_f32_to_bf16(-2.0f), 0xC000);
    ck_assert_uint_eq(al_f32_to_bf16(1.0f + 0x1p-8f), 0x3F80);          /* tie: even, down */
    ck_assert_uint_eq(al_f32_to_bf16(1.0f + 0x3p-8f), 0x3F82);          /* tie: even, up */
    ck_assert_uint_eq(al_f32_to_bf16(1.0f + 0x1.02p-8f), 0x3F81);       /* above the tie */
    ck_assert_uint_eq(al_f32_to_bf16(3.14159265f), 0x4049);
    ck_assert_uint_eq(al_f32_to_bf16(FLT_MAX), 0x7F80);                  /* rounds to inf */
    ck_assert_uint_eq(al_f32_to_bf16(INFINITY), 0x7F80);
    ck_assert_uint_eq(al_f32_to_bf16(-INFINITY), 0xFF80);
    ck_assert_uint_eq(al_f32_to_bf16(0x1p-149f), 0x0000);                /* below half a unit */
    ck_assert_uint_eq(al_f32_to_bf16(0x1p-133f), 0x0001);                /* smallest bf16 */
    uint16_t n = al_f32_to_bf16(NAN), sn = al_f32_to_bf16(al_test_bits_f32(0x7F800001u));
    ck_assert(isnan(al_bf16_to_f32(n)) && isnan(al_bf16_to_f32(sn)));   /* never inf */
    ck_assert(al_bf16_to_f32(0x4049) == al_test_bits_f32(0x40490000u));
    al_rng r;
    al_rng_seed(&r, 3);
    for (int i = 0; i < 2000000; i++) {
        float f = al_test_bits_f32((uint32_t)al_rng_u64(&r));
        if (isnan(f)) continue;
        float got = al_bf16_to_f32(al_f32_to_bf16(f)), want = bf16_ref(f);
        if (al_test_f32_bits(got) != al_test_f32_bits(want))
            ck_abort_msg("%a: %a want %a", (double)f, (double)got, (double)want);
    }
}
END_TEST

START_TEST(dtype_names_parse_and_sizes)
{
    ck_assert_int_eq(al_kv_dtype_parse("f32"), AL_KV_F32);
    ck_assert_int_eq(al_kv_dtype_parse("bf16"), AL_KV_BF16);
    ck_assert_int_eq(al_kv_dtype_parse("f16"), AL_KV_F16);
    ck_assert_int_eq(al_kv_dtype_parse("fp16"), -1);
    ck_assert_uint_eq(al_kv_dtype_size(AL_KV_F32), 4);
    ck_assert_uint_eq(al_kv_dtype_size(AL_KV_BF16), 2);
    ck_assert_uint_eq(al_kv_dtype_size(AL_KV_F16), 2);
    ck_assert_str_eq(al_kv_dtype_name(AL_KV_BF16), "bf16");
}
END_TEST

/* Storage is exactly context * elems * size, counted in the cache and in
 * the live tally, and given back on free. */
START_TEST(cache_holds_and_counts_its_bytes)
{
    size_t live0 = al_kv_bytes_live();
    al_kv_cache *c[AL_KV_NDTYPES];
    size_t want = 0;
    for (int dt = 0; dt < AL_KV_NDTYPES; dt++) {
        c[dt] = al_kv_cache_new(10, 33, dt);
        ck_assert_uint_eq(al_kv_cache_bytes(c[dt]), 33 * 10 * (dt == AL_KV_F32 ? 4 : 2));
        ck_assert_int_eq(al_kv_cache_context(c[dt]), 33);
        ck_assert_uint_eq(al_kv_cache_elems(c[dt]), 10);
        want += al_kv_cache_bytes(c[dt]);
    }
    ck_assert_uint_eq(al_kv_bytes_live() - live0, want);
    for (int dt = 0; dt < AL_KV_NDTYPES; dt++) al_kv_cache_free(c[dt]);
    ck_assert_uint_eq(al_kv_bytes_live(), live0);
}
END_TEST

/* Rows come back exactly (f32) or as the element-wise conversion; partial
 * puts land at their offset; al_kv_rows agrees with row_get. */
START_TEST(rows_round_trip_through_each_dtype)
{
    al_rng r;
    al_rng_seed(&r, 5);
    enum { E = 7, N = 70 };
    float src[N][E], got[E], tmp[AL_KV_TILE * E];
    for (int t = 0; t < N; t++)
        for (int j = 0; j < E; j++) src[t][j] = (float)(3 * al_rng_normal(&r));
    for (int dt = 0; dt < AL_KV_NDTYPES; dt++) {
        al_kv_cache *c = al_kv_cache_new(E, N, dt);
        for (int t = 0; t < N; t++) {
            al_kv_put(c, t, 0, 3, src[t]);
            al_kv_put(c, t, 3, E - 3, src[t] + 3);
        }
        for (int t = 0; t < N; t++) {
            al_kv_row_get(c, t, got);
            for (int j = 0; j < E; j++) {
                float want = dt == AL_KV_F32    ? src[t][j]
                             : dt == AL_KV_BF16 ? al_bf16_to_f32(al_f32_to_bf16(src[t][j]))
                                                : al_f16_to_f32(al_f32_to_f16(src[t][j]));
                ck_assert_msg(got[j] == want, "dtype %d row %d col %d", dt, t, j);
            }
        }
        const float *rows = al_kv_rows(c, 60, 10, tmp);
        for (int t = 0; t < 10; t++) {
            al_kv_row_get(c, 60 + t, got);
            ck_assert(memcmp(rows + t * E, got, sizeof got) == 0);
        }
        al_kv_cache_free(c);
    }
}
END_TEST

/* The block conversion (vectorised) gives the bits of the one-value
 * conversions for every 16-bit pattern a cache can hold. */
START_TEST(block_conversion_matches_every_value)
{
    enum { E = 256 };   /* E * E = 65536 values */
    static float want[E * E], tmp[AL_KV_TILE * E];
    for (int dt = AL_KV_BF16; dt <= AL_KV_F16; dt++) {
        al_kv_cache *c = al_kv_cache_new(E, E, dt);
        for (uint32_t h = 0; h < E * E; h++) {
            float f = dt == AL_KV_BF16 ? al_bf16_to_f32((uint16_t)h) : al_f16_to_f32((uint16_t)h);
            uint16_t stored = dt == AL_KV_BF16 ? al_f32_to_bf16(f) : al_f32_to_f16(f);
            want[h] = dt == AL_KV_BF16 ? al_bf16_to_f32(stored) : al_f16_to_f32(stored);
            al_kv_put(c, (int)(h / E), (int)(h % E), 1, &f);
        }
        for (int t0 = 0; t0 < E; t0 += AL_KV_TILE) {
            int nt = E - t0 < AL_KV_TILE ? E - t0 : AL_KV_TILE;
            const float *rows = al_kv_rows(c, t0, nt, tmp);
            for (int i = 0; i < nt * E; i++)
                if (al_test_f32_bits(rows[i]) != al_test_f32_bits(want[t0 * E + i]))
                    ck_abort_msg("dtype %d value %d: 0x%08x vs 0x%08x", dt, t0 * E + i,
                                 al_test_f32_bits(rows[i]), al_test_f32_bits(want[t0 * E + i]));
        }
        al_kv_cache_free(c);
    }
}
END_TEST

/* al_kv_attend against the textbook two passes in double (all scores,
 * their softmax, then the weighted values), on the same stored rows, so
 * the only difference is the kernel's float rounding and its block-by-block
 * (online) softmax. qscale spreads the scores: at 8 a head's max moves by
 * tens between blocks and the earlier blocks' outputs are rescaled by tiny
 * factors. S and tile are allocated at exactly the documented sizes (the
 * ASan build catches an overrun). */
static void check_attend(int dt, int n, int H, int G, int dqk, int dv, double qscale)
{
    enum { OFF = 2 };
    int elems = OFF + G * (dqk + dv) + 1, Hg = H / G;
    al_rng r;
    al_rng_seed(&r, 11 + n);
    al_kv_cache *c = al_kv_cache_new(elems, n + 3, dt);
    float *row = malloc(elems * sizeof(float)), *q = malloc(H * dqk * sizeof(float));
    float *out = malloc(H * dv * sizeof(float)), *out2 = malloc(H * dv * sizeof(float));
    float *S = malloc(AL_KV_ATTEND_S(H) * sizeof(float));
    float *tile = malloc(AL_KV_TILE * elems * sizeof(float));
    float *all = malloc((size_t)n * elems * sizeof(float));
    double *s = malloc(n * sizeof(double));
    for (int t = 0; t < n; t++) {
        for (int j = 0; j < elems; j++) row[j] = (float)al_rng_normal(&r);
        al_kv_row_put(c, t, row);
        al_kv_row_get(c, t, all + (size_t)t * elems);
    }
    for (int j = 0; j < H * dqk; j++) q[j] = (float)(qscale * al_rng_normal(&r));
    al_kv_attend(out, S, tile, q, c, n, H, G, dqk, dv, OFF, OFF + G * dqk, 0.7f);
    al_kv_attend(out2, S, tile, q, c, n, H, G, dqk, dv, OFF, OFF + G * dqk, 0.7f);
    ck_assert_msg(memcmp(out, out2, H * dv * sizeof(float)) == 0, "not deterministic");
    for (int h = 0; h < H; h++) {
        const float *k = all + OFF + (h / Hg) * dqk, *v = all + OFF + G * dqk + (h / Hg) * dv;
        double mx = -INFINITY, sum = 0;
        for (int t = 0; t < n; t++) {   /* pass 1: scores and their softmax */
            s[t] = 0;
            for (int j = 0; j < dqk; j++) s[t] += 0.7 * q[h * dqk + j] * k[(size_t)t * elems + j];
            mx = fmax(mx, s[t]);
        }
        for (int t = 0; t < n; t++) sum += s[t] = exp(s[t] - mx);
        for (int j = 0; j < dv; j++) {   /* pass 2: the weighted values */
            double y = 0, ymax = 0;
            for (int t = 0; t < n; t++) {
                y += s[t] / sum * v[(size_t)t * elems + j];
                ymax = fmax(ymax, fabs(v[(size_t)t * elems + j]));
            }
            /* a few float roundings per term, relative to the largest value */
            ck_assert_msg(fabs(y - out[h * dv + j]) <= 2e-6 * ymax,
                          "dt %d n %d H %d G %d h %d j %d: %.9g vs %.9g", dt, n, H, G, h, j, y,
                          out[h * dv + j]);
        }
    }
    free(row), free(q), free(out), free(out2), free(S), free(tile), free(all), free(s);
    al_kv_cache_free(c);
}

START_TEST(attend_matches_two_passes_in_double)
{
    const int T = AL_KV_TILE;
    const int ns[] = {1, 2, T - 1, T, T + 1, 2 * T, 3 * T + 5};
    for (int dt = 0; dt < AL_KV_NDTYPES; dt++)
        for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
            check_attend(dt, ns[i], 4, 1, 6, 5, 1.0);   /* multi-query */
            check_attend(dt, ns[i], 4, 2, 6, 5, 1.0);
            check_attend(dt, ns[i], 3, 3, 6, 5, 1.0);   /* one head per group */
            check_attend(dt, ns[i], 6, 2, 5, 7, 8.0);   /* dqk < dv, spread scores */
            check_attend(dt, ns[i], 1, 1, 48, 32, 3.0); /* mla's shape */
        }
}
END_TEST

/* al_kv_attend2: a key made of two slices of the row (the second shared by
 * every group when kstride2 is 0, as GTA's RoPE half) against two passes
 * in double over the concatenated key, at 1 and 2 threads (the threaded
 * split past one tile). Row: pad | k1 (G, d1) | k2 (G or 1, d2) | v (G, dv). */
static void check_attend2(int dt, int n, int H, int G, int d1, int d2, int shared, int dv,
                          int threads)
{
    enum { OFF = 3 };
    int n2 = shared ? 1 : G, k2off = OFF + G * d1, voff = k2off + n2 * d2;
    int elems = voff + G * dv, Hg = H / G, dq = d1 + d2;
    al_rng r;
    al_rng_seed(&r, 5 + n);
    al_kv_cache *c = al_kv_cache_new(elems, n, dt);
    float *row = malloc(elems * sizeof(float)), *q = malloc(H * dq * sizeof(float));
    float *out = malloc(H * dv * sizeof(float)), *S = malloc(AL_KV_ATTEND_S(H) * sizeof(float));
    float *tile = malloc(AL_KV_TILE * elems * sizeof(float));
    float *all = malloc((size_t)n * elems * sizeof(float));
    double *s = malloc(n * sizeof(double));
    for (int t = 0; t < n; t++) {
        for (int j = 0; j < elems; j++) row[j] = (float)al_rng_normal(&r);
        al_kv_row_put(c, t, row);
        al_kv_row_get(c, t, all + (size_t)t * elems);
    }
    for (int j = 0; j < H * dq; j++) q[j] = (float)(2.0 * al_rng_normal(&r));
    al_parallel_set_threads(threads);
    al_kv_attend2(out, S, tile, q, c, n, H, G, d1, OFF, d2, k2off, shared ? 0 : d2, dv, voff,
                  0.5f);
    al_parallel_set_threads(1);
    for (int h = 0; h < H; h++) {
        int g = h / Hg;
        const float *k1 = all + OFF + g * d1, *k2 = all + k2off + (shared ? 0 : g * d2);
        const float *v = all + voff + g * dv;
        double mx = -INFINITY, sum = 0;
        for (int t = 0; t < n; t++) {
            s[t] = 0;
            for (int j = 0; j < d1; j++) s[t] += 0.5 * q[h * dq + j] * k1[(size_t)t * elems + j];
            for (int j = 0; j < d2; j++)
                s[t] += 0.5 * q[h * dq + d1 + j] * k2[(size_t)t * elems + j];
            mx = fmax(mx, s[t]);
        }
        for (int t = 0; t < n; t++) sum += s[t] = exp(s[t] - mx);
        for (int j = 0; j < dv; j++) {
            double y = 0, ymax = 0;
            for (int t = 0; t < n; t++) {
                y += s[t] / sum * v[(size_t)t * elems + j];
                ymax = fmax(ymax, fabs(v[(size_t)t * elems + j]));
            }
            ck_assert_msg(fabs(y - out[h * dv + j]) <= 2e-6 * ymax,
                          "dt %d n %d H %d G %d shared %d threads %d h %d j %d: %.9g vs %.9g",
                          dt, n, H, G, shared, threads, h, j, y, out[h * dv + j]);
        }
    }
    free(row), free(q), free(out), free(S), free(tile), free(all), free(s);
    al_kv_cache_free(c);
}

START_TEST(attend2_reads_a_key_made_of_two_slices)
{
    const int ns[] = {1, 7, AL_KV_TILE + 1, 2 * AL_KV_TILE + 5};
    for (int dt = 0; dt < AL_KV_NDTYPES; dt++)
        for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
            for (int threads = 1; threads <= 2; threads++) {
                check_attend2(dt, ns[i], 4, 2, 4, 4, 1, 8, threads);   /* GTA: a shared RoPE half */
                check_attend2(dt, ns[i], 4, 4, 6, 2, 0, 5, threads);   /* per-group second slice */
                check_attend2(dt, ns[i], 2, 1, 8, 8, 0, 8, threads);   /* one group */
            }
}
END_TEST

Suite *kvcache_suite(void)
{
    Suite *s = suite_create("kvcache");
    TCase *tc = tcase_create("kvcache");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, f16_converts_known_values);
    tcase_add_test(tc, f16_round_trips_every_half);
    tcase_add_test(tc, f16_narrowing_matches_the_compiler);
    tcase_add_test(tc, bf16_converts_known_values_and_matches_rounding_in_double);
    tcase_add_test(tc, dtype_names_parse_and_sizes);
    tcase_add_test(tc, cache_holds_and_counts_its_bytes);
    tcase_add_test(tc, rows_round_trip_through_each_dtype);
    tcase_add_test(tc, block_conversion_matches_every_value);
    tcase_add_test(tc, attend_matches_two_passes_in_double);
    tcase_add_test(tc, attend2_reads_a_key_made_of_two_slices);
    suite_add_tcase(s, tc);
    return s;
}
