/*
 * test_convert.c - src/train/convert.c and `attnlab convert`: identity
 * conversions are exact, mean and first pooling equal a hand computation,
 * random is seeded, the MLA factorisation at full rank reproduces every
 * head's attention scores (before RoPE) and values, a converted checkpoint
 * loads, scores like the PyTorch loader, decodes from its KV cache like
 * its full forward pass, and bad input is refused with nothing written.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "al_checkpoint.h"
#include "al_convert.h"
#include "al_decode.h"
#include "al_registry.h"
#include "al_safetensors.h"
#include "al_test.h"
#include "al_test_model.h"

/* ------------------------------------------------------------ helpers */

/* A 2-layer model of `variant` (n_kv_head / d_latent / d_rope as given,
 * -1 to leave) with weights 5x their init scale, so that scores matter. */
static void make_model(al_model *m, const char *variant, int kv, int dc, int dr, uint64_t seed)
{
    const al_variant *v = al_variant_find(variant);
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, v, 2, 32, 4, 8, 16, 256), 0);
    if (kv > 0) c.attn_set[al_variant_setting_index(v, "n_kv_head")] = kv;
    if (dc > 0) c.attn_set[al_variant_setting_index(v, "d_latent")] = dc;
    if (dr > 0) c.attn_set[al_variant_setting_index(v, "d_rope")] = dr;
    al_err e;
    ck_assert_msg(al_model_init(m, &c, &e) == 0, "%s", e.msg);
    al_model_init_weights(m, seed);
    for (size_t i = 0; i < m->n_params; i++) m->params[i] *= 5.0f;
}

/* The target of src with model.attention = `to` (YAML text). */
static void make_target(al_model *dst, const al_model *src, const char *to)
{
    al_node *n;
    al_err e;
    al_model_config c;
    ck_assert_msg(al_yaml_parse("to", to, &n, &e) == 0, "%s", e.msg);
    ck_assert_msg(al_convert_target(&src->cfg, n, &c, &e) == 0, "%s", e.msg);
    al_node_free(n);
    ck_assert_msg(al_model_init(dst, &c, &e) == 0, "%s", e.msg);
}

static float *attn(const al_model *m, int l, const char *name)
{
    char full[64];
    snprintf(full, sizeof full, "blocks.%d.attn.%s.weight", l, name);
    const al_tensor *t = al_model_tensor(m, full);
    ck_assert_msg(t != NULL, "no tensor %s", full);
    return m->params + t->offset;
}

static double loss_of(al_model *m, uint64_t seed)
{
    int B = 2, T = m->cfg.seq_len, in[32], tgt[32];
    al_rng r;
    al_rng_seed(&r, seed);
    for (int i = 0; i < B * T; i++)
        in[i] = (int)al_rng_below(&r, 256), tgt[i] = (int)al_rng_below(&r, 256);
    al_err e;
    ck_assert_int_eq(al_model_reserve(m, B, T, &e), 0);
    return al_model_forward(m, in, tgt, NULL, B, T);
}

/* Random unit-scale rows standing in for the attention inputs. */
static void fake_sample(al_convert_sample *s, const al_model *m, int n, uint64_t seed)
{
    al_rng r;
    al_rng_seed(&r, seed);
    s->n_layer = m->cfg.n_layer, s->n = n, s->d = m->cfg.d_model;
    s->x = malloc((size_t)s->n_layer * n * s->d * sizeof(float));
    for (size_t i = 0; i < (size_t)s->n_layer * n * s->d; i++) s->x[i] = (float)al_rng_normal(&r);
}

static int convert(const al_model *src, al_model *dst, int method, uint64_t seed,
                   const al_convert_sample *s)
{
    al_convert_opts o = {method, seed, s};
    al_err e;
    int rc = al_convert(src, dst, &o, &e);
    ck_assert_msg(rc == 0, "%s", e.msg);
    return rc;
}

/* ------------------------------------------------------------ identity */

static void check_identity(const char *from, int kv, const char *to, int method)
{
    al_model src, dst;
    int mla = strcmp(from, "mla") == 0;
    make_model(&src, from, kv, mla ? 8 : -1, mla ? 2 : -1, 3);
    make_target(&dst, &src, to);
    convert(&src, &dst, method, 1, NULL);
    ck_assert_int_eq(dst.n_params, src.n_params);
    for (int i = 0; i < src.n_tensors; i++) {
        const al_tensor *t = &src.tensors[i], *u = al_model_tensor(&dst, t->name);
        ck_assert_msg(u && memcmp(src.params + t->offset, dst.params + u->offset,
                                  t->numel * sizeof(float)) == 0, "%s -> %s: %s differs", from, to,
                      t->name);
    }
    double a = loss_of(&src, 9), b = loss_of(&dst, 9);
    ck_assert_msg(memcmp(&a, &b, sizeof a) == 0, "%s -> %s: loss %.17g vs %.17g", from, to, a, b);
    al_model_free(&src), al_model_free(&dst);
}

