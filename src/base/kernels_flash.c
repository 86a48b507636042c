/*
 * kernels_flash.c - fused causal attention for training (the contract is
 * in al_flash.h): tiles of BQ queries by BK keys, an
 * online softmax forward saving each row's log-sum-exp, a backward that
 * rebuilds each tile from it; and al_attn_kernel_*, which runs the kernel a
 * shape names (fused here, dense through al_sdpa_*_band).
 *
 * Numeric conventions are kernels.c's: row sums in double, fexp, a fixed
 * order of every sum whatever the thread count.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>
#include <cblas.h>

#include "al_flash.h"
#include "al_gemm.h"
#include "al_kernels.h"
#include "al_parallel.h"
#include "al_util.h"
#include "kernels_inline.h"

/* Queries and keys per tile (-D to measure others; no caller sees them). */
#ifndef AL_FLASH_BQ
#define AL_FLASH_BQ 64
#endif
#ifndef AL_FLASH_BK
#define AL_FLASH_BK 128
#endif
enum { BQ = AL_FLASH_BQ, BK = AL_FLASH_BK };
_Static_assert(BQ % 2 == 0 && BK % 2 == 0, "fwd_items aligns its doubles on even tiles");

/* The problem with its row strides (heads are interleaved in the rows of
 * q, k, v, out: one head's slice is read in place through them). */
typedef struct fdims {
    al_attn_problem p;
    int ldq, ldk, ldv, ldo, nq, nk;   /* strides; query and key tiles */
} fdims;

static fdims fdims_make(const al_attn_problem *p)
{
    AL_ASSERT(p->G > 0 && p->H % p->G == 0 && p->window >= 0 && p->sinks >= 0);
    return (fdims){*p, p->H * p->dqk, p->G * p->dqk, p->G * p->dv, p->H * p->dv,
                   (p->T + BQ - 1) / BQ, (p->T + BK - 1) / BK};
}

/* Offsets of head h of batch b in q, out, lse and of its group in k, v. */
typedef struct fhead {
    size_t q, k, v, o, lse;
} fhead;

static fhead fhead_at(const fdims *d, int b, int h)
{
    int T = d->p.T, g = h / (d->p.H / d->p.G);
    return (fhead){(size_t)b * T * d->ldq + (size_t)h * d->p.dqk,
                   (size_t)b * T * d->ldk + (size_t)g * d->p.dqk,
                   (size_t)b * T * d->ldv + (size_t)g * d->p.dv,
                   (size_t)b * T * d->ldo + (size_t)h * d->p.dv,
                   ((size_t)b * d->p.H + h) * T};
}

/* Work items in an order that balances contiguous chunks under a causal
 * mask: tile t of n becomes 0, n-1, 1, n-2, ... so that each half of the
 * range holds as many long rows as short ones. */
static int zigzag(int t, int n) { return t % 2 == 0 ? t / 2 : n - 1 - t / 2; }

/* ------------------------------------------------------------ the mask */

/* Keys [lo, hi) of row i that the band (or the causal mask alone) shows,
 * beside the sinks [0, sinks) when there is a band. */
static void row_span(const fdims *d, int i, int *lo, int *hi)
{
    const al_attn_problem *p = &d->p;
    *hi = p->causal ? i + 1 : (p->window > 0 ? i + p->window : p->T);
    *lo = p->window > 0 ? i - p->window + 1 : 0;
    if (*hi > p->T) *hi = p->T;
    if (*lo < 0) *lo = 0;
}

static int sinks_of(const fdims *d) { return d->p.window > 0 ? d->p.sinks : 0; }

/* 1 when some query of [i0, i1) sees some key of [j0, j1). Spans move
 * monotonically with i, so the first and last rows bound the tile's. */
static int tile_seen(const fdims *d, int i0, int i1, int j0, int j1)
{
    int lo0, hi0, lo1, hi1;
    if (j0 < sinks_of(d)) return 1;
    row_span(d, i0, &lo0, &hi0);
    row_span(d, i1 - 1, &lo1, &hi1);
    return j0 < hi1 && j1 > lo0;
}

