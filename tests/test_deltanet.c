/*
 * test_deltanet.c - Gated DeltaNet (variants/deltanet.c, deltanet_chunk.c).
 *
 * The chunkwise (WY) delta rule, forward and backward, against the
 * token-by-token recurrence and its back-propagation through time written
 * out here in double; the whole layer's gradients against finite
 * differences for every tensor (conv, gate, norm, decay bias, beta); decode
 * from the state against the full forward past one chunk and past the
 * trained length, from position 0 and after a prefill; batched decode
 * against single decodes; the state's bytes against the formula at every
 * context; check-variant. (test_torch.c holds a deltanet checkpoint against
 * scripts/attnlab_torch.py.)
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_decode.h"
#include "al_kvcache.h"
#include "al_registry.h"
#include "al_test.h"
#include "al_test_model.h"
#include "../variants/deltanet_internal.h"

enum { SET_D_KEY, SET_CONV, SET_CHUNK };

static const al_variant *deltanet(void)
{
    const al_variant *v = al_variant_find("deltanet");
    ck_assert_ptr_nonnull(v);
    return v;
}

/* ------------------------------------------------------------ the oracle */

/* One head, T tokens, in double: S_t = a_t S_{t-1} (I - b_t k_t k_t^T) +
 * b_t v_t k_t^T, o_t = S_t q_t; then, for the loss sum_t o_t . R_t, the
 * gradients of q, k, v, beta and g = log a by back-propagation through the
 * states (all T + 1 of them kept). */
typedef struct oracle {
    int T, dk, dv;
    const float *q, *k, *v, *b, *g, *R;
    double *o, *S, *dq, *dk_, *dv_, *db, *dg;   /* S: (T + 1, dv, dk) */
} oracle;

static void oracle_forward(oracle *r)
{
    int dk = r->dk, dv = r->dv;
    size_t SS = (size_t)dv * dk;
    memset(r->S, 0, SS * sizeof(double));
    for (int t = 0; t < r->T; t++) {
        const double *P = r->S + t * SS;
        double *S = r->S + (t + 1) * SS, a = exp(r->g[t]), b = r->b[t];
        const float *k = r->k + t * dk, *v = r->v + t * dv, *q = r->q + t * dk;
        for (int i = 0; i < dv; i++) {
            double sk = 0, o = 0;
            for (int j = 0; j < dk; j++) sk += P[i * dk + j] * k[j];
            for (int j = 0; j < dk; j++)
                S[i * dk + j] = a * P[i * dk + j] - a * b * sk * k[j] + b * v[i] * k[j];
            for (int j = 0; j < dk; j++) o += S[i * dk + j] * q[j];
            r->o[t * dv + i] = o;
        }
    }
}

static void oracle_backward(oracle *r)
{
    int dk = r->dk, dv = r->dv;
    size_t SS = (size_t)dv * dk;
    double *dS = calloc(SS, sizeof(double)), *sk = calloc(dv, sizeof(double));
    double *dSk = calloc(dv, sizeof(double));
    for (int t = r->T - 1; t >= 0; t--) {
        const double *S = r->S + (t + 1) * SS, *P = r->S + t * SS;
        const float *k = r->k + t * dk, *v = r->v + t * dv, *q = r->q + t * dk;
        const float *R = r->R + t * dv;
        double a = exp(r->g[t]), b = r->b[t], da = 0, db = 0;
        for (int i = 0; i < dv; i++)
            for (int j = 0; j < dk; j++) dS[i * dk + j] += R[i] * q[j];   /* o = S q */
        for (int j = 0; j < dk; j++) {
            double s = 0;
            for (int i = 0; i < dv; i++) s += S[i * dk + j] * R[i];
            r->dq[t * dk + j] = s;
        }
        for (int i = 0; i < dv; i++) {
            sk[i] = dSk[i] = 0;
            for (int j = 0; j < dk; j++) sk[i] += P[i * dk + j] * k[j], dSk[i] += dS[i * dk + j] * k[j];
            for (int j = 0; j < dk; j++) da += dS[i * dk + j] * P[i * dk + j];
            da -= b * sk[i] * dSk[i];
            db += (v[i] - a * sk[i]) * dSk[i];
            r->dv_[t * dv + i] = b * dSk[i];
        }
        for (int j = 0; j < dk; j++) {   /* -ab (P^T dS k + dS^T P k) + b dS^T v */
            double s = 0;
            for (int i = 0; i < dv; i++)
                s += -a * b * (P[i * dk + j] * dSk[i] + dS[i * dk + j] * sk[i]) +
                     b * dS[i * dk + j] * v[i];
            r->dk_[t * dk + j] = s;
        }
        r->db[t] = db;
        r->dg[t] = da * a;
        for (int i = 0; i < dv; i++)
            for (int j = 0; j < dk; j++) dS[i * dk + j] = a * dS[i * dk + j] - a * b * dSk[i] * k[j];
    }
    free(dS), free(sk), free(dSk);
}

