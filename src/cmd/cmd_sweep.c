/*
 * cmd_sweep.c - `attnlab sweep`: every trial of an experiment's sweep, on
 * one of the executors, then the report. Its worker is `attnlab trial`
 * (cmd_trial.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "al_cli.h"
#include "al_guard.h"
#include "al_mpi.h"
#include "al_report.h"
#include "al_sweep_eval_run.h"
#include "al_sweep_exec.h"
#include "al_sweep_run.h"
#include "al_sweep_spec.h"

enum { EXIT_INTERRUPTED = 130 };   /* 128 + SIGINT, as shells report it */

/* ------------------------------------------------------------ sweep */

typedef struct sweep_args {
    al_cli_opts o;
    int dry_run;
    int executor;             /* enum al_sweep_executor; -1: not given */
    int no_wait, n_slurm_args;
    const char *slurm_args[AL_CLI_MAX_SETS];
    long throttle;            /* --jobs as given (Slurm's array limit) */
    long jobs, threads;       /* 0: default */
    char out[AL_PATH_LEN];
} sweep_args;

static int parse_executor(const char *v, void *field)
{
    int x = al_sweep_executor_parse(v);
    return x < 0 ? -1 : (*(int *)field = x, 0);
}

static const al_opt sweep_opts[] = {
    AL_ARG("FILE", sweep_args, o.file, AL_OPT_REQUIRED, "the experiment file with its sweep"),
    AL_LONG("--jobs", "N", 1, 1024, sweep_args, jobs,
            "trials at a time (default: as many as fit the cores)"),
    AL_LONG("--threads-per-job", "M", 1, 1024, sweep_args, threads,
            "threads of each trial (default: train.threads, else 1)"),
    AL_PATH("--out", "DIR", sweep_args, o.out, "the results directory (default results/<name>)"),
    AL_FLAG("--dry-run", sweep_args, dry_run,
            "list the trials with parameters and KV-cache bytes,\n"
            "train nothing (with slurm: print the batch script)"),
    AL_CLI_SET(sweep_args, 0),
    AL_CLI_PLUGIN(sweep_args, 0),
    {.name = "--executor", .kind = AL_OPT_FUNC, .meta = "local|slurm|mpi",
     AL_CLI_AT(sweep_args, executor), .parse = parse_executor,
     .want = "one of local, slurm, mpi", .flags = AL_OPT_EQUALS,
     .help = "where the trials run (default local; see below)"},
    {.name = "--slurm-arg", .kind = AL_OPT_LIST, .meta = "ARG",
     AL_CLI_AT(sweep_args, slurm_args), .count_at = offsetof(sweep_args, n_slurm_args),
     .hi = AL_CLI_MAX_SETS, .flags = AL_OPT_EQUALS,
     .help = "passed to sbatch as is (ARG may start with '-'); may repeat"},
    AL_FLAG("--no-wait", sweep_args, no_wait, "with slurm: submit and return"),
    AL_CLI_CONTEXT(sweep_args, AL_OPT_IGNORED, "unused by sweep"),
    {0},
};

