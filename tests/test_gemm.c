/*
 * test_gemm.c - products over the pool (src/base/gemm.c): every split computes
 * the product; a plan only admits splits that give the reference split's
 * bits, and that holds on data its probe never saw, under the kernels the
 * tests run with and under the CPU's own (a child without
 * OPENBLAS_CORETYPE); the plan is kept per shape and thread count.
 */
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_gemm.h"
#include "al_parallel.h"
#include "al_test.h"
#include "al_util.h"

typedef struct shape {
    CBLAS_TRANSPOSE ta, tb;
    int M, N, K;
    float alpha, beta;
} shape;

/* Awkward sizes (not multiples of any kernel's tile), every transpose the
 * model uses, beta 0 and 1, alpha 1 and not. */
static const shape shapes[] = {
    {CblasNoTrans, CblasTrans, 301, 203, 97, 1.0f, 0.0f},
    {CblasNoTrans, CblasNoTrans, 640, 96, 160, 1.0f, 0.0f},
    {CblasTrans, CblasNoTrans, 96, 130, 700, 1.0f, 1.0f},
    {CblasNoTrans, CblasTrans, 70, 900, 64, 0.5f, 1.0f},
    {CblasNoTrans, CblasNoTrans, 1024, 256, 256, 1.0f, 1.0f},
};

static float *randn(al_rng *r, size_t n)
{
    float *x = al_malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)al_rng_normal(r);
    return x;
}

typedef struct operands {
    float *A, *B, *C0, *C;
    int lda, ldb;
    size_t nc;
} operands;

static operands make(const shape *s, uint64_t seed)
{
    al_rng r;
    al_rng_seed(&r, seed);
    operands o;
    o.lda = s->ta == CblasNoTrans ? s->K : s->M;
    o.ldb = s->tb == CblasNoTrans ? s->N : s->K;
    o.nc = (size_t)s->M * s->N;
    o.A = randn(&r, (size_t)s->M * s->K);
    o.B = randn(&r, (size_t)s->K * s->N);
    o.C0 = randn(&r, o.nc);
    o.C = al_malloc(o.nc * sizeof(float));
    return o;
}

static void release(operands *o) { free(o->A), free(o->B), free(o->C0), free(o->C); }

/* C = the split's product from C0. */
static const float *run(const shape *s, operands *o, int split)
{
    memcpy(o->C, o->C0, o->nc * sizeof(float));
    if (split < 0)
        al_sgemm_pool(s->ta, s->tb, s->M, s->N, s->K, s->alpha, o->A, o->lda, o->B, o->ldb,
                      s->beta, o->C, s->N);
    else
        al_sgemm_split(split, s->ta, s->tb, s->M, s->N, s->K, s->alpha, o->A, o->lda, o->B,
                       o->ldb, s->beta, o->C, s->N);
    return o->C;
}

/* Element (i, j) of alpha op(A) op(B) + beta C0, in double. */
static double exact(const shape *s, const operands *o, int i, int j)
{
    double acc = 0;
    for (int k = 0; k < s->K; k++) {
        double a = s->ta == CblasNoTrans ? o->A[(size_t)i * o->lda + k] : o->A[(size_t)k * o->lda + i];
        double b = s->tb == CblasNoTrans ? o->B[(size_t)k * o->ldb + j] : o->B[(size_t)j * o->ldb + k];
        acc += a * b;
    }
    return s->alpha * acc + s->beta * o->C0[(size_t)i * s->N + j];
}

START_TEST(every_split_should_compute_the_product)
{
    for (int threads = 2; threads <= 4; threads += 2) {
        al_parallel_set_threads(threads);
        for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
            const shape *s = &shapes[i];
            operands o = make(s, 3 + i);
            for (int split = -1; split < AL_NSPLITS; split++) {
                const float *C = run(s, &o, split);
                for (int r = 0; r < s->M; r += 17)
                    for (int c = 0; c < s->N; c += 13) {
                        double want = exact(s, &o, r, c), got = C[(size_t)r * s->N + c];
                        ck_assert_msg(fabs(got - want) < 1e-4 * (1 + fabs(want)),
                                      "shape %zu split %d threads %d: C[%d,%d] %g, want %g", i,
                                      split, threads, r, c, got, want);
                    }
            }
            release(&o);
        }
    }
    al_parallel_set_threads(1);
}
END_TEST

/* Plans stop OpenBLAS's threads after measuring them (al_blas_threads_stop);
 * its next threaded call must start them again and give the same product. */
START_TEST(openblas_threads_should_compute_again_after_a_stop)
{
    al_parallel_set_threads(2);
    const shape *s = &shapes[4];
    operands o = make(s, 11);
    float *first = al_malloc(o.nc * sizeof(float));
    memcpy(first, run(s, &o, AL_SPLIT_BLAS), o.nc * sizeof(float));
    for (int i = 0; i < 3; i++) {
        int rc = al_blas_threads_stop();
        ck_assert_int_le(rc, 0);
        const float *C = run(s, &o, AL_SPLIT_BLAS);
        ck_assert_msg(memcmp(C, first, o.nc * sizeof(float)) == 0,
                      "OpenBLAS's threads gave other bits after stop %d (rc %d)", i, rc);
    }
    for (int r = 0; r < s->M; r += 37)
        for (int c = 0; c < s->N; c += 11) {
            double want = exact(s, &o, r, c);
            ck_assert(fabs(first[(size_t)r * s->N + c] - want) < 1e-4 * (1 + fabs(want)));
        }
    free(first);
    release(&o);
    al_parallel_set_threads(1);
}
END_TEST

