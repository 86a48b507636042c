/*
 * decode.c - incremental decoding over the variants' KV caches, and sampling.
 *
 * A decode step is the model's forward pass for one token, written out for
 * T = 1: embedding, per layer x += attn(rmsnorm(x)) through the variant's
 * decode hook (which appends to and reads from its cache; a kv_share
 * consumer's share_decode reads its producer's, and has none), x +=
 * mlp(rmsnorm(x)), final norm, tied head. The full-sequence forward in
 * model.c is its reference: tests check the two agree at every position.
 */
#include "al_decode.h"
#include "al_bf16.h"
#include "al_memory.h"
#include "al_parallel.h"
#include "al_registry.h"
#include "al_size.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t al_kv_bytes_per_token(const al_model_config *c, int dtype)
{
    if (dtype < AL_KV_NDTYPES) return al_model_kv_elems_per_token(c) * al_kv_dtype_size(dtype);
    return al_model_kv_bytes_at(c, dtype, c->seq_len) / (size_t)c->seq_len;
}

/* ------------------------------------------------------------ decoder */

static int check_decodable(const al_model *m, int context, int dtype, al_err *e)
{
    for (int l = 0; l < m->cfg.n_layer; l++) {
        const al_variant *v = m->layers[l].attn;
        if (!al_variant_decodes(v))
            return al_errf(e, "variant '%s' has no decode hooks: it cannot generate", v->name);
    }
    if (!m->cfg.causal)
        return al_errf(e, "model.causal is false: a model trained without the causal mask "
                       "sees the future and cannot generate");
    if (context < 1) return al_errf(e, "context (%d) must be at least 1", context);
    if (dtype < 0 || dtype >= AL_KV_NALL) return al_errf(e, "unknown kv dtype %d", dtype);
    for (int l = 0; l < m->cfg.n_layer; l++) {   /* a plugin's answer, before it is trusted */
        const al_layer *L = &m->layers[l];
        int rows = L->attn->decode->kv_rows(L->ctx, context);
        if (rows < 1 || rows > context)
            return al_errf(e, "variant '%s': kv_rows at context %d is %d, not 1 to %d",
                           L->attn->name, context, rows, context);
    }
    return 0;
}

/* 1 when a step of n sequences of layer l goes through decode_batch (the
 * variant has it; the registry leaves the pair whole or NULL), else
 * through decode once per sequence. */
static int batched(const al_layer *L, int n)
{
    return n > 1 && L->attn->decode->decode_batch != NULL;
}

/* Scratch floats for one step of up to `batch` sequences: decode's, or
 * decode_batch's when the step goes through it; the widest layer's (the
 * layers share it). */
static size_t scratch_floats(const al_model *m, int batch, int context)
{
    size_t n = 0;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        const al_layer *L = &m->layers[l];
        const al_variant_decode *dv = L->attn->decode;
        size_t n1 = dv->scratch_floats(L->ctx, context);
        if (batched(L, batch)) {
            size_t nb = dv->batch_scratch_floats(L->ctx, context, batch);
            n1 = nb > n1 ? nb : n1;
        }
        n = n1 > n ? n1 : n;
    }
    return n;
}

/* Bytes al_decoder_init_batch allocates for (batch, context): every
 * layer's cache of each sequence and the step buffers, in checked
 * arithmetic; UINT64_MAX when they do not fit in 64 bits. */
static uint64_t decoder_bytes(const al_model *m, int batch, int context, int dtype)
{
    const al_model_config *c = &m->cfg;
    size_t D = c->d_model, F = m->d_ff, V = c->vocab_size, B = batch, wide, caches = 0, n;
    wide = D > F ? D : F;
    wide = wide > V ? wide : V;
    for (int l = 0; l < c->n_layer; l++) {
        if (m->layers[l].kv_src != l) continue;
        al_kv_layout o = al_model_layer_kv_layout(c, l, context);
        size_t one = al_kv_cache_bytes_for(o.elems, o.key_elems, o.rows,
                                           al_model_layer_kv_dtype(&o, dtype), o.group, o.residual);
        if (al_size_mad(one, B, caches, &caches)) return UINT64_MAX;
    }
    if (al_size_mad(B, 3 * D + 2 * F + V + (B > 1 ? wide : 0), scratch_floats(m, batch, context),
                    &n) || al_size_mad(n, sizeof(float), caches, &n))
        return UINT64_MAX;
    return n;
}

/* Refuse before allocating what the process cannot have, naming the
 * largest context that fits (by the same count, so the advice is accepted). */
