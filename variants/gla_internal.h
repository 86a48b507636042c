/*
 * gla_internal.h - GLA's code for the variants built on it: mla is gla with
 * one latent head (mla.c), as mha is gqa with n_head groups.
 *
 * The context of one layer is made by al_gla_new from the latent
 * dimensions; the sub-tables serve every such layer (gla.c).
 */
#ifndef AL_GLA_INTERNAL_H
#define AL_GLA_INTERNAL_H

#include <attnlab/attnlab_variant.h>

/* The context of one layer with latent width dc per latent head, RoPE key
 * width dr, hc latent heads and a query latent of dq (0: none), or NULL
 * with a message naming the first bad key in the order d_latent, d_rope,
 * n_latent_head, d_q_latent. Freed with free. */
void *al_gla_new(const al_attn_shape *s, int dc, int dr, int hc, int dq, char *err, size_t n);

extern const al_variant_train al_gla_train;
extern const al_variant_decode al_gla_decode_table;
extern const al_variant_pictures al_gla_pictures;
extern const al_variant_costs al_gla_costs;

#endif
