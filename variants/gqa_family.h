/*
 * gqa_family.h - the grouped-query attention family (mha, mqa, gqa, local).
 *
 * The variants differ only in G, the number of K/V heads (mha G = H, mqa
 * G = 1, gqa G = n_kv_head), and in a band (local: a window and sinks; 0:
 * full attention). gqa.c holds the implementation over a context that
 * carries them: each variant's init computes G and the band once
 * (al_gqa_new), and its table points at the family's sub-tables.
 *
 * Parameters: wq [H*dh, D], wk [G*dh, D], wv [G*dh, D], wo [D, H*dh].
 * Saved activations per layer: q, k (RoPE'd), v, y (pre-wo), stat (B,H,T,2).
 * KV cache row per token: G*dh RoPE'd key floats, then G*dh value floats.
 * A consumer (model.kv_share) has wq, wo; the shared K/V and its gradient
 * dkv are the producer's saved k (BT,G*dh) then v (BT,G*dh).
 */
#ifndef AL_GQA_FAMILY_H
#define AL_GQA_FAMILY_H

#include <attnlab/attnlab_variant.h>

/* A band of window 0 is full attention (gqa); local passes its window and
 * sinks, and its cache is a ring of them (al_kv_ring_row). */
typedef struct al_gqa_band {
    int window, sinks;
} al_gqa_band;

/* The context of one layer of the family. */
typedef struct al_gqa_ctx {
    al_attn_shape s;
    int G;               /* K/V heads */
    al_gqa_band band;
} al_gqa_ctx;

/* A context (freed with free: the family's fini). */
void *al_gqa_new(const al_attn_shape *s, int G, al_gqa_band band);

/* The family's members, for a variant's own sub-table (local's decode). */
size_t al_gqa_kv_elems(const void *ctx);
size_t al_gqa_kv_key_elems(const void *ctx);
void al_gqa_prefill(const void *ctx, al_kv_cache *cache, const float *act, float *const *p,
                    int T);
size_t al_gqa_decode_scratch_floats(const void *ctx, int context);
void al_gqa_decode(const void *ctx, float *out, float *scratch, const float *x,
                   float *const *p, al_kv_cache *cache, int pos);
size_t al_gqa_decode_batch_scratch_floats(const void *ctx, int context, int B);
void al_gqa_decode_batch(const void *ctx, float *out, float *scratch, const float *x,
                         float *const *p, al_kv_cache *const *caches, const int *pos, int B);

extern const al_variant_train al_gqa_train;
extern const al_variant_decode al_gqa_decode_table;
extern const al_variant_share al_gqa_share;
extern const al_variant_pictures al_gqa_pictures;
extern const al_variant_costs al_gqa_costs;

/* The decode members but kv_rows (local's decode sets its ring's). */
#define AL_GQA_DECODE_MEMBERS \
    .storage = AL_KV_ROWS, .kv_elems = al_gqa_kv_elems, .kv_key_elems = al_gqa_kv_key_elems, \
    .prefill = al_gqa_prefill, .scratch_floats = al_gqa_decode_scratch_floats, \
    .decode = al_gqa_decode, .batch_scratch_floats = al_gqa_decode_batch_scratch_floats, \
    .decode_batch = al_gqa_decode_batch

/* The members of a family table after its settings (init is its own). */
#define AL_GQA_FAMILY_TABLE \
    .fini = free, .train = &al_gqa_train, .share = &al_gqa_share, .pictures = &al_gqa_pictures, \
    .costs = &al_gqa_costs

#endif
