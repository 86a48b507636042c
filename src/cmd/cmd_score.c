/*
 * cmd_score.c - `attnlab score`: the mean next-token cross-entropy of a
 * checkpoint over the bytes of a file. The inputs it reads (al_score_in.h)
 * are also `attnlab grads`'s (cmd_grads.c).
 *
 * Windows start at 0, T, 2T, ...: window j feeds bytes [jT, jT + T) and
 * predicts [jT + 1, jT + T + 1); a window that does not fit whole is
 * dropped. T defaults to the checkpoint's seq_len and may exceed it (RoPE
 * extrapolates).
 */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "al_checkpoint.h"
#include "al_cli.h"
#include "al_decode.h"
#include "al_parallel.h"
#include "al_score_in.h"
#include "al_sweep_spec.h"
#include "al_tokloss.h"

/* Activation floats a batch may take before it is split further (~256 MB). */
#define SCORE_BUDGET_FLOATS (64L << 20)
#define SCORE_MAX_BATCH 64

/* ------------------------------------------------------------ inputs */

void al_score_close(al_score_in *s)
{
    al_model_free(&s->m);
    free(s->bytes);
    free(s->in);
    free(s->tgt);
}

int al_score_open(const char *ckpt, const char *file, long seq_len, al_score_in *s, al_err *e)
{
    memset(s, 0, sizeof *s);
    if (al_checkpoint_load_run(ckpt, &s->m, &s->step, e) != 0) return -1;
    if (al_read_file(file, &s->bytes, &s->n, e) != 0) return -1;
    s->T = seq_len ? (int)seq_len : s->m.cfg.seq_len;
    s->windows = s->n > 0 ? (long)((s->n - 1) / (size_t)s->T) : 0;
    if (s->windows == 0)
        return al_errf(e, "%s: too short: %zu bytes, one window of %d tokens needs %d", file,
                       s->n, s->T, s->T + 1);
    size_t used = (size_t)s->windows * s->T + 1;
    for (size_t i = 0; i < used; i++)
        if ((unsigned char)s->bytes[i] >= (unsigned)s->m.cfg.vocab_size)
            return al_errf(e, "%s: byte %u at offset %zu is outside the checkpoint's "
                           "vocabulary (%d)", file, (unsigned char)s->bytes[i], i,
                           s->m.cfg.vocab_size);
    return 0;
}

/* Activation floats one window of T tokens takes (as al_model_reserve
 * counts them), to choose how many windows go in one forward pass. */
static size_t window_floats(const al_model *m, int T)
{
    const al_model_config *c = &m->cfg;
    size_t D = c->d_model, F = m->d_ff, V = c->vocab_size, t = (size_t)T, n = 0, scratch = 0;
    for (int l = 0; l < c->n_layer; l++) {
        const al_layer *L = &m->layers[l];
        size_t s = L->attn->scratch_floats(&L->ashape, 1, T);
        n += 4 * t * D + 2 * t + 2 * t * F + L->attn->act_floats(&L->ashape, 1, T);
        scratch = s > scratch ? s : scratch;
    }
    return n + t * (5 * D + 2 + V + 2 * F) + scratch;
}

static long batch_for(const al_model *m, int T, long windows, long want)
{
    size_t per = window_floats(m, T);
    long b = want ? want : (long)(SCORE_BUDGET_FLOATS / (per ? per : 1));
    if (!want && b > SCORE_MAX_BATCH) b = SCORE_MAX_BATCH;
    return b < 1 ? 1 : b > windows ? windows : b;
}

void al_score_fill(al_score_in *s, long w0, int B)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < s->T; t++) {
            size_t at = (size_t)(w0 + b) * s->T + t;
            s->in[b * s->T + t] = (unsigned char)s->bytes[at];
            s->tgt[b * s->T + t] = (unsigned char)s->bytes[at + 1];
        }
}

