/*
 * bf16.c - train.precision bf16's products through oneDNN (al_bf16.h).
 */
#include "al_bf16.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "al_kernels.h"   /* AL_CLONES */

/* Branch-free (a select), so that pack's loop vectorises. */
static inline uint16_t to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    uint32_t nan = (u >> 16) | 0x40;                    /* NaN stays a quiet NaN */
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;   /* nearest, ties to even */
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : r);
}

float al_bf16_round(float x)
{
    uint32_t u = (uint32_t)to_bf16(x) << 16;
    float y;
    memcpy(&y, &u, sizeof y);
    return y;
}

/* rows x cols of x at ld, rounded in software, into out densely. */
AL_CLONES static void pack_rows_sw(uint16_t *restrict out, const float *restrict x, size_t rows,
                                   size_t cols, size_t ld)
{
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) out[i * cols + j] = to_bf16(x[i * ld + j]);
}

/* The same with the CPU's own conversion, 32 floats an instruction, each
 * row's tail by a masked load and store (short rows are common: a head's
 * slice of a projection). Why: the software loop above was 13.6 % of a
 * 1-thread bf16 training step (perf, the bench's small mha shape) and 17 %
 * at 2 threads. Same rounding (nearest even, NaN quieted as above), except
 * that the instruction reads denormal inputs as zero. */
#if defined(__x86_64__) && (defined(__clang__) || __GNUC__ >= 11)
#include <immintrin.h>
#define HAVE_PACK_HW 1
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
static void pack_rows_hw(uint16_t *restrict out, const float *restrict x, size_t rows,
                         size_t cols, size_t ld)
{
    for (size_t i = 0; i < rows; i++) {
        const float *xr = x + i * ld;
        uint16_t *o = out + i * cols;
        size_t j = 0;
        for (; j + 32 <= cols; j += 32) {
            __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(xr + j + 16), _mm512_loadu_ps(xr + j));
            _mm512_storeu_si512((void *)(o + j), (__m512i)v);
        }
        for (; j < cols; j += 16) {
            size_t left = cols - j;
            __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
            __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, xr + j));
            _mm256_mask_storeu_epi16((void *)(o + j), m, (__m256i)h);
        }
    }
}
#endif

int al_bf16_pack_hw(void)
{
#ifdef HAVE_PACK_HW
    static atomic_int has = -1;   /* every thread that asks first computes the same */
    int h = atomic_load_explicit(&has, memory_order_relaxed);
    if (h < 0) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && !getenv("AL_BF16_PACK_SW");
        atomic_store_explicit(&has, h, memory_order_relaxed);
    }
    return h;
#else
    return 0;
#endif
}

static void pack_rows(uint16_t *out, const float *x, size_t rows, size_t cols, size_t ld)
{
#ifdef HAVE_PACK_HW
    if (al_bf16_pack_hw()) {
        pack_rows_hw(out, x, rows, cols, ld);
        return;
    }
#endif
    pack_rows_sw(out, x, rows, cols, ld);
}

void al_bf16_pack(uint16_t *out, const float *x, size_t n)
{
    pack_rows(out, x, 1, n, n);
}

void al_bf16_pack_rows(uint16_t *out, const float *x, size_t rows, size_t cols, size_t ld)
{
    pack_rows(out, x, rows, cols, ld);
}

#ifndef AL_HAVE_DNNL

int al_bf16_check(al_err *e)
{
    return al_errf(e, "train.precision bf16: this attnlab was built without oneDNN "
                      "(install libdnnl-dev and rebuild; meson option -Ddnnl)");
}

const char *al_bf16_isa(void) { return "none"; }

void al_bf16_memo_begin(void) {}
void al_bf16_memo_end(void) {}
void al_bf16_memo_disable(int off) { (void)off; }
long al_bf16_memo_hits(void) { return 0; }
void al_bf16_memo_written(const float *x, int rows, int cols, int ld)
{
    (void)x, (void)rows, (void)cols, (void)ld;
}

