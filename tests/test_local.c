/*
 * test_local.c - the `local` variant (variants/local.c): sliding-window
 * attention with sinks and a bounded cache. The forward pass against a
 * banded attention written out here from the saved q, k, v; gradients
 * against finite differences with sinks and a window shorter than the
 * sequence; the band as a property (keys outside it do not matter, sinks
 * do); cached decode against the full forward beyond the window and beyond
 * one cache tile, with sinks, in f32, bf16 and f16; batched decode against
 * single decodes; measured cache bytes against the ring's formula at
 * several contexts; interface version 3 tables (no kv_rows) still register
 * and keep one row per token. (The generic loops of test_variants.c,
 * test_decode.c and test_torch.c run local too; test_plugin.c trains the
 * version-3 swa plugin.)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_decode.h"
#include "al_kvcache.h"
#include "al_parallel.h"
#include "al_registry.h"
#include "attnlab_variant_v4.h"
#include "al_test.h"
#include "al_test_model.h"

enum { SET_WINDOW, SET_N_KV_HEAD, SET_SINKS };
enum { D = 16, H = 4, DH = 4, NB = 2, NT = 12 };

/* ------------------------------------------------------------ one layer */

/* check-variant's layer harness (al_check_variant.h): random weights and
 * inputs from a seed, loss sum(out * R). */
typedef al_check_layer layer;

static void layer_init(layer *l, int window, int G, int sinks, int causal)
{
    const al_variant *v = al_variant_find("local");
    ck_assert_ptr_nonnull(v);
    al_attn_shape s = {D, H, DH, NT, causal, 10000.0f, 1e-5f, {window, G, sinks}, .rope = {.base = 0}};
    char err[256];
    ck_assert_msg(al_variant_check(v, &s, err, sizeof err) == 0, "%s", err);
    al_check_layer_init(l, v, &s, NB, NT, 7);
}

static double layer_loss(layer *l) { return al_check_layer_loss(l); }

/* K/V groups of the layer (n_kv_head, 0 for n_head). */
static int groups(const layer *l)
{
    int G = (int)l->s.set[SET_N_KV_HEAD];
    return G ? G : H;
}

/* Whether query i sees key j, from the definition. */
static int visible(const layer *l, int i, int j)
{
    int w = (int)l->s.set[SET_WINDOW], k = (int)l->s.set[SET_SINKS];
    if (l->s.causal) return j <= i && (j < k || j > i - w);
    return j < k || abs(i - j) < w;
}

/* The layer's y (pre-wo) against softmax over the visible keys of the
 * saved q, k, v, in double: the band, independently of the kernel. */
static double band_err(const layer *l)
{
    size_t BT = (size_t)NB * NT, Hd = H * DH, Gd = (size_t)groups(l) * DH;
    const float *q = l->act, *k = q + BT * Hd, *v = k + BT * Gd, *y = v + BT * Gd;
    double worst = 0, sc = 1.0 / sqrt(DH);
    for (int b = 0; b < NB; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < NT; i++) {
                int g = h / (H / groups(l));
                double w[NT], mx = -INFINITY, sum = 0;
                for (int j = 0; j < NT; j++) {
                    double dot = 0;
                    for (int c = 0; c < DH; c++)
                        dot += (double)q[(b * NT + i) * Hd + h * DH + c] *
                               k[(b * NT + j) * Gd + g * DH + c];
                    w[j] = visible(l, i, j) ? dot * sc : -INFINITY;
                    mx = fmax(mx, w[j]);
                }
                for (int j = 0; j < NT; j++) sum += (w[j] = exp(w[j] - mx));
                for (int c = 0; c < DH; c++) {
                    double ref = 0;
                    for (int j = 0; j < NT; j++)
                        ref += w[j] / sum * v[(b * NT + j) * Gd + g * DH + c];
                    worst = fmax(worst, fabs(ref - y[(b * NT + i) * Hd + h * DH + c]));
                }
            }
    return worst;
}

