/*
 * al_sweep_run.h - running a sweep's trials on this machine, and the
 * worker that runs one trial.
 *
 * Each trial runs as its own process: the same attnlab binary started as
 *   attnlab trial FILE --index I --out DIR --threads M [--set k=v]... [--plugin P]...
 * (the worker entry, so that other executors can start trials the same
 * way). The worker re-reads FILE, picks trial I, trains it into DIR/<id>,
 * writes DIR/<id>/result.json and exits 0 (ok), 3 (diverged) or 1 (failed).
 * The runner keeps up to `jobs` workers going, records any other ending
 * (a signal, a crash, a non-zero exit without a result) in result.json
 * itself, and rewrites DIR/summary.csv after every trial. Workers die with
 * the runner (PR_SET_PDEATHSIG), so a killed sweep leaves no orphans.
 *
 * SIGINT / SIGTERM stop the sweep: running workers get SIGTERM and are
 * recorded as interrupted; finished results stay; a later run resumes.
 */
#ifndef AL_SWEEP_RUN_H
#define AL_SWEEP_RUN_H

#include <sys/types.h>

#include "al_sweep_results.h"

struct al_sweep_launcher;

typedef struct al_sweep_run_opts {
    const char *exe;                 /* the attnlab binary for workers */
    const char *dir;                 /* the results directory (exists, ours) */
    int jobs;                        /* workers at a time, >= 1 */
    int threads;                     /* train.threads of every worker, >= 1 */
    const char *const *sets;         /* --set assignments, passed on */
    int n_sets;
    const char *const *plugins;      /* --plugin paths, passed on */
    int n_plugins;
    const struct al_sweep_launcher *launcher;   /* NULL: worker processes here */
} al_sweep_run_opts;

/* Where the runner's slots run their workers: by default worker processes
 * it forks on this machine; another executor (mpi) supplies its own. The
 * runner prepares the trial's directory (trial.json written, an earlier
 * attempt's leftovers cleared) before start, and records the ending from
 * the worker's result.json or, failing that, from its wait status. */
typedef struct al_sweep_launcher {
    /* Start trial t in slot `slot` (0 .. jobs-1): a handle > 0, or -1 with e. */
    long (*start)(void *ctx, int slot, const al_sweep_trial *t, al_err *e);
    /* 1 with the wait status once the worker behind handle h has ended. */
    int (*poll)(void *ctx, long h, int *wst);
    /* Deliver sig (SIGTERM to stop, SIGKILL after the grace) to it. */
    void (*signal)(void *ctx, long h, int sig);
    /* Optional: where h runs, for the start line (" on rank 2"). */
    void (*where)(void *ctx, long h, char *buf, size_t n);
    void *ctx;
} al_sweep_launcher;

/* Make trial t's directory dir/<id> (into tdir) ready for a new attempt:
 * an earlier attempt's result, progress and temp files removed (its
 * checkpoint kept, to resume from), trial.json written. */
int al_sweep_prepare_trial(const al_sweep *s, const char *dir, const al_sweep_trial *t,
                           char *tdir, size_t n, al_err *e);

/* Fork the worker process for trial t (its directory prepared), standard
 * output and error into its log.txt; it dies with the caller. The pid, or
 * -1 with e set. */
pid_t al_sweep_spawn_worker(const al_sweep *s, const al_sweep_run_opts *o,
                            const al_sweep_trial *t, al_err *e);

typedef struct al_sweep_run_stats {
    int skipped;                     /* finished before this run */
    int ran, ok, diverged, failed;   /* failed counts killed too */
    int interrupted;                 /* 1: the run was stopped by a signal */
    double wall_s;
} al_sweep_run_stats;

/* Run every trial that has no final result. Returns 0, or -1 with e set
 * when the runner itself cannot go on (a write failed, fork failed). */
int al_sweep_run(const al_sweep *s, const al_sweep_run_opts *o, al_sweep_run_stats *st,
                 al_err *e);

/* The worker body: train trial t into dir/<id> with `threads` threads
 * (0: as configured), write its result.json. Returns the exit status
 * (0 ok, 3 diverged, 1 failed) with a failure's message in e. */
int al_sweep_trial_run(const al_sweep *s, const al_sweep_trial *t, const char *dir,
                       int threads, al_err *e);

/* Read a worker's live state from tdir/progress; 0 when there is one. */
typedef struct al_trial_progress {
    int step, steps;
    double loss, val_loss, tokens_per_s;
} al_trial_progress;
int al_sweep_read_progress(const char *tdir, al_trial_progress *p);

#endif
