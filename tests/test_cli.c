/*
 * test_cli.c - the attnlab program as a user runs it: exit statuses,
 * one-line errors with positions, and figures checked against formulas
 * computed here independently; and the one option parser (al_cli.h),
 * through a made-up table and through every real subcommand.
 */
#include <stdio.h>
#include <string.h>

#include "al_cli.h"
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
    ck_assert_msg(!strstr(out, "is a sweep"), "%s", out);
    free(out);
    /* a sweep file: the base's figures, and the note that they are only its */
    char *sw = al_test_write(dir, "s.yaml",
                             "data: {path: /nonexistent}\n"
                             "model: {n_layer: 4, d_model: 128, n_head: 4, d_head: 32}\n"
                             "sweep: {grid: {model.attention: [{variant: mha}, {variant: mqa}]}}\n");
    snprintf(args, sizeof args, "kv %s", sw);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    ck_assert_msg(strstr(out, "is a sweep: these are its base configuration's figures") &&
                  strstr(out, "--dry-run` lists every trial's cache") && strstr(out, "f32=4096"),
                  "%s", out);
    free(out), free(sw);
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

/* ------------------------------------------------------------ the parser */

/* A made-up command: one of each kind of entry. */
typedef struct toy_args {
    const char *in, *extra, *name, *dir, *mode_text;
    const char *tags[2];
    int n_tags, verbose, small;
    long count;
    double ratio;
} toy_args;

static int parse_ratio(const char *v, void *field)
{
    char *end;
    double r = strtod(v, &end);
    if (end == v || *end || r < 0 || r > 1) return -1;
    *(double *)field = r;
    return 0;
}

static const al_opt toy_opts[] = {
    AL_ARG("INPUT", toy_args, in, AL_OPT_REQUIRED, "what to read"),
    AL_ARG("EXTRA", toy_args, extra, 0, "an optional second file"),
    AL_STR("--name", "TEXT", toy_args, name, "a name for the run"),
    {.name = "--dir", .kind = AL_OPT_PATH, .meta = "DIR", AL_CLI_AT(toy_args, dir),
     .flags = AL_OPT_REQUIRED, .help = "where it goes\nsecond line of help"},
    AL_LONG("--count", "N", 1, 10, toy_args, count, "how many, 1 to 10"),
    AL_INT("--small", "K", -3, 3, toy_args, small, "a small int"),
    AL_LIST("--tag", "T", 2, toy_args, tags, n_tags, "a tag; may repeat twice"),
    AL_FLAG("--verbose", toy_args, verbose, "say more"),
    AL_FUNC("--ratio", "R", parse_ratio, "a number in [0, 1]", toy_args, ratio, "a fraction"),
    {.name = "--mode", .kind = AL_OPT_STR, .meta = "M", AL_CLI_AT(toy_args, mode_text),
     .flags = AL_OPT_EQUALS, .help = "also as --mode=M"},
    {.name = "--old", .kind = AL_OPT_STR, .meta = "X", AL_CLI_AT(toy_args, name),
     .flags = AL_OPT_IGNORED, .help = "never listed with the others"},
    {0},
};

static const al_cli_spec toy_spec = {"toy", toy_opts, "A made-up command.\n"};

/* Parses the words of line (split at spaces) into *a; returns what
 * al_cli_parse_args returns, e's message in msg. */
static int toy_parse(const char *line, toy_args *a, char *msg)
{
    static char buf[512];
    char *argv[32], *save = NULL;
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *w = strtok_r(buf, " ", &save); w; w = strtok_r(NULL, " ", &save)) argv[argc++] = w;
    al_err e = {""};
    *a = (toy_args){.count = 5, .ratio = 0.5};   /* defaults stay unless given */
    int rc = al_cli_parse_args(&toy_spec, argc, argv, a, &e);
    snprintf(msg, AL_ERR_LEN, "%s", e.msg);
    return rc;
}

