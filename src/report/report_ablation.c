/*
 * report_ablation.c - the report's causal-mask section (al_report_ablation.h): scores
 * with the mask applied, attention maps side by side, samples through the
 * KV cache.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "al_report_ablation.h"
#include "al_attnmap.h"
#include "al_checkpoint.h"
#include "al_decode.h"
#include "al_eval.h"

#define PATH_LEN 4400
#define MAX_LAYERS_SHOWN 64

typedef struct cfg_eval {
    const al_hs_trial *rep;    /* the first finished trial with a checkpoint */
    int causal, models, L, rep_scored;
    double loss, masked;       /* sums over models */
    double rep_loss, rep_masked;   /* the representative's own */
    double next_mean, next_max;
    int next_l, next_h;        /* the head with the most attention on the next token */
    int plots;                 /* al_attnmap_plot's result, -1 when not drawn */
    char note[AL_ERR_LEN + 64];
    char *sample;
} cfg_eval;

static void set_mask(al_model *m, int causal) { al_model_set_causal(m, causal); }

/* Validation loss as trained and with the mask, added to c. */
static void score_trial(const char *dir, const al_hs_trial *t, cfg_eval *c)
{
    al_trial_model tm;
    al_err e;
    int bad = al_trial_model_open(dir, t->trial, &tm, &e);
    if (bad || !tm.has_data) {
        snprintf(c->note, sizeof c->note, "`%s` not scored: %s", t->trial,
                 bad ? e.msg : tm.data_err);
        al_trial_model_close(&tm);
        return;
    }
    if (al_model_reserve(&tm.m, tm.cfg.train.batch_size, tm.m.cfg.seq_len, &e) == 0) {
        double a = al_evaluate(&tm.m, &tm.data, &tm.cfg.train, NULL);
        set_mask(&tm.m, 1);
        double b = al_evaluate(&tm.m, &tm.data, &tm.cfg.train, NULL);
        if (t == c->rep) c->rep_loss = a, c->rep_masked = b, c->rep_scored = 1;
        c->loss += a, c->masked += b, c->models++;
    }
    al_trial_model_close(&tm);
}

/* The maps' prompt: a line of validation text (the bytes after the first
 * newline of the split), or the start of a validation window for data that
 * is not text; at most AL_ABLATION_PROMPT tokens. Returns its length, 0
 * when the trial's data cannot be read. */
static int pick_prompt(const char *dir, const char *trial, int *tok)
{
    al_trial_model tm;
    al_err e;
    int T = 0;
    if (al_trial_model_open(dir, trial, &tm, &e) == 0 && tm.has_data) {
        int S = tm.m.cfg.seq_len, max = S < AL_ABLATION_PROMPT ? S : AL_ABLATION_PROMPT;
        if (tm.data.bytes) {
            size_t at = tm.data.n_train;
            while (at < tm.data.n && tm.data.bytes[at] != '\n') at++;
            at = at + 1 + (size_t)max <= tm.data.n ? at + 1 : tm.data.n_train;
            for (T = 0; T < max && at + T < tm.data.n; T++) tok[T] = tm.data.bytes[at + T];
        } else {
            int *w = al_malloc((size_t)S * sizeof *w);
            al_trial_val_windows(&tm, 1, w);
            memcpy(tok, w, (size_t)max * sizeof *tok);
            T = max;
            free(w);
        }
    }
    al_trial_model_close(&tm);
    return T;
}

/* Mean attention on the next token (p_i,i+1 over queries 0..T-2) of every
 * head of the last forward; the mean over heads and the largest. */
static void next_token_mass(const al_model *m, int T, cfg_eval *c)
{
    int H = m->cfg.n_head, n = 0;
    float *P = al_malloc((size_t)H * T * T * sizeof *P);
    c->next_mean = 0, c->next_max = -1;
    for (int l = 0; l < m->cfg.n_layer; l++) {
        al_attention_layer(m, l, T, P);
        for (int h = 0; h < H; h++, n++) {
            double s = 0;
            for (int i = 0; i + 1 < T; i++) s += P[((size_t)h * T + i) * T + i + 1];
            s /= T > 1 ? T - 1 : 1;
            c->next_mean += s;
            if (s > c->next_max) c->next_max = s, c->next_l = l, c->next_h = h;
        }
    }
    c->next_mean /= n;
    free(P);
}

/* Maps of the representative trial over the prompt (as trained), then a
 * sample through the KV cache with the mask applied. */
