/*
 * gta.c - grouped-tied attention (Zadouri, Strauss, Dao 2025, "Hardware-
 * Efficient Attention for Fast Decoding", arXiv 2505.21487 §3.1; reference
 * code: Dao-AILab/grouped-latent-attention, modeling_llama_GTA.py).
 *
 * G groups as in GQA, but a group keeps ONE tied state of width d_head that
 * is its value whole and, in its first half, the NoPE half of its key. The
 * other half of every key is one RoPE key of width d_head/2, projected from
 * x directly and shared by all heads. Queries carry RoPE in their last half
 * only, the half that meets the RoPE key (the reference code's split):
 *
 *   q_h = wq_h . x, rope on q_h[r:]     s_g = wkv_g . x      k_r = rope(wkr . x)
 *   k_g = [s_g[:r] | k_r]               v_g = s_g            (r = d_head / 2)
 *   score (q_h . k_g) / sqrt(d_head),   h in group g = h / (H / G)
 *
 * The scale is 1/sqrt(d_head), the query's width (the reference leaves
 * flash-attention's default). The RoPE half is rotated as a head of width
 * d_head/2 (frequencies base^(-2i/(d_head/2)), rotate-half pairs), as MLA's
 * decoupled key is; the reference configures its rotary module outside the
 * file. Initialisation: the reference draws every projection normal(0,
 * 0.02); so do wq, wkv, wkr here, while wo takes the scaled residual init
 * every attnlab variant's output projection has, so variants differ only in
 * their attention.
 *
 * Cache per token per layer: the G tied states, then the RoPE key:
 * G*d_head + d_head/2 floats, about half of GQA's 2*G*d_head.
 *
 * Training runs the assembled keys through the shared core (al_attn_*),
 * query head h over group h / (H / G) with d_qk = d_v = d_head. Decoding
 * reads the cache rows directly: a group's key is not contiguous in the
 * row (its RoPE half is the shared one at the end), which al_kv_attend's
 * layout cannot say, so the block loop below scores the two halves with
 * two products.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attnlab/attnlab_variant.h>
#include <attnlab/al_flash.h>
#include <attnlab/al_kvcache.h>
#include <attnlab/al_parallel.h>

enum { SET_N_KV_HEAD, N_SETTINGS };

static const al_setting gta_settings[] = {
    {"n_kv_head", AL_SET_INT, 0, 1, "tied K/V states G (one per group); must divide n_head"},
    {NULL, 0, 0, 0, NULL},
};
AL_SETTINGS_MATCH(gta_settings, N_SETTINGS);

/* Dimensions, from the layer's context. r: the RoPE half, also the NoPE half. */
typedef struct dims {
    int D, H, G, dh, r, BT;
    size_t row;   /* cache floats per token: G*dh + r */
} dims;

/* A layer's context: its shape and dimensions (BT 1), made once by init. */
typedef struct gta_ctx {
    al_attn_shape s;
    dims d;
} gta_ctx;

static dims get_dims(const void *ctx, int B, int T)
{
    dims d = ((const gta_ctx *)ctx)->d;
    d.BT = B * T;
    return d;
}

static float gta_scale(const dims *d) { return 1.0f / sqrtf((float)d->dh); }

/* The attention of the shape's training kernel (al_flash.h): H query heads
 * over G groups of assembled keys [state half | rope], the states the values. */
static al_attn_problem problem(const void *ctx, int B, int T)
{
    const al_attn_shape *s = &((const gta_ctx *)ctx)->s;
    dims d = get_dims(ctx, B, T);
    return (al_attn_problem){B, T, d.H, d.G, d.dh, d.dh, gta_scale(&d), s->causal, 0, 0};
}

