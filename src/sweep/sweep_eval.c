/*
 * sweep_eval.c - the experiment file's top-level `eval` (al_sweep_spec.h):
 * which cache dtypes, contexts and position buckets every ok trial's
 * checkpoint is scored at once it has trained. Parsed here, at load time,
 * so that a typo fails before anything trains; the scoring itself is the
 * runner's (cmd/sweep_eval.c, with `attnlab score`'s code).
 */
#include "al_sweep_spec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "al_data.h"
#include "al_kvcache.h"
#include "al_score.h"

_Static_assert(AL_RECALL_MAX_RESIDUALS <= AL_EVAL_MAX_DTYPES &&
               AL_EVAL_MAX_DTYPES <= AL_RECALL_MAX_DTYPES,
               "eval's kv_dtypes and kv_quant_residuals must fit al_recall_init's");

static int int_of(const al_node *x, const char *key, long lo, long hi, long *out, al_err *e)
{
    char *end;
    if (x->kind != AL_NODE_SCALAR || x->quoted)
        return al_node_errf(e, x, "'eval.%s' must be an integer", key);
    errno = 0;
    long v = strtol(x->value, &end, 10);
    if (!x->value[0] || *end || errno || v < lo || v > hi)
        return al_node_errf(e, x, "'eval.%s' must be an integer in [%ld, %ld], got '%.40s'", key,
                            lo, hi, x->value);
    *out = v;
    return 0;
}

static int dtypes_of(const al_node *x, al_sweep_eval *v, al_err *e)
{
    if (x->kind != AL_NODE_SEQ || x->n == 0 || x->n > AL_EVAL_MAX_DTYPES)
        return al_node_errf(e, x, "'eval.kv_dtypes' must be a list of 1 to %d of f32, bf16, "
                            "f16, int8, int4", AL_EVAL_MAX_DTYPES);
    for (int i = 0; i < x->n; i++) {
        const al_node *d = x->items[i];
        int k = d->kind == AL_NODE_SCALAR ? al_kv_dtype_parse(d->value) : -1;
        if (k < 0)
            return al_node_errf(e, d, "'eval.kv_dtypes[%d]' must be one of f32, bf16, f16, "
                                "int8, int4", i);
        for (int j = 0; j < v->n_dtypes; j++)
            if (v->dtypes[j] == k)
                return al_node_errf(e, d, "'eval.kv_dtypes': %s is listed twice",
                                    al_kv_dtype_name(k));
        v->dtypes[v->n_dtypes++] = k;
    }
    return 0;
}

static int contexts_of(const al_node *x, al_sweep_eval *v, al_err *e)
{
    if (x->kind != AL_NODE_SEQ || x->n == 0 || x->n > AL_EVAL_MAX_CONTEXTS)
        return al_node_errf(e, x, "'eval.contexts' must be a list of 1 to %d window lengths",
                            AL_EVAL_MAX_CONTEXTS);
    for (int i = 0; i < x->n; i++) {
        long c = 0;
        if (int_of(x->items[i], "contexts", 1, 1L << 20, &c, e)) return -1;
        for (int j = 0; j < v->n_contexts; j++)
            if (v->contexts[j] == c)
                return al_node_errf(e, x->items[i], "'eval.contexts': %ld is listed twice", c);
        v->contexts[v->n_contexts++] = (int)c;
    }
    return 0;
}

/* passkey_lengths: window lengths, each at least a passkey example. */
static int pk_lengths_of(const al_node *x, al_sweep_eval *v, al_err *e)
{
    if (x->kind != AL_NODE_SEQ || x->n == 0 || x->n > AL_EVAL_MAX_CONTEXTS)
        return al_node_errf(e, x, "'eval.passkey_lengths' must be a list of 1 to %d window "
                            "lengths", AL_EVAL_MAX_CONTEXTS);
    for (int i = 0; i < x->n; i++) {
        long c = 0;
        if (int_of(x->items[i], "passkey_lengths", al_passkey_min_len(), 1L << 20, &c, e))
            return -1;
        v->pk_lengths[v->n_pk_lengths++] = (int)c;
    }
    return 0;
}

