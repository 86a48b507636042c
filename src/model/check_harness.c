/*
 * check_harness.c - the harness the conformance checks are made of
 * (al_check_variant.h): one layer on its own guarded buffers, central
 * differences, the full forward's logits and decoding against them. The
 * checks (check_variant.c) and the tests that check one layer or model by
 * hand use the same code.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "al_check_variant.h"
#include "al_decode.h"
#include "al_registry.h"
#include "check_internal.h"

/* ------------------------------------------------------------ buffers */

static const uint32_t canary = 0x7fc0beefu;

void al_check_guard_fill(float *p, size_t n)
{
    for (size_t i = 0; i < n; i++) memcpy(p + i, &canary, sizeof canary);
}

/* Guard floats overwritten after p[0..n). */
int al_check_guard_hits(const float *p, size_t n, size_t guard)
{
    int hits = 0;
    for (size_t i = n; i < n + guard; i++) hits += memcmp(p + i, &canary, sizeof canary) != 0;
    return hits;
}

size_t al_check_numel(const al_param_spec *s) { return (size_t)s->rows * (s->cols ? s->cols : 1); }

float *al_check_fresh(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof(float));
    AL_ASSERT(p);
    return p;
}

/* ------------------------------------------------------------ one layer */

void al_check_layer_init(al_check_layer *t, const al_variant *v, const al_attn_shape *s, int B,
                         int T, uint64_t seed)
{
    memset(t, 0, sizeof *t);
    t->v = v;
    t->s = *s;
    t->B = B, t->T = T;
    char err[8];
    t->ctx = al_variant_init(v, &t->s, err, sizeof err);
    AL_ASSERT(t->ctx != NULL);   /* the caller's shape is one the variant accepts */
    t->np = v->train->params(t->ctx, t->spec);
    al_rng r;
    al_rng_seed(&r, seed);
    for (int i = 0; i < t->np; i++) {
        size_t n = al_check_numel(&t->spec[i]);
        t->p[i] = al_check_fresh(n), t->dp[i] = al_check_fresh(n);
        for (size_t j = 0; j < n; j++)
            t->p[i][j] = t->spec[i].init == AL_INIT_ONES ? 1.0f + 0.1f * (float)al_rng_normal(&r)
                                                         : 0.4f * (float)al_rng_normal(&r);
    }
    size_t BTD = (size_t)B * T * s->d_model;
    t->x = al_check_fresh(BTD), t->R = al_check_fresh(BTD), t->dx = al_check_fresh(BTD), t->out = al_check_fresh(BTD);
    for (size_t j = 0; j < BTD; j++) t->x[j] = (float)al_rng_normal(&r);
    for (size_t j = 0; j < BTD; j++) t->R[j] = (float)al_rng_normal(&r);
    t->n_act = v->train->act_floats(t->ctx, B, T);
    t->n_scr = v->train->scratch_floats(t->ctx, B, T);
    t->act = al_check_fresh(t->n_act + AL_CHECK_GUARD), t->scratch = al_check_fresh(t->n_scr + AL_CHECK_GUARD);
    al_check_guard_fill(t->act + t->n_act, AL_CHECK_GUARD);
    al_check_guard_fill(t->scratch + t->n_scr, AL_CHECK_GUARD);
}

void al_check_layer_free(al_check_layer *t)
{
    t->v->fini(t->ctx);
    for (int i = 0; i < t->np; i++) free(t->p[i]), free(t->dp[i]);
    free(t->x), free(t->R), free(t->dx), free(t->out), free(t->act), free(t->scratch);
}

double al_check_layer_loss(al_check_layer *t)
{
    t->v->train->forward(t->ctx, t->out, t->act, t->scratch, t->x, t->p, t->B, t->T);
    double L = 0;
    for (size_t j = 0; j < (size_t)t->B * t->T * t->s.d_model; j++) L += (double)t->out[j] * t->R[j];
    return L;
}

void al_check_layer_backward(al_check_layer *t, const float *dout)
{
    t->v->train->backward(t->ctx, t->dx, t->dp, t->scratch, dout, t->x, t->act, t->p, t->B, t->T);
}

/* ------------------------------------------------------------ differences */

double al_check_max_diff(const float *a, const float *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++) {
        double x = fabs((double)a[i] - b[i]);
        if (x > d || isnan(x)) d = isnan(x) ? INFINITY : x;
    }
    return d;
}

