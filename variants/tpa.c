/*
 * tpa.c - tensor product attention, "T6" (Zhang et al. 2025, arXiv
 * 2501.06425, §3; reference code tensorgi/T6, model/T6.py).
 *
 * Each of Q, K, V is, per token, a sum of R rank-one products of a head
 * factor a_r (n_head) and a feature factor b_r (d_head), both linear in
 * the token x:
 *
 *   q_h = (1/R_Q) sum_r a^Q_r[h] b^Q_r,   a^Q_r = W^aQ_r x,  b^Q_r = W^bQ_r x
 *
 * and likewise k_h (R_K) and v_h (R_V); the 1/R of each factorisation is
 * the paper's (eq. 3.1) and the reference's `.div_(rank)`. RoPE rotates the
 * feature factors b^Q_r and b^K_r (the paper's Theorem 1: rotating every
 * b^K_r rotates k_h, so the head factors carry no position), with
 * attnlab's rotate-half RoPE (al_rope_forward) as every variant here uses
 * it; the reference rotates by the opposite angle, the same family of
 * relative encodings. Scores are q_h . k_h / sqrt(d_head) (the paper's
 * and the reference's scaled dot product), softmax over keys,
 * out = wo . [o_1 .. o_H].
 *
 * Layout (the reference's views): a token's head factors A (H, R), element
 * h*R + r; its feature factors B (R, d_head), element r*d_head + j.
 *
 * Training materialises q, k, v (BT, H*d_head) from the factors and runs
 * the shared attention core (al_attn_*). The cache holds only the K and V
 * factors, (R_K + R_V) * (n_head + d_head) floats per token per layer:
 * [A_K (H*R_K) | B_K (R_K*dh), RoPE'd | A_V (H*R_V) | B_V (R_V*dh)].
 *
 * Decode never forms a cached token's k_h or v_h. Per block of rows:
 *   G_r = q . B^K_r^T                           (H, n) for each r, one product
 *   score_h(t) = (1/R_K) sum_r A^K_r(t)[h] G_r[h, t] / sqrt(d_head)
 *   o_h += (1/R_V) sum_r sum_t p_h(t) A^V_r(t)[h] B^V_r(t)   (one product per r)
 * with an online softmax over the blocks, so the work per cached token is
 * R_K*H*dh + R_V*H*dh multiply-adds instead of 2*H*dh after (R_K + R_V)*H*dh
 * to expand k and v. One query's pass over its cache runs on one thread
 * (al_kv_attend's split of long contexts between threads assumes plain
 * K/V rows); batched decode spreads the sequences over the pool.
 *
 * Initialisation: the reference draws each factor projection with
 * xavier_uniform over a (D, H, R) / (D, R, dh) view and zeroes the output
 * projection (as it does for every model it trains). attnlab's interface
 * offers normal(0, 0.02) and the residual-scaled normal only, so the
 * factor projections take normal(0, 0.02) (the reference's xavier std for
 * the head factors at its GPT-2 small shape, sqrt(2 / (R (H + D))) ~ 0.021)
 * and wo the residual init every attnlab variant uses, so that runs stay
 * comparable across variants.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attnlab/attnlab_variant.h>
#include <attnlab/al_flash.h>
#include <attnlab/al_kvcache.h>
#include <attnlab/al_parallel.h>

enum { SET_RANK_Q, SET_RANK_K, SET_RANK_V, N_SETTINGS };

static const al_setting tpa_settings[] = {
    {"rank_q", AL_SET_INT, 6, 0, "query rank R_Q: rank-one head x feature products per query"},
    {"rank_k", AL_SET_INT, 2, 0, "key rank R_K; the cache holds R_K (n_head + d_head) key floats"},
    {"rank_v", AL_SET_INT, 2, 0, "value rank R_V; the cache holds R_V (n_head + d_head) value floats"},
    {NULL, 0, 0, 0, NULL},
};
AL_SETTINGS_MATCH(tpa_settings, N_SETTINGS);

/* Dimensions, from the layer's context. */
typedef struct dims {
    int D, H, dh, rq, rk, rv, BT;
} dims;

/* A layer's context: its shape and dimensions (BT 1), made once by init. */
typedef struct tpa_ctx {
    al_attn_shape s;
    dims d;
} tpa_ctx;

static dims get_dims(const void *ctx, int B, int T)
{
    dims d = ((const tpa_ctx *)ctx)->d;
    d.BT = B * T;
    return d;
}

