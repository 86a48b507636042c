/*
 * sweep_stage.c - chained stages in one experiment file (al_sweep_spec.h,
 * "Stages"): each stage is a sweep; a stage with `from` is expanded once
 * per trial of that stage, on that trial's own config, with the stage's
 * conversion axes, and its trials remember which trial they start from.
 * The expansion itself is sweep_spec.c's (al_sweep_expand).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_convert.h"
#include "al_sweep_spec.h"
#include "sweep_internal.h"

/* One stage as written, its lists normalised to sequences. */
typedef struct stage_spec {
    const al_node *node, *name, *from, *where, *steps, *sweep;
    const al_node *edits[3];           /* data, model, train */
    al_node *to, *method, *step_list;  /* owned sequences, or NULL */
    int from_i;                        /* the stage it reads, or -1 */
} stage_spec;

typedef struct stage_ctx {
    al_sweep *s;
    const char *const *plugins;
    int n_plugins;
    stage_spec st[AL_SWEEP_MAX_STAGES];
    al_node **trees;                   /* each trial's tree, for the stages after it */
    int cap;
    al_err *e;
} stage_ctx;

static const char *const edit_keys[3] = {"data", "model", "train"};
static const char *const stage_keys[] = {"name", "description", "from", "where", "convert",
                                         "steps", "data", "model", "train", "sweep", NULL};
static const char *const stage_sweep_keys[] = {"seeds", "grid", "zip", "exclude", "baseline",
                                               NULL};

/* ------------------------------------------------------------ parsing */

/* Key i of mapping m must be one of keys (did you mean ...). */
static int known_key(al_err *e, const al_node *m, int i, const char *const *keys,
                     const char *where)
{
    int best = 99, bi = -1, k = 0;
    for (; keys[k]; k++) {
        if (strcmp(keys[k], m->keys[i]) == 0) return 0;
        int d = al_edit_distance(keys[k], m->keys[i]);
        if (d < best) best = d, bi = k;
    }
    char known[256] = "";
    for (k = 0; keys[k]; k++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", k ? ", " : "",
                 keys[k]);
    return al_errf(e, "%s:%d:%d: error: unknown key '%.80s' in %s (%s%s%s)", m->file,
                   m->key_line[i], m->key_col[i], m->keys[i], where,
                   best <= 2 ? "did you mean '" : "known: ", best <= 2 ? keys[bi] : known,
                   best <= 2 ? "'?" : "");
}

/* A scalar or a list of them (or of mappings) as a sequence (owned). */
static al_node *as_list(const al_node *x)
{
    if (x->kind == AL_NODE_SEQ) return al_node_clone(x);
    al_node *seq = al_node_new(AL_NODE_SEQ, x);
    al_node_append(seq, NULL, al_node_clone(x));
    return seq;
}

/* convert.to: each item a model.attention mapping, or a variant's name. */
static int parse_to(stage_ctx *C, stage_spec *sp, const al_node *x)
{
    sp->to = as_list(x);
    if (sp->to->n == 0) return al_node_errf(C->e, x, "'convert.to' is empty");
    for (int i = 0; i < sp->to->n; i++) {
        al_node *it = sp->to->items[i];
        if (it->kind == AL_NODE_SEQ)
            return al_node_errf(C->e, it, "'convert.to' lists attention mappings such as "
                                "{variant: gqa, n_kv_head: 2}, or variant names");
        if (it->kind == AL_NODE_MAP) continue;
        al_node *m = al_node_new(AL_NODE_MAP, it);
        al_node_append(m, "variant", it);
        sp->to->items[i] = m;
    }
    return 0;
}

