/*
 * al_test.h - shared test helpers (tests/support/support.c). A suite
 * covers a module or a command (tests/test_NAME.c exports NAME_suite());
 * some modules are covered through another's suite (csv through
 * sweep_stage, sha256 through data and bad_inputs), so there is no suite
 * per source file. The
 * suites are listed once, in tests/meson.build.
 */
#ifndef AL_TEST_H
#define AL_TEST_H

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "al_csv.h"

/* A real English text in the repository: Genesis from the KJV (public
 * domain; Debian's bible-kjv, verse numbers removed), 197 KB. */
const char *al_test_corpus(void);
/* Directory of the source tree (for experiments/, scripts/). */
const char *al_test_srcdir(void);
/* Path of the built attnlab binary. */
const char *al_test_binary(void);
/* A fresh temporary directory (mkdtemp); the caller may leave it. */
char *al_test_tmpdir(void);
/* Every test case removes the folders its tests made with al_test_tmpdir
 * when a test passes, and keeps them (their paths on stderr) when it
 * fails: tcase_create below adds the checked teardown that does it (Check
 * runs it in the test's process only after the test passed). */
TCase *al_test_tcase_create(const char *name);
/* The folders the calling process made (the runner calls it for shared
 * fixtures' folders when every test passed). */
void al_test_remove_tmpdirs(void);
#define tcase_create(name) al_test_tcase_create(name)
/* Write text to a file in dir; returns the malloc'ed path. */
char *al_test_write(const char *dir, const char *name, const char *text);
/* dir/data.txt: words drawn from words[0..n_words) by a 64-bit LCG seeded
 * with seed, appended until the text reaches size - 10 bytes; returns the
 * malloc'ed path. Text with some structure, so tiny models learn
 * something and losses differ between configurations. */
char *al_test_write_words(const char *dir, const char *const *words, int n_words, size_t size,
                          uint64_t seed);
/* Run `attnlab ARGS` (ARGS as shell words), capturing stdout+stderr into
 * *out; returns the exit status (or -1). */
int al_test_attnlab(const char *args, char **out);
/* The same with the arguments formatted as printf formats them. */
int al_test_attnlabf(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 1 when path exists (any kind of file). */
int al_test_exists(const char *path);
/* Reads a CSV file into t, or fails the test with the reader's error. */
void al_test_read_csv(const char *path, al_csv *t);
/* Run a shell command, capture stdout+stderr into *out (malloc'ed); returns
 * the exit status (or -1). */
int al_test_run(const char *cmd, char **out);

/* A float's bits and back (for exact comparisons and hand-made values). */
static inline uint32_t al_test_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float al_test_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Environment assignments for running attnlab under Open MPI's mpirun in
 * tests (loopback, shared memory, as root, oversubscribed; ASan settings).
 */
const char *al_test_mpi_env(int leak_check);

#endif
