/*
 * test_checkpoint.c - model checkpoints and resumable training: a round trip
 * for every built-in variant, the config stored by setting name, every kind
 * of mismatch as a clear error, a fuzzed loader that never crashes, and a
 * resumed run that is bit-identical to one never interrupted.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "al_checkpoint.h"
#include "al_kvcache.h"
#include "al_config_io.h"
#include "config_keys.h"
#include "al_optim.h"
#include "al_registry.h"
#include "al_safetensors.h"
#include "al_test.h"
#include "al_test_model.h"
#include "al_train.h"

/* A tiny model of variant v with weights from seed; opt >= 0 sets optional
 * setting opt to 4. Returns 0, or -1 when the variant rejects that. */
static int tiny_model(al_model *m, const al_variant *v, int opt, uint64_t seed)
{
    al_model_config c;
    al_err e;
    ck_assert_int_eq(al_test_tiny_config(&c, v, 2, 16, 4, 4, 8, 256), 0);
    if (opt >= 0) c.attn_set[opt] = 4;
    if (al_model_init(m, &c, &e) != 0) return -1;
    al_model_init_weights(m, seed);
    return 0;
}

static void expect_same_model(const al_model *a, const al_model *b)
{
    const al_model_config *x = &a->cfg, *y = &b->cfg;
    ck_assert_int_eq(x->n_layer, y->n_layer);
    ck_assert_int_eq(x->d_model, y->d_model);
    ck_assert_int_eq(x->n_head, y->n_head);
    ck_assert_int_eq(x->d_head, y->d_head);
    ck_assert_int_eq(x->seq_len, y->seq_len);
    ck_assert_int_eq(x->vocab_size, y->vocab_size);
    ck_assert(x->mlp_ratio == y->mlp_ratio && x->norm_eps == y->norm_eps &&
              x->rope_base == y->rope_base);
    ck_assert_int_eq(x->causal, y->causal);
    ck_assert_ptr_eq(x->attn, y->attn);
    ck_assert_str_eq(x->variant, y->variant);
    for (int j = 0; j < al_variant_n_settings(x->attn); j++)
        ck_assert(x->attn_set[j] == y->attn_set[j]);
    ck_assert_int_eq(a->n_tensors, b->n_tensors);
    for (int i = 0; i < a->n_tensors; i++) ck_assert_str_eq(a->tensors[i].name, b->tensors[i].name);
    ck_assert_uint_eq(a->n_params, b->n_params);
    ck_assert_mem_eq(a->params, b->params, a->n_params * sizeof(float));
}

START_TEST(save_then_load_round_trips_every_builtin_variant)
{
    char *dir = al_test_tmpdir(), path[4200];
    int cases = 0;
    for (int i = 0; i < al_variant_count(); i++) {
        const al_variant *v = al_variant_at(i);
        for (int opt = -1; opt < al_variant_n_settings(v); opt++) {
            if (opt >= 0 && v->settings[opt].required) continue;
            al_model m, back;
            if (tiny_model(&m, v, opt, 7 + i) != 0) continue;
            m.cfg.causal = (opt + i) & 1;   /* both values of the flag travel */
            snprintf(path, sizeof path, "%s/%s_%d.safetensors", dir, v->name, opt);
            al_err e;
            long step = -1;
            ck_assert_msg(al_checkpoint_save(path, &m, 123, &e) == 0, "%s", e.msg);
            ck_assert_msg(al_checkpoint_load(path, &back, &step, &e) == 0, "%s: %s", v->name, e.msg);
            ck_assert_int_eq(step, 123);
            expect_same_model(&m, &back);
            al_model_free(&m);
            al_model_free(&back);
            cases++;
        }
    }
    ck_assert_int_ge(cases, 5);   /* mha, mqa, gqa, mla, mla with d_q_latent */
    free(dir);
}
END_TEST

START_TEST(metadata_holds_the_config_by_setting_name)
{
    char *dir = al_test_tmpdir(), path[4200];
    al_model m;
    const al_variant *mla = al_variant_find("mla");
    ck_assert_int_eq(tiny_model(&m, mla, al_variant_setting_index(mla, "d_q_latent"), 1), 0);
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    al_err e;
    ck_assert_int_eq(al_checkpoint_save(path, &m, 5, &e), 0);
    al_st_file f;
    ck_assert_int_eq(al_st_read(path, &f, &e), 0);
    json_t *c = json_loads(al_st_meta(&f, "attnlab.config"), 0, NULL);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(json_integer_value(json_object_get(c, "n_layer")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(c, "d_ff")), 32);
    ck_assert(json_real_value(json_object_get(c, "norm_eps")) == 1e-5);
    ck_assert(json_is_true(json_object_get(c, "causal")));
    json_t *a = json_object_get(c, "attention");
    ck_assert_str_eq(json_string_value(json_object_get(a, "variant")), "mla");
    ck_assert_int_eq(json_integer_value(json_object_get(a, "d_q_latent")), 4);
    ck_assert_int_eq(json_integer_value(json_object_get(a, "d_latent")), (int)m.cfg.attn_set[0]);
    ck_assert(json_is_integer(json_object_get(a, "d_rope")));
    json_decref(c);
    ck_assert_str_eq(al_st_meta(&f, "attnlab.step"), "5");
    ck_assert_int_eq(atoi(al_st_meta(&f, "attnlab.interface_version")), AL_VARIANT_API_VERSION);
    ck_assert_str_eq(al_st_meta(&f, "attnlab.variant_origin"), "built-in");
    const al_st_tensor *t = al_st_find(&f, "blocks.1.attn.wuk.weight");
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->shape[0], 16);   /* [H*dh, d_latent] */
    ck_assert_int_eq(t->shape[1], (int)m.cfg.attn_set[0]);
    ck_assert_ptr_nonnull(al_st_find(&f, "blocks.0.attn.q_norm.weight"));
    ck_assert_ptr_nonnull(al_st_find(&f, "tok_emb.weight"));
    al_st_free(&f);
    al_model_free(&m);
    free(dir);
}
END_TEST

