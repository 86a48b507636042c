/*
 * kvcache.c - per-layer KV caches in f32, bf16 or f16, and the conversions;
 * int8 / int4 caches keep their storage in kvquant.c.
 */
#include "al_kvcache.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "al_gemm.h"
#include "al_kernels.h"
#include "al_kvquant.h"
#include "al_size.h"
#include "al_parallel.h"
#include "al_util.h"

struct al_kv_cache {
    size_t elems;        /* floats per row */
    int context;         /* rows */
    int dtype;           /* enum al_kv_dtype */
    size_t bytes;        /* storage held */
    unsigned char *data; /* context * elems * al_kv_dtype_size(dtype); NULL if q */
    al_kvq *q;           /* int8 / int4 storage, else NULL */
};

static size_t live_bytes;

/* ------------------------------------------------------------ dtypes */

static const char *const dtype_names[] = {"f32", "bf16", "f16", "int8", "int4"};
static const size_t dtype_sizes[] = {4, 2, 2};
static const int dtype_bits[] = {0, 0, 0, 8, 4};
_Static_assert(sizeof dtype_names / sizeof *dtype_names == AL_KV_NALL, "dtype names");
_Static_assert(sizeof dtype_bits / sizeof *dtype_bits == AL_KV_NALL, "dtype bits");
_Static_assert(sizeof dtype_sizes / sizeof *dtype_sizes == AL_KV_NDTYPES, "dtype sizes");

int al_kv_dtype_parse(const char *name)
{
    for (int i = 0; i < AL_KV_NALL; i++)
        if (!strcmp(name, dtype_names[i])) return i;
    return -1;
}

const char *al_kv_dtype_name(int dtype)
{
    AL_ASSERT(dtype >= 0 && dtype < AL_KV_NALL);
    return dtype_names[dtype];
}

size_t al_kv_dtype_size(int dtype)
{
    AL_ASSERT(dtype >= 0 && dtype < AL_KV_NDTYPES);
    return dtype_sizes[dtype];
}

int al_kv_dtype_bits(int dtype)
{
    AL_ASSERT(dtype >= 0 && dtype < AL_KV_NALL);
    return dtype_bits[dtype];
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
    AL_ASSERT(al_size_mul3((size_t)context, elems, dtype_sizes[dtype], &c->bytes) == 0);
    c->data = al_calloc(c->bytes, 1);
    live_bytes += c->bytes;
    return c;
}

size_t al_kv_cache_bytes_for(size_t elems, size_t key_elems, int context, int dtype, int group,
                             int residual)
{
    AL_ASSERT(dtype >= 0 && dtype < AL_KV_NALL);
    size_t bytes;
    if (!dtype_bits[dtype])   /* SIZE_MAX: more than can exist, refused by the callers */
        return al_size_mul3((size_t)context, elems, dtype_sizes[dtype], &bytes) ? SIZE_MAX : bytes;
    return al_kvq_bytes(elems, key_elems, context, dtype_bits[dtype], group, residual);
}

al_kv_cache *al_kv_cache_new_quant(size_t elems, size_t key_elems, int context, int dtype,
                                   int group, int residual)
{
    AL_ASSERT(dtype >= 0 && dtype < AL_KV_NALL);
    if (!dtype_bits[dtype]) return al_kv_cache_new(elems, context, dtype);
    AL_ASSERT(elems > 0 && context > 0);
    al_kv_cache *c = al_calloc(1, sizeof *c);
    c->elems = elems;
    c->context = context;
    c->dtype = dtype;
    c->bytes = al_kvq_bytes(elems, key_elems, context, dtype_bits[dtype], group, residual);
    c->q = al_kvq_new(elems, key_elems, context, dtype_bits[dtype], group, residual);
    live_bytes += c->bytes;
    return c;
}

void al_kv_cache_free(al_kv_cache *c)
{
    if (!c) return;
    AL_ASSERT(live_bytes >= c->bytes);
    live_bytes -= c->bytes;
    al_kvq_free(c->q);
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
    if (c->q) {
        al_kvq_put(c->q, pos, off, n, src);
        return;
    }
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
    if (c->q) {
        AL_ASSERT(pos >= 0 && pos < c->context);
        al_kvq_rows(c->q, pos, 1, dst);
        return;
    }
    to_f32(dst, at(c, pos, 0), c->elems, c->dtype);
}

const float *al_kv_rows(const al_kv_cache *c, int t0, int n, float *tmp)
{
    AL_ASSERT(n >= 1 && t0 >= 0 && t0 + n <= c->context);
    if (c->dtype == AL_KV_F32) return (const float *)at(c, t0, 0);
    AL_ASSERT(n <= AL_KV_TILE);
    if (c->q) {
        al_kvq_rows(c->q, t0, n, tmp);
        return tmp;
    }
    to_f32(tmp, at(c, t0, 0), (size_t)n * c->elems, c->dtype);
    return tmp;
}

