/*
 * test_bf16.c - train.precision bf16 (src/base/bf16.c, al_bf16.h): bf16
 * products within bf16's bound of the f32 ones and within f32 rounding of
 * an exact product of the rounded operands; a training step's loss and
 * gradients near f32's; the same bits from the same seed and threads (1
 * and 2); a resume bit-exact; the precision in checkpoints and in the
 * resume check; the one-line refusal where the CPU has no bf16. Where
 * this build or CPU cannot run bf16 at all, the tests that need it say so
 * and pass.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_checkpoint.h"
#include "al_config_io.h"
#include "al_gemm.h"
#include "al_model.h"
#include "al_flash.h"
#include "al_parallel.h"
#include "al_registry.h"
#include "al_test.h"
#include "al_test_model.h"
#include "al_train.h"
#include "al_util.h"

/* 0 when bf16 runs here; else says why the test is skipped. */
static int no_bf16(void)
{
    al_err e;
    if (al_bf16_check(&e) == 0) return 0;
    fprintf(stderr, "test_bf16: skipped: %s\n", e.msg);
    return 1;
}

static void set_precision(const char *p)
{
    al_err e;
    ck_assert_msg(al_gemm_set_precision(p, &e) == 0, "%s", e.msg);
}

/* ------------------------------------------------------------ products */

typedef struct shape {
    CBLAS_TRANSPOSE ta, tb;
    int M, N, K;
    float alpha, beta;
} shape;

static float *randn(al_rng *r, size_t n)
{
    float *x = al_malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)al_rng_normal(r);
    return x;
}

/* Element (i, j) of op(X) for X stored with leading dimension ld. */
static double at(const float *X, int ld, CBLAS_TRANSPOSE t, int i, int j, int round)
{
    float x = t == CblasNoTrans ? X[(size_t)i * ld + j] : X[(size_t)j * ld + i];
    return round ? al_bf16_round(x) : x;
}

/* C from bf16, C from f32 against, per element: the exact product of the
 * bf16-rounded operands (f32 accumulation over K terms: K * 2^-23 of the
 * sum of |terms|), and the f32 product (each operand's rounding, 2^-8 of
 * each, plus that). */
static void check_shape(const shape *s, al_rng *r, double *worst)
{
    int lda = s->ta == CblasNoTrans ? s->K : s->M, ldb = s->tb == CblasNoTrans ? s->N : s->K;
    size_t nc = (size_t)s->M * s->N;
    float *A = randn(r, (size_t)s->M * s->K), *B = randn(r, (size_t)s->K * s->N);
    float *C0 = randn(r, nc), *Cb = al_malloc(nc * 4), *Cf = al_malloc(nc * 4);
    memcpy(Cb, C0, nc * 4), memcpy(Cf, C0, nc * 4);
    set_precision("bf16");
    al_sgemm_pool(s->ta, s->tb, s->M, s->N, s->K, s->alpha, A, lda, B, ldb, s->beta, Cb, s->N);
    set_precision("f32");
    al_sgemm_pool(s->ta, s->tb, s->M, s->N, s->K, s->alpha, A, lda, B, ldb, s->beta, Cf, s->N);
    if (!al_bf16_worth(s->M, s->N, s->K)) {
        /* below the size where bf16 pays, the product is f32's, bit for bit */
        ck_assert_msg(!memcmp(Cb, Cf, nc * 4), "%dx%dx%d: a small product was not f32's",
                      s->M, s->N, s->K);
        free(A), free(B), free(C0), free(Cb), free(Cf);
        return;
    }
    int differ = 0;
    for (int i = 0; i < s->M; i++)
        for (int j = 0; j < s->N; j++) {
            double exact = 0, mag = 0;
            for (int k = 0; k < s->K; k++) {
                double t = at(A, lda, s->ta, i, k, 1) * at(B, ldb, s->tb, k, j, 1);
                exact += t, mag += fabs(t);
            }
            size_t c = (size_t)i * s->N + j;
            double want = s->alpha * exact + s->beta * C0[c], tol = (s->K + 2) * 0x1p-23 * mag + 1e-6;
            double got = Cb[c], d = fabs(got - want);
            ck_assert_msg(d <= tol, "%dx%dx%d (%d,%d): bf16 %g, exact %g", s->M, s->N, s->K, i, j,
                          got, want);
            double bound = fabs(s->alpha) * (2 * 0x1p-8 + 0x1p-16) * mag * 1.01 + 2 * tol;
            ck_assert_msg(fabs(got - Cf[c]) <= bound, "(%d,%d): bf16 %g, f32 %g", i, j, got, Cf[c]);
            if (mag > 0 && fabs(got - Cf[c]) / mag > *worst) *worst = fabs(got - Cf[c]) / mag;
            differ |= got != Cf[c];
        }
    ck_assert_msg(differ, "%dx%dx%d: bf16 gave f32's bits (not bf16?)", s->M, s->N, s->K);
    free(A), free(B), free(C0), free(Cb), free(Cf);
}

