/*
 * cmd_convert.c - `attnlab convert`: a checkpoint of one attention variant
 * into another (al_convert.h), with the keys' and values' reconstruction
 * error on a sample of the training data and both models' scores.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "al_cli.h"
#include "al_config_io.h"
#include "al_convert.h"
#include "al_parallel.h"

typedef struct convert_args {
    al_cli_opts o;
    const char *to, *config_file, *data;
    int method;   /* enum al_convert_method; -1: by the target variant */
    long seed, tokens, threads;
    char config[4200];
} convert_args;

static int parse_method(const char *v, void *field)
{
    int m = al_convert_method_parse(v);
    return m < 0 ? -1 : (*(int *)field = m, 0);
}

static const al_opt convert_opts[] = {
    AL_ARG("CHECKPOINT", convert_args, o.file, AL_OPT_REQUIRED, "the source model.safetensors"),
    {.name = "--to", .kind = AL_OPT_STR, .meta = "MAPPING", AL_CLI_AT(convert_args, to),
     .flags = AL_OPT_REQUIRED, .help = "the target attention, as model.attention would hold it"},
    {.name = "--out", .kind = AL_OPT_PATH, .meta = "NEW.safetensors",
     AL_CLI_AT(convert_args, o.out), .flags = AL_OPT_REQUIRED, .help = "the converted model"},
    AL_FUNC("--method", "M", parse_method, "mean, first, random or svd", convert_args, method,
            "mean, first, random or svd (default: svd for mla, else mean)"),
    AL_LONG("--seed", "N", 0, LONG_MAX, convert_args, seed, "the random method's seed (default 1)"),
    AL_PATH("--config", "RUN.yaml", convert_args, config_file,
            "the run whose data is sampled and scored (default: the\n"
            "config.yaml beside CHECKPOINT)"),
    AL_PATH("--data", "FILE", convert_args, data,
            "sample and score on a text file instead of a run's data"),
    AL_LONG("--sample-tokens", "N", 1, 65536, convert_args, tokens,
            "tokens of the training split sampled (default 4096)"),
    AL_LONG("--threads", "N", 1, 1024, convert_args, threads,
            "threads (default: the run's train.threads, else all cores)"),
    AL_CLI_SET(convert_args, 0),
    AL_CLI_PLUGIN(convert_args, 0),
    AL_CLI_CONTEXT(convert_args, AL_OPT_IGNORED, "unused by convert"),
    {0},
};

static const al_cli_spec convert_spec = {
    "convert", convert_opts,
    "Convert a trained model to another attention variant. MAPPING is what\n"
    "model.attention would hold, e.g. '{variant: gqa, n_kv_head: 2}', 'mqa' or\n"
    "'{variant: mla, d_latent: 32, d_rope: 16}'. Methods:\n"
    "  mean    mha/gqa -> gqa/mqa: each new K/V head is the mean of its group's\n"
    "          heads (the GQA paper); n_kv_head must divide the source's\n"
    "  first   the same, keeping the first head of each group\n"
    "  random  fresh K/V weights from --seed (default 1): the paper's control\n"
    "  svd     mha/gqa -> mla: RoPE split as docs/converting.md says,\n"
    "          then a truncated SVD of the NoPE keys and values\n"
    "Default: svd for mla, mean otherwise. Everything outside K/V is copied;\n"
    "converting to the same variant and settings is an exact copy.\n"
    "A list of mappings is a model.layer_attention stack, e.g. '[{variant:\n"
    "mla, d_latent: 32, d_rope: 16}, {variant: mqa}]' (and a stack converts\n"
    "too): each layer converts by itself, copied where its attention stays,\n"
    "by svd where it becomes mla (under svd or the default; the others then\n"
    "by mean); a layer no method reaches refuses the whole conversion.\n"
    "\n"
    "The sample (about --sample-tokens tokens of the training split, default\n"
    "4096, at most 65536: every layer's inputs are kept) and the scores come\n"
    "from the run's data: --config RUN.yaml, by default the config.yaml beside\n"
    "CHECKPOINT (--set edits it), or --data FILE\n"
    "(a text file, default split and evaluation settings). Prints per layer the\n"
    "relative error of each query head's keys and values against the source's\n"
    "(for mla, of the NoPE keys and values before and after kv_norm, and the\n"
    "share of key energy that keeps its rotation), then both models' val loss.\n"
    "The last line is\n"
    "  k_error=... v_error=... val_loss=... source_val_loss=... out=NEW\n"
    "NEW's metadata records the source's path, its SHA-256 and the method.\n"
    "Exit status: 0 done, 1 the write failed, 2 bad input (nothing written).\n",
};