/* ------------------------------------------------------------ one-token kernels */

void al_gemv_n(float *y, const float *A, int lda, const float *x, int M, int N, float alpha,
               float beta)
{
    if (M > 0 && N > 0) al_flops_add(2.0 * M * N);
    cblas_sgemv(CblasRowMajor, CblasNoTrans, M, N, alpha, A, lda, x, 1, beta, y, 1);
}

void al_gemv_t(float *y, const float *A, int lda, const float *x, int M, int N, float alpha,
               float beta)
{
    if (M > 0 && N > 0) al_flops_add(2.0 * M * N);
    cblas_sgemv(CblasRowMajor, CblasTrans, M, N, alpha, A, lda, x, 1, beta, y, 1);
}

/* A weight matrix this large (floats) is read by several threads, each
 * its share of the output rows: at batch 1 a decode step is mostly these
 * reads, and one core does not draw the memory system's whole bandwidth. */
#define ROW_SPLIT_FLOATS (1L << 16)

typedef struct row_job {
    float *out;
    const float *x, *w;
    int IC;
} row_job;

static void linear_rows(void *ctx, long lo, long hi, int tid)
{
    const row_job *j = ctx;
    al_gemv_n(j->out + lo, j->w + lo * j->IC, j->IC, j->x, (int)(hi - lo), j->IC, 1.0f, 0.0f);
    (void)tid;
}

void al_linear_row(float *out, const float *x, const float *w, int IC, int OC)
{
    if ((long)IC * OC < ROW_SPLIT_FLOATS) {
        al_gemv_n(out, w, IC, x, OC, IC, 1.0f, 0.0f);
        return;
    }
    row_job j = {out, x, w, IC};
    long grain = ((ROW_SPLIT_FLOATS / 2) / IC + 15) / 16 * 16;
    al_parallel_for(OC, grain, linear_rows, &j);
}

/* ------------------------------------------------------------ attention */

/* S (Hg, nt) [ld AL_KV_TILE] = scale * q (Hg, dqk) [ldq] . k^T + beta * S,
 * k (nt, dqk) [ld].
 * (k . q^T into (nt, Hg) and a transpose ran as fast with the block in L2,
 * slower with the block coming from memory: OpenBLAS packs k then in a
 * worse order.) */
static void scores(float *S, const float *q, int ldq, int dqk, const float *k, int ld, int Hg,
                   int nt, float scale, float beta)
{
    if (Hg == 1) al_gemv_n(S, k, ld, q, nt, dqk, scale, beta);
    else al_sgemm_here(CblasNoTrans, CblasTrans, Hg, nt, dqk, scale, q, ldq, k, ld, beta, S,
                       AL_KV_TILE);
}

/* out (Hg, dv) = P (Hg, nt) [ld AL_KV_TILE] . v (nt, dv) [ld] + beta * out */
static void weighted(float *out, int dv, const float *P, const float *v, int ld, int Hg, int nt,
                     float beta)
{
    if (Hg == 1) al_gemv_t(out, v, ld, P, nt, dv, 1.0f, beta);
    else al_sgemm_here(CblasNoTrans, CblasNoTrans, Hg, dv, nt, 1.0f, P, AL_KV_TILE, v, ld, beta,
                       out, dv);
}

/* One group's heads over one block of rows: scores, the online softmax
 * step of each head (rescaling its partial output when its max grew), and
 * the block's weighted values added in. mx, sum: the heads' running max
 * and sum; S: scratch of Hg * AL_KV_TILE floats. */
static void attend_block(float *out, float *S, float *mx, float *sum, const float *q,
                         const float *k, const float *k2, const float *v, int ld, int Hg, int nt,
                         int dqk, int dqk2, int dv, float scale, int first)
{
    scores(S, q, dqk + dqk2, dqk, k, ld, Hg, nt, scale, 0.0f);
    if (dqk2) scores(S, q + dqk, dqk + dqk2, dqk2, k2, ld, Hg, nt, scale, 1.0f);   /* key part 2 */
    for (int h = 0; h < Hg; h++) {
        float corr = al_softmax_block(S + (size_t)h * AL_KV_TILE, nt, mx + h, sum + h);
        if (first || corr == 1.0f) continue;
        for (int j = 0; j < dv; j++) out[(size_t)h * dv + j] *= corr;
    }
    weighted(out, dv, S, v, ld, Hg, nt, first ? 0.0f : 1.0f);
}

/* What one attention of one token needs besides its buffers. */
typedef struct attend_args {
    const float *q;
    const al_kv_cache *c;
    int n, H, G, dqk, dv, koff, voff;
    float scale;
    int dqk2, koff2, kstride2;   /* al_kv_attend2's second key slice (dqk2 0: none) */
} attend_args;

