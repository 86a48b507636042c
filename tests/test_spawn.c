/*
 * test_spawn.c - running another program (base/spawn.c): input fed and
 * output captured exactly, however large; each stream where it was sent;
 * a non-zero exit, a death by signal and a program that cannot start each
 * said in one line naming it; no child left behind, not even a zombie.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "al_spawn.h"
#include "al_test.h"

/* /bin/sh -c SCRIPT, stdin fed `in` (NULL: /dev/null), stdout and stderr
 * captured apart. */
static int sh(const char *script, const char *in, al_proc *p, al_err *e)
{
    const char *const argv[] = {"/bin/sh", "-c", script, NULL};
    al_spawn_opts o = {.argv = argv, .in = in ? AL_SPAWN_TEXT : AL_SPAWN_NULL, .in_text = in,
                       .out = AL_SPAWN_CAPTURE, .err = AL_SPAWN_CAPTURE};
    return al_spawn_run(&o, p, e);
}

/* This process has no child left, running or zombie. */
static int no_children(void)
{
    return waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD;
}

START_TEST(stdin_text_reaches_the_program_and_stdout_comes_back_exactly)
{
    al_proc p;
    al_err e;
    ck_assert_msg(sh("tr a-z A-Z; echo warning >&2", "hello\nworld\n", &p, &e) == 0, "%s",
                  e.msg);
    ck_assert_str_eq(p.out, "HELLO\nWORLD\n");
    ck_assert_uint_eq(p.out_n, 12);
    ck_assert_str_eq(p.err, "warning\n");
    ck_assert(p.reaped && WIFEXITED(p.wst) && WEXITSTATUS(p.wst) == 0);
    ck_assert(no_children());
    free(p.out), free(p.err);
}
END_TEST

/* More than a pipe holds in both directions at once: feeding and reading
 * must interleave, or the two processes wait on each other forever. */