static void *tpa_init(const al_variant *v, const al_attn_shape *s, char *err, size_t n)
{
    for (int i = SET_RANK_Q; i <= SET_RANK_V; i++)
        if (al_set_int(s, i) < 1)
            return snprintf(err, n, "'%s' (%d) must be positive", tpa_settings[i].name,
                            al_set_int(s, i)), NULL;
    tpa_ctx *c = malloc(sizeof *c);
    if (c)
        *c = (tpa_ctx){*s, {s->d_model, s->n_head, s->d_head, al_set_int(s, SET_RANK_Q),
                            al_set_int(s, SET_RANK_K), al_set_int(s, SET_RANK_V), 1}};
    return c;
}

/* Parameter order: the head and feature factor projections of Q, K, V,
 * then wo. */
enum { P_AQ, P_BQ, P_AK, P_BK, P_AV, P_BV, P_WO, N_PARAMS };

static int tpa_params(const void *ctx, al_param_spec *o)
{
    dims d = get_dims(ctx, 1, 1);
    o[P_AQ] = (al_param_spec){"wa_q", d.H * d.rq, d.D, AL_INIT_NORMAL};
    o[P_BQ] = (al_param_spec){"wb_q", d.rq * d.dh, d.D, AL_INIT_NORMAL};
    o[P_AK] = (al_param_spec){"wa_k", d.H * d.rk, d.D, AL_INIT_NORMAL};
    o[P_BK] = (al_param_spec){"wb_k", d.rk * d.dh, d.D, AL_INIT_NORMAL};
    o[P_AV] = (al_param_spec){"wa_v", d.H * d.rv, d.D, AL_INIT_NORMAL};
    o[P_BV] = (al_param_spec){"wb_v", d.rv * d.dh, d.D, AL_INIT_NORMAL};
    o[P_WO] = (al_param_spec){"wo", d.D, d.H * d.dh, AL_INIT_RESID};
    return N_PARAMS;
}

/* Floats of one token's factors of rank R: A (H*R) and B (R*dh). */
static size_t factor_floats(const dims *d, int R) { return (size_t)R * (d->H + d->dh); }

static size_t tpa_kv_elems(const void *ctx)
{
    dims d = get_dims(ctx, 1, 1);
    return factor_floats(&d, d.rk) + factor_floats(&d, d.rv);
}

/* ------------------------------------------------------------ the product */

/* out (H, dh) = (1/R) A (H, R) . B (R, dh), for each of n tokens; rows of
 * A, B, out are token-contiguous. Split over the pool by tokens. */
typedef struct contract_job {
    float *out, *dA, *dB;
    const float *A, *B, *dout;
    int H, dh, R;
} contract_job;

static void contract_rows(void *ctx, long lo, long hi, int tid)
{
    const contract_job *j = ctx;
    size_t nA = (size_t)j->H * j->R, nB = (size_t)j->R * j->dh, nO = (size_t)j->H * j->dh;
    float inv = 1.0f / (float)j->R;
    for (long t = lo; t < hi; t++) {
        const float *A = j->A + t * nA, *B = j->B + t * nB;
        float *out = j->out + t * nO;
        for (int h = 0; h < j->H; h++)
            for (int c = 0; c < j->dh; c++) {
                float acc = 0.0f;
                for (int r = 0; r < j->R; r++) acc += A[h * j->R + r] * B[(size_t)r * j->dh + c];
                out[(size_t)h * j->dh + c] = acc * inv;
            }
    }
    (void)tid;
}

/* Given dout (H, dh) per token: dA[h, r] = (1/R) dout_h . B_r and
 * dB[r, :] = (1/R) sum_h A[h, r] dout_h, both written. */
static void uncontract_rows(void *ctx, long lo, long hi, int tid)
{
    const contract_job *j = ctx;
    size_t nA = (size_t)j->H * j->R, nB = (size_t)j->R * j->dh, nO = (size_t)j->H * j->dh;
    float inv = 1.0f / (float)j->R;
    for (long t = lo; t < hi; t++) {
        const float *A = j->A + t * nA, *B = j->B + t * nB, *g = j->dout + t * nO;
        float *dA = j->dA + t * nA, *dB = j->dB + t * nB;
        for (int h = 0; h < j->H; h++)
            for (int r = 0; r < j->R; r++) {
                float acc = 0.0f;
                for (int c = 0; c < j->dh; c++) acc += g[(size_t)h * j->dh + c] * B[(size_t)r * j->dh + c];
                dA[h * j->R + r] = acc * inv;
            }
        for (int r = 0; r < j->R; r++)
            for (int c = 0; c < j->dh; c++) {
                float acc = 0.0f;
                for (int h = 0; h < j->H; h++) acc += A[h * j->R + r] * g[(size_t)h * j->dh + c];
                dB[(size_t)r * j->dh + c] = acc * inv;
            }
    }
    (void)tid;
}

