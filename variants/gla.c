/*
 * gla.c - grouped latent attention (Zadouri, Strauss, Dao 2025, "Hardware-
 * Efficient Attention for Fast Decoding", arXiv 2505.21487, §3.2).
 *
 * MLA (mla.c) with its latent split into h_c latent heads: the query heads
 * fall into h_c contiguous groups of H/h_c, and the heads of group g expand
 * their keys and values from latent head g alone. Position enters, as in
 * MLA, through one decoupled RoPE key k_r shared by all heads. The cache
 * holds the h_c latents and k_r: h_c*d_latent + d_rope floats per token per
 * layer. With h_c = 1 it is MLA, tensor for tensor and bit for bit: mla.c
 * is this file's tables with one latent head (gla_internal.h).
 *
 *   latents   c_g = rmsnorm_g(wdkv_g . x) [d_latent], g = 0..h_c-1, each
 *             latent head with its own norm weights (the reference code's
 *             kv_norm_1, kv_norm_2), stored as one kv_norm [h_c*d_latent]
 *   queries   q = wq . x   or, compressed, c_q = rmsnorm(wdq . x),
 *             q_r = rope(wqr . x)           q = wuq . c_q, q_r = rope(wqr . c_q)
 *   keys      k_h = [wuk_h . c_g(h), k_r]   values v_h = wuv_h . c_g(h)
 *   score     (q_h . k_c,h + q_r,h . k_r) / sqrt(d_head + d_rope)
 *   g(h) = h / (H / h_c)
 *
 * The scale is the reference code's (flash attention's default over the
 * d_head + d_rope query width), as MLA's. The reference always compresses
 * the query (GLA-2) and gives its projections biases; like attnlab's MLA,
 * query compression is the optional d_q_latent and there are no biases.
 * Initialisation is the reference code's normal(0, 0.02), norm weights 1,
 * with wo scaled down by depth as every attnlab output projection is.
 *
 * Decoding absorbs the up-projections as MLA does: q_h . (wuk_h c_g) =
 * (wuk_h^T q_h) . c_g and sum_t p_t wuv_h c_g,t = wuv_h (sum_t p_t c_g,t).
 * The shared decode kernel wants a group's key contiguous in the row, and
 * [c_g | k_r] is not for g < h_c - 1, so each head's absorbed query spans
 * the whole row [c_0 .. c_{h_c-1} | k_r] with zeros outside its own latent
 * head: the score is exactly q_g . c_g + q_r . k_r, the rows are read once
 * for all heads, and the multiply-adds grow h_c-fold (the paper's point is
 * a GPU kernel's arithmetic intensity; here clarity wins).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attnlab/attnlab_variant.h>
#include <attnlab/al_flash.h>
#include <attnlab/al_kvcache.h>
#include <attnlab/al_parallel.h>
#include "gla_internal.h"

/* n_latent_head comes after d_latent and d_rope: init names the first
 * bad key in this order, so each setting is judged with the ones before it
 * given (the tests' tiny configurations fill required keys in order). */
enum { SET_D_LATENT, SET_D_ROPE, SET_N_LATENT_HEAD, SET_D_Q_LATENT, N_SETTINGS };

static const al_setting gla_settings[] = {
    {"d_latent", AL_SET_INT, 0, 1, "width d_c of each latent head (GLA-2: 2 * d_head)"},
    {"d_rope", AL_SET_INT, 0, 1, "decoupled RoPE key width d_h^R (even), shared by all heads"},
    {"n_latent_head", AL_SET_INT, 0, 1, "latent heads h_c (divides n_head); 1 = MLA"},
    {"d_q_latent", AL_SET_INT, 0, 0, "query latent width d_c'; 0 = no query compression"},
    {NULL, 0, 0, 0, NULL},
};
AL_SETTINGS_MATCH(gla_settings, N_SETTINGS);

/* Dimensions, read once per call: dc per latent head, L = hc*dc all of
 * them, Hg query heads per latent head. */
typedef struct dims {
    int D, H, dh, dr, dc, hc, dq, BT, dqk, L, Hg;
} dims;

/* A layer's context: its shape and dimensions (BT 1), made once by init. */
typedef struct gla_ctx {
    al_attn_shape s;
    dims d;
} gla_ctx;

static dims get_dims(const void *ctx, int B, int T)
{
    dims d = ((const gla_ctx *)ctx)->d;
    d.BT = B * T;
    return d;
}

