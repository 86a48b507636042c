/*
 * deltanet_chunk.c - the gated delta rule in chunks: the WY / UT form of
 * DeltaNet (Yang et al. 2024, arXiv 2406.06484, §3) with the gate of Gated
 * DeltaNet (arXiv 2412.06464, §3.3), forward and backward, for one head of
 * one sequence. deltanet.c runs it over every (sequence, head) pair.
 *
 * Inside a chunk of n tokens with state S0 on entry, gamma_i = sum_{j<=i}
 * g_j (log decays from the chunk's start) and G_i = exp(gamma_i). Writing
 * the recurrence as S_i = a_i S_{i-1} + d_i k_i^T with the delta
 * d_i = b_i (v_i - a_i S_{i-1} k_i), the deltas solve a unit lower
 * triangular system:
 *
 *   (I + L) D = diag(b) V - diag(b G) K S0^T,   L_ij = b_i e^{gamma_i - gamma_j} k_i.k_j  (j < i)
 *   T = (I + L)^-1,  U = T diag(b) V,  W = T diag(b G) K,  D = U - W S0^T
 *   O = diag(G) Q S0^T + P D,           P_ij = e^{gamma_i - gamma_j} q_i.k_j     (j <= i)
 *   S_n = G_n S0 + D^T diag(e) K,       e_j = e^{gamma_n - gamma_j}
 *
 * Every decay enters as exp of a difference gamma_i - gamma_j <= 0, so no
 * factor overflows however strong the decay. The products are matrix
 * products (al_gemm_*); T is built by forward substitution. The backward
 * pass runs the chunks in reverse carrying dS, the gradient of the state on
 * exit, and recomputes each chunk's T, U, W, D and P from the saved entry
 * state instead of storing them (n^2 floats per chunk and head).
 */
#include <math.h>
#include <string.h>

#include <attnlab/al_kernels.h>
#include "deltanet_internal.h"

/* One chunk's matrices, carved from work. n x n: E (the masked, decayed
 * k.k products), T, P, dP, dT, X, F (the decays e^{gamma_i - gamma_j},
 * j <= i, else 0); n x dv: BV, D, dD, GdO, dBV; n x dk: BK, W, eK, XK, dW,
 * dBK; dv x dk: dS, dS0; n: gamma, dgamma, G (e^gamma_i), e
 * (e^{gamma_n - gamma_i}). setup computes every exponential of the chunk
 * once: expf is most of a narrow head's element-wise time. */
typedef struct chunk {
    float *E, *T, *P, *dP, *dT, *X, *F;
    float *BV, *D, *dD, *GdO, *dBV;
    float *BK, *W, *eK, *XK, *dW, *dBK;
    float *dS, *dS0, *gam, *dgam, *G, *e;
} chunk;

size_t al_dn_work_floats(int C, int dk, int dv)
{
    return 7 * (size_t)C * C + 5 * (size_t)C * dv + 6 * (size_t)C * dk + 2 * (size_t)dv * dk +
           4 * (size_t)C;
}

static chunk carve(float *w, int C, int dk, int dv)
{
    size_t CC = (size_t)C * C, Cv = (size_t)C * dv, Ck = (size_t)C * dk;
    chunk c;
    float **mats[] = {&c.E, &c.T, &c.P, &c.dP, &c.dT, &c.X, &c.F};
    for (int i = 0; i < 7; i++) *mats[i] = w, w += CC;
    float **vs[] = {&c.BV, &c.D, &c.dD, &c.GdO, &c.dBV};
    for (int i = 0; i < 5; i++) *vs[i] = w, w += Cv;
    float **ks[] = {&c.BK, &c.W, &c.eK, &c.XK, &c.dW, &c.dBK};
    for (int i = 0; i < 6; i++) *ks[i] = w, w += Ck;
    c.dS = w, w += (size_t)dv * dk;
    c.dS0 = w, w += (size_t)dv * dk;
    c.gam = w, w += C;
    c.dgam = w, w += C;
    c.G = w, w += C;
    c.e = w;
    return c;
}

/* ------------------------------------------------------------ one chunk */

/* The decays of the chunk from gamma: F (n x n, zero above the diagonal),
 * G and e. */
static void decays(chunk *c, int n)
{
    const float *gam = c->gam;
    for (int i = 0; i < n; i++) {
        float *Fi = c->F + (size_t)i * n;
        al_exp_affine(Fi, gam, -1.0f, gam[i], i + 1);
        for (int j = i + 1; j < n; j++) Fi[j] = 0.0f;
    }
    al_exp_affine(c->G, gam, 1.0f, 0.0f, n);
    al_exp_affine(c->e, gam, -1.0f, gam[n - 1], n);
}

