/*
 * al_checkpoint.h - model checkpoints in the public safetensors layout, and
 * the training state needed to resume bit-identically.
 *
 * model.safetensors: 8-byte little-endian header length, a JSON header
 * (tensor name -> {dtype "F32", shape, data_offsets}) and the raw row-major
 * data. Tensor names are the model's table names (al_tensor.name).
 * "__metadata__" holds "attnlab.config" (the resolved model mapping as a
 * JSON string), "attnlab.step" and "attnlab.interface_version".
 * Writes are atomic (temp file, fsync, rename). Loading checks every name,
 * shape, dtype and offset: a truncated, corrupt or mismatched file is an
 * error naming the file and what is wrong, never a crash.
 *
 * "attnlab.config" is al_config_model_json: one entry per key of the
 * config's model table but match_params, so every setting by name:
 * {"n_layer", "d_model", "n_head", "d_head", "seq_len", "mlp_ratio",
 * "d_ff", "vocab_size", "norm_eps", "rope_base", "causal", "kv_dtype",
 * "attention": {"variant", <its settings by name>}} (the loader reads keys
 * in any order; one written before kv_dtype existed reads as f32).
 * "attnlab.variant_origin" says where the variant came from ("built-in" or
 * a plugin's path), so that loading without the plugin can say which one to
 * pass. Loading accepts tensors in any order as long as their data regions
 * tile the data section; values must be finite.
 */
#ifndef AL_CHECKPOINT_H
#define AL_CHECKPOINT_H

#include "al_config.h"
#include "al_model.h"
#include "al_optim.h"

#define AL_CHECKPOINT_FILE "model.safetensors"
#define AL_TRAIN_STATE_FILE "train_state.safetensors"

/* Save the model's parameters with its config and training step. */
int al_checkpoint_save(const char *path, const al_model *m, long step, al_err *e);
/* The same with up to 16 more metadata pairs extra[2i] -> extra[2i+1]
 * (e.g. where a converted model came from). */
int al_checkpoint_save_meta(const char *path, const al_model *m, long step,
                            const char *const *extra, int n_extra, al_err *e);

/* Load a checkpoint: reads the config from its metadata, initialises *m
 * (al_model_init) and fills the parameters. *step may be NULL. The caller
 * frees with al_model_free. On failure *m is zeroed (safe to free). */
int al_checkpoint_load(const char *path, al_model *m, long *step, al_err *e);
/* The same, then the process's products set to the precision the
 * checkpoint was trained in ("attnlab.precision", f32 when absent; score
 * and generate): -1 when it is bf16 and bf16 cannot run here. */
int al_checkpoint_load_run(const char *path, al_model *m, long *step, al_err *e);

/* Fill the parameters of an initialised model m from the checkpoint at
 * path (train.init_from): every tensor of m's table must be there as F32 in
 * the same shape, and nothing else; the config in the file's metadata is
 * not consulted, so any checkpoint whose tensors fit is accepted. A
 * mismatch is one error naming every tensor that differs; m is untouched
 * then. */
int al_checkpoint_load_into(const char *path, al_model *m, al_err *e);

/* The "attnlab.config" text of a model (malloc'ed JSON; its d_ff is the
 * model's). */
char *al_checkpoint_config_json(const al_model *m);
/* The model config c (resolved: d_ff built) written as a checkpoint writes
 * it and read back as every checkpoint reader reads it, into out: what a
 * model too large to build here would load as (the test of one set of
 * limits, tests/test_limits.c). 0, or -1 with the reader's message. */
int al_checkpoint_config_roundtrip(const al_model_config *c, al_model_config *out, al_err *e);

/* ---- Resuming a training run.
 * DIR/train_state.safetensors holds everything a resume needs: the
 * parameters (params, F32 [n_params]), AdamW's moments (adamw.m, adamw.v,
 * F32 [n_params]) and step, the training-data RNG (data_rng, U64 [4]), the
 * metrics rows so far (metrics, F64 [rows, AL_METRIC_COLS]), the counters
 * below, the fully resolved config as YAML, the interface version and the
 * fingerprints of the data and plugin files (al_run_inputs). It is written
 * before DIR/model.safetensors of the same step; a resume reads the state
 * alone, so a run killed between the two files resumes from the newer one.
 * (A state saved before it kept the parameters takes them from
 * model.safetensors, which must then be at the same step.) */
#define AL_METRIC_COLS 7   /* step,train_loss,val_loss,val_accuracy,lr,tokens_per_s,elapsed_s */

/* What a run was trained from, beyond its config: a resume refuses to
 * continue when any of it changed (al_checkpoint_resume). */
typedef struct al_run_inputs {
    long data_bytes;                          /* -1: no data file (synthetic data) */
    char data_sha256[65];                     /* of the bytes trained on */
    int n_plugins;                            /* the config's plugins, in order */
    char plugin_sha256[AL_MAX_PLUGINS][65];   /* of each plugin's file */
} al_run_inputs;

/* Fingerprint the data bytes (NULL: synthetic data) and c's plugin files. */
int al_run_inputs_of(al_run_inputs *in, const al_config *c, const void *data, size_t n,
                     al_err *e);

typedef struct al_train_state {
    long step;              /* optimizer steps done */
    al_rng rng;             /* the training-data RNG after those steps */
    long tokens;            /* training tokens seen */
    double train_time;      /* seconds spent in training steps */
    double elapsed;         /* wall seconds since the run started */
    double loss_sum;        /* train losses since the last evaluation ... */
    long loss_count;        /* ... and how many */
    double last_loss;       /* loss of the last step (NaN before any) */
    int n_rows;
    double *rows;           /* n_rows * AL_METRIC_COLS; malloc'ed by resume */
    al_run_inputs inputs;   /* what the run started from */
    char init_sha256[65];   /* SHA-256 of train.init_from's file when the run began, or "" */
} al_train_state;

/* Write DIR/train_state.safetensors, then DIR/model.safetensors. */
int al_checkpoint_save_run(const char *dir, const al_config *c, const al_model *m,
                           const al_adamw *o, const al_train_state *s, al_err *e);

/* Restore a run saved in dir into m (built from c), o and s. The saved
 * config must equal c except train.checkpoint_every; otherwise the error
 * names the first key that differs. The caller frees s->rows.
 * Returns AL_RESUME_CHANGED (and the error says what changed and what to
 * do) when the files are sound but the run cannot continue bit-identically
 * here: it was started by an attnlab of another variant interface version,
 * or its data or a plugin file differs from `now` (the fingerprints of the
 * current files; a state saved before they were recorded is not checked). */
#define AL_RESUME_CHANGED (-2)
int al_checkpoint_resume(const char *dir, const al_config *c, const al_run_inputs *now,
                         al_model *m, al_adamw *o, al_train_state *s, al_err *e);

#endif
