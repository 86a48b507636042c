/*
 * test_sweep_stage.c - chained stages (src/sweep/sweep_stage.c and the runner's
 * ordering): expansion per upstream trial with inherited seeds and
 * percentages of the upstream's steps, identity (a changed base gives new
 * ids downstream, a changed later stage leaves the base alone), every stage
 * error with its position, whole staged sweeps through the binary (each
 * trial starts only after its upstream ended ok, from its checkpoint; a
 * SIGKILLed sweep resumes to the uninterrupted summary; a failed upstream
 * blocks only its own trials) and the report's converted/uptrained section.
 */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "al_csv.h"
#include "al_sweep_run.h"
#include "al_test.h"

/* ------------------------------------------------------------ helpers */

static char *write_text(const char *dir)
{
    static const char *const words[] = {"in ", "the ", "beginning ", "was ", "word ", "and ",
                                        "light ", "darkness ", "upon ", "face ", ".\n"};
    return al_test_write_words(dir, words, 11, 16000, 777);
}

static const char base_sweep[] =
    "{seeds: [1, 2], grid: {model.attention: [{variant: mha}, {variant: mqa}]}}";

/* A staged experiment in dir: a base stage (by default mha and mqa from
 * scratch, seeds 1 and 2), then `later` (the stages after the first). */
static char *write_staged_sweep(const char *dir, const char *file, const char *base_train,
                                const char *sweep, const char *later)
{
    char *data = write_text(dir), text[8192];
    snprintf(text, sizeof text,
             "name: staged\n"
             "data: {source: text, path: %s}\n"
             "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16}\n"
             "train: {steps: 40, batch_size: 4, eval_every: 10, eval_batches: 2, threads: 1,\n"
             "        warmup_steps: 2, checkpoint_every: 4}\n"
             "stages:\n"
             "  - name: base\n"
             "    train: {%s}\n"
             "    sweep: %s\n"
             "%s", data, base_train, sweep, later);
    free(data);
    return al_test_write(dir, file, text);
}

static char *write_staged(const char *dir, const char *file, const char *base_train,
                          const char *later)
{
    return write_staged_sweep(dir, file, base_train, base_sweep, later);
}

static const char uptrain[] =
    "  - name: up\n"
    "    from: base\n"
    "    where: {model.attention.variant: mha}\n"
    "    convert: {to: mqa, method: [mean, random]}\n"
    "    steps: [25%, 12]\n"
    "    train: {warmup_steps: 1, eval_every: 5}\n";

static const al_sweep_trial *find(const al_sweep *s, const char *label)
{
    for (int i = 0; i < s->n_trials; i++)
        if (strcmp(s->trials[i].label, label) == 0) return &s->trials[i];
    ck_abort_msg("no trial '%s'", label);
    return NULL;
}

static void load_ok(const char *path, al_sweep *s)
{
    al_err e;
    ck_assert_msg(al_sweep_load(path, NULL, 0, NULL, 0, s, &e) == 0, "%s", e.msg);
}

/* ------------------------------------------------------------ expansion */

