/*
 * kernels.c - the shared numeric kernels (the contract is in al_kernels.h).
 *
 * Matrix products go to OpenBLAS; everything else is a plain loop over
 * contiguous rows. Row reductions (norms, softmax sums, log-sum-exp)
 * accumulate in double: they cost little next to the GEMMs and keep long
 * rows accurate. Nothing here allocates.
 */
#include <math.h>
#include <stddef.h>
#include <cblas.h>

#include "al_kernels.h"
#include "al_util.h"

static int imin(int a, int b) { return a < b ? a : b; }

/* ---------------------------------------------------------------- GEMM */

/* Row-major sgemm that tolerates empty products: BLAS rejects a leading
 * dimension of 0 (an empty inner dimension), yet C must still be scaled.
 * Bad leading dimensions are asserted here because OpenBLAS only prints a
 * warning and returns with C unwritten. */
static void sgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K,
                  float alpha, const float *A, int lda, const float *B, int ldb,
                  float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
    AL_ASSERT(ldc >= N);
    if (K <= 0) {
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float *c = C + (size_t)i * ldc + j;
                *c = beta == 0.0f ? 0.0f : beta * *c;   /* beta 0 ignores NaN */
            }
        return;
    }
    AL_ASSERT(lda >= (ta == CblasNoTrans ? K : M));   /* A (M, K) or (K, M) */
    AL_ASSERT(ldb >= (tb == CblasNoTrans ? N : K));   /* B (K, N) or (N, K) */
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C,
                ldc);
}

void al_gemm_nt(float *C, int ldc, const float *A, int lda, const float *B,
                int ldb, int M, int N, int K, float alpha, float beta)
{
    sgemm(CblasNoTrans, CblasTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void al_gemm_nn(float *C, int ldc, const float *A, int lda, const float *B,
                int ldb, int M, int N, int K, float alpha, float beta)
{
    sgemm(CblasNoTrans, CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C,
          ldc);
}

void al_gemm_tn(float *C, int ldc, const float *A, int lda, const float *B,
                int ldb, int M, int N, int K, float alpha, float beta)
{
    sgemm(CblasTrans, CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* -------------------------------------------------------------- linear */

void al_linear_forward(float *out, const float *inp, const float *w,
                       int N, int IC, int OC)
{
    /* out (N, OC) = inp (N, IC) . w^T, w (OC, IC) */
    al_gemm_nt(out, OC, inp, IC, w, IC, N, OC, IC, 1.0f, 0.0f);
}

void al_linear_backward(float *dinp, float *dw, const float *dout,
                        const float *inp, const float *w, int N, int IC, int OC)
{
    /* forward: out = inp . w^T */
    if (dinp)   /* dinp (N, IC) += dout (N, OC) . w (OC, IC) */
        al_gemm_nn(dinp, IC, dout, OC, w, IC, N, IC, OC, 1.0f, 1.0f);
    if (dw)     /* dw (OC, IC) += dout^T (OC, N) . inp (N, IC) */
        al_gemm_tn(dw, IC, dout, OC, inp, IC, OC, IC, N, 1.0f, 1.0f);
}

/* ------------------------------------------------------------- RMSNorm */

void al_rmsnorm_forward(float *out, float *rstd, const float *x,
                        const float *w, int N, int C, float eps)
{
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C;   /* (C) */
        float *o = out + (size_t)n * C;        /* (C) */
        double ss = 0.0;
        for (int c = 0; c < C; c++) ss += (double)xr[c] * xr[c];
        float r = (float)(1.0 / sqrt(ss / C + eps));
        for (int c = 0; c < C; c++) o[c] = xr[c] * r * w[c];
        if (rstd) rstd[n] = r;
    }
}

void al_rmsnorm_backward(float *dx, float *dw, const float *dout,
                         const float *x, const float *w, const float *rstd,
                         int N, int C)
{
    /* eps is not passed here, so the saved rstd is the only way back. */
    AL_ASSERT(rstd != NULL);
    for (int n = 0; n < N; n++) {
        const float *xr = x + (size_t)n * C, *g = dout + (size_t)n * C;
        float *d = dx + (size_t)n * C;
        float r = rstd[n];
        /* forward: o[c] = x[c] * r * w[c], r = 1 / sqrt(mean(x^2) + eps);
         * with xhat = x r and dxhat = dout w, r depends on every x[c]:
         * dx = r (dxhat - xhat mean(dxhat xhat)) */
        double m = 0.0;
        for (int c = 0; c < C; c++) m += (double)(g[c] * w[c]) * (xr[c] * r);
        float mf = (float)(m / C);
        for (int c = 0; c < C; c++)
            d[c] += r * (g[c] * w[c] - xr[c] * r * mf);
        if (dw)
            for (int c = 0; c < C; c++) dw[c] += g[c] * xr[c] * r;
    }
}

/* ---------------------------------------------------------------- GELU */

#define GELU_K 0.7978845608028654f   /* sqrt(2 / pi) */
#define GELU_C 0.044715f

void al_gelu_forward(float *out, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float xi = x[i], u = GELU_K * (xi + GELU_C * xi * xi * xi);
        out[i] = 0.5f * xi * (1.0f + tanhf(u));
    }
}

void al_gelu_backward(float *dx, const float *dout, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        /* forward: out = 0.5 x (1 + tanh(u)), u = K (x + C x^3) */
        float xi = x[i], u = GELU_K * (xi + GELU_C * xi * xi * xi);
        float th = tanhf(u);
        float du = GELU_K * (1.0f + 3.0f * GELU_C * xi * xi);
        float g = 0.5f * (1.0f + th) + 0.5f * xi * (1.0f - th * th) * du;
        dx[i] += dout[i] * g;
    }
}

/* ---------------------------------------------------------------- RoPE */

/* Rotates pair (i, i + dim/2) of every head by sign * angle(t, i). The
 * angle depends only on (t, i), so cos and sin are computed once, in
 * double, and applied across the batch and the heads: no table needed.
 * t is the outer loop so each token's rows stay in cache. */
static void rope_rotate(float *x, int B, int T, int nh, int dim, int row_stride,
                        int pos0, float base, double sign)
{
    AL_ASSERT(dim % 2 == 0);
    int half = dim / 2;
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < half; i++) {
            double ang = (double)(pos0 + t) * pow(base, -2.0 * i / dim);
            double c = cos(ang), s = sign * sin(ang);
            for (int b = 0; b < B; b++) {
                float *row = x + ((size_t)b * T + t) * row_stride;
                for (int h = 0; h < nh; h++) {
                    float *p = row + (size_t)h * dim + i;
                    double x1 = p[0], x2 = p[half];
                    p[0] = (float)(x1 * c - x2 * s);
                    p[half] = (float)(x2 * c + x1 * s);
                }
            }
        }
    }
}

