/*
 * report_md.h - report.md from the analysis (report_md.c), called by
 * report.c. Not a public interface.
 */
#ifndef AL_REPORT_MD_H
#define AL_REPORT_MD_H

#include "report_rows.h"

/* report.md's text (the caller frees it; *len its bytes); plots (an enum
 * al_plot_state) says what the plot writers drew. index.html shows the
 * same text (report_html.c). */
char *al_report_md_text(const al_report_analysis *A, int plots, size_t *len);
/* DIR/report.md holding text, atomically. -1 when it could not be written. */
int al_report_write_md(const al_report_analysis *A, const char *text, size_t len, al_err *e);

#endif
