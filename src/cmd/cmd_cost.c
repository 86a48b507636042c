/*
 * cmd_cost.c - `attnlab cost`: a config's FLOPs and bytes per token, per
 * layer and summed (al_cost.h; docs/costs.md), and with --measure the
 * FLOPs the product layer counts when the model runs.
 */
#include <stdio.h>

#include "al_cli.h"
#include "al_cost.h"
#include "al_data.h"
#include "al_kvcache.h"
#include "al_parallel.h"
#include "al_sweep_spec.h"
#include "al_train.h"

typedef struct cost_args {
    al_cli_opts o;
    long batch;
    int dtype;   /* -1: CONFIG's model.kv_dtype */
    int measure;
} cost_args;

static const al_opt cost_opts[] = {
    AL_ARG("CONFIG.yaml", cost_args, o.file, AL_OPT_REQUIRED, "the experiment file"),
    AL_CLI_SET(cost_args, 0),
    AL_CLI_PLUGIN(cost_args, 0),
    AL_CLI_CONTEXT(cost_args, 0, "prefill and decode at N tokens (default: model.seq_len)"),
    AL_LONG("--batch", "B", 1, 1 << 20, cost_args, batch,
            "sequences decoded together, reading the weights once per step (default 1)"),
    AL_FUNC("--kv-dtype", "D", al_cli_parse_kv_dtype, "f32, bf16, f16, int8 or int4", cost_args,
            dtype, "cache storage (default: CONFIG's model.kv_dtype)"),
    AL_FLAG("--measure", cost_args, measure,
            "also run one training step, one prefill and one decode step at N in the\n"
            "product layer's counting mode and print the FLOPs counted"),
    {.name = "--out", .kind = AL_OPT_PATH, .meta = "DIR", AL_CLI_AT(cost_args, o.out),
     .flags = AL_OPT_IGNORED, .help = "unused by cost"},
    {0},
};

static const al_cli_spec cost_spec = {
    "cost", cost_opts,
    "Print what the model costs per token, one `key: value` per line: per layer\n"
    "(lines beginning layer_), then the shared parts (the tied head; the\n"
    "embedding lookup, norms and loss run no matrix product) and the sums:\n"
    "train_flops_per_token (forward and backward at model.seq_len),\n"
    "prefill_flops_per_token (a prefill of N tokens), decode_flops_per_token and\n"
    "decode_bytes_per_token (one decode step at N: cache rows read at their\n"
    "storage dtype plus every weight, shared by the --batch sequences),\n"
    "kv_bytes_at_context (the cache held at N) and arithmetic_intensity (decode\n"
    "FLOPs over bytes read). Every matrix product counts 2*m*n*k; attention's\n"
    "as its kernels execute it (docs/costs.md). A figure the core had to\n"
    "estimate (a plugin without cost members whose products it cannot see) is\n"
    "marked estimated.\n",
};

static void print_layer(int l, const al_layer_cost *L)
{
    printf("layer_%d: consumer=%d train_flops_per_token=%.0f prefill_flops_per_token=%.0f "
           "decode_flops_per_token=%.0f decode_cache_bytes=%.0f weight_bytes=%.0f "
           "kv_bytes_at_context=%.0f rows_read=%d%s\n", l, L->consumer, L->train_flops,
           L->prefill_flops, L->decode_flops, L->decode_cache_bytes, L->weight_bytes,
           L->kv_bytes, L->rows_read, L->estimated ? " estimated=1" : "");
}

static void print_cost(const al_config *c, const al_model_cost *m)
{
    char variant[256];
    al_sweep_stack_label(variant, sizeof variant, &c->model, "/");
    printf("variant: %s\n", variant);
    printf("parameters: %zu\n", m->n_params);
    printf("seq_len: %d\ncontext: %d\nbatch: %d\nkv_dtype: %s\n", c->model.seq_len, m->o.context,
           m->o.batch, al_kv_dtype_name(m->o.kv_dtype));
    for (int l = 0; l < m->n_kept; l++) print_layer(l, &m->layer[l]);
    if (m->n_layer > m->n_kept)
        printf("layers_%d_to_%d: as the cycle above\n", m->n_kept, m->n_layer - 1);
    printf("head_train_flops_per_token: %.0f\nhead_prefill_flops_per_token: %.0f\n"
           "head_decode_flops_per_token: %.0f\nshared_weight_bytes: %.0f\n",
           m->head_train_flops, m->head_prefill_flops, m->head_decode_flops,
           m->shared_weight_bytes);
    printf("train_flops_per_token: %.0f\n", m->train_flops_per_token);
    printf("prefill_flops_per_token: %.0f\n", m->prefill_flops_per_token);
    printf("decode_flops_per_token: %.0f\n", m->decode_flops_per_token);
    printf("decode_bytes_per_token: %.0f\n", m->decode_bytes_per_token);
    printf("kv_bytes_at_context: %.0f\n", m->kv_bytes_at_context);
    printf("arithmetic_intensity: %.6g\n", m->arithmetic_intensity);
    printf("estimated: %d\n", m->estimated);
}

/* --measure: the model built from the config (its weights drawn with
 * train.seed) and run once in counting mode. */
static int measure(const al_config *c, const al_cost_opts *o)
{
    al_model m;
    al_err e;
    al_cost_counted k;
    if (al_model_init(&m, &c->model, &e) != 0) return al_cli_fail(AL_EXIT_INPUT, e.msg);
    al_model_init_weights(&m, c->train.seed);
    int rc = al_cost_measure(&m, o, &k, &e);
    al_model_free(&m);
    if (rc != 0) return al_cli_fail(AL_EXIT_INPUT, e.msg);
    printf("counted_train_flops_per_token: %.0f\n", k.train_flops_per_token);
    printf("counted_prefill_flops_per_token: %.0f\n", k.prefill_flops_per_token);
    printf("counted_decode_flops_per_token: %.0f\n", k.decode_flops_per_token);
    return 0;
}

int al_cmd_cost(int argc, char **argv)
{
    cost_args a = {.batch = 1, .dtype = -1};
    int rc = al_cli_parse(&cost_spec, argc, argv, &a);
    if (rc != AL_CLI_GO) return rc;
    al_config c;
    if ((rc = al_cli_load_config(&a.o, &c))) return rc;
    al_err e;
    if (al_train_resolve(&c, al_data_vocab(&c.data), &e) != 0)
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    al_cost_opts o = {(int)a.o.context, (int)a.batch,
                      a.dtype >= 0 ? a.dtype : al_kv_dtype_parse(c.model.kv_dtype)};
    al_model_cost m;
    if (al_cost_of_model(&c.model, &o, &m, &e) != 0) return al_cli_fail(AL_EXIT_INPUT, e.msg);
    print_cost(&c, &m);
    fflush(stdout);
    return a.measure ? measure(&c, &m.o) : 0;
}
