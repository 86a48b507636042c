/*
 * status.c - the live status of background jobs (al_status.h).
 */
#include "al_status.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "al_util.h"

/* ------------------------------------------------------------ texts */

void al_status_duration(char *buf, size_t n, double s)
{
    if (!isfinite(s) || s < 0) snprintf(buf, n, "?");
    else if (s < 90) snprintf(buf, n, "%.0fs", s);
    else if (s < 5400) snprintf(buf, n, "%.0fm%02.0fs", floor(s / 60), fmod(floor(s), 60));
    else snprintf(buf, n, "%.0fh%02.0fm", floor(s / 3600), fmod(floor(s / 60), 60));
}

void al_status_job_text(const al_status_job *j, char *buf, size_t n)
{
    char loss[32] = "-", val[32] = "-";
    const char *tag = j->tag ? j->tag : "";
    if (j->known && !isnan(j->loss)) snprintf(loss, sizeof loss, "%.4g", j->loss);
    if (j->known && !isnan(j->val_loss)) snprintf(val, sizeof val, "%.4g", j->val_loss);
    if (j->known)
        snprintf(buf, n, "  %-24s %5d/%-5d loss %-7s val %-7s %6.0f tok/s%s%s", j->name, j->step,
                 j->steps, loss, val, j->tokens_per_s, tag[0] ? "  " : "", tag);
    else
        snprintf(buf, n, "  %-28s starting%s%s", j->name, tag[0] ? "  " : "", tag);
}

void al_status_summary_text(const al_status_counts *c, double elapsed, char *buf, size_t n)
{
    double trained = (double)(c->steps_trained + c->steps_running);
    double left = (double)(c->steps_total - c->steps_closed - c->steps_running);
    double eta = trained > 0 ? left * elapsed / trained : NAN;
    char el[32], etab[32], queued[32] = "";
    al_status_duration(el, sizeof el, elapsed);
    al_status_duration(etab, sizeof etab, eta);
    if (c->queued >= 0) snprintf(queued, sizeof queued, ", %d queued", c->queued);
    snprintf(buf, n, "%s: %d/%d done, %d failed, %d diverged, %d running%s | %s | ETA %s%s",
             c->title, c->done, c->total, c->failed, c->diverged, c->running, queued, el, etab,
             c->stopping ? " | stopping" : "");
}

/* ------------------------------------------------------------ the block */

void al_status_init(al_status *st, FILE *f, int tty, const char *prefix,
                    void (*draw)(void *ctx, al_status *st), void *ctx)
{
    memset(st, 0, sizeof *st);
    st->f = f ? f : stderr;
    st->tty = tty;
    st->prefix = prefix ? prefix : "";
    st->draw = draw;
    st->ctx = ctx;
    st->t0 = st->last_log = al_now();
}

static int term_cols(FILE *f)
{
    struct winsize ws;
    if (ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20) return ws.ws_col;
    return 80;
}

static void clear(al_status *st)
{
    if (st->lines) fprintf(st->f, "\033[%dA\r\033[J", st->lines);
    st->lines = 0;
}

/* A line of the block, cut to the terminal's width (a wrapped line would
 * throw the count of lines to move up off). */
static void line(al_status *st, const char *text)
{
    fprintf(st->f, "%.*s\n", st->cols - 1, text);
    st->lines++;
}

static void draw(al_status *st)
{
    st->cols = term_cols(st->f);
    clear(st);
    st->draw(st->ctx, st);
    fflush(st->f);
}

void al_status_job_line(al_status *st, const al_status_job *j)
{
    char buf[512];
    if (st->logging) return;
    al_status_job_text(j, buf, sizeof buf);
    line(st, buf);
}

void al_status_summary(al_status *st, const al_status_counts *c)
{
    char buf[512];
    al_status_summary_text(c, al_now() - st->t0, buf, sizeof buf);
    if (st->logging) fprintf(st->f, "%s\n", buf);
    else line(st, buf);
}

int al_status_due(al_status *st)
{
    double now = al_now();
    if (now - st->last_tick < 0.25) return 0;
    st->last_tick = now;
    return 1;
}

void al_status_show(al_status *st)
{
    double now = al_now();
    if (st->tty) {
        draw(st);
    } else if (now - st->last_log >= 60) {
        st->last_log = now;
        st->logging = 1;
        st->draw(st->ctx, st);
        st->logging = 0;
    }
}

void al_status_event(al_status *st, const char *fmt, ...)
{
    va_list ap;
    if (st->tty) clear(st);
    fputs(st->prefix, st->f);
    va_start(ap, fmt);
    vfprintf(st->f, fmt, ap);
    va_end(ap);
    fputc('\n', st->f);
    if (st->tty) draw(st);
    fflush(st->f);
}

void al_status_end(al_status *st)
{
    if (st->tty) clear(st);
    fflush(st->f);
}