static int show_trial(const char *dir, cfg_eval *c, const int *tok, int T, al_err *e)
{
    al_trial_model tm;
    al_err te;
    char out[PATH_LEN], title[512];
    c->plots = -1;
    if (al_trial_model_open(dir, c->rep->trial, &tm, &te)) {
        snprintf(c->note, sizeof c->note, "`%s` not shown: %s", c->rep->trial, te.msg);
        al_trial_model_close(&tm);
        return 0;
    }
    int L = tm.m.cfg.n_layer, H = tm.m.cfg.n_head, rc = 0;
    int *layers = al_malloc((size_t)L * sizeof *layers), *heads = al_malloc((size_t)H * sizeof *heads);
    for (int i = 0; i < L; i++) layers[i] = i;
    for (int i = 0; i < H; i++) heads[i] = i;
    c->L = L;
    snprintf(out, sizeof out, "%s/attention/%s", dir, c->rep->config);
    snprintf(title, sizeof title, "%s (causal: %s)", c->rep->config, c->causal ? "true" : "false");
    al_attnmap a = {.dir = out, .title = title, .tokens = tok, .T = T, .layers = layers,
                    .heads = heads, .n_layers = L, .n_heads = H};
    if (T > 0 && al_attention_forward(&tm.m, tok, T, &te) == 0) {
        next_token_mass(&tm.m, T, c);
        if ((rc = al_attnmap_write(&tm.m, &a, e)) == 0) c->plots = al_attnmap_plot(&a);
    } else if (T > 0) {
        snprintf(c->note, sizeof c->note, "`%s`: no maps: %s", c->rep->trial, te.msg);
    }
    set_mask(&tm.m, 1);   /* what a KV cache does */
    size_t len = 0;
    FILE *mem = open_memstream(&c->sample, &len);
    al_generate_opts o = {.prompt = (const unsigned char *)AL_ABLATION_SAMPLE_PROMPT,
                          .prompt_len = strlen(AL_ABLATION_SAMPLE_PROMPT), .tokens = -1,
                          .temperature = 0.8, .top_k = 40, .seed = 1, .dtype = -1};
    if (al_generate(&tm.m, &o, mem, stderr, NULL, &te) != 0)
        fprintf(mem, "(no sample: %s)", te.msg);
    fclose(mem);
    free(layers), free(heads);
    al_trial_model_close(&tm);
    return rc;
}

/* ------------------------------------------------------------ markdown */

static void md_scores(FILE *f, const cfg_eval *c, int nc)
{
    fputs("\n### Scores with the mask applied\n\nEach model's validation loss on the same "
          "batches (`train.eval_seed`), evaluated twice: as it was trained, and with the "
          "causal mask applied, which is what it gets when it generates one token at a time. "
          "For a masked model the two are the same; for an unmasked one the difference is "
          "what it had learned to read from the future.\n\n"
          "| configuration | causal | models | val loss as trained | val loss with the causal "
          "mask | change |\n| --- | --- | ---: | ---: | ---: | ---: |\n", f);
    for (int k = 0; k < nc; k++) {
        if (!c[k].models) continue;
        double a = c[k].loss / c[k].models, b = c[k].masked / c[k].models;
        fprintf(f, "| %s | %s | %d | %.4f | %.4f | %+.4f |\n", c[k].rep->config,
                c[k].causal ? "true" : "**false**", c[k].models, a, b, b - a);
    }
}

static void md_maps(FILE *f, const cfg_eval *c, int nc, const int *tok, int T)
{
    fputs("\n### What each model attends to\n\nEvery head's attention over a line of "
          "validation text", f);
    if (T) {
        fputs(" (`", f);
        for (int i = 0; i < T; i++)
            fputc(tok[i] >= 0x20 && tok[i] < 0x7f && tok[i] != '`' ? tok[i] : '.', f);
        fputs("`)", f);
    }
    fputs(", as each model was trained: rows are queries, columns keys, grey cells the future "
          "under the mask (scripts and data in `attention/<configuration>/`). The next-token "
          "score is the mean attention a query gives the token right after it, the one it must "
          "predict: 0 under the mask.\n\n| layer |", f);
    int L = 0;
    for (int k = 0; k < nc; k++) {
        fprintf(f, " %s (causal %s) |", c[k].rep->config, c[k].causal ? "true" : "false");
        L = c[k].L > L ? c[k].L : L;
    }
    fputs("\n| --- |", f);
    for (int k = 0; k < nc; k++) fputs(" --- |", f);
    fputs("\n| next-token score: mean over heads (largest head) |", f);
    for (int k = 0; k < nc; k++)
        if (c[k].L) fprintf(f, " %.3f (%.3f, layer %d head %d) |", c[k].next_mean, c[k].next_max,
                            c[k].next_l, c[k].next_h);
        else fputs(" n/a |", f);
    for (int l = 0; l < L && l < MAX_LAYERS_SHOWN; l++) {
        fprintf(f, "\n| %d |", l);
        for (int k = 0; k < nc; k++) {
            if (c[k].plots == 0 && l < c[k].L)
                fprintf(f, " ![%s layer %d](attention/%s/layer%d.png) |", c[k].rep->config, l,
                        c[k].rep->config, l);
            else
                fprintf(f, " %s |", c[k].plots == 1 ? "no picture: gnuplot not found"
                                    : c[k].plots == 2 ? "no picture: gnuplot failed" : "n/a");
        }
    }
    fputs("\n", f);
}

