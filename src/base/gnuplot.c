/*
 * gnuplot.c - gnuplot as a child process (al_gnuplot.h).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "al_gnuplot.h"
#include "al_spawn.h"

#define PATH_LEN 4400

int al_gnuplot_run(const char *dir, const char *base)
{
    const char *prog = getenv("AL_GNUPLOT") ? getenv("AL_GNUPLOT") : "gnuplot";
    char defs[512], script[256], log[PATH_LEN];
    long tag = (long)getpid();
    snprintf(defs, sizeof defs, "out_png='%s.png.tmp.%ld'; out_svg='%s.svg.tmp.%ld'", base, tag,
             base, tag);
    snprintf(script, sizeof script, "%s.gp", base);
    snprintf(log, sizeof log, "%s/gnuplot.log", dir);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    const char *argv[] = {prog, "-e", defs, script, NULL};
    al_spawn_opts so = {.argv = argv, .dir = dir};   /* messages to the log when it opens */
    if (fd >= 0) so.out = AL_SPAWN_FD, so.out_fd = fd, so.err = AL_SPAWN_STDOUT;
    al_proc p;
    al_err e;
    al_spawn_run(&so, &p, &e);
    if (fd >= 0) close(fd);
    int st = p.wst;
    if (p.missing || (p.reaped && WIFEXITED(st) && WEXITSTATUS(st) == 127))
        return AL_GNUPLOT_MISSING;
    if (!p.reaped) return AL_GNUPLOT_FAILED;
    int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    for (int i = 0; i < 2; i++) {   /* both pictures, or neither */
        char from[PATH_LEN + 64], to[PATH_LEN + 64];
        const char *ext = i ? "svg" : "png";
        snprintf(from, sizeof from, "%s/%s.%s.tmp.%ld", dir, base, ext, tag);
        snprintf(to, sizeof to, "%s/%s.%s", dir, base, ext);
        if (!ok || rename(from, to) != 0) ok = 0, unlink(from);
    }
    return ok ? AL_GNUPLOT_DRAWN : AL_GNUPLOT_FAILED;
}
