/*
 * test_linear.c - the `linear` state layer (variants/linear.c): gated
 * linear attention trained chunkwise, checked against the token-by-token
 * recurrence written here again, in double, independently of the variant:
 * forward at several chunk sizes; backward against central differences of
 * that recurrence (so against both the recurrence and finite differences);
 * the equivalent attention matrix; decode through the state against the
 * forward past one chunk and past the trained length, alone and in a
 * [linear, mha] stack; batched decode against single; the state's bytes,
 * the same at every context and equal to heads * d_key * d_head * 4; and
 * the conformance suite of `attnlab check-variant`.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_decode.h"
#include "al_kvcache.h"
#include "al_registry.h"
#include "al_test.h"
#include "al_test_model.h"

static const al_variant *V(void) { return al_variant_find("linear"); }

/* ------------------------------------------------------------ the oracle */

enum { WQ, WK, WV, WA, BA, WO, NP };

typedef struct dims {
    int D, H, dk, dh;
} dims;

static size_t numel(const dims *d, int i)
{
    size_t Hk = (size_t)d->H * d->dk, Hv = (size_t)d->H * d->dh;
    switch (i) {
    case WQ: case WK: return Hk * d->D;
    case WV: return Hv * d->D;
    case WA: return (size_t)d->H * d->D;
    case BA: return (size_t)d->H;
    default: return (size_t)d->D * Hv;
    }
}

/* row (n) = w (n, D) . x (D) */
static void matvec(double *row, const double *w, const double *x, int n, int D)
{
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < D; j++) s += w[(size_t)i * D + j] * x[j];
        row[i] = s;
    }
}

/* out (B, T, D) by the recurrence S_t = a_t S_{t-1} + v_t k_t^T, o_t =
 * S_t q_t / sqrt(dk), token by token, in double. */
static void recurrence(double *out, const double *x, double *const *p, const dims *d, int B,
                       int T)
{
    int H = d->H, dk = d->dk, dh = d->dh, D = d->D;
    double *S = calloc((size_t)H * dh * dk, sizeof *S), q[256], k[256], v[256], z[16], y[256];
    ck_assert(H * dk <= 256 && H * dh <= 256 && H <= 16);
    for (int b = 0; b < B; b++) {
        memset(S, 0, (size_t)H * dh * dk * sizeof *S);
        for (int t = 0; t < T; t++) {
            const double *xt = x + ((size_t)b * T + t) * D;
            matvec(q, p[WQ], xt, H * dk, D), matvec(k, p[WK], xt, H * dk, D);
            matvec(v, p[WV], xt, H * dh, D), matvec(z, p[WA], xt, H, D);
            for (int h = 0; h < H; h++) {
                double zz = z[h] + p[BA][h], a = exp(-log1p(exp(zz)));
                double *Sh = S + (size_t)h * dh * dk;
                for (int r = 0; r < dh; r++) {
                    double o = 0;
                    for (int e = 0; e < dk; e++) {
                        double *s = Sh + (size_t)r * dk + e;
                        *s = a * *s + v[h * dh + r] * k[h * dk + e];
                        o += *s * q[h * dk + e];
                    }
                    y[h * dh + r] = o / sqrt((double)dk);
                }
            }
            matvec(out + ((size_t)b * T + t) * D, p[WO], y, D, H * dh);
        }
    }
    free(S);
}

static double oracle_loss(const double *x, double *const *p, const double *R, const dims *d,
                          int B, int T)
{
    size_t n = (size_t)B * T * d->D;
    double *out = malloc(n * sizeof *out), s = 0;
    recurrence(out, x, p, d, B, T);
    for (size_t i = 0; i < n; i++) s += out[i] * R[i];
    free(out);
    return s;
}

/* ------------------------------------------------------------ a layer */

typedef struct layer {
    dims d;
    int B, T;
    const void *ctx;
    float *p[NP], *dp[NP], *x, *dx, *out, *R, *act, *scratch;
    double *pd[NP], *xd, *Rd;
} layer;

static double gauss(al_rng *r) { return al_rng_normal(r); }

/* Random weights (0.3 normal), decay biases spread over fast and slow,
 * inputs and output weights R normal; double copies for the oracle. */
