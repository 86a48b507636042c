/*
 * checkpoint.c - a model onto safetensors and back, and the state that lets
 * a training run resume bit-identically. The container itself is
 * safetensors.c; here are the names, the config metadata and the checks
 * against the model table.
 */
#include "al_checkpoint.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_bf16.h"
#include "al_config_io.h"
#include "config_keys.h"
#include "checkpoint_diff.h"
#include "al_kvcache.h"
#include "al_registry.h"
#include "al_safetensors.h"
#include "al_sha256.h"

/* Refuse to allocate a model this much larger than the file's data. */
#define MAX_UNBACKED_FLOATS (1u << 22)

/* ------------------------------------------------------------ config <-> JSON */

static const char *variant_origin(const al_variant *ops)
{
    for (int i = 0; i < al_variant_count(); i++)
        if (al_variant_at(i) == ops) return al_variant_origin(i);
    return "built-in";
}

/* The stack's origin: the first layer variant that came from a plugin (the
 * one loading would need), else "built-in". */
static const char *stack_origin(const al_model_config *c)
{
    for (int k = 0; k < al_config_n_attn(c); k++) {
        const char *o = variant_origin(al_config_attn_item(c, k).attn);
        if (strcmp(o, "built-in") != 0) return o;
    }
    return "built-in";
}

/* The model mapping as built (the model's d_ff), from the config's key
 * tables: the same keys as a config file's model mapping. */
char *al_checkpoint_config_json(const al_model *m)
{
    al_model_config c = m->cfg;
    c.d_ff = m->d_ff;
    return al_config_model_json(&c);
}

/* ------------------------------------------------------------ saving */

int al_checkpoint_save(const char *path, const al_model *m, long step, al_err *e)
{
    return al_checkpoint_save_meta(path, m, step, NULL, 0, e);
}

/* What the model's products ran at: its own, else the process's. */
static int model_precision(const al_model *m)
{
    return m->precision >= 0 ? m->precision : al_gemm_precision();
}

int al_checkpoint_save_meta(const char *path, const al_model *m, long step,
                            const char *const *extra, int n_extra, al_err *e)
{
    enum { BASE_META = 6, MAX_EXTRA = 16 };
    AL_ASSERT(n_extra >= 0 && n_extra <= MAX_EXTRA);
    al_st_out *t = al_calloc((size_t)m->n_tensors, sizeof *t);
    for (int i = 0; i < m->n_tensors; i++) {
        const al_tensor *x = &m->tensors[i];
        t[i] = (al_st_out){x->name, AL_ST_F32, x->ndim, {x->shape[0], x->shape[1]},
                           m->params + x->offset};
    }
    char *cfg = al_checkpoint_config_json(m), stepbuf[32], ver[16];
    snprintf(stepbuf, sizeof stepbuf, "%ld", step);
    snprintf(ver, sizeof ver, "%d", AL_VARIANT_API_VERSION);
    const char *meta[2 * (BASE_META + MAX_EXTRA)] = {
        "format", "pt", "attnlab.config", cfg, "attnlab.step", stepbuf,
        "attnlab.interface_version", ver, "attnlab.variant_origin", stack_origin(&m->cfg),
        "attnlab.precision", model_precision(m) == AL_PRECISION_BF16 ? "bf16" : "f32"};
    for (int i = 0; i < 2 * n_extra; i++) meta[2 * BASE_META + i] = extra[i];
    int rc = al_st_write(path, t, m->n_tensors, meta, BASE_META + n_extra, e);
    free(cfg);
    free(t);
    return rc;
}

/* ------------------------------------------------------------ loading */

/* A whole number in [lo, hi] from a metadata string. */
static int meta_long(const al_st_file *f, const char *key, long lo, long hi, long *out, al_err *e)
{
    const char *s = al_st_meta(f, key);
    char *end;
    if (!s) return al_errf(e, "%s: no '%s' in __metadata__ (not an attnlab file?)", f->path, key);
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return al_errf(e, "%s: __metadata__ '%s' must be a whole number in [%ld, %ld]",
                       f->path, key, lo, hi);
    *out = v;
    return 0;
}

