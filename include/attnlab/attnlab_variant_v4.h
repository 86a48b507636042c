/*
 * attnlab_variant_v4.h - the attention-variant interface of version 4, kept
 * so that a plugin written for it still builds: replace
 *     #include <attnlab/attnlab_variant.h>
 * by
 *     #include <attnlab/attnlab_variant_v4.h>
 * and nothing else. attnlab loads version 2, 3 and 4 tables through one
 * adapter (src/model/variant_compat.c), which wraps each into a version-5
 * table; new variants use attnlab_variant.h (version 5).
 *
 * The table below is version 4's, member for member. Versioning: api_version
 * is the first field of the table. Members were only ever appended, so a
 * table says by its version which members it has (as SQLite's VFS does with
 * iVersion): a table of version 2 or 3 is read up to its last member and the
 * members it predates read as NULL (each is optional).
 */
#ifndef ATTNLAB_VARIANT_V4_H
#define ATTNLAB_VARIANT_V4_H

#include <stddef.h>
#include "attnlab_variant_base.h"
#include "al_kernels.h"

/* 2: al_kv_attend (al_kvcache.h) reads the cache in one pass; its score
 *    scratch is AL_KV_ATTEND_S(H) floats and AL_KV_TILE grew from 64 to
 *    256, so a plugin sized for version 1 would overrun its scratch. */
/* 3: appends the optional members `probs` (attention pictures),
 *    `decode_batch_scratch_floats` / `decode_batch` (batched decode) and
 *    `flags` (AL_VARIANT_WRITES_GRADS). The table grew, so the version says
 *    whether a table has them; a version-2 table is still accepted, with
 *    those members NULL or 0. */
/* 4: appends the optional member `kv_rows` (rows a layer's cache holds at
 *    a context), so a variant may bound its cache (local's ring of
 *    `window` rows plus its sinks), and the optional share_* members
 *    (cross-layer K/V sharing, model.kv_share), and the optional
 *    `kv_key_elems` (which elements of a row are keys, for int8/int4
 *    caches). A version-2 or 3 table is still accepted, kv_rows NULL: its
 *    cache holds one row per token; it cannot share; its rows are
 *    quantized whole, per channel. */
#define AL_VARIANT_V4 4       /* this header's version */
#define AL_VARIANT_V4_MIN 2   /* the oldest version the v4 layout describes */