START_TEST(local_forward_equals_a_banded_attention_written_out)
{
    static const int cases[][4] = {   /* window, n_kv_head, sinks, causal */
        {3, 0, 0, 1}, {3, 2, 2, 1}, {1, 1, 0, 1}, {5, 4, 3, 1}, {NT, 2, 0, 1},
        {3, 2, 2, 0}, {2, 0, 0, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        layer l;
        layer_init(&l, cases[c][0], cases[c][1], cases[c][2], cases[c][3]);
        layer_loss(&l);
        double err = band_err(&l);
        ck_assert_msg(err < 1e-5, "case %zu: |y - banded reference| = %g", c, err);
        al_check_layer_free(&l);
    }
}
END_TEST

static double loss_of(void *l) { return al_check_layer_loss(l); }

static double fd_err(layer *l, float *param, const float *grad, size_t n, al_rng *r)
{
    return al_check_fd_err(loss_of, l, param, grad, n, 32, r);
}

START_TEST(local_gradients_match_finite_differences_with_sinks_and_a_short_window)
{
    static const int cases[][4] = {{3, 2, 2, 1}, {4, 0, 1, 1}, {2, 1, 3, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        layer l;
        layer_init(&l, cases[c][0], cases[c][1], cases[c][2], cases[c][3]);
        layer_loss(&l);
        al_check_layer_backward(&l, l.R);
        al_rng r;
        al_rng_seed(&r, 3);
        for (int i = 0; i < l.np; i++) {
            double err = fd_err(&l, l.p[i], l.dp[i],
                                (size_t)l.spec[i].rows * l.spec[i].cols, &r);
            ck_assert_msg(err < 1e-2, "case %zu: d%s rel err %g", c, l.spec[i].name, err);
        }
        double err = fd_err(&l, l.x, l.dx, (size_t)NB * NT * D, &r);
        ck_assert_msg(err < 1e-2, "case %zu: dx rel err %g", c, err);
        al_check_layer_free(&l);
    }
}
END_TEST

/* Output row t of sequence 0 after adding 1 to input position j. */
static double change_at(layer *l, int t, int j)
{
    layer_loss(l);
    float before[D];
    memcpy(before, l->out + (size_t)t * D, sizeof before);
    for (int c = 0; c < D; c++) l->x[(size_t)j * D + c] += 1.0f;
    layer_loss(l);
    for (int c = 0; c < D; c++) l->x[(size_t)j * D + c] -= 1.0f;
    double d = 0;
    for (int c = 0; c < D; c++) d = fmax(d, fabs(before[c] - l->out[(size_t)t * D + c]));
    return d;
}

/* Query 10 with window 3 and 2 sinks sees 0, 1 and 8, 9, 10: a change
 * anywhere else leaves its output bit for bit. */
START_TEST(local_outputs_depend_on_the_window_and_the_sinks_only)
{
    layer l;
    layer_init(&l, 3, 2, 2, 1);
    for (int j = 0; j < NT; j++) {
        double d = change_at(&l, 10, j);
        int sees = visible(&l, 10, j);
        ck_assert_msg(sees ? d > 1e-3 : d == 0.0, "position %d %s query 10 (change %g)", j,
                      sees ? "should reach" : "reached", d);
    }
    al_check_layer_free(&l);
}
END_TEST

START_TEST(local_check_refuses_bad_settings_naming_them)
{
    const al_variant *v = al_variant_find("local");
    al_attn_shape s = {D, 8, DH, NT, 1, 10000.0f, 1e-5f, {0, 0, 0}, .rope = {.base = 0}};
    char err[256];
    ck_assert_int_ne(al_variant_check(v, &s, err, sizeof err), 0);
    ck_assert_str_eq(err, "'window' (0) must be at least 1");
    s.set[SET_WINDOW] = 4, s.set[SET_N_KV_HEAD] = 3;
    ck_assert_int_ne(al_variant_check(v, &s, err, sizeof err), 0);
    ck_assert_str_eq(err, "'n_kv_head' (3) must divide 'n_head' (8), or be 0 for n_head");
    s.set[SET_N_KV_HEAD] = 2, s.set[SET_SINKS] = -1;
    ck_assert_int_ne(al_variant_check(v, &s, err, sizeof err), 0);
    ck_assert_str_eq(err, "'sinks' (-1) must be at least 0");
    s.set[SET_SINKS] = 0;
    ck_assert_int_eq(al_variant_check(v, &s, err, sizeof err), 0);
}
END_TEST

/* ------------------------------------------------------------ decode */

enum { SEQ = 16, VOCAB = 13 };

/* A 2-layer model of local with the given settings, matrices scaled up
 * (as test_decode.c does) so that a wrong row shows at 1e-4. */
static void make_model(al_model *m, int window, int G, int sinks)
{
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, al_variant_find("local"), 2, D, H, DH, SEQ,
                                         VOCAB), 0);
    c.attn_set[SET_WINDOW] = window, c.attn_set[SET_N_KV_HEAD] = G;
    c.attn_set[SET_SINKS] = sinks;
    al_err e;
    ck_assert_msg(al_model_init(m, &c, &e) == 0, "%s", e.msg);
    al_model_init_weights(m, 31);
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].ndim == 2)
            for (size_t j = 0; j < m->tensors[i].numel; j++)
                m->params[m->tensors[i].offset + j] *= 20.0f;
}

