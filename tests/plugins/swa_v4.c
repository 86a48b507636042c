/*
 * swa_v4.c - the example plugin (variants/examples/swa/swa.c) as it was
 * written for interface version 3, before version 5: its source unchanged
 * but for one line, the include of <attnlab/attnlab_variant_v4.h>. Built
 * as is (tests/meson.build) it is the plugin "swa_v4", which must load
 * through the adapter (src/model/variant_compat.c), pass check-variant,
 * train and decode (tests/test_plugin.c).
 *
 * Built with -DFAULTY and one deliberate fault per -D flag, it is the plugin
 * "faulty"; `attnlab check-variant` must fail the check that names the
 * fault (tests/test_check_variant.c):
 *   FAULT_GRAD_PATH      backward drops the value path (no dwv, no dx via v)
 *                        -> gradient.wv
 *   FAULT_ROPE_BACKWARD  backward forgets to rotate dq, dk back -> gradient.wq
 *   FAULT_PREFILL_SLICE  prefill writes the queries where the keys go -> prefill
 *   FAULT_DECODE_POS     decode rotates the query one position late -> decode
 *   FAULT_PROBS_SCALE    probs recomputes the softmax without 1/sqrt(d_head)
 *                        -> probs.forward
 *   FAULT_BF16_SCRATCH   the conversion tile is sized as if a bf16 row took
 *                        half the floats: past 128 rows of a bf16/f16 cache
 *                        decode writes past its scratch -> scratch.decode.bf16
 * Four more break the process that runs them (issue 40 item 5): check-variant
 * must survive each, print a FAIL line naming the check that ran into it and
 * how it ended, and still print its summary:
 *   FAULT_ROW_SIZE       kv_elems says half the row decode and prefill write
 *                        -> the cache's bounds assert: decode killed by SIGABRT
 *   FAULT_SCRATCH_OVERRUN scratch_floats counts only dy: backward clears and
 *                        writes dq, dk, dv past it -> gradient killed by SIGSEGV
 *   FAULT_ABORT          decode calls abort() -> decode killed by SIGABRT
 *   FAULT_HANG           probs without the causal mask never returns -> probs
 *                        timed out
 * With -DFAULTY alone (FAULT_NONE) it is a correct variant named "faulty".
 * Unlike swa, faulty's window defaults to 4096 (the whole context of every
 * check), so decode reads past one cache tile.
 *
 * Multi-head attention in which query t sees only the `window` most recent
 * positions, itself included: keys t-window+1 .. t. With the causal-mask
 * ablation (causal: false) the band is symmetric, |t - s| < window.
 * Parameters, RoPE and scaling are those of `mha`. Decoding writes the row
 * of position pos at row pos (version 3 has no kv_rows) and attends over
 * rows pos-window+1 .. pos.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attnlab/attnlab_variant_v4.h>
#include <attnlab/al_kvcache.h>

enum { SET_WINDOW };

static const al_setting swa_settings[] = {
#ifdef FAULTY
    {"window", AL_SET_INT, 4096, 0, "positions each query attends to, itself included (>= 1)"},
#else
    {"window", AL_SET_INT, 0, 1, "positions each query attends to, itself included (>= 1)"},
#endif
    {NULL, 0, 0, 0, NULL},
};

static int swa_check(const al_attn_shape *s, char *err, size_t errlen)
{
    if (s->set[SET_WINDOW] < 1) {
        snprintf(err, errlen, "'window' (%g) must be at least 1", s->set[SET_WINDOW]);
        return -1;
    }
    return 0;
}

/* The keys query t may attend to: lo..hi inclusive. */
static void band(const al_attn_shape *s, int t, int T, int *lo, int *hi)
{
    int w = al_set_int(s, SET_WINDOW);
    *lo = t - w + 1 > 0 ? t - w + 1 : 0;
    *hi = s->causal ? t : (t + w - 1 < T - 1 ? t + w - 1 : T - 1);
}

static int swa_params(const al_attn_shape *s, al_param_spec *out)
{
    int D = s->d_model, Hd = s->n_head * s->d_head;
    out[0] = (al_param_spec){"wq", Hd, D, AL_INIT_NORMAL};
    out[1] = (al_param_spec){"wk", Hd, D, AL_INIT_NORMAL};
    out[2] = (al_param_spec){"wv", Hd, D, AL_INIT_NORMAL};
    out[3] = (al_param_spec){"wo", D, Hd, AL_INIT_RESID};
    return 4;
}

