/*
 * report_summary.c - what the report reads of a results directory before
 * it computes anything: summary.csv into rows (report_rows.h), and
 * sweep.json into the sweep's name, file, --set assignments, claims and
 * plan of seeds in rounds.
 */
#include "report_rows.h"
#include "report_claims.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "al_util.h"

/* ------------------------------------------------------------ rows */

/* A numeric cell: blank (or absent) is NAN. */
static int num_cell(const al_csv *t, int r, const char *col, const char *path, double *v,
                    al_err *e)
{
    const char *s = al_csv_cell(t, r, col);
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

/* A boolean column: true/false, or 1/0 as older summaries wrote some;
 * -1 when empty or absent. */
static int bool_cell(const al_csv *t, int r, const char *col, const char *path, int *v,
                     al_err *e)
{
    const char *s = al_csv_cell(t, r, col);
    int rc = al_csv_bool(s, v);
    if (rc == -1) *v = -1;
    if (rc == -2)
        return al_errf(e, "%s:%d: error: column '%s': '%.40s' is not true or false", path,
                       t->line[r], col, s);
    return 0;
}

static int parse_row(const al_csv *t, int r, const char *path, row *w, al_err *e)
{
    static const char *const cols[] = {"kv_bytes_per_token", "params", "params_to",
        "n_layer", "d_ff", "seed", "tokens_per_step", "final_train_loss", "val_loss",
        "best_val_loss", "val_accuracy", "test_loss", "test_accuracy", "tokens_per_s",
        "wall_s", "steps", "kv_context", "kv_bytes_at_context",
        "train_flops_per_token", "train_flops", "decode_flops_per_token",
        "decode_bytes_per_token", "arithmetic_intensity", "scaling_size", "scaling_flops",
        NULL};
    double *dst[] = {&w->kv, &w->params, &w->params_to, &w->n_layer, &w->d_ff,
        &w->seed, &w->tokens_per_step, &w->train_loss, &w->val_loss, &w->best_val_loss,
        &w->val_acc, &w->test_loss, &w->test_acc, &w->tok_s, &w->wall_s, &w->steps,
        &w->kv_context, &w->kv_at, &w->train_fpt, &w->train_flops, &w->decode_fpt,
        &w->decode_bytes, &w->intensity, &w->scaling_size, &w->scaling_flops};
    for (int i = 0; cols[i]; i++)
        if (num_cell(t, r, cols[i], path, dst[i], e)) return -1;
    w->trial = al_csv_cell(t, r, "trial");
    w->variant = al_csv_cell(t, r, "variant");
    w->status = al_csv_cell(t, r, "status");
    w->reason = al_csv_cell(t, r, "reason");
    w->tuned = al_csv_cell(t, r, "tuned");
    w->select_by = al_csv_cell(t, r, "select_by");
    w->cpu = al_csv_cell(t, r, "cpu_model");
    w->blas_core = al_csv_cell(t, r, "blas_core");
    w->threads = al_csv_cell(t, r, "threads");
    w->model = al_csv_cell(t, r, "model");
    w->stage = al_csv_cell(t, r, "stage");
    w->upstream = al_csv_cell(t, r, "upstream");
    if (!w->trial[0]) return al_errf(e, "%s:%d: error: empty 'trial'", path, t->line[r]);
    const char *cfg = al_csv_cell(t, r, "config"), *grp = al_csv_cell(t, r, "group");
    if (cfg[0]) snprintf(w->config, sizeof w->config, "%s", cfg);
    else strip_seed(w->config, sizeof w->config, w->trial);
    snprintf(w->group, sizeof w->group, "%s", grp[0] ? grp : w->config);
    if (bool_cell(t, r, "causal", path, &w->causal, e) ||
        bool_cell(t, r, "baseline", path, &w->baseline, e))
        return -1;
    w->baseline = w->baseline == 1;   /* absent: not marked */
    w->q = NAN;
    return 0;
}

/* The columns summary.csv has besides the settings (al_sweep_results.h),
 * whether or not this file reads them: every other column is a setting. */
static const char *const own_cols[] = {"trial", "config", "group", "tuned", "select_by",
    "baseline", "variant", "causal", "seed", "n_layer", "d_ff", "params", "params_to",
    "kv_bytes_per_token", "kv_context", "kv_bytes_at_context", "steps", "tokens_per_step",
    "final_train_loss", "val_loss",
    "best_val_loss", "val_accuracy", "test_loss", "test_accuracy", "tokens_per_s", "wall_s",
    "status", "reason", "stage", "upstream", "init_convert", "upstream_steps",
    "init_val_loss", "cpu_model", "blas_core", "threads", "train_flops_per_token",
    "train_flops", "decode_flops_per_token", "decode_bytes_per_token", "arithmetic_intensity",
    "decode_context", "decode_batch", "decode_tokens_per_s", "scaling_size", "scaling_flops",
    "model", NULL};

static void find_settings(summary *s)
{
    s->set_col = al_calloc((size_t)s->t.n_cols + 1, sizeof *s->set_col);
    for (int c = 0; c < s->t.n_cols; c++) {
        int own = 0;
        for (int i = 0; own_cols[i] && !own; i++) own = strcmp(s->t.head[c], own_cols[i]) == 0;
        if (!own) s->set_col[s->n_set++] = c;
    }
}

/* The bytes each row holds as the report compares them: at the report
 * context when every row has its whole cache at one context, else every
 * row per token (never a mix of the two). */
static void set_held(summary *s)
{
    long c = 0;
    for (int i = 0; i < s->n; i++) {
        const row *w = &s->rows[i];
        if (!isfinite(w->kv_at) || !(w->kv_context > 0) || (c && (long)w->kv_context != c)) {
            c = 0;
            break;
        }
        c = (long)w->kv_context;
    }
    s->held_context = c;
    for (int i = 0; i < s->n; i++) s->rows[i].held = c ? s->rows[i].kv_at : s->rows[i].kv;
}

int al_report_summary_read(const char *dir, summary *s, al_err *e)
{
    static const char *const required[] = {"trial", "kv_bytes_per_token", "val_loss",
                                           "status", NULL};
    char path[DIR_LEN + 32];
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    memset(s, 0, sizeof *s);
    if (al_csv_read(path, &s->t, e)) return -1;
    for (int i = 0; required[i]; i++)
        if (al_csv_col(&s->t, required[i]) < 0)
            return al_errf(e, "%s:1: error: no column '%s' (a sweep's summary has trial, "
                           "kv_bytes_per_token, val_loss, status, ...)", path, required[i]);
    find_settings(s);
    s->rows = al_calloc((size_t)s->t.n_rows + 1, sizeof *s->rows);
    for (int r = 0; r < s->t.n_rows; r++)
        if (parse_row(&s->t, r, path, &s->rows[r], e)) return -1;
    s->n = s->t.n_rows;
    set_held(s);
    return 0;
}

void al_report_summary_free(summary *s)
{
    al_csv_free(&s->t);
    free(s->rows);
    free(s->set_col);
}

/* The plan of seeds in rounds, when sweep.json has one that holds
 * together (else: not a plan, ignored). */
static void read_rounds(const json_t *q, report_rounds *seq)
{
    int mn = (int)json_integer_value(json_object_get(q, "min"));
    int mx = (int)json_integer_value(json_object_get(q, "max"));
    int st = (int)json_integer_value(json_object_get(q, "step"));
    memset(seq, 0, sizeof *seq);
    if (q && mn >= 2 && mx >= mn && mx <= 1000 && st >= 1)
        seq->on = 1, seq->plan = (al_seq_plan){mn, mx, st, 0.05};
}

void al_report_read_marker(const char *dir, report_marker *mk, report_rounds *seq)
{
    char path[DIR_LEN + 32];
    const char *base = strrchr(dir, '/');
    memset(mk, 0, sizeof *mk);
    memset(seq, 0, sizeof *seq);
    snprintf(mk->name, sizeof mk->name, "%s", base && base[1] ? base + 1 : dir);
    snprintf(path, sizeof path, "%s/sweep.json", dir);
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    if (!j) return;
    const char *v;
    if ((v = json_string_value(json_object_get(j, "experiment"))))
        snprintf(mk->name, sizeof mk->name, "%s", v);
    if ((v = json_string_value(json_object_get(j, "file"))))
        snprintf(mk->file, sizeof mk->file, "%s", v);
    if ((v = json_string_value(json_object_get(j, "description"))))
        snprintf(mk->description, sizeof mk->description, "%s", v);
    read_rounds(json_object_get(j, "seeds_until"), seq);
    const json_t *sets = json_object_get(j, "sets");
    for (size_t i = 0; i < json_array_size(sets); i++) {
        size_t len = strlen(mk->sets);
        if ((v = json_string_value(json_array_get(sets, i))))
            snprintf(mk->sets + len, sizeof mk->sets - len, " --set '%s'", v);
    }
    al_report_claims_read(mk, json_object_get(j, "claims"));
    json_decref(j);
}