/* The plan's promise: whatever it chose, the bits are the reference
 * split's, on data other than its probe, and the pool's product is that. */
START_TEST(admitted_splits_should_give_the_reference_bits_on_fresh_data)
{
    for (int threads = 2; threads <= 4; threads += 2) {
        al_parallel_set_threads(threads);
        for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
            const shape *s = &shapes[i];
            al_gemm_plan p;
            ck_assert_int_eq(al_gemm_plan_get(s->ta, s->tb, s->M, s->N, s->K, s->alpha, s->beta,
                                              &p), 0);
            ck_assert(p.admitted & (1u << p.reference));
            ck_assert(p.admitted & (1u << p.split));
            ck_assert(p.seconds[p.split] > 0);
            operands o = make(s, 100 + i);
            float *ref = al_malloc(o.nc * sizeof(float));
            memcpy(ref, run(s, &o, p.reference), o.nc * sizeof(float));
            for (int split = 0; split < AL_NSPLITS; split++)
                if (p.admitted & (1u << split))
                    ck_assert_msg(!memcmp(run(s, &o, split), ref, o.nc * sizeof(float)),
                                  "shape %zu: split %s was admitted but differs", i,
                                  al_split_name(split));
            ck_assert(!memcmp(run(s, &o, -1), ref, o.nc * sizeof(float)));
            free(ref);
            release(&o);
        }
    }
    al_parallel_set_threads(1);
}
END_TEST

START_TEST(plans_should_be_kept_per_shape_and_thread_count)
{
    const shape *s = &shapes[1];
    al_gemm_plan a, b;
    al_parallel_set_threads(1);
    ck_assert_int_eq(al_gemm_plan_get(s->ta, s->tb, s->M, s->N, s->K, 1, 0, &a), -1);
    al_parallel_set_threads(2);
    ck_assert_int_eq(al_gemm_plan_get(s->ta, s->tb, s->M, s->N, s->K, 1, 0, &a), 0);
    ck_assert_int_eq(al_gemm_plan_get(s->ta, s->tb, s->M, s->N, s->K, 1, 0, &b), 0);
    ck_assert(!memcmp(&a, &b, sizeof a));   /* measured once, then kept */
    ck_assert(a.tried & (1u << AL_SPLIT_BLAS));
    ck_assert(!(a.tried & (1u << AL_SPLIT_GRID)));   /* no 2-D grid of 2 threads */
    al_parallel_set_threads(4);
    ck_assert_int_eq(al_gemm_plan_get(s->ta, s->tb, s->M, s->N, s->K, 1, 0, &b), 0);
    ck_assert(b.tried & (1u << AL_SPLIT_GRID));
    /* too small to split */
    ck_assert_int_eq(al_gemm_plan_get(CblasNoTrans, CblasTrans, 64, 64, 64, 1, 0, &b), -1);
    al_parallel_set_threads(1);
}
END_TEST

/* The same check through attnlab-bench, on the products of the tiny
 * model, with the kernels the tests use and with the CPU's own. */
static void splits_verified(const char *env)
{
    char *dup = strdup(al_test_binary()), cmd[8192], *out;
    snprintf(cmd, sizeof cmd, "%s %s/attnlab-bench splits --shape tiny --threads 2", env,
             dirname(dup));
    int rc = al_test_run(cmd, &out);
    ck_assert_msg(rc == 0, "%s: %d\n%s", cmd, rc, out);
    int lines = 0;
    for (const char *l = strstr(out, "splits "); l; l = strstr(l + 1, "splits ")) {
        lines++;
        const char *end = strchr(l, '\n');
        const char *v = strstr(l, "verified=1");
        ck_assert_msg(v && (!end || v < end), "not verified: %.*s", (int)(end ? end - l : 80), l);
    }
    ck_assert_int_eq(lines, 12);   /* 4 weight shapes x 3 products */
    free(out), free(dup);
}

START_TEST(the_model_products_should_verify_under_both_kernel_choices)
{
    splits_verified("");
    splits_verified("env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE");
}
END_TEST

Suite *gemm_suite(void)
{
    Suite *s = suite_create("gemm");
    TCase *tc = tcase_create("gemm");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, every_split_should_compute_the_product);
    tcase_add_test(tc, admitted_splits_should_give_the_reference_bits_on_fresh_data);
    tcase_add_test(tc, plans_should_be_kept_per_shape_and_thread_count);
    tcase_add_test(tc, openblas_threads_should_compute_again_after_a_stop);
    tcase_add_test(tc, the_model_products_should_verify_under_both_kernel_choices);
    suite_add_tcase(s, tc);
    return s;
}
