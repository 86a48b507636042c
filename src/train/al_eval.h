/*
 * al_eval.h - a model scored on the held-out splits (eval.c). Both walk
 * the data source's fixed sets in order where it has them, so a score does
 * not depend on the batches a run happened to draw; neither updates the
 * model (its activations are overwritten).
 */
#ifndef AL_EVAL_H
#define AL_EVAL_H

#include "al_config.h"

struct al_model;
struct al_data;

/* Mean loss (and accuracy for task data, else NAN) on the validation
 * split: for task data over its whole fixed validation set in order, in
 * batches of t->batch_size (eval_seed and eval_batches unused); otherwise
 * over t->eval_batches batches drawn from the fixed t->eval_seed. What
 * training, `convert` and the report's causal-mask section score. */
double al_evaluate(struct al_model *m, struct al_data *d, const al_train_config *t,
                   double *accuracy);

/* Mean loss (and accuracy for task data) over the held-out test split, in
 * order, in batches of at most B: a task's fixed test set, a text's test
 * windows (the split tiled without overlap). NAN when there is none. */
double al_evaluate_test(struct al_model *m, struct al_data *d, int B, double *accuracy);

#endif
