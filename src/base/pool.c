/*
 * pool.c - the worker pool behind al_parallel_for (contract in
 * al_parallel.h).
 *
 * A loop is published as a job plus one 64-bit word, claim = (generation,
 * next chunk). Every thread, the caller included, takes chunks by bumping
 * claim with compare-and-swap until none is left, so a worker that the OS
 * has not scheduled yet does not hold the loop up: whoever is running takes
 * its chunks (each chunk does the same arithmetic on any thread). The caller
 * then waits only for chunks already taken. Workers spin on claim for a
 * short while (loops follow each other within microseconds during a step),
 * then sleep on a condition variable, so an idle pool costs nothing on a
 * shared machine. Sleepers are counted so that the common case, everyone
 * spinning, needs no system call; the counters are sequentially consistent
 * atomics so that a sleeper and a publisher cannot miss each other.
 */
#include "al_parallel.h"

#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "al_util.h"

#define MAX_THREADS 256
#define SPIN_ROUNDS 20000   /* ~0.1-0.3 ms of pause before sleeping */

typedef struct job {
    al_range_fn fn;
    void *ctx;
    long n, grain;
    int chunks;
} job;

static struct pool {
    int threads;                   /* configured, >= 1 */
    pthread_t tid[MAX_THREADS];
    pthread_mutex_t mu;            /* guards sleeping and the condition variables */
    pthread_cond_t wake, done_cv;
    pthread_mutex_t caller;        /* one loop at a time */
    uint32_t gen;                  /* generation of the last loop (under caller) */
    uint32_t start_gen;            /* gen when the workers were started */
    job slot[2];                   /* the loop of generation g is in slot[g & 1] */
    atomic_uint_least64_t claim;   /* gen << 32 | next chunk to take */
    atomic_int done;               /* chunks of this loop finished */
    atomic_int sleepers;           /* workers asleep on wake */
    atomic_int caller_sleeps;      /* the caller is asleep on done_cv */
    atomic_int stop;
    atomic_int rest;               /* workers sleep now instead of spinning */
    float *scratch[MAX_THREADS];
    size_t scratch_n[MAX_THREADS];
} P = {
    .threads = 1,
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done_cv = PTHREAD_COND_INITIALIZER,
    .caller = PTHREAD_MUTEX_INITIALIZER,
};

static _Thread_local int cur_tid = -1;   /* >= 0 while running a chunk */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* ------------------------------------------------------------ partition */

int al_parallel_chunks(long n, long grain)
{
    if (n <= 0) return 0;
    long units = (n + grain - 1) / grain;
    int t = cur_tid >= 0 ? 1 : P.threads;
    return units < t ? (int)units : t;
}

long al_parallel_cut(long n, long grain, int chunks, int i)
{
    long units = (n + grain - 1) / grain, u = units * i / chunks * grain;
    return u < n ? u : n;
}

static void run_chunk(const job *j, int i, int tid)
{
    long lo = al_parallel_cut(j->n, j->grain, j->chunks, i);
    long hi = al_parallel_cut(j->n, j->grain, j->chunks, i + 1);
    if (lo < hi) j->fn(j->ctx, lo, hi, tid);
}

/* Takes and runs chunks of loop g until none is left (or a newer loop
 * replaced it, which can only happen once all of g's chunks were taken). A
 * successful compare-and-swap on (g, i) proves the job read from slot g & 1
 * was g's: a newer loop is written only after every chunk of g is done. */
static void take_chunks(uint32_t g, int tid)
{
    for (;;) {
        uint64_t c = atomic_load(&P.claim);
        if ((uint32_t)(c >> 32) != g) return;
        const job *j = &P.slot[g & 1];
        int chunks = j->chunks, i = (int)(uint32_t)c;
        if (i >= chunks) return;
        if (!atomic_compare_exchange_weak(&P.claim, &c, c + 1)) continue;
        cur_tid = tid;
        run_chunk(j, i, tid);
        cur_tid = -1;
        if (atomic_fetch_add(&P.done, 1) + 1 == chunks && atomic_load(&P.caller_sleeps)) {
            pthread_mutex_lock(&P.mu);
            pthread_cond_signal(&P.done_cv);
            pthread_mutex_unlock(&P.mu);
        }
    }
}

/* ------------------------------------------------------------ workers */

static uint32_t claim_gen(void) { return (uint32_t)(atomic_load(&P.claim) >> 32); }

static uint32_t wait_for_loop(uint32_t seen)
{
    uint32_t g;
    for (int i = 0; i < SPIN_ROUNDS && !atomic_load(&P.rest); i++) {
        if ((g = claim_gen()) != seen || atomic_load(&P.stop)) return g;
        cpu_relax();
    }
    pthread_mutex_lock(&P.mu);
    atomic_fetch_add(&P.sleepers, 1);
    while ((g = claim_gen()) == seen && !atomic_load(&P.stop))
        pthread_cond_wait(&P.wake, &P.mu);
    atomic_fetch_sub(&P.sleepers, 1);
    pthread_mutex_unlock(&P.mu);
    return g;
}

static void *worker(void *arg)
{
    int me = (int)(long)arg;
    uint32_t seen = P.start_gen;
    for (;;) {
        seen = wait_for_loop(seen);
        if (atomic_load(&P.stop)) return NULL;
        take_chunks(seen, me);
    }
}

