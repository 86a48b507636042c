/*
 * test_dist.c - ranks and data-parallel training (src/train/mpi.c, src/train/data_parallel.c).
 *
 * In-process: the loss share of a slice, and that slices weighted by their
 * shares give the whole batch's loss and gradient (the identity the
 * allreduce relies on). Through mpirun (skipped with a message where this
 * build has no MPI or mpirun is missing): two ranks train like one process,
 * and the failure paths (indivisible batch, replicas that drift, a launcher
 * that does not match) end with a clear error instead of a hang.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_mpi.h"
#include "al_data_parallel.h"
#include "al_model.h"
#include "al_registry.h"
#include "al_test.h"
#include "al_test_model.h"

/* ------------------------------------------------------------ in-process */

START_TEST(share_is_the_slice_weight_over_the_batch_weight)
{
    ck_assert_double_eq_tol(al_dp_share(NULL, 8, 4, 1, 2), 0.5, 1e-15);
    ck_assert_double_eq_tol(al_dp_share(NULL, 8, 4, 3, 4), 0.25, 1e-15);
    /* B = 4, T = 2, two ranks: rows 0-1 carry 1 answer, rows 2-3 carry 3. */
    float w[8] = {0, 1, 0, 0, 1, 1, 0, 1};
    ck_assert_double_eq_tol(al_dp_share(w, 4, 2, 0, 2), 0.25, 1e-15);
    ck_assert_double_eq_tol(al_dp_share(w, 4, 2, 1, 2), 0.75, 1e-15);
    float none[8] = {0};
    ck_assert_double_eq(al_dp_share(none, 4, 2, 0, 2), 0.0);
}
END_TEST

static void tiny_model(al_model *m, int B, int T)
{
    al_model_config c;
    ck_assert_int_eq(al_test_tiny_config(&c, al_variant_find("gqa"), 2, 16, 4, 4, T, 13), 0);
    al_err e;
    ck_assert_int_eq(al_model_init(m, &c, &e), 0);
    al_model_init_weights(m, 11);
    ck_assert_int_eq(al_model_reserve(m, B, T, &e), 0);
}

/* What N ranks compute, done one slice after another in one process:
 * sum_r share_r * (loss_r, grad_r) must be the whole batch's (loss, grad). */
static void check_slices_make_the_batch(const float *w)
{
    enum { B = 4, T = 6, N = 2 };
    al_model m;
    tiny_model(&m, B, T);
    int in[B * T], tgt[B * T];
    al_rng r;
    al_rng_seed(&r, 5);
    for (int i = 0; i < B * T; i++) in[i] = (int)al_rng_below(&r, 13);
    for (int i = 0; i < B * T; i++) tgt[i] = (int)al_rng_below(&r, 13);
    al_model_zero_grad(&m);
    double full = al_model_forward(&m, in, tgt, w, B, T);
    al_model_backward(&m);
    double *g_full = malloc(m.n_params * sizeof(double)), *g_sum = calloc(m.n_params, sizeof(double));
    for (size_t i = 0; i < m.n_params; i++) g_full[i] = m.grads[i];
    double loss = 0;
    for (int k = 0; k < N; k++) {
        size_t off = (size_t)k * (B / N) * T;
        double share = al_dp_share(w, B, T, k, N);
        al_model_zero_grad(&m);
        loss += share * al_model_forward(&m, in + off, tgt + off, w ? w + off : NULL, B / N, T);
        al_model_backward(&m);
        for (size_t i = 0; i < m.n_params; i++) g_sum[i] += share * m.grads[i];
    }
    ck_assert_double_eq_tol(loss, full, 1e-6 * full);
    double err = al_check_rel_err(g_full, g_sum, m.n_params);
    ck_assert_msg(err < 1e-5, "gradient relative error %g", err);
    free(g_full), free(g_sum);
    al_model_free(&m);
}

START_TEST(slices_weighted_by_share_give_the_batch_loss_and_gradient)
{
    check_slices_make_the_batch(NULL);
    /* Masked task data: unequal answer counts per slice (1 and 5). */
    float w[24] = {0};
    w[5] = 1;
    w[12 + 1] = w[12 + 3] = w[12 + 5] = w[18 + 2] = w[18 + 4] = 1;
    check_slices_make_the_batch(w);
}
END_TEST

