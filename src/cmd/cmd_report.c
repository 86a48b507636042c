/*
 * cmd_report.c - `attnlab report`: report.md, index.html and plots from a sweep's
 * results directory (the work is al_report_write in report/).
 */
#include <stdio.h>

#include "al_cli.h"
#include "al_report.h"

typedef struct report_args {
    al_cli_opts o;   /* DIR in o.file; the other common options are refused */
} report_args;

static const al_opt report_opts[] = {
    AL_ARG("DIR", report_args, o.file, AL_OPT_REQUIRED, "a sweep's results directory"),
    AL_CLI_SET(report_args, AL_OPT_IGNORED),
    AL_CLI_PLUGIN(report_args, AL_OPT_IGNORED),
    {.name = "--out", .kind = AL_OPT_PATH, .meta = "DIR", AL_CLI_AT(report_args, o.out),
     .flags = AL_OPT_IGNORED, .help = "unused by report"},
    AL_CLI_CONTEXT(report_args, AL_OPT_IGNORED, "unused by report"),
    {0},
};

static const al_cli_spec report_spec = {
    "report", report_opts,
    "Write DIR/report.md from DIR/summary.csv (a sweep's results): the\n"
    "configurations aggregated over seeds (mean with its 95 % interval), cheapest\n"
    "cache first, with the comparisons against the baseline; the Pareto front of\n"
    "quality against the memory held at the report context (every layer's KV\n"
    "cache and state; per token for an older summary); gnuplot plots\n"
    "tradeoff.png and curves.png (with .svg and the .gp scripts beside them);\n"
    "DIR/configs.csv, one row per configuration; and DIR/index.html, one\n"
    "self-contained page of the same report with its tables sortable and its\n"
    "plots interactive (docs/report-page.md). Set AL_GNUPLOT to use another\n"
    "gnuplot binary.\n",
};

static const char *plots_text(int plots)
{
    return plots == AL_PLOTS_DRAWN ? "tradeoff.png, curves.png"
           : plots == AL_PLOTS_NO_GNUPLOT ? "none (gnuplot not found)"
           : plots == AL_PLOTS_FAILED ? "none (gnuplot failed, see gnuplot.log)" : "none";
}

int al_cmd_report(int argc, char **argv)
{
    report_args a = {0};
    int rc = al_cli_parse(&report_spec, argc, argv, &a);
    if (rc != AL_CLI_GO) return rc;
    al_report_stats rs;
    al_err e;
    rc = al_report_write(a.o.file, &rs, &e);
    if (rc) return al_cli_fail(rc == -1 ? AL_EXIT_INPUT : AL_EXIT_RUNTIME, e.msg);
    printf("report: %s/report.md, index.html: %d trials (%d ok), %d configurations, %d on the Pareto "
           "front; plots: %s\n", a.o.file, rs.n_trials, rs.n_ok, rs.n_configs, rs.n_front,
           plots_text(rs.plots));
    return 0;
}
