/*
 * test_decode.c - incremental decoding through every variant's decode
 * hooks, against the full-sequence forward pass; MLA's absorbed decode
 * against its naive oracle; cache bytes against hand formulas; sampling.
 *
 * One generic loop: every registered variant with decode hooks, and every
 * optional setting of it that accepts the value 4 (MLA's d_q_latent: with
 * and without query compression), is run through the same checks. (The
 * same checks on any one variant, a plugin's included, are those of
 * `attnlab check-variant`, src/model/check_variant.c.)
 */
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "al_decode.h"
#include "al_parallel.h"
#include "al_registry.h"
#include "al_test.h"
#include "al_test_model.h"
#include "al_test_latent.h"

enum { SEQ = 8, CTX = SEQ + 4, VOCAB = 13 };

static int decodable(const al_variant *v) { return al_variant_decodes(v); }

/* Tiny model of variant v (optional setting opt = 4 when opt >= 0) with
 * its matrices scaled up so attention is sharp and logits are O(1): a
 * decode that reads the wrong rows or positions shows at 1e-4. */
static void make_model(al_model *m, const al_variant *v, int opt, uint64_t seed)
{
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, v, 2, 16, 4, 4, SEQ, VOCAB), 0);
    if (opt >= 0) c.attn_set[opt] = 4;
    al_err e;
    ck_assert_msg(al_model_init(m, &c, &e) == 0, "%s", e.msg);
    al_model_init_weights(m, seed);
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].ndim == 2)
            for (size_t j = 0; j < m->tensors[i].numel; j++)
                m->params[m->tensors[i].offset + j] *= 20.0f;
}

/* Optional settings of v whose value 4 passes the variant's check (bit i
 * for setting i), as tests/test_variants.c chooses them. */
static unsigned optional_variations(const al_variant *v)
{
    unsigned mask = 0;
    for (int i = 0; v->settings && v->settings[i].name; i++) {
        if (v->settings[i].required) continue;
        al_model_config c;
        al_test_tiny_config(&c, v, 2, 16, 4, 4, SEQ, VOCAB);
        c.attn_set[i] = 4;
        al_model m;
        al_err e;
        if (al_model_init(&m, &c, &e) == 0) mask |= 1u << i;
        al_model_free(&m);
    }
    return mask;
}

/* Calls fn for v as configured and for each optional variation of it;
 * returns the number of calls. */
static int for_each_variation(const al_variant *v, void (*fn)(const al_variant *, int))
{
    int n = 1;
    fn(v, -1);
    unsigned opts = optional_variations(v);
    for (int k = 0; k < AL_MAX_SETTINGS; k++)
        if (opts & (1u << k)) fn(v, k), n++;
    return n;
}

/* Calls fn for every decodable variant and each optional variation. */
static int for_each_decodable(void (*fn)(const al_variant *, int))
{
    int n = 0;
    for (int i = 0; i < al_variant_count(); i++)
        if (decodable(al_variant_at(i))) n += for_each_variation(al_variant_at(i), fn);
    return n;
}

static void random_tokens(int *tok, int n, uint64_t seed)
{
    al_rng r;
    al_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) tok[i] = (int)al_rng_below(&r, VOCAB);
}

/* Full-sequence logits (CTX, VOCAB) of tok, past the trained seq_len. */
static void full_logits(al_model *m, const int *tok, float *out)
{
    al_err e;
    ck_assert_int_eq(al_model_reserve(m, 1, CTX, &e), 0);
    al_model_forward(m, tok, NULL, NULL, 1, CTX);
    memcpy(out, m->logits, sizeof(float) * CTX * VOCAB);
}

static double max_abs_diff(const float *a, const float *b, int n, double *amax)
{
    double d = 0;
    for (int i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        if (amax) *amax = fmax(*amax, fabs((double)b[i]));
    }
    return d;
}

/* Prefill P tokens, then decode the rest; diff against the full forward
 * at every position from P - 1 on. Returns the largest |difference|. */
