/*
 * decode.c - incremental decoding over the variants' KV caches, and sampling.
 *
 * A decode step is the model's forward pass for one token, written out for
 * T = 1: embedding, per layer x += attn(rmsnorm(x)) through the variant's
 * decode hook (which appends to and reads from its cache), x +=
 * mlp(rmsnorm(x)), final norm, tied head. The full-sequence forward in
 * model.c is its reference: tests check the two agree at every position.
 */
#include "al_decode.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t al_kv_bytes_per_token(const al_model_config *c, int dtype)
{
    return al_model_kv_elems_per_token(c) * al_kv_dtype_size(dtype);
}

/* ------------------------------------------------------------ decoder */

static int check_decodable(const al_model *m, int context, int dtype, al_err *e)
{
    const al_variant_ops *v = m->cfg.attn;
    if (!v->prefill || !v->decode || !v->decode_scratch_floats)
        return al_errf(e, "variant '%s' has no decode hooks: it cannot generate", v->name);
    if (!m->cfg.causal)
        return al_errf(e, "model.causal is false: a model trained without the causal mask "
                       "sees the future and cannot generate");
    if (context < 1) return al_errf(e, "context (%d) must be at least 1", context);
    if (dtype < 0 || dtype >= AL_KV_NDTYPES) return al_errf(e, "unknown kv dtype %d", dtype);
    return 0;
}

int al_decoder_init(al_decoder *d, al_model *m, int context, int dtype, al_err *e)
{
    memset(d, 0, sizeof *d);
    if (check_decodable(m, context, dtype, e) != 0) return -1;
    const al_model_config *c = &m->cfg;
    size_t D = c->d_model, F = m->d_ff, V = c->vocab_size;
    size_t scratch = c->attn->decode_scratch_floats(&m->ashape, context);
    d->m = m;
    d->context = context;
    d->dtype = dtype;
    d->cache = al_calloc((size_t)c->n_layer, sizeof *d->cache);
    size_t elems = c->attn->kv_elems(&m->ashape);
    for (int l = 0; l < c->n_layer; l++) d->cache[l] = al_kv_cache_new(elems, context, dtype);
    float *p = d->buf = al_calloc(3 * D + 2 * F + V + scratch, sizeof(float));
    d->x = p; p += D;
    d->h = p; p += D;
    d->a = p; p += D;
    d->u = p; p += F;
    d->g = p; p += F;
    d->logits = p; p += V;
    d->scratch = p;
    return 0;
}

void al_decoder_free(al_decoder *d)
{
    if (d->cache)
        for (int l = 0; l < d->m->cfg.n_layer; l++) al_kv_cache_free(d->cache[l]);
    free(d->cache);
    free(d->buf);
    memset(d, 0, sizeof *d);
}

void al_decoder_reset(al_decoder *d) { d->pos = 0; }

size_t al_decoder_cache_bytes(const al_decoder *d)
{
    size_t n = 0;
    for (int l = 0; l < d->m->cfg.n_layer; l++) n += al_kv_cache_bytes(d->cache[l]);
    return n;
}

int al_decoder_prefill(al_decoder *d, const int *tokens, int n, al_err *e)
{
    al_model *m = d->m;
    const al_model_config *c = &m->cfg;
    if (n < 1) return al_errf(e, "prefill: the prompt is empty");
    if (n > d->context)
        return al_errf(e, "prefill: the prompt (%d tokens) is longer than the context (%d)",
                       n, d->context);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
            return al_errf(e, "prefill: token %d at position %d is outside the vocabulary "
                           "(%d)", tokens[i], i, c->vocab_size);
    /* The batched pass stops at seq_len: its activations (T x T attention
     * per head and layer) then never exceed the trained shape's. */
    int nb = n < c->seq_len ? n : c->seq_len;
    if (al_model_reserve(m, 1, nb, e) != 0) return -1;
    al_model_forward(m, tokens, NULL, NULL, 1, nb);
    for (int l = 0; l < c->n_layer; l++)
        c->attn->prefill(&m->ashape, d->cache[l], m->layers[l].attn_act,
                         m->layers[l].attn_p, nb);
    memcpy(d->logits, m->logits + (size_t)(nb - 1) * c->vocab_size,
           c->vocab_size * sizeof(float));
    d->pos = nb;
    for (int i = nb; i < n; i++) al_decoder_step(d, tokens[i]);
    return 0;
}

const float *al_decoder_step(al_decoder *d, int token)
{
    al_model *m = d->m;
    const al_model_config *c = &m->cfg;
    int D = c->d_model, F = m->d_ff, V = c->vocab_size;
    float eps = (float)c->norm_eps;
    AL_ASSERT(d->pos < d->context && token >= 0 && token < V);
    memcpy(d->x, m->tok_emb + (size_t)token * D, D * sizeof(float));
    for (int l = 0; l < c->n_layer; l++) {
        al_layer *L = &m->layers[l];
        al_rmsnorm_forward(d->h, NULL, d->x, L->attn_norm, 1, D, eps);
        c->attn->decode(&m->ashape, d->a, d->scratch, d->h, L->attn_p, d->cache[l], d->pos);
        for (int i = 0; i < D; i++) d->x[i] += d->a[i];
        al_rmsnorm_forward(d->h, NULL, d->x, L->mlp_norm, 1, D, eps);
        al_linear_row(d->u, d->h, L->w1, D, F);
        al_gelu_forward(d->g, d->u, F);
        al_linear_row(d->a, d->g, L->w2, F, D);
        for (int i = 0; i < D; i++) d->x[i] += d->a[i];
    }
    al_rmsnorm_forward(d->h, NULL, d->x, m->final_norm, 1, D, eps);
    al_linear_row(d->logits, d->h, m->tok_emb, D, V);   /* tied head */
    d->pos++;
    return d->logits;
}

void al_decoder_fill_random(al_decoder *d, int n, uint64_t seed)
{
    AL_ASSERT(n >= 0 && n <= d->context);
    al_rng r;
    al_rng_seed(&r, seed);
    size_t elems = al_kv_cache_elems(d->cache[0]);
    float *row = al_malloc(elems * sizeof(float));   /* set-up, not a decode step */
    for (int l = 0; l < d->m->cfg.n_layer; l++)
        for (int t = 0; t < n; t++) {
            for (size_t j = 0; j < elems; j++) row[j] = (float)al_rng_normal(&r);
            al_kv_row_put(d->cache[l], t, row);
        }
    free(row);
    d->pos = n;
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
