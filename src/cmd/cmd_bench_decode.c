/*
 * cmd_bench_decode.c - `attnlab bench-decode`: decode speed of each variant
 * at several context lengths and a batch of B sequences, with the cache
 * bytes it holds.
 *
 * The timing is al_decode_speed's (src/score/score_decode.c), which a
 * sweep's eval.decode uses too: caches filled with random rows to C - N - 1,
 * N steps of B sequences timed, tokens/s counting all B; the median of
 * --repeats runs.
 */
#include <stdlib.h>
#include <string.h>

#include "al_cli.h"
#include "al_config_io.h"
#include "al_parallel.h"
#include "al_data.h"
#include "al_decode.h"
#include "al_gemm.h"
#include "al_cost.h"
#include "al_score.h"
#include "al_train.h"

typedef struct bench_args {
    al_cli_opts o;
    const char *variants, *contexts;
    long tokens, threads, batch, repeats, read_mib;
    int dtype;   /* -1: CONFIG's model.kv_dtype */
} bench_args;

static const al_opt bench_opts[] = {
    AL_ARG("CONFIG.yaml", bench_args, o.file, AL_OPT_REQUIRED,
           "the experiment file whose model shape is measured"),
    AL_CLI_SET(bench_args, 0),
    AL_STR("--variants", "LIST", bench_args, variants,
           "';'-separated, each a name and its settings, default\n"
           "\"mha; gqa n_kv_head=2; mqa; mla d_latent=32 d_rope=16\""),
    AL_STR("--contexts", "LIST", bench_args, contexts,
           "context lengths, ','-separated (default 256,1024,4096)"),
    AL_LONG("--tokens", "N", 1, 1L << 20, bench_args, tokens,
            "decode steps timed per cell (default 32)"),
    AL_LONG("--repeats", "N", 1, AL_DECODE_MAX_REPEATS, bench_args, repeats,
            "timed runs per cell; the median is printed (default 1)"),
    AL_LONG("--read-mib", "N", 1, 1L << 20, bench_args, read_mib,
            "MiB streamed to measure the read bandwidth, the bound of\n"
            "every cell (default 512: far past the CPU's caches)"),
    AL_FUNC("--kv-dtype", "D", al_cli_parse_kv_dtype, "f32, bf16, f16, int8 or int4", bench_args, dtype,
            "f32, bf16, f16, int8 or int4 (default: CONFIG's model.kv_dtype)"),
    AL_LONG("--batch", "B", 1, 4096, bench_args, batch,
            "sequences decoded together, each with its own cache\n"
            "(default 1); tokens/s counts every sequence's tokens"),
    AL_LONG("--threads", "N", 1, 1024, bench_args, threads,
            "threads of attnlab's pool (default 1); at batch 1 they\n"
            "share each step's cache rows and weight rows"),
    AL_PATH("--out", "FILE.csv", bench_args, o.out,
            "the CSV written (default results/bench_decode.csv)"),
    AL_CLI_PLUGIN(bench_args, 0),
    AL_CLI_CONTEXT(bench_args, AL_OPT_IGNORED, "unused (see --contexts)"),
    {0},
};

static const al_cli_spec bench_spec = {
    "bench-decode", bench_opts,
    "Decode tokens/s of each variant on CONFIG's model shape, at each context\n"
    "length, with the measured cache bytes and the parameter bytes a step reads\n"
    "beside it, and its bound: the machine's read bandwidth, measured in the same\n"
    "run, over decode_bytes_per_token (`attnlab cost`), and the fraction of it\n"
    "reached (above 1 where the bytes a step reads stay in the CPU's caches).\n"
    "Prints a table and writes CSV (default results/bench_decode.csv).\n"
    "Variants of plugins (--plugin, and CONFIG's plugins:) may be measured too.\n",
};

#define MAX_VARIANTS 16
#define MAX_CONTEXTS 16

typedef struct bench_cell {
    char variant[128];
    int context, dtype, tokens, batch;
    double tokens_per_s;
    size_t cache_bytes, bytes_per_token;
    size_t weight_bytes;   /* parameters a step reads: all, the tied embedding as the head */
    double read_bytes;     /* decode_bytes_per_token (al_cost.h): cache rows read + weights / B */
    double bound;          /* the read bandwidth's bound: bandwidth / read_bytes tokens/s */
} bench_cell;

/* "gqa n_kv_head=2" -> "model.attention={variant: gqa, n_kv_head: 2}" */
static int variant_set(const char *spec, char *out, size_t n, al_err *e)
{
    char buf[256], *save = NULL;
    snprintf(buf, sizeof buf, "%s", spec);
    char *w = strtok_r(buf, " \t", &save);
    if (!w) return al_errf(e, "bench-decode: --variants has an empty entry");
    size_t len = (size_t)snprintf(out, n, "model.attention={variant: %s", w);
    while ((w = strtok_r(NULL, " \t", &save)) && len < n) {
        char *eq = strchr(w, '=');
        if (!eq || eq == w || !eq[1])
            return al_errf(e, "bench-decode: --variants: '%s' is not key=value", w);
        *eq = 0;
        len += (size_t)snprintf(out + len, n - len, ", %s: %s", w, eq + 1);
    }
    if (len + 2 > n) return al_errf(e, "bench-decode: --variants entry too long: '%s'", spec);
    strcat(out, "}");
    return 0;
}

