/*
 * test_attention.c - attention probabilities and head statistics
 * (src/model/attention.c): every variant's rows are distributions, masked
 * entries are zero, swa with a window covering the sequence shows mha's
 * maps, and a hand-built model with a planted previous-token head and a
 * planted induction head scores above 0.9 on those statistics while its
 * uniform heads score near 0 and match the hand formulas exactly. (Parity
 * with PyTorch's probabilities: test_torch.c.)
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "al_attention.h"
#include "al_plugin.h"
#include "al_registry.h"
#include "al_test.h"
#include "al_test_model.h"

#define T_SEQ 12

static void load_swa(void)
{
    al_err e;
    ck_assert_msg(al_plugin_load(AL_SWA_PLUGIN, &e) == 0, "%s", e.msg);
}

/* A tiny model of variant v (optional setting opt at 4 when >= 0) with its
 * attention weights scaled up, so the maps are far from uniform. */
static void peaked_model(al_model *m, const al_variant *v, int causal, int opt)
{
    al_model_config c;
    al_err e;
    ck_assert_int_eq(al_test_tiny_config(&c, v, 2, 32, 4, 8, 16, 64), 0);
    c.causal = causal;
    if (opt >= 0) c.attn_set[opt] = 4;
    ck_assert_msg(al_model_init(m, &c, &e) == 0, "%s", e.msg);
    al_model_init_weights(m, 7);
    for (int i = 0; i < m->n_tensors; i++)
        if (strstr(m->tensors[i].name, ".attn.") && m->tensors[i].init == AL_INIT_NORMAL)
            for (size_t j = 0; j < m->tensors[i].numel; j++)
                m->params[m->tensors[i].offset + j] *= 40.0f;
}

static const int *tokens12(void)
{
    static const int t[T_SEQ] = {3, 17, 42, 5, 5, 63, 0, 9, 17, 42, 8, 1};
    return t;
}

/* Row sums, non-negativity, the mask; returns the largest weight above the
 * diagonal. */
static double check_rows(const char *name, const float *P, int H, int T, int causal)
{
    double above = 0;
    for (int h = 0; h < H; h++)
        for (int i = 0; i < T; i++) {
            double sum = 0;
            for (int j = 0; j < T; j++) {
                float p = P[((size_t)h * T + i) * T + j];
                ck_assert_msg(p >= 0.0f && p <= 1.0f + 1e-6f, "%s h%d (%d,%d) = %g", name, h, i, j,
                              p);
                if (j > i) {
                    if (causal) ck_assert_msg(p == 0.0f, "%s: masked (%d,%d) = %g", name, i, j, p);
                    above = p > above ? p : above;
                }
                sum += p;
            }
            ck_assert_msg(fabs(sum - 1.0) < 1e-5, "%s h%d row %d sums to %.7f", name, h, i, sum);
        }
    return above;
}

int al_test_variant_probs(const al_variant *v)
{
    int checked = 0;
    for (int opt = -1; opt < al_variant_n_settings(v); opt++) {
        if (opt >= 0 && v->settings[opt].required) continue;
        for (int causal = 1; causal >= 0; causal--) {
            al_model m;
            al_err e;
            peaked_model(&m, v, causal, opt);
            int H = m.cfg.n_head, T = T_SEQ;
            float *P = malloc((size_t)H * T * T * sizeof *P);
            ck_assert_msg(al_attention_forward(&m, tokens12(), T, &e) == 0, "%s", e.msg);
            for (int l = 0; l < m.cfg.n_layer; l++) {
                al_attention_layer(&m, l, T, P);
                double above = check_rows(v->name, P, H, T, causal);
                if (!causal) ck_assert_msg(above > 0.01, "%s unmasked: nothing above the "
                                           "diagonal (%g)", v->name, above);
            }
            free(P);
            al_model_free(&m);
            checked++;
        }
    }
    return checked;
}

/* Every registered variant (built-in and the swa plugin) and each optional
 * setting it accepts, masked and unmasked. */