static int *tokens(int n, uint64_t seed)
{
    int *t = malloc((size_t)n * sizeof(int));
    al_rng r;
    al_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) t[i] = (int)al_rng_below(&r, VOCAB);
    return t;
}

/* Windows of 5 (the ring wraps within the trained seq_len) and 300 (more
 * than one AL_KV_TILE of rows in the ring, cut between 2 threads for two
 * of the prompts), with and without sinks, over 2 tiles and more: every
 * position from the prompt on equals the full
 * forward to 1e-4 in f32; bf16 and f16 within 2 % and 0.5 % of the
 * largest logit, as test_decode.c states them. */
START_TEST(local_decode_equals_the_full_forward_beyond_the_window_and_a_tile)
{
    enum { N = 2 * AL_KV_TILE + 100 };
    static const int cases[][3] = {{5, 0, 0}, {5, 2, 3}, {300, 1, 4}, {300, 0, 0}};
    static const int prompts[] = {1, 7, SEQ, SEQ + 5};
    int *tok = tokens(N, 9);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        al_model m;
        make_model(&m, cases[c][0], cases[c][1], cases[c][2]);
        al_err e;
        float *full = al_check_full_logits(&m, tok, N, &e);
        ck_assert_msg(full != NULL, "%s", e.msg);
        for (int p = 0; p < 4; p++) {   /* prompts 1 and SEQ at 2 threads: rows split */
            al_parallel_set_threads(p % 2 ? 1 : 2);
            double amax = 0;
            double diff = al_check_decode_vs_full(&m, tok, full, prompts[p], N, AL_KV_F32, &amax);
            al_parallel_set_threads(1);
            ck_assert_msg(diff < 1e-4, "window %d sinks %d prompt %d: |decode - full| = %g",
                          cases[c][0], cases[c][2], prompts[p], diff);
            ck_assert_msg(amax > 1.0, "logits too small (%g) for the test to bite", amax);
        }
        static const double tol[AL_KV_NDTYPES] = {0, 0.02, 0.005};
        for (int dt = AL_KV_BF16; dt < AL_KV_NDTYPES; dt++) {
            double amax = 0, diff = al_check_decode_vs_full(&m, tok, full, SEQ, N, dt, &amax);
            ck_assert_msg(diff <= tol[dt] * amax && diff > 0, "window %d %s: %g of %g",
                          cases[c][0], al_kv_dtype_name(dt), diff, amax);
        }
        free(full);
        al_model_free(&m);
    }
    free(tok);
}
END_TEST

/* Three sequences at different positions, stepped together past their
 * rings, equal each stepped alone, to 1e-5 of the largest logit, at one
 * and two threads. */
