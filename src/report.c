/*
 * report.c - summary.csv in, report.md and gnuplot plots out.
 *
 * The report reads only files (summary.csv, sweep.json, the trials'
 * metrics.csv), so it works on any results directory, including one
 * written by hand or by another executor.
 */
#include "al_report.h"

#include "al_checkpoint.h"
#include "al_decode.h"
#include "al_ablation.h"
#include "al_headstats.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define DIR_LEN 4096

/* ------------------------------------------------------------ Pareto */

static int better_eq(double a, double b, int maximize) { return maximize ? a >= b : a <= b; }

int al_pareto_front(int n, const double *cost, const double *quality, int maximize,
                    int *on_front)
{
    int count = 0;
    for (int i = 0; i < n; i++) {
        on_front[i] = !isnan(cost[i]) && !isnan(quality[i]);
        for (int j = 0; j < n && on_front[i]; j++) {
            if (j == i || isnan(cost[j]) || isnan(quality[j])) continue;
            int weak = cost[j] <= cost[i] && better_eq(quality[j], quality[i], maximize);
            int strict = cost[j] < cost[i] || quality[j] != quality[i];
            if (weak && strict) on_front[i] = 0;
        }
        count += on_front[i];
    }
    return count;
}

/* ------------------------------------------------------------ CSV */

typedef struct csv {
    int n_cols, n_rows;
    char **head;       /* n_cols */
    char ***cells;     /* n_rows x n_cols ("" when a row is short) */
    int *line;         /* where each row starts, 1-based */
} csv;

/* One field from *p (RFC 4180 quoting); advances past its separator and
 * sets *eol at the end of a record. */
static char *csv_field(const char **p, int *line, int *eol)
{
    const char *s = *p;
    size_t cap = 64, n = 0;
    char *out = al_malloc(cap);
    int quoted = *s == '"';
    if (quoted) s++;
    for (; *s; s++) {
        if (quoted && *s == '"' && s[1] == '"') s++;
        else if (quoted && *s == '"') { quoted = 0; continue; }
        else if (!quoted && (*s == ',' || *s == '\n' || *s == '\r')) break;
        if (*s == '\n') (*line)++;
        if (n + 2 > cap) out = realloc(out, cap *= 2);
        AL_ASSERT(out != NULL);
        out[n++] = *s;
    }
    out[n] = 0;
    *eol = *s != ',';
    if (*s == '\r') s++;
    if (*s == '\n' || *s == ',') s++;
    if (*eol) (*line)++;
    *p = s;
    return out;
}

/* Fields of one record into a fresh array; returns how many. */
static int csv_record(const char **p, int *line, char ***out)
{
    int n = 0, eol = 0;
    char **f = NULL;
    while (!eol) {
        f = realloc(f, (size_t)(n + 1) * sizeof *f);
        AL_ASSERT(f != NULL);
        f[n++] = csv_field(p, line, &eol);
    }
    *out = f;
    return n;
}

static void free_fields(char **f, int n)
{
    for (int i = 0; i < n; i++) free(f[i]);
    free(f);
}

static int csv_read(const char *path, csv *t, al_err *e)
{
    char *text;
    size_t len;
    memset(t, 0, sizeof t[0]);
    if (al_read_file(path, &text, &len, e)) return -1;
    const char *p = text;
    int line = 1;
    if (!*p) {
        free(text);
        return al_errf(e, "%s: empty (no header line)", path);
    }
    t->n_cols = csv_record(&p, &line, &t->head);
    while (*p) {
        char **f;
        int start = line, n = csv_record(&p, &line, &f);
        if (n == 1 && !f[0][0]) { free_fields(f, n); continue; }   /* blank line */
        t->cells = realloc(t->cells, (size_t)(t->n_rows + 1) * sizeof *t->cells);
        t->line = realloc(t->line, (size_t)(t->n_rows + 1) * sizeof *t->line);
        AL_ASSERT(t->cells && t->line);
        if (n > t->n_cols) {
            free_fields(f, n);
            free(text);
            return al_errf(e, "%s:%d: error: %d fields, the header has %d", path, start, n,
                           t->n_cols);
        }
        f = realloc(f, (size_t)t->n_cols * sizeof *f);
        AL_ASSERT(f != NULL);
        for (int i = n; i < t->n_cols; i++) f[i] = calloc(1, 1);
        t->cells[t->n_rows] = f;
        t->line[t->n_rows++] = start;
    }
    free(text);
    return 0;
}