START_TEST(bf16_products_should_be_within_bf16_bound_of_f32)
{
    if (no_bf16()) return;
    al_rng r;
    al_rng_seed(&r, 25);
    double worst = 0;
    int small = 0;
    for (int threads = 1; threads <= 2; threads++) {
        al_parallel_set_threads(threads);
        for (int n = 0; n < 12; n++) {
            shape s = {al_rng_uniform(&r) < 0.5 ? CblasNoTrans : CblasTrans,
                       al_rng_uniform(&r) < 0.5 ? CblasNoTrans : CblasTrans,
                       1 + (int)(al_rng_uniform(&r) * 300), 1 + (int)(al_rng_uniform(&r) * 200),
                       1 + (int)(al_rng_uniform(&r) * 400), n % 3 ? 1.0f : 0.125f,
                       n % 2 ? 1.0f : 0.0f};
            check_shape(&s, &r, &worst);
            small += !al_bf16_worth(s.M, s.N, s.K);
        }
        /* one past the split threshold, so the pool's splits run too */
        shape big = {CblasNoTrans, CblasTrans, 301, 203, 97, 1.0f, 0.0f};
        check_shape(&big, &r, &worst);
    }
    /* both sides of al_bf16_worth were drawn */
    ck_assert_msg(small > 0 && small < 24, "%d of 24 shapes below the bf16 size", small);
    fprintf(stderr, "test_bf16: worst |bf16 - f32| / sum|a b| = %.2e (bound %.2e)\n", worst,
            2 * 0x1p-8 + 0x1p-16);
}
END_TEST

/* beta 0 ignores NaN in C, as sgemm's does; K = 0 only scales C. */
START_TEST(bf16_products_should_keep_sgemm_edge_cases)
{
    if (no_bf16()) return;
    al_parallel_set_threads(1);
    float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {1, 0, 0, 1, 1, 1}, C[4] = {NAN, NAN, NAN, NAN};
    set_precision("bf16");
    al_sgemm_here(CblasNoTrans, CblasNoTrans, 2, 2, 3, 1.0f, A, 3, B, 2, 0.0f, C, 2);
    float want[4] = {4, 5, 10, 11};
    for (int i = 0; i < 4; i++) ck_assert_float_eq(C[i], want[i]);
    al_sgemm_here(CblasNoTrans, CblasNoTrans, 2, 2, 0, 1.0f, A, 3, B, 2, 0.5f, C, 2);
    ck_assert_float_eq(C[0], 2.0f);
    set_precision("f32");
}
END_TEST

/* The pool's workers end whenever the thread count changes; each gives its
 * oneDNN slot back, so more threads than there are slots (256) come and go
 * without running out, and the product stays right. */
/* More shapes than a thread keeps primitives for (512), twice over: the
 * hash lookup finds each one, and one evicted and made again, with exact
 * results (small integers are exact in bf16, their sums and alpha's
 * 11 bits in f32). */
START_TEST(many_shapes_should_each_find_their_own_primitive)
{
    if (no_bf16()) return;
    enum { M = 3, N = 5, K = 4, SHAPES = 600 };
    float a[M * K], b[K * N], c[M * N];
    for (int i = 0; i < M * K; i++) a[i] = (float)(i % 7 - 3);
    for (int i = 0; i < K * N; i++) b[i] = (float)(i % 5 - 2);
    for (int pass = 0; pass < 2; pass++)
        for (int sh = 0; sh < SHAPES; sh++) {
            float alpha = 1.0f + (float)sh / 1024.0f;   /* a key per shape */
            al_bf16_gemm(CblasNoTrans, CblasNoTrans, M, N, K, alpha, a, K, b, N, 0.0f, c, N);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    float sum = 0;
                    for (int k = 0; k < K; k++) sum += a[i * K + k] * b[k * N + j];
                    ck_assert_msg(c[i * N + j] == alpha * sum, "pass %d shape %d (%d, %d): %g, "
                                  "not %g", pass, sh, i, j, c[i * N + j], alpha * sum);
                }
        }
}
END_TEST

