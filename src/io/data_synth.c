/*
 * data_synth.c - synthetic recall tasks: "mqar" (multi-query associative
 * recall, Arora et al. 2023, "Zoology") and "induction" (a repeated
 * segment). See docs/data.md.
 *
 * Every example is a pure function of (data.seed, split, index): its own
 * RNG is seeded from those, so nothing is stored, the training set is
 * train_examples indices drawn at random, and the test set is walked in
 * order. The test stream has its own seed; a test example whose tokens
 * equal a training example's is skipped (found by hashing the whole
 * training set at open), so the two sets are disjoint by construction. The
 * validation set (what evaluation during training, and selection, see) is
 * drawn the same way from a third stream, skipping training and test
 * examples, so the test set is never looked at before the end of a run.
 *
 * Example layout (T = seq_len, tokens s[0..T], in = s[0..T), targets the
 * next token except at answers, which carry weight 1):
 *   mqar:      k1 v1 k2 v2 .. kP vP, then each key once more at an even
 *              offset 2g of the query region, g drawn without replacement
 *              with P(g) ~ (g + 1)^(power_a - 1); the target at a query is
 *              its value. Keys from 1 .. V/2 - 1, values from V/2 .. V - 1,
 *              both distinct within an example; every other token is
 *              uniform in 0 .. V - 1 (Zoology's random_non_queries).
 *   induction: uniform tokens with a segment of L = num_kv_pairs distinct
 *              tokens at a and again at b >= a + L; segment tokens occur
 *              nowhere else. Answers: the segment's tokens 2 .. L at its
 *              second occurrence (predicted from the token before).
 *
 * Easier training examples (data.min_kv_pairs, data.curriculum_steps): a
 * training batch may draw each example's P' (pairs, or segment length) from
 * [min_kv_pairs, cap], cap ramping from min_kv_pairs to num_kv_pairs over
 * the first curriculum_steps steps. Why: from scratch, 2-layer models sit
 * on the "some value from the context" plateau for thousands of steps once
 * there are 4 or more pairs, while 2 pairs teach the key-value binding in a
 * few hundred and it carries over (Zoology likewise trains on a mixture of
 * settings). The test set always asks num_kv_pairs.
 */
#include "al_data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MQAR, INDUCTION };

typedef struct synth {
    int kind;
    int V, T, P;               /* vocabulary, example length, pairs / segment length */
    int P_min;                 /* training examples draw their P' from [P_min, P] */
    long ramp;                 /* curriculum_steps: the upper end of that range ramps
                                  from P_min to P over the first ramp steps */
    int space;                 /* mqar: query slots (T - 2 P_min) / 2, the most any example has */
    double *pw;                /* mqar: (space) power-law weight of each slot, max 1 */
    uint64_t seed[AL_N_SPLITS]; /* per split */
    long *index[AL_N_SPLITS];  /* val, test: (n) stream index of each example */
    int *seg;                  /* induction: (P) scratch for the segment */
} synth;

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int uniform_int(al_rng *r, int lo, int hi) /* in [lo, hi) */
{
    return lo + (int)al_rng_below(r, (uint64_t)(hi - lo));
}

/* ------------------------------------------------------------ mqar */

/* A fresh value in [lo, hi) that differs from a[0], a[step], .. (n of them). */
static int draw_distinct(al_rng *r, int lo, int hi, const int *a, int n, int step)
{
    for (;;) {
        int x = uniform_int(r, lo, hi), seen = 0;
        for (int j = 0; j < n && !seen; j++) seen = a[j * step] == x;
        if (!seen) return x;
    }
}

/* A free query slot g with probability proportional to pw[g] among the free
 * ones (drawing without replacement). Exact, and it cannot stall however
 * skewed power_a makes the weights. */
static int draw_gap(const synth *s, al_rng *r, const int *query, int space)
{
    double total = 0;
    for (int g = 0; g < space; g++)
        if (query[2 * g] < 0) total += s->pw[g];
    double u = al_rng_uniform(r) * total;
    int last = -1;
    for (int g = 0; g < space; g++) {
        if (query[2 * g] >= 0) continue;
        last = g;
        if ((u -= s->pw[g]) < 0) return g;
    }
    return last;   /* rounding left u >= 0: the last free slot */
}

