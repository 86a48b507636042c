/*
 * optim.c - AdamW, schedule, clipping.
 */
#include "al_optim.h"
#include "al_parallel.h"

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

AL_CLONES static void adamw_tensor(al_adamw *o, float *p, const float *g, float *m,
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

typedef struct adamw_job {
    al_adamw *o;
    al_model *m;
    float lr, bc1, bc2;
} adamw_job;

/* Parameters [lo, hi) of the flat vector, tensor by tensor (weight decay
 * is per tensor): one loop over the pool instead of one per tensor. */
static void adamw_range(void *ctx, long lo, long hi, int tid)
{
    const adamw_job *j = ctx;
    al_adamw *o = j->o;
    const al_model *m = j->m;
    for (int i = 0; i < m->n_tensors; i++) {
        const al_tensor *t = &m->tensors[i];
        long a = (long)t->offset, b = a + (long)t->numel;
        a = a > lo ? a : lo;
        b = b < hi ? b : hi;
        if (a >= b) continue;
        adamw_tensor(o, m->params + a, m->grads + a, o->m + a, o->v + a, (size_t)(b - a),
                     j->lr, t->decay ? o->weight_decay : 0.0f, j->bc1, j->bc2);
    }
    (void)tid;
}

void al_adamw_step(al_adamw *o, al_model *m, double lr)
{
    AL_ASSERT(o->n == m->n_params);
    o->step++;
    adamw_job j = {o, m, (float)lr, (float)(1.0 - pow(o->beta1, (double)o->step)),
                   (float)(1.0 - pow(o->beta2, (double)o->step))};
    al_parallel_for((long)m->n_params, 16384, adamw_range, &j);
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

/* The sum of squares is taken over fixed blocks of NORM_BLOCK gradients,
 * each block's partial sum in its own slot, and the slots are added in
 * order: the same bits for any thread count. */
#define NORM_BLOCK 65536

typedef struct norm_job {
    float *g;
    double *part;
    size_t n;
    float scale;
} norm_job;

AL_CLONES static void sumsq_blocks(void *ctx, long lo, long hi, int tid)
{
    const norm_job *j = ctx;
    for (long b = lo; b < hi; b++) {
        size_t i0 = (size_t)b * NORM_BLOCK, i1 = i0 + NORM_BLOCK < j->n ? i0 + NORM_BLOCK : j->n;
        double s[4] = {0};
        size_t i = i0;
        for (; i + 4 <= i1; i += 4)
            for (int l = 0; l < 4; l++) s[l] += (double)j->g[i + l] * j->g[i + l];
        for (; i < i1; i++) s[0] += (double)j->g[i] * j->g[i];
        j->part[b] = (s[0] + s[1]) + (s[2] + s[3]);
    }
    (void)tid;
}

static void scale_range(void *ctx, long lo, long hi, int tid)
{
    const norm_job *j = ctx;
    for (long i = lo; i < hi; i++) j->g[i] *= j->scale;
    (void)tid;
}

double al_clip_grad_norm(al_model *m, double max_norm)
{
    long nb = (long)((m->n_params + NORM_BLOCK - 1) / NORM_BLOCK);
    double stack[1024], *part = nb <= 1024 ? stack : al_malloc(nb * sizeof(double));
    norm_job j = {m->grads, part, m->n_params, 1.0f};
    al_parallel_for(nb, 1, sumsq_blocks, &j);
    double ss = 0.0;
    for (long b = 0; b < nb; b++) ss += part[b];
    if (part != stack) free(part);
    double norm = sqrt(ss);
    if (max_norm > 0 && norm > max_norm) {
        j.scale = (float)(max_norm / (norm + 1e-6));
        al_parallel_for((long)m->n_params, 16384, scale_range, &j);
    }
    return norm;
}
