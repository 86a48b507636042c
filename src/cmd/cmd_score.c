/*
 * cmd_score.c - `attnlab score`: the mean next-token cross-entropy of a
 * checkpoint over the bytes of a file; and `attnlab grads` (not listed by
 * --help, documented in the README), which writes the loss and every
 * gradient on the first windows for the PyTorch parity test.
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
#include "al_parallel.h"
#include "al_plugin.h"
#include "al_safetensors.h"

/* Activation floats a batch may take before it is split further (~256 MB). */
#define SCORE_BUDGET_FLOATS (64L << 20)
#define SCORE_MAX_BATCH 64
#define GRADS_DEFAULT_BATCH 4

typedef struct score_opts {
    const char *ckpt, *file, *out;
    long seq_len, batch, threads;
    int json, help;
} score_opts;

/* What both commands read: the model, the file's bytes, the windows. */
typedef struct score_in {
    al_model m;
    long step;
    char *bytes;
    size_t n;
    int T;
    long windows;
    int *in, *tgt;
} score_in;

/* ------------------------------------------------------------ arguments */

static int num_opt(const char *cmd, const char *name, const char *v, long *out)
{
    char msg[300];
    if (al_cli_parse_long(v, 1, 1L << 24, out) == 0) return 0;
    snprintf(msg, sizeof msg, "%s: %s wants a positive integer, got '%.100s'", cmd, name, v);
    return al_cli_fail(AL_EXIT_INPUT, msg);
}

/* A checkpoint of a plugin variant needs the plugin before it loads. */
static int load_plugin(const char *path)
{
    al_err e;
    return al_plugin_load(path, &e) == 0 ? 0 : al_cli_fail(AL_EXIT_INPUT, e.msg);
}

/* CHECKPOINT FILE [--seq-len T] [--batch B] [--threads N] [--json | --out PATH] */
static int parse_opts(int argc, char **argv, const char *cmd, score_opts *o)
{
    char msg[400];
    memset(o, 0, sizeof *o);
    int grads = strcmp(cmd, "grads") == 0, rc = 0;
    for (int i = 0; i < argc && !rc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) o->help = 1;
        else if (!strcmp(a, "--seq-len") && v) rc = num_opt(cmd, a, argv[++i], &o->seq_len);
        else if (!strcmp(a, "--batch") && v) rc = num_opt(cmd, a, argv[++i], &o->batch);
        else if (!strcmp(a, "--threads") && v) rc = num_opt(cmd, a, argv[++i], &o->threads);
        else if (!strcmp(a, "--plugin") && v) rc = load_plugin(argv[++i]);
        else if (!strcmp(a, "--json") && !grads) o->json = 1;
        else if (!strcmp(a, "--out") && v && grads) o->out = argv[++i];
        else if (a[0] == '-' && a[1]) {
            snprintf(msg, sizeof msg, "%s: unknown or incomplete option '%.100s' (see 'attnlab "
                     "%s --help')", cmd, a, cmd);
            return al_cli_fail(AL_EXIT_INPUT, msg);
        } else if (!o->ckpt || !o->file) {
            *(o->ckpt ? &o->file : &o->ckpt) = a;
        } else {
            snprintf(msg, sizeof msg, "%s: unexpected argument '%.100s'", cmd, a);
            return al_cli_fail(AL_EXIT_INPUT, msg);
        }
    }
    if (rc || o->help) return rc;
    if (!o->file || (grads && !o->out)) {
        snprintf(msg, sizeof msg, "%s: wants CHECKPOINT FILE%s (see 'attnlab %s --help')", cmd,
                 grads ? " --out GRADS" : "", cmd);
        return al_cli_fail(AL_EXIT_INPUT, msg);
    }
    return 0;
}

/* ------------------------------------------------------------ inputs */

static void close_inputs(score_in *s)
{
    al_model_free(&s->m);
    free(s->bytes);
    free(s->in);
    free(s->tgt);
}

