/*
 * config.c - values derived from a resolved configuration that the model
 * itself needs (al_config.h). Decoding and writing config files is the io
 * layer's (io/config.c).
 */
#include "al_config.h"

#include <math.h>
#include <string.h>

int al_config_d_ff(const al_model_config *m)
{
    return m->d_ff > 0 ? m->d_ff : (int)lround(m->mlp_ratio * m->d_model);
}

void al_config_attn_shape(const al_config *c, al_attn_shape *s)
{
    const al_model_config *m = &c->model;
    memset(s, 0, sizeof *s);
    s->d_model = m->d_model;
    s->n_head = m->n_head;
    s->d_head = m->d_head ? m->d_head : (m->n_head > 0 ? m->d_model / m->n_head : 0);
    s->seq_len = m->seq_len;
    s->causal = m->causal;
    s->rope_base = (float)m->rope_base;
    s->norm_eps = (float)m->norm_eps;
    memcpy(s->set, m->attn_set, sizeof s->set);
}