static int read_meta(const al_st_file *f, al_model_config *c, long *step, long *ver,
                     al_err *e)
{
    const char *cfg = al_st_meta(f, "attnlab.config");
    if (!cfg)
        return al_errf(e, "%s: no 'attnlab.config' in __metadata__ (not an attnlab "
                       "checkpoint?)", f->path);
    if (meta_long(f, "attnlab.step", 0, 1L << 62, step, e) ||
        meta_long(f, "attnlab.interface_version", 1, 1L << 30, ver, e))
        return -1;
    return al_ckpt_config_from_json(f->path, cfg, al_st_meta(f, "attnlab.variant_origin"), c, e);
}

static void fmt_shape(char *out, size_t n, int ndim, const int64_t *shape)
{
    size_t l = (size_t)snprintf(out, n, "[");
    for (int d = 0; d < ndim && l < n; d++)
        l += (size_t)snprintf(out + l, n - l, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (l < n) snprintf(out + l, n - l, "]");
}

/* One model tensor against the file: present, F32, same shape, finite. */
static int check_tensor(const al_st_file *f, const al_tensor *x, al_err *e)
{
    const al_st_tensor *t = al_st_find(f, x->name);
    if (!t) return al_errf(e, "%s: missing tensor '%s'", f->path, x->name);
    if (t->dtype != AL_ST_F32)
        return al_errf(e, "%s: tensor '%s' has dtype %s, expected F32", f->path, x->name,
                       al_st_dtype_name(t->dtype));
    int64_t want[2] = {x->shape[0], x->shape[1]};
    if (t->ndim != x->ndim || t->shape[0] != want[0] || (x->ndim == 2 && t->shape[1] != want[1])) {
        char a[96], b[96];
        fmt_shape(a, sizeof a, t->ndim, t->shape);
        fmt_shape(b, sizeof b, x->ndim, want);
        return al_errf(e, "%s: tensor '%s' has shape %s, the model's config wants %s",
                       f->path, x->name, a, b);
    }
    for (size_t i = 0; i < t->numel; i++) {
        float v;
        memcpy(&v, t->data + 4 * i, 4);
        if (!isfinite(v))
            return al_errf(e, "%s: tensor '%s' holds a non-finite value at index %zu",
                           f->path, x->name, i);
    }
    return 0;
}

/* Every tensor of the model's table is in the file, and nothing else. */
static int check_table(const al_st_file *f, const al_model *m, al_err *e)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (check_tensor(f, &m->tensors[i], e)) return -1;
    for (int i = 0; i < f->n; i++)
        if (!al_model_tensor(m, f->t[i].name)) {
            char name[128];
            return al_errf(e, "%s: unexpected tensor '%s' (not in the model its config "
                           "describes)", f->path, al_st_printable(name, sizeof name, f->t[i].name));
        }
    return 0;
}

/* The model the file's config describes, unless it would be far larger
 * than the file's data (a corrupt size): then an error, not an allocation. */
static int init_model(const al_st_file *f, const al_model_config *c, al_model *m, al_err *e)
{
    char msg[AL_ERR_LEN];
    al_err sub;
    size_t n = al_model_param_count(c, &sub), have = (f->size - f->data_start) / 4;
    if (!n) {
        snprintf(msg, sizeof msg, "%s", sub.msg);
        return al_errf(e, "%s: %s", f->path, msg);
    }
    if (n > have && n - have > MAX_UNBACKED_FLOATS)
        return al_errf(e, "%s: the config describes %zu parameters but the file holds %zu "
                       "floats", f->path, n, have);
    if (al_model_init(m, c, &sub) != 0) {
        snprintf(msg, sizeof msg, "%s", sub.msg);
        return al_errf(e, "%s: %s", f->path, msg);
    }
    return 0;
}

/* "attnlab.precision" into prec (8 bytes): f32 when absent (a checkpoint
 * from before bf16). */
static int read_precision(const al_st_file *f, char *prec, al_err *e)
{
    const char *p = al_st_meta(f, "attnlab.precision");
    if (!p) p = "f32";
    if (strcmp(p, "f32") != 0 && strcmp(p, "bf16") != 0)
        return al_errf(e, "%s: __metadata__ 'attnlab.precision' must be \"f32\" or \"bf16\"",
                       f->path);
    snprintf(prec, 8, "%s", p);
    return 0;
}

