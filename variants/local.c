/*
 * local.c - local (sliding-window) attention with attention sinks: the
 * local layers of Mistral 7B and Gemma 3 (Beltagy et al. 2020, Longformer),
 * with StreamingLLM's sinks (Xiao et al. 2023).
 *
 * Query t sees the last `window` positions, itself included (keys
 * t-window+1 .. t), and the first `sinks` positions, which stay visible to
 * every query. K/V heads are grouped as in gqa (n_kv_head, 0: n_head);
 * parameters and RoPE are the GQA family's, so a window covering the whole
 * sequence with no sinks gives exactly gqa's function. With the causal-mask
 * ablation (model.causal: false) the band is symmetric, |t - s| < window.
 *
 * Training masks the band inside the shared attention kernel
 * (al_attn_forward_band), so the arithmetic is that of the full block.
 * Decode keeps a bounded cache (kv_rows, interface version 4): rows
 * 0..sinks-1 for the sinks, then a ring of `window` rows (al_kv_ring_row),
 * so a layer's cache stops growing at sinks + window rows whatever the
 * context, and its filled rows are exactly the keys the band shows the new
 * token: al_kv_attend over them equals the training forward.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <attnlab/attnlab_variant.h>
#include <attnlab/al_kvcache.h>

#include "gqa_family.h"

enum { SET_WINDOW, SET_N_KV_HEAD, SET_SINKS };

static const al_setting local_settings[] = {
    {"window", AL_SET_INT, 0, 1, "positions each query attends to, itself included (>= 1)"},
    {"n_kv_head", AL_SET_INT, 0, 0, "K/V heads G, 0 for n_head; must divide n_head"},
    {"sinks", AL_SET_INT, 0, 0, "first positions every query also sees (StreamingLLM), >= 0"},
    {NULL, 0, 0, 0, NULL},
};

static int groups(const al_attn_shape *s)
{
    int G = al_set_int(s, SET_N_KV_HEAD);
    return G ? G : s->n_head;
}
static int window(const al_attn_shape *s) { return al_set_int(s, SET_WINDOW); }
static int sinks(const al_attn_shape *s) { return al_set_int(s, SET_SINKS); }

static int local_check(const al_attn_shape *s, char *err, size_t errlen)
{
    int G = al_set_int(s, SET_N_KV_HEAD);
    if (s->set[SET_WINDOW] < 1) {
        snprintf(err, errlen, "'window' (%g) must be at least 1", s->set[SET_WINDOW]);
        return -1;
    }
    if (G < 0 || (G > 0 && s->n_head % G != 0)) {
        snprintf(err, errlen, "'n_kv_head' (%d) must divide 'n_head' (%d), or be 0 for "
                 "n_head", G, s->n_head);
        return -1;
    }
    if (s->set[SET_SINKS] < 0) {
        snprintf(err, errlen, "'sinks' (%g) must be at least 0", s->set[SET_SINKS]);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ training */

static int local_params(const al_attn_shape *s, al_param_spec *out)
{
    return al_gqa_params(s, groups(s), out);
}

static size_t local_act_floats(const al_attn_shape *s, int B, int T)
{
    return al_gqa_act_floats(s, groups(s), B, T);
}

static size_t local_scratch_floats(const al_attn_shape *s, int B, int T)
{
    return al_gqa_scratch_floats(s, groups(s), B, T);
}

static size_t local_kv_elems(const al_attn_shape *s) { return al_gqa_kv_elems(s, groups(s)); }
static size_t local_kv_key_elems(const al_attn_shape *s) { return local_kv_elems(s) / 2; }

/* Saved activations, gqa's layout: q (BT,H*dh) | k, v (BT,G*dh) |
 * y (BT,H*dh) | stat (B,H,T,2). */
typedef struct local_acts {
    float *q, *k, *v, *y, *stat;
} local_acts;

