/*
 * score_recall.c - recall through quantized caches (al_score.h): the same
 * passkey or MQAR examples answered through an f32 KV cache and through
 * each other cache (bf16, f16, int8 and int4 at each f32 residual asked
 * for), one example at a time, so that every example is a pair and a
 * cheaper cache's cost is counted where old tokens matter (docs/
 * kv-quant-recall.md).
 *
 * How an example goes through a cache: its tokens before the first answer
 * are prefilled (one forward pass, the cache filled from it and quantized
 * as it is written, as KIVI quantizes after prefill), then every token from
 * the first answer to the last is fed teacher-forced through the cache's
 * decode; at each answer the argmax of the logits is compared with the
 * target and the cross-entropy summed. Exact: every answer right (for the
 * passkey, all five digits: what greedy decoding would print, see
 * score_passkey.c). The residual of an int8 / int4 cache is set on the
 * loaded model's config for the decoder that is made (and put back).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_data.h"
#include "al_decode.h"
#include "al_kvcache.h"
#include "al_parallel.h"
#include "al_score.h"
#include "al_stats.h"
#include "al_tokloss.h"

static const char *const task_names[AL_RECALL_NTASKS] = {"passkey", "mqar"};

const char *al_recall_task_name(int task)
{
    AL_ASSERT(task >= 0 && task < AL_RECALL_NTASKS);
    return task_names[task];
}

/* ------------------------------------------------------------ the set */

static void add_cache(al_recall *r, int dtype, int residual)
{
    AL_ASSERT(r->n_caches < AL_RECALL_MAX_CACHES);
    r->caches[r->n_caches++] = (al_recall_cache){dtype, residual, -1};
}

void al_recall_init(al_recall *r, const int *dtypes, int n_dtypes, const int *residuals,
                    int n_residuals)
{
    static const int fallback = AL_RECALL_RESIDUAL_DEFAULT;
    AL_ASSERT(n_dtypes <= AL_RECALL_MAX_DTYPES && n_residuals <= AL_RECALL_MAX_RESIDUALS);
    memset(r, 0, sizeof *r);
    if (!n_residuals) residuals = &fallback, n_residuals = 1;
    add_cache(r, AL_KV_F32, AL_RECALL_RESIDUAL_NONE);
    for (int i = 0; i < n_dtypes; i++) {
        if (dtypes[i] == AL_KV_F32) continue;
        if (!al_kv_dtype_bits(dtypes[i])) add_cache(r, dtypes[i], AL_RECALL_RESIDUAL_NONE);
        for (int j = 0; al_kv_dtype_bits(dtypes[i]) && j < n_residuals; j++)
            add_cache(r, dtypes[i], residuals[j]);
    }
}

void al_recall_free(al_recall *r)
{
    free(r->o);
    r->o = NULL;
    r->n = r->cap = 0;
}

static al_recall_outcome *push(al_recall *r)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 256;
        r->o = realloc(r->o, (size_t)r->cap * sizeof *r->o);
        AL_ASSERT(r->o != NULL);
    }
    return &r->o[r->n++];
}

/* ------------------------------------------------------------ one example */

static int argmax(const float *x, int V)
{
    int best = 0;
    for (int v = 1; v < V; v++)
        if (x[v] > x[best]) best = v;
    return best;
}

/* in, tgt, w (L) through d: prefill up to the first answer, then
 * teacher-forced steps to the last (o's answers, right and loss). */
static int run_example(al_decoder *d, const int *in, const int *tgt, const float *w, int L,
                       al_recall_outcome *o, al_err *e)
{
    int first = -1, last = -1, V = d->m->cfg.vocab_size;
    for (int t = 0; t < L; t++)
        if (w[t] > 0) last = t, first = first < 0 ? t : first;
    o->answers = o->right = 0;
    o->loss = 0;
    if (first < 0) return 0;   /* nothing asked: no answers, never exact */
    if (first > 0 && al_decoder_prefill(d, in, first, e) != 0) return -1;
    if (first == 0) al_decoder_reset(d);
    for (int t = first; t <= last; t++) {
        const float *z = al_decoder_step(d, in[t]);
        if (w[t] <= 0) continue;
        o->answers++;
        o->right += argmax(z, V) == tgt[t];
        o->loss += al_token_loss(z, V, tgt[t]);
    }
    o->loss /= o->answers;
    return 0;
}

/* A decoder of `context` tokens for cache c: its residual set on m's
 * config while the caches are made (and the count it came to noted). */
