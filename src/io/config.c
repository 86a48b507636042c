/*
 * config.c - a config tree decoded into al_config through the key tables
 * (config_keys.c), defaults filled from the same rows, and the resolved
 * config validated (al_config_io.h).
 *
 * Decoding follows libcyaml/nginx: one static table per mapping, one row
 * per key; unknown keys (with a did-you-mean), wrong node types and values
 * that do not convert are errors at the node. Errors read like a
 * compiler's: "file:line:col: error: ...".
 */
#include "config_keys.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "al_plugin.h"
#include "al_registry.h"

/* ------------------------------------------------------------ messages */

static int why_err(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int why_err(char *why, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return -1;
}

/* The candidate closest to word: edit distance <= 2 (and less than its
 * length), or one a prefix of the other (3 characters at least). */
static const char *suggest(const char *word, const char *const *cand, int n)
{
    const char *best = NULL;
    int best_score = 99, wl = (int)strlen(word);
    for (int i = 0; i < n; i++) {
        int d = al_edit_distance(word, cand[i]), cl = (int)strlen(cand[i]), score = 99;
        if (d <= 2 && d < wl) score = 2 * d;
        else if ((wl >= 3 && strncmp(cand[i], word, (size_t)wl) == 0) ||
                 (cl >= 3 && strncmp(word, cand[i], (size_t)cl) == 0))
            score = 5;
        if (score < best_score) best = cand[i], best_score = score;
    }
    return best;
}

/* " (did you mean 'x'?)" or "". */
static void did_you_mean(char *out, size_t n, const char *word, const char *const *cand, int nc)
{
    const char *s = suggest(word, cand, nc);
    if (s) snprintf(out, n, " (did you mean '%s'?)", s);
    else out[0] = 0;
}

/* ------------------------------------------------------------ scalars */

static void describe(char *out, size_t n, const char *s, int quoted)
{
    if (quoted) snprintf(out, n, "\"%.80s\" (quoted, so a string)", s);
    else snprintf(out, n, "'%.80s'", s);
}

/* -1: not a number, -2: a number a double cannot hold (1e400 overflows,
 * 1e-400 underflows: strtod would give Inf or 0, a silent default). */
static int parse_double(const char *s, double *v)
{
    char *end;
    if (!s[0] || s[0] == ' ' || s[0] == '\t') return -1;
    errno = 0;
    *v = strtod(s, &end);
    if (*end) return -1;
    if (errno == ERANGE) return -2;
    return isfinite(*v) ? 0 : -1;
}

/* -1: not a whole number, -2: out of int range. */
static int parse_int(const char *s, int *v)
{
    double d;
    int rc = parse_double(s, &d);
    if (rc == -2) return -2;
    if (rc || d != floor(d)) return -1;
    if (d < INT_MIN || d > INT_MAX) return -2;
    *v = (int)d;
    return 0;
}

static int parse_u64(const char *s, uint64_t *v)
{
    char *end;
    if (s[0] < '0' || s[0] > '9') return -1;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (*end || errno == ERANGE) return -1;
    *v = (uint64_t)x;
    return 0;
}

/* Digits with an optional k, M, G or T (powers of 1024): train.max_memory. */
static int parse_bytes(const char *s, uint64_t *v)
{
    static const char units[] = "kMGT";
    char *end;
    if (s[0] < '0' || s[0] > '9') return -1;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno == ERANGE) return -1;
    const char *u = *end ? strchr(units, *end) : NULL;
    if (*end && (!u || end[1])) return -1;
    for (int k = u ? (int)(u - units) + 1 : 0; k > 0; k--) {
        if (x > UINT64_MAX / 1024) return -1;
        x *= 1024;
    }
    *v = (uint64_t)x;
    return 0;
}

static int parse_bool(const char *s, int *v)
{
    static const char *const yes[] = {"true", "yes", "on", NULL};
    static const char *const no[] = {"false", "no", "off", NULL};
    for (int i = 0; yes[i]; i++) {
        if (strcasecmp(s, yes[i]) == 0 || strcasecmp(s, no[i]) == 0) {
            *v = strcasecmp(s, yes[i]) == 0;
            return 0;
        }
    }
    return -1;
}

static int put_string(const key_spec *k, const char *s, char *field, char *why, size_t n)
{
    const char *const *allowed = k->sub;
    if (allowed) {
        int i, nc = 0;
        char list[256] = "", dym[128];
        for (i = 0; allowed[i] && strcmp(allowed[i], s) != 0; i++) {
            size_t l = strlen(list);
            snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", allowed[i]);
        }
        if (!allowed[i]) {
            while (allowed[nc]) nc++;
            did_you_mean(dym, sizeof dym, s, allowed, nc);
            return why_err(why, n, "must be one of %s, got '%.80s'%s", list, s, dym);
        }
    }
    if (strlen(s) >= k->size)
        return why_err(why, n, "is too long (%zu bytes, at most %zu)", strlen(s), k->size - 1);
    al_cfg_set_str(field, k->size, s);
    return 0;
}

