/*
 * sweep_eval_run.c - a sweep's `eval` (parsed by sweep_eval.c into
 * al_sweep_spec.h's al_sweep_eval) run after training:
 * each ok trial's model.safetensors scored, without retraining, with the
 * same code as `attnlab score` (al_score_eval), into its own directory:
 *
 *   <trial>/eval/test.txt     the first eval.tokens + 1 bytes of the trial's
 *                             test split: what is scored, so that
 *                             `attnlab score <trial>/model.safetensors
 *                             <trial>/eval/test.txt --seq-len C --through-cache
 *                             --kv-dtype D` gives the row again
 *   <trial>/eval.csv          kv_dtype,context,loss,kv_cache_bytes,tokens: one
 *                             row per (dtype, context), through the cache
 *   <trial>/eval/by_position_C/by_position.csv   with by_position: as
 *                             `score --by-position --seq-len C` (the plain
 *                             forward pass) writes it
 *   <trial>/eval/passkey.csv  a passkey trial's instead of eval.csv: as
 *                             `score <model> <trial>/eval/test.txt --passkey
 *                             --seed <its data.seed>` with eval's grid writes it
 *                             (no by_position: sweep_eval.c refuses it there)
 *   <trial>/eval/recall.csv   a passkey or mqar trial's examples (the passkey
 *                             grid, or the first eval.mqar_examples of its
 *                             test split) answered through f32 and each other
 *                             cache (int8 / int4 at each kv_quant_residuals),
 *                             one row per example and cache, with
 *                             recall_summary.csv beside it: per (length,
 *                             cache) the exact-match rate and McNemar against
 *                             f32, Holm-adjusted (score_recall.c)
 *   <trial>/eval/decode.csv   with eval.decode: decode tokens/s of the
 *                             checkpoint at each (context, batch), the median
 *                             of `repeats` timed runs (al_decode_speed, as
 *                             `attnlab bench-decode` times), with the CPU,
 *                             the OpenBLAS core and the threads it ran on
 *
 * Resumed like training: a row or a by_position.csv already there is not
 * computed again, and eval.csv is rewritten atomically after every row, so
 * an interrupted evaluation keeps what it finished.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "al_checkpoint.h"
#include "al_csv.h"
#include "al_data.h"
#include "al_gemm.h"
#include "al_kvcache.h"
#include "al_parallel.h"
#include "al_score.h"
#include "al_sweep_eval_run.h"
#include "al_sweep_results.h"

#define TDIR_LEN (AL_PATH_LEN + AL_SWEEP_ID_LEN + 2)
#define NEW_ROWS (AL_EVAL_MAX_DTYPES * AL_EVAL_MAX_CONTEXTS)   /* the most one run adds */
#define MAX_ROWS (NEW_ROWS * 4)

typedef struct eval_row {
    int dtype, context;
    double loss;
    long bytes, tokens;
} eval_row;

typedef struct eval_file {
    int n;
    eval_row r[MAX_ROWS];
} eval_file;

/* The rows an earlier run wrote; none when there is no eval.csv. Rows of
 * dtypes or contexts no longer asked for are kept (they cost nothing), up
 * to room for the rows this run may add. */
static int read_rows(const char *tdir, eval_file *F, al_err *e)
{
    char path[TDIR_LEN + 16];
    al_csv t;
    F->n = 0;
    snprintf(path, sizeof path, "%s/eval.csv", tdir);
    if (access(path, F_OK) != 0) return 0;
    int rc = al_csv_read(path, &t, e);
    for (int i = 0; rc == 0 && i < t.n_rows && F->n < MAX_ROWS - NEW_ROWS; i++) {
        eval_row *w = &F->r[F->n];
        w->dtype = al_kv_dtype_parse(al_csv_cell(&t, i, "kv_dtype"));
        w->context = atoi(al_csv_cell(&t, i, "context"));
        w->loss = strtod(al_csv_cell(&t, i, "loss"), NULL);
        w->bytes = atol(al_csv_cell(&t, i, "kv_cache_bytes"));
        w->tokens = atol(al_csv_cell(&t, i, "tokens"));
        if (w->dtype >= 0 && w->context > 0 && isfinite(w->loss)) F->n++;
    }
    al_csv_free(&t);
    return rc;
}

static int write_rows(const char *tdir, const eval_file *F, al_err *e)
{
    char path[TDIR_LEN + 16], tmp[TDIR_LEN + 48];
    snprintf(path, sizeof path, "%s/eval.csv", tdir);
    FILE *f = al_open_atomic(path, tmp, sizeof tmp, e);
    if (!f) return -1;
    fputs("kv_dtype,context,loss,kv_cache_bytes,tokens\n", f);
    for (int i = 0; i < F->n; i++)
        fprintf(f, "%s,%d,%.9g,%ld,%ld\n", al_kv_dtype_name(F->r[i].dtype), F->r[i].context,
                F->r[i].loss, F->r[i].bytes, F->r[i].tokens);
    return al_commit_atomic(f, tmp, path, e);
}