static double decode_vs_full(al_model *m, const int *tok, const float *full, int P, int dtype,
                             double *amax)
{
    al_decoder d;
    al_err e;
    ck_assert_msg(al_decoder_init(&d, m, CTX, dtype, &e) == 0, "%s", e.msg);
    ck_assert_msg(al_decoder_prefill(&d, tok, P, &e) == 0, "%s", e.msg);
    double worst = max_abs_diff(d.logits, full + (P - 1) * VOCAB, VOCAB, amax);
    for (int t = P; t < CTX; t++) {
        const float *lg = al_decoder_step(&d, tok[t]);
        worst = fmax(worst, max_abs_diff(lg, full + t * VOCAB, VOCAB, amax));
    }
    ck_assert_int_eq(d.pos[0], CTX);
    al_decoder_free(&d);
    return worst;
}

static void check_parity(const al_variant *v, int opt)
{
    al_model m;
    make_model(&m, v, opt, 17);
    int tok[CTX];
    float full[CTX * VOCAB];
    random_tokens(tok, CTX, 5);
    full_logits(&m, tok, full);
    static const int prompts[] = {1, 2, 7, SEQ, CTX - 1};   /* the last past seq_len */
    for (int i = 0; i < 5; i++) {
        double amax = 0, diff = decode_vs_full(&m, tok, full, prompts[i], AL_KV_F32, &amax);
        ck_assert_msg(diff < 1e-4, "%s opt=%d prompt=%d: max |decode - forward| = %g", v->name,
                      opt, prompts[i], diff);
        ck_assert_msg(amax > 1.0, "%s: logits too small (%g) for the test to bite", v->name, amax);
    }
    al_model_free(&m);
}

START_TEST(every_variant_decodes_like_the_full_forward)
{
    ck_assert_int_ge(for_each_decodable(check_parity), 5);
}
END_TEST

/* Past one block of al_kv_attend (AL_KV_TILE rows) the decode reads the
 * cache block by block with an online softmax: compare with the full
 * forward over 2 * AL_KV_TILE + 3 positions, at every position from the
 * prefill on (the batched prefill covers seq_len, the rest is decoded). */
static void check_long_parity(const al_variant *v, int opt)
{
    enum { N = 2 * AL_KV_TILE + 3 };
    al_model m;
    make_model(&m, v, opt, 29);
    int *tok = malloc(N * sizeof(int));
    float *full = malloc((size_t)N * VOCAB * sizeof(float));
    random_tokens(tok, N, 8);
    al_err e;
    ck_assert_int_eq(al_model_reserve(&m, 1, N, &e), 0);
    al_model_forward(&m, tok, NULL, NULL, 1, N);
    memcpy(full, m.logits, (size_t)N * VOCAB * sizeof(float));
    al_decoder d;
    ck_assert_msg(al_decoder_init(&d, &m, N, AL_KV_F32, &e) == 0, "%s", e.msg);
    ck_assert_msg(al_decoder_prefill(&d, tok, SEQ, &e) == 0, "%s", e.msg);
    double amax = 0, worst = 0;
    for (int t = SEQ; t < N; t++)
        worst = fmax(worst, max_abs_diff(al_decoder_step(&d, tok[t]), full + (size_t)t * VOCAB,
                                         VOCAB, &amax));
    ck_assert_msg(worst < 1e-4, "%s opt=%d: max |decode - forward| over %d positions = %g",
                  v->name, opt, N, worst);
    ck_assert_msg(amax > 1.0, "%s: logits too small (%g) for the test to bite", v->name, amax);
    al_decoder_free(&d);
    al_model_free(&m);
    free(tok), free(full);
}

START_TEST(decode_matches_the_full_forward_across_cache_blocks)
{
    ck_assert_int_ge(for_each_decodable(check_long_parity), 5);
}
END_TEST

/* The cache row of position pos: local's ring (al_kv_ring_row), or row
 * pos. */
static int row_of(const al_model_config *c, int pos)
{
    if (strcmp(c->attn->name, "local") != 0) return pos;
    return al_kv_ring_row(pos, (int)c->attn_set[0], (int)c->attn_set[2]);
}

/* The comparison bites: a cache row overwritten after the prefill makes
 * the next logits differ from the full forward. The row is the one just
 * before the step, which every causal variant reads (a sliding window of
 * 2 included). */