START_TEST(parser_puts_each_value_where_its_entry_says)
{
    toy_args a;
    char msg[AL_ERR_LEN];
    ck_assert_int_eq(toy_parse("in.txt --dir out --name run1 --count 10 --small -3 --tag x "
                               "--verbose --ratio 0.25 --mode=fast - --tag -y", &a, msg), 0);
    ck_assert_str_eq(a.in, "in.txt");
    ck_assert_str_eq(a.extra, "-");   /* "-" alone is an argument */
    ck_assert_str_eq(a.dir, "out");
    ck_assert_str_eq(a.name, "run1");
    ck_assert_int_eq(a.count, 10);
    ck_assert_int_eq(a.small, -3);
    ck_assert_int_eq(a.n_tags, 2);
    ck_assert_str_eq(a.tags[0], "x");
    ck_assert_str_eq(a.tags[1], "-y");   /* a value may start with '-' */
    ck_assert_int_eq(a.verbose, 1);
    ck_assert(a.ratio == 0.25);
    ck_assert_str_eq(a.mode_text, "fast");
    /* defaults kept; a repeated single-valued option keeps the last */
    ck_assert_int_eq(toy_parse("in --dir a --dir b --mode m", &a, msg), 0);
    ck_assert_int_eq(a.count, 5);
    ck_assert(a.ratio == 0.5);
    ck_assert_str_eq(a.dir, "b");
    ck_assert_str_eq(a.mode_text, "m");
    ck_assert_ptr_null(a.extra);
    ck_assert_int_eq(a.verbose, 0);
}
END_TEST

START_TEST(parser_refuses_a_list_past_its_limit_naming_it)
{
    toy_args a;
    char msg[AL_ERR_LEN];
    ck_assert_int_eq(toy_parse("in --dir d --tag 1 --tag 2 --tag 3", &a, msg), -1);
    ck_assert_str_eq(msg, "toy: too many --tag options (at most 2)");
}
END_TEST

START_TEST(parser_refuses_numbers_outside_their_limits_naming_the_range)
{
    static const struct { const char *args, *msg; } c[] = {
        {"in --dir d --count 11", "toy: --count wants an integer in [1, 10], got '11'"},
        {"in --dir d --count 0", "toy: --count wants an integer in [1, 10], got '0'"},
        {"in --dir d --count 2147483647",
         "toy: --count wants an integer in [1, 10], got '2147483647'"},
        {"in --dir d --count 99999999999999999999999",
         "toy: --count wants an integer in [1, 10], got '99999999999999999999999'"},
        {"in --dir d --count 3x", "toy: --count wants an integer in [1, 10], got '3x'"},
        {"in --dir d --count ", "toy: missing the value of --count (--count N)"},
        {"in --dir d --small 4", "toy: --small wants an integer in [-3, 3], got '4'"},
        {"in --dir d --ratio 2", "toy: --ratio wants a number in [0, 1], got '2'"},
    };
    toy_args a;
    char msg[AL_ERR_LEN];
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        ck_assert_msg(toy_parse(c[i].args, &a, msg) == -1, "%s accepted", c[i].args);
        ck_assert_str_eq(msg, c[i].msg);
    }
    ck_assert_int_eq(toy_parse("in --dir d --count 1 --small 3", &a, msg), 0);
    ck_assert_int_eq(a.count, 1);
    ck_assert_int_eq(a.small, 3);
}
END_TEST

START_TEST(parser_names_unknown_options_missing_values_and_arguments)
{
    static const struct { const char *args, *msg; } c[] = {
        {"in --dir d --cuont 3",
         "toy: unknown option '--cuont' (did you mean '--count'?) (see 'attnlab toy --help')"},
        {"in --dir d --frobnicate",
         "toy: unknown option '--frobnicate' (see 'attnlab toy --help')"},
        {"in --dir d --name=x",   /* --name=VALUE only where the table allows it */
         "toy: unknown option '--name=x' (did you mean '--name'?) (see 'attnlab toy --help')"},
        {"in --dir", "toy: missing the value of --dir (--dir DIR)"},
        {"--dir d", "toy: missing the INPUT argument (see 'attnlab toy --help')"},
        {"in", "toy: missing --dir DIR (see 'attnlab toy --help')"},
        {"in two three --dir d", "toy: unexpected argument 'three'"},
    };
    toy_args a;
    char msg[AL_ERR_LEN];
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        ck_assert_msg(toy_parse(c[i].args, &a, msg) == -1, "%s accepted", c[i].args);
        ck_assert_str_eq(msg, c[i].msg);
    }
    /* --help stops the parse: what follows is not read, nothing is required */
    ck_assert_int_eq(toy_parse("--help --frobnicate", &a, msg), 1);
    ck_assert_int_eq(toy_parse("in -h", &a, msg), 1);
    ck_assert_int_eq(toy_parse("--frobnicate --help", &a, msg), -1);
}
END_TEST

