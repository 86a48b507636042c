/*
 * test_rope.c - RoPE scaling (model.rope_scaling: linear, ntk, yarn) and
 * partial RoPE (model.rope_fraction, per layer_attention item): the
 * rotation of every kind equals an independent PyTorch implementation of
 * its paper's formula (tests/rope_ref.py) at positions past T0; fraction 0
 * leaves q and k unrotated and 0.25 rotates exactly each head's first
 * quarter (checked inside the gqa variant's saved q, k); gradients of a
 * stack of every RoPE-carrying variant match finite differences with
 * scaling on; decode through the cache equals the full forward past T0;
 * config and checkpoint round trips; the PyTorch loader scores a scaled,
 * partly NoPE checkpoint as `attnlab score` does (1e-4), --rope-scaling
 * included; bad --rope-scaling values are one-line errors with exit 2.
 * The PyTorch parts skip, saying so, without torch.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_check_variant.h"
#include "al_checkpoint.h"
#include "al_config_io.h"
#include "al_decode.h"
#include "al_kernels.h"
#include "al_registry.h"
#include "al_sweep_spec.h"
#include "al_test.h"
#include "al_test_model.h"

static const char *python(void)
{
    const char *p = getenv("AL_TORCH_PYTHON");
    return p ? p : "/usr/bin/python3";
}

static int have_torch(void)
{
    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s -c 'import torch'", python());
    int rc = al_test_run(cmd, &out);
    free(out);
    if (rc != 0) fprintf(stderr, "rope: skipped: %s with torch not found\n", python());
    return rc == 0;
}

static const int KINDS[] = {AL_ROPE_NONE, AL_ROPE_LINEAR, AL_ROPE_NTK, AL_ROPE_YARN};
static const char *const KIND_NAMES[] = {"none", "linear", "ntk", "yarn"};

/* ------------------------------------------------------------ the kernel vs PyTorch */

enum { RT = 48, RNH = 2, RDIM = 16, RT0 = 512 };

typedef struct rcase {
    int kind, pos0;
    float fraction;
    float x[RT * RNH * RDIM], y[RT * RNH * RDIM];
} rcase;

/* Every kind x fractions {1, 0.5, 0.25} x positions from 0 and from 4 T0 -
 * RT (all past T0): at T0 = 512 and base 10000 YaRN's ramp sees pairs
 * above beta (r = 81), inside it and below alpha. */
START_TEST(each_scaling_kind_equals_pytorch_past_T0)
{
    if (!have_torch()) return;
    static const float fracs[] = {1.0f, 0.5f, 0.25f};
    static const int pos0s[] = {0, 4 * RT0 - RT};
    enum { N = 4 * 3 * 2 };
    rcase *c = calloc(N, sizeof *c);
    char *dir = al_test_tmpdir(), in[512], out[512], cmd[2048];
    snprintf(in, sizeof in, "%s/in.txt", dir);
    snprintf(out, sizeof out, "%s/out.txt", dir);
    FILE *f = fopen(in, "w");
    ck_assert(f != NULL);
    al_rng r;
    al_rng_seed(&r, 5);
    for (int k = 0; k < N; k++) {
        c[k].kind = KINDS[k / 6], c[k].fraction = fracs[k / 2 % 3], c[k].pos0 = pos0s[k % 2];
        fprintf(f, "%s %.9g 4 %d 10000 %d %d %d %d\n", KIND_NAMES[c[k].kind], c[k].fraction, RT0,
                c[k].pos0, RT, RNH, RDIM);
        for (int i = 0; i < RT * RNH * RDIM; i++) {
            c[k].x[i] = c[k].y[i] = (float)al_rng_normal(&r);
            fprintf(f, "%.9g\n", c[k].x[i]);
        }
        al_rope rp = {.base = 10000.0f, .fraction = c[k].fraction, .kind = c[k].kind,
                      .factor = 4.0f, .original_seq_len = RT0};
        al_rope_apply_forward(c[k].y, 1, RT, RNH, RDIM, RDIM, RNH * RDIM, c[k].pos0, &rp);
    }
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s %s/tests/rope_ref.py %s %s", python(), al_test_srcdir(), in,
             out);
    char *log = NULL;
    ck_assert_msg(al_test_run(cmd, &log) == 0, "rope_ref.py: %s", log);
    free(log);
    f = fopen(out, "r");
    ck_assert(f != NULL);
    for (int k = 0; k < N; k++) {
        double worst = 0, moved = 0;
        for (int i = 0; i < RT * RNH * RDIM; i++) {
            double ref;
            ck_assert_int_eq(fscanf(f, "%lf", &ref), 1);
            worst = fmax(worst, fabs(ref - c[k].y[i]));
            moved = fmax(moved, fabs(ref - c[k].x[i]));
        }
        ck_assert_msg(worst < 2e-5, "%s fraction %g from %d: max |attnlab - torch| = %g",
                      KIND_NAMES[c[k].kind], c[k].fraction, c[k].pos0, worst);
        ck_assert_msg(moved > 0.1, "%s: the rotation moved nothing", KIND_NAMES[c[k].kind]);
    }
    fclose(f);
    free(c);
    free(dir);
}
END_TEST

