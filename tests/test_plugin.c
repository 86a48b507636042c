/*
 * test_plugin.c - variants loaded at run time (src/model/plugin.c): the
 * example plugin (variants/examples/swa, built by meson) is loaded, passes
 * the generic variant loop (decode parity included), matches an independent
 * banded attention, decodes over its window only, trains and generates; broken plugins (tests/plugins/broken.c) are refused with one-line
 * errors; configs and the CLI load plugins before they decode.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "al_checkpoint.h"
#include "al_config_io.h"
#include "al_decode.h"
#include "al_flash.h"
#include "al_plugin.h"
#include "al_registry.h"
#include "al_test.h"
#include "al_test_model.h"
#include "al_train.h"

static const al_variant *load_swa(void)
{
    al_err e;
    ck_assert_msg(al_plugin_load(AL_SWA_PLUGIN, &e) == 0, "%s", e.msg);
    const al_variant *v = al_variant_find("swa");
    ck_assert_ptr_nonnull(v);
    return v;
}

static int variant_index(const char *name)
{
    for (int i = 0; i < al_variant_count(); i++)
        if (strcmp(al_variant_at(i)->name, name) == 0) return i;
    return -1;
}

/* Loading a broken plugin: must fail, register nothing, and say `want`. */
static void expect_refusal(const char *path, const char *want, const char *want2)
{
    al_err e = {{0}};
    int before = al_variant_count();
    ck_assert_int_ne(al_plugin_load(path, &e), 0);
    ck_assert_int_eq(al_variant_count(), before);
    ck_assert_msg(strstr(e.msg, path) && strstr(e.msg, want), "%s", e.msg);
    ck_assert_msg(!want2 || strstr(e.msg, want2), "%s", e.msg);
    ck_assert_ptr_null(strchr(e.msg, '\n'));
}

static char *broken(const char *kind)
{
    static char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/libbroken_%s.so", AL_BROKEN_PLUGIN_DIR, kind);
    return path;
}

/* ------------------------------------------------------------ loading */

START_TEST(example_plugin_registers_with_its_path_as_origin)
{
    int before = al_variant_count();
    const al_variant *v = load_swa();
    ck_assert_int_eq(al_variant_count(), before + 1);
    ck_assert_str_eq(al_variant_origin(variant_index("swa")), AL_SWA_PLUGIN);
    ck_assert_str_eq(al_variant_origin(variant_index("mha")), "built-in");
    ck_assert_int_eq(v->api_version, AL_VARIANT_API_VERSION);
    /* the same file again (as --plugin and in the config) is not a clash */
    load_swa();
    ck_assert_int_eq(al_variant_count(), before + 1);
}
END_TEST

START_TEST(example_plugin_passes_the_generic_variant_checks)
{
    al_test_variant_generic(load_swa());
}
END_TEST

/* ------------------------------------------------------------ the example's numbers */

typedef struct swa_run {
    al_attn_shape s;
    const al_variant *v;
    void *ctx;
    int B, T, np;
    al_param_spec spec[AL_MAX_ATTN_PARAMS];
    float *p[AL_MAX_ATTN_PARAMS], *x, *out, *act, *scratch;
} swa_run;

/* A forward of v at B 2, T 7 under the training kernel `kernel`. */
static void swa_run_kernel(swa_run *r, const al_variant *v, int window, int causal, int kernel)
{
    memset(r, 0, sizeof *r);
    r->s = (al_attn_shape){16, 4, 4, 7, causal, 10000.0f, 1e-5f, {window}, .rope = {.base = 0}};
    r->s.attn_kernel = kernel;
    r->B = 2;
    r->T = 7;
    r->v = v;
    r->ctx = al_test_ctx(v, &r->s);
    r->np = v->train->params(r->ctx, r->spec);
    al_rng g;
    al_rng_seed(&g, 3);
    for (int i = 0; i < r->np; i++) {
        size_t n = (size_t)r->spec[i].rows * r->spec[i].cols;
        r->p[i] = malloc(n * sizeof(float));
        for (size_t j = 0; j < n; j++) r->p[i][j] = 0.5f * (float)al_rng_normal(&g);
    }
    size_t BTD = (size_t)r->B * r->T * 16;
    r->x = malloc(BTD * sizeof(float));
    for (size_t j = 0; j < BTD; j++) r->x[j] = (float)al_rng_normal(&g);
    r->out = calloc(BTD, sizeof(float));
    r->act = calloc(v->train->act_floats(r->ctx, r->B, r->T), sizeof(float));
    r->scratch = calloc(v->train->scratch_floats(r->ctx, r->B, r->T), sizeof(float));
    v->train->forward(r->ctx, r->out, r->act, r->scratch, r->x, r->p, r->B, r->T);
}

static void swa_run_init(swa_run *r, const al_variant *v, int window, int causal)
{
    swa_run_kernel(r, v, window, causal, AL_ATTN_FUSED);
}

static void swa_run_free(swa_run *r)
{
    for (int i = 0; i < r->np; i++) free(r->p[i]);
    free(r->x), free(r->out), free(r->act), free(r->scratch);
    r->v->fini(r->ctx);
}

/* y of head h at (b, t), in double, from the saved q, k, v: softmax over
 * the keys the window allows, written out by hand. */
