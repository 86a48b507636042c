/*
 * attention.c - attention probabilities of a model over a sequence, and
 * the per-head statistics defined in al_attention.h.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "al_attention.h"

/* ------------------------------------------------------------ probabilities */

int al_attention_supported(const al_model *m, al_err *e)
{
    for (int l = 0; l < m->cfg.n_layer; l++) {
        const al_variant *v = m->layers[l].attn;
        if (!v->pictures)
            return al_errf(e, "variant '%s' cannot show its attention: its table has no "
                           "'pictures' sub-table (attnlab_variant.h)", v->name);
        if (m->layers[l].kv_src != l && !v->pictures->shared)
            return al_errf(e, "variant '%s' cannot show the attention of a layer that shares "
                           "K/V (model.kv_share %d): its pictures do not take a source "
                           "('pictures.shared' is 0)", v->name, m->cfg.kv_share);
    }
    return 0;
}

int al_attention_forward(al_model *m, const int *tokens, int T, al_err *e)
{
    if (al_attention_supported(m, e)) return -1;
    if (T < 1) return al_errf(e, "attention: an empty sequence");
    for (int i = 0; i < T; i++)
        if (tokens[i] < 0 || tokens[i] >= m->cfg.vocab_size)
            return al_errf(e, "attention: token %d at position %d is outside the model's "
                           "vocabulary (0..%d)", tokens[i], i, m->cfg.vocab_size - 1);
    if (al_model_reserve(m, 1, T, e)) return -1;
    al_model_forward(m, tokens, NULL, NULL, 1, T);
    return 0;
}

void al_attention_layer(const al_model *m, int layer, int T, float *P)
{
    AL_ASSERT(m->fwd_B == 1 && m->fwd_T == T && layer >= 0 && layer < m->cfg.n_layer);
    const al_layer *L = &m->layers[layer];
    /* a kv_share consumer's come with the producer's keys */
    const float *src = L->kv_src != layer ? m->layers[L->kv_src].attn_act : NULL;
    L->attn->pictures->probs(L->ctx, P, L->attn_act, src, L->attn_p, T);
}

/* ------------------------------------------------------------ statistics */

void al_head_map_stats(const float *P, int T, al_head_stats *hs)
{
    double ent = 0, dist = 0, first = 0, prev = 0;
    for (int i = 1; i < T; i++) {
        const float *row = P + (size_t)i * T;
        for (int j = 0; j < T; j++) {
            double p = row[j];
            if (p > 0) ent -= p * log(p);
            dist += p * abs(i - j);
        }
        first += row[0];
        prev += row[i - 1];
    }
    int n = T > 1 ? T - 1 : 1;
    hs->entropy = ent / n;
    hs->distance = dist / n;
    hs->first = first / n;
    hs->prev = prev / n;
}

double al_head_induction_score(const float *P, int L)
{
    int T = 2 * L;
    double s = 0;
    for (int i = L; i < T; i++) s += P[(size_t)i * T + (i - L + 1)];
    return L > 0 ? s / L : 0.0;
}

int al_induction_alphabet(int vocab, const char *alphabet, int *out, int n, al_err *e)
{
    int k = 0;
    char *seen = al_calloc((size_t)vocab, 1);
    if (alphabet) {
        for (const unsigned char *p = (const unsigned char *)alphabet; *p && k < n; p++) {
            if (*p >= vocab) {
                free(seen);
                return al_errf(e, "induction alphabet: byte 0x%02x is outside the model's "
                               "vocabulary (0..%d)", *p, vocab - 1);
            }
            if (!seen[*p]++) out[k++] = *p;
        }
    } else if (vocab == 256) {
        for (int c = 0; c < 256 && k < n; c++)
            if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) out[k++] = c;
    } else {
        for (int c = 0; c < vocab && k < n; c++) out[k++] = c;
    }
    free(seen);
    if (k < 2) return al_errf(e, "induction alphabet: needs at least 2 distinct tokens, has %d", k);
    return k;
}

int al_induction_len(int seq_len, int alphabet_size)
{
    int L = seq_len / 2;
    return L < alphabet_size ? L : alphabet_size;
}

