/*
 * sweep_slurm.c - the slurm executor (al_sweep_exec.h): one job array per
 * submission, followed with squeue and scontrol, and every ending recorded
 * in the results directory as a local sweep records it.
 */
#include "al_sweep_exec.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "al_spawn.h"
#include "al_status.h"

#define TDIR_LEN (AL_PATH_LEN + AL_SWEEP_ID_LEN + 2)
#define SQUEUE_TRIES 5        /* squeue failures in a row before giving up */

/* ------------------------------------------------------------ commands */

/* Run argv (found on PATH) with standard output and error captured into
 * *out (malloc'ed, NUL-terminated). Its exit status (128 + the signal that
 * killed it); -1 with e set when it could not be started. */
static int run_cmd(const char *const *argv, char **out, al_err *e)
{
    al_spawn_opts so = {.argv = argv, .in = AL_SPAWN_NULL, .out = AL_SPAWN_CAPTURE,
                        .err = AL_SPAWN_STDOUT};
    al_proc p;
    al_err sub;
    if (al_spawn_run(&so, &p, &sub) != 0 && !p.reaped) {
        free(p.out);
        return al_errf(e, "%s", sub.msg);
    }
    *out = p.out;
    return WIFEXITED(p.wst) ? WEXITSTATUS(p.wst) : 128 + WTERMSIG(p.wst);
}

/* The first line of a command's output, for an error message. */
static const char *first_line(char *out)
{
    out[strcspn(out, "\n")] = 0;
    return out[0] ? out : "(no output)";
}

/* ------------------------------------------------------------ the record */

/* DIR/slurm.json: every submission's array tasks and the trials they ran. */
typedef struct rec_task {
    long job;
    int task, index;
    char id[AL_SWEEP_ID_LEN], hash[17];
} rec_task;

typedef struct record {
    rec_task *t;
    int n, cap;
} record;

static void record_add(record *r, rec_task t)
{
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        rec_task *nt = realloc(r->t, (size_t)r->cap * sizeof *nt);
        AL_ASSERT(nt != NULL);
        r->t = nt;
    }
    r->t[r->n++] = t;
}

static void record_path(char *buf, size_t n, const char *dir)
{
    snprintf(buf, n, "%s/slurm.json", dir);
}


static int record_task(record *r, json_t *jt, long job)
{
    json_t *task = json_object_get(jt, "task"), *index = json_object_get(jt, "index");
    const char *id = json_string_value(json_object_get(jt, "trial"));
    const char *hash = json_string_value(json_object_get(jt, "hash"));
    if (!json_is_integer(task) || !json_is_integer(index) || !id || !hash) return -1;
    rec_task t = {job, (int)json_integer_value(task), (int)json_integer_value(index), "", ""};
    snprintf(t.id, sizeof t.id, "%s", id);
    snprintf(t.hash, sizeof t.hash, "%s", hash);
    record_add(r, t);
    return 0;
}

/* An absent record is an empty one. */
static int record_load(const char *dir, record *r, al_err *e)
{
    char path[AL_PATH_LEN + 16];
    json_error_t je;
    memset(r, 0, sizeof *r);
    record_path(path, sizeof path, dir);
    if (access(path, F_OK) != 0) return 0;
    json_t *j = json_load_file(path, 0, &je), *subs = json_object_get(j, "submissions");
    int bad = !json_is_array(subs);
    size_t i, k;
    json_t *sub, *jt;
    json_array_foreach(subs, i, sub) {
        json_t *job = json_object_get(sub, "job_id"), *tasks = json_object_get(sub, "tasks");
        bad |= !json_is_integer(job) || !json_is_array(tasks);
        json_array_foreach(tasks, k, jt) bad |= record_task(r, jt, (long)json_integer_value(job));
    }
    json_decref(j);
    if (!bad) return 0;
    free(r->t);
    memset(r, 0, sizeof *r);
    return al_errf(e, "%s: not a valid Slurm submission record%s%s", path, j ? "" : ": ",
                   j ? "" : je.text);
}

int al_sweep_slurm_recorded(const char *dir, al_err *e)
{
    record r;
    char path[AL_PATH_LEN + 16];
    record_path(path, sizeof path, dir);
    if (access(path, F_OK) != 0) return 0;
    if (record_load(dir, &r, e) != 0) return -1;
    free(r.t);
    return 1;
}

