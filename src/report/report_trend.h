/*
 * report_trend.h - from the trials' eval logs (metrics.csv): the slope of
 * the validation loss at the end of training and the step a recall task
 * was first solved (report_trend.c). Not a public interface.
 */
#ifndef AL_REPORT_TREND_H
#define AL_REPORT_TREND_H

#include "report_rows.h"

/* The least-squares slope of the eval points' validation loss against
 * step, over the points at or after 75 % of `steps` (the trial's planned
 * steps; NAN or 0: its last eval step), per 100 steps. NAN with fewer
 * than two such points. */
double al_report_tail_slope(const double *step, const double *loss, int n, double steps);

/* For every configuration: trend (the slope, mean over its selected trials
 * that have one, and their number); solved.step, the median over the seeds
 * that reached AL_SOLVED_ACCURACY of the first eval step at which
 * val_accuracy did, and solved.step_n. */
void al_report_trends(al_report_analysis *A);

/* For every configuration but base: gap (report_rows.h), the
 * validation-loss gap to base paired by seed at the first eval at or after
 * 75 % of training and at the last eval, and its change; gap.holm: the
 * change's paired t test rejects 0 under Holm's correction over the family
 * of comparisons with base. */
void al_report_gap_trends(al_report_analysis *A);
/* "narrowing" or "widening" (the change is beyond noise, towards 0 or away
 * from it), "steady" (it is not), "" (fewer than two pairs). */
const char *al_report_gap_trend(const group_gap *g);

#endif
