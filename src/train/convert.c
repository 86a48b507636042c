/*
 * convert.c - the conversion math: mha/gqa -> gqa/mqa by pooling K/V heads,
 * mha/gqa -> mla by the RoPE treatment and a truncated SVD, and how far the
 * result's keys and values are from the source's. al_convert.h says what
 * each method does and why; convert_run.c is the file-level job.
 */
#include "al_convert.h"

#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_config_io.h"
#include "al_data.h"
#include "al_registry.h"

/* ------------------------------------------------------------ names */

static const char *const method_names[] = {"mean", "first", "random", "svd"};
_Static_assert(sizeof method_names / sizeof method_names[0] == AL_CONVERT_N_METHODS,
               "a name for every method");

const char *al_convert_method_name(int method)
{
    return method >= 0 && method < AL_CONVERT_N_METHODS ? method_names[method] : "?";
}

int al_convert_method_parse(const char *name)
{
    for (int i = 0; i < AL_CONVERT_N_METHODS; i++)
        if (strcmp(name, method_names[i]) == 0) return i;
    return -1;
}

/* svd when a layer becomes mla (in a stack, its other layers are then
 * pooled by mean: al_convert.h), else mean. */
int al_convert_default_method(const al_model_config *dst)
{
    for (int k = 0; k < al_config_n_attn(dst); k++)
        if (strcmp(al_config_attn_item(dst, k).variant, "mla") == 0) return AL_CONVERT_SVD;
    return AL_CONVERT_MEAN;
}

/* Layer l of c as a model of that one attention: each layer converts by
 * itself (a model.layer_attention stack, layer by layer). */
/* The share of layer l's heads that rotates (its item's, else the model's). */
static double layer_fraction(const al_model_config *c, int l)
{
    al_attn_config a = al_config_layer_attn(c, l);
    return a.has_rope_fraction ? a.rope_fraction : c->rope_fraction;
}

static al_model_config layer_cfg(const al_model_config *c, int l)
{
    al_model_config x = *c;
    al_attn_config a = al_config_layer_attn(c, l);
    al_config_set_attn(&x, &a);
    x.rope_fraction = layer_fraction(c, l);
    return x;
}

static int is_stack(const al_model_config *c) { return c->n_layer_attn > 0; }

/* ------------------------------------------------------------ shapes */

static int setting(const al_model_config *c, const char *name)
{
    int j = al_variant_setting_index(c->attn, name);
    return j < 0 ? -1 : (int)c->attn_set[j];
}

/* K/V heads of a grouped-query variant, -1 for any other. */
static int kv_groups(const al_model_config *c)
{
    if (strcmp(c->variant, "mha") == 0) return c->n_head;
    if (strcmp(c->variant, "mqa") == 0) return 1;
    if (strcmp(c->variant, "gqa") == 0) return setting(c, "n_kv_head");
    return -1;
}

/* A layer that keeps a state rewritten in place (AL_KV_STATE), not K/V rows. */
static int is_state(const al_model_config *c)
{
    return c->attn->decode && c->attn->decode->storage == AL_KV_STATE;
}

static int is_mla(const al_model_config *c) { return strcmp(c->variant, "mla") == 0; }

static int same_attention(const al_model_config *a, const al_model_config *b)
{
    if (a->attn != b->attn) return 0;
    for (int j = 0; j < al_variant_n_settings(a->attn); j++)
        if (a->attn_set[j] != b->attn_set[j]) return 0;
    return 1;
}

/* The model outside attention must be the same: convert keeps it. */
static int same_trunk(const al_model_config *a, const al_model_config *b)
{
    return a->n_layer == b->n_layer && a->d_model == b->d_model && a->n_head == b->n_head &&
           a->d_head == b->d_head && a->vocab_size == b->vocab_size &&
           al_config_d_ff(a) == al_config_d_ff(b) && a->norm_eps == b->norm_eps &&
           a->rope_base == b->rope_base;
}

/* ------------------------------------------------------------ target */

/* Convert keeps each layer's position scheme: its keys are the source's
 * (pooled, or split by the SVD), so they must rotate as the source's did.
 * A target item without rope_fraction takes its layer's (a NoPE layer of
 * the source stays NoPE, whatever the target's cycle); one that gives
 * another fraction is refused. model.rope_fraction and model.rope_scaling
 * are the source's already (dst starts as a copy). */
static int keep_rope(const al_model_config *src, al_model_config *dst, al_err *e)
{
    int L = src->n_layer, moved = 0;
    for (int l = 0; l < L; l++) {
        al_attn_config a = al_config_layer_attn(dst, l);
        double want = layer_fraction(src, l);
        if (a.has_rope_fraction && a.rope_fraction != want)
            return al_errf(e, "convert: layer %d: rope_fraction %g is not the source's %g: "
                           "convert keeps each layer's position scheme (train or uptrain "
                           "with the new one instead)", l, a.rope_fraction, want);
        moved |= layer_fraction(dst, l) != want;
    }
    if (!moved) return 0;
    if (L > AL_MAX_LAYER_ATTN)
        return al_errf(e, "convert: the source's %d layers rotate differently from the "
                       "target's cycle, and a model.layer_attention list holds at most %d "
                       "items: give the target one item per layer", L, AL_MAX_LAYER_ATTN);
    al_attn_config items[AL_MAX_LAYER_ATTN];   /* one item per layer, each with its own */
    for (int l = 0; l < L; l++) {
        items[l] = al_config_layer_attn(dst, l);
        items[l].has_rope_fraction = 1, items[l].rope_fraction = layer_fraction(src, l);
    }
    dst->n_layer_attn = L;
    memcpy(dst->layer_attn, items, (size_t)L * sizeof items[0]);
    return 0;
}

