/*
 * linear.c - gated linear attention with a data-dependent scalar decay per
 * head and token: the RetNet / Mamba-2 SSD / "simple GLA" form (Sun et al.
 * 2023; Dao, Gu 2024; Yang et al. 2024, fla's simple_gla). A state layer:
 * it keeps no cache of rows but one state per head, rewritten in place.
 *
 *   q_t = s * wq . x_t   k_t = wk . x_t   v_t = wv . x_t   (per head h)
 *   a_t = exp(-softplus(w_decay . x_t + b_decay))     in (0, 1), per head
 *   S_t = a_t S_{t-1} + v_t k_t^T    (S: d_head x d_key, S_{-1} = 0)
 *   o_t = S_t q_t                    out = wo . [o_t of every head]
 * with s = d_key^-1/2 (fla's default scale; a constant a reader can fold
 * into wq). Heads are the model's n_head; `d_key` (0: d_head) sets the
 * key width. b_decay (one per head) is this layer's own parameter, the one
 * bias of an attnlab model; it starts at the AL_INIT_DECAY values
 * (RetNet-like decays from 1 - 1/4 to 1 - 1/256 across heads).
 *
 * Training runs the chunkwise-parallel form (chunks of `chunk` tokens,
 * setting, default 64): with G_i the cumulative log decay inside a chunk,
 *   o_i = sum_{j <= i in chunk} exp(G_i - G_j) (q_i . k_j) v_j
 *         + exp(G_i) S q_i                         (S: the state entering)
 *   S'  = exp(G_L) S + sum_j exp(G_L - G_j) v_j k_j^T
 * as matrix products (al_gemm_*), every exponent a difference <= 0, so
 * nothing overflows however fast a head forgets. The state entering each
 * chunk is saved for backward, which walks the chunks in reverse carrying
 * the state's gradient. The token-by-token recurrence is the tests'
 * oracle (tests/test_linear.c) and decode's algorithm.
 *
 * A state layer is causal by construction: under the causal-mask ablation
 * (model.causal: false) it stays causal.
 *
 * Decode: the state, heads * d_head * d_key floats, is one f32 row
 * (AL_KV_STATE) whatever the context. Pictures: the equivalent attention
 * matrix, P[h][i][j] = s q_i . k_j prod_{j < t <= i} a_t (j <= i): weights,
 * not probabilities (pictures.weights).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <attnlab/attnlab_variant.h>
#include <attnlab/al_kvcache.h>
#include <attnlab/al_parallel.h>

enum { SET_D_KEY, SET_CHUNK, N_SETTINGS };

static const al_setting lin_settings[] = {
    {"d_key", AL_SET_INT, 0, 0, "key (and query) width per head; 0 = d_head"},
    {"chunk", AL_SET_INT, 64, 0, "tokens per chunk of the chunkwise-parallel training form"},
    {NULL, 0, 0, 0, NULL},
};
AL_SETTINGS_MATCH(lin_settings, N_SETTINGS);

/* Parameters, in this order. */
enum { P_WQ, P_WK, P_WV, P_WDECAY, P_BDECAY, P_WO, N_PARAMS };

typedef struct lin_ctx {
    int D, H, dk, dh, C;   /* C: chunk */
    float scale;           /* d_key^-1/2 */
} lin_ctx;