static int pk_depths_of(const al_node *x, al_sweep_eval *v, al_err *e)
{
    if (x->kind != AL_NODE_SEQ || x->n == 0 || x->n > AL_EVAL_MAX_CONTEXTS)
        return al_node_errf(e, x, "'eval.passkey_depths' must be a list of 1 to %d depths in "
                            "[0, 1)", AL_EVAL_MAX_CONTEXTS);
    for (int i = 0; i < x->n; i++) {
        const al_node *d = x->items[i];
        char *end = NULL;
        double f = d->kind == AL_NODE_SCALAR && !d->quoted ? strtod(d->value, &end) : -1;
        if (!end || *end || !(f >= 0 && f < 1))
            return al_node_errf(e, d, "'eval.passkey_depths[%d]' must be a number in [0, 1)", i);
        v->pk_depths[v->n_pk_depths++] = f;
    }
    return 0;
}

/* kv_quant_residuals: the f32 residual windows the int8 / int4 caches are
 * tried at, each a token count or `default` (the checkpoint's
 * model.kv_quant_residual). */
static int residuals_of(const al_node *x, al_sweep_eval *v, al_err *e)
{
    if (x->kind != AL_NODE_SEQ || x->n == 0 || x->n > AL_RECALL_MAX_RESIDUALS)
        return al_node_errf(e, x, "'eval.kv_quant_residuals' must be a list of 1 to %d token "
                            "counts or 'default'", AL_RECALL_MAX_RESIDUALS);
    for (int i = 0; i < x->n; i++) {
        const al_node *d = x->items[i];
        long c = AL_RECALL_RESIDUAL_DEFAULT;
        if (d->kind != AL_NODE_SCALAR || d->quoted || strcmp(d->value, "default") != 0) {
            char *end = NULL;
            errno = 0;
            c = d->kind == AL_NODE_SCALAR && !d->quoted ? strtol(d->value, &end, 10) : -1;
            if (!end || end == d->value || *end || errno || c < 0 || c > 1L << 24)
                return al_node_errf(e, d, "'eval.kv_quant_residuals[%d]' must be a token count "
                                    "in [0, %ld] or 'default'", i, 1L << 24);
        }
        for (int j = 0; j < v->n_residuals; j++)
            if (v->residuals[j] == c)
                return al_node_errf(e, d, "'eval.kv_quant_residuals': %.40s is listed twice",
                                    d->value);
        v->residuals[v->n_residuals++] = (int)c;
    }
    return 0;
}

static int bool_of(const al_node *x, const char *key, int *out, al_err *e)
{
    if (x->kind == AL_NODE_SCALAR && !x->quoted && strcmp(x->value, "true") == 0) *out = 1;
    else if (x->kind == AL_NODE_SCALAR && !x->quoted && strcmp(x->value, "false") == 0) *out = 0;
    else return al_node_errf(e, x, "'eval.%s' must be true or false", key);
    return 0;
}

/* A list of 1..AL_EVAL_MAX_CONTEXTS distinct integers in [lo, hi], or
 * (scalars allowed) one integer. */
static int ints_of(const al_node *x, const char *key, int scalar_ok, long lo, long hi, int *out,
                   int *n, al_err *e)
{
    long v = 0;
    *n = 0;
    if (scalar_ok && x->kind == AL_NODE_SCALAR) {
        if (int_of(x, key, lo, hi, &v, e)) return -1;
        out[(*n)++] = (int)v;
        return 0;
    }
    if (x->kind != AL_NODE_SEQ || x->n == 0 || x->n > AL_EVAL_MAX_CONTEXTS)
        return al_node_errf(e, x, "'eval.%s' must be a list of 1 to %d integers%s", key,
                            AL_EVAL_MAX_CONTEXTS, scalar_ok ? " or one integer" : "");
    for (int i = 0; i < x->n; i++) {
        if (int_of(x->items[i], key, lo, hi, &v, e)) return -1;
        for (int j = 0; j < *n; j++)
            if (out[j] == v)
                return al_node_errf(e, x->items[i], "'eval.%s': %ld is listed twice", key, v);
        out[(*n)++] = (int)v;
    }
    return 0;
}

/* eval.decode: {contexts: [N, ...], batch: B | [B, ...], tokens: K,
 * repeats: R}: every finished checkpoint's decode timed at each (context,
 * batch). */
