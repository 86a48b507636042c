/*
 * test_headstats.c - the report's head summary (src/report/report_headstats.c): over a
 * sweep directory built by hand, the configuration of the planted model
 * (tests/test_attention.c) counts one previous-token and one induction
 * head per model, a uniform one none; heads.csv holds exactly the library's
 * statistics on the trial's validation windows; trials without a
 * checkpoint or unfinished are left out, a corrupt checkpoint and missing
 * data are named, and no checkpoint at all writes nothing.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "al_checkpoint.h"
#include "al_config_io.h"
#include "al_report_headstats.h"
#include "al_registry.h"
#include "al_test.h"
#include "al_test_model.h"

/* DIR/<trial>/config.yaml for the model m over the induction task with
 * vocabulary 16 (or a text file that does not exist), and, when save,
 * m as DIR/<trial>/model.safetensors. */
static void make_trial(const char *dir, const char *trial, const al_model *m, int text, int save)
{
    char path[4400];
    al_err e;
    al_config c;
    al_config_defaults(&c);
    if (text) {
        snprintf(c.data.source, sizeof c.data.source, "text");
        snprintf(c.data.path, sizeof c.data.path, "%s/no-such-text.txt", dir);
    } else {
        snprintf(c.data.source, sizeof c.data.source, "induction");
        c.data.vocab_size = 16;
        c.data.num_kv_pairs = 8;
        c.data.train_examples = 200;
        c.data.test_examples = 20;
    }
    c.model = m->cfg;
    snprintf(path, sizeof path, "%s/%s", dir, trial);
    ck_assert_int_eq(al_mkdirs(path, &e), 0);
    snprintf(path, sizeof path, "%s/%s/config.yaml", dir, trial);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    al_config_write_yaml(&c, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/%s/model.safetensors", dir, trial);
    if (save) ck_assert_msg(al_checkpoint_save(path, m, 0, &e) == 0, "%s", e.msg);
}

/* The planted model with every query and key weight zero: uniform heads. */
static void uniform_model(al_model *m)
{
    al_test_planted_model(m);
    for (int i = 0; i < m->n_tensors; i++)
        if (strstr(m->tensors[i].name, ".attn.wq.") || strstr(m->tensors[i].name, ".attn.wk."))
            memset(m->params + m->tensors[i].offset, 0, m->tensors[i].numel * sizeof(float));
}

/* noinline: GCC 12 inlines it and imagines a dangling pointer. */
__attribute__((noinline)) static char *section(const char *dir, const al_hs_trial *t, int n,
                                               int *rc)
{
    char *md;
    size_t len;
    al_err e;
    FILE *f = open_memstream(&md, &len);
    *rc = al_headstats_section(f, dir, "test loss", t, n, &e);
    fclose(f);
    return md;
}

__attribute__((noinline)) static char *read_csv(const char *dir)
{
    char path[4400], *csv = NULL;
    size_t n;
    al_err e;
    snprintf(path, sizeof path, "%s/heads.csv", dir);
    int rc = al_read_file(path, &csv, &n, &e);
    ck_assert_msg(rc == 0, "%s", e.msg);
    return csv;
}

START_TEST(planted_heads_are_counted_per_configuration)
{
    char *dir = al_test_tmpdir(), path[4400];
    al_model p, u;
    al_test_planted_model(&p);
    uniform_model(&u);
    make_trial(dir, "planted_seed1", &p, 0, 1);
    make_trial(dir, "planted_seed2", &p, 0, 1);
    make_trial(dir, "uniform_seed1", &u, 0, 1);
    make_trial(dir, "nockpt_seed1", &p, 0, 0);
    make_trial(dir, "failed_seed1", &p, 0, 1);
    make_trial(dir, "corrupt_seed1", &p, 0, 0);
    make_trial(dir, "nodata_seed1", &p, 1, 1);
    snprintf(path, sizeof path, "%s/corrupt_seed1/model.safetensors", dir);
    FILE *f = fopen(path, "w");
    fputs("not a checkpoint", f);
    fclose(f);
    const al_hs_trial t[] = {
        {"uniform_seed1", "uniform", 1, 1, 4096, 9.0, 2.0},
        {"planted_seed1", "planted", 1, 1, 4096, 9.0, 1.0},
        {"nockpt_seed1", "nockpt", 1, 1, 4096, 9.0, 1.0},
        {"planted_seed2", "planted", 1, 1, 4096, 9.0, 1.5},
        {"failed_seed1", "failed", 0, 1, 4096, NAN, NAN},
        {"corrupt_seed1", "corrupt", 1, 1, 4096, 9.0, 1.0},
        {"nodata_seed1", "nodata", 1, 1, 4096, 9.0, 3.0},
    };
    int rc;
    char *md = section(dir, t, 7, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(strstr(md, "\n## What the heads learned\n"), "%s", md);
    ck_assert_msg(strstr(md, "| configuration | KV bytes/token | test loss | heads |"), "%s", md);
    /* uniform first (the order given), then planted: 2 models, 1 + 1 heads each */
    const char *a = strstr(md, "| uniform | 4096 | 2.0000 | 4 | 0 | 0 | ");
    const char *b = strstr(md, "| planted | 4096 | 1.2500 | 4 | 1 | 1 | ");
    ck_assert_msg(a && b && a < b, "%s", md);
    double maxp, maxi, ent;
    int models;
    ck_assert_int_eq(sscanf(b + strlen("| planted | 4096 | 1.2500 | 4 | 1 | 1 | "),
                            "%lf | %lf | %lf | %d |", &maxp, &maxi, &ent, &models), 4);
    ck_assert(maxp > 0.9 && maxi > 0.9 && models == 2);
    ck_assert_msg(strstr(md, "| nodata | 4096 | 3.0000 | 4 | n/a | 1 | n/a | "), "%s", md);
    ck_assert_msg(strstr(md, "- `corrupt_seed1`: not analysed: "), "%s", md);
    ck_assert_msg(strstr(md, "- `nodata_seed1`: induction score only: "), "%s", md);
    ck_assert(!strstr(md, "nockpt") && !strstr(md, "failed"));
    /* heads.csv: the library's numbers on the same windows */
    al_trial_model tm;
    al_err e;
    ck_assert_int_eq(al_trial_model_open(dir, "planted_seed2", &tm, &e), 0);
    ck_assert(tm.has_data);
    int tok[AL_HS_WINDOWS * 64];
    al_head_stats st[4];
    al_trial_val_windows(&tm, AL_HS_WINDOWS, tok);
    ck_assert_int_eq(al_head_stats_model(&tm.m, tok, AL_HS_WINDOWS, 64, NULL, st, &e), 0);
    al_trial_model_close(&tm);
    char *csv = read_csv(dir);
    const char *hdr = "trial,config,layer,head,entropy,distance,first_token,prev_token,"
                      "induction\n";
    ck_assert(strncmp(csv, hdr, strlen(hdr)) == 0);
    int rows = 0;
    for (const char *r = strchr(csv, '\n') + 1; *r; r = strchr(r, '\n') + 1) rows++;
    ck_assert_int_eq(rows, 4 * 4);   /* uniform, planted x 2, nodata */
    for (int k = 0; k < 4; k++) {
        char want[256];
        snprintf(want, sizeof want, "\nplanted_seed2,planted,%d,%d,%.6f,%.6f,%.6f,%.6f,%.6f\n",
                 k / 2, k % 2, st[k].entropy, st[k].distance, st[k].first, st[k].prev,
                 st[k].induction);
        ck_assert_msg(strstr(csv, want), "no '%s' in\n%s", want + 1, csv);
    }
    ck_assert_ptr_nonnull(strstr(csv, "\nnodata_seed1,nodata,1,0,,,,,0.9"));
    free(csv), free(md), free(dir);
    al_model_free(&p);
    al_model_free(&u);
}
END_TEST

/* A random model of a layer_attention stack vs (vocabulary 16, seq_len 64,
 * d_model 32, 2 heads of 16). */
static void stack_model(al_model *m, const char *const *vs, int n_items, int n_layer)
{
    const al_variant *v[4];
    for (int i = 0; i < n_items; i++) ck_assert_ptr_nonnull(v[i] = al_variant_find(vs[i]));
    al_model_config c;
    al_err e;
    ck_assert_int_eq(al_test_stack_config(&c, v, n_items, n_layer, 32, 2, 16, 64, 16), 0);
    ck_assert_msg(al_model_init(m, &c, &e) == 0, "%s", e.msg);
    al_model_init_weights(m, 7);
}

/* A state layer's heads have no attention probabilities: a hybrid counts
 * its attention heads only, and a model of state layers alone shows n/a,
 * not 0 heads found and a NaN entropy. */
START_TEST(state_layers_heads_are_not_counted)
{
    char *dir = al_test_tmpdir();
    al_model h, s;
    stack_model(&h, (const char *const[]){"deltanet", "mha"}, 2, 2);
    stack_model(&s, (const char *const[]){"linear"}, 1, 2);
    make_trial(dir, "hybrid_seed1", &h, 0, 1);
    make_trial(dir, "state_seed1", &s, 0, 1);
    const al_hs_trial t[] = {
        {"hybrid_seed1", "hybrid", 1, 1, 256, 9.0, 2.0},
        {"state_seed1", "state", 1, 1, 0, 9.0, 2.5},
    };
    int rc;
    char *md = section(dir, t, 2, &rc);
    ck_assert_int_eq(rc, 0);
    /* the hybrid's 2 mha heads of its 4, with an entropy (no NaN anywhere) */
    ck_assert_msg(strstr(md, "| hybrid | 256 | 2.0000 | 2 | "), "%s", md);
    ck_assert_msg(!strstr(md, "nan"), "%s", md);
    ck_assert_msg(strstr(md, "| state | 0 | 2.5000 | 0 | n/a | n/a | n/a | n/a | n/a | 1 |"), "%s",
                  md);
    free(md), free(dir);
    al_model_free(&h);
    al_model_free(&s);
}
END_TEST

START_TEST(no_checkpoint_no_section)
{
    char *dir = al_test_tmpdir(), path[4400];
    al_model p;
    al_test_planted_model(&p);
    make_trial(dir, "a_seed1", &p, 0, 0);
    const al_hs_trial t[] = {{"a_seed1", "a", 1, 1, 1, 1.0, 1.0}, {"b_seed1", "b", 0, 1, 1, 1.0, 1.0}};
    int rc;
    char *md = section(dir, t, 2, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(md, "");
    snprintf(path, sizeof path, "%s/heads.csv", dir);
    ck_assert_int_ne(access(path, F_OK), 0);
    free(md), free(dir);
    al_model_free(&p);
}
END_TEST

Suite *headstats_suite(void)
{
    Suite *s = suite_create("headstats");
    TCase *tc = tcase_create("headstats");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, planted_heads_are_counted_per_configuration);
    tcase_add_test(tc, no_checkpoint_no_section);
    tcase_add_test(tc, state_layers_heads_are_not_counted);
    suite_add_tcase(s, tc);
    return s;
}
