/*
 * test_layer_attn.c - model.layer_attention: a list of attentions repeated
 * over the layers. Parsing and its refusals; each layer's own variant and
 * tensors; the parameter count against one computed layer by layer by
 * hand; gradients through a mixed stack against finite differences; cached
 * decode against the full forward past one cache tile; checkpoints, resume,
 * `attnlab kv` per layer, parameter matching, convert and a sweep over the
 * list. (PyTorch parity of stacks is in test_torch.c.)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "al_checkpoint.h"
#include "al_config_io.h"
#include "al_convert.h"
#include "al_decode.h"
#include "al_registry.h"
#include "al_test.h"
#include "al_test_model.h"
#include "al_train.h"

/* ------------------------------------------------------------ helpers */

static const char *const stack_yaml =
    "model:\n"
    "  n_layer: 5\n"
    "  d_model: 32\n"
    "  n_head: 4\n"
    "  layer_attention:\n"
    "    - {variant: gqa, n_kv_head: 2}\n"
    "    - {variant: mha}\n";

static int load_text(const char *text, al_config *c, al_err *e, char **path)
{
    char *dir = al_test_tmpdir();
    *path = al_test_write(dir, "exp.yaml", text);
    free(dir);
    e->msg[0] = 0;
    return al_config_load(*path, NULL, 0, c, e);
}

static void drop(char *path)
{
    unlink(path);
    *strrchr(path, '/') = 0;
    rmdir(path);
    free(path);
}

/* Loading text fails with exactly want ("%F": the file's path), one line. */
static void expect_error(const char *text, const char *want)
{
    al_config c;
    al_err e;
    char *path, full[4096];
    int rc = load_text(text, &c, &e, &path);
    const char *f = strstr(want, "%F");
    if (f) snprintf(full, sizeof full, "%.*s%s%s", (int)(f - want), want, path, f + 2);
    else snprintf(full, sizeof full, "%s", want);
    ck_assert_int_eq(rc, -1);
    ck_assert_str_eq(e.msg, full);
    ck_assert_ptr_null(strchr(e.msg, '\n'));
    drop(path);
}

static al_config load_ok(const char *text)
{
    al_config c;
    al_err e;
    char *path;
    ck_assert_msg(load_text(text, &c, &e, &path) == 0, "%s", e.msg);
    drop(path);
    return c;
}

static const al_variant *V(const char *name)
{
    const al_variant *v = al_variant_find(name);
    ck_assert_ptr_nonnull(v);
    return v;
}

/* A tiny stack of the named variants (n_items of them) over n_layer. */
static al_model_config stack(const char *const *names, int n_items, int n_layer, int seq_len,
                             int vocab)
{
    const al_variant *vs[8];
    for (int k = 0; k < n_items; k++) vs[k] = V(names[k]);
    al_model_config c;
    ck_assert_int_eq(al_test_stack_config(&c, vs, n_items, n_layer, 16, 4, 4, seq_len, vocab),
                     0);
    return c;
}

static void random_tokens(int *x, int n, int V, uint64_t seed)
{
    al_rng r;
    al_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) x[i] = (int)al_rng_below(&r, V);
}

static void scale_weights(al_model *m, float s)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].ndim == 2)
            for (size_t j = 0; j < m->tensors[i].numel; j++)
                m->params[m->tensors[i].offset + j] *= s;
}

/* ------------------------------------------------------------ config */

START_TEST(layer_attention_repeats_its_items_over_the_layers)
{
    al_config c = load_ok(stack_yaml);
    const al_model_config *m = &c.model;
    ck_assert_int_eq(m->n_layer_attn, 2);
    ck_assert_str_eq(m->layer_attn[0].variant, "gqa");
    ck_assert_double_eq(m->layer_attn[0].set[0], 2);
    ck_assert_str_eq(m->layer_attn[1].variant, "mha");
    ck_assert_str_eq(m->variant, "gqa");   /* the one-attention fields mirror item 0 */
    for (int l = 0; l < 5; l++)
        ck_assert_str_eq(al_config_layer_attn(m, l).variant, l % 2 ? "mha" : "gqa");
    ck_assert(al_config_mixed_attn(m));
    m = &c.model;
    al_model_config mc = *m;
    mc.vocab_size = 256;
    al_model model;
    al_err e;
    ck_assert_msg(al_model_init(&model, &mc, &e) == 0, "%s", e.msg);
    for (int l = 0; l < 5; l++) {
        char name[64];
        snprintf(name, sizeof name, "blocks.%d.attn.wk.weight", l);
        const al_tensor *t = al_model_tensor(&model, name);
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(t->shape[0], (l % 2 ? 4 : 2) * 8);   /* K/V heads x d_head */
        ck_assert_ptr_eq(model.layers[l].attn, V(l % 2 ? "mha" : "gqa"));
    }
    al_model_free(&model);
    /* a one-item list is every layer that attention */
    c = load_ok("model: {n_layer: 3, layer_attention: [{variant: mqa}]}\n");
    ck_assert_int_eq(c.model.n_layer_attn, 1);
    ck_assert(!al_config_mixed_attn(&c.model));
    ck_assert_str_eq(al_config_layer_attn(&c.model, 2).variant, "mqa");
}
END_TEST

