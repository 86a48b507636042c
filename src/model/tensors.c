/*
 * tensors.c - the tensor table of a model config (al_tensors.h): the
 * variant's tensors checked, every tensor laid out in one flat buffer.
 */
#include "al_tensors.h"
#include "al_registry.h"
#include "al_kvcache.h"
#include "al_size.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static void add_tensor(al_tensor_table *t, size_t *off, const char *name, int rows,
                       int cols, int init)
{
    al_tensor *x = &t->tensors[t->n_tensors++];
    snprintf(x->name, sizeof x->name, "%s", name);
    x->ndim = cols > 0 ? 2 : 1;
    x->shape[0] = rows;
    x->shape[1] = cols > 0 ? cols : 0;
    x->numel = (size_t)rows * (cols > 0 ? cols : 1);
    x->offset = *off;
    x->init = init;
    x->decay = x->ndim == 2;
    *off += x->numel;
}

/* The variant's params() answer (a plugin's, perhaps): a count in range,
 * plain distinct names, sizes that fit, a known init. A mistake is an
 * error naming the variant, not a crash; v names it with its key
 * ("model.attention: variant 'gqa'"). */
static int check_attn_params(const al_attn_item *t, const char *v, al_err *e)
{
    int n = t->n_attn_params;
    if (n < 1 || n > AL_MAX_ATTN_PARAMS)
        return al_errf(e, "%s declares %d parameter tensors, not "
                       "1 to %d", v, n, AL_MAX_ATTN_PARAMS);
    for (int i = 0; i < n; i++) {
        const al_param_spec *p = &t->attn_spec[i];
        if (!memchr(p->name, 0, sizeof p->name) || !al_variant_plain_name(p->name))
            return al_errf(e, "%s: parameter tensor %d needs a "
                           "name of 1 to %zu letters, digits, '_' or '-'", v, i + 1,
                           sizeof p->name - 1);
        for (int j = 0; j < i; j++)
            if (strcmp(p->name, t->attn_spec[j].name) == 0)
                return al_errf(e, "%s declares parameter tensor "
                               "'%s' twice", v, p->name);
        if (p->rows < 1 || p->cols < 0)
            return al_errf(e, "%s: tensor '%s' has shape [%d, %d]; "
                           "rows >= 1, cols >= 0 (0: 1-D), at most %d elements", v, p->name,
                           p->rows, p->cols, INT_MAX);
        if ((double)p->rows * (p->cols ? p->cols : 1) > INT_MAX)   /* the keys, not the shape */
            return al_errf(e, "%s: 'model.d_model' (%d), 'model.n_head' (%d) and 'model.d_head' "
                           "(%d) with the attention's settings make tensor '%s' [%d, %d], more "
                           "than %d elements", v, t->ashape.d_model, t->ashape.n_head,
                           t->ashape.d_head, p->name, p->rows, p->cols, INT_MAX);
        if (p->init < AL_INIT_NORMAL || p->init > AL_INIT_DECAY)
            return al_errf(e, "%s: tensor '%s' has init %d, not "
                           "one of enum al_init", v, p->name, p->init);
    }
    return 0;
}

/* The variant's view of c: d_head as given (decoding resolved it), item
 * k's settings. */
static void fill_shape(al_attn_shape *s, const al_model_config *c, int k)
{
    memset(s, 0, sizeof *s);
    s->d_model = c->d_model;
    s->n_head = c->n_head;
    s->d_head = c->d_head;
    s->seq_len = c->seq_len;
    s->causal = c->causal;
    s->rope_base = (float)c->rope_base;
    s->norm_eps = (float)c->norm_eps;
    s->attn_kernel = c->attn_kernel;
    al_attn_config a = al_config_attn_item(c, k);
    memcpy(s->set, a.set, sizeof s->set);
    s->rope = al_config_layer_rope(c, k);   /* item k is layer k's */
}

