/*
 * cmd_train.c - `attnlab train`: one model from an experiment file.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "al_cli.h"
#include "al_config_io.h"
#include "al_guard.h"
#include "al_mpi.h"
#include "al_sweep_spec.h"
#include "al_train.h"

typedef struct train_args {
    al_cli_opts o;
    const char *resume, *init_from;
    long stop_after;
    int force;
    char config[4200];   /* DIR/config.yaml for --resume DIR alone */
} train_args;

static const al_opt train_opts[] = {
    AL_ARG("CONFIG.yaml", train_args, o.file, 0,
           "the experiment file (default with --resume: DIR/config.yaml)"),
    AL_CLI_SET(train_args, 0),
    AL_CLI_PLUGIN(train_args, 0),
    AL_PATH("--out", "DIR", train_args, o.out, "where the run goes (default results/train)"),
    AL_LONG("--stop-after", "N", 1, INT_MAX, train_args, stop_after,
            "stop after N steps with a checkpoint, as if interrupted"),
    AL_PATH("--init-from", "CHECKPOINT", train_args, init_from,
            "start from this checkpoint's weights (train.init_from)"),
    AL_PATH("--resume", "DIR", train_args, resume,
            "continue the run saved in DIR bit-identically"),
    AL_FLAG("--force", train_args, force, "write the run into a --out DIR that is not empty, "
            "replacing the run there"),
    AL_CLI_CONTEXT(train_args, AL_OPT_IGNORED, "unused by train"),
    {0},
};

static const al_cli_spec train_spec = {
    "train", train_opts,
    "Train one model as CONFIG describes. Writes DIR/config.yaml (resolved,\n"
    "defaults included), DIR/metrics.csv (step,train_loss,val_loss,\n"
    "val_accuracy,lr,tokens_per_s,elapsed_s), and DIR/model.safetensors with\n"
    "DIR/train_state.safetensors at the end and every train.checkpoint_every\n"
    "steps.\n"
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
    "A run directory belongs to one run: --out DIR must be absent or empty\n"
    "(a run there is continued with --resume DIR; --force replaces it; a\n"
    "sweep's results directory and / are refused), and a second process\n"
    "writing DIR while this one runs is refused, naming this one's pid.\n"
    "SIGINT or SIGTERM stops the run (exit 130 or 143) leaving its last\n"
    "checkpoint, and says how to resume.\n"
    "Progress goes to standard error: a live line on a terminal, one plain\n"
    "line per evaluation otherwise. The last line on standard output is\n"
    "  val_loss=<nats/token> train_loss=... tokens_per_s=... wall_s=...\n"
    "Exit status: 0 done, 1 a write failed while training (a full disk or\n"
    "ulimit -f), 2 bad input, 3 the loss diverged (NaN/Inf), 130/143\n"
    "interrupted.\n"
    "\n"
    "Data-parallel: 'mpirun -np N attnlab train CONFIG' (or srun --mpi=pmix)\n"
    "splits each batch of train.batch_size (divisible by N) across N ranks and\n"
    "trains exactly as one process would; rank 0 writes DIR and the output.\n",
};

/* `train --resume DIR` without CONFIG reads DIR/config.yaml. */
static int parse_train_args(int argc, char **argv, train_args *a)
{
    int rc = al_cli_parse(&train_spec, argc, argv, a);
    if (rc != AL_CLI_GO || a->o.file) return rc;
    if (!a->resume) return al_cli_missing(&train_spec, "the CONFIG.yaml argument");
    snprintf(a->config, sizeof a->config, "%s/config.yaml", a->resume);
    a->o.file = a->config;
    return AL_CLI_GO;
}

/* A fresh run's --out: absent or empty, or --force (which al_train says
 * aloud once it holds the lock). Checked here for a clear early error, and
 * again by al_train with the lock held. */
static int claim_out(const train_args *a, al_train_opts *to)
{
    al_err e;
    to->claim = a->force ? AL_CLAIM_FORCE : AL_CLAIM_FRESH;
    int rc = al_train_claim(to->outdir, to->claim, &e);
    if (rc < 0) {
        if (al_mpi_rank() == 0) fprintf(stderr, "%s\n", e.msg);
        return AL_EXIT_INPUT;
    }
    al_signals_hint("nothing was saved yet; run the same command again");
    return 0;
}