static void layer_init(layer *L, const dims *d, int chunk, int B, int T, uint64_t seed)
{
    memset(L, 0, sizeof *L);
    L->d = *d, L->B = B, L->T = T;
    al_attn_shape s = {d->D, d->H, d->dh, 16, 1, 10000.0f, 1e-5f, {0}, .rope = {.base = 0}};
    s.set[al_variant_setting_index(V(), "d_key")] = d->dk == d->dh ? 0 : d->dk;
    s.set[al_variant_setting_index(V(), "chunk")] = chunk;
    L->ctx = al_test_ctx_of(V(), &s);
    al_rng r;
    al_rng_seed(&r, seed);
    for (int i = 0; i < NP; i++) {
        size_t n = numel(d, i);
        L->p[i] = malloc(n * sizeof(float)), L->dp[i] = calloc(n, sizeof(float));
        L->pd[i] = malloc(n * sizeof(double));
        for (size_t j = 0; j < n; j++) {
            L->p[i][j] = (float)(i == BA ? 1.5 * gauss(&r) : 0.3 * gauss(&r));
            L->pd[i][j] = L->p[i][j];
        }
    }
    size_t n = (size_t)B * T * d->D;
    L->x = malloc(n * sizeof(float)), L->dx = calloc(n, sizeof(float));
    L->out = malloc(n * sizeof(float)), L->R = malloc(n * sizeof(float));
    L->xd = malloc(n * sizeof(double)), L->Rd = malloc(n * sizeof(double));
    for (size_t j = 0; j < n; j++) {
        L->x[j] = (float)gauss(&r), L->xd[j] = L->x[j];
        L->R[j] = (float)gauss(&r), L->Rd[j] = L->R[j];
    }
    L->act = malloc(V()->train->act_floats(L->ctx, B, T) * sizeof(float));
    L->scratch = malloc(V()->train->scratch_floats(L->ctx, B, T) * sizeof(float));
}

static void layer_free(layer *L)
{
    for (int i = 0; i < NP; i++) free(L->p[i]), free(L->dp[i]), free(L->pd[i]);
    free(L->x), free(L->dx), free(L->out), free(L->R), free(L->xd), free(L->Rd);
    free(L->act), free(L->scratch);
}

static void layer_run(layer *L)
{
    V()->train->forward(L->ctx, L->out, L->act, L->scratch, L->x, L->p, L->B, L->T);
    V()->train->backward(L->ctx, L->dx, L->dp, L->scratch, L->R, L->x, L->act, L->p, L->B, L->T);
}

/* ||g - fd|| / ||fd|| over the tensor, fd the oracle's central
 * differences (double, step 1e-5: truncation ~1e-10). */
static double grad_err(layer *L, double *param, const float *grad, size_t n)
{
    double num = 0, den = 0;
    for (size_t j = 0; j < n; j++) {
        double keep = param[j], h = 1e-5;
        param[j] = keep + h;
        double up = oracle_loss(L->xd, L->pd, L->Rd, &L->d, L->B, L->T);
        param[j] = keep - h;
        double down = oracle_loss(L->xd, L->pd, L->Rd, &L->d, L->B, L->T);
        param[j] = keep;
        double fd = (up - down) / (2 * h);
        num += (grad[j] - fd) * (grad[j] - fd), den += fd * fd;
    }
    return sqrt(num / fmax(den, 1e-300));
}

/* ------------------------------------------------------------ tests */

static const dims shapes[] = {{16, 2, 8, 8}, {12, 3, 4, 6}};   /* d_key = d_head, and not */

/* The chunkwise forward at chunks of 1, 4 (11 tokens: a partial last
 * chunk) and 64 (one chunk) equals the recurrence, 1e-5 relative. */
START_TEST(chunkwise_forward_equals_the_recurrence)
{
    static const int chunks[] = {1, 4, 64};
    for (int s = 0; s < 2; s++)
        for (int c = 0; c < 3; c++) {
            layer L;
            layer_init(&L, &shapes[s], chunks[c], 2, 11, 7 + s);
            layer_run(&L);
            size_t n = (size_t)L.B * L.T * L.d.D;
            double *ref = malloc(n * sizeof *ref), worst = 0, scale = 0;
            recurrence(ref, L.xd, L.pd, &L.d, L.B, L.T);
            for (size_t i = 0; i < n; i++)
                worst = fmax(worst, fabs(L.out[i] - ref[i])), scale = fmax(scale, fabs(ref[i]));
            ck_assert_msg(worst / scale < 1e-5, "shape %d chunk %d: %g of %g", s, chunks[c],
                          worst, scale);
            free(ref);
            layer_free(&L);
        }
}
END_TEST

/* Every tensor's gradient and the input's, from the chunkwise backward at
 * chunks of 1, 4 and 64, equal the central differences of the
 * recurrence (1e-5 relative, per tensor). */
START_TEST(chunkwise_backward_equals_the_recurrences_differences)
{
    static const int chunks[] = {1, 4, 64};
    for (int s = 0; s < 2; s++)
        for (int c = 0; c < 3; c++) {
            layer L;
            layer_init(&L, &shapes[s], chunks[c], 2, 11, 21 + s);
            layer_run(&L);
            for (int i = 0; i < NP; i++) {
                double err = grad_err(&L, L.pd[i], L.dp[i], numel(&L.d, i));
                ck_assert_msg(err < 1e-5, "shape %d chunk %d tensor %d: %g", s, chunks[c], i, err);
            }
            double err = grad_err(&L, L.xd, L.dx, (size_t)L.B * L.T * L.d.D);
            ck_assert_msg(err < 1e-5, "shape %d chunk %d x: %g", s, chunks[c], err);
            layer_free(&L);
        }
}
END_TEST