START_TEST(single_rank_is_the_plain_forward_and_backward)
{
    al_err e;
    ck_assert_int_eq(al_mpi_init(&e), 0);
    ck_assert_int_eq(al_mpi_size(), 1);
    ck_assert_int_eq(al_mpi_rank(), 0);
    ck_assert_int_eq(al_dp_check_batch(7, &e), 0);
    snprintf(e.msg, sizeof e.msg, "mine");
    ck_assert_int_eq(al_mpi_agree(1, &e), -1);
    ck_assert_str_eq(e.msg, "mine");
    ck_assert_int_eq(al_mpi_agree(0, &e), 0);
    enum { B = 2, T = 6 };
    al_model a, b;
    tiny_model(&a, B, T);
    tiny_model(&b, B, T);
    int in[B * T], tgt[B * T];
    for (int i = 0; i < B * T; i++) in[i] = (i * 7) % 13, tgt[i] = (i * 5 + 1) % 13;
    al_model_zero_grad(&a);
    al_model_zero_grad(&b);
    double la = al_model_forward(&a, in, tgt, NULL, B, T);
    al_model_backward(&a);
    double lb = al_dp_forward_backward(&b, in, tgt, NULL, B, T);
    ck_assert(memcmp(&la, &lb, sizeof la) == 0);
    ck_assert(memcmp(a.grads, b.grads, a.n_params * sizeof(float)) == 0);
    ck_assert(al_dp_checksum(&a) == al_dp_checksum(&b));
    b.params[3] += 1e-6f;
    ck_assert(al_dp_checksum(&a) != al_dp_checksum(&b));
    al_model_free(&a), al_model_free(&b);
    al_mpi_finalize();
}
END_TEST

/* ------------------------------------------------------------ through mpirun */

static int have_mpirun(const char *test)
{
    if (!al_mpi_available()) {
        fprintf(stderr, "SKIP %s: built without MPI (install libopenmpi-dev)\n", test);
        return 0;
    }
    if (al_test_run("command -v mpirun", NULL) != 0) {
        fprintf(stderr, "SKIP %s: mpirun not found (install openmpi-bin)\n", test);
        return 0;
    }
    return 1;
}

enum { NO_LEAK_CHECK = 0, LEAK_CHECK = 1 };

/* np 0: no mpirun. env goes before the launcher, wrap between it and
 * attnlab. Returns the exit status, output in *out. */
static int run_train(int np, int leaks, const char *env, const char *wrap, const char *cfg,
                     const char *out_dir, const char *sets, char **out)
{
    char cmd[24576];
    char launch[64] = "";
    if (np) snprintf(launch, sizeof launch, "timeout 300 mpirun -np %d", np);
    snprintf(cmd, sizeof cmd, "%s %s %s %s %s train %s --out %s %s",
             np ? al_test_mpi_env(leaks) : "", env, launch, wrap, al_test_binary(), cfg,
             out_dir, sets);
    return al_test_run(cmd, out);
}

static char *dp_config(const char *dir)
{
    char text[6001];
    for (int i = 0; i < 6000; i++) text[i] = "the cat sat on a mat; a dog ran "[(i * 7 + i / 31) % 32];
    text[6000] = 0;
    free(al_test_write(dir, "text.txt", text));
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "data: {source: text, path: %s/text.txt}\n"
             "model: {n_layer: 2, d_model: 32, n_head: 2, d_head: 16, seq_len: 32,\n"
             "        attention: {variant: gqa, n_kv_head: 1}}\n"
             "train: {steps: 20, batch_size: 8, lr: 0.003, warmup_steps: 2, eval_every: 5,\n"
             "        eval_batches: 2, threads: 1}\n", dir);
    return al_test_write(dir, "c.yaml", yaml);
}

