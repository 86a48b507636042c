/*
 * test_blascore.c - the kernel set that follows the CPU (src/base/blascore.c):
 * the choice by table (fallbacks under AVX2 and AVX-512 CPUs, a user's
 * OPENBLAS_CORETYPE, ATTNLAB_BLAS_CORE, a CPU OpenBLAS knows, CPUs without
 * AVX2), and real runs: with OPENBLAS_CORETYPE unset a trial records the
 * best set this CPU can run, and ATTNLAB_BLAS_CORE runs again under the set
 * it names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_blascore.h"
#include "al_test.h"
#include "al_util.h"

static const char *const all_sets[] = {"Cooperlake", "SkylakeX", "Haswell", "Zen",
                                       "SandyBridge", "Nehalem", "Core2", "Prescott", NULL};
static const char *const before_cooperlake[] = {"SkylakeX", "Haswell", "Zen", "SandyBridge",
                                                "Prescott", NULL};

#define X512 (AL_ISA_SSE3 | AL_ISA_AVX | AL_ISA_AVX2 | AL_ISA_AVX512)
#define X2 (AL_ISA_SSE3 | AL_ISA_AVX | AL_ISA_AVX2)

START_TEST(the_choice_follows_the_isa_and_the_user)
{
    static const struct {
        const char *what;
        unsigned isa;
        const char *chosen, *user, *override;
        const char *const *offered;
        const char *core;   /* NULL: refused */
        int reexec;
    } t[] = {
        {"Xeon 6 (model 207): Prescott fallback, bf16", X512 | AL_ISA_AVX512_BF16 | AL_ISA_AMX,
         "Prescott", NULL, NULL, all_sets, "Cooperlake", 1},
        {"Skylake-SP: Prescott fallback", X512, "Prescott", NULL, NULL, all_sets, "SkylakeX", 1},
        {"a bf16 CPU, a build without Cooperlake", X512 | AL_ISA_AVX512_BF16, "Prescott", NULL,
         NULL, before_cooperlake, "SkylakeX", 1},
        {"an AVX2 CPU: Prescott fallback", X2, "Prescott", NULL, NULL, all_sets, "Haswell", 1},
        {"an AVX-512 CPU fallen to Haswell", X512, "Haswell", NULL, NULL, all_sets, "SkylakeX", 1},
        {"a CPU OpenBLAS knows (SkylakeX)", X512, "SkylakeX", NULL, NULL, all_sets, "SkylakeX", 0},
        {"a CPU OpenBLAS knows (Zen, AVX2)", X2, "Zen", NULL, NULL, all_sets, "Zen", 0},
        {"OpenBLAS's spelling differs in case", AL_ISA_SSE3 | AL_ISA_AVX, "Sandybridge", NULL,
         NULL, all_sets, "Sandybridge", 0},
        {"no AVX2: AVX only", AL_ISA_SSE3 | AL_ISA_AVX, "Prescott", NULL, NULL, all_sets,
         "SandyBridge", 1},
        {"no AVX at all", AL_ISA_SSE3, "Prescott", NULL, NULL, all_sets, "Prescott", 0},
        {"the user's OPENBLAS_CORETYPE stands", X512, "Prescott", "Prescott", NULL, all_sets,
         "Prescott", 0},
        {"ATTNLAB_BLAS_CORE over a fallback", X512, "Prescott", NULL, "haswell", all_sets,
         "Haswell", 1},
        {"ATTNLAB_BLAS_CORE over OPENBLAS_CORETYPE", X512, "Haswell", "Haswell", "SkylakeX",
         all_sets, "SkylakeX", 1},
        {"ATTNLAB_BLAS_CORE as loaded", X512, "SkylakeX", NULL, "SkylakeX", all_sets,
         "SkylakeX", 0},
        {"ATTNLAB_BLAS_CORE the CPU cannot run", X2, "Haswell", NULL, "SkylakeX", all_sets,
         NULL, 0},
        {"ATTNLAB_BLAS_CORE this build lacks", X512, "Haswell", NULL, "SapphireRapids", all_sets,
         NULL, 0},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        al_cpu cpu = {.isa = t[i].isa, .family = 6, .model = 207};
        snprintf(cpu.vendor, sizeof cpu.vendor, "GenuineIntel");
        al_blas_env env = {t[i].chosen, t[i].offered, t[i].user, t[i].override};
        al_blas_pick p;
        al_err e;
        int rc = al_blas_choose(&cpu, &env, &p, &e);
        if (!t[i].core) {
            ck_assert_msg(rc != 0, "%s: accepted as %s", t[i].what, p.core);
            ck_assert_msg(strstr(e.msg, "ATTNLAB_BLAS_CORE="), "%s: %s", t[i].what, e.msg);
            continue;
        }
        ck_assert_msg(rc == 0, "%s: %s", t[i].what, e.msg);
        ck_assert_msg(!strcmp(p.core, t[i].core) && p.reexec == t[i].reexec,
                      "%s: %s (reexec %d), want %s (%d)", t[i].what, p.core, p.reexec,
                      t[i].core, t[i].reexec);
    }
    /* the line a fallback prints names both sets and the CPU */
    al_cpu cpu = {.isa = X512, .family = 6, .model = 207};
    snprintf(cpu.vendor, sizeof cpu.vendor, "GenuineIntel");
    al_blas_env env = {"Prescott", all_sets, NULL, NULL};
    al_blas_pick p;
    al_err e;
    ck_assert_int_eq(al_blas_choose(&cpu, &env, &p, &e), 0);
    ck_assert_str_eq(p.why, "attnlab: OpenBLAS chose Prescott on this CPU (GenuineIntel family "
                            "6 model 207, AVX-512); using SkylakeX kernels");
}
END_TEST