static int record_save(const char *dir, const record *r, al_err *e)
{
    char path[AL_PATH_LEN + 16];
    json_t *subs = json_array(), *tasks = NULL;
    for (int i = 0; i < r->n; i++) {
        const rec_task *t = &r->t[i];
        if (i == 0 || t->job != r->t[i - 1].job) {
            tasks = json_array();
            json_array_append_new(subs, json_pack("{s:I, s:o}", "job_id", (json_int_t)t->job,
                                                  "tasks", tasks));
        }
        json_array_append_new(tasks, json_pack("{s:i, s:s, s:s, s:i}", "task", t->task,
                                               "trial", t->id, "hash", t->hash, "index",
                                               t->index));
    }
    json_t *j = json_pack("{s:s, s:o}", "executor", "slurm", "submissions", subs);
    char *text = json_dumps(j, JSON_INDENT(1));
    json_decref(j);
    record_path(path, sizeof path, dir);
    int rc = al_write_atomic(path, text, strlen(text), e);
    free(text);
    return rc;
}

/* The latest submission of the trial with this hash, or NULL. */
static const rec_task *record_latest(const record *r, const char *hash)
{
    for (int i = r->n - 1; i >= 0; i--)
        if (strcmp(r->t[i].hash, hash) == 0) return &r->t[i];
    return NULL;
}

/* ------------------------------------------------------------ squeue */

typedef struct qtask {
    long job;
    int task;
    char state[24];
} qtask;

typedef struct queue {
    qtask *q;
    int n, cap;
} queue;

/* The array tasks of the record's jobs that Slurm still lists (queued,
 * running or completing). Jobs Slurm has forgotten are simply absent. */
static int squeue_read(const record *r, queue *Q, al_err *e)
{
    char *ids = al_calloc((size_t)r->n * 24 + 1, 1), *p = ids, *out;
    for (int i = 0; i < r->n; i++)
        if (i == 0 || r->t[i].job != r->t[i - 1].job)
            p += sprintf(p, "%s%ld", p == ids ? "" : ",", r->t[i].job);
    const char *argv[] = {"squeue", "-h", "-r", "-o", "%i %T", "-j", ids, NULL};
    int rc = run_cmd(argv, &out, e);
    free(ids);
    Q->n = 0;
    if (rc < 0) return -1;
    if (rc != 0 && !strstr(out, "Invalid job id")) {
        al_errf(e, "squeue failed (exit status %d): %s", rc, first_line(out));
        free(out);
        return -1;
    }
    char *save, *line = strtok_r(out, "\n", &save);
    for (; line && rc == 0; line = strtok_r(NULL, "\n", &save)) {
        qtask q;
        if (sscanf(line, "%ld_%d %23s", &q.job, &q.task, q.state) != 3) continue;
        if (Q->n == Q->cap) {
            Q->cap = Q->cap ? 2 * Q->cap : 64;
            qtask *nq = realloc(Q->q, (size_t)Q->cap * sizeof *nq);
            AL_ASSERT(nq != NULL);
            Q->q = nq;
        }
        Q->q[Q->n++] = q;
    }
    free(out);
    return 0;
}

static const qtask *queue_find(const queue *Q, long job, int task)
{
    for (int i = 0; i < Q->n; i++)
        if (Q->q[i].job == job && Q->q[i].task == task) return &Q->q[i];
    return NULL;
}

/* ------------------------------------------------------------ endings */

/* The value of " key=" in scontrol's one-line output, into buf. */
static int field(const char *out, const char *key, char *buf, size_t n)
{
    size_t k = strlen(key);
    for (const char *p = out; (p = strstr(p, key)); p += k) {
        if (p != out && p[-1] != ' ' && p[-1] != '\n') continue;
        p += k;
        snprintf(buf, n, "%.*s", (int)strcspn(p, " \n"), p);
        return 0;
    }
    return -1;
}

/* The "*** JOB ... CANCELLED AT ... ***" line slurmstepd leaves in a
 * task's output, when there is one. */
static void stepd_line(const char *dir, long job, int task, char *buf, size_t n)
{
    char path[AL_PATH_LEN + 64], *text, *p;
    size_t len;
    al_err e;
    buf[0] = 0;
    snprintf(path, sizeof path, "%s/slurm/%ld_%d.out", dir, job, task);
    if (al_read_file(path, &text, &len, &e) != 0) return;
    if ((p = strstr(text, "*** "))) snprintf(buf, n, "%.*s", (int)strcspn(p, "\n"), p);
    free(text);
}