int al_score_prepare(al_score_in *s, long threads, int B, al_err *e)
{
    al_parallel_set_threads((int)(threads ? threads : sysconf(_SC_NPROCESSORS_ONLN)));
    double need = 4.0 * B * (double)window_floats(&s->m, s->T);
    double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    if (have > 0 && need > have)
        return al_errf(e, "%d windows of %d tokens need %.1f GB of activations, more than "
                       "this machine's %.1f GB (lower --seq-len or --batch)", B, s->T,
                       need / 1e9, have / 1e9);
    if (al_model_reserve(&s->m, B, s->T, e) != 0) return -1;
    s->in = al_malloc((size_t)B * s->T * sizeof(int));
    s->tgt = al_malloc((size_t)B * s->T * sizeof(int));
    return 0;
}

/* ------------------------------------------------------------ score */

typedef struct score_args {
    al_cli_opts o;   /* its --plugin files */
    const char *ckpt, *file, *out;
    long seq_len, batch, threads, buckets;
    int json, through_cache, by_position;
    int kv_dtype;    /* -1: model.kv_dtype */
    int passkey;
    al_passkey_grid grid;
} score_args;

/* "256,512,1024" into grid->lengths. */
static int parse_lengths(const char *v, void *field)
{
    al_passkey_grid *g = field;
    char *end;
    g->n_lengths = 0;
    for (const char *p = v; g->n_lengths < AL_PASSKEY_MAX_GRID; p = end + 1) {
        long x = strtol(p, &end, 10);
        if (end == p || x < 1 || x > (1L << 20) || (*end && *end != ',')) return -1;
        g->lengths[g->n_lengths++] = (int)x;
        if (!*end) return 0;
    }
    return -1;
}

/* "0,0.5,0.9" into grid->depths, each in [0, 1). */
static int parse_depths(const char *v, void *field)
{
    al_passkey_grid *g = field;
    char *end;
    g->n_depths = 0;
    for (const char *p = v; g->n_depths < AL_PASSKEY_MAX_GRID; p = end + 1) {
        double x = strtod(p, &end);
        if (end == p || !(x >= 0 && x < 1) || (*end && *end != ',')) return -1;
        g->depths[g->n_depths++] = x;
        if (!*end) return 0;
    }
    return -1;
}

static const al_opt score_opts[] = {
    AL_ARG("CHECKPOINT", score_args, ckpt, AL_OPT_REQUIRED, "a model.safetensors"),
    AL_ARG("FILE", score_args, file, AL_OPT_REQUIRED, "the bytes to score"),
    AL_LONG("--seq-len", "T", 1, 1L << 24, score_args, seq_len,
            "window length in tokens (default: the checkpoint's seq_len)"),
    AL_LONG("--batch", "B", 1, 1L << 24, score_args, batch,
            "windows per forward pass (default: as many as fit about\n"
            "256 MB of activations, at most 64)"),
    AL_LONG("--threads", "N", 1, 1L << 24, score_args, threads,
            "BLAS threads (default: all cores)"),
    AL_FLAG("--json", score_args, json, "print one JSON object instead of the two lines"),
    AL_FLAG("--through-cache", score_args, through_cache,
            "score through the decode path: every token appended to the\n"
            "KV cache one step at a time, its loss from decode's logits"),
    AL_FUNC("--kv-dtype", "D", al_cli_parse_kv_dtype, "f32, bf16, f16, int8 or int4",
            score_args, kv_dtype,
            "with --through-cache: the cache's storage, f32, bf16, f16,\n"
            "int8 or int4 (default: the checkpoint's model.kv_dtype)"),
    AL_FLAG("--by-position", score_args, by_position,
            "also the mean loss per position bucket: DIR/by_position.csv\n"
            "and a gnuplot picture DIR/by_position.png (needs --out)"),
    AL_LONG("--buckets", "N", 1, 1L << 24, score_args, buckets,
            "position buckets for --by-position (default: min(16, T))"),
    AL_PATH("--out", "DIR", score_args, out, "where --by-position and --passkey write"),
    AL_FLAG("--passkey", score_args, passkey,
            "passkey accuracy instead, FILE the filler: one CSV row per\n"
            "length x depth cell (DIR/passkey.csv too with --out)"),
    AL_FUNC("--lengths", "L,..", parse_lengths, "up to 16 window lengths, comma-separated",
            score_args, grid, "--passkey window lengths (default: seq_len x 1, 2, 4)"),
    AL_FUNC("--depths", "D,..", parse_depths, "up to 16 depths in [0, 1), comma-separated",
            score_args, grid, "--passkey depths of the key (default: 0,0.25,0.5,0.75)"),
    AL_LONG("--examples", "N", 1, 1L << 20, score_args, grid.examples,
            "--passkey examples per cell (default 20)"),
    AL_LONG("--seed", "S", 1, 1L << 62, score_args, grid.seed,
            "--passkey: the examples of data.seed S's test stream (default 1)"),
    AL_CLI_PLUGIN(score_args, 0),
    {0},
};

