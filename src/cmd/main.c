/*
 * main.c - the attnlab command line: one table of subcommands, each in its
 * own src/cmd/cmd_NAME.c (its options in a table there, parsed by cli.c).
 * Only main() decides the exit status.
 */
#include <stdio.h>
#include <string.h>

#include "al_blascore.h"
#include "al_cli.h"
#include "al_guard.h"

/* ------------------------------------------------------------ dispatch */

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"train", al_cmd_train, "train one model from a config file"},
    {"kv", al_cmd_kv, "parameter count and KV-cache bytes per token"},
    {"cost", al_cmd_cost, "FLOPs and bytes per token: training, prefill, decode (counted with --measure)"},
    {"keys", al_cmd_keys, "every experiment-file key with its default and meaning"},
    {"variants", al_cmd_variants, "list the attention variants (built-in and from --plugin)"},
    {"check-variant", al_cmd_check_variant, "run the conformance suite on one variant (built-in or --plugin)"},
    {"new-variant", al_cmd_new_variant, "write a plugin skeleton for a new variant (meson.build and NAME.c)"},
    {"score", al_cmd_score, "mean next-token loss of a checkpoint over a file"},
    {"grads", al_cmd_grads, NULL},   /* for parity tests; not listed, see README */
    {"convert", al_cmd_convert, "turn a checkpoint into another attention variant (GQA, MQA, MLA)"},
    {"generate", al_cmd_generate, "continue a prompt from a checkpoint through the KV cache"},
    {"attention", al_cmd_attention, "per-head attention maps and head statistics of a checkpoint"},
    {"bench-decode", al_cmd_bench_decode, "decode tokens/s per variant and context, with cache bytes"},
    {"sweep", al_cmd_sweep, "train every trial of an experiment's sweep, then report"},
    {"trial", al_cmd_trial, "run one trial of a sweep (the sweep's worker)"},
    {"report", al_cmd_report, "report.md and plots from a sweep's results directory"},
    {NULL, NULL, NULL},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: attnlab COMMAND [ARGS...]\n\n"
               "attnlab trains small GPT-style models with pluggable attention variants\n"
               "and measures what each costs in KV cache and buys in quality.\n\ncommands:\n");
    for (int i = 0; commands[i].name; i++)
        if (commands[i].summary) fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'attnlab COMMAND --help' describes one command.\n");
}

int main(int argc, char **argv)
{
    al_err e;
    /* before any work: where OpenBLAS fell below this CPU, run again with
     * the kernels it has for it (al_blascore.h) */
    if (al_blas_follow_cpu(argv, &e) != 0) return al_cli_fail(AL_EXIT_INPUT, e.msg);
    al_signals_install();
    if (argc < 2) {
        usage(stderr);
        return AL_EXIT_INPUT;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (int i = 0; commands[i].name; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 2, argv + 2);
    fprintf(stderr, "attnlab: unknown command '%s' (see 'attnlab --help')\n", argv[1]);
    return AL_EXIT_INPUT;
}
