/*
 * test_parallel.c - the worker pool: every index once, the documented cut,
 * nesting inline, thread-count changes, and kernels giving the same bits
 * run after run (and, for attention, whatever the thread count).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "al_kernels.h"
#include "al_model.h"
#include "al_optim.h"
#include "al_parallel.h"
#include "al_registry.h"
#include "al_test_model.h"
#include "al_test.h"
#include "al_util.h"

typedef struct record {
    int *hits;
    long lo[64], hi[64];
    int tid[64];
    atomic_int n;
    atomic_int nested_chunks;
} record;

static void mark(void *ctx, long lo, long hi, int tid)
{
    record *r = ctx;
    int k = atomic_fetch_add(&r->n, 1);
    ck_assert_int_lt(k, 64);
    r->lo[k] = lo, r->hi[k] = hi, r->tid[k] = tid;
    for (long i = lo; i < hi; i++) r->hits[i]++;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* The chunks run are exactly al_parallel_cut's, each on one of the pool's
 * threads (which one takes which chunk is up to the scheduler). */
static void check_cut(record *r, long n, long grain, int threads)
{
    int c = atomic_load(&r->n), want = al_parallel_chunks(n, grain);
    long units = (n + grain - 1) / grain;
    ck_assert_int_eq(want, n == 0 ? 0 : (units < threads ? (int)units : threads));
    ck_assert_int_le(c, want);   /* empty chunks are not run */
    long los[64];
    for (int i = 0; i < c; i++) los[i] = r->lo[i];
    qsort(los, c, sizeof *los, cmp_long);
    for (int i = 0, j = 0; i < want; i++) {
        long lo = al_parallel_cut(n, grain, want, i), hi = al_parallel_cut(n, grain, want, i + 1);
        ck_assert(lo % grain == 0);
        if (lo < hi) ck_assert_int_eq(los[j++], lo);
    }
    for (int i = 0; i < c; i++) ck_assert(r->tid[i] >= 0 && r->tid[i] < threads);
}

START_TEST(every_index_should_run_exactly_once_in_the_documented_cut)
{
    const long ns[] = {0, 1, 5, 100, 1000, 12345};
    const long grains[] = {1, 7, 64};
    for (int threads = 1; threads <= 4; threads++) {
        al_parallel_set_threads(threads);
        ck_assert_int_eq(al_parallel_threads(), threads);
        for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
            for (size_t g = 0; g < sizeof grains / sizeof *grains; g++) {
                record r = {.hits = calloc(ns[a] + 1, sizeof(int))};
                al_parallel_for(ns[a], grains[g], mark, &r);
                for (long i = 0; i < ns[a]; i++) ck_assert_int_eq(r.hits[i], 1);
                check_cut(&r, ns[a], grains[g], threads);
                free(r.hits);
            }
    }
    al_parallel_set_threads(1);
}
END_TEST

static void inner(void *ctx, long lo, long hi, int tid)
{
    record *r = ctx;
    atomic_fetch_add(&r->nested_chunks, 1);
    ck_assert_int_eq(al_parallel_chunks(100, 1), 1);
    (void)lo, (void)hi, (void)tid;
}

static void outer(void *ctx, long lo, long hi, int tid)
{
    al_parallel_for(100, 1, inner, ctx);
    (void)lo, (void)hi, (void)tid;
}

START_TEST(a_loop_inside_a_chunk_should_run_inline_as_one_chunk)
{
    al_parallel_set_threads(3);
    record r = {0};
    al_parallel_for(3, 1, outer, &r);
    ck_assert_int_eq(atomic_load(&r.nested_chunks), 3);
    al_parallel_set_threads(1);
}
END_TEST

static void count(void *ctx, long lo, long hi, int tid)
{
    atomic_fetch_add((atomic_long *)ctx, hi - lo);
    (void)tid;
}

START_TEST(loops_should_survive_thread_changes_and_idle_pauses)
{
    const int seq[] = {2, 4, 1, 3, 2};
    for (size_t s = 0; s < sizeof seq / sizeof *seq; s++) {
        al_parallel_set_threads(seq[s]);
        atomic_long total = 0;
        for (int i = 0; i < 2000; i++) {
            if (i % 500 == 0) usleep(2000);   /* long enough for workers to sleep */
            if (i % 300 == 7) al_parallel_rest();   /* told to sleep at once */
            al_parallel_for(10, 1, count, &total);
        }
        ck_assert_int_eq(atomic_load(&total), 20000);
    }
    al_parallel_set_threads(1);
}
END_TEST

/* A forked child has none of the parent's workers: its loops still run. */
START_TEST(a_forked_child_should_run_loops_without_the_parents_workers)
{
    al_parallel_set_threads(2);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        atomic_long total = 0;
        for (int i = 0; i < 100; i++) al_parallel_for(10, 1, count, &total);
        _exit(atomic_load(&total) == 1000 && al_parallel_threads() == 1 ? 0 : 1);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    al_parallel_set_threads(1);
}
END_TEST

