/*
 * al_registry.h - the table of attention variants.
 *
 * Built-in variants are listed in one static NULL-terminated table
 * (registry.c); plugins are appended at run time by the plugin loader.
 * What al_variant_find and al_variant_at return is the registry's copy of a
 * table: its optional members' defaults are settled (attnlab_variant.h), so
 * the core calls them without checking, and its decode sub-table is never
 * NULL (a variant without one caches nothing and cannot decode). The
 * sub-tables that stand for a capability (share, pictures) stay NULL when
 * the variant has none.
 */
#ifndef AL_REGISTRY_H
#define AL_REGISTRY_H

#include "attnlab_variant.h"
#include "al_util.h"

const al_variant *al_variant_find(const char *name);
int al_variant_count(void);
const al_variant *al_variant_at(int i);
/* Where variant i comes from: "built-in" or the plugin's path. */
const char *al_variant_origin(int i);
/* Add a variant (plugins; the built-ins go the same way). A table of an
 * older interface version (2 to 4) is wrapped into version 5
 * (al_variant_compat.h). Refuses a name clash, another version, missing
 * members (named exactly: those every table needs, or part of a group that
 * goes together) and a malformed settings table, naming origin. */
int al_variant_register(const al_variant *ops, const char *origin, al_err *e);
/* Forget the plugin variants registered after the first `count` variants. */
void al_variant_truncate(int count);
/* Index of a setting in ops->settings, or -1. */
int al_variant_setting_index(const al_variant *ops, const char *key);
int al_variant_n_settings(const al_variant *ops);
/* 1 when n is a usable variant or setting name: 1 to 63 letters, digits,
 * '_' or '-' (it becomes a YAML key, a trial id, a file name). */
int al_variant_plain_name(const char *n);

/* The context of one layer of a registered variant (v->init): NULL with a
 * one-line message in err when the settings do not fit the shape. Free it
 * with v->fini. */
void *al_variant_init(const al_variant *v, const al_attn_shape *s, char *err, size_t n);
/* 0 when the settings fit the shape, else -1 with err set (an init and a
 * fini: for validation, which keeps no context). */
int al_variant_check(const al_variant *v, const al_attn_shape *s, char *err, size_t n);

/* 1 when v can decode (its decode sub-table has the three members). */
static inline int al_variant_decodes(const al_variant *v)
{
    return v->decode->decode != NULL;
}

#endif