START_TEST(local_batched_decode_equals_single_decodes)
{
    enum { B = 3, STEPS = 14, N = SEQ + STEPS };
    al_model m;
    make_model(&m, 5, 2, 2);
    int plen[B] = {1, 7, SEQ}, *tok[B];
    for (int b = 0; b < B; b++) tok[b] = tokens(N, 60 + b);
    for (int threads = 1; threads <= 2; threads++) {
        al_parallel_set_threads(threads);
        al_decoder bd, sd[B];
        al_err e;
        ck_assert_int_eq(al_decoder_init_batch(&bd, &m, B, N, AL_KV_F32, &e), 0);
        for (int b = 0; b < B; b++) {
            ck_assert_int_eq(al_decoder_init(&sd[b], &m, N, AL_KV_F32, &e), 0);
            ck_assert_int_eq(al_decoder_prefill_seq(&bd, b, tok[b], plen[b], &e), 0);
            ck_assert_int_eq(al_decoder_prefill(&sd[b], tok[b], plen[b], &e), 0);
        }
        double worst = 0, amax = 0;
        for (int s = 0; s < STEPS; s++) {
            int in[B];
            for (int b = 0; b < B; b++) in[b] = tok[b][plen[b] + s];
            const float *lb = al_decoder_step_batch(&bd, in);
            for (int b = 0; b < B; b++) {
                const float *ls = al_decoder_step(&sd[b], in[b]);
                for (int i = 0; i < VOCAB; i++) {
                    worst = fmax(worst, fabs(lb[b * VOCAB + i] - ls[i]));
                    amax = fmax(amax, fabs(ls[i]));
                }
            }
        }
        ck_assert_msg(worst <= 1e-5 * amax && amax > 1.0, "threads %d: %g of %g", threads,
                      worst, amax);
        for (int b = 0; b < B; b++) al_decoder_free(&sd[b]);
        al_decoder_free(&bd);
    }
    al_parallel_set_threads(1);
    for (int b = 0; b < B; b++) free(tok[b]);
    al_model_free(&m);
}
END_TEST

/* window 5, 3 sinks, 2 K/V heads of 4, 2 layers: a row is 2 * 2 * 4 = 16
 * floats, and a layer holds min(context, 3 + 5) rows: sinks + min(window,
 * context - sinks), never more rows than tokens. Measured by the allocator
 * at each context, for every dtype; the cache stops growing at 8 rows. */
START_TEST(local_measured_cache_bytes_equal_the_ring_formula)
{
    al_model m;
    make_model(&m, 5, 2, 3);
    static const int contexts[] = {1, 2, 3, 5, 8, 9, 37, 1000};
    for (size_t i = 0; i < sizeof contexts / sizeof *contexts; i++)
        for (int dt = 0; dt < AL_KV_NDTYPES; dt++) {
            int ctx = contexts[i];
            size_t rows = ctx < 3 ? (size_t)ctx : 3 + (size_t)(ctx - 3 < 5 ? ctx - 3 : 5);
            size_t want = 2 * rows * 16 * al_kv_dtype_size(dt), live0 = al_kv_bytes_live();
            al_decoder d;
            al_err e;
            ck_assert_int_eq(al_decoder_init(&d, &m, ctx, dt, &e), 0);
            ck_assert_uint_eq(al_kv_bytes_live() - live0, want);
            ck_assert_uint_eq(al_decoder_cache_bytes(&d), want);
            ck_assert_uint_eq(al_model_kv_bytes_at(&m.cfg, dt, ctx), want);
            ck_assert_uint_eq(al_model_layer_kv_bytes(&m.cfg, 1, dt, ctx), want / 2);
            ck_assert_uint_eq(al_kv_bytes_per_token(&m.cfg, dt), 2 * 16 * al_kv_dtype_size(dt));
            al_decoder_free(&d);
        }
    al_model_free(&m);
}
END_TEST

/* A table of version 3 ends before kv_rows: it registers (a whole-size
 * copy, nothing read past its end, as ASan would see) with the default
 * kv_rows, and its caches keep one row per token. */
START_TEST(version_3_tables_register_without_kv_rows_and_keep_a_row_per_token)
{
    al_err e;
    int before = al_variant_count();
    size_t size = al_variant_ops_size(3);
    ck_assert_uint_lt(size, al_variant_ops_size(4));
    ck_assert_uint_eq(al_variant_ops_size(4), sizeof(al_variant_ops));
    void *old = al_test_old_table(3, "local_v3");
    ck_assert_int_eq(al_variant_register(old, "v3.so", &e), 0);
    const al_variant *got = al_variant_find("local_v3");
    ck_assert_ptr_nonnull(got);
    ck_assert_ptr_nonnull(got->decode->decode_batch);   /* a version-3 member, kept */
    al_attn_shape s = {D, H, DH, NT, 1, 10000.0f, 1e-5f, {5, 0, 3}, .rope = {.base = 0}};
    ck_assert_int_eq(al_attn_kv_rows(got, al_test_ctx_of(got, &s), 40), 40);
    const al_variant *local = al_variant_find("local"), *mha = al_variant_find("mha");
    ck_assert_int_eq(al_attn_kv_rows(local, al_test_ctx_of(local, &s), 40), 8);
    ck_assert_int_eq(al_attn_kv_rows(mha, al_test_ctx_of(mha, &s), 40), 40);
    al_variant_truncate(before);
    free(old);
}
END_TEST

