/*
 * swa.c - sliding-window attention (Beltagy et al. 2020, Longformer; the
 * local layers of Mistral 7B), as an attnlab plugin.
 *
 * Multi-head attention in which query t sees only the `window` most recent
 * positions, itself included: keys t-window+1 .. t. With the causal-mask
 * ablation (causal: false) the band is symmetric, |t - s| < window.
 * Parameters, RoPE and scaling are those of `mha`, so a window that covers
 * the whole sequence gives exactly mha's function.
 *
 * KV cache: a token's row is mha's, its RoPE'd keys then its values
 * (2 * n_head * d_head floats per layer). Decoding writes the row of
 * position pos at row pos and attends over rows pos-window+1 .. pos (the
 * training forward's band), so the rows older than the window are kept but
 * never read again: the measured cache is context x row, as `attnlab kv`
 * and `generate --stats` print. (decode->kv_rows would let it keep only a
 * ring of `window` rows, as the built-in `local` does; this example stays
 * with one row per token, the simplest cache.)
 *
 * Written for interface version 5: init makes each layer's context (its
 * shape and window) once, and every member reads it. The same plugin as
 * written for version 3 lives on as tests/plugins/swa_v4.c, which builds
 * against <attnlab/attnlab_variant_v4.h> and still loads.
 *
 * Training: attention runs through the core's training kernel
 * (<attnlab/al_flash.h>), the one the built-in variants use: the band is
 * the kernel's (window, no sinks), the kernel is the one
 * train.attention_kernel picks (al_attn_shape.attn_kernel), and the
 * activations saved for backward are what that kernel says
 * (al_attn_kernel_saved_floats): under fused, a log-sum-exp per query row
 * instead of a (T, T) block per head, and tiles the band hides whole are
 * skipped, so a window costs O(T * window). A variant whose scores are not
 * dot products of q and k parts writes its own (tests/plugins/swa_v4.c
 * keeps this example's first, hand-written version: the scores through
 * al_gemm_nt, the band by the softmax, the (T, T) probabilities saved).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attnlab/attnlab_variant.h>
#include <attnlab/al_flash.h>
#include <attnlab/al_kvcache.h>

enum { SET_WINDOW, N_SETTINGS };

static const al_setting swa_settings[] = {
    {"window", AL_SET_INT, 0, 1, "positions each query attends to, itself included (>= 1)"},
    {NULL, 0, 0, 0, NULL},
};

AL_SETTINGS_MATCH(swa_settings, N_SETTINGS);

/* A layer's context: its shape and window, made once by init. */
typedef struct swa_ctx {
    al_attn_shape s;
    int window;
} swa_ctx;

static void *swa_init(const al_variant *v, const al_attn_shape *s, char *err, size_t errlen)
{
    if (s->set[SET_WINDOW] < 1) {
        snprintf(err, errlen, "'window' (%g) must be at least 1", s->set[SET_WINDOW]);
        return NULL;
    }
    swa_ctx *c = malloc(sizeof *c);
    if (c) *c = (swa_ctx){*s, al_set_int(s, SET_WINDOW)};
    return c;
}

/* The keys query t may attend to: lo..hi inclusive. */
static void band(const swa_ctx *c, int t, int T, int *lo, int *hi)
{
    int w = c->window;
    *lo = t - w + 1 > 0 ? t - w + 1 : 0;
    *hi = c->s.causal ? t : (t + w - 1 < T - 1 ? t + w - 1 : T - 1);
}

static int swa_params(const void *ctx, al_param_spec *out)
{
    const al_attn_shape *s = &((const swa_ctx *)ctx)->s;
    int D = s->d_model, Hd = s->n_head * s->d_head;
    out[0] = (al_param_spec){"wq", Hd, D, AL_INIT_NORMAL};
    out[1] = (al_param_spec){"wk", Hd, D, AL_INIT_NORMAL};
    out[2] = (al_param_spec){"wv", Hd, D, AL_INIT_NORMAL};
    out[3] = (al_param_spec){"wo", D, Hd, AL_INIT_RESID};
    return 4;
}

/* The attention of a (B, T) batch for the training kernel: every head its
 * own K/V (H groups of 1), query t over keys t-window+1 .. t (causal) or
 * |t - s| < window (not), no sinks. */