/* al_checkpoint_load, also telling the interface version it was saved by
 * and the precision it was trained in (prec may be NULL). */
static int load_checkpoint(const char *path, al_model *m, long *step, long *version,
                           char *prec, al_err *e)
{
    memset(m, 0, sizeof *m);
    al_st_file f;
    if (al_st_read(path, &f, e) != 0) return -1;
    al_model_config c;
    long st = 0;
    char p[8];
    int rc = read_meta(&f, &c, &st, version, e);
    if (rc == 0) rc = read_precision(&f, prec ? prec : p, e);
    if (rc == 0) rc = init_model(&f, &c, m, e);
    if (rc == 0) rc = check_table(&f, m, e);
    for (int i = 0; rc == 0 && i < m->n_tensors; i++) {
        const al_tensor *x = &m->tensors[i];
        memcpy(m->params + x->offset, al_st_find(&f, x->name)->data, x->numel * sizeof(float));
    }
    if (rc == 0 && step) *step = st;
    if (rc != 0) al_model_free(m);
    al_st_free(&f);
    return rc;
}

int al_checkpoint_load(const char *path, al_model *m, long *step, al_err *e)
{
    long version;
    return load_checkpoint(path, m, step, &version, NULL, e);
}

int al_checkpoint_load_run(const char *path, al_model *m, long *step, al_err *e)
{
    long version;
    char prec[8];
    if (load_checkpoint(path, m, step, &version, prec, e) != 0) return -1;
    if (al_model_set_precision(m, prec, e) == 0) return 0;
    char why[AL_ERR_LEN];
    snprintf(why, sizeof why, "%s", e->msg);
    al_model_free(m);
    return al_errf(e, "%s: trained in bf16: %s", path, why);
}

/* ------------------------------------------------------------ init from */

/* One tensor of the model against the file, appended to `why` when it does
 * not fit. Returns 1 on a mismatch. */
static int init_mismatch(const al_st_file *f, const al_tensor *x, char *why, size_t n)
{
    const al_st_tensor *t = al_st_find(f, x->name);
    int64_t want[2] = {x->shape[0], x->shape[1]};
    char a[96], b[96], one[400];
    if (!t) {
        snprintf(one, sizeof one, "'%s' is missing", x->name);
    } else if (t->dtype != AL_ST_F32) {
        snprintf(one, sizeof one, "'%s' has dtype %s, not F32", x->name,
                 al_st_dtype_name(t->dtype));
    } else if (t->ndim != x->ndim || t->shape[0] != want[0] ||
               (x->ndim == 2 && t->shape[1] != want[1])) {
        fmt_shape(a, sizeof a, t->ndim, t->shape);
        fmt_shape(b, sizeof b, x->ndim, want);
        snprintf(one, sizeof one, "'%s' has shape %s, the model wants %s", x->name, a, b);
    } else {
        return 0;
    }
    size_t l = strlen(why);
    if (l < 600) snprintf(why + l, n - l, "%s%s", l ? "; " : "", one);
    else if (why[l - 1] != '.') snprintf(why + l, n - l, "; ...");
    return 1;
}

int al_checkpoint_load_into(const char *path, al_model *m, al_err *e)
{
    al_st_file f;
    if (al_st_read(path, &f, e) != 0) return -1;
    char why[4096] = "", name[128];
    int bad = 0;
    for (int i = 0; i < m->n_tensors; i++)
        bad += init_mismatch(&f, &m->tensors[i], why, sizeof why);
    for (int i = 0; i < f.n; i++)
        if (!al_model_tensor(m, f.t[i].name)) {
            size_t l = strlen(why);
            if (l < 600)
                snprintf(why + l, sizeof why - l, "%sunexpected '%s'", l ? "; " : "",
                         al_st_printable(name, sizeof name, f.t[i].name));
            else if (why[l - 1] != '.')
                snprintf(why + l, sizeof why - l, "; ...");
            bad++;
        }
    int rc = 0;
    if (bad)
        rc = al_errf(e, "%s: does not fit the config's model (%d tensor%s): %.900s", path, bad,
                     bad == 1 ? "" : "s", why);
    for (int i = 0; rc == 0 && i < m->n_tensors; i++)
        rc = check_tensor(&f, &m->tensors[i], e);   /* finite values */
    for (int i = 0; rc == 0 && i < m->n_tensors; i++) {
        const al_tensor *x = &m->tensors[i];
        memcpy(m->params + x->offset, al_st_find(&f, x->name)->data, x->numel * sizeof(float));
    }
    al_st_free(&f);
    return rc;
}

