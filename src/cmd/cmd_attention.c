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
#include "al_parallel.h"
#include "al_plugin.h"

static const char attention_help[] =
    "usage: attnlab attention CHECKPOINT (--prompt TEXT | --file F [--offset N] [--len T])\n"
    "                         --out DIR [--layers LIST] [--heads LIST] [--log-scale]\n"
    "                         [--alphabet TEXT] [--threads N] [--plugin PATH ...]\n"
    "\n"
    "Run the model once over a prompt and write, for every selected layer and head,\n"
    "the attention probabilities (DIR/attention.csv: layer,head,query,key,p), one\n"
    "picture per layer (DIR/layer{L}.png and .svg, a grid of the heads' heatmaps,\n"
    "drawn by gnuplot from DIR/layer{L}.gp) and the head statistics (DIR/heads.csv\n"
    "and a table on standard output): entropy (nats), mean attended distance, mass\n"
    "on the first token and previous-token score over the prompt's queries 1..T-1,\n"
    "and the induction score on random tokens repeated twice (README: \"Seeing what\n"
    "attention learned\").\n"
    "\n"
    "  --prompt TEXT     the sequence (bytes), at most the trained seq_len\n"
    "  --file F          read it from a file instead: --len bytes (default: seq_len,\n"
    "                    or to the end of the file) from byte --offset (default 0)\n"
    "  --out DIR         output directory (created)\n"
    "  --layers LIST     layers to draw, e.g. 0,2-3 (default: all)\n"
    "  --heads LIST      heads to draw (default: all)\n"
    "  --log-scale       log colour scale (1e-4 .. 1) instead of linear (0 .. 1)\n"
    "  --alphabet TEXT   tokens the induction test draws from (default: the ASCII\n"
    "                    letters for a byte model, else the whole vocabulary)\n"
    "  --threads N       worker threads (default 1)\n"
    "  --plugin PATH     load a variant plugin first; may repeat\n"
    "Exit status: 0 done, 1 an output could not be written or gnuplot failed,\n"
    "2 bad input (options, prompt, missing or corrupt checkpoint).\n";

typedef struct att_args {
    const char *ckpt, *prompt, *file, *out, *layers, *heads, *alphabet;
    long offset, len, threads;
    int log_scale, help;
} att_args;

static int bad(const char *opt, const char *val, const char *want)
{
    char msg[512];
    snprintf(msg, sizeof msg, "attention: %s wants %s, got '%.200s'", opt, want, val);
    return al_cli_fail(AL_EXIT_INPUT, msg);
}

/* One option with a value: 0 taken, -1 not such an option, else an exit status. */
static int take(att_args *a, const char *opt, const char *v)
{
    if (!strcmp(opt, "--prompt")) a->prompt = v;
    else if (!strcmp(opt, "--file")) a->file = v;
    else if (!strcmp(opt, "--out")) a->out = v;
    else if (!strcmp(opt, "--layers")) a->layers = v;
    else if (!strcmp(opt, "--heads")) a->heads = v;
    else if (!strcmp(opt, "--alphabet")) a->alphabet = v;
    else if (!strcmp(opt, "--offset")) {
        if (al_cli_parse_long(v, 0, 1L << 40, &a->offset)) return bad(opt, v, "a byte offset >= 0");
    } else if (!strcmp(opt, "--len")) {
        if (al_cli_parse_long(v, 1, 1L << 24, &a->len)) return bad(opt, v, "a positive count");
    } else if (!strcmp(opt, "--threads")) {
        if (al_cli_parse_long(v, 1, 1024, &a->threads)) return bad(opt, v, "a positive count");
    } else if (!strcmp(opt, "--plugin")) {   /* before the checkpoint names its variant */
        al_err e;
        if (al_plugin_load(v, &e) != 0) return al_cli_fail(AL_EXIT_INPUT, e.msg);
    } else {
        return -1;
    }
    return 0;
}

static int check_args(const att_args *a)
{
    if (!a->ckpt)
        return al_cli_fail(AL_EXIT_INPUT, "attention: missing the CHECKPOINT argument "
                                          "(see 'attnlab attention --help')");
    if (!a->prompt == !a->file)
        return al_cli_fail(AL_EXIT_INPUT, "attention: give exactly one of --prompt TEXT and "
                                          "--file F");
    if (a->prompt && (a->offset || a->len))
        return al_cli_fail(AL_EXIT_INPUT, "attention: --offset and --len go with --file, "
                                          "not --prompt");
    if (!a->out)
        return al_cli_fail(AL_EXIT_INPUT, "attention: missing --out DIR");
    if (a->alphabet && !a->alphabet[0])
        return al_cli_fail(AL_EXIT_INPUT, "attention: --alphabet is empty");
    return 0;
}

static int parse(int argc, char **argv, att_args *a)
{
    char msg[512];
    memset(a, 0, sizeof *a);
    a->threads = 1;
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        int rc = i + 1 < argc ? take(a, s, argv[i + 1]) : -1;
        if (rc > 0) return rc;
        if (rc == 0) i++;
        else if (!strcmp(s, "--log-scale")) a->log_scale = 1;
        else if (!strcmp(s, "--help") || !strcmp(s, "-h")) a->help = 1;
        else if (s[0] == '-' && s[1]) {
            snprintf(msg, sizeof msg, "attention: unknown or incomplete option '%.200s' "
                     "(see 'attnlab attention --help')", s);
            return al_cli_fail(AL_EXIT_INPUT, msg);
        } else if (!a->ckpt) a->ckpt = s;
        else {
            snprintf(msg, sizeof msg, "attention: unexpected argument '%.200s'", s);
            return al_cli_fail(AL_EXIT_INPUT, msg);
        }
    }
    return a->help ? 0 : check_args(a);
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
    if (al_checkpoint_load(a->ckpt, &r->m, NULL, e) || al_attention_supported(&r->m, e) ||
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
    if (rc || a.help) return rc ? rc : (fputs(attention_help, stdout), 0);
    al_parallel_set_threads((int)a.threads);
    att_run r;
    al_err e;
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
    printf("%s: %d tokens, %s attention%s\n", a.ckpt, r.T, r.m.cfg.variant,
           r.m.cfg.causal ? "" : " WITHOUT the causal mask (causal: false)");
    al_heads_print(stdout, &r.m, &r.map, r.stats);
    int plots = al_attnmap_plot(&r.map);
    report_plots(plots, a.out);
    printf("wrote %s/attention.csv, heads.csv, tokens.csv and layer*.gp%s\n", a.out,
           plots ? "" : ", layer*.png, layer*.svg");
    run_free(&r);
    return plots == 2 ? AL_EXIT_RUNTIME : 0;
}
