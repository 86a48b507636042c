/*
 * test_config.c - the YAML tree, --set edits, decoding with defaults, every
 * kind of configuration error (exact "file:line:col: error: ..." text), and
 * the resolved config written out (YAML, JSON) and read back unchanged.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "al_test.h"
#include "al_config_io.h"
#include "al_flash.h"
#include "al_registry.h"
#include "config_keys.h"   /* the key tables the JSON must follow row by row */


/* ------------------------------------------------------------ helpers */

/* A config file in a fresh directory; remove it with drop(). */
static char *write_cfg(const char *text)
{
    char *dir = al_test_tmpdir();
    char *path = al_test_write(dir, "exp.yaml", text);
    free(dir);
    return path;
}

/* A path-typed key from a file: absolute, ending in the value as written
 * (the rest is the file's folder: docs/first-run.md). */
static int absolute_ending(const char *path, const char *tail)
{
    size_t n = strlen(path), t = strlen(tail);
    return path[0] == '/' && n > t && strcmp(path + n - t, tail) == 0 && path[n - t - 1] == '/';
}

static void drop(char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = 0;
    unlink(path);
    rmdir(dir);
    free(path);
}

static int load(const char *text, const char *set, al_config *c, al_err *e, char **path)
{
    const char *sets[] = {set};
    *path = write_cfg(text);
    e->msg[0] = 0;
    return al_config_load(*path, sets, set ? 1 : 0, c, e);
}

/* Loading text (with one optional --set) fails with exactly want; "%F" in
 * want stands for the file's path. The message is one line. */
static void expect_error(const char *text, const char *set, const char *want)
{
    al_config c;
    al_err e;
    char *path, full[4096];
    int rc = load(text, set, &c, &e, &path);
    const char *f = strstr(want, "%F");
    if (f) snprintf(full, sizeof full, "%.*s%s%s", (int)(f - want), want, path, f + 2);
    else snprintf(full, sizeof full, "%s", want);
    ck_assert_int_eq(rc, -1);
    ck_assert_str_eq(e.msg, full);
    ck_assert_ptr_null(strchr(e.msg, '\n'));
    drop(path);
}

static al_config load_ok(const char *text, const char *set)
{
    al_config c;
    al_err e;
    char *path;
    int rc = load(text, set, &c, &e, &path);
    ck_assert_msg(rc == 0, "%s", e.msg);
    drop(path);
    return c;
}

/* ------------------------------------------------------------ defaults */

/* The built-in corpus is the default data set; a path given alone is text. */
START_TEST(data_source_defaults_to_kjv_or_to_text_for_a_lone_path)
{
    al_config c;
    al_err e;
    char *path;
    ck_assert_int_eq(load("model: {n_layer: 1}\n", NULL, &c, &e, &path), 0);
    ck_assert_str_eq(c.data.source, "kjv");
    drop(path);
    ck_assert_int_eq(load("data: {path: x.txt}\n", NULL, &c, &e, &path), 0);
    ck_assert_str_eq(c.data.source, "text");
    drop(path);
    ck_assert_int_eq(load("data: {source: kjv, path: x.txt}\n", NULL, &c, &e, &path), 0);
    ck_assert_str_eq(c.data.source, "kjv");
    drop(path);
}
END_TEST

START_TEST(defaults_are_the_documented_values)
{
    al_config c;
    memset(&c, 0xab, sizeof c);
    al_config_defaults(&c);
    ck_assert_str_eq(c.data.source, "kjv");
    ck_assert_str_eq(c.data.path, "");
    ck_assert_double_eq(c.data.val_fraction, 0.1);
    ck_assert_int_eq(c.data.vocab_size, 512);
    ck_assert_int_eq(c.data.num_kv_pairs, 8);
    ck_assert_int_eq(c.data.train_examples, 20000);
    ck_assert_int_eq(c.data.test_examples, 1000);
    ck_assert_double_eq(c.data.power_a, 0.01);
    ck_assert_uint_eq(c.data.seed, 0);
    ck_assert_int_eq(c.model.n_layer, 4);
    ck_assert_int_eq(c.model.d_model, 128);
    ck_assert_int_eq(c.model.n_head, 4);
    ck_assert_int_eq(c.model.d_head, 0);
    ck_assert_int_eq(c.model.seq_len, 64);
    ck_assert_int_eq(c.model.vocab_size, 0);
    ck_assert_double_eq(c.model.mlp_ratio, 4.0);
    ck_assert_double_eq(c.model.norm_eps, 1e-5);
    ck_assert_double_eq(c.model.rope_base, 10000);
    ck_assert_int_eq(c.model.causal, 1);
    ck_assert_str_eq(c.model.kv_dtype, "f32");
    ck_assert_str_eq(c.model.variant, "mha");
    ck_assert_ptr_eq(c.model.attn, al_variant_find("mha"));
    ck_assert_int_eq(c.train.steps, 2000);
    ck_assert_int_eq(c.train.batch_size, 12);
    ck_assert_double_eq(c.train.lr, 1e-3);
    ck_assert_double_eq(c.train.min_lr, 1e-4);
    ck_assert_int_eq(c.train.warmup_steps, 100);
    ck_assert_double_eq(c.train.weight_decay, 0.1);
    ck_assert_double_eq(c.train.beta1, 0.9);
    ck_assert_double_eq(c.train.beta2, 0.99);
    ck_assert_double_eq(c.train.grad_clip, 1.0);
    ck_assert_int_eq(c.train.eval_every, 200);
    ck_assert_int_eq(c.train.eval_batches, 20);
    ck_assert_uint_eq(c.train.seed, 1);
    ck_assert_uint_eq(c.train.eval_seed, 1337);
    ck_assert_int_eq(c.train.threads, 0);
    ck_assert_int_eq(c.train.checkpoint_every, 0);
    ck_assert_int_eq(c.n_plugins, 0);
    al_err e;
    ck_assert_int_eq(al_config_validate(&c, NULL, &e), 0);
}
END_TEST

START_TEST(empty_file_is_all_defaults_resolved)
{
    al_config c = load_ok("", NULL), d;
    al_config_defaults(&d);
    d.model.d_head = 32;   /* 128 / 4 */
    d.data.seed = 1;       /* train.seed */
    d.model.d_ff = 512;    /* mlp_ratio 4 * d_model 128 */
    d.model.match.base_n_layer = 4;
    d.model.match.base_d_ff = 512;
    d.model.attn_kernel = AL_ATTN_ROWS;   /* auto below AL_ATTN_FUSED_MIN_T */
    ck_assert_int_eq(memcmp(&c.model, &d.model, sizeof d.model), 0);
    ck_assert_int_eq(memcmp(&c.data, &d.data, sizeof d.data), 0);
    ck_assert_int_eq(memcmp(&c.train, &d.train, sizeof d.train), 0);
    c = load_ok("# only a comment\n---\n", NULL);
    ck_assert_int_eq(memcmp(&c.model, &d.model, sizeof d.model), 0);
}
END_TEST

