/*
 * spawn.c - running another program (al_spawn.h): fork, the child's
 * streams, exec; a report pipe that tells a start that failed from one
 * that ran; feeding, capturing and reaping.
 */
#include "al_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* What the child reports through the pipe when it cannot become the
 * program (nothing, when the exec succeeded: the pipe closes on exec). */
enum { STEP_DIR = 1, STEP_EXEC = 2 };
typedef struct report {
    int step, err;
} report;

/* ------------------------------------------------------------ the child */

/* fd, moved above 2 (close-on-exec) so that placing one stream cannot
 * clobber another's source; -1 stays -1. Async-signal-safe. */
static int high(int fd)
{
    return fd >= 0 && fd <= 2 ? fcntl(fd, F_DUPFD_CLOEXEC, 3) : fd;
}

/* Where stream `target` comes from: -1 to leave it as it is. */
static int source(int how, int target, int fd, int pipe_end)
{
    if (how == AL_SPAWN_NULL)
        return high(open("/dev/null", (target ? O_WRONLY : O_RDONLY) | O_CLOEXEC));
    if (how == AL_SPAWN_FD) return high(fd);
    if (how == AL_SPAWN_TEXT || how == AL_SPAWN_CAPTURE) return high(pipe_end);
    return -1;
}

static _Noreturn void child_fail(int rep, int step)
{
    report r = {step, errno};
    if (write(rep, &r, sizeof r) < 0) _exit(127);
    _exit(step == STEP_DIR ? 126 : 127);
}

/* In the child: from here until exec nothing that takes a lock (no
 * malloc, no stdio), since another thread of the caller may have held it
 * at the fork. */
static _Noreturn void child(const al_spawn_opts *o, const int ends[3], int rep, pid_t parent)
{
    if (o->die_with_parent) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);   /* it died before the prctl */
    }
    rep = high(rep);
    int in = source(o->in, 0, o->in_fd, ends[0]);
    int out = source(o->out, 1, o->out_fd, ends[1]);
    int err = o->err == AL_SPAWN_STDOUT ? -1 : source(o->err, 2, o->err_fd, ends[2]);
    if (in >= 0) dup2(in, STDIN_FILENO);
    if (out >= 0) dup2(out, STDOUT_FILENO);
    if (o->err == AL_SPAWN_STDOUT) dup2(STDOUT_FILENO, STDERR_FILENO);
    else if (err >= 0) dup2(err, STDERR_FILENO);
    if (o->dir && chdir(o->dir) != 0) child_fail(rep, STEP_DIR);
    execvp(o->argv[0], (char *const *)o->argv);
    if (!o->exec_fail_text) child_fail(rep, STEP_EXEC);
    if (write(STDERR_FILENO, o->exec_fail_text, strlen(o->exec_fail_text)) < 0) _exit(127);
    _exit(127);
}

/* ------------------------------------------------------------ starting */

