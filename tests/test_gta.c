/*
 * test_gta.c - grouped-tied attention (variants/gta.c) against the paper's
 * equations written out by hand here, independently of the variant: the
 * tied states s_g = wkv_g x, the shared RoPE key k_r = rope(wkr x), keys
 * [s_g[:r] | k_r], values s_g, queries RoPE'd in their last half, scale
 * 1/sqrt(d_head). The forward pass, the cache rows and the decode must all
 * equal that computation; the cache holds G*d_head + d_head/2 floats a
 * token and nothing else. (The generic loops of test_variants.c,
 * test_decode.c and test_torch.c run gta too.)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_convert.h"
#include "al_kvcache.h"
#include "al_registry.h"
#include "al_test.h"
#include "al_test_model.h"

/* One layer: d_model 16, 4 heads of 8, 2 groups: r = 4. */
enum { D = 16, H = 4, DH = 8, G = 2, R = DH / 2, NB = 2, NT = AL_KV_TILE + 44 };
#define BASE 10000.0

typedef struct layer {
    const al_variant *v;
    al_attn_shape s;
    al_param_spec spec[AL_MAX_ATTN_PARAMS];
    float *p[AL_MAX_ATTN_PARAMS];
    int np;
} layer;

/* The layer's context (the support library keeps it). */
static const void *lc(const layer *l) { return al_test_ctx_of(l->v, &l->s); }

static void layer_init(layer *l, uint64_t seed)
{
    l->v = al_variant_find("gta");
    ck_assert_ptr_nonnull(l->v);
    l->s = (al_attn_shape){D, H, DH, 64, 1, (float)BASE, 1e-5f, {G}, .rope = {.base = 0}};
    char err[256];
    ck_assert_int_eq(al_variant_check(l->v, &l->s, err, sizeof err), 0);
    l->np = l->v->train->params(lc(l), l->spec);
    al_rng r;
    al_rng_seed(&r, seed);
    for (int i = 0; i < l->np; i++) {
        size_t n = (size_t)l->spec[i].rows * l->spec[i].cols;
        l->p[i] = malloc(n * sizeof(float));
        for (size_t j = 0; j < n; j++) l->p[i][j] = (float)(0.5 * al_rng_normal(&r));
    }
}

static void layer_free(layer *l)
{
    for (int i = 0; i < l->np; i++) free(l->p[i]);
}

/* ------------------------------------------------------------ by hand */

/* y (rows) = w (rows, cols) . x (cols), in double */
static void matvec(double *y, const float *w, const double *x, int rows, int cols)
{
    for (int i = 0; i < rows; i++) {
        double acc = 0;
        for (int j = 0; j < cols; j++) acc += (double)w[(size_t)i * cols + j] * x[j];
        y[i] = acc;
    }
}

/* Rotate-half RoPE of v (n) at position pos: i pairs with i + n/2, angle
 * pos * base^(-2i/n). */
static void rope_by_hand(double *v, int n, int pos)
{
    for (int i = 0; i < n / 2; i++) {
        double a = pos * pow(BASE, -2.0 * i / n), x1 = v[i], x2 = v[i + n / 2];
        v[i] = x1 * cos(a) - x2 * sin(a);
        v[i + n / 2] = x2 * cos(a) + x1 * sin(a);
    }
}

/* What the paper's equations give for one sequence x (T, D): the tied
 * states st (T, G, DH), RoPE keys kr (T, R) and the output out (T, D). */
static void gta_by_hand(const layer *l, const float *x, int T, double *st, double *kr,
                        double *out)
{
    double *q = malloc(sizeof(double) * T * H * DH), xd[D], sc[NT], y[H * DH];
    ck_assert_int_le(T, NT);
    for (int t = 0; t < T; t++) {
        for (int j = 0; j < D; j++) xd[j] = x[t * D + j];
        matvec(q + t * H * DH, l->p[0], xd, H * DH, D);
        for (int h = 0; h < H; h++) rope_by_hand(q + (t * H + h) * DH + R, R, t);
        matvec(st + t * G * DH, l->p[1], xd, G * DH, D);
        matvec(kr + t * R, l->p[2], xd, R, D);
        rope_by_hand(kr + t * R, R, t);
    }
    for (int t = 0; t < T; t++) {
        for (int h = 0; h < H; h++) {
            const double *qh = q + (t * H + h) * DH;
            int g = h / (H / G);
            double mx = -INFINITY, sum = 0;
            for (int u = 0; u <= t; u++) {   /* causal */
                const double *s = st + (u * G + g) * DH;
                double dot = 0;
                for (int j = 0; j < R; j++) dot += qh[j] * s[j] + qh[R + j] * kr[u * R + j];
                sc[u] = dot / sqrt((double)DH);
                mx = fmax(mx, sc[u]);
            }
            for (int u = 0; u <= t; u++) sum += sc[u] = exp(sc[u] - mx);
            for (int j = 0; j < DH; j++) {
                double acc = 0;
                for (int u = 0; u <= t; u++) acc += sc[u] / sum * st[(u * G + g) * DH + j];
                y[h * DH + j] = acc;
            }
        }
        matvec(out + t * D, l->p[3], y, D, H * DH);
    }
    free(q);
}

