/*
 * bench.c - attnlab-bench, the measuring half of scripts/bench.
 *
 *   attnlab-bench sgemm --shape S [--threads N] [--min-time SEC] [--products fwd|all]
 *   attnlab-bench splits --shape S --threads N
 *   attnlab-bench train --shape S --variant V [--threads N] [--steps N] [--warmup N]
 *                       [--seq-len T] [--batch B] [--n-head H] [--split S]
 *   attnlab-bench flops --shape S --variant V
 *   attnlab-bench copy
 *   attnlab-bench info
 *
 * Each prints key=value lines (one per result) that scripts/bench collects
 * into CSV. One training cell per process, so that the peak resident set
 * (getrusage) belongs to that cell alone. Timings are medians of single
 * steps after warm-up; nothing here decides what is fast enough.
 *
 * Model FLOPs per token (stated in docs/performance.md):
 *   6 * N_matmul                      every 2-D weight (the tied head once)
 * + 6 * n_layer * H * Tk * (dqk + dv) scores and weighted values, fwd + bwd,
 * where Tk = (T + 1) / 2 keys on average under the causal mask (T without).
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "al_config_io.h"
#include "al_flash.h"
#include "al_blascore.h"
#include "al_gemm.h"
#include "al_model.h"
#include "al_optim.h"
#include "al_parallel.h"
#include "al_registry.h"

/* ------------------------------------------------------------ tables */

typedef struct shape {
    const char *name;
    int n_layer, d_model, n_head, d_head, seq_len, batch;
} shape;

static const shape shapes[] = {
    {"tiny", 2, 128, 4, 32, 128, 32},
    {"small", 4, 256, 8, 32, 256, 16},
    {"micro", 1, 64, 2, 32, 32, 4},   /* for tests: a fraction of a second */
    {NULL, 0, 0, 0, 0, 0, 0},
};

/* The benchmark's variants: a registry name plus settings (name=value). */
typedef struct bvariant {
    const char *name, *registry;
    const char *set[2];
    double val[2];
    int d_extra;   /* query/key width beyond d_head (MLA's d_rope) */
} bvariant;

static const bvariant variants[] = {
    {"mha", "mha", {NULL, NULL}, {0, 0}, 0},
    {"gqa", "gqa", {"n_kv_head", NULL}, {2, 0}, 0},
    {"mqa", "mqa", {NULL, NULL}, {0, 0}, 0},
    {"mla", "mla", {"d_latent", "d_rope"}, {32, 16}, 16},
    {NULL, NULL, {NULL, NULL}, {0, 0}, 0},
};

typedef struct opts {
    const char *cmd;
    const shape *sh;
    const bvariant *bv;
    long threads, steps, warmup;
    double min_time;
    int all_kinds;   /* sgemm: the backward products too (--products all) */
    int split;       /* train: -1 the plans' choice, else al_gemm_force_split */
    long seq_len, batch;   /* 0: the shape's */
    long n_head;           /* 0: the shape's; else d_head = d_model / n_head */
    const char *precision; /* train.precision of every product: f32 | bf16 */
    const char *kernel;    /* train.attention_kernel: auto | fused | dense */
} opts;

/* The batch shape of a cell: the shape's, or the options' overrides. */
static int opt_T(const opts *o) { return o->seq_len ? (int)o->seq_len : o->sh->seq_len; }
static int opt_B(const opts *o) { return o->batch ? (int)o->batch : o->sh->batch; }

/* ------------------------------------------------------------ config */

