/*
 * config_keys.c - the key tables of a config file, one per mapping
 * (config_keys.h), and the helpers every config file uses for key paths:
 * joining them, finding their node, an error at it.
 */
#include "config_keys.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ key tables */

/* A row; optional attributes follow as designated initialisers (.rule,
 * .max, .derived_zero, .ckpt, .unset_zero, .path), so everything about a key is
 * on its one line. */
#define FIELD(S, f, T, d, h, ...) \
    {.key = #f, .type = T, .offset = offsetof(S, f), .size = sizeof(((S *)0)->f), .def = d, \
     .help = h, __VA_ARGS__}
/* A key added after trial ids existed (key_spec.quiet). */
#define QUIET_FIELD(S, f, T, d, h, ...) FIELD(S, f, T, d, h, .quiet = 1, __VA_ARGS__)
#define ONE_OF(S, f, vals, d, h, ...) FIELD(S, f, K_STRING, d, h, .sub = vals, __VA_ARGS__)
#define QUIET_ONE_OF(S, f, vals, d, h, ...) ONE_OF(S, f, vals, d, h, .quiet = 1, __VA_ARGS__)
#define NESTED(f, table, h) \
    {.key = #f, .type = K_MAP, .offset = offsetof(al_config, f), \
     .size = sizeof(((al_config *)0)->f), .sub = table, .help = h}

/* The largest values (key_spec.max): what training and checkpoints accept. */
#define CK_DIM (1 << 14)
#define CK_LONG_DIM (1 << 24)
#define CK_MLP_RATIO 64.0

const char *const al_cfg_data_sources[] = {"text", "kjv", "mqar", "induction", "passkey", NULL};
const char *const al_cfg_kv_dtypes[] = {"f32", "bf16", "f16", "int8", "int4", NULL};
const char *const al_cfg_init_converts[] = {"none", "mean", "first", "random", "svd", NULL};
const char *const al_cfg_precisions[] = {"f32", "bf16", NULL};
const char *const al_cfg_attn_kernels[] = {"auto", "fused", "dense", "rows", NULL};

#define D al_data_config
static const key_spec data_keys[] = {
    ONE_OF(D, source, al_cfg_data_sources, "kjv",
           "data source: text, kjv, mqar, induction or passkey (text when only data.path is given)"),
    FIELD(D, path, K_STRING, "", "text file for source 'text'", .path = 1),
    FIELD(D, val_fraction, K_DOUBLE, "0.1", "fraction of the text held out for validation, in (0, 1)", .rule = R_OPEN01),
    FIELD(D, test_fraction, K_DOUBLE, "0.05", "fraction of the text held out as the test split (after validation), in [0, 1): scored once at the end of a run", .rule = R_HALF01),
    FIELD(D, vocab_size, K_INT, "512", "vocabulary of the synthetic tasks (mqar, induction); Zoology used 8192", .rule = R_POS, .max = CK_LONG_DIM),
    FIELD(D, seq_len, K_INT, "0", "length of a synthetic example (0 = model.seq_len)", .rule = R_NONNEG),
    FIELD(D, num_kv_pairs, K_INT, "8", "mqar: key-value pairs per example; induction: length of the repeated segment", .rule = R_POS),
    FIELD(D, min_kv_pairs, K_INT, "0", "training examples draw their pairs (segment length) uniformly from [min_kv_pairs, num_kv_pairs], a mixture of easier tasks; the test set always uses num_kv_pairs (0 = num_kv_pairs)", .rule = R_NONNEG),
    FIELD(D, curriculum_steps, K_INT, "0", "over the first curriculum_steps training steps the largest pair count (segment length) of training examples grows linearly from min_kv_pairs to num_kv_pairs (0 = no ramp)", .rule = R_NONNEG),
    FIELD(D, train_examples, K_INT, "20000", "synthetic training examples (passkey: the pool training draws from)", .rule = R_POS),
    FIELD(D, test_examples, K_INT, "1000", "synthetic test examples (and as many validation examples, drawn apart from them)", .rule = R_POS),
    FIELD(D, power_a, K_DOUBLE, "0.01", "power-law parameter of mqar query gaps", .rule = R_NONNEG),
    FIELD(D, seed, K_U64, "0", "seed of the synthetic data (0 = train.seed)"),
    {0},
};
#undef D

/* model.rope_scaling (docs/rope.md); quiet, so that a config without it
 * writes, and hashes, as before. */
