/*
 * cmd_attention.c - `attnlab attention`: every head's attention map over a
 * prompt, as CSV and gnuplot pictures, and the head statistics
 * (al_attention.h defines them; al_attnmap.h lists the files).
 */
#include <stdlib.h>
#include <string.h>

#include "al_attnmap.h"
#include "al_checkpoint.h"
#include "al_cli.h"
#include "al_sweep_spec.h"
#include "al_parallel.h"

typedef struct att_args {
    al_cli_opts o;   /* its --plugin files */
    const char *ckpt, *prompt, *file, *out, *layers, *heads, *alphabet;
    long offset, len, threads;
    int log_scale;
} att_args;

static const al_opt attention_opts[] = {
    AL_ARG("CHECKPOINT", att_args, ckpt, AL_OPT_REQUIRED, "a model.safetensors"),
    AL_STR("--prompt", "TEXT", att_args, prompt, "the sequence (bytes), at most the trained seq_len"),
    AL_PATH("--file", "F", att_args, file,
            "read it from a file instead: --len bytes (default: seq_len,\n"
            "or to the end of the file) from byte --offset (default 0)"),
    AL_LONG("--offset", "N", 0, 1L << 40, att_args, offset, "see --file"),
    AL_LONG("--len", "T", 1, 1L << 24, att_args, len, "see --file"),
    {.name = "--out", .kind = AL_OPT_PATH, .meta = "DIR", AL_CLI_AT(att_args, out),
     .flags = AL_OPT_REQUIRED, .help = "output directory (created)"},
    AL_STR("--layers", "LIST", att_args, layers, "layers to draw, e.g. 0,2-3 (default: all)"),
    AL_STR("--heads", "LIST", att_args, heads, "heads to draw (default: all)"),
    AL_FLAG("--log-scale", att_args, log_scale,
            "log colour scale (1e-4 .. 1) instead of linear (0 .. 1)"),
    AL_STR("--alphabet", "TEXT", att_args, alphabet,
           "tokens the induction test draws from (default: the ASCII\n"
           "letters for a byte model, else the whole vocabulary)"),
    AL_LONG("--threads", "N", 1, 1024, att_args, threads, "worker threads (default 1)"),
    AL_CLI_PLUGIN(att_args, 0),
    {0},
};

static const al_cli_spec attention_spec = {
    "attention", attention_opts,
    "Run the model once over a prompt (--prompt TEXT or --file F, exactly one) and\n"
    "write, for every selected layer and head, the attention probabilities\n"
    "(DIR/attention.csv: layer,head,query,key,p), one picture per layer\n"
    "(DIR/layer{L}.png and .svg, a grid of the heads' heatmaps, drawn by gnuplot\n"
    "from DIR/layer{L}.gp) and the head statistics (DIR/heads.csv and a table on\n"
    "standard output): entropy (nats), mean attended distance, mass on the first\n"
    "token and previous-token score over the prompt's queries 1..T-1, and the\n"
    "induction score on random tokens repeated twice (docs/attention.md).\n"
    "Exit status: 0 done, 1 an output could not be written or gnuplot failed,\n"
    "2 bad input (options, prompt, missing or corrupt checkpoint).\n",
};

/* What the table cannot say: which options go together. */
static int check_args(const att_args *a)
{
    if (!a->prompt == !a->file)
        return al_cli_fail(AL_EXIT_INPUT, "attention: give exactly one of --prompt TEXT and "
                                          "--file F");
    if (a->prompt && (a->offset || a->len))
        return al_cli_fail(AL_EXIT_INPUT, "attention: --offset and --len go with --file, "
                                          "not --prompt");
    if (a->alphabet && !a->alphabet[0])
        return al_cli_fail(AL_EXIT_INPUT, "attention: --alphabet is empty");
    return 0;
}

static int parse(int argc, char **argv, att_args *a)
{
    *a = (att_args){.threads = 1};
    int rc = al_cli_parse(&attention_spec, argc, argv, a);
    if (rc != AL_CLI_GO) return rc;
    if (check_args(a)) return AL_EXIT_INPUT;
    return al_cli_load_plugins(&a->o) ? AL_EXIT_INPUT : AL_CLI_GO;
}

/* "0,2-3" into sel (ascending, each once) out of 0..n-1; returns the count
 * or -1 with e naming the option and the bad item. */
static int parse_list(const char *opt, const char *what, const char *s, int n, int *sel,
                      al_err *e)
{
    char *mark = al_calloc((size_t)n, 1);
    const char *p = s;
    int k = 0, ok = *s != 0;
    while (ok && *p) {
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        ok = end != p && lo >= 0;
        if (ok && *end == '-') {
            p = end + 1;
            hi = strtol(p, &end, 10);
            ok = end != p && hi >= lo;
        }
        if (ok && hi >= n) {
            free(mark);
            return al_errf(e, "attention: %s: %s %ld is out of range (the model has %d: 0..%d)",
                           opt, what, hi, n, n - 1);
        }
        for (long i = lo; ok && i <= hi; i++) mark[i] = 1;
        p = end;
        if (ok && *p == ',') ok = *++p != 0;
        else if (ok && *p) ok = 0;
    }
    if (!ok) {
        free(mark);
        return al_errf(e, "attention: %s wants a list such as 0,2-3, got '%.200s'", opt, s);
    }
    for (int i = 0; i < n; i++)
        if (mark[i]) sel[k++] = i;
    free(mark);
    return k;
}

