/*
 * test_sweep.c - sweeps: expansion (grid x zip x seeds, subtree
 * replacement, exclude), readable stable ids, every spec error with its
 * position, and whole sweeps through the attnlab binary: resume skips
 * finished trials, a SIGKILLed sweep resumes to the summary of an
 * uninterrupted one, a diverging trial is recorded while the others finish,
 * killed workers and SIGTERM are recorded, foreign directories refused.
 */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "al_gemm.h"
#include "al_registry.h"
#include "al_report.h"
#include "al_sweep_run.h"
#include "al_test.h"
#include "al_train.h"

/* ------------------------------------------------------------ helpers */

/* A text of 20000 bytes with some structure (words from a small set), so
 * that tiny models learn something and losses differ between configs. */
static char *write_text(const char *dir)
{
    static const char *const words[] = {"the ", "king ", "and ", "queen ", "of ", "a ",
                                        "land ", "sea ", "shall ", "be ", ".\n"};
    return al_test_write_words(dir, words, 11, 20000, 12345);
}

/* An experiment file in dir: the tiny base config, then `sweep`. */
static char *write_exp(const char *dir, const char *name, const char *train, const char *sweep)
{
    char *data = write_text(dir), text[8192];
    snprintf(text, sizeof text,
             "name: %s\n"
             "data: {source: text, path: %s}\n"
             "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16,\n"
             "        attention: {variant: mla, d_latent: 8, d_rope: 4}}\n"
             "train: {batch_size: 4, eval_batches: 2, threads: 1, warmup_steps: 2, %s}\n"
             "%s", name, data, train, sweep);
    free(data);
    return al_test_write(dir, "exp.yaml", text);
}

static void load_ok(const char *path, al_sweep *s)
{
    al_err e;
    ck_assert_msg(al_sweep_load(path, NULL, 0, NULL, 0, s, &e) == 0, "%s", e.msg);
}

static const al_sweep_trial *find(const al_sweep *s, const char *label)
{
    for (int i = 0; i < s->n_trials; i++)
        if (strcmp(s->trials[i].label, label) == 0) return &s->trials[i];
    ck_abort_msg("no trial '%s'", label);
    return NULL;
}

/* noinline: inlined, gcc 12 mistakes the returned buffer for a pointer
 * to the local that received it (-Wdangling-pointer). */
static __attribute__((noinline)) char *read_text(const char *path)
{
    char *t = NULL;
    size_t n;
    al_err e;
    ck_assert_msg(al_read_file(path, &t, &n, &e) == 0, "%s", e.msg);
    return t;
}

/* Run attnlab with args (a printf format), output captured. */
/* ------------------------------------------------------------ expansion */

static const char grid_zip_seeds[] =
    "sweep:\n"
    "  seeds: [1, 2]\n"
    "  grid:\n"
    "    model.attention:\n"
    "      - {variant: mha}\n"
    "      - {variant: gqa, n_kv_head: 1}\n"
    "    train.lr: [1.0e-3, 3.0e-3]\n"
    "  zip:\n"
    "    model.d_model: [16, 32]\n"
    "    model.n_head: [2, 4]\n";

START_TEST(grid_zip_and_seeds_expand_into_their_product)
{
    char *dir = al_test_tmpdir(), *path = write_exp(dir, "gz", "steps: 4", grid_zip_seeds);
    al_sweep s;
    load_ok(path, &s);
    ck_assert_int_eq(s.n_trials, 2 * 2 * 2 * 2);
    ck_assert_int_eq(s.n_seeds, 2);
    /* seeds outermost, then the grid axes in order, then the zip group */
    ck_assert_str_eq(s.trials[0].label, "mha_lr1.0e-3_d16_h2_seed1");
    ck_assert_str_eq(s.trials[1].label, "mha_lr1.0e-3_d32_h4_seed1");
    ck_assert_str_eq(s.trials[2].label, "mha_lr3.0e-3_d16_h2_seed1");
    ck_assert_str_eq(s.trials[4].label, "gqa-kv1_lr1.0e-3_d16_h2_seed1");
    ck_assert_str_eq(s.trials[8].label, "mha_lr1.0e-3_d16_h2_seed2");
    const al_sweep_trial *t = find(&s, "gqa-kv1_lr3.0e-3_d32_h4_seed2");
    ck_assert_int_eq(t->index, 15);
    ck_assert_str_eq(t->config, "gqa-kv1_lr3.0e-3_d32_h4");
    /* the mapping replaced the base attention (mla with d_latent) whole:
     * merged, gqa would have refused d_latent */
    ck_assert_str_eq(t->cfg.model.variant, "gqa");
    ck_assert_int_eq((int)t->cfg.model.attn_set[0], 1);
    ck_assert_double_eq(t->cfg.train.lr, 3.0e-3);
    ck_assert_int_eq(t->cfg.model.d_model, 32);
    ck_assert_int_eq(t->cfg.model.n_head, 4);
    ck_assert_int_eq(t->cfg.model.d_head, 8);
    ck_assert_uint_eq(t->cfg.train.seed, 2);
    ck_assert_uint_eq(t->seed, 2);
    /* KV floats per token: 1 layer x 2 (k, v) x 1 group x d_head 8 */
    ck_assert_uint_eq(t->kv_elems_per_token, 16);
    al_sweep_free(&s);
    free(path), free(dir);
}
END_TEST

/* select makes the tuned axes part of no configuration: trials that differ
 * only in them (and the seed) share a group; baseline names one group and
 * marks its trials; without it the first configuration is the baseline. */
START_TEST(select_and_baseline_group_the_trials)
{
    char *dir = al_test_tmpdir(), text[2048];
    snprintf(text, sizeof text, "%s  select: {best_of: [train.lr], by: best_val_loss}\n"
             "  baseline: {model.attention.variant: gqa, model.d_model: 32}\n", grid_zip_seeds);
    char *path = write_exp(dir, "sel", "steps: 4", text);
    al_sweep s;
    load_ok(path, &s);
    ck_assert_int_eq(s.n_select, 1);
    ck_assert_str_eq(s.axes[s.select_axis[0]].path, "train.lr");
    ck_assert_str_eq(s.select_by, "best_val_loss");
    const al_sweep_trial *a = find(&s, "gqa-kv1_lr3.0e-3_d32_h4_seed2"),
                         *b = find(&s, "gqa-kv1_lr1.0e-3_d32_h4_seed1"),
                         *c = find(&s, "mha_lr1.0e-3_d32_h4_seed1");
    ck_assert_str_eq(a->group, "gqa-kv1_d32_h4");
    ck_assert_str_eq(a->tuned, "lr3.0e-3");
    ck_assert_str_eq(b->tuned, "lr1.0e-3");
    ck_assert(a->group_key == b->group_key && a->group_key != c->group_key);
    ck_assert(a->baseline && b->baseline && !c->baseline);
    int marked = 0;
    for (int i = 0; i < s.n_trials; i++) marked += s.trials[i].baseline;
    ck_assert_int_eq(marked, 4);   /* 2 lr x 2 seeds */
    al_sweep_free(&s);
    free(path);
    path = write_exp(dir, "nosel", "steps: 4", grid_zip_seeds);
    load_ok(path, &s);
    ck_assert_str_eq(s.trials[0].group, s.trials[0].config);   /* no select: the config */
    ck_assert_str_eq(s.trials[0].tuned, "");
    for (int i = 0; i < s.n_trials; i++)
        ck_assert_int_eq(s.trials[i].baseline, strcmp(s.trials[i].config, s.trials[0].config) == 0);
    al_sweep_free(&s);
    free(path), free(dir);
}
END_TEST

