/*
 * al_kernels.h - the shared numeric kernels of attnlab.
 *
 * Every layer is a plain function over float arrays: outputs first, then
 * const inputs, then sizes (the llm.c convention). Shapes are written in
 * comments; rows are contiguous. Backward functions ACCUMULATE (+=) into
 * their gradient outputs, so the caller zeroes gradients once per step.
 *
 * Every matrix product goes through the core's one product: cblas_sgemm
 * under train.precision f32, oneDNN's bf16 matmul (bf16 operands, f32
 * accumulation and results) under bf16, so a variant gets the run's
 * precision by calling these helpers (variants/README.md). No function
 * here allocates; scratch buffers are passed in by the caller who owns
 * them (the bf16 path keeps per-thread operand buffers of its own).
 *
 * These kernels are part of the variant interface: built-in variants and
 * run-time plugins call the same functions.
 */
#ifndef AL_KERNELS_H
#define AL_KERNELS_H

#include <stddef.h>
#include "attnlab_variant_base.h"

/* Put before a hot loop's function: it is compiled for AVX-512, AVX2 and
 * baseline x86-64 and picked at load time (GCC function multiversioning),
 * so the binary runs on any x86-64 and needs no -march. Without
 * -ffast-math and with ISO C's default of no FMA contraction, the clones
 * give the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__OPTIMIZE__)
#define AL_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define AL_CLONES
#endif

/* ---------------------------------------------------------------------------
 * Linear layers. Weights are stored [out, in] like torch.nn.Linear.
 * ------------------------------------------------------------------------- */

/* out (N, OC) = inp (N, IC) . w^T, w (OC, IC). Overwrites out. */
void al_linear_forward(float *out, const float *inp, const float *w,
                       int N, int IC, int OC);
/* The same for a few rows (batched decode, N up to a few dozen): computed
 * as tmp (OC, N) = w . inp^T, then transposed into out, the order in which
 * OpenBLAS packs the large operand (w) fastest: 1.5-2x at N = 16 on both
 * its Haswell and AVX-512 kernels. tmp holds N * OC floats. Equal to
 * al_linear_forward up to rounding. */
void al_linear_forward_few(float *out, float *tmp, const float *inp, const float *w, int N,
                           int IC, int OC);

/* Given dout (N, OC): dinp (N, IC) += dout . w ; dw (OC, IC) += dout^T . inp.
 * dinp or dw may be NULL to skip that product. */
void al_linear_backward(float *dinp, float *dw, const float *dout,
                        const float *inp, const float *w, int N, int IC, int OC);
/* The same with BLAS's beta for each output: dinp = dout . w + beta_inp *
 * dinp, dw = dout^T . inp + beta_w * dw. Beta 0 writes an output (it need
 * not be zeroed first, and NaN in it is ignored), beta 1 accumulates. */
void al_linear_backward_beta(float *dinp, float *dw, const float *dout, const float *inp,
                             const float *w, int N, int IC, int OC, float beta_inp,
                             float beta_w);

/* Strided single-matrix helpers for attention (row-major, explicit leading
 * dimensions). C (M, N) = alpha * A . B^T + beta * C with A (M, K), B (N, K). */
void al_gemm_nt(float *C, int ldc, const float *A, int lda, const float *B,
                int ldb, int M, int N, int K, float alpha, float beta);
/* C (M, N) = alpha * A . B + beta * C with A (M, K), B (K, N). */
void al_gemm_nn(float *C, int ldc, const float *A, int lda, const float *B,
                int ldb, int M, int N, int K, float alpha, float beta);
/* C (M, N) = alpha * A^T . B + beta * C with A (K, M), B (K, N). */
void al_gemm_tn(float *C, int ldc, const float *A, int lda, const float *B,
                int ldb, int M, int N, int K, float alpha, float beta);

/* ---------------------------------------------------------------------------
 * RMSNorm: out = x / sqrt(mean(x^2) + eps) * w, per row of C.
 * ------------------------------------------------------------------------- */