static int fail(const char *fmt, const char *a, const char *b)
{
    char msg[1400];
    snprintf(msg, sizeof msg, fmt, a, b);
    return al_cli_fail(AL_EXIT_INPUT, msg);
}

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Where the run config comes from: --config, else CHECKPOINT's directory. */
static int find_config(convert_args *a)
{
    const char *ck = a->o.file, *slash = strrchr(ck, '/');
    if (a->config_file) {
        snprintf(a->config, sizeof a->config, "%s", a->config_file);
        return 0;
    }
    if (a->data) return 0;
    snprintf(a->config, sizeof a->config, "%.*sconfig.yaml", slash ? (int)(slash - ck + 1) : 0, ck);
    if (file_exists(a->config)) return 0;
    return fail("convert: no data to sample and score on: %.300s does not exist; pass "
                "--config RUN.yaml (the run that trained %.300s) or --data FILE", a->config, ck);
}

static int parse_args(int argc, char **argv, convert_args *a)
{
    *a = (convert_args){.seed = 1, .tokens = 4096, .method = -1};
    int rc = al_cli_parse(&convert_spec, argc, argv, a);
    if (rc != AL_CLI_GO) return rc;
    if (a->config_file && a->data)
        return fail("convert: --config and --data both name the data; give one%s%s", "", "");
    if (strcmp(a->o.out, a->o.file) == 0)
        return fail("convert: --out %.300s is the source checkpoint; write elsewhere%s",
                    a->o.out, "");
    return find_config(a) ? AL_EXIT_INPUT : AL_CLI_GO;
}

/* --to as model.attention's value; a bare name means {variant: NAME}. */
static int parse_to(const char *text, al_node **out, al_err *e)
{
    char buf[600];
    if (!strpbrk(text, "{:\n") && strlen(text) < 200) {
        snprintf(buf, sizeof buf, "{variant: %s}", text);
        text = buf;
    }
    return al_yaml_parse("--to", text, out, e);
}

/* The run: --config (or the one beside CHECKPOINT) with --set, else the
 * defaults reading --data as text. */
static int load_run(convert_args *a, al_config *run)
{
    if (!a->config[0]) {
        al_config_defaults(run);
        snprintf(run->data.source, sizeof run->data.source, "text");
        snprintf(run->data.path, sizeof run->data.path, "%s", a->data);
        return al_cli_load_plugins(&a->o);
    }
    al_cli_opts o = a->o;
    o.file = a->config;
    return al_cli_load_config(&o, run);
}

static void print_layers(const al_convert_result *r)
{
    int mla = strcmp(r->dst_variant, "mla") == 0 && r->method == AL_CONVERT_SVD;
    printf("layer  k_err   v_err%s\n", mla ? "   k_err_prenorm  v_err_prenorm  rope_kept" : "");
    for (int l = 0; l <= r->n_layer; l++) {
        const al_convert_err *x = l < r->n_layer ? &r->layers[l] : &r->mean;
        if (l < r->n_layer) printf("%5d", l);
        else printf(" mean");
        printf("  %.4f  %.4f", x->k, x->v);
        if (mla) printf("   %.4f         %.4f         %.4f", x->k_prenorm, x->v_prenorm,
                        x->rope_kept);
        putchar('\n');
    }
}

static void print_result(const convert_args *a, const al_config *run, const al_convert_result *r)
{
    printf("convert: %s (%s, sha256 %.16s...) -> %s by %s\n", a->o.file, r->src_variant,
           r->src_sha256, r->dst_variant, al_convert_method_name(r->method));
    printf("sample: %ld tokens of the training split of '%s'%s%s%s\n", r->sample_tokens,
           run->data.source, a->config[0] ? " (" : "", a->config, a->config[0] ? ")" : "");
    print_layers(r);
    printf("val_loss: source %.4f, converted %.4f", r->src_val_loss, r->val_loss);
    if (!isnan(r->val_accuracy))
        printf("; val_accuracy: source %.4f, converted %.4f", r->src_val_accuracy, r->val_accuracy);
    printf("\nwrote %s\n", a->o.out);
    printf("k_error=%.6g v_error=%.6g val_loss=%.6g source_val_loss=%.6g out=%s\n", r->mean.k,
           r->mean.v, r->val_loss, r->src_val_loss, a->o.out);
}

int al_cmd_convert(int argc, char **argv)
{
    convert_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != AL_CLI_GO) return rc;
    al_config run;
    if ((rc = load_run(&a, &run))) return rc;
    al_err e;
    al_node *to = NULL;
    if (parse_to(a.to, &to, &e) != 0) return al_cli_fail(AL_EXIT_INPUT, e.msg);
    if (al_parallel_start(al_threads_for(a.threads ? a.threads : run.train.threads),
                          a.threads ? "--threads" : "train.threads", &e) != 0) {
        al_node_free(to);
        return al_cli_fail(AL_EXIT_RUNTIME, e.msg);
    }
    al_convert_job j = {a.o.file, to, a.method, (uint64_t)a.seed, &run, a.tokens, a.o.out, 1};
    al_convert_result r;
    rc = al_convert_run(&j, &r, &e);
    al_node_free(to);
    if (rc != 0) return al_cli_fail(rc == -2 ? AL_EXIT_RUNTIME : AL_EXIT_INPUT, e.msg);
    print_result(&a, &run, &r);
    al_convert_result_free(&r);
    return 0;
}