int al_convert_target(const al_model_config *src, const al_node *to, al_model_config *dst,
                      al_err *e)
{
    /* The source as a whole experiment file, with model.attention replaced:
     * decoding checks the mapping exactly as a config file's. */
    al_config c;
    al_config_defaults(&c);
    c.model = *src;
    /* the tree names the key the target replaces: model.layer_attention
     * for a list, else model.attention */
    int list = to->kind == AL_NODE_SEQ;
    al_attn_config first = al_config_attn_item(src, 0);
    if (!list) al_config_set_attn(&c.model, &first);
    else if (!is_stack(src)) c.model.n_layer_attn = 1, c.model.layer_attn[0] = first;
    char *yaml = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&yaml, &n);
    AL_ASSERT(f != NULL);
    al_config_write_yaml(&c, f);
    AL_ASSERT(fclose(f) == 0);
    al_node *root = NULL;
    int rc = al_yaml_parse("convert", yaml, &root, e);
    free(yaml);
    if (rc == 0 && to->kind != AL_NODE_MAP && !list)
        rc = al_node_errf(e, to, "the target must be a mapping such as {variant: gqa, "
                          "n_kv_head: 2}, or a list of them (model.layer_attention)");
    if (rc == 0)
        rc = al_node_set_path(root, list ? "model.layer_attention" : "model.attention", to, 0, e);
    if (rc == 0) rc = al_config_decode(root, &c, e);
    al_node_free(root);
    if (rc != 0) return -1;
    *dst = *src;
    memcpy(dst->variant, c.model.variant, sizeof dst->variant);
    dst->attn = c.model.attn;
    memcpy(dst->attn_set, c.model.attn_set, sizeof dst->attn_set);
    dst->n_layer_attn = c.model.n_layer_attn;
    memcpy(dst->layer_attn, c.model.layer_attn, sizeof dst->layer_attn);
    return keep_rope(src, dst, e);
}

/* ------------------------------------------------------------ check */

static int check_svd(const al_model_config *src, const al_model_config *dst, int Gs,
                     al_err *e)
{
    int dc = setting(dst, "d_latent"), dr = setting(dst, "d_rope"), dq = setting(dst, "d_q_latent");
    int dh = src->d_head, rows = 2 * Gs * dh, rank = rows < src->d_model ? rows : src->d_model;
    if (src->rope_fraction != 1.0 || al_rope_kind_of(src->rope_scaling.kind) != AL_ROPE_NONE)
        return al_errf(e, "convert: method 'svd' splits plain RoPE over the whole head: the "
                       "source rotates %g of each head with rope_scaling '%s' (convert it by "
                       "training mla from scratch or from a plain-RoPE source)",
                       src->rope_fraction, src->rope_scaling.kind[0] ? src->rope_scaling.kind
                                                                    : "none");
    if (dq != 0)
        return al_errf(e, "convert: method 'svd' builds mla without query compression: "
                       "'d_q_latent' must be 0, got %d", dq);
    if (dr > dh || (dr != 2 && dh % dr != 0))
        return al_errf(e, "convert: 'd_rope' (%d) must divide 'd_head' (%d): MLA's RoPE "
                       "frequencies base^(-2i/d_rope) must be among the source's "
                       "base^(-2j/d_head)", dr, dh);
    if (dc > rank)
        return al_errf(e, "convert: 'd_latent' (%d) is above the rank available: %d = min(2 * "
                       "%d K/V heads * d_head %d, d_model %d)", dc, rank, Gs, dh, src->d_model);
    return 0;
}

static int check_one(const al_model_config *src, const al_model_config *dst, int method,
                     al_err *e);

/* The trunk once, then every layer's attention by itself. In a stack, svd
 * is the method of the layers that become mla; the others are pooled by
 * mean (or copied), so one run can reach [mla, mqa]. */
int al_convert_check(const al_model_config *src, const al_model_config *dst, int method,
                     al_err *e)
{
    if (method < 0 || method >= AL_CONVERT_N_METHODS)
        return al_errf(e, "convert: unknown method %d", method);
    if (src->kv_share > 1 || dst->kv_share > 1)   /* consumers have no K/V to pool */
        return al_errf(e, "convert: model.kv_share (%d) is not supported: convert a model "
                       "without cross-layer K/V sharing", src->kv_share > 1 ? src->kv_share
                                                                           : dst->kv_share);
    if (!is_stack(src) && !is_stack(dst)) return check_one(src, dst, method, e);
    al_model_config s0 = layer_cfg(src, 0), d0 = layer_cfg(dst, 0);
    if (!same_trunk(src, dst)) return check_one(&s0, &d0, method, e);   /* its message */
    for (int l = 0; l < src->n_layer; l++) {
        al_model_config sl = layer_cfg(src, l), dl = layer_cfg(dst, l);
        int m = method == AL_CONVERT_SVD && !is_mla(&dl) ? AL_CONVERT_MEAN : method;
        if (check_one(&sl, &dl, m, e) == 0) continue;
        char msg[sizeof e->msg];
        snprintf(msg, sizeof msg, "%s", e->msg + (strncmp(e->msg, "convert: ", 9) ? 0 : 9));
        return al_errf(e, "convert: layer %d (%s -> %s): %s", l, sl.variant, dl.variant, msg);
    }
    return 0;
}

