/*
 * test_fused.c - the fused attention kernel of training (al_flash.h)
 * against the dense one, the row-block one it is measured beside, and
 * attention written out here in double (forward and every gradient), with
 * groups, band masks, sinks, no causal mask, and T not a multiple of either
 * tile; its bits at 1 and 2 threads and in one backward pass or two;
 * and the activation floats a model reserves at T = 1024 under each kernel.
 * The variants whose scores are dot products of concatenated parts (mla,
 * gla, gta, tpa) give the same output, input and parameter gradients
 * under the three kernels, and reserve T x T floats per head less under
 * fused than dense. (The variant loops of test_local.c, test_kv_share.c
 * and test_variants.c run every variant through the fused kernel, the
 * default of a shape built in code, against finite differences and
 * PyTorch.)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "al_check_variant.h"
#include "al_flash.h"
#include "al_memory.h"
#include "al_parallel.h"
#include "al_registry.h"
#include "al_util.h"
#include "al_test.h"

/* ------------------------------------------------------------ reference */

static int sees(const al_attn_problem *p, int i, int j)
{
    if (p->causal && j > i) return 0;
    if (p->window <= 0) return 1;
    if (j < p->sinks) return 1;
    return p->causal ? j > i - p->window : abs(i - j) < p->window;
}

/* out, dq, dk, dv in double from the definition (dq... accumulate). */
static void reference(double *out, double *dq, double *dk, double *dv, const float *q,
                      const float *k, const float *v, const float *dout,
                      const al_attn_problem *p)
{
    int T = p->T, H = p->H, G = p->G, a = p->dqk, c = p->dv, R = H / G;
    double *P = malloc(sizeof(double) * T), *dP = malloc(sizeof(double) * T);
    for (int b = 0; b < p->B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                const float *qi = q + ((size_t)(b * T + i) * H + h) * a;
                const float *go = dout + ((size_t)(b * T + i) * H + h) * c;
                double mx = -INFINITY, sum = 0, dsum = 0;
                for (int j = 0; j < T; j++) {
                    const float *kj = k + ((size_t)(b * T + j) * G + h / R) * a;
                    double s = 0;
                    for (int x = 0; x < a; x++) s += (double)qi[x] * kj[x];
                    P[j] = sees(p, i, j) ? s * p->scale : -INFINITY;
                    mx = P[j] > mx ? P[j] : mx;
                }
                for (int j = 0; j < T; j++) sum += P[j] = exp(P[j] - mx);
                double *o = out + ((size_t)(b * T + i) * H + h) * c;
                for (int x = 0; x < c; x++) o[x] = 0;
                for (int j = 0; j < T; j++) {
                    const float *vj = v + ((size_t)(b * T + j) * G + h / R) * c;
                    P[j] /= sum;
                    dP[j] = 0;
                    for (int x = 0; x < c; x++) o[x] += P[j] * vj[x], dP[j] += (double)go[x] * vj[x];
                    dsum += P[j] * dP[j];
                }
                for (int j = 0; j < T; j++) {
                    size_t kr = ((size_t)(b * T + j) * G + h / R);
                    double ds = p->scale * P[j] * (dP[j] - dsum);
                    for (int x = 0; x < a; x++) {
                        dq[((size_t)(b * T + i) * H + h) * a + x] += ds * k[kr * a + x];
                        dk[kr * a + x] += ds * qi[x];
                    }
                    for (int x = 0; x < c; x++) dv[kr * c + x] += P[j] * go[x];
                }
            }
    free(P);
    free(dP);
}

/* max |x - ref| / max |ref| */
static double rel(const float *x, const double *ref, size_t n)
{
    double e = 0, m = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(x[i] - ref[i]);
        e = d > e ? d : e;
        m = fabs(ref[i]) > m ? fabs(ref[i]) : m;
    }
    return e / m;
}

static double relf(const float *x, const float *y, size_t n)
{
    double e = 0, m = 1e-30;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)x[i] - y[i]);
        e = d > e ? d : e;
        m = fabs(y[i]) > m ? fabs(y[i]) : m;
    }
    return e / m;
}

