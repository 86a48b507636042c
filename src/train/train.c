/*
 * train.c - the training loop shared by `attnlab train` and the sweep runner.
 */
#include "al_train.h"

#include <cblas.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "al_checkpoint.h"
#include "al_config_io.h"
#include "al_convert.h"
#include "al_data.h"
#include "al_mpi.h"
#include "al_data_parallel.h"
#include "al_eval.h"
#include "al_bf16.h"
#include "al_guard.h"
#include "al_memory.h"
#include "al_model.h"
#include "al_optim.h"
#include "al_parallel.h"
#include "al_sha256.h"

/* ------------------------------------------------------------ metrics */

typedef struct metric_row {
    int step;
    double train_loss, val_loss, val_acc, lr, tok_s, elapsed;
} metric_row;

typedef struct metrics {
    metric_row *rows;
    int n, cap;
} metrics;

static void metrics_add(metrics *mt, metric_row r)
{
    if (mt->n == mt->cap) {
        mt->cap = mt->cap ? 2 * mt->cap : 64;
        metric_row *nr = realloc(mt->rows, mt->cap * sizeof *nr);
        AL_ASSERT(nr != NULL);
        mt->rows = nr;
    }
    mt->rows[mt->n++] = r;
}

static void put_num(FILE *f, double x)
{
    if (!isnan(x)) fprintf(f, "%.6g", x);
}

static int metrics_write(const metrics *mt, const char *dir, al_err *e)
{
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    FILE *f = al_open_atomic(path, tmp, sizeof tmp, e);
    if (!f) return -1;
    fprintf(f, "step,train_loss,val_loss,val_accuracy,lr,tokens_per_s,elapsed_s\n");
    for (int i = 0; i < mt->n; i++) {
        const metric_row *r = &mt->rows[i];
        fprintf(f, "%d,", r->step);
        put_num(f, r->train_loss);
        fputc(',', f);
        put_num(f, r->val_loss);
        fputc(',', f);
        put_num(f, r->val_acc);
        fprintf(f, ",%.6g,%.1f,%.3f\n", r->lr, r->tok_s, r->elapsed);
    }
    return al_commit_atomic(f, tmp, path, e);
}

static int write_config(const al_config *c, const char *dir, al_err *e)
{
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/config.yaml", dir);
    FILE *f = al_open_atomic(path, tmp, sizeof tmp, e);
    if (!f) return -1;
    al_config_write_yaml(c, f);
    return al_commit_atomic(f, tmp, path, e);
}

/* ------------------------------------------------------------ the directory */

/* The files a run writes (al_train.h), which --force replaces. */
static const char *const run_files[] = {"config.yaml", "metrics.csv", "model.safetensors",
                                        "train_state.safetensors", "convert.json", NULL};

/* The first entry of dir that is not its lock file nor a stale temp
 * file, into first ("" when none); -1 when dir cannot be read. */
static int first_entry(const char *dir, char *first, size_t n, int *has_sweep, int *has_run)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    first[0] = 0;
    if (!d) return -1;
    while ((de = readdir(d))) {
        const char *f = de->d_name;
        if (!strcmp(f, ".") || !strcmp(f, "..") || !strcmp(f, AL_LOCK_FILE)) continue;
        if (al_is_stale_temp(f, NULL)) continue;
        *has_sweep |= !strcmp(f, "sweep.json");
        *has_run |= !strcmp(f, "train_state.safetensors");
        if (!first[0]) snprintf(first, n, "%s", f);
    }
    closedir(d);
    return 0;
}

int al_train_claim(const char *dir, int how, al_err *e)
{
    char real[PATH_MAX], first[256];
    int sweep = 0, run = 0;
    struct stat st;
    if (stat(dir, &st) != 0) return 0;   /* absent (or unreadable: mkdir says why) */
    if (!S_ISDIR(st.st_mode))
        return al_errf(e, "%s: exists and is not a directory; choose another --out", dir);
    if (realpath(dir, real) && !strcmp(real, "/"))
        return al_errf(e, "%s: refusing to write a run into '/'; choose another --out", dir);
    if (first_entry(dir, first, sizeof first, &sweep, &run) != 0)
        return al_errf(e, "%s: cannot read: %s", dir, strerror(errno));
    if (sweep)
        return al_errf(e, "%s: is a sweep's results directory (sweep.json); choose another --out",
                       dir);
    if (!first[0]) return 0;
    if (how == AL_CLAIM_FORCE) return 1;
    if (run)
        return al_errf(e, "%s: holds a run already; continue a stopped one with 'attnlab train "
                       "--resume %s', or choose a new --out (--force overwrites it)", dir, dir);
    return al_errf(e, "%s: not empty (holds '%s'); choose an empty or new --out "
                   "(--force writes the run there anyway)", dir, first);
}