void al_attn_shape_of(al_attn_shape *s, const al_model_config *c, int k) { fill_shape(s, c, k); }

/* Item k's variant, context and tensors; 0 or -1 if it rejects the shape
 * (t->ctx then NULL). */
static int attn_tensors(al_attn_item *t, const al_model_config *c, int k, al_err *e)
{
    char err[512] = "", where[64] = "model.attention";
    if (c->n_layer_attn > 0) snprintf(where, sizeof where, "model.layer_attention[%d]", k);
    fill_shape(&t->ashape, c, k);
    t->ops = al_config_attn_item(c, k).attn;
    AL_ASSERT(t->ops != NULL);
    t->ctx = al_variant_init(t->ops, &t->ashape, err, sizeof err);
    if (!t->ctx) {
        err[sizeof err - 1] = 0;   /* a plugin's message, perhaps unterminated */
        return al_errf(e, "%s: %s", where, err);
    }
    t->n_attn_params = t->ops->train->params(t->ctx, t->attn_spec);
    char who[160];
    snprintf(who, sizeof who, "%s: variant '%s'", where, t->ops->name);
    if (check_attn_params(t, who, e)) return -1;
    if (c->kv_share <= 1 || !t->ops->share) return 0;
    /* a consumer's tensors, checked as params() are */
    al_attn_item sh = *t;
    sh.n_attn_params = t->ops->share->params(t->ctx, sh.attn_spec);
    snprintf(who, sizeof who, "%s: variant '%s' (share.params)", where, t->ops->name);
    if (check_attn_params(&sh, who, e)) return -1;
    t->n_share_params = sh.n_attn_params;
    memcpy(t->share_spec, sh.attn_spec, sizeof t->share_spec);
    return 0;
}

/* The items' contexts, freed. */
static void items_fini(al_tensor_table *t)
{
    for (int k = 0; k < t->n_items; k++)
        if (t->item[k].ctx) t->item[k].ops->fini(t->item[k].ctx);
}

int al_tensor_table_layer_params(const al_tensor_table *t, const al_model_config *c, int l,
                                 const al_param_spec **spec)
{
    const al_attn_item *it = &t->item[l % t->n_items];
    if (al_config_kv_consumer(c, l)) {
        *spec = it->share_spec;
        return it->n_share_params;
    }
    *spec = it->attn_spec;
    return it->n_attn_params;
}

static int per_layer_tensors(const al_tensor_table *t, const al_model_config *c)
{
    int n = 0;
    const al_param_spec *spec;
    for (int l = 0; l < c->n_layer; l++) n += al_tensor_table_layer_params(t, c, l, &spec);
    return n;
}

int al_tensor_table_build(al_tensor_table *t, const al_model_config *c, al_err *e)
{
    char name[AL_TENSOR_NAME];
    size_t checked, kv;   /* the KV count too: a decoder trusts it */
    if (al_model_counts(c, &checked, &kv, e) != 0) return -1;   /* before the table's calloc */
    memset(t, 0, sizeof *t);
    t->d_ff = al_config_d_ff(c);
    t->n_items = al_config_n_attn(c);
    for (int k = 0; k < t->n_items; k++)
        if (attn_tensors(&t->item[k], c, k, e)) {
            al_tensor_table_free(t);
            return -1;
        }
    int D = c->d_model, F = t->d_ff;
    t->tensors = al_calloc((size_t)c->n_layer * 4 + per_layer_tensors(t, c) + 2,
                           sizeof(al_tensor));
    size_t off = 0;
    add_tensor(t, &off, "tok_emb.weight", c->vocab_size, D, AL_INIT_NORMAL);
    for (int l = 0; l < c->n_layer; l++) {
        snprintf(name, sizeof name, "blocks.%d.attn_norm.weight", l);
        add_tensor(t, &off, name, D, 0, AL_INIT_ONES);
        const al_param_spec *spec;
        int n = al_tensor_table_layer_params(t, c, l, &spec);
        for (int i = 0; i < n; i++) {
            const al_param_spec *p = &spec[i];
            snprintf(name, sizeof name, "blocks.%d.attn.%s.weight", l, p->name);
            add_tensor(t, &off, name, p->rows, p->cols, p->init);
        }
        snprintf(name, sizeof name, "blocks.%d.mlp_norm.weight", l);
        add_tensor(t, &off, name, D, 0, AL_INIT_ONES);
        snprintf(name, sizeof name, "blocks.%d.mlp.w1.weight", l);
        add_tensor(t, &off, name, F, D, AL_INIT_NORMAL);
        snprintf(name, sizeof name, "blocks.%d.mlp.w2.weight", l);
        add_tensor(t, &off, name, D, F, AL_INIT_RESID);
    }
    add_tensor(t, &off, "final_norm.weight", D, 0, AL_INIT_ONES);
    t->n_params = off;
    AL_ASSERT(off == checked);
    return 0;
}