static int parse_contexts(const char *s, int *ctx, int *n, al_err *e)
{
    char buf[256], *save = NULL;
    snprintf(buf, sizeof buf, "%s", s);
    *n = 0;
    for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
        long v;
        if (*n == MAX_CONTEXTS || al_cli_parse_long(w, 2, 1L << 24, &v) != 0)
            return al_errf(e, "bench-decode: --contexts wants up to %d lengths >= 2 separated "
                           "by commas, got '%s'", MAX_CONTEXTS, s);
        ctx[(*n)++] = (int)v;
    }
    return *n ? 0 : al_errf(e, "bench-decode: --contexts is empty");
}

/* One cell: al_decode_speed's median of `repeats` timed runs. */
static int bench_one(al_model *m, int context, int dtype, int tokens, int batch, int repeats,
                     bench_cell *cell, al_err *e)
{
    al_decode_speed_opts o = {context, dtype, tokens, batch, repeats};
    al_decode_speed_result r;
    al_cost_opts co = {context, batch, dtype};
    al_model_cost *mc = al_malloc(sizeof *mc);
    int rc = al_cost_of_model(&m->cfg, &co, mc, e);
    cell->read_bytes = mc->decode_bytes_per_token;
    free(mc);
    if (rc != 0 || al_decode_speed(m, &o, &r, e) != 0) return -1;
    cell->context = context;
    cell->dtype = dtype;
    cell->tokens = tokens;
    cell->batch = batch;
    cell->tokens_per_s = r.tokens_per_s;
    cell->cache_bytes = r.cache_bytes;
    cell->bytes_per_token = r.row_bytes;   /* a bounded cache: not bytes / context */
    cell->weight_bytes = m->n_params * sizeof(float);
    return 0;
}

/* One variant: load CONFIG with its attention, build the model, run the contexts. */
static int bench_variant(const al_cli_opts *o, const char *spec, const int *ctx, int nctx,
                         int tokens, int batch, int repeats, int dtype, bench_cell *cells,
                         al_err *e)
{
    const char *sets[AL_CLI_MAX_SETS + 1];
    char set[512];
    if (variant_set(spec, set, sizeof set, e) != 0) return -1;
    memcpy(sets, o->sets, o->n_sets * sizeof *sets);
    sets[o->n_sets] = set;
    al_config c;
    /* the file's `plugins:` too: the variants measured may be theirs */
    if (al_plugin_config_load(o->file, sets, o->n_sets + 1, &c, e) != 0) return -1;
    if (al_train_resolve(&c, al_data_vocab(&c.data), e) != 0) return -1;
    al_model m;
    if (al_model_init(&m, &c.model, e) != 0) return -1;
    al_model_init_weights(&m, 1);
    int dt = dtype >= 0 ? dtype : al_kv_dtype_parse(c.model.kv_dtype), rc = 0;
    for (int i = 0; i < nctx && rc == 0; i++) {
        if (ctx[i] <= tokens + 1) {
            rc = al_errf(e, "bench-decode: context %d leaves no room for %d timed tokens",
                         ctx[i], tokens);
            break;
        }
        al_progress_line("bench-decode: %s at context %d, batch %d", spec, ctx[i], batch);
        rc = bench_one(&m, ctx[i], dt, tokens, batch, repeats, &cells[i], e);
        snprintf(cells[i].variant, sizeof cells[i].variant, "%s", spec);
    }
    al_progress_end();
    al_model_free(&m);
    return rc;
}

static int write_csv(const char *path, const bench_cell *cells, int n, double bandwidth,
                     al_err *e)
{
    char tmp[AL_PATH_LEN + 64];
    FILE *f = al_open_atomic(path, tmp, sizeof tmp, e);
    if (!f) return -1;
    fprintf(f, "variant,context,kv_dtype,tokens,tokens_per_s,kv_bytes_per_token,cache_bytes,"
               "weight_bytes,batch,threads,decode_bytes_per_token,read_bandwidth,"
               "bound_tokens_per_s,bound_fraction\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "\"%s\",%d,%s,%d,%.1f,%zu,%zu,%zu,%d,%d,%.0f,%.0f,%.1f,%.4f\n",
                cells[i].variant, cells[i].context, al_kv_dtype_name(cells[i].dtype),
                cells[i].tokens, cells[i].tokens_per_s, cells[i].bytes_per_token,
                cells[i].cache_bytes, cells[i].weight_bytes, cells[i].batch,
                al_parallel_threads(), cells[i].read_bytes, bandwidth, cells[i].bound,
                cells[i].bound > 0 ? cells[i].tokens_per_s / cells[i].bound : 0);
    return al_commit_atomic(f, tmp, path, e);
}

