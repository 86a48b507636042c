/*
 * al_kvquant.h - the storage of an int8/int4 KV cache (KIVI-style), used
 * by kvcache.c only: the public face is al_kvcache.h.
 *
 * A row of `elems` floats is split at `key_elems`: elements [0, key_elems)
 * are quantized per channel (KIVI's keys: one scale and zero-point per
 * channel per group of `group` tokens), elements [key_elems, elems) per
 * token (KIVI's values: one scale and zero-point per token per group of
 * `group` channels). New rows are kept at f32 in a ring of min(context,
 * residual + group) rows; when row p is first written, every whole group
 * of tokens older than rows p - residual .. p is quantized out of the
 * ring, so at least the `residual` most recent tokens (and the one being
 * written) are always f32.
 *
 * One allocation of exactly al_kvq_bytes(...) bytes, all zero at first:
 *   key scales, key zeros   (groups, key_elems) floats each
 *   value scales, zeros     (qrows, vgroups) floats each
 *   f32 ring                (ring, elems) floats
 *   codes                   (qrows, rowbytes) bytes, int4 two to a byte
 * where qrows = the most rows that can ever be quantized (see kvquant.c).
 */
#ifndef AL_KVQUANT_H
#define AL_KVQUANT_H

#include <stddef.h>

typedef struct al_kvq al_kvq;

/* bits 8 or 4; group >= 1; residual >= 0; key_elems <= elems. */
size_t al_kvq_bytes(size_t elems, size_t key_elems, int context, int bits, int group,
                    int residual);
al_kvq *al_kvq_new(size_t elems, size_t key_elems, int context, int bits, int group,
                   int residual);
void al_kvq_free(al_kvq *q);
/* n floats of row pos from element off. Rows are written in order; a write
 * to a row already quantized starts a new sequence (it must be row 0). */
void al_kvq_put(al_kvq *q, int pos, int off, int n, const float *src);
/* Rows t0 .. t0+n-1 as f32 into dst (n * elems floats). */
void al_kvq_rows(const al_kvq *q, int t0, int n, float *dst);

#endif