void al_bf16_gemm_packed(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K,
                         float alpha, const float *A, int lda, const uint16_t *ap,
                         const float *B, int ldb, const uint16_t *bp, float beta, float *C,
                         int ldc)
{
    AL_ASSERT(!"bf16 products without oneDNN");   /* al_bf16_check refused the run */
}

void al_bf16_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C,
                  int ldc)
{
    AL_ASSERT(!"bf16 products without oneDNN");
}

uint16_t *al_bf16_shared_buffer(size_t n)
{
    AL_ASSERT(!"bf16 products without oneDNN");
    return NULL;
}

#else

#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>

/* libgomp's: the calling thread's own team size (omp.h needs -fopenmp). */
extern void omp_set_num_threads(int n);

#define SLOTS 256       /* threads that may call (the pool's and the main thread) */
#define PRIMS 512       /* primitives kept per thread (a shape per causal query block
                           of attention, so many at long contexts); then the oldest goes */
#define BUCKETS 1024    /* the primitives' hash table, a power of 2 above PRIMS */
#define MEMO 16        /* operands a memo scope keeps per thread */
#define DNNL_OK(x) AL_ASSERT((x) == dnnl_success)

typedef struct prim_key {
    int ta, tb, M, N, K, ldc;
    float alpha, beta;
} prim_key;

typedef struct prim {
    prim_key key;
    dnnl_primitive_t p;
    dnnl_memory_t a, b, c;
    int chain;   /* the next primitive in its bucket + 1 (0: the last) */
} prim;

/* A packed operand kept for reuse inside a memo scope: x's first rows
 * rows of cols floats at stride ld, dense in buf. */
typedef struct memo_entry {
    const float *x;
    size_t rows, cols, ld, cap;
    uint16_t *buf;
    unsigned long age;   /* of its last use: the oldest goes first */
} memo_entry;

/* A shape's primitive is found through a hash of its key (a chain per
 * bucket) rather than by a walk over all of them: at long contexts a
 * thread holds hundreds (a shape per causal query block), and the walk
 * cost as much as a narrow head's product itself (K 8 to 16: 0.5 us of
 * lookup at 500 shapes against 0.3 to 0.6 us of product). */
typedef struct slot {
    dnnl_stream_t stream;
    prim prims[PRIMS];
    int bucket[BUCKETS];   /* first primitive of each bucket + 1 (0: empty) */
    int n, next;
    uint16_t *a, *b;   /* the operands in bf16, dense in their stored layout */
    size_t a_cap, b_cap;
    memo_entry memo[MEMO];   /* buffers kept between scopes, entries not */
    uint16_t *shared;        /* al_bf16_shared_buffer */
    size_t shared_cap;
    unsigned long clock;
} slot;

/* Static, so everything in it stays reachable for the life of the process.
 * A thread that ends (the pool's workers, when the thread count changes)
 * gives its slot back, primitives and all, to the next thread that calls:
 * a primitive gives the same bits whichever thread runs it. */
static slot slots[SLOTS];
static struct {
    pthread_mutex_t mu;
    int free[SLOTS], n_free, n_used;
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};
static _Thread_local int my_slot = -1;
static pthread_key_t slot_key;   /* its destructor gives the slot back */
static dnnl_engine_t engine;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static int must_wait;   /* the library's CPU runtime returns before the work is done */

static void slot_release(void *v)
{
    pthread_mutex_lock(&pool.mu);
    pool.free[pool.n_free++] = (int)(intptr_t)v - 1;
    pthread_mutex_unlock(&pool.mu);
}

static void engine_init(void)
{
    DNNL_OK(dnnl_engine_create(&engine, dnnl_cpu, 0));
    /* OpenMP (Debian's) and sequential runtimes execute a CPU primitive
     * before returning; TBB and threadpool ones may not */
    unsigned rt = dnnl_version()->cpu_runtime;
    must_wait = rt != DNNL_RUNTIME_OMP && rt != DNNL_RUNTIME_SEQ;
    AL_ASSERT(pthread_key_create(&slot_key, slot_release) == 0);
}

