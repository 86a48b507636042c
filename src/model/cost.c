/*
 * cost.c - the cost model of a config (contract in al_cost.h): each
 * attention's figures from its costs sub-table, or counted by running it,
 * and the shared parts (MLP, head) counted here.
 */
#include "al_cost.h"

#include <stdlib.h>
#include <string.h>

#include "al_gemm.h"
#include "al_kvcache.h"
#include "al_tensors.h"

/* One attention of the cycle, as a producer (or plain layer) or as a
 * kv_share consumer: its figures at the options' context. */
typedef struct attn_cost {
    double train, prefill, decode;    /* per token */
    double cache_read, attn_params;   /* bytes read at N; its parameter floats */
    int rows_read, estimated;
} attn_cost;

/* ------------------------------------------------------------ cache bytes */

double al_cost_cache_read(size_t elems, size_t key_elems, int rows, int n, int dtype, int group,
                          int residual, int state)
{
    if (state) return 4.0 * elems;   /* one f32 row, whatever the context */
    if (n > rows) n = rows;
    if (!al_kv_dtype_bits(dtype)) return (double)n * elems * al_kv_dtype_size(dtype);
    /* what al_kv_cache_bytes_for allocates, less the ring rows not filled */
    double held = (double)al_kv_cache_bytes_for(elems, key_elems, rows, dtype, group, residual);
    int past = rows - 1 - residual > 0 ? rows - 1 - residual : 0;
    int quantized = past / group * group, ring = rows < residual + group ? rows : residual + group;
    double read = held - 4.0 * elems * (ring - (rows - quantized));
    return read * n / rows;   /* a subset read (decode_rows_read): its share */
}

/* ------------------------------------------------------------ counting a layer */

/* Parameter floats of a layer's tensors. */
static double spec_floats(const al_param_spec *s, int n)
{
    double f = 0;
    for (int i = 0; i < n; i++) f += (double)s[i].rows * (s[i].cols ? s[i].cols : 1);
    return f;
}

/* Buffers for one layer's pass over (1, T): zeroed, products do not care. */
typedef struct layer_bufs {
    float **p, **dp, *act, *scratch, *x, *out, *dx;
    int n;
} layer_bufs;

static void bufs_make(layer_bufs *b, const al_variant *v, const void *ctx, const al_param_spec *s,
                      int n, int T, int D)
{
    b->n = n;
    b->p = al_calloc((size_t)n, sizeof(float *));
    b->dp = al_calloc((size_t)n, sizeof(float *));
    for (int i = 0; i < n; i++) {
        size_t f = (size_t)s[i].rows * (s[i].cols ? s[i].cols : 1);
        b->p[i] = al_calloc(f, sizeof(float));
        b->dp[i] = al_calloc(f, sizeof(float));
    }
    b->act = al_calloc(v->train->act_floats(ctx, 1, T) + 1, sizeof(float));
    b->scratch = al_calloc(v->train->scratch_floats(ctx, 1, T) + 1, sizeof(float));
    b->x = al_calloc((size_t)T * D, sizeof(float));
    b->out = al_calloc((size_t)T * D, sizeof(float));
    b->dx = al_calloc((size_t)T * D, sizeof(float));
}

static void bufs_free(layer_bufs *b)
{
    for (int i = 0; i < b->n; i++) free(b->p[i]), free(b->dp[i]);
    free(b->p), free(b->dp), free(b->act), free(b->scratch), free(b->x), free(b->out),
        free(b->dx);
}

/* The products of one decode step at position context - 1, over a
 * zeroed f32 cache. */
static double count_decode(const al_variant *v, const void *ctx, const float *x,
                           float *const *p, int context, int D)
{
    const al_variant_decode *d = v->decode;
    if (!d->decode) return 0;
    al_kv_cache *c = al_kv_cache_new(d->kv_elems(ctx), al_attn_kv_rows(v, ctx, context),
                                     AL_KV_F32);
    float *s = al_calloc(d->scratch_floats(ctx, context) + 1, sizeof(float));
    float *out = al_calloc((size_t)D, sizeof(float));
    al_flops_count_begin();
    d->decode(ctx, out, s, x, p, c, context - 1);
    double f = al_flops_count_end();
    free(s), free(out);
    al_kv_cache_free(c);
    return f;
}

/* A layer without FLOP members, counted: forward and backward at
 * seq_len, forward (and prefill) at T, decode at N. */