static double max_abs(const double *a, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
    return m;
}

/* ------------------------------------------------------------ tests */

START_TEST(gta_settings_are_refused_with_the_key_named)
{
    const al_variant *v = al_variant_find("gta");
    ck_assert_ptr_nonnull(v);
    al_attn_shape s = {128, 8, 32, 64, 1, 10000.0f, 1e-5f, {3}, .rope = {.base = 0}};
    char err[256];
    ck_assert_int_ne(al_variant_check(v, &s, err, sizeof err), 0);
    ck_assert_str_eq(err, "'n_kv_head' (3) must divide 'n_head' (8)");
    s.set[0] = 0;
    ck_assert_int_ne(al_variant_check(v, &s, err, sizeof err), 0);
    ck_assert_str_eq(err, "'n_kv_head' (0) must divide 'n_head' (8)");
    s.set[0] = 2;
    ck_assert_int_eq(al_variant_check(v, &s, err, sizeof err), 0);
    for (int dh = 5; dh <= 7; dh++) {   /* odd, and even with an odd RoPE half */
        s.d_head = dh;
        ck_assert_int_ne(al_variant_check(v, &s, err, sizeof err), 0);
        char want[64];
        snprintf(want, sizeof want, "'d_head' (%d) must be a multiple of 4", dh);
        ck_assert_msg(strstr(err, want) && strstr(err, "RoPE key of d_head/2"), "%s", err);
    }
}
END_TEST

START_TEST(gta_tensors_and_cache_row_follow_the_paper)
{
    al_attn_shape s = {128, 8, 32, 64, 1, 10000.0f, 1e-5f, {2}, .rope = {.base = 0}};
    const al_variant *v = al_variant_find("gta");
    al_param_spec sp[AL_MAX_ATTN_PARAMS];
    ck_assert_int_eq(v->train->params(al_test_ctx_of(v, &s), sp), 4);
    static const struct { const char *name; int rows, cols, init; } want[] = {
        {"wq", 8 * 32, 128, AL_INIT_NORMAL}, {"wkv", 2 * 32, 128, AL_INIT_NORMAL},
        {"wkr", 16, 128, AL_INIT_NORMAL}, {"wo", 128, 8 * 32, AL_INIT_RESID}};
    for (int i = 0; i < 4; i++) {
        ck_assert_str_eq(sp[i].name, want[i].name);
        ck_assert_int_eq(sp[i].rows, want[i].rows);
        ck_assert_int_eq(sp[i].cols, want[i].cols);
        ck_assert_int_eq(sp[i].init, want[i].init);
    }
    /* G tied states and one half-width RoPE key: 2*32 + 16, against
     * GQA's 2*2*32 at the same G */
    ck_assert_uint_eq(v->decode->kv_elems(al_test_ctx_of(v, &s)), 2 * 32 + 32 / 2);
    const al_variant *gqa = al_variant_find("gqa");
    ck_assert_uint_eq(gqa->decode->kv_elems(al_test_ctx_of(gqa, &s)), 2 * 2 * 32);
}
END_TEST

/* The forward pass over two sequences longer than a cache block equals
 * the hand computation (relative 1e-4 of the largest output). */
