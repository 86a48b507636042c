/*
 * test_variants.c - one generic loop that every registered variant goes
 * through (built-ins and plugins alike): gradients of every parameter tensor
 * and of the input against finite differences, the causal property, and
 * bit-for-bit determinism (decode parity and cache bytes: test_decode.c,
 * which al_test_variant_generic calls too). A variant added to the registry is tested here
 * the day it is added.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_registry.h"
#include "al_test.h"
#include "al_test_model.h"

typedef struct vt {
    const al_variant_ops *v;
    al_attn_shape s;
    al_param_spec spec[AL_MAX_ATTN_PARAMS];
    int np, B, T;
    float *p[AL_MAX_ATTN_PARAMS], *dp[AL_MAX_ATTN_PARAMS];
    float *x, *dx, *out, *act, *scratch, *R;
} vt;

/* Builds a test layer. opt >= 0 sets optional setting `opt` to 4, so that
 * the code paths behind optional settings are checked too. */
static void vt_init_opt(vt *t, const al_variant_ops *v, int causal, int opt)
{
    memset(t, 0, sizeof *t);
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, v, 1, 16, 4, 4, 6, 7), 0);
    c.causal = causal;
    if (opt >= 0) c.attn_set[opt] = 4;
    t->v = v;
    t->s = (al_attn_shape){16, 4, 4, 6, causal, 10000.0f, 1e-5f, {0}};
    memcpy(t->s.set, c.attn_set, sizeof t->s.set);
    t->B = 2;
    t->T = 6;
    t->np = v->params(&t->s, t->spec);
    al_rng r;
    al_rng_seed(&r, 42);
    for (int i = 0; i < t->np; i++) {
        size_t n = (size_t)t->spec[i].rows * (t->spec[i].cols ? t->spec[i].cols : 1);
        t->p[i] = malloc(n * sizeof(float));
        t->dp[i] = calloc(n, sizeof(float));
        for (size_t j = 0; j < n; j++)
            t->p[i][j] = t->spec[i].init == AL_INIT_ONES ? 1.0f + 0.1f * (float)al_rng_normal(&r)
                                                         : 0.4f * (float)al_rng_normal(&r);
    }
    size_t BTD = (size_t)t->B * t->T * 16;
    t->x = malloc(BTD * sizeof(float));
    t->R = malloc(BTD * sizeof(float));
    for (size_t j = 0; j < BTD; j++) t->x[j] = (float)al_rng_normal(&r);
    for (size_t j = 0; j < BTD; j++) t->R[j] = (float)al_rng_normal(&r);
    t->dx = calloc(BTD, sizeof(float));
    t->out = calloc(BTD, sizeof(float));
    t->act = calloc(v->act_floats(&t->s, t->B, t->T), sizeof(float));
    t->scratch = calloc(v->scratch_floats(&t->s, t->B, t->T) + 1, sizeof(float));
}

static void vt_init(vt *t, const al_variant_ops *v, int causal)
{
    vt_init_opt(t, v, causal, -1);
}

/* Optional settings of v whose value 4 the variant accepts, as a bit mask. */
static unsigned optional_variations(const al_variant_ops *v)
{
    unsigned mask = 0;
    for (int i = 0; v->settings && v->settings[i].name; i++) {
        if (v->settings[i].required) continue;
        al_model_config c;
        al_test_tiny_config(&c, v, 1, 16, 4, 4, 6, 7);
        c.attn_set[i] = 4;
        al_attn_shape s = {16, 4, 4, 6, 1, 10000.0f, 1e-5f, {0}};
        memcpy(s.set, c.attn_set, sizeof s.set);
        char err[256];
        if (!v->check || v->check(&s, err, sizeof err) == 0) mask |= 1u << i;
    }
    return mask;
}

static void vt_free(vt *t)
{
    for (int i = 0; i < t->np; i++) free(t->p[i]), free(t->dp[i]);
    free(t->x), free(t->R), free(t->dx), free(t->out), free(t->act), free(t->scratch);
}

