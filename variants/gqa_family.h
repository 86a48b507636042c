/*
 * gqa_family.h - the grouped-query attention family (mha, mqa, gqa).
 *
 * The three variants differ only in G, the number of K/V heads: mha has
 * G = H, mqa G = 1, gqa G = n_kv_head. gqa.c holds the implementation,
 * parameterised by G; each variant file defines
 *     static int family_groups(const al_attn_shape *s);
 * and includes this header, which turns that into the ops members.
 *
 * Parameters: wq [H*dh, D], wk [G*dh, D], wv [G*dh, D], wo [D, H*dh].
 * Saved activations per layer: q, k (RoPE'd), v, y (pre-wo), stat (B,H,T,2).
 * KV cache row per token: G*dh RoPE'd key floats, then G*dh value floats.
 */
#ifndef AL_GQA_FAMILY_H
#define AL_GQA_FAMILY_H

#include <attnlab/attnlab_variant.h>

int al_gqa_params(const al_attn_shape *s, int G, al_param_spec *out);
size_t al_gqa_act_floats(const al_attn_shape *s, int G, int B, int T);
size_t al_gqa_scratch_floats(const al_attn_shape *s, int G, int B, int T);
void al_gqa_forward(const al_attn_shape *s, int G, float *out, float *act,
                    float *scratch, const float *x, float *const *p, int B, int T);
void al_gqa_backward(const al_attn_shape *s, int G, float *dx, float *const *dp,
                     float *scratch, const float *dout, const float *x,
                     const float *act, float *const *p, int B, int T);
size_t al_gqa_kv_elems(const al_attn_shape *s, int G);

/* Cross-layer sharing (model.kv_share). A band of window 0 is full
 * attention (gqa); local passes its window and sinks. A consumer has wq,
 * wo; the shared K/V and its gradient dkv are the producer's saved k
 * (BT,G*dh) then v (BT,G*dh). */
typedef struct al_gqa_band {
    int window, sinks;
} al_gqa_band;
void al_gqa_backward_kv(const al_attn_shape *s, int G, al_gqa_band band, float *dx,
                        float *const *dp, const float *dkv, float *scratch, const float *dout,
                        const float *x, const float *act, float *const *p, int B, int T);
int al_gqa_share_params(const al_attn_shape *s, al_param_spec *out);
size_t al_gqa_share_act_floats(const al_attn_shape *s, int B, int T);
void al_gqa_share_forward(const al_attn_shape *s, int G, al_gqa_band band, float *out,
                          float *act, const float *x, float *const *p, const float *src_act,
                          int B, int T);
void al_gqa_share_backward(const al_attn_shape *s, int G, al_gqa_band band, float *dx,
                           float *const *dp, float *dkv, float *scratch, const float *dout,
                           const float *x, const float *act, const float *src_act,
                           float *const *p, int B, int T);
void al_gqa_share_probs(const al_attn_shape *s, int G, al_gqa_band band, float *P,
                        const float *act, const float *src_act, int T);
/* n: the filled rows the token reads (pos + 1; local: its ring's). */
void al_gqa_share_decode(const al_attn_shape *s, int G, float *out, float *scratch,
                         const float *x, float *const *p, const al_kv_cache *cache, int pos,
                         int n);
void al_gqa_prefill(const al_attn_shape *s, int G, al_kv_cache *cache, const float *act,
                    float *const *p, int T);
size_t al_gqa_decode_scratch_floats(const al_attn_shape *s, int G, int context);
void al_gqa_decode(const al_attn_shape *s, int G, float *out, float *scratch, const float *x,
                   float *const *p, al_kv_cache *cache, int pos);
void al_gqa_probs(const al_attn_shape *s, int G, float *P, const float *act, float *const *p,
                  int T);
size_t al_gqa_decode_batch_scratch_floats(const al_attn_shape *s, int G, int context, int B);
void al_gqa_decode_batch(const al_attn_shape *s, int G, float *out, float *scratch,
                         const float *x, float *const *p, al_kv_cache *const *caches,
                         const int *pos, int B);

