/*
 * test_tokloss.c - per-token losses through the KV cache against the full
 * forward pass, for every decodable variant; and, on a model trained here,
 * `attnlab score --through-cache` at f32 against plain `score`, int8 close
 * to f32 and int4 further off.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "al_decode.h"
#include "al_registry.h"
#include "al_test.h"
#include "al_test_model.h"
#include "al_tokloss.h"

enum { SEQ = 8, T = 19, B = 3, VOCAB = 13 };

static int decodable(const al_variant *v)
{
    return al_variant_decodes(v);
}

/* Tiny model with sharp attention (weights scaled up, as test_decode's). */
static void make_model(al_model *m, const al_variant *v)
{
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, v, 2, 16, 4, 4, SEQ, VOCAB), 0);
    al_err e;
    ck_assert_msg(al_model_init(m, &c, &e) == 0, "%s", e.msg);
    al_model_init_weights(m, 9);
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].ndim == 2)
            for (size_t j = 0; j < m->tensors[i].numel; j++)
                m->params[m->tensors[i].offset + j] *= 8.0f;
}

/* Windows of T tokens past the trained SEQ, through decoders of batch 1
 * and 4 (one padding sequence), at f32: every token's loss within 1e-4 of
 * the full forward's. */
static double check_variant(const al_variant *v)
{
    al_model m;
    make_model(&m, v);
    int in[B * T], tgt[B * T];
    al_rng r;
    al_rng_seed(&r, 4);
    for (int i = 0; i < B * T; i++)
        in[i] = (int)al_rng_below(&r, VOCAB), tgt[i] = (int)al_rng_below(&r, VOCAB);
    al_err e;
    ck_assert_int_eq(al_model_reserve(&m, B, T, &e), 0);
    double full[B * T], one[B * T], four[B * T], worst = 0, spread = 0;
    al_token_losses_forward(&m, in, tgt, B, T, full);
    al_decoder d1, d4;
    ck_assert_msg(al_decoder_init(&d1, &m, T, AL_KV_F32, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(al_decoder_init_batch(&d4, &m, 4, T, AL_KV_F32, &e), 0);
    for (int b = 0; b < B; b++)
        al_token_losses_cache(&d1, in + b * T, tgt + b * T, 1, T, one + b * T);
    al_token_losses_cache(&d4, in, tgt, B, T, four);
    for (int i = 0; i < B * T; i++) {
        worst = fmax(worst, fmax(fabs(one[i] - full[i]), fabs(four[i] - full[i])));
        spread = fmax(spread, fabs(full[i] - full[0]));
    }
    ck_assert_msg(worst < 1e-4, "%s: through the cache off by %g", v->name, worst);
    ck_assert_msg(spread > 0.1, "%s: losses all alike (%g): the test would see little", v->name,
                  spread);
    al_decoder_free(&d1);
    al_decoder_free(&d4);
    al_model_free(&m);
    return worst;
}

START_TEST(through_the_cache_at_f32_equals_the_full_forward_for_every_variant)
{
    int n = 0;
    for (int i = 0; i < al_variant_count(); i++)
        if (decodable(al_variant_at(i))) check_variant(al_variant_at(i)), n++;
    ck_assert_int_ge(n, 7);   /* mha mqa gqa mla gta gla tpa */
}
END_TEST

START_TEST(token_loss_is_minus_the_log_softmax)
{
    float lg[3] = {1.0f, 2.0f, -1.0f};
    double z = exp(1.0) + exp(2.0) + exp(-1.0);
    ck_assert(fabs(al_token_loss(lg, 3, 1) - (log(z) - 2.0)) < 1e-12);
    ck_assert(fabs(al_token_loss(lg, 3, 2) - (log(z) + 1.0)) < 1e-12);
}
END_TEST

/* ---- on a trained model, through the command */

static double score_of(const char *out)
{
    const char *p = strstr(out, "loss=");
    ck_assert_msg(p != NULL, "%s", out);
    return strtod(p + 5, NULL);
}

START_TEST(int8_through_the_cache_stays_close_to_f32_on_a_trained_model)
{
    const char *text = al_test_corpus();
    char *dir = al_test_tmpdir(), yaml[8192], args[9000], *out;
    snprintf(yaml, sizeof yaml,
             "data: {source: text, path: %s}\n"
             "model: {n_layer: 2, d_model: 32, n_head: 4, seq_len: 64, kv_quant_group: 8,\n"
             "        kv_quant_residual: 8, attention: {variant: mha}}\n"
             "train: {steps: 120, batch_size: 8, lr: 3e-3, warmup_steps: 10, eval_every: 120,\n"
             "        eval_batches: 2, threads: 1}\n", text);
    char *cfg = al_test_write(dir, "t.yaml", yaml);
    snprintf(args, sizeof args, "train %s --out %s/run", cfg, dir);
    ck_assert_msg(al_test_attnlab(args, &out) == 0, "%s", out);
    free(out);
    /* the first 20 KB of the corpus, scored */
    snprintf(args, sizeof args, "head -c 20000 %s > %s/s.txt", text, dir);
    ck_assert_int_eq(al_test_run(args, &out), 0);
    free(out);
    double loss[4];
    static const char *const how[] = {"", "--through-cache --kv-dtype f32",
                                      "--through-cache --kv-dtype int8",
                                      "--through-cache --kv-dtype int4"};
    for (int i = 0; i < 4; i++) {
        snprintf(args, sizeof args, "score %s/run/model.safetensors %s/s.txt --threads 1 %s", dir,
                 dir, how[i]);
        ck_assert_msg(al_test_attnlab(args, &out) == 0, "%s", out);
        loss[i] = score_of(out);
        free(out);
    }
    ck_assert_msg(loss[0] < 3.2, "not trained: %g", loss[0]);
    ck_assert_msg(fabs(loss[1] - loss[0]) < 1e-4, "f32 cache %.6f, score %.6f", loss[1], loss[0]);
    ck_assert_msg(fabs(loss[2] - loss[1]) < 0.01, "int8 %.6f, f32 %.6f", loss[2], loss[1]);
    ck_assert_msg(loss[2] != loss[1], "int8 identical to f32: nothing quantized?");
    ck_assert_msg(fabs(loss[3] - loss[1]) < 0.2, "int4 %.6f, f32 %.6f", loss[3], loss[1]);
    /* bytes by hand, per layer: rows of 64 (K 32 | V 32); context 64, group 8,
     * residual 8: 48 rows quantized; int8 codes 48 x 64 = 3072, key scales and
     * zeros 6 groups x 32 x 8 = 1536, value ones 48 x 4 x 8 = 1536, the f32
     * ring 16 x 64 x 4 = 4096: 10240, two layers 20480 (int4: codes 1536,
     * 17408), over 64 tokens 320 (272) */
    snprintf(args, sizeof args, "kv %s --context 64", cfg);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    ck_assert_msg(strstr(out, "kv_bytes_per_token_quantized: int8=320 int4=272 "), "%s", out);
    ck_assert_msg(strstr(out, "kv_bytes_at_context_64_quantized: int8=20480 int4=17408\n"), "%s",
                  out);
    free(out);
    snprintf(args, sizeof args, "generate %s/run/model.safetensors --prompt ROMEO --tokens 40 "
             "--kv-dtype int8 --stats --seed 1", dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    ck_assert_msg(strstr(out, "kv_cache_bytes=20480 kv_bytes_per_token=320\n"), "%s", out);
    free(out);
    fprintf(stderr, "tokloss: score %.6f, through the cache f32 %.6f int8 %.6f int4 %.6f\n",
            loss[0], loss[1], loss[2], loss[3]);
    free(cfg), free(dir);
}
END_TEST

Suite *tokloss_suite(void)
{
    Suite *s = suite_create("tokloss");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, token_loss_is_minus_the_log_softmax);
    tcase_add_test(tc, through_the_cache_at_f32_equals_the_full_forward_for_every_variant);
    tcase_add_test(tc, int8_through_the_cache_stays_close_to_f32_on_a_trained_model);
    suite_add_tcase(s, tc);
    return s;
}