START_TEST(every_variant_gives_distributions_zero_above_the_diagonal_under_the_mask)
{
    load_swa();
    int checked = 0;
    for (int i = 0; i < al_variant_count(); i++)
        if (al_variant_at(i)->pictures && !al_variant_at(i)->pictures->weights)
            checked += al_test_variant_probs(al_variant_at(i));   /* weights: test_linear.c */
    /* mha, mqa, gqa, mla, mla+d_q_latent, swa: each masked and unmasked */
    ck_assert_int_ge(checked, 12);
}
END_TEST

/* The maps are those of the forward pass: a different token changes every
 * later row and no earlier one (causal), and T = 1 gives [1]. */
START_TEST(maps_follow_the_tokens_causally)
{
    al_model m;
    al_err e;
    peaked_model(&m, al_variant_find("mla"), 1, -1);
    int H = m.cfg.n_head, T = T_SEQ, tok[T_SEQ];
    memcpy(tok, tokens12(), sizeof tok);
    float *A = malloc((size_t)H * T * T * sizeof *A), *B = malloc((size_t)H * T * T * sizeof *B);
    ck_assert_int_eq(al_attention_forward(&m, tok, T, &e), 0);
    al_attention_layer(&m, 1, T, A);
    tok[6] = 33;
    ck_assert_int_eq(al_attention_forward(&m, tok, T, &e), 0);
    al_attention_layer(&m, 1, T, B);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < T; i++) {
            double d = 0;
            for (int j = 0; j < T; j++)
                d += fabs(A[((size_t)h * T + i) * T + j] - B[((size_t)h * T + i) * T + j]);
            if (i < 6) ck_assert_msg(d == 0.0, "row %d before the change moved by %g", i, d);
            else ck_assert_msg(d > 1e-6, "head %d row %d after the change did not move (%g)", h, i, d);
        }
    ck_assert_int_eq(al_attention_forward(&m, tok, 1, &e), 0);
    al_attention_layer(&m, 0, 1, A);
    for (int h = 0; h < H; h++) ck_assert_float_eq(A[h], 1.0f);
    free(A), free(B);
    al_model_free(&m);
}
END_TEST

/* Every layer of m with window w: its settings, and its context made again
 * from them (a variant reads its settings once, in init). */
static void set_window(al_model *m, int w)
{
    for (int l = 0; l < m->cfg.n_layer; l++) {
        al_layer *L = &m->layers[l];
        L->ashape.set[0] = w;
        L->attn->fini(L->ctx);
        L->ctx = al_test_ctx(L->attn, &L->ashape);
    }
}

/* swa computes mha's function when its window covers the sequence (same
 * weights): its maps must equal mha's; a window of 3 keeps 3 keys. */
START_TEST(swa_with_a_covering_window_shows_mhas_maps)
{
    load_swa();
    const al_variant *swa = al_variant_find("swa");
    ck_assert_ptr_nonnull(swa);
    al_model a, b;
    al_err e;
    peaked_model(&a, al_variant_find("mha"), 1, -1);
    peaked_model(&b, swa, 1, -1);   /* window 2, set below */
    set_window(&b, T_SEQ);
    ck_assert_uint_eq(a.n_params, b.n_params);
    memcpy(b.params, a.params, a.n_params * sizeof(float));
    int H = a.cfg.n_head, T = T_SEQ;
    float *A = malloc((size_t)H * T * T * sizeof *A), *B = malloc((size_t)H * T * T * sizeof *B);
    ck_assert_int_eq(al_attention_forward(&a, tokens12(), T, &e), 0);
    ck_assert_int_eq(al_attention_forward(&b, tokens12(), T, &e), 0);
    for (int l = 0; l < 2; l++) {
        al_attention_layer(&a, l, T, A);
        al_attention_layer(&b, l, T, B);
        for (size_t k = 0; k < (size_t)H * T * T; k++)
            ck_assert_msg(fabsf(A[k] - B[k]) < 1e-5f, "layer %d entry %zu: mha %g swa %g", l, k,
                          A[k], B[k]);
    }
    set_window(&b, 3);
    ck_assert_int_eq(al_attention_forward(&b, tokens12(), T, &e), 0);
    al_attention_layer(&b, 1, T, B);
    check_rows("swa window 3", B, H, T, 1);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < T; i++)
            for (int j = 0; j + 3 <= i; j++) ck_assert_float_eq(B[((size_t)h * T + i) * T + j], 0);
    free(A), free(B);
    al_model_free(&a);
    al_model_free(&b);
}
END_TEST

