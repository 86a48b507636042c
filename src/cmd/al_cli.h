/*
 * al_cli.h - what the subcommands share: the one option parser, config
 * loading, the subcommands' entry points. Each subcommand lives in its own
 * src/cmd/cmd_*.c and is listed in main.c's table.
 *
 * A command declares its options once, as a static table of al_opt (the
 * shape of nginx's ngx_command_t): the name, what kind of value it takes,
 * the offset of the field it fills in the command's own options struct,
 * and its help. al_cli_parse walks argv against that table; every
 * command's --help, usage errors and limits come from here, so they read
 * the same everywhere:
 *
 *   train: unknown option '--ot' (did you mean '--out'?) (see 'attnlab train --help')
 *   train: missing the value of --out (--out DIR)
 *   kv: --context wants an integer in [1, 1073741824], got '2147483647'
 *   sweep: too many --set options (at most 64)
 *   attention: missing the CHECKPOINT argument (see 'attnlab attention --help')
 *   trial: missing --index I (see 'attnlab trial --help')
 *
 * Rules: an option that takes a value takes the next argument whatever it
 * is ("--prompt -h" is the prompt "-h"); "-" alone is an argument; an
 * option given twice keeps the last value unless it is a list; --help (or
 * -h) prints the help and stops, so what follows it is not read.
 *
 * Exit statuses and AL_CLI_MAX_* live in al_util.h: the sweep executors run
 * subcommands and read their statuses too.
 */
#ifndef AL_CLI_H
#define AL_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "al_config.h"
#include "al_model.h"

/* ------------------------------------------------------------ option tables */

typedef enum al_opt_kind {
    AL_OPT_END,    /* ends a table (a zeroed entry) */
    AL_OPT_ARG,    /* a positional argument (const char *), in table order */
    AL_OPT_FLAG,   /* no value: int = 1 */
    AL_OPT_STR,    /* const char * = the value as given */
    AL_OPT_PATH,   /* the same, naming a file or directory */
    AL_OPT_LONG,   /* long, a whole number in [lo, hi] */
    AL_OPT_INT,    /* int, a whole number in [lo, hi] (within int) */
    AL_OPT_LIST,   /* repeatable: const char *[hi] at `at`, its int count at `count_at` */
    AL_OPT_FUNC,   /* parse(value, field) fills the field: 0, or -1 for "wants `want`" */
} al_opt_kind;

enum {
    AL_OPT_REQUIRED = 1,   /* an argument or option the command cannot go without */
    AL_OPT_EQUALS = 2,     /* also accepted as --name=VALUE */
    AL_OPT_IGNORED = 4,    /* the command has no use for it: refused, naming the command */
};

typedef struct al_opt {
    const char *name;   /* "--out"; for AL_OPT_ARG the argument's name, "CHECKPOINT" */
    al_opt_kind kind;
    const char *meta;   /* the value's name in help and errors: "DIR", "N" */
    size_t at;          /* offsetof the field in the command's options struct */
    size_t count_at;    /* AL_OPT_LIST: offsetof its int count */
    long lo, hi;        /* AL_OPT_LONG/INT: the limits; AL_OPT_LIST: hi = most repeats */
    int (*parse)(const char *value, void *field);   /* AL_OPT_FUNC */
    const char *want;   /* AL_OPT_FUNC: what the value must be ("f32, bf16 or f16") */
    int flags;          /* AL_OPT_REQUIRED | AL_OPT_EQUALS | AL_OPT_IGNORED */
    const char *help;   /* one or more lines; "\n" continues under the first */
} al_opt;

/* A command: its name, its table (ended by a zeroed entry) and the prose
 * of its --help, printed between the usage line and the options. */
typedef struct al_cli_spec {
    const char *name;
    const al_opt *opts;
    const char *about;
} al_cli_spec;

/* Table entries (designated, so that a reader sees which field is which). */
#define AL_CLI_AT(T, field) .at = offsetof(T, field)
#define AL_ARG(name_, T, field, flags_, help_) \
    {.name = name_, .kind = AL_OPT_ARG, AL_CLI_AT(T, field), .flags = flags_, .help = help_}
#define AL_FLAG(name_, T, field, help_) \
    {.name = name_, .kind = AL_OPT_FLAG, AL_CLI_AT(T, field), .help = help_}
#define AL_STR(name_, meta_, T, field, help_) \
    {.name = name_, .kind = AL_OPT_STR, .meta = meta_, AL_CLI_AT(T, field), .help = help_}
#define AL_PATH(name_, meta_, T, field, help_) \
    {.name = name_, .kind = AL_OPT_PATH, .meta = meta_, AL_CLI_AT(T, field), .help = help_}
#define AL_LONG(name_, meta_, lo_, hi_, T, field, help_)                                   \
    {.name = name_, .kind = AL_OPT_LONG, .meta = meta_, AL_CLI_AT(T, field), .lo = lo_, \
     .hi = hi_, .help = help_}
#define AL_INT(name_, meta_, lo_, hi_, T, field, help_)                                   \
    {.name = name_, .kind = AL_OPT_INT, .meta = meta_, AL_CLI_AT(T, field), .lo = lo_, \
     .hi = hi_, .help = help_}
#define AL_LIST(name_, meta_, max_, T, field, count, help_)                              \
    {.name = name_, .kind = AL_OPT_LIST, .meta = meta_, AL_CLI_AT(T, field),            \
     .count_at = offsetof(T, count), .hi = max_, .help = help_}
