/*
 * test_cmd_attention.c - `attnlab attention` (src/cmd/cmd_attention.c): a run
 * writes the files and a table whose numbers are the library's statistics
 * for the same checkpoint and prompt; --file/--offset/--len pick the same
 * bytes as --prompt; bad input is one line and exit status 2.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "al_attention.h"
#include "al_checkpoint.h"
#include "al_registry.h"
#include "al_test.h"
#include "al_test_model.h"

static struct {
    char *dir, ckpt[4200], text[4200];
} F;

static void setup(void)
{
    al_model_config c;
    al_model m;
    al_err e;
    F.dir = al_test_tmpdir();
    al_test_tiny_config(&c, al_variant_find("mla"), 2, 32, 4, 8, 24, 256);
    if (al_model_init(&m, &c, &e) != 0) abort();
    al_model_init_weights(&m, 11);
    for (size_t j = 0; j < m.n_params; j++) m.params[j] *= 10.0f;
    snprintf(F.ckpt, sizeof F.ckpt, "%s/model.safetensors", F.dir);
    if (al_checkpoint_save(F.ckpt, &m, 0, &e) != 0) abort();
    al_model_free(&m);
    char *t = al_test_write(F.dir, "text.txt", "0123456789In the beginning God created");
    snprintf(F.text, sizeof F.text, "%s", t);
    free(t);
}

static void teardown(void) { free(F.dir); }

/* noinline: GCC 12 inlines it and then warns of a dangling pointer it
 * imagines (-Wdangling-pointer). */
__attribute__((noinline)) static char *read_text(const char *dir, const char *name)
{
    char path[8800], *buf = NULL;
    size_t n;
    al_err e;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int rc = al_read_file(path, &buf, &n, &e);
    ck_assert_msg(rc == 0, "%s", e.msg);
    return buf;
}