static int make_config(al_config *c, const opts *o, al_err *e)
{
    al_config_defaults(c);
    al_model_config *m = &c->model;
    const shape *s = o->sh;
    m->n_layer = s->n_layer;
    m->d_model = s->d_model;
    m->n_head = o->n_head ? (int)o->n_head : s->n_head;
    m->d_head = o->n_head ? s->d_model / (int)o->n_head : s->d_head;
    if (m->n_head * m->d_head != s->d_model)
        return al_errf(e, "--n-head %d does not divide d_model %d", m->n_head, s->d_model);
    m->seq_len = opt_T(o);
    m->vocab_size = 256;   /* bytes */
    c->train.batch_size = opt_B(o);
    snprintf(c->train.attention_kernel, sizeof c->train.attention_kernel, "%s", o->kernel);
    m->attn_kernel = al_config_attn_kernel(o->kernel, m->seq_len);
    const al_variant *ops = al_variant_find(o->bv->registry);
    if (!ops) return al_errf(e, "variant '%s' is not built in", o->bv->registry);
    m->attn = ops;
    snprintf(m->variant, sizeof m->variant, "%s", ops->name);
    for (int j = 0; j < al_variant_n_settings(ops); j++) m->attn_set[j] = ops->settings[j].def;
    for (int i = 0; i < 2 && o->bv->set[i]; i++) {
        int j = al_variant_setting_index(ops, o->bv->set[i]);
        AL_ASSERT(j >= 0);
        m->attn_set[j] = o->bv->val[i];
    }
    return al_config_validate(c, NULL, e);
}

/* ------------------------------------------------------------ counting */

static size_t matmul_params(const al_model *m)
{
    size_t n = 0;
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].ndim == 2) n += m->tensors[i].numel;
    return n;
}

static double flops_per_token(const al_model *m, const bvariant *bv)
{
    const al_model_config *c = &m->cfg;
    double T = c->seq_len, Tk = c->causal ? (T + 1) / 2 : T;
    double dqk = c->d_head + bv->d_extra, dv = c->d_head;
    return 6.0 * (double)matmul_params(m) + 6.0 * c->n_layer * c->n_head * Tk * (dqk + dv);
}

/* Bytes the step needs by count: parameters, gradients, AdamW's two
 * moments, and the activations al_model_reserve lays out (its size table,
 * repeated here so that the figure does not come from the code it checks). */
static double need_bytes(const al_model *m, int B, int T)
{
    const al_model_config *c = &m->cfg;
    const al_variant_train *v = c->attn->train;   /* bench models have one variant */
    const void *s = m->layers[0].ctx;
    double BT = (double)B * T, D = c->d_model, F = m->d_ff, V = c->vocab_size;
    double per_layer = 4 * BT * D + 2 * BT + 2 * BT * F + v->act_floats(s, B, T);
    double acts = c->n_layer * per_layer + 4 * BT * D + 2 * BT + BT * V + BT * F +
                  v->scratch_floats(s, B, T);
    return 4.0 * (4.0 * m->n_params + acts) + 2 * 4.0 * BT;   /* + inputs, targets */
}

static double rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;   /* kilobytes on Linux */
}

/* CPU seconds of the whole process: under contention from other
 * processes a 1-thread step's CPU time moves much less than its wall time. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n)
{
    qsort(x, n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* ------------------------------------------------------------ train */

typedef struct cell {
    al_model model;
    al_adamw opt;
    int *in, *tgt;
    al_rng rng;
} cell;

/* One step exactly as the trainer takes it (train.c's train_step) on a
 * random batch: forward, backward (which writes the gradients), clip at
 * 1.0, AdamW. */
static double bench_step(cell *k, const al_config *c, int B, int T)
{
    for (int i = 0; i < B * T; i++) {
        k->in[i] = (int)al_rng_below(&k->rng, 256);
        k->tgt[i] = (int)al_rng_below(&k->rng, 256);
    }
    double loss = al_model_forward(&k->model, k->in, k->tgt, NULL, B, T);
    al_model_backward(&k->model);
    al_clip_grad_norm(&k->model, c->train.grad_clip);
    al_adamw_step(&k->opt, &k->model, c->train.lr);
    return loss;
}

/* ---- the attention's share of a step: the variant's forward and
 * backward timed through a copy of its table (nothing else differs). */
static const al_variant *timed_inner;
static double attn_seconds;

