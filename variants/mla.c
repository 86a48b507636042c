/*
 * mla.c - multi-head latent attention (DeepSeek-V2 §2.1, Appendix C).
 *
 * K and V of every head are expanded from one normalised latent per token,
 * c = rmsnorm(wdkv . x) [d_latent]; position enters through a decoupled
 * RoPE key k_r = rope(wkr . x) [d_rope] shared by all heads. The cache holds
 * c and k_r only: d_latent + d_rope floats per token per layer.
 *
 *   queries   q = wq . x          or, compressed, c_q = rmsnorm(wdq . x),
 *             q_r = rope(wqr . x)                  q = wuq . c_q, q_r = rope(wqr . c_q)
 *   keys      k_h = [wuk_h . c, k_r]      values v_h = wuv_h . c
 *   score     (q_h . k_c,h + q_r,h . k_r) / sqrt(d_head + d_rope)
 *
 * Training runs the concatenated heads through the shared attention core
 * (al_sdpa_*) with d_qk = d_head + d_rope, d_v = d_head.
 *
 * Decoding absorbs the up-projections (DeepSeek-V2 App. C): q_h . (wuk_h c)
 * = (wuk_h^T q_h) . c, and sum_t p_t wuv_h c_t = wuv_h (sum_t p_t c_t), so
 * attention runs over the cached latents directly, as multi-query
 * attention with one shared key [c | k_r] and one shared value c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attnlab/attnlab_variant.h>
#include <attnlab/al_kvcache.h>
#include "mla_internal.h"
#include <attnlab/al_parallel.h>

enum { SET_D_LATENT, SET_D_ROPE, SET_D_Q_LATENT };

static const al_setting mla_settings[] = {
    {"d_latent", AL_SET_INT, 0, 1, "latent width d_c: the cached K/V state per token"},
    {"d_rope", AL_SET_INT, 0, 1, "decoupled RoPE key width d_h^R (even), shared by all heads"},
    {"d_q_latent", AL_SET_INT, 0, 0, "query latent width d_c'; 0 = no query compression"},
    {NULL, 0, 0, 0, NULL},
};

/* Dimensions, read once per call. */
typedef struct dims {
    int D, H, dh, dr, dc, dq, BT, dqk;
} dims;

static dims shape_dims(const al_attn_shape *s, int B, int T)
{
    dims d = {s->d_model, s->n_head, s->d_head, al_set_int(s, SET_D_ROPE),
              al_set_int(s, SET_D_LATENT), al_set_int(s, SET_D_Q_LATENT), B * T, 0};
    d.dqk = d.dh + d.dr;
    return d;
}

/* A layer's context: its shape and dimensions (BT 1), made once by init. */
typedef struct mla_ctx {
    al_attn_shape s;
    dims d;
} mla_ctx;

static dims get_dims(const void *ctx, int B, int T)
{
    dims d = ((const mla_ctx *)ctx)->d;
    d.BT = B * T;
    return d;
}

static void *mla_init(const al_variant *v, const al_attn_shape *s, char *err, size_t n)
{
    dims d = shape_dims(s, 1, 1);
    if (d.dc < 1)
        return snprintf(err, n, "'d_latent' (%d) must be positive", d.dc), NULL;
    if (d.dr < 2 || d.dr % 2)
        return snprintf(err, n, "'d_rope' (%d) must be even and positive for RoPE", d.dr), NULL;
    if (d.dq < 0)
        return snprintf(err, n, "'d_q_latent' (%d) must be 0 (no query compression) or positive",
                        d.dq), NULL;
    mla_ctx *c = malloc(sizeof *c);
    if (c) *c = (mla_ctx){*s, d};
    return c;
}

static int mla_params(const void *ctx, al_param_spec *o)
{
    dims d = get_dims(ctx, 1, 1);
    int k = 0, Hd = d.H * d.dh, qin = d.dq ? d.dq : d.D;
    if (d.dq) {
        o[k++] = (al_param_spec){"wdq", d.dq, d.D, AL_INIT_NORMAL};
        o[k++] = (al_param_spec){"q_norm", d.dq, 0, AL_INIT_ONES};
        o[k++] = (al_param_spec){"wuq", Hd, d.dq, AL_INIT_NORMAL};
    } else {
        o[k++] = (al_param_spec){"wq", Hd, d.D, AL_INIT_NORMAL};
    }
    o[k++] = (al_param_spec){"wqr", d.H * d.dr, qin, AL_INIT_NORMAL};
    o[k++] = (al_param_spec){"wdkv", d.dc, d.D, AL_INIT_NORMAL};
    o[k++] = (al_param_spec){"kv_norm", d.dc, 0, AL_INIT_ONES};
    o[k++] = (al_param_spec){"wkr", d.dr, d.D, AL_INIT_NORMAL};
    o[k++] = (al_param_spec){"wuk", Hd, d.dc, AL_INIT_NORMAL};
    o[k++] = (al_param_spec){"wuv", Hd, d.dc, AL_INIT_NORMAL};
    o[k++] = (al_param_spec){"wo", d.D, Hd, AL_INIT_RESID};
    return k;
}

