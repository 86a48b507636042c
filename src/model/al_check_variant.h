/*
 * al_check_variant.h - the variant conformance suite (`attnlab
 * check-variant`, and the tests' generic loop over every variant): one
 * variant, built-in or from a plugin, is run at several shapes its check()
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

#include "al_config.h"

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

#endif
