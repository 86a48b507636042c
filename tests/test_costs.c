/*
 * test_costs.c - the cost model (src/model/cost.c, docs/costs.md): the
 * FLOPs the product layer counts when a model trains, prefills and decodes
 * equal the formulas exactly, for every built-in variant, a local:global
 * stack, kv_share and mla with query compression; the bytes a decode step
 * reads against what the decoder's caches allocate, at several contexts
 * and storage dtypes; train.flops training the documented number of steps
 * and refusing train.steps beside it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "al_cost.h"
#include "al_decode.h"
#include "al_kvcache.h"
#include "al_registry.h"
#include "al_report.h"
#include "al_sweep_spec.h"
#include "al_test.h"
#include "al_test_model.h"

enum { D = 16, H = 4, DH = 4, SEQ = 40, VOCAB = 11 };

static const al_variant *V(const char *name)
{
    const al_variant *v = al_variant_find(name);
    ck_assert_ptr_nonnull(v);
    return v;
}

/* The formula against the count, for model c at context N and batch B. */
static void check_counted(const al_model_config *c, int N, int B, const char *what)
{
    al_model m;
    al_err e;
    ck_assert_int_eq(al_model_init(&m, c, &e), 0);
    al_model_init_weights(&m, 3);
    al_cost_opts o = {N, B, AL_KV_F32};
    al_model_cost f;
    al_cost_counted k;
    ck_assert_int_eq(al_cost_of_model(c, &o, &f, &e), 0);
    ck_assert_int_eq(al_cost_measure(&m, &o, &k, &e), 0);
    ck_assert_msg(f.estimated == 0, "%s: estimated", what);
    ck_assert_msg(f.train_flops_per_token > 0, "%s: no training FLOPs", what);
    ck_assert_msg(k.train_flops_per_token == f.train_flops_per_token,
                  "%s: train counted %.0f, formula %.0f", what, k.train_flops_per_token,
                  f.train_flops_per_token);
    /* per token of a prefill of N: the count of N tokens over N, compared
     * as totals (whole numbers) */
    ck_assert_msg(fabs(k.prefill_flops_per_token - f.prefill_flops_per_token) * N < 0.5,
                  "%s N=%d: prefill counted %.3f, formula %.3f", what, N,
                  k.prefill_flops_per_token, f.prefill_flops_per_token);
    ck_assert_msg(k.decode_flops_per_token == f.decode_flops_per_token,
                  "%s N=%d B=%d: decode counted %.0f, formula %.0f", what, N, B,
                  k.decode_flops_per_token, f.decode_flops_per_token);
    al_model_free(&m);
}

/* Contexts below, at and past seq_len (past it a prefill decodes the
 * rest token by token), and past one cache tile (256 rows). */
static void check_contexts(const al_model_config *c, const char *what)
{
    static const int contexts[] = {7, SEQ, 300};
    for (int i = 0; i < 3; i++) check_counted(c, contexts[i], 1, what);
    check_counted(c, 300, 3, what);   /* batched decode */
}

/* ------------------------------------------------------------ FLOPs */

START_TEST(counted_flops_should_equal_the_formula_for_every_builtin_variant)
{
    for (int i = 0; i < al_variant_count(); i++) {
        const al_variant *v = al_variant_at(i);
        if (strcmp(al_variant_origin(i), "built-in")) continue;
        al_model_config c;
        ck_assert_int_eq(al_test_tiny_config(&c, v, 2, D, H, DH, SEQ, VOCAB), 0);
        check_contexts(&c, v->name);
    }
}
END_TEST

START_TEST(counted_flops_should_equal_the_formula_for_a_local_global_stack)
{
    const al_variant *vs[] = {V("local"), V("mha")};
    al_model_config c;
    ck_assert_int_eq(al_test_stack_config(&c, vs, 2, 4, D, H, DH, SEQ, VOCAB), 0);
    c.layer_attn[0].set[0] = 6;   /* window 6, */
    c.layer_attn[0].set[2] = 2;   /* 2 sinks: the ring fills before every context */
    check_contexts(&c, "local:mha");
}
END_TEST

START_TEST(counted_flops_should_equal_the_formula_under_kv_share)
{
    static const char *const names[] = {"mha", "mqa", "gqa", "local"};
    for (int i = 0; i < 4; i++) {
        al_model_config c;
        ck_assert_int_eq(al_test_tiny_config(&c, V(names[i]), 5, D, H, DH, SEQ, VOCAB), 0);
        c.kv_share = 2;   /* groups of 2, 2 and a last group of 1 */
        check_contexts(&c, names[i]);
    }
}
END_TEST