/* Named views of the parameter list, whichever query form is in use. */
typedef struct mla_p {
    float *wq, *wdq, *q_norm, *wuq, *wqr, *wdkv, *kv_norm, *wkr, *wuk, *wuv, *wo;
} mla_p;

static mla_p bind(const dims *d, float *const *p)
{
    mla_p w = {0};
    int k = 0;
    if (d->dq) {
        w.wdq = p[k++];
        w.q_norm = p[k++];
        w.wuq = p[k++];
    } else {
        w.wq = p[k++];
    }
    w.wqr = p[k++];
    w.wdkv = p[k++];
    w.kv_norm = p[k++];
    w.wkr = p[k++];
    w.wuk = p[k++];
    w.wuv = p[k++];
    w.wo = p[k++];
    return w;
}

/* Saved activations of one layer:
 *   cq0, cq (BT,dq) rstdq (BT)   [query compression only]
 *   c0, c (BT,dc) rstdc (BT)     latent before / after its norm
 *   kr (BT,dr)                   rope'd shared key
 *   qf, kf (BT,H,dqk)            per-head [content | rope] queries and keys
 *   v, y (BT,H*dh)               values, attention output before wo
 *   stat (B,H,T,2)               score rows' max and 1/sum (al_attn_forward) */
typedef struct mla_a {
    float *cq0, *cq, *rstdq, *c0, *c, *rstdc, *kr, *qf, *kf, *v, *y, *stat;
} mla_a;

static mla_a carve(const dims *d, float *a, int B, int T)
{
    size_t BT = d->BT, Hqk = (size_t)d->H * d->dqk, Hd = (size_t)d->H * d->dh;
    mla_a m;
    m.cq0 = a; a += BT * d->dq;
    m.cq = a; a += BT * d->dq;
    m.rstdq = a; a += d->dq ? BT : 0;
    m.c0 = a; a += BT * d->dc;
    m.c = a; a += BT * d->dc;
    m.rstdc = a; a += BT;
    m.kr = a; a += BT * d->dr;
    m.qf = a; a += BT * Hqk;
    m.kf = a; a += BT * Hqk;
    m.v = a; a += BT * Hd;
    m.y = a; a += BT * Hd;
    m.stat = a;
    (void)B, (void)T;
    return m;
}

static size_t mla_act_floats(const void *ctx, int B, int T)
{
    dims d = get_dims(ctx, B, T);
    size_t BT = d.BT, Hqk = (size_t)d.H * d.dqk, Hd = (size_t)d.H * d.dh;
    return BT * (2 * d.dq + (d.dq ? 1 : 0) + 2 * d.dc + 1 + d.dr + 2 * Hqk + 2 * Hd) +
           2 * (size_t)B * d.H * T;
}

/* Backward scratch: dy, dv, dcont (BT,H*dh) | dqf, dkf (BT,H*dqk) |
 * drope (BT,H*dr) | dkr (BT,dr) | dc, dc0 (BT,dc) | dcq, dcq0 (BT,dq) */
static size_t mla_scratch_floats(const void *ctx, int B, int T)
{
    dims d = get_dims(ctx, B, T);
    size_t BT = d.BT, Hqk = (size_t)d.H * d.dqk, Hd = (size_t)d.H * d.dh;
    return BT * (3 * Hd + 2 * Hqk + (size_t)d.H * d.dr + d.dr + 2 * d.dc + 2 * d.dq);
}

/* The copies between per-projection and per-head layouts are split over
 * the worker pool by token rows (al_parallel.h). mode: 0 pack, 1 unpack,
 * 2 broadcast the shared rope key, 3 sum it back over the heads. */
typedef struct copy_job {
    float *dst;
    const float *src;
    const dims *d;
    int off, w, mode;
} copy_job;