START_TEST(ended_threads_should_give_their_slots_back)
{
    if (no_bf16()) return;
    int M = 128, N = 128, K = 64;
    float *A = al_malloc((size_t)M * K * 4), *B = al_malloc((size_t)K * N * 4);
    float *C = al_malloc((size_t)M * N * 4);
    for (int i = 0; i < M * K; i++) A[i] = 1.0f;
    for (int i = 0; i < K * N; i++) B[i] = 0.5f;
    set_precision("bf16");
    for (int r = 0; r < 600; r++) {
        al_parallel_set_threads(1 + r % 2);
        al_sgemm_pool(CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
        ck_assert_float_eq(C[(size_t)(r % M) * N + r % N], 32.0f);
    }
    set_precision("f32");
    free(A), free(B), free(C);
}
END_TEST

/* ------------------------------------------------------------ a step */

static void grads_of(al_model *m, const int *in, const int *tgt, double *loss, float *g)
{
    *loss = al_model_forward(m, in, tgt, NULL, 2, 16);
    al_model_backward(m);
    memcpy(g, m->grads, m->n_params * sizeof *g);
}

START_TEST(bf16_step_should_give_f32_loss_and_gradients_within_tolerance)
{
    if (no_bf16()) return;
    al_parallel_set_threads(1);
    const char *names[] = {"mha", "gqa", "mla", "tpa"};
    for (int v = 0; v < 4; v++) {
        al_model_config c;
        ck_assert_int_eq(al_test_tiny_config(&c, al_variant_find(names[v]), 2, 32, 4, 8, 16, 40),
                         0);
        al_model m;
        al_err e;
        ck_assert_msg(al_model_init(&m, &c, &e) == 0, "%s", e.msg);
        al_model_init_weights(&m, 7);
        ck_assert_int_eq(al_model_reserve(&m, 2, 16, &e), 0);
        int in[32], tgt[32];
        for (int i = 0; i < 32; i++) in[i] = (i * 7 + 3) % 40, tgt[i] = (i * 11 + 5) % 40;
        float *g32 = al_malloc(m.n_params * 4), *g16 = al_malloc(m.n_params * 4);
        double l32, l16;
        set_precision("f32");
        grads_of(&m, in, tgt, &l32, g32);
        set_precision("bf16");
        grads_of(&m, in, tgt, &l16, g16);
        set_precision("f32");
        double *a = al_malloc(m.n_params * 8), *b = al_malloc(m.n_params * 8);
        for (size_t i = 0; i < m.n_params; i++) a[i] = g32[i], b[i] = g16[i];
        double rel = al_check_rel_err(a, b, m.n_params);
        fprintf(stderr, "test_bf16: %s: loss f32 %.6f bf16 %.6f, gradient rel err %.2e\n",
                names[v], l32, l16, rel);
        ck_assert_msg(fabs(l32 - l16) < 5e-3 * fabs(l32), "%s: loss %g vs %g", names[v], l16, l32);
        ck_assert_msg(rel < 3e-2, "%s: gradients off by %g", names[v], rel);
        ck_assert_msg(rel > 0, "%s: bf16 gave f32's gradients (not bf16?)", names[v]);
        free(a), free(b), free(g32), free(g16);
        al_model_free(&m);
    }
}
END_TEST

/* ------------------------------------------------------------ the memo */

/* C (m, n) = X (m, k) . Y (n rows of k)^T in bf16 on this thread. */
static void prod(float *C, const float *X, const float *Y, int m, int n, int k)
{
    al_sgemm_here(CblasNoTrans, CblasTrans, m, n, k, 1.0f, X, k, Y, k, 0.0f, C, n);
}

START_TEST(the_memo_reuses_packings_and_drops_written_ones)
{
    if (no_bf16()) return;
    set_precision("bf16");
    al_rng r;
    al_rng_seed(&r, 11);
    enum { M = 64, K = 32, NK = 96 };
    float *X = randn(&r, M * K), *Y = randn(&r, NK * K), *ref = al_malloc(M * NK * 4),
          *C = al_malloc(M * NK * 4);
    /* growing key blocks: rows [0, 32), [0, 96), then [0, 64) */
    const int rows[] = {32, NK, 64};
    long hits = al_bf16_memo_hits();
    al_bf16_memo_begin();
    for (int i = 0; i < 3; i++) {
        prod(C, X, Y, M, rows[i], K);
        al_bf16_memo_disable(1);
        prod(ref, X, Y, M, rows[i], K);
        al_bf16_memo_disable(0);
        ck_assert_msg(!memcmp(C, ref, (size_t)M * rows[i] * 4), "key block %d", i);
    }
    ck_assert_int_eq(al_bf16_memo_hits() - hits, 4);   /* X twice, Y twice */
    /* one matrix as both operands, B reading more rows than A: B's rows
     * grow the entry A was given (a new buffer), so A is fetched again */
    const float *Z = Y + K;   /* a matrix the memo has not seen */
    al_sgemm_here(CblasNoTrans, CblasTrans, 32, NK - 1, K, 1.0f, Z, K, Z, K, 0.0f, C, NK - 1);
    al_bf16_memo_disable(1);
    al_sgemm_here(CblasNoTrans, CblasTrans, 32, NK - 1, K, 1.0f, Z, K, Z, K, 0.0f, ref, NK - 1);
    al_bf16_memo_disable(0);
    ck_assert_msg(!memcmp(C, ref, (size_t)32 * (NK - 1) * 4), "Z . Z^T");
    /* a product that writes an operand drops its packing */
    al_sgemm_here(CblasNoTrans, CblasNoTrans, M, K, K, 1.0f, Y, K, Y + M * K, K, 0.0f, X, K);
    prod(C, X, Y, M, NK, K);
    al_bf16_memo_disable(1);
    prod(ref, X, Y, M, NK, K);
    al_bf16_memo_disable(0);
    ck_assert_msg(!memcmp(C, ref, (size_t)M * NK * 4), "X rewritten by a product");
    /* a write that is not a product: stale until it is declared */
    for (int i = 0; i < M * K; i++) X[i] *= 2.0f;
    prod(C, X, Y, M, NK, K);
    ck_assert_msg(memcmp(C, ref, (size_t)M * NK * 4) == 0, "the memo did not keep X");
    al_bf16_memo_written(X, M, K, K);
    prod(C, X, Y, M, NK, K);
    al_bf16_memo_disable(1);
    prod(ref, X, Y, M, NK, K);
    al_bf16_memo_disable(0);
    ck_assert_msg(!memcmp(C, ref, (size_t)M * NK * 4), "X declared written");
    al_bf16_memo_end();
    /* outside a scope nothing is kept */
    hits = al_bf16_memo_hits();
    prod(C, X, Y, M, NK, K);
    prod(C, X, Y, M, NK, K);
    ck_assert_int_eq(al_bf16_memo_hits(), hits);
    set_precision("f32");
    free(X), free(Y), free(ref), free(C);
}
END_TEST

/* The memo in training: every variant's gradients under both attention
 * kernels that use it are the bits of packing afresh, and it was used. */
START_TEST(the_memo_leaves_a_bf16_steps_bits_unchanged)
{
    if (no_bf16()) return;
    al_parallel_set_threads(1);
    const char *names[] = {"mha", "gqa", "mqa", "mla", "local"};
    const int kernels[] = {AL_ATTN_ROWS, AL_ATTN_DENSE};
    enum { B = 2, T = 160 };   /* three query blocks, the last one short */
    int in[B * T], tgt[B * T];
    for (int i = 0; i < B * T; i++) in[i] = (i * 7 + 3) % 40, tgt[i] = (i * 11 + 5) % 40;
    for (int v = 0; v < 5; v++)
        for (int kk = 0; kk < 2; kk++) {
            al_model_config c;
            ck_assert_int_eq(al_test_tiny_config(&c, al_variant_find(names[v]), 2, 64, 4, 16, T,
                                                 40), 0);
            c.attn_kernel = kernels[kk];
            al_model m;
            al_err e;
            ck_assert_msg(al_model_init(&m, &c, &e) == 0, "%s", e.msg);
            al_model_init_weights(&m, 7);
            ck_assert_int_eq(al_model_reserve(&m, B, T, &e), 0);
            float *g1 = al_malloc(m.n_params * 4), *g0 = al_malloc(m.n_params * 4);
            double l1, l0;
            set_precision("bf16");
            long hits = al_bf16_memo_hits();
            l1 = al_model_forward(&m, in, tgt, NULL, B, T);
            al_model_backward(&m);
            memcpy(g1, m.grads, m.n_params * sizeof *g1);
            hits = al_bf16_memo_hits() - hits;
            al_bf16_memo_disable(1);
            l0 = al_model_forward(&m, in, tgt, NULL, B, T);
            al_model_backward(&m);
            memcpy(g0, m.grads, m.n_params * sizeof *g0);
            al_bf16_memo_disable(0);
            set_precision("f32");
            ck_assert_msg(hits > 0, "%s kernel %d: the memo was not used", names[v], kernels[kk]);
            ck_assert_msg(l1 == l0 && !memcmp(g1, g0, m.n_params * sizeof *g0),
                          "%s kernel %d: the memo changed the bits", names[v], kernels[kk]);
            free(g1), free(g0);
            al_model_free(&m);
        }
}
END_TEST

/* A bf16 product split over 2 threads by rows reads all of B in each
 * block, and by columns all of A: that operand is packed once by the pool
 * (gemm.c's share). Every transposition and both splits give the bits of
 * packing it in each block, and the shared packing was used. */
START_TEST(a_splits_shared_operand_is_packed_once_with_the_same_bits)
{
    if (no_bf16()) return;
    al_parallel_set_threads(2);
    enum { M = 256, N = 320, K = 300 };   /* each operand above the sharing's minimum */
    float *A = al_malloc(sizeof(float) * M * K), *B = al_malloc(sizeof(float) * K * N);
    float *C1 = al_malloc(sizeof(float) * M * N), *C0 = al_malloc(sizeof(float) * M * N);
    al_rng r;
    al_rng_seed(&r, 5);
    for (int i = 0; i < M * K; i++) A[i] = (float)al_rng_normal(&r);
    for (int i = 0; i < K * N; i++) B[i] = (float)al_rng_normal(&r);
    set_precision("bf16");
    const int splits[] = {AL_SPLIT_ROWS, AL_SPLIT_COLS};
    for (int t = 0; t < 4; t++)
        for (int sp = 0; sp < 2; sp++) {
            CBLAS_TRANSPOSE ta = t & 1 ? CblasTrans : CblasNoTrans;
            CBLAS_TRANSPOSE tb = t & 2 ? CblasTrans : CblasNoTrans;
            int lda = ta == CblasNoTrans ? K : M, ldb = tb == CblasNoTrans ? N : K;
            for (int i = 0; i < M * N; i++) C1[i] = C0[i] = (float)(i % 7);
            long before = al_gemm_shares();
            al_sgemm_split(splits[sp], ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 1.0f, C1, N);
            ck_assert_msg(al_gemm_shares() == before + 1, "ta %d tb %d split %d: not shared", ta,
                          tb, splits[sp]);
            al_gemm_share_disable(1);
            al_sgemm_split(splits[sp], ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 1.0f, C0, N);
            al_gemm_share_disable(0);
            ck_assert_msg(!memcmp(C1, C0, sizeof(float) * M * N),
                          "ta %d tb %d split %d: sharing changed the bits", ta, tb, splits[sp]);
        }
    set_precision("f32");
    al_parallel_set_threads(1);
    free(A), free(B), free(C1), free(C0);
}
END_TEST

/* ------------------------------------------------------------ runs */

static void run_config(al_config *c, const char *dir, int threads)
{
    char text[20001];
    const char *s = "It is a truth universally acknowledged, that a single man in possession ";
    for (int i = 0; i < 20000; i++) text[i] = s[(i * 7 + i / 13) % strlen(s)];
    text[20000] = 0;
    char *path = al_test_write(dir, "data.txt", text);
    al_config_defaults(c);
    snprintf(c->data.source, sizeof c->data.source, "text");
    snprintf(c->data.path, sizeof c->data.path, "%s", path);
    free(path);
    c->model.n_layer = 2, c->model.d_model = 64, c->model.n_head = 4, c->model.d_head = 16;
    c->model.seq_len = 32;
    c->model.attn = al_variant_find("gqa");
    snprintf(c->model.variant, sizeof c->model.variant, "gqa");
    c->model.attn_set[0] = 2;
    c->train.steps = 12, c->train.batch_size = 4, c->train.lr = 1e-2;
    c->train.warmup_steps = 2, c->train.eval_every = 6, c->train.eval_batches = 2;
    c->train.threads = threads;
    snprintf(c->train.precision, sizeof c->train.precision, "bf16");
}

static void train_ok(const al_config *c, const char *dir, int resume, int stop, int want)
{
    al_train_opts o = {.outdir = dir, .resume = resume, .stop_after = stop};
    al_train_result r;
    al_err e;
    ck_assert_msg(al_train(c, &o, &r, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(r.status, want);
}

static char *file_bytes(const char *dir, const char *name, size_t *n)
{
    char path[8400], *buf;
    al_err e;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ck_assert_msg(al_read_file(path, &buf, n, &e) == 0, "%s", e.msg);
    return buf;
}

/* 1 when the two runs' checkpoints are the same bytes. */
static int same_model(const char *d1, const char *d2)
{
    size_t n1, n2;
    char *b1 = file_bytes(d1, "model.safetensors", &n1), *b2 = file_bytes(d2, "model.safetensors", &n2);
    int same = n1 == n2 && memcmp(b1, b2, n1) == 0;
    free(b1), free(b2);
    return same;
}

START_TEST(bf16_runs_should_repeat_bit_for_bit_at_1_and_2_threads)
{
    if (no_bf16()) return;
    for (int threads = 1; threads <= 2; threads++) {
        char *d1 = al_test_tmpdir(), *d2 = al_test_tmpdir(), *d3 = al_test_tmpdir();
        al_config c;
        run_config(&c, d1, threads);
        train_ok(&c, d1, 0, 0, AL_TRAIN_OK);
        train_ok(&c, d2, 0, 0, AL_TRAIN_OK);
        ck_assert_msg(same_model(d1, d2), "%d threads: two bf16 runs differ", threads);
        snprintf(c.train.precision, sizeof c.train.precision, "f32");
        train_ok(&c, d3, 0, 0, AL_TRAIN_OK);
        ck_assert_msg(!same_model(d1, d3), "%d threads: bf16 run equals f32 run", threads);
        free(d1), free(d2), free(d3);
    }
}
END_TEST

/* After a bf16 model is loaded: its forward runs in bf16 (a loss just
 * apart from the same weights' at f32), and the process stays at f32
 * before and after (a product is cblas_sgemm's bits). */
static void expect_f32_products_after(al_model *m)
{
    al_err e;
    int T = m->cfg.seq_len, V = m->cfg.vocab_size;
    int *in = al_malloc(T * sizeof(int)), *tgt = al_malloc(T * sizeof(int));
    for (int i = 0; i < T; i++) in[i] = (3 * i) % V, tgt[i] = (3 * i + 1) % V;
    ck_assert_int_eq(al_model_reserve(m, 1, T, &e), 0);
    double lb = al_model_forward(m, in, tgt, NULL, 1, T);
    ck_assert_int_eq(al_gemm_precision(), AL_PRECISION_F32);
    m->precision = AL_PRECISION_F32;
    double lf = al_model_forward(m, in, tgt, NULL, 1, T);
    m->precision = AL_PRECISION_BF16;
    ck_assert_msg(lb != lf && fabs(lb - lf) < 0.05, "bf16 loss %.9f, f32 %.9f", lb, lf);
    al_rng r;
    al_rng_seed(&r, 3);
    float *A = randn(&r, 64 * 64), *B = randn(&r, 64 * 64);
    float *C1 = al_malloc(64 * 64 * 4), *C2 = al_malloc(64 * 64 * 4);
    al_sgemm_here(CblasNoTrans, CblasNoTrans, 64, 64, 64, 1.0f, A, 64, B, 64, 0.0f, C1, 64);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 64, 64, 64, 1.0f, A, 64, B, 64, 0.0f,
                C2, 64);
    ck_assert_msg(!memcmp(C1, C2, 64 * 64 * 4), "a product after the bf16 model was not f32");
    free(A), free(B), free(C1), free(C2), free(in), free(tgt);
}

START_TEST(bf16_resume_should_be_bit_exact_and_record_the_precision)
{
    if (no_bf16()) return;
    char *d1 = al_test_tmpdir(), *d2 = al_test_tmpdir(), path[4200];
    al_config c;
    run_config(&c, d1, 2);
    train_ok(&c, d1, 0, 0, AL_TRAIN_OK);
    c.train.checkpoint_every = 3;
    train_ok(&c, d2, 0, 7, AL_TRAIN_STOPPED);
    /* the saved config and checkpoint say bf16; a resume in f32 is refused */
    size_t n;
    char *cfg = file_bytes(d2, "config.yaml", &n), *ck = file_bytes(d2, "model.safetensors", &n);
    ck_assert_ptr_nonnull(strstr(cfg, "  precision: bf16\n"));
    ck_assert_ptr_nonnull(memmem(ck, n, "\"attnlab.precision\":\"bf16\"", 26));
    free(cfg), free(ck);
    al_config f = c;
    snprintf(f.train.precision, sizeof f.train.precision, "f32");
    al_train_opts o = {.outdir = d2, .resume = 1};
    al_train_result r;
    al_err e;
    ck_assert_int_ne(al_train(&f, &o, &r, &e), 0);
    ck_assert_msg(strstr(e.msg, "train.precision"), "refusal without the key: %s", e.msg);
    c.train.checkpoint_every = 0;
    train_ok(&c, d2, 1, 0, AL_TRAIN_OK);
    ck_assert_msg(same_model(d1, d2), "resumed bf16 run differs from the uninterrupted one");
    /* a model.safetensors read back runs at its precision, and leaves the
     * process's as it was: an f32 product after it is f32 */
    al_model m;
    snprintf(path, sizeof path, "%s/model.safetensors", d2);
    ck_assert_msg(al_checkpoint_load_run(path, &m, NULL, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(m.precision, AL_PRECISION_BF16);
    ck_assert_int_eq(al_gemm_precision(), AL_PRECISION_F32);
    expect_f32_products_after(&m);
    al_model_free(&m);
    free(d1), free(d2);
}
END_TEST

/* f32 runs write no precision (old runs keep their ids) but their
 * checkpoints say f32. */
START_TEST(f32_config_should_not_write_the_precision)
{
    char *d = al_test_tmpdir();
    al_config c;
    run_config(&c, d, 1);
    c.train.steps = 2, c.train.eval_every = 2, c.train.warmup_steps = 1;
    snprintf(c.train.precision, sizeof c.train.precision, "f32");
    train_ok(&c, d, 0, 0, AL_TRAIN_OK);
    size_t n;
    char *cfg = file_bytes(d, "config.yaml", &n), *ck = file_bytes(d, "model.safetensors", &n);
    ck_assert_ptr_null(strstr(cfg, "precision"));
    ck_assert_ptr_nonnull(memmem(ck, n, "\"attnlab.precision\":\"f32\"", 25));
    free(cfg), free(ck), free(d);
}
END_TEST


/* A sweep takes train.precision as an axis; score and generate run in the
 * checkpoint's precision, so a bf16 one is refused where bf16 cannot run
 * and an f32 one is not. */
START_TEST(sweeps_should_take_the_precision_as_an_axis_and_score_respect_it)
{
    if (no_bf16()) return;
    char *d = al_test_tmpdir(), *out = NULL, args[4400], text[4400];
    al_config c;
    run_config(&c, d, 1);   /* its data.txt */
    snprintf(text, sizeof text,
        "data: {source: text, path: %s}\n"
        "model: {n_layer: 1, d_model: 32, n_head: 2, seq_len: 16}\n"
        "train: {steps: 4, batch_size: 2, eval_every: 2, eval_batches: 1, threads: 1}\n"
        "sweep:\n  seeds: 1\n  grid:\n    train.precision: [f32, bf16]\n", c.data.path);
    char *cfg = al_test_write(d, "s.yaml", text);
    snprintf(args, sizeof args, "sweep %s --out %s/o --jobs 1", cfg, d);
    ck_assert_msg(al_test_attnlab(args, &out) == 0, "%s", out);
    free(out);
    const char *trial[2] = {"precision-f32_seed1", "precision-bf16_seed1"};
    for (int i = 0; i < 2; i++) {
        char dir[4300];
        size_t n;
        snprintf(dir, sizeof dir, "%s/o/%s", d, trial[i]);
        char *ck = file_bytes(dir, "model.safetensors", &n);
        ck_assert_ptr_nonnull(memmem(ck, n, i ? "\"attnlab.precision\":\"bf16\""
                                              : "\"attnlab.precision\":\"f32\"", 26 - !i));
        free(ck);
        /* what the trial's bits depend on: oneDNN's ISA for the bf16 one */
        char *res = file_bytes(dir, "result.json", &n);
        ck_assert_msg((strstr(res, "+onednn:") != NULL) == i, "%s: %s", trial[i], res);
        free(res);
        snprintf(args, sizeof args, "score %s/model.safetensors %s --seq-len 8", dir, cfg);
        setenv("AL_BF16_ISA", "none", 1);
        int rc = al_test_attnlab(args, &out);
        snprintf(args, sizeof args, "generate %s/model.safetensors --prompt ab --tokens 3", dir);
        char *gen = NULL;
        int grc = al_test_attnlab(args, &gen);
        unsetenv("AL_BF16_ISA");
        ck_assert_msg(rc == (i ? 2 : 0), "score %s: exit %d: %s", trial[i], rc, out);
        ck_assert_msg(grc == (i ? 2 : 0), "generate %s: exit %d: %s", trial[i], grc, gen);
        if (i) ck_assert_msg(strstr(out, "trained in bf16") != NULL, "%s", out);
        free(out), free(gen);
    }
    free(cfg), free(d);
}
END_TEST

/* ------------------------------------------------------------ the CPU */

START_TEST(a_cpu_without_bf16_should_be_refused_in_one_line)
{
    char *d = al_test_tmpdir(), *out = NULL, args[4400];
    free(al_test_write(d, "data.txt", "abcdefghijklmnopqrstuvwxyz abcdefghijklmnopqrstuvwxyz "
                                      "abcdefghijklmnopqrstuvwxyz abcdefghijklmnopqrstuvwxyz\n"));
    char *cfg = al_test_write(d, "c.yaml",
        "data: {source: text, path: data.txt}\n"
        "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 8}\n"
        "train: {steps: 2, batch_size: 2, eval_every: 2, eval_batches: 1, threads: 1,\n"
        "        precision: bf16}\n");
    snprintf(args, sizeof args, "train %s --out %s/run", cfg, d);
    setenv("AL_BF16_ISA", "none", 1);
    int rc = al_test_attnlab(args, &out);
    unsetenv("AL_BF16_ISA");
    ck_assert_msg(rc == 2, "exit %d: %s", rc, out);
    al_err e;
    if (al_bf16_check(&e) != 0 && !strstr(e.msg, "this CPU"))   /* a build without oneDNN */
        ck_assert_msg(strstr(out, "built without oneDNN") != NULL, "%s", out);
    else
        ck_assert_msg(strstr(out, "train.precision bf16: this CPU has no bf16 dot products") != NULL,
                      "%s", out);
    const char *line = strstr(out, "train.precision bf16:"), *nl = line ? strchr(line, '\n') : NULL;
    ck_assert_msg(nl && !nl[1], "not one line: %s", out);
    free(out), free(cfg), free(d);
}
END_TEST

/* ------------------------------------------------------------ does bf16 pay */

/* The rates are measured on the class of the shape, then read back from
 * the cache: the same figures, one line per (CPU, class). */
START_TEST(bf16_rates_are_measured_once_per_cpu_and_class)
{
    if (no_bf16()) return;
    char *d = al_test_tmpdir(), path[4200], *text;
    size_t n;
    al_err e;
    setenv("ATTNLAB_CACHE_DIR", d, 1);
    al_bf16_rates a, b;
    al_bf16_rates_of(1000, 64, 64, &a);
    ck_assert_int_eq(a.M, 1024);
    ck_assert_int_eq(a.N, 64);
    ck_assert_int_eq(a.K, 64);
    ck_assert_msg(a.bf16 > 0 && a.f32 > 0 && !a.cached, "%g %g", a.bf16, a.f32);
    al_bf16_rates_of(1024, 60, 64, &b);   /* the same class */
    ck_assert_int_eq(b.cached, 1);
    ck_assert_msg(fabs(b.bf16 - a.bf16) < 1e-3 && fabs(b.f32 - a.f32) < 1e-3, "cached differs");
    fprintf(stderr, "bf16: m 1024 n 64 k 64, one thread: bf16 %.1f, f32 %.1f GFLOP/s\n",
            a.bf16, a.f32);
    snprintf(path, sizeof path, "%s/bf16-rates", d);
    ck_assert_int_eq(al_read_file(path, &text, &n, &e), 0);
    ck_assert_msg(strchr(text, '\n') == text + n - 1, "not one line: %s", text);
    free(text);
    unsetenv("ATTNLAB_CACHE_DIR");
    free(d);
}
END_TEST

/* A bf16 run where bf16 is slower says so in one line with both rates
 * and goes on; where it is faster, nothing is said. */
START_TEST(a_bf16_run_says_when_bf16_does_not_pay)
{
    if (no_bf16()) return;
    static const struct { const char *rates; int note; } t[] = {{"50,100", 1}, {"100,100", 1},
                                                                {"200,100", 0}};
    al_bf16_rates r = {.bf16 = 80, .f32 = 160, .M = 4096, .N = 256, .K = 256};
    char note[512];
    ck_assert_int_eq(al_bf16_pays(&r), 0);
    al_bf16_note(&r, note, sizeof note);
    ck_assert_msg(strstr(note, "attnlab: bf16 products are no faster than f32 on this CPU (80.0 "
                               "against 160.0 GFLOP/s"), "%s", note);
    char *d = al_test_tmpdir(), *out, args[4400];
    char text[1201], yaml[4400];
    for (int i = 0; i < 1200; i++) text[i] = "the sea and the king. "[i % 22];
    text[1200] = 0;
    free(al_test_write(d, "data.txt", text));
    snprintf(yaml, sizeof yaml,
             "data: {source: text, path: %s/data.txt}\n"
             "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 8}\n"
             "train: {steps: 2, batch_size: 2, eval_every: 2, eval_batches: 1, threads: 1,\n"
             "        precision: bf16}\n", d);
    char *cfg = al_test_write(d, "c.yaml", yaml);
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        snprintf(args, sizeof args, "train %s --out %s/run%zu", cfg, d, i);
        setenv("AL_BF16_RATES", t[i].rates, 1);
        int rc = al_test_attnlab(args, &out);
        unsetenv("AL_BF16_RATES");
        ck_assert_msg(rc == 0, "%s: exit %d: %s", t[i].rates, rc, out);
        int has = strstr(out, "attnlab: bf16 products are no faster than f32 on this CPU") != NULL;
        ck_assert_msg(has == t[i].note, "%s: note %d: %s", t[i].rates, has, out);
        free(out);
    }
    free(cfg), free(d);
}
END_TEST

/* ------------------------------------------------------------ packing */

/* al_bf16_pack (the CPU's conversion where it has one) rounds exactly as
 * the software al_bf16_round: ties to even both ways, carries into the
 * exponent and to infinity, NaN quieted, signed zeros and infinities kept;
 * only a denormal may become a zero of its sign (the instruction). Every
 * length from 0 to 70 too, so the 32-wide loop's tail is walked. */
START_TEST(bf16_pack_should_round_as_the_software_rounding)
{
    static const uint32_t edge[] = {
        0x3f808000u, 0x3f818000u,            /* ties: down to even, up to even */
        0x3f807fffu, 0x3f808001u,            /* just below and above a tie */
        0x3fffffffu, 0x7f7fffffu,            /* carry into the exponent; to infinity */
        0x7f800000u, 0xff800000u, 0x00000000u, 0x80000000u,
        0x7fc00000u, 0x7f800001u, 0xffa00000u, /* quiet and signalling NaNs */
        0x00800000u, 0x80800000u,            /* the smallest normals */
        0x00000001u, 0x807fffffu, 0x00400000u /* denormals */
    };
    enum { NE = sizeof edge / sizeof edge[0], N = 4096 };
    float *x = al_malloc(N * sizeof *x);
    uint16_t *out = al_malloc(N * sizeof *out);
    al_rng r;
    al_rng_seed(&r, 7);
    for (int i = 0; i < N; i++)
        x[i] = i < NE ? al_test_bits_f32(edge[i])
                      : (float)(al_rng_normal(&r) * pow(10, i % 40 - 20));
    for (int n = 0; n <= N; n = n < 70 ? n + 1 : N + 1) {   /* 0 .. 70, then N */
        memset(out, 0xab, N * sizeof *out);
        al_bf16_pack(out, x, (size_t)n);
        for (int i = 0; i < n; i++) {
            uint32_t u = al_test_f32_bits(x[i]), got = out[i];
            uint32_t want = al_test_f32_bits(al_bf16_round(x[i])) >> 16;
            int denormal = (u & 0x7f800000u) == 0 && (u & 0x007fffffu) != 0;
            if (denormal && got == ((u >> 16) & 0x8000u)) continue;   /* read as zero */
            ck_assert_msg(got == want, "n %d, x[%d] = %a (%08x): %04x, want %04x", n, i, x[i], u,
                          got, want);
        }
        for (int i = n; i < N; i++) ck_assert_int_eq(out[i], 0xabab);   /* no write past n */
    }
    fprintf(stderr, "test_bf16: packing by %s\n",
            al_bf16_pack_hw() ? "vcvtne2ps2bf16" : "the software rounding");
    free(x), free(out);
}
END_TEST

Suite *bf16_suite(void)
{
    Suite *s = suite_create("bf16");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, bf16_pack_should_round_as_the_software_rounding);
    tcase_add_test(tc, bf16_products_should_be_within_bf16_bound_of_f32);
    tcase_add_test(tc, bf16_products_should_keep_sgemm_edge_cases);
    tcase_add_test(tc, many_shapes_should_each_find_their_own_primitive);
    tcase_add_test(tc, ended_threads_should_give_their_slots_back);
    tcase_add_test(tc, bf16_step_should_give_f32_loss_and_gradients_within_tolerance);
    tcase_add_test(tc, the_memo_reuses_packings_and_drops_written_ones);
    tcase_add_test(tc, the_memo_leaves_a_bf16_steps_bits_unchanged);
    tcase_add_test(tc, a_splits_shared_operand_is_packed_once_with_the_same_bits);
    tcase_add_test(tc, bf16_runs_should_repeat_bit_for_bit_at_1_and_2_threads);
    tcase_add_test(tc, bf16_resume_should_be_bit_exact_and_record_the_precision);
    tcase_add_test(tc, f32_config_should_not_write_the_precision);
    tcase_add_test(tc, sweeps_should_take_the_precision_as_an_axis_and_score_respect_it);
    tcase_add_test(tc, a_cpu_without_bf16_should_be_refused_in_one_line);
    tcase_add_test(tc, bf16_rates_are_measured_once_per_cpu_and_class);
    tcase_add_test(tc, a_bf16_run_says_when_bf16_does_not_pay);
    suite_add_tcase(s, tc);
    return s;
}
