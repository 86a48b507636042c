/*
 * cmd_sweep.c - `attnlab sweep`, its worker `attnlab trial`, and
 * `attnlab report`.
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
#include "al_mpi.h"
#include "al_report.h"
#include "al_sweep_exec.h"
#include "al_sweep_run.h"

enum { EXIT_INTERRUPTED = 130 };   /* 128 + SIGINT, as shells report it */

/* ------------------------------------------------------------ sweep */

static const char sweep_help[] =
    "usage: attnlab sweep FILE [--jobs N] [--threads-per-job M] [--out DIR] [--dry-run]\n"
    "                     [--set key.path=value ...] [--plugin P ...]\n"
    "\n"
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
    "--dry-run lists the trials with parameters and KV-cache bytes, trains nothing.\n"
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
    "      rank 0 hands the trials to the N ranks, one at a time each.\n";

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

/* --executor X, --slurm-arg ARG (ARG may start with '-'), --no-wait, each
 * also as --opt=VALUE: 0 taken (i advanced past a value), -1 not one of
 * them, else an exit status with the message printed. */
static int exec_arg(sweep_args *a, int argc, char **argv, int *i)
{
    const char *arg = argv[*i], *val = NULL;
    char msg[256];
    if (strcmp(arg, "--no-wait") == 0) return a->no_wait = 1, 0;
    int is_exec = !strncmp(arg, "--executor", 10), is_sarg = !strncmp(arg, "--slurm-arg", 11);
    if (!is_exec && !is_sarg) return -1;
    const char *rest = arg + (is_exec ? 10 : 11);
    if (*rest == '=') val = rest + 1;
    else if (*rest) return -1;
    else if (*i + 1 < argc) val = argv[++*i];
    if (!val) {
        snprintf(msg, sizeof msg, "sweep: %s wants a value", is_exec ? "--executor" : "--slurm-arg");
        return al_cli_fail(AL_EXIT_INPUT, msg);
    }
    if (is_sarg) {
        if (a->n_slurm_args == AL_CLI_MAX_SETS)
            return al_cli_fail(AL_EXIT_INPUT, "sweep: too many --slurm-arg options");
        a->slurm_args[a->n_slurm_args++] = val;
        return 0;
    }
    if ((a->executor = al_sweep_executor_parse(val)) >= 0) return 0;
    snprintf(msg, sizeof msg, "sweep: --executor '%.100s' is not one of local, slurm, mpi", val);
    return al_cli_fail(AL_EXIT_INPUT, msg);
}

static int parse_sweep_args(int argc, char **argv, sweep_args *a)
{
    static const char *const extra[] = {"--jobs", "--threads-per-job", NULL};
    const char *val[2];
    char **rest = al_malloc((size_t)(argc + 1) * sizeof *rest), msg[256];
    int n = 0;
    memset(a, 0, sizeof *a);
    a->executor = -1;
    for (int i = 0; i < argc; i++) {   /* --dry-run takes no value */
        int k = exec_arg(a, argc, argv, &i);
        if (k > 0) return free(rest), k;
        if (k == 0) continue;
        if (strcmp(argv[i], "--dry-run") == 0) a->dry_run = 1;
        else rest[n++] = argv[i];
    }
    int rc = al_cli_parse(n, rest, &a->o, "sweep", extra, val);
    free(rest);
    if (rc || a->o.help) return rc;
    if (val[0] && al_cli_parse_long(val[0], 1, 1024, &a->jobs)) {
        snprintf(msg, sizeof msg, "sweep: --jobs wants an integer in [1, 1024], got '%s'", val[0]);
        return al_cli_fail(AL_EXIT_INPUT, msg);
    }
    if (val[1] && al_cli_parse_long(val[1], 1, 1024, &a->threads)) {
        snprintf(msg, sizeof msg, "sweep: --threads-per-job wants an integer in [1, 1024], "
                 "got '%s'", val[1]);
        return al_cli_fail(AL_EXIT_INPUT, msg);
    }
    return 0;
}

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
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
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
        char to[32] = "-";
        al_results_trial_dir(tdir, sizeof tdir, a->out, t);
        al_results_read_result(tdir, t->hash, &r);
        todo += !al_trial_status_final(r.status);
        if (m->match.by) snprintf(to, sizeof to, "%zu", m->match.params_to);
        printf("%5d  %-36s %-8s %7d %6d %12zu %12s %15zu  %s%s", t->index, t->id,
               m->variant, m->n_layer, m->d_ff, t->params, to, 4 * t->kv_elems_per_token,
               al_trial_status_name(r.status), al_trial_status_final(r.status) ? " (kept)" : "");
        if (t->upstream >= 0)
            printf("  <- %s (%s)", s->trials[t->upstream].id, t->cfg.train.init_convert);
        putchar('\n');
    }
    printf("\n%d to run, %ld at a time with %ld thread(s) each; nothing was trained "
           "(--dry-run)\n", todo, a->jobs, a->threads);
}

