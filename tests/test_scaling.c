/*
 * test_scaling.c - sweep.scaling: the Scaling section and scaling.csv from
 * synthetic summaries whose designs follow known power laws (a gap that
 * closes, one that widens, one that holds; a frontier bent on purpose
 * whose held-out check must fail and say so; too few budgets), and the
 * spec's errors.
 */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "al_csv.h"
#include "al_report.h"
#include "al_sweep_run.h"
#include "al_test.h"

/* ------------------------------------------------------------ synthetic */

/* A design's loss law L = E + A x^-alpha with x = C / 1e12, and an extra
 * loss at the largest budget (a bend). */
typedef struct law {
    const char *name;
    double E, A, alpha, bend;
} law;

static const double budgets[] = {1e12, 3.16e12, 1e13, 3.16e13, 1e14};

/* Deterministic noise in [-1, 1). */
static double noise(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return ((*s >> 8) & 0xffff) / 32768.0 - 1.0;
}

/* summary.csv rows of the designs at 2 sizes x n_budget budgets x 3
 * seeds. The frontier is the law itself: size 0 is on it at the small
 * budgets and 0.03 above at the large ones, size 1 the other way round.
 * Each seed's noise is mostly shared by all designs (paired), plus a
 * little of its own. */
static char *write_summary(const law *d, int n_design, int n_budget)
{
    size_t cap = 1 << 20, len = 0;
    char *text = malloc(cap);
    len += (size_t)snprintf(text, cap, "trial,config,group,baseline,variant,seed,"
                            "kv_bytes_per_token,val_loss,test_loss,status,scaling_size,"
                            "scaling_flops\n");
    for (int k = 0; k < n_design; k++)
        for (int s = 0; s < 2; s++)
            for (int b = 0; b < n_budget; b++)
                for (int seed = 1; seed <= 3; seed++) {
                    unsigned common = (unsigned)(seed * 7919 + b * 31 + s * 3), own = common +
                                      (unsigned)k * 104729u;
                    double x = budgets[b] / 1e12, off = (b >= 2) == (s == 0) ? 0.03 : 0;
                    double L = d[k].E + d[k].A * pow(x, -d[k].alpha) + off +
                               (b == n_budget - 1 ? d[k].bend : 0) + 0.004 * noise(&common) +
                               0.001 * noise(&own);
                    char g[128];
                    snprintf(g, sizeof g, "%s_size%d_flops%g", d[k].name, s, budgets[b]);
                    len += (size_t)snprintf(text + len, cap - len, "%s_seed%d,%s,%s,%d,%s,%d,"
                                            "%d,%.9f,%.9f,ok,%d,%.9g\n", g, seed, g, g, k == 0,
                                            d[k].name, seed, 1000 - 100 * k, L + 0.01, L, s,
                                            budgets[b]);
                }
    return text;
}

static char *report_of(const law *d, int n_design, int n_budget)
{
    char *dir = al_test_tmpdir(), *text = write_summary(d, n_design, n_budget);
    free(al_test_write(dir, "summary.csv", text));
    free(text);
    setenv("AL_GNUPLOT", "/nonexistent/gnuplot", 1);
    al_report_stats st;
    al_err e;
    ck_assert_msg(al_report_write(dir, &st, &e) == 0, "%s", e.msg);
    unsetenv("AL_GNUPLOT");
    return dir;
}

static char *read_text(const char *dir, const char *name)
{
    char path[4300], *t = NULL;
    size_t n;
    al_err e;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ck_assert_msg(al_read_file(path, &t, &n, &e) == 0, "%s", e.msg);
    return t;
}

/* scaling.csv's cell in the row of design `name`. */
static const char *cell(const al_csv *t, const char *name, const char *col)
{
    for (int r = 0; r < t->n_rows; r++)
        if (strcmp(al_csv_cell(t, r, "attention"), name) == 0) return al_csv_cell(t, r, col);
    ck_abort_msg("no row '%s' in scaling.csv", name);
    return NULL;
}

