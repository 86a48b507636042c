/*
 * bench.c - attnlab-bench, the measuring half of scripts/bench.
 *
 *   attnlab-bench sgemm --shape S [--threads N] [--min-time SEC]
 *   attnlab-bench train --shape S --variant V [--threads N] [--steps N] [--warmup N]
 *   attnlab-bench flops --shape S --variant V
 *   attnlab-bench copy
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

#include "al_config.h"
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
} opts;

/* ------------------------------------------------------------ config */

static int make_config(al_config *c, const opts *o, al_err *e)
{
    al_config_defaults(c);
    al_model_config *m = &c->model;
    const shape *s = o->sh;
    m->n_layer = s->n_layer;
    m->d_model = s->d_model;
    m->n_head = s->n_head;
    m->d_head = s->d_head;
    m->seq_len = s->seq_len;
    m->vocab_size = 256;   /* bytes */
    c->train.batch_size = s->batch;
    const al_variant_ops *ops = al_variant_find(o->bv->registry);
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
    const al_variant_ops *v = c->attn;
    double BT = (double)B * T, D = c->d_model, F = m->d_ff, V = c->vocab_size;
    double per_layer = 4 * BT * D + 2 * BT + 2 * BT * F + v->act_floats(&m->ashape, B, T);
    double acts = c->n_layer * per_layer + 4 * BT * D + 2 * BT + BT * V + BT * F +
                  v->scratch_floats(&m->ashape, B, T);
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
 * random batch: zero, forward, backward, clip at 1.0, AdamW. */
static double bench_step(cell *k, const al_config *c, int B, int T)
{
    for (int i = 0; i < B * T; i++) {
        k->in[i] = (int)al_rng_below(&k->rng, 256);
        k->tgt[i] = (int)al_rng_below(&k->rng, 256);
    }
    al_model_zero_grad(&k->model);
    double loss = al_model_forward(&k->model, k->in, k->tgt, NULL, B, T);
    al_model_backward(&k->model);
    al_clip_grad_norm(&k->model, c->train.grad_clip);
    al_adamw_step(&k->opt, &k->model, c->train.lr);
    return loss;
}

static void print_train(const opts *o, const cell *k, double *dt, double *dc, int n,
                        double base, long faults, double l0, double l1)
{
    const al_model *m = &k->model;
    int B = o->sh->batch, T = o->sh->seq_len;
    double med = median(dt, n), tok = (double)B * T / med;
    double fpt = flops_per_token(m, o->bv);
    printf("train shape=%s variant=%s threads=%ld corename=%s steps=%d step_s=%.6f cpu_s=%.6f "
           "tok_s=%.1f flops_per_token=%.0f model_gflops=%.3f params=%zu "
           "matmul_params=%zu rss_base_mib=%.1f rss_peak_mib=%.1f need_mib=%.1f "
           "faults_per_step=%.1f loss_first=%.6f loss_last=%.6f\n",
           o->sh->name, o->bv->name, o->threads, openblas_get_corename(), n, med,
           median(dc, n), tok, fpt,
           tok * fpt / 1e9, m->n_params, matmul_params(m), base, rss_mib(),
           need_bytes(m, B, T) / (1024.0 * 1024.0), (double)faults / n, l0, l1);
}

static int cmd_train(const opts *o)
{
    al_config c;
    al_err e;
    if (make_config(&c, o, &e) != 0) return fprintf(stderr, "attnlab-bench: %s\n", e.msg), 2;
    double base = rss_mib();
    int B = o->sh->batch, T = o->sh->seq_len;
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
    long faults = 0;
    for (long s = 0; s < o->warmup + o->steps; s++) {
        if (s == o->warmup) faults = minor_faults();
        double t0 = al_now(), c0 = cpu_now(), loss = bench_step(&k, &c, B, T);
        if (s >= o->warmup) dt[s - o->warmup] = al_now() - t0;
        if (s >= o->warmup) dc[s - o->warmup] = cpu_now() - c0;
        if (s == 0) l0 = loss;
        l1 = loss;
    }
    print_train(o, &k, dt, dc, (int)o->steps, base, minor_faults() - faults, l0, l1);
    free(dt), free(dc), free(k.in), free(k.tgt);
    al_adamw_free(&k.opt);
    al_model_free(&k.model);
    return 0;
}

/* ------------------------------------------------------------ sgemm */

/* GFLOP/s of out (M, N) = A (M, K) . W (N, K)^T, the layout of every
 * forward projection, a median over repeats: with OpenBLAS's own threads
 * (the best the library does at this shape), or with pool != 0 as attnlab
 * runs it, al_linear_forward cut over its own pool with OpenBLAS at 1. */
static double time_sgemm(int M, int N, int K, double min_time, int threads, int pool)
{
    al_parallel_set_threads(pool ? threads : 1);   /* sets OpenBLAS to 1 */
    if (!pool) openblas_set_num_threads(threads);
    float *A = al_malloc((size_t)M * K * 4), *W = al_malloc((size_t)N * K * 4);
    float *C = al_malloc((size_t)M * N * 4);
    for (size_t i = 0; i < (size_t)M * K; i++) A[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)N * K; i++) W[i] = (float)(i % 5) * 0.1f;
    double rate[9];
    for (int r = -1; r < 9; r++) {   /* r = -1 warms up */
        double t0 = al_now(), t;
        long reps = 0;
        do {
            if (pool) al_linear_forward(C, A, W, M, K, N);
            else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, W, K,
                             0.0f, C, N);
            reps++;
        } while ((t = al_now() - t0) < min_time / 10);
        if (r >= 0) rate[r] = 2.0 * M * N * K * reps / t / 1e9;
    }
    free(A), free(W), free(C);
    return median(rate, 9);
}