static void mqar_example(const synth *s, al_rng *r, int P, int *in, int *tgt, float *w)
{
    int T = s->T, C = 2 * P, half = s->V / 2, space = (T - C) / 2;
    for (int i = 0; i < P; i++) {
        in[2 * i] = draw_distinct(r, 1, half, in, i, 2);
        in[2 * i + 1] = draw_distinct(r, half, s->V, in + 1, i, 2);
    }
    for (int t = 0; t < T; t++) w[t] = 0.0f;
    for (int t = C; t < T; t++) in[t] = -1;
    for (int i = 0; i < P; i++) {
        int at = C + 2 * draw_gap(s, r, in + C, space);
        in[at] = in[2 * i];
        tgt[at] = in[2 * i + 1];
        w[at] = 1.0f;
    }
    for (int t = C; t < T; t++)
        if (in[t] < 0) in[t] = uniform_int(r, 0, s->V);
    int last = uniform_int(r, 0, s->V);   /* s[T] */
    for (int t = 0; t < T; t++)
        if (w[t] == 0.0f) tgt[t] = t + 1 < T ? in[t + 1] : last;
}

/* ------------------------------------------------------------ induction */

static void induction_example(const synth *s, al_rng *r, int L, int *in, int *tgt, float *w)
{
    int T = s->T, *seg = s->seg;
    for (int i = 0; i < L; i++) seg[i] = draw_distinct(r, 0, s->V, seg, i, 1);
    int a = uniform_int(r, 0, T + 2 - 2 * L);          /* a + L <= b, b + L <= T + 1 */
    int b = uniform_int(r, a + L, T + 2 - L);
    for (int t = 0; t <= T; t++) {                       /* token s[t] */
        int tok;
        if (t >= a && t < a + L) tok = seg[t - a];
        else if (t >= b && t < b + L) tok = seg[t - b];
        else tok = draw_distinct(r, 0, s->V, seg, L, 1);
        if (t < T) in[t] = tok, w[t] = t >= b && t < b + L - 1 ? 1.0f : 0.0f;
        if (t > 0) tgt[t - 1] = tok;
    }
}

/* ------------------------------------------------------------ examples */

/* Example `stream_index` of a split with P' pairs (segment length). Its
 * RNG is seeded from (split, index, P'), so a P-pair example is the same
 * whichever way P' was chosen, and P' = P keeps the streams of a run
 * without a curriculum. */
static void make_example(const synth *s, int split, long stream_index, int P, int *in,
                         int *tgt, float *w)
{
    al_rng r;
    uint64_t salt = P == s->P ? 0 : mix64(0x70616972ULL << 32 | (uint32_t)P);   /* "pair" */
    al_rng_seed(&r, s->seed[split] ^ salt ^
                mix64((uint64_t)stream_index + 0x9e3779b97f4a7c15ULL));
    if (s->kind == MQAR) mqar_example(s, &r, P, in, tgt, w);
    else induction_example(s, &r, P, in, tgt, w);
}

/* Test and evaluation ask the full task (P pairs). */
static void synth_example(al_data *d, int split, long index, int T, int *in, int *tgt,
                          float *w)
{
    const synth *s = d->impl;
    AL_ASSERT(T == s->T && index >= 0 && index < d->n_examples[split]);
    make_example(s, split, split == AL_SPLIT_TRAIN ? index : s->index[split][index], s->P, in,
                 tgt, w);
}

/* The largest P' a training batch may draw at step: it ramps linearly from
 * P_min to P over the first curriculum_steps steps. */
static int pairs_cap(const synth *s, long step)
{
    if (step >= s->ramp) return s->P;
    return s->P_min + (int)((long)(s->P - s->P_min + 1) * step / s->ramp);
}

/* Random examples of a split: training draws from its pool of indices and,
 * with a curriculum or a mixture (P_min < P), a pair count P' in
 * [P_min, cap] per example. Evaluation batches always have P pairs. */
static void synth_batch(al_data *d, int split, al_rng *rng, int B, int T, int *in, int *tgt,
                        float *w)
{
    const synth *s = d->impl;
    int cap = split == AL_SPLIT_TRAIN ? pairs_cap(s, d->step) : s->P;
    for (int b = 0; b < B; b++) {
        long i = (long)al_rng_below(rng, (uint64_t)d->n_examples[split]);
        size_t o = (size_t)b * T;
        if (split == AL_SPLIT_TRAIN && s->P_min < s->P) {
            int P = s->P_min + (int)al_rng_below(rng, (uint64_t)(cap - s->P_min + 1));
            AL_ASSERT(T == s->T);
            make_example(s, split, i, P, in + o, tgt + o, w + o);
        } else {
            synth_example(d, split, i, T, in + o, tgt + o, w + o);
        }
    }
}

