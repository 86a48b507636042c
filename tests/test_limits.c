/*
 * test_limits.c - one set of limits (issue 40): what training accepts is
 * exactly what every checkpoint reader accepts. The test walks the key
 * tables (config_keys.c) and every registered variant's integer settings:
 * at the largest value a row allows, the config loads (or is refused by
 * another check, naming the key) and the model it describes loads back
 * from a checkpoint (built, saved and loaded where it is small; else its
 * config written and read as a checkpoint's); one past the largest value
 * is refused at train time with the key named. Then the binary: a run at
 * the largest norm_eps trains and its checkpoint scores.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stdint.h>

#include "al_checkpoint.h"
#include "al_kvcache.h"
#include "al_size.h"
#include "al_config_io.h"
#include "al_registry.h"
#include "al_tensors.h"
#include "al_test.h"
#include "al_test_model.h"
#include "config_keys.h"

/* Models up to this many parameters are built and saved for real. */
#define BUILD_MAX_PARAMS (1u << 21)

static const char *base_yaml(void)
{
    static char *path;
    if (!path) {
        char *dir = al_test_tmpdir();
        path = al_test_write(dir, "base.yaml",
                             "data: {source: text, path: x.txt}\n"
                             "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16, "
                             "vocab_size: 64}\n"
                             "train: {steps: 4, batch_size: 2, warmup_steps: 1}\n");
        free(dir);
    }
    return path;
}

/* The model c describes, back through a checkpoint: built and saved when
 * small, else its config written and read as a checkpoint's. */
static void expect_loads(const al_config *c, const char *what)
{
    al_err e;
    size_t n = al_model_param_count(&c->model, &e);
    ck_assert_msg(n > 0, "%s: %s", what, e.msg);
    al_model_config back;
    if (n > BUILD_MAX_PARAMS) {
        ck_assert_msg(al_checkpoint_config_roundtrip(&c->model, &back, &e) == 0,
                      "%s: accepted at train time, refused by the checkpoint reader: %s", what,
                      e.msg);
        ck_assert_int_eq(back.d_ff, c->model.d_ff);
        ck_assert_mem_eq(back.attn_set, c->model.attn_set, sizeof back.attn_set);
        return;
    }
    al_model m, l;
    ck_assert_msg(al_model_init(&m, &c->model, &e) == 0, "%s: %s", what, e.msg);
    al_model_init_weights(&m, 3);
    char *dir = al_test_tmpdir(), path[4200];
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    ck_assert_int_eq(al_checkpoint_save(path, &m, 1, &e), 0);
    ck_assert_msg(al_checkpoint_load(path, &l, NULL, &e) == 0,
                  "%s: trained, then refused by the checkpoint reader: %s", what, e.msg);
    ck_assert_uint_eq(l.n_params, m.n_params);
    ck_assert_mem_eq(l.params, m.params, m.n_params * sizeof(float));
    ck_assert_mem_eq(l.cfg.attn_set, m.cfg.attn_set, sizeof m.cfg.attn_set);
    al_model_free(&m), al_model_free(&l);
    free(dir);
}

/* Load the base file with one --set; 0, or -1 with the message in e. */
static int load_with(const char *set, al_config *c, al_err *e)
{
    const char *sets[] = {set};
    return al_config_load(base_yaml(), sets, 1, c, e);
}

/* One row of table t under path at its largest value and one past it. */
static int walk_row(const key_spec *k, const char *path)
{
    if ((k->type != K_INT && k->type != K_DOUBLE) || k->max <= 0) return 0;
    char key[128], set[192], what[256];
    al_cfg_join(key, sizeof key, path, k->key);
    al_config c;
    al_err e;
    if (k->type == K_INT) snprintf(set, sizeof set, "%s=%ld", key, (long)k->max);
    else snprintf(set, sizeof set, "%s=%.17g", key, k->max);
    snprintf(what, sizeof what, "--set %s", set);
    if (load_with(set, &c, &e) == 0) {
        if (strncmp(key, "model.", 6) == 0) expect_loads(&c, what);
    } else {   /* refused by another rule: it must say which key */
        ck_assert_msg(strstr(e.msg, key) != NULL, "%s refused without naming %s: %s", what, key,
                      e.msg);
    }
    if (k->type == K_INT) snprintf(set, sizeof set, "%s=%ld", key, (long)k->max + 1);
    else snprintf(set, sizeof set, "%s=%.17g", key, k->max * 2);
    char want[160];
    snprintf(want, sizeof want, "'%s' (", key);
    ck_assert_msg(load_with(set, &c, &e) != 0, "--set %s: accepted past the key's row", set);
    /* "must be at most", or the rule's own upper bound (rope_fraction: [0, 1]) */
    ck_assert_msg(strstr(e.msg, want) && (strstr(e.msg, "must be at most") ||
                                          strstr(e.msg, "must be in [")),
                  "--set %s: refused without naming the key and its limit: %s", set, e.msg);
    return 1;
}

