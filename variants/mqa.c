/*
 * mqa.c - multi-query attention (Shazeer 2019): one K/V head shared by all
 * query heads, G = 1. The smallest cache of the family (gqa.c).
 */
#include <stdlib.h>

#include <attnlab/attnlab_variant.h>

#include "gqa_family.h"

static void *mqa_init(const al_variant *v, const al_attn_shape *s, char *err, size_t n)
{
    return al_gqa_new(s, 1, (al_gqa_band){0, 0});
}

const al_variant al_variant_mqa = {
    .api_version = AL_VARIANT_API_VERSION,
    .name = "mqa",
    .description = "multi-query attention: a single K/V head shared by all query heads",
    .init = mqa_init,
    .decode = &al_gqa_decode_table,
    AL_GQA_FAMILY_TABLE,
};
