/*
 * al_status.h - the live status of jobs run in the background (a sweep's
 * trials, locally or in Slurm), on standard error.
 *
 * On a terminal, a block at the bottom is redrawn in place: one line per
 * running job (its step, losses and speed) and a summary line (done,
 * failed, running, elapsed, ETA). Events ("start x", "done x") are lines
 * that stay, printed above the block. Not on a terminal, there is no
 * block: events are plain lines, and the summary line is logged once a
 * minute.
 *
 * The caller owns the state being shown: its draw callback is called
 * whenever the block is drawn and adds the lines with al_status_job and,
 * last, al_status_summary.
 */
#ifndef AL_STATUS_H
#define AL_STATUS_H

#include <stddef.h>
#include <stdio.h>

/* One running job. */
typedef struct al_status_job {
    const char *name;
    const char *tag;            /* shown after the line when non-empty ("[12_3]") */
    int known;                  /* 0: no progress yet ("starting") */
    int step, steps;
    double loss, val_loss;      /* NAN: not yet ("-") */
    double tokens_per_s;
} al_status_job;

/* The summary line's numbers. The ETA is the steps left (steps_total -
 * steps_closed - steps_running) at the rate of those trained so far
 * (steps_trained + steps_running, in the time since al_status_init). */
typedef struct al_status_counts {
    const char *title;          /* "sweep NAME" */
    int done, total, failed, diverged, running;
    int queued;                 /* < 0: not shown */
    long steps_total;           /* of every job this run */
    long steps_closed;          /* scheduled steps of the jobs that ended */
    long steps_trained;         /* steps those jobs actually trained */
    long steps_running;         /* steps done so far by the running jobs */
    int stopping;
} al_status_counts;

typedef struct al_status al_status;
struct al_status {
    FILE *f;
    int tty;                    /* draw the block; else a summary line a minute */
    const char *prefix;         /* before every event ("sweep: ") */
    void (*draw)(void *ctx, al_status *st);
    void *ctx;
    double t0, last_tick, last_log;
    /* private */
    int lines, cols, logging;
};

/* Start showing on f (stderr: f = NULL), a terminal or not (tty). */
void al_status_init(al_status *st, FILE *f, int tty, const char *prefix,
                    void (*draw)(void *ctx, al_status *st), void *ctx);
/* 1 at most every quarter second: time for the caller to read its jobs'
 * progress and call al_status_show. */
int al_status_due(al_status *st);
/* Redraw the block (terminal), or log the summary when a minute has passed
 * since the last (otherwise). */
void al_status_show(al_status *st);
/* A line that stays: prefix, then the text (no newline needed). */
void al_status_event(al_status *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Remove the block (terminal); call before printing anything else. */
void al_status_end(al_status *st);

/* In draw: one line per running job, then the summary. */
void al_status_job_line(al_status *st, const al_status_job *j);
void al_status_summary(al_status *st, const al_status_counts *c);

/* The texts, without terminal control. */
void al_status_job_text(const al_status_job *j, char *buf, size_t n);
void al_status_summary_text(const al_status_counts *c, double elapsed, char *buf, size_t n);
/* "42s", "3m05s", "2h10m"; "?" for a negative or unknown time. */
void al_status_duration(char *buf, size_t n, double s);

#endif
