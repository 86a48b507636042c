/*
 * variant_compat.c - tables of interface versions 2 to 4 wrapped into
 * version 5 (al_variant_compat.h). The version ladder lives here only.
 */
#include "attnlab_variant.h"
#include "attnlab_variant_v4.h"
#include "al_variant_compat.h"

#include <stdlib.h>
#include <string.h>

struct al_variant_compat {
    al_variant_ops old;       /* the old table, whole; members it predates NULL */
    al_variant v;             /* the wrapper; its sub-tables below */
    al_variant_train train;
    al_variant_decode decode;
    al_variant_share share;
    al_variant_pictures pictures;
};

/* A layer's context: the old table and the shape it is called with. */
typedef struct old_ctx {
    const al_variant_ops *o;
    al_attn_shape s;
} old_ctx;

#define OLD(ctx) (((const old_ctx *)(ctx))->o)
#define SHAPE(ctx) (&((const old_ctx *)(ctx))->s)

static void *c_init(const al_variant *v, const al_attn_shape *s, char *err, size_t n)
{
    const al_variant_ops *o = v->data;
    if (o->check && o->check(s, err, n) != 0) return NULL;
    old_ctx *c = malloc(sizeof *c);
    AL_ASSERT(c != NULL);
    c->o = o;
    c->s = *s;
    return c;
}

/* ------------------------------------------------------------ training */

static int c_params(const void *ctx, al_param_spec *out)
{
    return OLD(ctx)->params(SHAPE(ctx), out);
}
static size_t c_act(const void *ctx, int B, int T)
{
    return OLD(ctx)->act_floats(SHAPE(ctx), B, T);
}
static size_t c_scratch(const void *ctx, int B, int T)
{
    return OLD(ctx)->scratch_floats(SHAPE(ctx), B, T);
}
static void c_forward(const void *ctx, float *out, float *act, float *scratch, const float *x,
                      float *const *p, int B, int T)
{
    OLD(ctx)->forward(SHAPE(ctx), out, act, scratch, x, p, B, T);
}
static void c_backward(const void *ctx, float *dx, float *const *dp, float *scratch,
                       const float *dout, const float *x, const float *act, float *const *p,
                       int B, int T)
{
    OLD(ctx)->backward(SHAPE(ctx), dx, dp, scratch, dout, x, act, p, B, T);
}

/* ------------------------------------------------------------ decode */

static size_t c_kv_elems(const void *ctx) { return OLD(ctx)->kv_elems(SHAPE(ctx)); }
static int c_kv_rows(const void *ctx, int context)
{
    return OLD(ctx)->kv_rows(SHAPE(ctx), context);
}
static size_t c_key_elems(const void *ctx) { return OLD(ctx)->kv_key_elems(SHAPE(ctx)); }
static void c_prefill(const void *ctx, al_kv_cache *cache, const float *act, float *const *p,
                      int T)
{
    OLD(ctx)->prefill(SHAPE(ctx), cache, act, p, T);
}
static size_t c_dscratch(const void *ctx, int context)
{
    return OLD(ctx)->decode_scratch_floats(SHAPE(ctx), context);
}
static void c_decode(const void *ctx, float *out, float *scratch, const float *x,
                     float *const *p, al_kv_cache *cache, int pos)
{
    OLD(ctx)->decode(SHAPE(ctx), out, scratch, x, p, cache, pos);
}
static size_t c_bscratch(const void *ctx, int context, int B)
{
    return OLD(ctx)->decode_batch_scratch_floats(SHAPE(ctx), context, B);
}
static void c_decode_batch(const void *ctx, float *out, float *scratch, const float *x,
                           float *const *p, al_kv_cache *const *caches, const int *pos, int B)
{
    OLD(ctx)->decode_batch(SHAPE(ctx), out, scratch, x, p, caches, pos, B);
}

/* ------------------------------------------------------------ sharing, pictures */