/* Convert the text of a scalar into the field of k at base; on failure,
 * what was wanted goes into why ("must be an integer, got 'four'"). */
static int put_scalar(const key_spec *k, const char *s, int quoted, void *base,
                      char *why, size_t n)
{
    char *field = (char *)base + k->offset, got[160];
    int iv, rc;
    uint64_t uv;
    double dv;
    describe(got, sizeof got, s, quoted);
    switch (k->type) {
    case K_INT:
        AL_ASSERT(k->size == sizeof(int));
        if (quoted || (rc = parse_int(s, &iv)) == -1)
            return why_err(why, n, "must be an integer, got %s", got);
        if (rc) return why_err(why, n, "must be an integer, got %s (out of range)", got);
        memcpy(field, &iv, sizeof iv);
        return 0;
    case K_U64:
        AL_ASSERT(k->size == sizeof(uint64_t));
        if (quoted || parse_u64(s, &uv))
            return why_err(why, n, "must be an integer in [0, 2^64), got %s", got);
        memcpy(field, &uv, sizeof uv);
        return 0;
    case K_BYTES:
        AL_ASSERT(k->size == sizeof(uint64_t));
        if (quoted || parse_bytes(s, &uv))
            return why_err(why, n, "must be a byte count (digits, with k, M, G or T for "
                           "powers of 1024, at most 2^64 - 1), got %s", got);
        memcpy(field, &uv, sizeof uv);
        return 0;
    case K_DOUBLE:
        AL_ASSERT(k->size == sizeof(double));
        if (quoted || (rc = parse_double(s, &dv)) == -1)
            return why_err(why, n, "must be a number, got %s", got);
        if (rc) return why_err(why, n, "must be a number a double can hold, got %s (%s)", got,
                               fabs(dv) > 1 ? "overflows" : "underflows");
        memcpy(field, &dv, sizeof dv);
        return 0;
    case K_BOOL:
        AL_ASSERT(k->size == sizeof(int));
        if (quoted || parse_bool(s, &iv))
            return why_err(why, n, "must be true or false, got %s", got);
        memcpy(field, &iv, sizeof iv);
        return 0;
    case K_STRING:
        return put_string(k, s, field, why, n);
    }
    AL_ASSERT(!"not a scalar key type");
    return -1;
}

int al_cfg_put_scalar(const key_spec *k, const char *s, int quoted, void *base, char *why,
                      size_t n)
{
    return put_scalar(k, s, quoted, base, why, n);
}

static const char *wanted(int type)
{
    switch (type) {
    case K_INT: return "an integer";
    case K_U64: return "a non-negative integer";
    case K_BYTES: return "a byte count";
    case K_DOUBLE: return "a number";
    case K_BOOL: return "true or false";
    case K_STRING: return "a string";
    default: return "a mapping";
    }
}

/* ------------------------------------------------------------ decoding */

static int decode_map(const al_node *m, const key_spec *t, void *base,
                      const char *path, al_err *e);
static int decode_attention(const al_node *m, al_model_config *mc, al_attn_config *item,
                            const char *path, al_err *e);
static int decode_match(const al_node *v, al_model_config *mc, const char *path, al_err *e);
static int decode_layer_attention(const al_node *v, al_model_config *mc, const char *path,
                                  al_err *e);

/* Where key i of m is: a key names the same file as its value. */
static int key_err(al_err *e, const al_node *m, int i, const char *msg)
{
    return al_errf(e, "%s:%d:%d: error: %s", m->items[i]->file, m->key_line[i],
                   m->key_col[i], msg);
}

static int unknown_key(al_err *e, const al_node *m, int i, const key_spec *t,
                       const char *path)
{
    const char *names[32];
    int n = 0;
    char dym[128], msg[512];
    for (; t->key && n < 32; t++) names[n++] = t->key;
    did_you_mean(dym, sizeof dym, m->keys[i], names, n);
    if (path[0]) snprintf(msg, sizeof msg, "unknown key '%.80s' in '%s'%s", m->keys[i], path, dym);
    else snprintf(msg, sizeof msg, "unknown key '%.80s'%s", m->keys[i], dym);
    return key_err(e, m, i, msg);
}