/* a *= b over m floats. */
AL_CLONES static void mul_in(float *a, const float *b, size_t m)
{
    for (size_t i = 0; i < m; i++) a[i] *= b[i];
}

/* T = (I + L)^-1 for L_ij = b_i E_ij (E strictly lower), row by row:
 * T_i = e_i - sum_{j<i} L_ij T_j. T_j is zero past column j, so a block of
 * 16 columns from m0 takes only the rows j >= m0, and stays in registers
 * while they are subtracted (the sums run in the same order as one column
 * at a time). */
AL_CLONES static void unit_lower_inverse(float *T, const float *E, const float *b, int ldb, int n)
{
    for (int i = 0; i < n; i++) {
        float *Ti = T + (size_t)i * n, bi = b[(size_t)i * ldb];
        const float *Ei = E + (size_t)i * n;
        int m0 = 0;
        for (; m0 + 16 <= n && m0 < i; m0 += 16) {
            float acc[16] = {0};
            for (int j = m0; j < i; j++) {
                float l = bi * Ei[j];
                const float *Tj = T + (size_t)j * n + m0;
                for (int m = 0; m < 16; m++) acc[m] -= l * Tj[m];
            }
            memcpy(Ti + m0, acc, sizeof acc);
        }
        for (int m = m0; m < n; m++) Ti[m] = 0.0f;
        for (int m = m0; m < i; m++)   /* the columns past the last block of 16 */
            for (int j = m; j < i; j++) Ti[m] -= bi * Ei[j] * T[(size_t)j * n + m];
        Ti[i] = 1.0f;
    }
}

/* The decays' gradient from a triangle of Z = A .* B (j <= i, or j < i when
 * strict): Z_ij enters gamma_i - gamma_j scaled by s_i (b's row i, or 1
 * when b is NULL), so dgamma_i += s_i sum_j Z_ij, dgamma_j -= s_i Z_ij.
 * rows, if not NULL, gets sum_j Z_ij. Eight partial sums a row. */
AL_CLONES static void decay_grad(float *dgam, float *rows, const float *A, const float *B,
                                 const float *b, int ldb, int n, int strict)
{
    for (int i = 0; i < n; i++) {
        const float *Ai = A + (size_t)i * n, *Bi = B + (size_t)i * n;
        float si = b ? b[(size_t)i * ldb] : 1.0f, p[8] = {0}, r;
        int m = strict ? i : i + 1, j = 0;
        for (; j + 8 <= m; j += 8)
            for (int l = 0; l < 8; l++) {
                float z = Ai[j + l] * Bi[j + l];
                p[l] += z;
                dgam[j + l] -= si * z;
            }
        r = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
        for (; j < m; j++) {
            float z = Ai[j] * Bi[j];
            r += z;
            dgam[j] -= si * z;
        }
        if (rows) rows[i] = r;
        dgam[i] += si * r;
    }
}

/* The chunk [t0, t0 + n): gamma and its decays, E, T, BV, BK, U, W, then
 * D = U - W S0^T, P and eK. Both passes start here. */
static void setup(const al_dn_seq *s, chunk *c, int t0, int n, const float *S0)
{
    const float *q = s->q + (size_t)t0 * s->ldk, *k = s->k + (size_t)t0 * s->ldk;
    const float *v = s->v + (size_t)t0 * s->ldv, *b = s->beta + (size_t)t0 * s->ldg;
    const float *g = s->g + (size_t)t0 * s->ldg;
    int dk = s->dk, dv = s->dv;
    float acc = 0;
    for (int i = 0; i < n; i++) c->gam[i] = acc += g[(size_t)i * s->ldg];
    decays(c, n);
    al_gemm_nt(c->E, n, k, s->ldk, k, s->ldk, n, n, dk, 1.0f, 0.0f);   /* E = K K^T, masked */
    al_gemm_nt(c->P, n, q, s->ldk, k, s->ldk, n, n, dk, 1.0f, 0.0f);   /* P = Q K^T, masked */
    mul_in(c->P, c->F, (size_t)n * n);
    mul_in(c->E, c->F, (size_t)n * n);
    for (int i = 0; i < n; i++) c->E[(size_t)i * n + i] = 0.0f;      /* strictly lower */
    unit_lower_inverse(c->T, c->E, b, s->ldg, n);
    for (int i = 0; i < n; i++) {
        float bi = b[(size_t)i * s->ldg], bg = bi * c->G[i], ei = c->e[i];
        for (int j = 0; j < dv; j++) c->BV[i * dv + j] = bi * v[(size_t)i * s->ldv + j];
        for (int j = 0; j < dk; j++) {
            c->BK[i * dk + j] = bg * k[(size_t)i * s->ldk + j];
            c->eK[i * dk + j] = ei * k[(size_t)i * s->ldk + j];
        }
    }
    al_gemm_nn(c->D, dv, c->T, n, c->BV, dv, n, dv, n, 1.0f, 0.0f);    /* U = T BV */
    al_gemm_nn(c->W, dk, c->T, n, c->BK, dk, n, dk, n, 1.0f, 0.0f);    /* W = T BK */
    al_gemm_nt(c->D, dv, c->W, dk, S0, dk, n, dv, dk, -1.0f, 1.0f);    /* D = U - W S0^T */
}

