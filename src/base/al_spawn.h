/*
 * al_spawn.h - running another program: the one place attnlab forks and
 * executes (gnuplot, Debian's `bible`, Slurm's commands, sweep workers).
 *
 * The program is an argv, never a shell line: argv[0] is looked up in PATH
 * unless it holds a '/'. Each standard stream is inherited, /dev/null, a
 * descriptor of the caller's, a pipe (text fed to stdin; stdout or stderr
 * captured into a buffer), or for stderr the same as stdout (2>&1). A
 * program that cannot be started (not found, not executable, a directory
 * it cannot enter) is an error of al_spawn_start naming it, and the child
 * is reaped there; ending with a non-zero status or by a signal is an
 * error of al_spawn_wait, said in one line.
 *
 * The child stays in the caller's process group, so a Ctrl-C at the
 * terminal reaches both, and takes the caller's signal mask and ignored
 * signals as exec leaves them. Safe to call from a program with threads:
 * between fork and exec the child takes no lock another thread may hold
 * (no malloc, no stdio; descriptors, prctl, chdir, exec, write, _exit).
 */
#ifndef AL_SPAWN_H
#define AL_SPAWN_H

#include <stddef.h>
#include <sys/types.h>

#include "al_util.h"

enum al_spawn_io {
    AL_SPAWN_INHERIT = 0,  /* the caller's own stream */
    AL_SPAWN_NULL,         /* /dev/null */
    AL_SPAWN_FD,           /* the caller's descriptor in_fd/out_fd/err_fd (left open) */
    AL_SPAWN_TEXT,         /* stdin only: the string in_text, then end of file */
    AL_SPAWN_CAPTURE,      /* stdout, stderr: into al_proc's out, err */
    AL_SPAWN_STDOUT,       /* stderr only: wherever stdout goes (2>&1) */
};

typedef struct al_spawn_opts {
    const char *const *argv;   /* NULL-terminated */
    const char *dir;           /* run there (NULL: here) */
    int in, out, err;          /* enum al_spawn_io each */
    int in_fd, out_fd, err_fd; /* for AL_SPAWN_FD */
    const char *in_text;       /* for AL_SPAWN_TEXT */
    int die_with_parent;       /* SIGKILL when the caller dies (PR_SET_PDEATHSIG);
                                  when it died before the exec, the child exits 127 */
    /* Non-NULL: a program that cannot be executed is not an error of the
     * start: the child writes this text to its stderr and exits 127, as a
     * shell does (a sweep records that as the trial's ending). */
    const char *exec_fail_text;
} al_spawn_opts;

typedef struct al_proc {
    pid_t pid;                 /* > 0 while it runs unreaped */
    const char *name;          /* argv[0], for messages */
    int missing;               /* start failed: the program was not found (ENOENT) */
    int reaped;                /* wst holds its wait status */
    int wst;
    char *out, *err;           /* captured (malloc'ed, NUL-terminated), NULL when not
                                  captured: the caller frees them, whatever happened */
    size_t out_n, err_n;
    /* private */
    int fd_in, fd_out, fd_err;
    const char *in_text;
    size_t in_left;
} al_proc;

/* Start the program. 0 with p->pid set, or -1 with e naming the program
 * and why (p->missing when it was not found); then nothing is left
 * running and nothing needs freeing. */
int al_spawn_start(const al_spawn_opts *o, al_proc *p, al_err *e);
/* Feed stdin, collect the captures, reap. 0 when the program exited 0,
 * else -1 with e: "'PROG' exited with status N", "'PROG' was killed by
 * signal N (NAME)", or a failed read; p->reaped and p->wst tell which. */
int al_spawn_wait(al_proc *p, al_err *e);
/* al_spawn_start, then al_spawn_wait. */
int al_spawn_run(const al_spawn_opts *o, al_proc *p, al_err *e);
/* "exited with status N" or "killed by signal N (NAME)" for a wait status. */
void al_spawn_describe(int wst, char *buf, size_t n);

#endif
