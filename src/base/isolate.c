/*
 * isolate.c - a function run in a child process, its records read back
 * over a pipe, its ending told apart (al_isolate.h).
 *
 * Every message on the pipe is one tag byte and rec_size bytes: 'r' a
 * record, 'd' the function returned (the rest zero). A message is at most
 * PIPE_BUF bytes, so one write() is one message whatever else happens.
 */
#include "al_isolate.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

_Static_assert(AL_ISOLATE_MAX_REC + 1 <= PIPE_BUF, "one message, one atomic write");

static void send_tagged(int fd, char tag, const void *rec, size_t n)
{
    char msg[AL_ISOLATE_MAX_REC + 1];
    msg[0] = tag;
    if (rec) memcpy(msg + 1, rec, n);
    else memset(msg + 1, 0, n);
    ssize_t w;
    do w = write(fd, msg, n + 1);
    while (w < 0 && errno == EINTR);
}

void al_isolate_send(int fd, const void *rec, size_t rec_size)
{
    if (fd >= 0) send_tagged(fd, 'r', rec, rec_size);
}

/* The child: quiet, bounded, gone with its parent; runs fn and says so. */
static _Noreturn void child(al_isolate_fn fn, void *arg, int fd, size_t rec_size)
{
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    fn(arg, fd);
    fflush(stdout);
    send_tagged(fd, 'd', NULL, rec_size);
    _exit(0);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Reads messages until the child closes the pipe or the deadline passes:
 * 1 when the 'd' message came, 0 when not, -1 on timeout. */
static int read_messages(int fd, size_t rec_size, al_isolate_sink sink, void *sink_arg,
                         double deadline)
{
    char buf[2 * (AL_ISOLATE_MAX_REC + 1)];
    size_t have = 0, msg = rec_size + 1;
    int done = 0;
    for (;;) {
        double left = deadline - now_s();
        if (left <= 0) return -1;
        struct pollfd p = {fd, POLLIN, 0};
        int k = poll(&p, 1, left > 3600 ? 3600000 : (int)(left * 1000) + 1);
        if (k < 0 && errno == EINTR) continue;
        if (k == 0) continue;   /* the deadline check above ends it */
        ssize_t n = read(fd, buf + have, sizeof buf - have);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return done;
        have += (size_t)n;
        size_t at = 0;
        for (; have - at >= msg; at += msg) {
            if (buf[at] == 'd') done = 1;
            else if (buf[at] == 'r' && sink) sink(sink_arg, buf + at + 1);
        }
        memmove(buf, buf + at, have - at);
        have -= at;
    }
}

int al_isolate_run(al_isolate_fn fn, void *arg, size_t rec_size, al_isolate_sink sink,
                   void *sink_arg, double limit_s, al_isolate_end *end)
{
    AL_ASSERT(rec_size >= 1 && rec_size <= AL_ISOLATE_MAX_REC && limit_s > 0);
    memset(end, 0, sizeof *end);
    end->limit = limit_s;
    int fds[2];
    if (pipe(fds) != 0) {
        end->how = AL_ISOLATE_NO_FORK, end->code = errno;
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        end->how = AL_ISOLATE_NO_FORK, end->code = errno;
        close(fds[0]), close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        child(fn, arg, fds[1], rec_size);
    }
    close(fds[1]);
    int done = read_messages(fds[0], rec_size, sink, sink_arg, now_s() + limit_s);
    close(fds[0]);
    if (done < 0) kill(pid, SIGKILL);
    int wst = 0;
    while (waitpid(pid, &wst, 0) < 0 && errno == EINTR) {}
    if (done < 0) end->how = AL_ISOLATE_TIMEOUT;
    else if (WIFSIGNALED(wst)) end->how = AL_ISOLATE_SIGNAL, end->code = WTERMSIG(wst);
    else if (!done || WEXITSTATUS(wst) != 0)
        end->how = AL_ISOLATE_EXIT, end->code = WIFEXITED(wst) ? WEXITSTATUS(wst) : -1;
    return end->how == AL_ISOLATE_DONE ? 0 : -1;
}

void al_isolate_describe(const al_isolate_end *end, char *buf, size_t n)
{
    const char *abbrev;
    switch (end->how) {
    case AL_ISOLATE_DONE:
        snprintf(buf, n, "finished");
        break;
    case AL_ISOLATE_SIGNAL:
        abbrev = sigabbrev_np(end->code);
        snprintf(buf, n, "killed by SIG%s (%s)", abbrev ? abbrev : "?", strsignal(end->code));
        break;
    case AL_ISOLATE_EXIT:
        snprintf(buf, n, "exited with status %d before finishing", end->code);
        break;
    case AL_ISOLATE_TIMEOUT:
        snprintf(buf, n, "timed out after %g s (killed)", end->limit);
        break;
    default:
        snprintf(buf, n, "not run: fork failed: %s", strerror(end->code));
    }
}
