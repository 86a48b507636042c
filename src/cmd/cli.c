/*
 * cli.c - the one option parser (al_cli.h says its rules), the --help it
 * generates, and the config loading the subcommands share.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_cli.h"
#include "al_config_io.h"
#include "al_kvcache.h"
#include "al_plugin.h"

/* ------------------------------------------------------------ values */

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

int al_cli_parse_kv_dtype(const char *v, void *field)
{
    int dt = al_kv_dtype_parse(v);
    if (dt < 0) return -1;
    *(int *)field = dt;
    return 0;
}

int al_cli_parse_rope_scaling(const char *v, void *field)
{
    al_rope_scaling *sc = field;
    const char *colon = strchr(v, ':');
    char kind[8], *end;
    size_t n = colon ? (size_t)(colon - v) : 0;
    if (!colon || n == 0 || n >= sizeof kind) return -1;
    memcpy(kind, v, n);
    kind[n] = 0;
    double f = strtod(colon + 1, &end);
    if (al_rope_kind_of(kind) < 0 || end == colon + 1 || *end || !(f > 0 && f <= 1e6)) return -1;
    memset(sc, 0, sizeof *sc);
    memcpy(sc->kind, kind, n + 1);
    sc->factor = f;
    return 0;
}

void al_cli_set_rope_scaling(al_model *m, const al_rope_scaling *sc)
{
    if (!sc->kind[0]) return;   /* not given: the checkpoint's */
    al_rope_scaling x = *sc;
    x.original_seq_len = m->cfg.seq_len;
    al_model_set_rope_scaling(m, &x);
}

static void *field_of(void *opts, size_t at) { return (char *)opts + at; }

static int takes_value(const al_opt *o)
{
    return o->kind != AL_OPT_FLAG && o->kind != AL_OPT_ARG;
}

/* One option's value into its field; 0 or -1 with e naming the option, the
 * value and what it wants. */
static int store(const al_cli_spec *s, const al_opt *o, const char *v, void *opts, al_err *e)
{
    void *f = field_of(opts, o->at);
    long n;
    switch (o->kind) {
    case AL_OPT_STR:
    case AL_OPT_PATH:
        *(const char **)f = v;
        return 0;
    case AL_OPT_LONG:
    case AL_OPT_INT:
        if (al_cli_parse_long(v, o->lo, o->hi, &n) != 0)
            return al_errf(e, "%s: %s wants an integer in [%ld, %ld], got '%.200s'", s->name,
                           o->name, o->lo, o->hi, v);
        if (o->kind == AL_OPT_INT) *(int *)f = (int)n;
        else *(long *)f = n;
        return 0;
    case AL_OPT_LIST: {
        int *count = field_of(opts, o->count_at);
        if (*count >= o->hi)
            return al_errf(e, "%s: too many %s options (at most %ld)", s->name, o->name, o->hi);
        ((const char **)f)[(*count)++] = v;
        return 0;
    }
    case AL_OPT_FUNC:
        if (o->parse(v, f) == 0) return 0;
        return al_errf(e, "%s: %s wants %s, got '%.200s'", s->name, o->name, o->want, v);
    default:
        AL_ASSERT(!"an option kind without a value");
        return -1;
    }
}

/* ------------------------------------------------------------ lookup */

/* The entry named by argument a ("--out", or "--executor=slurm" for an
 * AL_OPT_EQUALS option, *inline_val then pointing past the '='). */
static const al_opt *find(const al_cli_spec *s, const char *a, const char **inline_val)
{
    *inline_val = NULL;
    for (const al_opt *o = s->opts; o->kind != AL_OPT_END; o++) {
        if (o->kind == AL_OPT_ARG) continue;
        size_t len = strlen(o->name);
        if (!strcmp(a, o->name)) return o;
        if ((o->flags & AL_OPT_EQUALS) && !strncmp(a, o->name, len) && a[len] == '=') {
            *inline_val = a + len + 1;
            return o;
        }
    }
    return NULL;
}

/* " (did you mean '--out'?)" for the closest option within two edits, or "". */
static const char *suggest(const al_cli_spec *s, const char *a, char *buf, size_t n)
{
    const char *best = NULL;
    int best_d = 3;
    for (const al_opt *o = s->opts; o->kind != AL_OPT_END; o++) {
        int d = o->kind == AL_OPT_ARG ? 99 : al_edit_distance(a, o->name);
        if (d < best_d) best_d = d, best = o->name;
    }
    if (al_edit_distance(a, "--help") < best_d) best = "--help";
    if (!best) return "";
    snprintf(buf, n, " (did you mean '%s'?)", best);
    return buf;
}

static int unknown(const al_cli_spec *s, const char *a, al_err *e)
{
    char hint[128];
    return al_errf(e, "%s: unknown option '%.200s'%s (see 'attnlab %s --help')", s->name, a,
                   suggest(s, a, hint, sizeof hint), s->name);
}

/* The next AL_OPT_ARG entry after `after` (NULL: the first), or NULL. */
static const al_opt *next_arg(const al_cli_spec *s, const al_opt *after)
{
    const al_opt *o = after ? after + 1 : s->opts;
    for (; o->kind != AL_OPT_END; o++)
        if (o->kind == AL_OPT_ARG) return o;
    return NULL;
}

/* ------------------------------------------------------------ parse */

/* The number of entries before the table's end. */
static long table_size(const al_cli_spec *s)
{
    long n = 0;
    while (s->opts[n].kind != AL_OPT_END) n++;
    return n;
}