/* The attention every head runs, for the shape's training kernel
 * (al_flash.h): per-head [content | rope] queries and keys, G = H. */
static al_attn_problem problem(const void *ctx, int B, int T)
{
    const al_attn_shape *s = &((const gla_ctx *)ctx)->s;
    dims d = get_dims(ctx, B, T);
    return (al_attn_problem){B, T, d.H, d.H, d.dqk, d.dh, 1.0f / sqrtf((float)d.dqk),
                             s->causal, 0, 0};
}

void *al_gla_new(const al_attn_shape *s, int dc, int dr, int hc, int dq, char *err, size_t n)
{
    if (dc < 1) return snprintf(err, n, "'d_latent' (%d) must be positive", dc), NULL;
    if (dr < 2 || dr % 2)
        return snprintf(err, n, "'d_rope' (%d) must be even and positive for RoPE", dr), NULL;
    if (hc < 1) return snprintf(err, n, "'n_latent_head' (%d) must be positive", hc), NULL;
    if (s->n_head % hc)
        return snprintf(err, n, "'n_latent_head' (%d) must divide 'n_head' (%d)", hc,
                        s->n_head), NULL;
    if (dq < 0)
        return snprintf(err, n, "'d_q_latent' (%d) must be 0 (no query compression) or positive",
                        dq), NULL;
    dims d = {s->d_model, s->n_head, s->d_head, dr, dc, hc, dq, 1, s->d_head + dr, hc * dc,
              s->n_head / hc};
    gla_ctx *c = malloc(sizeof *c);
    if (c) *c = (gla_ctx){*s, d};
    return c;
}

static void *gla_init(const al_variant *v, const al_attn_shape *s, char *err, size_t n)
{
    return al_gla_new(s, al_set_int(s, SET_D_LATENT), al_set_int(s, SET_D_ROPE),
                      al_set_int(s, SET_N_LATENT_HEAD), al_set_int(s, SET_D_Q_LATENT), err, n);
}

/* MLA's tensors under MLA's names; wdkv and kv_norm hold the h_c latent
 * heads one after another, and row block g of wuk, wuv (the heads of group
 * g) reads latent head g. */
static int gla_params(const void *ctx, al_param_spec *o)
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
    o[k++] = (al_param_spec){"wdkv", d.L, d.D, AL_INIT_NORMAL};
    o[k++] = (al_param_spec){"kv_norm", d.L, 0, AL_INIT_ONES};
    o[k++] = (al_param_spec){"wkr", d.dr, d.D, AL_INIT_NORMAL};
    o[k++] = (al_param_spec){"wuk", Hd, d.dc, AL_INIT_NORMAL};
    o[k++] = (al_param_spec){"wuv", Hd, d.dc, AL_INIT_NORMAL};
    o[k++] = (al_param_spec){"wo", d.D, Hd, AL_INIT_RESID};
    return k;
}

/* Named views of the parameter list, whichever query form is in use. */
typedef struct gla_p {
    float *wq, *wdq, *q_norm, *wuq, *wqr, *wdkv, *kv_norm, *wkr, *wuk, *wuv, *wo;
} gla_p;