double al_check_rel_err(const double *a, const double *b, size_t n)
{
    double d = 0, na = 0, nb = 0;
    for (size_t i = 0; i < n; i++) {
        d += (a[i] - b[i]) * (a[i] - b[i]);
        na += a[i] * a[i];
        nb += b[i] * b[i];
    }
    return sqrt(d) / fmax(fmax(sqrt(na), sqrt(nb)), 1e-12);
}

/* Central differences at step h along the probes into fd. */
static void fd_at(al_check_loss_fn loss, void *arg, float *x, const size_t *at, int probes,
                  float h, double *fd)
{
    for (int k = 0; k < probes; k++) {
        size_t j = at[k];
        float save = x[j];
        x[j] = save + h;
        double lp = loss(arg);
        x[j] = save - h;
        double lm = loss(arg);
        x[j] = save;
        fd[k] = (lp - lm) / (2.0 * h);
    }
}

/* Step 1e-2, and where that misses, the Richardson extrapolation of 1e-2
 * and 5e-3, (4 fd(h/2) - fd(h)) / 3, whose truncation error is O(h^4):
 * a layer that normalises a vector which can come near zero (deltanet's
 * per-head output norm) is curved enough there that 1e-2 alone leaves the
 * linear range, while a wrong gradient stays wrong however small the error
 * of the differences. */
double al_check_fd_err(al_check_loss_fn loss, void *arg, float *x, const float *grad, size_t n,
                       int probes, al_rng *r)
{
    enum { MAX_PROBES = 64 };
    size_t at[MAX_PROBES];
    double an[MAX_PROBES] = {0}, fd[MAX_PROBES] = {0}, half[MAX_PROBES] = {0};
    AL_ASSERT(probes >= 1 && probes <= MAX_PROBES);
    for (int k = 0; k < probes; k++) at[k] = al_rng_below(r, n), an[k] = grad[at[k]];
    fd_at(loss, arg, x, at, probes, 1e-2f, fd);
    double e = al_check_rel_err(an, fd, probes);
    if (e <= 1e-3) return e;
    fd_at(loss, arg, x, at, probes, 5e-3f, half);
    for (int k = 0; k < probes; k++) half[k] = (4.0 * half[k] - fd[k]) / 3.0;
    return fmin(e, al_check_rel_err(an, half, probes));
}

/* The model's loss on its batch (al_check_model_fd). */
typedef struct model_batch {
    al_model *m;
    const int *in, *tgt;
    const float *w;
    int B, T;
} model_batch;

static double model_loss(void *arg)
{
    model_batch *b = arg;
    return al_model_forward(b->m, b->in, b->tgt, b->w, b->B, b->T);
}

double al_check_model_fd(al_model *m, const al_tensor *t, const int *in, const int *tgt,
                         const float *w, int B, int T, int probes, al_rng *r)
{
    model_batch b = {m, in, tgt, w, B, T};
    return al_check_fd_err(model_loss, &b, m->params + t->offset, m->grads + t->offset,
                           t->numel, probes, r);
}

/* ------------------------------------------------------------ decoding */

double al_check_diff_amax(const float *a, const float *b, int n, double *amax)
{
    for (int i = 0; i < n && amax; i++) *amax = fmax(*amax, fabs((double)b[i]));
    return al_check_max_diff(a, b, (size_t)n);
}

float *al_check_full_logits(al_model *m, const int *tok, int n, al_err *e)
{
    size_t V = (size_t)m->cfg.vocab_size;
    if (al_model_reserve(m, 1, n, e) != 0) return NULL;
    al_model_forward(m, tok, NULL, NULL, 1, n);
    float *out = al_check_fresh((size_t)n * V);
    memcpy(out, m->logits, (size_t)n * V * sizeof(float));
    return out;
}

double al_check_decode_vs_full(al_model *m, const int *tok, const float *full, int P, int n,
                               int dtype, double *amax)
{
    al_decoder d;
    al_err e;
    int V = m->cfg.vocab_size;
    if (al_decoder_init(&d, m, n, dtype, &e) != 0) return INFINITY;
    double worst = 0;
    if (P > 0) {
        if (al_decoder_prefill(&d, tok, P, &e) != 0) {
            al_decoder_free(&d);
            return INFINITY;
        }
        worst = al_check_diff_amax(d.logits, full + (size_t)(P - 1) * V, V, amax);
    }
    for (int t = P; t < n; t++)
        worst = fmax(worst, al_check_diff_amax(al_decoder_step(&d, tok[t]), full + (size_t)t * V, V,
                                      amax));
    al_decoder_free(&d);
    return worst;
}