static int decode_of(const al_node *m, al_sweep_eval *v, al_err *e)
{
    if (m->kind != AL_NODE_MAP)
        return al_node_errf(e, m, "'eval.decode' must be a mapping (contexts, batch, tokens, "
                            "repeats)");
    v->decode.on = 1;
    v->decode.tokens = AL_EVAL_DECODE_TOKENS;
    v->decode.repeats = AL_EVAL_DECODE_REPEATS;
    for (int i = 0; i < m->n; i++) {
        const char *k = m->keys[i];
        const al_node *x = m->items[i];
        long n = 0;
        int rc;
        if (strcmp(k, "contexts") == 0)
            rc = ints_of(x, "decode.contexts", 0, 2, 1L << 24, v->decode.contexts,
                         &v->decode.n_contexts, e);
        else if (strcmp(k, "batch") == 0)
            rc = ints_of(x, "decode.batch", 1, 1, 4096, v->decode.batches,
                         &v->decode.n_batches, e);
        else if (strcmp(k, "tokens") == 0 || strcmp(k, "repeats") == 0) {
            int tok = k[0] == 't';
            rc = int_of(x, tok ? "decode.tokens" : "decode.repeats", 1,
                        tok ? 1L << 20 : AL_DECODE_MAX_REPEATS, &n, e);
            if (!rc) *(tok ? &v->decode.tokens : &v->decode.repeats) = (int)n;
        } else
            return al_errf(e, "%s:%d:%d: error: unknown key 'eval.decode.%.60s' (known: "
                           "contexts, batch, tokens, repeats)", x->file, m->key_line[i],
                           m->key_col[i], k);
        if (rc) return -1;
    }
    if (!v->decode.n_contexts)
        return al_node_errf(e, m, "'eval.decode' needs 'contexts' (the context lengths to time "
                            "decode at)");
    if (!v->decode.n_batches) v->decode.batches[v->decode.n_batches++] = 1;
    for (int i = 0; i < v->decode.n_contexts; i++)
        if (v->decode.contexts[i] <= v->decode.tokens + 1)
            return al_node_errf(e, m, "'eval.decode.contexts' (%d) must exceed "
                                "'eval.decode.tokens' (%d) + 1: the timed steps decode after "
                                "the filled cache", v->decode.contexts[i], v->decode.tokens);
    return 0;
}

static int parse_keys(const al_node *m, al_sweep_eval *v, al_err *e)
{
    static const char *const known[] = {"kv_dtypes", "contexts", "by_position", "buckets",
                                        "tokens", "passkey_lengths", "passkey_depths",
                                        "passkey_examples", "kv_quant_residuals",
                                        "mqar_examples", "decode", NULL};
    long n = 0;
    for (int i = 0; i < m->n; i++) {
        const char *k = m->keys[i];
        const al_node *x = m->items[i];
        int ok = 0;
        for (int j = 0; known[j] && !ok; j++) ok = strcmp(k, known[j]) == 0;
        if (!ok)   /* at the key, as the config decoder says it */
            return al_errf(e, "%s:%d:%d: error: unknown key 'eval.%.60s' (known: kv_dtypes, "
                           "contexts, by_position, buckets, tokens, passkey_lengths, "
                           "passkey_depths, passkey_examples, kv_quant_residuals, "
                           "mqar_examples, decode)", x->file,
                           m->key_line[i], m->key_col[i], k);
        v->score |= strcmp(k, "decode") != 0;
        int rc = strcmp(k, "decode") == 0     ? decode_of(x, v, e)
               : strcmp(k, "kv_dtypes") == 0  ? dtypes_of(x, v, e)
               : strcmp(k, "contexts") == 0   ? contexts_of(x, v, e)
               : strcmp(k, "passkey_lengths") == 0 ? pk_lengths_of(x, v, e)
               : strcmp(k, "passkey_depths") == 0 ? pk_depths_of(x, v, e)
               : strcmp(k, "kv_quant_residuals") == 0 ? residuals_of(x, v, e)
               : strcmp(k, "by_position") == 0 ? bool_of(x, k, &v->by_position, e)
               : int_of(x, k, 1, strcmp(k, "buckets") == 0         ? 1L << 20
                                 : strcmp(k, "mqar_examples") == 0 ? 1L << 24
                                                                   : 1L << 30, &n, e);
        if (rc) return -1;
        if (strcmp(k, "buckets") == 0) v->buckets = (int)n;
        if (strcmp(k, "tokens") == 0) v->tokens = n;
        if (strcmp(k, "passkey_examples") == 0) v->pk_examples = n;
        if (strcmp(k, "mqar_examples") == 0) v->mqar_examples = n;
        v->recall |= strcmp(k, "kv_dtypes") == 0 || strcmp(k, "kv_quant_residuals") == 0 ||
                     strcmp(k, "mqar_examples") == 0;
    }
    return 0;
}