static void check_sensitivity(const al_variant *v, int opt)
{
    al_model m;
    make_model(&m, v, opt, 19);
    int tok[CTX];
    float full[CTX * VOCAB];
    random_tokens(tok, CTX, 6);
    full_logits(&m, tok, full);
    al_decoder d;
    al_err e;
    ck_assert_int_eq(al_decoder_init(&d, &m, CTX, AL_KV_F32, &e), 0);
    ck_assert_int_eq(al_decoder_prefill(&d, tok, 5, &e), 0);
    float row[512];
    ck_assert_uint_le(al_kv_cache_elems(d.cache[0]), 512);
    if (v->decode->storage == AL_KV_STATE) {   /* a state: one row, perturbed */
        al_kv_row_get(d.cache[0], 0, row);
        for (size_t i = 0; i < al_kv_cache_elems(d.cache[0]); i++) row[i] = 2 * row[i] + 1;
        al_kv_row_put(d.cache[0], 0, row);
    } else {
        int r4 = row_of(&m.cfg, 4), r1 = r4 == 1 ? 0 : 1;
        al_kv_row_get(d.cache[0], r1, row);
        al_kv_row_put(d.cache[0], r4, row);   /* position 4 now holds another's row */
    }
    double diff = max_abs_diff(al_decoder_step(&d, tok[5]), full + 5 * VOCAB, VOCAB, NULL);
    ck_assert_msg(diff > 1e-3, "%s opt=%d: a corrupted cache went unnoticed (%g)", v->name,
                  opt, diff);
    al_decoder_free(&d);
    al_model_free(&m);
}

START_TEST(a_corrupted_cache_breaks_parity)
{
    ck_assert_int_ge(for_each_decodable(check_sensitivity), 5);
}
END_TEST

/* bf16 and f16 caches stay close to f32 (stated tolerance: 2 % of the
 * largest logit for bf16's 8-bit mantissa, 0.5 % for f16's 11 bits) and
 * do differ from it (the conversion really happens). */
static void check_dtypes(const al_variant *v, int opt)
{
    al_model m;
    make_model(&m, v, opt, 23);
    int tok[CTX];
    float full[CTX * VOCAB];
    random_tokens(tok, CTX, 7);
    full_logits(&m, tok, full);
    static const double tol[AL_KV_NDTYPES] = {1e-4, 0.02, 0.005};
    for (int dt = AL_KV_BF16; dt <= AL_KV_F16; dt++) {
        double amax = 0, diff = decode_vs_full(&m, tok, full, 2, dt, &amax);
        ck_assert_msg(diff < tol[dt] * amax, "%s opt=%d %s: max diff %g, largest logit %g",
                      v->name, opt, al_kv_dtype_name(dt), diff, amax);
        ck_assert_msg(diff > 1e-7, "%s %s: identical to f32?", v->name, al_kv_dtype_name(dt));
    }
    al_model_free(&m);
}

START_TEST(reduced_precision_caches_stay_within_tolerance)
{
    ck_assert_int_ge(for_each_decodable(check_dtypes), 5);
}
END_TEST

/* Cache elements per token per layer, written out from each variant's
 * definition (README): 2 G d_head for the GQA family, d_c + d_rope for
 * MLA, h_c d_c + d_rope for GLA. 0 for a variant this test does not know. */
static size_t elems_by_hand(const al_model_config *c)
{
    const char *n = c->attn->name;
    if (!strcmp(n, "mha")) return 2 * (size_t)c->n_head * c->d_head;
    if (!strcmp(n, "mqa")) return 2 * (size_t)c->d_head;
    if (!strcmp(n, "gqa")) return 2 * (size_t)c->attn_set[0] * c->d_head;
    if (!strcmp(n, "mla")) return (size_t)(c->attn_set[0] + c->attn_set[1]);
    if (!strcmp(n, "gta")) return (size_t)c->attn_set[0] * c->d_head + c->d_head / 2;
    if (!strcmp(n, "tpa"))   /* (R_K + R_V)(n_head + d_head): the K and V factors */
        return (size_t)(c->attn_set[1] + c->attn_set[2]) * (c->n_head + c->d_head);
    if (!strcmp(n, "gla")) return (size_t)(c->attn_set[2] * c->attn_set[0] + c->attn_set[1]);
    if (!strcmp(n, "swa")) return 2 * (size_t)c->n_head * c->d_head;   /* the example plugin */
    if (!strcmp(n, "local"))   /* gqa's row; n_kv_head 0 is n_head */
        return 2 * (size_t)(c->attn_set[1] ? c->attn_set[1] : c->n_head) * c->d_head;
    return 0;
}

/* Rows a layer's cache holds at `context` tokens, by hand: local keeps its
 * sinks and a ring of `window` rows (never more than the tokens), every
 * other variant one row per token. */