/* L = sum(out * R), in double */
static double vt_loss(vt *t)
{
    t->v->forward(&t->s, t->out, t->act, t->scratch, t->x, t->p, t->B, t->T);
    double L = 0;
    for (size_t j = 0; j < (size_t)t->B * t->T * 16; j++) L += (double)t->out[j] * t->R[j];
    return L;
}

static double fd_err(vt *t, float *param, const float *grad, size_t n, al_rng *r)
{
    enum { S = 32 };
    double an[S], fd[S];
    for (int k = 0; k < S; k++) {
        size_t j = al_rng_below(r, n);
        float save = param[j], h = 1e-2f;
        param[j] = save + h;
        double lp = vt_loss(t);
        param[j] = save - h;
        double lm = vt_loss(t);
        param[j] = save;
        fd[k] = (lp - lm) / (2.0 * h);
        an[k] = grad[j];
    }
    return al_test_rel_err(an, fd, S);
}

static void check_variant_grads(const al_variant_ops *v, int causal, int opt)
{
    vt t;
    vt_init_opt(&t, v, causal, opt);
    vt_loss(&t);
    v->backward(&t.s, t.dx, t.dp, t.scratch, t.R, t.x, t.act, t.p, t.B, t.T);
    al_rng r;
    al_rng_seed(&r, 1);
    for (int i = 0; i < t.np; i++) {
        size_t n = (size_t)t.spec[i].rows * (t.spec[i].cols ? t.spec[i].cols : 1);
        double err = fd_err(&t, t.p[i], t.dp[i], n, &r);
        ck_assert_msg(err < 1e-2, "%s causal=%d opt=%d: d%s rel err %g", v->name, causal,
                      opt, t.spec[i].name, err);
    }
    double err = fd_err(&t, t.x, t.dx, (size_t)t.B * t.T * 16, &r);
    ck_assert_msg(err < 1e-2, "%s causal=%d: dx rel err %g", v->name, causal, err);
    vt_free(&t);
}

static void check_grads(const al_variant_ops *v)
{
    check_variant_grads(v, 1, -1);
    check_variant_grads(v, 0, -1);
    unsigned opts = optional_variations(v);
    for (int k = 0; k < AL_MAX_SETTINGS; k++)
        if (opts & (1u << k)) check_variant_grads(v, 1, k);
}

static void check_causal(const al_variant_ops *v)
{
    vt t;
    vt_init(&t, v, 1);
    size_t row = 16, cut = 3; /* change positions > 3 of sequence 0 */
    vt_loss(&t);
    float *before = malloc(t.B * t.T * row * sizeof(float));
    memcpy(before, t.out, t.B * t.T * row * sizeof(float));
    for (size_t j = (cut + 1) * row; j < t.T * row; j++) t.x[j] += 1.0f;
    vt_loss(&t);
    double d_past = 0, d_future = 0;
    for (size_t j = 0; j < (size_t)t.T * row; j++) {
        double d = fabs(before[j] - t.out[j]);
        if (j < (cut + 1) * row) d_past = fmax(d_past, d);
        else d_future = fmax(d_future, d);
    }
    ck_assert_msg(d_past <= 1e-6, "%s: past changed by %g", t.v->name, d_past);
    ck_assert_msg(d_future > 1e-3, "%s: future unchanged", t.v->name);
    free(before);
    vt_free(&t);
}

static void check_deterministic(const al_variant_ops *v)
{
    vt a, b;
    vt_init(&a, v, 1);
    vt_init(&b, v, 1);
    vt_loss(&a);
    vt_loss(&b);
    size_t n = (size_t)a.B * a.T * 16;
    ck_assert_mem_eq(a.out, b.out, n * sizeof(float));
    a.v->backward(&a.s, a.dx, a.dp, a.scratch, a.R, a.x, a.act, a.p, a.B, a.T);
    b.v->backward(&b.s, b.dx, b.dp, b.scratch, b.R, b.x, b.act, b.p, b.B, b.T);
    ck_assert_mem_eq(a.dx, b.dx, n * sizeof(float));
    for (int k = 0; k < a.np; k++) {
        size_t m = (size_t)a.spec[k].rows * (a.spec[k].cols ? a.spec[k].cols : 1);
        ck_assert_mem_eq(a.dp[k], b.dp[k], m * sizeof(float));
    }
    vt_free(&a);
    vt_free(&b);
}

