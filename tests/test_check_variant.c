/*
 * test_check_variant.c - `attnlab check-variant` (src/cmd/cmd_check_variant.c
 * over src/model/check_variant.c): every built-in variant and the example
 * plugin pass it; each deliberately faulty plugin (tests/plugins/faulty.c)
 * fails the check that names its fault; bad input exits 2 with one line;
 * `attnlab new-variant` writes a skeleton that builds against the
 * installed SDK and passes check-variant as generated.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_check_variant.h"
#include "al_registry.h"
#include "al_test.h"

/* The line of check `name` in out ("ok    NAME ..." or "FAIL  NAME ..."),
 * or NULL. */
static const char *line_of(const char *out, const char *name)
{
    char ok[64], fail[64];
    snprintf(ok, sizeof ok, "\nok    %s ", name);
    snprintf(fail, sizeof fail, "\nFAIL  %s ", name);
    const char *p = strstr(out, ok);
    return p ? p + 1 : (p = strstr(out, fail)) ? p + 1 : NULL;
}

static int passes(const char *out, const char *name)
{
    const char *l = line_of(out, name);
    ck_assert_msg(l, "no line for %s in:\n%s", name, out);
    return strncmp(l, "ok", 2) == 0;
}

/* The run's output, after checking that it passed (the caller frees it). */
static char *expect_pass_out(const char *args)
{
    char *out;
    int rc = al_test_attnlab(args, &out);
    ck_assert_msg(rc == 0 && strstr(out, "checks pass"), "%s: exit %d:\n%s", args, rc, out);
    static const char *const always[] = {"gradient.x", "causal", "causal.future",
                                         "determinism.runs", "determinism.threads",
                                         "writes_grads", "scratch.forward"};
    for (size_t i = 0; i < sizeof always / sizeof always[0]; i++) ck_assert(passes(out, always[i]));
    return out;
}

static void expect_pass(const char *args) { free(expect_pass_out(args)); }

START_TEST(every_built_in_variant_passes)
{
    static const char *const decoding[] = {"decode", "prefill", "decode.bf16", "decode.f16",
                                           "decode.batch", "cache.bytes", "scratch.decode.bf16",
                                           "probs.rows", "probs.forward"};
    for (int i = 0; i < al_variant_count(); i++) {
        char args[128], *out;
        snprintf(args, sizeof args, "check-variant --variant %s", al_variant_at(i)->name);
        out = expect_pass_out(args);
        /* probs.* assume a softmax: not run on weights (pictures.weights) */
        size_t n = sizeof decoding / sizeof decoding[0] -
                   2 * (al_variant_at(i)->pictures && al_variant_at(i)->pictures->weights);
        for (size_t k = 0; k < n; k++)
            ck_assert_msg(passes(out, decoding[k]), "%s: %s", al_variant_at(i)->name, decoding[k]);
        free(out);
    }
    ck_assert_int_ge(al_variant_count(), 8);
}
END_TEST

START_TEST(the_example_plugin_passes)
{
    char args[PATH_MAX + 64];
    snprintf(args, sizeof args, "check-variant --plugin %s --variant swa", AL_SWA_PLUGIN);
    expect_pass(args);
    snprintf(args, sizeof args, "check-variant --plugin %s/libfaulty_none.so --variant faulty",
             AL_BROKEN_PLUGIN_DIR);
    expect_pass(args);   /* the faulty plugin without a fault */
}
END_TEST

/* Plugin libfaulty_KIND.so fails check `name` (exit 1, its line FAIL and
 * named in the summary) while check `sound` passes. */
static void expect_fault(const char *kind, const char *name, const char *sound)
{
    char args[PATH_MAX + 64], *out;
    snprintf(args, sizeof args, "check-variant --plugin %s/libfaulty_%s.so --variant faulty",
             AL_BROKEN_PLUGIN_DIR, kind);
    int rc = al_test_attnlab(args, &out);
    ck_assert_msg(rc == 1, "%s: exit %d:\n%s", kind, rc, out);
    ck_assert_msg(!passes(out, name), "%s: %s passed:\n%s", kind, name, out);
    ck_assert_msg(passes(out, sound), "%s: %s failed too:\n%s", kind, sound, out);
    char summary[64];
    snprintf(summary, sizeof summary, " %s", name);
    ck_assert_ptr_nonnull(strstr(strstr(out, "checks FAIL:"), summary));
    free(out);
}

START_TEST(a_dropped_gradient_path_fails_its_gradient)
{
    expect_fault("grad_path", "gradient.wv", "gradient.wq");
}
END_TEST

START_TEST(a_missing_rope_backward_fails_the_query_gradient)
{
    expect_fault("rope_backward", "gradient.wq", "gradient.wv");
    expect_fault("rope_backward", "gradient.wk", "decode");
}
END_TEST