/* Scores of the tile's rows outside what row i sees set to -inf (they
 * weigh 0: fexp(-inf) is 0). S has rows i0..i1-1 over keys j0..j0+nk-1. */
static void tile_mask(float *S, const fdims *d, int i0, int i1, int j0, int nk)
{
    int sk = sinks_of(d), lo0, hi0, lo1, hi1;
    row_span(d, i0, &lo0, &hi0);
    row_span(d, i1 - 1, &lo1, &hi1);
    if (lo1 <= j0 && hi0 >= j0 + nk) return;   /* every row sees every key: most tiles */
    for (int i = i0; i < i1; i++) {
        float *row = S + (size_t)(i - i0) * BK;
        int lo, hi;
        row_span(d, i, &lo, &hi);
        for (int c = 0; c < nk; c++) {
            int j = j0 + c;
            int sink = j < sk && (!d->p.causal || j <= i);   /* sinks: never the future */
            if (!sink && (j < lo || j >= hi)) row[c] = -INFINITY;
        }
    }
}

/* S (rows, nk; ld BK) = scale * q[i0:i1] . k[j0:j0+nk]^T, masked. */
static void tile_scores(float *S, const fdims *d, const float *q, const float *k, int i0,
                        int i1, int j0, int nk)
{
    al_sgemm_here(CblasNoTrans, CblasTrans, i1 - i0, nk, d->p.dqk, d->p.scale,
                  q + (size_t)i0 * d->ldq, d->ldq, k + (size_t)j0 * d->ldk, d->ldk, 0.0f,
                  S, BK);
    tile_mask(S, d, i0, i1, j0, nk);
}

/* ------------------------------------------------------------ forward */

typedef struct fjob {
    fdims d;
    float *out, *lse, *dq, *dk, *dv, *P;
    const float *q, *k, *v, *dout, *cout, *clse;
} fjob;

/* One row of a tile joins the row's online softmax: m, l are its running
 * max and sum (-inf, 0 before its first key). Overwrites the row with
 * exp(s - new max) and returns the factor for what was accumulated
 * (0 on the first keys; 1 while every key so far was masked). */
AL_CLONES static float online_row(float *row, int n, float *m, double *l)
{
    float bm = row_max(row, n), mn = bm > *m ? bm : *m;
    if (mn == -INFINITY) {   /* nothing seen yet: stays empty */
        memset(row, 0, n * sizeof(float));
        return 1.0f;
    }
    float corr = fexp(*m - mn);   /* fexp(-inf) = 0 */
    exp_shifted(row, mn, n);
    *l = *l * corr + sum_d(row, n);
    *m = mn;
    return corr;
}

/* Query tile [i0, i1) of one head: out rows accumulate P v tile by tile,
 * rescaled as the row max grows, then divided by the sum. */
static void fwd_tile(const fjob *j, fhead o, int i0, int i1, float *S, float *m, double *l)
{
    const fdims *d = &j->d;
    int rows = i1 - i0, first = 1;
    float *out = j->out + o.o + (size_t)i0 * d->ldo;
    for (int r = 0; r < rows; r++) m[r] = -INFINITY, l[r] = 0.0;
    for (int t = 0; t < d->nk; t++) {
        int j0 = t * BK, j1 = imin(j0 + BK, d->p.T);
        if (!tile_seen(d, i0, i1, j0, j1)) continue;
        tile_scores(S, d, j->q + o.q, j->k + o.k, i0, i1, j0, j1 - j0);
        for (int r = 0; r < rows; r++) {
            float corr = online_row(S + (size_t)r * BK, j1 - j0, &m[r], &l[r]);
            if (!first && corr != 1.0f)
                for (int c = 0; c < d->p.dv; c++) out[(size_t)r * d->ldo + c] *= corr;
        }
        /* out = corr * out + P v: beta 0 on the first tile (out unset) */
        al_sgemm_here(CblasNoTrans, CblasNoTrans, rows, d->p.dv, j1 - j0, 1.0f, S, BK,
                      j->v + o.v + (size_t)j0 * d->ldv, d->ldv, first ? 0.0f : 1.0f, out,
                      d->ldo);
        first = 0;
    }
    for (int r = 0; r < rows; r++) {   /* every row sees its diagonal: l > 0 */
        float inv = (float)(1.0 / l[r]);
        for (int c = 0; c < d->p.dv; c++) out[(size_t)r * d->ldo + c] *= inv;
        j->lse[o.lse + i0 + r] = m[r] + (float)log(l[r]);
    }
}