static int decode_plugins(const al_node *v, al_config *c, const char *path, al_err *e)
{
    if (v->kind != AL_NODE_SEQ)
        return al_node_errf(e, v, "'%s' must be a sequence of paths, got %s", path,
                        al_node_kind_name(v->kind));
    if (v->n > AL_MAX_PLUGINS)
        return al_node_errf(e, v, "'%s' lists %d files, at most %d", path, v->n, AL_MAX_PLUGINS);
    for (int i = 0; i < v->n; i++) {
        const al_node *x = v->items[i];
        if (x->kind != AL_NODE_SCALAR || !x->value[0])
            return al_node_errf(e, x, "'%s' must list paths, got %s", path,
                                x->kind == AL_NODE_SCALAR ? "an empty one"
                                                          : al_node_kind_name(x->kind));
        if (strlen(x->value) >= AL_PATH_LEN)
            return al_node_errf(e, x, "'%s': path too long (at most %d bytes)", path,
                                AL_PATH_LEN - 1);
        al_cfg_set_str(c->plugins[i], AL_PATH_LEN, x->value);
    }
    c->n_plugins = v->n;
    return 0;
}

/* A path-typed key (data.path, train.init_from): one rule for all of them,
 * the file's folder (al_path_from), so an experiment runs from any working
 * directory; a path given by --set is the command line's, so the working
 * directory's. */
static int decode_path(const key_spec *k, const al_node *v, void *base, const char *path,
                       al_err *e)
{
    char abs[AL_PATH_LEN + 1], why[512];
    if (al_path_from(abs, sizeof abs, v->file, v->value) != 0)
        return al_node_errf(e, v, "'%s' is too long as a path from %s (at most %d bytes)", path,
                            strcmp(v->file, "--set") ? "the file's folder" : "the working directory",
                            AL_PATH_LEN - 1);
    if (put_scalar(k, abs, v->quoted, base, why, sizeof why))
        return al_node_errf(e, v, "'%s' %s (as '%s')", path, why, abs);
    return 0;
}

static int decode_value(const key_spec *k, const al_node *v, void *base,
                        const char *path, al_err *e)
{
    char why[512];
    if (k->type >= K_MAP && al_node_is_null(v)) return 0;   /* "train:" alone */
    switch (k->type) {
    case K_IGNORE:
        return 0;
    case K_PLUGINS:
        return decode_plugins(v, base, path, e);
    case K_ATTN:
        return decode_attention(v, base, NULL, path, e);
    case K_LATTN:
        return decode_layer_attention(v, base, path, e);
    case K_MATCH:
        return decode_match(v, base, path, e);
    case K_MAP:
        if (v->kind != AL_NODE_MAP)
            return al_node_errf(e, v, "'%s' must be a mapping, got %s", path,
                                al_node_kind_name(v->kind));
        return decode_map(v, k->sub, (char *)base + k->offset, path, e);
    }
    if (v->kind != AL_NODE_SCALAR)
        return al_node_errf(e, v, "'%s' must be %s, got %s", path, wanted(k->type),
                        al_node_kind_name(v->kind));
    if (k->path && v->value[0]) return decode_path(k, v, base, path, e);
    if (put_scalar(k, v->value, v->quoted, base, why, sizeof why))
        return al_node_errf(e, v, "'%s' %s", path, why);
    return 0;
}

/* Decode mapping m against table t into the struct at base. */
static int decode_map(const al_node *m, const key_spec *t, void *base,
                      const char *path, al_err *e)
{
    for (int i = 0; i < m->n; i++) {
        const key_spec *k = t;
        while (k->key && strcmp(k->key, m->keys[i]) != 0) k++;
        if (!k->key) return unknown_key(e, m, i, t, path);
        char sub[256];
        al_cfg_join(sub, sizeof sub, path, k->key);
        if (decode_value(k, m->items[i], base, sub, e)) return -1;
    }
    return 0;
}

/* ---- model.attention: {variant: NAME, ...the variant's settings} */

static int unknown_variant(al_err *e, const al_node *at, const char *name, const char *path)
{
    const char *names[128];
    char known[512] = "", dym[128];
    int n = 0;
    for (int i = 0; i < al_variant_count() && n < 128; i++) {
        names[n++] = al_variant_at(i)->name;
        size_t l = strlen(known);
        snprintf(known + l, sizeof known - l, "%s%s", i ? ", " : "", names[i]);
    }
    did_you_mean(dym, sizeof dym, name, names, n);
    /* a variant that is not built in may live in a plugin nobody loaded; the
     * hint goes inside the parenthesis of the did-you-mean */
    const char *hint = "; a plugin's variant needs --plugin PATH or 'plugins: [PATH]'";
    if (dym[0])
        return al_node_errf(e, at, "unknown variant '%.80s' in '%s'%.*s%s)", name, path,
                        (int)strlen(dym) - 1, dym, hint);
    return al_node_errf(e, at, "unknown variant '%.80s' in '%s' (known: %s%s)", name, path,
                    known, hint);
}