static double band_ref(const swa_run *r, int b, int t, int h, int c, int window)
{
    int T = r->T, Hd = 16, dh = 4;
    size_t n = (size_t)r->B * T * Hd;
    const float *q = r->act, *k = q + n, *v = k + n;
    double w[16], mx = -1e300, z = 0, y = 0;
    for (int s = 0; s < T; s++) {
        int ok = r->s.causal ? (s <= t && t - s < window) : abs(t - s) < window;
        w[s] = -INFINITY;
        if (!ok) continue;
        double dot = 0;
        for (int d = 0; d < dh; d++)
            dot += (double)q[(b * T + t) * Hd + h * dh + d] * k[(b * T + s) * Hd + h * dh + d];
        w[s] = dot / 2.0;   /* sqrt(d_head) */
        mx = fmax(mx, w[s]);
    }
    for (int s = 0; s < T; s++) z += w[s] == -INFINITY ? 0 : exp(w[s] - mx);
    for (int s = 0; s < T; s++)
        if (w[s] != -INFINITY) y += exp(w[s] - mx) / z * v[(b * T + s) * Hd + h * dh + c];
    return y;
}

/* The example attends through the core's training kernel (al_flash.h, the
 * SDK's): under each of fused, dense and rows, the same banded attention,
 * and what it saves is the kernel's (dense: the (T, T) probabilities of
 * every head, T x (T - 1) floats a head more than fused). */
START_TEST(swa_matches_an_independent_banded_attention)
{
    const al_variant *v = load_swa();
    static const int kernels[] = {AL_ATTN_FUSED, AL_ATTN_DENSE, AL_ATTN_ROWS};
    size_t act[3];
    for (int i = 0; i < 6; i++) {
        int causal = i / 3, kn = i % 3;
        swa_run r;
        swa_run_kernel(&r, v, 3, causal, kernels[kn]);
        act[kn] = v->train->act_floats(r.ctx, r.B, r.T);
        size_t n = (size_t)r.B * r.T * 16;
        const float *y = r.act + 3 * n;
        double err = 0;
        for (int b = 0; b < r.B; b++)
            for (int t = 0; t < r.T; t++)
                for (int h = 0; h < 4; h++)
                    for (int c = 0; c < 4; c++)
                        err = fmax(err, fabs(y[(b * r.T + t) * 16 + h * 4 + c] -
                                             band_ref(&r, b, t, h, c, 3)));
        ck_assert_msg(err < 1e-5, "causal=%d kernel %d: max error %g", causal, kernels[kn], err);
        swa_run_free(&r);
    }
    ck_assert_uint_eq(act[1] - act[0], (size_t)2 * 4 * 7 * 6);   /* B H T (T - 1) */
}
END_TEST

START_TEST(swa_with_a_window_over_the_whole_sequence_is_mha)
{
    const al_variant *v = load_swa(), *mha = al_variant_find("mha");
    swa_run a, b, narrow;
    swa_run_init(&a, v, 7, 1);
    swa_run_init(&b, mha, 0, 1);
    swa_run_init(&narrow, v, 2, 1);
    double d = 0, dn = 0;
    for (size_t j = 0; j < (size_t)a.B * a.T * 16; j++) {
        d = fmax(d, fabs(a.out[j] - b.out[j]));
        dn = fmax(dn, fabs(narrow.out[j] - b.out[j]));
    }
    ck_assert_msg(d < 1e-5, "window 7 differs from mha by %g", d);
    ck_assert_msg(dn > 1e-3, "window 2 equals mha");
    /* the cache row is mha's: the window bounds how many rows, not their size */
    ck_assert_uint_eq(v->decode->kv_elems(a.ctx), mha->decode->kv_elems(b.ctx));
    ck_assert_uint_eq(v->decode->kv_elems(a.ctx), 2 * 4 * 4);
    swa_run_free(&a), swa_run_free(&b), swa_run_free(&narrow);
}
END_TEST

/* Decoding reads only the window: rows older than window - 1 positions can
 * hold anything without changing a bit of the next logits, while the
 * oldest row inside the window does change them. */
static void overwrite_row(al_decoder *d, int dst, float *row)
{
    for (int l = 0; l < d->m->cfg.n_layer; l++) al_kv_row_put(d->cache[l], dst, row);
}

START_TEST(swa_decode_reads_only_the_window)
{
    const al_variant *v = load_swa();
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, v, 2, 16, 4, 4, 12, 11), 0);
    c.attn_set[0] = 3;
    al_model m;
    al_err e;
    ck_assert_msg(al_model_init(&m, &c, &e) == 0, "%s", e.msg);
    al_model_init_weights(&m, 5);
    static const int tok[9] = {1, 7, 3, 9, 2, 5, 10, 4, 6};
    float ref[11], junk[64];
    for (int i = 0; i < 64; i++) junk[i] = (float)(i % 7) - 3.0f;
    ck_assert_uint_le(v->decode->kv_elems(m.layers[0].ctx), 64);
    for (int pass = 0; pass < 3; pass++) {   /* clean, junk outside, junk inside the window */
        al_decoder d;
        ck_assert_int_eq(al_decoder_init(&d, &m, 12, AL_KV_F32, &e), 0);
        ck_assert_int_eq(al_decoder_prefill(&d, tok, 8, &e), 0);
        if (pass == 1) for (int t = 0; t <= 5; t++) overwrite_row(&d, t, junk);
        if (pass == 2) overwrite_row(&d, 6, junk);
        const float *lg = al_decoder_step(&d, tok[8]);   /* position 8 reads rows 6, 7, 8 */
        if (pass == 0) memcpy(ref, lg, sizeof ref);
        if (pass == 1) ck_assert_mem_eq(lg, ref, sizeof ref);
        double diff = 0;
        for (int i = 0; i < 11; i++) diff = fmax(diff, fabs(lg[i] - ref[i]));
        if (pass == 2) ck_assert_msg(diff > 1e-4, "row 6 is in the window: %g", diff);
        al_decoder_free(&d);
    }
    al_model_free(&m);
}
END_TEST