static void copy_rows(void *ctx, long lo, long hi, int tid)
{
    const copy_job *j = ctx;
    const dims *d = j->d;
    size_t w = j->w * sizeof(float);
    for (long i = lo; i < hi; i++)
        for (int h = 0; h < d->H; h++) {
            const float *kf = j->src + ((size_t)i * d->H + h) * d->dqk;
            if (j->mode == 0)
                memcpy(j->dst + ((size_t)i * d->H + h) * d->dqk + j->off,
                       j->src + ((size_t)i * d->H + h) * j->w, w);
            else if (j->mode == 1)
                memcpy(j->dst + ((size_t)i * d->H + h) * j->w, kf + j->off, w);
            else if (j->mode == 2)
                memcpy(j->dst + ((size_t)i * d->H + h) * d->dqk + d->dh,
                       j->src + (size_t)i * d->dr, w);
            else   /* summed onto zero, head by head, in order */
                for (int c = 0; c < d->dr; c++)
                    j->dst[(size_t)i * d->dr + c] = (h ? j->dst[(size_t)i * d->dr + c] : 0.0f) +
                                                    kf[d->dh + c];
        }
    (void)tid;
}

static void copy_heads(float *dst, const float *src, const dims *d, int off, int w, int mode)
{
    copy_job j = {dst, src, d, off, w, mode};
    al_parallel_for(d->BT, 16, copy_rows, &j);
}

/* dst (BT, H, dqk) columns [off, off + w) of every head <- src (BT, H * w) */
static void pack_heads(float *dst, const float *src, const dims *d, int off, int w)
{
    copy_heads(dst, src, d, off, w, 0);
}

/* dst (BT, H * w) <- columns [off, off + w) of every head of src (BT, H, dqk) */
static void unpack_heads(float *dst, const float *src, const dims *d, int off, int w)
{
    copy_heads(dst, src, d, off, w, 1);
}

/* kf[i, h, dh:] = kr[i] for every head: one key shared by all heads. */
static void broadcast_rope_key(float *kf, const float *kr, const dims *d)
{
    copy_heads(kf, kr, d, 0, d->dr, 2);
}

/* Queries into a.qf (content | rope per head); tmp holds (BT, H*(dh+dr)). */
static void queries_forward(const al_attn_shape *s, const dims *d, const mla_p *w,
                            mla_a *a, float *tmp, const float *x, int B, int T)
{
    float *qn = tmp, *qr = tmp + (size_t)d->BT * d->H * d->dh;
    const float *qin = x;
    int nin = d->D;
    if (d->dq) {
        al_linear_forward(a->cq0, x, w->wdq, d->BT, d->D, d->dq);   /* c_q0 = wdq . x */
        al_rmsnorm_forward(a->cq, a->rstdq, a->cq0, w->q_norm, d->BT, d->dq, s->norm_eps);
        al_linear_forward(qn, a->cq, w->wuq, d->BT, d->dq, d->H * d->dh);
        qin = a->cq;
        nin = d->dq;
    } else {
        al_linear_forward(qn, x, w->wq, d->BT, d->D, d->H * d->dh);
    }
    al_linear_forward(qr, qin, w->wqr, d->BT, nin, d->H * d->dr);
    al_rope_forward(qr, B, T, d->H, d->dr, d->H * d->dr, 0, s->rope_base);
    pack_heads(a->qf, qn, d, 0, d->dh);
    pack_heads(a->qf, qr, d, d->dh, d->dr);
}

static void mla_forward(const void *ctx, float *out, float *act, float *scratch,
                        const float *x, float *const *p, int B, int T)
{
    const al_attn_shape *s = &((const mla_ctx *)ctx)->s;
    dims d = get_dims(ctx, B, T);
    mla_p w = bind(&d, p);
    mla_a a = carve(&d, act, B, T);
    queries_forward(s, &d, &w, &a, scratch, x, B, T);
    al_linear_forward(a.c0, x, w.wdkv, d.BT, d.D, d.dc);         /* c0 = wdkv . x */
    al_rmsnorm_forward(a.c, a.rstdc, a.c0, w.kv_norm, d.BT, d.dc, s->norm_eps);
    al_linear_forward(a.kr, x, w.wkr, d.BT, d.D, d.dr);          /* k_r = rope(wkr . x) */
    al_rope_forward(a.kr, B, T, 1, d.dr, d.dr, 0, s->rope_base);
    float *kc = scratch;                                         /* k_c = wuk . c */
    al_linear_forward(kc, a.c, w.wuk, d.BT, d.dc, d.H * d.dh);
    pack_heads(a.kf, kc, &d, 0, d.dh);
    broadcast_rope_key(a.kf, a.kr, &d);
    al_linear_forward(a.v, a.c, w.wuv, d.BT, d.dc, d.H * d.dh);  /* v = wuv . c */
    al_attn_forward(a.y, a.stat, a.qf, a.kf, a.v, B, T, d.H, d.H, d.dqk, d.dh,
                    1.0f / sqrtf((float)d.dqk), s->causal);
    al_linear_forward(out, a.y, w.wo, d.BT, d.H * d.dh, d.D);    /* out = wo . y */
}

