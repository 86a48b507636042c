/*
 * report.c - `attnlab report DIR`: the analysis (report_analyze.c), then
 * the writers, each reading it: configs.csv (report_configs.c), the plots
 * (report_plot.c, and a staged sweep's and an eval's own, report_stages.c
 * and report_eval.c), then report.md (report_md.c), which says which
 * plots were drawn, and index.html (report_html.c), which shows report.md's
 * text with its own table and plots.
 */
#include "al_report.h"
#include "report_decode.h"
#include "report_eval.h"
#include "report_files.h"
#include "report_html.h"
#include "report_md.h"
#include "report_plot.h"
#include "report_rows.h"
#include "report_scaling.h"
#include "report_stages.h"

#include <stdlib.h>
#include <string.h>

int al_report_write_analysis(const al_report_analysis *A, al_report_stats *st, al_err *e)
{
    int plots = AL_PLOTS_NOTHING;
    int rc = al_report_write_configs(A, e) || al_report_draw_plots(A, &plots, e) ||
             al_report_stages_plot(A, plots, e) || al_report_eval_plot(A, plots, e) ||
             al_report_decode_write(A, e) || al_report_scaling_write(A, plots, e) ? -2 : 0;
    if (!rc) {
        size_t len;
        char *md = al_report_md_text(A, plots, &len);
        rc = al_report_write_md(A, md, len, e) || al_report_write_html(A, md, len, e) ? -2 : 0;
        free(md);
    }
    int removed;   /* only once everything it writes is written */
    if (!rc && al_report_files_prune(A->files, A->dir, &removed, e)) rc = -2;
    *st = (al_report_stats){A->sm.n, A->n_ok, A->n_groups, A->n_front, plots};
    return rc;
}

int al_report_write(const char *dir, al_report_stats *st, al_err *e)
{
    al_report_analysis *A;
    memset(st, 0, sizeof *st);
    if (al_report_analyze(dir, &A, e)) return -1;
    int rc = al_report_write_analysis(A, st, e);
    al_report_analysis_free(A);
    return rc;
}