static double num(const al_csv *t, const char *name, const char *col)
{
    const char *v = cell(t, name, col);
    ck_assert_msg(v[0], "%s: %s is blank", name, col);
    return atof(v);
}

static void read_csv(const char *dir, al_csv *t)
{
    char path[4300];
    snprintf(path, sizeof path, "%s/scaling.csv", dir);
    al_test_read_csv(path, t);
}

/* ------------------------------------------------------------ verdicts */

/* The baseline and three designs of known laws (x = C / 1e12):
 *   closing:  same E, a larger A: gap 0.6 x^-0.3 falls toward zero;
 *   widening: E 0.15 higher, A smaller: gap 0.15 - 0.3 x^-0.3 grows;
 *   holding:  the baseline's law + 0.05: the gap stays 0.05. */
static const law four[] = {
    {"mha", 1.0, 2.0, 0.3, 0},
    {"mqa", 1.0, 2.6, 0.3, 0},
    {"gqa-kv2", 1.15, 1.7, 0.3, 0},
    {"mla", 1.05, 2.0, 0.3, 0},
};

START_TEST(known_power_laws_give_closes_widens_and_holds)
{
    char *dir = report_of(four, 4, 5);
    al_csv t;
    read_csv(dir, &t);
    ck_assert_int_eq(t.n_rows, 4);
    ck_assert_str_eq(al_csv_cell(&t, 0, "attention"), "mha");   /* the baseline first */
    ck_assert_str_eq(cell(&t, "mha", "verdict"), "baseline");
    ck_assert_str_eq(cell(&t, "mqa", "verdict"), "closes");
    ck_assert_str_eq(cell(&t, "gqa-kv2", "verdict"), "widens");
    ck_assert_str_eq(cell(&t, "mla", "verdict"), "holds");
    /* the fit recovers the laws through noise of a few thousandths */
    ck_assert_double_eq_tol(num(&t, "mha", "alpha"), 0.3, 0.05);
    ck_assert_double_eq_tol(num(&t, "mha", "E"), 1.0, 0.05);
    ck_assert(num(&t, "mha", "alpha_lo") < 0.3 && 0.3 < num(&t, "mha", "alpha_hi"));
    /* gaps: at C_max (x = 100) and extrapolated to x = 1000, 10000 */
    ck_assert_double_eq_tol(num(&t, "mqa", "gap_at_max"), 0.6 * pow(100, -0.3), 0.01);
    ck_assert_double_eq_tol(num(&t, "mqa", "gap_10x"), 0.6 * pow(1000, -0.3), 0.02);
    ck_assert(num(&t, "mqa", "gap_10x_lo") < 0.6 * pow(1000, -0.3) &&
              0.6 * pow(1000, -0.3) < num(&t, "mqa", "gap_10x_hi"));
    ck_assert_double_eq_tol(num(&t, "gqa-kv2", "gap_100x"), 0.15 - 0.3 * pow(1e4, -0.3), 0.03);
    ck_assert_double_eq_tol(num(&t, "mla", "gap_10x"), 0.05, 0.01);
    ck_assert(num(&t, "mqa", "gap_change_10x_hi") < 0);
    ck_assert(num(&t, "gqa-kv2", "gap_change_10x_lo") > 0);
    /* every frontier follows its law: the held-out check passes */
    for (int k = 0; k < 4; k++) ck_assert_str_eq(cell(&t, four[k].name, "heldout_inside"), "true");
    ck_assert_double_eq_tol(num(&t, "mha", "heldout_measured"), 1.0 + 2.0 * pow(100, -0.3),
                            0.01);
    al_csv_free(&t);
    char *md = read_text(dir, "report.md");
    ck_assert_msg(strstr(md, "\n## Scaling\n") && strstr(md, "| mqa |") &&
                  strstr(md, "**closes** |") && strstr(md, "**widens** |") &&
                  strstr(md, "**holds** |") && strstr(md, "The verdict's rule") &&
                  strstr(md, "1B-scale") && !strstr(md, "; held-out check failed") &&
                  !strstr(md, "the held-out check failed.**"), "%.3000s", strstr(md, "## Scaling"));
    /* the frontier table names the size on it: 0 at the small budgets, 1 at the large */
    ck_assert(strstr(md, "(size 0) |") && strstr(md, "(size 1) |"));
    free(md);
    /* the plots' data: per design the frontier, then the fit */
    char *fit = read_text(dir, "scaling_fit.dat");
    ck_assert_msg(strstr(fit, "# mqa frontier\n1e+12 ") && strstr(fit, "# mqa fit\n"), "%s",
                  fit);
    free(fit);
    free(dir);
}
END_TEST