#define S al_rope_scaling
static const key_spec rope_scaling_keys[] = {
    QUIET_ONE_OF(S, kind, al_rope_kinds, "none", "none, linear (position interpolation: angles / factor), ntk (base * factor^(d/(d-2)), d the rotated width) or yarn (YaRN's per-pair ramp, alpha 1, beta 32, and attention temperature sqrt(1/t) = 0.1 ln(factor) + 1)", .ckpt = CK_SINCE),
    QUIET_FIELD(S, factor, K_DOUBLE, "1.0", "scaling factor F (e.g. 4: a model trained at T0 read at 4 T0)", .rule = R_POS, .ckpt = CK_SINCE, .max = 1e6),
    QUIET_FIELD(S, original_seq_len, K_INT, "0", "T0, the length trained on before scaling (yarn's ramp; 0 = model.seq_len)", .rule = R_NONNEG, .ckpt = CK_SINCE, .max = CK_LONG_DIM),
    {0},
};
#undef S

#define M al_model_config
const key_spec al_cfg_model_keys[] = {
    FIELD(M, n_layer, K_INT, "4", "transformer blocks", .rule = R_POS, .max = CK_DIM),
    FIELD(M, d_model, K_INT, "128", "residual stream width", .rule = R_POS, .max = CK_DIM),
    FIELD(M, n_head, K_INT, "4", "query heads", .rule = R_POS, .max = CK_DIM),
    FIELD(M, d_head, K_INT, "0", "width of one head, even for RoPE (0 = d_model / n_head)", .rule = R_NONNEG, .derived_zero = 1, .max = CK_DIM),
    FIELD(M, seq_len, K_INT, "64", "context length trained on", .rule = R_POS, .max = CK_LONG_DIM),
    FIELD(M, mlp_ratio, K_DOUBLE, "4.0", "MLP hidden width over d_model", .rule = R_POS, .max = CK_MLP_RATIO),
    FIELD(M, d_ff, K_INT, "0", "MLP hidden width (0 = mlp_ratio * d_model); under match_params the width before matching", .rule = R_NONNEG, .derived_zero = 1, .max = CK_DIM * CK_MLP_RATIO),
    FIELD(M, vocab_size, K_INT, "0", "vocabulary (0 = from the data source)", .rule = R_NONNEG, .derived_zero = 1, .max = CK_LONG_DIM),
    FIELD(M, norm_eps, K_DOUBLE, "1e-5", "RMSNorm epsilon", .rule = R_POS, .max = 1.0),
    FIELD(M, rope_base, K_DOUBLE, "10000", "RoPE base frequency", .rule = R_POS, .max = 1e30),
    QUIET_FIELD(M, rope_fraction, K_DOUBLE, "1.0", "share of each head's RoPE part that rotates (its first 2*floor(fraction*d/2) dims, rotate-half among them); 1 = all, 0 = NoPE; a model.layer_attention item may give its own (NoPE every fourth layer)", .rule = R_UNIT, .ckpt = CK_NON_DEFAULT, .max = 1.0),
    {.key = "rope_scaling", .type = K_MAP, .offset = offsetof(M, rope_scaling), .size = sizeof(al_rope_scaling), .sub = rope_scaling_keys, .def = "-", .quiet = 1, .ckpt = CK_NON_DEFAULT, .help = "RoPE position scaling: {kind: linear | ntk | yarn, factor: F, original_seq_len: T0}; score and generate take --rope-scaling KIND:FACTOR"},
    FIELD(M, causal, K_BOOL, "true", "causal mask (false: the non-causal ablation)"),
    ONE_OF(M, kv_dtype, al_cfg_kv_dtypes, "f32", "KV-cache storage when decoding: f32, bf16, f16, int8 or int4 (KIVI-style, see kv_quant_group)", .ckpt = CK_SINCE),
    QUIET_FIELD(M, kv_quant_group, K_INT, "32", "int8/int4 caches: tokens per key group (keys are quantized per channel) and channels per value group (values per token), each group with an f32 scale and zero-point", .rule = R_POS, .ckpt = CK_SINCE, .max = CK_LONG_DIM),
    QUIET_FIELD(M, kv_quant_residual, K_INT, "32", "int8/int4 caches: the most recent tokens kept at f32", .rule = R_NONNEG, .ckpt = CK_SINCE, .max = CK_LONG_DIM),
    QUIET_FIELD(M, kv_share, K_INT, "1", "cross-layer K/V sharing (CLA): layers in consecutive groups of kv_share attend over the K/V of their group's first layer, which alone projects and caches it (the last group may be shorter); the GQA family and local, a group of one variant and settings; 1 = off", .rule = R_POS, .ckpt = CK_NON_DEFAULT, .max = CK_DIM, .unset_zero = 1),
    {.key = "attention", .type = K_ATTN, .help = "attention variant and its settings"},
    {.key = "layer_attention", .type = K_LATTN, .def = "-", .help = "per-layer attention: a list of mappings like model.attention, repeated cyclically over n_layer ([{variant: gqa, n_kv_head: 2}, {variant: mha}] alternates); not together with model.attention"},
    {.key = "match_params", .type = K_MATCH, .def = "off", .help = "match the parameter count of the same model with another attention (and no kv_share): {to: {variant: mha}, by: d_ff} (or by: n_layer)"},
    {0},
};
#undef M

