/*
 * al_guard.h - what keeps a run directory one run's: an exclusive lock
 * held for a process's life, signals that leave no temp files behind, and
 * the removal of temp files a killed process left.
 */
#ifndef AL_GUARD_H
#define AL_GUARD_H

/* The lock file every command that writes a run (train, trial, sweep)
 * holds in its directory. */
#define AL_LOCK_FILE ".lock"

/* Take an exclusive flock on DIR/.lock (created if missing) and write our
 * pid into it; the kernel releases it however the process ends, so the fd
 * is never closed. When another process holds it: -1 with e naming
 * the directory and the holder's pid ("what" says whose: "run", "sweep"). */
int al_lock_dir(const char *dir, const char *what, int *fd, al_err *e);

/* Remove DIR/NAME.tmp.DIGITS for each NAME of the NULL-terminated names
 * (every name when names is NULL): temp files of atomic writes a killed
 * process left. Call with DIR's lock held, when no writer is alive.
 * Returns how many were removed. */
int al_remove_stale_temps(const char *dir, const char *const *names);
/* The same for every NAME.tmp.PID under DIR, its subdirectories down to
 * `depth` levels included (a sweep's trial directories and their eval/),
 * whose writer PID is no longer alive: an interrupted writer's (a killed
 * trial's, an interrupted evaluation's), never a live one's. Returns how
 * many were removed. */
int al_remove_dead_temps(const char *dir, int depth);
/* Whether a file name is NAME.tmp.DIGITS for one of names (any NAME when
 * names is NULL). */
int al_is_stale_temp(const char *file, const char *const *names);

/* SIGINT and SIGTERM end the process with status 130 and 143 after
 * removing the temp file of any atomic write in progress (its target is
 * left as it was: old or new, never half) and printing one line: how to
 * resume (set with al_signals_hint; a default otherwise). SIGXFSZ is
 * ignored, so that a file past `ulimit -f` fails its write (EFBIG) and is
 * reported like a full disk. Called once, from main. */
void al_signals_install(void);
/* The one line's advice, e.g. "resume with: attnlab train --resume DIR". */
void al_signals_hint(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* al_open_atomic and al_commit_atomic register and release the temp file
 * of each write in progress, for the signal handler. */
void al_guard_tmp_begin(const char *tmp);
void al_guard_tmp_end(const char *tmp);

#endif