START_TEST(scratch_should_be_per_thread_and_keep_its_contents)
{
    float *a = al_parallel_scratch(0, 100), *b = al_parallel_scratch(1, 100);
    ck_assert_ptr_ne(a, b);
    a[99] = 7.0f;
    ck_assert_ptr_eq(al_parallel_scratch(0, 50), a);   /* no shrink, same block */
    ck_assert_float_eq(a[99], 7.0f);
}
END_TEST

/* ---- the same bits */

static float *copy(const float *x, size_t n)
{
    float *y = al_malloc(n * sizeof *y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

static float *randn(al_rng *r, size_t n)
{
    float *x = al_malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)al_rng_normal(r);
    return x;
}

/* Attention forward and backward of one fixed problem at a thread count;
 * returns out | dq | dk | dv concatenated (malloc'ed). */
static float *attention_at(int threads, int G, size_t *len)
{
    enum { B = 3, T = 77, H = 4, D = 8 };
    al_parallel_set_threads(threads);
    al_rng r;
    al_rng_seed(&r, 5);
    size_t nq = (size_t)B * T * H * D, nk = (size_t)B * T * G * D;
    float *q = randn(&r, nq), *k = randn(&r, nk), *v = randn(&r, nk), *dout = randn(&r, nq);
    *len = 2 * nq + 2 * nk;
    float *res = al_malloc(*len * sizeof(float)), *stat = al_malloc(2 * B * H * T * sizeof(float));
    al_attn_forward(res, stat, q, k, v, B, T, H, G, D, D, 0.35f, 1);
    al_attn_backward(res + nq, res + 2 * nq, res + 2 * nq + nk, dout, stat, q, k, v, B, T, H,
                     G, D, D, 0.35f, 1);
    free(q), free(k), free(v), free(dout), free(stat);
    al_parallel_set_threads(1);
    return res;
}

START_TEST(attention_should_give_the_same_bits_at_any_thread_count)
{
    for (int G = 1; G <= 4; G *= 2) {
        size_t n;
        float *one = attention_at(1, G, &n), *two = attention_at(2, G, &n);
        float *three = attention_at(3, G, &n), *again = attention_at(2, G, &n);
        ck_assert(memcmp(one, two, n * sizeof(float)) == 0);
        ck_assert(memcmp(one, three, n * sizeof(float)) == 0);
        ck_assert(memcmp(two, again, n * sizeof(float)) == 0);
        free(one), free(two), free(three), free(again);
    }
}
END_TEST

/* A product large enough to be split: the same bits run after run. */
START_TEST(split_products_should_repeat_bit_for_bit)
{
    enum { N = 300, IC = 96, OC = 200 };
    al_rng r;
    al_rng_seed(&r, 9);
    float *x = randn(&r, N * IC), *w = randn(&r, OC * IC), *g = randn(&r, N * OC);
    float *o1 = al_malloc(N * OC * 4), *o2 = al_malloc(N * OC * 4);
    float *dw1 = calloc(OC * IC, 4), *dw2 = calloc(OC * IC, 4);
    al_parallel_set_threads(2);
    al_linear_forward(o1, x, w, N, IC, OC);
    al_linear_backward(NULL, dw1, g, x, w, N, IC, OC);
    al_linear_forward(o2, x, w, N, IC, OC);
    al_linear_backward(NULL, dw2, g, x, w, N, IC, OC);
    al_parallel_set_threads(1);
    ck_assert(memcmp(o1, o2, N * OC * 4) == 0);
    ck_assert(memcmp(dw1, dw2, OC * IC * 4) == 0);
    /* and the split product is the product: against a double dot */
    for (int i = 0; i < N; i += 37)
        for (int j = 0; j < OC; j += 13) {
            double s = 0;
            for (int c = 0; c < IC; c++) s += (double)x[i * IC + c] * w[j * IC + c];
            ck_assert_msg(fabs(o1[i * OC + j] - s) < 1e-4 * (1 + fabs(s)), "out[%d,%d]", i, j);
        }
    free(x), free(w), free(g), free(o1), free(o2), free(dw1), free(dw2);
}
END_TEST

/* Loss, gradient norm and the parameters after one clipped AdamW step of a
 * model big enough that every loop of the step is split. */
typedef struct step_out {
    double loss, norm;
    float *grads, *params;
    size_t n;
} step_out;

static step_out model_step(const char *variant, int threads)
{
    enum { B = 16, T = 40, V = 50 };
    al_parallel_set_threads(threads);
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, al_variant_find(variant), 2, 96, 4, 24, T, V), 0);
    al_model m;
    al_err e;
    ck_assert_int_eq(al_model_init(&m, &c, &e), 0);
    al_model_init_weights(&m, 3);
    ck_assert_int_eq(al_model_reserve(&m, B, T, &e), 0);
    int in[B * T], tgt[B * T];
    al_rng r;
    al_rng_seed(&r, 4);
    for (int i = 0; i < B * T; i++) in[i] = (int)al_rng_below(&r, V), tgt[i] = (int)al_rng_below(&r, V);
    al_adamw o;
    al_adamw_init(&o, m.n_params, 0.9, 0.99, 0.1);
    al_model_zero_grad(&m);
    step_out s = {.loss = al_model_forward(&m, in, tgt, NULL, B, T), .n = m.n_params};
    al_model_backward(&m);
    s.norm = al_clip_grad_norm(&m, 0.5);
    s.grads = copy(m.grads, m.n_params);
    al_adamw_step(&o, &m, 1e-2);
    s.params = copy(m.params, m.n_params);
    al_adamw_free(&o);
    al_model_free(&m);
    al_parallel_set_threads(1);
    return s;
}