static int killed_state(const char *state)
{
    static const char *const killed[] = {"CANCELLED", "TIMEOUT", "PREEMPTED", "DEADLINE", NULL};
    for (int i = 0; killed[i]; i++)
        if (strncmp(state, killed[i], strlen(killed[i])) == 0) return 1;
    return 0;
}

/* A task that ended without a result: how, as far as Slurm still knows. */
static void slurm_ending(const char *dir, long job, int task, al_trial_result *r)
{
    char id[32], st[32], why[64], code[16], line[200], *out = NULL;
    al_err e;
    snprintf(id, sizeof id, "%ld_%d", job, task);
    const char *argv[] = {"scontrol", "show", "job", "-o", id, NULL};
    int rc = run_cmd(argv, &out, &e);
    stepd_line(dir, job, task, line, sizeof line);
    if (rc == 0 && field(out, "JobState=", st, sizeof st) == 0) {
        if (field(out, "Reason=", why, sizeof why)) snprintf(why, sizeof why, "?");
        if (field(out, "ExitCode=", code, sizeof code)) snprintf(code, sizeof code, "?");
        r->status = killed_state(st) ? AL_TRIAL_KILLED : AL_TRIAL_FAILED;
        snprintf(r->reason, sizeof r->reason, "slurm task %s ended %s without a result "
                 "(reason %s, exit code %s)%s%.160s", id, st, why, code, line[0] ? ": " : "",
                 line);
    } else {
        r->status = strstr(line, "CANCELLED") ? AL_TRIAL_KILLED : AL_TRIAL_FAILED;
        snprintf(r->reason, sizeof r->reason, "slurm task %s ended without a result and Slurm "
                 "no longer knows it (cancelled before it started, or its record expired)%s%.160s",
                 id, line[0] ? ": " : "", line);
    }
    free(out);
}

/* ------------------------------------------------------------ the batch script */

/* s in single quotes for bash. */
static void sh_quote(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++)
        if (*s == '\'') fputs("'\\''", f);
        else fputc(*s, f);
    fputc('\'', f);
}

typedef struct paths {
    char file[PATH_MAX], dir[PATH_MAX];
    char plugins[AL_CLI_MAX_PLUGINS][PATH_MAX];
} paths;

/* Absolute paths, as the nodes must see them. The directory also goes into
 * #SBATCH --output, which cannot quote. */
static int resolve_paths(const al_sweep *s, const al_sweep_run_opts *o, paths *P, al_err *e)
{
    if (!realpath(s->file, P->file)) return al_errf(e, "%s: %s", s->file, strerror(errno));
    if (!realpath(o->dir, P->dir)) {   /* not made yet (--dry-run) */
        char cwd[PATH_MAX];
        if (o->dir[0] != '/' && !getcwd(cwd, sizeof cwd))
            return al_errf(e, "cannot find the current directory: %s", strerror(errno));
        if (snprintf(P->dir, sizeof P->dir, "%s%s%s", o->dir[0] == '/' ? "" : cwd,
                     o->dir[0] == '/' ? "" : "/", o->dir) >= (int)sizeof P->dir)
            return al_errf(e, "%s: path too long", o->dir);
    }
    if (strpbrk(P->dir, " \t\n'\"\\%"))
        return al_errf(e, "%s: the results directory of a Slurm sweep must not contain "
                       "spaces, quotes, backslashes or '%%' (it goes into #SBATCH --output)",
                       P->dir);
    for (int i = 0; i < o->n_plugins && i < AL_CLI_MAX_PLUGINS; i++)
        if (!realpath(o->plugins[i], P->plugins[i]))
            return al_errf(e, "%s: %s", o->plugins[i], strerror(errno));
    return 0;
}