/* ------------------------------------------------------------ training state */

static char *config_yaml(const al_config *c)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    AL_ASSERT(f != NULL);
    al_config_write_yaml_identity(c, f);   /* report.* is not the run */
    AL_ASSERT(fclose(f) == 0);
    return buf;
}

static void put_double(char *buf, size_t n, double x) { snprintf(buf, n, "%.17g", x); }

int al_checkpoint_save_run(const char *dir, const al_config *c, const al_model *m,
                           const al_adamw *o, const al_train_state *s, al_err *e)
{
    AL_ASSERT(o->n == m->n_params);
    char path[4200], v[10][40], *yaml = config_yaml(c);
    char plugins[AL_MAX_PLUGINS * 65 + 1] = "";
    const al_run_inputs *in = &s->inputs;
    /* the parameters too, so that the state alone resumes: a kill between
     * this file and model.safetensors leaves a pair of different steps */
    const al_st_out t[] = {
        {"params", AL_ST_F32, 1, {(int64_t)m->n_params}, m->params},
        {"adamw.m", AL_ST_F32, 1, {(int64_t)o->n}, o->m},
        {"adamw.v", AL_ST_F32, 1, {(int64_t)o->n}, o->v},
        {"data_rng", AL_ST_U64, 1, {4}, s->rng.s},
        {"metrics", AL_ST_F64, 2, {s->n_rows, AL_METRIC_COLS}, s->rows},
    };
    snprintf(v[0], sizeof v[0], "%ld", s->step);
    snprintf(v[1], sizeof v[1], "%ld", o->step);
    snprintf(v[2], sizeof v[2], "%ld", s->tokens);
    snprintf(v[3], sizeof v[3], "%ld", s->loss_count);
    put_double(v[4], sizeof v[4], s->train_time);
    put_double(v[5], sizeof v[5], s->elapsed);
    put_double(v[6], sizeof v[6], s->loss_sum);
    put_double(v[7], sizeof v[7], s->last_loss);
    snprintf(v[8], sizeof v[8], "%d", AL_VARIANT_API_VERSION);
    snprintf(v[9], sizeof v[9], "%ld", in->data_bytes);
    for (int i = 0; i < in->n_plugins; i++)
        snprintf(plugins + strlen(plugins), sizeof plugins - strlen(plugins), "%s%s",
                 i ? "," : "", in->plugin_sha256[i]);
    const char *meta[] = {
        "attnlab.step", v[0], "attnlab.adamw_step", v[1], "attnlab.tokens", v[2],
        "attnlab.loss_count", v[3], "attnlab.train_time", v[4], "attnlab.elapsed", v[5],
        "attnlab.loss_sum", v[6], "attnlab.last_loss", v[7], "attnlab.config_yaml", yaml,
        "attnlab.metric_columns", "step,train_loss,val_loss,val_accuracy,lr,tokens_per_s,elapsed_s",
        "attnlab.interface_version", v[8], "attnlab.data_bytes", v[9],
        "attnlab.data_sha256", in->data_sha256, "attnlab.plugin_sha256", plugins,
        "attnlab.init_sha256", s->init_sha256,
    };
    int n_meta = (int)(sizeof meta / sizeof meta[0] / 2) - !s->init_sha256[0];
    snprintf(path, sizeof path, "%s/%s", dir, AL_TRAIN_STATE_FILE);
    int rc = al_st_write(path, t, 5, meta, n_meta, e);
    free(yaml);
    if (rc != 0) return -1;
    snprintf(path, sizeof path, "%s/%s", dir, AL_CHECKPOINT_FILE);
    return al_checkpoint_save(path, m, s->step, e);
}

/* The saved config against the current one (checkpoint_diff.c). */
static int check_same_config(const al_st_file *f, const al_config *c, al_err *e)
{
    const char *saved = al_st_meta(f, "attnlab.config_yaml");
    if (!saved) return al_errf(e, "%s: no 'attnlab.config_yaml' in __metadata__", f->path);
    char *now = config_yaml(c);
    int rc = al_checkpoint_config_diff(f->path, saved, now, e);
    free(now);
    return rc;
}

