/*
 * score.c - scoring a checkpoint on a file's bytes (al_score.h): the
 * inputs and their windows, the plain forward pass, and token by token
 * (through the cache, or by position). The `score` and `grads` commands
 * and a sweep's evaluation all run this code, so their numbers agree.
 *
 * Windows start at 0, T, 2T, ...: window j feeds bytes [jT, jT + T) and
 * predicts [jT + 1, jT + T + 1); a window that does not fit whole is
 * dropped. T defaults to the checkpoint's seq_len and may exceed it (RoPE
 * extrapolates).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "al_checkpoint.h"
#include "al_decode.h"
#include "al_parallel.h"
#include "al_score.h"
#include "al_tokloss.h"

/* Activation floats a batch may take before it is split further (~256 MB). */
#define SCORE_BUDGET_FLOATS (64L << 20)
#define SCORE_MAX_BATCH 64

/* ------------------------------------------------------------ inputs */

void al_score_close(al_score_in *s)
{
    al_model_free(&s->m);
    free(s->bytes);
    free(s->in);
    free(s->tgt);
}

int al_score_open(const char *ckpt, const char *file, long seq_len, al_score_in *s, al_err *e)
{
    memset(s, 0, sizeof *s);
    if (al_checkpoint_load_run(ckpt, &s->m, &s->step, e) != 0) return -1;
    if (al_read_file(file, &s->bytes, &s->n, e) != 0) return -1;
    s->T = seq_len ? (int)seq_len : s->m.cfg.seq_len;
    s->windows = s->n > 0 ? (long)((s->n - 1) / (size_t)s->T) : 0;
    if (s->windows == 0)
        return al_errf(e, "%s: too short: %zu bytes, one window of %d tokens needs %d", file,
                       s->n, s->T, s->T + 1);
    size_t used = (size_t)s->windows * s->T + 1;
    for (size_t i = 0; i < used; i++)
        if ((unsigned char)s->bytes[i] >= (unsigned)s->m.cfg.vocab_size)
            return al_errf(e, "%s: byte %u at offset %zu is outside the checkpoint's "
                           "vocabulary (%d)", file, (unsigned char)s->bytes[i], i,
                           s->m.cfg.vocab_size);
    return 0;
}

/* Activation floats one window of T tokens takes (as al_model_reserve
 * counts them), to choose how many windows go in one forward pass. */
static size_t window_floats(const al_model *m, int T)
{
    const al_model_config *c = &m->cfg;
    size_t D = c->d_model, F = m->d_ff, V = c->vocab_size, t = (size_t)T, n = 0, scratch = 0;
    for (int l = 0; l < c->n_layer; l++) {
        const al_layer *L = &m->layers[l];
        size_t s = L->attn->train->scratch_floats(L->ctx, 1, T);
        n += 4 * t * D + 2 * t + 2 * t * F + L->attn->train->act_floats(L->ctx, 1, T);
        scratch = s > scratch ? s : scratch;
    }
    return n + t * (5 * D + 2 + V + 2 * F) + scratch;
}

static long batch_for(const al_model *m, int T, long windows, long want)
{
    size_t per = window_floats(m, T);
    long b = want ? want : (long)(SCORE_BUDGET_FLOATS / (per ? per : 1));
    if (!want && b > SCORE_MAX_BATCH) b = SCORE_MAX_BATCH;
    return b < 1 ? 1 : b > windows ? windows : b;
}

void al_score_fill(al_score_in *s, long w0, int B)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < s->T; t++) {
            size_t at = (size_t)(w0 + b) * s->T + t;
            s->in[b * s->T + t] = (unsigned char)s->bytes[at];
            s->tgt[b * s->T + t] = (unsigned char)s->bytes[at + 1];
        }
}

int al_score_prepare(al_score_in *s, long threads, int B, al_err *e)
{
    if (al_parallel_start(al_threads_for(threads), "--threads", e) != 0) return -1;
    double need = 4.0 * B * (double)window_floats(&s->m, s->T);
    double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (have > 0 && need > have)
        return al_errf(e, "%d windows of %d tokens need %.1f GB of activations, more than "
                       "this machine's %.1f GB (lower --seq-len or --batch)", B, s->T,
                       need / 1e9, have / 1e9);
    if (al_model_reserve(&s->m, B, s->T, e) != 0) return -1;
    s->in = al_malloc((size_t)B * s->T * sizeof(int));
    s->tgt = al_malloc((size_t)B * s->T * sizeof(int));
    return 0;
}