typedef struct mla_g {
    float *dy, *dv, *dcont, *dqf, *dkf, *drope, *dkr, *dc, *dc0, *dcq, *dcq0;
} mla_g;

static mla_g carve_grads(const dims *d, float *s)
{
    size_t BT = d->BT, Hqk = (size_t)d->H * d->dqk, Hd = (size_t)d->H * d->dh;
    mla_g g;
    g.dy = s; s += BT * Hd;
    g.dv = s; s += BT * Hd;
    g.dcont = s; s += BT * Hd;
    g.dqf = s; s += BT * Hqk;
    g.dkf = s; s += BT * Hqk;
    g.drope = s; s += BT * d->H * d->dr;
    g.dkr = s; s += BT * d->dr;
    g.dc = s; s += BT * d->dc;
    g.dc0 = s; s += BT * d->dc;
    g.dcq = s; s += BT * d->dq;
    g.dcq0 = s;
    return g;
}

/* dkr[i] = sum over heads of dkf[i, h, dh:] (the key is shared), heads in
 * order within each row; written. */
static void reduce_rope_key(float *dkr, const float *dkf, const dims *d)
{
    copy_heads(dkr, dkf, d, 0, d->dr, 3);
}

/* Query path backward, given g->dqf: writes dx (its first contribution)
 * and the query weights' gradients. */
static void queries_backward(const al_attn_shape *s, const dims *d, const mla_p *w,
                             const mla_p *dw, const mla_a *a, mla_g *g, float *dx,
                             const float *x, int B, int T)
{
    int Hd = d->H * d->dh, Hr = d->H * d->dr;
    unpack_heads(g->dcont, g->dqf, d, 0, d->dh);
    unpack_heads(g->drope, g->dqf, d, d->dh, d->dr);
    al_rope_backward(g->drope, B, T, d->H, d->dr, Hr, 0, s->rope_base);
    if (!d->dq) {
        al_linear_backward_beta(dx, dw->wq, g->dcont, x, w->wq, d->BT, d->D, Hd, 0.0f, 0.0f);
        al_linear_backward_beta(dx, dw->wqr, g->drope, x, w->wqr, d->BT, d->D, Hr, 1.0f, 0.0f);
        return;
    }
    al_linear_backward_beta(g->dcq, dw->wuq, g->dcont, a->cq, w->wuq, d->BT, d->dq, Hd, 0.0f,
                            0.0f);
    al_linear_backward_beta(g->dcq, dw->wqr, g->drope, a->cq, w->wqr, d->BT, d->dq, Hr, 1.0f,
                            0.0f);
    al_rmsnorm_backward_beta(g->dcq0, dw->q_norm, g->dcq, a->cq0, w->q_norm, a->rstdq, d->BT,
                             d->dq, 0.0f, 0.0f);
    al_linear_backward_beta(dx, dw->wdq, g->dcq0, x, w->wdq, d->BT, d->D, d->dq, 0.0f, 0.0f);
}

static void mla_backward(const void *ctx, float *dx, float *const *dp, float *scratch,
                         const float *dout, const float *x, const float *act, float *const *p,
                         int B, int T)
{
    const al_attn_shape *s = &((const mla_ctx *)ctx)->s;
    dims d = get_dims(ctx, B, T);
    mla_p w = bind(&d, p), dw = bind(&d, dp);
    mla_a a = carve(&d, (float *)act, B, T);
    mla_g g = carve_grads(&d, scratch);
    int Hd = d.H * d.dh;
    /* Every output is written (AL_VARIANT_WRITES_GRADS): beta 0 on its
     * first product. out = y . wo^T: dy = dout . wo; attention writes dqf,
     * dkf, dv */
    al_linear_backward_beta(g.dy, dw.wo, dout, a.y, w.wo, d.BT, Hd, d.D, 0.0f, 0.0f);
    al_attn_backward(g.dqf, g.dkf, g.dv, g.dy, a.stat, a.qf, a.kf, a.v, B, T, d.H, d.H,
                     d.dqk, d.dh, 1.0f / sqrtf((float)d.dqk), s->causal);
    queries_backward(s, &d, &w, &dw, &a, &g, dx, x, B, T);
    /* k_c = wuk . c and v = wuv . c both feed dc */
    unpack_heads(g.dcont, g.dkf, &d, 0, d.dh);
    al_linear_backward_beta(g.dc, dw.wuk, g.dcont, a.c, w.wuk, d.BT, d.dc, Hd, 0.0f, 0.0f);
    al_linear_backward_beta(g.dc, dw.wuv, g.dv, a.c, w.wuv, d.BT, d.dc, Hd, 1.0f, 0.0f);
    al_rmsnorm_backward_beta(g.dc0, dw.kv_norm, g.dc, a.c0, w.kv_norm, a.rstdc, d.BT, d.dc,
                             0.0f, 0.0f);
    al_linear_backward_beta(dx, dw.wdkv, g.dc0, x, w.wdkv, d.BT, d.D, d.dc, 1.0f, 0.0f);
    /* k_r = rope(wkr . x), shared by all heads */
    reduce_rope_key(g.dkr, g.dkf, &d);
    al_rope_backward(g.dkr, B, T, 1, d.dr, d.dr, 0, s->rope_base);
    al_linear_backward_beta(dx, dw.wkr, g.dkr, x, w.wkr, d.BT, d.D, d.dr, 1.0f, 0.0f);
}

