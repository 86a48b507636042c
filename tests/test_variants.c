/*
 * test_variants.c - one generic loop that every registered variant goes
 * through (built-ins and plugins alike): the conformance suite of `attnlab
 * check-variant` (src/model/check_variant.c: gradients against finite
 * differences, causality, determinism, the gradient contract, decode and
 * prefill parity, bf16/f16 caches, batches, probs, cache bytes), run in
 * process; the registry's refusals. A variant added to the registry is
 * tested here the day it is added.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_check_variant.h"
#include "al_registry.h"
#include "attnlab_variant_v4.h"
#include "al_test.h"
#include "al_test_model.h"

/* Runs the conformance suite (src/model/check_variant.c, the code behind
 * `attnlab check-variant`) on v; every line must pass. Returns the report
 * for further questions (free it). */
static al_check_report run_suite(const al_variant *v)
{
    al_check_report r;
    al_err e;
    ck_assert_msg(al_check_variant(v, NULL, &r, &e) == 0, "%s: %s", v->name, e.msg);
    for (int i = 0; i < r.n; i++) {
        char buf[320];
        al_check_format(&r.lines[i], buf, sizeof buf);
        ck_assert_msg(r.lines[i].pass, "%s: %s", v->name, buf);
    }
    static const char *const always[] = {"gradient.x", "causal", "causal.future",
                                         "determinism.runs", "determinism.threads",
                                         "writes_grads", "scratch.forward"};
    for (size_t i = 0; i < sizeof always / sizeof always[0]; i++)
        ck_assert_msg(al_check_find(&r, always[i]), "%s: no %s line", v->name, always[i]);
    ck_assert_int_eq(r.n_fail, 0);
    return r;
}

/* The whole generic loop for one variant (tests/test_plugin.c runs it on a
 * variant loaded from a plugin). */
void al_test_variant_generic(const al_variant *v)
{
    al_check_report r = run_suite(v);
    al_check_report_free(&r);
}

/* Gradients of every tensor (one line each), causality, determinism, the
 * gradient contract, and for decodable variants decode, prefill, bf16/f16
 * past one tile, batches, probs and cache bytes. */
START_TEST(every_variant_passes_the_conformance_suite)
{
    int writers = 0;
    for (int i = 0; i < al_variant_count(); i++) {
        const al_variant *v = al_variant_at(i);
        al_check_report r = run_suite(v);
        al_param_spec spec[AL_MAX_ATTN_PARAMS];
        al_attn_shape s = {16, 4, 4, 8, 1, 10000.0f, 1e-5f, {2, 2, 2, 2, 2, 2, 2, 2}, .rope = {.base = 0}};
        for (int k = 0; k < al_variant_n_settings(v); k++)
            if (!v->settings[k].required) s.set[k] = v->settings[k].def;
        void *ctx = al_test_ctx(v, &s);
        int np = v->train->params(ctx, spec);
        v->fini(ctx);
        for (int k = 0; k < np; k++) {
            char name[48];
            snprintf(name, sizeof name, "gradient.%.31s", spec[k].name);
            ck_assert_msg(al_check_find(&r, name), "%s: no %s line", v->name, name);
        }
        if (al_variant_decodes(v)) ck_assert_ptr_nonnull(al_check_find(&r, "decode.bf16"));
        writers += (v->train->flags & AL_VARIANT_WRITES_GRADS) != 0;
        al_check_report_free(&r);
    }
    ck_assert_int_ge(writers, 4);   /* the built-ins write */
}
END_TEST

START_TEST(mla_query_compression_is_exercised)
{
    /* The optional-settings pass must reach MLA's d_q_latent path, whose
     * tensor wdq exists only with query compression. */
    al_check_report r = run_suite(al_variant_find("mla"));
    const al_check_line *l = al_check_find(&r, "gradient.wdq");
    ck_assert_ptr_nonnull(l);
    ck_assert_ptr_nonnull(strstr(l->where, "d_q_latent=4"));
    al_check_report_free(&r);
}
END_TEST