void al_induction_tokens(const int *alphabet, int k, int L, int index, int *out)
{
    AL_ASSERT(L >= 1 && L <= k);
    int *pool = al_malloc((size_t)k * sizeof *pool);
    memcpy(pool, alphabet, (size_t)k * sizeof *pool);
    al_rng r;
    al_rng_seed(&r, (uint64_t)AL_INDUCTION_SEED * 1000003u + (uint64_t)index);
    for (int i = 0; i < L; i++) {   /* partial Fisher-Yates: L distinct tokens */
        int j = i + (int)al_rng_below(&r, (uint64_t)(k - i)), t = pool[i];
        pool[i] = pool[j];
        pool[j] = t;
        out[i] = out[L + i] = pool[i];
    }
    free(pool);
}

/* Adds the map statistics of every head of the last forward (T tokens),
 * weighted by w, into out. */
static void add_map_stats(const al_model *m, int T, float *P, double w, al_head_stats *out)
{
    int H = m->cfg.n_head;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        al_attention_layer(m, l, T, P);
        for (int h = 0; h < H; h++) {
            al_head_stats s;
            al_head_map_stats(P + (size_t)h * T * T, T, &s);
            al_head_stats *o = &out[l * H + h];
            o->entropy += w * s.entropy;
            o->distance += w * s.distance;
            o->first += w * s.first;
            o->prev += w * s.prev;
        }
    }
}

static void add_induction(const al_model *m, int L, float *P, double w, al_head_stats *out)
{
    int H = m->cfg.n_head;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        al_attention_layer(m, l, 2 * L, P);
        for (int h = 0; h < H; h++)
            out[l * H + h].induction += w * al_head_induction_score(P + (size_t)h * 4 * L * L, L);
    }
}

int al_attention_layer_weights(const al_model *m, int layer)
{
    return m->layers[layer].attn->pictures->weights;
}

/* A layer whose pictures are weights, not probabilities, has no entropy,
 * distance or scores: NaN. */
static void blank_weight_layers(const al_model *m, al_head_stats *out)
{
    int H = m->cfg.n_head;
    for (int l = 0; l < m->cfg.n_layer; l++)
        if (al_attention_layer_weights(m, l))
            for (int h = 0; h < H; h++)
                out[l * H + h] = (al_head_stats){NAN, NAN, NAN, NAN, NAN};
}

int al_head_stats_model(al_model *m, const int *tokens, int n_seq, int T, const char *alphabet,
                        al_head_stats *out, al_err *e)
{
    int V = m->cfg.vocab_size, *alpha = al_malloc((size_t)V * sizeof *alpha), rc = 0;
    int k = al_induction_alphabet(V, alphabet, alpha, V, e);
    int L = k > 0 ? al_induction_len(m->cfg.seq_len, k) : 0, Tmax = T > 2 * L ? T : 2 * L;
    if (k < 0 || L < 1) {
        free(alpha);
        return k < 0 ? -1 : al_errf(e, "induction test: seq_len %d is too short", m->cfg.seq_len);
    }
    memset(out, 0, (size_t)m->cfg.n_layer * m->cfg.n_head * sizeof *out);
    float *P = al_malloc((size_t)m->cfg.n_head * Tmax * Tmax * sizeof *P);
    int *seq = al_malloc((size_t)2 * L * sizeof *seq);
    for (int s = 0; s < n_seq && !rc; s++)
        if (!(rc = al_attention_forward(m, tokens + (size_t)s * T, T, e)))
            add_map_stats(m, T, P, 1.0 / n_seq, out);
    for (int s = 0; s < AL_INDUCTION_SEQS && !rc; s++) {
        al_induction_tokens(alpha, k, L, s, seq);
        if (!(rc = al_attention_forward(m, seq, 2 * L, e)))
            add_induction(m, L, P, 1.0 / AL_INDUCTION_SEQS, out);
    }
    if (!rc) blank_weight_layers(m, out);
    free(seq);
    free(P);
    free(alpha);
    return rc;
}
