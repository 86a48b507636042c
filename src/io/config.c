/*
 * config.c - experiment configuration: a YAML tree with positions, --set
 * edits of that tree, and a table-driven decoder into al_config.
 *
 * Every node carries a copy of its file name in the same allocation as the
 * node itself, so a subtree cloned into another tree (--set) keeps naming
 * where it came from after the source tree is freed.
 *
 * Decoding follows libcyaml/nginx: one static table per mapping, one row per
 * key {key, type, offset, size, sub, default, help}. Defaults are kept as
 * YAML text in the same rows and go through the same converters as the file,
 * so the defaults, the decoder, the writer and the printed schema cannot
 * drift apart. Errors read like a compiler's: "file:line:col: error: ...".
 */
#include "al_config.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "al_data.h"
#include "al_model.h"
#include "al_registry.h"

#define MAX_DEPTH 64   /* nesting limit of the YAML tree (stack safety) */

/* ------------------------------------------------------------ YAML tree */

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    AL_ASSERT(q != NULL);
    return q;
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = al_malloc(n);
    memcpy(d, s, n);
    return d;
}

/* A node and a copy of its file name, in one allocation. */
static al_node *node_new(int kind, const char *file, int line, int col)
{
    size_t n = strlen(file) + 1;
    al_node *x = al_calloc(1, sizeof *x + n);
    char *f = (char *)(x + 1);
    memcpy(f, file, n);
    x->kind = kind;
    x->file = f;
    x->line = line;
    x->col = col;
    return x;
}

/* Append an item (sequences: key NULL) to x; takes ownership of child. */
static void node_add(al_node *x, const char *key, int kline, int kcol, al_node *child)
{
    size_t n = (size_t)x->n + 1;
    x->items = xrealloc(x->items, n * sizeof *x->items);
    if (x->kind == AL_NODE_MAP) {
        x->keys = xrealloc(x->keys, n * sizeof *x->keys);
        x->key_line = xrealloc(x->key_line, n * sizeof *x->key_line);
        x->key_col = xrealloc(x->key_col, n * sizeof *x->key_col);
        x->keys[x->n] = xstrdup(key);
        x->key_line[x->n] = kline;
        x->key_col[x->n] = kcol;
    }
    x->items[x->n] = child;
    x->n++;
}

al_node *al_node_new(int kind, const al_node *at)
{
    return node_new(kind, at ? at->file : "", at ? at->line : 0, at ? at->col : 0);
}

void al_node_append(al_node *x, const char *key, al_node *child)
{
    AL_ASSERT((x->kind == AL_NODE_MAP) == (key != NULL) && x->kind != AL_NODE_SCALAR);
    node_add(x, key, child->line, child->col, child);
}

void al_node_free(al_node *x)
{
    if (!x) return;
    for (int i = 0; i < x->n; i++) {
        al_node_free(x->items[i]);
        if (x->keys) free(x->keys[i]);
    }
    free(x->items);
    free(x->keys);
    free(x->key_line);
    free(x->key_col);
    free(x->value);
    free(x);
}

al_node *al_node_clone(const al_node *x)
{
    if (!x) return NULL;
    al_node *y = node_new(x->kind, x->file, x->line, x->col);
    y->quoted = x->quoted;
    if (x->value) y->value = xstrdup(x->value);
    for (int i = 0; i < x->n; i++)
        node_add(y, x->keys ? x->keys[i] : NULL, x->keys ? x->key_line[i] : 0,
                 x->keys ? x->key_col[i] : 0, al_node_clone(x->items[i]));
    return y;
}

static int map_index(const al_node *map, const char *key)
{
    if (!map || map->kind != AL_NODE_MAP) return -1;
    for (int i = 0; i < map->n; i++)
        if (strcmp(map->keys[i], key) == 0) return i;
    return -1;
}

al_node *al_node_get(const al_node *map, const char *key)
{
    int i = map_index(map, key);
    return i < 0 ? NULL : map->items[i];
}

static const char *kind_name(int kind)
{
    return kind == AL_NODE_MAP ? "a mapping" : kind == AL_NODE_SEQ ? "a sequence" : "a scalar";
}

/* ------------------------------------------------------------ libyaml events */

typedef struct yctx {
    yaml_parser_t p;
    const char *name;   /* file name in errors and nodes */
    int col_off;        /* added to columns on line 1 (--set values) */
    yaml_mark_t end;    /* just past the last character of the input */
    al_err *e;
} yctx;

/* libyaml puts the end of a stream without a final newline on the next
 * line; point at the end of the text instead. */
static yaml_mark_t clamp(const yctx *y, yaml_mark_t m)
{
    if (m.line > y->end.line || (m.line == y->end.line && m.column > y->end.column))
        return y->end;
    return m;
}

static int mark_line(const yctx *y, yaml_mark_t m) { return (int)clamp(y, m).line + 1; }

static int mark_col(const yctx *y, yaml_mark_t m)
{
    m = clamp(y, m);
    return (int)m.column + 1 + (m.line == 0 ? y->col_off : 0);
}

/* The end mark of text[0, n): lines and columns in characters, as libyaml
 * counts them (UTF-8 continuation bytes do not count). */
static yaml_mark_t text_end(const char *text, size_t n)
{
    yaml_mark_t m = {0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        int brk = text[i] == '\n' || (text[i] == '\r' && (i + 1 == n || text[i + 1] != '\n'));
        if (brk) m.line++, m.column = 0;
        else if (((unsigned char)text[i] & 0xc0) != 0x80) m.column++;
    }
    return m;
}

static int parse_error(yctx *y)
{
    yaml_parser_t *p = &y->p;
    const char *what = p->problem ? p->problem : "invalid YAML";
    if (p->error == YAML_MEMORY_ERROR)
        return al_errf(y->e, "%s: error: out of memory while parsing YAML", y->name);
    if (p->error == YAML_READER_ERROR)
        return al_errf(y->e, "%s: error: %s (at byte %zu)", y->name, what, p->problem_offset);
    return al_errf(y->e, "%s:%d:%d: error: %s", y->name, mark_line(y, p->problem_mark),
                   mark_col(y, p->problem_mark), what);
}

static int next_event(yctx *y, yaml_event_t *ev)
{
    return yaml_parser_parse(&y->p, ev) ? 0 : parse_error(y);
}

static int parse_node(yctx *y, yaml_event_t *ev, int depth, al_node **out);

/* ev is a SCALAR event: a plain scalar may be a number or bool; quoted,
 * block and explicitly !!str-tagged scalars are strings. */
static al_node *scalar_node(yctx *y, const yaml_event_t *ev)
{
    al_node *x = node_new(AL_NODE_SCALAR, y->name, mark_line(y, ev->start_mark),
                          mark_col(y, ev->start_mark));
    const char *tag = (const char *)ev->data.scalar.tag;
    x->value = xstrdup((const char *)ev->data.scalar.value);
    x->quoted = ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE ||
                (tag && strcmp(tag, YAML_STR_TAG) == 0);
    return x;
}

