/*
 * test_train.c - optimizer, schedule, and whole training runs: a tiny model
 * overfits a repeated string; same seed, same losses; NaN stops the run.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "al_config_io.h"
#include "al_optim.h"
#include "al_registry.h"
#include "al_test.h"
#include "al_train.h"

START_TEST(lr_schedule_warms_up_then_decays_to_min)
{
    ck_assert_double_eq_tol(al_lr_at(0, 100, 10, 1e-3, 1e-4), 1e-3 / 11, 1e-12);
    ck_assert_double_eq_tol(al_lr_at(9, 100, 10, 1e-3, 1e-4), 1e-3 * 10 / 11, 1e-12);
    ck_assert_double_eq_tol(al_lr_at(10, 100, 10, 1e-3, 1e-4), 1e-3, 1e-12);
    ck_assert_double_eq_tol(al_lr_at(55, 100, 10, 1e-3, 1e-4), 5.5e-4, 1e-12);
    ck_assert_double_eq_tol(al_lr_at(100, 100, 10, 1e-3, 1e-4), 1e-4, 1e-12);
}
END_TEST

/* A model whose only tensor table we fake: AdamW on one 2-D and one 1-D
 * tensor against the update written out by hand. */
START_TEST(adamw_matches_hand_computed_updates)
{
    al_model m;
    memset(&m, 0, sizeof m);
    al_tensor t[2] = {{"w", 2, {1, 2}, 0, 2, AL_INIT_NORMAL, 1},
                      {"n", 1, {1, 0}, 2, 1, AL_INIT_ONES, 0}};
    float p[3] = {1.0f, -2.0f, 0.5f}, g[3] = {0.1f, -0.3f, 0.2f};
    m.tensors = t;
    m.n_tensors = 2;
    m.n_params = 3;
    m.params = p;
    m.grads = g;
    al_adamw o;
    al_adamw_init(&o, 3, 0.9, 0.99, 0.1);
    double ref[3] = {1.0, -2.0, 0.5}, mm[3] = {0}, vv[3] = {0};
    for (int step = 1; step <= 3; step++) {
        al_adamw_step(&o, &m, 0.01);
        for (int i = 0; i < 3; i++) {
            double wd = i < 2 ? 0.1 : 0.0;
            ref[i] -= 0.01 * wd * ref[i];
            mm[i] = 0.9 * mm[i] + 0.1 * g[i];
            vv[i] = 0.99 * vv[i] + 0.01 * g[i] * g[i];
            double mh = mm[i] / (1 - pow(0.9, step)), vh = vv[i] / (1 - pow(0.99, step));
            ref[i] -= 0.01 * mh / (sqrt(vh) + 1e-8);
        }
    }
    for (int i = 0; i < 3; i++) ck_assert_double_eq_tol(p[i], ref[i], 1e-6);
    al_adamw_free(&o);
}
END_TEST

START_TEST(clip_scales_to_max_norm)
{
    al_model m;
    memset(&m, 0, sizeof m);
    float g[2] = {3.0f, 4.0f};
    m.grads = g;
    m.n_params = 2;
    ck_assert_double_eq_tol(al_clip_grad_norm(&m, 1.0), 5.0, 1e-9);
    ck_assert_double_eq_tol(g[0], 0.6, 1e-5);
    ck_assert_double_eq_tol(g[1], 0.8, 1e-5);
    ck_assert_double_eq_tol(al_clip_grad_norm(&m, 10.0), 1.0, 1e-5);
    ck_assert_double_eq_tol(g[0], 0.6, 1e-6);
}
END_TEST

/* A text file of a repeated string with distinct characters: every byte
 * determines the next, so the loss can reach zero. */
static void tiny_config(al_config *c, const char *dir, const char *variant)
{
    char text[3201];
    for (int i = 0; i < 3200; i++) text[i] = "abcdefghijklmnop"[i % 16];
    text[3200] = 0;
    char *path = al_test_write(dir, "rep.txt", text);
    al_config_defaults(c);
    snprintf(c->data.source, sizeof c->data.source, "text");
    snprintf(c->data.path, sizeof c->data.path, "%s", path);
    free(path);
    c->model.n_layer = 1;
    c->model.d_model = 32;
    c->model.n_head = 2;
    c->model.d_head = 16;
    c->model.seq_len = 16;
    c->model.attn = al_variant_find(variant);
    snprintf(c->model.variant, sizeof c->model.variant, "%s", variant);
    c->model.attn_set[0] = 1;
    c->train.steps = 150;
    c->train.batch_size = 8;
    c->train.lr = 1e-2;
    c->train.min_lr = 1e-3;
    c->train.warmup_steps = 10;
    c->train.eval_every = 50;
    c->train.eval_batches = 2;
    c->train.threads = 1;
}