static size_t rows_by_hand(const al_model_config *c, int context)
{
    if (strcmp(c->attn->name, "local") != 0) return (size_t)context;
    int bound = (int)(c->attn_set[2] + c->attn_set[0]);   /* sinks + window */
    return (size_t)(context < bound ? context : bound);
}

static void check_bytes(const al_variant *v, int opt)
{
    al_model m;
    make_model(&m, v, opt, 29);
    size_t hand = elems_by_hand(&m.cfg);
    if (!hand) hand = v->decode->kv_elems(m.layers[0].ctx);   /* a plugin: at least the allocator is checked */
    int state = v->decode->storage == AL_KV_STATE;   /* one f32 row at any context */
    for (int dt = 0; dt < AL_KV_NDTYPES; dt++) {
        size_t live0 = al_kv_bytes_live();
        size_t want = hand * m.cfg.n_layer * al_kv_dtype_size(state ? AL_KV_F32 : dt);
        al_decoder d;
        al_err e;
        size_t rows = state ? 1 : rows_by_hand(&m.cfg, 37);
        ck_assert_int_eq(al_decoder_init(&d, &m, 37, dt, &e), 0);
        ck_assert_uint_eq(al_kv_bytes_live() - live0, rows * want);
        ck_assert_uint_eq(al_decoder_cache_bytes(&d), rows * want);
        ck_assert_uint_eq(al_model_kv_bytes_at(&m.cfg, dt, 37), rows * want);
        ck_assert_uint_eq(al_kv_bytes_per_token(&m.cfg, dt), state ? 0 : want);
        al_decoder_free(&d);
        ck_assert_uint_eq(al_kv_bytes_live(), live0);
    }
    al_model_free(&m);
}

START_TEST(measured_cache_bytes_equal_the_formula)
{
    ck_assert_int_ge(for_each_decodable(check_bytes), 5);
}
END_TEST

/* ---- threads and batches */

/* Logits (n - P, VOCAB) of decoding tok[P..n) after a prefill of P, with
 * `threads` threads, one sequence. */
static float *decode_run(al_model *m, const int *tok, int P, int n, int threads)
{
    al_parallel_set_threads(threads);
    al_decoder d;
    al_err e;
    ck_assert_msg(al_decoder_init(&d, m, n, AL_KV_F32, &e) == 0, "%s", e.msg);
    ck_assert_msg(al_decoder_prefill(&d, tok, P, &e) == 0, "%s", e.msg);
    float *out = malloc((size_t)(n - P) * VOCAB * sizeof(float));
    for (int t = P; t < n; t++)
        memcpy(out + (size_t)(t - P) * VOCAB, al_decoder_step(&d, tok[t]), VOCAB * sizeof(float));
    al_decoder_free(&d);
    al_parallel_set_threads(1);
    return out;
}

/* The context of a step is cut between threads once it spans more than
 * one block (AL_KV_TILE rows): 2 and 3 threads agree with 1 to 1e-5 of
 * the largest logit at every position up to 2.5 blocks, and a thread
 * count gives the same bits run after run. */
static void check_threads(const al_variant *v, int opt)
{
    enum { N = 2 * AL_KV_TILE + AL_KV_TILE / 2 };
    al_model m;
    make_model(&m, v, opt, 37);
    int *tok = malloc(N * sizeof(int));
    random_tokens(tok, N, 12);
    float *one = decode_run(&m, tok, SEQ, N, 1), *two = decode_run(&m, tok, SEQ, N, 2);
    float *three = decode_run(&m, tok, SEQ, N, 3), *again = decode_run(&m, tok, SEQ, N, 2);
    size_t n = (size_t)(N - SEQ) * VOCAB;
    double amax = 0, d2 = max_abs_diff(two, one, (int)n, &amax), d3 = max_abs_diff(three, one, (int)n, NULL);
    ck_assert_msg(d2 <= 1e-5 * amax && d3 <= 1e-5 * amax,
                  "%s opt=%d: threads change the logits by %g (2) and %g (3), largest %g",
                  v->name, opt, d2, d3, amax);
    ck_assert_msg(!memcmp(two, again, n * sizeof(float)), "%s: 2 threads not bit-identical",
                  v->name);
    free(one), free(two), free(three), free(again), free(tok);
    al_model_free(&m);
}

