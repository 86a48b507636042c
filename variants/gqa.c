/*
 * gqa.c - grouped-query attention (Ainslie et al. 2023), and the shared
 * implementation of the GQA family: mha (G = H) and mqa (G = 1) reuse it.
 *
 * Query head h reads K/V group h / (H / G): consecutive query heads share a
 * group. Setting: n_kv_head (G), which must divide n_head.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <attnlab/attnlab_variant.h>
#include <attnlab/al_kvcache.h>

enum { SET_N_KV_HEAD };

static int family_groups(const al_attn_shape *s) { return al_set_int(s, SET_N_KV_HEAD); }

#define AL_GQA_FAMILY_MEMBERS
#include "gqa_family.h"

/* ------------------------------------------------------------ shared core */

int al_gqa_params(const al_attn_shape *s, int G, al_param_spec *out)
{
    int D = s->d_model, Hd = s->n_head * s->d_head, Gd = G * s->d_head;
    out[0] = (al_param_spec){"wq", Hd, D, AL_INIT_NORMAL};
    out[1] = (al_param_spec){"wk", Gd, D, AL_INIT_NORMAL};
    out[2] = (al_param_spec){"wv", Gd, D, AL_INIT_NORMAL};
    out[3] = (al_param_spec){"wo", D, Hd, AL_INIT_RESID};
    return 4;
}

/* Saved activations: q (BT,H*dh) | k (BT,G*dh) | v (BT,G*dh) | y (BT,H*dh) |
 * stat (B,H,T,2): each score row's max and 1/sum (al_attn_forward), from
 * which backward rebuilds the probabilities instead of keeping (B,H,T,T). */
size_t al_gqa_act_floats(const al_attn_shape *s, int G, int B, int T)
{
    size_t BT = (size_t)B * T, Hd = (size_t)s->n_head * s->d_head;
    size_t Gd = (size_t)G * s->d_head;
    return BT * (2 * Hd + 2 * Gd) + 2 * (size_t)B * s->n_head * T;
}

/* Backward scratch: dy, dq (BT,H*dh) | dk, dv (BT,G*dh) */
size_t al_gqa_scratch_floats(const al_attn_shape *s, int G, int B, int T)
{
    size_t BT = (size_t)B * T, Hd = (size_t)s->n_head * s->d_head;
    size_t Gd = (size_t)G * s->d_head;
    return BT * (2 * Hd + 2 * Gd);
}

size_t al_gqa_kv_elems(const al_attn_shape *s, int G)
{
    return 2 * (size_t)G * s->d_head;
}

typedef struct gqa_acts {
    float *q, *k, *v, *y, *stat;
} gqa_acts;

static gqa_acts carve(const al_attn_shape *s, int G, float *act, int B, int T)
{
    size_t BT = (size_t)B * T, Hd = (size_t)s->n_head * s->d_head;
    size_t Gd = (size_t)G * s->d_head;
    gqa_acts a;
    a.q = act;
    a.k = a.q + BT * Hd;
    a.v = a.k + BT * Gd;
    a.y = a.v + BT * Gd;
    a.stat = a.y + BT * Hd;
    return a;
}

void al_gqa_forward(const al_attn_shape *s, int G, float *out, float *act,
                    float *scratch, const float *x, float *const *p, int B, int T)
{
    int D = s->d_model, H = s->n_head, dh = s->d_head, BT = B * T;
    gqa_acts a = carve(s, G, act, B, T);
    al_linear_forward(a.q, x, p[0], BT, D, H * dh);   /* q = x . wq^T */
    al_linear_forward(a.k, x, p[1], BT, D, G * dh);   /* k = x . wk^T */
    al_linear_forward(a.v, x, p[2], BT, D, G * dh);   /* v = x . wv^T */
    al_rope_forward(a.q, B, T, H, dh, H * dh, 0, s->rope_base);
    al_rope_forward(a.k, B, T, G, dh, G * dh, 0, s->rope_base);
    al_attn_forward(a.y, a.stat, a.q, a.k, a.v, B, T, H, G, dh, dh,
                    1.0f / sqrtf((float)dh), s->causal);
    al_linear_forward(out, a.y, p[3], BT, H * dh, D); /* out = y . wo^T */
}

