/*
 * test_torch.c - parity with an independent PyTorch implementation of the
 * model spec (scripts/attnlab_torch.py, run by Debian's /usr/bin/python3):
 * `attnlab score` of a briefly trained checkpoint equals the script's score
 * to 1e-4, and the loss and every gradient at initialisation match
 * autograd (float64) to a relative 1e-4, for every built-in variant and
 * every optional setting a variant has (mla with d_q_latent); and
 * `attnlab attention`'s probabilities equal the script's to 1e-5 for the
 * same variants (weights scaled up so the maps are far from uniform) and
 * for mha without the causal mask; the same for four model.layer_attention
 * stacks, [gqa n_kv_head 2, mha], [mla, mqa] and the hybrids [linear, linear,
 * linear, mha] and [deltanet, deltanet, deltanet, mha] (the script reads each
 * layer's attention from the checkpoint; a state layer's maps are its
 * equivalent attention matrix). Skipped, with
 * a message, where torch is absent (AL_TORCH_PYTHON names another interpreter).
 *
 * torch takes seconds to import, so one unchecked fixture prepares every
 * checkpoint and runs the script once over a job list; the tests read its
 * output.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "al_checkpoint.h"
#include "al_config_io.h"
#include "al_registry.h"
#include "al_safetensors.h"
#include "al_test.h"
#include "al_test_model.h"
#include "al_train.h"

#define MAX_CASES 48

typedef struct pcase {
    char name[64];
    const al_variant *v;
    const char *stack[4];   /* a model.layer_attention of n_stack items, or NULL */
    int n_stack;            /* 2, or 4 for a 4-layer stack (n_layer = n_stack) */
    char trained[4200], init[4200], grads[4200], peaked[4200], maps[4200];
    double score;       /* attnlab score of the trained checkpoint */
    long tokens;
} pcase;

static struct {
    char skip[256], error[1024];
    char *dir, data[AL_PATH_LEN], bad_grads[4300];
    int n;
    pcase c[MAX_CASES + 1];   /* the last one: mha without the causal mask, maps only */
    char *out;          /* the script's output */
} P;

static const char *python(void)
{
    const char *p = getenv("AL_TORCH_PYTHON");
    return p ? p : "/usr/bin/python3";
}

/* Record the first setup failure (a fixture may not use ck_assert). */
static int setup_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int setup_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (!P.error[0]) vsnprintf(P.error, sizeof P.error, fmt, ap);
    va_end(ap);
    return -1;
}

static al_model_config case_config(const pcase *c)
{
    al_model_config mc;
    if (c->stack[0]) {
        const al_variant *vs[4];
        for (int i = 0; i < c->n_stack; i++) vs[i] = al_variant_find(c->stack[i]);
        al_test_stack_config(&mc, vs, c->n_stack, c->n_stack, 16, 4, 4, 8, 256);
        return mc;
    }
    al_test_tiny_config(&mc, c->v, 2, 16, 4, 4, 8, 256);
    const char *plus = strchr(c->name, '+');
    if (plus) mc.attn_set[al_variant_setting_index(c->v, plus + 1)] = 4;
    return mc;
}

/* Every built-in variant, and each with one optional setting at 4 where
 * the variant accepts that (mla+d_q_latent). */