static int unknown_setting(al_err *e, const al_node *m, int i, const al_variant *ops,
                           const char *path)
{
    const char *names[AL_MAX_SETTINGS + 1] = {"variant"};
    int n = 1 + al_variant_n_settings(ops);
    char dym[128], msg[512];
    for (int j = 1; j < n; j++) names[j] = ops->settings[j - 1].name;
    did_you_mean(dym, sizeof dym, m->keys[i], names, n);
    if (!dym[0] && n == 1) snprintf(dym, sizeof dym, " (it has no settings)");
    if (strchr(path, '['))   /* an item of a list: the key with its index */
        snprintf(msg, sizeof msg, "unknown key '%.80s.%.80s' for variant '%s'%s", path,
                 m->keys[i], ops->name, dym);
    else
        snprintf(msg, sizeof msg, "unknown key '%.80s' for variant '%s'%s", m->keys[i],
                 ops->name, dym);
    return key_err(e, m, i, msg);
}

/* The variant named in m (default "mha"), checked against the registry. */
static const al_variant *attention_variant(const al_node *m, const char *path, al_err *e)
{
    const al_node *v = al_node_get(m, "variant");
    char sub[256];
    al_cfg_join(sub, sizeof sub, path, "variant");
    if (v && v->kind != AL_NODE_SCALAR) {
        al_node_errf(e, v, "'%s' must be a variant name, got %s", sub, al_node_kind_name(v->kind));
        return NULL;
    }
    const char *name = v ? v->value : "mha";
    const al_variant *ops = al_variant_find(name);
    if (!ops) {
        unknown_variant(e, v ? v : m, name, sub);
        return NULL;
    }
    AL_ASSERT(strlen(ops->name) < AL_NAME_LEN);
    AL_ASSERT(al_variant_n_settings(ops) <= AL_MAX_SETTINGS);
    return ops;
}

static int decode_setting(const al_setting *s, const al_node *v, double *out,
                          const char *path, al_err *e)
{
    key_spec k = {.key = s->name, .type = s->kind == AL_SET_INT ? K_INT : K_DOUBLE,
                  .size = s->kind == AL_SET_INT ? sizeof(int) : sizeof(double)};
    union { int i; double d; } u;
    char why[512];
    if (v->kind != AL_NODE_SCALAR)
        return al_node_errf(e, v, "'%s' must be %s, got %s", path, wanted(k.type),
                            al_node_kind_name(v->kind));
    if (put_scalar(&k, v->value, v->quoted, &u, why, sizeof why))
        return al_node_errf(e, v, "'%s' %s", path, why);
    if (k.type == K_INT && (u.i > AL_CFG_SETTING_MAX || u.i < -AL_CFG_SETTING_MAX))
        return al_node_errf(e, v, "'%s' (%d) must be in [-%d, %d]", path, u.i,
                            AL_CFG_SETTING_MAX, AL_CFG_SETTING_MAX);
    *out = k.type == K_INT ? (double)u.i : u.d;
    return 0;
}

/* A layer_attention item's own rope_fraction, a number in [0, 1]. */
static int decode_item_rope(const al_node *v, al_attn_config *item, const char *path, al_err *e)
{
    static const al_setting rf = {"rope_fraction", AL_SET_FLOAT, 1.0, 0, NULL};
    if (decode_setting(&rf, v, &item->rope_fraction, path, e)) return -1;
    if (!al_cfg_rule_ok(R_UNIT, item->rope_fraction))
        return al_node_errf(e, v, "'%s' (%s) %s", path, v->value, al_cfg_rule_text(R_UNIT));
    item->has_rope_fraction = 1;
    return 0;
}

/* model.attention (item NULL), or a model.layer_attention item, which may
 * also give its own rope_fraction (into *item). */
