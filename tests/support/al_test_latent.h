/*
 * al_test_latent.h - the naive decode of the latent variants (mla, gla),
 * an oracle for their absorbed decode.
 *
 * The variants' decode never forms a head's keys or values: it folds wuk
 * into the query and wuv into the output (weight absorption). This oracle
 * takes the textbook path: it computes the new token's queries and cache
 * row [c_0 .. c_{hc-1} | k_r] (and writes the row, as decode does), reads
 * every cached row back, expands k_h = wuk_h . c_g(h) and v_h = wuv_h .
 * c_g(h) for every token with plain loops, and attends in double. mla is
 * the case hc = 1. p holds the variant's tensors in its order: (wq | wdq,
 * q_norm, wuq), wqr, wdkv, kv_norm, wkr, wuk, wuv, wo.
 */
#ifndef AL_TEST_LATENT_H
#define AL_TEST_LATENT_H

#include "attnlab_variant.h"

/* The latent dimensions: d_latent per head, d_rope, latent heads, query
 * latent (0: none). */
typedef struct al_test_latent {
    int dc, dr, hc, dq;
} al_test_latent;

/* Scratch floats al_test_latent_decode needs at a context of `context`. */
size_t al_test_latent_scratch(const al_attn_shape *s, al_test_latent l, int context);
/* One token at pos, out (D), as the variant's decode. */
void al_test_latent_decode(const al_attn_shape *s, al_test_latent l, float *out, float *scratch,
                           const float *x, float *const *p, al_kv_cache *cache, int pos);

#endif
