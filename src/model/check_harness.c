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
#include <sys/mman.h>
#include <unistd.h>

#include "al_check_variant.h"
#include "al_size.h"
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

/* Every guarded buffer alive: the mapping under it (a list, as checks
 * allocate from one thread and hold few buffers at once). */
typedef struct guarded {
    float *p;
    char *base;
    size_t len;
    struct guarded *next;
} guarded;
static guarded *live;

float *al_check_guarded(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes, data;
    AL_ASSERT(al_size_mul(n ? n : 1, sizeof(float), &bytes) == 0 &&
              al_size_add(bytes, 15 + page - 1, &data) == 0 && data < SIZE_MAX / 2);
    data = data / page * page;   /* the floats and up to 15 bytes of alignment */
    guarded *g = malloc(sizeof *g);
    AL_ASSERT(g);
    g->len = data + 2 * page;
    g->base = mmap(NULL, g->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    AL_ASSERT(g->base != MAP_FAILED);
    AL_ASSERT(mprotect(g->base, page, PROT_NONE) == 0 &&
              mprotect(g->base + page + data, page, PROT_NONE) == 0);
    uintptr_t end = (uintptr_t)(g->base + page + data);
    g->p = (float *)((end - bytes) & ~(uintptr_t)15);
    g->next = live;
    live = g;
    return g->p;   /* anonymous pages: zeroed */
}

void al_check_unguard(float *p)
{
    for (guarded **at = &live; *at; at = &(*at)->next)
        if ((*at)->p == p) {
            guarded *g = *at;
            *at = g->next;
            AL_ASSERT(munmap(g->base, g->len) == 0);
            free(g);
            return;
        }
    AL_ASSERT(p == NULL);
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
        t->p[i] = al_check_guarded(n), t->dp[i] = al_check_guarded(n);
        for (size_t j = 0; j < n; j++)
            t->p[i][j] = t->spec[i].init == AL_INIT_ONES ? 1.0f + 0.1f * (float)al_rng_normal(&r)
                                                         : 0.4f * (float)al_rng_normal(&r);
    }
    size_t BTD = (size_t)B * T * s->d_model;
    t->x = al_check_guarded(BTD), t->R = al_check_guarded(BTD);
    t->dx = al_check_guarded(BTD), t->out = al_check_guarded(BTD);
    for (size_t j = 0; j < BTD; j++) t->x[j] = (float)al_rng_normal(&r);
    for (size_t j = 0; j < BTD; j++) t->R[j] = (float)al_rng_normal(&r);
    t->n_act = v->train->act_floats(t->ctx, B, T);
    t->n_scr = v->train->scratch_floats(t->ctx, B, T);
    t->act = al_check_guarded(t->n_act + AL_CHECK_GUARD);
    t->scratch = al_check_guarded(t->n_scr + AL_CHECK_GUARD);
    al_check_guard_fill(t->act + t->n_act, AL_CHECK_GUARD);
    al_check_guard_fill(t->scratch + t->n_scr, AL_CHECK_GUARD);
}

void al_check_layer_free(al_check_layer *t)
{
    t->v->fini(t->ctx);
    for (int i = 0; i < t->np; i++) al_check_unguard(t->p[i]), al_check_unguard(t->dp[i]);
    float *own[] = {t->x, t->R, t->dx, t->out, t->act, t->scratch};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) al_check_unguard(own[i]);
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
 * linear range. Where that misses too, the same at steps 10 and 100 times
 * larger: a parameter whose effect is scaled down (tpa's factors enter as
 * 1/R of a sum of R products, so at a rank of hundreds a step of 1e-2
 * moves the loss by less than its f32 rounding) needs a larger step to be
 * seen at all, and along it the loss is nearly linear, so the larger step
 * costs no accuracy. The smallest error wins: a wrong gradient stays wrong
 * at every step, however small the error of the differences. */