static int decode_attention(const al_node *m, al_model_config *mc, al_attn_config *item,
                            const char *path, al_err *e)
{
    if (m->kind != AL_NODE_MAP)
        return al_node_errf(e, m, "'%s' must be a mapping such as {variant: gqa, n_kv_head: 2}, "
                        "got %s", path, al_node_kind_name(m->kind));
    const al_variant *ops = attention_variant(m, path, e);
    if (!ops) return -1;
    int ns = al_variant_n_settings(ops), given[AL_MAX_SETTINGS] = {0};
    double set[AL_MAX_SETTINGS] = {0};
    for (int i = 0; i < m->n; i++) {
        if (strcmp(m->keys[i], "variant") == 0) continue;
        char sub[256];
        al_cfg_join(sub, sizeof sub, path, m->keys[i]);
        if (item && strcmp(m->keys[i], "rope_fraction") == 0) {
            if (decode_item_rope(m->items[i], item, sub, e)) return -1;
            continue;
        }
        int j = al_variant_setting_index(ops, m->keys[i]);
        if (j < 0) return unknown_setting(e, m, i, ops, path);
        if (decode_setting(&ops->settings[j], m->items[i], &set[j], sub, e)) return -1;
        given[j] = 1;
    }
    for (int j = 0; j < ns; j++) {
        if (given[j]) continue;
        if (ops->settings[j].required)
            return al_node_errf(e, m, "'%s.%s' is required for variant '%s'", path,
                            ops->settings[j].name, ops->name);
        set[j] = ops->settings[j].def;
    }
    mc->attn = ops;
    al_cfg_set_str(mc->variant, sizeof mc->variant, ops->name);
    memcpy(mc->attn_set, set, sizeof set);
    return 0;
}

/* ---- model.layer_attention: [{variant: NAME, ...}, ...], cyclic over layers */

static int decode_layer_attention(const al_node *v, al_model_config *mc, const char *path,
                                  al_err *e)
{
    if (v->kind != AL_NODE_SEQ)
        return al_node_errf(e, v, "'%s' must be a list of attention mappings such as "
                            "[{variant: gqa, n_kv_head: 2}, {variant: mha}], got %s", path,
                            al_node_kind_name(v->kind));
    if (v->n == 0)
        return al_node_errf(e, v, "'%s' is empty: list at least one attention (or use "
                            "model.attention)", path);
    if (v->n > AL_MAX_LAYER_ATTN)
        return al_node_errf(e, v, "'%s' lists %d attentions, at most %d", path, v->n,
                            AL_MAX_LAYER_ATTN);
    al_model_config tmp;
    for (int i = 0; i < v->n; i++) {
        char sub[256];
        snprintf(sub, sizeof sub, "%.200s[%d]", path, i);
        memset(&tmp, 0, sizeof tmp);
        al_attn_config *a = &mc->layer_attn[i];
        memset(a, 0, sizeof *a);
        if (decode_attention(v->items[i], &tmp, a, sub, e)) return -1;
        memcpy(a->variant, tmp.variant, sizeof a->variant);
        a->attn = tmp.attn;
        memcpy(a->set, tmp.attn_set, sizeof a->set);
    }
    /* model.attention's fields mirror the first item */
    memcpy(mc->variant, mc->layer_attn[0].variant, sizeof mc->variant);
    mc->attn = mc->layer_attn[0].attn;
    memcpy(mc->attn_set, mc->layer_attn[0].set, sizeof mc->attn_set);
    for (int i = v->n; i < AL_MAX_LAYER_ATTN; i++)   /* configs compare with memcmp */
        memset(&mc->layer_attn[i], 0, sizeof mc->layer_attn[i]);
    mc->n_layer_attn = v->n;
    return 0;
}

/* ---- model.match_params: {to: {variant: ...}, by: d_ff | n_layer}, or off */

static int decode_match_key(const al_node *m, int i, al_match_config *mt, const al_node **to,
                            const char *path, al_err *e)
{
    const key_spec *k = al_cfg_match_keys;
    while (k->key && strcmp(k->key, m->keys[i]) != 0) k++;
    if (!k->key) return unknown_key(e, m, i, al_cfg_match_keys, path);
    const al_node *x = m->items[i];
    char sub[256], why[512], by[16];
    uint64_t dummy[2];
    al_cfg_join(sub, sizeof sub, path, k->key);
    if (k->type == K_ATTN) {
        *to = x;
        return 0;
    }
    if (x->kind != AL_NODE_SCALAR)
        return al_node_errf(e, x, "'%s' must be %s, got %s", sub, wanted(k->type),
                            al_node_kind_name(x->kind));
    /* the written-back values are only type-checked here; resolve_match
     * compares them with what the match gives */
    void *field = k->type == K_STRING ? (void *)by : (void *)dummy;
    if (put_scalar(k, x->value, x->quoted, field, why, sizeof why))
        return al_node_errf(e, x, "'%s' %s", sub, why);
    if (k->type == K_STRING)
        mt->by = strcmp(by, "n_layer") == 0 ? AL_MATCH_N_LAYER : AL_MATCH_D_FF;
    return 0;
}