static gla_p bind(const dims *d, float *const *p)
{
    gla_p w = {0};
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

/* Row block g of wuk or wuv: the (Hg*dh, dc) up-projection of group g. */
static const float *up_block(const dims *d, const float *w, int g)
{
    return w + (size_t)g * d->Hg * d->dh * d->dc;
}

/* Saved activations of one layer:
 *   cq0, cq (BT,dq) rstdq (BT)       [query compression only]
 *   c0, c (hc,BT,dc) rstdc (hc,BT)   latents before / after their norms,
 *                                    latent head by latent head, so each
 *                                    is a plain (BT, dc) matrix
 *   kr (BT,dr)                       rope'd shared key
 *   qf, kf (BT,H,dqk)                per-head [content | rope] queries, keys
 *   v, y (BT,H*dh)                   values, attention output before wo
 *   stat (B,H,T,2)                   score rows' max and 1/sum */
typedef struct gla_a {
    float *cq0, *cq, *rstdq, *c0, *c, *rstdc, *kr, *qf, *kf, *v, *y, *stat;
} gla_a;

static gla_a carve(const dims *d, float *a)
{
    size_t BT = d->BT, Hqk = (size_t)d->H * d->dqk, Hd = (size_t)d->H * d->dh;
    gla_a m;
    m.cq0 = a; a += BT * d->dq;
    m.cq = a; a += BT * d->dq;
    m.rstdq = a; a += d->dq ? BT : 0;
    m.c0 = a; a += BT * d->L;
    m.c = a; a += BT * d->L;
    m.rstdc = a; a += BT * d->hc;
    m.kr = a; a += BT * d->dr;
    m.qf = a; a += BT * Hqk;
    m.kf = a; a += BT * Hqk;
    m.v = a; a += BT * Hd;
    m.y = a; a += BT * Hd;
    m.stat = a;
    return m;
}

static size_t gla_act_floats(const void *ctx, int B, int T)
{
    dims d = get_dims(ctx, B, T);
    size_t BT = d.BT, Hqk = (size_t)d.H * d.dqk, Hd = (size_t)d.H * d.dh;
    al_attn_problem pr = problem(ctx, B, T);
    return BT * (2 * d.dq + (d.dq ? 1 : 0) + 2 * (size_t)d.L + d.hc + d.dr + 2 * Hqk + 2 * Hd) +
           al_attn_kernel_saved_floats(((const gla_ctx *)ctx)->s.attn_kernel, &pr);
}

/* Backward scratch: dy, dv, dcont (BT,H*dh) | dqf, dkf (BT,H*dqk) |
 * drope (BT,H*dr) | dkr (BT,dr) | dc, dc0 (hc,BT,dc) | dcq, dcq0 (BT,dq).
 * The forward pass uses less of it (the query and key staging). */
static size_t gla_scratch_floats(const void *ctx, int B, int T)
{
    dims d = get_dims(ctx, B, T);
    size_t BT = d.BT, Hqk = (size_t)d.H * d.dqk, Hd = (size_t)d.H * d.dh;
    return BT * (3 * Hd + 2 * Hqk + (size_t)d.H * d.dr + d.dr + 2 * (size_t)d.L + 2 * d.dq);
}

/* ------------------------------------------------------------ head layouts */

/* The copies between per-projection and per-head layouts, split over the
 * worker pool by token rows (al_parallel.h). mode: 0 pack, 1 unpack,
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

/* ------------------------------------------------------------ forward */

/* Queries into a.qf (content | rope per head); tmp holds (BT, H*(dh+dr)). */
static void queries_forward(const al_attn_shape *s, const dims *d, const gla_p *w,
                            gla_a *a, float *tmp, const float *x, int B, int T)
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
    al_rope_layer_forward(qr, B, T, d->H, d->dr, d->dr, d->H * d->dr, 0, s);
    pack_heads(a->qf, qn, d, 0, d->dh);
    pack_heads(a->qf, qr, d, d->dh, d->dr);
}

/* Latent head g: c_g = rmsnorm_g(wdkv_g . x), (BT, dc) each. */
static void latents_forward(const al_attn_shape *s, const dims *d, const gla_p *w, gla_a *a,
                            const float *x)
{
    size_t n = (size_t)d->BT * d->dc;
    for (int g = 0; g < d->hc; g++) {
        al_linear_forward(a->c0 + g * n, x, w->wdkv + (size_t)g * d->dc * d->D, d->BT, d->D,
                          d->dc);
        al_rmsnorm_forward(a->c + g * n, a->rstdc + (size_t)g * d->BT, a->c0 + g * n,
                           w->kv_norm + (size_t)g * d->dc, d->BT, d->dc, s->norm_eps);
    }
}

/* out (BT, H*dh) = every head's up-projection of its group's latent:
 * columns of group g = c_g . up_g^T. */
static void expand_heads(const dims *d, float *out, const float *c, const float *up)
{
    int Hd = d->H * d->dh, Gd = d->Hg * d->dh;
    for (int g = 0; g < d->hc; g++)
        al_gemm_nt(out + (size_t)g * Gd, Hd, c + (size_t)g * d->BT * d->dc, d->dc,
                   up_block(d, up, g), d->dc, d->BT, Gd, d->dc, 1.0f, 0.0f);
}

