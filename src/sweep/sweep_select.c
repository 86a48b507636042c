/*
 * sweep_select.c - sweep.select.best_of never mixes configurations: the
 * report shows one configuration's parameters and cache for every trial
 * of it, so a select axis whose values change either is refused when the
 * sweep is read (issue 40), naming the axis where best_of lists it.
 */
#include <stdio.h>

#include "sweep_internal.h"

/* Trials a and b of one configuration differ in a select axis that
 * changes what the report shows for the configuration as a whole (its
 * parameters, its cache): refused at that axis's entry in best_of. */
static int select_mixes(const spec_ctx *C, int a, int b)
{
    const al_sweep *s = C->s;
    const al_sweep_trial *x = &s->trials[a], *y = &s->trials[b];
    const char *what = NULL;
    char vals[96];
    if (x->params != y->params)
        what = "the parameter count", snprintf(vals, sizeof vals, "%zu vs %zu", x->params, y->params);
    else if (x->kv_elems_per_token != y->kv_elems_per_token ||
             x->kv_bytes_at_context != y->kv_bytes_at_context)
        what = "the KV cache", snprintf(vals, sizeof vals, "%zu vs %zu f32 bytes at %d tokens",
                                        x->kv_bytes_at_context, y->kv_bytes_at_context,
                                        x->kv_context);
    if (!what) return 0;
    int i = 0;
    while (i + 1 < s->n_select && C->choices[a][s->select_axis[i]] == C->choices[b][s->select_axis[i]])
        i++;
    return al_node_errf(C->e, C->select_node[i], "'sweep.select.best_of': '%s' changes %s (%s) "
                        "within configuration '%s' ('%s' and '%s'): the report shows one "
                        "configuration's cache and parameters for all its trials; select "
                        "only axes that keep both (e.g. train.lr) and sweep this one as "
                        "configurations", s->axes[s->select_axis[i]].path, what, vals, x->group,
                        x->label, y->label);
}

int al_sweep_check_select(const spec_ctx *C)
{
    const al_sweep *s = C->s;
    for (int b = 0; b < s->n_trials && s->n_select; b++)
        for (int a = 0; a < b; a++)
            if (s->trials[a].group_key == s->trials[b].group_key) {
                if (select_mixes(C, a, b)) return -1;
                break;   /* b matches the first of its configuration, and so all of them */
            }
    return 0;
}

