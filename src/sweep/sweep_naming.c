/*
 * sweep_naming.c - the names of a sweep's trials (sweep_internal.h): each
 * trial's id from its axes' values, told apart where two would share one,
 * its configuration group, and the baseline configuration marked. Split
 * from sweep_spec.c, whose expansion calls it once the trials exist; and
 * the hash of a trial's configuration its id carries (al_sweep_config_hash),
 * and of its model alone (al_sweep_model_hash).
 */
#include "al_sweep_spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_config_io.h"
#include "al_registry.h"
#include "al_sha256.h"
#include "sweep_internal.h"

/* Trial indices ordered by a string key, ties by index. */
static int by_key(const void *a, const void *b, void *keys)
{
    const char *const *k = keys;
    int x = *(const int *)a, y = *(const int *)b, c = strcmp(k[x], k[y]);
    return c ? c : (x > y) - (x < y);
}

static int *sorted_by(const char *const *keys, int n)
{
    int *ix = al_malloc((size_t)(n ? n : 1) * sizeof *ix);
    for (int i = 0; i < n; i++) ix[i] = i;
    qsort_r(ix, (size_t)n, sizeof *ix, by_key, (void *)keys);
    return ix;
}

/* The same trial twice: the pair the sweep's order meets first (the
 * smallest index with a later twin, and that twin). Sorted, not pairwise:
 * sweeps reach AL_SWEEP_MAX_TRIALS. */
static int same_trial_twice(spec_ctx *C, const char *const *hash)
{
    al_sweep *s = C->s;
    int *ix = sorted_by(hash, s->n_trials), best = -1, twin = -1;
    for (int k = 0; k + 1 < s->n_trials; k++)
        if (strcmp(hash[ix[k]], hash[ix[k + 1]]) == 0 && (best < 0 || ix[k] < best) &&
            (k == 0 || strcmp(hash[ix[k - 1]], hash[ix[k]]) != 0))
            best = ix[k], twin = ix[k + 1];
    free(ix);
    if (best < 0) return 0;
    return al_node_errf(C->e, al_sweep_node(C), "the sweep gives the same trial twice ('%s' and '%s'): "
                        "remove the duplicate value", s->trials[best].label, s->trials[twin].label);
}

/* Within one run of trials (by index) whose configuration labels print
 * alike: trial i gets its hash appended when a later one has another
 * configuration hash, or an earlier one that kept its plain label does
 * (the pairwise rule this replaces, in its order). */
static void tell_apart(al_sweep *s, const int *run, int n, char (*chash)[17], char *suffix)
{
    int first_plain = -1, plain_mixed = 0;
    char *after_same = al_malloc((size_t)n);   /* the trials after k share one chash */
    for (int k = n - 1; k >= 0; k--)
        after_same[k] = (char)(k + 2 >= n || (after_same[k + 1] &&
                                               strcmp(chash[run[k + 1]], chash[run[k + 2]]) == 0));
    for (int k = 0; k < n; k++) {
        const char *h = chash[run[k]];
        int clash = suffix[run[k]] ||
                    (k + 1 < n && (!after_same[k] || strcmp(chash[run[k + 1]], h) != 0)) ||
                    (first_plain >= 0 && (plain_mixed || strcmp(chash[first_plain], h) != 0));
        suffix[run[k]] = (char)clash;
        if (clash) continue;
        if (first_plain < 0) first_plain = run[k];
        else plain_mixed |= strcmp(chash[first_plain], h) != 0;
    }
    free(after_same);
}

/* Distinct configurations that print the same (values whose labels
 * coincide, or a label cut short) get their configuration hash appended;
 * the same trial twice is an error. */
