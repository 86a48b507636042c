/*
 * parallel.c - the worker pool behind al_parallel_for (contract in
 * al_parallel.h).
 *
 * A loop is published by bumping a generation counter. Workers spin on it
 * for a short while (loops follow each other within microseconds during a
 * step) and then sleep on a condition variable, so an idle pool costs
 * nothing on a shared machine. The caller runs chunk 0 itself and waits for
 * the others the same way. Sleepers are counted so that the common case,
 * everyone spinning, needs no system call; the counters are sequentially
 * consistent atomics so that a sleeper and a publisher cannot miss each
 * other.
 */
#include "al_parallel.h"

#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "al_util.h"

#define MAX_THREADS 256
#define SPIN_ROUNDS 20000   /* ~0.1 ms of pause before sleeping */

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
    pthread_cond_t wake, done;
    pthread_mutex_t caller;        /* one loop at a time */
    atomic_ulong gen;              /* bumped once per loop */
    unsigned long start_gen;       /* gen when the workers were started */
    atomic_int pending;            /* workers yet to finish this loop */
    atomic_int sleepers;           /* workers asleep on wake */
    atomic_int caller_sleeps;      /* the caller is asleep on done */
    atomic_int stop;
    job j;
    float *scratch[MAX_THREADS];
    size_t scratch_n[MAX_THREADS];
} P = {
    .threads = 1,
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
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

/* ------------------------------------------------------------ workers */

static unsigned long wait_for_loop(unsigned long seen)
{
    unsigned long g;
    for (int i = 0; i < SPIN_ROUNDS; i++) {
        if ((g = atomic_load(&P.gen)) != seen || atomic_load(&P.stop)) return g;
        cpu_relax();
    }
    pthread_mutex_lock(&P.mu);
    atomic_fetch_add(&P.sleepers, 1);
    while ((g = atomic_load(&P.gen)) == seen && !atomic_load(&P.stop))
        pthread_cond_wait(&P.wake, &P.mu);
    atomic_fetch_sub(&P.sleepers, 1);
    pthread_mutex_unlock(&P.mu);
    return g;
}

static void *worker(void *arg)
{
    int me = (int)(long)arg;
    unsigned long seen = P.start_gen;
    for (;;) {
        seen = wait_for_loop(seen);
        if (atomic_load(&P.stop)) return NULL;
        if (me < P.j.chunks) {
            cur_tid = me;
            run_chunk(&P.j, me, me);
            cur_tid = -1;
        }
        /* Every worker answers every loop, chunk or not, so that none can
         * still be reading this job when the caller publishes the next. */
        if (atomic_fetch_sub(&P.pending, 1) == 1 && atomic_load(&P.caller_sleeps)) {
            pthread_mutex_lock(&P.mu);
            pthread_cond_signal(&P.done);
            pthread_mutex_unlock(&P.mu);
        }
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

void al_parallel_set_threads(int n)
{
    if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    if (n > MAX_THREADS) n = MAX_THREADS;
    openblas_set_num_threads(1);
    pthread_mutex_lock(&P.caller);
    if (n != P.threads) {
        stop_workers();
        P.threads = n;
        P.start_gen = atomic_load(&P.gen);
        for (int i = 1; i < n; i++)
            AL_ASSERT(pthread_create(&P.tid[i], NULL, worker, (void *)(long)i) == 0);
    }
    pthread_mutex_unlock(&P.caller);
}

int al_parallel_threads(void) { return P.threads; }

/* ------------------------------------------------------------ loops */

static void wait_for_workers(void)
{
    for (int i = 0; i < SPIN_ROUNDS; i++) {
        if (atomic_load(&P.pending) == 0) return;
        cpu_relax();
    }
    pthread_mutex_lock(&P.mu);
    atomic_store(&P.caller_sleeps, 1);
    while (atomic_load(&P.pending) != 0) pthread_cond_wait(&P.done, &P.mu);
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
    cur_tid = 0;
    if (j.chunks == 1) {
        fn(ctx, 0, n, 0);
    } else {
        P.j = j;
        atomic_store(&P.pending, P.threads - 1);
        atomic_fetch_add(&P.gen, 1);
        if (atomic_load(&P.sleepers) > 0) {
            pthread_mutex_lock(&P.mu);
            pthread_cond_broadcast(&P.wake);
            pthread_mutex_unlock(&P.mu);
        }
        run_chunk(&j, 0, 0);
        wait_for_workers();
    }
    cur_tid = -1;
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