typedef struct run {
    float *out, *saved, *dq, *dk, *dv;
} run;

static void run_kernel(run *r, int kernel, const float *q, const float *k, const float *v,
                       const float *dout, const al_attn_problem *p)
{
    size_t BT = (size_t)p->B * p->T;
    r->out = malloc(sizeof(float) * BT * p->H * p->dv);
    r->saved = malloc(sizeof(float) * al_attn_kernel_saved_floats(kernel, p));
    r->dq = malloc(sizeof(float) * BT * p->H * p->dqk);
    r->dk = malloc(sizeof(float) * BT * p->G * p->dqk);
    r->dv = malloc(sizeof(float) * BT * p->G * p->dv);
    for (size_t i = 0; i < BT * p->G * p->dqk; i++) r->dk[i] = NAN;   /* overwritten */
    for (size_t i = 0; i < BT * p->H * p->dqk; i++) r->dq[i] = NAN;
    for (size_t i = 0; i < BT * p->G * p->dv; i++) r->dv[i] = NAN;
    al_attn_kernel_forward(kernel, r->out, r->saved, q, k, v, p);
    al_attn_kernel_backward(kernel, r->dq, r->dk, r->dv, dout, r->out, r->saved, q, k, v, p);
}

static void run_free(run *r)
{
    free(r->out), free(r->saved), free(r->dq), free(r->dk), free(r->dv);
}

static float *randn(size_t n, al_rng *g)
{
    float *x = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) x[i] = (float)al_rng_normal(g);
    return x;
}

/* B, T, H, G, dqk, dv, causal, window, sinks: T = 200 and 77 are not
 * multiples of 64 or 128; windows shorter and longer than a tile. */
static const int cases[][9] = {
    {2, 200, 4, 2, 8, 6, 1, 0, 0},   {1, 200, 4, 1, 8, 8, 1, 37, 3},
    {2, 77, 2, 2, 6, 4, 1, 150, 0},  {1, 200, 2, 1, 4, 4, 0, 0, 0},
    {1, 200, 4, 4, 8, 8, 0, 20, 2},  {1, 300, 2, 2, 8, 8, 1, 130, 5},
};

START_TEST(fused_dense_and_rows_equal_attention_written_out_in_double)
{
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const int *x = cases[c];
        al_attn_problem p = {x[0], x[1], x[2], x[3], x[4], x[5], 1.0f / sqrtf((float)x[4]),
                             x[6], x[7], x[8]};
        size_t BT = (size_t)p.B * p.T, nq = BT * p.H * p.dqk, nk = BT * p.G * p.dqk;
        size_t nv = BT * p.G * p.dv, no = BT * p.H * p.dv;
        al_rng g;
        al_rng_seed(&g, 11 + c);
        float *q = randn(nq, &g), *k = randn(nk, &g), *v = randn(nv, &g), *dout = randn(no, &g);
        double *o = calloc(no, 8), *dq = calloc(nq, 8), *dk = calloc(nk, 8), *dv = calloc(nv, 8);
        reference(o, dq, dk, dv, q, k, v, dout, &p);
        run f, d, rw;
        run_kernel(&f, AL_ATTN_FUSED, q, k, v, dout, &p);
        run_kernel(&d, AL_ATTN_DENSE, q, k, v, dout, &p);
        run_kernel(&rw, AL_ATTN_ROWS, q, k, v, dout, &p);   /* the baseline the bench measures */
        const run *rs[3] = {&f, &d, &rw};
        for (int w = 0; w < 3; w++) {
            const run *r = rs[w];
            ck_assert_msg(rel(r->out, o, no) < 1e-5, "case %zu kernel %d: out %g", c, w, rel(r->out, o, no));
            ck_assert_msg(rel(r->dq, dq, nq) < 1e-5, "case %zu kernel %d: dq %g", c, w, rel(r->dq, dq, nq));
            ck_assert_msg(rel(r->dk, dk, nk) < 1e-5, "case %zu kernel %d: dk %g", c, w, rel(r->dk, dk, nk));
            ck_assert_msg(rel(r->dv, dv, nv) < 1e-5, "case %zu kernel %d: dv %g", c, w, rel(r->dv, dv, nv));
        }
        ck_assert_msg(relf(f.out, d.out, no) < 1e-5 && relf(f.dq, d.dq, nq) < 1e-5 &&
                      relf(f.dk, d.dk, nk) < 1e-5 && relf(f.dv, d.dv, nv) < 1e-5,
                      "case %zu: fused differs from dense", c);
        run_free(&f), run_free(&d), run_free(&rw);
        free(q), free(k), free(v), free(dout), free(o), free(dq), free(dk), free(dv);
    }
}
END_TEST