#ifdef AL_GQA_FAMILY_MEMBERS
/* Ops members of a family variant: thin adapters that supply G. */
static int family_params(const al_attn_shape *s, al_param_spec *out)
{
    return al_gqa_params(s, family_groups(s), out);
}
static size_t family_act_floats(const al_attn_shape *s, int B, int T)
{
    return al_gqa_act_floats(s, family_groups(s), B, T);
}
static size_t family_scratch_floats(const al_attn_shape *s, int B, int T)
{
    return al_gqa_scratch_floats(s, family_groups(s), B, T);
}
static void family_forward(const al_attn_shape *s, float *out, float *act,
                           float *scratch, const float *x, float *const *p,
                           int B, int T)
{
    al_gqa_forward(s, family_groups(s), out, act, scratch, x, p, B, T);
}
static void family_backward(const al_attn_shape *s, float *dx, float *const *dp,
                            float *scratch, const float *dout, const float *x,
                            const float *act, float *const *p, int B, int T)
{
    al_gqa_backward(s, family_groups(s), dx, dp, scratch, dout, x, act, p, B, T);
}
static size_t family_kv_elems(const al_attn_shape *s)
{
    return al_gqa_kv_elems(s, family_groups(s));
}
/* a row is [K | V], the halves of equal size */
static size_t family_kv_key_elems(const al_attn_shape *s) { return family_kv_elems(s) / 2; }
static void family_prefill(const al_attn_shape *s, al_kv_cache *cache, const float *act,
                           float *const *p, int T)
{
    al_gqa_prefill(s, family_groups(s), cache, act, p, T);
}
static size_t family_decode_scratch_floats(const al_attn_shape *s, int context)
{
    return al_gqa_decode_scratch_floats(s, family_groups(s), context);
}
static void family_decode(const al_attn_shape *s, float *out, float *scratch, const float *x,
                          float *const *p, al_kv_cache *cache, int pos)
{
    al_gqa_decode(s, family_groups(s), out, scratch, x, p, cache, pos);
}
static void family_probs(const al_attn_shape *s, float *P, const float *act, float *const *p,
                         int T)
{
    al_gqa_probs(s, family_groups(s), P, act, p, T);
}
static size_t family_decode_batch_scratch_floats(const al_attn_shape *s, int context, int B)
{
    return al_gqa_decode_batch_scratch_floats(s, family_groups(s), context, B);
}
static void family_decode_batch(const al_attn_shape *s, float *out, float *scratch,
                                const float *x, float *const *p, al_kv_cache *const *caches,
                                const int *pos, int B)
{
    al_gqa_decode_batch(s, family_groups(s), out, scratch, x, p, caches, pos, B);
}
static void family_share_forward(const al_attn_shape *s, float *out, float *act,
                                 float *scratch, const float *x, float *const *p,
                                 const float *src_act, int B, int T)
{
    al_gqa_share_forward(s, family_groups(s), (al_gqa_band){0, 0}, out, act, x, p, src_act,
                         B, T);
    (void)scratch;
}
static void family_share_backward(const al_attn_shape *s, float *dx, float *const *dp,
                                  float *dkv, float *scratch, const float *dout,
                                  const float *x, const float *act, const float *src_act,
                                  float *const *p, int B, int T)
{
    al_gqa_share_backward(s, family_groups(s), (al_gqa_band){0, 0}, dx, dp, dkv, scratch, dout,
                          x, act, src_act, p, B, T);
}
static void family_backward_kv(const al_attn_shape *s, float *dx, float *const *dp,
                               const float *dkv, float *scratch, const float *dout,
                               const float *x, const float *act, float *const *p, int B, int T)
{
    al_gqa_backward_kv(s, family_groups(s), (al_gqa_band){0, 0}, dx, dp, dkv, scratch, dout, x,
                       act, p, B, T);
}
static void family_share_decode(const al_attn_shape *s, float *out, float *scratch,
                                const float *x, float *const *p, const al_kv_cache *cache,
                                int pos)
{
    al_gqa_share_decode(s, family_groups(s), out, scratch, x, p, cache, pos, pos + 1);
}
static void family_share_probs(const al_attn_shape *s, float *P, const float *act,
                               const float *src_act, float *const *p, int T)
{
    al_gqa_share_probs(s, family_groups(s), (al_gqa_band){0, 0}, P, act, src_act, T);
    (void)p;
}
/* The share_* members of a family table. */
#define AL_GQA_FAMILY_SHARE_MEMBERS \
    .share_params = al_gqa_share_params, .share_act_floats = al_gqa_share_act_floats, \
    .share_forward = family_share_forward, .share_backward = family_share_backward, \
    .backward_kv = family_backward_kv, .share_decode = family_share_decode, \
    .share_probs = family_share_probs,
#endif

#endif