static int check_memory(const al_model *m, int batch, int context, int dtype, al_err *e)
{
    char what[160];
    uint64_t have = al_memory_available(0, al_parallel_threads(), what, sizeof what);
    uint64_t need = decoder_bytes(m, batch, context, dtype);
    if (need <= have) return 0;
    /* the advice keeps 1/64 in hand: the next run's own use differs by a few pages */
    uint64_t room = have - have / 64;
    int lo = 0, hi = context;   /* decoder_bytes(lo) fits (or lo = 0), decoder_bytes(hi) does not */
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (decoder_bytes(m, batch, mid, dtype) <= room) lo = mid;
        else hi = mid;
    }
    if (lo < 1)
        return al_errf(e, "a context of %d tokens for %d sequence(s) needs %llu bytes, more than "
                       "the %llu bytes of %s, and no context fits: lower the batch", context,
                       batch, (unsigned long long)need, (unsigned long long)have, what);
    return al_errf(e, "a context of %d tokens for %d sequence(s) needs %llu bytes, more than the "
                   "%llu bytes of %s; a context of at most %d fits", context, batch,
                   (unsigned long long)need, (unsigned long long)have, what, lo);
}

int al_decoder_init_batch(al_decoder *d, al_model *m, int batch, int context, int dtype,
                          al_err *e)
{
    memset(d, 0, sizeof *d);
    if (check_decodable(m, context, dtype, e) != 0) return -1;
    if (batch < 1) return al_errf(e, "batch (%d) must be at least 1", batch);
    if (check_memory(m, batch, context, dtype, e) != 0) return -1;
    const al_model_config *c = &m->cfg;
    size_t D = c->d_model, F = m->d_ff, V = c->vocab_size, B = batch;
    size_t scratch = scratch_floats(m, batch, context);
    d->m = m;
    d->context = context;
    d->dtype = dtype;
    d->batch = batch;
    d->cache = al_calloc((size_t)c->n_layer * B, sizeof *d->cache);
    for (size_t i = 0; i < (size_t)c->n_layer * B; i++) {   /* each layer its own rows; */
        if (m->layers[i / B].kv_src != (int)(i / B)) continue;   /* a kv_share consumer: none */
        al_kv_layout o = al_model_layer_kv_layout(c, (int)(i / B), context);   /* a bounded one fewer */
        d->cache[i] = al_kv_cache_new_quant(o.elems, o.key_elems, o.rows,
                                            al_model_layer_kv_dtype(&o, dtype), o.group,
                                            o.residual);
    }
    size_t wide = D > F ? D : F;
    wide = wide > V ? wide : V;
    d->pos = al_calloc(B, sizeof *d->pos);
    float *p = d->buf = al_calloc(B * (3 * D + 2 * F + V) + (B > 1 ? B * wide : 0) + scratch,
                                  sizeof(float));
    d->x = p; p += B * D;
    d->h = p; p += B * D;
    d->a = p; p += B * D;
    d->u = p; p += B * F;
    d->g = p; p += B * F;
    d->logits = p; p += B * V;
    d->tmp = B > 1 ? p : NULL; p += B > 1 ? B * wide : 0;
    d->scratch = p;
    return 0;
}

int al_decoder_init(al_decoder *d, al_model *m, int context, int dtype, al_err *e)
{
    return al_decoder_init_batch(d, m, 1, context, dtype, e);
}

void al_decoder_free(al_decoder *d)
{
    if (d->cache)
        for (int i = 0; i < d->m->cfg.n_layer * d->batch; i++) al_kv_cache_free(d->cache[i]);
    free(d->cache);
    free(d->buf);
    free(d->pos);
    memset(d, 0, sizeof *d);
}

void al_decoder_reset(al_decoder *d)
{
    for (int b = 0; b < d->batch; b++) d->pos[b] = 0;
}

size_t al_decoder_cache_bytes(const al_decoder *d)
{
    size_t n = 0;
    for (int i = 0; i < d->m->cfg.n_layer * d->batch; i++)
        if (d->cache[i]) n += al_kv_cache_bytes(d->cache[i]);
    return n;
}

size_t al_decoder_row_bytes(const al_decoder *d)
{
    size_t n = 0;
    for (int l = 0; l < d->m->cfg.n_layer; l++) {
        const al_kv_cache *c = d->cache[(size_t)l * d->batch];
        if (!c) continue;   /* a kv_share consumer */
        if (d->m->layers[l].attn->decode->storage == AL_KV_STATE) continue;   /* none per token */
        n += al_kv_cache_bytes(c) / (size_t)al_kv_cache_context(c);
    }
    return n;
}

