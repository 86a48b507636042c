/*
 * data.c - data sources. "text": any file as bytes, the first
 * 1 - val_fraction for training, the rest for validation; windows of
 * T + 1 bytes at uniformly random offsets. The other sources live in
 * data_kjv.c (bytes too) and data_synth.c (mqar, induction); the table of
 * all of them is here.
 */
#include "al_data.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const al_data_source *find_source(const char *name);

/* ------------------------------------------------------------ byte text */

int al_data_text_split(al_data *d, const char *what, double val_fraction,
                       double test_fraction, int seq_len, al_err *e)
{
    d->vocab_size = 256;
    d->n_train = (size_t)((double)d->n * (1.0 - val_fraction - test_fraction));
    d->test_start = test_fraction > 0 ? (size_t)((double)d->n * (1.0 - test_fraction)) : d->n;
    if (d->test_start < d->n_train) d->test_start = d->n_train;
    size_t need = (size_t)seq_len + 1, n_val = d->test_start - d->n_train;
    size_t n_test = d->n - d->test_start;
    if (d->n_train < need || n_val < need || (test_fraction > 0 && n_test < need))
        return al_errf(e, "%s: too short: %zu bytes give %zu training, %zu validation and "
                       "%zu test bytes; each split needs at least seq_len + 1 = %zu", what,
                       d->n, d->n_train, n_val, n_test, need);
    d->n_examples[AL_SPLIT_TEST] = n_test ? (long)((n_test - 1) / (size_t)seq_len) : 0;
    return 0;
}

/* Test window i of a text source (al_data_text_split). */
void al_data_text_example(al_data *d, int split, long index, int T, int *in, int *tgt,
                          float *w)
{
    AL_ASSERT(split == AL_SPLIT_TEST && index >= 0 && index < d->n_examples[split]);
    const unsigned char *s = d->bytes + d->test_start + (size_t)index * T;
    for (int t = 0; t < T; t++) {
        in[t] = s[t];
        tgt[t] = s[t + 1];
    }
    (void)w;
}

static int text_open(al_data *d, const al_data_config *c, int seq_len, al_err *e)
{
    if (!c->path[0]) return al_errf(e, "data.path: required for source 'text'");
    char *buf, what[AL_PATH_LEN + 32];
    size_t n;
    al_err sub;
    if (al_read_file(c->path, &buf, &n, &sub) != 0) return al_errf(e, "'data.path': %s", sub.msg);
    d->bytes = (unsigned char *)buf;
    d->n = n;
    snprintf(what, sizeof what, "'data.path' ('%s')", c->path);
    return al_data_text_split(d, what, c->val_fraction, c->test_fraction, seq_len, e);
}

/* What text_open would refuse, found from the file's size alone. */
static int text_check(const al_data_config *c, int seq_len, al_err *e)
{
    struct stat st;
    if (!c->path[0]) return al_errf(e, "'data.path' is required for source 'text'");
    if (stat(c->path, &st) != 0 || access(c->path, R_OK) != 0)
        return al_errf(e, "'data.path' ('%s'): cannot read: %s", c->path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return al_errf(e, "'data.path' ('%s') is a directory, not a file", c->path);
    al_data d = {.n = (size_t)st.st_size};
    char what[AL_PATH_LEN + 32];
    snprintf(what, sizeof what, "'data.path' ('%s')", c->path);
    return al_data_text_split(&d, what, c->val_fraction, c->test_fraction, seq_len, e);
}

int al_data_check(const al_data_config *c, int seq_len, al_err *e)
{
    if (!find_source(c->source))
        return al_errf(e, "data source '%s' is not available in this build", c->source);
    return strcmp(c->source, "text") == 0 ? text_check(c, seq_len, e) : 0;
}

void al_data_text_batch(al_data *d, int split, al_rng *rng, int B, int T, int *in,
                        int *tgt, float *w)
{
    AL_ASSERT(split == AL_SPLIT_TRAIN || split == AL_SPLIT_VAL);
    size_t lo = split == AL_SPLIT_TRAIN ? 0 : d->n_train;
    size_t hi = split == AL_SPLIT_TRAIN ? d->n_train : d->test_start;
    size_t span = hi - lo - (size_t)T; /* offsets lo .. hi - T - 1 */
    for (int b = 0; b < B; b++) {
        const unsigned char *s = d->bytes + lo + al_rng_below(rng, span);
        for (int t = 0; t < T; t++) {
            in[b * T + t] = s[t];
            tgt[b * T + t] = s[t + 1];
        }
    }
    (void)w;
}

void al_data_text_close(al_data *d) { free(d->bytes); }

static int bytes_vocab(const al_data_config *c) { return 256; }

static const al_data_source text_source = {"text", bytes_vocab, text_open,
                                           al_data_text_batch, al_data_text_close,
                                           al_data_text_example};

/* ------------------------------------------------------------ registry */

static const al_data_source *const sources[] = {
    &text_source,
    &al_data_kjv,
    &al_data_mqar,
    &al_data_induction,
    NULL,
};

static const al_data_source *find_source(const char *name)
{
    for (int i = 0; sources[i]; i++)
        if (strcmp(sources[i]->name, name) == 0) return sources[i];
    return NULL;
}

int al_data_vocab(const al_data_config *c)
{
    const al_data_source *s = find_source(c->source);
    return s ? s->vocab(c) : -1;
}

int al_data_open(al_data *d, const al_data_config *c, int seq_len, al_err *e)
{
    memset(d, 0, sizeof *d);
    if (c->seq_len != 0 && c->seq_len != seq_len)
        return al_errf(e, "'data.seq_len' (%d) must equal 'model.seq_len' (%d) or be 0",
                       c->seq_len, seq_len);
    d->src = find_source(c->source);
    if (d->src) {
        if (d->src->open(d, c, seq_len, e) != 0) {
            al_data_close(d);
            return -1;
        }
        return 0;
    }
    return al_errf(e, "data.source: unknown source '%s'", c->source);
}

void al_data_batch(al_data *d, int split, al_rng *rng, int B, int T, int *in,
                   int *tgt, float *w)
{
    d->src->batch(d, split, rng, B, T, in, tgt, w);
}

void al_data_examples(al_data *d, int split, long first, int B, int T, int *in,
                      int *tgt, float *w)
{
    AL_ASSERT(d->src->example && first >= 0 && first + B <= d->n_examples[split]);
    for (int b = 0; b < B; b++)
        d->src->example(d, split, first + b, T, in + (size_t)b * T, tgt + (size_t)b * T,
                        w + (size_t)b * T);
}

void al_data_close(al_data *d)
{
    if (d->src && d->src->close) d->src->close(d);
    memset(d, 0, sizeof *d);
}
