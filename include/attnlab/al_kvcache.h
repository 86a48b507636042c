/*
 * al_kvcache.h - the KV cache of one layer, and the number formats it stores.
 *
 * A cache holds `context` rows of `elems` floats each; what a row means is
 * the variant's business (attnlab_variant.h: kv_elems, prefill, decode).
 * Rows are stored as f32, bf16 or f16: converted on write, computed on in
 * f32. The conversions are written here (round to nearest, ties to even;
 * IEEE binary16 with subnormals, inf and NaN), not left to the compiler,
 * so every build stores the same bits.
 *
 * Or as int8 / int4, KIVI-style (Liu et al. 2024, arXiv 2402.02750; made
 * by al_kv_cache_new_quant): a row is split at key_elems. Its first
 * key_elems elements are quantized per channel (KIVI's keys: one scale
 * and zero-point per channel for each group of `group` tokens), the rest
 * per token (KIVI's values: one scale and zero-point per token for each
 * group of `group` channels). scale = (max - min) / (2^bits - 1), zero =
 * min, code = round((x - zero) / scale), read back as code * scale + zero:
 * an element is off by at most scale / 2. Scales and zero-points are f32.
 * The newest rows stay f32 in a ring of min(context, residual + group)
 * rows; writing row p quantizes every whole group of tokens older than
 * rows p - residual .. p, so at least `residual` recent tokens are exact.
 * Rows must be written in order (as prefill and decode do); writing row 0
 * again starts a new sequence. Reads (al_kv_rows, al_kv_row_get) convert
 * as for bf16, so a variant reads an int cache without knowing it.
 * Which elements are keys is the caller's choice: the core's decoder
 * (al_model_layer_kv_layout, src/model/tensors.c) passes the variant's
 * kv_key_elems (attnlab_variant.h): the mha/mqa/gqa family and local say
 * half a row ([K | V], KIVI exactly); without the member the whole row is
 * quantized per channel (a latent (MLA, GLA), a tied state (GTA) or TPA's
 * factors serve as both keys and values). A bounded
 * ring (al_kv_ring_row) rewrites rows out of order, which groups of
 * tokens cannot follow: the core makes its residual its whole size, so it
 * stays f32.
 *
 * Memory: al_kv_cache_new makes exactly context * elems * al_kv_dtype_size
 * bytes of storage, al_kv_cache_new_quant exactly al_kv_cache_bytes_for
 * (codes, scales, zero-points and the f32 ring), counted in the cache
 * (al_kv_cache_bytes) and in a process-wide tally of live cache storage
 * (al_kv_bytes_live), so that the bytes a decoder holds are measured, not
 * recomputed from a formula. al_kv_cache_free releases both. Nothing here
 * allocates after _new.
 */
#ifndef AL_KVCACHE_H
#define AL_KVCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "attnlab_variant_base.h"

/* AL_KV_NDTYPES counts the element-wise formats (al_kv_dtype_size); the
 * quantized ones follow, AL_KV_NALL in all. */
enum al_kv_dtype {
    AL_KV_F32 = 0, AL_KV_BF16 = 1, AL_KV_F16 = 2, AL_KV_NDTYPES = 3,
    AL_KV_INT8 = 3, AL_KV_INT4 = 4, AL_KV_NALL = 5
};
/* model.kv_quant_group and model.kv_quant_residual when not given. */
#define AL_KV_QUANT_GROUP 32
#define AL_KV_QUANT_RESIDUAL 32

/* Rows that decode loops read per block (al_kv_attend always; other loops
 * when the cache is not f32): a variant's scratch holds AL_KV_TILE *
 * kv_elems floats for the conversion. 256 by measurement (n_head 8,
 * d_head 32, context 4096, 4 layers with 11 MB of weights between them):
 * mha (per-group sgemv over 2 KB rows) is fastest at 128-256 and 6 %
 * slower at 512; gqa, mqa and mla (sgemm) within 3 % from 128 to 512. */