START_TEST(full_file_decodes_every_section)
{
    al_config c = load_ok(
        "name: full\n"
        "description: every section\n"
        "data:\n  source: mqar\n  path: corpus.txt\n  val_fraction: 0.25\n"
        "  vocab_size: 512\n  seq_len: 128\n  num_kv_pairs: 16\n"
        "  train_examples: 5000\n  test_examples: 300\n  power_a: 0.5\n  seed: 7\n"
        "model:\n  n_layer: 2\n  d_model: 96\n  n_head: 6\n  seq_len: 32\n"
        "  mlp_ratio: 2.5\n  vocab_size: 600\n  norm_eps: 1e-6\n  rope_base: 500000\n"
        "  causal: no\n  kv_dtype: bf16\n"
        "  attention: {variant: gqa, n_kv_head: 3}\n"
        "train: {steps: 50, batch_size: 4, lr: 3e-4, min_lr: 0, warmup_steps: 5,\n"
        "        weight_decay: 0, beta1: 0.8, beta2: 0.95, grad_clip: 0, eval_every: 10,\n"
        "        eval_batches: 3, seed: 9, eval_seed: 99, threads: 2, checkpoint_every: 25}\n"
        "sweep: {model.attention.n_kv_head: [1, 2]}\n"
        "plugins: [/opt/a.so, b.so]\n", NULL);
    ck_assert_str_eq(c.data.source, "mqar");
    ck_assert_msg(absolute_ending(c.data.path, "corpus.txt"), "%s", c.data.path);
    ck_assert_double_eq(c.data.val_fraction, 0.25);
    ck_assert_int_eq(c.data.seq_len, 128);
    ck_assert_int_eq(c.data.num_kv_pairs, 16);
    ck_assert_double_eq(c.data.power_a, 0.5);
    ck_assert_uint_eq(c.data.seed, 7);
    ck_assert_int_eq(c.model.d_head, 16);
    ck_assert_int_eq(c.model.vocab_size, 600);
    ck_assert_double_eq(c.model.mlp_ratio, 2.5);
    ck_assert_double_eq(c.model.norm_eps, 1e-6);
    ck_assert_int_eq(c.model.causal, 0);
    ck_assert_str_eq(c.model.kv_dtype, "bf16");
    ck_assert_str_eq(c.model.variant, "gqa");
    ck_assert_ptr_eq(c.model.attn, al_variant_find("gqa"));
    ck_assert_double_eq(c.model.attn_set[0], 3);
    ck_assert_int_eq(c.train.steps, 50);
    ck_assert_double_eq(c.train.lr, 3e-4);
    ck_assert_double_eq(c.train.min_lr, 0);
    ck_assert_double_eq(c.train.beta1, 0.8);
    ck_assert_uint_eq(c.train.seed, 9);
    ck_assert_uint_eq(c.train.eval_seed, 99);
    ck_assert_int_eq(c.train.threads, 2);
    ck_assert_int_eq(c.train.checkpoint_every, 25);
    ck_assert_int_eq(c.n_plugins, 2);
    ck_assert_str_eq(c.plugins[0], "/opt/a.so");
    ck_assert_str_eq(c.plugins[1], "b.so");
}
END_TEST

START_TEST(derived_values_are_resolved)
{
    al_config c = load_ok("model: {d_model: 64, n_head: 2}\ntrain: {seed: 5}\n", NULL);
    ck_assert_int_eq(c.model.d_head, 32);
    ck_assert_uint_eq(c.data.seed, 5);
    ck_assert_int_eq(c.model.vocab_size, 0);   /* left to the trainer */
    c = load_ok("model: {d_model: 64, n_head: 2, d_head: 8}\ndata: {seed: 3}\n", NULL);
    ck_assert_int_eq(c.model.d_head, 8);
    ck_assert_uint_eq(c.data.seed, 3);
    /* whole numbers written as floats are integers too; quoted strings stay strings */
    c = load_ok("train: {steps: 1e3, warmup_steps: 10.0}\ndata: {path: '123'}\n", NULL);
    ck_assert_int_eq(c.train.steps, 1000);
    ck_assert_int_eq(c.train.warmup_steps, 10);
    ck_assert_msg(absolute_ending(c.data.path, "123"), "%s", c.data.path);
}
END_TEST

START_TEST(attention_shape_comes_from_the_model)
{
    al_config c = load_ok("model: {d_model: 64, n_head: 4, seq_len: 20, causal: false,\n"
                          "        attention: {variant: gqa, n_kv_head: 2}}\n", NULL);
    al_attn_shape s;
    al_config_attn_shape(&c, &s);
    ck_assert_int_eq(s.d_model, 64);
    ck_assert_int_eq(s.n_head, 4);
    ck_assert_int_eq(s.d_head, 16);
    ck_assert_int_eq(s.seq_len, 20);
    ck_assert_int_eq(s.causal, 0);
    ck_assert_float_eq(s.rope_base, 10000.0f);
    ck_assert_float_eq(s.norm_eps, 1e-5f);
    ck_assert_double_eq(s.set[0], 2);
}
END_TEST

/* ------------------------------------------------------------ the tree */

START_TEST(yaml_tree_keeps_positions_in_flow_and_block_style)
{
    al_node *t;
    al_err e;
    ck_assert_int_eq(al_yaml_parse("t.yaml", "a:\n  b: [1, 'two']\nc: {d: x}\n", &t, &e), 0);
    ck_assert_int_eq(t->kind, AL_NODE_MAP);
    ck_assert_int_eq(t->n, 2);
    ck_assert_str_eq(t->keys[1], "c");
    ck_assert_int_eq(t->key_line[1], 3);
    ck_assert_int_eq(t->key_col[1], 1);
    al_node *b = al_node_get(al_node_get(t, "a"), "b");
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(b->kind, AL_NODE_SEQ);
    ck_assert_int_eq(b->n, 2);
    ck_assert_int_eq(b->line, 2);
    ck_assert_int_eq(b->col, 6);
    ck_assert_str_eq(b->items[1]->value, "two");
    ck_assert_int_eq(b->items[1]->quoted, 1);
    ck_assert_int_eq(b->items[0]->quoted, 0);
    ck_assert_int_eq(b->items[1]->col, 10);
    al_node *d = al_node_get(al_node_get(t, "c"), "d");
    ck_assert_str_eq(d->value, "x");
    ck_assert_str_eq(d->file, "t.yaml");
    ck_assert_int_eq(d->line, 3);
    ck_assert_int_eq(d->col, 8);
    ck_assert_ptr_null(al_node_get(t, "zz"));
    al_node *copy = al_node_clone(t);
    al_node_free(t);
    ck_assert_str_eq(al_node_get(al_node_get(copy, "c"), "d")->file, "t.yaml");
    al_node_free(copy);
}
END_TEST

