/*
 * score_decode.c - measured decode speed (al_score.h): the timing behind
 * `attnlab bench-decode` and a sweep's `eval.decode`.
 *
 * For a context C every sequence's caches are filled with C - N - 1 random
 * rows (the speed of a step does not depend on what the rows hold), one
 * step warms up, then N steps are timed: each feeds one token to each of
 * the B sequences and attends over the cached tokens; tokens/s counts all
 * B. A measurement is `repeats` such runs on one decoder, and its figure
 * the median (another process taking the core can only slow a run down,
 * and the median does not follow one such run).
 */
#include <stdlib.h>
#include <string.h>

#include "al_decode.h"
#include "al_parallel.h"
#include "al_score.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One timed run of n steps from a cache refilled to its start. */
static double timed_run(al_decoder *d, int context, int tokens, int batch, int V, int *in)
{
    al_decoder_fill_random(d, context - tokens - 1, 7);
    for (int b = 0; b < batch; b++) in[b] = (b * 13 + 1) % V;
    al_decoder_step_batch(d, in);   /* warm-up */
    double t0 = al_now();
    for (int i = 0; i < tokens; i++) {
        for (int b = 0; b < batch; b++) in[b] = (i * 31 + b * 7 + 7) % V;
        al_decoder_step_batch(d, in);
    }
    double dt = al_now() - t0;
    return dt > 0 ? (double)tokens * batch / dt : 0;
}

int al_decode_speed(al_model *m, const al_decode_speed_opts *o, al_decode_speed_result *r,
                    al_err *e)
{
    memset(r, 0, sizeof *r);
    if (o->tokens < 1 || o->batch < 1 || o->repeats < 1 || o->repeats > AL_DECODE_MAX_REPEATS)
        return al_errf(e, "decode speed: tokens, batch and repeats (1 to %d) must be positive",
                       AL_DECODE_MAX_REPEATS);
    if (o->context <= o->tokens + 1)
        return al_errf(e, "decode speed: context %d leaves no room for %d timed tokens",
                       o->context, o->tokens);
    al_decoder d;
    if (al_decoder_init_batch(&d, m, o->batch, o->context, o->dtype, e) != 0) return -1;
    int *in = al_malloc((size_t)o->batch * sizeof(int));
    double runs[AL_DECODE_MAX_REPEATS];
    for (int i = 0; i < o->repeats; i++)
        runs[i] = timed_run(&d, o->context, o->tokens, o->batch, m->cfg.vocab_size, in);
    qsort(runs, (size_t)o->repeats, sizeof *runs, cmp_double);
    r->tokens_per_s = o->repeats % 2 ? runs[o->repeats / 2]
                                     : (runs[o->repeats / 2 - 1] + runs[o->repeats / 2]) / 2;
    r->tokens_per_s_min = runs[0];
    r->tokens_per_s_max = runs[o->repeats - 1];
    r->cache_bytes = al_decoder_cache_bytes(&d) / (size_t)o->batch;   /* one sequence's */
    r->row_bytes = al_decoder_row_bytes(&d);
    free(in);
    al_decoder_free(&d);
    return 0;
}

/* ------------------------------------------------------------ bandwidth */

typedef struct read_job {
    const float *x;
    double sum[AL_READ_MAX_THREADS];   /* per thread: kept, so the reads are not dropped */
} read_job;

/* Blocks [lo, hi) of 16 floats each. */
static void read_blocks(void *ctx, long lo, long hi, int tid)
{
    read_job *j = ctx;
    float acc[16] = {0};   /* 16 lanes: a vectorised streaming read */
    for (long i = lo * 16; i < hi * 16; i += 16)
        for (int k = 0; k < 16; k++) acc[k] += j->x[i + k];
    double s = 0;
    for (int k = 0; k < 16; k++) s += acc[k];
    j->sum[tid % AL_READ_MAX_THREADS] += s;
}

double al_read_bandwidth(size_t bytes, int repeats)
{
    size_t n = bytes / sizeof(float) / 16 * 16;
    float *x = al_malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(i & 7);   /* touched: pages are real */
    read_job *j = al_calloc(1, sizeof *j);
    j->x = x;
    double runs[AL_DECODE_MAX_REPEATS];
    if (repeats < 1) repeats = 1;
    if (repeats > AL_DECODE_MAX_REPEATS) repeats = AL_DECODE_MAX_REPEATS;
    for (int r = 0; r < repeats; r++) {
        double t0 = al_now();
        al_parallel_for((long)(n / 16), 4096, read_blocks, j);
        double dt = al_now() - t0;
        runs[r] = dt > 0 ? (double)(n * sizeof *x) / dt : 0;
    }
    qsort(runs, (size_t)repeats, sizeof *runs, cmp_double);
    free(x), free(j);
    return runs[repeats / 2];
}