static void *gta_init(const al_variant *v, const al_attn_shape *s, char *err, size_t n)
{
    dims d = {s->d_model, s->n_head, al_set_int(s, SET_N_KV_HEAD), s->d_head, s->d_head / 2,
              1, 0};
    d.row = (size_t)d.G * d.dh + d.r;
    if (d.G < 1 || d.H % d.G != 0)
        return snprintf(err, n, "'n_kv_head' (%d) must divide 'n_head' (%d)", d.G, d.H), NULL;
    if (d.dh % 4 != 0)
        return snprintf(err, n, "'d_head' (%d) must be a multiple of 4: half of each key is the "
                        "shared RoPE key of d_head/2, and RoPE rotates pairs", d.dh), NULL;
    gta_ctx *c = malloc(sizeof *c);
    if (c) *c = (gta_ctx){*s, d};
    return c;
}

static int gta_params(const void *ctx, al_param_spec *o)
{
    dims d = get_dims(ctx, 1, 1);
    o[0] = (al_param_spec){"wq", d.H * d.dh, d.D, AL_INIT_NORMAL};
    o[1] = (al_param_spec){"wkv", d.G * d.dh, d.D, AL_INIT_NORMAL};   /* tied states */
    o[2] = (al_param_spec){"wkr", d.r, d.D, AL_INIT_NORMAL};          /* shared RoPE key */
    o[3] = (al_param_spec){"wo", d.D, d.H * d.dh, AL_INIT_RESID};
    return 4;
}

/* Saved activations of one layer:
 *   q (BT,H*dh)  queries, last half of each head RoPE'd
 *   st (BT,G*dh) tied states (the values, and the cache's first part)
 *   kr (BT,r)    RoPE'd shared key (the cache's last part)
 *   kf (BT,G*dh) assembled keys [st_g[:r] | kr] per group
 *   y (BT,H*dh)  attention output before wo
 *   stat (B,H,T,2) score rows' max and 1/sum (al_attn_forward) */
typedef struct gta_a {
    float *q, *st, *kr, *kf, *y, *stat;
} gta_a;

static gta_a carve(const dims *d, float *a)
{
    size_t BT = d->BT, Hd = (size_t)d->H * d->dh, Gd = (size_t)d->G * d->dh;
    gta_a m;
    m.q = a; a += BT * Hd;
    m.st = a; a += BT * Gd;
    m.kr = a; a += BT * d->r;
    m.kf = a; a += BT * Gd;
    m.y = a; a += BT * Hd;
    m.stat = a;
    return m;
}

static size_t gta_act_floats(const void *ctx, int B, int T)
{
    dims d = get_dims(ctx, B, T);
    size_t BT = d.BT, Hd = (size_t)d.H * d.dh, Gd = (size_t)d.G * d.dh;
    al_attn_problem pr = problem(ctx, B, T);
    return BT * (2 * Hd + 2 * Gd + d.r) +
           al_attn_kernel_saved_floats(((const gta_ctx *)ctx)->s.attn_kernel, &pr);
}

/* Backward scratch: dy, dq (BT,H*dh) | dkf, dst (BT,G*dh) | dkr (BT,r) */
static size_t gta_scratch_floats(const void *ctx, int B, int T)
{
    dims d = get_dims(ctx, B, T);
    size_t BT = d.BT, Hd = (size_t)d.H * d.dh, Gd = (size_t)d.G * d.dh;
    return BT * (2 * Hd + 2 * Gd + d.r);
}

static size_t gta_kv_elems(const void *ctx) { return get_dims(ctx, 1, 1).row; }

/* RoPE (sign > 0) or its inverse on the last half of every query head of
 * q (B, T, H*dh): one strided call, the halves being dh apart. */
static void rope_query_halves(float *q, const dims *d, int B, int T, int pos0,
                              const al_attn_shape *s, int sign)
{
    if (sign > 0) al_rope_layer_forward(q + d->r, B, T, d->H, d->r, d->dh, d->H * d->dh, pos0, s);
    else al_rope_layer_backward(q + d->r, B, T, d->H, d->r, d->dh, d->H * d->dh, pos0, s);
}

/* kf[i, g] = [st[i, g, :r] | kr[i]] for every token i and group g. */
static void assemble_keys(float *kf, const float *st, const float *kr, const dims *d)
{
    size_t w = (size_t)d->r * sizeof(float);
    for (size_t i = 0; i < (size_t)d->BT; i++)
        for (int g = 0; g < d->G; g++) {
            size_t o = (i * d->G + g) * d->dh;
            memcpy(kf + o, st + o, w);
            memcpy(kf + o + d->r, kr + i * d->r, w);
        }
}

