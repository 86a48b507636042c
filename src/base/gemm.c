/*
 * gemm.c - matrix products over the pool, each shape split the way its
 * first-use measurement found fastest (contract in al_gemm.h).
 */
#include "al_gemm.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_bf16.h"
#include "al_parallel.h"
#include "al_util.h"

#define GEMM_GRAIN 32   /* rows or columns per unit of a cut */
#define PLAN_SLOTS 256
#define PLAN_REPS 3     /* timed runs per candidate; the best counts */
#define BLAS_MARGIN 0.9 /* OpenBLAS's threads only when 10 % faster than the pool */

static const char *const split_names[] = {"rows", "cols", "grid", "blas"};
_Static_assert(sizeof split_names / sizeof *split_names == AL_NSPLITS, "split names");

const char *al_split_name(int split)
{
    AL_ASSERT(split >= 0 && split < AL_NSPLITS);
    return split_names[split];
}

/* ------------------------------------------------------------ precision */

static atomic_int precision = AL_PRECISION_F32;

int al_gemm_precision_parse(const char *name, int *p, al_err *e)
{
    *p = AL_PRECISION_F32;
    if (!name || !name[0] || strcmp(name, "f32") == 0) return 0;
    AL_ASSERT(strcmp(name, "bf16") == 0);   /* the config's validation refused others */
    if (al_bf16_check(e) != 0) return -1;
    *p = AL_PRECISION_BF16;
    return 0;
}

int al_gemm_set_precision(const char *name, al_err *e)
{
    if (!name || !name[0] || strcmp(name, "f32") == 0) {
        atomic_store(&precision, AL_PRECISION_F32);
        return 0;
    }
    AL_ASSERT(strcmp(name, "bf16") == 0);   /* the config's validation refused others */
    if (al_bf16_check(e) != 0) return -1;
    atomic_store(&precision, AL_PRECISION_BF16);
    return 0;
}

int al_gemm_precision(void) { return atomic_load(&precision); }

int al_gemm_enter(int p)
{
    return p < 0 ? -1 : atomic_exchange(&precision, p);
}

void al_gemm_leave(int was)
{
    if (was >= 0) atomic_store(&precision, was);
}

/* ------------------------------------------------------------ counting */

/* Products are whole numbers of FLOPs: an integer counter adds them
 * exactly in any order, so a threaded run counts what a serial one does. */
static atomic_int counting;
static atomic_llong counted;

void al_flops_count_begin(void)
{
    atomic_store(&counted, 0);
    atomic_store(&counting, 1);
}

double al_flops_count_end(void)
{
    atomic_store(&counting, 0);
    return (double)atomic_load(&counted);
}

double al_flops_counted(void) { return (double)atomic_load(&counted); }

void al_flops_add(double flops)
{
    if (atomic_load_explicit(&counting, memory_order_relaxed))
        atomic_fetch_add(&counted, (long long)flops);
}

/* One product's 2*M*N*K, counted where it enters the product layer (the
 * splits and a plan's probes below are not counted again). */
static void count_product(int M, int N, int K)
{
    if (M > 0 && N > 0 && K > 0) al_flops_add(2.0 * M * N * K);
}

/* ------------------------------------------------------------ one thread */

int al_bf16_worth(int M, int N, int K)
{
    return N >= AL_BF16_MIN_N && (long long)M * N * K >= AL_BF16_MIN_MNK;
}

static int use_bf16(int M, int N, int K)
{
    return atomic_load(&precision) == AL_PRECISION_BF16 && al_bf16_worth(M, N, K);
}

/* One product on the calling thread, in bf16 or f32 as decided for the
 * whole product (a split's blocks follow the whole product's decision, so
 * a product is never half bf16). Not counted: its callers count. */