START_TEST(exclude_drops_the_matching_trials)
{
    char *dir = al_test_tmpdir(), text[2048];
    snprintf(text, sizeof text, "%s  exclude:\n"
             "    - {model.attention.variant: gqa, train.lr: 0.003}\n"
             "    - {seed: 2, model.d_model: 32}\n", grid_zip_seeds);
    char *path = write_exp(dir, "ex", "steps: 4", text);
    al_sweep s;
    load_ok(path, &s);
    /* 16 - 4 (gqa at lr 3e-3: 2 zips x 2 seeds) - 4 (seed 2, d 32: 2 x 2) + 1 (both) */
    ck_assert_int_eq(s.n_trials, 9);
    ck_assert_int_eq(s.n_excluded, 7);
    for (int i = 0; i < s.n_trials; i++) {
        const al_sweep_trial *t = &s.trials[i];
        ck_assert_int_eq(t->index, i);
        ck_assert(!(strcmp(t->cfg.model.variant, "gqa") == 0 && t->cfg.train.lr == 3e-3));
        ck_assert(!(t->seed == 2 && t->cfg.model.d_model == 32));
    }
    al_sweep_free(&s);
    free(path), free(dir);
}
END_TEST

/* A number in an exclude key indexes a list axis: seed 2 of the stacks
 * whose first layer is gqa is dropped, and nothing else. */
START_TEST(exclude_indexes_a_list_axis)
{
    char *dir = al_test_tmpdir(), *data = write_text(dir), text[2048];
    snprintf(text, sizeof text,
             "name: exl\ndata: {source: text, path: %s}\n"
             "model: {n_layer: 2, d_model: 16, n_head: 2, seq_len: 16}\n"
             "train: {batch_size: 4, eval_batches: 2, threads: 1, warmup_steps: 2, steps: 4}\n"
             "sweep:\n  seeds: [1, 2]\n  grid:\n    model.layer_attention:\n"
             "      - [{variant: mha}, {variant: mha}]\n"
             "      - [{variant: gqa, n_kv_head: 1}, {variant: mha}]\n"
             "  exclude:\n    - {seed: 2, model.layer_attention.0.variant: gqa}\n", data);
    free(data);
    char *path = al_test_write(dir, "exp.yaml", text);
    al_sweep s;
    load_ok(path, &s);
    ck_assert_int_eq(s.n_trials, 3);
    ck_assert_int_eq(s.n_excluded, 1);
    for (int i = 0; i < s.n_trials; i++)
        ck_assert_msg(!(s.trials[i].seed == 2 && strstr(s.trials[i].label, "gqa")), "%s",
                      s.trials[i].label);
    al_sweep_free(&s);
    free(path), free(dir);
}
END_TEST

START_TEST(seed_count_and_no_sweep_give_seeded_trials)
{
    char *dir = al_test_tmpdir();
    char *path = write_exp(dir, "sc", "steps: 4", "sweep: {seeds: 3}\n");
    al_sweep s;
    load_ok(path, &s);
    ck_assert_int_eq(s.n_trials, 3);
    ck_assert_str_eq(s.trials[2].label, "base_seed3");
    ck_assert_uint_eq(s.trials[2].cfg.train.seed, 3);
    al_sweep_free(&s);
    free(path);
    path = write_exp(dir, "plain", "steps: 4, seed: 7", "");
    load_ok(path, &s);
    ck_assert_int_eq(s.n_trials, 1);
    ck_assert_str_eq(s.trials[0].label, "base_seed7");
    ck_assert_str_eq(s.name, "plain");
    al_sweep_free(&s);
    free(path), free(dir);
}
END_TEST

/* Same file, same ids and hashes; another resolved config, another hash
 * with the same label; a results directory holding that label with the
 * other hash makes the id carry the hash. */
START_TEST(ids_are_stable_and_never_reuse_another_config)
{
    char *dir = al_test_tmpdir(), out[4200], tdir[4400];
    char *path = write_exp(dir, "ids", "steps: 4", grid_zip_seeds);
    al_sweep a, b;
    load_ok(path, &a);
    load_ok(path, &b);
    for (int i = 0; i < a.n_trials; i++) {
        ck_assert_str_eq(a.trials[i].label, b.trials[i].label);
        ck_assert_str_eq(a.trials[i].hash, b.trials[i].hash);
    }
    al_sweep_free(&b);
    free(path);
    path = write_exp(dir, "ids", "steps: 5", grid_zip_seeds);   /* edited file */
    load_ok(path, &b);
    ck_assert_str_eq(a.trials[3].label, b.trials[3].label);
    ck_assert_str_ne(a.trials[3].hash, b.trials[3].hash);
    /* thread count and attention kernel are how a trial runs, not what it is */
    al_config c = a.trials[3].cfg;
    char h1[17], h2[17];
    al_sweep_config_hash(&c, 0, h1);
    c.train.threads = 7;
    c.train.checkpoint_every = 3;
    snprintf(c.train.attention_kernel, sizeof c.train.attention_kernel, "fused");
    al_sweep_config_hash(&c, 0, h2);
    ck_assert_str_eq(h1, h2);
    c.train.lr *= 2;
    al_sweep_config_hash(&c, 0, h2);
    ck_assert_str_ne(h1, h2);
    snprintf(out, sizeof out, "%s/results", dir);
    snprintf(tdir, sizeof tdir, "%s/%s", out, a.trials[3].label);
    al_err e;
    ck_assert_int_eq(al_mkdirs(tdir, &e), 0);
    ck_assert_int_eq(al_results_write_trial(tdir, &a, &a.trials[3], &e), 0);
    al_sweep_assign_ids(&a, out);
    al_sweep_assign_ids(&b, out);
    ck_assert_str_eq(a.trials[3].id, a.trials[3].label);
    char want[256];
    snprintf(want, sizeof want, "%s-%.8s", b.trials[3].label, b.trials[3].hash);
    ck_assert_str_eq(b.trials[3].id, want);
    ck_assert_str_eq(b.trials[2].id, b.trials[2].label);   /* no clash there */
    al_sweep_free(&a);
    al_sweep_free(&b);
    free(path), free(dir);
}
END_TEST

/* Two values whose labels coincide but whose configs differ get the
 * configuration hash appended, so ids stay unique. */
