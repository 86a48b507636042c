/*
 * sweep_run.c - the local executor: a pool of worker processes, their
 * endings recorded, a live display; and the worker's own body.
 */
#include "al_sweep_run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "al_checkpoint.h"
#include "al_gemm.h"
#include "al_spawn.h"
#include "al_status.h"
#include "al_train.h"

#define TDIR_LEN (AL_PATH_LEN + AL_SWEEP_ID_LEN + 2)
#define STOP_GRACE_S 5.0   /* SIGTERM, then SIGKILL after this long */

/* ------------------------------------------------------------ worker */

typedef struct worker_ctx {
    char path[TDIR_LEN + 16], tmp[TDIR_LEN + 32];
    double last, last_val;
} worker_ctx;

/* The live state for the runner's display: replaced by rename so it is
 * never read half-written, but not fsync'ed: nothing trusts it. Written
 * twice a second, and at every evaluation (a new val_loss). */
static void worker_progress(void *ctx, int step, int steps, double loss, double val,
                            double tok_s)
{
    worker_ctx *w = ctx;
    double now = al_now();
    int new_val = !isnan(val) && val != w->last_val;
    if (step < steps && !new_val && now - w->last < 0.5) return;
    w->last = now;
    w->last_val = val;
    FILE *f = fopen(w->tmp, "w");
    if (!f) return;
    fprintf(f, "%d %d %.6g %.6g %.1f\n", step, steps, loss, val, tok_s);
    if (fclose(f) == 0) rename(w->tmp, w->path);
}

/* A trial dir holding a checkpoint of an unfinished run (the trial was
 * interrupted or killed after train.checkpoint_every steps). */
static int has_checkpoint(const char *tdir)
{
    char path[TDIR_LEN + 32];
    snprintf(path, sizeof path, "%s/%s", tdir, AL_TRAIN_STATE_FILE);
    return access(path, R_OK) == 0;
}

/* Train, resuming from the trial's checkpoint when there is one. A
 * checkpoint that cannot be resumed (another thread count, a run that had
 * already ended) is set aside with a note in the log: the trial starts over.
 * One whose data, plugin or attnlab changed since it started is not: the
 * trial fails saying what changed (its other trials used the old files). */
static int train_trial(const al_config *c, al_train_opts *o, al_train_result *tr, al_err *e)
{
    o->resume = has_checkpoint(o->outdir);
    if (o->resume) fprintf(stderr, "%s: resuming from the checkpoint in %s\n", o->label, o->outdir);
    if (al_train(c, o, tr, e) == 0) return 0;
    if (!o->resume) return -1;
    if (tr->resume_changed) {
        size_t len = strlen(e->msg);
        snprintf(e->msg + len, sizeof e->msg - len, " (to train this trial from the start, "
                 "remove %s/%s)", o->outdir, AL_TRAIN_STATE_FILE);
        return -1;
    }
    fprintf(stderr, "%s: cannot resume (%s); starting over\n", o->label, e->msg);
    o->resume = 0;
    return al_train(c, o, tr, e);
}

/* A stage's trial starts from its upstream trial's final checkpoint, which
 * must belong to a run that ended ok. */
static int upstream_checkpoint(const al_sweep *s, const al_sweep_trial *t, const char *dir,
                               al_config *c, al_err *e)
{
    const al_sweep_trial *u = &s->trials[t->upstream];
    char udir[TDIR_LEN];
    al_trial_result r;
    al_results_trial_dir(udir, sizeof udir, dir, u);
    if (al_results_read_result(udir, u->hash, &r) != 0 || r.status != AL_TRIAL_OK)
        return al_errf(e, "upstream trial %s has not ended ok (%s)", u->id,
                       al_trial_status_name(r.status));
    if ((size_t)snprintf(c->train.init_from, sizeof c->train.init_from, "%s/%s", udir,
                         AL_CHECKPOINT_FILE) >= sizeof c->train.init_from)
        return al_errf(e, "%s: the path is too long", udir);
    return 0;
}

