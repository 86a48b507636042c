/*
 * report_stages.h - what a staged sweep adds to the report
 * (report_stages.c), called by report.c. Not a public interface.
 */
#ifndef AL_REPORT_STAGES_H
#define AL_REPORT_STAGES_H

#include <stdio.h>

#include "report_rows.h"

/* A staged sweep's converted and uptrained models (rows with an
 * `upstream`): stages.{dat,gp,png,svg} (png and svg when the other plots
 * were drawn). Nothing when there are none; -1 when a file could not be
 * written. */
int al_report_stages_plot(const report *R, al_err *e);
/* The report's section on them (nothing when there are none). */
void al_report_stages_md(FILE *f, const report *R);

#endif