START_TEST(coinciding_labels_are_told_apart_by_hash)
{
    char *dir = al_test_tmpdir();
    char *path = write_exp(dir, "co", "steps: 4",
                           "sweep:\n  grid:\n    data.path: [/x/data.txt, /y/data.txt]\n");
    char text[4096], *p = read_text(path);   /* point both at real files */
    snprintf(text, sizeof text, "%s", p);
    free(p);
    char *x, *y, sub[4200];
    snprintf(sub, sizeof sub, "%s/x", dir);
    mkdir(sub, 0777);
    x = write_text(sub);
    snprintf(sub, sizeof sub, "%s/y", dir);
    mkdir(sub, 0777);
    y = write_text(sub);
    char *q = strstr(text, "[/x/data.txt, /y/data.txt]"), body[8192];
    snprintf(body, sizeof body, "%.*s[%s, %s]\n", (int)(q - text), text, x, y);
    free(path);
    path = al_test_write(dir, "exp.yaml", body);
    al_sweep s;
    load_ok(path, &s);
    ck_assert_int_eq(s.n_trials, 2);
    ck_assert_str_ne(s.trials[0].label, s.trials[1].label);
    ck_assert_ptr_nonnull(strstr(s.trials[0].label, "path-data.txt-"));
    al_sweep_free(&s);
    free(x), free(y), free(path), free(dir);
}
END_TEST

/* ------------------------------------------------------------ errors */

typedef struct bad_case {
    const char *sweep;     /* appended to the base file (lines 6 on) */
    const char *want;      /* expected after "<file>:" */
} bad_case;

static const bad_case bad[] = {
    {"sweep: [1, 2\n", "7:1: error: did not find expected ',' or ']'"},
    {"sweep:\n  grids: {model.n_head: [2]}\n", "7:3: error: unknown key 'grids' in 'sweep' (did you mean 'grid'?)"},
    {"sweep:\n  grid:\n    model.n_head: []\n", "8:19: error: sweep axis 'model.n_head' is empty"},
    {"sweep:\n  zip:\n    model.n_head: [1, 2]\n    model.d_model: [16]\n",
     "9:5: error: zip axis 'model.d_model' has 1 values but 'model.n_head' has 2; zipped axes move in lockstep and need equal lengths"},
    {"sweep:\n  grid:\n    model.n_heads: [1, 2]\n",
     "8:5: error: sweep axis 'model.n_heads' names no setting (did you mean 'model.n_head'?)"},
    {"sweep:\n  grid:\n    train.lr: [1.0e-3, fast]\n",
     "8:24: error: 'train.lr' must be a number, got 'fast' (in trial 'lr-fast')"},
    {"sweep:\n  grid:\n    train.lr: 1.0e-3\n",
     "8:15: error: sweep axis 'train.lr' must be a list of values, got a scalar"},
    {"sweep:\n  grid:\n    model.attention: [{variant: gqa, n_kv_heads: 1}, {variant: mha}]\n",
     "8:38: error: unknown key 'n_kv_heads' for variant 'gqa' (did you mean 'n_kv_head'?) (in trial 'gqa-nkvheads1')"},
    {"sweep:\n  grid:\n    model.attention: [{variant: gqa, n_kv_head: 3}, {variant: mha}]\n",
     "8:49: error: 'n_kv_head' (3) must divide 'n_head' (2) (in trial 'gqa-kv3')"},
    {"sweep:\n  seeds: [1, one]\n", "7:14: error: a seed must be a non-negative integer, got 'one'"},
    {"sweep:\n  seeds: [1, 1]\n", "7:14: error: seed 1 is listed twice"},
    {"sweep:\n  seeds: {n: 2}\n", "7:11: error: unknown key 'n' in 'sweep.seeds' (known: min, max, until, step)"},
    {"sweep:\n  seeds: {min: 1, max: 3, until: resolved}\n",
     "7:16: error: 'sweep.seeds.min' must be an integer in [2, 1000], got '1'"},
    {"sweep:\n  seeds: {min: 2, max: 3, until: forever}\n",
     "7:34: error: 'sweep.seeds' as a mapping needs 'until: resolved' (or give a count or a list)"},
    {"sweep:\n  seeds: {min: 4, max: 3, until: resolved}\n",
     "7:24: error: 'sweep.seeds.max' (3) is below 'min' (4)"},
    {"sweep:\n  seeds: {min: 2, until: resolved}\n",
     "7:10: error: 'sweep.seeds' in rounds needs 'max' (min: N, max: M, until: resolved)"},
    {"sweep:\n  grid: {model.n_head: [1, 2]}\n  exclude: [{train.lr: 1}]\n",
     "8:14: error: exclude key 'train.lr' is not a sweep axis (nor under one)"},
    {"sweep:\n  grid: {model.n_head: [1, 2]}\n  exclude: [{model.n_head: 1}, {model.n_head: 2}]\n",
     "8:12: error: every trial is excluded (2 of 2)"},
    {"sweep:\n  grid: {model.n_head: [1, 2]}\n  exclude: [{model.n_head: 1}, {model.n_head: 3}]\n",
     "8:32: error: this exclude item matches no trial of the sweep (its values must equal an "
     "axis's, key by key)"},
    {"sweep:\n  grid: {model.n_head: [1, 1]}\n",
     "7:3: error: the sweep gives the same trial twice ('h1' and 'h1'): remove the duplicate value"},
    {"sweep:\n  grid: {model.attention: [{variant: mha}], model.attention.n_kv_head: [1]}\n",
     "7:45: error: sweep axis 'model.attention.n_kv_head' overlaps axis 'model.attention' (line 7); set one or the other"},
    {"sweep:\n  grid: {data.path: [/nonexistent/file.txt]}\n",
     "7:22: error: 'data.path' ('/nonexistent/file.txt'): cannot read: No such file or directory (in trial 'base')"},
    {"sweep:\n  name: my/results\n", "7:9: error: the experiment name must be letters, digits, '.', '_', '+' or '-' (it names the results directory), at most 63 characters, got 'my/results'"},
    {"sweep:\n  grid: {sweep.seeds: [1]}\n", "7:10: error: sweep axis 'sweep.seeds': the sweep cannot sweep itself"},
    {"sweep: [1]\n", "6:8: error: 'sweep' must be a mapping (grid, zip, seeds, exclude, name), got a sequence"},
    {"sweep:\n  grid: {train.lr: [1, 2]}\n  select: {best_of: [train.steps]}\n",
     "8:22: error: 'sweep.select.best_of': 'train.steps' is not a sweep axis (select chooses among an axis's values)"},
    {"sweep:\n  grid: {train.lr: [1, 2]}\n  select: {best_of: [train.lr], by: test_loss}\n",
     "8:37: error: 'sweep.select.by' must be val_loss, best_val_loss or val_accuracy (never a test metric)"},
    {"sweep:\n  grid: {train.lr: [1, 2]}\n  select: {best_off: [train.lr]}\n",
     "8:12: error: unknown key 'best_off' in 'sweep.select' (known: best_of, by)"},
    {"sweep:\n  grid: {train.lr: [1, 2]}\n  baseline: {model.n_head: 2}\n",
     "8:14: error: baseline key 'model.n_head' is not a sweep axis (nor under one)"},
    {"sweep:\n  grid: {train.lr: [1, 2], model.n_head: [1, 2]}\n  select: {best_of: [train.lr]}\n  baseline: {train.lr: 1}\n",
     "9:14: error: baseline key 'train.lr' is a select axis: the tuned value is chosen per seed"},
    {"sweep:\n  grid: {train.lr: [1, 2]}\n  baseline: {train.lr: 3}\n",
     "8:13: error: 'sweep.baseline' matches no configuration of the sweep"},
    {"sweep:\n  grid: {model.attention: [{variant: mha}, {variant: mqa}], train.lr: [1, 2]}\n  baseline: {model.attention.variant: mha}\n",
     "8:13: error: 'sweep.baseline' matches more than one configuration ('mha_lr1' and 'mha_lr2'): name more axes"},
};