START_TEST(decode_across_threads_matches_one_thread_and_repeats_bit_for_bit)
{
    ck_assert_int_ge(for_each_decodable(check_threads), 5);
}
END_TEST

/* B sequences with prompts of different lengths (so different positions)
 * stepped together equal B decoders stepped alone, to 1e-5 of the largest
 * logit, at one and two threads. */
static void check_batch(const al_variant *v, int opt)
{
    enum { B = 5, STEPS = 6, N = SEQ + 2 + STEPS };
    al_model m;
    make_model(&m, v, opt, 41);
    int tok[B][N], plen[B] = {1, 3, SEQ, 2, SEQ + 2};
    for (int b = 0; b < B; b++) random_tokens(tok[b], N, 50 + b);
    for (int threads = 1; threads <= 2; threads++) {
        al_parallel_set_threads(threads);
        al_decoder bd, sd[B];
        al_err e;
        ck_assert_msg(al_decoder_init_batch(&bd, &m, B, N, AL_KV_F32, &e) == 0, "%s", e.msg);
        for (int b = 0; b < B; b++) {
            ck_assert_int_eq(al_decoder_init(&sd[b], &m, N, AL_KV_F32, &e), 0);
            ck_assert_int_eq(al_decoder_prefill_seq(&bd, b, tok[b], plen[b], &e), 0);
            ck_assert_int_eq(al_decoder_prefill(&sd[b], tok[b], plen[b], &e), 0);
        }
        double amax = 0, worst = 0;
        for (int s = 0; s < STEPS; s++) {
            int in[B];
            for (int b = 0; b < B; b++) in[b] = tok[b][plen[b] + s];
            const float *lb = al_decoder_step_batch(&bd, in);
            for (int b = 0; b < B; b++)
                worst = fmax(worst, max_abs_diff(lb + b * VOCAB, al_decoder_step(&sd[b], in[b]),
                                                 VOCAB, &amax));
        }
        for (int b = 0; b < B; b++) {
            ck_assert_int_eq(bd.pos[b], plen[b] + STEPS);
            al_decoder_free(&sd[b]);
        }
        ck_assert_msg(worst <= 1e-5 * amax, "%s opt=%d threads=%d: batch vs single %g (largest "
                      "logit %g)", v->name, opt, threads, worst, amax);
        ck_assert_msg(amax > 1.0, "%s: logits too small (%g)", v->name, amax);
        al_decoder_free(&bd);
    }
    al_parallel_set_threads(1);
    al_model_free(&m);
}

START_TEST(batched_decode_equals_single_decodes)
{
    ck_assert_int_ge(for_each_decodable(check_batch), 5);
}
END_TEST

/* A variant without decode_batch (a version-2 plugin, say) is decoded in
 * batches by the core, once per sequence; mha with its member removed
 * gives the batched result of the real thing, up to rounding. */
START_TEST(the_core_batches_a_variant_without_decode_batch)
{
    static al_variant plain;
    static al_variant_decode one_by_one;
    plain = *al_variant_find("mha");
    one_by_one = *plain.decode;
    one_by_one.decode_batch = NULL;
    one_by_one.batch_scratch_floats = NULL;
    plain.decode = &one_by_one;
    check_batch(&plain, -1);
}
END_TEST

/* ------------------------------------------------------------ MLA */

/* One MLA layer, random weights, d_latent 8, d_rope 4: absorbed decode,
 * naive decode and the training forward agree position by position. */