/* With the lock held: claim the directory again (another process may
 * have written it since the caller's first look), remove what --force
 * replaces and what a killed run left. */
static int take_dir(const char *dir, int how, al_err *e)
{
    char path[AL_PATH_LEN + 64];
    int rc = how ? al_train_claim(dir, how, e) : 0;
    if (rc < 0) return -1;
    if (rc == 1) fprintf(stderr, "attnlab: train: --force: replacing what %s holds\n", dir);
    for (int i = 0; rc == 1 && run_files[i]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, run_files[i]);
        if (unlink(path) != 0 && errno != ENOENT)
            return al_errf(e, "%s: cannot remove (--force): %s", path, strerror(errno));
    }
    al_remove_stale_temps(dir, run_files);
    return 0;
}

/* ------------------------------------------------------------ loop */

int al_train_resolve(al_config *c, int data_vocab, al_err *e)
{
    if (c->model.vocab_size == 0) c->model.vocab_size = data_vocab;
    if (c->model.vocab_size != data_vocab)
        return al_errf(e, "%s: 'model.vocab_size' (%d) does not match data source "
                       "'%s' (vocabulary %d)", c->file, c->model.vocab_size,
                       c->data.source, data_vocab);
    return al_train_flops_steps(c, NULL, e);
}

/* Bytes as "N bytes (X.Y GiB)". */
static void fmt_bytes(char *buf, size_t n, uint64_t b)
{
    static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double x = (double)b;
    int u = -1;
    while (x >= 1024 && u < 5) x /= 1024, u++;
    if (u < 0) snprintf(buf, n, "%llu bytes", (unsigned long long)b);
    else snprintf(buf, n, "%llu bytes (%.1f %s)", (unsigned long long)b, x, unit[u]);
}

/* "FILE: KEYS: WHAT need N bytes (...), more than the M bytes of LIMIT" */
static int too_big(al_err *e, const al_config *c, const char *keys, const char *what,
                   uint64_t need, uint64_t avail, const char *limit)
{
    char n[64], a[64];
    fmt_bytes(n, sizeof n, need);
    fmt_bytes(a, sizeof a, avail);
    return al_errf(e, "%s: %s: %s need %s%s, more than the %s of %s", c->file, keys, what, n,
                   need == UINT64_MAX ? " (more than 64 bits hold)" : "", a, limit);
}

static int check_memory_at(const al_config *c, int threads, al_err *e)
{
    const al_model_config *m = &c->model;
    int B = c->train.batch_size, T = m->seq_len;
    char limit[128], keys[160], what[160], sub[AL_ERR_LEN];
    uint64_t avail = al_memory_available(c->train.max_memory, threads, limit, sizeof limit);
    size_t n_params;
    al_mem_estimate est;
    if (al_model_counts(m, &n_params, NULL, e) == 0) {
        uint64_t params = (uint64_t)n_params * 16;   /* weights, gradients, AdamW m and v */
        snprintf(keys, sizeof keys, "'model.n_layer' (%d) x 'model.d_model' (%d)", m->n_layer,
                 m->d_model);
        snprintf(what, sizeof what, "%zu parameters (weights, gradients, AdamW moments)",
                 n_params);
        if (params > avail) return too_big(e, c, keys, what, params, avail, limit);
        /* the batch without the variant's share: named before a variant is asked */
        uint64_t batch = al_batch_bytes_lower(m, B, T);
        snprintf(keys, sizeof keys, "'train.batch_size' (%d) x 'model.seq_len' (%d)", B, T);
        snprintf(what, sizeof what, "the model and at least the activations of %d layer(s)",
                 m->n_layer);
        batch = batch > UINT64_MAX - params ? UINT64_MAX : batch + params;
        if (batch > avail) return too_big(e, c, keys, what, batch, avail, limit);
    }
    if (al_train_estimate(m, B, T, &est, e) != 0) {
        snprintf(sub, sizeof sub, "%s", e->msg);
        return al_errf(e, "%s: %s", c->file, sub);
    }
    snprintf(what, sizeof what, "the model and the activations of %d layer(s)", m->n_layer);
    return est.total > avail ? too_big(e, c, keys, what, est.total, avail, limit) : 0;
}