/* model.match_params: the input keys, then the values a run writes back
 * (checked, when present, against the resolution). */
static const char *const match_by_names[] = {"d_ff", "n_layer", NULL};
const key_spec al_cfg_match_keys[] = {
    {.key = "to", .type = K_ATTN, .def = "-", .help = "the attention whose model to match, a mapping like model.attention ({variant: mha})"},
    {.key = "by", .type = K_STRING, .size = 16, .sub = match_by_names, .def = "d_ff", .help = "what changes: d_ff (the MLP width, a multiple of 8, as the MQA paper widens it) or n_layer (blocks, as DeepSeek-V2 App. D.1 adds them)"},
    {.key = "n_layer", .type = K_INT, .size = sizeof(int), .def = "-", .help = "written by attnlab: the matched n_layer (model.n_layer is the one before matching)"},
    {.key = "d_ff", .type = K_INT, .size = sizeof(int), .def = "-", .help = "written by attnlab: the matched d_ff (model.d_ff is the one before matching)"},
    {.key = "params", .type = K_U64, .size = sizeof(uint64_t), .def = "-", .help = "written by attnlab: the matched model's parameter count"},
    {.key = "params_to", .type = K_U64, .size = sizeof(uint64_t), .def = "-", .help = "written by attnlab: the parameter count of the model matched to"},
    {0},
};

/* train.steps follows from train.flops when that is given (al_train.h). */
static int steps_from_flops(const void *base) { return ((const al_train_config *)base)->flops > 0; }