START_TEST(spec_errors_name_file_line_and_column)
{
    const bad_case *b = &bad[_i];
    char *dir = al_test_tmpdir(), *path = write_exp(dir, "bad", "steps: 4", b->sweep), want[8192];
    al_sweep s;
    al_err e;
    snprintf(want, sizeof want, "%s:%s", path, b->want);
    ck_assert_int_eq(al_sweep_load(path, NULL, 0, NULL, 0, &s, &e), -1);
    ck_assert_str_eq(e.msg, want);
    ck_assert_int_eq(s.n_trials, 0);   /* nothing left to free */
    free(path), free(dir);
}
END_TEST

/* Through the binary: exit 2, one line, and nothing written. */
START_TEST(bad_spec_exits_2_and_writes_nothing)
{
    char *dir = al_test_tmpdir(), *out;
    char *path = write_exp(dir, "bad", "steps: 4", "sweep:\n  grid:\n    model.n_heads: [1, 2]\n");
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s/r", path, dir), 2);
    ck_assert_msg(strstr(out, ":8:5: error: sweep axis 'model.n_heads'"), "%s", out);
    ck_assert_int_eq((int)(strchr(out, '\n') - out + 1), (int)strlen(out));
    free(out);
    char r[4200];
    snprintf(r, sizeof r, "%s/r", dir);
    ck_assert(!al_test_exists(r));
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --jobs 0", path), 2);
    ck_assert_msg(strstr(out, "--jobs wants an integer"), "%s", out);
    free(out), free(path), free(dir);
}
END_TEST

START_TEST(foreign_results_directory_is_refused_untouched)
{
    char *dir = al_test_tmpdir(), *out, r[4200], *marker;
    char *path = write_exp(dir, "mine", "steps: 4", "");
    snprintf(r, sizeof r, "%s/r", dir);
    mkdir(r, 0777);
    marker = al_test_write(r, "sweep.json", "{\"experiment\": \"theirs\", \"file\": \"t.yaml\"}\n");
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s", path, r), 2);
    ck_assert_msg(strstr(out, "belongs to experiment 'theirs' (from t.yaml), not 'mine'"), "%s", out);
    free(out);
    char *m = read_text(marker);
    ck_assert_str_eq(m, "{\"experiment\": \"theirs\", \"file\": \"t.yaml\"}\n");
    free(m);
    unlink(marker);
    free(marker);
    marker = al_test_write(r, "notes.txt", "precious\n");   /* no marker, not empty */
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s --dry-run", path, r), 2);
    ck_assert_msg(strstr(out, "not empty and not a sweep's results directory"), "%s", out);
    free(out);
    DIR *d = opendir(r);
    int n = 0;
    while (readdir(d)) n++;
    closedir(d);
    ck_assert_int_eq(n, 3);   /* ".", "..", notes.txt */
    free(marker), free(path), free(dir);
}
END_TEST

/* ------------------------------------------------------------ running */

/* Parameters of the tiny model by hand: V*D + L*(2D + attn + 2*D*4D) + D
 * with attn = (H + 2G)*dh*D + D*H*dh. */
static long params_by_hand(int D, int H, int G)
{
    int dh = D / H;
    long attn = (long)(H + 2 * G) * dh * D + (long)D * H * dh;
    return 256L * D + (2L * D + attn + 8L * D * D) + D;
}

/* The dry-run line of a trial: "  0  mha_seed1  mha  n_layer d_ff params
 * matched_to kv status" (malloc'ed, "" when absent). */
static char *dry_line(const char *out, const char *id)
{
    char key[128];
    snprintf(key, sizeof key, "  %s ", id);
    const char *p = strstr(out, key);
    if (!p) return strdup("");
    while (p > out && p[-1] != '\n') p--;
    return strndup(p, strcspn(p, "\n"));
}

START_TEST(dry_run_lists_sizes_and_trains_nothing)
{
    char *dir = al_test_tmpdir(), *out, want[512];
    char *path = write_exp(dir, "dry", "steps: 4",
                           "sweep:\n  grid:\n    model.attention: [{variant: mha}, {variant: mqa}]\n");
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s/r --dry-run", path, dir), 0);
    char *line = dry_line(out, "mha_seed1");
    snprintf(want, sizeof want, " mha      %7d %6d %12ld %12s %15d  pending", 1, 64,
             params_by_hand(16, 2, 2), "-", 4 * 2 * 2 * 8);
    ck_assert_msg(strstr(line, want), "want '%s' in:\n%s", want, out);
    free(line);
    line = dry_line(out, "mqa_seed1");
    snprintf(want, sizeof want, " mqa      %7d %6d %12ld %12s %15d  pending", 1, 64,
             params_by_hand(16, 2, 1), "-", 4 * 2 * 1 * 8);
    ck_assert_msg(strstr(line, want), "want '%s' in:\n%s", want, out);
    free(line);
    ck_assert_ptr_nonnull(strstr(out, "nothing was trained"));
    free(out);
    char r[4200];
    snprintf(r, sizeof r, "%s/r", dir);
    ck_assert(!al_test_exists(r));
    free(path), free(dir);
}
END_TEST

/* summary.csv (and the report's configs.csv) get one column per setting
 * of the sweep's variants, named by the variant and in registry order:
 * gqa's n_kv_head before the plugin's window although swa comes first in
 * the sweep; mha has none. A cell is blank where the variant lacks it. */
