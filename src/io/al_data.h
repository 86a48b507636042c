/*
 * al_data.h - training data behind one interface.
 *
 * A data source fills batches of (inputs, targets) token windows, and for
 * task data (synthetic recall) 0/1 loss weights marking the positions that
 * must answer. Sources are listed in one static table in data.c; each is a
 * const al_data_source in its own file. The al_data owns everything it loads.
 */
#ifndef AL_DATA_H
#define AL_DATA_H

#include <stddef.h>
#include <stdint.h>
#include "al_config.h"

/* Training batches come from TRAIN; evaluation during training (and any
 * selection by validation loss) from VAL; TEST is held out and scored once,
 * at the end of a run, on a fixed set of windows or examples. */
enum al_split { AL_SPLIT_TRAIN = 0, AL_SPLIT_VAL = 1, AL_SPLIT_TEST = 2, AL_N_SPLITS = 3 };

typedef struct al_data al_data;

typedef struct al_data_source {
    const char *name;
    /* Vocabulary size the source produces, known before loading. */
    int (*vocab)(const al_data_config *c);
    /* Load or generate; seq_len is the model's window length. */
    int (*open)(al_data *d, const al_data_config *c, int seq_len, al_err *e);
    /* One batch: in, tgt (B, T) tokens; w (B, T) weights when has_weights.
     * Windows are drawn with rng (seeded by the caller: train RNG, or the
     * fixed eval seed so that every eval sees the same batches). */
    void (*batch)(al_data *d, int split, al_rng *rng, int B, int T, int *in,
                  int *tgt, float *w);
    void (*close)(al_data *d);
    /* Example `index` of a split, a pure function of the data config, so
     * that evaluation can walk a fixed set in order: task data's val and
     * test sets, text's test windows. 0 <= index < d->n_examples[split]. */
    void (*example)(al_data *d, int split, long index, int T, int *in, int *tgt,
                    float *w);
} al_data_source;

struct al_data {
    const al_data_source *src;
    int vocab_size;            /* 256 for bytes */
    int has_weights;           /* 1: task data, loss and accuracy on answers only */
    unsigned char *bytes;      /* text sources: the whole file */
    size_t n, n_train;         /* bytes, and how many are training data */
    size_t test_start;         /* text: validation is [n_train, test_start), test the rest */
    void *impl;                /* source-private state */
    long n_examples[AL_N_SPLITS]; /* examples per split, walked in order by evaluation:
                                  task data: val and test sets; text: the test split's
                                  windows (0 elsewhere: text draws random windows) */
    long step;                 /* training step the next training batch is for, set by
                                  the trainer: a curriculum (data.curriculum_steps) reads it */
};

/* What opening the data would refuse, found without loading it (for a
 * text file: missing, unreadable, a directory, too short for seq_len in
 * either split). Errors name the key. */
int al_data_check(const al_data_config *c, int seq_len, al_err *e);
/* Vocabulary of a source without loading it; -1 for an unknown source. */
int al_data_vocab(const al_data_config *c);
int al_data_open(al_data *d, const al_data_config *c, int seq_len, al_err *e);
/* Bytes opening c's data holds in proportion to data.train_examples and
 * data.test_examples (mqar, induction: the examples' hashes and indices;
 * 0 for sources that keep none), for the estimate before it opens. */
void al_data_example_bytes(const al_data_config *c, uint64_t *per_train, uint64_t *per_test);
void al_data_batch(al_data *d, int split, al_rng *rng, int B, int T, int *in,
                   int *tgt, float *w);
void al_data_close(al_data *d);

/* Task data: examples first .. first + B - 1 of a split, in order, as rows
 * of in, tgt, w (B, T). */
void al_data_examples(al_data *d, int split, long first, int B, int T, int *in,
                      int *tgt, float *w);

/* Sources defined in their own files (data_text.c, data_kjv.c,
 * data_synth.c); data.c lists them. */
extern const al_data_source al_data_text, al_data_kjv, al_data_mqar, al_data_induction,
    al_data_passkey;

/* The passkey task (data_passkey.c, which gives the layout): the window
 * s[0..T] of example `index` of the stream `seed` over filler[0..n),
 * the statement at `depth` of the filler (< 0: drawn from [0, 1)); in,
 * tgt, w (T) as a batch row, w 1 at the last AL_PASSKEY_DIGITS targets
 * (the key's digits) and 0 elsewhere. Returns the key. T must be at
 * least al_passkey_min_len(). */
#define AL_PASSKEY_DIGITS 5
int al_passkey_make(const unsigned char *filler, size_t n, uint64_t seed, long index, int T,
                    double depth, int *in, int *tgt, float *w);
int al_passkey_min_len(void);
/* The example stream of a split for data.seed (what the source uses). */
uint64_t al_passkey_seed(uint64_t data_seed, int split);

/* What opening a "text" source would refuse, from the file's size alone
 * (al_data_check's share for text). */
int al_data_text_check(const al_data_config *c, int seq_len, al_err *e);

/* Text helpers shared by byte sources: split bytes[0..n) into train | val |
 * test, the last test_fraction of the bytes being the test split (none when
 * 0), the val_fraction before it validation. Test window i is bytes
 * [test_start + i T, + T + 1): the split tiled without overlap. */
int al_data_text_split(al_data *d, const char *what, double val_fraction,
                       double test_fraction, int seq_len, al_err *e);
/* Windows of T + 1 bytes at uniformly random offsets within the split. */
void al_data_text_batch(al_data *d, int split, al_rng *rng, int B, int T, int *in,
                        int *tgt, float *w);
/* Test window `index` (split must be AL_SPLIT_TEST): the example hook of
 * byte sources. */
void al_data_text_example(al_data *d, int split, long index, int T, int *in, int *tgt,
                          float *w);
/* Frees d->bytes. */
void al_data_text_close(al_data *d);

#endif