static void timed_forward(const void *s, float *out, float *act, float *scratch,
                          const float *x, float *const *p, int B, int T)
{
    double t0 = al_now();
    timed_inner->train->forward(s, out, act, scratch, x, p, B, T);
    attn_seconds += al_now() - t0;
}

static void timed_backward(const void *s, float *dx, float *const *dp, float *scratch,
                           const float *dout, const float *x, const float *act,
                           float *const *p, int B, int T)
{
    double t0 = al_now();
    timed_inner->train->backward(s, dx, dp, scratch, dout, x, act, p, B, T);
    attn_seconds += al_now() - t0;
}

static const al_variant *timed_ops(const al_variant *v)
{
    static al_variant t;
    static al_variant_train train;
    timed_inner = v;
    t = *v;
    train = *v->train;
    train.forward = timed_forward;
    train.backward = timed_backward;
    t.train = &train;
    return &t;
}

/* Model FLOPs per token inside the variant's forward and backward: its
 * 2-D weights and the scores and weighted values (the T-term). */
static double attn_flops_per_token(const al_model *m, const bvariant *bv)
{
    const al_model_config *c = &m->cfg;
    double T = c->seq_len, Tk = c->causal ? (T + 1) / 2 : T, w = 0;
    const al_layer *L = &m->layers[0];   /* bench models have one variant */
    for (int i = 0; i < L->n_attn_params; i++)
        if (L->attn_spec[i].cols > 0) w += (double)L->attn_spec[i].rows * L->attn_spec[i].cols;
    return 6.0 * c->n_layer * w +
           6.0 * c->n_layer * c->n_head * Tk * (c->d_head + bv->d_extra + c->d_head);
}

static const char *const kernel_names[] = {"fused", "dense", "rows"};   /* enum al_attn_kernel */
_Static_assert(AL_ATTN_ROWS == 2, "kernel_names follows enum al_attn_kernel");

/* The kernel the bench model's attention runs (auto's long choice
 * resolved by its widths, as al_attn_kernel_of resolves it per layer). */
static const char *kernel_run(const al_model *m, const bvariant *bv)
{
    al_attn_problem p = {.B = 1, .T = m->cfg.seq_len, .H = m->cfg.n_head, .G = m->cfg.n_head,
                         .dqk = m->cfg.d_head + bv->d_extra, .dv = m->cfg.d_head};
    return kernel_names[al_attn_kernel_of(m->cfg.attn_kernel, &p)];
}

static void print_train(const opts *o, const cell *k, double *dt, double *dc, double *da,
                        int n, double base, long faults, double l0, double l1)
{
    const al_model *m = &k->model;
    int B = opt_B(o), T = opt_T(o);
    double med = median(dt, n), tok = (double)B * T / med, st = 0, sa = 0;
    double fpt = flops_per_token(m, o->bv);
    for (int i = 0; i < n; i++) st += dt[i], sa += da[i];
    printf("train shape=%s variant=%s threads=%ld corename=%s precision=%s kernel=%s "
           "isa=%s seq_len=%d n_head=%d d_head=%d "
           "batch=%d steps=%d "
           "step_s=%.6f cpu_s=%.6f tok_s=%.1f flops_per_token=%.0f model_gflops=%.3f "
           "attn_share=%.4f attn_flop_share=%.4f params=%zu "
           "matmul_params=%zu rss_base_mib=%.1f rss_peak_mib=%.1f need_mib=%.1f "
           "faults_per_step=%.1f loss_first=%.6f loss_last=%.6f\n",
           o->sh->name, o->bv->name, o->threads, openblas_get_corename(), o->precision,
           kernel_run(m, o->bv), al_bf16_isa(), T,
           m->cfg.n_head, m->cfg.d_head, B, n, med,
           median(dc, n), tok, fpt, tok * fpt / 1e9, st > 0 ? sa / st : 0,
           attn_flops_per_token(m, o->bv) / fpt, m->n_params, matmul_params(m), base, rss_mib(),
           need_bytes(m, B, T) / (1024.0 * 1024.0), (double)faults / n, l0, l1);
}