static void *lin_init(const al_variant *v, const al_attn_shape *s, char *err, size_t errlen)
{
    (void)v;
    double dk = s->set[SET_D_KEY], C = s->set[SET_CHUNK];
    if (dk < 0 || dk > 4096) {
        snprintf(err, errlen, "'d_key' (%g) must be 0 (d_head) to 4096", dk);
        return NULL;
    }
    if (C < 1 || C > 4096) {
        snprintf(err, errlen, "'chunk' (%g) must be 1 to 4096", C);
        return NULL;
    }
    lin_ctx *c = malloc(sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->D = s->d_model, c->H = s->n_head, c->dh = s->d_head;
    c->dk = dk > 0 ? (int)dk : s->d_head;
    c->C = (int)C;
    c->scale = 1.0f / sqrtf((float)c->dk);
    return c;
}

static void lin_fini(void *ctx) { free(ctx); }

static int lin_params(const void *ctx, al_param_spec *o)
{
    const lin_ctx *c = ctx;
    int Hk = c->H * c->dk, Hv = c->H * c->dh;
    o[P_WQ] = (al_param_spec){"wq", Hk, c->D, AL_INIT_NORMAL};
    o[P_WK] = (al_param_spec){"wk", Hk, c->D, AL_INIT_NORMAL};
    o[P_WV] = (al_param_spec){"wv", Hv, c->D, AL_INIT_NORMAL};
    o[P_WDECAY] = (al_param_spec){"w_decay", c->H, c->D, AL_INIT_NORMAL};
    o[P_BDECAY] = (al_param_spec){"b_decay", c->H, 0, AL_INIT_DECAY};
    o[P_WO] = (al_param_spec){"wo", c->D, Hv, AL_INIT_RESID};
    return N_PARAMS;
}

/* ------------------------------------------------------------ layout */

static int n_chunks(const lin_ctx *c, int T) { return (T + c->C - 1) / c->C; }
static size_t state_floats(const lin_ctx *c) { return (size_t)c->dh * c->dk; }

/* Saved activations: q (BT, H*dk) scaled | k (BT, H*dk) | v (BT, H*dh) |
 * g (BT, H) log decays | y (BT, H*dh) | the state entering each chunk and
 * the last (B, H, nC + 1, dh, dk). */
typedef struct lin_act {
    float *q, *k, *v, *g, *y, *S;
} lin_act;

static lin_act carve_act(const lin_ctx *c, float *a, int B, int T)
{
    size_t BT = (size_t)B * T;
    lin_act r;
    r.q = a, r.k = r.q + BT * c->H * c->dk, r.v = r.k + BT * c->H * c->dk;
    r.g = r.v + BT * c->H * c->dh, r.y = r.g + BT * c->H, r.S = r.y + BT * c->H * c->dh;
    return r;
}

static size_t lin_act_floats(const void *ctx, int B, int T)
{
    const lin_ctx *c = ctx;
    size_t BT = (size_t)B * T;
    return BT * c->H * (2 * (size_t)c->dk + 2 * (size_t)c->dh + 1) +
           (size_t)B * c->H * (n_chunks(c, T) + 1) * state_floats(c);
}

/* Backward scratch: dy, dv (BT, H*dh) | dq, dk (BT, H*dk) | dg (BT, H). */
static size_t lin_scratch_floats(const void *ctx, int B, int T)
{
    const lin_ctx *c = ctx;
    return (size_t)B * T * c->H * (2 * (size_t)c->dh + 2 * (size_t)c->dk + 1);
}

/* Per-thread scratch of one (sequence, head) job: A, dP (C, C) | G, dG (C) |
 * Kd, Qi (C, dk) | Vd, dOs (C, dh) | dS (dh, dk). */
static size_t job_floats(const lin_ctx *c)
{
    size_t C = (size_t)c->C;
    return 2 * C * C + 2 * C + 2 * C * c->dk + 2 * C * c->dh + state_floats(c);
}

/* log a = -softplus(z), computed without overflow. */
static float log_decay(float z) { return -(fmaxf(z, 0.0f) + log1pf(expf(-fabsf(z)))); }

/* ------------------------------------------------------------ one chunk */

/* Where chunk c of sequence b, head h lives. */
typedef struct chunk_view {
    const float *q, *k, *v, *g;   /* rows ld apart */
    int n, ldk, ldv;              /* n tokens */
} chunk_view;

static chunk_view view_of(const lin_ctx *c, const lin_act *a, int b, int h, int T, int ch)
{
    size_t t0 = (size_t)b * T + (size_t)ch * c->C;
    chunk_view w;
    w.ldk = c->H * c->dk, w.ldv = c->H * c->dh;
    w.q = a->q + t0 * w.ldk + (size_t)h * c->dk;
    w.k = a->k + t0 * w.ldk + (size_t)h * c->dk;
    w.v = a->v + t0 * w.ldv + (size_t)h * c->dh;
    w.g = a->g + t0 * c->H + h;
    w.n = T - ch * c->C < c->C ? T - ch * c->C : c->C;
    return w;
}

/* G (n): the cumulative log decay inside the chunk. */
static void cum_decay(float *G, const chunk_view *w, int H)
{
    float acc = 0;
    for (int i = 0; i < w->n; i++) acc += w->g[(size_t)i * H], G[i] = acc;
}

/* A (n, n, ld C) = (q k^T) o exp(G_i - G_j), zero above the diagonal. */
static void decayed_scores(float *A, const float *G, const chunk_view *w, int C, int dk)
{
    al_gemm_nt(A, C, w->q, w->ldk, w->k, w->ldk, w->n, w->n, dk, 1.0f, 0.0f);
    for (int i = 0; i < w->n; i++)
        for (int j = 0; j < w->n; j++)
            A[(size_t)i * C + j] = j <= i ? A[(size_t)i * C + j] * expf(G[i] - G[j]) : 0.0f;
}

/* dst (n, d) = rows of src (ld) times exp(G_L - G_j) (toend) or exp(G_j). */
static void scale_rows(float *dst, const float *src, int ld, const float *G, int n, int d,
                       int toend)
{
    for (int j = 0; j < n; j++) {
        float f = expf(toend ? G[n - 1] - G[j] : G[j]);
        for (int e = 0; e < d; e++) dst[(size_t)j * d + e] = src[(size_t)j * ld + e] * f;
    }
}

/* ------------------------------------------------------------ forward */

typedef struct lin_job {
    const lin_ctx *c;
    lin_act a;
    float *dq, *dk, *dv, *dg;   /* backward's outputs */
    const float *dy;
    int B, T;
} lin_job;

/* Sequence b, head h: y and the states entering each chunk. */
static void forward_head(const lin_job *j, int b, int h, float *buf)
{
    const lin_ctx *c = j->c;
    int C = c->C, nC = n_chunks(c, j->T), ldy = c->H * c->dh;
    float *A = buf, *G = A + (size_t)C * C, *Kd = G + C;
    float *S = j->a.S + ((size_t)b * c->H + h) * (nC + 1) * state_floats(c);
    memset(S, 0, state_floats(c) * sizeof(float));
    for (int ch = 0; ch < nC; ch++, S += state_floats(c)) {
        chunk_view w = view_of(c, &j->a, b, h, j->T, ch);
        float *y = j->a.y + ((size_t)b * j->T + (size_t)ch * C) * ldy + (size_t)h * c->dh;
        float *next = S + state_floats(c);
        cum_decay(G, &w, c->H);
        decayed_scores(A, G, &w, C, c->dk);
        al_gemm_nn(y, ldy, A, C, w.v, w.ldv, w.n, c->dh, w.n, 1.0f, 0.0f);
        scale_rows(Kd, w.q, w.ldk, G, w.n, c->dk, 0);   /* e^G_i q_i */
        al_gemm_nt(y, ldy, Kd, c->dk, S, c->dk, w.n, c->dh, c->dk, 1.0f, 1.0f);
        float fL = expf(G[w.n - 1]);
        for (size_t e = 0; e < state_floats(c); e++) next[e] = fL * S[e];
        scale_rows(Kd, w.k, w.ldk, G, w.n, c->dk, 1);   /* e^(G_L - G_j) k_j */
        al_gemm_tn(next, c->dk, w.v, w.ldv, Kd, c->dk, c->dh, c->dk, w.n, 1.0f, 1.0f);
    }
}

static void forward_jobs(void *arg, long lo, long hi, int tid)
{
    const lin_job *j = arg;
    float *buf = al_parallel_scratch(tid, job_floats(j->c));
    for (long i = lo; i < hi; i++) forward_head(j, (int)(i / j->c->H), (int)(i % j->c->H), buf);
}

/* q, k, v, the log decays, from x (BT, D). */
static void project(const lin_ctx *c, const lin_act *a, const float *x, float *const *p,
                    int BT)
{
    int Hk = c->H * c->dk;
    al_linear_forward(a->q, x, p[P_WQ], BT, c->D, Hk);
    for (size_t i = 0; i < (size_t)BT * Hk; i++) a->q[i] *= c->scale;
    al_linear_forward(a->k, x, p[P_WK], BT, c->D, Hk);
    al_linear_forward(a->v, x, p[P_WV], BT, c->D, c->H * c->dh);
    al_linear_forward(a->g, x, p[P_WDECAY], BT, c->D, c->H);
    for (int t = 0; t < BT; t++)
        for (int h = 0; h < c->H; h++) {
            float *g = a->g + (size_t)t * c->H + h;
            *g = log_decay(*g + p[P_BDECAY][h]);
        }
}

static void lin_forward(const void *ctx, float *out, float *act, float *scratch, const float *x,
                        float *const *p, int B, int T)
{
    (void)scratch;
    const lin_ctx *c = ctx;
    lin_job j = {.c = c, .a = carve_act(c, act, B, T), .B = B, .T = T};
    project(c, &j.a, x, p, B * T);
    al_parallel_scratch_reserve(job_floats(c));
    al_parallel_for((long)B * c->H, 1, forward_jobs, &j);
    al_linear_forward(out, j.a.y, p[P_WO], B * T, c->H * c->dh, c->D);
}

/* ------------------------------------------------------------ backward */

typedef struct head_bufs {
    float *A, *dP, *G, *dG, *Kd, *Qi, *Vd, *dOs, *dS;
} head_bufs;

static head_bufs carve_bufs(const lin_ctx *c, float *buf)
{
    size_t C = (size_t)c->C;
    head_bufs r;
    r.A = buf, r.dP = r.A + C * C, r.G = r.dP + C * C, r.dG = r.G + C;
    r.Kd = r.dG + C, r.Qi = r.Kd + C * c->dk, r.Vd = r.Qi + C * c->dk;
    r.dOs = r.Vd + C * c->dh, r.dS = r.dOs + C * c->dh;
    return r;
}

static float dot(const float *a, const float *b, int n)
{
    float s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Inside the chunk: dv = A^T dO, dq = dP' k, dk = dP'^T q (written), with
 * dP' = (dO v^T) o exp(G_i - G_j) masked; dG from the decays' products. */
static void intra_grads(const lin_ctx *c, const chunk_view *w, head_bufs *hb, const float *dO,
                        int ldo, float *dq, float *dk, float *dv)
{
    int C = c->C, n = w->n;
    decayed_scores(hb->A, hb->G, w, C, c->dk);
    al_gemm_tn(dv, w->ldv, hb->A, C, dO, ldo, n, c->dh, n, 1.0f, 0.0f);
    al_gemm_nt(hb->dP, C, dO, ldo, w->v, w->ldv, n, n, c->dh, 1.0f, 0.0f);
    for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++) {
            float *d = hb->dP + (size_t)i * C + j;
            float r = *d * hb->A[(size_t)i * C + j];   /* d/dG_i, and minus d/dG_j */
            hb->dG[i] += r, hb->dG[j] -= r;
            *d *= expf(hb->G[i] - hb->G[j]);
        }
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) hb->dP[(size_t)i * C + j] = 0.0f;
    al_gemm_nn(dq, w->ldk, hb->dP, C, w->k, w->ldk, n, c->dk, n, 1.0f, 0.0f);
    al_gemm_tn(dk, w->ldk, hb->dP, C, w->q, w->ldk, n, c->dk, n, 1.0f, 0.0f);
}