static void gta_forward(const void *ctx, float *out, float *act, float *scratch,
                        const float *x, float *const *p, int B, int T)
{
    const al_attn_shape *s = &((const gta_ctx *)ctx)->s;
    dims d = get_dims(ctx, B, T);
    gta_a a = carve(&d, act);
    int Hd = d.H * d.dh, Gd = d.G * d.dh;
    al_linear_forward(a.q, x, p[0], d.BT, d.D, Hd);    /* q = x . wq^T */
    al_linear_forward(a.st, x, p[1], d.BT, d.D, Gd);   /* s = x . wkv^T */
    al_linear_forward(a.kr, x, p[2], d.BT, d.D, d.r);  /* k_r = rope(x . wkr^T) */
    rope_query_halves(a.q, &d, B, T, 0, s, 1);
    al_rope_layer_forward(a.kr, B, T, 1, d.r, d.r, d.r, 0, s);
    assemble_keys(a.kf, a.st, a.kr, &d);
    al_attn_problem pr = problem(ctx, B, T);
    al_attn_kernel_forward(s->attn_kernel, a.y, a.stat, a.q, a.kf, a.st, &pr);
    al_linear_forward(out, a.y, p[3], d.BT, Hd, d.D);  /* out = y . wo^T */
    (void)scratch;
}

/* Given dkf from attention: dst[i, g, :r] += dkf[i, g, :r] (the tied
 * state's key half), dkr[i] = sum over groups of dkf[i, g, r:], groups in
 * order (written). */
static void split_key_grads(float *dst, float *dkr, const float *dkf, const dims *d)
{
    for (size_t i = 0; i < (size_t)d->BT; i++)
        for (int g = 0; g < d->G; g++) {
            const float *k = dkf + (i * d->G + g) * d->dh;
            float *sv = dst + (i * d->G + g) * d->dh, *kr = dkr + i * d->r;
            for (int c = 0; c < d->r; c++) {
                sv[c] += k[c];
                kr[c] = g ? kr[c] + k[d->r + c] : k[d->r + c];
            }
        }
}

static void gta_backward(const void *ctx, float *dx, float *const *dp, float *scratch,
                         const float *dout, const float *x, const float *act, float *const *p,
                         int B, int T)
{
    const al_attn_shape *s = &((const gta_ctx *)ctx)->s;
    dims d = get_dims(ctx, B, T);
    gta_a a = carve(&d, (float *)act);
    size_t nH = (size_t)d.BT * d.H * d.dh, nG = (size_t)d.BT * d.G * d.dh;
    float *dy = scratch, *dq = dy + nH, *dkf = dq + nH, *dst = dkf + nG, *dkr = dst + nG;
    int Hd = d.H * d.dh, Gd = d.G * d.dh;
    /* Every output is written (AL_VARIANT_WRITES_GRADS): beta 0 on its
     * first product. out = y . wo^T: dy = dout . wo */
    al_linear_backward_beta(dy, dp[3], dout, a.y, p[3], d.BT, Hd, d.D, 0.0f, 0.0f);
    /* the tied state is the value: attention writes its gradient into dst */
    al_attn_problem pr = problem(ctx, B, T);
    al_attn_kernel_backward(s->attn_kernel, dq, dkf, dst, dy, a.y, a.stat, a.q, a.kf, a.st, &pr);
    split_key_grads(dst, dkr, dkf, &d);
    rope_query_halves(dq, &d, B, T, 0, s, -1);
    al_rope_layer_backward(dkr, B, T, 1, d.r, d.r, d.r, 0, s);
    al_linear_backward_beta(dx, dp[0], dq, x, p[0], d.BT, d.D, Hd, 0.0f, 0.0f);
    al_linear_backward_beta(dx, dp[1], dst, x, p[1], d.BT, d.D, Gd, 1.0f, 0.0f);
    al_linear_backward_beta(dx, dp[2], dkr, x, p[2], d.BT, d.D, d.r, 1.0f, 0.0f);
}