START_TEST(summary_has_a_column_per_setting_of_the_sweeps_variants)
{
    char *dir = al_test_tmpdir(), r[4200];
    char *path = write_exp(dir, "cols", "steps: 4",
                           "sweep:\n  grid:\n    model.attention: [{variant: swa, window: 4}, "
                           "{variant: mha}, {variant: gqa, n_kv_head: 1}]\n");
    const char *plugins[] = {AL_SWA_PLUGIN};
    int before = al_variant_count();
    al_sweep s;
    al_err e;
    ck_assert_msg(al_sweep_load(path, NULL, 0, plugins, 1, &s, &e) == 0, "%s", e.msg);
    snprintf(r, sizeof r, "%s/r", dir);
    ck_assert_int_eq(mkdir(r, 0755), 0);
    al_sweep_assign_ids(&s, r);
    ck_assert_msg(al_results_write_summary(r, &s, &e) == 0, "%s", e.msg);
    al_sweep_free(&s);
    al_variant_truncate(before);
    char p[4400];
    snprintf(p, sizeof p, "%s/summary.csv", r);
    char *sum = read_text(p);
    ck_assert_msg(strstr(sum, ",baseline,variant,n_kv_head,window,causal,") &&
                  strstr(sum, ",swa,,4,true,") && strstr(sum, ",mha,,,true,") &&
                  strstr(sum, ",gqa,1,,true,"), "%s", sum);
    setenv("AL_GNUPLOT", "/nonexistent/gnuplot", 1);
    al_report_stats st;
    ck_assert_msg(al_report_write(r, &st, &e) == 0, "%s", e.msg);
    unsetenv("AL_GNUPLOT");
    snprintf(p, sizeof p, "%s/configs.csv", r);
    char *csv = read_text(p);
    ck_assert_msg(!strncmp(csv, "config,variant,n_kv_head,window,causal,", 39) &&
                  strstr(csv, "\nswa-window4,swa,,4,true,"), "%s", csv);
    free(csv), free(sum), free(path), free(dir);
}
END_TEST

/* A variant from a plugin (--plugin, or the file's `plugins:`) can be
 * swept like a built-in one, its settings included; without the plugin
 * the error points at the value. */
START_TEST(plugin_variants_can_be_swept)
{
    char *dir = al_test_tmpdir(), *out, want[256];
    char *path = write_exp(dir, "plug", "steps: 4",
                           "sweep:\n  grid:\n    model.attention: [{variant: mha}, "
                           "{variant: swa, window: 4}]\n");
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s/r --dry-run --plugin %s", path, dir,
                                      AL_SWA_PLUGIN),
                     0);
    snprintf(want, sizeof want, "swa-window4_seed1                    swa      %7d %6d %12ld",
             1, 64, params_by_hand(16, 2, 2));
    ck_assert_msg(strstr(out, want), "want '%s' in:\n%s", want, out);
    free(out);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s/r --dry-run", path, dir), 2);
    ck_assert_msg(strstr(out, ":8:49: error: unknown variant 'swa'"), "%s", out);
    free(out), free(path), free(dir);
}
END_TEST

/* summary.csv without the wall-clock columns (tokens_per_s, wall_s). */
static char *summary_without_timing(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    char *t = read_text(path), *out = calloc(strlen(t) + 1, 1), *o = out;
    int col = 0, c_tok = -1, c_wall = -1;   /* the timing columns, by the header */
    for (char *p = t; *p && *p != '\n'; p++) {
        if (strncmp(p, "tokens_per_s,", 13) == 0 && (p == t || p[-1] == ',')) c_tok = col;
        if (strncmp(p, "wall_s,", 7) == 0 && (p == t || p[-1] == ',')) c_wall = col;
        col += *p == ',';
    }
    ck_assert(c_tok >= 0 && c_wall >= 0);
    col = 0;
    for (char *p = t; *p; p++) {
        if (*p == '\n') col = -1;
        if (col != c_tok && col != c_wall) *o++ = *p;
        if (*p == ',' || *p == '\n') col++;
    }
    free(t);
    return out;
}

/* The summary line at p (its leading newline) ends in ",<16 hex digits>":
 * the model's hash (al_sweep_model_hash) after blank scaling columns. */
static int ends_in_model_hash(const char *p)
{
    const char *eol = p ? strchr(p + 1, '\n') : NULL;
    return eol && eol - p > 19 && !strncmp(eol - 19, ",,,", 3) &&
           strspn(eol - 16, "0123456789abcdef") >= 16;
}

static const char three_trials[] =
    "sweep:\n  grid:\n    model.attention: [{variant: mha}, {variant: mqa}, "
    "{variant: mla, d_latent: 8, d_rope: 4}]\n";

START_TEST(sweep_resume_skips_finished_trials)
{
    char *dir = al_test_tmpdir(), *out, r[4200], res[4400];
    char *path = write_exp(dir, "res", "steps: 20, eval_every: 10", three_trials);
    snprintf(r, sizeof r, "%s/r", dir);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s --jobs 2", path, r), 0);
    ck_assert_msg(strstr(out, "3 ok, 0 diverged, 0 failed, 0 kept"), "%s", out);
    free(out);
    char *s1 = summary_without_timing(r);
    /* one column per setting of the sweep's variants (mla's three; mha and
     * mqa have none), blank for a variant without it */
    ck_assert_msg(strstr(s1, ",variant,d_latent,d_rope,d_q_latent,causal,") &&
                  !strstr(s1, "n_kv_head"), "%s", s1);
    ck_assert_msg(strstr(s1, "\nmqa_seed1,mqa,mqa,,,false,mqa,,,,true,1,") &&
                  strstr(s1, "\nmla-latent8-rope4_seed1,mla-latent8-rope4,mla-latent8-rope4,,,false,"
                             "mla,8,4,0,true,1,"), "%s", s1);
    /* where each trial ran: the CPU model, OpenBLAS core and threads, then
     * the cost columns (docs/costs.md), then the sweep.scaling columns,
     * blank without it, and the model's hash (16 hex digits) */
    char cpu[128], where[300];
    al_cpu_model(cpu, sizeof cpu);
    snprintf(where, sizeof where, ",%s,%s,1,", cpu, al_blas_core());
    ck_assert_msg(strstr(s1, ",init_val_loss,cpu_model,blas_core,threads,train_flops_per_token,"
                             "train_flops,decode_flops_per_token,decode_bytes_per_token,"
                             "arithmetic_intensity,decode_context,decode_batch,"
                             "decode_tokens_per_s,scaling_size,scaling_flops,model\n") &&
                  ends_in_model_hash(strstr(s1, "\nmqa_seed1,")) &&
                  strstr(strstr(s1, "\nmqa_seed1,"), where), "%s", s1);
    snprintf(res, sizeof res, "%s/mqa_seed1/result.json", r);
    struct stat st1, st2;
    ck_assert_int_eq(stat(res, &st1), 0);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s", path, r), 0);
    ck_assert_msg(strstr(out, "0 ok, 0 diverged, 0 failed, 3 kept from before"), "%s", out);
    free(out);
    ck_assert_int_eq(stat(res, &st2), 0);
    ck_assert(st1.st_mtim.tv_sec == st2.st_mtim.tv_sec && st1.st_mtim.tv_nsec == st2.st_mtim.tv_nsec);
    char *s2 = summary_without_timing(r);
    ck_assert_str_eq(s1, s2);
    free(s1), free(s2), free(path), free(dir);
}
END_TEST

/* ------------------------------------------------------------ rounds */

static int count_lines(const char *path)
{
    char *t = read_text(path);
    int n = 0;
    for (char *p = t; *p; p++) n += *p == '\n';
    free(t);
    return n;
}