double al_check_fd_err(al_check_loss_fn loss, void *arg, float *x, const float *grad, size_t n,
                       int probes, al_rng *r)
{
    enum { MAX_PROBES = 64 };
    static const float steps[] = {1e-2f, 1e-1f, 1.0f};
    size_t at[MAX_PROBES];
    double an[MAX_PROBES] = {0}, fd[MAX_PROBES] = {0}, half[MAX_PROBES] = {0}, e = INFINITY;
    AL_ASSERT(probes >= 1 && probes <= MAX_PROBES);
    for (int k = 0; k < probes; k++) at[k] = al_rng_below(r, n), an[k] = grad[at[k]];
    for (size_t i = 0; i < sizeof steps / sizeof steps[0] && e > 1e-3; i++) {
        fd_at(loss, arg, x, at, probes, steps[i], fd);
        e = fmin(e, al_check_rel_err(an, fd, probes));
        if (e <= 1e-3) break;
        fd_at(loss, arg, x, at, probes, steps[i] / 2, half);
        for (int k = 0; k < probes; k++) half[k] = (4.0 * half[k] - fd[k]) / 3.0;
        e = fmin(e, al_check_rel_err(an, half, probes));
    }
    return e;
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

/* ------------------------------------------------------------ probabilities */

/* Rows of P (H, T, T) are distributions, zero above the diagonal under
 * the mask: the largest departure. */
double al_check_probs_rows_err(const float *P, int H, int T, int causal)
{
    double worst = 0;
    for (int h = 0; h < H; h++)
        for (int i = 0; i < T; i++) {
            double sum = 0;
            for (int j = 0; j < T; j++) {
                double p = P[((size_t)h * T + i) * T + j];
                if (p < 0 || (causal && j > i && p != 0)) worst = fmax(worst, fabs(p));
                sum += p;
            }
            worst = isnan(sum) ? INFINITY : fmax(worst, fabs(sum - 1));
        }
    return worst;
}

/* Solves G m = b (n <= AL_MAX_ATTN_PARAMS... heads) in place by Gaussian
 * elimination with partial pivoting; G is n x n. */
static void solve(double *G, double *b, int n)
{
    for (int c = 0; c < n; c++) {
        int piv = c;
        for (int i = c + 1; i < n; i++)
            if (fabs(G[i * n + c]) > fabs(G[piv * n + c])) piv = i;
        for (int k = 0; k < n; k++) {
            double t = G[c * n + k];
            G[c * n + k] = G[piv * n + k], G[piv * n + k] = t;
        }
        double t = b[c];
        b[c] = b[piv], b[piv] = t;
        if (fabs(G[c * n + c]) < 1e-300) continue;
        for (int i = c + 1; i < n; i++) {
            double f = G[i * n + c] / G[c * n + c];
            for (int k = c; k < n; k++) G[i * n + k] -= f * G[c * n + k];
            b[i] -= f * b[c];
        }
    }
    for (int c = n - 1; c >= 0; c--) {
        double acc = b[c];
        for (int k = c + 1; k < n; k++) acc -= G[c * n + k] * b[k];
        b[c] = fabs(G[c * n + c]) < 1e-300 ? 0 : acc / G[c * n + c];
    }
}

/* With every input row equal, every value row is equal, so the score path
 * of d out_i / d x_j vanishes (the weights of a row sum to 1 and multiply
 * one value) and J[i][j] = sum_h P[h][i][j] M_h for fixed matrices M_h
 * (head h's value and output maps). Fits the M_h to J by least squares
 * with the P the variant's probs gives; returns the relative residual:
 * ~1e-6 when P is the forward's, large when it is not. */
double al_check_probs_fit(const float *P, const double *J, int H, int T, int D)
{
    double G[64] = {0}, num = 0, den = 0;
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++)
            for (int h = 0; h < H; h++)
                for (int g = 0; g < H; g++)
                    G[h * H + g] += (double)P[((size_t)h * T + i) * T + j] * P[((size_t)g * T + i) * T + j];
    for (int h = 0; h < H; h++) G[h * H + h] += 1e-12;
    for (int ab = 0; ab < D * D; ab++) {
        double m[8] = {0}, Gc[64];
        memcpy(Gc, G, sizeof Gc);
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++)
                for (int h = 0; h < H; h++)
                    m[h] += P[((size_t)h * T + i) * T + j] * J[((size_t)i * T + j) * D * D + ab];
        solve(Gc, m, H);
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                double y = J[((size_t)i * T + j) * D * D + ab], fit = 0;
                for (int h = 0; h < H; h++) fit += P[((size_t)h * T + i) * T + j] * m[h];
                num += (y - fit) * (y - fit);
                den += y * y;
            }
    }
    return sqrt(num) / fmax(sqrt(den), 1e-30);
}