static const al_cli_spec sweep_spec = {
    "sweep", sweep_opts,
    "Train every trial of FILE's `sweep` mapping (grid, zip, seeds, exclude; see the\n"
    "README), each as its own worker process, N at a time (default: as many as fit\n"
    "the cores at M threads each; M defaults to train.threads, else 1). Results go\n"
    "to DIR (default results/<name>): one directory per trial, summary.csv, and\n"
    "report.md with plots (as `attnlab report DIR`). Running the same file again\n"
    "resumes: finished trials (ok or diverged) are kept, the others run again\n"
    "(from their last checkpoint when train.checkpoint_every is set).\n"
    "Ctrl-C stops cleanly: running trials are recorded as interrupted.\n"
    "With `stages` instead of `sweep` (README \"Converting and uptraining\"), a\n"
    "later stage's trials start from an earlier stage's checkpoints, converted,\n"
    "each once its upstream trial has ended ok.\n"
    "With `sweep.seeds: {min: N, max: M, until: resolved}`, seeds are trained in\n"
    "rounds (seeds 1..N, then `step` more, default 1) until the report resolves every\n"
    "comparison with the baseline (Holm, with a group-sequential rule) or M is reached.\n"
    "Exit status: 0 every trial finished (ok or diverged), 1 some failed or the\n"
    "runner could not go on, 2 bad input (nothing trained), 130 interrupted.\n"
    "\n"
    "Beyond one machine (README \"Running on a cluster\"; DIR on shared storage):\n"
    "  --executor slurm [--slurm-arg ARG ...] [--no-wait]\n"
    "      one sbatch --array job, a task per pending trial (--cpus-per-task M,\n"
    "      --jobs N: at most N at once; each --slurm-arg goes to sbatch as is),\n"
    "      followed with squeue; --no-wait submits and returns, and a later\n"
    "      `attnlab sweep FILE` collects (a directory submitted to Slurm stays\n"
    "      with Slurm unless --executor local is given); --dry-run prints the\n"
    "      batch script. Failed or cancelled tasks are submitted again next run.\n"
    "  mpirun -np N attnlab sweep FILE --executor mpi\n"
    "      rank 0 hands the trials to the N ranks, one at a time each.\n",
};

/* Threads per trial: the option, else the largest train.threads, else 1;
 * trials at a time: the option, else as many as fit the cores. */
static void choose_pool(const al_sweep *s, sweep_args *a)
{
    if (!a->threads) {
        a->threads = 1;
        for (int i = 0; i < s->n_trials; i++)
            if (s->trials[i].cfg.train.threads > a->threads)
                a->threads = s->trials[i].cfg.train.threads;
    }
    long cores = al_threads_for(0);   /* the cores this process may use */
    if (!a->jobs) a->jobs = cores / a->threads > 0 ? cores / a->threads : 1;
    if (a->jobs > s->n_trials) a->jobs = s->n_trials;
}

static void print_dry_run(const al_sweep *s, const sweep_args *a)
{
    char tdir[AL_PATH_LEN + AL_SWEEP_ID_LEN + 2];
    int todo = 0;
    printf("experiment %s (%s): %d trials", s->name, s->file, s->n_trials);
    if (s->n_excluded) printf(" (%d excluded)", s->n_excluded);
    printf(", results in %s\n", a->out);
    for (int i = 0; i < s->n_trials; i++)
        if (s->trials[i].baseline) {
            printf("baseline (paired differences in the report): %s\n", s->trials[i].group);
            break;
        }
    for (int k = 0; k < s->n_stages; k++) {
        const al_sweep_stage *g = &s->stages[k];
        printf("stage %s: trials %d-%d", g->name, g->first, g->first + g->n - 1);
        if (g->from >= 0) printf(", each from a checkpoint of stage %s", s->stages[g->from].name);
        putchar('\n');
    }
    if (s->seq_on) {
        int n_at[AL_SEQ_MAX_LOOKS], looks = al_seq_looks(&s->seq, n_at, NULL);
        printf("seeds in rounds, until every comparison with the baseline is resolved: "
               "rounds at");
        for (int k = 0; k < looks; k++) printf("%s %d", k ? "," : "", n_at[k]);
        printf(" seeds (the trials below are the most it may train)\n");
    }
    if (s->n_select) {
        printf("tuned per configuration and seed by %s:", s->select_by);
        for (int i = 0; i < s->n_select; i++) printf(" %s", s->axes[s->select_axis[i]].path);
        putchar('\n');
    }
    printf("\n%5s  %-36s %-8s %7s %6s %12s %12s %15s  %s\n", "index", "trial", "variant",
           "n_layer", "d_ff", "params", "matched_to", "kv_bytes/token", "status");
    for (int i = 0; i < s->n_trials; i++) {
        const al_sweep_trial *t = &s->trials[i];
        const al_model_config *m = &t->cfg.model;
        al_trial_result r;
        char to[32] = "-", variant[256];
        al_sweep_stack_label(variant, sizeof variant, m, "/");
        al_results_trial_dir(tdir, sizeof tdir, a->out, t);
        al_results_read_result(tdir, t->hash, &r);
        todo += !al_trial_status_final(r.status);
        if (m->match.by) snprintf(to, sizeof to, "%zu", m->match.params_to);
        printf("%5d  %-36s %-8s %7d %6d %12zu %12s %15zu  %s%s", t->index, t->id,
               variant, m->n_layer, m->d_ff, t->params, to, 4 * t->kv_elems_per_token,
               al_trial_status_name(r.status), al_trial_status_final(r.status) ? " (kept)" : "");
        if (t->upstream >= 0)
            printf("  <- %s (%s)", s->trials[t->upstream].id, t->cfg.train.init_convert);
        putchar('\n');
    }
    printf("\n%d to run, %ld at a time with %ld thread(s) each; nothing was trained "
           "(--dry-run)\n", todo, a->jobs, a->threads);
}

