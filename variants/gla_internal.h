/*
 * gla_internal.h - GLA's naive decode path, for tests only.
 *
 * The public decode (gla.c) never forms a head's keys or values: it folds
 * wuk into the query and wuv into the output (weight absorption), each
 * head's query padded with zeros to the whole cached row. This header
 * exposes the textbook path as an oracle: it reads the same cache, expands
 * k_h = wuk_h . c_g(h) and v_h = wuv_h . c_g(h) for every cached token with
 * plain loops and attends in double. Same arguments as the ops table's
 * decode; scratch holds al_gla_naive_scratch_floats(s, context) floats.
 */
#ifndef AL_GLA_INTERNAL_H
#define AL_GLA_INTERNAL_H

#include <attnlab/attnlab_variant.h>

size_t al_gla_naive_scratch_floats(const al_attn_shape *s, int context);
void al_gla_decode_naive(const al_attn_shape *s, float *out, float *scratch, const float *x,
                         float *const *p, al_kv_cache *cache, int pos);

#endif
