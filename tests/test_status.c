/*
 * test_status.c - the live status of background jobs (base/status.c): the
 * lines for a given state, the block redrawn in place on a terminal, and
 * only plain lines (events, a summary a minute) when not on one.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "al_status.h"
#include "al_test.h"

/* ------------------------------------------------------------ texts */

START_TEST(durations_read_as_seconds_minutes_or_hours)
{
    const struct {
        double s;
        const char *want;
    } cases[] = {{0, "0s"}, {42, "42s"}, {89.4, "89s"}, {185, "3m05s"}, {5399, "89m59s"},
                 {7800, "2h10m"}, {-1, "?"}, {NAN, "?"}, {INFINITY, "?"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[32];
        al_status_duration(buf, sizeof buf, cases[i].s);
        ck_assert_msg(strcmp(buf, cases[i].want) == 0, "%g: %s, not %s", cases[i].s, buf,
                      cases[i].want);
    }
}
END_TEST

START_TEST(a_job_line_shows_progress_or_starting_and_its_tag)
{
    char buf[256];
    al_status_job j = {"mha_seed1", "", 1, 120, 400, 2.345678, NAN, 15321.4};
    al_status_job_text(&j, buf, sizeof buf);
    ck_assert_str_eq(buf, "  mha_seed1                  120/400   loss 2.346   val -       "
                          " 15321 tok/s");
    j.val_loss = 2.5;
    j.tag = "[12_3]";
    al_status_job_text(&j, buf, sizeof buf);
    ck_assert_str_eq(buf, "  mha_seed1                  120/400   loss 2.346   val 2.5     "
                          " 15321 tok/s  [12_3]");
    j.known = 0;
    al_status_job_text(&j, buf, sizeof buf);
    ck_assert_str_eq(buf, "  mha_seed1                    starting  [12_3]");
    j.tag = NULL;
    al_status_job_text(&j, buf, sizeof buf);
    ck_assert_str_eq(buf, "  mha_seed1                    starting");
}
END_TEST

/* 700 steps left at 300 steps a minute: 2m20s. */
START_TEST(the_summary_counts_and_estimates_from_the_steps_trained)
{
    char buf[256];
    al_status_counts c = {"sweep demo", 3, 10, 1, 0, 2, -1, 1000, 200, 200, 100, 0};
    al_status_summary_text(&c, 60, buf, sizeof buf);
    ck_assert_str_eq(buf, "sweep demo: 3/10 done, 1 failed, 0 diverged, 2 running | 60s | "
                          "ETA 2m20s");
    c.title = "sweep demo (slurm)";
    c.queued = 4;
    c.stopping = 1;
    al_status_summary_text(&c, 60, buf, sizeof buf);
    ck_assert_str_eq(buf, "sweep demo (slurm): 3/10 done, 1 failed, 0 diverged, 2 running, 4 "
                          "queued | 60s | ETA 2m20s | stopping");
    c.steps_trained = c.steps_running = 0;   /* nothing trained yet: no estimate */
    c.queued = -1, c.stopping = 0;
    al_status_summary_text(&c, 5, buf, sizeof buf);
    ck_assert_str_eq(buf, "sweep demo (slurm): 3/10 done, 1 failed, 0 diverged, 2 running | "
                          "5s | ETA ?");
}
END_TEST

/* ------------------------------------------------------------ the block */

typedef struct shown {
    int n_jobs;
    const char *name;
} shown;

static void draw(void *ctx, al_status *st)
{
    const shown *s = ctx;
    for (int i = 0; i < s->n_jobs; i++) {
        al_status_job j = {s->name, "", 0, 0, 0, NAN, NAN, 0};
        al_status_job_line(st, &j);
    }
    al_status_counts c = {"sweep t", 0, 2, 0, 0, s->n_jobs, -1, 10, 0, 0, 0, 0};
    al_status_summary(st, &c);
}

/* What st wrote to its memory stream since *seen. */
static const char *since(FILE *f, char **buf, size_t *seen)
{
    fflush(f);
    const char *s = *buf + *seen;
    *seen = strlen(*buf);
    return s;
}

START_TEST(not_on_a_terminal_only_events_and_a_summary_a_minute)
{
    char *buf = NULL;
    size_t size = 0, seen = 0;
    FILE *f = open_memstream(&buf, &size);
    shown s = {2, "a"};
    al_status st;
    al_status_init(&st, f, 0, "sweep: ", draw, &s);
    al_status_event(&st, "start %s", "a");
    ck_assert_str_eq(since(f, &buf, &seen), "sweep: start a\n");
    ck_assert(al_status_due(&st));
    ck_assert(!al_status_due(&st));   /* not again within a quarter second */
    al_status_show(&st);
    ck_assert_str_eq(since(f, &buf, &seen), "");
    st.last_log -= 61;
    al_status_show(&st);
    ck_assert_str_eq(since(f, &buf, &seen),
                     "sweep t: 0/2 done, 0 failed, 0 diverged, 2 running | 0s | ETA ?\n");
    al_status_show(&st);   /* and not again for a minute */
    al_status_end(&st);
    ck_assert_str_eq(since(f, &buf, &seen), "");
    fclose(f);
    free(buf);
}
END_TEST

START_TEST(on_a_terminal_the_block_is_redrawn_under_the_events)
{
    char *buf = NULL;
    size_t size = 0, seen = 0;
    FILE *f = open_memstream(&buf, &size);
    char name[200];
    memset(name, 'x', sizeof name - 1);
    name[sizeof name - 1] = 0;
    shown s = {1, name};
    al_status st;
    al_status_init(&st, f, 1, "sweep: ", draw, &s);
    al_status_event(&st, "start x");
    /* a memory stream has no width: 80 columns, each line cut to 79 */
    char want[512];
    snprintf(want, sizeof want, "sweep: start x\n  %.77s\n%s\n", name,
             "sweep t: 0/2 done, 0 failed, 0 diverged, 1 running | 0s | ETA ?");
    ck_assert_str_eq(since(f, &buf, &seen), want);
    s.n_jobs = 0;
    al_status_show(&st);   /* the two lines up, cleared, the block again */
    ck_assert_str_eq(since(f, &buf, &seen), "\033[2A\r\033[J"
                     "sweep t: 0/2 done, 0 failed, 0 diverged, 0 running | 0s | ETA ?\n");
    al_status_end(&st);
    ck_assert_str_eq(since(f, &buf, &seen), "\033[1A\r\033[J");
    al_status_end(&st);   /* nothing left to clear */
    ck_assert_str_eq(since(f, &buf, &seen), "");
    fclose(f);
    free(buf);
}
END_TEST

Suite *status_suite(void)
{
    Suite *s = suite_create("status");
    TCase *tc = tcase_create("status");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, durations_read_as_seconds_minutes_or_hours);
    tcase_add_test(tc, a_job_line_shows_progress_or_starting_and_its_tag);
    tcase_add_test(tc, the_summary_counts_and_estimates_from_the_steps_trained);
    tcase_add_test(tc, not_on_a_terminal_only_events_and_a_summary_a_minute);
    tcase_add_test(tc, on_a_terminal_the_block_is_redrawn_under_the_events);
    suite_add_tcase(s, tc);
    return s;
}