static int self_exe(char *buf, size_t n, al_err *e)
{
    ssize_t len = readlink("/proc/self/exe", buf, n - 1);
    if (len <= 0) return al_errf(e, "cannot find the attnlab binary (/proc/self/exe): %s",
                                 strerror(errno));
    buf[len] = 0;
    return 0;
}

/* The report of dir, as `attnlab report` writes it. With keep, the
 * analysis it was written from goes to the caller (NULL when there is
 * none), which frees it. */
static int report_after(const char *dir, al_report_analysis **keep)
{
    al_report_analysis *A = NULL;
    al_report_stats rs = {0};
    al_err e;
    int rc = al_report_analyze(dir, &A, &e) ? -1 : al_report_write_analysis(A, &rs, &e);
    if (keep) *keep = A;
    else al_report_analysis_free(A);
    if (rc) {
        fprintf(stderr, "attnlab: report: %s\n", e.msg);
        return AL_EXIT_RUNTIME;
    }
    printf("report: %s/report.md%s\n", dir, rs.plots == AL_PLOTS_NO_GNUPLOT
           ? " (no plots: gnuplot not found)" : rs.plots == AL_PLOTS_FAILED
           ? " (no plots: gnuplot failed, see gnuplot.log)" : "");
    return 0;
}

/* The trials on the chosen executor (rank 0's share under mpi). */
static int execute(al_sweep *s, const sweep_args *a, al_sweep_run_opts *ro,
                   al_sweep_run_stats *st, long *job, al_err *e)
{
    *job = 0;
    if (a->executor == AL_EXEC_SLURM) {
        al_slurm_opts so = {a->slurm_args, a->n_slurm_args, a->no_wait, (int)a->throttle};
        return al_sweep_slurm(s, ro, &so, st, job, e);
    }
    if (a->executor == AL_EXEC_MPI) return al_sweep_mpi(s, ro, st, e);
    return al_sweep_run(s, ro, st, e);
}

/* seeds: {min, max, until: resolved}: one round per look of the plan
 * (al_stats.h), each the trials of seeds 1..n (a prefix of the sweep),
 * then the report; the analysis it is written from decides by the same
 * plan whether another round is due (al_report_seeds_due). A resume walks
 * the rounds again: finished trials are kept, so it reaches the same
 * decisions. Stops early on a failure or an interrupt (the decision needs
 * every seed). */
static int run_rounds(const al_sweep *s, const sweep_args *a, al_sweep_run_opts *ro,
                      al_sweep_run_stats *st, long *job, int *rrc, al_err *e)
{
    int n_at[AL_SEQ_MAX_LOOKS], looks = al_seq_looks(&s->seq, n_at, NULL);
    int rc = 0, ran_before = 0;
    al_sweep *round = al_malloc(sizeof *round);
    memset(st, 0, sizeof *st);
    *rrc = -1;
    for (int k = 0; k < looks && !rc; k++) {
        al_sweep_run_stats r;
        al_report_analysis *A;
        /* the round: s cut to its first trials, a view that shares s's
         * trials (indices and ids stay the whole sweep's); s is not changed */
        *round = *s;
        round->n_trials = al_sweep_seq_trials(s, n_at[k]);
        printf("round %d of at most %d: seeds 1-%d (%d trials)\n", k + 1, looks, n_at[k],
               round->n_trials);
        fflush(stdout);
        rc = execute(round, a, ro, &r, job, e);
        st->ok += r.ok, st->diverged += r.diverged, st->failed += r.failed;
        st->ran += r.ran, st->wall_s += r.wall_s, st->interrupted |= r.interrupted;
        st->skipped = r.skipped - ran_before;   /* kept from before this run */
        ran_before += r.ok + r.diverged;
        *rrc = report_after(a->out, &A);
        int over = A && !al_report_seeds_due(A);
        al_report_analysis_free(A);
        if (rc || *rrc || r.interrupted || r.failed || over) {
            if (over) printf("rounds over at %d seeds: %s\n", n_at[k], k + 1 < looks
                             ? "every comparison with the baseline is resolved"
                             : "the maximum");
            break;
        }
    }
    free(round);
    return rc;
}