START_TEST(gta_forward_equals_the_equations_by_hand)
{
    layer l;
    layer_init(&l, 7);
    al_rng r;
    al_rng_seed(&r, 8);
    size_t n = (size_t)NB * NT * D;
    float *x = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    for (size_t j = 0; j < n; j++) x[j] = (float)al_rng_normal(&r);
    float *act = calloc(l.v->train->act_floats(lc(&l), NB, NT), sizeof(float));
    float *scr = calloc(l.v->train->scratch_floats(lc(&l), NB, NT), sizeof(float));
    l.v->train->forward(lc(&l), out, act, scr, x, l.p, NB, NT);
    double *st = malloc(sizeof(double) * NT * G * DH), *kr = malloc(sizeof(double) * NT * R);
    double *want = malloc(sizeof(double) * NT * D);
    for (int b = 0; b < NB; b++) {
        gta_by_hand(&l, x + (size_t)b * NT * D, NT, st, kr, want);
        double amax = max_abs(want, (size_t)NT * D), worst = 0;
        for (int j = 0; j < NT * D; j++)
            worst = fmax(worst, fabs(out[(size_t)b * NT * D + j] - want[j]));
        ck_assert_msg(amax > 1.0, "outputs too small (%g) for the test to bite", amax);
        ck_assert_msg(worst < 1e-4 * amax, "sequence %d: max |forward - by hand| %g of %g", b,
                      worst, amax);
    }
    free(x), free(out), free(act), free(scr), free(st), free(kr), free(want);
    layer_free(&l);
}
END_TEST

/* After prefill, row t of the cache is [s_t (G*dh) | k_r,t (dh/2)] as
 * computed by hand, and the cache is exactly that many floats a token. */
START_TEST(gta_cache_rows_are_the_tied_states_and_the_rope_key)
{
    layer l;
    layer_init(&l, 9);
    al_rng r;
    al_rng_seed(&r, 10);
    float *x = malloc(sizeof(float) * NT * D), *out = malloc(sizeof(float) * NT * D);
    for (int j = 0; j < NT * D; j++) x[j] = (float)al_rng_normal(&r);
    float *act = calloc(l.v->train->act_floats(lc(&l), 1, NT), sizeof(float));
    float *scr = calloc(l.v->train->scratch_floats(lc(&l), 1, NT), sizeof(float));
    l.v->train->forward(lc(&l), out, act, scr, x, l.p, 1, NT);
    size_t live0 = al_kv_bytes_live();
    al_kv_cache *c = al_kv_cache_new(l.v->decode->kv_elems(lc(&l)), NT, AL_KV_F32);
    ck_assert_uint_eq(al_kv_cache_bytes(c), (size_t)NT * (G * DH + R) * sizeof(float));
    ck_assert_uint_eq(al_kv_bytes_live() - live0, (size_t)NT * (G * DH + R) * sizeof(float));
    l.v->decode->prefill(lc(&l), c, act, l.p, NT);
    double *st = malloc(sizeof(double) * NT * G * DH), *kr = malloc(sizeof(double) * NT * R);
    double *want = malloc(sizeof(double) * NT * D), worst = 0;
    gta_by_hand(&l, x, NT, st, kr, want);
    float row[G * DH + R];
    for (int t = 0; t < NT; t++) {
        al_kv_row_get(c, t, row);
        for (int j = 0; j < G * DH; j++) worst = fmax(worst, fabs(row[j] - st[t * G * DH + j]));
        for (int j = 0; j < R; j++) worst = fmax(worst, fabs(row[G * DH + j] - kr[t * R + j]));
    }
    ck_assert_msg(worst < 1e-4, "cache rows differ from s, k_r by hand by %g", worst);
    al_kv_cache_free(c);
    ck_assert_uint_eq(al_kv_bytes_live(), live0);
    free(x), free(out), free(act), free(scr), free(st), free(kr), free(want);
    layer_free(&l);
}
END_TEST

/* Decode reads nothing but the cache: with rows written from the hand
 * computation (never from the variant's forward), each new token's output
 * equals the hand output at its position, past one cache block, in f32
 * to 1e-4 and in bf16 / f16 within their tolerance. */
