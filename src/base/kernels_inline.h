/*
 * kernels_inline.h - the helpers kernels.c and kernels_attn.c share: the
 * vectorising expf, row sums and maxima in a fixed order, and the softmax
 * row that both attention and the cross-entropy take. Internal to base/;
 * every function is static, one copy per file that includes it.
 */
#ifndef AL_KERNELS_INLINE_H
#define AL_KERNELS_INLINE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "al_kernels.h"

/* A helper a file may not call: no unused-function warning for it. */
#define AL_KHELPER __attribute__((unused))

AL_KHELPER static int imin(int a, int b) { return a < b ? a : b; }

/* Elements per chunk of an elementwise loop, and rows per chunk of a row
 * loop of width C: enough work that a chunk outweighs waking a thread. */
#define EW_GRAIN 16384
AL_KHELPER static long row_grain(long C) { return C >= 4096 ? 1 : 4096 / C; }

/* ------------------------------------------------------------- exp */

/* e^x in float, written so that a loop of it vectorises: Cephes' expf
 * (range reduction by ln 2 in two parts, degree-6 polynomial, about 1 ulp).
 * Arguments below -87.3 give 0 (-inf included) rather than a subnormal,
 * above 88 they are clamped; NaN stays NaN. */
static inline float fexp(float x0)
{
    float x = x0 < -87.3f ? -87.3f : x0;
    x = x > 88.0f ? 88.0f : x;
    float fn = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round */
    float r = x - fn * 0.693359375f;
    r = r - fn * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * (r * r) + r + 1.0f;
    int n = (int)(fn > -127.0f ? fn : -127.0f);   /* NaN takes -127: y is NaN anyway */
    uint32_t bits = (uint32_t)(n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x0 < -87.3f ? 0.0f : y * scale;
}

/* x[j] = fexp(x[j] - shift) for j < n. */
AL_CLONES AL_KHELPER static void exp_shifted(float *x, float shift, int n)
{
    for (int j = 0; j < n; j++) x[j] = fexp(x[j] - shift);
}

/* x[j] = fexp(x[j] - shift) * scale: exp_shifted and a scaling in one pass,
 * the same bits as the two passes. */
AL_CLONES AL_KHELPER static void exp_shifted_scaled(float *x, float shift, float scale, int n)
{
    for (int j = 0; j < n; j++) x[j] = fexp(x[j] - shift) * scale;
}

/* Sum in double over eight interleaved partial sums, combined in a fixed
 * order: the same bits on every instruction set, 8x shorter dependency. */
__attribute__((always_inline)) static inline double sum_d(const float *x, int n)
{
    double s[8] = {0};
    int j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) s[l] += x[j + l];
    double t = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; j < n; j++) t += x[j];
    return t;
}

__attribute__((always_inline)) static inline double dot_d(const float *x, const float *y, int n)
{
    double s[8] = {0};
    int j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) s[l] += (double)x[j + l] * y[j + l];
    double t = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    for (; j < n; j++) t += (double)x[j] * y[j];
    return t;
}

__attribute__((always_inline)) static inline float row_max(const float *x, int n)
{
    float m[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
                  -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    int j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++) m[l] = x[j + l] > m[l] ? x[j + l] : m[l];
    for (; j < n; j++) m[0] = x[j] > m[0] ? x[j] : m[0];
    float mx = m[0];
    for (int l = 1; l < 8; l++) mx = m[l] > mx ? m[l] : mx;
    return mx;
}

/* Softmax of a row in place; returns 1 / sum(e) and leaves the row's max
 * in *mx: the two numbers that rebuild the row from its scores. */
AL_CLONES AL_KHELPER static float softmax_row_stats(float *x, int n, float *mx)
{
    *mx = row_max(x, n);
    exp_shifted(x, *mx, n);
    float inv = (float)(1.0 / sum_d(x, n));
    for (int j = 0; j < n; j++) x[j] *= inv;
    return inv;
}


#endif