/* Items [lo, hi) of (batch, head, query tile). */
static void fwd_items(void *ctx, long lo, long hi, int tid)
{
    const fjob *j = ctx;
    const fdims *d = &j->d;
    /* S (BQ, BK) | m (BQ) | l (BQ doubles: BQ * BK and BQ are even, so
     * they start 8-byte aligned in the pool's malloc'd scratch) */
    float *S = al_parallel_scratch(tid, (size_t)BQ * BK + 3 * BQ), *m = S + BQ * BK;
    double *l = (double *)(void *)(m + BQ);
    for (long it = lo; it < hi; it++) {
        long bh = it / d->nq;
        int qt = zigzag((int)(it % d->nq), d->nq), i0 = qt * BQ;
        fwd_tile(j, fhead_at(d, (int)(bh / d->p.H), (int)(bh % d->p.H)), i0,
                 imin(i0 + BQ, d->p.T), S, m, l);
    }
}

void al_flash_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                      const al_attn_problem *p)
{
    fjob j = {.d = fdims_make(p), .out = out, .lse = lse, .q = q, .k = k, .v = v};
    al_parallel_for((long)p->B * p->H * j.d.nq, 1, fwd_items, &j);
}

/* ------------------------------------------------------------ backward */

/* D_i = rowsum(dout_i * out_i) for the tile's rows (forward: out = P v, so
 * sum_j P_ij dP_ij = dout_i . out_i). */
static void tile_D(float *D, const fjob *j, fhead o, int i0, int i1)
{
    const fdims *d = &j->d;
    for (int i = i0; i < i1; i++)
        D[i - i0] = (float)dot_d(j->dout + o.o + (size_t)i * d->ldo,
                                 j->cout + o.o + (size_t)i * d->ldo, d->p.dv);
}

/* P = exp(S - lse) in place, and dS = scale * P * (dP - D) in place of dP,
 * for a tile of rows over nk keys (masked scores are -inf: P and dS 0). */
AL_CLONES static void tile_dS(float *P, float *dP, const float *lse, const float *D, int rows,
                              int nk, float scale)
{
    for (int r = 0; r < rows; r++) {
        float *pr = P + (size_t)r * BK, *dr = dP + (size_t)r * BK;
        exp_shifted(pr, lse[r], nk);
        for (int c = 0; c < nk; c++) dr[c] = scale * pr[c] * (dr[c] - D[r]);
    }
}

/* The tile (i0..i1, j0..j1) of one head rebuilt: P and dS. */
static void tile_back(const fjob *j, fhead o, float *P, float *dS, const float *D, int i0,
                      int i1, int j0, int j1)
{
    const fdims *d = &j->d;
    int rows = i1 - i0, nk = j1 - j0;
    tile_scores(P, d, j->q + o.q, j->k + o.k, i0, i1, j0, nk);
    al_sgemm_here(CblasNoTrans, CblasTrans, rows, nk, d->p.dv, 1.0f,   /* dP = dout v^T */
                  j->dout + o.o + (size_t)i0 * d->ldo, d->ldo,
                  j->v + o.v + (size_t)j0 * d->ldv, d->ldv, 0.0f, dS, BK);
    tile_dS(P, dS, j->clse + o.lse + i0, D, rows, nk, d->p.scale);
}

