/*
 * al_score_in.h - what `attnlab score` and `attnlab grads` both read: a
 * checkpoint's model, a file's bytes, and the windows over them (defined
 * in cmd_score.c, which says how windows are cut).
 */
#ifndef AL_SCORE_IN_H
#define AL_SCORE_IN_H

#include <stdio.h>

#include "al_model.h"

typedef struct al_score_in {
    al_model m;
    long step;
    char *bytes;     /* the file, malloc'ed */
    size_t n;
    int T;           /* tokens per window */
    long windows;
    int *in, *tgt;   /* (B, T) one batch, malloc'ed by al_score_prepare */
} al_score_in;

/* Loads the checkpoint and the file, windows of seq_len tokens (0: the
 * checkpoint's); -1 with e naming the file. Call al_score_close either way. */
int al_score_open(const char *ckpt, const char *file, long seq_len, al_score_in *s, al_err *e);
/* Threads (0: all cores), and activations for B windows unless they cannot
 * fit in memory (a huge --seq-len or --batch is an error, not an abort). */
int al_score_prepare(al_score_in *s, long threads, int B, al_err *e);
/* Windows w0 .. w0 + B - 1 into s->in, s->tgt. */
void al_score_fill(al_score_in *s, long w0, int B);
void al_score_close(al_score_in *s);

/* What al_score_eval found. */
typedef struct al_score_result {
    double loss;          /* mean over every window's tokens */
    long tokens, windows;
    int T, trained;       /* the window, and the checkpoint's seq_len */
    size_t cache_bytes;   /* one window's cache, through the cache (else 0) */
    double *pos_sum;      /* (T) with by_position: the loss summed over windows at
                             each position (malloc'ed; the caller frees it) */
} al_score_result;

/* `attnlab score CKPT FILE --seq-len T` run in this process (what a
 * sweep's `eval` runs, so that its numbers are the command's): through
 * the cache at kv_dtype when it is >= 0, else the plain forward pass;
 * with by_position the per-position sums as well. Batches as the command
 * chooses them. -1 with e naming the file. */
int al_score_eval(const char *ckpt, const char *file, int T, int kv_dtype, int by_position,
                  long threads, al_score_result *out, al_err *e);

/* `score --passkey` (score_passkey.c): the grid, 0 counts for defaults. */
#define AL_PASSKEY_MAX_GRID 16
typedef struct al_passkey_grid {
    int n_lengths, lengths[AL_PASSKEY_MAX_GRID];   /* default: seq_len x 1, 2, 4 */
    int n_depths;
    double depths[AL_PASSKEY_MAX_GRID];            /* default: 0, 0.25, 0.5, 0.75 */
    long examples;                                 /* per cell (default 20) */
    long seed;                                     /* data.seed of the stream (default 1) */
} al_passkey_grid;

/* Every cell of the grid scored on s's model with s's bytes as filler:
 * the CSV length,depth,examples,exact,digit_accuracy,loss on `print`
 * (NULL: not printed), and into out/passkey.csv when out is given
 * (atomic). -1 with e set. */
int al_score_passkey(al_score_in *s, const al_passkey_grid *g, FILE *print, const char *out,
                     al_err *e);

/* `score --by-position` (score_pos.c): pos_sum (T) the loss summed over
 * `windows` windows at each position; writes DIR/by_position.csv
 * (bucket_start,bucket_end,loss,tokens: N buckets [floor(iT/N),
 * floor((i+1)T/N)), each the mean over its tokens) and DIR/by_position.gp,
 * (a dashed line at `trained`, the trained seq_len, when T exceeds it),
 * and draws it with gnuplot (a missing gnuplot only warns). Atomic; -1
 * with e set when a file cannot be written or gnuplot failed. */
int al_score_write_by_position(const char *dir, const double *pos_sum, long windows, int T,
                               int N, int trained, al_err *e);

#endif
