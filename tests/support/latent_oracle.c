/*
 * latent_oracle.c - the naive decode of mla and gla (al_test_latent.h).
 */
#include <math.h>
#include <string.h>

#include "al_kvcache.h"
#include "al_test_latent.h"

typedef struct dims {
    int D, H, dh, dr, dc, hc, dq, dqk, L, Hg;
} dims;

static dims dims_of(const al_attn_shape *s, al_test_latent l)
{
    dims d = {s->d_model, s->n_head, s->d_head, l.dr, l.dc, l.hc, l.dq, s->d_head + l.dr,
              l.hc * l.dc, s->n_head / l.hc};
    return d;
}

/* The tensors by name, whichever query form is in use. */
typedef struct weights {
    const float *wq, *wdq, *q_norm, *wuq, *wqr, *wdkv, *kv_norm, *wkr, *wuk, *wuv, *wo;
} weights;

static weights bind(const dims *d, float *const *p)
{
    weights w = {0};
    int k = 0;
    if (d->dq) w.wdq = p[k++], w.q_norm = p[k++], w.wuq = p[k++];
    else w.wq = p[k++];
    w.wqr = p[k++], w.wdkv = p[k++], w.kv_norm = p[k++], w.wkr = p[k++];
    w.wuk = p[k++], w.wuv = p[k++], w.wo = p[k++];
    return w;
}

/* qn (H*dh) | qr (H*dr) | cq0, cq (dq) | row (L+dr) | c0 (L) | C (ctx, L) |
 * Kr (ctx, dr) | K, V (ctx, H*dh) | P (ctx) | y (H*dh) */
size_t al_test_latent_scratch(const al_attn_shape *s, al_test_latent l, int context)
{
    dims d = dims_of(s, l);
    size_t Hd = (size_t)d.H * d.dh;
    return (size_t)d.H * (d.dh + d.dr) + 2 * (size_t)d.dq + 2 * (size_t)d.L + d.dr +
           (size_t)context * (d.L + d.dr + 2 * Hd + 1) + Hd;
}

/* The token's queries qn, qr, and its cache row written at pos. */
static void queries_and_row(const al_attn_shape *s, const dims *d, const weights *w,
                            float *qn, float *qr, float *cq0, float *row, float *c0,
                            const float *x, al_kv_cache *cache, int pos)
{
    int Hd = d->H * d->dh, Hr = d->H * d->dr, nin = d->D;
    const float *qin = x;
    if (d->dq) {   /* c_q = rmsnorm(wdq . x), q = wuq . c_q */
        float *cq = cq0 + d->dq;
        al_linear_row(cq0, x, w->wdq, d->D, d->dq);
        al_rmsnorm_forward(cq, NULL, cq0, w->q_norm, 1, d->dq, s->norm_eps);
        al_linear_row(qn, cq, w->wuq, d->dq, Hd);
        qin = cq, nin = d->dq;
    } else {
        al_linear_row(qn, x, w->wq, d->D, Hd);
    }
    al_linear_row(qr, qin, w->wqr, nin, Hr);
    al_rope_forward(qr, 1, 1, d->H, d->dr, Hr, pos, s->rope_base);
    al_linear_row(c0, x, w->wdkv, d->D, d->L);   /* c_g = rmsnorm_g(wdkv_g . x) */
    for (int g = 0; g < d->hc; g++)
        al_rmsnorm_forward(row + g * d->dc, NULL, c0 + g * d->dc, w->kv_norm + g * d->dc, 1,
                           d->dc, s->norm_eps);
    al_linear_row(row + d->L, x, w->wkr, d->D, d->dr);   /* k_r = rope(wkr . x) */
    al_rope_forward(row + d->L, 1, 1, 1, d->dr, d->dr, pos, s->rope_base);
    al_kv_row_put(cache, pos, row);
}

/* Every head's keys or values out (n, H*dh) from the cached latents
 * C (n, L), head by head in plain loops, so the oracle shares no product
 * with the absorbed path: out[t, h] = up_h . C[t, g(h)]. */
static void expand(float *out, const float *C, const float *up, const dims *d, int n)
{
    size_t Hd = (size_t)d->H * d->dh;
    for (int t = 0; t < n; t++)
        for (int h = 0; h < d->H; h++)
            for (int j = 0; j < d->dh; j++) {
                const float *u = up + ((size_t)h * d->dh + j) * d->dc;
                const float *c = C + (size_t)t * d->L + (size_t)(h / d->Hg) * d->dc;
                double acc = 0;
                for (int k = 0; k < d->dc; k++) acc += (double)u[k] * c[k];
                out[t * Hd + (size_t)h * d->dh + j] = (float)acc;
            }
}

/* y_h = softmax_t((q_h . K[t,h] + q_r,h . Kr[t]) * scale) . V[t,h], in double */
static void head(float *y, float *P, const float *q, const float *qr, const float *K,
                 const float *Kr, const float *V, const dims *d, int n, int h)
{
    size_t Hd = (size_t)d->H * d->dh;
    double mx = -INFINITY, sum = 0, scale = 1.0 / sqrt((double)d->dqk);
    for (int t = 0; t < n; t++) {
        double sc = 0;
        for (int j = 0; j < d->dh; j++) sc += (double)q[j] * K[t * Hd + (size_t)h * d->dh + j];
        for (int j = 0; j < d->dr; j++) sc += (double)qr[j] * Kr[(size_t)t * d->dr + j];
        P[t] = (float)(sc * scale);
        mx = P[t] > mx ? P[t] : mx;
    }
    for (int t = 0; t < n; t++) sum += exp(P[t] - mx);
    for (int j = 0; j < d->dh; j++) {
        double acc = 0;
        for (int t = 0; t < n; t++)
            acc += exp(P[t] - mx) / sum * V[t * Hd + (size_t)h * d->dh + j];
        y[j] = (float)acc;
    }
}

void al_test_latent_decode(const al_attn_shape *s, al_test_latent l, float *out, float *scratch,
                           const float *x, float *const *p, al_kv_cache *cache, int pos)
{
    dims d = dims_of(s, l);
    weights w = bind(&d, p);
    int n = pos + 1, ctx = al_kv_cache_context(cache), Hd = d.H * d.dh;
    float *qn = scratch, *qr = qn + Hd, *cq0 = qr + d.H * d.dr, *row = cq0 + 2 * d.dq;
    float *c0 = row + d.L + d.dr, *C = c0 + d.L, *Kr = C + (size_t)ctx * d.L;
    float *K = Kr + (size_t)ctx * d.dr, *V = K + (size_t)ctx * Hd, *P = V + (size_t)ctx * Hd;
    float *y = P + ctx;
    queries_and_row(s, &d, &w, qn, qr, cq0, row, c0, x, cache, pos);
    for (int t = 0; t < n; t++) {   /* read back the rows: the latents, then k_r */
        al_kv_row_get(cache, t, row);
        memcpy(C + (size_t)t * d.L, row, d.L * sizeof(float));
        memcpy(Kr + (size_t)t * d.dr, row + d.L, d.dr * sizeof(float));
    }
    expand(K, C, w.wuk, &d, n);   /* k_c,h = wuk_h . c_g(h), every token and head */
    expand(V, C, w.wuv, &d, n);   /* v_h = wuv_h . c_g(h) */
    for (int h = 0; h < d.H; h++)
        head(y + (size_t)h * d.dh, P, qn + (size_t)h * d.dh, qr + (size_t)h * d.dr, K, Kr, V,
             &d, n, h);
    al_linear_row(out, y, w.wo, Hd, d.D);
}