static void csv_free(csv *t)
{
    free_fields(t->head, t->n_cols);
    for (int r = 0; r < t->n_rows; r++) free_fields(t->cells[r], t->n_cols);
    free(t->cells);
    free(t->line);
}

static int csv_col(const csv *t, const char *name)
{
    for (int i = 0; i < t->n_cols; i++)
        if (strcmp(t->head[i], name) == 0) return i;
    return -1;
}

/* ------------------------------------------------------------ rows */

typedef struct row {
    const char *trial, *variant, *status, *reason;
    char config[256];
    double kv, params, n_kv_head, d_latent, d_rope, seed, tokens_per_step;
    double train_loss, val_loss, val_acc, tok_s, wall_s;
    int causal;        /* 1, 0, or -1 when not given */
} row;

typedef struct summary {
    csv t;
    int n;
    row *rows;
} summary;

static const char *cell(const csv *t, int r, const char *col)
{
    int c = csv_col(t, col);
    return c < 0 ? "" : t->cells[r][c];
}

/* A numeric cell: blank (or absent) is NAN. */
static int num_cell(const csv *t, int r, const char *col, const char *path, double *v,
                    al_err *e)
{
    const char *s = cell(t, r, col);
    char *end;
    if (!s[0]) {
        *v = NAN;
        return 0;
    }
    *v = strtod(s, &end);
    if (*end)
        return al_errf(e, "%s:%d: error: column '%s': '%.40s' is not a number", path,
                       t->line[r], col, s);
    return 0;
}

/* "gqa-kv2_seed1" -> "gqa-kv2": the configuration of a trial. */
static void strip_seed(char *out, size_t n, const char *trial)
{
    snprintf(out, n, "%s", trial);
    char *u = strrchr(out, '_');
    if (u && strncmp(u, "_seed", 5) == 0 && u[5] && !u[5 + strspn(u + 5, "0123456789")])
        *u = 0;
}

static int parse_row(const csv *t, int r, const char *path, row *w, al_err *e)
{
    static const char *const cols[] = {"kv_bytes_per_token", "params", "n_kv_head",
        "d_latent", "d_rope", "seed", "tokens_per_step", "final_train_loss", "val_loss",
        "val_accuracy", "tokens_per_s", "wall_s", NULL};
    double *dst[] = {&w->kv, &w->params, &w->n_kv_head, &w->d_latent, &w->d_rope, &w->seed,
                     &w->tokens_per_step, &w->train_loss, &w->val_loss, &w->val_acc,
                     &w->tok_s, &w->wall_s};
    for (int i = 0; cols[i]; i++)
        if (num_cell(t, r, cols[i], path, dst[i], e)) return -1;
    w->trial = cell(t, r, "trial");
    w->variant = cell(t, r, "variant");
    w->status = cell(t, r, "status");
    w->reason = cell(t, r, "reason");
    if (!w->trial[0]) return al_errf(e, "%s:%d: error: empty 'trial'", path, t->line[r]);
    const char *cfg = cell(t, r, "config"), *causal = cell(t, r, "causal");
    if (cfg[0]) snprintf(w->config, sizeof w->config, "%s", cfg);
    else strip_seed(w->config, sizeof w->config, w->trial);
    w->causal = !causal[0] ? -1 : strcmp(causal, "false") != 0;
    return 0;
}

static int summary_read(const char *dir, summary *s, al_err *e)
{
    static const char *const required[] = {"trial", "kv_bytes_per_token", "val_loss",
                                           "status", NULL};
    char path[DIR_LEN + 32];
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    memset(s, 0, sizeof *s);
    if (csv_read(path, &s->t, e)) return -1;
    for (int i = 0; required[i]; i++)
        if (csv_col(&s->t, required[i]) < 0)
            return al_errf(e, "%s:1: error: no column '%s' (a sweep's summary has trial, "
                           "kv_bytes_per_token, val_loss, status, ...)", path, required[i]);
    s->rows = al_calloc((size_t)s->t.n_rows + 1, sizeof *s->rows);
    for (int r = 0; r < s->t.n_rows; r++)
        if (parse_row(&s->t, r, path, &s->rows[r], e)) return -1;
    s->n = s->t.n_rows;
    return 0;
}

static void summary_free(summary *s)
{
    csv_free(&s->t);
    free(s->rows);
}

/* ------------------------------------------------------------ groups */

typedef struct group {
    const row *first;
    int n, n_ok;
    double loss, loss_sd, acc, acc_sd, train_loss, tok_s;
    int front;
} group;