/* out (N, C), rstd (N) saved for backward (may be NULL), x (N, C), w (C). */
void al_rmsnorm_forward(float *out, float *rstd, const float *x,
                        const float *w, int N, int C, float eps);
/* dx (N, C) += ..., dw (C) += ... (dw may be NULL: weightless use). */
void al_rmsnorm_backward(float *dx, float *dw, const float *dout,
                         const float *x, const float *w, const float *rstd,
                         int N, int C);
/* The same, each output written (beta 0: as if added to zero) or added to
 * (beta 1); no other beta. */
void al_rmsnorm_backward_beta(float *dx, float *dw, const float *dout, const float *x,
                              const float *w, const float *rstd, int N, int C, float beta_dx,
                              float beta_dw);
/* The residual add before a norm, in one pass: sum (N, C) = x + r, then
 * out = rmsnorm(sum) as al_rmsnorm_forward (the same bits as the two
 * calls). sum may not alias x or r. */
void al_residual_rmsnorm_forward(float *sum, float *out, float *rstd, const float *x,
                                 const float *r, const float *w, int N, int C, float eps);

/* ---------------------------------------------------------------------------
 * GELU, tanh approximation (torch gelu(approximate='tanh')).
 * ------------------------------------------------------------------------- */
void al_gelu_forward(float *out, const float *x, size_t n);
/* dx += dout * gelu'(x) */
void al_gelu_backward(float *dx, const float *dout, const float *x, size_t n);
/* dx = dout * gelu'(x), written; dx may be dout (in place). */
void al_gelu_backward_set(float *dx, const float *dout, const float *x, size_t n);

/* ---------------------------------------------------------------------------
 * RoPE, rotate-half convention (GPT-NeoX / HF LLaMA): within each head of
 * width dim, element i pairs with i + dim/2 and is rotated by angle
 * pos * base^(-2i/dim). x is (B, T, nh, stride-laid heads): head h of token
 * (b, t) starts at x + (b*T + t)*row_stride + h*dim. Positions are
 * pos0 + t. In place. dim must be even.
 * ------------------------------------------------------------------------- */
void al_rope_forward(float *x, int B, int T, int nh, int dim, int row_stride,
                     int pos0, float base);
/* In-place inverse rotation: turns d(rotated) into d(unrotated). */
void al_rope_backward(float *dx, int B, int T, int nh, int dim, int row_stride,
                      int pos0, float base);
/* The same for the first dim elements of heads head_stride >= dim apart
 * (head h at x + (b*T + t)*row_stride + h*head_stride): rotates part of
 * each head (GTA's RoPE half, MLA-like split heads) in one call instead of
 * a loop over heads. head_stride == dim is al_rope_forward. */
void al_rope_forward_strided(float *x, int B, int T, int nh, int dim, int head_stride,
                             int row_stride, int pos0, float base);
void al_rope_backward_strided(float *dx, int B, int T, int nh, int dim, int head_stride,
                              int row_stride, int pos0, float base);

/* The layer's RoPE (al_rope: scaling and fraction) on a RoPE part of width
 * dim in each of nh heads head_stride apart. Rotates the first
 * al_rope_dims(r, dim) elements of each part, rotate-half within them
 * (pair i with i + n/2 at frequency theta_i = base^(-2i/n), n the rotated
 * width, as GPT-NeoX's partial rotary), the frequencies changed by the
 * scaling kind; the rest of the part is left alone. YaRN also multiplies
 * the rotated elements by its sqrt(1/t) = 0.1 ln(F) + 1, so q.k over
 * rotated parts carries the paper's temperature 1/t. Every variant calls
 * these for every RoPE part, so the scaling lives in one place. */
void al_rope_apply_forward(float *x, int B, int T, int nh, int dim, int head_stride,
                           int row_stride, int pos0, const al_rope *r);
/* The transpose: d(rotated) into d(unrotated), in place. */
void al_rope_apply_backward(float *dx, int B, int T, int nh, int dim, int head_stride,
                            int row_stride, int pos0, const al_rope *r);