/* Under mpi every rank comes here: rank 0 owns the directory and runs the
 * sweep, the others serve it. */
static int run_sweep(al_sweep *s, sweep_args *a)
{
    al_err e = {""};
    char exe[AL_PATH_LEN];
    int lock = -1, bad;
    /* a results directory that cannot be made, written or locked is a
     * bad --out (exit 2): nothing has been trained */
    int code = AL_EXIT_INPUT;
    bad = al_mpi_rank() == 0 &&
          (al_mkdirs(a->out, &e) || al_lock_dir(a->out, "sweep", &lock, &e) ||
           al_results_write_marker(a->out, s, a->o.sets, a->o.n_sets, &e));
    if (al_mpi_rank() == 0 && !bad) al_remove_stale_temps(a->out, NULL);   /* a killed runner's */
    if (!bad && self_exe(exe, sizeof exe, &e)) bad = 1, code = AL_EXIT_RUNTIME;
    if (al_mpi_agree(bad, &e)) {
        if (lock >= 0) close(lock);
        return e.msg[0] ? al_cli_fail(code, e.msg) : code;
    }
    al_sweep_run_opts ro = {exe, a->out, (int)a->jobs, (int)a->threads, a->o.sets,
                            a->o.n_sets, a->o.plugins, a->o.n_plugins, NULL};
    if (al_mpi_rank() > 0)
        return al_sweep_mpi_serve(s, &ro, &e) ? al_cli_fail(AL_EXIT_RUNTIME, e.msg) : 0;
    al_sweep_run_stats st;
    long job;
    int rc, rrc;
    if (s->seq_on) rc = run_rounds(s, a, &ro, &st, &job, &rrc, &e);
    else rc = execute(s, a, &ro, &st, &job, &e), rrc = -1;
    if (rc) fprintf(stderr, "attnlab: sweep: %s\n", e.msg);
    al_sweep_eval_stats es = {0};
    int erc = st.interrupted ? 0 : al_sweep_evaluate(s, a->out, a->jobs * a->threads, &es);
    /* summary.csv carries eval.decode's speed: written again once it is there */
    if (es.computed && s->eval.decode.on && al_results_write_summary(a->out, s, &e) != 0)
        fprintf(stderr, "attnlab: sweep: %s\n", e.msg), erc = -1;
    if (rrc < 0 || es.computed) rrc = report_after(a->out, NULL);
    close(lock);
    printf("sweep %s: %d ok, %d diverged, %d failed, %d kept from before; %.1f s%s\n",
           s->name, st.ok, st.diverged, st.failed, st.skipped, st.wall_s,
           st.interrupted ? "; interrupted (run it again to resume)" : "");
    if (job && a->no_wait) printf("submitted batch job %ld\n", job);
    if (es.computed || es.failed)
        printf("eval: %d result(s) computed over %d ok trial(s)%s\n", es.computed, es.trials,
               es.failed ? "; some failed (see above)" : "");
    if (rc || erc) return AL_EXIT_RUNTIME;
    if (st.interrupted) return EXIT_INTERRUPTED;
    return st.failed || rrc ? AL_EXIT_RUNTIME : 0;
}

/* No --executor: a directory submitted to Slurm before stays with Slurm.
 * Then whether the executor can run here at all. */
