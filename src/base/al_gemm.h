/*
 * al_gemm.h - matrix products over attnlab's pool, and how each is split.
 *
 * A large product can be cut across the pool's threads in several ways,
 * and which is fastest depends on the CPU, OpenBLAS's kernels and the
 * shape: rows of C (each thread one sgemm over its rows and the full K),
 * columns of C, a grid of both (4 threads and more), or one call with
 * OpenBLAS's own threads. al_sgemm_pool picks per shape and thread count
 * from a measurement made the first time that shape is seen (its plan),
 * and never at the price of the bits: a split is only a candidate when it
 * gives, on a random probe of that shape, exactly the bits of the
 * reference split (the longer side of C), so whatever the timing chose,
 * the same thread count gives the same result. A split computes every
 * element as one OpenBLAS call over the full K would, so the candidates
 * normally all agree; the probe catches the kernels that do not (OpenBLAS
 * picks small-matrix and "direct" kernels by size and thread count, and
 * blocks K differently when threaded).
 *
 * Products below AL_GEMM_PAR_FLOPS, calls from inside a pool chunk and
 * runs with one thread are one sgemm on the calling thread, as before.
 * Planning allocates its probe once per shape (the first training step);
 * a plan is kept for the life of the process.
 */
#ifndef AL_GEMM_H
#define AL_GEMM_H

#include <cblas.h>

#include "al_bf16.h"   /* the precision of every product here */

enum al_gemm_split { AL_SPLIT_ROWS, AL_SPLIT_COLS, AL_SPLIT_GRID, AL_SPLIT_BLAS, AL_NSPLITS };

/* A product this small runs whole: splitting would cost more than it saves. */
#define AL_GEMM_PAR_FLOPS (1L << 21)

/* The product layer's counting mode (docs/costs.md): between begin and
 * end every product adds 2*m*n*k (al_flops_add, al_kernels.h). end
 * returns the FLOPs counted and stops counting. Not nested; the counter
 * is process-wide (the pool's threads add to it atomically). */
void al_flops_count_begin(void);
double al_flops_count_end(void);
/* The count so far (while counting). */
double al_flops_counted(void);

/* "rows", "cols", "grid", "blas" */
const char *al_split_name(int split);

/* C (M, N) = alpha op(A) op(B) + beta C on the calling thread, OpenBLAS at
 * one thread; an empty K still scales C (BLAS refuses ld 0). */
void al_sgemm_here(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                   const float *A, int lda, const float *B, int ldb, float beta, float *C,
                   int ldc);

/* The same product over the pool, split as its plan says. */
void al_sgemm_pool(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                   const float *A, int lda, const float *B, int ldb, float beta, float *C,
                   int ldc);

/* The same product with the given split, whatever the plan (tests and the
 * benchmark). A split that needs more threads than the pool has (grid
 * below 4) runs as rows. */
void al_sgemm_split(int split, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K,
                    float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                    float *C, int ldc);

typedef struct al_gemm_plan {
    int split;                   /* chosen: the fastest admitted split (OpenBLAS's
                                    threads only when 10 % faster than the pool's) */
    int reference;               /* the split the others must equal bit for bit */
    unsigned tried, admitted;    /* bit s: split s applies / gave the reference's bits */
    double seconds[AL_NSPLITS];  /* best of the timed runs, per tried split */
} al_gemm_plan;

/* The plan al_sgemm_pool uses for this shape at the current thread count,
 * measured now if it is the first time. Returns 0, or -1 when the product
 * is not split (one thread, too small, or called from inside a chunk). */
int al_gemm_plan_get(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                     float beta, al_gemm_plan *out);

/* Benchmark support: al_sgemm_pool uses this split for every planned
 * product (-1: each plan's own choice, the default). Bits may then differ
 * from the plan's (a forced split is not checked against the reference). */
void al_gemm_force_split(int split);

/* Tests: 1 turns off packing a bf16 split's shared operand once (gemm.c's
 * share; AL_BF16_SHARE=0 does the same), 0 turns it back on. */
void al_gemm_share_disable(int off);
/* Splits whose shared operand was packed once, so far (tests). */
long al_gemm_shares(void);

/* Stops OpenBLAS's threads, which otherwise poll for work for about 0.1 s
 * after a threaded call, on the cores the pool needs; its next threaded
 * call starts them again. -1 (nothing done) where OpenBLAS does not export
 * the means (blas_thread_shutdown_, its pthreads build): there the plans
 * never choose OpenBLAS's threads. */
int al_blas_threads_stop(void);

/* What the bits of a run depend on besides the binary, the seed and the
 * thread count (README, "Reproducibility"): the CPU model, as
 * /proc/cpuinfo's first "model name" ("unknown" without one), and the
 * kernel set OpenBLAS chose for it at start-up (openblas_get_corename). */
void al_cpu_model(char *out, size_t n);
const char *al_blas_core(void);

#endif