START_TEST(layer_attention_refusals_name_the_key_and_the_place)
{
    expect_error("model:\n  attention: {variant: mha}\n  layer_attention: [{variant: mqa}]\n",
                 "%F:3:20: error: 'model.attention' and 'model.layer_attention' are both "
                 "given: use one (model.attention for every layer, or the per-layer list)");
    expect_error("model:\n  n_layer: 2\n  layer_attention: [{variant: mqa}, {variant: mha}, "
                 "{variant: mqa}]\n",
                 "%F:3:20: error: 'model.layer_attention' lists 3 attentions, more than "
                 "'model.n_layer' (2): items past the last layer would never be used");
    expect_error("model:\n  layer_attention: []\n",
                 "%F:2:20: error: 'model.layer_attention' is empty: list at least one "
                 "attention (or use model.attention)");
    expect_error("model:\n  layer_attention: {variant: mha}\n",
                 "%F:2:20: error: 'model.layer_attention' must be a list of attention mappings "
                 "such as [{variant: gqa, n_kv_head: 2}, {variant: mha}], got a mapping");
    expect_error("model:\n  layer_attention:\n    - {variant: mha}\n"
                 "    - {variant: gqa, n_kv_heads: 2}\n",
                 "%F:4:22: error: unknown key 'model.layer_attention[1].n_kv_heads' for variant "
                 "'gqa' (did you mean 'n_kv_head'?)");
    expect_error("model:\n  layer_attention:\n    - {variant: mha}\n    - {variant: gqa}\n",
                 "%F:4:7: error: 'model.layer_attention[1].n_kv_head' is required for "
                 "variant 'gqa'");
    expect_error("model:\n  layer_attention:\n    - {variant: gqa, n_kv_head: 3}\n",
                 "%F:3:33: error: model.layer_attention[0]: 'n_kv_head' (3) must divide "
                 "'n_head' (4)");
    /* matching by n_layer may not drop layers the list names either */
    expect_error("model:\n  n_layer: 3\n  d_model: 32\n  n_head: 4\n  d_ff: 8\n  vocab_size: 256\n"
                 "  layer_attention: [{variant: mha}, {variant: mha}, {variant: mha}]\n"
                 "  match_params: {to: {variant: mqa}, by: n_layer}\n",
                 "%F:8:17: error: 'model.match_params': matching by n_layer gives 2 blocks, fewer "
                 "than the 3 attentions of 'model.layer_attention'");
    expect_error("model:\n  layer_attention: [{variant: mha}, {variant: mqb}]\n",
                 "%F:2:47: error: unknown variant 'mqb' in 'model.layer_attention[1].variant' "
                 "(did you mean 'mqa'?; a plugin's variant needs --plugin PATH or "
                 "'plugins: [PATH]')");
}
END_TEST

/* The written YAML and JSON read back to the same list. */
START_TEST(layer_attention_is_written_and_read_back)
{
    al_config a = load_ok(stack_yaml);
    char *yaml = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&yaml, &n);
    al_config_write_yaml(&a, f);
    fclose(f);
    ck_assert_ptr_nonnull(strstr(yaml, "  layer_attention:\n    - {variant: gqa, n_kv_head: 2}\n"
                                       "    - {variant: mha}\n"));
    ck_assert_ptr_null(strstr(yaml, "  attention:"));
    al_config b = load_ok(yaml);
    free(yaml);
    ck_assert_int_eq(b.model.n_layer_attn, 2);
    ck_assert_mem_eq(a.model.layer_attn, b.model.layer_attn, sizeof a.model.layer_attn);
    char *json = al_config_model_json(&a.model);
    ck_assert_msg(strstr(json, "\"layer_attention\":[{\"variant\":\"gqa\",\"n_kv_head\":2},"
                               "{\"variant\":\"mha\"}]"), "%s", json);
    ck_assert_msg(!strstr(json, "\"attention\""), "%s", json);
    free(json);
}
END_TEST

/* ------------------------------------------------------------ counts */

