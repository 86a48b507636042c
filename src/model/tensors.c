/*
 * tensors.c - the tensor table of a model config (al_tensors.h): the
 * variant's tensors checked, every tensor laid out in one flat buffer.
 */
#include "al_tensors.h"
#include "al_registry.h"

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
 * error naming the variant, not a crash. */
static int check_attn_params(const al_tensor_table *t, const char *v, al_err *e)
{
    int n = t->n_attn_params;
    if (n < 1 || n > AL_MAX_ATTN_PARAMS)
        return al_errf(e, "model.attention: variant '%s' declares %d parameter tensors, not "
                       "1 to %d", v, n, AL_MAX_ATTN_PARAMS);
    for (int i = 0; i < n; i++) {
        const al_param_spec *p = &t->attn_spec[i];
        if (!memchr(p->name, 0, sizeof p->name) || !al_variant_plain_name(p->name))
            return al_errf(e, "model.attention: variant '%s': parameter tensor %d needs a "
                           "name of 1 to %zu letters, digits, '_' or '-'", v, i + 1,
                           sizeof p->name - 1);
        for (int j = 0; j < i; j++)
            if (strcmp(p->name, t->attn_spec[j].name) == 0)
                return al_errf(e, "model.attention: variant '%s' declares parameter tensor "
                               "'%s' twice", v, p->name);
        if (p->rows < 1 || p->cols < 0 || (double)p->rows * (p->cols ? p->cols : 1) > INT_MAX)
            return al_errf(e, "model.attention: variant '%s': tensor '%s' has shape [%d, %d]; "
                           "rows >= 1, cols >= 0 (0: 1-D), at most %d elements", v, p->name,
                           p->rows, p->cols, INT_MAX);
        if (p->init < AL_INIT_NORMAL || p->init > AL_INIT_ZEROS)
            return al_errf(e, "model.attention: variant '%s': tensor '%s' has init %d, not "
                           "one of enum al_init", v, p->name, p->init);
    }
    return 0;
}

/* The variant's view of c: d_head as given (decoding resolved it). */
static void fill_shape(al_attn_shape *s, const al_model_config *c)
{
    memset(s, 0, sizeof *s);
    s->d_model = c->d_model;
    s->n_head = c->n_head;
    s->d_head = c->d_head;
    s->seq_len = c->seq_len;
    s->causal = c->causal;
    s->rope_base = (float)c->rope_base;
    s->norm_eps = (float)c->norm_eps;
    memcpy(s->set, c->attn_set, sizeof s->set);
}

void al_attn_shape_of(al_attn_shape *s, const al_model_config *c) { fill_shape(s, c); }

/* The variant's check and tensors; 0 or -1 if it rejects the shape. */
static int attn_tensors(al_tensor_table *t, const al_model_config *c, al_err *e)
{
    char err[512] = "";
    if (c->attn->check && c->attn->check(&t->ashape, err, sizeof err) != 0) {
        err[sizeof err - 1] = 0;   /* a plugin's message, perhaps unterminated */
        return al_errf(e, "model.attention: %s", err);
    }
    t->n_attn_params = c->attn->params(&t->ashape, t->attn_spec);
    return check_attn_params(t, c->attn->name, e);
}

