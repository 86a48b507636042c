/*
 * al_size.h - checked size arithmetic: every size, count and byte figure
 * computed from settings (parameters, activation floats, KV-cache bytes,
 * quantization groups, windows and sinks) goes through these, so that a
 * product of legal-looking settings that does not fit is an error naming
 * the keys (the caller's), never a wrapped number or an assertion.
 *
 * Each returns 0 with the result in *out, or -1 on overflow (*out is then
 * unspecified). The operands are size_t; a caller with ints casts them
 * after checking they are >= 0.
 */
#ifndef AL_SIZE_H
#define AL_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* *out = a * b */
static inline int al_size_mul(size_t a, size_t b, size_t *out)
{
    return __builtin_mul_overflow(a, b, out) ? -1 : 0;
}

/* *out = a + b */
static inline int al_size_add(size_t a, size_t b, size_t *out)
{
    return __builtin_add_overflow(a, b, out) ? -1 : 0;
}

/* *out = a * b + c */
static inline int al_size_mad(size_t a, size_t b, size_t c, size_t *out)
{
    size_t p;
    return al_size_mul(a, b, &p) || al_size_add(p, c, out) ? -1 : 0;
}

/* *out = a * b * c */
static inline int al_size_mul3(size_t a, size_t b, size_t c, size_t *out)
{
    size_t p;
    return al_size_mul(a, b, &p) || al_size_mul(p, c, out) ? -1 : 0;
}

/* *out = a * b, saturating at UINT64_MAX (a lower bound for a refusal). */
static inline uint64_t al_size_sat_mul(uint64_t a, uint64_t b)
{
    uint64_t p;
    return __builtin_mul_overflow(a, b, &p) ? UINT64_MAX : p;
}

/* a + b, saturating at UINT64_MAX. */
static inline uint64_t al_size_sat_add(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

#endif