/* The backward is the forward's transpose: <R x, y> = <x, R^T y>, YaRN's
 * temperature included. */
START_TEST(rope_backward_is_the_transpose_of_the_forward)
{
    enum { n = RT * RNH * RDIM };
    static float x[n], y[n], rx[n], rty[n];
    al_rng r;
    al_rng_seed(&r, 9);
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < n; i++) x[i] = rx[i] = (float)al_rng_normal(&r);
        for (int i = 0; i < n; i++) y[i] = rty[i] = (float)al_rng_normal(&r);
        al_rope rp = {.base = 10000.0f, .fraction = 0.5f, .kind = KINDS[k], .factor = 3.0f,
                      .original_seq_len = 64};
        al_rope_apply_forward(rx, 1, RT, RNH, RDIM, RDIM, RNH * RDIM, 100, &rp);
        al_rope_apply_backward(rty, 1, RT, RNH, RDIM, RDIM, RNH * RDIM, 100, &rp);
        double a = 0, b = 0;
        for (int i = 0; i < n; i++) a += (double)rx[i] * y[i], b += (double)x[i] * rty[i];
        ck_assert_msg(fabs(a - b) < 1e-4 * fabs(a) + 1e-3, "%s: %g vs %g", KIND_NAMES[k], a, b);
    }
}
END_TEST

/* ------------------------------------------------------------ partial RoPE in a variant */

/* The gqa layer's saved q and k (act: q (BT, H*dh), then k (BT, G*dh))
 * against x . w^T by hand, rotated by hand on the first rot elements of
 * each head (pairs (i, i + rot/2), frequency 10000^(-2i/rot)). */
static void check_gqa_rotation(float fraction, int rot)
{
    enum { D = 16, H = 2, G = 1, DH = 16, B = 1, T = 6 };
    al_attn_shape s = {D, H, DH, 8, 1, 10000.0f, 1e-5f, {G}, .rope = {.base = 0}};
    s.rope = (al_rope){.base = 10000.0f, .fraction = fraction, .kind = AL_ROPE_NONE,
                       .factor = 1.0f, .original_seq_len = 8};
    al_check_layer t;
    al_check_layer_init(&t, al_variant_find("gqa"), &s, B, T, 3);
    al_check_layer_loss(&t);
    const float *q = t.act, *k = t.act + (size_t)B * T * H * DH;
    double worst = 0, turned = 0;
    for (int w = 0; w < 2; w++) {   /* q (wq, H heads), k (wk, G heads) */
        const float *got = w ? k : q, *W = t.p[w];
        int nh = w ? G : H;
        for (int tt = 0; tt < T; tt++)
            for (int h = 0; h < nh; h++) {
                double z[DH];
                for (int j = 0; j < DH; j++) {
                    z[j] = 0;
                    for (int d = 0; d < D; d++)
                        z[j] += (double)t.x[tt * D + d] * W[(h * DH + j) * D + d];
                }
                double want[DH];
                memcpy(want, z, sizeof want);
                for (int i = 0; i < rot / 2; i++) {
                    double a = tt * pow(10000.0, -2.0 * i / rot);
                    want[i] = z[i] * cos(a) - z[i + rot / 2] * sin(a);
                    want[i + rot / 2] = z[i + rot / 2] * cos(a) + z[i] * sin(a);
                }
                for (int j = 0; j < DH; j++) {
                    double g = got[(tt * nh + h) * DH + j];
                    worst = fmax(worst, fabs(g - want[j]));
                    if (j < rot) turned = fmax(turned, fabs(g - z[j]));
                }
            }
    }
    ck_assert_msg(worst < 1e-4, "fraction %g: max |q,k - by hand| = %g", fraction, worst);
    if (rot > 0) ck_assert_msg(turned > 0.1, "fraction %g: nothing rotated", fraction);
    al_check_layer_free(&t);
}