/* ------------------------------------------------------------ mismatches */

/* A checkpoint of m written with one thing changed. */
typedef struct mut {
    const char *key;        /* set this config key ("attention.x" nests) ... */
    const char *value;      /* ... to this JSON (NULL: remove the key) */
    const char *raw_cfg;    /* or replace the config text wholesale */
    const char *origin;     /* attnlab.variant_origin */
    const char *drop, *extra, *flat, *f16, *nan;   /* tensor edits */
    int no_config;
} mut;

static char *mutated_config(const al_model *m, const mut *x)
{
    char *text = al_checkpoint_config_json(m);
    if (!x->key) return text;
    json_t *c = json_loads(text, 0, NULL), *at = c;
    free(text);
    const char *k = x->key;
    if (strncmp(k, "attention.", 10) == 0) at = json_object_get(c, "attention"), k += 10;
    if (x->value) json_object_set_new(at, k, json_loads(x->value, JSON_DECODE_ANY, NULL));
    else json_object_del(at, k);
    text = json_dumps(c, JSON_COMPACT);
    json_decref(c);
    return text;
}

static void write_mutated(const char *path, const al_model *m, const mut *x)
{
    al_st_out t[64];
    float *p = malloc(m->n_params * sizeof(float));
    memcpy(p, m->params, m->n_params * sizeof(float));
    int n = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const al_tensor *a = &m->tensors[i];
        if (x->drop && !strcmp(a->name, x->drop)) continue;
        t[n] = (al_st_out){a->name, AL_ST_F32, a->ndim, {a->shape[0], a->shape[1]}, p + a->offset};
        if (x->flat && !strcmp(a->name, x->flat)) t[n].ndim = 1, t[n].shape[0] = (int64_t)a->numel;
        if (x->f16 && !strcmp(a->name, x->f16)) t[n].dtype = AL_ST_F16;
        if (x->nan && !strcmp(a->name, x->nan)) p[a->offset + 1] = NAN;
        n++;
    }
    if (x->extra) t[n++] = (al_st_out){x->extra, AL_ST_F32, 1, {4}, p};
    char *cfg = x->raw_cfg ? strdup(x->raw_cfg) : mutated_config(m, x);
    const char *meta[] = {"attnlab.config", cfg, "attnlab.step", "3", "attnlab.interface_version",
                          "1", "attnlab.variant_origin", x->origin ? x->origin : "built-in"};
    al_err e;
    ck_assert_int_eq(al_st_write(path, t, n, x->no_config ? meta + 2 : meta, x->no_config ? 3 : 4, &e), 0);
    free(cfg);
    free(p);
}

static void expect_load_error(const char *dir, const al_model *m, mut x, const char *want)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/bad.safetensors", dir);
    write_mutated(path, m, &x);
    al_model back;
    al_err e;
    ck_assert_msg(al_checkpoint_load(path, &back, NULL, &e) != 0, "accepted (%s)", want);
    ck_assert_msg(strncmp(e.msg, path, strlen(path)) == 0, "no path in: %s", e.msg);
    ck_assert_msg(strstr(e.msg, want), "'%s' not in: %s", want, e.msg);
    ck_assert_msg(!strchr(e.msg, '\n'), "not one line: %s", e.msg);
    ck_assert_ptr_null(back.params);
}

START_TEST(mismatched_checkpoints_are_clear_errors)
{
    char *dir = al_test_tmpdir();
    al_model m;
    ck_assert_int_eq(tiny_model(&m, al_variant_find("gqa"), -1, 3), 0);
    expect_load_error(dir, &m, (mut){.drop = "blocks.1.mlp.w2.weight"},
                      "missing tensor 'blocks.1.mlp.w2.weight'");
    expect_load_error(dir, &m, (mut){.extra = "blocks.0.attn.bonus.weight"},
                      "unexpected tensor 'blocks.0.attn.bonus.weight'");
    expect_load_error(dir, &m, (mut){.flat = "blocks.0.attn.wk.weight"},
                      "'blocks.0.attn.wk.weight' has shape [128], the model's config wants [8, 16]");
    expect_load_error(dir, &m, (mut){.f16 = "final_norm.weight"}, "has dtype F16, expected F32");
    expect_load_error(dir, &m, (mut){.nan = "blocks.0.mlp.w1.weight"}, "non-finite value at index 1");
    expect_load_error(dir, &m, (mut){.no_config = 1}, "no 'attnlab.config'");
    expect_load_error(dir, &m, (mut){.raw_cfg = "{\"n_layer\": "}, "attnlab.config: not a JSON object");
    expect_load_error(dir, &m, (mut){.key = "attention.variant", .value = "\"sliding\""},
                      "variant 'sliding' is not registered (known: mha, mqa, gqa, mla");
    expect_load_error(dir, &m, (mut){.key = "attention.variant", .value = "\"sliding\""},
                      "it may come from a plugin: pass --plugin PATH");
    expect_load_error(dir, &m, (mut){.key = "attention.variant", .value = "\"sliding\"",
                                     .origin = "/opt/x/libsliding.so"},
                      "it came from a plugin: pass --plugin /opt/x/libsliding.so");
    expect_load_error(dir, &m, (mut){.key = "attention.n_kv_head", .value = "3"},
                      "'n_kv_head' (3) must divide 'n_head' (4)");
    expect_load_error(dir, &m, (mut){.key = "attention.n_kv_heads", .value = "2"},
                      "unknown setting 'n_kv_heads' for variant 'gqa'");
    expect_load_error(dir, &m, (mut){.key = "attention.n_kv_head", .value = NULL},
                      "'attention.n_kv_head' is required");
    expect_load_error(dir, &m, (mut){.key = "n_heads", .value = "4"}, "unknown key 'n_heads'");
    expect_load_error(dir, &m, (mut){.key = "norm_eps", .value = NULL}, "'norm_eps' is missing");
    expect_load_error(dir, &m, (mut){.key = "causal", .value = "1"}, "'causal' must be true or false");
    expect_load_error(dir, &m, (mut){.key = "d_ff", .value = "33"},
                      "tensor 'blocks.0.mlp.w1.weight' has shape [32, 16], the model's config wants [33, 16]");
    expect_load_error(dir, &m, (mut){.key = "d_model", .value = "100000"},
                      "'d_model' must be an integer in [1, 16384]");
    expect_load_error(dir, &m, (mut){.key = "d_head", .value = "3"}, "must be even for RoPE");
    expect_load_error(dir, &m, (mut){.key = "n_layer", .value = "3"},
                      "missing tensor 'blocks.2.attn_norm.weight'");
    expect_load_error(dir, &m, (mut){.key = "vocab_size", .value = "16000000"},
                      "the config describes");   /* far more than the file holds */
    expect_load_error(dir, &m, (mut){.key = "kv_dtype", .value = "\"f8\""},
                      "'kv_dtype' must be \"f32\", \"bf16\", \"f16\", \"int8\" or \"int4\"");
    al_model_free(&m);
    free(dir);
}
END_TEST