typedef struct report {
    const char *dir;
    summary sm;
    group *g;
    int n_groups, use_acc, n_front, n_ok, plots;
    char name[256], file[DIR_LEN], description[512];
    char sets[2048];     /* " --set 'k=v'" for each, from sweep.json */
} report;

static int is_ok(const row *w) { return strcmp(w->status, "ok") == 0; }

/* Mean and sample standard deviation of field `off` over a group's ok
 * rows (NAN when none has it; sd 0 for one). */
static void mean_sd(const report *R, const group *g, size_t off, double *mean, double *sd)
{
    double s = 0, s2 = 0;
    int n = 0;
    for (int i = 0; i < R->sm.n; i++) {
        const row *w = &R->sm.rows[i];
        double v = *(const double *)((const char *)w + off);
        if (strcmp(w->config, g->first->config) != 0 || !is_ok(w) || isnan(v)) continue;
        s += v, s2 += v * v, n++;
    }
    *mean = n ? s / n : NAN;
    double var = n > 1 ? (s2 - s * s / n) / (n - 1) : 0;
    *sd = n ? sqrt(var > 0 ? var : 0) : NAN;
}

static void build_groups(report *R)
{
    R->g = al_calloc((size_t)R->sm.n + 1, sizeof *R->g);
    for (int i = 0; i < R->sm.n; i++) {
        const row *w = &R->sm.rows[i];
        int k = 0;
        while (k < R->n_groups && strcmp(R->g[k].first->config, w->config) != 0) k++;
        if (k == R->n_groups) R->g[R->n_groups++].first = w;
        R->g[k].n++;
        R->g[k].n_ok += is_ok(w);
        R->n_ok += is_ok(w);
    }
    int all_acc = 1, any_ok = 0;
    for (int k = 0; k < R->n_groups; k++) {
        group *g = &R->g[k];
        double sd;
        mean_sd(R, g, offsetof(row, val_loss), &g->loss, &g->loss_sd);
        mean_sd(R, g, offsetof(row, val_acc), &g->acc, &g->acc_sd);
        mean_sd(R, g, offsetof(row, train_loss), &g->train_loss, &sd);
        mean_sd(R, g, offsetof(row, tok_s), &g->tok_s, &sd);
        if (g->n_ok) any_ok = 1, all_acc &= !isnan(g->acc);
    }
    R->use_acc = any_ok && all_acc;
}

static void mark_front(report *R)
{
    int n = R->n_groups, *on = al_calloc((size_t)n + 1, sizeof *on);
    double *cost = al_calloc((size_t)n + 1, sizeof *cost);
    double *q = al_calloc((size_t)n + 1, sizeof *q);
    for (int k = 0; k < n; k++) {   /* an unmasked model's loss is not comparable */
        cost[k] = R->g[k].first->causal == 0 ? NAN : R->g[k].first->kv;
        q[k] = R->use_acc ? R->g[k].acc : R->g[k].loss;
    }
    R->n_front = al_pareto_front(n, cost, q, R->use_acc, on);
    for (int k = 0; k < n; k++) R->g[k].front = on[k];
    free(on), free(cost), free(q);
}

/* Largest cache first, then better quality first: the table's order. */
static int by_cache(const void *a, const void *b, void *ctx)
{
    const group *x = a, *y = b;
    const report *R = ctx;
    if (x->first->kv != y->first->kv) return x->first->kv < y->first->kv ? 1 : -1;
    double qx = R->use_acc ? -x->acc : x->loss, qy = R->use_acc ? -y->acc : y->loss;
    if (isnan(qx) != isnan(qy)) return isnan(qx) ? 1 : -1;
    return qx < qy ? -1 : qx > qy;
}

static void read_marker(report *R)
{
    char path[DIR_LEN + 32];
    const char *base = strrchr(R->dir, '/');
    snprintf(R->name, sizeof R->name, "%s", base && base[1] ? base + 1 : R->dir);
    snprintf(path, sizeof path, "%s/sweep.json", R->dir);
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    if (!j) return;
    const char *v;
    if ((v = json_string_value(json_object_get(j, "experiment")))) snprintf(R->name, sizeof R->name, "%s", v);
    if ((v = json_string_value(json_object_get(j, "file")))) snprintf(R->file, sizeof R->file, "%s", v);
    if ((v = json_string_value(json_object_get(j, "description"))))
        snprintf(R->description, sizeof R->description, "%s", v);
    const json_t *sets = json_object_get(j, "sets");
    for (size_t i = 0; i < json_array_size(sets); i++) {
        size_t len = strlen(R->sets);
        if ((v = json_string_value(json_array_get(sets, i))))
            snprintf(R->sets + len, sizeof R->sets - len, " --set '%s'", v);
    }
    json_decref(j);
}

