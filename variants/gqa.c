/*
 * gqa.c - grouped-query attention (Ainslie et al. 2023), and the shared
 * implementation of the GQA family: mha (G = H), mqa (G = 1) and local (a
 * band, and a ring for its cache) reuse it (gqa_family.h).
 *
 * Query head h reads K/V group h / (H / G): consecutive query heads share a
 * group. Setting: n_kv_head (G), which must divide n_head.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attnlab/attnlab_variant.h>
#include <attnlab/al_flash.h>
#include <attnlab/al_kvcache.h>

#include "gqa_family.h"

void *al_gqa_new(const al_attn_shape *s, int G, al_gqa_band band)
{
    al_gqa_ctx *c = malloc(sizeof *c);
    if (!c) return NULL;
    *c = (al_gqa_ctx){*s, G, band};
    return c;
}

/* ------------------------------------------------------------ shared core */

static int gqa_params(const void *ctx, al_param_spec *out)
{
    const al_gqa_ctx *c = ctx;
    int D = c->s.d_model, Hd = c->s.n_head * c->s.d_head, Gd = c->G * c->s.d_head;
    out[0] = (al_param_spec){"wq", Hd, D, AL_INIT_NORMAL};
    out[1] = (al_param_spec){"wk", Gd, D, AL_INIT_NORMAL};
    out[2] = (al_param_spec){"wv", Gd, D, AL_INIT_NORMAL};
    out[3] = (al_param_spec){"wo", D, Hd, AL_INIT_RESID};
    return 4;
}

/* The attention problem of a (B, T) batch: the group count, local's band. */
static al_attn_problem problem(const al_gqa_ctx *c, int B, int T)
{
    int dh = c->s.d_head;
    return (al_attn_problem){B, T, c->s.n_head, c->G, dh, dh, 1.0f / sqrtf((float)dh),
                             c->s.causal, c->band.window, c->band.sinks};
}

/* What the training kernel saves (al_flash.h): lse (B,H,T) fused, the
 * probabilities (B,H,T,T) dense. */
static size_t saved_floats(const al_gqa_ctx *c, int B, int T)
{
    al_attn_problem p = problem(c, B, T);
    return al_attn_kernel_saved_floats(c->s.attn_kernel, &p);
}

/* Saved activations: q (BT,H*dh) | k (BT,G*dh) | v (BT,G*dh) | y (BT,H*dh) |
 * stat: the kernel's (saved_floats), from which backward gets the
 * probabilities (fused rebuilds them tile by tile, dense keeps them). */
static size_t gqa_act_floats(const void *ctx, int B, int T)
{
    const al_gqa_ctx *c = ctx;
    size_t BT = (size_t)B * T, Hd = (size_t)c->s.n_head * c->s.d_head;
    size_t Gd = (size_t)c->G * c->s.d_head;
    return BT * (2 * Hd + 2 * Gd) + saved_floats(c, B, T);
}

/* Backward scratch: dy, dq (BT,H*dh) | dk, dv (BT,G*dh) */
static size_t gqa_scratch_floats(const void *ctx, int B, int T)
{
    const al_gqa_ctx *c = ctx;
    size_t BT = (size_t)B * T, Hd = (size_t)c->s.n_head * c->s.d_head;
    size_t Gd = (size_t)c->G * c->s.d_head;
    return BT * (2 * Hd + 2 * Gd);
}

size_t al_gqa_kv_elems(const void *ctx)
{
    const al_gqa_ctx *c = ctx;
    return 2 * (size_t)c->G * c->s.d_head;
}

/* a row is [K | V], the halves of equal size */
size_t al_gqa_kv_key_elems(const void *ctx) { return al_gqa_kv_elems(ctx) / 2; }

typedef struct gqa_acts {
    float *q, *k, *v, *y, *stat;
} gqa_acts;