static int c_share_params(const void *ctx, al_param_spec *out)
{
    return OLD(ctx)->share_params(SHAPE(ctx), out);
}
static size_t c_share_act(const void *ctx, int B, int T)
{
    return OLD(ctx)->share_act_floats(SHAPE(ctx), B, T);
}
/* One forward and one backward for the old twins: src says which. */
static void c_share_forward(const void *ctx, float *out, float *act, float *scratch,
                            const float *x, float *const *p, const float *src, int B, int T)
{
    if (src) OLD(ctx)->share_forward(SHAPE(ctx), out, act, scratch, x, p, src, B, T);
    else OLD(ctx)->forward(SHAPE(ctx), out, act, scratch, x, p, B, T);
}
static void c_share_backward(const void *ctx, float *dx, float *const *dp, float *dkv,
                             float *scratch, const float *dout, const float *x, const float *act,
                             const float *src, float *const *p, int B, int T)
{
    if (src)
        OLD(ctx)->share_backward(SHAPE(ctx), dx, dp, dkv, scratch, dout, x, act, src, p, B, T);
    else
        OLD(ctx)->backward_kv(SHAPE(ctx), dx, dp, dkv, scratch, dout, x, act, p, B, T);
}
static void c_share_decode(const void *ctx, float *out, float *scratch, const float *x,
                           float *const *p, const al_kv_cache *cache, int pos)
{
    OLD(ctx)->share_decode(SHAPE(ctx), out, scratch, x, p, cache, pos);
}
static void c_probs(const void *ctx, float *P, const float *act, const float *src,
                    float *const *p, int T)
{
    if (src) OLD(ctx)->share_probs(SHAPE(ctx), P, act, src, p, T);
    else OLD(ctx)->probs(SHAPE(ctx), P, act, p, T);
}

/* ------------------------------------------------------------ wrapping */

/* A member of the wrapper: f when the old table has the member, else NULL. */
#define IF(member, f) (o->member ? (f) : NULL)

static void wrap_members(al_variant_compat *c)
{
    const al_variant_ops *o = &c->old;
    c->train = (al_variant_train){IF(params, c_params), IF(act_floats, c_act),
                                  IF(scratch_floats, c_scratch), IF(forward, c_forward),
                                  IF(backward, c_backward), o->flags};
    c->decode = (al_variant_decode){
        .storage = AL_KV_ROWS, .kv_elems = IF(kv_elems, c_kv_elems),
        .kv_rows = IF(kv_rows, c_kv_rows), .kv_key_elems = IF(kv_key_elems, c_key_elems),
        .prefill = IF(prefill, c_prefill), .scratch_floats = IF(decode_scratch_floats, c_dscratch),
        .decode = IF(decode, c_decode),
        .batch_scratch_floats = IF(decode_batch_scratch_floats, c_bscratch),
        .decode_batch = IF(decode_batch, c_decode_batch)};
    c->share = (al_variant_share){IF(share_params, c_share_params),
                                  IF(share_act_floats, c_share_act),
                                  IF(share_forward, c_share_forward),
                                  IF(share_backward, c_share_backward),
                                  IF(share_decode, c_share_decode)};
    c->pictures = (al_variant_pictures){IF(probs, c_probs), !!o->share_probs, 0};
    c->v = (al_variant){.api_version = AL_VARIANT_API_VERSION, .name = o->name,
                        .description = o->description, .settings = o->settings,
                        .data = &c->old, .init = c_init, .fini = free, .train = &c->train,
                        .decode = &c->decode, .pictures = o->probs ? &c->pictures : NULL};
    /* version 4 said: all six sharing members, or the variant cannot share */
    if (al_variant_can_share(o)) c->v.share = &c->share;
}

int al_variant_compat_wrap(const al_variant *old, const char *origin, al_variant_compat **out,
                           al_err *e)
{
    *out = NULL;
    int version = old->api_version;
    size_t size = al_variant_ops_size(version);   /* 0 outside 2 .. 4 */
    char name[81];
    /* Members are only ever appended, so every version (1 on) starts with
     * api_version and name; a table that claims no version has no layout
     * at all, and nothing past api_version is read. */
    if (size == 0 && version < 1)
        return al_errf(e, "%s: a variant table claims interface version %d, this attnlab "
                       "has version %d (and accepts %d to %d)", origin, version,
                       AL_VARIANT_API_VERSION, AL_VARIANT_API_MIN, AL_VARIANT_API_VERSION);
    if (size == 0)
        return al_errf(e, "%s: variant '%s' was built for interface version %d, "
                       "this attnlab has version %d (and accepts %d to %d)", origin,
                       old->name ? al_variant_printable(name, sizeof name, old->name) : "?",
                       version, AL_VARIANT_API_VERSION, AL_VARIANT_API_MIN,
                       AL_VARIANT_API_VERSION);
    al_variant_compat *c = calloc(1, sizeof *c);
    AL_ASSERT(c != NULL);
    memcpy(&c->old, old, size);   /* an older table's later members read as NULL */
    wrap_members(c);
    *out = c;
    return 0;
}

const al_variant *al_variant_compat_table(const al_variant_compat *c) { return &c->v; }

void al_variant_compat_free(al_variant_compat *c) { free(c); }

const char *al_variant_printable(char *out, size_t n, const char *s)
{
    size_t i = 0;
    for (; s && s[i] && i + 1 < n; i++)
        out[i] = (unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e ? '?' : s[i];
    out[i] = 0;
    return out;
}
