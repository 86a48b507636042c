/*
 * runner.c - one Check runner for every suite: `al_tests SUITE` runs one
 * suite (meson defines one test() per suite, each with its own timeout);
 * `al_tests` alone runs them all. Exit status = number of failed checks.
 *
 * The suites are listed once, in tests/meson.build (name and timeout),
 * which writes al_test_suites.h: AL_SUITES, one AL_SUITE(name) each.
 */
#include <stdio.h>
#include <string.h>

#include "al_test.h"

#include "al_test_suites.h"

#define AL_SUITE(name) Suite *name##_suite(void);
AL_SUITES
#undef AL_SUITE

static const struct {
    const char *name;
    Suite *(*make)(void);
} suites[] = {
#define AL_SUITE(name) {#name, name##_suite},
    AL_SUITES
#undef AL_SUITE
    {NULL, NULL},
};

int main(int argc, char **argv)
{
    SRunner *sr = NULL;
    for (int i = 0; suites[i].name; i++) {
        if (argc > 1 && strcmp(argv[1], suites[i].name) != 0) continue;
        if (!sr) sr = srunner_create(suites[i].make());
        else srunner_add_suite(sr, suites[i].make());
    }
    if (!sr) {
        fprintf(stderr, "al_tests: unknown suite '%s'\n", argc > 1 ? argv[1] : "");
        return 2;
    }
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    if (failed == 0) al_test_remove_tmpdirs();   /* shared fixtures' folders; kept on a failure */
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