/* A frontier bent on purpose (0.1 nats above its law at the largest
 * budget): fitted on the other budgets, the law misses it; the check
 * fails and the verdict, the csv and the report say so, and so does the
 * verdict of a design compared with a bent baseline. */
START_TEST(bent_frontier_fails_its_heldout_check_and_says_so)
{
    static const law bent[] = {
        {"mha", 1.0, 2.0, 0.3, 0},
        {"mqa", 1.0, 2.6, 0.3, 0.1},
    };
    char *dir = report_of(bent, 2, 5);
    al_csv t;
    read_csv(dir, &t);
    ck_assert_str_eq(cell(&t, "mha", "heldout_inside"), "true");
    ck_assert_str_eq(cell(&t, "mqa", "heldout_inside"), "false");
    ck_assert(num(&t, "mqa", "heldout_error") < -0.05);
    ck_assert(num(&t, "mqa", "heldout_predicted") < num(&t, "mqa", "heldout_lo"));
    ck_assert_msg(strstr(cell(&t, "mqa", "verdict"), "; held-out check failed"), "%s",
                  cell(&t, "mqa", "verdict"));
    al_csv_free(&t);
    char *md = read_text(dir, "report.md");
    ck_assert_msg(strstr(md, "**mqa: the held-out check failed.**") &&
                  strstr(md, "| **no** |"), "%.3000s", strstr(md, "## Scaling"));
    free(md), free(dir);
    static const law bent_base[] = {
        {"mha", 1.0, 2.0, 0.3, 0.1},
        {"mqa", 1.0, 2.6, 0.3, 0},
    };
    dir = report_of(bent_base, 2, 5);
    read_csv(dir, &t);
    ck_assert_msg(strstr(cell(&t, "mqa", "verdict"), "the baseline's held-out check failed"),
                  "%s", cell(&t, "mqa", "verdict"));
    al_csv_free(&t);
    free(dir);
}
END_TEST

/* Three budgets: the frontier is shown, but no fit and no verdict, and the
 * section says why. */
START_TEST(fewer_than_four_budgets_say_so)
{
    char *dir = report_of(four, 2, 3);
    al_csv t;
    read_csv(dir, &t);
    ck_assert_str_eq(cell(&t, "mqa", "verdict"), "cannot tell");
    ck_assert_str_eq(cell(&t, "mqa", "alpha"), "");
    al_csv_free(&t);
    char *md = read_text(dir, "report.md");
    ck_assert_msg(strstr(md, "**Fits need at least 4 budgets; this sweep has 3**") &&
                  strstr(md, "The compute frontier"), "%.3000s", strstr(md, "## Scaling"));
    free(md), free(dir);
}
END_TEST

/* ------------------------------------------------------------ the spec */

/* An experiment file in dir: a tiny model on the test corpus, `train`'s
 * extra keys, then `sweep`. Line 6 is the first of sweep. */
static char *write_exp(const char *dir, const char *train, const char *sweep)
{
    char text[8192];
    snprintf(text, sizeof text,
             "name: scal\n"
             "data: {source: text, path: %s}\n"
             "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16,\n"
             "        match_params: {to: {variant: mha}, by: d_ff}}\n"
             "train: {batch_size: 2, eval_batches: 2, threads: 1, warmup_steps: 2%s}\n"
             "%s", al_test_corpus(), train, sweep);
    return al_test_write(dir, "exp.yaml", text);
}