/* train_loss and val_loss of every metrics row (5 rows for 20 steps). */
static int read_losses(const char *dir, double *train, double *val, int cap)
{
    char path[4200], *buf;
    size_t n;
    al_err e;
    snprintf(path, sizeof path, "%s/metrics.csv", dir);
    ck_assert_msg(al_read_file(path, &buf, &n, &e) == 0, "%s", e.msg);
    int rows = 0;
    char *save, *line = strtok_r(buf, "\n", &save);   /* header */
    while ((line = strtok_r(NULL, "\n", &save)) && rows < cap) {
        char *p = strchr(line, ',') + 1;
        train[rows] = *p == ',' ? NAN : strtod(p, NULL);
        val[rows++] = strtod(strchr(p, ',') + 1, NULL);
    }
    free(buf);
    return rows;
}

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++) n++;
    return n;
}

START_TEST(two_ranks_train_like_one_process)
{
    if (!have_mpirun("two_ranks_train_like_one_process")) return;
    char *dir = al_test_tmpdir(), *cfg = dp_config(dir), d1[4200], d2[4200], *out;
    snprintf(d1, sizeof d1, "%s/one", dir);
    snprintf(d2, sizeof d2, "%s/two", dir);
    ck_assert_msg(run_train(0, NO_LEAK_CHECK, "", "", cfg, d1, "", &out) == 0, "%s", out);
    free(out);
    ck_assert_msg(run_train(2, LEAK_CHECK, "", "", cfg, d2, "", &out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "ranks=2"), "%s", out);
    /* rank 0 alone prints the result line and the progress */
    ck_assert_msg(count(out, "best_val_loss=") == 1, "%s", out);
    ck_assert_msg(count(out, "step 20/20") == 1, "%s", out);
    free(out);
    double t1[8], v1[8], t2[8], v2[8];
    ck_assert_int_eq(read_losses(d1, t1, v1, 8), 5);
    ck_assert_int_eq(read_losses(d2, t2, v2, 8), 5);
    for (int i = 0; i < 5; i++) {
        ck_assert_double_eq_tol(v2[i], v1[i], 1e-4 * v1[i]);
        if (i) ck_assert_double_eq_tol(t2[i], t1[i], 1e-4 * t1[i]);
    }
    ck_assert_msg(v1[4] < v1[0] - 0.3, "the run should learn: %g -> %g", v1[0], v1[4]);
    free(cfg), free(dir);
}
END_TEST

static int same_file(const char *a, const char *b)
{
    char *x, *y;
    size_t nx, ny;
    al_err e;
    ck_assert_msg(al_read_file(a, &x, &nx, &e) == 0, "%s", e.msg);
    ck_assert_msg(al_read_file(b, &y, &ny, &e) == 0, "%s", e.msg);
    int same = nx == ny && memcmp(x, y, nx) == 0;
    free(x), free(y);
    return same;
}

/* Rank 0 writes the checkpoint, every rank reads it back on --resume. */
START_TEST(two_ranks_stop_and_resume_bit_identically)
{
    if (!have_mpirun("two_ranks_stop_and_resume_bit_identically")) return;
    char *dir = al_test_tmpdir(), *cfg = dp_config(dir), d1[4200], d2[4200], *out;
    snprintf(d1, sizeof d1, "%s/whole", dir);
    snprintf(d2, sizeof d2, "%s/halves", dir);
    ck_assert_msg(run_train(2, NO_LEAK_CHECK, "", "", cfg, d1, "", &out) == 0, "%s", out);
    free(out);
    ck_assert_msg(run_train(2, NO_LEAK_CHECK, "", "", cfg, d2, "--stop-after 10", &out) == 0, "%s", out);
    ck_assert_msg(strstr(out, "status=stopped steps=10"), "%s", out);
    free(out);
    char a[4300], b[4300];
    snprintf(a, sizeof a, "--resume %s", d2);
    ck_assert_msg(run_train(2, NO_LEAK_CHECK, "", "", cfg, d2, a, &out) == 0, "%s", out);
    free(out);
    snprintf(a, sizeof a, "%s/model.safetensors", d1);
    snprintf(b, sizeof b, "%s/model.safetensors", d2);
    ck_assert(same_file(a, b));
    double t1[8], v1[8], t2[8], v2[8];
    ck_assert_int_eq(read_losses(d1, t1, v1, 8), 5);
    ck_assert_int_eq(read_losses(d2, t2, v2, 8), 5);
    ck_assert(memcmp(v1, v2, sizeof v1) == 0 && memcmp(t1 + 1, t2 + 1, 4 * sizeof *t1) == 0);
    free(cfg), free(dir);
}
END_TEST