static local_acts carve(const al_attn_shape *s, float *act, int B, int T)
{
    size_t BT = (size_t)B * T, Hd = (size_t)s->n_head * s->d_head;
    size_t Gd = (size_t)groups(s) * s->d_head;
    local_acts a = {act, act + BT * Hd, act + BT * (Hd + Gd), act + BT * (Hd + 2 * Gd),
                    act + BT * (2 * Hd + 2 * Gd)};
    return a;
}

static float scale_of(const al_attn_shape *s) { return 1.0f / sqrtf((float)s->d_head); }

static void local_forward(const al_attn_shape *s, float *out, float *act, float *scratch,
                          const float *x, float *const *p, int B, int T)
{
    int D = s->d_model, H = s->n_head, G = groups(s), dh = s->d_head, BT = B * T;
    local_acts a = carve(s, act, B, T);
    al_linear_forward(a.q, x, p[0], BT, D, H * dh);   /* q = x . wq^T */
    al_linear_forward(a.k, x, p[1], BT, D, G * dh);   /* k = x . wk^T */
    al_linear_forward(a.v, x, p[2], BT, D, G * dh);   /* v = x . wv^T */
    al_rope_forward(a.q, B, T, H, dh, H * dh, 0, s->rope_base);
    al_rope_forward(a.k, B, T, G, dh, G * dh, 0, s->rope_base);
    al_attn_forward_band(a.y, a.stat, a.q, a.k, a.v, B, T, H, G, dh, dh, scale_of(s),
                         s->causal, window(s), sinks(s));
    al_linear_forward(out, a.y, p[3], BT, H * dh, D); /* out = y . wo^T */
    (void)scratch;
}

static void local_backward(const al_attn_shape *s, float *dx, float *const *dp, float *scratch,
                           const float *dout, const float *x, const float *act,
                           float *const *p, int B, int T)
{
    int D = s->d_model, H = s->n_head, G = groups(s), dh = s->d_head, BT = B * T;
    size_t nH = (size_t)BT * H * dh, nG = (size_t)BT * G * dh;
    local_acts a = carve(s, (float *)act, B, T);
    float *dy = scratch, *dq = dy + nH, *dk = dq + nH, *dv = dk + nG;
    /* Every output is written (AL_VARIANT_WRITES_GRADS): beta 0 first.
     * out = y . wo^T: dy = dout . wo */
    al_linear_backward_beta(dy, dp[3], dout, a.y, p[3], BT, H * dh, D, 0.0f, 0.0f);
    al_attn_backward_band(dq, dk, dv, dy, a.stat, a.q, a.k, a.v, B, T, H, G, dh, dh,
                          scale_of(s), s->causal, window(s), sinks(s));
    /* q = rope(q0), k = rope(k0): rotate the gradients back */
    al_rope_backward(dq, B, T, H, dh, H * dh, 0, s->rope_base);
    al_rope_backward(dk, B, T, G, dh, G * dh, 0, s->rope_base);
    al_linear_backward_beta(dx, dp[0], dq, x, p[0], BT, D, H * dh, 0.0f, 0.0f);
    al_linear_backward_beta(dx, dp[1], dk, x, p[1], BT, D, G * dh, 1.0f, 0.0f);
    al_linear_backward_beta(dx, dp[2], dv, x, p[2], BT, D, G * dh, 1.0f, 0.0f);
}

/* The probabilities forward applied, rebuilt from q, k and the row
 * statistics by the kernel backward uses (zero outside the band). */
static void local_probs(const al_attn_shape *s, float *P, const float *act, float *const *p,
                        int T)
{
    local_acts a = carve(s, (float *)act, 1, T);
    al_attn_probs_band(P, a.stat, a.q, a.k, T, s->n_head, groups(s), s->d_head, scale_of(s),
                       s->causal, window(s), sinks(s));
    (void)p;
}

/* ------------------------------------------------------------ decode */

/* The sinks and a ring of `window` rows; fewer for a short context. */
static int local_kv_rows(const al_attn_shape *s, int context)
{
    return al_kv_ring_rows(window(s), sinks(s), context);
}