/* The state entering (S) read by every output: dq += e^G_i S^T do_i,
 * dG_i += e^G_i do_i . S q_i. Leaves dOs = e^G_i do_i. */
static void inter_grads(const lin_ctx *c, const chunk_view *w, head_bufs *hb, const float *S,
                        const float *dO, int ldo, float *dq)
{
    int n = w->n;
    scale_rows(hb->dOs, dO, ldo, hb->G, n, c->dh, 0);
    al_gemm_nn(hb->Qi, c->dk, hb->dOs, c->dh, S, c->dk, n, c->dk, c->dh, 1.0f, 0.0f);
    for (int i = 0; i < n; i++) {
        const float *qi = hb->Qi + (size_t)i * c->dk;
        hb->dG[i] += dot(qi, w->q + (size_t)i * w->ldk, c->dk);
        for (int e = 0; e < c->dk; e++) dq[(size_t)i * w->ldk + e] += qi[e];
    }
}

/* The state leaving (its gradient dS, carried from the next chunk):
 * S' = e^G_L S + sum_j e^(G_L - G_j) v_j k_j^T. Then dS becomes the
 * gradient of the state entering: e^G_L dS + dOs^T q. */
static void state_grads(const lin_ctx *c, const chunk_view *w, head_bufs *hb, const float *S,
                        float *dk, float *dv)
{
    int n = w->n;
    size_t sf = state_floats(c);
    scale_rows(hb->Kd, w->k, w->ldk, hb->G, n, c->dk, 1);
    scale_rows(hb->Vd, w->v, w->ldv, hb->G, n, c->dh, 1);
    al_gemm_nt(dv, w->ldv, hb->Kd, c->dk, hb->dS, c->dk, n, c->dh, c->dk, 1.0f, 1.0f);
    al_gemm_nn(hb->Qi, c->dk, hb->Vd, c->dh, hb->dS, c->dk, n, c->dk, c->dh, 1.0f, 0.0f);
    float fL = expf(hb->G[n - 1]), wsum = fL * dot(hb->dS, S, (int)sf);
    for (int j = 0; j < n; j++) {
        const float *kj = hb->Qi + (size_t)j * c->dk;
        float wj = dot(kj, w->k + (size_t)j * w->ldk, c->dk);
        hb->dG[j] -= wj, wsum += wj;
        for (int e = 0; e < c->dk; e++) dk[(size_t)j * w->ldk + e] += kj[e];
    }
    hb->dG[n - 1] += wsum;
    for (size_t e = 0; e < sf; e++) hb->dS[e] *= fL;
    al_gemm_tn(hb->dS, c->dk, hb->dOs, c->dh, w->q, w->ldk, c->dh, c->dk, n, 1.0f, 1.0f);
}