static int meta_double(const al_st_file *f, const char *key, double *out, al_err *e)
{
    const char *s = al_st_meta(f, key);
    char *end;
    if (!s) return al_errf(e, "%s: no '%s' in __metadata__", f->path, key);
    *out = strtod(s, &end);
    if (end == s || *end) return al_errf(e, "%s: __metadata__ '%s' is not a number", f->path, key);
    return 0;
}

static int read_counters(const al_st_file *f, al_train_state *s, long *adam_step, al_err *e)
{
    const long big = 1L << 62;
    return meta_long(f, "attnlab.step", 0, big, &s->step, e) ||
           meta_long(f, "attnlab.adamw_step", 0, big, adam_step, e) ||
           meta_long(f, "attnlab.tokens", 0, big, &s->tokens, e) ||
           meta_long(f, "attnlab.loss_count", 0, big, &s->loss_count, e) ||
           meta_double(f, "attnlab.train_time", &s->train_time, e) ||
           meta_double(f, "attnlab.elapsed", &s->elapsed, e) ||
           meta_double(f, "attnlab.loss_sum", &s->loss_sum, e) ||
           meta_double(f, "attnlab.last_loss", &s->last_loss, e) ? -1 : 0;
}

/* A state tensor of the given dtype and shape (ndim 1 or 2; cols < 0 means
 * any number of rows of -cols). */
static const al_st_tensor *state_tensor(const al_st_file *f, const char *name, int dtype,
                                        int64_t rows, int64_t cols, al_err *e)
{
    const al_st_tensor *t = al_st_find(f, name);
    int ok = t && t->dtype == dtype && t->ndim == (cols ? 2 : 1) &&
             (rows < 0 || t->shape[0] == rows) && (!cols || t->shape[1] == cols);
    if (!ok) {
        al_errf(e, "%s: tensor '%s' is missing or not %s of the expected shape", f->path,
                name, al_st_dtype_name(dtype));
        return NULL;
    }
    return t;
}

static int read_state_tensors(const al_st_file *f, al_adamw *o, al_train_state *s, al_err *e)
{
    const al_st_tensor *m = state_tensor(f, "adamw.m", AL_ST_F32, (int64_t)o->n, 0, e);
    const al_st_tensor *v = m ? state_tensor(f, "adamw.v", AL_ST_F32, (int64_t)o->n, 0, e) : NULL;
    const al_st_tensor *r = v ? state_tensor(f, "data_rng", AL_ST_U64, 4, 0, e) : NULL;
    const al_st_tensor *x = r ? state_tensor(f, "metrics", AL_ST_F64, -1, AL_METRIC_COLS, e) : NULL;
    if (!x) return -1;
    memcpy(o->m, m->data, o->n * sizeof(float));
    memcpy(o->v, v->data, o->n * sizeof(float));
    memcpy(s->rng.s, r->data, sizeof s->rng.s);
    s->n_rows = (int)x->shape[0];
    s->rows = al_malloc(x->numel * sizeof(double));
    memcpy(s->rows, x->data, x->numel * sizeof(double));
    return 0;
}

/* ---- what the run started from */

int al_run_inputs_of(al_run_inputs *in, const al_config *c, const void *data, size_t n,
                     al_err *e)
{
    memset(in, 0, sizeof *in);
    in->data_bytes = data ? (long)n : -1;
    if (data) al_sha256_hex(data, n, in->data_sha256);
    in->n_plugins = c->n_plugins;
    for (int i = 0; i < c->n_plugins; i++) {
        char *buf;
        size_t len;
        if (al_read_file(c->plugins[i], &buf, &len, e) != 0) return -1;
        al_sha256_hex(buf, len, in->plugin_sha256[i]);
        free(buf);
    }
    return 0;
}

static int interface_changed(al_err *e, const char *path, long version)
{
    al_errf(e, "%s: cannot resume: the run was started by an attnlab whose variant interface "
            "is version %ld, this one has version %d; finish it with that attnlab, or train "
            "it again from the start in a new directory", path, version,
            AL_VARIANT_API_VERSION);
    return AL_RESUME_CHANGED;
}

