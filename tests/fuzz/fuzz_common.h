/*
 * fuzz_common.h - what the fuzz targets share (tests/fuzz/README.md).
 *
 * Each target is one file defining LLVMFuzzerTestOneInput. Built with
 * -Dfuzz=enabled it links libFuzzer; otherwise driver.c replays files and
 * directories through it (the fuzz_* meson tests: seed corpus and every
 * input that once crashed).
 */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "al_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A property of the code under test failed: print and abort, so that
 * libFuzzer keeps the input as a crash. */
#define FZ_CHECK(cond, ...)                                                   \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "fuzz: %s:%d: check '%s' failed: ", __FILE__,     \
                    __LINE__, #cond);                                         \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
            abort();                                                          \
        }                                                                     \
    } while (0)

/* An in-memory file (memfd) reachable by path, so that the code under test
 * opens and reads the input exactly as it would a file on disk. */
typedef struct fz_file {
    int fd;
    char path[64];   /* /proc/self/fd/N */
} fz_file;

void fz_file_open(fz_file *f, const char *name);
void fz_file_put(fz_file *f, const void *data, size_t n);

/* --set assignments carried by the input: every line that starts with
 * "#set " (a YAML comment, so a seed stays a valid experiment file) gives
 * one, the rest of the line. At most FZ_MAX_SETS; free with fz_sets_free. */
#define FZ_MAX_SETS 8
int fz_sets(const uint8_t *data, size_t n, char **sets);
void fz_sets_free(char **sets, int n);

/* An error message is one non-empty line. */
void fz_check_message(const al_err *e);

#endif