START_TEST(identity_conversions_are_exact)
{
    check_identity("mha", -1, "{variant: mha}", AL_CONVERT_MEAN);
    check_identity("mha", -1, "{variant: gqa, n_kv_head: 4}", AL_CONVERT_MEAN);
    check_identity("mha", -1, "{variant: gqa, n_kv_head: 4}", AL_CONVERT_FIRST);
    check_identity("gqa", 2, "{variant: gqa, n_kv_head: 2}", AL_CONVERT_MEAN);
    check_identity("mqa", -1, "{variant: gqa, n_kv_head: 1}", AL_CONVERT_FIRST);
    check_identity("mla", -1, "{variant: mla, d_latent: 8, d_rope: 2}", AL_CONVERT_SVD);
}
END_TEST

/* ------------------------------------------------------------ pooling */

/* wk, wv of dst against the mean (or first) of src's heads, by index. */
static void check_pooled(const al_model *src, const al_model *dst, int Gs, int Gd, int first)
{
    int dh = 8, D = 32, r = Gs / Gd;
    const char *names[2] = {"wk", "wv"};
    for (int l = 0; l < 2; l++)
        for (int k = 0; k < 2; k++) {
            const float *a = attn(src, l, names[k]), *b = attn(dst, l, names[k]);
            for (int g = 0; g < Gd; g++)
                for (int row = 0; row < dh; row++)
                    for (int c = 0; c < D; c++) {
                        double want = 0;
                        for (int i = 0; i < (first ? 1 : r); i++)
                            want += a[((g * r + i) * dh + row) * D + c];
                        want /= first ? 1 : r;
                        double got = b[(g * dh + row) * D + c];
                        ck_assert_msg(fabs(got - want) <= 1e-7 * fabs(want) + 1e-12,
                                      "layer %d %s head %d: %.9g vs %.9g", l, names[k], g, got, want);
                    }
            ck_assert(memcmp(attn(src, l, "wq"), attn(dst, l, "wq"), 32 * 32 * 4) == 0);
            ck_assert(memcmp(attn(src, l, "wo"), attn(dst, l, "wo"), 32 * 32 * 4) == 0);
        }
    ck_assert(memcmp(src->tok_emb, dst->tok_emb, 256 * 32 * 4) == 0);
}

START_TEST(mean_and_first_pooling_equal_a_hand_computation)
{
    static const struct { const char *from; int kv; const char *to; int Gs, Gd; } c[] = {
        {"mha", -1, "{variant: gqa, n_kv_head: 2}", 4, 2},
        {"mha", -1, "mqa", 4, 1},
        {"gqa", 2, "{variant: mqa}", 2, 1},
    };
    for (int i = 0; i < 3; i++)
        for (int first = 0; first < 2; first++) {
            al_model src, dst;
            make_model(&src, c[i].from, c[i].kv, -1, -1, 5);
            char to[64];
            snprintf(to, sizeof to, "%s", c[i].to[0] == '{' ? c[i].to : "{variant: mqa}");
            make_target(&dst, &src, to);
            convert(&src, &dst, first ? AL_CONVERT_FIRST : AL_CONVERT_MEAN, 1, NULL);
            check_pooled(&src, &dst, c[i].Gs, c[i].Gd, first);
            al_model_free(&src), al_model_free(&dst);
        }
}
END_TEST

START_TEST(random_init_is_seeded_and_keeps_queries_and_outputs)
{
    al_model src, a, b, c;
    make_model(&src, "mha", -1, -1, -1, 5);
    make_target(&a, &src, "{variant: gqa, n_kv_head: 2}");
    make_target(&b, &src, "{variant: gqa, n_kv_head: 2}");
    make_target(&c, &src, "{variant: gqa, n_kv_head: 2}");
    convert(&src, &a, AL_CONVERT_RANDOM, 7, NULL);
    convert(&src, &b, AL_CONVERT_RANDOM, 7, NULL);
    convert(&src, &c, AL_CONVERT_RANDOM, 8, NULL);
    ck_assert(memcmp(a.params, b.params, a.n_params * sizeof(float)) == 0);
    ck_assert(memcmp(attn(&a, 0, "wk"), attn(&c, 0, "wk"), 16 * 32 * 4) != 0);
    ck_assert(memcmp(attn(&a, 1, "wq"), attn(&src, 1, "wq"), 32 * 32 * 4) == 0);
    ck_assert(memcmp(attn(&a, 1, "wo"), attn(&src, 1, "wo"), 32 * 32 * 4) == 0);
    double ss = 0;   /* fresh wk: normal(0, 0.02), not the source's 5x weights */
    for (int i = 0; i < 16 * 32; i++) ss += (double)attn(&a, 1, "wk")[i] * attn(&a, 1, "wk")[i];
    ck_assert_double_lt(fabs(sqrt(ss / (16 * 32)) - 0.02), 0.003);
    al_model_free(&src), al_model_free(&a), al_model_free(&b), al_model_free(&c);
}
END_TEST