/* Rotated elements of a part of width dim: 2 * floor(fraction * dim / 2). */
int al_rope_dims(const al_rope *r, int dim);
/* The angle frequency of pair i of n rotated elements, and YaRN's
 * sqrt(1/t) (1 for the other kinds), as the kernels use them. */
double al_rope_freq(const al_rope *r, int n, int i);
double al_rope_mscale(const al_rope *r);
/* The shape's RoPE, or plain RoPE at s->rope_base when it was left zeroed
 * (a shape built by hand, a plugin's test). */
al_rope al_rope_of(const al_attn_shape *s);
/* al_rope_apply_* with the layer's RoPE, al_rope_of(s): what a variant
 * calls on each of its RoPE parts. */
void al_rope_layer_forward(float *x, int B, int T, int nh, int dim, int head_stride,
                           int row_stride, int pos0, const al_attn_shape *s);
void al_rope_layer_backward(float *dx, int B, int T, int nh, int dim, int head_stride,
                            int row_stride, int pos0, const al_attn_shape *s);

/* ---------------------------------------------------------------------------
 * Scaled dot-product attention over grouped heads: the core every variant
 * shares. Query head h reads K/V group h / (H / G).
 *   q   (B, T, H * dqk)     k (B, T, G * dqk)     v (B, T, G * dv)
 *   out (B, T, H * dv)      att (B, H, T, T) probabilities saved for backward
 * scores = q.k * scale, causal mask when causal != 0, softmax over keys.
 * With a causal mask the masked entries of att are stored as 0.
 * ------------------------------------------------------------------------- */
void al_sdpa_forward(float *out, float *att, const float *q, const float *k,
                     const float *v, int B, int T, int H, int G, int dqk,
                     int dv, float scale, int causal);
/* dq, dk, dv accumulate. scratch (T*T floats) is no longer used: each
 * thread of the pool has its own; the argument stays for the interface. */
void al_sdpa_backward(float *dq, float *dk, float *dv, float *scratch,
                      const float *dout, const float *att, const float *q,
                      const float *k, const float *v, int B, int T, int H,
                      int G, int dqk, int dvd, float scale, int causal);

/* The same with a band (al_attn_forward_band's): masked entries of att
 * are 0. window 0: al_sdpa_forward. The backward ACCUMULATES, as
 * al_sdpa_backward does. */
void al_sdpa_forward_band(float *out, float *att, const float *q, const float *k,
                          const float *v, int B, int T, int H, int G, int dqk, int dv,
                          float scale, int causal, int window, int sinks);
void al_sdpa_backward_band(float *dq, float *dk, float *dv, const float *dout,
                           const float *att, const float *q, const float *k, const float *v,
                           int B, int T, int H, int G, int dqk, int dvd, float scale,
                           int causal, int window, int sinks);

/* The same attention without the T x T probabilities: saves per score row
 * only its max and 1/sum, stat (B, H, T, 2), and rebuilds each block of
 * probabilities in backward from the recomputed scores, bit for bit as the
 * forward pass made them. Memory O(B*H*T) instead of O(B*H*T*T); a block of
 * 64 query rows over its keys stays in cache. Work is split over the pool
 * by (batch, head) forward and (batch, K/V group) backward. */
void al_attn_forward(float *out, float *stat, const float *q, const float *k,
                     const float *v, int B, int T, int H, int G, int dqk,
                     int dv, float scale, int causal);
/* OVERWRITES dq, dk, dv (no need to zero them first). */
void al_attn_backward(float *dq, float *dk, float *dv, const float *dout,
                      const float *stat, const float *q, const float *k,
                      const float *v, int B, int T, int H, int G, int dqk,
                      int dvd, float scale, int causal);

/* The probabilities al_attn_forward used, for a batch of one sequence:
 * P (H, T, T), row i of head h the weights query i gives keys 0..T-1,
 * rebuilt from the saved stat (H, T, 2) and q, k exactly as backward
 * rebuilds them (zero above the diagonal when causal). For pictures. */
void al_attn_probs(float *P, const float *stat, const float *q, const float *k, int T,
                   int H, int G, int dqk, float scale, int causal);

