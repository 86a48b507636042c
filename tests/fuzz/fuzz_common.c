/*
 * fuzz_common.c - in-memory input files, --set lines, message checks.
 */
#include "fuzz_common.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void fz_file_open(fz_file *f, const char *name)
{
    f->fd = memfd_create(name, MFD_CLOEXEC);
    FZ_CHECK(f->fd >= 0, "memfd_create failed");
    snprintf(f->path, sizeof f->path, "/proc/self/fd/%d", f->fd);
}

void fz_file_put(fz_file *f, const void *data, size_t n)
{
    FZ_CHECK(ftruncate(f->fd, 0) == 0, "ftruncate failed");
    FZ_CHECK(n == 0 || pwrite(f->fd, data, n, 0) == (ssize_t)n, "pwrite failed");
}

int fz_sets(const uint8_t *data, size_t n, char **sets)
{
    int k = 0;
    for (size_t i = 0; i + 5 <= n && k < FZ_MAX_SETS; i++) {
        if ((i > 0 && data[i - 1] != '\n') || memcmp(data + i, "#set ", 5) != 0) continue;
        size_t b = i + 5, end = b;
        while (end < n && data[end] != '\n') end++;
        sets[k] = al_malloc(end - b + 1);
        memcpy(sets[k], data + b, end - b);
        sets[k++][end - b] = 0;   /* a NUL inside cuts it short, as argv would */
    }
    return k;
}

void fz_sets_free(char **sets, int n)
{
    for (int i = 0; i < n; i++) free(sets[i]);
}

void fz_check_message(const al_err *e)
{
    FZ_CHECK(e->msg[0] != 0, "an error without a message");
    FZ_CHECK(strchr(e->msg, '\n') == NULL && strchr(e->msg, '\r') == NULL,
             "an error message of more than one line: %s", e->msg);
}