static int open_cache(al_decoder *d, al_model *m, al_recall_cache *c, int context, al_err *e)
{
    al_model_config *k = &m->cfg;
    int group = k->kv_quant_group, residual = k->kv_quant_residual;
    int def = group ? residual : AL_KV_QUANT_RESIDUAL;
    c->tokens = c->residual == AL_RECALL_RESIDUAL_NONE ? -1
              : c->residual == AL_RECALL_RESIDUAL_DEFAULT ? def : c->residual;
    if (c->tokens >= 0) {   /* a config without a group means the defaults */
        k->kv_quant_group = group ? group : AL_KV_QUANT_GROUP;
        k->kv_quant_residual = c->tokens;
    }
    int rc = al_decoder_init(d, m, context, c->dtype, e);
    k->kv_quant_group = group, k->kv_quant_residual = residual;
    return rc;
}

/* ------------------------------------------------------------ tasks */

int al_recall_passkey(al_score_in *s, const al_passkey_grid *g, al_recall *r, al_err *e)
{
    int nl = g->n_lengths, nd = g->n_depths, T = s->m.cfg.seq_len, Lmax = 0;
    int lengths[AL_PASSKEY_MAX_GRID] = {T, 2 * T, 4 * T};
    double depths[AL_PASSKEY_MAX_GRID] = {0, 0.25, 0.5, 0.75};
    long examples = g->examples ? g->examples : 20;
    if (nl) memcpy(lengths, g->lengths, sizeof lengths);
    else nl = 3;
    if (nd) memcpy(depths, g->depths, sizeof depths);
    else nd = 4;
    for (int i = 0; i < nl; i++) Lmax = lengths[i] > Lmax ? lengths[i] : Lmax;
    if (s->m.cfg.vocab_size != 256)
        return al_errf(e, "passkey: the checkpoint's vocabulary is %d, not bytes (256)",
                       s->m.cfg.vocab_size);
    uint64_t seed = al_passkey_seed(g->seed ? (uint64_t)g->seed : 1, AL_SPLIT_TEST);
    int *in = al_malloc((size_t)Lmax * sizeof(int)), *tgt = al_malloc((size_t)Lmax * sizeof(int));
    float *w = al_malloc((size_t)Lmax * sizeof(float));
    int rc = 0;
    r->per = (long)nl * nd * examples;
    for (int c = 0; c < r->n_caches && !rc; c++) {
        al_decoder d;
        if ((rc = open_cache(&d, &s->m, &r->caches[c], Lmax, e)) != 0) break;
        for (long k = 0; k < r->per && !rc; k++) {
            int L = lengths[k / (nd * examples)];
            double depth = depths[k / examples % nd];
            al_passkey_make((const unsigned char *)s->bytes, s->n, seed, k % examples, L, depth,
                            in, tgt, w);
            al_recall_outcome *o = push(r);
            *o = (al_recall_outcome){AL_RECALL_PASSKEY, L, depth, k % examples, 0, 0, 0};
            rc = run_example(&d, in, tgt, w, L, o, e);
        }
        al_decoder_free(&d);
        al_progress_line("recall: passkey through cache %d/%d", c + 1, r->n_caches);
    }
    al_progress_end();
    free(in), free(tgt), free(w);
    return rc;
}

int al_recall_mqar(al_model *m, al_data *d, long examples, al_recall *r, al_err *e)
{
    int T = m->cfg.seq_len, rc = 0;
    if (examples > d->n_examples[AL_SPLIT_TEST]) examples = d->n_examples[AL_SPLIT_TEST];
    int *in = al_malloc((size_t)T * sizeof(int)), *tgt = al_malloc((size_t)T * sizeof(int));
    float *w = al_malloc((size_t)T * sizeof(float));
    r->per = examples;
    for (int c = 0; c < r->n_caches && !rc; c++) {
        al_decoder dec;
        if ((rc = open_cache(&dec, m, &r->caches[c], T, e)) != 0) break;
        for (long k = 0; k < examples && !rc; k++) {
            al_data_examples(d, AL_SPLIT_TEST, k, 1, T, in, tgt, w);
            al_recall_outcome *o = push(r);
            *o = (al_recall_outcome){AL_RECALL_MQAR, T, NAN, k, 0, 0, 0};
            rc = run_example(&dec, in, tgt, w, T, o, e);
        }
        al_decoder_free(&dec);
        al_progress_line("recall: mqar through cache %d/%d", c + 1, r->n_caches);
    }
    al_progress_end();
    free(in), free(tgt), free(w);
    return rc;
}

/* ------------------------------------------------------------ summary */

static int exact(const al_recall_outcome *o) { return o->answers > 0 && o->right == o->answers; }

/* Cell (task, length, cache c) over its examples, paired with cache 0's. */
static void fill_cell(const al_recall *r, int c, long k0, al_recall_cell *x)
{
    const al_recall_outcome *a = r->o + c * r->per, *f = r->o;
    *x = (al_recall_cell){a[k0].task, a[k0].length, c, .p = NAN, .p_holm = NAN};
    for (long k = k0; k < r->per && a[k].task == x->task && a[k].length == x->length; k++) {
        int q = exact(&a[k]), b = exact(&f[k]);
        x->examples++;
        x->exact += q, x->f32_exact += b;
        x->only_f32 += b && !q, x->only_this += q && !b;
        x->loss += a[k].loss, x->f32_loss += f[k].loss;
    }
    x->loss /= x->examples, x->f32_loss /= x->examples;
    if (c > 0) x->p = al_mcnemar_p((int)x->only_f32, (int)x->only_this);
}

