/*
 * attnmap.c - attention maps and head statistics as CSV files and gnuplot
 * pictures (al_attnmap.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "al_attnmap.h"
#include "al_gnuplot.h"

#define PATH_LEN 4096
#define LABEL_PX 12          /* plot-area pixels per token when labelled */
#define AREA_MIN 220
#define AREA_MAX 576
#define PANEL_PAD_X 110
#define PANEL_PAD_Y 90
#define TITLE_PX 30

/* ------------------------------------------------------------ layout */

static int grid_cols(int n)
{
    int c = 1;
    while (c * c < n) c++;
    return c;
}

static int plot_area(int T)
{
    int a = LABEL_PX * T;
    return a < AREA_MIN ? AREA_MIN : a > AREA_MAX ? AREA_MAX : a;
}

static int labelled(int T) { return LABEL_PX * T <= AREA_MAX; }

void al_attnmap_png_size(int n_heads, int T, int *width, int *height)
{
    int cols = grid_cols(n_heads), rows = (n_heads + cols - 1) / cols, a = plot_area(T);
    *width = cols * (a + PANEL_PAD_X);
    *height = rows * (a + PANEL_PAD_Y) + TITLE_PX;
}

/* ------------------------------------------------------------ files */

typedef struct out_file {
    char path[PATH_LEN], tmp[PATH_LEN + 32];
    FILE *f;
} out_file;

static int out_open(out_file *o, const char *dir, const char *name, al_err *e)
{
    snprintf(o->path, sizeof o->path, "%s/%s", dir, name);
    o->f = al_open_atomic(o->path, o->tmp, sizeof o->tmp, e);
    return o->f ? 0 : -1;
}

static int out_commit(out_file *o, al_err *e)
{
    return al_commit_atomic(o->f, o->tmp, o->path, e);
}

/* A token as label text: the byte itself when printable (space, newline
 * and tab as visible symbols), <xx> otherwise; the id for a vocabulary
 * that is not bytes. Quotes and backslashes are escaped for gnuplot's
 * double-quoted strings (esc != 0) or doubled for CSV (esc == 0). */
static void token_text(char *buf, size_t n, int tok, int bytes, int esc)
{
    if (!bytes) snprintf(buf, n, "%d", tok);
    else if (tok == ' ') snprintf(buf, n, "\u2423");
    else if (tok == '\n') snprintf(buf, n, "\u21b5");
    else if (tok == '\t') snprintf(buf, n, "\u21e5");
    else if (tok == '"') snprintf(buf, n, esc ? "\\\"" : "\"\"");
    else if (tok == '\\') snprintf(buf, n, esc ? "\\\\" : "\\");
    else if (tok > 0x20 && tok < 0x7f) snprintf(buf, n, "%c", tok);
    else snprintf(buf, n, "<%02x>", tok);
}

static int write_tokens(const al_model *m, const al_attnmap *a, al_err *e)
{
    out_file o;
    char t[16];
    if (out_open(&o, a->dir, "tokens.csv", e)) return -1;
    fputs("position,token,text\n", o.f);
    for (int i = 0; i < a->T; i++) {
        token_text(t, sizeof t, a->tokens[i], m->cfg.vocab_size == 256, 0);
        fprintf(o.f, "%d,%d,\"%s\"\n", i, a->tokens[i], t);
    }
    return out_commit(&o, e);
}

/* One layer's rows of attention.csv and its .dat blocks. */
static void write_layer_data(const al_model *m, const al_attnmap *a, int l, const float *P,
                             FILE *csv, FILE *dat)
{
    int T = a->T, causal = m->cfg.causal, weights = al_attention_layer_weights(m, l);
    if (weights) causal = 1;   /* a state layer is causal whatever model.causal says */
    for (int k = 0; k < a->n_heads; k++) {
        const float *Ph = P + (size_t)a->heads[k] * T * T;
        fprintf(dat, "%s# layer %d head %d\n", k ? "\n\n" : "", l, a->heads[k]);
        for (int i = 0; i < T; i++) {
            for (int j = 0; j < T; j++) {
                float p = Ph[(size_t)i * T + j];
                int masked = causal && j > i;
                if (!masked) fprintf(csv, "%d,%d,%d,%d,%.9g\n", l, a->heads[k], i, j, p);
                if (masked) fputs(j ? (weights ? " NaN" : " -1") : (weights ? "NaN" : "-1"), dat);
                else fprintf(dat, j ? " %.6g" : "%.6g", a->log_scale && p < 1e-30f ? 1e-30 : p);
            }
            fputc('\n', dat);
        }
    }
}

/* s as the body of a gnuplot double-quoted string (cut to fit). */
static void gp_escape(char *out, size_t n, const char *s)
{
    size_t k = 0;
    for (; *s && k + 3 < n; s++) {
        if (*s == '"' || *s == '\\') out[k++] = '\\';
        out[k++] = (unsigned char)*s < 0x20 ? ' ' : *s;
    }
    out[k] = 0;
}

