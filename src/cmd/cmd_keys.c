/*
 * cmd_keys.c - `attnlab keys`: every experiment-file key with its default
 * and meaning, as a markdown table.
 */
#include <stdio.h>

#include "al_cli.h"
#include "al_config_io.h"

typedef struct keys_args {
    al_cli_opts o;
} keys_args;

static const al_opt keys_opts[] = {
    AL_CLI_PLUGIN(keys_args, 0),
    {0},
};

static const al_cli_spec keys_spec = {
    "keys", keys_opts,
    "Print every experiment-file key with its default and meaning, as a markdown\n"
    "table. --plugin loads a plugin first, so that the settings its variants take\n"
    "under model.attention are listed with the built-in variants' settings.\n",
};

int al_cmd_keys(int argc, char **argv)
{
    keys_args a = {0};
    int rc = al_cli_parse(&keys_spec, argc, argv, &a);
    if (rc != AL_CLI_GO) return rc;
    if ((rc = al_cli_load_plugins(&a.o))) return rc;
    puts("| key | default | meaning |\n| --- | --- | --- |");
    al_config_print_schema(stdout);   /* plugins' settings among model.attention's */
    return 0;
}