/* ------------------------------------------------------------ mla */

/* ---- README "MHA to MLA", computed here independently in double. */

/* The leading eigenvector of the symmetric G x G matrix C, by power
 * iteration (not LAPACK), its largest component positive. */
static void power_vector(const double *C, int G, double *u)
{
    double v[8];
    for (int g = 0; g < G; g++) u[g] = 1.0 + 0.01 * g;
    for (int it = 0; it < 20000; it++) {
        double n = 0;
        for (int a = 0; a < G; a++) {
            v[a] = 0;
            for (int b = 0; b < G; b++) v[a] += C[a * G + b] * u[b];
            n += v[a] * v[a];
        }
        for (int a = 0; a < G; a++) u[a] = v[a] / sqrt(n);
    }
}

/* rho_j: the weight of pair j's NoPE keys (every (query, key) pair of a
 * window of T counted once). */
static double rho_of(int j, int dh, int T)
{
    double th = pow(10000.0, -2.0 * j / dh), num = 0, den = 0;
    for (int d = 0; d < T; d++) num += (T - d) * cos(th * d), den += T - d;
    return num / den;
}

/* The mixing vector of each kept pair of layer l: u[i * G + g]. */
static void mixing(const al_model *src, const al_convert_sample *s, int l, int G, int dr,
                   double *u)
{
    int dh = 8, D = 32, m = dr == 2 ? 1 : dh / dr;
    double *K = calloc((size_t)s->n * G * dh, sizeof *K), C[64];
    for (int t = 0; t < s->n; t++)
        for (int r = 0; r < G * dh; r++)
            for (int c = 0; c < D; c++)
                K[t * G * dh + r] += attn(src, l, "wk")[r * D + c] * s->x[((size_t)l * s->n + t) * D + c];
    for (int i = 0; i < dr / 2; i++) {
        int j = i * m;
        memset(C, 0, sizeof C);
        for (int t = 0; t < s->n; t++)
            for (int a = 0; a < G; a++)
                for (int b = 0; b < G; b++)
                    for (int part = 0; part < 2; part++)
                        C[a * G + b] += K[t * G * dh + a * dh + j + part * dh / 2] *
                                        K[t * G * dh + b * dh + j + part * dh / 2];
        power_vector(C, G, u + i * G);
    }
    free(K);
}

/* At one position (no rotation), head h's score as the README's recipe
 * makes it from the source's q_h and keys k_g: every pair j contributes
 * rho_j q_j . k_g,j, and a kept pair also (1 - rho_j) u_g q_j . sum_g' u_g'
 * k_g',j (its shared RoPE key); against MLA's (q_h . wuk_h c0 + q_r,h . k_r)
 * / sqrt(dh + dr) with c0 = wdkv x before kv_norm. And values wuv_h c0
 * against wv_g x. Returns the worse relative error of the two. */
