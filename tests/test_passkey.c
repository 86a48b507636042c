/*
 * test_passkey.c - the passkey source (data_passkey.c): examples are a
 * pure function of (seed, index), the loss mask covers exactly the five
 * digit targets and they spell the key, the statement sits at the depth
 * asked for, and `attnlab score --passkey` prints a cell per length x
 * depth with the accuracy counted by hand.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "al_checkpoint.h"
#include "al_data.h"
#include "al_model.h"
#include "al_test.h"

static const char filler_text[] =
    "In the beginning God created the heaven and the earth. And the earth was without form, "
    "and void; and darkness was upon the face of the deep.\n";

/* A filler file of `copies` copies of filler_text. */
static char *write_filler(const char *dir, int copies)
{
    size_t n = strlen(filler_text);
    char *t = malloc(n * (size_t)copies + 1);
    for (int i = 0; i < copies; i++) memcpy(t + i * n, filler_text, n);
    t[n * (size_t)copies] = 0;
    char *p = al_test_write(dir, "filler.txt", t);
    free(t);
    return p;
}

START_TEST(examples_are_a_pure_function_of_seed_and_index)
{
    const unsigned char *f = (const unsigned char *)filler_text;
    size_t n = strlen(filler_text);
    int T = 200, a[2][2][200];
    float w[2][200];
    int k0 = al_passkey_make(f, n, 42, 7, T, -1, a[0][0], a[0][1], w[0]);
    int k1 = al_passkey_make(f, n, 42, 7, T, -1, a[1][0], a[1][1], w[1]);
    ck_assert_int_eq(k0, k1);
    ck_assert(memcmp(a[0], a[1], sizeof a[0]) == 0 && memcmp(w[0], w[1], sizeof w[0]) == 0);
    /* other indices and seeds: other keys (90000 possible; 20 draws all equal is a bug) */
    int same = 0;
    for (long i = 0; i < 20; i++) same += al_passkey_make(f, n, 42, 100 + i, T, -1, a[1][0],
                                                           a[1][1], w[1]) == k0;
    ck_assert_int_lt(same, 20);
    ck_assert_int_ne(al_passkey_make(f, n, 43, 7, T, -1, a[1][0], a[1][1], w[1]) +
                     al_passkey_make(f, n, 44, 7, T, -1, a[1][0], a[1][1], w[1]), 2 * k0);
}
END_TEST

/* The five digits are the answer positions, and nothing else is. */
START_TEST(the_mask_covers_exactly_the_key_digits)
{
    const unsigned char *f = (const unsigned char *)filler_text;
    size_t n = strlen(filler_text);
    for (int T = al_passkey_min_len(); T < 400; T += 37)
        for (long i = 0; i < 5; i++) {
            int *in = malloc((size_t)T * sizeof(int)), *tgt = malloc((size_t)T * sizeof(int));
            float *w = malloc((size_t)T * sizeof(float));
            int key = al_passkey_make(f, n, 9, i, T, -1, in, tgt, w);
            char digits[16];
            snprintf(digits, sizeof digits, "%d", key);
            ck_assert_int_eq((int)strlen(digits), AL_PASSKEY_DIGITS);
            for (int t = 0; t < T; t++) {
                int answer = t >= T - AL_PASSKEY_DIGITS;
                ck_assert_msg(w[t] == (answer ? 1.0f : 0.0f), "T %d t %d", T, t);
                if (answer) ck_assert_int_eq(tgt[t], digits[t - (T - AL_PASSKEY_DIGITS)]);
                if (t + 1 < T) ck_assert_int_eq(tgt[t], in[t + 1]);   /* next-token targets */
                ck_assert(in[t] >= 0 && in[t] < 256);
            }
            free(in), free(tgt), free(w);
        }
}
END_TEST

/* The statement starts at floor(depth * F) of the window, F the filler
 * bytes, and the question ends the window. */