void al_gqa_backward(const al_attn_shape *s, int G, float *dx, float *const *dp,
                     float *scratch, const float *dout, const float *x,
                     const float *act, float *const *p, int B, int T)
{
    al_gqa_backward_kv(s, G, (al_gqa_band){0, 0}, dx, dp, NULL, scratch, dout, x, act, p, B, T);
}

/* Attention of the saved q over k, v: the full block (gqa) or local's band. */
static void attend(const al_attn_shape *s, int G, al_gqa_band band, float *y, float *stat,
                   const float *q, const float *k, const float *v, int B, int T)
{
    int H = s->n_head, dh = s->d_head;
    float scale = 1.0f / sqrtf((float)dh);
    if (band.window > 0)
        al_attn_forward_band(y, stat, q, k, v, B, T, H, G, dh, dh, scale, s->causal,
                             band.window, band.sinks);
    else
        al_attn_forward(y, stat, q, k, v, B, T, H, G, dh, dh, scale, s->causal);
}

/* Its backward: OVERWRITES dq, dk, dv. */
static void attend_back(const al_attn_shape *s, int G, al_gqa_band band, float *dq, float *dk,
                        float *dv, const float *dy, const float *stat, const float *q,
                        const float *k, const float *v, int B, int T)
{
    int H = s->n_head, dh = s->d_head;
    float scale = 1.0f / sqrtf((float)dh);
    if (band.window > 0)
        al_attn_backward_band(dq, dk, dv, dy, stat, q, k, v, B, T, H, G, dh, dh, scale,
                              s->causal, band.window, band.sinks);
    else
        al_attn_backward(dq, dk, dv, dy, stat, q, k, v, B, T, H, G, dh, dh, scale, s->causal);
}

/* backward, plus dkv (dk (BT,G*dh) | dv (BT,G*dh), the consumers' summed
 * K/V gradient, or NULL) added to this layer's dk, dv before their
 * projections: k and v feed the consumers as well as this layer. */
void al_gqa_backward_kv(const al_attn_shape *s, int G, al_gqa_band band, float *dx,
                        float *const *dp, const float *dkv, float *scratch, const float *dout,
                        const float *x, const float *act, float *const *p, int B, int T)
{
    int D = s->d_model, H = s->n_head, dh = s->d_head, BT = B * T;
    size_t nH = (size_t)BT * H * dh, nG = (size_t)BT * G * dh;
    gqa_acts a = carve(s, G, (float *)act, B, T);
    float *dy = scratch, *dq = dy + nH, *dk = dq + nH, *dv = dk + nG;
    /* Every output is written (AL_VARIANT_WRITES_GRADS): beta 0 on its
     * first product. out = y . wo^T: dy (BT, H*dh) = dout . wo */
    al_linear_backward_beta(dy, dp[3], dout, a.y, p[3], BT, H * dh, D, 0.0f, 0.0f);
    attend_back(s, G, band, dq, dk, dv, dy, a.stat, a.q, a.k, a.v, B, T);   /* writes */
    if (dkv)
        for (size_t i = 0; i < 2 * nG; i++) dk[i] += dkv[i];   /* dk, dv adjoin */
    /* q = rope(q0), k = rope(k0): rotate the gradients back */
    al_rope_backward(dq, B, T, H, dh, H * dh, 0, s->rope_base);
    al_rope_backward(dk, B, T, G, dh, G * dh, 0, s->rope_base);
    al_linear_backward_beta(dx, dp[0], dq, x, p[0], BT, D, H * dh, 0.0f, 0.0f);
    al_linear_backward_beta(dx, dp[1], dk, x, p[1], BT, D, G * dh, 1.0f, 0.0f);
    al_linear_backward_beta(dx, dp[2], dv, x, p[2], BT, D, G * dh, 1.0f, 0.0f);
}