START_TEST(a_prefill_writing_the_wrong_slice_fails_prefill)
{
    expect_fault("prefill_slice", "prefill", "decode");   /* decode alone is sound */
}
END_TEST

START_TEST(decode_at_the_wrong_position_fails_decode)
{
    expect_fault("decode_pos", "decode", "gradient.x");
}
END_TEST

START_TEST(probs_at_the_wrong_scale_fail_probs_forward)
{
    expect_fault("probs_scale", "probs.forward", "probs.rows");   /* its rows still sum to 1 */
}
END_TEST

START_TEST(a_bf16_scratch_too_small_past_one_tile_fails_its_scratch_check)
{
    expect_fault("bf16_scratch", "scratch.decode.bf16", "scratch.decode.f32");
    expect_fault("bf16_scratch", "decode.bf16", "decode");   /* not run over a broken heap */
}
END_TEST

/* ------------------------------------------------------------ plugins that break the process */

/* The line of `name` in out, whole (static copy). */
static const char *whole_line(const char *out, const char *name)
{
    static char buf[512];
    const char *l = line_of(out, name), *end = l ? strchr(l, '\n') : NULL;
    ck_assert_msg(l, "no line for %s in:\n%s", name, out);
    snprintf(buf, sizeof buf, "%.*s", end ? (int)(end - l) : (int)strlen(l), l);
    return buf;
}

/* libfaulty_KIND.so (with `extra` options) breaks the process running
 * check `name`: exit 1, its line FAIL saying `how` it ended, `sound`
 * still passing (the other checks ran), and the summary printed naming
 * it. Under the sanitizers a fault (SIGSEGV, a read past a heap block
 * before the abort) is their report and exit status 1, or SIGABRT where
 * ASAN_OPTIONS has abort_on_error=1 (scripts/test --sanitize). */
static void expect_crash(const char *kind, const char *extra, const char *name, const char *how,
                         const char *sound)
{
    char args[PATH_MAX + 128], *out;
    snprintf(args, sizeof args, "check-variant --plugin %s/libfaulty_%s.so --variant faulty %s",
             AL_BROKEN_PLUGIN_DIR, kind, extra);
    int rc = al_test_attnlab(args, &out);
    ck_assert_msg(rc == 1, "%s: exit %d:\n%s", kind, rc, out);
    const char *l = whole_line(out, name);
    int sanitized = getenv("AL_SANITIZED") && !strcmp(getenv("AL_SANITIZED"), "1");
    ck_assert_msg(!strncmp(l, "FAIL", 4) && (strstr(l, how) ||
                  (sanitized && strstr(how, "killed by") &&
                   (strstr(l, "exited with status") || strstr(l, "killed by SIGABRT")))),
                  "%s: want FAIL %s ... %s, got: %s\n%s", kind, name, how, l, out);
    ck_assert_msg(passes(out, sound), "%s: %s failed too:\n%s", kind, sound, out);
    char summary[64];
    snprintf(summary, sizeof summary, " %s", name);
    const char *sum = strstr(out, "checks FAIL:");
    ck_assert_msg(sum && strstr(sum, summary), "%s: no summary naming %s:\n%s", kind, name, out);
    free(out);
}

START_TEST(a_plugin_lying_about_its_row_size_fails_decode_and_the_suite_goes_on)
{
    expect_crash("row_size", "", "decode", "killed by SIGABRT", "gradient.wq");
}
END_TEST

START_TEST(a_plugin_writing_past_its_scratch_hits_a_guard_page)
{
    expect_crash("scratch_overrun", "", "gradient", "killed by SIGSEGV", "causal");
}
END_TEST

START_TEST(a_plugin_that_aborts_fails_the_checks_it_aborts_in)
{
    expect_crash("abort", "", "decode", "killed by SIGABRT", "gradient.wq");
    expect_crash("abort", "", "scratch.decode.f32", "killed by SIGABRT", "probs.forward");
}
END_TEST

START_TEST(a_plugin_that_never_returns_times_out)
{
    expect_crash("hang", "--time-limit 1", "probs", "timed out after 1 s (killed)", "causal");
}
END_TEST

/* ------------------------------------------------------------ large legal settings */

static double layer_loss(void *t) { return al_check_layer_loss(t); }

/* The suite's gradient check (seeds and probes as check_variant.c's) on tpa
 * at rank 256 and the shape that failed: its factors enter as 1/R of R
 * products, so a step of 1e-2 moved the loss by less than f32 rounding
 * (gradient.wb_q 0.023 > 0.01 before). */