static void gla_forward(const void *ctx, float *out, float *act, float *scratch,
                        const float *x, float *const *p, int B, int T)
{
    const al_attn_shape *s = &((const gla_ctx *)ctx)->s;
    dims d = get_dims(ctx, B, T);
    gla_p w = bind(&d, p);
    gla_a a = carve(&d, act);
    queries_forward(s, &d, &w, &a, scratch, x, B, T);
    latents_forward(s, &d, &w, &a, x);
    al_linear_forward(a.kr, x, w.wkr, d.BT, d.D, d.dr);          /* k_r = rope(wkr . x) */
    al_rope_layer_forward(a.kr, B, T, 1, d.dr, d.dr, d.dr, 0, s);
    float *kc = scratch;                                         /* k_c,h = wuk_h . c_g(h) */
    expand_heads(&d, kc, a.c, w.wuk);
    pack_heads(a.kf, kc, &d, 0, d.dh);
    copy_heads(a.kf, a.kr, &d, 0, d.dr, 2);                      /* one key for all heads */
    expand_heads(&d, a.v, a.c, w.wuv);                           /* v_h = wuv_h . c_g(h) */
    al_attn_problem pr = problem(ctx, B, T);
    al_attn_kernel_forward(s->attn_kernel, a.y, a.stat, a.qf, a.kf, a.v, &pr);
    al_linear_forward(out, a.y, w.wo, d.BT, d.H * d.dh, d.D);    /* out = wo . y */
}

/* ------------------------------------------------------------ backward */

typedef struct gla_g {
    float *dy, *dv, *dcont, *dqf, *dkf, *drope, *dkr, *dc, *dc0, *dcq, *dcq0;
} gla_g;

static gla_g carve_grads(const dims *d, float *s)
{
    size_t BT = d->BT, Hqk = (size_t)d->H * d->dqk, Hd = (size_t)d->H * d->dh;
    gla_g g;
    g.dy = s; s += BT * Hd;
    g.dv = s; s += BT * Hd;
    g.dcont = s; s += BT * Hd;
    g.dqf = s; s += BT * Hqk;
    g.dkf = s; s += BT * Hqk;
    g.drope = s; s += BT * d->H * d->dr;
    g.dkr = s; s += BT * d->dr;
    g.dc = s; s += BT * d->L;
    g.dc0 = s; s += BT * d->L;
    g.dcq = s; s += BT * d->dq;
    g.dcq0 = s;
    return g;
}

/* Query path backward, given g->dqf: writes dx (its first contribution)
 * and the query weights' gradients. */