/* pictures: P[h][i][j] = q_i . k_j / sqrt(dk) prod_{j < t <= i} a_t, and
 * the output is exactly wo . sum_j P[h][i][j] v_j: the matrix is the
 * layer's. */
START_TEST(the_attention_matrix_gives_the_layers_output)
{
    layer L;
    dims d = shapes[1];
    int T = 9;
    layer_init(&L, &d, 4, 1, T, 3);
    layer_run(&L);
    ck_assert_int_eq(V()->pictures->weights, 1);
    float *P = malloc((size_t)d.H * T * T * sizeof *P);
    V()->pictures->probs(L.ctx, P, L.act, NULL, L.p, T);
    double worst = 0, scale = 0;
    for (int i = 0; i < T; i++) {
        double y[64] = {0}, o[64];
        for (int h = 0; h < d.H; h++)
            for (int j = 0; j < T; j++) {
                double w = P[((size_t)h * T + i) * T + j], vj[64];
                if (j > i) ck_assert(w == 0);
                matvec(vj, L.pd[WV], L.xd + (size_t)j * d.D, d.H * d.dh, d.D);
                for (int r = 0; r < d.dh; r++) y[h * d.dh + r] += w * vj[h * d.dh + r];
            }
        matvec(o, L.pd[WO], y, d.D, d.H * d.dh);
        for (int e = 0; e < d.D; e++)
            worst = fmax(worst, fabs(o[e] - L.out[(size_t)i * d.D + e])),
            scale = fmax(scale, fabs(o[e]));
    }
    ck_assert_msg(worst / scale < 1e-5, "%g of %g", worst, scale);
    free(P);
    layer_free(&L);
}
END_TEST

/* A model of `items` (linear with chunk 4, or linear then mha), seq_len
 * 16, vocabulary 11, weights scaled up so that the state matters. */
static void make_model(al_model *m, int items)
{
    const al_variant *vs[2] = {V(), al_variant_find("mha")};
    al_model_config c;
    ck_assert_int_eq(al_test_stack_config(&c, vs, items, 2, 16, 2, 8, 16, 11), 0);
    c.layer_attn[0].set[al_variant_setting_index(V(), "chunk")] = 4;
    if (items == 1) c.attn_set[al_variant_setting_index(V(), "chunk")] = 4;
    al_err e;
    ck_assert_msg(al_model_init(m, &c, &e) == 0, "%s", e.msg);
    al_model_init_weights(m, 5);
    for (size_t i = 0; i < m->n_params; i++) m->params[i] *= 8.0f;
}

/* Decode through the state, after prefills of 1, 5 and 20 tokens (past
 * one chunk and past the trained seq_len of 16), up to 70 tokens: the
 * logits of the full forward over 70 at every position (f32, 1e-4). */
START_TEST(decode_equals_the_forward_past_one_chunk_and_past_the_trained_length)
{
    enum { N = 70 };
    for (int items = 1; items <= 2; items++) {
        al_model m;
        make_model(&m, items);
        int tok[N];
        for (int i = 0; i < N; i++) tok[i] = (i * 7 + 3 + i / 5) % 11;
        al_err e;
        ck_assert_int_eq(al_model_reserve(&m, 1, N, &e), 0);
        al_model_forward(&m, tok, NULL, NULL, 1, N);
        float *ref = malloc((size_t)N * 11 * sizeof *ref);
        memcpy(ref, m.logits, (size_t)N * 11 * sizeof *ref);
        static const int prompts[] = {1, 5, 20};
        for (int k = 0; k < 3; k++) {
            al_decoder d;
            ck_assert_msg(al_decoder_init(&d, &m, N, AL_KV_F32, &e) == 0, "%s", e.msg);
            ck_assert_int_eq(al_decoder_prefill(&d, tok, prompts[k], &e), 0);
            double worst = 0, big = 0;
            for (int j = 0; j < 11; j++)
                worst = fmax(worst, fabs(d.logits[j] - ref[(size_t)(prompts[k] - 1) * 11 + j]));
            for (int i = prompts[k]; i < N; i++) {
                const float *lg = al_decoder_step(&d, tok[i]);
                for (int j = 0; j < 11; j++)
                    worst = fmax(worst, fabs(lg[j] - ref[(size_t)i * 11 + j])),
                    big = fmax(big, fabs(ref[(size_t)i * 11 + j]));
            }
            ck_assert_msg(big > 1e-2, "logits too small to test: %g", big);
            ck_assert_msg(worst < 1e-4, "items %d prompt %d: %g", items, prompts[k], worst);
            al_decoder_free(&d);
        }
        free(ref);
        al_model_free(&m);
    }
}
END_TEST

