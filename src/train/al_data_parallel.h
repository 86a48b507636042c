/*
 * al_data_parallel.h - data-parallel training of one model over the ranks
 * of al_mpi.h (data_parallel.c). Every rank draws the same global batch
 * (B, T) from the same RNG stream and computes the rows
 * [rank * B/size, (rank+1) * B/size).
 */
#ifndef AL_DATA_PARALLEL_H
#define AL_DATA_PARALLEL_H

#include <stdint.h>

#include "al_model.h"
#include "al_mpi.h"

struct al_rng;

/* batch_size must divide by the number of ranks. */
int al_dp_check_batch(int batch_size, al_err *e);
/* The share of the global loss that this rank's slice carries: its rows'
 * weight over the whole batch's (answer counts for masked task data,
 * B/size rows of B otherwise). 0 when the batch has no weight at all. */
double al_dp_share(const float *w, int B, int T, int rank, int size);
/* Forward and backward of the global batch's loss on this rank's slice:
 * returns the global mean loss, and leaves the gradient of that mean in
 * m->grads on every rank (its own slice's gradient scaled by its share,
 * summed over ranks by one allreduce of the flat buffer). Backward is
 * skipped when the loss is not finite, on every rank alike. w may be NULL.
 * m->grads must be zeroed by the caller. */
double al_dp_forward_backward(struct al_model *m, const int *in, const int *tgt,
                              const float *w, int B, int T);
/* Compare a checksum of the parameters and the data RNG across ranks: -1
 * with e set when any rank differs (then training must stop). For tests,
 * AL_DIST_TEST_PERTURB=K makes rank K alter a parameter before checking at
 * step > 0, so that the check is seen to fire. */
int al_dp_check_replicas(struct al_model *m, const struct al_rng *rng, int step,
                         al_err *e);
/* 64-bit FNV-1a of the parameters' bytes. */
uint64_t al_dp_checksum(const struct al_model *m);

#endif