/* A run interrupted before its first checkpoint left its config.yaml
 * (and perhaps metrics.csv) but nothing to resume from. */
static int no_checkpoint_yet(const char *dir)
{
    char path[AL_PATH_LEN + 32];
    struct stat st;
    snprintf(path, sizeof path, "%s/train_state.safetensors", dir);
    if (stat(path, &st) == 0 || errno != ENOENT) return 0;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (stat(path, &st) == 0 || errno != ENOENT) return 0;
    snprintf(path, sizeof path, "%s/config.yaml", dir);
    return stat(path, &st) == 0;
}

/* --resume DIR and --stop-after N into the training options. */
static int resume_opts(const train_args *a, al_train_opts *to)
{
    char msg[600];
    to->stop_after = (int)a->stop_after;
    if (!a->resume) return claim_out(a, to);
    if (a->o.out && strcmp(a->o.out, a->resume) != 0) {
        snprintf(msg, sizeof msg, "train: --out %.200s and --resume %.200s name different "
                 "directories", a->o.out, a->resume);
        return al_cli_fail(AL_EXIT_INPUT, msg);
    }
    to->outdir = a->resume;
    to->resume = !no_checkpoint_yet(a->resume);
    if (!to->resume) {   /* stopped before its first checkpoint: the same run from step 0 */
        to->claim = AL_CLAIM_FORCE;
        if (al_mpi_rank() == 0)
            fprintf(stderr, "attnlab: train: %s has no checkpoint yet; starting the run again "
                    "from step 0\n", a->resume);
    }
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
    char variant[256];
    al_sweep_stack_label(variant, sizeof variant, &c->model, "/");
    printf(" params=%zu tokens_per_s=%.0f wall_s=%.1f variant=%s%s", r->params,
           r->tokens_per_s, r->wall_s, variant, mask);
    if (al_mpi_size() > 1) printf(" ranks=%d", al_mpi_size());
    putchar('\n');
    return 0;
}

/* Every rank of a data-parallel run goes through here in step. */
static int train_ranked(const train_args *a)
{
    al_config c;
    al_err e = {""};
    int rc = al_cli_load_config(&a->o, &c);   /* prints its own error */
    if (al_mpi_agree(rc != 0, &e) != 0) {
        train_fail(&e, 0);
        return rc ? rc : AL_EXIT_INPUT;
    }
    /* the same as --set train.init_from: the working directory's */
    if (a->init_from && al_path_from(c.train.init_from, sizeof c.train.init_from, NULL,
                                     a->init_from) != 0)
        return al_cli_fail(AL_EXIT_INPUT, "train: --init-from: the path is too long");
    al_train_opts to = {.outdir = a->o.out ? a->o.out : "results/train", .log_lines = 1};
    if ((rc = resume_opts(a, &to))) return rc;
    char hint[AL_PATH_LEN + 64];
    snprintf(hint, sizeof hint, "resume with: attnlab train --resume %s", to.outdir);
    to.resume_hint = hint;
    al_train_result r;
    if (al_train(&c, &to, &r, &e) != 0) return train_fail(&e, r.runtime_error);
    if (al_mpi_rank() != 0) return r.status == AL_TRAIN_DIVERGED ? AL_EXIT_DIVERGED : 0;
    return print_result(&c, &to, &r);
}

int al_cmd_train(int argc, char **argv)
{
    train_args a = {0};
    int rc = parse_train_args(argc, argv, &a);
    if (rc != AL_CLI_GO) return rc;
    al_err e;
    if (al_mpi_init(&e) != 0) return al_cli_fail(AL_EXIT_INPUT, e.msg);
    rc = train_ranked(&a);
    /* What rank 0 printed (status=diverged) must be in the pipe before
     * MPI_Finalize's fence lets another rank exit: a rank that exits
     * non-zero makes mpirun tear the job down, and a line still in stdio's
     * buffer at that moment was lost (1 run in 5 on a loaded machine). */
    fflush(stdout);
    fflush(stderr);
    al_mpi_finalize();
    return rc;
}