static int cmd_train(const opts *o)
{
    al_config c;
    al_err e;
    if (make_config(&c, o, &e) != 0) return fprintf(stderr, "attnlab-bench: %s\n", e.msg), 2;
    c.model.attn = timed_ops(c.model.attn);
    double base = rss_mib();
    int B = opt_B(o), T = opt_T(o);
    cell k;
    memset(&k, 0, sizeof k);
    if (al_model_init(&k.model, &c.model, &e) != 0 ||
        al_model_reserve(&k.model, B, T, &e) != 0)
        return fprintf(stderr, "attnlab-bench: %s\n", e.msg), 2;
    al_model_init_weights(&k.model, 1);
    al_adamw_init(&k.opt, k.model.n_params, c.train.beta1, c.train.beta2, c.train.weight_decay);
    al_rng_seed(&k.rng, 7);
    k.in = al_malloc((size_t)B * T * sizeof(int));
    k.tgt = al_malloc((size_t)B * T * sizeof(int));
    double *dt = al_malloc((size_t)o->steps * sizeof(double)), l0 = NAN, l1 = NAN;
    double *dc = al_malloc((size_t)o->steps * sizeof(double));
    double *da = al_malloc((size_t)o->steps * sizeof(double));
    long faults = 0;
    for (long s = 0; s < o->warmup + o->steps; s++) {
        if (s == o->warmup) faults = minor_faults();
        attn_seconds = 0;
        double t0 = al_now(), c0 = cpu_now(), loss = bench_step(&k, &c, B, T);
        if (s >= o->warmup) {
            dt[s - o->warmup] = al_now() - t0;
            dc[s - o->warmup] = cpu_now() - c0;
            da[s - o->warmup] = attn_seconds;
        }
        if (s == 0) l0 = loss;
        l1 = loss;
    }
    print_train(o, &k, dt, dc, da, (int)o->steps, base, minor_faults() - faults, l0, l1);
    free(dt), free(dc), free(da), free(k.in), free(k.tgt);
    al_adamw_free(&k.opt);
    al_model_free(&k.model);
    return 0;
}

/* ------------------------------------------------------------ sgemm */

/* The three products a weight W (N, K) takes part in, at M = B*T rows:
 * forward out (M, N) = x (M, K) . W^T, backward dx (M, K) = dout (M, N) . W
 * and dW (N, K) = dout^T . x. */
enum { KIND_FWD, KIND_DINP, KIND_DW, NKINDS };
static const char *const kind_names[] = {"fwd", "dinp", "dw"};

typedef struct product {
    CBLAS_TRANSPOSE ta, tb;
    int M, N, K;   /* of C (M, N) and the inner dimension */
    float beta;
} product;

static product product_of(int kind, int rows, int n, int k)
{
    if (kind == KIND_FWD) return (product){CblasNoTrans, CblasTrans, rows, n, k, 0.0f};
    if (kind == KIND_DINP) return (product){CblasNoTrans, CblasNoTrans, rows, k, n, 0.0f};
    return (product){CblasTrans, CblasNoTrans, n, k, rows, 0.0f};
}

/* How a product is run while timed: OpenBLAS alone with its own threads
 * (the pool at one thread), as attnlab runs it (its plan), or one split. */
enum { RUN_BLAS = -2, RUN_POOL = -1 };

static void run_product(const product *p, int how, const float *A, const float *B, float *C)
{
    int lda = p->ta == CblasNoTrans ? p->K : p->M, ldb = p->tb == CblasNoTrans ? p->N : p->K;
    if (how == RUN_BLAS)
        cblas_sgemm(CblasRowMajor, p->ta, p->tb, p->M, p->N, p->K, 1.0f, A, lda, B, ldb,
                    p->beta, C, p->N);
    else if (how == RUN_POOL)
        al_sgemm_pool(p->ta, p->tb, p->M, p->N, p->K, 1.0f, A, lda, B, ldb, p->beta, C, p->N);
    else
        al_sgemm_split(how, p->ta, p->tb, p->M, p->N, p->K, 1.0f, A, lda, B, ldb, p->beta, C,
                       p->N);
}