static void contract(float *out, const float *A, const float *B, const dims *d, int R, long n)
{
    contract_job j = {out, NULL, NULL, A, B, NULL, d->H, d->dh, R};
    al_flops_add(2.0 * n * d->H * d->dh * R);   /* (H, R) . (R, dh) per token, by hand */
    al_parallel_for(n, 16, contract_rows, &j);
}

static void uncontract(float *dA, float *dB, const float *dout, const float *A, const float *B,
                       const dims *d, int R, long n)
{
    contract_job j = {NULL, dA, dB, A, B, dout, d->H, d->dh, R};
    al_flops_add(2 * 2.0 * n * d->H * d->dh * R);   /* dA and dB, by hand */
    al_parallel_for(n, 16, uncontract_rows, &j);
}

/* ------------------------------------------------------------ training */

/* Saved activations of one layer:
 *   aq (BT,H*Rq) bq (BT,Rq*dh)   query factors, bq RoPE'd
 *   ak (BT,H*Rk) bk (BT,Rk*dh)   key factors, bk RoPE'd
 *   av (BT,H*Rv) bv (BT,Rv*dh)   value factors
 *   q, k, v, y (BT,H*dh)         materialised heads, attention output
 *   stat (B,H,T,2)               score rows' max and 1/sum (al_attn_forward) */
typedef struct tpa_a {
    float *aq, *bq, *ak, *bk, *av, *bv, *q, *k, *v, *y, *stat;
} tpa_a;

static tpa_a carve(const dims *d, float *a)
{
    size_t BT = d->BT, Hd = (size_t)d->H * d->dh;
    tpa_a m;
    m.aq = a; a += BT * d->H * d->rq;
    m.bq = a; a += BT * d->rq * d->dh;
    m.ak = a; a += BT * d->H * d->rk;
    m.bk = a; a += BT * d->rk * d->dh;
    m.av = a; a += BT * d->H * d->rv;
    m.bv = a; a += BT * d->rv * d->dh;
    m.q = a; a += BT * Hd;
    m.k = a; a += BT * Hd;
    m.v = a; a += BT * Hd;
    m.y = a; a += BT * Hd;
    m.stat = a;
    return m;
}

static size_t all_factors(const dims *d)
{
    return factor_floats(d, d->rq) + factor_floats(d, d->rk) + factor_floats(d, d->rv);
}

static float score_scale(const dims *d) { return 1.0f / sqrtf((float)d->dh); }

/* The attention of the shape's training kernel (al_flash.h): every head
 * its own q, k, v, built from the factors. */
static al_attn_problem problem(const void *ctx, int B, int T)
{
    const al_attn_shape *s = &((const tpa_ctx *)ctx)->s;
    dims d = get_dims(ctx, B, T);
    return (al_attn_problem){B, T, d.H, d.H, d.dh, d.dh, score_scale(&d), s->causal, 0, 0};
}

static size_t tpa_act_floats(const void *ctx, int B, int T)
{
    dims d = get_dims(ctx, B, T);
    al_attn_problem pr = problem(ctx, B, T);
    return (size_t)d.BT * (all_factors(&d) + 4 * (size_t)d.H * d.dh) +
           al_attn_kernel_saved_floats(((const tpa_ctx *)ctx)->s.attn_kernel, &pr);
}

/* Backward scratch: dy, dq, dk, dv (BT,H*dh) | the factors' gradients,
 * laid out as the factors in act (BT * all_factors). */
static size_t tpa_scratch_floats(const void *ctx, int B, int T)
{
    dims d = get_dims(ctx, B, T);
    return (size_t)d.BT * (4 * (size_t)d.H * d.dh + all_factors(&d));
}


/* The six factors of every token (B_Q and B_K RoPE'd at positions pos0 +
 * t); a holds them in carve()'s order. */
