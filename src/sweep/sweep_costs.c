/*
 * sweep_costs.c - what each trial costs per token (al_cost.h), for its
 * result.json and summary.csv's cost columns (docs/costs.md).
 */
#include "al_sweep_spec.h"

#include "al_cost.h"
#include "al_kvcache.h"
#include "sweep_internal.h"

#include <string.h>

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

/* Forward FLOPs a token of a T-token window: the model's prefill at T (a
 * model trained at 256 scores a 4,096 window attending over 4,096
 * positions). 0 when the count fails (the shape is the trial's own; its
 * errors were reported when the file was read). */
static double forward_per_token(const al_sweep_trial *t, int T)
{
    al_model_config m = t->cfg.model;   /* read only: a shallow copy */
    m.seq_len = T;
    al_cost_opts o = {T, 1, AL_KV_F32};
    al_model_cost c;
    al_err e;
    return al_cost_of_model(&m, &o, &c, &e) == 0 ? c.prefill_flops_per_token : 0;
}

long al_sweep_trial_eval_work(const al_sweep_eval *v, const al_sweep_trial *t)
{
    double flops = 0;
    if (!v->on || !v->score || strcmp(t->cfg.data.source, "mqar") == 0) return 0;
    if (strcmp(t->cfg.data.source, "passkey") == 0) {
        /* score --passkey's defaults (al_passkey_grid): seq_len x 1, 2, 4; 4 depths; 20 */
        int n = v->n_pk_lengths ? v->n_pk_lengths : 3, depths = v->n_pk_depths ? v->n_pk_depths : 4;
        long examples = v->pk_examples ? v->pk_examples : 20;
        for (int k = 0; k < n; k++) {
            int L = v->n_pk_lengths ? v->pk_lengths[k] : t->cfg.model.seq_len << k;
            flops += (double)depths * examples * L * forward_per_token(t, L);
        }
    } else {
        for (int c = 0; c < (v->n_contexts ? v->n_contexts : 1); c++) {
            int T = v->n_contexts ? v->contexts[c] : t->cfg.model.seq_len;
            flops += (double)v->tokens * (v->n_dtypes + (v->by_position ? 1 : 0)) *
                     forward_per_token(t, T);
        }
    }
    return (long)(flops / 1e3 + 0.5);   /* kFLOP, as al_sweep_trial_work */
}