/* Sequence b, head h, chunks in reverse: dq, dk, dv, dg written. */
static void backward_head(const lin_job *j, int b, int h, float *buf)
{
    const lin_ctx *c = j->c;
    int nC = n_chunks(c, j->T), ldo = c->H * c->dh, ldk = c->H * c->dk;
    head_bufs hb = carve_bufs(c, buf);
    const float *S0 = j->a.S + ((size_t)b * c->H + h) * (nC + 1) * state_floats(c);
    memset(hb.dS, 0, state_floats(c) * sizeof(float));
    for (int ch = nC - 1; ch >= 0; ch--) {
        chunk_view w = view_of(c, &j->a, b, h, j->T, ch);
        size_t t0 = (size_t)b * j->T + (size_t)ch * c->C;
        const float *dO = j->dy + t0 * ldo + (size_t)h * c->dh;
        float *dq = j->dq + t0 * ldk + (size_t)h * c->dk, *dk = j->dk + t0 * ldk + (size_t)h * c->dk;
        float *dv = j->dv + t0 * ldo + (size_t)h * c->dh;
        const float *S = S0 + (size_t)ch * state_floats(c);
        cum_decay(hb.G, &w, c->H);
        memset(hb.dG, 0, (size_t)w.n * sizeof(float));
        intra_grads(c, &w, &hb, dO, ldo, dq, dk, dv);
        inter_grads(c, &w, &hb, S, dO, ldo, dq);
        state_grads(c, &w, &hb, S, dk, dv);
        float acc = 0;   /* G_i = sum_{t <= i} g_t: dg_t = sum_{i >= t} dG_i */
        for (int i = w.n - 1; i >= 0; i--) acc += hb.dG[i], j->dg[(t0 + i) * c->H + h] = acc;
    }
}