static void queries_backward(const al_attn_shape *s, const dims *d, const gla_p *w,
                             const gla_p *dw, const gla_a *a, gla_g *g, float *dx,
                             const float *x, int B, int T)
{
    int Hd = d->H * d->dh, Hr = d->H * d->dr;
    unpack_heads(g->dcont, g->dqf, d, 0, d->dh);
    unpack_heads(g->drope, g->dqf, d, d->dh, d->dr);
    al_rope_layer_backward(g->drope, B, T, d->H, d->dr, d->dr, Hr, 0, s);
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

/* Backward of expand_heads for one up-projection: dc_g (BT, dc) = dout_g .
 * up_g (+= when beta 1), dup_g (Hg*dh, dc) = dout_g^T . c_g (written). */
static void expand_backward(const dims *d, float *dc, float *dup, const float *dout,
                            const float *c, const float *up, float beta)
{
    int Hd = d->H * d->dh, Gd = d->Hg * d->dh;
    size_t n = (size_t)d->BT * d->dc;
    for (int g = 0; g < d->hc; g++) {
        al_gemm_nn(dc + g * n, d->dc, dout + (size_t)g * Gd, Hd, up_block(d, up, g), d->dc,
                   d->BT, d->dc, Gd, 1.0f, beta);
        al_gemm_tn(dup + (size_t)g * Gd * d->dc, d->dc, dout + (size_t)g * Gd, Hd, c + g * n,
                   d->dc, Gd, d->dc, d->BT, 1.0f, 0.0f);
    }
}

/* Given g->dcont (the keys' content part) and g->dv: the latents' share of
 * dx (added) and the gradients of wuk, wuv, kv_norm and wdkv (written). */
static void latents_backward(const dims *d, const gla_p *w, const gla_p *dw, const gla_a *a,
                             gla_g *g, float *dx, const float *x)
{
    size_t n = (size_t)d->BT * d->dc;
    expand_backward(d, g->dc, dw->wuk, g->dcont, a->c, w->wuk, 0.0f);
    expand_backward(d, g->dc, dw->wuv, g->dv, a->c, w->wuv, 1.0f);
    for (int l = 0; l < d->hc; l++) {
        size_t o = (size_t)l * d->dc;
        al_rmsnorm_backward_beta(g->dc0 + l * n, dw->kv_norm + o, g->dc + l * n, a->c0 + l * n,
                                 w->kv_norm + o, a->rstdc + (size_t)l * d->BT, d->BT, d->dc,
                                 0.0f, 0.0f);
        al_linear_backward_beta(dx, dw->wdkv + o * d->D, g->dc0 + l * n, x,
                                w->wdkv + o * d->D, d->BT, d->D, d->dc, 1.0f, 0.0f);
    }
}

static void gla_backward(const void *ctx, float *dx, float *const *dp, float *scratch,
                         const float *dout, const float *x, const float *act, float *const *p,
                         int B, int T)
{
    const al_attn_shape *s = &((const gla_ctx *)ctx)->s;
    dims d = get_dims(ctx, B, T);
    gla_p w = bind(&d, p), dw = bind(&d, dp);
    gla_a a = carve(&d, (float *)act);
    gla_g g = carve_grads(&d, scratch);
    int Hd = d.H * d.dh;
    /* Every output is written (AL_VARIANT_WRITES_GRADS): beta 0 on its
     * first product. out = y . wo^T: dy = dout . wo; attention writes dqf,
     * dkf, dv */
    al_linear_backward_beta(g.dy, dw.wo, dout, a.y, w.wo, d.BT, Hd, d.D, 0.0f, 0.0f);
    al_attn_problem pr = problem(ctx, B, T);
    al_attn_kernel_backward(s->attn_kernel, g.dqf, g.dkf, g.dv, g.dy, a.y, a.stat, a.qf, a.kf,
                            a.v, &pr);
    queries_backward(s, &d, &w, &dw, &a, &g, dx, x, B, T);
    unpack_heads(g.dcont, g.dkf, &d, 0, d.dh);
    latents_backward(&d, &w, &dw, &a, &g, dx, x);
    /* k_r = rope(wkr . x), shared by all heads: its gradient sums theirs */
    copy_heads(g.dkr, g.dkf, &d, 0, d.dr, 3);
    al_rope_layer_backward(g.dkr, B, T, 1, d.dr, d.dr, d.dr, 0, s);
    al_linear_backward_beta(dx, dw.wkr, g.dkr, x, w.wkr, d.BT, d.D, d.dr, 1.0f, 0.0f);
}

static size_t gla_kv_elems(const void *ctx)
{
    dims d = get_dims(ctx, 1, 1);
    return (size_t)d.L + d.dr;
}

/* Each head's probabilities after forward() on one sequence, rebuilt from
 * the saved per-head [content | rope] queries and keys and the row
 * statistics by the kernel backward uses. */
static void gla_probs(const void *ctx, float *P, const float *act, const float *src,
                      float *const *p, int T)
{
    const al_attn_shape *s = &((const gla_ctx *)ctx)->s;
    dims d = get_dims(ctx, 1, T);
    gla_a a = carve(&d, (float *)act);
    al_attn_problem pr = problem(ctx, 1, T);
    al_attn_kernel_probs(s->attn_kernel, P, a.stat, a.qf, a.kf, &pr);
    (void)p;
}

/* ------------------------------------------------------------ decode */

/* Cache row of a token: c_0 .. c_{hc-1} [dc each] (after their norms),
 * then k_r [dr] (RoPE'd). */
static void gla_prefill(const void *ctx, al_kv_cache *cache, const float *act,
                        float *const *p, int T)
{
    dims d = get_dims(ctx, 1, T);
    gla_a a = carve(&d, (float *)act);
    for (int t = 0; t < T; t++) {
        for (int g = 0; g < d.hc; g++)
            al_kv_put(cache, t, g * d.dc, d.dc, a.c + ((size_t)g * T + t) * d.dc);
        al_kv_put(cache, t, d.L, d.dr, a.kr + (size_t)t * d.dr);
    }
    (void)p;
}

/* What both decode paths compute for the new token, carved from scratch:
 * content queries qn (H*dh), rope queries qr (H*dr), the query latent
 * cq0, cq (dq), the cache row [c_0 .. c_{hc-1} | k_r] (L+dr) and the
 * latents before their norms c0 (L). */
typedef struct gla_step {
    float *qn, *qr, *cq0, *cq, *row, *c0, *end;
} gla_step;

static gla_step carve_step(const dims *d, float *s)
{
    gla_step st;
    st.qn = s; s += d->H * d->dh;
    st.qr = s; s += d->H * d->dr;
    st.cq0 = s; s += d->dq;
    st.cq = s; s += d->dq;
    st.row = s; s += d->L + d->dr;
    st.c0 = s; s += d->L;
    st.end = s;
    return st;
}

static size_t step_floats(const dims *d)
{
    return (size_t)d->H * (d->dh + d->dr) + 2 * d->dq + 2 * (size_t)d->L + d->dr;
}

/* row (n, L) <- rmsnorm_g of each latent head of c0 (n, L). */
static void norm_latents(const al_attn_shape *s, const dims *d, const gla_p *w, float *row,
                         int ldr, const float *c0, int n)
{
    for (int b = 0; b < n; b++)
        for (int g = 0; g < d->hc; g++)
            al_rmsnorm_forward(row + (size_t)b * ldr + (size_t)g * d->dc, NULL,
                               c0 + (size_t)b * d->L + (size_t)g * d->dc,
                               w->kv_norm + (size_t)g * d->dc, 1, d->dc, s->norm_eps);
}

/* The token's queries, and its cache row written at pos. */
static void step_forward(const al_attn_shape *s, const dims *d, const gla_p *w, gla_step *st,
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
    al_rope_layer_forward(st->qr, 1, 1, d->H, d->dr, d->dr, Hr, pos, s);
    al_linear_row(st->c0, x, w->wdkv, d->D, d->L);         /* c_g = rmsnorm_g(wdkv_g . x) */
    norm_latents(s, d, w, st->row, d->L + d->dr, st->c0, 1);
    al_linear_row(st->row + d->L, x, w->wkr, d->D, d->dr); /* k_r = rope(wkr . x) */
    al_rope_layer_forward(st->row + d->L, 1, 1, 1, d->dr, d->dr, d->dr, pos, s);
    al_kv_row_put(cache, pos, st->row);
}

/* step | absorbed queries qa (H, L+dr) | latent outputs o (H, L) |
 * y (H*dh) | al_kv_attend's S | tile */
static size_t gla_decode_scratch_floats(const void *ctx, int context)
{
    dims d = get_dims(ctx, 1, 1);
    size_t row = (size_t)d.L + d.dr;
    (void)context;
    return step_floats(&d) + (size_t)d.H * (row + d.L + d.dh) + AL_KV_ATTEND_S(d.H) +
           (size_t)AL_KV_TILE * row;
}

static void gla_decode(const void *ctx, float *out, float *scratch, const float *x,
                       float *const *p, al_kv_cache *cache, int pos)
{
    const al_attn_shape *s = &((const gla_ctx *)ctx)->s;
    dims d = get_dims(ctx, 1, 1);
    gla_p w = bind(&d, p);
    gla_step st = carve_step(&d, scratch);
    int row = d.L + d.dr;
    float *qa = st.end, *o = qa + (size_t)d.H * row, *y = o + (size_t)d.H * d.L;
    float *S = y + (size_t)d.H * d.dh, *tile = S + AL_KV_ATTEND_S(d.H);
    step_forward(s, &d, &w, &st, x, cache, pos);
    memset(qa, 0, (size_t)d.H * row * sizeof(float));
    for (int h = 0; h < d.H; h++) {
        /* qa_h = [0 .. wuk_h^T q_h (at latent head g) .. 0 | q_r,h] */
        int g = h / d.Hg;
        al_gemv_t(qa + (size_t)h * row + (size_t)g * d.dc, w.wuk + (size_t)h * d.dh * d.dc,
                  d.dc, st.qn + (size_t)h * d.dh, d.dh, d.dc, 1.0f, 0.0f);
        memcpy(qa + (size_t)h * row + d.L, st.qr + (size_t)h * d.dr, d.dr * sizeof(float));
    }
    /* o_h = sum_t p_h,t [c_0 .. c_{hc-1}]_t: every head reads the whole row */
    al_kv_attend(o, S, tile, qa, cache, pos + 1, d.H, 1, row, d.L, 0, 0,
                 1.0f / sqrtf((float)d.dqk));
    for (int h = 0; h < d.H; h++)   /* y_h = wuv_h . o_h's latent head g(h) */
        al_gemv_n(y + (size_t)h * d.dh, w.wuv + (size_t)h * d.dh * d.dc, d.dc,
                  o + (size_t)h * d.L + (size_t)(h / d.Hg) * d.dc, d.dh, d.dc, 1.0f, 0.0f);
    al_linear_row(out, y, w.wo, d.H * d.dh, d.D);      /* out = wo . y */
}

/* ---- batched decode: gla_decode for B sequences, each projection and
 * each head's absorption a product over the B tokens. */

/* Buffers of a batched step, carved from scratch: the query latents
 * cq0, cq (B, dq), content and rope queries qn (B, H*dh), qr (B, H*dr),
 * the latents c0, c (B, L) and rope key kr (B, dr) of the new rows, the
 * absorbed queries qa (B, H, L+dr), latent outputs o (B, H, L) and
 * y (B, H*dh). Attention's own scratch is the pool's. */
typedef struct gla_batch {
    float *cq0, *cq, *qn, *qr, *c0, *c, *kr, *qa, *o, *y, *tmp;
} gla_batch;

/* The widest output of a batched step's projections (al_linear_forward_few's tmp). */
static int batch_wide(const dims *d)
{
    int w = d->D, c[] = {d->H * d->dh, d->H * d->dr, d->L, d->dq};
    for (int i = 0; i < 4; i++) w = c[i] > w ? c[i] : w;
    return w;
}

static gla_batch carve_batch(const dims *d, float *s, int B)
{
    size_t b = B, row = (size_t)d->L + d->dr;
    gla_batch m;
    m.cq0 = s; s += b * d->dq;
    m.cq = s; s += b * d->dq;
    m.qn = s; s += b * d->H * d->dh;
    m.qr = s; s += b * d->H * d->dr;
    m.c0 = s; s += b * d->L;
    m.c = s; s += b * d->L;
    m.kr = s; s += b * d->dr;
    m.qa = s; s += b * d->H * row;
    m.o = s; s += b * d->H * d->L;
    m.y = s; s += b * d->H * d->dh;
    m.tmp = s;
    return m;
}

static size_t gla_decode_batch_scratch_floats(const void *ctx, int context, int B)
{
    dims d = get_dims(ctx, 1, 1);
    size_t row = (size_t)d.L + d.dr;
    (void)context;
    return (size_t)B * (2 * (size_t)d.dq + (size_t)d.H * (2 * d.dh + d.dr + row + d.L) +
                        2 * (size_t)d.L + d.dr + batch_wide(&d));
}

/* The B tokens' queries, and their cache rows written at pos[b]. */
static void batch_forward(const al_attn_shape *s, const dims *d, const gla_p *w, gla_batch *m,
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
    al_linear_forward_few(m->c0, m->tmp, x, w->wdkv, B, d->D, d->L);   /* c_g = rmsnorm_g(..) */
    norm_latents(s, d, w, m->c, d->L, m->c0, B);
    al_linear_forward_few(m->kr, m->tmp, x, w->wkr, B, d->D, d->dr);   /* k_r = rope(wkr . x) */
    for (int b = 0; b < B; b++) {
        al_rope_layer_forward(m->qr + (size_t)b * Hr, 1, 1, d->H, d->dr, d->dr, Hr, pos[b], s);
        al_rope_layer_forward(m->kr + (size_t)b * d->dr, 1, 1, 1, d->dr, d->dr, d->dr, pos[b], s);
        al_kv_put(caches[b], pos[b], 0, d->L, m->c + (size_t)b * d->L);
        al_kv_put(caches[b], pos[b], d->L, d->dr, m->kr + (size_t)b * d->dr);
    }
}

static void gla_decode_batch(const void *ctx, float *out, float *scratch, const float *x,
                             float *const *p, al_kv_cache *const *caches, const int *pos, int B)
{
    const al_attn_shape *s = &((const gla_ctx *)ctx)->s;
    dims d = get_dims(ctx, 1, 1);
    gla_p w = bind(&d, p);
    gla_batch m = carve_batch(&d, scratch, B);
    int row = d.L + d.dr, Hd = d.H * d.dh, Hr = d.H * d.dr, Hrow = d.H * row;
    batch_forward(s, &d, &w, &m, x, caches, pos, B);
    memset(m.qa, 0, (size_t)B * Hrow * sizeof(float));
    for (int h = 0; h < d.H; h++) {
        /* qa[:, h] = [0 .. q_h . wuk_h (at latent head g) .. 0 | q_r,h] */
        size_t at = (size_t)h * row + (size_t)(h / d.Hg) * d.dc;
        al_gemm_nn(m.qa + at, Hrow, m.qn + (size_t)h * d.dh, Hd,
                   w.wuk + (size_t)h * d.dh * d.dc, d.dc, B, d.dc, d.dh, 1.0f, 0.0f);
        for (int b = 0; b < B; b++)
            memcpy(m.qa + (size_t)b * Hrow + (size_t)h * row + d.L,
                   m.qr + (size_t)b * Hr + (size_t)h * d.dr, d.dr * sizeof(float));
    }
    al_kv_attend_batch(m.o, m.qa, caches, pos, B, d.H, 1, row, d.L, 0, 0,
                       1.0f / sqrtf((float)d.dqk));
    for (int h = 0; h < d.H; h++)   /* y[:, h] = o[:, h, g(h)] . wuv_h^T */
        al_gemm_nt(m.y + (size_t)h * d.dh, Hd,
                   m.o + (size_t)h * d.L + (size_t)(h / d.Hg) * d.dc, d.H * d.L,
                   w.wuv + (size_t)h * d.dh * d.dc, d.dc, B, d.dh, d.dc, 1.0f, 0.0f);
    al_linear_forward_few(out, m.tmp, m.y, w.wo, B, Hd, d.D);   /* out = wo . y */
}

/* ------------------------------------------------------------ tables */

/* ------------------------------------------------------------ costs */

/* FLOPs per token of the projections every path runs: the queries (with
 * query compression: wdq, then wuq and wqr from the query latent), the
 * latents wdkv, the RoPE key wkr and wo. */
static double proj_flops(const dims *d)
{
    double D = d->D, Hd = (double)d->H * d->dh, Hr = (double)d->H * d->dr;
    double q = d->dq ? 2 * D * d->dq + 2.0 * d->dq * (Hd + Hr) : 2 * D * (Hd + Hr);
    return q + 2 * D * d->L + 2 * D * d->dr + 2 * Hd * D;
}

/* Training expands K and V from the latents (2*Hd*dc each per token) and
 * attends over d_head + d_rope wide keys; backward doubles every product
 * (dx and dw, dc and dup). */
static double gla_train_cost(const void *ctx, int T, int consumer)
{
    dims d = get_dims(ctx, 1, T);
    const al_attn_shape *s = &((const gla_ctx *)ctx)->s;
    double expand = 2 * 2.0 * d.H * d.dh * d.dc;
    double attn = al_attn_flops(T, d.H, d.dqk, d.dh, s->causal, 0) +
                  al_attn_flops(T, d.H, d.dqk, d.dh, s->causal, 1);
    (void)consumer;   /* gla cannot share */
    return 3 * (proj_flops(&d) + expand) + attn / T;
}

static double gla_prefill_cost(const void *ctx, int T, int consumer)
{
    dims d = get_dims(ctx, 1, T);
    const al_attn_shape *s = &((const gla_ctx *)ctx)->s;
    (void)consumer;
    return proj_flops(&d) + 2 * 2.0 * d.H * d.dh * d.dc +
           al_attn_flops(T, d.H, d.dqk, d.dh, s->causal, 0) / T;
}

/* Absorbed decode: wuk_h^T q_h and wuv_h o_h per head (2*dh*dc each),
 * and every head over whole rows [c_0 .. c_{hc-1} | k_r] as keys and the
 * latents as values (the other latent heads' zeros are multiplied too). */
static double gla_decode_cost(const void *ctx, int context, int consumer)
{
    dims d = get_dims(ctx, 1, 1);
    double absorb = 2 * 2.0 * d.H * d.dh * d.dc;
    (void)consumer;
    return proj_flops(&d) + absorb + 2.0 * context * d.H * ((double)d.L + d.dr + d.L);
}

const al_variant_costs al_gla_costs = {gla_train_cost, gla_prefill_cost, gla_decode_cost,
                                      NULL};

const al_variant_train al_gla_train = {gla_params, gla_act_floats, gla_scratch_floats,
                                           gla_forward, gla_backward, AL_VARIANT_WRITES_GRADS};
const al_variant_decode al_gla_decode_table = {
    .storage = AL_KV_ROWS,
    .kv_elems = gla_kv_elems,
    .prefill = gla_prefill,
    .scratch_floats = gla_decode_scratch_floats,
    .decode = gla_decode,
    .batch_scratch_floats = gla_decode_batch_scratch_floats,
    .decode_batch = gla_decode_batch,
};
const al_variant_pictures al_gla_pictures = {.probs = gla_probs, .shared = 0};

const al_variant al_variant_gla = {
    .api_version = AL_VARIANT_API_VERSION,
    .name = "gla",
    .description = "grouped latent attention (Zadouri et al. 2025): MLA with n_latent_head "
                   "latent heads, caches n_latent_head*d_latent + d_rope",
    .settings = gla_settings,
    .init = gla_init,
    .fini = free,
    .train = &al_gla_train,
    .decode = &al_gla_decode_table,
    .pictures = &al_gla_pictures,
    .costs = &al_gla_costs,
};