typedef struct al_variant_ops {
    int api_version;                  /* AL_VARIANT_API_VERSION, always first */
    const char *name;                 /* registry key, e.g. "gqa" */
    const char *description;          /* one line for `attnlab variants` */
    const al_setting *settings;       /* terminated by {NULL}; may be NULL */

    /* Validate the settings against the model shape. Returns 0, or -1 with a
     * one-line message in err naming the key, its value and what was wanted. */
    int (*check)(const al_attn_shape *s, char *err, size_t errlen);

    /* Fill out[AL_MAX_ATTN_PARAMS]; return the number of tensors. */
    int (*params)(const al_attn_shape *s, al_param_spec *out);

    /* Floats of saved activations one layer needs for a (B, T) batch, and
     * floats of scratch shared by all layers (reused between calls). */
    size_t (*act_floats)(const al_attn_shape *s, int B, int T);
    size_t (*scratch_floats)(const al_attn_shape *s, int B, int T);

    /* out (B, T, D) = attention(x (B, T, D)). p holds the tensors in the
     * order of params(). act is this layer's saved state for backward. */
    void (*forward)(const al_attn_shape *s, float *out, float *act,
                    float *scratch, const float *x, float *const *p,
                    int B, int T);

    /* Given dout (B, T, D): dx += d/dx, dp[i] += d/dp[i]. x, act and p are
     * as in the forward pass that produced act. (With AL_VARIANT_WRITES_GRADS
     * in flags: dx = d/dx, dp[i] = d/dp[i], overwritten.) */
    void (*backward)(const al_attn_shape *s, float *dx, float *const *dp,
                     float *scratch, const float *dout, const float *x,
                     const float *act, float *const *p, int B, int T);

    /* KV-cache floats per token per layer (what decode stores). */
    size_t (*kv_elems)(const al_attn_shape *s);

    /* --- incremental decode (may be NULL: the variant cannot decode) --- */

    /* After forward() on a batch of one sequence of T tokens, write the
     * cache rows of positions 0..T-1 from the saved activations. */
    void (*prefill)(const al_attn_shape *s, al_kv_cache *cache,
                    const float *act, float *const *p, int T);

    /* Scratch floats decode() needs for a context of `context` tokens. */
    size_t (*decode_scratch_floats)(const al_attn_shape *s, int context);

    /* One token at position pos: x (D) is the normalised input. Appends the
     * token's row to the cache, attends over rows 0..pos, writes out (D). */
    void (*decode)(const al_attn_shape *s, float *out, float *scratch,
                   const float *x, float *const *p, al_kv_cache *cache,
                   int pos);

    /* ---- since version 3; every member down to flags may be NULL ---- */

    /* Attention pictures: after forward() on a batch of one sequence of T
     * tokens, write every query head's attention probabilities, computed
     * from act and p the way forward computed them: P (H, T, T), row i of
     * head h the weights query i gives keys 0..T-1 (zero above the diagonal
     * under the causal mask; each row sums to 1). NULL: the variant cannot
     * show its attention (`attnlab attention` refuses it). A variant that
     * saves only each score row's max and 1/sum (al_attn_forward) rebuilds
     * them with al_attn_probs (al_kernels.h). */
    void (*probs)(const al_attn_shape *s, float *P, const float *act,
                  float *const *p, int T);

    /* Batched decode: B independent sequences advance one token each.
     * x (B, D) holds their normalised inputs, caches[b] is sequence b's
     * cache of this layer and pos[b] the position of its new token; writes
     * out (B, D). Like B calls of decode() (equal up to rounding), but the
     * weight products become matrix products; al_kv_attend_batch
     * (al_kvcache.h) attends for all B. Scratch: decode_batch_scratch_floats(s,
     * context, B) floats. The core uses it for B >= 2 when both members
     * are set; NULL: the core calls decode() once per sequence. */
    size_t (*decode_batch_scratch_floats)(const al_attn_shape *s, int context, int B);
    void (*decode_batch)(const al_attn_shape *s, float *out, float *scratch,
                         const float *x, float *const *p, al_kv_cache *const *caches,
                         const int *pos, int B);

    /* What the core may assume of this variant: AL_VARIANT_* bits, 0 for
     * none. */
    unsigned flags;

    /* ---- since version 4; may be NULL ---- */

    /* Rows one layer's cache holds for a context of `context` tokens
     * (1 .. context): the core allocates that many rows of kv_elems, and
     * prefill / decode map positions to rows themselves (a ring, say:
     * al_kv_ring_row in al_kvcache.h). NULL: `context` rows, row pos for
     * position pos, as before version 4. */
    int (*kv_rows)(const al_attn_shape *s, int context);

    /* ---- cross-layer K/V sharing (model.kv_share, CLA), since version 4:
     * all six set, or all NULL (the variant cannot share; the core refuses
     * a kv_share > 1 naming it) ----
     *
     * Layers come in groups of kv_share. The group's first layer, the
     * producer, runs forward() as always and saves its K/V in act; the
     * others, consumers, have their own queries and output projection but
     * no K/V projection, and attend over the producer's K/V. Producer and
     * consumers have the same variant and settings (the core checks), so a
     * consumer reads the producer's saved activations (src_act) by the
     * variant's own layout. The K/V gradient passed between them, dkv,
     * holds B*T*kv_elems(s) floats in a layout of the variant's choosing
     * (gqa: dk (BT,G*dh) then dv (BT,G*dh)). Scratch: scratch_floats(s, B,
     * T) in training, decode_scratch_floats(s, context) in decode. */

    /* A consumer's tensors (the same names as the producer's, minus the
     * K/V projections): fill out, return the count. */
    int (*share_params)(const al_attn_shape *s, al_param_spec *out);
    /* Saved activations of a consumer for a (B, T) batch. */
    size_t (*share_act_floats)(const al_attn_shape *s, int B, int T);
    /* A consumer's forward: out (B,T,D) = attention of its queries (from x)
     * over the producer's K/V in src_act. */
    void (*share_forward)(const al_attn_shape *s, float *out, float *act, float *scratch,
                          const float *x, float *const *p, const float *src_act, int B,
                          int T);
    /* A consumer's backward: dx and dp[i] as backward() gives them (flags
     * apply), and the gradient of the shared K/V ADDED to dkv. */
    void (*share_backward)(const al_attn_shape *s, float *dx, float *const *dp, float *dkv,
                           float *scratch, const float *dout, const float *x,
                           const float *act, const float *src_act, float *const *p, int B,
                           int T);
    /* A producer's backward: backward(), with dkv (the consumers' summed
     * K/V gradient) added to its own K/V gradient before the projections. */
    void (*backward_kv)(const al_attn_shape *s, float *dx, float *const *dp,
                        const float *dkv, float *scratch, const float *dout,
                        const float *x, const float *act, float *const *p, int B, int T);
    /* A consumer's decode step at pos: its query over the producer's cache,
     * which already holds the row of pos (the producer ran first). */
    void (*share_decode)(const al_attn_shape *s, float *out, float *scratch, const float *x,
                         float *const *p, const al_kv_cache *cache, int pos);
    /* May be NULL even when the six are set: a consumer's attention
     * pictures, as probs() gives them, from its act and the producer's
     * src_act. NULL: `attnlab attention` refuses a shared model. */
    void (*share_probs)(const al_attn_shape *s, float *P, const float *act,
                        const float *src_act, float *const *p, int T);

    /* Optional: how many leading elements of a cache row are keys, the rest
     * values (at most kv_elems). An int8/int4 cache quantizes keys per
     * channel and values per token, as KIVI does; NULL: every element is
     * treated as a key, right for rows whose elements serve as both (a
     * latent, a tied state, factors). */
    size_t (*kv_key_elems)(const al_attn_shape *s);
} al_variant_ops;

