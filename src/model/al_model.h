/*
 * al_model.h - the GPT-style model: parameters, forward, backward.
 *
 * Spec (README "Model"): byte tokens, tied embedding tok_emb [V, D];
 * n_layer pre-norm blocks x += attn(rmsnorm(x)); x += mlp(rmsnorm(x));
 * final RMSNorm, logits = h . tok_emb^T. MLP w2 . gelu_tanh(w1 . x). No biases.
 *
 * Memory: parameters, gradients and activations are each one allocation,
 * carved up by the config's tensor table (al_tensors.h). The model owns all
 * of them; al_model_free releases everything. Attention is the variant's:
 * each layer's own (al_layer.attn), so a stack may mix variants.
 */
#ifndef AL_MODEL_H
#define AL_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include "al_config.h"
#include "al_tensors.h"

/* Per-layer views into the flat buffers, and the layer's attention (its
 * item of model.layer_attention; every layer the same without one). */
typedef struct al_layer {
    const al_variant *attn;
    al_attn_shape ashape;                           /* as the variant sees it */
    void *ctx;                                      /* attn->init's, for this layer (owned) */
    /* model.kv_share: the layer whose K/V this one attends over (itself
     * unless it is a consumer); consumers have share_params' tensors. */
    int kv_src;
    int n_attn_params;
    al_param_spec attn_spec[AL_MAX_ATTN_PARAMS];
    float *attn_norm, *mlp_norm, *w1, *w2;          /* (D) (D) (F,D) (D,F) */
    float *d_attn_norm, *d_mlp_norm, *d_w1, *d_w2;
    float *attn_p[AL_MAX_ATTN_PARAMS];              /* variant tensors */
    float *attn_dp[AL_MAX_ATTN_PARAMS];
    /* activations for the reserved (B, T) */
    float *x_in;     /* (B,T,D) block input */
    float *h1;       /* (B,T,D) rmsnorm(x_in) */
    float *rstd1;    /* (B,T) */
    float *attn_act; /* variant's saved state */
    float *x_mid;    /* (B,T,D) after attention residual */
    float *h2;       /* (B,T,D) */
    float *rstd2;    /* (B,T) */
    float *u;        /* (B,T,F) w1 . h2 */
    float *g;        /* (B,T,F) gelu(u) */
} al_layer;

typedef struct al_model {
    al_model_config cfg;
    int d_ff;
    int precision;               /* AL_PRECISION_* of every call's products (al_bf16.h);
                                    -1 (al_model_init's): the process's */

    int n_tensors;
    al_tensor *tensors;          /* owned */
    size_t n_params;
    float *params, *grads;       /* owned, n_params each */
    float *tok_emb, *final_norm, *d_tok_emb, *d_final_norm;
    al_layer *layers;            /* owned, n_layer */

    /* activations, sized by al_model_reserve */
    int B, T;
    float *acts;                 /* owned, one allocation */
    float *x_final;              /* (B,T,D) residual after the last block */
    float *hf;                   /* (B,T,D) final norm output */
    float *rstdf;                /* (B,T) */
    float *logits;               /* (B,T,V); dlogits after backward */
    float *dx, *dtmp, *dff;      /* backward work: (B,T,D) (B,T,D) (B,T,F) */
    float *scratch;              /* variant scratch */
    float *dkv;                  /* (B*T*kv_elems) a kv_share group's K/V gradient */
    int *targets;                /* (B,T) copy of the last targets */
    float *weights;              /* (B,T) loss weights or NULL */
    int has_weights, has_targets;
    int fwd_B, fwd_T;            /* shape of the last forward */
    int *inputs;                 /* (B,T) */
} al_model;

/* The precision of this model's products ("f32" or "bf16", train.precision):
 * 0, or -1 with e set where bf16 cannot run here. */
int al_model_set_precision(al_model *m, const char *name, al_err *e);
/* Build the tensor table and allocate parameters and gradients (zeroed). */
int al_model_init(al_model *m, const al_model_config *cfg, al_err *e);
/* Initialise weights per the spec from a seed: each tensor from its own
 * stream (seed, name), unit by unit, so models that share a tensor or a
 * prefix of it start equal there (model.c). */
/* The causal-mask ablation on a built model: every layer's shape and
 * context made again with model.causal = causal (the variant's init reads
 * its shape once). */
void al_model_set_causal(al_model *m, int causal);
/* --rope-scaling on a built model (score, generate): model.rope_scaling
 * set to sc and every layer's shape and context made again, as
 * al_model_set_causal; sc's kind is a name of al_rope_kinds. */
void al_model_set_rope_scaling(al_model *m, const al_rope_scaling *sc);
void al_model_init_weights(al_model *m, uint64_t seed);
/* Allocate activations for batches up to (B, T). Idempotent for the same
 * or a smaller shape. */
int al_model_reserve(al_model *m, int B, int T, al_err *e);
/* Forward over inputs (B, T) with B, T within the reservation. With
 * targets, returns the mean cross-entropy (weights may be NULL); without,
 * returns 0 and leaves logits (B, T, V) in m->logits. */
double al_model_forward(al_model *m, const int *inputs, const int *targets,
                        const float *weights, int B, int T);
/* Backward of the last forward (which must have had targets): WRITES
 * grads (no need to zero them first; to accumulate over several batches,
 * add grads up elsewhere). */
void al_model_backward(al_model *m);
/* Zeroes grads (al_model_backward no longer needs it). */
void al_model_zero_grad(al_model *m);
/* Find a tensor by name, or NULL. */
const al_tensor *al_model_tensor(const al_model *m, const char *name);
void al_model_free(al_model *m);

#endif
