/*
 * deltanet_internal.h - the gated delta rule of one head over one sequence,
 * in chunks (variants/deltanet_chunk.c), shared by deltanet.c and the test
 * that holds it against the token-by-token recurrence (tests/test_deltanet.c).
 *
 *   S_t = a_t S_{t-1} (I - b_t k_t k_t^T) + b_t v_t k_t^T,   o_t = S_t q_t
 *
 * S (dv, dk) starts at zero; g_t = log a_t (<= 0), b_t = beta in (0, 1).
 * Rows of q, k (dk floats), v, o (dv floats) and g, beta (one float) are
 * `ld*` floats apart, so a head is read in place from a (T, H, d) layout.
 */
#ifndef AL_DELTANET_INTERNAL_H
#define AL_DELTANET_INTERNAL_H

#include <stddef.h>

typedef struct al_dn_seq {
    const float *q, *k, *v, *beta, *g;
    int ldk, ldv, ldg;   /* row strides of q and k, of v and o, of beta and g */
    int T, C, dk, dv;    /* tokens, chunk length, key and value widths */
} al_dn_seq;

/* Chunks of a T-token sequence: ceil(T / C). */
static inline int al_dn_chunks(int T, int C) { return (T + C - 1) / C; }

/* Scratch floats one sequence's forward or backward needs. */
size_t al_dn_work_floats(int C, int dk, int dv);

/* o (T rows, stride ldv) and the states S (chunks + 1, dv, dk): the state
 * before each chunk, then the state after the last token. */
void al_dn_chunk_forward(const al_dn_seq *s, float *o, float *S, float *work);

/* Given dout (T rows, stride ldv) and the forward's states S: dq, dk (stride
 * ldk), dv (stride ldv), dbeta, dg (stride ldg), written (not added). */
void al_dn_chunk_backward(const al_dn_seq *s, float *dq, float *dk, float *dv, float *dbeta,
                          float *dg, const float *dout, const float *S, float *work);

/* The equivalent attention matrix of a sequence of T <= C tokens, M (T, T):
 * o_i = sum_{j <= i} M_ij v_j (M_ij = 0 above the diagonal). */
void al_dn_weights(const al_dn_seq *s, float *M, float *work);

/* One token of the recurrence on S (dv, dk), in place: S = a S (I - b k k^T)
 * + b v k^T, then o = S q. tmp holds dv floats. */
void al_dn_step(float *S, float *o, float *tmp, const float *q, const float *k, const float *v,
                float beta, float a, int dk, int dv);

#endif
