/*
 * config_keys.h - what the config files (config.c, config_match.c,
 * config_write.c) share: the key tables and the helpers for key paths.
 * Not a public interface: al_config_io.h is.
 *
 * One static table per mapping, one row per key {key, type, offset, size,
 * sub, default, help} (libcyaml, nginx). Defaults are kept as YAML text in
 * the same rows and go through the same converters as the file, so the
 * defaults, the decoder, the writers and the printed schema cannot drift
 * apart.
 */
#ifndef AL_CONFIG_KEYS_H
#define AL_CONFIG_KEYS_H

#include <stddef.h>
#include "al_config_io.h"

enum key_type {
    K_INT,      /* int, a whole number in int range */
    K_U64,      /* uint64_t, digits only */
    K_BYTES,    /* uint64_t bytes: digits with an optional k, M, G or T (powers
                   of 1024); written as plain digits, and not at all when 0 */
    K_DOUBLE,   /* double, finite */
    K_BOOL,     /* int 0/1: true/false, yes/no, on/off */
    K_STRING,   /* char[size]; sub: NULL-terminated allowed values, or NULL */
    K_MAP,      /* nested struct at offset; sub: its key table */
    K_ATTN,     /* model.attention: a variant and its own settings */
    K_PLUGINS,  /* sequence of paths into al_config.plugins */
    K_MATCH,    /* model.match_params: {to: attention, by: d_ff | n_layer} */
    K_IGNORE,   /* read by others (the sweep runner) or informational */
    K_LATTN,    /* model.layer_attention: a list of K_ATTN mappings */
};

typedef struct key_spec {
    const char *key;
    int type;            /* enum key_type */
    size_t offset;       /* offsetof in the struct this table decodes */
    size_t size;         /* bytes of the field */
    const void *sub;     /* see enum key_type */
    const char *def;     /* default as YAML text (scalars), else for display */
    const char *help;    /* one line */
    int quiet;           /* 1: written only when it differs from def. A key added after
                            runs and sweeps existed is quiet, so that their written
                            configs, trial ids and resume checks stay as they were */
} key_spec;

/* The whole file (al_config); the model mapping (al_model_config);
 * model.match_params (decoded by hand: its offsets are 0). Each ends with
 * a row whose key is NULL. */
extern const key_spec al_cfg_top_keys[];
extern const key_spec al_cfg_model_keys[];
extern const key_spec al_cfg_match_keys[];
extern const key_spec al_cfg_report_keys[];   /* report.*: not a trial's identity */
/* The allowed values of data.source, model.kv_dtype, train.init_convert. */
extern const char *const al_cfg_data_sources[];
extern const char *const al_cfg_kv_dtypes[];
extern const char *const al_cfg_init_converts[];
extern const char *const al_cfg_precisions[];   /* train.precision */

/* Copy s into a buffer of n bytes, zero-filling the rest (so configs can be
 * compared with memcmp). s must fit. */
void al_cfg_set_str(char *dst, size_t n, const char *s);
/* out = "path.key" (or "key" at the top), truncated to n - 1 bytes. */
void al_cfg_join(char *out, size_t n, const char *path, const char *key);
/* The node at a dotted path ("model.layer_attention[1].n_kv_head": an
 * index picks a sequence's item), else its deepest existing ancestor; *exact
 * (if non-NULL) tells which. */
const al_node *al_cfg_find_path(const al_node *root, const char *path, int *exact);
/* An error about the key at path: at its node when a tree is given, else
 * at the config's file without a position. Returns -1. */
int al_cfg_verr(al_err *e, const al_config *c, const al_node *root, const char *path,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* The shortest %g that reads back to v ("1.0e-05", not "1e-05"). */
void al_cfg_fmt_double(char *out, size_t n, double v);

/* config_match.c: d_ff from mlp_ratio, then model.match_params (after
 * validation: the shapes are sound). */
int al_cfg_resolve_model(al_config *c, const al_node *root, al_err *e);

#endif
