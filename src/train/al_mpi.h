/*
 * al_mpi.h - running as one of several ranks (MPI) behind a small interface.
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
 * --mpi=pmix) the job would silently be N one-rank copies: al_mpi_init
 * refuses instead, and so does a build without MPI launched as N > 1 ranks.
 * Open MPI builds refuse before MPI_Init a launch without PMIx (no
 * OMPI_COMM_WORLD_SIZE, no PMIX_RANK), which Open MPI would abort in it.
 *
 * Collectives must be called by every rank in the same order. Failures that
 * only one rank sees (a file it cannot write) are made collective with
 * al_mpi_agree so that no rank waits forever in the next collective.
 */
#ifndef AL_MPI_H
#define AL_MPI_H

#include <stddef.h>
#include <stdint.h>

#include "al_util.h"

/* 1 when this build has MPI support. */
int al_mpi_available(void);
/* Detect the launcher, initialise MPI if launched by one, check the size.
 * Idempotent. -1 with e set when the launch does not match this build. */
int al_mpi_init(al_err *e);
int al_mpi_rank(void);
int al_mpi_size(void);
/* Ranks on this node (for the default thread count); 1 without MPI. */
int al_mpi_local_size(void);
/* In-place sums over all ranks. */
void al_mpi_allreduce_sum(float *buf, size_t n);
void al_mpi_allreduce_sum_d(double *buf, int n);
/* 1 when every rank passed the same v. */
int al_mpi_same_u64(uint64_t v);
/* Every rank says whether it failed; returns 0 when none did, else -1 on
 * every rank. So that a failure is printed once: e keeps its message on
 * rank 0 and on a failed rank when rank 0 did not fail; on a rank that was
 * fine it says which ranks failed (rank 0) or is emptied (others). */
int al_mpi_agree(int failed, al_err *e);
/* Point-to-point integers, for handing out work (tag < 32768). recv takes
 * src -1 for any rank and returns the sender. */
void al_mpi_send_ints(int dest, int tag, const int *v, int n);
int al_mpi_recv_ints(int src, int tag, int *v, int n);
/* 1 when a message from src (-1: any) with tag is waiting; never blocks. */
int al_mpi_probe(int src, int tag);
/* MPI_Finalize when MPI was initialised. */
void al_mpi_finalize(void);

#endif
