/*
 * test_kernels.c - the shared kernels against naive double-precision
 * references and central finite differences.
 */
#include <math.h>
#include <string.h>

#include "al_test.h"
#include "al_kernels.h"
#include "al_parallel.h"
#include "al_util.h"

/* -------------------------------------------------------------- helpers */

static float *randn(al_rng *r, size_t n, double sd)
{
    float *x = al_malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(sd * al_rng_normal(r));
    return x;
}

static float *filled(size_t n, float value)
{
    float *x = al_malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = value;
    return x;
}

static float *copy_of(const float *x, size_t n)
{
    float *y = al_malloc(n * sizeof *y);
    memcpy(y, x, n * sizeof *y);
    return y;
}

static double dot_d(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

static int near(double got, double want, double abs_tol, double rel_tol)
{
    return fabs(got - want) <= abs_tol + rel_tol * fabs(want);
}

static void assert_close(const float *got, const double *want, size_t n,
                         double abs_tol, double rel_tol, const char *what)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(near(got[i], want[i], abs_tol, rel_tol),
                      "%s[%zu]: got %.8g, want %.8g", what, i, got[i], want[i]);
}

typedef double (*loss_fn)(void *ctx);

/* Central differences of f with respect to p[i] against grad[i]: every
 * element when there are few, else 48 sampled ones. The slope divides by
 * the step float actually took, so rounding p +- eps does not bias it. */
static void check_grad(float *p, const float *grad, size_t n, loss_fn f,
                       void *ctx, const char *what)
{
    al_rng r;
    al_rng_seed(&r, 99);
    size_t count = n <= 512 ? n : 48;
    for (size_t s = 0; s < count; s++) {
        size_t i = n <= 512 ? s : (size_t)al_rng_below(&r, n);
        float orig = p[i];
        p[i] = orig + 1e-3f;
        double up = p[i], lp = f(ctx);
        p[i] = orig - 1e-3f;
        double dn = p[i], lm = f(ctx);
        p[i] = orig;
        double fd = (lp - lm) / (up - dn);
        ck_assert_msg(near(grad[i], fd, 1e-3, 1e-2),
                      "%s[%zu]: analytic %.7g, numeric %.7g", what, i, grad[i], fd);
    }
}

/* --------------------------------------------------------- linear, GEMM */

typedef struct lin_ctx {
    float *out, *inp, *w, *R;
    int N, IC, OC;
} lin_ctx;

static double lin_loss(void *p)
{
    lin_ctx *c = p;
    al_linear_forward(c->out, c->inp, c->w, c->N, c->IC, c->OC);
    return dot_d(c->out, c->R, (size_t)c->N * c->OC);
}

START_TEST(linear_forward_should_match_naive_double)
{
    al_rng r;
    al_rng_seed(&r, 1);
    int N = 7, IC = 13, OC = 5;
    float *inp = randn(&r, N * IC, 1.0), *w = randn(&r, OC * IC, 0.5);
    float *out = filled(N * OC, NAN);   /* forward must overwrite */
    double want[7 * 5];
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = 0.0;
            for (int i = 0; i < IC; i++) s += (double)inp[n * IC + i] * w[o * IC + i];
            want[n * OC + o] = s;
        }
    al_linear_forward(out, inp, w, N, IC, OC);
    assert_close(out, want, N * OC, 1e-5, 1e-5, "out");
    free(inp); free(w); free(out);
}
END_TEST

START_TEST(linear_backward_should_accumulate_finite_difference_gradients)
{
    al_rng r;
    al_rng_seed(&r, 2);
    int N = 3, IC = 5, OC = 4;
    lin_ctx c = {filled(N * OC, 0), randn(&r, N * IC, 1), randn(&r, OC * IC, 1),
                 randn(&r, N * OC, 1), N, IC, OC};
    float *dinp = filled(N * IC, 0.25f), *dw = filled(OC * IC, -0.5f);
    /* Two calls, each skipping one product through NULL. */
    al_linear_backward(dinp, NULL, c.R, c.inp, c.w, N, IC, OC);
    al_linear_backward(NULL, dw, c.R, c.inp, c.w, N, IC, OC);
    for (int i = 0; i < N * IC; i++) dinp[i] -= 0.25f;
    for (int i = 0; i < OC * IC; i++) dw[i] += 0.5f;
    check_grad(c.inp, dinp, N * IC, lin_loss, &c, "dinp");
    check_grad(c.w, dw, OC * IC, lin_loss, &c, "dw");
    free(c.out); free(c.inp); free(c.w); free(c.R); free(dinp); free(dw);
}
END_TEST

/* C = alpha op(A) op(B) + beta C with padded leading dimensions; the
 * padding columns of C must stay untouched. */
static void check_gemm(int ta, int tb, al_rng *r)
{
    enum { M = 3, N = 4, K = 5, LDA = 8, LDB = 7, LDC = 6 };
    float *A = randn(r, 8 * 8, 1), *B = randn(r, 8 * 8, 1), *C = randn(r, M * LDC, 1);
    for (int i = 0; i < M; i++)
        for (int j = N; j < LDC; j++) C[i * LDC + j] = 777.0f;
    double want[M * N];
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0;
            for (int k = 0; k < K; k++)
                s += (double)(ta ? A[k * LDA + i] : A[i * LDA + k]) *
                     (tb ? B[j * LDB + k] : B[k * LDB + j]);
            want[i * N + j] = 2.0 * s + 0.5 * C[i * LDC + j];
        }
    if (tb) al_gemm_nt(C, LDC, A, LDA, B, LDB, M, N, K, 2.0f, 0.5f);
    else if (ta) al_gemm_tn(C, LDC, A, LDA, B, LDB, M, N, K, 2.0f, 0.5f);
    else al_gemm_nn(C, LDC, A, LDA, B, LDB, M, N, K, 2.0f, 0.5f);
    for (int i = 0; i < M; i++) {
        assert_close(C + i * LDC, want + i * N, N, 1e-5, 1e-5, "C");
        for (int j = N; j < LDC; j++) ck_assert_float_eq(C[i * LDC + j], 777.0f);
    }
    free(A); free(B); free(C);
}