static int check_one(const al_model_config *src, const al_model_config *dst, int method,
                     al_err *e)
{
    const char *mn = al_convert_method_name(method);
    int Gs = kv_groups(src), Gd = kv_groups(dst);
    if (!same_trunk(src, dst))
        return al_errf(e, "convert: the model outside attention differs (n_layer %d/%d, d_model "
                       "%d/%d, n_head %d/%d, d_head %d/%d, d_ff %d/%d, vocabulary %d/%d): convert "
                       "changes only the attention", src->n_layer, dst->n_layer, src->d_model,
                       dst->d_model, src->n_head, dst->n_head, src->d_head, dst->d_head,
                       al_config_d_ff(src), al_config_d_ff(dst), src->vocab_size,
                       dst->vocab_size);
    if (same_attention(src, dst) && method != AL_CONVERT_RANDOM) return 0;   /* a copy */
    if (is_state(src) || is_state(dst))   /* one line, whichever side keeps the state */
        return al_errf(e, "convert: '%s' is a state layer (a running state, not a cache of K/V "
                       "rows): no method converts into or out of it (train it from scratch)",
                       is_state(src) ? src->variant : dst->variant);
    if (strcmp(dst->variant, "gta") == 0)
        return al_errf(e, "convert: no method reaches 'gta': its tied state is both a group's "
                       "value and half its key, which separate K and V heads do not give (train "
                       "gta from scratch)");
    if (strcmp(dst->variant, "tpa") == 0)   /* see variants/tpa.c */
        return al_errf(e, "convert: nothing converts into 'tpa': its K and V are products of two "
                       "projections of the token, which no linear K/V weights map onto (train it "
                       "from scratch)");
    if (Gs < 0)
        return al_errf(e, "convert: method '%s' converts mha, gqa and mqa checkpoints, not "
                       "'%s'", mn, src->variant);
    if (strcmp(dst->variant, "gla") == 0 && method != AL_CONVERT_RANDOM)
        return al_errf(e, "convert: method '%s' does not reach gla: its grouped latents would "
                       "need a per-group SVD that convert does not do (use --method random)", mn);
    if (method == AL_CONVERT_SVD) {
        if (!is_mla(dst))
            return al_errf(e, "convert: method 'svd' reaches mla, not '%s' (use mean, first "
                           "or random)", dst->variant);
        return check_svd(src, dst, Gs, e);
    }
    if (method == AL_CONVERT_RANDOM && (is_mla(dst) || strcmp(dst->variant, "gla") == 0)) {
        if (setting(dst, "d_q_latent") != 0)
            return al_errf(e, "convert: method 'random' builds %s without query "
                           "compression: 'd_q_latent' must be 0", dst->variant);
        return 0;
    }
    if (Gd < 0)
        return al_errf(e, "convert: method '%s' reaches mha, gqa and mqa, not '%s'%s", mn,
                       dst->variant, is_mla(dst) ? " (use --method svd or random)" : "");
    if (method != AL_CONVERT_RANDOM && Gs % Gd != 0)
        return al_errf(e, "convert: the target's K/V heads ('n_kv_head' %d) must divide the "
                       "source's %d: method '%s' pools whole groups", Gd, Gs, mn);
    return 0;
}

/* ------------------------------------------------------------ tensors */

static float *attn_tensor(const al_model *m, int layer, const char *name)
{
    char full[AL_TENSOR_NAME];
    snprintf(full, sizeof full, "blocks.%d.attn.%s.weight", layer, name);
    const al_tensor *t = al_model_tensor(m, full);
    AL_ASSERT(t != NULL);
    return m->params + t->offset;
}

static int is_attn_name(const char *name) { return strstr(name, ".attn.") != NULL; }

/* Every tensor of dst that src has with the same shape and that is not
 * attention (or everything, when copy_attention). */
static void copy_common(const al_model *src, al_model *dst, int copy_attention)
{
    for (int i = 0; i < dst->n_tensors; i++) {
        const al_tensor *t = &dst->tensors[i], *s = al_model_tensor(src, t->name);
        if (!s || (!copy_attention && is_attn_name(t->name))) continue;
        AL_ASSERT(s->numel == t->numel);
        memcpy(dst->params + t->offset, src->params + s->offset, t->numel * sizeof(float));
    }
}

/* ------------------------------------------------------------ pooling */

/* New K/V head g' is the mean (or the first) of source heads
 * g' * r .. g' * r + r - 1, r = Gs / Gd: the query heads that read g' read
 * exactly those before. Sums in double, one rounding. */