static int has_row(const eval_file *F, int dtype, int context)
{
    for (int i = 0; i < F->n; i++)
        if (F->r[i].dtype == dtype && F->r[i].context == context) return 1;
    return 0;
}

/* <trial>/eval/test.txt from the trial's data (kept once written: the
 * rows already there were scored on it). */
static int write_text(const al_sweep_trial *t, const char *tdir, long tokens, char *path,
                      size_t n, al_err *e)
{
    char dir[TDIR_LEN + 8], tmp[TDIR_LEN + 64];
    snprintf(dir, sizeof dir, "%s/eval", tdir);
    snprintf(path, n, "%s/test.txt", dir);
    if (access(path, F_OK) == 0) return 0;
    al_data d;
    memset(&d, 0, sizeof d);
    if (al_mkdirs(dir, e) || al_data_open(&d, &t->cfg.data, t->cfg.model.seq_len, e)) return -1;
    size_t len = d.n - d.test_start;
    if (len > (size_t)tokens + 1) len = (size_t)tokens + 1;
    FILE *f = al_open_atomic(path, tmp, sizeof tmp, e);
    int rc = f ? 0 : -1;
    if (f) {
        fwrite(d.bytes + d.test_start, 1, len, f);
        rc = al_commit_atomic(f, tmp, path, e);
    }
    al_data_close(&d);
    return rc;
}

static int one_row(const char *ckpt, const char *text, int T, int dtype, long threads,
                   eval_file *F, al_err *e)
{
    al_score_opts o = {.seq_len = T, .threads = threads, .through_cache = dtype >= 0,
                       .kv_dtype = dtype};
    al_score_result r;
    if (al_score_eval(ckpt, text, &o, &r, e)) return -1;
    AL_ASSERT(F->n < MAX_ROWS);
    F->r[F->n++] = (eval_row){dtype, T, r.loss, (long)r.cache_bytes, r.tokens};
    return 0;
}

static int by_position(const al_sweep_eval *v, const char *tdir, const char *ckpt,
                       const char *text, int T, long threads, int *done, al_err *e)
{
    char dir[TDIR_LEN + 64], csv[TDIR_LEN + 96];
    snprintf(dir, sizeof dir, "%s/eval/by_position_%d", tdir, T);
    snprintf(csv, sizeof csv, "%s/by_position.csv", dir);
    if (access(csv, F_OK) == 0) return 0;
    al_score_opts o = {.seq_len = T, .threads = threads, .kv_dtype = -1, .by_position = 1};
    al_score_result r;
    if (al_score_eval(ckpt, text, &o, &r, e)) return -1;
    int N = v->buckets ? v->buckets : T < 16 ? T : 16;
    int rc = al_score_write_by_position(dir, r.pos_sum, r.windows, T, N, r.trained, e);
    free(r.pos_sum);
    *done += rc == 0;
    return rc;
}

/* eval's passkey grid, on the test stream of the trial's data.seed. */
static al_passkey_grid grid_of(const al_sweep_eval *v, const al_sweep_trial *t)
{
    al_passkey_grid g = {.n_lengths = v->n_pk_lengths, .n_depths = v->n_pk_depths,
                         .examples = v->pk_examples, .seed = (long)t->cfg.data.seed};
    memcpy(g.lengths, v->pk_lengths, sizeof v->pk_lengths);
    memcpy(g.depths, v->pk_depths, sizeof v->pk_depths);
    return g;
}

/* A passkey trial: the grid on the test split of its filler. */
static int passkey_trial(const al_sweep_eval *v, const al_sweep_trial *t, const char *tdir,
                         const char *ckpt, const char *text, long threads, int *done, al_err *e)
{
    char dir[TDIR_LEN + 8], csv[TDIR_LEN + 32];
    snprintf(dir, sizeof dir, "%s/eval", tdir);
    snprintf(csv, sizeof csv, "%s/passkey.csv", dir);
    if (access(csv, F_OK) == 0) return 0;
    al_passkey_grid g = grid_of(v, t);
    al_score_in s;
    al_parallel_set_threads(al_threads_for(threads));
    int rc = al_score_open(ckpt, text, 0, &s, e) || al_score_passkey(&s, &g, NULL, dir, e);
    al_score_close(&s);
    *done += rc == 0;
    return rc ? -1 : 0;
}

/* ------------------------------------------------------------ recall */