START_TEST(a_training_step_should_repeat_bit_for_bit_and_agree_across_thread_counts)
{
    const char *variants[] = {"mha", "gqa", "mla"};
    for (int v = 0; v < 3; v++) {
        step_out one = model_step(variants[v], 1), two = model_step(variants[v], 2);
        step_out again = model_step(variants[v], 2), three = model_step(variants[v], 3);
        ck_assert(memcmp(&two.loss, &again.loss, sizeof two.loss) == 0);
        ck_assert(memcmp(&two.norm, &again.norm, sizeof two.norm) == 0);
        ck_assert(memcmp(two.params, again.params, two.n * sizeof(float)) == 0);
        ck_assert_msg(fabs(one.loss - three.loss) < 1e-6 * one.loss, "loss %.9g vs %.9g",
                      one.loss, three.loss);
        ck_assert_msg(fabs(one.norm - three.norm) < 1e-5 * one.norm, "norm %.9g vs %.9g",
                      one.norm, three.norm);
        /* gradients, not parameters: AdamW's first step is g / |g|, which
         * turns rounding in a near-zero gradient into a visible change */
        double dd = 0, gg = 0;
        for (size_t i = 0; i < one.n; i++) {
            double d = (double)one.grads[i] - three.grads[i];
            dd += d * d, gg += (double)one.grads[i] * one.grads[i];
        }
        ck_assert_msg(sqrt(dd / gg) < 1e-5, "%s: gradients differ by %g", variants[v],
                      sqrt(dd / gg));
        step_out *all[] = {&one, &two, &again, &three};
        for (int i = 0; i < 4; i++) free(all[i]->grads), free(all[i]->params);
    }
}
END_TEST

/* threads: 0 resolved in one place: a request stands; 0 is the node's
 * cores shared among the ranks an MPI launch put on it, at least 1. */
START_TEST(threads_zero_is_the_cores_shared_among_local_ranks)
{
    static const struct { long req, cores; int local; int want; } t[] = {
        {4, 16, 1, 4},      /* a request stands */
        {4, 16, 8, 4},      /* ... under MPI too */
        {0, 16, 1, 16},     /* every core */
        {0, 16, 4, 4},      /* four ranks on the node share them */
        {0, 16, 3, 5},      /* rounded down */
        {0, 2, 4, 1},       /* more ranks than cores: one thread each */
        {0, 1, 1, 1},
        {0, 0, 1, 1},       /* sysconf failed: still one */
        {0, -1, 1, 1},
        {0, 16, 0, 16},     /* no local size known: alone */
        {-3, 8, 1, 8},      /* a negative request reads as 0 (validation refuses it earlier) */
        {1L << 40, 8, 1, 2147483647},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int got = al_threads_resolve(t[i].req, t[i].cores, t[i].local);
        ck_assert_msg(got == t[i].want, "row %zu: %d, want %d", i, got, t[i].want);
    }
    ck_assert_int_eq(al_threads_for(3), 3);
    ck_assert_int_ge(al_threads_for(0), 1);
}
END_TEST

Suite *parallel_suite(void)
{
    Suite *s = suite_create("parallel");
    TCase *tc = tcase_create("parallel");
    tcase_add_test(tc, every_index_should_run_exactly_once_in_the_documented_cut);
    tcase_add_test(tc, a_loop_inside_a_chunk_should_run_inline_as_one_chunk);
    tcase_add_test(tc, loops_should_survive_thread_changes_and_idle_pauses);
    tcase_add_test(tc, a_forked_child_should_run_loops_without_the_parents_workers);
    tcase_add_test(tc, scratch_should_be_per_thread_and_keep_its_contents);
    tcase_add_test(tc, attention_should_give_the_same_bits_at_any_thread_count);
    tcase_add_test(tc, split_products_should_repeat_bit_for_bit);
    tcase_add_test(tc, a_training_step_should_repeat_bit_for_bit_and_agree_across_thread_counts);
    tcase_add_test(tc, threads_zero_is_the_cores_shared_among_local_ranks);
    suite_add_tcase(s, tc);
    return s;
}