void al_rope_forward(float *x, int B, int T, int nh, int dim, int row_stride,
                     int pos0, float base)
{
    rope_rotate(x, B, T, nh, dim, row_stride, pos0, base, 1.0);
}

void al_rope_backward(float *dx, int B, int T, int nh, int dim, int row_stride,
                      int pos0, float base)
{
    /* forward: x' = R(angle) x, so dx = R^T dx' = R(-angle) dx' */
    rope_rotate(dx, B, T, nh, dim, row_stride, pos0, base, -1.0);
}

/* ------------------------------------------------------------- softmax */

void al_softmax_row(float *x, int n)
{
    float mx = -INFINITY;
    for (int j = 0; j < n; j++) mx = x[j] > mx ? x[j] : mx;
    double sum = 0.0;
    for (int j = 0; j < n; j++) {
        x[j] = expf(x[j] - mx);
        sum += x[j];
    }
    float inv = (float)(1.0 / sum);
    for (int j = 0; j < n; j++) x[j] *= inv;
}

/* ----------------------------------------------------------- attention */

/* Query rows per block under a causal mask: block [i0, i1) only needs keys
 * [0, i1), which skips most of the masked upper triangle while keeping the
 * GEMMs large enough to be efficient. */
#define SDPA_BLOCK 64

/* Sizes of one (batch, head) slice. Heads are interleaved in the rows of
 * q, k, v and out, so each slice is read in place through its leading
 * dimension (ldq = H*dqk, ldk = G*dqk, ldv = G*dv, ldo = H*dv). */
typedef struct sdpa_dims {
    int T, dqk, dv, ldq, ldk, ldv, ldo, causal;
    float scale;
} sdpa_dims;