/* The same attention restricted to a band (sliding-window attention with
 * attention sinks, StreamingLLM): query i sees key j when j < sinks, or
 * when causal and i - window < j <= i, or when not causal and
 * |i - j| < window. window 0: no band (exactly al_attn_forward /
 * _backward / _probs, the same bits). Masked scores weigh 0; the
 * arithmetic is that of the full block (the band changes what a query
 * sees, not the cost). */
void al_attn_forward_band(float *out, float *stat, const float *q, const float *k,
                          const float *v, int B, int T, int H, int G, int dqk, int dv,
                          float scale, int causal, int window, int sinks);
/* OVERWRITES dq, dk, dv. */
void al_attn_backward_band(float *dq, float *dk, float *dv, const float *dout,
                           const float *stat, const float *q, const float *k, const float *v,
                           int B, int T, int H, int G, int dqk, int dvd, float scale,
                           int causal, int window, int sinks);
void al_attn_probs_band(float *P, const float *stat, const float *q, const float *k, int T,
                        int H, int G, int dqk, float scale, int causal, int window, int sinks);

/* FLOPs al_attn_forward (backward 0) or al_attn_backward (backward 1)
 * and their _band forms execute for one sequence of T tokens: every
 * product 2*m*n*k. Under the causal mask a block of 64 query rows [i0, i1)
 * multiplies against keys [0, i1): the key blocks past it are skipped, the
 * masked triangle inside it is not. A band costs what the full block does.
 * Forward: scores and P.v, 2*pairs*(dqk + dv) per head; backward
 * recomputes the scores, then dP, dq, dk and dv: 2*pairs*(3*dqk + 2*dv). */
double al_attn_flops(int T, int H, int dqk, int dv, int causal, int backward);

/* ---------------------------------------------------------------------------
 * Counting products (`attnlab cost --measure`, docs/costs.md). While the
 * core counts, every product of the product layer (al_gemm_*, al_linear_*,
 * the attention kernels, al_gemv_*, al_kv_attend*) adds its 2*m*n*k. A
 * variant that multiplies matrices in loops of its own adds their FLOPs
 * here (outside any pool loop, once per call), so that its cost model can
 * be checked against what it runs. Does nothing while not counting.
 * ------------------------------------------------------------------------- */
void al_flops_add(double flops);

/* In-place softmax of a row of n floats (max-subtracted). */
void al_softmax_row(float *x, int n);
/* y[j] = e^(a x[j] + c) for j < n (y may be x): the vectorised expf the
 * softmax uses (about 1 ulp; exponents below -87.3 give 0), for a layer's
 * element-wise decays. With a = -1, exp(c - x[j]) is rounded exactly as
 * expf(c - x[j]) would round its argument. */
void al_exp_affine(float *y, const float *x, float a, float c, int n);
/* y[j] = 1 / (1 + e^-x[j]) for j < n (y may be x), with the same expf:
 * gates and SiLU without a call to libm's expf per element. */
void al_sigmoid(float *y, const float *x, int n);
/* One block of a row whose softmax is computed block by block (online, as
 * in flash attention): *mx and *sum hold the max of the row's scores so far
 * and the sum of their exp(x - max) (-INFINITY and 0 before the first
 * block). Overwrites x (n) with exp(x - new max), updates both, and returns
 * exp(old max - new max), the factor by which anything accumulated from the
 * earlier blocks must be scaled (0 on the first block). */
float al_softmax_block(float *x, int n, float *mx, float *sum);

/* ---------------------------------------------------------------------------
 * Cross-entropy over logits (N, V) against targets (N); weights (N) may be
 * NULL (all ones). Returns the mean loss over sum(weights) in double.
 * The backward overwrites logits with dlogits = (softmax - onehot) * w / sum(w)
 * * dloss. Positions of weight 0 get a zero gradient.
 * ------------------------------------------------------------------------- */
double al_xent_forward(const float *logits, const int *targets,
                       const float *weights, int N, int V);
void al_xent_backward_inplace(float *logits, const int *targets,
                              const float *weights, int N, int V, float dloss);

#endif