static const float *step_rows(al_decoder *d, int b0, int n, const int *tokens);

static int prefill_seq(al_decoder *d, int b, const int *tokens, int n, al_err *e)
{
    al_model *m = d->m;
    const al_model_config *c = &m->cfg;
    AL_ASSERT(b >= 0 && b < d->batch);
    if (n < 1) return al_errf(e, "prefill: the prompt is empty");
    if (n > d->context)
        return al_errf(e, "prefill: the prompt (%d tokens) is longer than the context (%d)",
                       n, d->context);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
            return al_errf(e, "prefill: token %d at position %d is outside the vocabulary "
                           "(%d)", tokens[i], i, c->vocab_size);
    /* The batched pass stops at seq_len: its activations then never exceed
     * the trained shape's. */
    int nb = n < c->seq_len ? n : c->seq_len;
    if (al_model_reserve(m, 1, nb, e) != 0) return -1;
    al_model_forward(m, tokens, NULL, NULL, 1, nb);
    for (int l = 0; l < c->n_layer; l++)
        if (m->layers[l].kv_src == l)   /* consumers cache nothing */
            m->layers[l].attn->decode->prefill(m->layers[l].ctx, d->cache[l * d->batch + b],
                                               m->layers[l].attn_act, m->layers[l].attn_p, nb);
    memcpy(d->logits + (size_t)b * c->vocab_size,
           m->logits + (size_t)(nb - 1) * c->vocab_size, c->vocab_size * sizeof(float));
    d->pos[b] = nb;
    for (int i = nb; i < n; i++) step_rows(d, b, 1, &tokens[i]);
    return 0;
}

/* Prefill and steps run at the model's precision (al_model.h), leaving
 * the process's as they found it. */
int al_decoder_prefill_seq(al_decoder *d, int b, const int *tokens, int n, al_err *e)
{
    int was = al_gemm_enter(d->m->precision);
    int rc = prefill_seq(d, b, tokens, n, e);
    al_gemm_leave(was);
    return rc;
}

int al_decoder_prefill(al_decoder *d, const int *tokens, int n, al_err *e)
{
    return al_decoder_prefill_seq(d, 0, tokens, n, e);
}

/* out (n, OC) = x (n, IC) . w^T: one row by a matrix-vector product (a
 * matrix product would repack w for one row), several by a product. */
static void linear(al_decoder *d, float *out, const float *x, const float *w, int n, int IC,
                   int OC)
{
    if (n == 1) al_linear_row(out, x, w, IC, OC);
    else al_linear_forward_few(out, d->tmp, x, w, n, IC, OC);
}

/* The attention of layer l for sequences [b0, b0 + n): the variant's
 * decode_batch, or its decode once per sequence. */
static void attention(al_decoder *d, int l, int b0, int n)
{
    const al_model *m = d->m;
    const al_layer *L = &m->layers[l];
    const al_variant *v = L->attn;
    const void *s = L->ctx;
    int D = m->cfg.d_model;
    float *const *p = m->layers[l].attn_p;
    al_kv_cache **c = d->cache + (size_t)m->layers[l].kv_src * d->batch + b0;
    float *h = d->h + (size_t)b0 * D, *a = d->a + (size_t)b0 * D;
    if (m->layers[l].kv_src != l) {   /* a kv_share consumer: the producer's cache, */
        for (int i = 0; i < n; i++)  /* which already holds this token's row */
            v->share->decode(s, a + (size_t)i * D, d->scratch, h + (size_t)i * D, p, c[i],
                             d->pos[b0 + i]);
        return;
    }
    if (batched(L, n)) {
        v->decode->decode_batch(s, a, d->scratch, h, p, c, d->pos + b0, n);
        return;
    }
    for (int i = 0; i < n; i++)
        v->decode->decode(s, a + (size_t)i * D, d->scratch, h + (size_t)i * D, p, c[i],
                          d->pos[b0 + i]);
}

static void add_rows(float *x, const float *a, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] += a[i];
}

/* One token into each of sequences [b0, b0 + n): the model's forward for
 * T = 1, with n rows. */
