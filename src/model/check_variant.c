/*
 * check_variant.c - the variant conformance suite (al_check_variant.h):
 * the generic checks every variant passes, returning measured errors
 * rather than asserting, so that `attnlab check-variant` and the tests run
 * the same code. Layer-level checks call the variant's members on buffers
 * of their own (with guard floats after every scratch); decode, prefill,
 * batch and cache checks go through a tiny model and the core's decoder.
 * Each check is one cv_job run by al_check_group (check_report.c): in this
 * process, or in a child of its own when the caller cannot trust the
 * variant, choosing the shapes included (the variant's init runs there).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_attention.h"
#include "al_check_variant.h"
#include "al_cost.h"
#include "al_decode.h"
#include "al_isolate.h"
#include "al_kvcache.h"
#include "al_model.h"
#include "al_parallel.h"
#include "al_registry.h"
#include "check_internal.h"

enum { SEQ = 8, CTX = SEQ + 4, VOCAB = 13, LAYERS = 2, MAX_SHAPES = 3 };
/* Contexts past one cache tile: decode reads the cache block by block. */
enum { LONG = 2 * AL_KV_TILE + 3, SCRATCH_CTX = AL_KV_TILE + 8 };

/* Candidate (d_model, n_head, d_head); the first MAX_SHAPES the variant
 * accepts are checked (layer checks at each, model checks at the first). */
static const int candidates[][3] = {{16, 4, 4}, {24, 2, 8}, {32, 4, 8}, {16, 2, 8}, {12, 3, 4}};

typedef struct cv_shape {
    int D, H, dh;
    double set[AL_MAX_SETTINGS];
} cv_shape;

/* ------------------------------------------------------------ shapes */

static void shape_config(al_model_config *c, const al_variant *v, const cv_shape *sh,
                         int causal)
{
    memset(c, 0, sizeof *c);
    c->n_layer = LAYERS;
    c->d_model = sh->D;
    c->n_head = sh->H;
    c->d_head = sh->dh;
    c->seq_len = SEQ;
    c->vocab_size = VOCAB;
    c->mlp_ratio = 2.0;
    c->norm_eps = 1e-5;
    c->rope_base = 10000;
    c->rope_fraction = 1.0;
    c->causal = causal;
    c->attn = v;
    snprintf(c->variant, sizeof c->variant, "%s", v->name);
    snprintf(c->kv_dtype, sizeof c->kv_dtype, "f32");
    memcpy(c->attn_set, sh->set, sizeof c->attn_set);
}

static int accepts(const al_variant *v, const cv_shape *sh, al_err *e)
{
    al_model_config c;
    al_model m;
    shape_config(&c, v, sh, 1);
    if (al_model_init(&m, &c, e) != 0) return 0;
    al_model_free(&m);
    return 1;
}

/* Settings of one shape: fixed ones as given, optional ones at their
 * defaults, required ones the first of 2, 1, 4, 8 the variant accepts.
 * Returns 1 when the shape is accepted. */
static int shape_settings(const al_variant *v, const al_check_settings *fx, cv_shape *sh,
                          al_err *e)
{
    static const double tries[] = {2, 1, 4, 8};
    int n = al_variant_n_settings(v);
    for (int i = 0; i < n; i++)
        sh->set[i] = fx && fx->given[i] ? fx->set[i] : v->settings[i].def;
    for (int i = 0; i < n; i++) {
        if (!v->settings[i].required || (fx && fx->given[i])) continue;
        for (int k = 0; k < 4; k++) {
            sh->set[i] = tries[k];
            if (accepts(v, sh, e)) break;
        }
    }
    return accepts(v, sh, e);
}

static int pick_shapes(const al_variant *v, const al_check_settings *fx, cv_shape *out,
                       al_err *e)
{
    int n = 0;
    al_err first = {{0}};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0] && n < MAX_SHAPES; i++) {
        cv_shape sh = {candidates[i][0], candidates[i][1], candidates[i][2], {0}};
        al_err why;
        if (shape_settings(v, fx, &sh, &why)) out[n++] = sh;
        else if (!first.msg[0]) first = why;
    }
    if (!n) *e = first;
    return n;
}

static void shape_text(const cv_shape *sh, const char *extra, char *buf, size_t n)
{
    snprintf(buf, n, "D%d H%dx%d%s%.100s", sh->D, sh->H, sh->dh, extra[0] ? " " : "", extra);
}

/* ------------------------------------------------------------ one layer */

typedef al_check_layer lt;

/* The layer of v at candidate shape sh (pick_shapes kept only shapes the
 * variant accepts). */
static void lt_init(lt *t, const al_variant *v, const cv_shape *sh, int causal, int B, int T,
                    uint64_t seed)
{
    al_attn_shape s = {sh->D, sh->H, sh->dh, SEQ, causal, 10000.0f, 1e-5f, {0}, .rope = {.base = 0}};
    memcpy(s.set, sh->set, sizeof s.set);
    al_check_layer_init(t, v, &s, B, T, seed);
}

