/*
 * al_config.h - experiment configuration: YAML in, resolved struct out.
 *
 * A config file has the mappings data, model, train (and, for sweeps, sweep
 * and plugins). Loading is two steps, so that sweeps can edit the tree:
 *   1. al_yaml_load: parse YAML into an al_node tree that keeps every node's
 *      file, line and column;
 *   2. al_config_decode: walk the tree against per-mapping key tables into
 *      an al_config, filling defaults. Unknown keys (with a did-you-mean),
 *      duplicate keys, wrong node types and impossible shapes are errors of
 *      the form "file:line:col: error: ..." (libyaml marks + 1).
 * --set key.path=value edits the tree before decoding (al_node_set_path).
 * al_config_write_yaml emits the fully resolved config, defaults included.
 */
#ifndef AL_CONFIG_H
#define AL_CONFIG_H

#include <stdint.h>
#include <stdio.h>
#include "al_util.h"
#include "attnlab_variant.h"

/* ---- YAML tree */
enum al_node_kind { AL_NODE_SCALAR, AL_NODE_MAP, AL_NODE_SEQ };

typedef struct al_node al_node;
struct al_node {
    int kind;             /* enum al_node_kind */
    char *value;          /* scalar text (NULL otherwise) */
    int quoted;           /* scalar was quoted: never a number or bool */
    const char *file;     /* a copy owned by the node */
    int line, col;        /* 1-based */
    int n;                /* children: map pairs or sequence items */
    char **keys;          /* map keys (n), NULL for sequences */
    int *key_line, *key_col;
    al_node **items;      /* values (n) */
};

/* Parse a YAML file (one document). Errors: "file:line:col: error: ...". */
int al_yaml_load(const char *path, al_node **out, al_err *e);
/* Parse YAML text (for --set values and tests); `name` is used in errors. */
int al_yaml_parse(const char *name, const char *text, al_node **out, al_err *e);
void al_node_free(al_node *n);
al_node *al_node_clone(const al_node *n);
/* An empty mapping or sequence carrying at's file and position (for
 * errors; at may be NULL), and appending to one (key NULL in a sequence);
 * x takes ownership of child. */
al_node *al_node_new(int kind, const al_node *at);
void al_node_append(al_node *x, const char *key, al_node *child);
/* Child of a mapping by key, or NULL. */
al_node *al_node_get(const al_node *map, const char *key);
/* Replace (or create) the node at a dotted path such as "model.attention"
 * with a clone of val. Creates missing intermediate mappings only when
 * create != 0. Errors name the path. */
int al_node_set_path(al_node *root, const char *path, const al_node *val,
                     int create, al_err *e);
/* Apply "key.path=value" (value parsed as YAML). Unknown paths are errors
 * once decoded; here the tree is only edited. */
int al_node_apply_set(al_node *root, const char *assignment, al_err *e);
/* "file:line:col: error: " + message, at node x, into e; returns -1. */
int al_node_errf(al_err *e, const al_node *x, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- Resolved configuration */
#define AL_PATH_LEN 1024
#define AL_NAME_LEN 64
#define AL_MAX_PLUGINS 8

typedef struct al_data_config {
    char source[AL_NAME_LEN];   /* text | kjv | mqar | induction */
    char path[AL_PATH_LEN];     /* for text */
    double val_fraction;        /* 0.1 */
    double test_fraction;       /* 0.05: text sources, the held-out test split */
    /* synthetic tasks (mqar, induction) */
    int vocab_size, seq_len, num_kv_pairs, min_kv_pairs, curriculum_steps;
    int train_examples, test_examples;
    double power_a;
    uint64_t seed;
} al_data_config;

/* model.match_params: widen the MLP or add blocks until the parameter count
 * is as close as it gets to the same model with another attention. */
enum al_match_by { AL_MATCH_NONE = 0, AL_MATCH_D_FF = 1, AL_MATCH_N_LAYER = 2 };

typedef struct al_match_config {
    int by;                              /* enum al_match_by */
    char variant[AL_NAME_LEN];           /* the `to` attention ... */
    const al_variant_ops *attn;
    double attn_set[AL_MAX_SETTINGS];    /* ... and its settings */
    int base_n_layer, base_d_ff;         /* the shape as given: the `to` model's */
    int n_layer, d_ff;                   /* the matched shape (= the model's) */
    size_t params, params_to;            /* both counts (0 while the vocabulary is unknown) */
} al_match_config;

typedef struct al_model_config {
    int n_layer, d_model, n_head, d_head, seq_len, vocab_size;
    double mlp_ratio;
    int d_ff;                            /* MLP width: model.d_ff, else mlp_ratio * d_model;
                                            after matching, the matched width */
    al_match_config match;               /* n_layer and d_ff above are the matched ones */
    double norm_eps, rope_base;
    int causal;
    char variant[AL_NAME_LEN];
    const al_variant_ops *attn;          /* resolved from the registry */
    double attn_set[AL_MAX_SETTINGS];    /* in the order of attn->settings */
    char kv_dtype[8];                    /* f32 | bf16 | f16 (decode cache) */
} al_model_config;

typedef struct al_train_config {
    int steps, batch_size;
    double lr, min_lr;
    int warmup_steps;
    double weight_decay, beta1, beta2, grad_clip;
    int eval_every, eval_batches;
    uint64_t seed, eval_seed;
    int threads;                         /* 0 = all cores */
    int checkpoint_every;                /* 0 = only at the end */
    char init_from[AL_PATH_LEN];         /* "" = random init; else a checkpoint's weights */
    char init_convert[8];                /* none | mean | first | random | svd */
} al_train_config;

typedef struct al_config {
    char file[AL_PATH_LEN];              /* where it came from */
    al_data_config data;
    al_model_config model;
    al_train_config train;
    int n_plugins;
    char plugins[AL_MAX_PLUGINS][AL_PATH_LEN];
} al_config;

/* Defaults for every key. */
void al_config_defaults(al_config *c);
/* Decode a tree (whole file, sweep mapping ignored here) into c. */
int al_config_decode(const al_node *root, al_config *c, al_err *e);
/* Load file, apply --set assignments in order, decode. */
int al_config_load(const char *path, const char *const *sets, int n_sets,
                   al_config *c, al_err *e);
/* Emit the resolved config as YAML (every key, defaults included). */
void al_config_write_yaml(const al_config *c, FILE *f);
/* Print every key as a markdown table row: "| `model.n_head` | 4 | help |". */
void al_config_print_schema(FILE *f);
/* The d_ff a model config stands for: d_ff when set, else
 * round(mlp_ratio * d_model) (configs built by hand leave it 0). */
int al_config_d_ff(const al_model_config *m);
/* The resolved attention shape for the variant interface. */
void al_config_attn_shape(const al_config *c, al_attn_shape *s);
/* Check shapes (n_kv_head divides n_head, odd d_head under RoPE, zero
 * sizes, the variant's own check). Errors name the key (and the node's
 * file:line:col when a tree is given). */
int al_config_validate(const al_config *c, const al_node *root, al_err *e);

#endif