/* A repeated string of distinct bytes: each byte determines the next, which
 * a window of 2 can see. Variant `name` (its plugin loaded) learns it. */
static void trains_a_window_of_2(const char *name)
{
    char *dir = al_test_tmpdir(), text[3201];
    for (int i = 0; i < 3200; i++) text[i] = "abcdefghijklmnop"[i % 16];
    text[3200] = 0;
    char *data = al_test_write(dir, "rep.txt", text);
    char yaml[8192];
    snprintf(yaml, sizeof yaml,
             "data: {path: %s}\n"
             "model: {n_layer: 1, d_model: 32, n_head: 2, d_head: 16, seq_len: 16,\n"
             "        attention: {variant: %s, window: 2}}\n"
             "train: {steps: 60, batch_size: 8, lr: 1.0e-2, min_lr: 1.0e-3, warmup_steps: 5,\n"
             "        eval_every: 60, eval_batches: 2, threads: 1}\n", data, name);
    char *cfg = al_test_write(dir, "c.yaml", yaml);
    al_config c;
    al_err e;
    ck_assert_msg(al_plugin_config_load(cfg, NULL, 0, &c, &e) == 0, "%s", e.msg);
    ck_assert_str_eq(c.model.variant, name);
    ck_assert_int_eq((int)c.model.attn_set[0], 2);
    al_train_opts o = {.outdir = dir};
    al_train_result r;
    ck_assert_msg(al_train(&c, &o, &r, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(r.status, AL_TRAIN_OK);
    ck_assert_msg(r.val_loss < 0.5, "%s: val loss %g (ln 16 = 2.77 knows only the alphabet)",
                  name, r.val_loss);
    free(data), free(cfg), free(dir);
}

START_TEST(example_plugin_trains_through_al_train)
{
    load_swa();
    trains_a_window_of_2("swa");
}
END_TEST

/* The example as written for interface version 3, built against the
 * version-4 header (tests/plugins/swa_v4.c): it loads through the adapter,
 * passes the conformance suite (decode, prefill, batches and cache bytes
 * included), trains, and computes what the version-5 example computes
 * (its attention written out, the example's through the core's kernel:
 * equal to rounding). */
START_TEST(a_plugin_built_against_the_v4_header_loads_checks_trains_and_decodes)
{
    al_err e;
    ck_assert_msg(al_plugin_load(AL_SWA_V4_PLUGIN, &e) == 0, "%s", e.msg);
    const al_variant *old = al_variant_find("swa_v4");
    ck_assert_ptr_nonnull(old);
    ck_assert_int_eq(old->api_version, AL_VARIANT_API_VERSION);   /* wrapped */
    ck_assert(al_variant_decodes(old));
    al_test_variant_generic(old);
    trains_a_window_of_2("swa_v4");
    swa_run a, b;
    swa_run_init(&a, old, 3, 1);
    swa_run_init(&b, load_swa(), 3, 1);
    size_t n = (size_t)a.B * a.T * 16;
    double worst = 0, amax = 0;   /* hand-written attention against the core's kernel */
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)a.out[i] - b.out[i]));
        amax = fmax(amax, fabs((double)a.out[i]));
    }
    ck_assert_msg(amax > 0.1 && worst <= 1e-5 * amax, "max |v4 - v5| %g of %g", worst, amax);
    swa_run_free(&a), swa_run_free(&b);
}
END_TEST

/* ------------------------------------------------------------ refusals */

START_TEST(plugin_for_another_interface_version_is_refused_with_both_numbers)
{
    char want[128], have[64];
    snprintf(want, sizeof want, "built for variant interface version %d",
             AL_VARIANT_API_VERSION + 7);
    snprintf(have, sizeof have, "this attnlab has version %d", AL_VARIANT_API_VERSION);
    expect_refusal(broken("bad_plugin_version"), want, have);
    /* the entry is current, its table is not */
    snprintf(want, sizeof want, "variant 'tp_first' was built for interface version %d",
             AL_VARIANT_API_VERSION + 41);
    expect_refusal(broken("bad_table_version"), want, have);
    ck_assert_ptr_null(al_variant_find("tp_first"));
}
END_TEST

START_TEST(plugin_without_entry_point_or_usable_variants_is_refused)
{
    expect_refusal(broken("no_entry"), "no entry point 'attnlab_plugin_variants'", NULL);
    expect_refusal(broken("empty"), "exports no variants", NULL);
    expect_refusal(broken("bad_name"), "variant name 'sliding window' must be 1 to 63 letters",
                   NULL);
}
END_TEST

