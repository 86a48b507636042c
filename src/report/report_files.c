/*
 * report_files.c - what the report wrote, so that the next report removes
 * what it no longer writes. A results directory outlives the report's
 * shape: a stage dropped from the file, an eval context taken out or a
 * section that no longer applies (by-position plots of passkey trials)
 * left its old plots beside the new report, which no longer links them
 * and which a reader then took for current. Every file the report opens
 * (al_report_open, and a script's pictures) is listed in DIR/.report_files;
 * the next report removes the names of the old list that it did not
 * write, and nothing else: not a name it never wrote, not a path.
 */
#include "report_files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "al_util.h"

#define MANIFEST ".report_files"

struct al_report_files {
    char **name;
    int n, cap;
};

al_report_files *al_report_files_new(void) { return al_calloc(1, sizeof(al_report_files)); }

void al_report_files_free(al_report_files *F)
{
    if (!F) return;
    for (int i = 0; i < F->n; i++) free(F->name[i]);
    free(F->name);
    free(F);
}

static int listed(const al_report_files *F, const char *name, size_t len)
{
    for (int i = 0; i < F->n; i++)
        if (strlen(F->name[i]) == len && memcmp(F->name[i], name, len) == 0) return 1;
    return 0;
}

/* One name of the directory itself: no path, not hidden, printable. */
static int plain_name(const char *s, size_t len)
{
    if (!len || len > 255 || s[0] == '.') return 0;
    for (size_t i = 0; i < len; i++)
        if (s[i] == '/' || (unsigned char)s[i] < 0x20) return 0;
    return 1;
}

/* What a report may remove: its plots, their data and scripts, and its
 * tables; never the sweep's own summary.csv, whatever a list says. */
static int removable(const char *s, size_t len)
{
    static const char *const ext[] = {".dat", ".gp", ".png", ".svg", ".csv"};
    if (!plain_name(s, len) || (len == 11 && memcmp(s, "summary.csv", 11) == 0)) return 0;
    for (size_t k = 0; k < sizeof ext / sizeof ext[0]; k++) {
        size_t m = strlen(ext[k]);
        if (len > m && memcmp(s + len - m, ext[k], m) == 0) return 1;
    }
    return 0;
}

static void add(al_report_files *F, const char *name, size_t len)
{
    if (!F || !plain_name(name, len) || listed(F, name, len)) return;
    if (F->n == F->cap) {
        F->cap = F->cap ? 2 * F->cap : 32;
        F->name = realloc(F->name, (size_t)F->cap * sizeof *F->name);
        AL_ASSERT(F->name);
    }
    F->name[F->n] = al_calloc(len + 1, 1);
    memcpy(F->name[F->n++], name, len);
}

void al_report_files_add(al_report_files *F, const char *name)
{
    size_t len = strlen(name);
    add(F, name, len);
    if (len > 3 && strcmp(name + len - 3, ".gp") == 0) {   /* what gnuplot draws from it */
        char pic[300];
        snprintf(pic, sizeof pic, "%.*s.png", (int)(len - 3), name);
        add(F, pic, strlen(pic));
        snprintf(pic, sizeof pic, "%.*s.svg", (int)(len - 3), name);
        add(F, pic, strlen(pic));
    }
}

int al_report_files_prune(const al_report_files *F, const char *dir, int *removed, al_err *e)
{
    char path[4400], tmp[4500], *old = NULL;
    size_t n = 0;
    al_err ignore;
    *removed = 0;
    snprintf(path, sizeof path, "%s/" MANIFEST, dir);
    if (al_read_file(path, &old, &n, &ignore) == 0) {
        for (char *p = old, *end = old + n; p < end;) {
            char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t len = (size_t)((nl ? nl : end) - p);
            if (removable(p, len) && !listed(F, p, len)) {
                char gone[4400];
                snprintf(gone, sizeof gone, "%s/%.*s", dir, (int)len, p);
                if (unlink(gone) == 0) (*removed)++;
                else if (errno != ENOENT)
                    fprintf(stderr, "attnlab: report: could not remove %s, which it no longer "
                            "writes: %s\n", gone, strerror(errno));
            }
            p += len + 1;
        }
        free(old);
    }
    FILE *f = al_open_atomic(path, tmp, sizeof tmp, e);
    if (!f) return -1;
    for (int i = 0; i < F->n; i++) fprintf(f, "%s\n", F->name[i]);
    return al_commit_atomic(f, tmp, path, e);
}
