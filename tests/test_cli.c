/*
 * test_cli.c - the attnlab program as a user runs it: exit statuses,
 * one-line errors with positions, and figures checked against formulas
 * computed here independently.
 */
#include <stdio.h>
#include <string.h>

#include "al_test.h"
#include "al_util.h"

START_TEST(help_lists_the_commands)
{
    char *out;
    ck_assert_int_eq(al_test_attnlab("--help", &out), 0);
    ck_assert_ptr_nonnull(strstr(out, "train"));
    ck_assert_ptr_nonnull(strstr(out, "kv"));
    free(out);
    ck_assert_int_eq(al_test_attnlab("train --help", &out), 0);
    ck_assert_ptr_nonnull(strstr(out, "usage: attnlab train"));
    free(out);
    ck_assert_int_eq(al_test_attnlab("frobnicate", &out), 2);
    ck_assert_ptr_nonnull(strstr(out, "unknown command 'frobnicate'"));
    free(out);
}
END_TEST

/* Parameters and cache of the nanoGPT CPU shape, counted by hand:
 * V*D + L*(2D + attn + 2*D*4D) + D, attn = (H + 2G)*dh*D + D*H*dh. */
static size_t params_by_hand(int L, int D, int H, int G, int dh)
{
    size_t attn = (size_t)(H + 2 * G) * dh * D + (size_t)D * H * dh;
    return 256 * (size_t)D + L * (2 * (size_t)D + attn + 8 * (size_t)D * D) + D;
}