START_TEST(duplicate_name_is_refused_and_the_plugin_loads_not_at_all)
{
    expect_refusal(broken("duplicate"), "variant 'mha' is already registered by built-in",
                   NULL);
    ck_assert_ptr_null(al_variant_find("tp_first"));   /* registered first, then dropped */
    /* a second copy of the example at another path clashes with the first */
    load_swa();
    char *dir = al_test_tmpdir(), cmd[4 * PATH_MAX], copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s/libswa_copy.so", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", AL_SWA_PLUGIN, copy);
    ck_assert_int_eq(al_test_run(cmd, NULL), 0);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "variant 'swa' is already registered by %s", AL_SWA_PLUGIN);
    expect_refusal(copy, want, NULL);
    free(dir);
}
END_TEST

START_TEST(files_that_are_not_plugins_are_refused)
{
    char *dir = al_test_tmpdir();
    char *text = al_test_write(dir, "libnot.so", "this is not an ELF file\n");
    expect_refusal(text, "not a loadable shared object (", NULL);
    char missing[PATH_MAX];
    snprintf(missing, sizeof missing, "%s/nope.so", dir);
    expect_refusal(missing, "cannot load plugin: No such file or directory", NULL);
    expect_refusal(dir, "not a regular file", NULL);
    expect_refusal(broken("undefined"), "undefined symbol: al_kernel_from_the_future", NULL);
    free(text), free(dir);
}
END_TEST

/* ------------------------------------------------------------ configs */

START_TEST(config_plugins_load_before_the_variant_is_decoded)
{
    char *dir = al_test_tmpdir(), link[PATH_MAX], real[PATH_MAX], cmd[3 * PATH_MAX];
    snprintf(link, sizeof link, "%s/sub", dir);
    snprintf(cmd, sizeof cmd, "mkdir '%s' && ln -s '%s' '%s/libswa.so'", link, AL_SWA_PLUGIN,
             link);
    ck_assert_int_eq(al_test_run(cmd, NULL), 0);
    /* relative to the YAML file, not to the current directory */
    char *cfg = al_test_write(dir, "c.yaml", "plugins: [sub/libswa.so]\n"
                              "model: {attention: {variant: swa, window: 5}}\n");
    al_config c;
    al_err e;
    ck_assert_msg(al_plugin_config_load(cfg, NULL, 0, &c, &e) == 0, "%s", e.msg);
    ck_assert_ptr_eq(c.model.attn, al_variant_find("swa"));
    ck_assert_int_eq(c.n_plugins, 1);
    ck_assert_ptr_nonnull(realpath(AL_SWA_PLUGIN, real));
    ck_assert_str_eq(c.plugins[0], real);   /* absolute: the written config loads anywhere */
    free(cfg);
    cfg = al_test_write(dir, "bad.yaml", "model: {n_layer: 1}\nplugins: [nope.so]\n");
    ck_assert_int_ne(al_plugin_config_load(cfg, NULL, 0, &c, &e), 0);
    char want[4 * PATH_MAX];
    snprintf(want, sizeof want, "%s:2:11: error: plugin 'nope.so': No such file or directory "
             "(looked for '%s/nope.so')", cfg, dir);
    ck_assert_str_eq(e.msg, want);
    free(cfg);
    snprintf(want, sizeof want, "plugins: [%s]\n", broken("bad_plugin_version"));
    cfg = al_test_write(dir, "old.yaml", want);
    ck_assert_int_ne(al_plugin_config_load(cfg, NULL, 0, &c, &e), 0);
    snprintf(want, sizeof want, "%s:1:11: error: ", cfg);
    ck_assert_msg(strncmp(e.msg, want, strlen(want)) == 0 && strstr(e.msg, "version"), "%s",
                  e.msg);
    free(cfg), free(dir);
}
END_TEST

/* The shipped sweep file: every point of its grid decodes, plugin included
 * (the sweep runner expands the grid the same way: a value replaces the
 * subtree at its key path). */
START_TEST(plugin_sweep_file_decodes_at_every_grid_point)
{
    char path[PATH_MAX], set[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/experiments/plugin_vs_builtins.yaml", al_test_srcdir());
    al_node *root;
    al_err e;
    ck_assert_msg(al_yaml_load(path, &root, &e) == 0, "%s", e.msg);
    snprintf(set, sizeof set, "plugins=[%s]", AL_SWA_PLUGIN);   /* this build's copy */
    ck_assert_int_eq(al_node_apply_set(root, set, &e), 0);
    ck_assert_msg(al_plugin_load_listed(root, &e) == 0, "%s", e.msg);
    const al_node *grid = al_node_get(al_node_get(root, "sweep"), "grid");
    const al_node *axis = grid ? al_node_get(grid, "model.attention") : NULL;
    ck_assert_ptr_nonnull(axis);
    int n_swa = 0, n_builtin = 0;
    for (int i = 0; i < axis->n; i++) {
        al_config c;
        ck_assert_int_eq(al_node_set_path(root, "model.attention", axis->items[i], 0, &e), 0);
        ck_assert_msg(al_config_decode(root, &c, &e) == 0, "%s", e.msg);
        if (strcmp(c.model.variant, "swa") == 0) n_swa++;
        else n_builtin++;
    }
    ck_assert_int_eq(n_swa, 2);
    ck_assert_int_ge(n_builtin, 4);
    al_node_free(root);
}
END_TEST

/* ------------------------------------------------------------ the CLI */

static const char *line_starting(const char *out, const char *prefix)
{
    for (const char *l = out; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, prefix, strlen(prefix)) == 0) return l;
    return NULL;
}

