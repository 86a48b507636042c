/*
 * checkpoint_config.c - the model config a checkpoint carries
 * ("attnlab.config", JSON written from the key tables by config_write.c)
 * decoded back and checked as a config file would be: every key by its
 * row, the attention or the per-layer list, then validation.
 */
#include "config_keys.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_registry.h"
#include "al_safetensors.h"

/* The size a variant setting may declare, as a config file may (the
 * model's own keys carry theirs in their rows, config_keys.c). */
#define MAX_DIM AL_CFG_SETTING_MAX

static int cfg_err(al_err *e, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int cfg_err(al_err *e, const char *path, const char *fmt, ...)
{
    char msg[600], clean[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return al_errf(e, "%s: attnlab.config: %s", path, al_st_printable(clean, sizeof clean, msg));
}

static int unknown_variant(al_err *e, const char *path, const char *name, const char *origin)
{
    char known[512] = "", clean[128], corig[600];
    for (int i = 0; i < al_variant_count(); i++) {
        size_t l = strlen(known);
        snprintf(known + l, sizeof known - l, "%s%s", i ? ", " : "", al_variant_at(i)->name);
    }
    al_st_printable(clean, sizeof clean, name);
    if (origin && strcmp(origin, "built-in") != 0)
        return al_errf(e, "%s: attention variant '%s' is not registered; it came from a "
                       "plugin: pass --plugin %s", path, clean,
                       al_st_printable(corig, sizeof corig, origin));
    return al_errf(e, "%s: attention variant '%s' is not registered (known: %s); it may come "
                   "from a plugin: pass --plugin PATH", path, clean, known);
}

static int get_setting(const char *path, const al_setting *s, json_t *v, double *out, al_err *e)
{
    if (s->kind == AL_SET_INT) {
        if (!json_is_integer(v) || llabs(json_integer_value(v)) > MAX_DIM)
            return cfg_err(e, path, "'attention.%s' must be an integer in [-%d, %d]", s->name,
                           MAX_DIM, MAX_DIM);
        *out = (double)json_integer_value(v);
    } else {
        if (!json_is_number(v) || !isfinite(json_number_value(v)))
            return cfg_err(e, path, "'attention.%s' must be a finite number", s->name);
        *out = json_number_value(v);
    }
    return 0;
}

/* "attention", or (item non-NULL) a "layer_attention" item, whose own
 * rope_fraction goes to *item. */
static int decode_attention(const char *path, json_t *a, const char *origin,
                            al_model_config *c, al_attn_config *item, al_err *e)
{
    json_t *vn = json_object_get(a, "variant");
    if (!json_is_object(a) || !json_is_string(vn))
        return cfg_err(e, path, "'attention' must be an object with a 'variant' name");
    const al_variant *ops = al_variant_find(json_string_value(vn));
    if (!ops) return unknown_variant(e, path, json_string_value(vn), origin);
    int given[AL_MAX_SETTINGS] = {0};
    const char *k;
    json_t *v;
    json_object_foreach(a, k, v) {
        if (strcmp(k, "variant") == 0 || (item && strcmp(k, "rope_fraction") == 0)) continue;
        int j = al_variant_setting_index(ops, k);
        if (j < 0) return cfg_err(e, path, "unknown setting '%.60s' for variant '%s'", k, ops->name);
        if (get_setting(path, &ops->settings[j], v, &c->attn_set[j], e)) return -1;
        given[j] = 1;
    }
    for (int j = 0; j < al_variant_n_settings(ops); j++) {
        if (given[j]) continue;
        if (ops->settings[j].required)
            return cfg_err(e, path, "'attention.%s' is required for variant '%s'",
                           ops->settings[j].name, ops->name);
        c->attn_set[j] = ops->settings[j].def;
    }
    c->attn = ops;
    snprintf(c->variant, sizeof c->variant, "%s", ops->name);
    json_t *rf = item ? json_object_get(a, "rope_fraction") : NULL;
    if (!rf) return 0;
    item->rope_fraction = json_is_number(rf) ? json_number_value(rf) : NAN;
    item->has_rope_fraction = 1;
    if (!(item->rope_fraction >= 0 && item->rope_fraction <= 1))
        return cfg_err(e, path, "a layer_attention item's 'rope_fraction' must be a number in [0, 1]");
    return 0;
}

/* "layer_attention": [attention, ...], each item as "attention" is; the
 * first mirrored into the model's one-attention fields (al_config.h). */
static int decode_layer_attention(const char *path, json_t *a, const char *origin,
                                  al_model_config *c, al_err *e)
{
    int n = json_is_array(a) ? (int)json_array_size(a) : 0;
    if (n < 1 || n > AL_MAX_LAYER_ATTN)
        return cfg_err(e, path, "'layer_attention' must be a list of 1 to %d attentions",
                       AL_MAX_LAYER_ATTN);
    al_model_config tmp = *c;
    for (int k = 0; k < n; k++) {
        memset(tmp.attn_set, 0, sizeof tmp.attn_set);   /* no setting of the item before */
        al_attn_config *x = &c->layer_attn[k];
        memset(x, 0, sizeof *x);
        if (decode_attention(path, json_array_get(a, k), origin, &tmp, x, e)) return -1;
        snprintf(x->variant, sizeof x->variant, "%s", tmp.variant);
        x->attn = tmp.attn;
        memcpy(x->set, tmp.attn_set, sizeof x->set);
    }
    snprintf(c->variant, sizeof c->variant, "%s", c->layer_attn[0].variant);
    c->attn = c->layer_attn[0].attn;
    memcpy(c->attn_set, c->layer_attn[0].set, sizeof c->attn_set);
    c->n_layer_attn = n;
    return 0;
}

/* Every key must be one the writer writes (the model table's). */
static int known_keys(const char *path, json_t *o, al_err *e)
{
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        if (!al_config_model_json_has(k)) return cfg_err(e, path, "unknown key '%.60s'", k);
    }
    return 0;
}

/* "\"f32\", \"bf16\" or \"int4\"": the values a string key allows. */
static void one_of_text(char *out, size_t n, const char *const *vals)
{
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; vals[i] && len < n; i++)
        len += (size_t)snprintf(out + len, n - len, "%s\"%s\"",
                                i == 0 ? "" : vals[i + 1] ? ", " : " or ", vals[i]);
}