static double mla_vs_source(const al_model *src, const al_model *dst, int G, int dr, int dc,
                            const al_convert_sample *s)
{
    int H = 4, dh = 8, D = 32, m = dr == 2 ? 1 : dh / dr;
    al_rng r;
    al_rng_seed(&r, 77);
    double es = 0, ns = 0, ev = 0, nv = 0, u[4 * 8];
    for (int l = 0; l < 2; l++) {
        mixing(src, s, l, G, dr, u);
        for (int trial = 0; trial < 20; trial++) {
            double xq[32], xk[32], c0[64], k[4][8];
            for (int i = 0; i < D; i++) xq[i] = al_rng_normal(&r), xk[i] = al_rng_normal(&r);
            for (int i = 0; i < dc; i++) {
                c0[i] = 0;
                for (int j = 0; j < D; j++) c0[i] += attn(dst, l, "wdkv")[i * D + j] * xk[j];
            }
            for (int g = 0; g < G; g++)
                for (int e = 0; e < dh; e++) {
                    k[g][e] = 0;
                    for (int j = 0; j < D; j++)
                        k[g][e] += attn(src, l, "wk")[(g * dh + e) * D + j] * xk[j];
                }
            for (int h = 0; h < H; h++) {
                int g = h / (H / G);
                double q[8], want = 0, mla = 0;
                for (int e = 0; e < dh; e++) {
                    double v = 0, qm = 0, kc = 0, vm = 0;
                    q[e] = 0;
                    for (int j = 0; j < D; j++) {
                        q[e] += attn(src, l, "wq")[(h * dh + e) * D + j] * xq[j];
                        v += attn(src, l, "wv")[(g * dh + e) * D + j] * xk[j];
                        qm += attn(dst, l, "wq")[(h * dh + e) * D + j] * xq[j];
                    }
                    for (int i = 0; i < dc; i++) {
                        kc += attn(dst, l, "wuk")[(h * dh + e) * dc + i] * c0[i];
                        vm += attn(dst, l, "wuv")[(h * dh + e) * dc + i] * c0[i];
                    }
                    mla += qm * kc;
                    ev += (vm - v) * (vm - v), nv += v * v;
                }
                for (int j = 0; j < dh / 2; j++) {
                    double rho = rho_of(j, dh, 16), qk = q[j] * k[g][j] + q[j + 4] * k[g][j + 4];
                    want += rho * qk;
                    if (j % m || j / m >= dr / 2) continue;   /* not kept */
                    const double *uj = u + (j / m) * G;
                    double s0 = 0, s1 = 0;
                    for (int b = 0; b < G; b++) s0 += uj[b] * k[b][j], s1 += uj[b] * k[b][j + 4];
                    want += (1 - rho) * uj[g] * (q[j] * s0 + q[j + 4] * s1);
                }
                for (int i = 0; i < dr; i++) {
                    double qr = 0, kr = 0;
                    for (int j = 0; j < D; j++) {
                        qr += attn(dst, l, "wqr")[(h * dr + i) * D + j] * xq[j];
                        kr += attn(dst, l, "wkr")[i * D + j] * xk[j];
                    }
                    mla += qr * kr;
                }
                want /= sqrt(dh), mla /= sqrt(dh + dr);
                es += (mla - want) * (mla - want), ns += want * want;
            }
        }
    }
    double a = sqrt(es / ns), b = sqrt(ev / nv);
    return a > b ? a : b;
}

START_TEST(svd_at_full_rank_gives_the_readme_scores_and_the_values_before_kv_norm)
{
    static const struct { const char *from; int kv, G, dr; } c[] = {
        {"mha", -1, 4, 8}, {"mha", -1, 4, 4}, {"mha", -1, 4, 2}, {"gqa", 2, 2, 4}, {"mqa", -1, 1, 8},
    };
    for (int i = 0; i < 5; i++) {
        al_model src, dst;
        al_convert_sample s;
        make_model(&src, c[i].from, c[i].kv, -1, -1, 21);
        int rank = 2 * c[i].G * 8 < 32 ? 2 * c[i].G * 8 : 32;
        char to[96];
        snprintf(to, sizeof to, "{variant: mla, d_latent: %d, d_rope: %d}", rank, c[i].dr);
        make_target(&dst, &src, to);
        fake_sample(&s, &src, 48, 4);
        convert(&src, &dst, AL_CONVERT_SVD, 1, &s);
        double err = mla_vs_source(&src, &dst, c[i].G, c[i].dr, rank, &s);
        ck_assert_msg(err < 1e-4, "%s (G %d) -> %s: relative error %.3g", c[i].from, c[i].G, to, err);
        al_convert_err m[2];
        al_convert_opts o = {AL_CONVERT_SVD, 1, &s};
        al_convert_measure(&src, &dst, &o, m);
        ck_assert_double_lt(m[0].k_prenorm, 1e-4);
        ck_assert_double_lt(m[1].v_prenorm, 1e-4);
        ck_assert(m[0].rope_kept > 0 && m[0].rope_kept <= 1);
        al_convert_sample_free(&s);
        al_model_free(&src), al_model_free(&dst);
    }
}
END_TEST

START_TEST(svd_below_full_rank_loses_accuracy_gradually)
{
    al_model src;
    al_convert_sample s;
    make_model(&src, "mha", -1, -1, -1, 21);
    fake_sample(&s, &src, 48, 4);
    double last = 0;
    for (int dc = 32; dc >= 8; dc /= 2) {
        al_model dst;
        char to[96];
        snprintf(to, sizeof to, "{variant: mla, d_latent: %d, d_rope: 4}", dc);
        make_target(&dst, &src, to);
        convert(&src, &dst, AL_CONVERT_SVD, 1, &s);
        al_convert_err m[2];
        al_convert_opts o = {AL_CONVERT_SVD, 1, &s};
        al_convert_measure(&src, &dst, &o, m);
        double err = (m[0].v_prenorm + m[1].v_prenorm) / 2;
        ck_assert_msg(err >= last - 1e-9, "d_latent %d: V error %.4f below %.4f at more rank", dc,
                      err, last);
        last = err;
        al_model_free(&dst);
    }
    ck_assert_double_gt(last, 0.05);
    al_convert_sample_free(&s);
    al_model_free(&src);
}
END_TEST