START_TEST(counted_flops_should_equal_the_formula_for_mla_with_query_compression)
{
    al_model_config c;
    const al_variant *v = V("mla");
    ck_assert_int_eq(al_test_tiny_config(&c, v, 2, D, H, DH, SEQ, VOCAB), 0);
    c.attn_set[al_variant_setting_index(v, "d_q_latent")] = 6;
    check_contexts(&c, "mla d_q_latent 6");
    /* the query latent is counted: compression changes the figure */
    al_model_config plain;
    ck_assert_int_eq(al_test_tiny_config(&plain, v, 2, D, H, DH, SEQ, VOCAB), 0);
    al_model_cost a, b;
    al_cost_opts o = {SEQ, 1, AL_KV_F32};
    al_err e;
    ck_assert_int_eq(al_cost_of_model(&c, &o, &a, &e), 0);
    ck_assert_int_eq(al_cost_of_model(&plain, &o, &b, &e), 0);
    ck_assert(a.train_flops_per_token != b.train_flops_per_token);
}
END_TEST

/* The shared parts written out by hand for a 1-layer mha at seq_len 64
 * (one block of query rows): per token, q k v o 4 * 2*D*D forward, the MLP
 * 2 * 2*D*F, the head 2*D*V, attention 2*64*(dh + dh) per head for the
 * single block's 64 keys; backward twice the products, attention
 * 2*64*(3*dh + 2*dh) per head. */
START_TEST(train_flops_should_match_a_hand_count)
{
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, V("mha"), 1, D, H, DH, 64, VOCAB), 0);
    double F = al_config_d_ff(&c);
    double fwd = 4 * 2.0 * D * D + 2 * 2.0 * D * F + 2.0 * D * VOCAB;
    double attn = H * (2.0 * 64 * (DH + DH) + 2.0 * 64 * (3 * DH + 2 * DH));
    al_model_cost m;
    al_cost_opts o = {64, 1, AL_KV_F32};
    al_err e;
    ck_assert_int_eq(al_cost_of_model(&c, &o, &m, &e), 0);
    ck_assert_double_eq(m.train_flops_per_token, 3 * fwd + attn);
    ck_assert_double_eq(m.head_train_flops, 3 * 2.0 * D * VOCAB);
}
END_TEST

/* ------------------------------------------------------------ bytes */

/* decode_bytes_per_token of c at N, dtype dt, batch B, against the
 * decoder's allocation: the weights are every parameter once per step
 * (over B), the cache rows read are the caches allocated (each consumer
 * of a kv_share group reads its producer's again), less, for int8/int4,
 * the f32 rows of the ring not yet filled. */
static void check_bytes(const al_model_config *c0, int N, int dt, int B)
{
    al_model_config c = *c0;
    al_model m;
    al_err e;
    ck_assert_int_eq(al_model_init(&m, &c, &e), 0);
    al_decoder d;
    ck_assert_int_eq(al_decoder_init(&d, &m, N, dt, &e), 0);
    double alloc = (double)al_decoder_cache_bytes(&d);
    al_decoder_free(&d);
    al_cost_opts o = {N, B, dt};
    al_model_cost f;
    ck_assert_int_eq(al_cost_of_model(&c, &o, &f, &e), 0);
    double weights = 4.0 * m.n_params / B, cache = f.decode_bytes_per_token - weights;
    double per_layer = 0;
    for (int l = 0; l < c.n_layer; l++) per_layer += f.layer[l].decode_cache_bytes;
    ck_assert_double_eq_tol(cache, per_layer, 1e-6);
    ck_assert_double_eq(f.kv_bytes_at_context, alloc);
    if (al_kv_dtype_bits(dt) == 0 && c.kv_share <= 1) {
        ck_assert_msg(cache == alloc, "N=%d %s: read %.0f, allocated %.0f", N,
                      al_kv_dtype_name(dt), cache, alloc);
    } else if (al_kv_dtype_bits(dt) == 0) {
        double prod = 0;   /* producers' bytes times the layers reading them */
        for (int l = 0; l < c.n_layer; l++)
            if (!al_config_kv_consumer(&c, l)) {
                int n = 1;
                while (l + n < c.n_layer && al_config_kv_src(&c, l + n) == l) n++;
                prod += n * f.layer[l].kv_bytes;
            }
        ck_assert_double_eq(cache, prod);
    } else {
        ck_assert_msg(cache <= alloc, "N=%d %s: read %.0f past %.0f held", N,
                      al_kv_dtype_name(dt), cache, alloc);
    }
    ck_assert_double_eq(f.arithmetic_intensity, f.decode_flops_per_token /
                                                 f.decode_bytes_per_token);
    al_model_free(&m);
}

