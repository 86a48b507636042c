/*
 * report_recall.h - recall through quantized caches in the report
 * (report_recall.c): each configuration's passkey and MQAR exact match
 * through every cache a sweep's `eval` tried, against f32 on the same
 * checkpoints and examples, beside the KJV loss through that cache
 * (docs/kv-quant-recall.md). It reads the trials' recall_summary.csv
 * and eval.csv itself. Not a public interface.
 */
#ifndef AL_REPORT_RECALL_H
#define AL_REPORT_RECALL_H

#include <stdio.h>

#include "report_rows.h"

/* 1 when some counted trial has <trial>/eval/recall_summary.csv. */
int al_report_recall_any(const al_report_analysis *A);
/* eval_recall.csv (nothing when no trial has a summary); -1 when it could
 * not be written. */
int al_report_recall_write(const al_report_analysis *A, al_err *e);
/* Its table, a "###" part of the "## Checkpoints through the cache"
 * section (nothing when there are none). */
void al_report_recall_md(FILE *f, const al_report_analysis *A);

#endif