START_TEST(tpa_at_rank_256_passes_the_gradient_check)
{
    const al_variant *v = al_variant_find("tpa");
    ck_assert_ptr_nonnull(v);
    /* Sanitized, the masked case alone: both run the same code and the same
     * buffer sizes, and each took 12 s of CI's ASan run. */
    const char *san = getenv("AL_SANITIZED");
    for (int causal = san && !strcmp(san, "1"); causal <= 1; causal++) {
        al_attn_shape s = {24, 2, 8, 8, causal, 10000.0f, 1e-5f, {256, 256, 256}, .rope = {.base = 0}};
        al_check_layer t;
        al_check_layer_init(&t, v, &s, 2, 6, 42);
        al_check_layer_loss(&t);
        al_check_layer_backward(&t, t.R);
        al_rng g;
        al_rng_seed(&g, 1);
        for (int i = 0; i < t.np; i++) {
            size_t n = (size_t)t.spec[i].rows * (t.spec[i].cols ? t.spec[i].cols : 1);
            double err = al_check_fd_err(layer_loss, &t, t.p[i], t.dp[i], n, 32, &g);
            ck_assert_msg(err <= 1e-2, "%s (%s): %g", t.spec[i].name,
                          causal ? "masked" : "unmasked", err);
        }
        size_t nx = (size_t)2 * 6 * 24;
        ck_assert_double_le(al_check_fd_err(layer_loss, &t, t.x, t.dx, nx, 32, &g), 1e-2);
        al_check_layer_free(&t);
    }
}
END_TEST

/* Built-ins at large legal settings (windows and sinks at the settings'
 * maximum, wide keys, the smallest chunk) pass their whole suite. */
START_TEST(built_ins_pass_their_suite_at_large_settings)
{
    /* A question of f32 tolerances at large sizes, which the sanitizers do not
     * change; the same code runs sanitized at the smaller sizes above. */
    if (getenv("AL_SANITIZED") && !strcmp(getenv("AL_SANITIZED"), "1")) return;
    static const char *const sets[] = {
        "local --set model.attention.window=16384 --set model.attention.sinks=16384",
        "local --set model.attention.window=3 --set model.attention.sinks=16384",
        /* chunk 1 adds to the gradients a dozen times: writes_grads was 1.3e-6 > 1e-6 */
        "linear --set model.attention.d_key=512 --set model.attention.chunk=1",
        /* wide latents: scores sharp enough that bf16 rounding of the cache
         * flipped the softmax (decode.bf16 0.057 > 0.02 at 128, 0.021 at 64) */
        "mla --set model.attention.d_latent=128 --set model.attention.d_rope=32 "
        "--set model.attention.d_q_latent=128",
        "gla --set model.attention.d_latent=64 --set model.attention.d_rope=16 "
        "--set model.attention.n_latent_head=2 --set model.attention.d_q_latent=64",
    };
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        char args[512];
        snprintf(args, sizeof args, "check-variant --variant %s", sets[i]);
        expect_pass(args);
    }
}
END_TEST

START_TEST(no_accepted_shape_gives_the_variants_own_refusal)
{
    char *out;
    int rc = al_test_attnlab("check-variant --variant gqa --set model.attention.n_kv_head=5", &out);
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(out, "gqa refuses every shape tried") && strstr(out, "'n_kv_head' (5)"),
                  "%s", out);
    free(out);
}
END_TEST