static void list_cases(void)
{
    for (int i = 0; i < al_variant_count(); i++) {
        const al_variant *v = al_variant_at(i);
        if (strcmp(al_variant_origin(i), "built-in") != 0) continue;
        for (int opt = -1; opt < al_variant_n_settings(v); opt++) {
            if (opt >= 0 && v->settings[opt].required) continue;
            /* every case is checked: more than fit is a test to widen, not skip */
            ck_assert_msg(P.n < MAX_CASES, "more PyTorch cases than MAX_CASES (%d)", MAX_CASES);
            pcase *c = &P.c[P.n];
            memset(c, 0, sizeof *c);
            snprintf(c->name, sizeof c->name, "%s%s%s", v->name, opt >= 0 ? "+" : "",
                     opt >= 0 ? v->settings[opt].name : "");
            c->v = v;
            al_model_config mc = case_config(c);
            al_model m;
            al_err e;
            if (al_model_init(&m, &mc, &e) != 0) continue;
            al_model_free(&m);
            P.n++;
        }
    }
    /* alternating stacks: every layer its own variant; and a hybrid of
     * three state layers per attention layer (docs/state-layers.md) */
    static const char *const stacks[][4] = {{"gqa", "mha"}, {"mla", "mqa"},
                                            {"linear", "linear", "linear", "mha"},
                                            {"deltanet", "deltanet", "deltanet", "mha"}};
    for (int s = 0; s < 4; s++) {
        ck_assert_msg(P.n < MAX_CASES, "more PyTorch cases than MAX_CASES (%d)", MAX_CASES);
        pcase *c = &P.c[P.n++];
        memset(c, 0, sizeof *c);
        c->n_stack = stacks[s][2] ? 4 : 2;
        int len = snprintf(c->name, sizeof c->name, "stack %s", stacks[s][0]);
        for (int i = 0; i < c->n_stack; i++) {
            c->stack[i] = stacks[s][i];
            if (i) len += snprintf(c->name + len, sizeof c->name - len, "/%s", stacks[s][i]);
        }
        c->v = al_variant_find(stacks[s][0]);
    }
}

/* The initialised model saved as is, and one trained for a few steps. */
static int make_checkpoints(pcase *c, int k)
{
    al_model_config mc = case_config(c);
    al_model m;
    al_err e;
    snprintf(c->init, sizeof c->init, "%s/init_%d.safetensors", P.dir, k);
    if (al_model_init(&m, &mc, &e) != 0) return setup_fail("%s: %s", c->name, e.msg);
    al_model_init_weights(&m, 100 + k);
    int rc = al_checkpoint_save(c->init, &m, 0, &e);
    al_model_free(&m);
    if (rc) return setup_fail("%s: %s", c->name, e.msg);
    al_config cfg;
    al_config_defaults(&cfg);
    snprintf(cfg.data.path, sizeof cfg.data.path, "%s", P.data);
    cfg.model = mc;
    cfg.train = (al_train_config){.steps = 6, .batch_size = 4, .lr = 1e-2, .min_lr = 1e-3,
                                  .warmup_steps = 1, .weight_decay = 0.1, .beta1 = 0.9,
                                  .beta2 = 0.99, .grad_clip = 1.0, .eval_every = 6,
                                  .eval_batches = 1, .seed = 1, .eval_seed = 2, .threads = 1};
    char out[4000];
    snprintf(out, sizeof out, "%s/run_%d", P.dir, k);
    al_train_opts o = {.outdir = out};
    al_train_result r;
    if (al_train(&cfg, &o, &r, &e) != 0) return setup_fail("%s: %s", c->name, e.msg);
    snprintf(c->trained, sizeof c->trained, "%s/model.safetensors", out);
    snprintf(c->grads, sizeof c->grads, "%s/grads_%d.safetensors", P.dir, k);
    return 0;
}

/* A checkpoint whose attention weights are the initial ones times 20 (far
 * from uniform maps), and `attnlab attention` over it into c->maps. */
static int make_maps(pcase *c, int k, int causal)
{
    al_model_config mc = case_config(c);
    al_model m;
    al_err e;
    char cmd[13000], *out;
    mc.causal = causal;
    if (al_model_init(&m, &mc, &e) != 0) return setup_fail("%s: %s", c->name, e.msg);
    al_model_init_weights(&m, 200 + k);
    for (int i = 0; i < m.n_tensors; i++)
        if (strstr(m.tensors[i].name, ".attn.") && m.tensors[i].ndim == 2)
            for (size_t j = 0; j < m.tensors[i].numel; j++)
                m.params[m.tensors[i].offset + j] *= 20.0f;
    snprintf(c->peaked, sizeof c->peaked, "%s/peaked_%d.safetensors", P.dir, k);
    int rc = al_checkpoint_save(c->peaked, &m, 0, &e);
    al_model_free(&m);
    if (rc) return setup_fail("%s: %s", c->name, e.msg);
    snprintf(c->maps, sizeof c->maps, "%s/maps_%d", P.dir, k);
    snprintf(cmd, sizeof cmd, "AL_GNUPLOT=/nonexistent %s attention %s --prompt 'Romeo, O' "
             "--out %s --threads 1", al_test_binary(), c->peaked, c->maps);
    rc = al_test_run(cmd, &out);
    if (rc != 0) setup_fail("%s failed: %.600s", cmd, out);
    free(out);
    return rc;
}