START_TEST(help_is_generated_from_the_table)
{
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    al_cli_help(&toy_spec, f);
    fclose(f);
    ck_assert_msg(!strncmp(text, "usage: attnlab toy INPUT [EXTRA] --dir DIR [options]\n", 53),
                  "%s", text);
    ck_assert_msg(strstr(text, "\nA made-up command.\n"), "%s", text);
    for (const al_opt *o = toy_opts; o->kind != AL_OPT_END; o++) {
        char line[256], first[128];
        snprintf(first, sizeof first, "%.*s", (int)strcspn(o->help, "\n"), o->help);
        if (o->flags & AL_OPT_IGNORED) {   /* not offered at all */
            ck_assert_msg(!strstr(text, first), "%s listed: %s", o->name, text);
            snprintf(line, sizeof line, " %s", o->name);
            ck_assert_msg(!strstr(text, line), "%s listed: %s", o->name, text);
            continue;
        } else if (o->kind == AL_OPT_ARG || o->kind == AL_OPT_FLAG) {
            snprintf(line, sizeof line, "\n  %-19s %s\n", o->name, first);
        } else {
            char left[64];
            snprintf(left, sizeof left, "%s %s", o->name, o->meta);
            snprintf(line, sizeof line, "\n  %-19s %s\n", left, first);
        }
        ck_assert_msg(strstr(text, line), "no '%s' in:\n%s", line, text);
    }
    ck_assert_msg(strstr(text, "where it goes\n                      second line of help\n"),
                  "%s", text);
    ck_assert_msg(strstr(text, "\n  -h, --help          print this help and exit\n"), "%s", text);
    free(text);
}
END_TEST

/* Every subcommand with every option it takes (names a user's scripts
 * rely on): --help lists each, and an unknown option is exit 2, one line. */
START_TEST(every_subcommand_lists_its_options_and_refuses_unknown_ones)
{
    static const struct { const char *cmd, *opts[16], *unused[5]; } c[] = {
        {"train", {"CONFIG.yaml", "--set", "--plugin", "--out", "--stop-after", "--init-from",
                   "--resume"}, {"--context"}},
        {"kv", {"CONFIG.yaml", "--set", "--plugin", "--context"}, {"--out"}},
        {"keys", {"--plugin"}, {NULL}},
        {"variants", {"--plugin"}, {NULL}},
        {"score", {"CHECKPOINT", "FILE", "--seq-len", "--batch", "--threads", "--json",
                   "--plugin"}, {NULL}},
        {"grads", {"CHECKPOINT", "FILE", "--out", "--seq-len", "--batch", "--threads",
                   "--plugin"}, {NULL}},
        {"convert", {"CHECKPOINT", "--to", "--out", "--method", "--seed", "--config", "--data",
                     "--sample-tokens", "--threads", "--set", "--plugin"}, {"--context"}},
        {"generate", {"CHECKPOINT", "--prompt", "--prompt-file", "--prompts-file", "--batch",
                      "--out", "--tokens", "--temperature", "--top-k", "--seed", "--context",
                      "--kv-dtype", "--threads", "--stats", "--plugin"}, {NULL}},
        {"attention", {"CHECKPOINT", "--prompt", "--file", "--offset", "--len", "--out",
                       "--layers", "--heads", "--log-scale", "--alphabet", "--threads",
                       "--plugin"}, {NULL}},
        {"bench-decode", {"CONFIG.yaml", "--set", "--variants", "--contexts", "--tokens",
                          "--kv-dtype", "--batch", "--threads", "--out", "--plugin",
                          "--repeats"}, {"--context"}},
        {"sweep", {"FILE", "--jobs", "--threads-per-job", "--out", "--dry-run", "--set",
                   "--plugin", "--executor", "--slurm-arg", "--no-wait"}, {"--context"}},
        {"trial", {"FILE", "--index", "--out", "--threads", "--set", "--plugin"}, {"--context"}},
        {"report", {"DIR"}, {"--set", "--plugin", "--out", "--context"}},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char args[128], want[128], *out;
        snprintf(args, sizeof args, "%s --help", c[i].cmd);
        ck_assert_int_eq(al_test_attnlab(args, &out), 0);
        snprintf(want, sizeof want, "usage: attnlab %s ", c[i].cmd);
        ck_assert_msg(!strncmp(out, want, strlen(want)), "%s", out);
        for (int k = 0; c[i].opts[k]; k++) {
            snprintf(want, sizeof want, c[i].opts[k][0] == '-' ? " %s " : "  %s ", c[i].opts[k]);
            ck_assert_msg(strstr(out, want), "%s: no %s in:\n%s", c[i].cmd, c[i].opts[k], out);
        }
        /* an option the command has no use for is neither offered nor
         * silently taken: one line naming it and the command, exit 2 */
        for (int k = 0; c[i].unused[k]; k++) {
            snprintf(want, sizeof want, " %s ", c[i].unused[k]);
            ck_assert_msg(!strstr(out, want), "%s offers %s:\n%s", c[i].cmd, c[i].unused[k],
                          out);
            char *o2;
            snprintf(args, sizeof args, "%s %s 1", c[i].cmd, c[i].unused[k]);
            ck_assert_int_eq(al_test_attnlab(args, &o2), 2);
            snprintf(want, sizeof want, "attnlab: %s: %s does not apply to %s (see 'attnlab %s "
                     "--help')\n", c[i].cmd, c[i].unused[k], c[i].cmd, c[i].cmd);
            ck_assert_str_eq(o2, want);
            free(o2);
        }
        free(out);
        snprintf(args, sizeof args, "%s --no-such-option", c[i].cmd);
        ck_assert_int_eq(al_test_attnlab(args, &out), 2);
        snprintf(want, sizeof want, "attnlab: %s: unknown option '--no-such-option' (see "
                 "'attnlab %s --help')\n", c[i].cmd, c[i].cmd);
        ck_assert_str_eq(out, want);
        free(out);
    }
}
END_TEST

