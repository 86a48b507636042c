/*
 * al_score.h - the scoring library (src/score/): a checkpoint's loss on a
 * file's bytes, plainly, through the cache or by position (score.c, which
 * says how windows are cut), the passkey grid (score_passkey.c) and the
 * by-position files (score_pos.c). `attnlab score`, `attnlab grads` and a
 * sweep's evaluation call it, so their numbers are one code's.
 */
#ifndef AL_SCORE_H
#define AL_SCORE_H

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

/* How to score: what `attnlab score`'s options say, as a library call
 * takes it. */
typedef struct al_score_opts {
    long seq_len;       /* tokens per window (0: the checkpoint's seq_len) */
    long batch;         /* windows per pass (0: as memory allows; 8 through the cache) */
    long threads;       /* BLAS threads (0: all cores) */
    int through_cache;  /* token by token through the KV cache */
    int kv_dtype;       /* the cache's dtype (-1: model.kv_dtype) */
    int by_position;    /* sum the loss at each position as well */
} al_score_opts;

/* What a score found. */
typedef struct al_score_result {
    double loss;          /* mean over every window's tokens */
    long tokens, windows;
    int T, trained;       /* the window, and the checkpoint's seq_len */
    int dtype;            /* the cache's dtype through the cache; else -1 */
    size_t cache_bytes;   /* one window's cache, through the cache (else 0) */
    double *pos_sum;      /* (T) with by_position: the loss summed over windows at
                             each position (malloc'ed; the caller frees it) */
} al_score_result;

/* s's windows scored as o asks (o->seq_len is s's already). -1 with e set. */
int al_score_run(al_score_in *s, const al_score_opts *o, al_score_result *r, al_err *e);

/* Open, run and close in one call: what a sweep's `eval` runs, so its
 * numbers are the command's. -1 with e naming the file. */
int al_score_eval(const char *ckpt, const char *file, const al_score_opts *o,
                  al_score_result *out, al_err *e);

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

/* Measured decode speed (score_decode.c): `tokens` steps of `batch`
 * sequences, each cache first filled to context - tokens - 1 rows, timed
 * `repeats` times on one decoder; the median and the range. */
#define AL_DECODE_MAX_REPEATS 64
typedef struct al_decode_speed_opts {
    int context, dtype, tokens, batch, repeats;
} al_decode_speed_opts;

typedef struct al_decode_speed_result {
    double tokens_per_s;                       /* median over the repeats, all sequences */
    double tokens_per_s_min, tokens_per_s_max;
    size_t cache_bytes;                        /* one sequence's, at the context */
    size_t row_bytes;                          /* per cached token, all layers */
} al_decode_speed_result;

int al_decode_speed(al_model *m, const al_decode_speed_opts *o, al_decode_speed_result *r,
                    al_err *e);

/* The machine's read bandwidth in bytes/s: a streaming read (a sum) over a
 * buffer of `bytes` (larger than the caches) on the pool's threads, the
 * median of `repeats` passes. What bounds a decode step that must read
 * decode_bytes_per_token (al_cost.h): at most bandwidth / those bytes
 * tokens/s. */
#define AL_READ_MAX_THREADS 256
double al_read_bandwidth(size_t bytes, int repeats);

#endif