static void script_head(FILE *f, const al_sweep *s, const al_sweep_run_opts *o,
                        const al_slurm_opts *so, const paths *P, int n)
{
    fprintf(f, "#!/bin/bash\n# attnlab sweep of experiment '%s' (%s):\n# %d trial(s), one "
               "array task each, running the worker entry that local\n# sweeps use. Written "
               "and submitted by attnlab (recorded in %s/slurm.json).\n", s->name, P->file, n,
            P->dir);
    fputs("#SBATCH --job-name=attnlab-", f);
    for (const char *c = s->name; *c; c++)
        fputc(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-", *c)
                  ? *c : '_', f);
    fprintf(f, "\n#SBATCH --array=0-%d", n - 1);
    if (so->throttle > 0) fprintf(f, "%%%d", so->throttle);
    fprintf(f, "\n#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=%d\n", o->threads);
    fprintf(f, "#SBATCH --output=%s/slurm/%%A_%%a.out\n", P->dir);
}

/* The script for the trials pend[0..n): task i runs trial pend[i]. */
static void write_script(FILE *f, const al_sweep *s, const al_sweep_run_opts *o,
                         const al_slurm_opts *so, const paths *P, const int *pend, int n)
{
    script_head(f, s, o, so, P, n);
    fputs("set -eu\ntrials=(", f);
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? " " : "", s->trials[pend[i]].index);
    fputs(")\nids=(", f);
    for (int i = 0; i < n; i++) {
        if (i) fputc(' ', f);
        sh_quote(f, s->trials[pend[i]].id);
    }
    fputs(")\ntask=${SLURM_ARRAY_TASK_ID:?run this script with sbatch --array}\n", f);
    fputs("tdir=", f);
    sh_quote(f, P->dir);
    fputs("/\"${ids[$task]}\"\nmkdir -p \"$tdir\"\nexec >\"$tdir/log.txt\" 2>&1\nexec ", f);
    sh_quote(f, o->exe);
    fputs(" trial ", f);
    sh_quote(f, P->file);
    fputs(" --index \"${trials[$task]}\" --out ", f);
    sh_quote(f, P->dir);
    fprintf(f, " --threads %d --file-sha256 %s", o->threads, s->file_sha256);
    for (int i = 0; i < o->n_sets; i++) fputs(" --set ", f), sh_quote(f, o->sets[i]);
    for (int i = 0; i < o->n_plugins; i++) fputs(" --plugin ", f), sh_quote(f, P->plugins[i]);
    fputc('\n', f);
}

/* sbatch's command line, into argv (strings owned by the options). */
static void sbatch_argv(const al_slurm_opts *so, const char *script, const char **argv)
{
    int k = 0;
    argv[k++] = "sbatch";
    argv[k++] = "--parsable";
    for (int i = 0; i < so->n_args; i++) argv[k++] = so->args[i];
    argv[k++] = script;
    argv[k] = NULL;
}

/* ------------------------------------------------------------ following */

typedef struct ftask {
    long job;
    int task;
    const al_sweep_trial *t;
    char tdir[TDIR_LEN];
    int open, running, absent; /* followed; seen running; squeue polls in a row without it */
    double t0;                 /* when first seen running */
    al_trial_progress p;
    int has_p;
} ftask;

typedef struct follower {
    const al_sweep *s;
    const al_sweep_run_opts *o;
    al_sweep_run_stats *st;
    const record *rec;
    ftask *ft;
    int n, n_open, n_ended;
    queue Q;
    long steps_total, steps_closed, steps_trained;
    double poll_s, last_q;
    int squeue_failures;
    al_status disp;            /* the live display; its t0 is the run's start */
} follower;

static volatile sig_atomic_t stop_asked;

static void on_stop(int sig)
{
    (void)sig;
    stop_asked = 1;
}

/* The live block (al_status.h): one line per running task, then done,
 * failed, running, queued and the ETA. */
static void draw(void *ctx, al_status *st)
{
    const follower *F = ctx;
    long running = 0;
    int n_run = 0;
    for (int i = 0; i < F->n; i++) {
        const ftask *t = &F->ft[i];
        if (!t->open || !t->running) continue;
        char tag[48];
        snprintf(tag, sizeof tag, "[%ld_%d]", t->job, t->task);
        al_status_job j = {t->t->id, tag, t->has_p, t->p.step, t->p.steps, t->p.loss,
                           t->p.val_loss, t->p.tokens_per_s};
        al_status_job_line(st, &j);
        n_run++, running += t->has_p ? al_sweep_trial_work(t->t, t->p.step) : 0;
    }
    char title[600];
    snprintf(title, sizeof title, "sweep %s (slurm)", F->s->name);
    const al_sweep_run_stats *s = F->st;
    al_status_counts c = {title, s->skipped + s->ok + s->diverged + s->failed, F->s->n_trials,
                          s->failed, s->diverged, n_run, F->n_open - n_run, F->steps_total,
                          F->steps_closed, F->steps_trained, running, 0};
    al_status_summary(st, &c);
}