static void factors_forward(const al_attn_shape *s, const dims *d, float *const *p, tpa_a *a,
                            const float *x, int B, int T)
{
    al_linear_forward(a->aq, x, p[P_AQ], d->BT, d->D, d->H * d->rq);
    al_linear_forward(a->bq, x, p[P_BQ], d->BT, d->D, d->rq * d->dh);
    al_linear_forward(a->ak, x, p[P_AK], d->BT, d->D, d->H * d->rk);
    al_linear_forward(a->bk, x, p[P_BK], d->BT, d->D, d->rk * d->dh);
    al_linear_forward(a->av, x, p[P_AV], d->BT, d->D, d->H * d->rv);
    al_linear_forward(a->bv, x, p[P_BV], d->BT, d->D, d->rv * d->dh);
    /* each feature factor is rotated as one head of width dh */
    al_rope_layer_forward(a->bq, B, T, d->rq, d->dh, d->dh, d->rq * d->dh, 0, s);
    al_rope_layer_forward(a->bk, B, T, d->rk, d->dh, d->dh, d->rk * d->dh, 0, s);
}

static void tpa_forward(const void *ctx, float *out, float *act, float *scratch,
                        const float *x, float *const *p, int B, int T)
{
    const al_attn_shape *s = &((const tpa_ctx *)ctx)->s;
    dims d = get_dims(ctx, B, T);
    tpa_a a = carve(&d, act);
    factors_forward(s, &d, p, &a, x, B, T);
    contract(a.q, a.aq, a.bq, &d, d.rq, d.BT);   /* q_h = (1/R_Q) sum_r a_r[h] b_r */
    contract(a.k, a.ak, a.bk, &d, d.rk, d.BT);
    contract(a.v, a.av, a.bv, &d, d.rv, d.BT);
    al_attn_problem pr = problem(ctx, B, T);
    al_attn_kernel_forward(s->attn_kernel, a.y, a.stat, a.q, a.k, a.v, &pr);
    al_linear_forward(out, a.y, p[P_WO], d.BT, d.H * d.dh, d.D);   /* out = wo . y */
    (void)scratch;
}

/* One factorisation backward, given dhead (BT, H*dh): dA, dB written,
 * B's RoPE undone when rope, then dx (beta_x) and both projections'
 * gradients (written). */
static void factor_backward(const al_attn_shape *s, const dims *d, float *dx, float *dwa,
                            float *dwb, float *dA, float *dB, const float *dhead,
                            const float *A, const float *Bf, const float *x, const float *wa,
                            const float *wb, int R, int rope, float beta_x, int B, int T)
{
    uncontract(dA, dB, dhead, A, Bf, d, R, d->BT);
    if (rope) al_rope_layer_backward(dB, B, T, R, d->dh, d->dh, R * d->dh, 0, s);
    al_linear_backward_beta(dx, dwa, dA, x, wa, d->BT, d->D, d->H * R, beta_x, 0.0f);
    al_linear_backward_beta(dx, dwb, dB, x, wb, d->BT, d->D, R * d->dh, 1.0f, 0.0f);
}

static void tpa_backward(const void *ctx, float *dx, float *const *dp, float *scratch,
                         const float *dout, const float *x, const float *act, float *const *p,
                         int B, int T)
{
    const al_attn_shape *s = &((const tpa_ctx *)ctx)->s;
    dims d = get_dims(ctx, B, T);
    tpa_a a = carve(&d, (float *)act);
    size_t n = (size_t)d.BT * d.H * d.dh;
    float *dy = scratch, *dq = dy + n, *dk = dq + n, *dv = dk + n;
    tpa_a g = carve(&d, dv + n);   /* only the factor slots are used */
    /* Every output is written (AL_VARIANT_WRITES_GRADS): beta 0 on its
     * first product. out = y . wo^T: dy = dout . wo */
    al_linear_backward_beta(dy, dp[P_WO], dout, a.y, p[P_WO], d.BT, d.H * d.dh, d.D, 0.0f, 0.0f);
    al_attn_problem pr = problem(ctx, B, T);
    al_attn_kernel_backward(s->attn_kernel, dq, dk, dv, dy, a.y, a.stat, a.q, a.k, a.v, &pr);
    factor_backward(s, &d, dx, dp[P_AQ], dp[P_BQ], g.aq, g.bq, dq, a.aq, a.bq, x, p[P_AQ],
                    p[P_BQ], d.rq, 1, 0.0f, B, T);
    factor_backward(s, &d, dx, dp[P_AK], dp[P_BK], g.ak, g.bk, dk, a.ak, a.bk, x, p[P_AK],
                    p[P_BK], d.rk, 1, 1.0f, B, T);
    factor_backward(s, &d, dx, dp[P_AV], dp[P_BV], g.av, g.bv, dv, a.av, a.bv, x, p[P_AV],
                    p[P_BV], d.rv, 0, 1.0f, B, T);
}