START_TEST(failures_under_mpirun_end_every_rank_with_one_message)
{
    if (!have_mpirun("failures_under_mpirun_end_every_rank_with_one_message")) return;
    char *dir = al_test_tmpdir(), *cfg = dp_config(dir), d[4200], *out;
    snprintf(d, sizeof d, "%s/x", dir);
    ck_assert_int_eq(run_train(3, NO_LEAK_CHECK, "", "", cfg, d, "", &out), 2);
    ck_assert_msg(count(out, "'train.batch_size' (8) must be divisible by the number of MPI "
                             "ranks (3)") == 1, "%s", out);
    free(out);
    /* found while training: a run-time failure (1), not bad input */
    ck_assert_int_eq(run_train(2, NO_LEAK_CHECK, "AL_DIST_TEST_PERTURB=1", "", cfg, d, "", &out), 1);
    ck_assert_msg(strstr(out, "replicas differ at step 5"), "%s", out);
    free(out);
    /* a loss that blows up stops both ranks (no rank left waiting); in a
     * new directory, as the one above holds a run now */
    snprintf(d, sizeof d, "%s/y", dir);
    ck_assert_int_eq(run_train(2, NO_LEAK_CHECK, "", "", cfg, d,
                               "--set train.lr=1e6 --set train.min_lr=1e6 --set train.grad_clip=0",
                               &out), 3);
    ck_assert_msg(count(out, "status=diverged") == 1, "%s", out);
    free(out), free(cfg), free(dir);
}
END_TEST

/* A launcher whose rank count this build cannot honour. A PMI launcher's
 * two ranks around one process: Open MPI needs PMIx, a build without MPI
 * has none. Under mpirun, a launcher that says 3 ranks while MPI_Comm_size
 * is 2: the size check after MPI_Init. */
START_TEST(launcher_that_does_not_match_is_refused)
{
    char *dir = al_test_tmpdir(), *cfg = dp_config(dir), d[4200], *out;
    snprintf(d, sizeof d, "%s/x", dir);
    ck_assert_int_eq(run_train(0, NO_LEAK_CHECK, "PMI_SIZE=2 PMI_RANK=0", "", cfg, d, "", &out), 2);
    const char *want = al_mpi_available()
                           ? "started 2 ranks (PMI_SIZE) without PMIx"
                           : "started 2 ranks (PMI_SIZE) but this attnlab was built without MPI";
    ck_assert_msg(strstr(out, want), "%s", out);
    free(out);
    if (have_mpirun("launcher_that_does_not_match_is_refused (size check)")) {
        ck_assert_int_eq(run_train(2, NO_LEAK_CHECK, "", "env -u OMPI_COMM_WORLD_SIZE SLURM_STEP_ID=0 "
                                   "SLURM_STEP_NUM_TASKS=3", cfg, d, "", &out), 2);
        ck_assert_msg(strstr(out, "started 3 ranks (SLURM_STEP_NUM_TASKS) but "
                                  "MPI_Comm_size is 2"), "%s", out);
        free(out);
    }
    free(cfg), free(dir);
}
END_TEST

Suite *dist_suite(void)
{
    Suite *s = suite_create("dist");
    TCase *tc = tcase_create("dist");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, share_is_the_slice_weight_over_the_batch_weight);
    tcase_add_test(tc, slices_weighted_by_share_give_the_batch_loss_and_gradient);
    tcase_add_test(tc, single_rank_is_the_plain_forward_and_backward);
    tcase_add_test(tc, two_ranks_train_like_one_process);
    tcase_add_test(tc, two_ranks_stop_and_resume_bit_identically);
    tcase_add_test(tc, failures_under_mpirun_end_every_rank_with_one_message);
    tcase_add_test(tc, launcher_that_does_not_match_is_refused);
    suite_add_tcase(s, tc);
    return s;
}