/* seeds: {min: 2, max: 4, until: resolved} with a difference the first
 * round resolves (lr 1e-5 against 1e-2: the paired differences agree to
 * a few percent): two seeds are trained, the third never; a second run
 * keeps all four trials and trains nothing. */
START_TEST(seed_rounds_stop_once_every_comparison_is_resolved)
{
    char *dir = al_test_tmpdir(), *out, r[4200], p[4400];
    char *path = write_exp(dir, "rounds", "steps: 20, eval_every: 5",
                           "sweep:\n  seeds: {min: 2, max: 4, until: resolved}\n"
                           "  grid: {train.lr: [1.0e-5, 1.0e-2]}\n");
    snprintf(r, sizeof r, "%s/r", dir);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s --dry-run", path, r), 0);
    ck_assert_msg(strstr(out, "rounds at 2, 3, 4 seeds") && strstr(out, "lr1.0e-2_seed4"), "%s",
                  out);
    free(out);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s", path, r), 0);
    ck_assert_msg(strstr(out, "round 1 of at most 3: seeds 1-2 (4 trials)") &&
                  strstr(out, "rounds over at 2 seeds: every comparison with the baseline is "
                              "resolved") && !strstr(out, "round 2"), "%s", out);
    free(out);
    snprintf(p, sizeof p, "%s/lr1.0e-2_seed3", r);
    ck_assert(!al_test_exists(p));
    snprintf(p, sizeof p, "%s/summary.csv", r);
    ck_assert_int_eq(count_lines(p), 5);   /* the header and the round's four trials */
    snprintf(p, sizeof p, "%s/configs.csv", r);
    char *csv = read_text(p);
    ck_assert_msg(strstr(csv, "\nlr1.0e-2,") && strstr(strstr(csv, "\nlr1.0e-2,"), ",0,true,"),
                  "%s", csv);   /* seeds_open 0, resolved_holm true */
    free(csv);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s", path, r), 0);
    ck_assert_msg(strstr(out, "0 ok, 0 diverged, 0 failed, 4 kept from before"), "%s", out);
    free(out);
    ck_assert_int_eq(
        al_test_attnlabf(&out, "sweep %s --out %s --executor slurm --no-wait", path, r), 2);
    ck_assert_msg(strstr(out, "seeds in rounds"), "%s", out);
    free(out), free(path), free(dir);
}
END_TEST

/* No difference at all (eval_every does not change training: the test
 * losses agree to the bit): every round is taken, up to max. The trials
 * are those of `seeds: 3`: the same ids and hashes, so that file finds
 * all six finished. */
START_TEST(seed_rounds_run_to_the_maximum_and_keep_their_ids)
{
    char *dir = al_test_tmpdir(), *out, r[4200], p[4400];
    char *path = write_exp(dir, "rounds", "steps: 20",
                           "sweep:\n  seeds: {min: 2, max: 3, until: resolved}\n"
                           "  grid: {train.eval_every: [5, 10]}\n");
    snprintf(r, sizeof r, "%s/r", dir);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s", path, r), 0);
    ck_assert_msg(strstr(out, "round 2 of at most 2: seeds 1-3 (6 trials)") &&
                  strstr(out, "rounds over at 3 seeds: the maximum") &&
                  strstr(out, "6 ok, 0 diverged, 0 failed, 0 kept"), "%s", out);
    free(out);
    snprintf(p, sizeof p, "%s/report.md", r);
    char *md = read_text(p);
    ck_assert_msg(strstr(md, "looks at 2, 3 seeds; 2 taken") &&
                  strstr(md, "| 3 | +0.0000 | [+0.0000, +0.0000] | 1 | no | no (no difference to "
                             "size) |"), "%.3000s", md);
    free(md), free(path);
    path = write_exp(dir, "rounds", "steps: 20",
                     "sweep:\n  seeds: 3\n  grid: {train.eval_every: [5, 10]}\n");
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s", path, r), 0);
    ck_assert_msg(strstr(out, "0 ok, 0 diverged, 0 failed, 6 kept from before"), "%s", out);
    free(out), free(path), free(dir);
}
END_TEST

