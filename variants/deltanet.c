/*
 * deltanet.c - Gated DeltaNet (Yang, Kautz, Hatamizadeh 2024, "Gated Delta
 * Networks: Improving Mamba2 with Delta Rule", arXiv 2412.06464): a layer
 * that keeps a state, not a cache. Per head h, with dk = d_key, dv = d_head:
 *
 *   q, k, v   = silu(conv(wq . x)), silu(conv(wk . x)), silu(conv(wv . x))
 *               conv: causal depthwise, width `conv` (0: none, silu alone)
 *   q, k      L2-normalised per head
 *   b_t       = sigmoid(wbeta_h . x_t)                       (the write strength)
 *   a_t       = exp(-softplus(wdecay_h . x_t + decay_bias_h))   (the decay)
 *   S_t       = a_t S_{t-1} (I - b_t k_t k_t^T) + b_t v_t k_t^T,  S (dv, dk)
 *   o_t       = S_t q_t
 *   y         = rmsnorm_head(o) * o_norm * silu(wgate . x)   (per head, o_norm shared)
 *   out       = wo . y
 *
 * decay_bias starts at the multi-scale decays of AL_INIT_DECAY (a from
 * 0.78 to 0.996 across heads, as linear.c's), not at zero, which would
 * start every head at a = 0.5, remembering 2 tokens. The conv
 * weights are stored as their difference from the identity filter (the
 * current input passes with weight 1 + conv[c][W-1]): zero weights, as
 * initialised, start the layer as if the convolution were off.
 * Unlike the rest of attnlab this layer has biases of its own: decay_bias,
 * and the gate and norm. The causal-mask ablation does not apply: a state
 * is causal by construction, masked or not.
 *
 * Training runs the delta rule in chunks of `chunk` tokens (the WY form,
 * deltanet_chunk.c) over every (sequence, head) pair in parallel; decode
 * keeps, per layer, S of every head and the last conv - 1 projections the
 * convolution still needs: one state rewritten in place (AL_KV_STATE), the
 * same bytes at every context.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attnlab/attnlab_variant.h>
#include <attnlab/al_kvcache.h>
#include <attnlab/al_parallel.h>
#include "deltanet_internal.h"

enum { SET_D_KEY, SET_CONV, SET_CHUNK, N_SETTINGS };

static const al_setting dn_settings[] = {
    {"d_key", AL_SET_INT, 0, 0, "key width per head; 0 = d_head"},
    {"conv", AL_SET_INT, 4, 0, "short causal convolution width on q, k, v; 0 = off"},
    {"chunk", AL_SET_INT, 64, 0, "training chunk length (tokens per WY block)"},
    {NULL, 0, 0, 0, NULL},
};
AL_SETTINGS_MATCH(dn_settings, N_SETTINGS);

#define DN_L2_EPS 1e-6f          /* q, k normalisation, as fla's l2norm */

/* Dimensions: Nq = H*dk (q and k), Nv = H*dv, P = 2 Nq + Nv the projected
 * channels the convolution sees, W the conv width, C the chunk. */
typedef struct dims {
    int D, H, dk, dv, W, C, Nq, Nv, P, BT, B, T, nC;
    float eps;
} dims;

static dims get_dims(const void *ctx, int B, int T)
{
    dims d = *(const dims *)ctx;
    d.B = B, d.T = T, d.BT = B * T, d.nC = al_dn_chunks(T, d.C);
    return d;
}

static void *dn_init(const al_variant *v, const al_attn_shape *s, char *err, size_t n)
{
    int dk = al_set_int(s, SET_D_KEY), W = al_set_int(s, SET_CONV), C = al_set_int(s, SET_CHUNK);
    (void)v;
    if (dk < 0 || dk > 1024)
        return snprintf(err, n, "'d_key' (%d) must be 0 (d_head) or 1 to 1024", dk), NULL;
    if (W < 0 || W > 64)
        return snprintf(err, n, "'conv' (%d) must be 0 (off) or a width of 1 to 64", W), NULL;
    if (C < 1 || C > 1024) return snprintf(err, n, "'chunk' (%d) must be 1 to 1024", C), NULL;
    dims *d = malloc(sizeof *d);
    if (!d) return snprintf(err, n, "out of memory"), NULL;
    dk = dk ? dk : s->d_head;
    *d = (dims){s->d_model, s->n_head, dk, s->d_head, W, C, s->n_head * dk, s->n_head * s->d_head,
                2 * s->n_head * dk + s->n_head * s->d_head, 1, 1, 1, 1, s->norm_eps};
    return d;
}