/* ||a - b|| / ||b|| over n entries of a float and a double array. */
static double rel(const float *a, const double *b, int n)
{
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) num += (a[i] - b[i]) * (a[i] - b[i]), den += b[i] * b[i];
    return sqrt(num / fmax(den, 1e-300));
}

/* The chunkwise kernel on random inputs of one head against the oracle:
 * outputs, the final state and every gradient. decay_lo: the strongest
 * log decay drawn (a down to exp(decay_lo)). */
static double chunk_vs_recurrence(int T, int C, int dk, int dv, double decay_lo, double *worst_o)
{
    al_rng rng;
    al_rng_seed(&rng, (uint64_t)(T * 131 + C * 7 + dk));
    size_t Tk = (size_t)T * dk, Tv = (size_t)T * dv;
    float *q = malloc(Tk * 4), *k = malloc(Tk * 4), *v = malloc(Tv * 4), *b = malloc(T * 4);
    float *g = malloc(T * 4), *R = malloc(Tv * 4);
    for (int t = 0; t < T; t++) {
        double nq = 0, nk = 0;
        for (int j = 0; j < dk; j++) {
            q[t * dk + j] = (float)al_rng_normal(&rng), k[t * dk + j] = (float)al_rng_normal(&rng);
            nq += q[t * dk + j] * q[t * dk + j], nk += k[t * dk + j] * k[t * dk + j];
        }
        for (int j = 0; j < dk; j++) q[t * dk + j] /= (float)sqrt(nq), k[t * dk + j] /= (float)sqrt(nk);
        for (int j = 0; j < dv; j++) v[t * dv + j] = (float)al_rng_normal(&rng);
        for (int j = 0; j < dv; j++) R[t * dv + j] = (float)al_rng_normal(&rng);
        b[t] = (float)(0.05 + 0.9 * al_rng_uniform(&rng));
        g[t] = (float)(decay_lo * al_rng_uniform(&rng));
    }
    oracle r = {T, dk, dv, q, k, v, b, g, R, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    double *buf = calloc((size_t)(T + 1) * dv * dk + 2 * Tv + 2 * Tk + Tv + 2 * T, sizeof(double));
    r.S = buf, r.o = r.S + (size_t)(T + 1) * dv * dk, r.dq = r.o + Tv, r.dk_ = r.dq + Tk;
    r.dv_ = r.dk_ + Tk, r.db = r.dv_ + Tv, r.dg = r.db + T;
    oracle_forward(&r);
    oracle_backward(&r);

    al_dn_seq s = {q, k, v, b, g, dk, dv, 1, T, C, dk, dv};
    int nC = al_dn_chunks(T, C);
    float *o = malloc(Tv * 4), *S = malloc((size_t)(nC + 1) * dv * dk * 4);
    float *work = malloc(al_dn_work_floats(C, dk, dv) * 4);
    float *dq = malloc(Tk * 4), *dk_ = malloc(Tk * 4), *dv_ = malloc(Tv * 4);
    float *db = malloc(T * 4), *dg = malloc(T * 4);
    al_dn_chunk_forward(&s, o, S, work);
    al_dn_chunk_backward(&s, dq, dk_, dv_, db, dg, R, S, work);
    *worst_o = fmax(rel(o, r.o, (int)Tv), rel(S + (size_t)nC * dv * dk,
                                               r.S + (size_t)T * dv * dk, dv * dk));
    double e = fmax(fmax(rel(dq, r.dq, (int)Tk), rel(dk_, r.dk_, (int)Tk)),
                    fmax(rel(dv_, r.dv_, (int)Tv), fmax(rel(db, r.db, T), rel(dg, r.dg, T))));
    if (C >= T) {   /* one chunk: the equivalent matrix M, o = M V */
        float *M = malloc((size_t)T * T * 4);
        double *mv = calloc(Tv, sizeof(double));
        al_dn_weights(&s, M, work);
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                if (j > i) ck_assert_msg(M[i * T + j] == 0.0f, "M[%d][%d] above the diagonal", i, j);
                for (int c = 0; c < dv; c++) mv[i * dv + c] += (double)M[i * T + j] * v[j * dv + c];
            }
        float *mvf = malloc(Tv * 4);
        for (size_t i = 0; i < Tv; i++) mvf[i] = (float)mv[i];
        *worst_o = fmax(*worst_o, rel(mvf, r.o, (int)Tv));
        free(M), free(mv), free(mvf);
    }
    if (e > 1e-5)
        fprintf(stderr, "T %d C %d: dq %g dk %g dv %g db %g dg %g\n", T, C, rel(dq, r.dq, (int)Tk),
                rel(dk_, r.dk_, (int)Tk), rel(dv_, r.dv_, (int)Tv), rel(db, r.db, T),
                rel(dg, r.dg, T));
    free(q), free(k), free(v), free(b), free(g), free(R), free(buf);
    free(o), free(S), free(work), free(dq), free(dk_), free(dv_), free(db), free(dg);
    return e;
}

