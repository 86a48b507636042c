/*
 * test_bench.c - the benchmark (src/cmd/bench.c, scripts/bench) prints figures
 * that add up: FLOPs per token against a count made here from the shape,
 * derived columns against the columns they come from, memory against its
 * count. Nothing here asserts a speed.
 */
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_test.h"
#include "al_util.h"

/* Path of attnlab-bench beside the attnlab binary. */
static void bench_path(char *buf, size_t n)
{
    char *dup = strdup(al_test_binary());
    snprintf(buf, n, "%s/attnlab-bench", dirname(dup));
    free(dup);
}

/* The value of key in the first line of text starting with kind, or NAN. */
static double field(const char *text, const char *kind, const char *key)
{
    size_t kl = strlen(kind);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, kind, kl) != 0 || l[kl] != ' ') continue;
        const char *end = strchr(l, '\n');
        char pat[64];
        snprintf(pat, sizeof pat, " %s=", key);
        const char *p = strstr(l, pat);
        if (!p || (end && p > end)) return NAN;
        return strtod(p + strlen(pat), NULL);
    }
    return NAN;
}

/* FLOPs per token counted from the shape alone: 6 x every 2-D weight (the
 * tied head once) + 6 n_layer H (T+1)/2 (dqk + dv). tiny: L 2, D 128, H 4,
 * dh 32, T 128, F 4D, V 256. */
static double tiny_flops(int mla)
{
    double L = 2, D = 128, H = 4, dh = 32, T = 128, F = 4 * D, V = 256, dc = 32, dr = 16;
    double attn = mla ? H * dh * D + H * dr * D + dc * D + dr * D + 2 * H * dh * dc + D * H * dh
                      : 4 * D * H * dh;
    double n = V * D + L * (attn + 2 * D * F), dqk = dh + (mla ? dr : 0);
    return 6 * n + 6 * L * H * (T + 1) / 2 * (dqk + dh);
}

START_TEST(flops_per_token_should_match_an_independent_count)
{
    char bench[4096], cmd[4400], *out;
    bench_path(bench, sizeof bench);
    const char *variants[] = {"mha", "mla"};
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "%s flops --shape tiny --variant %s", bench, variants[i]);
        ck_assert_int_eq(al_test_run(cmd, &out), 0);
        double got = field(out, "flops", "flops_per_token"), want = tiny_flops(i);
        ck_assert_msg(got == want, "%s: %.0f FLOPs/token, counted %.0f", variants[i], got, want);
        free(out);
    }
    ck_assert_double_eq(tiny_flops(0), 2754048.0);   /* by hand, README shapes */
}
END_TEST

START_TEST(bad_options_should_be_refused_with_one_line)
{
    char bench[4096], cmd[4400], *out;
    bench_path(bench, sizeof bench);
    snprintf(cmd, sizeof cmd, "%s train --shape huge", bench);
    ck_assert_int_eq(al_test_run(cmd, &out), 2);
    ck_assert_ptr_nonnull(strstr(out, "unknown --shape 'huge'"));
    free(out);
    snprintf(cmd, sizeof cmd, "%s train --shape tiny --threads 0", bench);
    ck_assert_int_eq(al_test_run(cmd, &out), 2);
    ck_assert_ptr_nonnull(strstr(out, "--threads '0'"));
    free(out);
}
END_TEST

/* One training step of the tiny shape at T = 1024 under kernel: the line
 * attnlab-bench prints for it. */
static char *step_at_1024(const char *kernel)
{
    char bench[4096], cmd[4400], *out = NULL;
    bench_path(bench, sizeof bench);
    snprintf(cmd, sizeof cmd, "%s train --shape tiny --variant mha --threads 1 --steps 1 "
             "--warmup 0 --seq-len 1024 --batch 1 --attention-kernel %s", bench, kernel);
    ck_assert_msg(al_test_run(cmd, &out) == 0, "%s", out);
    return out;
}

/* Issue 38's memory test, measured: the peak RSS of a fused training step
 * at T = 1024 is below a dense one's by at least the probabilities dense
 * keeps, L x H x T x (T - 1) floats (tiny: L 2, H 4; 32.0 MiB), which the
 * model's own count of the step's memory (need_mib) also shows. */