START_TEST(check_names_what_a_method_cannot_do)
{
    static const struct { const char *from; int kv; const char *to; int method; const char *want; } c[] = {
        {"gqa", 2, "{variant: mha}", AL_CONVERT_MEAN, "must divide the source's 2"},
        {"mha", -1, "{variant: mla, d_latent: 8, d_rope: 4}", AL_CONVERT_MEAN, "not 'mla'"},
        {"mha", -1, "{variant: gqa, n_kv_head: 2}", AL_CONVERT_SVD, "reaches mla, not 'gqa'"},
        {"mha", -1, "{variant: mla, d_latent: 33, d_rope: 4}", AL_CONVERT_SVD, "above the rank available"},
        {"mqa", -1, "{variant: mla, d_latent: 17, d_rope: 4}", AL_CONVERT_SVD, "above the rank available"},
        {"mha", -1, "{variant: mla, d_latent: 8, d_rope: 6}", AL_CONVERT_SVD, "'d_rope' (6) must divide"},
        {"mha", -1, "{variant: mla, d_latent: 8, d_rope: 4, d_q_latent: 8}", AL_CONVERT_SVD, "d_q_latent"},
        {"mla", -1, "{variant: mqa}", AL_CONVERT_MEAN, "converts mha, gqa and mqa"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        al_model src, dst;
        make_model(&src, c[i].from, c[i].kv, c[i].kv < 0 && !strcmp(c[i].from, "mla") ? 8 : -1,
                   !strcmp(c[i].from, "mla") ? 4 : -1, 1);
        make_target(&dst, &src, c[i].to);
        al_err e = {""};
        ck_assert_int_eq(al_convert_check(&src.cfg, &dst.cfg, c[i].method, &e), -1);
        ck_assert_msg(strstr(e.msg, c[i].want), "%s -> %s: '%s' lacks '%s'", c[i].from, c[i].to,
                      e.msg, c[i].want);
        al_model_free(&src), al_model_free(&dst);
    }
}
END_TEST

/* ------------------------------------------------------------ position schemes */

/* A 2-layer mha model whose second layer is NoPE (or rotates `frac`). */
static void make_nope_model(al_model *m, double frac)
{
    const al_variant *v = al_variant_find("mha");
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, v, 2, 32, 4, 8, 16, 256), 0);
    c.n_layer_attn = 2;
    for (int k = 0; k < 2; k++) {
        snprintf(c.layer_attn[k].variant, sizeof c.layer_attn[k].variant, "mha");
        c.layer_attn[k].attn = v;
        memcpy(c.layer_attn[k].set, c.attn_set, sizeof c.layer_attn[k].set);
    }
    c.layer_attn[1].has_rope_fraction = 1, c.layer_attn[1].rope_fraction = frac;
    al_err e;
    ck_assert_msg(al_model_init(m, &c, &e) == 0, "%s", e.msg);
    al_model_init_weights(m, 4);
    for (size_t i = 0; i < m->n_params; i++) m->params[i] *= 5.0f;
}

/* Convert keeps each layer's position scheme: mha -> gqa with as many K/V
 * heads as heads is the identity, so a NoPE layer that came out rotated
 * (the target's cycle, or a mapping, naming no fraction) would change the
 * loss; a target that names another fraction, and svd from a source that is
 * not plain RoPE, are refused. */
START_TEST(convert_keeps_each_layers_rope_fraction)
{
    static const char *const to[] = {"{variant: gqa, n_kv_head: 4}",
                                     "[{variant: gqa, n_kv_head: 4}]",
                                     "[{variant: gqa, n_kv_head: 4}, {variant: gqa, n_kv_head: 4, "
                                     "rope_fraction: 0}]"};
    for (int i = 0; i < 3; i++) {
        al_model src, dst;
        make_nope_model(&src, 0.0);
        make_target(&dst, &src, to[i]);
        for (int l = 0; l < 2; l++)
            ck_assert_msg(al_config_layer_rope(&dst.cfg, l).fraction == (l == 1 ? 0.0f : 1.0f),
                          "%s: layer %d rotates %g", to[i], l,
                          (double)al_config_layer_rope(&dst.cfg, l).fraction);
        convert(&src, &dst, AL_CONVERT_MEAN, 1, NULL);
        double a = loss_of(&src, 9), b = loss_of(&dst, 9);
        ck_assert_msg(memcmp(&a, &b, sizeof a) == 0, "%s: loss %.17g vs %.17g", to[i], a, b);
        al_model_free(&src), al_model_free(&dst);
    }
    al_model src;
    make_nope_model(&src, 0.0);
    al_node *n;
    al_err e = {""};
    al_model_config c;
    ck_assert_int_eq(al_yaml_parse("to", "[{variant: mqa}, {variant: mqa, rope_fraction: 1}]",
                                   &n, &e), 0);
    ck_assert_int_eq(al_convert_target(&src.cfg, n, &c, &e), -1);
    ck_assert_msg(strstr(e.msg, "layer 1: rope_fraction 1 is not the source's 0"), "%s", e.msg);
    al_node_free(n), al_model_free(&src);

    al_model dst;
    make_nope_model(&src, 0.5);
    make_target(&dst, &src, "{variant: mla, d_latent: 8, d_rope: 4}");
    ck_assert_int_eq(al_convert_check(&src.cfg, &dst.cfg, AL_CONVERT_SVD, &e), -1);
    ck_assert_msg(strstr(e.msg, "layer 1") && strstr(e.msg, "rotates 0.5 of each head"), "%s",
                  e.msg);
    al_model_free(&src), al_model_free(&dst);
}
END_TEST

