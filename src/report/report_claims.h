/*
 * report_claims.h - the claims a sweep puts to a test (sweep.claims), set
 * beside what the run resolved (report_claims.c): read with sweep.json
 * (report_summary.c), written by report_md.c. Not a public interface.
 */
#ifndef AL_REPORT_CLAIMS_H
#define AL_REPORT_CLAIMS_H

#include <jansson.h>
#include <stdio.h>

#include "report_rows.h"

/* sweep.json's "claims" array into mk (entries it cannot read are skipped:
 * the file is the sweep's own, checked when it was written). */
void al_report_claims_read(report_marker *mk, const json_t *claims);
/* The report's "Claims under test" section (nothing without claims). */
void al_report_claims_md(FILE *f, const al_report_analysis *A);

/* A claim's verdict from the paired difference d (config minus versus, in
 * the metric; maximize: the metric is an accuracy). One of "supported",
 * "contradicted", "cannot tell", "resolved" or "not resolved", with why
 * in why[]. Exposed for its test. */
const char *al_report_claim_verdict(const al_sweep_claim *c, const al_stat *d, int maximize,
                                    char *why, size_t n);

#endif