/* GFLOP/s of a product run one way at `threads`, the median of 9 timed
 * repeats (each at least min_time / 10) after a warm-up. */
static double time_product(const product *p, int how, double min_time, int threads)
{
    al_parallel_set_threads(how == RUN_BLAS ? 1 : threads);   /* sets OpenBLAS to 1 */
    if (how == RUN_BLAS) openblas_set_num_threads(threads);
    size_t na = (size_t)p->M * p->K, nb = (size_t)p->K * p->N;
    float *A = al_malloc(na * 4), *B = al_malloc(nb * 4), *C = al_malloc((size_t)p->M * p->N * 4);
    for (size_t i = 0; i < na; i++) A[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < nb; i++) B[i] = (float)(i % 5) * 0.1f;
    double rate[9];
    for (int r = -1; r < 9; r++) {   /* r = -1 warms up (and plans) */
        double t0 = al_now(), t;
        long reps = 0;
        do {
            run_product(p, how, A, B, C);
            reps++;
        } while ((t = al_now() - t0) < min_time / 10);
        if (r >= 0) rate[r] = 2.0 * p->M * p->N * p->K * reps / t / 1e9;
    }
    free(A), free(B), free(C);
    openblas_set_num_threads(1);
    if (how == RUN_BLAS) al_blas_threads_stop();   /* the next cell measures unshadowed */
    return median(rate, 9);
}

/* The distinct (N, K) of the model's weights. */
static int model_products(const al_model *m, int nk[][2], int cap)
{
    int n = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const al_tensor *t = &m->tensors[i];
        if (t->ndim != 2) continue;
        int seen = 0;
        for (int j = 0; j < n; j++) seen |= nk[j][0] == t->shape[0] && nk[j][1] == t->shape[1];
        if (!seen && n < cap) nk[n][0] = t->shape[0], nk[n][1] = t->shape[1], n++;
    }
    return n;
}

/* One product at the options' thread count: OpenBLAS's own threads, each
 * split of the pool, and the pool as planned, with the plan's choice and
 * which splits gave the reference's bits. Returns the best rate seen. */
static double sgemm_line(const opts *o, int kind, const product *p)
{
    int t = (int)o->threads;
    double g = time_product(p, RUN_BLAS, o->min_time, t), best = g;
    printf("sgemm shape=%s variant=%s threads=%d corename=%s product=%s m=%d n=%d k=%d gflops=%.2f",
           o->sh->name, o->bv->name, t, openblas_get_corename(), kind_names[kind], p->M, p->N,
           p->K, g);
    al_gemm_plan pl;
    al_parallel_set_threads(t);
    if (t > 1 && al_gemm_plan_get(p->ta, p->tb, p->M, p->N, p->K, 1.0f, p->beta, &pl) == 0) {
        char admitted[64] = "";
        for (int s = 0; s < AL_NSPLITS; s++) {
            if (!(pl.tried & (1u << s)) || s == AL_SPLIT_BLAS) continue;
            double r = time_product(p, s, o->min_time, t);
            best = r > best ? r : best;
            printf(" %s_gflops=%.2f", al_split_name(s), r);
        }
        for (int s = 0; s < AL_NSPLITS; s++)
            if (pl.admitted & (1u << s))
                snprintf(admitted + strlen(admitted), sizeof admitted - strlen(admitted), "%s%s",
                         *admitted ? "," : "", al_split_name(s));
        printf(" plan=%s admitted=%s", al_split_name(pl.split), admitted);
    }
    double pool = t > 1 ? time_product(p, RUN_POOL, o->min_time, t) : g;
    printf(" pool_gflops=%.2f best_gflops=%.2f\n", pool, pool > best ? pool : best);
    return pool > best ? pool : best;
}

