/*
 * attnlab_variant.h - the attention-variant interface (public, versioned).
 *
 * An attention variant is one `const al_variant` table. The training core
 * owns every buffer: it asks the variant how many parameters, activation
 * floats and scratch floats it needs, allocates them once, and passes them
 * in. A variant never allocates inside forward, backward or decode.
 *
 * The same header serves the built-in variants (the files in variants/) and
 * run-time plugins: there is nothing private to the built-ins.
 *
 * One context per layer. The core calls init(v, shape) once for each layer
 * and hands the pointer it returns, `ctx`, to every other member; fini(ctx)
 * frees it. A variant computes what follows from its settings (a group
 * count, a window, offsets into its activations) once, in init, and reads
 * it from ctx afterwards; ctx is read-only after init (the core may call
 * members from several threads). A variant with nothing to compute leaves
 * init and fini NULL: ctx is then a const al_attn_shape * (the core's copy).
 *
 * Members come in sub-tables by concern; a variant leaves a sub-table NULL
 * where it has nothing to offer:
 *   train     parameters, buffer sizes, forward, backward   (required)
 *   decode    its cache and incremental decode              (NULL: no cache, no decode)
 *   share     cross-layer K/V (model.kv_share)              (NULL: cannot share)
 *   pictures  attention probabilities (`attnlab attention`) (NULL: cannot show them)
 *   costs     FLOPs and bytes per token                     (NULL: the core counts)
 * Inside a sub-table, a member marked optional may be NULL; its default is
 * settled once, when the table is registered (src/model/registry.c), never
 * where the core calls it.
 *
 * Versioning: api_version is the first field. The registry accepts version
 * 5 tables as they are, and version 2, 3 and 4 tables (attnlab_variant_v4.h)
 * through one adapter that wraps each into a version-5 table
 * (src/model/variant_compat.c). Any other version is refused with both
 * numbers.
 */
#ifndef ATTNLAB_VARIANT_H
#define ATTNLAB_VARIANT_H

#include <stddef.h>
#include "attnlab_variant_base.h"
#include "al_kernels.h"

/* 5: one context per layer (init / fini), members grouped in sub-tables,
 *    sharing by one forward and one backward that take an optional source
 *    of K/V, decode storage that may be a state rewritten in place, and
 *    the costs sub-table (its members settled by issue 36, before any
 *    table filled it). Versions 2 to 4: attnlab_variant_v4.h. */
#define AL_VARIANT_API_VERSION 5
#define AL_VARIANT_API_MIN 2   /* the oldest version still accepted (adapted) */

typedef struct al_variant al_variant;

/* ------------------------------------------------------------ training */

typedef struct al_variant_train {
    /* Fill out[AL_MAX_ATTN_PARAMS]; return the number of tensors. */
    int (*params)(const void *ctx, al_param_spec *out);

    /* Floats of saved activations one layer needs for a (B, T) batch, and
     * floats of scratch shared by all layers (reused between calls). */
    size_t (*act_floats)(const void *ctx, int B, int T);
    size_t (*scratch_floats)(const void *ctx, int B, int T);

    /* out (B, T, D) = attention(x (B, T, D)). p holds the tensors in the
     * order of params(). act is this layer's saved state for backward. */
    void (*forward)(const void *ctx, float *out, float *act, float *scratch, const float *x,
                    float *const *p, int B, int T);

    /* Given dout (B, T, D): dx += d/dx, dp[i] += d/dp[i]. x, act and p are
     * as in the forward pass that produced act. (With AL_VARIANT_WRITES_GRADS
     * in flags: dx = d/dx, dp[i] = d/dp[i], overwritten.) */
    void (*backward)(const void *ctx, float *dx, float *const *dp, float *scratch,
                     const float *dout, const float *x, const float *act, float *const *p,
                     int B, int T);

    /* What the core may assume: AL_VARIANT_* bits, 0 for none. */
    unsigned flags;
} al_variant_train;

/* ------------------------------------------------------------ decode */

/* What a layer's decode storage is (al_variant_decode.storage). */
enum al_kv_storage {
    /* Rows appended per token: kv_elems floats per token, kv_rows rows at
     * a context, stored at the run's kv_dtype. */
    AL_KV_ROWS = 0,
    /* A state rewritten in place: one row of kv_elems floats whatever the
     * context (a recurrent or linear-attention layer's running state). The
     * core allocates it once, keeps it f32 whatever kv_dtype says
     * (quantizing a running state is not KIVI), and counts its bytes as
     * held at every context. kv_rows and kv_key_elems do not apply. */
    AL_KV_STATE = 1
};