/* The key of the pair after a mapping's first events; 1 at MAPPING_END. */
static int parse_key(yctx *y, al_node *map, char **key, int *kl, int *kc)
{
    yaml_event_t ev;
    if (next_event(y, &ev)) return -1;
    int rc = 0;
    if (ev.type == YAML_MAPPING_END_EVENT) {
        rc = 1;
    } else if (ev.type != YAML_SCALAR_EVENT) {
        rc = al_errf(y->e, "%s:%d:%d: error: mapping keys must be plain scalars", y->name,
                     mark_line(y, ev.start_mark), mark_col(y, ev.start_mark));
    } else {
        *key = xstrdup((const char *)ev.data.scalar.value);
        *kl = mark_line(y, ev.start_mark);
        *kc = mark_col(y, ev.start_mark);
        int first = map_index(map, *key);
        if (first >= 0) {
            rc = al_errf(y->e, "%s:%d:%d: error: duplicate key '%s' (first at line %d)",
                         y->name, *kl, *kc, *key, map->key_line[first]);
            free(*key);
        }
    }
    yaml_event_delete(&ev);
    return rc;
}

static int parse_mapping(yctx *y, al_node *map, int depth)
{
    for (;;) {
        char *key = NULL;
        int kl = 0, kc = 0, rc = parse_key(y, map, &key, &kl, &kc);
        if (rc) return rc > 0 ? 0 : -1;
        yaml_event_t ev;
        al_node *val = NULL;
        if (next_event(y, &ev) || parse_node(y, &ev, depth + 1, &val)) {
            free(key);
            return -1;
        }
        node_add(map, key, kl, kc, val);
        free(key);
    }
}

static int parse_sequence(yctx *y, al_node *seq, int depth)
{
    for (;;) {
        yaml_event_t ev;
        if (next_event(y, &ev)) return -1;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return 0;
        }
        al_node *item = NULL;
        if (parse_node(y, &ev, depth + 1, &item)) return -1;
        node_add(seq, NULL, 0, 0, item);
    }
}

/* Build the node that starts with ev (consumed: deleted here). */
static int parse_node(yctx *y, yaml_event_t *ev, int depth, al_node **out)
{
    int line = mark_line(y, ev->start_mark), col = mark_col(y, ev->start_mark);
    int type = ev->type, rc = 0;
    al_node *x = NULL;
    if (depth > MAX_DEPTH)
        rc = al_errf(y->e, "%s:%d:%d: error: nesting deeper than %d levels", y->name,
                     line, col, MAX_DEPTH);
    else if (type == YAML_ALIAS_EVENT)
        rc = al_errf(y->e, "%s:%d:%d: error: aliases ('*%s') are not supported; "
                     "write the value out", y->name, line, col,
                     (const char *)ev->data.alias.anchor);
    else if (type == YAML_SCALAR_EVENT)
        x = scalar_node(y, ev);
    else if (type == YAML_MAPPING_START_EVENT)
        x = node_new(AL_NODE_MAP, y->name, line, col);
    else if (type == YAML_SEQUENCE_START_EVENT)
        x = node_new(AL_NODE_SEQ, y->name, line, col);
    else
        rc = al_errf(y->e, "%s:%d:%d: error: unexpected YAML event", y->name, line, col);
    yaml_event_delete(ev);
    if (!rc && type == YAML_MAPPING_START_EVENT) rc = parse_mapping(y, x, depth);
    if (!rc && type == YAML_SEQUENCE_START_EVENT) rc = parse_sequence(y, x, depth);
    if (rc) {
        al_node_free(x);
        return -1;
    }
    *out = x;
    return 0;
}

/* Expect an event of `type` (consumed). */
static int expect(yctx *y, yaml_event_type_t type, const char *what)
{
    yaml_event_t ev;
    if (next_event(y, &ev)) return -1;
    int rc = 0;
    if (ev.type != type)
        rc = al_errf(y->e, "%s:%d:%d: error: %s", y->name, mark_line(y, ev.start_mark),
                     mark_col(y, ev.start_mark), what);
    yaml_event_delete(&ev);
    return rc;
}

/* Stream: STREAM_START, then nothing (empty: an empty mapping) or one
 * document: DOCUMENT_START node DOCUMENT_END, then STREAM_END. */
static int parse_stream(yctx *y, al_node **out)
{
    yaml_event_t ev;
    if (expect(y, YAML_STREAM_START_EVENT, "expected the start of a YAML stream")) return -1;
    if (next_event(y, &ev)) return -1;
    if (ev.type == YAML_STREAM_END_EVENT) {
        yaml_event_delete(&ev);
        *out = node_new(AL_NODE_MAP, y->name, 1, 1 + y->col_off);
        return 0;
    }
    yaml_event_delete(&ev);   /* DOCUMENT_START (the parser guarantees it) */
    al_node *root = NULL;
    if (next_event(y, &ev) || parse_node(y, &ev, 0, &root)) return -1;
    if (expect(y, YAML_DOCUMENT_END_EVENT, "expected the end of the document") ||
        expect(y, YAML_STREAM_END_EVENT, "only one YAML document is allowed")) {
        al_node_free(root);
        return -1;
    }
    *out = root;
    return 0;
}

static int parse_text(const char *name, const char *text, size_t n, int col_off,
                      al_node **out, al_err *e)
{
    yctx y = {.name = name, .col_off = col_off, .end = text_end(text, n), .e = e};
    *out = NULL;
    if (!yaml_parser_initialize(&y.p))
        return al_errf(e, "%s: error: cannot initialise the YAML parser", name);
    yaml_parser_set_input_string(&y.p, (const unsigned char *)text, n);
    int rc = parse_stream(&y, out);
    yaml_parser_delete(&y.p);
    return rc;
}

int al_yaml_parse(const char *name, const char *text, al_node **out, al_err *e)
{
    return parse_text(name, text, strlen(text), 0, out, e);
}

static int is_null_scalar(const al_node *x)
{
    return x->kind == AL_NODE_SCALAR && !x->quoted &&
           (!x->value[0] || strcmp(x->value, "~") == 0 || strcasecmp(x->value, "null") == 0);
}

/* A config file: its top level must be a mapping ("---" alone: empty). */
int al_yaml_load(const char *path, al_node **out, al_err *e)
{
    char *text;
    size_t n;
    *out = NULL;
    if (al_read_file(path, &text, &n, e)) return -1;
    al_node *root;
    int rc = parse_text(path, text, n, 0, &root, e);
    free(text);
    if (rc) return -1;
    if (is_null_scalar(root)) {
        al_node *empty = node_new(AL_NODE_MAP, path, root->line, root->col);
        al_node_free(root);
        root = empty;
    }
    if (root->kind != AL_NODE_MAP) {
        rc = al_errf(e, "%s:%d:%d: error: the top level must be a mapping, got %s",
                     path, root->line, root->col, kind_name(root->kind));
        al_node_free(root);
        return rc;
    }
    *out = root;
    return 0;
}

/* ------------------------------------------------------------ --set */

/* Where the nodes and keys created by a path edit are said to come from. */
typedef struct set_pos {
    const char *file;
    int line, col;      /* col: of the path's first character */
    int per_key;        /* 1: key j sits at col + its offset in the path */
} set_pos;

/* Put v (owned) under key in map: replace the value, or add the pair. The
 * key takes v's position, so a key and its value name the same file. */