/* Each head's probabilities after forward() on one sequence, rebuilt from
 * the materialised q, k and the row statistics by the kernel backward
 * uses: the ones forward applied. */
static void tpa_probs(const void *ctx, float *P, const float *act, const float *src,
                      float *const *p, int T)
{
    const al_attn_shape *s = &((const tpa_ctx *)ctx)->s;
    dims d = get_dims(ctx, 1, T);
    tpa_a a = carve(&d, (float *)act);
    al_attn_problem pr = problem(ctx, 1, T);
    al_attn_kernel_probs(s->attn_kernel, P, a.stat, a.q, a.k, &pr);
    (void)p;
}

/* ------------------------------------------------------------ decode */

/* Offsets of the four factors in a cache row. */
typedef struct row_layout {
    int ak, bk, av, bv, elems;
} row_layout;

static row_layout layout(const dims *d)
{
    row_layout L;
    L.ak = 0;
    L.bk = L.ak + d->H * d->rk;
    L.av = L.bk + d->rk * d->dh;
    L.bv = L.av + d->H * d->rv;
    L.elems = L.bv + d->rv * d->dh;
    return L;
}

static void tpa_prefill(const void *ctx, al_kv_cache *cache, const float *act,
                        float *const *p, int T)
{
    dims d = get_dims(ctx, 1, T);
    tpa_a a = carve(&d, (float *)act);
    row_layout L = layout(&d);
    for (int t = 0; t < T; t++) {
        al_kv_put(cache, t, L.ak, d.H * d.rk, a.ak + (size_t)t * d.H * d.rk);
        al_kv_put(cache, t, L.bk, d.rk * d.dh, a.bk + (size_t)t * d.rk * d.dh);
        al_kv_put(cache, t, L.av, d.H * d.rv, a.av + (size_t)t * d.H * d.rv);
        al_kv_put(cache, t, L.bv, d.rv * d.dh, a.bv + (size_t)t * d.rv * d.dh);
    }
    (void)p;
}

/* Scratch of the factorised attention of one query: per-r products G and
 * weights W (H, AL_KV_TILE), scores S (H, AL_KV_TILE), each head's running
 * max and sum (2H), and a converted block of rows (AL_KV_TILE * elems). */
static size_t attend_floats(const dims *d)
{
    return 3 * (size_t)d->H * AL_KV_TILE + 2 * (size_t)d->H +
           (size_t)AL_KV_TILE * layout(d).elems;
}

/* Scores (H, n) of q (H, dh) against n cached rows, from the key factors:
 * S[h, t] = scale/R_K sum_r A^K_r(t)[h] (q_h . B^K_r(t)). */
static void block_scores(float *S, float *G, const float *q, const float *rows, int n,
                         const dims *d, const row_layout *L)
{
    float scale = score_scale(d) / (float)d->rk;
    for (int r = 0; r < d->rk; r++) {
        /* G (H, n) = q (H, dh) . B^K_r (n, dh)^T, rows strided by elems */
        al_gemm_nt(G, n, q, d->dh, rows + L->bk + (size_t)r * d->dh, L->elems, d->H, n, d->dh,
                   1.0f, 0.0f);
        for (int h = 0; h < d->H; h++)
            for (int t = 0; t < n; t++) {
                float a = rows[(size_t)t * L->elems + L->ak + h * d->rk + r];
                S[(size_t)h * n + t] = (r ? S[(size_t)h * n + t] : 0.0f) + a * G[(size_t)h * n + t];
            }
    }
    for (size_t i = 0; i < (size_t)d->H * n; i++) S[i] *= scale;
}

/* o (H, dh) += sum_r W_r . B^V_r with W_r[h, t] = e_h(t) A^V_r(t)[h]: the
 * block's unnormalised softmax weights e (H, n) through the value factors. */
static void block_values(float *o, float *W, const float *e, const float *rows, int n,
                         const dims *d, const row_layout *L)
{
    for (int r = 0; r < d->rv; r++) {
        for (int h = 0; h < d->H; h++)
            for (int t = 0; t < n; t++)
                W[(size_t)h * n + t] = e[(size_t)h * n + t] *
                                       rows[(size_t)t * L->elems + L->av + h * d->rv + r];
        al_gemm_nn(o, d->dh, W, n, rows + L->bv + (size_t)r * d->dh, L->elems, d->H, d->dh, n,
                   1.0f, 1.0f);
    }
}