int al_recall_summarize(const al_recall *r, al_recall_cell **cells)
{
    int n = 0, m = 0;
    al_recall_cell *x = al_calloc((size_t)(r->per * r->n_caches + 1), sizeof *x);
    for (int c = 0; r->per && c < r->n_caches; c++)
        for (long k = 0; k < r->per; k += x[n++].examples)
            fill_cell(r, c, k, &x[n]);
    double *p = al_calloc((size_t)n + 1, sizeof *p), *adj = al_calloc((size_t)n + 1, sizeof *adj);
    for (int i = 0; i < n; i++)
        if (x[i].cache > 0) p[m++] = x[i].p;
    al_holm_adjust(m, p, adj);
    for (int i = 0, j = 0; i < n; i++)
        if (x[i].cache > 0) x[i].p_holm = adj[j++];
    free(p), free(adj);
    *cells = x;
    return n;
}

/* ------------------------------------------------------------ files */

/* The residual asked for, as kv_quant_residuals says it ("0", "default"),
 * or "none"; and the count it came to (empty for none). */
static void residual_cells(const al_recall_cache *c, char *asked, char *tokens, size_t n)
{
    if (c->residual == AL_RECALL_RESIDUAL_NONE) snprintf(asked, n, "none");
    else if (c->residual == AL_RECALL_RESIDUAL_DEFAULT) snprintf(asked, n, "default");
    else snprintf(asked, n, "%d", c->residual);
    if (c->tokens < 0) tokens[0] = 0;
    else snprintf(tokens, n, "%d", c->tokens);
}

static int write_outcomes(const char *dir, const al_recall *r, al_err *e)
{
    char path[AL_PATH_LEN + 32], tmp[AL_PATH_LEN + 64], asked[32], tokens[32];
    snprintf(path, sizeof path, "%s/recall.csv", dir);
    FILE *f = al_open_atomic(path, tmp, sizeof tmp, e);
    if (!f) return -1;
    fputs(AL_RECALL_HEADER, f);
    for (long i = 0; i < r->n; i++) {
        const al_recall_outcome *o = &r->o[i];
        const al_recall_cache *c = &r->caches[i / r->per];
        residual_cells(c, asked, tokens, sizeof asked);
        fprintf(f, "%s,%d,", al_recall_task_name(o->task), o->length);
        if (!isnan(o->depth)) fprintf(f, "%.6g", o->depth);
        fprintf(f, ",%ld,%s,%s,%s,%d,%d,%s,%.9g\n", o->example, al_kv_dtype_name(c->dtype),
                tokens, asked, o->answers, o->right, exact(o) ? "true" : "false", o->loss);
    }
    return al_commit_atomic(f, tmp, path, e);
}

static void print_p(FILE *f, double p)
{
    if (!isnan(p)) fprintf(f, "%.9g", p);
}

static int write_summary(const char *dir, const al_recall *r, al_err *e)
{
    char path[AL_PATH_LEN + 32], tmp[AL_PATH_LEN + 64], asked[32], tokens[32];
    al_recall_cell *x;
    int n = al_recall_summarize(r, &x);
    snprintf(path, sizeof path, "%s/recall_summary.csv", dir);
    FILE *f = al_open_atomic(path, tmp, sizeof tmp, e);
    if (!f) {
        free(x);
        return -1;
    }
    fputs(AL_RECALL_SUMMARY_HEADER, f);
    for (int i = 0; i < n; i++) {
        const al_recall_cell *c = &x[i];
        double rate = (double)c->exact / c->examples, base = (double)c->f32_exact / c->examples;
        residual_cells(&r->caches[c->cache], asked, tokens, sizeof asked);
        fprintf(f, "%s,%d,%s,%s,%s,%ld,%ld,%ld,%.9g,%.9g,%.9g,%ld,%ld,",
                al_recall_task_name(c->task), c->length,
                al_kv_dtype_name(r->caches[c->cache].dtype), tokens, asked, c->examples,
                c->exact, c->f32_exact, rate, base, rate - base, c->only_f32, c->only_this);
        print_p(f, c->p);
        fputc(',', f);
        print_p(f, c->p_holm);
        fprintf(f, ",%.9g,%.9g\n", c->loss, c->f32_loss);
    }
    free(x);
    return al_commit_atomic(f, tmp, path, e);
}

int al_recall_write(const char *dir, const al_recall *r, al_err *e)
{
    if (al_mkdirs(dir, e) != 0) return -1;
    /* the summary last: its presence says the set is whole (the runner's resume) */
    return write_outcomes(dir, r, e) || write_summary(dir, r, e) ? -1 : 0;
}