/* The run at train.threads, else, when one thread would fit, a refusal
 * naming train.threads and the most threads that fit (each thread costs
 * OpenBLAS's buffer): before any pool or OpenBLAS thread starts. */
int al_train_check_memory(const al_config *c, al_err *e)
{
    int T = al_threads_for(c->train.threads);
    al_err one;
    if (check_memory_at(c, T, e) == 0) return 0;
    if (T == 1 || check_memory_at(c, 1, &one) != 0) return -1;   /* the model itself */
    int lo = 1, hi = T;   /* lo fits (with one more thread's room in hand), hi does not */
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (check_memory_at(c, mid + 1, &one) == 0) lo = mid;
        else hi = mid;
    }
    return al_errf(e, "%s: 'train.threads' (%d): the OpenBLAS buffers of %d threads leave too "
                   "little memory for this model; 'train.threads' %d fits", c->file, T, T, lo);
}

static void fmt_eta(char *buf, size_t n, double s)
{
    if (s < 0 || !isfinite(s)) snprintf(buf, n, "?");
    else if (s < 90) snprintf(buf, n, "%.0fs", s);
    else if (s < 5400) snprintf(buf, n, "%.0fm%02.0fs", floor(s / 60), fmod(s, 60));
    else snprintf(buf, n, "%.0fh%02.0fm", floor(s / 3600), fmod(s / 60, 60));
}

typedef struct run {
    const al_config *c;
    const al_train_opts *o;
    const char *wdir;           /* where this rank writes: outdir on rank 0 only */
    al_data data;
    al_model model;
    al_adamw opt;
    al_rng rng;
    int *in, *tgt;
    float *w;
    metrics mt;
    double t0, train_time;
    long tokens;
    int start;                  /* first step: 0, or where a resume picks up */
    double loss_sum;            /* train losses since the last evaluation */
    long loss_count;
    al_run_inputs inputs;       /* the data and plugin files, fingerprinted */
    char step_point[AL_PATH_LEN + 8];   /* "<outdir>/step", for al_fault_point */
    char init_sha256[65];       /* of train.init_from's file, "" without one */
    al_convert_result conv;     /* train.init_convert's measurements (n_layer 0: none) */
} run;

static void report_progress(run *R, int step, double loss, double lr, int eval_line,
                            double val, double acc)
{
    const al_train_config *t = &R->c->train;
    if (al_mpi_rank() != 0) return;   /* rank 0 alone reports */
    double tok_s = R->train_time > 0 ? R->tokens / R->train_time : 0;
    double eta = tok_s > 0 ? (double)(t->steps - step) * t->batch_size *
                                 R->c->model.seq_len / tok_s : -1;
    char etab[32];
    if (R->o->on_progress) R->o->on_progress(R->o->progress_ctx, step, t->steps, loss, val, tok_s);
    fmt_eta(etab, sizeof etab, eta);
    const char *lab = R->o->label ? R->o->label : "train";
    const char *mask = R->c->model.causal ? "" : " [causal: false]";
    if (al_stderr_is_tty()) {
        al_progress_line("%s%s step %d/%d | loss %.4f | val %.4f | lr %.2e | %.0f tok/s | ETA %s",
                         lab, mask, step, t->steps, loss, val, lr, tok_s, etab);
    } else if (eval_line && R->o->log_lines) {
        /* one write: stderr is unbuffered, and a signal between pieces
         * would leave half a line before the handler's last one */
        char line[512], tl[32] = "", va[32] = "";
        if (!isnan(loss)) snprintf(tl, sizeof tl, " train_loss %.4f", loss);
        if (!isnan(acc)) snprintf(va, sizeof va, " val_accuracy %.4f", acc);
        snprintf(line, sizeof line, "%s%s step %d/%d%s val_loss %.4f%s lr %.3g tok/s %.0f eta %s\n",
                 lab, mask, step, t->steps, tl, val, va, lr, tok_s, etab);
        fputs(line, stderr);
    }
}

