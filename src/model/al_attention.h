/*
 * al_attention.h - what attention learned: every head's attention
 * probabilities over a sequence, and per-head statistics.
 *
 * The probabilities come from the variant's `pictures->probs` (attnlab_variant.h),
 * which rebuilds them from the state the training forward pass saved, so a
 * picture shows exactly the weights the model applied. A variant without
 * pictures is refused; a model.kv_share consumer's come with the producer's act.
 *
 *   al_attention_forward(m, tokens, T, &e);      // one forward pass, B = 1
 *   al_attention_layer(m, l, T, P);              // P (H, T, T) of layer l
 *
 * Statistics of one head's map P (T, T), over the queries i = 1 .. T-1
 * (query 0 of a causal model sees only itself; it is left out for every
 * model, so masked and unmasked models average over the same queries):
 *   entropy    mean_i  -sum_j p_ij ln p_ij                       (nats)
 *   distance   mean_i   sum_j p_ij |i - j|                       (tokens)
 *   first      mean_i   p_i0                 mass on the first token
 *   prev       mean_i   p_i,i-1              previous-token score
 * and, on a sequence of L distinct random tokens repeated twice (2L
 * tokens), the induction score (Olsson et al. 2022): the mean over the
 * second copy's queries i = L .. 2L-1 of p_i,i-L+1, the weight on the token
 * that followed the current token's earlier occurrence.
 */
#ifndef AL_ATTENTION_H
#define AL_ATTENTION_H

#include <stdint.h>

#include "al_model.h"

/* Random sequences the induction score averages over, and their seed. */
#define AL_INDUCTION_SEQS 4
#define AL_INDUCTION_SEED 1

/* 0, or -1 with a message naming the variant when it cannot show its
 * attention (no `pictures` sub-table). */
int al_attention_supported(const al_model *m, al_err *e);

/* One forward pass over tokens[0..T) (B = 1; reserves activations for
 * T). Errors: no `pictures`, T < 1, a token outside the vocabulary. */
int al_attention_forward(al_model *m, const int *tokens, int T, al_err *e);

/* P (H, T, T) of layer l from the last al_attention_forward (same T). */
void al_attention_layer(const al_model *m, int layer, int T, float *P);

/* 1 when layer l's pictures are weights, not probabilities
 * (pictures.weights: a state layer's equivalent attention matrix, signed,
 * rows not summing to 1): its head statistics are NaN. */
int al_attention_layer_weights(const al_model *m, int layer);

typedef struct al_head_stats {
    double entropy, distance, first, prev, induction;
} al_head_stats;

/* entropy, distance, first and prev of one head's map P (T, T), T >= 2
 * (for T = 1 they are 0). induction is left alone. */
void al_head_map_stats(const float *P, int T, al_head_stats *hs);

/* Induction score of one head's map P (2L, 2L) over a sequence whose
 * second half repeats its first. */
double al_head_induction_score(const float *P, int L);

/* The tokens the induction sequences are drawn from, into out (capacity
 * n): the bytes of alphabet when given (checked against the vocabulary),
 * else the ASCII letters for a byte model (vocab 256; random letters are
 * in-distribution for a text model, random bytes mostly are not) or the
 * whole vocabulary otherwise. Duplicates are dropped. Returns the count;
 * -1 with e set when fewer than 2 remain or a byte is outside the vocabulary. */
int al_induction_alphabet(int vocab, const char *alphabet, int *out, int n, al_err *e);

/* Sequence `index` of the induction test: L distinct tokens drawn from
 * the alphabet (k of them) with a seed from (AL_INDUCTION_SEED, index),
 * then the same L again: out (2L). */
void al_induction_tokens(const int *alphabet, int k, int L, int index, int *out);

/* The L the induction test uses: floor(seq_len / 2), at most the alphabet
 * size. */
int al_induction_len(int seq_len, int alphabet_size);

/* Per-head statistics of a model, out (n_layer * n_head, layer-major):
 * the map statistics averaged over n_seq sequences of T tokens (tokens
 * (n_seq, T); n_seq may be 0, leaving them 0), and the induction score
 * averaged over AL_INDUCTION_SEQS random sequences from the alphabet
 * (al_induction_alphabet's rules; NULL for the default). Runs B = 1
 * forward passes; allocates its own probability buffer. */
int al_head_stats_model(al_model *m, const int *tokens, int n_seq, int T, const char *alphabet,
                        al_head_stats *out, al_err *e);

#endif