START_TEST(strided_gemm_helpers_should_match_naive)
{
    al_rng r;
    al_rng_seed(&r, 3);
    check_gemm(0, 1, &r);   /* nt */
    check_gemm(0, 0, &r);   /* nn */
    check_gemm(1, 0, &r);   /* tn */
}
END_TEST

START_TEST(gemm_with_empty_inner_dimension_should_only_scale_c)
{
    float A[1] = {0}, B[2] = {0}, C[4] = {1, 2, 3, 4}, D[4] = {NAN, NAN, NAN, NAN};
    double half[4] = {0.5, 1, 1.5, 2}, zero[4] = {0};
    al_gemm_nn(C, 2, A, 1, B, 2, 2, 2, 0, 1.0f, 0.5f);
    assert_close(C, half, 4, 0, 0, "C");
    al_gemm_nt(D, 2, A, 1, B, 1, 2, 2, 0, 1.0f, 0.0f);   /* beta 0 clears NaN */
    assert_close(D, zero, 4, 0, 0, "D");
}
END_TEST

/* ------------------------------------------------------------- RMSNorm */

START_TEST(rmsnorm_forward_should_match_naive_double)
{
    al_rng r;
    al_rng_seed(&r, 4);
    enum { N = 4, C = 16 };
    float eps = 1e-5f;
    float *x = randn(&r, N * C, 3), *w = randn(&r, C, 1), *ones = filled(C, 1);
    float *out = filled(N * C, NAN), *out2 = filled(N * C, NAN), rstd[N];
    double want[N * C];
    al_rmsnorm_forward(out, rstd, x, w, N, C, eps);
    al_rmsnorm_forward(out2, NULL, x, ones, N, C, eps);
    for (int n = 0; n < N; n++) {
        double ss = 0.0, ms2 = 0.0;
        for (int c = 0; c < C; c++) ss += (double)x[n * C + c] * x[n * C + c];
        double rs = 1.0 / sqrt(ss / C + eps);
        ck_assert_msg(near(rstd[n], rs, 0, 1e-6), "rstd[%d] %g vs %g", n, rstd[n], rs);
        for (int c = 0; c < C; c++) {
            want[n * C + c] = x[n * C + c] * rs * w[c];
            ms2 += (double)out2[n * C + c] * out2[n * C + c];
        }
        /* With unit weights each row comes out with unit RMS. */
        ck_assert_msg(near(ms2 / C, 1.0, 1e-4, 0), "row %d mean square %g", n, ms2 / C);
    }
    assert_close(out, want, N * C, 1e-6, 1e-5, "out");
    free(x); free(w); free(ones); free(out); free(out2);
}
END_TEST

typedef struct rms_ctx {
    float *out, *rstd, *x, *w, *R;
    int N, C;
} rms_ctx;

static double rms_loss(void *p)
{
    rms_ctx *c = p;
    al_rmsnorm_forward(c->out, c->rstd, c->x, c->w, c->N, c->C, 1e-5f);
    return dot_d(c->out, c->R, (size_t)c->N * c->C);
}

START_TEST(rmsnorm_backward_should_match_finite_differences)
{
    al_rng r;
    al_rng_seed(&r, 5);
    enum { N = 3, C = 8 };
    float rstd[N];
    rms_ctx c = {filled(N * C, 0), rstd, randn(&r, N * C, 1), randn(&r, C, 1),
                 randn(&r, N * C, 1), N, C};
    float *dx = filled(N * C, 0), *dx2 = filled(N * C, 0), *dw = filled(C, 0);
    rms_loss(&c);   /* fills rstd */
    al_rmsnorm_backward(dx, dw, c.R, c.x, c.w, rstd, N, C);
    al_rmsnorm_backward(dx2, NULL, c.R, c.x, c.w, rstd, N, C);
    ck_assert_mem_eq(dx, dx2, sizeof(float) * N * C);   /* NULL dw: same dx */
    check_grad(c.x, dx, N * C, rms_loss, &c, "dx");
    check_grad(c.w, dw, C, rms_loss, &c, "dw");
    free(c.out); free(c.x); free(c.w); free(c.R); free(dx); free(dx2); free(dw);
}
END_TEST

/* Beta 0 writes what accumulating into zeros gives, bit for bit, over
 * whatever the output held (NaN here); beta 1 adds. Sizes large enough
 * that the products go to the pool's split at 2 threads. */
