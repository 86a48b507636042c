/*
 * report_html.h - DIR/index.html (report_html.c), called by report.c
 * after report.md. Not a public interface; docs/report-page.md describes
 * the page.
 */
#ifndef AL_REPORT_HTML_H
#define AL_REPORT_HTML_H

#include <stddef.h>

#include "report_rows.h"

/* DIR/index.html, atomically: one self-contained page (its style, script
 * and data inline; nothing fetched) with the configurations table
 * sortable and linked to each trial's folder, the trade-off plot and the
 * validation curves drawn by its script from the embedded data, and every
 * other section of report.md (md, md_len bytes) in its words. -1 when it
 * could not be written. */
int al_report_write_html(const al_report_analysis *A, const char *md, size_t md_len,
                         al_err *e);

#endif