static size_t lt_n(const lt *t) { return (size_t)t->B * t->T * t->s.d_model; }

static void lt_zero_grads(lt *t)
{
    memset(t->dx, 0, lt_n(t) * sizeof(float));
    for (int i = 0; i < t->np; i++) memset(t->dp[i], 0, al_check_numel(&t->spec[i]) * sizeof(float));
}

static int lt_guard_hits(const lt *t)
{
    return al_check_guard_hits(t->act, t->n_act, AL_CHECK_GUARD) + al_check_guard_hits(t->scratch, t->n_scr, AL_CHECK_GUARD);
}

/* ------------------------------------------------------------ gradients */

static double layer_loss(void *t) { return al_check_layer_loss(t); }

/* Central differences of the layer's loss along 32 random coordinates of
 * param against grad there. */
static double fd_err(lt *t, float *param, const float *grad, size_t n, al_rng *r)
{
    return al_check_fd_err(layer_loss, t, param, grad, n, 32, r);
}

static void check_grads_at(al_check_report *r, const al_variant *v, const cv_shape *sh,
                           int causal, const char *what)
{
    lt t;
    /* room for "gradient." and any parameter's name (al_param_spec) */
    char where[192], name[sizeof "gradient." + sizeof ((al_param_spec *)0)->name];
    lt_init(&t, v, sh, causal, 2, 6, 42);
    al_check_layer_loss(&t);
    lt_zero_grads(&t);
    al_check_layer_backward(&t, t.R);
    char mode[96];
    snprintf(mode, sizeof mode, "%s%s, guard floats written", causal ? "masked" : "unmasked", what);
    shape_text(sh, mode, where, sizeof where);
    al_check_record(r, "scratch.forward", lt_guard_hits(&t), 0, 0, where);
    al_rng g;
    al_rng_seed(&g, 1);
    snprintf(mode, sizeof mode, "%s%s", causal ? "masked" : "unmasked", what);
    shape_text(sh, mode, where, sizeof where);
    for (int i = 0; i < t.np; i++) {
        snprintf(name, sizeof name, "gradient.%s", t.spec[i].name);
        al_check_record(r, name, fd_err(&t, t.p[i], t.dp[i], al_check_numel(&t.spec[i]), &g), 1e-2, 0, where);
    }
    al_check_record(r, "gradient.x", fd_err(&t, t.x, t.dx, lt_n(&t), &g), 1e-2, 0, where);
    al_check_layer_free(&t);
}

/* Optional settings (not fixed by the caller) whose value 4 the variant
 * accepts at sh: bit i for setting i. */
static unsigned optional_variations(const al_variant *v, const al_check_settings *fx,
                                    const cv_shape *sh)
{
    unsigned mask = 0;
    for (int i = 0; i < al_variant_n_settings(v); i++) {
        if (v->settings[i].required || (fx && fx->given[i]) || sh->set[i] == 4) continue;
        cv_shape o = *sh;
        o.set[i] = 4;
        al_err e;
        if (accepts(v, &o, &e)) mask |= 1u << i;
    }
    return mask;
}

/* ------------------------------------------------------------ layer properties */

/* Inputs after position 3 of sequence 0 change: outputs up to 3 must not. */
static void check_causal(al_check_report *r, const al_variant *v, const cv_shape *sh)
{
    lt t;
    char where[192];
    lt_init(&t, v, sh, 1, 2, 6, 7);
    size_t row = (size_t)sh->D, cut = 3, n = (size_t)t.T * row;
    al_check_layer_loss(&t);
    float *before = al_check_fresh(n);
    memcpy(before, t.out, n * sizeof(float));
    for (size_t j = (cut + 1) * row; j < n; j++) t.x[j] += 1.0f;
    al_check_layer_loss(&t);
    double past = 0, future = 0;
    for (size_t j = 0; j < n; j++) {
        double d = fabs((double)before[j] - t.out[j]);
        if (j < (cut + 1) * row) past = fmax(past, d);
        else future = fmax(future, d);
    }
    shape_text(sh, "positions 0..3 vs 4..5", where, sizeof where);
    al_check_record(r, "causal", past, 1e-6, 0, where);
    al_check_record(r, "causal.future", future, 1e-3, 1, where);
    free(before);
    al_check_layer_free(&t);
}

/* Forward and backward of a fresh layer at `threads` threads into a. */
static void run_layer(lt *a, const al_variant *v, const cv_shape *sh, int threads)
{
    al_parallel_set_threads(threads);
    lt_init(a, v, sh, 1, 2, 6, 3);
    al_check_layer_loss(a);
    lt_zero_grads(a);
    al_check_layer_backward(a, a->R);
    al_parallel_set_threads(1);
}

