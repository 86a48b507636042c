/*
 * model.c - the GPT-style model over a pluggable attention variant.
 *
 * The core never branches on the variant: it asks the variant's table for the
 * attention parameters and buffer sizes, and calls forward/backward.
 */
#include "al_model.h"

#include "al_bf16.h"
#include "al_memory.h"
#include "al_parallel.h"
#include "al_registry.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ parameters */

/* Points the per-layer views into params/grads, in table order. */
static void bind_views(al_model *m)
{
    const al_tensor *t = m->tensors;
    int k = 0;
    m->tok_emb = m->params + t[k].offset;
    m->d_tok_emb = m->grads + t[k++].offset;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        al_layer *L = &m->layers[l];
        L->attn_norm = m->params + t[k].offset;
        L->d_attn_norm = m->grads + t[k++].offset;
        for (int i = 0; i < L->n_attn_params; i++) {
            L->attn_p[i] = m->params + t[k].offset;
            L->attn_dp[i] = m->grads + t[k++].offset;
        }
        L->mlp_norm = m->params + t[k].offset;
        L->d_mlp_norm = m->grads + t[k++].offset;
        L->w1 = m->params + t[k].offset;
        L->d_w1 = m->grads + t[k++].offset;
        L->w2 = m->params + t[k].offset;
        L->d_w2 = m->grads + t[k++].offset;
    }
    m->final_norm = m->params + t[k].offset;
    m->d_final_norm = m->grads + t[k++].offset;
    AL_ASSERT(k == m->n_tensors);
}

int al_model_init(al_model *m, const al_model_config *cfg, al_err *e)
{
    memset(m, 0, sizeof *m);
    m->precision = -1;   /* the process's, until a run or a checkpoint says */
    m->cfg = *cfg;
    if (m->cfg.kv_share < 1) m->cfg.kv_share = 1;   /* a config built by hand: no sharing */
    AL_ASSERT(cfg->attn != NULL);
    if (cfg->vocab_size <= 0 || cfg->n_layer <= 0 || cfg->d_model <= 0)
        return al_errf(e, "model: vocab_size, n_layer and d_model must be positive");
    al_tensor_table t;
    if (al_tensor_table_build(&t, cfg, e) != 0) {
        al_model_free(m);
        return -1;
    }
    m->d_ff = t.d_ff;
    m->layers = al_calloc((size_t)cfg->n_layer, sizeof(al_layer));
    for (int l = 0; l < cfg->n_layer; l++) {
        const al_attn_item *it = &t.item[l % t.n_items];
        al_layer *L = &m->layers[l];
        const al_param_spec *spec;
        L->attn = it->ops;
        L->ashape = it->ashape;
        char err[8];   /* the table's init took these settings: this one does too */
        L->ctx = al_variant_init(it->ops, &it->ashape, err, sizeof err);
        AL_ASSERT(L->ctx != NULL);
        L->kv_src = al_config_kv_src(cfg, l);
        L->n_attn_params = al_tensor_table_layer_params(&t, cfg, l, &spec);
        memcpy(L->attn_spec, spec, sizeof L->attn_spec);
    }
    m->n_tensors = t.n_tensors;
    m->tensors = t.tensors;   /* the model owns it now */
    m->n_params = t.n_params;
    t.tensors = NULL;
    al_tensor_table_free(&t);   /* the items' contexts (each layer has its own) */
    m->params = al_calloc(m->n_params, sizeof(float));
    m->grads = al_calloc(m->n_params, sizeof(float));
    bind_views(m);
    return 0;
}

/* Every layer's shape from m->cfg again (causal, RoPE), and its context
 * with it: a variant's init reads its shape once. */
static void remake_layers(al_model *m)
{
    for (int l = 0; l < m->cfg.n_layer; l++) {
        al_layer *L = &m->layers[l];
        char err[8];
        L->ashape.causal = m->cfg.causal;
        L->ashape.rope = al_config_layer_rope(&m->cfg, l);
        L->attn->fini(L->ctx);   /* the context was made from the old shape */
        L->ctx = al_variant_init(L->attn, &L->ashape, err, sizeof err);
        AL_ASSERT(L->ctx != NULL);
    }
}

void al_model_set_causal(al_model *m, int causal)
{
    m->cfg.causal = causal;
    remake_layers(m);
}