/* ------------------------------------------------------------ scoring */

static double score_all(al_score_in *s, int B)
{
    double sum = 0.0;
    for (long w = 0; w < s->windows; w += B) {
        int b = (int)(s->windows - w < B ? s->windows - w : B);
        al_score_fill(s, w, b);
        sum += al_model_forward(&s->m, s->in, s->tgt, NULL, b, s->T) * b * s->T;
        al_progress_line("score: window %ld/%ld", w + b, s->windows);
    }
    al_progress_end();
    return sum / ((double)s->windows * s->T);
}

/* ---- token by token: through the cache, or by position */

/* Windows per batch through the cache: sequences decoded together. */
#define CACHE_BATCH 8

static int open_cache(al_score_in *s, const al_score_opts *o, int B, al_decoder *d,
                      al_score_result *r, al_err *e)
{
    r->dtype = o->kv_dtype >= 0 ? o->kv_dtype : al_kv_dtype_parse(s->m.cfg.kv_dtype);
    if (al_decoder_init_batch(d, &s->m, B, s->T, r->dtype, e) != 0) return -1;
    r->cache_bytes = al_decoder_cache_bytes(d) / (size_t)B;
    if (al_parallel_start(al_threads_for(o->threads), "--threads", e) != 0) {
        al_decoder_free(d);
        return -1;
    }
    s->in = al_malloc((size_t)B * s->T * sizeof(int));
    s->tgt = al_malloc((size_t)B * s->T * sizeof(int));
    return 0;
}

/* Every window's per-token losses, by the forward pass or through the
 * cache, summed in a fixed order (the same bits for the same threads). */
static int score_tokens(al_score_in *s, const al_score_opts *o, int B, al_score_result *r,
                        al_err *e)
{
    al_decoder d = {0};
    r->dtype = -1;
    if (o->through_cache ? open_cache(s, o, B, &d, r, e) : al_score_prepare(s, o->threads, B, e))
        return -1;
    double *loss = al_malloc((size_t)B * s->T * sizeof(double)), sum = 0;
    r->pos_sum = al_calloc((size_t)s->T, sizeof(double));
    for (long w = 0; w < s->windows; w += B) {
        int b = (int)(s->windows - w < B ? s->windows - w : B);
        al_score_fill(s, w, b);
        if (o->through_cache) al_token_losses_cache(&d, s->in, s->tgt, b, s->T, loss);
        else al_token_losses_forward(&s->m, s->in, s->tgt, b, s->T, loss);
        for (size_t i = 0; i < (size_t)b * s->T; i++)
            sum += loss[i], r->pos_sum[i % (size_t)s->T] += loss[i];
        al_progress_line("score: window %ld/%ld", w + b, s->windows);
    }
    al_progress_end();
    r->loss = sum / ((double)s->windows * s->T);
    free(loss);
    if (o->through_cache) al_decoder_free(&d);
    return 0;
}

/* The windows of s scored as o asks: r->loss, and per position
 * (r->pos_sum, malloc'ed) on the token-by-token path. */
int al_score_run(al_score_in *s, const al_score_opts *o, al_score_result *r, al_err *e)
{
    memset(r, 0, sizeof *r);
    r->dtype = -1;
    int B = (int)batch_for(&s->m, s->T, s->windows, o->batch);
    if (o->through_cache && !o->batch) B = s->windows < CACHE_BATCH ? (int)s->windows : CACHE_BATCH;
    if (o->through_cache || o->by_position) {
        if (score_tokens(s, o, B, r, e) != 0) return -1;
    } else {
        if (al_score_prepare(s, o->threads, B, e) != 0) return -1;
        r->loss = score_all(s, B);
    }
    r->tokens = s->windows * s->T;
    r->windows = s->windows;
    r->T = s->T;
    r->trained = s->m.cfg.seq_len;
    if (!o->by_position) {   /* through the cache sums it anyway */
        free(r->pos_sum);
        r->pos_sum = NULL;
    }
    return 0;
}

int al_score_eval(const char *ckpt, const char *file, const al_score_opts *o,
                  al_score_result *out, al_err *e)
{
    al_score_in s;
    memset(out, 0, sizeof *out);
    int rc = al_score_open(ckpt, file, o->seq_len, &s, e);
    if (rc == 0) rc = al_score_run(&s, o, out, e);
    al_score_close(&s);
    return rc;
}