/* y (H, dh) = attention of q (H, dh) over cache rows 0..n-1, block by
 * block with an online softmax, never expanding a row's k_h or v_h. */
static void factored_attend(float *y, float *sc, const float *q, const al_kv_cache *c, int n,
                            const dims *d)
{
    row_layout L = layout(d);
    size_t HT = (size_t)d->H * AL_KV_TILE;
    float *G = sc, *W = G + HT, *S = W + HT, *mx = S + HT, *sum = mx + d->H, *tile = sum + d->H;
    for (int h = 0; h < d->H; h++) mx[h] = -INFINITY, sum[h] = 0.0f;
    memset(y, 0, (size_t)d->H * d->dh * sizeof(float));
    for (int t0 = 0; t0 < n; t0 += AL_KV_TILE) {
        int m = n - t0 < AL_KV_TILE ? n - t0 : AL_KV_TILE;
        const float *rows = al_kv_rows(c, t0, m, tile);
        block_scores(S, G, q, rows, m, d, &L);
        for (int h = 0; h < d->H; h++) {   /* S_h <- exp(S_h - max); rescale what came before */
            float f = al_softmax_block(S + (size_t)h * m, m, &mx[h], &sum[h]);
            for (int j = 0; j < d->dh; j++) y[(size_t)h * d->dh + j] *= f;
        }
        block_values(y, W, S, rows, m, d, &L);
    }
    for (int h = 0; h < d->H; h++)   /* 1/R_V of the values, 1/sum of the softmax */
        for (int j = 0; j < d->dh; j++) y[(size_t)h * d->dh + j] /= (float)d->rv * sum[h];
}

/* What one decoding token computes before attending, carved from scratch:
 * its query factors aq (H*Rq), bq (Rq*dh), query q (H*dh), cache row
 * (elems) and attention output y (H*dh). */
typedef struct tpa_step {
    float *aq, *bq, *q, *row, *y, *end;
} tpa_step;

static tpa_step carve_step(const dims *d, float *s)
{
    tpa_step st;
    st.aq = s; s += d->H * d->rq;
    st.bq = s; s += d->rq * d->dh;
    st.q = s; s += d->H * d->dh;
    st.row = s; s += layout(d).elems;
    st.y = s; s += d->H * d->dh;
    st.end = s;
    return st;
}

static size_t tpa_decode_scratch_floats(const void *ctx, int context)
{
    dims d = get_dims(ctx, 1, 1);
    (void)context;
    return factor_floats(&d, d.rq) + 2 * (size_t)d.H * d.dh + layout(&d).elems +
           attend_floats(&d);
}

/* The token's query, and its cache row written at pos. */
static void step_forward(const al_attn_shape *s, const dims *d, float *const *p, tpa_step *st,
                         const float *x, al_kv_cache *cache, int pos)
{
    row_layout L = layout(d);
    al_linear_row(st->aq, x, p[P_AQ], d->D, d->H * d->rq);
    al_linear_row(st->bq, x, p[P_BQ], d->D, d->rq * d->dh);
    al_rope_layer_forward(st->bq, 1, 1, d->rq, d->dh, d->dh, d->rq * d->dh, pos, s);
    contract(st->q, st->aq, st->bq, d, d->rq, 1);
    al_linear_row(st->row + L.ak, x, p[P_AK], d->D, d->H * d->rk);
    al_linear_row(st->row + L.bk, x, p[P_BK], d->D, d->rk * d->dh);
    al_rope_layer_forward(st->row + L.bk, 1, 1, d->rk, d->dh, d->dh, d->rk * d->dh, pos, s);
    al_linear_row(st->row + L.av, x, p[P_AV], d->D, d->H * d->rv);
    al_linear_row(st->row + L.bv, x, p[P_BV], d->D, d->rv * d->dh);
    al_kv_row_put(cache, pos, st->row);
}