START_TEST(set_path_replaces_and_creates_nodes)
{
    al_node *t, *v;
    al_err e;
    ck_assert_int_eq(al_yaml_parse("t.yaml", "a: {b: 1}\n", &t, &e), 0);
    ck_assert_int_eq(al_yaml_parse("v", "[7]", &v, &e), 0);
    ck_assert_int_eq(al_node_set_path(t, "a.b", v, 0, &e), 0);
    ck_assert_int_eq(al_node_get(al_node_get(t, "a"), "b")->kind, AL_NODE_SEQ);
    ck_assert_int_eq(al_node_set_path(t, "x.y", v, 0, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "'x.y'"));
    ck_assert_int_eq(al_node_set_path(t, "x.y", v, 1, &e), 0);
    ck_assert_int_eq(al_node_get(al_node_get(t, "x"), "y")->kind, AL_NODE_SEQ);
    ck_assert_int_eq(al_node_set_path(t, "a.b.c", v, 1, &e), -1);   /* b is a sequence */
    ck_assert_ptr_nonnull(strstr(e.msg, "'a.b'"));
    ck_assert_int_eq(al_node_set_path(t, "a..b", v, 1, &e), -1);
    al_node_free(v);
    ck_assert_int_eq(al_node_get(al_node_get(t, "x"), "y")->n, 1);   /* a clone */
    al_node_free(t);
}
END_TEST

/* ------------------------------------------------------------ errors */

START_TEST(unknown_key_suggests_the_nearest)
{
    expect_error("model:\n  n_layer: 2\n  n_heads: 4\n", NULL,
                 "%F:3:3: error: unknown key 'n_heads' in 'model' (did you mean 'n_head'?)");
    expect_error("modle:\n  n_layer: 2\n", NULL,
                 "%F:1:1: error: unknown key 'modle' (did you mean 'model'?)");
    expect_error("train: {warmup: 3}\n", NULL,
                 "%F:1:9: error: unknown key 'warmup' in 'train' (did you mean 'warmup_steps'?)");
    expect_error("data: {zzzzzz: 3}\n", NULL, "%F:1:8: error: unknown key 'zzzzzz' in 'data'");
}
END_TEST

START_TEST(duplicate_key_names_the_first)
{
    expect_error("train:\n  steps: 10\n  lr: 0.1\n  steps: 20\n", NULL,
                 "%F:4:3: error: duplicate key 'steps' (first at line 2)");
    expect_error("model: {n_head: 2, n_head: 4}\n", NULL,
                 "%F:1:20: error: duplicate key 'n_head' (first at line 1)");
}
END_TEST

START_TEST(wrong_type_names_the_key)
{
    expect_error("model:\n  n_head: four\n", NULL,
                 "%F:2:11: error: 'model.n_head' must be an integer, got 'four'");
    expect_error("model:\n  n_head: 4.5\n", NULL,
                 "%F:2:11: error: 'model.n_head' must be an integer, got '4.5'");
    expect_error("model:\n  n_head: 1e12\n", NULL,
                 "%F:2:11: error: 'model.n_head' must be an integer, got '1e12' (out of range)");
    expect_error("train:\n  lr: fast\n", NULL,
                 "%F:2:7: error: 'train.lr' must be a number, got 'fast'");
    expect_error("model: {causal: maybe}\n", NULL,
                 "%F:1:17: error: 'model.causal' must be true or false, got 'maybe'");
    expect_error("train: {seed: -1}\n", NULL,
                 "%F:1:15: error: 'train.seed' must be an integer in [0, 2^64), got '-1'");
    expect_error("data: {source: txt}\n", NULL,
                 "%F:1:16: error: 'data.source' must be one of text, kjv, mqar, induction, passkey, "
                 "got 'txt' (did you mean 'text'?)");
}
END_TEST

/* train.max_memory: digits with k, M, G or T (powers of 1024); written back
 * as digits, and not at all while 0, so that configs from before the key
 * (and the trial ids made from them) read and hash as they did. */
START_TEST(max_memory_takes_units_and_is_written_only_when_set)
{
    static const struct { const char *v; uint64_t want; } ok[] = {
        {"0", 0}, {"1000", 1000}, {"4k", 4096}, {"512M", 512ull << 20}, {"8G", 8ull << 30},
        {"2T", 2ull << 40}, {"16777215T", 16777215ull << 40}};
    char set[64], *yaml = NULL;
    size_t len = 0;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        snprintf(set, sizeof set, "train.max_memory=%s", ok[i].v);
        al_config c = load_ok("", set);
        ck_assert_msg(c.train.max_memory == ok[i].want, "%s", ok[i].v);
        FILE *f = open_memstream(&yaml, &len);
        al_config_write_yaml(&c, f);
        fclose(f);
        snprintf(set, sizeof set, "max_memory: %llu\n", (unsigned long long)ok[i].want);
        ck_assert_msg(ok[i].want ? strstr(yaml, set) != NULL : strstr(yaml, "max_memory") == NULL,
                      "%s", yaml);
        free(yaml);
    }
    expect_error("train: {max_memory: 16777216T}\n", NULL,
                 "%F:1:21: error: 'train.max_memory' must be a byte count (digits, with k, M, G "
                 "or T for powers of 1024, at most 2^64 - 1), got '16777216T'");
    expect_error("train: {max_memory: 1.5G}\n", NULL,
                 "%F:1:21: error: 'train.max_memory' must be a byte count (digits, with k, M, G "
                 "or T for powers of 1024, at most 2^64 - 1), got '1.5G'");
    expect_error("train: {max_memory: -1}\n", NULL,
                 "%F:1:21: error: 'train.max_memory' must be a byte count (digits, with k, M, G "
                 "or T for powers of 1024, at most 2^64 - 1), got '-1'");
}
END_TEST

/* A number a double cannot hold is refused as written, not read as 0 or
 * Inf (strtod's ERANGE). */
START_TEST(numbers_past_a_double_are_refused_as_written)
{
    expect_error("train: {lr: 1e-400}\n", NULL, "%F:1:13: error: 'train.lr' must be a number a "
                 "double can hold, got '1e-400' (underflows)");
    expect_error("train: {lr: -2.5E+308}\n", NULL, "%F:1:13: error: 'train.lr' must be a number "
                 "a double can hold, got '-2.5E+308' (overflows)");
    expect_error("train: {steps: 1e400}\n", NULL, "%F:1:16: error: 'train.steps' must be an "
                 "integer, got '1e400' (out of range)");
    al_config c = load_ok("train: {lr: 1e-300}\n", NULL);   /* small, but a double */
    ck_assert(c.train.lr == 1e-300);
}
END_TEST