START_TEST(a_stage_expands_once_per_upstream_trial_with_its_seed)
{
    char *dir = al_test_tmpdir(), *path = write_staged(dir, "e.yaml", "lr: 1.0e-3", uptrain);
    al_sweep s;
    load_ok(path, &s);
    ck_assert_int_eq(s.n_stages, 2);
    ck_assert_int_eq(s.n_trials, 4 + 2 * 2 * 2);   /* 2 mha seeds x 2 methods x 2 steps */
    ck_assert_int_eq(s.stages[1].first, 4);
    ck_assert_int_eq(s.stages[1].from, 0);
    const al_sweep_trial *b1 = find(&s, "base_mha_seed1"), *b2 = find(&s, "base_mha_seed2");
    const al_sweep_trial *t = find(&s, "up_mean_steps10_seed2");
    ck_assert_int_eq(t->upstream, b2->index);
    ck_assert_int_eq(t->cfg.train.steps, 10);           /* 25 % of 40 */
    ck_assert_int_eq((int)t->cfg.train.seed, 2);        /* the upstream's */
    ck_assert_str_eq(t->cfg.train.init_convert, "mean");
    ck_assert_str_eq(t->cfg.model.variant, "mqa");
    ck_assert_int_eq(t->cfg.train.warmup_steps, 1);
    ck_assert_str_eq(t->cfg.train.init_from, "");       /* the worker sets it */
    ck_assert_str_eq(t->group, "up_mean_steps10");
    t = find(&s, "up_random_steps12_seed1");
    ck_assert_int_eq(t->upstream, b1->index);
    ck_assert_int_eq(t->cfg.train.steps, 12);
    for (int i = 0; i < s.n_trials; i++)
        ck_assert_int_eq(s.trials[i].baseline, strncmp(s.trials[i].label, "base_mha_", 9) == 0);
    al_sweep_free(&s);
    free(path), free(dir);
}
END_TEST

/* The upstream's configuration joins the label when several are read. */
START_TEST(several_upstream_configurations_are_named_in_the_labels)
{
    char *dir = al_test_tmpdir();
    char *path = write_staged(dir, "e.yaml", "lr: 1.0e-3",
                              "  - name: up\n    from: base\n"
                              "    convert: {to: {variant: gqa, n_kv_head: 1}, method: first}\n");
    al_sweep s;
    load_ok(path, &s);
    ck_assert_int_eq(s.n_trials, 8);
    ck_assert_int_eq(find(&s, "up_base_mqa_seed2")->upstream, find(&s, "base_mqa_seed2")->index);
    ck_assert_int_eq(find(&s, "up_base_mha_seed1")->upstream, find(&s, "base_mha_seed1")->index);
    al_sweep_free(&s);
    free(path), free(dir);
}
END_TEST

/* A later stage's own sweep.baseline (its axes alone: stage errors below)
 * marks, for each upstream trial, the trial the stage's others are paired
 * with (the report: test_report_analysis.c); the first stage's stays. */
START_TEST(a_later_stages_baseline_marks_one_trial_per_upstream_trial)
{
    char *dir = al_test_tmpdir();
    char *path = write_staged(dir, "e.yaml", "lr: 1.0e-3",
                              "  - name: long\n    from: base\n"
                              "    sweep:\n      grid: {train.lr: [3.0e-4, 1.0e-4]}\n"
                              "      baseline: {train.lr: 1.0e-4}\n");
    al_sweep s;
    load_ok(path, &s);
    ck_assert_int_eq(s.n_trials, 4 + 4 * 2);
    int marked = 0;
    for (int i = 0; i < s.n_trials; i++) {
        const al_sweep_trial *t = &s.trials[i];
        int later = strncmp(t->label, "long_", 5) == 0;
        int want = later ? strstr(t->label, "_lr1.0e-4_") != NULL
                         : strncmp(t->label, "base_mha_", 9) == 0;
        ck_assert_msg(t->baseline == want, "%s: baseline %d", t->label, t->baseline);
        marked += later && want;
    }
    ck_assert_int_eq(marked, 4);   /* one per upstream trial */
    al_sweep_free(&s);
    free(path), free(dir);
}
END_TEST

/* A sweep's ETA weighs each trial's steps by its training FLOPs: a
 * fine-tune at 4x the length and a quarter of the batch trains the same
 * tokens a step at more FLOPs (attention grows with the length), so its
 * steps weigh more than the base stage's, by the cost model's ratio. */