START_TEST(every_numeric_row_trains_only_what_its_checkpoint_loads)
{
    int rows = 0;
    static const char *const maps[] = {"model", "data", "train", "report", NULL};
    for (int i = 0; maps[i]; i++)
        for (const key_spec *k = al_cfg_key(al_cfg_top_keys, maps[i])->sub; k->key; k++)
            rows += walk_row(k, maps[i]);
    ck_assert_int_ge(rows, 13);   /* 12 model rows and data.vocab_size carry a max */
}
END_TEST

/* "{variant: V, a: 2, b: 16384}": v's tiny settings, setting j at x. */
static void attention_set(char *out, size_t n, const al_variant *v, const double *tiny, int j,
                          long x)
{
    size_t l = (size_t)snprintf(out, n, "model.attention={variant: %s", v->name);
    for (int s = 0; s < al_variant_n_settings(v); s++)
        l += (size_t)snprintf(out + l, n - l, ", %s: %.17g", v->settings[s].name,
                              s == j ? (double)x : tiny[s]);
    snprintf(out + l, n - l, "}");
}

START_TEST(every_variant_setting_trains_only_what_its_checkpoint_loads)
{
    int settings = 0;
    for (int i = 0; i < al_variant_count(); i++) {
        const al_variant *v = al_variant_at(i);
        al_model_config tiny;
        if (al_test_tiny_config(&tiny, v, 1, 16, 2, 8, 16, 64) != 0) continue;
        for (int j = 0; j < al_variant_n_settings(v); j++) {
            if (v->settings[j].kind != AL_SET_INT) continue;
            const char *name = v->settings[j].name;
            char set[512], path[128];
            snprintf(path, sizeof path, "model.attention.%s", name);
            al_config c;
            al_err e;
            attention_set(set, sizeof set, v, tiny.attn_set, j, AL_CFG_SETTING_MAX);
            if (load_with(set, &c, &e) == 0) expect_loads(&c, set);
            else ck_assert_msg(strstr(e.msg, name), "%s: refused without naming %s: %s", set,
                               name, e.msg);
            attention_set(set, sizeof set, v, tiny.attn_set, j, AL_CFG_SETTING_MAX + 1L);
            ck_assert_msg(load_with(set, &c, &e) != 0, "%s: accepted past the limit", set);
            ck_assert_msg(strstr(e.msg, path) && strstr(e.msg, "must be in [-16384, 16384]"),
                          "%s: refused without naming %s and its range: %s", set, path, e.msg);
            settings++;
        }
    }
    ck_assert_int_ge(settings, 6);   /* gqa, local (3), tpa, gla, mla ... */
}
END_TEST

/* The issue's own case, end to end: the largest norm_eps trains and its
 * checkpoint scores; one past it is refused at train time. */
START_TEST(a_run_at_a_rows_largest_value_scores)
{
    char *dir = al_test_tmpdir(), cmd[8192], *out;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && cp '%s' data.txt && printf 'data: {source: text, path: data.txt}\\n"
             "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16}\\ntrain: {steps: 2, "
             "batch_size: 2, eval_every: 2, eval_batches: 1, warmup_steps: 1, threads: 1}\\n' "
             ">g.yaml && '%s' train g.yaml --out r --set model.norm_eps=1 "
             "--set 'model.attention={variant: local, window: 16384, sinks: 16384}' >/dev/null "
             "&& '%s' score r/model.safetensors data.txt --json",
             dir, al_test_corpus(), al_test_binary(), al_test_binary());
    int rc = al_test_run(cmd, &out);
    ck_assert_msg(rc == 0 && strstr(out, "\"loss\""), "exit %d: %s", rc, out);
    free(out);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' train g.yaml --out r2 --set model.norm_eps=1.5",
             dir, al_test_binary());
    rc = al_test_run(cmd, &out);
    ck_assert_msg(rc == 2 && strstr(out, "'model.norm_eps' (1.5) must be at most 1\n"),
                  "exit %d: %s", rc, out);
    free(out);
    free(dir);
}
END_TEST