static const char *isa_name(dnnl_cpu_isa_t isa)
{
    switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "unknown";
    }
}

const char *al_bf16_isa(void) { return isa_name(dnnl_get_effective_cpu_isa()); }

int al_bf16_check(al_err *e)
{
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    const char *force = getenv("AL_BF16_ISA");
    int has = (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
    if (force && strcmp(force, "none") == 0) has = 0;
    if (has) return 0;
    return al_errf(e, "train.precision bf16: this CPU has no bf16 dot products (avx512_bf16 or "
                      "AMX; oneDNN's ISA here: %s%s): use train.precision f32",
                   isa_name(isa), force ? ", AL_BF16_ISA=none" : "");
}

static void memo_clear(slot *s);

/* The calling thread's slot, set up on its first product. */
static slot *my(void)
{
    if (my_slot >= 0) return &slots[my_slot];
    pthread_once(&engine_once, engine_init);
    pthread_mutex_lock(&pool.mu);
    int i = pool.n_free ? pool.free[--pool.n_free] : pool.n_used++;
    pthread_mutex_unlock(&pool.mu);
    AL_ASSERT(i < SLOTS);
    AL_ASSERT(pthread_setspecific(slot_key, (void *)(intptr_t)(i + 1)) == 0);
    my_slot = i;
    memo_clear(&slots[i]);   /* a slot handed on keeps buffers, not entries */
    omp_set_num_threads(1);   /* this thread's oneDNN calls start no team */
    slot *s = &slots[i];
    if (!s->stream) DNNL_OK(dnnl_stream_create(&s->stream, engine, dnnl_stream_default_flags));
    return s;
}

/* A 2-D descriptor: logical (rows, cols) at the given strides. */
static void md2(dnnl_memory_desc_t *md, int rows, int cols, long rs, long cs, dnnl_data_type_t t)
{
    dnnl_dims_t dims = {rows, cols}, strides = {rs, cs};
    DNNL_OK(dnnl_memory_desc_init_by_strides(md, 2, dims, t, strides));
}

/* The matmul of key k: A (M, K) and B (K, N) dense bf16 in their stored
 * layouts (transposed ones by strides), C f32 at ldc; alpha as an output
 * scale and beta as a sum post-op, as sgemm's alpha . A B + beta C. */
static void prim_create(prim *p, const prim_key *k)
{
    dnnl_memory_desc_t a, b, c;
    md2(&a, k->M, k->K, k->ta == CblasNoTrans ? k->K : 1, k->ta == CblasNoTrans ? 1 : k->M,
        dnnl_bf16);
    md2(&b, k->K, k->N, k->tb == CblasNoTrans ? k->N : 1, k->tb == CblasNoTrans ? 1 : k->K,
        dnnl_bf16);
    md2(&c, k->M, k->N, k->ldc, 1, dnnl_f32);
    dnnl_matmul_desc_t d;
    DNNL_OK(dnnl_matmul_desc_init(&d, &a, &b, NULL, &c));
    dnnl_primitive_attr_t attr;
    DNNL_OK(dnnl_primitive_attr_create(&attr));
    if (k->alpha != 1.0f) DNNL_OK(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &k->alpha));
    dnnl_post_ops_t po = NULL;
    if (k->beta != 0.0f) {
        DNNL_OK(dnnl_post_ops_create(&po));
        DNNL_OK(dnnl_post_ops_append_sum(po, k->beta));
        DNNL_OK(dnnl_primitive_attr_set_post_ops(attr, po));
    }
    dnnl_primitive_desc_t pd;
    DNNL_OK(dnnl_primitive_desc_create(&pd, &d, attr, engine, NULL));
    DNNL_OK(dnnl_primitive_create(&p->p, pd));
    DNNL_OK(dnnl_memory_create(&p->a, &a, engine, DNNL_MEMORY_NONE));
    DNNL_OK(dnnl_memory_create(&p->b, &b, engine, DNNL_MEMORY_NONE));
    DNNL_OK(dnnl_memory_create(&p->c, &c, engine, DNNL_MEMORY_NONE));
    DNNL_OK(dnnl_primitive_desc_destroy(pd));
    if (po) DNNL_OK(dnnl_post_ops_destroy(po));
    DNNL_OK(dnnl_primitive_attr_destroy(attr));
    p->key = *k;
}

