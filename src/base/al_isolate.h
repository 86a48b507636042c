/*
 * al_isolate.h - running a function of this program in a child process
 * (fork, no exec) so that a crash, an abort, a hang or an early exit inside
 * it cannot take the caller down: `attnlab check-variant` runs each check of
 * a plugin it cannot trust this way (src/model/check_variant.c).
 *
 * The child sends fixed-size records back over a pipe as it goes
 * (al_isolate_send); the caller's sink receives each one as it arrives, so
 * what the child measured before it died is kept. The child ends by telling
 * the caller it finished: a child that ends any other way (a signal, an
 * exit() from inside the function, a time limit passed) is reported as such.
 *
 * In the child: a core dump is off (a crashing plugin leaves no core file in
 * the user's directory), SIGINT and SIGTERM take their default action (the
 * caller's handler reports the interruption once), and the child is killed
 * when the caller dies. The caller's stdio buffers are flushed before the
 * fork and the child leaves with _exit, so nothing is printed twice. Call it
 * with no worker threads running (al_parallel.h's pool forgets its workers in
 * a child and starts them again when asked).
 */
#ifndef AL_ISOLATE_H
#define AL_ISOLATE_H

#include <stddef.h>

#include "al_util.h"

enum al_isolate_how {
    AL_ISOLATE_DONE = 0,    /* the function returned */
    AL_ISOLATE_SIGNAL,      /* killed by signal `code` */
    AL_ISOLATE_EXIT,        /* exited with status `code` before the function returned */
    AL_ISOLATE_TIMEOUT,     /* still running after the time limit: killed */
    AL_ISOLATE_NO_FORK,     /* fork or pipe failed (errno `code`): nothing ran */
};

typedef struct al_isolate_end {
    int how;         /* enum al_isolate_how */
    int code;        /* signal, exit status or errno, by how */
    double limit;    /* the time limit in seconds, for AL_ISOLATE_TIMEOUT */
} al_isolate_end;

/* fn(arg, fd) in a child, fd the write end of the records' pipe; records
 * of rec_size (<= AL_ISOLATE_MAX_REC) bytes go to sink(sink_arg, rec) in
 * the caller as they arrive. After limit_s seconds (> 0) the child is
 * killed (SIGKILL). Returns 0 when the function returned, -1 otherwise;
 * end says how it ended either way. */
enum { AL_ISOLATE_MAX_REC = 2048 };
typedef void (*al_isolate_fn)(void *arg, int fd);
typedef void (*al_isolate_sink)(void *sink_arg, const void *rec);
int al_isolate_run(al_isolate_fn fn, void *arg, size_t rec_size, al_isolate_sink sink,
                   void *sink_arg, double limit_s, al_isolate_end *end);

/* In the child: one record of rec_size bytes to the caller (as one atomic
 * write). fd < 0 (not isolated) sends nothing. */
void al_isolate_send(int fd, const void *rec, size_t rec_size);

/* How the child ended, one phrase: "killed by SIGSEGV (Segmentation
 * fault)", "exited with status 3 before finishing", "timed out after 2 s
 * (killed)", "not run: fork failed: ...". */
void al_isolate_describe(const al_isolate_end *end, char *buf, size_t n);

#endif