/* o of the chunk and the state after it. */
static void forward_chunk(const al_dn_seq *s, chunk *c, float *o, int t0, int n,
                          const float *S0, float *S1)
{
    int dk = s->dk, dv = s->dv;
    const float *q = s->q + (size_t)t0 * s->ldk;
    setup(s, c, t0, n, S0);
    al_gemm_nt(o, s->ldv, q, s->ldk, S0, dk, n, dv, dk, 1.0f, 0.0f);   /* O = G Q S0^T */
    for (int i = 0; i < n; i++) {
        float G = c->G[i];
        for (int j = 0; j < dv; j++) o[(size_t)i * s->ldv + j] *= G;
    }
    al_gemm_nn(o, s->ldv, c->P, n, c->D, dv, n, dv, n, 1.0f, 1.0f);     /*  + P D */
    float Gn = c->G[n - 1];
    for (size_t j = 0; j < (size_t)dv * dk; j++) S1[j] = Gn * S0[j];
    al_gemm_tn(S1, dk, c->D, dv, c->eK, dk, dv, dk, n, 1.0f, 1.0f);    /* S_n += D^T eK */
}

void al_dn_chunk_forward(const al_dn_seq *s, float *o, float *S, float *work)
{
    size_t SS = (size_t)s->dv * s->dk;
    chunk c = carve(work, s->C, s->dk, s->dv);
    memset(S, 0, SS * sizeof(float));
    for (int t0 = 0, ci = 0; t0 < s->T; t0 += s->C, ci++) {
        int n = s->T - t0 < s->C ? s->T - t0 : s->C;
        forward_chunk(s, &c, o + (size_t)t0 * s->ldv, t0, n, S + ci * SS, S + (ci + 1) * SS);
    }
}

/* ------------------------------------------------------------ backward */

/* S_n = G_n S0 + D^T eK: dS0 = G_n dS, dD = eK dS^T, dK = e (D dS),
 * and the decays' share through G_n and e. */
static void back_state(const al_dn_seq *s, chunk *c, float *dk_, const float *S0, int n)
{
    int dk = s->dk, dv = s->dv;
    const float *k = s->k;
    float Gn = c->G[n - 1], dot = 0;
    for (size_t j = 0; j < (size_t)dv * dk; j++) c->dS0[j] = Gn * c->dS[j], dot += S0[j] * c->dS[j];
    c->dgam[n - 1] += Gn * dot;
    al_gemm_nt(c->dD, dv, c->eK, dk, c->dS, dk, n, dv, dk, 1.0f, 0.0f);
    al_gemm_nn(c->XK, dk, c->D, dv, c->dS, dk, n, dk, dv, 1.0f, 0.0f);  /* D dS */
    for (int i = 0; i < n; i++) {
        float e = c->e[i], de = 0;
        for (int j = 0; j < dk; j++) {
            de += c->XK[i * dk + j] * k[(size_t)i * s->ldk + j];
            dk_[(size_t)i * s->ldk + j] += e * c->XK[i * dk + j];
        }
        c->dgam[n - 1] += de * e;
        c->dgam[i] -= de * e;
    }
}