static const float *step_rows(al_decoder *d, int b0, int n, const int *tokens)
{
    al_model *m = d->m;
    const al_model_config *c = &m->cfg;
    int D = c->d_model, F = m->d_ff, V = c->vocab_size;
    float eps = (float)c->norm_eps;
    float *x = d->x + (size_t)b0 * D, *h = d->h + (size_t)b0 * D, *a = d->a + (size_t)b0 * D;
    float *u = d->u + (size_t)b0 * F, *g = d->g + (size_t)b0 * F;
    float *logits = d->logits + (size_t)b0 * V;
    for (int i = 0; i < n; i++) {
        AL_ASSERT(d->pos[b0 + i] < d->context && tokens[i] >= 0 && tokens[i] < V);
        memcpy(x + (size_t)i * D, m->tok_emb + (size_t)tokens[i] * D, D * sizeof(float));
    }
    for (int l = 0; l < c->n_layer; l++) {
        al_layer *L = &m->layers[l];
        al_rmsnorm_forward(h, NULL, x, L->attn_norm, n, D, eps);
        attention(d, l, b0, n);
        add_rows(x, a, (size_t)n * D);
        al_rmsnorm_forward(h, NULL, x, L->mlp_norm, n, D, eps);
        linear(d, u, h, L->w1, n, D, F);
        al_gelu_forward(g, u, (size_t)n * F);
        linear(d, a, g, L->w2, n, F, D);
        add_rows(x, a, (size_t)n * D);
    }
    al_rmsnorm_forward(h, NULL, x, m->final_norm, n, D, eps);
    linear(d, logits, h, m->tok_emb, n, D, V);   /* tied head */
    for (int i = 0; i < n; i++) d->pos[b0 + i]++;
    return logits;
}

static const float *step_at_precision(al_decoder *d, int n, const int *tokens)
{
    int was = al_gemm_enter(d->m->precision);
    const float *logits = step_rows(d, 0, n, tokens);
    al_gemm_leave(was);
    return logits;
}

const float *al_decoder_step(al_decoder *d, int token)
{
    AL_ASSERT(d->batch == 1);
    return step_at_precision(d, 1, &token);
}

const float *al_decoder_step_batch(al_decoder *d, const int *tokens)
{
    return step_at_precision(d, d->batch, tokens);
}

void al_decoder_fill_random(al_decoder *d, int n, uint64_t seed)
{
    AL_ASSERT(n >= 0 && n <= d->context);
    al_rng r;
    al_rng_seed(&r, seed);
    size_t wide = 0;
    for (int i = 0; i < d->m->cfg.n_layer * d->batch; i++)
        if (d->cache[i] && al_kv_cache_elems(d->cache[i]) > wide)
            wide = al_kv_cache_elems(d->cache[i]);
    float *row = al_malloc(wide * sizeof(float));   /* set-up, not a decode step */
    for (int i = 0; i < d->m->cfg.n_layer * d->batch; i++)
        for (int t = 0; d->cache[i] && t < n && t < al_kv_cache_context(d->cache[i]); t++) {
            size_t elems = al_kv_cache_elems(d->cache[i]);
            for (size_t j = 0; j < elems; j++) row[j] = (float)al_rng_normal(&r);
            al_kv_row_put(d->cache[i], t, row);
        }
    free(row);
    for (int b = 0; b < d->batch; b++) d->pos[b] = n;
}

/* ------------------------------------------------------------ sampling */

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static int cmp_desc(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

int al_sample(const float *logits, int V, double temperature, int top_k, al_rng *rng,
              float *work)
{
    AL_ASSERT(V >= 1 && temperature >= 0 && top_k >= 0);
    if (temperature == 0) return argmax(logits, V);
    float thr = -INFINITY;   /* the k-th largest logit */
    if (top_k > 0 && top_k < V) {
        memcpy(work, logits, V * sizeof(float));
        qsort(work, V, sizeof(float), cmp_desc);
        thr = work[top_k - 1];
    }
    /* Keep the logits above thr, then those equal to it by index until k
     * are kept, so that ties never let more than k through. */
    int above = 0;
    for (int i = 0; i < V; i++) above += logits[i] > thr;
    int ties = (top_k > 0 && top_k < V) ? top_k - above : V;
    float mx = logits[argmax(logits, V)];
    double sum = 0;
    for (int i = 0; i < V; i++) {
        int keep = logits[i] > thr || (logits[i] == thr && ties-- > 0);
        work[i] = keep ? (float)exp((logits[i] - mx) / temperature) : 0.0f;
        sum += work[i];
    }
    double u = al_rng_uniform(rng) * sum, acc = 0;
    int last = 0;
    for (int i = 0; i < V; i++) {
        if (work[i] == 0.0f) continue;
        acc += work[i];
        last = i;
        if (u < acc) return i;
    }
    return last;   /* u rounded past the last kept token */
}
