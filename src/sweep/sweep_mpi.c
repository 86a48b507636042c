/*
 * sweep_mpi.c - the mpi executor: rank 0 runs the local runner with one
 * slot per rank (a launcher whose slot 0 is a worker process of its own and
 * whose slot r is rank r); rank r starts the worker for the trial it is
 * handed and sends back the worker's wait status, so that rank 0 records
 * every ending exactly as a local sweep does.
 */
#include "al_sweep_exec.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "al_mpi.h"

enum { TAG_WORK = 101, TAG_SIGNAL = 102, TAG_DONE = 103 };
enum { STOP = -1 };

/* ------------------------------------------------------------ rank 0 */

typedef struct mpi_ctx {
    const al_sweep *s;
    const al_sweep_run_opts *o;
    pid_t local;               /* slot 0's worker */
} mpi_ctx;

/* Handles are slot + 1: slot 0 runs here, slot r on rank r. */
static long mpi_start(void *ctx, int slot, const al_sweep_trial *t, al_err *e)
{
    mpi_ctx *c = ctx;
    if (slot == 0) {
        c->local = al_sweep_spawn_worker(c->s, c->o, t, e);
        return c->local > 0 ? 1 : -1;
    }
    int idx = t->index;
    al_mpi_send_ints(slot, TAG_WORK, &idx, 1);
    return slot + 1;
}

static int mpi_poll(void *ctx, long h, int *wst)
{
    mpi_ctx *c = ctx;
    int slot = (int)h - 1, msg[2];
    if (slot == 0) return waitpid(c->local, wst, WNOHANG) == c->local;
    if (!al_mpi_probe(slot, TAG_DONE)) return 0;
    al_mpi_recv_ints(slot, TAG_DONE, msg, 2);
    *wst = msg[1];
    return 1;
}

/* A rank passes the signal on to its worker and still reports the ending. */
static void mpi_signal(void *ctx, long h, int sig)
{
    mpi_ctx *c = ctx;
    int slot = (int)h - 1;
    if (slot == 0) kill(c->local, sig);
    else al_mpi_send_ints(slot, TAG_SIGNAL, &sig, 1);
}

static void mpi_where(void *ctx, long h, char *buf, size_t n)
{
    snprintf(buf, n, " on rank %ld", h - 1);
}

int al_sweep_mpi(const al_sweep *s, al_sweep_run_opts *o, al_sweep_run_stats *st, al_err *e)
{
    mpi_ctx c = {s, o, 0};
    al_sweep_launcher L = {mpi_start, mpi_poll, mpi_signal, mpi_where, &c};
    o->launcher = &L;
    o->jobs = al_mpi_size();
    int rc = al_sweep_run(s, o, st, e);
    o->launcher = NULL;
    int stop = STOP;
    for (int r = 1; r < al_mpi_size(); r++) al_mpi_send_ints(r, TAG_WORK, &stop, 1);
    return rc;
}

/* ------------------------------------------------------------ ranks > 0 */

static volatile sig_atomic_t stop_asked;

static void on_stop(int sig)
{
    (void)sig;
    stop_asked = 1;
}

/* Run one trial's worker to its end; its wait status. Signals from rank 0
 * (or to this rank) are passed on to the worker. */
static int serve_one(al_sweep *s, const al_sweep_run_opts *o, int idx)
{
    al_err e;
    /* Ids as rank 0 chose them: it wrote trial.json before handing out. */
    al_sweep_assign_ids(s, o->dir);
    pid_t pid = al_sweep_spawn_worker(s, o, &s->trials[idx], &e);
    if (pid < 0) {
        fprintf(stderr, "attnlab: rank %d: %s\n", al_mpi_rank(), e.msg);
        return 127 << 8;   /* as a shell reports a command it could not run */
    }
    struct timespec nap = {0, 50 * 1000 * 1000};
    int wst = 0, forwarded = 0;
    while (waitpid(pid, &wst, WNOHANG) != pid) {
        if (al_mpi_probe(0, TAG_SIGNAL)) {
            int sig;
            al_mpi_recv_ints(0, TAG_SIGNAL, &sig, 1);
            kill(pid, sig);
        }
        if (stop_asked && !forwarded) {
            kill(pid, SIGTERM);
            forwarded = 1;
        }
        nanosleep(&nap, NULL);
    }
    return wst;
}

int al_sweep_mpi_serve(al_sweep *s, const al_sweep_run_opts *o, al_err *e)
{
    struct sigaction sa = {.sa_handler = on_stop};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    for (;;) {
        int idx;
        al_mpi_recv_ints(0, TAG_WORK, &idx, 1);
        if (idx == STOP) {   /* a stop signal that crossed the last ending */
            while (al_mpi_probe(0, TAG_SIGNAL)) al_mpi_recv_ints(0, TAG_SIGNAL, &idx, 1);
            return 0;
        }
        if (idx < 0 || idx >= s->n_trials)
            return al_errf(e, "rank %d: rank 0 handed out trial %d of %d", al_mpi_rank(), idx,
                           s->n_trials);
        int msg[2] = {idx, serve_one(s, o, idx)};
        al_mpi_send_ints(0, TAG_DONE, msg, 2);
    }
}