static gqa_acts carve(const al_gqa_ctx *c, float *act, int B, int T)
{
    size_t BT = (size_t)B * T, Hd = (size_t)c->s.n_head * c->s.d_head;
    size_t Gd = (size_t)c->G * c->s.d_head;
    gqa_acts a;
    a.q = act;
    a.k = a.q + BT * Hd;
    a.v = a.k + BT * Gd;
    a.y = a.v + BT * Gd;
    a.stat = a.y + BT * Hd;
    return a;
}

/* Attention of the saved q over k, v (the full block, or local's band)
 * by the shape's kernel. */
static void attend(const al_gqa_ctx *c, float *y, float *stat, const float *q, const float *k,
                   const float *v, int B, int T)
{
    al_attn_problem p = problem(c, B, T);
    al_attn_kernel_forward(c->s.attn_kernel, y, stat, q, k, v, &p);
}

/* Its backward (y: the forward's output): OVERWRITES dq, dk, dv. */
static void attend_back(const al_gqa_ctx *c, float *dq, float *dk, float *dv, const float *dy,
                        const float *y, const float *stat, const float *q, const float *k,
                        const float *v, int B, int T)
{
    al_attn_problem p = problem(c, B, T);
    al_attn_kernel_backward(c->s.attn_kernel, dq, dk, dv, dy, y, stat, q, k, v, &p);
}

static void gqa_forward(const void *ctx, float *out, float *act, float *scratch, const float *x,
                        float *const *p, int B, int T)
{
    const al_gqa_ctx *c = ctx;
    int D = c->s.d_model, H = c->s.n_head, G = c->G, dh = c->s.d_head, BT = B * T;
    gqa_acts a = carve(c, act, B, T);
    al_linear_forward(a.q, x, p[0], BT, D, H * dh);   /* q = x . wq^T */
    al_linear_forward(a.k, x, p[1], BT, D, G * dh);   /* k = x . wk^T */
    al_linear_forward(a.v, x, p[2], BT, D, G * dh);   /* v = x . wv^T */
    al_rope_layer_forward(a.q, B, T, H, dh, dh, H * dh, 0, &c->s);
    al_rope_layer_forward(a.k, B, T, G, dh, dh, G * dh, 0, &c->s);
    attend(c, a.y, a.stat, a.q, a.k, a.v, B, T);
    al_linear_forward(out, a.y, p[3], BT, H * dh, D); /* out = y . wo^T */
}

/* backward, plus dkv (dk (BT,G*dh) | dv (BT,G*dh), the consumers' summed
 * K/V gradient, or NULL) added to this layer's dk, dv before their
 * projections: k and v feed the consumers as well as this layer. */
static void backward_kv(const al_gqa_ctx *c, float *dx, float *const *dp, const float *dkv,
                        float *scratch, const float *dout, const float *x, const float *act,
                        float *const *p, int B, int T)
{
    int D = c->s.d_model, H = c->s.n_head, G = c->G, dh = c->s.d_head, BT = B * T;
    size_t nH = (size_t)BT * H * dh, nG = (size_t)BT * G * dh;
    gqa_acts a = carve(c, (float *)act, B, T);
    float *dy = scratch, *dq = dy + nH, *dk = dq + nH, *dv = dk + nG;
    /* Every output is written (AL_VARIANT_WRITES_GRADS): beta 0 on its
     * first product. out = y . wo^T: dy (BT, H*dh) = dout . wo */
    al_linear_backward_beta(dy, dp[3], dout, a.y, p[3], BT, H * dh, D, 0.0f, 0.0f);
    attend_back(c, dq, dk, dv, dy, a.y, a.stat, a.q, a.k, a.v, B, T);   /* writes */
    if (dkv)
        for (size_t i = 0; i < 2 * nG; i++) dk[i] += dkv[i];   /* dk, dv adjoin */
    /* q = rope(q0), k = rope(k0): rotate the gradients back */
    al_rope_layer_backward(dq, B, T, H, dh, dh, H * dh, 0, &c->s);
    al_rope_layer_backward(dk, B, T, G, dh, dh, G * dh, 0, &c->s);
    al_linear_backward_beta(dx, dp[0], dq, x, p[0], BT, D, H * dh, 0.0f, 0.0f);
    al_linear_backward_beta(dx, dp[1], dk, x, p[1], BT, D, G * dh, 1.0f, 0.0f);
    al_linear_backward_beta(dx, dp[2], dv, x, p[2], BT, D, G * dh, 1.0f, 0.0f);
}

