/*
 * yaml.c - a YAML tree whose every node keeps its file, line and column
 * (al_yaml.h), and the --set edits of such a tree.
 *
 * Every node carries a copy of its file name in the same allocation as the
 * node itself, so a subtree cloned into another tree (--set) keeps naming
 * where it came from after the source tree is freed.
 */
#include "al_yaml.h"
#include "al_sha256.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

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

int al_node_remove(al_node *map, const char *key)
{
    for (int i = 0; map && map->kind == AL_NODE_MAP && i < map->n; i++) {
        if (strcmp(map->keys[i], key) != 0) continue;
        al_node_free(map->items[i]);
        free(map->keys[i]);
        int rest = map->n - i - 1;
        memmove(&map->items[i], &map->items[i + 1], (size_t)rest * sizeof *map->items);
        memmove(&map->keys[i], &map->keys[i + 1], (size_t)rest * sizeof *map->keys);
        memmove(&map->key_line[i], &map->key_line[i + 1], (size_t)rest * sizeof *map->key_line);
        memmove(&map->key_col[i], &map->key_col[i + 1], (size_t)rest * sizeof *map->key_col);
        map->n--;
        return 1;
    }
    return 0;
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

const char *al_node_kind_name(int kind)
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

int al_node_is_null(const al_node *x)
{
    return x->kind == AL_NODE_SCALAR && !x->quoted &&
           (!x->value[0] || strcmp(x->value, "~") == 0 || strcasecmp(x->value, "null") == 0);
}

/* A config file: its top level must be a mapping ("---" alone: empty). */
int al_yaml_load(const char *path, al_node **out, al_err *e)
{
    return al_yaml_load_digest(path, out, NULL, e);
}

int al_yaml_load_digest(const char *path, al_node **out, char sha256[65], al_err *e)
{
    char *text;
    size_t n;
    *out = NULL;
    if (al_read_file_max(path, AL_CONFIG_MAX_BYTES, &text, &n, e)) return -1;
    if (sha256) al_sha256_hex(text, n, sha256);
    al_node *root;
    int rc = parse_text(path, text, n, 0, &root, e);
    free(text);
    if (rc) return -1;
    if (al_node_is_null(root)) {
        al_node *empty = node_new(AL_NODE_MAP, path, root->line, root->col);
        al_node_free(root);
        root = empty;
    }
    if (root->kind != AL_NODE_MAP) {
        rc = al_errf(e, "%s:%d:%d: error: the top level must be a mapping, got %s",
                     path, root->line, root->col, al_node_kind_name(root->kind));
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
                           p.file, p.line, col, path, pre, path, al_node_kind_name(next->kind));
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

/* ------------------------------------------------------------ errors */

int al_node_errf(al_err *e, const al_node *x, const char *fmt, ...)
{
    char msg[AL_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return al_errf(e, "%s:%d:%d: error: %s", x->file, x->line, x->col, msg);
}