static int open_inputs(const score_opts *o, score_in *s, al_err *e)
{
    memset(s, 0, sizeof *s);
    if (al_checkpoint_load(o->ckpt, &s->m, &s->step, e) != 0) return -1;
    if (al_read_file(o->file, &s->bytes, &s->n, e) != 0) return -1;
    s->T = o->seq_len ? (int)o->seq_len : s->m.cfg.seq_len;
    s->windows = s->n > 0 ? (long)((s->n - 1) / (size_t)s->T) : 0;
    if (s->windows == 0)
        return al_errf(e, "%s: too short: %zu bytes, one window of %d tokens needs %d", o->file,
                       s->n, s->T, s->T + 1);
    size_t used = (size_t)s->windows * s->T + 1;
    for (size_t i = 0; i < used; i++)
        if ((unsigned char)s->bytes[i] >= (unsigned)s->m.cfg.vocab_size)
            return al_errf(e, "%s: byte %u at offset %zu is outside the checkpoint's "
                           "vocabulary (%d)", o->file, (unsigned char)s->bytes[i], i,
                           s->m.cfg.vocab_size);
    return 0;
}

/* Activation floats one window of T tokens takes (as al_model_reserve
 * counts them), to choose how many windows go in one forward pass. */
static size_t window_floats(const al_model *m, int T)
{
    const al_model_config *c = &m->cfg;
    size_t D = c->d_model, F = m->d_ff, V = c->vocab_size, t = (size_t)T;
    return c->n_layer * (4 * t * D + 2 * t + 2 * t * F + c->attn->act_floats(&m->ashape, 1, T)) +
           t * (5 * D + 2 + V + 2 * F) + c->attn->scratch_floats(&m->ashape, 1, T);
}

static long batch_for(const al_model *m, int T, long windows, long want)
{
    size_t per = window_floats(m, T);
    long b = want ? want : (long)(SCORE_BUDGET_FLOATS / (per ? per : 1));
    if (!want && b > SCORE_MAX_BATCH) b = SCORE_MAX_BATCH;
    return b < 1 ? 1 : b > windows ? windows : b;
}

/* Windows w0 .. w0 + B - 1 into s->in, s->tgt. */
static void fill_batch(score_in *s, long w0, int B)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < s->T; t++) {
            size_t at = (size_t)(w0 + b) * s->T + t;
            s->in[b * s->T + t] = (unsigned char)s->bytes[at];
            s->tgt[b * s->T + t] = (unsigned char)s->bytes[at + 1];
        }
}

/* Threads, and activations for B windows unless they cannot fit in memory
 * (a huge --seq-len or --batch is an error, not an abort). */