/* ------------------------------------------------------------ the command */

typedef struct cli {
    char *dir, ckpt[4200], text[4200];
} cli;

static void cli_open(cli *f)
{
    al_model m;
    al_err e;
    f->dir = al_test_tmpdir();
    make_model(&m, "mha", -1, -1, -1, 13);
    snprintf(f->ckpt, sizeof f->ckpt, "%s/src.safetensors", f->dir);
    ck_assert_int_eq(al_checkpoint_save(f->ckpt, &m, 17, &e), 0);
    al_model_free(&m);
    char text[6001];
    const char *s = "In the beginning God created the heaven and the earth. ";
    for (int i = 0; i < 6000; i++) text[i] = s[(i * 3 + i / 11) % strlen(s)];
    text[6000] = 0;
    char *p = al_test_write(f->dir, "text.txt", text);
    snprintf(f->text, sizeof f->text, "%s", p);
    free(p);
}

static double score_line(const char *out, const char *key)
{
    const char *l = strstr(out, key);
    double v = NAN;
    ck_assert_msg(l && sscanf(l + strlen(key), "%lf", &v) == 1, "no %s in: %s", key, out);
    return v;
}

static int torch_ready(void)
{
    char *out;
    int rc = al_test_run("/usr/bin/python3 -c 'import torch'", &out);
    free(out);
    if (rc != 0) fprintf(stderr, "test_convert: skipping the PyTorch comparison: no torch\n");
    return rc == 0;
}