START_TEST(quoted_number_is_a_string)
{
    expect_error("model:\n  n_head: \"4\"\n", NULL,
                 "%F:2:11: error: 'model.n_head' must be an integer, got \"4\" (quoted, so a string)");
    expect_error("model: {causal: 'true'}\n", NULL,
                 "%F:1:17: error: 'model.causal' must be true or false, got \"true\" "
                 "(quoted, so a string)");
}
END_TEST

START_TEST(node_kind_mismatch_names_the_key)
{
    expect_error("model:\n  n_head: {a: 1}\n", NULL,
                 "%F:2:11: error: 'model.n_head' must be an integer, got a mapping");
    expect_error("model: 4\n", NULL, "%F:1:8: error: 'model' must be a mapping, got a scalar");
    expect_error("model: {attention: [gqa]}\n", NULL,
                 "%F:1:20: error: 'model.attention' must be a mapping such as "
                 "{variant: gqa, n_kv_head: 2}, got a sequence");
    expect_error("plugins: a.so\n", NULL,
                 "%F:1:10: error: 'plugins' must be a sequence of paths, got a scalar");
    expect_error("- a\n- b\n", NULL,
                 "%F:1:1: error: the top level must be a mapping, got a sequence");
}
END_TEST

START_TEST(malformed_yaml_uses_the_libyaml_mark)
{
    expect_error("model:\n  n_head: 4\n  d_model: a: b\n", NULL,
                 "%F:3:13: error: mapping values are not allowed in this context");
    expect_error("model: {n_head: 4\n", NULL,
                 "%F:2:1: error: did not find expected ',' or '}'");
}
END_TEST

START_TEST(alias_is_rejected)
{
    expect_error("base: &b 4\nmodel:\n  n_head: *b\n", NULL,
                 "%F:3:11: error: aliases ('*b') are not supported; write the value out");
}
END_TEST

START_TEST(bad_variant_suggests_a_registered_name)
{
    expect_error("model:\n  attention:\n    variant: gqa2\n", NULL,
                 "%F:3:14: error: unknown variant 'gqa2' in 'model.attention.variant' "
                 "(did you mean 'gqa'?; a plugin's variant needs --plugin PATH or "
                 "'plugins: [PATH]')");
    /* no close name: list the registered ones */
    al_config c;
    al_err e;
    char *path, want[4200];
    ck_assert_int_eq(load("model: {attention: {variant: linformer}}\n", NULL, &c, &e, &path), -1);
    snprintf(want, sizeof want, "%s:1:30: error: unknown variant 'linformer' in "
             "'model.attention.variant' (known: mha, mqa, gqa", path);
    ck_assert_msg(strncmp(e.msg, want, strlen(want)) == 0, "%s", e.msg);
    drop(path);
}
END_TEST

START_TEST(variant_settings_are_checked_against_the_variant)
{
    expect_error("model:\n  attention: {variant: gqa}\n", NULL,
                 "%F:2:14: error: 'model.attention.n_kv_head' is required for variant 'gqa'");
    expect_error("model:\n  attention: {variant: mha, n_kv_head: 2}\n", NULL,
                 "%F:2:29: error: unknown key 'n_kv_head' for variant 'mha' (it has no settings)");
    expect_error("model:\n  attention: {variant: gqa, n_kv_heads: 2}\n", NULL,
                 "%F:2:29: error: unknown key 'n_kv_heads' for variant 'gqa' "
                 "(did you mean 'n_kv_head'?)");
    expect_error("model:\n  attention: {variant: gqa, n_kv_head: 1.5}\n", NULL,
                 "%F:2:40: error: 'model.attention.n_kv_head' must be an integer, got '1.5'");
}
END_TEST

START_TEST(variant_check_points_at_the_setting)
{
    expect_error("model:\n  n_head: 8\n  d_model: 256\n  attention:\n"
                 "    variant: gqa\n    n_kv_head: 3\n", NULL,
                 "%F:6:16: error: 'n_kv_head' (3) must divide 'n_head' (8)");
}
END_TEST

START_TEST(impossible_shapes_are_errors)
{
    expect_error("model:\n  d_head: 33\n", NULL,
                 "%F:2:11: error: 'model.d_head' (33) must be even for RoPE");
    expect_error("model:\n  n_layer: 0\n", NULL,
                 "%F:2:12: error: 'model.n_layer' (0) must be positive");
    expect_error("train: {batch_size: -2}\n", NULL,
                 "%F:1:21: error: 'train.batch_size' (-2) must be positive");
    expect_error("model: {d_model: 100, n_head: 3}\n", NULL,
                 "%F:1:31: error: 'model.d_model' (100) is not divisible by 'model.n_head' (3); "
                 "set 'model.d_head'");
    expect_error("train:\n  steps: 10\n  warmup_steps: 20\n", NULL,
                 "%F:3:17: error: 'train.warmup_steps' (20) must be at most 'train.steps' (10)");
    expect_error("train: {beta2: 1}\n", NULL, "%F:1:16: error: 'train.beta2' (1) must be in [0, 1)");
    expect_error("data: {val_fraction: 0}\n", NULL,
                 "%F:1:22: error: 'data.val_fraction' (0) must be in (0, 1)");
    expect_error("train: {lr: 0}\n", NULL, "%F:1:13: error: 'train.lr' (0) must be positive");
    expect_error("train: {threads: -1}\n", NULL,
                 "%F:1:18: error: 'train.threads' (-1) must be >= 0");
}
END_TEST

START_TEST(validate_without_a_tree_names_the_file)
{
    al_config c;
    al_err e;
    al_config_defaults(&c);
    c.model.n_head = 0;
    ck_assert_int_eq(al_config_validate(&c, NULL, &e), -1);
    ck_assert_str_eq(e.msg, "config: error: 'model.n_head' (0) must be positive");
    al_config_defaults(&c);
    snprintf(c.file, sizeof c.file, "x.yaml");
    c.model.attn = al_variant_find("gqa");
    c.model.attn_set[0] = 3;
    ck_assert_int_eq(al_config_validate(&c, NULL, &e), -1);
    ck_assert_str_eq(e.msg, "x.yaml: error: 'n_kv_head' (3) must divide 'n_head' (4)");
    c.model.attn_set[0] = 2;
    ck_assert_int_eq(al_config_validate(&c, NULL, &e), 0);
}
END_TEST

START_TEST(missing_file_is_an_error)
{
    al_config c;
    al_err e;
    ck_assert_int_eq(al_config_load("/nonexistent/exp.yaml", NULL, 0, &c, &e), -1);
    ck_assert_str_eq(e.msg, "/nonexistent/exp.yaml: cannot open: No such file or directory");
}
END_TEST

