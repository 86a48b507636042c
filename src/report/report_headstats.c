/*
 * report_headstats.c - the report's per-configuration summary of what the heads
 * learned (al_report_headstats.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "al_attnmap.h"
#include "al_checkpoint.h"
#include "al_config_io.h"
#include "al_report_headstats.h"
#include "al_plugin.h"

#define PATH_LEN 4400

/* ------------------------------------------------------------ one trial */

int al_trial_model_open(const char *dir, const char *trial, al_trial_model *t, al_err *e)
{
    char path[PATH_LEN];
    memset(t, 0, sizeof *t);
    snprintf(path, sizeof path, "%s/%s/config.yaml", dir, trial);
    if (al_plugin_config_load(path, NULL, 0, &t->cfg, e)) return -1;
    snprintf(path, sizeof path, "%s/%s/%s", dir, trial, AL_CHECKPOINT_FILE);
    if (al_checkpoint_load(path, &t->m, NULL, e)) return -1;
    al_err de;
    t->has_data = al_data_open(&t->data, &t->cfg.data, t->m.cfg.seq_len, &de) == 0;
    if (!t->has_data) snprintf(t->data_err, sizeof t->data_err, "%s", de.msg);
    return 0;
}

void al_trial_model_close(al_trial_model *t)
{
    if (t->has_data) al_data_close(&t->data);
    al_model_free(&t->m);
    memset(t, 0, sizeof *t);
}

void al_trial_val_windows(al_trial_model *t, int n, int *tokens)
{
    AL_ASSERT(t->has_data);
    int T = t->m.cfg.seq_len;
    int *tgt = al_malloc((size_t)n * T * sizeof *tgt);
    float *w = al_malloc((size_t)n * T * sizeof *w);
    al_rng rng;
    al_rng_seed(&rng, t->cfg.train.eval_seed);
    al_data_batch(&t->data, AL_SPLIT_VAL, &rng, n, T, tokens, tgt, w);
    free(tgt);
    free(w);
}

typedef struct trial_stats {
    int counted, has_maps, L, H;
    al_head_stats *s;           /* (L * H) */
    char note[AL_ERR_LEN + 128];
} trial_stats;

int al_trial_has_checkpoint(const char *dir, const char *trial)
{
    char path[PATH_LEN];
    snprintf(path, sizeof path, "%s/%s/%s", dir, trial, AL_CHECKPOINT_FILE);
    return access(path, R_OK) == 0;
}

/* The statistics of one finished trial; a trial that cannot be read gets
 * a note instead. */
static void trial_compute(const char *dir, const al_hs_trial *t, trial_stats *ts)
{
    al_trial_model tm;
    al_err e;
    if (al_trial_model_open(dir, t->trial, &tm, &e)) {
        snprintf(ts->note, sizeof ts->note, "not analysed: %s", e.msg);
        al_trial_model_close(&tm);
        return;
    }
    int T = tm.m.cfg.seq_len, n = tm.has_data ? AL_HS_WINDOWS : 0;
    int *tok = al_malloc(((size_t)AL_HS_WINDOWS * T + 1) * sizeof *tok);
    if (n) al_trial_val_windows(&tm, n, tok);
    else snprintf(ts->note, sizeof ts->note, "induction score only: %s", tm.data_err);
    ts->L = tm.m.cfg.n_layer;
    ts->H = tm.m.cfg.n_head;
    ts->s = al_calloc((size_t)ts->L * ts->H, sizeof *ts->s);
    if (al_head_stats_model(&tm.m, tok, n, T, NULL, ts->s, &e)) {
        snprintf(ts->note, sizeof ts->note, "not analysed: %s", e.msg);
    } else {
        ts->counted = 1;
        ts->has_maps = n > 0;
    }
    free(tok);
    al_trial_model_close(&tm);
}

/* ------------------------------------------------------------ summary */

typedef struct cfg_sum {
    const al_hs_trial *first;
    int models, with_maps, heads, causal;
    double quality, prev_heads, ind_heads, entropy, max_prev, max_ind;
} cfg_sum;

/* A state layer's heads have signed weights, not probabilities: their
 * statistics are NaN (al_head_stats_model) and they are not counted. */
static void cfg_add(cfg_sum *c, const al_hs_trial *t, const trial_stats *ts)
{
    int n = 0, prev = 0, ind = 0;
    double ent = 0;
    for (int k = 0; k < ts->L * ts->H; k++) {
        const al_head_stats *s = &ts->s[k];
        if (isnan(s->induction)) continue;
        n++;
        prev += s->prev > AL_HEAD_THRESHOLD;
        ind += s->induction > AL_HEAD_THRESHOLD;
        ent += s->entropy;
        c->max_prev = s->prev > c->max_prev ? s->prev : c->max_prev;
        c->max_ind = s->induction > c->max_ind ? s->induction : c->max_ind;
    }
    c->models++;
    c->heads = n;
    c->quality += t->quality;
    c->ind_heads += ind;
    if (ts->has_maps && n) c->with_maps++, c->prev_heads += prev, c->entropy += ent / n;
}