static void tpa_decode(const void *ctx, float *out, float *scratch, const float *x,
                       float *const *p, al_kv_cache *cache, int pos)
{
    const al_attn_shape *s = &((const tpa_ctx *)ctx)->s;
    dims d = get_dims(ctx, 1, 1);
    tpa_step st = carve_step(&d, scratch);
    step_forward(s, &d, p, &st, x, cache, pos);
    factored_attend(st.y, st.end, st.q, cache, pos + 1, &d);
    al_linear_row(out, st.y, p[P_WO], d.H * d.dh, d.D);   /* out = wo . y */
}

/* ---- batched decode: the projections as (B, D) products; each sequence
 * attends over its own cache on one of the pool's threads. */

/* Buffers of a batched step: the factors of the B tokens, aq (B, H*Rq),
 * bq (B, Rq*dh), ak, bk, av, bv likewise, queries q and outputs y
 * (B, H*dh), and the products' tmp (B, widest output). */
typedef struct tpa_batch {
    float *aq, *bq, *ak, *bk, *av, *bv, *q, *y, *tmp;
} tpa_batch;

static int batch_wide(const dims *d)
{
    int w = d->D, c[] = {d->H * d->dh, d->H * d->rq, d->rq * d->dh, d->H * d->rk,
                         d->rk * d->dh, d->H * d->rv, d->rv * d->dh};
    for (int i = 0; i < 7; i++) w = c[i] > w ? c[i] : w;
    return w;
}

static tpa_batch carve_batch(const dims *d, float *s, int B)
{
    size_t b = B;
    tpa_batch m;
    m.aq = s; s += b * d->H * d->rq;
    m.bq = s; s += b * d->rq * d->dh;
    m.ak = s; s += b * d->H * d->rk;
    m.bk = s; s += b * d->rk * d->dh;
    m.av = s; s += b * d->H * d->rv;
    m.bv = s; s += b * d->rv * d->dh;
    m.q = s; s += b * d->H * d->dh;
    m.y = s; s += b * d->H * d->dh;
    m.tmp = s;
    return m;
}

static size_t tpa_decode_batch_scratch_floats(const void *ctx, int context, int B)
{
    dims d = get_dims(ctx, 1, 1);
    (void)context;
    return (size_t)B * (all_factors(&d) + 2 * (size_t)d.H * d.dh + batch_wide(&d));
}

/* The B tokens' queries, and their cache rows written at pos[b]. */
static void batch_forward(const al_attn_shape *s, const dims *d, float *const *p, tpa_batch *m,
                          const float *x, al_kv_cache *const *caches, const int *pos, int B)
{
    int nbq = d->rq * d->dh, nak = d->H * d->rk, nbk = d->rk * d->dh;
    int nav = d->H * d->rv, nbv = d->rv * d->dh;
    row_layout L = layout(d);
    al_linear_forward_few(m->aq, m->tmp, x, p[P_AQ], B, d->D, d->H * d->rq);
    al_linear_forward_few(m->bq, m->tmp, x, p[P_BQ], B, d->D, nbq);
    al_linear_forward_few(m->ak, m->tmp, x, p[P_AK], B, d->D, nak);
    al_linear_forward_few(m->bk, m->tmp, x, p[P_BK], B, d->D, nbk);
    al_linear_forward_few(m->av, m->tmp, x, p[P_AV], B, d->D, nav);
    al_linear_forward_few(m->bv, m->tmp, x, p[P_BV], B, d->D, nbv);
    for (int b = 0; b < B; b++) {   /* each token at its own position */
        al_rope_layer_forward(m->bq + (size_t)b * nbq, 1, 1, d->rq, d->dh, d->dh, nbq, pos[b], s);
        al_rope_layer_forward(m->bk + (size_t)b * nbk, 1, 1, d->rk, d->dh, d->dh, nbk, pos[b], s);
        al_kv_put(caches[b], pos[b], L.ak, nak, m->ak + (size_t)b * nak);
        al_kv_put(caches[b], pos[b], L.bk, nbk, m->bk + (size_t)b * nbk);
        al_kv_put(caches[b], pos[b], L.av, nav, m->av + (size_t)b * nav);
        al_kv_put(caches[b], pos[b], L.bv, nbv, m->bv + (size_t)b * nbv);
    }
    contract(m->q, m->aq, m->bq, d, d->rq, B);
}

typedef struct attend_job {
    float *y;
    const float *q;
    al_kv_cache *const *caches;
    const int *pos;
    const dims *d;
} attend_job;

