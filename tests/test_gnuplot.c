/*
 * test_gnuplot.c - running gnuplot (src/base/gnuplot.c): a good script leaves
 * both pictures, a failing one leaves neither (nor a temporary file) and
 * its message in gnuplot.log, a missing program is told apart from a
 * failure.
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "al_gnuplot.h"
#include "al_test.h"
#include "al_util.h"

static const char script[] =
    "if (!exists(\"out_png\")) out_png = \"p.png\"\n"
    "if (!exists(\"out_svg\")) out_svg = \"p.svg\"\n"
    "set terminal pngcairo size 200,100\nset output out_png\nplot x\n"
    "set terminal svg size 200,100\nset output out_svg\n%s\nunset output\n";

static int exists(const char *dir, const char *name)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static int files_in(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

static char *write_script(const char *dir, const char *last)
{
    char text[1024];
    snprintf(text, sizeof text, script, last);
    return al_test_write(dir, "p.gp", text);
}

START_TEST(a_good_script_draws_both_pictures_a_bad_one_neither)
{
    char *dir = al_test_tmpdir(), *out;
    if (al_test_run("gnuplot --version", &out) != 0) {
        fprintf(stderr, "gnuplot: not installed; drawing not checked\n");
        free(out), free(dir);
        return;
    }
    free(out);
    free(write_script(dir, "plot x**2"));
    ck_assert_int_eq(al_gnuplot_run(dir, "p"), AL_GNUPLOT_DRAWN);
    ck_assert(exists(dir, "p.png") && exists(dir, "p.svg"));
    char path[4400];
    const char *const drawn[] = {"p.png", "p.svg", "gnuplot.log"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, drawn[i]);
        unlink(path);
    }
    free(write_script(dir, "plot no_such_function(x)"));   /* fails after the PNG */
    ck_assert_int_eq(al_gnuplot_run(dir, "p"), AL_GNUPLOT_FAILED);
    ck_assert(!exists(dir, "p.png") && !exists(dir, "p.svg"));
    ck_assert_int_eq(files_in(dir), 2);   /* p.gp and gnuplot.log, no temporary left */
    char *log;
    size_t n;
    al_err e;
    snprintf(path, sizeof path, "%s/gnuplot.log", dir);
    ck_assert_int_eq(al_read_file(path, &log, &n, &e), 0);
    ck_assert_msg(strstr(log, "no_such_function"), "%s", log);
    free(log), free(dir);
}
END_TEST

START_TEST(a_missing_program_is_not_a_failure)
{
    char *dir = al_test_tmpdir();
    free(write_script(dir, "plot x"));
    setenv("AL_GNUPLOT", "/nonexistent/gnuplot", 1);
    int rc = al_gnuplot_run(dir, "p");
    unsetenv("AL_GNUPLOT");
    ck_assert_int_eq(rc, AL_GNUPLOT_MISSING);
    ck_assert(!exists(dir, "p.png"));
    free(dir);
}
END_TEST

Suite *gnuplot_suite(void)
{
    Suite *s = suite_create("gnuplot");
    TCase *tc = tcase_create("gnuplot");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_good_script_draws_both_pictures_a_bad_one_neither);
    tcase_add_test(tc, a_missing_program_is_not_a_failure);
    suite_add_tcase(s, tc);
    return s;
}
