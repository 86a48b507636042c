/*
 * mqa.c - multi-query attention (Shazeer 2019): one K/V head shared by all
 * query heads, G = 1. The smallest cache of the family.
 */
#include <attnlab/attnlab_variant.h>

static int family_groups(const al_attn_shape *s) { return 1; }

#define AL_GQA_FAMILY_MEMBERS
#include "gqa_family.h"

const al_variant_ops al_variant_mqa = {
    .api_version = AL_VARIANT_API_VERSION,
    .name = "mqa",
    .description = "multi-query attention: a single K/V head shared by all query heads",
    .settings = NULL,
    .check = NULL,
    .params = family_params,
    .act_floats = family_act_floats,
    .scratch_floats = family_scratch_floats,
    .forward = family_forward,
    .backward = family_backward,
    .kv_elems = family_kv_elems,
    .kv_key_elems = family_kv_key_elems,
    .prefill = family_prefill,
    .decode_scratch_floats = family_decode_scratch_floats,
    .decode = family_decode,
    .probs = family_probs,
    .decode_batch_scratch_floats = family_decode_batch_scratch_floats,
    .decode_batch = family_decode_batch,
    .flags = AL_VARIANT_WRITES_GRADS,
    AL_GQA_FAMILY_SHARE_MEMBERS
};
