/*
 * config.c - values derived from a resolved configuration that the model
 * itself needs (al_config.h). Decoding and writing config files is the io
 * layer's (io/config.c).
 */
#include "al_config.h"
#include "al_flash.h"

#include <stdio.h>
#include <math.h>
#include <string.h>

int al_config_d_ff(const al_model_config *m)
{
    return m->d_ff > 0 ? m->d_ff : (int)lround(m->mlp_ratio * m->d_model);
}

static void model_shape(const al_model_config *m, al_attn_shape *s)
{
    memset(s, 0, sizeof *s);
    s->d_model = m->d_model;
    s->n_head = m->n_head;
    s->d_head = m->d_head ? m->d_head : (m->n_head > 0 ? m->d_model / m->n_head : 0);
    s->seq_len = m->seq_len;
    s->causal = m->causal;
    s->rope_base = (float)m->rope_base;
    s->norm_eps = (float)m->norm_eps;
    memcpy(s->set, m->attn_set, sizeof s->set);
    s->attn_kernel = m->attn_kernel;
    s->rope = al_config_layer_rope(m, 0);
}

/* ------------------------------------------------------------ RoPE */

const char *const al_rope_kinds[] = {"none", "linear", "ntk", "yarn", NULL};
_Static_assert(AL_ROPE_YARN == 3, "al_rope_kinds follows enum al_rope_kind");

int al_rope_kind_of(const char *name)
{
    if (!name[0]) return AL_ROPE_NONE;
    for (int i = 0; al_rope_kinds[i]; i++)
        if (strcmp(name, al_rope_kinds[i]) == 0) return i;
    return -1;
}

al_rope al_config_layer_rope(const al_model_config *m, int layer)
{
    const al_rope_scaling *sc = &m->rope_scaling;
    al_attn_config a = al_config_layer_attn(m, layer);
    int kind = al_rope_kind_of(sc->kind);
    AL_ASSERT(kind >= 0);
    return (al_rope){
        .base = (float)m->rope_base,
        .fraction = (float)(a.has_rope_fraction ? a.rope_fraction : m->rope_fraction),
        .kind = kind,
        .factor = kind == AL_ROPE_NONE ? 1.0f : (float)sc->factor,
        .original_seq_len = sc->original_seq_len > 0 ? sc->original_seq_len : m->seq_len,
    };
}

void al_config_attn_shape(const al_config *c, al_attn_shape *s)
{
    model_shape(&c->model, s);
}

int al_config_attn_kernel(const char *name, int seq_len)
{
    if (!name[0] || strcmp(name, "auto") == 0)
        return seq_len >= AL_ATTN_FUSED_MIN_T ? AL_ATTN_LONG : AL_ATTN_ROWS;
    if (strcmp(name, "rows") == 0) return AL_ATTN_ROWS;
    if (strcmp(name, "fused") == 0) return AL_ATTN_FUSED;
    return strcmp(name, "dense") == 0 ? AL_ATTN_DENSE : -1;
}

/* ------------------------------------------------------------ per layer */

int al_config_n_attn(const al_model_config *m)
{
    return m->n_layer_attn > 0 ? m->n_layer_attn : 1;
}

al_attn_config al_config_attn_item(const al_model_config *m, int k)
{
    AL_ASSERT(k >= 0 && k < al_config_n_attn(m));
    if (m->n_layer_attn > 0) return m->layer_attn[k];
    al_attn_config a;
    memset(&a, 0, sizeof a);
    memcpy(a.variant, m->variant, sizeof a.variant);
    a.attn = m->attn;
    memcpy(a.set, m->attn_set, sizeof a.set);
    return a;
}

al_attn_config al_config_layer_attn(const al_model_config *m, int layer)
{
    AL_ASSERT(layer >= 0);
    return al_config_attn_item(m, layer % al_config_n_attn(m));
}

void al_config_layer_shape(const al_model_config *m, int layer, al_attn_shape *s)
{
    model_shape(m, s);
    al_attn_config a = al_config_layer_attn(m, layer);
    memcpy(s->set, a.set, sizeof s->set);
    s->rope = al_config_layer_rope(m, layer);
}

static int same_attn(const al_attn_config *a, const al_attn_config *b)
{
    if (a->attn != b->attn || strcmp(a->variant, b->variant) != 0) return 0;
    int n = 0;
    if (a->attn && a->attn->settings)
        while (a->attn->settings[n].name) n++;
    for (int j = 0; j < n; j++)
        if (a->set[j] != b->set[j]) return 0;
    return a->has_rope_fraction == b->has_rope_fraction && a->rope_fraction == b->rope_fraction;
}

int al_config_mixed_attn(const al_model_config *m)
{
    al_attn_config a0 = al_config_attn_item(m, 0);
    for (int k = 1; k < al_config_n_attn(m); k++) {
        al_attn_config a = al_config_attn_item(m, k);
        if (!same_attn(&a0, &a)) return 1;
    }
    return 0;
}

/* ------------------------------------------------------------ kv_share */

int al_config_kv_src(const al_model_config *m, int layer)
{
    int S = m->kv_share > 1 ? m->kv_share : 1;
    return layer - layer % S;
}

int al_config_kv_consumer(const al_model_config *m, int layer)
{
    return al_config_kv_src(m, layer) != layer;
}

/* Every consumer has its producer's variant and settings (so it reads the
 * producer's saved K/V and cache by the same layout), and that variant can
 * share. */
int al_config_check_share(const al_model_config *m, char *err, size_t n)
{
    for (int l = 0; m->kv_share > 1 && l < m->n_layer; l++) {
        int src = al_config_kv_src(m, l);
        al_attn_config a = al_config_layer_attn(m, l), b = al_config_layer_attn(m, src);
        if (!a.attn || !b.attn) continue;   /* unresolved: validation says so */
        if (!a.attn->share) {
            snprintf(err, n, "model.kv_share: variant '%s' cannot share K/V across layers "
                     "(model.kv_share %d); the GQA family (mha, mqa, gqa) and local can",
                     a.variant, m->kv_share);
            return -1;
        }
        if (l != src && !same_attn(&a, &b)) {
            snprintf(err, n, "model.kv_share: layers %d and %d share K/V (model.kv_share %d) "
                     "but their attentions differ ('%s' and '%s', or their settings); a group "
                     "needs one variant and K/V shape", src, l, m->kv_share, b.variant,
                     a.variant);
            return -1;
        }
    }
    return 0;
}

void al_config_set_attn(al_model_config *m, const al_attn_config *a)
{
    memcpy(m->variant, a->variant, sizeof m->variant);
    m->attn = a->attn;
    memcpy(m->attn_set, a->set, sizeof m->attn_set);
    m->n_layer_attn = 0;
    memset(m->layer_attn, 0, sizeof m->layer_attn);
}

void al_config_attn_label(char *out, size_t n, const al_model_config *m, const char *sep,
                          void (*label)(char *out, size_t n, const al_attn_config *a))
{
    size_t len = 0;
    out[0] = 0;
    for (int k = 0; k < al_config_n_attn(m) && len < n; k++) {
        char one[128];
        al_attn_config a = al_config_attn_item(m, k);
        label(one, sizeof one, &a);
        len += (size_t)snprintf(out + len, n - len, "%s%s", k ? sep : "", one);
    }
}