void al_tensor_table_free(al_tensor_table *t)
{
    items_fini(t);
    free(t->tensors);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------ counts */

void *al_attn_ctx_of(const al_model_config *c, int k, const al_variant **v)
{
    al_attn_shape s;
    char err[256];
    fill_shape(&s, c, k);
    *v = al_config_attn_item(c, k).attn;
    void *ctx = al_variant_init(*v, &s, err, sizeof err);
    AL_ASSERT(ctx != NULL);   /* the settings were checked when the config was */
    return ctx;
}

/* Floats a layer's cache adds per token: a state adds none (it is held
 * whole at every context). */
static size_t per_token_elems(const al_variant *v, const void *ctx)
{
    return v->decode->storage == AL_KV_STATE ? 0 : v->decode->kv_elems(ctx);
}

size_t al_model_layer_kv_elems(const al_model_config *c, int layer)
{
    if (al_config_kv_consumer(c, layer)) return 0;   /* reads its producer's cache */
    const al_variant *v;
    void *ctx = al_attn_ctx_of(c, layer % al_config_n_attn(c), &v);
    size_t n = per_token_elems(v, ctx);
    v->fini(ctx);
    return n;
}

/* Layers that run item k of the cycle (a stack may have 10^8 layers: the
 * sums below go over the items, not the layers). */
static size_t layers_of_item(const al_model_config *c, int k)
{
    int n = al_config_n_attn(c);
    return (size_t)(c->n_layer / n) + (k < c->n_layer % n);
}

size_t al_model_kv_elems_per_token(const al_model_config *c)
{
    size_t n = 0;
    if (c->kv_share > 1) {   /* a consumer's place depends on both cycles: layer by layer */
        for (int l = 0; l < c->n_layer; l += c->kv_share) n += al_model_layer_kv_elems(c, l);
        return n;
    }
    for (int k = 0; k < al_config_n_attn(c) && k < c->n_layer; k++)
        n += al_model_layer_kv_elems(c, k) * layers_of_item(c, k);
    return n;
}

int al_attn_kv_rows(const al_variant *v, const void *ctx, int context)
{
    AL_ASSERT(context >= 1);
    int rows = v->decode->kv_rows(ctx, context);
    AL_ASSERT(rows >= 1 && rows <= context);   /* a cache never holds more than its tokens */
    return rows;
}

int al_model_layer_kv_rows(const al_model_config *c, int l, int context)
{
    AL_ASSERT(l >= 0 && l < c->n_layer);
    return al_model_layer_kv_layout(c, l, context).rows;
}

al_kv_layout al_model_layer_kv_layout(const al_model_config *c, int l, int context)
{
    const al_variant *v;
    void *ctx = al_attn_ctx_of(c, l % al_config_n_attn(c), &v);   /* the layer's own attention */
    al_kv_layout o;
    o.state = v->decode->storage == AL_KV_STATE;
    o.elems = v->decode->kv_elems(ctx);
    /* a plugin's answer past the row is taken as the whole row */
    o.key_elems = v->decode->kv_key_elems(ctx);
    if (o.key_elems > o.elems) o.key_elems = o.elems;
    o.rows = al_attn_kv_rows(v, ctx, context);
    v->fini(ctx);
    o.group = c->kv_quant_group ? c->kv_quant_group : AL_KV_QUANT_GROUP;
    o.residual = c->kv_quant_group ? c->kv_quant_residual : AL_KV_QUANT_RESIDUAL;
    /* a bounded ring rewrites its rows out of order, which groups of
     * tokens cannot follow: its whole ring stays f32 */
    if (o.rows < context) o.residual = o.rows;
    return o;
}

/* The dtype layer l's cache is stored as: a state stays f32 (a running
 * state is not KIVI's to quantize). */
int al_model_layer_kv_dtype(const al_kv_layout *o, int dtype)
{
    return o->state ? AL_KV_F32 : dtype;
}

size_t al_model_layer_kv_bytes(const al_model_config *c, int l, int dtype, int context)
{
    if (al_config_kv_consumer(c, l)) return 0;   /* no cache: its producer's */
    al_kv_layout o = al_model_layer_kv_layout(c, l, context);
    return al_kv_cache_bytes_for(o.elems, o.key_elems, o.rows, al_model_layer_kv_dtype(&o, dtype),
                                 o.group, o.residual);
}

size_t al_model_kv_bytes_at(const al_model_config *c, int dtype, int context)
{
    size_t n = 0;
    if (c->kv_share > 1) {   /* the producers, the first layer of each group */
        for (int l = 0; l < c->n_layer; l += c->kv_share)
            n += al_model_layer_kv_bytes(c, l, dtype, context);
        return n;
    }
    for (int k = 0; k < al_config_n_attn(c) && k < c->n_layer; k++)
        n += al_model_layer_kv_bytes(c, k, dtype, context) * layers_of_item(c, k);
    return n;
}

size_t al_model_param_count(const al_model_config *c, al_err *e)
{
    size_t n;
    return al_model_counts(c, &n, NULL, e) == 0 ? n : 0;
}

/* ------------------------------------------------------------ checked counts */

/* The variant's KV floats per token of one layer, checked (a plugin's
 * answer is not trusted). */
static int kv_per_layer(const al_attn_item *t, size_t *kv, al_err *e)
{
    *kv = per_token_elems(t->ops, t->ctx);
    if (*kv > AL_MAX_REPORTED_FLOATS)
        return al_errf(e, "model.attention: variant '%s' reports %zu KV-cache floats per token "
                       "per layer, more than the limit of %llu", t->ops->name, *kv,
                       (unsigned long long)AL_MAX_REPORTED_FLOATS);
    return 0;
}

/* One layer's parameters: the norms, the variant's tensors spec[0..np)
 * (each at most INT_MAX elements, checked), the MLP. */
static int layer_params(const al_param_spec *spec, int np, size_t D, size_t F, size_t *out)
{
    size_t n = 2 * D, mlp;
    for (int i = 0; i < np; i++) {
        const al_param_spec *p = &spec[i];
        n += (size_t)p->rows * (size_t)(p->cols ? p->cols : 1);
    }
    if (al_size_mul(2 * D, F, &mlp) || al_size_add(n, mlp, out))
        return -1;
    return 0;
}

/* Params and KV floats of layers [0, n) of the cycle: n_layer / n_items
 * whole cycles and the first n_layer % n_items items, in checked
 * arithmetic (n_layer may be 10^8: no loop over layers). -1 on overflow. */
static int stack_sums(const al_tensor_table *t, int n_layer, size_t D, size_t *n, size_t *kv)
{
    size_t cyc_n = 0, cyc_kv = 0, rest_n = 0, rest_kv = 0, one;
    size_t reps = (size_t)(n_layer / t->n_items);
    for (int k = 0; k < t->n_items; k++) {
        const al_attn_item *it = &t->item[k];
        size_t el = per_token_elems(it->ops, it->ctx);
        if (layer_params(it->attn_spec, it->n_attn_params, D, (size_t)t->d_ff, &one) != 0 ||
            al_size_add(cyc_n, one, &cyc_n) || al_size_add(cyc_kv, el, &cyc_kv))
            return -1;
        if (k < n_layer % t->n_items) rest_n += one, rest_kv += el;   /* <= the cycle's */
    }
    size_t pn;
    if (al_size_mad(reps, cyc_n, rest_n, &pn) || al_size_add(*n, pn, n) ||
        al_size_mad(reps, cyc_kv, rest_kv, kv))
        return -1;
    return 0;
}

/* stack_sums under model.kv_share, layer by layer (a consumer's place
 * depends on both cycles): a consumer has its item's share_params and no
 * KV. -1 on overflow. */
static int shared_sums(const al_tensor_table *t, const al_model_config *c, size_t D, size_t *n,
                       size_t *kv)
{
    *kv = 0;
    for (int l = 0; l < c->n_layer; l++) {
        const al_param_spec *spec;
        const al_attn_item *it = &t->item[l % t->n_items];
        int np = al_tensor_table_layer_params(t, c, l, &spec);
        size_t one, el = al_config_kv_consumer(c, l) ? 0 : per_token_elems(it->ops, it->ctx);
        if (layer_params(spec, np, D, (size_t)t->d_ff, &one) != 0 ||
            al_size_add(*n, one, n) || al_size_add(*kv, el, kv))
            return -1;
    }
    return 0;
}

/* al_model_counts over t, whose items are built here (the caller frees them). */
static int table_counts(al_tensor_table *t, const al_model_config *c, size_t *n_params,
                        size_t *kv_per_token, al_err *e)
{
    t->d_ff = al_config_d_ff(c);
    if (c->n_layer < 1 || c->d_model < 1 || c->vocab_size < 0 || t->d_ff < 1)
        return al_errf(e, "model: n_layer, d_model and the MLP width must be positive");
    t->n_items = al_config_n_attn(c);
    for (int k = 0; k < t->n_items; k++) {
        size_t kv;
        if (attn_tensors(&t->item[k], c, k, e) || kv_per_layer(&t->item[k], &kv, e)) return -1;
    }
    char err[256];   /* groups the stack can share, before they are counted */
    if (al_config_check_share(c, err, sizeof err)) return al_errf(e, "%s", err);
    size_t D = (size_t)c->d_model, n = (size_t)c->vocab_size * D + D, kv = 0;
    int over = c->kv_share > 1 ? shared_sums(t, c, D, &n, &kv)
                               : stack_sums(t, c->n_layer, D, &n, &kv);
    if (over != 0 || n > AL_MAX_PARAMS)
        return al_errf(e, "model: 'model.n_layer' (%d) blocks of 'model.d_model' (%d) with an "
                       "MLP of %d have more than %llu parameters (the limit: 16 bytes each "
                       "must be addressable)", c->n_layer, c->d_model, t->d_ff,
                       (unsigned long long)AL_MAX_PARAMS);
    *n_params = n;
    if (!kv_per_token) return 0;
    if (kv > SIZE_MAX / sizeof(float))
        return al_errf(e, "model: 'model.n_layer' (%d) layers' KV-cache floats per token "
                       "overflow %zu bytes", c->n_layer, SIZE_MAX);
    *kv_per_token = kv;
    return 0;
}

int al_model_counts(const al_model_config *c, size_t *n_params, size_t *kv_per_token, al_err *e)
{
    al_tensor_table t;   /* the shapes and the variants' specs only: no tensors */
    memset(&t, 0, sizeof t);
    int rc = table_counts(&t, c, n_params, kv_per_token, e);
    al_tensor_table_free(&t);
    return rc;
}
