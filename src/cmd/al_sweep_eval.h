/*
 * al_sweep_eval.h - a sweep's `eval` run on its finished trials
 * (sweep_eval.c, which says what goes where), called by `attnlab sweep`
 * once its trials have run. In the cmd layer because it scores with
 * `attnlab score`'s code.
 */
#ifndef AL_SWEEP_EVAL_H
#define AL_SWEEP_EVAL_H

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

#endif