/* Zeroes rows [0, n) of width w at stride ld. */
static void zero_rows(float *x, int n, int w, int ld)
{
    for (int t = 0; t < n; t++) memset(x + (size_t)t * ld, 0, w * sizeof(float));
}

/* dq of query tile [i0, i1) of one head: the sum over its key tiles, in
 * order, of dS k. */
static void dq_tile(const fjob *j, fhead o, int i0, int i1, float *P, float *dS, float *D)
{
    const fdims *d = &j->d;
    float *dq = j->dq + o.q + (size_t)i0 * d->ldq;
    int first = 1;
    tile_D(D, j, o, i0, i1);
    for (int t = 0; t < d->nk; t++) {
        int j0 = t * BK, j1 = imin(j0 + BK, d->p.T);
        if (!tile_seen(d, i0, i1, j0, j1)) continue;
        tile_back(j, o, P, dS, D, i0, i1, j0, j1);
        al_sgemm_here(CblasNoTrans, CblasNoTrans, i1 - i0, d->p.dqk, j1 - j0, 1.0f, dS, BK,
                      j->k + o.k + (size_t)j0 * d->ldk, d->ldk, first ? 0.0f : 1.0f, dq,
                      d->ldq);
        first = 0;
    }
    if (first) zero_rows(dq, i1 - i0, d->p.dqk, d->ldq);
}

static void dq_items(void *ctx, long lo, long hi, int tid)
{
    const fjob *j = ctx;
    const fdims *d = &j->d;
    float *P = al_parallel_scratch(tid, 2 * (size_t)BQ * BK + BQ), *dS = P + BQ * BK;
    for (long it = lo; it < hi; it++) {
        long bh = it / d->nq;
        int qt = zigzag((int)(it % d->nq), d->nq), i0 = qt * BQ;
        dq_tile(j, fhead_at(d, (int)(bh / d->p.H), (int)(bh % d->p.H)), i0,
                imin(i0 + BQ, d->p.T), P, dS, dS + BQ * BK);
    }
}

/* dk, dv of key tile [j0, j1) of group g: the sum over the group's heads
 * and their query tiles, in order, of dS^T q and P^T dout. */
static void dkv_tile(const fjob *j, int b, int g, int j0, int j1, float *P, float *dS,
                     float *D)
{
    const fdims *d = &j->d;
    int R = d->p.H / d->p.G, nk = j1 - j0, first = 1;
    fhead o = fhead_at(d, b, g * R);
    float *dk = j->dk + o.k + (size_t)j0 * d->ldk, *dv = j->dv + o.v + (size_t)j0 * d->ldv;
    for (int h = g * R; h < (g + 1) * R; h++) {
        o = fhead_at(d, b, h);
        for (int t = 0; t < d->nq; t++) {
            int i0 = t * BQ, i1 = imin(i0 + BQ, d->p.T);
            if (!tile_seen(d, i0, i1, j0, j1)) continue;
            tile_D(D, j, o, i0, i1);
            tile_back(j, o, P, dS, D, i0, i1, j0, j1);
            float beta = first ? 0.0f : 1.0f;
            al_sgemm_here(CblasTrans, CblasNoTrans, nk, d->p.dv, i1 - i0, 1.0f, P, BK,
                          j->dout + o.o + (size_t)i0 * d->ldo, d->ldo, beta, dv, d->ldv);
            al_sgemm_here(CblasTrans, CblasNoTrans, nk, d->p.dqk, i1 - i0, 1.0f, dS, BK,
                          j->q + o.q + (size_t)i0 * d->ldq, d->ldq, beta, dk, d->ldk);
            first = 0;
        }
    }
    if (first) {
        zero_rows(dk, nk, d->p.dqk, d->ldk);
        zero_rows(dv, nk, d->p.dv, d->ldv);
    }
}