/* Chunks of 1 (the recurrence itself), of 4 and 16 with a partial last
 * chunk, one chunk longer than the sequence (where the equivalent attention
 * matrix M of `attnlab attention` must give o = M V too); mild and strong
 * decays. */
/* Under ASan (scripts/test --sanitize, AL_SANITIZED=1) each test runs its
 * first setting only: the sanitizer is there for memory errors, which the
 * first setting's paths (d_key != d_head, conv, partial chunks) exercise,
 * and the full sweep of settings takes it past the timeout. */
static int n_sets(int all)
{
    const char *v = getenv("AL_SANITIZED");
    return v && strcmp(v, "1") == 0 ? 1 : all;
}

START_TEST(chunkwise_forward_and_backward_equal_the_recurrence)
{
    static const int chunks[] = {1, 4, 16, 64};
    for (int c = 0; c < 4; c++)
        for (int strong = 0; strong <= 1; strong++) {
            double eo, eg = chunk_vs_recurrence(37, chunks[c], 5, 3, strong ? -6.0 : -0.3, &eo);
            ck_assert_msg(eo < 1e-5, "chunk %d: outputs and state vs recurrence %g", chunks[c], eo);
            ck_assert_msg(eg < 1e-5, "chunk %d: gradients vs recurrence %g", chunks[c], eg);
        }
    double eo, eg = chunk_vs_recurrence(70, 32, 8, 8, -1.0, &eo);   /* square heads */
    ck_assert_msg(eo < 1e-5 && eg < 1e-5, "dk = dv = 8: outputs %g, gradients %g", eo, eg);
}
END_TEST


/* ------------------------------------------------------------ the layer */

static double layer_loss(void *t) { return al_check_layer_loss(t); }

/* The whole layer (projections, convolution, silu, L2 norms, beta, decay
 * and its bias, the rule over 3 chunks, the per-head norm and its gate, wo)
 * against central differences on every tensor and on x. The step is 2e-3,
 * not check-variant's 1e-2: at t = 0 a head's output is (k.q) b v, and the
 * per-head norm turns it into nearly sign(k.q) v / rms(v), so a coordinate
 * that moves k.q across 0 within a step of 1e-2 is not in its linear range
 * (the error falls as h^2 to 2e-4 at 3e-3, the signature of truncation). */
