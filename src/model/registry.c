/*
 * registry.c - the attention variants known to this run.
 *
 * Built-ins come from one static NULL-terminated table, in the order they
 * are listed by `attnlab variants`; plugins are appended by the loader.
 * Every table, built-in or not, is registered the same way: checked, then
 * copied into an entry whose sub-tables have their optional members'
 * defaults settled here, once (as SQLite wraps each VFS method once), so
 * the core calls a member without asking whether it is there. A table of
 * an older interface version is wrapped into version 5 first
 * (variant_compat.c).
 */
#include "al_registry.h"
#include "al_variant_compat.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern const al_variant al_variant_mha;
extern const al_variant al_variant_mqa;
extern const al_variant al_variant_gqa;
extern const al_variant al_variant_mla;
extern const al_variant al_variant_gta;
extern const al_variant al_variant_gla;
extern const al_variant al_variant_tpa;
extern const al_variant al_variant_local;
extern const al_variant al_variant_linear;
extern const al_variant al_variant_deltanet;

static const al_variant *const builtins[] = {
    &al_variant_mha,
    &al_variant_mqa,
    &al_variant_gqa,
    &al_variant_mla,
    &al_variant_gta,
    &al_variant_gla,
    &al_variant_tpa,
    &al_variant_local,
    &al_variant_linear,
    &al_variant_deltanet,
    NULL,
};

/* A registered table: the variant's own members, its defaults filled in. */
typedef struct entry {
    al_variant v;              /* sub-tables point into this entry */
    al_variant_train train;
    al_variant_decode decode;
    al_variant_share share;
    al_variant_pictures pictures;
    al_variant_costs costs;
    const char *origin;
    al_variant_compat *compat; /* an adapted older table's wrapper (owned), or NULL */
} entry;

#define MAX_VARIANTS 64
static entry table[MAX_VARIANTS + 16];
static int n_table, n_builtin = -1;

/* ------------------------------------------------------------ defaults */

/* init/fini: the context is a copy of the shape. */
static void *shape_init(const al_variant *v, const al_attn_shape *s, char *err, size_t n)
{
    (void)v, (void)err, (void)n;
    al_attn_shape *c = malloc(sizeof *c);
    AL_ASSERT(c != NULL);
    *c = *s;
    return c;
}

/* decode->kv_rows: one row per token; a state has one row at any context. */
static int rows_per_token(const void *ctx, int context) { return (void)ctx, context; }
static int rows_state(const void *ctx, int context) { return (void)ctx, (void)context, 1; }
/* decode->kv_key_elems: the whole row (the core caps the answer at the row). */
static size_t keys_whole(const void *ctx) { return (void)ctx, SIZE_MAX; }
/* decode NULL: no cache. */
static size_t no_elems(const void *ctx) { return (void)ctx, 0; }

static void fill_decode(entry *n, const al_variant_decode *d)
{
    if (d) n->decode = *d;
    else n->decode = (al_variant_decode){.storage = AL_KV_ROWS, .kv_elems = no_elems};
    if (n->decode.storage == AL_KV_STATE) {   /* one row, every element its own */
        n->decode.kv_rows = rows_state;
        n->decode.kv_key_elems = keys_whole;
    }
    if (!n->decode.kv_rows) n->decode.kv_rows = rows_per_token;
    if (!n->decode.kv_key_elems) n->decode.kv_key_elems = keys_whole;
    if (!n->decode.decode_batch) n->decode.batch_scratch_floats = NULL;
}

/* The entry of v, every optional member settled. */
static void fill(entry *n, const al_variant *v, const char *origin)
{
    memset(n, 0, sizeof *n);
    n->v = *v;
    n->origin = origin;
    if (!v->init) {
        n->v.init = shape_init;
        n->v.fini = free;
    }
    n->train = *v->train;
    n->v.train = &n->train;
    fill_decode(n, v->decode);
    n->v.decode = &n->decode;
    if (v->share) n->share = *v->share;
    n->v.share = v->share ? &n->share : NULL;
    if (v->pictures) n->pictures = *v->pictures;
    n->v.pictures = v->pictures && v->pictures->probs ? &n->pictures : NULL;
    /* costs: FLOP members stay NULL where the variant gives none (the
     * core counts them, al_cost.h); rows read default to the rows held */
    if (v->costs) n->costs = *v->costs;
    if (!n->costs.decode_rows_read) n->costs.decode_rows_read = n->decode.kv_rows;
    n->v.costs = &n->costs;
}