static void check_decode_from_hand_rows(int dtype, double tol)
{
    layer l;
    layer_init(&l, 11);
    al_rng r;
    al_rng_seed(&r, 12);
    float *x = malloc(sizeof(float) * NT * D);
    for (int j = 0; j < NT * D; j++) x[j] = (float)al_rng_normal(&r);
    double *st = malloc(sizeof(double) * NT * G * DH), *kr = malloc(sizeof(double) * NT * R);
    double *want = malloc(sizeof(double) * NT * D);
    gta_by_hand(&l, x, NT, st, kr, want);
    al_kv_cache *c = al_kv_cache_new(l.v->decode->kv_elems(lc(&l)), NT, dtype);
    float row[G * DH + R], out[D];
    for (int t = 0; t < NT; t++) {   /* every row, from the hand values */
        for (int j = 0; j < G * DH; j++) row[j] = (float)st[t * G * DH + j];
        for (int j = 0; j < R; j++) row[G * DH + j] = (float)kr[t * R + j];
        al_kv_row_put(c, t, row);
    }
    float *scr = calloc(l.v->decode->scratch_floats(lc(&l), NT), sizeof(float));
    double amax = max_abs(want, (size_t)NT * D), worst = 0;
    static const int at[] = {0, 1, 5, AL_KV_TILE - 1, AL_KV_TILE, NT - 1};
    for (int i = 0; i < 6; i++) {   /* decode overwrites row pos with its own (equal) row */
        int pos = at[i];
        l.v->decode->decode(lc(&l), out, scr, x + pos * D, l.p, c, pos);
        for (int j = 0; j < D; j++) worst = fmax(worst, fabs(out[j] - want[pos * D + j]));
    }
    ck_assert_msg(worst < tol * amax, "%s: max |decode - by hand| %g of %g",
                  al_kv_dtype_name(dtype), worst, amax);
    al_kv_cache_free(c);
    free(x), free(st), free(kr), free(want), free(scr);
    layer_free(&l);
}

START_TEST(gta_decode_from_the_hand_cache_equals_the_equations)
{
    check_decode_from_hand_rows(AL_KV_F32, 1e-4);
    check_decode_from_hand_rows(AL_KV_BF16, 0.02);
    check_decode_from_hand_rows(AL_KV_F16, 0.005);
}
END_TEST

/* `attnlab kv` reports gta's cache: n_layer * (G*dh + dh/2) floats. */
START_TEST(attnlab_kv_reports_the_gta_cache)
{
    char *dir = al_test_tmpdir(), *out = NULL, args[4400];
    char *path = al_test_write(dir, "gta.yaml",
                               "model: {n_layer: 3, d_model: 64, n_head: 8, d_head: 16,\n"
                               "        attention: {variant: gta, n_kv_head: 2}}\n");
    snprintf(args, sizeof args, "kv %s", path);
    ck_assert_msg(al_test_attnlab(args, &out) == 0, "%s", out);
    char want[64];
    snprintf(want, sizeof want, "kv_elements_per_token: %d", 3 * (2 * 16 + 8));
    ck_assert_msg(strstr(out, want) != NULL, "%s", out);
    free(out);
    free(path);
    free(dir);
}
END_TEST

/* Converting into gta is refused by every method, in one line saying why:
 * no source has a state that is both value and key. */
START_TEST(convert_into_gta_is_refused_with_the_reason)
{
    al_model_config src, dst;
    ck_assert_int_eq(al_test_tiny_config(&src, al_variant_find("gqa"), 1, 16, 4, 8, 8, 11), 0);
    ck_assert_int_eq(al_test_tiny_config(&dst, al_variant_find("gta"), 1, 16, 4, 8, 8, 11), 0);
    for (int m = 0; m < AL_CONVERT_N_METHODS; m++) {
        al_err e;
        ck_assert_int_ne(al_convert_check(&src, &dst, m, &e), 0);
        ck_assert_msg(strstr(e.msg, "no method reaches 'gta'") && strstr(e.msg, "tied state") &&
                      !strchr(e.msg, '\n'), "%s: %s", al_convert_method_name(m), e.msg);
    }
}
END_TEST

Suite *gta_suite(void)
{
    Suite *s = suite_create("gta");
    TCase *tc = tcase_create("gta");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, gta_settings_are_refused_with_the_key_named);
    tcase_add_test(tc, gta_tensors_and_cache_row_follow_the_paper);
    tcase_add_test(tc, gta_forward_equals_the_equations_by_hand);
    tcase_add_test(tc, gta_cache_rows_are_the_tied_states_and_the_rope_key);
    tcase_add_test(tc, gta_decode_from_the_hand_cache_equals_the_equations);
    tcase_add_test(tc, attnlab_kv_reports_the_gta_cache);
    tcase_add_test(tc, convert_into_gta_is_refused_with_the_reason);
    suite_add_tcase(s, tc);
    return s;
}