static int run_capture(const char *cmd, char **out)
{
    int rc = al_test_run(cmd, out);
    if (rc != 0) setup_fail("%s failed: %.600s", cmd, *out);
    return rc;
}

/* attnlab score and attnlab grads for one case. */
static int run_attnlab(pcase *c)
{
    char cmd[13000], *out;
    snprintf(cmd, sizeof cmd, "%s score %s %s --threads 1", al_test_binary(), c->trained, P.data);
    if (run_capture(cmd, &out)) return free(out), -1;
    const char *l = strstr(out, "\nloss=");
    if (!l || sscanf(l, "\nloss=%lf tokens=%ld", &c->score, &c->tokens) != 2)
        return setup_fail("no score line: %s", out), free(out), -1;
    free(out);
    snprintf(cmd, sizeof cmd, "%s grads %s %s --out %s --threads 1", al_test_binary(), c->init,
             P.data, c->grads);
    int rc = run_capture(cmd, &out);
    free(out);
    return rc;
}

/* A copy of the first case's gradients with one tensor off by 1%: the
 * comparison must catch it. */
static int perturbed_grads(void)
{
    al_st_file f;
    al_err e;
    if (al_st_read(P.c[0].grads, &f, &e)) return setup_fail("%s", e.msg);
    al_st_out t[128];
    float *data[128];
    const char *meta[] = {"attnlab.loss", al_st_meta(&f, "attnlab.loss"), "attnlab.windows",
                          al_st_meta(&f, "attnlab.windows"), "attnlab.seq_len",
                          al_st_meta(&f, "attnlab.seq_len")};
    for (int i = 0; i < f.n && i < 128; i++) {
        data[i] = malloc(f.t[i].numel * sizeof(float) + 1);
        memcpy(data[i], f.t[i].data, f.t[i].numel * sizeof(float));
        if (strstr(f.t[i].name, ".attn.wo.")) data[i][0] *= 1.5f, data[i][1] *= 0.5f;
        t[i] = (al_st_out){f.t[i].name, AL_ST_F32, f.t[i].ndim, {f.t[i].shape[0], f.t[i].shape[1]},
                           data[i]};
    }
    snprintf(P.bad_grads, sizeof P.bad_grads, "%s/bad_grads.safetensors", P.dir);
    int rc = al_st_write(P.bad_grads, t, f.n, meta, 3, &e);
    for (int i = 0; i < f.n && i < 128; i++) free(data[i]);
    al_st_free(&f);
    return rc ? setup_fail("%s", e.msg) : 0;
}

static int write_jobs(char *path, size_t n)
{
    snprintf(path, n, "%s/jobs.txt", P.dir);
    FILE *f = fopen(path, "w");
    if (!f) return setup_fail("cannot write %s", path);
    for (int k = 0; k < P.n; k++) {
        fprintf(f, "score %s %s\n", P.c[k].trained, P.data);
        fprintf(f, "grads %s %s %s\n", P.c[k].init, P.data, P.c[k].grads);
    }
    for (int k = 0; k <= P.n; k++) fprintf(f, "attention %s %s\n", P.c[k].peaked, P.c[k].maps);
    fprintf(f, "grads %s %s %s\n", P.c[0].init, P.data, P.bad_grads);
    fclose(f);
    return 0;
}

