/*
 * al_dist.h - running as one of several ranks (MPI) behind a small interface.
 *
 * Built without MPI (meson -Dmpi=disabled, or libopenmpi-dev absent), or
 * started without an MPI launcher, the process is rank 0 of 1 and every
 * call here is trivial. MPI is initialised only when a launcher started the
 * process, so a plain run never pays for MPI_Init.
 *
 * Launch check: a launcher states how many ranks it started in its
 * environment (OMPI_COMM_WORLD_SIZE from Open MPI's mpirun, PMI_SIZE from
 * PMI launchers such as MPICH's mpiexec, SLURM_STEP_NUM_TASKS inside an srun
 * step). When MPI_Comm_size disagrees (another MPI's launcher, srun without
 * --mpi=pmix) the job would silently be N one-rank copies: al_dist_init
 * refuses instead, and so does a build without MPI launched as N > 1 ranks.
 * Open MPI builds refuse before MPI_Init a launch without PMIx (no
 * OMPI_COMM_WORLD_SIZE, no PMIX_RANK), which Open MPI would abort in it.
 *
 * Collectives must be called by every rank in the same order. Failures that
 * only one rank sees (a file it cannot write) are made collective with
 * al_dist_agree so that no rank waits forever in the next collective.
 */
#ifndef AL_DIST_H
#define AL_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "al_util.h"

/* 1 when this build has MPI support. */
int al_dist_available(void);
/* Detect the launcher, initialise MPI if launched by one, check the size.
 * Idempotent. -1 with e set when the launch does not match this build. */
int al_dist_init(al_err *e);
int al_dist_rank(void);
int al_dist_size(void);
/* Ranks on this node (for the default thread count); 1 without MPI. */
int al_dist_local_size(void);
/* In-place sums over all ranks. */
void al_dist_allreduce_sum(float *buf, size_t n);
void al_dist_allreduce_sum_d(double *buf, int n);
/* 1 when every rank passed the same v. */
int al_dist_same_u64(uint64_t v);
/* Every rank says whether it failed; returns 0 when none did, else -1 on
 * every rank. So that a failure is printed once: e keeps its message on
 * rank 0 and on a failed rank when rank 0 did not fail; on a rank that was
 * fine it says which ranks failed (rank 0) or is emptied (others). */
int al_dist_agree(int failed, al_err *e);
/* Point-to-point integers, for handing out work (tag < 32768). recv takes
 * src -1 for any rank and returns the sender. */
void al_dist_send_ints(int dest, int tag, const int *v, int n);
int al_dist_recv_ints(int src, int tag, int *v, int n);
/* 1 when a message from src (-1: any) with tag is waiting; never blocks. */
int al_dist_probe(int src, int tag);
/* MPI_Finalize when MPI was initialised. */
void al_dist_finalize(void);

/* ------------------------------------------------------------ data parallel
 * (dp.c) Every rank draws the same global batch (B, T) from the same RNG
 * stream and computes the rows [rank * B/size, (rank+1) * B/size). */
struct al_model;
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