static void gqa_backward(const void *ctx, float *dx, float *const *dp, float *scratch,
                         const float *dout, const float *x, const float *act, float *const *p,
                         int B, int T)
{
    backward_kv(ctx, dx, dp, NULL, scratch, dout, x, act, p, B, T);
}

/* ------------------------------------------------------------ decode */

/* The row of position pos, and the rows filled once it is written: one
 * per token, or local's ring of its sinks and window (al_kvcache.h). */
static int row_of(const al_gqa_ctx *c, int pos)
{
    return c->band.window > 0 ? al_kv_ring_row(pos, c->band.window, c->band.sinks) : pos;
}
static int rows_filled(const al_gqa_ctx *c, int pos)
{
    return c->band.window > 0 ? al_kv_ring_len(pos, c->band.window, c->band.sinks) : pos + 1;
}

/* Cache row of a token: its G RoPE'd keys (G*dh), then its G values (G*dh),
 * exactly the k and v rows forward() saved, at the row of its position.
 * Positions a ring has moved past by T are not written: a later one takes
 * their row. */
void al_gqa_prefill(const void *ctx, al_kv_cache *cache, const float *act, float *const *p,
                    int T)
{
    const al_gqa_ctx *c = ctx;
    gqa_acts a = carve(c, (float *)act, 1, T);
    int Gd = c->G * c->s.d_head, w = c->band.window, k = c->band.sinks;
    for (int t = 0; t < T; t++) {
        if (w > 0 && t >= k && t < T - w) continue;   /* overwritten before T */
        al_kv_put(cache, row_of(c, t), 0, Gd, a.k + (size_t)t * Gd);
        al_kv_put(cache, row_of(c, t), Gd, Gd, a.v + (size_t)t * Gd);
    }
}

/* q, y (H*dh) | the new row k, v (2*G*dh) | al_kv_attend's S | tile.
 * Independent of the context: attention reads the cache block by block. */
size_t al_gqa_decode_scratch_floats(const void *ctx, int context)
{
    const al_gqa_ctx *c = ctx;
    size_t Hd = (size_t)c->s.n_head * c->s.d_head, row = al_gqa_kv_elems(ctx);
    return 2 * Hd + row + AL_KV_ATTEND_S(c->s.n_head) + (size_t)AL_KV_TILE * row;
}

void al_gqa_decode(const void *ctx, float *out, float *scratch, const float *x,
                   float *const *p, al_kv_cache *cache, int pos)
{
    const al_gqa_ctx *c = ctx;
    int D = c->s.d_model, H = c->s.n_head, G = c->G, dh = c->s.d_head, Gd = G * dh;
    float *q = scratch, *y = q + H * dh, *kv = y + H * dh, *S = kv + 2 * Gd;
    float *tile = S + AL_KV_ATTEND_S(H);
    al_linear_row(q, x, p[0], D, H * dh);     /* q = x . wq^T */
    al_linear_row(kv, x, p[1], D, Gd);        /* k = x . wk^T */
    al_linear_row(kv + Gd, x, p[2], D, Gd);   /* v = x . wv^T */
    al_rope_layer_forward(q, 1, 1, H, dh, dh, H * dh, pos, &c->s);
    al_rope_layer_forward(kv, 1, 1, G, dh, dh, Gd, pos, &c->s);
    al_kv_row_put(cache, row_of(c, pos), kv);
    al_kv_attend(y, S, tile, q, cache, rows_filled(c, pos), H, G, dh, dh, 0, Gd,
                 1.0f / sqrtf((float)dh));
    al_linear_row(out, y, p[3], H * dh, D);   /* out = y . wo^T */
}

/* q, y (B, H*dh) | k, v (B, G*dh) | the products' tmp (B, max(H*dh, D)).
 * Attention's scratch is the pool's. */
