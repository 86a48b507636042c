/*
 * cmd_train.c - `attnlab train` and `attnlab kv`.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_cli.h"
#include "al_config_io.h"
#include "al_decode.h"
#include "al_data.h"
#include "al_mpi.h"
#include "al_model.h"
#include "al_train.h"

/* ------------------------------------------------------------ train */

static const char train_help[] =
    "usage: attnlab train CONFIG.yaml [--set key.path=value ...] [--out DIR]\n"
    "                     [--stop-after N] [--init-from CHECKPOINT]\n"
    "       attnlab train [CONFIG.yaml] --resume DIR [--set ...] [--stop-after N]\n"
    "\n"
    "Train one model as CONFIG describes. Writes DIR/config.yaml (resolved,\n"
    "defaults included), DIR/metrics.csv (step,train_loss,val_loss,\n"
    "val_accuracy,lr,tokens_per_s,elapsed_s), and DIR/model.safetensors with\n"
    "DIR/train_state.safetensors at the end and every train.checkpoint_every\n"
    "steps. DIR defaults to results/train.\n"
    "--stop-after N stops after N steps with a checkpoint, as if interrupted.\n"
    "--init-from CHECKPOINT (train.init_from) starts from that checkpoint's\n"
    "weights instead of a random init, with a fresh optimizer and schedule;\n"
    "every tensor of CONFIG's model must be there in the same shape (each\n"
    "mismatch is named); with --set train.init_convert=mean|first|random|svd it is\n"
    "converted to CONFIG's attention first (as `attnlab convert`).\n"
    "--resume DIR continues the run saved in DIR bit-identically to one never\n"
    "interrupted (same thread count). Without CONFIG it reads DIR/config.yaml;\n"
    "a config that differs from the saved run (other than\n"
    "train.checkpoint_every) is an error naming the key, and so is a data\n"
    "file, plugin file or attnlab interface that changed since the run began.\n"
    "Progress goes to standard error: a live line on a terminal, one plain\n"
    "line per evaluation otherwise. The last line on standard output is\n"
    "  val_loss=<nats/token> train_loss=... tokens_per_s=... wall_s=...\n"
    "Exit status: 0 done, 1 a write failed while training (a full disk), 2 bad\n"
    "input, 3 the loss diverged (NaN/Inf).\n"
    "\n"
    "Data-parallel: 'mpirun -np N attnlab train CONFIG' (or srun --mpi=pmix)\n"
    "splits each batch of train.batch_size (divisible by N) across N ranks and\n"
    "trains exactly as one process would; rank 0 writes DIR and the output.\n";

static const char *const train_extra[] = {"--resume", "--stop-after", "--init-from", NULL};

/* Whether the arguments name a CONFIG, skipping the values of the options
 * that take one (al_cli_parse's and train_extra). */
static int has_config_arg(int argc, char **argv)
{
    static const char *const valued[] = {"--set", "--plugin", "--out", "--context",
                                         "--resume", "--stop-after", "--init-from", NULL};
    for (int i = 0; i < argc; i++) {
        if (argv[i][0] != '-' || !argv[i][1]) return 1;
        for (int k = 0; valued[k]; k++)
            if (!strcmp(argv[i], valued[k])) {
                i++;
                break;
            }
    }
    return 0;
}

/* `train --resume DIR` without CONFIG reads DIR/config.yaml: parse the
 * arguments with that path appended. */