START_TEST(rope_fraction_zero_leaves_q_and_k_unrotated)
{
    check_gqa_rotation(0.0f, 0);
}
END_TEST

START_TEST(rope_fraction_quarter_rotates_the_first_quarter_of_each_head)
{
    check_gqa_rotation(0.25f, 4);
    check_gqa_rotation(1.0f, 16);
}
END_TEST

/* ------------------------------------------------------------ whole models */

/* A stack of every RoPE-carrying built-in shape: gqa, mla, gta, tpa, gla,
 * local (d_head 8, d_rope 4), seq_len 8, rope_fraction 0.5 for the model
 * and item `nope` (or none: -1) at 0. */
static al_model_config rope_stack(int kind, int nope)
{
    static const char *const names[] = {"gqa", "mla", "gta", "tpa", "gla", "local"};
    enum { N = 6 };
    const al_variant *vs[N];
    for (int k = 0; k < N; k++) vs[k] = al_variant_find(names[k]);
    al_model_config c;
    ck_assert_int_eq(al_test_stack_config(&c, vs, N, N, 16, 2, 8, 8, 32), 0);
    for (int k = 0; k < N; k++) {
        int j = al_variant_setting_index(c.layer_attn[k].attn, "d_rope");
        if (j >= 0) c.layer_attn[k].set[j] = 4;
    }
    if (nope >= 0) c.layer_attn[nope].has_rope_fraction = 1, c.layer_attn[nope].rope_fraction = 0;
    c.rope_fraction = 0.5;
    snprintf(c.rope_scaling.kind, sizeof c.rope_scaling.kind, "%s", KIND_NAMES[kind]);
    c.rope_scaling.factor = 4;
    c.rope_scaling.original_seq_len = 4;
    memcpy(c.variant, c.layer_attn[0].variant, sizeof c.variant);
    memcpy(c.attn_set, c.layer_attn[0].set, sizeof c.attn_set);
    return c;
}

static void random_tokens(int *x, int n, int V, uint64_t seed)
{
    al_rng r;
    al_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) x[i] = (int)al_rng_below(&r, V);
}

static void scale_weights(al_model *m, float s)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].ndim == 2)
            for (size_t j = 0; j < m->tensors[i].numel; j++)
                m->params[m->tensors[i].offset + j] *= s;
}