/* Attention parameters of one layer by hand (weights [out, in], no biases). */
static size_t attn_by_hand(const al_attn_config *a, int D, int H, int dh)
{
    size_t q = (size_t)H * dh * D;
    if (!strcmp(a->variant, "mha")) return 4 * q;
    if (!strcmp(a->variant, "mqa")) return 2 * q + 2 * (size_t)dh * D;
    if (!strcmp(a->variant, "gqa")) return 2 * q + 2 * (size_t)a->set[0] * dh * D;
    if (!strcmp(a->variant, "mla")) {   /* d_q_latent 0 */
        size_t dc = (size_t)a->set[0], dr = (size_t)a->set[1];
        return q + dr * D + dc * D + dc + 2 * (size_t)H * dh * dc + (size_t)H * dr * D + q;
    }
    ck_abort_msg("no count by hand for %s", a->variant);
    return 0;
}

START_TEST(a_mixed_stack_counts_the_sum_of_its_layers)
{
    static const char *const names[] = {"gqa", "mha", "mla"};
    al_model_config c = stack(names, 3, 5, 8, 256);
    int D = c.d_model, H = c.n_head, dh = c.d_head, F = al_config_d_ff(&c), Vs = c.vocab_size;
    size_t want = (size_t)Vs * D + D;
    for (int l = 0; l < c.n_layer; l++) {
        al_attn_config a = al_config_layer_attn(&c, l);
        want += 2 * (size_t)D + 2 * (size_t)D * F + attn_by_hand(&a, D, H, dh);
    }
    al_err e;
    ck_assert_uint_eq(al_model_param_count(&c, &e), want);
    /* the same through the uniform models: each layer as its variant's */
    size_t uni[3];
    for (int k = 0; k < 3; k++) {
        al_model_config u = c;
        al_attn_config a = al_config_attn_item(&c, k);
        al_config_set_attn(&u, &a);
        u.n_layer = 1;
        uni[k] = al_model_param_count(&u, &e) - ((size_t)Vs * D + D);   /* one block */
    }
    ck_assert_uint_eq(want, (size_t)Vs * D + D + 2 * uni[0] + 2 * uni[1] + uni[2]);
    /* and KV floats per token: layer by layer */
    size_t kv = 0;
    for (int l = 0; l < c.n_layer; l++) {
        al_attn_config a = al_config_layer_attn(&c, l);
        size_t one = !strcmp(a.variant, "mha") ? 2u * H * dh
                     : !strcmp(a.variant, "gqa") ? 2u * (size_t)a.set[0] * dh
                                                 : (size_t)(a.set[0] + a.set[1]);
        ck_assert_uint_eq(al_model_layer_kv_elems(&c, l), one);
        kv += one;
    }
    ck_assert_uint_eq(al_model_kv_elems_per_token(&c), kv);
}
END_TEST

/* match_params with a stack: the stack's own count (its cycle over the
 * layers), widened by d_ff to the mha model's. */
START_TEST(match_params_counts_the_stack)
{
    al_config c = load_ok("model:\n  n_layer: 4\n  d_model: 32\n  n_head: 4\n  vocab_size: 256\n"
                          "  layer_attention: [{variant: mqa}, {variant: mha}]\n"
                          "  match_params: {to: {variant: mha}, by: d_ff}\n");
    const al_match_config *mt = &c.model.match;
    ck_assert_int_gt(c.model.d_ff, 128);   /* widened: two mqa layers have fewer */
    al_err e;
    ck_assert_uint_eq(mt->params, al_model_param_count(&c.model, &e));
    ck_assert_int_eq(c.model.n_layer_attn, 2);   /* the stack stays */
    /* within half a step of 8 MLP units over 4 layers of 2 matrices */
    double gap = fabs((double)mt->params - (double)mt->params_to);
    ck_assert_msg(gap <= 4.0 * 2 * 32 * 8 / 2, "gap %g", gap);
}
END_TEST

/* ------------------------------------------------------------ gradients */