START_TEST(fused_probabilities_equal_the_dense_ones)
{
    al_attn_problem p = {1, 150, 2, 1, 8, 8, 0.35f, 1, 40, 2};
    al_rng g;
    al_rng_seed(&g, 5);
    float *q = randn(150 * 16, &g), *k = randn(150 * 8, &g), *v = randn(150 * 8, &g);
    float *out = malloc(sizeof(float) * 150 * 16), *lse = malloc(sizeof(float) * 300);
    float *Pd = malloc(sizeof(float) * 2 * 150 * 150), *Pf = malloc(sizeof(float) * 2 * 150 * 150);
    al_attn_kernel_forward(AL_ATTN_DENSE, out, Pd, q, k, v, &p);
    al_attn_kernel_forward(AL_ATTN_FUSED, out, lse, q, k, v, &p);
    al_attn_kernel_probs(AL_ATTN_FUSED, Pf, lse, q, k, &p);
    ck_assert_double_lt(relf(Pf, Pd, 2 * 150 * 150), 1e-5);
    free(q), free(k), free(v), free(out), free(lse), free(Pd), free(Pf);
}
END_TEST

START_TEST(fused_gives_the_same_bits_on_one_and_two_threads)
{
    al_attn_problem p = {2, 333, 4, 2, 8, 8, 0.35f, 1, 0, 0};
    size_t BT = 666;
    al_rng g;
    al_rng_seed(&g, 9);
    float *q = randn(BT * 32, &g), *k = randn(BT * 16, &g), *v = randn(BT * 16, &g);
    float *dout = randn(BT * 32, &g);
    run a, b;
    int was = al_parallel_threads();
    al_parallel_set_threads(1);
    run_kernel(&a, AL_ATTN_FUSED, q, k, v, dout, &p);
    al_parallel_set_threads(2);
    run_kernel(&b, AL_ATTN_FUSED, q, k, v, dout, &p);
    al_parallel_set_threads(was);
    ck_assert(!memcmp(a.out, b.out, BT * 32 * 4) && !memcmp(a.dq, b.dq, BT * 32 * 4) &&
              !memcmp(a.dk, b.dk, BT * 16 * 4) && !memcmp(a.dv, b.dv, BT * 16 * 4));
    run_free(&a), run_free(&b);
    free(q), free(k), free(v), free(dout);
}
END_TEST

/* The backward pass runs in one pass over (batch, group) when those items
 * fill the threads, else in two (dq by query tile, dk and dv by key tile).
 * Three groups on one thread take the one pass, on two the two passes
 * (3 items would leave a thread idle half the time): the same bits, with
 * a band, sinks, and T a multiple of neither tile. */