/* README's key table is `attnlab keys` as is: a key added to the tables
 * (src/io/config_keys.c) without the README, or a README row edited by
 * hand, fails here (the gta, gla and tpa rows were missing once). */
START_TEST(readme_key_table_is_what_attnlab_keys_prints)
{
    char *keys = NULL, *readme = NULL, path[4096];
    size_t n = 0;
    al_err e = {0};
    ck_assert_int_eq(al_test_attnlab("keys", &keys), 0);
    snprintf(path, sizeof path, "%s/README.md", al_test_srcdir());
    ck_assert_msg(al_read_file(path, &readme, &n, &e) == 0, "%s", e.msg);
    const char *head = "| key | default | meaning |\n";
    ck_assert_msg(strncmp(keys, head, strlen(head)) == 0, "keys starts: %.60s", keys);
    char *at = strstr(readme, head);
    ck_assert_msg(at != NULL, "README.md has no key table");
    char *end = at;                                    /* the table: lines starting '|' */
    while (*end == '|') {
        char *nl = strchr(end, '\n');
        end = nl ? nl + 1 : end + strlen(end);
    }
    size_t len = (size_t)(end - at);
    if (len != strlen(keys) || memcmp(at, keys, len) != 0) {
        size_t i = 0;
        while (i < len && keys[i] && at[i] == keys[i]) i++;
        while (i > 0 && keys[i - 1] != '\n') i--;
        ck_abort_msg("README.md's key table differs from `attnlab keys` at\n  README: %.120s\n"
                     "  keys:   %.120s", at + i, keys + i);
    }
    free(keys);
    free(readme);
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
    tcase_add_test(tc, parser_puts_each_value_where_its_entry_says);
    tcase_add_test(tc, parser_refuses_a_list_past_its_limit_naming_it);
    tcase_add_test(tc, parser_refuses_numbers_outside_their_limits_naming_the_range);
    tcase_add_test(tc, parser_names_unknown_options_missing_values_and_arguments);
    tcase_add_test(tc, help_is_generated_from_the_table);
    tcase_add_test(tc, every_subcommand_lists_its_options_and_refuses_unknown_ones);
    tcase_add_test(tc, readme_key_table_is_what_attnlab_keys_prints);
    suite_add_tcase(s, tc);
    return s;
}