static void check_args(const attend_args *a)
{
    const al_kv_cache *c = a->c;
    AL_ASSERT(a->n >= 1 && a->n <= c->context && a->G > 0 && a->H % a->G == 0);
    AL_ASSERT((size_t)a->koff + (size_t)a->G * a->dqk <= c->elems &&
              (size_t)a->voff + (size_t)a->G * a->dv <= c->elems);
    AL_ASSERT(a->dqk2 >= 0 && a->kstride2 >= 0 &&
              (!a->dqk2 || (size_t)a->koff2 + (size_t)(a->G - 1) * a->kstride2 + a->dqk2 <= c->elems));
}

/* Rows [lo, hi) in one pass, AL_KV_TILE at a time, every group per
 * block, so that each cached byte is read once and a non-f32 block is
 * converted once; a group's scores never leave L1/L2. Leaves out (H, dv)
 * unnormalised, with each head's max and sum of exp(score - max). */
static void attend_rows(float *out, float *mx, float *sum, float *S, float *tile,
                        const attend_args *a, int lo, int hi)
{
    int Hg = a->H / a->G, ld = (int)a->c->elems;
    for (int h = 0; h < a->H; h++) mx[h] = -INFINITY, sum[h] = 0.0f;
    for (int t0 = lo; t0 < hi; t0 += AL_KV_TILE) {
        int nt = hi - t0 < AL_KV_TILE ? hi - t0 : AL_KV_TILE;
        const float *rows = al_kv_rows(a->c, t0, nt, tile);
        for (int g = 0; g < a->G; g++)
            attend_block(out + (size_t)g * Hg * a->dv, S, mx + g * Hg, sum + g * Hg,
                         a->q + (size_t)g * Hg * (a->dqk + a->dqk2), rows + a->koff + g * a->dqk,
                         rows + a->koff2 + g * a->kstride2, rows + a->voff + g * a->dv, ld, Hg,
                         nt, a->dqk, a->dqk2, a->dv, a->scale, t0 == lo);
    }
}

static void normalise(float *out, const float *sum, int H, int dv)
{
    for (int h = 0; h < H; h++) {   /* out_h /= sum_h */
        float inv = 1.0f / sum[h];
        for (int j = 0; j < dv; j++) out[(size_t)h * dv + j] *= inv;
    }
}

/* Floats a chunk of the pool takes from its thread's scratch: one group's
 * block of scores and the block's rows converted from storage. */
static size_t chunk_floats(const attend_args *a)
{
    return (size_t)(a->H / a->G) * AL_KV_TILE + (size_t)AL_KV_TILE * a->c->elems;
}

/* The context split over the pool: chunk i of the cut (rows, whole
 * blocks) leaves its partial output, max and sum in part[i]; the caller
 * merges them in chunk order, so a thread count always gives the same
 * bits. The partials live here, grown once, and one context split runs
 * at a time. */
typedef struct split_job {
    attend_args a;
    int chunks;
    float *part;   /* chunks x (H * dv + 2 H) */
} split_job;

static struct {
    pthread_mutex_t mu;
    float *buf;
    size_t n;
} parts = {.mu = PTHREAD_MUTEX_INITIALIZER};

static size_t part_floats(const attend_args *a) { return (size_t)a->H * (a->dv + 2); }

static void attend_chunk(void *ctx, long lo, long hi, int tid)
{
    const split_job *j = ctx;
    int i = 0;
    while (al_parallel_cut(j->a.n, AL_KV_TILE, j->chunks, i) != lo) i++;
    float *S = al_parallel_scratch(tid, chunk_floats(&j->a)), *tile = S + (j->a.H / j->a.G) * AL_KV_TILE;
    float *o = j->part + (size_t)i * part_floats(&j->a), *mx = o + (size_t)j->a.H * j->a.dv;
    attend_rows(o, mx, mx + j->a.H, S, tile, &j->a, (int)lo, (int)hi);
}

/* out (H, dv) = sum_i e^(mx_i - M) o_i / sum_i e^(mx_i - M) sum_i, M the
 * largest mx_i: the partials' online softmaxes joined, in chunk order. */
static void merge(float *out, const split_job *j)
{
    int H = j->a.H, dv = j->a.dv;
    size_t stride = part_floats(&j->a);
    for (int h = 0; h < H; h++) {
        float M = -INFINITY;
        for (int i = 0; i < j->chunks; i++) {
            float m = j->part[i * stride + (size_t)H * dv + h];
            M = m > M ? m : M;
        }
        double sum = 0;
        float *o = out + (size_t)h * dv;
        for (int i = 0; i < j->chunks; i++) {
            const float *p = j->part + i * stride, *mx = p + (size_t)H * dv;
            float w = expf(mx[h] - M);
            sum += (double)w * mx[H + h];
            for (int k = 0; k < dv; k++)
                o[k] = i ? o[k] + w * p[(size_t)h * dv + k] : w * p[(size_t)h * dv + k];
        }
        float inv = (float)(1.0 / sum);
        for (int k = 0; k < dv; k++) o[k] *= inv;
    }
}