static int cmd_sgemm(const opts *o)
{
    al_config c;
    al_err e;
    al_model m;
    if (make_config(&c, o, &e) != 0 || al_model_init(&m, &c.model, &e) != 0)
        return fprintf(stderr, "attnlab-bench: %s\n", e.msg), 2;
    int nk[64][2], n = model_products(&m, nk, 64), M = opt_B(o) * opt_T(o);
    double best = 0;
    for (int kind = 0; kind < (o->all_kinds ? NKINDS : 1); kind++)
        for (int i = 0; i < n; i++) {
            product p = product_of(kind, M, nk[i][0], nk[i][1]);
            double g = sgemm_line(o, kind, &p);
            if (kind == KIND_FWD) best = g > best ? g : best;
        }
    printf("sgemm_best shape=%s variant=%s threads=%ld corename=%s gflops=%.2f\n", o->sh->name,
           o->bv->name, o->threads, openblas_get_corename(), best);
    al_model_free(&m);
    return 0;
}

/* Every admitted split of every product, run on data the plan's probe
 * never saw, against the reference split: the claim the plans rest on
 * (al_gemm.h), checked under whichever OpenBLAS kernels this process got. */
static int verify_product(const product *p, al_gemm_plan *pl)
{
    if (al_gemm_plan_get(p->ta, p->tb, p->M, p->N, p->K, 1.0f, p->beta, pl) != 0) return -1;
    size_t na = (size_t)p->M * p->K, nb = (size_t)p->K * p->N, nc = (size_t)p->M * p->N;
    float *A = al_malloc(na * 4), *B = al_malloc(nb * 4), *ref = al_malloc(nc * 4);
    float *C = al_malloc(nc * 4);
    al_rng r;
    al_rng_seed(&r, 11);
    for (size_t i = 0; i < na; i++) A[i] = (float)al_rng_normal(&r);
    for (size_t i = 0; i < nb; i++) B[i] = (float)al_rng_normal(&r);
    run_product(p, pl->reference, A, B, ref);
    int ok = (pl->admitted >> pl->reference) & 1;
    for (int s = 0; s < AL_NSPLITS; s++) {
        if (!(pl->admitted & (1u << s))) continue;
        run_product(p, s, A, B, C);
        ok &= !memcmp(C, ref, nc * 4);
    }
    run_product(p, RUN_POOL, A, B, C);
    ok &= !memcmp(C, ref, nc * 4);
    free(A), free(B), free(ref), free(C);
    return ok;
}

static int cmd_splits(const opts *o)
{
    al_config c;
    al_err e;
    al_model m;
    if (make_config(&c, o, &e) != 0 || al_model_init(&m, &c.model, &e) != 0)
        return fprintf(stderr, "attnlab-bench: %s\n", e.msg), 2;
    int nk[64][2], n = model_products(&m, nk, 64), M = opt_B(o) * opt_T(o), bad = 0;
    for (int kind = 0; kind < NKINDS; kind++)
        for (int i = 0; i < n; i++) {
            product p = product_of(kind, M, nk[i][0], nk[i][1]);
            al_gemm_plan pl;
            int ok = verify_product(&p, &pl);
            if (ok < 0) continue;   /* not split at this thread count */
            printf("splits shape=%s threads=%ld corename=%s product=%s m=%d n=%d k=%d reference=%s "
                   "plan=%s", o->sh->name, o->threads, openblas_get_corename(), kind_names[kind],
                   p.M, p.N, p.K, al_split_name(pl.reference), al_split_name(pl.split));
            for (int s = 0; s < AL_NSPLITS; s++)
                if (pl.tried & (1u << s))
                    printf(" %s=%s", al_split_name(s), pl.admitted & (1u << s) ? "same" : "differs");
            printf(" verified=%d\n", ok);
            bad += !ok;
        }
    al_model_free(&m);
    return bad ? 1 : 0;
}

/* ------------------------------------------------------------ copy */

