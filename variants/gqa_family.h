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
#endif

#endif