START_TEST(a_longer_stage_weighs_more_in_the_eta)
{
    char *dir = al_test_tmpdir();
    char *path = write_staged(dir, "e.yaml", "lr: 1.0e-3",
                              "  - name: long\n    from: base\n    steps: [10%]\n"
                              "    model: {seq_len: 64}\n    train: {batch_size: 1}\n");
    al_sweep s;
    load_ok(path, &s);
    const al_sweep_trial *b = find(&s, "base_mha_seed1"), *l = find(&s, "long_base_mha_seed1");
    ck_assert_int_eq(b->cfg.train.batch_size * b->cfg.model.seq_len,
                     l->cfg.train.batch_size * l->cfg.model.seq_len);   /* tokens a step */
    double want = l->train_flops_per_token / b->train_flops_per_token;
    ck_assert_msg(want > 1.05, "%g", want);
    long wb = al_sweep_trial_work(b, 1000), wl = al_sweep_trial_work(l, 1000);
    ck_assert_int_eq(al_sweep_trial_work(b, 2000), 2 * wb);
    ck_assert_msg(fabs((double)wl / (double)wb - want) < 1e-3 * want, "%ld / %ld, want %g", wl,
                  wb, want);
    al_sweep_free(&s);
    free(path), free(dir);
}
END_TEST

START_TEST(a_changed_base_gives_new_ids_downstream)
{
    char *dir = al_test_tmpdir();
    char *a = write_staged(dir, "a.yaml", "lr: 1.0e-3", uptrain);
    char *b = write_staged(dir, "b.yaml", "lr: 2.0e-3", uptrain);
    /* a later stage's own edit (not norm_eps: a conversion keeps the model
     * outside attention, so that stage could never train, and says so when
     * the file is read) */
    char later[1024];
    snprintf(later, sizeof later, "%s", uptrain);
    memcpy(strstr(later, "eval_every: 5"), "eval_every: 6", 13);
    char *c = write_staged(dir, "c.yaml", "lr: 1.0e-3", later);
    al_sweep sa, sb, sc;
    load_ok(a, &sa), load_ok(b, &sb), load_ok(c, &sc);
    for (int i = 0; i < sa.n_trials; i++) {
        ck_assert_str_eq(sa.trials[i].label, sb.trials[i].label);
        ck_assert_str_ne(sa.trials[i].hash, sb.trials[i].hash);   /* the base changed */
        int later_stage = sa.trials[i].stage > 0;
        ck_assert_int_eq(strcmp(sa.trials[i].hash, sc.trials[i].hash) != 0, later_stage);
    }
    /* A results directory holding a's trials: b's get ids of their own. */
    char r[4200], tdir[4400];
    snprintf(r, sizeof r, "%s/res", dir);
    for (int i = 0; i < sa.n_trials; i++) {
        al_err e;
        snprintf(tdir, sizeof tdir, "%s/%s", r, sa.trials[i].label);
        ck_assert_int_eq(al_mkdirs(tdir, &e), 0);
        ck_assert_int_eq(al_results_write_trial(tdir, &sa, &sa.trials[i], &e), 0);
    }
    al_sweep_assign_ids(&sb, r);
    for (int i = 0; i < sb.n_trials; i++) ck_assert_str_ne(sb.trials[i].id, sb.trials[i].label);
    al_sweep_free(&sa), al_sweep_free(&sb), al_sweep_free(&sc);
    free(a), free(b), free(c), free(dir);
}
END_TEST