/* One scalar of the model mapping, by its row: type, the range a
 * checkpoint may declare, and the allowed values. */
static int decode_scalar(const char *path, const key_spec *k, json_t *v, void *c, al_err *e)
{
    char *field = (char *)c + k->offset, vals[160];
    if (k->type == K_INT) {
        long lo, hi;
        al_cfg_int_range(k, 1, &lo, &hi);   /* the row's one range; a checkpoint holds derived values */
        if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
            return cfg_err(e, path, "'%s' must be an integer in [%ld, %ld]", k->key, lo, hi);
        int x = (int)json_integer_value(v);
        memcpy(field, &x, sizeof x);
    } else if (k->type == K_DOUBLE) {
        /* the row's rule and max, as a config file's: (0, max], or [0, max] where
         * the rule allows 0 (rope_fraction) */
        double x = json_is_number(v) ? json_number_value(v) : NAN;
        int zero_ok = k->rule == R_UNIT || k->rule == R_NONNEG;
        if (!al_cfg_in_range(k, x))
            return cfg_err(e, path, "'%s' must be a number in %c0, %g]", k->key,
                           zero_ok ? '[' : '(', k->max);
        memcpy(field, &x, sizeof x);
    } else if (k->type == K_BOOL) {
        if (!json_is_boolean(v)) return cfg_err(e, path, "'%s' must be true or false", k->key);
        int x = json_is_true(v);
        memcpy(field, &x, sizeof x);
    } else {
        char why[256];
        AL_ASSERT(k->type == K_STRING && k->sub);
        if (!json_is_string(v) ||
            al_cfg_put_scalar(k, json_string_value(v), 1, c, why, sizeof why)) {
            one_of_text(vals, sizeof vals, k->sub);
            return cfg_err(e, path, "'%s' must be %s", k->key, vals);
        }
    }
    return 0;
}

/* The model mapping's scalars, from the key table: each present one
 * checked by its row; an absent one is an error, unless the row says
 * checkpoints may lack it (older than the key, or written only when not
 * the default), when the config's defaults (the same rows') stand. d_ff
 * goes to *d_ff: the built model's, set after validation. */
static int decode_table(const char *path, json_t *o, const key_spec *t, void *base, al_err *e);

/* A nested mapping (rope_scaling): an object of its table's keys only. */
static int decode_nested(const char *path, const key_spec *k, json_t *v, void *base, al_err *e)
{
    const char *key;
    json_t *x;
    if (!json_is_object(v)) return cfg_err(e, path, "'%s' must be an object", k->key);
    json_object_foreach(v, key, x) {
        if (!al_cfg_key(k->sub, key))
            return cfg_err(e, path, "unknown key '%s.%.60s'", k->key, key);
    }
    return decode_table(path, v, k->sub, (char *)base + k->offset, e);
}

static int decode_table(const char *path, json_t *o, const key_spec *t, void *base, al_err *e)
{
    for (const key_spec *k = t; k->key; k++) {
        if (k->type > K_STRING && k->type != K_MAP) continue;   /* attention, layer_attention: below */
        json_t *v = json_object_get(o, k->key);
        if (!v && k->ckpt != CK_ALWAYS) continue;
        if (!v) return cfg_err(e, path, "'%s' is missing", k->key);
        if (k->type == K_MAP ? decode_nested(path, k, v, base, e)
                             : decode_scalar(path, k, v, base, e))
            return -1;
    }
    return 0;
}

static int decode_fields(const char *path, json_t *o, al_model_config *c, int *d_ff, al_err *e)
{
    if (known_keys(path, o, e) || decode_table(path, o, al_cfg_model_keys, c, e)) return -1;
    *d_ff = c->d_ff;   /* validated as a config file's would be: before matching */
    c->d_ff = 0;
    return 0;
}

/* Rebuild the model config from the "attnlab.config" text and check it as
 * a config file would be checked. */
int al_ckpt_config_from_json(const char *path, const char *text, const char *origin,
                             al_model_config *out, al_err *e)
{
    json_error_t je;
    json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!o || !json_is_object(o)) {
        json_decref(o);
        return cfg_err(e, path, "not a JSON object (%s)", o ? "wrong type" : je.text);
    }
    al_config full;
    al_config_defaults(&full);
    snprintf(full.file, sizeof full.file, "%s", path);
    al_model_config *c = &full.model;
    int d_ff = 0, rc = decode_fields(path, o, c, &d_ff, e);
    json_t *list = json_object_get(o, "layer_attention");
    if (rc == 0 && list && json_object_get(o, "attention"))
        rc = cfg_err(e, path, "both 'attention' and 'layer_attention' are given");
    else if (rc == 0 && list)
        rc = decode_layer_attention(path, list, origin, c, e);
    else if (rc == 0)   /* one attention for every layer (every checkpoint before the list) */
        rc = decode_attention(path, json_object_get(o, "attention"), origin, c, NULL, e);
    json_decref(o);
    if (rc == 0) rc = al_config_validate(&full, NULL, e);
    c->d_ff = d_ff;   /* free: a parameter-matched model widens its MLP */
    if (rc == 0) *out = *c;
    return rc;
}