START_TEST(backward_beta_zero_should_write_what_accumulating_into_zero_gives)
{
    enum { N = 300, IC = 96, OC = 160 };
    al_rng r;
    al_rng_seed(&r, 21);
    float *inp = randn(&r, N * IC, 1), *w = randn(&r, OC * IC, 1), *g = randn(&r, N * OC, 1);
    float rstd[N], *x = randn(&r, N * IC, 1), *nw = randn(&r, IC, 1), *h = filled(N * IC, 0);
    al_rmsnorm_forward(h, rstd, x, nw, N, IC, 1e-5f);
    for (int threads = 1; threads <= 2; threads++) {
        al_parallel_set_threads(threads);
        float *di0 = filled(N * IC, 0), *dw0 = filled(OC * IC, 0);
        float *di = filled(N * IC, NAN), *dw = filled(OC * IC, NAN);
        al_linear_backward(di0, dw0, g, inp, w, N, IC, OC);
        al_linear_backward_beta(di, dw, g, inp, w, N, IC, OC, 0.0f, 0.0f);
        ck_assert_mem_eq(di, di0, sizeof(float) * N * IC);
        ck_assert_mem_eq(dw, dw0, sizeof(float) * OC * IC);
        al_linear_backward_beta(di, dw, g, inp, w, N, IC, OC, 1.0f, 1.0f);   /* twice */
        for (int i = 0; i < N * IC; i++) ck_assert_float_eq_tol(di[i], 2 * di0[i], 1e-4);
        float *dx0 = filled(N * IC, 0), *dn0 = filled(IC, 0), *dx = filled(N * IC, NAN);
        float *dn = filled(IC, NAN);
        al_rmsnorm_backward(dx0, dn0, inp, x, nw, rstd, N, IC);
        al_rmsnorm_backward_beta(dx, dn, inp, x, nw, rstd, N, IC, 0.0f, 0.0f);
        ck_assert_mem_eq(dx, dx0, sizeof(float) * N * IC);
        ck_assert_mem_eq(dn, dn0, sizeof(float) * IC);
        al_rmsnorm_backward_beta(dx, dn, inp, x, nw, rstd, N, IC, 1.0f, 0.0f);   /* dx adds */
        for (int i = 0; i < N * IC; i++) ck_assert_float_eq_tol(dx[i], 2 * dx0[i], 1e-5);
        ck_assert_mem_eq(dn, dn0, sizeof(float) * IC);   /* dw written again */
        free(di0), free(dw0), free(di), free(dw), free(dx0), free(dn0), free(dx), free(dn);
    }
    al_parallel_set_threads(1);
    free(inp), free(w), free(g), free(x), free(nw), free(h);
}
END_TEST

/* The fused residual add and norm: the bits of the two passes. */
START_TEST(residual_rmsnorm_should_equal_the_add_then_the_norm)
{
    enum { N = 200, C = 72 };
    al_rng r;
    al_rng_seed(&r, 22);
    float *x = randn(&r, N * C, 1), *res = randn(&r, N * C, 1), *w = randn(&r, C, 1);
    float *sum = filled(N * C, 0), *out = filled(N * C, 0), *sum2 = filled(N * C, 0);
    float *out2 = filled(N * C, 0), rstd[N], rstd2[N];
    al_parallel_set_threads(2);
    al_residual_rmsnorm_forward(sum, out, rstd, x, res, w, N, C, 1e-5f);
    for (int i = 0; i < N * C; i++) sum2[i] = x[i] + res[i];
    al_rmsnorm_forward(out2, rstd2, sum2, w, N, C, 1e-5f);
    al_parallel_set_threads(1);
    ck_assert_mem_eq(sum, sum2, sizeof(float) * N * C);
    ck_assert_mem_eq(out, out2, sizeof(float) * N * C);
    ck_assert_mem_eq(rstd, rstd2, sizeof(float) * N);
    free(x), free(res), free(w), free(sum), free(out), free(sum2), free(out2);
}
END_TEST

/* ---------------------------------------------------------------- GELU */

static double gelu_ref(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

START_TEST(gelu_forward_should_match_tanh_closed_form)
{
    /* Values of 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in Python. */
    float x[4] = {0.0f, 1.0f, -1.0f, 2.5f}, out[4];
    double hand[4] = {0.0, 0.8411919906082768, -0.15880800939172324,
                      2.484915733910001};
    al_gelu_forward(out, x, 4);
    assert_close(out, hand, 4, 1e-7, 1e-6, "gelu(hand)");

    enum { n = 1001 };
    float *xs = al_malloc(n * sizeof *xs), *ys = al_malloc(n * sizeof *ys);
    double want[n];
    for (int i = 0; i < n; i++) {
        xs[i] = -8.0f + 16.0f * i / (n - 1);
        want[i] = gelu_ref(xs[i]);
    }
    al_gelu_forward(ys, xs, n);
    assert_close(ys, want, n, 1e-6, 1e-5, "gelu");
    free(xs); free(ys);
}
END_TEST

typedef struct gelu_ctx {
    float *out, *x, *R;
    size_t n;
} gelu_ctx;

static double gelu_loss(void *p)
{
    gelu_ctx *c = p;
    al_gelu_forward(c->out, c->x, c->n);
    return dot_d(c->out, c->R, c->n);
}

START_TEST(gelu_backward_should_accumulate_finite_difference_gradient)
{
    al_rng r;
    al_rng_seed(&r, 6);
    enum { n = 200 };
    gelu_ctx c = {filled(n, 0), randn(&r, n, 2), randn(&r, n, 1), n};
    float *dx = filled(n, 1.0f);
    al_gelu_backward(dx, c.R, c.x, n);
    for (int i = 0; i < n; i++) dx[i] -= 1.0f;
    check_grad(c.x, dx, n, gelu_loss, &c, "dx");
    free(c.out); free(c.x); free(c.R); free(dx);
}
END_TEST

/* ---------------------------------------------------------------- RoPE */

START_TEST(rope_should_match_hand_computed_rotation)
{
    /* dim 4, base 10000: pair (0, 2) turns by 1 rad at position 1, pair
     * (1, 3) by 10000^(-1/2) = 0.01 rad. Position 0 is the identity. */
    float x[8] = {1, 2, 3, 4, 1, 2, 3, 4};
    double want[8] = {1, 2, 3, 4, -1.9841106485555495, 1.959900667496664,
                      2.4623779024123156, 4.019799668334994};
    al_rope_forward(x, 1, 2, 1, 4, 4, 0, 10000.0f);
    assert_close(x, want, 8, 1e-6, 1e-6, "rope");
}
END_TEST

START_TEST(rope_should_preserve_pair_norms_and_padding)
{
    al_rng r;
    al_rng_seed(&r, 7);
    enum { B = 2, T = 5, NH = 3, D = 8, RS = NH * D + 3, N = B * T * RS };
    float *x = randn(&r, N, 1), *x0 = copy_of(x, N);
    al_rope_forward(x, B, T, NH, D, RS, 11, 500.0f);
    for (int row = 0; row < B * T; row++) {
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < D / 2; i++) {
                const float *a = x + row * RS + h * D + i, *b = x0 + row * RS + h * D + i;
                double n1 = (double)a[0] * a[0] + (double)a[D / 2] * a[D / 2];
                double n0 = (double)b[0] * b[0] + (double)b[D / 2] * b[D / 2];
                ck_assert_msg(near(n1, n0, 1e-6, 1e-5), "pair norm %g vs %g", n1, n0);
            }
        for (int j = NH * D; j < RS; j++)   /* outside the heads: untouched */
            ck_assert_float_eq(x[row * RS + j], x0[row * RS + j]);
    }
    ck_assert_msg(memcmp(x, x0, sizeof(float) * N) != 0, "rope changed nothing");
    free(x); free(x0);
}
END_TEST

