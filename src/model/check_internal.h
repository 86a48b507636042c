/*
 * check_internal.h - what check_variant.c and check_harness.c share and
 * nothing else sees: guard floats, buffer helpers, differences.
 */
#ifndef AL_CHECK_INTERNAL_H
#define AL_CHECK_INTERNAL_H

#include <stddef.h>

#include "attnlab_variant.h"

/* NaN-patterned floats after every buffer a variant writes: written ones
 * show an overrun. */
#define AL_CHECK_GUARD 64
void al_check_guard_fill(float *p, size_t n);
/* Guard floats overwritten after p[0..n) (guard of them). */
int al_check_guard_hits(const float *p, size_t n, size_t guard);

size_t al_check_numel(const al_param_spec *s);
/* n zeroed floats (at least one), never NULL. */
float *al_check_fresh(size_t n);
/* max |a - b| over n floats. */
double al_check_max_diff(const float *a, const float *b, size_t n);
/* The same, amax (when given) raised to the largest |b|. */
double al_check_diff_amax(const float *a, const float *b, int n, double *amax);

#endif