START_TEST(megabytes_through_cat_neither_deadlock_nor_lose_a_byte)
{
    size_t n = 3u << 20;
    char *text = malloc(n + 1);
    for (size_t i = 0; i < n; i++) text[i] = (char)('a' + (i * 7919) % 26);
    text[n] = 0;
    al_proc p;
    al_err e;
    ck_assert_msg(sh("cat", text, &p, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(p.out_n, n);
    ck_assert(memcmp(p.out, text, n) == 0 && p.out[n] == 0);
    free(p.out), free(p.err), free(text);
}
END_TEST

/* A program that exits without reading its input: the write that finds
 * the pipe closed must not kill the caller with SIGPIPE. */
START_TEST(a_program_that_ignores_its_input_does_not_kill_the_caller)
{
    size_t n = 1u << 20;
    char *text = malloc(n + 1);
    memset(text, 'x', n);
    text[n] = 0;
    al_proc p;
    al_err e;
    ck_assert_msg(sh("echo done", text, &p, &e) == 0, "%s", e.msg);
    ck_assert_str_eq(p.out, "done\n");
    sigset_t pending;
    sigpending(&pending);
    ck_assert(!sigismember(&pending, SIGPIPE));
    free(p.out), free(p.err), free(text);
}
END_TEST

START_TEST(a_non_zero_exit_is_one_line_with_the_status)
{
    al_proc p;
    al_err e;
    ck_assert_int_eq(sh("echo partial; exit 3", NULL, &p, &e), -1);
    ck_assert_str_eq(e.msg, "'/bin/sh' exited with status 3");
    ck_assert(p.reaped && WIFEXITED(p.wst) && WEXITSTATUS(p.wst) == 3);
    ck_assert_str_eq(p.out, "partial\n");   /* kept: a caller may quote it */
    ck_assert(no_children());
    free(p.out), free(p.err);
}
END_TEST

START_TEST(a_death_by_signal_is_one_line_with_the_signal)
{
    al_proc p;
    al_err e;
    ck_assert_int_eq(sh("kill -TERM $$", NULL, &p, &e), -1);
    char want[128];
    snprintf(want, sizeof want, "'/bin/sh' was killed by signal %d (%s)", SIGTERM,
             strsignal(SIGTERM));
    ck_assert_str_eq(e.msg, want);
    ck_assert(p.reaped && WIFSIGNALED(p.wst) && WTERMSIG(p.wst) == SIGTERM);
    ck_assert(no_children());
    free(p.out), free(p.err);
}
END_TEST

/* Not found in PATH, not found at a path, and a directory it cannot
 * enter: each an error of the start naming the program, and only the
 * first two "missing". */
START_TEST(a_program_that_cannot_start_is_named_and_leaves_no_zombie)
{
    const char *const none[] = {"attnlab-no-such-program", NULL};
    const char *const path[] = {"/nonexistent/prog", "-x", NULL};
    const char *const shell[] = {"/bin/sh", "-c", "true", NULL};
    al_spawn_opts o = {.argv = none};
    al_proc p;
    al_err e;
    ck_assert_int_eq(al_spawn_start(&o, &p, &e), -1);
    ck_assert_str_eq(e.msg, "cannot run 'attnlab-no-such-program': not found in PATH");
    ck_assert(p.missing && !p.reaped && p.pid == 0 && !p.out);
    ck_assert(no_children());
    o.argv = path;
    ck_assert_int_eq(al_spawn_run(&o, &p, &e), -1);
    ck_assert_str_eq(e.msg, "cannot run '/nonexistent/prog': No such file or directory");
    ck_assert(p.missing && no_children());
    o.argv = shell;
    o.dir = "/nonexistent";
    ck_assert_int_eq(al_spawn_run(&o, &p, &e), -1);
    ck_assert_str_eq(e.msg, "cannot run '/bin/sh' in '/nonexistent': No such file or directory");
    ck_assert(!p.missing && no_children());
}
END_TEST

/* The sweep's way: an exec that fails is the child's ending, 127 with the
 * caller's line on its stderr, as a shell reports it. */
START_TEST(exec_fail_text_makes_a_failed_exec_an_exit_127)
{
    const char *const argv[] = {"/nonexistent/worker", NULL};
    al_spawn_opts o = {.argv = argv, .err = AL_SPAWN_CAPTURE,
                       .exec_fail_text = "cannot start the worker\n"};
    al_proc p;
    al_err e;
    ck_assert_msg(al_spawn_start(&o, &p, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(al_spawn_wait(&p, &e), -1);
    ck_assert(p.reaped && WIFEXITED(p.wst) && WEXITSTATUS(p.wst) == 127);
    ck_assert_str_eq(p.err, "cannot start the worker\n");
    ck_assert_str_eq(e.msg, "'/nonexistent/worker' exited with status 127");
    free(p.err);
}
END_TEST

/* A descriptor of the caller's for stdout, stderr joined to it (2>&1),
 * a directory to run in. */
START_TEST(stdout_to_a_file_with_stderr_joined_in_a_directory)
{
    char *dir = al_test_tmpdir(), path[PATH_MAX], real[PATH_MAX];
    snprintf(path, sizeof path, "%s/log", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    const char *const argv[] = {"sh", "-c", "pwd; echo oops >&2", NULL};
    al_spawn_opts o = {.argv = argv, .dir = dir, .in = AL_SPAWN_NULL, .out = AL_SPAWN_FD,
                       .out_fd = fileno(f), .err = AL_SPAWN_STDOUT};
    al_proc p;
    al_err e;
    ck_assert_msg(al_spawn_run(&o, &p, &e) == 0, "%s", e.msg);
    fclose(f);
    ck_assert(!p.out && !p.err);
    char *text, want[PATH_MAX + 16];
    size_t n;
    ck_assert_int_eq(al_read_file(path, &text, &n, &e), 0);
    ck_assert_ptr_nonnull(realpath(dir, real));
    snprintf(want, sizeof want, "%s\noops\n", real);
    ck_assert_str_eq(text, want);
    free(text), free(dir);
}
END_TEST

/* die_with_parent: a child whose caller dies is killed, not orphaned. */
START_TEST(a_child_dies_with_its_caller)
{
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    pid_t mid = fork();
    ck_assert_int_ge(mid, 0);
    if (mid == 0) {   /* the caller: spawns, reports the pid, dies */
        const char *const argv[] = {"sleep", "60", NULL};
        al_spawn_opts o = {.argv = argv, .die_with_parent = 1};
        al_proc p;
        al_err e;
        pid_t pid = al_spawn_start(&o, &p, &e) == 0 ? p.pid : -1;
        if (write(fd[1], &pid, sizeof pid) < 0) _exit(2);
        _exit(0);
    }
    close(fd[1]);
    pid_t child = -1;
    ck_assert_int_eq(read(fd[0], &child, sizeof child), (int)sizeof child);
    close(fd[0]);
    ck_assert_int_gt(child, 0);
    ck_assert_int_eq(waitpid(mid, NULL, 0), mid);
    int gone = 0;   /* no such process, or a zombie waiting for init */
    for (int i = 0; i < 500 && !gone; i++) {
        char path[64], line[256] = "";
        snprintf(path, sizeof path, "/proc/%d/stat", (int)child);
        FILE *f = fopen(path, "r");
        if (f && !fgets(line, sizeof line, f)) line[0] = 0;
        if (f) fclose(f);
        const char *close_paren = strrchr(line, ')');
        gone = !f || (close_paren && close_paren[2] == 'Z');
        if (!gone) nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    if (!gone) kill(child, SIGKILL);
    ck_assert_msg(gone, "the child outlived its caller");
}
END_TEST

Suite *spawn_suite(void)
{
    Suite *s = suite_create("spawn");
    TCase *tc = tcase_create("spawn");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, stdin_text_reaches_the_program_and_stdout_comes_back_exactly);
    tcase_add_test(tc, megabytes_through_cat_neither_deadlock_nor_lose_a_byte);
    tcase_add_test(tc, a_program_that_ignores_its_input_does_not_kill_the_caller);
    tcase_add_test(tc, a_non_zero_exit_is_one_line_with_the_status);
    tcase_add_test(tc, a_death_by_signal_is_one_line_with_the_signal);
    tcase_add_test(tc, a_program_that_cannot_start_is_named_and_leaves_no_zombie);
    tcase_add_test(tc, exec_fail_text_makes_a_failed_exec_an_exit_127);
    tcase_add_test(tc, stdout_to_a_file_with_stderr_joined_in_a_directory);
    tcase_add_test(tc, a_child_dies_with_its_caller);
    suite_add_tcase(s, tc);
    return s;
}
