/*
 * cmd_kv.c - `attnlab kv`: a config's parameter count and KV-cache bytes
 * per token, without building the model.
 */
#include <stdio.h>

#include "al_cli.h"
#include "al_data.h"
#include "al_decode.h"
#include "al_model.h"
#include "al_sweep_spec.h"
#include "al_train.h"
#include "al_yaml.h"
#include "al_size.h"

typedef struct kv_args {
    al_cli_opts o;
} kv_args;

static const al_opt kv_opts[] = {
    AL_ARG("CONFIG.yaml", kv_args, o.file, AL_OPT_REQUIRED, "the experiment file"),
    AL_CLI_SET(kv_args, 0),
    AL_CLI_PLUGIN(kv_args, 0),
    AL_CLI_CONTEXT(kv_args, 0, "the cache at N tokens, per layer and summed (default: "
                   "model.seq_len)"),
    {.name = "--out", .kind = AL_OPT_PATH, .meta = "DIR", AL_CLI_AT(kv_args, o.out),
     .flags = AL_OPT_IGNORED, .help = "unused by kv"},
    {0},
};

static const al_cli_spec kv_spec = {
    "kv", kv_opts,
    "Print the model's shape (after model.match_params), its parameter count\n"
    "(and the count it was matched to), and the KV-cache size per token, summed\n"
    "over all layers, at f32, bf16 and f16, and at the configured model.kv_dtype;\n"
    "then the whole cache at a context of N tokens (--context, default the\n"
    "trained seq_len), per layer (its rows: a bounded layer such as `local`\n"
    "holds fewer rows than tokens; a model.kv_share consumer 0 bytes, kv_from naming\n"
    "the layer whose cache it reads; a state layer such as `linear` one row, its\n"
    "state, f32 at every dtype and context, marked storage=state) and summed. A\n"
    "model.layer_attention stack also gets a line per layer (its attention and\n"
    "its share per token, or a state layer's state bytes) before the sums. int8\n"
    "and int4 caches (KIVI-style) are counted with their scales,\n"
    "zero-points and the f32 window of recent tokens, which does not grow with\n"
    "the context: their per-token figure is the bytes at the trained seq_len over\n"
    "seq_len. `attnlab generate --stats` measures the same figures from the\n"
    "caches it allocates.\n",
};

/* Per-layer lines printed at most (a stack of 10^8 layers is counted, not
 * listed: the layers after these repeat the cycle). */
#define KV_LINES 256

/* model.layer_attention: each layer's attention and cache bytes per token
 * (the sums below add these up). */
static void print_layers(const al_model_config *m)
{
    for (int l = 0; m->n_layer_attn > 0 && l < m->n_layer && l < KV_LINES; l++) {
        al_attn_config a = al_config_layer_attn(m, l);
        char label[128];
        al_sweep_attn_label(label, sizeof label, &a);
        size_t el = al_model_layer_kv_elems(m, l);
        al_kv_layout o = al_model_layer_kv_layout(m, l, 1);
        if (o.state && !al_config_kv_consumer(m, l)) {   /* a state layer adds nothing per token */
            printf("layer %d: %s state_elements=%zu state_bytes=%zu (f32, the same at every "
                   "context)\n", l, label, o.elems, o.elems * sizeof(float));
            continue;
        }
        printf("layer %d: %s kv_elements_per_token=%zu kv_bytes_per_token: f32=%zu bf16=%zu "
               "f16=%zu\n", l, label, el, el * al_kv_dtype_size(AL_KV_F32),
               el * al_kv_dtype_size(AL_KV_BF16), el * al_kv_dtype_size(AL_KV_F16));
    }
    if (m->n_layer_attn > 0 && m->n_layer > KV_LINES)
        printf("layers %d to %d: as the cycle above\n", KV_LINES, m->n_layer - 1);
}

/* The cache at `context` tokens: each layer's rows and bytes, then the
 * sum, at each dtype. */