START_TEST(a_variant_without_probs_is_refused_by_name)
{
    al_variant v = *al_variant_find("mha");
    v.name = "mha_noprobs";
    v.pictures = NULL;
    al_model m;
    al_err e;
    peaked_model(&m, &v, 1, -1);
    ck_assert_int_ne(al_attention_supported(&m, &e), 0);
    ck_assert_msg(strstr(e.msg, "variant 'mha_noprobs' cannot show its attention") &&
                  strstr(e.msg, "'pictures'"), "%s", e.msg);
    ck_assert_int_ne(al_attention_forward(&m, tokens12(), T_SEQ, &e), 0);
    al_model_free(&m);
}
END_TEST

START_TEST(tokens_outside_the_vocabulary_are_refused)
{
    al_model m;
    al_err e;
    peaked_model(&m, al_variant_find("mha"), 1, -1);
    int t[3] = {1, 64, 2};
    ck_assert_int_ne(al_attention_forward(&m, t, 3, &e), 0);
    ck_assert_msg(strstr(e.msg, "token 64 at position 1 is outside"), "%s", e.msg);
    al_model_free(&m);
}
END_TEST

/* ------------------------------------------------------------ statistics */

START_TEST(map_statistics_follow_their_definitions)
{
    /* T = 3, one head: rows [1], [.25 .75], [.5 .2 .3] */
    const float P[9] = {1, 0, 0, 0.25f, 0.75f, 0, 0.5f, 0.2f, 0.3f};
    al_head_stats s = {0};
    al_head_map_stats(P, 3, &s);
    double ent1 = -(0.25 * log(0.25) + 0.75 * log(0.75));
    double ent2 = -(0.5 * log(0.5) + 0.2 * log(0.2) + 0.3 * log(0.3));
    ck_assert_double_eq_tol(s.entropy, (ent1 + ent2) / 2, 1e-7);
    ck_assert_double_eq_tol(s.distance, (0.25 * 1 + (0.5 * 2 + 0.2 * 1)) / 2, 1e-7);
    ck_assert_double_eq_tol(s.first, (0.25 + 0.5) / 2, 1e-7);
    ck_assert_double_eq_tol(s.prev, (0.25 + 0.2) / 2, 1e-7);
    /* induction, L = 2: queries 2, 3 on keys 1, 2 */
    const float Q[16] = {1, 0, 0, 0, .5f, .5f, 0, 0, .1f, .6f, .3f, 0, .1f, .1f, .7f, .1f};
    ck_assert_double_eq_tol(al_head_induction_score(Q, 2), (0.6 + 0.7) / 2, 1e-7);
}
END_TEST