static void backward_jobs(void *arg, long lo, long hi, int tid)
{
    const lin_job *j = arg;
    float *buf = al_parallel_scratch(tid, job_floats(j->c));
    for (long i = lo; i < hi; i++) backward_head(j, (int)(i / j->c->H), (int)(i % j->c->H), buf);
}

/* Adds (no AL_VARIANT_WRITES_GRADS). */
static void lin_backward(const void *ctx, float *dx, float *const *dp, float *scratch,
                         const float *dout, const float *x, const float *act, float *const *p,
                         int B, int T)
{
    const lin_ctx *c = ctx;
    int BT = B * T, Hk = c->H * c->dk, Hv = c->H * c->dh;
    lin_job j = {.c = c, .a = carve_act(c, (float *)act, B, T), .B = B, .T = T};
    float *dy = scratch, *dv = dy + (size_t)BT * Hv, *dq = dv + (size_t)BT * Hv;
    float *dk = dq + (size_t)BT * Hk, *dg = dk + (size_t)BT * Hk;
    j.dy = dy, j.dq = dq, j.dk = dk, j.dv = dv, j.dg = dg;
    al_linear_backward_beta(dy, dp[P_WO], dout, j.a.y, p[P_WO], BT, Hv, c->D, 0.0f, 1.0f);
    al_parallel_scratch_reserve(job_floats(c));
    al_parallel_for((long)B * c->H, 1, backward_jobs, &j);
    /* g = -softplus(z): dz = -dg sigmoid(z) = -dg (1 - e^g) */
    for (size_t i = 0; i < (size_t)BT * c->H; i++) {
        dg[i] *= -(1.0f - expf(j.a.g[i]));
        dp[P_BDECAY][i % c->H] += dg[i];
    }
    for (size_t i = 0; i < (size_t)BT * Hk; i++) dq[i] *= c->scale;
    al_linear_backward(dx, dp[P_WQ], dq, x, p[P_WQ], BT, c->D, Hk);
    al_linear_backward(dx, dp[P_WK], dk, x, p[P_WK], BT, c->D, Hk);
    al_linear_backward(dx, dp[P_WV], dv, x, p[P_WV], BT, c->D, Hv);
    al_linear_backward(dx, dp[P_WDECAY], dg, x, p[P_WDECAY], BT, c->D, c->H);
}

