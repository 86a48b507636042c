/*
 * al_config_io.h - experiment config files: YAML in, resolved al_config
 * (al_config.h) out, and back out as YAML or JSON.
 *
 * A config file has the mappings data, model, train (and, for sweeps, sweep
 * and plugins). Loading is two steps, so that sweeps can edit the tree:
 *   1. al_yaml_load (al_yaml.h): parse YAML into an al_node tree that keeps
 *      every node's file, line and column;
 *   2. al_config_decode: walk the tree against per-mapping key tables into
 *      an al_config, filling defaults. Unknown keys (with a did-you-mean),
 *      duplicate keys, wrong node types and impossible shapes are errors of
 *      the form "file:line:col: error: ..." (libyaml marks + 1).
 * --set key.path=value edits the tree before decoding (al_node_apply_set).
 * The same key tables give the defaults, the writers (YAML, JSON, the
 * checkpoint's model JSON) and the `keys` schema, so none of them can drift
 * from the decoder.
 *
 * Files: config_keys.c (the tables), config.c (decoding and validation),
 * config_match.c (model.match_params), config_write.c (the writers).
 */
#ifndef AL_CONFIG_IO_H
#define AL_CONFIG_IO_H

#include <stdio.h>
#include "al_config.h"
#include "al_yaml.h"

/* Defaults for every key. */
void al_config_defaults(al_config *c);
/* Decode a tree (whole file, sweep mapping ignored here) into c. */
int al_config_decode(const al_node *root, al_config *c, al_err *e);
/* Load file, apply --set assignments in order, decode. */
int al_config_load(const char *path, const char *const *sets, int n_sets,
                   al_config *c, al_err *e);
/* al_config_load with the plugins loaded in between: YAML, --set
 * assignments, the `plugins:` list (al_plugin_load_listed), then decoding. */
int al_plugin_config_load(const char *path, const char *const *sets, int n_sets,
                          al_config *c, al_err *e);
/* Check shapes (n_kv_head divides n_head, odd d_head under RoPE, zero
 * sizes, the variant's own check). Errors name the key (and the node's
 * file:line:col when a tree is given). */
int al_config_validate(const al_config *c, const al_node *root, al_err *e);

/* Emit the resolved config as YAML (every key, defaults included). */
void al_config_write_yaml(const al_config *c, FILE *f);
/* The same without report.* (how results are shown): what a run computes,
 * the text a sweep trial's hash is taken over, so that a report setting
 * never makes a finished trial new. */
void al_config_write_yaml_identity(const al_config *c, FILE *f);
/* The path keys of c that its file gave as relative paths (c->rel_paths:
 * data.path, train.init_from), absolute as read, rewritten relative to the
 * folder dir (al_path_relative): what a config written into dir holds (a
 * run's config.yaml and its saved config), so that it reads back to the
 * same files from anywhere and a tree moved whole still resumes; absolute
 * ones (and plugins, which the loader makes absolute) stay absolute, so a
 * run folder copied alone still finds them (docs/first-run.md). */
void al_config_paths_relative(al_config *c, const char *dir);
/* The same config as one JSON object (malloc'ed, compact): the same keys
 * and values as the YAML, plugins always listed, match_params false when
 * off. JSON is YAML, so the text decodes back to the same config. A
 * train/data seed above 2^63 - 1 (beyond JSON integers in jansson) is
 * written as a string of digits. */
char *al_config_json(const al_config *c);
/* The model mapping as built (malloc'ed, compact JSON): one entry per key
 * of the model table except match_params, with n_layer and d_ff the ones
 * the model has (the matched ones; d_ff resolved when 0) and the attention
 * as {"variant": name, settings by name} (integer settings as integers).
 * This is a checkpoint's "attnlab.config". */
char *al_config_model_json(const al_model_config *m);
/* Is key one of the top-level keys of al_config_model_json? */
int al_config_model_json_has(const char *key);
/* Print every key as a markdown table row: "| `model.n_head` | 4 | help |". */
void al_config_print_schema(FILE *f);

#endif
