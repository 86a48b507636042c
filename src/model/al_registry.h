/*
 * al_registry.h - the table of attention variants.
 *
 * Built-in variants are listed in one static NULL-terminated table
 * (registry.c); plugins are appended at run time by the plugin loader.
 */
#ifndef AL_REGISTRY_H
#define AL_REGISTRY_H

#include "attnlab_variant.h"
#include "al_util.h"

const al_variant_ops *al_variant_find(const char *name);
int al_variant_count(void);
const al_variant_ops *al_variant_at(int i);
/* Where variant i comes from: "built-in" or the plugin's path. */
const char *al_variant_origin(int i);
/* Add a variant (plugins). Refuses a name clash, a version mismatch,
 * missing members (named exactly: the six every table needs, or part of
 * the decode trio or the batched-decode pair) and a malformed settings
 * table, naming origin. */
int al_variant_register(const al_variant_ops *ops, const char *origin, al_err *e);
/* Forget the plugin variants registered after the first `count` variants. */
void al_variant_truncate(int count);
/* Index of a setting in ops->settings, or -1. */
int al_variant_setting_index(const al_variant_ops *ops, const char *key);
int al_variant_n_settings(const al_variant_ops *ops);
/* 1 when n is a usable variant or setting name: 1 to 63 letters, digits,
 * '_' or '-' (it becomes a YAML key, a trial id, a file name). */
int al_variant_plain_name(const char *n);

#endif