START_TEST(registry_refuses_duplicates_and_other_versions)
{
    al_err e;
    ck_assert_int_ne(al_variant_register(al_variant_find("mha"), "test", &e), 0);
    ck_assert_ptr_nonnull(strstr(e.msg, "already registered"));
    al_variant old = *al_variant_find("mha");
    old.api_version = AL_VARIANT_API_VERSION + 1;
    old.name = "mha_future";
    ck_assert_int_ne(al_variant_register(&old, "future.so", &e), 0);
    char want[64];
    snprintf(want, sizeof want, "version %d", AL_VARIANT_API_VERSION + 1);
    ck_assert_ptr_nonnull(strstr(e.msg, want));
}
END_TEST

/* A copy of mha's table with sub-tables of its own, to punch holes in. */
typedef struct holed {
    al_variant v;
    al_variant_train train;
    al_variant_decode decode;
    al_variant_share share;
} holed;

static void holed_mha(holed *h, const char *name)
{
    const al_variant *m = al_variant_find("mha");
    h->v = *m, h->train = *m->train, h->decode = *m->decode, h->share = *m->share;
    h->v.name = name;
    h->v.train = &h->train, h->v.decode = &h->decode, h->v.share = &h->share;
}

/* A table missing members is refused with exactly those named: those every
 * variant needs, and a partial group (init and fini, decode, batched
 * decode, sharing). */