static int decode_match(const al_node *v, al_model_config *mc, const char *path, al_err *e)
{
    al_match_config *mt = &mc->match;
    int on;
    memset(mt, 0, sizeof *mt);
    if (v->kind == AL_NODE_SCALAR && !v->quoted && parse_bool(v->value, &on) == 0 && !on)
        return 0;   /* off */
    if (v->kind != AL_NODE_MAP)
        return al_node_errf(e, v, "'%s' must be a mapping such as {to: {variant: mha}, "
                            "by: d_ff}, or off; got %s", path, al_node_kind_name(v->kind));
    const al_node *to = NULL;
    mt->by = AL_MATCH_D_FF;
    for (int i = 0; i < v->n; i++)
        if (decode_match_key(v, i, mt, &to, path, e)) return -1;
    char sub[256];
    al_cfg_join(sub, sizeof sub, path, "to");
    if (!to)
        return al_node_errf(e, v, "'%s' is required: the attention to match, e.g. "
                            "{variant: mha}", sub);
    al_model_config tmp;
    memset(&tmp, 0, sizeof tmp);
    if (decode_attention(to, &tmp, NULL, sub, e)) return -1;
    mt->attn = tmp.attn;
    al_cfg_set_str(mt->variant, sizeof mt->variant, tmp.variant);
    memcpy(mt->attn_set, tmp.attn_set, sizeof mt->attn_set);
    return 0;
}

/* ---- defaults and derived values */

static void table_defaults(const key_spec *t, void *base)
{
    char why[512];
    for (; t->key; t++) {
        if (t->type == K_MAP) table_defaults(t->sub, (char *)base + t->offset);
        else if (t->type <= K_STRING && put_scalar(t, t->def, 0, base, why, sizeof why))
            al_assert_fail(why, __FILE__, __LINE__);   /* a bad default in a table */
    }
}

void al_config_defaults(al_config *c)
{
    memset(c, 0, sizeof *c);
    table_defaults(al_cfg_top_keys, c);
    c->model.attn = al_variant_find("mha");
    AL_ASSERT(c->model.attn != NULL);
    al_cfg_set_str(c->model.variant, sizeof c->model.variant, "mha");
}

static int resolve(al_config *c, const al_node *root, al_err *e);
static int check_rules(const al_config *c, const al_node *root, al_err *e);

/* The path at key was written relative (docs/first-run.md). */
static int given_relative(const al_node *root, const char *key)
{
    int exact;
    const al_node *x = al_cfg_find_path(root, key, &exact);
    return exact && x->kind == AL_NODE_SCALAR && x->value[0] && x->value[0] != '/';
}

int al_config_decode(const al_node *root, al_config *c, al_err *e)
{
    al_config_defaults(c);
    if (!root) return al_errf(e, "config: error: no configuration to decode");
    snprintf(c->file, sizeof c->file, "%s", root->file);
    if (root->kind != AL_NODE_MAP)
        return al_node_errf(e, root, "the top level must be a mapping, got %s",
                            al_node_kind_name(root->kind));
    /* each number within its row before anything is derived from it */
    if (decode_map(root, al_cfg_top_keys, c, "", e) || check_rules(c, root, e) ||
        resolve(c, root, e) ||
        al_config_validate(c, root, e) || al_cfg_resolve_model(c, root, e))
        return -1;
    c->rel_paths = (given_relative(root, "data.path") ? AL_REL_DATA : 0) |
                   (given_relative(root, "train.init_from") ? AL_REL_INIT : 0);
    /* the kernel every layer trains with (validated: a known name) */
    int kernel = al_config_attn_kernel(c->train.attention_kernel, c->model.seq_len);
    c->model.attn_kernel = kernel < 0 ? 0 : kernel;
    return 0;
}

/* ------------------------------------------------------------ validation */


/* Every number against its row's rule (key_spec.rule), table by table. */
static int check_table_rules(const al_config *c, const al_node *root, const key_spec *t,
                             const void *base, const char *path, al_err *e)
{
    for (; t->key; t++) {
        const char *p = (const char *)base + t->offset;
        char sub[256], num[64];
        al_cfg_join(sub, sizeof sub, path, t->key);
        if (t->type == K_MAP) {
            if (check_table_rules(c, root, t->sub, p, sub, e)) return -1;
            continue;
        }
        if (t->rule == R_ANY || (t->type != K_INT && t->type != K_DOUBLE)) continue;
        double v = t->type == K_INT ? *(const int *)p : *(const double *)p;
        if (t->type == K_INT) snprintf(num, sizeof num, "%d", *(const int *)p);
        else al_cfg_fmt_double(num, sizeof num, v);
        if (!al_cfg_rule_ok(t->rule, v))
            return al_cfg_verr(e, c, root, sub, "'%s' (%s) %s", sub, num,
                               al_cfg_rule_text(t->rule));
        if (t->max > 0 && v > t->max)   /* what every checkpoint reader accepts */
            return al_cfg_verr(e, c, root, sub, "'%s' (%s) must be at most %.15g", sub, num,
                               t->max);
    }
    return 0;
}