/* Required arguments and options all given (the help was not asked for). */
static int check_required(const al_cli_spec *s, const unsigned char *seen, al_err *e)
{
    for (const al_opt *o = s->opts; o->kind != AL_OPT_END; o++) {
        if (!(o->flags & AL_OPT_REQUIRED) || seen[o - s->opts]) continue;
        if (o->kind == AL_OPT_ARG)
            return al_errf(e, "%s: missing the %s argument (see 'attnlab %s --help')", s->name,
                           o->name, s->name);
        AL_ASSERT(takes_value(o));   /* a required flag would be no option */
        return al_errf(e, "%s: missing %s %s (see 'attnlab %s --help')", s->name, o->name,
                       o->meta, s->name);
    }
    return 0;
}

/* Entries a table may hold (what `seen` can mark). */
#define AL_CLI_MAX_OPTS 64

int al_cli_parse_args(const al_cli_spec *s, int argc, char **argv, void *opts, al_err *e)
{
    const al_opt *pos = NULL;   /* the last positional argument filled */
    unsigned char seen[AL_CLI_MAX_OPTS] = {0};
    AL_ASSERT(table_size(s) <= AL_CLI_MAX_OPTS);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        if (a[0] != '-' || !a[1]) {   /* a positional argument ("-" is one) */
            if (!(pos = next_arg(s, pos)))
                return al_errf(e, "%s: unexpected argument '%.200s'", s->name, a);
            *(const char **)field_of(opts, pos->at) = a;
            seen[pos - s->opts] = 1;
            continue;
        }
        const al_opt *o = find(s, a, &v);
        if (!o) return unknown(s, a, e);
        if (o->flags & AL_OPT_IGNORED)   /* taken and dropped would be a silent no-op */
            return al_errf(e, "%s: %s does not apply to %s (see 'attnlab %s --help')", s->name,
                           o->name, s->name, s->name);
        seen[o - s->opts] = 1;
        if (o->kind == AL_OPT_FLAG) {
            *(int *)field_of(opts, o->at) = 1;
            continue;
        }
        if (!v && i + 1 == argc)
            return al_errf(e, "%s: missing the value of %s (%s %s)", s->name, o->name, o->name,
                           o->meta);
        if (store(s, o, v ? v : argv[++i], opts, e) != 0) return -1;
    }
    return check_required(s, seen, e);
}

int al_cli_parse(const al_cli_spec *s, int argc, char **argv, void *opts)
{
    al_err e;
    int rc = al_cli_parse_args(s, argc, argv, opts, &e);
    if (rc == 1) return al_cli_help(s, stdout), 0;
    return rc == 0 ? AL_CLI_GO : al_cli_fail(AL_EXIT_INPUT, e.msg);
}

int al_cli_missing(const al_cli_spec *s, const char *what)
{
    char msg[512];
    snprintf(msg, sizeof msg, "%s: missing %s (see 'attnlab %s --help')", s->name, what, s->name);
    return al_cli_fail(AL_EXIT_INPUT, msg);
}

/* ------------------------------------------------------------ help */

/* "--out DIR", "CHECKPOINT" */
static void left_column(const al_opt *o, char *buf, size_t n)
{
    if (takes_value(o)) snprintf(buf, n, "%s %s", o->name, o->meta);
    else snprintf(buf, n, "%s", o->name);
}

/* "  --out DIR         help", the help's further lines under its first. */
static void help_line(FILE *f, const char *left, const char *help)
{
    enum { COL = 22 };
    int w = fprintf(f, "  %s", left);
    if (w >= COL) fprintf(f, "\n%*s", COL, ""), w = COL;
    fprintf(f, "%*s", COL - w, "");
    for (const char *p = help; *p; p++) {
        fputc(*p, f);
        if (*p == '\n' && p[1]) fprintf(f, "%*s", COL, "");
    }
    fputc('\n', f);
}

static void usage_line(const al_cli_spec *s, FILE *f)
{
    char left[128];
    fprintf(f, "usage: attnlab %s", s->name);
    for (const al_opt *o = s->opts; o->kind != AL_OPT_END; o++) {
        if (o->kind != AL_OPT_ARG && !(o->flags & AL_OPT_REQUIRED)) continue;
        left_column(o, left, sizeof left);
        fprintf(f, o->flags & AL_OPT_REQUIRED ? " %s" : " [%s]", left);
    }
    fprintf(f, " [options]\n");
}

void al_cli_help(const al_cli_spec *s, FILE *f)
{
    char left[128];
    int n_args = 0;
    usage_line(s, f);
    if (s->about) fprintf(f, "\n%s", s->about);
    for (const al_opt *o = s->opts; o->kind != AL_OPT_END; o++) {
        n_args += o->kind == AL_OPT_ARG;
    }
    if (n_args) fprintf(f, "\narguments:\n");
    for (const al_opt *o = s->opts; o->kind != AL_OPT_END; o++)
        if (o->kind == AL_OPT_ARG) help_line(f, o->name, o->help);
    fprintf(f, "\noptions:\n");
    for (const al_opt *o = s->opts; o->kind != AL_OPT_END; o++) {
        if (o->kind == AL_OPT_ARG || (o->flags & AL_OPT_IGNORED)) continue;
        left_column(o, left, sizeof left);
        help_line(f, left, o->help);
    }
    help_line(f, "-h, --help", "print this help and exit");
}

/* ------------------------------------------------------------ config */

int al_cli_load_plugins(const al_cli_opts *o)
{
    al_err e;
    for (int i = 0; i < o->n_plugins; i++)
        if (al_plugin_load(o->plugins[i], &e) != 0) return al_cli_fail(AL_EXIT_INPUT, e.msg);
    return 0;
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
