/*
 * al_cost.h - what a model costs per token: training and prefill FLOPs,
 * and at a context N the FLOPs and bytes one decode step reads beside the
 * bytes its cache holds (issue 36; the meaning of every figure is in
 * docs/costs.md).
 *
 * FLOPs are those of the matrix products the code runs, 2*m*n*k each:
 * the variant's (its costs sub-table, attnlab_variant.h) and the core's
 * shared parts, counted here: the MLP (two products forward, four
 * backward), the tied head (one forward, two backward) and nothing for the
 * embedding lookup, the norms and the loss (no product). The counting
 * mode of the product layer (al_flops_count_begin, al_gemm.h) measures the
 * same figures (al_cost_measure); tests hold the two equal.
 *
 * A variant without FLOP members has its layers run once in counting mode
 * (zero inputs; products do not depend on values) and counted; where that
 * sees no product, or the layer is a kv_share consumer, the figure is an
 * estimate (2 FLOPs per weight and token forward, 4 backward) and the
 * layer and the sums say so (estimated = 1): never a silent zero.
 */
#ifndef AL_COST_H
#define AL_COST_H

#include "al_config.h"
#include "al_model.h"

/* Per-layer entries kept (a deeper stack repeats its cycle; the sums
 * cover every layer). */
#define AL_COST_LAYERS 256

typedef struct al_cost_opts {
    int context;    /* N tokens for prefill and decode; 0: model.seq_len */
    int batch;      /* sequences decoded together, reading the weights once; >= 1 */
    int kv_dtype;   /* enum al_kv_dtype of the cache */
} al_cost_opts;

typedef struct al_layer_cost {
    int consumer;                 /* a model.kv_share consumer */
    double train_flops;           /* per token at seq_len, forward + backward */
    double prefill_flops;         /* per token, the batched pass over min(N, seq_len) */
    double decode_flops;          /* one step at N */
    double decode_cache_bytes;    /* the cache bytes that step reads (a consumer: its
                                     producer's rows, read again) */
    double weight_bytes;          /* the layer's parameters (attention, norms, MLP), f32 */
    double kv_bytes;              /* held at N (0 for a consumer) */
    int rows_read;                /* cache rows read at N */
    int estimated;                /* 1: a FLOP figure above is an estimate */
} al_layer_cost;

typedef struct al_model_cost {
    al_cost_opts o;               /* as resolved (context set) */
    int n_layer, n_kept;          /* layers, and entries in layer[] */
    al_layer_cost layer[AL_COST_LAYERS];
    double head_train_flops, head_prefill_flops, head_decode_flops;   /* per token */
    double shared_weight_bytes;   /* embedding (= head) and the final norm */
    size_t n_params;
    /* the six figures of `attnlab cost` */
    double train_flops_per_token, prefill_flops_per_token, decode_flops_per_token;
    double decode_bytes_per_token, kv_bytes_at_context, arithmetic_intensity;
    int estimated;                /* any layer's */
} al_model_cost;

/* The costs of model c. -1 with e when a count fails (the config's own
 * errors: the variant rejects the shape, a count overflows). */
int al_cost_of_model(const al_model_config *c, const al_cost_opts *o, al_model_cost *out,
                     al_err *e);

/* What the product layer's counting mode counts when model m (its
 * weights as they are) runs one training step's forward and backward on a
 * (1, seq_len) batch, a prefill of N tokens, and one decode step at
 * position N - 1 of o->batch sequences (their caches filled with random
 * rows, stored as o->kv_dtype): FLOPs per token of each. */
typedef struct al_cost_counted {
    double train_flops_per_token, prefill_flops_per_token, decode_flops_per_token;
} al_cost_counted;
int al_cost_measure(al_model *m, const al_cost_opts *o, al_cost_counted *out, al_err *e);

/* The decode cache bytes one layer of layout-rows `rows` reads when it
 * reads n of them (al_tensors.h's al_kv_layout): the rows at their storage
 * dtype; for int8/int4 the codes with their scales and zero-points of the
 * rows quantized so far and the f32 rows not yet quantized (the ring's
 * unused rows are held, not read). */
double al_cost_cache_read(size_t elems, size_t key_elems, int rows, int n, int dtype, int group,
                          int residual, int state);

#endif
