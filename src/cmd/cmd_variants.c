/*
 * cmd_variants.c - `attnlab variants`: what model.attention.variant may name.
 */
#include <stdio.h>
#include <string.h>

#include "al_cli.h"
#include "al_registry.h"

typedef struct variants_args {
    al_cli_opts o;
} variants_args;

static const al_opt variants_opts[] = {
    AL_CLI_PLUGIN(variants_args, 0),
    {0},
};

static const al_cli_spec variants_spec = {
    "variants", variants_opts,
    "List every registered attention variant, one a line:\n"
    "  NAME  SETTING=DEFAULT ... SETTING=required  origin=built-in|PLUGIN  -- description\n"
    "Settings go under model.attention beside `variant: NAME`. --plugin loads a\n"
    "shared object that adds variants (see variants/README.md); every command\n"
    "that reads an experiment file accepts it too.\n",
};

/* "n_kv_head=required d_q_latent=0", or "-" for a variant without settings */
static int settings_text(const al_variant *v, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = 0;
    for (int j = 0; j < al_variant_n_settings(v) && len < n; j++) {
        const al_setting *s = &v->settings[j];
        const char *sep = j ? " " : "";
        if (s->required) len += snprintf(buf + len, n - len, "%s%s=required", sep, s->name);
        else len += snprintf(buf + len, n - len, "%s%s=%g", sep, s->name, s->def);
    }
    if (!buf[0]) snprintf(buf, n, "-");
    return (int)strlen(buf);
}

static void print_variant(int i, int name_w, int set_w)
{
    const al_variant *v = al_variant_at(i);
    char set[512];
    settings_text(v, set, sizeof set);
    printf("%-*s  %-*s  origin=%s  -- %s\n", name_w, v->name, set_w, set,
           al_variant_origin(i), v->description ? v->description : "");
}

int al_cmd_variants(int argc, char **argv)
{
    variants_args a = {0};
    int rc = al_cli_parse(&variants_spec, argc, argv, &a);
    if (rc != AL_CLI_GO) return rc;
    if ((rc = al_cli_load_plugins(&a.o))) return rc;
    int name_w = 0, set_w = 0;
    char set[512];
    for (int i = 0; i < al_variant_count(); i++) {
        int n = (int)strlen(al_variant_at(i)->name), m = settings_text(al_variant_at(i), set,
                                                                       sizeof set);
        name_w = n > name_w ? n : name_w;
        set_w = m > set_w ? m : set_w;
    }
    for (int i = 0; i < al_variant_count(); i++) print_variant(i, name_w, set_w);
    return 0;
}