/* Cache row of a token: its G RoPE'd keys, then its G values (gqa's row),
 * at the ring row of its position. Positions the ring has moved past by T
 * are not written: a later one takes their row. */
static void local_prefill(const al_attn_shape *s, al_kv_cache *cache, const float *act,
                          float *const *p, int T)
{
    local_acts a = carve(s, (float *)act, 1, T);
    int Gd = groups(s) * s->d_head, w = window(s), k = sinks(s);
    for (int t = 0; t < T; t++) {
        if (t >= k && t < T - w) continue;   /* overwritten before T */
        int r = al_kv_ring_row(t, w, k);
        al_kv_put(cache, r, 0, Gd, a.k + (size_t)t * Gd);
        al_kv_put(cache, r, Gd, Gd, a.v + (size_t)t * Gd);
    }
    (void)p;
}

/* q, y (H*dh) | the new row k, v (2*G*dh) | al_kv_attend's S | tile.
 * Independent of the context. */
static size_t local_decode_scratch_floats(const al_attn_shape *s, int context)
{
    return al_gqa_decode_scratch_floats(s, groups(s), context);
}

/* One token at pos: its row into its ring row, then attention over the
 * filled rows, which are the band's keys (al_kvcache.h). */
static void local_decode(const al_attn_shape *s, float *out, float *scratch, const float *x,
                         float *const *p, al_kv_cache *cache, int pos)
{
    int D = s->d_model, H = s->n_head, G = groups(s), dh = s->d_head, Gd = G * dh;
    float *q = scratch, *y = q + H * dh, *kv = y + H * dh, *S = kv + 2 * Gd;
    float *tile = S + AL_KV_ATTEND_S(H);
    al_linear_row(q, x, p[0], D, H * dh);     /* q = x . wq^T */
    al_linear_row(kv, x, p[1], D, Gd);        /* k = x . wk^T */
    al_linear_row(kv + Gd, x, p[2], D, Gd);   /* v = x . wv^T */
    al_rope_forward(q, 1, 1, H, dh, H * dh, pos, s->rope_base);
    al_rope_forward(kv, 1, 1, G, dh, Gd, pos, s->rope_base);
    al_kv_row_put(cache, al_kv_ring_row(pos, window(s), sinks(s)), kv);
    al_kv_attend(y, S, tile, q, cache, al_kv_ring_len(pos, window(s), sinks(s)), H, G, dh, dh,
                 0, Gd, scale_of(s));
    al_linear_row(out, y, p[3], H * dh, D);   /* out = y . wo^T */
}

/* q, y (B, H*dh) | k, v (B, G*dh) | the products' tmp (B, max(H*dh, D)). */
static size_t local_decode_batch_scratch_floats(const al_attn_shape *s, int context, int B)
{
    return al_gqa_decode_batch_scratch_floats(s, groups(s), context, B);
}

/* local_decode for B sequences: the projections are (B, D) products, and
 * al_kv_attend_batch reads each ring whole once it is full. */
static void local_decode_batch(const al_attn_shape *s, float *out, float *scratch,
                               const float *x, float *const *p, al_kv_cache *const *caches,
                               const int *pos, int B)
{
    int D = s->d_model, H = s->n_head, G = groups(s), dh = s->d_head, Hd = H * dh, Gd = G * dh;
    float *q = scratch, *y = q + (size_t)B * Hd, *k = y + (size_t)B * Hd, *v = k + (size_t)B * Gd;
    float *tmp = v + (size_t)B * Gd;
    al_linear_forward_few(q, tmp, x, p[0], B, D, Hd);   /* q = x . wq^T */
    al_linear_forward_few(k, tmp, x, p[1], B, D, Gd);   /* k = x . wk^T */
    al_linear_forward_few(v, tmp, x, p[2], B, D, Gd);   /* v = x . wv^T */
    for (int b = 0; b < B; b++) {   /* each token at its own position */
        int r = al_kv_ring_row(pos[b], window(s), sinks(s));
        al_rope_forward(q + (size_t)b * Hd, 1, 1, H, dh, Hd, pos[b], s->rope_base);
        al_rope_forward(k + (size_t)b * Gd, 1, 1, G, dh, Gd, pos[b], s->rope_base);
        al_kv_put(caches[b], r, 0, Gd, k + (size_t)b * Gd);
        al_kv_put(caches[b], r, Gd, Gd, v + (size_t)b * Gd);
    }
    al_kv_attend_batch(y, q, caches, pos, B, H, G, dh, dh, 0, Gd, scale_of(s));
    al_linear_forward_few(out, tmp, y, p[3], B, Hd, D);   /* out = y . wo^T */
}

