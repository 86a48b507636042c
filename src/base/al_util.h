/*
 * al_util.h - errors, deterministic RNG, atomic file writes, timing, progress.
 *
 * Errors: a function that can fail on input (I/O, configuration, a corrupt
 * file) returns a status and writes one line into an al_err the caller owns.
 * Only main() prints and exits. Programming errors hit AL_ASSERT, which is
 * always on and names file:line.
 */
#ifndef AL_UTIL_H
#define AL_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit statuses of every command (and of the trials a sweep runs): 0
 * success, 1 a run-time failure (I/O), 2 bad input (usage, configuration,
 * a missing or corrupt file), 3 a training run diverged. */
enum { AL_EXIT_RUNTIME = 1, AL_EXIT_INPUT = 2, AL_EXIT_DIVERGED = 3 };

/* How many --set and --plugin options a command takes (and a sweep passes
 * on to the trials it runs). */
#define AL_CLI_MAX_SETS 64
#define AL_CLI_MAX_PLUGINS 16

#define AL_ERR_LEN 1024
typedef struct al_err {
    char msg[AL_ERR_LEN];
} al_err;

/* Format into e (if non-NULL); returns -1 so callers can `return al_errf(...)`.
 * The message is one line: control characters (from quoted input) become '?'. */
int al_errf(al_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define AL_ASSERT(c)                                                          \
    do {                                                                      \
        if (!(c)) al_assert_fail(#c, __FILE__, __LINE__);                     \
    } while (0)
_Noreturn void al_assert_fail(const char *what, const char *file, int line);

/* malloc/calloc that abort with a message on exhaustion (a research tool
 * cannot continue without its buffers). */
void *al_malloc(size_t n);
void *al_calloc(size_t n, size_t size);

/* ---- RNG: xoshiro256** seeded through splitmix64. Same seed, same stream. */
typedef struct al_rng {
    uint64_t s[4];
} al_rng;
void al_rng_seed(al_rng *r, uint64_t seed);
uint64_t al_rng_u64(al_rng *r);
uint64_t al_rng_below(al_rng *r, uint64_t n);   /* uniform in [0, n) */
double al_rng_uniform(al_rng *r);               /* uniform in [0, 1) */
double al_rng_normal(al_rng *r);                /* standard normal */

/* ---- Files */
/* Write data to path atomically: path.tmp.PID, fsync, rename. */
int al_write_atomic(const char *path, const void *data, size_t n, al_err *e);
/* Open path.tmp.PID for writing; al_commit_atomic fsyncs, closes and renames. */
FILE *al_open_atomic(const char *path, char *tmp, size_t tmplen, al_err *e);
int al_commit_atomic(FILE *f, const char *tmp, const char *path, al_err *e);
/* Test hook (tests/soak/kill9.sh): with AL_FAULT=POINT:SUFFIX[@N][!stop] in
 * the environment, the N-th time (default 1) this process reaches POINT
 * for a path ending in SUFFIX it kills itself with SIGKILL, or stops with
 * SIGSTOP for "!stop" (a test then kills whom it likes). The atomic writes
 * pass "write" (temp file just created), "rename" (temp file complete, not
 * yet in place) and "renamed" (in place); training passes "step" with
 * OUTDIR/step after every optimizer step. Without AL_FAULT: nothing. */
void al_fault_point(const char *point, const char *path);
/* Read a whole file; *out is malloc'ed (NUL-terminated beyond n). It
 * must be a regular file: a directory, FIFO (which would block) or device
 * is refused, naming what it is. al_read_file_max also refuses a file of
 * more than max bytes (0: no limit). */
int al_read_file(const char *path, char **out, size_t *n, al_err *e);
int al_read_file_max(const char *path, size_t max, char **out, size_t *n, al_err *e);
/* What a st_mode is, for messages: "a directory", "a FIFO", ... */
const char *al_file_kind(unsigned mode);
/* 0 when path is a regular file, else -1 with e saying what it is. */
int al_check_regular(const char *path, al_err *e);
/* An output directory that exists as something else (a file) is bad
 * input, in every command: -1 with e naming it. */
int al_check_out_dir(const char *path, al_err *e);
/* mkdir -p */
int al_mkdirs(const char *path, al_err *e);
/* The one path rule of experiment files (docs/first-run.md): path as the
 * file `from` names it. An absolute path is kept; a relative one is taken
 * against from's folder, or against the working directory when from has
 * no folder or is the command line (from "--set", NULL). The result is
 * absolute and without "." or ".." parts (the folder through realpath;
 * path itself need not exist).
 * -1 when out (n bytes) cannot hold it. */
int al_path_from(char *out, size_t n, const char *from, const char *path);
/* path (absolute, as al_path_from makes it) as seen from the folder dir:
 * "../data.txt" from DIR for DIR/../data.txt; a relative path is copied.
 * What a config written into dir holds, so that it reads back to the same
 * files wherever the tree is moved. -1 when out (n bytes) cannot hold it. */
int al_path_relative(char *out, size_t n, const char *dir, const char *path);

/* ---- Words: Levenshtein distance, for did-you-mean suggestions (99 for
 * words of 128 bytes or more). */
int al_edit_distance(const char *a, const char *b);

/* ---- Time */
double al_now(void);   /* monotonic seconds */

/* Threads: the one place `threads: 0` (and --threads 0) is resolved. A
 * request > 0 stands; 0 means every core this process may use: the
 * machine's cores shared among the ranks an MPI launch put on this node
 * (local_size), at least 1. al_threads_for uses this machine's cores and
 * the local size that MPI start-up published (1 before it, and without
 * MPI). */
int al_threads_resolve(long requested, long cores, int local_size);
int al_threads_for(long requested);
void al_threads_set_local_size(int local_size);   /* by the MPI start-up alone */
/* al_parallel_set_threads(n) (al_parallel.h), a worker that cannot start
 * an error naming `what` (the key or option that asked for n threads) and
 * the cause. 0 or -1. */
int al_parallel_start(int n, const char *what, al_err *e);

/* ---- Progress: a rewritten status line on a terminal, nothing otherwise. */
int al_stderr_is_tty(void);
void al_progress_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void al_progress_end(void);

#endif