static void check_mla_absorbed(int dq, int dtype)
{
    const al_variant *v = al_variant_find("mla");
    ck_assert_ptr_nonnull(v);
    al_attn_shape s = {16, 4, 4, SEQ, 1, 10000.0f, 1e-5f, {8, 4, dq}, .rope = {.base = 0}};
    al_param_spec spec[AL_MAX_ATTN_PARAMS];
    void *ctx = al_test_ctx(v, &s);
    int np = v->train->params(ctx, spec), n = 20, D = 16;
    float *p[AL_MAX_ATTN_PARAMS];
    al_rng r;
    al_rng_seed(&r, 99);
    for (int i = 0; i < np; i++) {
        size_t k = (size_t)spec[i].rows * (spec[i].cols ? spec[i].cols : 1);
        p[i] = malloc(k * sizeof(float));
        for (size_t j = 0; j < k; j++)
            p[i][j] = (float)(spec[i].init == AL_INIT_ONES ? 1 + 0.1 * al_rng_normal(&r)
                                                           : 0.5 * al_rng_normal(&r));
    }
    float *x = malloc((size_t)n * D * sizeof(float)), *fwd = malloc((size_t)n * D * sizeof(float));
    for (int j = 0; j < n * D; j++) x[j] = (float)al_rng_normal(&r);
    float *act = calloc(v->train->act_floats(ctx, 1, n), sizeof(float));
    float *fs = calloc(v->train->scratch_floats(ctx, 1, n), sizeof(float));
    v->train->forward(ctx, fwd, act, fs, x, p, 1, n);
    al_kv_cache *ca = al_kv_cache_new(v->decode->kv_elems(ctx), n, dtype);
    al_kv_cache *cb = al_kv_cache_new(v->decode->kv_elems(ctx), n, dtype);
    float *sa = calloc(v->decode->scratch_floats(ctx, n), sizeof(float));
    float *sb = calloc(al_test_latent_scratch(&s, (al_test_latent){8, 4, 1, dq}, n), sizeof(float));
    float oa[16], ob[16];
    double worst = 0, worst_fwd = 0, amax = 0;
    for (int t = 0; t < n; t++) {
        v->decode->decode(ctx, oa, sa, x + t * D, p, ca, t);
        al_test_latent_decode(&s, (al_test_latent){8, 4, 1, dq}, ob, sb, x + t * D, p, cb, t);
        worst = fmax(worst, max_abs_diff(oa, ob, D, &amax));
        worst_fwd = fmax(worst_fwd, max_abs_diff(ob, fwd + t * D, D, NULL));
    }
    ck_assert_msg(worst < 1e-4, "dq=%d %s: absorbed vs naive %g", dq, al_kv_dtype_name(dtype),
                  worst);
    ck_assert_msg(amax > 1.0, "outputs too small (%g)", amax);
    if (dtype == AL_KV_F32) ck_assert_msg(worst_fwd < 1e-4, "naive vs forward %g", worst_fwd);
    for (int i = 0; i < np; i++) free(p[i]);
    free(x), free(fwd), free(act), free(fs), free(sa), free(sb);
    al_kv_cache_free(ca), al_kv_cache_free(cb);
    v->fini(ctx);
}

START_TEST(mla_absorbed_decode_equals_naive_decode)
{
    for (int dt = 0; dt < AL_KV_NDTYPES; dt++) {
        check_mla_absorbed(0, dt);
        check_mla_absorbed(6, dt);
    }
}
END_TEST

/* ------------------------------------------------------------ sampling */

START_TEST(greedy_and_top1_sampling_take_the_argmax)
{
    float lg[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f, 0.0f}, work[6];
    al_rng r;
    al_rng_seed(&r, 1);
    ck_assert_int_eq(al_sample(lg, 6, 0.0, 0, &r, work), 1);   /* first of the tied maxima */
    for (int i = 0; i < 200; i++) ck_assert_int_eq(al_sample(lg, 6, 5.0, 1, &r, work), 1);
}
END_TEST

/* Draw frequencies against softmax(logits / T) over the kept tokens. */
static void check_frequencies(double temp, int top_k)
{
    enum { V = 5, N = 40000 };
    float lg[V] = {0.0f, 1.0f, 2.0f, -1.0f, 1.5f}, work[V];
    double p[V], sum = 0;
    int count[V] = {0}, order[V] = {2, 4, 1, 0, 3};   /* by logit, largest first */
    for (int i = 0; i < V; i++) p[i] = 0;
    for (int i = 0; i < (top_k ? top_k : V); i++) sum += p[order[i]] = exp(lg[order[i]] / temp);
    al_rng r;
    al_rng_seed(&r, 42);
    for (int n = 0; n < N; n++) count[al_sample(lg, V, temp, top_k, &r, work)]++;
    for (int i = 0; i < V; i++)
        ck_assert_msg(fabs((double)count[i] / N - p[i] / sum) < 0.01,
                      "T=%g k=%d token %d: %g vs %g", temp, top_k, i, (double)count[i] / N,
                      p[i] / sum);
}

START_TEST(sampling_follows_the_tempered_softmax_over_the_top_k)
{
    check_frequencies(1.0, 0);
    check_frequencies(0.5, 0);
    check_frequencies(2.0, 2);
    check_frequencies(1.0, 3);
}
END_TEST