/* Every query head's probabilities after forward() on one sequence:
 * rebuilt from the saved q, k and row statistics by the kernel backward
 * uses, so they are the ones forward applied. */
void al_gqa_probs(const al_attn_shape *s, int G, float *P, const float *act, float *const *p,
                  int T)
{
    gqa_acts a = carve(s, G, (float *)act, 1, T);
    al_attn_probs(P, a.stat, a.q, a.k, T, s->n_head, G, s->d_head,
                  1.0f / sqrtf((float)s->d_head), s->causal);
    (void)p;
}

/* ------------------------------------------------------------ decode */

/* Cache row of a token: its G RoPE'd keys (G*dh), then its G values (G*dh),
 * exactly the k and v rows forward() saved. */
void al_gqa_prefill(const al_attn_shape *s, int G, al_kv_cache *cache, const float *act,
                    float *const *p, int T)
{
    gqa_acts a = carve(s, G, (float *)act, 1, T);
    int Gd = G * s->d_head;
    for (int t = 0; t < T; t++) {
        al_kv_put(cache, t, 0, Gd, a.k + (size_t)t * Gd);
        al_kv_put(cache, t, Gd, Gd, a.v + (size_t)t * Gd);
    }
}

/* q, y (H*dh) | the new row k, v (2*G*dh) | al_kv_attend's S | tile.
 * Independent of the context: attention reads the cache block by block. */
size_t al_gqa_decode_scratch_floats(const al_attn_shape *s, int G, int context)
{
    size_t Hd = (size_t)s->n_head * s->d_head, row = al_gqa_kv_elems(s, G);
    return 2 * Hd + row + AL_KV_ATTEND_S(s->n_head) + (size_t)AL_KV_TILE * row;
}

void al_gqa_decode(const al_attn_shape *s, int G, float *out, float *scratch, const float *x,
                   float *const *p, al_kv_cache *cache, int pos)
{
    int D = s->d_model, H = s->n_head, dh = s->d_head, Gd = G * dh;
    float *q = scratch, *y = q + H * dh, *kv = y + H * dh, *S = kv + 2 * Gd;
    float *tile = S + AL_KV_ATTEND_S(H);
    al_linear_row(q, x, p[0], D, H * dh);     /* q = x . wq^T */
    al_linear_row(kv, x, p[1], D, Gd);        /* k = x . wk^T */
    al_linear_row(kv + Gd, x, p[2], D, Gd);   /* v = x . wv^T */
    al_rope_forward(q, 1, 1, H, dh, H * dh, pos, s->rope_base);
    al_rope_forward(kv, 1, 1, G, dh, Gd, pos, s->rope_base);
    al_kv_row_put(cache, pos, kv);
    al_kv_attend(y, S, tile, q, cache, pos + 1, H, G, dh, dh, 0, Gd,
                 1.0f / sqrtf((float)dh));
    al_linear_row(out, y, p[3], H * dh, D);   /* out = y . wo^T */
}

/* q, y (B, H*dh) | k, v (B, G*dh) | the products' tmp (B, max(H*dh, D)).
 * Attention's scratch is the pool's. */
size_t al_gqa_decode_batch_scratch_floats(const al_attn_shape *s, int G, int context, int B)
{
    size_t Hd = (size_t)s->n_head * s->d_head, Gd = (size_t)G * s->d_head;
    size_t wide = Hd > (size_t)s->d_model ? Hd : (size_t)s->d_model;
    (void)context;
    return (size_t)B * (2 * Hd + 2 * Gd + wide);
}