/* The strided form rotates the first dim elements of heads W apart: the
 * same bits as rotating each head alone with the plain form (one head of
 * width dim at x + h*W), the rest of each head untouched, and backward
 * inverts it. */
START_TEST(rope_strided_rotates_part_of_each_head)
{
    al_rng r;
    al_rng_seed(&r, 9);
    enum { B = 2, T = 6, NH = 3, DIM = 4, W = 10, RS = NH * W + 1, N = B * T * RS };
    float *x = randn(&r, N, 1), *x0 = copy_of(x, N), *y = copy_of(x, N);
    al_rope_forward_strided(x, B, T, NH, DIM, W, RS, 3, 10000.0f);
    for (int h = 0; h < NH; h++) al_rope_forward(y + h * W, B, T, 1, DIM, RS, 3, 10000.0f);
    ck_assert_msg(memcmp(x, y, sizeof(float) * N) == 0, "strided differs from per-head");
    ck_assert_msg(memcmp(x, x0, sizeof(float) * N) != 0, "nothing rotated");
    for (int row = 0; row < B * T; row++)
        for (int j = 0; j < RS; j++)
            if (j >= NH * W || j % W >= DIM) ck_assert_float_eq(x[row * RS + j], x0[row * RS + j]);
    al_rope_backward_strided(x, B, T, NH, DIM, W, RS, 3, 10000.0f);
    for (int i = 0; i < N; i++) ck_assert_msg(fabsf(x[i] - x0[i]) < 1e-5f, "%d", i);
    free(x), free(x0), free(y);
}
END_TEST

START_TEST(rope_backward_should_invert_forward)
{
    al_rng r;
    al_rng_seed(&r, 8);
    enum { B = 2, T = 7, NH = 2, D = 6, RS = 2 * NH * D, N = B * T * RS };
    float *x = randn(&r, N, 1), *x0 = copy_of(x, N);
    double want[N];
    for (int i = 0; i < N; i++) want[i] = x0[i];
    al_rope_forward(x, B, T, NH, D, RS, 3, 10000.0f);
    al_rope_backward(x, B, T, NH, D, RS, 3, 10000.0f);
    assert_close(x, want, N, 1e-6, 1e-6, "x");
    free(x); free(x0);
}
END_TEST

START_TEST(rope_with_pos0_should_match_later_rows)
{
    /* Decoding one token at position 3 must equal row 3 of a full pass. */
    al_rng r;
    al_rng_seed(&r, 9);
    enum { T = 4, NH = 2, D = 8, C = NH * D };
    float *full = randn(&r, T * C, 1), *one = copy_of(full + 3 * C, C);
    al_rope_forward(full, 1, T, NH, D, C, 0, 10000.0f);
    al_rope_forward(one, 1, 1, NH, D, C, 3, 10000.0f);
    ck_assert_mem_eq(one, full + 3 * C, sizeof(float) * C);
    free(full); free(one);
}
END_TEST

typedef struct rope_ctx {
    float *tmp, *x, *R;
    int B, T, NH, D, RS;
} rope_ctx;

static double rope_loss(void *p)
{
    rope_ctx *c = p;
    size_t n = (size_t)c->B * c->T * c->RS;
    memcpy(c->tmp, c->x, n * sizeof *c->tmp);
    al_rope_forward(c->tmp, c->B, c->T, c->NH, c->D, c->RS, 2, 100.0f);
    return dot_d(c->tmp, c->R, n);
}

START_TEST(rope_backward_should_match_finite_differences)
{
    al_rng r;
    al_rng_seed(&r, 10);
    enum { B = 2, T = 3, NH = 2, D = 4, RS = NH * D + 1, N = B * T * RS };
    rope_ctx c = {filled(N, 0), randn(&r, N, 1), randn(&r, N, 1), B, T, NH, D, RS};
    float *dx = copy_of(c.R, N);
    al_rope_backward(dx, B, T, NH, D, RS, 2, 100.0f);
    check_grad(c.x, dx, N, rope_loss, &c, "dx");
    free(c.tmp); free(c.x); free(c.R); free(dx);
}
END_TEST

/* ------------------------------------------------------------- softmax */

START_TEST(softmax_row_should_sum_to_one_without_overflow)
{
    float a[5] = {1000.0f, 1001.0f, -INFINITY, 999.0f, 1001.0f};
    al_softmax_row(a, 5);
    double e1 = exp(-1.0), e2 = exp(-2.0), z = 2.0 + e1 + e2;
    double want[5] = {e1 / z, 1.0 / z, 0.0, e2 / z, 1.0 / z};
    assert_close(a, want, 5, 1e-7, 1e-6, "p");
    ck_assert_float_eq(a[2], 0.0f);

    al_rng r;
    al_rng_seed(&r, 11);
    float *x = randn(&r, 37, 4);
    al_softmax_row(x, 37);
    double s = 0.0;
    for (int i = 0; i < 37; i++) {
        ck_assert(x[i] >= 0.0f);
        s += x[i];
    }
    ck_assert_msg(near(s, 1.0, 1e-6, 0), "sum %.9g", s);
    free(x);
}
END_TEST

