/*
 * report_table.h - the configurations table as cells, and the number
 * formats of the report's tables (report_table.c). report.md prints the
 * cells as a markdown table (report_md.c); index.html as a sortable HTML
 * one (report_html.c): the same columns, the same words. Not a public
 * interface.
 */
#ifndef AL_REPORT_TABLE_H
#define AL_REPORT_TABLE_H

#include <stddef.h>

#include "report_rows.h"

#define AL_REPORT_CELL_LEN 384

/* One cell of the configurations table. */
typedef struct al_report_cell {
    char head[128];                 /* its column's heading */
    char text[AL_REPORT_CELL_LEN];  /* as report.md prints it (markdown inline: **bold**) */
    double v;                       /* the number it sorts by (NAN: sort by its text) */
} al_report_cell;

/* The most cells a row of A's table has (size of the array to pass). */
int al_report_table_width(const al_report_analysis *A);
/* g's row: which columns apply is decided from A (settings some trial
 * has, causal when a trial is unmasked, ...), so every row of A has the
 * same headings. Fills c[0..n) and returns n. */
int al_report_table_row(const al_report_analysis *A, const group *g, al_report_cell *c);

/* The formats: "1,234,567" (– for NaN); "1.5175 ± 0.0021" (mean ± 95 %
 * half-width; the mean alone for one seed); a sample sd; a difference
 * "+0.0123 [+0.0031, +0.0215]"; a setting "16"; a slope "-0.0412*" (a
 * star: still improving). */
void al_report_fmt_int(char *buf, size_t n, double v);
void al_report_fmt_ci(char *buf, size_t n, const al_stat *s);
void al_report_fmt_sd(char *buf, size_t n, const al_stat *s);
void al_report_fmt_delta(char *buf, size_t n, const al_stat *d);
void al_report_fmt_setting(char *buf, size_t n, double v);
void al_report_fmt_slope(char *buf, size_t n, const group_trend *t);

/* Does any trial of A have setting k; is any trial unmasked? */
int al_report_any_setting(const al_report_analysis *A, int k);
int al_report_any_unmasked(const al_report_analysis *A);
/* Does any trial have a number in the row field at offset off? */
int al_report_any_col(const al_report_analysis *A, size_t off);

#endif
