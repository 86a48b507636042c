/*
 * kvcache.c - per-layer KV caches in f32, bf16 or f16, and the conversions.
 */
#include "al_kvcache.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "al_kernels.h"
#include "al_util.h"

struct al_kv_cache {
    size_t elems;        /* floats per row */
    int context;         /* rows */
    int dtype;           /* enum al_kv_dtype */
    size_t bytes;        /* storage held */
    unsigned char *data; /* context * elems * al_kv_dtype_size(dtype) */
};

static size_t live_bytes;

/* ------------------------------------------------------------ dtypes */

static const char *const dtype_names[] = {"f32", "bf16", "f16"};
static const size_t dtype_sizes[] = {4, 2, 2};
_Static_assert(sizeof dtype_names / sizeof *dtype_names == AL_KV_NDTYPES, "dtype names");
_Static_assert(sizeof dtype_sizes / sizeof *dtype_sizes == AL_KV_NDTYPES, "dtype sizes");

int al_kv_dtype_parse(const char *name)
{
    for (int i = 0; i < AL_KV_NDTYPES; i++)
        if (!strcmp(name, dtype_names[i])) return i;
    return -1;
}

const char *al_kv_dtype_name(int dtype)
{
    AL_ASSERT(dtype >= 0 && dtype < AL_KV_NDTYPES);
    return dtype_names[dtype];
}

size_t al_kv_dtype_size(int dtype)
{
    AL_ASSERT(dtype >= 0 && dtype < AL_KV_NDTYPES);
    return dtype_sizes[dtype];
}

/* ------------------------------------------------------------ conversions */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* bf16 is the top half of an f32: round the dropped 16 bits to nearest,
 * ties to even. Adding 0x7FFF plus the kept LSB does exactly that, and a
 * carry out of the mantissa correctly bumps the exponent (up to inf). NaN
 * must not round into inf, so it is kept quiet with its top payload. */
uint16_t al_f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float bf16_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

float al_bf16_to_f32(uint16_t h) { return bf16_f32(h); }

/* q = m >> shift rounded to nearest, ties to even. */
static uint32_t shift_rne(uint32_t m, int shift)
{
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    return q + (rem > half || (rem == half && (q & 1u)));
}

/* IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. Normal
 * halves are the f32 re-biased by 112 with 13 mantissa bits rounded off;
 * below 2^-14 the result is a subnormal counted in units of 2^-24; from
 * 65520 up (half-way past the largest half, 65504) it is inf. */
uint16_t al_f32_to_f16(float f)
{
    uint32_t u = f32_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
    if (a >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);  /* >= 65520, inf */
    if (a >= 0x38800000u)                                      /* >= 2^-14 */
        return (uint16_t)(sign | shift_rne(a - 0x38000000u, 13));
    if (a < 0x33000000u) return (uint16_t)sign;                /* < 2^-25 rounds to 0 */
    /* |f| = m * 2^(e - 150) = (m >> (126 - e)) units of 2^-24 */
    uint32_t e = a >> 23, m = (a & 0x7FFFFFu) | 0x800000u;
    return (uint16_t)(sign | shift_rne(m, 126 - (int)e));
}

/* Written with selects, not branches, so that a loop of it vectorises. */
static inline float f16_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    uint32_t normal = sign | ((e + 112u) << 23) | (m << 13);
    uint32_t infnan = sign | 0x7F800000u | (m << 13);
    uint32_t sub = sign | f32_bits((float)m * 0x1p-24f);   /* zero or subnormal, exact */
    return bits_f32(e == 31 ? infnan : e == 0 ? sub : normal);
}

float al_f16_to_f32(uint16_t h) { return f16_f32(h); }

/* ------------------------------------------------------------ caches */

