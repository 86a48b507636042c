/*
 * runner.c - one Check runner for every suite: `al_tests SUITE` runs one
 * suite (meson defines one test() per suite, each with its own timeout);
 * `al_tests` alone runs them all. Exit status = number of failed checks.
 */
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "al_test.h"

Suite *kernels_suite(void);
Suite *config_suite(void);
Suite *model_suite(void);
Suite *variants_suite(void);
Suite *train_suite(void);
Suite *cli_suite(void);
Suite *plugin_suite(void);
Suite *safetensors_suite(void);
Suite *checkpoint_suite(void);
Suite *cmd_score_suite(void);
Suite *torch_suite(void);
Suite *kvcache_suite(void);
Suite *decode_suite(void);
Suite *generate_suite(void);
Suite *sweep_suite(void);
Suite *report_suite(void);
Suite *stats_suite(void);
Suite *bench_suite(void);
Suite *parallel_suite(void);
Suite *gemm_suite(void);
Suite *data_suite(void);
Suite *dist_suite(void);
Suite *sweep_exec_suite(void);
Suite *attention_suite(void);
Suite *attnmap_suite(void);
Suite *cmd_attention_suite(void);
Suite *headstats_suite(void);
Suite *ablation_suite(void);
Suite *gnuplot_suite(void);
Suite *convert_suite(void);
Suite *sweep_stage_suite(void);
Suite *bad_inputs_suite(void);
Suite *spawn_suite(void);
Suite *status_suite(void);

static const struct {
    const char *name;
    Suite *(*make)(void);
} suites[] = {
    {"kernels", kernels_suite},
    {"config", config_suite},
    {"model", model_suite},
    {"variants", variants_suite},
    {"train", train_suite},
    {"cli", cli_suite},
    {"plugin", plugin_suite},
    {"safetensors", safetensors_suite},
    {"checkpoint", checkpoint_suite},
    {"cmd_score", cmd_score_suite},
    {"torch", torch_suite},
    {"kvcache", kvcache_suite},
    {"decode", decode_suite},
    {"generate", generate_suite},
    {"sweep", sweep_suite},
    {"report", report_suite},
    {"stats", stats_suite},
    {"bench", bench_suite},
    {"parallel", parallel_suite},
    {"gemm", gemm_suite},
    {"data", data_suite},
    {"dist", dist_suite},
    {"sweep_exec", sweep_exec_suite},
    {"attention", attention_suite},
    {"attnmap", attnmap_suite},
    {"cmd_attention", cmd_attention_suite},
    {"headstats", headstats_suite},
    {"ablation", ablation_suite},
    {"gnuplot", gnuplot_suite},
    {"convert", convert_suite},
    {"sweep_stage", sweep_stage_suite},
    {"bad_inputs", bad_inputs_suite},
    {"spawn", spawn_suite},
    {"status", status_suite},
    {NULL, NULL},
};

const char *al_test_shakespeare(void)
{
    static char path[4096];
    const char *src = al_test_srcdir();
    snprintf(path, sizeof path, "%s/../shared/data/tinyshakespeare.txt", src);
    struct stat st;
    return stat(path, &st) == 0 ? path : NULL;
}

const char *al_test_srcdir(void)
{
    const char *s = getenv("AL_SRCDIR");
    return s ? s : AL_SRCDIR_DEFAULT;
}

const char *al_test_binary(void)
{
    const char *s = getenv("AL_BINARY");
    return s ? s : AL_BINARY_DEFAULT;
}

char *al_test_tmpdir(void)
{
    char tmpl[] = "/tmp/attnlab-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    ck_assert_ptr_nonnull(d);
    return strdup(d);
}

char *al_test_write(const char *dir, const char *name, const char *text)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *path = malloc(n);
    snprintf(path, n, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

int al_test_run(const char *cmd, char **out)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    char full[8192];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) { free(buf); return -1; }
    size_t r;
    while ((r = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += r;
        if (cap - len < 2) buf = realloc(buf, cap *= 2);
    }
    buf[len] = 0;
    int st = pclose(p);
    if (out) *out = buf; else free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int al_test_attnlab(const char *args, char **out)
{
    size_t n = strlen(al_test_binary()) + strlen(args) + 2;
    char *cmd = malloc(n);
    snprintf(cmd, n, "%s %s", al_test_binary(), args);
    int rc = al_test_run(cmd, out);
    free(cmd);
    return rc;
}

int main(int argc, char **argv)
{
    SRunner *sr = NULL;
    for (int i = 0; suites[i].name; i++) {
        if (argc > 1 && strcmp(argv[1], suites[i].name) != 0) continue;
        if (!sr) sr = srunner_create(suites[i].make());
        else srunner_add_suite(sr, suites[i].make());
    }
    if (!sr) {
        fprintf(stderr, "al_tests: unknown suite '%s'\n", argc > 1 ? argv[1] : "");
        return 2;
    }
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