static void attend_rows(void *ctx, long lo, long hi, int tid)
{
    const attend_job *j = ctx;
    size_t Hd = (size_t)j->d->H * j->d->dh;
    float *sc = al_parallel_scratch(tid, attend_floats(j->d));
    for (long b = lo; b < hi; b++)
        factored_attend(j->y + b * Hd, sc, j->q + b * Hd, j->caches[b], j->pos[b] + 1, j->d);
}

static void tpa_decode_batch(const void *ctx, float *out, float *scratch, const float *x,
                             float *const *p, al_kv_cache *const *caches, const int *pos, int B)
{
    const al_attn_shape *s = &((const tpa_ctx *)ctx)->s;
    dims d = get_dims(ctx, 1, 1);
    tpa_batch m = carve_batch(&d, scratch, B);
    batch_forward(s, &d, p, &m, x, caches, pos, B);
    attend_job j = {m.y, m.q, caches, pos, &d};
    al_parallel_for(B, 1, attend_rows, &j);
    al_linear_forward_few(out, m.tmp, m.y, p[P_WO], B, d.H * d.dh, d.D);   /* out = wo . y */
}

static const al_variant_train tpa_train = {tpa_params, tpa_act_floats, tpa_scratch_floats,
                                           tpa_forward, tpa_backward, AL_VARIANT_WRITES_GRADS};
/* ------------------------------------------------------------ costs */

/* FLOPs per token of the factor projections (R (H + dh) outputs each for
 * Q, K, V) and wo. */
static double proj_flops(const dims *d)
{
    double R = (double)d->rq + d->rk + d->rv;
    return 2.0 * d->D * R * (d->H + d->dh) + 2.0 * d->H * d->dh * d->D;
}

/* Training materialises q, k, v from the factors (2*H*dh*R each per
 * token, contract()), and backward undoes it (dA and dB, twice that), then
 * attends as mha does. */
static double tpa_train_cost(const void *ctx, int T, int consumer)
{
    dims d = get_dims(ctx, 1, T);
    const al_attn_shape *s = &((const tpa_ctx *)ctx)->s;
    double contract_f = 2.0 * d.H * d.dh * ((double)d.rq + d.rk + d.rv);
    double attn = al_attn_flops(T, d.H, d.dh, d.dh, s->causal, 0) +
                  al_attn_flops(T, d.H, d.dh, d.dh, s->causal, 1);
    (void)consumer;   /* tpa cannot share */
    return 3 * (proj_flops(&d) + contract_f) + attn / T;
}

static double tpa_prefill_cost(const void *ctx, int T, int consumer)
{
    dims d = get_dims(ctx, 1, T);
    const al_attn_shape *s = &((const tpa_ctx *)ctx)->s;
    (void)consumer;
    return proj_flops(&d) + 2.0 * d.H * d.dh * ((double)d.rq + d.rk + d.rv) +
           al_attn_flops(T, d.H, d.dh, d.dh, s->causal, 0) / T;
}

/* Decode forms only the query; per cached row and head the factored
 * attention multiplies q by each of R_K key features and R_V value
 * features by the weights (2*dh each). The per-rank weighting of scores
 * by the head factors is elementwise and not counted. */
static double tpa_decode_cost(const void *ctx, int context, int consumer)
{
    dims d = get_dims(ctx, 1, 1);
    (void)consumer;
    return proj_flops(&d) + 2.0 * d.H * d.dh * d.rq +
           2.0 * context * d.H * d.dh * ((double)d.rk + d.rv);
}

static const al_variant_costs tpa_costs = {tpa_train_cost, tpa_prefill_cost, tpa_decode_cost,
                                           NULL};

static const al_variant_decode tpa_decode_table = {
    .storage = AL_KV_ROWS,
    .kv_elems = tpa_kv_elems,
    .prefill = tpa_prefill,
    .scratch_floats = tpa_decode_scratch_floats,
    .decode = tpa_decode,
    .batch_scratch_floats = tpa_decode_batch_scratch_floats,
    .decode_batch = tpa_decode_batch,
};
static const al_variant_pictures tpa_pictures = {.probs = tpa_probs, .shared = 0};

const al_variant al_variant_tpa = {
    .api_version = AL_VARIANT_API_VERSION,
    .name = "tpa",
    .description = "tensor product attention (T6): Q, K, V as rank-R sums of head x feature "
                   "products; caches the K and V factors",
    .settings = tpa_settings,
    .init = tpa_init,
    .fini = free,
    .train = &tpa_train,
    .decode = &tpa_decode_table,
    .pictures = &tpa_pictures,
    .costs = &tpa_costs,
};