START_TEST(variants_command_lists_plugins_with_their_origin)
{
    char args[PATH_MAX + 64], *out, want[PATH_MAX + 64];
    snprintf(args, sizeof args, "variants --plugin %s", AL_SWA_PLUGIN);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    const char *swa = line_starting(out, "swa "), *gqa = line_starting(out, "gqa ");
    ck_assert_msg(swa && gqa, "%s", out);
    snprintf(want, sizeof want, "origin=%s  --", AL_SWA_PLUGIN);
    ck_assert_msg(strstr(swa, "window=required") && strstr(swa, want), "%s", out);
    ck_assert_msg(strstr(gqa, "n_kv_head=required") && strstr(gqa, "origin=built-in"), "%s",
                  out);
    free(out);
    ck_assert_int_eq(al_test_attnlab("variants", &out), 0);
    ck_assert_ptr_null(line_starting(out, "swa "));
    free(out);
    snprintf(args, sizeof args, "variants --plugin %s", broken("bad_plugin_version"));
    ck_assert_int_eq(al_test_attnlab(args, &out), 2);
    ck_assert_msg(strstr(out, "interface version") && strchr(out, '\n') == out + strlen(out) - 1,
                  "%s", out);
    free(out);
}
END_TEST

/* `keys --plugin`: the plugin's settings among model.attention's rows of
 * the key table; without it, no such row. */
START_TEST(keys_command_lists_a_plugins_settings)
{
    char args[PATH_MAX + 64], *out, want[2 * PATH_MAX];
    snprintf(args, sizeof args, "keys --plugin %s", AL_SWA_PLUGIN);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    snprintf(want, sizeof want, "| `model.attention.window` | required | swa: positions each "
             "query attends to");
    const char *row = strstr(out, want);   /* after local's own `window` row */
    ck_assert_msg(row && row[-1] == '\n', "%s", out);
    ck_assert_msg(row > strstr(out, "| `model.attention.d_q_latent` |") &&
                  row < strstr(out, "| `train.steps` |"), "not among the attention keys: %s", out);
    free(out);
    ck_assert_int_eq(al_test_attnlab("keys", &out), 0);
    ck_assert_ptr_null(strstr(out, "| swa: "));
    free(out);
    ck_assert_int_eq(al_test_attnlab("keys --plugin", &out), 2);
    ck_assert_msg(strstr(out, "keys: missing the value of --plugin (--plugin PATH)"), "%s", out);
    free(out);
}
END_TEST

/* ------------------------------------------------------------ tables in memory */

static size_t st_one(const void *ctx, int B, int T) { return 1; }
static size_t st_kv(const void *ctx) { return 1; }
static int st_params(const void *ctx, al_param_spec *out)
{
    out[0] = (al_param_spec){"w", al_ctx_shape(ctx)->d_model, al_ctx_shape(ctx)->d_model,
                             AL_INIT_NORMAL};
    return 1;
}
static void st_fwd(const void *ctx, float *out, float *act, float *scratch,
                   const float *x, float *const *p, int B, int T) {}
static void st_bwd(const void *ctx, float *dx, float *const *dp, float *scratch,
                   const float *dout, const float *x, const float *act, float *const *p,
                   int B, int T) {}
static const al_variant_train st_train = {st_params, st_one, st_one, st_fwd, st_bwd, 0};
static const al_variant_decode st_decode = {.kv_elems = st_kv};

static al_variant mem_table;
static const al_variant *mem_list[] = {&mem_table, NULL};
static const al_variant *const *mem_entry(int *v)
{
    *v = AL_VARIANT_API_VERSION;
    return mem_list;
}

/* mem_table with settings s registered: refused with want in the message,
 * naming the plugin, nothing left registered. */
static void expect_table_refused(const al_setting *s, const char *name, const char *want)
{
    mem_table = (al_variant){.api_version = AL_VARIANT_API_VERSION, .name = name,
                             .settings = s, .train = &st_train, .decode = &st_decode};
    int before = al_variant_count();
    al_err e;
    ck_assert_msg(al_plugin_register_entry(mem_entry, "/x/libmem.so", &e) != 0, "accepted: %s",
                  want);
    ck_assert_msg(strstr(e.msg, want) && strstr(e.msg, "/x/libmem.so"), "'%s' not in: %s",
                  want, e.msg);
    ck_assert_int_eq(al_variant_count(), before);
}

