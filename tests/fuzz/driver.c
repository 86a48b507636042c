/*
 * driver.c - replays inputs through a fuzz target without libFuzzer: the
 * fuzz_* meson tests run every seed and every input that once crashed
 * (tests/fuzz/regress/) in the ordinary and the sanitizer builds.
 *
 *   fuzz_NAME PATH...   each PATH a file or a directory of files (sorted);
 *                       a missing PATH is skipped. Fails when no input ran.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path)
{
    char *data;
    size_t n;
    al_err e;
    if (al_read_file(path, &data, &n, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        exit(1);
    }
    /* an exact-size copy, so that ASan sees a read past the input */
    uint8_t *copy = al_malloc(n);
    memcpy(copy, data, n);
    free(data);
    LLVMFuzzerTestOneInput(copy, n);
    free(copy);
    return 1;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int run_dir(const char *dir)
{
    struct dirent **list;
    int n = scandir(dir, &list, NULL, by_name), ran = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, list[i]->d_name);
        if (list[i]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode))
            ran += run_file(path);
        free(list[i]);
    }
    free(list);
    return ran;
}

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int ran = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) continue;
        ran += S_ISDIR(st.st_mode) ? run_dir(argv[i]) : run_file(argv[i]);
    }
    fprintf(stderr, "%s: %d inputs ran without a crash or a failed check\n", argv[0], ran);
    return ran > 0 ? 0 : 1;
}