/* Every query head's probabilities after forward() on one sequence,
 * rebuilt from the saved queries, assembled keys and row statistics by the
 * kernel backward uses. */
static void gta_probs(const void *ctx, float *P, const float *act, const float *src,
                      float *const *p, int T)
{
    const al_attn_shape *s = &((const gta_ctx *)ctx)->s;
    dims d = get_dims(ctx, 1, T);
    gta_a a = carve(&d, (float *)act);
    al_attn_problem pr = problem(ctx, 1, T);
    al_attn_kernel_probs(s->attn_kernel, P, a.stat, a.q, a.kf, &pr);
    (void)p;
}

/* ------------------------------------------------------------ decode */

/* Cache row of a token: its G tied states (G*dh), then its RoPE'd shared
 * key (r), exactly what forward() saved. */
static void gta_prefill(const void *ctx, al_kv_cache *cache, const float *act,
                        float *const *p, int T)
{
    dims d = get_dims(ctx, 1, T);
    gta_a a = carve(&d, (float *)act);
    int Gd = d.G * d.dh;
    for (int t = 0; t < T; t++) {
        al_kv_put(cache, t, 0, Gd, a.st + (size_t)t * Gd);
        al_kv_put(cache, t, Gd, d.r, a.kr + (size_t)t * d.r);
    }
    (void)p;
}

/* Floats attend() takes: one group's block of scores (H/G, AL_KV_TILE),
 * each head's running max and sum (2H), one block of rows as f32. */
static size_t attend_floats(const dims *d)
{
    return (size_t)(d->H / d->G) * AL_KV_TILE + 2 * (size_t)d->H + (size_t)AL_KV_TILE * d->row;
}

/* y (H, dh) = attention of one token's queries q (H, dh) over rows
 * 0..n-1 of cache c, in one pass over the rows, AL_KV_TILE at a time, with
 * an online softmax per head (as al_kv_attend does): each cached byte is
 * read once and a non-f32 block converted once. Group g's key is
 * [row[g*dh, +r) | row[G*dh, +r)], its value row[g*dh, +dh). */
static void attend(float *y, float *buf, const float *q, const al_kv_cache *c, int n,
                   const dims *d)
{
    int Hg = d->H / d->G, ld = (int)d->row, Gd = d->G * d->dh;
    float *S = buf, *mx = S + (size_t)Hg * AL_KV_TILE, *sum = mx + d->H, *tile = sum + d->H;
    float scale = gta_scale(d);
    for (int h = 0; h < d->H; h++) mx[h] = -INFINITY, sum[h] = 0.0f;
    for (int t0 = 0; t0 < n; t0 += AL_KV_TILE) {
        int nt = n - t0 < AL_KV_TILE ? n - t0 : AL_KV_TILE;
        const float *rows = al_kv_rows(c, t0, nt, tile);
        for (int g = 0; g < d->G; g++) {
            const float *qg = q + (size_t)g * Hg * d->dh, *sg = rows + (size_t)g * d->dh;
            float *yg = y + (size_t)g * Hg * d->dh;
            /* S (Hg, nt) = scale * (q_nope . s_g[:r]^T + q_rope . k_r^T) */
            al_gemm_nt(S, AL_KV_TILE, qg, d->dh, sg, ld, Hg, nt, d->r, scale, 0.0f);
            al_gemm_nt(S, AL_KV_TILE, qg + d->r, d->dh, rows + Gd, ld, Hg, nt, d->r, scale, 1.0f);
            for (int h = 0; h < Hg; h++) {
                int hh = g * Hg + h;
                float corr = al_softmax_block(S + (size_t)h * AL_KV_TILE, nt, mx + hh, sum + hh);
                if (t0 == 0 || corr == 1.0f) continue;
                for (int j = 0; j < d->dh; j++) yg[(size_t)h * d->dh + j] *= corr;
            }
            /* y_g (Hg, dh) += P . s_g: the tied state is the whole value */
            al_gemm_nn(yg, d->dh, S, AL_KV_TILE, sg, ld, Hg, d->dh, nt, 1.0f, t0 ? 1.0f : 0.0f);
        }
    }
    for (int h = 0; h < d->H; h++) {
        float inv = 1.0f / sum[h];
        for (int j = 0; j < d->dh; j++) y[(size_t)h * d->dh + j] *= inv;
    }
}