/* ------------------------------------------------------------ formatting */

static void fmt_int(char *buf, size_t n, double v)
{
    if (isnan(v)) {
        snprintf(buf, n, "–");
        return;
    }
    char digits[32];
    snprintf(digits, sizeof digits, "%.0f", v);
    size_t len = strlen(digits), o = 0;
    for (size_t i = 0; i < len && o + 2 < n; i++) {
        if (i && (len - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = 0;
}

static void fmt_mean(char *buf, size_t n, double mean, double sd, int n_ok)
{
    if (isnan(mean)) snprintf(buf, n, "–");
    else if (n_ok > 1) snprintf(buf, n, "%.4f ± %.4f", mean, sd);
    else snprintf(buf, n, "%.4f", mean);
}

static void fmt_setting(char *buf, size_t n, double v)
{
    if (isnan(v)) snprintf(buf, n, "–");
    else snprintf(buf, n, "%.0f", v);
}

static int any_col(const report *R, size_t off)
{
    for (int i = 0; i < R->sm.n; i++)
        if (!isnan(*(const double *)((const char *)&R->sm.rows[i] + off))) return 1;
    return 0;
}

static int any_unmasked(const report *R)
{
    for (int i = 0; i < R->sm.n; i++)
        if (R->sm.rows[i].causal == 0) return 1;
    return 0;
}

/* ------------------------------------------------------------ report.md */

static void md_table_head(FILE *f, const report *R)
{
    int kvh = any_col(R, offsetof(row, n_kv_head)), lat = any_col(R, offsetof(row, d_latent));
    fputs("| configuration | variant |", f);
    if (kvh) fputs(" K/V heads |", f);
    if (lat) fputs(" d_latent | d_rope |", f);
    if (any_unmasked(R)) fputs(" causal |", f);
    fputs(" params | KV bytes/token | val loss |", f);
    if (any_col(R, offsetof(row, val_acc))) fputs(" val accuracy |", f);
    fputs(" train loss | tokens/s | seeds ok | Pareto |\n|", f);
    int cols = 9 + kvh + 2 * lat + any_unmasked(R) + any_col(R, offsetof(row, val_acc));
    for (int i = 0; i < cols; i++) fputs(" --- |", f);
    fputc('\n', f);
}

static void md_table_row(FILE *f, const report *R, const group *g)
{
    const row *w = g->first;
    char a[64], b[64], c[64];
    fprintf(f, "| %s | %s |", w->config, w->variant[0] ? w->variant : "–");
    if (any_col(R, offsetof(row, n_kv_head))) fmt_setting(a, sizeof a, w->n_kv_head), fprintf(f, " %s |", a);
    if (any_col(R, offsetof(row, d_latent))) {
        fmt_setting(a, sizeof a, w->d_latent);
        fmt_setting(b, sizeof b, w->d_rope);
        fprintf(f, " %s | %s |", a, b);
    }
    if (any_unmasked(R)) fprintf(f, " %s |", w->causal ? "true" : "**false**");
    fmt_int(a, sizeof a, w->params);
    fmt_int(b, sizeof b, w->kv);
    fmt_mean(c, sizeof c, g->loss, g->loss_sd, g->n_ok);
    if (!g->n_ok) snprintf(c, sizeof c, "– (%s)", w->status);
    fprintf(f, " %s | %s | %s |", a, b, c);
    if (any_col(R, offsetof(row, val_acc)))
        fmt_mean(a, sizeof a, g->acc, g->acc_sd, g->n_ok), fprintf(f, " %s |", a);
    fmt_mean(a, sizeof a, g->train_loss, 0, 1);
    fmt_int(b, sizeof b, g->tok_s);
    fprintf(f, " %s | %s | %d/%d | %s |\n", a, b, g->n_ok, g->n, g->front ? "**yes**" : "");
}

/* The front in order of cache size, each against the largest-cache
 * configuration that finished (the baseline, mha in most sweeps). */
static void md_front(FILE *f, const report *R)
{
    const group *base = NULL;
    for (int k = 0; k < R->n_groups; k++)
        if (R->g[k].n_ok && R->g[k].first->causal != 0 &&
            (!base || R->g[k].first->kv > base->first->kv))
            base = &R->g[k];
    fprintf(f, "\n## Pareto front: %s against KV-cache bytes per token\n\n", R->use_acc
            ? "val accuracy" : "val loss");
    if (!R->n_front) {
        fputs("No configuration finished, so there is no front.\n", f);
        return;
    }
    fprintf(f, "No other configuration has both a smaller (or equal) cache and a %s%s; from "
            "the smallest cache up:\n\n", R->use_acc ? "higher (or equal) accuracy"
            : "lower (or equal) loss", any_unmasked(R) ? " (configurations without the causal "
            "mask are left out: their loss is not comparable)" : "");
    for (int k = R->n_groups - 1; k >= 0; k--) {
        const group *g = &R->g[k];
        if (!g->front) continue;
        double q = R->use_acc ? g->acc : g->loss, qb = R->use_acc ? base->acc : base->loss;
        char kv[64];
        fmt_int(kv, sizeof kv, g->first->kv);
        fprintf(f, "- **%s**: %s bytes/token", g->first->config, kv);
        if (g != base && g->first->kv > 0)
            fprintf(f, " (%.3gx smaller than %s)", base->first->kv / g->first->kv,
                    base->first->config);
        fprintf(f, ", %s %.4f", R->use_acc ? "val accuracy" : "val loss", q);
        if (g != base) fprintf(f, " (%+.4f)", q - qb);
        fputs("\n", f);
    }
}

static void md_unfinished(FILE *f, const report *R)
{
    int n = 0;
    for (int i = 0; i < R->sm.n; i++) n += !is_ok(&R->sm.rows[i]);
    if (!n) return;
    fprintf(f, "\n## Trials that did not finish (%d)\n\nNot in the means above. A diverged "
            "trial is a result (its loss became NaN or Inf); a failed, killed, interrupted "
            "or pending one runs again on the next `attnlab sweep` of the same file.\n\n"
            "| trial | status | reason |\n| --- | --- | --- |\n", n);
    for (int i = 0; i < R->sm.n; i++) {
        const row *w = &R->sm.rows[i];
        if (is_ok(w)) continue;
        fprintf(f, "| %s | %s | ", w->trial, w->status);
        for (const char *p = w->reason; *p; p++) {
            if (*p == '|') fputc('\\', f);   /* a table cell */
            fputc(*p, f);
        }
        fputs(" |\n", f);
    }
}

/* ------------------------------------------------------------ models */

/* What the heads learned, and the causal mask shown (headstats.c,
 * ablation.c), from the trials' checkpoints, in the table's order. */
static void md_models(FILE *f, const report *R)
{
    al_hs_trial *t = al_calloc((size_t)R->sm.n + 1, sizeof *t);
    int n = 0;
    al_err e;
    for (int k = 0; k < R->n_groups; k++)
        for (int i = 0; i < R->sm.n; i++) {
            const row *w = &R->sm.rows[i];
            if (strcmp(w->config, R->g[k].first->config) == 0)
                t[n++] = (al_hs_trial){w->trial, w->config, is_ok(w), w->causal, w->val_loss,
                                       w->kv};
        }
    if (al_headstats_section(f, R->dir, t, n, &e) || al_ablation_section(f, R->dir, t, n, &e))
        fprintf(f, "\n**Incomplete:** %s\n", e.msg);
    free(t);
}

static void md_plots(FILE *f, const report *R)
{
    fputs("\n## Plots\n\n", f);
    if (R->plots == AL_PLOTS_DRAWN) {
        fprintf(f, "![%s against KV-cache bytes per token](tradeoff.png)\n\n"
                "Each point is one configuration (mean over seeds, bars: ± one standard "
                "deviation); the dashed line is the Pareto front%s. [SVG](tradeoff.svg)\n\n"
                "![validation loss curves](curves.png)\n\n"
                "Validation loss against optimizer step and against tokens trained (mean "
                "over seeds). [SVG](curves.svg)\n\n", R->use_acc ? "val accuracy" : "val loss",
                any_unmasked(R) ? " (configurations without the causal mask are not drawn)"
                : "");
        fputs("The plots are drawn by gnuplot from `tradeoff.gp` and `curves.gp` (and their "
              "`.dat` files), kept here to edit and re-run.\n", f);
    } else if (R->plots == AL_PLOTS_NO_GNUPLOT) {
        fputs("**No plots: gnuplot was not found.** Install it (Debian: `apt-get install "
              "gnuplot-nox`) and run `attnlab report` on this directory again; the scripts "
              "`tradeoff.gp` and `curves.gp` are already here.\n", f);
    } else if (R->plots == AL_PLOTS_FAILED) {
        fputs("**No plots: gnuplot failed** (its messages are in `gnuplot.log`); the scripts "
              "`tradeoff.gp` and `curves.gp` are here.\n", f);
    } else {
        fputs("No plots: no trial finished.\n", f);
    }
}

static void md_write(FILE *f, const report *R)
{
    int counts[8] = {0};
    fprintf(f, "# Sweep report: %s\n\n", R->name);
    if (R->description[0]) fprintf(f, "%s\n\n", R->description);
    if (R->file[0])
        fprintf(f, "Experiment file: `%s`; re-run (finished trials are kept) with `attnlab "
                "sweep %s%s`.\n\n", R->file, R->file, R->sets);
    for (int i = 0; i < R->sm.n; i++) counts[is_ok(&R->sm.rows[i])]++;
    if (counts[0])
        fprintf(f, "%d trials: %d ok, %d did not finish (listed below). ", R->sm.n, counts[1],
                counts[0]);
    else
        fprintf(f, "%d trials, all ok. ", R->sm.n);
    fprintf(f, "%d configurations. Values are the mean ± sample standard deviation over the "
            "seeds that finished; KV bytes/token is the f32 K/V cache of one token summed over "
            "all layers. Losses are in nats per token.\n", R->n_groups);
    fprintf(f, "\n## Configurations\n\n");
    md_table_head(f, R);
    for (int k = 0; k < R->n_groups; k++) md_table_row(f, R, &R->g[k]);
    md_front(f, R);
    md_plots(f, R);
    md_models(f, R);
    md_unfinished(f, R);
}

/* ------------------------------------------------------------ gnuplot */

static FILE *open_out(const report *R, const char *name, char *path, char *tmp, al_err *e)
{
    snprintf(path, DIR_LEN + 64, "%s/%s", R->dir, name);
    return al_open_atomic(path, tmp, DIR_LEN + 96, e);
}

static void gp_terminal(FILE *f, const char *size)
{
    fprintf(f, "do for [fmt in \"png svg\"] {\n"
            "  if (fmt eq \"png\") {\n"
            "    set terminal pngcairo noenhanced size %s font \",11\"\n"
            "    set output out_png\n"
            "  } else {\n"
            "    set terminal svg noenhanced size %s dynamic font \",11\"\n"
            "    set output out_svg\n  }\n", size, size);
}

static void gp_header(FILE *f, const char *base)
{
    fprintf(f, "# %s.gp - written by `attnlab report`; re-run with `gnuplot %s.gp` in "
            "this directory.\n"
            "if (!exists(\"out_png\")) out_png = \"%s.png\"\n"
            "if (!exists(\"out_svg\")) out_svg = \"%s.svg\"\n", base, base, base, base);
}

static int write_tradeoff(const report *R, al_err *e)
{
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96];
    FILE *f = open_out(R, "tradeoff.dat", path, tmp, e);
    if (!f) return -1;
    fputs("# kv_bytes_per_token quality sd \"configuration\" on_front\n", f);
    for (int k = 0; k < R->n_groups; k++) {
        const group *g = &R->g[k];
        double q = R->use_acc ? g->acc : g->loss, sd = R->use_acc ? g->acc_sd : g->loss_sd;
        if (!isnan(q) && g->first->kv > 0 && g->first->causal != 0)
            fprintf(f, "%.0f %.9g %.9g \"%s\" %d\n", g->first->kv, q, sd, g->first->config, g->front);
    }
    if (al_commit_atomic(f, tmp, path, e)) return -1;
    if (!(f = open_out(R, "front.dat", path, tmp, e))) return -1;
    fputs("# the Pareto front, by cache size\n", f);
    for (int k = R->n_groups - 1; k >= 0; k--)
        if (R->g[k].front && R->g[k].first->kv > 0)
            fprintf(f, "%.0f %.9g\n", R->g[k].first->kv, R->use_acc ? R->g[k].acc : R->g[k].loss);
    if (al_commit_atomic(f, tmp, path, e)) return -1;
    if (!(f = open_out(R, "tradeoff.gp", path, tmp, e))) return -1;
    gp_header(f, "tradeoff");
    gp_terminal(f, "1000,700");
    fprintf(f, "  set title \"%s: %s against KV cache\"\n"
            "  set xlabel \"KV-cache bytes per token (f32, all layers; log scale)\"\n"
            "  set ylabel \"%s\"\n  set logscale x 2\n  set grid\n  set key %s\n"
            "  set offsets graph 0.08, graph 0.15, graph 0.08, graph 0.08\n"
            "  plot \"tradeoff.dat\" using 1:2:3 with yerrorbars pt 7 ps 1.3 lw 1.5 "
            "title \"configuration (mean ± sd over seeds)\", \\\n"
            "       \"\" using 1:2:4 with labels left offset char 1,0.7 notitle, \\\n"
            "       \"front.dat\" using 1:2 with steps lw 2 dt 2 lc rgb \"#c03030\" "
            "title \"Pareto front\", \\\n"
            "       \"front.dat\" using 1:2 with points pt 6 ps 2.4 lw 1.5 lc rgb \"#c03030\" "
            "notitle\n  unset output\n}\n", R->name,
            R->use_acc ? "val accuracy" : "val loss",
            R->use_acc ? "validation accuracy" : "validation loss (nats/token)",
            R->use_acc ? "bottom right" : "top right");
    return al_commit_atomic(f, tmp, path, e);
}

/* A group's validation curve: the mean over its ok trials' metrics.csv
 * at each evaluation step of the first one. Returns the number of points. */
static int group_curve(const report *R, const group *g, double **step, double **val)
{
    int n = 0, *cnt = NULL;
    *step = *val = NULL;
    for (int i = 0; i < R->sm.n; i++) {
        const row *w = &R->sm.rows[i];
        if (strcmp(w->config, g->first->config) != 0 || !is_ok(w)) continue;
        char path[DIR_LEN + 300];
        csv m;
        al_err e;
        snprintf(path, sizeof path, "%s/%s/metrics.csv", R->dir, w->trial);
        if (csv_read(path, &m, &e)) continue;
        int cs = csv_col(&m, "step"), cv = csv_col(&m, "val_loss");
        if (!n && cs >= 0 && cv >= 0) {
            n = m.n_rows;
            *step = al_calloc((size_t)n + 1, sizeof **step);
            *val = al_calloc((size_t)n + 1, sizeof **val);
            cnt = al_calloc((size_t)n + 1, sizeof *cnt);
            for (int r = 0; r < n; r++) (*step)[r] = atof(m.cells[r][cs]);
        }
        for (int r = 0; cs >= 0 && cv >= 0 && r < n && r < m.n_rows; r++) {
            if (atof(m.cells[r][cs]) != (*step)[r] || !m.cells[r][cv][0]) continue;
            (*val)[r] += atof(m.cells[r][cv]);
            cnt[r]++;
        }
        csv_free(&m);
    }
    for (int r = 0; r < n; r++) (*val)[r] = cnt[r] ? (*val)[r] / cnt[r] : NAN;
    free(cnt);
    return n;
}

/* curves.dat: one block per configuration (gnuplot `index`); returns the
 * number of blocks, their group numbers in which[]. *ytop gets the highest
 * loss after the first evaluation that follows step 0, so that the plot
 * shows learning rather than the initial loss (NAN: let gnuplot choose). */
static int write_curve_data(const report *R, int *which, double *ytop, al_err *e)
{
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96];
    FILE *f = open_out(R, "curves.dat", path, tmp, e);
    if (!f) return -1;
    int blocks = 0;
    *ytop = NAN;
    fputs("# step tokens val_loss, one block per configuration\n", f);
    for (int k = 0; k < R->n_groups; k++) {
        double *step, *val;
        int n = group_curve(R, &R->g[k], &step, &val), wrote = 0;
        double tps = R->g[k].first->tokens_per_step;
        for (int r = 0; r < n; r++) {
            if (isnan(val[r])) continue;
            if (!wrote++) fprintf(f, "%s# %s\n", blocks ? "\n\n" : "", R->g[k].first->config);
            fprintf(f, "%.0f %.9g %.9g\n", step[r], isnan(tps) ? step[r] : step[r] * tps, val[r]);
            if (r == 1 && n > 2 && !(val[r] <= *ytop)) *ytop = val[r];
        }
        if (wrote) which[blocks++] = k;
        free(step), free(val);
    }
    return al_commit_atomic(f, tmp, path, e) ? -1 : blocks;
}

static void gp_curve_plot(FILE *f, const report *R, const int *which, int n, int xcol)
{
    fputs("  plot ", f);
    for (int b = 0; b < n; b++)
        fprintf(f, "%s\"curves.dat\" index %d using %d:3 with linespoints pt 7 ps 0.5 lw 1.5 "
                "title \"%s\"", b ? ", \\\n       " : "", b, xcol, R->g[which[b]].first->config);
    fputs("\n", f);
}

static int write_curves(const report *R, al_err *e)
{
    int *which = al_calloc((size_t)R->n_groups + 1, sizeof *which);
    double ytop;
    int n = write_curve_data(R, which, &ytop, e);
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96];
    FILE *f = n < 0 ? NULL : open_out(R, "curves.gp", path, tmp, e);
    if (!f) {
        free(which);
        return -1;
    }
    gp_header(f, "curves");
    gp_terminal(f, "1400,600");
    fprintf(f, "  set multiplot layout 1,2 title \"%s: validation loss (mean over seeds)\"\n"
            "  set ylabel \"validation loss (nats/token)\"\n"
            "  set grid\n  set key top right\n  set xlabel \"optimizer step\"\n", R->name);
    if (!isnan(ytop)) fprintf(f, "  set yrange [*:%.4g]\n", ytop * 1.02);
    if (n) gp_curve_plot(f, R, which, n, 1);
    fputs("  set xlabel \"tokens trained\"\n  set format x \"%.1s%c\"\n", f);
    if (n) gp_curve_plot(f, R, which, n, 2);
    fputs("  unset multiplot\n  unset output\n}\n", f);
    free(which);
    return al_commit_atomic(f, tmp, path, e);
}