/* Saved activations: q, k (RoPE'd), v, y (BT, H*dh) | att (B, H, T, T) */
static size_t swa_act_floats(const al_attn_shape *s, int B, int T)
{
    return 4 * (size_t)B * T * s->n_head * s->d_head + (size_t)B * s->n_head * T * T;
}

/* Backward scratch: dy, dq, dk, dv (BT, H*dh) | dscores (T, T) */
static size_t swa_scratch_floats(const al_attn_shape *s, int B, int T)
{
#ifdef FAULT_SCRATCH_OVERRUN
    return (size_t)B * T * s->n_head * s->d_head;
#else
    return 4 * (size_t)B * T * s->n_head * s->d_head + (size_t)T * T;
#endif
}

static size_t swa_kv_elems(const al_attn_shape *s)
{
#ifdef FAULT_ROW_SIZE
    return (size_t)s->n_head * s->d_head;
#else
    return 2 * (size_t)s->n_head * s->d_head;
#endif
}

/* ------------------------------------------------------------ attention core */

/* att (T, T) = softmax over the band of q . k^T * scale, zero outside it;
 * y (T, dh) = att . v. q, k, v, y are one head's columns (row stride ld). */
static void head_forward(const al_attn_shape *s, float *y, float *att, const float *q,
                         const float *k, const float *v, int T, int ld, float scale)
{
    int dh = s->d_head;
    al_gemm_nt(att, T, q, ld, k, ld, T, T, dh, scale, 0.0f);
    for (int t = 0; t < T; t++) {
        int lo, hi;
        band(s, t, T, &lo, &hi);
        float *row = att + (size_t)t * T;
        al_softmax_row(row + lo, hi - lo + 1);
        memset(row, 0, (size_t)lo * sizeof(float));
        memset(row + hi + 1, 0, (size_t)(T - 1 - hi) * sizeof(float));
    }
    al_gemm_nn(y, ld, att, T, v, ld, T, dh, T, 1.0f, 0.0f);
}

/* Given dy: dq, dk, dv += ...; ds is (T, T) scratch. Entries outside the
 * band have att = 0 and so get no gradient. */
static void head_backward(const al_attn_shape *s, float *dq, float *dk, float *dv, float *ds,
                          const float *dy, const float *att, const float *q, const float *k,
                          const float *v, int T, int ld, float scale)
{
    int dh = s->d_head;
    al_gemm_nt(ds, T, dy, ld, v, ld, T, T, dh, 1.0f, 0.0f);   /* datt = dy . v^T */
    al_gemm_tn(dv, ld, att, T, dy, ld, T, dh, T, 1.0f, 1.0f); /* dv += att^T . dy */
    for (int t = 0; t < T; t++) {                              /* softmax backward */
        const float *a = att + (size_t)t * T;
        float *d = ds + (size_t)t * T, dot = 0.0f;
        for (int j = 0; j < T; j++) dot += a[j] * d[j];
        for (int j = 0; j < T; j++) d[j] = a[j] * (d[j] - dot) * scale;
    }
    al_gemm_nn(dq, ld, ds, T, k, ld, T, dh, T, 1.0f, 1.0f);   /* dq += ds . k */
    al_gemm_tn(dk, ld, ds, T, q, ld, T, dh, T, 1.0f, 1.0f);   /* dk += ds^T . q */
}

/* ------------------------------------------------------------ ops */

static void swa_forward(const al_attn_shape *s, float *out, float *act, float *scratch,
                        const float *x, float *const *p, int B, int T)
{
    int D = s->d_model, H = s->n_head, dh = s->d_head, Hd = H * dh, BT = B * T;
    size_t n = (size_t)BT * Hd;
    float *q = act, *k = q + n, *v = k + n, *y = v + n, *att = y + n;
    float scale = 1.0f / sqrtf((float)dh);
    al_linear_forward(q, x, p[0], BT, D, Hd);   /* q = x . wq^T */
    al_linear_forward(k, x, p[1], BT, D, Hd);   /* k = x . wk^T */
    al_linear_forward(v, x, p[2], BT, D, Hd);   /* v = x . wv^T */
    al_rope_forward(q, B, T, H, dh, Hd, 0, s->rope_base);
    al_rope_forward(k, B, T, H, dh, Hd, 0, s->rope_base);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            size_t o = (size_t)b * T * Hd + (size_t)h * dh;
            head_forward(s, y + o, att + ((size_t)b * H + h) * T * T, q + o, k + o, v + o,
                         T, Hd, scale);
        }
    al_linear_forward(out, y, p[3], BT, Hd, D); /* out = y . wo^T */
}

