/*
 * tokloss.c - per-token next-token losses, by the full forward or through
 * the KV cache (al_tokloss.h).
 */
#include "al_tokloss.h"

#include <math.h>
#include <stdlib.h>

double al_token_loss(const float *logits, int V, int target)
{
    AL_ASSERT(target >= 0 && target < V);
    double mx = logits[0], sum = 0;
    for (int i = 1; i < V; i++) mx = logits[i] > mx ? logits[i] : mx;
    for (int i = 0; i < V; i++) sum += exp((double)logits[i] - mx);
    return mx + log(sum) - (double)logits[target];
}

void al_token_losses_forward(al_model *m, const int *in, const int *tgt, int B, int T,
                             double *loss)
{
    int V = m->cfg.vocab_size;
    al_model_forward(m, in, NULL, NULL, B, T);   /* leaves logits (B, T, V) */
    for (size_t i = 0; i < (size_t)B * T; i++)
        loss[i] = al_token_loss(m->logits + i * V, V, tgt[i]);
}

void al_token_losses_cache(al_decoder *d, const int *in, const int *tgt, int B, int T,
                           double *loss)
{
    AL_ASSERT(B >= 1 && B <= d->batch && T >= 1 && T <= d->context);
    int V = d->m->cfg.vocab_size;
    int *tok = al_calloc((size_t)d->batch, sizeof *tok);   /* padding sequences read 0 */
    al_decoder_reset(d);
    for (int t = 0; t < T; t++) {
        for (int b = 0; b < B; b++) tok[b] = in[(size_t)b * T + t];
        const float *logits = d->batch == 1 ? al_decoder_step(d, tok[0])
                                            : al_decoder_step_batch(d, tok);
        for (int b = 0; b < B; b++)
            loss[(size_t)b * T + t] = al_token_loss(logits + (size_t)b * V, V,
                                                    tgt[(size_t)b * T + t]);
    }
    free(tok);
}