/* 1 when v can be a member of a kv_share group (all six members set). */
static inline int al_variant_can_share(const al_variant_ops *v)
{
    return v->share_params && v->share_act_floats && v->share_forward &&
           v->share_backward && v->backward_kv && v->share_decode;
}

/* Bytes of a table of version v (AL_VARIANT_V4_MIN .. AL_VARIANT_V4):
 * the members that version has. 0 for any other version. */
static inline size_t al_variant_ops_size(int v)
{
    if (v == 2) return offsetof(al_variant_ops, probs);
    if (v == 3) return offsetof(al_variant_ops, kv_rows);
    if (v == AL_VARIANT_V4) return sizeof(al_variant_ops);
    return 0;
}

/* The version a plugin built against this header reports, and its entry
 * point. (Not declared when the version-5 header came first: attnlab's own
 * adapter includes both.) */
#ifndef ATTNLAB_VARIANT_H
#define AL_VARIANT_API_VERSION AL_VARIANT_V4
#define AL_VARIANT_API_MIN AL_VARIANT_V4_MIN
typedef const al_variant_ops *const *(*al_plugin_entry_fn)(int *api_version);

/* A plugin defines the entry point with this prototype (so the compiler
 * checks it) and exports it even when built with hidden visibility:
 *   AL_PLUGIN_EXPORT const al_variant_ops *const *
 *   attnlab_plugin_variants(int *api_version)
 *   { *api_version = AL_VARIANT_API_VERSION; return my_variants; }
 * The loader refuses a plugin whose version it does not accept
 * (AL_VARIANT_API_MIN .. AL_VARIANT_API_VERSION), then checks each table's
 * api_version and registers the tables under their names. */
AL_PLUGIN_EXPORT const al_variant_ops *const *attnlab_plugin_variants(int *api_version);

#endif

#endif