static void swa_backward(const al_attn_shape *s, float *dx, float *const *dp, float *scratch,
                         const float *dout, const float *x, const float *act,
                         float *const *p, int B, int T)
{
    int D = s->d_model, H = s->n_head, dh = s->d_head, Hd = H * dh, BT = B * T;
    size_t n = (size_t)BT * Hd;
    const float *q = act, *k = q + n, *v = k + n, *y = v + n, *att = y + n;
    float *dy = scratch, *dq = dy + n, *dk = dq + n, *dv = dk + n, *ds = dv + n;
    float scale = 1.0f / sqrtf((float)dh);
    memset(scratch, 0, 4 * n * sizeof(float));
    al_linear_backward(dy, dp[3], dout, y, p[3], BT, Hd, D);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            size_t o = (size_t)b * T * Hd + (size_t)h * dh;
            head_backward(s, dq + o, dk + o, dv + o, ds, dy + o,
                          att + ((size_t)b * H + h) * T * T, q + o, k + o, v + o, T, Hd, scale);
        }
    /* q = rope(q0), k = rope(k0): rotate the gradients back */
#ifndef FAULT_ROPE_BACKWARD
    al_rope_backward(dq, B, T, H, dh, Hd, 0, s->rope_base);
    al_rope_backward(dk, B, T, H, dh, Hd, 0, s->rope_base);
#endif
    al_linear_backward(dx, dp[0], dq, x, p[0], BT, D, Hd);
    al_linear_backward(dx, dp[1], dk, x, p[1], BT, D, Hd);
#ifndef FAULT_GRAD_PATH
    al_linear_backward(dx, dp[2], dv, x, p[2], BT, D, Hd);
#endif
}

/* Attention pictures: forward saved the banded probabilities of every
 * head, att (B, H, T, T); after a forward on one sequence they are P. */
static void swa_probs(const al_attn_shape *s, float *P, const float *act, float *const *p,
                      int T)
{
    size_t n = (size_t)T * s->n_head * s->d_head;
#ifdef FAULT_HANG
    for (volatile int spin = 1; spin && !s->causal;) {}
#endif
#ifdef FAULT_PROBS_SCALE
    int H = s->n_head, dh = s->d_head, Hd = H * dh;
    for (int h = 0; h < H; h++) {   /* recomputed from q, k at scale 1: wrong */
        float *Ph = P + (size_t)h * T * T;
        al_gemm_nt(Ph, T, act + h * dh, Hd, act + n + h * dh, Hd, T, T, dh, 1.0f, 0.0f);
        for (int t = 0; t < T; t++) {
            int lo, hi;
            band(s, t, T, &lo, &hi);
            float *row = Ph + (size_t)t * T;
            al_softmax_row(row + lo, hi - lo + 1);
            memset(row, 0, (size_t)lo * sizeof(float));
            memset(row + hi + 1, 0, (size_t)(T - 1 - hi) * sizeof(float));
        }
    }
#else
    memcpy(P, act + 4 * n, (size_t)s->n_head * T * T * sizeof(float));
#endif
}

/* ------------------------------------------------------------ decode */

/* Cache row of a token: its RoPE'd keys (H*dh), then its values (H*dh),
 * exactly the k and v rows forward() saved (B = 1). */
static void swa_prefill(const al_attn_shape *s, al_kv_cache *cache, const float *act,
                        float *const *p, int T)
{
    int Hd = s->n_head * s->d_head;
    size_t n = (size_t)T * Hd;
    const float *k = act + n, *v = k + n;
#ifdef FAULT_PREFILL_SLICE
    k = act;   /* the saved queries */
#endif
    for (int t = 0; t < T; t++) {
        al_kv_put(cache, t, 0, Hd, k + (size_t)t * Hd);
        al_kv_put(cache, t, Hd, Hd, v + (size_t)t * Hd);
    }
}

/* Rows one step reads: the window, or the whole context when shorter. */
static int window_rows(const al_attn_shape *s, int context)
{
    int w = al_set_int(s, SET_WINDOW);
    return w < context ? w : context;
}

/* q, y (H*dh) | the new row k, v (2*H*dh) | scores (H, window) | tile */
static size_t swa_decode_scratch_floats(const al_attn_shape *s, int context)
{
    size_t Hd = (size_t)s->n_head * s->d_head, row = swa_kv_elems(s);
#ifdef FAULT_BF16_SCRATCH
    return 2 * Hd + row + (size_t)s->n_head * window_rows(s, context) +
           (size_t)AL_KV_TILE * row / 2;
#else
    return 2 * Hd + row + (size_t)s->n_head * window_rows(s, context) +
           (size_t)AL_KV_TILE * row;
#endif
}