/* The config JSON is the model table's (al_config_model_json): every key
 * the loader accepts, and a checkpoint written then read back has the same
 * config, to the byte of its JSON. */
START_TEST(config_json_comes_from_the_key_tables_and_reads_back)
{
    char *dir = al_test_tmpdir(), path[4200];
    al_model m, back;
    al_err e;
    ck_assert_int_eq(tiny_model(&m, al_variant_find("gqa"), -1, 5), 0);
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    ck_assert_int_eq(al_checkpoint_save(path, &m, 9, &e), 0);
    ck_assert_msg(al_checkpoint_load(path, &back, NULL, &e) == 0, "%s", e.msg);
    char *a = al_checkpoint_config_json(&m), *b = al_checkpoint_config_json(&back);
    ck_assert_str_eq(a, b);
    al_st_file f;
    ck_assert_int_eq(al_st_read(path, &f, &e), 0);
    ck_assert_str_eq(al_st_meta(&f, "attnlab.config"), a);
    al_st_free(&f);
    json_t *c = json_loads(a, JSON_REJECT_DUPLICATES, NULL);
    ck_assert_int_eq(json_object_size(c), 15);   /* 14 fields and attention */
    const char *k;
    json_t *v;
    json_object_foreach(c, k, v) ck_assert_msg(al_config_model_json_has(k), "%s", k);
    json_decref(c);
    expect_same_model(&m, &back);
    ck_assert_str_eq(m.cfg.kv_dtype, back.cfg.kv_dtype);
    ck_assert_int_eq(m.d_ff, back.d_ff);
    free(a), free(b);
    al_model_free(&m);
    al_model_free(&back);
    free(dir);
}
END_TEST

/* The JSON as it was written by hand before it came from the tables (this
 * copy of that writer is the fixture): the same keys with the same JSON
 * types, so files from before and after load either way. */
static char *config_json_before_the_tables(const al_model *m)
{
    const al_model_config *c = &m->cfg;
    json_t *a = json_pack("{s:s}", "variant", c->attn->name);
    for (int j = 0; j < al_variant_n_settings(c->attn); j++) {
        const al_setting *s = &c->attn->settings[j];
        json_object_set_new(a, s->name, s->kind == AL_SET_INT
                                            ? json_integer((json_int_t)llround(c->attn_set[j]))
                                            : json_real(c->attn_set[j]));
    }
    json_t *o = json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:i, s:f, s:f, s:b, s:s, s:o}",
                          "n_layer", c->n_layer, "d_model", c->d_model, "n_head", c->n_head,
                          "d_head", c->d_head, "vocab_size", c->vocab_size, "seq_len",
                          c->seq_len, "mlp_ratio", c->mlp_ratio, "d_ff", m->d_ff, "norm_eps",
                          c->norm_eps, "rope_base", c->rope_base, "causal", c->causal,
                          "kv_dtype", c->kv_dtype, "attention", a);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

/* The reader is the key table's: for every scalar row of the model
 * mapping, a checkpoint without the key is refused as missing or loads
 * with the row's default, as the row's ckpt says; one past the row's
 * ceiling is refused naming the key. A key added to the table is read
 * by checkpoints the day it is added, or this fails. */
START_TEST(checkpoint_config_is_read_by_the_key_rows)
{
    char *dir = al_test_tmpdir(), path[4200], val[64], want[128];
    al_model m, back;
    ck_assert_int_eq(tiny_model(&m, al_variant_find("gqa"), -1, 5), 0);
    al_config defaults;
    al_config_defaults(&defaults);
    snprintf(path, sizeof path, "%s/row.safetensors", dir);
    int rows = 0;
    for (const key_spec *k = al_cfg_model_keys; k->key; k++) {
        if (k->type > K_STRING) continue;
        rows++;
        al_err e;
        write_mutated(path, &m, &(mut){.key = k->key, .value = NULL});
        int rc = al_checkpoint_load(path, &back, NULL, &e);
        if (k->ckpt == CK_ALWAYS) {
            snprintf(want, sizeof want, "'%s' is missing", k->key);
            ck_assert_msg(rc != 0 && strstr(e.msg, want), "%s absent: %s", k->key,
                          rc ? e.msg : "loaded");
        } else {
            ck_assert_msg(rc == 0, "%s absent: %s", k->key, e.msg);
            ck_assert_msg(!memcmp((char *)&back.cfg + k->offset,
                                  (char *)&defaults.model + k->offset, k->size),
                          "%s absent did not read as its default %s", k->key, k->def);
            al_model_free(&back);
        }
        if (k->max <= 0) continue;
        if (k->type == K_INT) snprintf(val, sizeof val, "%ld", (long)k->max + 1);
        else snprintf(val, sizeof val, "%.17g", k->max * 2);
        write_mutated(path, &m, &(mut){.key = k->key, .value = val});
        snprintf(want, sizeof want, "'%s' must be", k->key);
        ck_assert_msg(al_checkpoint_load(path, &back, NULL, &e) != 0 && strstr(e.msg, want),
                      "%s = %s was not refused by its row", k->key, val);
    }
    ck_assert_int_ge(rows, 14);
    al_model_free(&m);
    free(dir);
}
END_TEST