#define AL_KV_TILE 256
/* Floats of S that al_kv_attend needs for H query heads, at any context:
 * one block's scores of a group (at most H heads) and each head's running
 * max and sum. */
#define AL_KV_ATTEND_S(H) ((size_t)(H) * (AL_KV_TILE + 2))

/* "f32" | "bf16" | "f16" | "int8" | "int4" -> enum al_kv_dtype, or -1. */
int al_kv_dtype_parse(const char *name);
const char *al_kv_dtype_name(int dtype);
size_t al_kv_dtype_size(int dtype);   /* bytes per stored element; dtype < AL_KV_NDTYPES */
int al_kv_dtype_bits(int dtype);      /* 8 or 4 for int8 / int4, else 0 */

/* ---- number formats (exposed for tests) */
uint16_t al_f32_to_bf16(float f);
float al_bf16_to_f32(uint16_t h);
uint16_t al_f32_to_f16(float f);
float al_f16_to_f32(uint16_t h);

/* ---- one layer's cache */
al_kv_cache *al_kv_cache_new(size_t elems, int context, int dtype);
/* Any dtype; for int8 / int4 the row split, group and residual above
 * (key_elems <= elems, group >= 1, residual >= 0; unused for the others). */
al_kv_cache *al_kv_cache_new_quant(size_t elems, size_t key_elems, int context, int dtype,
                                   int group, int residual);
/* The bytes al_kv_cache_new_quant allocates with these arguments:
 *   f32, bf16, f16: context * elems * al_kv_dtype_size
 *   int8, int4:     Q * ceil(elems * bits / 8)            codes
 *                 + 8 * (Q / group) * key_elems            key scales, zeros
 *                 + 8 * Q * ceil((elems - key_elems) / group)  value ones
 *                 + 4 * min(context, residual + group) * elems  the f32 ring
 *   with Q = floor(max(0, context - 1 - residual) / group) * group, the
 *   most rows that are ever quantized. */
size_t al_kv_cache_bytes_for(size_t elems, size_t key_elems, int context, int dtype, int group,
                             int residual);
void al_kv_cache_free(al_kv_cache *c);   /* NULL is fine */
size_t al_kv_cache_bytes(const al_kv_cache *c);   /* storage held */
size_t al_kv_cache_elems(const al_kv_cache *c);
int al_kv_cache_context(const al_kv_cache *c);
int al_kv_cache_dtype(const al_kv_cache *c);

/* Bytes of cache storage currently allocated by this process. */
size_t al_kv_bytes_live(void);

/* Write a whole row (elems floats) at position pos, or n floats of it
 * starting at element off. pos < context. */
void al_kv_row_put(al_kv_cache *c, int pos, const float *src);
void al_kv_put(al_kv_cache *c, int pos, int off, int n, const float *src);
/* Read row pos back into dst (elems floats). */
void al_kv_row_get(const al_kv_cache *c, int pos, float *dst);
/* Rows t0 .. t0+n-1 as f32, row stride elems: a pointer into the storage
 * for an f32 cache, else converted into tmp (n * elems floats, n <=
 * AL_KV_TILE) and tmp returned. */
const float *al_kv_rows(const al_kv_cache *c, int t0, int n, float *tmp);

/* ---- matrix-vector products for one token. At batch 1 cblas_sgemm would
 * repack the whole weight matrix on every call, costing more than the
 * product itself; these go through cblas_sgemv. Row-major, leading
 * dimension lda. */
/* y (M) = alpha * A (M, N) . x (N) + beta * y */
void al_gemv_n(float *y, const float *A, int lda, const float *x, int M, int N, float alpha,
               float beta);
/* y (N) = alpha * A (M, N)^T . x (M) + beta * y */
void al_gemv_t(float *y, const float *A, int lda, const float *x, int M, int N, float alpha,
               float beta);
/* out (OC) = w (OC, IC) . x (IC): al_linear_forward for one row. A large
 * w is read by the pool's threads, each its share of the rows (a fixed
 * cut: the same thread count gives the same bits). */