START_TEST(layer_gradients_match_finite_differences_for_every_tensor)
{
    static const double sets[][3] = {{6, 4, 4}, {0, 0, 4}, {0, 3, 64}};
    for (int c = 0; c < n_sets(3); c++) {
        al_attn_shape s = {16, 2, 8, 16, 1, 10000.0f, 1e-5f, {sets[c][0], sets[c][1], sets[c][2]}, .rope = {.base = 0}};
        al_check_layer t;
        al_check_layer_init(&t, deltanet(), &s, 2, 11, 5 + c);
        al_check_layer_loss(&t);
        al_check_layer_backward(&t, t.R);   /* AL_VARIANT_WRITES_GRADS: written */
        al_rng g;
        al_rng_seed(&g, 9);
        for (int i = 0; i <= t.np; i++) {
            float *x = i < t.np ? t.p[i] : t.x, *dx = i < t.np ? t.dp[i] : t.dx;
            size_t n = i < t.np ? (size_t)t.spec[i].rows * (t.spec[i].cols ? t.spec[i].cols : 1)
                                : (size_t)2 * 11 * 16;
            double an[48], fd[48];
            for (int k = 0; k < 48; k++) {
                size_t j = al_rng_below(&g, n);
                float save = x[j], h = 2e-3f;
                x[j] = save + h;
                double lp = layer_loss(&t);
                x[j] = save - h;
                double lm = layer_loss(&t);
                x[j] = save;
                fd[k] = (lp - lm) / (2.0 * h), an[k] = dx[j];
            }
            double e = al_check_rel_err(an, fd, 48);
            ck_assert_msg(e < 1e-2, "d_key %g conv %g chunk %g: %s: %g", sets[c][0], sets[c][1],
                          sets[c][2], i < t.np ? t.spec[i].name : "x", e);
        }
        ck_assert_int_eq(t.np, sets[c][1] ? 12 : 9);   /* the conv tensors were among them */
        al_check_layer_free(&t);
    }
}
END_TEST

/* ------------------------------------------------------------ decode */

static void model_of(al_model *m, al_model_config *c, double dkey, double conv, double chunk,
                     int seq_len)
{
    ck_assert_int_eq(al_test_tiny_config(c, deltanet(), 2, 16, 2, 8, seq_len, 13), 0);
    c->attn_set[SET_D_KEY] = dkey, c->attn_set[SET_CONV] = conv, c->attn_set[SET_CHUNK] = chunk;
    al_err e;
    ck_assert_msg(al_model_init(m, c, &e) == 0, "%s", e.msg);
    al_model_init_weights(m, 21);
    al_rng r;   /* off the initial values, so that conv and the bias matter */
    al_rng_seed(&r, 4);
    for (size_t i = 0; i < m->n_params; i++) m->params[i] += (float)(0.05 * al_rng_normal(&r));
}

/* A model trained at seq_len 12 with chunks of 4: decoding 40 tokens from
 * the state, from position 0 and after prompts of 1, 5 and 13 tokens (a
 * prefill inside a chunk, across chunks, past the trained length), gives
 * the full forward's logits at every position (f32, 1e-4). */
START_TEST(decode_equals_the_forward_past_one_chunk_and_past_the_trained_length)
{
    static const double sets[][3] = {{0, 4, 4}, {6, 0, 4}, {0, 2, 64}};
    for (int c = 0; c < n_sets(3); c++) {
        al_model m;
        al_model_config cfg;
        model_of(&m, &cfg, sets[c][0], sets[c][1], sets[c][2], 12);
        int tok[40];
        for (int i = 0; i < 40; i++) tok[i] = (i * 5 + i * i) % 13;
        al_err e;
        float *full = al_check_full_logits(&m, tok, 40, &e);
        ck_assert_msg(full != NULL, "%s", e.msg);
        static const int prompts[] = {0, 1, 5, 13};
        for (int k = 0; k < 4; k++) {
            double amax = 0, d = al_check_decode_vs_full(&m, tok, full, prompts[k], 40, AL_KV_F32,
                                                         &amax);
            ck_assert_msg(d < 1e-4, "setting %d prompt %d: decode vs forward %g", c, prompts[k], d);
            ck_assert_msg(amax > 0.1, "logits too small to tell (%g)", amax);
        }
        free(full);
        al_model_free(&m);
    }
}
END_TEST

