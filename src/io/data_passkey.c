/*
 * data_passkey.c - the "passkey" source (Mohtashami and Jaggi 2023): a
 * 5-digit key stated once in filler text and asked for at the end.
 *
 *   <filler> The pass key is 12345. Remember it. 12345 is the pass key. <filler>
 *   What is the pass key? The pass key is 12345
 *
 * Bytes (vocabulary 256). The filler is a run of the text (data.path when
 * given, else the KJV) starting at a random offset of the split's own
 * bytes (train, validation and test as a text source splits them),
 * wrapping around at its end; the statement sits at `depth` of the filler
 * (depth drawn from [0, 1) unless asked for). Window: s[0..T], inputs
 * s[0..T), targets s[1..T]; the last 5 targets are the key's digits and
 * carry weight 1, every other 0: loss and accuracy are on the key alone.
 *
 * Every example is a pure function of (data.seed, split, index) (and the
 * file): its own RNG is seeded from them, as in data_synth.c.
 */
#include "al_data.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char needle_fmt[] = " The pass key is %05d. Remember it. %05d is the pass key. ";
static const char question[] = " What is the pass key? The pass key is ";
#define NEEDLE_LEN 60   /* needle_fmt printed */
#define QUESTION_LEN ((int)sizeof question - 1)

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int al_passkey_min_len(void) { return NEEDLE_LEN + QUESTION_LEN + AL_PASSKEY_DIGITS; }

uint64_t al_passkey_seed(uint64_t data_seed, int split)
{
    static const uint64_t salt[AL_N_SPLITS] = {0x706b747261696eULL, 0x706b76616c6964ULL,
                                               0x706b74657374ULL};   /* "pktrain", ... */
    return mix64(data_seed ^ salt[split]);
}

int al_passkey_make(const unsigned char *filler, size_t n, uint64_t seed, long index, int T,
                    double depth, int *in, int *tgt, float *w)
{
    AL_ASSERT(n > 0 && T >= al_passkey_min_len());
    al_rng r;
    al_rng_seed(&r, seed ^ mix64((uint64_t)index + 0x9e3779b97f4a7c15ULL));
    int key = (int)al_rng_below(&r, 90000) + 10000;   /* 5 digits, no leading zero */
    size_t at = (size_t)al_rng_below(&r, (uint64_t)n);
    double u = al_rng_uniform(&r);
    if (depth < 0) depth = u;                         /* drawn either way: same stream */
    int F = T + 1 - al_passkey_min_len(), p = (int)floor(depth * F);
    char needle[NEEDLE_LEN + 24], digits[16];
    int len = snprintf(needle, sizeof needle, needle_fmt, key, key);
    AL_ASSERT(len == NEEDLE_LEN);
    snprintf(digits, sizeof digits, "%05d", key);
    int Q = F + NEEDLE_LEN;                           /* where the question starts */
    for (int t = 0; t <= T; t++) {                    /* token s[t] */
        int tok;
        if (t < p) tok = filler[(at + (size_t)t) % n];
        else if (t < p + NEEDLE_LEN) tok = (unsigned char)needle[t - p];
        else if (t < Q) tok = filler[(at + (size_t)(t - NEEDLE_LEN)) % n];
        else if (t < Q + QUESTION_LEN) tok = (unsigned char)question[t - Q];
        else tok = digits[t - Q - QUESTION_LEN];
        if (t < T) in[t] = tok, w[t] = t >= T - AL_PASSKEY_DIGITS ? 1.0f : 0.0f;
        if (t > 0) tgt[t - 1] = tok;
    }
    return key;
}

/* ------------------------------------------------------------ the source */

typedef struct passkey {
    uint64_t seed[AL_N_SPLITS];
    size_t lo[AL_N_SPLITS], hi[AL_N_SPLITS];   /* each split's filler bytes */
} passkey;

/* The filler: data.path as text, else the KJV, split as they split it. */
static int passkey_open(al_data *d, const al_data_config *c, int T, al_err *e)
{
    if (T < al_passkey_min_len())
        return al_errf(e, "'model.seq_len' (%d): passkey examples need at least %d tokens", T,
                       al_passkey_min_len());
    al_data_config fc = *c;
    snprintf(fc.source, sizeof fc.source, "%s", c->path[0] ? "text" : "kjv");
    if (c->test_fraction <= 0)
        return al_errf(e, "'data.test_fraction' must be above 0 for passkey (the test "
                       "examples' filler)");
    const al_data_source *src = c->path[0] ? &al_data_text : &al_data_kjv;
    if (src->open(d, &fc, 1, e) != 0) return -1;      /* filler only: any window fits */
    passkey *k = al_calloc(1, sizeof *k);
    size_t cut[AL_N_SPLITS + 1] = {0, d->n_train, d->test_start, d->n};
    for (int s = 0; s < AL_N_SPLITS; s++) {
        k->seed[s] = al_passkey_seed(c->seed, s);
        k->lo[s] = cut[s], k->hi[s] = cut[s + 1];
        if (k->hi[s] == k->lo[s]) k->lo[s] = 0, k->hi[s] = d->n;   /* an empty split */
    }
    d->impl = k;
    d->src = &al_data_passkey;
    d->vocab_size = 256;
    d->has_weights = 1;
    d->n_examples[AL_SPLIT_TRAIN] = c->train_examples > 0 ? c->train_examples : LONG_MAX;
    d->n_examples[AL_SPLIT_VAL] = c->test_examples;
    d->n_examples[AL_SPLIT_TEST] = c->test_examples;
    return 0;
}

static void passkey_example(al_data *d, int split, long index, int T, int *in, int *tgt,
                            float *w)
{
    const passkey *k = d->impl;
    AL_ASSERT(index >= 0 && index < d->n_examples[split]);
    al_passkey_make(d->bytes + k->lo[split], k->hi[split] - k->lo[split], k->seed[split], index,
                    T, -1.0, in, tgt, w);
}

static void passkey_batch(al_data *d, int split, al_rng *rng, int B, int T, int *in, int *tgt,
                          float *w)
{
    for (int b = 0; b < B; b++) {
        long i = (long)al_rng_below(rng, (uint64_t)d->n_examples[split]);
        size_t o = (size_t)b * T;
        passkey_example(d, split, i, T, in + o, tgt + o, w + o);
    }
}

static void passkey_close(al_data *d)
{
    free(d->impl);
    d->impl = NULL;
    al_data_text_close(d);
}

static int passkey_vocab(const al_data_config *c) { return 256; }

const al_data_source al_data_passkey = {
    .name = "passkey",
    .vocab = passkey_vocab,
    .open = passkey_open,
    .batch = passkey_batch,
    .close = passkey_close,
    .example = passkey_example,
};
