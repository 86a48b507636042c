/*
 * al_cli.h - what the subcommands share: option parsing for commands that
 * read an experiment file, config loading, exit statuses. Each subcommand
 * lives in its own src/cmd_*.c and is listed in main.c's table.
 *
 * Exit status: 0 success, 1 a run-time failure (I/O), 2 bad input (usage,
 * configuration, a missing or corrupt file), 3 a training run diverged.
 */
#ifndef AL_CLI_H
#define AL_CLI_H

#include "al_config.h"

/* Exit statuses and AL_CLI_MAX_* live in al_util.h: the sweep executors
 * run subcommands and read their statuses too. */

/* Options shared by the commands that read an experiment file. */
typedef struct al_cli_opts {
    const char *file;
    const char *sets[AL_CLI_MAX_SETS];
    int n_sets;
    const char *plugins[AL_CLI_MAX_PLUGINS];
    int n_plugins;
    const char *out;
    long context;
    int help;
} al_cli_opts;

/* Prints "attnlab: msg" to stderr and returns code. */
int al_cli_fail(int code, const char *msg);
/* Parses a whole number in [lo, hi]; 0 or -1. */
int al_cli_parse_long(const char *s, long lo, long hi, long *out);
/* Parses FILE [--set k=v]... [--plugin P]... [--out DIR] [--context N]
 * [--help]. Options a command handles itself are passed in `extra`
 * (NULL-terminated names taking one value each) and left to it through
 * the extra_val array (same order), NULL when absent. Returns 0 or an exit
 * status with the message printed. */
int al_cli_parse(int argc, char **argv, al_cli_opts *o, const char *cmd,
                 const char *const *extra, const char **extra_val);
/* Loads the --plugin files, then o->file with o->sets and the plugins it
 * lists (al_plugin_config_load); the --plugin files are recorded in
 * c->plugins. Prints the error and returns AL_EXIT_INPUT. */
int al_cli_load_config(const al_cli_opts *o, al_config *c);
/* Loads the --plugin files only (commands that read no experiment file). */
int al_cli_load_plugins(const al_cli_opts *o);
/* For commands whose only options are --plugin PATH (repeatable) and
 * --help: parses argv into o and loads the plugins. Returns -1 to go on,
 * else the exit status (0 after printing help). */
int al_cli_plugins_only(const char *cmd, const char *help, int argc, char **argv,
                        al_cli_opts *o);

int al_cmd_train(int argc, char **argv);
int al_cmd_kv(int argc, char **argv);
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

#endif