static int parse_convert(stage_ctx *C, stage_spec *sp, const al_node *x)
{
    static const char *const keys[] = {"to", "method", NULL};
    if (x->kind != AL_NODE_MAP)
        return al_node_errf(C->e, x, "'convert' must be a mapping {to: ..., method: ...}");
    for (int i = 0; i < x->n; i++)
        if (known_key(C->e, x, i, keys, "'convert'")) return -1;
    const al_node *to = al_node_get(x, "to"), *method = al_node_get(x, "method");
    if (!to || !method)
        return al_node_errf(C->e, x, "'convert' needs 'to' (the attention to convert to) and "
                            "'method' (mean, first, random or svd)");
    if (parse_to(C, sp, to)) return -1;
    sp->method = as_list(method);
    for (int i = 0; i < sp->method->n; i++)
        if (sp->method->items[i]->kind != AL_NODE_SCALAR)
            return al_node_errf(C->e, sp->method->items[i], "'convert.method' lists method "
                                "names: mean, first, random or svd");
    return 0;
}

/* A stage's own sweep mapping: what a stage may sweep. */
static int check_stage_sweep(stage_ctx *C, const stage_spec *sp, int k)
{
    const al_node *sw = sp->sweep;
    if (sw->kind != AL_NODE_MAP)
        return al_node_errf(C->e, sw, "a stage's 'sweep' must be a mapping (seeds, grid, zip, "
                            "exclude, baseline)");
    for (int i = 0; i < sw->n; i++) {
        if (known_key(C->e, sw, i, stage_sweep_keys, "a stage's 'sweep'")) return -1;
        if (sp->from && strcmp(sw->keys[i], "seeds") == 0)
            return al_node_errf(C->e, sw->items[i], "a stage with 'from' keeps each upstream "
                                "trial's seed: give the seeds to stage '%s'",
                                C->st[sp->from_i].name->value);
        if (strcmp(sw->keys[i], "seeds") == 0 && sw->items[i]->kind == AL_NODE_MAP)
            return al_node_errf(C->e, sw->items[i], "seeds in rounds ({min, max, until: "
                                "resolved}) are for a plain 'sweep', not stages: give a count "
                                "or a list");
    }
    return 0;
}

static int parse_from(stage_ctx *C, stage_spec *sp, int k)
{
    const al_node *f = sp->from;
    if (f->kind == AL_NODE_SCALAR)
        for (int j = 0; j < k; j++)
            if (strcmp(C->st[j].name->value, f->value) == 0) return sp->from_i = j, 0;
    return al_node_errf(C->e, f, "'from' must name an earlier stage%s%.60s%s",
                        f->kind == AL_NODE_SCALAR ? " ('" : "",
                        f->kind == AL_NODE_SCALAR ? f->value : "",
                        f->kind == AL_NODE_SCALAR ? "' is not one)" : "");
}