/* The blas_core a trial records, run with the given environment prefix. */
static char *trial_core(const char *dir, const char *envs, char **log)
{
    char cmd[8192], *out;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && rm -rf r && env %s '%s' sweep exp.yaml --out r >run.log 2>&1; "
             "cat run.log >&2; python3 -c 'import json,glob; "
             "print(json.load(open(glob.glob(\"r/*/result.json\")[0]))[\"blas_core\"])'",
             dir, envs, al_test_binary());
    ck_assert_int_eq(al_test_run(cmd, &out), 0);
    snprintf(cmd, sizeof cmd, "cat '%s/run.log'", dir);
    ck_assert_int_eq(al_test_run(cmd, log), 0);
    out[strcspn(out, "\n")] = 0;
    return out;
}

START_TEST(a_run_records_the_best_set_this_cpu_can_run)
{
    al_cpu cpu;
    al_cpu_read(&cpu);
    if (!(cpu.isa & AL_ISA_AVX2)) {
        fprintf(stderr, "blascore: skipped a_run_records_the_best_set_this_cpu_can_run: this "
                        "CPU has no AVX2, so no set beats OpenBLAS's own\n");
        return;
    }
    char *dir = al_test_tmpdir(), text[4001], yaml[1024], *log;
    for (int i = 0; i < 4000; i++) text[i] = "a cat sat on a mat. "[i % 20];
    text[4000] = 0;
    free(al_test_write(dir, "text.txt", text));
    snprintf(yaml, sizeof yaml,
             "data: {source: text, path: %s/text.txt}\n"
             "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16}\n"
             "train: {steps: 2, batch_size: 2, eval_every: 2, eval_batches: 1, threads: 1}\n"
             "sweep: {name: core}\n", dir);
    free(al_test_write(dir, "exp.yaml", yaml));
    /* OpenBLAS's own choice, or attnlab's where it fell back: either way
     * the best set for this ISA, by the same table the choice uses */
    char *core = trial_core(dir, "-u OPENBLAS_CORETYPE -u ATTNLAB_BLAS_CORE -u ATTNLAB_BLAS_REEXEC",
                            &log);
    int known;
    unsigned needs = al_blas_core_needs(core, &known);
    unsigned best = cpu.isa & AL_ISA_AVX512 ? AL_ISA_AVX512 : AL_ISA_AVX2;
    ck_assert_msg(known && (needs & best) == best, "recorded %s on a CPU with %s:\n%s", core,
                  cpu.isa & AL_ISA_AVX512 ? "AVX-512" : "AVX2", log);
    free(core), free(log);
    /* an override runs again under the set it names, and says so */
    core = trial_core(dir, "-u OPENBLAS_CORETYPE -u ATTNLAB_BLAS_REEXEC -u ATTNLAB_BLAS_QUIET "
                      "ATTNLAB_BLAS_CORE=Haswell", &log);
    ck_assert_msg(!strcmp(core, "Haswell"), "recorded %s:\n%s", core, log);
    ck_assert_msg(strstr(log, "attnlab: using Haswell kernels (ATTNLAB_BLAS_CORE); OpenBLAS "
                              "chose "), "%s", log);
    free(core), free(log), free(dir);
}
END_TEST

Suite *blascore_suite(void)
{
    Suite *s = suite_create("blascore");
    TCase *tc = tcase_create("blascore");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, the_choice_follows_the_isa_and_the_user);
    tcase_add_test(tc, a_run_records_the_best_set_this_cpu_can_run);
    suite_add_tcase(s, tc);
    return s;
}