size_t al_gqa_decode_batch_scratch_floats(const void *ctx, int context, int B)
{
    const al_gqa_ctx *c = ctx;
    size_t Hd = (size_t)c->s.n_head * c->s.d_head, Gd = (size_t)c->G * c->s.d_head;
    size_t wide = Hd > (size_t)c->s.d_model ? Hd : (size_t)c->s.d_model;
    (void)context;
    return (size_t)B * (2 * Hd + 2 * Gd + wide);
}

/* al_gqa_decode for B sequences: the projections are (B, D) products, and
 * al_kv_attend_batch reads each ring whole once it is full. */
void al_gqa_decode_batch(const void *ctx, float *out, float *scratch, const float *x,
                         float *const *p, al_kv_cache *const *caches, const int *pos, int B)
{
    const al_gqa_ctx *c = ctx;
    int D = c->s.d_model, H = c->s.n_head, G = c->G, dh = c->s.d_head, Hd = H * dh, Gd = G * dh;
    float *q = scratch, *y = q + (size_t)B * Hd, *k = y + (size_t)B * Hd, *v = k + (size_t)B * Gd;
    float *tmp = v + (size_t)B * Gd;
    al_linear_forward_few(q, tmp, x, p[0], B, D, Hd);   /* q = x . wq^T */
    al_linear_forward_few(k, tmp, x, p[1], B, D, Gd);   /* k = x . wk^T */
    al_linear_forward_few(v, tmp, x, p[2], B, D, Gd);   /* v = x . wv^T */
    for (int b = 0; b < B; b++) {   /* each token at its own position */
        al_rope_layer_forward(q + (size_t)b * Hd, 1, 1, H, dh, dh, Hd, pos[b], &c->s);
        al_rope_layer_forward(k + (size_t)b * Gd, 1, 1, G, dh, dh, Gd, pos[b], &c->s);
        al_kv_put(caches[b], row_of(c, pos[b]), 0, Gd, k + (size_t)b * Gd);
        al_kv_put(caches[b], row_of(c, pos[b]), Gd, Gd, v + (size_t)b * Gd);
    }
    al_kv_attend_batch(y, q, caches, pos, B, H, G, dh, dh, 0, Gd, 1.0f / sqrtf((float)dh));
    al_linear_forward_few(out, tmp, y, p[3], B, Hd, D);   /* out = y . wo^T */
}

/* ------------------------------------------------------------ sharing */

/* A consumer (model.kv_share): wq [H*dh, D] and wo [D, H*dh], no wk, wv. */
static int share_params(const void *ctx, al_param_spec *out)
{
    const al_attn_shape *s = &((const al_gqa_ctx *)ctx)->s;
    int D = s->d_model, Hd = s->n_head * s->d_head;
    out[0] = (al_param_spec){"wq", Hd, D, AL_INIT_NORMAL};
    out[1] = (al_param_spec){"wo", D, Hd, AL_INIT_RESID};
    return 2;
}

/* A consumer's saved activations: q (BT,H*dh) | y (BT,H*dh) | stat (the
 * kernel's); its k, v are the producer's (carve of src_act). */
static size_t share_act_floats(const void *ctx, int B, int T)
{
    const al_gqa_ctx *c = ctx;
    size_t BT = (size_t)B * T, Hd = (size_t)c->s.n_head * c->s.d_head;
    return BT * 2 * Hd + saved_floats(c, B, T);
}

static gqa_acts carve_share(const al_gqa_ctx *c, float *act, int B, int T)
{
    size_t BT = (size_t)B * T, Hd = (size_t)c->s.n_head * c->s.d_head;
    gqa_acts a = {act, NULL, NULL, act + BT * Hd, act + 2 * BT * Hd};
    return a;
}

/* A consumer's forward over the producer's k, v (src); without src, the
 * layer's own forward. */