/* The model first, as the rules were always checked. */
static int check_rules(const al_config *c, const al_node *root, al_err *e)
{
    static const char *const order[] = {"model", "train", "data", "report", NULL};
    for (int i = 0; order[i]; i++) {
        const key_spec *k = al_cfg_key(al_cfg_top_keys, order[i]);
        if (check_table_rules(c, root, k->sub, (const char *)c + k->offset, order[i], e))
            return -1;
    }
    return 0;
}

static int check_one_of(const al_config *c, const al_node *root, const char *path,
                        const char *v, const char *const *allowed, al_err *e)
{
    for (int i = 0; allowed[i]; i++)
        if (strcmp(v, allowed[i]) == 0) return 0;
    return al_cfg_verr(e, c, root, path, "'%s' ('%s') is not a known value", path, v);
}

/* Item k's settings as its variant's init judges them, pointed at the setting its message names (the
 * item's path in a model.layer_attention list). */
static int check_variant_item(const al_config *c, const al_node *root, int k, al_err *e)
{
    al_attn_config a = al_config_attn_item(&c->model, k);
    const al_variant *ops = a.attn;
    char msg[512] = "", base[64] = "model.attention", path[256];
    if (c->model.n_layer_attn > 0)
        snprintf(base, sizeof base, "model.layer_attention[%d]", k);
    snprintf(path, sizeof path, "%s", base);
    if (!ops) return al_cfg_verr(e, c, root, path, "'%s.variant' is not resolved", base);
    al_attn_shape s;
    al_config_layer_shape(&c->model, k, &s);
    if (al_variant_check(ops, &s, msg, sizeof msg) == 0) return 0;
    msg[sizeof msg - 1] = 0;   /* a plugin's message, perhaps unterminated */
    for (int j = 0; j < al_variant_n_settings(ops); j++) {
        size_t n = strlen(ops->settings[j].name);
        if (msg[0] == '\'' && strncmp(msg + 1, ops->settings[j].name, n) == 0 &&
            msg[n + 1] == '\'')
            al_cfg_join(path, sizeof path, base, ops->settings[j].name);
    }
    if (c->model.n_layer_attn > 0)
        return al_cfg_verr(e, c, root, path, "%s: %s", base,
                           msg[0] ? msg : "rejected by the variant's check");
    return al_cfg_verr(e, c, root, path, "%s", msg[0] ? msg : "rejected by the variant's check");
}

/* Every attention of the stack: a list no longer than the stack, each
 * item's variant check. */
static int check_variant(const al_config *c, const al_node *root, al_err *e)
{
    const al_model_config *m = &c->model;
    if (m->n_layer_attn > m->n_layer)
        return al_cfg_verr(e, c, root, "model.layer_attention", "'model.layer_attention' "
                           "lists %d attentions, more than 'model.n_layer' (%d): items past "
                           "the last layer would never be used", m->n_layer_attn, m->n_layer);
    for (int k = 0; k < al_config_n_attn(m); k++)
        if (check_variant_item(c, root, k, e)) return -1;
    char msg[256];
    if (al_config_check_share(m, msg, sizeof msg))   /* a group the stack cannot share */
        return al_cfg_verr(e, c, root, "model.kv_share", "%s", msg);
    return 0;
}