START_TEST(induction_sequences_repeat_distinct_tokens_from_the_alphabet)
{
    int alpha[256], seq[64];
    al_err e;
    ck_assert_int_eq(al_induction_alphabet(256, NULL, alpha, 256, &e), 52);
    ck_assert_int_eq(alpha[0], 'A');
    ck_assert_int_eq(alpha[51], 'z');
    ck_assert_int_eq(al_induction_alphabet(100, NULL, alpha, 256, &e), 100);
    ck_assert_int_eq(al_induction_alphabet(256, "abcab", alpha, 256, &e), 3);
    ck_assert_int_eq(al_induction_alphabet(256, "aaa", alpha, 256, &e), -1);
    ck_assert_msg(strstr(e.msg, "at least 2 distinct"), "%s", e.msg);
    ck_assert_int_eq(al_induction_alphabet(64, "az", alpha, 256, &e), -1);
    ck_assert_msg(strstr(e.msg, "0x61 is outside"), "%s", e.msg);
    ck_assert_int_eq(al_induction_len(64, 52), 32);
    ck_assert_int_eq(al_induction_len(256, 52), 52);
    int k = al_induction_alphabet(256, NULL, alpha, 256, &e), L = 32;
    for (int idx = 0; idx < 3; idx++) {
        al_induction_tokens(alpha, k, L, idx, seq);
        for (int i = 0; i < L; i++) {
            ck_assert_int_eq(seq[i], seq[L + i]);
            ck_assert(isalpha(seq[i]));
            for (int j = 0; j < i; j++) ck_assert_int_ne(seq[i], seq[j]);
        }
    }
    int again[64];
    al_induction_tokens(alpha, k, L, 1, again);
    ck_assert(memcmp(seq, again, sizeof again) != 0);   /* idx 2 vs idx 1 differ */
    al_induction_tokens(alpha, k, L, 2, again);
    ck_assert(memcmp(seq, again, sizeof again) == 0);   /* and each is reproducible */
}
END_TEST

/* ---- A hand-built model: 2 layers of mha, 2 heads of 64, vocabulary 16,
 * d_model 48, MLP weights zero. Residual layout: dim 0 a constant 1,
 * dims 1..16 the token (one-hot), dims 17..32 the previous token.
 *   layer 0 head 0, previous-token head: q and k read only the constant;
 *     in RoPE pairs 0..15 the query is the key turned back by one
 *     position's angle, so q_i.k_j = k^2 sum_a cos((i-j-1) theta_a), largest
 *     at j = i-1; v copies the token, wo writes it into dims 17..32.
 *   layer 1 head 0, induction head: q is the token, k the previous token,
 *     both in RoPE pairs 24..31 whose angles stay below 0.07 rad over 64
 *     positions, so the score is their match: query i attends to the
 *     position after the earlier occurrence of its token.
 *   head 1 of both layers: all zero, uniform attention. */
#define PL_V 16
#define PL_D 48
#define PL_DH 64

static void set(al_model *m, const char *name, int r, int c, float v)
{
    const al_tensor *t = al_model_tensor(m, name);
    ck_assert_ptr_nonnull(t);
    m->params[t->offset + (size_t)r * t->shape[1] + c] = v;
}

void al_test_planted_model(al_model *m)
{
    al_model_config c;
    al_err e;
    ck_assert_int_eq(al_test_tiny_config(&c, al_variant_find("mha"), 2, PL_D, 2, PL_DH, 64,
                                         PL_V), 0);
    ck_assert_int_eq(al_model_init(m, &c, &e), 0);   /* zeros; norm weights below */
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].ndim == 1)
            for (size_t j = 0; j < m->tensors[i].numel; j++)
                m->params[m->tensors[i].offset + j] = 1.0f;
    for (int t = 0; t < PL_V; t++) {
        set(m, "tok_emb.weight", t, 0, 1.0f);
        set(m, "tok_emb.weight", t, 1 + t, 1.0f);
    }
    /* layer 0: the normed input is x * sqrt(D / 2) */
    float in0 = sqrtf(PL_D / 2.0f), kappa = 10.0f / in0;
    for (int a = 0; a < 16; a++) {
        double th = pow(c.rope_base, -2.0 * a / PL_DH);
        set(m, "blocks.0.attn.wk.weight", a, 0, kappa);
        set(m, "blocks.0.attn.wq.weight", a, 0, kappa * (float)cos(th));
        set(m, "blocks.0.attn.wq.weight", a + PL_DH / 2, 0, -kappa * (float)sin(th));
    }
    for (int d = 0; d < PL_V; d++) {
        set(m, "blocks.0.attn.wv.weight", d, 1 + d, 1.0f);
        set(m, "blocks.0.attn.wo.weight", 1 + PL_V + d, d, 1.0f / in0);
    }
    /* layer 1: the normed input is x * sqrt(D / 3) */
    float beta = 11.5f / sqrtf(PL_D / 3.0f);
    for (int t = 0; t < PL_V; t++) {
        int dim = t < 8 ? 24 + t : 24 + PL_DH / 2 + (t - 8);
        set(m, "blocks.1.attn.wq.weight", dim, 1 + t, beta);
        set(m, "blocks.1.attn.wk.weight", dim, 1 + PL_V + t, beta);
    }
}