/* Progress files every quarter second: a redraw on a terminal, else a
 * status line a minute. */
static void refresh(follower *F)
{
    if (!al_status_due(&F->disp)) return;
    for (int i = 0; i < F->n; i++) {
        ftask *t = &F->ft[i];
        if (t->open && t->running && al_sweep_read_progress(t->tdir, &t->p) == 0) t->has_p = 1;
    }
    al_status_show(&F->disp);
}

/* A task has left the queue: its worker's result, or how Slurm ended it
 * (then recorded in its result.json). */
static int ending(const follower *F, const ftask *t, al_trial_result *r, al_err *e)
{
    if (al_results_read_result(t->tdir, t->t->hash, r) == 0) return 0;
    al_trial_result_init(r);
    r->steps = t->t->cfg.train.steps;
    r->steps_done = t->has_p ? t->p.step : 0;
    slurm_ending(F->o->dir, t->job, t->task, r);
    return al_results_write_result(t->tdir, t->t, r, e);
}

static int task_ended(follower *F, ftask *t, al_err *e)
{
    al_trial_result r;
    char dur[32];
    t->open = 0;
    F->n_open--;
    F->n_ended++;
    if (ending(F, t, &r, e) != 0) return -1;
    F->st->ran++;
    long eval = al_sweep_trial_eval_work(&F->s->eval, t->t);   /* done when it ended ok */
    F->steps_closed += al_sweep_trial_work(t->t, t->t->cfg.train.steps) + eval;
    F->steps_trained += al_sweep_trial_work(t->t, r.steps_done) +
                        (r.status == AL_TRIAL_OK ? eval : 0);
    al_status_duration(dur, sizeof dur, t->running ? al_now() - t->t0 : 0);
    if (r.status == AL_TRIAL_OK) {
        F->st->ok++;
        al_status_event(&F->disp, "[%d/%d] done %s: val_loss %.4f in %s", F->n_ended, F->n,
                        t->t->id, r.val_loss, dur);
    } else if (r.status == AL_TRIAL_DIVERGED) {
        F->st->diverged++;
        al_status_event(&F->disp, "[%d/%d] diverged %s: %s", F->n_ended, F->n, t->t->id,
                        r.reason);
    } else {
        F->st->failed++;
        al_status_event(&F->disp, "[%d/%d] %s %s: %s", F->n_ended, F->n,
                        al_trial_status_name(r.status), t->t->id, r.reason);
    }
    return al_results_write_summary(F->o->dir, F->s, e);
}

/* One look at the queue. A task must be missing twice in a row before it
 * counts as ended, so that a result written on shared storage just as the
 * task left is seen. */
static int poll_queue(follower *F, al_err *e)
{
    F->last_q = al_now();
    if (squeue_read(F->rec, &F->Q, e) != 0) {
        if (++F->squeue_failures < SQUEUE_TRIES) return 0;
        char why[AL_ERR_LEN / 2];
        snprintf(why, sizeof why, "%.500s", e->msg);
        return al_errf(e, "%s; gave up following after %d tries (the tasks may still run: "
                       "run the same `attnlab sweep` again to collect them)", why,
                       SQUEUE_TRIES);
    }
    F->squeue_failures = 0;
    for (int i = 0; i < F->n; i++) {
        ftask *t = &F->ft[i];
        if (!t->open) continue;
        const qtask *q = queue_find(&F->Q, t->job, t->task);
        t->absent = q ? 0 : t->absent + 1;
        if (q && !t->running && strcmp(q->state, "PENDING") != 0) {
            t->running = 1;
            t->t0 = al_now();
            al_status_event(&F->disp, "[%ld_%d] %s %s", t->job, t->task, q->state, t->t->id);
        }
        if (t->absent >= 2 && task_ended(F, t, e) != 0) return -1;
    }
    return 0;
}