/* exp(a x + c) against libm's exp in double, over decays as a gated layer
 * meets them (c - x down to -100: underflow gives 0), in place and not. */
START_TEST(exp_affine_should_match_libm_and_underflow_to_zero)
{
    enum { N = 203 };
    float x[N], y[N], z[N];
    for (int j = 0; j < N; j++) x[j] = 0.5f * (float)j + 0.013f * (float)(j % 7);
    al_exp_affine(y, x, 0.5f, -3.0f, N);
    al_exp_affine(x, x, -1.0f, 0.25f, N);   /* in place */
    for (int j = 0; j < N; j++) {
        float xj = 0.5f * (float)j + 0.013f * (float)(j % 7);
        double want = exp((double)(0.5f * xj - 3.0f)), want2 = exp((double)(0.25f - xj));
        ck_assert_msg(fabs(y[j] - want) <= 4e-7 * want, "y[%d] %.9g want %.9g", j, y[j], want);
        if (0.25 - (double)xj < -87.3)
            ck_assert_msg(x[j] == 0.0f, "x[%d] %.9g should underflow to 0", j, x[j]);
        else
            ck_assert_msg(fabs(x[j] - want2) <= 4e-7 * want2, "x[%d] %.9g want %.9g", j, x[j],
                          want2);
    }
    float big = 90.0f;
    al_exp_affine(z, &big, 1.0f, 0.0f, 1);
    ck_assert(isfinite(z[0]) && z[0] > 1e38f);   /* clamped, not inf */
}
END_TEST

START_TEST(sigmoid_should_match_libm_in_place_and_saturate)
{
    enum { N = 161 };
    float x[N], y[N];
    for (int j = 0; j < N; j++) x[j] = -100.0f + 1.25f * (float)j;
    al_sigmoid(y, x, N);
    al_sigmoid(x, x, N);
    for (int j = 0; j < N; j++) {
        double xj = -100.0 + 1.25 * j, want = 1.0 / (1.0 + exp(-xj));
        ck_assert_msg(fabs(y[j] - want) <= 4e-7 * want + 1e-30, "y[%d] %.9g want %.9g", j,
                      y[j], want);
        ck_assert_msg(x[j] == y[j], "in place x[%d] %.9g, not %.9g", j, x[j], y[j]);
    }
    ck_assert(y[N - 1] == 1.0f && y[0] > 0.0f && y[0] < 1e-37f);
}
END_TEST

/* ----------------------------------------------------------- attention */

typedef struct sdpa_cfg {
    int B, T, H, G, dqk, dv, causal;
} sdpa_cfg;

/* Operands and gradients for one configuration, all (B, T, heads * dim). */
typedef struct sdpa_bufs {
    sdpa_cfg c;
    float *q, *k, *v, *out, *att, *R, *dq, *dk, *dv, *scratch;
    double *ref;   /* (B, T, H * dv) double-precision output */
} sdpa_bufs;

static size_t nq(const sdpa_cfg *c) { return (size_t)c->B * c->T * c->H * c->dqk; }
static size_t nk(const sdpa_cfg *c) { return (size_t)c->B * c->T * c->G * c->dqk; }
static size_t nv(const sdpa_cfg *c) { return (size_t)c->B * c->T * c->G * c->dv; }
static size_t no(const sdpa_cfg *c) { return (size_t)c->B * c->T * c->H * c->dv; }
static float scale_of(const sdpa_cfg *c) { return 1.0f / sqrtf((float)c->dqk); }

static sdpa_bufs sdpa_make(sdpa_cfg c, al_rng *r)
{
    sdpa_bufs s = {.c = c};
    s.q = randn(r, nq(&c), 1); s.k = randn(r, nk(&c), 1); s.v = randn(r, nv(&c), 1);
    s.R = randn(r, no(&c), 1);
    s.out = filled(no(&c), NAN);
    s.att = filled((size_t)c.B * c.H * c.T * c.T, NAN);
    s.dq = filled(nq(&c), 1.0f); s.dk = filled(nk(&c), 1.0f); s.dv = filled(nv(&c), 1.0f);
    s.scratch = filled((size_t)c.T * c.T, NAN);
    s.ref = al_malloc(no(&c) * sizeof *s.ref);
    return s;
}

static void sdpa_free(sdpa_bufs *s)
{
    free(s->q); free(s->k); free(s->v); free(s->R); free(s->out); free(s->att);
    free(s->dq); free(s->dk); free(s->dv); free(s->scratch); free(s->ref);
}

/* Naive attention in double, one query row at a time. */
static void ref_sdpa(double *out, const float *q, const float *k, const float *v,
                     const sdpa_cfg *c)
{
    int T = c->T, H = c->H, G = c->G, dqk = c->dqk, dv = c->dv;
    double scale = scale_of(c), p[128];
    AL_ASSERT(T <= 128);
    for (int b = 0; b < c->B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                int g = h / (H / G), n = c->causal ? i + 1 : T;
                const float *qi = q + ((size_t)(b * T + i) * H + h) * dqk;
                double mx = -INFINITY, z = 0.0;
                for (int j = 0; j < n; j++) {
                    const float *kj = k + ((size_t)(b * T + j) * G + g) * dqk;
                    p[j] = scale * dot_d(qi, kj, dqk);
                    mx = fmax(mx, p[j]);
                }
                for (int j = 0; j < n; j++) z += p[j] = exp(p[j] - mx);
                double *o = out + ((size_t)(b * T + i) * H + h) * dv;
                for (int e = 0; e < dv; e++) {
                    double s = 0.0;
                    for (int j = 0; j < n; j++)
                        s += p[j] * v[((size_t)(b * T + j) * G + g) * dv + e];
                    o[e] = s / z;
                }
            }
}

static void sdpa_fwd(sdpa_bufs *s)
{
    const sdpa_cfg *c = &s->c;
    al_sdpa_forward(s->out, s->att, s->q, s->k, s->v, c->B, c->T, c->H, c->G,
                    c->dqk, c->dv, scale_of(c), c->causal);
}