static void prim_destroy(prim *p)
{
    dnnl_primitive_destroy(p->p);
    dnnl_memory_destroy(p->a), dnnl_memory_destroy(p->b), dnnl_memory_destroy(p->c);
}

/* FNV-1a over the key's bytes (zeroed padding: keys are memset first). */
static unsigned key_hash(const prim_key *k)
{
    const unsigned char *b = (const unsigned char *)k;
    unsigned h = 2166136261u;
    for (size_t i = 0; i < sizeof *k; i++) h = (h ^ b[i]) * 16777619u;
    return h & (BUCKETS - 1);
}

/* Takes primitive i out of its bucket's chain (before it is replaced). */
static void unlink_prim(slot *s, int i)
{
    int *link = &s->bucket[key_hash(&s->prims[i].key)];
    while (*link != i + 1) link = &s->prims[*link - 1].chain;
    *link = s->prims[i].chain;
}

static prim *prim_get(slot *s, const prim_key *k)
{
    unsigned h = key_hash(k);
    for (int j = s->bucket[h]; j; j = s->prims[j - 1].chain)
        if (!memcmp(&s->prims[j - 1].key, k, sizeof *k)) return &s->prims[j - 1];
    int i;
    if (s->n < PRIMS) i = s->n++;
    else i = s->next++ % PRIMS, unlink_prim(s, i), prim_destroy(&s->prims[i]);
    prim *p = &s->prims[i];
    prim_create(p, k);
    p->chain = s->bucket[h];
    s->bucket[h] = i + 1;
    return p;
}

/* rows x cols of x at ld, rounded to bf16 into a dense buffer of *buf,
 * rows [from, rows) only (the rows above it are there already). */
static uint16_t *pack(uint16_t **buf, size_t *cap, const float *x, size_t from, size_t rows,
                      size_t cols, size_t ld)
{
    size_t n = rows * cols;
    if (n > *cap) {
        uint16_t *nb = al_malloc(n * sizeof *nb);
        if (from) memcpy(nb, *buf, from * cols * sizeof *nb);
        free(*buf);
        *buf = nb;
        *cap = n;
    }
    pack_rows(*buf + from * cols, x + from * ld, rows - from, cols, ld);
    return *buf;
}

/* ---- The memo (al_bf16_memo_begin). A packing is dense and row-major,
 * so the packing of x's first r rows is a prefix of any longer one: that
 * is what lets attention's growing causal key blocks (rows [0, i1) of k
 * and v, block after block) pack only the rows each block adds. */

static _Thread_local int memo_depth;
static _Thread_local long memo_hits;   /* packings reused (al_bf16_memo_hits) */
static atomic_int memo_off = -1;   /* AL_BF16_MEMO=0, or al_bf16_memo_disable */

static int memo_live(void)
{
    if (!memo_depth) return 0;
    int off = atomic_load_explicit(&memo_off, memory_order_relaxed);
    if (off < 0) {
        const char *v = getenv("AL_BF16_MEMO");
        off = v && strcmp(v, "0") == 0;
        atomic_store_explicit(&memo_off, off, memory_order_relaxed);
    }
    return !off;
}

static void memo_clear(slot *s)
{
    for (int i = 0; i < MEMO; i++) s->memo[i].x = NULL;
}

void al_bf16_memo_begin(void)
{
    if (memo_depth++ == 0 && my_slot >= 0) memo_clear(&slots[my_slot]);
}

void al_bf16_memo_end(void)
{
    AL_ASSERT(memo_depth > 0);
    if (--memo_depth == 0 && my_slot >= 0) memo_clear(&slots[my_slot]);
}

void al_bf16_memo_disable(int off) { atomic_store(&memo_off, off ? 1 : 0); }

long al_bf16_memo_hits(void) { return memo_hits; }