START_TEST(a_run_writes_the_maps_and_the_librarys_statistics)
{
    char args[9000], out_dir[4300], *out;
    snprintf(out_dir, sizeof out_dir, "%s/run", F.dir);
    snprintf(args, sizeof args, "attention %s --prompt 'In the beginning' --out %s", F.ckpt,
             out_dir);
    ck_assert_msg(al_test_attnlab(args, &out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "16 tokens, mla attention\n"), "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "layer head  entropy distance"));
    /* the same statistics computed here */
    al_model m;
    al_err e;
    ck_assert_int_eq(al_checkpoint_load(F.ckpt, &m, NULL, &e), 0);
    int tok[16];
    for (int i = 0; i < 16; i++) tok[i] = (unsigned char)"In the beginning"[i];
    al_head_stats st[8];
    ck_assert_int_eq(al_head_stats_model(&m, tok, 1, 16, NULL, st, &e), 0);
    char *csv = read_text(out_dir, "heads.csv");
    const char *row = strchr(csv, '\n') + 1;
    for (int k = 0; k < 8; k++, row = strchr(row, '\n') + 1) {
        int l, h;
        double v[5];
        ck_assert_int_eq(sscanf(row, "%d,%d,%lf,%lf,%lf,%lf,%lf", &l, &h, v, v + 1, v + 2,
                                v + 3, v + 4), 7);
        ck_assert_int_eq(l * 4 + h, k);
        const double want[5] = {st[k].entropy, st[k].distance, st[k].first, st[k].prev,
                                st[k].induction};
        for (int i = 0; i < 5; i++) ck_assert_double_eq_tol(v[i], want[i], 1e-6);
        char line[128];
        snprintf(line, sizeof line, "%5d %4d %8.3f %8.2f", l, h, st[k].entropy, st[k].distance);
        ck_assert_msg(strstr(out, line), "no '%s' in:\n%s", line, out);
    }
    ck_assert_int_eq(*row, 0);
    /* the same bytes through --file, restricted to layer 0 and heads 1, 3 */
    char *att = read_text(out_dir, "attention.csv");
    snprintf(args, sizeof args, "attention %s --file %s --offset 10 --len 16 --layers 0 "
             "--heads 1,3 --out %s/file", F.ckpt, F.text, F.dir);
    free(out);
    ck_assert_msg(al_test_attnlab(args, &out) == 0, "%s", out);
    snprintf(out_dir, sizeof out_dir, "%s/file", F.dir);
    char *att2 = read_text(out_dir, "attention.csv");
    int rows = 0;
    for (const char *p = strchr(att2, '\n') + 1; *p; p = strchr(p, '\n') + 1, rows++) {
        const char *nl = strchr(p, '\n');
        char line[128];
        snprintf(line, sizeof line, "\n%.*s", (int)(nl - p + 1), p);
        ck_assert_msg(strncmp(p, "0,1,", 4) == 0 || strncmp(p, "0,3,", 4) == 0, "%s", line);
        ck_assert_msg(strstr(att, line), "row%s is not in the --prompt run's CSV", line);
    }
    ck_assert_int_eq(rows, 2 * 16 * 17 / 2);
    free(att), free(att2), free(csv), free(out);
    al_model_free(&m);
}
END_TEST

/* Each bad input: exit 2 and exactly one line, containing `want`. */
static void refused(const char *args, const char *want)
{
    char cmd[9000], *out;
    snprintf(cmd, sizeof cmd, "attention %s", args);
    int rc = al_test_attnlab(cmd, &out);
    ck_assert_msg(rc == 2, "'%s' exited %d:\n%s", args, rc, out);
    ck_assert_msg(strncmp(out, "attnlab: ", 9) == 0 && strchr(out, '\n') == out + strlen(out) - 1,
                  "'%s': not one line:\n%s", args, out);
    ck_assert_msg(strstr(out, want), "'%s': wanted '%s' in:\n%s", args, want, out);
    free(out);
}

START_TEST(bad_input_is_one_line_and_exit_2)
{
    char a[9000], garbage[4300];
    const char *o = " --out /tmp/attnlab-test-never";
#define REFUSED(want, ...) (snprintf(a, sizeof a, __VA_ARGS__), refused(a, want))
    REFUSED("more than the model's context (seq_len 24)",
            "%s --prompt 'a prompt of twenty-five b'%s", F.ckpt, o);
    REFUSED("the prompt is empty", "%s --prompt ''%s", F.ckpt, o);
    REFUSED("--layers: layer 2 is out of range (the model has 2: 0..1)",
            "%s --prompt ab --layers 0,2%s", F.ckpt, o);
    REFUSED("--heads: head 4 is out of range (the model has 4: 0..3)",
            "%s --prompt ab --heads 1-4%s", F.ckpt, o);
    REFUSED("--heads wants a list such as 0,2-3, got '1-'", "%s --prompt ab --heads 1-%s",
            F.ckpt, o);
    REFUSED("--layers wants a list such as 0,2-3, got '1,,0'", "%s --prompt ab --layers 1,,0%s",
            F.ckpt, o);
    REFUSED("missing --out DIR", "%s --prompt ab", F.ckpt);
    REFUSED("give exactly one of --prompt TEXT and --file F", "%s --prompt ab --file %s%s",
            F.ckpt, F.text, o);
    REFUSED("give exactly one of --prompt TEXT and --file F", "%s%s", F.ckpt, o);
    REFUSED("--offset and --len go with --file", "%s --prompt ab --len 2%s", F.ckpt, o);
    REFUSED("--offset 99 is past the end of", "%s --file %s --offset 99%s", F.ckpt, F.text, o);
    REFUSED("--len 20 runs past the end of", "%s --file %s --offset 30 --len 20%s", F.ckpt,
            F.text, o);
    REFUSED("--len wants an integer in [1, 16777216], got '0'", "%s --file %s --len 0%s", F.ckpt, F.text, o);
    REFUSED("/nope.txt", "%s --file %s/nope.txt%s", F.ckpt, F.dir, o);
    REFUSED("needs at least 2 distinct tokens", "%s --prompt ab --alphabet xxx%s", F.ckpt, o);
    REFUSED("attention: unknown option '--bogus'", "%s --prompt ab --bogus%s", F.ckpt, o);
    REFUSED("missing the CHECKPOINT argument", "--prompt ab%s", o);
    REFUSED("missing.safetensors", "%s/missing.safetensors --prompt ab%s", F.dir, o);
    snprintf(garbage, sizeof garbage, "%s/garbage.safetensors", F.dir);
    char *g = al_test_write(F.dir, "garbage.safetensors", "this is not a checkpoint at all");
    free(g);
    REFUSED("garbage.safetensors", "%s --prompt ab%s", garbage, o);
#undef REFUSED
}
END_TEST

Suite *cmd_attention_suite(void)
{
    Suite *s = suite_create("cmd_attention");
    TCase *tc = tcase_create("cmd_attention");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_run_writes_the_maps_and_the_librarys_statistics);
    tcase_add_test(tc, bad_input_is_one_line_and_exit_2);
    suite_add_tcase(s, tc);
    return s;
}