/* States saved before the version was recorded are checked through
 * model.safetensors, which always had it (restore_params). */
static int check_interface(const al_st_file *f, al_err *e)
{
    long v;
    if (!al_st_meta(f, "attnlab.interface_version")) return 0;
    if (meta_long(f, "attnlab.interface_version", 1, 1L << 30, &v, e)) return -1;
    return v == AL_VARIANT_API_VERSION ? 0 : interface_changed(e, f->path, v);
}

static int is_hex64(const char *s)
{
    return strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64;
}

/* The recorded inputs; all absent (a state from before they were kept)
 * leaves data_bytes 0 and n_plugins -1: nothing to check. */
static int read_inputs(const al_st_file *f, al_run_inputs *in, al_err *e)
{
    const char *sha = al_st_meta(f, "attnlab.data_sha256");
    const char *pl = al_st_meta(f, "attnlab.plugin_sha256");
    in->n_plugins = -1;
    if (!sha && !pl && !al_st_meta(f, "attnlab.data_bytes")) return 0;
    if (!sha || !pl || meta_long(f, "attnlab.data_bytes", -1, 1L << 62, &in->data_bytes, e))
        return al_errf(e, "%s: __metadata__ 'attnlab.data_bytes', 'attnlab.data_sha256' and "
                       "'attnlab.plugin_sha256' must come together", f->path);
    if ((in->data_bytes >= 0) != is_hex64(sha) || (in->data_bytes < 0 && sha[0]))
        return al_errf(e, "%s: __metadata__ 'attnlab.data_sha256' must be 64 hex digits "
                       "(empty without a data file)", f->path);
    snprintf(in->data_sha256, sizeof in->data_sha256, "%s", sha);
    int bad = 0;
    for (in->n_plugins = 0; *pl && !bad; in->n_plugins++) {
        char *d = in->plugin_sha256[in->n_plugins];
        bad = in->n_plugins == AL_MAX_PLUGINS || strcspn(pl, ",") != 64;
        if (bad) break;
        memcpy(d, pl, 64);
        d[64] = 0;
        pl += 64;
        bad = !is_hex64(d) || (pl[0] == ',' && !pl[1]);
        pl += pl[0] == ',';
    }
    if (bad)
        return al_errf(e, "%s: __metadata__ 'attnlab.plugin_sha256' must be at most %d "
                       "SHA-256 digests joined by ','", f->path, AL_MAX_PLUGINS);
    return 0;
}

/* The data and plugin files now against those the run started from. */
static int check_inputs(const char *path, const al_config *c, const al_run_inputs *was,
                        const al_run_inputs *now, al_err *e)
{
    char what[AL_PATH_LEN + 32];
    if (was->n_plugins < 0 || !now) return 0;   /* not recorded */
    if (strcmp(c->data.source, "text") == 0) snprintf(what, sizeof what, "'%s'", c->data.path);
    else snprintf(what, sizeof what, "of source '%s'", c->data.source);
    if (was->data_bytes != now->data_bytes || strcmp(was->data_sha256, now->data_sha256)) {
        al_errf(e, "%s: cannot resume: the data file %s changed since the run started (then "
                "%ld bytes, SHA-256 %.12s..., now %ld bytes, SHA-256 %.12s...); put the "
                "original back, or train again from the start in a new directory", path,
                what, was->data_bytes, was->data_sha256, now->data_bytes, now->data_sha256);
        return AL_RESUME_CHANGED;
    }
    if (was->n_plugins != now->n_plugins)   /* the config check saw the same list */
        return al_errf(e, "%s: the run recorded %d plugin digests, its config lists %d",
                       path, was->n_plugins, now->n_plugins);
    for (int i = 0; i < now->n_plugins; i++) {
        if (strcmp(was->plugin_sha256[i], now->plugin_sha256[i]) == 0) continue;
        al_errf(e, "%s: cannot resume: plugin '%s' changed since the run started (then "
                "SHA-256 %.12s..., now %.12s...); put back the build the run used, or train "
                "again from the start in a new directory", path, c->plugins[i],
                was->plugin_sha256[i], now->plugin_sha256[i]);
        return AL_RESUME_CHANGED;
    }
    return 0;
}