/* ------------------------------------------------------------ parameters */

static int dn_params(const void *ctx, al_param_spec *o)
{
    dims d = get_dims(ctx, 1, 1);
    int k = 0;
    o[k++] = (al_param_spec){"wq", d.Nq, d.D, AL_INIT_NORMAL};
    o[k++] = (al_param_spec){"wk", d.Nq, d.D, AL_INIT_NORMAL};
    o[k++] = (al_param_spec){"wv", d.Nv, d.D, AL_INIT_NORMAL};
    if (d.W) {
        o[k++] = (al_param_spec){"conv_q", d.Nq, d.W, AL_INIT_ZEROS};
        o[k++] = (al_param_spec){"conv_k", d.Nq, d.W, AL_INIT_ZEROS};
        o[k++] = (al_param_spec){"conv_v", d.Nv, d.W, AL_INIT_ZEROS};
    }
    o[k++] = (al_param_spec){"wbeta", d.H, d.D, AL_INIT_NORMAL};
    o[k++] = (al_param_spec){"wdecay", d.H, d.D, AL_INIT_NORMAL};
    o[k++] = (al_param_spec){"decay_bias", d.H, 0, AL_INIT_DECAY};
    o[k++] = (al_param_spec){"wgate", d.Nv, d.D, AL_INIT_NORMAL};
    o[k++] = (al_param_spec){"o_norm", d.dv, 0, AL_INIT_ONES};
    o[k++] = (al_param_spec){"wo", d.D, d.Nv, AL_INIT_RESID};
    return k;
}

typedef struct dn_p {
    float *w[3], *conv[3], *wbeta, *wdecay, *bias, *wgate, *o_norm, *wo;
} dn_p;

static dn_p bind(const dims *d, float *const *p)
{
    dn_p w = {0};
    int k = 0;
    for (int i = 0; i < 3; i++) w.w[i] = p[k++];
    for (int i = 0; i < 3 && d->W; i++) w.conv[i] = p[k++];
    w.wbeta = p[k++], w.wdecay = p[k++], w.bias = p[k++];
    w.wgate = p[k++], w.o_norm = p[k++], w.wo = p[k++];
    return w;
}

/* Channels of projection i (0 q, 1 k, 2 v). */
static int width(const dims *d, int i) { return i < 2 ? d->Nq : d->Nv; }

/* ------------------------------------------------------------ activations */

/* Saved by forward, (BT, ...) rows:
 *   pre[3]    projections before the convolution (Nq, Nq, Nv)
 *   cv[3]     after it, before silu (aliases pre when conv = 0)
 *   qkv[3]    q, k (silu'd, L2-normalised), v (silu'd)
 *   rq, rk    (BT, H) 1 / ||silu(c)|| of each head's q, k
 *   beta, g   (BT, H) write strength, log decay
 *   o (Nv)    S_t q_t;  rstd (BT*H) its per-head norm;  z (Nv) the gate
 *   on (Nv)   rmsnorm(o) * o_norm;  y (Nv) on * silu(z), wo's input
 *   S         (B*H, nC + 1, dv, dk) the state before each chunk, and last */
typedef struct dn_a {
    float *pre[3], *cv[3], *qkv[3], *rq, *rk, *beta, *g, *o, *rstd, *z, *on, *y, *S;
} dn_a;

static dn_a carve(const dims *d, float *a)
{
    size_t BT = d->BT, BH = (size_t)d->BT * d->H;
    dn_a m;
    for (int i = 0; i < 3; i++) m.pre[i] = a, a += BT * width(d, i);
    for (int i = 0; i < 3; i++) m.cv[i] = d->W ? a : m.pre[i], a += d->W ? BT * width(d, i) : 0;
    for (int i = 0; i < 3; i++) m.qkv[i] = a, a += BT * width(d, i);
    float **hs[] = {&m.rq, &m.rk, &m.beta, &m.g, &m.rstd};
    for (int i = 0; i < 5; i++) *hs[i] = a, a += BH;
    float **vs[] = {&m.o, &m.z, &m.on, &m.y};
    for (int i = 0; i < 4; i++) *vs[i] = a, a += BT * d->Nv;
    m.S = a;
    return m;
}