static int parse_name(stage_ctx *C, const stage_spec *sp, int k)
{
    const al_node *n = sp->name;
    if (!n) return al_node_errf(C->e, sp->node, "a stage needs a 'name'");
    const char *v = n->kind == AL_NODE_SCALAR ? n->value : "";
    if (!v[0] || strlen(v) > 32 || v[strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-")])
        return al_node_errf(C->e, n, "a stage name is 1 to 32 lowercase letters, digits or "
                            "'-' (it begins its trials' ids)");
    for (int j = 0; j < k; j++)
        if (strcmp(C->st[j].name->value, v) == 0)
            return al_node_errf(C->e, n, "stage '%s' is named twice", v);
    return 0;
}

/* The keys of stage k, each where it belongs. */
static int parse_stage(stage_ctx *C, int k, const al_node *x)
{
    stage_spec *sp = &C->st[k];
    sp->node = x, sp->from_i = -1;
    if (x->kind != AL_NODE_MAP)
        return al_node_errf(C->e, x, "a stage must be a mapping {name: ..., ...}");
    for (int i = 0; i < x->n; i++)
        if (known_key(C->e, x, i, stage_keys, "a stage")) return -1;
    sp->name = al_node_get(x, "name"), sp->from = al_node_get(x, "from");
    sp->where = al_node_get(x, "where"), sp->steps = al_node_get(x, "steps");
    sp->sweep = al_node_get(x, "sweep");
    for (int i = 0; i < 3; i++) sp->edits[i] = al_node_get(x, edit_keys[i]);
    const al_node *conv = al_node_get(x, "convert");
    if (parse_name(C, sp, k) || (sp->from && parse_from(C, sp, k))) return -1;
    const al_node *needs_from = sp->where ? sp->where : conv ? conv : sp->steps;
    if (!sp->from && needs_from)
        return al_node_errf(C->e, needs_from, "'where', 'convert' and 'steps' need 'from': the "
                            "stage whose checkpoints this one starts from");
    for (int i = 0; i < 3; i++)
        if (sp->edits[i] && sp->edits[i]->kind != AL_NODE_MAP)
            return al_node_errf(C->e, sp->edits[i], "a stage's '%s' must be a mapping of "
                                "settings", edit_keys[i]);
    if (sp->where && (sp->where->kind != AL_NODE_MAP || sp->where->n == 0))
        return al_node_errf(C->e, sp->where, "'where' must be a mapping {key.path: value, ...}");
    if (sp->steps) sp->step_list = as_list(sp->steps);
    if (conv && parse_convert(C, sp, conv)) return -1;
    return sp->sweep ? check_stage_sweep(C, sp, k) : 0;
}

/* ------------------------------------------------------------ one stage */

/* steps for upstream run u: N, or P% of u's train.steps (at least 1). */
static al_node *steps_for(stage_ctx *C, const stage_spec *sp, const al_sweep_trial *u)
{
    al_node *seq = al_node_clone(sp->step_list);
    for (int i = 0; i < seq->n; i++) {
        al_node *it = seq->items[i];
        size_t n = it->kind == AL_NODE_SCALAR ? strlen(it->value) : 0;
        if (!n || it->value[n - 1] != '%') continue;   /* a number: decoding checks it */
        char *end;
        errno = 0;
        double p = strtod(it->value, &end);
        if (errno || end != it->value + n - 1 || !(p > 0 && p <= 1000)) {
            al_node_errf(C->e, it, "'steps' lists step counts or percentages of the upstream "
                         "run's steps such as 5%%, got '%.40s'", it->value);
            al_node_free(seq);
            return NULL;
        }
        long v = lround(p / 100.0 * u->cfg.train.steps);
        char buf[32];
        snprintf(buf, sizeof buf, "%ld", v > 0 ? v : 1);
        free(it->value);
        it->value = strdup(buf);
        AL_ASSERT(it->value != NULL);
    }
    return seq;
}

static int set_scalar(al_node *root, const char *path, const char *text, const al_node *at,
                      al_err *e)
{
    al_node *v = al_node_new(AL_NODE_SCALAR, at);
    v->value = strdup(text);
    AL_ASSERT(v->value != NULL);
    int rc = al_node_set_path(root, path, v, 1, e);
    al_node_free(v);
    return rc;
}

/* u's config with the stage's edits; the model outside attention pinned to
 * u's when u's was parameter-matched (a conversion keeps it). */
static al_node *upstream_root(stage_ctx *C, const stage_spec *sp, const al_sweep_trial *u,
                              const al_node *tree)
{
    al_node *root = al_node_clone(tree);
    char path[300], num[32];
    for (int i = 0; i < 3; i++)
        for (int j = 0; sp->edits[i] && j < sp->edits[i]->n; j++) {
            const char *key = sp->edits[i]->keys[j];
            snprintf(path, sizeof path, "%s.%s", edit_keys[i], key);
            /* the stage's attention replaces the upstream's other form */
            if (strcmp(path, "model.attention") == 0 || strcmp(path, "model.layer_attention") == 0)
                al_node_remove(al_node_get(root, "model"),
                               strcmp(key, "attention") == 0 ? "layer_attention" : "attention");
            if (al_node_set_path(root, path, sp->edits[i]->items[j], 1, C->e)) goto fail;
        }
    /* convert.to is the attention of every layer: it replaces a
     * model.layer_attention stack (which converts layer by layer) */
    if (sp->to) al_node_remove(al_node_get(root, "model"), "layer_attention");
    const al_node *init = al_node_get(al_node_get(root, "train"), "init_from");
    if (init && init->kind == AL_NODE_SCALAR && init->value[0]) {
        al_node_errf(C->e, init, "a stage with 'from' sets train.init_from itself (to the "
                     "upstream trial's checkpoint)");
        goto fail;
    }
    if (u->cfg.model.match.by != AL_MATCH_NONE) {
        snprintf(num, sizeof num, "%d", u->cfg.model.n_layer);
        if (set_scalar(root, "model.n_layer", num, sp->node, C->e)) goto fail;
        snprintf(num, sizeof num, "%d", u->cfg.model.d_ff);
        if (set_scalar(root, "model.d_ff", num, sp->node, C->e) ||
            set_scalar(root, "model.match_params", "off", sp->node, C->e))
            goto fail;
    }
    return root;
fail:
    al_node_free(root);
    return NULL;
}

static uint64_t fnv(uint64_t h, const char *s)
{
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

/* A sub-sweep's trial joins s: renamed for its stage, its hash and
 * configuration bound to its upstream's. */
static void adopt(stage_ctx *C, int k, const al_sweep_trial *t, const al_sweep_trial *u,
                  int name_upstream, al_node *tree)
{
    al_sweep *s = C->s;
    if (s->n_trials == C->cap) {
        C->cap = C->cap ? 2 * C->cap : 64;
        s->trials = realloc(s->trials, (size_t)C->cap * sizeof *s->trials);
        C->trees = realloc(C->trees, (size_t)C->cap * sizeof *C->trees);
        AL_ASSERT(s->trials && C->trees);
    }
    al_sweep_trial *x = &s->trials[s->n_trials];
    *x = *t;
    x->index = s->n_trials, x->stage = k, x->upstream = u ? u->index : -1;
    char up[AL_SWEEP_ID_LEN] = "", cfg[AL_SWEEP_ID_LEN], grp[AL_SWEEP_ID_LEN];
    if (u && name_upstream) snprintf(up, sizeof up, "_%.60s", u->group);
    const char *name = C->st[k].name->value;
    int plain_c = strcmp(t->config, "base") == 0, plain_g = strcmp(t->group, "base") == 0;
    /* A long name is cut at AL_SWEEP_ID_LEN - 1 bytes, as it always was (ids
     * of results on disk stay the same, so sweeps resume); the counts are
     * looked at so that -Wformat-truncation (debug builds) sees it meant. */
    int nc = snprintf(cfg, sizeof cfg, "%s%s%s%.90s", name, up, plain_c ? "" : "_",
                      plain_c ? "" : t->config);
    int ng = snprintf(grp, sizeof grp, "%s%s%s%.90s", name, up, plain_g ? "" : "_",
                      plain_g ? "" : t->group);
    (void)nc, (void)ng;
    memcpy(x->config, cfg, sizeof cfg);
    memcpy(x->group, grp, sizeof grp);
    snprintf(x->label, sizeof x->label, "%.140s_seed%llu", cfg, (unsigned long long)t->seed);
    snprintf(x->id, sizeof x->id, "%s", x->label);
    /* a later stage's own baseline (its axes alone) marks, for each upstream
     * trial, the trial the stage's others are compared with; without one,
     * the first stage's stands for all */
    if (k > 0 && !(C->st[k].sweep && al_node_get(C->st[k].sweep, "baseline")))
        x->baseline = 0;
    if (u) {
        uint64_t h = fnv(fnv(fnv(0xcbf29ce484222325ULL, t->hash), "upstream:"), u->hash);
        snprintf(x->hash, sizeof x->hash, "%016llx", (unsigned long long)h);
    }
    char key[64];
    snprintf(key, sizeof key, "%d:%llx:%llx", k, (unsigned long long)(u ? u->group_key : 0),
             (unsigned long long)t->group_key);
    x->group_key = fnv(0xcbf29ce484222325ULL, key);
    C->trees[s->n_trials++] = tree;
}

/* A trial that starts from u's checkpoint converted (train.init_convert):
 * whether the conversion can work, asked when the sweep is read (a dry
 * run, the run's start) rather than found after u has trained. */
static int check_conversion(stage_ctx *C, int k, const al_sweep_trial *u, const al_sweep_trial *t)
{
    const char *how = t->cfg.train.init_convert;
    al_err why;
    if (!how[0] || !strcmp(how, "none") ||
        al_convert_check(&u->cfg.model, &t->cfg.model, al_convert_method_parse(how), &why) == 0)
        return 0;
    const al_node *at = al_node_get(C->st[k].node, "convert");
    const char *msg = why.msg + (strncmp(why.msg, "convert: ", 9) ? 0 : 9);
    return al_node_errf(C->e, at ? at : C->st[k].node, "stage '%s': converting trial '%s' (%s) "
                        "to %s by %s cannot work: %s", C->st[k].name->value, u->label,
                        u->cfg.model.variant, t->cfg.model.variant, how, msg);
}

/* Expand one sweep (root owned by the sub-sweep) and adopt its trials. */
static int expand_into(stage_ctx *C, int k, al_node *root, const al_sweep_axis_in *ax, int n_ax,
                       const al_sweep_trial *u, int name_upstream)
{
    al_sweep sub;
    al_node **trees;
    memset(&sub, 0, sizeof sub);
    snprintf(sub.file, sizeof sub.file, "%s", C->s->file);
    sub.root = root;
    int rc = al_sweep_expand(&sub, C->st[k].sweep, ax, n_ax, C->plugins, C->n_plugins, &trees,
                             C->e);
    if (rc) {   /* the sub-sweep's own label means little here: say which stage */
        char *in = strstr(C->e->msg, " (in trial '");
        size_t len = in ? (size_t)(in - C->e->msg) : strlen(C->e->msg);
        snprintf(C->e->msg + len, sizeof C->e->msg - len, " (in stage '%s'%s%s%s)",
                 C->st[k].name->value, u ? ", from trial '" : "", u ? u->label : "",
                 u ? "'" : "");
    }
    for (int i = 0; rc == 0 && u && i < sub.n_trials; i++)
        rc = check_conversion(C, k, u, &sub.trials[i]);
    if (rc != 0 && trees)
        for (int i = 0; i < sub.n_trials; i++) al_node_free(trees[i]);
    if (rc != 0) free(trees);
    if (rc == 0) {
        for (int i = 0; i < sub.n_trials; i++)
            adopt(C, k, &sub.trials[i], u, name_upstream, trees[i]);
        C->s->n_excluded += sub.n_excluded;
        free(trees);
        if (k == 0) {   /* the experiment's name and description, checked there */
            memcpy(C->s->name, sub.name, sizeof sub.name);
            memcpy(C->s->description, sub.description, sizeof sub.description);
        }
    }
    al_sweep_free(&sub);
    return rc;
}

/* How many configurations of stage j the stage reads (where applied). */
static int upstream_groups(stage_ctx *C, const stage_spec *sp)
{
    const al_sweep_stage *from = &C->s->stages[sp->from_i];
    int n = 0;
    for (int i = from->first; i < from->first + from->n; i++) {
        const al_sweep_trial *t = &C->s->trials[i];
        if (sp->where && !al_sweep_tree_matches(C->trees[i], sp->where)) continue;
        int seen = 0;
        for (int j = from->first; j < i && !seen; j++)
            seen = C->s->trials[j].group_key == t->group_key &&
                   (!sp->where || al_sweep_tree_matches(C->trees[j], sp->where));
        n += !seen;
    }
    return n;
}

static int expand_from(stage_ctx *C, int k)
{
    const stage_spec *sp = &C->st[k];
    const al_sweep_stage from = C->s->stages[sp->from_i];
    int named = upstream_groups(C, sp) > 1, rc = 0;
    for (int i = from.first; i < from.first + from.n && !rc; i++) {
        if (sp->where && !al_sweep_tree_matches(C->trees[i], sp->where)) continue;
        al_sweep_trial u = C->s->trials[i];   /* s->trials may move while adopting */
        al_sweep_axis_in ax[3];
        int n = 0;
        al_node *steps = sp->step_list ? steps_for(C, sp, &u) : NULL;
        if (sp->step_list && !steps) return -1;
        if (sp->to) ax[n++] = (al_sweep_axis_in){"model.attention", sp->to};
        if (sp->method) ax[n++] = (al_sweep_axis_in){"train.init_convert", sp->method};
        if (steps) ax[n++] = (al_sweep_axis_in){"train.steps", steps};
        al_node *root = upstream_root(C, sp, &u, C->trees[i]);
        rc = root ? expand_into(C, k, root, ax, n, &u, named) : -1;
        al_node_free(steps);
    }
    return rc;
}

static int expand_stage(stage_ctx *C, int k)
{
    const stage_spec *sp = &C->st[k];
    al_sweep *s = C->s;
    al_sweep_stage *g = &s->stages[k];
    snprintf(g->name, sizeof g->name, "%s", sp->name->value);
    g->from = sp->from_i;
    g->first = s->n_trials;
    int rc;
    if (sp->from_i >= 0) {
        rc = expand_from(C, k);
    } else {
        al_node *root = al_node_clone(s->root);
        char path[300];
        rc = 0;
        for (int i = 0; i < 3 && !rc; i++)
            for (int j = 0; sp->edits[i] && j < sp->edits[i]->n && !rc; j++) {
                snprintf(path, sizeof path, "%s.%s", edit_keys[i], sp->edits[i]->keys[j]);
                rc = al_node_set_path(root, path, sp->edits[i]->items[j], 1, C->e);
            }
        if (rc) al_node_free(root);
        else rc = expand_into(C, k, root, NULL, 0, NULL, 0);
    }
    g->n = s->n_trials - g->first;
    if (rc == 0 && g->n == 0)
        return al_node_errf(C->e, sp->where ? sp->where : sp->node, "stage '%s' has no trials%s",
                            g->name, sp->where ? ": 'where' matches none of its upstream's" : "");
    return rc;
}

/* ------------------------------------------------------------ public */

/* Labels cut short may meet across stages: the hash tells them apart. */
static void unique_ids(al_sweep *s)
{
    for (int i = 0; i < s->n_trials; i++)
        for (int j = i + 1; j < s->n_trials; j++)
            if (strcmp(s->trials[i].label, s->trials[j].label) == 0) {
                al_sweep_trial *t = &s->trials[j];
                snprintf(t->label + (strlen(t->label) < 140 ? strlen(t->label) : 140), 10,
                         "-%.8s", t->hash);
                snprintf(t->id, sizeof t->id, "%s", t->label);
            }
}

static int load_stages(stage_ctx *C, const al_node *list)
{
    al_sweep *s = C->s;
    const al_node *top = al_node_get(s->root, "sweep");
    if (top)
        return al_node_errf(C->e, top, "with 'stages', each stage has its own 'sweep'; move "
                            "this one into the first stage");
    if (list->kind != AL_NODE_SEQ || list->n == 0)
        return al_node_errf(C->e, list, "'stages' must be a non-empty list of stages");
    if (list->n > AL_SWEEP_MAX_STAGES)
        return al_node_errf(C->e, list, "at most %d stages", AL_SWEEP_MAX_STAGES);
    for (int k = 0; k < list->n; k++)
        if (parse_stage(C, k, list->items[k])) return -1;
    for (int k = 0; k < list->n; k++, s->n_stages = k)
        if (expand_stage(C, k)) return -1;
    s->n_stages = list->n;
    unique_ids(s);
    return 0;
}

int al_sweep_stages_load(al_sweep *s, const char *const *plugins, int n_plugins, al_err *e)
{
    stage_ctx C;
    memset(&C, 0, sizeof C);
    C.s = s, C.plugins = plugins, C.n_plugins = n_plugins, C.e = e;
    int rc = load_stages(&C, al_node_get(s->root, "stages"));
    for (int i = 0; i < s->n_trials; i++) al_node_free(C.trees[i]);
    free(C.trees);
    for (int k = 0; k < AL_SWEEP_MAX_STAGES; k++) {
        al_node_free(C.st[k].to);
        al_node_free(C.st[k].method);
        al_node_free(C.st[k].step_list);
    }
    return rc;
}