/* Start `attnlab sweep FILE --out DIR --jobs 1` in the background. */
static pid_t spawn_sweep(const char *path, const char *out)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int nul = open("/dev/null", O_WRONLY);
        dup2(nul, 1), dup2(nul, 2);
        execl(al_test_binary(), al_test_binary(), "sweep", path, "--out", out, "--jobs", "1",
              (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Wait (up to 120 s) until trial `done` has a result and trial `running`
 * has a progress file past step 0 but no result. */
static int wait_mid_trial(const char *r, const char *done, const char *running)
{
    char a[4400], b[4400], c[4400];
    snprintf(a, sizeof a, "%s/%s/result.json", r, done);
    snprintf(b, sizeof b, "%s/%s/progress", r, running);
    snprintf(c, sizeof c, "%s/%s/result.json", r, running);
    struct timespec nap = {0, 2 * 1000 * 1000};
    for (int i = 0; i < 60000; i++) {
        al_trial_progress p;
        char tdir[4400];
        snprintf(tdir, sizeof tdir, "%s/%s", r, running);
        if (al_test_exists(a) && !al_test_exists(c) && al_sweep_read_progress(tdir, &p) == 0 &&
            p.step > 0)
            return 1;
        nanosleep(&nap, NULL);
    }
    return 0;
}

static void wait_exit(pid_t pid, int *status)
{
    ck_assert_int_eq(waitpid(pid, status, 0), pid);
}

/* A sweep killed with SIGKILL in the middle of its second trial leaves the
 * first trial's result, nothing for the second that a resume would trust,
 * and no worker behind; resuming (the second trial from its checkpoint)
 * gives exactly the summary of a sweep that was never interrupted (same
 * trials, statuses and losses, bit for bit). */
START_TEST(sigkilled_sweep_resumes_to_the_uninterrupted_summary)
{
    char *dir = al_test_tmpdir(), *out, r1[4200], r2[4200], res[4400];
    char *path = write_exp(dir, "kill", "steps: 120, eval_every: 40, checkpoint_every: 20",
                           three_trials);
    snprintf(r1, sizeof r1, "%s/full", dir);
    snprintf(r2, sizeof r2, "%s/killed", dir);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s --jobs 1", path, r1), 0);
    free(out);
    pid_t pid = spawn_sweep(path, r2);
    ck_assert_msg(wait_mid_trial(r2, "mha_seed1", "mqa_seed1"), "never caught mid-trial");
    kill(pid, SIGKILL);
    int st;
    wait_exit(pid, &st);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    snprintf(res, sizeof res, "%s/mqa_seed1/result.json", r2);
    ck_assert(!al_test_exists(res));
    char *mid = summary_without_timing(r2);
    ck_assert_msg(strstr(mid, "\nmha_seed1,") && strstr(strstr(mid, "\nmqa_seed1,"), ",pending,"),
                  "%s", mid);
    free(mid);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s --jobs 1", path, r2), 0);
    ck_assert_msg(strstr(out, "2 ok, 0 diverged, 0 failed, 1 kept from before"), "%s", out);
    ck_assert_msg(strstr(out, "start mqa_seed1 (resuming from its checkpoint)"), "%s", out);
    free(out);
    snprintf(res, sizeof res, "%s/mqa_seed1/log.txt", r2);
    char *log = read_text(res);
    ck_assert_msg(strstr(log, "mqa_seed1: resuming from the checkpoint in"), "%s", log);
    /* killed between the two checkpoint files, the pair disagrees: then
     * the trial starts over, and must still end the same */
    ck_assert_msg(!strstr(log, "starting over") || strstr(log, "cannot resume ("), "%s", log);
    free(log);
    snprintf(res, sizeof res, "%s/mqa_seed1/model.safetensors", r2);
    ck_assert(al_test_exists(res));
    char *a = summary_without_timing(r1), *b = summary_without_timing(r2);
    ck_assert_str_eq(a, b);
    ck_assert_ptr_null(strstr(a, "pending"));
    free(a), free(b), free(path), free(dir);
}
END_TEST

START_TEST(diverging_trial_is_recorded_while_the_others_finish)
{
    char *dir = al_test_tmpdir(), *out, r[4200];
    char *path = write_exp(dir, "div", "steps: 30, eval_every: 10",
                           "sweep:\n  grid:\n    train.lr: [1.0e-2, 1.0e+3, 3.0e-3]\n");
    snprintf(r, sizeof r, "%s/r", dir);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s --jobs 2", path, r), 0);
    ck_assert_msg(strstr(out, "2 ok, 1 diverged, 0 failed"), "%s", out);
    free(out);
    char *s = summary_without_timing(r), *line = strstr(s, "\nlr1.0e+3_seed1,");
    ck_assert_msg(line && strstr(line, ",diverged,loss became "), "%s", s);
    ck_assert_msg(strstr(s, "\nlr1.0e-2_seed1,") && strstr(s, "\nlr3.0e-3_seed1,"), "%s", s);
    ck_assert_int_eq((int)(strstr(s, ",ok,") != NULL), 1);
    free(s);
    char p[4400];
    snprintf(p, sizeof p, "%s/lr1.0e+3_seed1/log.txt", r);
    ck_assert(al_test_exists(p));
    snprintf(p, sizeof p, "%s/report.md", r);
    char *md = read_text(p);
    ck_assert_ptr_nonnull(strstr(md, "| lr1.0e+3_seed1 | diverged | loss became"));
    free(md), free(path), free(dir);
}
END_TEST

/* The causal-mask ablation: the unmasked model's loss collapses below the
 * masked one's; the report leaves it off the Pareto front and shows a
 * sample of each, generated one byte at a time through the KV cache. */
START_TEST(causal_ablation_report_shows_the_collapse_and_samples)
{
    char *dir = al_test_tmpdir(), *out, r[4200], p[4400];
    char *path = write_exp(dir, "causal", "steps: 200, eval_every: 100, lr: 1.0e-2",
                           "sweep:\n  grid:\n    model.attention: [{variant: mha}]\n"
                           "    model.causal: [true, false]\n");
    snprintf(r, sizeof r, "%s/r", dir);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s --jobs 2", path, r), 0);
    free(out);
    al_trial_result masked, unmasked;
    snprintf(p, sizeof p, "%s/causal-true_seed1", r);
    al_sweep s;
    load_ok(path, &s);
    ck_assert_int_eq(al_results_read_result(p, s.trials[0].hash, &masked), 0);
    snprintf(p, sizeof p, "%s/causal-false_seed1", r);
    ck_assert_int_eq(al_results_read_result(p, s.trials[1].hash, &unmasked), 0);
    al_sweep_free(&s);
    ck_assert_msg(unmasked.val_loss < 0.75 * masked.val_loss, "unmasked %g, masked %g",
                  unmasked.val_loss, masked.val_loss);
    snprintf(p, sizeof p, "%s/report.md", r);
    char *md = read_text(p), *c = strstr(md, "## The causal mask");
    ck_assert_ptr_nonnull(c);
    ck_assert_msg(strstr(c, "**causal-false** (causal false, val loss ") &&
                  strstr(c, "**causal-true** (causal true, val loss "), "%s", c);
    int fences = 0;
    for (char *q = c; (q = strstr(q, "```text\nThe ")); q++) fences++;
    ck_assert_int_eq(fences, 2);
    ck_assert_ptr_nonnull(strstr(md, "| causal-false | mha, **no causal mask** |"));
    char *row = strstr(md, "| causal-false |");
    row = strndup(row, strcspn(row, "\n"));
    ck_assert_ptr_null(strstr(row, "**yes**"));
    free(row), free(md), free(path), free(dir);
}
END_TEST

/* The pid of the worker running in results directory r, or 0. */
static pid_t find_worker(const char *r)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    pid_t found = 0;
    while (d && !found && (de = readdir(d))) {
        char path[300], buf[8192];
        if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%s/cmdline", de->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0) continue;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0) continue;
        buf[n] = 0;
        int is_trial = 0, in_r = 0;
        for (char *a = buf; a < buf + n; a += strlen(a) + 1) {
            is_trial |= strcmp(a, "trial") == 0;
            in_r |= strcmp(a, r) == 0;
        }
        if (is_trial && in_r) found = atoi(de->d_name);
    }
    if (d) closedir(d);
    return found;
}

/* A worker killed from outside is recorded as killed and the sweep goes
 * on (exit 1: not everything finished); SIGTERM to the sweep records the
 * running trial as interrupted (exit 130); a later run finishes both. */
START_TEST(killed_worker_and_stopped_sweep_are_recorded_then_resumed)
{
    char *dir = al_test_tmpdir(), *out, r[4200], p[4400];
    char *path = write_exp(dir, "kw", "steps: 120, eval_every: 40", three_trials);
    snprintf(r, sizeof r, "%s/r", dir);
    pid_t pid = spawn_sweep(path, r);
    ck_assert(wait_mid_trial(r, "mha_seed1", "mqa_seed1"));
    pid_t w = find_worker(r);
    ck_assert_int_gt(w, 0);
    kill(w, SIGKILL);
    ck_assert(wait_mid_trial(r, "mqa_seed1", "mla-latent8-rope4_seed1"));
    kill(pid, SIGTERM);
    int st;
    wait_exit(pid, &st);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 130, "status %d", st);
    char *s = summary_without_timing(r);
    ck_assert_msg(strstr(s, ",killed,killed by signal 9 (Killed) at step "), "%s", s);
    ck_assert_msg(strstr(s, ",interrupted,the sweep was stopped at step "), "%s", s);
    free(s);
    snprintf(p, sizeof p, "%s/mqa_seed1/result.json", r);
    ck_assert(al_test_exists(p));
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s --jobs 1", path, r), 0);
    ck_assert_msg(strstr(out, "2 ok, 0 diverged, 0 failed, 1 kept from before"), "%s", out);
    free(out), free(path), free(dir);
}
END_TEST

