/*
 * al_yaml.h - a YAML tree with positions, and --set edits of it.
 *
 * al_yaml_load parses a file (one document) into an al_node tree that keeps
 * every node's file, line and column, so whoever reads the tree (the config
 * decoder, the sweep runner) can point its errors at the text: "file:line:
 * col: error: ..." (libyaml marks + 1). Anchors and aliases are refused,
 * duplicate keys are errors, nesting is limited. --set key.path=value edits
 * a tree before it is decoded (al_node_apply_set).
 *
 * A tree is owned by whoever got it from al_yaml_load, al_yaml_parse,
 * al_node_new or al_node_clone, and freed with al_node_free.
 */
#ifndef AL_YAML_H
#define AL_YAML_H

#include "al_util.h"

enum al_node_kind { AL_NODE_SCALAR, AL_NODE_MAP, AL_NODE_SEQ };

typedef struct al_node al_node;
struct al_node {
    int kind;             /* enum al_node_kind */
    char *value;          /* scalar text (NULL otherwise) */
    int quoted;           /* scalar was quoted: never a number or bool */
    const char *file;     /* a copy owned by the node */
    int line, col;        /* 1-based */
    int n;                /* children: map pairs or sequence items */
    char **keys;          /* map keys (n), NULL for sequences */
    int *key_line, *key_col;
    al_node **items;      /* values (n) */
};

/* Parse a YAML file (one document). Errors: "file:line:col: error: ...". */
/* A config or sweep file larger than this is refused before it is read
 * (experiment files are a few hundred bytes; this is no place for data). */
#define AL_CONFIG_MAX_BYTES (1u << 20)
int al_yaml_load(const char *path, al_node **out, al_err *e);
/* The same, and the SHA-256 (hex) of exactly the bytes it parsed, so a
 * caller can tell later whether the file still holds what it read. */
int al_yaml_load_digest(const char *path, al_node **out, char sha256[65], al_err *e);
/* Parse YAML text (for --set values and tests); `name` is used in errors. */
int al_yaml_parse(const char *name, const char *text, al_node **out, al_err *e);
void al_node_free(al_node *n);
al_node *al_node_clone(const al_node *n);
/* An empty mapping or sequence carrying at's file and position (for
 * errors; at may be NULL), and appending to one (key NULL in a sequence);
 * x takes ownership of child. */
al_node *al_node_new(int kind, const al_node *at);
void al_node_append(al_node *x, const char *key, al_node *child);
/* Child of a mapping by key, or NULL. */
al_node *al_node_get(const al_node *map, const char *key);
/* Remove (and free) the child under key of a mapping; 1 if there was one. */
int al_node_remove(al_node *map, const char *key);
/* "a mapping", "a sequence" or "a scalar" (for messages). */
const char *al_node_kind_name(int kind);
/* A plain null scalar: empty, "~" or "null" (any case). */
int al_node_is_null(const al_node *x);
/* Replace (or create) the node at a dotted path such as "model.attention"
 * with a clone of val. Creates missing intermediate mappings only when
 * create != 0. Errors name the path. */
int al_node_set_path(al_node *root, const char *path, const al_node *val,
                     int create, al_err *e);
/* Apply "key.path=value" (value parsed as YAML). Unknown paths are errors
 * once decoded; here the tree is only edited. */
int al_node_apply_set(al_node *root, const char *assignment, al_err *e);
/* "file:line:col: error: " + message, at node x, into e; returns -1. */
int al_node_errf(al_err *e, const al_node *x, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
