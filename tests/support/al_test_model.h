/*
 * al_test_model.h - building tiny models and configs for tests.
 */
#ifndef AL_TEST_MODEL_H
#define AL_TEST_MODEL_H

#include "al_model.h"
#include "al_check_variant.h"   /* the layer harness and finite differences */

/* A tiny model config for variant `name`: required settings get the first
 * of 2, 1, 4, 8 that the variant's check accepts. Returns 0 or -1. */
int al_test_tiny_config(al_model_config *c, const al_variant *v, int n_layer,
                        int d_model, int n_head, int d_head, int seq_len, int vocab);
/* A tiny model.layer_attention stack: item k is variant vs[k] with the
 * settings al_test_tiny_config gives it alone; the model's one-attention
 * fields mirror item 0 (as decoding leaves them). Returns 0 or -1. */
int al_test_stack_config(al_model_config *c, const al_variant *const *vs, int n_items,
                         int n_layer, int d_model, int n_head, int d_head, int seq_len,
                         int vocab);
/* The conformance suite of `attnlab check-variant` (src/model/
 * check_variant.c) on one variant, in process (tests/test_variants.c):
 * every line must pass. */
void al_test_variant_generic(const al_variant *v);
/* A hand-built 2-layer mha model (tests/test_attention.c): vocabulary 16,
 * d_model 48, 2 heads of 64, seq_len 64; layer 0 head 0 is a
 * previous-token head, layer 1 head 0 an induction head, head 1 of each
 * layer attends uniformly. */
void al_test_planted_model(al_model *m);
/* The attention-picture checks (tests/test_attention.c) on a variant with
 * `probs`, for each optional setting, masked and unmasked: every row is a
 * distribution, entries above the diagonal are exactly 0 under the mask and
 * carry weight without it. Returns the number of models checked. */
int al_test_variant_probs(const al_variant *v);
/* A context of v for shape s (v->init's, which must accept it; free with
 * v->fini): how a test calls a member directly. */
void *al_test_ctx(const al_variant *v, const al_attn_shape *s);
/* The same, kept by the support library for the test's lifetime (made once
 * per variant and shape, freed at exit): for tests that call a member on a
 * shape they hold, al_test_ctx_of(v, &s). */
const void *al_test_ctx_of(const al_variant *v, const al_attn_shape *s);
/* A table of interface version `version` (2 to 4, attnlab_variant_v4.h's
 * layout) named `name`, in a malloc'ed buffer of exactly that version's
 * size (ASan sees a read past it): stub members a model can be built with
 * (one tensor "w" [d_model, d_model], kv_elems d_model + 1, forward
 * recording its shape in al_test_old_seen), the decode-batch pair set (a
 * version-3 member), no decode trio, no sharing. Free it after
 * al_variant_truncate. */
void *al_test_old_table(int version, const char *name);
extern const al_attn_shape *al_test_old_seen;

#endif