/* What backward does with what dx and dp held: a variant that says it
 * writes them (AL_VARIANT_WRITES_GRADS) gives the same bits over NaN as
 * over zeros; one that does not must add to them, as the contract says. */
static void check_grad_semantics(const al_variant_ops *v)
{
    vt a, b;
    vt_init(&a, v, 1);
    vt_init(&b, v, 1);
    vt_loss(&a);
    vt_loss(&b);
    size_t n = (size_t)b.B * b.T * 16;
    int writes = (v->flags & AL_VARIANT_WRITES_GRADS) != 0;
    float fill = writes ? NAN : 1.0f;
    for (size_t j = 0; j < n; j++) b.dx[j] = fill;
    for (int k = 0; k < b.np; k++)
        for (size_t j = 0; j < (size_t)b.spec[k].rows * (b.spec[k].cols ? b.spec[k].cols : 1); j++)
            b.dp[k][j] = fill;
    a.v->backward(&a.s, a.dx, a.dp, a.scratch, a.R, a.x, a.act, a.p, a.B, a.T);
    b.v->backward(&b.s, b.dx, b.dp, b.scratch, b.R, b.x, b.act, b.p, b.B, b.T);
    for (int k = -1; k < a.np; k++) {
        const float *ga = k < 0 ? a.dx : a.dp[k], *gb = k < 0 ? b.dx : b.dp[k];
        size_t m = k < 0 ? n : (size_t)a.spec[k].rows * (a.spec[k].cols ? a.spec[k].cols : 1);
        for (size_t j = 0; j < m; j++) {
            float want = writes ? ga[j] : ga[j] + 1.0f;
            ck_assert_msg(gb[j] == want || fabsf(gb[j] - want) <= 1e-6f * (1 + fabsf(want)),
                          "%s (%s): d%s[%zu] = %g over %g, want %g", v->name,
                          writes ? "writes" : "accumulates", k < 0 ? "x" : a.spec[k].name, j,
                          gb[j], fill, want);
        }
    }
    vt_free(&a);
    vt_free(&b);
}

/* The whole generic loop for one variant (tests/test_plugin.c runs it on a
 * variant loaded from a plugin). */
void al_test_variant_generic(const al_variant_ops *v)
{
    check_grads(v);
    check_causal(v);
    check_deterministic(v);
    check_grad_semantics(v);
    if (v->prefill || v->decode || v->decode_scratch_floats) al_test_variant_decode(v);
    if (v->probs) al_test_variant_probs(v);
}

START_TEST(every_variant_gradients_match_finite_differences)
{
    for (int i = 0; i < al_variant_count(); i++) check_grads(al_variant_at(i));
}
END_TEST

START_TEST(every_variant_is_causal)
{
    for (int i = 0; i < al_variant_count(); i++) check_causal(al_variant_at(i));
}
END_TEST

START_TEST(every_variant_writes_or_adds_its_gradients_as_it_says)
{
    int writers = 0;
    for (int i = 0; i < al_variant_count(); i++) {
        check_grad_semantics(al_variant_at(i));
        writers += (al_variant_at(i)->flags & AL_VARIANT_WRITES_GRADS) != 0;
    }
    ck_assert_int_ge(writers, 4);   /* the built-ins write */
}
END_TEST

START_TEST(every_variant_is_deterministic)
{
    for (int i = 0; i < al_variant_count(); i++) check_deterministic(al_variant_at(i));
}
END_TEST

START_TEST(mla_query_compression_is_exercised)
{
    /* The optional-settings pass must reach MLA's d_q_latent path. */
    const al_variant_ops *v = al_variant_find("mla");
    ck_assert_uint_ne(optional_variations(v) & (1u << 2), 0);
    vt t;
    vt_init_opt(&t, v, 1, 2);
    ck_assert_str_eq(t.spec[0].name, "wdq");
    ck_assert_int_eq(t.spec[0].rows, 4);
    vt_free(&t);
}
END_TEST