/* Decoding through the cache equals the full forward at every position. */
static void check_decode(const char *path)
{
    al_model m;
    al_decoder d;
    al_err e;
    ck_assert_msg(al_checkpoint_load(path, &m, NULL, &e) == 0, "%s", e.msg);
    int T = m.cfg.seq_len, V = 256, tok[16];
    for (int i = 0; i < T; i++) tok[i] = "And God said, Le"[i];
    ck_assert_int_eq(al_model_reserve(&m, 1, T, &e), 0);
    al_model_forward(&m, tok, NULL, NULL, 1, T);
    float *full = malloc((size_t)T * V * sizeof *full);
    memcpy(full, m.logits, (size_t)T * V * sizeof *full);
    ck_assert_msg(al_decoder_init(&d, &m, T, AL_KV_F32, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(al_decoder_prefill(&d, tok, 1, &e), 0);
    for (int t = 0; t < T; t++) {
        const float *lg = t == 0 ? d.logits : al_decoder_step(&d, tok[t]);
        for (int v = 0; v < V; v++)
            ck_assert_msg(fabs(lg[v] - full[(size_t)t * V + v]) < 1e-4, "%s: position %d", path, t);
    }
    al_decoder_free(&d);
    free(full);
    al_model_free(&m);
}

/* PyTorch's scores of the files in jobs (one process: torch loads once). */
static void torch_scores(const char *dir, const char *jobs, int n, double *out)
{
    char *path = al_test_write(dir, "jobs.txt", jobs), cmd[9000], *text;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/scripts/attnlab_torch.py batch %s",
             al_test_srcdir(), path);
    ck_assert_msg(al_test_run(cmd, &text) == 0, "%s", text);
    const char *p = text;
    for (int i = 0; i < n; i++) {
        p = strstr(p, "== score ");
        ck_assert_msg(p != NULL, "job %d missing: %s", i, text);
        out[i] = score_line(p, "loss=");
        p += 9;
    }
    free(text), free(path);
}

START_TEST(a_converted_checkpoint_scores_like_pytorch_and_decodes_from_its_cache)
{
    static const char *const to[] = {"'{variant: gqa, n_kv_head: 2}'", "mqa --method random",
                                     "'{variant: mla, d_latent: 16, d_rope: 4}'"};
    cli f;
    cli_open(&f);
    char jobs[20000] = "";
    double ours[3], theirs[3];
    for (int i = 0; i < 3; i++) {
        char args[13000], out_path[4300], *out;
        snprintf(out_path, sizeof out_path, "%s/c%d.safetensors", f.dir, i);
        snprintf(args, sizeof args, "convert %s --to %s --out %s --data %s --threads 1", f.ckpt,
                 to[i], out_path, f.text);
        ck_assert_msg(al_test_attnlab(args, &out) == 0, "%s", out);
        ck_assert(isfinite(score_line(out, "val_loss=")) && isfinite(score_line(out, "k_error=")));
        free(out);
        snprintf(args, sizeof args, "score %s %s --threads 1", out_path, f.text);
        ck_assert_msg(al_test_attnlab(args, &out) == 0, "%s", out);
        ours[i] = score_line(out, "\nloss=");
        free(out);
        check_decode(out_path);
        snprintf(args, sizeof args, "generate %s --prompt 'And God' --tokens 12 --temperature 0 "
                 "--context 32", out_path);
        ck_assert_msg(al_test_attnlab(args, &out) == 0, "%s", out);
        free(out);
        snprintf(jobs + strlen(jobs), sizeof jobs - strlen(jobs), "score %s %s\n", out_path, f.text);
    }
    if (torch_ready()) {
        torch_scores(f.dir, jobs, 3, theirs);
        for (int i = 0; i < 3; i++)
            ck_assert_msg(fabs(ours[i] - theirs[i]) < 1e-4, "%s: attnlab %.6f torch %.6f", to[i],
                          ours[i], theirs[i]);
    }
    free(f.dir);
}
END_TEST

START_TEST(the_output_records_source_hash_and_method)
{
    cli f;
    cli_open(&f);
    char args[13000], out_path[4300], *out;
    snprintf(out_path, sizeof out_path, "%s/c.safetensors", f.dir);
    snprintf(args, sizeof args, "convert %s --to mqa --out %s --data %s --threads 1", f.ckpt,
             out_path, f.text);
    ck_assert_msg(al_test_attnlab(args, &out) == 0, "%s", out);
    free(out);
    snprintf(args, sizeof args, "sha256sum %s", f.ckpt);
    ck_assert_int_eq(al_test_run(args, &out), 0);
    al_st_file st;
    al_err e;
    ck_assert_int_eq(al_st_read(out_path, &st, &e), 0);
    ck_assert_str_eq(al_st_meta(&st, "attnlab.converted_from"), f.ckpt);
    ck_assert_int_eq(strncmp(al_st_meta(&st, "attnlab.converted_from_sha256"), out, 64), 0);
    ck_assert_str_eq(al_st_meta(&st, "attnlab.convert_method"), "mean");
    ck_assert_str_eq(al_st_meta(&st, "attnlab.step"), "17");
    al_st_free(&st);
    free(out);
    free(f.dir);
}
END_TEST

START_TEST(bad_input_is_one_line_exit_2_and_writes_nothing)
{
    static const struct { const char *extra; const char *want; } c[] = {
        {"--to '{variant: gqa, n_kv_head: 3}'", "--to:1:27: error: 'n_kv_head' (3) must divide"},
        {"--to '{variant: mla, d_latent: 40, d_rope: 4}'", "above the rank available"},
        {"--to '{variant: mla, d_latent: 8, d_rope: 4}' --method mean", "not 'mla'"},
        {"--to '{variant: nope}'", "unknown variant 'nope'"},
        {"--to mqa --method median", "convert: --method wants mean, first, random or svd, got 'median'"},
        {"--to mqa --config /nonexistent.yaml", "/nonexistent.yaml"},
    };
    cli f;
    cli_open(&f);
    char args[13000], out_path[4300], *out;
    snprintf(out_path, sizeof out_path, "%s/never.safetensors", f.dir);
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        snprintf(args, sizeof args, "convert %s %s --out %s %s", f.ckpt, c[i].extra, out_path,
                 strstr(c[i].extra, "--config") ? "" : "--data /dev/null");
        ck_assert_int_eq(al_test_attnlab(args, &out), 2);
        ck_assert_msg(strstr(out, c[i].want) && strchr(out, '\n') == out + strlen(out) - 1,
                      "%s: %s", c[i].extra, out);
        ck_assert_int_ne(access(out_path, F_OK), 0);
        free(out);
    }
    /* A corrupt source; and no data to measure on. */
    char *bad = al_test_write(f.dir, "bad.safetensors", "\x10\x00\x00\x00\x00\x00\x00\x00{}");
    snprintf(args, sizeof args, "convert %s --to mqa --out %s --data %s", bad, out_path, f.text);
    ck_assert_int_eq(al_test_attnlab(args, &out), 2);
    ck_assert_msg(strstr(out, "bad.safetensors"), "%s", out);
    free(out);
    snprintf(args, sizeof args, "convert %s --to mqa --out %s", f.ckpt, out_path);
    ck_assert_int_eq(al_test_attnlab(args, &out), 2);
    ck_assert_msg(strstr(out, "--config RUN.yaml"), "%s", out);
    ck_assert_int_ne(access(out_path, F_OK), 0);
    free(out);
    free(bad);
    free(f.dir);
}
END_TEST