/* ------------------------------------------------------------ --set */

START_TEST(set_overrides_a_scalar)
{
    al_config c = load_ok("model:\n  n_head: 4\n", "model.n_head=8");
    ck_assert_int_eq(c.model.n_head, 8);
    ck_assert_int_eq(c.model.d_head, 16);
    c = load_ok("model: {n_head: 4}\n", "train.steps=10");   /* no train mapping */
    ck_assert_int_eq(c.train.steps, 10);
    ck_assert_int_eq(c.train.warmup_steps, 10);   /* the default, clamped to steps */
    ck_assert_int_eq(c.model.n_head, 4);
}
END_TEST

START_TEST(set_applies_assignments_in_order)
{
    char *path = write_cfg("train: {steps: 100, warmup_steps: 5}\n");
    const char *sets[] = {"train.steps=10", "train.steps=30", "data.path=a b.txt"};
    al_config c;
    al_err e;
    ck_assert_int_eq(al_config_load(path, sets, 3, &c, &e), 0);
    ck_assert_int_eq(c.train.steps, 30);
    char cwd[4096], want[4200];   /* --set's path: the working directory's */
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    snprintf(want, sizeof want, "%s/a b.txt", cwd);
    ck_assert_str_eq(c.data.path, want);
    ck_assert_str_eq(c.file, path);
    drop(path);
}
END_TEST

START_TEST(set_replaces_the_attention_subtree)
{
    const char *file = "model:\n  attention:\n    variant: gqa\n    n_kv_head: 2\n";
    al_config c = load_ok(file, "model.attention={variant: mha}");
    ck_assert_str_eq(c.model.variant, "mha");
    ck_assert_ptr_eq(c.model.attn, al_variant_find("mha"));
    c = load_ok(file, "model.attention.n_kv_head=4");
    ck_assert_str_eq(c.model.variant, "gqa");
    ck_assert_double_eq(c.model.attn_set[0], 4);
    expect_error(file, "model.attention.variant=mha",
                 "%F:4:5: error: unknown key 'n_kv_head' for variant 'mha' (it has no settings)");
}
END_TEST

START_TEST(set_errors_point_into_the_assignment)
{
    expect_error("model: {n_head: 4}\n", "model.nope=1",
                 "--set:1:7: error: unknown key 'nope' in 'model'");
    expect_error("", "model.n_head=four",
                 "--set:1:14: error: 'model.n_head' must be an integer, got 'four'");
    expect_error("", "model.attention={variant: gqa, n_kv_head: 3}",
                 "--set:1:43: error: 'n_kv_head' (3) must divide 'n_head' (4)");
    expect_error("", "model.attention={variant: gqa",
                 "--set:1:30: error: did not find expected ',' or '}'");
    expect_error("", "model.n_head", "--set:1:1: error: expected key.path=value, got 'model.n_head'");
    expect_error("", "=4", "--set:1:1: error: empty key path in '=4'");
    expect_error("model: {n_head: 4}\n", "model.n_head.x=1",
                 "--set:1:7: error: cannot set 'model.n_head.x': 'model.n_head' is a scalar, "
                 "not a mapping");
}
END_TEST

/* ------------------------------------------------------------ writing */

static char *to_yaml(const al_config *c)
{
    char *buf;
    size_t n;
    FILE *f = open_memstream(&buf, &n);
    ck_assert_ptr_nonnull(f);
    al_config_write_yaml(c, f);
    fclose(f);
    return buf;
}

static void assert_same_config(const al_config *a, const al_config *b)
{
    ck_assert_int_eq(memcmp(&a->data, &b->data, sizeof a->data), 0);
    ck_assert_int_eq(memcmp(&a->model, &b->model, sizeof a->model), 0);
    ck_assert_int_eq(memcmp(&a->train, &b->train, sizeof a->train), 0);
    ck_assert_int_eq(a->n_plugins, b->n_plugins);
    ck_assert_int_eq(memcmp(a->plugins, b->plugins, sizeof a->plugins), 0);
}

START_TEST(written_yaml_loads_back_identical)
{
    al_config a = load_ok(
        "data: {source: kjv, path: \"/tmp/a b\\\"c: #x.txt\", val_fraction: 0.3,\n"
        "       power_a: 0.123456789012345, seed: 18446744073709551615}\n"
        "model: {n_layer: 3, d_model: 96, n_head: 6, mlp_ratio: 2.6666666666666665,\n"
        "        norm_eps: 1e-6, rope_base: 500000, causal: no, kv_dtype: bf16,\n"
        "        vocab_size: 77, attention: {variant: gqa, n_kv_head: 3}}\n"
        "train: {steps: 300, lr: 3e-4, min_lr: 0, warmup_steps: 30, beta2: 0.95,\n"
        "        grad_clip: 0, threads: 2, seed: 42, checkpoint_every: 100}\n"
        "plugins: [/x/y.so, \"z w.so\", 'true']\n", NULL);
    char *text = to_yaml(&a);
    ck_assert_ptr_nonnull(strstr(text, "d_head: 16\n"));
    ck_assert_ptr_nonnull(strstr(text, "  attention:\n    variant: gqa\n    n_kv_head: 3\n"));
    ck_assert_ptr_nonnull(strstr(text, "causal: false\n"));
    ck_assert_ptr_nonnull(strstr(text, "lr: 0.0003\n"));
    ck_assert_ptr_nonnull(strstr(text, "norm_eps: 1.0e-06\n"));
    ck_assert_ptr_nonnull(strstr(text, "plugins:\n  - /x/y.so\n"));
    al_config b = load_ok(text, NULL);
    assert_same_config(&a, &b);
    char *again = to_yaml(&b);
    ck_assert_str_eq(text, again);
    free(text);
    free(again);
    al_config_defaults(&a);
    text = to_yaml(&a);
    b = load_ok(text, NULL);
    a.model.d_head = 32;
    a.data.seed = 1;
    a.model.d_ff = a.model.match.base_d_ff = 512;
    a.model.match.base_n_layer = 4;
    a.model.attn_kernel = AL_ATTN_ROWS;   /* auto at seq_len 64 */
    assert_same_config(&a, &b);
    ck_assert_ptr_null(strstr(text, "plugins"));
    free(text);
}
END_TEST

/* ------------------------------------------------------------ JSON */

static json_t *parse_json(char *text)
{
    json_error_t je;
    json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    ck_assert_msg(o != NULL, "%s: %s", je.text, text);
    free(text);
    return o;
}

/* o holds every row of table t that JSON holds (not the informational
 * ones; built: not match_params either), once, with its key type's JSON
 * type, and nothing else. */