/* ------------------------------------------------------------ lookup */

static int register_builtins(void)
{
    if (n_builtin >= 0) return n_builtin;
    al_err e;
    n_builtin = 0;
    for (int i = 0; builtins[i]; i++) {
        /* a built-in that the checks refuse is a programming error */
        int rc = al_variant_register(builtins[i], "built-in", &e);
        AL_ASSERT(rc == 0);
    }
    n_builtin = n_table;
    return n_builtin;
}

int al_variant_count(void)
{
    register_builtins();
    return n_table;
}

const al_variant *al_variant_at(int i)
{
    if (i < 0 || i >= al_variant_count()) return NULL;
    return &table[i].v;
}

const char *al_variant_origin(int i)
{
    return i >= 0 && i < al_variant_count() ? table[i].origin : NULL;
}

const al_variant *al_variant_find(const char *name)
{
    for (int i = 0; i < al_variant_count(); i++)
        if (strcmp(table[i].v.name, name) == 0) return &table[i].v;
    return NULL;
}

/* Names become YAML keys and values, trial ids and file names: 1 to
 * AL_NAME_LEN - 1 letters, digits, '_' or '-'. */
int al_variant_plain_name(const char *n)
{
    size_t len = n ? strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                "0123456789_-") : 0;
    return len > 0 && !n[len] && len < 64;
}

/* ------------------------------------------------------------ checks */

/* Members a table must have, and groups that go together (init and fini;
 * decode's three; batched decode's two; sharing's five: all or none): the
 * error names exactly the members missing, "train.forward, decode.kv_elems",
 * so an author need not guess. */
static int missing_members(const al_variant *o, const char *origin, al_err *e)
{
    const al_variant_train *t = o->train;
    const al_variant_decode *d = o->decode;
    const al_variant_share *s = o->share;
    const struct { const char *name; int set, group; } m[] = {
        {"train", !!t, 0},
        {"train.params", t && t->params, 0}, {"train.act_floats", t && t->act_floats, 0},
        {"train.scratch_floats", t && t->scratch_floats, 0},
        {"train.forward", t && t->forward, 0}, {"train.backward", t && t->backward, 0},
        {"decode.kv_elems", !d || d->kv_elems, 0},
        {"init", !!o->init, 1}, {"fini", !!o->fini, 1},
        {"decode.prefill", d && d->prefill, 2},
        {"decode.scratch_floats", d && d->scratch_floats, 2},
        {"decode.decode", d && d->decode, 2},
        {"decode.batch_scratch_floats", d && d->batch_scratch_floats, 3},
        {"decode.decode_batch", d && d->decode_batch, 3},
        {"share.params", s && s->params, 4}, {"share.act_floats", s && s->act_floats, 4},
        {"share.forward", s && s->forward, 4}, {"share.backward", s && s->backward, 4},
        {"share.decode", s && s->decode, 4},
    };
    enum { N = sizeof m / sizeof m[0] };
    int any[5] = {1, 0, 0, 0, !!s};   /* group 0 always; a share table whole */
    for (int i = 0; i < N; i++) any[m[i].group] |= m[i].set;
    if (s && !(d && d->decode)) any[2] = 1;   /* a consumer decodes over its producer's cache */
    char list[400] = "";
    size_t len = 0;
    int n = 0;
    for (int i = 0; i < N; i++)
        if (any[m[i].group] && !m[i].set && len < sizeof list)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", n++ ? ", " : "",
                                    m[i].name);
    if (!n) return 0;
    return al_errf(e, "%s: variant '%s': its table is missing %s %s", origin, o->name,
                   n > 1 ? "the members" : "the member", list);
}
/* A plugin's settings table: at most AL_MAX_SETTINGS, each with a plain
 * name (not "variant", no two alike), a known kind and a finite default
 * (whole for an integer setting). */