static void print_kv_at(const al_model_config *m, int context)
{
    printf("kv_context: %d\n", context);
    for (int l = 0; l < m->n_layer && l < KV_LINES; l++) {
        al_attn_config a = al_config_layer_attn(m, l);
        char label[128];
        al_sweep_attn_label(label, sizeof label, &a);
        printf("kv_layer_%d: variant=%s rows=%d f32=%zu bf16=%zu f16=%zu", l, label,
               al_model_layer_kv_rows(m, l, context),
               al_model_layer_kv_bytes(m, l, AL_KV_F32, context),
               al_model_layer_kv_bytes(m, l, AL_KV_BF16, context),
               al_model_layer_kv_bytes(m, l, AL_KV_F16, context));
        if (al_config_kv_consumer(m, l))   /* model.kv_share: whose cache it reads */
            printf(" kv_from=%d", al_config_kv_src(m, l));
        else if (al_model_layer_kv_layout(m, l, context).state)   /* held whole, f32 */
            printf(" storage=state");
        putchar('\n');
    }
    if (m->n_layer > KV_LINES)
        printf("kv_layers_%d_to_%d: as the cycle above\n", KV_LINES, m->n_layer - 1);
    printf("kv_bytes_at_context_%d: f32=%zu bf16=%zu f16=%zu\n", context,
           al_model_kv_bytes_at(m, AL_KV_F32, context),
           al_model_kv_bytes_at(m, AL_KV_BF16, context),
           al_model_kv_bytes_at(m, AL_KV_F16, context));
    printf("kv_bytes_at_context_%d_quantized: int8=%zu int4=%zu\n", context,
           al_model_kv_bytes_at(m, AL_KV_INT8, context),
           al_model_kv_bytes_at(m, AL_KV_INT4, context));
}

static void print_kv(const al_config *c, size_t params, size_t kv, long context)
{
    size_t b[AL_KV_NALL];
    for (int dt = 0; dt < AL_KV_NALL; dt++) b[dt] = al_kv_bytes_per_token(&c->model, dt);
    int dt = al_kv_dtype_parse(c->model.kv_dtype);
    AL_ASSERT(dt >= 0);   /* the config's own check allows only these */
    const al_model_config *m = &c->model;
    char variant[256];
    al_sweep_stack_label(variant, sizeof variant, m, "/");
    printf("variant: %s\n", variant);
    printf("shape: n_layer=%d d_model=%d n_head=%d d_head=%d d_ff=%d vocab_size=%d\n",
           m->n_layer, m->d_model, m->n_head, m->d_head, m->d_ff, m->vocab_size);
    printf("parameters: %zu\n", params);
    if (m->match.by != AL_MATCH_NONE)
        printf("match_params: to=%s by=%s params_to=%zu (from n_layer=%d d_ff=%d)\n",
               m->match.variant, m->match.by == AL_MATCH_D_FF ? "d_ff" : "n_layer",
               m->match.params_to, m->match.base_n_layer, m->match.base_d_ff);
    print_layers(m);
    printf("kv_elements_per_token: %zu\n", kv);
    printf("kv_bytes_per_token: f32=%zu bf16=%zu f16=%zu\n", b[AL_KV_F32], b[AL_KV_BF16],
           b[AL_KV_F16]);
    printf("kv_bytes_per_token_quantized: int8=%zu int4=%zu kv_quant_group=%d "
           "kv_quant_residual=%d\n", b[AL_KV_INT8], b[AL_KV_INT4], m->kv_quant_group,
           m->kv_quant_residual);
    printf("kv_dtype: %s kv_bytes_per_token=%zu\n", m->kv_dtype, b[dt]);
    print_kv_at(m, (int)(context ? context : m->seq_len));
}

/* A sweep file's `model:` is only its base: say so, and where every
 * trial's cache is. */
static void note_sweep(const char *file)
{
    al_node *root = NULL;
    al_err e;
    if (!file || al_yaml_load(file, &root, &e) != 0) return;
    if (root && root->kind == AL_NODE_MAP && al_node_get(root, "sweep"))
        fprintf(stderr, "kv: %s is a sweep: these are its base configuration's figures, not "
                "each trial's (`attnlab sweep %s --dry-run` lists every trial's cache)\n",
                file, file);
    al_node_free(root);
}

int al_cmd_kv(int argc, char **argv)
{
    kv_args a = {0};
    int rc = al_cli_parse(&kv_spec, argc, argv, &a);
    if (rc != AL_CLI_GO) return rc;
    al_config c;
    if ((rc = al_cli_load_config(&a.o, &c))) return rc;
    al_err e;
    if (al_train_resolve(&c, al_data_vocab(&c.data), &e) != 0)
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    size_t params, kv;   /* counted in checked arithmetic, nothing allocated */
    if (al_model_counts(&c.model, &params, &kv, &e) != 0) return al_cli_fail(AL_EXIT_INPUT, e.msg);
    size_t at_context;
    if (a.o.context && al_size_mul3(kv, sizeof(float), (size_t)a.o.context, &at_context)) {
        snprintf(e.msg, sizeof e.msg, "kv: --context %ld: %zu KV-cache bytes per token times %ld "
                 "tokens overflow %zu", a.o.context, kv * sizeof(float), a.o.context, SIZE_MAX);
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    }
    note_sweep(a.o.file);
    print_kv(&c, params, kv, a.o.context);
    return 0;
}