static int follow(follower *F, al_err *e)
{
    struct sigaction sa = {.sa_handler = on_stop}, old_int, old_term;
    struct timespec nap = {0, 100 * 1000 * 1000};
    sigemptyset(&sa.sa_mask);
    stop_asked = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    int rc = 0;
    while (F->n_open > 0 && !stop_asked && rc == 0) {
        if (al_now() - F->last_q >= F->poll_s) rc = poll_queue(F, e);
        refresh(F);
        nanosleep(&nap, NULL);
    }
    al_status_end(&F->disp);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    F->st->interrupted = stop_asked && rc == 0;
    return rc;
}

/* ------------------------------------------------------------ collect, submit */

static void follow_task(follower *F, long job, int task, const al_sweep_trial *t)
{
    ftask *f = &F->ft[F->n++];
    memset(f, 0, sizeof *f);
    f->job = job;
    f->task = task;
    f->t = t;
    f->open = 1;
    al_results_trial_dir(f->tdir, sizeof f->tdir, F->o->dir, t);
    F->n_open++;
    F->steps_total += al_sweep_trial_work(t, t->cfg.train.steps) +
                      al_sweep_trial_eval_work(&F->s->eval, t);
}

/* A task of an earlier run that left the queue while nobody followed it
 * without a result (cancelled, say): recorded now, and submitted again. */
static int unfollowed_ending(follower *F, const rec_task *rt, const al_sweep_trial *t, al_err *e)
{
    ftask f = {.job = rt->job, .task = rt->task, .t = t};
    al_trial_result r;
    al_results_trial_dir(f.tdir, sizeof f.tdir, F->o->dir, t);
    if (ending(F, &f, &r, e) != 0) return -1;
    al_status_event(&F->disp, "%s %s in job %ld: %s", al_trial_status_name(r.status), t->id,
                    rt->job, r.reason);
    return 0;
}

/* A stage's trial can be submitted once the trial it starts from ended
 * ok (chained stages: the next wave is submitted after the last ends). */
static int upstream_ok(const follower *F, const al_sweep_trial *t)
{
    if (t->upstream < 0) return 1;
    const al_sweep_trial *u = &F->s->trials[t->upstream];
    char udir[TDIR_LEN];
    al_trial_result r;
    al_results_trial_dir(udir, sizeof udir, F->o->dir, u);
    return al_results_read_result(udir, u->hash, &r) == 0 && r.status == AL_TRIAL_OK;
}

/* Trials held back for their upstream that can go now, into pend. */
static int next_wave(follower *F, char *held, int *pend)
{
    int n = 0;
    for (int i = 0; i < F->s->n_trials; i++)
        if (held[i] && upstream_ok(F, &F->s->trials[i])) held[i] = 0, pend[n++] = i;
    return n;
}

/* Sort the sweep's trials: finished (skipped), still in Slurm (followed),
 * waiting for their upstream (held), or to submit (pend): never submitted,
 * failed, or ended in Slurm without a result (recorded now). */
static int collect(follower *F, int *pend, int *n_pend, char *held, al_err *e)
{
    const al_sweep *s = F->s;
    *n_pend = 0;
    if (F->rec->n && squeue_read(F->rec, &F->Q, e) != 0) return -1;
    for (int i = 0; i < s->n_trials; i++) {
        const al_sweep_trial *t = &s->trials[i];
        char tdir[TDIR_LEN];
        al_trial_result r;
        al_results_trial_dir(tdir, sizeof tdir, F->o->dir, t);
        int has = al_results_read_result(tdir, t->hash, &r) == 0;
        if (has && al_trial_status_final(r.status)) {
            F->st->skipped++;
            continue;
        }
        const rec_task *rt = has ? NULL : record_latest(F->rec, t->hash);
        if (rt && queue_find(&F->Q, rt->job, rt->task)) {
            follow_task(F, rt->job, rt->task, t);
            continue;
        }
        if (rt && unfollowed_ending(F, rt, t, e) != 0) return -1;
        if (upstream_ok(F, t)) pend[(*n_pend)++] = i;
        else held[i] = 1;
    }
    return 0;
}

/* The job id sbatch --parsable printed ("12" or "12;cluster"), after any
 * warnings it wrote first. */
static long parse_job_id(const char *out)
{
    long job = 0;
    for (const char *p = out; *p; p += strcspn(p, "\n"), p += *p == '\n') {
        char *end;
        long v = strtol(p, &end, 10);
        if (end != p && v > 0 && (*end == 0 || *end == '\n' || *end == ';')) job = v;
    }
    return job;
}

