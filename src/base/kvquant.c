/*
 * kvquant.c - int8/int4 KV-cache storage, KIVI-style (Liu et al. 2024,
 * arXiv 2402.02750): keys per channel, values per token, asymmetric
 * (scale and zero-point) groups, the newest tokens kept at f32.
 *
 * One group of n numbers x with min mn and max mx is stored as
 *   scale = (mx - mn) / (2^bits - 1),  zero = mn,
 *   code  = round((x - zero) / scale)  clamped to [0, 2^bits - 1],
 * and read back as code * scale + zero, so |x - read| <= scale / 2
 * (a constant group, scale 0, reads back exactly).
 */
#include "al_kvquant.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "al_size.h"
#include "al_util.h"

struct al_kvq {
    size_t elems, kel;      /* floats per row; of them, per-channel (key) ones */
    int context, bits, group, residual;
    int qrows, ring;        /* rows that can be quantized; f32 rows kept */
    size_t rowbytes, vgroups;
    int q;                  /* rows [0, q) are quantized now */
    float *ks, *kz;         /* (qrows / group, kel) */
    float *vs, *vz;         /* (qrows, vgroups) */
    float *f32;             /* (ring, elems): row t at t % ring */
    uint8_t *codes;         /* (qrows, rowbytes) */
};

typedef struct kvq_shape {
    int qrows, ring;
    size_t rowbytes, vgroups, floats;
    int over;               /* a size does not fit in size_t */
} kvq_shape;

/* Sizes of every part. Group g = [g*group, (g+1)*group) is quantized when
 * row p >= (g+1)*group + residual is written, and p < context. */
static kvq_shape shape_of(size_t elems, size_t kel, int context, int bits, int group,
                          int residual)
{
    AL_ASSERT(elems > 0 && kel <= elems && context > 0 && (bits == 8 || bits == 4) &&
              group >= 1 && residual >= 0);
    kvq_shape s;
    long span = (long)context - 1 - residual, ring = (long)residual + group;   /* no int wrap */
    s.qrows = span > 0 ? (int)(span / group * group) : 0;
    s.ring = ring < context ? (int)ring : context;
    s.vgroups = (elems - kel) / (size_t)group + ((elems - kel) % (size_t)group != 0);
    size_t keys, vals, f32;
    s.over = al_size_mad(elems, (size_t)bits, 7, &s.rowbytes) ||
             al_size_mul((size_t)(s.qrows / group), kel, &keys) ||
             al_size_mad((size_t)s.qrows, s.vgroups, keys, &vals) ||
             al_size_mul((size_t)s.ring, elems, &f32) || al_size_mad(2, vals, f32, &s.floats);
    s.rowbytes /= 8;
    return s;
}

size_t al_kvq_bytes(size_t elems, size_t key_elems, int context, int bits, int group,
                    int residual)
{
    kvq_shape s = shape_of(elems, key_elems, context, bits, group, residual);
    size_t codes, bytes;
    if (s.over || al_size_mul((size_t)s.qrows, s.rowbytes, &codes) ||
        al_size_mad(s.floats, sizeof(float), codes, &bytes))
        return SIZE_MAX;   /* more than can exist: the callers' estimates refuse it */
    return bytes;
}

al_kvq *al_kvq_new(size_t elems, size_t key_elems, int context, int bits, int group,
                   int residual)
{
    kvq_shape s = shape_of(elems, key_elems, context, bits, group, residual);
    AL_ASSERT(!s.over);   /* the callers sized it by al_kvq_bytes first */
    al_kvq *q = al_calloc(1, sizeof *q);
    *q = (al_kvq){elems, key_elems, context, bits, group, residual, s.qrows, s.ring,
                  s.rowbytes, s.vgroups, 0, NULL, NULL, NULL, NULL, NULL, NULL};
    size_t nk = (size_t)(s.qrows / group) * key_elems, nv = (size_t)s.qrows * s.vgroups;
    float *p = al_calloc(al_kvq_bytes(elems, key_elems, context, bits, group, residual), 1);
    q->ks = p, q->kz = p + nk, q->vs = p + 2 * nk, q->vz = p + 2 * nk + nv;
    q->f32 = p + 2 * nk + 2 * nv;
    q->codes = (uint8_t *)(q->f32 + (size_t)s.ring * elems);
    return q;
}

void al_kvq_free(al_kvq *q)
{
    if (!q) return;
    free(q->ks);   /* the one allocation */
    free(q);
}

/* ------------------------------------------------------------ codes */

static void put_code(uint8_t *row, size_t j, int bits, unsigned code)
{
    if (bits == 8) {
        row[j] = (uint8_t)code;
        return;
    }
    int sh = (int)(j & 1) * 4;
    row[j >> 1] = (uint8_t)((row[j >> 1] & ~(0xFu << sh)) | (code << sh));
}

static unsigned get_code(const uint8_t *row, size_t j, int bits)
{
    return bits == 8 ? row[j] : (row[j >> 1] >> ((j & 1) * 4)) & 0xFu;
}

