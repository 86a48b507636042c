/*
 * kernels_attn.c - softmax and the attention kernels (the contract is in
 * al_kernels.h): scaled dot-product attention keeping its probabilities
 * (al_sdpa_*) or recomputing them from each row's max and 1/sum
 * (al_attn_*). The numeric conventions are kernels.c's: row reductions in
 * double, a fixed summation order, every AL_CLONES clone the same bits.
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

/* ------------------------------------------------------------- softmax */

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

AL_CLONES void al_exp_affine(float *y, const float *x, float a, float c, int n)
{
    for (int j = 0; j < n; j++) y[j] = fexp(a * x[j] + c);
}

AL_CLONES void al_sigmoid(float *y, const float *x, int n)
{
    for (int j = 0; j < n; j++) y[j] = 1.0f / (1.0f + fexp(-x[j]));
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

/* (query, key) pairs one head's blocks multiply: rows times block_keys. */
static double block_pairs(int T, int causal)
{
    double pairs = 0;
    for (int i0 = 0; i0 < T; i0 += SDPA_BLOCK) {
        int i1 = imin(i0 + SDPA_BLOCK, T);
        pairs += (double)(i1 - i0) * (causal ? i1 : T);
    }
    return pairs;
}

double al_attn_flops(int T, int H, int dqk, int dv, int causal, int backward)
{
    double per_pair = backward ? 3.0 * dqk + 2.0 * dv : (double)dqk + dv;
    return 2.0 * H * block_pairs(T, causal) * per_pair;
}

/* S (rows, nk) = scale * q[i0:i1] . k[0:nk]^T, for one head. */
static void scores(float *S, const sdpa_dims *d, const float *q, const float *k,
                   int i0, int i1, int nk)
{
    al_sgemm_here(CblasNoTrans, CblasTrans, i1 - i0, nk, d->dqk, d->scale,
          q + (size_t)i0 * d->ldq, d->ldq, k, d->ldk, 0.0f, S, nk);
}

/* ---- Probabilities kept: al_sdpa_* (att holds P, (B, H, T, T)) */

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
    /* k's and v's rows are packed once a chunk: once a head, or once a
     * group where a chunk runs heads of one K/V group one after the other */
    al_bf16_memo_begin();
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
                band_mask(row, d, i, n);
                al_softmax_row(row, n);
                for (int c = n; c < T; c++) row[c] = 0.0f;   /* masked */
            }
            al_sgemm_here(CblasNoTrans, CblasNoTrans, i1 - i0, d->dv, nk, 1.0f,
                  P + (size_t)i0 * T, T, j->v + o.v, d->ldv, 0.0f,
                  j->out + o.o + (size_t)i0 * d->ldo, d->ldo);
        }
    }
    al_bf16_memo_end();
    (void)tid;
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

void al_sdpa_forward_band(float *out, float *att, const float *q, const float *k,
                          const float *v, int B, int T, int H, int G, int dqk, int dv,
                          float scale, int causal, int window, int sinks)
{
    sdpa_job j = {.d = band_dims(B, T, H, G, dqk, dv, scale, causal, window, sinks),
                  .out = out, .att = att, .q = q, .k = k, .v = v};
    al_parallel_for((long)B * H, 1, sdpa_fwd_heads, &j);
}

void al_sdpa_forward(float *out, float *att, const float *q, const float *k,
                     const float *v, int B, int T, int H, int G, int dqk,
                     int dv, float scale, int causal)
{
    al_sdpa_forward_band(out, att, q, k, v, B, T, H, G, dqk, dv, scale, causal, 0, 0);
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
    for (long bg = lo; bg < hi; bg++) {
        /* a block's dout and dS are read twice, the group's k and v by
         * every block of its heads; dS is rewritten by the dP product,
         * which drops its packing */
        al_bf16_memo_begin();
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
        al_bf16_memo_end();
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

/* The band only changes which entries of P are 0: backward is sdpa's. */
void al_sdpa_backward_band(float *dq, float *dk, float *dv, const float *dout,
                           const float *att, const float *q, const float *k, const float *v,
                           int B, int T, int H, int G, int dqk, int dvd, float scale,
                           int causal, int window, int sinks)
{
    sdpa_job j = {.d = band_dims(B, T, H, G, dqk, dvd, scale, causal, window, sinks),
                  .dq = dq, .dk = dk, .dv = dv, .q = q, .k = k, .v = v,
                  .dout = dout, .catt = att};
    al_parallel_for((long)B * G, 1, sdpa_bwd_groups, &j);
}

/* ---- Probabilities recomputed: al_attn_* (stat holds max and 1/sum) */

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
    /* k's and v's rows are packed once a chunk: once a head, or once a
     * group where a chunk runs heads of one K/V group one after the other
     * (S is rewritten by the scores product, which drops its packing) */
    al_bf16_memo_begin();
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
    al_bf16_memo_end();
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
        /* as sdpa_bwd_groups; P and dS are each a product's output first
         * in every block, which drops their old packings */
        al_bf16_memo_begin();
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
        al_bf16_memo_end();
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

