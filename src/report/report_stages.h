/*
 * report_stages.h - what a staged sweep adds to the report
 * (report_stages.c): its plot, written by report.c after the other plots,
 * and its section of report.md (report_md.c). Not a public interface.
 */
#ifndef AL_REPORT_STAGES_H
#define AL_REPORT_STAGES_H

#include <stdio.h>

#include "report_rows.h"

/* A staged sweep's converted and uptrained models (rows with an
 * `upstream`): stages.{dat,gp,png,svg} (png and svg when the other plots
 * were drawn). Nothing when there are none; -1 when a file could not be
 * written. */
int al_report_stages_plot(const al_report_analysis *A, int plots, al_err *e);
/* The report's section on them (nothing when there are none); the
 * picture shown when plots (an enum al_plot_state) says it was drawn. */
void al_report_stages_md(FILE *f, const al_report_analysis *A, int plots);

#endif