/* scale and zero of n numbers (see the head of the file). */
static void range_of(const float *x, size_t n, int bits, float *scale, float *zero)
{
    float mn = x[0], mx = x[0];
    for (size_t i = 1; i < n; i++) {
        float v = x[i];
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
    }
    *zero = mn;
    *scale = (mx - mn) / (float)((1 << bits) - 1);
}

static unsigned code_of(float x, float scale, float zero, int bits)
{
    if (!(scale > 0)) return 0;
    float c = floorf((x - zero) / scale + 0.5f), top = (float)((1 << bits) - 1);
    return (unsigned)(c < 0 ? 0 : c > top ? top : c);
}

/* ------------------------------------------------------------ quantize */

static const float *ring_row(const al_kvq *q, int t)
{
    return q->f32 + (size_t)(t % q->ring) * q->elems;
}

/* Channel j of rows t0 .. t0+group-1 (keys): its scale and zero, then
 * its codes. Rows are read through the ring one at a time (a group may
 * wrap around it), so that nothing is allocated. */
static void quantize_channel(al_kvq *q, int t0, size_t j, float *sc, float *ze)
{
    float mn = ring_row(q, t0)[j], mx = mn;
    for (int i = 1; i < q->group; i++) {
        float v = ring_row(q, t0 + i)[j];
        mn = v < mn ? v : mn;
        mx = v > mx ? v : mx;
    }
    *ze = mn;
    *sc = (mx - mn) / (float)((1 << q->bits) - 1);
    for (int i = 0; i < q->group; i++)
        put_code(q->codes + (size_t)(t0 + i) * q->rowbytes, j, q->bits,
                 code_of(ring_row(q, t0 + i)[j], *sc, *ze, q->bits));
}

/* Row t (values): each group of channels from kel on, its scale, zero
 * and codes. */
static void quantize_token(al_kvq *q, int t)
{
    const float *x = ring_row(q, t);
    uint8_t *row = q->codes + (size_t)t * q->rowbytes;
    size_t G = (size_t)q->group;
    for (size_t c = 0; c < q->vgroups; c++) {
        size_t j0 = q->kel + c * G, n = q->elems - j0 < G ? q->elems - j0 : G;
        size_t at = (size_t)t * q->vgroups + c;
        range_of(x + j0, n, q->bits, &q->vs[at], &q->vz[at]);
        for (size_t j = j0; j < j0 + n; j++)
            put_code(row, j, q->bits, code_of(x[j], q->vs[at], q->vz[at], q->bits));
    }
}

/* Rows [q->q, q->q + group) leave the ring: keys per channel over the
 * group's tokens, values per token over groups of channels. */
static void quantize_group(al_kvq *q)
{
    int t0 = q->q, g = t0 / q->group;
    for (size_t j = 0; j < q->kel; j++)
        quantize_channel(q, t0, j, q->ks + (size_t)g * q->kel + j, q->kz + (size_t)g * q->kel + j);
    for (int i = 0; i < q->group; i++) quantize_token(q, t0 + i);
    q->q += q->group;
}

void al_kvq_put(al_kvq *q, int pos, int off, int n, const float *src)
{
    AL_ASSERT(pos >= 0 && pos < q->context && off >= 0 && n >= 0 &&
              (size_t)off + (size_t)n <= q->elems);
    if (pos < q->q) {   /* a new sequence from row 0 */
        AL_ASSERT(pos == 0);
        q->q = 0;
    }
    while (q->q + q->group <= pos - q->residual) quantize_group(q);
    AL_ASSERT(pos - q->q < q->ring);   /* rows come in order: its slot is free */
    memcpy((float *)ring_row(q, pos) + off, src, (size_t)n * sizeof(float));
}

/* ------------------------------------------------------------ read */

static void dequant_row(const al_kvq *q, int t, float *dst)
{
    const uint8_t *row = q->codes + (size_t)t * q->rowbytes;
    const float *ks = q->ks + (size_t)(t / q->group) * q->kel, *kz = q->kz + (ks - q->ks);
    for (size_t j = 0; j < q->kel; j++) dst[j] = (float)get_code(row, j, q->bits) * ks[j] + kz[j];
    const float *vs = q->vs + (size_t)t * q->vgroups, *vz = q->vz + (size_t)t * q->vgroups;
    for (size_t j = q->kel; j < q->elems; j++) {
        size_t c = (j - q->kel) / (size_t)q->group;
        dst[j] = (float)get_code(row, j, q->bits) * vs[c] + vz[c];
    }
}

void al_kvq_rows(const al_kvq *q, int t0, int n, float *dst)
{
    AL_ASSERT(t0 >= 0 && n >= 0 && t0 + n <= q->context);
    for (int i = 0; i < n; i++, dst += q->elems) {
        int t = t0 + i;
        if (t < q->q) dequant_row(q, t, dst);
        else memcpy(dst, ring_row(q, t), q->elems * sizeof(float));
    }
}
