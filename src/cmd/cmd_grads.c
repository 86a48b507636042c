/*
 * cmd_grads.c - `attnlab grads` (not listed by `attnlab --help`, documented
 * in the README): the loss and every gradient on the first windows of a
 * file, for the PyTorch parity test. Windows as in `attnlab score`.
 */
#include <stdio.h>
#include <stdlib.h>

#include "al_checkpoint.h"
#include "al_cli.h"
#include "al_safetensors.h"
#include "al_score.h"

#define GRADS_DEFAULT_BATCH 4

typedef struct grads_args {
    al_cli_opts o;   /* its --plugin files */
    const char *ckpt, *file, *out;
    long seq_len, batch, threads;
} grads_args;

static const al_opt grads_opts[] = {
    AL_ARG("CHECKPOINT", grads_args, ckpt, AL_OPT_REQUIRED, "a model.safetensors"),
    AL_ARG("FILE", grads_args, file, AL_OPT_REQUIRED, "the bytes to take windows from"),
    {.name = "--out", .kind = AL_OPT_PATH, .meta = "GRADS.safetensors",
     AL_CLI_AT(grads_args, out), .flags = AL_OPT_REQUIRED,
     .help = "where the gradients go"},
    AL_LONG("--seq-len", "T", 1, 1L << 24, grads_args, seq_len,
            "window length in tokens (default: the checkpoint's seq_len)"),
    AL_LONG("--batch", "B", 1, 1L << 24, grads_args, batch, "windows (default 4)"),
    AL_LONG("--threads", "N", 1, 1L << 24, grads_args, threads,
            "BLAS threads (default: all cores)"),
    AL_CLI_PLUGIN(grads_args, 0),
    {0},
};

static const al_cli_spec grads_spec = {
    "grads", grads_opts,
    "For testing against other implementations: the mean cross-entropy over the\n"
    "first B windows of FILE (default 4; windows as in 'attnlab score') and its\n"
    "gradient with respect to every parameter, written to GRADS.safetensors under\n"
    "the parameters' names (F32), with metadata attnlab.loss, attnlab.windows,\n"
    "attnlab.seq_len and attnlab.config. The last line is loss=... tokens=...\n",
};

static int write_grads(const char *path, const al_score_in *s, int B, double loss, al_err *e)
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
    grads_args o = {0};
    al_score_in s;
    al_err e;
    int rc = al_cli_parse(&grads_spec, argc, argv, &o);
    if (rc != AL_CLI_GO) return rc;
    if ((rc = al_cli_load_plugins(&o.o))) return rc;   /* the checkpoint may name its variant */
    if (al_score_open(o.ckpt, o.file, o.seq_len, &s, &e) != 0) {
        al_score_close(&s);
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    }
    int B = (int)(o.batch ? o.batch : GRADS_DEFAULT_BATCH);
    B = B < s.windows ? B : (int)s.windows;
    if (al_score_prepare(&s, o.threads, B, &e) != 0) {
        al_score_close(&s);
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    }
    al_score_fill(&s, 0, B);
    double loss = al_model_forward(&s.m, s.in, s.tgt, NULL, B, s.T);
    al_model_backward(&s.m);
    rc = write_grads(o.out, &s, B, loss, &e);
    if (rc == 0) printf("loss=%.9g tokens=%d\n", loss, B * s.T);
    al_score_close(&s);
    return rc == 0 ? 0 : al_cli_fail(AL_EXIT_RUNTIME, e.msg);
}