START_TEST(stage_errors_name_file_line_and_column)
{
    static const struct { const char *later; const char *want; } c[] = {
        {"  - name: up\n    form: base\n", "e.yaml:11:5: error: unknown key 'form' in a stage "
         "(did you mean 'from'?)"},
        {"  - name: up\n    from: later\n", "e.yaml:11:11: error: 'from' must name an earlier "
         "stage ('later' is not one)"},
        {"  - name: base\n", "e.yaml:10:11: error: stage 'base' is named twice"},
        {"  - name: Up\n", "e.yaml:10:11: error: a stage name is 1 to 32 lowercase"},
        {"  - name: up\n    convert: {to: mqa, method: mean}\n", "e.yaml:11:14: error: "
         "'where', 'convert' and 'steps' need 'from'"},
        {"  - name: up\n    from: base\n    convert: {to: mqa}\n", "e.yaml:12:14: error: "
         "'convert' needs 'to'"},
        {"  - name: up\n    from: base\n    convert: {to: mqa, method: median}\n",
         "e.yaml:12:32: error: 'train.init_convert' must be one of none, mean, first, random, "
         "svd, got 'median' (did you mean 'mean'?) (in stage 'up', from trial 'base_mha_seed1')"},
        {"  - name: up\n    from: base\n    steps: [5 %]\n", "e.yaml:12:13: error: 'steps' lists "
         "step counts or percentages"},
        {"  - name: up\n    from: base\n    sweep: {seeds: 2}\n", "e.yaml:12:20: error: a stage "
         "with 'from' keeps each upstream trial's seed"},
        {"  - name: up\n    sweep: {seeds: {min: 2, max: 3, until: resolved}}\n",
         "e.yaml:11:20: error: seeds in rounds ({min, max, until: resolved}) are for a plain "
         "'sweep', not stages"},
        {"  - name: up\n    from: base\n    where: {model.attention.variant: mla}\n",
         "e.yaml:12:12: error: stage 'up' has no trials: 'where' matches none"},
        {"  - name: up\n    from: base\n    train: {init_from: /x.safetensors}\n",
         "e.yaml:12:24: error: a stage with 'from' sets train.init_from itself"},
        {"  - name: up\n    from: base\n    sweep: {select: {best_of: [train.lr]}}\n",
         "e.yaml:12:13: error: unknown key 'select' in a stage's 'sweep'"},
        {"  - name: up\n    from: base\n    convert: {to: {variant: gqa, n_kv_head: 3}, "
         "method: mean}\n", "e.yaml:12:45: error: 'n_kv_head' (3) must divide 'n_head' (2)"},
        /* a later stage's baseline names its own axes only */
        {"  - name: long\n    from: base\n    sweep:\n      grid: {train.lr: [3.0e-4]}\n"
         "      baseline: {model.attention: {variant: mha}}\n", "e.yaml:14:18: error: baseline "
         "key 'model.attention' is not a sweep axis"},
    };
    char *dir = al_test_tmpdir();
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char *path = write_staged(dir, "e.yaml", "lr: 1.0e-3", c[i].later);
        al_sweep s;
        al_err e;
        ck_assert_int_ne(al_sweep_load(path, NULL, 0, NULL, 0, &s, &e), 0);
        ck_assert_msg(strstr(e.msg, c[i].want), "%zu: '%s' lacks '%s'", i, e.msg, c[i].want);
        free(path);
    }
    char *path = write_staged(dir, "e.yaml", "lr: 1.0e-3", "sweep: {seeds: 2}\n");
    al_sweep s;
    al_err e;
    ck_assert_int_ne(al_sweep_load(path, NULL, 0, NULL, 0, &s, &e), 0);
    ck_assert_msg(strstr(e.msg, "e.yaml:10:8: error: with 'stages', each stage has its own "
                         "'sweep'"), "%s", e.msg);
    free(path), free(dir);
}
END_TEST

/* ------------------------------------------------------------ running */

/* summary.csv without the columns that time things. */
static char *summary_without_timing(const char *dir)
{
    char path[4200];
    al_csv t;
    al_err e;
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    ck_assert_msg(al_csv_read(path, &t, &e) == 0, "%s", e.msg);
    size_t cap = 1 << 16, n = 0;
    char *out = calloc(cap, 1);
    for (int r = -1; r < t.n_rows; r++)
        for (int c = 0; c < t.n_cols; c++) {
            if (!strcmp(t.head[c], "tokens_per_s") || !strcmp(t.head[c], "wall_s")) continue;
            const char *v = r < 0 ? t.head[c] : t.cells[r][c];
            n += (size_t)snprintf(out + n, cap - n, "%s%s", v, c + 1 == t.n_cols ? "\n" : ",");
        }
    al_csv_free(&t);
    return out;
}