static int parse_train_args(int argc, char **argv, al_cli_opts *o, const char **xv,
                            char *cfg, size_t n)
{
    const char *dir = NULL;
    for (int i = 0; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--resume")) dir = argv[i + 1];
    if (!dir || has_config_arg(argc, argv))
        return al_cli_parse(argc, argv, o, "train", train_extra, xv);
    char **args = al_calloc((size_t)argc + 2, sizeof *args);
    memcpy(args, argv, (size_t)argc * sizeof *args);
    snprintf(cfg, n, "%s/config.yaml", dir);
    args[argc] = cfg;
    int rc = al_cli_parse(argc + 1, args, o, "train", train_extra, xv);
    free(args);
    return rc;
}

/* --resume DIR and --stop-after N into the training options. */
static int resume_opts(const al_cli_opts *o, const char **xv, al_train_opts *to)
{
    long n;
    char msg[600];
    if (xv[1] && al_cli_parse_long(xv[1], 1, INT_MAX, &n) != 0) {
        snprintf(msg, sizeof msg, "train: --stop-after wants a positive integer, got '%.200s'", xv[1]);
        return al_cli_fail(AL_EXIT_INPUT, msg);
    }
    if (xv[1]) to->stop_after = (int)n;
    if (!xv[0]) return 0;
    if (o->out && strcmp(o->out, xv[0]) != 0) {
        snprintf(msg, sizeof msg, "train: --out %.200s and --resume %.200s name different "
                 "directories", o->out, xv[0]);
        return al_cli_fail(AL_EXIT_INPUT, msg);
    }
    to->outdir = xv[0];
    to->resume = 1;
    return 0;
}

/* Errors under MPI: al_mpi_agree leaves a message only where it should be
 * printed, so that a failure every rank shares is printed once. A failure
 * once training has begun (a full disk) is a run-time one. */
static int train_fail(const al_err *e, int runtime)
{
    if (e->msg[0]) fprintf(stderr, "%s\n", e->msg);
    return runtime ? AL_EXIT_RUNTIME : AL_EXIT_INPUT;
}

static int print_result(const al_config *c, const al_train_opts *to, const al_train_result *r)
{
    const char *mask = c->model.causal ? "" : " causal=false";
    if (r->status == AL_TRAIN_STOPPED) {
        printf("status=stopped steps=%d checkpoint=%s/model.safetensors%s\n", r->steps_done,
               to->outdir, mask);
        return 0;
    }
    if (r->status == AL_TRAIN_DIVERGED) {
        printf("status=diverged reason=\"%s\" steps=%d%s\n", r->reason, r->steps_done, mask);
        return AL_EXIT_DIVERGED;
    }
    printf("val_loss=%.4f best_val_loss=%.4f train_loss=%.4f", r->val_loss,
           r->best_val_loss, r->final_train_loss);
    if (!isnan(r->val_accuracy)) printf(" val_accuracy=%.4f", r->val_accuracy);
    if (!isnan(r->test_loss)) printf(" test_loss=%.4f", r->test_loss);
    if (!isnan(r->test_accuracy)) printf(" test_accuracy=%.4f", r->test_accuracy);
    printf(" params=%zu tokens_per_s=%.0f wall_s=%.1f variant=%s%s", r->params,
           r->tokens_per_s, r->wall_s, c->model.variant, mask);
    if (al_mpi_size() > 1) printf(" ranks=%d", al_mpi_size());
    putchar('\n');
    return 0;
}

/* Every rank of a data-parallel run goes through here in step. */
static int train_ranked(const al_cli_opts *o, const char **xv)
{
    al_config c;
    al_err e = {""};
    int rc = al_cli_load_config(o, &c);   /* prints its own error */
    if (al_mpi_agree(rc != 0, &e) != 0) {
        train_fail(&e, 0);
        return rc ? rc : AL_EXIT_INPUT;
    }
    if (xv[2]) {   /* --init-from: the same as train.init_from */
        if (strlen(xv[2]) >= sizeof c.train.init_from)
            return al_cli_fail(AL_EXIT_INPUT, "train: --init-from: the path is too long");
        snprintf(c.train.init_from, sizeof c.train.init_from, "%s", xv[2]);
    }
    al_train_opts to = {.outdir = o->out ? o->out : "results/train", .log_lines = 1};
    if ((rc = resume_opts(o, xv, &to))) return rc;
    al_train_result r;
    if (al_train(&c, &to, &r, &e) != 0) return train_fail(&e, r.runtime_error);
    if (al_mpi_rank() != 0) return r.status == AL_TRAIN_DIVERGED ? AL_EXIT_DIVERGED : 0;
    return print_result(&c, &to, &r);
}

int al_cmd_train(int argc, char **argv)
{
    al_cli_opts o;
    const char *xv[3];
    char cfgpath[4200];
    int rc = parse_train_args(argc, argv, &o, xv, cfgpath, sizeof cfgpath);
    if (rc) return rc;
    if (o.help) return fputs(train_help, stdout), 0;
    al_err e;
    if (al_mpi_init(&e) != 0) return al_cli_fail(AL_EXIT_INPUT, e.msg);
    rc = train_ranked(&o, xv);
    al_mpi_finalize();
    return rc;
}

/* ------------------------------------------------------------ kv */

static const char kv_help[] =
    "usage: attnlab kv CONFIG.yaml [--set key.path=value ...] [--context N]\n"
    "\n"
    "Print the model's shape (after model.match_params), its parameter count\n"
    "(and the count it was matched to), and the KV-cache size per token, summed\n"
    "over all layers, at f32, bf16 and f16, and at the configured model.kv_dtype;\n"
    "with --context N also for N tokens. `attnlab generate --stats` measures\n"
    "the same figure from the caches it allocates.\n";

int al_cmd_kv(int argc, char **argv)
{
    al_cli_opts o;
    int rc = al_cli_parse(argc, argv, &o, "kv", NULL, NULL);
    if (rc) return rc;
    if (o.help) return fputs(kv_help, stdout), 0;
    al_config c;
    if ((rc = al_cli_load_config(&o, &c))) return rc;
    al_err e;
    if (al_train_resolve(&c, al_data_vocab(&c.data), &e) != 0)
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    size_t params = al_model_param_count(&c.model, &e);
    if (!params) return al_cli_fail(AL_EXIT_INPUT, e.msg);
    size_t b[AL_KV_NDTYPES];
    for (int dt = 0; dt < AL_KV_NDTYPES; dt++) b[dt] = al_kv_bytes_per_token(&c.model, dt);
    int dt = al_kv_dtype_parse(c.model.kv_dtype);
    AL_ASSERT(dt >= 0);   /* the config's own check allows only these */
    const al_model_config *m = &c.model;
    printf("variant: %s\n", m->variant);
    printf("shape: n_layer=%d d_model=%d n_head=%d d_head=%d d_ff=%d vocab_size=%d\n",
           m->n_layer, m->d_model, m->n_head, m->d_head, m->d_ff, m->vocab_size);
    printf("parameters: %zu\n", params);
    if (m->match.by != AL_MATCH_NONE)
        printf("match_params: to=%s by=%s params_to=%zu (from n_layer=%d d_ff=%d)\n",
               m->match.variant, m->match.by == AL_MATCH_D_FF ? "d_ff" : "n_layer",
               m->match.params_to, m->match.base_n_layer, m->match.base_d_ff);
    printf("kv_elements_per_token: %zu\n", al_model_kv_elems_per_token(&c.model));
    printf("kv_bytes_per_token: f32=%zu bf16=%zu f16=%zu\n", b[AL_KV_F32], b[AL_KV_BF16],
           b[AL_KV_F16]);
    printf("kv_dtype: %s kv_bytes_per_token=%zu\n", c.model.kv_dtype, b[dt]);
    if (o.context)
        printf("kv_bytes_at_context_%ld: f32=%zu bf16=%zu f16=%zu\n", o.context,
               b[AL_KV_F32] * o.context, b[AL_KV_BF16] * o.context, b[AL_KV_F16] * o.context);
    return 0;
}


/* ------------------------------------------------------------ keys */

static const char keys_help[] =
    "usage: attnlab keys [--plugin PATH ...]\n"
    "\n"
    "Print every experiment-file key with its default and meaning, as a markdown\n"
    "table. --plugin loads a plugin first, so that the settings its variants take\n"
    "under model.attention are listed with the built-in variants' settings.\n";

int al_cmd_keys(int argc, char **argv)
{
    al_cli_opts o;
    int rc = al_cli_plugins_only("keys", keys_help, argc, argv, &o);
    if (rc >= 0) return rc;
    puts("| key | default | meaning |\n| --- | --- | --- |");
    al_config_print_schema(stdout);   /* plugins' settings among model.attention's */
    return 0;
}
