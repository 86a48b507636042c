/*
 * cli.c - option parsing and config loading shared by the subcommands.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_cli.h"
#include "al_config_io.h"
#include "al_plugin.h"

int al_cli_fail(int code, const char *msg)
{
    fprintf(stderr, "attnlab: %s\n", msg);
    return code;
}

int al_cli_parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int extra_index(const char *const *extra, const char *a)
{
    for (int k = 0; extra && extra[k]; k++)
        if (!strcmp(extra[k], a)) return k;
    return -1;
}

static int add_value(const char **list, int *n, int cap, const char *v, const char *what)
{
    if (*n == cap) {
        fprintf(stderr, "attnlab: too many %s options (at most %d)\n", what, cap);
        return AL_EXIT_INPUT;
    }
    list[(*n)++] = v;
    return 0;
}

int al_cli_parse(int argc, char **argv, al_cli_opts *o, const char *cmd,
                 const char *const *extra, const char **extra_val)
{
    memset(o, 0, sizeof *o);
    for (int k = 0; extra && extra[k]; k++) extra_val[k] = NULL;
    char msg[512];
    int rc = 0;
    for (int i = 0; i < argc && !rc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc, k;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            o->help = 1;
        } else if (!strcmp(a, "--set") && has_val) {
            rc = add_value(o->sets, &o->n_sets, AL_CLI_MAX_SETS, argv[++i], "--set");
        } else if (!strcmp(a, "--plugin") && has_val) {
            rc = add_value(o->plugins, &o->n_plugins, AL_CLI_MAX_PLUGINS, argv[++i], "--plugin");
        } else if (!strcmp(a, "--out") && has_val) {
            o->out = argv[++i];
        } else if (!strcmp(a, "--context") && has_val) {
            if (al_cli_parse_long(argv[++i], 1, 1L << 30, &o->context) != 0) {
                snprintf(msg, sizeof msg, "%s: --context wants a positive integer, got '%s'",
                         cmd, argv[i]);
                return al_cli_fail(AL_EXIT_INPUT, msg);
            }
        } else if ((k = extra_index(extra, a)) >= 0 && has_val) {
            extra_val[k] = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            snprintf(msg, sizeof msg,
                     "%s: unknown or incomplete option '%s' (see 'attnlab %s --help')", cmd, a, cmd);
            return al_cli_fail(AL_EXIT_INPUT, msg);
        } else if (!o->file) {
            o->file = a;
        } else {
            snprintf(msg, sizeof msg, "%s: unexpected argument '%s'", cmd, a);
            return al_cli_fail(AL_EXIT_INPUT, msg);
        }
    }
    if (!rc && !o->help && !o->file) {
        snprintf(msg, sizeof msg, "%s: missing its file argument (see 'attnlab %s --help')", cmd, cmd);
        return al_cli_fail(AL_EXIT_INPUT, msg);
    }
    return rc;
}

int al_cli_load_plugins(const al_cli_opts *o)
{
    al_err e;
    for (int i = 0; i < o->n_plugins; i++)
        if (al_plugin_load(o->plugins[i], &e) != 0) return al_cli_fail(AL_EXIT_INPUT, e.msg);
    return 0;
}

int al_cli_plugins_only(const char *cmd, const char *help, int argc, char **argv,
                        al_cli_opts *o)
{
    char msg[512];
    memset(o, 0, sizeof *o);
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return fputs(help, stdout), 0;
        if (strcmp(argv[i], "--plugin") != 0 || i + 1 == argc) {
            snprintf(msg, sizeof msg, "%s: unknown or incomplete argument '%.200s' (see "
                     "'attnlab %s --help')", cmd, argv[i], cmd);
            return al_cli_fail(AL_EXIT_INPUT, msg);
        }
        if (o->n_plugins == AL_CLI_MAX_PLUGINS) {
            snprintf(msg, sizeof msg, "%s: too many --plugin options (at most %d)", cmd,
                     AL_CLI_MAX_PLUGINS);
            return al_cli_fail(AL_EXIT_INPUT, msg);
        }
        o->plugins[o->n_plugins++] = argv[++i];
    }
    int rc = al_cli_load_plugins(o);
    return rc ? rc : -1;
}

/* Plugins first (--plugin, then the file's `plugins:`): the attention
 * mapping names variants they add. */
int al_cli_load_config(const al_cli_opts *o, al_config *c)
{
    al_err e;
    int rc = al_cli_load_plugins(o);
    if (rc) return rc;
    if (al_plugin_config_load(o->file, o->sets, o->n_sets, c, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return AL_EXIT_INPUT;
    }
    for (int i = 0; i < o->n_plugins; i++)
        if (al_plugin_note(c, o->plugins[i], &e) != 0) return al_cli_fail(AL_EXIT_INPUT, e.msg);
    return 0;
}
