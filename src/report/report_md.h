/*
 * report_md.h - report.md from the analysis (report_md.c), called by
 * report.c. Not a public interface.
 */
#ifndef AL_REPORT_MD_H
#define AL_REPORT_MD_H

#include "report_rows.h"

/* DIR/report.md, atomically; plots (an enum al_plot_state) says what the
 * plot writers drew. -1 when it could not be written. */
int al_report_write_md(const al_report_analysis *A, int plots, al_err *e);

#endif