void al_model_set_rope_scaling(al_model *m, const al_rope_scaling *sc)
{
    AL_ASSERT(al_rope_kind_of(sc->kind) >= 0);
    m->cfg.rope_scaling = *sc;
    remake_layers(m);
}

/* Each tensor draws from its own stream, keyed by the seed and its name,
 * and a weight's values are drawn unit by unit: rows of [out, in] (so the
 * first rows of a narrower wk equal a wider one's), but columns of the MLP's
 * w2 [D, F] (so hidden unit j has the same weights in and out whatever
 * d_ff is). Two models that share tensors or a prefix of them therefore
 * start from the same values there: with the same seed, mha and mqa share
 * the embedding, wq, wo and the MLP, and a comparison between them pairs
 * far more of the initialisation than one stream running through tensors
 * of different sizes would. */
static uint64_t tensor_stream(uint64_t seed, const char *name)
{
    uint64_t h = 0xcbf29ce484222325ULL;   /* FNV-1a of the name */
    for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
    return seed ^ (h * 0x9e3779b97f4a7c15ULL);
}

static int by_columns(const al_tensor *t)
{
    size_t n = strlen(t->name);
    return t->ndim == 2 && n >= 16 && strcmp(t->name + n - 16, ".mlp.w2.weight") == 0;
}

void al_model_init_weights(al_model *m, uint64_t seed)
{
    double resid = 0.02 / sqrt(2.0 * m->cfg.n_layer);
    for (int i = 0; i < m->n_tensors; i++) {
        const al_tensor *t = &m->tensors[i];
        float *p = m->params + t->offset;
        al_rng rng;
        al_rng_seed(&rng, tensor_stream(seed, t->name));
        size_t rows = (size_t)t->shape[0], cols = t->ndim == 2 ? (size_t)t->shape[1] : 1;
        int transposed = by_columns(t);
        for (size_t k = 0; k < t->numel; k++) {
            size_t j = transposed ? (k % rows) * cols + k / rows : k;   /* k-th draw lands at j */
            switch (t->init) {
            case AL_INIT_NORMAL: p[j] = (float)(0.02 * al_rng_normal(&rng)); break;
            case AL_INIT_RESID: p[j] = (float)(resid * al_rng_normal(&rng)); break;
            case AL_INIT_ONES: p[j] = 1.0f; break;
            case AL_INIT_DECAY: p[j] = (float)al_init_decay_value((int)j, (int)t->numel); break;
            default: p[j] = 0.0f; break;
            }
        }
    }
}

/* ------------------------------------------------------------ activations */

/* Saved attention floats of layer l: a kv_share consumer's are fewer. */
static size_t layer_act_floats(const al_model *m, int l, int B, int T)
{
    const al_layer *L = &m->layers[l];
    if (L->kv_src != l) return L->attn->share->act_floats(L->ctx, B, T);
    return L->attn->train->act_floats(L->ctx, B, T);
}