static void close_fd(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

/* The pipes the options ask for: ours[i] the caller's end, theirs[i] the
 * child's (-1 where there is none). */
static int make_pipes(const al_spawn_opts *o, int ours[3], int theirs[3])
{
    const int want[3] = {o->in == AL_SPAWN_TEXT, o->out == AL_SPAWN_CAPTURE,
                         o->err == AL_SPAWN_CAPTURE};
    for (int i = 0; i < 3; i++) {
        int fd[2];
        ours[i] = theirs[i] = -1;
        if (!want[i]) continue;
        if (pipe2(fd, O_CLOEXEC) != 0) return -1;
        ours[i] = fd[i == 0];
        theirs[i] = fd[i != 0];
    }
    return 0;
}

/* Whether the child became the program: the report pipe closes empty on
 * exec, or carries why not. */
static int read_report(int fd, report *r)
{
    ssize_t n;
    while ((n = read(fd, r, sizeof *r)) < 0 && errno == EINTR) {}
    return n == (ssize_t)sizeof *r;
}

static void reap(pid_t pid, int *wst)
{
    while (waitpid(pid, wst, 0) < 0 && errno == EINTR) {}
}

static int start_failed(al_proc *p, const al_spawn_opts *o, const report *r, al_err *e)
{
    int wst;
    reap(p->pid, &wst);
    p->pid = 0;
    close_fd(&p->fd_in), close_fd(&p->fd_out), close_fd(&p->fd_err);
    p->missing = r->step == STEP_EXEC && r->err == ENOENT;
    if (r->step == STEP_DIR)
        return al_errf(e, "cannot run '%s' in '%s': %s", p->name, o->dir, strerror(r->err));
    if (p->missing && !strchr(p->name, '/'))
        return al_errf(e, "cannot run '%s': not found in PATH", p->name);
    return al_errf(e, "cannot run '%s': %s", p->name, strerror(r->err));
}

int al_spawn_start(const al_spawn_opts *o, al_proc *p, al_err *e)
{
    AL_ASSERT(o->argv && o->argv[0]);
    AL_ASSERT(o->in != AL_SPAWN_CAPTURE && o->in != AL_SPAWN_STDOUT && o->out != AL_SPAWN_TEXT &&
              o->out != AL_SPAWN_STDOUT && o->err != AL_SPAWN_TEXT);
    memset(p, 0, sizeof *p);
    p->name = o->argv[0];
    p->in_text = o->in_text ? o->in_text : "";
    p->in_left = strlen(p->in_text);
    int theirs[3] = {-1, -1, -1}, ours[3] = {-1, -1, -1}, rep[2] = {-1, -1};
    if (make_pipes(o, ours, theirs) != 0 || pipe2(rep, O_CLOEXEC) != 0) {
        int err = errno;
        for (int i = 0; i < 3; i++) close_fd(&ours[i]), close_fd(&theirs[i]);
        close_fd(&rep[0]);
        return al_errf(e, "cannot run '%s': pipe: %s", p->name, strerror(err));
    }
    p->fd_in = ours[0], p->fd_out = ours[1], p->fd_err = ours[2];
    fflush(NULL);   /* our buffered output before anything the child writes */
    pid_t parent = getpid();
    p->pid = fork();
    if (p->pid == 0) child(o, theirs, rep[1], parent);
    int err = errno;
    for (int i = 0; i < 3; i++) close_fd(&theirs[i]);
    close_fd(&rep[1]);
    report r;
    if (p->pid < 0) {
        close_fd(&rep[0]), close_fd(&p->fd_in), close_fd(&p->fd_out), close_fd(&p->fd_err);
        p->pid = 0;
        return al_errf(e, "cannot run '%s': %s", p->name, strerror(err));
    }
    int failed = read_report(rep[0], &r);
    close_fd(&rep[0]);
    if (failed) return start_failed(p, o, &r, e);
    if (p->fd_in >= 0) fcntl(p->fd_in, F_SETFL, O_NONBLOCK);   /* never stuck feeding */
    return 0;
}

/* ------------------------------------------------------------ feeding, capturing */

/* A write to a pipe whose reader is gone fails with EPIPE instead of
 * raising SIGPIPE, which would end the caller: the signal is blocked for
 * the write and a SIGPIPE it raised is taken back. */
static ssize_t write_nosigpipe(int fd, const void *buf, size_t n)
{
    sigset_t pipe_set, old, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigpending(&pending);
    int was_pending = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    ssize_t r = write(fd, buf, n);
    int err = errno;
    if (r < 0 && err == EPIPE && !was_pending) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = err;
    return r;
}

/* More of in_text; a program that stops reading early is not an error. */
static void feed(al_proc *p)
{
    ssize_t w = write_nosigpipe(p->fd_in, p->in_text, p->in_left < 65536 ? p->in_left : 65536);
    if (w < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (w > 0) p->in_text += w, p->in_left -= (size_t)w;
    if (w < 0 || p->in_left == 0) close_fd(&p->fd_in);
}

/* Room for 4 KiB more after n bytes (and the NUL kept after the data). */
static void grow(char **buf, size_t n, size_t *cap)
{
    if (*cap - n >= 4096) return;
    *cap = *cap ? 2 * *cap : 8192;
    char *nb = realloc(*buf, *cap);
    AL_ASSERT(nb != NULL);
    *buf = nb;
    (*buf)[n] = 0;
}

/* One read into *buf; -1 on a read error, else 0 (the descriptor closed
 * at end of file). */
static int drain(int *fd, char **buf, size_t *n, size_t *cap)
{
    grow(buf, *n, cap);
    ssize_t r = read(*fd, *buf + *n, *cap - *n - 1);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) return 0;
    if (r < 0) return -1;
    if (r == 0) close_fd(fd);
    *n += (size_t)(r > 0 ? r : 0);
    (*buf)[*n] = 0;
    return 0;
}

/* Until the child has closed stdout and stderr and taken its input. */
static int pump(al_proc *p, al_err *e)
{
    size_t cap_out = 0, cap_err = 0;
    if (p->fd_out >= 0) grow(&p->out, 0, &cap_out);   /* "" at least */
    if (p->fd_err >= 0) grow(&p->err, 0, &cap_err);
    while (p->fd_in >= 0 || p->fd_out >= 0 || p->fd_err >= 0) {
        struct pollfd f[3] = {{p->fd_in, POLLOUT, 0}, {p->fd_out, POLLIN, 0},
                              {p->fd_err, POLLIN, 0}};   /* negative fds are skipped */
        if (poll(f, 3, -1) < 0) {
            if (errno == EINTR) continue;
            return al_errf(e, "waiting for '%s': %s", p->name, strerror(errno));
        }
        if (f[0].revents) feed(p);
        if ((f[1].revents && drain(&p->fd_out, &p->out, &p->out_n, &cap_out)) ||
            (f[2].revents && drain(&p->fd_err, &p->err, &p->err_n, &cap_err)))
            return al_errf(e, "reading the output of '%s': %s", p->name, strerror(errno));
    }
    return 0;
}

/* ------------------------------------------------------------ the ending */

void al_spawn_describe(int wst, char *buf, size_t n)
{
    if (WIFSIGNALED(wst))
        snprintf(buf, n, "was killed by signal %d (%s)", WTERMSIG(wst), strsignal(WTERMSIG(wst)));
    else
        snprintf(buf, n, "exited with status %d", WEXITSTATUS(wst));
}

int al_spawn_wait(al_proc *p, al_err *e)
{
    AL_ASSERT(p->pid > 0);
    al_err io;
    int bad = pump(p, &io);
    close_fd(&p->fd_in), close_fd(&p->fd_out), close_fd(&p->fd_err);   /* after an error */
    pid_t w;
    while ((w = waitpid(p->pid, &p->wst, 0)) < 0 && errno == EINTR) {}
    int err = errno;
    p->pid = 0;
    p->reaped = w > 0;
    if (bad) return al_errf(e, "%s", io.msg);
    if (!p->reaped) return al_errf(e, "waiting for '%s': %s", p->name, strerror(err));
    if (WIFEXITED(p->wst) && WEXITSTATUS(p->wst) == 0) return 0;
    char how[128];
    al_spawn_describe(p->wst, how, sizeof how);
    return al_errf(e, "'%s' %s", p->name, how);
}

int al_spawn_run(const al_spawn_opts *o, al_proc *p, al_err *e)
{
    if (al_spawn_start(o, p, e) != 0) return -1;
    return al_spawn_wait(p, e);
}