/* What the registry checks of a table before anything trusts it. */
START_TEST(malformed_tables_are_refused_naming_the_plugin)
{
    al_setting two[] = {{"k", AL_SET_INT, 1, 0, "h"}, {"k", AL_SET_INT, 2, 0, "h"}, {NULL}};
    expect_table_refused(two, "tp_mem", "declares setting 'k' twice");
    al_setting kind[] = {{"k", 7, 1, 0, "h"}, {NULL}};
    expect_table_refused(kind, "tp_mem", "setting 'k' has kind 7");
    al_setting half[] = {{"k", AL_SET_INT, 1.5, 0, "h"}, {NULL}};
    expect_table_refused(half, "tp_mem", "has default 1.5, not a finite whole number");
    al_setting nan[] = {{"k", AL_SET_FLOAT, NAN, 0, "h"}, {NULL}};
    expect_table_refused(nan, "tp_mem", "has default nan");
    al_setting spaced[] = {{"a key", AL_SET_INT, 1, 0, "h"}, {NULL}};
    expect_table_refused(spaced, "tp_mem", "setting 1 must be named by 1 to 63 letters");
    al_setting variant[] = {{"variant", AL_SET_INT, 1, 0, "h"}, {NULL}};
    expect_table_refused(variant, "tp_mem", "(and not 'variant')");
    al_setting many[AL_MAX_SETTINGS + 2];
    for (int i = 0; i <= AL_MAX_SETTINGS; i++)
        many[i] = (al_setting){"k", AL_SET_INT, 1, 0, "h"};
    many[AL_MAX_SETTINGS + 1] = (al_setting){NULL};
    expect_table_refused(many, "tp_mem", "declares more than 8 settings");
    expect_table_refused(NULL, "line\nbreak", "variant name 'line?break' must be 1 to 63");
    /* a table that says it has no version: nothing past api_version is read */
    static const int not_a_table = -7;
    mem_list[0] = (const al_variant *)(const void *)&not_a_table;
    al_err e;
    ck_assert_int_ne(al_plugin_register_entry(mem_entry, "/x/libmem.so", &e), 0);
    ck_assert_msg(strstr(e.msg, "a variant table claims interface version -7"), "%s", e.msg);
    mem_list[0] = &mem_table;
    /* and a good one registers, then goes */
    int before = al_variant_count();
    al_setting ok[] = {{"k", AL_SET_INT, 2, 0, "h"}, {NULL}};
    mem_table.settings = ok;
    mem_table.name = "tp_mem";
    ck_assert_msg(al_plugin_register_entry(mem_entry, "/x/libmem.so", &e) == 0, "%s", e.msg);
    const al_variant *got = al_variant_find("tp_mem");   /* the registry's copy */
    ck_assert_ptr_nonnull(got);
    ck_assert_ptr_eq(got->train->forward, st_fwd);
    al_variant_truncate(before);
}
END_TEST

/* --plugin on a command that reads a config: the variant resolves, its
 * cache is counted, and the resolved config names the plugin. */
/* A plugin variant's checkpoint: without the plugin, the error names the
 * file to pass; with it, `score` equals the mean loss computed here over the
 * same windows from the checkpoint loaded in-process. */
static void check_plugin_checkpoint_scores(const char *dir, const char *data)
{
    char args[4 * PATH_MAX], *out, ckpt[PATH_MAX + 64], want[PATH_MAX + 64];
    snprintf(ckpt, sizeof ckpt, "%s/run/model.safetensors", dir);
    snprintf(args, sizeof args, "score %s %s", ckpt, data);
    ck_assert_int_eq(al_test_attnlab(args, &out), 2);
    snprintf(want, sizeof want, "pass --plugin %s", AL_SWA_PLUGIN);
    ck_assert_msg(strstr(out, want), "%s", out);
    free(out);
    snprintf(args, sizeof args, "score %s %s --plugin %s", ckpt, data, AL_SWA_PLUGIN);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    const char *line = strstr(out, "loss=");
    ck_assert_ptr_nonnull(line);
    double cli = atof(line + 5);
    free(out);
    load_swa();
    al_model m;
    al_err e;
    ck_assert_msg(al_checkpoint_load(ckpt, &m, NULL, &e) == 0, "%s", e.msg);
    enum { T = 8 };
    int in[T], tgt[T];
    size_t n = 2000;
    double sum = 0;
    int windows = 0;
    al_model_reserve(&m, 1, T, &e);
    for (size_t j = 0; j * T + T + 1 <= n; j++, windows++) {
        for (int t = 0; t < T; t++) {
            in[t] = "abcdefgh"[(j * T + t) % 8];
            tgt[t] = "abcdefgh"[(j * T + t + 1) % 8];
        }
        sum += al_model_forward(&m, in, tgt, NULL, 1, T);
    }
    ck_assert_double_eq_tol(cli, sum / windows, 1e-5);
    al_model_free(&m);
}