/* q, y (H*dh) | the new row (G*dh + r) | attend()'s buffer. Independent
 * of the context: attention reads the cache block by block. */
static size_t gta_decode_scratch_floats(const void *ctx, int context)
{
    dims d = get_dims(ctx, 1, 1);
    (void)context;
    return 2 * (size_t)d.H * d.dh + d.row + attend_floats(&d);
}

static void gta_decode(const void *ctx, float *out, float *scratch, const float *x,
                       float *const *p, al_kv_cache *cache, int pos)
{
    const al_attn_shape *s = &((const gta_ctx *)ctx)->s;
    dims d = get_dims(ctx, 1, 1);
    int Hd = d.H * d.dh, Gd = d.G * d.dh;
    float *q = scratch, *y = q + Hd, *row = y + Hd, *buf = row + d.row;
    al_linear_row(q, x, p[0], d.D, Hd);          /* q = x . wq^T */
    al_linear_row(row, x, p[1], d.D, Gd);        /* s = x . wkv^T */
    al_linear_row(row + Gd, x, p[2], d.D, d.r);  /* k_r = rope(x . wkr^T) */
    rope_query_halves(q, &d, 1, 1, pos, s, 1);
    al_rope_layer_forward(row + Gd, 1, 1, 1, d.r, d.r, d.r, pos, s);
    al_kv_row_put(cache, pos, row);
    attend(y, buf, q, cache, pos + 1, &d);
    al_linear_row(out, y, p[3], Hd, d.D);        /* out = y . wo^T */
}

/* ---- batched decode: the projections are (B, D) products, the
 * sequences' attentions spread over the pool, each on one thread with
 * that thread's scratch (so a thread count gives the same bits). */

typedef struct batch_job {
    float *y;
    const float *q;
    al_kv_cache *const *caches;
    const int *pos;
    const dims *d;
} batch_job;

static void attend_seqs(void *ctx, long lo, long hi, int tid)
{
    const batch_job *j = ctx;
    size_t Hd = (size_t)j->d->H * j->d->dh;
    float *buf = al_parallel_scratch(tid, attend_floats(j->d));
    for (long b = lo; b < hi; b++)
        attend(j->y + b * Hd, buf, j->q + b * Hd, j->caches[b], j->pos[b] + 1, j->d);
}

/* The widest output of a batched step's products (al_linear_forward_few's tmp). */
static size_t batch_wide(const dims *d)
{
    size_t w = (size_t)d->D, Hd = (size_t)d->H * d->dh, Gd = (size_t)d->G * d->dh;
    w = Hd > w ? Hd : w;
    return Gd > w ? Gd : w;
}

/* q, y (B, H*dh) | st (B, G*dh) | kr (B, r) | the products' tmp (B, wide). */
static size_t gta_decode_batch_scratch_floats(const void *ctx, int context, int B)
{
    dims d = get_dims(ctx, 1, 1);
    (void)context;
    return (size_t)B * (2 * (size_t)d.H * d.dh + d.row + batch_wide(&d));
}