/* ------------------------------------------------------------ checked sizes (item 2) */

START_TEST(size_helpers_refuse_what_wraps)
{
    size_t r;
    ck_assert_int_eq(al_size_mul(SIZE_MAX / 2 + 1, 2, &r), -1);
    ck_assert_int_eq(al_size_mul(SIZE_MAX / 3, 3, &r), 0);
    ck_assert_uint_eq(r, SIZE_MAX / 3 * 3);
    ck_assert_int_eq(al_size_add(SIZE_MAX, 1, &r), -1);
    ck_assert_int_eq(al_size_mad(1u << 31, 1u << 31, SIZE_MAX - (1ull << 62) + 1, &r), -1);
    ck_assert_int_eq(al_size_mad(1u << 31, 1u << 31, SIZE_MAX - (1ull << 62), &r), 0);
    ck_assert_uint_eq(r, SIZE_MAX);
    ck_assert_int_eq(al_size_mul3(1u << 21, 1u << 21, 1u << 22, &r), -1);   /* 2^64 */
    ck_assert_uint_eq(al_size_sat_mul(UINT64_MAX / 2, 3), UINT64_MAX);
    ck_assert_uint_eq(al_size_sat_add(UINT64_MAX - 1, 2), UINT64_MAX);
}
END_TEST

/* A cache whose bytes cannot be counted reads as SIZE_MAX (refused by the
 * estimates), never as a wrapped small number; a quantized one at the
 * largest group and residual a row allows counts exactly. */
START_TEST(cache_bytes_never_wrap)
{
    for (int dt = 0; dt < AL_KV_NALL; dt++) {
        size_t b = al_kv_cache_bytes_for(SIZE_MAX / 3, 0, 1 << 30, dt, 32, 32);
        ck_assert_msg(b == SIZE_MAX, "dtype %d: %zu", dt, b);
    }
    /* int8, 64 floats a row (32 of them keys), context 2^30, group and residual 2^24:
     * (2^30 - 1 - 2^24) / 2^24 = 62 whole groups of rows quantized, a ring of 2^25 */
    size_t G = 1 << 24, q = 62 * G, ring = 2 * G, want =
        (2 * ((q / G) * 32 + q * ((32 + G - 1) / G)) + ring * 64) * 4 + q * 64;
    ck_assert_uint_eq(al_kv_cache_bytes_for(64, 32, 1 << 30, AL_KV_INT8, 1 << 24, 1 << 24), want);
}
END_TEST

/* ------------------------------------------------------------ estimates, threads (3, 4) */

/* Under ASan (scripts/test --sanitize sets AL_SANITIZED=1) the shadow
 * memory takes terabytes of address space, so a run under `ulimit -v`
 * cannot start: those cases say so and pass, as the memory_limit soak
 * skips. */
static int sanitized(void)
{
    const char *v = getenv("AL_SANITIZED");
    if (!v || strcmp(v, "1") != 0) return 0;
    fprintf(stderr, "test_limits: ulimit -v case skipped under ASan\n");
    return 1;
}

/* A tiny trained run in dir/r (good.yaml beside it); the shell prefix
 * "cd DIR && ulimit -v 4000000 &&" in env. */
static char *tiny_run(char *env, size_t n)
{
    char *dir = al_test_tmpdir(), cmd[8192];
    snprintf(env, n, "cd '%s' && ulimit -v 4000000 &&", dir);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && cp '%s' data.txt && printf 'data: {source: text, path: data.txt}\\n"
             "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16}\\ntrain: {steps: 2, "
             "batch_size: 2, eval_every: 2, eval_batches: 1, warmup_steps: 1, threads: 1}\\n' "
             ">g.yaml && '%s' train g.yaml --out r >/dev/null 2>&1",
             dir, al_test_corpus(), al_test_binary());
    ck_assert_int_eq(al_test_run(cmd, NULL), 0);
    return dir;
}