/* Largest |difference| of out, dx and every dp between two runs. */
static double layer_diff(const lt *a, const lt *b, double *amax)
{
    double d = fmax(al_check_max_diff(a->out, b->out, lt_n(a)), al_check_max_diff(a->dx, b->dx, lt_n(a)));
    for (int k = 0; k < a->np; k++) d = fmax(d, al_check_max_diff(a->dp[k], b->dp[k], al_check_numel(&a->spec[k])));
    if (amax)
        for (size_t j = 0; j < lt_n(a); j++) *amax = fmax(*amax, fabs(a->out[j]));
    return d;
}

static void check_deterministic(al_check_report *r, const al_variant *v, const cv_shape *sh)
{
    lt a, b, c;
    char where[192];
    run_layer(&a, v, sh, 1);
    run_layer(&b, v, sh, 1);
    shape_text(sh, "forward+backward, twice", where, sizeof where);
    al_check_record(r, "determinism.runs", layer_diff(&a, &b, NULL), 0, 0, where);
    for (int th = 2; th <= 3; th++) {
        double amax = 0;
        run_layer(&c, v, sh, th);
        double d = layer_diff(&a, &c, &amax);
        snprintf(where, sizeof where, "forward+backward, 1 vs %d threads, relative", th);
        al_check_record(r, "determinism.threads", d / fmax(amax, 1e-12), 1e-5, 0, where);
        al_check_layer_free(&c);
    }
    al_check_layer_free(&a);
    al_check_layer_free(&b);
}

/* A variant that says it writes its gradients (AL_VARIANT_WRITES_GRADS)
 * gives the same bits over NaN as over zeros; one that does not must add
 * to what dx and dp held (1.0 here), to f32 rounding: each of its adds
 * rounds differently over 1 than over 0 (linear at chunk 1 adds a dozen
 * times: 1.3e-6), so the bound is 1e-4, which still tells an overwrite
 * (off by 1 / (2 + |g|)) from an add for any gradient below 1e4. */
static void check_grad_semantics(al_check_report *r, const al_variant *v, const cv_shape *sh)
{
    lt a, b;
    lt_init(&a, v, sh, 1, 2, 6, 5);
    lt_init(&b, v, sh, 1, 2, 6, 5);
    al_check_layer_loss(&a);
    al_check_layer_loss(&b);
    int writes = (v->train->flags & AL_VARIANT_WRITES_GRADS) != 0;
    float fill = writes ? NAN : 1.0f;
    lt_zero_grads(&a);
    for (int k = -1; k < b.np; k++) {
        float *g = k < 0 ? b.dx : b.dp[k];
        size_t m = k < 0 ? lt_n(&b) : al_check_numel(&b.spec[k]);
        for (size_t j = 0; j < m; j++) g[j] = fill;
    }
    al_check_layer_backward(&a, a.R);
    al_check_layer_backward(&b, b.R);
    double worst = 0;
    for (int k = -1; k < a.np; k++) {
        const float *ga = k < 0 ? a.dx : a.dp[k], *gb = k < 0 ? b.dx : b.dp[k];
        size_t m = k < 0 ? lt_n(&a) : al_check_numel(&a.spec[k]);
        for (size_t j = 0; j < m; j++) {
            double want = writes ? ga[j] : ga[j] + 1.0, d = fabs(gb[j] - want) / (1 + fabs(want));
            worst = isnan(d) ? INFINITY : fmax(worst, d);
        }
    }
    al_check_record(r, "writes_grads", worst, writes ? 1e-6 : 1e-4, 0,
           writes ? "flag set: dx, dp over NaN vs over zeros" : "no flag: dx, dp over 1 vs over 0");
    al_check_layer_free(&a);
    al_check_layer_free(&b);
}

/* ------------------------------------------------------------ probs */

enum { TP = 8 };

/* J (T, T, D, D): J[i][j][a][b] = d out_i[a] / d x_j[b], by one backward
 * per output coordinate. */
static double *jacobian(lt *t)
{
    int T = t->T, D = t->s.d_model;
    double *J = calloc((size_t)T * T * D * D, sizeof(double));
    float *dout = al_check_guarded((size_t)T * D);
    AL_ASSERT(J);
    for (int i = 0; i < T; i++)
        for (int a = 0; a < D; a++) {
            dout[i * D + a] = 1.0f;
            lt_zero_grads(t);
            al_check_layer_backward(t, dout);
            dout[i * D + a] = 0.0f;
            for (int j = 0; j < T; j++)
                for (int b = 0; b < D; b++)
                    J[(((size_t)i * T + j) * D + a) * D + b] = t->dx[j * D + b];
        }
    al_check_unguard(dout);
    return J;
}