static void here_packed(int bf16, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K,
                        float alpha, const float *A, int lda, const uint16_t *ap, const float *B,
                        int ldb, const uint16_t *bp, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0) return;
    AL_ASSERT(ldc >= N);
    if (K <= 0) {
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                float *c = C + (size_t)i * ldc + j;
                *c = beta == 0.0f ? 0.0f : beta * *c;   /* beta 0 ignores NaN */
            }
        al_bf16_memo_written(C, M, N, ldc);
        return;
    }
    /* OpenBLAS only prints a warning for a bad leading dimension and
     * returns with C unwritten: assert instead. */
    AL_ASSERT(lda >= (ta == CblasNoTrans ? K : M));   /* A (M, K) or (K, M) */
    AL_ASSERT(ldb >= (tb == CblasNoTrans ? N : K));   /* B (K, N) or (N, K) */
    if (bf16)
        al_bf16_gemm_packed(ta, tb, M, N, K, alpha, A, lda, ap, B, ldb, bp, beta, C, ldc);
    else
        cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    al_bf16_memo_written(C, M, N, ldc);   /* a kept packing of C is stale now */
}

static void here(int bf16, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K,
                 float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                 float *C, int ldc)
{
    here_packed(bf16, ta, tb, M, N, K, alpha, A, lda, NULL, B, ldb, NULL, beta, C, ldc);
}

