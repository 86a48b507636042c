/*
 * convert_run.c - the file-level conversion job shared by `attnlab convert`
 * and the sweep's convert stages: read and hash the source checkpoint,
 * build the target, sample the run's training data, convert, measure,
 * score both models on the run's validation split, write the result with
 * where it came from in its metadata. Nothing is written unless every step
 * succeeded.
 */
#include "al_convert.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_checkpoint.h"
#include "al_data.h"
#include "al_sha256.h"
#include "al_eval.h"

/* The sample's own seed: the same windows whatever the run's seeds. */
#define SAMPLE_SEED 0x53414d504c45ULL

typedef struct job_state {
    al_model src, dst;
    al_data data;
    int data_open;
    al_convert_sample sample;
    long step;
} job_state;

static void job_close(job_state *s)
{
    al_model_free(&s->src);
    al_model_free(&s->dst);
    if (s->data_open) al_data_close(&s->data);
    al_convert_sample_free(&s->sample);
}

static int open_data(const al_convert_job *j, job_state *s, al_err *e)
{
    if (al_data_open(&s->data, &j->run->data, s->src.cfg.seq_len, e) != 0) return -1;
    s->data_open = 1;
    if (s->data.vocab_size != s->src.cfg.vocab_size)
        return al_errf(e, "%s: the model's vocabulary is %d but data source '%s' has %d: "
                       "convert measures on the data the model was trained on", j->src_path,
                       s->src.cfg.vocab_size, j->run->data.source, s->data.vocab_size);
    return 0;
}

static void mean_errors(al_convert_result *r)
{
    al_convert_err m = {0, 0, 0, 0, 0};
    for (int l = 0; l < r->n_layer; l++) {
        const al_convert_err *x = &r->layers[l];
        m.k += x->k, m.v += x->v, m.k_prenorm += x->k_prenorm, m.v_prenorm += x->v_prenorm;
        m.rope_kept += x->rope_kept;
    }
    double n = r->n_layer;
    r->mean = (al_convert_err){m.k / n, m.v / n, m.k_prenorm / n, m.v_prenorm / n,
                               m.rope_kept / n};
}

static void item_name(char *out, size_t n, const al_attn_config *a)
{
    snprintf(out, n, "%s", a->variant);
}

/* The variant, or a stack's variants joined by '/' ("gqa/mha"). */
static void stack_name(char *out, size_t n, const al_model_config *c)
{
    al_config_attn_label(out, n, c, "/", item_name);
}

/* Read and hash the source; load it. */
static int open_source(const char *path, al_model *src, long *step, al_convert_result *r,
                       al_err *e)
{
    snprintf(r->src_path, sizeof r->src_path, "%s", path);
    if (al_sha256_file(path, r->src_sha256, e) != 0 || al_checkpoint_load(path, src, step, e) != 0)
        return -1;
    r->n_layer = src->cfg.n_layer;
    stack_name(r->src_variant, sizeof r->src_variant, &src->cfg);
    return 0;
}

/* src loaded, dst initialised with the target config, d open: check,
 * sample, convert, measure. */
static int convert_loaded(al_model *src, al_model *dst, al_data *d, int T, int B, long tokens,
                          uint64_t seed, al_convert_sample *sample, al_convert_result *r,
                          al_err *e)
{
    stack_name(r->dst_variant, sizeof r->dst_variant, &dst->cfg);
    if (al_convert_check(&src->cfg, &dst->cfg, r->method, e) != 0 ||
        al_convert_sample_take(src, d, T, B, tokens, SAMPLE_SEED, sample, e) != 0)
        return -1;
    r->sample_tokens = sample->n;
    al_convert_opts o = {r->method, seed, sample};
    if (al_convert(src, dst, &o, e) != 0) return -1;
    r->layers = al_calloc((size_t)r->n_layer, sizeof *r->layers);
    al_convert_measure(src, dst, &o, r->layers);
    mean_errors(r);
    return 0;
}

static void score(job_state *s, const al_convert_job *j, al_convert_result *r)
{
    const al_train_config *t = &j->run->train;
    r->src_val_loss = al_evaluate(&s->src, &s->data, t, &r->src_val_accuracy);
    r->val_loss = al_evaluate(&s->dst, &s->data, t, &r->val_accuracy);
}

static int write_out(const al_convert_job *j, job_state *s, const al_convert_result *r,
                     al_err *e)
{
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)j->seed);
    const char *meta[] = {"attnlab.converted_from", j->src_path,
                          "attnlab.converted_from_sha256", r->src_sha256,
                          "attnlab.convert_method", al_convert_method_name(r->method),
                          "attnlab.convert_seed", seed};
    int n = r->method == AL_CONVERT_RANDOM ? 4 : 3;
    return al_checkpoint_save_meta(j->out_path, &s->dst, s->step, meta, n, e);
}

