/*
 * test_sweep_robust.c - a sweep never mixes configurations nor finds late
 * what it could find first (issue 40 item 7): a select axis that changes
 * the parameters or the cache is refused when the file is read, naming the
 * axis; a stage's conversion that cannot work fails the dry run (and the
 * run's start) before the base stage trains; temp files an interrupted
 * writer left inside trial directories (an evaluation's included) are
 * removed by the next run, a live writer's kept.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "al_sweep_spec.h"
#include "al_test.h"

/* An experiment file in dir: a tiny text model, then `rest`. */
static char *write_exp(const char *dir, const char *rest)
{
    char text[8192];
    snprintf(text, sizeof text,
             "name: robust\n"
             "data: {source: text, path: %s}\n"
             "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16}\n"
             "train: {steps: 4, batch_size: 2, eval_every: 4, eval_batches: 1, threads: 1,\n"
             "        warmup_steps: 1}\n"
             "%s", al_test_corpus(), rest);
    return al_test_write(dir, "exp.yaml", text);
}

/* ------------------------------------------------------------ select */

/* The file's error when loading `rest` (NULL when it loads). */
static char *load_error(const char *dir, const char *rest)
{
    char *path = write_exp(dir, rest);
    al_sweep s;
    al_err e;
    int rc = al_sweep_load(path, NULL, 0, NULL, 0, &s, &e);
    free(path);
    if (rc == 0) {
        al_sweep_free(&s);
        return NULL;
    }
    return strdup(e.msg);
}

START_TEST(a_select_axis_changing_parameters_or_cache_is_refused_naming_it)
{
    char *dir = al_test_tmpdir(), *msg;
    msg = load_error(dir, "sweep:\n"
                          "  grid: {model.attention: [{variant: mha}, {variant: mqa}], train.lr: [1, 2]}\n"
                          "  select: {best_of: [train.lr, model.attention]}\n");
    ck_assert_msg(msg && strstr(msg, "exp.yaml:8:32: error: 'sweep.select.best_of': "
                                     "'model.attention' changes the parameter count (") &&
                      strstr(msg, "within configuration 'base' ('mha_lr1' and 'mqa_lr1')"),
                  "%s", msg ? msg : "loaded");
    free(msg);
    /* the same parameters, another cache: a window of 4 rows against 8 */
    msg = load_error(dir, "sweep:\n"
                          "  grid: {model.attention: [{variant: local, window: 4}, "
                          "{variant: local, window: 8}]}\n"
                          "  select: {best_of: [model.attention]}\n");
    ck_assert_msg(msg && strstr(msg, "exp.yaml:8:22: error: 'sweep.select.best_of': "
                                     "'model.attention' changes the KV cache (") &&
                      strstr(msg, " f32 bytes at 16 tokens)"),
                  "%s", msg ? msg : "loaded");
    free(msg);
    /* an axis that keeps both is what select is for */
    msg = load_error(dir, "sweep:\n"
                          "  grid: {model.attention: [{variant: mha}, {variant: mqa}], train.lr: [1, 2]}\n"
                          "  select: {best_of: [train.lr]}\n");
    ck_assert_msg(!msg, "%s", msg);
    /* through the binary: the dry run, exit 2, one line */
    char *path = write_exp(dir, "sweep:\n  grid: {model.attention: [{variant: mha}, "
                                "{variant: mqa}]}\n  select: {best_of: [model.attention]}\n"), *out;
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s/r --dry-run", path, dir), 2);
    ck_assert_msg(strstr(out, "'model.attention' changes the parameter count") &&
                      strchr(out, '\n') == out + strlen(out) - 1, "%s", out);
    free(out), free(path), free(dir);
}
END_TEST

/* ------------------------------------------------------------ stages */

/* mean pools K/V heads and cannot reach mla: said by the dry run, with
 * the stage and the trial, before anything trains. */
START_TEST(a_stage_conversion_that_cannot_work_fails_the_dry_run)
{
    char *dir = al_test_tmpdir(), *out;
    char *path = write_exp(dir, "stages:\n"
                                "  - name: base\n"
                                "    sweep: {grid: {model.attention: [{variant: mha}]}}\n"
                                "  - name: up\n"
                                "    from: base\n"
                                "    convert: {to: {variant: mla, d_latent: 8, d_rope: 4}, "
                                "method: mean}\n");
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s/r --dry-run", path, dir), 2);
    ck_assert_msg(strstr(out, "exp.yaml:11:14: error: stage 'up': converting trial 'base_seed1' "
                              "(mha) to mla by mean cannot work: ") &&
                      strchr(out, '\n') == out + strlen(out) - 1, "%s", out);
    free(out);
    char r[4200];
    snprintf(r, sizeof r, "%s/r2", dir);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s", path, r), 2); /* nothing trained */
    free(out);
    snprintf(r, sizeof r, "%s/r2/base_seed1", dir);
    ck_assert(!al_test_exists(r));
    free(path);
    /* svd reaches it: the same file with svd passes the dry run */
    path = write_exp(dir, "stages:\n"
                          "  - name: base\n"
                          "    sweep: {grid: {model.attention: [{variant: mha}]}}\n"
                          "  - name: up\n"
                          "    from: base\n"
                          "    convert: {to: {variant: mla, d_latent: 8, d_rope: 4}, "
                          "method: svd}\n");
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s/r3 --dry-run", path, dir), 0);
    free(out), free(path), free(dir);
}
END_TEST

/* ------------------------------------------------------------ temp files */

START_TEST(temp_files_of_interrupted_writers_are_removed_on_the_next_run)
{
    char *dir = al_test_tmpdir(), *out, r[4200], t[4400], live[4600], dead[3][4600];
    char *path = write_exp(dir, "");
    snprintf(r, sizeof r, "%s/r", dir);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s", path, r), 0);
    free(out);
    snprintf(t, sizeof t, "%s/base_seed1", r);
    ck_assert(al_test_exists(t));
    /* pid 99999999 is past any pid_max: its writer is gone; ours is alive */
    snprintf(dead[0], sizeof dead[0], "%s/eval.csv.tmp.99999999", t);
    snprintf(dead[1], sizeof dead[1], "%s/eval/test.txt.tmp.99999999", t);
    snprintf(dead[2], sizeof dead[2], "%s/result.json.tmp.99999999", t);
    snprintf(live, sizeof live, "%s/eval.csv.tmp.%ld", t, (long)getpid());
    char evdir[4500];
    snprintf(evdir, sizeof evdir, "%s/eval", t);
    mkdir(evdir, 0777);
    for (int i = 0; i < 3; i++) free(al_test_write("/", dead[i] + 1, "half\n"));
    free(al_test_write("/", live + 1, "being written\n"));
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s", path, r), 0);
    ck_assert_msg(strstr(out, "1 kept from before"), "%s", out);   /* the trial is not rerun */
    free(out);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(!al_test_exists(dead[i]), "%s left", dead[i]);
    ck_assert_msg(al_test_exists(live), "a live writer's %s removed", live);
    unlink(live);
    free(path), free(dir);
}
END_TEST

Suite *sweep_robust_suite(void)
{
    Suite *s = suite_create("sweep_robust");
    TCase *tc = tcase_create("sweep_robust");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, a_select_axis_changing_parameters_or_cache_is_refused_naming_it);
    tcase_add_test(tc, a_stage_conversion_that_cannot_work_fails_the_dry_run);
    tcase_add_test(tc, temp_files_of_interrupted_writers_are_removed_on_the_next_run);
    suite_add_tcase(s, tc);
    return s;
}
