/*
 * al_check_variant.h - the variant conformance suite (`attnlab
 * check-variant`, and the tests' generic loop over every variant): one
 * variant, built-in or from a plugin, is run at several shapes its init
 * accepts and each check's measured error is returned against its bound.
 *
 * Checks (the names printed and matched by the tests):
 *   gradient.NAME / gradient.x  backward against central finite differences,
 *                               masked and unmasked, at every shape and with
 *                               each optional setting the variant accepts at 4
 *   causal                      outputs at positions <= i ignore inputs > i
 *   causal.future               ... and do depend on them (at least the bound)
 *   determinism.runs            the same inputs give the same bits twice
 *   determinism.threads         1 thread against 2 and 3 (forward, backward,
 *                               decode), relative
 *   writes_grads                backward writes dx and dp (flag
 *                               AL_VARIANT_WRITES_GRADS) or adds to them
 *   scratch.forward             forward/backward stay inside scratch_floats
 *   scratch.decode.DTYPE        decode stays inside decode->scratch_floats at
 *                               a context past one cache tile (f32 bf16 f16)
 *   decode                      token by token from position 0, logits equal
 *                               the full forward (f32), past one tile
 *   prefill                     prefill a prompt, decode the rest (f32)
 *   decode.bf16 / decode.f16    the same past one tile, relative to the
 *                               largest logit
 *   decode.batch                batched decode equals single decodes
 *   probs.rows                  every row a distribution, 0 above the
 *                               diagonal under the mask
 *   probs.forward               the probabilities forward used: with every
 *                               input row equal, d out_i / d x_j is exactly
 *                               sum_h P[h][i][j] M_h (the score path cancels),
 *                               and probs' P must fit it (relative residual)
 *   cache.bytes                 measured cache bytes equal kv_elems x rows
 *                               x layers x dtype size
 * Decode checks run when the variant has decode hooks (a partial set is one
 * failing `decode` line); probs checks when it has probs. decode.bf16/f16
 * are not run (and fail) when that dtype's decode scratch overruns, so a
 * broken plugin cannot corrupt the heap of the process checking it.
 */
#ifndef AL_CHECK_VARIANT_H
#define AL_CHECK_VARIANT_H

#include <stddef.h>

#include <stdint.h>

#include "al_config.h"
#include "al_model.h"

typedef struct al_check_line {
    char name[40];      /* "gradient.wq", "decode.bf16" */
    char where[192];    /* the worst case: shape, mask, setting, context */
    double err, bound;  /* measured error and its bound */
    int at_least;       /* 1: err must be >= bound (an effect that must show) */
    int pass;
} al_check_line;

typedef struct al_check_report {
    int n, cap, n_fail;
    al_check_line *lines;   /* owned */
    int n_shapes;
    char shapes[128];       /* "d_model 16 n_head 4 d_head 4; ..." */
} al_check_report;

/* Settings fixed by the caller (--set model.attention.KEY=V): given[i] says
 * whether set[i] (in the order of v->settings) was given. */
typedef struct al_check_settings {
    double set[AL_MAX_SETTINGS];
    int given[AL_MAX_SETTINGS];
} al_check_settings;

/* Runs every check on v. Returns 0 (r filled; r->n_fail lines failed) or
 * -1 with e set when no candidate shape passes the variant's check() (e
 * then holds the variant's own refusal at the first shape). fixed may be
 * NULL. Free r with al_check_report_free. */
int al_check_variant(const al_variant *v, const al_check_settings *fixed,
                     al_check_report *r, al_err *e);
void al_check_report_free(al_check_report *r);
/* The line named `name`, or NULL. */
const al_check_line *al_check_find(const al_check_report *r, const char *name);
/* One line as `attnlab check-variant` prints it (no newline). */
void al_check_format(const al_check_line *l, char *buf, size_t n);

/* ---- the harness the checks are made of, public so that the tests that
 * check one layer or one model by hand measure it the same way. */

/* One layer of v on its own buffers: random parameters (norm weights near
 * 1, others 0.4 normal) and inputs x and loss weights R (normal), the same
 * for a seed, a guard of NaN-patterned floats after scratch and act. */
typedef struct al_check_layer {
    const al_variant *v;
    al_attn_shape s;
    void *ctx;   /* v->init's */
    al_param_spec spec[AL_MAX_ATTN_PARAMS];
    int np, B, T;
    size_t n_act, n_scr;
    float *p[AL_MAX_ATTN_PARAMS], *dp[AL_MAX_ATTN_PARAMS];   /* owned */
    float *x, *dx, *out, *act, *scratch, *R;                 /* owned */
} al_check_layer;

/* A (B, T) layer of v at shape s, which v's init must accept. */
void al_check_layer_init(al_check_layer *t, const al_variant *v, const al_attn_shape *s, int B,
                         int T, uint64_t seed);
void al_check_layer_free(al_check_layer *t);
/* forward, then L = sum(out * R) in double. */
double al_check_layer_loss(al_check_layer *t);
/* backward of the last forward given dout (R for dL/dout): into dx, dp as
 * the variant's flags say (callers zero them first for an accumulating one). */
void al_check_layer_backward(al_check_layer *t, const float *dout);

/* Relative error ||a - b|| / max(||a||, ||b||, 1e-12) over n doubles. */
double al_check_rel_err(const double *a, const double *b, size_t n);
/* Central differences (step 1e-2, or where that misses, their Richardson
 * extrapolation with 5e-3) of loss(arg) along `probes` (<= 64) random
 * coordinates of x[0..n) against grad there: their relative error. */
typedef double (*al_check_loss_fn)(void *arg);
double al_check_fd_err(al_check_loss_fn loss, void *arg, float *x, const float *grad, size_t n,
                       int probes, al_rng *r);
/* al_check_fd_err for tensor t of model m, whose loss is al_model_forward
 * on (in, tgt, w) of a (B, T) batch and whose grads hold its gradient. */
double al_check_model_fd(al_model *m, const al_tensor *t, const int *in, const int *tgt,
                         const float *w, int B, int T, int probes, al_rng *r);

/* Logits (n, vocab) of m's full forward over tok[0..n) (malloc'ed), or
 * NULL with e set when the batch cannot be reserved. */
float *al_check_full_logits(al_model *m, const int *tok, int n, al_err *e);
/* Prefill P tokens (none when P == 0) into an n-token decoder of dtype,
 * decode to n, and diff against full at every position from max(P - 1,
 * 0): the largest |difference| (amax, when given, raised to the largest
 * |full|), or INFINITY when the decoder refuses. */
double al_check_decode_vs_full(al_model *m, const int *tok, const float *full, int P, int n,
                               int dtype, double *amax);

#endif