/* bf16 is a numerics choice as well as a speed one: the run goes on as
 * asked, but says so where this CPU gives it no speed (al_bf16_rates_of,
 * on the model's typical product: B*T rows by d_model by d_model). */
static void bf16_note(const al_config *c)
{
    long rows = (long)c->train.batch_size * c->model.seq_len;
    al_bf16_rates r;
    char line[512];
    al_bf16_rates_of(rows < 4096 ? (int)rows : 4096, c->model.d_model, c->model.d_model, &r);
    if (al_bf16_pays(&r)) return;
    al_bf16_note(&r, line, sizeof line);
    fprintf(stderr, "%s\n", line);
}

static int run_open(run *R, al_config *c, al_err *e)
{
    if (al_data_open(&R->data, &c->data, c->model.seq_len, e) != 0) return -1;
    if (al_train_resolve(c, R->data.vocab_size, e) != 0) return -1;
    if (c->train.flops > 0 && al_mpi_rank() == 0) {   /* what the compute buys, said first */
        char line[512];
        double per_token;
        if (al_train_flops_steps(c, &per_token, e) != 0) return -1;
        al_train_flops_line(c, per_token, line, sizeof line);
        fprintf(stderr, "%s\n", line);
    }
    /* memory: checked by al_train before the pool started (the same resolved config) */
    if (al_model_init(&R->model, &c->model, e) != 0) return -1;
    /* train.precision travels with the model: its calls run at it */
    if (al_model_set_precision(&R->model, c->train.precision, e) != 0) return -1;
    al_model_init_weights(&R->model, c->train.seed);
    if (al_model_reserve(&R->model, c->train.batch_size, c->model.seq_len, e) != 0)
        return -1;
    al_adamw_init(&R->opt, R->model.n_params, c->train.beta1, c->train.beta2,
                  c->train.weight_decay);
    /* The data stream has its own seed-derived state, apart from the init;
     * a run from a checkpoint draws another stream than a fresh run of the
     * same seed, so that uptraining does not replay the base run's batches. */
    al_rng_seed(&R->rng, c->train.seed ^ (c->train.init_from[0] ? 0x9E3779B97F4A7C15ULL
                                                                 : 0xD1B54A32D192ED03ULL));
    size_t BT = (size_t)c->train.batch_size * c->model.seq_len;
    R->in = al_malloc(BT * sizeof(int));
    R->tgt = al_malloc(BT * sizeof(int));
    R->w = al_malloc(BT * sizeof(float));
    snprintf(R->step_point, sizeof R->step_point, "%s/step", R->o->outdir ? R->o->outdir : "");
    /* what a resume must find unchanged, for runs that save checkpoints */
    if (R->o->outdir)
        return al_run_inputs_of(&R->inputs, c, R->data.bytes, R->data.n, e);
    return 0;
}

static void run_close(run *R)
{
    al_data_close(&R->data);
    al_model_free(&R->model);
    al_adamw_free(&R->opt);
    al_convert_result_free(&R->conv);
    free(R->in);
    free(R->tgt);
    free(R->w);
    free(R->mt.rows);
}

/* One optimisation step; returns the loss (NaN/Inf on divergence). */
static double train_step(run *R, int step)
{
    const al_train_config *t = &R->c->train;
    int B = t->batch_size, T = R->c->model.seq_len;
    double lr = al_lr_at(step, t->steps, t->warmup_steps, t->lr, t->min_lr);
    R->data.step = step;
    al_data_batch(&R->data, AL_SPLIT_TRAIN, &R->rng, B, T, R->in, R->tgt, R->w);
    double loss = al_dp_forward_backward(&R->model, R->in, R->tgt,
                                         R->data.has_weights ? R->w : NULL, B, T);
    if (!isfinite(loss)) return loss;
    double norm = al_clip_grad_norm(&R->model, t->grad_clip);
    if (!isfinite(norm)) return norm;
    al_adamw_step(&R->opt, &R->model, lr);
    return loss;
}