static size_t states_floats(const dims *d)
{
    return (size_t)d->B * d->H * (d->nC + 1) * d->dv * d->dk;
}

static size_t dn_act_floats(const void *ctx, int B, int T)
{
    dims d = get_dims(ctx, B, T);
    size_t BT = d.BT;
    return BT * ((d.W ? 3 : 2) * (size_t)d.P + 5 * (size_t)d.H + 4 * (size_t)d.Nv) +
           states_floats(&d);
}

/* Scratch: the chunk kernel's work for every (sequence, head) pair, then
 * (backward) dy, dz, do (Nv) | dqkv (P) | dbeta, dg (H) | dpre (P). */
static size_t work_floats(const dims *d) { return al_dn_work_floats(d->C, d->dk, d->dv); }

static size_t dn_scratch_floats(const void *ctx, int B, int T)
{
    dims d = get_dims(ctx, B, T);
    return (size_t)B * d.H * work_floats(&d) +
           (size_t)d.BT * (3 * (size_t)d.Nv + 2 * (size_t)d.P + 2 * (size_t)d.H);
}

/* ------------------------------------------------------------ pieces */

static float softplusf(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* SiLU and its derivative over arrays, the sigmoid vectorised
 * (al_sigmoid) a block at a time: with narrow heads these passes cost as
 * much as the delta rule when each element calls expf. */
enum { SIG_BLK = 512 };

static int blk(size_t m, size_t b) { return m - b < SIG_BLK ? (int)(m - b) : SIG_BLK; }

/* out = silu(c) over m floats (out may be c). */
static void silu_into(float *out, const float *c, size_t m)
{
    float s[SIG_BLK];
    for (size_t b = 0; b < m; b += SIG_BLK) {
        int n = blk(m, b);
        al_sigmoid(s, c + b, n);
        for (int j = 0; j < n; j++) out[b + j] = c[b + j] * s[j];
    }
}

/* y *= silu(z) over m floats. */
static void mul_silu(float *y, const float *z, size_t m)
{
    float s[SIG_BLK];
    for (size_t b = 0; b < m; b += SIG_BLK) {
        int n = blk(m, b);
        al_sigmoid(s, z + b, n);
        for (int j = 0; j < n; j++) y[b + j] *= z[b + j] * s[j];
    }
}

/* g *= silu'(c) over m floats: s (1 + c (1 - s)), s = sigmoid(c). */
static void mul_dsilu(float *g, const float *c, size_t m)
{
    float s[SIG_BLK];
    for (size_t b = 0; b < m; b += SIG_BLK) {
        int n = blk(m, b);
        al_sigmoid(s, c + b, n);
        for (int j = 0; j < n; j++) g[b + j] *= s[j] * (1.0f + c[b + j] * (1.0f - s[j]));
    }
}

/* Causal depthwise convolution of each sequence, its weights stored as
 * their difference from the identity filter: out[t][c] = in[t][c] +
 * sum_j w[c][j] in[t - (W-1) + j][c], inputs before 0 being 0. */
static void conv_forward(const dims *d, float *out, const float *in, const float *w, int N)
{
    for (int b = 0; b < d->B; b++)
        for (int t = 0; t < d->T; t++) {
            float *o = out + ((size_t)b * d->T + t) * N;
            memcpy(o, in + ((size_t)b * d->T + t) * N, (size_t)N * sizeof(float));
            for (int j = 0; j < d->W; j++) {
                int src = t - (d->W - 1) + j;
                if (src < 0) continue;
                const float *x = in + ((size_t)b * d->T + src) * N;
                for (int c = 0; c < N; c++) o[c] += w[(size_t)c * d->W + j] * x[c];
            }
        }
}

/* din = conv^T dout (written), dw (written). */
static void conv_backward(const dims *d, float *din, float *dw, const float *dout,
                          const float *in, const float *w, int N)
{
    memcpy(din, dout, (size_t)d->BT * N * sizeof(float));
    memset(dw, 0, (size_t)N * d->W * sizeof(float));
    for (int b = 0; b < d->B; b++)
        for (int t = 0; t < d->T; t++) {
            const float *g = dout + ((size_t)b * d->T + t) * N;
            for (int j = 0; j < d->W; j++) {
                int src = t - (d->W - 1) + j;
                if (src < 0) continue;
                const float *x = in + ((size_t)b * d->T + src) * N;
                float *dx = din + ((size_t)b * d->T + src) * N;
                for (int c = 0; c < N; c++) {
                    dx[c] += w[(size_t)c * d->W + j] * g[c];
                    dw[(size_t)c * d->W + j] += g[c] * x[c];
                }
            }
        }
}

/* out = silu(c) over n rows of H heads of width w; with r: each head
 * L2-normalised, r its 1 / norm. */
static void silu_heads(float *out, float *r, const float *c, int n, int H, int w)
{
    silu_into(out, c, (size_t)n * H * w);
    for (size_t i = 0; r && i < (size_t)n * H; i++) {
        float ss = 0, *o = out + i * w;
        for (int j = 0; j < w; j++) ss += o[j] * o[j];
        r[i] = 1.0f / sqrtf(ss + DN_L2_EPS);
        for (int j = 0; j < w; j++) o[j] *= r[i];
    }
}

/* The backward of silu_heads: dc from dout, in place over dout. */
static void silu_heads_backward(float *dout, const float *out, const float *r, const float *c,
                                int n, int H, int w)
{
    for (size_t i = 0; r && i < (size_t)n * H; i++) {
        float *g = dout + i * w, dot = 0;
        for (int j = 0; j < w; j++) dot += g[j] * out[i * w + j];
        for (int j = 0; j < w; j++) g[j] = r[i] * (g[j] - out[i * w + j] * dot);
    }
    mul_dsilu(dout, c, (size_t)n * H * w);
}

/* beta = sigmoid(zb), g = -softplus(za + bias), in place
 * over the products zb, za (n, H). */
static void gates_forward(float *beta, float *g, const float *bias, int n, int H)
{
    al_sigmoid(beta, beta, n * H);
    for (size_t i = 0; i < (size_t)n * H; i++) g[i] = -softplusf(g[i] + bias[i % H]);
}

/* ------------------------------------------------------------ the delta rule */

typedef struct rule_job {
    const dims *d;
    dn_a *a;
    float *work, *dq, *dk, *dv, *dbeta, *dg;
    const float *dout;
} rule_job;

static al_dn_seq seq_of(const dims *d, const dn_a *a, long i)
{
    long b = i / d->H, h = i % d->H;
    size_t rq = (size_t)b * d->T * d->Nq + h * d->dk, rv = (size_t)b * d->T * d->Nv + h * d->dv;
    size_t rg = (size_t)b * d->T * d->H + h;
    return (al_dn_seq){a->qkv[0] + rq, a->qkv[1] + rq, a->qkv[2] + rv, a->beta + rg, a->g + rg,
                       d->Nq, d->Nv, d->H, d->T, d->C, d->dk, d->dv};
}

static float *states_of(const dims *d, const dn_a *a, long i)
{
    return a->S + (size_t)i * (d->nC + 1) * d->dv * d->dk;
}

static void rule_rows(void *ctx, long lo, long hi, int tid)
{
    const rule_job *j = ctx;
    const dims *d = j->d;
    for (long i = lo; i < hi; i++) {
        al_dn_seq s = seq_of(d, j->a, i);
        size_t rq = s.q - j->a->qkv[0], rv = s.v - j->a->qkv[2], rg = s.g - j->a->g;
        float *w = j->work + (size_t)i * work_floats(d);
        if (!j->dout)
            al_dn_chunk_forward(&s, j->a->o + rv, states_of(d, j->a, i), w);
        else
            al_dn_chunk_backward(&s, j->dq + rq, j->dk + rq, j->dv + rv, j->dbeta + rg,
                                 j->dg + rg, j->dout + rv, states_of(d, j->a, i), w);
    }
    (void)tid;
}

static void rule_run(rule_job *j) { al_parallel_for((long)j->d->B * j->d->H, 1, rule_rows, j); }

/* ------------------------------------------------------------ forward */

static void dn_forward(const void *ctx, float *out, float *act, float *scratch, const float *x,
                       float *const *p, int B, int T)
{
    dims d = get_dims(ctx, B, T);
    dn_p w = bind(&d, p);
    dn_a a = carve(&d, act);
    for (int i = 0; i < 3; i++) {   /* q, k, v = silu(conv(w . x)) */
        al_linear_forward(a.pre[i], x, w.w[i], d.BT, d.D, width(&d, i));
        if (d.W) conv_forward(&d, a.cv[i], a.pre[i], w.conv[i], width(&d, i));
    }
    silu_heads(a.qkv[0], a.rq, a.cv[0], d.BT, d.H, d.dk);
    silu_heads(a.qkv[1], a.rk, a.cv[1], d.BT, d.H, d.dk);
    silu_heads(a.qkv[2], NULL, a.cv[2], d.BT, d.H, d.dv);
    al_linear_forward(a.beta, x, w.wbeta, d.BT, d.D, d.H);
    al_linear_forward(a.g, x, w.wdecay, d.BT, d.D, d.H);
    gates_forward(a.beta, a.g, w.bias, d.BT, d.H);
    rule_job j = {&d, &a, scratch, NULL, NULL, NULL, NULL, NULL, NULL};
    rule_run(&j);                                                   /* o_t = S_t q_t */
    al_linear_forward(a.z, x, w.wgate, d.BT, d.D, d.Nv);
    al_rmsnorm_forward(a.on, a.rstd, a.o, w.o_norm, d.BT * d.H, d.dv, d.eps);
    memcpy(a.y, a.on, (size_t)d.BT * d.Nv * sizeof(float));
    mul_silu(a.y, a.z, (size_t)d.BT * d.Nv);                        /* y = on silu(z) */
    al_linear_forward(out, a.y, w.wo, d.BT, d.Nv, d.D);           /* out = wo . y */
}

/* ------------------------------------------------------------ backward */

typedef struct dn_g {
    float *dy, *dz, *dO, *dqkv[3], *dbeta, *dg, *dpre[3];
} dn_g;

static dn_g carve_grads(const dims *d, float *s)
{
    size_t BT = d->BT;
    dn_g g;
    s += (size_t)d->B * d->H * work_floats(d);
    g.dy = s, s += BT * d->Nv;
    g.dz = s, s += BT * d->Nv;
    g.dO = s, s += BT * d->Nv;
    for (int i = 0; i < 3; i++) g.dqkv[i] = s, s += BT * width(d, i);
    g.dbeta = s, s += BT * d->H;
    g.dg = s, s += BT * d->H;
    for (int i = 0; i < 3; i++) g.dpre[i] = s, s += BT * width(d, i);
    return g;
}

/* y = rmsnorm(o) * o_norm * silu(z): dO and dz from dy, dwgate and dx
 * (written) from dz. */
static void gate_backward(const dims *d, const dn_p *w, const dn_p *dw, const dn_a *a,
                          dn_g *g, float *dx, const float *x)
{
    size_t m = (size_t)d->BT * d->Nv;
    for (size_t i = 0; i < m; i++) g->dz[i] = g->dy[i] * a->on[i];
    mul_dsilu(g->dz, a->z, m);
    mul_silu(g->dy, a->z, m);
    al_rmsnorm_backward_beta(g->dO, dw->o_norm, g->dy, a->o, w->o_norm, a->rstd, d->BT * d->H,
                             d->dv, 0.0f, 0.0f);
    al_linear_backward_beta(dx, dw->wgate, g->dz, x, w->wgate, d->BT, d->D, d->Nv, 0.0f, 0.0f);
}

/* beta = sigmoid(zb), g = -softplus(za + ...): dzb, dza in place, then
 * their products' gradients, dx added, decay_bias written. */
static void gates_backward(const dims *d, const dn_p *w, const dn_p *dw, const dn_a *a,
                           dn_g *g, float *dx, const float *x)
{
    memset(dw->bias, 0, (size_t)d->H * sizeof(float));
    for (size_t i = 0; i < (size_t)d->BT * d->H; i++) {
        g->dbeta[i] *= a->beta[i] * (1.0f - a->beta[i]);
        g->dg[i] *= -(1.0f - expf(a->g[i]));   /* d softplus = sigmoid = 1 - a */
        dw->bias[i % d->H] += g->dg[i];
    }
    al_linear_backward_beta(dx, dw->wbeta, g->dbeta, x, w->wbeta, d->BT, d->D, d->H, 1.0f, 0.0f);
    al_linear_backward_beta(dx, dw->wdecay, g->dg, x, w->wdecay, d->BT, d->D, d->H, 1.0f, 0.0f);
}

static void dn_backward(const void *ctx, float *dx, float *const *dp, float *scratch,
                        const float *dout, const float *x, const float *act, float *const *p,
                        int B, int T)
{
    dims d = get_dims(ctx, B, T);
    dn_p w = bind(&d, p), dw = bind(&d, dp);
    dn_a a = carve(&d, (float *)act);
    dn_g g = carve_grads(&d, scratch);
    /* Every output is written (AL_VARIANT_WRITES_GRADS). out = wo . y */
    al_linear_backward_beta(g.dy, dw.wo, dout, a.y, w.wo, d.BT, d.Nv, d.D, 0.0f, 0.0f);
    gate_backward(&d, &w, &dw, &a, &g, dx, x);
    rule_job j = {&d, &a, scratch, g.dqkv[0], g.dqkv[1], g.dqkv[2], g.dbeta, g.dg, g.dO};
    rule_run(&j);
    gates_backward(&d, &w, &dw, &a, &g, dx, x);
    silu_heads_backward(g.dqkv[0], a.qkv[0], a.rq, a.cv[0], d.BT, d.H, d.dk);
    silu_heads_backward(g.dqkv[1], a.qkv[1], a.rk, a.cv[1], d.BT, d.H, d.dk);
    silu_heads_backward(g.dqkv[2], a.qkv[2], NULL, a.cv[2], d.BT, d.H, d.dv);
    for (int i = 0; i < 3; i++) {
        const float *dpre = g.dqkv[i];
        if (d.W) {
            conv_backward(&d, g.dpre[i], dw.conv[i], g.dqkv[i], a.pre[i], w.conv[i], width(&d, i));
            dpre = g.dpre[i];
        }
        al_linear_backward_beta(dx, dw.w[i], dpre, x, w.w[i], d.BT, d.D, width(&d, i), 1.0f,
                                0.0f);
    }
}

/* ------------------------------------------------------------ decode */

/* The state row: S of every head (H, dv, dk), then the last W - 1
 * projections [q | k | v] (P each), oldest first. */
static size_t state_S(const dims *d) { return (size_t)d->H * d->dv * d->dk; }

static size_t dn_kv_elems(const void *ctx)
{
    dims d = get_dims(ctx, 1, 1);
    return state_S(&d) + (d.W ? (size_t)(d.W - 1) * d.P : 0);
}

static void dn_prefill(const void *ctx, al_kv_cache *cache, const float *act, float *const *p,
                       int T)
{
    dims d = get_dims(ctx, 1, T);
    dn_a a = carve(&d, (float *)act);
    size_t SS = (size_t)d.dv * d.dk;
    for (int h = 0; h < d.H; h++)
        al_kv_put(cache, 0, (int)(h * SS), (int)SS, states_of(&d, &a, h) + (size_t)d.nC * SS);
    static const float zeros[256];   /* inputs before the sequence */
    for (int j = 0; j + 1 < d.W; j++) {
        int t = T - (d.W - 1) + j, off = (int)(state_S(&d) + (size_t)j * d.P);
        for (int i = 0, at = 0; i < 3; at += width(&d, i), i++)
            for (int c = 0; c < width(&d, i); c += 256) {
                int n = width(&d, i) - c < 256 ? width(&d, i) - c : 256;
                al_kv_put(cache, 0, off + at + c, n,
                          t >= 0 ? a.pre[i] + (size_t)t * width(&d, i) + c : zeros);
            }
    }
    (void)p;
}

/* The state row | projections pj (P) | step_state's scratch (P + dv + H)
 * | beta, a (H) | o, on, z (Nv). */
static size_t dn_decode_scratch_floats(const void *ctx, int context)
{
    dims d = get_dims(ctx, 1, 1);
    (void)context;
    return dn_kv_elems(ctx) + 2 * (size_t)d.P + 3 * (size_t)d.H + 3 * (size_t)d.Nv + d.dv;
}

/* c = conv of the window win (W - 1 rows of P) and pj, then the window
 * shifted by one with pj at its end. */
static void step_conv(const dims *d, const dn_p *w, float *c, float *win, const float *pj)
{
    int W = d->W;
    for (int i = 0, at = 0; i < 3; at += width(d, i), i++)
        for (int ch = 0; ch < width(d, i); ch++) {
            const float *wc = w->conv[i] + (size_t)ch * W;
            float acc = pj[at + ch] + wc[W - 1] * pj[at + ch];
            for (int j = 0; j + 1 < W; j++) acc += wc[j] * win[(size_t)j * d->P + at + ch];
            c[at + ch] = acc;
        }
    if (W < 2) return;
    memmove(win, win + d->P, (size_t)(W - 2) * d->P * sizeof(float));
    memcpy(win + (size_t)(W - 2) * d->P, pj, (size_t)d->P * sizeof(float));
}

/* One sequence's state row (read at pos, written back): from the token's
 * projections pj (P) and gates beta, ga (H), its o (Nv). scr holds P + dv
 * + H floats. */
static void step_state(const dims *d, const dn_p *w, float *row, float *o, float *scr,
                       const float *pj, const float *beta, const float *ga, al_kv_cache *cache,
                       int pos)
{
    size_t nrow = state_S(d) + (d->W ? (size_t)(d->W - 1) * d->P : 0);
    float *c = scr, *tmp = c + d->P, *r = tmp + d->dv;
    if (pos == 0) memset(row, 0, nrow * sizeof(float));
    else al_kv_row_get(cache, 0, row);
    if (d->W) step_conv(d, w, c, row + state_S(d), pj);
    else memcpy(c, pj, (size_t)d->P * sizeof(float));
    float *q = c, *k = c + d->Nq, *v = c + 2 * d->Nq;   /* silu, q and k normalised */
    silu_heads(q, r, q, 1, d->H, d->dk);
    silu_heads(k, r, k, 1, d->H, d->dk);
    silu_heads(v, NULL, v, 1, d->H, d->dv);
    for (int h = 0; h < d->H; h++)
        al_dn_step(row + (size_t)h * d->dv * d->dk, o + h * d->dv, tmp, q + h * d->dk,
                   k + h * d->dk, v + h * d->dv, beta[h], expf(ga[h]), d->dk, d->dv);
    al_kv_row_put(cache, 0, row);   /* rewritten in place */
}

static void dn_decode(const void *ctx, float *out, float *scratch, const float *x,
                      float *const *p, al_kv_cache *cache, int pos)
{
    dims d = get_dims(ctx, 1, 1);
    dn_p w = bind(&d, p);
    float *row = scratch, *pj = row + dn_kv_elems(ctx), *scr = pj + d.P;
    float *beta = scr + d.P + d.dv + d.H;
    float *ga = beta + d.H, *o = ga + d.H, *on = o + d.Nv, *z = on + d.Nv;
    for (int i = 0, at = 0; i < 3; at += width(&d, i), i++)
        al_linear_row(pj + at, x, w.w[i], d.D, width(&d, i));
    al_linear_row(beta, x, w.wbeta, d.D, d.H);
    al_linear_row(ga, x, w.wdecay, d.D, d.H);
    gates_forward(beta, ga, w.bias, 1, d.H);
    step_state(&d, &w, row, o, scr, pj, beta, ga, cache, pos);
    al_linear_row(z, x, w.wgate, d.D, d.Nv);
    al_rmsnorm_forward(on, NULL, o, w.o_norm, d.H, d.dv, d.eps);
    mul_silu(on, z, (size_t)d.Nv);
    al_linear_row(out, on, w.wo, d.Nv, d.D);
}

/* ---- batched decode: B sequences, each projection one product over the
 * B tokens, each state stepped on its own. */

/* The widest output of a batched step's products (al_linear_forward_few's tmp). */
static int batch_wide(const dims *d) { return d->D > d->Nv ? (d->D > d->Nq ? d->D : d->Nq)
                                                            : (d->Nv > d->Nq ? d->Nv : d->Nq); }

/* One state row | step_state's scratch (P + dv + H) | pj (B, P) | proj
 * (B, Nq or Nv) | beta, ga (B, H) | o, on, z (B, Nv) | tmp (B, widest). */
static size_t dn_decode_batch_scratch_floats(const void *ctx, int context, int B)
{
    dims d = get_dims(ctx, 1, 1);
    (void)context;
    return dn_kv_elems(ctx) + d.P + d.dv + d.H +
           (size_t)B * (d.P + (size_t)(d.Nq > d.Nv ? d.Nq : d.Nv) + 2 * (size_t)d.H +
                        3 * (size_t)d.Nv + batch_wide(&d));
}

static void dn_decode_batch(const void *ctx, float *out, float *scratch, const float *x,
                            float *const *p, al_kv_cache *const *caches, const int *pos, int B)
{
    dims d = get_dims(ctx, 1, 1);
    dn_p w = bind(&d, p);
    float *row = scratch, *scr = row + dn_kv_elems(ctx), *pj = scr + d.P + d.dv + d.H;
    float *proj = pj + (size_t)B * d.P;
    float *beta = proj + (size_t)B * (d.Nq > d.Nv ? d.Nq : d.Nv), *ga = beta + (size_t)B * d.H;
    float *o = ga + (size_t)B * d.H, *on = o + (size_t)B * d.Nv, *z = on + (size_t)B * d.Nv;
    float *tmp = z + (size_t)B * d.Nv;
    for (int i = 0, at = 0; i < 3; at += width(&d, i), i++) {   /* pj[b] = [q | k | v] */
        al_linear_forward_few(proj, tmp, x, w.w[i], B, d.D, width(&d, i));
        for (int b = 0; b < B; b++)
            memcpy(pj + (size_t)b * d.P + at, proj + (size_t)b * width(&d, i),
                   (size_t)width(&d, i) * sizeof(float));
    }
    al_linear_forward_few(beta, tmp, x, w.wbeta, B, d.D, d.H);
    al_linear_forward_few(ga, tmp, x, w.wdecay, B, d.D, d.H);
    gates_forward(beta, ga, w.bias, B, d.H);
    for (int b = 0; b < B; b++)
        step_state(&d, &w, row, o + (size_t)b * d.Nv, scr, pj + (size_t)b * d.P,
                   beta + (size_t)b * d.H, ga + (size_t)b * d.H, caches[b], pos[b]);
    al_linear_forward_few(z, tmp, x, w.wgate, B, d.D, d.Nv);
    al_rmsnorm_forward(on, NULL, o, w.o_norm, B * d.H, d.dv, d.eps);
    mul_silu(on, z, (size_t)B * d.Nv);
    al_linear_forward_few(out, tmp, on, w.wo, B, d.Nv, d.D);
}

/* ------------------------------------------------------------ pictures */

/* P (H, T, T): the weights M_ij that output i gives value j (after the
 * convolution), o_i = sum_j M_ij v_j, from the saved q, k, beta and decays
 * (al_dn_weights): signed, rows not summing to 1 (pictures.weights). A
 * command's call, not a training step's: the T x T work is allocated here. */
static void dn_probs(const void *ctx, float *P, const float *act, const float *src,
                     float *const *p, int T)
{
    dims d = get_dims(ctx, 1, T);
    dn_a a = carve(&d, (float *)act);
    float *work = malloc(al_dn_work_floats(T, d.dk, d.dv) * sizeof(float));
    for (int h = 0; h < d.H; h++) {
        al_dn_seq s = seq_of(&d, &a, h);
        s.C = T;
        if (work) al_dn_weights(&s, P + (size_t)h * T * T, work);
        else for (size_t i = 0; i < (size_t)T * T; i++) P[(size_t)h * T * T + i] = NAN;
    }
    free(work);
    (void)src, (void)p;
}

/* ------------------------------------------------------------ tables */

static const al_variant_train dn_train = {dn_params, dn_act_floats, dn_scratch_floats,
                                          dn_forward, dn_backward, AL_VARIANT_WRITES_GRADS};
static const al_variant_decode dn_decode_table = {
    .storage = AL_KV_STATE,
    .kv_elems = dn_kv_elems,
    .prefill = dn_prefill,
    .scratch_floats = dn_decode_scratch_floats,
    .decode = dn_decode,
    .batch_scratch_floats = dn_decode_batch_scratch_floats,
    .decode_batch = dn_decode_batch,
};

static const al_variant_pictures dn_pictures = {.probs = dn_probs, .shared = 0, .weights = 1};

const al_variant al_variant_deltanet = {
    .api_version = AL_VARIANT_API_VERSION,
    .name = "deltanet",
    .description = "Gated DeltaNet (Yang et al. 2024): a state of n_head x d_key x d_head "
                   "floats per layer (plus conv - 1 projections), the same at every context",
    .settings = dn_settings,
    .init = dn_init,
    .fini = free,
    .train = &dn_train,
    .decode = &dn_decode_table,
    .pictures = &dn_pictures,
};