void al_sgemm_here(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                   const float *A, int lda, const float *B, int ldb, float beta, float *C,
                   int ldc)
{
    count_product(M, N, K);
    here(use_bf16(M, N, K), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* ------------------------------------------------------------ splits */

typedef struct gemm_job {
    CBLAS_TRANSPOSE ta, tb;
    int M, N, K, lda, ldb, ldc;
    int rows, cols;   /* the grid: rows x cols blocks of C */
    int bf16;         /* decided once for the whole product */
    float alpha, beta;
    const float *A, *B;
    float *C;
    const uint16_t *ap, *bp;   /* bf16: A (B) packed once for every block (share) */
} gemm_job;

/* Block [r0, r1) x [c0, c1) of C: one sgemm over the full K, so every
 * element sees the sums a whole-matrix call would give it. */
static void gemm_block(const gemm_job *g, long r0, long r1, long c0, long c1)
{
    const float *A = g->ta == CblasNoTrans ? g->A + r0 * g->lda : g->A + r0;
    const float *B = g->tb == CblasNoTrans ? g->B + c0 : g->B + c0 * g->ldb;
    /* a shared packing is of the whole operand: only blocks that read all of it use it */
    const uint16_t *ap = r0 == 0 && r1 == g->M ? g->ap : NULL;
    const uint16_t *bp = c0 == 0 && c1 == g->N ? g->bp : NULL;
    here_packed(g->bf16, g->ta, g->tb, (int)(r1 - r0), (int)(c1 - c0), g->K, g->alpha, A, g->lda,
                ap, B, g->ldb, bp, g->beta, g->C + r0 * g->ldc + c0, g->ldc);
}

/* Blocks [lo, hi) of the grid, row-major over (rows, cols). */
static void gemm_blocks(void *ctx, long lo, long hi, int tid)
{
    const gemm_job *g = ctx;
    for (long b = lo; b < hi; b++) {
        int r = (int)(b / g->cols), c = (int)(b % g->cols);
        gemm_block(g, al_parallel_cut(g->M, GEMM_GRAIN, g->rows, r),
                   al_parallel_cut(g->M, GEMM_GRAIN, g->rows, r + 1),
                   al_parallel_cut(g->N, GEMM_GRAIN, g->cols, c),
                   al_parallel_cut(g->N, GEMM_GRAIN, g->cols, c + 1));
    }
    (void)tid;
}

/* Units of GEMM_GRAIN along a side, capped by the threads. */
static int side_chunks(int len, int threads)
{
    int units = (len + GEMM_GRAIN - 1) / GEMM_GRAIN;
    return units < threads ? units : threads;
}

/* The grid of a split at t threads: rows x cols blocks. The 2-D grid
 * splits t = r * c with r, c > 1 so that blocks are as square as the
 * divisors allow; it does not exist below 4 threads (nor for t prime). */
static int grid_of(int split, int M, int N, int t, int *rows, int *cols)
{
    *rows = *cols = 1;
    if (split == AL_SPLIT_ROWS) *rows = side_chunks(M, t);
    else if (split == AL_SPLIT_COLS) *cols = side_chunks(N, t);
    else if (split == AL_SPLIT_GRID) {
        double best = 0;
        for (int r = 2; r <= t / 2; r++) {
            if (t % r) continue;
            double a = ((double)M / r) / ((double)N / (t / r)), sq = a < 1 ? a : 1 / a;
            if (sq > best && side_chunks(M, r) == r && side_chunks(N, t / r) == t / r)
                best = sq, *rows = r, *cols = t / r;
        }
    }
    return *rows * *cols;
}

static void run_blas(const gemm_job *g, int t)
{
    al_parallel_rest();   /* idle workers would share the cores with OpenBLAS's */
    openblas_set_num_threads(t);
    here(g->bf16, g->ta, g->tb, g->M, g->N, g->K, g->alpha, g->A, g->lda, g->B, g->ldb,
         g->beta, g->C, g->ldc);
    openblas_set_num_threads(1);
}

/* ---- a split's shared operand, packed once (bf16) */

#define SHARE_MIN 65536L   /* values: below, a pool round costs more than packing twice */
#define SHARE_GRAIN 16     /* rows per unit of the packing's cut */

static atomic_int share_off = -1;   /* AL_BF16_SHARE=0, or al_gemm_share_disable */
static atomic_long shares;          /* al_gemm_shares */

void al_gemm_share_disable(int off) { atomic_store(&share_off, off ? 1 : 0); }
long al_gemm_shares(void) { return atomic_load(&shares); }

static int share_on(void)
{
    int off = atomic_load_explicit(&share_off, memory_order_relaxed);
    if (off < 0) {
        const char *v = getenv("AL_BF16_SHARE");
        off = v && strcmp(v, "0") == 0;
        atomic_store_explicit(&share_off, off, memory_order_relaxed);
    }
    return !off;
}

typedef struct share_job {
    const float *x;
    size_t cols, ld;
    uint16_t *out;
} share_job;

static void share_rows(void *ctx, long lo, long hi, int tid)
{
    const share_job *j = ctx;
    al_bf16_pack_rows(j->out + (size_t)lo * j->cols, j->x + (size_t)lo * j->ld, (size_t)(hi - lo),
                      j->cols, j->ld);
    (void)tid;
}

/* A bf16 split along one side reads the other operand whole in every
 * block (rows: all of B; columns: all of A): the pool packs it once, each
 * thread a share of its rows, into the caller's buffer, and the blocks
 * read that. The bits are those of each block packing it (a packing
 * depends on the values only). */
static void share(gemm_job *g)
{
    if (!g->bf16 || (g->rows > 1) == (g->cols > 1) || !share_on()) return;
    int by_rows = g->cols == 1, tr = by_rows ? g->tb != CblasNoTrans : g->ta != CblasNoTrans;
    long a = by_rows ? g->K : g->M, b = by_rows ? g->N : g->K;   /* op(x)'s rows, cols */
    long rows = tr ? b : a, cols = tr ? a : b;                   /* as stored */
    if (rows * cols < SHARE_MIN) return;
    share_job j = {by_rows ? g->B : g->A, (size_t)cols, (size_t)(by_rows ? g->ldb : g->lda),
                   al_bf16_shared_buffer((size_t)(rows * cols))};
    al_parallel_for(rows, SHARE_GRAIN, share_rows, &j);
    atomic_fetch_add_explicit(&shares, 1, memory_order_relaxed);
    if (by_rows) g->bp = j.out;
    else g->ap = j.out;
}

/* Runs g with a split; 0, or -1 when the split does not apply here. */
static int run_split(gemm_job g, int split)
{
    int t = al_parallel_chunks(1L << 30, 1);
    if (split == AL_SPLIT_BLAS) {
        if (t < 2) return -1;
        run_blas(&g, t);
        return 0;
    }
    int blocks = grid_of(split, g.M, g.N, t, &g.rows, &g.cols);
    if (blocks < 2) return -1;
    share(&g);
    al_parallel_for(blocks, 1, gemm_blocks, &g);
    return 0;
}

static void sgemm_split(int split, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K,
                        float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                        float *C, int ldc);

/* ------------------------------------------------------------ plans */

typedef struct plan_key {
    int ta, tb, M, N, K, threads;
    int alpha_one, beta_zero, beta_one;   /* what OpenBLAS picks kernels by */
    int precision;                        /* a bf16 plan probes bf16 products */
} plan_key;

static struct {
    pthread_mutex_t mu;       /* guards the table */
    pthread_mutex_t planning; /* one plan measured at a time */
    plan_key key[PLAN_SLOTS];
    al_gemm_plan plan[PLAN_SLOTS];
    int n, next;
} plans = {.mu = PTHREAD_MUTEX_INITIALIZER, .planning = PTHREAD_MUTEX_INITIALIZER};

static atomic_int forced = -1;

void al_gemm_force_split(int split)
{
    AL_ASSERT(split >= -1 && split < AL_NSPLITS);
    atomic_store(&forced, split);
}

static int lookup(const plan_key *k, al_gemm_plan *out)
{
    int hit = 0;
    pthread_mutex_lock(&plans.mu);
    for (int i = 0; i < plans.n && !hit; i++)
        if (!memcmp(&plans.key[i], k, sizeof *k)) *out = plans.plan[i], hit = 1;
    pthread_mutex_unlock(&plans.mu);
    return hit;
}

static void store(const plan_key *k, const al_gemm_plan *p)
{
    pthread_mutex_lock(&plans.mu);
    int i = plans.n < PLAN_SLOTS ? plans.n++ : plans.next++ % PLAN_SLOTS;
    plans.key[i] = *k;
    plans.plan[i] = *p;
    pthread_mutex_unlock(&plans.mu);
}

/* The probe: dense operands of the shape filled with random values. */
typedef struct probe {
    gemm_job g;
    float *a, *b, *c0, *ref;
    size_t nc;
} probe;

static float *random_floats(al_rng *r, size_t n)
{
    float *x = al_malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(al_rng_uniform(r) * 2.0 - 1.0);
    return x;
}

static void probe_init(probe *p, const plan_key *k, float alpha, float beta)
{
    al_rng r;
    al_rng_seed(&r, 0x5eed);
    int ra = k->ta == CblasNoTrans ? k->M : k->K, ca = k->ta == CblasNoTrans ? k->K : k->M;
    int rb = k->tb == CblasNoTrans ? k->K : k->N, cb = k->tb == CblasNoTrans ? k->N : k->K;
    p->nc = (size_t)k->M * k->N;
    p->a = random_floats(&r, (size_t)ra * ca);
    p->b = random_floats(&r, (size_t)rb * cb);
    p->c0 = random_floats(&r, p->nc);
    p->ref = al_malloc(p->nc * sizeof(float));
    p->g = (gemm_job){(CBLAS_TRANSPOSE)k->ta, (CBLAS_TRANSPOSE)k->tb, k->M, k->N, k->K, ca, cb,
                      k->N, 1, 1, k->precision == AL_PRECISION_BF16 && al_bf16_worth(k->M, k->N, k->K),
                      alpha, beta, p->a, p->b, al_malloc(p->nc * sizeof(float)), NULL, NULL};
}

static void probe_free(probe *p)
{
    free(p->a), free(p->b), free(p->c0), free(p->ref), free(p->g.C);
}

/* One run of a split from the same starting C; 0, or -1 if it does not apply. */
static int probe_run(probe *p, int split)
{
    memcpy(p->g.C, p->c0, p->nc * sizeof(float));
    return run_split(p->g, split);
}

/* Which of the splits in mask give the reference's bits (into
 * pl->admitted), then the best of PLAN_REPS timed runs of each, candidates
 * taking turns so that a change in the machine's load hits them alike. */
static void time_splits(probe *p, al_gemm_plan *pl, unsigned mask)
{
    for (int s = 0; s < AL_NSPLITS; s++) {
        if (!(mask & (1u << s))) continue;
        pl->seconds[s] = 0;
        if (probe_run(p, s) != 0) continue;
        pl->tried |= 1u << s;
        if (!memcmp(p->g.C, p->ref, p->nc * sizeof(float))) pl->admitted |= 1u << s;
    }
    for (int rep = 0; rep < PLAN_REPS; rep++)
        for (int s = 0; s < AL_NSPLITS; s++) {
            if (!(mask & pl->admitted & (1u << s))) continue;
            /* an untimed run first, so that the timed one finds the
             * threads awake as a training step's loops find them: a
             * sleeping worker can take longer to wake than the product
             * takes (C's values do not matter here, only the time) */
            run_split(p->g, s);
            double t0 = al_now();
            run_split(p->g, s);
            double dt = al_now() - t0;
            if (rep == 0 || dt < pl->seconds[s]) pl->seconds[s] = dt;
        }
}

/* OpenBLAS's threads poll for work for a long while after a call (2^28
 * cycles by default, about 0.1 s), on the cores the pool needs: every pool
 * loop in that time runs at about one thread's speed. Its pthreads build
 * exports blas_thread_shutdown_ (its fork handler; the next threaded call
 * starts the threads again); where it is missing, OpenBLAS's threads
 * cannot be measured fairly and are not a candidate. */
static void (*blas_stop_fn(void))(void)
{
    static void (*stop)(void);
    static int looked;
    if (!looked) {
        *(void **)&stop = dlsym(RTLD_DEFAULT, "blas_thread_shutdown_");
        looked = 1;
    }
    return stop;
}

int al_blas_threads_stop(void)
{
    void (*stop)(void) = blas_stop_fn();
    if (stop) stop();
    return stop ? 0 : -1;
}

/* The pool's splits first, then OpenBLAS's threads, charged with what they
 * cost the pool loop after them. Measured the other way (the first cut of
 * this code), the pool ran in the polling's shadow and OpenBLAS's threads
 * won where a pool split was twice as fast (scripts/bench, AMD EPYC, AVX-512
 * kernels, 4096x128x128: rows 390 GFLOP/s, OpenBLAS's threads 158), and
 * each plan's choice spoiled the next plan's measurement. */
static void measure(probe *p, al_gemm_plan *pl)
{
    AL_ASSERT(probe_run(p, pl->reference) == 0);
    memcpy(p->ref, p->g.C, p->nc * sizeof(float));
    unsigned pool = (1u << AL_NSPLITS) - 1 - (1u << AL_SPLIT_BLAS);
    time_splits(p, pl, pool);
    pl->split = pl->reference;
    for (int s = 0; s < AL_NSPLITS; s++)
        if (s != AL_SPLIT_BLAS && (pl->admitted & (1u << s)) &&
            pl->seconds[s] < pl->seconds[pl->split])
            pl->split = s;
    /* bf16 products are oneDNN's on one thread: OpenBLAS's threads have
     * nothing to offer them */
    if (!blas_stop_fn() || atomic_load(&precision) == AL_PRECISION_BF16) return;
    time_splits(p, pl, 1u << AL_SPLIT_BLAS);
    if (pl->admitted & (1u << AL_SPLIT_BLAS)) {
        /* the pool's best split right after OpenBLAS's threads: its extra
         * time is part of their cost */
        double t0 = al_now();
        run_split(p->g, pl->split);
        double after = al_now() - t0 - pl->seconds[pl->split];
        pl->seconds[AL_SPLIT_BLAS] += after > 0 ? after : 0;
    }
    al_blas_threads_stop();   /* the next measurement, and the run, unshadowed */
    if ((pl->admitted & (1u << AL_SPLIT_BLAS)) &&
        pl->seconds[AL_SPLIT_BLAS] < BLAS_MARGIN * pl->seconds[pl->split])
        pl->split = AL_SPLIT_BLAS;
}

static int plan_key_of(plan_key *k, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K,
                       float alpha, float beta)
{
    int t = al_parallel_chunks(1L << 30, 1);
    if (t < 2 || M <= 0 || N <= 0 || K <= 0 || 2.0 * M * N * K < AL_GEMM_PAR_FLOPS ||
        (side_chunks(M, t) < 2 && side_chunks(N, t) < 2))
        return -1;
    memset(k, 0, sizeof *k);   /* compared with memcmp */
    *k = (plan_key){ta, tb, M, N, K, t, alpha == 1.0f, beta == 0.0f, beta == 1.0f,
                    atomic_load(&precision)};
    return 0;
}

int al_gemm_plan_get(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                     float beta, al_gemm_plan *out)
{
    plan_key k;
    if (plan_key_of(&k, ta, tb, M, N, K, alpha, beta) != 0) return -1;
    if (lookup(&k, out)) return 0;
    pthread_mutex_lock(&plans.planning);
    if (!lookup(&k, out)) {   /* nobody planned it while we waited */
        al_gemm_plan p = {.reference = M >= N || side_chunks(N, k.threads) < 2
                                           ? AL_SPLIT_ROWS : AL_SPLIT_COLS};
        if (p.reference == AL_SPLIT_ROWS && side_chunks(M, k.threads) < 2)
            p.reference = AL_SPLIT_COLS;
        probe pr;
        probe_init(&pr, &k, alpha, beta);
        measure(&pr, &p);
        probe_free(&pr);
        store(&k, &p);
        *out = p;
    }
    pthread_mutex_unlock(&plans.planning);
    return 0;
}

void al_sgemm_pool(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                   const float *A, int lda, const float *B, int ldb, float beta, float *C,
                   int ldc)
{
    al_gemm_plan p;
    count_product(M, N, K);
    if (al_gemm_plan_get(ta, tb, M, N, K, alpha, beta, &p) != 0) {
        here(use_bf16(M, N, K), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    int f = atomic_load(&forced);
    sgemm_split(f >= 0 ? f : p.split, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void sgemm_split(int split, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K,
                        float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                        float *C, int ldc)
{
    AL_ASSERT(split >= 0 && split < AL_NSPLITS);
    gemm_job g = {ta, tb, M, N, K, lda, ldb, ldc, 1, 1, use_bf16(M, N, K), alpha, beta, A, B, C,
                  NULL, NULL};
    if (M <= 0 || N <= 0) return;
    if (run_split(g, split) != 0 && run_split(g, AL_SPLIT_ROWS) != 0 &&
        run_split(g, AL_SPLIT_COLS) != 0) {
        here(g.bf16, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    /* the blocks wrote C on the pool's threads: the caller's memo drops
     * what it kept of C too (al_bf16.h) */
    al_bf16_memo_written(C, M, N, ldc);
}

void al_sgemm_split(int split, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K,
                    float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                    float *C, int ldc)
{
    count_product(M, N, K);
    sgemm_split(split, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* ------------------------------------------------------------ the machine */

void al_cpu_model(char *out, size_t n)
{
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    snprintf(out, n, "unknown");
    while (f && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon) continue;
        colon += 1 + strspn(colon + 1, " \t");
        colon[strcspn(colon, "\n")] = 0;
        snprintf(out, n, "%s", colon);
        break;
    }
    if (f) fclose(f);
}

const char *al_blas_core(void)
{
    const char *c = openblas_get_corename();
    return c && c[0] ? c : "unknown";
}
