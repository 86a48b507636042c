/*
 * cost_measure.c - the cost model's figures counted, not computed: a
 * training step, a prefill and a decode step run through the product
 * layer's counting mode (al_cost.h, al_gemm.h).
 */
#include "al_cost.h"

#include <stdlib.h>

#include "al_decode.h"
#include "al_gemm.h"

/* Forward and backward on one sequence of seq_len tokens (all token 0:
 * the products do not depend on the values). */
static int count_train(al_model *m, double *per_token, al_err *e)
{
    int T = m->cfg.seq_len;
    int *tok = al_calloc((size_t)T, sizeof(int));
    int rc = al_model_reserve(m, 1, T, e);
    if (rc == 0) {
        al_flops_count_begin();
        al_model_forward(m, tok, tok, NULL, 1, T);
        al_model_backward(m);
        *per_token = al_flops_count_end() / T;
    }
    free(tok);
    return rc;
}

static int count_prefill(al_model *m, const al_cost_opts *o, double *per_token, al_err *e)
{
    al_decoder d;
    if (al_decoder_init(&d, m, o->context, o->kv_dtype, e) != 0) return -1;
    int *tok = al_calloc((size_t)o->context, sizeof(int));
    al_flops_count_begin();
    int rc = al_decoder_prefill(&d, tok, o->context, e);
    *per_token = al_flops_count_end() / o->context;
    free(tok);
    al_decoder_free(&d);
    return rc;
}

/* One step of every sequence at position N - 1. */
static int count_decode(al_model *m, const al_cost_opts *o, double *per_token, al_err *e)
{
    al_decoder d;
    if (al_decoder_init_batch(&d, m, o->batch, o->context, o->kv_dtype, e) != 0) return -1;
    int *tok = al_calloc((size_t)o->batch, sizeof(int));
    al_decoder_fill_random(&d, o->context - 1, 1);
    al_flops_count_begin();
    al_decoder_step_batch(&d, tok);
    *per_token = al_flops_count_end() / o->batch;
    free(tok);
    al_decoder_free(&d);
    return 0;
}

int al_cost_measure(al_model *m, const al_cost_opts *o, al_cost_counted *out, al_err *e)
{
    al_cost_opts r = *o;
    if (!r.context) r.context = m->cfg.seq_len;
    if (r.batch < 1) r.batch = 1;
    if (count_train(m, &out->train_flops_per_token, e) != 0) return -1;
    if (count_prefill(m, &r, &out->prefill_flops_per_token, e) != 0) return -1;
    return count_decode(m, &r, &out->decode_flops_per_token, e);
}