/* Memory bandwidth of a large memcpy (256 MiB, well past any cache), the
 * yardstick for decode, which reads its KV cache once per token: bytes read
 * per second, median of 9 copies after one that faults the pages in. */
static int cmd_copy(const opts *o)
{
    size_t n = (size_t)256 << 20;
    char *a = al_malloc(n), *b = al_malloc(n);
    memset(a, 1, n);
    double rate[9];
    for (int r = -1; r < 9; r++) {
        double t0 = al_now();
        memcpy(b, a, n);
        double t = al_now() - t0;
        if (r >= 0) rate[r] = n / t / 1e9;
        a[r & 1023] = b[(r * 7) & 1023];   /* keep the copies observable */
    }
    printf("copy bytes=%zu read_gbps=%.2f\n", n, median(rate, 9));
    free(a), free(b);
    (void)o;
    return 0;
}

static int cmd_flops(const opts *o)
{
    al_config c;
    al_err e;
    al_model m;
    if (make_config(&c, o, &e) != 0 || al_model_init(&m, &c.model, &e) != 0)
        return fprintf(stderr, "attnlab-bench: %s\n", e.msg), 2;
    printf("flops shape=%s variant=%s params=%zu matmul_params=%zu flops_per_token=%.0f "
           "need_mib=%.3f\n", o->sh->name, o->bv->name, m.n_params, matmul_params(&m),
           flops_per_token(&m, o->bv),
           need_bytes(&m, opt_B(o), opt_T(o)) / (1024.0 * 1024.0));
    al_model_free(&m);
    return 0;
}

/* ------------------------------------------------------------ options */

static const char usage[] =
    "usage: attnlab-bench sgemm|splits|train|flops --shape tiny|small|micro\n"
    "                     [--variant mha|gqa|mqa|mla] [--threads N] [--steps N] [--warmup N]\n"
    "                     [--min-time SEC] [--products fwd|all] [--split auto|rows|cols|grid|blas]\n"
    "                     [--seq-len T] [--batch B] [--n-head H]  (train: override the shape's;\n"
    "                      d_head = d_model / H)\n"
    "                     [--precision f32|bf16]      (train.precision of every product)\n"
    "                     [--attention-kernel auto|fused|dense|rows] (train.attention_kernel)\n"
    "       attnlab-bench copy          (memcpy bandwidth, for decode)\n"
    "       attnlab-bench info          (the OpenBLAS core this process got)\n"
    "Prints key=value lines; scripts/bench runs the whole benchmark.\n";