/* al_gqa_decode for B sequences: the projections are (B, D) products. */
void al_gqa_decode_batch(const al_attn_shape *s, int G, float *out, float *scratch,
                         const float *x, float *const *p, al_kv_cache *const *caches,
                         const int *pos, int B)
{
    int D = s->d_model, H = s->n_head, dh = s->d_head, Hd = H * dh, Gd = G * dh;
    float *q = scratch, *y = q + (size_t)B * Hd, *k = y + (size_t)B * Hd, *v = k + (size_t)B * Gd;
    float *tmp = v + (size_t)B * Gd;
    al_linear_forward_few(q, tmp, x, p[0], B, D, Hd);   /* q = x . wq^T */
    al_linear_forward_few(k, tmp, x, p[1], B, D, Gd);   /* k = x . wk^T */
    al_linear_forward_few(v, tmp, x, p[2], B, D, Gd);   /* v = x . wv^T */
    for (int b = 0; b < B; b++) {   /* each token at its own position */
        al_rope_forward(q + (size_t)b * Hd, 1, 1, H, dh, Hd, pos[b], s->rope_base);
        al_rope_forward(k + (size_t)b * Gd, 1, 1, G, dh, Gd, pos[b], s->rope_base);
        al_kv_put(caches[b], pos[b], 0, Gd, k + (size_t)b * Gd);
        al_kv_put(caches[b], pos[b], Gd, Gd, v + (size_t)b * Gd);
    }
    al_kv_attend_batch(y, q, caches, pos, B, H, G, dh, dh, 0, Gd, 1.0f / sqrtf((float)dh));
    al_linear_forward_few(out, tmp, y, p[3], B, Hd, D);   /* out = y . wo^T */
}

/* ------------------------------------------------------------ sharing */

/* A consumer (model.kv_share): wq [H*dh, D] and wo [D, H*dh], no wk, wv. */
int al_gqa_share_params(const al_attn_shape *s, al_param_spec *out)
{
    int D = s->d_model, Hd = s->n_head * s->d_head;
    out[0] = (al_param_spec){"wq", Hd, D, AL_INIT_NORMAL};
    out[1] = (al_param_spec){"wo", D, Hd, AL_INIT_RESID};
    return 2;
}

/* A consumer's saved activations: q (BT,H*dh) | y (BT,H*dh) | stat (B,H,T,2);
 * its k, v are the producer's (carve of src_act). */
size_t al_gqa_share_act_floats(const al_attn_shape *s, int B, int T)
{
    size_t BT = (size_t)B * T, Hd = (size_t)s->n_head * s->d_head;
    return BT * 2 * Hd + 2 * (size_t)B * s->n_head * T;
}

static gqa_acts carve_share(const al_attn_shape *s, float *act, int B, int T)
{
    size_t BT = (size_t)B * T, Hd = (size_t)s->n_head * s->d_head;
    gqa_acts a = {act, NULL, NULL, act + BT * Hd, act + 2 * BT * Hd};
    return a;
}

void al_gqa_share_forward(const al_attn_shape *s, int G, al_gqa_band band, float *out,
                          float *act, const float *x, float *const *p, const float *src_act,
                          int B, int T)
{
    int D = s->d_model, H = s->n_head, dh = s->d_head, BT = B * T;
    gqa_acts a = carve_share(s, act, B, T), src = carve(s, G, (float *)src_act, B, T);
    al_linear_forward(a.q, x, p[0], BT, D, H * dh);   /* q = x . wq^T */
    al_rope_forward(a.q, B, T, H, dh, H * dh, 0, s->rope_base);
    attend(s, G, band, a.y, a.stat, a.q, src.k, src.v, B, T);   /* the producer's k, v */
    al_linear_forward(out, a.y, p[1], BT, H * dh, D); /* out = y . wo^T */
}

/* Writes dx, dp (AL_VARIANT_WRITES_GRADS); dkv (dk | dv) += this layer's
 * gradient of the shared k, v. Scratch: dy, dq (BT,H*dh) | dk, dv (BT,G*dh). */