static void expect_rows(json_t *o, const key_spec *t, int built)
{
    size_t rows = 0;
    ck_assert(json_is_object(o));
    for (; t->key; t++) {
        if (t->type == K_IGNORE || (built && t->type == K_MATCH)) continue;
        if (t->type == K_LATTN) continue;   /* written instead of attention, with a list */
        json_t *v = json_object_get(o, t->key);
        /* a checkpoint says kv_share (rope_fraction, rope_scaling) only when
         * it shares (scales), so that one without reads as every checkpoint
         * before the key */
        if (built && !v && t->ckpt == CK_NON_DEFAULT) continue;
        ck_assert_msg(v != NULL, "no '%s'", t->key);
        rows++;
        switch (t->type) {
        case K_INT: case K_U64: ck_assert_msg(json_is_integer(v), "%s", t->key); break;
        case K_DOUBLE: ck_assert_msg(json_is_real(v), "%s", t->key); break;
        case K_BOOL: ck_assert_msg(json_is_boolean(v), "%s", t->key); break;
        case K_STRING: ck_assert_msg(json_is_string(v), "%s", t->key); break;
        case K_MAP: expect_rows(v, t->sub, built); break;
        case K_ATTN: ck_assert(json_is_string(json_object_get(v, "variant"))); break;
        case K_PLUGINS: ck_assert(json_is_array(v)); break;
        case K_MATCH: ck_assert(json_is_false(v) || json_is_object(v)); break;
        }
    }
    ck_assert_uint_eq(json_object_size(o), rows);
}

static const char *const matched_gqa =
    "data: {source: mqar, vocab_size: 64, seed: 7}\n"
    "model: {n_layer: 2, d_model: 96, n_head: 6, norm_eps: 1e-6, causal: no,\n"
    "        kv_dtype: bf16, attention: {variant: gqa, n_kv_head: 3},\n"
    "        match_params: {to: {variant: mha}, by: d_ff}}\n"
    "train: {steps: 300, lr: 3e-4, warmup_steps: 30, init_convert: svd}\n"
    "plugins: [/x/y.so, \"z w.so\"]\n";

START_TEST(json_holds_one_entry_per_key_of_the_tables)
{
    al_config c = load_ok(matched_gqa, NULL);
    json_t *all = parse_json(al_config_json(&c)), *model = parse_json(al_config_model_json(&c.model));
    expect_rows(all, al_cfg_top_keys, 0);
    expect_rows(model, al_cfg_model_keys, 1);
    /* the file's model is the one given; the built one has the matched d_ff */
    json_t *given = json_object_get(all, "model"), *mt = json_object_get(given, "match_params");
    ck_assert_int_eq(json_integer_value(json_object_get(given, "d_ff")), 384);
    ck_assert_int_eq(json_integer_value(json_object_get(model, "d_ff")), c.model.d_ff);
    ck_assert_int_eq(json_integer_value(json_object_get(mt, "d_ff")), c.model.d_ff);
    ck_assert_int_ne(c.model.d_ff, 384);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(mt, "to"), "variant")),
                     "mha");
    json_t *a = json_object_get(model, "attention");
    ck_assert_str_eq(json_string_value(json_object_get(a, "variant")), "gqa");
    ck_assert(json_is_integer(json_object_get(a, "n_kv_head")));
    ck_assert_int_eq(json_integer_value(json_object_get(a, "n_kv_head")), 3);
    ck_assert_str_eq(json_string_value(json_object_get(model, "kv_dtype")), "bf16");
    ck_assert(json_is_false(json_object_get(model, "causal")));
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(all, "plugins"), 1)),
                     "z w.so");
    /* the checkpoint loader's list of keys is the same */
    const char *k;
    json_t *v;
    json_object_foreach(model, k, v) ck_assert_msg(al_config_model_json_has(k), "%s", k);
    ck_assert(!al_config_model_json_has("match_params"));
    ck_assert(!al_config_model_json_has("n_heads"));
    json_decref(all);
    json_decref(model);
}
END_TEST

/* JSON is YAML: the JSON of a config decodes back to the same config. */
static void expect_json_round_trip(const al_config *a)
{
    char *text = al_config_json(a);
    al_node *root;
    al_config b;
    al_err e;
    ck_assert_msg(al_yaml_parse("json", text, &root, &e) == 0, "%s", e.msg);
    ck_assert_msg(al_config_decode(root, &b, &e) == 0, "%s: %s", e.msg, text);
    assert_same_config(a, &b);
    al_node_free(root);
    free(text);
}

START_TEST(json_reads_back_as_the_same_config)
{
    al_config c = load_ok(matched_gqa, NULL);
    expect_json_round_trip(&c);
    c = load_ok("model: {n_layer: 8, d_model: 128, n_head: 8, attention: {variant: mqa},\n"
                "        match_params: {to: {variant: mha}, by: n_layer}}\n", NULL);
    ck_assert_int_eq(c.model.n_layer, 9);   /* 8 + 8 * 28,672 / 168,192 */
    expect_json_round_trip(&c);
    c = load_ok("", NULL);
    expect_json_round_trip(&c);
    /* beyond jansson's integers a seed goes as its digits */
    c.data.seed = UINT64_MAX;
    json_t *all = parse_json(al_config_json(&c));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(all, "data"), "seed")),
                     "18446744073709551615");
    json_decref(all);
}
END_TEST

START_TEST(schema_lists_every_key_with_its_default)
{
    char *buf;
    size_t n;
    FILE *f = open_memstream(&buf, &n);
    al_config_print_schema(f);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "| `model.n_head` | 4 | "));
    ck_assert_ptr_nonnull(strstr(buf, "| `train.lr` | 1e-3 | "));
    ck_assert_ptr_nonnull(strstr(buf, "| `data.source` | kjv | "));
    ck_assert_ptr_nonnull(strstr(buf, "| `model.attention.variant` | mha | "));
    ck_assert_ptr_nonnull(strstr(buf, "| `model.attention.n_kv_head` | required | gqa: "));
    int rows = 0;
    for (char *p = buf; (p = strstr(p, "\n| `")); p++) rows++;
    ck_assert_int_ge(rows + 1, 10 + 12 + 15 + 1);   /* data, model (+variant), train */
    free(buf);
}
END_TEST

/* Odd inputs: each either loads or fails with one line, never crashes
 * (and, under ASan, never leaks). */