START_TEST(checkpoints_written_before_the_key_tables_still_load)
{
    char *dir = al_test_tmpdir(), path[4200];
    int cases = 0;
    for (int i = 0; i < al_variant_count(); i++) {
        const al_variant *v = al_variant_at(i);
        al_model m, back;
        if (tiny_model(&m, v, -1, 11) != 0) continue;
        cases++;
        char *old = config_json_before_the_tables(&m), *now = al_checkpoint_config_json(&m);
        json_t *jo = json_loads(old, 0, NULL), *jn = json_loads(now, 0, NULL);
        /* keys added since, which read as their defaults when absent */
        json_object_del(jn, "kv_quant_group");
        json_object_del(jn, "kv_quant_residual");
        ck_assert_msg(json_equal(jo, jn), "%s: before %s, now %s", v->name, old, now);
        json_decref(jo), json_decref(jn);
        snprintf(path, sizeof path, "%s/old.safetensors", dir);
        write_mutated(path, &m, &(mut){.raw_cfg = old});
        al_err e;
        ck_assert_msg(al_checkpoint_load(path, &back, NULL, &e) == 0, "%s: %s", v->name, e.msg);
        expect_same_model(&m, &back);
        ck_assert_int_eq(back.cfg.kv_quant_group, AL_KV_QUANT_GROUP);
        ck_assert_int_eq(back.cfg.kv_quant_residual, AL_KV_QUANT_RESIDUAL);
        char *again = al_checkpoint_config_json(&back);
        ck_assert_str_eq(again, now);
        free(old), free(now), free(again);
        al_model_free(&m);
        al_model_free(&back);
    }
    ck_assert_int_ge(cases, 4);   /* mha, mqa, gqa, mla */
    free(dir);
}
END_TEST

/* The decode cache's storage travels with the model; a checkpoint from
 * before the key was kept loads as f32. */
START_TEST(kv_dtype_is_recorded_and_read_back)
{
    char *dir = al_test_tmpdir(), path[4200];
    al_model m, back;
    al_err e;
    ck_assert_int_eq(tiny_model(&m, al_variant_find("mqa"), -1, 2), 0);
    snprintf(m.cfg.kv_dtype, sizeof m.cfg.kv_dtype, "bf16");
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    ck_assert_int_eq(al_checkpoint_save(path, &m, 1, &e), 0);
    char *json = al_checkpoint_config_json(&m);
    ck_assert_ptr_nonnull(strstr(json, "\"kv_dtype\":\"bf16\""));
    free(json);
    ck_assert_msg(al_checkpoint_load(path, &back, NULL, &e) == 0, "%s", e.msg);
    ck_assert_str_eq(back.cfg.kv_dtype, "bf16");
    al_model_free(&back);
    write_mutated(path, &m, &(mut){.key = "kv_dtype", .value = NULL});
    ck_assert_msg(al_checkpoint_load(path, &back, NULL, &e) == 0, "%s", e.msg);
    ck_assert_str_eq(back.cfg.kv_dtype, "f32");
    al_model_free(&back);
    al_model_free(&m);
    free(dir);
}
END_TEST

/* ------------------------------------------------------------ fuzzing */

static int load_bytes(const char *path, const char *buf, size_t n, char *msg, size_t msglen)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    if (n) ck_assert_uint_eq(fwrite(buf, 1, n, f), n);
    fclose(f);
    al_model m;
    al_err e = {""};
    int rc = al_checkpoint_load(path, &m, NULL, &e);
    if (rc == 0) al_model_free(&m);
    else snprintf(msg, msglen, "%s", e.msg);
    ck_assert_msg(rc == 0 || (!strchr(e.msg, '\n') && strstr(e.msg, path)), "bad message: %s", e.msg);
    return rc;
}

/* Truncations at every length through the header and at steps through the
 * data, and flipped bytes in the header and the data: an error or a valid
 * load, never a crash (the suite also runs under ASan). */