static void check_probs(al_check_report *r, const al_variant *v, const cv_shape *sh,
                        int causal)
{
    lt t;
    char where[192];
    int H = sh->H, D = sh->D;
    float *P = al_check_guarded((size_t)H * TP * TP);
    lt_init(&t, v, sh, causal, 1, TP, 11);
    al_check_layer_loss(&t);
    v->pictures->probs(t.ctx, P, t.act, NULL, t.p, TP);
    shape_text(sh, causal ? "masked" : "unmasked", where, sizeof where);
    al_check_record(r, "probs.rows", al_check_probs_rows_err(P, H, TP, causal), 1e-5, 0, where);
    for (int j = 1; j < TP; j++) memcpy(t.x + (size_t)j * D, t.x, (size_t)D * sizeof(float));
    al_check_layer_loss(&t);
    v->pictures->probs(t.ctx, P, t.act, NULL, t.p, TP);
    double *J = jacobian(&t);
    double err = H <= 8 ? al_check_probs_fit(P, J, H, TP, D) : NAN;
    shape_text(sh, causal ? "masked, equal input rows" : "unmasked, equal input rows", where,
               sizeof where);
    al_check_record(r, "probs.forward", err, 1e-3, 0, where);
    free(J);
    al_check_unguard(P);
    al_check_layer_free(&t);
}

/* ------------------------------------------------------------ decode scratch */

/* Decodes SCRATCH_CTX tokens (past one tile) through one layer with a
 * cache of `dtype`, with a tile's worth of guard floats after
 * decode->scratch_floats: the guard floats written. */
static int decode_scratch_hits(const al_variant *v, const cv_shape *sh, int dtype)
{
    lt t;
    lt_init(&t, v, sh, 1, 1, 1, 13);
    const al_variant_decode *dv = v->decode;
    int N = SCRATCH_CTX, rows = dv->kv_rows(t.ctx, N);
    size_t elems = dv->kv_elems(t.ctx), n = dv->scratch_floats(t.ctx, N);
    size_t guard = (size_t)AL_KV_TILE * elems + AL_CHECK_GUARD;
    al_kv_cache *c = al_kv_cache_new(elems, rows, dv->storage == AL_KV_STATE ? AL_KV_F32 : dtype);
    float *scr = al_check_guarded(n + guard), *x = al_check_guarded((size_t)sh->D);
    float *out = al_check_guarded((size_t)sh->D);
    al_check_guard_fill(scr + n, guard);
    al_rng g;
    al_rng_seed(&g, 17);
    for (int pos = 0; pos < N; pos++) {
        for (int j = 0; j < sh->D; j++) x[j] = (float)al_rng_normal(&g);
        dv->decode(t.ctx, out, scr, x, t.p, c, pos);
    }
    int hits = al_check_guard_hits(scr, n, guard);
    al_kv_cache_free(c);
    al_check_unguard(scr), al_check_unguard(x), al_check_unguard(out);
    al_check_layer_free(&t);
    return hits;
}

/* ------------------------------------------------------------ decode through the model */

/* A tiny model of v at sh (optional setting opt at 4 when >= 0) with its
 * matrices scaled up so attention is sharp and logits are O(1): a decode
 * that reads the wrong rows or positions shows at 1e-4. */
static int make_model(al_model *m, const al_variant *v, const cv_shape *sh, int opt,
                      uint64_t seed, al_err *e)
{
    cv_shape o = *sh;
    al_model_config c;
    if (opt >= 0) o.set[opt] = 4;
    shape_config(&c, v, &o, 1);
    if (al_model_init(m, &c, e) != 0) return -1;
    al_model_init_weights(m, seed);
    for (int i = 0; i < m->n_tensors; i++) {
        const al_tensor *t = &m->tensors[i];
        if (t->ndim != 2) continue;
        /* an attention matrix reading more than d_model inputs (a wide
         * latent or rank) by sqrt(d_model / inputs) less, so that its outputs
         * stay as sharp as a d_model-wide one's: else a latent of 64 or 128
         * makes scores so large that bf16 rounding of the cache flips the
         * softmax, and decode.bf16 fails on rounding, not on a wrong read */
        int wide = t->shape[1] > sh->D && strstr(t->name, ".attn.");
        float f = wide ? 20.0f * sqrtf((float)sh->D / (float)t->shape[1]) : 20.0f;
        for (size_t j = 0; j < t->numel; j++) m->params[t->offset + j] *= f;
    }
    return 0;
}

static void random_tokens(int *tok, int n, uint64_t seed)
{
    al_rng r;
    al_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) tok[i] = (int)al_rng_below(&r, VOCAB);
}

typedef struct model_run {
    al_check_report *r;
    const al_variant *v;
    const cv_shape *sh;
    int opt;
    char tag[64];          /* the optional setting, "" or " d_q_latent=4" */
    int scratch_ok[AL_KV_NDTYPES];
} model_run;

static void where_of(const model_run *mr, const char *what, char *buf, size_t n)
{
    char extra[160];
    snprintf(extra, sizeof extra, "%s%s", what, mr->tag);
    shape_text(mr->sh, extra, buf, n);
}

/* Token by token from position 0 past two tiles (decode), then prompts of
 * 1, 2, 7, seq_len and past seq_len tokens (prefill), then bf16 and f16
 * past two tiles, against the full forward. */