static double mtime(const char *dir, const char *trial, const char *file)
{
    char path[4400];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s/%s", dir, trial, file);
    ck_assert_msg(stat(path, &st) == 0, "no %s", path);
    return st.st_mtim.tv_sec + 1e-9 * st.st_mtim.tv_nsec;
}

static pid_t spawn_sweep(const char *path, const char *out)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int nul = open("/dev/null", O_WRONLY);
        dup2(nul, 1), dup2(nul, 2);
        execl(al_test_binary(), al_test_binary(), "sweep", path, "--out", out, "--jobs", "1",
              (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Wait (up to 120 s) until a trial of stage `up` has a progress file
 * past step 0 and no result. */
static int wait_in_stage(const char *r, const al_sweep *s, char *which, size_t n)
{
    struct timespec nap = {0, 2 * 1000 * 1000};
    for (int k = 0; k < 60000; k++) {
        for (int i = s->stages[1].first; i < s->n_trials; i++) {
            char tdir[4400], res[4500];
            al_trial_progress p;
            snprintf(tdir, sizeof tdir, "%s/%s", r, s->trials[i].label);
            snprintf(res, sizeof res, "%s/result.json", tdir);
            if (!al_test_exists(res) && al_sweep_read_progress(tdir, &p) == 0 && p.step > 0)
                return snprintf(which, n, "%s", s->trials[i].label), 1;
        }
        nanosleep(&nap, NULL);
    }
    return 0;
}

/* The mean over the ok rows of a configuration of one column. */
static double column_mean(const char *dir, const char *group, const char *col)
{
    char path[4200];
    al_csv t;
    al_err e;
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    ck_assert_int_eq(al_csv_read(path, &t, &e), 0);
    double sum = 0;
    int n = 0;
    for (int r = 0; r < t.n_rows; r++)
        if (!strcmp(al_csv_cell(&t, r, "group"), group)) sum += atof(al_csv_cell(&t, r, col)), n++;
    al_csv_free(&t);
    ck_assert_int_gt(n, 0);
    return sum / n;
}

/* Every later trial starts after its upstream's result and from its
 * checkpoint; a staged sweep killed in a later stage resumes to the
 * summary of one never interrupted; the report shows the stage. */
START_TEST(a_killed_chained_sweep_resumes_to_the_uninterrupted_summary)
{
    char *dir = al_test_tmpdir(), *out, r1[4200], r2[4200], which[200], p[4400];
    char *path = write_staged(dir, "k.yaml", "lr: 1.0e-2", uptrain);
    snprintf(r1, sizeof r1, "%s/full", dir);
    snprintf(r2, sizeof r2, "%s/killed", dir);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s --jobs 2", path, r1), 0);
    ck_assert_msg(strstr(out, "12 ok, 0 diverged, 0 failed"), "%s", out);
    free(out);
    al_sweep s;
    load_ok(path, &s);
    for (int i = s.stages[1].first; i < s.n_trials; i++) {
        const al_sweep_trial *t = &s.trials[i], *u = &s.trials[t->upstream];
        ck_assert(mtime(r1, t->label, "trial.json") >= mtime(r1, u->label, "result.json"));
        snprintf(p, sizeof p, "%s/%s/config.yaml", r1, t->label);
        char *cfg = NULL, want[4600];
        size_t n;
        al_err e;
        ck_assert_int_eq(al_read_file(p, &cfg, &n, &e), 0);
        snprintf(want, sizeof want, "init_from: %s/%s/model.safetensors", r1, u->label);
        ck_assert_msg(strstr(cfg, want), "%s lacks %s", cfg, want);
        free(cfg);
    }
    pid_t pid = spawn_sweep(path, r2);
    ck_assert_msg(wait_in_stage(r2, &s, which, sizeof which), "never caught in stage 'up'");
    kill(pid, SIGKILL);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s --jobs 1", path, r2), 0);
    ck_assert_msg(strstr(out, "kept from before") && !strstr(out, " 0 kept from before") &&
                  !strstr(out, "start base_mha_seed1"), "%s", out);
    free(out);
    char *a = summary_without_timing(r1), *b = summary_without_timing(r2);
    ck_assert_str_eq(a, b);
    ck_assert_ptr_null(strstr(a, "pending"));
    /* The report: the converted (step 0) and uptrained means of each. */
    snprintf(p, sizeof p, "%s/report.md", r1);
    char *md = NULL;
    size_t n;
    al_err e;
    ck_assert_int_eq(al_read_file(p, &md, &n, &e), 0);
    ck_assert_ptr_nonnull(strstr(md, "## Converted and uptrained"));
    char row[512];
    snprintf(row, sizeof row, "| up_mean_steps10 | base_mha | mqa | %d | mean | "
             "10 steps (25%%) | %.4f ± ", 2 * 1 * 8 * 4, column_mean(r1, "up_mean_steps10",
                                                               "init_val_loss"));
    ck_assert_msg(strstr(md, row), "no '%s' in the report", row);
    snprintf(row, sizeof row, "| %.4f ± ", column_mean(r1, "up_random_steps12", "val_loss"));
    ck_assert_msg(strstr(strstr(md, "| up_random_steps12 |"), row), "no '%s'", row);
    snprintf(p, sizeof p, "%s/stages.dat", r1);
    ck_assert(al_test_exists(p));
    free(md), free(a), free(b), free(path), free(dir);
    al_sweep_free(&s);
}
END_TEST

/* A diverged upstream run: its own later trials are recorded as failed
 * with the reason, the others run; the sweep ends in status 1. */
START_TEST(a_failed_upstream_blocks_only_its_own_trials)
{
    char *dir = al_test_tmpdir(), *out, r[4200];
    char *path = write_staged_sweep(dir, "f.yaml", "lr: 1.0e-2",
                                    "{seeds: [1], grid: {train.lr: [1.0e-2, 1.0e+4]}}",
                                    "  - name: up\n    from: base\n"
                                    "    convert: {to: mqa, method: mean}\n    steps: [6]\n");
    snprintf(r, sizeof r, "%s/r", dir);
    ck_assert_int_eq(al_test_attnlabf(&out, "sweep %s --out %s --jobs 1", path, r), 1);
    ck_assert_msg(strstr(out, "not started up_base_lr1.0e+4_seed1: upstream trial "
                         "base_lr1.0e+4_seed1 ended diverged"), "%s", out);
    ck_assert_msg(strstr(out, "done up_base_lr1.0e-2_seed1"), "%s", out);
    free(out);
    char *sum = summary_without_timing(r);
    ck_assert_msg(strstr(sum, ",failed,upstream trial base_lr1.0e+4_seed1 ended diverged,"),
                  "%s", sum);
    free(sum), free(path), free(dir);
}
END_TEST

Suite *sweep_stage_suite(void)
{
    Suite *s = suite_create("sweep_stage");
    TCase *spec = tcase_create("spec");
    tcase_add_test(spec, a_stage_expands_once_per_upstream_trial_with_its_seed);
    tcase_add_test(spec, several_upstream_configurations_are_named_in_the_labels);
    tcase_add_test(spec, a_later_stages_baseline_marks_one_trial_per_upstream_trial);
    tcase_add_test(spec, a_longer_stage_weighs_more_in_the_eta);
    tcase_add_test(spec, a_changed_base_gives_new_ids_downstream);
    tcase_add_test(spec, stage_errors_name_file_line_and_column);
    suite_add_tcase(s, spec);
    TCase *runs = tcase_create("runs");
    tcase_set_timeout(runs, 300);
    tcase_add_test(runs, a_killed_chained_sweep_resumes_to_the_uninterrupted_summary);
    tcase_add_test(runs, a_failed_upstream_blocks_only_its_own_trials);
    suite_add_tcase(s, runs);
    return s;
}