al_kv_cache *al_kv_cache_new(size_t elems, int context, int dtype)
{
    AL_ASSERT(elems > 0 && context > 0 && dtype >= 0 && dtype < AL_KV_NDTYPES);
    al_kv_cache *c = al_calloc(1, sizeof *c);
    c->elems = elems;
    c->context = context;
    c->dtype = dtype;
    c->bytes = (size_t)context * elems * dtype_sizes[dtype];
    c->data = al_calloc(c->bytes, 1);
    live_bytes += c->bytes;
    return c;
}

void al_kv_cache_free(al_kv_cache *c)
{
    if (!c) return;
    AL_ASSERT(live_bytes >= c->bytes);
    live_bytes -= c->bytes;
    free(c->data);
    free(c);
}

size_t al_kv_cache_bytes(const al_kv_cache *c) { return c->bytes; }
size_t al_kv_cache_elems(const al_kv_cache *c) { return c->elems; }
int al_kv_cache_context(const al_kv_cache *c) { return c->context; }
int al_kv_cache_dtype(const al_kv_cache *c) { return c->dtype; }
size_t al_kv_bytes_live(void) { return live_bytes; }

/* Address of element off of row pos. */
static unsigned char *at(const al_kv_cache *c, int pos, size_t off)
{
    AL_ASSERT(pos >= 0 && pos < c->context && off <= c->elems);
    return c->data + ((size_t)pos * c->elems + off) * dtype_sizes[c->dtype];
}

void al_kv_put(al_kv_cache *c, int pos, int off, int n, const float *src)
{
    AL_ASSERT(off >= 0 && n >= 0 && (size_t)off + n <= c->elems);
    unsigned char *dst = at(c, pos, off);
    if (c->dtype == AL_KV_F32) {
        memcpy(dst, src, n * sizeof(float));
        return;
    }
    uint16_t *h = (uint16_t *)dst;
    if (c->dtype == AL_KV_BF16)
        for (int i = 0; i < n; i++) h[i] = al_f32_to_bf16(src[i]);
    else
        for (int i = 0; i < n; i++) h[i] = al_f32_to_f16(src[i]);
}

void al_kv_row_put(al_kv_cache *c, int pos, const float *src)
{
    al_kv_put(c, pos, 0, (int)c->elems, src);
}

/* n stored values -> f32. Vectorised (AL_CLONES): decode converts every
 * cached element once per token. */
AL_CLONES static void to_f32(float *dst, const unsigned char *src, size_t n, int dtype)
{
    const uint16_t *h = (const uint16_t *)src;
    if (dtype == AL_KV_F32)
        memcpy(dst, src, n * sizeof(float));
    else if (dtype == AL_KV_BF16)
        for (size_t i = 0; i < n; i++) dst[i] = bf16_f32(h[i]);
    else
        for (size_t i = 0; i < n; i++) dst[i] = f16_f32(h[i]);
}

void al_kv_row_get(const al_kv_cache *c, int pos, float *dst)
{
    to_f32(dst, at(c, pos, 0), c->elems, c->dtype);
}

const float *al_kv_rows(const al_kv_cache *c, int t0, int n, float *tmp)
{
    AL_ASSERT(n >= 1 && t0 >= 0 && t0 + n <= c->context);
    if (c->dtype == AL_KV_F32) return (const float *)at(c, t0, 0);
    AL_ASSERT(n <= AL_KV_TILE);
    to_f32(tmp, at(c, t0, 0), (size_t)n * c->elems, c->dtype);
    return tmp;
}

/* ------------------------------------------------------------ one-token kernels */

void al_gemv_n(float *y, const float *A, int lda, const float *x, int M, int N, float alpha,
               float beta)
{
    cblas_sgemv(CblasRowMajor, CblasNoTrans, M, N, alpha, A, lda, x, 1, beta, y, 1);
}

void al_gemv_t(float *y, const float *A, int lda, const float *x, int M, int N, float alpha,
               float beta)
{
    cblas_sgemv(CblasRowMajor, CblasTrans, M, N, alpha, A, lda, x, 1, beta, y, 1);
}

void al_linear_row(float *out, const float *x, const float *w, int IC, int OC)
{
    al_gemv_n(out, w, IC, x, OC, IC, 1.0f, 0.0f);
}

