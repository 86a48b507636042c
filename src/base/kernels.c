/*
 * kernels.c - the shared numeric kernels (the contract is in al_kernels.h).
 *
 * Matrix products go to OpenBLAS: a large one is cut across the pool as
 * its measured plan says (al_gemm.h), a per-head product inside attention
 * runs whole on the thread that runs its chunk.
 * Everything else is a loop over contiguous rows, split over the pool by
 * rows (or columns where a reduction runs down the rows, so that every sum
 * keeps its serial order). Row reductions (norms, softmax sums, log-sum-exp)
 * accumulate in double: they cost little next to the GEMMs and keep long
 * rows accurate. Elementwise loops are written to vectorise and built for
 * three instruction sets (AL_CLONES); no clone uses FMA contraction (ISO C
 * mode), so every clone gives the same bits. Nothing here allocates except
 * the pool's per-thread scratch, which grows once.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cblas.h>

#include "al_gemm.h"
#include "al_kernels.h"
#include "al_parallel.h"
#include "al_util.h"

static int imin(int a, int b) { return a < b ? a : b; }

/* Elements per chunk of an elementwise loop, and rows per chunk of a row
 * loop of width C: enough work that a chunk outweighs waking a thread. */
#define EW_GRAIN 16384
static long row_grain(long C) { return C >= 4096 ? 1 : 4096 / C; }

/* ------------------------------------------------------------- exp */

/* e^x in float, written so that a loop of it vectorises: Cephes' expf
 * (range reduction by ln 2 in two parts, degree-6 polynomial, about 1 ulp).
 * Arguments below -87.3 give 0 (-inf included) rather than a subnormal,
 * above 88 they are clamped; NaN stays NaN. */
static inline float fexp(float x0)
{
    float x = x0 < -87.3f ? -87.3f : x0;
    x = x > 88.0f ? 88.0f : x;
    float fn = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round */
    float r = x - fn * 0.693359375f;
    r = r - fn * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * (r * r) + r + 1.0f;
    int n = (int)(fn > -127.0f ? fn : -127.0f);   /* NaN takes -127: y is NaN anyway */
    uint32_t bits = (uint32_t)(n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x0 < -87.3f ? 0.0f : y * scale;
}

/* x[j] = fexp(x[j] - shift) for j < n. */
AL_CLONES static void exp_shifted(float *x, float shift, int n)
{
    for (int j = 0; j < n; j++) x[j] = fexp(x[j] - shift);
}

/* x[j] = fexp(x[j] - shift) * scale: exp_shifted and a scaling in one pass,
 * the same bits as the two passes. */
AL_CLONES static void exp_shifted_scaled(float *x, float shift, float scale, int n)
{
    for (int j = 0; j < n; j++) x[j] = fexp(x[j] - shift) * scale;
}

/* Sum in double over eight interleaved partial sums, combined in a fixed
 * order: the same bits on every instruction set, 8x shorter dependency. */
__attribute__((always_inline)) static inline double sum_d(const float *x, int n)
{
    double s[8] = {0};
    int j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) s[l] += x[j + l];
    double t = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; j < n; j++) t += x[j];
    return t;
}

__attribute__((always_inline)) static inline double dot_d(const float *x, const float *y, int n)
{
    double s[8] = {0};
    int j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) s[l] += (double)x[j + l] * y[j + l];
    double t = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; j < n; j++) t += (double)x[j] * y[j];
    return t;
}

__attribute__((always_inline)) static inline float row_max(const float *x, int n)
{
    float m[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
                  -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    int j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) m[l] = x[j + l] > m[l] ? x[j + l] : m[l];
    for (; j < n; j++) m[0] = x[j] > m[0] ? x[j] : m[0];
    float mx = m[0];
    for (int l = 1; l < 8; l++) mx = m[l] > mx ? m[l] : mx;
    return mx;
}

/* ---------------------------------------------------------------- GEMM */

/* Products run on the calling thread (al_sgemm_here, inside a chunk) or
 * over the pool, split per shape (al_sgemm_pool): al_gemm.h. */

