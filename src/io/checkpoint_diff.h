/*
 * checkpoint_diff.h - a refused resume's message (checkpoint_diff.c): the
 * saved run's resolved config against the current one, key by key. Not a
 * public interface: al_checkpoint.h is.
 */
#ifndef AL_CHECKPOINT_DIFF_H
#define AL_CHECKPOINT_DIFF_H

#include "al_util.h"

/* 0 when the two resolved-config YAML texts agree (but for the keys a
 * resume may change), else -1 with one line naming every key that differs
 * and both its values (saved, now), path first. */
int al_checkpoint_config_diff(const char *path, const char *saved, const char *now, al_err *e);

#endif