/* One decimal unless whole. */
static void fmt_count(char *buf, size_t n, double v)
{
    if (v == floor(v)) snprintf(buf, n, "%.0f", v);
    else snprintf(buf, n, "%.1f", v);
}

static void md_row(FILE *f, const cfg_sum *c)
{
    char prev[32] = "n/a", ind[32] = "n/a", ent[32] = "n/a", mp[32] = "n/a", mi[32] = "n/a";
    if (c->with_maps) {
        fmt_count(prev, sizeof prev, c->prev_heads / c->with_maps);
        snprintf(ent, sizeof ent, "%.2f", c->entropy / c->with_maps);
        snprintf(mp, sizeof mp, "%.2f", c->max_prev);
    }
    if (c->heads) {   /* none: every layer keeps a state */
        fmt_count(ind, sizeof ind, c->ind_heads / c->models);
        snprintf(mi, sizeof mi, "%.2f", c->max_ind);
    }
    fprintf(f, "| %s%s | %.0f | %.4f | %d | %s | %s | %s | %s | %s | %d |\n",
            c->first->config, c->causal == 0 ? " (no causal mask)" : "", c->first->kv,
            c->quality / c->models, c->heads, prev, ind, mp, mi, ent, c->models);
}

static void md_section(FILE *f, const char *quality_name, const al_hs_trial *t,
                       const trial_stats *ts, int n)
{
    cfg_sum *c = al_calloc((size_t)n + 1, sizeof *c);
    int nc = 0;
    for (int i = 0; i < n; i++) {
        if (!ts[i].counted) continue;
        int k = 0;
        while (k < nc && strcmp(c[k].first->config, t[i].config) != 0) k++;
        if (k == nc) c[nc].first = &t[i], c[nc++].causal = t[i].causal;
        cfg_add(&c[k], &t[i], &ts[i]);
    }
    fprintf(f, "\n## What the heads learned\n\n"
            "Attention statistics of every head of each finished trial's checkpoint "
            "(`heads.csv` lists them all; `attnlab attention CHECKPOINT` draws one model's "
            "maps). A **previous-token head** gives on average more than %.1f of its attention "
            "to the token just before the query; an **induction head** gives more than %.1f to "
            "the token that followed the current token's earlier occurrence, on random tokens "
            "repeated twice (Olsson et al. 2022). Previous-token scores and entropy are over %d "
            "windows of the validation split (queries 1..T-1); counts are per model, averaged "
            "over seeds; max is the largest score of any head; entropy is in nats, averaged "
            "over heads. A state layer (linear, deltanet) has signed weights, not attention "
            "probabilities: its heads are not counted (n/a where no layer attends).\n\n", AL_HEAD_THRESHOLD, AL_HEAD_THRESHOLD, AL_HS_WINDOWS);
    fprintf(f, "| configuration | KV bytes/token | %s | heads | previous-token heads | "
            "induction heads | max prev | max induction | mean entropy | models |\n"
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
            quality_name);
    for (int k = 0; k < nc; k++) md_row(f, &c[k]);
    for (int i = 0, notes = 0; i < n; i++)
        if (ts[i].note[0]) fprintf(f, "%s- `%s`: %s\n", notes++ ? "" : "\n", t[i].trial, ts[i].note);
    free(c);
}

/* ------------------------------------------------------------ public */

static int write_csv(const char *dir, const al_hs_trial *t, const trial_stats *ts, int n,
                     al_err *e)
{
    char path[PATH_LEN], tmp[PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/heads.csv", dir);
    FILE *f = al_open_atomic(path, tmp, sizeof tmp, e);
    if (!f) return -1;
    fputs("trial,config,layer,head,entropy,distance,first_token,prev_token,induction\n", f);
    for (int i = 0; i < n; i++)
        for (int k = 0; ts[i].counted && k < ts[i].L * ts[i].H; k++) {
            const al_head_stats *s = &ts[i].s[k];
            fprintf(f, "%s,%s,%d,%d,", t[i].trial, t[i].config, k / ts[i].H, k % ts[i].H);
            if (ts[i].has_maps)
                fprintf(f, "%.6f,%.6f,%.6f,%.6f,", s->entropy, s->distance, s->first, s->prev);
            else
                fputs(",,,,", f);
            fprintf(f, "%.6f\n", s->induction);
        }
    return al_commit_atomic(f, tmp, path, e);
}

int al_headstats_section(FILE *md, const char *dir, const char *quality_name,
                         const al_hs_trial *t, int n, al_err *e)
{
    trial_stats *ts = al_calloc((size_t)n + 1, sizeof *ts);
    int any = 0, rc = 0;
    for (int i = 0; i < n; i++)
        if (t[i].ok && al_trial_has_checkpoint(dir, t[i].trial)) {
            trial_compute(dir, &t[i], &ts[i]);
            any = 1;
        }
    if (any) {
        rc = write_csv(dir, t, ts, n, e);
        md_section(md, quality_name, t, ts, n);
    }
    for (int i = 0; i < n; i++) free(ts[i].s);
    free(ts);
    return rc;
}