static void share_forward(const void *ctx, float *out, float *act, float *scratch,
                          const float *x, float *const *p, const float *src, int B, int T)
{
    if (!src) {
        gqa_forward(ctx, out, act, scratch, x, p, B, T);
        return;
    }
    const al_gqa_ctx *c = ctx;
    int D = c->s.d_model, H = c->s.n_head, dh = c->s.d_head, BT = B * T;
    gqa_acts a = carve_share(c, act, B, T), from = carve(c, (float *)src, B, T);
    al_linear_forward(a.q, x, p[0], BT, D, H * dh);   /* q = x . wq^T */
    al_rope_layer_forward(a.q, B, T, H, dh, dh, H * dh, 0, &c->s);
    attend(c, a.y, a.stat, a.q, from.k, from.v, B, T);   /* the producer's k, v */
    al_linear_forward(out, a.y, p[1], BT, H * dh, D); /* out = y . wo^T */
}

/* A consumer (src): writes dx, dp (AL_VARIANT_WRITES_GRADS); dkv (dk | dv)
 * += this layer's gradient of the shared k, v. Scratch: dy, dq (BT,H*dh) |
 * dk, dv (BT,G*dh). A producer (src NULL): its backward, with dkv added. */
static void share_backward(const void *ctx, float *dx, float *const *dp, float *dkv,
                           float *scratch, const float *dout, const float *x, const float *act,
                           const float *src, float *const *p, int B, int T)
{
    const al_gqa_ctx *c = ctx;
    if (!src) {
        backward_kv(c, dx, dp, dkv, scratch, dout, x, act, p, B, T);
        return;
    }
    int D = c->s.d_model, H = c->s.n_head, dh = c->s.d_head, BT = B * T;
    size_t nH = (size_t)BT * H * dh, nG = (size_t)BT * c->G * dh;
    gqa_acts a = carve_share(c, (float *)act, B, T), from = carve(c, (float *)src, B, T);
    float *dy = scratch, *dq = dy + nH, *dk = dq + nH, *dv = dk + nG;
    al_linear_backward_beta(dy, dp[1], dout, a.y, p[1], BT, H * dh, D, 0.0f, 0.0f);
    attend_back(c, dq, dk, dv, dy, a.y, a.stat, a.q, from.k, from.v, B, T);
    for (size_t i = 0; i < 2 * nG; i++) dkv[i] += dk[i];   /* dk, dv adjoin */
    al_rope_layer_backward(dq, B, T, H, dh, dh, H * dh, 0, &c->s);
    al_linear_backward_beta(dx, dp[0], dq, x, p[0], BT, D, H * dh, 0.0f, 0.0f);
}

/* One token of a consumer: its query over the producer's filled rows. */
static void share_decode(const void *ctx, float *out, float *scratch, const float *x,
                         float *const *p, const al_kv_cache *cache, int pos)
{
    const al_gqa_ctx *c = ctx;
    int D = c->s.d_model, H = c->s.n_head, dh = c->s.d_head, Gd = c->G * dh;
    float *q = scratch, *y = q + H * dh, *S = y + H * dh + 2 * Gd;   /* decode's layout */
    float *tile = S + AL_KV_ATTEND_S(H);
    al_linear_row(q, x, p[0], D, H * dh);     /* q = x . wq^T */
    al_rope_layer_forward(q, 1, 1, H, dh, dh, H * dh, pos, &c->s);
    al_kv_attend(y, S, tile, q, cache, rows_filled(c, pos), H, c->G, dh, dh, 0, Gd,
                 1.0f / sqrtf((float)dh));
    al_linear_row(out, y, p[1], H * dh, D);   /* out = y . wo^T */
}

/* ------------------------------------------------------------ pictures */

/* Every query head's probabilities after forward() on one sequence:
 * rebuilt from the saved q (a consumer's own), the keys (the producer's,
 * src, for a consumer) and the row statistics by the kernel backward uses,
 * so they are the ones forward applied (zero outside a band). */
static void gqa_probs(const void *ctx, float *P, const float *act, const float *src,
                      float *const *p, int T)
{
    const al_gqa_ctx *c = ctx;
    gqa_acts a = src ? carve_share(c, (float *)act, 1, T) : carve(c, (float *)act, 1, T);
    const float *k = src ? carve(c, (float *)src, 1, T).k : a.k;
    al_attn_problem pr = problem(c, 1, T);
    al_attn_kernel_probs(c->s.attn_kernel, P, a.stat, a.q, k, &pr);
    (void)p;
}