static const sdpa_cfg sdpa_cases[] = {
    {2, 5, 4, 4, 8, 6, 0}, {2, 5, 4, 4, 8, 6, 1}, {2, 5, 4, 1, 8, 6, 0},
    {2, 5, 4, 1, 8, 6, 1}, {2, 5, 4, 2, 8, 6, 0}, {2, 5, 4, 2, 8, 6, 1},
    {1, 70, 4, 2, 8, 6, 1}, {1, 70, 4, 2, 8, 6, 0},   /* T beyond one block */
};
enum { N_SDPA_CASES = sizeof sdpa_cases / sizeof sdpa_cases[0] };

START_TEST(sdpa_forward_should_match_naive_double)
{
    al_rng r;
    al_rng_seed(&r, 100 + _i);
    sdpa_bufs s = sdpa_make(sdpa_cases[_i], &r);
    const sdpa_cfg *c = &s.c;
    sdpa_fwd(&s);
    ref_sdpa(s.ref, s.q, s.k, s.v, c);
    assert_close(s.out, s.ref, no(c), 1e-5, 1e-4, "out");
    for (int bh = 0; bh < c->B * c->H; bh++)
        for (int i = 0; i < c->T; i++) {
            const float *row = s.att + ((size_t)bh * c->T + i) * c->T;
            double sum = 0.0;
            for (int j = 0; j < c->T; j++) {
                if (c->causal && j > i) ck_assert_float_eq(row[j], 0.0f);
                sum += row[j];
            }
            ck_assert_msg(near(sum, 1.0, 1e-5, 0), "att row sum %g", sum);
        }
    sdpa_free(&s);
}
END_TEST

static double sdpa_ref_loss(void *p)
{
    sdpa_bufs *s = p;
    ref_sdpa(s->ref, s->q, s->k, s->v, &s->c);
    double l = 0.0;
    for (size_t i = 0; i < no(&s->c); i++) l += s->ref[i] * s->R[i];
    return l;
}

START_TEST(sdpa_backward_should_accumulate_finite_difference_gradients)
{
    al_rng r;
    al_rng_seed(&r, 200 + _i);
    sdpa_bufs s = sdpa_make(sdpa_cases[_i], &r);
    const sdpa_cfg *c = &s.c;
    sdpa_fwd(&s);
    al_sdpa_backward(s.dq, s.dk, s.dv, s.scratch, s.R, s.att, s.q, s.k, s.v,
                     c->B, c->T, c->H, c->G, c->dqk, c->dv, scale_of(c), c->causal);
    /* Gradients started at 1: take that back off before comparing. */
    for (size_t i = 0; i < nq(c); i++) s.dq[i] -= 1.0f;
    for (size_t i = 0; i < nk(c); i++) s.dk[i] -= 1.0f;
    for (size_t i = 0; i < nv(c); i++) s.dv[i] -= 1.0f;
    check_grad(s.q, s.dq, nq(c), sdpa_ref_loss, &s, "dq");
    check_grad(s.k, s.dk, nk(c), sdpa_ref_loss, &s, "dk");
    check_grad(s.v, s.dv, nv(c), sdpa_ref_loss, &s, "dv");
    sdpa_free(&s);
}
END_TEST

/* Changes k and v at positions after t0; returns whether out at positions
 * up to t0 stayed bit-identical. */
static int sdpa_past_unchanged(sdpa_cfg c, int t0)
{
    al_rng r;
    al_rng_seed(&r, 12);
    sdpa_bufs s = sdpa_make(c, &r);
    sdpa_fwd(&s);
    float *before = copy_of(s.out, no(&c));
    for (int b = 0; b < c.B; b++)
        for (int t = t0 + 1; t < c.T; t++) {
            for (int e = 0; e < c.G * c.dqk; e++)
                s.k[(size_t)(b * c.T + t) * c.G * c.dqk + e] += 3.0f;
            for (int e = 0; e < c.G * c.dv; e++)
                s.v[(size_t)(b * c.T + t) * c.G * c.dv + e] -= 5.0f;
        }
    sdpa_fwd(&s);
    int same = 1;
    for (int b = 0; b < c.B; b++) {
        size_t off = (size_t)b * c.T * c.H * c.dv, len = (size_t)(t0 + 1) * c.H * c.dv;
        same &= memcmp(before + off, s.out + off, len * sizeof(float)) == 0;
    }
    free(before);
    sdpa_free(&s);
    return same;
}

START_TEST(causal_sdpa_should_ignore_future_keys_and_values)
{
    sdpa_cfg c = {2, 6, 4, 2, 8, 6, 1};
    ck_assert_msg(sdpa_past_unchanged(c, 2), "causal output saw the future");
    c.causal = 0;   /* and the probe is sensitive: without the mask it sees */
    ck_assert_msg(!sdpa_past_unchanged(c, 2), "non-causal output ignored k/v");
}
END_TEST