/* One sweep per results directory at a time: an advisory lock held for
 * the run (released by the kernel however the runner ends). */
static int lock_dir(const char *dir, int *fd, al_err *e)
{
    char path[AL_PATH_LEN + 16];
    snprintf(path, sizeof path, "%s/.lock", dir);
    *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (*fd < 0) return al_errf(e, "%s: cannot open: %s", path, strerror(errno));
    if (flock(*fd, LOCK_EX | LOCK_NB) != 0)
        return al_errf(e, "%s: another sweep is running in this directory", dir);
    return 0;
}

/* Temp files a killed runner left (summary.csv.tmp.PID, the report's):
 * never read, only litter. Called with the lock held: no writer is alive. */
static void remove_stale_temps(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char path[AL_PATH_LEN + 300];
        if (!strstr(de->d_name, ".tmp.")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        unlink(path);
    }
    if (d) closedir(d);
}

static int self_exe(char *buf, size_t n, al_err *e)
{
    ssize_t len = readlink("/proc/self/exe", buf, n - 1);
    if (len <= 0) return al_errf(e, "cannot find the attnlab binary (/proc/self/exe): %s",
                                 strerror(errno));
    buf[len] = 0;
    return 0;
}

static int report_after(const char *dir)
{
    al_report_stats rs;
    al_err e;
    int rc = al_report_write(dir, &rs, &e);
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
          (al_mkdirs(a->out, &e) ||
           al_results_write_marker(a->out, s, a->o.sets, a->o.n_sets, &e) ||
           lock_dir(a->out, &lock, &e));
    if (al_mpi_rank() == 0 && !bad) remove_stale_temps(a->out);
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
    int rc = execute(s, a, &ro, &st, &job, &e);
    if (rc) fprintf(stderr, "attnlab: sweep: %s\n", e.msg);
    int rrc = report_after(a->out);
    close(lock);
    printf("sweep %s: %d ok, %d diverged, %d failed, %d kept from before; %.1f s%s\n",
           s->name, st.ok, st.diverged, st.failed, st.skipped, st.wall_s,
           st.interrupted ? "; interrupted (run it again to resume)" : "");
    if (job && a->no_wait) printf("submitted batch job %ld\n", job);
    if (rc) return AL_EXIT_RUNTIME;
    if (st.interrupted) return EXIT_INTERRUPTED;
    return st.failed || rrc ? AL_EXIT_RUNTIME : 0;
}

/* No --executor: a directory submitted to Slurm before stays with Slurm.
 * Then whether the executor can run here at all. */
static int pick_executor(sweep_args *a, al_err *e)
{
    int recorded = al_sweep_slurm_recorded(a->out, e);
    if (recorded < 0) return -1;
    if (a->executor < 0 && recorded) {
        a->executor = AL_EXEC_SLURM;
        fprintf(stderr, "sweep: %s/slurm.json: continuing with the slurm executor "
                "(--executor local to run here)\n", a->out);
    }
    if (a->executor < 0) a->executor = AL_EXEC_LOCAL;
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
                                  pick_executor(a, &e));
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
    sweep_args a;
    int rc = parse_sweep_args(argc, argv, &a);
    if (rc) return rc;
    if (a.o.help) return fputs(sweep_help, stdout), 0;
    if (a.executor != AL_EXEC_MPI) return sweep_ranked(&a);
    al_err e;
    if (al_mpi_init(&e) || al_sweep_executor_check(AL_EXEC_MPI, &e)) {
        al_mpi_finalize();
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    }
    rc = sweep_ranked(&a);
    al_mpi_finalize();
    return rc;
}