int al_sweep_trial_run(const al_sweep *s, const al_sweep_trial *t, const char *dir,
                       int threads, al_err *e)
{
    char tdir[TDIR_LEN];
    al_results_trial_dir(tdir, sizeof tdir, dir, t);
    if (al_mkdirs(tdir, e) || al_results_write_trial(tdir, s, t, e)) return AL_EXIT_RUNTIME;
    al_config c = t->cfg;
    if (threads > 0) c.train.threads = threads;
    if (t->upstream >= 0 && upstream_checkpoint(s, t, dir, &c, e) != 0) {
        al_trial_result r;
        al_trial_result_init(&r);
        r.status = AL_TRIAL_FAILED;
        r.steps = c.train.steps;
        snprintf(r.reason, sizeof r.reason, "%.500s", e->msg);
        al_err we;
        if (al_results_write_result(tdir, t, &r, &we)) *e = we;
        return AL_EXIT_RUNTIME;
    }
    worker_ctx w = {.last = -1, .last_val = NAN};
    snprintf(w.path, sizeof w.path, "%s/progress", tdir);
    snprintf(w.tmp, sizeof w.tmp, "%s/progress.tmp.%ld", tdir, (long)getpid());
    al_train_opts o = {.outdir = tdir, .log_lines = 1, .label = t->id,
                       .accept_finished = 1, .on_progress = worker_progress,
                       .progress_ctx = &w};
    al_train_result tr;
    al_trial_result r;
    al_trial_result_init(&r);
    r.steps = c.train.steps;
    al_cpu_model(r.cpu_model, sizeof r.cpu_model);
    /* a bf16 trial's bits depend on oneDNN's ISA as an f32 one's on the core */
    if (strcmp(c.train.precision, "bf16") == 0)
        snprintf(r.blas_core, sizeof r.blas_core, "%s+onednn:%s", al_blas_core(), al_bf16_isa());
    else
        snprintf(r.blas_core, sizeof r.blas_core, "%s", al_blas_core());
    r.threads = al_threads_for(c.train.threads);   /* as train.c resolves it */
    if (train_trial(&c, &o, &tr, e) != 0) {
        r.status = AL_TRIAL_FAILED;
        snprintf(r.reason, sizeof r.reason, "%.500s", e->msg);
    } else {
        r.status = tr.status == AL_TRAIN_DIVERGED ? AL_TRIAL_DIVERGED : AL_TRIAL_OK;
        snprintf(r.reason, sizeof r.reason, "%s", tr.status == AL_TRAIN_DIVERGED ? tr.reason : "");
        r.steps_done = tr.steps_done;
        /* a diverged run has no final losses; its best evaluation stands */
        r.final_train_loss = r.status == AL_TRIAL_OK ? tr.final_train_loss : NAN;
        r.val_loss = r.status == AL_TRIAL_OK ? tr.val_loss : NAN;
        r.best_val_loss = tr.best_val_loss;
        r.val_accuracy = tr.val_accuracy;
        r.test_loss = r.status == AL_TRIAL_OK ? tr.test_loss : NAN;
        r.test_accuracy = r.status == AL_TRIAL_OK ? tr.test_accuracy : NAN;
        r.init_val_loss = tr.init_val_loss;
        r.tokens_per_s = tr.tokens_per_s;
        r.wall_s = tr.wall_s;
    }
    al_err we;
    if (al_results_write_result(tdir, t, &r, &we)) {
        *e = we;
        return AL_EXIT_RUNTIME;
    }
    return r.status == AL_TRIAL_OK ? 0 : r.status == AL_TRIAL_DIVERGED ? AL_EXIT_DIVERGED
                                                                     : AL_EXIT_RUNTIME;
}

int al_sweep_read_progress(const char *tdir, al_trial_progress *p)
{
    char path[TDIR_LEN + 16];
    snprintf(path, sizeof path, "%s/progress", tdir);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = fscanf(f, "%d %d %lf %lf %lf", &p->step, &p->steps, &p->loss, &p->val_loss,
                   &p->tokens_per_s);
    fclose(f);
    return n == 5 ? 0 : -1;
}

/* ------------------------------------------------------------ runner state */

typedef struct slot {
    long pid;                      /* the launcher's handle (a pid here); 0: free */
    const al_sweep_trial *t;
    int n;                         /* its number in this run, 1-based */
    double t0;
    char tdir[TDIR_LEN];
    al_trial_progress p;
    int has_p;
} slot;

typedef struct runner {
    const al_sweep *s;
    const al_sweep_run_opts *o;
    const al_sweep_launcher *L;
    al_sweep_run_stats *st;
    slot *slots;                   /* o->jobs */
    int n_running;
    int *pending, n_pending, next; /* trial indices without a final result */
    int *status;                   /* per trial: enum al_trial_status as known now */
    char *taken;                   /* per pending entry: launched, or resolved unlaunched */
    int n_left;                    /* pending entries neither launched nor resolved */
    /* work (al_sweep_trial_work, al_sweep_trial_eval_work), not steps: a
     * step's cost differs by trial, and eval runs after the last step */
    long steps_total;              /* of the pending trials */
    long steps_closed, steps_trained;   /* of those that ended: scheduled, trained */
    double stop_t;
    int stopping;
    al_status disp;                /* the live display; its t0 is the run's start */
} runner;