static uint64_t hash_example(const int *in, const int *tgt, int T)
{
    uint64_t h = 0x84222325cbf29ce4ULL;
    for (int t = 0; t < T; t++) h = mix64(h ^ ((uint64_t)(uint32_t)in[t] << 32 | (uint32_t)tgt[t]));
    return h;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Example j of a held-out split = the j-th example of its stream whose hash
 * is not among the n_seen in h (sorted): the training examples (the
 * full-task ones; a curriculum's easier examples ask fewer questions, so
 * they are other task instances even where tokens agree) and, for
 * validation, the test examples. The kept examples' hashes are appended to
 * h. Gives up (an error) when duplicates are so common that the task has
 * too few distinct examples for the sets asked for. */
static int pick_examples(synth *s, int split, long n, uint64_t *h, long *n_seen, al_err *e)
{
    int T = s->T, *in = al_malloc(2 * (size_t)T * sizeof(int)), *tgt = in + T;
    float *w = al_malloc((size_t)T * sizeof(float));
    long seen = *n_seen, j = 0, limit = 16 * n + 1000;
    qsort(h, (size_t)seen, sizeof *h, cmp_u64);
    s->index[split] = al_malloc((size_t)n * sizeof(long));
    for (long k = 0; k < limit && j < n; k++) {
        make_example(s, split, k, s->P, in, tgt, w);
        uint64_t x = hash_example(in, tgt, T);
        if (bsearch(&x, h, (size_t)seen, sizeof *h, cmp_u64)) continue;
        s->index[split][j++] = k;
        h[(*n_seen)++] = x;
    }
    free(in), free(w);
    if (j < n)
        return al_errf(e, "'data.test_examples' (%ld): only %ld %s examples differ from "
                       "the training%s examples; the task has too few distinct examples "
                       "(raise data.vocab_size or seq_len, or lower data.train_examples)",
                       n, j, split == AL_SPLIT_TEST ? "test" : "validation",
                       split == AL_SPLIT_TEST ? "" : " and test");
    return 0;
}

/* The test set first (so that it is the same whether or not a validation
 * set exists), then the validation set. */
static int pick_held_out(synth *s, long n_train, long n_test, al_err *e)
{
    int T = s->T, *in = al_malloc(2 * (size_t)T * sizeof(int)), *tgt = in + T;
    float *w = al_malloc((size_t)T * sizeof(float));
    uint64_t *h = al_malloc((size_t)(n_train + 2 * n_test) * sizeof *h);
    for (long i = 0; i < n_train; i++) {
        make_example(s, AL_SPLIT_TRAIN, i, s->P, in, tgt, w);
        h[i] = hash_example(in, tgt, T);
    }
    free(in), free(w);
    long seen = n_train;
    int rc = pick_examples(s, AL_SPLIT_TEST, n_test, h, &seen, e);
    if (rc == 0) rc = pick_examples(s, AL_SPLIT_VAL, n_test, h, &seen, e);
    free(h);
    return rc;
}

/* What pick_held_out keeps per example: a hash per training example; per
 * test example a hash and a stream index, each twice (test, validation). */
void al_data_example_bytes(const al_data_config *c, uint64_t *per_train, uint64_t *per_test)
{
    int synthetic = !strcmp(c->source, "mqar") || !strcmp(c->source, "induction");
    *per_train = synthetic ? sizeof(uint64_t) : 0;
    *per_test = synthetic ? 2 * (sizeof(uint64_t) + sizeof(long)) : 0;
}

/* ------------------------------------------------------------ open */

static int min_pairs(const al_data_config *c)
{
    return c->min_kv_pairs ? c->min_kv_pairs : c->num_kv_pairs;
}

static int check_shape(const al_data_config *c, int kind, int T, al_err *e)
{
    int P = c->num_kv_pairs, V = c->vocab_size;
    if (min_pairs(c) > P)
        return al_errf(e, "'data.min_kv_pairs' (%d) exceeds 'data.num_kv_pairs' (%d): training "
                       "examples draw their pairs from [min_kv_pairs, num_kv_pairs]",
                       c->min_kv_pairs, P);
    if (kind == INDUCTION && c->min_kv_pairs == 1)
        return al_errf(e, "'data.min_kv_pairs' (%d): induction repeats a segment of at least "
                       "2 tokens", c->min_kv_pairs);
    if (kind == MQAR && 4 * (long)P > T)
        return al_errf(e, "'data.num_kv_pairs' (%d): mqar needs seq_len >= 4 * num_kv_pairs "
                       "= %ld, seq_len is %d", P, 4 * (long)P, T);
    if (kind == MQAR && V / 2 - 1 < P)
        return al_errf(e, "'data.vocab_size' (%d): mqar with %d pairs needs at least %ld "
                       "tokens (keys 1 .. V/2 - 1, values V/2 .. V - 1)", V, P, 2 * (long)P + 2);
    if (kind == INDUCTION && P < 2)
        return al_errf(e, "'data.num_kv_pairs' (%d): induction repeats a segment of "
                       "num_kv_pairs tokens and needs at least 2", P);
    if (kind == INDUCTION && 2 * (long)P > T)
        return al_errf(e, "'data.num_kv_pairs' (%d): induction needs seq_len >= 2 * "
                       "num_kv_pairs = %ld, seq_len is %d", P, 2 * (long)P, T);
    if (kind == INDUCTION && V <= P)
        return al_errf(e, "'data.vocab_size' (%d) must exceed 'data.num_kv_pairs' (%d) for "
                       "induction", V, P);
    return 0;
}

static int synth_open(al_data *d, const al_data_config *c, int T, int kind, al_err *e)
{
    if (check_shape(c, kind, T, e) != 0) return -1;
    synth *s = al_calloc(1, sizeof *s);
    d->impl = s;
    s->kind = kind, s->V = c->vocab_size, s->T = T, s->P = c->num_kv_pairs;
    s->P_min = min_pairs(c);
    s->ramp = c->curriculum_steps;
    s->seed[AL_SPLIT_TRAIN] = mix64(c->seed ^ 0x747261696e000000ULL);   /* "train" */
    s->seed[AL_SPLIT_TEST] = mix64(c->seed ^ 0x7465737400000000ULL);    /* "test" */
    s->seed[AL_SPLIT_VAL] = mix64(c->seed ^ 0x76616c6964000000ULL);     /* "valid" */
    s->seg = al_malloc((size_t)s->P * sizeof(int));
    if (kind == MQAR) {
        s->space = (T - 2 * s->P_min) / 2;
        /* (g + 1)^(a - 1), scaled by its largest value so that no power_a overflows */
        double ref = c->power_a < 1 ? 1.0 : s->space;
        s->pw = al_malloc((size_t)s->space * sizeof(double));
        for (int g = 0; g < s->space; g++) s->pw[g] = pow((g + 1.0) / ref, c->power_a - 1.0);
    }
    d->vocab_size = s->V;
    d->has_weights = 1;
    d->n_examples[AL_SPLIT_TRAIN] = c->train_examples;
    d->n_examples[AL_SPLIT_VAL] = c->test_examples;
    d->n_examples[AL_SPLIT_TEST] = c->test_examples;
    return pick_held_out(s, c->train_examples, c->test_examples, e);
}

static int mqar_open(al_data *d, const al_data_config *c, int T, al_err *e)
{
    return synth_open(d, c, T, MQAR, e);
}

static int induction_open(al_data *d, const al_data_config *c, int T, al_err *e)
{
    return synth_open(d, c, T, INDUCTION, e);
}

static void synth_close(al_data *d)
{
    synth *s = d->impl;
    if (!s) return;
    free(s->pw);
    for (int i = 0; i < AL_N_SPLITS; i++) free(s->index[i]);
    free(s->seg);
    free(s);
}

static int synth_vocab(const al_data_config *c) { return c->vocab_size; }

const al_data_source al_data_mqar = {
    .name = "mqar",
    .vocab = synth_vocab,
    .open = mqar_open,
    .batch = synth_batch,
    .close = synth_close,
    .example = synth_example,
};

const al_data_source al_data_induction = {
    .name = "induction",
    .vocab = synth_vocab,
    .open = induction_open,
    .batch = synth_batch,
    .close = synth_close,
    .example = synth_example,
};
