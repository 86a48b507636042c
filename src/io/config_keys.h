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

/* What a number must be, wherever it is read (a file, --set, a
 * checkpoint). Written so that NaN fails every rule. */
enum key_rule {
    R_ANY,      /* no rule */
    R_POS,      /* > 0 */
    R_NONNEG,   /* >= 0 */
    R_OPEN01,   /* in (0, 1) */
    R_HALF01,   /* in [0, 1) */
    R_UNIT,     /* in [0, 1] */
};

/* How a model key stands in a checkpoint's config JSON (attnlab.config). */
enum key_ckpt {
    CK_ALWAYS,      /* written always; a checkpoint without it is corrupt */
    CK_SINCE,       /* written always, but checkpoints older than the key lack it:
                       absent reads as def */
    CK_NON_DEFAULT, /* written only when not def (so checkpoints without the
                       feature stay byte-identical to older ones); absent reads as def */
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
    int rule;            /* enum key_rule: the lower bound, checked by al_config_validate and
                            checkpoints alike */
    int ckpt;            /* enum key_ckpt (model keys) */
    /* The largest value accepted anywhere: a config file, --set, a sweep
     * value, and every checkpoint reader (0: the type's own). One bound for
     * all, so that a run never trains a model its own checkpoint loader
     * refuses; for the model's keys it keeps every product the model and
     * the variants form in range, so a corrupt file is an error, not an
     * overflow or a huge allocation. */
    double max;
    int derived_zero;    /* 1: 0 means "derived" (d_head, d_ff, vocab_size); a checkpoint holds
                            the derived value, so there the least is 1 */
    int unset_zero;      /* 1: a config built in code may leave it 0, meaning def */
    int path;            /* 1: a file path (K_STRING): a relative one is taken against the
                            experiment file's folder, one from --set against the working
                            directory, and kept absolute (al_path_from) */
    /* Optional: 1 when the key's value, at base (its table's struct), is
     * derived from another key and must not be written (train.steps under
     * train.flops), so that a written config reads back as given. */
    int (*derived)(const void *base);
} key_spec;

/* The largest |value| of a variant's integer setting (model.attention.*),
 * in a config file and a checkpoint alike: it keeps the products the
 * variants form from their settings in int range. */
#define AL_CFG_SETTING_MAX (1 << 14)

/* The range of an integer row: [lo, hi], as a config file (built = 0) or
 * a checkpoint, which holds derived values (built = 1), may give it. */
void al_cfg_int_range(const key_spec *k, int built, long *lo, long *hi);
/* 1 when v is within k's row (its rule and its max). */
int al_cfg_in_range(const key_spec *k, double v);

/* The row of key in table t, or NULL. */
const key_spec *al_cfg_key(const key_spec *t, const char *key);
/* 1 when v satisfies rule r. */
int al_cfg_rule_ok(int r, double v);
/* What rule r wants, for messages ("must be positive"). */
const char *al_cfg_rule_text(int r);
/* Convert the text of a scalar into k's field at base (the converters of
 * a config file): 0, or -1 with what was wanted in why. */
int al_cfg_put_scalar(const key_spec *k, const char *s, int quoted, void *base, char *why,
                      size_t n);

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
extern const char *const al_cfg_attn_kernels[]; /* train.attention_kernel */

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

/* checkpoint_config.c: a checkpoint's "attnlab.config" JSON (from the file
 * at path; origin: the plugin its variant came from, or NULL) into *out,
 * validated as a config file. */
int al_ckpt_config_from_json(const char *path, const char *text, const char *origin,
                             al_model_config *out, al_err *e);

/* config_match.c: d_ff from mlp_ratio, then model.match_params (after
 * validation: the shapes are sound). */
int al_cfg_resolve_model(al_config *c, const al_node *root, al_err *e);

#endif