#define T al_train_config
static const key_spec train_keys[] = {
    FIELD(T, steps, K_INT, "2000", "optimizer steps (not with train.flops, which derives them)", .rule = R_POS, .derived = steps_from_flops),
    QUIET_FIELD(T, flops, K_DOUBLE, "0", "total training FLOPs (docs/costs.md): the run trains floor(flops / (train_flops_per_token * batch_size * seq_len)) steps, so that every attention of a sweep gets the same compute; warmup_steps and eval_every stay in steps, the cosine decay spans the derived steps; not with train.steps (0 = off: train.steps counts)", .rule = R_NONNEG),
    FIELD(T, batch_size, K_INT, "12", "sequences per step", .rule = R_POS),
    FIELD(T, lr, K_DOUBLE, "1e-3", "peak learning rate", .rule = R_POS),
    FIELD(T, min_lr, K_DOUBLE, "1e-4", "learning rate at the end of the cosine decay", .rule = R_NONNEG),
    FIELD(T, warmup_steps, K_INT, "100", "steps of linear warmup, at most steps (default: min(100, steps))", .rule = R_NONNEG),
    FIELD(T, weight_decay, K_DOUBLE, "0.1", "AdamW weight decay", .rule = R_NONNEG),
    FIELD(T, beta1, K_DOUBLE, "0.9", "AdamW beta1, in [0, 1)", .rule = R_HALF01),
    FIELD(T, beta2, K_DOUBLE, "0.99", "AdamW beta2, in [0, 1)", .rule = R_HALF01),
    FIELD(T, grad_clip, K_DOUBLE, "1.0", "clip the global gradient norm to this (0 = off)", .rule = R_NONNEG),
    FIELD(T, eval_every, K_INT, "200", "steps between evaluations", .rule = R_POS),
    FIELD(T, eval_batches, K_INT, "20", "batches per evaluation", .rule = R_POS),
    FIELD(T, seed, K_U64, "1", "seed of the initialisation and the training batches"),
    FIELD(T, eval_seed, K_U64, "1337", "seed of the evaluation batches"),
    FIELD(T, threads, K_INT, "0", "worker threads (0 = all cores)", .rule = R_NONNEG, .max = 256),
    FIELD(T, checkpoint_every, K_INT, "0", "steps between checkpoints (0 = only at the end)", .rule = R_NONNEG),
    FIELD(T, max_memory, K_BYTES, "0", "bytes a run may use (e.g. 512M, 8G, or plain digits; k, M, G, T are powers of 1024); a model or batch whose estimate is larger is refused before anything is allocated (0 = the machine's memory, or ulimit -v when lower)"),
    FIELD(T, init_from, K_STRING, "", "checkpoint whose weights start the run, with a fresh optimizer and schedule (\"\" = random init)", .path = 1),
    ONE_OF(T, init_convert, al_cfg_init_converts, "none", "how init_from reaches this model: none (its tensors must fit), or converted by mean, first, random or svd (as attnlab convert)"),
    QUIET_ONE_OF(T, precision, al_cfg_precisions, "f32", "matrix products: f32, or bf16 (bf16 operands, f32 accumulation and results, through oneDNN; weights, AdamW state, norms, softmax, RoPE and the loss stay f32; needs a CPU with avx512_bf16 or AMX); score and generate use a checkpoint's"),
    QUIET_ONE_OF(T, attention_kernel, al_cfg_attn_kernels, "auto", "attention in training: fused (tiles of 64 queries by 128 keys, online softmax, saves each query row's log-sum-exp: memory O(T)), dense (saves the T x T probabilities: fewer FLOPs, memory O(T^2)), rows (blocks of 64 queries over all their keys, saves each row's max and 1/sum, rebuilds the probabilities in backward: memory O(T)), or auto (rows below seq_len 8192; from there fused where a layer's q.k is no wider than its v, rows where wider, as for mla: the fastest where measured; docs/fused-attention.md); the same function up to rounding, so not part of a sweep trial's identity"),
    {0},
};
#undef T

#define R al_report_config
const key_spec al_cfg_report_keys[] = {
    FIELD(R, context, K_INT, "0", "context (tokens) at which the report gives each model's whole KV cache, beside bytes per token (0 = model.seq_len); not part of a trial's identity, so changing it on a finished sweep only re-reports", .rule = R_NONNEG),
    {0},
};
#undef R

const key_spec al_cfg_top_keys[] = {
    {.key = "name", .type = K_IGNORE, .help = "experiment name (informational)"},
    {.key = "description", .type = K_IGNORE, .help = "one line about the experiment (informational)"},
    NESTED(data, data_keys, "the data source"),
    NESTED(model, al_cfg_model_keys, "the model shape"),
    NESTED(train, train_keys, "the optimizer and the schedule"),
    NESTED(report, al_cfg_report_keys, "how the sweep's report shows results (not part of a trial's identity)"),
    {.key = "sweep", .type = K_IGNORE, .help = "the sweep (seeds, grid, zip, exclude, select, baseline), read by the sweep runner"},
    {.key = "stages", .type = K_IGNORE, .help = "chained sweeps whose trials start from an earlier stage's checkpoints, read by the sweep runner"},
    {.key = "eval", .type = K_IGNORE, .help = "evaluation of each finished trial's checkpoint after training (kv_dtypes, contexts, by_position, buckets, tokens, passkey_lengths, passkey_depths, passkey_examples, kv_quant_residuals, mqar_examples, decode), read by the sweep runner; not part of a trial's identity. kv_quant_residuals: the f32 recent tokens of the int8/int4 caches, each a count or default (the checkpoint's model.kv_quant_residual), e.g. [0, default]; with it, kv_dtypes or mqar_examples (an mqar trial's test examples, default 200), passkey and mqar trials answer through f32 and each cache, exact match paired against f32 (McNemar, Holm; docs/kv-quant-recall.md)"},
    {.key = "plugins", .type = K_PLUGINS, .def = "[]", .help = "shared objects that add attention variants"},
    {0},
};

/* ------------------------------------------------------------ rows */

const key_spec *al_cfg_key(const key_spec *t, const char *key)
{
    for (; t->key; t++)
        if (strcmp(t->key, key) == 0) return t;
    return NULL;
}

