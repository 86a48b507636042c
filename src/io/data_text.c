/*
 * data_text.c - the "text" source: any file as bytes, the first
 * 1 - val_fraction - test_fraction for training, then validation, then
 * test; windows of T + 1 bytes at uniformly random offsets. Its byte
 * helpers serve the other byte source (data_kjv.c) too, which is why they
 * live here and not in data.c: data.c lists the sources, so a source that
 * called back into it would make the two files depend on each other.
 */
#include "al_data.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
int al_data_text_check(const al_data_config *c, int seq_len, al_err *e)
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

const al_data_source al_data_text = {
    .name = "text",
    .vocab = bytes_vocab,
    .open = text_open,
    .batch = al_data_text_batch,
    .close = al_data_text_close,
    .example = al_data_text_example,
};