/* train.init_convert converts in the run itself: the same weights, and so
 * the same run, as `convert` followed by train.init_from. */
START_TEST(init_convert_equals_convert_then_init_from)
{
    cli f;
    cli_open(&f);
    char yaml[9000], args[20000], *out;
    snprintf(yaml, sizeof yaml,
             "data: {path: %s}\n"
             "model: {n_layer: 2, d_model: 32, n_head: 4, d_head: 8, seq_len: 16, mlp_ratio: 2.0,\n"
             "        attention: {variant: mla, d_latent: 12, d_rope: 4}}\n"
             "train: {steps: 6, batch_size: 3, warmup_steps: 2, eval_every: 3, eval_batches: 2,\n"
             "        threads: 1}\n", f.text);
    char *cfg = al_test_write(f.dir, "mla.yaml", yaml);
    snprintf(args, sizeof args, "convert %s --to '{variant: mla, d_latent: 12, d_rope: 4}' --out "
             "%s/conv.safetensors --config %s --threads 1", f.ckpt, f.dir, cfg);
    ck_assert_msg(al_test_attnlab(args, &out) == 0, "%s", out);
    double converted = score_line(out, "val_loss=");
    free(out);
    snprintf(args, sizeof args, "train %s --out %s/a --init-from %s/conv.safetensors", cfg,
             f.dir, f.dir);
    ck_assert_msg(al_test_attnlab(args, &out) == 0, "%s", out);
    free(out);
    snprintf(args, sizeof args, "train %s --out %s/b --init-from %s --set train.init_convert=svd",
             cfg, f.dir, f.ckpt);
    ck_assert_msg(al_test_attnlab(args, &out) == 0, "%s", out);
    free(out);
    char pa[4300], pb[4300], *ba, *bb;
    size_t na, nb;
    al_err e;
    snprintf(pa, sizeof pa, "%s/a/model.safetensors", f.dir);
    snprintf(pb, sizeof pb, "%s/b/model.safetensors", f.dir);
    ck_assert_int_eq(al_read_file(pa, &ba, &na, &e), 0);
    ck_assert_int_eq(al_read_file(pb, &bb, &nb, &e), 0);
    ck_assert_msg(na == nb && memcmp(ba, bb, na) == 0, "the two runs differ");
    free(ba), free(bb);
    snprintf(pb, sizeof pb, "%s/b/metrics.csv", f.dir);
    ck_assert_int_eq(al_read_file(pb, &bb, &nb, &e), 0);
    double step0;
    ck_assert_int_eq(sscanf(strchr(bb, '\n') + 1, "0,,%lf", &step0), 1);
    ck_assert_double_eq_tol(step0, converted, 1e-5 * converted);
    free(bb);
    snprintf(pb, sizeof pb, "%s/b/convert.json", f.dir);
    ck_assert_int_eq(al_read_file(pb, &bb, &nb, &e), 0);
    ck_assert_msg(strstr(bb, "\"method\": \"svd\"") && strstr(bb, "\"k_error\""), "%s", bb);
    free(bb);
    snprintf(args, sizeof args, "train %s --out %s/c --set train.init_convert=mean", cfg, f.dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 2);
    ck_assert_msg(strstr(out, "needs 'train.init_from'"), "%s", out);
    free(out), free(cfg), free(f.dir);
}
END_TEST

Suite *convert_suite(void)
{
    Suite *s = suite_create("convert");
    TCase *t = tcase_create("convert");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, identity_conversions_are_exact);
    tcase_add_test(t, mean_and_first_pooling_equal_a_hand_computation);
    tcase_add_test(t, random_init_is_seeded_and_keeps_queries_and_outputs);
    tcase_add_test(t, svd_at_full_rank_gives_the_readme_scores_and_the_values_before_kv_norm);
    tcase_add_test(t, svd_below_full_rank_loses_accuracy_gradually);
    tcase_add_test(t, check_names_what_a_method_cannot_do);
    tcase_add_test(t, convert_keeps_each_layers_rope_fraction);
    tcase_add_test(t, a_converted_checkpoint_scores_like_pytorch_and_decodes_from_its_cache);
    tcase_add_test(t, the_output_records_source_hash_and_method);
    tcase_add_test(t, bad_input_is_one_line_exit_2_and_writes_nothing);
    tcase_add_test(t, init_convert_equals_convert_then_init_from);
    suite_add_tcase(s, t);
    return s;
}