/* Run gnuplot on DIR/<base>.gp; outputs go to temp names and are renamed
 * into place once it succeeded. Returns an enum al_plot_state. */
static int run_gnuplot(const report *R, const char *base)
{
    const char *prog = getenv("AL_GNUPLOT") ? getenv("AL_GNUPLOT") : "gnuplot";
    char defs[512], script[64], log[DIR_LEN + 32];
    long pid_tag = (long)getpid();
    snprintf(defs, sizeof defs, "out_png='%s.png.tmp.%ld'; out_svg='%s.svg.tmp.%ld'", base,
             pid_tag, base, pid_tag);
    snprintf(script, sizeof script, "%s.gp", base);
    snprintf(log, sizeof log, "%s/gnuplot.log", R->dir);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(R->dir) != 0) _exit(126);
        if (fd >= 0) dup2(fd, STDOUT_FILENO), dup2(fd, STDERR_FILENO);
        execlp(prog, prog, "-e", defs, script, (char *)NULL);
        _exit(errno == ENOENT ? 127 : 126);
    }
    if (fd >= 0) close(fd);
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return AL_PLOTS_FAILED;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127) return AL_PLOTS_NO_GNUPLOT;
    int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    for (int i = 0; i < 2; i++) {
        char from[DIR_LEN + 64], to[DIR_LEN + 64];
        const char *ext = i ? "svg" : "png";
        snprintf(from, sizeof from, "%s/%s.%s.tmp.%ld", R->dir, base, ext, pid_tag);
        snprintf(to, sizeof to, "%s/%s.%s", R->dir, base, ext);
        if (!ok || rename(from, to) != 0) ok = 0, unlink(from);
    }
    return ok ? AL_PLOTS_DRAWN : AL_PLOTS_FAILED;
}