static void map_put(al_node *map, const char *key, int line, int col, al_node *v)
{
    int i = map_index(map, key);
    if (i < 0) {
        node_add(map, key, line, col, v);
        return;
    }
    al_node_free(map->items[i]);
    map->items[i] = v;
    map->key_line[i] = line;
    map->key_col[i] = col;
}

static int bad_path(const char *path)
{
    size_t n = strlen(path);
    return n == 0 || path[0] == '.' || path[n - 1] == '.' || strstr(path, "..") != NULL;
}

static int set_path_at(al_node *root, const char *path, const al_node *val,
                       int create, set_pos p, al_err *e)
{
    if (bad_path(path))
        return al_errf(e, "%s:%d:%d: error: bad key path '%s' (want names joined by '.')",
                       p.file, p.line, p.col, path);
    if (!root || root->kind != AL_NODE_MAP)
        return al_errf(e, "%s:%d:%d: error: cannot set '%s': the top level is not a mapping",
                       p.file, p.line, p.col, path);
    al_node *cur = root;
    for (const char *k = path;;) {
        const char *dot = strchr(k, '.');
        int len = dot ? (int)(dot - k) : (int)strlen(k), pre = (int)(k - path) + len;
        int col = p.per_key ? p.col + (int)(k - path) : p.col;
        char *key = strndup(k, (size_t)len);
        AL_ASSERT(key != NULL);
        if (!dot) {
            map_put(cur, key, p.line, col, al_node_clone(val));
            free(key);
            return 0;
        }
        al_node *next = al_node_get(cur, key);
        if (!next && create) {
            next = node_new(AL_NODE_MAP, p.file, p.line, col);
            node_add(cur, key, p.line, col, next);
        }
        free(key);
        if (!next)
            return al_errf(e, "%s:%d:%d: error: cannot set '%s': there is no '%.*s'",
                           p.file, p.line, col, path, pre, path);
        if (next->kind != AL_NODE_MAP)
            return al_errf(e, "%s:%d:%d: error: cannot set '%s': '%.*s' is %s, not a mapping",
                           p.file, p.line, col, path, pre, path, kind_name(next->kind));
        cur = next;
        k = dot + 1;
    }
}

int al_node_set_path(al_node *root, const char *path, const al_node *val,
                     int create, al_err *e)
{
    set_pos p = {val->file, val->line, val->col, 0};
    return set_path_at(root, path, val, create, p, e);
}

static int blank(const char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    return *s == 0;
}

/* "key.path=value": the value is YAML whose columns count from the start of
 * the assignment, in a pseudo-file named "--set". */
int al_node_apply_set(al_node *root, const char *a, al_err *e)
{
    const char *eq = strchr(a, '=');
    if (!eq) return al_errf(e, "--set:1:1: error: expected key.path=value, got '%s'", a);
    if (eq == a) return al_errf(e, "--set:1:1: error: empty key path in '%s'", a);
    int voff = (int)(eq + 1 - a);
    al_node *val;
    if (blank(eq + 1)) {
        val = node_new(AL_NODE_SCALAR, "--set", 1, voff + 1);
        val->value = xstrdup("");
    } else if (parse_text("--set", eq + 1, strlen(eq + 1), voff, &val, e)) {
        return -1;
    }
    char *path = strndup(a, (size_t)(eq - a));
    AL_ASSERT(path != NULL);
    set_pos p = {"--set", 1, 1, 1};
    int rc = set_path_at(root, path, val, 1, p, e);
    free(path);
    al_node_free(val);
    return rc;
}

/* ------------------------------------------------------------ key tables */

enum key_type {
    K_INT,      /* int, a whole number in int range */
    K_U64,      /* uint64_t, digits only */
    K_DOUBLE,   /* double, finite */
    K_BOOL,     /* int 0/1: true/false, yes/no, on/off */
    K_STRING,   /* char[size]; sub: NULL-terminated allowed values, or NULL */
    K_MAP,      /* nested struct at offset; sub: its key table */
    K_ATTN,     /* model.attention: a variant and its own settings */
    K_PLUGINS,  /* sequence of paths into al_config.plugins */
    K_MATCH,    /* model.match_params: {to: attention, by: d_ff | n_layer} */
    K_IGNORE,   /* read by others (the sweep runner) or informational */
};

typedef struct key_spec {
    const char *key;
    int type;            /* enum key_type */
    size_t offset;       /* offsetof in the struct this table decodes */
    size_t size;         /* bytes of the field */
    const void *sub;     /* see enum key_type */
    const char *def;     /* default as YAML text (scalars), else for display */
    const char *help;    /* one line */
} key_spec;

