/*
 * config_write.c - a resolved config written out from the key tables
 * (config_keys.h): as YAML (every key, defaults included, reading back to
 * the same config), as JSON (the same, and the model as built, a
 * checkpoint's "attnlab.config"), and as the `keys` schema.
 */
#include "config_keys.h"

#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "al_kvcache.h"
#include "al_registry.h"

/* ------------------------------------------------------------ YAML */

/* Plain when it reads back as the same string in any YAML reader. */
static int plain_safe(const char *s)
{
    static const char *const words[] = {"true", "false", "yes", "no", "on", "off",
                                        "null", "y", "n", NULL};
    if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '/'))
        return 0;
    if (s[strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./+-")])
        return 0;
    for (int i = 0; words[i]; i++)
        if (strcasecmp(s, words[i]) == 0) return 0;
    return 1;
}

static void write_string(FILE *f, const char *s)
{
    if (plain_safe(s)) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\x%02x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void write_scalar(FILE *f, const key_spec *k, const void *base)
{
    const char *p = (const char *)base + k->offset;
    char buf[64];
    switch (k->type) {
    case K_INT: fprintf(f, "%d", *(const int *)p); break;
    case K_U64:
    case K_BYTES: fprintf(f, "%" PRIu64, *(const uint64_t *)p); break;
    case K_BOOL: fputs(*(const int *)p ? "true" : "false", f); break;
    case K_STRING: write_string(f, p); break;
    case K_DOUBLE:
        al_cfg_fmt_double(buf, sizeof buf, *(const double *)p);
        fputs(buf, f);
        break;
    }
}

/* The mapping {variant, settings...} with its keys at indent. */
static void write_variant(FILE *f, const char *variant, const al_variant *ops,
                          const double *set, int indent)
{
    char buf[64];
    fprintf(f, "%*svariant: ", indent, "");
    write_string(f, variant);
    fputc('\n', f);
    for (int j = 0; ops && j < al_variant_n_settings(ops); j++) {
        const al_setting *s = &ops->settings[j];
        if (s->kind == AL_SET_INT) snprintf(buf, sizeof buf, "%lld", (long long)set[j]);
        else al_cfg_fmt_double(buf, sizeof buf, set[j]);
        fprintf(f, "%*s%s: %s\n", indent, "", s->name, buf);
    }
}

/* model.attention, or (with a list) nothing: model.layer_attention has it. */
static void write_attention(FILE *f, const al_model_config *m, int indent)
{
    if (m->n_layer_attn > 0) return;
    fprintf(f, "%*sattention:\n", indent, "");
    write_variant(f, m->variant, m->attn, m->attn_set, indent + 2);
}

static void write_layer_attention(FILE *f, const al_model_config *m, int indent)
{
    if (m->n_layer_attn == 0) return;
    fprintf(f, "%*slayer_attention:\n", indent, "");
    for (int k = 0; k < m->n_layer_attn; k++) {
        const al_attn_config *a = &m->layer_attn[k];
        /* one item a line, in flow style: a resume's line-by-line
         * comparison then names the item that changed */
        fprintf(f, "%*s- {variant: ", indent + 2, "");
        write_string(f, a->variant);
        for (int j = 0; a->attn && j < al_variant_n_settings(a->attn); j++) {
            char buf[64];
            if (a->attn->settings[j].kind == AL_SET_INT)
                snprintf(buf, sizeof buf, "%lld", (long long)a->set[j]);
            else al_cfg_fmt_double(buf, sizeof buf, a->set[j]);
            fprintf(f, ", %s: %s", a->attn->settings[j].name, buf);
        }
        if (a->has_rope_fraction) {
            char buf[64];
            al_cfg_fmt_double(buf, sizeof buf, a->rope_fraction);
            fprintf(f, ", rope_fraction: %s", buf);
        }
        fputs("}\n", f);
    }
}

static void write_match(FILE *f, const al_match_config *mt, int indent)
{
    if (mt->by == AL_MATCH_NONE) {
        fprintf(f, "%*smatch_params: off\n", indent, "");
        return;
    }
    fprintf(f, "%*smatch_params:\n%*sto:\n", indent, "", indent + 2, "");
    write_variant(f, mt->variant, mt->attn, mt->attn_set, indent + 4);
    fprintf(f, "%*sby: %s\n", indent + 2, "", mt->by == AL_MATCH_N_LAYER ? "n_layer" : "d_ff");
    fprintf(f, "%*s# what the match gave (checked when this file is read back):\n", indent + 2, "");
    fprintf(f, "%*sn_layer: %d\n%*sd_ff: %d\n", indent + 2, "", mt->n_layer, indent + 2, "",
            mt->d_ff);
    if (mt->params)
        fprintf(f, "%*sparams: %zu\n%*sparams_to: %zu\n", indent + 2, "", mt->params,
                indent + 2, "", mt->params_to);
}

static void write_table(FILE *f, const key_spec *t, const void *base, int indent);

/* The model mapping as given: under a match, n_layer and d_ff are the
 * values before matching (the matched ones go under match_params), so that
 * the file reads back to the same model. */
/* A model config built in code may leave keys at 0 that mean their
 * default (key_spec.unset_zero): those read as their rows' defaults. The
 * int-cache pair is one such setting whose 0 is keyed on the group alone
 * (a residual of 0 is a real value), as the model reads it (tensors.c,
 * below the tables, with al_kvcache.h's constants). */
static void fill_unset(al_model_config *c)
{
    char why[256];
    for (const key_spec *k = al_cfg_model_keys; k->key; k++)
        if (k->unset_zero && *(const int *)((const char *)c + k->offset) == 0 &&
            al_cfg_put_scalar(k, k->def, 0, c, why, sizeof why))
            al_assert_fail(why, __FILE__, __LINE__);   /* a bad default in a table */
    if (!c->kv_quant_group)
        c->kv_quant_group = AL_KV_QUANT_GROUP, c->kv_quant_residual = AL_KV_QUANT_RESIDUAL;
    if (!c->rope_scaling.kind[0]) {   /* "" (built in code): no scaling, as al_config_layer_rope reads it */
        al_cfg_set_str(c->rope_scaling.kind, sizeof c->rope_scaling.kind, "none");
        if (c->rope_scaling.factor == 0) c->rope_scaling.factor = 1.0;
    }
}

static int quiet_default(const key_spec *t, const void *base);

/* A quiet mapping (model.rope_scaling) whose every key holds its default:
 * not written, so configs without it read, write and hash as before. */
static int quiet_map_default(const key_spec *t, const void *base)
{
    if (t->type != K_MAP || !t->quiet) return 0;
    for (const key_spec *k = t->sub; k->key; k++)
        if (!quiet_default(k, (const char *)base + t->offset)) return 0;
    return 1;
}

/* 1 when k's field at base holds its row's default. */
static int at_default(const key_spec *k, const void *base)
{
    if (k->type == K_MAP) return quiet_map_default(k, base);
    char tmp[sizeof(al_model_config)], why[256];
    AL_ASSERT(k->offset + k->size <= sizeof tmp && k->type <= K_STRING);
    memset(tmp, 0, sizeof tmp);
    if (al_cfg_put_scalar(k, k->def, 0, tmp, why, sizeof why))
        al_assert_fail(why, __FILE__, __LINE__);
    return memcmp(tmp + k->offset, (const char *)base + k->offset, k->size) == 0;
}

static al_model_config as_given(const al_model_config *m)
{
    al_model_config given = *m;
    fill_unset(&given);
    if (m->match.by != AL_MATCH_NONE) {
        given.n_layer = m->match.base_n_layer;
        given.d_ff = m->match.base_d_ff;
    }
    return given;
}

static void write_model(FILE *f, const key_spec *t, const al_model_config *m, int indent)
{
    al_model_config given = as_given(m);
    write_table(f, t, &given, indent);
}

/* A byte limit left at 0 (none) is not written: runs and trials from
 * before the key existed keep their resolved config, and their ids. */
static int unset_bytes(const key_spec *t, const void *base)
{
    uint64_t v;
    if (t->type != K_BYTES) return 0;
    memcpy(&v, (const char *)base + t->offset, sizeof v);
    return v == 0;
}

/* A quiet key (key_spec.quiet) holding its default ("" in a string that a
 * config built in code left empty reads as the default too). */
static int quiet_default(const key_spec *t, const void *base)
{
    const char *p = (const char *)base + t->offset;
    if (!t->quiet || !t->def) return 0;
    switch (t->type) {
    case K_INT:
    case K_BOOL: return *(const int *)p == (int)strtol(t->def, NULL, 10);
    case K_DOUBLE: return *(const double *)p == strtod(t->def, NULL);
    case K_STRING: return !p[0] || strcmp(p, t->def) == 0;
    default: return 0;
    }
}

static void write_table(FILE *f, const key_spec *t, const void *base, int indent)
{
    for (; t->key; t++) {
        if (t->type == K_IGNORE || unset_bytes(t, base) || quiet_default(t, base) ||
            (t->derived && t->derived(base)) || quiet_map_default(t, base))
            continue;
        if (t->type == K_MATCH) {
            write_match(f, &((const al_model_config *)base)->match, indent);
        } else if (t->type == K_ATTN) {
            write_attention(f, base, indent);
        } else if (t->type == K_LATTN) {
            write_layer_attention(f, base, indent);
        } else if (t->type == K_PLUGINS) {
            const al_config *c = base;
            if (c->n_plugins) fprintf(f, "%*s%s:\n", indent, "", t->key);
            for (int i = 0; i < c->n_plugins; i++) {
                fprintf(f, "%*s- ", indent + 2, "");
                write_string(f, c->plugins[i]);
                fputc('\n', f);
            }
        } else if (t->type == K_MAP) {
            fprintf(f, "%*s%s:\n", indent, "", t->key);
            if (t->sub == al_cfg_model_keys)
                write_model(f, t->sub, (const void *)((const char *)base + t->offset), indent + 2);
            else
                write_table(f, t->sub, (const char *)base + t->offset, indent + 2);
        } else {
            fprintf(f, "%*s%s: ", indent, "", t->key);
            write_scalar(f, t, base);
            fputc('\n', f);
        }
    }
}

/* c, or (a config built in code may leave train.init_convert empty: that
 * is none) a copy in tmp that says none. */
static const al_config *with_init_convert(const al_config *c, al_config *tmp)
{
    if (c->train.init_convert[0]) return c;
    *tmp = *c;
    al_cfg_set_str(tmp->train.init_convert, sizeof tmp->train.init_convert, "none");
    return tmp;
}

void al_config_write_yaml(const al_config *c, FILE *f)
{
    al_config *tmp = al_malloc(sizeof *tmp);
    write_table(f, al_cfg_top_keys, with_init_convert(c, tmp), 0);
    free(tmp);
}

void al_config_write_yaml_identity(const al_config *c, FILE *f)
{
    enum { MAX_TOP = 16 };
    key_spec top[MAX_TOP];
    int n = 0;
    for (const key_spec *t = al_cfg_top_keys; t->key; t++) {
        AL_ASSERT(n + 1 < MAX_TOP);
        if (t->sub != al_cfg_report_keys) top[n++] = *t;
    }
    top[n] = (key_spec){0};
    al_config *tmp = al_malloc(sizeof *tmp);
    write_table(f, top, with_init_convert(c, tmp), 0);
    free(tmp);
}

/* ------------------------------------------------------------ JSON */

/* A string in valid UTF-8 (jansson refuses anything else): a path that is
 * not keeps its ASCII, with '?' for every other byte. */
static json_t *string_json(const char *s)
{
    json_t *x = json_string(s);
    if (x) return x;
    char *t = al_malloc(strlen(s) + 1);
    for (size_t i = 0; (t[i] = s[i]) != 0; i++)
        if ((unsigned char)s[i] >= 0x80) t[i] = '?';
    x = json_string(t);
    free(t);
    AL_ASSERT(x != NULL);
    return x;
}

/* NaN and infinities are no JSON numbers (a decoded config has none). */
static json_t *real_json(double v)
{
    json_t *x = json_real(v);
    return x ? x : json_null();
}

/* jansson's integers are signed 64-bit: a larger seed goes as its digits. */
static json_t *u64_json(uint64_t v)
{
    char digits[24];
    if (v <= (uint64_t)LLONG_MAX) return json_integer((json_int_t)v);
    snprintf(digits, sizeof digits, "%" PRIu64, v);
    return json_string(digits);
}

static json_t *scalar_json(const key_spec *k, const void *base)
{
    const char *p = (const char *)base + k->offset;
    switch (k->type) {
    case K_INT: return json_integer(*(const int *)p);
    case K_U64:
    case K_BYTES: return u64_json(*(const uint64_t *)p);
    case K_BOOL: return json_boolean(*(const int *)p);
    case K_STRING: return string_json(p);
    case K_DOUBLE: return real_json(*(const double *)p);
    }
    AL_ASSERT(!"not a scalar key type");
    return NULL;
}

/* {"variant": name, settings by name}: integer settings as integers. */
static json_t *variant_json(const char *variant, const al_variant *ops, const double *set)
{
    json_t *a = json_object();
    json_object_set_new(a, "variant", string_json(ops ? ops->name : variant));
    for (int j = 0; ops && j < al_variant_n_settings(ops); j++) {
        const al_setting *s = &ops->settings[j];
        json_object_set_new(a, s->name, s->kind == AL_SET_INT
                                            ? json_integer((json_int_t)llround(set[j]))
                                            : real_json(set[j]));
    }
    return a;
}

/* A layer_attention item: its variant, and its own rope_fraction if any. */
static json_t *item_json(const al_attn_config *a)
{
    json_t *o = variant_json(a->variant, a->attn, a->set);
    if (a->has_rope_fraction) json_object_set_new(o, "rope_fraction", real_json(a->rope_fraction));
    return o;
}

/* As write_match: false when off, else what the match gave. */
static json_t *match_json(const al_match_config *mt)
{
    if (mt->by == AL_MATCH_NONE) return json_false();
    json_t *o = json_object();
    json_object_set_new(o, "to", variant_json(mt->variant, mt->attn, mt->attn_set));
    json_object_set_new(o, "by", json_string(mt->by == AL_MATCH_N_LAYER ? "n_layer" : "d_ff"));
    json_object_set_new(o, "n_layer", json_integer(mt->n_layer));
    json_object_set_new(o, "d_ff", json_integer(mt->d_ff));
    if (mt->params) {
        json_object_set_new(o, "params", json_integer((json_int_t)mt->params));
        json_object_set_new(o, "params_to", json_integer((json_int_t)mt->params_to));
    }
    return o;
}

static json_t *plugins_json(const al_config *c)
{
    json_t *a = json_array();
    for (int i = 0; i < c->n_plugins; i++) json_array_append_new(a, string_json(c->plugins[i]));
    return a;
}

/* Rows a JSON object holds: not the informational ones, and, for the
 * model as built (a checkpoint's), not match_params: that model already
 * has the matched shape. */
static int in_json(const key_spec *k, int built)
{
    return k->type != K_IGNORE && !(built && k->type == K_MATCH);
}

static json_t *table_json(const key_spec *t, const void *base, int built)
{
    json_t *o = json_object();
    for (; t->key; t++) {
        const char *field = (const char *)base + t->offset;
        json_t *v;
        if (!in_json(t, built)) continue;
        /* a checkpoint without the feature reads as every one before the key did */
        if (built && t->ckpt == CK_NON_DEFAULT && at_default(t, base)) continue;
        if (t->type == K_ATTN || t->type == K_LATTN) {   /* the one the model has */
            const al_model_config *m = base;
            if ((m->n_layer_attn > 0) != (t->type == K_LATTN)) continue;
        }
        if (t->type == K_LATTN) {
            const al_model_config *m = base;
            v = json_array();
            for (int k = 0; k < m->n_layer_attn; k++)
                json_array_append_new(v, item_json(&m->layer_attn[k]));
        } else if (t->type == K_MATCH) {
            v = match_json(&((const al_model_config *)base)->match);
        } else if (t->type == K_ATTN) {
            const al_model_config *m = base;
            v = variant_json(m->variant, m->attn, m->attn_set);
        } else if (t->type == K_PLUGINS) {
            v = plugins_json(base);
        } else if (t->type == K_MAP && t->sub == al_cfg_model_keys && !built) {
            al_model_config given = as_given((const al_model_config *)field);
            v = table_json(t->sub, &given, built);
        } else if (t->type == K_MAP) {
            v = table_json(t->sub, field, built);
        } else {
            v = scalar_json(t, base);
        }
        json_object_set_new(o, t->key, v);
    }
    return o;
}

static char *dump(json_t *o)
{
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    AL_ASSERT(text != NULL);
    return text;
}

char *al_config_json(const al_config *c)
{
    al_config *tmp = al_malloc(sizeof *tmp);
    char *text = dump(table_json(al_cfg_top_keys, with_init_convert(c, tmp), 0));
    free(tmp);
    return text;
}

char *al_config_model_json(const al_model_config *m)
{
    al_model_config built = *m;
    built.d_ff = al_config_d_ff(m);   /* a config built by hand may leave it 0 */
    fill_unset(&built);
    return dump(table_json(al_cfg_model_keys, &built, 1));
}

int al_config_model_json_has(const char *key)
{
    for (const key_spec *t = al_cfg_model_keys; t->key; t++)
        if (in_json(t, 1) && strcmp(t->key, key) == 0) return 1;
    return 0;
}

/* ------------------------------------------------------------ schema */

static void print_attention_rows(FILE *f, const char *path)
{
    char def[64];
    fprintf(f, "| `%s.variant` | mha | attention variant, one of `attnlab variants` |\n", path);
    for (int i = 0; i < al_variant_count(); i++) {
        const al_variant *ops = al_variant_at(i);
        for (int j = 0; j < al_variant_n_settings(ops); j++) {
            const al_setting *s = &ops->settings[j];
            if (s->required) snprintf(def, sizeof def, "required");
            else al_cfg_fmt_double(def, sizeof def, s->def);
            fprintf(f, "| `%s.%s` | %s | %s: %s |\n", path, s->name, def, ops->name,
                    s->help ? s->help : "");
        }
    }
}

static void print_table(FILE *f, const key_spec *t, const char *path)
{
    for (; t->key; t++) {
        char p[256];
        al_cfg_join(p, sizeof p, path, t->key);
        if (t->type == K_MAP) print_table(f, t->sub, p);
        else if (t->type == K_ATTN && t->sub == NULL && strcmp(t->key, "attention") == 0)
            print_attention_rows(f, p);
        else if (t->type == K_MATCH) {
            fprintf(f, "| `%s` | %s | %s |\n", p, t->def, t->help);
            print_table(f, al_cfg_match_keys, p);
        }
        else fprintf(f, "| `%s` | %s | %s |\n", p,
                     !t->def ? "-" : t->def[0] ? t->def : "\"\"", t->help);
    }
}

/* Every key as a markdown table row: "| `model.n_head` | 4 | query heads |". */
void al_config_print_schema(FILE *f)
{
    print_table(f, al_cfg_top_keys, "");
}