static size_t mla_kv_elems(const void *ctx)
{
    const al_attn_shape *s = &((const mla_ctx *)ctx)->s;
    return (size_t)al_set_int(s, SET_D_LATENT) + al_set_int(s, SET_D_ROPE);
}

/* Each head's probabilities after forward() on one sequence: the real
 * scores (q_h . k_c,h + q_r,h . k_r) / sqrt(d_head + d_rope), rebuilt from
 * the saved per-head [content | rope] queries and keys and the row
 * statistics by the kernel backward uses. */
static void mla_probs(const void *ctx, float *P, const float *act, const float *src, float *const *p,
                      int T)
{
    const al_attn_shape *s = &((const mla_ctx *)ctx)->s;
    dims d = get_dims(ctx, 1, T);
    mla_a a = carve(&d, (float *)act, 1, T);
    al_attn_probs(P, a.stat, a.qf, a.kf, T, d.H, d.H, d.dqk, 1.0f / sqrtf((float)d.dqk),
                  s->causal);
    (void)p;
}

/* ------------------------------------------------------------ decode */

/* Cache row of a token: c [dc] (after kv_norm), then k_r [dr] (RoPE'd). */
static void mla_prefill(const void *ctx, al_kv_cache *cache, const float *act,
                        float *const *p, int T)
{
    dims d = get_dims(ctx, 1, T);
    mla_a a = carve(&d, (float *)act, 1, T);
    for (int t = 0; t < T; t++) {
        al_kv_put(cache, t, 0, d.dc, a.c + (size_t)t * d.dc);
        al_kv_put(cache, t, d.dc, d.dr, a.kr + (size_t)t * d.dr);
    }
}

/* What both decode paths compute for the new token, carved from scratch:
 * content queries qn (H*dh), rope queries qr (H*dr), the query latent
 * cq0, cq (dq), the cache row [c | k_r] (dc+dr) and c before its norm. */
typedef struct mla_step {
    float *qn, *qr, *cq0, *cq, *row, *c0, *end;
} mla_step;

static mla_step carve_step(const dims *d, float *s)
{
    mla_step st;
    st.qn = s; s += d->H * d->dh;
    st.qr = s; s += d->H * d->dr;
    st.cq0 = s; s += d->dq;
    st.cq = s; s += d->dq;
    st.row = s; s += d->dc + d->dr;
    st.c0 = s; s += d->dc;
    st.end = s;
    return st;
}

static size_t step_floats(const dims *d)
{
    return (size_t)d->H * (d->dh + d->dr) + 2 * d->dq + 2 * d->dc + d->dr;
}

/* The token's queries, and its cache row written at pos. */
static void step_forward(const al_attn_shape *s, const dims *d, const mla_p *w, mla_step *st,
                         const float *x, al_kv_cache *cache, int pos)
{
    int Hd = d->H * d->dh, Hr = d->H * d->dr, nin = d->D;
    const float *qin = x;
    if (d->dq) {
        al_linear_row(st->cq0, x, w->wdq, d->D, d->dq);   /* c_q = rmsnorm(wdq . x) */
        al_rmsnorm_forward(st->cq, NULL, st->cq0, w->q_norm, 1, d->dq, s->norm_eps);
        al_linear_row(st->qn, st->cq, w->wuq, d->dq, Hd);
        qin = st->cq;
        nin = d->dq;
    } else {
        al_linear_row(st->qn, x, w->wq, d->D, Hd);
    }
    al_linear_row(st->qr, qin, w->wqr, nin, Hr);
    al_rope_forward(st->qr, 1, 1, d->H, d->dr, Hr, pos, s->rope_base);
    al_linear_row(st->c0, x, w->wdkv, d->D, d->dc);      /* c = rmsnorm(wdkv . x) */
    al_rmsnorm_forward(st->row, NULL, st->c0, w->kv_norm, 1, d->dc, s->norm_eps);
    al_linear_row(st->row + d->dc, x, w->wkr, d->D, d->dr); /* k_r = rope(wkr . x) */
    al_rope_forward(st->row + d->dc, 1, 1, 1, d->dr, d->dr, pos, s->rope_base);
    al_kv_row_put(cache, pos, st->row);
}