/* The number after `after` in s, or -1. */
static long number_after(const char *s, const char *after)
{
    const char *p = strstr(s, after);
    return p ? strtol(p + strlen(after), NULL, 10) : -1;
}

START_TEST(a_decode_context_past_memory_is_refused_with_advice_that_is_accepted)
{
    if (sanitized()) return;   /* ASan reserves terabytes: ulimit -v cannot apply */
    char env[4300], cmd[8192], *out;
    char *dir = tiny_run(env, sizeof env);
    snprintf(cmd, sizeof cmd, "%s '%s' generate r/model.safetensors --prompt the --tokens 4 "
             "--context 16777216 --batch 64", env, al_test_binary());
    int rc = al_test_run(cmd, &out);
    long fits = number_after(out, "a context of at most ");
    ck_assert_msg(rc == 2 && fits > 4 && strstr(out, "ulimit -v") &&
                      strchr(out, '\n') == out + strlen(out) - 1,
                  "exit %d: %s", rc, out);
    free(out);
    /* the figure is the same run after run: read while OpenBLAS's threads
     * were still starting, it once moved by their 128 MiB buffer (3.6%
     * here), and advice read off the high one hung the next run (stop 50) */
    for (int i = 0; i < 8; i++) {
        snprintf(cmd, sizeof cmd, "%s '%s' generate r/model.safetensors --prompt the "
                 "--tokens 4 --context 16777216 --batch 64", env, al_test_binary());
        ck_assert_int_eq(al_test_run(cmd, &out), 2);
        long again = number_after(out, "a context of at most ");
        ck_assert_msg(labs(again - fits) <= fits / 256, "run %d: %ld fits, first %ld: %s", i,
                      again, fits, out);
        free(out);
    }
    snprintf(cmd, sizeof cmd, "%s '%s' generate r/model.safetensors --prompt the --tokens 4 "
             "--context %ld --batch 64 >/dev/null", env, al_test_binary(), fits);
    rc = al_test_run(cmd, &out);
    ck_assert_msg(rc == 0, "the advised --context %ld: exit %d: %s", fits, rc, out);
    free(out);
    free(dir);
}
END_TEST

START_TEST(threads_past_memory_are_named_before_any_starts)
{
    if (sanitized()) return;   /* ASan reserves terabytes: ulimit -v cannot apply */
    char env[4300], cmd[8192], *out;
    char *dir = tiny_run(env, sizeof env);
    snprintf(cmd, sizeof cmd, "%s '%s' train g.yaml --out t1 --set train.threads=256", env,
             al_test_binary());
    int rc = al_test_run(cmd, &out);
    long fits = number_after(out, "leave too little memory for this model; 'train.threads' ");
    ck_assert_msg(rc == 2 && strstr(out, "'train.threads' (256)") && fits >= 1 && fits < 256,
                  "exit %d: %s", rc, out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s '%s' train g.yaml --out t2 --set train.threads=%ld "
             ">/dev/null 2>&1", env, al_test_binary(), fits);
    ck_assert_msg(al_test_run(cmd, NULL) == 0, "the advised train.threads %ld failed", fits);
    snprintf(cmd, sizeof cmd, "%s '%s' train g.yaml --out t3 --set train.threads=100000", env,
             al_test_binary());
    rc = al_test_run(cmd, &out);
    ck_assert_msg(rc == 2 && strstr(out, "'train.threads' (100000) must be at most 256"),
                  "exit %d: %s", rc, out);
    free(out);
    free(dir);
}
END_TEST

/* pthread_create failing (tests/plugins/no_threads.c, preloaded: as past
 * RLIMIT_NPROC, which does not bind root) once AL_TEST_THREADS_ALLOWED
 * threads started; OpenBLAS kept from starting its own at load (it
 * reports that failure by raising SIGINT, before main). */
static void no_threads_env(char *env, size_t n, const char *dir, int allowed)
{
    snprintf(env, n, "cd '%s' && OPENBLAS_NUM_THREADS=1 AL_TEST_THREADS_ALLOWED=%d "
             "LD_PRELOAD='%s' ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}"
             "verify_asan_link_order=0\"", dir, allowed, AL_NO_THREADS_SHIM);
}