START_TEST(gradients_through_a_mixed_stack_match_finite_differences)
{
    static const char *const names[] = {"gqa", "mha", "mla"};
    al_model_config c = stack(names, 3, 3, 6, 11);
    al_model m;
    al_err e;
    ck_assert_int_eq(al_model_init(&m, &c, &e), 0);
    al_model_init_weights(&m, 7);
    scale_weights(&m, 20.0f);
    int B = 2, T = 6, in[12], tgt[12];
    random_tokens(in, 12, 11, 1);
    random_tokens(tgt, 12, 11, 2);
    ck_assert_int_eq(al_model_reserve(&m, B, T, &e), 0);
    al_model_forward(&m, in, tgt, NULL, B, T);
    al_model_backward(&m);
    al_rng r;
    al_rng_seed(&r, 3);
    int attn_tensors = 0;
    for (int t = 0; t < m.n_tensors; t++) {
        const al_tensor *ts = &m.tensors[t];
        double err = al_check_model_fd(&m, ts, in, tgt, NULL, B, T, 16, &r);
        ck_assert_msg(err < 2e-2, "%s: grad rel err %g", ts->name, err);
        attn_tensors += strstr(ts->name, ".attn.") != NULL;
    }
    /* gqa and mha have wq wk wv wo; mla (no query latent) wq wqr wkr wdkv kv_norm wuk wuv wo */
    ck_assert_int_eq(attn_tensors, 4 + 4 + 8);
    al_model_free(&m);
}
END_TEST

/* ------------------------------------------------------------ decode */

/* Prefill seq_len tokens, decode the rest of 2 * AL_KV_TILE + 3: every
 * position's logits as the full forward's. */
enum { N_LONG = 2 * AL_KV_TILE + 3, VOC = 64, SEQ = 16 };

static void check_long_decode_of(const al_model_config c, const char *a, const char *b)
{
    enum { N = N_LONG };
    al_model m;
    al_err e;
    ck_assert_int_eq(al_model_init(&m, &c, &e), 0);
    al_model_init_weights(&m, 29);
    scale_weights(&m, 8.0f);
    int *tok = malloc(N * sizeof(int));
    float *full = malloc((size_t)N * VOC * sizeof(float));
    random_tokens(tok, N, VOC, 8);
    ck_assert_int_eq(al_model_reserve(&m, 1, N, &e), 0);
    al_model_forward(&m, tok, NULL, NULL, 1, N);
    memcpy(full, m.logits, (size_t)N * VOC * sizeof(float));
    al_decoder d;
    ck_assert_msg(al_decoder_init(&d, &m, N, AL_KV_F32, &e) == 0, "%s", e.msg);
    ck_assert_msg(al_decoder_prefill(&d, tok, SEQ, &e) == 0, "%s", e.msg);
    double worst = 0, amax = 0;
    for (int t = SEQ; t < N; t++) {
        const float *lg = al_decoder_step(&d, tok[t]);
        for (int i = 0; i < VOC; i++) {
            worst = fmax(worst, fabs((double)lg[i] - full[(size_t)t * VOC + i]));
            amax = fmax(amax, fabs((double)full[(size_t)t * VOC + i]));
        }
    }
    ck_assert_msg(worst < 1e-4, "%s/%s: max |decode - forward| over %d positions = %g", a, b,
                  N, worst);
    ck_assert_msg(amax > 1.0, "logits too small (%g) for the test to bite", amax);
    /* each layer's cache holds its own rows (a bounded layer fewer than N):
     * the bytes are the per-layer sum */
    size_t want = 0, per_token = 0;
    for (int l = 0; l < c.n_layer; l++) {
        size_t el = al_model_layer_kv_elems(&c, l) * sizeof(float);
        per_token += el;
        want += el * (size_t)al_model_layer_kv_rows(&c, l, N);
    }
    ck_assert_uint_eq(al_decoder_cache_bytes(&d), want);
    ck_assert_uint_eq(al_kv_bytes_per_token(&c, AL_KV_F32), per_token);
    al_decoder_free(&d);
    al_model_free(&m);
    free(tok), free(full);
}

static void check_long_decode(const char *a, const char *b)
{
    const char *names[] = {a, b};
    check_long_decode_of(stack(names, 2, 4, SEQ, VOC), a, b);
}

START_TEST(cached_decode_of_a_mixed_stack_equals_the_full_forward_past_a_tile)
{
    check_long_decode("gqa", "mha");
    check_long_decode("mla", "mqa");
}
END_TEST

static void set_setting(al_attn_config *a, const char *name, double v)
{
    for (int k = 0; a->attn->settings && a->attn->settings[k].name; k++)
        if (strcmp(a->attn->settings[k].name, name) == 0) {
            a->set[k] = v;
            return;
        }
    ck_abort_msg("%s has no setting '%s'", a->variant, name);
}

/* Local (window 5, 2 sinks, 2 K/V heads) : global, over 3 layers, so the
 * cycle wraps: layers 0 and 2 keep a ring of 7 rows, layer 1 every row;
 * decode past the window and past two cache tiles equals the forward. */