START_TEST(odd_inputs_fail_cleanly)
{
    static const char *const inputs[] = {
        "[", "{", "a: [", "\t", "\xff\xfe", "model: !!str 4\n", "x: &a 1\n",
        "a: 1\n---\nb: 2\n", "? [a]\n: 1\n", "model: {attention: {variant: [x]}}\n",
        "model: {attention: ~}\n", "train:\n", "plugins: [a, b, c, d, e, f, g, h, i]\n",
        "plugins: [[a]]\n", "data: {path: |\n  x\n}\n", "'': 1\n", "sweep: *x\n",
        "model: {n_head: 99999999999999999999}\n", "train: {lr: 1e999}\n",
        "train: {lr: nan}\n", "train: {seed: 99999999999999999999}\n",
    };
    for (size_t i = 0; i < sizeof inputs / sizeof *inputs; i++) {
        al_config c;
        al_err e;
        char *path;
        int rc = load(inputs[i], NULL, &c, &e, &path);
        ck_assert_msg(rc == 0 || (rc == -1 && e.msg[0] && !strchr(e.msg, '\n')),
                      "input %zu: rc %d, '%s'", i, rc, e.msg);
        drop(path);
    }
    char deep[1000];
    for (int i = 0; i < 400; i++) deep[i] = '[', deep[400 + i] = ']';
    deep[800] = 0;
    al_node *t;
    al_err e;
    ck_assert_int_eq(al_yaml_parse("deep", deep, &t, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "nesting deeper than"));
}
END_TEST

/* ------------------------------------------------------------ match_params */

/* Parameters of a model counted from its shape alone (README "The model"),
 * not through the model's tensor table: V D + L (2 D + attn + 2 D F) + D. */
static long count_by_hand(const char *variant, int L, int F, int D, int H, int dh, int V,
                          int G, int dc, int dr, int dq)
{
    long Hd = (long)H * dh, attn;
    if (strcmp(variant, "mla") == 0) {
        long qin = dq ? dq : D;
        attn = (dq ? (long)dq * D + dq + Hd * dq : Hd * D) + H * dr * qin + (long)dc * D + dc +
               (long)dr * D + 2 * Hd * dc + D * Hd;
    } else {
        attn = (Hd + 2L * G * dh) * D + D * Hd;
    }
    return (long)V * D + L * (2L * D + attn + 2L * D * F) + D;
}

typedef struct shape_case {
    const char *attention;   /* YAML */
    const char *variant;
    int G, dc, dr, dq;
} shape_case;

static const shape_case shapes[] = {
    {"{variant: mha}", "mha", 8, 0, 0, 0},
    {"{variant: mqa}", "mqa", 1, 0, 0, 0},
    {"{variant: gqa, n_kv_head: 2}", "gqa", 2, 0, 0, 0},
    {"{variant: gqa, n_kv_head: 4}", "gqa", 4, 0, 0, 0},
    {"{variant: mla, d_latent: 16, d_rope: 8}", "mla", 0, 16, 8, 0},
    {"{variant: mla, d_latent: 96, d_rope: 8, d_q_latent: 32}", "mla", 0, 96, 8, 32},
};

/* For every built-in variant and both modes, matched to every other: the
 * resolved value is the one whose hand-counted parameter count is closest
 * to the target's (ties to the smaller), found by trying every value. */
START_TEST(match_params_reaches_the_closest_count)
{
    const int D = 128, H = 8, dh = 16, L0 = 2, F0 = 512, V = 256;
    int n = (int)(sizeof shapes / sizeof *shapes);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            const shape_case *a = &shapes[i], *b = &shapes[j];
            long target = count_by_hand(b->variant, L0, F0, D, H, dh, V, b->G, b->dc, b->dr, b->dq);
            for (int by = 0; by < 2; by++) {
                char text[1024];
                snprintf(text, sizeof text,
                         "data: {source: text, path: x.txt}\n"
                         "model: {n_layer: %d, d_model: %d, n_head: %d, d_head: %d,\n"
                         "        attention: %s, match_params: {to: %s, by: %s}}\n",
                         L0, D, H, dh, a->attention, b->attention, by ? "n_layer" : "d_ff");
                al_config c = load_ok(text, NULL);
                long best = -1, best_gap = 0;
                for (int x = by ? 1 : 8; x <= (by ? 64 : 8192); x += by ? 1 : 8) {
                    long p = count_by_hand(a->variant, by ? x : L0, by ? F0 : x, D, H, dh, V,
                                           a->G, a->dc, a->dr, a->dq);
                    long gap = labs(p - target);
                    if (best < 0 || gap < best_gap) best = x, best_gap = gap;
                }
                if (i == j) best = by ? L0 : F0;   /* the same attention: nothing to change */
                int got = by ? c.model.n_layer : c.model.d_ff;
                ck_assert_msg(got == best, "%s to %s by %s: got %d, closest is %ld",
                              a->attention, b->attention, by ? "n_layer" : "d_ff", got, best);
                ck_assert_int_eq(by ? c.model.d_ff : c.model.n_layer, by ? F0 : L0);
                ck_assert_uint_eq(c.model.match.params_to, (size_t)target);
                ck_assert_uint_eq(c.model.match.params,
                                  (size_t)count_by_hand(a->variant, c.model.n_layer,
                                                        c.model.d_ff, D, H, dh, V, a->G, a->dc,
                                                        a->dr, a->dq));
                ck_assert_int_eq(c.model.match.base_n_layer, L0);
                ck_assert_int_eq(c.model.match.base_d_ff, F0);
            }
        }
    }
}
END_TEST

/* Written out, a matched config names the shape as given, the match, and
 * what it gave; it reads back to the same config, and a stale written
 * value is an error at its line. */
START_TEST(match_params_round_trips_and_checks_what_it_wrote)
{
    al_config a = load_ok("model: {n_layer: 2, d_model: 128, n_head: 8, d_head: 16,\n"
                          "  attention: {variant: mqa},\n"
                          "  match_params: {to: {variant: mha}, by: d_ff}}\n", NULL);
    ck_assert_int_eq(a.model.d_ff, 624);   /* 369,280 + 2 * 2 * 128 * 112 = 426,624 */
    ck_assert_uint_eq(a.model.match.params, 426624);
    ck_assert_uint_eq(a.model.match.params_to, 426624);
    char *text = to_yaml(&a);
    ck_assert_ptr_nonnull(strstr(text, "  n_layer: 2\n"));
    ck_assert_ptr_nonnull(strstr(text, "  d_ff: 512\n"));   /* as given */
    ck_assert_ptr_nonnull(strstr(text, "  match_params:\n    to:\n      variant: mha\n"
                                       "    by: d_ff\n"));
    ck_assert_ptr_nonnull(strstr(text, "    d_ff: 624\n    params: 426624\n    params_to: 426624\n"));
    al_config b = load_ok(text, NULL);
    assert_same_config(&a, &b);
    char *again = to_yaml(&b);
    ck_assert_str_eq(text, again);
    free(again);
    char *stale = strdup(text), *p = strstr(stale, "    d_ff: 624");
    memcpy(p, "    d_ff: 632", 13);
    int line = 1;
    for (char *q = stale; q < p; q++) line += *q == '\n';
    char want[256];
    snprintf(want, sizeof want, "%%F:%d:11: error: 'model.match_params.d_ff' says what the "
             "match gave when this file was written, but it now gives 624: the model "
             "changed; remove the written values (n_layer, d_ff, params, params_to) to match "
             "afresh", line);
    expect_error(stale, NULL, want);
    free(stale), free(text);
    /* off is the default and can be said */
    al_config c = load_ok("model: {match_params: off}\n", NULL);
    ck_assert_int_eq(c.model.match.by, AL_MATCH_NONE);
    ck_assert_int_eq(c.model.d_ff, 512);
}
END_TEST