/* y (H, dh) = softmax(scale * q . k^T) . v over cache rows lo .. lo+n-1,
 * one head at a time (al_kv_attend reads rows from 0, the band does not).
 * S holds H * n scores; a non-f32 cache is read AL_KV_TILE rows at a time
 * through tile. */
static void attend_band(float *y, float *S, float *tile, const float *q, const al_kv_cache *c,
                        int lo, int n, int H, int dh, float scale)
{
    int Hd = H * dh, ld = (int)al_kv_cache_elems(c);
    int step = al_kv_cache_dtype(c) == AL_KV_F32 ? n : AL_KV_TILE;
    for (int t0 = 0; t0 < n; t0 += step) {   /* S (H, n) = scale * q . k^T */
        int nt = n - t0 < step ? n - t0 : step;
        const float *rows = al_kv_rows(c, lo + t0, nt, tile);
        for (int h = 0; h < H; h++)
            al_gemv_n(S + (size_t)h * n + t0, rows + h * dh, ld, q + h * dh, nt, dh, scale,
                      0.0f);
    }
    for (int h = 0; h < H; h++) al_softmax_row(S + (size_t)h * n, n);
    for (int t0 = 0; t0 < n; t0 += step) {   /* y (H, dh) = P . v */
        int nt = n - t0 < step ? n - t0 : step;
        const float *rows = al_kv_rows(c, lo + t0, nt, tile);
        for (int h = 0; h < H; h++)
            al_gemv_t(y + h * dh, rows + Hd + h * dh, ld, S + (size_t)h * n + t0, nt, dh,
                      1.0f, t0 ? 1.0f : 0.0f);
    }
}

/* One token at pos: append its row, attend over the band band() gives a
 * causal query at pos, lo .. pos. */
static void swa_decode(const al_attn_shape *s, float *out, float *scratch, const float *x,
                       float *const *p, al_kv_cache *cache, int pos)
{
    int D = s->d_model, H = s->n_head, dh = s->d_head, Hd = H * dh, lo, hi;
    float *q = scratch, *y = q + Hd, *kv = y + Hd, *S = kv + 2 * Hd;
    float *tile = S + (size_t)H * window_rows(s, al_kv_cache_context(cache));
#ifdef FAULT_ABORT
    abort();
#endif
    band(s, pos, pos + 1, &lo, &hi);
    al_linear_row(q, x, p[0], D, Hd);        /* q = x . wq^T */
    al_linear_row(kv, x, p[1], D, Hd);       /* k = x . wk^T */
    al_linear_row(kv + Hd, x, p[2], D, Hd);  /* v = x . wv^T */
#ifdef FAULT_DECODE_POS
    al_rope_forward(q, 1, 1, H, dh, Hd, pos + 1, s->rope_base);
#else
    al_rope_forward(q, 1, 1, H, dh, Hd, pos, s->rope_base);
#endif
    al_rope_forward(kv, 1, 1, H, dh, Hd, pos, s->rope_base);
    al_kv_row_put(cache, pos, kv);
    attend_band(y, S, tile, q, cache, lo, hi - lo + 1, H, dh, 1.0f / sqrtf((float)dh));
    al_linear_row(out, y, p[3], Hd, D);      /* out = y . wo^T */
}

/* Written for interface version 3 (without kv_rows). */
#define SWA_API_VERSION 3

static const al_variant_ops swa_ops = {
    .api_version = SWA_API_VERSION,
#ifdef FAULTY
    .name = "faulty",
#else
    .name = "swa_v4",
#endif
    .description = "sliding-window attention: each query sees the last `window` positions",
    .settings = swa_settings,
    .check = swa_check,
    .params = swa_params,
    .act_floats = swa_act_floats,
    .scratch_floats = swa_scratch_floats,
    .forward = swa_forward,
    .backward = swa_backward,
    .kv_elems = swa_kv_elems,
    .prefill = swa_prefill,
    .decode_scratch_floats = swa_decode_scratch_floats,
    .decode = swa_decode,
    .probs = swa_probs,
};

static const al_variant_ops *const variants[] = {&swa_ops, NULL};

/* The one symbol the plugin exports (meson.build builds it with hidden
 * visibility). */
AL_PLUGIN_EXPORT const al_variant_ops *const *attnlab_plugin_variants(int *api_version)
{
    *api_version = SWA_API_VERSION;
    return variants;
}
