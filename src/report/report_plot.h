/*
 * report_plot.h - the report's pictures (report_plot.c), and the helpers
 * the other writers draw their own with. report.c calls al_report_draw_plots;
 * every writer opens its files with al_report_open. Not a public interface.
 */
#ifndef AL_REPORT_PLOT_H
#define AL_REPORT_PLOT_H

#include <stdio.h>

#include "report_rows.h"

/* tradeoff.{dat,gp}, front.dat, curves.{dat,gp}, the same against bytes
 * read per decoded token (tradeoff_read.{dat,gp}, front_read.dat) and
 * training FLOPs (tradeoff_flops.{dat,gp}, front_flops.dat) when the
 * summary has those costs, and the pictures by
 * gnuplot (*plots: an enum al_plot_state). -1 when a file could not be
 * written. */
int al_report_draw_plots(const al_report_analysis *A, int *plots, al_err *e);
/* 1 when a configuration can be drawn against cost (enum al_report_cost):
 * its plot exists (tradeoff_read.*, tradeoff_flops.*; tradeoff.* is
 * written always). */
int al_report_cost_plotted(const al_report_analysis *A, int cost);
/* A configuration's validation curve: the mean over its selected trials'
 * metrics.csv at each evaluation step of the first one (NAN where none has
 * a val_loss); *step and *val are the caller's to free. Returns the number
 * of points (0: no curve, both NULL). */
int al_report_group_curve(const al_report_analysis *A, const group *g, double **step,
                          double **val);
/* DIR/name opened for an atomic write (al_open_atomic). */
FILE *al_report_open(const al_report_analysis *A, const char *name, char *path, char *tmp,
                     al_err *e);
/* A gnuplot script's first lines (out_png, out_svg defaults for base) and
 * the loop over the png and svg terminals it opens (closed by "}"). */
void al_report_gp_header(FILE *f, const char *base);
void al_report_gp_terminal(FILE *f, const char *size);
/* gnuplot on DIR/<base>.gp, outputs renamed into place: an enum al_plot_state. */
int al_report_gnuplot(const al_report_analysis *A, const char *base);

#endif