static void check_parity(model_run *mr, al_model *m)
{
    char where[192];
    al_err e;
    int *tok = malloc(LONG * sizeof(int));
    random_tokens(tok, LONG, 8);
    float *full = al_check_full_logits(m, tok, LONG, &e);
    AL_ASSERT(full);
    double amax = 0;
    char first[64];
    snprintf(first, sizeof first, "%d tokens, f32, no prefill", LONG);
    where_of(mr, first, where, sizeof where);
    double d0 = al_check_decode_vs_full(m, tok, full, 0, LONG, AL_KV_F32, &amax);
    al_check_record(mr->r, "decode", d0, 1e-4, 0, where);
    static const int prompts[] = {1, 2, 7, SEQ, CTX - 1};
    for (int i = 0; i < 5; i++) {
        char what[64];
        snprintf(what, sizeof what, "prompt %d of %d, f32", prompts[i], CTX);
        where_of(mr, what, where, sizeof where);
        double dp = al_check_decode_vs_full(m, tok, full, prompts[i], CTX, AL_KV_F32, NULL);
        al_check_record(mr->r, "prefill", dp, 1e-4, 0, where);
    }
    static const double tol[AL_KV_NDTYPES] = {1e-4, 0.02, 0.005};
    for (int dt = AL_KV_BF16; dt <= AL_KV_F16; dt++) {
        char name[32], what[64];
        snprintf(name, sizeof name, "decode.%s", al_kv_dtype_name(dt));
        snprintf(what, sizeof what, "%d tokens, prompt 2, relative to the largest logit", LONG);
        where_of(mr, mr->scratch_ok[dt] ? what : "not run: its decode scratch overruns", where,
                 sizeof where);
        double a = 0, d = INFINITY;
        if (mr->scratch_ok[dt]) d = al_check_decode_vs_full(m, tok, full, 2, LONG, dt, &a);
        al_check_record(mr->r, name, d / fmax(a, 1e-12), tol[dt], 0, where);
    }
    free(tok), free(full);
}

/* Logits (n - P, VOCAB) of decoding tok[P..n) after a prefill of P at
 * `threads` threads, or NULL. */
static float *decode_run(al_model *m, const int *tok, int P, int n, int threads)
{
    al_decoder d;
    al_err e;
    float *out = NULL;
    al_parallel_set_threads(threads);
    if (al_decoder_init(&d, m, n, AL_KV_F32, &e) == 0) {
        if (al_decoder_prefill(&d, tok, P, &e) == 0) {
            out = al_check_fresh((size_t)(n - P) * VOCAB);
            for (int t = P; t < n; t++)
                memcpy(out + (size_t)(t - P) * VOCAB, al_decoder_step(&d, tok[t]),
                       VOCAB * sizeof(float));
        }
        al_decoder_free(&d);
    }
    al_parallel_set_threads(1);
    return out;
}

/* 2 and 3 threads against 1 past two tiles (the context is cut between
 * threads), and 2 threads twice bit for bit. */
static void check_threads(model_run *mr, al_model *m)
{
    enum { N = 2 * AL_KV_TILE + AL_KV_TILE / 2 };
    char where[192];
    int *tok = malloc(N * sizeof(int));
    random_tokens(tok, N, 12);
    float *one = decode_run(m, tok, SEQ, N, 1), *two = decode_run(m, tok, SEQ, N, 2);
    float *three = decode_run(m, tok, SEQ, N, 3), *again = decode_run(m, tok, SEQ, N, 2);
    int n = (N - SEQ) * VOCAB;
    double amax = 0, d = INFINITY, rep = INFINITY;
    if (one && two && three && again) {
        d = fmax(al_check_diff_amax(two, one, n, &amax), al_check_diff_amax(three, one, n, NULL)) / fmax(amax, 1e-12);
        rep = al_check_max_diff(two, again, (size_t)n);
    }
    where_of(mr, "decode 520 tokens, 1 vs 2 and 3 threads, relative", where, sizeof where);
    al_check_record(mr->r, "determinism.threads", d, 1e-5, 0, where);
    where_of(mr, "decode 520 tokens at 2 threads, twice", where, sizeof where);
    al_check_record(mr->r, "determinism.runs", rep, 0, 0, where);
    free(one), free(two), free(three), free(again), free(tok);
}

/* B sequences with prompts of different lengths stepped together against
 * B decoders stepped alone, at 1 and 2 threads; relative to the largest
 * logit. */