START_TEST(the_key_is_stated_at_the_depth_asked_for)
{
    const unsigned char *f = (const unsigned char *)filler_text;
    size_t n = strlen(filler_text);
    int T = 300, in[300], tgt[300];
    float w[300];
    int F = T + 1 - al_passkey_min_len();
    const double depths[] = {0.0, 0.25, 0.5, 0.999};
    for (int d = 0; d < 4; d++) {
        int key = al_passkey_make(f, n, 5, 3, T, depths[d], in, tgt, w);
        char s[302], want[64];
        for (int t = 0; t < T; t++) s[t] = (char)in[t];
        s[T] = (char)tgt[T - 1];
        s[T + 1] = 0;
        snprintf(want, sizeof want, " The pass key is %d. Remember it.", key);
        char *at = strstr(s, want);
        ck_assert_msg(at != NULL, "%s", s);
        ck_assert_int_eq((int)(at - s), (int)floor(depths[d] * F));
        snprintf(want, sizeof want, "What is the pass key? The pass key is %d", key);
        ck_assert_str_eq(s + T + 1 - strlen(want), want);
    }
}
END_TEST

/* Through the source: test example i is al_passkey_make over the test
 * split's bytes with the test stream, the same on every open. */
START_TEST(the_source_gives_the_same_test_examples_on_every_open)
{
    char *dir = al_test_tmpdir(), *path = write_filler(dir, 40);
    al_data_config c = {.source = "passkey", .val_fraction = 0.1, .test_fraction = 0.1,
                        .train_examples = 100, .test_examples = 8, .seed = 11};
    snprintf(c.path, sizeof c.path, "%s", path);
    al_data a, b;
    al_err e;
    int T = 160, x[3][160], y[3][160];
    float wx[160], wy[160];
    ck_assert_msg(al_data_open(&a, &c, T, &e) == 0, "%s", e.msg);
    ck_assert_msg(al_data_open(&b, &c, T, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(a.vocab_size, 256);
    ck_assert_int_eq(a.has_weights, 1);
    for (long i = 0; i < 8; i++) {
        al_data_examples(&a, AL_SPLIT_TEST, i, 1, T, x[0], x[1], wx);
        al_data_examples(&b, AL_SPLIT_TEST, i, 1, T, y[0], y[1], wy);
        ck_assert(memcmp(x[0], y[0], sizeof x[0]) == 0 && memcmp(x[1], y[1], sizeof x[1]) == 0);
        al_passkey_make(a.bytes + a.test_start, a.n - a.test_start,
                        al_passkey_seed(11, AL_SPLIT_TEST), i, T, -1, y[0], y[1], wy);
        ck_assert(memcmp(x[0], y[0], sizeof x[0]) == 0 && memcmp(wx, wy, sizeof wx) == 0);
    }
    al_data_close(&a), al_data_close(&b);
    ck_assert_int_eq(al_data_open(&a, &c, 50, &e), -1);
    ck_assert_msg(strstr(e.msg, "'model.seq_len' (50): passkey examples need at least"), "%s",
                  e.msg);
    free(path), free(dir);
}
END_TEST

/* The counts of one cell by hand: one example at a time (the command
 * batches 8), argmax over the logits of each digit position. */
static void cell_by_hand(al_model *m, const char *filler, size_t n, int L, double depth, int N,
                         double *exact, double *digits, double *loss)
{
    int *in = malloc((size_t)L * sizeof(int)), *tgt = malloc((size_t)L * sizeof(int));
    float *w = malloc((size_t)L * sizeof(float));
    al_err e;
    int V = m->cfg.vocab_size, ex = 0, dg = 0;
    *loss = 0;
    ck_assert_msg(al_model_reserve(m, 1, L, &e) == 0, "%s", e.msg);
    for (long i = 0; i < N; i++) {
        al_passkey_make((const unsigned char *)filler, n, al_passkey_seed(3, AL_SPLIT_TEST), i,
                        L, depth, in, tgt, w);
        *loss += al_model_forward(m, in, tgt, w, 1, L);
        int right = 0;
        for (int t = L - 5; t < L; t++) {
            const float *x = m->logits + (size_t)t * V;
            int best = 0;
            for (int v = 1; v < V; v++) best = x[v] > x[best] ? v : best;
            right += best == tgt[t];
        }
        dg += right, ex += right == 5;
    }
    *exact = (double)ex / N, *digits = dg / (5.0 * N), *loss /= N;
    free(in), free(tgt), free(w);
}

START_TEST(score_passkey_prints_each_cell_as_counted_by_hand)
{
    char *dir = al_test_tmpdir(), *filler = write_filler(dir, 60), *out, cfg[8192];
    snprintf(cfg, sizeof cfg,
             "data: {source: passkey, path: %s, test_examples: 8}\n"
             "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 112}\n"
             "train: {batch_size: 4, eval_batches: 1, threads: 1, warmup_steps: 2, steps: 10}\n",
             filler);
    char *exp = al_test_write(dir, "pk.yaml", cfg), cmd[8192];
    snprintf(cmd, sizeof cmd, "%s train %s --out %s/run", al_test_binary(), exp, dir);
    ck_assert_int_eq(al_test_run(cmd, &out), 0);
    free(out);
    snprintf(cmd, sizeof cmd, "%s score %s/run/model.safetensors %s --passkey --lengths 112,200 "
             "--depths 0,0.6 --examples 11 --seed 3 --out %s/pk", al_test_binary(), dir, filler,
             dir);
    ck_assert_int_eq(al_test_run(cmd, &out), 0);
    char path[4400], *csv = NULL, *text = NULL;
    size_t n, tn;
    al_err e;
    snprintf(path, sizeof path, "%s/pk/passkey.csv", dir);
    ck_assert(al_read_file(path, &csv, &n, &e) == 0);
    ck_assert_str_eq(out, csv);   /* printed and written alike */
    ck_assert(al_read_file(filler, &text, &tn, &e) == 0);
    al_model m;
    ck_assert(snprintf(path, sizeof path, "%s/run/model.safetensors", dir) > 0);
    ck_assert_msg(al_checkpoint_load(path, &m, NULL, &e) == 0, "%s", e.msg);
    const char *p = strchr(csv, '\n') + 1;
    const int lengths[] = {112, 200};
    const double depths[] = {0, 0.6};
    for (int c = 0; c < 4; c++) {
        int L, N;
        double d, ex, dg, loss, hex, hdg, hloss;
        ck_assert_int_eq(sscanf(p, "%d,%lf,%d,%lf,%lf,%lf", &L, &d, &N, &ex, &dg, &loss), 6);
        ck_assert_int_eq(L, lengths[c / 2]);
        ck_assert_double_eq(d, depths[c % 2]);
        ck_assert_int_eq(N, 11);
        cell_by_hand(&m, text, tn, L, d, N, &hex, &hdg, &hloss);
        ck_assert_double_eq_tol(ex, hex, 1e-6);
        ck_assert_double_eq_tol(dg, hdg, 1e-6);
        ck_assert_double_eq_tol(loss, hloss, 1e-4);
        p = strchr(p, '\n') + 1;
    }
    ck_assert_str_eq(p, "");
    al_model_free(&m);
    free(out);
    snprintf(cmd, sizeof cmd, "%s score %s/run/model.safetensors %s --passkey --lengths 50",
             al_test_binary(), dir, filler);
    ck_assert_int_eq(al_test_run(cmd, &out), 2);
    ck_assert_msg(strstr(out, "--lengths: 50 is shorter than a passkey example"), "%s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s score %s/run/model.safetensors %s --passkey --depths 0,1",
             al_test_binary(), dir, filler);
    ck_assert_int_eq(al_test_run(cmd, &out), 2);
    free(out), free(csv), free(text), free(exp), free(filler), free(dir);
}
END_TEST

Suite *passkey_suite(void)
{
    Suite *s = suite_create("passkey");
    TCase *tc = tcase_create("passkey");
    tcase_add_test(tc, examples_are_a_pure_function_of_seed_and_index);
    tcase_add_test(tc, the_mask_covers_exactly_the_key_digits);
    tcase_add_test(tc, the_key_is_stated_at_the_depth_asked_for);
    tcase_add_test(tc, the_source_gives_the_same_test_examples_on_every_open);
    tcase_add_test(tc, score_passkey_prints_each_cell_as_counted_by_hand);
    suite_add_tcase(s, tc);
    return s;
}
