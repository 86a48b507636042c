/*
 * mla.c - multi-head latent attention (DeepSeek-V2 §2.1, Appendix C).
 *
 * K and V of every head are expanded from one normalised latent per token,
 * c = rmsnorm(wdkv . x) [d_latent]; position enters through a decoupled
 * RoPE key k_r = rope(wkr . x) [d_rope] shared by all heads. The cache holds
 * c and k_r only: d_latent + d_rope floats per token per layer.
 *
 *   queries   q = wq . x          or, compressed, c_q = rmsnorm(wdq . x),
 *             q_r = rope(wqr . x)                  q = wuq . c_q, q_r = rope(wqr . c_q)
 *   keys      k_h = [wuk_h . c, k_r]      values v_h = wuv_h . c
 *   score     (q_h . k_c,h + q_r,h . k_r) / sqrt(d_head + d_rope)
 *
 * Decoding absorbs the up-projections (DeepSeek-V2 App. C): q_h . (wuk_h c)
 * = (wuk_h^T q_h) . c, and sum_t p_t wuv_h c_t = wuv_h (sum_t p_t c_t), so
 * attention runs over the cached latents directly, as multi-query
 * attention with one shared key [c | k_r] and one shared value c.
 *
 * This is grouped latent attention (gla.c) with one latent head, tensor for
 * tensor (the same names and shapes, so checkpoints are interchangeable)
 * and operation for operation (the same products in the same order, so the
 * same bits): mla is gla's code with h_c = 1, as mha is gqa's with G = H.
 */
#include <stdlib.h>

#include <attnlab/attnlab_variant.h>
#include "gla_internal.h"

enum { SET_D_LATENT, SET_D_ROPE, SET_D_Q_LATENT, N_SETTINGS };

static const al_setting mla_settings[] = {
    {"d_latent", AL_SET_INT, 0, 1, "latent width d_c: the cached K/V state per token"},
    {"d_rope", AL_SET_INT, 0, 1, "decoupled RoPE key width d_h^R (even), shared by all heads"},
    {"d_q_latent", AL_SET_INT, 0, 0, "query latent width d_c'; 0 = no query compression"},
    {NULL, 0, 0, 0, NULL},
};
AL_SETTINGS_MATCH(mla_settings, N_SETTINGS);

static void *mla_init(const al_variant *v, const al_attn_shape *s, char *err, size_t n)
{
    return al_gla_new(s, al_set_int(s, SET_D_LATENT), al_set_int(s, SET_D_ROPE), 1,
                      al_set_int(s, SET_D_Q_LATENT), err, n);
}

const al_variant al_variant_mla = {
    .api_version = AL_VARIANT_API_VERSION,
    .name = "mla",
    .description = "multi-head latent attention (DeepSeek-V2): caches a d_latent latent and a "
                   "shared d_rope RoPE key",
    .settings = mla_settings,
    .init = mla_init,
    .fini = free,
    .train = &al_gla_train,
    .decode = &al_gla_decode_table,
    .pictures = &al_gla_pictures,
    .costs = &al_gla_costs,
};
