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

#include "al_bf16.h"
#include "al_gemm.h"
#include "al_kernels.h"
#include "al_parallel.h"
#include "al_util.h"
#include "kernels_inline.h"

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
    /* forward: out = inp . w^T. Under bf16 both products read dout in
     * its stored layout: the memo packs it once (al_bf16.h). */
    al_bf16_memo_begin();
    if (dinp)   /* dinp (N, IC) = dout (N, OC) . w (OC, IC) + beta_inp dinp */
        al_gemm_nn(dinp, IC, dout, OC, w, IC, N, IC, OC, 1.0f, beta_inp);
    if (dw)     /* dw (OC, IC) = dout^T (OC, N) . inp (N, IC) + beta_w dw */
        al_gemm_tn(dw, IC, dout, OC, inp, IC, OC, IC, N, 1.0f, beta_w);
    al_bf16_memo_end();
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
    const al_rope *r;
    double sign;
} rope_job;

/* Rotates pair (i, i + dim/2) of every head by sign * angle(t, i) for the
 * tokens t in [lo, hi), scaled by mscale. The angle depends only on (t, i),
 * so cos and sin are computed once per token, in double, for up to ROPE_I
 * pairs at a time and applied across the batch and the heads with an inner
 * loop over contiguous i that vectorises: no table to keep. */
#define ROPE_I 64

/* The frequencies of pairs i < dim/2: kept per thread for the last (dim,
 * rope) asked for, since decode rotates one token at a time and a pow per
 * pair per call cost more than the rotation. NULL for dim/2 > ROPE_FREQS. */
#define ROPE_FREQS 512

int al_rope_dims(const al_rope *r, int dim)
{
    if (r->fraction >= 1.0f) return dim - dim % 2;
    if (!(r->fraction > 0.0f)) return 0;
    return 2 * (int)floor((double)r->fraction * dim / 2.0 + 1e-9);
}

/* YaRN's ramp (paper eq. 18-19): r = T0 / wavelength; gamma = 0 below
 * alpha = 1 (interpolate), 1 above beta = 32 (extrapolate), linear in r
 * between. */
static double yarn_gamma(double theta, int T0)
{
    const double alpha = 1.0, beta = 32.0;
    double r = T0 * theta / (2.0 * M_PI);
    if (r < alpha) return 0.0;
    if (r > beta) return 1.0;
    return (r - alpha) / (beta - alpha);
}

double al_rope_freq(const al_rope *r, int n, int i)
{
    double base = r->base, F = r->factor;
    if (r->kind == AL_ROPE_NTK && n > 2) base *= pow(F, (double)n / (n - 2));
    double theta = pow(base, -2.0 * i / n);
    switch (r->kind) {
    case AL_ROPE_LINEAR: return theta / F;
    case AL_ROPE_YARN: {
        double g = yarn_gamma(theta, r->original_seq_len);
        return (1.0 - g) * theta / F + g * theta;
    }
    default: return theta;
    }
}

double al_rope_mscale(const al_rope *r)
{
    return r->kind == AL_ROPE_YARN && r->factor > 1.0f ? 0.1 * log(r->factor) + 1.0 : 1.0;
}

al_rope al_rope_of(const al_attn_shape *s)
{
    if (s->rope.base > 0) return s->rope;
    return (al_rope){.base = s->rope_base, .fraction = 1.0f, .kind = AL_ROPE_NONE,
                     .factor = 1.0f, .original_seq_len = s->seq_len};
}

static const double *rope_freqs(int dim, const al_rope *r)
{
    static _Thread_local struct {
        int dim;
        al_rope r;
        double f[ROPE_FREQS];
    } c;
    if (dim / 2 > ROPE_FREQS) return NULL;
    if (c.dim != dim || memcmp(&c.r, r, sizeof *r) != 0) {
        for (int i = 0; i < dim / 2; i++) c.f[i] = al_rope_freq(r, dim, i);
        c.dim = dim, c.r = *r;
    }
    return c.f;
}