int al_cfg_rule_ok(int r, double v)
{
    switch (r) {
    case R_POS: return v > 0;
    case R_NONNEG: return v >= 0;
    case R_OPEN01: return v > 0 && v < 1;
    case R_HALF01: return v >= 0 && v < 1;
    case R_UNIT: return v >= 0 && v <= 1;
    }
    return 1;
}

void al_cfg_int_range(const key_spec *k, int built, long *lo, long *hi)
{
    *lo = k->rule == R_POS || (built && k->derived_zero) ? 1 : k->rule == R_NONNEG ? 0 : INT_MIN;
    *hi = k->max > 0 ? (long)k->max : INT_MAX;
}

int al_cfg_in_range(const key_spec *k, double v)
{
    return al_cfg_rule_ok(k->rule, v) && (k->max <= 0 || v <= k->max);
}

const char *al_cfg_rule_text(int r)
{
    static const char *const text[] = {"", "must be positive", "must be >= 0",
                                       "must be in (0, 1)", "must be in [0, 1)",
                                       "must be in [0, 1]"};
    return text[r];
}

/* ------------------------------------------------------------ key paths */

/* Copy s into a buffer of n bytes, zero-filling the rest (so configs can be
 * compared with memcmp). s must fit. */
void al_cfg_set_str(char *dst, size_t n, const char *s)
{
    size_t len = strlen(s);
    AL_ASSERT(len < n);
    memset(dst, 0, n);
    memcpy(dst, s, len);
}

/* out = "path.key" (or "key" at the top), truncated to n - 1 bytes. */
void al_cfg_join(char *out, size_t n, const char *path, const char *key)
{
    size_t len = 0;
    for (const char *part[3] = {path, path[0] ? "." : "", key}, **p = part; p < part + 3; p++)
        for (const char *q = *p; *q && len + 1 < n; q++) out[len++] = *q;
    out[len] = 0;
}

/* The node at a dotted path, else its deepest existing ancestor; *exact
 * (if non-NULL) tells which. */
/* cur's key, or "key[i]": item i of the sequence under key. */
static const al_node *item_get(const al_node *cur, char *key)
{
    char *br = strchr(key, '[');
    if (!br) return al_node_get(cur, key);
    int i = atoi(br + 1);
    *br = 0;
    const al_node *s = al_node_get(cur, key);
    return s && s->kind == AL_NODE_SEQ && i >= 0 && i < s->n ? s->items[i] : NULL;
}

const al_node *al_cfg_find_path(const al_node *root, const char *path, int *exact)
{
    const al_node *cur = root;
    char key[256];
    const char *k = path;
    while (cur && *k) {
        size_t len = strcspn(k, "."), n = len < sizeof key - 1 ? len : sizeof key - 1;
        memcpy(key, k, n);   /* not "%.*s": GCC's -O3 + sanitizer flags a false null */
        key[n] = '\0';
        const al_node *next = item_get(cur, key);
        if (!next) break;
        cur = next;
        k += len + (k[len] == '.');
    }
    if (exact) *exact = cur && !*k;
    return cur;
}

/* An error about the key at path: at its node when a tree is given, else
 * at the config's file without a position. */
int al_cfg_verr(al_err *e, const al_config *c, const al_node *root, const char *path,
                const char *fmt, ...)
{
    char msg[AL_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const al_node *x = root ? al_cfg_find_path(root, path, NULL) : NULL;
    if (x) return al_node_errf(e, x, "%s", msg);
    return al_errf(e, "%s: error: %s", c->file[0] ? c->file : "config", msg);
}

/* ------------------------------------------------------------ numbers */

/* The shortest %g that reads back to v; "1e-05" becomes "1.0e-05" so that
 * YAML 1.1 readers (PyYAML) see a float too. */
void al_cfg_fmt_double(char *out, size_t n, double v)
{
    if (isnan(v) || isinf(v)) {
        snprintf(out, n, "%s", isnan(v) ? ".nan" : v > 0 ? ".inf" : "-.inf");
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(out, n, "%.*g", p, v);
        if (strtod(out, NULL) == v) break;
    }
    char *ex = strchr(out, 'e');
    if (ex && !strchr(out, '.') && strlen(out) + 3 <= n) {
        memmove(ex + 2, ex, strlen(ex) + 1);
        memcpy(ex, ".0", 2);
    }
}
