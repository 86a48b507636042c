/*
 * al_bf16.h - the products of train.precision bf16: bf16 operands, f32
 * accumulation and f32 results, through oneDNN's matmul primitive.
 *
 * al_sgemm_here (al_gemm.h) sends every product here while the process
 * precision is bf16 (al_gemm_set_precision), so every caller of the
 * product helpers of al_kernels.h - the model, the built-in variants and
 * plugins alike - gains it without change. Operands are rounded to bf16
 * (nearest even) into per-thread buffers; C is f32 and alpha/beta mean
 * what they mean for sgemm (beta 0 writes C, ignoring NaN in it).
 *
 * Threads: Debian's oneDNN runs its primitives on OpenMP. Each calling
 * thread (the pool's workers and the main thread) limits its own OpenMP
 * team to one thread on first use, so oneDNN never starts threads of its
 * own: the pool splits a product (gemm.c's plans, as for sgemm) and each
 * block is one single-threaded oneDNN call. Each calling thread holds a
 * slot: its primitives, one per shape, created on first use and reused,
 * its stream and its operand buffers. A thread that ends hands its slot
 * to the next new thread (the pool's workers are replaced when the thread
 * count changes); slots live as long as the process.
 *
 * What this does not promise: the same bits across oneDNN versions or
 * ISAs (avx512_core_bf16 and AMX accumulate in different orders), nor
 * across thread counts (as for f32, a split changes the blocks).
 */
#ifndef AL_BF16_H
#define AL_BF16_H

#include <cblas.h>
#include <stddef.h>
#include <stdint.h>

#include "al_util.h"

/* train.precision: every product below (al_sgemm_here, so every split
 * and every kernel of al_kernels.h) is sgemm in f32, or in bf16 oneDNN's
 * matmul with bf16 operands and f32 accumulation (al_bf16.h). The f32
 * path is exactly what it was before the setting existed. */
enum { AL_PRECISION_F32, AL_PRECISION_BF16 };

/* Sets the process's precision by name ("f32", "" = f32, or "bf16"): 0,
 * or -1 with one line in e when bf16 cannot run here (al_bf16_check).
 * Set before a run's first product; plans are kept per precision. */
int al_gemm_set_precision(const char *name, al_err *e);
int al_gemm_precision(void);
/* The precision of one call's products: al_gemm_enter(p) puts p in force
 * and returns what was, which al_gemm_leave puts back. A model enters its
 * own around each of its calls (al_model.h), so a precision travels with
 * the model and nothing is left set after it; p < 0 changes nothing (a
 * model that follows the process's). */
int al_gemm_enter(int p);
void al_gemm_leave(int was);
/* "f32" / "" or "bf16" as AL_PRECISION_*: 0, or -1 with e set when bf16
 * cannot run here (al_bf16_check). */
int al_gemm_precision_parse(const char *name, int *p, al_err *e);

/* 0 when this process can run bf16 products at full speed: built with
 * oneDNN, whose effective ISA here has bf16 dot products (avx512_bf16 or
 * AMX). Otherwise -1 with one line in e saying why. AL_BF16_ISA=none in
 * the environment makes the CPU count as lacking them (the test of the
 * message). We refuse rather than run oneDNN's emulation: emulated bf16
 * is slower than the f32 path it would replace, and its bits differ from
 * a real bf16 machine's. */
int al_bf16_check(al_err *e);

/* Whether bf16 pays here: bf16 and f32 product rates (GFLOP/s, one
 * thread) for a shape class (each side rounded up to a power of two, at
 * most 4096), measured in a few milliseconds (bf16_rate.c) and cached per
 * CPU model and class under $ATTNLAB_CACHE_DIR, $XDG_CACHE_HOME/attnlab or
 * ~/.cache/attnlab (written atomically; an unwritable cache only costs
 * the next run the measurement). Only where al_bf16_check passed. */
typedef struct al_bf16_rates {
    double bf16, f32;    /* GFLOP/s */
    int M, N, K;         /* the class measured */
    int cached;          /* 1: read from the cache */
} al_bf16_rates;
void al_bf16_rates_of(int M, int N, int K, al_bf16_rates *r);
int al_bf16_pays(const al_bf16_rates *r);   /* bf16 faster than f32 */
/* The one line a run prints where bf16 does not pay: both rates. */
void al_bf16_note(const al_bf16_rates *r, char *out, size_t n);

/* The ISA oneDNN dispatches to here ("avx512_core_bf16", ...; "none"
 * without oneDNN): what a bf16 run's bits depend on besides the CPU. */
