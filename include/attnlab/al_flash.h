/*
 * al_flash.h - causal attention for training without a T x T buffer
 * (FlashAttention-2, Dao 2023, on the CPU), and the dense kernel it
 * replaces, behind one call that a variant (built in or a plugin) makes
 * with the kernel its shape names (al_attn_shape.attn_kernel,
 * train.attention_kernel).
 *
 * The problem, for both kernels: query head h reads K/V group h / (H / G).
 *   q   (B, T, H * dqk)   k (B, T, G * dqk)   v (B, T, G * dv)
 *   out (B, T, H * dv)
 * scores = scale * q.k over the keys a query sees, softmax over them,
 * out = P v. Query i sees key j when j <= i (causal; every j without), and
 * with a band (window > 0) only when j < sinks or i - window < j (causal),
 * |i - j| < window (not causal). A variant whose scores are dot products of
 * several parts (a RoPE part and a latent part, say) lays the parts side by
 * side in q and k, so that q.k is their sum (mla, gla, gta and tpa do).
 *
 * fused (AL_ATTN_FUSED): tiles of queries by keys (sizes: kernels_flash.c);
 * the forward pass keeps a running max and sum per query row (online
 * softmax) and saves only each row's log-sum-exp, lse (B, H, T); tiles the
 * mask hides whole are skipped (a band costs O(T * window)). The backward
 * pass rebuilds each tile's probabilities from lse, P = exp(S - lse), with
 * D_i = rowsum(dout_i * out_i) and dS = P * (dP - D): in one pass over
 * (batch, K/V group) when those items fill the threads, else in two, dq
 * over (batch, head, query tile) and dk, dv over (batch, group, key tile).
 * Either way every gradient element has one owner and is summed in the
 * same fixed order (the same bits for every thread count). Memory:
 * O(B*H*T) saved, a few tiles of scratch per thread.
 *
 * dense (AL_ATTN_DENSE): the probabilities P (B, H, T, T) saved by the
 * forward pass and read by the backward (al_sdpa_*_band, al_kernels.h).
 * Fewer FLOPs (no recomputation), T^2 memory.
 *
 * Both are threaded over attnlab's pool (al_parallel.h), allocate nothing
 * (scratch: al_parallel_scratch) and run their tile products through the
 * core's sgemm (al_sgemm_here).
 */
#ifndef AL_FLASH_H
#define AL_FLASH_H

#include <stddef.h>

/* al_attn_shape.attn_kernel: 0 (a shape built in code) is fused. rows is
 * the kernel the GQA family trained with before these two (al_attn_*_band,
 * al_kernels.h: blocks of 64 query rows over all their keys, each row's
 * max and 1/sum saved, the probabilities rebuilt in backward), what
 * train.attention_kernel auto picks below 8192 tokens. From there auto
 * gives AL_ATTN_LONG: fused where q.k is no wider than v, rows where it is
 * wider (mla's decoupled RoPE key), decided per problem by
 * al_attn_kernel_of (docs/fused-attention.md has the measurements). */
enum al_attn_kernel { AL_ATTN_FUSED = 0, AL_ATTN_DENSE = 1, AL_ATTN_ROWS = 2, AL_ATTN_LONG = 3 };

typedef struct al_attn_problem {
    int B, T, H, G;        /* batch, positions, query heads, K/V groups (G divides H) */
    int dqk, dv;           /* per-head widths of q and k, of v and out */
    float scale;           /* of the scores, usually 1 / sqrt(dqk) */
    int causal;            /* 1: query i sees keys j <= i */
    int window, sinks;     /* the band; window 0: none (sinks then ignored) */
} al_attn_problem;

/* The kernel that runs p: kernel itself, or for AL_ATTN_LONG fused or
 * rows by p's widths (not by T: a layer's saved state is sized once, at
 * its longest T, and every call must agree with that size). */
int al_attn_kernel_of(int kernel, const al_attn_problem *p);

/* Floats the forward pass saves for backward: lse (B, H, T) fused, P
 * (B, H, T, T) dense, max and 1/sum (B, H, T, 2) rows. */
size_t al_attn_kernel_saved_floats(int kernel, const al_attn_problem *p);

/* out and the saved state (saved_floats of them) from q, k, v. */
void al_attn_kernel_forward(int kernel, float *out, float *saved, const float *q,
                          const float *k, const float *v, const al_attn_problem *p);

/* Given dout (B, T, H*dv): OVERWRITES dq, dk, dv. out and saved are the
 * forward pass's (out is read by the fused kernel only). */
void al_attn_kernel_backward(int kernel, float *dq, float *dk, float *dv, const float *dout,
                           const float *out, const float *saved, const float *q,
                           const float *k, const float *v, const al_attn_problem *p);

/* The probabilities the forward pass applied, for a batch of one
 * sequence (p->B == 1): P (H, T, T), zero where masked. For pictures. */
void al_attn_kernel_probs(int kernel, float *P, const float *saved, const float *q,
                        const float *k, const al_attn_problem *p);

/* The fused kernel by name (al_attn_kernel_* with AL_ATTN_FUSED). */
void al_flash_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                      const al_attn_problem *p);
void al_flash_backward(float *dq, float *dk, float *dv, const float *dout, const float *out,
                       const float *lse, const float *q, const float *k, const float *v,
                       const al_attn_problem *p);
void al_flash_probs(float *P, const float *lse, const float *q, const float *k,
                    const al_attn_problem *p);

#endif
