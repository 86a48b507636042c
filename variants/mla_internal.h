/*
 * mla_internal.h - MLA's naive decode path, for tests only.
 *
 * The public decode (mla.c) never forms a head's keys or values: it folds
 * wuk into the query and wuv into the output (weight absorption). This
 * header exposes the textbook path as an oracle: it reads the same cache,
 * expands k_h = wuk_h . c and v_h = wuv_h . c for every cached token and
 * attends with plain loops. Same arguments as the ops table's decode.
 */
#ifndef AL_MLA_INTERNAL_H
#define AL_MLA_INTERNAL_H

#include <attnlab/attnlab_variant.h>

size_t al_mla_naive_scratch_floats(const al_attn_shape *s, int context);
void al_mla_decode_naive(const al_attn_shape *s, float *out, float *scratch, const float *x,
                         float *const *p, al_kv_cache *cache, int pos);

#endif
