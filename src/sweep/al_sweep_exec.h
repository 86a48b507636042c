/*
 * al_sweep_exec.h - running a sweep beyond this machine, on the engines a
 * cluster already has: Slurm for scheduling, MPI for communication.
 *
 * Every executor starts the same worker entry as the local runner
 * (`attnlab trial FILE --index I --out DIR --threads M ...`, al_sweep_run.h)
 * and fills the same results directory, which must be on storage that
 * every node sees; so report, resume and summary.csv are the same as for a
 * local sweep.
 *
 * slurm: the pending trials go to one `sbatch --array` job, one array task
 * per trial with --cpus-per-task M. The batch script is kept in
 * DIR/slurm/submit-N.sh, each task's Slurm output in DIR/slurm/JOB_TASK.out,
 * and every submission in DIR/slurm.json (job id, array task -> trial and
 * hash). The job is followed with squeue (scontrol for how a task ended);
 * no accounting database is needed. Finished trials are never submitted
 * again. A task that ends without a result (cancelled, timed out, node
 * failure) is recorded in its result.json as killed or failed with Slurm's
 * state and reason, and submitted again by the next run. A run that finds
 * tasks of earlier submissions still queued or running only collects them
 * (so --no-wait and a later `attnlab sweep FILE` work as one sweep);
 * anything it records as failed is submitted by the run after.
 * Ctrl-C stops following; the tasks keep running in Slurm. squeue is asked
 * every AL_SLURM_POLL_S seconds (default 5).
 *
 * mpi: under `mpirun -np N attnlab sweep FILE --executor mpi`, rank 0 runs
 * the sweep with one slot per rank and hands each rank the next pending
 * trial as it frees up; a rank runs the worker as a child process (so the
 * trial trains as one process, not data-parallel) and reports its wait
 * status back. Rank 0 alone writes the summary and the report.
 */
#ifndef AL_SWEEP_EXEC_H
#define AL_SWEEP_EXEC_H

#include <stdio.h>

#include "al_sweep_run.h"

enum al_sweep_executor { AL_EXEC_LOCAL = 0, AL_EXEC_SLURM, AL_EXEC_MPI, AL_EXEC_N };

/* "local", "slurm", "mpi"; al_sweep_executor_parse returns -1 for others. */
const char *al_sweep_executor_name(int x);
int al_sweep_executor_parse(const char *name);
/* 0 when executor x can run here, else -1 with e saying what to install
 * or how to launch. For mpi, call after al_mpi_init. */
int al_sweep_executor_check(int x, al_err *e);

/* ------------------------------------------------------------ slurm */

typedef struct al_slurm_opts {
    const char *const *args;   /* --slurm-arg values, given to sbatch as they are */
    int n_args;
    int no_wait;               /* submit and return */
    int throttle;              /* > 0: at most this many tasks at once (--array=...%N) */
} al_slurm_opts;

/* Collect, submit and follow as described above. st as al_sweep_run's;
 * *submitted gets the job id submitted by this run (0: none). Returns 0,
 * or -1 with e set when Slurm or a write failed. */
int al_sweep_slurm(const al_sweep *s, const al_sweep_run_opts *o, const al_slurm_opts *so,
                   al_sweep_run_stats *st, long *submitted, al_err *e);
/* Print the sbatch command and batch script a submission of the trials
 * without a final result would use; submits nothing. */
int al_sweep_slurm_dry_run(const al_sweep *s, const al_sweep_run_opts *o,
                           const al_slurm_opts *so, FILE *f, al_err *e);
/* 1 when dir holds a Slurm submission record (DIR/slurm.json), 0 when
 * not, -1 with e set when the record is unreadable or corrupt. */
int al_sweep_slurm_recorded(const char *dir, al_err *e);

/* ------------------------------------------------------------ mpi */

/* Rank 0: al_sweep_run with the ranks as slots (o->jobs is set to the
 * number of ranks), then release the other ranks. */
int al_sweep_mpi(const al_sweep *s, al_sweep_run_opts *o, al_sweep_run_stats *st, al_err *e);
/* Ranks > 0: run the trials rank 0 hands out until it says stop. */
int al_sweep_mpi_serve(al_sweep *s, const al_sweep_run_opts *o, al_err *e);

#endif