static al_attn_problem problem(const swa_ctx *c, int B, int T)
{
    int H = c->s.n_head, dh = c->s.d_head;
    return (al_attn_problem){B, T, H, H, dh, dh, 1.0f / sqrtf((float)dh), c->s.causal,
                             c->window, 0};
}

/* Saved activations: q, k (RoPE'd), v, y (BT, H*dh) | what the kernel
 * keeps for backward (stat: al_attn_kernel_saved_floats) */
static size_t swa_act_floats(const void *ctx, int B, int T)
{
    const swa_ctx *c = ctx;
    al_attn_problem p = problem(c, B, T);
    return 4 * (size_t)B * T * c->s.n_head * c->s.d_head +
           al_attn_kernel_saved_floats(c->s.attn_kernel, &p);
}

/* Backward scratch: dy, dq, dk, dv (BT, H*dh); the kernel's tiles come from
 * the core's per-thread scratch */
static size_t swa_scratch_floats(const void *ctx, int B, int T)
{
    const al_attn_shape *s = &((const swa_ctx *)ctx)->s;
    return 4 * (size_t)B * T * s->n_head * s->d_head;
}

static size_t swa_kv_elems(const void *ctx)
{
    const al_attn_shape *s = &((const swa_ctx *)ctx)->s;
    return 2 * (size_t)s->n_head * s->d_head;
}

/* ------------------------------------------------------------ ops */

static void swa_forward(const void *ctx, float *out, float *act, float *scratch,
                        const float *x, float *const *p, int B, int T)
{
    const al_attn_shape *s = &((const swa_ctx *)ctx)->s;
    int D = s->d_model, H = s->n_head, dh = s->d_head, Hd = H * dh, BT = B * T;
    size_t n = (size_t)BT * Hd;
    float *q = act, *k = q + n, *v = k + n, *y = v + n, *stat = y + n;
    al_attn_problem pr = problem(ctx, B, T);
    al_linear_forward(q, x, p[0], BT, D, Hd);   /* q = x . wq^T */
    al_linear_forward(k, x, p[1], BT, D, Hd);   /* k = x . wk^T */
    al_linear_forward(v, x, p[2], BT, D, Hd);   /* v = x . wv^T */
    al_rope_layer_forward(q, B, T, H, dh, dh, Hd, 0, s);
    al_rope_layer_forward(k, B, T, H, dh, dh, Hd, 0, s);
    al_attn_kernel_forward(s->attn_kernel, y, stat, q, k, v, &pr);   /* y = softmax(q.k^T) v */
    al_linear_forward(out, y, p[3], BT, Hd, D); /* out = y . wo^T */
}

static void swa_backward(const void *ctx, float *dx, float *const *dp, float *scratch,
                         const float *dout, const float *x, const float *act,
                         float *const *p, int B, int T)
{
    const al_attn_shape *s = &((const swa_ctx *)ctx)->s;
    int D = s->d_model, H = s->n_head, dh = s->d_head, Hd = H * dh, BT = B * T;
    size_t n = (size_t)BT * Hd;
    const float *q = act, *k = q + n, *v = k + n, *y = v + n, *stat = y + n;
    float *dy = scratch, *dq = dy + n, *dk = dq + n, *dv = dk + n;
    al_attn_problem pr = problem(ctx, B, T);
    memset(dy, 0, n * sizeof(float));   /* al_linear_backward adds into dy */
    al_linear_backward(dy, dp[3], dout, y, p[3], BT, Hd, D);
    /* OVERWRITES dq, dk, dv (y: the forward's output, which fused reads) */
    al_attn_kernel_backward(s->attn_kernel, dq, dk, dv, dy, y, stat, q, k, v, &pr);
    /* q = rope(q0), k = rope(k0): rotate the gradients back */
    al_rope_layer_backward(dq, B, T, H, dh, dh, Hd, 0, s);
    al_rope_layer_backward(dk, B, T, H, dh, dh, Hd, 0, s);
    al_linear_backward(dx, dp[0], dq, x, p[0], BT, D, Hd);
    al_linear_backward(dx, dp[1], dk, x, p[1], BT, D, Hd);
    al_linear_backward(dx, dp[2], dv, x, p[2], BT, D, Hd);
}

/* Attention pictures: after a forward on one sequence, the probabilities
 * the kernel applied, rebuilt from its saved state and q, k. */