START_TEST(gradients_match_finite_differences_with_scaling_on)
{
    for (int k = 1; k < 4; k++) {
        al_model_config c = rope_stack(KINDS[k], 2);
        al_model m;
        al_err e;
        ck_assert_msg(al_model_init(&m, &c, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(m.layers[0].ashape.rope.kind, KINDS[k]);
        ck_assert(m.layers[2].ashape.rope.fraction == 0.0f);
        al_model_init_weights(&m, 7);
        scale_weights(&m, 10.0f);
        int B = 2, T = 8, in[16], tgt[16];   /* positions past T0 = 4 */
        random_tokens(in, 16, 32, 1);
        random_tokens(tgt, 16, 32, 2);
        ck_assert_int_eq(al_model_reserve(&m, B, T, &e), 0);
        al_model_forward(&m, in, tgt, NULL, B, T);
        al_model_backward(&m);
        al_rng r;
        al_rng_seed(&r, 3);
        for (int t = 0; t < m.n_tensors; t++) {
            const al_tensor *ts = &m.tensors[t];
            if (!strstr(ts->name, ".attn.")) continue;
            double err = al_check_model_fd(&m, ts, in, tgt, NULL, B, T, 8, &r);
            ck_assert_msg(err < 2e-2, "%s: %s: grad rel err %g", KIND_NAMES[k], ts->name, err);
        }
        al_model_free(&m);
    }
}
END_TEST

START_TEST(decode_equals_the_full_forward_past_T0_with_scaling_on)
{
    enum { N = 40 };   /* 10 x T0, 5 x seq_len */
    for (int k = 0; k < 4; k++) {
        al_model_config c = rope_stack(KINDS[k], 5);
        al_model m;
        al_err e;
        ck_assert_msg(al_model_init(&m, &c, &e) == 0, "%s", e.msg);
        al_model_init_weights(&m, 29);
        scale_weights(&m, 6.0f);
        int tok[N];
        random_tokens(tok, N, 32, 8);
        float *full = al_check_full_logits(&m, tok, N, &e);
        ck_assert_msg(full != NULL, "%s", e.msg);
        double amax = 0, worst = al_check_decode_vs_full(&m, tok, full, 8, N, AL_KV_F32, &amax);
        ck_assert_msg(worst < 1e-4, "%s: max |decode - forward| = %g", KIND_NAMES[k], worst);
        ck_assert_msg(amax > 1.0, "logits too small (%g) to bite", amax);
        free(full);
        al_model_free(&m);
    }
}
END_TEST

/* A config's keys, its YAML and its checkpoint keep the scaling and each
 * item's fraction; an old checkpoint (no keys) reads as plain RoPE. */
START_TEST(config_and_checkpoint_round_trip_the_keys)
{
    char *dir = al_test_tmpdir();
    char *path = al_test_write(dir, "c.yaml",
        "model:\n  n_layer: 4\n  d_model: 16\n  n_head: 2\n  seq_len: 8\n"
        "  rope_fraction: 0.25\n"
        "  rope_scaling: {kind: ntk, factor: 2.5, original_seq_len: 6}\n"
        "  layer_attention: [{variant: mha}, {variant: gqa, n_kv_head: 1},\n"
        "                    {variant: mha}, {variant: mha, rope_fraction: 0}]\n");
    al_config c;
    al_err e;
    ck_assert_msg(al_config_load(path, NULL, 0, &c, &e) == 0, "%s", e.msg);
    free(path);
    al_rope r0 = al_config_layer_rope(&c.model, 0), r3 = al_config_layer_rope(&c.model, 3);
    ck_assert_int_eq(r0.kind, AL_ROPE_NTK);
    ck_assert(r0.fraction == 0.25f && r3.fraction == 0.0f && r0.factor == 2.5f);
    ck_assert_int_eq(r0.original_seq_len, 6);
    c.model.vocab_size = 256;
    al_model m;
    ck_assert_msg(al_model_init(&m, &c.model, &e) == 0, "%s", e.msg);
    char ck[512];
    snprintf(ck, sizeof ck, "%s/m.safetensors", dir);
    ck_assert_msg(al_checkpoint_save(ck, &m, 1, &e) == 0, "%s", e.msg);
    al_model back;
    ck_assert_msg(al_checkpoint_load(ck, &back, NULL, &e) == 0, "%s", e.msg);
    for (int l = 0; l < 4; l++) {
        al_rope a = m.layers[l].ashape.rope, b = back.layers[l].ashape.rope;
        ck_assert_msg(memcmp(&a, &b, sizeof a) == 0, "layer %d's RoPE changed", l);
    }
    al_model_free(&back);
    al_model_free(&m);
    /* the defaults are written as nothing: a plain config's checkpoint JSON
     * has neither key */
    al_model_config plain;
    al_test_tiny_config(&plain, al_variant_find("mha"), 1, 16, 2, 8, 8, 256);
    char *json = al_config_model_json(&plain);
    ck_assert_msg(!strstr(json, "rope_scaling") && !strstr(json, "rope_fraction"), "%s", json);
    free(json);
    free(dir);
}
END_TEST

START_TEST(bad_values_are_one_line_errors)
{
    char *dir = al_test_tmpdir();
    static const char *const bad[][2] = {
        {"model: {rope_fraction: 1.5}\n", "'model.rope_fraction' (1.5) must be in [0, 1]"},
        {"model: {rope_scaling: {kind: bogus, factor: 2}}\n", "must be one of none, linear, ntk, yarn"},
        {"model: {rope_scaling: {kind: yarn, factor: 0}}\n", "'model.rope_scaling.factor' (0) must be positive"},
        {"model: {n_layer: 2, layer_attention: [{variant: mha, rope_fraction: -1}]}\n",
         "rope_fraction' (-1) must be in [0, 1]"},
        {"model: {attention: {variant: mha, rope_fraction: 0}}\n", "unknown key 'rope_fraction'"},
        {"model: {rope_scaling: {kind: ntk}}\n", "'model.rope_scaling.factor' must be given"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *p = al_test_write(dir, "bad.yaml", bad[i][0]);
        al_config c;
        al_err e;
        ck_assert_msg(al_config_load(p, NULL, 0, &c, &e) != 0, "accepted %s", bad[i][0]);
        ck_assert_msg(strstr(e.msg, bad[i][1]) != NULL, "'%s' not in: %s", bad[i][1], e.msg);
        free(p);
    }
    static const char *const flags[] = {"bogus:2", "yarn:0", "linear:-1", "ntk", "yarn:x"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        for (int g = 0; g < 2; g++) {
            char args[256], *out = NULL;
            snprintf(args, sizeof args, "%s %s/none.safetensors %s--rope-scaling %s",
                     g ? "generate" : "score", dir, g ? "" : "x.txt ", flags[i]);
            ck_assert_int_eq(al_test_attnlab(args, &out), 2);
            ck_assert_msg(strstr(out, "--rope-scaling wants KIND:FACTOR") != NULL, "%s", out);
            ck_assert_msg(strchr(out, '\n') == strrchr(out, '\n'), "not one line: %s", out);
            free(out);
        }
    free(dir);
}
END_TEST

/* `generate` decodes with the checkpoint's rope_scaling, and --rope-scaling
 * replaces it: the same weights saved with yarn:4 and without scaling give
 * one greedy continuation past 4 x seq_len when the flag puts back what the
 * other file holds, and different ones as saved (so positions matter). */
static char *greedy(const char *ck, const char *dir, const char *flag, size_t *n)
{
    char *out = NULL, path[600], *bytes;
    ck_assert_msg(al_test_attnlabf(&out, "generate %s --prompt 'In the beginning God created' "
                                   "--tokens 24 --context 56 --temperature 0 --out %s %s",
                                   ck, dir, flag) == 0, "%s", out);
    free(out);
    snprintf(path, sizeof path, "%s/sample-000.txt", dir);
    al_err e;
    ck_assert_msg(al_read_file(path, &bytes, n, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(*n, 24);
    return bytes;
}

/* A gqa, mla, gta, mha stack (mla: 2 of 4 dimensions rotate) at seq_len 8,
 * scaled by kind (factor 4 from 8), weights scaled so positions matter;
 * partial: rope_fraction 0.5 and NoPE in the last layer. */
static void save_scaled(const char *path, const char *kind, int partial)
{
    static const char *const names[] = {"gqa", "mla", "gta", "mha"};
    const al_variant *vs[4];
    for (int k = 0; k < 4; k++) vs[k] = al_variant_find(names[k]);
    al_model_config c;
    ck_assert_int_eq(al_test_stack_config(&c, vs, 4, 4, 16, 2, 8, 8, 256), 0);
    c.layer_attn[1].set[al_variant_setting_index(vs[1], "d_rope")] = 4;
    if (partial) {
        c.layer_attn[3].has_rope_fraction = 1, c.layer_attn[3].rope_fraction = 0;
        c.rope_fraction = 0.5;
    }
    snprintf(c.rope_scaling.kind, sizeof c.rope_scaling.kind, "%s", kind);
    c.rope_scaling.factor = 4, c.rope_scaling.original_seq_len = 8;
    al_model m;
    al_err e;
    ck_assert_msg(al_model_init(&m, &c, &e) == 0, "%s", e.msg);
    al_model_init_weights(&m, 11);
    scale_weights(&m, 12.0f);
    ck_assert_msg(al_checkpoint_save(path, &m, 1, &e) == 0, "%s", e.msg);
    al_model_free(&m);
}

START_TEST(generate_uses_the_checkpoints_scaling_and_the_flag_replaces_it)
{
    char *dir = al_test_tmpdir(), yarn[512], none[512];
    snprintf(yarn, sizeof yarn, "%s/yarn.safetensors", dir);
    snprintf(none, sizeof none, "%s/none.safetensors", dir);
    save_scaled(yarn, "yarn", 0);
    save_scaled(none, "none", 0);
    size_t n1, n2, n3, n4;
    char *y = greedy(yarn, dir, "", &n1), *u = greedy(none, dir, "", &n2);
    char *u_as_y = greedy(none, dir, "--rope-scaling yarn:4", &n3);
    char *y_as_u = greedy(yarn, dir, "--rope-scaling none:1", &n4);
    ck_assert_msg(memcmp(y, u, 24) != 0, "yarn:4 and no scaling generated the same bytes");
    ck_assert_msg(memcmp(u_as_y, y, 24) == 0, "--rope-scaling yarn:4 did not act as saved yarn");
    ck_assert_msg(memcmp(y_as_u, u, 24) == 0, "--rope-scaling none:1 did not drop the saved yarn");
    free(y), free(u), free(u_as_y), free(y_as_u);
    free(dir);
}
END_TEST

/* ------------------------------------------------------------ the PyTorch loader */

static double score_of(const char *out)
{
    const char *l = strstr(out, "loss=");
    ck_assert_msg(l != NULL, "no loss= in: %s", out);
    return atof(l + 5);
}

/* A yarn-scaled stack with rope_fraction 0.5 and a NoPE item, weights
 * scaled so positions matter, scored at 4 x seq_len by attnlab and by
 * scripts/attnlab_torch.py, with the checkpoint's scaling and two
 * --rope-scaling overrides. */
START_TEST(torch_loader_scores_a_scaled_checkpoint_as_attnlab_does)
{
    if (!have_torch()) return;
    char *dir = al_test_tmpdir(), ck[512], text[512];
    snprintf(ck, sizeof ck, "%s/m.safetensors", dir);
    save_scaled(ck, "yarn", 1);
    al_err e;
    char *bytes;
    size_t n;
    ck_assert_int_eq(al_read_file(al_test_corpus(), &bytes, &n, &e), 0);
    bytes[4097] = 0;
    free(al_test_write(dir, "text.txt", bytes));
    free(bytes);
    snprintf(text, sizeof text, "%s/text.txt", dir);
    static const char *const over[] = {"", "--rope-scaling linear:4", "--rope-scaling ntk:2",
                                       "--rope-scaling none:1"};
    double ours[4];
    for (int i = 0; i < 4; i++) {
        char args[1400], *a = NULL, *t = NULL;
        snprintf(args, sizeof args, "score %s %s --seq-len 32 %s", ck, text, over[i]);
        ck_assert_int_eq(al_test_attnlab(args, &a), 0);
        snprintf(args, sizeof args, "%s %s/scripts/attnlab_torch.py score %s %s --seq-len 32 %s",
                 python(), al_test_srcdir(), ck, text, over[i]);
        ck_assert_msg(al_test_run(args, &t) == 0, "%s", t);
        ours[i] = score_of(a);
        ck_assert_msg(fabs(ours[i] - score_of(t)) < 1e-4, "%s: attnlab %s torch %s", over[i], a, t);
        free(a), free(t);
    }
    /* so that the comparison could fail: the scalings change the score */
    ck_assert_msg(fabs(ours[0] - ours[3]) > 1e-3 && fabs(ours[1] - ours[3]) > 1e-3 &&
                  fabs(ours[2] - ours[3]) > 1e-4,
                  "scores %g %g %g %g barely differ", ours[0], ours[1], ours[2], ours[3]);
    free(dir);
}
END_TEST

/* ------------------------------------------------------------ the experiment */

/* experiments/long_context.yaml plans what its header says: 8 base
 * configurations (4 attentions, RoPE or NoPE every fourth layer) x 3 seeds
 * at 256, each fine-tuned at 1,024 for a tenth of its steps under each of
 * the 4 scalings (factor 4 from 256); --dry-run accepts it. */
START_TEST(long_context_experiment_plans_its_stages)
{
    char path[1024], args[2048], *out = NULL;
    snprintf(path, sizeof path, "%s/experiments/long_context.yaml", al_test_srcdir());
    al_sweep s;
    al_err e;
    ck_assert_msg(al_sweep_load(path, NULL, 0, NULL, 0, &s, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(s.n_trials, 8 * 3 + 8 * 4 * 3);
    int nope = 0, kinds[4] = {0};
    for (int i = 0; i < s.n_trials; i++) {
        const al_sweep_trial *t = &s.trials[i];
        const al_model_config *m = &t->cfg.model;
        al_rope r3 = al_config_layer_rope(m, 3), r0 = al_config_layer_rope(m, 0);
        ck_assert(r0.fraction == 1.0f);
        nope += r3.fraction == 0.0f;
        if (t->stage == 0) {
            ck_assert_int_eq(m->seq_len, 256);
            ck_assert_int_eq(r0.kind, AL_ROPE_NONE);
            ck_assert_int_eq(t->cfg.train.steps, 2000);
            continue;
        }
        ck_assert_int_eq(m->seq_len, 1024);
        ck_assert_int_ge(t->upstream, 0);
        ck_assert_int_eq(t->cfg.train.steps, 200);
        kinds[r0.kind]++;
        if (r0.kind != AL_ROPE_NONE)
            ck_assert(r0.factor == 4.0f && r0.original_seq_len == 256);
    }
    ck_assert_int_eq(nope, s.n_trials / 2);
    for (int k = 0; k < 4; k++) ck_assert_int_eq(kinds[k], 24);
    ck_assert_int_eq(s.eval.n_pk_lengths, 5);
    ck_assert_int_eq(s.eval.pk_lengths[4], 4096);
    al_sweep_free(&s);
    char *dir = al_test_tmpdir();
    snprintf(args, sizeof args, "sweep %s --out %s/r --dry-run", path, dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    ck_assert_msg(strstr(out, "120 trials") && strstr(out, "stage long: trials 24-119"), "%s",
                  out);
    free(out);
    free(dir);
}
END_TEST

Suite *rope_suite(void)
{
    Suite *s = suite_create("rope");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, each_scaling_kind_equals_pytorch_past_T0);
    tcase_add_test(tc, rope_backward_is_the_transpose_of_the_forward);
    tcase_add_test(tc, rope_fraction_zero_leaves_q_and_k_unrotated);
    tcase_add_test(tc, rope_fraction_quarter_rotates_the_first_quarter_of_each_head);
    tcase_add_test(tc, gradients_match_finite_differences_with_scaling_on);
    tcase_add_test(tc, decode_equals_the_full_forward_past_T0_with_scaling_on);
    tcase_add_test(tc, config_and_checkpoint_round_trip_the_keys);
    tcase_add_test(tc, bad_values_are_one_line_errors);
    tcase_add_test(tc, generate_uses_the_checkpoints_scaling_and_the_flag_replaces_it);
    tcase_add_test(tc, torch_loader_scores_a_scaled_checkpoint_as_attnlab_does);
    tcase_add_test(tc, long_context_experiment_plans_its_stages);
    suite_add_tcase(s, tc);
    return s;
}
