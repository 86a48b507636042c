/*
 * fuzz_sweep.c - whole experiment files through al_sweep_load, the way
 * `attnlab sweep FILE --set ...` reads them: YAML, the "#set k=v" lines as
 * --set edits, the sweep mapping (grid, zip, exclude, seeds and whatever
 * grammar the sweep spec grows), every trial expanded and decoded. The
 * experiments/ directory is part of the seed corpus (scripts/fuzz and the
 * fuzz_sweep test pass it), so a new experiment file is a new seed.
 *
 * Properties: no crash, leak or undefined behaviour; a refusal is one
 * line; every trial of a loaded sweep has an id that is a plain, unique
 * directory name (ids become results/<name>/<id>/).
 *
 * A file that lists plugins is skipped: loading one dlopens whatever path
 * the input names (the plugin_ops target covers registration).
 */
#include <stdlib.h>
#include <string.h>

#include "al_sweep_results.h"
#include "fuzz_common.h"

/* Whether the edited tree names a plugin to load (al_plugin_load_listed). */
static int lists_plugins(const char *path, char **sets, int n_sets)
{
    al_node *root;
    al_err e;
    if (al_yaml_load(path, &root, &e) != 0) return 0;
    int rc = 0, found = 0;
    for (int i = 0; i < n_sets && rc == 0; i++) rc = al_node_apply_set(root, sets[i], &e);
    const al_node *p = al_node_get(root, "plugins");
    for (int i = 0; p && p->kind == AL_NODE_SEQ && i < p->n; i++)
        found |= p->items[i]->kind == AL_NODE_SCALAR && p->items[i]->value[0];
    al_node_free(root);
    return found;
}

static int plain_id(const char *id)
{
    if (!id[0] || id[0] == '.') return 0;
    for (const char *p = id; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.+-_", *p))
            return 0;
    return 1;
}

static int by_id(const void *a, const void *b)
{
    return strcmp((*(const al_sweep_trial *const *)a)->id, (*(const al_sweep_trial *const *)b)->id);
}

/* Ids sorted, so that a shared one is next to its twin: comparing every
 * pair of 10,000 trials took half a minute under ASan. */
static void check_trials(al_sweep *s)
{
    al_sweep_assign_ids(s, "/nonexistent/attnlab-fuzz");
    FZ_CHECK(s->n_trials > 0, "a sweep without trials loaded");
    const al_sweep_trial **t = malloc((size_t)s->n_trials * sizeof *t);
    FZ_CHECK(t != NULL, "out of memory");
    for (int i = 0; i < s->n_trials; i++) {
        t[i] = &s->trials[i];
        FZ_CHECK(plain_id(t[i]->id), "trial %d has id '%s', not a plain directory name", i,
                 t[i]->id);
    }
    qsort(t, (size_t)s->n_trials, sizeof *t, by_id);
    for (int i = 1; i < s->n_trials; i++)
        FZ_CHECK(strcmp(t[i]->id, t[i - 1]->id) != 0, "trials %d and %d share id '%s'",
                 t[i - 1]->index, t[i]->index, t[i]->id);
    free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static fz_file in;
    if (!in.path[0]) fz_file_open(&in, "sweep.yaml");
    fz_file_put(&in, data, size);
    char *sets[FZ_MAX_SETS];
    int n_sets = fz_sets(data, size, sets);
    if (lists_plugins(in.path, sets, n_sets)) {
        fz_sets_free(sets, n_sets);
        return -1;   /* not a useful input: keep it out of the corpus */
    }
    al_sweep s;
    al_err e = {""};
    if (al_sweep_load(in.path, (const char *const *)sets, n_sets, NULL, 0, &s, &e) == 0) {
        check_trials(&s);
        al_sweep_free(&s);
    } else {
        fz_check_message(&e);
    }
    fz_sets_free(sets, n_sets);
    return 0;
}