START_TEST(registry_names_exactly_the_missing_members)
{
    static const struct { int drop; const char *want; } cases[] = {
        {1, "its table is missing the member train.forward"},
        {2, "its table is missing the members train.act_floats, decode.kv_elems"},
        {3, "its table is missing the member decode.scratch_floats"},
        {4, "its table is missing the member decode.decode_batch"},
        {5, "its table is missing the member fini"},
        {6, "its table is missing the member share.decode"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        holed t;
        holed_mha(&t, "mha_holes");
        if (cases[i].drop == 1) t.train.forward = NULL;
        if (cases[i].drop == 2) t.train.act_floats = NULL, t.decode.kv_elems = NULL;
        if (cases[i].drop == 3) t.decode.scratch_floats = NULL;
        if (cases[i].drop == 4) t.decode.decode_batch = NULL;
        if (cases[i].drop == 5) t.v.fini = NULL;
        if (cases[i].drop == 6) t.share.decode = NULL;
        al_err e;
        int before = al_variant_count();
        ck_assert_int_ne(al_variant_register(&t.v, "holes.so", &e), 0);
        ck_assert_int_eq(al_variant_count(), before);
        size_t n = strlen(e.msg), k = strlen(cases[i].want);   /* ends with exactly these */
        ck_assert_msg(n >= k && !strcmp(e.msg + n - k, cases[i].want), "%s", e.msg);
    }
    /* the decode group absent as a whole is fine: that variant cannot decode */
    holed t;
    holed_mha(&t, "mha_nodecode");
    t.decode.prefill = NULL, t.decode.decode = NULL, t.decode.scratch_floats = NULL;
    t.decode.decode_batch = NULL, t.decode.batch_scratch_floats = NULL;
    t.v.share = NULL;   /* a consumer decodes over its producer's cache */
    al_err e;
    int before = al_variant_count();
    ck_assert_msg(al_variant_register(&t.v, "nodecode.so", &e) == 0, "%s", e.msg);
    ck_assert(!al_variant_decodes(al_variant_find("mha_nodecode")));
    al_variant_truncate(before);
}
END_TEST

/* A version-2 plugin table ends before `probs`: the registry must accept it
 * and never read past its end (the table sits in a buffer of exactly the
 * version-2 size, so ASan would see an over-read); the wrapper calls the
 * old members with the layer's shape and leaves the later ones absent. */
START_TEST(registry_accepts_version_2_tables_with_new_members_null)
{
    al_err e;
    int before = al_variant_count();
    size_t size = al_variant_ops_size(2);
    ck_assert_uint_lt(size, sizeof(al_variant_ops));
    ck_assert_uint_eq(al_variant_ops_size(AL_VARIANT_V4), sizeof(al_variant_ops));
    ck_assert_uint_eq(al_variant_ops_size(AL_VARIANT_V4_MIN - 1), 0);
    void *old = al_test_old_table(2, "old_v2");
    ck_assert_int_eq(al_variant_register(old, "v2.so", &e), 0);
    const al_variant *got = al_variant_find("old_v2");
    ck_assert_ptr_nonnull(got);
    ck_assert_int_eq(got->api_version, AL_VARIANT_API_VERSION);
    al_attn_shape s = {16, 2, 8, 8, 1, 10000.0f, 1e-5f, {0}, .rope = {.base = 0}};
    void *ctx = al_test_ctx(got, &s);
    ck_assert_uint_eq(got->decode->kv_elems(ctx), 17);
    ck_assert_int_eq(got->decode->kv_rows(ctx, 9), 9);              /* the default */
    got->train->forward(ctx, NULL, NULL, NULL, NULL, NULL, 1, 1);
    ck_assert_ptr_nonnull(al_test_old_seen);
    ck_assert_int_eq(al_test_old_seen->d_model, 16);
    got->fini(ctx);
    ck_assert_ptr_null(got->pictures);                              /* no probs */
    ck_assert_ptr_null(got->share);
    ck_assert(!al_variant_decodes(got));
    ck_assert_ptr_null(got->decode->decode_batch);   /* a version-3 member */
    al_variant_truncate(before);
    free(old);
}
END_TEST

START_TEST(gqa_family_cache_sizes_follow_kv_heads)
{
    al_attn_shape s = {128, 8, 32, 64, 1, 10000.0f, 1e-5f, {2}, .rope = {.base = 0}};
    static const struct { const char *name; size_t want; } kv[] = {
        {"mha", 2 * 8 * 32}, {"mqa", 2 * 1 * 32}, {"gqa", 2 * 2 * 32}};
    for (int i = 0; i < 3; i++) {
        const al_variant *v = al_variant_find(kv[i].name);
        void *ctx = al_test_ctx(v, &s);
        ck_assert_uint_eq(v->decode->kv_elems(ctx), kv[i].want);
        v->fini(ctx);
    }
    char err[256];
    s.set[0] = 3;
    ck_assert_int_ne(al_variant_check(al_variant_find("gqa"), &s, err, sizeof err), 0);
    ck_assert_str_eq(err, "'n_kv_head' (3) must divide 'n_head' (8)");
    al_attn_shape m = {128, 8, 32, 64, 1, 10000.0f, 1e-5f, {32, 16, 0}, .rope = {.base = 0}};
    const al_variant *mla = al_variant_find("mla");
    void *ctx = al_test_ctx(mla, &m);
    ck_assert_uint_eq(mla->decode->kv_elems(ctx), 32 + 16);
    mla->fini(ctx);
    m.set[1] = 15;
    ck_assert_int_ne(al_variant_check(mla, &m, err, sizeof err), 0);
    ck_assert_ptr_nonnull(strstr(err, "'d_rope' (15)"));
}
END_TEST

Suite *variants_suite(void)
{
    Suite *s = suite_create("variants");
    TCase *tc = tcase_create("generic");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, every_variant_passes_the_conformance_suite);
    tcase_add_test(tc, registry_refuses_duplicates_and_other_versions);
    tcase_add_test(tc, registry_accepts_version_2_tables_with_new_members_null);
    tcase_add_test(tc, registry_names_exactly_the_missing_members);
    tcase_add_test(tc, mla_query_compression_is_exercised);
    tcase_add_test(tc, gqa_family_cache_sizes_follow_kv_heads);
    suite_add_tcase(s, tc);
    return s;
}