START_TEST(fuzzed_checkpoints_load_or_fail_cleanly)
{
    char *dir = al_test_tmpdir(), good[4200], path[4200], msg[AL_ERR_LEN];
    snprintf(good, sizeof good, "%s/good.safetensors", dir);
    /* thousands of small files: on tmpfs where there is one, not the disk */
    snprintf(path, sizeof path, "%s/attnlab-fuzz-%d.safetensors",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : dir, (int)getpid());
    al_model m;
    al_model_config c;
    const al_variant *mla = al_variant_find("mla");
    ck_assert_int_eq(al_test_tiny_config(&c, mla, 1, 8, 2, 4, 8, 32), 0);
    c.attn_set[al_variant_setting_index(mla, "d_q_latent")] = 4;
    al_err e;
    ck_assert_int_eq(al_model_init(&m, &c, &e), 0);
    al_model_init_weights(&m, 9);
    ck_assert_int_eq(al_checkpoint_save(good, &m, 1, &e), 0);
    al_model_free(&m);
    char *buf;
    size_t n;
    ck_assert_int_eq(al_read_file(good, &buf, &n, &e), 0);
    size_t hend = 8 + (size_t)(unsigned char)buf[0] + 256 * (size_t)(unsigned char)buf[1];
    ck_assert_uint_lt(hend, n);
    for (size_t len = 0; len < n; len += len < hend + 64 ? 1 : 61)
        ck_assert_msg(load_bytes(path, buf, len, msg, sizeof msg) != 0, "truncated to %zu loaded", len);
    int loaded = 0;
    static const unsigned char flips[] = {0x01, 0x20, 0x80, 0xff};
    for (size_t i = 0; i < hend; i++)
        for (int k = 0; k < 4; k++) {
            buf[i] ^= flips[k];
            loaded += load_bytes(path, buf, n, msg, sizeof msg) == 0;
            buf[i] ^= flips[k];
        }
    for (size_t i = hend; i < n; i += 7) {
        buf[i] ^= 0xff;
        int rc = load_bytes(path, buf, n, msg, sizeof msg);
        ck_assert_msg(rc == 0 || strstr(msg, "non-finite"), "data flip at %zu: %s", i, msg);
        buf[i] ^= 0xff;
    }
    fprintf(stderr, "fuzz: %zu-byte header, %d of %zu header flips still load\n", hend, loaded,
            4 * hend);
    ck_assert_int_eq(load_bytes(path, buf, n, msg, sizeof msg), 0);   /* restored */
    unlink(path);
    free(buf);
    free(dir);
}
END_TEST

/* ------------------------------------------------------------ resuming */

static void resume_config(al_config *c, const char *dir)
{
    char text[6001];
    const char *s = "It is a truth universally acknowledged, that a single man in possession ";
    for (int i = 0; i < 6000; i++) text[i] = s[(i * 7 + i / 13) % strlen(s)];
    text[6000] = 0;
    char *path = al_test_write(dir, "data.txt", text);
    al_config_defaults(c);
    snprintf(c->data.source, sizeof c->data.source, "text");
    snprintf(c->data.path, sizeof c->data.path, "%s", path);
    free(path);
    c->model.n_layer = 1;
    c->model.d_model = 16;
    c->model.n_head = 2;
    c->model.d_head = 8;
    c->model.seq_len = 16;
    c->model.attn = al_variant_find("gqa");
    snprintf(c->model.variant, sizeof c->model.variant, "gqa");
    c->model.attn_set[0] = 1;
    c->train.steps = 24;
    c->train.batch_size = 4;
    c->train.lr = 1e-2;
    c->train.warmup_steps = 3;
    c->train.eval_every = 5;
    c->train.eval_batches = 2;
    c->train.threads = 1;
}

/* metrics.csv without the wall-clock columns (tokens_per_s, elapsed_s). */
static char *loss_columns(const char *dir)
{
    char path[4200], *buf;
    size_t n;
    al_err e;
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    ck_assert_int_eq(al_read_file(path, &buf, &n, &e), 0);
    char *out = calloc(n + 1, 1), *o = out;
    int commas = 0;
    for (char *p = buf; *p; p++) {
        if (*p == '\n') commas = 0, *o++ = '\n';
        else if ((commas += *p == ',') < 5) *o++ = *p;
    }
    free(buf);
    return out;
}

static char *file_bytes(const char *dir, const char *name, size_t *n)
{
    size_t len = strlen(dir) + strlen(name) + 2;
    char *path = malloc(len), *buf;
    al_err e;
    snprintf(path, len, "%s/%s", dir, name);
    ck_assert_msg(al_read_file(path, &buf, n, &e) == 0, "%s", e.msg);
    free(path);
    return buf;
}

