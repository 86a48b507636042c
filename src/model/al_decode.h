/*
 * al_decode.h - incremental decoding from a KV cache, and sampling.
 *
 * The core drives it; each variant owns its cache row layout through the
 * decode sub-table of its table (attnlab_variant.h). A decoder borrows a
 * model and owns, for each of its `batch` sequences, one al_kv_cache per
 * layer, plus one work buffer, all allocated by al_decoder_init: a step
 * allocates nothing (the pool's scratch and the context split's partials
 * grow on the first multi-threaded step).
 *
 *   al_decoder d;
 *   al_decoder_init(&d, &model, context, AL_KV_F32, &e);
 *   al_decoder_prefill(&d, prompt, n, &e);   // one batched forward pass
 *   for (...) logits = al_decoder_step(&d, token);
 *   al_decoder_free(&d);
 *
 * Batched: al_decoder_init_batch(&d, &model, B, ...), a prefill per
 * sequence (al_decoder_prefill_seq), then al_decoder_step_batch feeds one
 * token to every sequence at once (each at its own position) through the
 * variant's decode_batch, or its decode once per sequence when it has
 * none; the weight products become (B, D) matrix products.
 *
 * Positions run from 0 up to context - 1, past the trained seq_len if the
 * context allows it (RoPE extrapolates; quality beyond seq_len is the
 * model's business).
 */
#ifndef AL_DECODE_H
#define AL_DECODE_H

#include <stdio.h>

#include "al_kvcache.h"
#include "al_model.h"

/* Cache bytes per token, summed over layers, for a storage dtype: the one
 * formula `attnlab kv` prints and a decoder's allocation follows. An
 * int8/int4 cache's bytes are not proportional to its context (the f32
 * ring of recent tokens is a fixed cost, al_kvcache.h): its figure is the
 * bytes at the trained seq_len over seq_len, rounded down. */
size_t al_kv_bytes_per_token(const al_model_config *c, int dtype);
/* (The bytes at a context, any dtype: al_model_kv_bytes_at, al_tensors.h.) */

typedef struct al_decoder {
    al_model *m;          /* borrowed: outlives the decoder */
    int context, dtype;   /* tokens per sequence (a cache holds al_attn_kv_rows of
                             them), enum al_kv_dtype */
    int batch;            /* sequences */
    int *pos;             /* owned, (batch): tokens in each sequence's caches */
    al_kv_cache **cache;  /* owned, n_layer x batch: layer l of sequence b at l * batch + b
                             (NULL for a model.kv_share consumer: it reads its producer's) */
    float *buf;           /* owned: every float below */
    float *x, *h, *a;     /* (batch, D) residual, normed input, branch output */
    float *u, *g;         /* (batch, F) MLP hidden before / after gelu */
    float *logits;        /* (batch, V) of the last token fed to each sequence */
    float *tmp;           /* (batch, max(D, F, V)): al_linear_forward_few's */
    float *scratch;       /* variant decode scratch */
} al_decoder;

/* Fails (with a message naming the reason) when the variant has no decode
 * hooks, the model was trained without the causal mask, or context < 1. */
int al_decoder_init(al_decoder *d, al_model *m, int context, int dtype, al_err *e);
/* The same for `batch` independent sequences (batch >= 1). */
int al_decoder_init_batch(al_decoder *d, al_model *m, int batch, int context, int dtype,
                          al_err *e);
void al_decoder_free(al_decoder *d);
/* Forget the cached tokens of every sequence (the storage is kept). */
void al_decoder_reset(al_decoder *d);
/* Storage held by the decoder's caches, as counted by their allocator. */
size_t al_decoder_cache_bytes(const al_decoder *d);
/* Bytes of one token's rows summed over layers, measured from sequence
 * 0's caches (their bytes over their rows): a bounded cache (kv_rows)
 * holds fewer rows than its context, so this is not cache bytes over
 * the context. A state (AL_KV_STATE) adds nothing per token. */
size_t al_decoder_row_bytes(const al_decoder *d);

