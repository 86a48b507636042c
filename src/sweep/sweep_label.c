/*
 * sweep_label.c - the readable names of trials and stacks: a sweep axis's
 * value as it appears in a trial id ("kv2", "lr0.003", "gqa-kv2+mha"), an
 * attention's label ("gqa-kv2") and a stack's ("gqa-kv2/mha-share2").
 * Split from sweep_spec.c, which builds trial ids from them; the report and
 * the commands print the same labels.
 */
#include "al_sweep_spec.h"

#include <stdio.h>
#include <string.h>

#include "al_registry.h"
#include "sweep_internal.h"

/* Short names for the keys swept most often; others lose their '_'. */
static const char *const abbrev[][2] = {
    {"n_kv_head", "kv"}, {"d_latent", "latent"}, {"d_rope", "rope"},
    {"d_q_latent", "qlatent"}, {"n_layer", "L"}, {"d_model", "d"}, {"n_head", "h"},
    {"d_head", "dh"}, {"seq_len", "T"}, {"batch_size", "B"}, {"weight_decay", "wd"},
    {"warmup_steps", "warmup"}, {"min_lr", "minlr"}, {"mlp_ratio", "mlp"},
    {"kv_share", "share"},
    {NULL, NULL},
};

static void append(char *out, size_t n, const char *s)
{
    size_t len = strlen(out);
    for (; *s && len + 1 < n; s++) {
        char c = *s;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '+' || c == '-';
        out[len++] = ok ? c : '-';
    }
    out[len] = 0;
}

static void key_label(char *out, size_t n, const char *key)
{
    for (int i = 0; abbrev[i][0]; i++)
        if (strcmp(abbrev[i][0], key) == 0) return append(out, n, abbrev[i][1]);
    char buf[128];
    size_t j = 0;
    for (const char *p = key; *p && j + 1 < sizeof buf; p++)
        if (*p != '_') buf[j++] = *p;
    buf[j] = 0;
    append(out, n, buf);
}

void al_sweep_value_label(char *out, size_t n, const char *key, const al_node *v)
{
    if (v->kind != AL_NODE_SCALAR) {   /* a list's items (model.layer_attention) by '+' */
        for (int i = 0; i < v->n; i++) {
            if (i) append(out, n, v->keys ? "-" : "+");
            al_sweep_value_label(out, n, v->keys ? v->keys[i] : key, v->items[i]);
        }
        return;
    }
    const char *val = strrchr(v->value, '/') ? strrchr(v->value, '/') + 1 : v->value;
    if (strcmp(key, "variant") != 0 && strcmp(key, "init_convert") != 0) {   /* names alone */
        key_label(out, n, key);
        if (!strchr("0123456789.+-", val[0]) || !val[0]) append(out, n, "-");
    }
    append(out, n, val[0] ? val : "empty");
}

void al_sweep_attn_label(char *out, size_t n, const al_attn_config *a)
{
    char num[64];
    out[0] = 0;
    append(out, n, a->variant);
    for (int j = 0; a->attn && j < al_variant_n_settings(a->attn); j++) {
        const al_setting *s = &a->attn->settings[j];
        if (!s->required && a->set[j] == s->def) continue;
        append(out, n, "-");
        key_label(out, n, s->name);
        snprintf(num, sizeof num, "%.6g", a->set[j]);
        append(out, n, num);
    }
}

/* The stack's label, then "-share2" under model.kv_share 2: a shared-K/V
 * model is not its attention's plain model. */
void al_sweep_stack_label(char *out, size_t n, const al_model_config *m, const char *sep)
{
    if (m->n_layer_attn == 0) snprintf(out, n, "%s", m->variant);
    else al_config_attn_label(out, n, m, sep, al_sweep_attn_label);
    if (m->kv_share > 1) {
        char share[32];
        snprintf(share, sizeof share, "-share%d", m->kv_share);
        append(out, n, share);
    }
}