/* Axis tics: every token's text when labelled, else positions. */
static void gp_tics(FILE *f, const al_model *m, const al_attnmap *a)
{
    int T = a->T;
    if (!labelled(T)) {
        int step = T / 8 > 1 ? T / 8 : 1;
        fprintf(f, "  set xtics 0,%d out nomirror\n  set ytics 0,%d out nomirror\n", step, step);
        return;
    }
    for (int axis = 0; axis < 2; axis++) {
        fprintf(f, "  set %ctics (", axis ? 'y' : 'x');
        for (int i = 0; i < T; i++) {
            char t[16];
            token_text(t, sizeof t, a->tokens[i], m->cfg.vocab_size == 256, 1);
            fprintf(f, "%s\"%s\" %d", i ? ", " : "", t, i);
        }
        fprintf(f, ") out nomirror font \",8\"%s\n", axis ? "" : " rotate by 90 right");
    }
}

/* A panel's title: the head's scores when known; for an unmasked model
 * also its next-token score (its mean attention on the token it must
 * predict), from the map itself. */
static void gp_head_title(FILE *f, const al_model *m, const al_attnmap *a, int l, int h,
                          const float *Ph)
{
    char t[192];
    int k = snprintf(t, sizeof t, "head %d", h);
    if (!m->cfg.causal) {
        double s = 0;
        for (int i = 0; i + 1 < a->T; i++) s += Ph[(size_t)i * a->T + i + 1];
        k += snprintf(t + k, sizeof t - k, ": next %.2f", a->T > 1 ? s / (a->T - 1) : 0.0);
    }
    if (a->stats && !al_attention_layer_weights(m, l)) {   /* weights have no scores */
        const al_head_stats *s = &a->stats[l * m->cfg.n_head + h];
        snprintf(t + k, sizeof t - k, "%s prev %.2f, induction %.2f, entropy %.2f",
                 m->cfg.causal ? ":" : ",", s->prev, s->induction, s->entropy);
    }
    fprintf(f, "  set title \"%s\"\n", t);
}

/* The largest |weight| of the selected heads (a symmetric colour range). */
static double abs_max(const al_attnmap *a, const float *P)
{
    double m = 1e-30;
    for (int k = 0; k < a->n_heads; k++)
        for (size_t i = 0; i < (size_t)a->T * a->T; i++)
            m = fmax(m, fabs(P[(size_t)a->heads[k] * a->T * a->T + i]));
    return m;
}

static void write_layer_gp(const al_model *m, const al_attnmap *a, int l, const float *P,
                           FILE *f)
{
    int W, Hpx, cols = grid_cols(a->n_heads), T = a->T;
    al_attnmap_png_size(a->n_heads, T, &W, &Hpx);
    fprintf(f, "# layer%d.gp - written by `attnlab attention`; re-run with `gnuplot layer%d.gp` "
            "in this directory.\n# Rows are queries, columns keys; grey: masked (future "
            "positions under the causal mask).\n"
            "if (!exists(\"out_png\")) out_png = \"layer%d.png\"\n"
            "if (!exists(\"out_svg\")) out_svg = \"layer%d.svg\"\n", l, l, l, l);
    fprintf(f, "do for [fmt in \"png svg\"] {\n"
            "  if (fmt eq \"png\") {\n"
            "    set terminal pngcairo noenhanced size %d,%d font \",9\"\n"
            "    set output out_png\n"
            "  } else {\n"
            "    set terminal svg noenhanced size %d,%d font \",9\"\n"
            "    set output out_svg\n  }\n", W, Hpx, W, Hpx);
    char title[512];
    gp_escape(title, sizeof title, a->title);
    int weights = al_attention_layer_weights(m, l);
    fprintf(f, "  set multiplot layout %d,%d title \"%s: layer %d (%s colour scale)\"\n",
            (a->n_heads + cols - 1) / cols, cols, title, l,
            weights ? "signed weights, not probabilities: a symmetric"
                    : a->log_scale ? "log" : "linear");
    if (weights)   /* a state layer's decayed q.k: red positive, blue negative */
        fprintf(f, "  set palette defined (-1 \"#2166ac\", 0 \"#ffffff\", 1 \"#b2182b\")\n"
                "  set cbrange [%.6g:%.6g]\n", -abs_max(a, P), abs_max(a, P));
    else {
        fputs("  set palette defined (0 \"#ffffff\", 0.3 \"#9ecae1\", 1 \"#08306b\")\n", f);
        if (a->log_scale) fputs("  set logscale cb\n  set cbrange [1e-4:1]\n", f);
        else fputs("  set cbrange [0:1]\n", f);
    }
    fprintf(f, "  set size ratio -1\n  set xrange [-0.5:%d.5]\n  set yrange [%d.5:-0.5]\n"
            "  set xlabel \"key\"\n  set ylabel \"query\"\n"
            "  set object 1 rectangle from graph 0,0 to graph 1,1 behind "
            "fillcolor rgb \"#d9d9d9\" fillstyle solid noborder\n", T - 1, T - 1);
    gp_tics(f, m, a);
    if (!m->cfg.causal)   /* unmasked: the diagonal, so that the next token shows */
        fprintf(f, "  set arrow 1 from -0.5,-0.5 to %d.5,%d.5 nohead front dt 2 lw 0.8 "
                "lc rgb \"#60c03030\"\n", T - 1, T - 1);
    for (int k = 0; k < a->n_heads; k++) {
        gp_head_title(f, m, a, l, a->heads[k], P + (size_t)a->heads[k] * T * T);
        if (weights)   /* masked entries are NaN in the data: drawn grey */
            fprintf(f, "  plot \"layer%d.dat\" index %d matrix using 1:2:3 with image "
                    "notitle\n", l, k);
        else
            fprintf(f, "  plot \"layer%d.dat\" index %d matrix using 1:2:($3 < 0 ? NaN : $3) "
                    "with image notitle\n", l, k);
    }
    fputs("  unset multiplot\n  unset output\n}\n", f);
}