int al_tensor_table_build(al_tensor_table *t, const al_model_config *c, al_err *e)
{
    char name[AL_TENSOR_NAME];
    size_t checked, kv;   /* the KV count too: a decoder trusts it */
    if (al_model_counts(c, &checked, &kv, e) != 0) return -1;   /* before the table's calloc */
    memset(t, 0, sizeof *t);
    fill_shape(&t->ashape, c);
    t->d_ff = al_config_d_ff(c);
    if (attn_tensors(t, c, e)) return -1;
    int D = c->d_model, F = t->d_ff;
    t->tensors = al_calloc((size_t)c->n_layer * (4 + t->n_attn_params) + 2, sizeof(al_tensor));
    size_t off = 0;
    add_tensor(t, &off, "tok_emb.weight", c->vocab_size, D, AL_INIT_NORMAL);
    for (int l = 0; l < c->n_layer; l++) {
        snprintf(name, sizeof name, "blocks.%d.attn_norm.weight", l);
        add_tensor(t, &off, name, D, 0, AL_INIT_ONES);
        for (int i = 0; i < t->n_attn_params; i++) {
            const al_param_spec *p = &t->attn_spec[i];
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
    free(t->tensors);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------ counts */

size_t al_model_kv_elems_per_token(const al_model_config *c)
{
    al_attn_shape s;
    fill_shape(&s, c);
    return (size_t)c->n_layer * c->attn->kv_elems(&s);
}

size_t al_model_param_count(const al_model_config *c, al_err *e)
{
    size_t n;
    return al_model_counts(c, &n, NULL, e) == 0 ? n : 0;
}

/* ------------------------------------------------------------ checked counts */

/* The variant's KV floats per token of one layer, checked (a plugin's
 * answer is not trusted). */
static int kv_per_layer(const al_model_config *c, const al_attn_shape *s, size_t *kv, al_err *e)
{
    *kv = c->attn->kv_elems(s);
    if (*kv > AL_MAX_REPORTED_FLOATS)
        return al_errf(e, "model.attention: variant '%s' reports %zu KV-cache floats per token "
                       "per layer, more than the limit of %llu", c->attn->name, *kv,
                       (unsigned long long)AL_MAX_REPORTED_FLOATS);
    return 0;
}

/* One layer's parameters: the norms, the variant's tensors (each at most
 * INT_MAX elements, checked), the MLP. */
static int layer_params(const al_tensor_table *t, size_t D, size_t F, size_t *out)
{
    size_t n = 2 * D, mlp;
    for (int i = 0; i < t->n_attn_params; i++) {
        const al_param_spec *p = &t->attn_spec[i];
        n += (size_t)p->rows * (size_t)(p->cols ? p->cols : 1);
    }
    if (__builtin_mul_overflow(2 * D, F, &mlp) || __builtin_add_overflow(n, mlp, out))
        return -1;
    return 0;
}

int al_model_counts(const al_model_config *c, size_t *n_params, size_t *kv_per_token, al_err *e)
{
    al_tensor_table t;   /* the shape and the variant's specs only: no tensors */
    memset(&t, 0, sizeof t);
    fill_shape(&t.ashape, c);
    t.d_ff = al_config_d_ff(c);
    if (c->n_layer < 1 || c->d_model < 1 || c->vocab_size < 0 || t.d_ff < 1)
        return al_errf(e, "model: n_layer, d_model and the MLP width must be positive");
    if (attn_tensors(&t, c, e)) return -1;
    size_t D = (size_t)c->d_model, one, fixed = (size_t)c->vocab_size * D + D;
    if (layer_params(&t, D, (size_t)t.d_ff, &one) != 0 ||
        (size_t)c->n_layer > AL_MAX_PARAMS / (one ? one : 1) ||
        fixed > AL_MAX_PARAMS - (size_t)c->n_layer * one)
        return al_errf(e, "model: 'model.n_layer' (%d) blocks of 'model.d_model' (%d) with an MLP "
                       "of %d have more than %llu parameters (the limit: 16 bytes each must be "
                       "addressable)", c->n_layer, c->d_model, t.d_ff,
                       (unsigned long long)AL_MAX_PARAMS);
    *n_params = fixed + (size_t)c->n_layer * one;
    if (!kv_per_token) return 0;
    size_t kv;
    if (kv_per_layer(c, &t.ashape, &kv, e) != 0) return -1;
    if (__builtin_mul_overflow(kv, (size_t)c->n_layer, kv_per_token) ||
        *kv_per_token > SIZE_MAX / sizeof(float))
        return al_errf(e, "model: 'model.n_layer' (%d) x %zu KV-cache floats per layer: the "
                       "bytes per token overflow %zu", c->n_layer, kv, SIZE_MAX);
    return 0;
}