static void pool_heads(float *dst, const float *src, int Gs, int Gd, int dh, int D, int first)
{
    int r = Gs / Gd, n = first ? 1 : r;
    for (int g = 0; g < Gd; g++)
        for (int e = 0; e < dh; e++)
            for (int c = 0; c < D; c++) {
                double s = 0;
                for (int k = 0; k < n; k++) s += src[((size_t)(g * r + k) * dh + e) * D + c];
                dst[((size_t)g * dh + e) * D + c] = (float)(s / n);
            }
}

/* Layer l by pooling: wq and wo copied, K/V heads pooled. */
static void convert_pool(const al_model *src, al_model *dst, int l, int first)
{
    al_model_config sl = layer_cfg(&src->cfg, l), dl = layer_cfg(&dst->cfg, l);
    int Gs = kv_groups(&sl), Gd = kv_groups(&dl);
    int dh = src->cfg.d_head, D = src->cfg.d_model;
    size_t n = (size_t)src->cfg.n_head * dh * D * sizeof(float);
    memcpy(attn_tensor(dst, l, "wq"), attn_tensor(src, l, "wq"), n);
    memcpy(attn_tensor(dst, l, "wo"), attn_tensor(src, l, "wo"), n);
    pool_heads(attn_tensor(dst, l, "wk"), attn_tensor(src, l, "wk"), Gs, Gd, dh, D, first);
    pool_heads(attn_tensor(dst, l, "wv"), attn_tensor(src, l, "wv"), Gs, Gd, dh, D, first);
}

/* Layer l's attention tensors as they are (the same attention). */
static void copy_layer(const al_model *src, al_model *dst, int l)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "blocks.%d.attn.", l);
    for (int i = 0; i < dst->n_tensors; i++) {
        const al_tensor *t = &dst->tensors[i], *s = al_model_tensor(src, t->name);
        if (strncmp(t->name, prefix, strlen(prefix)) != 0) continue;
        AL_ASSERT(s && s->numel == t->numel);
        memcpy(dst->params + t->offset, src->params + s->offset, t->numel * sizeof(float));
    }
}

/* ------------------------------------------------------------ random */

/* Attention tensors the source has in the same shape (wq, wo) are copied;
 * the others are drawn as at initialisation, in table order. */
static void convert_random(const al_model *src, al_model *dst, uint64_t seed)
{
    al_rng rng;
    al_rng_seed(&rng, seed);
    double resid = 0.02 / sqrt(2.0 * dst->cfg.n_layer);
    for (int i = 0; i < dst->n_tensors; i++) {
        const al_tensor *t = &dst->tensors[i], *s = al_model_tensor(src, t->name);
        if (!is_attn_name(t->name)) continue;
        float *p = dst->params + t->offset;
        int same = s && s->ndim == t->ndim && s->shape[0] == t->shape[0] &&
                   s->shape[1] == t->shape[1];
        if (same && (strstr(t->name, ".wq.") || strstr(t->name, ".wo."))) {
            memcpy(p, src->params + s->offset, t->numel * sizeof(float));
            continue;
        }
        for (size_t j = 0; j < t->numel; j++)
            p[j] = t->init == AL_INIT_NORMAL  ? (float)(0.02 * al_rng_normal(&rng))
                   : t->init == AL_INIT_RESID ? (float)(resid * al_rng_normal(&rng))
                   : t->init == AL_INIT_ONES  ? 1.0f
                   : t->init == AL_INIT_DECAY ? (float)al_init_decay_value((int)j, (int)t->numel)
                                              : 0.0f;
    }
}

/* ------------------------------------------------------------ mla: RoPE */

/* The RoPE treatment of one layer (al_convert.h): the kept pairs, the
 * mixing vector of each, the shared key's rows and the NoPE keys. */
typedef struct rope_plan {
    int G, dh, dr, D, H;
    int *pair;        /* (dr/2) source pair j of MLA pair i */
    double *u;        /* (dr/2, G) unit mixing vectors */
    float *wkr;       /* (dr, D) */
    float *wk_nope;   /* (G*dh, D) the source wk minus what k_r carries */
} rope_plan;

static void plan_free(rope_plan *p)
{
    free(p->pair), free(p->u), free(p->wkr), free(p->wk_nope);
    memset(p, 0, sizeof *p);
}

/* The leading eigenvector of the symmetric G x G matrix C (destroyed), its
 * largest component made positive so that the result is reproducible. */
static int top_eigvec(double *C, int G, double *u, al_err *e)
{
    double *w = al_malloc((size_t)G * sizeof *w);
    lapack_int info = LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'V', 'U', G, C, G, w);
    free(w);
    if (info != 0) return al_errf(e, "convert: LAPACKE_dsyev failed (info %d)", (int)info);
    int big = 0;
    for (int g = 0; g < G; g++) {   /* eigenvalues ascend: the last column */
        u[g] = C[(size_t)g * G + G - 1];
        if (fabs(u[g]) > fabs(u[big]) + 1e-12) big = g;
    }
    if (u[big] < 0)
        for (int g = 0; g < G; g++) u[g] = -u[g];
    return 0;
}

/* Covariance over the sample of the K/V heads' keys at source pair j:
 * C[g][g'] = sum_t k_g,j k_g',j + k_g,j+dh/2 k_g',j+dh/2 with K = X wk^T. */
