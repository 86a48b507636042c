/*
 * sweep_costs.c - what each trial costs per token (al_cost.h), for its
 * result.json and summary.csv's cost columns (docs/costs.md).
 */
#include "al_sweep_spec.h"

#include "al_cost.h"
#include "al_kvcache.h"
#include "sweep_internal.h"

int al_sweep_trial_costs(al_sweep_trial *t, al_err *e)
{
    const al_model_config *m = &t->cfg.model;
    al_cost_opts o = {t->kv_context, 1, al_kv_dtype_parse(m->kv_dtype)};
    if (o.kv_dtype < 0) o.kv_dtype = AL_KV_F32;   /* a config built in code */
    al_model_cost c;
    if (al_cost_of_model(m, &o, &c, e) != 0) return -1;
    t->train_flops_per_token = c.train_flops_per_token;
    t->decode_flops_per_token = c.decode_flops_per_token;
    t->decode_bytes_per_token = c.decode_bytes_per_token;
    t->arithmetic_intensity = c.arithmetic_intensity;
    return 0;
}

long al_sweep_trial_work(const al_sweep_trial *t, long steps)
{
    double per_step = t->train_flops_per_token * t->cfg.train.batch_size * t->cfg.model.seq_len;
    double kflop = per_step / 1e3;   /* < 2^63 / 1e3 for any model that fits in memory */
    return steps * (kflop >= 1 ? (long)(kflop + 0.5) : 1);
}

double al_sweep_trial_train_flops(const al_sweep_trial *t, int steps_done)
{
    int steps = steps_done > 0 ? steps_done : t->cfg.train.steps;
    return t->train_flops_per_token * t->cfg.train.batch_size * t->cfg.model.seq_len * steps;
}