static volatile sig_atomic_t stop_count;

static void on_stop(int sig)
{
    (void)sig;
    stop_count++;
}

/* ------------------------------------------------------------ display */

/* The live block (al_status.h): one line per running trial, then done,
 * failed, running and the ETA. */
static void draw(void *ctx, al_status *st)
{
    const runner *R = ctx;
    long running = 0;
    for (int i = 0; i < R->o->jobs; i++) {
        const slot *sl = &R->slots[i];
        if (!sl->pid) continue;
        al_status_job j = {sl->t->id, "", sl->has_p, sl->p.step, sl->p.steps, sl->p.loss,
                           sl->p.val_loss, sl->p.tokens_per_s};
        al_status_job_line(st, &j);
        if (sl->has_p) running += al_sweep_trial_work(sl->t, sl->p.step);
    }
    char title[600];
    snprintf(title, sizeof title, "sweep %s", R->s->name);
    const al_sweep_run_stats *s = R->st;
    al_status_counts c = {title, s->skipped + s->ok + s->diverged + s->failed, R->s->n_trials,
                          s->failed, s->diverged, R->n_running, -1, R->steps_total,
                          R->steps_closed, R->steps_trained, running, R->stopping};
    al_status_summary(st, &c);
}

/* Read the workers' progress, then redraw (terminal) or log a status line
 * a minute (otherwise). */
static void refresh(runner *R)
{
    if (!al_status_due(&R->disp)) return;
    for (int i = 0; i < R->o->jobs; i++) {
        slot *sl = &R->slots[i];
        if (sl->pid && al_sweep_read_progress(sl->tdir, &sl->p) == 0) sl->has_p = 1;
    }
    al_status_show(&R->disp);
}

/* ------------------------------------------------------------ launching */

/* Leftovers of an earlier attempt that must not be mistaken for this
 * one's: its result, progress, and temp files of killed writers. */
static void clear_attempt(const char *tdir)
{
    char path[TDIR_LEN + 300];
    DIR *d = opendir(tdir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (strstr(de->d_name, ".tmp.") || strcmp(de->d_name, "result.json") == 0 ||
            strcmp(de->d_name, "progress") == 0) {
            snprintf(path, sizeof path, "%s/%s", tdir, de->d_name);
            unlink(path);
        }
    }
    if (d) closedir(d);
}

/* The worker's command line (strings owned by buf and the options). */
static void worker_argv(const al_sweep *s, const al_sweep_run_opts *o, const al_sweep_trial *t,
                        char *buf, size_t n, const char **argv)
{
    int k = 0;
    snprintf(buf, n, "%d%c%d", t->index, 0, o->threads);
    argv[k++] = o->exe;
    argv[k++] = "trial";
    argv[k++] = s->file;
    argv[k++] = "--index";
    argv[k++] = buf;
    argv[k++] = "--out";
    argv[k++] = o->dir;
    argv[k++] = "--threads";
    argv[k++] = buf + strlen(buf) + 1;
    argv[k++] = "--file-sha256";
    argv[k++] = s->file_sha256;
    for (int i = 0; i < o->n_sets; i++) argv[k++] = "--set", argv[k++] = o->sets[i];
    for (int i = 0; i < o->n_plugins; i++) argv[k++] = "--plugin", argv[k++] = o->plugins[i];
    argv[k] = NULL;
}

pid_t al_sweep_spawn_worker(const al_sweep *s, const al_sweep_run_opts *o,
                            const al_sweep_trial *t, al_err *e)
{
    char tdir[TDIR_LEN], log[TDIR_LEN + 16], nums[64];
    const char *argv[16 + 2 * (AL_CLI_MAX_SETS + AL_CLI_MAX_PLUGINS)];
    al_results_trial_dir(tdir, sizeof tdir, o->dir, t);
    snprintf(log, sizeof log, "%s/log.txt", tdir);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) return al_errf(e, "%s: cannot write: %s", log, strerror(errno));
    AL_ASSERT(o->n_sets <= AL_CLI_MAX_SETS && o->n_plugins <= AL_CLI_MAX_PLUGINS);
    worker_argv(s, o, t, nums, sizeof nums, argv);
    /* It dies with the runner; an exec that fails is the trial's ending
     * (exit status 127, this line in its log), not the runner's. */
    al_spawn_opts so = {.argv = argv, .in = AL_SPAWN_NULL, .out = AL_SPAWN_FD, .out_fd = fd,
                        .err = AL_SPAWN_STDOUT, .die_with_parent = 1,
                        .exec_fail_text = "attnlab: cannot start the trial worker\n"};
    al_proc p;
    al_err sub;
    int rc = al_spawn_start(&so, &p, &sub);
    close(fd);
    if (rc != 0) return al_errf(e, "cannot start a worker process: %s", sub.msg);
    return p.pid;
}