static int run_steps(const al_convert_job *j, job_state *s, al_convert_result *r, al_err *e)
{
    al_model_config dcfg;
    if (open_source(j->src_path, &s->src, &s->step, r, e) != 0 ||
        al_convert_target(&s->src.cfg, j->to, &dcfg, e) != 0)
        return -1;
    r->method = j->method >= 0 ? j->method : al_convert_default_method(&dcfg);
    if (al_convert_check(&s->src.cfg, &dcfg, r->method, e) != 0 || open_data(j, s, e) != 0 ||
        al_model_init(&s->dst, &dcfg, e) != 0 ||
        convert_loaded(&s->src, &s->dst, &s->data, s->src.cfg.seq_len, j->run->train.batch_size,
                       j->sample_tokens, j->seed, &s->sample, r, e) != 0)
        return -1;
    if (j->score) {
        int B = j->run->train.batch_size, T = s->src.cfg.seq_len;
        if (al_model_reserve(&s->src, B, T, e) != 0 || al_model_reserve(&s->dst, B, T, e) != 0)
            return -1;
        score(s, j, r);
    }
    if (j->out_path && write_out(j, s, r, e) != 0) return -2;   /* a run-time failure */
    return 0;
}

static void result_init(al_convert_result *r)
{
    memset(r, 0, sizeof *r);
    r->src_val_loss = r->val_loss = r->src_val_accuracy = r->val_accuracy = NAN;
}

int al_convert_run(const al_convert_job *j, al_convert_result *r, al_err *e)
{
    result_init(r);
    job_state s;
    memset(&s, 0, sizeof s);
    int rc = run_steps(j, &s, r, e);
    job_close(&s);
    if (rc != 0) al_convert_result_free(r);
    return rc < 0 ? rc : 0;
}

void al_convert_result_free(al_convert_result *r)
{
    free(r->layers);
    r->layers = NULL;
}

int al_convert_into(const char *src_path, al_model *dst, int method, uint64_t seed, al_data *d,
                    int B, long tokens, al_convert_result *r, al_err *e)
{
    al_model src;
    al_convert_sample sample = {0};
    long step;
    result_init(r);
    r->method = method;
    int rc = open_source(src_path, &src, &step, r, e);
    if (rc == 0 && src.cfg.vocab_size != dst->cfg.vocab_size)
        rc = al_errf(e, "%s: the checkpoint's vocabulary is %d, the model's %d", src_path,
                     src.cfg.vocab_size, dst->cfg.vocab_size);
    if (rc == 0)
        rc = convert_loaded(&src, dst, d, dst->cfg.seq_len, B, tokens, seed, &sample, r, e);
    al_model_free(&src);
    al_convert_sample_free(&sample);
    if (rc != 0) al_convert_result_free(r);
    return rc;
}

static json_t *err_json(const al_convert_err *x)
{
    json_t *o = json_object();
    const char *k[] = {"k_error", "v_error", "k_error_prenorm", "v_error_prenorm", "rope_kept"};
    double v[] = {x->k, x->v, x->k_prenorm, x->v_prenorm, x->rope_kept};
    for (int i = 0; i < 5; i++)
        if (!isnan(v[i])) json_object_set_new(o, k[i], json_real(v[i]));
    return o;
}

int al_convert_write_json(const char *path, const al_convert_result *r, al_err *e)
{
    json_t *layers = json_array();
    for (int l = 0; l < r->n_layer; l++) json_array_append_new(layers, err_json(&r->layers[l]));
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:o, s:o}", "source", r->src_path,
                          "source_sha256", r->src_sha256, "source_variant", r->src_variant,
                          "variant", r->dst_variant, "method", al_convert_method_name(r->method),
                          "sample_tokens", (json_int_t)r->sample_tokens, "mean", err_json(&r->mean),
                          "layers", layers);
    AL_ASSERT(o != NULL);
    if (!isnan(r->val_loss)) json_object_set_new(o, "val_loss", json_real(r->val_loss));
    if (!isnan(r->src_val_loss))
        json_object_set_new(o, "source_val_loss", json_real(r->src_val_loss));
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
    json_decref(o);
    AL_ASSERT(text != NULL);
    size_t n = strlen(text);
    text[n] = '\n';   /* json_dumps leaves room for its NUL */
    int rc = al_write_atomic(path, text, n + 1, e);
    free(text);
    return rc;
}