int al_attnmap_write(const al_model *m, const al_attnmap *a, al_err *e)
{
    out_file csv, dat, gp;
    char name[64];
    if (al_mkdirs(a->dir, e) || write_tokens(m, a, e) || out_open(&csv, a->dir, "attention.csv", e))
        return -1;
    fputs("layer,head,query,key,p\n", csv.f);
    float *P = al_malloc((size_t)m->cfg.n_head * a->T * a->T * sizeof *P);
    int rc = 0;
    for (int k = 0; k < a->n_layers && !rc; k++) {
        int l = a->layers[k];
        al_attention_layer(m, l, a->T, P);
        snprintf(name, sizeof name, "layer%d.dat", l);
        if ((rc = out_open(&dat, a->dir, name, e))) break;
        write_layer_data(m, a, l, P, csv.f, dat.f);
        if ((rc = out_commit(&dat, e))) break;
        snprintf(name, sizeof name, "layer%d.gp", l);
        if ((rc = out_open(&gp, a->dir, name, e))) break;
        write_layer_gp(m, a, l, P, gp.f);
        rc = out_commit(&gp, e);
    }
    free(P);
    if (rc) {
        fclose(csv.f);
        unlink(csv.tmp);
        return -1;
    }
    return out_commit(&csv, e);
}

/* ------------------------------------------------------------ gnuplot */

int al_attnmap_plot(const al_attnmap *a)
{
    char log[PATH_LEN + 32], base[32];
    snprintf(log, sizeof log, "%s/gnuplot.log", a->dir);
    unlink(log);
    int worst = 0;
    for (int k = 0; k < a->n_layers; k++) {
        snprintf(base, sizeof base, "layer%d", a->layers[k]);
        int rc = al_gnuplot_run(a->dir, base);
        if (rc == 1) return 1;
        if (rc > worst) worst = rc;
    }
    return worst;
}

/* ------------------------------------------------------------ head tables */

int al_heads_write_csv(const char *dir, const al_model *m, const al_attnmap *a,
                       const al_head_stats *stats, al_err *e)
{
    out_file o;
    if (out_open(&o, dir, "heads.csv", e)) return -1;
    fputs("layer,head,entropy,distance,first_token,prev_token,induction\n", o.f);
    for (int i = 0; i < a->n_layers; i++)
        for (int k = 0; k < a->n_heads; k++) {
            int l = a->layers[i], h = a->heads[k];
            const al_head_stats *s = &stats[l * m->cfg.n_head + h];
            fprintf(o.f, "%d,%d,%.6f,%.6f,%.6f,%.6f,%.6f\n", l, h, s->entropy, s->distance,
                    s->first, s->prev, s->induction);
        }
    return out_commit(&o, e);
}

/* The scores above AL_HEAD_THRESHOLD, named: "previous-token, induction". */
static void head_kind(char *buf, size_t n, const al_head_stats *s)
{
    snprintf(buf, n, "%s%s%s", s->prev > AL_HEAD_THRESHOLD ? ", previous-token" : "",
             s->induction > AL_HEAD_THRESHOLD ? ", induction" : "",
             s->first > AL_HEAD_THRESHOLD ? ", first-token" : "");
    if (buf[0]) memmove(buf, buf + 2, strlen(buf + 2) + 1);
}

void al_heads_print(FILE *f, const al_model *m, const al_attnmap *a, const al_head_stats *stats)
{
    char kind[64];
    fprintf(f, "%5s %4s %8s %8s %7s %7s %9s  %s\n", "layer", "head", "entropy", "distance",
            "first", "prev", "induction", "kind (score > 0.5)");
    for (int i = 0; i < a->n_layers; i++)
        for (int k = 0; k < a->n_heads; k++) {
            int l = a->layers[i], h = a->heads[k];
            const al_head_stats *s = &stats[l * m->cfg.n_head + h];
            head_kind(kind, sizeof kind, s);
            fprintf(f, "%5d %4d %8.3f %8.2f %7.3f %7.3f %9.3f  %s\n", l, h, s->entropy,
                    s->distance, s->first, s->prev, s->induction, kind);
        }
}