static void attend_split(float *out, const attend_args *a, int chunks)
{
    split_job j = {*a, chunks, NULL};
    pthread_mutex_lock(&parts.mu);
    size_t need = (size_t)chunks * part_floats(a);
    if (parts.n < need) {
        free(parts.buf);
        parts.buf = al_malloc(need * sizeof(float));
        parts.n = need;
    }
    j.part = parts.buf;
    /* any thread may take a chunk, and one that takes none now would grow
     * its scratch in a later step: every thread's, before the first */
    al_parallel_scratch_reserve(chunk_floats(a));
    al_parallel_for(a->n, AL_KV_TILE, attend_chunk, &j);
    merge(out, &j);
    pthread_mutex_unlock(&parts.mu);
}

static void attend_one(float *out, float *S, float *tile, const attend_args *args)
{
    attend_args a = *args;
    int n = a.n, H = a.H, G = a.G, dv = a.dv;
    check_args(&a);
    int chunks = al_parallel_chunks(n, AL_KV_TILE);
    if (chunks > 1) {
        attend_split(out, &a, chunks);
        return;
    }
    float *mx = S + (size_t)(H / G) * AL_KV_TILE, *sum = mx + H;   /* after one group's scores */
    attend_rows(out, mx, sum, S, tile, &a, 0, n);
    normalise(out, sum, H, dv);
}

void al_kv_attend(float *out, float *S, float *tile, const float *q, const al_kv_cache *c,
                  int n, int H, int G, int dqk, int dv, int koff, int voff, float scale)
{
    attend_args a = {q, c, n, H, G, dqk, dv, koff, voff, scale, 0, 0, 0};
    attend_one(out, S, tile, &a);
}

void al_kv_attend2(float *out, float *S, float *tile, const float *q, const al_kv_cache *c,
                   int n, int H, int G, int dqk, int koff, int dqk2, int koff2, int kstride2,
                   int dv, int voff, float scale)
{
    attend_args a = {q, c, n, H, G, dqk, dv, koff, voff, scale, dqk2, koff2, kstride2};
    attend_one(out, S, tile, &a);
}

/* ---- batched: one token of each of B sequences */

/* Rows a token at pos attends to: 0..pos, or the whole cache once pos is
 * past its rows (a bounded ring, al_kv_ring_row, is then full). */
static int rows_at(const al_kv_cache *c, int pos)
{
    return pos + 1 < c->context ? pos + 1 : c->context;
}

typedef struct batch_job {
    float *out;
    const float *q;
    al_kv_cache *const *caches;
    const int *pos;
    int H, G, dqk, dv, koff, voff;
    float scale;
} batch_job;

/* Sequences [lo, hi), each whole on this thread with the pool's scratch. */
static void attend_seqs(void *ctx, long lo, long hi, int tid)
{
    const batch_job *j = ctx;
    for (long b = lo; b < hi; b++) {
        attend_args a = {j->q + b * j->H * j->dqk, j->caches[b],
                         rows_at(j->caches[b], j->pos[b]), j->H, j->G, j->dqk, j->dv,
                         j->koff, j->voff, j->scale, 0, 0, 0};
        check_args(&a);
        float *S = al_parallel_scratch(tid, chunk_floats(&a) + 2 * (size_t)a.H);
        float *tile = S + (a.H / a.G) * AL_KV_TILE, *mx = tile + (size_t)AL_KV_TILE * a.c->elems;
        float *out = j->out + b * j->H * j->dv;
        attend_rows(out, mx, mx + a.H, S, tile, &a, 0, a.n);
        normalise(out, mx + a.H, a.H, a.dv);
    }
}

void al_kv_attend_batch(float *out, const float *q, al_kv_cache *const *caches, const int *pos,
                        int B, int H, int G, int dqk, int dv, int koff, int voff, float scale)
{
    batch_job j = {out, q, caches, pos, H, G, dqk, dv, koff, voff, scale};
    int chunks = B == 1 ? al_parallel_chunks(rows_at(caches[0], pos[0]), AL_KV_TILE) : 1;
    if (chunks > 1) {   /* one sequence: its rows over the threads */
        attend_args a = {q, caches[0], rows_at(caches[0], pos[0]), H, G, dqk, dv, koff, voff,
                         scale, 0, 0, 0};
        check_args(&a);
        attend_split(out, &a, chunks);
        return;
    }
    al_parallel_for(B, 1, attend_seqs, &j);
}
