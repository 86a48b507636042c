/*
 * optim.c - AdamW, schedule, clipping.
 */
#include "al_optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void al_adamw_init(al_adamw *o, size_t n, double beta1, double beta2, double wd)
{
    memset(o, 0, sizeof *o);
    o->n = n;
    o->m = al_calloc(n, sizeof(float));
    o->v = al_calloc(n, sizeof(float));
    o->beta1 = (float)beta1;
    o->beta2 = (float)beta2;
    o->eps = 1e-8f;
    o->weight_decay = (float)wd;
}

static void adamw_tensor(al_adamw *o, float *p, const float *g, float *m,
                         float *v, size_t n, float lr, float decay, float bc1,
                         float bc2)
{
    float b1 = o->beta1, b2 = o->beta2, eps = o->eps;
    for (size_t i = 0; i < n; i++) {
        p[i] -= lr * decay * p[i];
        m[i] = b1 * m[i] + (1.0f - b1) * g[i];
        v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
        float mhat = m[i] / bc1, vhat = v[i] / bc2;
        p[i] -= lr * mhat / (sqrtf(vhat) + eps);
    }
}

void al_adamw_step(al_adamw *o, al_model *m, double lr)
{
    AL_ASSERT(o->n == m->n_params);
    o->step++;
    float bc1 = (float)(1.0 - pow(o->beta1, (double)o->step));
    float bc2 = (float)(1.0 - pow(o->beta2, (double)o->step));
    for (int i = 0; i < m->n_tensors; i++) {
        const al_tensor *t = &m->tensors[i];
        size_t off = t->offset;
        adamw_tensor(o, m->params + off, m->grads + off, o->m + off, o->v + off,
                     t->numel, (float)lr, t->decay ? o->weight_decay : 0.0f, bc1, bc2);
    }
}

void al_adamw_free(al_adamw *o)
{
    free(o->m);
    free(o->v);
    memset(o, 0, sizeof *o);
}

double al_lr_at(long step, long steps, long warmup, double lr, double min_lr)
{
    if (step < warmup) return lr * (double)(step + 1) / (double)(warmup + 1);
    if (step >= steps) return min_lr;
    double span = (double)(steps - warmup);
    double ratio = span > 0 ? (double)(step - warmup) / span : 1.0;
    double coeff = 0.5 * (1.0 + cos(M_PI * ratio));
    return min_lr + coeff * (lr - min_lr);
}

double al_clip_grad_norm(al_model *m, double max_norm)
{
    double ss = 0.0;
    for (size_t i = 0; i < m->n_params; i++) ss += (double)m->grads[i] * m->grads[i];
    double norm = sqrt(ss);
    if (max_norm > 0 && norm > max_norm) {
        float s = (float)(max_norm / (norm + 1e-6));
        for (size_t i = 0; i < m->n_params; i++) m->grads[i] *= s;
    }
    return norm;
}
