/*
 * al_train.h - one training run: data, model, AdamW, evaluation (al_eval.h),
 * outputs.
 *
 * Writes into outdir (when given): config.yaml (resolved, at the start),
 * metrics.csv (rewritten atomically at every evaluation), model.safetensors
 * and train_state.safetensors (al_checkpoint.h) at the end, every
 * train.checkpoint_every steps and at stop_after. With resume, the run
 * continues from outdir's state bit-identically to one never interrupted
 * (same thread count); a config that differs from the saved one (other
 * than train.checkpoint_every) is an error naming the key. A loss that
 * becomes NaN or Inf ends the run with status AL_TRAIN_DIVERGED, not a crash.
 */
#ifndef AL_TRAIN_H
#define AL_TRAIN_H

#include "al_config.h"

enum al_train_status {
    AL_TRAIN_OK = 0,
    AL_TRAIN_DIVERGED = 1,
    AL_TRAIN_STOPPED = 2    /* stopped at stop_after with a checkpoint to resume from */
};

typedef struct al_train_opts {
    const char *outdir;     /* NULL: write no files */
    int resume;             /* continue from outdir's checkpoint */
    int log_lines;          /* plain progress lines when stderr is not a tty */
    const char *label;      /* prefix of progress lines, or NULL */
    int stop_after;         /* > 0: stop once this many steps are done, after
                               writing a checkpoint (as if interrupted) */
    int claim;              /* a fresh run's outdir must be absent or empty
                               (AL_CLAIM_FRESH) or is overwritten (AL_CLAIM_FORCE);
                               0: the caller owns it (a sweep's trial, a resume) */
    const char *resume_hint;   /* once outdir/config.yaml is written, what an
                               interrupted process says (al_signals_hint), or NULL */
    int accept_finished;    /* with resume: a run that has done all its steps
                               returns the result its state holds (a worker
                               killed after its final checkpoint) instead of
                               the error "nothing to resume" */
    /* Called at every evaluation and about every 0.1 s of training, when
     * set: how a sweep worker reports its state. val_loss is the last
     * evaluation's (NAN before the first). */
    void (*on_progress)(void *ctx, int step, int steps, double loss, double val_loss,
                        double tokens_per_s);
    void *progress_ctx;
} al_train_opts;

typedef struct al_train_result {
    int status;             /* enum al_train_status */
    char reason[256];       /* why a run diverged */
    int steps_done;
    double final_train_loss, val_loss, best_val_loss;
    double val_accuracy;    /* NAN unless the data is a task with answers */
    double test_loss;       /* the held-out test split, scored once at the end (NAN: none) */
    double test_accuracy;   /* NAN unless the data is a task with answers */
    double init_val_loss;   /* the evaluation at step 0, before any update: a run from
                               train.init_from scores its starting weights (NAN: none) */
    double tokens_per_s, wall_s;
    size_t params, kv_elems_per_token;
    int resume_changed;     /* al_train failed because the run's data, a plugin or
                               the attnlab interface changed since it started */
    int runtime_error;      /* al_train failed once training had begun (a write:
                               the disk, not the input) */
} al_train_result;

/* What al_train_claim accepts in a directory for a fresh run. */
enum { AL_CLAIM_FRESH = 1, AL_CLAIM_FORCE = 2 };

/* Whether dir may take a fresh run: 0 when it is absent or empty (its lock
 * file and stale temp files aside), 1 when it is not but `how` is
 * AL_CLAIM_FORCE (the caller says it overwrites), -1 with e saying why not:
 * a run is there (continue it with --resume, or choose another
 * directory), a sweep's results, other files, not a directory, or '/'
 * (refused even with force, as is a sweep's results directory). */
int al_train_claim(const char *dir, int how, al_err *e);

/* Every command that writes into outdir holds its lock (al_guard.h) from
 * before the first write to the end; a second process is refused with
 * the holder's pid. Temp files of the run's own names that a killed
 * process left are removed once the lock is held.
 * Returns -1 with e set on bad input or I/O failure; otherwise 0 with the
 * outcome (including divergence) in r. */
int al_train(const al_config *c, const al_train_opts *o, al_train_result *r, al_err *e);

/* The memory a training run of c needs (al_memory.h) against what it may
 * have (train.max_memory, the machine's memory, ulimit -v): -1 with e
 * naming the keys and the bytes when it cannot fit. Before any allocation
 * of the model; c's vocab_size resolved. */
int al_train_check_memory(const al_config *c, al_err *e);

/* Resolve values that depend on the data (model.vocab_size), and under
 * train.flops the steps it buys (al_train_flops_steps). */
int al_train_resolve(al_config *c, int data_vocab, al_err *e);

/* train.flops: steps = floor(flops / (train_flops_per_token * batch_size
 * * seq_len)) (al_cost.h's figure for c->model, vocab_size resolved),
 * into c->train.steps; a warmup longer than that is cut to it (the
 * default warmup of a train.steps run is cut the same way). *per_token
 * (may be NULL) receives train_flops_per_token. -1 with e naming
 * train.flops when not even one step fits. Nothing done when train.flops
 * is 0. */
int al_train_flops_steps(al_config *c, double *per_token, al_err *e);
/* The line a train.flops run prints at its start (no newline). */
void al_train_flops_line(const al_config *c, double per_token, char *out, size_t n);

#endif