static double batch_diff(al_model *m, int threads)
{
    enum { B = 5, STEPS = 6, N = SEQ + 2 + STEPS };
    int tok[B][N], plen[B] = {1, 3, SEQ, 2, SEQ + 2}, in[B];
    for (int b = 0; b < B; b++) random_tokens(tok[b], N, 50 + b);
    al_parallel_set_threads(threads);
    al_decoder bd, sd[B];
    al_err e;
    double amax = 0, worst = INFINITY;
    if (al_decoder_init_batch(&bd, m, B, N, AL_KV_F32, &e) != 0) goto out;
    worst = 0;
    for (int b = 0; b < B; b++) {
        AL_ASSERT(al_decoder_init(&sd[b], m, N, AL_KV_F32, &e) == 0);
        AL_ASSERT(al_decoder_prefill_seq(&bd, b, tok[b], plen[b], &e) == 0);
        AL_ASSERT(al_decoder_prefill(&sd[b], tok[b], plen[b], &e) == 0);
    }
    for (int s = 0; s < STEPS; s++) {
        for (int b = 0; b < B; b++) in[b] = tok[b][plen[b] + s];
        const float *lb = al_decoder_step_batch(&bd, in);
        for (int b = 0; b < B; b++)
            worst = fmax(worst, al_check_diff_amax(lb + b * VOCAB, al_decoder_step(&sd[b], in[b]), VOCAB,
                                          &amax));
    }
    for (int b = 0; b < B; b++) al_decoder_free(&sd[b]);
    al_decoder_free(&bd);
out:
    al_parallel_set_threads(1);
    return worst / fmax(amax, 1e-12);
}

static void check_batch(model_run *mr, al_model *m)
{
    char where[192];
    for (int th = 1; th <= 2; th++) {
        char what[64];
        snprintf(what, sizeof what, "5 sequences, %d thread%s, relative", th, th > 1 ? "s" : "");
        where_of(mr, what, where, sizeof where);
        al_check_record(mr->r, "decode.batch", batch_diff(m, th), 1e-5, 0, where);
    }
}

/* Cache bytes measured by the allocator against kv_elems x rows x layers
 * x dtype size (a state: one f32 row at any context). */
static void check_bytes(model_run *mr, al_model *m)
{
    enum { C = 37 };
    const al_variant_decode *dv = mr->v->decode;
    const void *ctx = m->layers[0].ctx;
    size_t rows = (size_t)dv->kv_rows(ctx, C);
    double worst = 0;
    for (int dt = 0; dt < AL_KV_NDTYPES; dt++) {
        int stored = dv->storage == AL_KV_STATE ? AL_KV_F32 : dt;
        size_t want = dv->kv_elems(ctx) * rows * LAYERS * al_kv_dtype_size(stored);
        size_t live0 = al_kv_bytes_live();
        al_decoder d;
        al_err e;
        if (al_decoder_init(&d, m, C, dt, &e) != 0) {
            worst = INFINITY;
            continue;
        }
        worst = fmax(worst, fabs((double)(al_kv_bytes_live() - live0) - (double)want));
        worst = fmax(worst, fabs((double)al_decoder_cache_bytes(&d) - (double)want));
        al_decoder_free(&d);
    }
    char where[192];
    where_of(mr, "context 37, f32 bf16 f16, bytes", where, sizeof where);
    al_check_record(mr->r, "cache.bytes", worst, 0, 0, where);
}

/* A variant's cost members (docs/costs.md) against the FLOPs the product
 * layer counts when the model trains, prefills and decodes: exactly,
 * within seq_len and past two cache tiles (run only when the variant has
 * all three members: without them the core counts, nothing to check). */
static void check_costs(model_run *mr, al_model *m)
{
    static const int contexts[] = {SEQ - 3, LONG};
    double worst = 0;
    for (int i = 0; i < 2; i++) {
        al_cost_opts o = {contexts[i], 1, AL_KV_F32};
        al_model_cost f;
        al_cost_counted c;
        al_err e;
        if (al_cost_of_model(&m->cfg, &o, &f, &e) || al_cost_measure(m, &o, &c, &e)) {
            worst = INFINITY;
            continue;
        }
        worst = fmax(worst, fabs(c.train_flops_per_token - f.train_flops_per_token));
        worst = fmax(worst, fabs(c.prefill_flops_per_token - f.prefill_flops_per_token) * o.context);
        worst = fmax(worst, fabs(c.decode_flops_per_token - f.decode_flops_per_token));
    }
    char where[192];
    where_of(mr, "FLOPs counted - costs members, contexts 5 and 515", where, sizeof where);
    al_check_record(mr->r, "costs.flops", worst, 0.5, 0, where);
}

/* ------------------------------------------------------------ the checks, one at a time */

/* One check's inputs: all a child process needs (its copy of them). */
typedef struct cv_job {
    const al_variant *v;
    cv_shape sh;
    int causal, opt, dt;
    char what[64];                   /* ", window=4" (opt's, or a variation's) or "" */
    int scratch_ok[AL_KV_NDTYPES];   /* decode scratch of that dtype stayed in bounds */
} cv_job;

static void g_grads(al_check_report *r, const void *p)
{
    const cv_job *j = p;
    check_grads_at(r, j->v, &j->sh, j->causal, j->what);
}

static void g_causal(al_check_report *r, const void *p)
{
    const cv_job *j = p;
    check_causal(r, j->v, &j->sh);
}

static void g_determinism(al_check_report *r, const void *p)
{
    const cv_job *j = p;
    check_deterministic(r, j->v, &j->sh);
}

static void g_writes(al_check_report *r, const void *p)
{
    const cv_job *j = p;
    check_grad_semantics(r, j->v, &j->sh);
}