START_TEST(cached_decode_of_a_local_global_stack_with_sinks_equals_the_full_forward)
{
    const char *names[] = {"local", "mha"};
    al_model_config c = stack(names, 2, 3, SEQ, VOC);
    set_setting(&c.layer_attn[0], "window", 5);
    set_setting(&c.layer_attn[0], "sinks", 2);
    set_setting(&c.layer_attn[0], "n_kv_head", 2);
    ck_assert_int_eq(al_model_layer_kv_rows(&c, 0, N_LONG), 7);
    ck_assert_int_eq(al_model_layer_kv_rows(&c, 1, N_LONG), N_LONG);
    ck_assert_int_eq(al_model_layer_kv_rows(&c, 2, N_LONG), 7);
    check_long_decode_of(c, "local", "mha");
}
END_TEST

/* How far back a stack reaches: position t's logits over a change of token
 * 0 alone. Three local layers (window 5: each reaches 4 back) then one mha
 * reach every position, through the global layer (long_context's 3:1
 * stack, whose passkey scores rest on it); four local layers reach exactly
 * 4 x 4 = 16 back and leave every later position bit for bit. A global
 * layer that kept its neighbours' window, or a window off by one, fails. */
static double change_of_first_token(const char *const *names, int n_layer, int window, int t)
{
    enum { T = 40 };
    al_model_config c = stack(names, n_layer, n_layer, T, VOC);
    for (int k = 0; k < n_layer; k++)
        if (strcmp(names[k], "local") == 0) set_setting(&c.layer_attn[k], "window", window);
    al_model m;
    al_err e;
    ck_assert_msg(al_model_init(&m, &c, &e) == 0, "%s", e.msg);
    al_model_init_weights(&m, 31);
    scale_weights(&m, 4.0f);
    ck_assert_int_eq(al_model_reserve(&m, 1, T, &e), 0);
    int tok[T];
    random_tokens(tok, T, VOC, 12);
    float before[VOC];
    al_model_forward(&m, tok, NULL, NULL, 1, T);
    memcpy(before, m.logits + (size_t)t * VOC, sizeof before);
    tok[0] = (tok[0] + 1) % VOC;
    al_model_forward(&m, tok, NULL, NULL, 1, T);
    double d = 0;
    for (int i = 0; i < VOC; i++)
        d = fmax(d, fabs((double)m.logits[(size_t)t * VOC + i] - before[i]));
    al_model_free(&m);
    return d;
}

START_TEST(a_local_stack_reaches_its_band_and_its_global_layer_everything)
{
    const char *three_one[] = {"local", "local", "local", "mha"};
    const char *four[] = {"local", "local", "local", "local"};
    ck_assert_double_gt(change_of_first_token(three_one, 4, 5, 39), 1e-4);
    ck_assert_double_gt(change_of_first_token(four, 4, 5, 16), 0.0);   /* small, four hops */
    for (int t = 17; t < 40; t += 11)
        ck_assert_msg(change_of_first_token(four, 4, 5, t) == 0.0,
                      "four local layers of window 5 reached 0 from %d", t);
}
END_TEST

/* ------------------------------------------------------------ checkpoints */

