/*
 * al_parallel.h - attnlab's one threading runtime.
 *
 * A fixed pool of worker threads runs data-parallel loops: al_parallel_for
 * cuts [0, n) into at most al_parallel_threads() contiguous chunks, and the
 * pool's threads, the caller included, take chunks until none is left (a
 * thread the OS has not scheduled yet holds nothing up). The cut depends
 * only on n, the grain and the thread count, and every chunk does the same
 * arithmetic on whichever thread runs it, so the same thread count gives
 * bit-identical results. OpenBLAS is kept single-threaded (its own threads would fight the
 * pool's): large products are split into per-thread sgemm calls by the
 * kernels (al_kernels.h), small per-head ones run whole inside a chunk.
 *
 * A loop started from inside a chunk runs inline as one chunk (no nested
 * parallelism). Loops started by two threads at once take turns. A child of
 * fork() starts with one thread (call al_parallel_set_threads again).
 */
#ifndef AL_PARALLEL_H
#define AL_PARALLEL_H

#include <stddef.h>

/* Compute with n threads (0: every online core). Starts or stops workers
 * and sets OpenBLAS to one thread. Call it when no loop is running.
 * Returns 0, or pthread_create's error when a worker could not start (the
 * pool then runs on the caller's thread alone). */
int al_parallel_set_threads(int n);
int al_parallel_threads(void);

/* Workers stop spinning and sleep until the next loop: for a caller about
 * to run something with threads of its own (OpenBLAS's, for one product),
 * which would otherwise share the cores with spinning workers. */
void al_parallel_rest(void);

/* fn(ctx, lo, hi, tid) for every chunk [lo, hi) of [0, n); chunk sizes are
 * multiples of grain (but the last) and there are at most
 * min(threads, ceil(n / grain)) of them. tid in [0, threads) names the
 * thread running the chunk (for al_parallel_scratch); one thread may run
 * several chunks, one after the other. */
typedef void (*al_range_fn)(void *ctx, long lo, long hi, int tid);
void al_parallel_for(long n, long grain, al_range_fn fn, void *ctx);

/* How many chunks al_parallel_for(n, grain, ...) makes from here (1 when
 * called from inside a chunk); chunk i is [al_parallel_cut(n, grain, c, i),
 * al_parallel_cut(n, grain, c, i + 1)). For callers that reduce per chunk. */
int al_parallel_chunks(long n, long grain);
long al_parallel_cut(long n, long grain, int chunks, int i);

/* Per-thread scratch of at least n floats for thread tid, owned by the pool
 * and reused: it grows (once) to the largest size asked for, so a training
 * step allocates only on its first call. Valid until the next call with the
 * same tid or al_parallel_set_threads. */
float *al_parallel_scratch(int tid, size_t n);
/* Every thread's scratch grown to at least n floats now, while no job runs:
 * which thread takes a chunk is decided as the job runs, so a caller that
 * must not allocate on later calls reserves before its first. */
void al_parallel_scratch_reserve(size_t n);

#endif