START_TEST(train_and_kv_accept_plugin_and_record_it)
{
    char *dir = al_test_tmpdir(), text[2001];
    for (int i = 0; i < 2000; i++) text[i] = "abcdefgh"[i % 8];
    text[2000] = 0;
    char *data = al_test_write(dir, "d.txt", text), yaml[PATH_MAX + 512];
    snprintf(yaml, sizeof yaml,
             "data: {path: %s}\n"
             "model: {n_layer: 3, d_model: 16, n_head: 2, d_head: 8, seq_len: 8,\n"
             "        attention: {variant: swa, window: 4}}\n"
             "train: {steps: 3, batch_size: 2, eval_every: 3, eval_batches: 1, threads: 1}\n",
             data);
    char *cfg = al_test_write(dir, "c.yaml", yaml), args[4 * PATH_MAX], *out;
    snprintf(args, sizeof args, "kv %s", cfg);
    ck_assert_int_eq(al_test_attnlab(args, &out), 2);
    ck_assert_msg(strstr(out, "needs --plugin PATH"), "%s", out);
    free(out);
    snprintf(args, sizeof args, "kv %s --plugin %s", cfg, AL_SWA_PLUGIN);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    /* 3 layers * (k, v) * 2 heads * 8 */
    ck_assert_msg(strstr(out, "kv_elements_per_token: 96\n"), "%s", out);
    free(out);
    snprintf(args, sizeof args, "train %s --plugin %s --out %s/run", cfg, AL_SWA_PLUGIN, dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    free(out);
    /* the written config loads without --plugin */
    snprintf(args, sizeof args, "kv %s/run/config.yaml", dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    ck_assert_msg(strstr(out, "kv_elements_per_token: 96\n"), "%s", out);
    free(out);
    check_plugin_checkpoint_scores(dir, data);
    free(data), free(cfg), free(dir);
}
END_TEST

/* `attnlab generate` from a swa checkpoint, as a user runs it: a model
 * trained by `attnlab train --plugin` on a repeated string (every 4 bytes
 * of it determine the next, which a window of 4 sees) continues it
 * greedily, and --stats measures mha's row per token for the whole
 * context. Without --plugin the error names the file to pass. */
static int run_generate(const char *dir, const char *args, char **out, char **err)
{
    char cmd[8 * PATH_MAX], errpath[PATH_MAX + 16];
    snprintf(errpath, sizeof errpath, "%s/err.txt", dir);
    snprintf(cmd, sizeof cmd, "{ %s generate %s/run/model.safetensors %s 2>%s; }",
             al_test_binary(), dir, args, errpath);
    int rc = al_test_run(cmd, out);
    size_t n;
    al_err e;
    if (al_read_file(errpath, err, &n, &e) != 0) *err = strdup("");
    return rc;
}

START_TEST(generate_continues_a_string_from_a_swa_checkpoint)
{
    static const char period[] = "hello world! ";
    char *dir = al_test_tmpdir(), text[5201], yaml[PATH_MAX + 512], args[4 * PATH_MAX];
    for (int i = 0; i < 5200; i++) text[i] = period[i % 13];
    text[5200] = 0;
    char *data = al_test_write(dir, "d.txt", text), *out, *err;
    snprintf(yaml, sizeof yaml,
             "data: {path: %s}\n"
             "model: {n_layer: 1, d_model: 32, n_head: 4, d_head: 8, seq_len: 24,\n"
             "        attention: {variant: swa, window: 4}}\n"
             "train: {steps: 150, batch_size: 8, lr: 3e-3, min_lr: 3e-3, warmup_steps: 0,\n"
             "        weight_decay: 0, eval_every: 150, eval_batches: 2, threads: 1}\n", data);
    char *cfg = al_test_write(dir, "c.yaml", yaml);
    snprintf(args, sizeof args, "train %s --plugin %s --out %s/run", cfg, AL_SWA_PLUGIN, dir);
    ck_assert_msg(al_test_attnlab(args, &out) == 0, "%s", out);
    free(out);
    ck_assert_int_eq(run_generate(dir, "--prompt 'hello w' --tokens 17 --temperature 0", &out,
                                  &err), 2);
    ck_assert_msg(strstr(err, "pass --plugin ") && strstr(err, AL_SWA_PLUGIN), "%s", err);
    free(out), free(err);
    snprintf(args, sizeof args, "--plugin %s --prompt 'hello w' --tokens 17 --temperature 0 "
             "--stats", AL_SWA_PLUGIN);
    ck_assert_int_eq(run_generate(dir, args, &out, &err), 0);
    ck_assert_msg(!strcmp(out, "orld! hello world"), "greedy gave '%s' (%s)", out, err);
    /* by hand: 1 layer * (k, v) * 4 heads * 8 floats * 4 bytes, for 24 positions */
    ck_assert_msg(strstr(err, "kv_bytes_per_token=256") && strstr(err, "kv_cache_bytes=6144"),
                  "%s", err);
    free(out), free(err), free(cfg), free(data), free(dir);
}
END_TEST

/* What a researcher outside this tree does: install the headers and the .pc
 * file, build the example on its own through pkg-config, load it. */
START_TEST(example_builds_alone_against_the_installed_headers)
{
    if (al_test_run("command -v meson && command -v ninja && command -v pkg-config", NULL)) {
        printf("skipped: meson, ninja or pkg-config not on PATH\n");
        return;
    }
    char *dir = al_test_tmpdir(), cmd[8 * PATH_MAX], *out;
    snprintf(cmd, sizeof cmd,
             "set -e; d='%s'; meson install --no-rebuild -C '%s' --destdir \"$d/root\" "
             ">/dev/null; pc=$(dirname \"$(find \"$d/root\" -name attnlab-variant.pc)\"); "
             "cp -r '%s/variants/examples/swa' \"$d/swa\"; cd \"$d/swa\"; "
             "PKG_CONFIG_SYSROOT_DIR=\"$d/root\" PKG_CONFIG_PATH=\"$pc\" PKG_CONFIG_LIBDIR= "
             "meson setup b >/dev/null; ninja -C b >/dev/null; "
             "grep -o -- '-I[^ ]*attnlab' b/build.ninja | sort -u; "
             "'%s' variants --plugin b/libattnlab_swa.so",
             dir, AL_BUILD_DIR, al_test_srcdir(), al_test_binary());
    ck_assert_msg(al_test_run(cmd, &out) == 0, "%s", out);
    snprintf(cmd, sizeof cmd, "-I%s/root/", dir);
    ck_assert_msg(strstr(out, cmd), "not built against the installed headers:\n%s", out);
    ck_assert_msg(line_starting(out, "swa ") && strstr(out, "origin=b/libattnlab_swa.so"),
                  "%s", out);
    free(out), free(dir);
}
END_TEST

/* The SDK's install is the folder include/attnlab/ as it is in the tree,
 * and a plugin written for the previous layout (quoted includes of the
 * headers by their bare names) still builds against it unchanged, through
 * the .pc file's second include directory. */
START_TEST(installed_sdk_is_the_include_folder_and_old_style_includes_still_build)
{
    if (al_test_run("command -v meson && command -v pkg-config && command -v cc", NULL)) {
        printf("skipped: meson, pkg-config or cc not on PATH\n");
        return;
    }
    char *dir = al_test_tmpdir(), cmd[8 * PATH_MAX], *out;
    snprintf(cmd, sizeof cmd,
             "set -e; d='%s'; meson install --no-rebuild -C '%s' --destdir \"$d/root\" "
             ">/dev/null; pc=$(dirname \"$(find \"$d/root\" -name attnlab-variant.pc)\"); "
             "inc=$(find \"$d/root\" -type d -path '*/include/attnlab'); "
             "echo installed: $(cd \"$inc\" && ls | sort | tr '\\n' ' '); "
             "echo tree: $(cd '%s/include/attnlab' && ls *.h | sort | tr '\\n' ' '); "
             "sed -e 's|<attnlab/attnlab_variant.h>|\"attnlab_variant.h\"|' "
             "    -e 's|<attnlab/al_kvcache.h>|\"al_kvcache.h\"|' "
             "    '%s/variants/examples/swa/swa.c' > \"$d/old.c\"; "
             "grep -c '#include \"a' \"$d/old.c\"; "
             "PKG_CONFIG_SYSROOT_DIR=\"$d/root\" PKG_CONFIG_PATH=\"$pc\" PKG_CONFIG_LIBDIR= "
             "cc -std=c17 -O1 -fPIC -shared -fvisibility=hidden -Wall -Werror "
             "$(PKG_CONFIG_SYSROOT_DIR=\"$d/root\" PKG_CONFIG_PATH=\"$pc\" PKG_CONFIG_LIBDIR= "
             "pkg-config --cflags attnlab-variant) \"$d/old.c\" -o \"$d/old.so\" -lm; "
             "'%s' variants --plugin \"$d/old.so\"",
             dir, AL_BUILD_DIR, al_test_srcdir(), al_test_srcdir(), al_test_binary());
    ck_assert_msg(al_test_run(cmd, &out) == 0, "%s", out);
    const char *inst = strstr(out, "installed: "), *tree = strstr(out, "tree: ");
    ck_assert_msg(inst && tree, "%s", out);
    size_t n = strcspn(inst + 11, "\n");
    ck_assert_msg(n == strcspn(tree + 6, "\n") && strncmp(inst + 11, tree + 6, n) == 0,
                  "installed headers differ from include/attnlab:\n%s", out);
    ck_assert_msg(strstr(out, "\n2\n"), "the old-style copy lost its includes:\n%s", out);
    ck_assert_msg(line_starting(out, "swa "), "%s", out);
    free(out), free(dir);
}
END_TEST

Suite *plugin_suite(void)
{
    Suite *s = suite_create("plugin");
    TCase *tc = tcase_create("plugin");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, example_plugin_registers_with_its_path_as_origin);
    tcase_add_test(tc, example_plugin_passes_the_generic_variant_checks);
    tcase_add_test(tc, swa_matches_an_independent_banded_attention);
    tcase_add_test(tc, swa_with_a_window_over_the_whole_sequence_is_mha);
    tcase_add_test(tc, swa_decode_reads_only_the_window);
    tcase_add_test(tc, example_plugin_trains_through_al_train);
    tcase_add_test(tc, a_plugin_built_against_the_v4_header_loads_checks_trains_and_decodes);
    tcase_add_test(tc, plugin_for_another_interface_version_is_refused_with_both_numbers);
    tcase_add_test(tc, plugin_without_entry_point_or_usable_variants_is_refused);
    tcase_add_test(tc, duplicate_name_is_refused_and_the_plugin_loads_not_at_all);
    tcase_add_test(tc, files_that_are_not_plugins_are_refused);
    tcase_add_test(tc, malformed_tables_are_refused_naming_the_plugin);
    tcase_add_test(tc, keys_command_lists_a_plugins_settings);
    tcase_add_test(tc, config_plugins_load_before_the_variant_is_decoded);
    tcase_add_test(tc, plugin_sweep_file_decodes_at_every_grid_point);
    tcase_add_test(tc, variants_command_lists_plugins_with_their_origin);
    tcase_add_test(tc, train_and_kv_accept_plugin_and_record_it);
    tcase_add_test(tc, generate_continues_a_string_from_a_swa_checkpoint);
    tcase_add_test(tc, example_builds_alone_against_the_installed_headers);
    tcase_add_test(tc, installed_sdk_is_the_include_folder_and_old_style_includes_still_build);
    suite_add_tcase(s, tc);
    return s;
}