static const al_cli_spec score_spec = {
    "score", score_opts,
    "Mean next-token cross-entropy of the model in CHECKPOINT (a model.safetensors)\n"
    "over the bytes of FILE. Windows start at 0, T, 2T, ...; window j feeds bytes\n"
    "[jT, jT+T) and predicts [jT+1, jT+T+1); a window that does not fit whole is\n"
    "dropped. T defaults to the checkpoint's seq_len and may exceed it (RoPE\n"
    "extrapolates). The last line is\n"
    "  loss=<nats per byte> tokens=<count>\n"
    "--through-cache scores the same windows through the KV cache, each window\n"
    "from an empty cache (at f32 equal to the plain score up to rounding).\n"
    "--by-position: the window's positions 0..T-1 (position t predicts byte\n"
    "t+1 from t+1 bytes) cut into N buckets [floor(iT/N), floor((i+1)T/N));\n"
    "DIR/by_position.csv has the columns bucket_start,bucket_end,loss,tokens\n"
    "(bucket_end exclusive; loss the mean over the bucket's tokens).\n"
    "(with causal=false appended for a non-causal model); --json prints one JSON\n"
    "object instead.\n"
    "--passkey: accuracy on the passkey task (data.source passkey) with FILE as\n"
    "the filler, on a fixed grid of window lengths x depths (examples 0..N-1 of\n"
    "the test stream of --seed); prints the CSV\n"
    "  length,depth,examples,exact,digit_accuracy,loss\n"
    "exact: all 5 digits right by greedy decoding; digit_accuracy: the share of\n"
    "digits whose teacher-forced argmax is right; loss: mean on the digits.\n",
};

static double score_all(al_score_in *s, int B)
{
    double sum = 0.0;
    for (long w = 0; w < s->windows; w += B) {
        int b = (int)(s->windows - w < B ? s->windows - w : B);
        al_score_fill(s, w, b);
        sum += al_model_forward(&s->m, s->in, s->tgt, NULL, b, s->T) * b * s->T;
        al_progress_line("score: window %ld/%ld", w + b, s->windows);
    }
    al_progress_end();
    return sum / ((double)s->windows * s->T);
}

/* ---- token by token: through the cache, or by position */

/* What the token-by-token path found. */
typedef struct tok_result {
    double loss;
    double *pos_sum;      /* (T): loss summed over windows at each position */
    int dtype;            /* the cache's, through the cache; else -1 */
    size_t cache_bytes;   /* one window's cache, through the cache */
} tok_result;

/* Windows per batch through the cache: sequences decoded together. */
#define CACHE_BATCH 8

static int open_cache(al_score_in *s, const score_args *o, int B, al_decoder *d,
                      tok_result *r, al_err *e)
{
    r->dtype = o->kv_dtype >= 0 ? o->kv_dtype : al_kv_dtype_parse(s->m.cfg.kv_dtype);
    if (al_decoder_init_batch(d, &s->m, B, s->T, r->dtype, e) != 0) return -1;
    r->cache_bytes = al_decoder_cache_bytes(d) / (size_t)B;
    al_parallel_set_threads((int)(o->threads ? o->threads : sysconf(_SC_NPROCESSORS_ONLN)));
    s->in = al_malloc((size_t)B * s->T * sizeof(int));
    s->tgt = al_malloc((size_t)B * s->T * sizeof(int));
    return 0;
}