/* ------------------------------------------------------------ attention */

/* S (Hg, nt) [ld AL_KV_TILE] = scale * q (Hg, dqk) . k^T, k (nt, dqk) [ld].
 * (k . q^T into (nt, Hg) and a transpose ran as fast with the block in L2,
 * slower with the block coming from memory: OpenBLAS packs k then in a
 * worse order.) */
static void scores(float *S, const float *q, int dqk, const float *k, int ld, int Hg, int nt,
                   float scale)
{
    if (Hg == 1) al_gemv_n(S, k, ld, q, nt, dqk, scale, 0.0f);
    else al_gemm_nt(S, AL_KV_TILE, q, dqk, k, ld, Hg, nt, dqk, scale, 0.0f);
}

/* out (Hg, dv) = P (Hg, nt) [ld AL_KV_TILE] . v (nt, dv) [ld] + beta * out */
static void weighted(float *out, int dv, const float *P, const float *v, int ld, int Hg, int nt,
                     float beta)
{
    if (Hg == 1) al_gemv_t(out, v, ld, P, nt, dv, 1.0f, beta);
    else al_gemm_nn(out, dv, P, AL_KV_TILE, v, ld, Hg, dv, nt, 1.0f, beta);
}

/* One group's heads over one block of rows: scores, the online softmax
 * step of each head (rescaling its partial output when its max grew), and
 * the block's weighted values added in. mx, sum: the heads' running max
 * and sum; S: scratch of Hg * AL_KV_TILE floats. */
static void attend_block(float *out, float *S, float *mx, float *sum, const float *q,
                         const float *k, const float *v, int ld, int Hg, int nt, int dqk, int dv,
                         float scale, int first)
{
    scores(S, q, dqk, k, ld, Hg, nt, scale);
    for (int h = 0; h < Hg; h++) {
        float corr = al_softmax_block(S + (size_t)h * AL_KV_TILE, nt, mx + h, sum + h);
        if (first || corr == 1.0f) continue;
        for (int j = 0; j < dv; j++) out[(size_t)h * dv + j] *= corr;
    }
    weighted(out, dv, S, v, ld, Hg, nt, first ? 0.0f : 1.0f);
}

/* One pass over the cache, AL_KV_TILE rows at a time, every group per
 * block, so that each cached byte is read once per token and a non-f32
 * block is converted once; a group's scores never leave L1/L2. */
void al_kv_attend(float *out, float *S, float *tile, const float *q, const al_kv_cache *c,
                  int n, int H, int G, int dqk, int dv, int koff, int voff, float scale)
{
    AL_ASSERT(n >= 1 && n <= c->context && G > 0 && H % G == 0);
    AL_ASSERT((size_t)koff + (size_t)G * dqk <= c->elems && (size_t)voff + (size_t)G * dv <= c->elems);
    int Hg = H / G, ld = (int)c->elems;
    float *mx = S + (size_t)Hg * AL_KV_TILE, *sum = mx + H;   /* after one group's scores */
    for (int h = 0; h < H; h++) mx[h] = -INFINITY, sum[h] = 0.0f;
    for (int t0 = 0; t0 < n; t0 += AL_KV_TILE) {
        int nt = n - t0 < AL_KV_TILE ? n - t0 : AL_KV_TILE;
        const float *rows = al_kv_rows(c, t0, nt, tile);
        for (int g = 0; g < G; g++)
            attend_block(out + (size_t)g * Hg * dv, S, mx + g * Hg, sum + g * Hg,
                         q + (size_t)g * Hg * dqk, rows + koff + g * dqk, rows + voff + g * dv,
                         ld, Hg, nt, dqk, dv, scale, t0 == 0);
    }
    for (int h = 0; h < H; h++) {   /* out_h /= sum_h */
        float inv = 1.0f / sum[h];
        for (int j = 0; j < dv; j++) out[(size_t)h * dv + j] *= inv;
    }
}