/* step | absorbed queries qa (H, dc+dr) | latent outputs o (H, dc) |
 * y (H*dh) | al_kv_attend's S | tile */
static size_t mla_decode_scratch_floats(const void *ctx, int context)
{
    dims d = get_dims(ctx, 1, 1);
    size_t row = (size_t)d.dc + d.dr;
    return step_floats(&d) + (size_t)d.H * (row + d.dc + d.dh) + AL_KV_ATTEND_S(d.H) +
           (size_t)AL_KV_TILE * row;
}

static void mla_decode(const void *ctx, float *out, float *scratch, const float *x,
                       float *const *p, al_kv_cache *cache, int pos)
{
    const al_attn_shape *s = &((const mla_ctx *)ctx)->s;
    dims d = get_dims(ctx, 1, 1);
    mla_p w = bind(&d, p);
    mla_step st = carve_step(&d, scratch);
    int row = d.dc + d.dr;
    float *qa = st.end, *o = qa + (size_t)d.H * row, *y = o + (size_t)d.H * d.dc;
    float *S = y + (size_t)d.H * d.dh, *tile = S + AL_KV_ATTEND_S(d.H);
    step_forward(s, &d, &w, &st, x, cache, pos);
    for (int h = 0; h < d.H; h++) {
        /* qa_h = [wuk_h^T q_h | q_r,h]: scored against the cached [c | k_r] */
        al_gemv_t(qa + (size_t)h * row, w.wuk + (size_t)h * d.dh * d.dc, d.dc,
                  st.qn + (size_t)h * d.dh, d.dh, d.dc, 1.0f, 0.0f);
        memcpy(qa + (size_t)h * row + d.dc, st.qr + (size_t)h * d.dr, d.dr * sizeof(float));
    }
    /* o_h = sum_t p_h,t c_t: every head reads the one shared latent */
    al_kv_attend(o, S, tile, qa, cache, pos + 1, d.H, 1, row, d.dc, 0, 0,
                 1.0f / sqrtf((float)d.dqk));
    for (int h = 0; h < d.H; h++)   /* y_h = wuv_h . o_h, once per head */
        al_gemv_n(y + (size_t)h * d.dh, w.wuv + (size_t)h * d.dh * d.dc, d.dc,
                  o + (size_t)h * d.dc, d.dh, d.dc, 1.0f, 0.0f);
    al_linear_row(out, y, w.wo, d.H * d.dh, d.D);      /* out = wo . y */
}

/* ---- batched decode: mla_decode for B sequences, each projection and
 * each head's absorption a product over the B tokens. */

/* Buffers of a batched step, carved from scratch: the query latents
 * cq0, cq (B, dq), content and rope queries qn (B, H*dh), qr (B, H*dr),
 * the latent c0, c (B, dc) and rope key kr (B, dr) of the new rows, the
 * absorbed queries qa (B, H, dc+dr), latent outputs o (B, H, dc) and
 * y (B, H*dh). Attention's own scratch is the pool's. */
typedef struct mla_batch {
    float *cq0, *cq, *qn, *qr, *c0, *c, *kr, *qa, *o, *y, *tmp, *end;
} mla_batch;

/* The widest output of a batched step's projections (al_linear_forward_few's tmp). */
static int batch_wide(const dims *d)
{
    int w = d->D, c[] = {d->H * d->dh, d->H * d->dr, d->dc, d->dq};
    for (int i = 0; i < 4; i++) w = c[i] > w ? c[i] : w;
    return w;
}

static mla_batch carve_batch(const dims *d, float *s, int B)
{
    size_t b = B, row = (size_t)d->dc + d->dr;
    mla_batch m;
    m.cq0 = s; s += b * d->dq;
    m.cq = s; s += b * d->dq;
    m.qn = s; s += b * d->H * d->dh;
    m.qr = s; s += b * d->H * d->dr;
    m.c0 = s; s += b * d->dc;
    m.c = s; s += b * d->dc;
    m.kr = s; s += b * d->dr;
    m.qa = s; s += b * d->H * row;
    m.o = s; s += b * d->H * d->dc;
    m.y = s; s += b * d->H * d->dh;
    m.tmp = s; s += b * batch_wide(d);
    m.end = s;
    return m;
}

