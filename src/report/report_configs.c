/*
 * report_configs.c - configs.csv: the report's numbers, one row per
 * configuration, for pandas (docs/sweeps.md, "What the report claims"). Columns are
 * only ever appended, so scripts that read older files keep working.
 */
#include "report_rows.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "al_util.h"
#include "report_plot.h"
#include "report_trend.h"

static void csv_num(FILE *f, double v, const char *fmt)
{
    if (isfinite(v)) fprintf(f, fmt, v);
    fputc(',', f);
}

static void csv_text(FILE *f, const char *s)
{
    if (!s[strcspn(s, ",\"\n\r")]) fputs(s, f);
    else {
        fputc('"', f);
        for (; *s; s++) fprintf(f, *s == '"' ? "\"\"" : "%c", *s);
        fputc('"', f);
    }
    fputc(',', f);
}

static void configs_row(FILE *f, const al_report_analysis *A, const group *g)
{
    const row *w = g->first;
    csv_text(f, w->group);
    csv_text(f, w->variant);
    for (int k = 0; k < A->sm.n_set; k++) csv_text(f, al_report_setting(&A->sm, w, k));
    fprintf(f, "%s,", w->causal == 0 ? "false" : "true");
    double s[] = {w->n_layer, w->d_ff, w->params, w->params_to, w->kv};
    for (int i = 0; i < 5; i++) csv_num(f, s[i], "%.0f");
    csv_text(f, A->metric);
    fprintf(f, "%d,", g->quality.q.n);
    csv_num(f, g->quality.q.mean, "%.12g");
    csv_num(f, g->quality.q.sd, "%.12g");
    csv_num(f, g->quality.q.ci95, "%.12g");
    csv_num(f, g->is_base ? NAN : g->vs.delta.mean, "%.12g");
    fprintf(f, "%d,", g->is_base ? 0 : g->vs.delta.n);
    csv_num(f, g->is_base ? NAN : g->vs.delta.ci95, "%.12g");
    fprintf(f, "%s,%s,%s,%s,",
            g->is_base ? "" : al_csv_bool_text(al_stat_resolved(&g->vs.delta)),
            al_csv_bool_text(g->is_base), al_csv_bool_text(g->front.on),
            al_csv_bool_text(g->front.resolved));
    csv_num(f, g->quality.acc.mean, "%.12g");
    csv_num(f, g->quality.acc.ci95, "%.12g");
    if (A->use_acc) fprintf(f, "%d,", g->solved.seeds);
    else fputc(',', f);
    csv_num(f, g->quality.val.mean, "%.12g");
    csv_text(f, g->tuned);
    fprintf(f, "%d,%s,", g->n_open, g->is_base ? "" : g->vs.resolved ? "true" : "false");
    if (g->vs.seeds_needed) fprintf(f, "%d", g->vs.seeds_needed);
    fputc(',', f);
    csv_num(f, g->vs.p, "%.6g");
    csv_num(f, g->trend.n ? g->trend.slope : NAN, "%.6g");
    fprintf(f, "%s,", !g->trend.n ? "" : al_report_still_improving(&g->trend) ? "true" : "false");
    csv_num(f, g->solved.step, "%.0f");
    fprintf(f, "%s,", g->machine[0] ? "false" : "true");
    csv_num(f, w->kv_context, "%.0f");   /* the whole cache at report.context */
    if (isfinite(w->kv_at)) fprintf(f, "%.0f", w->kv_at);
    fputc(',', f);
    csv_num(f, g->solved.p, "%.6g");   /* exact McNemar against the baseline */
    fputs(!isfinite(g->solved.p) ? "" : g->solved.holm ? "true" : "false", f);
    fputc(',', f);
    csv_num(f, g->gap.q.mean, "%.12g");   /* NAN (blank) for the baseline */
    csv_num(f, g->gap.end.mean, "%.12g");
    csv_num(f, g->gap.change.mean, "%.12g");
    csv_num(f, g->gap.change.ci95, "%.12g");
    fputs(al_report_gap_trend(&g->gap), f);
    fputc('\n', f);
}

int al_report_write_configs(const al_report_analysis *A, al_err *e)
{
    char path[DIR_LEN + 64], tmp[DIR_LEN + 96];
    FILE *f = al_report_open(A, "configs.csv", path, tmp, e);
    if (!f) return -1;
    fputs("config,variant,", f);
    for (int k = 0; k < A->sm.n_set; k++) csv_text(f, al_report_setting_name(&A->sm, k));
    fputs("causal,n_layer,d_ff,params,params_to,"
          "kv_bytes_per_token,metric,n,mean,sd,ci95,delta_vs_baseline,delta_n,delta_ci95,"
          "resolved,baseline,front,front_resolved,accuracy_mean,accuracy_ci95,solved,"
          "val_loss_mean,tuned,seeds_open,resolved_holm,seeds_needed,p_value,val_loss_slope,"
          "still_improving,solved_step_median,same_machine,kv_context,kv_bytes_at_context,"
          "solved_p,solved_differs_holm,val_gap_q3,val_gap_end,val_gap_change,"
          "val_gap_change_ci95,val_gap_trend\n", f);
    for (int k = 0; k < A->n_groups; k++) configs_row(f, A, &A->g[k]);
    return al_commit_atomic(f, tmp, path, e);
}

