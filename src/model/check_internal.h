/*
 * check_internal.h - what check_variant.c and check_harness.c share and
 * nothing else sees: guard floats, buffer helpers, differences.
 */
#ifndef AL_CHECK_INTERNAL_H
#define AL_CHECK_INTERNAL_H

#include <stddef.h>

#include "al_check_variant.h"
#include "attnlab_variant.h"

/* NaN-patterned floats after every buffer a variant writes: written ones
 * show an overrun. */
#define AL_CHECK_GUARD 64
void al_check_guard_fill(float *p, size_t n);
/* Guard floats overwritten after p[0..n) (guard of them). */
int al_check_guard_hits(const float *p, size_t n, size_t guard);

size_t al_check_numel(const al_param_spec *s);
/* n zeroed floats (at least one), never NULL. */
float *al_check_fresh(size_t n);
/* max |a - b| over n floats. */
double al_check_max_diff(const float *a, const float *b, size_t n);
/* The same, amax (when given) raised to the largest |b|. */
double al_check_diff_amax(const float *a, const float *b, int n, double *amax);

/* Rows of P (H, T, T) are distributions, zero above the diagonal under
 * the mask: the largest departure (check_harness.c). */
double al_check_probs_rows_err(const float *P, int H, int T, int causal);
/* How well P fits the Jacobian J (T, T, D, D) of a layer whose input rows
 * are all equal (probs.forward): the relative residual, H <= 8. */
double al_check_probs_fit(const float *P, const double *J, int H, int T, int D);

/* Records one measurement under `name`; a line keeps its worst case
 * (check_report.c). In a check's child process the line also goes to the
 * parent. */
void al_check_record(al_check_report *r, const char *name, double err, double bound, int at_least,
                     const char *where);

/* One check: fn(r, job) records its lines. al_check_group runs it as `how`
 * says (NULL: in this process), merging its lines into r and into last
 * (this run's lines alone; freed and refilled). A check whose child did
 * not finish adds a FAIL line `name` at `where` saying how it ended (killed
 * by a signal, exited, timed out) and returns -1; 0 when it finished. */
typedef void (*al_check_group_fn)(al_check_report *r, const void *job);
int al_check_group(al_check_report *r, const al_check_run *how, const char *name,
                   const char *where, al_check_group_fn fn, const void *job,
                   al_check_report *last);

/* n floats (at least one) zeroed, for a buffer handed to the variant:
 * a page the process may not touch lies right after it (its end at most
 * 3 floats short of that page, the start kept 16-byte aligned) and another
 * before its first page, so an overrun or underrun past what a guard float
 * shows stops at once (SIGSEGV) instead of corrupting the heap. Never
 * NULL. Free with al_check_unguard. */
float *al_check_guarded(size_t n);
void al_check_unguard(float *p);

#endif