/* ------------------------------------------------------------ sharing */

/* model.kv_share: gqa's consumer over the producer's k, v, under the same
 * band; in decode, the producer's ring (the group shares window and sinks,
 * so its filled rows are exactly the band's keys for every member). */
static al_gqa_band band_of(const al_attn_shape *s) { return (al_gqa_band){window(s), sinks(s)}; }

static void local_share_forward(const al_attn_shape *s, float *out, float *act, float *scratch,
                                const float *x, float *const *p, const float *src_act, int B,
                                int T)
{
    al_gqa_share_forward(s, groups(s), band_of(s), out, act, x, p, src_act, B, T);
    (void)scratch;
}

static void local_share_backward(const al_attn_shape *s, float *dx, float *const *dp,
                                 float *dkv, float *scratch, const float *dout, const float *x,
                                 const float *act, const float *src_act, float *const *p,
                                 int B, int T)
{
    al_gqa_share_backward(s, groups(s), band_of(s), dx, dp, dkv, scratch, dout, x, act,
                          src_act, p, B, T);
}

static void local_backward_kv(const al_attn_shape *s, float *dx, float *const *dp,
                              const float *dkv, float *scratch, const float *dout,
                              const float *x, const float *act, float *const *p, int B, int T)
{
    al_gqa_backward_kv(s, groups(s), band_of(s), dx, dp, dkv, scratch, dout, x, act, p, B, T);
}

static void local_share_decode(const al_attn_shape *s, float *out, float *scratch,
                               const float *x, float *const *p, const al_kv_cache *cache,
                               int pos)
{
    al_gqa_share_decode(s, groups(s), out, scratch, x, p, cache, pos,
                        al_kv_ring_len(pos, window(s), sinks(s)));
}

static void local_share_probs(const al_attn_shape *s, float *P, const float *act,
                              const float *src_act, float *const *p, int T)
{
    al_gqa_share_probs(s, groups(s), band_of(s), P, act, src_act, T);
    (void)p;
}

const al_variant_ops al_variant_local = {
    .api_version = AL_VARIANT_API_VERSION,
    .name = "local",
    .description = "sliding-window attention over the last `window` positions, with "
                   "`sinks` first positions always visible; bounded cache",
    .settings = local_settings,
    .check = local_check,
    .params = local_params,
    .act_floats = local_act_floats,
    .scratch_floats = local_scratch_floats,
    .forward = local_forward,
    .backward = local_backward,
    .kv_elems = local_kv_elems,
    .prefill = local_prefill,
    .decode_scratch_floats = local_decode_scratch_floats,
    .decode = local_decode,
    .probs = local_probs,
    .decode_batch_scratch_floats = local_decode_batch_scratch_floats,
    .decode_batch = local_decode_batch,
    .flags = AL_VARIANT_WRITES_GRADS,
    .kv_rows = local_kv_rows,
    .kv_key_elems = local_kv_key_elems,
    .share_params = al_gqa_share_params,
    .share_act_floats = al_gqa_share_act_floats,
    .share_forward = local_share_forward,
    .share_backward = local_share_backward,
    .backward_kv = local_backward_kv,
    .share_decode = local_share_decode,
    .share_probs = local_share_probs,
};
