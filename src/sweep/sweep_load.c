/*
 * sweep_load.c - an experiment file made a sweep (al_sweep_load): the
 * --plugin files, the file and its --set edits, the plugins it lists,
 * then its trials, from its `stages` (sweep_stage.c) or its `sweep`
 * mapping (sweep_spec.c). Above both: each expands trials without knowing
 * which kind of file it came from. Last, the claims (sweep_claims.c), which
 * name the configurations the trials turned out to be.
 */
#include "al_sweep_spec.h"

#include <stdio.h>
#include <string.h>

#include "al_plugin.h"
#include "sweep_internal.h"

int al_sweep_load(const char *path, const char *const *sets, int n_sets,
                  const char *const *plugins, int n_plugins, al_sweep *s, al_err *e)
{
    memset(s, 0, sizeof *s);
    snprintf(s->file, sizeof s->file, "%s", path);
    for (int i = 0; i < n_plugins; i++)
        if (al_plugin_load(plugins[i], e)) return -1;
    if (al_yaml_load_digest(path, &s->root, s->file_sha256, e)) return -1;
    int rc = 0;
    for (int i = 0; i < n_sets && !rc; i++) rc = al_node_apply_set(s->root, sets[i], e);
    if (!rc) rc = al_plugin_load_listed(s->root, e);   /* before any variant is decoded */
    if (!rc && al_node_get(s->root, "stages")) rc = al_sweep_stages_load(s, plugins, n_plugins, e);
    else if (!rc) rc = al_sweep_expand(s, al_node_get(s->root, "sweep"), NULL, 0, plugins,
                                       n_plugins, NULL, e);
    if (!rc) rc = al_sweep_claims_load(s, e);
    if (!rc) rc = al_sweep_eval_load(s, e);
    if (rc) al_sweep_free(s);
    return rc;
}