START_TEST(a_fused_step_at_1024_peaks_below_a_dense_one_by_its_probabilities)
{
    char *d = step_at_1024("dense"), *f = step_at_1024("fused");
    double probs = 2.0 * 4 * 1024 * 1023 * 4 / (1024.0 * 1024);
    double need_d = field(d, "train", "need_mib"), need_f = field(f, "train", "need_mib");
    double rss_d = field(d, "train", "rss_peak_mib"), rss_f = field(f, "train", "rss_peak_mib");
    ck_assert_msg(fabs(need_d - need_f - probs) <= 0.11,   /* each printed to 0.1 MiB */
                  "counted: dense %g, fused %g MiB; the probabilities are %g", need_d, need_f,
                  probs);
    ck_assert_msg(rss_d - rss_f >= 0.9 * probs, "peak RSS: dense %g, fused %g MiB (%g expected)",
                  rss_d, rss_f, probs);
    free(d), free(f);
}
END_TEST

/* The quick mode's smallest cell through the whole script: attnlab only. */
START_TEST(quick_cell_should_print_consistent_figures)
{
    char bench[4096], cmd[12000], *out, *raw;
    bench_path(bench, sizeof bench);
    char *dir = al_test_tmpdir(), *build = strdup(bench);
    snprintf(cmd, sizeof cmd, "%s/scripts/bench --quick --shapes tiny --variants mha "
             "--threads 1 --envs set --no-peer --steps 2 --out %s --build %s",
             al_test_srcdir(), dir, dirname(build));
    int rc = al_test_run(cmd, &out);
    ck_assert_msg(rc == 0, "scripts/bench failed (%d):\n%s", rc, out);
    char path[8200];
    snprintf(path, sizeof path, "%s/raw.txt", dir);
    size_t n;
    al_err e;
    ck_assert_int_eq(al_read_file(path, &raw, &n, &e), 0);
    double tok = field(raw, "train", "tok_s"), fpt = field(raw, "train", "flops_per_token");
    double gf = field(raw, "train", "model_gflops"), peak = field(raw, "sgemm_best", "gflops");
    double rss = field(raw, "train", "rss_peak_mib"), need = field(raw, "train", "need_mib");
    double l0 = field(raw, "train", "loss_first");
    ck_assert_double_eq(fpt, tiny_flops(0));
    ck_assert_msg(tok > 0 && peak > 0, "tok/s %g, sgemm %g", tok, peak);
    ck_assert_msg(fabs(gf - tok * fpt / 1e9) <= 1e-3 * gf + 1e-3, "GFLOP/s %g vs %g", gf,
                  tok * fpt / 1e9);
    /* every counted byte is touched in a step, so the peak holds them all */
    ck_assert_msg(rss >= 0.95 * need, "peak RSS %g MiB below the counted %g MiB", rss, need);
    ck_assert_msg(fabs(l0 - log(256.0)) < 0.2, "first loss %g, not about ln 256", l0);
    ck_assert_ptr_nonnull(strstr(raw, "corename="));
    ck_assert_msg(field(raw, "copy", "read_gbps") > 0, "no copy bandwidth in:\n%s", raw);
    if (!getenv("AL_SANITIZED"))   /* no allocation or first touch on the step path */
        ck_assert_double_eq(field(raw, "train", "faults_per_step"), 0.0);
    /* the report's table carries the same cell, with its fraction of peak */
    char pct[32], core[64] = "";
    snprintf(pct, sizeof pct, " %.0f ", 100 * gf / peak);
    ck_assert_int_eq(sscanf(strstr(raw, "corename=") + 9, "%63s", core), 1);
    ck_assert_msg(strstr(out, core) != NULL, "no core %s in:\n%s", core, out);
    ck_assert_msg(strstr(out, pct) != NULL, "no%s%% of peak in:\n%s", pct, out);
    free(out), free(raw), free(build), free(dir);
}
END_TEST

Suite *bench_suite(void)
{
    Suite *s = suite_create("bench");
    TCase *tc = tcase_create("bench");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, flops_per_token_should_match_an_independent_count);
    tcase_add_test(tc, bad_options_should_be_refused_with_one_line);
    tcase_add_test(tc, quick_cell_should_print_consistent_figures);
    tcase_add_test(tc, a_fused_step_at_1024_peaks_below_a_dense_one_by_its_probabilities);
    suite_add_tcase(s, tc);
    return s;
}