int al_model_reserve(al_model *m, int B, int T, al_err *e)
{
    if (B <= m->B && T <= m->T && m->acts) return 0;
    if (B < 1 || T < 1) return al_errf(e, "model: batch shape (%d, %d) is empty", B, T);
    B = B > m->B ? B : m->B;
    T = T > m->T ? T : m->T;
    free(m->acts);
    free(m->targets);
    free(m->inputs);
    const al_model_config *c = &m->cfg;
    size_t BT = (size_t)B * T, D = c->d_model, F = m->d_ff, V = c->vocab_size, total;
    m->acts = NULL, m->targets = NULL, m->inputs = NULL, m->B = m->T = 0;
    /* checked (a plugin's sizes too), and refused rather than aborted */
    if (al_model_act_floats(c, m->d_ff, B, T, &total, e) != 0) return -1;
    size_t scratch = 0, dkv = 0;
    for (int l = 0; l < c->n_layer; l++) {   /* scratch is shared: the widest layer's */
        const al_layer *L = &m->layers[l];
        size_t s = L->attn->train->scratch_floats(L->ctx, B, T);
        scratch = s > scratch ? s : scratch;
        if (L->kv_src != l) {   /* one group's K/V gradient at a time */
            size_t n = BT * L->attn->decode->kv_elems(L->ctx);
            dkv = n > dkv ? n : dkv;
        }
    }
    float *p = m->acts = calloc(total, sizeof(float));
    if (!p)
        return al_errf(e, "model: out of memory: the activations of a batch of %d x %d tokens "
                       "need %zu bytes", B, T, total * sizeof(float));
    for (int l = 0; l < c->n_layer; l++) {
        al_layer *L = &m->layers[l];
        size_t attn = layer_act_floats(m, l, B, T);
        L->x_in = p; p += BT * D;
        L->h1 = p; p += BT * D;
        L->rstd1 = p; p += BT;
        L->attn_act = p; p += attn;
        L->x_mid = p; p += BT * D;
        L->h2 = p; p += BT * D;
        L->rstd2 = p; p += BT;
        L->u = p; p += BT * F;
        L->g = p; p += BT * F;
    }
    m->x_final = p; p += BT * D;
    m->hf = p; p += BT * D;
    m->rstdf = p; p += BT;
    m->logits = p; p += BT * V;
    m->dx = p; p += BT * D;
    m->dtmp = p; p += BT * D;
    m->dff = p; p += BT * F;
    m->weights = p; p += BT;
    m->scratch = p; p += scratch;
    m->dkv = dkv ? p : NULL; p += dkv;
    AL_ASSERT((size_t)(p - m->acts) == total);
    m->targets = al_calloc(BT, sizeof(int));
    m->inputs = al_calloc(BT, sizeof(int));
    m->B = B;
    m->T = T;
    return 0;
}

/* ------------------------------------------------------------ forward */

/* Row and elementwise loops of the model itself, split over the pool. */
typedef struct rows_job {
    float *out;
    const float *a, *b;
    const int *ids;
    int D;
    long BT;
} rows_job;

/* x (BT, D) = tok_emb[inputs], rows [lo, hi) */
static void embed_rows(void *ctx, long lo, long hi, int tid)
{
    const rows_job *j = ctx;
    for (long i = lo; i < hi; i++)
        memcpy(j->out + i * j->D, j->a + (size_t)j->ids[i] * j->D, j->D * sizeof(float));
    (void)tid;
}

static void embed_forward(float *x, const float *tok_emb, const int *inputs,
                          size_t BT, int D)
{
    rows_job j = {x, tok_emb, NULL, inputs, D, (long)BT};
    al_parallel_for((long)BT, 64, embed_rows, &j);
}

/* d_tok_emb rows [lo, hi) += dx of the positions holding those tokens, in
 * position order: split by token, not by position, so no two threads add
 * into one row and each row's sum keeps the serial order. */
static void embed_back_tokens(void *ctx, long lo, long hi, int tid)
{
    const rows_job *j = ctx;
    for (long i = 0; i < j->BT; i++) {
        if (j->ids[i] < lo || j->ids[i] >= hi) continue;
        float *g = j->out + (size_t)j->ids[i] * j->D;
        const float *d = j->a + (size_t)i * j->D;
        for (int c = 0; c < j->D; c++) g[c] += d[c];
    }
    (void)tid;
}

static void zero_range(void *ctx, long lo, long hi, int tid)
{
    const rows_job *j = ctx;
    memset(j->out + lo, 0, (size_t)(hi - lo) * sizeof(float));
    (void)tid;
}

/* memset over the pool: a step zeroes the gradients and two (B,T,D) buffers. */
static void zero_floats(float *x, size_t n)
{
    rows_job j = {x, NULL, NULL, NULL, 0, 0};
    al_parallel_for((long)n, 65536, zero_range, &j);
}