/* Run tokens[0..n) through one forward pass of the model (B = 1, which may
 * allocate the model's activations for T = n) and fill the caches from
 * the variant's saved activations. Starts from an empty cache. Leaves the
 * logits of the last token in d->logits. Tokens past the trained seq_len
 * are fed one at a time after the batched pass, so that a long prompt
 * never needs more activation memory than training did. Sequence 0. */
int al_decoder_prefill(al_decoder *d, const int *tokens, int n, al_err *e);
/* The same for sequence b (its caches emptied first); its logits are row
 * b of d->logits. The other sequences are untouched. */
int al_decoder_prefill_seq(al_decoder *d, int b, const int *tokens, int n, al_err *e);
/* Feed one token at position d->pos[0] (< context) of a decoder of batch
 * 1; returns d->logits. */
const float *al_decoder_step(al_decoder *d, int token);
/* Feed tokens[b] to every sequence b at its own position d->pos[b]
 * (< context); returns d->logits (batch, V). Each row equals what
 * al_decoder_step gives that sequence alone, up to rounding. */
const float *al_decoder_step_batch(al_decoder *d, const int *tokens);

/* Benchmark support: fill rows [0, n) of every layer of every sequence
 * (all of a bounded cache's rows when it has fewer) with random rows
 * (decode speed does not depend on what the rows hold) and set every pos
 * to n. */
void al_decoder_fill_random(al_decoder *d, int n, uint64_t seed);

/* Next token from logits (V): argmax (lowest index on ties) when
 * temperature is 0, else a draw from softmax(logits / temperature) over
 * the top_k largest (all when top_k is 0 or >= V). work holds V floats. */
int al_sample(const float *logits, int V, double temperature, int top_k, al_rng *rng,
              float *work);

/* ---- `attnlab generate` without the file handling */
typedef struct al_generate_opts {
    const unsigned char *prompt;
    size_t prompt_len;
    long tokens;          /* bytes to generate; -1: fill the context, at most 256 */
    double temperature;   /* >= 0; 0 is greedy */
    int top_k;            /* 0: no cut */
    uint64_t seed;
    long context;         /* 0: the trained seq_len */
    int dtype;            /* enum al_kv_dtype, or -1: model.kv_dtype */
    int stats;            /* print statistics to err */
    /* Several prompts (n_prompts > 0): one sequence each, decoded together;
     * prompt and prompt_len are then not used. */
    const unsigned char *const *prompts;
    const size_t *prompt_lens;
    int n_prompts;
    int batch;            /* sequences; 0: n_prompts, or 1. With one prompt,
                             `batch` samples of it, sample b drawn with seed + b */
} al_generate_opts;

typedef struct al_generate_stats {
    long prompt_tokens, generated, context;   /* per sequence (prompt: the longest) */
    int batch;
    int dtype;
    double prefill_s, decode_s;
    size_t cache_bytes, kv_bytes_per_token;   /* measured */
} al_generate_stats;

/* One sequence: streams the generated bytes to out (flushed after each).
 * Several: writes each sequence's bytes when all are done, each after a
 * header line "==> sample B <==" (as head(1) separates files), a blank
 * line between them. With o->stats, statistics to err. Bad options or
 * prompt: -1 with e set and nothing written. st may be NULL. */
int al_generate(al_model *m, const al_generate_opts *o, FILE *out, FILE *err,
                al_generate_stats *st, al_err *e);
/* The same without writing: text[b] (malloc'ed, len[b] bytes; the caller
 * frees each) receives sequence b's bytes, for b < the batch (text and len
 * hold that many). */
int al_generate_texts(al_model *m, const al_generate_opts *o, unsigned char **text,
                      size_t *len, FILE *err, al_generate_stats *st, al_err *e);
/* The batch o describes (al_generate_opts.batch resolved), or -1 with e
 * set when batch and n_prompts disagree. */
int al_generate_batch_size(const al_generate_opts *o, al_err *e);

#endif
