/*
 * local.c - local (sliding-window) attention with attention sinks: the
 * local layers of Mistral 7B and Gemma 3 (Beltagy et al. 2020, Longformer),
 * with StreamingLLM's sinks (Xiao et al. 2023).
 *
 * Query t sees the last `window` positions, itself included (keys
 * t-window+1 .. t), and the first `sinks` positions, which stay visible to
 * every query. K/V heads are grouped as in gqa (n_kv_head, 0: n_head);
 * parameters and RoPE are the GQA family's, so a window covering the whole
 * sequence with no sinks gives exactly gqa's function. With the causal-mask
 * ablation (model.causal: false) the band is symmetric, |t - s| < window.
 *
 * Training masks the band inside the shared attention kernel (al_flash.h):
 * fused skips the tiles outside the band, dense computes the full block.
 * The layer is the GQA family's (gqa.c) with a band in its context.
 * Decode keeps a bounded cache (decode->kv_rows): rows
 * 0..sinks-1 for the sinks, then a ring of `window` rows (al_kv_ring_row),
 * so a layer's cache stops growing at sinks + window rows whatever the
 * context, and its filled rows are exactly the keys the band shows the new
 * token: al_kv_attend over them equals the training forward.
 */
#include <stdio.h>
#include <stdlib.h>

#include <attnlab/attnlab_variant.h>
#include <attnlab/al_kvcache.h>

#include "gqa_family.h"

enum { SET_WINDOW, SET_N_KV_HEAD, SET_SINKS, N_SETTINGS };

static const al_setting local_settings[] = {
    {"window", AL_SET_INT, 0, 1, "positions each query attends to, itself included (>= 1)"},
    {"n_kv_head", AL_SET_INT, 0, 0, "K/V heads G, 0 for n_head; must divide n_head"},
    {"sinks", AL_SET_INT, 0, 0, "first positions every query also sees (StreamingLLM), >= 0"},
    {NULL, 0, 0, 0, NULL},
};
AL_SETTINGS_MATCH(local_settings, N_SETTINGS);

static void *local_init(const al_variant *v, const al_attn_shape *s, char *err, size_t errlen)
{
    int G = al_set_int(s, SET_N_KV_HEAD);
    if (s->set[SET_WINDOW] < 1) {
        snprintf(err, errlen, "'window' (%g) must be at least 1", s->set[SET_WINDOW]);
        return NULL;
    }
    if (G < 0 || (G > 0 && s->n_head % G != 0)) {
        snprintf(err, errlen, "'n_kv_head' (%d) must divide 'n_head' (%d), or be 0 for "
                 "n_head", G, s->n_head);
        return NULL;
    }
    if (s->set[SET_SINKS] < 0) {
        snprintf(err, errlen, "'sinks' (%g) must be at least 0", s->set[SET_SINKS]);
        return NULL;
    }
    al_gqa_band band = {al_set_int(s, SET_WINDOW), al_set_int(s, SET_SINKS)};
    return al_gqa_new(s, G ? G : s->n_head, band);
}

/* The sinks and a ring of `window` rows; fewer for a short context. */
static int local_kv_rows(const void *ctx, int context)
{
    const al_gqa_ctx *c = ctx;
    return al_kv_ring_rows(c->band.window, c->band.sinks, context);
}

/* gqa's rows, in a ring: prefill and decode map positions to ring rows by
 * the band in the context, and attend over the filled rows, which are
 * exactly the band's keys (al_kvcache.h). */
static const al_variant_decode local_decode = {AL_GQA_DECODE_MEMBERS, .kv_rows = local_kv_rows};

/* model.kv_share: gqa's consumer over the producer's k, v, under the same
 * band; in decode, the producer's ring (the group shares window and sinks,
 * so its filled rows are exactly the band's keys for every member). */
const al_variant al_variant_local = {
    .api_version = AL_VARIANT_API_VERSION,
    .name = "local",
    .description = "sliding-window attention over the last `window` positions, with "
                   "`sinks` first positions always visible; bounded cache",
    .settings = local_settings,
    .init = local_init,
    .decode = &local_decode,
    AL_GQA_FAMILY_TABLE,
};