START_TEST(fused_backward_in_one_pass_gives_the_bits_of_two)
{
    al_attn_problem p = {1, 333, 6, 3, 8, 4, 0.35f, 1, 150, 2};
    size_t BT = 333;
    al_rng g;
    al_rng_seed(&g, 13);
    float *q = randn(BT * 48, &g), *k = randn(BT * 24, &g), *v = randn(BT * 12, &g);
    float *dout = randn(BT * 24, &g);
    run a, b;
    int was = al_parallel_threads();
    al_parallel_set_threads(1);
    run_kernel(&a, AL_ATTN_FUSED, q, k, v, dout, &p);
    al_parallel_set_threads(2);
    run_kernel(&b, AL_ATTN_FUSED, q, k, v, dout, &p);
    al_parallel_set_threads(was);
    ck_assert(!memcmp(a.dq, b.dq, BT * 48 * 4));
    ck_assert(!memcmp(a.dk, b.dk, BT * 24 * 4));
    ck_assert(!memcmp(a.dv, b.dv, BT * 12 * 4));
    run_free(&a), run_free(&b);
    free(q), free(k), free(v), free(dout);
}
END_TEST

/* The activations a model reserves at T = 1024 (al_model_act_floats, the
 * size al_model_reserve carves and train.max_memory checks): fused keeps
 * lse (B,H,T) where dense keeps (B,H,T,T) per layer, for gqa and local. */
START_TEST(fused_training_step_reserves_less_than_dense_at_1024)
{
    const char *names[] = {"mha", "local"};
    for (int n = 0; n < 2; n++) {
        al_model_config m;
        memset(&m, 0, sizeof m);
        m.n_layer = 2, m.d_model = 64, m.n_head = 4, m.d_head = 16, m.seq_len = 1024;
        m.vocab_size = 256, m.causal = 1, m.rope_base = 10000, m.norm_eps = 1e-5;
        m.attn = al_variant_find(names[n]);
        ck_assert_ptr_nonnull(m.attn);
        snprintf(m.variant, sizeof m.variant, "%s", names[n]);
        for (int j = 0; j < al_variant_n_settings(m.attn); j++)
            m.attn_set[j] = m.attn->settings[j].def;
        if (n == 1) m.attn_set[0] = 64;   /* window */
        size_t fused, dense;
        al_err e;
        m.attn_kernel = AL_ATTN_FUSED;
        ck_assert_int_eq(al_model_act_floats(&m, 256, 1, 1024, &fused, &e), 0);
        m.attn_kernel = AL_ATTN_DENSE;
        ck_assert_int_eq(al_model_act_floats(&m, 256, 1, 1024, &dense, &e), 0);
        /* dense - fused = layers * H * T * (T - 1) exactly */
        ck_assert_uint_eq(dense - fused, (size_t)2 * 4 * 1024 * 1023);
        ck_assert_msg(fused < dense, "%s: fused %zu, dense %zu", names[n], fused, dense);
    }
}
END_TEST

/* ------------------------------------------------------------ the variants */

/* A layer of `name` with settings (name=value ...) at kernel, B 2, T 150
 * (not a multiple of either tile), the same seed for every kernel: its
 * output, dx and each dp one after another (malloc'ed), seg[i] the length
 * of each (*n_seg of them), *act the floats it reserves. */
typedef struct layer_out {
    float *all;
    size_t seg[2 + AL_MAX_ATTN_PARAMS], act;
    int n_seg;
} layer_out;

static layer_out layer_run(const char *name, const char *const *sets, int kernel)
{
    const al_variant *v = al_variant_find(name);
    ck_assert_ptr_nonnull(v);
    al_attn_shape s = {32, 4, 8, 150, 1, 10000.0f, 1e-5f, {0}, .rope = {.base = 0}};
    for (int j = 0; j < al_variant_n_settings(v); j++) s.set[j] = v->settings[j].def;
    for (int i = 0; sets[i]; i += 2) {
        int k = al_variant_setting_index(v, sets[i]);
        ck_assert_int_ge(k, 0);
        s.set[k] = atof(sets[i + 1]);
    }
    s.attn_kernel = kernel;
    al_check_layer t;
    al_check_layer_init(&t, v, &s, 2, 150, 7);
    al_check_layer_loss(&t);
    al_check_layer_backward(&t, t.R);
    layer_out r = {.n_seg = 2 + t.np, .act = t.n_act};
    size_t total = 0;
    r.seg[0] = r.seg[1] = (size_t)2 * 150 * 32;
    for (int i = 0; i < t.np; i++)
        r.seg[2 + i] = (size_t)t.spec[i].rows * (t.spec[i].cols ? t.spec[i].cols : 1);
    for (int i = 0; i < r.n_seg; i++) total += r.seg[i];
    float *o = r.all = malloc(total * sizeof *o);
    const float *src[2 + AL_MAX_ATTN_PARAMS] = {t.out, t.dx};
    for (int i = 0; i < t.np; i++) src[2 + i] = t.dp[i];
    for (int i = 0; i < r.n_seg; i++) memcpy(o, src[i], r.seg[i] * sizeof *o), o += r.seg[i];
    al_check_layer_free(&t);
    return r;
}

