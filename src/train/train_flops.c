/*
 * train_flops.c - train.flops: a run's steps from its compute budget and
 * the model's train_flops_per_token (al_cost.h), so that a sweep compares
 * attentions at equal training compute (docs/costs.md).
 */
#include "al_train.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>

#include "al_cost.h"
#include "al_kvcache.h"

int al_train_flops_steps(al_config *c, double *per_token, al_err *e)
{
    if (c->train.flops <= 0) return 0;
    al_cost_opts o = {c->model.seq_len, 1, AL_KV_F32};
    al_model_cost m;
    if (al_cost_of_model(&c->model, &o, &m, e) != 0) return -1;
    double step = m.train_flops_per_token * c->train.batch_size * c->model.seq_len;
    double steps = floor(c->train.flops / step);
    if (steps < 1)
        return al_errf(e, "%s: 'train.flops' (%g) buys no step: one step costs %.0f FLOPs "
                       "(train_flops_per_token %.0f x batch_size %d x seq_len %d)", c->file,
                       c->train.flops, step, m.train_flops_per_token, c->train.batch_size,
                       c->model.seq_len);
    if (steps > INT_MAX)
        return al_errf(e, "%s: 'train.flops' (%g) buys %.0f steps, more than %d", c->file,
                       c->train.flops, steps, INT_MAX);
    c->train.steps = (int)steps;
    if (c->train.warmup_steps > c->train.steps) c->train.warmup_steps = c->train.steps;
    if (per_token) *per_token = m.train_flops_per_token;
    return 0;
}

void al_train_flops_line(const al_config *c, double per_token, char *out, size_t n)
{
    double step = per_token * c->train.batch_size * c->model.seq_len;
    snprintf(out, n, "train.flops %g: %d steps of %.0f FLOPs (train_flops_per_token %.0f x "
             "batch_size %d x seq_len %d), %.6g FLOPs in all; warmup_steps %d, eval_every %d",
             c->train.flops, c->train.steps, step, per_token, c->train.batch_size,
             c->model.seq_len, step * c->train.steps, c->train.warmup_steps,
             c->train.eval_every);
}
