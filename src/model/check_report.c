/*
 * check_report.c - the conformance suite's report (al_check_variant.h) and
 * the runner of its checks (check_internal.h): each check in-process, or,
 * for a variant the suite cannot trust, in a child process of its own
 * (al_isolate.h) whose lines stream back as they are measured, so that a
 * crash, an abort or a hang in the variant becomes one FAIL line and the
 * suite goes on.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_check_variant.h"
#include "al_isolate.h"
#include "check_internal.h"

/* ------------------------------------------------------------ lines */

static al_check_line *line_of(al_check_report *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->lines[i].name, name)) return &r->lines[i];
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 32;
        r->lines = realloc(r->lines, (size_t)r->cap * sizeof *r->lines);
        AL_ASSERT(r->lines);
    }
    al_check_line *l = &r->lines[r->n++];
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "%s", name);
    l->err = NAN;
    return l;
}

/* In a check's child process: where its lines go (-1 elsewhere). */
static int stream_fd = -1;

void al_check_record(al_check_report *r, const char *name, double err, double bound, int at_least,
                     const char *where)
{
    al_check_line *l = line_of(r, name);
    int first = isnan(l->err) && !l->where[0];
    int worse = at_least ? !(err >= l->err) : !(err <= l->err);
    l->bound = bound;
    l->at_least = at_least;
    if (first || worse) {
        l->err = err;
        snprintf(l->where, sizeof l->where, "%s", where);
    }
    l->pass = at_least ? l->err >= bound : l->err <= bound;
    al_isolate_send(stream_fd, l, sizeof *l);
}

/* A check that did not finish: its line fails with how it ended, whatever
 * it measured before (and whatever later runs of it measure). */
static void record_unfinished(al_check_report *r, const char *name, const char *where,
                              const char *how)
{
    al_check_line *l = line_of(r, name);
    l->err = INFINITY;
    l->at_least = 0;
    l->pass = 0;
    snprintf(l->where, sizeof l->where, "%.100s: %.80s", where, how);
}

const al_check_line *al_check_find(const al_check_report *r, const char *name)
{
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->lines[i].name, name)) return &r->lines[i];
    return NULL;
}

void al_check_format(const al_check_line *l, char *buf, size_t n)
{
    snprintf(buf, n, "%-4s  %-22s  err %-10.3g %s %-8.3g  %s", l->pass ? "ok" : "FAIL", l->name,
             l->err, l->at_least ? ">=" : "<=", l->bound, l->where);
}

void al_check_report_free(al_check_report *r)
{
    free(r->lines);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------ running a check */

typedef struct group_call {
    al_check_group_fn fn;
    const void *job;
    al_check_report *r, *last;   /* the suite's lines; this run's alone */
} group_call;

static void merge(void *arg, const void *rec)
{
    group_call *g = arg;
    al_check_line l;
    memcpy(&l, rec, sizeof l);
    l.name[sizeof l.name - 1] = l.where[sizeof l.where - 1] = 0;   /* from a child: bounded */
    al_check_record(g->r, l.name, l.err, l.bound, l.at_least, l.where);
    al_check_record(g->last, l.name, l.err, l.bound, l.at_least, l.where);
}

/* The child: the check's lines go to the parent as they are recorded. */
static void in_child(void *arg, int fd)
{
    group_call *g = arg;
    al_check_report own = {0};
    stream_fd = fd;
    g->fn(&own, g->job);
}

int al_check_group(al_check_report *r, const al_check_run *how, const char *name,
                   const char *where, al_check_group_fn fn, const void *job,
                   al_check_report *last)
{
    group_call g = {fn, job, r, last};
    al_check_report_free(last);
    if (!how || !how->isolate) {
        al_check_report own = {0};
        fn(&own, job);
        for (int i = 0; i < own.n; i++) merge(&g, &own.lines[i]);
        al_check_report_free(&own);
        return 0;
    }
    al_isolate_end end;
    if (al_isolate_run(in_child, &g, sizeof(al_check_line), merge, &g, how->time_limit, &end) == 0)
        return 0;
    char said[96];
    al_isolate_describe(&end, said, sizeof said);
    record_unfinished(r, name, where, said);
    record_unfinished(last, name, where, said);
    return -1;
}