void al_gqa_share_backward(const al_attn_shape *s, int G, al_gqa_band band, float *dx,
                           float *const *dp, float *dkv, float *scratch, const float *dout,
                           const float *x, const float *act, const float *src_act,
                           float *const *p, int B, int T)
{
    int D = s->d_model, H = s->n_head, dh = s->d_head, BT = B * T;
    size_t nH = (size_t)BT * H * dh, nG = (size_t)BT * G * dh;
    gqa_acts a = carve_share(s, (float *)act, B, T), src = carve(s, G, (float *)src_act, B, T);
    float *dy = scratch, *dq = dy + nH, *dk = dq + nH, *dv = dk + nG;
    al_linear_backward_beta(dy, dp[1], dout, a.y, p[1], BT, H * dh, D, 0.0f, 0.0f);
    attend_back(s, G, band, dq, dk, dv, dy, a.stat, a.q, src.k, src.v, B, T);
    for (size_t i = 0; i < 2 * nG; i++) dkv[i] += dk[i];   /* dk, dv adjoin */
    al_rope_backward(dq, B, T, H, dh, H * dh, 0, s->rope_base);
    al_linear_backward_beta(dx, dp[0], dq, x, p[0], BT, D, H * dh, 0.0f, 0.0f);
}

/* A consumer's probabilities: its q and row statistics, the producer's k. */
void al_gqa_share_probs(const al_attn_shape *s, int G, al_gqa_band band, float *P,
                        const float *act, const float *src_act, int T)
{
    gqa_acts a = carve_share(s, (float *)act, 1, T), src = carve(s, G, (float *)src_act, 1, T);
    int H = s->n_head, dh = s->d_head;
    float scale = 1.0f / sqrtf((float)dh);
    if (band.window > 0)
        al_attn_probs_band(P, a.stat, a.q, src.k, T, H, G, dh, scale, s->causal, band.window,
                           band.sinks);
    else
        al_attn_probs(P, a.stat, a.q, src.k, T, H, G, dh, scale, s->causal);
}

/* One token of a consumer: its query over the producer's n filled rows. */
void al_gqa_share_decode(const al_attn_shape *s, int G, float *out, float *scratch,
                         const float *x, float *const *p, const al_kv_cache *cache, int pos,
                         int n)
{
    int D = s->d_model, H = s->n_head, dh = s->d_head, Gd = G * dh;
    float *q = scratch, *y = q + H * dh, *S = y + H * dh + 2 * Gd;   /* decode's layout */
    float *tile = S + AL_KV_ATTEND_S(H);
    al_linear_row(q, x, p[0], D, H * dh);     /* q = x . wq^T */
    al_rope_forward(q, 1, 1, H, dh, H * dh, pos, s->rope_base);
    al_kv_attend(y, S, tile, q, cache, n, H, G, dh, dh, 0, Gd, 1.0f / sqrtf((float)dh));
    al_linear_row(out, y, p[1], H * dh, D);   /* out = y . wo^T */
}

/* ------------------------------------------------------------ gqa variant */

static const al_setting gqa_settings[] = {
    {"n_kv_head", AL_SET_INT, 0, 1, "K/V heads G; must divide n_head"},
    {NULL, 0, 0, 0, NULL},
};

static int gqa_check(const al_attn_shape *s, char *err, size_t errlen)
{
    int G = family_groups(s);
    if (G < 1 || s->n_head % G != 0) {
        snprintf(err, errlen, "'n_kv_head' (%d) must divide 'n_head' (%d)", G, s->n_head);
        return -1;
    }
    return 0;
}

const al_variant_ops al_variant_gqa = {
    .api_version = AL_VARIANT_API_VERSION,
    .name = "gqa",
    .description = "grouped-query attention: n_kv_head K/V heads shared by consecutive query heads",
    .settings = gqa_settings,
    .check = gqa_check,
    .params = family_params,
    .act_floats = family_act_floats,
    .scratch_floats = family_scratch_floats,
    .forward = family_forward,
    .backward = family_backward,
    .kv_elems = family_kv_elems,
    .kv_key_elems = family_kv_key_elems,
    .prefill = family_prefill,
    .decode_scratch_floats = family_decode_scratch_floats,
    .decode = family_decode,
    .probs = family_probs,
    .decode_batch_scratch_floats = family_decode_batch_scratch_floats,
    .decode_batch = family_decode_batch,
    .flags = AL_VARIANT_WRITES_GRADS,
    AL_GQA_FAMILY_SHARE_MEMBERS
};