/* `attnlab kv --context N`: 4 layers of local (window 64, 4 sinks, 2 K/V
 * heads of 32): a row is 2 * 2 * 32 floats = 512 bytes in f32, a layer
 * holds min(N, 68) rows. By hand: N = 10 -> 10 rows, 5120 bytes a layer,
 * 20480 in all; N = 1000 and the default (seq_len 256) -> 68 rows, 34816
 * a layer, 139264 in all, beside 2048 bytes per token. */
START_TEST(kv_prints_the_cache_at_a_context_per_layer_and_summed)
{
    char *dir = al_test_tmpdir();
    char *cfg = al_test_write(dir, "local.yaml",
                              "data: {path: /nonexistent}\n"
                              "model:\n  n_layer: 4\n  d_model: 128\n  n_head: 4\n  d_head: 32\n"
                              "  seq_len: 256\n"
                              "  attention: {variant: local, window: 64, n_kv_head: 2, "
                              "sinks: 4}\n");
    static const struct {
        const char *flag, *layer, *sum;
    } cases[] = {
        {"--context 10", "rows=10 f32=5120 bf16=2560 f16=2560", "_10: f32=20480 bf16=10240"},
        {"--context 1000", "rows=68 f32=34816 bf16=17408", "_1000: f32=139264 bf16=69632"},
        {"", "rows=68 f32=34816 bf16=17408", "_256: f32=139264 bf16=69632"},
    };
    for (int i = 0; i < 3; i++) {
        char args[4200], *out, want[128];
        snprintf(args, sizeof args, "kv %s %s", cfg, cases[i].flag);
        ck_assert_int_eq(al_test_attnlab(args, &out), 0);
        ck_assert_msg(strstr(out, "kv_bytes_per_token: f32=2048 bf16=1024 f16=1024"), "%s", out);
        for (int l = 0; l < 4; l++) {
            snprintf(want, sizeof want, "kv_layer_%d: variant=local-window64-kv2-sinks4 %s", l,
                     cases[i].layer);
            ck_assert_msg(strstr(out, want), "%s: no '%s' in\n%s", args, want, out);
        }
        snprintf(want, sizeof want, "kv_bytes_at_context%s", cases[i].sum);
        ck_assert_msg(strstr(out, want), "%s: no '%s' in\n%s", args, want, out);
        free(out);
    }
    /* bad input: one line naming the key, exit 2 */
    static const struct {
        const char *set, *want;
    } bad[] = {
        {"'model.attention={variant: local}'", "'model.attention.window' is required"},
        {"'model.attention={variant: local, window: 0}'", "'window' (0) must be at least 1"},
        {"'model.attention={variant: local, window: 4, sinks: -2}'", "'sinks' (-2) must be"},
        {"report.context=-1", "report.context"},
    };
    for (int i = 0; i < 4; i++) {
        char args[4200], *out;
        snprintf(args, sizeof args, "kv %s --set %s", cfg, bad[i].set);
        ck_assert_int_eq(al_test_attnlab(args, &out), 2);
        ck_assert_msg(strstr(out, bad[i].want) && strchr(out, '\n') == out + strlen(out) - 1,
                      "%s: %s", args, out);
        free(out);
    }
    free(cfg), free(dir);
}
END_TEST

/* `generate --stats` at a context of 4096 measures the bounded cache: the
 * allocator's bytes equal the ring's, 2 layers x 8 rows x 16 floats. */
