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
 */
#ifndef AL_CHECKPOINT_H
#define AL_CHECKPOINT_H

#include "al_model.h"

/* Save the model's parameters with its config and training step. */
int al_checkpoint_save(const char *path, const al_model *m, long step, al_err *e);

/* Load a checkpoint: reads the config from its metadata, initialises *m
 * (al_model_init) and fills the parameters. *step may be NULL. The caller
 * frees with al_model_free. */
int al_checkpoint_load(const char *path, al_model *m, long *step, al_err *e);

#endif