static void pair_cov(double *C, const float *K, long N, int G, int dh, int j)
{
    memset(C, 0, (size_t)G * G * sizeof *C);
    for (long t = 0; t < N; t++) {
        const float *k = K + (size_t)t * G * dh;
        for (int a = 0; a < G; a++)
            for (int b = 0; b <= a; b++)
                C[a * G + b] += (double)k[a * dh + j] * k[b * dh + j] +
                                (double)k[a * dh + j + dh / 2] * k[b * dh + j + dh / 2];
    }
    for (int a = 0; a < G; a++)
        for (int b = 0; b < a; b++) C[b * G + a] = C[a * G + b];
}

/* A NoPE key stands in for a key that rotated by theta * d against its
 * query, d the distance between them. The closest a fixed scalar rho gets
 * to that rotation over every (query, key) pair of a training window (T - d
 * pairs at distance d) is rho = sum_d (T - d) cos(theta d) / sum_d (T - d):
 * about 1 for the slow pairs, whose rotation hardly moves within a window,
 * and about 0 for the fast ones, whose scores the rotation averages away.
 * Each pair's NoPE keys are scaled by theirs. */
static double pair_rho(int j, int dh, int T, double base)
{
    double theta = pow(base, -2.0 * j / dh), num = 0, den = 0;
    for (int d = 0; d < T; d++) num += (T - d) * cos(theta * d), den += T - d;
    return num / den;
}

static void damp_nope(rope_plan *p, int T, double base)
{
    for (int j = 0; j < p->dh / 2; j++) {
        float rho = (float)pair_rho(j, p->dh, T, base);
        for (int g = 0; g < p->G; g++) {
            float *a = p->wk_nope + ((size_t)g * p->dh + j) * p->D;
            float *b = a + (size_t)p->dh / 2 * p->D;
            for (int c = 0; c < p->D; c++) a[c] *= rho, b[c] *= rho;
        }
    }
}

static int plan_layer(const al_model *src, const al_model_config *dst, int l,
                      const al_convert_sample *s, rope_plan *p, al_err *e)
{
    al_model_config sl = layer_cfg(&src->cfg, l);
    p->G = kv_groups(&sl), p->dh = src->cfg.d_head, p->dr = setting(dst, "d_rope");
    p->D = src->cfg.d_model, p->H = src->cfg.n_head;
    int G = p->G, dh = p->dh, dr = p->dr, D = p->D, half = dr / 2;
    const float *wk = attn_tensor(src, l, "wk"), *X = s->x + (size_t)l * s->n * D;
    p->pair = al_malloc((size_t)half * sizeof *p->pair);
    p->u = al_malloc((size_t)half * G * sizeof *p->u);
    p->wkr = al_calloc((size_t)dr * D, sizeof *p->wkr);
    p->wk_nope = al_malloc((size_t)G * dh * D * sizeof *p->wk_nope);
    memcpy(p->wk_nope, wk, (size_t)G * dh * D * sizeof *wk);
    float *K = al_malloc((size_t)s->n * G * dh * sizeof *K);
    double *C = al_malloc((size_t)G * G * sizeof *C);
    al_linear_forward(K, X, wk, s->n, D, G * dh);
    int rc = 0;
    for (int i = 0; i < half && rc == 0; i++) {
        int j = p->pair[i] = i * (dh / dr > 0 ? dh / dr : 1);
        double *u = p->u + (size_t)i * G;
        pair_cov(C, K, s->n, G, dh, j);
        rc = top_eigvec(C, G, u, e);
        for (int c = 0; rc == 0 && c < D; c++) {
            double a = 0, b = 0;
            for (int g = 0; g < G; g++) {
                a += u[g] * wk[((size_t)g * dh + j) * D + c];
                b += u[g] * wk[((size_t)g * dh + j + dh / 2) * D + c];
            }
            p->wkr[(size_t)i * D + c] = (float)a;
            p->wkr[(size_t)(i + half) * D + c] = (float)b;
            for (int g = 0; g < G; g++) {   /* what u leaves behind: NoPE */
                p->wk_nope[((size_t)g * dh + j) * D + c] -= (float)(u[g] * a);
                p->wk_nope[((size_t)g * dh + j + dh / 2) * D + c] -= (float)(u[g] * b);
            }
        }
    }
    if (rc == 0) damp_nope(p, src->cfg.seq_len, src->cfg.rope_base);
    free(K), free(C);
    if (rc != 0) plan_free(p);
    return rc;
}

/* ------------------------------------------------------------ mla: SVD */