static void g_probs(al_check_report *r, const void *p)
{
    const cv_job *j = p;
    check_probs(r, j->v, &j->sh, j->causal);
}

static void run_of(model_run *mr, al_check_report *r, const cv_job *j)
{
    memset(mr, 0, sizeof *mr);
    mr->r = r, mr->v = j->v, mr->sh = &j->sh, mr->opt = j->opt;
    snprintf(mr->tag, sizeof mr->tag, "%s", j->what);
    memcpy(mr->scratch_ok, j->scratch_ok, sizeof mr->scratch_ok);
}

static void g_scratch(al_check_report *r, const void *p)
{
    const cv_job *j = p;
    model_run mr;
    char name[40], where[192];
    cv_shape o = j->sh;
    if (j->opt >= 0) o.set[j->opt] = 4;
    run_of(&mr, r, j);
    int hits = decode_scratch_hits(j->v, &o, j->dt);
    snprintf(name, sizeof name, "scratch.decode.%s", al_kv_dtype_name(j->dt));
    where_of(&mr, "guard floats written, context 264", where, sizeof where);
    al_check_record(r, name, hits, 0, 0, where);
}

/* A model check on the tiny model of the job (make_model's, the same
 * weights for every check). */
static void with_model(al_check_report *r, const cv_job *j, void (*fn)(model_run *, al_model *))
{
    model_run mr;
    al_model m;
    al_err e;
    run_of(&mr, r, j);
    AL_ASSERT(make_model(&m, j->v, &j->sh, j->opt, 17, &e) == 0);
    fn(&mr, &m);
    al_model_free(&m);
}

static void g_parity(al_check_report *r, const void *p) { with_model(r, p, check_parity); }
static void g_threads(al_check_report *r, const void *p) { with_model(r, p, check_threads); }
static void g_batch(al_check_report *r, const void *p) { with_model(r, p, check_batch); }
static void g_bytes(al_check_report *r, const void *p) { with_model(r, p, check_bytes); }
static void g_costs(al_check_report *r, const void *p) { with_model(r, p, check_costs); }

/* ------------------------------------------------------------ the suite */

typedef struct cv_suite {
    al_check_report *r;
    al_check_report last;    /* the lines of the last check run */
    const al_check_run *how;
} cv_suite;

/* Check `name` of job j; `desc` (with the job's tag) says where, should
 * its process not finish. 0 when it finished. */
static int run(cv_suite *s, const char *name, al_check_group_fn fn, const cv_job *j,
               const char *desc)
{
    char extra[128], where[192];
    snprintf(extra, sizeof extra, "%s%s", desc, j->what);
    shape_text(&j->sh, extra, where, sizeof where);
    return al_check_group(s->r, s->how, name, where, fn, j, &s->last);
}

static int has_probs(const al_variant *v, const cv_shape *sh)
{
    return v->pictures && !v->pictures->weights && sh->H <= 8;
}

static void layer_checks(cv_suite *s, const al_variant *v, const cv_shape *sh)
{
    cv_job j = {.v = v, .sh = *sh, .causal = 1, .opt = -1};
    run(s, "gradient", g_grads, &j, "masked");
    j.causal = 0;
    run(s, "gradient", g_grads, &j, "unmasked");
    j.causal = 1;
    run(s, "causal", g_causal, &j, "positions 0..3 vs 4..5");
    run(s, "determinism.runs", g_determinism, &j, "forward+backward");
    run(s, "writes_grads", g_writes, &j, "backward over filled gradients");
    if (!has_probs(v, sh)) return;
    run(s, "probs", g_probs, &j, "masked");
    j.causal = 0;
    run(s, "probs", g_probs, &j, "unmasked");
}

/* The masked gradients and probabilities with optional setting k at 4. */
static void variation_checks(cv_suite *s, const al_variant *v, const cv_shape *sh, int k)
{
    cv_job j = {.v = v, .sh = *sh, .causal = 1, .opt = -1};
    j.sh.set[k] = 4;
    snprintf(j.what, sizeof j.what, ", %s=4", v->settings[k].name);
    run(s, "gradient", g_grads, &j, "masked");
    if (has_probs(v, &j.sh)) run(s, "probs", g_probs, &j, "masked");
}

static void model_checks(cv_suite *s, const al_variant *v, const cv_shape *sh, int opt)
{
    cv_job j = {.v = v, .sh = *sh, .causal = 1, .opt = opt, .scratch_ok = {1, 1, 1}};
    if (opt >= 0) snprintf(j.what, sizeof j.what, ", %s=4", v->settings[opt].name);
    for (j.dt = 0; j.dt < AL_KV_NDTYPES; j.dt++) {
        char name[40];
        snprintf(name, sizeof name, "scratch.decode.%s", al_kv_dtype_name(j.dt));
        int done = run(s, name, g_scratch, &j, "decode, context 264") == 0;
        const al_check_line *l = al_check_find(&s->last, name);
        j.scratch_ok[j.dt] = done && l && l->err == 0;
    }
    run(s, "decode", g_parity, &j, "decode and prefill against the forward");
    run(s, "determinism.threads", g_threads, &j, "decode at 1, 2 and 3 threads");
    run(s, "decode.batch", g_batch, &j, "batched decode");
    run(s, "cache.bytes", g_bytes, &j, "cache bytes");
    const al_variant_costs *k = v->costs;
    if (k && k->train_flops_per_token && k->prefill_flops_per_token && k->decode_flops_per_token)
        run(s, "costs.flops", g_costs, &j, "FLOPs counted");
}

