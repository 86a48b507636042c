/*
 * cmd_trial.c - `attnlab trial`: one trial of a sweep, the worker that
 * `attnlab sweep` (cmd_sweep.c) and the other executors start.
 */
#include <stdio.h>
#include <string.h>

#include "al_cli.h"
#include "al_sweep_eval_run.h"
#include "al_sweep_run.h"

typedef struct trial_args {
    al_cli_opts o;
    long index, threads;
    const char *file_sha256;
} trial_args;

static const al_opt trial_opts[] = {
    AL_ARG("FILE", trial_args, o.file, AL_OPT_REQUIRED, "the sweep's experiment file"),
    {.name = "--index", .kind = AL_OPT_LONG, .meta = "I", AL_CLI_AT(trial_args, index), .lo = 0,
     .hi = AL_SWEEP_MAX_TRIALS, .flags = AL_OPT_REQUIRED,
     .help = "the trial's index in the sweep (from 0)"},
    {.name = "--out", .kind = AL_OPT_PATH, .meta = "DIR", AL_CLI_AT(trial_args, o.out),
     .flags = AL_OPT_REQUIRED, .help = "the sweep's results directory"},
    AL_LONG("--threads", "M", 1, 1024, trial_args, threads, "threads (default: train.threads)"),
    {.name = "--file-sha256", .kind = AL_OPT_STR, .meta = "HEX",
     AL_CLI_AT(trial_args, file_sha256),
     .help = "FILE's SHA-256 when the sweep read it: refuse to run if it changed since"},
    AL_CLI_SET(trial_args, 0),
    AL_CLI_PLUGIN(trial_args, 0),
    AL_CLI_CONTEXT(trial_args, AL_OPT_IGNORED, "unused by trial"),
    {0},
};

static const al_cli_spec trial_spec = {
    "trial", trial_opts,
    "Run trial I of FILE's sweep into DIR/<trial id>: the worker that `attnlab\n"
    "sweep` starts for each trial (other executors can start it the same way).\n"
    "Give the same --set options as the sweep. Writes trial.json, config.yaml,\n"
    "metrics.csv, progress and, at the end, result.json; then, once trained ok,\n"
    "the sweep's `eval` of the trial (all but eval.decode's timing, which the\n"
    "sweep runs once no trial trains).\n"
    "Exit status: 0 ok, 3 diverged, 1 failed, 2 bad input.\n",
};

int al_cmd_trial(int argc, char **argv)
{
    trial_args a = {0};
    int rc = al_cli_parse(&trial_spec, argc, argv, &a);
    if (rc != AL_CLI_GO) return rc;
    al_sweep s;
    al_err e;
    if (al_sweep_load(a.o.file, a.o.sets, a.o.n_sets, a.o.plugins, a.o.n_plugins, &s, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return AL_EXIT_INPUT;
    }
    /* the sweep's trials are one experiment: a file edited mid-sweep
     * would make this trial another one's, under the same sweep */
    if (a.file_sha256 && strcmp(a.file_sha256, s.file_sha256) != 0) {
        snprintf(e.msg, sizeof e.msg, "%s: changed since the sweep started (SHA-256 %.12s... "
                 "then, %.12s... now); restore it, or start the sweep again to run the edited "
                 "experiment", a.o.file, a.file_sha256, s.file_sha256);
        al_sweep_free(&s);
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    }
    if (a.index >= s.n_trials) {
        snprintf(e.msg, sizeof e.msg, "trial: --index %ld, but %s has %d trials", a.index,
                 a.o.file, s.n_trials);
        al_sweep_free(&s);
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    }
    al_sweep_assign_ids(&s, a.o.out);
    const al_sweep_trial *t = &s.trials[a.index];
    rc = al_sweep_trial_run(&s, t, a.o.out, (int)a.threads, &e);
    if (rc == AL_EXIT_RUNTIME) fprintf(stderr, "attnlab: trial %s: %s\n", t->id, e.msg);
    else printf("trial %s: %s\n", t->id, rc == 0 ? "ok" : "diverged");
    /* the sweep's eval, here and now; a failure leaves the trial ok, and the
     * sweep's pass at the end tries again and reports it */
    if (rc == 0 && s.eval.on) {
        int n = 0;
        long threads = al_threads_for(a.threads > 0 ? a.threads : t->cfg.train.threads);
        if (al_sweep_evaluate_trial(&s, t, a.o.out, threads, &n, &e) != 0)
            fprintf(stderr, "attnlab: trial %s: eval: %s\n", t->id, e.msg);
        else if (n)
            printf("trial %s: eval: %d result(s)\n", t->id, n);
    }
    al_sweep_free(&s);
    return rc;
}