START_TEST(tiny_model_overfits_a_repeated_string)
{
    char *dir = al_test_tmpdir();
    al_config c;
    tiny_config(&c, dir, "mha");
    al_train_opts o = {.outdir = dir};
    al_train_result r;
    al_err e;
    ck_assert_msg(al_train(&c, &o, &r, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(r.status, AL_TRAIN_OK);
    ck_assert_msg(r.val_loss < 0.05, "val loss %g", r.val_loss);
    ck_assert_msg(r.final_train_loss < 0.05, "train loss %g", r.final_train_loss);
    free(dir);
}
END_TEST

static char *read_metrics_losses(const char *dir)
{
    char path[4200], *buf;
    size_t n;
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    al_err e;
    ck_assert_int_eq(al_read_file(path, &buf, &n, &e), 0);
    /* keep columns step..lr; tokens_per_s and elapsed_s are wall-clock */
    char *out = calloc(n + 1, 1), *o = out;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        int commas = 0;
        for (char *p = line; *p && commas < 5; p++) {
            if (*p == ',') commas++;
            if (commas < 5) *o++ = *p;
        }
        *o++ = '\n';
    }
    free(buf);
    return out;
}

START_TEST(same_seed_gives_identical_metrics)
{
    char *d1 = al_test_tmpdir(), *d2 = al_test_tmpdir(), *d3 = al_test_tmpdir();
    al_config c;
    tiny_config(&c, d1, "gqa");
    c.train.steps = 40;
    c.train.eval_every = 10;
    c.train.threads = 2;
    al_train_result r1, r2, r3;
    al_err e;
    al_train_opts o1 = {.outdir = d1}, o2 = {.outdir = d2}, o3 = {.outdir = d3};
    ck_assert_int_eq(al_train(&c, &o1, &r1, &e), 0);
    ck_assert_int_eq(al_train(&c, &o2, &r2, &e), 0);
    char *m1 = read_metrics_losses(d1), *m2 = read_metrics_losses(d2);
    ck_assert_str_eq(m1, m2);
    ck_assert(memcmp(&r1.val_loss, &r2.val_loss, sizeof(double)) == 0);
    c.train.seed = 2;
    ck_assert_int_eq(al_train(&c, &o3, &r3, &e), 0);
    char *m3 = read_metrics_losses(d3);
    ck_assert_str_ne(m1, m3);
    free(m1), free(m2), free(m3), free(d1), free(d2), free(d3);
}
END_TEST

START_TEST(huge_learning_rate_is_reported_as_diverged)
{
    char *dir = al_test_tmpdir();
    al_config c;
    tiny_config(&c, dir, "mha");
    c.train.lr = 1e6;
    c.train.min_lr = 1e6;
    c.train.grad_clip = 0;
    c.train.warmup_steps = 0;
    c.train.steps = 100;
    al_train_opts o = {.outdir = dir};
    al_train_result r;
    al_err e;
    ck_assert_int_eq(al_train(&c, &o, &r, &e), 0);
    ck_assert_int_eq(r.status, AL_TRAIN_DIVERGED);
    ck_assert_ptr_nonnull(strstr(r.reason, "loss became"));
    free(dir);
}
END_TEST

START_TEST(missing_or_short_data_is_a_clear_error)
{
    char *dir = al_test_tmpdir();
    al_config c;
    tiny_config(&c, dir, "mha");
    snprintf(c.data.path, sizeof c.data.path, "%s/nope.txt", dir);
    al_train_opts o = {0};
    al_train_result r;
    al_err e;
    ck_assert_int_ne(al_train(&c, &o, &r, &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "nope.txt: cannot open"));
    char *p = al_test_write(dir, "short.txt", "abc");
    snprintf(c.data.path, sizeof c.data.path, "%s", p);
    ck_assert_int_ne(al_train(&c, &o, &r, &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "too short"));
    free(p);
    free(dir);
}
END_TEST

Suite *train_suite(void)
{
    Suite *s = suite_create("train");
    TCase *tc = tcase_create("train");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, lr_schedule_warms_up_then_decays_to_min);
    tcase_add_test(tc, adamw_matches_hand_computed_updates);
    tcase_add_test(tc, clip_scales_to_max_norm);
    tcase_add_test(tc, tiny_model_overfits_a_repeated_string);
    tcase_add_test(tc, same_seed_gives_identical_metrics);
    tcase_add_test(tc, huge_learning_rate_is_reported_as_diverged);
    tcase_add_test(tc, missing_or_short_data_is_a_clear_error);
    suite_add_tcase(s, tc);
    return s;
}
