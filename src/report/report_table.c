/*
 * report_table.c - the configurations table as cells (heading, text,
 * sort value), which report.md and index.html both print, and the number
 * formats of the report's tables. See report_table.h.
 */
#include "report_table.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ formats */

void al_report_fmt_int(char *buf, size_t n, double v)
{
    if (isnan(v)) {
        snprintf(buf, n, "–");
        return;
    }
    char digits[32];
    snprintf(digits, sizeof digits, "%.0f", v);
    size_t len = strlen(digits), o = 0;
    for (size_t i = 0; i < len && o + 2 < n; i++) {
        if (i && (len - i) % 3 == 0 && digits[i - 1] != '-') buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = 0;
}

void al_report_fmt_slope(char *buf, size_t n, const group_trend *t)
{
    if (!t->n) snprintf(buf, n, "–");
    else snprintf(buf, n, "%+.4f%s", t->slope, al_report_still_improving(t) ? "*" : "");
}

void al_report_fmt_ci(char *buf, size_t n, const al_stat *s)
{
    if (isnan(s->mean)) snprintf(buf, n, "–");
    else if (s->n > 1) snprintf(buf, n, "%.4f ± %.4f", s->mean, s->ci95);
    else snprintf(buf, n, "%.4f", s->mean);
}

void al_report_fmt_sd(char *buf, size_t n, const al_stat *s)
{
    if (s->n > 1) snprintf(buf, n, "%.4f", s->sd);
    else snprintf(buf, n, "–");
}

/* With one pair: its mean alone, "(n = 1)", as one pair gives no interval. */
void al_report_fmt_delta(char *buf, size_t n, const al_stat *d)
{
    if (isnan(d->mean) || d->n == 0) snprintf(buf, n, "–");
    else if (d->n > 1)
        snprintf(buf, n, "%+.4f [%+.4f, %+.4f]", d->mean, d->mean - d->ci95, d->mean + d->ci95);
    else snprintf(buf, n, "%+.4f (n = 1, no interval)", d->mean);
}

void al_report_fmt_setting(char *buf, size_t n, double v)
{
    if (isnan(v)) snprintf(buf, n, "–");
    else snprintf(buf, n, "%.0f", v);
}

/* ------------------------------------------------------------ columns */

int al_report_any_col(const al_report_analysis *A, size_t off)
{
    for (int i = 0; i < A->sm.n; i++)
        if (!isnan(*(const double *)((const char *)&A->sm.rows[i] + off))) return 1;
    return 0;
}

int al_report_any_setting(const al_report_analysis *A, int k)
{
    for (int i = 0; i < A->sm.n; i++)
        if (al_report_setting(&A->sm, &A->sm.rows[i], k)[0]) return 1;
    return 0;
}

int al_report_any_unmasked(const al_report_analysis *A)
{
    for (int i = 0; i < A->sm.n; i++)
        if (A->sm.rows[i].causal == 0) return 1;
    return 0;
}

int al_report_table_width(const al_report_analysis *A)
{
    return 24 + A->sm.n_set;   /* either table's columns, with room to spare */
}

/* ------------------------------------------------------------ order */

/* Bytes held at the report context (per token where an older summary
 * lacks the whole cache); NaN sorts last. */
static double held(const group *g) { return al_report_held(g->first); }

static int cmp_nan_last(double a, double b)
{
    if (isnan(a) || isnan(b)) return isnan(a) - isnan(b);
    return (a > b) - (a < b);
}

static int by_cost(const void *pa, const void *pb, void *pA)
{
    const al_report_analysis *A = pA;
    int a = *(const int *)pa, b = *(const int *)pb;
    const group *ga = &A->g[a], *gb = &A->g[b];
    int c = cmp_nan_last(held(ga), held(gb));
    if (!c) {   /* then the better quality first */
        double qa = ga->quality.q.n ? ga->quality.q.mean : NAN;
        double qb = gb->quality.q.n ? gb->quality.q.mean : NAN;
        c = A->use_acc ? cmp_nan_last(-qa, -qb) : cmp_nan_last(qa, qb);
    }
    if (!c) c = strcmp(ga->first->group, gb->first->group);
    return c ? c : (a > b) - (a < b);
}

void al_report_table_order(const al_report_analysis *A, int *ix)
{
    for (int k = 0; k < A->n_groups; k++) ix[k] = k;
    qsort_r(ix, (size_t)A->n_groups, sizeof *ix, by_cost, (void *)A);
}

/* The row being filled: next cell under heading head, sorted by v; its
 * text is the caller's to write. */
typedef struct table_row {
    al_report_cell *c;
    int n;
} table_row;

static char *put(table_row *t, const char *head, double v)
{
    al_report_cell *c = &t->c[t->n++];
    snprintf(c->head, sizeof c->head, "%s", head);
    c->text[0] = 0;
    c->v = v;
    return c->text;
}

#define CELL AL_REPORT_CELL_LEN

/* A setting's cell sorts as a number when it is one ("16"), else by text. */
static double setting_value(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    return s[0] && !*end ? v : NAN;
}

/* "4.1e+10" and the like: FLOPs and bytes span too many digits for commas. */
static void fmt_big(char *buf, size_t n, double v)
{
    if (isnan(v)) snprintf(buf, n, "–");
    else snprintf(buf, n, "%.3g", v);
}

/* The cost cells (docs/costs.md): training FLOPs, then at the report
 * context the bytes and FLOPs of one decode step per token and their ratio. */
static void cost_cells(table_row *t, const row *w)
{
    fmt_big(put(t, "train FLOPs", w->train_flops), CELL, w->train_flops);
    al_report_fmt_int(put(t, "decode bytes read/token", w->decode_bytes), CELL, w->decode_bytes);
    al_report_fmt_int(put(t, "decode FLOPs/token", w->decode_fpt), CELL, w->decode_fpt);
    fmt_big(put(t, "FLOPs/byte", w->intensity), CELL, w->intensity);
}

/* "gqa (n_kv_head 2)", and ", no causal mask" for the ablation: the
 * variant and the settings its row has, in one cell. */
static void variant_cell(table_row *t, const al_report_analysis *A, const row *w)
{
    char *s = put(t, "variant", NAN);
    int o = snprintf(s, CELL, "%s", w->variant[0] ? w->variant : "–"), open = 0;
    for (int k = 0; k < A->sm.n_set && o < CELL; k++) {
        const char *v = al_report_setting(&A->sm, w, k);
        if (!v[0]) continue;
        o += snprintf(s + o, CELL - o, "%s%s %s", open++ ? ", " : " (",
                      al_report_setting_name(&A->sm, k), v);
    }
    if (open && o < CELL) o += snprintf(s + o, CELL - o, ")");
    if (w->causal == 0 && o < CELL) snprintf(s + o, CELL - o, ", **no causal mask**");
}

/* The main table's columns about the model: what it is, its size, its
 * cache per token and at the report context. */
static void model_cells(table_row *t, const al_report_analysis *A, const group *g)
{
    const row *w = g->first;
    if (g->is_base) snprintf(put(t, "configuration", NAN), CELL, "%s (baseline)", w->group);
    else al_report_vs_name(A, g, put(t, "configuration", NAN), CELL);
    variant_cell(t, A, w);
    al_report_fmt_int(put(t, "params", w->params), CELL, w->params);
    al_report_fmt_int(put(t, "KV bytes/token", w->kv), CELL, w->kv);
    if (al_report_any_col(A, offsetof(row, kv_at))) {   /* "139,264 (256)" */
        char a[64], b[64];
        al_report_fmt_int(a, sizeof a, w->kv_at);
        al_report_fmt_int(b, sizeof b, w->kv_context);
        char *s = put(t, "KV cache at context (tokens)", w->kv_at);
        if (isnan(w->kv_at)) snprintf(s, CELL, "%s", a);
        else snprintf(s, CELL, "%s (%s)", a, b);
    }
}

/* Recall tasks: "3/4 (median step 200); vs baseline 1:0, p 1" */
static void solved_cell(table_row *t, const group *g)
{
    char *s = put(t, "solved", g->solved.seeds);
    int o = snprintf(s, CELL, "%d/%d", g->solved.seeds, g->quality.q.n);
    if (g->solved.step_n) o += snprintf(s + o, CELL - o, " (median step %.0f)", g->solved.step);
    if (isfinite(g->solved.p))
        snprintf(s + o, CELL - o, "; vs baseline %d:%d, p %.2g%s", g->solved.only_base,
                 g->solved.only_this, g->solved.p, g->solved.holm ? ", **differs**" : "");
}

/* The main table's columns about quality: seeds, the metric, the
 * comparison with the baseline, the front. */
static void quality_cells(table_row *t, const al_report_analysis *A, const group *g)
{
    char head[128];
    const al_stat *q = &g->quality.q;
    snprintf(put(t, "seeds", q->n), CELL, "%d%s", q->n, g->n_open ? "+" : "");
    snprintf(head, sizeof head, "%s (mean ± 95 %%)", A->metric);
    char *s = put(t, head, q->n ? q->mean : NAN);
    if (q->n) al_report_fmt_ci(s, CELL, q);
    else snprintf(s, CELL, "– (%s)", g->n_ok ? "pending" : g->first->status);
    if (A->use_acc) solved_cell(t, g);
    s = put(t, "Δ vs baseline [95 %]", g->is_base ? NAN : g->vs.delta.mean);
    if (g->is_base) snprintf(s, CELL, "(baseline)");
    else al_report_fmt_delta(s, CELL, &g->vs.delta);
    snprintf(put(t, "resolved (Holm)", g->is_base ? NAN : g->vs.resolved), CELL, "%s",
             g->is_base ? "" : g->vs.resolved ? "**yes**" : "no");
    snprintf(put(t, "Pareto", g->front.on ? 1 + g->front.resolved : 0), CELL, "%s",
             g->front.on ? (g->front.resolved ? "**yes**" : "yes (not resolved)") : "");
}

int al_report_table_row(const al_report_analysis *A, const group *g, al_report_cell *c)
{
    table_row t = {c, 0};
    model_cells(&t, A, g);
    quality_cells(&t, A, g);
    AL_ASSERT(t.n <= al_report_table_width(A));
    return t.n;
}

/* The second table: the settings one by one (to sort by), the model's
 * shape, the spread, validation, training's trend and speed, the other
 * costs. */
int al_report_detail_row(const al_report_analysis *A, const group *g, al_report_cell *c)
{
    table_row t = {c, 0};
    const row *w = g->first;
    snprintf(put(&t, "configuration", NAN), CELL, "%s", w->group);
    for (int k = 0; k < A->sm.n_set; k++) {
        if (!al_report_any_setting(A, k)) continue;
        const char *v = al_report_setting(&A->sm, w, k);
        snprintf(put(&t, al_report_setting_name(&A->sm, k), setting_value(v)), CELL, "%s",
                 v[0] ? v : "–");
    }
    al_report_fmt_setting(put(&t, "n_layer", w->n_layer), CELL, w->n_layer);
    al_report_fmt_setting(put(&t, "d_ff", w->d_ff), CELL, w->d_ff);
    if (al_report_any_col(A, offsetof(row, params_to)))
        al_report_fmt_int(put(&t, "matched to", w->params_to), CELL, w->params_to);
    al_report_fmt_sd(put(&t, "sd", g->quality.q.n > 1 ? g->quality.q.sd : NAN), CELL,
                     &g->quality.q);
    al_report_fmt_ci(put(&t, "val loss", g->quality.val.mean), CELL, &g->quality.val);
    al_report_fmt_slope(put(&t, "slope/100 steps", g->trend.n ? g->trend.slope : NAN), CELL,
                        &g->trend);
    al_report_fmt_int(put(&t, "tokens/s", g->quality.tok_s), CELL, g->quality.tok_s);
    if (al_report_any_col(A, offsetof(row, train_flops))) cost_cells(&t, w);
    AL_ASSERT(t.n <= al_report_table_width(A));
    return t.n;
}