START_TEST(fixed_settings_are_used_and_bad_ones_refused)
{
    char *out;
    ck_assert_int_eq(al_test_attnlab("check-variant --variant gqa --set model.attention.n_kv_head=3",
                                     &out), 0);
    ck_assert_ptr_nonnull(strstr(out, "gqa at D12 H3x4\n"));   /* the one shape 3 divides */
    free(out);
    static const char *const bad[][2] = {
        {"--variant gqa --set model.attention.n_kv_heads=2", "'n_kv_heads' is not a setting"},
        {"--variant gqa --set model.attention.n_kv_head=2.5", "wants a whole number, got '2.5'"},
        {"--variant gqa --set n_kv_head=2", "wants model.attention.KEY=V"},
        {"--variant nope", "no variant 'nope'"},
        {"--set model.attention.n_kv_head=2", "missing --variant"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[256];
        snprintf(args, sizeof args, "check-variant %s", bad[i][0]);
        int rc = al_test_attnlab(args, &out);
        ck_assert_msg(rc == 2 && strstr(out, bad[i][1]), "%s: exit %d: %s", args, rc, out);
        ck_assert_ptr_eq(strchr(out, '\n'), out + strlen(out) - 1);   /* one line */
        free(out);
    }
}
END_TEST

/* ------------------------------------------------------------ new-variant */

/* What a new author does: install the SDK (staged under a temporary
 * directory, as a prefix of their own would be), generate a skeleton, build
 * it alone through pkg-config, run check-variant on it unchanged. */
START_TEST(a_generated_skeleton_builds_against_the_installed_sdk_and_passes)
{
    if (al_test_run("command -v meson && command -v ninja && command -v pkg-config", NULL)) {
        printf("skipped: meson, ninja or pkg-config not on PATH\n");
        return;
    }
    char *dir = al_test_tmpdir(), cmd[8 * PATH_MAX], *out;
    snprintf(cmd, sizeof cmd,
             "set -e; d='%s'; meson install --no-rebuild -C '%s' --destdir \"$d/root\" "
             ">/dev/null; pc=$(dirname \"$(find \"$d/root\" -name attnlab-variant.pc)\"); "
             "'%s' new-variant my-attn --out \"$d/v\"; cd \"$d/v\"; "
             "PKG_CONFIG_SYSROOT_DIR=\"$d/root\" PKG_CONFIG_PATH=\"$pc\" PKG_CONFIG_LIBDIR= "
             "meson setup b >/dev/null; ninja -C b >/dev/null; "
             "grep -o -- '-I[^ ]*attnlab' b/build.ninja | sort -u; "
             "'%s' check-variant --plugin b/libattnlab_my-attn.so --variant my-attn",
             dir, AL_BUILD_DIR, al_test_binary(), al_test_binary());
    ck_assert_msg(al_test_run(cmd, &out) == 0, "%s", out);
    snprintf(cmd, sizeof cmd, "-I%s/root/", dir);
    ck_assert_msg(strstr(out, cmd), "not built against the installed headers:\n%s", out);
    ck_assert_msg(strstr(out, "wrote ") && strstr(out, "/v/my-attn.c\n"), "%s", out);
    ck_assert_msg(strstr(out, "check-variant: my-attn: all ") && strstr(out, " checks pass"), "%s",
                  out);
    static const char *const lines[] = {"decode.batch", "probs.forward", "decode.bf16",
                                        "writes_grads", "gradient.wk"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) ck_assert(passes(out, lines[i]));
    free(out), free(dir);
}
END_TEST

/* A name that cannot be a variant's is refused, an existing file is never
 * overwritten, and every member of the generated table and of its decode
 * sub-table is written out (a skeleton shows them all). */
START_TEST(new_variant_refuses_bad_names_and_existing_files)
{
    char *dir = al_test_tmpdir(), args[PATH_MAX + 64], *out;
    snprintf(args, sizeof args, "new-variant 'a b' --out %s/x", dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 2);
    ck_assert_ptr_nonnull(strstr(out, "NAME 'a b' must be"));
    free(out);
    snprintf(args, sizeof args, "new-variant mine --out %s/x", dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    free(out);
    ck_assert_int_eq(al_test_attnlab(args, &out), 2);
    ck_assert_ptr_nonnull(strstr(out, "mine.c exists; not overwriting it"));
    free(out);
    snprintf(args, sizeof args, "grep -c '^    \\.[a-z_]* = ' %s/x/mine.c", dir);
    ck_assert_int_eq(al_test_run(args, &out), 0);
    ck_assert_int_eq(atoi(out), 20);   /* the table's 11 members, the decode sub-table's 9 */
    free(out), free(dir);
}
END_TEST

Suite *check_variant_suite(void)
{
    Suite *s = suite_create("check_variant");
    TCase *tc = tcase_create("check_variant");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, every_built_in_variant_passes);
    tcase_add_test(tc, the_example_plugin_passes);
    tcase_add_test(tc, a_dropped_gradient_path_fails_its_gradient);
    tcase_add_test(tc, a_missing_rope_backward_fails_the_query_gradient);
    tcase_add_test(tc, a_prefill_writing_the_wrong_slice_fails_prefill);
    tcase_add_test(tc, decode_at_the_wrong_position_fails_decode);
    tcase_add_test(tc, probs_at_the_wrong_scale_fail_probs_forward);
    tcase_add_test(tc, a_bf16_scratch_too_small_past_one_tile_fails_its_scratch_check);
    tcase_add_test(tc, a_plugin_lying_about_its_row_size_fails_decode_and_the_suite_goes_on);
    tcase_add_test(tc, a_plugin_writing_past_its_scratch_hits_a_guard_page);
    tcase_add_test(tc, a_plugin_that_aborts_fails_the_checks_it_aborts_in);
    tcase_add_test(tc, a_plugin_that_never_returns_times_out);
    tcase_add_test(tc, tpa_at_rank_256_passes_the_gradient_check);
    tcase_add_test(tc, built_ins_pass_their_suite_at_large_settings);
    tcase_add_test(tc, no_accepted_shape_gives_the_variants_own_refusal);
    tcase_add_test(tc, fixed_settings_are_used_and_bad_ones_refused);
    tcase_add_test(tc, a_generated_skeleton_builds_against_the_installed_sdk_and_passes);
    tcase_add_test(tc, new_variant_refuses_bad_names_and_existing_files);
    suite_add_tcase(s, tc);
    return s;
}