static int pick_executor(const al_sweep *s, sweep_args *a, al_err *e)
{
    int recorded = al_sweep_slurm_recorded(a->out, e);
    if (recorded < 0) return -1;
    if (a->executor < 0 && recorded) {
        a->executor = AL_EXEC_SLURM;
        fprintf(stderr, "sweep: %s/slurm.json: continuing with the slurm executor "
                "(--executor local to run here)\n", a->out);
    }
    if (a->executor < 0) a->executor = AL_EXEC_LOCAL;
    if (s->seq_on && (a->executor == AL_EXEC_MPI || a->no_wait))
        return al_errf(e, "sweep: seeds in rounds (sweep.seeds: {until: resolved}) need the "
                       "runner to wait for each round: use --executor local, or slurm "
                       "without --no-wait");
    if (a->executor == AL_EXEC_MPI && a->jobs)
        return al_errf(e, "sweep: --jobs does not apply to --executor mpi: each rank runs one "
                       "trial at a time (choose the ranks with mpirun -np)");
    a->throttle = a->jobs;
    return al_sweep_executor_check(a->executor, e);
}

static int dry_run(al_sweep *s, sweep_args *a)
{
    al_err e;
    char exe[AL_PATH_LEN];
    if (a->executor != AL_EXEC_SLURM) return print_dry_run(s, a), 0;
    if (self_exe(exe, sizeof exe, &e)) return al_cli_fail(AL_EXIT_RUNTIME, e.msg);
    al_sweep_run_opts ro = {exe, a->out, (int)a->jobs, (int)a->threads, a->o.sets,
                            a->o.n_sets, a->o.plugins, a->o.n_plugins, NULL};
    al_slurm_opts so = {a->slurm_args, a->n_slurm_args, a->no_wait, (int)a->throttle};
    return al_sweep_slurm_dry_run(s, &ro, &so, stdout, &e) ? al_cli_fail(AL_EXIT_INPUT, e.msg) : 0;
}

/* Every rank (under mpi) loads the same file; failures are agreed on so
 * that no rank waits for another, and printed once. */
static int sweep_ranked(sweep_args *a)
{
    al_sweep s;
    al_err e = {""};
    int bad = al_sweep_load(a->o.file, a->o.sets, a->o.n_sets, a->o.plugins, a->o.n_plugins,
                            &s, &e) != 0;
    if (al_mpi_agree(bad, &e)) {
        if (e.msg[0]) fprintf(stderr, "%s\n", e.msg);
        return AL_EXIT_INPUT;
    }
    if (a->o.out) snprintf(a->out, sizeof a->out, "%s", a->o.out);
    else snprintf(a->out, sizeof a->out, "results/%s", s.name);
    bad = al_mpi_rank() == 0 && (al_results_check_owner(a->out, &s, &e) ||
                                  pick_executor(&s, a, &e));
    int rc = al_mpi_agree(bad, &e) ? AL_EXIT_INPUT : 0;
    if (rc && e.msg[0]) al_cli_fail(rc, e.msg);
    if (!rc) {
        al_sweep_assign_ids(&s, a->out);
        choose_pool(&s, a);
        if (a->dry_run) rc = al_mpi_rank() == 0 ? dry_run(&s, a) : 0;
        else rc = run_sweep(&s, a);
    }
    al_sweep_free(&s);
    return rc;
}

int al_cmd_sweep(int argc, char **argv)
{
    sweep_args a = {.executor = -1};
    int rc = al_cli_parse(&sweep_spec, argc, argv, &a);
    if (rc != AL_CLI_GO) return rc;
    if (a.executor != AL_EXEC_MPI) return sweep_ranked(&a);
    al_err e;
    if (al_mpi_init(&e) || al_sweep_executor_check(AL_EXEC_MPI, &e)) {
        al_mpi_finalize();
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    }
    rc = sweep_ranked(&a);
    fflush(stdout);   /* in the pipe before the fence lets a rank exit (cmd_train.c) */
    fflush(stderr);
    al_mpi_finalize();
    return rc;
}
