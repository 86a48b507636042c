/*
 * al_tensors.h - the tensor table of a model config: every parameter tensor
 * in order, its name, shape, offset into the flat buffer and init, and the
 * counts that follow from it (parameters, KV-cache floats per token).
 *
 * The table is what a model config means in memory: the model carves its
 * parameters and gradients by it (al_model_init), checkpoints name their
 * tensors by it, and parameter matching counts with it without building a
 * model. The variant supplies its own tensors through params() (a plugin's
 * answer is checked: a mistake is an error naming the variant).
 */
#ifndef AL_TENSORS_H
#define AL_TENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "al_config.h"

#define AL_TENSOR_NAME 64

typedef struct al_tensor {
    char name[AL_TENSOR_NAME];  /* safetensors name, e.g. blocks.0.attn.wq.weight */
    int ndim;                   /* 1 or 2 */
    int shape[2];
    size_t offset, numel;       /* into params / grads, in floats */
    int init;                   /* enum al_init */
    int decay;                  /* 1 for 2-D weights (AdamW weight decay) */
} al_tensor;

/* The attention of one item of the layer cycle (al_config_n_attn). */
typedef struct al_attn_item {
    const al_variant *ops;
    al_attn_shape ashape;                         /* the config as the variant sees it */
    void *ctx;                                    /* ops->init's context (owned) */
    int n_attn_params;                            /* the variant's tensors per block */
    al_param_spec attn_spec[AL_MAX_ATTN_PARAMS];
    int n_share_params;                           /* a kv_share consumer's (share_params); */
    al_param_spec share_spec[AL_MAX_ATTN_PARAMS]; /* 0 when the variant cannot share */
} al_attn_item;

/* Order: tok_emb; per block attn_norm, the variant's tensors (a kv_share
 * consumer's: share_params, no K/V projections), mlp_norm, mlp.w1, mlp.w2;
 * final_norm. */
typedef struct al_tensor_table {
    int d_ff;                                     /* al_config_d_ff */
    int n_items;                                  /* al_config_n_attn */
    al_attn_item item[AL_MAX_LAYER_ATTN];         /* layer l has item[l % n_items] */
    int n_tensors;
    al_tensor *tensors;                           /* owned (n_tensors) */
    size_t n_params;                              /* floats in all tensors */
} al_tensor_table;

/* Build the table of c (c->attn set). Errors ("model.attention: ...", or
 * "model.layer_attention[k]: ..." for an item of a list) when
 * the variant rejects the shape or declares unusable tensors; t then owns
 * nothing. Free with al_tensor_table_free. */
int al_tensor_table_build(al_tensor_table *t, const al_model_config *c, al_err *e);
void al_tensor_table_free(al_tensor_table *t);

/* The tensors layer l has: its item's, or (a kv_share consumer) the
 * item's share_params. */
int al_tensor_table_layer_params(const al_tensor_table *t, const al_model_config *c, int l,
                                 const al_param_spec **spec);

/* Parameter count (0 with e set when the table cannot be built) and KV
 * floats per token summed over layers, and layer l's alone (0 for a
 * kv_share consumer: it caches nothing). */
size_t al_model_param_count(const al_model_config *c, al_err *e);
size_t al_model_kv_elems_per_token(const al_model_config *c);
size_t al_model_layer_kv_elems(const al_model_config *c, int layer);

/* Rows a cache of variant v (context ctx) holds at a context of `context`
 * tokens (its decode->kv_rows, checked: 1 .. context). */
int al_attn_kv_rows(const al_variant *v, const void *ctx, int context);
/* Rows and bytes of layer l's cache at `context` tokens stored as dtype,
 * and the whole model's bytes (the sum over layers): what a decoder of
 * that context allocates per sequence. A kv_share consumer has no cache:
 * its rows are its producer's, its bytes 0. */
int al_model_layer_kv_rows(const al_model_config *c, int l, int context);
/* What layer l's cache of `context` tokens is made of (al_kvcache.h's
 * al_kv_cache_new_quant arguments): its rows, floats per row, the first
 * key_elems of them quantized per channel in an int8/int4 cache (elems / 2
 * for mha, mqa and gqa, rows [K | V]; the whole row for every other
 * variant, whose elements serve as key and value), group and residual
 * from model.kv_quant_* (a bounded ring layer keeps every row f32). A
 * state layer (AL_KV_STATE) holds one row of its state's floats at every
 * context, stored f32; it adds nothing per token (al_model_layer_kv_elems). */
typedef struct al_kv_layout {
    size_t elems, key_elems;
    int rows, group, residual;
    int state;   /* 1: a state rewritten in place (AL_KV_STATE): one row, f32 */
} al_kv_layout;
al_kv_layout al_model_layer_kv_layout(const al_model_config *c, int l, int context);
/* The dtype a layer of layout o stores a cache of `dtype` as: f32 for a
 * state, whatever the run's kv_dtype. */
int al_model_layer_kv_dtype(const al_kv_layout *o, int dtype);
/* Layer l's cache bytes at `context` tokens, any dtype (int8/int4 with
 * their scales, zero-points and f32 rows). */
size_t al_model_layer_kv_bytes(const al_model_config *c, int l, int dtype, int context);
size_t al_model_kv_bytes_at(const al_model_config *c, int dtype, int context);

/* Limits on sizes before anything is allocated: parameters (16 bytes each
 * in training: weights, gradients, AdamW's two moments) and any float
 * count a variant reports (a plugin's act/scratch/KV floats). */
#define AL_MAX_PARAMS (SIZE_MAX / 16)
#define AL_MAX_REPORTED_FLOATS (1ULL << 40)

/* The parameter count and KV floats per token (summed over layers; may be
 * NULL) of c, in checked arithmetic and without building the table: what
 * `attnlab kv` prints. -1 with e naming the keys or the variant when a
 * count passes its limit or the variant rejects the shape. */
int al_model_counts(const al_model_config *c, size_t *n_params, size_t *kv_per_token, al_err *e);
/* Item k's variant (*v) and a context of it (v->init's, to free with
 * v->fini), for a count over a config whose settings validation passed. */
void *al_attn_ctx_of(const al_model_config *c, int k, const al_variant **v);
/* Item k's attention (of al_config_n_attn) as its variant sees the config. */
void al_attn_shape_of(al_attn_shape *s, const al_model_config *c, int k);

#endif