static void count_layer(attn_cost *a, const al_variant *v, const void *ctx,
                        const al_attn_shape *sh, int T, int N)
{
    al_param_spec spec[AL_MAX_ATTN_PARAMS];
    int n = v->train->params(ctx, spec), S = sh->seq_len, D = sh->d_model;
    layer_bufs b;
    bufs_make(&b, v, ctx, spec, n, S, D);
    al_flops_count_begin();
    v->train->forward(ctx, b.out, b.act, b.scratch, b.x, b.p, 1, S);
    v->train->backward(ctx, b.dx, b.dp, b.scratch, b.out, b.x, b.act, b.p, 1, S);
    a->train = al_flops_count_end() / S;
    al_flops_count_begin();
    v->train->forward(ctx, b.out, b.act, b.scratch, b.x, b.p, 1, T);
    a->prefill = al_flops_count_end() / T;
    a->decode = count_decode(v, ctx, b.x, b.p, N, D);
    bufs_free(&b);
    /* no product seen: the variant multiplies on its own (or cannot
     * decode): 2 FLOPs per weight and token forward, twice that backward */
    if (!(a->train > 0)) {
        a->train = 6 * a->attn_params, a->prefill = 2 * a->attn_params;
        a->estimated = 1;
    }
    if (!(a->decode > 0)) a->decode = 2 * a->attn_params, a->estimated = 1;
}

/* A consumer without FLOP members: estimated the same way. */
static void estimate_layer(attn_cost *a)
{
    a->prefill = a->decode = 2 * a->attn_params;
    a->train = 6 * a->attn_params;
    a->estimated = 1;
}

/* ------------------------------------------------------------ one attention */

static void attn_flops(attn_cost *a, const al_variant *v, const void *ctx,
                       const al_attn_shape *sh, int consumer, int T, int N)
{
    const al_variant_costs *k = v->costs;
    if (k && k->train_flops_per_token && k->prefill_flops_per_token &&
        k->decode_flops_per_token) {
        a->train = k->train_flops_per_token(ctx, sh->seq_len, consumer);
        a->prefill = k->prefill_flops_per_token(ctx, T, consumer);
        a->decode = k->decode_flops_per_token(ctx, N, consumer);
    } else if (consumer) {
        estimate_layer(a);
    } else {
        count_layer(a, v, ctx, sh, T, N);
    }
}

/* Item k of the cycle, as a consumer or not, at the options. */
static void attn_of(attn_cost *a, const al_model_config *c, int k, int consumer,
                    const al_cost_opts *o)
{
    const al_variant *v;
    void *ctx = al_attn_ctx_of(c, k, &v);
    al_attn_shape sh;
    al_attn_shape_of(&sh, c, k);
    al_param_spec spec[AL_MAX_ATTN_PARAMS];
    memset(a, 0, sizeof *a);
    int n = consumer ? v->share->params(ctx, spec) : v->train->params(ctx, spec);
    a->attn_params = spec_floats(spec, n);
    int N = o->context, T = N < c->seq_len ? N : c->seq_len;
    attn_flops(a, v, ctx, &sh, consumer, T, N);
    al_kv_layout L = al_model_layer_kv_layout(c, k, N);
    a->rows_read = v->costs->decode_rows_read(ctx, N);
    if (L.state) a->rows_read = 1;
    a->cache_read = L.elems ? al_cost_cache_read(L.elems, L.key_elems, L.rows, a->rows_read,
                                                 al_model_layer_kv_dtype(&L, o->kv_dtype),
                                                 L.group, L.residual, L.state)
                            : 0;
    v->fini(ctx);
}

/* ------------------------------------------------------------ the model */

/* One decode step's FLOPs at `context` of a layer: its member, or its
 * products counted (an estimate for a consumer without the member). */
static double decode_step_flops(const al_variant *v, const void *ctx, const al_attn_shape *sh,
                                int consumer, int context, double attn_params)
{
    const al_variant_costs *k = v->costs;
    if (k && k->decode_flops_per_token) return k->decode_flops_per_token(ctx, context, consumer);
    if (consumer) return 2 * attn_params;
    al_param_spec spec[AL_MAX_ATTN_PARAMS];
    int n = v->train->params(ctx, spec);
    layer_bufs b;
    bufs_make(&b, v, ctx, spec, n, 1, sh->d_model);
    double f = count_decode(v, ctx, b.x, b.p, context, sh->d_model);
    bufs_free(&b);
    return f > 0 ? f : 2 * attn_params;   /* unseen: estimated (attn_of marks it) */
}

/* FLOPs of the attentions of every layer at each decode position past
 * the batched pass (a prefill longer than seq_len), summed. */
