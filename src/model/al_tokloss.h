/*
 * al_tokloss.h - next-token losses token by token: from the full forward
 * pass, or teacher-forced through the KV cache (every token appended to
 * the cache by the variant's decode and its loss taken from decode's
 * logits), so that a cache's storage (bf16, int8, ...) shows in the loss.
 * `attnlab score` averages them, over the file or per position bucket.
 */
#ifndef AL_TOKLOSS_H
#define AL_TOKLOSS_H

#include "al_decode.h"
#include "al_model.h"

/* -log softmax(logits (V))[target], in double. */
double al_token_loss(const float *logits, int V, int target);

/* loss (B, T) = the loss of tgt[b][t] given in[b][0..t], by one forward
 * pass over (B, T) (m reserved for it). */
void al_token_losses_forward(al_model *m, const int *in, const int *tgt, int B, int T,
                             double *loss);
/* The same through d's caches: d->batch >= B sequences, context >= T.
 * Every sequence is restarted at position 0 and fed its T tokens one step
 * at a time (sequences B .. d->batch-1, when there are more, are fed
 * token 0 and ignored). */
void al_token_losses_cache(al_decoder *d, const int *in, const int *tgt, int B, int T,
                           double *loss);

#endif
