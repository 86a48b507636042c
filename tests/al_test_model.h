/*
 * al_test_model.h - building tiny models and configs for tests.
 */
#ifndef AL_TEST_MODEL_H
#define AL_TEST_MODEL_H

#include "al_model.h"

/* A tiny model config for variant `name`: required settings get the first
 * of 2, 1, 4, 8 that the variant's check accepts. Returns 0 or -1. */
int al_test_tiny_config(al_model_config *c, const al_variant_ops *v, int n_layer,
                        int d_model, int n_head, int d_head, int seq_len, int vocab);
/* The generic variant checks (tests/test_variants.c) on one variant:
 * finite-difference gradients (causal, unmasked, each optional setting),
 * the causal property, bit-for-bit determinism. */
void al_test_variant_generic(const al_variant_ops *v);
/* Relative error ||a - b|| / max(||a||, ||b||, tiny) over n doubles. */
double al_test_rel_err(const double *a, const double *b, size_t n);

#endif
