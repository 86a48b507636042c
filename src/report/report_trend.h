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

/* For every configuration: slope (mean over its selected trials that have
 * one) and slope_n; solved_step, the median over the seeds that reached
 * AL_SOLVED_ACCURACY of the first eval step at which val_accuracy did, and
 * solved_step_n. */
void al_report_trends(report *R);

#endif