static void dkv_items(void *ctx, long lo, long hi, int tid)
{
    const fjob *j = ctx;
    const fdims *d = &j->d;
    float *P = al_parallel_scratch(tid, 2 * (size_t)BQ * BK + BQ), *dS = P + BQ * BK;
    for (long it = lo; it < hi; it++) {
        long bg = it / d->nk;
        int kt = zigzag((int)(it % d->nk), d->nk), j0 = kt * BK;
        dkv_tile(j, (int)(bg / d->p.G), (int)(bg % d->p.G), j0, imin(j0 + BK, d->p.T), P,
                 dS, dS + BQ * BK);
    }
}

/* ---- one pass: an item owns a whole (batch, group), so it owns the dq
 * rows of the group's heads as well as dk, dv, and each tile is rebuilt
 * once instead of twice (7 tile products a tile, forward included, not 9).
 * Every gradient element still sees the sums of the two passes in the same
 * order (dq over key tiles ascending, dk and dv over heads then query
 * tiles), so the bits are theirs. */

/* The first key tile query tile [i0, i1) sees (-1: none): where its dq
 * starts (beta 0) rather than accumulates. */
static int first_key_tile(const fdims *d, int i0, int i1)
{
    for (int t = 0; t < d->nk; t++)
        if (tile_seen(d, i0, i1, t * BK, imin(t * BK + BK, d->p.T))) return t;
    return -1;
}

/* Key tile [j0, j1) of group g against every query tile of one head h. */
static void one_pass_head(const fjob *j, int b, int h, int kt, float *P, float *dS, float *D,
                          int *first_dkv)
{
    const fdims *d = &j->d;
    int j0 = kt * BK, j1 = imin(j0 + BK, d->p.T), nk = j1 - j0;
    fhead o = fhead_at(d, b, h);
    float *dk = j->dk + o.k + (size_t)j0 * d->ldk, *dv = j->dv + o.v + (size_t)j0 * d->ldv;
    for (int t = 0; t < d->nq; t++) {
        int i0 = t * BQ, i1 = imin(i0 + BQ, d->p.T);
        if (!tile_seen(d, i0, i1, j0, j1)) continue;
        tile_D(D, j, o, i0, i1);
        tile_back(j, o, P, dS, D, i0, i1, j0, j1);
        float beta = *first_dkv ? 0.0f : 1.0f;
        al_sgemm_here(CblasTrans, CblasNoTrans, nk, d->p.dv, i1 - i0, 1.0f, P, BK,
                      j->dout + o.o + (size_t)i0 * d->ldo, d->ldo, beta, dv, d->ldv);
        al_sgemm_here(CblasTrans, CblasNoTrans, nk, d->p.dqk, i1 - i0, 1.0f, dS, BK,
                      j->q + o.q + (size_t)i0 * d->ldq, d->ldq, beta, dk, d->ldk);
        *first_dkv = 0;
        al_sgemm_here(CblasNoTrans, CblasNoTrans, i1 - i0, d->p.dqk, nk, 1.0f, dS, BK,
                      j->k + o.k + (size_t)j0 * d->ldk, d->ldk,
                      kt == first_key_tile(d, i0, i1) ? 0.0f : 1.0f,
                      j->dq + o.q + (size_t)i0 * d->ldq, d->ldq);
    }
}

/* Items [lo, hi) of (batch, group). */
static void one_pass_items(void *ctx, long lo, long hi, int tid)
{
    const fjob *j = ctx;
    const fdims *d = &j->d;
    int R = d->p.H / d->p.G;
    float *P = al_parallel_scratch(tid, 2 * (size_t)BQ * BK + BQ), *dS = P + BQ * BK;
    for (long it = lo; it < hi; it++) {
        int b = (int)(it / d->p.G), g = (int)(it % d->p.G);
        for (int kt = 0; kt < d->nk; kt++) {
            int j0 = kt * BK, first = 1;
            for (int h = g * R; h < (g + 1) * R; h++)
                one_pass_head(j, b, h, kt, P, dS, dS + BQ * BK, &first);
            if (first) {   /* no query sees these keys */
                fhead o = fhead_at(d, b, g * R);
                int nk = imin(j0 + BK, d->p.T) - j0;
                zero_rows(j->dk + o.k + (size_t)j0 * d->ldk, nk, d->p.dqk, d->ldk);
                zero_rows(j->dv + o.v + (size_t)j0 * d->ldv, nk, d->p.dv, d->ldv);
            }
        }
        for (int h = g * R; h < (g + 1) * R; h++)   /* rows that see no key (none today) */
            for (int t = 0; t < d->nq; t++)
                if (first_key_tile(d, t * BQ, imin(t * BQ + BQ, d->p.T)) < 0)
                    zero_rows(j->dq + fhead_at(d, b, h).q + (size_t)t * BQ * d->ldq,
                              imin(t * BQ + BQ, d->p.T) - t * BQ, d->p.dqk, d->ldq);
    }
}

