/*
 * al_report_headstats.h - what the heads of a sweep's models learned, for the
 * report: per trial and configuration, how many heads are previous-token
 * and induction heads and how spread out attention is, beside loss and
 * KV-cache size. Statistics are al_attention.h's.
 *
 * A trial counts when it finished (ok) and kept its checkpoint,
 * DIR/<trial>/model.safetensors. Its map statistics are averaged over
 * AL_HS_WINDOWS windows of seq_len tokens of its validation split, drawn
 * with its train.eval_seed (the text validation loss is measured on); its
 * induction score uses the random repeated sequences of al_attention.h.
 *
 * Writes DIR/heads.csv (trial,config,layer,head,entropy,distance,
 * first_token,prev_token,induction; atomically) and a markdown section.
 * A trial whose checkpoint or data cannot be read is named in the section
 * with the reason; it never fails the report.
 */
#ifndef AL_HEADSTATS_H
#define AL_HEADSTATS_H

#include <stdio.h>

#include "al_attention.h"
#include "al_config.h"
#include "al_data.h"

#define AL_HS_WINDOWS 4

/* A trial of a sweep as the report knows it (summary.csv). */
typedef struct al_hs_trial {
    const char *trial;     /* its directory under the sweep's */
    const char *config;    /* its configuration (trials of one share it) */
    int ok;                /* finished with status ok (and stands for its seed) */
    int causal;            /* 1, 0, or -1 when unknown */
    double kv;             /* KV-cache bytes per token */
    double val_loss;       /* validation loss */
    double quality;        /* the report's quality measure (test loss, val accuracy, ...) */
} al_hs_trial;

/* A finished trial opened for analysis: its resolved config, its model
 * from the checkpoint and, when it can be opened, its data. */
typedef struct al_trial_model {
    al_config cfg;
    al_model m;
    al_data data;
    int has_data;
    char data_err[AL_ERR_LEN];   /* why has_data is 0 */
} al_trial_model;

/* 1 when DIR/<trial>/model.safetensors is there to read. */
int al_trial_has_checkpoint(const char *dir, const char *trial);

/* Opens DIR/<trial>/config.yaml (loading the plugins it lists) and
 * model.safetensors; then the data, whose failure only clears has_data. */
int al_trial_model_open(const char *dir, const char *trial, al_trial_model *t, al_err *e);
void al_trial_model_close(al_trial_model *t);

/* n windows of seq_len tokens of the validation split, drawn with
 * train.eval_seed, into tokens (n, seq_len). Needs has_data. */
void al_trial_val_windows(al_trial_model *t, int n, int *tokens);

/* Computes every counted trial's head statistics, writes DIR/heads.csv and
 * the section "What the heads learned" into md (nothing when no trial kept
 * a checkpoint), with each configuration's mean `quality` in a column named
 * quality_name. Configurations appear in the order of their first trial
 * in t. Returns 0, or -1 when heads.csv could not be written. */
int al_headstats_section(FILE *md, const char *dir, const char *quality_name,
                         const al_hs_trial *t, int n, al_err *e);

#endif