/* ------------------------------------------------------------ decode */

static size_t lin_state_elems(const void *ctx)
{
    const lin_ctx *c = ctx;
    return (size_t)c->H * state_floats(c);
}

/* After forward on one sequence of T tokens: the state after token T-1,
 * saved as the last of each head's states. */
static void lin_prefill(const void *ctx, al_kv_cache *cache, const float *act, float *const *p,
                        int T)
{
    (void)p;
    const lin_ctx *c = ctx;
    lin_act a = carve_act(c, (float *)act, 1, T);
    int nC = n_chunks(c, T), sf = (int)state_floats(c);
    for (int h = 0; h < c->H; h++)
        al_kv_put(cache, 0, h * sf, sf, a.S + ((size_t)h * (nC + 1) + nC) * sf);
}

/* q, k (H*dk) | v, y (H*dh) | z (H) | the state (H*dh*dk). */
static size_t lin_decode_scratch(const void *ctx, int context)
{
    (void)context;
    const lin_ctx *c = ctx;
    return 2 * (size_t)c->H * c->dk + 2 * (size_t)c->H * c->dh + c->H + lin_state_elems(c);
}

/* The recurrence, one token: S = a S + v k^T, y = S q. */
static void lin_decode(const void *ctx, float *out, float *scratch, const float *x,
                       float *const *p, al_kv_cache *cache, int pos)
{
    const lin_ctx *c = ctx;
    int Hk = c->H * c->dk, Hv = c->H * c->dh, sf = (int)state_floats(c);
    float *q = scratch, *k = q + Hk, *v = k + Hk, *y = v + Hv, *z = y + Hv, *S = z + c->H;
    al_linear_row(q, x, p[P_WQ], c->D, Hk);
    al_linear_row(k, x, p[P_WK], c->D, Hk);
    al_linear_row(v, x, p[P_WV], c->D, Hv);
    al_linear_row(z, x, p[P_WDECAY], c->D, c->H);
    if (pos == 0) memset(S, 0, (size_t)c->H * sf * sizeof(float));
    else al_kv_row_get(cache, 0, S);
    for (int h = 0; h < c->H; h++) {
        float a = expf(log_decay(z[h] + p[P_BDECAY][h]));
        float *Sh = S + (size_t)h * sf;
        const float *kh = k + (size_t)h * c->dk, *vh = v + (size_t)h * c->dh;
        for (int r = 0; r < c->dh; r++)
            for (int e = 0; e < c->dk; e++)
                Sh[(size_t)r * c->dk + e] = a * Sh[(size_t)r * c->dk + e] + vh[r] * kh[e];
        for (int r = 0; r < c->dh; r++)
            y[h * c->dh + r] = c->scale * dot(Sh + (size_t)r * c->dk, q + (size_t)h * c->dk, c->dk);
    }
    al_kv_row_put(cache, 0, S);   /* rewritten in place */
    al_linear_row(out, y, p[P_WO], Hv, c->D);
}

