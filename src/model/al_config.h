/*
 * al_config.h - the resolved experiment configuration: the structs a config
 * file decodes into (data, model, train, plugins), and the few values
 * derived from them that the model needs (the MLP width, the attention
 * shape), implemented in config.c here.
 *
 * Reading and writing config files (YAML in through per-mapping key
 * tables, defaults, validation, parameter matching, YAML and JSON out, the
 * `keys` schema) is the io layer's: al_config_io.h.
 */
#ifndef AL_CONFIG_H
#define AL_CONFIG_H

#include <stdint.h>
#include "al_util.h"
#include "attnlab_variant.h"

/* ---- Resolved configuration */
#define AL_PATH_LEN 1024
#define AL_NAME_LEN 64
#define AL_MAX_PLUGINS 8
#define AL_MAX_LAYER_ATTN 32   /* items of model.layer_attention */

/* One attention: a variant and its settings (model.attention, or one item
 * of model.layer_attention). */
typedef struct al_attn_config {
    char variant[AL_NAME_LEN];
    const al_variant *attn;          /* resolved from the registry */
    double set[AL_MAX_SETTINGS];         /* in the order of attn->settings */
    /* a layer_attention item's own rope_fraction (has_rope_fraction 1);
     * else (0, every config built in code) the model's */
    int has_rope_fraction;
    double rope_fraction;
} al_attn_config;

/* model.rope_scaling (docs/rope.md): kind "none" (or "", a config built in
 * code) is plain RoPE. original_seq_len 0: model.seq_len. */
typedef struct al_rope_scaling {
    char kind[8];                        /* none | linear | ntk | yarn */
    double factor;
    int original_seq_len;
} al_rope_scaling;

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
    const al_variant *attn;
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
    /* model.rope_fraction: the share of each RoPE part that rotates, for
     * the layers whose item gives none. A config built in code must set
     * it (1: plain RoPE; 0 is NoPE), as it sets rope_base. */
    double rope_fraction;
    al_rope_scaling rope_scaling;
    int causal;
    /* The attention of every layer (model.attention); with a
     * model.layer_attention list, its first item's. */
    char variant[AL_NAME_LEN];
    const al_variant *attn;          /* resolved from the registry */
    double attn_set[AL_MAX_SETTINGS];    /* in the order of attn->settings */
    /* model.layer_attention: n_layer_attn items, layer l uses item
     * l % n_layer_attn; 0 = the one attention above for every layer. */
    int n_layer_attn;
    al_attn_config layer_attn[AL_MAX_LAYER_ATTN];
    char kv_dtype[8];                    /* f32 | bf16 | f16 | int8 | int4 (decode cache) */
    /* int8/int4 caches (al_kvcache.h). A config built in code that leaves
     * kv_quant_group 0 means the defaults of both (32, 32); a config file
     * always has a group >= 1, and a residual >= 0 as given. */
    int kv_quant_group, kv_quant_residual;
    /* model.kv_share: layers in consecutive groups of kv_share share one
     * K/V (CLA); the last group may be shorter. 0 (configs built by hand)
     * or 1: no sharing. */
    int kv_share;
    /* The attention kernel of training, enum al_attn_kernel (al_flash.h),
     * resolved from train.attention_kernel and seq_len (al_config_attn_kernel);
     * not a key of its own: 0 (fused) in configs built by hand and
     * checkpoints. */
    int attn_kernel;
} al_model_config;

typedef struct al_train_config {
    int steps, batch_size;
    double flops;                        /* train.flops: total training FLOPs; > 0 derives
                                            steps (al_train_resolve), 0 = off */
    double lr, min_lr;
    int warmup_steps;
    double weight_decay, beta1, beta2, grad_clip;
    int eval_every, eval_batches;
    uint64_t seed, eval_seed;
    int threads;                         /* 0 = all cores */
    uint64_t max_memory;                 /* bytes a run may use; 0 = the machine's */
    int checkpoint_every;                /* 0 = only at the end */
    char init_from[AL_PATH_LEN];         /* "" = random init; else a checkpoint's weights */
    char init_convert[8];                /* none | mean | first | random | svd */
    char precision[8];                   /* products: f32 | bf16 ("" = f32, al_gemm.h) */
    char attention_kernel[8];            /* auto | fused | dense ("" = auto) */
} al_train_config;

