/*
 * sweep_internal.h - what sweep_spec.c (one sweep mapping expanded into
 * trials) offers sweep_stage.c (chained stages) and sweep_load.c (the
 * file, then one or the other), and what sweep_stage.c offers
 * sweep_load.c. Not a public interface: al_sweep_spec.h is.
 */
#ifndef AL_SWEEP_INTERNAL_H
#define AL_SWEEP_INTERNAL_H

#include "al_sweep_spec.h"

/* An axis a stage adds ahead of its sweep mapping's own: a key path and a
 * non-empty sequence of values (whose nodes give errors their place). */
typedef struct al_sweep_axis_in {
    const char *path;
    const al_node *values;
} al_sweep_axis_in;

/* Expand the sweep mapping sw (NULL: none) over s->root, which the caller
 * set (s owns it), with the extra axes outermost after the seeds; as
 * al_sweep_load does for a plain file. With trees, *trees gets a
 * malloc'ed array holding each trial's tree (s->n_trials of them; the
 * caller frees them and the array). On error nothing is kept in *trees. */
int al_sweep_expand(al_sweep *s, const al_node *sw, const al_sweep_axis_in *extra, int n_extra,
                    const char *const *plugins, int n_plugins, al_node ***trees, al_err *e);

/* Does the tree match every entry {key.path: value} of the mapping (as
 * sweep.exclude matches)? */
int al_sweep_tree_matches(const al_node *tree, const al_node *map);

/* sweep_spec.c's expansion of one sweep mapping, as sweep_naming.c takes it. */
typedef struct spec_ctx {
    al_sweep *s;
    const char *const *plugins;   /* --plugin files, noted in every trial */
    int n_plugins;
    const al_node *sweep;      /* the sweep mapping, or NULL (a stage may have none) */
    const al_node *exclude;    /* a sequence of mappings, or NULL */
    int *exclude_hits;         /* (exclude->n) the trials each item dropped, while expanding */
    const al_node *seeds;      /* the seeds node, or NULL */
    const al_node *baseline;   /* sweep.baseline (a mapping), or NULL */
    const al_sweep_axis_in *extra;   /* axes a stage adds before the sweep's own */
    int n_extra;
    al_node ***trees_out;      /* stages: keep each kept trial's tree, into *trees_out */
    al_node **trees;           /* ... which is this array (NULL: trees are freed) */
    int n_total;               /* its length */
    int n_groups;              /* zip groups */
    int group_len[AL_SWEEP_MAX_AXES];
    const al_node *select_node[AL_SWEEP_MAX_AXES];   /* sweep.select.best_of's entries */
    int (*choices)[AL_SWEEP_MAX_AXES];   /* each kept trial's value index per axis */
    char (*cost_keys)[17];     /* each kept trial's config hash without its seed */
    al_err *e;
} spec_ctx;

/* Every select axis keeps the parameters and the cache of the trials of
 * one configuration (sweep_select.c); -1 with C->e naming the axis. */
int al_sweep_check_select(const spec_ctx *C);

/* Where an error about the whole sweep points: its mapping, or for a stage
 * without one (its trials come from the axes the stage adds, e.g. two equal
 * convert targets) the first of those axes, else the file's top. */
static inline const al_node *al_sweep_node(const spec_ctx *C)
{
    if (C->sweep) return C->sweep;
    return C->n_extra > 0 ? C->extra[0].values : C->s->root;
}

/* sweep_naming.c: every trial's id (told apart where two would share
 * one), each configuration's group, and the baseline marked; on error the
 * message is in C->e. */
int al_sweep_finish_names(spec_ctx *C);
void al_sweep_finish_groups(al_sweep *s);
int al_sweep_mark_baseline(spec_ctx *C);

/* sweep_label.c: key + value appended to out: "kv2", "lr0.003",
 * "causal-false"; "variant" is just its value, a path keeps only its last
 * component, and a list's items are joined by '+'. */
void al_sweep_value_label(char *out, size_t n, const char *key, const al_node *v);

/* sweep_scaling.c: sweep.scaling's mapping x into two axes appended to
 * s->axes (sizes, then budgets); the value `choice` of such an axis set in
 * a trial's tree (a size merged under `model`, a budget as train.flops);
 * its part of a label ("size1", "flops8.0e+12") appended to out; and the
 * trial's scaling_size and scaling_flops from its choices. */
int al_sweep_scaling_parse(spec_ctx *C, const al_node *x);
int al_sweep_scaling_set(al_node *tree, const al_sweep_axis *ax, int choice, al_err *e);
void al_sweep_scaling_label(char *out, size_t n, const al_sweep_axis *ax, int choice);
void al_sweep_scaling_mark(const al_sweep *s, const int *choice, al_sweep_trial *t);

/* sweep_stage.c: s->root holds a `stages` list; expand every stage into
 * s->trials (stage order), filling s->stages. */
int al_sweep_stages_load(al_sweep *s, const char *const *plugins, int n_plugins, al_err *e);

#endif
