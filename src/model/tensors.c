/*
 * tensors.c - the tensor table of a model config (al_tensors.h): the
 * variant's tensors checked, every tensor laid out in one flat buffer.
 */
#include "al_tensors.h"
#include "al_registry.h"
#include "al_kvcache.h"

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
        if (p->rows < 1 || p->cols < 0 || (double)p->rows * (p->cols ? p->cols : 1) > INT_MAX)
            return al_errf(e, "%s: tensor '%s' has shape [%d, %d]; "
                           "rows >= 1, cols >= 0 (0: 1-D), at most %d elements", v, p->name,
                           p->rows, p->cols, INT_MAX);
        if (p->init < AL_INIT_NORMAL || p->init > AL_INIT_ZEROS)
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
    al_attn_config a = al_config_attn_item(c, k);
    memcpy(s->set, a.set, sizeof s->set);
}

/* Item k's variant, check and tensors; 0 or -1 if it rejects the shape. */
static int attn_tensors(al_attn_item *t, const al_model_config *c, int k, al_err *e)
{
    char err[512] = "", where[64] = "model.attention";
    if (c->n_layer_attn > 0) snprintf(where, sizeof where, "model.layer_attention[%d]", k);
    fill_shape(&t->ashape, c, k);
    t->ops = al_config_attn_item(c, k).attn;
    AL_ASSERT(t->ops != NULL);
    if (t->ops->check && t->ops->check(&t->ashape, err, sizeof err) != 0) {
        err[sizeof err - 1] = 0;   /* a plugin's message, perhaps unterminated */
        return al_errf(e, "%s: %s", where, err);
    }
    t->n_attn_params = t->ops->params(&t->ashape, t->attn_spec);
    char who[160];
    snprintf(who, sizeof who, "%s: variant '%s'", where, t->ops->name);
    if (check_attn_params(t, who, e)) return -1;
    if (c->kv_share <= 1 || !al_variant_can_share(t->ops)) return 0;
    /* a consumer's tensors, checked as params() are */
    al_attn_item sh = *t;
    sh.n_attn_params = t->ops->share_params(&t->ashape, sh.attn_spec);
    snprintf(who, sizeof who, "%s: variant '%s' (share_params)", where, t->ops->name);
    if (check_attn_params(&sh, who, e)) return -1;
    t->n_share_params = sh.n_attn_params;
    memcpy(t->share_spec, sh.attn_spec, sizeof t->share_spec);
    return 0;
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
    memset(t, 0, sizeof *t);
    t->d_ff = al_config_d_ff(c);
    t->n_items = al_config_n_attn(c);
    for (int k = 0; k < t->n_items; k++)
        if (attn_tensors(&t->item[k], c, k, e)) return -1;
    char err[256];
    if (al_config_check_share(c, err, sizeof err)) return al_errf(e, "%s", err);
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
    return 0;
}

void al_tensor_table_free(al_tensor_table *t)
{
    free(t->tensors);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------ counts */

size_t al_model_layer_kv_elems(const al_model_config *c, int layer)
{
    if (al_config_kv_consumer(c, layer)) return 0;   /* reads its producer's cache */
    al_attn_shape s;
    int k = layer % al_config_n_attn(c);
    fill_shape(&s, c, k);
    return al_config_attn_item(c, k).attn->kv_elems(&s);
}

size_t al_model_kv_elems_per_token(const al_model_config *c)
{
    size_t n = 0;
    for (int l = 0; l < c->n_layer; l++) n += al_model_layer_kv_elems(c, l);
    return n;
}

int al_attn_kv_rows(const al_variant_ops *v, const al_attn_shape *s, int context)
{
    AL_ASSERT(context >= 1);
    int rows = v->kv_rows ? v->kv_rows(s, context) : context;
    AL_ASSERT(rows >= 1 && rows <= context);   /* a cache never holds more than its tokens */
    return rows;
}

int al_model_layer_kv_rows(const al_model_config *c, int l, int context)
{
    AL_ASSERT(l >= 0 && l < c->n_layer);
    al_attn_shape s;
    int k = l % al_config_n_attn(c);   /* the layer's own attention */
    fill_shape(&s, c, k);
    return al_attn_kv_rows(al_config_attn_item(c, k).attn, &s, context);
}

size_t al_model_layer_kv_bytes(const al_model_config *c, int l, int dtype, int context)
{
    return (size_t)al_model_layer_kv_rows(c, l, context) * al_model_layer_kv_elems(c, l) *
           al_kv_dtype_size(dtype);
}

size_t al_model_kv_bytes_at(const al_model_config *c, int dtype, int context)
{
    size_t n = 0;
    for (int l = 0; l < c->n_layer; l++) n += al_model_layer_kv_bytes(c, l, dtype, context);
    return n;
}

size_t al_model_param_count(const al_model_config *c, al_err *e)
{
    al_tensor_table t;
    if (al_tensor_table_build(&t, c, e) != 0) return 0;
    size_t n = t.n_params;
    al_tensor_table_free(&t);
    return n;
}