static double model_forward(al_model *m, const int *inputs, const int *targets,
                            const float *weights, int B, int T)
{
    AL_ASSERT(B <= m->B && T <= m->T);
    const al_model_config *c = &m->cfg;
    int D = c->d_model, F = m->d_ff, V = c->vocab_size, BT = B * T;
    float eps = (float)c->norm_eps;
    for (int i = 0; i < BT; i++) AL_ASSERT(inputs[i] >= 0 && inputs[i] < V);
    memcpy(m->inputs, inputs, BT * sizeof(int));
    embed_forward(m->layers[0].x_in, m->tok_emb, inputs, BT, D);
    al_rmsnorm_forward(m->layers[0].h1, m->layers[0].rstd1, m->layers[0].x_in,
                       m->layers[0].attn_norm, BT, D, eps);
    float *tmp = m->dtmp; /* (BT, D) branch output; free during forward */
    for (int l = 0; l < c->n_layer; l++) {
        al_layer *L = &m->layers[l], *next = l + 1 < c->n_layer ? &m->layers[l + 1] : NULL;
        if (L->kv_src != l)   /* a kv_share consumer: the producer's K/V */
            L->attn->share->forward(L->ctx, tmp, L->attn_act, m->scratch, L->h1, L->attn_p,
                                    m->layers[L->kv_src].attn_act, B, T);
        else
            L->attn->train->forward(L->ctx, tmp, L->attn_act, m->scratch, L->h1, L->attn_p, B, T);
        /* x_mid = x_in + attn, h2 = rmsnorm(x_mid): one pass */
        al_residual_rmsnorm_forward(L->x_mid, L->h2, L->rstd2, L->x_in, tmp, L->mlp_norm, BT, D,
                                    eps);
        al_linear_forward(L->u, L->h2, L->w1, BT, D, F);
        al_gelu_forward(L->g, L->u, (size_t)BT * F);
        al_linear_forward(tmp, L->g, L->w2, BT, F, D);
        /* x_out = x_mid + mlp, and the norm that reads it next */
        if (next)
            al_residual_rmsnorm_forward(next->x_in, next->h1, next->rstd1, L->x_mid, tmp,
                                        next->attn_norm, BT, D, eps);
        else
            al_residual_rmsnorm_forward(m->x_final, m->hf, m->rstdf, L->x_mid, tmp,
                                        m->final_norm, BT, D, eps);
    }
    al_linear_forward(m->logits, m->hf, m->tok_emb, BT, D, V); /* tied head */
    m->fwd_B = B;
    m->fwd_T = T;
    if (!targets) {
        m->has_targets = 0;
        return 0.0;
    }
    m->has_targets = 1;
    memcpy(m->targets, targets, BT * sizeof(int));
    m->has_weights = weights != NULL;
    if (weights) memcpy(m->weights, weights, BT * sizeof(float));
    return al_xent_forward(m->logits, m->targets, weights ? m->weights : NULL, BT, V);
}

/* ------------------------------------------------------------ backward */

void al_model_zero_grad(al_model *m)
{
    zero_floats(m->grads, m->n_params);
}

/* The attention of one block backward: dh = d(attention input), the
 * layer's attention gradients written. A variant that says it writes them
 * gets the buffers as they are; one that accumulates (the contract's
 * default) gets them zeroed: dh, and the layer's attention tensors, which
 * lie together in the gradient buffer (the table's order). */
static void attention_backward(al_model *m, int l, float *dh, const float *dx, int B, int T)
{
    al_layer *L = &m->layers[l];
    const al_variant *v = L->attn;
    if (!(v->train->flags & AL_VARIANT_WRITES_GRADS)) {
        zero_floats(dh, (size_t)B * T * m->cfg.d_model);
        const al_param_spec *ls = &L->attn_spec[L->n_attn_params - 1];
        const float *first = L->attn_dp[0], *last = L->attn_dp[L->n_attn_params - 1];
        size_t n = (size_t)(last - first) + ls->rows * (size_t)(ls->cols ? ls->cols : 1);
        zero_floats(L->attn_dp[0], n);
    }
    int n = m->cfg.n_layer, consumer = L->kv_src != l;
    int fed = l + 1 < n && m->layers[l + 1].kv_src == L->kv_src;   /* a consumer follows */
    if (consumer) {
        /* the group's last layer runs first backward: it starts dkv */
        if (!fed) zero_floats(m->dkv, (size_t)B * T * v->decode->kv_elems(L->ctx));
        v->share->backward(L->ctx, dh, L->attn_dp, m->dkv, m->scratch, dx, L->h1, L->attn_act,
                           m->layers[L->kv_src].attn_act, L->attn_p, B, T);
    } else if (fed) {   /* a producer: its consumers' K/V gradient joins its own */
        v->share->backward(L->ctx, dh, L->attn_dp, m->dkv, m->scratch, dx, L->h1, L->attn_act,
                           NULL, L->attn_p, B, T);
    } else {
        v->train->backward(L->ctx, dh, L->attn_dp, m->scratch, dx, L->h1, L->attn_act,
                           L->attn_p, B, T);
    }
}

