/*
 * mha.c - multi-head attention (Vaswani et al. 2017): every query head has
 * its own K/V head, G = H. The largest cache of the family (gqa.c).
 */
#include <stdlib.h>

#include <attnlab/attnlab_variant.h>

#include "gqa_family.h"

static void *mha_init(const al_variant *v, const al_attn_shape *s, char *err, size_t n)
{
    return al_gqa_new(s, s->n_head, (al_gqa_band){0, 0});
}

const al_variant al_variant_mha = {
    .api_version = AL_VARIANT_API_VERSION,
    .name = "mha",
    .description = "multi-head attention: one K/V head per query head",
    .init = mha_init,
    .decode = &al_gqa_decode_table,
    AL_GQA_FAMILY_TABLE,
};