typedef struct al_variant_decode {
    /* enum al_kv_storage. */
    int storage;

    /* Floats per token one layer's cache stores (AL_KV_ROWS), or the
     * floats of its state (AL_KV_STATE). Required. */
    size_t (*kv_elems)(const void *ctx);

    /* Optional (AL_KV_ROWS): rows one layer's cache holds for a context of
     * `context` tokens (1 .. context); the core allocates that many rows,
     * and prefill / decode map positions to rows themselves (a ring, say:
     * al_kv_ring_row in al_kvcache.h). Default: `context` rows, row pos
     * for position pos. */
    int (*kv_rows)(const void *ctx, int context);

    /* Optional (AL_KV_ROWS): how many leading elements of a row are keys,
     * the rest values (at most kv_elems). An int8/int4 cache quantizes keys
     * per channel and values per token, as KIVI does. Default: the whole
     * row counts as keys, right for rows whose elements serve as both (a
     * latent, a tied state, factors). */
    size_t (*kv_key_elems)(const void *ctx);

    /* prefill, scratch_floats and decode: all three, or none (the layer
     * keeps a cache, for counting, but cannot decode). */

    /* After forward() on a batch of one sequence of T tokens, write the
     * cache rows (or the state) of positions 0..T-1 from the saved
     * activations. */
    void (*prefill)(const void *ctx, al_kv_cache *cache, const float *act, float *const *p,
                    int T);

    /* Scratch floats decode() needs for a context of `context` tokens. */
    size_t (*scratch_floats)(const void *ctx, int context);

    /* One token at position pos: x (D) is the normalised input. Appends the
     * token's row to the cache (or updates the state), attends, writes out
     * (D). */
    void (*decode)(const void *ctx, float *out, float *scratch, const float *x,
                   float *const *p, al_kv_cache *cache, int pos);

    /* Optional, both or neither: batched decode. B independent sequences
     * advance one token each: x (B, D) holds their normalised inputs,
     * caches[b] is sequence b's cache of this layer and pos[b] the position
     * of its new token; writes out (B, D). Like B calls of decode() (equal
     * up to rounding), but the weight products become matrix products;
     * al_kv_attend_batch (al_kvcache.h) attends for all B. Default: decode()
     * once per sequence. */
    size_t (*batch_scratch_floats)(const void *ctx, int context, int B);
    void (*decode_batch)(const void *ctx, float *out, float *scratch, const float *x,
                         float *const *p, al_kv_cache *const *caches, const int *pos, int B);
} al_variant_decode;

/* ------------------------------------------------------------ sharing */

/* Cross-layer K/V sharing (model.kv_share, CLA). Layers come in groups of
 * kv_share. The group's first layer, the producer, runs train->forward as
 * always and saves its K/V in act; the others, consumers, have their own
 * queries and output projection but no K/V projection, and attend over the
 * producer's K/V. Producer and consumers have the same variant and settings
 * (the core checks), so a consumer reads the producer's saved activations
 * (src) by the variant's own layout. The K/V gradient passed between them,
 * dkv, holds B*T*kv_elems floats in a layout of the variant's choosing
 * (gqa: dk (BT,G*dh) then dv (BT,G*dh)). Scratch: train->scratch_floats
 * in training, decode->scratch_floats in decode. Every member is required
 * when the sub-table is given; the variant needs a decode sub-table. */
typedef struct al_variant_share {
    /* A consumer's tensors (the producer's names, minus the K/V
     * projections): fill out, return the count. */
    int (*params)(const void *ctx, al_param_spec *out);
    /* Saved activations of a consumer for a (B, T) batch. */
    size_t (*act_floats)(const void *ctx, int B, int T);
    /* A consumer's forward (src, the producer's act): out (B,T,D) =
     * attention of its queries (from x) over the producer's K/V. With src
     * NULL: train->forward. */
    void (*forward)(const void *ctx, float *out, float *act, float *scratch, const float *x,
                    float *const *p, const float *src, int B, int T);
    /* With src (a consumer): dx and dp[i] as train->backward gives them
     * (flags apply), and the gradient of the shared K/V ADDED to dkv.
     * With src NULL (a producer): train->backward, with dkv (its consumers'
     * summed K/V gradient, read only) added to its own K/V gradient before
     * the projections. */
    void (*backward)(const void *ctx, float *dx, float *const *dp, float *dkv, float *scratch,
                     const float *dout, const float *x, const float *act, const float *src,
                     float *const *p, int B, int T);
    /* A consumer's decode step at pos: its query over the producer's cache,
     * which already holds the row of pos (the producer ran first). */
    void (*decode)(const void *ctx, float *out, float *scratch, const float *x,
                   float *const *p, const al_kv_cache *cache, int pos);
} al_variant_share;

/* ------------------------------------------------------------ pictures */