static void md_samples(FILE *f, const cfg_eval *c, int nc)
{
    fputs("\n### Samples through the KV cache\n\nGenerated one byte at a time from the KV "
          "cache (prompt \"" AL_ABLATION_SAMPLE_PROMPT "\", temperature 0.8, top-k 40, seed 1). "
          "A cache stores each token's keys and values once, computed when only the tokens "
          "before it existed, so decoding from it *is* decoding with the causal mask: the "
          "unmasked model is decoded with the mask applied (attnlab's decoder refuses it "
          "otherwise), and its loss with the mask above is the per-token quality of that "
          "decoding.\n", f);
    for (int k = 0; k < nc; k++) {
        if (!c[k].sample) continue;
        fprintf(f, "\n**%s** (causal %s, ", c[k].rep->config, c[k].causal ? "true" : "false");
        if (c[k].rep_scored)
            fprintf(f, "val loss %.4f as trained, %.4f with the mask applied; ", c[k].rep_loss,
                    c[k].rep_masked);
        fprintf(f, "trial `%s`):\n\n```text\n" AL_ABLATION_SAMPLE_PROMPT, c[k].rep->trial);
        for (const unsigned char *p = (const unsigned char *)c[k].sample; *p; p++)
            fputc(*p == '\n' || (*p >= 0x20 && *p < 0x7f && *p != '`') ? *p : '.', f);
        fputs("\n```\n", f);
    }
}

/* ------------------------------------------------------------ public */

/* Configurations with a finished trial that kept its checkpoint. */
static int gather(const char *dir, const al_hs_trial *t, int n, cfg_eval *c)
{
    int nc = 0;
    for (int i = 0; i < n; i++) {
        if (!t[i].ok || !al_trial_has_checkpoint(dir, t[i].trial)) continue;
        int k = 0;
        while (k < nc && strcmp(c[k].rep->config, t[i].config) != 0) k++;
        if (k == nc) c[nc].rep = &t[i], c[nc++].causal = t[i].causal != 0;
        score_trial(dir, &t[i], &c[k]);
    }
    return nc;
}

int al_ablation_section(FILE *md, const char *dir, const al_hs_trial *t, int n, al_err *e)
{
    int unmasked = 0, rc = 0, tok[AL_ABLATION_PROMPT], T = 0;
    for (int i = 0; i < n; i++) unmasked |= t[i].ok && t[i].causal == 0;
    if (!unmasked) return 0;
    cfg_eval *c = al_calloc((size_t)n + 1, sizeof *c);
    int nc = gather(dir, t, n, c);
    for (int k = 0; k < nc && !T; k++) T = pick_prompt(dir, c[k].rep->trial, tok);
    for (int k = 0; k < nc && !rc; k++) rc = show_trial(dir, &c[k], tok, T, e);
    fputs("\n## The causal mask\n\nConfigurations with causal **false** trained without the "
          "causal mask: every position also sees the tokens after it, including the one it must "
          "predict, so their training and validation loss fall far below the masked model's. "
          "That loss is not language modelling: generating one token at a time, the future it "
          "learned to copy is not there.\n", md);
    if (nc) {
        md_scores(md, c, nc);
        md_maps(md, c, nc, tok, T);
        md_samples(md, c, nc);
    } else {
        fputs("\nNo finished trial kept its checkpoint (`model.safetensors`): nothing to score, "
              "draw or sample.\n", md);
    }
    for (int k = 0, notes = 0; k < nc; k++) {
        if (c[k].note[0]) fprintf(md, "%s- %s\n", notes++ ? "" : "\n", c[k].note);
        free(c[k].sample);
    }
    free(c);
    return rc;
}
