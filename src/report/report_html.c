/*
 * report_html.c - index.html: report.md's sections as HTML
 * (report_mdhtml.c), with the configurations table (report_table.c)
 * sortable and linked to the trials' folders, and the data the page's
 * script (page/report.js, embedded with page/report.css at build time)
 * draws the trade-off plot and the curves from. One file: a browser opens
 * it from disk and fetches nothing (its Content-Security-Policy forbids
 * any fetch). See docs/report-page.md.
 */
#include "report_html.h"
#include "report_mdhtml.h"
#include "report_plot.h"
#include "report_table.h"

#include "report_page_assets.h"   /* generated: al_page_css, al_page_js */

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------ data */

static json_t *num(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* A name from summary.csv (hand-editable: it may not be UTF-8), as a JSON
 * string; bytes of a name that is not UTF-8 beyond ASCII become '?'. */
static json_t *str(const char *s)
{
    json_t *j = json_string(s);
    if (j) return j;
    char *t = strdup(s);
    AL_ASSERT(t);
    for (char *p = t; *p; p++)
        if ((unsigned char)*p >= 0x80) *p = '?';
    j = json_string(t);
    free(t);
    AL_ASSERT(j);
    return j;
}

/* Costs from summary.csv columns other writers add, when the sweep has
 * them: each configuration's mean over its selected ok trials. */
static const struct extra_cost {
    const char *col, *label, *unit;
    int higher;   /* higher is better (a rate), so the front runs the other way */
} extra_costs[] = {
    {"decode_bytes_per_token", "bytes read per decoded token", "bytes", 0},
    {"train_flops", "training FLOPs", "flops", 0},
    {"decode_tokens_per_s", "decode tokens/s (measured)", "rate", 1},
};

static double group_col_mean(const al_report_analysis *A, const group *g, int col)
{
    double sum = 0;
    int n = 0;
    for (int i = 0; i < A->sm.n; i++) {
        const row *w = &A->sm.rows[i];
        const char *s = A->sm.t.cells[i][col];
        char *end;
        if (strcmp(w->group, g->first->group) || !w->selected || !al_report_row_ok(w) || !s[0])
            continue;
        double v = strtod(s, &end);
        if (*end || !isfinite(v)) continue;
        sum += v, n++;
    }
    return n ? sum / n : NAN;
}

static void add_cost(json_t *costs, const char *key, const char *label, const char *unit,
                     int higher)
{
    json_array_append_new(costs, json_pack("{s:s, s:s, s:s, s:b}", "key", key, "label", label,
                                           "unit", unit, "higher", higher));
}

/* The cost axes the page offers, first the default: the memory held at
 * the report's context when every row has it at that one context, bytes
 * per token, then the extra columns present. */
static json_t *cost_axes(const al_report_analysis *A)
{
    json_t *costs = json_array();
    /* report.md's decision (al_report_held_context): rows at two contexts
     * have no common memory axis, so the page offers none either */
    long ctx = al_report_held_context(A);
    if (ctx > 0) {
        char label[128];
        snprintf(label, sizeof label, "KV-cache bytes held at %ld tokens (all layers)", ctx);
        add_cost(costs, "kv_at", label, "bytes", 0);
    }
    add_cost(costs, "kv", "KV-cache bytes per token (all layers)", "bytes", 0);
    for (size_t k = 0; k < sizeof extra_costs / sizeof *extra_costs; k++) {
        int col = al_csv_col(&A->sm.t, extra_costs[k].col);
        for (int g = 0; col >= 0 && g < A->n_groups; g++)
            if (!isnan(group_col_mean(A, &A->g[g], col))) {
                add_cost(costs, extra_costs[k].col, extra_costs[k].label, extra_costs[k].unit,
                         extra_costs[k].higher);
                break;
            }
    }
    return costs;
}

static json_t *group_costs(const al_report_analysis *A, const group *g)
{
    json_t *c = json_pack("{s:o, s:o}", "kv", num(g->first->kv), "kv_at", num(g->first->kv_at));
    for (size_t k = 0; k < sizeof extra_costs / sizeof *extra_costs; k++) {
        int col = al_csv_col(&A->sm.t, extra_costs[k].col);
        if (col >= 0) json_object_set_new(c, extra_costs[k].col, num(group_col_mean(A, g, col)));
    }
    return c;
}

/* The mean validation curve, by step and by tokens, with the lowest and
 * highest seed at each point (the band curves.gp draws); null without one.
 * *ytop rises to its second point (the plot then shows learning rather
 * than the initial loss, as curves.gp does). */
static json_t *group_curve_json(const al_report_analysis *A, const group *g, double *ytop)
{
    double *step, *val, *lo, *hi, tps = g->first->tokens_per_step;
    int n = al_report_group_curve(A, g, &step, &val, &lo, &hi);
    json_t *s = json_array(), *t = json_array(), *v = json_array(), *l = json_array(),
           *h = json_array();
    int any = 0;
    for (int r = 0; r < n; r++) {
        json_array_append_new(s, num(step[r]));
        json_array_append_new(t, num(isnan(tps) ? step[r] : step[r] * tps));
        json_array_append_new(v, num(val[r]));
        json_array_append_new(l, num(lo[r]));
        json_array_append_new(h, num(hi[r]));
        any |= !isnan(val[r]);
        if (r == 1 && n > 2 && !(hi[r] <= *ytop)) *ytop = hi[r];
    }
    free(step), free(val), free(lo), free(hi);
    if (!any) {
        json_decref(s), json_decref(t), json_decref(v), json_decref(l), json_decref(h);
        return json_null();
    }
    return json_pack("{s:o, s:o, s:o, s:o, s:o}", "step", s, "tokens", t, "val", v, "lo", l,
                     "hi", h);
}

static json_t *group_json(const al_report_analysis *A, const group *g, double *ytop)
{
    const al_stat *q = &g->quality.q, *d = &g->vs.delta;
    int iv = !g->is_base && d->n > 1;
    json_t *o = json_pack("{s:o, s:o, s:b, s:i, s:o, s:o, s:b, s:b, s:b, s:o}",
        "name", str(g->first->group), "variant", str(g->first->variant), "base", g->is_base,
        "n", q->n, "q", num(q->mean), "ci", num(q->n > 1 ? q->ci95 : 0),
        "drawable", al_report_drawable(g), "front", g->front.on,
        "place_resolved", g->front.resolved, "against", str(g->front.against));
    AL_ASSERT(o);
    json_object_set_new(o, "vs", str(A->g[g->base].first->group));   /* its baseline */
    json_object_set_new(o, "delta", num(g->is_base ? NAN : d->mean));
    json_object_set_new(o, "delta_lo", num(iv ? d->mean - d->ci95 : NAN));
    json_object_set_new(o, "delta_hi", num(iv ? d->mean + d->ci95 : NAN));
    json_object_set_new(o, "resolved", json_boolean(g->vs.resolved));
    json_object_set_new(o, "cost", group_costs(A, g));
    json_object_set_new(o, "curve", group_curve_json(A, g, ytop));
    return o;
}

static json_t *page_data(const al_report_analysis *A)
{
    json_t *cfgs = json_array();
    double ytop = NAN;
    for (int k = 0; k < A->n_groups; k++)
        json_array_append_new(cfgs, group_json(A, &A->g[k], &ytop));
    json_t *d = json_pack("{s:o, s:s, s:b, s:o, s:o}", "name", str(A->mk.name), "metric",
                          A->metric, "maximize", A->use_acc, "costs", cost_axes(A), "configs", cfgs);
    AL_ASSERT(d);
    json_object_set_new(d, "curve_ytop", num(isnan(ytop) ? NAN : ytop * 1.02));
    /* by tokens only when that is another curve than by step */
    json_object_set_new(d, "curve_by_tokens", json_boolean(al_report_tokens_per_step_differ(A)));
    return d;
}

/* The data as JSON inside <script>: '<', '>' and '&' as \u escapes (they
 * occur only inside strings), so no name can close the element. */
static void write_data(FILE *f, const al_report_analysis *A)
{
    json_t *d = page_data(A);
    char *s = json_dumps(d, JSON_COMPACT | JSON_REAL_PRECISION(10));
    AL_ASSERT(s);
    fputs("<script type=\"application/json\" id=\"al-data\">", f);
    for (const char *p = s; *p; p++) {
        if (*p == '<' || *p == '>' || *p == '&') fprintf(f, "\\u%04x", (unsigned char)*p);
        else fputc(*p, f);
    }
    fputs("</script>\n", f);
    free(s);
    json_decref(d);
}

/* ------------------------------------------------------------ table */

static int exists(const al_report_analysis *A, const char *trial, const char *file)
{
    char path[DIR_LEN + 600];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s/%s", A->dir, trial, file);
    return stat(path, &st) == 0;
}

static void trial_link(FILE *f, const char *trial, const char *file, const char *text)
{
    fputs("<a href=\"", f);
    al_html_path(f, trial, strlen(trial));
    fputc('/', f);
    al_html_path(f, file, strlen(file));
    fputs("\">", f);
    al_html_text(f, text, strlen(text));
    fputs("</a>", f);
}

/* Under a configuration's name, folded: each of its trials' folders, with
 * its config.yaml and metrics.csv where they are. */
static void trial_links(FILE *f, const al_report_analysis *A, const group *g)
{
    static const char *const files[] = {"config.yaml", "metrics.csv"};
    int n = 0;
    for (int i = 0; i < A->sm.n; i++)
        n += !strcmp(A->sm.rows[i].group, g->first->group) && exists(A, A->sm.rows[i].trial, "");
    if (!n) return;
    fprintf(f, "<details class=\"al-trials\"><summary>%d trial%s</summary>", n, n > 1 ? "s" : "");
    for (int i = 0; i < A->sm.n; i++) {
        const char *t = A->sm.rows[i].trial;
        if (strcmp(A->sm.rows[i].group, g->first->group) || !exists(A, t, "")) continue;
        fputs("<div>", f);
        trial_link(f, t, "", t);
        for (int k = 0; k < 2; k++) {
            if (!exists(A, t, files[k])) continue;
            fputs(" · ", f);
            trial_link(f, t, files[k], files[k]);
        }
        fputs("</div>", f);
    }
    fputs("</details>", f);
}

static void cell(FILE *f, const al_report_cell *c)
{
    if (isfinite(c->v)) fprintf(f, "<td data-v=\"%.17g\">", c->v);
    else fputs("<td>", f);
    al_md_inline(f, c->text, strlen(c->text));
}

static void configs_table(FILE *f, const al_report_analysis *A)
{
    if (!A->n_groups) return;
    al_report_cell *c = al_calloc((size_t)al_report_table_width(A), sizeof *c);
    int n = al_report_table_row(A, &A->g[0], c);
    char id[96];
    fputs("<div class=\"al-scroll\"><table id=\"al-configs\" class=\"al-md\">\n<thead><tr>", f);
    for (int i = 0; i < n; i++) {
        al_html_slug(id, sizeof id, c[i].head, strlen(c[i].head));
        fprintf(f, "<th data-col=\"%s\">", id);
        al_html_text(f, c[i].head, strlen(c[i].head));
        fputs("</th>", f);
    }
    fputs("</tr></thead>\n<tbody>\n", f);
    int *ix = al_calloc((size_t)A->n_groups, sizeof *ix);
    al_report_table_order(A, ix);   /* report.md's order: cheapest first */
    for (int k = 0; k < A->n_groups; k++) {
        const group *g = &A->g[ix[k]];
        n = al_report_table_row(A, g, c);
        fprintf(f, "<tr%s data-name=\"", g->is_base ? " class=\"al-base\"" : "");
        al_html_text(f, g->first->group, strlen(g->first->group));
        fputs("\">", f);
        for (int i = 0; i < n; i++) {
            cell(f, &c[i]);
            if (i == 0) trial_links(f, A, g);
            fputs("</td>", f);
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody></table></div>\n", f);
    free(ix), free(c);
}

/* ------------------------------------------------------------ page */

/* One "## " section of report.md (the part before the first: the title
 * and introduction, title ""). */
typedef struct chunk {
    const char *s;
    size_t n;
    char title[160];
} chunk;

/* Split md at its "## " lines outside ``` fences; at most cap chunks. */
static int split(const char *md, size_t len, chunk *c, int cap)
{
    int n = 0, fence = 0;
    c[0] = (chunk){md, 0, ""};
    for (const char *p = md, *end = md + len; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (ll >= 3 && memcmp(p, "```", 3) == 0) fence = !fence;
        if (!fence && ll > 3 && memcmp(p, "## ", 3) == 0 && n + 1 < cap) {
            c[n].n = (size_t)(p - c[n].s);
            c[++n] = (chunk){p, 0, ""};
            snprintf(c[n].title, sizeof c[n].title, "%.*s", (int)(ll - 3), p + 3);
        }
        p += ll + 1;
    }
    c[n].n = (size_t)(md + len - c[n].s);
    return n + 1;
}

static void toc(FILE *f, const chunk *c, int n)
{
    char id[96];
    fputs("<nav class=\"al-toc\">", f);
    for (int k = 1; k < n; k++) {
        al_html_slug(id, sizeof id, c[k].title, strlen(c[k].title));
        fprintf(f, "<a href=\"#%s\">", id);
        al_md_inline(f, c[k].title, strlen(c[k].title));
        fputs("</a> ", f);
    }
    fputs("</nav>\n", f);
}

static const char plot_figures[] =
    "<p>Drawn by this page from the data it holds (the same numbers as <code>summary.csv</code>"
    " and the tables above). Choose the cost to plot against; point at a configuration for its "
    "figures.</p>\n"
    "<div class=\"al-bar\"><label>Cost axis: <select id=\"al-cost\"></select></label></div>\n"
    "<div id=\"al-tradeoff\" class=\"al-fig\"></div>\n"
    "<p id=\"al-tradeoff-note\" class=\"al-note\"></p>\n"
    "<h3 id=\"validation-curves\">Validation curves</h3>\n"
    "<p>Validation loss against optimizer step (and against tokens trained when the "
    "configurations train different tokens per step): the mean over seeds, with a band from "
    "the lowest to the highest seed. "
    "Tick a configuration to show or hide its curve.</p>\n"
    "<div class=\"al-bar\" id=\"al-curve-toggles\"></div>\n"
    "<div id=\"al-curves\" class=\"al-fig\"></div>\n"
    "<noscript><p>The plots above are drawn by the page's script; without it, "
    "<code>report.md</code> and the pictures beside this page show them.</p></noscript>\n"
    "<h3 id=\"static-pictures\">The pictures beside this page</h3>\n";

/* A section: the configurations get the sortable, linked table in place
 * of report.md's; the plots get the page's own before report.md's words. */
static void section(FILE *f, const al_report_analysis *A, const chunk *c)
{
    char id[96];
    const char *body = memchr(c->s, '\n', c->n);
    size_t n = body ? c->n - (size_t)(body - c->s) : 0;
    int configs = strcmp(c->title, "Configurations") == 0, plots = strcmp(c->title, "Plots") == 0;
    al_html_slug(id, sizeof id, c->title, strlen(c->title));
    fprintf(f, "<section id=\"s-%s\">\n<h2 id=\"%s\">", id, id);
    al_md_inline(f, c->title, strlen(c->title));
    fputs("</h2>\n", f);
    if (configs) configs_table(f, A);
    if (plots) fputs(plot_figures, f);
    al_md_blocks(f, body ? body : "", n, !configs);
    fputs("</section>\n", f);
}

static void page(FILE *f, const al_report_analysis *A, const char *md, size_t len)
{
    chunk c[64];
    int n = split(md, len, c, 64);
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<meta name=\"generator\" content=\"attnlab report\">\n<title>Sweep report: ", f);
    al_html_text(f, A->mk.name, strlen(A->mk.name));
    fprintf(f, "</title>\n<style>\n%s</style>\n</head>\n<body>\n<main>\n", al_page_css);
    al_md_blocks(f, c[0].s, c[0].n, 1);
    fputs("<p class=\"al-note\">This page is <code>report.md</code> with its tables sortable "
          "(click a heading) and its plots drawn from the data it holds; the files it links to "
          "are beside it.</p>\n", f);
    toc(f, c, n);
    for (int k = 1; k < n; k++) section(f, A, &c[k]);
    fputs("</main>\n<div id=\"al-tip\" class=\"al-tip\" role=\"tooltip\" hidden></div>\n", f);
    write_data(f, A);
    fprintf(f, "<script>\n%s</script>\n</body>\n</html>\n", al_page_js);
}

int al_report_write_html(const al_report_analysis *A, const char *md, size_t md_len,
                         al_err *e)
{
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96];
    FILE *f = al_report_open(A, "index.html", path, tmp, e);
    if (!f) return -1;
    page(f, A, md, md_len);
    return al_commit_atomic(f, tmp, path, e);
}