/* ------------------------------------------------------------ trial */

static const char trial_help[] =
    "usage: attnlab trial FILE --index I --out DIR [--threads M] [--set k=v ...]\n"
    "\n"
    "Run trial I of FILE's sweep into DIR/<trial id>: the worker that `attnlab\n"
    "sweep` starts for each trial (other executors can start it the same way).\n"
    "Give the same --set options as the sweep. Writes trial.json, config.yaml,\n"
    "metrics.csv, progress and, at the end, result.json.\n"
    "Exit status: 0 ok, 3 diverged, 1 failed, 2 bad input.\n";

int al_cmd_trial(int argc, char **argv)
{
    static const char *const extra[] = {"--index", "--threads", NULL};
    const char *val[2];
    al_cli_opts o;
    long index = -1, threads = 0;
    int rc = al_cli_parse(argc, argv, &o, "trial", extra, val);
    if (rc) return rc;
    if (o.help) return fputs(trial_help, stdout), 0;
    if (!val[0] || !o.out || al_cli_parse_long(val[0], 0, AL_SWEEP_MAX_TRIALS, &index) ||
        (val[1] && al_cli_parse_long(val[1], 1, 1024, &threads)))
        return al_cli_fail(AL_EXIT_INPUT, "trial: wants --index I (>= 0) and --out DIR, "
                           "and --threads M >= 1 if given");
    al_sweep s;
    al_err e;
    if (al_sweep_load(o.file, o.sets, o.n_sets, o.plugins, o.n_plugins, &s, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return AL_EXIT_INPUT;
    }
    if (index >= s.n_trials) {
        snprintf(e.msg, sizeof e.msg, "trial: --index %ld, but %s has %d trials", index,
                 o.file, s.n_trials);
        al_sweep_free(&s);
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    }
    al_sweep_assign_ids(&s, o.out);
    const al_sweep_trial *t = &s.trials[index];
    rc = al_sweep_trial_run(&s, t, o.out, (int)threads, &e);
    if (rc == AL_EXIT_RUNTIME) fprintf(stderr, "attnlab: trial %s: %s\n", t->id, e.msg);
    else printf("trial %s: %s\n", t->id, rc == 0 ? "ok" : "diverged");
    al_sweep_free(&s);
    return rc;
}

/* ------------------------------------------------------------ report */

static const char report_help[] =
    "usage: attnlab report DIR\n"
    "\n"
    "Write DIR/report.md from DIR/summary.csv (a sweep's results): the\n"
    "configurations aggregated over seeds (mean ± sd), the Pareto front of\n"
    "quality against KV-cache bytes per token, and gnuplot plots tradeoff.png\n"
    "and curves.png (with .svg and the .gp scripts beside them).\n"
    "Set AL_GNUPLOT to use another gnuplot binary.\n";

int al_cmd_report(int argc, char **argv)
{
    al_cli_opts o;
    int rc = al_cli_parse(argc, argv, &o, "report", NULL, NULL);
    if (rc) return rc;
    if (o.help) return fputs(report_help, stdout), 0;
    al_report_stats rs;
    al_err e;
    rc = al_report_write(o.file, &rs, &e);
    if (rc) return al_cli_fail(rc == -1 ? AL_EXIT_INPUT : AL_EXIT_RUNTIME, e.msg);
    printf("report: %s/report.md: %d trials (%d ok), %d configurations, %d on the Pareto "
           "front; plots: %s\n", o.file, rs.n_trials, rs.n_ok, rs.n_configs, rs.n_front,
           rs.plots == AL_PLOTS_DRAWN ? "tradeoff.png, curves.png"
           : rs.plots == AL_PLOTS_NO_GNUPLOT ? "none (gnuplot not found)"
           : rs.plots == AL_PLOTS_FAILED ? "none (gnuplot failed, see gnuplot.log)" : "none");
    return 0;
}