/* Evaluate, record a metrics row and rewrite metrics.csv. */
static int eval_point(run *R, int step, double train_loss, al_train_result *r, al_err *e)
{
    const al_train_config *t = &R->c->train;
    double acc, val = al_evaluate(&R->model, &R->data, t, &acc);
    double lr = al_lr_at(step, t->steps, t->warmup_steps, t->lr, t->min_lr);
    metric_row row = {step, train_loss, val, acc, lr,
                      R->train_time > 0 ? R->tokens / R->train_time : 0,
                      al_now() - R->t0};
    metrics_add(&R->mt, row);
    r->val_loss = val;
    r->val_accuracy = acc;
    if (isnan(r->best_val_loss) || val < r->best_val_loss) r->best_val_loss = val;
    if (step == 0) r->init_val_loss = val;
    report_progress(R, step, train_loss, lr, 1, val, acc);
    int bad = R->wdir && metrics_write(&R->mt, R->wdir, e) != 0;
    if (al_mpi_agree(bad, e) != 0) return -1;
    return al_dp_check_replicas(&R->model, &R->rng, step, e);
}

/* ------------------------------------------------------------ checkpoints */

/* Everything a bit-identical resume needs, handed to checkpoint.c, which
 * writes DIR/train_state.safetensors and DIR/model.safetensors. */
static int save_run(run *R, int steps_done, const al_train_result *r, al_err *e)
{
    if (!R->wdir) return 0;
    al_train_state s = {steps_done, R->rng, R->tokens, R->train_time, al_now() - R->t0,
                        R->loss_sum, R->loss_count, r->final_train_loss, R->mt.n, NULL,
                        R->inputs, ""};
    memcpy(s.init_sha256, R->init_sha256, sizeof s.init_sha256);
    s.rows = al_malloc((size_t)R->mt.n * AL_METRIC_COLS * sizeof(double));
    for (int i = 0; i < R->mt.n; i++) {
        const metric_row *m = &R->mt.rows[i];
        double row[AL_METRIC_COLS] = {m->step, m->train_loss, m->val_loss, m->val_acc,
                                      m->lr, m->tok_s, m->elapsed};
        memcpy(s.rows + (size_t)i * AL_METRIC_COLS, row, sizeof row);
    }
    int rc = al_checkpoint_save_run(R->wdir, R->c, &R->model, &R->opt, &s, e);
    free(s.rows);
    return rc;
}

/* ------------------------------------------------------------ init from */

/* Tokens of training data the conversion samples (al_convert.h). */
#define INIT_SAMPLE_TOKENS 4096

/* train.init_convert: the checkpoint converted to this model, its errors
 * on a sample of the training split logged (and kept for convert.json). */
static int init_converted(run *R, const char *path, al_err *e)
{
    const al_train_config *t = &R->c->train;
    int method = al_convert_method_parse(t->init_convert);
    AL_ASSERT(method >= 0);
    if (al_convert_into(path, &R->model, method, t->seed, &R->data, t->batch_size,
                        INIT_SAMPLE_TOKENS, &R->conv, e) != 0)
        return -1;
    if (al_mpi_rank() == 0 && R->o->log_lines)
        fprintf(stderr, "%s: init: %s (%s) converted to %s by %s: k_error %.4f v_error %.4f "
                "on %ld tokens\n", R->o->label ? R->o->label : "train", path,
                R->conv.src_variant, R->conv.dst_variant, t->init_convert, R->conv.mean.k,
                R->conv.mean.v, R->conv.sample_tokens);
    return 0;
}

/* train.init_from: the weights of a checkpoint replace the random init
 * (converted when train.init_convert says so); the optimizer and schedule
 * start fresh. Its SHA-256 goes into the saved state. */
static int init_from(run *R, al_err *e)
{
    const al_train_config *t = &R->c->train;
    const char *path = t->init_from;
    /* "" is none too: configs built in code may leave the field empty */
    int convert = t->init_convert[0] && strcmp(t->init_convert, "none") != 0;
    if (!path[0])
        return convert ? al_errf(e, "%s: 'train.init_convert' (%s) needs 'train.init_from'",
                                 R->c->file, t->init_convert) : 0;
    char msg[AL_ERR_LEN];
    if (al_sha256_file(path, R->init_sha256, e) != 0 ||
        (convert ? init_converted(R, path, e) : al_checkpoint_load_into(path, &R->model, e)) != 0) {
        snprintf(msg, sizeof msg, "%s", e->msg);
        return al_errf(e, "train.init_from: %s", msg);
    }
    return 0;
}

/* DIR/convert.json: how train.init_convert built the starting weights. */
static int write_convert(const run *R, al_err *e)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/convert.json", R->wdir);
    return al_convert_write_json(path, &R->conv, e);
}