START_TEST(planted_previous_token_and_induction_heads_score_above_0_9)
{
    al_model m;
    al_err e;
    al_test_planted_model(&m);
    int T = 64, tok[64];
    al_rng r;
    al_rng_seed(&r, 5);
    for (int i = 0; i < T; i++) tok[i] = (int)al_rng_below(&r, PL_V);
    al_head_stats s[4];
    ck_assert_msg(al_head_stats_model(&m, tok, 1, T, NULL, s, &e) == 0, "%s", e.msg);
    /* s[layer * 2 + head] */
    ck_assert_msg(s[0].prev > 0.9, "planted previous-token head: prev %.4f", s[0].prev);
    ck_assert_msg(s[0].induction < 0.1, "previous-token head: induction %.4f", s[0].induction);
    ck_assert_msg(s[2].induction > 0.9, "planted induction head: induction %.4f", s[2].induction);
    ck_assert_msg(s[2].prev < 0.3, "induction head: prev %.4f", s[2].prev);
    /* the uniform heads: near 0, and exactly the hand formulas over queries 1..T-1 */
    double ent = 0, dist = 0, first = 0, ind = 0;
    for (int i = 1; i < T; i++) ent += log(i + 1.0), dist += i / 2.0, first += 1.0 / (i + 1);
    for (int i = 16; i < 32; i++) ind += 1.0 / (i + 1);   /* L = min(64 / 2, 16 tokens) */
    for (int k = 1; k < 4; k += 2) {
        ck_assert_msg(s[k].prev < 0.1 && s[k].induction < 0.1, "uniform head %d: prev %.4f "
                      "induction %.4f", k, s[k].prev, s[k].induction);
        ck_assert_double_eq_tol(s[k].entropy, ent / (T - 1), 1e-5);
        ck_assert_double_eq_tol(s[k].distance, dist / (T - 1), 1e-4);
        ck_assert_double_eq_tol(s[k].first, first / (T - 1), 1e-6);
        ck_assert_double_eq_tol(s[k].prev, first / (T - 1), 1e-6);
        ck_assert_double_eq_tol(s[k].induction, ind / 16, 1e-6);
    }
    /* a sharp head has low entropy; the previous-token head looks 1 back */
    ck_assert_double_lt(s[0].entropy, 0.1);
    ck_assert_double_eq_tol(s[0].distance, 1.0, 0.05);
    al_model_free(&m);
}
END_TEST

Suite *attention_suite(void)
{
    Suite *s = suite_create("attention");
    TCase *tc = tcase_create("attention");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, every_variant_gives_distributions_zero_above_the_diagonal_under_the_mask);
    tcase_add_test(tc, maps_follow_the_tokens_causally);
    tcase_add_test(tc, swa_with_a_covering_window_shows_mhas_maps);
    tcase_add_test(tc, a_variant_without_probs_is_refused_by_name);
    tcase_add_test(tc, tokens_outside_the_vocabulary_are_refused);
    tcase_add_test(tc, map_statistics_follow_their_definitions);
    tcase_add_test(tc, induction_sequences_repeat_distinct_tokens_from_the_alphabet);
    tcase_add_test(tc, planted_previous_token_and_induction_heads_score_above_0_9);
    suite_add_tcase(s, tc);
    return s;
}
