/*
 * al_sweep_eval_run.h - a sweep's `eval` run on its finished trials
 * (sweep_eval_run.c, which says what goes where; sweep_eval.c parses the
 * spec), called by `attnlab sweep` once its trials have run. It scores
 * with the scoring library (src/score/), `attnlab score`'s own code.
 */
#ifndef AL_SWEEP_EVAL_RUN_H
#define AL_SWEEP_EVAL_RUN_H

#include "al_sweep_spec.h"

typedef struct al_sweep_eval_stats {
    int trials;      /* ok trials looked at */
    int computed;    /* rows and by_position files computed now */
    int failed;      /* trials whose evaluation failed (each said on stderr) */
} al_sweep_eval_stats;

/* Every ok trial of s in dir evaluated as s->eval asks, skipping what is
 * already there, with `threads` BLAS threads. Nothing without s->eval.on.
 * -1 when some trial's evaluation failed (the others go on). */
int al_sweep_evaluate(const al_sweep *s, const char *dir, long threads, al_sweep_eval_stats *st);

/* Trial t alone, as al_sweep_evaluate evaluates it but for eval.decode's
 * timing: what a trial's worker runs once it has trained ok (cmd_trial.c),
 * so that a trial's results come with it, the cores score finished trials
 * while others train, and a sweep cut short keeps what it scored. Decode
 * speed is left to the sweep's pass at the end, when no trial trains
 * beside it. *computed: what it computed. */
int al_sweep_evaluate_trial(const al_sweep *s, const al_sweep_trial *t, const char *dir,
                            long threads, int *computed, al_err *e);

#endif
