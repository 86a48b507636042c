/*
 * cmd_train.c - `attnlab train` and `attnlab kv`.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "al_cli.h"
#include "al_decode.h"
#include "al_data.h"
#include "al_model.h"
#include "al_train.h"

/* ------------------------------------------------------------ train */

static const char train_help[] =
    "usage: attnlab train CONFIG.yaml [--set key.path=value ...] [--out DIR]\n"
    "\n"
    "Train one model as CONFIG describes. Writes DIR/config.yaml (resolved,\n"
    "defaults included) and DIR/metrics.csv (step,train_loss,val_loss,\n"
    "val_accuracy,lr,tokens_per_s,elapsed_s). DIR defaults to results/train.\n"
    "Progress goes to standard error: a live line on a terminal, one plain\n"
    "line per evaluation otherwise. The last line on standard output is\n"
    "  val_loss=<nats/token> train_loss=... tokens_per_s=... wall_s=...\n"
    "Exit status: 0 done, 2 bad input, 3 the loss diverged (NaN/Inf).\n";

int al_cmd_train(int argc, char **argv)
{
    al_cli_opts o;
    int rc = al_cli_parse(argc, argv, &o, "train", NULL, NULL);
    if (rc) return rc;
    if (o.help) return fputs(train_help, stdout), 0;
    al_config c;
    if ((rc = al_cli_load_config(&o, &c))) return rc;
    al_train_opts to = {.outdir = o.out ? o.out : "results/train", .log_lines = 1};
    al_train_result r;
    al_err e;
    if (al_train(&c, &to, &r, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return AL_EXIT_INPUT;
    }
    const char *mask = c.model.causal ? "" : " causal=false";
    if (r.status == AL_TRAIN_DIVERGED) {
        printf("status=diverged reason=\"%s\" steps=%d%s\n", r.reason, r.steps_done, mask);
        return AL_EXIT_DIVERGED;
    }
    printf("val_loss=%.4f best_val_loss=%.4f train_loss=%.4f", r.val_loss,
           r.best_val_loss, r.final_train_loss);
    if (!isnan(r.val_accuracy)) printf(" val_accuracy=%.4f", r.val_accuracy);
    printf(" params=%zu tokens_per_s=%.0f wall_s=%.1f variant=%s%s\n", r.params,
           r.tokens_per_s, r.wall_s, c.model.variant, mask);
    return 0;
}

/* ------------------------------------------------------------ kv */

static const char kv_help[] =
    "usage: attnlab kv CONFIG.yaml [--set key.path=value ...] [--context N]\n"
    "\n"
    "Print the parameter count and the KV-cache size per token, summed over\n"
    "all layers, at f32, bf16 and f16, and at the configured model.kv_dtype;\n"
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
    printf("variant: %s\n", c.model.variant);
    printf("parameters: %zu\n", params);
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

int al_cmd_keys(int argc, char **argv)
{
    if (argc > 0 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
        puts("usage: attnlab keys\n\nPrint every experiment-file key with its default and "
             "meaning, as a markdown table.");
        return 0;
    }
    if (argc > 0) return al_cli_fail(AL_EXIT_INPUT, "keys: takes no arguments");
    puts("| key | default | meaning |\n| --- | --- | --- |");
    al_config_print_schema(stdout);
    return 0;
}