static void setup(void)
{
    char cmd[13000], jobs[4300], *out;
    snprintf(cmd, sizeof cmd, "%s -c 'import torch' 2>/dev/null", python());
    if (al_test_run(cmd, &out) != 0) {
        snprintf(P.skip, sizeof P.skip, "skipped: %s with torch not found (apt-get install "
                 "python3-torch)", python());
        fprintf(stderr, "torch: %s\n", P.skip);
        free(out);
        return;
    }
    free(out);
    P.dir = al_test_tmpdir();
    char text[1601];
    const char *s = "O Romeo, Romeo! wherefore art thou Romeo? Deny thy father. ";
    for (int i = 0; i < 1600; i++) text[i] = s[(i * 3 + i / 11) % strlen(s)];
    text[1600] = 0;
    char *d = al_test_write(P.dir, "data.txt", text);
    snprintf(P.data, sizeof P.data, "%s", d);
    free(d);
    list_cases();
    for (int k = 0; k < P.n; k++)
        if (make_checkpoints(&P.c[k], k) || run_attnlab(&P.c[k]) || make_maps(&P.c[k], k, 1))
            return;
    P.c[P.n] = P.c[0];   /* mha */
    snprintf(P.c[P.n].name, sizeof P.c[P.n].name, "mha causal=false");
    if (make_maps(&P.c[P.n], P.n, 0)) return;
    if (P.n == 0 || perturbed_grads() || write_jobs(jobs, sizeof jobs)) return;
    snprintf(cmd, sizeof cmd, "%s %s/scripts/attnlab_torch.py batch %s", python(),
             al_test_srcdir(), jobs);
    al_test_run(cmd, &P.out);   /* non-zero: the perturbed job fails by design */
}

static void teardown(void)
{
    free(P.out);
    free(P.dir);
}

/* The script's output for one job line, up to the next job (malloc'ed). */
static char *section(const char *fmt, const char *a, const char *b, const char *c)
{
    char head[13000];
    snprintf(head, sizeof head, "== ");
    snprintf(head + 3, sizeof head - 3, fmt, a, b, c);
    strcat(head, "\n");
    const char *p = P.out ? strstr(P.out, head) : NULL;
    ck_assert_msg(p != NULL, "no output for '%s' in:\n%s", head, P.out ? P.out : "(none)");
    p += strlen(head);
    const char *end = strstr(p, "\n== ");
    size_t n = end ? (size_t)(end - p + 1) : strlen(p);
    char *s = malloc(n + 1);
    memcpy(s, p, n);
    s[n] = 0;
    return s;
}

static int ready(void)
{
    if (P.skip[0]) {
        fprintf(stderr, "torch: %s\n", P.skip);
        return 0;
    }
    ck_assert_msg(!P.error[0], "setup: %s", P.error);
    ck_assert_int_ge(P.n, 5);   /* mha, mqa, gqa, mla, mla+d_q_latent */
    return 1;
}

START_TEST(torch_score_equals_attnlab_score_for_every_builtin_variant)
{
    if (!ready()) return;
    for (int k = 0; k < P.n; k++) {
        const pcase *c = &P.c[k];
        char *s = section("score %s %s", c->trained, P.data, "");
        const char *l = strstr(s, "loss=");
        double loss;
        long tokens;
        ck_assert_msg(l && sscanf(l, "loss=%lf tokens=%ld", &loss, &tokens) == 2, "%s: %s",
                      c->name, s);
        ck_assert_int_eq(tokens, c->tokens);
        ck_assert_msg(fabs(loss - c->score) <= 1e-4, "%s: torch %.6f, attnlab %.6f", c->name,
                      loss, c->score);
        free(s);
    }
}
END_TEST

/* Grads of the cases whose variant name is in `names` (NULL: all). */
static int check_grads(const char *const *names)
{
    int checked = 0;
    for (int k = 0; k < P.n; k++) {
        const pcase *c = &P.c[k];
        int in = !names;
        for (int i = 0; names && names[i] && !c->stack[0]; i++)
            in |= strcmp(names[i], c->v->name) == 0;
        if (!in) continue;
        char *s = section("grads %s %s %s", c->init, P.data, c->grads);
        ck_assert_msg(strstr(s, "\ngrads ok tensors="), "%s:\n%s", c->name, s);
        free(s);
        checked++;
    }
    return checked;
}

START_TEST(torch_grads_match_at_init_for_the_gqa_family)
{
    static const char *const family[] = {"mha", "mqa", "gqa", NULL};
    if (ready()) ck_assert_int_eq(check_grads(family), 3);
}
END_TEST

