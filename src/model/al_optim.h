/*
 * al_optim.h - AdamW, the learning-rate schedule and gradient clipping.
 *
 * AdamW as torch.optim.AdamW: bias-corrected moments, eps 1e-8, decoupled
 * weight decay (p -= lr * wd * p) applied to 2-D weights only.
 * The optimizer owns its moment buffers (m, v: n_params floats each).
 */
#ifndef AL_OPTIM_H
#define AL_OPTIM_H

#include <stddef.h>
#include "al_model.h"

typedef struct al_adamw {
    float *m, *v;          /* owned, n floats each */
    size_t n;
    long step;             /* updates taken */
    float beta1, beta2, eps, weight_decay;
} al_adamw;

void al_adamw_init(al_adamw *o, size_t n, double beta1, double beta2, double wd);
/* One update of every tensor of the model with learning rate lr. */
void al_adamw_step(al_adamw *o, al_model *m, double lr);
void al_adamw_free(al_adamw *o);

/* nanoGPT's schedule: linear warm-up over warmup steps, then cosine decay
 * from lr to min_lr at the last step. step counts from 0. */
double al_lr_at(long step, long steps, long warmup, double lr, double min_lr);

/* Global L2 norm of all gradients (in double). If max_norm > 0 and the norm
 * exceeds it, scales gradients by max_norm / (norm + 1e-6) as
 * torch.nn.utils.clip_grad_norm_ does. Returns the norm before clipping. */
double al_clip_grad_norm(al_model *m, double max_norm);

#endif
