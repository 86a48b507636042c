/*
 * report_rows.c - what the report's sections compute on its working state
 * (report_rows.h) beside report.c: the paired difference, which the
 * baseline comparisons, the front and the claims (report_claims.c) share.
 */
#include "report_rows.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "al_util.h"

void al_report_paired(const report *R, const group *a, const group *b, al_stat *d)
{
    double *x = al_calloc((size_t)R->sm.n + 1, sizeof *x);
    int n = 0;
    for (int i = 0; i < R->sm.n; i++) {
        const row *u = &R->sm.rows[i];
        if (!u->selected || strcmp(u->group, a->first->group) != 0 || isnan(u->seed)) continue;
        for (int j = 0; j < R->sm.n; j++) {
            const row *v = &R->sm.rows[j];
            if (v->selected && v->seed == u->seed && strcmp(v->group, b->first->group) == 0)
                x[n++] = u->q - v->q;
        }
    }
    al_stat_of(x, n, d);
    free(x);
}

void al_report_solved_pairs(const report *R, const group *a, const group *b, int *only_a,
                            int *only_b)
{
    *only_a = *only_b = 0;
    for (int i = 0; i < R->sm.n; i++) {
        const row *u = &R->sm.rows[i];
        if (!u->selected || strcmp(u->group, a->first->group) != 0 || isnan(u->seed)) continue;
        for (int j = 0; j < R->sm.n; j++) {
            const row *v = &R->sm.rows[j];
            if (!v->selected || v->seed != u->seed || strcmp(v->group, b->first->group) != 0)
                continue;
            int sa = (R->use_test ? u->test_acc : u->val_acc) >= AL_SOLVED_ACCURACY;
            int sb = (R->use_test ? v->test_acc : v->val_acc) >= AL_SOLVED_ACCURACY;
            *only_a += sa && !sb;
            *only_b += sb && !sa;
        }
    }
}