START_TEST(torch_grads_match_at_init_for_mla_with_and_without_query_compression)
{
    static const char *const mla[] = {"mla", NULL};
    if (ready()) ck_assert_int_eq(check_grads(mla), 2);
}
END_TEST

START_TEST(torch_grads_match_at_init_for_every_builtin_variant)
{
    if (ready()) ck_assert_int_eq(check_grads(NULL), P.n);
}
END_TEST

START_TEST(torch_attention_maps_equal_attnlab_attention_for_every_builtin_variant)
{
    if (!ready()) return;
    ck_assert_str_eq(P.c[0].v->name, "mha");
    for (int k = 0; k <= P.n; k++) {
        const pcase *c = &P.c[k];
        char *s = section("attention %s %s%s", c->peaked, c->maps, "");
        /* 8 tokens, 4 heads a layer (2 layers, 4 in a 4-item stack): 36 rows
         * a head masked, 64 unmasked */
        int heads = 4 * (c->n_stack == 4 ? 4 : 2);
        char want[64];
        snprintf(want, sizeof want, "attention ok heads=%d rows=%d T=8 ", heads,
                 heads * (k < P.n ? 36 : 64));
        ck_assert_msg(strstr(s, want), "%s: want '%s' in:\n%s", c->name, want, s);
        free(s);
    }
}
END_TEST

/* Per-layer attention: the script builds each layer's own variant from the
 * checkpoint's layer_attention, and agrees on the score (1e-4), every
 * gradient and every layer's attention map. */
START_TEST(torch_agrees_on_alternating_layer_attention_stacks)
{
    if (!ready()) return;
    int stacks = 0;
    for (int k = 0; k < P.n; k++) {
        const pcase *c = &P.c[k];
        if (!c->stack[0]) continue;
        stacks++;
        char *s = section("score %s %s", c->trained, P.data, "");
        const char *l = strstr(s, "loss=");
        double loss;
        long tokens;
        ck_assert_msg(l && sscanf(l, "loss=%lf tokens=%ld", &loss, &tokens) == 2, "%s: %s",
                      c->name, s);
        char want[128];
        snprintf(want, sizeof want, "variant=%s ", c->name + strlen("stack "));
        ck_assert_msg(strstr(s, want), "%s: the script did not build the stack: %s", c->name, s);
        ck_assert_msg(fabs(loss - c->score) <= 1e-4, "%s: torch %.6f, attnlab %.6f", c->name,
                      loss, c->score);
        free(s);
        s = section("grads %s %s %s", c->init, P.data, c->grads);
        ck_assert_msg(strstr(s, "\ngrads ok tensors="), "%s:\n%s", c->name, s);
        free(s);
        s = section("attention %s %s", c->peaked, c->maps, "");
        ck_assert_msg(strstr(s, "attention ok"), "%s:\n%s", c->name, s);
        free(s);
    }
    ck_assert_int_eq(stacks, 4);
}
END_TEST

START_TEST(torch_grads_check_catches_a_perturbed_gradient)
{
    if (!ready()) return;
    char *s = section("grads %s %s %s", P.c[0].init, P.data, P.bad_grads);
    ck_assert_msg(strstr(s, "\ngrads MISMATCH"), "%s", s);
    free(s);
}
END_TEST

Suite *torch_suite(void)
{
    Suite *s = suite_create("torch");
    TCase *tc = tcase_create("torch");
    tcase_set_timeout(tc, 300);
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_test(tc, torch_score_equals_attnlab_score_for_every_builtin_variant);
    tcase_add_test(tc, torch_grads_match_at_init_for_the_gqa_family);
    tcase_add_test(tc, torch_grads_match_at_init_for_mla_with_and_without_query_compression);
    tcase_add_test(tc, torch_grads_match_at_init_for_every_builtin_variant);
    tcase_add_test(tc, torch_grads_check_catches_a_perturbed_gradient);
    tcase_add_test(tc, torch_agrees_on_alternating_layer_attention_stacks);
    tcase_add_test(tc, torch_attention_maps_equal_attnlab_attention_for_every_builtin_variant);
    suite_add_tcase(s, tc);
    return s;
}