START_TEST(generate_stats_measure_the_bounded_cache_at_4096)
{
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, al_variant_find("local"), 2, D, H, DH, SEQ, 256),
                     0);
    c.attn_set[SET_WINDOW] = 5, c.attn_set[SET_N_KV_HEAD] = 2, c.attn_set[SET_SINKS] = 3;
    al_model m;
    al_err e;
    ck_assert_int_eq(al_model_init(&m, &c, &e), 0);
    al_model_init_weights(&m, 5);
    char *out, *err;
    size_t no, ne;
    FILE *fo = open_memstream(&out, &no), *fe = open_memstream(&err, &ne);
    al_generate_opts o = {.prompt = (const unsigned char *)"abc", .prompt_len = 3,
                          .tokens = 20, .seed = 1, .context = 4096, .dtype = -1, .stats = 1};
    al_generate_stats st;
    ck_assert_msg(al_generate(&m, &o, fo, fe, &st, &e) == 0, "%s", e.msg);
    fclose(fo), fclose(fe);
    ck_assert_uint_eq(st.cache_bytes, 2 * 8 * 16 * 4);
    ck_assert_uint_eq(st.cache_bytes, al_model_kv_bytes_at(&m.cfg, AL_KV_F32, 4096));
    ck_assert_uint_eq(st.kv_bytes_per_token, 2 * 16 * 4);
    ck_assert_msg(strstr(err, "kv_cache_bytes=1024 kv_bytes_per_token=128"), "%s", err);
    free(out), free(err);
    al_model_free(&m);
}
END_TEST

/* The cell of column `col` in the summary row starting with `trial,`. */
static void summary_cell(const char *csv, const char *trial, const char *col, char *out,
                         size_t n)
{
    const char *nl = strchr(csv, '\n');
    int want = -1, i = 0;
    for (const char *p = csv; p < nl; i++) {
        size_t len = strcspn(p, ",\n");
        if (len == strlen(col) && !strncmp(p, col, len)) want = i;
        p += len + 1;
    }
    ck_assert_int_ge(want, 0);
    char key[128];
    snprintf(key, sizeof key, "\n%s,", trial);
    const char *p = strstr(csv, key);
    ck_assert_msg(p, "no row %s", trial);
    for (p++, i = 0; i < want; i++) p += strcspn(p, ",") + 1;
    snprintf(out, n, "%.*s", (int)strcspn(p, ",\n"), p);
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char *buf = calloc(1 << 20, 1);
    fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    return buf;
}

/* A sweep of mha and local (window 4, 2 sinks), 2 layers of 2 heads of 8:
 * 128 bytes a layer a token. At report.context's default (seq_len 16)
 * mha's cache is 16 x 256 = 4096 bytes and local's 2 x 6 rows x 128 =
 * 1536; report.context 1000 on the finished sweep retrains nothing (the
 * trials keep their ids) and re-reports: mha 256000, local still 1536. */
START_TEST(report_context_re_reports_without_changing_a_trial)
{
    char *dir = al_test_tmpdir(), text[4096], args[8192], *out;
    for (int i = 0; i < 4000; i++) text[i] = "the cat sat on the mat. "[i % 24];
    text[4000] = 0;
    char *data = al_test_write(dir, "data.txt", text);
    snprintf(text, sizeof text,
             "data: {source: text, path: %s}\n"
             "model: {n_layer: 2, d_model: 16, n_head: 2, seq_len: 16}\n"
             "train: {steps: 4, eval_every: 2, batch_size: 4, eval_batches: 2, threads: 1,\n"
             "        warmup_steps: 2}\n"
             "sweep:\n  grid:\n    model.attention: [{variant: mha}, "
             "{variant: local, window: 4, sinks: 2}]\n", data);
    char *exp = al_test_write(dir, "exp.yaml", text);
    static const struct {
        const char *set, *ctx, *mha, *local, *cell, *done;
    } runs[] = {
        {"", "16", "4096", "1536", "| 1,536 (16) |", "2 ok, 0 diverged, 0 failed, 0 kept"},
        {"--set report.context=1000", "1000", "256000", "1536", "| 256,000 (1,000) |",
         "0 ok, 0 diverged, 0 failed, 2 kept from before"},
    };
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "sweep %s --out %s/r %s", exp, dir, runs[k].set);
        ck_assert_int_eq(al_test_attnlab(args, &out), 0);
        ck_assert_msg(strstr(out, runs[k].done), "%s", out);
        free(out);
        snprintf(args, sizeof args, "%s/r/summary.csv", dir);
        char *csv = read_all(args), cell[64];
        summary_cell(csv, "mha_seed1", "kv_context", cell, sizeof cell);
        ck_assert_str_eq(cell, runs[k].ctx);
        summary_cell(csv, "mha_seed1", "kv_bytes_at_context", cell, sizeof cell);
        ck_assert_str_eq(cell, runs[k].mha);
        summary_cell(csv, "local-window4-sinks2_seed1", "kv_bytes_at_context", cell,
                     sizeof cell);
        ck_assert_str_eq(cell, runs[k].local);
        free(csv);
        snprintf(args, sizeof args, "%s/r/report.md", dir);
        char *md = read_all(args);
        ck_assert_msg(strstr(md, runs[k].cell), "no '%s' in\n%s", runs[k].cell, md);
        free(md);
    }
    free(exp), free(data), free(dir);
}
END_TEST