int al_sweep_finish_names(spec_ctx *C)
{
    al_sweep *s = C->s;
    int n = s->n_trials;
    char (*chash)[17] = al_malloc((size_t)(n ? n : 1) * sizeof *chash);
    const char **keys = al_malloc((size_t)(n ? n : 1) * sizeof *keys);
    char *suffix = al_calloc((size_t)(n ? n : 1), 1);
    for (int i = 0; i < n; i++) al_sweep_config_hash(&s->trials[i].cfg, 1, chash[i]);
    for (int i = 0; i < n; i++) keys[i] = s->trials[i].hash;
    int rc = same_trial_twice(C, keys);
    for (int i = 0; i < n; i++) {
        keys[i] = s->trials[i].config;
        suffix[i] = strlen(s->trials[i].config) >= 95;
    }
    int *ix = rc ? NULL : sorted_by(keys, n);
    for (int k = 0, end; !rc && k < n; k = end) {
        for (end = k + 1; end < n && strcmp(keys[ix[k]], keys[ix[end]]) == 0; end++) {}
        tell_apart(s, ix + k, end - k, chash, suffix);
    }
    for (int i = 0; i < n && !rc; i++) {
        al_sweep_trial *t = &s->trials[i];
        if (suffix[i]) snprintf(t->config + strlen(t->config), 10, "-%.8s", chash[i]);
        snprintf(t->label, sizeof t->label, "%.130s_seed%llu", t->config,
                 (unsigned long long)t->seed);
        snprintf(t->id, sizeof t->id, "%s", t->label);
    }
    free(ix), free(suffix), free(keys), free(chash);
    return rc;
}

/* Two configurations whose labels print the same get their key appended. */
void al_sweep_finish_groups(al_sweep *s)
{
    /* a run of equal group labels (sorted, not pairwise: sweeps reach
     * AL_SWEEP_MAX_TRIALS) clashes when its keys are not all one */
    const char **keys = al_malloc((size_t)(s->n_trials ? s->n_trials : 1) * sizeof *keys);
    for (int i = 0; i < s->n_trials; i++) keys[i] = s->trials[i].group;
    int *ix = sorted_by(keys, s->n_trials);
    for (int k = 0, end; k < s->n_trials; k = end) {
        int mixed = 0;
        for (end = k + 1; end < s->n_trials && strcmp(keys[ix[k]], keys[ix[end]]) == 0; end++)
            mixed |= s->trials[ix[end]].group_key != s->trials[ix[k]].group_key;
        for (int m = k; mixed && m < end; m++)
            s->trials[ix[m]].baseline |= 2;   /* marked: suffix below, after every comparison */
    }
    free(ix);
    free(keys);
    for (int i = 0; i < s->n_trials; i++) {
        al_sweep_trial *t = &s->trials[i];
        if (!(t->baseline & 2)) continue;
        t->baseline &= 1;
        size_t len = strlen(t->group);
        snprintf(t->group + (len < 100 ? len : 100), 10, "-%08llx",
                 (unsigned long long)(t->group_key & 0xffffffffULL));
    }
}

/* The baseline configuration: the one sweep.baseline matches (exactly
 * one), else the first. Marks its trials. Under sweep.scaling it is a
 * design: its configurations at every size and budget (design_key). */
int al_sweep_mark_baseline(spec_ctx *C)
{
    al_sweep *s = C->s;
    int first = -1;
    for (int i = 0; i < s->n_trials; i++) {
        const al_sweep_trial *t = &s->trials[i];
        if (C->baseline && !t->baseline) continue;
        if (first < 0) first = i;
        else if (t->design_key != s->trials[first].design_key && C->baseline)
            return al_node_errf(C->e, C->baseline, "'sweep.baseline' matches more than one "
                                "configuration ('%s' and '%s'): name more axes",
                                s->trials[first].group, t->group);
    }
    if (first < 0)
        return al_node_errf(C->e, C->baseline, "'sweep.baseline' matches no configuration "
                            "of the sweep%s", s->n_excluded ? " (after exclude)" : "");
    for (int i = 0; i < s->n_trials; i++)
        s->trials[i].baseline = s->trials[i].design_key == s->trials[first].design_key;
    return 0;
}

/* ------------------------------------------------------------ identity */