static void swa_probs(const void *ctx, float *P, const float *act, const float *src,
                      float *const *p, int T)
{
    const swa_ctx *c = ctx;
    size_t n = (size_t)T * c->s.n_head * c->s.d_head;
    al_attn_problem pr = problem(c, 1, T);
    al_attn_kernel_probs(c->s.attn_kernel, P, act + 4 * n, act, act + n, &pr);
}

/* ------------------------------------------------------------ decode */

/* Cache row of a token: its RoPE'd keys (H*dh), then its values (H*dh),
 * exactly the k and v rows forward() saved (B = 1). */
static void swa_prefill(const void *ctx, al_kv_cache *cache, const float *act,
                        float *const *p, int T)
{
    const al_attn_shape *s = &((const swa_ctx *)ctx)->s;
    int Hd = s->n_head * s->d_head;
    size_t n = (size_t)T * Hd;
    const float *k = act + n, *v = k + n;
    for (int t = 0; t < T; t++) {
        al_kv_put(cache, t, 0, Hd, k + (size_t)t * Hd);
        al_kv_put(cache, t, Hd, Hd, v + (size_t)t * Hd);
    }
}

/* Rows one step reads: the window, or the whole context when shorter. */
static int window_rows(const swa_ctx *c, int context)
{
    int w = c->window;
    return w < context ? w : context;
}

/* q, y (H*dh) | the new row k, v (2*H*dh) | scores (H, window) | tile */
static size_t swa_decode_scratch_floats(const void *ctx, int context)
{
    const al_attn_shape *s = &((const swa_ctx *)ctx)->s;
    size_t Hd = (size_t)s->n_head * s->d_head, row = swa_kv_elems(ctx);
    return 2 * Hd + row + (size_t)s->n_head * window_rows(ctx, context) +
           (size_t)AL_KV_TILE * row;
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
static void swa_decode(const void *ctx, float *out, float *scratch, const float *x,
                       float *const *p, al_kv_cache *cache, int pos)
{
    const al_attn_shape *s = &((const swa_ctx *)ctx)->s;
    int D = s->d_model, H = s->n_head, dh = s->d_head, Hd = H * dh, lo, hi;
    float *q = scratch, *y = q + Hd, *kv = y + Hd, *S = kv + 2 * Hd;
    float *tile = S + (size_t)H * window_rows(ctx, al_kv_cache_context(cache));
    band(ctx, pos, pos + 1, &lo, &hi);
    al_linear_row(q, x, p[0], D, Hd);        /* q = x . wq^T */
    al_linear_row(kv, x, p[1], D, Hd);       /* k = x . wk^T */
    al_linear_row(kv + Hd, x, p[2], D, Hd);  /* v = x . wv^T */
    al_rope_layer_forward(q, 1, 1, H, dh, dh, Hd, pos, s);
    al_rope_layer_forward(kv, 1, 1, H, dh, dh, Hd, pos, s);
    al_kv_row_put(cache, pos, kv);
    attend_band(y, S, tile, q, cache, lo, hi - lo + 1, H, dh, 1.0f / sqrtf((float)dh));
    al_linear_row(out, y, p[3], Hd, D);      /* out = y . wo^T */
}

static const al_variant_train swa_train = {swa_params, swa_act_floats, swa_scratch_floats,
                                           swa_forward, swa_backward, 0};
static const al_variant_decode swa_decode_table = {
    .storage = AL_KV_ROWS,
    .kv_elems = swa_kv_elems,
    .prefill = swa_prefill,
    .scratch_floats = swa_decode_scratch_floats,
    .decode = swa_decode,
};
static const al_variant_pictures swa_pictures = {.probs = swa_probs, .shared = 0};

static const al_variant swa = {
    .api_version = AL_VARIANT_API_VERSION,
    .name = "swa",
    .description = "sliding-window attention: each query sees the last `window` positions",
    .settings = swa_settings,
    .init = swa_init,
    .fini = free,
    .train = &swa_train,
    .decode = &swa_decode_table,
    .pictures = &swa_pictures,
};

static const al_variant *const variants[] = {&swa, NULL};

/* The one symbol the plugin exports (meson.build builds it with hidden
 * visibility). */
AL_PLUGIN_EXPORT const al_variant *const *attnlab_plugin_variants(int *api_version)
{
    *api_version = AL_VARIANT_API_VERSION;
    return variants;
}