void al_linear_row(float *out, const float *x, const float *w, int IC, int OC);

/* ---- attention of one new token over the cache (the decode core the
 * variants share). Query head h reads group h / (H / G) (as al_sdpa_*).
 *   q (H, dqk)  -> out (H, dv)
 * Keys of group g are elements [koff + g*dqk, +dqk) of each row 0..n-1,
 * values [voff + g*dv, +dv). softmax(scale * q.k) over the n rows,
 * computed in one pass over the rows, AL_KV_TILE at a time, with an online
 * softmax (the result differs from a two-pass softmax by rounding only).
 * S holds AL_KV_ATTEND_S(H) floats; tile AL_KV_TILE * elems (unused for
 * f32).
 * With several threads and more than one block of rows, the rows are cut
 * into one contiguous share per thread (whole blocks); each thread keeps
 * its own online softmax in the pool's scratch (S and tile are then not
 * used) and the shares are merged in order. Deterministic: the same
 * inputs and thread count give the same bits; another thread count
 * differs by rounding. */
void al_kv_attend(float *out, float *S, float *tile, const float *q, const al_kv_cache *c,
                  int n, int H, int G, int dqk, int dv, int koff, int voff, float scale);

/* The same with each group's key made of two slices of the row: elements
 * [koff + g*dqk, +dqk) then [koff2 + g*kstride2, +dqk2) (kstride2 0: one
 * slice shared by every group, as GTA's RoPE half; values [voff + g*dv,
 * +dv) as above). q (H, dqk + dqk2), each head's first dqk against the
 * first slice. The same tiled, bf16-aware, threaded loop and scratch as
 * al_kv_attend (S: AL_KV_ATTEND_S(H), tile: AL_KV_TILE * elems); dqk2 0
 * is al_kv_attend. */
void al_kv_attend2(float *out, float *S, float *tile, const float *q, const al_kv_cache *c,
                   int n, int H, int G, int dqk, int koff, int dqk2, int koff2, int kstride2,
                   int dv, int voff, float scale);
/* The same for B sequences at once, one new token each: token b, at
 * position pos[b], queries q[b] (H, dqk) over rows 0..min(pos[b], rows - 1)
 * of its own cache caches[b] (its own row written first; rows the cache's
 * al_kv_cache_context, so a ring of al_kv_ring_row is read whole once it
 * is full), out (B, H, dv); the layout
 * arguments are shared. Sequences are spread
 * over the pool's threads, each computed as al_kv_attend computes it at
 * one thread; a single sequence has its rows split as above. Scratch is
 * the pool's. (For variants' decode_batch.) */
void al_kv_attend_batch(float *out, const float *q, al_kv_cache *const *caches, const int *pos,
                        int B, int H, int G, int dqk, int dv, int koff, int voff, float scale);

/* ---- a bounded cache for sliding-window attention with sinks (local):
 * positions 0..sinks-1 keep rows 0..sinks-1, later positions share a ring
 * of `window` rows after them. At position pos the rows filled are
 * 0..al_kv_ring_len(pos)-1, and they hold exactly the keys a query at pos
 * sees under the band (j < sinks or pos - window < j <= pos), so
 * al_kv_attend over n = al_kv_ring_len rows is the windowed attention:
 * softmax does not care in which order the rows lie, and RoPE'd keys carry
 * their positions with them. */
/* Rows such a cache needs for `context` tokens. */
static inline int al_kv_ring_rows(int window, int sinks, int context)
{
    return context < sinks + window ? context : sinks + window;
}
/* The row of position pos. */
static inline int al_kv_ring_row(int pos, int window, int sinks)
{
    return pos < sinks ? pos : sinks + (pos - sinks) % window;
}
/* Rows a query at position pos reads (filled rows 0..n-1). */
static inline int al_kv_ring_len(int pos, int window, int sinks)
{
    return al_kv_ring_rows(window, sinks, pos + 1);
}

#endif