/* An mqar trial's first eval.mqar_examples test examples through r's caches. */
static int recall_mqar(const al_sweep_eval *v, const al_sweep_trial *t, const char *ckpt,
                       al_recall *r, al_err *e)
{
    al_model m;
    al_data d;
    long step;
    memset(&d, 0, sizeof d);
    if (al_checkpoint_load_run(ckpt, &m, &step, e) != 0) return -1;
    int rc = al_data_open(&d, &t->cfg.data, t->cfg.model.seq_len, e);
    if (!rc) rc = al_recall_mqar(&m, &d, v->mqar_examples ? v->mqar_examples
                                                          : AL_EVAL_MQAR_EXAMPLES, r, e);
    al_data_close(&d);
    al_model_free(&m);
    return rc;
}

/* A passkey or mqar trial's examples through f32 and each cache eval asks
 * for, unless <trial>/eval/recall_summary.csv (written last) is there. */
static int recall_trial(const al_sweep_eval *v, const al_sweep_trial *t, const char *tdir,
                        const char *ckpt, const char *text, long threads, int *done, al_err *e)
{
    char dir[TDIR_LEN + 8], csv[TDIR_LEN + 40];
    snprintf(dir, sizeof dir, "%s/eval", tdir);
    snprintf(csv, sizeof csv, "%s/recall_summary.csv", dir);
    if (access(csv, F_OK) == 0) return 0;
    al_recall r;
    al_recall_init(&r, v->dtypes, v->n_dtypes, v->residuals, v->n_residuals);
    al_parallel_set_threads(al_threads_for(threads));
    int rc;
    if (strcmp(t->cfg.data.source, "mqar") == 0) {
        rc = recall_mqar(v, t, ckpt, &r, e);
    } else {
        al_passkey_grid g = grid_of(v, t);
        al_score_in s;
        rc = al_score_open(ckpt, text, 0, &s, e) || al_recall_passkey(&s, &g, &r, e);
        al_score_close(&s);
    }
    if (!rc) rc = al_recall_write(dir, &r, e);
    al_recall_free(&r);
    *done += rc == 0;
    return rc ? -1 : 0;
}

/* ------------------------------------------------------------ decode speed */

#define DECODE_HEADER "context,batch,kv_dtype,tokens,repeats,tokens_per_s,tokens_per_s_min," \
                      "tokens_per_s_max,cache_bytes,threads,cpu_model,blas_core\n"

/* decode.csv's lines so far (header included), or "" when there is none. */
static char *decode_lines(const char *path)
{
    char *text = NULL;
    size_t n;
    al_err ignore;
    if (access(path, F_OK) != 0 || al_read_file(path, &text, &n, &ignore) != 0 ||
        strncmp(text, DECODE_HEADER, strlen(DECODE_HEADER)) != 0) {
        free(text);
        text = al_malloc(sizeof DECODE_HEADER);
        memcpy(text, DECODE_HEADER, sizeof DECODE_HEADER);
    }
    return text;
}

static int decode_has(const char *text, int context, int batch)
{
    char key[48];
    int n = snprintf(key, sizeof key, "\n%d,%d,", context, batch);
    (void)n;
    return strstr(text, key) != NULL;
}

/* Every (context, batch) of eval.decode not yet in <trial>/eval/decode.csv,
 * timed on the checkpoint; the file rewritten atomically after each. */
static int decode_trial(const al_sweep_eval *v, const char *tdir, const char *ckpt,
                        long threads, int *done, al_err *e)
{
    char dir[TDIR_LEN + 8], path[TDIR_LEN + 32], tmp[TDIR_LEN + 64], cpu[128];
    snprintf(dir, sizeof dir, "%s/eval", tdir);
    snprintf(path, sizeof path, "%s/decode.csv", dir);
    char *text = decode_lines(path);
    al_model m;
    long step;
    int loaded = 0, rc = al_mkdirs(dir, e);
    al_parallel_set_threads(al_threads_for(threads));
    al_cpu_model(cpu, sizeof cpu);
    for (int c = 0; !rc && c < v->decode.n_contexts; c++)
        for (int b = 0; !rc && b < v->decode.n_batches; b++) {
            int C = v->decode.contexts[c], B = v->decode.batches[b];
            if (decode_has(text, C, B)) continue;
            if (!loaded && (rc = al_checkpoint_load_run(ckpt, &m, &step, e)) != 0) break;
            loaded = 1;
            int dt = al_kv_dtype_parse(m.cfg.kv_dtype);
            al_decode_speed_opts o = {C, dt, v->decode.tokens, B, v->decode.repeats};
            al_decode_speed_result r;
            if ((rc = al_decode_speed(&m, &o, &r, e)) != 0) break;
            size_t cap = strlen(text) + 512;   /* a row: the cpu name (< 128) and figures */
            char *line = al_malloc(cap);
            snprintf(line, cap, "%s%d,%d,%s,%d,%d,%.1f,%.1f,%.1f,%zu,%d,\"%s\",%s\n", text, C,
                     B, al_kv_dtype_name(dt), o.tokens, o.repeats, r.tokens_per_s,
                     r.tokens_per_s_min, r.tokens_per_s_max, r.cache_bytes,
                     al_parallel_threads(), cpu, al_blas_core());
            free(text);
            text = line;
            FILE *f = al_open_atomic(path, tmp, sizeof tmp, e);
            rc = f ? 0 : -1;
            if (f) {
                fputs(text, f);
                rc = al_commit_atomic(f, tmp, path, e);
            }
            *done += rc == 0;
        }
    if (loaded) al_model_free(&m);
    free(text);
    return rc ? -1 : 0;
}

