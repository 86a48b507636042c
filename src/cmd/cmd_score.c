/*
 * cmd_score.c - `attnlab score`: the mean next-token cross-entropy of a
 * checkpoint over the bytes of a file. Options in, one call of the scoring
 * library (src/score/al_score.h, which says how windows are cut), results
 * out.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_cli.h"
#include "al_decode.h"
#include "al_score.h"
#include "al_sweep_spec.h"

/* ------------------------------------------------------------ score */

typedef struct score_args {
    al_cli_opts o;   /* its --plugin files */
    const char *ckpt, *file, *out;
    long seq_len, batch, threads, buckets;
    int json, through_cache, by_position;
    int kv_dtype;    /* -1: model.kv_dtype */
    int passkey;
    al_passkey_grid grid;
    al_rope_scaling rope_scaling;   /* --rope-scaling; kind "" when not given */
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
    AL_FUNC("--rope-scaling", "KIND:F", al_cli_parse_rope_scaling, AL_CLI_ROPE_WANT, score_args,
            rope_scaling,
            "RoPE position scaling instead of the checkpoint's\n"
            "model.rope_scaling: linear, ntk or yarn by factor F\n"
            "(none: plain RoPE), from the checkpoint's seq_len\n"
            "(docs/rope.md)"),
    AL_CLI_PLUGIN(score_args, 0),
    {0},
};

static const al_cli_spec score_spec = {
    "score", score_opts,
    "Mean next-token cross-entropy of the model in CHECKPOINT (a model.safetensors)\n"
    "over the bytes of FILE. Windows start at 0, T, 2T, ...; window j feeds bytes\n"
    "[jT, jT+T) and predicts [jT+1, jT+T+1); a window that does not fit whole is\n"
    "dropped. T defaults to the checkpoint's seq_len and may exceed it (RoPE\n"
    "extrapolates, or scales with --rope-scaling). The last line is\n"
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

/* Bytes after the last whole window: no window of T tokens holds them as
 * targets, so they are not scored. */
static long left_out(const al_score_in *s)
{
    return (long)s->n - 1 - s->windows * s->T;
}

static void print_json(const score_args *o, const al_score_in *s, double loss,
                       const al_score_result *r)
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
    if (j) json_object_set_new(j, "left_out", json_integer((json_int_t)left_out(s)));
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    AL_ASSERT(text != NULL);
    printf("%s\n", text);
    free(text);
    json_decref(j);
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
    al_cli_set_rope_scaling(&s.m, &o.rope_scaling);
    if (o.passkey) {
        rc = al_score_passkey(&s, &o.grid, stdout, o.out, &e);
        al_score_close(&s);
        return rc ? al_cli_fail(AL_EXIT_INPUT, e.msg) : 0;
    }
    al_score_opts so = {.seq_len = s.T, .batch = o.batch, .threads = o.threads,
                        .through_cache = o.through_cache, .kv_dtype = o.kv_dtype,
                        .by_position = o.by_position};
    al_score_result r;
    rc = al_score_run(&s, &so, &r, &e);
    double loss = r.loss;
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
    /* before the result, so that the result stays the last line; --json
     * carries it as "left_out" */
    if (left_out(&s) > 0 && !o.json)
        fprintf(stderr, "score: the last %ld byte(s) of %s make no whole window of %d tokens "
                "and are not scored (a smaller --seq-len scores more of them)\n",
                left_out(&s), o.file, s.T);
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
        printf("loss=%.6f tokens=%ld%s", loss, s.windows * s.T,
               s.m.cfg.causal ? "" : " causal=false");
        if (left_out(&s) > 0) printf(" left_out=%ld", left_out(&s));
        printf("\n");
    }
    al_score_close(&s);
    return 0;
}