#define FIELD(S, f, T, def, help) {#f, T, offsetof(S, f), sizeof(((S *)0)->f), NULL, def, help}
#define ONE_OF(S, f, vals, def, help) \
    {#f, K_STRING, offsetof(S, f), sizeof(((S *)0)->f), vals, def, help}
#define NESTED(f, table, help) \
    {#f, K_MAP, offsetof(al_config, f), sizeof(((al_config *)0)->f), table, NULL, help}

static const char *const data_sources[] = {"text", "kjv", "mqar", "induction", NULL};
static const char *const kv_dtypes[] = {"f32", "bf16", "f16", NULL};
static const char *const init_converts[] = {"none", "mean", "first", "random", "svd", NULL};

#define D al_data_config
static const key_spec data_keys[] = {
    ONE_OF(D, source, data_sources, "kjv",
           "data source: text, kjv, mqar or induction (text when only data.path is given)"),
    FIELD(D, path, K_STRING, "", "text file for source 'text'"),
    FIELD(D, val_fraction, K_DOUBLE, "0.1", "fraction of the text held out for validation, in (0, 1)"),
    FIELD(D, test_fraction, K_DOUBLE, "0.05", "fraction of the text held out as the test split (after validation), in [0, 1): scored once at the end of a run"),
    FIELD(D, vocab_size, K_INT, "512", "vocabulary of the synthetic tasks (mqar, induction); Zoology used 8192"),
    FIELD(D, seq_len, K_INT, "0", "length of a synthetic example (0 = model.seq_len)"),
    FIELD(D, num_kv_pairs, K_INT, "8", "mqar: key-value pairs per example; induction: length of the repeated segment"),
    FIELD(D, min_kv_pairs, K_INT, "0", "training examples draw their pairs (segment length) uniformly from [min_kv_pairs, num_kv_pairs], a mixture of easier tasks; the test set always uses num_kv_pairs (0 = num_kv_pairs)"),
    FIELD(D, curriculum_steps, K_INT, "0", "over the first curriculum_steps training steps the largest pair count (segment length) of training examples grows linearly from min_kv_pairs to num_kv_pairs (0 = no ramp)"),
    FIELD(D, train_examples, K_INT, "20000", "synthetic training examples"),
    FIELD(D, test_examples, K_INT, "1000", "synthetic test examples (and as many validation examples, drawn apart from them)"),
    FIELD(D, power_a, K_DOUBLE, "0.01", "power-law parameter of mqar query gaps"),
    FIELD(D, seed, K_U64, "0", "seed of the synthetic data (0 = train.seed)"),
    {NULL, 0, 0, 0, NULL, NULL, NULL},
};
#undef D

#define M al_model_config
static const key_spec model_keys[] = {
    FIELD(M, n_layer, K_INT, "4", "transformer blocks"),
    FIELD(M, d_model, K_INT, "128", "residual stream width"),
    FIELD(M, n_head, K_INT, "4", "query heads"),
    FIELD(M, d_head, K_INT, "0", "width of one head, even for RoPE (0 = d_model / n_head)"),
    FIELD(M, seq_len, K_INT, "64", "context length trained on"),
    FIELD(M, mlp_ratio, K_DOUBLE, "4.0", "MLP hidden width over d_model"),
    FIELD(M, d_ff, K_INT, "0", "MLP hidden width (0 = mlp_ratio * d_model); under match_params the width before matching"),
    FIELD(M, vocab_size, K_INT, "0", "vocabulary (0 = from the data source)"),
    FIELD(M, norm_eps, K_DOUBLE, "1e-5", "RMSNorm epsilon"),
    FIELD(M, rope_base, K_DOUBLE, "10000", "RoPE base frequency"),
    FIELD(M, causal, K_BOOL, "true", "causal mask (false: the non-causal ablation)"),
    ONE_OF(M, kv_dtype, kv_dtypes, "f32", "KV-cache storage when decoding: f32, bf16 or f16"),
    {"attention", K_ATTN, 0, 0, NULL, NULL, "attention variant and its settings"},
    {"match_params", K_MATCH, 0, 0, NULL, "off", "match the parameter count of the same model with another attention: {to: {variant: mha}, by: d_ff} (or by: n_layer)"},
    {NULL, 0, 0, 0, NULL, NULL, NULL},
};
#undef M

/* model.match_params: the input keys, then the values a run writes back
 * (checked, when present, against the resolution). */
static const char *const match_by_names[] = {"d_ff", "n_layer", NULL};
static const key_spec match_keys[] = {
    {"to", K_ATTN, 0, 0, NULL, "-", "the attention whose model to match, a mapping like model.attention ({variant: mha})"},
    {"by", K_STRING, 0, 16, match_by_names, "d_ff", "what changes: d_ff (the MLP width, a multiple of 8, as the MQA paper widens it) or n_layer (blocks, as DeepSeek-V2 App. D.1 adds them)"},
    {"n_layer", K_INT, 0, sizeof(int), NULL, "-", "written by attnlab: the matched n_layer (model.n_layer is the one before matching)"},
    {"d_ff", K_INT, 0, sizeof(int), NULL, "-", "written by attnlab: the matched d_ff (model.d_ff is the one before matching)"},
    {"params", K_U64, 0, sizeof(uint64_t), NULL, "-", "written by attnlab: the matched model's parameter count"},
    {"params_to", K_U64, 0, sizeof(uint64_t), NULL, "-", "written by attnlab: the parameter count of the model matched to"},
    {NULL, 0, 0, 0, NULL, NULL, NULL},
};

#define T al_train_config
static const key_spec train_keys[] = {
    FIELD(T, steps, K_INT, "2000", "optimizer steps"),
    FIELD(T, batch_size, K_INT, "12", "sequences per step"),
    FIELD(T, lr, K_DOUBLE, "1e-3", "peak learning rate"),
    FIELD(T, min_lr, K_DOUBLE, "1e-4", "learning rate at the end of the cosine decay"),
    FIELD(T, warmup_steps, K_INT, "100", "steps of linear warmup, at most steps (default: min(100, steps))"),
    FIELD(T, weight_decay, K_DOUBLE, "0.1", "AdamW weight decay"),
    FIELD(T, beta1, K_DOUBLE, "0.9", "AdamW beta1, in [0, 1)"),
    FIELD(T, beta2, K_DOUBLE, "0.99", "AdamW beta2, in [0, 1)"),
    FIELD(T, grad_clip, K_DOUBLE, "1.0", "clip the global gradient norm to this (0 = off)"),
    FIELD(T, eval_every, K_INT, "200", "steps between evaluations"),
    FIELD(T, eval_batches, K_INT, "20", "batches per evaluation"),
    FIELD(T, seed, K_U64, "1", "seed of the initialisation and the training batches"),
    FIELD(T, eval_seed, K_U64, "1337", "seed of the evaluation batches"),
    FIELD(T, threads, K_INT, "0", "worker threads (0 = all cores)"),
    FIELD(T, checkpoint_every, K_INT, "0", "steps between checkpoints (0 = only at the end)"),
    FIELD(T, init_from, K_STRING, "", "checkpoint whose weights start the run, with a fresh optimizer and schedule (\"\" = random init)"),
    ONE_OF(T, init_convert, init_converts, "none", "how init_from reaches this model: none (its tensors must fit), or converted by mean, first, random or svd (as attnlab convert)"),
    {NULL, 0, 0, 0, NULL, NULL, NULL},
};
#undef T

static const key_spec top_keys[] = {
    {"name", K_IGNORE, 0, 0, NULL, NULL, "experiment name (informational)"},
    {"description", K_IGNORE, 0, 0, NULL, NULL, "one line about the experiment (informational)"},
    NESTED(data, data_keys, "the data source"),
    NESTED(model, model_keys, "the model shape"),
    NESTED(train, train_keys, "the optimizer and the schedule"),
    {"sweep", K_IGNORE, 0, 0, NULL, NULL, "the sweep (seeds, grid, zip, exclude, select, baseline), read by the sweep runner"},
    {"stages", K_IGNORE, 0, 0, NULL, NULL, "chained sweeps whose trials start from an earlier stage's checkpoints, read by the sweep runner"},
    {"plugins", K_PLUGINS, 0, 0, NULL, "[]", "shared objects that add attention variants"},
    {NULL, 0, 0, 0, NULL, NULL, NULL},
};

/* ------------------------------------------------------------ helpers */

/* Copy s into a buffer of n bytes, zero-filling the rest (so configs can be
 * compared with memcmp). s must fit. */
static void set_str(char *dst, size_t n, const char *s)
{
    size_t len = strlen(s);
    AL_ASSERT(len < n);
    memset(dst, 0, n);
    memcpy(dst, s, len);
}

/* out = "path.key" (or "key" at the top), truncated to n - 1 bytes. */
static void join(char *out, size_t n, const char *path, const char *key)
{
    size_t len = 0;
    for (const char *part[3] = {path, path[0] ? "." : "", key}, **p = part; p < part + 3; p++)
        for (const char *q = *p; *q && len + 1 < n; q++) out[len++] = *q;
    out[len] = 0;
}

int al_node_errf(al_err *e, const al_node *x, const char *fmt, ...)
{
    char msg[AL_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return al_errf(e, "%s:%d:%d: error: %s", x->file, x->line, x->col, msg);
}

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

static int parse_double(const char *s, double *v)
{
    char *end;
    if (!s[0] || s[0] == ' ' || s[0] == '\t') return -1;
    errno = 0;
    *v = strtod(s, &end);
    return *end || !isfinite(*v) ? -1 : 0;
}

/* -1: not a whole number, -2: out of int range. */
static int parse_int(const char *s, int *v)
{
    double d;
    if (parse_double(s, &d) || d != floor(d)) return -1;
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
    set_str(field, k->size, s);
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
    case K_DOUBLE:
        AL_ASSERT(k->size == sizeof(double));
        if (quoted || parse_double(s, &dv))
            return why_err(why, n, "must be a number, got %s", got);
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

static const char *wanted(int type)
{
    switch (type) {
    case K_INT: return "an integer";
    case K_U64: return "a non-negative integer";
    case K_DOUBLE: return "a number";
    case K_BOOL: return "true or false";
    case K_STRING: return "a string";
    default: return "a mapping";
    }
}

/* ------------------------------------------------------------ decoding */

static int decode_map(const al_node *m, const key_spec *t, void *base,
                      const char *path, al_err *e);
static int decode_attention(const al_node *m, al_model_config *mc,
                            const char *path, al_err *e);
static int decode_match(const al_node *v, al_model_config *mc, const char *path, al_err *e);

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
                        kind_name(v->kind));
    if (v->n > AL_MAX_PLUGINS)
        return al_node_errf(e, v, "'%s' lists %d files, at most %d", path, v->n, AL_MAX_PLUGINS);
    for (int i = 0; i < v->n; i++) {
        const al_node *x = v->items[i];
        if (x->kind != AL_NODE_SCALAR || !x->value[0])
            return al_node_errf(e, x, "'%s' must list paths, got %s", path,
                            x->kind == AL_NODE_SCALAR ? "an empty one" : kind_name(x->kind));
        if (strlen(x->value) >= AL_PATH_LEN)
            return al_node_errf(e, x, "'%s': path too long (at most %d bytes)", path, AL_PATH_LEN - 1);
        set_str(c->plugins[i], AL_PATH_LEN, x->value);
    }
    c->n_plugins = v->n;
    return 0;
}

static int decode_value(const key_spec *k, const al_node *v, void *base,
                        const char *path, al_err *e)
{
    char why[512];
    if (k->type >= K_MAP && is_null_scalar(v)) return 0;   /* "train:" alone */
    switch (k->type) {
    case K_IGNORE:
        return 0;
    case K_PLUGINS:
        return decode_plugins(v, base, path, e);
    case K_ATTN:
        return decode_attention(v, base, path, e);
    case K_MATCH:
        return decode_match(v, base, path, e);
    case K_MAP:
        if (v->kind != AL_NODE_MAP)
            return al_node_errf(e, v, "'%s' must be a mapping, got %s", path, kind_name(v->kind));
        return decode_map(v, k->sub, (char *)base + k->offset, path, e);
    }
    if (v->kind != AL_NODE_SCALAR)
        return al_node_errf(e, v, "'%s' must be %s, got %s", path, wanted(k->type),
                        kind_name(v->kind));
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
        join(sub, sizeof sub, path, k->key);
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

static int unknown_setting(al_err *e, const al_node *m, int i, const al_variant_ops *ops)
{
    const char *names[AL_MAX_SETTINGS + 1] = {"variant"};
    int n = 1 + al_variant_n_settings(ops);
    char dym[128], msg[512];
    for (int j = 1; j < n; j++) names[j] = ops->settings[j - 1].name;
    did_you_mean(dym, sizeof dym, m->keys[i], names, n);
    if (!dym[0] && n == 1) snprintf(dym, sizeof dym, " (it has no settings)");
    snprintf(msg, sizeof msg, "unknown key '%.80s' for variant '%s'%s", m->keys[i],
             ops->name, dym);
    return key_err(e, m, i, msg);
}

/* The variant named in m (default "mha"), checked against the registry. */
static const al_variant_ops *attention_variant(const al_node *m, const char *path, al_err *e)
{
    const al_node *v = al_node_get(m, "variant");
    char sub[256];
    join(sub, sizeof sub, path, "variant");
    if (v && v->kind != AL_NODE_SCALAR) {
        al_node_errf(e, v, "'%s' must be a variant name, got %s", sub, kind_name(v->kind));
        return NULL;
    }
    const char *name = v ? v->value : "mha";
    const al_variant_ops *ops = al_variant_find(name);
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
    key_spec k = {s->name, s->kind == AL_SET_INT ? K_INT : K_DOUBLE, 0,
                  s->kind == AL_SET_INT ? sizeof(int) : sizeof(double), NULL, NULL, NULL};
    union { int i; double d; } u;
    char why[512];
    if (v->kind != AL_NODE_SCALAR)
        return al_node_errf(e, v, "'%s' must be %s, got %s", path, wanted(k.type), kind_name(v->kind));
    if (put_scalar(&k, v->value, v->quoted, &u, why, sizeof why))
        return al_node_errf(e, v, "'%s' %s", path, why);
    *out = k.type == K_INT ? (double)u.i : u.d;
    return 0;
}

static int decode_attention(const al_node *m, al_model_config *mc,
                            const char *path, al_err *e)
{
    if (m->kind != AL_NODE_MAP)
        return al_node_errf(e, m, "'%s' must be a mapping such as {variant: gqa, n_kv_head: 2}, "
                        "got %s", path, kind_name(m->kind));
    const al_variant_ops *ops = attention_variant(m, path, e);
    if (!ops) return -1;
    int ns = al_variant_n_settings(ops), given[AL_MAX_SETTINGS] = {0};
    double set[AL_MAX_SETTINGS] = {0};
    for (int i = 0; i < m->n; i++) {
        if (strcmp(m->keys[i], "variant") == 0) continue;
        int j = al_variant_setting_index(ops, m->keys[i]);
        if (j < 0) return unknown_setting(e, m, i, ops);
        char sub[256];
        join(sub, sizeof sub, path, m->keys[i]);
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
    set_str(mc->variant, sizeof mc->variant, ops->name);
    memcpy(mc->attn_set, set, sizeof set);
    return 0;
}

/* ---- model.match_params: {to: {variant: ...}, by: d_ff | n_layer}, or off */

static int decode_match_key(const al_node *m, int i, al_match_config *mt, const al_node **to,
                            const char *path, al_err *e)
{
    const key_spec *k = match_keys;
    while (k->key && strcmp(k->key, m->keys[i]) != 0) k++;
    if (!k->key) return unknown_key(e, m, i, match_keys, path);
    const al_node *x = m->items[i];
    char sub[256], why[512], by[16];
    uint64_t dummy[2];
    join(sub, sizeof sub, path, k->key);
    if (k->type == K_ATTN) {
        *to = x;
        return 0;
    }
    if (x->kind != AL_NODE_SCALAR)
        return al_node_errf(e, x, "'%s' must be %s, got %s", sub, wanted(k->type),
                            kind_name(x->kind));
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
                            "by: d_ff}, or off; got %s", path, kind_name(v->kind));
    const al_node *to = NULL;
    mt->by = AL_MATCH_D_FF;
    for (int i = 0; i < v->n; i++)
        if (decode_match_key(v, i, mt, &to, path, e)) return -1;
    char sub[256];
    join(sub, sizeof sub, path, "to");
    if (!to)
        return al_node_errf(e, v, "'%s' is required: the attention to match, e.g. "
                            "{variant: mha}", sub);
    al_model_config tmp;
    memset(&tmp, 0, sizeof tmp);
    if (decode_attention(to, &tmp, sub, e)) return -1;
    mt->attn = tmp.attn;
    set_str(mt->variant, sizeof mt->variant, tmp.variant);
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
    table_defaults(top_keys, c);
    c->model.attn = al_variant_find("mha");
    AL_ASSERT(c->model.attn != NULL);
    set_str(c->model.variant, sizeof c->model.variant, "mha");
}

static int resolve(al_config *c, const al_node *root, al_err *e);
static int resolve_model(al_config *c, const al_node *root, al_err *e);

int al_config_decode(const al_node *root, al_config *c, al_err *e)
{
    al_config_defaults(c);
    if (!root) return al_errf(e, "config: error: no configuration to decode");
    snprintf(c->file, sizeof c->file, "%s", root->file);
    if (root->kind != AL_NODE_MAP)
        return al_node_errf(e, root, "the top level must be a mapping, got %s", kind_name(root->kind));
    if (decode_map(root, top_keys, c, "", e) || resolve(c, root, e) ||
        al_config_validate(c, root, e))
        return -1;
    return resolve_model(c, root, e);
}

/* ------------------------------------------------------------ validation */

/* The node at a dotted path, else its deepest existing ancestor; *exact
 * (if non-NULL) tells which. */
static const al_node *find_path(const al_node *root, const char *path, int *exact)
{
    const al_node *cur = root;
    char key[256];
    const char *k = path;
    while (cur && *k) {
        size_t len = strcspn(k, "."), n = len < sizeof key - 1 ? len : sizeof key - 1;
        memcpy(key, k, n);   /* not "%.*s": GCC's -O3 + sanitizer flags a false null */
        key[n] = '\0';
        const al_node *next = al_node_get(cur, key);
        if (!next) break;
        cur = next;
        k += len + (k[len] == '.');
    }
    if (exact) *exact = cur && !*k;
    return cur;
}

/* An error about the key at path: at its node when a tree is given, else
 * at the config's file without a position. */
static int verr(al_err *e, const al_config *c, const al_node *root, const char *path,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int verr(al_err *e, const al_config *c, const al_node *root, const char *path,
                const char *fmt, ...)
{
    char msg[AL_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const al_node *x = root ? find_path(root, path, NULL) : NULL;
    if (x) return al_node_errf(e, x, "%s", msg);
    return al_errf(e, "%s: error: %s", c->file[0] ? c->file : "config", msg);
}

static void fmt_double(char *out, size_t n, double v);

enum rule { R_POS, R_NONNEG, R_OPEN01, R_HALF01 };
typedef struct num_rule {
    const char *path;
    int is_int;
    size_t offset;       /* in al_config */
    int rule;            /* enum rule */
} num_rule;
#define IRULE(f, r) {#f, 1, offsetof(al_config, f), r}
#define DRULE(f, r) {#f, 0, offsetof(al_config, f), r}

static const num_rule num_rules[] = {
    IRULE(model.n_layer, R_POS), IRULE(model.d_model, R_POS), IRULE(model.n_head, R_POS),
    IRULE(model.d_head, R_NONNEG), IRULE(model.seq_len, R_POS),
    IRULE(model.vocab_size, R_NONNEG), DRULE(model.mlp_ratio, R_POS),
    IRULE(model.d_ff, R_NONNEG),
    DRULE(model.norm_eps, R_POS), DRULE(model.rope_base, R_POS),
    IRULE(train.steps, R_POS), IRULE(train.batch_size, R_POS), DRULE(train.lr, R_POS),
    DRULE(train.min_lr, R_NONNEG), IRULE(train.warmup_steps, R_NONNEG),
    DRULE(train.weight_decay, R_NONNEG), DRULE(train.beta1, R_HALF01),
    DRULE(train.beta2, R_HALF01), DRULE(train.grad_clip, R_NONNEG),
    IRULE(train.eval_every, R_POS), IRULE(train.eval_batches, R_POS),
    IRULE(train.threads, R_NONNEG), IRULE(train.checkpoint_every, R_NONNEG),
    DRULE(data.val_fraction, R_OPEN01), DRULE(data.test_fraction, R_HALF01),
    IRULE(data.vocab_size, R_POS),
    IRULE(data.seq_len, R_NONNEG), IRULE(data.num_kv_pairs, R_POS),
    IRULE(data.min_kv_pairs, R_NONNEG), IRULE(data.curriculum_steps, R_NONNEG),
    IRULE(data.train_examples, R_POS), IRULE(data.test_examples, R_POS),
    DRULE(data.power_a, R_NONNEG),
    {NULL, 0, 0, 0},
};

/* Written so that NaN fails every rule. */
static int check_rules(const al_config *c, const al_node *root, al_err *e)
{
    static const char *const want[] = {"must be positive", "must be >= 0",
                                       "must be in (0, 1)", "must be in [0, 1)"};
    for (const num_rule *r = num_rules; r->path; r++) {
        const char *p = (const char *)c + r->offset;
        double v = r->is_int ? *(const int *)p : *(const double *)p;
        int ok = r->rule == R_POS ? v > 0 : r->rule == R_NONNEG ? v >= 0
                 : r->rule == R_OPEN01 ? v > 0 && v < 1 : v >= 0 && v < 1;
        char num[64];
        fmt_double(num, sizeof num, v);
        if (!ok) return verr(e, c, root, r->path, "'%s' (%s) %s", r->path, num, want[r->rule]);
    }
    return 0;
}

static int check_one_of(const al_config *c, const al_node *root, const char *path,
                        const char *v, const char *const *allowed, al_err *e)
{
    for (int i = 0; allowed[i]; i++)
        if (strcmp(v, allowed[i]) == 0) return 0;
    return verr(e, c, root, path, "'%s' ('%s') is not a known value", path, v);
}

/* The variant's own check(), pointed at the setting its message names. */
static int check_variant(const al_config *c, const al_node *root, al_err *e)
{
    const al_variant_ops *ops = c->model.attn;
    char msg[512] = "", path[256] = "model.attention";
    if (!ops) return verr(e, c, root, path, "'model.attention.variant' is not resolved");
    if (!ops->check) return 0;
    al_attn_shape s;
    al_config_attn_shape(c, &s);
    if (ops->check(&s, msg, sizeof msg) == 0) return 0;
    msg[sizeof msg - 1] = 0;   /* a plugin's message, perhaps unterminated */
    for (int j = 0; j < al_variant_n_settings(ops); j++) {
        size_t n = strlen(ops->settings[j].name);
        if (msg[0] == '\'' && strncmp(msg + 1, ops->settings[j].name, n) == 0 &&
            msg[n + 1] == '\'')
            join(path, sizeof path, "model.attention", ops->settings[j].name);
    }
    return verr(e, c, root, path, "%s", msg[0] ? msg : "rejected by the variant's check");
}

int al_config_validate(const al_config *c, const al_node *root, al_err *e)
{
    const al_model_config *m = &c->model;
    if (check_rules(c, root, e)) return -1;
    if (m->d_head == 0 && m->d_model % m->n_head != 0)
        return verr(e, c, root, "model.n_head", "'model.d_model' (%d) is not divisible by "
                    "'model.n_head' (%d); set 'model.d_head'", m->d_model, m->n_head);
    int dh = m->d_head ? m->d_head : m->d_model / m->n_head, given = 0;
    if (root) find_path(root, "model.d_head", &given);
    if (dh % 2 != 0)   /* at d_model when d_head was derived from it */
        return verr(e, c, root, given || !root ? "model.d_head" : "model.d_model",
                    "'model.d_head' (%d) must be even for RoPE", dh);
    if (c->train.warmup_steps > c->train.steps)
        return verr(e, c, root, "train.warmup_steps", "'train.warmup_steps' (%d) must be at "
                    "most 'train.steps' (%d)", c->train.warmup_steps, c->train.steps);
    if (c->data.val_fraction + c->data.test_fraction >= 1.0)
        return verr(e, c, root, "data.test_fraction", "'data.val_fraction' + "
                    "'data.test_fraction' (%g + %g) must leave some text to train on",
                    c->data.val_fraction, c->data.test_fraction);
    if (check_one_of(c, root, "data.source", c->data.source, data_sources, e) ||
        check_one_of(c, root, "model.kv_dtype", m->kv_dtype, kv_dtypes, e) ||
        (c->train.init_convert[0] &&   /* "" (a config built in code) is none */
         check_one_of(c, root, "train.init_convert", c->train.init_convert, init_converts, e)))
        return -1;
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
            return verr(e, c, root, "model.n_head", "'model.d_model' (%d) is not divisible "
                        "by 'model.n_head' (%d); set 'model.d_head'", m->d_model, m->n_head);
        m->d_head = m->d_model / m->n_head;
    }
    if (c->data.seed == 0) c->data.seed = c->train.seed;
    int given;
    /* The built-in corpus is the default data set; a file given alone
     * (data.path without data.source) means that file, as text. */
    find_path(root, "data.source", &given);
    if (!given) set_str(c->data.source, sizeof c->data.source, c->data.path[0] ? "text" : "kjv");
    find_path(root, "train.warmup_steps", &given);
    if (!given && c->train.warmup_steps > c->train.steps && c->train.steps > 0)
        c->train.warmup_steps = c->train.steps;
    return 0;
}

/* ---- the MLP width and parameter matching (after validation: the shapes
 * are sound, so every parameter count below exists) */

int al_config_d_ff(const al_model_config *m)
{
    return m->d_ff > 0 ? m->d_ff : (int)lround(m->mlp_ratio * m->d_model);
}

#define AL_MATCH_MAX_D_FF (1 << 24)
#define AL_MATCH_MAX_N_LAYER 4096

/* Parameters of m with n_layer L, d_ff F and attention (ops, set). */
static size_t count_with(const al_model_config *m, int L, int F, const al_variant_ops *ops,
                         const double *set, al_err *e)
{
    al_model_config x = *m;
    x.n_layer = L;
    x.d_ff = F;
    x.attn = ops;
    memcpy(x.attn_set, set, sizeof x.attn_set);
    return al_model_param_count(&x, e);
}

/* The value of the matched dimension closest to P_to: candidates lo and
 * lo + step (lo >= min); ties go to the smaller. 0 when none is >= min. */
static int closest(const al_model_config *m, int by, int lo, int step, int min, size_t P_to,
                   size_t *P, al_err *e)
{
    int best = 0;
    *P = 0;
    for (int x = lo; x <= lo + step; x += step) {
        if (x < min) continue;
        int L = by == AL_MATCH_N_LAYER ? x : m->n_layer, F = by == AL_MATCH_D_FF ? x : m->d_ff;
        size_t n = count_with(m, L, F, m->attn, m->attn_set, e);
        double d = fabs((double)n - (double)P_to), db = fabs((double)*P - (double)P_to);
        if (n && (!best || d < db)) best = x, *P = n;
    }
    return best;
}

static int check_written(const al_config *c, const al_node *root, const char *key, double got)
{
    char path[64];
    int exact;
    snprintf(path, sizeof path, "model.match_params.%s", key);
    const al_node *x = root ? find_path(root, path, &exact) : NULL;
    return x && exact && strtod(x->value, NULL) != got;
}

/* The resolved values a run wrote back must be what the match gives now. */
static int verify_written(const al_config *c, const al_node *root, al_err *e)
{
    const al_match_config *mt = &c->model.match;
    const char *keys[] = {"n_layer", "d_ff", "params", "params_to"};
    double now[] = {c->model.n_layer, c->model.d_ff, (double)mt->params, (double)mt->params_to};
    for (int i = 0; i < 4; i++) {
        if (!check_written(c, root, keys[i], now[i])) continue;
        char path[64];
        snprintf(path, sizeof path, "model.match_params.%s", keys[i]);
        return verr(e, c, root, path, "'%s' says what the match gave when this file was "
                    "written, but it now gives %.0f: the model changed; remove the written "
                    "values (n_layer, d_ff, params, params_to) to match afresh", path, now[i]);
    }
    return 0;
}

static int resolve_match(al_config *c, const al_node *root, al_err *e)
{
    al_model_config *m = &c->model;
    al_match_config *mt = &m->match;
    al_model_config me = *m;
    al_err sub;
    int V = m->vocab_size > 0 ? m->vocab_size : al_data_vocab(&c->data);
    me.vocab_size = V > 0 ? V : 0;   /* the embedding is the same on both sides */
    size_t P_to = count_with(&me, m->n_layer, m->d_ff, mt->attn, mt->attn_set, &sub);
    if (!P_to)
        return verr(e, c, root, "model.match_params.to", "'model.match_params.to': %s",
                    strncmp(sub.msg, "model.attention: ", 17) == 0 ? sub.msg + 17 : sub.msg);
    size_t P0 = count_with(&me, m->n_layer, m->d_ff, m->attn, m->attn_set, e), P = P0;
    double gap = (double)P_to - (double)P0;
    if (mt->by == AL_MATCH_D_FF && gap != 0) {
        double F = m->d_ff + gap / (2.0 * m->d_model * m->n_layer);   /* w1 and w2 per layer */
        if (F < 4 || F > AL_MATCH_MAX_D_FF)
            return verr(e, c, root, "model.match_params", "'model.match_params': matching "
                        "%zu parameters by d_ff needs d_ff %.1f, outside [8, %d]", P_to, F,
                        AL_MATCH_MAX_D_FF);
        m->d_ff = closest(&me, AL_MATCH_D_FF, 8 * (int)floor(F / 8), 8, 8, P_to, &P, e);
    } else if (mt->by == AL_MATCH_N_LAYER && gap != 0) {
        size_t P1 = count_with(&me, m->n_layer + 1, m->d_ff, m->attn, m->attn_set, e);
        double L = m->n_layer + gap / ((double)P1 - (double)P0);
        if (L > AL_MATCH_MAX_N_LAYER)
            return verr(e, c, root, "model.match_params", "'model.match_params': matching "
                        "%zu parameters by n_layer needs %.1f blocks, more than %d", P_to, L,
                        AL_MATCH_MAX_N_LAYER);
        m->n_layer = closest(&me, AL_MATCH_N_LAYER, L < 1 ? 0 : (int)floor(L), 1, 1, P_to, &P,
                             e);
    }
    AL_ASSERT(m->d_ff > 0 && m->n_layer > 0 && P > 0);
    mt->n_layer = m->n_layer;
    mt->d_ff = m->d_ff;
    /* the counts with the real vocabulary (the same gap either way) */
    mt->params = V > 0 ? P : 0;
    mt->params_to = V > 0 ? P_to : 0;
    return verify_written(c, root, e);
}

static int resolve_model(al_config *c, const al_node *root, al_err *e)
{
    al_model_config *m = &c->model;
    double F = m->mlp_ratio * m->d_model;
    if (m->d_ff == 0 && !(F >= 0.5 && F < INT_MAX))
        return verr(e, c, root, "model.mlp_ratio", "'model.mlp_ratio' (%g) times 'model.d_model' "
                    "(%d) must give an MLP width of at least 1", m->mlp_ratio, m->d_model);
    m->d_ff = al_config_d_ff(m);
    m->match.base_n_layer = m->n_layer;
    m->match.base_d_ff = m->d_ff;
    return m->match.by == AL_MATCH_NONE ? 0 : resolve_match(c, root, e);
}

void al_config_attn_shape(const al_config *c, al_attn_shape *s)
{
    const al_model_config *m = &c->model;
    memset(s, 0, sizeof *s);
    s->d_model = m->d_model;
    s->n_head = m->n_head;
    s->d_head = m->d_head ? m->d_head : (m->n_head > 0 ? m->d_model / m->n_head : 0);
    s->seq_len = m->seq_len;
    s->causal = m->causal;
    s->rope_base = (float)m->rope_base;
    s->norm_eps = (float)m->norm_eps;
    memcpy(s->set, m->attn_set, sizeof s->set);
}

/* ------------------------------------------------------------ writing */

/* The shortest %g that reads back to v; "1e-05" becomes "1.0e-05" so that
 * YAML 1.1 readers (PyYAML) see a float too. */
static void fmt_double(char *out, size_t n, double v)
{
    if (isnan(v) || isinf(v)) {
        snprintf(out, n, "%s", isnan(v) ? ".nan" : v > 0 ? ".inf" : "-.inf");
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(out, n, "%.*g", p, v);
        if (strtod(out, NULL) == v) break;
    }
    char *ex = strchr(out, 'e');
    if (ex && !strchr(out, '.') && strlen(out) + 3 <= n) {
        memmove(ex + 2, ex, strlen(ex) + 1);
        memcpy(ex, ".0", 2);
    }
}

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
    case K_U64: fprintf(f, "%" PRIu64, *(const uint64_t *)p); break;
    case K_BOOL: fputs(*(const int *)p ? "true" : "false", f); break;
    case K_STRING: write_string(f, p); break;
    case K_DOUBLE:
        fmt_double(buf, sizeof buf, *(const double *)p);
        fputs(buf, f);
        break;
    }
}

/* The mapping {variant, settings...} with its keys at indent. */
static void write_variant(FILE *f, const char *variant, const al_variant_ops *ops,
                          const double *set, int indent)
{
    char buf[64];
    fprintf(f, "%*svariant: ", indent, "");
    write_string(f, variant);
    fputc('\n', f);
    for (int j = 0; ops && j < al_variant_n_settings(ops); j++) {
        const al_setting *s = &ops->settings[j];
        if (s->kind == AL_SET_INT) snprintf(buf, sizeof buf, "%lld", (long long)set[j]);
        else fmt_double(buf, sizeof buf, set[j]);
        fprintf(f, "%*s%s: %s\n", indent, "", s->name, buf);
    }
}

static void write_attention(FILE *f, const al_model_config *m, int indent)
{
    fprintf(f, "%*sattention:\n", indent, "");
    write_variant(f, m->variant, m->attn, m->attn_set, indent + 2);
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
static void write_model(FILE *f, const key_spec *t, const al_model_config *m, int indent)
{
    al_model_config given = *m;
    if (m->match.by != AL_MATCH_NONE) {
        given.n_layer = m->match.base_n_layer;
        given.d_ff = m->match.base_d_ff;
    }
    write_table(f, t, &given, indent);
}

static void write_table(FILE *f, const key_spec *t, const void *base, int indent)
{
    for (; t->key; t++) {
        if (t->type == K_IGNORE) continue;
        if (t->type == K_MATCH) {
            write_match(f, &((const al_model_config *)base)->match, indent);
        } else if (t->type == K_ATTN) {
            write_attention(f, base, indent);
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
            if (t->sub == model_keys)
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

void al_config_write_yaml(const al_config *c, FILE *f)
{
    if (c->train.init_convert[0]) {
        write_table(f, top_keys, c, 0);
        return;
    }
    al_config named = *c;   /* a config built in code may leave it empty: that is none */
    set_str(named.train.init_convert, sizeof named.train.init_convert, "none");
    write_table(f, top_keys, &named, 0);
}

/* ------------------------------------------------------------ schema */

static void print_attention_rows(FILE *f, const char *path)
{
    char def[64];
    fprintf(f, "| `%s.variant` | mha | attention variant, one of `attnlab variants` |\n", path);
    for (int i = 0; i < al_variant_count(); i++) {
        const al_variant_ops *ops = al_variant_at(i);
        for (int j = 0; j < al_variant_n_settings(ops); j++) {
            const al_setting *s = &ops->settings[j];
            if (s->required) snprintf(def, sizeof def, "required");
            else fmt_double(def, sizeof def, s->def);
            fprintf(f, "| `%s.%s` | %s | %s: %s |\n", path, s->name, def, ops->name,
                    s->help ? s->help : "");
        }
    }
}

static void print_table(FILE *f, const key_spec *t, const char *path)
{
    for (; t->key; t++) {
        char p[256];
        join(p, sizeof p, path, t->key);
        if (t->type == K_MAP) print_table(f, t->sub, p);
        else if (t->type == K_ATTN && t->sub == NULL && strcmp(t->key, "attention") == 0)
            print_attention_rows(f, p);
        else if (t->type == K_MATCH) {
            fprintf(f, "| `%s` | %s | %s |\n", p, t->def, t->help);
            print_table(f, match_keys, p);
        }
        else fprintf(f, "| `%s` | %s | %s |\n", p,
                     !t->def ? "-" : t->def[0] ? t->def : "\"\"", t->help);
    }
}

/* Every key as a markdown table row: "| `model.n_head` | 4 | query heads |". */
void al_config_print_schema(FILE *f)
{
    print_table(f, top_keys, "");
}

/* ------------------------------------------------------------ loading */

int al_config_load(const char *path, const char *const *sets, int n_sets,
                   al_config *c, al_err *e)
{
    al_node *root;
    if (al_yaml_load(path, &root, e)) return -1;
    int rc = 0;
    for (int i = 0; i < n_sets && rc == 0; i++) rc = al_node_apply_set(root, sets[i], e);
    if (rc == 0) rc = al_config_decode(root, c, e);
    if (rc == 0) snprintf(c->file, sizeof c->file, "%s", path);
    al_node_free(root);
    return rc;
}