/* ------------------------------------------------------------ choosing shapes */

/* The shapes, the optional variations and the refusal: what choosing
 * (the variant's init, check and params at each candidate) gives. */
typedef struct cv_pick {
    const al_variant *v;
    const al_check_settings *fixed;
    int n;
    cv_shape sh[MAX_SHAPES];
    unsigned opts;
    al_err e;
} cv_pick;

static void pick(cv_pick *p)
{
    p->n = pick_shapes(p->v, p->fixed, p->sh, &p->e);
    p->opts = p->n ? optional_variations(p->v, p->fixed, &p->sh[0]) : 0;
}

/* In a child, the result comes back in pieces of one record's size. */
enum { PICK_PIECE = 1024 };
typedef struct pick_piece {
    size_t at;
    char bytes[PICK_PIECE];
} pick_piece;

static void pick_in_child(void *arg, int fd)
{
    cv_pick *p = arg;
    pick(p);
    pick_piece k;
    for (k.at = 0; k.at < sizeof *p; k.at += PICK_PIECE) {
        size_t n = sizeof *p - k.at < PICK_PIECE ? sizeof *p - k.at : PICK_PIECE;
        memcpy(k.bytes, (const char *)p + k.at, n);
        al_isolate_send(fd, &k, sizeof k);
    }
}

static void pick_sink(void *arg, const void *rec)
{
    cv_pick *p = arg;
    pick_piece k;   /* copied out: a record follows a tag byte, unaligned */
    memcpy(&k, rec, sizeof k);
    if (k.at < sizeof *p)
        memcpy((char *)p + k.at, k.bytes,
               sizeof *p - k.at < PICK_PIECE ? sizeof *p - k.at : PICK_PIECE);
}

/* Choosing runs the variant's own code too: isolated, a crash there is a
 * FAIL line "init" and a report without shapes. 0 when chosen. */
static int pick_run(cv_pick *p, const al_check_run *how, al_check_report *r)
{
    if (!how || !how->isolate) {
        pick(p);
        return 0;
    }
    cv_pick back = *p;
    al_isolate_end end;
    if (al_isolate_run(pick_in_child, p, sizeof(pick_piece), pick_sink, &back, how->time_limit,
                       &end) == 0) {
        back.v = p->v, back.fixed = p->fixed;   /* the caller's pointers, not the child's */
        *p = back;
        return 0;
    }
    char said[96];
    al_isolate_describe(&end, said, sizeof said);
    snprintf(r->shapes, sizeof r->shapes, "no shape (init did not return)");
    al_check_record(r, "init", INFINITY, 0, 0, "choosing shapes: init, check, params");
    snprintf(r->lines[r->n - 1].where, sizeof r->lines[r->n - 1].where,
             "choosing shapes (init, check, params): %.80s", said);
    r->n_fail = 1;
    return -1;
}

int al_check_variant_run(const al_variant *v, const al_check_settings *fixed,
                         const al_check_run *how, al_check_report *r, al_err *e)
{
    cv_suite s = {r, {0}, how};
    cv_pick p = {.v = v, .fixed = fixed};
    memset(r, 0, sizeof *r);
    if (pick_run(&p, how, r) != 0) return 0;   /* r: the one FAIL line */
    cv_shape *sh = p.sh;
    int n = p.n;
    if (!n) {
        *e = p.e;
        return -1;
    }
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(r->shapes + len, sizeof r->shapes - len, "%sD%d H%dx%d",
                                i ? ", " : "", sh[i].D, sh[i].H, sh[i].dh);
    r->n_shapes = n;
    for (int i = 0; i < n; i++) layer_checks(&s, v, &sh[i]);
    unsigned opts = p.opts;
    for (int k = 0; k < AL_MAX_SETTINGS; k++)
        if (opts & (1u << k)) variation_checks(&s, v, &sh[0], k);
    if (al_variant_decodes(v)) {   /* the registry refused a decode trio not whole */
        model_checks(&s, v, &sh[0], -1);
        for (int k = 0; k < AL_MAX_SETTINGS; k++)
            if (opts & (1u << k)) model_checks(&s, v, &sh[0], k);
    }
    for (int i = 0; i < r->n; i++) r->n_fail += !r->lines[i].pass;
    al_check_report_free(&s.last);
    return 0;
}

int al_check_variant(const al_variant *v, const al_check_settings *fixed, al_check_report *r,
                     al_err *e)
{
    return al_check_variant_run(v, fixed, NULL, r, e);
}
