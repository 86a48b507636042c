/*
 * report_rows.c - the paired difference by seed, on the analysis's rows
 * (report_rows.h): the baseline comparisons and the front
 * (report_analyze.c), the gaps (report_trend.c) and the claims
 * (report_claims.c) share it.
 */
#include "report_rows.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "al_util.h"

int al_report_seed_pairs(const al_report_analysis *A, const group *a, const group *b, int *ia,
                         int *ib)
{
    int n = 0;
    for (int i = 0; i < A->sm.n; i++) {
        const row *u = &A->sm.rows[i];
        if (!u->selected || strcmp(u->group, a->first->group) != 0 || isnan(u->seed)) continue;
        for (int j = 0; j < A->sm.n && n < A->sm.n; j++) {
            const row *v = &A->sm.rows[j];
            if (v->selected && v->seed == u->seed && strcmp(v->group, b->first->group) == 0)
                ia[n] = i, ib[n] = j, n++;
        }
    }
    return n;
}

void al_report_paired(const al_report_analysis *A, const group *a, const group *b, al_stat *d)
{
    int *ia = al_calloc((size_t)A->sm.n + 1, sizeof *ia);
    int *ib = al_calloc((size_t)A->sm.n + 1, sizeof *ib), n = al_report_seed_pairs(A, a, b, ia, ib);
    double *x = al_calloc((size_t)n + 1, sizeof *x);
    for (int k = 0; k < n; k++) x[k] = A->sm.rows[ia[k]].q - A->sm.rows[ib[k]].q;
    al_stat_of(x, n, d);
    free(x), free(ia), free(ib);
}

void al_report_solved_pairs(const al_report_analysis *A, const group *a, const group *b,
                            int *only_a, int *only_b)
{
    int *ia = al_calloc((size_t)A->sm.n + 1, sizeof *ia);
    int *ib = al_calloc((size_t)A->sm.n + 1, sizeof *ib), n = al_report_seed_pairs(A, a, b, ia, ib);
    *only_a = *only_b = 0;
    for (int k = 0; k < n; k++) {
        const row *u = &A->sm.rows[ia[k]], *v = &A->sm.rows[ib[k]];
        int sa = (A->use_test ? u->test_acc : u->val_acc) >= AL_SOLVED_ACCURACY;
        int sb = (A->use_test ? v->test_acc : v->val_acc) >= AL_SOLVED_ACCURACY;
        *only_a += sa && !sb;
        *only_b += sb && !sa;
    }
    free(ia), free(ib);
}