static int write_script_file(const char *path, const al_sweep *s, const al_sweep_run_opts *o,
                             const al_slurm_opts *so, const paths *P, const int *pend, int n,
                             al_err *e)
{
    char tmp[PATH_MAX + 128];
    FILE *f = al_open_atomic(path, tmp, sizeof tmp, e);
    if (!f) return -1;
    write_script(f, s, o, so, P, pend, n);
    fchmod(fileno(f), 0755);
    return al_commit_atomic(f, tmp, path, e);
}

/* One sbatch of the trials pend[0..n); recorded, then followed. */
static int submit(follower *F, record *rec, const al_slurm_opts *so, const int *pend, int n,
                  long *job, al_err *e)
{
    const al_sweep *s = F->s;
    paths P;
    char sdir[AL_PATH_LEN + 16], script[PATH_MAX + 64], tdir[TDIR_LEN], *out;
    snprintf(sdir, sizeof sdir, "%s/slurm", F->o->dir);
    if (al_mkdirs(sdir, e) || resolve_paths(s, F->o, &P, e)) return -1;
    for (int i = 0; i < n; i++)
        if (al_sweep_prepare_trial(s, F->o->dir, &s->trials[pend[i]], tdir, sizeof tdir, e))
            return -1;
    int jobs = 0;   /* submissions so far: this is the next */
    for (int i = 0; i < rec->n; i++) jobs += i == 0 || rec->t[i].job != rec->t[i - 1].job;
    snprintf(script, sizeof script, "%s/slurm/submit-%d.sh", P.dir, jobs + 1);
    if (write_script_file(script, s, F->o, so, &P, pend, n, e)) return -1;
    const char *argv[8 + AL_CLI_MAX_SETS];
    AL_ASSERT(so->n_args <= AL_CLI_MAX_SETS);
    sbatch_argv(so, script, argv);
    int rc = run_cmd(argv, &out, e);
    *job = rc == 0 ? parse_job_id(out) : 0;
    if (rc >= 0 && !*job) al_errf(e, "sbatch failed (exit status %d): %s", rc, first_line(out));
    if (rc >= 0) free(out);
    if (!*job) return -1;
    for (int i = 0; i < n; i++) {
        const al_sweep_trial *t = &s->trials[pend[i]];
        rec_task rt = {*job, i, t->index, "", ""};
        snprintf(rt.id, sizeof rt.id, "%s", t->id);
        snprintf(rt.hash, sizeof rt.hash, "%s", t->hash);
        record_add(rec, rt);
        follow_task(F, *job, i, t);
    }
    if (record_save(F->o->dir, rec, e) != 0) {
        char why[AL_ERR_LEN / 2];
        snprintf(why, sizeof why, "%.500s", e->msg);
        return al_errf(e, "submitted batch job %ld but could not record it (%s): scancel %ld",
                       *job, why, *job);
    }
    al_status_event(&F->disp, "submitted batch job %ld: %d trial(s) as array tasks 0-%d, %d "
                    "CPU(s) each (%s)", *job, n, n - 1, F->o->threads, script);
    return 0;
}

/* ------------------------------------------------------------ the executor */

static double poll_interval(void)
{
    const char *v = getenv("AL_SLURM_POLL_S");
    double x = v ? strtod(v, NULL) : 0;
    return x >= 0.1 ? x : 5.0;
}

/* Why the run stopped following, and how to pick it up again. */
static void left_in_slurm(follower *F, const char *why)
{
    char jobs[256] = "";
    size_t k = 0;
    long last = 0;
    for (int i = 0; i < F->n && k + 24 < sizeof jobs; i++)
        if (F->ft[i].open && F->ft[i].job != last)
            k += (size_t)snprintf(jobs + k, sizeof jobs - k, " %ld", last = F->ft[i].job);
    al_status_event(&F->disp, "%s: %d trial(s) stay queued or running in Slurm (scancel%s "
                    "cancels them); run the same `attnlab sweep` again to collect them", why,
                    F->n_open, jobs);
}