/* Every trial must read text with a test split, and `tokens` must hold a
 * window of every context (the trial's seq_len where contexts is absent);
 * or be a passkey trial (scored on the passkey grid instead; not by
 * position, see below), or an mqar one (its test examples through the
 * caches, which needs recall on). */
static int check_trials(const al_sweep *s, const al_node *m, al_err *e)
{
    const al_sweep_eval *v = &s->eval;
    for (int i = 0; i < s->n_trials; i++) {
        const al_config *c = &s->trials[i].cfg;
        /* a passkey model learns the key's digits alone (data.md): the loss
         * of its filler by position is of bytes it never learnt to predict */
        if (strcmp(c->data.source, "passkey") == 0 && v->by_position) {
            const al_node *b = al_node_get(m, "by_position");
            return al_node_errf(e, b ? b : m, "'eval.by_position' is a text model's loss by "
                                "position, but trial %s is a passkey trial, trained on the "
                                "key's digits alone, so its filler's loss says nothing: drop "
                                "it (the passkey grid's answer loss by length and depth is "
                                "in <trial>/eval/passkey.csv and the report)",
                                s->trials[i].label);
        }
        if (strcmp(c->data.source, "passkey") == 0) continue;
        if (strcmp(c->data.source, "mqar") == 0 && !v->recall)
            return al_node_errf(e, m, "'eval' answers mqar trials' examples through the caches "
                                "of 'eval.kv_dtypes': trial %s reads data.source mqar and eval "
                                "gives none of kv_dtypes, kv_quant_residuals, mqar_examples",
                                s->trials[i].label);
        if (strcmp(c->data.source, "mqar") == 0) continue;
        if (strcmp(c->data.source, "text") != 0 && strcmp(c->data.source, "kjv") != 0)
            return al_node_errf(e, m, "'eval' scores text, passkey or mqar: trial %s reads "
                                "data.source %s",
                                s->trials[i].label, c->data.source);
        if (c->data.test_fraction <= 0)
            return al_node_errf(e, m, "'eval' scores the test split: trial %s has "
                                "data.test_fraction 0", s->trials[i].label);
        for (int j = 0; j < (v->n_contexts ? v->n_contexts : 1); j++) {
            long T = v->n_contexts ? v->contexts[j] : c->model.seq_len;
            if (T > v->tokens)
                return al_node_errf(e, m, "'eval.tokens' (%ld) must be at least every context "
                                    "(%ld)", v->tokens, T);
            if (v->by_position && v->buckets > T)
                return al_node_errf(e, m, "'eval.buckets' (%d) must be at most every context "
                                    "(%ld)", v->buckets, T);
        }
    }
    return 0;
}

int al_sweep_eval_load(al_sweep *s, al_err *e)
{
    const al_node *m = al_node_get(s->root, "eval");
    al_sweep_eval *v = &s->eval;
    memset(v, 0, sizeof *v);
    if (!m || al_node_is_null(m)) return 0;
    if (m->kind != AL_NODE_MAP)
        return al_node_errf(e, m, "'eval' must be a mapping (kv_dtypes, contexts, by_position, "
                            "buckets, tokens, passkey_*, kv_quant_residuals, mqar_examples, "
                            "decode)");
    v->on = 1;
    v->tokens = AL_EVAL_DEFAULT_TOKENS;
    if (parse_keys(m, v, e)) return -1;
    /* `eval: {}` scores at the defaults; `eval: {decode: ...}` only times */
    if (!v->decode.on) v->score = 1;
    if (!v->score) return 0;
    if (v->buckets && !v->by_position)
        return al_node_errf(e, m, "'eval.buckets' needs 'eval.by_position: true'");
    if (!v->n_dtypes) v->dtypes[v->n_dtypes++] = AL_KV_F32;
    return check_trials(s, m, e);
}