static size_t mla_decode_batch_scratch_floats(const void *ctx, int context, int B)
{
    dims d = get_dims(ctx, 1, 1);
    size_t row = (size_t)d.dc + d.dr;
    (void)context;
    return (size_t)B * (2 * (size_t)d.dq + (size_t)d.H * (2 * d.dh + d.dr + row + d.dc) +
                        2 * (size_t)d.dc + d.dr + batch_wide(&d));
}

/* The B tokens' queries, and their cache rows written at pos[b]. */
static void batch_forward(const al_attn_shape *s, const dims *d, const mla_p *w, mla_batch *m,
                          const float *x, al_kv_cache *const *caches, const int *pos, int B)
{
    int Hd = d->H * d->dh, Hr = d->H * d->dr, nin = d->D;
    const float *qin = x;
    if (d->dq) {   /* c_q = rmsnorm(wdq . x), q = wuq . c_q */
        al_linear_forward_few(m->cq0, m->tmp, x, w->wdq, B, d->D, d->dq);
        al_rmsnorm_forward(m->cq, NULL, m->cq0, w->q_norm, B, d->dq, s->norm_eps);
        al_linear_forward_few(m->qn, m->tmp, m->cq, w->wuq, B, d->dq, Hd);
        qin = m->cq;
        nin = d->dq;
    } else {
        al_linear_forward_few(m->qn, m->tmp, x, w->wq, B, d->D, Hd);
    }
    al_linear_forward_few(m->qr, m->tmp, qin, w->wqr, B, nin, Hr);
    al_linear_forward_few(m->c0, m->tmp, x, w->wdkv, B, d->D, d->dc);   /* c = rmsnorm(wdkv . x) */
    al_rmsnorm_forward(m->c, NULL, m->c0, w->kv_norm, B, d->dc, s->norm_eps);
    al_linear_forward_few(m->kr, m->tmp, x, w->wkr, B, d->D, d->dr);    /* k_r = rope(wkr . x) */
    for (int b = 0; b < B; b++) {
        al_rope_forward(m->qr + (size_t)b * Hr, 1, 1, d->H, d->dr, Hr, pos[b], s->rope_base);
        al_rope_forward(m->kr + (size_t)b * d->dr, 1, 1, 1, d->dr, d->dr, pos[b], s->rope_base);
        al_kv_put(caches[b], pos[b], 0, d->dc, m->c + (size_t)b * d->dc);
        al_kv_put(caches[b], pos[b], d->dc, d->dr, m->kr + (size_t)b * d->dr);
    }
}

static void mla_decode_batch(const void *ctx, float *out, float *scratch, const float *x,
                             float *const *p, al_kv_cache *const *caches, const int *pos, int B)
{
    const al_attn_shape *s = &((const mla_ctx *)ctx)->s;
    dims d = get_dims(ctx, 1, 1);
    mla_p w = bind(&d, p);
    mla_batch m = carve_batch(&d, scratch, B);
    int row = d.dc + d.dr, Hd = d.H * d.dh, Hr = d.H * d.dr, Hrow = d.H * row;
    batch_forward(s, &d, &w, &m, x, caches, pos, B);
    for (int h = 0; h < d.H; h++) {
        /* qa[:, h] = [q_h . wuk_h | q_r,h] for every token: (B, dh) . (dh, dc) */
        al_gemm_nn(m.qa + (size_t)h * row, Hrow, m.qn + (size_t)h * d.dh, Hd,
                   w.wuk + (size_t)h * d.dh * d.dc, d.dc, B, d.dc, d.dh, 1.0f, 0.0f);
        for (int b = 0; b < B; b++)
            memcpy(m.qa + (size_t)b * Hrow + (size_t)h * row + d.dc,
                   m.qr + (size_t)b * Hr + (size_t)h * d.dr, d.dr * sizeof(float));
    }
    al_kv_attend_batch(m.o, m.qa, caches, pos, B, d.H, 1, row, d.dc, 0, 0,
                       1.0f / sqrtf((float)d.dqk));
    for (int h = 0; h < d.H; h++)   /* y[:, h] = o[:, h] . wuv_h^T: (B, dc) . (dc, dh) */
        al_gemm_nt(m.y + (size_t)h * d.dh, Hd, m.o + (size_t)h * d.dc, d.H * d.dc,
                   w.wuv + (size_t)h * d.dh * d.dc, d.dc, B, d.dh, d.dc, 1.0f, 0.0f);
    al_linear_forward_few(out, m.tmp, m.y, w.wo, B, Hd, d.D);   /* out = wo . y */
}