START_TEST(a_stack_checkpoint_round_trips_and_old_ones_still_load)
{
    static const char *const names[] = {"gqa", "mla"};
    al_model_config c = stack(names, 2, 3, 8, 256);
    al_model a, b;
    al_err e;
    long step;
    ck_assert_int_eq(al_model_init(&a, &c, &e), 0);
    al_model_init_weights(&a, 5);
    char *dir = al_test_tmpdir(), path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ck_assert_msg(al_checkpoint_save(path, &a, 12, &e) == 0, "%s", e.msg);
    ck_assert_msg(al_checkpoint_load(path, &b, &step, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(step, 12);
    ck_assert_int_eq(b.cfg.n_layer_attn, 2);
    for (int l = 0; l < 3; l++) {
        ck_assert_ptr_eq(b.layers[l].attn, a.layers[l].attn);
        ck_assert_mem_eq(b.layers[l].ashape.set, a.layers[l].ashape.set,
                         sizeof a.layers[l].ashape.set);
    }
    ck_assert_uint_eq(a.n_params, b.n_params);
    ck_assert_mem_eq(a.params, b.params, a.n_params * sizeof(float));
    char *json = al_checkpoint_config_json(&b);
    ck_assert_msg(strstr(json, "\"layer_attention\":[{\"variant\":\"gqa\""), "%s", json);
    free(json);
    al_model_free(&b);
    /* one attention: no list written, and it loads as before */
    al_model_config one;
    ck_assert_int_eq(al_test_tiny_config(&one, V("mqa"), 2, 16, 4, 4, 8, 256), 0);
    al_model_free(&a);
    ck_assert_int_eq(al_model_init(&a, &one, &e), 0);
    ck_assert_int_eq(al_checkpoint_save(path, &a, 1, &e), 0);
    ck_assert_msg(al_checkpoint_load(path, &b, &step, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(b.cfg.n_layer_attn, 0);
    json = al_checkpoint_config_json(&b);
    ck_assert_msg(!strstr(json, "layer_attention") && strstr(json, "\"attention\":{"), "%s",
                  json);
    free(json);
    al_model_free(&a), al_model_free(&b);
    unlink(path);
    rmdir(dir);
    free(dir);
}
END_TEST

/* ------------------------------------------------------------ resume */

START_TEST(resume_refuses_a_changed_list)
{
    char *dir = al_test_tmpdir(), text[4001];
    const char *s = "It is a truth universally acknowledged, that a single man in possession ";
    for (int i = 0; i < 4000; i++) text[i] = s[(i * 7 + i / 13) % strlen(s)];
    text[4000] = 0;
    char *data = al_test_write(dir, "data.txt", text);
    al_config c;
    al_config_defaults(&c);
    snprintf(c.data.source, sizeof c.data.source, "text");
    snprintf(c.data.path, sizeof c.data.path, "%s", data);
    static const char *const names[] = {"gqa", "mha"};
    c.model = stack(names, 2, 2, 16, 256);
    c.train.steps = 12;
    c.train.batch_size = 2;
    c.train.lr = 1e-2;
    c.train.warmup_steps = 2;
    c.train.eval_every = 4;
    c.train.eval_batches = 1;
    c.train.threads = 1;
    al_train_opts o = {.outdir = dir, .stop_after = 4};
    al_train_result r;
    al_err e;
    ck_assert_msg(al_train(&c, &o, &r, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(r.status, AL_TRAIN_STOPPED);
    al_config d = c;
    d.model.layer_attn[1].attn = V("mqa");
    snprintf(d.model.layer_attn[1].variant, sizeof d.model.layer_attn[1].variant, "mqa");
    o.resume = 1;
    o.stop_after = 0;
    ck_assert_int_ne(al_train(&d, &o, &r, &e), 0);
    ck_assert_msg(strstr(e.msg, "cannot resume: 1 key differs from the saved run: "
                                "'model.layer_attention[1]' saved {variant: mha}, now "
                                "{variant: mqa}"), "%s", e.msg);
    ck_assert_ptr_null(strchr(e.msg, '\n'));
    d = c;
    d.model.layer_attn[0].set[0] = 4;
    ck_assert_int_ne(al_train(&d, &o, &r, &e), 0);
    ck_assert_msg(strstr(e.msg, "'model.layer_attention[0]' saved {variant: gqa, n_kv_head: 2}, "
                                "now {variant: gqa, n_kv_head: 4}"), "%s", e.msg);
    /* unchanged, it resumes */
    ck_assert_msg(al_train(&c, &o, &r, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(r.status, AL_TRAIN_OK);
    free(data);
    free(dir);
}
END_TEST

/* ------------------------------------------------------------ commands */

/* `attnlab kv`: a line per layer, and sums that add them up. */
START_TEST(kv_prints_each_layer_and_the_sum)
{
    char *dir = al_test_tmpdir();
    char *path = al_test_write(dir, "kv.yaml",
                               "model:\n  n_layer: 4\n  d_model: 32\n  n_head: 4\n"
                               "  vocab_size: 256\n  layer_attention:\n"
                               "    - {variant: gqa, n_kv_head: 2}\n    - {variant: mha}\n"
                               "    - {variant: mqa}\n");
    char args[4200], *out;
    snprintf(args, sizeof args, "kv %s", path);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    /* d_head 8: gqa 2 * 2 * 8, mha 2 * 4 * 8, mqa 2 * 8 floats; the cycle restarts at layer 3 */
    static const char *const want[] = {
        "variant: gqa-kv2/mha/mqa\n",
        "layer 0: gqa-kv2 kv_elements_per_token=32 kv_bytes_per_token: f32=128 bf16=64 f16=64\n",
        "layer 1: mha kv_elements_per_token=64 kv_bytes_per_token: f32=256 bf16=128 f16=128\n",
        "layer 2: mqa kv_elements_per_token=16 kv_bytes_per_token: f32=64 bf16=32 f16=32\n",
        "layer 3: gqa-kv2 kv_elements_per_token=32 kv_bytes_per_token: f32=128 bf16=64 f16=64\n",
        "kv_elements_per_token: 144\n",
        "kv_bytes_per_token: f32=576 bf16=288 f16=288\n",
        NULL};
    for (int i = 0; want[i]; i++) ck_assert_msg(strstr(out, want[i]), "no '%s' in:\n%s", want[i], out);
    free(out);
    unlink(path);
    free(path);
    rmdir(dir);
    free(dir);
}
END_TEST

/* convert goes layer by layer; a layer no method reaches is refused. */
START_TEST(convert_goes_layer_by_layer)
{
    static const char *const names[] = {"mha", "gqa"};
    al_model_config src = stack(names, 2, 2, 8, 256), dst;
    al_node *to;
    al_err e;
    ck_assert_int_eq(al_yaml_parse("to", "[{variant: mqa}, {variant: gqa, n_kv_head: 2}]", &to,
                                   &e), 0);
    ck_assert_msg(al_convert_target(&src, to, &dst, &e) == 0, "%s", e.msg);
    al_node_free(to);
    ck_assert_int_eq(dst.n_layer_attn, 2);
    ck_assert_int_eq(al_convert_check(&src, &dst, AL_CONVERT_MEAN, &e), 0);
    al_model a, b;
    ck_assert_int_eq(al_model_init(&a, &src, &e), 0);
    ck_assert_int_eq(al_model_init(&b, &dst, &e), 0);
    al_model_init_weights(&a, 3);
    al_convert_opts o = {AL_CONVERT_MEAN, 1, NULL};
    ck_assert_msg(al_convert(&a, &b, &o, &e) == 0, "%s", e.msg);
    /* layer 0 mha -> mqa: the one K head is the mean of the four */
    const float *wk0 = a.params + al_model_tensor(&a, "blocks.0.attn.wk.weight")->offset;
    const float *k0 = b.params + al_model_tensor(&b, "blocks.0.attn.wk.weight")->offset;
    int D = src.d_model, dh = src.d_head;
    for (int i = 0; i < dh * D; i++) {
        double m = 0;
        for (int g = 0; g < 4; g++) m += wk0[(size_t)g * dh * D + i];
        ck_assert_float_eq_tol(k0[i], m / 4, 1e-6);
    }
    /* layer 1 gqa-kv2 -> gqa-kv2: a copy */
    const al_tensor *s1 = al_model_tensor(&a, "blocks.1.attn.wv.weight");
    const al_tensor *d1 = al_model_tensor(&b, "blocks.1.attn.wv.weight");
    ck_assert_mem_eq(a.params + s1->offset, b.params + d1->offset, s1->numel * sizeof(float));
    al_model_free(&b);
    /* gta in layer 1: refused, naming the layer */
    ck_assert_int_eq(al_yaml_parse("to", "[{variant: mqa}, {variant: gta, n_kv_head: 2}]", &to,
                                   &e), 0);
    ck_assert_int_eq(al_convert_target(&src, to, &dst, &e), 0);
    al_node_free(to);
    ck_assert_int_eq(al_convert_check(&src, &dst, AL_CONVERT_MEAN, &e), -1);
    ck_assert_msg(strncmp(e.msg, "convert: layer 1 (gqa -> gta): no method reaches 'gta'", 54) == 0,
                  "%s", e.msg);
    ck_assert_ptr_null(strchr(e.msg, '\n'));
    al_model_free(&a);
}
END_TEST

/* A sweep axis whose values are lists: trial ids join the items by '+',
 * the summary's variant column by '/', the setting columns per item. */
START_TEST(a_sweep_axis_over_the_list)
{
    const char *data = al_test_corpus();
    char *dir = al_test_tmpdir(), text[2048];
    snprintf(text, sizeof text,
             "data: {source: text, path: %s}\n"
             "model: {n_layer: 2, d_model: 16, n_head: 2, seq_len: 16}\n"
             "train: {steps: 4, batch_size: 2, eval_every: 4, eval_batches: 1, threads: 1}\n"
             "sweep:\n  grid:\n    model.layer_attention:\n"
             "      - [{variant: gqa, n_kv_head: 1}, {variant: mha}]\n"
             "      - [{variant: mqa}]\n", data);
    char *path = al_test_write(dir, "s.yaml", text), args[8400], *out;
    snprintf(args, sizeof args, "sweep %s --out %s/res --jobs 1", path, dir);
    ck_assert_msg(al_test_attnlab(args, &out) == 0, "%s", out);
    free(out);
    char sum[4300], *csv;
    size_t n;
    al_err e;
    snprintf(sum, sizeof sum, "%s/res/summary.csv", dir);
    ck_assert_msg(al_read_file(sum, &csv, &n, &e) == 0, "%s", e.msg);
    ck_assert_msg(strstr(csv, "\ngqa-kv1+mha_seed1,gqa-kv1+mha,gqa-kv1+mha,,,true,gqa-kv1/mha,1/-,"),
                  "%s", csv);
    ck_assert_msg(strstr(csv, "\nmqa_seed1,mqa,mqa,,,false,mqa,,"), "%s", csv);
    free(csv);
    snprintf(args, sizeof args, "rm -rf %s", dir);
    ck_assert_int_eq(al_test_run(args, &out), 0);
    free(out), free(path), free(dir);
}
END_TEST

/* A stage's convert.to, or its edit of model.attention, replaces an
 * upstream stack with one attention, the conversion going layer by layer. */
START_TEST(a_stage_converts_a_stack_to_one_attention)
{
    const char *data = al_test_corpus();
    char *dir = al_test_tmpdir(), text[2048];
    snprintf(text, sizeof text,
             "data: {source: text, path: %s}\n"
             "model: {n_layer: 2, d_model: 16, n_head: 2, seq_len: 16,\n"
             "        layer_attention: [{variant: mha}, {variant: gqa, n_kv_head: 1}]}\n"
             "train: {steps: 4, batch_size: 2, eval_every: 4, eval_batches: 1, threads: 1}\n"
             "stages:\n  - name: base\n    sweep: {seeds: 1}\n"
             "  - name: up\n    from: base\n    convert: {to: [mqa], method: [mean]}\n"
             "    steps: [2]\n"
             "  - name: edit\n    from: base\n    model: {attention: {variant: mqa}}\n"
             "    train: {init_convert: first}\n    steps: [2]\n", data);
    char *path = al_test_write(dir, "st.yaml", text), args[8400], *out;
    snprintf(args, sizeof args, "sweep %s --out %s/res --jobs 1", path, dir);
    ck_assert_msg(al_test_attnlab(args, &out) == 0, "%s", out);
    free(out);
    char sum[4300], *csv;
    size_t n;
    al_err e;
    snprintf(sum, sizeof sum, "%s/res/summary.csv", dir);
    ck_assert_msg(al_read_file(sum, &csv, &n, &e) == 0, "%s", e.msg);
    ck_assert_msg(strstr(csv, "\nbase_seed1,base,base,,,true,mha/gqa-kv1,-/1,"), "%s", csv);
    ck_assert_msg(strstr(csv, "\nup_seed1,") && strstr(strstr(csv, "\nup_seed1,"), ",mqa,"),
                  "%s", csv);
    ck_assert_msg(strstr(csv, ",ok,,up,base_seed1,mean,"), "%s", csv);
    /* an edit of the attention replaces the stack as well */
    ck_assert_msg(strstr(csv, "\nedit_seed1,") && strstr(strstr(csv, "\nedit_seed1,"), ",mqa,"),
                  "%s", csv);
    ck_assert_msg(strstr(csv, ",ok,,edit,base_seed1,first,"), "%s", csv);
    free(csv);
    snprintf(args, sizeof args, "rm -rf %s", dir);
    ck_assert_int_eq(al_test_run(args, &out), 0);
    free(out), free(path), free(dir);
}
END_TEST

Suite *layer_attn_suite(void)
{
    Suite *s = suite_create("layer_attn");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, layer_attention_repeats_its_items_over_the_layers);
    tcase_add_test(tc, layer_attention_refusals_name_the_key_and_the_place);
    tcase_add_test(tc, layer_attention_is_written_and_read_back);
    tcase_add_test(tc, a_mixed_stack_counts_the_sum_of_its_layers);
    tcase_add_test(tc, match_params_counts_the_stack);
    tcase_add_test(tc, gradients_through_a_mixed_stack_match_finite_differences);
    tcase_add_test(tc, cached_decode_of_a_mixed_stack_equals_the_full_forward_past_a_tile);
    tcase_add_test(tc, cached_decode_of_a_local_global_stack_with_sinks_equals_the_full_forward);
    tcase_add_test(tc, a_local_stack_reaches_its_band_and_its_global_layer_everything);
    tcase_add_test(tc, a_stack_checkpoint_round_trips_and_old_ones_still_load);
    tcase_add_test(tc, resume_refuses_a_changed_list);
    tcase_add_test(tc, kv_prints_each_layer_and_the_sum);
    tcase_add_test(tc, convert_goes_layer_by_layer);
    tcase_add_test(tc, a_sweep_axis_over_the_list);
    tcase_add_test(tc, a_stage_converts_a_stack_to_one_attention);
    suite_add_tcase(s, tc);
    return s;
}