/* A resumed run continues from its own weights; if the checkpoint it began
 * from is still there, it must be the same file, or the run would no
 * longer be what its config says. */
static int check_init_unchanged(const run *R, const char *saved, al_err *e)
{
    const char *path = R->c->train.init_from;
    char now[65];
    al_err ignore;
    if (!path[0] || !saved[0] || al_sha256_file(path, now, &ignore) != 0) return 0;
    if (strcmp(now, saved) == 0) return 0;
    return al_errf(e, "%s: cannot resume: train.init_from %s changed since the run began "
                   "(SHA-256 %.12s..., was %.12s...); start a new run", R->o->outdir, path, now,
                   saved);
}

/* The inverse of save_run: model, optimizer, data RNG, metrics, counters. */
static int resume_run(run *R, al_train_result *r, al_err *e)
{
    al_train_state s;
    if (!R->o->outdir) return al_errf(e, "resume: no output directory to resume from");
    int rc = al_checkpoint_resume(R->o->outdir, R->c, &R->inputs, &R->model, &R->opt, &s, e);
    if (rc == AL_RESUME_CHANGED) r->resume_changed = 1;
    if (rc != 0) return -1;
    if (s.step >= R->c->train.steps && !R->o->accept_finished) {
        free(s.rows);
        return al_errf(e, "%s: nothing to resume: the run has done all %d steps",
                       R->o->outdir, R->c->train.steps);
    }
    if (check_init_unchanged(R, s.init_sha256, e) != 0) {
        r->resume_changed = 1;   /* a file behind the config changed, as above */
        free(s.rows);
        return -1;
    }
    memcpy(R->init_sha256, s.init_sha256, sizeof R->init_sha256);
    R->start = r->steps_done = (int)s.step;
    R->rng = s.rng;
    R->tokens = s.tokens;
    R->train_time = s.train_time;
    R->t0 = al_now() - s.elapsed;
    R->loss_sum = s.loss_sum;
    R->loss_count = s.loss_count;
    r->final_train_loss = s.last_loss;
    for (int i = 0; i < s.n_rows; i++) {
        const double *x = s.rows + (size_t)i * AL_METRIC_COLS;
        metrics_add(&R->mt, (metric_row){(int)x[0], x[1], x[2], x[3], x[4], x[5], x[6]});
        r->val_loss = x[2];
        r->val_accuracy = x[3];
        if (isnan(r->best_val_loss) || x[2] < r->best_val_loss) r->best_val_loss = x[2];
        if (x[0] == 0) r->init_val_loss = x[2];
    }
    free(s.rows);
    return 0;
}

/* After a step: a checkpoint every checkpoint_every steps, and at
 * stop_after, where the run stops (status AL_TRAIN_STOPPED). */
static int after_step(run *R, int done, al_train_result *r, al_err *e)
{
    const al_train_config *t = &R->c->train;
    int stop = done == R->o->stop_after;
    if (done >= t->steps || !(stop || (t->checkpoint_every && done % t->checkpoint_every == 0)))
        return 0;
    if (al_mpi_agree(save_run(R, done, r, e) != 0, e) != 0) return -1;
    if (stop) r->status = AL_TRAIN_STOPPED;
    return 0;
}

/* ------------------------------------------------------------ loop */