/* The distinct (N, K) of the model's forward products, each at B*T rows. */
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

static int cmd_sgemm(const opts *o)
{
    al_config c;
    al_err e;
    al_model m;
    if (make_config(&c, o, &e) != 0 || al_model_init(&m, &c.model, &e) != 0)
        return fprintf(stderr, "attnlab-bench: %s\n", e.msg), 2;
    int nk[64][2], n = model_products(&m, nk, 64), M = o->sh->batch * o->sh->seq_len;
    double best = 0;
    for (int i = 0; i < n; i++) {
        int t = (int)o->threads;
        double g = time_sgemm(M, nk[i][0], nk[i][1], o->min_time, t, 0);
        double p = t > 1 ? time_sgemm(M, nk[i][0], nk[i][1], o->min_time, t, 1) : g;
        printf("sgemm shape=%s variant=%s threads=%ld corename=%s m=%d n=%d k=%d gflops=%.2f "
               "pool_gflops=%.2f\n", o->sh->name, o->bv->name, o->threads,
               openblas_get_corename(), M, nk[i][0], nk[i][1], g, p);
        best = g > best ? g : best;
    }
    printf("sgemm_best shape=%s variant=%s threads=%ld corename=%s gflops=%.2f\n", o->sh->name,
           o->bv->name, o->threads, openblas_get_corename(), best);
    al_model_free(&m);
    return 0;
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
           need_bytes(&m, o->sh->batch, o->sh->seq_len) / (1024.0 * 1024.0));
    al_model_free(&m);
    return 0;
}

/* ------------------------------------------------------------ options */

static const char usage[] =
    "usage: attnlab-bench sgemm|train|flops --shape tiny|small|micro [--variant mha|gqa|mqa|mla]\n"
    "                     [--threads N] [--steps N] [--warmup N] [--min-time SEC]\n"
    "       attnlab-bench copy          (memcpy bandwidth, for decode)\n"
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
    } else if (!strcmp(a, "--steps")) {
        return parse_long(a, v, 1, 100000, &o->steps);
    } else if (!strcmp(a, "--warmup")) {
        return parse_long(a, v, 0, 100000, &o->warmup);
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
    *o = (opts){.threads = 1, .steps = 5, .warmup = 2, .min_time = 0.5, .bv = &variants[0]};
    if (argc < 2) return fputs(usage, stderr), -1;
    o->cmd = argv[1];
    for (int i = 2; i < argc; i += 2) {
        if (i + 1 >= argc)
            return fprintf(stderr, "attnlab-bench: option '%s' needs a value\n", argv[i]), -1;
        if (parse_one(o, argv[i], argv[i + 1]) != 0) return -1;
    }
    if (!o->sh && strcmp(o->cmd, "copy"))
        return fprintf(stderr, "attnlab-bench: --shape is required\n"), -1;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
        return fputs(usage, stdout), 0;
    opts o;
    if (parse(&o, argc, argv) != 0) return 2;
    al_parallel_set_threads((int)o.threads);
    if (!strcmp(o.cmd, "sgemm")) return cmd_sgemm(&o);
    if (!strcmp(o.cmd, "train")) return cmd_train(&o);
    if (!strcmp(o.cmd, "flops")) return cmd_flops(&o);
    if (!strcmp(o.cmd, "copy")) return cmd_copy(&o);
    fprintf(stderr, "attnlab-bench: unknown command '%s'\n%s", o.cmd, usage);
    return 2;
}