/* The first key of the model config that differs between two models. */
static void config_diff(const al_model *a, const al_model *b, char *out, size_t n)
{
    char *ta = al_checkpoint_config_json(a), *tb = al_checkpoint_config_json(b);
    json_t *ja = json_loads(ta, 0, NULL), *jb = json_loads(tb, 0, NULL);
    const char *k;
    json_t *v;
    snprintf(out, n, "?");
    json_object_foreach(jb, k, v) {
        if (json_equal(json_object_get(ja, k), v)) continue;
        snprintf(out, n, "%s", k);
        break;
    }
    json_decref(ja), json_decref(jb), free(ta), free(tb);
}

/* The parameters kept in the state itself: as many as m has, finite. */
static int state_params(const al_st_file *f, al_model *m, al_err *e)
{
    const al_st_tensor *t = state_tensor(f, "params", AL_ST_F32, (int64_t)m->n_params, 0, e);
    if (!t) return -1;
    memcpy(m->params, t->data, m->n_params * sizeof(float));
    for (size_t i = 0; i < m->n_params; i++)
        if (!isfinite(m->params[i]))
            return al_errf(e, "%s: tensor 'params' holds a non-finite value at index %zu",
                           f->path, i);
    return 0;
}

/* The parameters from dir's model.safetensors, which must hold the model
 * m describes at the state's step (states saved before they kept the
 * parameters themselves). */
static int restore_params(const char *dir, al_model *m, long step, al_err *e)
{
    char path[4200], key[64];
    al_model saved;
    long at;
    snprintf(path, sizeof path, "%s/%s", dir, AL_CHECKPOINT_FILE);
    long version;
    if (load_checkpoint(path, &saved, &at, &version, NULL, e) != 0) return -1;
    int rc = 0;
    config_diff(&saved, m, key, sizeof key);
    if (version != AL_VARIANT_API_VERSION)
        rc = interface_changed(e, path, version);
    else if (saved.n_params != m->n_params || strcmp(key, "?") != 0)
        rc = al_errf(e, "%s: cannot resume: its model differs from the run's config in '%s'",
                     path, key);
    else if (at != step)
        rc = al_errf(e, "%s: cannot resume: it is at step %ld but %s is at step %ld", path,
                     at, AL_TRAIN_STATE_FILE, step);
    else
        memcpy(m->params, saved.params, m->n_params * sizeof(float));
    al_model_free(&saved);
    return rc;
}

int al_checkpoint_resume(const char *dir, const al_config *c, const al_run_inputs *now,
                         al_model *m, al_adamw *o, al_train_state *s, al_err *e)
{
    char path[4200];
    long adam_step = 0;
    memset(s, 0, sizeof *s);
    snprintf(path, sizeof path, "%s/%s", dir, AL_TRAIN_STATE_FILE);
    al_st_file f;
    if (al_st_read(path, &f, e) != 0) return -1;
    int rc = check_interface(&f, e);
    if (rc == 0) rc = check_same_config(&f, c, e);
    if (rc == 0) rc = read_inputs(&f, &s->inputs, e);
    if (rc == 0) rc = check_inputs(f.path, c, &s->inputs, now, e);
    if (rc == 0) rc = read_counters(&f, s, &adam_step, e);
    const char *init = al_st_meta(&f, "attnlab.init_sha256");
    if (rc == 0 && init) snprintf(s->init_sha256, sizeof s->init_sha256, "%.64s", init);
    if (rc == 0) rc = read_state_tensors(&f, o, s, e);
    if (rc == 0 && al_st_find(&f, "params")) rc = state_params(&f, m, e);
    else if (rc == 0) rc = restore_params(dir, m, s->step, e);   /* a state from before */
    al_st_free(&f);
    if (rc != 0) {
        free(s->rows);
        memset(s, 0, sizeof *s);
        return rc == AL_RESUME_CHANGED ? rc : -1;
    }
    o->step = adam_step;
    return 0;
}

int al_checkpoint_config_roundtrip(const al_model_config *c, al_model_config *out, al_err *e)
{
    char *json = al_config_model_json(c);
    int rc = al_ckpt_config_from_json("(config)", json, stack_origin(c), out, e);
    free(json);
    return rc;
}