void al_bf16_memo_written(const float *x, int rows, int cols, int ld)
{
    if (!memo_depth || my_slot < 0 || rows <= 0 || cols <= 0) return;
    slot *s = &slots[my_slot];
    /* as addresses: the operands are separate objects in general */
    uintptr_t lo = (uintptr_t)x, hi = (uintptr_t)(x + (size_t)(rows - 1) * ld + cols);
    for (int i = 0; i < MEMO; i++) {
        const memo_entry *m = &s->memo[i];
        if (!m->x) continue;
        uintptr_t mlo = (uintptr_t)m->x, mhi = (uintptr_t)(m->x + (m->rows - 1) * m->ld + m->cols);
        if (mlo < hi && lo < mhi) s->memo[i].x = NULL;
    }
}

/* x's operand in bf16: from the memo while a scope is open (extended by
 * the rows it lacks), else packed into the slot's buffer of the operand. */
static const uint16_t *operand(slot *s, int which, const float *x, int rows, int cols, int ld)
{
    if (!memo_live())
        return which ? pack(&s->b, &s->b_cap, x, 0, rows, cols, ld)
                     : pack(&s->a, &s->a_cap, x, 0, rows, cols, ld);
    memo_entry *m = NULL, *old = &s->memo[0];
    for (int i = 0; i < MEMO && !m; i++) {
        memo_entry *e = &s->memo[i];
        if (e->x == x && e->cols == (size_t)cols && e->ld == (size_t)ld) m = e;
        else if (old->x && (!e->x || e->age < old->age)) old = e;
    }
    if (!m) {
        m = old;
        m->x = x, m->rows = 0, m->cols = cols, m->ld = ld;
    }
    m->age = ++s->clock;
    memo_hits += m->rows > 0;
    if (m->rows < (size_t)rows) {
        pack(&m->buf, &m->cap, x, m->rows, rows, cols, ld);
        m->rows = rows;
    }
    return m->buf;
}

uint16_t *al_bf16_shared_buffer(size_t n)
{
    slot *s = my();
    if (n > s->shared_cap) {
        free(s->shared);
        s->shared = al_malloc(n * sizeof *s->shared);
        s->shared_cap = n;
    }
    return s->shared;
}

void al_bf16_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C,
                  int ldc)
{
    al_bf16_gemm_packed(ta, tb, M, N, K, alpha, A, lda, NULL, B, ldb, NULL, beta, C, ldc);
}

void al_bf16_gemm_packed(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K,
                         float alpha, const float *A, int lda, const uint16_t *ap,
                         const float *B, int ldb, const uint16_t *bp, float beta, float *C,
                         int ldc)
{
    slot *s = my();
    prim_key k;
    memset(&k, 0, sizeof k);   /* compared with memcmp */
    k = (prim_key){ta, tb, M, N, K, ldc, alpha, beta};
    prim *p = prim_get(s, &k);
    const uint16_t *a = ap  ? ap
                        : ta == CblasNoTrans ? operand(s, 0, A, M, K, lda)
                                             : operand(s, 0, A, K, M, lda);
    const uint16_t *b = bp  ? bp
                        : tb == CblasNoTrans ? operand(s, 1, B, K, N, ldb)
                                             : operand(s, 1, B, N, K, ldb);
    if (A == B && !ap && !bp)   /* one memo entry: B's rows may have grown it, and moved its buffer */
        a = ta == CblasNoTrans ? operand(s, 0, A, M, K, lda) : operand(s, 0, A, K, M, lda);
    DNNL_OK(dnnl_memory_set_data_handle(p->a, (void *)a));
    DNNL_OK(dnnl_memory_set_data_handle(p->b, (void *)b));
    DNNL_OK(dnnl_memory_set_data_handle(p->c, C));
    dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, p->a}, {DNNL_ARG_WEIGHTS, p->b}, {DNNL_ARG_DST, p->c}};
    DNNL_OK(dnnl_primitive_execute(p->p, s->stream, 3, args));
    if (must_wait) DNNL_OK(dnnl_stream_wait(s->stream));
}

#endif