START_TEST(kv_reports_params_and_cache_bytes)
{
    char *dir = al_test_tmpdir();
    char *cfg = al_test_write(dir, "c.yaml",
                              "data: {path: /nonexistent}\n"
                              "model:\n  n_layer: 4\n  d_model: 128\n  n_head: 4\n  d_head: 32\n"
                              "  attention: {variant: gqa, n_kv_head: 2}\n");
    char args[4200], *out, want[128];
    snprintf(args, sizeof args, "kv %s --context 1000", cfg);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    snprintf(want, sizeof want, "parameters: %zu\n", params_by_hand(4, 128, 4, 2, 32));
    ck_assert_msg(strstr(out, want), "%s", out);
    /* 4 layers * 2 (k, v) * 2 heads * 32 = 512 elements */
    ck_assert_ptr_nonnull(strstr(out, "kv_bytes_per_token: f32=2048 bf16=1024 f16=1024"));
    ck_assert_ptr_nonnull(strstr(out, "kv_bytes_at_context_1000: f32=2048000"));
    free(out);
    snprintf(args, sizeof args, "kv %s --set model.attention={variant: mha}", cfg);
    char quoted[4300];
    snprintf(quoted, sizeof quoted, "kv %s --set 'model.attention={variant: mha}'", cfg);
    ck_assert_int_eq(al_test_attnlab(quoted, &out), 0);
    snprintf(want, sizeof want, "parameters: %zu\n", params_by_hand(4, 128, 4, 4, 32));
    ck_assert_msg(strstr(out, want), "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "f32=4096"));
    free(out);
    free(cfg);
    free(dir);
}
END_TEST

/* MLA caches the latent and the shared RoPE key: (d_latent + d_rope) per
 * token per layer, whatever the head count. Parameters by hand: wq, wqr,
 * wdkv, kv_norm, wkr, wuk, wuv, wo. */
START_TEST(kv_reports_mla_latent_plus_rope_bytes)
{
    char *dir = al_test_tmpdir();
    char *cfg = al_test_write(dir, "mla.yaml",
                              "data: {path: /nonexistent}\n"
                              "model:\n  n_layer: 4\n  d_model: 128\n  n_head: 4\n  d_head: 32\n"
                              "  attention: {variant: mla, d_latent: 32, d_rope: 16}\n");
    char args[4200], *out, want[128];
    snprintf(args, sizeof args, "kv %s --context 1000", cfg);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    size_t D = 128, Hd = 4 * 32, dc = 32, dr = 16;
    size_t attn = Hd * D + 4 * dr * D + dc * D + dc + dr * D + 2 * Hd * dc + D * Hd;
    snprintf(want, sizeof want, "parameters: %zu\n",
             256 * D + 4 * (2 * D + attn + 8 * D * D) + D);
    ck_assert_msg(strstr(out, want), "%s", out);
    /* 4 layers * (32 + 16) = 192 elements */
    ck_assert_msg(strstr(out, "kv_elements_per_token: 192\n"), "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "kv_bytes_per_token: f32=768 bf16=384 f16=384"));
    ck_assert_ptr_nonnull(strstr(out, "kv_bytes_at_context_1000: f32=768000"));
    free(out);
    free(cfg);
    free(dir);
}
END_TEST

START_TEST(config_errors_are_one_line_with_position)
{
    char *dir = al_test_tmpdir();
    char *cfg = al_test_write(dir, "bad.yaml",
                              "model:\n  n_layer: 2\n  n_heads: 4\n");
    char args[4200], *out, want[4200];
    snprintf(args, sizeof args, "train %s --out %s/o", cfg, dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 2);
    snprintf(want, sizeof want, "%s:3:3: error: unknown key 'n_heads'", cfg);
    ck_assert_msg(strstr(out, want), "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "did you mean 'n_head'"));
    ck_assert_int_eq((int)(strchr(out, '\n') - out + 1), (int)strlen(out)); /* one line */
    free(out);
    free(cfg);
    cfg = al_test_write(dir, "bad2.yaml",
                        "model:\n  n_head: 8\n  d_model: 256\n  attention:\n"
                        "    variant: gqa\n    n_kv_head: 3\n");
    snprintf(args, sizeof args, "kv %s", cfg);
    ck_assert_int_eq(al_test_attnlab(args, &out), 2);
    ck_assert_msg(strstr(out, "'n_kv_head' (3) must divide 'n_head' (8)"), "%s", out);
    snprintf(want, sizeof want, "%s:6:", cfg);
    ck_assert_msg(strstr(out, want), "%s", out);
    free(out);
    snprintf(args, sizeof args, "kv %s --set model.nope=1", cfg);
    ck_assert_int_eq(al_test_attnlab(args, &out), 2);
    ck_assert_msg(strstr(out, "nope"), "%s", out);
    free(out);
    free(cfg);
    free(dir);
}
END_TEST

START_TEST(train_writes_config_metrics_and_a_result_line)
{
    char *dir = al_test_tmpdir();
    char text[5000];
    for (int i = 0; i < 4999; i++) text[i] = "to be or not to be, "[i % 20];
    text[4999] = 0;
    char *data = al_test_write(dir, "d.txt", text);
    char yaml[8192];
    snprintf(yaml, sizeof yaml,
             "data: {source: text, path: %s}\n"
             "model: {n_layer: 1, d_model: 32, n_head: 2, seq_len: 16, causal: false}\n"
             "train: {steps: 20, batch_size: 4, eval_every: 10, eval_batches: 2, threads: 1}\n",
             data);
    char *cfg = al_test_write(dir, "t.yaml", yaml);
    char args[8400], *out, path[4200];
    snprintf(args, sizeof args, "train %s --out %s/run", cfg, dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    ck_assert_msg(strstr(out, "val_loss="), "%s", out);
    ck_assert_msg(strstr(out, "causal=false"), "%s", out);
    free(out);
    snprintf(path, sizeof path, "%s/run/metrics.csv", dir);
    char *m;
    size_t n;
    al_err e;
    ck_assert_int_eq(al_read_file(path, &m, &n, &e), 0);
    ck_assert_ptr_nonnull(strstr(m, "step,train_loss,val_loss,val_accuracy,lr,tokens_per_s,elapsed_s\n0,"));
    ck_assert_ptr_nonnull(strstr(m, "\n20,"));
    free(m);
    snprintf(path, sizeof path, "%s/run/config.yaml", dir);
    ck_assert_int_eq(al_read_file(path, &m, &n, &e), 0);
    ck_assert_ptr_nonnull(strstr(m, "d_head: 16"));
    ck_assert_ptr_nonnull(strstr(m, "vocab_size: 256"));
    ck_assert_ptr_nonnull(strstr(m, "causal: false"));
    free(m);
    free(cfg), free(data), free(dir);
}
END_TEST

Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, help_lists_the_commands);
    tcase_add_test(tc, kv_reports_params_and_cache_bytes);
    tcase_add_test(tc, kv_reports_mla_latent_plus_rope_bytes);
    tcase_add_test(tc, config_errors_are_one_line_with_position);
    tcase_add_test(tc, train_writes_config_metrics_and_a_result_line);
    suite_add_tcase(s, tc);
    return s;
}