/* Largest difference over the largest magnitude of b, in one segment. */
static double rel_f(const float *a, const float *b, size_t n)
{
    double e = 0, m = 1e-30;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return e / m;
}

START_TEST(latent_tied_and_factored_variants_train_alike_under_every_kernel)
{
    static const char *const mla[] = {"d_latent", "16", "d_rope", "8", NULL};
    static const char *const mla_q[] = {"d_latent", "16", "d_rope", "8", "d_q_latent", "12", NULL};
    static const char *const gla[] = {"d_latent", "8", "d_rope", "4", "n_latent_head", "2", NULL};
    static const char *const gta[] = {"n_kv_head", "2", NULL};
    static const char *const tpa[] = {"rank_q", "3", "rank_k", "2", "rank_v", "2", NULL};
    static const struct { const char *name; const char *const *sets; } cases[] = {
        {"mla", mla}, {"mla", mla_q}, {"gla", gla}, {"gta", gta}, {"tpa", tpa}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        layer_out r[3];
        for (int k = 0; k < 3; k++)   /* fused, dense, rows */
            r[k] = layer_run(cases[c].name, cases[c].sets, k);
        for (int k = 1; k < 3; k++) {
            ck_assert_int_eq(r[k].n_seg, r[0].n_seg);
            size_t off = 0;
            for (int i = 0; i < r[0].n_seg; i++) {   /* out, dx, then each parameter */
                double e = rel_f(r[k].all + off, r[0].all + off, r[0].seg[i]);
                ck_assert_msg(e < 1e-5, "%s (case %zu), part %d: kernel %d against fused: %g",
                              cases[c].name, c, i, k, e);
                off += r[0].seg[i];
            }
        }
        /* what each saves: dense the probabilities, rows two floats a row,
         * fused one (B 2, H 4, T 150) */
        ck_assert_uint_eq(r[1].act - r[0].act, (size_t)2 * 4 * 150 * 149);
        ck_assert_uint_eq(r[2].act - r[0].act, (size_t)2 * 4 * 150);
        for (int k = 0; k < 3; k++) free(r[k].all);
    }
}
END_TEST

/* auto is the kernel measured fastest (docs/fused-attention.md): rows below
 * 8192 tokens; from there AL_ATTN_LONG, which each layer resolves by its
 * widths; each name is its own kernel at any length. */
