/*
 * al_report_ablation.h - the causal-mask ablation made visible, for the report of
 * a sweep that trained models with and without the causal mask
 * (experiments/causal_mask_ablation.yaml).
 *
 * For every configuration whose finished trials kept a checkpoint:
 *   - scores: each model's validation loss as trained and with the causal
 *     mask applied, on the same batches (train.eval_seed). With the mask
 *     applied is what a model gets generating one token at a time; for an
 *     unmasked model the difference is the leak.
 *   - maps: every head's attention over a line of validation text, drawn
 *     per layer into DIR/attention/<config>/ (al_attnmap.h), side by side,
 *     with each model's mean attention on the next token (the answer).
 *   - samples, decoded one byte at a time through the KV cache. A cache
 *     holds each token's keys and values computed when only earlier tokens
 *     existed, so decoding from it is decoding with the causal mask; the
 *     unmasked model is decoded that way, explicitly, and the report says so.
 */
#ifndef AL_ABLATION_H
#define AL_ABLATION_H

#include <stdio.h>

#include "al_report_headstats.h"

/* Longest prompt of the side-by-side maps (so each token gets a label). */
#define AL_ABLATION_PROMPT 40
/* The samples' prompt and sampling settings. */
#define AL_ABLATION_SAMPLE_PROMPT "The "

/* Writes the section "The causal mask" into md when some finished trial
 * was trained without the mask (causal 0); nothing otherwise. Pictures
 * that cannot be drawn and trials that cannot be read are noted in the
 * section. Returns 0, or -1 when a file could not be written. */
int al_ablation_section(FILE *md, const char *dir, const al_hs_trial *t, int n, al_err *e);

#endif