/* h extended (FNV-1a) by the SHA-256 of the file at path. */
static uint64_t hash_file(uint64_t h, const char *path)
{
    char sha[65];
    al_err ignore;
    if (al_sha256_file(path, sha, &ignore) != 0) snprintf(sha, sizeof sha, "unreadable");
    for (const char *p = sha; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
    return h;
}

void al_sweep_config_hash(const al_config *c0, int no_seed, char *out)
{
    al_config c = *c0;
    c.train.threads = 0;            /* how a trial runs, not what it computes */
    c.train.checkpoint_every = 0;
    c.train.max_memory = 0;         /* a limit, not the run */
    /* the kernels compute the same attention (up to rounding): how, not what */
    snprintf(c.train.attention_kernel, sizeof c.train.attention_kernel, "auto");
    if (no_seed) {
        if (c.data.seed == c.train.seed) c.data.seed = 0;
        c.train.seed = 0;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    AL_ASSERT(f != NULL);
    al_config_write_yaml_identity(&c, f);   /* report.* left out */
    fclose(f);
    uint64_t h = 0xcbf29ce484222325ULL;   /* FNV-1a */
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)buf[i]) * 0x100000001b3ULL;
    free(buf);
    if (c.train.init_from[0]) h = hash_file(h, c.train.init_from);   /* its content, not its path */
    /* each plugin's content too, as a resume checks it: a rebuilt plugin
     * makes the trials that load it new ones, never mixed with the old */
    for (int i = 0; i < c.n_plugins; i++) h = hash_file(h, c.plugins[i]);
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* One attention of the gqa family as gqa with its K/V heads G; any other
 * left as it is. */
static void canonical_attn(int n_head, char *variant, const al_variant **attn, double *set)
{
    const al_variant *gqa = al_variant_find("gqa");
    int k = gqa ? al_variant_setting_index(gqa, "n_kv_head") : -1;
    double G;
    if (k < 0) return;
    if (strcmp(variant, "mha") == 0) G = n_head;
    else if (strcmp(variant, "mqa") == 0) G = 1;
    else if (strcmp(variant, "gqa") == 0) G = set[k];
    else return;
    memset(set, 0, AL_MAX_SETTINGS * sizeof *set);
    set[k] = G;
    *attn = gqa;
    memset(variant, 0, AL_NAME_LEN);
    memcpy(variant, "gqa", 3);
}

/* A layer_attention list whose items are all the first, as that one
 * attention (with its own rope_fraction, if it gives one, as the model's). */
static void collapse_layers(al_model_config *m)
{
    const al_attn_config *a = &m->layer_attn[0];
    for (int i = 1; i < m->n_layer_attn; i++) {
        const al_attn_config *b = &m->layer_attn[i];
        if (strcmp(a->variant, b->variant) || memcmp(a->set, b->set, sizeof a->set) ||
            a->has_rope_fraction != b->has_rope_fraction ||
            (a->has_rope_fraction && a->rope_fraction != b->rope_fraction))
            return;
    }
    if (a->has_rope_fraction) m->rope_fraction = a->rope_fraction;
    memcpy(m->variant, a->variant, sizeof m->variant);
    m->attn = a->attn;
    memcpy(m->attn_set, a->set, sizeof m->attn_set);
    m->n_layer_attn = 0;
    memset(m->layer_attn, 0, sizeof m->layer_attn);
}

void al_sweep_model_hash(const al_model_config *m0, char *out)
{
    al_model_config m = *m0;
    memset(&m.match, 0, sizeof m.match);   /* how the shape was found, not the shape */
    canonical_attn(m.n_head, m.variant, &m.attn, m.attn_set);
    for (int i = 0; i < m.n_layer_attn; i++)
        canonical_attn(m.n_head, m.layer_attn[i].variant, &m.layer_attn[i].attn,
                       m.layer_attn[i].set);
    if (m.n_layer_attn) collapse_layers(&m);
    char *json = al_config_model_json(&m);
    uint64_t h = 0xcbf29ce484222325ULL;   /* FNV-1a */
    for (const char *p = json; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
    free(json);
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}
