/*
 * eval.c - scoring a model on the held-out splits: the validation loss the
 * training loop, convert and the report's causal-mask section read, and
 * the test loss scored once at the end of a run. See al_eval.h.
 */
#include "al_eval.h"

#include <math.h>
#include <stdlib.h>

#include "al_data.h"
#include "al_model.h"

static double batch_accuracy(const float *logits, const int *tgt, const float *w,
                             int BT, int V, double *count)
{
    double hit = 0;
    for (int i = 0; i < BT; i++) {
        if (w && w[i] == 0.0f) continue;
        const float *row = logits + (size_t)i * V;
        int best = 0;
        for (int j = 1; j < V; j++)
            if (row[j] > row[best]) best = j;
        hit += best == tgt[i];
        *count += 1;
    }
    return hit;
}

/* A fixed set (a task's val or test examples, a text's test windows) in
 * order, in batches of at most B; the loss is the mean over every scored
 * position (the answer positions of task data, every byte of text). */
static double eval_fixed(al_model *m, al_data *d, int split, int B, int *in, int *tgt,
                         float *w, double *hits, double *count)
{
    int T = m->cfg.seq_len, V = m->cfg.vocab_size;
    long n = d->n_examples[split];
    double sum = 0, wsum = 0;
    for (long first = 0; first < n; first += B) {
        int b = n - first < B ? (int)(n - first) : B;
        al_data_examples(d, split, first, b, T, in, tgt, w);
        double bw = 0;
        for (int i = 0; i < b * T; i++) bw += d->has_weights ? w[i] : 1.0;
        sum += al_model_forward(m, in, tgt, d->has_weights ? w : NULL, b, T) * bw;
        wsum += bw;
        *hits += batch_accuracy(m->logits, tgt, d->has_weights ? w : NULL, b * T, V, count);
    }
    return wsum > 0 ? sum / wsum : 0.0;
}

double al_evaluate(al_model *m, al_data *d, const al_train_config *t, double *accuracy)
{
    int B = t->batch_size, T = m->cfg.seq_len, BT = B * T, V = m->cfg.vocab_size;
    int *in = al_malloc(BT * sizeof(int)), *tgt = al_malloc(BT * sizeof(int));
    float *w = al_malloc(BT * sizeof(float));
    al_rng rng;
    al_rng_seed(&rng, t->eval_seed);
    double sum = 0, hits = 0, count = 0;
    if (d->n_examples[AL_SPLIT_VAL] > 0) {
        sum = eval_fixed(m, d, AL_SPLIT_VAL, B, in, tgt, w, &hits, &count);
    } else {
        for (int i = 0; i < t->eval_batches; i++) {
            al_data_batch(d, AL_SPLIT_VAL, &rng, B, T, in, tgt, w);
            const float *wp = d->has_weights ? w : NULL;
            sum += al_model_forward(m, in, tgt, wp, B, T);
            hits += batch_accuracy(m->logits, tgt, wp, BT, V, &count);
        }
        sum /= t->eval_batches;
    }
    if (accuracy) *accuracy = d->has_weights ? (count > 0 ? hits / count : 0.0) : NAN;
    free(in);
    free(tgt);
    free(w);
    return sum;
}

double al_evaluate_test(al_model *m, al_data *d, int B, double *accuracy)
{
    if (accuracy) *accuracy = NAN;
    if (d->n_examples[AL_SPLIT_TEST] <= 0) return NAN;
    int BT = B * m->cfg.seq_len;
    int *in = al_malloc(BT * sizeof(int)), *tgt = al_malloc(BT * sizeof(int));
    float *w = al_malloc(BT * sizeof(float));
    double hits = 0, count = 0;
    double loss = eval_fixed(m, d, AL_SPLIT_TEST, B, in, tgt, w, &hits, &count);
    if (accuracy && d->has_weights) *accuracy = count > 0 ? hits / count : 0.0;
    free(in), free(tgt), free(w);
    return loss;
}