static void train_ok(const al_config *c, const char *dir, int resume, int stop,
                     al_train_result *r, int want)
{
    al_train_opts o = {.outdir = dir, .resume = resume, .stop_after = stop};
    al_err e;
    ck_assert_msg(al_train(c, &o, r, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(r->status, want);
}

/* Stops at 10 (an evaluation step) and 17 (between evaluations, with a
 * checkpoint_every that differs), each resumed: the metrics, the result and
 * the final model are those of the run never interrupted, bit for bit. */
START_TEST(resumed_run_is_bit_identical_to_an_uninterrupted_one)
{
    char *d1 = al_test_tmpdir(), *d2 = al_test_tmpdir();
    al_config c;
    resume_config(&c, d1);
    al_train_result r1, r2;
    train_ok(&c, d1, 0, 0, &r1, AL_TRAIN_OK);
    c.train.checkpoint_every = 5;
    train_ok(&c, d2, 0, 10, &r2, AL_TRAIN_STOPPED);
    ck_assert_int_eq(r2.steps_done, 10);
    al_model m;
    long step;
    al_err e;
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", d2);
    ck_assert_int_eq(al_checkpoint_load(path, &m, &step, &e), 0);
    ck_assert_int_eq(step, 10);
    al_model_free(&m);
    c.train.checkpoint_every = 4;
    train_ok(&c, d2, 1, 17, &r2, AL_TRAIN_STOPPED);
    c.train.checkpoint_every = 0;
    train_ok(&c, d2, 1, 0, &r2, AL_TRAIN_OK);
    char *m1 = loss_columns(d1), *m2 = loss_columns(d2);
    ck_assert_str_eq(m1, m2);
    ck_assert_ptr_nonnull(strstr(m1, "\n15,"));
    ck_assert_ptr_nonnull(strstr(m1, "\n24,"));
    ck_assert_mem_eq(&r1.val_loss, &r2.val_loss, sizeof(double));
    ck_assert_mem_eq(&r1.best_val_loss, &r2.best_val_loss, sizeof(double));
    ck_assert_mem_eq(&r1.final_train_loss, &r2.final_train_loss, sizeof(double));
    size_t n1, n2;
    char *b1 = file_bytes(d1, "model.safetensors", &n1), *b2 = file_bytes(d2, "model.safetensors", &n2);
    ck_assert_uint_eq(n1, n2);
    ck_assert_msg(memcmp(b1, b2, n1) == 0, "final checkpoints differ");
    free(m1), free(m2), free(b1), free(b2), free(d1), free(d2);
}
END_TEST

/* A resume refused with one line holding want; the message in *e, the
 * result in *r. */
static void resume_refused(const al_config *c, const char *dir, const char *want, al_err *e,
                           al_train_result *r)
{
    al_train_opts o = {.outdir = dir, .resume = 1};
    ck_assert_msg(al_train(c, &o, r, e) != 0, "resumed despite: %s", want);
    ck_assert_msg(strstr(e->msg, want), "'%s' not in: %s", want, e->msg);
    ck_assert_msg(!strchr(e->msg, '\n'), "not one line: %s", e->msg);
}

static void expect_resume_error(const al_config *c, const char *dir, const char *want)
{
    al_err e;
    al_train_result r;
    resume_refused(c, dir, want, &e, &r);
}

START_TEST(resume_refuses_a_different_config_or_inconsistent_files)
{
    char *dir = al_test_tmpdir(), *other = al_test_tmpdir(), path[4200];
    al_config c, d;
    resume_config(&c, dir);
    expect_resume_error(&c, dir, "train_state.safetensors: cannot open");
    al_train_result r;
    train_ok(&c, dir, 0, 8, &r, AL_TRAIN_STOPPED);
    d = c, d.train.steps = 30;
    expect_resume_error(&d, dir, "cannot resume: 1 key differs from the saved run: 'train.steps' saved 24, now 30");
    d = c, d.train.lr = 2e-2;
    expect_resume_error(&d, dir, "'train.lr' saved 0.01, now 0.02");
    d = c, d.model.attn_set[0] = 2;
    expect_resume_error(&d, dir, "'model.attention.n_kv_head' saved 1, now 2");
    /* every key that differs, precision too (written only when not f32) */
    d = c, d.train.lr = 2e-2, d.train.steps = 30;
    snprintf(d.train.precision, sizeof d.train.precision, "bf16");
    expect_resume_error(&d, dir, "cannot resume: 3 keys differ from the saved run: 'train.steps' "
                        "saved 24, now 30; 'train.lr' saved 0.01, now 0.02; 'train.precision' "
                        "saved f32 (the default), now bf16");
    d = c, d.train.threads = 2;
    expect_resume_error(&d, dir, "'train.threads'");
    /* killed between the state and model.safetensors: the model file is
     * of another step, and the state alone still resumes the run to the
     * same end as one never interrupted */
    train_ok(&c, other, 0, 6, &r, AL_TRAIN_STOPPED);
    char *b;
    size_t n, n2;
    al_err e;
    b = file_bytes(other, "model.safetensors", &n);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ck_assert_int_eq(al_write_atomic(path, b, n, &e), 0);
    char *stale = b;   /* step 6's model file, for the finished case below */
    size_t n_stale = n;
    train_ok(&c, dir, 1, 0, &r, AL_TRAIN_OK);
    train_ok(&c, other, 1, 0, &r, AL_TRAIN_OK);
    b = file_bytes(dir, "model.safetensors", &n);
    char *b2 = file_bytes(other, "model.safetensors", &n2);
    ck_assert_msg(n == n2 && memcmp(b, b2, n) == 0, "the resumed runs end differently");
    free(b), free(b2);
    expect_resume_error(&c, other, "nothing to resume: the run has done all 24 steps");
    /* a sweep worker killed after its final checkpoint, between the state
     * and the model file: the finished state gives back the run's result as
     * it was, and the model file its final weights again */
    snprintf(path, sizeof path, "%s/model.safetensors", other);
    ck_assert_int_eq(al_write_atomic(path, stale, n_stale, &e), 0);
    free(stale);
    al_train_opts o = {.outdir = other, .resume = 1, .accept_finished = 1};
    al_train_result again;
    ck_assert_msg(al_train(&c, &o, &again, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(again.status, AL_TRAIN_OK);
    ck_assert_int_eq(again.steps_done, 24);
    ck_assert_mem_eq(&again.val_loss, &r.val_loss, sizeof(double));
    ck_assert_mem_eq(&again.best_val_loss, &r.best_val_loss, sizeof(double));
    ck_assert_mem_eq(&again.final_train_loss, &r.final_train_loss, sizeof(double));
    ck_assert_mem_eq(&again.tokens_per_s, &r.tokens_per_s, sizeof(double));
    ck_assert_mem_eq(&again.test_loss, &r.test_loss, sizeof(double));
    b = file_bytes(other, "model.safetensors", &n);
    b2 = file_bytes(dir, "model.safetensors", &n2);
    ck_assert_msg(n == n2 && memcmp(b, b2, n) == 0, "the finished run's model file is not its final weights");
    free(b), free(b2);
    free(dir), free(other);
}
END_TEST

/* path rewritten with metadata key set to value (NULL: removed) and the
 * tensor named drop (if any) left out. */
static void edit_file(const char *path, const char *key, const char *value, const char *drop)
{
    al_st_file f;
    al_err e;
    ck_assert_msg(al_st_read(path, &f, &e) == 0, "%s", e.msg);
    al_st_out t[16];
    const char *meta[64];
    int n_meta = 0, n = 0;
    for (int i = 0; i < f.n; i++) {
        const al_st_tensor *x = &f.t[i];
        if (drop && strcmp(x->name, drop) == 0) continue;
        t[n] = (al_st_out){x->name, x->dtype, x->ndim, {0}, x->data};
        memcpy(t[n++].shape, x->shape, sizeof x->shape);
    }
    for (int i = 0; i < f.n_meta; i++) {
        if (strcmp(f.meta_key[i], key) == 0) continue;
        meta[2 * n_meta] = f.meta_key[i], meta[2 * n_meta++ + 1] = f.meta_val[i];
    }
    if (value) meta[2 * n_meta] = key, meta[2 * n_meta++ + 1] = value;
    /* the data point into f's buffer: write elsewhere, then move */
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.edit", path);
    ck_assert_msg(al_st_write(tmp, t, n, meta, n_meta, &e) == 0, "%s", e.msg);
    al_st_free(&f);
    ck_assert_int_eq(rename(tmp, path), 0);
}

static void append_byte(const char *path)
{
    FILE *f = fopen(path, "ab");
    ck_assert_ptr_nonnull(f);
    fputc('!', f);
    fclose(f);
}

static void expect_changed(const al_config *c, const char *dir, const char *want)
{
    al_train_result r;
    al_err e;
    resume_refused(c, dir, want, &e, &r);
    ck_assert_msg(strstr(e.msg, "in a new directory"), "no advice in: %s", e.msg);
    ck_assert_msg(!strstr(e.msg, "force"), "advice needs a force: %s", e.msg);
    ck_assert_int_eq(r.resume_changed, 1);
}

/* What the config does not say but the run depends on: the data bytes, the
 * plugin files, the attnlab that started it. Each change is refused naming
 * it; undoing it lets the run go on. */
START_TEST(resume_refuses_changed_data_plugins_or_interface)
{
    char *dir = al_test_tmpdir(), path[4200], want[4400];
    al_config c;
    resume_config(&c, dir);
    char *plugin = al_test_write(dir, "libfake.so", "not loaded here, only fingerprinted");
    c.n_plugins = 1;
    snprintf(c.plugins[0], sizeof c.plugins[0], "%s", plugin);
    al_train_result r;
    train_ok(&c, dir, 0, 8, &r, AL_TRAIN_STOPPED);
    char *data;
    size_t n;
    al_err e;
    ck_assert_int_eq(al_read_file(c.data.path, &data, &n, &e), 0);

    append_byte(c.data.path);
    snprintf(want, sizeof want, "the data file '%s' changed since the run started (then 6000 "
             "bytes", c.data.path);
    expect_changed(&c, dir, want);
    ck_assert_int_eq(al_write_atomic(c.data.path, data, n, &e), 0);   /* put it back */

    append_byte(plugin);
    snprintf(want, sizeof want, "plugin '%s' changed since the run started", plugin);
    expect_changed(&c, dir, want);
    ck_assert_int_eq(al_write_atomic(plugin, "not loaded here, only fingerprinted", 35, &e), 0);

    snprintf(path, sizeof path, "%s/train_state.safetensors", dir);
    edit_file(path, "attnlab.interface_version", "2", NULL);
    expect_changed(&c, dir, "started by an attnlab whose variant interface is version 2, this "
                   "one has version");
    /* a state from before it kept the version and the parameters: then
     * model.safetensors, which always had the version, says */
    edit_file(path, "attnlab.interface_version", NULL, "params");
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    edit_file(path, "attnlab.interface_version", "2", NULL);
    expect_changed(&c, dir, "model.safetensors: cannot resume: the run was started by an "
                   "attnlab whose variant interface is version 2");
    char ver[16];
    snprintf(ver, sizeof ver, "%d", AL_VARIANT_API_VERSION);
    edit_file(path, "attnlab.interface_version", ver, NULL);
    train_ok(&c, dir, 1, 0, &r, AL_TRAIN_OK);
    free(data), free(plugin), free(dir);
}
END_TEST

/* `attnlab train --resume DIR` reads DIR/config.yaml; --out elsewhere is refused. */
START_TEST(train_resume_dir_continues_from_the_saved_config)
{
    char *dir = al_test_tmpdir(), yaml[8000], args[9000], *out;
    al_config c;
    resume_config(&c, dir);
    snprintf(yaml, sizeof yaml,
             "data: {path: %s}\n"
             "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16, "
             "attention: {variant: mla, d_latent: 4, d_rope: 2}}\n"
             "train: {steps: 12, batch_size: 2, eval_every: 4, eval_batches: 1, threads: 1}\n",
             c.data.path);
    char *cfg = al_test_write(dir, "c.yaml", yaml);
    snprintf(args, sizeof args, "train %s --out %s/full", cfg, dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    free(out);
    snprintf(args, sizeof args, "train %s --out %s/part --stop-after 5", cfg, dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    ck_assert_msg(strstr(out, "status=stopped steps=5"), "%s", out);
    free(out);
    snprintf(args, sizeof args, "train --resume %s/part --out %s/elsewhere", dir, dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 2);
    ck_assert_msg(strstr(out, "name different directories"), "%s", out);
    free(out);
    snprintf(args, sizeof args, "train --resume %s/part --set train.checkpoint_every=3", dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    ck_assert_msg(strstr(out, "val_loss="), "%s", out);
    free(out);
    snprintf(args, sizeof args, "%s/full", dir);
    size_t n1, n2;
    char *b1 = file_bytes(args, "model.safetensors", &n1);
    snprintf(args, sizeof args, "%s/part", dir);
    char *b2 = file_bytes(args, "model.safetensors", &n2);
    ck_assert(n1 == n2 && memcmp(b1, b2, n1) == 0);
    free(b1), free(b2), free(cfg), free(dir);
}
END_TEST

/* ------------------------------------------------------------ init from */

/* The first metrics row after the header, as step,train_loss,val_loss,acc,lr. */
static void first_row(const char *dir, double *val, double *lr)
{
    size_t n;
    char *b = file_bytes(dir, "metrics.csv", &n), *row = strchr(b, '\n') + 1;
    int step;
    ck_assert_int_eq(sscanf(row, "%d,,%lf,,%lf", &step, val, lr), 3);
    ck_assert_int_eq(step, 0);
    free(b);
}

/* A run from a checkpoint starts at the checkpoint's quality with step 0's
 * learning rate (fresh schedule), and a resumed one ends bit-identical. */
START_TEST(init_from_starts_from_the_weights_with_a_fresh_schedule_and_resumes_exactly)
{
    char *d0 = al_test_tmpdir(), *d1 = al_test_tmpdir(), *d2 = al_test_tmpdir();
    al_config c;
    resume_config(&c, d0);
    c.train.steps = 8;
    al_train_result r0, r1, r2;
    train_ok(&c, d0, 0, 0, &r0, AL_TRAIN_OK);
    c.train.steps = 12, c.train.seed = 5, c.train.lr = 3e-3;
    snprintf(c.train.init_from, sizeof c.train.init_from, "%s/model.safetensors", d0);
    train_ok(&c, d1, 0, 0, &r1, AL_TRAIN_OK);
    double val, lr;
    first_row(d1, &val, &lr);
    ck_assert_msg(fabs(val - r0.val_loss) < 1e-5 * r0.val_loss,   /* metrics.csv has 6 digits */
                  "step 0 of the new run %.9g, the checkpoint's %.9g", val, r0.val_loss);
    ck_assert_double_eq_tol(lr, al_lr_at(0, 12, c.train.warmup_steps, 3e-3, c.train.min_lr), 1e-9);
    c.train.checkpoint_every = 3;
    train_ok(&c, d2, 0, 5, &r2, AL_TRAIN_STOPPED);
    train_ok(&c, d2, 1, 0, &r2, AL_TRAIN_OK);
    char *m1 = loss_columns(d1), *m2 = loss_columns(d2);
    ck_assert_str_eq(m1, m2);
    size_t n1, n2;
    char *b1 = file_bytes(d1, "model.safetensors", &n1), *b2 = file_bytes(d2, "model.safetensors", &n2);
    ck_assert_msg(n1 == n2 && memcmp(b1, b2, n1) == 0, "resumed run differs");
    /* The checkpoint it began from replaced: resuming is refused. */
    train_ok(&c, d2, 0, 5, &r2, AL_TRAIN_STOPPED);
    al_err e;
    ck_assert_int_eq(al_write_atomic(c.train.init_from, b1, n1, &e), 0);
    expect_resume_error(&c, d2, "changed since the run began");
    free(m1), free(m2), free(b1), free(b2), free(d0), free(d1), free(d2);
}
END_TEST

START_TEST(init_from_with_a_mismatched_shape_is_refused_naming_the_tensor)
{
    char *dir = al_test_tmpdir(), args[13000], *out;
    al_config c;
    resume_config(&c, dir);
    c.train.steps = 3;
    al_train_result r;
    train_ok(&c, dir, 0, 0, &r, AL_TRAIN_OK);   /* gqa with one K/V head */
    c.model.attn_set[0] = 2;
    snprintf(c.train.init_from, sizeof c.train.init_from, "%s/model.safetensors", dir);
    char *other = al_test_tmpdir();
    al_train_opts o = {.outdir = other};
    al_err e;
    ck_assert_int_ne(al_train(&c, &o, &r, &e), 0);
    ck_assert_msg(strstr(e.msg, "'blocks.0.attn.wk.weight' has shape [8, 16], the model wants "
                         "[16, 16]") && strstr(e.msg, "'blocks.0.attn.wv.weight'") &&
                  strstr(e.msg, "(2 tensors)") && !strchr(e.msg, '\n'), "%s", e.msg);
    snprintf(args, sizeof args, "train %s/config.yaml --out %s/x --set model.n_layer=2 "
             "--init-from %s/model.safetensors", dir, other, dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 2);
    ck_assert_msg(strstr(out, "train.init_from: ") && strstr(out, "'blocks.1.attn.wq.weight' is "
                  "missing"), "%s", out);
    free(out);
    snprintf(args, sizeof args, "train %s/config.yaml --out %s/y --init-from %s/nothing", dir,
             other, dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 2);
    ck_assert_msg(strstr(out, "nothing"), "%s", out);
    free(out), free(dir), free(other);
}
END_TEST

Suite *checkpoint_suite(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("checkpoint");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, save_then_load_round_trips_every_builtin_variant);
    tcase_add_test(tc, metadata_holds_the_config_by_setting_name);
    tcase_add_test(tc, kv_dtype_is_recorded_and_read_back);
    tcase_add_test(tc, config_json_comes_from_the_key_tables_and_reads_back);
    tcase_add_test(tc, checkpoint_config_is_read_by_the_key_rows);
    tcase_add_test(tc, checkpoints_written_before_the_key_tables_still_load);
    tcase_add_test(tc, mismatched_checkpoints_are_clear_errors);
    tcase_add_test(tc, fuzzed_checkpoints_load_or_fail_cleanly);
    tcase_add_test(tc, resumed_run_is_bit_identical_to_an_uninterrupted_one);
    tcase_add_test(tc, resume_refuses_a_different_config_or_inconsistent_files);
    tcase_add_test(tc, resume_refuses_changed_data_plugins_or_interface);
    tcase_add_test(tc, train_resume_dir_continues_from_the_saved_config);
    tcase_add_test(tc, init_from_starts_from_the_weights_with_a_fresh_schedule_and_resumes_exactly);
    tcase_add_test(tc, init_from_with_a_mismatched_shape_is_refused_naming_the_tensor);
    suite_add_tcase(s, tc);
    return s;
}