START_TEST(gqa_with_one_group_should_equal_mha_on_repeated_kv)
{
    al_rng r;
    al_rng_seed(&r, 13);
    sdpa_cfg c1 = {2, 6, 4, 1, 8, 6, 1}, c4 = {2, 6, 4, 4, 8, 6, 1};
    sdpa_bufs g = sdpa_make(c1, &r), m = sdpa_make(c4, &r);
    memcpy(m.q, g.q, nq(&c1) * sizeof(float));
    memcpy(m.R, g.R, no(&c1) * sizeof(float));
    for (int bt = 0; bt < 2 * 6; bt++)   /* every head reads the one group */
        for (int h = 0; h < 4; h++) {
            memcpy(m.k + (bt * 4 + h) * 8, g.k + bt * 8, 8 * sizeof(float));
            memcpy(m.v + (bt * 4 + h) * 6, g.v + bt * 6, 6 * sizeof(float));
        }
    sdpa_fwd(&g);
    sdpa_fwd(&m);
    for (size_t i = 0; i < no(&c1); i++) g.ref[i] = m.out[i];
    assert_close(g.out, g.ref, no(&c1), 1e-6, 1e-5, "out");
    float sc = scale_of(&c1);
    al_sdpa_backward(g.dq, g.dk, g.dv, g.scratch, g.R, g.att, g.q, g.k, g.v,
                     2, 6, 4, 1, 8, 6, sc, 1);
    al_sdpa_backward(m.dq, m.dk, m.dv, m.scratch, m.R, m.att, m.q, m.k, m.v,
                     2, 6, 4, 4, 8, 6, sc, 1);
    double want_dq[2 * 6 * 4 * 8];
    for (size_t i = 0; i < nq(&c1); i++) want_dq[i] = m.dq[i];
    assert_close(g.dq, want_dq, nq(&c1), 1e-5, 1e-5, "dq");
    for (int bt = 0; bt < 2 * 6; bt++)   /* a shared group sums its heads */
        for (int e = 0; e < 8; e++) {
            double s = 1.0;   /* both started at 1 */
            for (int h = 0; h < 4; h++) s += m.dk[(bt * 4 + h) * 8 + e] - 1.0;
            ck_assert_msg(near(g.dk[bt * 8 + e], s, 1e-5, 1e-5), "dk %g vs %g",
                          g.dk[bt * 8 + e], s);
        }
    sdpa_free(&g);
    sdpa_free(&m);
}
END_TEST

/* ---- al_attn_*: probabilities rebuilt from row statistics */

static float *attn_fwd(sdpa_bufs *s)
{
    const sdpa_cfg *c = &s->c;
    float *stat = filled(2 * (size_t)c->B * c->H * c->T, NAN);
    al_attn_forward(s->out, stat, s->q, s->k, s->v, c->B, c->T, c->H, c->G, c->dqk, c->dv,
                    scale_of(c), c->causal);
    return stat;
}

START_TEST(attn_forward_should_match_naive_double_and_sdpa)
{
    al_rng r;
    al_rng_seed(&r, 300 + _i);
    sdpa_bufs s = sdpa_make(sdpa_cases[_i], &r);
    const sdpa_cfg *c = &s.c;
    float *stat = attn_fwd(&s);
    ref_sdpa(s.ref, s.q, s.k, s.v, c);
    assert_close(s.out, s.ref, no(c), 1e-5, 1e-4, "out");
    for (size_t i = 0; i < 2 * (size_t)c->B * c->H * c->T; i++)
        ck_assert_msg(isfinite(stat[i]), "stat[%zu] not written", i);
    float *attn_out = copy_of(s.out, no(c));
    sdpa_fwd(&s);   /* the kept-probabilities path agrees */
    for (size_t i = 0; i < no(c); i++) s.ref[i] = s.out[i];
    assert_close(attn_out, s.ref, no(c), 1e-6, 1e-6, "attn vs sdpa");
    free(attn_out);
    free(stat);
    sdpa_free(&s);
}
END_TEST

START_TEST(attn_backward_should_write_finite_difference_gradients)
{
    al_rng r;
    al_rng_seed(&r, 400 + _i);
    sdpa_bufs s = sdpa_make(sdpa_cases[_i], &r);
    const sdpa_cfg *c = &s.c;
    float *stat = attn_fwd(&s);
    for (size_t i = 0; i < nq(c); i++) s.dq[i] = NAN;   /* written, not accumulated */
    for (size_t i = 0; i < nk(c); i++) s.dk[i] = NAN;
    for (size_t i = 0; i < nv(c); i++) s.dv[i] = NAN;
    al_attn_backward(s.dq, s.dk, s.dv, s.R, stat, s.q, s.k, s.v, c->B, c->T, c->H, c->G,
                     c->dqk, c->dv, scale_of(c), c->causal);
    check_grad(s.q, s.dq, nq(c), sdpa_ref_loss, &s, "dq");
    check_grad(s.k, s.dk, nk(c), sdpa_ref_loss, &s, "dk");
    check_grad(s.v, s.dv, nv(c), sdpa_ref_loss, &s, "dv");
    free(stat);
    sdpa_free(&s);
}
END_TEST

START_TEST(gelu_backward_set_should_equal_accumulating_into_zero_in_place)
{
    al_rng r;
    al_rng_seed(&r, 17);
    enum { n = 40000 };   /* several chunks of the pool */
    float *x = randn(&r, n, 3), *g = randn(&r, n, 1), *acc = filled(n, 0.0f);
    float *inplace = copy_of(g, n);
    al_gelu_backward(acc, g, x, n);
    al_gelu_backward_set(inplace, inplace, x, n);
    ck_assert(memcmp(acc, inplace, n * sizeof(float)) == 0);
    free(x), free(g), free(acc), free(inplace);
}
END_TEST

/* ------------------------------------------------------- cross-entropy */

static double ref_xent_row(const float *x, int V, int t)
{
    double mx = -INFINITY, z = 0.0;
    for (int j = 0; j < V; j++) mx = fmax(mx, x[j]);
    for (int j = 0; j < V; j++) z += exp(x[j] - mx);
    return mx + log(z) - x[t];
}

START_TEST(xent_forward_should_match_naive_and_stay_finite)
{
    al_rng r;
    al_rng_seed(&r, 14);
    enum { N = 6, V = 11 };
    float *x = randn(&r, N * V, 3);
    int t[N];
    double want = 0.0;
    for (int i = 0; i < N; i++) {
        t[i] = (int)al_rng_below(&r, V);
        want += ref_xent_row(x + i * V, V, t[i]) / N;
    }
    double got = al_xent_forward(x, t, NULL, N, V);
    ck_assert_msg(near(got, want, 1e-9, 1e-9), "loss %.12g vs %.12g", got, want);
    /* A large common offset must neither overflow nor change the loss much. */
    for (int i = 0; i < N * V; i++) x[i] += 1e4f;
    double shifted = al_xent_forward(x, t, NULL, N, V);
    ck_assert_msg(near(shifted, want, 1e-2, 0), "shifted loss %g vs %g", shifted, want);
    free(x);
}
END_TEST