static void print_table(const bench_cell *cells, int n, double bandwidth)
{
    char cpu[128];
    al_cpu_model(cpu, sizeof cpu);   /* beside every figure: what it was measured on */
    printf("cpu=%s openblas_core=%s threads=%d read_bandwidth_gbs=%.2f\n", cpu, al_blas_core(),
           al_parallel_threads(), bandwidth / 1e9);
    int w = 28;   /* a variant with its settings may be longer */
    for (int i = 0; i < n; i++)
        if ((int)strlen(cells[i].variant) > w) w = (int)strlen(cells[i].variant);
    printf("%-*s %8s %5s %6s %13s %19s %12s %12s %14s %10s %8s\n", w, "variant", "context",
           "batch", "dtype", "tokens_per_s", "kv_bytes_per_token", "cache_bytes", "weight_bytes",
           "bytes_read/tok", "bound_tok/s", "of_bound");
    for (int i = 0; i < n; i++)
        printf("%-*s %8d %5d %6s %13.1f %19zu %12zu %12zu %14.0f %10.0f %8.2f\n", w,
               cells[i].variant, cells[i].context, cells[i].batch,
               al_kv_dtype_name(cells[i].dtype), cells[i].tokens_per_s, cells[i].bytes_per_token,
               cells[i].cache_bytes, cells[i].weight_bytes, cells[i].read_bytes, cells[i].bound,
               cells[i].bound > 0 ? cells[i].tokens_per_s / cells[i].bound : 0);
}

/* Splits the --variants list in place; returns the count or -1. */
static int split_variants(char *list, char **out, al_err *e)
{
    int n = 0;
    char *save = NULL;
    for (char *w = strtok_r(list, ";", &save); w; w = strtok_r(NULL, ";", &save)) {
        while (*w == ' ') w++;
        if (!*w) continue;
        if (n == MAX_VARIANTS)
            return al_errf(e, "bench-decode: at most %d --variants entries", MAX_VARIANTS);
        out[n++] = w;
    }
    return n ? n : al_errf(e, "bench-decode: --variants is empty");
}

int al_cmd_bench_decode(int argc, char **argv)
{
    bench_args a = {.tokens = 32, .threads = 1, .batch = 1, .repeats = 1, .read_mib = 512,
                    .dtype = -1};
    int rc = al_cli_parse(&bench_spec, argc, argv, &a);
    if (rc != AL_CLI_GO) return rc;
    rc = 0;
    char list[1024], *specs[MAX_VARIANTS];
    snprintf(list, sizeof list, "%s",
             a.variants ? a.variants : "mha; gqa n_kv_head=2; mqa; mla d_latent=32 d_rope=16");
    int ctx[MAX_CONTEXTS], nctx, nvar;
    al_err e;
    if ((nvar = split_variants(list, specs, &e)) < 0 ||
        parse_contexts(a.contexts ? a.contexts : "256,1024,4096", ctx, &nctx, &e) != 0)
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    if ((rc = al_cli_load_plugins(&a.o))) return rc;   /* --plugin, before any variant is named */
    if (al_parallel_start((int)a.threads, "--threads", &e) != 0)
        return al_cli_fail(AL_EXIT_RUNTIME, e.msg);
    bench_cell *cells = al_calloc((size_t)nvar * nctx, sizeof *cells);
    for (int v = 0; v < nvar && rc == 0; v++)
        if (bench_variant(&a.o, specs[v], ctx, nctx, (int)a.tokens, (int)a.batch,
                          (int)a.repeats, a.dtype, cells + v * nctx, &e))
            rc = AL_EXIT_INPUT;
    /* the roofline's bound, measured in this run on the same threads; after
     * the cells, so that a bad variant or config is refused at once, not
     * after seconds of streaming memory */
    double bandwidth = rc ? 0 : al_read_bandwidth((size_t)a.read_mib << 20, 5);
    for (int i = 0; rc == 0 && i < nvar * nctx; i++)
        cells[i].bound = cells[i].read_bytes > 0 ? bandwidth / cells[i].read_bytes : 0;
    const char *out = a.o.out ? a.o.out : "results/bench_decode.csv";
    if (rc == 0) {
        print_table(cells, nvar * nctx, bandwidth);
        char dir[AL_PATH_LEN];
        snprintf(dir, sizeof dir, "%s", out);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        if ((slash && al_mkdirs(dir, &e) != 0) || write_csv(out, cells, nvar * nctx, bandwidth, &e) != 0)
            rc = AL_EXIT_RUNTIME;
    }
    if (rc) fprintf(stderr, "attnlab: %s\n", e.msg);
    free(cells);
    return rc;
}