static int parse_long(const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "attnlab-bench: %s '%s' must be a whole number in [%ld, %ld]\n", flag,
                s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

static int find_name(const char *flag, const char *s, const void *table, size_t stride)
{
    int i = 0;
    for (const char *p = table; *(const char *const *)p; p += stride, i++)
        if (!strcmp(*(const char *const *)p, s)) return i;
    fprintf(stderr, "attnlab-bench: unknown %s '%s'\n", flag, s);
    return -1;
}

static int parse_one(opts *o, const char *a, const char *v)
{
    int i;
    if (!strcmp(a, "--shape")) {
        if ((i = find_name(a, v, shapes, sizeof shapes[0])) < 0) return -1;
        o->sh = &shapes[i];
    } else if (!strcmp(a, "--variant")) {
        if ((i = find_name(a, v, variants, sizeof variants[0])) < 0) return -1;
        o->bv = &variants[i];
    } else if (!strcmp(a, "--threads")) {
        return parse_long(a, v, 1, 256, &o->threads);
    } else if (!strcmp(a, "--seq-len")) {
        return parse_long(a, v, 1, 1 << 16, &o->seq_len);
    } else if (!strcmp(a, "--n-head")) {
        return parse_long(a, v, 1, 1 << 10, &o->n_head);
    } else if (!strcmp(a, "--batch")) {
        return parse_long(a, v, 1, 1 << 16, &o->batch);
    } else if (!strcmp(a, "--steps")) {
        return parse_long(a, v, 1, 100000, &o->steps);
    } else if (!strcmp(a, "--warmup")) {
        return parse_long(a, v, 0, 100000, &o->warmup);
    } else if (!strcmp(a, "--products")) {
        if (strcmp(v, "fwd") && strcmp(v, "all"))
            return fprintf(stderr, "attnlab-bench: --products '%s' must be fwd or all\n", v), -1;
        o->all_kinds = !strcmp(v, "all");
    } else if (!strcmp(a, "--split")) {
        o->split = -1;
        for (int s = 0; s < AL_NSPLITS; s++)
            if (!strcmp(v, al_split_name(s))) o->split = s;
        if (o->split < 0 && strcmp(v, "auto"))
            return fprintf(stderr, "attnlab-bench: --split '%s' must be auto, rows, cols, grid "
                           "or blas\n", v), -1;
    } else if (!strcmp(a, "--attention-kernel")) {
        if (al_config_attn_kernel(v, 1) < 0)
            return fprintf(stderr, "attnlab-bench: --attention-kernel '%s' must be auto, fused, "
                           "dense or rows\n", v), -1;
        o->kernel = v;
    } else if (!strcmp(a, "--precision")) {
        if (strcmp(v, "f32") && strcmp(v, "bf16"))
            return fprintf(stderr, "attnlab-bench: --precision '%s' must be f32 or bf16\n", v), -1;
        o->precision = v;
    } else if (!strcmp(a, "--min-time")) {
        char *end;
        o->min_time = strtod(v, &end);
        if (end == v || *end || !(o->min_time > 0 && o->min_time < 1000))
            return fprintf(stderr, "attnlab-bench: --min-time '%s' must be in (0, 1000)\n", v), -1;
    } else {
        return fprintf(stderr, "attnlab-bench: unknown option '%s'\n%s", a, usage), -1;
    }
    return 0;
}

static int parse(opts *o, int argc, char **argv)
{
    *o = (opts){.threads = 1, .steps = 5, .warmup = 2, .min_time = 0.5, .bv = &variants[0],
                .all_kinds = 1, .split = -1, .precision = "f32", .kernel = "auto"};
    if (argc < 2) return fputs(usage, stderr), -1;
    o->cmd = argv[1];
    for (int i = 2; i < argc; i += 2) {
        if (i + 1 >= argc)
            return fprintf(stderr, "attnlab-bench: option '%s' needs a value\n", argv[i]), -1;
        if (parse_one(o, argv[i], argv[i + 1]) != 0) return -1;
    }
    if (!o->sh && strcmp(o->cmd, "copy") && strcmp(o->cmd, "info"))
        return fprintf(stderr, "attnlab-bench: --shape is required\n"), -1;
    return 0;
}

int main(int argc, char **argv)
{
    al_err be;
    if (al_blas_follow_cpu(argv, &be) != 0)   /* as attnlab does (al_blascore.h) */
        return fprintf(stderr, "attnlab-bench: %s\n", be.msg), 2;
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
        return fputs(usage, stdout), 0;
    opts o;
    if (parse(&o, argc, argv) != 0) return 2;
    al_parallel_set_threads((int)o.threads);
    al_gemm_force_split(o.split);
    al_err e;
    if (al_gemm_set_precision(o.precision, &e) != 0)
        return fprintf(stderr, "attnlab-bench: %s\n", e.msg), 2;
    if (!strcmp(o.cmd, "sgemm")) return cmd_sgemm(&o);
    if (!strcmp(o.cmd, "train")) return cmd_train(&o);
    if (!strcmp(o.cmd, "flops")) return cmd_flops(&o);
    if (!strcmp(o.cmd, "splits")) return cmd_splits(&o);
    if (!strcmp(o.cmd, "copy")) return cmd_copy(&o);
    if (!strcmp(o.cmd, "info")) return printf("info corename=%s\n", openblas_get_corename()), 0;
    fprintf(stderr, "attnlab-bench: unknown command '%s'\n%s", o.cmd, usage);
    return 2;
}