static double prefill_tail(const al_model_config *c, const al_cost_opts *o, int T)
{
    double f = 0;
    int K = al_config_n_attn(c);
    for (int k = 0; k < K && T < o->context; k++) {
        const al_variant *v;
        void *ctx = al_attn_ctx_of(c, k, &v);
        al_attn_shape sh;
        al_attn_shape_of(&sh, c, k);
        for (int l = k; l < c->n_layer; l += K) {
            int consumer = al_config_kv_consumer(c, l);
            al_param_spec spec[AL_MAX_ATTN_PARAMS];
            double params = spec_floats(spec, consumer ? v->share->params(ctx, spec)
                                                       : v->train->params(ctx, spec));
            if (v->decode->storage == AL_KV_STATE)   /* a state: the same step at every position */
                f += (double)(o->context - T) *
                     decode_step_flops(v, ctx, &sh, consumer, T + 1, params);
            else
                for (int pos = T; pos < o->context; pos++)
                    f += decode_step_flops(v, ctx, &sh, consumer, pos + 1, params);
        }
        v->fini(ctx);
    }
    return f;
}

static void add_layer(al_model_cost *m, const al_layer_cost *L)
{
    m->train_flops_per_token += L->train_flops;
    m->decode_flops_per_token += L->decode_flops;
    m->decode_bytes_per_token += L->decode_cache_bytes;
    m->estimated |= L->estimated;
}

/* Layer l from its item's figures, the MLP and norms added. */
static al_layer_cost layer_cost(const al_model_config *c, const attn_cost *a, int l, int consumer,
                                int kv_dtype, int N)
{
    double D = c->d_model, F = al_config_d_ff(c), mlp = 2 * 2 * D * F;
    al_layer_cost L = {consumer, a->train + 3 * mlp, a->prefill + mlp, a->decode + mlp,
                       a->cache_read, 4 * (a->attn_params + 2 * D + 2 * D * F), 0,
                       a->rows_read, a->estimated};
    L.kv_bytes = (double)al_model_layer_kv_bytes(c, l, kv_dtype, N);
    return L;
}

int al_cost_of_model(const al_model_config *c, const al_cost_opts *o, al_model_cost *m, al_err *e)
{
    memset(m, 0, sizeof *m);
    m->o = *o;
    if (!m->o.context) m->o.context = c->seq_len;
    if (m->o.batch < 1) m->o.batch = 1;
    if (al_model_counts(c, &m->n_params, NULL, e) != 0) return -1;
    int N = m->o.context, T = N < c->seq_len ? N : c->seq_len, K = al_config_n_attn(c);
    attn_cost items[2 * AL_MAX_LAYER_ATTN];   /* [k][consumer] */
    for (int k = 0; k < K; k++) {
        attn_of(&items[2 * k], c, k, 0, &m->o);
        if (c->kv_share > 1) attn_of(&items[2 * k + 1], c, k, 1, &m->o);
    }
    double D = c->d_model, V = c->vocab_size, prefill = 0;
    m->n_layer = c->n_layer;
    for (int l = 0; l < c->n_layer; l++) {
        int consumer = al_config_kv_consumer(c, l);
        al_layer_cost L = layer_cost(c, &items[2 * (l % K) + consumer], l, consumer,
                                     m->o.kv_dtype, N);
        add_layer(m, &L);
        prefill += L.prefill_flops;
        if (l < AL_COST_LAYERS) m->layer[m->n_kept++] = L;
    }
    /* the tied head: logits forward, d(hidden) and d(embedding) backward */
    m->head_train_flops = 3 * 2 * D * V;
    m->head_prefill_flops = m->head_decode_flops = 2 * D * V;
    m->shared_weight_bytes = 4 * (V * D + D);
    m->train_flops_per_token += m->head_train_flops;
    m->decode_flops_per_token += m->head_decode_flops;
    /* a prefill past seq_len feeds the rest token by token: decode steps */
    double tail = prefill_tail(c, &m->o, T) +
                  (N - T) * (2 * 2 * D * al_config_d_ff(c) * c->n_layer + 2 * D * V);
    m->prefill_flops_per_token = ((prefill + m->head_prefill_flops) * T + tail) / N;
    m->decode_bytes_per_token += 4.0 * m->n_params / m->o.batch;
    m->kv_bytes_at_context = (double)al_model_kv_bytes_at(c, m->o.kv_dtype, N);
    m->arithmetic_intensity = m->decode_flops_per_token / m->decode_bytes_per_token;
    return 0;
}