static int draw_plots(report *R, al_err *e)
{
    char log[DIR_LEN + 32];
    if (write_tradeoff(R, e) || write_curves(R, e)) return -1;
    if (!R->n_ok) return R->plots = AL_PLOTS_NOTHING, 0;
    snprintf(log, sizeof log, "%s/gnuplot.log", R->dir);
    unlink(log);
    R->plots = run_gnuplot(R, "tradeoff");
    if (R->plots == AL_PLOTS_DRAWN) R->plots = run_gnuplot(R, "curves");
    return 0;
}

/* ------------------------------------------------------------ public */

int al_report_write(const char *dir, al_report_stats *st, al_err *e)
{
    report R;
    memset(&R, 0, sizeof R);
    R.dir = dir;
    memset(st, 0, sizeof *st);
    if (strlen(dir) >= DIR_LEN - 300) return al_errf(e, "%s: path too long", dir);
    int rc = summary_read(dir, &R.sm, e);
    if (rc == 0) {
        read_marker(&R);
        build_groups(&R);
        mark_front(&R);
        qsort_r(R.g, (size_t)R.n_groups, sizeof *R.g, by_cache, &R);
        rc = draw_plots(&R, e) ? -2 : 0;
    }
    if (rc == 0) {
        char path[DIR_LEN + 64], tmp[DIR_LEN + 96];
        FILE *f = open_out(&R, "report.md", path, tmp, e);
        if (!f) rc = -2;
        else md_write(f, &R), rc = al_commit_atomic(f, tmp, path, e) ? -2 : 0;
    }
    *st = (al_report_stats){R.sm.n, R.n_ok, R.n_groups, R.n_front, R.plots};
    summary_free(&R.sm);
    free(R.g);
    return rc;
}
