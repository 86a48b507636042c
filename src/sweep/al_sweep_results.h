/*
 * al_sweep_results.h - what a sweep leaves on disk. Every file is written
 * atomically (temp file, fsync, rename), so a sweep killed at any instant
 * (kill -9 included) leaves each file whole or absent.
 *
 *   DIR/sweep.json          the marker: which experiment owns DIR
 *   DIR/summary.csv         one row per trial of the current spec
 *   DIR/<id>/trial.json     written before the trial starts: its identity
 *                           (label, hash), read to choose ids (al_sweep_assign_ids)
 *   DIR/<id>/result.json    written when the trial ends, by the worker (ok,
 *                           diverged, failed) or by the runner (killed,
 *                           failed, interrupted); its presence with status
 *                           ok or diverged is what "finished" means
 *   DIR/<id>/progress       "step steps loss val_loss tokens_per_s": the
 *                           worker's live state, for display only (never trusted)
 *   DIR/<id>/config.yaml, metrics.csv    written by training
 *   DIR/<id>/log.txt        the worker's standard error and output
 */
#ifndef AL_SWEEP_RESULTS_H
#define AL_SWEEP_RESULTS_H

#include "al_sweep_spec.h"

/* How a trial ended. AL_TRIAL_NONE: never ran (or its result was lost). */
enum al_trial_status {
    AL_TRIAL_NONE = 0,
    AL_TRIAL_OK,
    AL_TRIAL_DIVERGED,
    AL_TRIAL_FAILED,        /* non-zero exit or an error while training */
    AL_TRIAL_KILLED,        /* ended by a signal it did not ask for */
    AL_TRIAL_INTERRUPTED,   /* stopped by Ctrl-C / SIGTERM of the sweep */
    AL_TRIAL_N_STATUS
};
const char *al_trial_status_name(int status);   /* "pending" for NONE */
/* Finished for good: a re-run skips it (ok, diverged). */
int al_trial_status_final(int status);

typedef struct al_trial_result {
    int status;                  /* enum al_trial_status */
    char reason[512];            /* why it diverged or failed */
    int steps_done, steps;
    double final_train_loss, val_loss, best_val_loss, val_accuracy;   /* NAN: none */
    double test_loss, test_accuracy;   /* the held-out test split, at the end (NAN: none) */
    double init_val_loss;        /* val loss at step 0: a stage's converted start (NAN: none) */
    double tokens_per_s, wall_s;
    /* where it ran (the worker fills them; "" and 0 in older results): what
     * its bits depend on besides binary, seed and threads (README,
     * "Reproducibility") */
    char cpu_model[128], blas_core[64];
    int threads;
} al_trial_result;

/* A result with every number NAN and status NONE. */
void al_trial_result_init(al_trial_result *r);

/* Refuse DIR when it holds another experiment's sweep (or is a non-empty
 * directory that is no sweep's). 0 when absent, empty or ours. */
int al_results_check_owner(const char *dir, const al_sweep *s, al_err *e);
/* The marker also keeps the --set assignments of the latest run, for the
 * report. */
int al_results_write_marker(const char *dir, const al_sweep *s, const char *const *sets,
                            int n_sets, al_err *e);

/* DIR/<id>/trial.json. */
int al_results_write_trial(const char *tdir, const al_sweep *s, const al_sweep_trial *t,
                           al_err *e);
/* Fill every trial's id against the results directory outdir (may not
 * exist yet): its label, or label-hash when outdir/<label>/trial.json
 * holds another hash (al_sweep_spec.h, "Identity"). */
void al_sweep_assign_ids(al_sweep *s, const char *outdir);

/* DIR/<id>/result.json. Reading returns 0 when a result for this hash
 * exists (status filled), -1 otherwise (r is then "pending"). */
int al_results_write_result(const char *tdir, const al_sweep_trial *t,
                            const al_trial_result *r, al_err *e);
int al_results_read_result(const char *tdir, const char *hash, al_trial_result *r);

/* DIR/summary.csv from the spec and every trial's result.json. Columns:
 * trial,config,group,tuned,select_by,baseline,variant, then the settings,
 * causal,seed,n_layer,d_ff,params,params_to,kv_bytes_per_token,kv_context,
 * kv_bytes_at_context,steps,tokens_per_step,final_train_loss,val_loss,
 * best_val_loss,val_accuracy,test_loss,test_accuracy,tokens_per_s,wall_s,
 * status,reason (blank where not applicable; kv bytes are f32 over all
 * layers; kv_bytes_at_context is the whole cache at kv_context tokens,
 * report.context or model.seq_len, which a bounded layer such as local
 * makes less than kv_context x kv_bytes_per_token). The
 * settings are one column per setting name any variant of the sweep
 * declares (model.attention's keys, e.g. n_kv_head), in the registry's
 * order of the variants (`attnlab variants`), each variant's in the order
 * of its settings table, a shared name once; a trial's cell is blank when
 * its variant has no such setting. A sweep of variants without settings
 * has none. (How many K/V heads mha and mqa have is no setting: the
 * kv_bytes_per_token column says what they cache.) `group`
 * is the configuration (the trial without its seed and select axes),
 * `tuned` the select axes' values, `baseline` 1 for the baseline's trials,
 * `params_to` the count model.match_params matched (blank: no matching).
 * Then, for stages (blank otherwise): stage,upstream,init_convert,
 * upstream_steps,init_val_loss: the stage's name, the trial whose
 * checkpoint this one started from, how it was converted, that trial's
 * train.steps (the uptraining cost is steps / upstream_steps), and the val
 * loss at step 0 (the converted model before any update). Last,
 * cpu_model,blas_core,threads: the CPU model, OpenBLAS core and thread
 * count the trial ran with (blank when its result does not say). Appended
 * after them: train_flops_per_token,train_flops,decode_flops_per_token,
 * decode_bytes_per_token,arithmetic_intensity (docs/costs.md), then
 * decode_context,decode_batch,decode_tokens_per_s, the measured
 * decode speed of eval.decode (<trial>/eval/decode.csv) at the report
 * context where it was timed there (else the longest context timed), at
 * the smallest batch timed; blank without eval.decode. Then, under
 * sweep.scaling (blank otherwise): scaling_size, the index of the trial's
 * size in sweep.scaling.sizes (from 0), and scaling_flops, its budget
 * (train.flops). */
int al_results_write_summary(const char *dir, const al_sweep *s, al_err *e);

/* The trial directory DIR/<id> into out. */
void al_results_trial_dir(char *out, size_t n, const char *dir, const al_sweep_trial *t);

#endif