/* The default launcher: worker processes of this runner. */
static long local_start(void *ctx, int slot, const al_sweep_trial *t, al_err *e)
{
    const runner *R = ctx;
    return al_sweep_spawn_worker(R->s, R->o, t, e);
}

static int local_poll(void *ctx, long h, int *wst)
{
    return waitpid((pid_t)h, wst, WNOHANG) == (pid_t)h;
}

static void local_signal(void *ctx, long h, int sig) { kill((pid_t)h, sig); }

int al_sweep_prepare_trial(const al_sweep *s, const char *dir, const al_sweep_trial *t,
                           char *tdir, size_t n, al_err *e)
{
    al_results_trial_dir(tdir, n, dir, t);
    if (al_mkdirs(tdir, e)) return -1;
    clear_attempt(tdir);
    return al_results_write_trial(tdir, s, t, e);
}

static int launch(runner *R, slot *sl, const al_sweep_trial *t, al_err *e)
{
    memset(sl, 0, sizeof *sl);
    if (al_sweep_prepare_trial(R->s, R->o->dir, t, sl->tdir, sizeof sl->tdir, e)) return -1;
    long h = R->L->start(R->L->ctx, (int)(sl - R->slots), t, e);
    if (h <= 0) return -1;
    sl->pid = h;
    sl->t = t;
    sl->t0 = al_now();
    sl->n = R->next;
    R->n_running++;
    char where[64] = "";
    if (R->L->where) R->L->where(R->L->ctx, h, where, sizeof where);
    al_status_event(&R->disp, "[%d/%d] start %s%s%s", sl->n, R->n_pending, t->id, where,
                    has_checkpoint(sl->tdir) ? " (resuming from its checkpoint)" : "");
    return 0;
}

/* ------------------------------------------------------------ endings */

/* The last non-empty line of the worker's log, for a failure's reason. */
static void last_log_line(const char *tdir, char *out, size_t n)
{
    char path[TDIR_LEN + 16], *text;
    size_t len;
    al_err e;
    out[0] = 0;
    snprintf(path, sizeof path, "%s/log.txt", tdir);
    if (al_read_file(path, &text, &len, &e)) return;
    while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' '))
        text[--len] = 0;
    char *line = text + len;
    while (line > text && line[-1] != '\n' && line[-1] != '\r') line--;
    snprintf(out, n, "%s", line);
    free(text);
}

static int stopped_by_signal(int wst)
{
    return WIFEXITED(wst) &&
           (WEXITSTATUS(wst) == 128 + SIGINT || WEXITSTATUS(wst) == 128 + SIGTERM);
}

/* A worker that left no result: what ended it. */
static void classify(const runner *R, const slot *sl, int wst, al_trial_result *r)
{
    al_trial_result_init(r);
    r->steps = sl->t->cfg.train.steps;
    r->steps_done = sl->has_p ? sl->p.step : 0;
    r->wall_s = al_now() - sl->t0;
    if (R->stopping) {
        r->status = AL_TRIAL_INTERRUPTED;
        snprintf(r->reason, sizeof r->reason, "the sweep was stopped at step %d",
                 r->steps_done);
    } else if (WIFSIGNALED(wst) || stopped_by_signal(wst)) {
        /* a worker's own handler (al_guard.h) exits 128 + the signal */
        int sig = WIFSIGNALED(wst) ? WTERMSIG(wst) : WEXITSTATUS(wst) - 128;
        int asked = sig == SIGKILL || sig == SIGTERM || sig == SIGINT || sig == SIGHUP;
        r->status = asked ? AL_TRIAL_KILLED : AL_TRIAL_FAILED;
        snprintf(r->reason, sizeof r->reason, "%s by signal %d (%s) at step %d",
                 asked ? "killed" : "crashed", sig, strsignal(sig), r->steps_done);
    } else {
        char line[300];
        last_log_line(sl->tdir, line, sizeof line);
        r->status = AL_TRIAL_FAILED;
        snprintf(r->reason, sizeof r->reason, "exit status %d%s%s", WEXITSTATUS(wst),
                 line[0] ? ": " : " without a result", line);
    }
}