/* O = G Q S0^T + P D: dQ, dK (added), dD (added), dS0 (added), dgamma. */
static void back_output(const al_dn_seq *s, chunk *c, float *dq, float *dk_, const float *dout,
                        const float *S0, int n)
{
    int dk = s->dk, dv = s->dv;
    const float *q = s->q, *k = s->k;
    al_gemm_nn(dq, s->ldk, dout, s->ldv, S0, dk, n, dk, dv, 1.0f, 0.0f);   /* dO S0 */
    for (int i = 0; i < n; i++) {
        float G = c->G[i], dot = 0;
        for (int j = 0; j < dk; j++) {
            float *d = dq + (size_t)i * s->ldk + j;
            dot += *d * q[(size_t)i * s->ldk + j];
            *d *= G;
        }
        c->dgam[i] += G * dot;
        for (int j = 0; j < dv; j++) c->GdO[i * dv + j] = G * dout[(size_t)i * s->ldv + j];
    }
    al_gemm_tn(c->dS0, dk, c->GdO, dv, q, s->ldk, dv, dk, n, 1.0f, 1.0f);
    al_gemm_nt(c->dP, n, dout, s->ldv, c->D, dv, n, n, dv, 1.0f, 0.0f);  /* dP = dO D^T */
    al_gemm_tn(c->dD, dv, c->P, n, dout, s->ldv, n, dv, n, 1.0f, 1.0f);  /* dD += P^T dO */
    decay_grad(c->dgam, NULL, c->dP, c->P, NULL, 0, n, 0);   /* P_ij = F_ij q_i.k_j */
    mul_in(c->dP, c->F, (size_t)n * n);                      /* zero above the diagonal */
    al_gemm_nn(dq, s->ldk, c->dP, n, k, s->ldk, n, dk, n, 1.0f, 1.0f);
    al_gemm_tn(dk_, s->ldk, c->dP, n, q, s->ldk, n, dk, n, 1.0f, 1.0f);
}

/* D = U - W S0^T, U = T BV, W = T BK: dV, dbeta, dK (added), dT in c->dT. */
static void back_solve(const al_dn_seq *s, chunk *c, float *dk_, float *dv_, float *db,
                       const float *S0, int n)
{
    int dk = s->dk, dv = s->dv;
    const float *k = s->k, *v = s->v, *b = s->beta;
    al_gemm_nn(c->dW, dk, c->dD, dv, S0, dk, n, dk, dv, -1.0f, 0.0f);   /* dW = -dD S0 */
    al_gemm_tn(c->dS0, dk, c->dD, dv, c->W, dk, dv, dk, n, -1.0f, 1.0f);
    al_gemm_nt(c->dT, n, c->dD, dv, c->BV, dv, n, n, dv, 1.0f, 0.0f);   /* dT = dU BV^T */
    al_gemm_nt(c->dT, n, c->dW, dk, c->BK, dk, n, n, dk, 1.0f, 1.0f);   /*    + dW BK^T */
    al_gemm_tn(c->dBV, dv, c->T, n, c->dD, dv, n, dv, n, 1.0f, 0.0f);   /* dBV = T^T dU */
    al_gemm_tn(c->dBK, dk, c->T, n, c->dW, dk, n, dk, n, 1.0f, 0.0f);   /* dBK = T^T dW */
    for (int i = 0; i < n; i++) {
        float bi = b[(size_t)i * s->ldg], G = c->G[i], dbv = 0, dbk = 0;
        for (int j = 0; j < dv; j++) {
            dv_[(size_t)i * s->ldv + j] = bi * c->dBV[i * dv + j];
            dbv += c->dBV[i * dv + j] * v[(size_t)i * s->ldv + j];
        }
        for (int j = 0; j < dk; j++) {
            dk_[(size_t)i * s->ldk + j] += bi * G * c->dBK[i * dk + j];
            dbk += c->dBK[i * dk + j] * k[(size_t)i * s->ldk + j];
        }
        db[(size_t)i * s->ldg] = dbv + G * dbk;
        c->dgam[i] += bi * G * dbk;
    }
}

/* T = (I + L)^-1: dL = -T^T dT T^T (strictly lower); L_ij = b_i E_ij. */
static void back_inverse(const al_dn_seq *s, chunk *c, float *dk_, float *db, int n)
{
    int dk = s->dk;
    const float *k = s->k, *b = s->beta;
    al_gemm_tn(c->X, n, c->T, n, c->dT, n, n, n, n, 1.0f, 0.0f);        /* T^T dT */
    al_gemm_nt(c->dP, n, c->X, n, c->T, n, n, n, n, -1.0f, 0.0f);       /* dL, in dP */
    /* L_ij = b_i E_ij, E_ij = F_ij k_i.k_j: dbeta_i += sum_j dL_ij E_ij, the decays
     * through b_i E_ij, and dE (in dP) = b_i F_ij dL_ij below the diagonal. */
    decay_grad(c->dgam, c->X, c->dP, c->E, b, s->ldg, n, 1);
    mul_in(c->dP, c->F, (size_t)n * n);
    for (int i = 0; i < n; i++) {
        float bi = b[(size_t)i * s->ldg], *dPi = c->dP + (size_t)i * n;
        db[(size_t)i * s->ldg] += c->X[i];
        for (int j = 0; j < i; j++) dPi[j] *= bi;
        dPi[i] = 0.0f;
    }
    /* E = K K^T masked: dK += dE K + dE^T K */
    al_gemm_nn(dk_, s->ldk, c->dP, n, k, s->ldk, n, dk, n, 1.0f, 1.0f);
    al_gemm_tn(dk_, s->ldk, c->dP, n, k, s->ldk, n, dk, n, 1.0f, 1.0f);
}

