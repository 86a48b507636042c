/*
 * data.c - the table of data sources and the calls that go through it.
 * The sources live in their own files: data_text.c (any file as bytes),
 * data_kjv.c (the King James Bible, bytes too), data_synth.c (mqar,
 * induction), data_passkey.c (a key hidden in text).
 */
#include "al_data.h"

#include <string.h>

/* ------------------------------------------------------------ registry */

static const al_data_source *const sources[] = {
    &al_data_text,
    &al_data_kjv,
    &al_data_mqar,
    &al_data_induction,
    &al_data_passkey,
    NULL,
};

static const al_data_source *find_source(const char *name)
{
    for (int i = 0; sources[i]; i++)
        if (strcmp(sources[i]->name, name) == 0) return sources[i];
    return NULL;
}

int al_data_check(const al_data_config *c, int seq_len, al_err *e)
{
    if (!find_source(c->source))
        return al_errf(e, "data source '%s' is not available in this build", c->source);
    return strcmp(c->source, "text") == 0 ? al_data_text_check(c, seq_len, e) : 0;
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
