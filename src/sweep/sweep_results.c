/*
 * sweep_results.c - the files a sweep keeps: marker, per-trial identity and
 * result (JSON, through jansson), and the summary table.
 */
#include "al_sweep_results.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "al_csv.h"
#include "al_registry.h"

static const char *const status_names[] = {"pending", "ok", "diverged", "failed", "killed",
                                           "interrupted"};
_Static_assert(sizeof status_names / sizeof *status_names == AL_TRIAL_N_STATUS,
               "one name per trial status");

const char *al_trial_status_name(int status)
{
    AL_ASSERT(status >= 0 && status < AL_TRIAL_N_STATUS);
    return status_names[status];
}

static int status_of(const char *name)
{
    for (int i = 1; i < AL_TRIAL_N_STATUS; i++)
        if (strcmp(name, status_names[i]) == 0) return i;
    return AL_TRIAL_NONE;
}

int al_trial_status_final(int status)
{
    return status == AL_TRIAL_OK || status == AL_TRIAL_DIVERGED;
}

void al_trial_result_init(al_trial_result *r)
{
    memset(r, 0, sizeof *r);
    r->final_train_loss = r->val_loss = r->best_val_loss = r->val_accuracy = NAN;
    r->test_loss = r->test_accuracy = r->init_val_loss = NAN;
    r->tokens_per_s = r->wall_s = NAN;
}

void al_results_trial_dir(char *out, size_t n, const char *dir, const al_sweep_trial *t)
{
    snprintf(out, n, "%s/%s", dir, t->id);
}

/* ------------------------------------------------------------ JSON files */

static int write_json(const char *path, json_t *j, al_err *e)
{
    char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(j);
    AL_ASSERT(text != NULL);
    size_t n = strlen(text);
    char *line = al_malloc(n + 2);
    memcpy(line, text, n);
    line[n] = '\n';
    free(text);
    int rc = al_write_atomic(path, line, n + 1, e);
    free(line);
    return rc;
}