typedef struct xent_ctx {
    float *x, *w;
    int *t;
    int N, V;
} xent_ctx;

static double xent_loss(void *p)
{
    xent_ctx *c = p;
    return 0.7 * al_xent_forward(c->x, c->t, c->w, c->N, c->V);
}

START_TEST(xent_backward_should_match_finite_differences)
{
    al_rng r;
    al_rng_seed(&r, 15);
    enum { N = 5, V = 7 };
    float w[N] = {1, 0, 2, 1, 0.5f};
    int t[N];
    for (int i = 0; i < N; i++) t[i] = (int)al_rng_below(&r, V);
    for (int pass = 0; pass < 2; pass++) {   /* unweighted, then weighted */
        xent_ctx c = {randn(&r, N * V, 2), pass ? w : NULL, t, N, V};
        float *g = copy_of(c.x, N * V);
        al_xent_backward_inplace(g, t, c.w, N, V, 0.7f);
        check_grad(c.x, g, N * V, xent_loss, &c, pass ? "dlogits(w)" : "dlogits");
        free(c.x);
        free(g);
    }
}
END_TEST

START_TEST(xent_zero_weight_rows_should_drop_out)
{
    al_rng r;
    al_rng_seed(&r, 16);
    enum { N = 6, V = 9 };
    float *x = randn(&r, N * V, 2), w[N] = {1, 0, 1, 0, 0, 1}, zero[N] = {0};
    int t[N];
    double want = 0.0;
    for (int i = 0; i < N; i++) {
        t[i] = (int)al_rng_below(&r, V);
        if (w[i] != 0) want += ref_xent_row(x + i * V, V, t[i]) / 3;
    }
    double got = al_xent_forward(x, t, w, N, V);
    ck_assert_msg(near(got, want, 1e-9, 1e-9), "loss %.12g vs mean %.12g", got, want);
    al_xent_backward_inplace(x, t, w, N, V, 1.0f);
    for (int i = 0; i < N; i++) {
        double rowsum = 0.0;
        for (int j = 0; j < V; j++) {
            if (w[i] == 0) ck_assert_float_eq(x[i * V + j], 0.0f);
            rowsum += x[i * V + j];
        }
        ck_assert_msg(near(rowsum, 0.0, 1e-6, 0), "row %d sums to %g", i, rowsum);
        if (w[i] != 0) ck_assert(x[i * V + t[i]] < 0.0f);
    }
    /* All weights zero: no loss, no gradient. */
    ck_assert(al_xent_forward(x, t, zero, N, V) == 0.0);
    al_xent_backward_inplace(x, t, zero, N, V, 1.0f);
    for (int i = 0; i < N * V; i++) ck_assert_float_eq(x[i], 0.0f);
    free(x);
}
END_TEST

/* ---------------------------------------------------------------- suite */

Suite *kernels_suite(void)
{
    Suite *s = suite_create("kernels");
    TCase *tc = tcase_create("kernels");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, linear_forward_should_match_naive_double);
    tcase_add_test(tc, linear_backward_should_accumulate_finite_difference_gradients);
    tcase_add_test(tc, backward_beta_zero_should_write_what_accumulating_into_zero_gives);
    tcase_add_test(tc, residual_rmsnorm_should_equal_the_add_then_the_norm);
    tcase_add_test(tc, strided_gemm_helpers_should_match_naive);
    tcase_add_test(tc, gemm_with_empty_inner_dimension_should_only_scale_c);
    tcase_add_test(tc, rmsnorm_forward_should_match_naive_double);
    tcase_add_test(tc, rmsnorm_backward_should_match_finite_differences);
    tcase_add_test(tc, gelu_forward_should_match_tanh_closed_form);
    tcase_add_test(tc, gelu_backward_should_accumulate_finite_difference_gradient);
    tcase_add_test(tc, rope_should_match_hand_computed_rotation);
    tcase_add_test(tc, rope_should_preserve_pair_norms_and_padding);
    tcase_add_test(tc, rope_backward_should_invert_forward);
    tcase_add_test(tc, rope_strided_rotates_part_of_each_head);
    tcase_add_test(tc, rope_with_pos0_should_match_later_rows);
    tcase_add_test(tc, rope_backward_should_match_finite_differences);
    tcase_add_test(tc, softmax_row_should_sum_to_one_without_overflow);
    tcase_add_test(tc, exp_affine_should_match_libm_and_underflow_to_zero);
    tcase_add_test(tc, sigmoid_should_match_libm_in_place_and_saturate);
    tcase_add_loop_test(tc, sdpa_forward_should_match_naive_double, 0, N_SDPA_CASES);
    tcase_add_loop_test(tc, sdpa_backward_should_accumulate_finite_difference_gradients,
                        0, N_SDPA_CASES);
    tcase_add_test(tc, causal_sdpa_should_ignore_future_keys_and_values);
    tcase_add_test(tc, gqa_with_one_group_should_equal_mha_on_repeated_kv);
    tcase_add_loop_test(tc, attn_forward_should_match_naive_double_and_sdpa, 0, N_SDPA_CASES);
    tcase_add_loop_test(tc, attn_backward_should_write_finite_difference_gradients, 0,
                        N_SDPA_CASES);
    tcase_add_test(tc, gelu_backward_set_should_equal_accumulating_into_zero_in_place);
    tcase_add_test(tc, xent_forward_should_match_naive_and_stay_finite);
    tcase_add_test(tc, xent_backward_should_match_finite_differences);
    tcase_add_test(tc, xent_zero_weight_rows_should_drop_out);
    suite_add_tcase(s, tc);
    return s;
}