static double frob2(const float *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

/* alpha = ||X wk_nope^T|| / ||X wv^T|| over the sample: the keys are
 * divided by it before the SVD (TransMLA's balanced K/V) and wuk multiplied
 * back, so that neither dominates the truncation. */
static double kv_balance(const rope_plan *p, const float *wv, const float *X, long N)
{
    size_t n = (size_t)N * p->G * p->dh;
    float *Y = al_malloc(n * sizeof *Y);
    al_linear_forward(Y, X, p->wk_nope, (int)N, p->D, p->G * p->dh);
    double k = frob2(Y, n);
    al_linear_forward(Y, X, wv, (int)N, p->D, p->G * p->dh);
    double v = frob2(Y, n);
    free(Y);
    return k > 0 && v > 0 ? sqrt(k / v) : 1.0;
}

/* kv_norm weight per latent dimension: the least-squares g_i with
 * g_i * rstd_t * c0_ti ~ c0_ti over the sample, so that the normalised
 * latent stays the one the SVD built. */
static void fit_kv_norm(float *g, const float *wdkv, int dc, const float *X, long N, int D,
                        double eps)
{
    float *c0 = al_malloc((size_t)N * dc * sizeof *c0);
    double *num = al_calloc((size_t)dc, sizeof *num), *den = al_calloc((size_t)dc, sizeof *den);
    al_linear_forward(c0, X, wdkv, (int)N, D, dc);
    for (long t = 0; t < N; t++) {
        const float *c = c0 + (size_t)t * dc;
        double r = 1.0 / sqrt(frob2(c, (size_t)dc) / dc + eps);
        for (int i = 0; i < dc; i++) {
            double c2 = (double)c[i] * c[i];
            num[i] += r * c2, den[i] += r * r * c2;
        }
    }
    for (int i = 0; i < dc; i++) g[i] = den[i] > 0 ? (float)(num[i] / den[i]) : 1.0f;
    free(c0), free(num), free(den);
}

/* W = [wk_nope / alpha; wv] (2*G*dh, D) = U S V^T; keep dc components. */
static int svd_layer(const rope_plan *p, const float *wv, double alpha, int dc, float *wdkv,
                     float *up, al_err *e)
{
    int M = 2 * p->G * p->dh, D = p->D, r = M < D ? M : D;
    size_t half = (size_t)p->G * p->dh * D;
    float *W = al_malloc((size_t)M * D * sizeof *W), *S = al_malloc((size_t)r * sizeof *S);
    float *U = al_malloc((size_t)M * r * sizeof *U), *VT = al_malloc((size_t)r * D * sizeof *VT);
    for (size_t i = 0; i < half; i++) W[i] = (float)(p->wk_nope[i] / alpha);
    memcpy(W + half, wv, half * sizeof *W);
    lapack_int info = LAPACKE_sgesdd(LAPACK_ROW_MAJOR, 'S', M, D, W, D, S, U, r, VT, D);
    if (info == 0) {
        memcpy(wdkv, VT, (size_t)dc * D * sizeof *VT);      /* rows of V^T */
        for (int i = 0; i < M; i++)
            for (int k = 0; k < dc; k++) up[(size_t)i * dc + k] = U[(size_t)i * r + k] * S[k];
    }
    free(W), free(S), free(U), free(VT);
    if (info != 0) return al_errf(e, "convert: LAPACKE_sgesdd failed (info %d)", (int)info);
    return 0;
}

/* Query weights: wq scaled, and per head the RoPE query of each kept pair
 * mixed by that head's group's weight in u. */
static void mla_queries(const rope_plan *p, const float *wq, float *dq, float *wqr)
{
    int H = p->H, dh = p->dh, dr = p->dr, D = p->D, half = dr / 2;
    double s = sqrt((double)(dh + dr) / dh);   /* MLA divides by sqrt(dh + dr) */
    for (size_t i = 0; i < (size_t)H * dh * D; i++) dq[i] = (float)(wq[i] * s);
    for (int h = 0; h < H; h++) {
        int g = h / (H / p->G);
        for (int i = 0; i < half; i++) {
            double w = s * p->u[(size_t)i * p->G + g];
            const float *a = wq + ((size_t)h * dh + p->pair[i]) * D, *b = a + (size_t)dh / 2 * D;
            float *ra = wqr + ((size_t)h * dr + i) * D, *rb = ra + (size_t)half * D;
            for (int c = 0; c < D; c++) ra[c] = (float)(w * a[c]), rb[c] = (float)(w * b[c]);
        }
    }
}

/* wuk, wuv: head h takes the rows of its source group from up (keys scaled
 * back by alpha). */
static void mla_up(const rope_plan *p, const float *up, double alpha, int dc, float *wuk,
                   float *wuv)
{
    int H = p->H, dh = p->dh, G = p->G;
    for (int h = 0; h < H; h++) {
        int g = h / (H / G);
        for (int e = 0; e < dh; e++) {
            const float *k = up + ((size_t)g * dh + e) * dc;
            const float *v = up + ((size_t)(G + g) * dh + e) * dc;
            float *ko = wuk + ((size_t)h * dh + e) * dc, *vo = wuv + ((size_t)h * dh + e) * dc;
            for (int i = 0; i < dc; i++) ko[i] = (float)(k[i] * alpha), vo[i] = v[i];
        }
    }
}

static int convert_mla_layer(const al_model *src, al_model *dst, int l,
                             const al_convert_sample *s, al_err *e)
{
    rope_plan p;
    al_model_config dl = layer_cfg(&dst->cfg, l);
    if (plan_layer(src, &dl, l, s, &p, e) != 0) return -1;
    int dc = setting(&dl, "d_latent");
    const float *wv = attn_tensor(src, l, "wv"), *X = s->x + (size_t)l * s->n * p.D;
    double alpha = kv_balance(&p, wv, X, s->n);
    float *up = al_malloc((size_t)2 * p.G * p.dh * dc * sizeof *up);
    float *wdkv = attn_tensor(dst, l, "wdkv");
    int rc = svd_layer(&p, wv, alpha, dc, wdkv, up, e);
    if (rc == 0) {
        mla_queries(&p, attn_tensor(src, l, "wq"), attn_tensor(dst, l, "wq"),
                    attn_tensor(dst, l, "wqr"));
        memcpy(attn_tensor(dst, l, "wkr"), p.wkr, (size_t)p.dr * p.D * sizeof(float));
        mla_up(&p, up, alpha, dc, attn_tensor(dst, l, "wuk"), attn_tensor(dst, l, "wuv"));
        memcpy(attn_tensor(dst, l, "wo"), attn_tensor(src, l, "wo"),
               (size_t)p.D * p.H * p.dh * sizeof(float));
        fit_kv_norm(attn_tensor(dst, l, "kv_norm"), wdkv, dc, X, s->n, p.D, dst->cfg.norm_eps);
    }
    free(up);
    plan_free(&p);
    return rc;
}

/* ------------------------------------------------------------ convert */

int al_convert(const al_model *src, al_model *dst, const al_convert_opts *o, al_err *e)
{
    if (al_convert_check(&src->cfg, &dst->cfg, o->method, e) != 0) return -1;
    copy_common(src, dst, 0);
    if (o->method == AL_CONVERT_RANDOM) {
        convert_random(src, dst, o->seed);
        return 0;
    }
    int has_sample = o->sample && o->sample->n >= 1 && o->sample->n_layer == src->cfg.n_layer &&
                     o->sample->d == src->cfg.d_model;
    for (int l = 0; l < src->cfg.n_layer; l++) {   /* each layer by itself */
        al_model_config sl = layer_cfg(&src->cfg, l), dl = layer_cfg(&dst->cfg, l);
        if (same_attention(&sl, &dl)) copy_layer(src, dst, l);
        else if (o->method != AL_CONVERT_SVD || !is_mla(&dl))
            convert_pool(src, dst, l, o->method == AL_CONVERT_FIRST);
        else if (!has_sample)
            return al_errf(e, "convert: method 'svd' needs a sample of the source's attention "
                           "inputs");
        else if (convert_mla_layer(src, dst, l, o->sample, e) != 0) return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ sample */

int al_convert_sample_take(al_model *src, al_data *d, int T, int batch, long tokens,
                           uint64_t seed, al_convert_sample *s, al_err *e)
{
    int D = src->cfg.d_model, L = src->cfg.n_layer;
    long windows = tokens > T ? (tokens + T - 1) / T : 1;
    memset(s, 0, sizeof *s);
    if (batch < 1) batch = 1;
    if (al_model_reserve(src, batch, T, e) != 0) return -1;
    s->n_layer = L, s->d = D, s->n = (int)(windows * T);
    s->x = al_malloc((size_t)L * s->n * D * sizeof *s->x);
    size_t BT = (size_t)batch * T;
    int *in = al_malloc(BT * sizeof *in), *tgt = al_malloc(BT * sizeof *tgt);
    float *w = al_malloc(BT * sizeof *w);
    al_rng rng;
    al_rng_seed(&rng, seed);
    for (long first = 0; first < windows; first += batch) {
        int b = windows - first < batch ? (int)(windows - first) : batch;
        al_data_batch(d, AL_SPLIT_TRAIN, &rng, b, T, in, tgt, w);
        al_model_forward(src, in, NULL, NULL, b, T);
        for (int l = 0; l < L; l++)
            memcpy(s->x + ((size_t)l * s->n + (size_t)first * T) * D, src->layers[l].h1,
                   (size_t)b * T * D * sizeof(float));
    }
    free(in), free(tgt), free(w);
    return 0;
}

void al_convert_sample_free(al_convert_sample *s)
{
    free(s->x);
    memset(s, 0, sizeof *s);
}

/* ------------------------------------------------------------ measure */

/* Squared error and squared norm of what each query head reads: got
 * (N, Gg*dh) against want (N, Gw*dh), head h reading group h/(H/G). */
static void head_err(const float *got, int Gg, const float *want, int Gw, long N, int H, int dh,
                     double *err, double *norm)
{
    for (long t = 0; t < N; t++)
        for (int h = 0; h < H; h++) {
            const float *a = got + ((size_t)t * Gg + h / (H / Gg)) * dh;
            const float *b = want + ((size_t)t * Gw + h / (H / Gw)) * dh;
            for (int i = 0; i < dh; i++) {
                double d = (double)a[i] - b[i];
                *err += d * d, *norm += (double)b[i] * b[i];
            }
        }
}

static double ratio(double err, double norm) { return norm > 0 ? sqrt(err / norm) : 0.0; }

/* Relative error of X w_got^T (read by H heads) against X w_want^T. */
static double proj_err(const float *X, long N, int D, const float *w_got, int Gg,
                       const float *w_want, int Gw, int H, int dh)
{
    float *A = al_malloc((size_t)N * Gg * dh * sizeof *A);
    float *B = al_malloc((size_t)N * Gw * dh * sizeof *B);
    al_linear_forward(A, X, w_got, (int)N, D, Gg * dh);
    al_linear_forward(B, X, w_want, (int)N, D, Gw * dh);
    double err = 0, norm = 0;
    head_err(A, Gg, B, Gw, N, H, dh, &err, &norm);
    free(A), free(B);
    return ratio(err, norm);
}

static void measure_family(const al_model *src, const al_model *dst, int l, const float *X,
                           long N, al_convert_err *r)
{
    al_model_config sl = layer_cfg(&src->cfg, l), dl = layer_cfg(&dst->cfg, l);
    const al_model_config *c = &sl;
    int Gs = kv_groups(c), Gd = kv_groups(&dl);
    r->k = proj_err(X, N, c->d_model, attn_tensor(dst, l, "wk"), Gd, attn_tensor(src, l, "wk"),
                    Gs, c->n_head, c->d_head);
    r->v = proj_err(X, N, c->d_model, attn_tensor(dst, l, "wv"), Gd, attn_tensor(src, l, "wv"),
                    Gs, c->n_head, c->d_head);
    r->k_prenorm = r->k, r->v_prenorm = r->v, r->rope_kept = NAN;
}

/* Share of the source keys' energy on the sample that k_r carries. */
static double rope_share(const rope_plan *p, const float *X, long N, const float *wk)
{
    int G = p->G, dh = p->dh;
    float *K = al_malloc((size_t)N * G * dh * sizeof *K);
    al_linear_forward(K, X, wk, (int)N, p->D, G * dh);
    double kept = 0, all = frob2(K, (size_t)N * G * dh);
    for (long t = 0; t < N; t++)
        for (int i = 0; i < p->dr / 2; i++)
            for (int part = 0; part < 2; part++) {
                double a = 0;
                for (int g = 0; g < G; g++)
                    a += p->u[(size_t)i * G + g] *
                         K[((size_t)t * G + g) * dh + p->pair[i] + part * dh / 2];
                kept += a * a;
            }
    free(K);
    return all > 0 ? kept / all : 0.0;
}

/* mla: the latent before and after kv_norm through wuk, wuv, against the
 * NoPE keys and the values the SVD factorised. */
static void measure_mla(const al_model *src, const al_model *dst, int l,
                        const al_convert_sample *s, al_convert_err *r)
{
    rope_plan p;
    al_model_config dl = layer_cfg(&dst->cfg, l);
    if (plan_layer(src, &dl, l, s, &p, NULL) != 0) {
        r->k = r->v = r->k_prenorm = r->v_prenorm = r->rope_kept = NAN;
        return;
    }
    int dc = setting(&dl, "d_latent"), H = p.H, dh = p.dh, D = p.D, G = p.G;
    long N = s->n;
    const float *X = s->x + (size_t)l * N * D;
    float *c0 = al_malloc((size_t)N * dc * sizeof *c0), *c = al_malloc((size_t)N * dc * sizeof *c);
    float *got = al_malloc((size_t)N * H * dh * sizeof *got);
    float *want = al_malloc((size_t)N * G * dh * sizeof *want);
    al_linear_forward(c0, X, attn_tensor(dst, l, "wdkv"), (int)N, D, dc);
    al_rmsnorm_forward(c, NULL, c0, attn_tensor(dst, l, "kv_norm"), (int)N, dc,
                       (float)dst->cfg.norm_eps);
    const char *up[2] = {"wuk", "wuv"};
    const float *target[2] = {p.wk_nope, attn_tensor(src, l, "wv")};
    double *out[2][2] = {{&r->k_prenorm, &r->k}, {&r->v_prenorm, &r->v}};
    for (int kv = 0; kv < 2; kv++) {
        al_linear_forward(want, X, target[kv], (int)N, D, G * dh);
        for (int normed = 0; normed < 2; normed++) {
            double err = 0, norm = 0;
            al_linear_forward(got, normed ? c : c0, attn_tensor(dst, l, up[kv]), (int)N, dc,
                              H * dh);
            head_err(got, H, want, G, N, H, dh, &err, &norm);
            *out[kv][normed] = ratio(err, norm);
        }
    }
    r->rope_kept = rope_share(&p, X, N, attn_tensor(src, l, "wk"));
    free(c0), free(c), free(got), free(want);
    plan_free(&p);
}

void al_convert_measure(const al_model *src, const al_model *dst, const al_convert_opts *o,
                        al_convert_err *per_layer)
{
    const al_convert_sample *s = o->sample;
    for (int l = 0; l < src->cfg.n_layer; l++) {
        al_convert_err *r = &per_layer[l];
        al_model_config sl = layer_cfg(&src->cfg, l), dl = layer_cfg(&dst->cfg, l);
        int identity = same_attention(&sl, &dl) && o->method != AL_CONVERT_RANDOM;
        *r = (al_convert_err){NAN, NAN, NAN, NAN, NAN};
        if (!s) continue;
        const float *X = s->x + (size_t)l * s->n * s->d;
        if (identity) *r = (al_convert_err){0, 0, 0, 0, NAN};
        else if (is_mla(&dl) && o->method == AL_CONVERT_SVD) measure_mla(src, dst, l, s, r);
        else if (kv_groups(&dl) > 0 && kv_groups(&sl) > 0) measure_family(src, dst, l, X, s->n, r);
    }
}
