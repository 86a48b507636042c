/*
 * guard.c - run-directory locks and stale temp files (the signal handling
 * of al_guard.h is in util.c, beside the atomic writes it cleans up after)
 * (al_guard.h).
 */
#include "al_util.h"
#include "al_guard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ the lock */

/* The pid the holder wrote into the lock file, or 0. */
static long holder_pid(int fd)
{
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = 0;
    return strtol(buf, NULL, 10);
}

int al_lock_dir(const char *dir, const char *what, int *fd, al_err *e)
{
    char path[AL_ERR_LEN], pid[32];
    snprintf(path, sizeof path, "%s/" AL_LOCK_FILE, dir);
    *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (*fd < 0) return al_errf(e, "%s: cannot write: %s", path, strerror(errno));
    /* a holder that is ending (a worker killed with its runner) lets go
     * within moments: wait that long before calling the directory taken */
    int held = flock(*fd, LOCK_EX | LOCK_NB) != 0;
    for (int i = 0; held && i < 40; i++) {
        usleep(50 * 1000);
        held = flock(*fd, LOCK_EX | LOCK_NB) != 0;
    }
    if (held) {
        long holder = holder_pid(*fd);
        close(*fd);
        *fd = -1;
        if (holder > 0)
            return al_errf(e, "%s: in use by another %s (attnlab pid %ld); wait for it to end "
                           "or choose another directory", dir, what, holder);
        return al_errf(e, "%s: in use by another %s; wait for it to end or choose another "
                       "directory", dir, what);
    }
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    /* the pid is advice for the message above; failing to write it is no error */
    if (ftruncate(*fd, 0) != 0 || pwrite(*fd, pid, (size_t)n, 0) != n) return 0;
    return 0;
}

/* ------------------------------------------------------------ stale temps */

int al_is_stale_temp(const char *file, const char *const *names)
{
    const char *t = strstr(file, ".tmp.");
    if (!t || !t[5]) return 0;
    for (const char *p = t + 5; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    if (!names) return 1;
    for (int i = 0; names[i]; i++)
        if (strlen(names[i]) == (size_t)(t - file) && !strncmp(file, names[i], t - file)) return 1;
    return 0;
}

/* NAME.tmp.PID whose PID no process has (ESRCH: not one we may not signal). */
static int writer_gone(const char *name)
{
    if (!al_is_stale_temp(name, NULL)) return 0;
    long pid = strtol(strstr(name, ".tmp.") + 5, NULL, 10);
    return pid <= 0 || pid > INT_MAX || (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
}

int al_remove_dead_temps(const char *dir, int depth)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d))) {
        char path[AL_ERR_LEN];
        struct stat st;
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (lstat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode) && depth > 0) n += al_remove_dead_temps(path, depth - 1);
        else if (S_ISREG(st.st_mode) && writer_gone(de->d_name)) n += unlink(path) == 0;
    }
    if (d) closedir(d);
    return n;
}

int al_remove_stale_temps(const char *dir, const char *const *names)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d))) {
        char path[AL_ERR_LEN];
        if (!al_is_stale_temp(de->d_name, names)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        n += unlink(path) == 0;
    }
    if (d) closedir(d);
    return n;
}