/* ------------------------------------------------------------ pictures */

/* P (H, T, T): s q_i . k_j prod_{j < t <= i} a_t for j <= i, 0 above the
 * diagonal (the decay summed in double, walking back from i). */
static void lin_probs(const void *ctx, float *P, const float *act, const float *src,
                      float *const *p, int T)
{
    (void)src, (void)p;
    const lin_ctx *c = ctx;
    lin_act a = carve_act(c, (float *)act, 1, T);
    int ldk = c->H * c->dk;
    for (int h = 0; h < c->H; h++)
        for (int i = 0; i < T; i++) {
            float *row = P + ((size_t)h * T + i) * T;
            const float *qi = a.q + (size_t)i * ldk + h * c->dk;
            double G = 0;   /* sum of g_t over j < t <= i */
            for (int j = i; j >= 0; j--) {
                row[j] = dot(qi, a.k + (size_t)j * ldk + h * c->dk, c->dk) * (float)exp(G);
                G += a.g[(size_t)j * c->H + h];
            }
            for (int j = i + 1; j < T; j++) row[j] = 0.0f;
        }
}

/* ------------------------------------------------------------ the table */

static const al_variant_train lin_train = {lin_params, lin_act_floats, lin_scratch_floats,
                                           lin_forward, lin_backward, 0};

static const al_variant_decode lin_decode_table = {
    .storage = AL_KV_STATE, .kv_elems = lin_state_elems, .prefill = lin_prefill,
    .scratch_floats = lin_decode_scratch, .decode = lin_decode};

static const al_variant_pictures lin_pictures = {.probs = lin_probs, .shared = 0, .weights = 1};

const al_variant al_variant_linear = {
    .api_version = AL_VARIANT_API_VERSION,
    .name = "linear",
    .description = "gated linear attention: a d_head x d_key state per head, decayed by a "
                   "learned scalar per token; constant memory",
    .settings = lin_settings,
    .init = lin_init,
    .fini = lin_fini,
    .train = &lin_train,
    .decode = &lin_decode_table,
    .pictures = &lin_pictures,
};