/* report.* is not part of what a run computes: a run stopped, then resumed
 * with another report.context, resumes (its saved state's config leaves
 * report.* out, as a state saved before report.context existed did). */
START_TEST(a_run_resumes_under_another_report_context)
{
    char *dir = al_test_tmpdir(), text[4096], args[8192], *out;
    for (int i = 0; i < 3000; i++) text[i] = "a local window. "[i % 16];
    text[3000] = 0;
    char *data = al_test_write(dir, "data.txt", text);
    snprintf(text, sizeof text,
             "data: {source: text, path: %s}\n"
             "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16,\n"
             "        attention: {variant: local, window: 3, sinks: 1}}\n"
             "train: {steps: 8, batch_size: 2, eval_every: 4, eval_batches: 1, threads: 1,\n"
             "        warmup_steps: 2}\n", data);
    char *cfg = al_test_write(dir, "c.yaml", text);
    snprintf(args, sizeof args, "train %s --out %s/run --stop-after 3", cfg, dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    ck_assert_msg(strstr(out, "status=stopped steps=3"), "%s", out);
    free(out);
    snprintf(args, sizeof args, "train --resume %s/run --set report.context=500", dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    ck_assert_msg(strstr(out, "val_loss="), "%s", out);
    free(out);
    free(cfg), free(data), free(dir);
}
END_TEST

/* A variant (a plugin's, say) whose kv_rows answers more rows than tokens
 * is refused by the decoder with one line naming it, not a crash. */
static int too_many_rows(const void *ctx, int context)
{
    (void)ctx;
    return context + 1;
}

START_TEST(decoder_refuses_a_kv_rows_answer_outside_the_context)
{
    static al_variant bad;
    static al_variant_decode bad_decode;
    bad = *al_variant_find("local");
    bad_decode = *bad.decode;
    bad_decode.kv_rows = too_many_rows;
    bad.decode = &bad_decode;
    al_model m;
    make_model(&m, 5, 0, 0);
    m.cfg.attn = &bad;   /* the config's and every layer's view of the variant */
    for (int l = 0; l < m.cfg.n_layer; l++) m.layers[l].attn = &bad;
    al_decoder d;
    al_err e;
    ck_assert_int_ne(al_decoder_init(&d, &m, 10, AL_KV_F32, &e), 0);
    ck_assert_str_eq(e.msg, "variant 'local': kv_rows at context 10 is 11, not 1 to 10");
    m.cfg.attn = al_variant_find("local");
    for (int l = 0; l < m.cfg.n_layer; l++) m.layers[l].attn = m.cfg.attn;
    al_model_free(&m);
}
END_TEST

Suite *local_suite(void)
{
    Suite *s = suite_create("local");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, local_forward_equals_a_banded_attention_written_out);
    tcase_add_test(tc, local_gradients_match_finite_differences_with_sinks_and_a_short_window);
    tcase_add_test(tc, local_outputs_depend_on_the_window_and_the_sinks_only);
    tcase_add_test(tc, local_check_refuses_bad_settings_naming_them);
    tcase_add_test(tc, local_decode_equals_the_full_forward_beyond_the_window_and_a_tile);
    tcase_add_test(tc, local_batched_decode_equals_single_decodes);
    tcase_add_test(tc, local_measured_cache_bytes_equal_the_ring_formula);
    tcase_add_test(tc, version_3_tables_register_without_kv_rows_and_keep_a_row_per_token);
    tcase_add_test(tc, kv_prints_the_cache_at_a_context_per_layer_and_summed);
    tcase_add_test(tc, generate_stats_measure_the_bounded_cache_at_4096);
    tcase_add_test(tc, report_context_re_reports_without_changing_a_trial);
    tcase_add_test(tc, decoder_refuses_a_kv_rows_answer_outside_the_context);
    tcase_add_test(tc, a_run_resumes_under_another_report_context);
    suite_add_tcase(s, tc);
    return s;
}