void al_gemm_nt(float *C, int ldc, const float *A, int lda, const float *B,
                int ldb, int M, int N, int K, float alpha, float beta)
{
    al_sgemm_pool(CblasNoTrans, CblasTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void al_gemm_nn(float *C, int ldc, const float *A, int lda, const float *B,
                int ldb, int M, int N, int K, float alpha, float beta)
{
    al_sgemm_pool(CblasNoTrans, CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void al_gemm_tn(float *C, int ldc, const float *A, int lda, const float *B,
                int ldb, int M, int N, int K, float alpha, float beta)
{
    al_sgemm_pool(CblasTrans, CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* -------------------------------------------------------------- linear */

void al_linear_forward(float *out, const float *inp, const float *w,
                       int N, int IC, int OC)
{
    /* out (N, OC) = inp (N, IC) . w^T, w (OC, IC) */
    al_gemm_nt(out, OC, inp, IC, w, IC, N, OC, IC, 1.0f, 0.0f);
}

void al_linear_forward_few(float *out, float *tmp, const float *inp, const float *w, int N,
                           int IC, int OC)
{
    /* tmp (OC, N) = w (OC, IC) . inp^T */
    al_gemm_nt(tmp, N, w, IC, inp, IC, OC, N, IC, 1.0f, 0.0f);
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) out[(size_t)n * OC + o] = tmp[(size_t)o * N + n];
}

void al_linear_backward_beta(float *dinp, float *dw, const float *dout, const float *inp,
                             const float *w, int N, int IC, int OC, float beta_inp,
                             float beta_w)
{
    /* forward: out = inp . w^T */
    if (dinp)   /* dinp (N, IC) = dout (N, OC) . w (OC, IC) + beta_inp dinp */
        al_gemm_nn(dinp, IC, dout, OC, w, IC, N, IC, OC, 1.0f, beta_inp);
    if (dw)     /* dw (OC, IC) = dout^T (OC, N) . inp (N, IC) + beta_w dw */
        al_gemm_tn(dw, IC, dout, OC, inp, IC, OC, IC, N, 1.0f, beta_w);
}

void al_linear_backward(float *dinp, float *dw, const float *dout,
                        const float *inp, const float *w, int N, int IC, int OC)
{
    al_linear_backward_beta(dinp, dw, dout, inp, w, N, IC, OC, 1.0f, 1.0f);
}

/* ------------------------------------------------------------- RMSNorm */

typedef struct norm_job {
    float *out, *rstd, *dx, *dw, *sum;
    const float *x, *w, *dout, *rstd_in, *r;
    int C, N_rows, add_dx, add_dw;
    float eps;
} norm_job;

/* Rows [lo, hi); with j->r, the rows normalised are x + r, stored in
 * j->sum first (the residual add and the norm after it in one pass). */
AL_CLONES static void rmsnorm_rows(void *ctx, long lo, long hi, int tid)
{
    const norm_job *j = ctx;
    int C = j->C;
    for (long n = lo; n < hi; n++) {
        const float *xr = j->x + (size_t)n * C;   /* (C) */
        float *o = j->out + (size_t)n * C;        /* (C) */
        if (j->r) {
            float *y = j->sum + (size_t)n * C;
            const float *rr = j->r + (size_t)n * C;
            for (int c = 0; c < C; c++) y[c] = xr[c] + rr[c];
            xr = y;
        }
        double ss = dot_d(xr, xr, C);
        float r = (float)(1.0 / sqrt(ss / C + j->eps));
        for (int c = 0; c < C; c++) o[c] = xr[c] * r * j->w[c];
        if (j->rstd) j->rstd[n] = r;
    }
    (void)tid;
}

void al_rmsnorm_forward(float *out, float *rstd, const float *x,
                        const float *w, int N, int C, float eps)
{
    norm_job j = {.out = out, .rstd = rstd, .x = x, .w = w, .C = C, .eps = eps};
    al_parallel_for(N, row_grain(C), rmsnorm_rows, &j);
}

void al_residual_rmsnorm_forward(float *sum, float *out, float *rstd, const float *x,
                                 const float *r, const float *w, int N, int C, float eps)
{
    norm_job j = {.out = out, .rstd = rstd, .sum = sum, .x = x, .r = r, .w = w, .C = C,
                  .eps = eps};
    al_parallel_for(N, row_grain(C), rmsnorm_rows, &j);
}

/* dx rows [lo, hi). forward: o[c] = x[c] * r * w[c], r = 1 / sqrt(mean(x^2)
 * + eps); with xhat = x r and dxhat = dout w, r depends on every x[c]:
 * dx = r (dxhat - xhat mean(dxhat xhat)) */
AL_CLONES static void rmsnorm_back_rows(void *ctx, long lo, long hi, int tid)
{
    const norm_job *j = ctx;
    int C = j->C;
    for (long n = lo; n < hi; n++) {
        const float *xr = j->x + (size_t)n * C, *g = j->dout + (size_t)n * C;
        float *d = j->dx + (size_t)n * C, r = j->rstd_in[n];
        double m[8] = {0}, mt;
        int c = 0;
        for (; c + 8 <= C; c += 8)   /* eight partial sums, as in dot_d */
            for (int l = 0; l < 8; l++)
                m[l] += (double)(g[c + l] * j->w[c + l]) * (xr[c + l] * r);
        mt = ((m[0] + m[1]) + (m[2] + m[3])) + ((m[4] + m[5]) + (m[6] + m[7]));
        for (; c < C; c++) mt += (double)(g[c] * j->w[c]) * (xr[c] * r);
        float mf = (float)(mt / C);
        if (j->add_dx)
            for (c = 0; c < C; c++) d[c] += r * (g[c] * j->w[c] - xr[c] * r * mf);
        else   /* the same value as adding to a zeroed dx */
            for (c = 0; c < C; c++) d[c] = 0.0f + r * (g[c] * j->w[c] - xr[c] * r * mf);
    }
    (void)tid;
}

/* dw columns [lo, hi): a sum down all rows, in row order, onto dw or
 * onto zero. */
AL_CLONES static void rmsnorm_back_cols(void *ctx, long lo, long hi, int tid)
{
    const norm_job *j = ctx;
    int C = j->C;
    if (!j->add_dw)
        for (long c = lo; c < hi; c++) j->dw[c] = 0.0f;
    for (long n = 0; n < j->N_rows; n++) {
        const float *xr = j->x + (size_t)n * C, *g = j->dout + (size_t)n * C;
        float r = j->rstd_in[n];
        for (long c = lo; c < hi; c++) j->dw[c] += g[c] * xr[c] * r;
    }
    (void)tid;
}

void al_rmsnorm_backward_beta(float *dx, float *dw, const float *dout, const float *x,
                              const float *w, const float *rstd, int N, int C, float beta_dx,
                              float beta_dw)
{
    /* eps is not passed here, so the saved rstd is the only way back. */
    AL_ASSERT(rstd != NULL);
    AL_ASSERT((beta_dx == 0.0f || beta_dx == 1.0f) && (beta_dw == 0.0f || beta_dw == 1.0f));
    norm_job j = {.dx = dx, .dw = dw, .x = x, .w = w, .dout = dout, .rstd_in = rstd,
                  .C = C, .N_rows = N, .add_dx = beta_dx != 0.0f, .add_dw = beta_dw != 0.0f};
    al_parallel_for(N, row_grain(C), rmsnorm_back_rows, &j);
    if (dw) al_parallel_for(C, 64, rmsnorm_back_cols, &j);
}

void al_rmsnorm_backward(float *dx, float *dw, const float *dout,
                         const float *x, const float *w, const float *rstd,
                         int N, int C)
{
    al_rmsnorm_backward_beta(dx, dw, dout, x, w, rstd, N, C, 1.0f, 1.0f);
}

/* ---------------------------------------------------------------- GELU */

/* gelu(x) = 0.5 x (1 + tanh(u)), u = K (x + C x^3). Computed through the
 * identity 0.5 (1 + tanh(u)) = sigmoid(2u) = 1 / (1 + e^(-2u)), which needs
 * one exp (vectorised, fexp) instead of a libm tanhf per element and has no
 * cancellation for negative x. */
#define GELU_K 0.7978845608028654f   /* sqrt(2 / pi) */
#define GELU_C 0.044715f

typedef struct gelu_job {
    float *out;
    const float *x, *dout;
} gelu_job;

AL_CLONES static void gelu_fwd_range(void *ctx, long lo, long hi, int tid)
{
    const gelu_job *j = ctx;
    float *out = j->out;
    const float *x = j->x;
    for (long i = lo; i < hi; i++) {
        float xi = x[i], u = GELU_K * (xi + GELU_C * xi * xi * xi);
        out[i] = xi / (1.0f + fexp(-2.0f * u));
    }
    (void)tid;
}

void al_gelu_forward(float *out, const float *x, size_t n)
{
    gelu_job j = {out, x, NULL};
    al_parallel_for((long)n, EW_GRAIN, gelu_fwd_range, &j);
}

/* forward: out = x s, s = sigmoid(2u), u = K (x + C x^3), so
 * dout/dx = s + 2 x s (1 - s) du/dx, du/dx = K (1 + 3 C x^2). */
static inline float gelu_grad(float xi)
{
    float u = GELU_K * (xi + GELU_C * xi * xi * xi);
    float s = 1.0f / (1.0f + fexp(-2.0f * u));
    float du = GELU_K * (1.0f + 3.0f * GELU_C * xi * xi);
    return s + 2.0f * xi * s * (1.0f - s) * du;
}

AL_CLONES static void gelu_back_range(void *ctx, long lo, long hi, int tid)
{
    const gelu_job *j = ctx;
    float *dx = j->out;
    const float *x = j->x, *dout = j->dout;
    for (long i = lo; i < hi; i++) dx[i] += dout[i] * gelu_grad(x[i]);
    (void)tid;
}

AL_CLONES static void gelu_back_set_range(void *ctx, long lo, long hi, int tid)
{
    const gelu_job *j = ctx;
    float *dx = j->out;
    const float *x = j->x, *dout = j->dout;
    for (long i = lo; i < hi; i++) dx[i] = dout[i] * gelu_grad(x[i]);
    (void)tid;
}

void al_gelu_backward(float *dx, const float *dout, const float *x, size_t n)
{
    gelu_job j = {dx, x, dout};
    al_parallel_for((long)n, EW_GRAIN, gelu_back_range, &j);
}

void al_gelu_backward_set(float *dx, const float *dout, const float *x, size_t n)
{
    gelu_job j = {dx, x, dout};
    al_parallel_for((long)n, EW_GRAIN, gelu_back_set_range, &j);
}

/* ---------------------------------------------------------------- RoPE */

typedef struct rope_job {
    float *x;
    int B, T, nh, dim, head_stride, row_stride, pos0;
    float base;
    double sign;
} rope_job;

/* Rotates pair (i, i + dim/2) of every head by sign * angle(t, i) for the
 * tokens t in [lo, hi). The angle depends only on (t, i), so cos and sin
 * are computed once per token, in double, for up to ROPE_I pairs at a time
 * and applied across the batch and the heads with an inner loop over
 * contiguous i that vectorises: no table to keep. */
#define ROPE_I 64

/* base^(-2i/dim) for i < dim/2: kept per thread for the last (dim, base)
 * asked for, since decode rotates one token at a time and a pow per pair
 * per call cost more than the rotation. NULL for dim/2 > ROPE_FREQS. */
#define ROPE_FREQS 512

static const double *rope_freqs(int dim, float base)
{
    static _Thread_local struct {
        int dim;
        float base;
        double f[ROPE_FREQS];
    } c;
    if (dim / 2 > ROPE_FREQS) return NULL;
    if (c.dim != dim || c.base != base) {
        for (int i = 0; i < dim / 2; i++) c.f[i] = pow(base, -2.0 * i / dim);
        c.dim = dim, c.base = base;
    }
    return c.f;
}

AL_CLONES static void rope_rows(void *ctx, long lo, long hi, int tid)
{
    const rope_job *j = ctx;
    int half = j->dim / 2;
    double c[ROPE_I], s[ROPE_I];
    const double *freq = rope_freqs(j->dim, j->base);
    for (long t = lo; t < hi; t++)
        for (int i0 = 0; i0 < half; i0 += ROPE_I) {
            int ni = imin(ROPE_I, half - i0);
            for (int i = 0; i < ni; i++) {
                double f = freq ? freq[i0 + i] : pow(j->base, -2.0 * (i0 + i) / j->dim);
                sincos((double)(j->pos0 + t) * f, &s[i], &c[i]);
                s[i] *= j->sign;
            }
            for (int b = 0; b < j->B; b++) {
                float *row = j->x + ((size_t)b * j->T + t) * j->row_stride;
                for (int h = 0; h < j->nh; h++) {
                    float *p = row + (size_t)h * j->head_stride + i0;
                    for (int i = 0; i < ni; i++) {
                        double x1 = p[i], x2 = p[i + half];
                        p[i] = (float)(x1 * c[i] - x2 * s[i]);
                        p[i + half] = (float)(x2 * c[i] + x1 * s[i]);
                    }
                }
            }
        }
    (void)tid;
}

static void rope_rotate(float *x, int B, int T, int nh, int dim, int head_stride,
                        int row_stride, int pos0, float base, double sign)
{
    AL_ASSERT(dim % 2 == 0 && head_stride >= dim);
    rope_job j = {x, B, T, nh, dim, head_stride, row_stride, pos0, base, sign};
    long per_t = (long)B * nh * dim;
    al_parallel_for(T, per_t >= 4096 ? 1 : 4096 / (per_t + 1) + 1, rope_rows, &j);
}

void al_rope_forward(float *x, int B, int T, int nh, int dim, int row_stride,
                     int pos0, float base)
{
    rope_rotate(x, B, T, nh, dim, dim, row_stride, pos0, base, 1.0);
}

void al_rope_backward(float *dx, int B, int T, int nh, int dim, int row_stride,
                      int pos0, float base)
{
    /* forward: x' = R(angle) x, so dx = R^T dx' = R(-angle) dx' */
    rope_rotate(dx, B, T, nh, dim, dim, row_stride, pos0, base, -1.0);
}

void al_rope_forward_strided(float *x, int B, int T, int nh, int dim, int head_stride,
                             int row_stride, int pos0, float base)
{
    rope_rotate(x, B, T, nh, dim, head_stride, row_stride, pos0, base, 1.0);
}

void al_rope_backward_strided(float *dx, int B, int T, int nh, int dim, int head_stride,
                              int row_stride, int pos0, float base)
{
    rope_rotate(dx, B, T, nh, dim, head_stride, row_stride, pos0, base, -1.0);
}

/* ------------------------------------------------------------- softmax */

/* Softmax of a row in place; returns 1 / sum(e) and leaves the row's max
 * in *mx: the two numbers that rebuild the row from its scores. */
AL_CLONES static float softmax_row_stats(float *x, int n, float *mx)
{
    *mx = row_max(x, n);
    exp_shifted(x, *mx, n);
    float inv = (float)(1.0 / sum_d(x, n));
    for (int j = 0; j < n; j++) x[j] *= inv;
    return inv;
}

void al_softmax_row(float *x, int n)
{
    float mx;
    softmax_row_stats(x, n, &mx);
}

/* max and sum are the row's so far; the block's sum joins the scaled old
 * one in double, rounded once per block. */
AL_CLONES static float softmax_block(float *x, int n, float *mx, float *sum)
{
    float bm = row_max(x, n), m = bm > *mx ? bm : *mx;
    float corr = fexp(*mx - m);   /* 0 for the first block: fexp(-inf) */
    exp_shifted(x, m, n);
    *sum = (float)((double)*sum * corr + sum_d(x, n));
    *mx = m;
    return corr;
}

float al_softmax_block(float *x, int n, float *mx, float *sum)
{
    return softmax_block(x, n, mx, sum);
}

/* ----------------------------------------------------------- attention */

/* Query rows per block under a causal mask: block [i0, i1) only needs keys
 * [0, i1), which skips most of the masked upper triangle while keeping the
 * GEMMs large enough to be efficient. Measured on *small* (T 256, d_head
 * 32): 32 and 64 tie, 128 is 10-20 % slower, 256 (no blocking) 40 %. */
#ifndef SDPA_BLOCK
#define SDPA_BLOCK 64
#endif

/* Sizes of one (batch, head) slice. Heads are interleaved in the rows of
 * q, k, v and out, so each slice is read in place through its leading
 * dimension (ldq = H*dqk, ldk = G*dqk, ldv = G*dv, ldo = H*dv). */
typedef struct sdpa_dims {
    int B, T, H, G, dqk, dv, ldq, ldk, ldv, ldo, causal;
    int window, sinks;   /* the band (al_attn_*_band); window 0: none */
    float scale;
} sdpa_dims;

static sdpa_dims sdpa_dims_make(int B, int T, int H, int G, int dqk, int dv,
                                float scale, int causal)
{
    AL_ASSERT(G > 0 && H % G == 0);
    return (sdpa_dims){.B = B, .T = T, .H = H, .G = G, .dqk = dqk, .dv = dv,
                       .ldq = H * dqk, .ldk = G * dqk, .ldv = G * dv,
                       .ldo = H * dv, .causal = causal, .scale = scale};
}

/* Pointers to head h of batch b (it reads K/V group h / (H / G)). */
typedef struct head_ptrs {
    size_t q, k, v, o, stat;   /* offsets into q, k, v, out and (B, H, T) rows */
} head_ptrs;

static head_ptrs head_at(const sdpa_dims *d, int b, int h)
{
    int g = h / (d->H / d->G);
    return (head_ptrs){(size_t)b * d->T * d->ldq + (size_t)h * d->dqk,
                       (size_t)b * d->T * d->ldk + (size_t)g * d->dqk,
                       (size_t)b * d->T * d->ldv + (size_t)g * d->dv,
                       (size_t)b * d->T * d->ldo + (size_t)h * d->dv,
                       ((size_t)b * d->H + h) * d->T};
}

/* Keys a query block [i0, i1) attends to, and keys row i attends to. */
static int block_keys(const sdpa_dims *d, int i1) { return d->causal ? i1 : d->T; }
static int row_keys(const sdpa_dims *d, int i) { return d->causal ? i + 1 : d->T; }

/* S (rows, nk) = scale * q[i0:i1] . k[0:nk]^T, for one head. */
static void scores(float *S, const sdpa_dims *d, const float *q, const float *k,
                   int i0, int i1, int nk)
{
    al_sgemm_here(CblasNoTrans, CblasTrans, i1 - i0, nk, d->dqk, d->scale,
          q + (size_t)i0 * d->ldq, d->ldq, k, d->ldk, 0.0f, S, nk);
}

/* ---- Probabilities kept: al_sdpa_* (att holds P, (B, H, T, T)) */

typedef struct sdpa_job {
    sdpa_dims d;
    float *out, *att, *stat, *dq, *dk, *dv;
    const float *q, *k, *v, *dout, *catt;
} sdpa_job;

/* Heads [lo, hi) of B*H: P = softmax(S), out = P v. */
static void sdpa_fwd_heads(void *ctx, long lo, long hi, int tid)
{
    const sdpa_job *j = ctx;
    const sdpa_dims *d = &j->d;
    int T = d->T;
    for (long bh = lo; bh < hi; bh++) {
        head_ptrs o = head_at(d, (int)(bh / d->H), (int)(bh % d->H));
        float *P = j->att + (size_t)bh * T * T;
        for (int i0 = 0; i0 < T; i0 += SDPA_BLOCK) {
            int i1 = imin(i0 + SDPA_BLOCK, T), nk = block_keys(d, i1);
            al_sgemm_here(CblasNoTrans, CblasTrans, i1 - i0, nk, d->dqk, d->scale,
                  j->q + o.q + (size_t)i0 * d->ldq, d->ldq, j->k + o.k, d->ldk, 0.0f,
                  P + (size_t)i0 * T, T);
            for (int i = i0; i < i1; i++) {
                float *row = P + (size_t)i * T;
                int n = row_keys(d, i);
                al_softmax_row(row, n);
                for (int c = n; c < T; c++) row[c] = 0.0f;   /* masked */
            }
            al_sgemm_here(CblasNoTrans, CblasNoTrans, i1 - i0, d->dv, nk, 1.0f,
                  P + (size_t)i0 * T, T, j->v + o.v, d->ldv, 0.0f,
                  j->out + o.o + (size_t)i0 * d->ldo, d->ldo);
        }
    }
    (void)tid;
}

void al_sdpa_forward(float *out, float *att, const float *q, const float *k,
                     const float *v, int B, int T, int H, int G, int dqk,
                     int dv, float scale, int causal)
{
    sdpa_job j = {.d = sdpa_dims_make(B, T, H, G, dqk, dv, scale, causal),
                  .out = out, .att = att, .q = q, .k = k, .v = v};
    al_parallel_for((long)B * H, 1, sdpa_fwd_heads, &j);
}

/* Turns dP into dS in place for one row of n unmasked entries out of w:
 * forward P = softmax(S), S = scale * q.k, so
 * dS = scale * P * (dP - sum(dP * P)); masked entries get 0. */
AL_CLONES static void softmax_backward_row(float *dS, const float *P, int n, int w,
                                 float scale)
{
    float df = (float)dot_d(dS, P, n);
    for (int j = 0; j < n; j++) dS[j] = scale * P[j] * (dS[j] - df);
    for (int j = n; j < w; j++) dS[j] = 0.0f;
}

/* Given P (rows, ldp) and dS of query block [i0, i1) over keys [0, nk) of
 * one head: dq[i0:i1] (+)= dS k ; dk[0:nk] += dS^T q ; dv[0:nk] += P^T dout. */
static void attn_block_grads(const sdpa_job *j, head_ptrs o, const float *P, int ldp,
                             const float *dS, int i0, int i1, int nk, float dq_beta)
{
    const sdpa_dims *d = &j->d;
    int rows = i1 - i0;
    al_sgemm_here(CblasNoTrans, CblasNoTrans, rows, d->dqk, nk, 1.0f, dS, ldp, j->k + o.k,
          d->ldk, dq_beta, j->dq + o.q + (size_t)i0 * d->ldq, d->ldq);
    al_sgemm_here(CblasTrans, CblasNoTrans, nk, d->dqk, rows, 1.0f, dS, ldp,
          j->q + o.q + (size_t)i0 * d->ldq, d->ldq, 1.0f, j->dk + o.k, d->ldk);
    al_sgemm_here(CblasTrans, CblasNoTrans, nk, d->dv, rows, 1.0f, P, ldp,
          j->dout + o.o + (size_t)i0 * d->ldo, d->ldo, 1.0f, j->dv + o.v, d->ldv);
}

/* Groups [lo, hi) of B*G, each with its heads in order (they share dk, dv,
 * so one thread owns a group and the sums keep the serial order). */
static void sdpa_bwd_groups(void *ctx, long lo, long hi, int tid)
{
    const sdpa_job *j = ctx;
    const sdpa_dims *d = &j->d;
    int T = d->T, R = d->H / d->G;
    float *dS = al_parallel_scratch(tid, (size_t)SDPA_BLOCK * T);
    for (long bg = lo; bg < hi; bg++)
        for (int h = (int)(bg % d->G) * R; h < (int)(bg % d->G + 1) * R; h++) {
            int b = (int)(bg / d->G);
            head_ptrs o = head_at(d, b, h);
            const float *P = j->catt + ((size_t)b * d->H + h) * T * T;
            for (int i0 = 0; i0 < T; i0 += SDPA_BLOCK) {
                int i1 = imin(i0 + SDPA_BLOCK, T), nk = block_keys(d, i1);
                /* forward: out = P v, so dP = dout v^T */
                al_sgemm_here(CblasNoTrans, CblasTrans, i1 - i0, nk, d->dv, 1.0f,
                      j->dout + o.o + (size_t)i0 * d->ldo, d->ldo, j->v + o.v, d->ldv,
                      0.0f, dS, T);
                for (int i = i0; i < i1; i++)
                    softmax_backward_row(dS + (size_t)(i - i0) * T, P + (size_t)i * T,
                                         row_keys(d, i), nk, d->scale);
                attn_block_grads(j, o, P + (size_t)i0 * T, T, dS, i0, i1, nk, 1.0f);
            }
        }
}

void al_sdpa_backward(float *dq, float *dk, float *dv, float *scratch,
                      const float *dout, const float *att, const float *q,
                      const float *k, const float *v, int B, int T, int H,
                      int G, int dqk, int dvd, float scale, int causal)
{
    (void)scratch;   /* each thread has its own (al_parallel_scratch) */
    sdpa_job j = {.d = sdpa_dims_make(B, T, H, G, dqk, dvd, scale, causal),
                  .dq = dq, .dk = dk, .dv = dv, .q = q, .k = k, .v = v,
                  .dout = dout, .catt = att};
    al_parallel_for((long)B * G, 1, sdpa_bwd_groups, &j);
}

/* ---- Probabilities recomputed: al_attn_* (stat holds max and 1/sum) */

/* Scores of row i outside the band set to -inf, so that they weigh 0
 * (fexp(-inf) is 0) in the softmax and in its rebuilt probabilities; the
 * diagonal is always in the band, so the row max stays finite. n: the
 * row's unmasked keys under the causal mask. */
static void band_mask(float *row, const sdpa_dims *d, int i, int n)
{
    if (d->window <= 0) return;
    for (int j = d->sinks; j < i - d->window + 1 && j < n; j++) row[j] = -INFINITY;
    if (d->causal) return;
    int hi = i + d->window > d->sinks ? i + d->window : d->sinks;   /* |i - j| < window */
    for (int j = hi; j < n; j++) row[j] = -INFINITY;
}

/* Scores of block [i0, i1) turned into probabilities in place, rebuilt
 * exactly as the forward pass made them from the saved row statistics
 * (st: (T, 2) max and 1/sum), or made and saved when save != 0. */
static void block_probs(float *S, float *st, const sdpa_dims *d, int i0, int i1, int nk,
                        int save)
{
    for (int i = i0; i < i1; i++) {
        float *row = S + (size_t)(i - i0) * nk;
        int n = row_keys(d, i);
        band_mask(row, d, i, n);
        if (save) {
            st[2 * i + 1] = softmax_row_stats(row, n, &st[2 * i]);
        } else {
            exp_shifted_scaled(row, st[2 * i], st[2 * i + 1], n);
        }
        for (int c = n; c < nk; c++) row[c] = 0.0f;   /* masked */
    }
}

/* Heads [lo, hi) of B*H: per query block S = scale q k^T, P = softmax(S),
 * out = P v; only the row statistics are kept. */
static void attn_fwd_heads(void *ctx, long lo, long hi, int tid)
{
    const sdpa_job *j = ctx;
    const sdpa_dims *d = &j->d;
    float *S = al_parallel_scratch(tid, (size_t)SDPA_BLOCK * d->T);
    for (long bh = lo; bh < hi; bh++) {
        head_ptrs o = head_at(d, (int)(bh / d->H), (int)(bh % d->H));
        for (int i0 = 0; i0 < d->T; i0 += SDPA_BLOCK) {
            int i1 = imin(i0 + SDPA_BLOCK, d->T), nk = block_keys(d, i1);
            scores(S, d, j->q + o.q, j->k + o.k, i0, i1, nk);
            block_probs(S, j->stat + 2 * o.stat, d, i0, i1, nk, 1);
            al_sgemm_here(CblasNoTrans, CblasNoTrans, i1 - i0, d->dv, nk, 1.0f, S, nk,
                  j->v + o.v, d->ldv, 0.0f, j->out + o.o + (size_t)i0 * d->ldo, d->ldo);
        }
    }
}

static sdpa_dims band_dims(int B, int T, int H, int G, int dqk, int dv, float scale,
                           int causal, int window, int sinks)
{
    AL_ASSERT(window >= 0 && sinks >= 0);
    sdpa_dims d = sdpa_dims_make(B, T, H, G, dqk, dv, scale, causal);
    d.window = window;
    d.sinks = sinks;
    return d;
}

void al_attn_forward_band(float *out, float *stat, const float *q, const float *k,
                          const float *v, int B, int T, int H, int G, int dqk, int dv,
                          float scale, int causal, int window, int sinks)
{
    sdpa_job j = {.d = band_dims(B, T, H, G, dqk, dv, scale, causal, window, sinks),
                  .out = out, .stat = stat, .q = q, .k = k, .v = v};
    al_parallel_for((long)B * H, 1, attn_fwd_heads, &j);
}

void al_attn_forward(float *out, float *stat, const float *q, const float *k,
                     const float *v, int B, int T, int H, int G, int dqk,
                     int dv, float scale, int causal)
{
    al_attn_forward_band(out, stat, q, k, v, B, T, H, G, dqk, dv, scale, causal, 0, 0);
}

/* One head's probabilities in place: each query block's scores are made
 * at P + i0*T exactly as the forward pass made them (ld nk, the same GEMM),
 * turned into probabilities from the saved row statistics, then spread to
 * rows of T (last row first, so no row is overwritten before it moves). */
static void attn_probs_heads(void *ctx, long lo, long hi, int tid)
{
    const sdpa_job *j = ctx;
    const sdpa_dims *d = &j->d;
    int T = d->T;
    for (long h = lo; h < hi; h++) {
        head_ptrs o = head_at(d, 0, (int)h);
        float *P = j->att + (size_t)h * T * T;
        for (int i0 = 0; i0 < T; i0 += SDPA_BLOCK) {
            int i1 = imin(i0 + SDPA_BLOCK, T), nk = block_keys(d, i1);
            float *S = P + (size_t)i0 * T;
            scores(S, d, j->q + o.q, j->k + o.k, i0, i1, nk);
            block_probs(S, j->stat + 2 * o.stat, d, i0, i1, nk, 0);
            for (int r = i1 - i0 - 1; r >= 0 && nk < T; r--) {
                memmove(S + (size_t)r * T, S + (size_t)r * nk, nk * sizeof(float));
                memset(S + (size_t)r * T + nk, 0, (size_t)(T - nk) * sizeof(float));
            }
        }
    }
    (void)tid;
}

void al_attn_probs_band(float *P, const float *stat, const float *q, const float *k, int T,
                        int H, int G, int dqk, float scale, int causal, int window, int sinks)
{
    sdpa_job j = {.d = band_dims(1, T, H, G, dqk, 0, scale, causal, window, sinks),
                  .att = P, .stat = (float *)stat, .q = q, .k = k};
    al_parallel_for(H, 1, attn_probs_heads, &j);
}

void al_attn_probs(float *P, const float *stat, const float *q, const float *k, int T,
                   int H, int G, int dqk, float scale, int causal)
{
    al_attn_probs_band(P, stat, q, k, T, H, G, dqk, scale, causal, 0, 0);
}

/* Zeroes rows [0, T) of width w at stride ld. */
static void zero_rows(float *x, int T, int w, int ld)
{
    for (int t = 0; t < T; t++) memset(x + (size_t)t * ld, 0, w * sizeof(float));
}

/* Groups [lo, hi) of B*G: recompute P block by block, then as sdpa. */
static void attn_bwd_groups(void *ctx, long lo, long hi, int tid)
{
    const sdpa_job *j = ctx;
    const sdpa_dims *d = &j->d;
    int T = d->T, R = d->H / d->G;
    float *P = al_parallel_scratch(tid, 2 * (size_t)SDPA_BLOCK * T), *dS = P + SDPA_BLOCK * T;
    for (long bg = lo; bg < hi; bg++) {
        int b = (int)(bg / d->G), g = (int)(bg % d->G);
        head_ptrs o = head_at(d, b, g * R);
        zero_rows(j->dk + o.k, T, d->dqk, d->ldk);
        zero_rows(j->dv + o.v, T, d->dv, d->ldv);
        for (int h = g * R; h < (g + 1) * R; h++) {
            o = head_at(d, b, h);
            for (int i0 = 0; i0 < T; i0 += SDPA_BLOCK) {
                int i1 = imin(i0 + SDPA_BLOCK, T), nk = block_keys(d, i1);
                scores(P, d, j->q + o.q, j->k + o.k, i0, i1, nk);
                block_probs(P, j->stat + 2 * o.stat, d, i0, i1, nk, 0);
                al_sgemm_here(CblasNoTrans, CblasTrans, i1 - i0, nk, d->dv, 1.0f,
                      j->dout + o.o + (size_t)i0 * d->ldo, d->ldo, j->v + o.v, d->ldv,
                      0.0f, dS, nk);   /* dP = dout v^T */
                for (int i = i0; i < i1; i++)
                    softmax_backward_row(dS + (size_t)(i - i0) * nk, P + (size_t)(i - i0) * nk,
                                         row_keys(d, i), nk, d->scale);
                attn_block_grads(j, o, P, nk, dS, i0, i1, nk, 0.0f);
            }
        }
    }
}

void al_attn_backward_band(float *dq, float *dk, float *dv, const float *dout,
                           const float *stat, const float *q, const float *k, const float *v,
                           int B, int T, int H, int G, int dqk, int dvd, float scale,
                           int causal, int window, int sinks)
{
    sdpa_job j = {.d = band_dims(B, T, H, G, dqk, dvd, scale, causal, window, sinks),
                  .dq = dq, .dk = dk, .dv = dv, .q = q, .k = k, .v = v,
                  .dout = dout, .stat = (float *)stat};
    al_parallel_for((long)B * G, 1, attn_bwd_groups, &j);
}

void al_attn_backward(float *dq, float *dk, float *dv, const float *dout,
                      const float *stat, const float *q, const float *k,
                      const float *v, int B, int T, int H, int G, int dqk,
                      int dvd, float scale, int causal)
{
    al_attn_backward_band(dq, dk, dv, dout, stat, q, k, v, B, T, H, G, dqk, dvd, scale,
                          causal, 0, 0);
}

/* ------------------------------------------------------- cross-entropy */

static double weight_sum(const float *w, int N)
{
    if (!w) return N;
    double s = 0.0;
    for (int i = 0; i < N; i++) s += w[i];
    return s;
}

/* log(sum(e^x)) of a row; e (V) is scratch. */
static double row_logsumexp(const float *x, float *e, int V)
{
    float mx = row_max(x, V);
    memcpy(e, x, V * sizeof(float));
    exp_shifted(e, mx, V);
    return mx + log(sum_d(e, V));
}

/* At most this many chunks, so that their partial sums fit on the stack. */
#define XENT_MAX_CHUNKS 256

typedef struct xent_job {
    float *logits;
    const float *cl, *weights;
    const int *targets;
    int V;
    double wsum, coef;
    double part[XENT_MAX_CHUNKS];
    int chunks;
    long N;
} xent_job;

AL_CLONES static void xent_fwd_rows(void *ctx, long lo, long hi, int tid)
{
    xent_job *j = ctx;
    int V = j->V;
    float *e = al_parallel_scratch(tid, V);
    double loss = 0.0;
    for (long i = lo; i < hi; i++) {
        double wi = j->weights ? j->weights[i] : 1.0;
        if (wi == 0.0) continue;   /* padding rows are never read */
        AL_ASSERT(j->targets[i] >= 0 && j->targets[i] < V);
        const float *row = j->cl + (size_t)i * V;   /* (V) */
        loss += wi * (row_logsumexp(row, e, V) - row[j->targets[i]]);
    }
    /* Which chunk this is follows from lo alone, so the sum below is in
     * chunk order whatever thread ran it. */
    for (int c = 0; c < j->chunks; c++)
        if (al_parallel_cut(j->N, 64, j->chunks, c) == lo) j->part[c] = loss;
}

double al_xent_forward(const float *logits, const int *targets,
                       const float *weights, int N, int V)
{
    xent_job j = {.cl = logits, .weights = weights, .targets = targets, .V = V, .N = N};
    j.wsum = weight_sum(weights, N);
    if (j.wsum == 0.0 || N <= 0) return 0.0;
    j.chunks = al_parallel_chunks(N, 64);
    AL_ASSERT(j.chunks <= XENT_MAX_CHUNKS);
    al_parallel_for(N, 64, xent_fwd_rows, &j);
    double loss = 0.0;
    for (int c = 0; c < j.chunks; c++) loss += j.part[c];
    return loss / j.wsum;
}

/* forward: loss = sum_i w_i (logsumexp(row_i) - row_i[t_i]) / sum(w), so
 * dlogits = (softmax(row_i) - onehot(t_i)) * w_i / sum(w) * dloss. */
AL_CLONES static void xent_bwd_rows(void *ctx, long lo, long hi, int tid)
{
    const xent_job *j = ctx;
    int V = j->V;
    for (long i = lo; i < hi; i++) {
        float *row = j->logits + (size_t)i * V;   /* (V) */
        double wi = j->weights ? j->weights[i] : 1.0;
        if (j->wsum == 0.0 || wi == 0.0) {
            memset(row, 0, V * sizeof(float));
            continue;
        }
        int t = j->targets[i];
        AL_ASSERT(t >= 0 && t < V);
        float mx;
        softmax_row_stats(row, V, &mx);
        float coef = (float)(wi / j->wsum * j->coef);
        for (int c = 0; c < V; c++) row[c] *= coef;
        row[t] -= coef;
    }
    (void)tid;
}

void al_xent_backward_inplace(float *logits, const int *targets,
                              const float *weights, int N, int V, float dloss)
{
    xent_job j = {.logits = logits, .weights = weights, .targets = targets, .V = V,
                  .coef = dloss, .N = N};
    j.wsum = weight_sum(weights, N);
    al_parallel_for(N, 64, xent_bwd_rows, &j);
}
