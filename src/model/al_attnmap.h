/*
 * al_attnmap.h - attention maps and head statistics as files: what
 * `attnlab attention` writes into its output directory (and the report's
 * causal-mask section reuses).
 *
 *   attention.csv   layer,head,query,key,p   every selected head's weights
 *                   (under the causal mask only key <= query: the rest are 0)
 *   tokens.csv      position,token,text      the sequence the maps are over
 *   heads.csv       layer,head,entropy,distance,first_token,prev_token,induction
 *   layer{L}.dat    one T x T matrix per selected head (gnuplot `index`),
 *                   masked entries -1 (drawn grey)
 *   layer{L}.gp     the gnuplot script: a grid of the heads' heatmaps, each
 *                   titled with its scores (stats) and, for a model without
 *                   the causal mask, its next-token score (mean p_i,i+1) over
 *                   a dashed diagonal
 *   layer{L}.png, layer{L}.svg   drawn by running gnuplot ($AL_GNUPLOT,
 *                   default "gnuplot") in the directory
 * Every file is written atomically.
 *
 * Picture layout: a grid of ceil(sqrt(n)) columns for n heads; a panel's
 * plot area is 12 px per token (220 to 576 px), plus 110 px across and
 * 90 px down for its labels, plus 30 px for the title. Token bytes label
 * the axes when the area gives each token 12 px (T <= 48), else positions.
 */
#ifndef AL_ATTNMAP_H
#define AL_ATTNMAP_H

#include <stdio.h>

#include "al_attention.h"

/* A head above this score is called a previous-token (induction,
 * first-token) head in tables and summaries. */
#define AL_HEAD_THRESHOLD 0.5

typedef struct al_attnmap {
    const char *dir;          /* output directory (created) */
    const char *title;        /* picture title, e.g. the checkpoint */
    const int *tokens;        /* (T) the sequence of the last al_attention_forward */
    int T;
    const int *layers, *heads;   /* selected, ascending */
    int n_layers, n_heads;
    int log_scale;            /* log colour scale (1e-4 .. 1) */
    const al_head_stats *stats;  /* (n_layer * n_head), for panel titles; may be NULL */
} al_attnmap;

/* PNG size of a picture of n heads over T tokens. */
void al_attnmap_png_size(int n_heads, int T, int *width, int *height);

/* After al_attention_forward over a->tokens: attention.csv, tokens.csv and
 * each selected layer's .dat and .gp. */
int al_attnmap_write(const al_model *m, const al_attnmap *a, al_err *e);

/* Run gnuplot on DIR/layer{L}.gp for each selected layer; outputs are
 * renamed into place only when it succeeded. Returns 0 when every picture
 * was drawn, 1 when gnuplot is not installed, 2 when it failed (its
 * messages are in DIR/gnuplot.log). */
int al_attnmap_plot(const al_attnmap *a);

/* heads.csv for the selected layers and heads; stats (n_layer * n_head). */
int al_heads_write_csv(const char *dir, const al_model *m, const al_attnmap *a,
                       const al_head_stats *stats, al_err *e);
/* The same as an aligned table with a `kind` column naming the scores
 * above AL_HEAD_THRESHOLD. */
void al_heads_print(FILE *f, const al_model *m, const al_attnmap *a, const al_head_stats *stats);

#endif