/* Every window's per-token losses, by the forward pass or through the
 * cache, summed in a fixed order (the same bits for the same threads). */
static int score_tokens(al_score_in *s, const score_args *o, int B, tok_result *r, al_err *e)
{
    al_decoder d = {0};
    r->dtype = -1;
    if (o->through_cache ? open_cache(s, o, B, &d, r, e) : al_score_prepare(s, o->threads, B, e))
        return -1;
    double *loss = al_malloc((size_t)B * s->T * sizeof(double)), sum = 0;
    r->pos_sum = al_calloc((size_t)s->T, sizeof(double));
    for (long w = 0; w < s->windows; w += B) {
        int b = (int)(s->windows - w < B ? s->windows - w : B);
        al_score_fill(s, w, b);
        if (o->through_cache) al_token_losses_cache(&d, s->in, s->tgt, b, s->T, loss);
        else al_token_losses_forward(&s->m, s->in, s->tgt, b, s->T, loss);
        for (size_t i = 0; i < (size_t)b * s->T; i++)
            sum += loss[i], r->pos_sum[i % (size_t)s->T] += loss[i];
        al_progress_line("score: window %ld/%ld", w + b, s->windows);
    }
    al_progress_end();
    r->loss = sum / ((double)s->windows * s->T);
    free(loss);
    if (o->through_cache) al_decoder_free(&d);
    return 0;
}

static int check_passkey_args(const score_args *o, al_err *e)
{
    const al_passkey_grid *g = &o->grid;
    if (o->passkey && (o->through_cache || o->by_position || o->json || o->seq_len))
        return al_errf(e, "--passkey takes none of --through-cache, --by-position, --json, "
                       "--seq-len (its lengths are --lengths)");
    if (!o->passkey && (g->n_lengths || g->n_depths || g->examples || g->seed))
        return al_errf(e, "--lengths, --depths, --examples and --seed need --passkey");
    return 0;
}

static int check_args(const score_args *o, const al_score_in *s, al_err *e)
{
    if (check_passkey_args(o, e) != 0) return -1;
    if (o->kv_dtype >= 0 && !o->through_cache)
        return al_errf(e, "--kv-dtype needs --through-cache (plain score runs no cache)");
    if ((o->buckets || (o->out && !o->passkey)) && !o->by_position)
        return al_errf(e, "%s needs --by-position", o->buckets ? "--buckets" : "--out");
    if (o->by_position && !o->out) return al_errf(e, "--by-position needs --out DIR");
    if (o->buckets > s->T)
        return al_errf(e, "--buckets (%ld) must be at most the window length T (%d)",
                       o->buckets, s->T);
    return 0;
}

static void print_json(const score_args *o, const al_score_in *s, double loss,
                       const tok_result *r)
{
    char variant[256];
    al_sweep_stack_label(variant, sizeof variant, &s->m.cfg, "/");
    json_t *j = json_pack("{s:s, s:s, s:s, s:b, s:I, s:i, s:I, s:I, s:f}", "checkpoint",
                          o->ckpt, "file", o->file, "variant", variant, "causal",
                          s->m.cfg.causal, "step", (json_int_t)s->step, "seq_len", s->T,
                          "windows", (json_int_t)s->windows, "tokens",
                          (json_int_t)s->windows * s->T, "loss", loss);
    if (j && r && r->dtype >= 0) {
        json_object_set_new(j, "through_cache", json_true());
        json_object_set_new(j, "kv_dtype", json_string(al_kv_dtype_name(r->dtype)));
        json_object_set_new(j, "kv_cache_bytes", json_integer((json_int_t)r->cache_bytes));
    }
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    AL_ASSERT(text != NULL);
    printf("%s\n", text);
    free(text);
    json_decref(j);
}