/* ------------------------------------------------------------ naive decode (oracle) */

/* step | latents C (context, dc), rope keys Kr (context, dr) | expanded
 * keys K and values V (context, H*dh) | probabilities (context) | y (H*dh) */
size_t al_mla_naive_scratch_floats(const al_attn_shape *s, int context)
{
    dims d = shape_dims(s, 1, 1);
    size_t Hd = (size_t)d.H * d.dh;
    return step_floats(&d) + (size_t)context * (d.dc + d.dr + 2 * Hd + 1) + Hd;
}

/* y_h = softmax_t((q_h . K[t,h] + q_r,h . Kr[t]) * scale) . V[t,h], in double */
static void naive_head(float *y, float *P, const float *q, const float *qr, const float *K,
                       const float *Kr, const float *V, const dims *d, int n, int h)
{
    size_t Hd = (size_t)d->H * d->dh;
    double mx = -INFINITY, sum = 0, scale = 1.0 / sqrt((double)d->dqk);
    for (int t = 0; t < n; t++) {
        double sc = 0;
        for (int j = 0; j < d->dh; j++) sc += (double)q[j] * K[t * Hd + (size_t)h * d->dh + j];
        for (int j = 0; j < d->dr; j++) sc += (double)qr[j] * Kr[(size_t)t * d->dr + j];
        P[t] = (float)(sc * scale);
        mx = P[t] > mx ? P[t] : mx;
    }
    for (int t = 0; t < n; t++) sum += exp(P[t] - mx);
    for (int j = 0; j < d->dh; j++) {
        double acc = 0;
        for (int t = 0; t < n; t++)
            acc += exp(P[t] - mx) / sum * V[t * Hd + (size_t)h * d->dh + j];
        y[j] = (float)acc;
    }
}

void al_mla_decode_naive(const al_attn_shape *s, float *out, float *scratch, const float *x,
                         float *const *p, al_kv_cache *cache, int pos)
{
    dims d = shape_dims(s, 1, 1);
    mla_p w = bind(&d, p);
    mla_step st = carve_step(&d, scratch);
    int n = pos + 1, ctx = al_kv_cache_context(cache), Hd = d.H * d.dh;
    float *C = st.end, *Kr = C + (size_t)ctx * d.dc, *K = Kr + (size_t)ctx * d.dr;
    float *V = K + (size_t)ctx * Hd, *P = V + (size_t)ctx * Hd, *y = P + ctx;
    step_forward(s, &d, &w, &st, x, cache, pos);
    for (int t = 0; t < n; t++) {   /* read back the rows: c then k_r */
        al_kv_row_get(cache, t, st.row);
        memcpy(C + (size_t)t * d.dc, st.row, d.dc * sizeof(float));
        memcpy(Kr + (size_t)t * d.dr, st.row + d.dc, d.dr * sizeof(float));
    }
    al_linear_forward(K, C, w.wuk, n, d.dc, Hd);   /* k_c = wuk . c, every token and head */
    al_linear_forward(V, C, w.wuv, n, d.dc, Hd);   /* v = wuv . c */
    for (int h = 0; h < d.H; h++)
        naive_head(y + (size_t)h * d.dh, P, st.qn + (size_t)h * d.dh, st.qr + (size_t)h * d.dr,
                   K, Kr, V, &d, n, h);
    al_linear_forward(out, y, w.wo, 1, Hd, d.D);
}

static const al_variant_train mla_train = {mla_params, mla_act_floats, mla_scratch_floats,
                                           mla_forward, mla_backward, AL_VARIANT_WRITES_GRADS};
static const al_variant_decode mla_decode_table = {
    .storage = AL_KV_ROWS,
    .kv_elems = mla_kv_elems,
    .prefill = mla_prefill,
    .scratch_floats = mla_decode_scratch_floats,
    .decode = mla_decode,
    .batch_scratch_floats = mla_decode_batch_scratch_floats,
    .decode_batch = mla_decode_batch,
};
static const al_variant_pictures mla_pictures = {mla_probs, 0};

const al_variant al_variant_mla = {
    .api_version = AL_VARIANT_API_VERSION,
    .name = "mla",
    .description = "multi-head latent attention (DeepSeek-V2): caches a d_latent latent and a shared d_rope RoPE key",
    .settings = mla_settings,
    .init = mla_init,
    .fini = free,
    .train = &mla_train,
    .decode = &mla_decode_table,
    .pictures = &mla_pictures,
};
