/*
 * al_convert.h - turning a trained model of one attention variant into
 * another: the weights of the new model, how far its keys and values are
 * from the old ones, and the whole job behind `attnlab convert`.
 *
 * Methods (docs/converting.md):
 *   mean    mha/gqa -> gqa/mqa: each new K/V head is the mean of the K/V
 *           heads of its group (Ainslie et al. 2023). The new G must divide
 *           the old one; the same G is an exact copy.
 *   first   the same, keeping the first K/V head of each group.
 *   random  wk, wv (for an mla target: every K/V tensor, wqr too) drawn
 *           fresh as at initialisation from a seed: the GQA paper's control.
 *   svd     mha/gqa -> mla (d_q_latent 0): the RoPE treatment below, then a
 *           truncated SVD (LAPACKE_sgesdd) of the stacked NoPE keys and
 *           values [wk_nope / alpha; wv] (alpha balances their norms) gives
 *           wdkv = V_r^T (orthonormal rows) and wuk, wuv = U_r S_r per head;
 *           kv_norm is fitted per latent dimension on the sample.
 *   RoPE (svd): MLA's shared key k_r of width d_rope rotates at the
 *   frequencies base^(-2i/d_rope), which are the source's pairs
 *   j = i * d_head / d_rope (MHA2MLA's uniform choice, forced by the
 *   layout: d_rope must divide d_head). For each kept pair the K/V heads'
 *   keys are mixed by the leading eigenvector u of their covariance over
 *   the sample (TransMLA's RoRoPE, one component): k_r = sum_g u_g k_g, and
 *   each query head's RoPE query is u_g(h) q_h. What u does not capture,
 *   and every other pair, loses its rotation and joins the NoPE keys that
 *   the SVD compresses, pair j scaled by rho_j, the best fixed stand-in for
 *   its rotation over a training window (convert.c, pair_rho). Queries are
 *   scaled by sqrt((d_head + d_rope) / d_head) so that MLA's softmax scale
 *   gives the source's.
 * Everything else (embeddings, norms, MLP, wq, wo) is copied.
 *
 * Buffers: every function here allocates its own scratch and frees it; the
 * sample belongs to the caller (al_convert_sample_free).
 */
#ifndef AL_CONVERT_H
#define AL_CONVERT_H

#include <stdint.h>

#include "al_config.h"
#include "al_yaml.h"
#include "al_model.h"

enum al_convert_method {
    AL_CONVERT_MEAN = 0,
    AL_CONVERT_FIRST,
    AL_CONVERT_RANDOM,
    AL_CONVERT_SVD,
    AL_CONVERT_N_METHODS
};

/* "mean", "first", "random", "svd"; parse returns -1 for anything else. */
const char *al_convert_method_name(int method);
int al_convert_method_parse(const char *name);
/* svd for an mla target, mean otherwise. */
int al_convert_default_method(const al_model_config *dst);

/* The target model: src with model.attention replaced by the mapping `to`
 * (e.g. {variant: gqa, n_kv_head: 2}), decoded and checked as an
 * experiment file's would be (errors name to's file:line:col or the key). */
int al_convert_target(const al_model_config *src, const al_node *to, al_model_config *dst,
                      al_err *e);

/* Whether `method` takes src to dst: 0, or -1 with a one-line reason (a
 * variant the method cannot reach, n_kv_head not dividing the source's G,
 * d_latent above the rank available, ...). */
int al_convert_check(const al_model_config *src, const al_model_config *dst, int method,
                     al_err *e);

/* The inputs the source model's attention saw on sample windows of the
 * training split: x (n_layer, n, d_model), rmsnorm'd block inputs. */
typedef struct al_convert_sample {
    int n_layer, n, d;
    float *x;                /* owned */
} al_convert_sample;

struct al_data;
/* About `tokens` tokens (whole windows of T tokens, at least one) drawn
 * from d's training split with their own RNG from `seed`; runs src
 * forward B windows at a time. */
int al_convert_sample_take(al_model *src, struct al_data *d, int T, int B, long tokens,
                           uint64_t seed, al_convert_sample *s, al_err *e);
void al_convert_sample_free(al_convert_sample *s);

typedef struct al_convert_opts {
    int method;                         /* enum al_convert_method */
    uint64_t seed;                      /* random */
    const al_convert_sample *sample;    /* svd: RoRoPE, balance, kv_norm; NULL: from weights */
} al_convert_opts;

/* Fill dst's parameters (dst was al_model_init'ed with a config that passed
 * al_convert_check against src's). */
int al_convert(const al_model *src, al_model *dst, const al_convert_opts *o, al_err *e);

/* How far the converted keys and values are from the source's on the
 * sample, per layer: relative Frobenius errors over every query head
 * (what head h reads now against what it read). For a gqa-family target K
 * is the key before RoPE. For mla K is the NoPE key the SVD approximates
 * (the target of the factorisation), measured before kv_norm (the rank
 * truncation alone) and after (the model's); rope_kept is the share of the
 * source keys' energy that keeps its rotation in k_r (NAN otherwise). */
typedef struct al_convert_err {
    double k, v;                 /* the model's */
    double k_prenorm, v_prenorm; /* mla: before kv_norm; else equal to k, v */
    double rope_kept;
} al_convert_err;

void al_convert_measure(const al_model *src, const al_model *dst, const al_convert_opts *o,
                        al_convert_err *per_layer);

/* ---- The whole job: checkpoint in, checkpoint out. */
typedef struct al_convert_job {
    const char *src_path;
    const al_node *to;                  /* the target attention mapping */
    int method;                         /* -1: al_convert_default_method */
    uint64_t seed;
    const al_config *run;               /* data and eval settings for sample and score */
    long sample_tokens;
    const char *out_path;               /* written atomically, only on success */
    int score;                          /* evaluate source and result on run's val split */
} al_convert_job;

typedef struct al_convert_result {
    char src_path[AL_PATH_LEN];
    char src_sha256[65];
    char src_variant[AL_NAME_LEN], dst_variant[AL_NAME_LEN];
    int method, n_layer;
    long sample_tokens;
    al_convert_err *layers;             /* n_layer, owned: al_convert_result_free */
    al_convert_err mean;                /* over layers */
    double src_val_loss, val_loss;      /* NAN unless scored */
    double src_val_accuracy, val_accuracy;
} al_convert_result;

/* 0; -1 with e on bad input (nothing written); -2 when only the write failed. */
int al_convert_run(const al_convert_job *j, al_convert_result *r, al_err *e);
void al_convert_result_free(al_convert_result *r);

/* train.init_convert: the checkpoint at src_path converted into dst (an
 * initialised model whose config is the target) by method (seed for
 * random), sampling `tokens` tokens of d's training split in batches of B.
 * r as above, unscored. */
int al_convert_into(const char *src_path, al_model *dst, int method, uint64_t seed,
                    struct al_data *d, int B, long tokens, al_convert_result *r, al_err *e);

/* r as JSON (source, SHA-256, method, variants, per-layer errors). */
int al_convert_write_json(const char *path, const al_convert_result *r, al_err *e);

#endif