static int prepare(const score_opts *o, score_in *s, int B, al_err *e)
{
    long threads = o->threads ? o->threads : sysconf(_SC_NPROCESSORS_ONLN);
    al_parallel_set_threads((int)threads);
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

static const char score_help[] =
    "usage: attnlab score CHECKPOINT FILE [--seq-len T] [--batch B] [--threads N] [--json]\n"
    "                     [--plugin PATH ...]\n"
    "\n"
    "Mean next-token cross-entropy of the model in CHECKPOINT (a model.safetensors)\n"
    "over the bytes of FILE. Windows start at 0, T, 2T, ...; window j feeds bytes\n"
    "[jT, jT+T) and predicts [jT+1, jT+T+1); a window that does not fit whole is\n"
    "dropped. T defaults to the checkpoint's seq_len and may exceed it (RoPE\n"
    "extrapolates). --batch sets the windows per forward pass (default: as many\n"
    "as fit about 256 MB of activations, at most 64); --threads the BLAS threads\n"
    "(default: all cores). The last line is\n"
    "  loss=<nats per byte> tokens=<count>\n"
    "(with causal=false appended for a non-causal model); --json prints one JSON\n"
    "object instead.\n";

static double score_all(score_in *s, int B)
{
    double sum = 0.0;
    for (long w = 0; w < s->windows; w += B) {
        int b = (int)(s->windows - w < B ? s->windows - w : B);
        fill_batch(s, w, b);
        sum += al_model_forward(&s->m, s->in, s->tgt, NULL, b, s->T) * b * s->T;
        al_progress_line("score: window %ld/%ld", w + b, s->windows);
    }
    al_progress_end();
    return sum / ((double)s->windows * s->T);
}

static void print_json(const score_opts *o, const score_in *s, double loss)
{
    json_t *j = json_pack("{s:s, s:s, s:s, s:b, s:I, s:i, s:I, s:I, s:f}", "checkpoint",
                          o->ckpt, "file", o->file, "variant", s->m.cfg.variant, "causal",
                          s->m.cfg.causal, "step", (json_int_t)s->step, "seq_len", s->T,
                          "windows", (json_int_t)s->windows, "tokens",
                          (json_int_t)s->windows * s->T, "loss", loss);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    AL_ASSERT(text != NULL);
    printf("%s\n", text);
    free(text);
    json_decref(j);
}

int al_cmd_score(int argc, char **argv)
{
    score_opts o;
    score_in s;
    al_err e;
    int rc = parse_opts(argc, argv, "score", &o);
    if (rc || o.help) return o.help ? (fputs(score_help, stdout), 0) : rc;
    if (open_inputs(&o, &s, &e) != 0) {
        close_inputs(&s);
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    }
    int B = (int)batch_for(&s.m, s.T, s.windows, o.batch);
    if (prepare(&o, &s, B, &e) != 0) {
        close_inputs(&s);
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    }
    double loss = score_all(&s, B);
    if (o.json) {
        print_json(&o, &s, loss);
    } else {
        printf("checkpoint=%s step=%ld variant=%s seq_len=%d windows=%ld\n", o.ckpt, s.step,
               s.m.cfg.variant, s.T, s.windows);
        printf("loss=%.6f tokens=%ld%s\n", loss, s.windows * s.T,
               s.m.cfg.causal ? "" : " causal=false");
    }
    close_inputs(&s);
    return 0;
}

/* ------------------------------------------------------------ grads */

static const char grads_help[] =
    "usage: attnlab grads CHECKPOINT FILE --out GRADS.safetensors [--seq-len T]\n"
    "                     [--batch B] [--threads N]\n"
    "\n"
    "For testing against other implementations: the mean cross-entropy over the\n"
    "first B windows of FILE (default 4; windows as in 'attnlab score') and its\n"
    "gradient with respect to every parameter, written to GRADS.safetensors under\n"
    "the parameters' names (F32), with metadata attnlab.loss, attnlab.windows,\n"
    "attnlab.seq_len and attnlab.config. The last line is loss=... tokens=...\n";

static int write_grads(const char *path, const score_in *s, int B, double loss, al_err *e)
{
    const al_model *m = &s->m;
    al_st_out *t = al_calloc((size_t)m->n_tensors, sizeof *t);
    for (int i = 0; i < m->n_tensors; i++) {
        const al_tensor *x = &m->tensors[i];
        t[i] = (al_st_out){x->name, AL_ST_F32, x->ndim, {x->shape[0], x->shape[1]},
                           m->grads + x->offset};
    }
    char lbuf[40], wbuf[24], tbuf[24], *cfg = al_checkpoint_config_json(m);
    snprintf(lbuf, sizeof lbuf, "%.17g", loss);
    snprintf(wbuf, sizeof wbuf, "%d", B);
    snprintf(tbuf, sizeof tbuf, "%d", s->T);
    const char *meta[] = {"attnlab.loss", lbuf, "attnlab.windows", wbuf, "attnlab.seq_len",
                          tbuf, "attnlab.config", cfg};
    int rc = al_st_write(path, t, m->n_tensors, meta, 4, e);
    free(cfg);
    free(t);
    return rc;
}

int al_cmd_grads(int argc, char **argv)
{
    score_opts o;
    score_in s;
    al_err e;
    int rc = parse_opts(argc, argv, "grads", &o);
    if (rc || o.help) return o.help ? (fputs(grads_help, stdout), 0) : rc;
    if (open_inputs(&o, &s, &e) != 0) {
        close_inputs(&s);
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    }
    int B = (int)(o.batch ? o.batch : GRADS_DEFAULT_BATCH);
    B = B < s.windows ? B : (int)s.windows;
    if (prepare(&o, &s, B, &e) != 0) {
        close_inputs(&s);
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    }
    fill_batch(&s, 0, B);
    double loss = al_model_forward(&s.m, s.in, s.tgt, NULL, B, s.T);
    al_model_backward(&s.m);
    rc = write_grads(o.out, &s, B, loss, &e);
    if (rc == 0) printf("loss=%.9g tokens=%d\n", loss, B * s.T);
    close_inputs(&s);
    return rc == 0 ? 0 : al_cli_fail(AL_EXIT_RUNTIME, e.msg);
}