START_TEST(decode_bytes_should_be_the_rows_read_and_the_weights)
{
    static const char *const names[] = {"mha", "gqa", "mla", "gta", "tpa", "local", "gla"};
    static const int contexts[] = {1, 9, SEQ, 300};
    for (int i = 0; i < 7; i++) {
        al_model_config c;
        ck_assert_int_eq(al_test_tiny_config(&c, V(names[i]), 2, D, H, DH, SEQ, VOCAB), 0);
        for (int k = 0; k < 4; k++)
            for (int dt = 0; dt < AL_KV_NALL; dt++) check_bytes(&c, contexts[k], dt, 1 + k % 2);
    }
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, V("mqa"), 5, D, H, DH, SEQ, VOCAB), 0);
    c.kv_share = 2;
    for (int k = 0; k < 4; k++) check_bytes(&c, contexts[k], AL_KV_BF16, 2);
}
END_TEST

/* An int cache reads exactly what it holds when its ring is full: at
 * N = residual + (k + 1) * group the rows past the quantized ones fill it. */
START_TEST(int_cache_read_should_equal_the_allocation_when_the_ring_is_full)
{
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, V("mha"), 2, D, H, DH, SEQ, VOCAB), 0);
    c.kv_quant_group = 8, c.kv_quant_residual = 4;
    for (int dt = AL_KV_INT8; dt <= AL_KV_INT4; dt++)
        for (int k = 0; k < 3; k++) {
            int N = 4 + (k + 1) * 8;
            al_model m;
            al_err e;
            ck_assert_int_eq(al_model_init(&m, &c, &e), 0);
            al_decoder d;
            ck_assert_int_eq(al_decoder_init(&d, &m, N, dt, &e), 0);
            double alloc = (double)al_decoder_cache_bytes(&d);
            al_cost_opts o = {N, 1, dt};
            al_model_cost f;
            ck_assert_int_eq(al_cost_of_model(&c, &o, &f, &e), 0);
            ck_assert_double_eq(f.decode_bytes_per_token - 4.0 * m.n_params, alloc);
            /* one row more: the new ring row is read, the emptied ring
             * rows are held but not read */
            o.context = N + 1;
            al_model_cost g;
            ck_assert_int_eq(al_cost_of_model(&c, &o, &g, &e), 0);
            ck_assert(g.decode_bytes_per_token - 4.0 * m.n_params < g.kv_bytes_at_context);
            al_decoder_free(&d);
            al_model_free(&m);
        }
}
END_TEST

/* ------------------------------------------------------------ train.flops */

static char *cfg_file(const char *dir, const char *train)
{
    char text[1024];
    snprintf(text, sizeof text,
             "data: {source: text, path: %s}\n"
             "model: {n_layer: 1, d_model: 16, n_head: 4, seq_len: 16, "
             "attention: {variant: mqa}}\n"
             "train: {%s, batch_size: 2, eval_every: 7, eval_batches: 1, threads: 1}\n",
             al_test_corpus(), train);
    return al_test_write(dir, "c.yaml", text);
}

/* The last step of a run's metrics.csv. */
static int last_step(const char *dir)
{
    char path[1100], line[512];
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    int step = -1;
    while (fgets(line, sizeof line, f))
        if (line[0] >= '0' && line[0] <= '9') step = atoi(line);
    fclose(f);
    return step;
}

