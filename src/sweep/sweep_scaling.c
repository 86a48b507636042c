/*
 * sweep_scaling.c - `sweep.scaling: {sizes: [...], flops: [...]}`: two
 * axes crossed with the grid and the seeds (al_sweep_spec.h). A size is a
 * mapping of `model` keys set together (merged into the file's model, not
 * replacing it as a grid's mapping value does); a budget is the trial's
 * train.flops. Trials are labelled "size<i>" (the size's index from 0) and
 * "flops<budget>"; summary.csv carries both as scaling_size and
 * scaling_flops, which the report's Scaling section fits (docs/scaling.md).
 */
#include "al_sweep_spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sweep_internal.h"

/* The model keys that make a design, not a size: swept in the grid. */
static const char *const design_keys[] = {"attention", "layer_attention", "kv_share",
                                          "match_params", NULL};

/* Would model.<key> clash with an axis the sweep already has? */
static int clashes(const al_sweep *s, const char *path)
{
    for (int a = 0; a < s->n_axes; a++) {
        const char *p = s->axes[a].path;
        size_t na = strlen(p), nb = strlen(path), n = na < nb ? na : nb;
        if (s->axes[a].scaling == AL_SCALING_NONE && strncmp(p, path, n) == 0 &&
            (p[n] == 0 || p[n] == '.') && (path[n] == 0 || path[n] == '.'))
            return a;
    }
    return -1;
}

static int check_size(spec_ctx *C, const al_node *z)
{
    if (z->kind != AL_NODE_MAP || z->n == 0)
        return al_node_errf(C->e, z, "a size in 'sweep.scaling.sizes' must be a non-empty "
                            "mapping of model keys, e.g. {d_model: 64, n_layer: 2}");
    for (int k = 0; k < z->n; k++) {
        char path[300];
        for (int d = 0; design_keys[d]; d++)
            if (strcmp(z->keys[k], design_keys[d]) == 0)
                return al_errf(C->e, "%s:%d:%d: error: 'sweep.scaling.sizes': '%s' makes the "
                               "design, not its size: sweep it in 'sweep.grid'", z->file,
                               z->key_line[k], z->key_col[k], z->keys[k]);
        snprintf(path, sizeof path, "model.%s", z->keys[k]);
        int a = clashes(C->s, path);
        if (a >= 0)
            return al_errf(C->e, "%s:%d:%d: error: 'sweep.scaling.sizes' sets '%s', which "
                           "sweep axis '%s' (line %d) sets too", z->file, z->key_line[k],
                           z->key_col[k], path, C->s->axes[a].path, C->s->axes[a].key_line);
    }
    return 0;
}

static int check_budget(spec_ctx *C, const al_node *v, int i, const al_node *list)
{
    char *end;
    double x = v->kind == AL_NODE_SCALAR && !v->quoted ? strtod(v->value, &end) : NAN;
    if (v->kind != AL_NODE_SCALAR || v->quoted || *end || !(x > 0) || !isfinite(x))
        return al_node_errf(C->e, v, "a budget in 'sweep.scaling.flops' must be a positive "
                            "number of training FLOPs, e.g. 2.0e+12");
    for (int j = 0; j < i; j++)
        if (strtod(list->items[j]->value, NULL) == x)
            return al_node_errf(C->e, v, "budget %g is listed twice in 'sweep.scaling.flops'",
                                x);
    return 0;
}

/* Appends an axis (a grid axis: crossed with the others) for values. */
static void add_axis(al_sweep *s, const char *path, const al_node *values, int kind)
{
    AL_ASSERT(s->n_axes < AL_SWEEP_MAX_AXES);
    al_sweep_axis *ax = &s->axes[s->n_axes++];
    memset(ax, 0, sizeof *ax);
    snprintf(ax->path, sizeof ax->path, "%s", path);
    ax->key = values;
    ax->key_line = values->line;
    ax->key_col = values->col;
    ax->n = values->n;
    ax->group = -1;
    ax->scaling = kind;
}

static int list_of(spec_ctx *C, const al_node *x, const char *key, const al_node **out)
{
    *out = al_node_get(x, key);
    if (!*out)
        return al_node_errf(C->e, x, "'sweep.scaling' needs '%s' (sizes: [{d_model: 64, "
                            "n_layer: 2}, ...], flops: [2.0e+12, ...])", key);
    if ((*out)->kind != AL_NODE_SEQ || (*out)->n == 0)
        return al_node_errf(C->e, *out, "'sweep.scaling.%s' must be a non-empty list", key);
    return 0;
}

int al_sweep_scaling_parse(spec_ctx *C, const al_node *x)
{
    const al_node *sizes, *flops;
    if (x->kind != AL_NODE_MAP)
        return al_node_errf(C->e, x, "'sweep.scaling' must be a mapping {sizes: [...], flops: "
                            "[...]}");
    for (int i = 0; i < x->n; i++)
        if (strcmp(x->keys[i], "sizes") != 0 && strcmp(x->keys[i], "flops") != 0)
            return al_errf(C->e, "%s:%d:%d: error: unknown key '%.80s' in 'sweep.scaling' "
                           "(known: sizes, flops)", x->file, x->key_line[i], x->key_col[i],
                           x->keys[i]);
    if (list_of(C, x, "sizes", &sizes) || list_of(C, x, "flops", &flops)) return -1;
    int a = clashes(C->s, "train.flops");
    if (a >= 0)
        return al_node_errf(C->e, flops, "'sweep.scaling.flops' sets train.flops, which sweep "
                            "axis '%s' (line %d) sets too", C->s->axes[a].path,
                            C->s->axes[a].key_line);
    for (int i = 0; i < sizes->n; i++)
        if (check_size(C, sizes->items[i])) return -1;
    for (int i = 0; i < flops->n; i++)
        if (check_budget(C, flops->items[i], i, flops)) return -1;
    if (C->s->n_axes + 2 > AL_SWEEP_MAX_AXES)
        return al_node_errf(C->e, x, "too many sweep axes (at most %d)", AL_SWEEP_MAX_AXES);
    add_axis(C->s, "sweep.scaling.sizes", sizes, AL_SCALING_SIZE);
    add_axis(C->s, "train.flops", flops, AL_SCALING_FLOPS);
    return 0;
}

int al_sweep_scaling_set(al_node *tree, const al_sweep_axis *ax, int choice, al_err *e)
{
    const al_node *v = ax->key->items[choice];
    if (ax->scaling != AL_SCALING_SIZE) return al_node_set_path(tree, ax->path, v, 1, e);
    for (int k = 0; k < v->n; k++) {
        char path[300];
        snprintf(path, sizeof path, "model.%s", v->keys[k]);
        if (al_node_set_path(tree, path, v->items[k], 1, e)) return -1;
    }
    return 0;
}

void al_sweep_scaling_label(char *out, size_t n, const al_sweep_axis *ax, int choice)
{
    size_t len = strlen(out);
    if (ax->scaling == AL_SCALING_SIZE) snprintf(out + len, n - len, "size%d", choice);
    else al_sweep_value_label(out, n, "flops", ax->key->items[choice]);
}

void al_sweep_scaling_mark(const al_sweep *s, const int *choice, al_sweep_trial *t)
{
    t->scaling_size = -1;
    t->scaling_flops = 0;
    for (int a = 0; a < s->n_axes; a++) {
        if (s->axes[a].scaling == AL_SCALING_SIZE) t->scaling_size = choice[a];
        if (s->axes[a].scaling == AL_SCALING_FLOPS)
            t->scaling_flops = strtod(s->axes[a].key->items[choice[a]]->value, NULL);
    }
}