START_TEST(registry_refuses_duplicates_and_other_versions)
{
    al_err e;
    ck_assert_int_ne(al_variant_register(al_variant_find("mha"), "test", &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "already registered"));
    al_variant_ops old = *al_variant_find("mha");
    old.api_version = AL_VARIANT_API_VERSION + 1;
    old.name = "mha_future";
    ck_assert_int_ne(al_variant_register(&old, "future.so", &e), 0);
    char want[64];
    snprintf(want, sizeof want, "version %d", AL_VARIANT_API_VERSION + 1);
    ck_assert_ptr_nonnull(strstr(e.msg, want));
}
END_TEST

/* A version-2 plugin table ends before `probs`: the registry must accept it
 * and never read past its end (the table sits in a buffer of exactly the
 * version-2 size, so ASan would see an over-read). */
START_TEST(registry_accepts_version_2_tables_with_new_members_null)
{
    al_err e;
    int before = al_variant_count();
    size_t size = al_variant_ops_size(2);
    ck_assert_uint_lt(size, sizeof(al_variant_ops));
    ck_assert_uint_eq(al_variant_ops_size(AL_VARIANT_API_VERSION), sizeof(al_variant_ops));
    ck_assert_uint_eq(al_variant_ops_size(AL_VARIANT_API_MIN - 1), 0);
    al_variant_ops full = *al_variant_find("mha");
    full.api_version = 2;
    full.name = "mha_v2";
    void *old = malloc(size);
    memcpy(old, &full, size);
    ck_assert_int_eq(al_variant_register(old, "v2.so", &e), 0);
    const al_variant_ops *got = al_variant_find("mha_v2");
    ck_assert_ptr_nonnull(got);
    ck_assert_ptr_ne(got, old);              /* a whole-size copy */
    ck_assert_int_eq(got->api_version, 2);
    ck_assert_ptr_eq(got->forward, full.forward);
    ck_assert_ptr_eq(got->decode, full.decode);
    ck_assert_ptr_null(got->probs);
    ck_assert_ptr_null(got->decode_batch);
    ck_assert_ptr_null(got->decode_batch_scratch_floats);
    al_variant_truncate(before);
    free(old);
}
END_TEST

START_TEST(gqa_family_cache_sizes_follow_kv_heads)
{
    al_attn_shape s = {128, 8, 32, 64, 1, 10000.0f, 1e-5f, {2}};
    ck_assert_uint_eq(al_variant_find("mha")->kv_elems(&s), 2 * 8 * 32);
    ck_assert_uint_eq(al_variant_find("mqa")->kv_elems(&s), 2 * 1 * 32);
    ck_assert_uint_eq(al_variant_find("gqa")->kv_elems(&s), 2 * 2 * 32);
    char err[256];
    s.set[0] = 3;
    ck_assert_int_ne(al_variant_find("gqa")->check(&s, err, sizeof err), 0);
    ck_assert_str_eq(err, "'n_kv_head' (3) must divide 'n_head' (8)");
    al_attn_shape m = {128, 8, 32, 64, 1, 10000.0f, 1e-5f, {32, 16, 0}};
    ck_assert_uint_eq(al_variant_find("mla")->kv_elems(&m), 32 + 16);
    m.set[1] = 15;
    ck_assert_int_ne(al_variant_find("mla")->check(&m, err, sizeof err), 0);
    ck_assert_ptr_nonnull(strstr(err, "'d_rope' (15)"));
}
END_TEST

Suite *variants_suite(void)
{
    Suite *s = suite_create("variants");
    TCase *tc = tcase_create("generic");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, every_variant_gradients_match_finite_differences);
    tcase_add_test(tc, every_variant_is_causal);
    tcase_add_test(tc, every_variant_is_deterministic);
    tcase_add_test(tc, every_variant_writes_or_adds_its_gradients_as_it_says);
    tcase_add_test(tc, registry_refuses_duplicates_and_other_versions);
    tcase_add_test(tc, registry_accepts_version_2_tables_with_new_members_null);
    tcase_add_test(tc, mla_query_compression_is_exercised);
    tcase_add_test(tc, gqa_family_cache_sizes_follow_kv_heads);
    suite_add_tcase(s, tc);
    return s;
}
