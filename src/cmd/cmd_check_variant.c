/*
 * cmd_check_variant.c - `attnlab check-variant`: the conformance suite
 * (src/model/al_check_variant.h) on one registered variant, built-in or
 * from --plugin, one line per check with its measured error and bound.
 * Exit 0 when every check passes, 1 when one fails, 2 for bad input
 * (including a variant whose check() refuses every shape tried).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_check_variant.h"
#include "al_cli.h"
#include "al_registry.h"

typedef struct check_args {
    al_cli_opts o;
    const char *variant;
} check_args;

static const al_opt check_opts[] = {
    AL_CLI_PLUGIN(check_args, 0),
    {.name = "--variant", .kind = AL_OPT_STR, .meta = "NAME", AL_CLI_AT(check_args, variant),
     .flags = AL_OPT_REQUIRED, .help = "the variant to check (see 'attnlab variants')"},
    {.name = "--set", .kind = AL_OPT_LIST, .meta = "model.attention.KEY=V",
     AL_CLI_AT(check_args, o.sets), .count_at = offsetof(check_args, o.n_sets),
     .hi = AL_CLI_MAX_SETS, .help = "fix one of the variant's settings; may repeat"},
    {0},
};

static const al_cli_spec check_spec = {
    "check-variant", check_opts,
    "Run the conformance suite on one variant at several small shapes its\n"
    "check() accepts: gradients of every tensor and of x against finite\n"
    "differences (masked and unmasked, each optional setting at 4), causality,\n"
    "determinism across runs and thread counts, the AL_VARIANT_WRITES_GRADS\n"
    "claim, scratch bounds, decode and prefill against the forward at f32 (1e-4)\n"
    "and bf16/f16 past one cache tile, batched decode, probs rows and probs\n"
    "against the forward, measured cache bytes, and a costs sub-table's FLOPs\n"
    "against what the product layer counts (costs.flops). One line per check:\n"
    "  ok|FAIL  NAME  err MEASURED <=|>= BOUND  WORST CASE\n"
    "Settings not fixed by --set keep their defaults; required ones take the\n"
    "first of 2, 1, 4, 8 the variant accepts. Exit 0: all pass; 1: a check\n"
    "failed; 2: bad input or no shape accepted (with the variant's message).\n",
};

/* "model.attention.KEY=V" into fx; 0, or -1 with e naming what is wrong. */
static int parse_set(const al_variant *v, const char *arg, al_check_settings *fx, al_err *e)
{
    static const char prefix[] = "model.attention.";
    const char *eq = strchr(arg, '=');
    if (strncmp(arg, prefix, sizeof prefix - 1) != 0 || !eq) {
        snprintf(e->msg, sizeof e->msg, "check-variant: --set wants model.attention.KEY=V, got '%s'", arg);
        return -1;
    }
    char key[64];
    snprintf(key, sizeof key, "%.*s", (int)(eq - arg - (sizeof prefix - 1)), arg + sizeof prefix - 1);
    int i = al_variant_setting_index(v, key);
    if (i < 0) {
        snprintf(e->msg, sizeof e->msg, "check-variant: '%s' is not a setting of variant '%s' "
                 "(see 'attnlab variants')", key, v->name);
        return -1;
    }
    char *end;
    errno = 0;
    double x = strtod(eq + 1, &end);
    if (!eq[1] || *end || errno || !isfinite(x) ||
        (v->settings[i].kind == AL_SET_INT && x != floor(x))) {
        snprintf(e->msg, sizeof e->msg, "check-variant: model.attention.%s wants %s, got '%s'", key,
                 v->settings[i].kind == AL_SET_INT ? "a whole number" : "a number", eq + 1);
        return -1;
    }
    fx->set[i] = x;
    fx->given[i] = 1;
    return 0;
}

static int print_report(const al_variant *v, const al_check_report *r)
{
    char buf[320];
    printf("check-variant: %s at %s\n", v->name, r->shapes);
    for (int i = 0; i < r->n; i++) {
        al_check_format(&r->lines[i], buf, sizeof buf);
        printf("%s\n", buf);
    }
    if (!r->n_fail) {
        printf("check-variant: %s: all %d checks pass\n", v->name, r->n);
        return 0;
    }
    printf("check-variant: %s: %d of %d checks FAIL:", v->name, r->n_fail, r->n);
    for (int i = 0; i < r->n; i++)
        if (!r->lines[i].pass) printf(" %s", r->lines[i].name);
    printf("\n");
    return AL_EXIT_RUNTIME;
}

int al_cmd_check_variant(int argc, char **argv)
{
    check_args a = {0};
    int rc = al_cli_parse(&check_spec, argc, argv, &a);
    if (rc != AL_CLI_GO) return rc;
    if ((rc = al_cli_load_plugins(&a.o))) return rc;
    const al_variant *v = al_variant_find(a.variant);
    al_err e;
    if (!v) {
        snprintf(e.msg, sizeof e.msg, "check-variant: no variant '%s' (see 'attnlab variants'; "
                 "a plugin's needs --plugin PATH)", a.variant);
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    }
    al_check_settings fx = {{0}, {0}};
    for (int i = 0; i < a.o.n_sets; i++)
        if (parse_set(v, a.o.sets[i], &fx, &e)) return al_cli_fail(AL_EXIT_INPUT, e.msg);
    al_check_report r;
    if (al_check_variant(v, &fx, &r, &e) != 0) {
        char msg[AL_ERR_LEN + 128];
        snprintf(msg, sizeof msg, "check-variant: %s refuses every shape tried: %s", v->name,
                 e.msg);
        return al_cli_fail(AL_EXIT_INPUT, msg);
    }
    rc = print_report(v, &r);
    al_check_report_free(&r);
    return rc;
}