static void gta_decode_batch(const void *ctx, float *out, float *scratch, const float *x,
                             float *const *p, al_kv_cache *const *caches, const int *pos, int B)
{
    const al_attn_shape *s = &((const gta_ctx *)ctx)->s;
    dims d = get_dims(ctx, 1, 1);
    int Hd = d.H * d.dh, Gd = d.G * d.dh;
    float *q = scratch, *y = q + (size_t)B * Hd, *st = y + (size_t)B * Hd;
    float *kr = st + (size_t)B * Gd, *tmp = kr + (size_t)B * d.r;
    al_linear_forward_few(q, tmp, x, p[0], B, d.D, Hd);     /* q = x . wq^T */
    al_linear_forward_few(st, tmp, x, p[1], B, d.D, Gd);    /* s = x . wkv^T */
    al_linear_forward_few(kr, tmp, x, p[2], B, d.D, d.r);   /* k_r = rope(x . wkr^T) */
    for (int b = 0; b < B; b++) {   /* each token at its own position */
        rope_query_halves(q + (size_t)b * Hd, &d, 1, 1, pos[b], s, 1);
        al_rope_layer_forward(kr + (size_t)b * d.r, 1, 1, 1, d.r, d.r, d.r, pos[b], s);
        al_kv_put(caches[b], pos[b], 0, Gd, st + (size_t)b * Gd);
        al_kv_put(caches[b], pos[b], Gd, d.r, kr + (size_t)b * d.r);
    }
    batch_job j = {y, q, caches, pos, &d};
    al_parallel_for(B, 1, attend_seqs, &j);
    al_linear_forward_few(out, tmp, y, p[3], B, Hd, d.D);   /* out = y . wo^T */
}

/* ------------------------------------------------------------ costs */

/* FLOPs per token of the projections: wq, the tied states wkv, the RoPE
 * key wkr, and wo; backward doubles each (dx and dw). */
static double proj_flops(const dims *d)
{
    double Hd = (double)d->H * d->dh;
    return 2.0 * d->D * (Hd + (double)d->G * d->dh + d->r) + 2 * Hd * d->D;
}

static double gta_train_cost(const void *ctx, int T, int consumer)
{
    dims d = get_dims(ctx, 1, T);
    const al_attn_shape *s = &((const gta_ctx *)ctx)->s;
    double attn = al_attn_flops(T, d.H, d.dh, d.dh, s->causal, 0) +
                  al_attn_flops(T, d.H, d.dh, d.dh, s->causal, 1);
    (void)consumer;   /* gta cannot share */
    return 3 * proj_flops(&d) + attn / T;
}

static double gta_prefill_cost(const void *ctx, int T, int consumer)
{
    dims d = get_dims(ctx, 1, T);
    const al_attn_shape *s = &((const gta_ctx *)ctx)->s;
    (void)consumer;
    return proj_flops(&d) + al_attn_flops(T, d.H, d.dh, d.dh, s->causal, 0) / T;
}

/* Per cached row and head: the key's two halves (r each) and the value
 * (dh), 2 FLOPs per element. */
static double gta_decode_cost(const void *ctx, int context, int consumer)
{
    dims d = get_dims(ctx, 1, 1);
    (void)consumer;
    return proj_flops(&d) + 2.0 * context * d.H * (2.0 * d.r + d.dh);
}

static const al_variant_costs gta_costs = {gta_train_cost, gta_prefill_cost, gta_decode_cost,
                                           NULL};

static const al_variant_train gta_train = {gta_params, gta_act_floats, gta_scratch_floats,
                                           gta_forward, gta_backward, AL_VARIANT_WRITES_GRADS};
static const al_variant_decode gta_decode_table = {
    .storage = AL_KV_ROWS,
    .kv_elems = gta_kv_elems,
    .prefill = gta_prefill,
    .scratch_floats = gta_decode_scratch_floats,
    .decode = gta_decode,
    .batch_scratch_floats = gta_decode_batch_scratch_floats,
    .decode_batch = gta_decode_batch,
};
static const al_variant_pictures gta_pictures = {.probs = gta_probs, .shared = 0};

const al_variant al_variant_gta = {
    .api_version = AL_VARIANT_API_VERSION,
    .name = "gta",
    .description = "grouped-tied attention: n_kv_head tied K=V states and one shared d_head/2 "
                   "RoPE key per token",
    .settings = gta_settings,
    .init = gta_init,
    .fini = free,
    .train = &gta_train,
    .decode = &gta_decode_table,
    .pictures = &gta_pictures,
    .costs = &gta_costs,
};