int al_sweep_slurm(const al_sweep *s, const al_sweep_run_opts *o, const al_slurm_opts *so,
                   al_sweep_run_stats *st, long *submitted, al_err *e)
{
    record rec;
    memset(st, 0, sizeof *st);
    *submitted = 0;
    if (record_load(o->dir, &rec, e) != 0) return -1;
    follower F = {.s = s, .o = o, .st = st, .rec = &rec, .poll_s = poll_interval()};
    F.ft = al_calloc((size_t)s->n_trials + 1, sizeof *F.ft);
    al_status_init(&F.disp, stderr, al_stderr_is_tty(), "sweep: ", draw, &F);
    F.last_q = F.disp.t0;
    int *pend = al_malloc(((size_t)s->n_trials + 1) * sizeof *pend), n_pend, n_held = 0;
    char *held = al_calloc((size_t)s->n_trials + 1, 1);
    int rc = collect(&F, pend, &n_pend, held, e);
    for (int i = 0; i < s->n_trials; i++) n_held += held[i];
    if (rc == 0 && F.n_open)
        al_status_event(&F.disp, "%s: following %d trial(s) of earlier submissions still in "
                        "Slurm", s->name, F.n_open);
    if (rc == 0 && n_pend) rc = submit(&F, &rec, so, pend, n_pend, submitted, e);
    if (rc == 0 && !F.n_open && !n_held)
        al_status_event(&F.disp, "%s: nothing to run: all %d trial(s) have finished", s->name,
                        s->n_trials);
    if (rc == 0 && so->no_wait && F.n_open) left_in_slurm(&F, "not waiting (--no-wait)");
    else if (rc == 0) rc = follow(&F, e);
    /* Chained stages: each wave whose upstream trials have now ended ok. */
    while (rc == 0 && !so->no_wait && !st->interrupted && (n_pend = next_wave(&F, held, pend)))
        if ((rc = submit(&F, &rec, so, pend, n_pend, submitted, e)) == 0) rc = follow(&F, e);
    n_held = 0;
    for (int i = 0; i < s->n_trials; i++) n_held += held[i];
    if (rc == 0 && n_held)
        al_status_event(&F.disp, "%d trial(s) of later stages were not submitted: they start "
                        "from a trial that has not ended ok yet%s", n_held, so->no_wait ?
                        " (run the same `attnlab sweep` again once it has)" : "");
    if (rc == 0 && st->interrupted) left_in_slurm(&F, "stopped following");
    st->wall_s = al_now() - F.disp.t0;
    if (rc == 0) rc = al_results_write_summary(o->dir, s, e);
    free(F.ft), free(F.Q.q), free(pend), free(held), free(rec.t);
    return rc;
}

int al_sweep_slurm_dry_run(const al_sweep *s, const al_sweep_run_opts *o,
                           const al_slurm_opts *so, FILE *f, al_err *e)
{
    paths P;
    if (resolve_paths(s, o, &P, e) != 0) return -1;
    int *pend = al_malloc(((size_t)s->n_trials + 1) * sizeof *pend), n = 0;
    for (int i = 0; i < s->n_trials; i++) {
        char tdir[TDIR_LEN];
        al_trial_result r;
        al_results_trial_dir(tdir, sizeof tdir, o->dir, &s->trials[i]);
        if (al_results_read_result(tdir, s->trials[i].hash, &r) != 0 ||
            !al_trial_status_final(r.status))
            pend[n++] = i;
    }
    int held = 0;   /* stages: only trials whose upstream has ended ok go now */
    follower F = {.s = s, .o = o};
    for (int i = 0, k = n; i < k; i++) {
        if (upstream_ok(&F, &s->trials[pend[i]])) pend[i - held] = pend[i];
        else held++;
    }
    n -= held;
    if (n == 0 && !held) {
        fprintf(f, "nothing to submit: all %d trial(s) have finished\n", s->n_trials);
    } else if (n > 0) {
        fputs("# would submit (nothing was submitted: --dry-run):\n#   sbatch --parsable", f);
        for (int i = 0; i < so->n_args; i++) fputc(' ', f), sh_quote(f, so->args[i]);
        fprintf(f, " %s/slurm/submit-N.sh\n# with this script:\n", P.dir);
        write_script(f, s, o, so, &P, pend, n);
    }
    if (held)
        fprintf(f, "# and later, once their upstream trials have ended ok: %d trial(s) of later "
                "stages, submitted as they become ready\n", held);
    free(pend);
    return 0;
}
