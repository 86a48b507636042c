/*
 * report_eval.h - what a sweep's `eval` adds to the report
 * (report_eval.c): its files, written by report.c after the other plots,
 * and its section of report.md (report_md.c). It reads the trials' eval
 * files itself. Not a public interface.
 */
#ifndef AL_REPORT_EVAL_H
#define AL_REPORT_EVAL_H

#include <stdio.h>

#include "report_rows.h"

/* eval_configs.csv, and per context evaluated eval_pareto_C.{dat,gp} and
 * eval_by_position_C.{dat,gp} with their pictures (when the other plots
 * were drawn). Nothing when no trial has an eval.csv; -1 when a file could
 * not be written. */
int al_report_eval_plot(const al_report_analysis *A, int plots, al_err *e);
/* The report's section on them (nothing when there are none); the
 * pictures shown when plots (an enum al_plot_state) says they were drawn. */
void al_report_eval_md(FILE *f, const al_report_analysis *A, int plots);

#endif