static sdpa_dims sdpa_dims_make(int T, int H, int G, int dqk, int dv,
                                float scale, int causal)
{
    AL_ASSERT(G > 0 && H % G == 0);
    return (sdpa_dims){.T = T, .dqk = dqk, .dv = dv, .ldq = H * dqk,
                       .ldk = G * dqk, .ldv = G * dv, .ldo = H * dv,
                       .causal = causal, .scale = scale};
}

/* One head: P (T, T) = softmax(scale q k^T), out (T, dv) = P v. */
static void sdpa_head_forward(float *out, float *P, const float *q,
                              const float *k, const float *v, const sdpa_dims *d)
{
    int T = d->T, blk = d->causal ? SDPA_BLOCK : T;
    for (int i0 = 0; i0 < T; i0 += blk) {   /* S = scale * q . k^T */
        int i1 = imin(i0 + blk, T), nk = d->causal ? i1 : T;
        al_gemm_nt(P + (size_t)i0 * T, T, q + (size_t)i0 * d->ldq, d->ldq, k,
                   d->ldk, i1 - i0, nk, d->dqk, d->scale, 0.0f);
    }
    for (int i = 0; i < T; i++) {
        float *row = P + (size_t)i * T;
        int n = d->causal ? i + 1 : T;
        al_softmax_row(row, n);
        for (int j = n; j < T; j++) row[j] = 0.0f;   /* masked, or never computed */
    }
    for (int i0 = 0; i0 < T; i0 += blk) {   /* out = P . v */
        int i1 = imin(i0 + blk, T), nk = d->causal ? i1 : T;
        al_gemm_nn(out + (size_t)i0 * d->ldo, d->ldo, P + (size_t)i0 * T, T, v,
                   d->ldv, i1 - i0, d->dv, nk, 1.0f, 0.0f);
    }
}

void al_sdpa_forward(float *out, float *att, const float *q, const float *k,
                     const float *v, int B, int T, int H, int G, int dqk,
                     int dv, float scale, int causal)
{
    sdpa_dims d = sdpa_dims_make(T, H, G, dqk, dv, scale, causal);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            int g = h / (H / G);
            sdpa_head_forward(out + (size_t)b * T * d.ldo + (size_t)h * dv,
                              att + ((size_t)b * H + h) * T * T,
                              q + (size_t)b * T * d.ldq + (size_t)h * dqk,
                              k + (size_t)b * T * d.ldk + (size_t)g * dqk,
                              v + (size_t)b * T * d.ldv + (size_t)g * dv, &d);
        }
}

/* Turns dP into dS in place for one row of n unmasked entries out of T:
 * forward P = softmax(S), S = scale * q.k, so
 * dS = scale * P * (dP - sum(dP * P)); masked entries get 0. */
static void softmax_backward_row(float *dS, const float *P, int n, int T,
                                 float scale)
{
    double dot = 0.0;
    for (int j = 0; j < n; j++) dot += (double)dS[j] * P[j];
    float df = (float)dot;
    for (int j = 0; j < n; j++) dS[j] = scale * P[j] * (dS[j] - df);
    for (int j = n; j < T; j++) dS[j] = 0.0f;
}

/* One head; dS (T, T) is scratch. dq, dk, dv accumulate. Under a causal
 * mask row block [i0, i1) touches keys [0, i1) and key block [j0, j1) is
 * touched by query rows [j0, T) only. */