START_TEST(train_flops_should_train_the_documented_steps)
{
    char *dir = al_test_tmpdir(), *cfg = cfg_file(dir, "flops: 3.0e+7, warmup_steps: 3");
    char args[2048], *out = NULL;
    /* the FLOPs per token as counted by running the model (--measure) */
    snprintf(args, sizeof args, "cost %s --measure", cfg);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    const char *k = strstr(out, "counted_train_flops_per_token: ");
    ck_assert_ptr_nonnull(k);
    double per_token = atof(k + strlen("counted_train_flops_per_token: "));
    free(out);
    int want = (int)floor(3.0e7 / (per_token * 2 * 16));
    ck_assert_int_gt(want, 3);
    snprintf(args, sizeof args, "train %s --out %s/run", cfg, dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    char expect[128];
    snprintf(expect, sizeof expect, "train.flops 3e+07: %d steps", want);
    ck_assert_msg(strstr(out, expect), "no start line '%s' in: %s", expect, out);
    free(out);
    char run[1024];
    snprintf(run, sizeof run, "%s/run", dir);
    ck_assert_int_eq(last_step(run), want);
    free(cfg);
    free(dir);
}
END_TEST

START_TEST(train_flops_beside_train_steps_should_be_refused_naming_both)
{
    char *dir = al_test_tmpdir(), *cfg = cfg_file(dir, "flops: 3.0e+7, steps: 5");
    char args[2048], *out = NULL;
    snprintf(args, sizeof args, "train %s --out %s/run", cfg, dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 2);
    int lines = 0;
    for (const char *p = out; *p; p++) lines += *p == '\n';
    ck_assert_msg(strstr(out, "'train.flops' and 'train.steps'") && lines == 1, "%s", out);
    free(out);
    /* too small a budget: no step */
    free(cfg);
    cfg = cfg_file(dir, "flops: 10");
    snprintf(args, sizeof args, "train %s --out %s/run2", cfg, dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 2);
    ck_assert_msg(strstr(out, "'train.flops' (10) buys no step"), "%s", out);
    free(out);
    free(cfg);
    free(dir);
}
END_TEST

/* ------------------------------------------------------------ the report */

/* Three configurations, two seeds each (test loss): a {2.0, 2.2}, b {2.3,
 * 2.3}, c {2.5, 2.4}. Bytes held 1000, 500, 250: all on that front. Bytes
 * read 5000, 6000, 4000: b (2.3 at 6000) is dominated by a (2.1 at 5000).
 * Training FLOPs 3e9, 2e9, 4e9: c (2.45 at 4e9) is dominated by a. */
static const char cost_summary[] =
    "trial,config,group,variant,causal,seed,params,kv_bytes_per_token,steps,tokens_per_step,"
    "final_train_loss,val_loss,best_val_loss,val_accuracy,test_loss,tokens_per_s,wall_s,"
    "status,reason,train_flops_per_token,train_flops,decode_flops_per_token,"
    "decode_bytes_per_token,arithmetic_intensity\n"
    "a_seed1,a,a,mha,true,1,100,1000,10,64,2,2,2,,2.0,1,1,ok,,4687500,3000000000,2500,5000,0.5\n"
    "a_seed2,a,a,mha,true,2,100,1000,10,64,2,2,2,,2.2,1,1,ok,,4687500,3000000000,2500,5000,0.5\n"
    "b_seed1,b,b,gqa,true,1,100,500,10,64,2,2,2,,2.3,1,1,ok,,3125000,2000000000,3000,6000,0.5\n"
    "b_seed2,b,b,gqa,true,2,100,500,10,64,2,2,2,,2.3,1,1,ok,,3125000,2000000000,3000,6000,0.5\n"
    "c_seed1,c,c,mqa,true,1,100,250,10,64,2,2,2,,2.5,1,1,ok,,6250000,4000000000,1000,4000,0.25\n"
    "c_seed2,c,c,mqa,true,2,100,250,10,64,2,2,2,,2.4,1,1,ok,,6250000,4000000000,1000,4000,0.25\n";

static __attribute__((noinline)) char *read_in(const char *dir, const char *name)
{
    char path[4200], *t = NULL;
    size_t n;
    al_err e;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ck_assert_msg(al_read_file(path, &t, &n, &e) == 0, "%s", e.msg);
    return t;
}

/* A plot's data line of configuration g: its cost and mean. */
static void dat_point(const char *dat, const char *g, double *cost, double *mean)
{
    char key[32];
    snprintf(key, sizeof key, "\"%s\"", g);
    const char *q = strstr(dat, key);
    ck_assert_msg(q != NULL, "no %s in %s", g, dat);
    while (q > dat && q[-1] != '\n') q--;
    ck_assert_int_eq(sscanf(q, "%lf %lf", cost, mean), 2);
}

START_TEST(report_plots_loss_against_bytes_read_and_training_flops)
{
    char *dir = al_test_tmpdir();
    free(al_test_write(dir, "summary.csv", cost_summary));
    al_report_stats st;
    al_err e;
    ck_assert_msg(al_report_write(dir, &st, &e) == 0, "%s", e.msg);
    static const struct { const char *g; double read, flops, mean; } want[] = {
        {"a", 5000, 3e9, 2.1}, {"b", 6000, 2e9, 2.3}, {"c", 4000, 4e9, 2.45}};
    char *rd = read_in(dir, "tradeoff_read.dat"), *fl = read_in(dir, "tradeoff_flops.dat");
    for (int i = 0; i < 3; i++) {
        double c, m;
        dat_point(rd, want[i].g, &c, &m);
        ck_assert_double_eq(c, want[i].read);
        ck_assert_double_eq_tol(m, want[i].mean, 1e-9);
        dat_point(fl, want[i].g, &c, &m);
        ck_assert_double_eq(c, want[i].flops);
        ck_assert_double_eq_tol(m, want[i].mean, 1e-9);
    }
    char *fr = read_in(dir, "front_read.dat"), *ff = read_in(dir, "front_flops.dat");
    ck_assert_str_eq(strchr(fr, '\n') + 1, "4000 2.45\n5000 2.1\n");
    ck_assert_str_eq(strchr(ff, '\n') + 1, "2000000000 2.3\n3000000000 2.1\n");
    char *gp = read_in(dir, "tradeoff_read.gp"), *md = read_in(dir, "report.md");
    ck_assert_ptr_nonnull(strstr(gp, "with yerrorbars"));   /* error bars */
    ck_assert_ptr_nonnull(strstr(gp, "\"front_read.dat\" using 1:2 with steps"));
    /* the second table shows the costs; the main one the loss */
    const char *more = strstr(md, "## More about each configuration");
    ck_assert_msg(more && strstr(more, "| 3e+09 | 5,000 | 2,500 | 0.5 |"), "%s", md);
    ck_assert_msg(strstr(md, "| 2 | 2.1000 ± "), "%s", md);
    if (st.plots == AL_PLOTS_DRAWN) {   /* gnuplot here: the pictures exist */
        struct stat sb;
        char path[4200];
        static const char *const pics[] = {"tradeoff_read.png", "tradeoff_read.svg",
                                           "tradeoff_flops.png", "tradeoff_flops.svg"};
        for (int i = 0; i < 4; i++) {
            snprintf(path, sizeof path, "%s/%s", dir, pics[i]);
            ck_assert_msg(stat(path, &sb) == 0 && sb.st_size > 0, "%s", path);
        }
        ck_assert_ptr_nonnull(strstr(md, "![test loss against bytes read per decoded token]"
                                         "(tradeoff_read.png)"));
    }
    free(rd), free(fl), free(fr), free(ff), free(gp), free(md), free(dir);
}
END_TEST

/* ------------------------------------------------------------ kv_costs.yaml */

/* The experiment loads and lists its trials (--dry-run); its equal-FLOPs
 * trials train mha's compute: each the documented floor of its own steps,
 * and none more FLOPs than mha's 2,000 steps nor a step's worth fewer. */
START_TEST(kv_costs_experiment_should_match_mha_compute)
{
    char path[1024], args[2200], *out = NULL, *dir = al_test_tmpdir();
    snprintf(path, sizeof path, "%s/experiments/kv_costs.yaml", al_test_srcdir());
    snprintf(args, sizeof args, "sweep %s --dry-run --out %s/r", path, dir);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    ck_assert_msg(strstr(out, "39 trials (3 excluded)"), "%s", out);
    free(out);
    al_sweep s;
    al_err e;
    ck_assert_msg(al_sweep_load(path, NULL, 0, NULL, 0, &s, &e) == 0, "%s", e.msg);
    double mha = NAN;
    for (int i = 0; i < s.n_trials; i++)
        if (!strcmp(s.trials[i].cfg.model.variant, "mha"))
            mha = s.trials[i].train_flops_per_token * 4 * 256 * 2000;
    int flops_trials = 0;
    for (int i = 0; i < s.n_trials; i++) {
        const al_sweep_trial *t = &s.trials[i];
        double step = t->train_flops_per_token * t->cfg.train.batch_size * t->cfg.model.seq_len;
        if (t->cfg.train.flops == 0) {
            ck_assert_int_eq(t->cfg.train.steps, 2000);
            continue;
        }
        flops_trials++;
        ck_assert_double_eq(t->cfg.train.flops, mha);
        ck_assert_int_eq(t->cfg.train.steps, (int)floor(t->cfg.train.flops / step));
        ck_assert(step * t->cfg.train.steps <= mha && step * (t->cfg.train.steps + 1) > mha);
    }
    ck_assert_int_eq(flops_trials, 18);   /* six attentions besides mha, 3 seeds */
    al_sweep_free(&s);
    free(dir);
}
END_TEST

/* Trials that differ only in their seed share one count (a sweep loads
 * without running a DeltaNet stack once per seed); a trial that differs in
 * anything costs are made of, here the cache dtype, gets its own. Each trial's
 * figures equal a count made for it alone. */
START_TEST(a_sweep_should_count_each_model_once_and_each_trial_right)
{
    char *dir = al_test_tmpdir();
    char text[1024];
    snprintf(text, sizeof text,
             "data: {source: text, path: %s}\n"
             "model: {n_layer: 2, d_model: 16, n_head: 4, seq_len: 40}\n"
             "train: {steps: 2, batch_size: 2}\nreport: {context: 600}\n"
             "sweep:\n  seeds: 3\n  grid:\n"
             "    model.attention: [{variant: mha}, {variant: deltanet}, {variant: linear}]\n"
             "    model.kv_dtype: [f32, int8]\n", al_test_corpus());
    char *path = al_test_write(dir, "s.yaml", text);
    al_sweep s;
    al_err e;
    ck_assert_msg(al_sweep_load(path, NULL, 0, NULL, 0, &s, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(s.n_trials, 18);
    for (int i = 0; i < s.n_trials; i++) {
        al_sweep_trial alone = s.trials[i];
        ck_assert_int_eq(al_sweep_trial_costs(&alone, &e), 0);
        const al_sweep_trial *t = &s.trials[i];
        ck_assert_msg(t->train_flops_per_token == alone.train_flops_per_token &&
                      t->decode_flops_per_token == alone.decode_flops_per_token &&
                      t->decode_bytes_per_token == alone.decode_bytes_per_token &&
                      t->arithmetic_intensity == alone.arithmetic_intensity,
                      "trial %s: %.0f/%.0f/%.0f in the sweep, %.0f/%.0f/%.0f alone", t->label,
                      t->train_flops_per_token, t->decode_flops_per_token,
                      t->decode_bytes_per_token, alone.train_flops_per_token,
                      alone.decode_flops_per_token, alone.decode_bytes_per_token);
        ck_assert(t->decode_flops_per_token > 0);
    }
    /* the cache dtypes differ in what an mha decode step reads at 600 */
    double at[2] = {0, 0};
    for (int i = 0; i < s.n_trials; i++)
        if (!strncmp(s.trials[i].label, "mha_", 4))
            at[!strcmp(s.trials[i].cfg.model.kv_dtype, "int8")] =
                s.trials[i].decode_bytes_per_token;
    ck_assert_msg(at[0] > at[1] && at[1] > 0, "f32 %.0f, int8 %.0f", at[0], at[1]);
    al_sweep_free(&s);
    free(path);
    free(dir);
}
END_TEST

/* ------------------------------------------------------------ plugins */

/* A plugin without cost members: the core counts its products by running
 * it, and they equal what --measure counts. */
START_TEST(a_plugin_without_cost_members_should_be_counted_by_the_core)
{
    char *dir = al_test_tmpdir(), args[4096], *out = NULL;
    char *cfg = al_test_write(dir, "p.yaml",
        "data: {source: kjv}\n"
        "model: {n_layer: 2, d_model: 16, n_head: 4, seq_len: 24, "
        "attention: {variant: swa, window: 5}}\n");
    snprintf(args, sizeof args, "cost %s --plugin %s --context 40 --measure", cfg, AL_SWA_PLUGIN);
    ck_assert_int_eq(al_test_attnlab(args, &out), 0);
    static const char *const keys[] = {"train", "prefill", "decode"};
    for (int i = 0; i < 3; i++) {
        char k1[64], k2[80];
        snprintf(k1, sizeof k1, "\n%s_flops_per_token: ", keys[i]);
        snprintf(k2, sizeof k2, "counted_%s_flops_per_token: ", keys[i]);
        const char *a = strstr(out, k1), *b = strstr(out, k2);
        ck_assert_msg(a && b, "%s", out);
        double fa = atof(a + strlen(k1)), fb = atof(b + strlen(k2));
        ck_assert_msg(fa > 0 && fa == fb, "%s: %g against %g counted", keys[i], fa, fb);
    }
    ck_assert_ptr_nonnull(strstr(out, "\nestimated: 0\n"));
    free(out), free(cfg), free(dir);
}
END_TEST

/* A variant whose products the core cannot see (no SDK product at all):
 * its figures are estimates and say so, never zero. */
static int blind_params(const void *ctx, al_param_spec *o)
{
    const al_attn_shape *s = ctx;
    o[0] = (al_param_spec){"w", s->d_model, s->d_model, AL_INIT_NORMAL};
    return 1;
}
static size_t blind_floats(const void *ctx, int B, int T) { return 0; }
static void blind_forward(const void *ctx, float *out, float *act, float *scratch,
                          const float *x, float *const *p, int B, int T)
{
    const al_attn_shape *s = ctx;
    memcpy(out, x, (size_t)B * T * s->d_model * sizeof(float));
}
static void blind_backward(const void *ctx, float *dx, float *const *dp, float *scratch,
                           const float *dout, const float *x, const float *act,
                           float *const *p, int B, int T)
{
    const al_attn_shape *s = ctx;
    for (size_t i = 0; i < (size_t)B * T * s->d_model; i++) dx[i] += dout[i];
}
static const al_variant_train blind_train = {blind_params, blind_floats, blind_floats,
                                             blind_forward, blind_backward, 0};
static const al_variant blind = {.api_version = AL_VARIANT_API_VERSION, .name = "costs_blind",
                                 .description = "no products the core sees",
                                 .train = &blind_train};

START_TEST(a_variant_whose_products_are_unseen_should_be_marked_estimated)
{
    al_err e;
    int n = al_variant_count();
    ck_assert_msg(al_variant_register(&blind, "test", &e) == 0, "%s", e.msg);
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, V("costs_blind"), 2, D, H, DH, SEQ, VOCAB), 0);
    al_cost_opts o = {SEQ, 1, AL_KV_F32};
    al_model_cost m;
    ck_assert_int_eq(al_cost_of_model(&c, &o, &m, &e), 0);
    ck_assert_int_eq(m.estimated, 1);
    ck_assert_int_eq(m.layer[0].estimated, 1);
    /* 2 FLOPs per weight and token forward, 4 backward: D*D weights */
    double mlp = 2 * 2.0 * D * al_config_d_ff(&c);
    ck_assert_double_eq(m.layer[0].train_flops, 6.0 * D * D + 3 * mlp);
    ck_assert_double_eq(m.layer[0].decode_flops, 2.0 * D * D + mlp);
    al_variant_truncate(n);
}
END_TEST

Suite *costs_suite(void)
{
    Suite *s = suite_create("costs");
    TCase *t = tcase_create("costs");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, counted_flops_should_equal_the_formula_for_every_builtin_variant);
    tcase_add_test(t, counted_flops_should_equal_the_formula_for_a_local_global_stack);
    tcase_add_test(t, counted_flops_should_equal_the_formula_under_kv_share);
    tcase_add_test(t, counted_flops_should_equal_the_formula_for_mla_with_query_compression);
    tcase_add_test(t, train_flops_should_match_a_hand_count);
    tcase_add_test(t, decode_bytes_should_be_the_rows_read_and_the_weights);
    tcase_add_test(t, int_cache_read_should_equal_the_allocation_when_the_ring_is_full);
    tcase_add_test(t, train_flops_should_train_the_documented_steps);
    tcase_add_test(t, train_flops_beside_train_steps_should_be_refused_naming_both);
    tcase_add_test(t, report_plots_loss_against_bytes_read_and_training_flops);
    tcase_add_test(t, kv_costs_experiment_should_match_mha_compute);
    tcase_add_test(t, a_sweep_should_count_each_model_once_and_each_trial_right);
    tcase_add_test(t, a_plugin_without_cost_members_should_be_counted_by_the_core);
    tcase_add_test(t, a_variant_whose_products_are_unseen_should_be_marked_estimated);
    suite_add_tcase(s, t);
    return s;
}
