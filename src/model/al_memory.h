/*
 * al_memory.h - what a model needs in memory, in checked arithmetic, and
 * what the process may have: so that a model or batch that cannot fit is
 * refused with the keys and the bytes before anything is allocated, not
 * ended by "out of memory" and SIGABRT.
 */
#ifndef AL_MEMORY_H
#define AL_MEMORY_H

#include <stddef.h>
#include <stdint.h>
#include "al_config.h"

/* The activation floats al_model_reserve carves for a (B, T) batch, every
 * layer's variant's share included. -1 with e when a variant's reported
 * size passes AL_MAX_REPORTED_FLOATS or the total overflows. */
int al_model_act_floats(const al_model_config *c, int d_ff, int B, int T, size_t *total,
                        al_err *e);

/* Bytes a training run of c at batch (B, T) holds: parameters, gradients
 * and AdamW's moments (params), and activations with the batch buffers
 * (acts). -1 with e when a count overflows (naming the keys). */
typedef struct al_mem_estimate {
    size_t n_params;
    uint64_t params, acts, total;
} al_mem_estimate;
int al_train_estimate(const al_model_config *c, int B, int T, al_mem_estimate *m, al_err *e);

/* The activation bytes of a (B, T) batch without the variant's share, in
 * saturating arithmetic (UINT64_MAX: more than 64 bits hold): the part of
 * the estimate that no variant's answer can make smaller. */
uint64_t al_batch_bytes_lower(const al_model_config *c, int B, int T);

/* OpenBLAS (Debian's build) maps a work buffer of this size for each
 * thread on its first call, and waits forever when it cannot: address
 * space that `ulimit -v` must leave it. */
#define AL_BLAS_BUFFER_BYTES (128ull << 20)
/* A worker thread's stack (glibc's default) and its malloc arena's first share. */
#define AL_THREAD_STACK_BYTES (16ull << 20)

/* Bytes this process may still allocate: max_memory when non-zero, else
 * the machine's physical memory; lowered to what `ulimit -v` leaves beside
 * the OpenBLAS buffers of `threads` threads.
 * what says which limit it is ("train.max_memory", "the machine's memory",
 * "ulimit -v"), for messages. */
uint64_t al_memory_available(uint64_t max_memory, int threads, char *what, size_t n);

#endif