START_TEST(auto_is_rows_below_8192_and_by_widths_from_it)
{
    ck_assert_int_eq(AL_ATTN_FUSED_MIN_T, 8192);
    ck_assert_int_eq(al_config_attn_kernel("auto", 256), AL_ATTN_ROWS);
    ck_assert_int_eq(al_config_attn_kernel("auto", 4096), AL_ATTN_ROWS);
    ck_assert_int_eq(al_config_attn_kernel("", 8191), AL_ATTN_ROWS);
    ck_assert_int_eq(al_config_attn_kernel("auto", 8192), AL_ATTN_LONG);
    ck_assert_int_eq(al_config_attn_kernel("rows", 8192), AL_ATTN_ROWS);
    ck_assert_int_eq(al_config_attn_kernel("dense", 8192), AL_ATTN_DENSE);
    ck_assert_int_eq(al_config_attn_kernel("fused", 64), AL_ATTN_FUSED);
    ck_assert_int_eq(al_config_attn_kernel("flash", 64), -1);
    /* the long choice: fused for q.k as wide as v (mha, gqa) or narrower,
     * rows for wider (mla's [content | rope]); named kernels pass through */
    al_attn_problem eq = {1, 8192, 8, 8, 32, 32, 0.1f, 1, 0, 0}, wide = eq, narrow = eq;
    wide.dqk = 48, narrow.dqk = 16;
    ck_assert_int_eq(al_attn_kernel_of(AL_ATTN_LONG, &eq), AL_ATTN_FUSED);
    ck_assert_int_eq(al_attn_kernel_of(AL_ATTN_LONG, &narrow), AL_ATTN_FUSED);
    ck_assert_int_eq(al_attn_kernel_of(AL_ATTN_LONG, &wide), AL_ATTN_ROWS);
    for (int k = AL_ATTN_FUSED; k <= AL_ATTN_ROWS; k++)
        ck_assert_int_eq(al_attn_kernel_of(k, &wide), k);
}
END_TEST

/* Under AL_ATTN_LONG a problem runs exactly as the kernel it resolves to:
 * the same saved size and the same bits, forward and backward (the saved
 * state is sized by the same rule that runs it). */
START_TEST(long_runs_as_the_kernel_its_widths_pick)
{
    al_attn_problem ps[2] = {{1, 150, 4, 2, 8, 8, 0.35f, 1, 0, 0},
                             {1, 150, 4, 2, 12, 8, 0.29f, 1, 0, 0}};
    for (int c = 0; c < 2; c++) {
        const al_attn_problem *p = &ps[c];
        int want = c ? AL_ATTN_ROWS : AL_ATTN_FUSED;
        ck_assert_uint_eq(al_attn_kernel_saved_floats(AL_ATTN_LONG, p),
                          al_attn_kernel_saved_floats(want, p));
        ck_assert_uint_ne(al_attn_kernel_saved_floats(AL_ATTN_FUSED, p),
                          al_attn_kernel_saved_floats(AL_ATTN_ROWS, p));
        size_t BT = 150, nq = BT * 4 * p->dqk, nk = BT * 2 * p->dqk, nv = BT * 2 * 8;
        al_rng g;
        al_rng_seed(&g, 21 + c);
        float *q = randn(nq, &g), *k = randn(nk, &g), *v = randn(nv, &g),
              *dout = randn(BT * 4 * 8, &g);
        run a, b;
        run_kernel(&a, AL_ATTN_LONG, q, k, v, dout, p);
        run_kernel(&b, want, q, k, v, dout, p);
        ck_assert_mem_eq(a.out, b.out, sizeof(float) * BT * 4 * 8);
        ck_assert_mem_eq(a.dq, b.dq, sizeof(float) * nq);
        ck_assert_mem_eq(a.dk, b.dk, sizeof(float) * nk);
        ck_assert_mem_eq(a.dv, b.dv, sizeof(float) * nv);
        run_free(&a), run_free(&b);
        free(q), free(k), free(v), free(dout);
    }
}
END_TEST

Suite *fused_suite(void)
{
    Suite *s = suite_create("fused");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, fused_dense_and_rows_equal_attention_written_out_in_double);
    tcase_add_test(tc, fused_probabilities_equal_the_dense_ones);
    tcase_add_test(tc, fused_gives_the_same_bits_on_one_and_two_threads);
    tcase_add_test(tc, fused_backward_in_one_pass_gives_the_bits_of_two);
    tcase_add_test(tc, fused_training_step_reserves_less_than_dense_at_1024);
    tcase_add_test(tc, auto_is_rows_below_8192_and_by_widths_from_it);
    tcase_add_test(tc, long_runs_as_the_kernel_its_widths_pick);
    tcase_add_test(tc, latent_tied_and_factored_variants_train_alike_under_every_kernel);
    suite_add_tcase(s, tc);
    return s;
}