static int check_settings(const al_variant *ops, const char *origin, al_err *e)
{
    int n = 0;
    while (ops->settings && ops->settings[n].name && n <= AL_MAX_SETTINGS) n++;
    if (n > AL_MAX_SETTINGS)
        return al_errf(e, "%s: variant '%s' declares more than %d settings",
                       origin, ops->name, AL_MAX_SETTINGS);
    for (int i = 0; i < n; i++) {
        const al_setting *s = &ops->settings[i];
        if (!al_variant_plain_name(s->name) || strcmp(s->name, "variant") == 0)
            return al_errf(e, "%s: variant '%s': setting %d must be named by 1 to 63 letters, "
                           "digits, '_' or '-' (and not 'variant')", origin, ops->name, i + 1);
        for (int j = 0; j < i; j++)
            if (strcmp(ops->settings[j].name, s->name) == 0)
                return al_errf(e, "%s: variant '%s' declares setting '%s' twice", origin,
                               ops->name, s->name);
        if (s->kind != AL_SET_INT && s->kind != AL_SET_FLOAT)
            return al_errf(e, "%s: variant '%s': setting '%s' has kind %d, not AL_SET_INT "
                           "or AL_SET_FLOAT", origin, ops->name, s->name, s->kind);
        if (!s->required && (!isfinite(s->def) || (s->kind == AL_SET_INT &&
                             (s->def != floor(s->def) || fabs(s->def) > 1e9))))
            return al_errf(e, "%s: variant '%s': setting '%s' has default %g, not a finite "
                           "%s", origin, ops->name, s->name, s->def,
                           s->kind == AL_SET_INT ? "whole number" : "number");
    }
    return 0;
}

/* ------------------------------------------------------------ registering */

int al_variant_register(const al_variant *ops, const char *origin, al_err *e)
{
    al_variant_compat *compat = NULL;
    char name[81];
    register_builtins();
    if (ops->api_version != AL_VARIANT_API_VERSION) {   /* an older table, or none */
        if (al_variant_compat_wrap(ops, origin, &compat, e)) return -1;
        ops = al_variant_compat_table(compat);
    }
    int rc = -1;
    if (!al_variant_plain_name(ops->name))
        al_errf(e, "%s: variant name '%s' must be 1 to 63 letters, digits, '_' or '-'", origin,
                ops->name ? al_variant_printable(name, sizeof name, ops->name) : "(null)");
    else if (!missing_members(ops, origin, e) && !check_settings(ops, origin, e))
        rc = 0;
    for (int i = 0; rc == 0 && i < n_table; i++)
        if (strcmp(table[i].v.name, ops->name) == 0)
            rc = al_errf(e, "%s: variant '%s' is already registered by %s", origin, ops->name,
                         table[i].origin);
    if (rc == 0 && n_builtin >= 0 && n_table - n_builtin == MAX_VARIANTS)
        rc = al_errf(e, "%s: too many variants (at most %d plugins)", origin, MAX_VARIANTS);
    if (rc != 0) {
        al_variant_compat_free(compat);
        return -1;
    }
    fill(&table[n_table], ops, origin);
    table[n_table++].compat = compat;
    return 0;
}

int al_variant_n_settings(const al_variant *ops)
{
    int n = 0;
    if (ops->settings)
        while (ops->settings[n].name) n++;
    return n;
}

int al_variant_setting_index(const al_variant *ops, const char *key)
{
    for (int i = 0; i < al_variant_n_settings(ops); i++)
        if (strcmp(ops->settings[i].name, key) == 0) return i;
    return -1;
}

/* The plugin loader registers a plugin's tables one by one; when a later
 * one is refused it drops the earlier ones, so a plugin loads whole or not
 * at all. Built-ins are never dropped. */
void al_variant_truncate(int count)
{
    AL_ASSERT(count >= register_builtins() && count <= n_table);
    while (n_table > count) al_variant_compat_free(table[--n_table].compat);
}

/* ------------------------------------------------------------ contexts */

void *al_variant_init(const al_variant *v, const al_attn_shape *s, char *err, size_t n)
{
    if (n) err[0] = 0;
    return v->init(v, s, err, n);
}

int al_variant_check(const al_variant *v, const al_attn_shape *s, char *err, size_t n)
{
    void *ctx = al_variant_init(v, s, err, n);
    if (!ctx) return -1;
    v->fini(ctx);
    return 0;
}