static void sdpa_head_backward(float *dq, float *dk, float *dv, float *dS,
                               const float *dout, const float *P,
                               const float *q, const float *k, const float *v,
                               const sdpa_dims *d)
{
    int T = d->T, blk = d->causal ? SDPA_BLOCK : T;
    for (int i0 = 0; i0 < T; i0 += blk) {   /* forward: out = P . v */
        int i1 = imin(i0 + blk, T), nk = d->causal ? i1 : T;
        /* dP (T, T) = dout (T, dv) . v^T */
        al_gemm_nt(dS + (size_t)i0 * T, T, dout + (size_t)i0 * d->ldo, d->ldo, v,
                   d->ldv, i1 - i0, nk, d->dv, 1.0f, 0.0f);
    }
    for (int i = 0; i < T; i++)
        softmax_backward_row(dS + (size_t)i * T, P + (size_t)i * T,
                             d->causal ? i + 1 : T, T, d->scale);
    for (int i0 = 0; i0 < T; i0 += blk) {   /* forward: S = scale * q . k^T */
        int i1 = imin(i0 + blk, T), nk = d->causal ? i1 : T;
        /* dq (T, dqk) += dS (T, T) . k (T, dqk)  (scale is inside dS) */
        al_gemm_nn(dq + (size_t)i0 * d->ldq, d->ldq, dS + (size_t)i0 * T, T, k,
                   d->ldk, i1 - i0, d->dqk, nk, 1.0f, 1.0f);
    }
    for (int j0 = 0; j0 < T; j0 += blk) {
        int j1 = imin(j0 + blk, T), r0 = d->causal ? j0 : 0;
        /* dv (T, dv) += P^T . dout ;  dk (T, dqk) += dS^T . q */
        al_gemm_tn(dv + (size_t)j0 * d->ldv, d->ldv, P + (size_t)r0 * T + j0, T,
                   dout + (size_t)r0 * d->ldo, d->ldo, j1 - j0, d->dv, T - r0,
                   1.0f, 1.0f);
        al_gemm_tn(dk + (size_t)j0 * d->ldk, d->ldk, dS + (size_t)r0 * T + j0, T,
                   q + (size_t)r0 * d->ldq, d->ldq, j1 - j0, d->dqk, T - r0,
                   1.0f, 1.0f);
    }
}

void al_sdpa_backward(float *dq, float *dk, float *dv, float *scratch,
                      const float *dout, const float *att, const float *q,
                      const float *k, const float *v, int B, int T, int H,
                      int G, int dqk, int dvd, float scale, int causal)
{
    sdpa_dims d = sdpa_dims_make(T, H, G, dqk, dvd, scale, causal);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            int g = h / (H / G);
            size_t qo = (size_t)b * T * d.ldq + (size_t)h * dqk;
            size_t ko = (size_t)b * T * d.ldk + (size_t)g * dqk;
            size_t vo = (size_t)b * T * d.ldv + (size_t)g * dvd;
            sdpa_head_backward(dq + qo, dk + ko, dv + vo, scratch,
                               dout + (size_t)b * T * d.ldo + (size_t)h * dvd,
                               att + ((size_t)b * H + h) * T * T, q + qo, k + ko,
                               v + vo, &d);
        }
}

/* ------------------------------------------------------- cross-entropy */

static double weight_sum(const float *w, int N)
{
    if (!w) return N;
    double s = 0.0;
    for (int i = 0; i < N; i++) s += w[i];
    return s;
}

static double row_logsumexp(const float *x, int V)
{
    float mx = -INFINITY;
    for (int j = 0; j < V; j++) mx = x[j] > mx ? x[j] : mx;
    double s = 0.0;
    for (int j = 0; j < V; j++) s += exp((double)x[j] - mx);
    return mx + log(s);
}

double al_xent_forward(const float *logits, const int *targets,
                       const float *weights, int N, int V)
{
    double wsum = weight_sum(weights, N), loss = 0.0;
    if (wsum == 0.0) return 0.0;
    for (int i = 0; i < N; i++) {
        double wi = weights ? weights[i] : 1.0;
        if (wi == 0.0) continue;   /* padding rows are never read */
        AL_ASSERT(targets[i] >= 0 && targets[i] < V);
        const float *row = logits + (size_t)i * V;   /* (V) */
        loss += wi * (row_logsumexp(row, V) - row[targets[i]]);
    }
    return loss / wsum;
}

void al_xent_backward_inplace(float *logits, const int *targets,
                              const float *weights, int N, int V, float dloss)
{
    /* forward: loss = sum_i w_i (logsumexp(row_i) - row_i[t_i]) / sum(w) */
    double wsum = weight_sum(weights, N);
    for (int i = 0; i < N; i++) {
        float *row = logits + (size_t)i * V;   /* (V) */
        double wi = weights ? weights[i] : 1.0;
        if (wsum == 0.0 || wi == 0.0) {
            for (int j = 0; j < V; j++) row[j] = 0.0f;
            continue;
        }
        int t = targets[i];
        AL_ASSERT(t >= 0 && t < V);
        double coef = wi / wsum * dloss, lse = row_logsumexp(row, V);
        for (int j = 0; j < V; j++)
            row[j] = (float)((exp((double)row[j] - lse) - (j == t)) * coef);
    }
}