/* ------------------------------------------------------------ costs */

/* FLOPs per token of the projections forward: q, k, v and wo (a consumer:
 * q and wo). Backward runs two products of the same size per projection
 * (dx and dw), so a training step costs three times these. */
static double proj_flops(const al_gqa_ctx *c, int consumer)
{
    double D = c->s.d_model, Hd = (double)c->s.n_head * c->s.d_head;
    double Gd = consumer ? 0 : (double)c->G * c->s.d_head;
    return 2 * D * (Hd + 2 * Gd) + 2 * Hd * D;
}

/* Training and prefill attend through al_attn_* (local's band costs the
 * full block: al_kernels.h). */
static double gqa_train_cost(const void *ctx, int T, int consumer)
{
    const al_gqa_ctx *c = ctx;
    int H = c->s.n_head, dh = c->s.d_head;
    double attn = al_attn_flops(T, H, dh, dh, c->s.causal, 0) +
                  al_attn_flops(T, H, dh, dh, c->s.causal, 1);
    return 3 * proj_flops(c, consumer) + attn / T;
}

static double gqa_prefill_cost(const void *ctx, int T, int consumer)
{
    const al_gqa_ctx *c = ctx;
    int H = c->s.n_head, dh = c->s.d_head;
    return proj_flops(c, consumer) + al_attn_flops(T, H, dh, dh, c->s.causal, 0) / T;
}

/* One token: the projections as matrix-vector products, then each head
 * over the rows filled (local: its ring), 2*dh for the score and 2*dh for
 * the value per row. */
static double gqa_decode_cost(const void *ctx, int context, int consumer)
{
    const al_gqa_ctx *c = ctx;
    double n = rows_filled(c, context - 1);
    return proj_flops(c, consumer) + 2 * n * c->s.n_head * (2.0 * c->s.d_head);
}

/* ------------------------------------------------------------ tables */

const al_variant_train al_gqa_train = {gqa_params, gqa_act_floats, gqa_scratch_floats,
                                       gqa_forward, gqa_backward, AL_VARIANT_WRITES_GRADS};
const al_variant_decode al_gqa_decode_table = {AL_GQA_DECODE_MEMBERS};
const al_variant_share al_gqa_share = {share_params, share_act_floats, share_forward,
                                       share_backward, share_decode};
const al_variant_pictures al_gqa_pictures = {.probs = gqa_probs, .shared = 1};
const al_variant_costs al_gqa_costs = {gqa_train_cost, gqa_prefill_cost, gqa_decode_cost,
                                      NULL};

/* ------------------------------------------------------------ gqa variant */

enum { SET_N_KV_HEAD, N_SETTINGS };

static const al_setting gqa_settings[] = {
    {"n_kv_head", AL_SET_INT, 0, 1, "K/V heads G; must divide n_head"},
    {NULL, 0, 0, 0, NULL},
};
AL_SETTINGS_MATCH(gqa_settings, N_SETTINGS);

static void *gqa_init(const al_variant *v, const al_attn_shape *s, char *err, size_t errlen)
{
    int G = al_set_int(s, SET_N_KV_HEAD);
    if (G < 1 || s->n_head % G != 0) {
        snprintf(err, errlen, "'n_kv_head' (%d) must divide 'n_head' (%d)", G, s->n_head);
        return NULL;
    }
    return al_gqa_new(s, G, (al_gqa_band){0, 0});
}

const al_variant al_variant_gqa = {
    .api_version = AL_VARIANT_API_VERSION,
    .name = "gqa",
    .description = "grouped-query attention: n_kv_head K/V heads shared by consecutive query heads",
    .settings = gqa_settings,
    .init = gqa_init,
    .decode = &al_gqa_decode_table,
    AL_GQA_FAMILY_TABLE,
};