typedef struct al_variant_pictures {
    /* After forward() on a batch of one sequence of T tokens, write every
     * query head's attention probabilities, computed from act and p the way
     * forward computed them: P (H, T, T), row i of head h the weights query
     * i gives keys 0..T-1 (zero above the diagonal under the causal mask;
     * each row sums to 1). A kv_share consumer's come with src (the
     * producer's act; only when `shared` is 1), others' with src NULL. A
     * variant that saves only each score row's max and 1/sum
     * (al_attn_forward) rebuilds them with al_attn_probs (al_kernels.h). */
    void (*probs)(const void *ctx, float *P, const float *act, const float *src,
                  float *const *p, int T);
    /* 1 when probs takes a src (a consumer's pictures); 0: `attnlab
     * attention` refuses a shared model. */
    int shared;
    /* 1 when probs writes weights, not probabilities: a state layer's
     * equivalent attention matrix (linear: the decayed q.k products), row
     * i the weights that output i gives values 0..i, signed, rows not
     * summing to 1, still 0 above the diagonal. check-variant then skips
     * the checks that assume a softmax (probs.rows, probs.forward), and
     * `attnlab attention` draws them on a signed scale and leaves the
     * head statistics blank (docs/state-layers.md). */
    int weights;
} al_variant_pictures;

/* ------------------------------------------------------------ costs */

/* What one layer costs per token (docs/costs.md): the FLOPs of the matrix
 * products it runs, each product of an (m, k) by a (k, n) matrix counted as
 * 2*m*n*k, attention's context-dependent products as the kernels execute
 * them (al_attn_flops, al_kernels.h: the causal kernels skip the key blocks
 * past a query block, not the masked half inside one). Elementwise work
 * (norms, softmax, RoPE) is not counted. `consumer` is 1 for a
 * model.kv_share consumer (share->forward / backward / decode), 0
 * otherwise. The counting mode of the product layer (`attnlab cost
 * --measure`) checks the built-in variants' answers to the FLOP.
 *
 * Each member is optional. Without a FLOP member the core counts the
 * layer's products itself by running it once in counting mode, and marks
 * the figure estimated when it sees none (a plugin with products of its
 * own). Bytes read are the core's to count (the cache's storage format is
 * its own): cache rows read at their storage dtype plus every parameter
 * of the layer. */
typedef struct al_variant_costs {
    /* Forward plus backward FLOPs per token of a (B, seq_len) batch. */
    double (*train_flops_per_token)(const void *ctx, int seq_len, int consumer);
    /* FLOPs per token of forward on one sequence of T tokens and of
     * decode->prefill after it (a prefill's batched pass). */
    double (*prefill_flops_per_token)(const void *ctx, int T, int consumer);
    /* FLOPs of one decode step of the token at position context - 1 (it
     * attends over context tokens). */
    double (*decode_flops_per_token)(const void *ctx, int context, int consumer);
    /* Cache rows one decode step at `context` reads (a sparse design reads
     * a few of those it holds). Default (settled at registration): every
     * row held, decode->kv_rows. */
    int (*decode_rows_read)(const void *ctx, int context);
} al_variant_costs;

/* ------------------------------------------------------------ the table */

struct al_variant {
    int api_version;                  /* AL_VARIANT_API_VERSION, always first */
    const char *name;                 /* registry key, e.g. "gqa" */
    const char *description;          /* one line for `attnlab variants` */
    const al_setting *settings;       /* terminated by {NULL}; may be NULL */
    const void *data;                 /* the variant's own, for init; may be NULL */

    /* Optional, both or neither: make the context of one layer from its
     * settings (s->set, in the order of settings) and shape, or return NULL
     * with a one-line message in err naming the key, its value and what was
     * wanted (the settings are invalid for this shape). fini frees what
     * init returned. Default: ctx is a copy of s, made and freed by the
     * core. */
    void *(*init)(const al_variant *v, const al_attn_shape *s, char *err, size_t errlen);
    void (*fini)(void *ctx);

    const al_variant_train *train;        /* required */
    const al_variant_decode *decode;      /* NULL: no cache, cannot decode */
    const al_variant_share *share;        /* NULL: cannot be in a kv_share group */
    const al_variant_pictures *pictures;  /* NULL: cannot show its attention */
    const al_variant_costs *costs;        /* NULL: the core counts (see above) */
};

/* A plugin defines the entry point with this prototype (so the compiler
 * checks it) and exports it even when built with hidden visibility:
 *   AL_PLUGIN_EXPORT const al_variant *const *
 *   attnlab_plugin_variants(int *api_version)
 *   { *api_version = AL_VARIANT_API_VERSION; return my_variants; }
 * The loader refuses a plugin whose version it does not accept
 * (AL_VARIANT_API_MIN .. AL_VARIANT_API_VERSION), then checks each table's
 * api_version and registers the tables under their names. */
typedef const al_variant *const *(*al_plugin_entry_fn)(int *api_version);
AL_PLUGIN_EXPORT const al_variant *const *attnlab_plugin_variants(int *api_version);

/* The shape a member's ctx carries when the variant has no init (the core
 * hands it a copy of the shape). */
static inline const al_attn_shape *al_ctx_shape(const void *ctx)
{
    return (const al_attn_shape *)ctx;
}

#endif