/* Data too short for a trial's seq_len is refused when the sweep is read
 * (exit 2, nothing trained); a trial that fails inside training (here its
 * checkpoint cannot be put in place: a directory holds its name) is
 * recorded with the worker's own message, and the sweep exits 1. */
START_TEST(failing_trial_is_recorded_with_its_reason)
{
    char *dir = al_test_tmpdir(), *out, r[4200], body[8192], blocker[4400];
    char *shortp = al_test_write(dir, "short.txt", "just a few bytes of text\n");
    char *path = write_exp(dir, "fail", "steps: 10, eval_every: 5", "");
    char *text = read_text(path);
    char *q = strstr(text, "data: {source: text, path: ");
    ck_assert_ptr_nonnull(q);
    snprintf(body, sizeof body, "%ssweep:\n  grid:\n    data.path: [%s]\n", text, shortp);
    char *path2 = al_test_write(dir, "exp2.yaml", body);
    snprintf(r, sizeof r, "%s/r", dir);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s", path2, r), 2);
    ck_assert_msg(strstr(out, "exp2.yaml:8:") && strstr(out, "too short"), "%s", out);
    ck_assert_msg(!al_test_exists(r), "%s", out);
    free(out);
    snprintf(blocker, sizeof blocker, "%s/base_seed1/model.safetensors", r);
    al_err e;
    ck_assert_int_eq(al_mkdirs(blocker, &e), 0);
    free(al_test_write(r, "sweep.json", "{\"experiment\": \"fail\"}\n"));   /* ours */
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s", path, r), 1);
    ck_assert_msg(strstr(out, "0 ok, 0 diverged, 1 failed"), "%s", out);
    free(out);
    char *s = summary_without_timing(r);
    ck_assert_msg(strstr(s, ",failed,") && strstr(s, "model.safetensors: cannot rename into "
                                                     "place: Is a directory"), "%s", s);
    free(s), free(text), free(shortp), free(path), free(path2), free(dir);
}
END_TEST

/* A trial's checkpoint whose data file changed since the trial started is
 * not resumed and not thrown away for a fresh start (the sweep's other
 * trials saw the old data): the trial fails saying what changed, how to
 * start it over, and its checkpoint stays. */
START_TEST(trial_whose_data_changed_fails_and_keeps_its_checkpoint)
{
    char *dir = al_test_tmpdir(), r[4200], tdir[4400], state[4500], want[4600];
    char *path = write_exp(dir, "changed", "steps: 20, eval_every: 10, checkpoint_every: 5", "");
    snprintf(r, sizeof r, "%s/r", dir);
    al_sweep s;
    load_ok(path, &s);
    al_sweep_assign_ids(&s, r);
    const al_sweep_trial *t = &s.trials[0];
    al_results_trial_dir(tdir, sizeof tdir, r, t);
    al_err e;
    ck_assert_int_eq(al_mkdirs(tdir, &e), 0);
    al_train_opts o = {.outdir = tdir, .stop_after = 5};
    al_train_result tr;
    ck_assert_msg(al_train(&t->cfg, &o, &tr, &e) == 0, "%s", e.msg);
    snprintf(state, sizeof state, "%s/train_state.safetensors", tdir);
    char *before, *after;
    size_t n_before, n_after;
    ck_assert_int_eq(al_read_file(state, &before, &n_before, &e), 0);
    FILE *f = fopen(t->cfg.data.path, "a");
    ck_assert_ptr_nonnull(f);
    fputs("an edit\n", f);
    fclose(f);
    ck_assert_int_eq(al_sweep_trial_run(&s, t, r, 1, &e), 1);
    snprintf(want, sizeof want, "the data file '%s' changed since the run started",
             t->cfg.data.path);
    ck_assert_msg(strstr(e.msg, want), "%s", e.msg);
    snprintf(want, sizeof want, "(to train this trial from the start, remove %s)", state);
    ck_assert_msg(strstr(e.msg, want), "%s", e.msg);
    al_trial_result res;
    ck_assert_int_eq(al_results_read_result(tdir, t->hash, &res), 0);
    ck_assert_int_eq(res.status, AL_TRIAL_FAILED);
    ck_assert_msg(strstr(res.reason, "changed since the run started"), "%s", res.reason);
    ck_assert_int_eq(al_read_file(state, &after, &n_after, &e), 0);
    ck_assert_msg(n_before == n_after && memcmp(before, after, n_before) == 0,
                  "the checkpoint changed");
    free(after), free(before);
    al_sweep_free(&s);
    free(path), free(dir);
}
END_TEST

Suite *sweep_suite(void)
{
    Suite *s = suite_create("sweep");
    TCase *tc = tcase_create("spec");
    tcase_add_test(tc, grid_zip_and_seeds_expand_into_their_product);
    tcase_add_test(tc, exclude_drops_the_matching_trials);
    tcase_add_test(tc, exclude_indexes_a_list_axis);
    tcase_add_test(tc, select_and_baseline_group_the_trials);
    tcase_add_test(tc, seed_count_and_no_sweep_give_seeded_trials);
    tcase_add_test(tc, ids_are_stable_and_never_reuse_another_config);
    tcase_add_test(tc, coinciding_labels_are_told_apart_by_hash);
    tcase_add_loop_test(tc, spec_errors_name_file_line_and_column, 0,
                        (int)(sizeof bad / sizeof *bad));
    suite_add_tcase(s, tc);
    TCase *run_tc = tcase_create("run");
    tcase_set_timeout(run_tc, 300);
    tcase_add_test(run_tc, bad_spec_exits_2_and_writes_nothing);
    tcase_add_test(run_tc, foreign_results_directory_is_refused_untouched);
    tcase_add_test(run_tc, dry_run_lists_sizes_and_trains_nothing);
    tcase_add_test(run_tc, plugin_variants_can_be_swept);
    tcase_add_test(run_tc, summary_has_a_column_per_setting_of_the_sweeps_variants);
    tcase_add_test(run_tc, sweep_resume_skips_finished_trials);
    tcase_add_test(run_tc, seed_rounds_stop_once_every_comparison_is_resolved);
    tcase_add_test(run_tc, seed_rounds_run_to_the_maximum_and_keep_their_ids);
    tcase_add_test(run_tc, sigkilled_sweep_resumes_to_the_uninterrupted_summary);
    tcase_add_test(run_tc, diverging_trial_is_recorded_while_the_others_finish);
    tcase_add_test(run_tc, causal_ablation_report_shows_the_collapse_and_samples);
    tcase_add_test(run_tc, killed_worker_and_stopped_sweep_are_recorded_then_resumed);
    tcase_add_test(run_tc, failing_trial_is_recorded_with_its_reason);
    tcase_add_test(run_tc, trial_whose_data_changed_fails_and_keeps_its_checkpoint);
    suite_add_tcase(s, run_tc);
    return s;
}