/* The prompt's bytes as tokens (malloc'ed), checked against the context. */
static int read_tokens(const att_args *a, const al_model *m, int **tok, int *T, al_err *e)
{
    char *buf = NULL;
    size_t n;
    const unsigned char *src;
    if (a->file) {
        if (al_read_file(a->file, &buf, &n, e)) return -1;
        if ((size_t)a->offset >= n) {
            free(buf);
            return al_errf(e, "attention: --offset %ld is past the end of %s (%zu bytes)",
                           a->offset, a->file, n);
        }
        size_t want = a->len ? (size_t)a->len : (size_t)m->cfg.seq_len;
        src = (const unsigned char *)buf + a->offset;
        n = n - a->offset;
        if (a->len && want > n) {
            free(buf);
            return al_errf(e, "attention: --len %ld runs past the end of %s (%zu bytes from "
                           "offset %ld)", a->len, a->file, n, a->offset);
        }
        n = want < n ? want : n;
    } else {
        src = (const unsigned char *)a->prompt;
        n = strlen(a->prompt);
    }
    if (n < 1 || n > (size_t)m->cfg.seq_len) {
        free(buf);
        return n < 1 ? al_errf(e, "attention: the prompt is empty")
                     : al_errf(e, "attention: the prompt has %zu tokens, more than the model's "
                               "context (seq_len %d)", n, m->cfg.seq_len);
    }
    *tok = al_malloc(n * sizeof **tok);
    for (size_t i = 0; i < n; i++) (*tok)[i] = src[i];
    *T = (int)n;
    free(buf);
    return 0;
}

typedef struct att_run {
    al_model m;
    int *tokens, *layers, *heads, T;
    al_head_stats *stats;
    al_attnmap map;
} att_run;

static void run_free(att_run *r)
{
    al_model_free(&r->m);
    free(r->tokens);
    free(r->layers);
    free(r->heads);
    free(r->stats);
}

/* Everything that can be wrong with the input, checked before any output. */
static int prepare(const att_args *a, att_run *r, al_err *e)
{
    memset(r, 0, sizeof *r);
    if (al_check_out_dir(a->out, e) || al_checkpoint_load(a->ckpt, &r->m, NULL, e) || al_attention_supported(&r->m, e) ||
        read_tokens(a, &r->m, &r->tokens, &r->T, e))
        return -1;
    int L = r->m.cfg.n_layer, H = r->m.cfg.n_head;
    r->layers = al_malloc((size_t)L * sizeof(int));
    r->heads = al_malloc((size_t)H * sizeof(int));
    int nl = L, nh = H;
    for (int i = 0; i < L; i++) r->layers[i] = i;
    for (int i = 0; i < H; i++) r->heads[i] = i;
    if (a->layers && (nl = parse_list("--layers", "layer", a->layers, L, r->layers, e)) < 0)
        return -1;
    if (a->heads && (nh = parse_list("--heads", "head", a->heads, H, r->heads, e)) < 0)
        return -1;
    r->map = (al_attnmap){.dir = a->out, .title = a->ckpt, .tokens = r->tokens, .T = r->T,
                          .layers = r->layers, .heads = r->heads, .n_layers = nl,
                          .n_heads = nh, .log_scale = a->log_scale};
    r->stats = al_malloc((size_t)L * H * sizeof *r->stats);
    return al_head_stats_model(&r->m, r->tokens, 1, r->T, a->alphabet, r->stats, e);
}

static void report_plots(int plots, const char *dir)
{
    if (plots == 1)
        fprintf(stderr, "attnlab: attention: gnuplot not found: no pictures (the scripts "
                "%s/layer*.gp are written; Debian: apt-get install gnuplot-nox)\n", dir);
    else if (plots == 2)
        fprintf(stderr, "attnlab: attention: gnuplot failed; see %s/gnuplot.log\n", dir);
}

int al_cmd_attention(int argc, char **argv)
{
    att_args a;
    int rc = parse(argc, argv, &a);
    if (rc != AL_CLI_GO) return rc;
    att_run r;
    al_err e;
    if (al_parallel_start((int)a.threads, "--threads", &e) != 0)
        return al_cli_fail(AL_EXIT_RUNTIME, e.msg);
    if (prepare(&a, &r, &e)) {
        run_free(&r);
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    }
    r.map.stats = r.stats;
    if (al_attention_forward(&r.m, r.tokens, r.T, &e) || al_attnmap_write(&r.m, &r.map, &e) ||
        al_heads_write_csv(a.out, &r.m, &r.map, r.stats, &e)) {
        run_free(&r);
        return al_cli_fail(AL_EXIT_RUNTIME, e.msg);
    }
    char variant[256];
    al_sweep_stack_label(variant, sizeof variant, &r.m.cfg, "/");
    printf("%s: %d tokens, %s attention%s\n", a.ckpt, r.T, variant,
           r.m.cfg.causal ? "" : " WITHOUT the causal mask (causal: false)");
    al_heads_print(stdout, &r.m, &r.map, r.stats);
    int plots = al_attnmap_plot(&r.map);
    report_plots(plots, a.out);
    printf("wrote %s/attention.csv, heads.csv, tokens.csv and layer*.gp%s\n", a.out,
           plots ? "" : ", layer*.png, layer*.svg");
    run_free(&r);
    return plots == 2 ? AL_EXIT_RUNTIME : 0;
}
