/*
 * test_sweep_exec.c - the executors beyond one machine (src/sweep/sweep_exec.c,
 * sweep_slurm.c, sweep_mpi.c). A real Slurm is brought up by
 * tests/slurm/sweep-through-slurm.sh, its own meson test; here: executor
 * names and the errors that say what to install, the batch script run by
 * bash as Slurm runs one array task, and the mpi executor under mpirun
 * against a local sweep (skipped with a message without MPI).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "al_mpi.h"
#include "al_sweep_exec.h"
#include "al_test.h"

/* ------------------------------------------------------------ helpers */

static int run(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run(char **out, const char *fmt, ...)
{
    char cmd[16384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return al_test_run(cmd, out);
}

/* Four tiny trials: two variants by two seeds. */
static char *write_exp(const char *dir)
{
    char text[6001], yaml[2048];
    for (int i = 0; i < 6000; i++) text[i] = "the cat sat on the mat; a dog ran far. "[i % 39];
    text[6000] = 0;
    free(al_test_write(dir, "text.txt", text));
    snprintf(yaml, sizeof yaml,
             "data: {source: text, path: %s/text.txt}\n"
             "model: {n_layer: 1, d_model: 16, n_head: 2, d_head: 8, seq_len: 16}\n"
             "train: {steps: 20, batch_size: 4, eval_every: 10, eval_batches: 2, threads: 1}\n"
             "sweep:\n  name: exec\n  seeds: 2\n"
             "  grid: {model.attention: [{variant: mha}, {variant: mqa}]}\n", dir);
    return al_test_write(dir, "exp.yaml", yaml);
}

/* The columns trial, final_train_loss, val_loss, best_val_loss and status
 * of summary.csv (0, 12, 13, 14, 18), a line per trial: equal for equal runs. */
static char *summary_numbers(const char *dir)
{
    static const char *const keep[] = {"trial", "final_train_loss", "val_loss", "best_val_loss",
                                       "test_loss", "status"};
    enum { N_KEEP = sizeof keep / sizeof *keep };
    char path[4200], *text;
    size_t n;
    al_err e;
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    ck_assert_msg(al_read_file(path, &text, &n, &e) == 0, "%s", e.msg);
    char *out = calloc(n + 1, 1), *o = out, *save;
    int at[N_KEEP] = {-1, -1, -1, -1, -1, -1}, header = 1;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *field = line;
        for (int col = 0; field; col++) {   /* the columns by their header names */
            size_t len = strcspn(field, ",");
            for (int k = 0; k < N_KEEP; k++) {
                if (header && strlen(keep[k]) == len && !strncmp(field, keep[k], len)) at[k] = col;
                if (!header && at[k] == col)
                    o += sprintf(o, "%s%.*s", k ? "," : "", (int)len, field);
            }
            field = field[len] ? field + len + 1 : NULL;
        }
        if (header) memcpy(o, line, strlen(line)), o += strlen(line);
        header = 0;
        *o++ = '\n';
    }
    free(text);
    return out;
}

/* ------------------------------------------------------------ names and errors */

START_TEST(executor_names_round_trip_and_others_are_refused)
{
    for (int x = 0; x < AL_EXEC_N; x++)
        ck_assert_int_eq(al_sweep_executor_parse(al_sweep_executor_name(x)), x);
    ck_assert_int_eq(al_sweep_executor_parse("pbs"), -1);
    char *dir = al_test_tmpdir(), *exp = write_exp(dir), *out;
    ck_assert_int_eq(run(&out, "%s sweep %s --out %s/r --executor pbs", al_test_binary(), exp,
                         dir), 2);
    ck_assert_msg(strstr(out, "sweep: --executor wants one of local, slurm, mpi, got 'pbs'"), "%s", out);
    free(out), free(exp), free(dir);
}
END_TEST

START_TEST(unavailable_executor_says_what_to_install)
{
    char *dir = al_test_tmpdir(), *exp = write_exp(dir), *out;
    ck_assert_int_eq(run(&out, "env PATH=%s %s sweep %s --out %s/r --executor slurm", dir,
                         al_test_binary(), exp, dir), 2);
    ck_assert_msg(strstr(out, "'sbatch' is not on PATH: install slurm-client"), "%s", out);
    free(out);
    ck_assert_int_eq(run(&out, "%s sweep %s --out %s/r --executor mpi", al_test_binary(), exp,
                         dir), 2);
    ck_assert_msg(strstr(out, al_mpi_available() ? "mpirun -np N attnlab sweep FILE --executor mpi"
                                                  : "install libopenmpi-dev"), "%s", out);
    free(out);
    struct stat st;
    char r[4200];
    snprintf(r, sizeof r, "%s/r", dir);
    ck_assert_int_ne(stat(r, &st), 0);   /* nothing written */
    free(exp), free(dir);
}
END_TEST

/* A directory submitted to Slurm stays with Slurm; a record that cannot be
 * read is bad input, before anything runs. */
START_TEST(corrupt_submission_record_is_refused)
{
    char *dir = al_test_tmpdir(), *exp = write_exp(dir), *out, r[4200];
    snprintf(r, sizeof r, "%s/r", dir);
    ck_assert_int_eq(run(&out, "%s sweep %s --out %s --jobs 2", al_test_binary(), exp, r), 0);
    free(out);
    free(al_test_write(r, "slurm.json", "{\"submissions\": [{\"job_id\": \"x\"}]}"));
    ck_assert_int_eq(run(&out, "%s sweep %s --out %s --executor local", al_test_binary(), exp,
                         r), 2);
    ck_assert_msg(strstr(out, "/r/slurm.json: not a valid Slurm submission record"), "%s", out);
    free(out), free(exp), free(dir);
}
END_TEST

/* ------------------------------------------------------------ the batch script */

/* The script --dry-run prints, as a file (the lines before #!/bin/bash
 * are the sbatch command). */
static char *dry_run_script(const char *dir, const char *exp, const al_slurm_opts *so,
                            int threads)
{
    al_sweep s;
    al_err e;
    char r[4200];
    snprintf(r, sizeof r, "%s/r", dir);
    ck_assert_msg(al_sweep_load(exp, NULL, 0, NULL, 0, &s, &e) == 0, "%s", e.msg);
    al_sweep_assign_ids(&s, r);
    al_sweep_run_opts o = {al_test_binary(), r, 1, threads, NULL, 0, NULL, 0, NULL};
    char *path = malloc(4300), *text;
    size_t n;
    snprintf(path, 4300, "%s/dry.txt", dir);
    FILE *f = fopen(path, "w");
    ck_assert_msg(al_sweep_slurm_dry_run(&s, &o, so, f, &e) == 0, "%s", e.msg);
    fclose(f);
    al_sweep_free(&s);
    ck_assert_int_eq(al_read_file(path, &text, &n, &e), 0);
    char *script = strstr(text, "#!/bin/bash");
    ck_assert_ptr_nonnull(script);
    free(al_test_write(dir, "job.sh", script));
    snprintf(path, 4300, "%s/job.sh", dir);
    free(text);
    return path;
}

START_TEST(batch_script_runs_one_trial_per_array_task)
{
    char *dir = al_test_tmpdir(), *exp = write_exp(dir), *out, *text;
    const char *args[] = {"--partition=debug"};
    al_slurm_opts so = {args, 1, 0, 2};
    char *script = dry_run_script(dir, exp, &so, 2);
    size_t n;
    al_err e;
    ck_assert_int_eq(al_read_file(script, &text, &n, &e), 0);
    ck_assert_msg(strstr(text, "\n#SBATCH --array=0-3%2\n"), "%s", text);
    ck_assert_msg(strstr(text, "\n#SBATCH --cpus-per-task=2\n"), "%s", text);
    ck_assert_msg(strstr(text, "/r/slurm/%A_%a.out\n"), "%s", text);
    free(text);
    /* task 2 is the third trial in expansion order: mha with seed 2 */
    ck_assert_int_eq(run(&out, "SLURM_ARRAY_TASK_ID=2 bash %s", script), 0);
    free(out);
    char path[4300];
    snprintf(path, sizeof path, "%s/r/mha_seed2/result.json", dir);
    ck_assert_int_eq(al_read_file(path, &text, &n, &e), 0);
    ck_assert_msg(strstr(text, "\"status\": \"ok\""), "%s", text);
    free(text);
    snprintf(path, sizeof path, "%s/r/mha_seed1/result.json", dir);
    struct stat st;
    ck_assert_int_ne(stat(path, &st), 0);
    /* outside an array job the script refuses */
    ck_assert_int_ne(run(&out, "env -u SLURM_ARRAY_TASK_ID bash %s", script), 0);
    ck_assert_msg(strstr(out, "run this script with sbatch --array"), "%s", out);
    free(out);
    /* a task that starts after the experiment file was edited (queued for
     * hours, say) refuses to run the edited experiment under this sweep */
    ck_assert_int_eq(run(NULL, "echo '# edited' >>%s", exp), 0);
    ck_assert_int_eq(run(&out, "SLURM_ARRAY_TASK_ID=0 bash %s; cat %s/r/mha_seed1/log.txt",
                         script, dir), 0);
    ck_assert_msg(strstr(out, "exp.yaml: changed since the sweep started"), "%s", out);
    snprintf(path, sizeof path, "%s/r/mha_seed1/result.json", dir);
    ck_assert_int_ne(stat(path, &st), 0);
    free(out), free(script), free(exp), free(dir);
}
END_TEST

/* An experiment file edited while a local sweep runs: the trials that
 * start after the edit stop with one line naming the file, which the
 * summary keeps as their reason; the trial that was running finishes as
 * the experiment it started as. */
START_TEST(a_file_edited_mid_sweep_stops_the_later_trials)
{
    char *dir = al_test_tmpdir(), *exp = write_exp(dir), *out, *text;
    /* the first worker stops itself after its first step (SIGSTOP); the
     * file is edited; then it goes on */
    int rc = run(&out,
        "cd %s || exit 1\n(AL_FAULT='step:mha_seed1/step!stop' '%s' sweep exp.yaml --out r --jobs 1 "
        "  >sweep.log 2>&1; echo $? >rc) </dev/null >/dev/null 2>&1 &\n"
        "for i in $(seq 600); do\n"
        "  p=$(pgrep -f ' trial exp[.]yaml --index' | head -1)\n"
        "  [ -n \"$p\" ] && [ \"$(cut -d' ' -f3 /proc/$p/stat 2>/dev/null)\" = T ] && break\n"
        "  sleep 0.05\n"
        "done\n"
        "echo '# edited' >>exp.yaml\n"
        "pkill -CONT -f ' trial exp[.]yaml --index'\n"
        "for i in $(seq 1200); do [ -s rc ] && break; sleep 0.05; done\n"
        "cat rc", dir, al_test_binary());
    ck_assert_msg(rc == 0, "the sweep did not end: %s", out);
    free(out);
    char path[4300];
    size_t n;
    al_err e;
    snprintf(path, sizeof path, "%s/r/summary.csv", dir);
    ck_assert_msg(al_read_file(path, &text, &n, &e) == 0, "%s", e.msg);
    int changed = 0;
    for (char *p = text; (p = strstr(p, "exp.yaml: changed since the sweep started")); p++)
        changed++;
    ck_assert_msg(changed == 3, "%d trials refused, not 3:\n%s", changed, text);
    ck_assert_msg(strstr(text, ",ok,") || strstr(text, ",ok\n"), "the first trial: %s", text);
    free(text), free(exp), free(dir);
}
END_TEST

/* ------------------------------------------------------------ mpi */

START_TEST(mpi_sweep_equals_the_local_sweep)
{
    if (!al_mpi_available() || al_test_run("command -v mpirun", NULL) != 0) {
        fprintf(stderr, "SKIP mpi_sweep_equals_the_local_sweep: needs attnlab built with MPI "
                        "and mpirun (install openmpi-bin libopenmpi-dev)\n");
        return;
    }
    char *dir = al_test_tmpdir(), *exp = write_exp(dir), *out;
    ck_assert_int_eq(run(&out, "%s sweep %s --out %s/local --jobs 2", al_test_binary(), exp,
                         dir), 0);
    free(out);
    ck_assert_int_eq(run(&out, "%s timeout 300 mpirun -np 2 %s sweep %s --out %s/mpi "
                               "--executor mpi", al_test_mpi_env(0), al_test_binary(), exp, dir), 0);
    ck_assert_msg(strstr(out, "4 ok, 0 diverged, 0 failed"), "%s", out);
    /* both ranks trained (rank 0 also runs a worker of its own) */
    ck_assert_msg(strstr(out, " on rank 0") && strstr(out, " on rank 1"), "%s", out);
    free(out);
    char local[4200], mpi[4200];
    snprintf(local, sizeof local, "%s/local", dir);
    snprintf(mpi, sizeof mpi, "%s/mpi", dir);
    char *a = summary_numbers(local), *b = summary_numbers(mpi);
    ck_assert_str_eq(a, b);
    ck_assert_msg(strstr(a, "\nmqa_seed2,") && strstr(a, ",ok\n"), "%s", a);
    free(a), free(b), free(exp), free(dir);
}
END_TEST

Suite *sweep_exec_suite(void)
{
    Suite *s = suite_create("sweep_exec");
    TCase *tc = tcase_create("sweep_exec");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, executor_names_round_trip_and_others_are_refused);
    tcase_add_test(tc, unavailable_executor_says_what_to_install);
    tcase_add_test(tc, corrupt_submission_record_is_refused);
    tcase_add_test(tc, batch_script_runs_one_trial_per_array_task);
    tcase_add_test(tc, a_file_edited_mid_sweep_stops_the_later_trials);
    tcase_add_test(tc, mpi_sweep_equals_the_local_sweep);
    suite_add_tcase(s, tc);
    return s;
}