static int train_loop(run *R, al_train_result *r, al_err *e)
{
    const al_train_config *t = &R->c->train;
    double last_print = 0;
    /* a finished run resumed (accept_finished): its result is the state's,
     * its final evaluation is on disk already; the test split is scored
     * again on the same final weights. The checkpoint is written again: a
     * kill between the state and the model file leaves the model file of
     * the step before, and the state holds the final weights. */
    if (R->start >= t->steps) {
        r->test_loss = al_evaluate_test(&R->model, &R->data, t->batch_size, &r->test_accuracy);
        return al_mpi_agree(save_run(R, t->steps, r, e) != 0, e);
    }
    for (int step = R->start; step < t->steps; step++) {
        if (step % t->eval_every == 0 &&
            eval_point(R, step, R->loss_count ? R->loss_sum / R->loss_count : NAN, r, e) != 0)
            return -1;
        if (step % t->eval_every == 0) R->loss_sum = 0, R->loss_count = 0;
        double ts = al_now();
        double loss = train_step(R, step);
        R->train_time += al_now() - ts;
        R->tokens += (long)t->batch_size * R->c->model.seq_len;
        if (!isfinite(loss)) {
            r->status = AL_TRAIN_DIVERGED;
            snprintf(r->reason, sizeof r->reason, "loss became %s at step %d",
                     isnan(loss) ? "NaN" : "Inf", step);
            r->steps_done = step;
            return 0;
        }
        R->loss_sum += loss, R->loss_count++;
        r->final_train_loss = loss;
        r->steps_done = step + 1;
        al_fault_point("step", R->step_point);   /* tests: a kill mid-training */
        if (after_step(R, step + 1, r, e) != 0) return -1;
        if (r->status == AL_TRAIN_STOPPED) return 0;
        if ((al_stderr_is_tty() || R->o->on_progress) && al_now() - last_print > 0.1) {
            last_print = al_now();
            report_progress(R, step + 1, loss, al_lr_at(step, t->steps, t->warmup_steps,
                            t->lr, t->min_lr), 0, r->val_loss, NAN);
        }
    }
    if (eval_point(R, t->steps, R->loss_count ? R->loss_sum / R->loss_count : NAN, r, e) != 0)
        return -1;
    if (!isfinite(r->val_loss)) {
        r->status = AL_TRAIN_DIVERGED;
        snprintf(r->reason, sizeof r->reason, "validation loss is not finite");
        return 0;
    }
    /* the held-out test split, once, on the final weights */
    r->test_loss = al_evaluate_test(&R->model, &R->data, t->batch_size, &r->test_accuracy);
    return al_mpi_agree(save_run(R, t->steps, r, e) != 0, e);
}

int al_train(const al_config *c0, const al_train_opts *o, al_train_result *r, al_err *e)
{
    al_config c = *c0;
    run R;
    memset(&R, 0, sizeof R);
    memset(r, 0, sizeof *r);
    r->val_loss = r->best_val_loss = r->val_accuracy = r->final_train_loss = NAN;
    r->test_loss = r->test_accuracy = r->init_val_loss = NAN;
    R.c = &c;
    R.o = o;
    R.wdir = al_mpi_rank() == 0 ? o->outdir : NULL;
    R.t0 = al_now();
    /* the memory for train.threads before any thread starts; then the pool
     * (OpenBLAS runs single-threaded) */
    al_config sized = c;   /* the vocabulary from the data source, as run_open resolves it */
    int prec, rc = al_train_resolve(&sized, al_data_vocab(&sized.data), e);
    if (rc == 0) rc = al_train_check_memory(&sized, e);
    if (rc == 0) al_parallel_set_threads(al_threads_for(c.train.threads));
    if (rc == 0) rc = al_gemm_precision_parse(c.train.precision, &prec, e);   /* refused early */
    if (rc == 0) rc = al_dp_check_batch(c.train.batch_size, e);
    if (rc == 0) rc = run_open(&R, &c, e);
    if (rc == 0 && o->resume) rc = resume_run(&R, r, e);
    else if (rc == 0) rc = init_from(&R, e);
    /* the rate note once the run is sure to start (a refused resume says only why) */
    if (rc == 0 && R.model.precision == AL_PRECISION_BF16 && al_mpi_rank() == 0) bf16_note(&c);
    int lock = -1;
    if (rc == 0 && R.wdir) {
        rc = al_mkdirs(R.wdir, e);
        if (rc == 0) rc = al_lock_dir(R.wdir, "run", &lock, e);
        if (rc == 0) rc = take_dir(R.wdir, o->claim, e);
        if (rc == 0) rc = write_config(&c, R.wdir, e);
        if (rc == 0 && o->resume_hint) al_signals_hint("%s", o->resume_hint);
        if (rc == 0 && R.conv.n_layer) rc = write_convert(&R, e);
    }
    rc = al_mpi_agree(rc != 0, e);
    if (rc == 0) {
        r->params = R.model.n_params;
        r->kv_elems_per_token = al_model_kv_elems_per_token(&c.model);
        rc = train_loop(&R, r, e);
        r->runtime_error = rc != 0;   /* a write failed (the disk), not the input */
        al_progress_end();
    }
    r->tokens_per_s = R.train_time > 0 ? R.tokens / R.train_time : 0;
    r->wall_s = al_now() - R.t0;
    run_close(&R);
    if (lock >= 0) close(lock);   /* the run is over: the directory is free */
    return rc;
}