static void count_ending(runner *R, const slot *sl, const al_trial_result *r)
{
    char dur[32];
    al_status_duration(dur, sizeof dur, al_now() - sl->t0);
    R->st->ran++;
    if (r->status == AL_TRIAL_INTERRUPTED) {
        al_status_event(&R->disp, "[%d/%d] interrupted %s", sl->n, R->n_pending, sl->t->id);
        return;
    }
    long eval = al_sweep_trial_eval_work(&R->s->eval, sl->t);   /* done when it ended ok */
    R->steps_closed += al_sweep_trial_work(sl->t, sl->t->cfg.train.steps) + eval;
    R->steps_trained += al_sweep_trial_work(sl->t, r->steps_done) +
                        (r->status == AL_TRIAL_OK ? eval : 0);
    if (r->status == AL_TRIAL_OK) {
        R->st->ok++;
        al_status_event(&R->disp, "[%d/%d] done %s: val_loss %.4f in %s", sl->n, R->n_pending,
                        sl->t->id, r->val_loss, dur);
    } else if (r->status == AL_TRIAL_DIVERGED) {
        R->st->diverged++;
        al_status_event(&R->disp, "[%d/%d] diverged %s: %s", sl->n, R->n_pending, sl->t->id,
                        r->reason);
    } else {
        R->st->failed++;
        al_status_event(&R->disp, "[%d/%d] %s %s: %s", sl->n, R->n_pending,
                        al_trial_status_name(r->status), sl->t->id, r->reason);
    }
}

/* A worker exited: keep its own result, else record how it ended; then
 * the summary. */
static int finish(runner *R, slot *sl, int wst, al_err *e)
{
    al_trial_result r;
    int rc = 0;
    R->n_running--;
    if (al_results_read_result(sl->tdir, sl->t->hash, &r) != 0) {
        classify(R, sl, wst, &r);
        rc = al_results_write_result(sl->tdir, sl->t, &r, e);
    }
    sl->pid = 0;
    R->status[sl->t->index] = r.status;
    count_ending(R, sl, &r);
    if (rc == 0) rc = al_results_write_summary(R->o->dir, R->s, e);
    return rc;
}

static int reap(runner *R, al_err *e)
{
    int rc = 0;
    for (int i = 0; i < R->o->jobs; i++) {
        slot *sl = &R->slots[i];
        int wst;
        if (!sl->pid) continue;
        if (R->L->poll(R->L->ctx, sl->pid, &wst) && finish(R, sl, wst, rc ? NULL : e) && !rc)
            rc = -1;
    }
    return rc;
}

/* ------------------------------------------------------------ the loop */

static void signal_workers(runner *R, int sig)
{
    for (int i = 0; i < R->o->jobs; i++)
        if (R->slots[i].pid) R->L->signal(R->L->ctx, R->slots[i].pid, sig);
}

static void begin_stop(runner *R, const char *why)
{
    R->stopping = 1;
    R->stop_t = al_now();
    if (why) al_status_event(&R->disp, "%s: stopping %d running trial(s)", why, R->n_running);
    signal_workers(R, SIGTERM);
}

static void find_pending(runner *R)
{
    const al_sweep *s = R->s;
    R->pending = al_malloc((size_t)(s->n_trials + 1) * sizeof *R->pending);
    R->status = al_calloc((size_t)s->n_trials + 1, sizeof *R->status);
    R->taken = al_calloc((size_t)s->n_trials + 1, 1);
    for (int i = 0; i < s->n_trials; i++) {
        char tdir[TDIR_LEN];
        al_trial_result r;
        al_results_trial_dir(tdir, sizeof tdir, R->o->dir, &s->trials[i]);
        if (al_results_read_result(tdir, s->trials[i].hash, &r) == 0 &&
            al_trial_status_final(r.status)) {
            R->status[i] = r.status;
            R->st->skipped++;
            continue;
        }
        R->pending[R->n_pending++] = i;
        R->steps_total += al_sweep_trial_work(&s->trials[i], s->trials[i].cfg.train.steps) +
                          al_sweep_trial_eval_work(&s->eval, &s->trials[i]);
    }
    R->n_left = R->n_pending;
}