/* Five sequences of different lengths decoded in one batch give each
 * single decoder's logits. */
START_TEST(batched_decode_equals_single_decodes)
{
    al_model m;
    al_model_config cfg;
    model_of(&m, &cfg, 0, 4, 4, 12);
    enum { B = 5, N = 30 };
    int tok[B][N], plen[B] = {1, 3, 7, 2, 13}, in[B];
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++) tok[b][i] = (i * (b + 3) + b) % 13;
    al_decoder bd, sd[B];
    al_err e;
    ck_assert_msg(al_decoder_init_batch(&bd, &m, B, N, AL_KV_F32, &e) == 0, "%s", e.msg);
    for (int b = 0; b < B; b++) {
        ck_assert_int_eq(al_decoder_init(&sd[b], &m, N, AL_KV_F32, &e), 0);
        ck_assert_int_eq(al_decoder_prefill_seq(&bd, b, tok[b], plen[b], &e), 0);
        ck_assert_int_eq(al_decoder_prefill(&sd[b], tok[b], plen[b], &e), 0);
    }
    double worst = 0;
    for (int s = 0; s < 12; s++) {
        for (int b = 0; b < B; b++) in[b] = tok[b][plen[b] + s];
        const float *lb = al_decoder_step_batch(&bd, in);
        for (int b = 0; b < B; b++) {
            const float *ls = al_decoder_step(&sd[b], in[b]);
            for (int v = 0; v < 13; v++) worst = fmax(worst, fabs(lb[b * 13 + v] - ls[v]));
        }
    }
    ck_assert_msg(worst < 1e-5, "batched vs single: %g", worst);
    for (int b = 0; b < B; b++) al_decoder_free(&sd[b]);
    al_decoder_free(&bd);
    al_model_free(&m);
}
END_TEST

/* The state a layer holds: n_head x d_key x d_head floats, plus conv - 1
 * rows of the q, k, v projections (2 n_head d_key + n_head d_head), f32,
 * the same at every context from 1 to 65,536, none per token. */
START_TEST(state_bytes_are_the_formula_at_every_context)
{
    static const double sets[][3] = {{0, 4, 64}, {6, 0, 64}, {6, 3, 8}};
    for (int c = 0; c < 3; c++) {
        al_model m;
        al_model_config cfg;
        model_of(&m, &cfg, sets[c][0], sets[c][1], sets[c][2], 12);
        int H = 2, dh = 8, dk = sets[c][0] ? (int)sets[c][0] : dh, W = (int)sets[c][1];
        size_t want = 2 * 4 * ((size_t)H * dk * dh + (W ? (size_t)(W - 1) * (2 * H * dk + H * dh) : 0));
        ck_assert_uint_eq(al_model_kv_elems_per_token(&cfg), 0);
        for (int n = 1; n <= 65536; n *= 16)
            for (int dt = 0; dt < AL_KV_NDTYPES; dt++)
                ck_assert_uint_eq(al_model_kv_bytes_at(&cfg, dt, n), want);
        for (int n = 1; n <= 4096; n *= 64) {
            al_decoder d;
            al_err e;
            size_t live0 = al_kv_bytes_live();
            ck_assert_int_eq(al_decoder_init(&d, &m, n, AL_KV_INT8, &e), 0);
            ck_assert_uint_eq(al_kv_bytes_live() - live0, want);
            al_decoder_free(&d);
        }
        al_model_free(&m);
    }
}
END_TEST

/* `attnlab check-variant --variant deltanet`'s suite, in process: every
 * tensor's gradient, causality, determinism over threads, scratch bounds,
 * decode, prefill, batched decode, the state's bytes: every line passes. */