AL_CLONES static void rope_rows(void *ctx, long lo, long hi, int tid)
{
    const rope_job *j = ctx;
    int half = j->dim / 2;
    double c[ROPE_I], s[ROPE_I], m = al_rope_mscale(j->r);
    const double *freq = rope_freqs(j->dim, j->r);
    for (long t = lo; t < hi; t++)
        for (int i0 = 0; i0 < half; i0 += ROPE_I) {
            int ni = imin(ROPE_I, half - i0);
            for (int i = 0; i < ni; i++) {
                double f = freq ? freq[i0 + i] : al_rope_freq(j->r, j->dim, i0 + i);
                sincos((double)(j->pos0 + t) * f, &s[i], &c[i]);
                s[i] *= j->sign * m, c[i] *= m;
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

/* x' = m R(angle) x; its transpose (sign -1) is m R(-angle). */
static void rope_rotate(float *x, int B, int T, int nh, int dim, int head_stride,
                        int row_stride, int pos0, const al_rope *r, double sign)
{
    AL_ASSERT(dim % 2 == 0 && head_stride >= dim);
    if (dim == 0) return;   /* NoPE */
    rope_job j = {x, B, T, nh, dim, head_stride, row_stride, pos0, r, sign};
    long per_t = (long)B * nh * dim;
    al_parallel_for(T, per_t >= 4096 ? 1 : 4096 / (per_t + 1) + 1, rope_rows, &j);
}

static al_rope plain(float base)
{
    return (al_rope){.base = base, .fraction = 1.0f, .kind = AL_ROPE_NONE, .factor = 1.0f};
}

void al_rope_forward(float *x, int B, int T, int nh, int dim, int row_stride,
                     int pos0, float base)
{
    al_rope r = plain(base);
    rope_rotate(x, B, T, nh, dim, dim, row_stride, pos0, &r, 1.0);
}

void al_rope_backward(float *dx, int B, int T, int nh, int dim, int row_stride,
                      int pos0, float base)
{
    /* forward: x' = R(angle) x, so dx = R^T dx' = R(-angle) dx' */
    al_rope r = plain(base);
    rope_rotate(dx, B, T, nh, dim, dim, row_stride, pos0, &r, -1.0);
}

void al_rope_forward_strided(float *x, int B, int T, int nh, int dim, int head_stride,
                             int row_stride, int pos0, float base)
{
    al_rope r = plain(base);
    rope_rotate(x, B, T, nh, dim, head_stride, row_stride, pos0, &r, 1.0);
}

void al_rope_backward_strided(float *dx, int B, int T, int nh, int dim, int head_stride,
                              int row_stride, int pos0, float base)
{
    al_rope r = plain(base);
    rope_rotate(dx, B, T, nh, dim, head_stride, row_stride, pos0, &r, -1.0);
}

void al_rope_apply_forward(float *x, int B, int T, int nh, int dim, int head_stride,
                           int row_stride, int pos0, const al_rope *r)
{
    rope_rotate(x, B, T, nh, al_rope_dims(r, dim), head_stride, row_stride, pos0, r, 1.0);
}

void al_rope_apply_backward(float *dx, int B, int T, int nh, int dim, int head_stride,
                            int row_stride, int pos0, const al_rope *r)
{
    rope_rotate(dx, B, T, nh, al_rope_dims(r, dim), head_stride, row_stride, pos0, r, -1.0);
}

void al_rope_layer_forward(float *x, int B, int T, int nh, int dim, int head_stride,
                           int row_stride, int pos0, const al_attn_shape *s)
{
    al_rope r = al_rope_of(s);
    al_rope_apply_forward(x, B, T, nh, dim, head_stride, row_stride, pos0, &r);
}

void al_rope_layer_backward(float *dx, int B, int T, int nh, int dim, int head_stride,
                            int row_stride, int pos0, const al_attn_shape *s)
{
    al_rope r = al_rope_of(s);
    al_rope_apply_backward(dx, B, T, nh, dim, head_stride, row_stride, pos0, &r);
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