static void stop_workers(void)
{
    atomic_store(&P.stop, 1);
    pthread_mutex_lock(&P.mu);
    pthread_cond_broadcast(&P.wake);
    pthread_mutex_unlock(&P.mu);
    for (int i = 1; i < P.threads; i++) pthread_join(P.tid[i], NULL);
    atomic_store(&P.stop, 0);
}

/* A child of fork() has only the thread that forked: it starts over with
 * no workers (and fresh locks, which a worker may have held at the fork). */
static void forget_workers_in_child(void)
{
    P.threads = 1;
    pthread_mutex_init(&P.mu, NULL);
    pthread_mutex_init(&P.caller, NULL);
    pthread_cond_init(&P.wake, NULL);
    pthread_cond_init(&P.done_cv, NULL);
    atomic_store(&P.sleepers, 0);
    atomic_store(&P.caller_sleeps, 0);
    atomic_store(&P.stop, 0);
    cur_tid = -1;
}

static void register_atfork(void) { pthread_atfork(NULL, NULL, forget_workers_in_child); }

/* A worker that cannot start (no threads or memory left: RLIMIT_NPROC,
 * ulimit -v for its stack) stops those already started: the pool is back
 * at one thread and the cause is the caller's to report. */
int al_parallel_set_threads(int n)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    int err = 0;
    if (n <= 0) n = al_threads_for(0);
    if (n < 1) n = 1;
    if (n > MAX_THREADS) n = MAX_THREADS;
    openblas_set_num_threads(1);
    pthread_once(&once, register_atfork);
    pthread_mutex_lock(&P.caller);
    if (n != P.threads) {
        stop_workers();
        P.threads = n;
        P.start_gen = P.gen;
        for (int i = 1; i < n && !err; i++)
            if ((err = pthread_create(&P.tid[i], NULL, worker, (void *)(long)i)) != 0) {
                P.threads = i;   /* the ones that started */
                stop_workers();
                P.threads = 1;
            }
    }
    pthread_mutex_unlock(&P.caller);
    return err;
}

int al_parallel_start(int n, const char *what, al_err *e)
{
    int err = al_parallel_set_threads(n);
    if (!err) return 0;
    return al_errf(e, "%s (%d): could not start a worker thread: %s; lower %s or raise the "
                   "limit on processes (ulimit -u) or memory (ulimit -v)",
                   what, n, strerror(err), what);
}

int al_parallel_threads(void) { return P.threads; }

/* The next loop clears the flag (before it publishes its claim word), and
 * a worker that sees it sleeps on wake like any idle worker, so the
 * sleeper count keeps publisher and sleeper from missing each other. */
void al_parallel_rest(void) { atomic_store(&P.rest, 1); }

/* ------------------------------------------------------------ loops */

static void wait_for_chunks(int chunks)
{
    for (int i = 0; i < SPIN_ROUNDS; i++) {
        if (atomic_load(&P.done) == chunks) return;
        cpu_relax();
    }
    pthread_mutex_lock(&P.mu);
    atomic_store(&P.caller_sleeps, 1);
    while (atomic_load(&P.done) != chunks) pthread_cond_wait(&P.done_cv, &P.mu);
    atomic_store(&P.caller_sleeps, 0);
    pthread_mutex_unlock(&P.mu);
}

void al_parallel_for(long n, long grain, al_range_fn fn, void *ctx)
{
    AL_ASSERT(grain >= 1);
    if (n <= 0) return;
    if (cur_tid >= 0) {   /* nested: one chunk, on this thread */
        fn(ctx, 0, n, cur_tid);
        return;
    }
    pthread_mutex_lock(&P.caller);
    job j = {fn, ctx, n, grain, al_parallel_chunks(n, grain)};
    if (j.chunks == 1) {
        cur_tid = 0;
        fn(ctx, 0, n, 0);
        cur_tid = -1;
    } else {
        uint32_t g = ++P.gen;
        atomic_store(&P.rest, 0);
        P.slot[g & 1] = j;
        atomic_store(&P.done, 0);
        atomic_store(&P.claim, (uint64_t)g << 32);
        if (atomic_load(&P.sleepers) > 0) {
            pthread_mutex_lock(&P.mu);
            pthread_cond_broadcast(&P.wake);
            pthread_mutex_unlock(&P.mu);
        }
        take_chunks(g, 0);
        wait_for_chunks(j.chunks);
    }
    pthread_mutex_unlock(&P.caller);
}

float *al_parallel_scratch(int tid, size_t n)
{
    AL_ASSERT(tid >= 0 && tid < MAX_THREADS);
    if (P.scratch_n[tid] < n) {
        free(P.scratch[tid]);
        P.scratch[tid] = al_malloc(n * sizeof(float));
        P.scratch_n[tid] = n;
    }
    return P.scratch[tid];
}

void al_parallel_scratch_reserve(size_t n)
{
    pthread_mutex_lock(&P.caller);   /* no job runs: the workers touch no scratch */
    for (int t = 0; t < P.threads && t < MAX_THREADS; t++) al_parallel_scratch(t, n);
    pthread_mutex_unlock(&P.caller);
}