/* A worker that cannot start is exit 1 with the key or option and the
 * cause, never an assert (134), a hang or a false "interrupted". */
START_TEST(a_thread_that_cannot_start_is_an_error_with_its_cause)
{
    char env[4300], direnv[4300], cmd[8192], *out;
    char *dir = tiny_run(direnv, sizeof direnv);
    no_threads_env(env, sizeof env, dir, 0);
    snprintf(cmd, sizeof cmd, "%s '%s' train g.yaml --out t2 --set train.threads=2", env,
             al_test_binary());
    int rc = al_test_run(cmd, &out);
    ck_assert_msg(rc == 1 && strstr(out, "train.threads (2): could not start a worker thread: "
                                         "Resource temporarily unavailable; lower train.threads") &&
                      !strstr(out, "interrupted") && strchr(out, '\n') == out + strlen(out) - 1,
                  "exit %d: %s", rc, out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s '%s' generate r/model.safetensors --prompt the --tokens 4 "
             "--threads 3", env, al_test_binary());
    rc = al_test_run(cmd, &out);
    ck_assert_msg(rc == 1 && strstr(out, "--threads (3): could not start a worker thread: "
                                         "Resource temporarily unavailable"),
                  "exit %d: %s", rc, out);
    free(out);
    /* one thread needs none started: the same run goes through */
    snprintf(cmd, sizeof cmd, "%s '%s' train g.yaml --out t1 --set train.threads=1", env,
             al_test_binary());
    rc = al_test_run(cmd, &out);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, out);
    free(out);
    free(dir);
}
END_TEST

/* Synthetic data sets (mqar, induction) keep a hash per training example
 * and a hash and index per held-out one: estimated with the model before
 * anything is allocated, refused with a count that then trains. */
START_TEST(a_synthetic_data_set_past_memory_is_refused_with_advice_that_is_accepted)
{
    char *dir = al_test_tmpdir(), cmd[8192], *out;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && printf 'data: {source: mqar, vocab_size: 64, num_kv_pairs: 2, "
             "test_examples: 64}\nmodel: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16}\n"
             "train: {steps: 1, batch_size: 2, eval_every: 1, eval_batches: 1, warmup_steps: 1, "
             "threads: 1, max_memory: 8M}\n' >m.yaml && '%s' train m.yaml --out r1 "
             "--set data.train_examples=2000000000", dir, al_test_binary());
    int rc = al_test_run(cmd, &out);
    long fits = number_after(out, "; 'data.train_examples' ");
    ck_assert_msg(rc == 2 && strstr(out, "'data.train_examples' (2000000000) and "
                                         "'data.test_examples' (64): the mqar examples'") &&
                      strstr(out, "train.max_memory") && fits >= 1 && fits < 2000000000 &&
                      strchr(out, '\n') == out + strlen(out) - 1,
                  "exit %d: %s", rc, out);
    free(out);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' train m.yaml --out r2 --set "
             "data.train_examples=%ld", dir, al_test_binary(), fits);
    rc = al_test_run(cmd, &out);
    ck_assert_msg(rc == 0, "the advised data.train_examples %ld: exit %d: %s", fits, rc, out);
    free(out);
    free(dir);
}
END_TEST

Suite *limits_suite(void)
{
    Suite *s = suite_create("limits");
    TCase *tc = tcase_create("limits");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, every_numeric_row_trains_only_what_its_checkpoint_loads);
    tcase_add_test(tc, every_variant_setting_trains_only_what_its_checkpoint_loads);
    tcase_add_test(tc, a_run_at_a_rows_largest_value_scores);
    tcase_add_test(tc, size_helpers_refuse_what_wraps);
    tcase_add_test(tc, cache_bytes_never_wrap);
    tcase_add_test(tc, a_decode_context_past_memory_is_refused_with_advice_that_is_accepted);
    tcase_add_test(tc, threads_past_memory_are_named_before_any_starts);
    tcase_add_test(tc, a_thread_that_cannot_start_is_an_error_with_its_cause);
    tcase_add_test(tc, a_synthetic_data_set_past_memory_is_refused_with_advice_that_is_accepted);
    suite_add_tcase(s, tc);
    return s;
}