const char *al_bf16_isa(void);

/* Under train.precision bf16, a product runs in bf16 only when
 * al_bf16_worth(M, N, K): N >= AL_BF16_MIN_N and M*N*K >= AL_BF16_MIN_MNK;
 * smaller ones run in f32. Below these sizes oneDNN's bf16 matmul lost to
 * OpenBLAS's f32 (AMD EPYC Zen 5, Cooperlake kernels, 1 thread, best of 3
 * interleaved): 32x32x16 at 0.48x, 256x8x8 at 0.48x, N = 8 with K 64-256
 * at 0.83-0.85x; at N >= 16 and 64K multiply-adds bf16 won (1.4-2.6x),
 * K = 8 included (256x256x8: 1.66x). The narrow heads of the default model
 * (8 wide) thus keep their P.V and dQ products in f32. */
#define AL_BF16_MIN_N 16
#define AL_BF16_MIN_MNK 65536L
int al_bf16_worth(int M, int N, int K);

/* C (M, N) = alpha op(A) op(B) + beta C with bf16 operands on the calling
 * thread; M, N, K > 0 and leading dimensions as for cblas_sgemm. */
void al_bf16_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb, float beta, float *C,
                  int ldc);

/* The same with either operand already packed: ap (bp), when not NULL, is
 * op(A)'s (op(B)'s) values as al_bf16_pack_rows packs the matrix as stored
 * (M x K or, transposed, K x M; B: K x N or N x K), dense; A (B) is then
 * not read. Why: a product split over threads by rows reads all of B in
 * every block, and one split by columns all of A; gemm.c packs that shared
 * operand once, each thread some of its rows, instead of once per block
 * (at 2 threads the blocks packed 12M values twice a layer of bench small). */
void al_bf16_gemm_packed(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K,
                         float alpha, const float *A, int lda, const uint16_t *ap,
                         const float *B, int ldb, const uint16_t *bp, float beta, float *C,
                         int ldc);
/* rows x cols floats at stride ld rounded to bf16 as al_bf16_pack rounds
 * them, dense into out. */
void al_bf16_pack_rows(uint16_t *out, const float *x, size_t rows, size_t cols, size_t ld);
/* A buffer of at least n bf16 values owned by the calling thread (kept,
 * grown as asked; valid until its next call): where gemm.c packs a split's
 * shared operand, which the pool's threads then read. */
uint16_t *al_bf16_shared_buffer(size_t n);

/* The memo: between al_bf16_memo_begin and al_bf16_memo_end (nested
 * scopes count as one), the calling thread keeps each operand it packs
 * (up to 16, the least recently used going first) and a later bf16
 * product that reads the same matrix - the same address, width and
 * stride, the same rows or fewer - uses the kept packing, as one that
 * reads more rows packs only the rows it lacks. Why: a linear's backward
 * packs dout for both its products, and attention's causal key blocks
 * read k and v rows [0, i1) block after block; packing was 10-12 % of a
 * 1-thread bf16 step (perf, bench small mla). A product's output C drops
 * what it overlaps (al_bf16_memo_written, which every product helper of
 * al_gemm.h calls on the calling thread, f32 products and pool splits
 * included); any other write to an operand inside the scope must call
 * al_bf16_memo_written itself.
 * The bits are those of packing afresh (a packing depends on the values
 * only): AL_BF16_MEMO=0 or al_bf16_memo_disable(1) turns it off, which
 * the tests use to show it. */
void al_bf16_memo_begin(void);
void al_bf16_memo_end(void);
void al_bf16_memo_written(const float *x, int rows, int cols, int ld);
void al_bf16_memo_disable(int off);
/* The calling thread's count of operands the memo gave (whole or in
 * part) instead of packing them (tests). */
long al_bf16_memo_hits(void);

/* x rounded to bf16 (nearest even; NaN stays NaN) and back to f32: the
 * value a bf16 product sees (tests), denormals aside (al_bf16_pack). */
float al_bf16_round(float x);

/* n floats rounded to bf16 as al_bf16_round rounds them, into out: how
 * al_bf16_gemm packs its operands. On a CPU with avx512_bf16 (every CPU
 * a bf16 run is allowed on) it is the CPU's vcvtne2ps2bf16, which reads
 * denormal inputs (|x| < 2^-126) as zero of their sign; elsewhere, or
 * with AL_BF16_PACK_SW set, the software rounding, which keeps them.
 * al_bf16_pack_hw says which (1: the instruction). */
void al_bf16_pack(uint16_t *out, const float *x, size_t n);
int al_bf16_pack_hw(void);

#endif
