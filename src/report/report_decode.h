/*
 * report_decode.h - what a sweep's `eval.decode` adds to the report
 * (report_decode.c): decode_configs.csv and the "Measured decode speed"
 * section. It reads the trials' eval/decode.csv itself. Not a public
 * interface.
 */
#ifndef AL_REPORT_DECODE_H
#define AL_REPORT_DECODE_H

#include <stdio.h>

#include "report_rows.h"

/* decode_configs.csv (config,variant,context,batch,n,tokens_per_s_mean,
 * tokens_per_s_ci95); nothing when no trial has a decode.csv. */
int al_report_decode_write(const al_report_analysis *A, al_err *e);
/* The report's section (nothing when there is no measurement). */
void al_report_decode_md(FILE *f, const al_report_analysis *A);

#endif