/* One pass when the (batch, group) items keep every thread busy: as many
 * per chunk (the work of every item is the same), or enough of them that
 * one more in a chunk costs little; else the two passes, whose items are
 * query and key tiles. Both give the same bits, so the choice, which
 * depends on the thread count, does not move them. */
static int one_pass_fits(const al_attn_problem *p)
{
    long n = (long)p->B * p->G;
    int c = al_parallel_chunks(n, 1);
    return n % c == 0 || n >= 4L * c;
}

void al_flash_backward(float *dq, float *dk, float *dv, const float *dout, const float *out,
                       const float *lse, const float *q, const float *k, const float *v,
                       const al_attn_problem *p)
{
    fjob j = {.d = fdims_make(p), .dq = dq, .dk = dk, .dv = dv, .dout = dout, .cout = out,
              .clse = lse, .q = q, .k = k, .v = v};
    if (one_pass_fits(p)) {
        al_parallel_for((long)p->B * p->G, 1, one_pass_items, &j);
        return;
    }
    al_parallel_for((long)p->B * p->H * j.d.nq, 1, dq_items, &j);
    al_parallel_for((long)p->B * p->G * j.d.nk, 1, dkv_items, &j);
}

/* ------------------------------------------------------------ pictures */

/* Head h's rows of P (T, T): each seen tile rebuilt as backward rebuilds
 * it, the rest 0. */
static void probs_heads(void *ctx, long lo, long hi, int tid)
{
    const fjob *j = ctx;
    const fdims *d = &j->d;
    int T = d->p.T;
    float *S = al_parallel_scratch(tid, (size_t)BQ * BK);
    for (long h = lo; h < hi; h++) {
        fhead o = fhead_at(d, 0, (int)h);
        float *P = j->P + (size_t)h * T * T;
        memset(P, 0, (size_t)T * T * sizeof(float));
        for (int i0 = 0; i0 < T; i0 += BQ)
            for (int j0 = 0; j0 < T; j0 += BK) {
                int i1 = imin(i0 + BQ, T), j1 = imin(j0 + BK, T);
                if (!tile_seen(d, i0, i1, j0, j1)) continue;
                tile_scores(S, d, j->q + o.q, j->k + o.k, i0, i1, j0, j1 - j0);
                for (int i = i0; i < i1; i++) {
                    float *row = S + (size_t)(i - i0) * BK;
                    exp_shifted(row, j->clse[o.lse + i], j1 - j0);
                    memcpy(P + (size_t)i * T + j0, row, (j1 - j0) * sizeof(float));
                }
            }
        /* Each row over its sum: exp(S - lse) is off by lse's f32 rounding,
         * |lse| * 2^-24 relative (1.5e-5 for tpa's scores of a few hundred
         * in test attention), where the forward pass divided by the row's
         * own sum; a picture's rows sum to 1 as the weights applied did. */
        for (int i = 0; i < T; i++) {
            float *row = P + (size_t)i * T;
            double sum = 0;
            for (int c = 0; c < T; c++) sum += row[c];
            if (sum > 0)
                for (int c = 0; c < T; c++) row[c] = (float)(row[c] / sum);
        }
    }
}