int al_config_validate(const al_config *c, const al_node *root, al_err *e)
{
    const al_model_config *m = &c->model;
    if (check_rules(c, root, e)) return -1;
    if (m->d_head == 0 && m->d_model % m->n_head != 0)
        return al_cfg_verr(e, c, root, "model.n_head", "'model.d_model' (%d) is not divisible "
                           "by 'model.n_head' (%d); set 'model.d_head'", m->d_model, m->n_head);
    int dh = m->d_head ? m->d_head : m->d_model / m->n_head, given = 0;
    if (root) al_cfg_find_path(root, "model.d_head", &given);
    if (dh % 2 != 0)   /* at d_model when d_head was derived from it */
        return al_cfg_verr(e, c, root, given || !root ? "model.d_head" : "model.d_model",
                           "'model.d_head' (%d) must be even for RoPE", dh);
    /* under train.flops the steps are derived later (al_train_resolve) */
    if (c->train.flops == 0 && c->train.warmup_steps > c->train.steps)
        return al_cfg_verr(e, c, root, "train.warmup_steps", "'train.warmup_steps' (%d) must "
                           "be at most 'train.steps' (%d)", c->train.warmup_steps,
                           c->train.steps);
    if (c->data.val_fraction + c->data.test_fraction >= 1.0)
        return al_cfg_verr(e, c, root, "data.test_fraction", "'data.val_fraction' + "
                           "'data.test_fraction' (%g + %g) must leave some text to train on",
                           c->data.val_fraction, c->data.test_fraction);
    if (check_one_of(c, root, "data.source", c->data.source, al_cfg_data_sources, e) ||
        check_one_of(c, root, "model.kv_dtype", m->kv_dtype, al_cfg_kv_dtypes, e) ||
        (c->train.init_convert[0] &&   /* "" (a config built in code) is none */
         check_one_of(c, root, "train.init_convert", c->train.init_convert,
                      al_cfg_init_converts, e)) ||
        (c->train.precision[0] &&   /* "" (a config built in code) is f32 */
         check_one_of(c, root, "train.precision", c->train.precision, al_cfg_precisions, e)) ||
        (c->train.attention_kernel[0] &&   /* "" (a config built in code) is auto */
         check_one_of(c, root, "train.attention_kernel", c->train.attention_kernel,
                       al_cfg_attn_kernels, e)))
        return -1;
    const al_rope_scaling *sc = &m->rope_scaling;
    if (al_rope_kind_of(sc->kind) > AL_ROPE_NONE && sc->factor == 1.0)   /* a scaling that does nothing */
        return al_cfg_verr(e, c, root, "model.rope_scaling.factor", "'model.rope_scaling.factor' "
                           "must be given (and not 1) with kind %s", sc->kind);
    return check_variant(c, root, e);
}

/* d_head = d_model / n_head when 0; data.seed = train.seed when 0; the
 * default warmup is at most steps (a given one must be). The vocabulary is
 * left to the trainer (it comes from the data source). */
static int resolve(al_config *c, const al_node *root, al_err *e)
{
    al_model_config *m = &c->model;
    if (m->d_head == 0 && m->n_head > 0 && m->d_model > 0) {
        if (m->d_model % m->n_head != 0)
            return al_cfg_verr(e, c, root, "model.n_head", "'model.d_model' (%d) is not "
                               "divisible by 'model.n_head' (%d); set 'model.d_head'",
                               m->d_model, m->n_head);
        m->d_head = m->d_model / m->n_head;
    }
    if (c->data.seed == 0) c->data.seed = c->train.seed;
    int given, given_list;
    al_cfg_find_path(root, "model.attention", &given);
    al_cfg_find_path(root, "model.layer_attention", &given_list);
    if (given && given_list)
        return al_cfg_verr(e, c, root, "model.layer_attention", "'model.attention' and "
                           "'model.layer_attention' are both given: use one (model.attention "
                           "for every layer, or the per-layer list)");
    /* The built-in corpus is the default data set; a file given alone
     * (data.path without data.source) means that file, as text. */
    al_cfg_find_path(root, "data.source", &given);
    if (!given)
        al_cfg_set_str(c->data.source, sizeof c->data.source, c->data.path[0] ? "text" : "kjv");
    int given_steps;
    al_cfg_find_path(root, "train.flops", &given);
    al_cfg_find_path(root, "train.steps", &given_steps);
    if (given && given_steps && c->train.flops > 0)
        return al_cfg_verr(e, c, root, "train.flops", "'train.flops' and 'train.steps' are both "
                           "given: use one (train.flops derives the steps from the model's "
                           "train_flops_per_token)");
    al_cfg_find_path(root, "train.warmup_steps", &given);
    if (!given && c->train.warmup_steps > c->train.steps && c->train.steps > 0)
        c->train.warmup_steps = c->train.steps;
    return 0;
}

/* ------------------------------------------------------------ loading */

/* YAML, the --set assignments in order, the plugins the tree lists (when
 * asked: a variant must be registered before it is decoded), decoding. */
static int load(const char *path, const char *const *sets, int n_sets, int plugins,
                al_config *c, al_err *e)
{
    al_node *root;
    if (al_yaml_load(path, &root, e)) return -1;
    int rc = 0;
    for (int i = 0; i < n_sets && rc == 0; i++) rc = al_node_apply_set(root, sets[i], e);
    if (rc == 0 && plugins) rc = al_plugin_load_listed(root, e);
    if (rc == 0) rc = al_config_decode(root, c, e);
    if (rc == 0) snprintf(c->file, sizeof c->file, "%s", path);
    al_node_free(root);
    return rc;
}

int al_config_load(const char *path, const char *const *sets, int n_sets,
                   al_config *c, al_err *e)
{
    return load(path, sets, n_sets, 0, c, e);
}

int al_plugin_config_load(const char *path, const char *const *sets, int n_sets,
                          al_config *c, al_err *e)
{
    return load(path, sets, n_sets, 1, c, e);
}