START_TEST(check_variant_passes)
{
    al_check_report r;
    al_err e;
    ck_assert_msg(al_check_variant(deltanet(), NULL, &r, &e) == 0, "%s", e.msg);
    for (int i = 0; i < r.n; i++) {
        char line[400];
        al_check_format(&r.lines[i], line, sizeof line);
        ck_assert_msg(r.lines[i].pass, "%s", line);
    }
    ck_assert_ptr_nonnull(al_check_find(&r, "decode.batch"));
    ck_assert_ptr_nonnull(al_check_find(&r, "gradient.conv_k"));
    al_check_report_free(&r);
}
END_TEST

/* ------------------------------------------------------------ the study */

/* experiments/hybrid_recall.yaml and hybrid_recall_kjv.yaml, dry-run: the
 * models of each seed (hybrid_recall.yaml at 4 layers has no 7:1 stack),
 * every one within 2% of mha's parameters, and the K/V bytes per token of
 * the stacks mha's times their share of mha layers (a state layer adds
 * none per token): 0, 1/8, 1/4, 1/2. */
static void check_study(const char *file, int trials, int seeds, int n_layer)
{
    char args[PATH_MAX + 64], *out, *dir = al_test_tmpdir();
    snprintf(args, sizeof args, "sweep %s/experiments/%s --out %s/r --dry-run", al_test_srcdir(),
             file, dir);
    ck_assert_msg(al_test_attnlab(args, &out) == 0, "%s", out);
    char want[64];
    snprintf(want, sizeof want, ": %d trials,", trials);
    ck_assert_msg(strstr(out, want), "want '%s' in %s", want, out);
    static const char *const ids[] = {"mha", "linear", "deltanet",
        "deltanet+deltanet+deltanet+deltanet+deltanet+deltanet+deltanet+mha",
        "deltanet+deltanet+deltanet+mha", "deltanet+mha"};
    static const double share[] = {1, 0, 0, 0.125, 0.25, 0.5};
    long mha_kv = -1;
    for (int i = 0; i < 6; i++) {
        char key[128];
        snprintf(key, sizeof key, " %s_seed%d ", ids[i], seeds);
        const char *l = strstr(out, key);
        if (share[i] == 0.125 && n_layer < 8) {   /* 7:1 needs 8 layers */
            ck_assert_msg(!l, "a 7:1 stack at %d layers in %s", n_layer, out);
            continue;
        }
        ck_assert_msg(l, "no trial %s in %s", key, out);
        char var[256];
        int nl, d_ff;
        long params, to, kv;
        ck_assert_int_eq(sscanf(l + strlen(key), "%255s %d %d %ld %ld %ld", var, &nl, &d_ff,
                                &params, &to, &kv), 6);
        ck_assert_int_eq(nl, n_layer);
        ck_assert_msg(fabs((double)params - to) < 0.02 * to, "%s: %ld params against %ld", ids[i],
                      params, to);
        if (i == 0) mha_kv = kv;
        ck_assert_msg(kv == (long)(share[i] * mha_kv), "%s: %ld bytes/token, mha %ld", ids[i], kv,
                      mha_kv);
    }
    ck_assert_ptr_nonnull(strstr(out, "nothing was trained"));
    free(out), free(dir);
}

START_TEST(hybrid_recall_sweeps_hold_matched_models)
{
    check_study("hybrid_recall.yaml", 50, 10, 4);
    check_study("hybrid_recall_kjv.yaml", 36, 6, 8);
}
END_TEST

Suite *deltanet_suite(void)
{
    Suite *s = suite_create("deltanet");
    TCase *tc = tcase_create("deltanet");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, chunkwise_forward_and_backward_equal_the_recurrence);
    tcase_add_test(tc, layer_gradients_match_finite_differences_for_every_tensor);
    tcase_add_test(tc, decode_equals_the_forward_past_one_chunk_and_past_the_trained_length);
    tcase_add_test(tc, batched_decode_equals_single_decodes);
    tcase_add_test(tc, state_bytes_are_the_formula_at_every_context);
    tcase_add_test(tc, check_variant_passes);
    tcase_add_test(tc, hybrid_recall_sweeps_hold_matched_models);
    suite_add_tcase(s, tc);
    return s;
}