static json_t *json_num(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static double num_of(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *str_of(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

static json_t *load_json(const char *path)
{
    json_error_t err;
    json_t *j = json_load_file(path, 0, &err);
    if (j && !json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

/* ------------------------------------------------------------ marker */

/* Empty but for what a runner killed before its marker was in place
 * leaves behind (the marker's temp file, the lock). */
static int dir_is_empty(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *de;
    int empty = 1;
    while (empty && (de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
            strcmp(de->d_name, ".lock") != 0 && !strstr(de->d_name, ".tmp."))
            empty = 0;
    closedir(d);
    return empty;
}

int al_results_check_owner(const char *dir, const al_sweep *s, al_err *e)
{
    struct stat st;
    char path[AL_PATH_LEN + 32];
    if (stat(dir, &st) != 0) return 0;
    if (!S_ISDIR(st.st_mode)) return al_errf(e, "%s: exists and is not a directory", dir);
    snprintf(path, sizeof path, "%s/sweep.json", dir);
    if (stat(path, &st) != 0) {
        if (dir_is_empty(dir)) return 0;
        return al_errf(e, "%s: not empty and not a sweep's results directory (no sweep.json); "
                       "choose another --out", dir);
    }
    json_t *j = load_json(path);
    if (!j) return al_errf(e, "%s: unreadable or corrupt; remove it or choose another --out",
                           path);
    int rc = 0;
    if (strcmp(str_of(j, "experiment"), s->name) != 0)
        rc = al_errf(e, "%s: belongs to experiment '%s' (from %s), not '%s'; choose another "
                     "--out or rename the experiment", dir, str_of(j, "experiment"),
                     str_of(j, "file"), s->name);
    json_decref(j);
    return rc;
}

int al_results_write_marker(const char *dir, const al_sweep *s, const char *const *sets,
                            int n_sets, al_err *e)
{
    char path[AL_PATH_LEN + 32];
    snprintf(path, sizeof path, "%s/sweep.json", dir);
    json_t *j = json_object();
    json_object_set_new(j, "experiment", json_string(s->name));
    json_object_set_new(j, "file", json_string(s->file));
    json_object_set_new(j, "description", json_string(s->description));
    json_t *a = json_array();
    for (int i = 0; i < n_sets; i++) json_array_append_new(a, json_string(sets[i]));
    json_object_set_new(j, "sets", a);
    json_t *cl = json_array();
    for (int i = 0; i < s->n_claims; i++) {
        const al_sweep_claim *c = &s->claims[i];
        json_t *o = json_object();
        json_object_set_new(o, "claim", json_string(c->text));
        json_object_set_new(o, "config", json_string(c->config));
        json_object_set_new(o, "versus", json_string(c->versus));
        if (c->expect) json_object_set_new(o, "expect", json_string(al_claim_expect_name(c->expect)));
        if (c->expect == AL_CLAIM_NO_WORSE) json_object_set_new(o, "margin", json_real(c->margin));
        json_array_append_new(cl, o);
    }
    json_object_set_new(j, "claims", cl);
    if (s->seq_on)   /* the report decides the rounds by the same plan */
        json_object_set_new(j, "seeds_until", json_pack("{s:i, s:i, s:i, s:s}", "min",
                            s->seq.min, "max", s->seq.max, "step", s->seq.step, "until",
                            "resolved"));
    return write_json(path, j, e);
}

/* ------------------------------------------------------------ trial files */

int al_results_write_trial(const char *tdir, const al_sweep *s, const al_sweep_trial *t,
                           al_err *e)
{
    char path[AL_PATH_LEN + AL_SWEEP_ID_LEN + 32];
    snprintf(path, sizeof path, "%s/trial.json", tdir);
    json_t *j = json_object();
    json_object_set_new(j, "id", json_string(t->id));
    json_object_set_new(j, "label", json_string(t->label));
    json_object_set_new(j, "config", json_string(t->config));
    json_object_set_new(j, "hash", json_string(t->hash));
    json_object_set_new(j, "index", json_integer(t->index));
    json_object_set_new(j, "seed", json_integer((json_int_t)t->seed));
    json_object_set_new(j, "experiment", json_string(s->name));
    return write_json(path, j, e);
}

/* The hash DIR/<id>/trial.json holds: 0, or -1 when there is none. */
static int trial_hash(const char *tdir, char hash[17])
{
    char path[AL_PATH_LEN + AL_SWEEP_ID_LEN + 32];
    snprintf(path, sizeof path, "%s/trial.json", tdir);
    json_t *j = load_json(path);
    if (!j) return -1;
    snprintf(hash, 17, "%s", str_of(j, "hash"));
    json_decref(j);
    return 0;
}

/* A label already taken in outdir by a trial of another hash gets the
 * hash appended: an edited file never reuses a result (al_sweep_spec.h,
 * "Identity"). */
void al_sweep_assign_ids(al_sweep *s, const char *outdir)
{
    for (int i = 0; i < s->n_trials; i++) {
        al_sweep_trial *t = &s->trials[i];
        char dir[AL_PATH_LEN + AL_SWEEP_ID_LEN + 2], hash[17];
        snprintf(dir, sizeof dir, "%s/%s", outdir, t->label);
        if (trial_hash(dir, hash) == 0 && strcmp(hash, t->hash) != 0)
            snprintf(t->id, sizeof t->id, "%.150s-%.8s", t->label, t->hash);
        else
            snprintf(t->id, sizeof t->id, "%s", t->label);
    }
}

int al_results_write_result(const char *tdir, const al_sweep_trial *t,
                            const al_trial_result *r, al_err *e)
{
    char path[AL_PATH_LEN + AL_SWEEP_ID_LEN + 32];
    snprintf(path, sizeof path, "%s/result.json", tdir);
    json_t *j = json_object();
    json_object_set_new(j, "id", json_string(t->id));
    json_object_set_new(j, "hash", json_string(t->hash));
    json_object_set_new(j, "status", json_string(al_trial_status_name(r->status)));
    json_object_set_new(j, "reason", json_string(r->reason));
    json_object_set_new(j, "steps_done", json_integer(r->steps_done));
    json_object_set_new(j, "steps", json_integer(r->steps));
    json_object_set_new(j, "final_train_loss", json_num(r->final_train_loss));
    json_object_set_new(j, "val_loss", json_num(r->val_loss));
    json_object_set_new(j, "best_val_loss", json_num(r->best_val_loss));
    json_object_set_new(j, "val_accuracy", json_num(r->val_accuracy));
    json_object_set_new(j, "test_loss", json_num(r->test_loss));
    json_object_set_new(j, "test_accuracy", json_num(r->test_accuracy));
    json_object_set_new(j, "init_val_loss", json_num(r->init_val_loss));
    const al_model_config *m = &t->cfg.model;
    json_object_set_new(j, "n_layer", json_integer(m->n_layer));
    json_object_set_new(j, "d_ff", json_integer(m->d_ff));
    json_object_set_new(j, "params", json_integer((json_int_t)t->params));
    json_object_set_new(j, "params_to", m->match.by ? json_integer((json_int_t)m->match.params_to)
                                                    : json_null());
    /* docs/costs.md: the compute the trial trained with (train.flops, 0
     * when steps were given) */
    json_object_set_new(j, "train_flops_per_token", json_num(t->train_flops_per_token));
    json_object_set_new(j, "train_flops", json_num(al_sweep_trial_train_flops(t, r->steps_done)));
    json_object_set_new(j, "train_flops_budget", json_num(t->cfg.train.flops));
    json_object_set_new(j, "tokens_per_s", json_num(r->tokens_per_s));
    json_object_set_new(j, "wall_s", json_num(r->wall_s));
    json_object_set_new(j, "cpu_model", json_string(r->cpu_model));
    json_object_set_new(j, "blas_core", json_string(r->blas_core));
    json_object_set_new(j, "threads", json_integer(r->threads));
    return write_json(path, j, e);
}

int al_results_read_result(const char *tdir, const char *hash, al_trial_result *r)
{
    char path[AL_PATH_LEN + AL_SWEEP_ID_LEN + 32];
    al_trial_result_init(r);
    snprintf(path, sizeof path, "%s/result.json", tdir);
    json_t *j = load_json(path);
    if (!j) return -1;
    int st = status_of(str_of(j, "status"));
    if (st == AL_TRIAL_NONE || strcmp(str_of(j, "hash"), hash) != 0) {
        json_decref(j);
        return -1;
    }
    r->status = st;
    snprintf(r->reason, sizeof r->reason, "%s", str_of(j, "reason"));
    r->steps_done = (int)json_integer_value(json_object_get(j, "steps_done"));
    r->steps = (int)json_integer_value(json_object_get(j, "steps"));
    r->final_train_loss = num_of(j, "final_train_loss");
    r->val_loss = num_of(j, "val_loss");
    r->best_val_loss = num_of(j, "best_val_loss");
    r->val_accuracy = num_of(j, "val_accuracy");
    r->test_loss = num_of(j, "test_loss");
    r->test_accuracy = num_of(j, "test_accuracy");
    r->init_val_loss = num_of(j, "init_val_loss");
    r->tokens_per_s = num_of(j, "tokens_per_s");
    r->wall_s = num_of(j, "wall_s");
    snprintf(r->cpu_model, sizeof r->cpu_model, "%s", str_of(j, "cpu_model"));
    snprintf(r->blas_core, sizeof r->blas_core, "%s", str_of(j, "blas_core"));
    r->threads = (int)json_integer_value(json_object_get(j, "threads"));
    json_decref(j);
    return 0;
}

/* ------------------------------------------------------------ cells */

static void put_int(FILE *f, long v)
{
    if (v >= 0) fprintf(f, "%ld", v);
    fputc(',', f);
}

static void put_num(FILE *f, double v, const char *fmt)
{
    if (isfinite(v)) fprintf(f, fmt, v);
    fputc(',', f);
}

/* A CSV field: quoted when it holds a comma, quote or line break. */
static void put_text(FILE *f, const char *s)
{
    if (!s[strcspn(s, ",\"\n\r")]) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
    fputc('"', f);
}

/* ,stage,upstream,init_convert,upstream_steps,init_val_loss (blank
 * without stages; the last four blank for a trial without upstream). */
static void stage_cells(FILE *f, const al_sweep *s, const al_sweep_trial *t,
                        const al_trial_result *r)
{
    fputc(',', f);
    if (s->n_stages) put_text(f, s->stages[t->stage].name);
    fputc(',', f);
    if (t->upstream < 0) {
        fputs(",,,", f);
        return;
    }
    const al_sweep_trial *u = &s->trials[t->upstream];
    put_text(f, u->id);
    fprintf(f, ",%s,%d,", t->cfg.train.init_convert, u->cfg.train.steps);
    if (isfinite(r->init_val_loss)) fprintf(f, "%.9g", r->init_val_loss);
}

/* ------------------------------------------------------------ settings */

/* The summary's setting columns: the names of every setting a variant of
 * the sweep declares, each once, by the variants' order in the registry
 * (`attnlab variants`) and each variant's in its own table. No variant is
 * named here: a new one's settings get their columns as they are. */
typedef struct set_cols {
    int n, cap;
    const char **name;
} set_cols;

static void add_settings(set_cols *c, const al_variant *v)
{
    for (int j = 0; v && j < al_variant_n_settings(v); j++) {
        const char *name = v->settings[j].name;
        int k = 0;
        while (k < c->n && strcmp(c->name[k], name) != 0) k++;
        if (k < c->n) continue;
        if (c->n == c->cap) {
            c->cap = c->cap ? 2 * c->cap : 16;
            const char **grown = realloc(c->name, (size_t)c->cap * sizeof *grown);
            AL_ASSERT(grown != NULL);
            c->name = grown;
        }
        c->name[c->n++] = name;
    }
}

/* Does trial t have variant v in any layer? */
static int uses_variant(const al_sweep_trial *t, const al_variant *v)
{
    for (int k = 0; k < al_config_n_attn(&t->cfg.model); k++)
        if (al_config_attn_item(&t->cfg.model, k).attn == v) return 1;
    return 0;
}

static void setting_columns(const al_sweep *s, set_cols *c)
{
    memset(c, 0, sizeof *c);
    for (int v = 0; v < al_variant_count(); v++)
        for (int i = 0; i < s->n_trials; i++)
            if (uses_variant(&s->trials[i], al_variant_at(v))) {
                add_settings(c, al_variant_at(v));
                break;
            }
    for (int i = 0; i < s->n_trials; i++)   /* a variant no longer registered: last */
        for (int k = 0; k < al_config_n_attn(&s->trials[i].cfg.model); k++)
            add_settings(c, al_config_attn_item(&s->trials[i].cfg.model, k).attn);
}

/* The shortest %g that reads back as v: "2" for a whole number, "0.1"
 * rather than 0.10000000000000001. */
static void put_setting(FILE *f, double v)
{
    char buf[32];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    fputs(buf, f);
}

/* One cell per setting column: the trial's value, blank when its variant
 * has no such setting. A model.layer_attention stack gives each item's
 * value in the list's order, joined by '/' as the variant column joins the
 * items ("2/-" under n_kv_head for gqa-kv2/mha: '-' where an item's variant
 * has no such setting), and blank when no item has it. */
static void setting_cells(FILE *f, const set_cols *c, const al_model_config *m)
{
    for (int k = 0; k < c->n; k++) {
        int any = 0;
        for (int i = 0; i < al_config_n_attn(m); i++) {
            al_attn_config a = al_config_attn_item(m, i);
            any |= a.attn && al_variant_setting_index(a.attn, c->name[k]) >= 0;
        }
        for (int i = 0; any && i < al_config_n_attn(m); i++) {
            al_attn_config a = al_config_attn_item(m, i);
            int j = a.attn ? al_variant_setting_index(a.attn, c->name[k]) : -1;
            if (i) fputc('/', f);
            if (j >= 0) put_setting(f, a.set[j]);
            else fputc('-', f);
        }
        fputc(',', f);
    }
}

/* ------------------------------------------------------------ summary */

/* ,decode_context,decode_batch,decode_tokens_per_s from the trial's
 * eval/decode.csv (eval.decode): at the report context where it was timed
 * there, else at the longest context timed; at the smallest batch timed.
 * Empty cells without one. */
static void decode_cells(FILE *f, const char *tdir, int kv_context)
{
    char path[AL_PATH_LEN + AL_SWEEP_ID_LEN + 32];
    al_csv t;
    al_err ignore;
    snprintf(path, sizeof path, "%s/eval/decode.csv", tdir);
    int best = -1, bc = 0, bb = 0;
    if (access(path, F_OK) == 0 && al_csv_read(path, &t, &ignore) == 0) {
        for (int i = 0; i < t.n_rows; i++) {
            int C = atoi(al_csv_cell(&t, i, "context")), B = atoi(al_csv_cell(&t, i, "batch"));
            int better = best < 0 || (C == kv_context && bc != kv_context) ||
                         ((C == kv_context) == (bc == kv_context) &&
                          (C > bc || (C == bc && B < bb)));
            if (C > 0 && B > 0 && better) best = i, bc = C, bb = B;
        }
        if (best >= 0)
            fprintf(f, ",%d,%d,%s", bc, bb, al_csv_cell(&t, best, "tokens_per_s"));
        al_csv_free(&t);
    }
    if (best < 0) fputs(",,,", f);
}

static void summary_row(FILE *f, const al_sweep *s, const set_cols *c, const al_sweep_trial *t,
                        const al_trial_result *r, const char *tdir)
{
    const al_model_config *m = &t->cfg.model;
    put_text(f, t->id);
    fputc(',', f);
    put_text(f, t->config);
    fputc(',', f);
    put_text(f, t->group);
    fputc(',', f);
    put_text(f, t->tuned);
    char variant[256];
    al_sweep_stack_label(variant, sizeof variant, m, "/");
    fprintf(f, ",%s,%d,", t->tuned[0] ? s->select_by : "", t->baseline);
    put_text(f, variant);
    fputc(',', f);
    setting_cells(f, c, m);
    fprintf(f, "%s,%llu,", m->causal ? "true" : "false", (unsigned long long)t->seed);
    put_int(f, m->n_layer);
    put_int(f, m->d_ff);
    put_int(f, (long)t->params);
    put_int(f, m->match.by ? (long)m->match.params_to : -1);
    put_int(f, (long)(4 * t->kv_elems_per_token));
    put_int(f, t->kv_context);
    put_int(f, (long)t->kv_bytes_at_context);
    put_int(f, t->cfg.train.steps);
    put_int(f, (long)t->cfg.train.batch_size * m->seq_len);
    put_num(f, r->final_train_loss, "%.9g");
    put_num(f, r->val_loss, "%.9g");
    put_num(f, r->best_val_loss, "%.9g");
    put_num(f, r->val_accuracy, "%.9g");
    put_num(f, r->test_loss, "%.9g");
    put_num(f, r->test_accuracy, "%.9g");
    put_num(f, r->tokens_per_s, "%.1f");
    put_num(f, r->wall_s, "%.2f");
    fprintf(f, "%s,", al_trial_status_name(r->status));
    put_text(f, r->reason);
    stage_cells(f, s, t, r);
    fputc(',', f);
    put_text(f, r->cpu_model);
    fputc(',', f);
    put_text(f, r->blas_core);
    fputc(',', f);
    if (r->threads > 0) fprintf(f, "%d", r->threads);
    fputc(',', f);   /* the cost columns (docs/costs.md), appended */
    put_num(f, t->train_flops_per_token, "%.0f");
    put_num(f, al_sweep_trial_train_flops(t, r->steps_done), "%.0f");
    put_num(f, t->decode_flops_per_token, "%.0f");
    put_num(f, t->decode_bytes_per_token, "%.0f");
    if (isfinite(t->arithmetic_intensity)) fprintf(f, "%.6g", t->arithmetic_intensity);
    decode_cells(f, tdir, t->kv_context);
    fputc(',', f);   /* sweep.scaling: the size's index and the budget */
    if (t->scaling_size >= 0) fprintf(f, "%d,%.9g", t->scaling_size, t->scaling_flops);
    else fputc(',', f);
    fputc('\n', f);
}

int al_results_write_summary(const char *dir, const al_sweep *s, al_err *e)
{
    char path[AL_PATH_LEN + 32], tmp[AL_PATH_LEN + 64], tdir[AL_PATH_LEN + AL_SWEEP_ID_LEN + 2];
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    FILE *f = al_open_atomic(path, tmp, sizeof tmp, e);
    if (!f) return -1;
    set_cols c;
    setting_columns(s, &c);
    fputs("trial,config,group,tuned,select_by,baseline,variant,", f);
    for (int k = 0; k < c.n; k++) fprintf(f, "%s,", c.name[k]);
    fputs("causal,seed,n_layer,d_ff,params,params_to,kv_bytes_per_token,kv_context,"
          "kv_bytes_at_context,steps,"
          "tokens_per_step,final_train_loss,val_loss,best_val_loss,val_accuracy,test_loss,"
          "test_accuracy,tokens_per_s,wall_s,status,reason,stage,upstream,init_convert,"
          "upstream_steps,init_val_loss,cpu_model,blas_core,threads,train_flops_per_token,"
          "train_flops,decode_flops_per_token,decode_bytes_per_token,arithmetic_intensity,"
          "decode_context,decode_batch,decode_tokens_per_s,scaling_size,scaling_flops\n", f);
    for (int i = 0; i < s->n_trials; i++) {
        al_trial_result r;
        al_results_trial_dir(tdir, sizeof tdir, dir, &s->trials[i]);
        al_results_read_result(tdir, s->trials[i].hash, &r);
        summary_row(f, s, &c, &s->trials[i], &r, tdir);
    }
    free(c.name);
    return al_commit_atomic(f, tmp, path, e);
}