START_TEST(bad_match_params_name_the_place)
{
    expect_error("model:\n  match_params: {to: {variant: mha}, by: width}\n", NULL,
                 "%F:2:42: error: 'model.match_params.by' must be one of d_ff, n_layer, got "
                 "'width'");
    expect_error("model:\n  match_params: {to: {variant: mhx}}\n", NULL,
                 "%F:2:32: error: unknown variant 'mhx' in 'model.match_params.to.variant' "
                 "(did you mean 'mha'?; a plugin's variant needs --plugin PATH or 'plugins: "
                 "[PATH]')");
    expect_error("model:\n  match_params: {by: d_ff}\n", NULL,
                 "%F:2:17: error: 'model.match_params.to' is required: the attention to "
                 "match, e.g. {variant: mha}");
    expect_error("model:\n  match_params: {to: {variant: mha}, wide: 1}\n", NULL,
                 "%F:2:38: error: unknown key 'wide' in 'model.match_params'");
    expect_error("model:\n  match_params: yes\n", NULL,
                 "%F:2:17: error: 'model.match_params' must be a mapping such as {to: "
                 "{variant: mha}, by: d_ff}, or off; got a scalar");
    /* a tiny MLP cannot give back what a much larger attention adds */
    expect_error("model:\n  d_model: 16\n  n_head: 2\n  d_head: 8\n  mlp_ratio: 0.25\n"
                 "  attention: {variant: mha}\n  match_params: {to: {variant: mqa}}\n", NULL,
                 "%F:7:17: error: 'model.match_params': matching 7824 parameters by d_ff "
                 "needs d_ff -4.0, outside [8, 1048576]");
    expect_error("model:\n  match_params: {to: {variant: gqa, n_kv_head: 3}}\n", NULL,
                 "%F:2:22: error: 'model.match_params.to': 'n_kv_head' (3) must divide "
                 "'n_head' (4)");
}
END_TEST

START_TEST(test_fraction_is_checked_against_val_fraction)
{
    al_config c = load_ok("", NULL);
    ck_assert_double_eq(c.data.test_fraction, 0.05);
    c = load_ok("data: {test_fraction: 0}\n", NULL);
    ck_assert_double_eq(c.data.test_fraction, 0.0);
    expect_error("data: {test_fraction: 1}\n", NULL,
                 "%F:1:23: error: 'data.test_fraction' (1) must be in [0, 1)");
    expect_error("data: {val_fraction: 0.5, test_fraction: 0.5}\n", NULL,
                 "%F:1:42: error: 'data.val_fraction' + 'data.test_fraction' (0.5 + 0.5) "
                 "must leave some text to train on");
}
END_TEST

/* Keys added after runs existed (key_spec.quiet) are written only when
 * they differ from their default, so that a config that does not use them
 * writes, hashes and resumes as it did before they existed; one that does
 * writes them and reads them back. */
static char *written(const al_config *c)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    al_config_write_yaml(c, f);
    fclose(f);
    return text;
}

START_TEST(quiet_keys_are_written_only_away_from_their_default)
{
    al_config c;
    al_config_defaults(&c);
    char *plain = written(&c);
    ck_assert_msg(!strstr(plain, "kv_quant_group") && !strstr(plain, "kv_quant_residual"),
                  "%s", plain);
    c.model.kv_quant_group = 16;
    char *set = written(&c);
    ck_assert_msg(strstr(set, "kv_quant_group: 16\n") && !strstr(set, "kv_quant_residual"),
                  "%s", set);
    free(plain), free(set);
}
END_TEST

Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("config");
    tcase_add_test(tc, defaults_are_the_documented_values);
    tcase_add_test(tc, quiet_keys_are_written_only_away_from_their_default);
    tcase_add_test(tc, data_source_defaults_to_kjv_or_to_text_for_a_lone_path);
    tcase_add_test(tc, empty_file_is_all_defaults_resolved);
    tcase_add_test(tc, full_file_decodes_every_section);
    tcase_add_test(tc, derived_values_are_resolved);
    tcase_add_test(tc, attention_shape_comes_from_the_model);
    tcase_add_test(tc, yaml_tree_keeps_positions_in_flow_and_block_style);
    tcase_add_test(tc, set_path_replaces_and_creates_nodes);
    tcase_add_test(tc, unknown_key_suggests_the_nearest);
    tcase_add_test(tc, duplicate_key_names_the_first);
    tcase_add_test(tc, wrong_type_names_the_key);
    tcase_add_test(tc, quoted_number_is_a_string);
    tcase_add_test(tc, node_kind_mismatch_names_the_key);
    tcase_add_test(tc, malformed_yaml_uses_the_libyaml_mark);
    tcase_add_test(tc, alias_is_rejected);
    tcase_add_test(tc, bad_variant_suggests_a_registered_name);
    tcase_add_test(tc, variant_settings_are_checked_against_the_variant);
    tcase_add_test(tc, variant_check_points_at_the_setting);
    tcase_add_test(tc, impossible_shapes_are_errors);
    tcase_add_test(tc, validate_without_a_tree_names_the_file);
    tcase_add_test(tc, missing_file_is_an_error);
    tcase_add_test(tc, set_overrides_a_scalar);
    tcase_add_test(tc, set_applies_assignments_in_order);
    tcase_add_test(tc, set_replaces_the_attention_subtree);
    tcase_add_test(tc, set_errors_point_into_the_assignment);
    tcase_add_test(tc, written_yaml_loads_back_identical);
    tcase_add_test(tc, json_holds_one_entry_per_key_of_the_tables);
    tcase_add_test(tc, json_reads_back_as_the_same_config);
    tcase_add_test(tc, schema_lists_every_key_with_its_default);
    tcase_add_test(tc, odd_inputs_fail_cleanly);
    tcase_add_test(tc, match_params_reaches_the_closest_count);
    tcase_add_test(tc, match_params_round_trips_and_checks_what_it_wrote);
    tcase_add_test(tc, bad_match_params_name_the_place);
    tcase_add_test(tc, test_fraction_is_checked_against_val_fraction);
    tcase_add_test(tc, max_memory_takes_units_and_is_written_only_when_set);
    tcase_add_test(tc, numbers_past_a_double_are_refused_as_written);
    suite_add_tcase(s, tc);
    return s;
}