#define AL_FUNC(name_, meta_, fn, want_, T, field, help_)                             \
    {.name = name_, .kind = AL_OPT_FUNC, .meta = meta_, AL_CLI_AT(T, field),         \
     .parse = fn, .want = want_, .help = help_}

/* The options of the commands that read an experiment file. */
typedef struct al_cli_opts {
    const char *file;
    const char *sets[AL_CLI_MAX_SETS];
    int n_sets;
    const char *plugins[AL_CLI_MAX_PLUGINS];
    int n_plugins;
    const char *out;
    long context;
} al_cli_opts;

/* The options of al_cli_opts as every command that takes them declares
 * them, for an options struct T holding an al_cli_opts named o; flags_ is
 * 0 or AL_OPT_IGNORED (refused by a command that has no use for it, with a
 * line saying so rather than "unknown option"). */
#define AL_CLI_SET(T, flags_)                                                        \
    {.name = "--set", .kind = AL_OPT_LIST, .meta = "KEY.PATH=VALUE", AL_CLI_AT(T, o.sets), \
     .count_at = offsetof(T, o.n_sets), .hi = AL_CLI_MAX_SETS, .flags = flags_,          \
     .help = "change one setting of the experiment file; may repeat"}
#define AL_CLI_PLUGIN(T, flags_)                                                        \
    {.name = "--plugin", .kind = AL_OPT_LIST, .meta = "PATH", AL_CLI_AT(T, o.plugins),   \
     .count_at = offsetof(T, o.n_plugins), .hi = AL_CLI_MAX_PLUGINS, .flags = flags_,    \
     .help = "load a variant plugin (a shared object) first; may repeat"}
#define AL_CLI_CONTEXT(T, flags_, help_)                                                  \
    {.name = "--context", .kind = AL_OPT_LONG, .meta = "N", AL_CLI_AT(T, o.context),       \
     .lo = 1, .hi = 1L << 30, .flags = flags_, .help = help_}

/* al_cli_parse's return when the command should go on. */
#define AL_CLI_GO (-1)

/* Parses argv (the command's arguments, after its name) into opts by the
 * table. Fields of options not given keep what the caller put there (its
 * defaults). Returns AL_CLI_GO; or 0 after printing the help (--help); or
 * AL_EXIT_INPUT after printing a one-line usage error. */
int al_cli_parse(const al_cli_spec *s, int argc, char **argv, void *opts);
/* The same without printing: 0 go on, 1 help wanted, -1 with e's message
 * (not prefixed by "attnlab: "). */
int al_cli_parse_args(const al_cli_spec *s, int argc, char **argv, void *opts, al_err *e);
/* The command's --help, generated from its table. */
void al_cli_help(const al_cli_spec *s, FILE *f);

/* Prints "attnlab: msg" to stderr and returns code. */
int al_cli_fail(int code, const char *msg);
/* "CMD: missing WHAT (see 'attnlab CMD --help')" as a usage error
 * (AL_EXIT_INPUT), for requirements a table cannot state. */
int al_cli_missing(const al_cli_spec *s, const char *what);
/* Parses a whole number in [lo, hi]; 0 or -1. */
int al_cli_parse_long(const char *s, long lo, long hi, long *out);
/* AL_OPT_FUNC parsers: a KV-cache dtype (int: f32, bf16, f16, int8 or int4). */
int al_cli_parse_kv_dtype(const char *v, void *field);
/* --rope-scaling KIND:FACTOR (KIND none, linear, ntk or yarn; FACTOR > 0)
 * into an al_rope_scaling; the want text for AL_FUNC. */
int al_cli_parse_rope_scaling(const char *v, void *field);
#define AL_CLI_ROPE_WANT "KIND:FACTOR, KIND linear, ntk, yarn or none and FACTOR > 0 (e.g. yarn:4)"
/* A given --rope-scaling (kind non-empty) onto a loaded checkpoint's model,
 * with original_seq_len the checkpoint's seq_len; else nothing. */
void al_cli_set_rope_scaling(al_model *m, const al_rope_scaling *sc);

/* Loads the --plugin files, then o->file with o->sets and the plugins it
 * lists (al_plugin_config_load); the --plugin files are recorded in
 * c->plugins. Prints the error and returns AL_EXIT_INPUT. */
int al_cli_load_config(const al_cli_opts *o, al_config *c);
/* Loads the --plugin files only (commands that read no experiment file). */
int al_cli_load_plugins(const al_cli_opts *o);

/* ------------------------------------------------------------ subcommands */

int al_cmd_train(int argc, char **argv);
int al_cmd_kv(int argc, char **argv);
int al_cmd_cost(int argc, char **argv);
int al_cmd_keys(int argc, char **argv);
int al_cmd_variants(int argc, char **argv);
int al_cmd_score(int argc, char **argv);
int al_cmd_grads(int argc, char **argv);
int al_cmd_generate(int argc, char **argv);
int al_cmd_attention(int argc, char **argv);
int al_cmd_bench_decode(int argc, char **argv);
int al_cmd_sweep(int argc, char **argv);
int al_cmd_trial(int argc, char **argv);
int al_cmd_report(int argc, char **argv);
int al_cmd_convert(int argc, char **argv);
int al_cmd_check_variant(int argc, char **argv);
int al_cmd_new_variant(int argc, char **argv);

#endif