/* How results are shown, not what a run computes: report.* never enters a
 * sweep trial's identity (al_config_write_yaml_identity). */
typedef struct al_report_config {
    int context;                         /* tokens the cache is sized for; 0 = model.seq_len */
} al_report_config;

typedef struct al_config {
    char file[AL_PATH_LEN];              /* where it came from */
    al_data_config data;
    al_model_config model;
    al_train_config train;
    al_report_config report;
    int n_plugins;
    char plugins[AL_MAX_PLUGINS][AL_PATH_LEN];
    /* AL_REL_*: which path keys the file (or --set) gave as relative paths.
     * In memory every path is absolute (docs/first-run.md); a config written
     * into a run's folder writes these from that folder, so that a tree
     * moved whole still reads them, and keeps absolute ones absolute. */
    unsigned rel_paths;
} al_config;

enum { AL_REL_DATA = 1, AL_REL_INIT = 2 };   /* data.path, train.init_from */

/* The d_ff a model config stands for: d_ff when set, else
 * round(mlp_ratio * d_model) (configs built by hand leave it 0). */
int al_config_d_ff(const al_model_config *m);
/* The resolved attention shape for the variant interface (layer 0's). */
void al_config_attn_shape(const al_config *c, al_attn_shape *s);

/* train.attention_kernel resolved at a trained length: "fused", "dense"
 * and "rows" are themselves; "auto" (and "") is whichever was measured
 * fastest (docs/fused-attention.md): rows below AL_ATTN_FUSED_MIN_T
 * tokens; from there AL_ATTN_LONG, fused where a layer's q.k is no wider
 * than its v (rows' two 64 x T blocks of scratch have outgrown the L2 and
 * fused's tiles have not), rows where it is wider (mla). At 4096 fused was
 * no faster than rows for mha (within 2 %) and slower for gqa-2 (8 %) and
 * mla (5 %). -1 for another name. */
#define AL_ATTN_FUSED_MIN_T 8192
int al_config_attn_kernel(const char *name, int seq_len);

/* ---- per-layer attention (model.layer_attention) */
/* Distinct items in the cycle: n_layer_attn, or 1 for model.attention. */
int al_config_n_attn(const al_model_config *m);
/* Item k (0 <= k < al_config_n_attn) of the cycle; layer l's is item
 * l % al_config_n_attn(m). */
al_attn_config al_config_attn_item(const al_model_config *m, int k);
al_attn_config al_config_layer_attn(const al_model_config *m, int layer);
/* The shape layer l's variant sees (its own settings). */
void al_config_layer_shape(const al_model_config *m, int layer, al_attn_shape *s);
/* Layer l's RoPE (its item's rope_fraction, else the model's; the model's
 * scaling), as the variants see it in al_attn_shape.rope. */
al_rope al_config_layer_rope(const al_model_config *m, int layer);
/* The kinds of model.rope_scaling.kind, in enum al_rope_kind order. */
extern const char *const al_rope_kinds[];
/* enum al_rope_kind of a kind name ("" is none), or -1. */
int al_rope_kind_of(const char *name);
/* 1 when the layers do not all have one variant with the same settings. */
int al_config_mixed_attn(const al_model_config *m);
/* model.kv_share: the layer whose K/V layer l attends over (the first of
 * its group; l itself when it produces K/V), and 1 when l is a consumer. */
int al_config_kv_src(const al_model_config *m, int layer);
int al_config_kv_consumer(const al_model_config *m, int layer);
/* The one-line refusal of a kv_share the stack cannot take (a variant
 * without the share_* members, a group of unlike attentions), or 0. */
int al_config_check_share(const al_model_config *m, char *err, size_t n);
/* Set every layer to the one attention a (drops a layer_attention list). */
void al_config_set_attn(al_model_config *m, const al_attn_config *a);
/* The items' labels joined by sep: "gqa-kv2/mha" (sep "/") or
 * "gqa-kv2+mha" (sep "+"), each item named by label(item) (the sweep's
 * short names, al_sweep_attn_label); one attention is its label alone. */
void al_config_attn_label(char *out, size_t n, const al_model_config *m, const char *sep,
                          void (*label)(char *out, size_t n, const al_attn_config *a));

#endif