/* One block, given dx = d(block output); leaves d(block input) in dx and
 * writes every gradient of the block's parameters. */
static void block_backward(al_model *m, int l, int B, int T)
{
    al_layer *L = &m->layers[l];
    const al_model_config *c = &m->cfg;
    int D = c->d_model, F = m->d_ff, BT = B * T;
    float *dx = m->dx, *dh = m->dtmp, *dg = m->dff;
    /* x_out = x_mid + g . w2^T, g = gelu(u), u = h2 . w1^T */
    al_linear_backward_beta(dg, L->d_w2, dx, L->g, L->w2, BT, F, D, 0.0f, 0.0f);
    al_gelu_backward_set(dg, dg, L->u, (size_t)BT * F);   /* dg becomes du */
    al_linear_backward_beta(dh, L->d_w1, dg, L->h2, L->w1, BT, D, F, 0.0f, 0.0f);
    /* h2 = rmsnorm(x_mid): dx (already d x_mid via the residual) += */
    al_rmsnorm_backward_beta(dx, L->d_mlp_norm, dh, L->x_mid, L->mlp_norm, L->rstd2, BT, D,
                             1.0f, 0.0f);
    /* x_mid = x_in + attn(h1), h1 = rmsnorm(x_in) */
    attention_backward(m, l, dh, dx, B, T);
    al_rmsnorm_backward_beta(dx, L->d_attn_norm, dh, L->x_in, L->attn_norm, L->rstd1, BT, D,
                             1.0f, 0.0f);
}

static void model_backward(al_model *m)
{
    AL_ASSERT(m->has_targets);
    const al_model_config *c = &m->cfg;
    int B = m->fwd_B, T = m->fwd_T, D = c->d_model, V = c->vocab_size, BT = B * T;
    al_xent_backward_inplace(m->logits, m->targets, m->has_weights ? m->weights : NULL,
                             BT, V, 1.0f);
    m->has_targets = 0; /* logits now hold dlogits */
    /* logits = hf . tok_emb^T: the head writes d_tok_emb first */
    al_linear_backward_beta(m->dtmp, m->d_tok_emb, m->logits, m->hf, m->tok_emb, BT, D, V, 0.0f,
                            0.0f);
    al_rmsnorm_backward_beta(m->dx, m->d_final_norm, m->dtmp, m->x_final, m->final_norm,
                             m->rstdf, BT, D, 0.0f, 0.0f);
    for (int l = c->n_layer - 1; l >= 0; l--) block_backward(m, l, B, T);
    /* x = tok_emb[inputs]: the embedding adds to the head's gradient */
    rows_job j = {m->d_tok_emb, m->dx, NULL, m->inputs, D, BT};
    al_parallel_for(V, 16, embed_back_tokens, &j);
}

/* ------------------------------------------------------------ entry points */

/* Each call runs its products at the model's precision and leaves the
 * process's as it found it (al_gemm_enter). */
double al_model_forward(al_model *m, const int *inputs, const int *targets,
                        const float *weights, int B, int T)
{
    int was = al_gemm_enter(m->precision);
    double loss = model_forward(m, inputs, targets, weights, B, T);
    al_gemm_leave(was);
    return loss;
}

void al_model_backward(al_model *m)
{
    int was = al_gemm_enter(m->precision);
    model_backward(m);
    al_gemm_leave(was);
}

int al_model_set_precision(al_model *m, const char *name, al_err *e)
{
    return al_gemm_precision_parse(name, &m->precision, e);
}

/* ------------------------------------------------------------ queries */

const al_tensor *al_model_tensor(const al_model *m, const char *name)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

void al_model_free(al_model *m)
{
    for (int l = 0; m->layers && l < m->cfg.n_layer; l++)
        if (m->layers[l].ctx) m->layers[l].attn->fini(m->layers[l].ctx);
    free(m->tensors);
    free(m->params);
    free(m->grads);
    free(m->layers);
    free(m->acts);
    free(m->targets);
    free(m->inputs);
    memset(m, 0, sizeof *m);
}