void al_flash_probs(float *P, const float *lse, const float *q, const float *k,
                    const al_attn_problem *p)
{
    AL_ASSERT(p->B == 1);
    fjob j = {.d = fdims_make(p), .P = P, .clse = lse, .q = q, .k = k};
    al_parallel_for(p->H, 1, probs_heads, &j);
}

/* ------------------------------------------------------------ dispatch */

/* Measured at 4096 and 8192 tokens (docs/fused-attention.md): fused's
 * tiles beat rows' 64 x T blocks once those outgrow L2, except where q.k
 * is wider than v, whose wider score products rows runs in fewer, larger
 * calls (mla: rows 5-6 % faster at both lengths). */
int al_attn_kernel_of(int kernel, const al_attn_problem *p)
{
    if (kernel != AL_ATTN_LONG) return kernel;
    return p->dqk > p->dv ? AL_ATTN_ROWS : AL_ATTN_FUSED;
}

size_t al_attn_kernel_saved_floats(int kernel, const al_attn_problem *p)
{
    kernel = al_attn_kernel_of(kernel, p);
    size_t rows = (size_t)p->B * p->H * p->T;
    return kernel == AL_ATTN_DENSE ? rows * p->T : kernel == AL_ATTN_ROWS ? 2 * rows : rows;
}

void al_attn_kernel_forward(int kernel, float *out, float *saved, const float *q,
                          const float *k, const float *v, const al_attn_problem *p)
{
    kernel = al_attn_kernel_of(kernel, p);
    if (kernel == AL_ATTN_ROWS)
        al_attn_forward_band(out, saved, q, k, v, p->B, p->T, p->H, p->G, p->dqk, p->dv,
                             p->scale, p->causal, p->window, p->sinks);
    else if (kernel == AL_ATTN_DENSE)
        al_sdpa_forward_band(out, saved, q, k, v, p->B, p->T, p->H, p->G, p->dqk, p->dv,
                             p->scale, p->causal, p->window, p->sinks);
    else
        al_flash_forward(out, saved, q, k, v, p);
}

void al_attn_kernel_backward(int kernel, float *dq, float *dk, float *dv, const float *dout,
                           const float *out, const float *saved, const float *q,
                           const float *k, const float *v, const al_attn_problem *p)
{
    kernel = al_attn_kernel_of(kernel, p);
    if (kernel == AL_ATTN_ROWS) {   /* overwrites */
        al_attn_backward_band(dq, dk, dv, dout, saved, q, k, v, p->B, p->T, p->H, p->G, p->dqk,
                              p->dv, p->scale, p->causal, p->window, p->sinks);
        return;
    }
    if (kernel != AL_ATTN_DENSE) {
        al_flash_backward(dq, dk, dv, dout, out, saved, q, k, v, p);
        return;
    }
    size_t BT = (size_t)p->B * p->T;   /* sdpa accumulates */
    memset(dq, 0, BT * p->H * p->dqk * sizeof(float));
    memset(dk, 0, BT * p->G * p->dqk * sizeof(float));
    memset(dv, 0, BT * p->G * p->dv * sizeof(float));
    al_sdpa_backward_band(dq, dk, dv, dout, saved, q, k, v, p->B, p->T, p->H, p->G, p->dqk,
                          p->dv, p->scale, p->causal, p->window, p->sinks);
}

void al_attn_kernel_probs(int kernel, float *P, const float *saved, const float *q,
                        const float *k, const al_attn_problem *p)
{
    kernel = al_attn_kernel_of(kernel, p);
    AL_ASSERT(p->B == 1);
    if (kernel == AL_ATTN_ROWS)
        al_attn_probs_band(P, saved, q, k, p->T, p->H, p->G, p->dqk, p->scale, p->causal,
                           p->window, p->sinks);
    else if (kernel == AL_ATTN_DENSE)
        memcpy(P, saved, (size_t)p->H * p->T * p->T * sizeof(float));
    else
        al_flash_probs(P, saved, q, k, p);
}