START_TEST(decoder_refuses_what_cannot_generate)
{
    al_model m;
    al_model_config c;
    al_decoder d;
    al_err e;
    ck_assert_int_eq(al_test_tiny_config(&c, al_variant_find("mha"), 1, 16, 4, 4, 8, 11), 0);
    c.causal = 0;
    ck_assert_int_eq(al_model_init(&m, &c, &e), 0);
    ck_assert_int_eq(al_decoder_init(&d, &m, 8, AL_KV_F32, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "causal"));
    al_model_free(&m);
    al_variant blind = *al_variant_find("mha");   /* a variant without decode hooks */
    al_variant_decode no_hooks = *blind.decode;
    no_hooks.prefill = NULL, no_hooks.decode = NULL, no_hooks.scratch_floats = NULL;
    blind.decode = &no_hooks;
    c.causal = 1;
    c.attn = &blind;
    ck_assert_int_eq(al_model_init(&m, &c, &e), 0);
    ck_assert_int_eq(al_decoder_init(&d, &m, 8, AL_KV_F32, &e), -1);
    ck_assert_ptr_nonnull(strstr(e.msg, "no decode hooks"));
    al_model_free(&m);
}
END_TEST

/* Decode steps allocate nothing: the heap in use is the same before and
 * after (glibc's count; sanitizer builds keep their own and report 0). */
START_TEST(decode_steps_do_not_allocate)
{
    al_model m;
    make_model(&m, al_variant_find("mla"), -1, 31);
    al_decoder d;
    al_err e;
    int tok[CTX];
    random_tokens(tok, CTX, 2);
    ck_assert_int_eq(al_decoder_init(&d, &m, CTX, AL_KV_BF16, &e), 0);
    ck_assert_int_eq(al_decoder_prefill(&d, tok, 2, &e), 0);
    al_decoder_step(&d, tok[2]);   /* first BLAS call on this thread may set up buffers */
    struct mallinfo2 before = mallinfo2();
    for (int t = 3; t < CTX; t++) al_decoder_step(&d, tok[t]);
    struct mallinfo2 after = mallinfo2();
    ck_assert_uint_eq(after.uordblks, before.uordblks);
    ck_assert_uint_eq(after.hblkhd, before.hblkhd);
    al_decoder_free(&d);
    /* two threads with the context split: the first step grows the pool's
     * scratch and the partials, later steps allocate nothing */
    al_parallel_set_threads(2);
    ck_assert_int_eq(al_decoder_init(&d, &m, 3 * AL_KV_TILE, AL_KV_BF16, &e), 0);
    al_decoder_fill_random(&d, 2 * AL_KV_TILE, 3);
    al_decoder_step(&d, tok[0]);
    before = mallinfo2();
    for (int t = 1; t < CTX; t++) al_decoder_step(&d, tok[t]);
    after = mallinfo2();
    ck_assert_uint_eq(after.uordblks, before.uordblks);
    ck_assert_uint_eq(after.hblkhd, before.hblkhd);
    al_decoder_free(&d);
    al_parallel_set_threads(1);
    al_model_free(&m);
}
END_TEST

Suite *decode_suite(void)
{
    Suite *s = suite_create("decode");
    TCase *tc = tcase_create("decode");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, every_variant_decodes_like_the_full_forward);
    tcase_add_test(tc, decode_matches_the_full_forward_across_cache_blocks);
    tcase_add_test(tc, a_corrupted_cache_breaks_parity);
    tcase_add_test(tc, reduced_precision_caches_stay_within_tolerance);
    tcase_add_test(tc, measured_cache_bytes_equal_the_formula);
    tcase_add_test(tc, mla_absorbed_decode_equals_naive_decode);
    tcase_add_test(tc, greedy_and_top1_sampling_take_the_argmax);
    tcase_add_test(tc, sampling_follows_the_tempered_softmax_over_the_top_k);
    tcase_add_test(tc, decoder_refuses_what_cannot_generate);
    tcase_add_test(tc, decode_steps_do_not_allocate);
    tcase_add_test(tc, decode_across_threads_matches_one_thread_and_repeats_bit_for_bit);
    tcase_add_test(tc, batched_decode_equals_single_decodes);
    tcase_add_test(tc, the_core_batches_a_variant_without_decode_batch);
    suite_add_tcase(s, tc);
    return s;
}