/* A stage's trial whose upstream ended other than ok cannot run: record
 * why, as a failure (so a later run tries again once the upstream has). */
static int resolve_blocked(runner *R, int k, al_err *e)
{
    const al_sweep_trial *t = &R->s->trials[R->pending[k]], *u = &R->s->trials[t->upstream];
    char tdir[TDIR_LEN];
    al_trial_result r;
    al_trial_result_init(&r);
    r.status = AL_TRIAL_FAILED;
    r.steps = t->cfg.train.steps;
    snprintf(r.reason, sizeof r.reason, "upstream trial %s ended %s", u->id,
             al_trial_status_name(R->status[u->index]));
    R->taken[k] = 1, R->n_left--;
    R->status[t->index] = AL_TRIAL_FAILED;
    R->st->failed++;
    R->steps_closed += al_sweep_trial_work(t, t->cfg.train.steps) +
                       al_sweep_trial_eval_work(&R->s->eval, t);
    al_status_event(&R->disp, "not started %s: %s", t->id, r.reason);
    if (al_sweep_prepare_trial(R->s, R->o->dir, t, tdir, sizeof tdir, e) ||
        al_results_write_result(tdir, t, &r, e))
        return -1;
    return al_results_write_summary(R->o->dir, R->s, e);
}

/* The first pending trial that can start now (its upstream, if any, ended
 * ok), in file order; -1 when none can yet. Trials whose upstream ended
 * otherwise are resolved on the way. */
static int next_ready(runner *R, al_err *e, int *rc)
{
    for (int k = 0; k < R->n_pending; k++) {
        if (R->taken[k]) continue;
        const al_sweep_trial *t = &R->s->trials[R->pending[k]];
        int up = t->upstream < 0 ? AL_TRIAL_OK : R->status[t->upstream];
        if (up == AL_TRIAL_OK) return R->taken[k] = 1, R->n_left--, k;
        if (up != AL_TRIAL_NONE && resolve_blocked(R, k, e) && !*rc) *rc = -1;
    }
    return -1;
}

static int run_loop(runner *R, al_err *e)
{
    int rc = 0;
    struct timespec nap = {0, 50 * 1000 * 1000};
    while (R->n_running > 0 || (!R->stopping && R->n_left > 0)) {
        if (stop_count && !R->stopping) begin_stop(R, "interrupted");
        if (stop_count > 1 || (R->stopping && al_now() - R->stop_t > STOP_GRACE_S))
            signal_workers(R, SIGKILL);
        for (int i = 0; i < R->o->jobs && !R->stopping && R->n_left > 0; i++) {
            if (R->slots[i].pid) continue;
            int k = next_ready(R, rc ? NULL : e, &rc);
            if (rc && !R->stopping) begin_stop(R, NULL);
            if (k < 0) break;
            R->next++;
            if (launch(R, &R->slots[i], &R->s->trials[R->pending[k]], e))
                rc = -1, begin_stop(R, NULL);
        }
        if (reap(R, rc ? NULL : e) && !rc) rc = -1, begin_stop(R, NULL);
        refresh(R);
        nanosleep(&nap, NULL);
    }
    return rc;
}

int al_sweep_run(const al_sweep *s, const al_sweep_run_opts *o, al_sweep_run_stats *st,
                 al_err *e)
{
    AL_ASSERT(o->jobs >= 1 && o->threads >= 1);
    runner R = {.s = s, .o = o, .st = st};
    al_sweep_launcher local = {local_start, local_poll, local_signal, NULL, &R};
    R.L = o->launcher ? o->launcher : &local;
    memset(st, 0, sizeof *st);
    R.slots = al_calloc((size_t)o->jobs, sizeof *R.slots);
    al_status_init(&R.disp, stderr, al_stderr_is_tty(), "sweep: ", draw, &R);
    find_pending(&R);
    struct sigaction sa = {.sa_handler = on_stop}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    stop_count = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    if (R.n_pending)
        al_status_event(&R.disp, "%s: %d trial(s) to run, %d finished before; %d at a time, %d "
                        "thread(s) each", s->name, R.n_pending, st->skipped, o->jobs, o->threads);
    int rc = run_loop(&R, e);
    al_status_end(&R.disp);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    st->interrupted = R.stopping && rc == 0;
    st->wall_s = al_now() - R.disp.t0;
    free(R.slots);
    free(R.pending);
    free(R.status);
    free(R.taken);
    if (rc == 0) rc = al_results_write_summary(o->dir, s, e);
    return rc;
}