static void backward_chunk(const al_dn_seq *s, chunk *c, float *dq, float *dk_, float *dv_,
                           float *db, float *dg, const float *dout, const float *S0, int t0,
                           int n)
{
    al_dn_seq at = *s;   /* the chunk's rows */
    at.q += (size_t)t0 * s->ldk, at.k += (size_t)t0 * s->ldk, at.v += (size_t)t0 * s->ldv;
    at.beta += (size_t)t0 * s->ldg, at.g += (size_t)t0 * s->ldg;
    setup(s, c, t0, n, S0);
    for (int i = 0; i < n; i++) memset(dk_ + (size_t)i * s->ldk, 0, s->dk * sizeof(float));
    memset(c->dgam, 0, (size_t)n * sizeof(float));
    back_state(&at, c, dk_, S0, n);
    back_output(&at, c, dq, dk_, dout, S0, n);
    back_solve(&at, c, dk_, dv_, db, S0, n);
    back_inverse(&at, c, dk_, db, n);
    float acc = 0;   /* gamma = cumsum(g): dg_j = sum_{i >= j} dgamma_i */
    for (int i = n - 1; i >= 0; i--) dg[(size_t)i * s->ldg] = acc += c->dgam[i];
}

void al_dn_chunk_backward(const al_dn_seq *s, float *dq, float *dk, float *dv, float *dbeta,
                          float *dg, const float *dout, const float *S, float *work)
{
    size_t SS = (size_t)s->dv * s->dk;
    chunk c = carve(work, s->C, s->dk, s->dv);
    memset(c.dS, 0, SS * sizeof(float));   /* the final state feeds no loss */
    for (int ci = al_dn_chunks(s->T, s->C) - 1; ci >= 0; ci--) {
        int t0 = ci * s->C, n = s->T - t0 < s->C ? s->T - t0 : s->C;
        backward_chunk(s, &c, dq + (size_t)t0 * s->ldk, dk + (size_t)t0 * s->ldk,
                       dv + (size_t)t0 * s->ldv, dbeta + (size_t)t0 * s->ldg,
                       dg + (size_t)t0 * s->ldg, dout + (size_t)t0 * s->ldv, S + ci * SS, t0, n);
        memcpy(c.dS, c.dS0, SS * sizeof(float));
    }
}

/* ------------------------------------------------------------ weights */

/* The sequence as one chunk from S = 0 (s->C >= s->T): O = P D and D = T
 * diag(b) V, so output i is sum_j M_ij v_j with M = P T diag(b). */
void al_dn_weights(const al_dn_seq *s, float *M, float *work)
{
    int n = s->T;
    chunk c = carve(work, s->C, s->dk, s->dv);
    memset(c.dS, 0, (size_t)s->dv * s->dk * sizeof(float));   /* S0 = 0 */
    setup(s, &c, 0, n, c.dS);
    al_gemm_nn(M, n, c.P, n, c.T, n, n, n, n, 1.0f, 0.0f);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) M[(size_t)i * n + j] *= s->beta[(size_t)j * s->ldg];
}

/* ------------------------------------------------------------ one token */

void al_dn_step(float *S, float *o, float *tmp, const float *q, const float *k, const float *v,
                float beta, float a, int dk, int dv)
{
    /* S = a S + b (v - a S k) k^T */
    for (int i = 0; i < dv; i++) {
        float sk = 0;
        for (int j = 0; j < dk; j++) sk += S[(size_t)i * dk + j] * k[j];
        tmp[i] = beta * (v[i] - a * sk);
    }
    for (int i = 0; i < dv; i++) {
        float *Si = S + (size_t)i * dk, oi = 0;
        for (int j = 0; j < dk; j++) Si[j] = a * Si[j] + tmp[i] * k[j], oi += Si[j] * q[j];
        o[i] = oi;
    }
}
