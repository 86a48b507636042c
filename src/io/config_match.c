/*
 * config_match.c - the MLP width, and model.match_params: widen the MLP or
 * add blocks until the parameter count is as close as it gets to the same
 * model with another attention. Counts come from the tensor table
 * (al_tensors.h), without building a model.
 */
#include "config_keys.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "al_data.h"
#include "al_tensors.h"

/* ---- the MLP width and parameter matching (after validation: the shapes
 * are sound, so every parameter count below exists) */

/* d_ff's row: the largest MLP width a checkpoint holds */
#define AL_MATCH_MAX_D_FF ((int)al_cfg_key(al_cfg_model_keys, "d_ff")->max)
#define AL_MATCH_MAX_N_LAYER 4096

/* Parameters of m with n_layer L, d_ff F and attention (ops, set) on every
 * layer without kv_share, or with ops NULL m's own stack and sharing (a
 * model.layer_attention list goes on repeating over the L layers). */
static size_t count_with(const al_model_config *m, int L, int F, const al_variant *ops,
                         const double *set, al_err *e)
{
    al_model_config x = *m;
    x.n_layer = L;
    x.d_ff = F;
    if (ops) {
        al_attn_config a;
        memset(&a, 0, sizeof a);
        snprintf(a.variant, sizeof a.variant, "%s", ops->name);
        a.attn = ops;
        memcpy(a.set, set, sizeof a.set);
        al_config_set_attn(&x, &a);
        x.kv_share = 1;   /* the model matched to shares nothing: sharing is m's choice */
    }
    return al_model_param_count(&x, e);
}

/* The value of the matched dimension closest to P_to: candidates lo and
 * lo + step (lo >= min); ties go to the smaller. 0 when none is >= min. */
static int closest(const al_model_config *m, int by, int lo, int step, int min, size_t P_to,
                   size_t *P, al_err *e)
{
    int best = 0;
    *P = 0;
    for (int x = lo; x <= lo + step; x += step) {
        if (x < min) continue;
        int L = by == AL_MATCH_N_LAYER ? x : m->n_layer, F = by == AL_MATCH_D_FF ? x : m->d_ff;
        size_t n = count_with(m, L, F, NULL, NULL, e);
        double d = fabs((double)n - (double)P_to), db = fabs((double)*P - (double)P_to);
        if (n && (!best || d < db)) best = x, *P = n;
    }
    return best;
}

static int check_written(const al_config *c, const al_node *root, const char *key, double got)
{
    char path[64];
    int exact;
    snprintf(path, sizeof path, "model.match_params.%s", key);
    const al_node *x = root ? al_cfg_find_path(root, path, &exact) : NULL;
    return x && exact && strtod(x->value, NULL) != got;
}

/* The resolved values a run wrote back must be what the match gives now. */
static int verify_written(const al_config *c, const al_node *root, al_err *e)
{
    const al_match_config *mt = &c->model.match;
    const char *keys[] = {"n_layer", "d_ff", "params", "params_to"};
    double now[] = {c->model.n_layer, c->model.d_ff, (double)mt->params, (double)mt->params_to};
    for (int i = 0; i < 4; i++) {
        if (!check_written(c, root, keys[i], now[i])) continue;
        char path[64];
        snprintf(path, sizeof path, "model.match_params.%s", keys[i]);
        return al_cfg_verr(e, c, root, path, "'%s' says what the match gave when this file "
                           "was written, but it now gives %.0f: the model changed; remove the "
                           "written values (n_layer, d_ff, params, params_to) to match afresh",
                           path, now[i]);
    }
    return 0;
}

static int resolve_match(al_config *c, const al_node *root, al_err *e)
{
    al_model_config *m = &c->model;
    al_match_config *mt = &m->match;
    al_model_config me = *m;
    al_err sub;
    int V = m->vocab_size > 0 ? m->vocab_size : al_data_vocab(&c->data);
    me.vocab_size = V > 0 ? V : 0;   /* the embedding is the same on both sides */
    size_t P_to = count_with(&me, m->n_layer, m->d_ff, mt->attn, mt->attn_set, &sub);
    if (!P_to)
        return al_cfg_verr(e, c, root, "model.match_params.to", "'model.match_params.to': %s",
                           strncmp(sub.msg, "model.attention: ", 17) == 0 ? sub.msg + 17
                                                                          : sub.msg);
    size_t P0 = count_with(&me, m->n_layer, m->d_ff, NULL, NULL, e), P = P0;
    double gap = (double)P_to - (double)P0;
    if (mt->by == AL_MATCH_D_FF && gap != 0) {
        double F = m->d_ff + gap / (2.0 * m->d_model * m->n_layer);   /* w1 and w2 per layer */
        if (F < 4 || F > AL_MATCH_MAX_D_FF)
            return al_cfg_verr(e, c, root, "model.match_params", "'model.match_params': "
                               "matching %zu parameters by d_ff needs d_ff %.1f, outside "
                               "[8, %d]", P_to, F, AL_MATCH_MAX_D_FF);
        m->d_ff = closest(&me, AL_MATCH_D_FF, 8 * (int)floor(F / 8), 8, 8, P_to, &P, e);
    } else if (mt->by == AL_MATCH_N_LAYER && gap != 0) {
        size_t P1 = count_with(&me, m->n_layer + 1, m->d_ff, NULL, NULL, e);
        double L = m->n_layer + gap / ((double)P1 - (double)P0);
        if (L > AL_MATCH_MAX_N_LAYER)
            return al_cfg_verr(e, c, root, "model.match_params", "'model.match_params': "
                               "matching %zu parameters by n_layer needs %.1f blocks, more "
                               "than %d", P_to, L, AL_MATCH_MAX_N_LAYER);
        m->n_layer = closest(&me, AL_MATCH_N_LAYER, L < 1 ? 0 : (int)floor(L), 1, 1, P_to, &P,
                             e);
    }
    AL_ASSERT(m->d_ff > 0 && m->n_layer > 0 && P > 0);
    if (m->n_layer_attn > m->n_layer)   /* as validation refuses it before matching */
        return al_cfg_verr(e, c, root, "model.match_params", "'model.match_params': matching by "
                           "n_layer gives %d blocks, fewer than the %d attentions of "
                           "'model.layer_attention'", m->n_layer, m->n_layer_attn);
    mt->n_layer = m->n_layer;
    mt->d_ff = m->d_ff;
    /* the counts with the real vocabulary (the same gap either way) */
    mt->params = V > 0 ? P : 0;
    mt->params_to = V > 0 ? P_to : 0;
    return verify_written(c, root, e);
}

int al_cfg_resolve_model(al_config *c, const al_node *root, al_err *e)
{
    al_model_config *m = &c->model;
    double F = m->mlp_ratio * m->d_model;
    if (m->d_ff == 0 && !(F >= 0.5 && F < INT_MAX))
        return al_cfg_verr(e, c, root, "model.mlp_ratio", "'model.mlp_ratio' (%g) times "
                           "'model.d_model' (%d) must give an MLP width in [1, %d], got %.0f",
                           m->mlp_ratio, m->d_model, INT_MAX, F);
    m->d_ff = al_config_d_ff(m);
    m->match.base_n_layer = m->n_layer;
    m->match.base_d_ff = m->d_ff;
    return m->match.by == AL_MATCH_NONE ? 0 : resolve_match(c, root, e);
}