static const struct { const char *sweep, *want; } bad_specs[] = {
    {"sweep:\n  scaling: [1]\n",
     "7:12: error: 'sweep.scaling' must be a mapping {sizes: [...], flops: [...]}"},
    {"sweep:\n  scaling: {sizes: [{d_model: 16}], flop: [1.0e+9]}\n",
     "7:37: error: unknown key 'flop' in 'sweep.scaling' (known: sizes, flops)"},
    {"sweep:\n  scaling: {sizes: [{d_model: 16}]}\n",
     "7:12: error: 'sweep.scaling' needs 'flops' (sizes: [{d_model: 64, n_layer: 2}, ...], "
     "flops: [2.0e+12, ...])"},
    {"sweep:\n  scaling: {sizes: [], flops: [1.0e+9]}\n",
     "7:20: error: 'sweep.scaling.sizes' must be a non-empty list"},
    {"sweep:\n  scaling: {sizes: [16], flops: [1.0e+9]}\n",
     "7:21: error: a size in 'sweep.scaling.sizes' must be a non-empty mapping of model keys, "
     "e.g. {d_model: 64, n_layer: 2}"},
    {"sweep:\n  scaling: {sizes: [{attention: {variant: mqa}}], flops: [1.0e+9]}\n",
     "7:22: error: 'sweep.scaling.sizes': 'attention' makes the design, not its size: sweep it "
     "in 'sweep.grid'"},
    {"sweep:\n  grid: {model.d_model: [16, 32]}\n  scaling: {sizes: [{d_model: 16}], flops: "
     "[1.0e+9]}\n",
     "8:22: error: 'sweep.scaling.sizes' sets 'model.d_model', which sweep axis 'model.d_model' "
     "(line 7) sets too"},
    {"sweep:\n  scaling: {sizes: [{d_model: 16}], flops: [1.0e+9, -2]}\n",
     "7:53: error: a budget in 'sweep.scaling.flops' must be a positive number of training "
     "FLOPs, e.g. 2.0e+12"},
    {"sweep:\n  scaling: {sizes: [{d_model: 16}], flops: [1.0e+9, 1000000000]}\n",
     "7:53: error: budget 1e+09 is listed twice in 'sweep.scaling.flops'"},
    {"sweep:\n  scalling: {}\n",
     "7:3: error: unknown key 'scalling' in 'sweep' (did you mean 'scaling'?)"},
};

START_TEST(bad_scaling_specs_name_file_line_and_column)
{
    char *dir = al_test_tmpdir();
    for (size_t i = 0; i < sizeof bad_specs / sizeof *bad_specs; i++) {
        char *path = write_exp(dir, "", bad_specs[i].sweep), want[1024];
        al_sweep s;
        al_err e;
        ck_assert_int_ne(al_sweep_load(path, NULL, 0, NULL, 0, &s, &e), 0);
        snprintf(want, sizeof want, "%s:%s", path, bad_specs[i].want);
        ck_assert_str_eq(e.msg, want);
        free(path);
    }
    free(dir);
}
END_TEST

static const char two_by_two[] =
    "sweep:\n"
    "  seeds: 2\n"
    "  grid:\n"
    "    model.attention: [{variant: mha}, {variant: gqa, n_kv_head: 1}]\n"
    "  scaling:\n"
    "    sizes: [{d_model: 16, n_head: 2}, {d_model: 32, n_head: 4, n_layer: 2}]\n"
    "    flops: [2.0e+8, 8.0e+8]\n";

/* 2 designs x 2 sizes x 2 budgets x 2 seeds: seeds outermost, then the
 * design, the size, the budget; named by size and budget; each size's keys
 * merged into the file's model; train.flops the budget; every design
 * matched in parameters to mha at its size; the baseline is mha at every
 * size and budget. */