/* The windows of s scored as o asks: the mean loss, and per position
 * (r->pos_sum, malloc'ed) on the token-by-token path. */
static int run_score(const score_args *o, al_score_in *s, tok_result *r, double *loss,
                     al_err *e)
{
    int B = (int)batch_for(&s->m, s->T, s->windows, o->batch);
    if (o->through_cache && !o->batch) B = s->windows < CACHE_BATCH ? (int)s->windows : CACHE_BATCH;
    if (o->through_cache || o->by_position) {
        if (score_tokens(s, o, B, r, e) != 0) return -1;
        *loss = r->loss;
        return 0;
    }
    r->dtype = -1;
    if (al_score_prepare(s, o->threads, B, e) != 0) return -1;
    *loss = score_all(s, B);
    return 0;
}

int al_score_eval(const char *ckpt, const char *file, int T, int kv_dtype, int by_position,
                  long threads, al_score_result *out, al_err *e)
{
    score_args o = {.ckpt = ckpt, .file = file, .seq_len = T, .threads = threads,
                    .through_cache = kv_dtype >= 0, .kv_dtype = kv_dtype,
                    .by_position = by_position};
    al_score_in s;
    tok_result r = {0};
    memset(out, 0, sizeof *out);
    int rc = al_score_open(ckpt, file, T, &s, e);
    if (rc == 0) rc = run_score(&o, &s, &r, &out->loss, e);
    if (rc == 0) {
        out->tokens = s.windows * s.T;
        out->windows = s.windows;
        out->T = s.T;
        out->trained = s.m.cfg.seq_len;
        out->cache_bytes = r.cache_bytes;
        out->pos_sum = by_position ? r.pos_sum : NULL;
    }
    if (rc != 0 || !by_position) free(r.pos_sum);   /* through the cache sums it anyway */
    al_score_close(&s);
    return rc;
}

int al_cmd_score(int argc, char **argv)
{
    score_args o = {.kv_dtype = -1};
    al_score_in s;
    al_err e;
    int rc = al_cli_parse(&score_spec, argc, argv, &o);
    if (rc != AL_CLI_GO) return rc;
    if ((rc = al_cli_load_plugins(&o.o))) return rc;   /* the checkpoint may name its variant */
    if (al_score_open(o.ckpt, o.file, o.seq_len, &s, &e) != 0) {
        al_score_close(&s);
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    }
    if (check_args(&o, &s, &e) != 0) {
        al_score_close(&s);
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    }
    if (o.passkey) {
        rc = al_score_passkey(&s, &o.grid, stdout, o.out, &e);
        al_score_close(&s);
        return rc ? al_cli_fail(AL_EXIT_INPUT, e.msg) : 0;
    }
    tok_result r = {0};
    double loss = 0;
    rc = run_score(&o, &s, &r, &loss, &e);
    if (rc == 0 && o.by_position) {
        int N = (int)(o.buckets ? o.buckets : s.T < 16 ? s.T : 16);
        rc = al_score_write_by_position(o.out, r.pos_sum, s.windows, s.T, N,
                                        s.m.cfg.seq_len, &e);
    }
    free(r.pos_sum);
    if (rc != 0) {
        al_score_close(&s);
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    }
    if (o.json) {
        print_json(&o, &s, loss, &r);
    } else {
        char variant[256];
        al_sweep_stack_label(variant, sizeof variant, &s.m.cfg, "/");
        printf("checkpoint=%s step=%ld variant=%s seq_len=%d windows=%ld", o.ckpt, s.step,
               variant, s.T, s.windows);
        if (r.dtype >= 0)
            printf(" through_cache=1 kv_dtype=%s kv_cache_bytes=%zu", al_kv_dtype_name(r.dtype),
                   r.cache_bytes);
        printf("\n");
        printf("loss=%.6f tokens=%ld%s\n", loss, s.windows * s.T,
               s.m.cfg.causal ? "" : " causal=false");
    }
    al_score_close(&s);
    return 0;
}