/* Every (context, dtype) of trial t not yet in its eval.csv, then its
 * by_position files (a passkey trial: its passkey grid and with recall its
 * examples through the caches instead; an mqar trial: its examples
 * through the caches alone); then its decode speed with eval.decode. */
static int eval_trial(const al_sweep *s, const al_sweep_trial *t, const char *tdir,
                      long threads, int timed, int *done, al_err *e)
{
    const al_sweep_eval *v = &s->eval;
    char ckpt[TDIR_LEN + 32], text[TDIR_LEN + 32];
    int decode = timed && v->decode.on;
    snprintf(ckpt, sizeof ckpt, "%s/%s", tdir, AL_CHECKPOINT_FILE);
    if (!v->score) return decode ? decode_trial(v, tdir, ckpt, threads, done, e) : 0;
    int pk = strcmp(t->cfg.data.source, "passkey") == 0;
    if (strcmp(t->cfg.data.source, "mqar") == 0) {   /* no text: its examples alone */
        int rc = recall_trial(v, t, tdir, ckpt, NULL, threads, done, e);
        if (!rc && decode) rc = decode_trial(v, tdir, ckpt, threads, done, e);
        return rc ? -1 : 0;
    }
    eval_file *F = al_malloc(sizeof *F);
    int rc = read_rows(tdir, F, e) || write_text(t, tdir, v->tokens, text, sizeof text, e);
    if (!rc && pk) rc = passkey_trial(v, t, tdir, ckpt, text, threads, done, e);
    if (!rc && pk && v->recall) rc = recall_trial(v, t, tdir, ckpt, text, threads, done, e);
    for (int c = 0; !rc && !pk && c < (v->n_contexts ? v->n_contexts : 1); c++) {
        int T = v->n_contexts ? v->contexts[c] : t->cfg.model.seq_len;
        for (int k = 0; !rc && !pk && k < v->n_dtypes; k++) {
            if (has_row(F, v->dtypes[k], T)) continue;
            rc = one_row(ckpt, text, T, v->dtypes[k], threads, F, e) || write_rows(tdir, F, e);
            *done += rc == 0;
        }
        if (!rc && v->by_position) rc = by_position(v, tdir, ckpt, text, T, threads, done, e);
    }
    free(F);
    if (!rc && decode) rc = decode_trial(v, tdir, ckpt, threads, done, e);
    return rc ? -1 : 0;
}

int al_sweep_evaluate_trial(const al_sweep *s, const al_sweep_trial *t, const char *dir,
                            long threads, int *computed, al_err *e)
{
    char tdir[TDIR_LEN];
    al_results_trial_dir(tdir, sizeof tdir, dir, t);
    *computed = 0;
    return s->eval.on ? eval_trial(s, t, tdir, threads, 0, computed, e) : 0;
}

int al_sweep_evaluate(const al_sweep *s, const char *dir, long threads, al_sweep_eval_stats *st)
{
    memset(st, 0, sizeof *st);
    if (!s->eval.on) return 0;
    for (int i = 0; i < s->n_trials; i++) {
        const al_sweep_trial *t = &s->trials[i];
        char tdir[TDIR_LEN];
        al_trial_result r;
        al_err e;
        al_results_trial_dir(tdir, sizeof tdir, dir, t);
        if (al_results_read_result(tdir, t->hash, &r) != 0 || r.status != AL_TRIAL_OK) continue;
        int before = st->computed;
        if (eval_trial(s, t, tdir, threads, 1, &st->computed, &e) != 0) {
            fprintf(stderr, "attnlab: sweep: eval of %s: %s\n", t->id, e.msg);
            st->failed++;
        } else if (st->computed > before) {
            fprintf(stderr, "sweep: evaluated %s (%d result(s))\n", t->id, st->computed - before);
        }
        st->trials++;
    }
    return st->failed ? -1 : 0;
}