START_TEST(scaling_grid_expands_to_the_documented_trials)
{
    char *dir = al_test_tmpdir(), *path = write_exp(dir, "", two_by_two);
    al_sweep s;
    al_err e;
    ck_assert_msg(al_sweep_load(path, NULL, 0, NULL, 0, &s, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(s.n_trials, 16);
    static const char *const first[] = {
        "mha_size0_flops2.0e+8_seed1", "mha_size0_flops8.0e+8_seed1",
        "mha_size1_flops2.0e+8_seed1", "mha_size1_flops8.0e+8_seed1",
        "gqa-kv1_size0_flops2.0e+8_seed1", "gqa-kv1_size0_flops8.0e+8_seed1",
        "gqa-kv1_size1_flops2.0e+8_seed1", "gqa-kv1_size1_flops8.0e+8_seed1",
        "mha_size0_flops2.0e+8_seed2"};
    for (int i = 0; i < 9; i++) ck_assert_str_eq(s.trials[i].id, first[i]);
    size_t mha_params[2] = {0, 0};
    for (int i = 0; i < s.n_trials; i++) {
        const al_sweep_trial *t = &s.trials[i];
        int size = (i / 2) % 2, budget = i % 2, mha = (i / 4) % 2 == 0;
        ck_assert_int_eq(t->scaling_size, size);
        ck_assert_double_eq(t->scaling_flops, budget ? 8.0e8 : 2.0e8);
        ck_assert_double_eq(t->cfg.train.flops, t->scaling_flops);
        ck_assert_int_eq(t->cfg.model.d_model, size ? 32 : 16);
        ck_assert_int_eq(t->cfg.model.n_head, size ? 4 : 2);
        ck_assert_int_eq(t->cfg.model.n_layer, size ? 2 : 1);   /* 1: the file's */
        ck_assert_int_eq(t->cfg.model.seq_len, 16);             /* kept, not replaced */
        ck_assert_int_eq(t->baseline, mha);
        if (mha) mha_params[size] = t->params;
    }
    ck_assert(mha_params[0] && mha_params[1] > mha_params[0]);
    for (int i = 0; i < s.n_trials; i++) {
        const al_sweep_trial *t = &s.trials[i];
        /* matched to mha at the same size: gqa's smaller K/V projections
         * are made up in the MLP, to within its step */
        ck_assert_uint_eq(t->cfg.model.match.params_to, mha_params[t->scaling_size]);
        double rel = fabs((double)t->params - (double)mha_params[t->scaling_size]) /
                     (double)mha_params[t->scaling_size];
        ck_assert_msg(rel < 0.02, "%s: %zu params against %zu", t->id, t->params,
                      mha_params[t->scaling_size]);
    }
    ck_assert_str_eq(s.trials[5].group, "gqa-kv1_size0_flops8.0e+8");
    al_sweep_free(&s);
    free(path), free(dir);
}
END_TEST

/* ------------------------------------------------------------ real sweeps */

static int run_attnlab(char **out, const char *args)
{
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "%s %s", al_test_binary(), args);
    return al_test_run(cmd, out);
}

/* summary.csv's cell as a number. */
static double sum_num(const al_csv *t, int r, const char *col)
{
    const char *v = al_csv_cell(t, r, col);
    ck_assert_msg(v[0], "row %d: %s is blank", r, col);
    return atof(v);
}

/* The frontier at budget C of design `variant`, worked from summary.csv
 * by hand: the lowest over sizes of the mean test loss over seeds. */
static double frontier_by_hand(const al_csv *t, const char *variant, double C)
{
    double best = INFINITY;
    for (int size = 0; size < 8; size++) {
        double sum = 0;
        int n = 0;
        for (int r = 0; r < t->n_rows; r++)
            if (strcmp(al_csv_cell(t, r, "variant"), variant) == 0 &&
                sum_num(t, r, "scaling_size") == size && sum_num(t, r, "scaling_flops") == C)
                sum += sum_num(t, r, "test_loss"), n++;
        if (n && sum / n < best) best = sum / n;
    }
    return best;
}

/* A tiny real scaling sweep, end to end: 2 designs x 2 sizes x 4 budgets x
 * 2 seeds through the attnlab binary, then its report. Every trial trains
 * the steps its budget buys (train.flops), the summary carries the size
 * and budget, and scaling.csv's measured frontier at the largest budget is
 * the one worked from the summary by hand. */
START_TEST(tiny_real_scaling_sweep_end_to_end)
{
    char *dir = al_test_tmpdir(), *out, args[4400], r[4200];
    char *path = write_exp(dir, ", eval_every: 20",
                           "sweep:\n  seeds: 2\n  grid:\n"
                           "    model.attention: [{variant: mha}, {variant: mqa}]\n"
                           "  scaling:\n    sizes: [{d_model: 16, n_head: 2}, "
                           "{d_model: 32, n_head: 4}]\n"
                           "    flops: [2.0e+7, 4.0e+7, 8.0e+7, 1.6e+8]\n");
    snprintf(r, sizeof r, "%s/r", dir);
    snprintf(args, sizeof args, "sweep %s --out %s --jobs 2", path, r);
    ck_assert_int_eq(run_attnlab(&out, args), 0);
    ck_assert_msg(strstr(out, "32 ok, 0 diverged, 0 failed"), "%s", out);
    free(out);
    snprintf(args, sizeof args, "report %s", r);
    setenv("AL_GNUPLOT", "/nonexistent/gnuplot", 1);
    ck_assert_int_eq(run_attnlab(&out, args), 0);
    unsetenv("AL_GNUPLOT");
    free(out);
    al_csv sum, sc;
    al_err e;
    snprintf(args, sizeof args, "%s/summary.csv", r);
    ck_assert_msg(al_csv_read(args, &sum, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(sum.n_rows, 32);
    for (int i = 0; i < sum.n_rows; i++) {
        /* the budget buys floor(C / (flops per token x tokens per step)) steps */
        double C = sum_num(&sum, i, "scaling_flops"), fpt = sum_num(&sum, i,
                                                                    "train_flops_per_token");
        double tps = sum_num(&sum, i, "tokens_per_step");
        ck_assert_double_eq(sum_num(&sum, i, "steps"), floor(C / (fpt * tps)));
        ck_assert(sum_num(&sum, i, "train_flops") <= C);
        char want[128];
        snprintf(want, sizeof want, "_size%.0f_flops", sum_num(&sum, i, "scaling_size"));
        ck_assert_msg(strstr(al_csv_cell(&sum, i, "trial"), want), "%s",
                      al_csv_cell(&sum, i, "trial"));
    }
    read_csv(r, &sc);
    ck_assert_int_eq(sc.n_rows, 2);
    ck_assert_str_eq(al_csv_cell(&sc, 0, "attention"), "mha");
    ck_assert_str_eq(al_csv_cell(&sc, 1, "attention"), "mqa");
    ck_assert_str_eq(cell(&sc, "mqa", "n_budgets"), "4");
    ck_assert_str_eq(cell(&sc, "mqa", "n_seeds"), "2");
    for (int k = 0; k < 2; k++) {
        const char *v = k ? "mqa" : "mha";
        ck_assert_double_eq_tol(num(&sc, v, "heldout_measured"),
                                frontier_by_hand(&sum, v, 1.6e8), 1e-5);
    }
    const char *verdict = cell(&sc, "mqa", "verdict");
    ck_assert_msg(strncmp(verdict, "closes", 6) == 0 || strncmp(verdict, "holds", 5) == 0 ||
                  strncmp(verdict, "widens", 6) == 0 || strncmp(verdict, "cannot tell", 11) == 0,
                  "%s", verdict);
    al_csv_free(&sc), al_csv_free(&sum);
    free(path), free(dir);
}
END_TEST

/* summary.csv without its timing columns (tokens_per_s, wall_s). */
static char *summary_without_timing(const char *dir)
{
    char *t = read_text(dir, "summary.csv"), *o = calloc(strlen(t) + 1, 1), *out = o;
    int col = 0, c_tok = -1, c_wall = -1;
    for (char *p = t; *p && *p != '\n'; p++) {
        if (strncmp(p, "tokens_per_s,", 13) == 0 && (p == t || p[-1] == ',')) c_tok = col;
        if (strncmp(p, "wall_s,", 7) == 0 && (p == t || p[-1] == ',')) c_wall = col;
        col += *p == ',';
    }
    ck_assert(c_tok >= 0 && c_wall >= 0);
    col = 0;
    for (char *p = t; *p; p++) {
        if (*p == '\n') col = -1;
        if (col != c_tok && col != c_wall) *o++ = *p;
        if (*p == ',' || *p == '\n') col++;
    }
    free(t);
    return out;
}

/* Wait (up to 120 s) until trial `done` has a result and `running` is
 * past step 0 without one. */
static int wait_mid_trial(const char *r, const char *done, const char *running)
{
    char a[4400], c[4400], tdir[4400];
    snprintf(a, sizeof a, "%s/%s/result.json", r, done);
    snprintf(c, sizeof c, "%s/%s/result.json", r, running);
    snprintf(tdir, sizeof tdir, "%s/%s", r, running);
    struct timespec nap = {0, 2 * 1000 * 1000};
    for (int i = 0; i < 60000; i++) {
        al_trial_progress p;
        if (al_test_exists(a) && !al_test_exists(c) && al_sweep_read_progress(tdir, &p) == 0 && p.step > 0)
            return 1;
        nanosleep(&nap, NULL);
    }
    return 0;
}

/* A scaling sweep killed with SIGKILL in the middle of its second trial
 * resumes (that trial from its checkpoint) to exactly the summary of one
 * never interrupted: same trials, sizes, budgets, steps and losses. */
START_TEST(killed_scaling_sweep_resumes_to_the_uninterrupted_summary)
{
    char *dir = al_test_tmpdir(), *out, args[4400], r1[4200], r2[4200];
    char *path = write_exp(dir, ", eval_every: 100, checkpoint_every: 20",
                           "sweep:\n  scaling:\n    sizes: [{d_model: 16, n_head: 2}]\n"
                           "    flops: [2.0e+9, 4.0e+9]\n");
    snprintf(r1, sizeof r1, "%s/full", dir);
    snprintf(r2, sizeof r2, "%s/killed", dir);
    snprintf(args, sizeof args, "sweep %s --out %s --jobs 1", path, r1);
    ck_assert_int_eq(run_attnlab(&out, args), 0);
    free(out);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int nul = open("/dev/null", O_WRONLY);
        dup2(nul, 1), dup2(nul, 2);
        execl(al_test_binary(), al_test_binary(), "sweep", path, "--out", r2, "--jobs", "1",
              (char *)NULL);
        _exit(127);
    }
    ck_assert_msg(wait_mid_trial(r2, "size0_flops2.0e+9_seed1", "size0_flops4.0e+9_seed1"),
                  "never caught mid-trial");
    kill(pid, SIGKILL);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    snprintf(args, sizeof args, "sweep %s --out %s --jobs 1", path, r2);
    ck_assert_int_eq(run_attnlab(&out, args), 0);
    ck_assert_msg(strstr(out, "1 ok, 0 diverged, 0 failed, 1 kept from before") &&
                  strstr(out, "start size0_flops4.0e+9_seed1 (resuming from its checkpoint)"), "%s",
                  out);
    free(out);
    char *a = summary_without_timing(r1), *b = summary_without_timing(r2);
    ck_assert_str_eq(a, b);
    ck_assert_msg(strstr(a, "\nsize0_flops4.0e+9_seed1,") && strstr(a, ",0,4e+09,"), "%s", a);
    free(a), free(b), free(path), free(dir);
}
END_TEST

Suite *scaling_suite(void)
{
    Suite *s = suite_create("scaling");
    TCase *tc = tcase_create("report");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, known_power_laws_give_closes_widens_and_holds);
    tcase_add_test(tc, bent_frontier_fails_its_heldout_check_and_says_so);
    tcase_add_test(tc, fewer_than_four_budgets_say_so);
    suite_add_tcase(s, tc);
    tc = tcase_create("spec");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, bad_scaling_specs_name_file_line_and_column);
    tcase_add_test(tc, scaling_grid_expands_to_the_documented_trials);
    suite_add_tcase(s, tc);
    tc = tcase_create("run");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, tiny_real_scaling_sweep_end_to_end);
    tcase_add_test(tc, killed_scaling_sweep_resumes_to_the_uninterrupted_summary);
    suite_add_tcase(s, tc);
    return s;
}