/* Four sequences at different positions stepped together equal each
 * stepped alone (1e-5). */
START_TEST(batched_decode_equals_single)
{
    enum { NB = 4, N = 40 };
    al_model m;
    make_model(&m, 2);
    al_err e;
    al_decoder bd, sd;
    ck_assert_int_eq(al_decoder_init_batch(&bd, &m, NB, N, AL_KV_F32, &e), 0);
    ck_assert_int_eq(al_decoder_init(&sd, &m, N, AL_KV_F32, &e), 0);
    int tok[NB][N];
    for (int b = 0; b < NB; b++)
        for (int i = 0; i < N; i++) tok[b][i] = (i * (b + 3) + b) % 11;
    for (int b = 0; b < NB; b++) ck_assert_int_eq(al_decoder_prefill_seq(&bd, b, tok[b], 1 + 6 * b, &e), 0);
    float *single = malloc((size_t)NB * 20 * 11 * sizeof *single);
    for (int b = 0; b < NB; b++) {
        ck_assert_int_eq(al_decoder_prefill(&sd, tok[b], 1 + 6 * b, &e), 0);
        for (int s = 0; s < 20; s++)
            memcpy(single + ((size_t)b * 20 + s) * 11, al_decoder_step(&sd, tok[b][1 + 6 * b + s]),
                   11 * sizeof(float));
    }
    double worst = 0;
    for (int s = 0; s < 20; s++) {
        int next[NB];
        for (int b = 0; b < NB; b++) next[b] = tok[b][1 + 6 * b + s];
        const float *lg = al_decoder_step_batch(&bd, next);
        for (int b = 0; b < NB; b++)
            for (int j = 0; j < 11; j++)
                worst = fmax(worst, fabs(lg[b * 11 + j] - single[((size_t)b * 20 + s) * 11 + j]));
    }
    ck_assert_msg(worst < 1e-5, "%g", worst);
    free(single);
    al_decoder_free(&bd), al_decoder_free(&sd);
    al_model_free(&m);
}
END_TEST

/* heads * d_key * d_head * 4 bytes per layer, counted and allocated, the
 * same at 1 .. 10^6 tokens and every dtype; nothing per token. */
START_TEST(the_state_has_the_same_bytes_at_every_context)
{
    static const int dkeys[] = {0, 4};
    for (int k = 0; k < 2; k++) {
        al_model_config c;
        ck_assert_int_eq(al_test_tiny_config(&c, V(), 3, 16, 2, 8, 16, 11), 0);
        c.attn_set[al_variant_setting_index(V(), "d_key")] = dkeys[k];
        int dk = dkeys[k] ? dkeys[k] : 8;
        size_t want = 3 * (size_t)2 * dk * 8 * 4;
        ck_assert_uint_eq(al_model_kv_elems_per_token(&c), 0);
        al_model m;
        al_err e;
        ck_assert_msg(al_model_init(&m, &c, &e) == 0, "%s", e.msg);
        for (int n = 1; n <= 1000000; n *= 10)
            for (int dt = 0; dt < AL_KV_NALL; dt++)
                ck_assert_uint_eq(al_model_kv_bytes_at(&c, dt, n), want);
        for (int n = 1; n <= 10000; n *= 100) {
            al_decoder d;
            ck_assert_int_eq(al_decoder_init(&d, &m, n, AL_KV_BF16, &e), 0);
            ck_assert_uint_eq(al_decoder_cache_bytes(&d), want);
            al_decoder_free(&d);
        }
        al_model_free(&m);
    }
}
END_TEST

/* `attnlab check-variant`'s checks, in process: every line passes. */
START_TEST(linear_passes_the_conformance_suite)
{
    al_test_variant_generic(V());
}
END_TEST

Suite *linear_suite(void)
{
    Suite *s = suite_create("linear");
    TCase *tc = tcase_create("linear");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, chunkwise_forward_equals_the_recurrence);
    tcase_add_test(tc, chunkwise_backward_equals_the_recurrences_differences);
    tcase_add_test(tc, the_attention_matrix_gives_the_layers_output);
    tcase_add_test(tc, decode_equals_the_forward_past_one_chunk_and_past_the_trained_length);
    tcase_add_test(tc, batched_decode_equals_single);
    tcase_add_test(tc, the_state_has_the_same_bytes_at_every_context);
    tcase_add_test(tc, linear_passes_the_conformance_suite);
    suite_add_tcase(s, tc);
    return s;
}
