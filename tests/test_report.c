/*
 * test_report.c - the report from a hand-made summary.csv: the Pareto
 * front against a hand-worked answer, seed means and sample standard
 * deviations computed here, curves averaged over seeds, plots with and
 * without gnuplot, and malformed summaries as one-line errors.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "al_report.h"
#include "al_test.h"

/* ------------------------------------------------------------ helpers */

static const char header[] =
    "trial,config,variant,n_kv_head,d_latent,d_rope,causal,seed,params,kv_bytes_per_token,"
    "steps,tokens_per_step,final_train_loss,val_loss,best_val_loss,val_accuracy,"
    "tokens_per_s,wall_s,status,reason\n";

/* Five configurations: mha 2 seeds (2.0, 2.2), gqa 2 seeds (2.3, 2.3),
 * mqa one ok and one failed, mla one seed, "big" dominated by mha.
 * By hand: mla (1536, 2.25) beats gqa (2048, 2.3) on both, mha (4096,
 * 2.1) beats big (8192, 2.6); the front is mqa, mla, mha. */
static const char rows[] =
    "mha_seed1,mha,mha,4,,,true,1,1000,4096,100,64,1.9,2.0,2.0,,1000,1.0,ok,\n"
    "mha_seed2,mha,mha,4,,,true,2,1000,4096,100,64,2.1,2.2,2.2,,1200,1.0,ok,\n"
    "gqa_seed1,gqa,gqa,2,,,true,1,900,2048,100,64,2.2,2.3,2.3,,1100,1.0,ok,\n"
    "gqa_seed2,gqa,gqa,2,,,true,2,900,2048,100,64,2.2,2.3,2.3,,1100,1.0,ok,\n"
    "mqa_seed1,mqa,mqa,1,,,true,1,850,1024,100,64,2.4,2.5,2.5,,1300,1.0,ok,\n"
    "mqa_seed2,mqa,mqa,1,,,true,2,850,1024,100,64,,,,,,0.5,failed,\"exit status 1: boom, with a comma\"\n"
    "mla_seed1,mla,mla,,32,16,true,1,1100,1536,100,64,2.1,2.25,2.25,,900,1.0,ok,\n"
    "big_seed1,big,mha,8,,,true,1,2000,8192,100,64,2.5,2.6,2.6,,500,1.0,ok,\n";

static char *summary_dir(const char *body)
{
    char *dir = al_test_tmpdir(), text[8192];
    snprintf(text, sizeof text, "%s%s", header, body);
    free(al_test_write(dir, "summary.csv", text));
    return dir;
}

/* noinline: inlined into callers, gcc 12 mistakes the returned buffer for
 * a pointer to the local that received it (-Wdangling-pointer). */
static __attribute__((noinline)) char *read_in(const char *dir, const char *name)
{
    char path[4200], *t = NULL;
    size_t n;
    al_err e;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ck_assert_msg(al_read_file(path, &t, &n, &e) == 0, "%s", e.msg);
    return t;
}

/* The report.md table row of a configuration ("| name | ..."). */
static char *table_row(const char *md, const char *config)
{
    char key[128];
    snprintf(key, sizeof key, "\n| %s | ", config);
    const char *p = strstr(md, key);
    if (!p) return strdup("(no such row)");
    return strndup(p + 1, strcspn(p + 1, "\n"));
}

/* The row of a configuration in the second table ("More about each
 * configuration"). */
static char *detail_row(const char *md, const char *config)
{
    const char *more = strstr(md, "## More about each configuration");
    return more ? table_row(more, config) : strdup("(no second table)");
}

static int file_starts_with(const char *dir, const char *name, const char *magic)
{
    char path[4200], buf[16] = {0};
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(buf, 1, strlen(magic), f);
    fclose(f);
    return n == strlen(magic) && memcmp(buf, magic, n) == 0;
}

/* ------------------------------------------------------------ Pareto */

START_TEST(pareto_front_keeps_the_undominated_points)
{
    /* cost, loss: (1, 5) (2, 4) (2, 6) (3, 4) (4, 1) (5, 1) (NaN) */
    double cost[] = {1, 2, 2, 3, 4, 5, 2}, loss[] = {5, 4, 6, 4, 1, 1, NAN};
    int on[7], want[] = {1, 1, 0, 0, 1, 0, 0};
    ck_assert_int_eq(al_pareto_front(7, cost, loss, 0, on), 3);
    for (int i = 0; i < 7; i++) ck_assert_msg(on[i] == want[i], "point %d", i);
    /* maximising: (1, 5) beats every costlier point but (2, 6) */
    int want_max[] = {1, 0, 1, 0, 0, 0, 0};
    ck_assert_int_eq(al_pareto_front(7, cost, loss, 1, on), 2);
    for (int i = 0; i < 7; i++) ck_assert_msg(on[i] == want_max[i], "max point %d", i);
    /* identical points do not dominate each other */
    double c2[] = {1, 1}, q2[] = {2, 2};
    ck_assert_int_eq(al_pareto_front(2, c2, q2, 0, on), 2);
}
END_TEST

/* ------------------------------------------------------------ report.md */

/* An older summary (no test split, no group column): validation stands in
 * for the test split, configurations come from `config`, and the first is
 * the baseline. t(0.975, 1) = 12.706204736174705 (from a t table). */
/* A hybrid sweep's memory: a state layer holds 0 bytes per token and a
 * fixed state, so the front is by bytes held at the report context
 * (kv_bytes_at_context), and it moves with the context. mha 4096 B/token;
 * deltanet 16,384 B of state; a 7:1 hybrid 512 B/token + 30,464 B. At 4096
 * tokens: deltanet (16,384), hybrid (2,127,616) on the front, mha (16.8M,
 * worse than the hybrid) off. At 4 tokens: mha holds 16,384 as deltanet
 * does with a better loss, so deltanet falls off and mha is on. */
static char *held_dir(long ctx, int mixed)
{
    static const char head[] =
        "trial,config,variant,causal,seed,params,kv_bytes_per_token,kv_context,"
        "kv_bytes_at_context,steps,tokens_per_step,final_train_loss,val_loss,best_val_loss,"
        "val_accuracy,tokens_per_s,wall_s,status,reason\n";
    struct { const char *name; long per_token, state; double loss; } m[] = {
        {"mha", 4096, 0, 2.00}, {"deltanet", 0, 16384, 2.10}, {"hybrid", 512, 30464, 1.95}};
    char *dir = al_test_tmpdir(), text[4096];
    size_t n = snprintf(text, sizeof text, "%s", head);
    for (int i = 0; i < 3; i++)
        for (int seed = 1; seed <= 2; seed++)
            n += snprintf(text + n, sizeof text - n,
                          "%s_seed%d,%s,%s,true,%d,1000,%ld,%ld,%ld,100,64,2,%.2f,%.2f,,1000,1,ok,\n",
                          m[i].name, seed, m[i].name, m[i].name, seed, m[i].per_token,
                          ctx << (mixed && i == 2),
                          m[i].per_token * (ctx << (mixed && i == 2)) + m[i].state,
                          m[i].loss + 0.02 * (seed - 1),
                          m[i].loss + 0.02 * (seed - 1));
    free(al_test_write(dir, "summary.csv", text));
    return dir;
}

START_TEST(the_front_is_by_memory_held_at_the_report_context)
{
    setenv("AL_GNUPLOT", "/nonexistent/gnuplot", 1);
    al_report_stats st;
    al_err e;
    char *dir = held_dir(4096, 0);
    ck_assert_msg(al_report_write(dir, &st, &e) == 0, "%s", e.msg);
    char *md = read_in(dir, "report.md"), *dat = read_in(dir, "tradeoff.dat");
    char *gp = read_in(dir, "tradeoff.gp");
    ck_assert_int_eq(st.n_front, 2);
    ck_assert_msg(strstr(md, "## Pareto front: val loss against memory held at 4096 tokens"), "%s",
                  md);
    ck_assert_msg(strstr(md, "- **deltanet**: 16,384 bytes held at 4096 tokens, val loss 2.11"),
                  "%s", md);
    ck_assert_msg(strstr(md, "- **hybrid**: 2,127,616 bytes held at 4096 tokens"), "%s", md);
    ck_assert_msg(!strstr(md, "- **mha**: "), "%s", md);
    /* the state layer is drawn (0 bytes per token has no place on a log axis) */
    ck_assert_msg(strstr(dat, "16384 2.11 ") && strstr(dat, "\"deltanet\" 1 2"), "%s", dat);
    ck_assert_msg(strstr(dat, "16777216 2.01 ") && strstr(dat, "\"mha\" 0 2"), "%s", dat);
    ck_assert_msg(strstr(gp, "bytes held at 4096 tokens") && strstr(gp, "set format x \"%.0s %cB\""),
                  "%s", gp);
    char *page = read_in(dir, "index.html");
    ck_assert_msg(strstr(page, "KV-cache bytes held at 4096 tokens (all layers)"), "no held axis");
    free(page);
    free(md), free(dat), free(gp), free(dir);

    dir = held_dir(4, 0);
    ck_assert_msg(al_report_write(dir, &st, &e) == 0, "%s", e.msg);
    md = read_in(dir, "report.md");
    ck_assert_msg(strstr(md, "- **mha**: 16,384 bytes held at 4 tokens"), "%s", md);
    ck_assert_msg(strstr(md, "- **hybrid**: 32,512 bytes held at 4 tokens"), "%s", md);
    ck_assert_msg(!strstr(md, "- **deltanet**: "), "%s", md);
    free(md), free(dir);
    /* rows at two contexts (stages of different lengths): every row per
     * token, never a mix: deltanet (0) and the hybrid (512) on the front */
    dir = held_dir(4096, 1);
    ck_assert_msg(al_report_write(dir, &st, &e) == 0, "%s", e.msg);
    md = read_in(dir, "report.md");
    ck_assert_msg(strstr(md, "## Pareto front: val loss against KV-cache bytes per token"), "%s",
                  md);
    ck_assert_msg(strstr(md, "- **deltanet**: 0 bytes/token") &&
                  strstr(md, "- **hybrid**: 512 bytes/token") && !strstr(md, "- **mha**: "),
                  "%s", md);
    page = read_in(dir, "index.html");   /* the page decides as report.md does */
    ck_assert_msg(!strstr(page, "bytes held at"), "the page offers a mixed held axis");
    free(page);
    free(md), free(dir);
    unsetenv("AL_GNUPLOT");
}
END_TEST

START_TEST(report_aggregates_seeds_and_marks_the_front)
{
    char *dir = summary_dir(rows);
    setenv("AL_GNUPLOT", "/nonexistent/gnuplot", 1);   /* tables only, quickly */
    al_report_stats st;
    al_err e;
    ck_assert_msg(al_report_write(dir, &st, &e) == 0, "%s", e.msg);
    unsetenv("AL_GNUPLOT");
    ck_assert_int_eq(st.n_trials, 8);
    ck_assert_int_eq(st.n_ok, 7);
    ck_assert_int_eq(st.n_configs, 5);
    ck_assert_int_eq(st.n_front, 3);
    char *md = read_in(dir, "report.md");
    ck_assert_ptr_nonnull(strstr(md, "Quality is the **val loss** (these trials have no test "
                                     "split"));
    /* sample sd of {2.0, 2.2} = 0.1414, half-width t(0.975, 1) * sd / sqrt(2) */
    double sd = sqrt(((2.0 - 2.1) * (2.0 - 2.1) + (2.2 - 2.1) * (2.2 - 2.1)) / 1);
    char want[128];
    snprintf(want, sizeof want, "| 2 | 2.1000 ± %.4f |", 12.706204736174705 * sd / sqrt(2));
    char *r = table_row(md, "mha (baseline)");
    ck_assert_msg(strstr(r, want) && strstr(r, "| (baseline) |"), "%s\nwant %s", r, want);
    ck_assert_msg(strstr(r, "| mha (n_kv_head 4) | 1,000 | 4,096 |"), "%s", r);
    ck_assert_msg(strstr(r, "| yes (not resolved) |"), "%s", r);
    free(r);
    r = detail_row(md, "mha");   /* the settings one by one, the sd, tokens/s mean */
    snprintf(want, sizeof want, "| %.4f |", sd);
    ck_assert_msg(strstr(r, "| mha | 4 | – | – |") && strstr(r, want) &&
                  strstr(r, "| 1,100 |"), "%s", r);
    free(r);
    r = detail_row(md, "gqa");   /* two equal seeds: sd 0 */
    ck_assert_msg(strstr(r, "| 0.0000 |"), "%s", r);
    free(r);
    r = table_row(md, "gqa");   /* an interval of width 0 */
    ck_assert_msg(strstr(r, "| 2 | 2.3000 ± 0.0000 |"), "%s", r);
    snprintf(want, sizeof want, "| +0.2000 [%+.4f, %+.4f] | no |", 0.2 - 12.706204736174705 * 0.1,
             0.2 + 12.706204736174705 * 0.1);   /* differences 0.3, 0.1 */
    ck_assert_msg(strstr(r, want), "%s\nwant %s", r, want);
    free(r);
    r = table_row(md, "mqa");   /* one seed finished (the other runs again): no interval */
    ck_assert_msg(strstr(r, "| 1+ | 2.5000 |") && strstr(r, "+0.5000 (n = 1, no interval)"),
                  "%s", r);
    ck_assert_msg(strstr(r, "| **yes** |"), "%s", r);   /* the cheapest front point */
    free(r);
    r = table_row(md, "mla");
    ck_assert_msg(strstr(r, "| mla (d_latent 32, d_rope 16) |") && strstr(r, "yes (not resolved)"),
                  "%s", r);
    free(r);
    r = detail_row(md, "mla");
    ck_assert_msg(strstr(r, "| mla | – | 32 | 16 |"), "%s", r);
    free(r);
    r = table_row(md, "big");
    ck_assert_msg(!strstr(r, "yes"), "%s", r);
    free(r);
    /* cheapest first */
    ck_assert(strstr(md, "| mqa |") < strstr(md, "| mha (baseline) |"));
    ck_assert(strstr(md, "| mha (baseline) |") < strstr(md, "| big |"));
    ck_assert_ptr_nonnull(strstr(md, "- **mqa**: 1,024 bytes/token, val loss 2.5000\n"));
    ck_assert_ptr_nonnull(strstr(md, "- **mla**: 1,536 bytes/token, val loss 2.2500; *not "
                                     "resolved from mqa*"));
    ck_assert_ptr_nonnull(strstr(md, "| mqa_seed2 | failed | exit status 1: boom, with a comma |"));
    ck_assert_ptr_nonnull(strstr(md, "gnuplot was not found"));
    ck_assert_int_eq(st.plots, AL_PLOTS_NO_GNUPLOT);
    char *front = read_in(dir, "front.dat"), *gp = read_in(dir, "tradeoff.gp");
    ck_assert_str_eq(strchr(front, '\n') + 1, "1024 2.5\n1536 2.25\n4096 2.1\n");
    ck_assert_ptr_nonnull(strstr(gp, "set logscale x"));
    ck_assert_ptr_nonnull(strstr(gp, "with yerrorbars pt 6"));   /* hollow: not resolved */
    free(front), free(gp), free(md), free(dir);
}
END_TEST

/* ------------------------------------------------------------ statistics */

static const char header2[] =
    "trial,config,group,tuned,select_by,baseline,variant,n_kv_head,d_latent,d_rope,causal,"
    "seed,n_layer,d_ff,params,params_to,kv_bytes_per_token,steps,tokens_per_step,"
    "final_train_loss,val_loss,best_val_loss,val_accuracy,test_loss,test_accuracy,"
    "tokens_per_s,wall_s,status,reason\n";

static char *summary2_dir(const char *body)
{
    char *dir = al_test_tmpdir(), text[16384];
    snprintf(text, sizeof text, "%s%s", header2, body);
    free(al_test_write(dir, "summary.csv", text));
    return dir;
}

/* One line of a trial: group, tuned, select_by, baseline, seed, kv, val,
 * test loss, test accuracy (NAN: blank), status. */
static void add_trial(char *buf, size_t n, const char *group, const char *tuned,
                      const char *by, int base, int seed, int kv, double val, double test,
                      double acc, const char *status)
{
    char a[32] = "", t[32] = "", v[32] = "";
    if (!isnan(acc)) snprintf(a, sizeof a, "%.17g", acc);
    if (!isnan(test)) snprintf(t, sizeof t, "%.17g", test);
    if (!isnan(val)) snprintf(v, sizeof v, "%.17g", val);
    size_t len = strlen(buf);
    snprintf(buf + len, n - len, "%s%s%s_seed%d,%s%s%s,%s,%s,%s,%d,mha,4,,,true,%d,2,64,1000,,%d,"
             "10,64,2.0,%s,%s,%s,%s,%s,1000,1.0,%s,\n", group, tuned[0] ? "_" : "", tuned, seed,
             group, tuned[0] ? "_" : "", tuned, group, tuned, by, base, seed, kv, v, v, a, t, a,
             status);
}

static void free_fields_n(char **f, int n)
{
    for (int i = 0; f && i < n; i++) free(f[i]);
    free(f);
}

/* configs.csv, one configuration's row, as fields (malloc'ed; NULL: none).
 * *head (NULL or a previous call's header, freed here) gets the header. */
static char **configs_row(const char *dir, const char *config, char ***head, int *n)
{
    char *text = read_in(dir, "configs.csv"), *line, *save = NULL, **f = NULL, **h = NULL;
    int nh = 0;
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char **cur = NULL;
        int k = 0;
        for (char *p = line;; p++) {   /* no field here holds a comma or a quote */
            char *q = strchr(p, ',');
            cur = realloc(cur, (size_t)(k + 1) * sizeof *cur);
            cur[k++] = strndup(p, q ? (size_t)(q - p) : strlen(p));
            if (!q) break;
            p = q;
        }
        if (!h) h = cur, nh = k;
        else if (strcmp(cur[0], config) == 0 && !f) f = cur;
        else {
            for (int i = 0; i < k; i++) free(cur[i]);
            free(cur);
        }
    }
    free(text);
    free_fields_n(*head, *n);   /* the caller's previous header, if any */
    *head = h;
    *n = nh;
    return f;
}

static const char *field(char **head, char **row, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(head[i], name) == 0) return row[i];
    ck_abort_msg("configs.csv has no column '%s'", name);
    return NULL;
}

static double num_field(char **head, char **row, int n, const char *name)
{
    const char *v = field(head, row, n, name);
    return v[0] ? atof(v) : NAN;
}

static void free_fields(char **f, int n)
{
    for (int i = 0; f && i < n; i++) free(f[i]);
    free(f);
}

static void write_report(const char *dir)
{
    setenv("AL_GNUPLOT", "/nonexistent/gnuplot", 1);
    al_report_stats st;
    al_err e;
    ck_assert_msg(al_report_write(dir, &st, &e) == 0, "%s", e.msg);
    unsetenv("AL_GNUPLOT");
}

/* Paired differences against a hand computation: b - a over seeds 1..3 is
 * {0.03, 0.02, 0.05}: mean 0.0333, sd 0.015275 (by hand), half-width
 * t(0.975, 2) sd / sqrt(3) with t(0.975, 2) = 4.302652729911275 from a t
 * table: 0.03795, so not resolved; c - a = {0.20, 0.21, 0.19}: mean 0.2,
 * sd 0.01, half-width 0.02484: resolved. The baseline is the configuration
 * the summary marks (a), not the first listed. */
START_TEST(paired_interval_equals_a_hand_computation)
{
    char body[8192] = "";
    double a[] = {2.00, 2.10, 2.05}, b[] = {2.03, 2.12, 2.10}, c[] = {2.20, 2.31, 2.24};
    for (int s = 0; s < 3; s++) {
        add_trial(body, sizeof body, "b", "", "", 0, s + 1, 500, 1, b[s], NAN, "ok");
        add_trial(body, sizeof body, "a", "", "", 1, s + 1, 1000, 1, a[s], NAN, "ok");
        add_trial(body, sizeof body, "c", "", "", 0, s + 1, 250, 1, c[s], NAN, "ok");
    }
    char *dir = summary2_dir(body), **head = NULL;
    write_report(dir);
    int n = 0;
    const double t2 = 4.302652729911275;
    char **rb = configs_row(dir, "b", &head, &n);
    ck_assert_ptr_nonnull(rb);
    ck_assert_str_eq(field(head, rb, n, "metric"), "test loss");
    ck_assert_str_eq(field(head, rb, n, "n"), "3");
    ck_assert_double_eq_tol(num_field(head, rb, n, "mean"), (2.03 + 2.12 + 2.10) / 3, 1e-9);
    ck_assert_double_eq_tol(num_field(head, rb, n, "delta_vs_baseline"), 0.1 / 3, 1e-9);
    double sd = sqrt(((0.03 - 0.1 / 3) * (0.03 - 0.1 / 3) + (0.02 - 0.1 / 3) * (0.02 - 0.1 / 3) +
                      (0.05 - 0.1 / 3) * (0.05 - 0.1 / 3)) / 2);
    ck_assert_double_eq_tol(sd, 0.0152753, 1e-6);   /* the hand value */
    ck_assert_double_eq_tol(num_field(head, rb, n, "delta_ci95"), t2 * sd / sqrt(3), 1e-8);
    ck_assert_str_eq(field(head, rb, n, "delta_n"), "3");
    ck_assert_str_eq(field(head, rb, n, "resolved"), "false");
    free_fields(rb, n);
    char **rc = configs_row(dir, "c", &head, &n);
    ck_assert_double_eq_tol(num_field(head, rc, n, "delta_vs_baseline"), 0.2, 1e-9);
    ck_assert_double_eq_tol(num_field(head, rc, n, "delta_ci95"), t2 * 0.01 / sqrt(3), 1e-8);
    ck_assert_str_eq(field(head, rc, n, "resolved"), "true");
    free_fields(rc, n);
    char **ra = configs_row(dir, "a", &head, &n);
    ck_assert_str_eq(field(head, ra, n, "baseline"), "true");
    ck_assert_str_eq(field(head, ra, n, "resolved"), "");
    /* a's edge over the cheaper b is within noise; c and b are apart */
    ck_assert_str_eq(field(head, ra, n, "front"), "true");
    ck_assert_str_eq(field(head, ra, n, "front_resolved"), "false");
    free_fields(ra, n);
    free_fields(head, n);
    char *dat = read_in(dir, "tradeoff.dat");
    /* the last column: c, the cheapest, has nothing to be resolved from */
    ck_assert_msg(strstr(dat, "\n250 2.25 ") && strstr(dat, "\"c\" 1 3 1 2\n"), "%s", dat);
    ck_assert_msg(strstr(dat, "\"b\" 1 3 1 1\n") && strstr(dat, "\"a\" 1 3 0 0\n"), "%s", dat);
    free(dat);
    char *md = read_in(dir, "report.md");
    ck_assert_ptr_nonnull(strstr(md, "## Paired differences against the baseline (a)"));
    ck_assert_ptr_nonnull(strstr(md, "- **a**: 1,000 bytes/token, test loss 2.0500 ± "));
    ck_assert_ptr_nonnull(strstr(md, "*not resolved from b*"));
    free(md), free(dir);
}
END_TEST

/* Holm against a hand-worked family. Differences from the baseline a over
 * seeds 1..3: c {0.20, 0.21, 0.19}, p = 0.00083; d {0.035, 0.05, 0.065},
 * p = 0.0287; b {0.03, 0.05, 0.07}, p = 0.0494 (scipy.stats.ttest_1samp).
 * Each alone is below 0.05 (unadjusted: resolved). Holm, m = 3: 0.00083 <=
 * 0.05/3 resolves c; 0.0287 > 0.05/2 stops, so d and b are not resolved.
 * Seeds for 80 % power (scipy's nct): b (mean 0.05, sd 0.02) 4, d (sd
 * 0.015) 3. */
START_TEST(holm_adjusts_the_family_of_comparisons_with_the_baseline)
{
    char body[8192] = "";
    double a[] = {2.00, 2.10, 2.05}, db[] = {0.03, 0.05, 0.07}, dc[] = {0.20, 0.21, 0.19};
    double dd[] = {0.035, 0.05, 0.065};
    for (int s = 0; s < 3; s++) {
        add_trial(body, sizeof body, "a", "", "", 1, s + 1, 1000, 1, a[s], NAN, "ok");
        add_trial(body, sizeof body, "b", "", "", 0, s + 1, 500, 1, a[s] + db[s], NAN, "ok");
        add_trial(body, sizeof body, "c", "", "", 0, s + 1, 250, 1, a[s] + dc[s], NAN, "ok");
        add_trial(body, sizeof body, "d", "", "", 0, s + 1, 750, 1, a[s] + dd[s], NAN, "ok");
    }
    char *dir = summary2_dir(body), **head = NULL;
    write_report(dir);
    int n = 0;
    static const struct { const char *g, *raw, *holm, *need; double p; } want[] = {
        {"b", "true", "false", "4", 0.04941362421328313},
        {"c", "true", "true", "2", 0.0008322931113192272},
        {"d", "true", "false", "3", 0.0287141376427358},
        {"a", "", "", "", NAN},
    };
    for (int i = 0; i < 4; i++) {
        char **r = configs_row(dir, want[i].g, &head, &n);
        ck_assert_ptr_nonnull(r);
        ck_assert_str_eq(field(head, r, n, "resolved"), want[i].raw);
        ck_assert_str_eq(field(head, r, n, "resolved_holm"), want[i].holm);
        ck_assert_str_eq(field(head, r, n, "seeds_needed"), want[i].need);
        if (!isnan(want[i].p))
            ck_assert_double_eq_tol(num_field(head, r, n, "p_value"), want[i].p, 1e-6);
        free_fields(r, n);
    }
    /* The front (kv, mean): c (250, 2.25), b (500, 2.10), a (1000, 2.05); d
     * (750, 2.10) is dominated by b. The comparisons that decide places: a
     * vs b (p 0.0494), a vs c (0.00083), b vs c (c - b = {0.17, 0.16, 0.12}:
     * 0.0102), d vs b ({0.005, 0, -0.005}: 1). Holm, m = 4: 0.00083 <=
     * 0.0125, 0.0102 <= 0.0167, 0.0494 > 0.025: a's edge over b is not
     * resolved, though its own interval excludes 0. */
    char **ra = configs_row(dir, "a", &head, &n), **rb = configs_row(dir, "b", &head, &n);
    ck_assert_str_eq(field(head, ra, n, "front"), "true");
    ck_assert_str_eq(field(head, ra, n, "front_resolved"), "false");
    ck_assert_str_eq(field(head, rb, n, "front_resolved"), "true");
    free_fields(ra, n), free_fields(rb, n);
    /* the old columns keep their places; the new ones come after seeds_open */
    ck_assert_str_eq(head[n - 17], "seeds_open");
    ck_assert_str_eq(head[n - 16], "resolved_holm");
    ck_assert_str_eq(head[n - 9], "kv_context");   /* appended after same_machine */
    ck_assert_str_eq(head[n - 8], "kv_bytes_at_context");
    ck_assert_str_eq(head[n - 7], "solved_p");     /* and after those */
    ck_assert_str_eq(head[n - 6], "solved_differs_holm");
    ck_assert_str_eq(head[n - 5], "val_gap_q3");   /* and after those */
    ck_assert_str_eq(head[n - 1], "val_gap_trend");
    free_fields(head, n);
    char *md = read_in(dir, "report.md");
    ck_assert_msg(strstr(md, "| b | 500 | 3 | +0.0500 | [+0.0003, +0.0997] | 0.049 | yes | "
                             "not resolved; about 4 seeds would resolve a difference this "
                             "size | 4 |"), "%s", md);
    ck_assert_ptr_nonnull(strstr(md, "| c | 250 | 3 | +0.2000"));
    ck_assert_ptr_nonnull(strstr(md, "Holm's correction over the family of the 3 comparisons"));
    ck_assert_ptr_nonnull(strstr(md, "- **a**: 1,000 bytes/token, test loss 2.0500 ± "));
    ck_assert_ptr_nonnull(strstr(md, "*not resolved from b*"));
    char *row = table_row(md, "b");   /* the main table's verdict is the adjusted one */
    ck_assert_msg(strstr(row, "| no |"), "%s", row);
    free(row), free(md), free(dir);
}
END_TEST

/* metrics.csv for trial dir/<trial>: val_loss at steps 0..10 (11 values). */
static void write_metrics(const char *dir, const char *trial, const double *loss,
                          const double *acc)
{
    char path[4200], text[2048] = "step,train_loss,val_loss,val_accuracy,lr,tokens_per_s,"
                                  "elapsed_s\n";
    snprintf(path, sizeof path, "%s/%s", dir, trial);
    mkdir(path, 0777);
    for (int s = 0; s <= 10; s++) {
        size_t len = strlen(text);
        char a[32] = "";
        if (acc) snprintf(a, sizeof a, "%.4f", acc[s]);
        snprintf(text + len, sizeof text - len, "%d,2.0,%.6f,%s,0.001,100,1\n", s, loss[s], a);
    }
    free(al_test_write(path, "metrics.csv", text));
}

/* The slope over the last quarter by hand: steps = 10, so the points at
 * steps 8, 9, 10. Seed 1: 2.30, 2.28, 2.20, mean step 9, slope
 * ((-1)(0.04) + 0 + (1)(-0.06)) / 2 = -0.05 per step, -5 per 100 steps;
 * seed 2 flat: 0. The mean, -2.5. Over the quarter's 2.5 steps seed 1 fell
 * 0.125 nats, seed 2 none: 0.0625 on average, more than 0.02, so a is still
 * improving. The earlier points (wild here) do not count. b is flat: not
 * improving. c falls 0.001 a step (-0.1 per 100 steps, which a per-step
 * rule of -0.01 would flag) but only 0.0025 nats over its quarter: not. */
START_TEST(loss_slope_over_the_last_quarter_by_hand)
{
    char body[4096] = "";
    add_trial(body, sizeof body, "a", "", "", 1, 1, 1000, 2.2, 2.2, NAN, "ok");
    add_trial(body, sizeof body, "a", "", "", 1, 2, 1000, 2.1, 2.1, NAN, "ok");
    add_trial(body, sizeof body, "b", "", "", 0, 1, 500, 2.0, 2.0, NAN, "ok");
    add_trial(body, sizeof body, "c", "", "", 0, 1, 250, 2.5, 2.5, NAN, "ok");
    char *dir = summary2_dir(body), **head = NULL;
    double c1[] = {3, 3, 3, 3, 3, 3, 3, 3, 2.001, 2.000, 1.999};
    double a1[] = {9, 1, 7, 3, 5, 5, 4, 8, 2.30, 2.28, 2.20}, a2[] = {9, 1, 7, 3, 5, 5, 4, 8,
                                                                     2.1, 2.1, 2.1};
    double b1[] = {3, 3, 3, 3, 3, 3, 3, 3, 2.0, 2.0, 2.0};
    write_metrics(dir, "a_seed1", a1, NULL);
    write_metrics(dir, "a_seed2", a2, NULL);
    write_metrics(dir, "b_seed1", b1, NULL);
    write_metrics(dir, "c_seed1", c1, NULL);
    write_report(dir);
    int n = 0;
    char **r = configs_row(dir, "c", &head, &n);
    ck_assert_double_eq_tol(num_field(head, r, n, "val_loss_slope"), -0.1, 1e-9);
    ck_assert_str_eq(field(head, r, n, "still_improving"), "false");
    free_fields(r, n);
    r = configs_row(dir, "a", &head, &n);
    ck_assert_double_eq_tol(num_field(head, r, n, "val_loss_slope"), -2.5, 1e-9);
    ck_assert_str_eq(field(head, r, n, "still_improving"), "true");
    free_fields(r, n);
    r = configs_row(dir, "b", &head, &n);
    ck_assert_double_eq_tol(num_field(head, r, n, "val_loss_slope"), 0, 1e-9);
    ck_assert_str_eq(field(head, r, n, "still_improving"), "false");
    free_fields(r, n);
    free_fields(head, n);
    char *md = read_in(dir, "report.md");
    ck_assert_msg(strstr(md, "**Still improving:** the validation loss of 1 of 3 "
                             "configurations") && strstr(md, ": a (0.0625)."), "%s", md);
    /* b and c pair with a at seed 1 only: a gap (b - a: 2.0 - 2.30 at step 8,
     * 2.0 - 2.20 at 10), but no interval, no p and no verdict */
    ck_assert_ptr_nonnull(strstr(md, "| b | 1 | -0.3000 (step 8) | -0.2000 (step 10) | +0.1000 "
                                     "(n = 1, no interval) | – | one seed: no verdict |"));
    free(md), free(dir);
}
END_TEST

/* The gaps to the baseline b over the last quarter, by hand (steps = 10:
 * compared at step 8, the first eval at or after 7.5, and at 10). b falls
 * from 2.0 to 1.9 at every seed.
 *   a: 2.10 2.12 2.08 -> 1.95 1.98 1.94: gaps +0.10 +0.12 +0.08 -> +0.05
 *      +0.08 +0.04, changes -0.05 -0.04 -0.04: mean -0.043333, sd 0.005774,
 *      ci95 t(2) 4.3027 sd / sqrt 3 = 0.014342, p 0.00587 (scipy);
 *   c: 2.05 -> 1.99 2.00 1.98: changes +0.04 +0.05 +0.03, ci95 0.024841,
 *      p 0.0202;
 *   d: 2.0 -> 1.91 1.89 1.90: changes +0.01 -0.01 0, p 1.
 * Holm over 3: 0.00587 <= 0.05/3, 0.0202 <= 0.05/2, 1 > 0.05: a narrows
 * (the change points back to 0 from +0.10), c widens, d is steady. */
START_TEST(gap_to_the_baseline_over_the_last_quarter_by_hand)
{
    static const double aq[] = {2.10, 2.12, 2.08}, ae[] = {1.95, 1.98, 1.94};
    static const double ce[] = {1.99, 2.00, 1.98}, de[] = {1.91, 1.89, 1.90};
    char body[8192] = "";
    for (int s = 1; s <= 3; s++) {
        add_trial(body, sizeof body, "b", "", "", 1, s, 1000, 1.9, 1.9, NAN, "ok");
        add_trial(body, sizeof body, "a", "", "", 0, s, 500, ae[s - 1], ae[s - 1], NAN, "ok");
        add_trial(body, sizeof body, "c", "", "", 0, s, 250, ce[s - 1], ce[s - 1], NAN, "ok");
        add_trial(body, sizeof body, "d", "", "", 0, s, 750, de[s - 1], de[s - 1], NAN, "ok");
    }
    char *dir = summary2_dir(body), **head = NULL;
    for (int s = 1; s <= 3; s++) {
        char t[32];
        double b[11], a[11], c[11], d[11];
        for (int i = 0; i <= 10; i++) b[i] = a[i] = c[i] = d[i] = 3.0 - 0.1 * i;
        b[8] = d[8] = 2.0, b[10] = 1.9, a[8] = aq[s - 1], c[8] = 2.05;
        a[10] = ae[s - 1], c[10] = ce[s - 1], d[10] = de[s - 1];
        a[9] = c[9] = d[9] = b[9] = NAN;   /* a missing eval is skipped */
        snprintf(t, sizeof t, "b_seed%d", s), write_metrics(dir, t, b, NULL);
        snprintf(t, sizeof t, "a_seed%d", s), write_metrics(dir, t, a, NULL);
        snprintf(t, sizeof t, "c_seed%d", s), write_metrics(dir, t, c, NULL);
        snprintf(t, sizeof t, "d_seed%d", s), write_metrics(dir, t, d, NULL);
    }
    write_report(dir);
    static const struct { const char *g, *trend; double q, end, change, ci; } want[] = {
        {"a", "narrowing", 0.10, 0.17 / 3, -0.043333333333333335, 0.014342175766370919},
        {"c", "widening", 0.05, 0.09, 0.04, 0.024841377118437532},
        {"d", "steady", 0, 0, 0, 0.02484137711843753},
    };
    int n = 0;
    for (int i = 0; i < 3; i++) {
        char **r = configs_row(dir, want[i].g, &head, &n);
        ck_assert_ptr_nonnull(r);
        ck_assert_double_eq_tol(num_field(head, r, n, "val_gap_q3"), want[i].q, 1e-9);
        ck_assert_double_eq_tol(num_field(head, r, n, "val_gap_end"), want[i].end, 1e-9);
        ck_assert_double_eq_tol(num_field(head, r, n, "val_gap_change"), want[i].change, 1e-9);
        ck_assert_double_eq_tol(num_field(head, r, n, "val_gap_change_ci95"), want[i].ci, 1e-6);
        ck_assert_str_eq(field(head, r, n, "val_gap_trend"), want[i].trend);
        free_fields(r, n);
    }
    char **r = configs_row(dir, "b", &head, &n);   /* the baseline has no gap */
    ck_assert_str_eq(field(head, r, n, "val_gap_change"), "");
    ck_assert_str_eq(field(head, r, n, "val_gap_trend"), "");
    free_fields(r, n), free_fields(head, n);
    char *md = read_in(dir, "report.md");
    ck_assert_msg(strstr(md, "| a | 3 | +0.1000 (step 8) | +0.0567 (step 10) | -0.0433 "
                             "[-0.0577, -0.0290] | 0.00587 | narrowing |"), "%s", md);
    ck_assert_ptr_nonnull(strstr(md, "**A narrowing gap is partly one of learning speed**"));
    free(md), free(dir);
}
END_TEST

/* On a recall task: the median over seeds of the first eval step with
 * val_accuracy >= 0.9 (seeds 4 and 8 -> 6; seed 3 never reached it). */
START_TEST(recall_reports_the_median_step_to_solve)
{
    char body[4096] = "";
    for (int s = 1; s <= 3; s++)
        add_trial(body, sizeof body, "a", "", "", 1, s, 1000, 2.0, 2.0, s < 3 ? 0.95 : 0.3, "ok");
    char *dir = summary2_dir(body), **head = NULL;
    double loss[11] = {0}, acc1[11] = {0}, acc2[11] = {0}, acc3[11] = {0};
    for (int i = 0; i <= 10; i++) {
        loss[i] = 3 - 0.1 * i;
        acc1[i] = i >= 4 ? 0.91 : 0.2;
        acc2[i] = i >= 8 ? 0.95 : 0.5;
        acc3[i] = 0.3;
    }
    write_metrics(dir, "a_seed1", loss, acc1);
    write_metrics(dir, "a_seed2", loss, acc2);
    write_metrics(dir, "a_seed3", loss, acc3);
    write_report(dir);
    int n = 0;
    char **r = configs_row(dir, "a", &head, &n);
    ck_assert_str_eq(field(head, r, n, "solved"), "2");
    ck_assert_str_eq(field(head, r, n, "solved_step_median"), "6");
    free_fields(r, n);
    free_fields(head, n);
    char *md = read_in(dir, "report.md"), *row = table_row(md, "a (baseline)");
    ck_assert_msg(strstr(row, "| 2/3 (median step 6) |"), "%s", row);
    free(row), free(md), free(dir);
}
END_TEST

/* Trials of one configuration on two OpenBLAS cores: the report says so,
 * and configs.csv's same_machine is false for it only. */
START_TEST(trials_on_different_machines_are_called_out)
{
    char body[4096] = "", text[8192] = "", *o = text;
    add_trial(body, sizeof body, "a", "", "", 1, 1, 1000, 2.0, 2.0, NAN, "ok");
    add_trial(body, sizeof body, "a", "", "", 1, 2, 1000, 2.1, 2.1, NAN, "ok");
    add_trial(body, sizeof body, "b", "", "", 0, 1, 500, 2.2, 2.2, NAN, "ok");
    add_trial(body, sizeof body, "b", "", "", 0, 2, 500, 2.3, 2.3, NAN, "ok");
    static const char *const where[] = {"Xeon X,Haswell,2", "Xeon X,SkylakeX,2",
                                        "Xeon X,Haswell,2", "Xeon X,Haswell,2"};
    o += sprintf(o, "%.*s,cpu_model,blas_core,threads\n", (int)strlen(header2) - 1, header2);
    int i = 0;
    for (char *p = body, *nl; (nl = strchr(p, '\n')); p = nl + 1)
        o += sprintf(o, "%.*s,%s\n", (int)(nl - p), p, where[i++]);
    char *dir = al_test_tmpdir(), **head = NULL;
    free(al_test_write(dir, "summary.csv", text));
    write_report(dir);
    int n = 0;
    char **r = configs_row(dir, "a", &head, &n);
    ck_assert_str_eq(field(head, r, n, "same_machine"), "false");
    free_fields(r, n);
    r = configs_row(dir, "b", &head, &n);
    ck_assert_str_eq(field(head, r, n, "same_machine"), "true");
    ck_assert_str_eq(field(head, r, n, "variant"), "mha");   /* not read as settings */
    free_fields(r, n);
    free_fields(head, n);
    char *md = read_in(dir, "report.md");
    ck_assert_msg(strstr(md, "**Trials of one configuration ran on different machines**") &&
                  strstr(md, "- a: Xeon X / Haswell / 2 threads ×1; Xeon X / SkylakeX / 2 "
                             "threads ×1\n") && !strstr(md, "- b:"), "%s", md);
    ck_assert_msg(!strstr(md, "| cpu_model |"), "%s", md);
    free(md), free(dir);
}
END_TEST

/* One seed: n = 1, a mean, and no interval (blank), never a zero width. */
START_TEST(one_seed_reports_n_1_and_no_interval)
{
    char body[4096] = "";
    add_trial(body, sizeof body, "a", "", "", 1, 1, 1000, 1, 2.0, NAN, "ok");
    add_trial(body, sizeof body, "b", "", "", 0, 1, 500, 1, 2.5, NAN, "ok");
    char *dir = summary2_dir(body), **head = NULL;
    write_report(dir);
    int n = 0;
    char **r = configs_row(dir, "b", &head, &n);
    ck_assert_str_eq(field(head, r, n, "n"), "1");
    ck_assert_str_eq(field(head, r, n, "sd"), "");
    ck_assert_str_eq(field(head, r, n, "ci95"), "");
    ck_assert_str_eq(field(head, r, n, "delta_ci95"), "");
    ck_assert_str_eq(field(head, r, n, "resolved"), "false");
    ck_assert_double_eq_tol(num_field(head, r, n, "delta_vs_baseline"), 0.5, 1e-12);
    free_fields(r, n);
    free_fields(head, n);
    char *md = read_in(dir, "report.md"), *row = table_row(md, "b");
    ck_assert_msg(strstr(row, "| 1 | 2.5000 |") && strstr(row, "(n = 1, no interval)"),
                  "%s", row);
    free(row);
    row = detail_row(md, "b");   /* one seed: no sd */
    ck_assert_msg(strstr(row, "| – |"), "%s", row);
    free(row), free(md), free(dir);
}
END_TEST

/* select: per configuration and seed the trial with the best validation
 * result stands for it; a seed with a candidate still pending is left out
 * (its choice could change). */
START_TEST(select_picks_the_argmin_per_seed)
{
    char body[8192] = "";
    /* m: seed 1 picks lr2 (val 1.9 < 2.0), seed 2 picks lr1 (1.8 < 1.95) */
    add_trial(body, sizeof body, "m", "lr1", "val_loss", 1, 1, 1000, 2.0, 2.05, NAN, "ok");
    add_trial(body, sizeof body, "m", "lr2", "val_loss", 1, 1, 1000, 1.9, 1.97, NAN, "ok");
    add_trial(body, sizeof body, "m", "lr1", "val_loss", 1, 2, 1000, 1.8, 1.85, NAN, "ok");
    add_trial(body, sizeof body, "m", "lr2", "val_loss", 1, 2, 1000, 1.95, 1.99, NAN, "ok");
    /* n: seed 1 picks lr1 although lr2 diverged; seed 2 has lr2 pending */
    add_trial(body, sizeof body, "n", "lr1", "val_loss", 0, 1, 500, 2.2, 2.25, NAN, "ok");
    add_trial(body, sizeof body, "n", "lr2", "val_loss", 0, 1, 500, NAN, NAN, NAN, "diverged");
    add_trial(body, sizeof body, "n", "lr1", "val_loss", 0, 2, 500, 2.1, 2.15, NAN, "ok");
    add_trial(body, sizeof body, "n", "lr2", "val_loss", 0, 2, 500, NAN, NAN, NAN, "pending");
    char *dir = summary2_dir(body), **head = NULL;
    write_report(dir);
    int n = 0;
    char **r = configs_row(dir, "m", &head, &n);
    ck_assert_str_eq(field(head, r, n, "n"), "2");
    ck_assert_double_eq_tol(num_field(head, r, n, "mean"), (1.97 + 1.85) / 2, 1e-12);
    ck_assert_str_eq(field(head, r, n, "tuned"), "lr2 ×1; lr1 ×1");
    free_fields(r, n);
    r = configs_row(dir, "n", &head, &n);
    ck_assert_str_eq(field(head, r, n, "n"), "1");
    ck_assert_str_eq(field(head, r, n, "seeds_open"), "1");
    ck_assert_double_eq_tol(num_field(head, r, n, "mean"), 2.25, 1e-12);
    /* paired with m over seed 1 only */
    ck_assert_double_eq_tol(num_field(head, r, n, "delta_vs_baseline"), 2.25 - 1.97, 1e-12);
    free_fields(r, n);
    free_fields(head, n);
    char *md = read_in(dir, "report.md");
    ck_assert_ptr_nonnull(strstr(md, "## Tuned, then compared"));
    ck_assert_ptr_nonnull(strstr(md, "| m | lr2 ×1; lr1 ×1 |"));
    free(md), free(dir);
}
END_TEST

/* Recall tasks: the metric is test accuracy (higher is better), and the
 * report counts the seeds that solved the task (accuracy >= 0.9); select
 * by val_accuracy maximises. */
START_TEST(accuracy_metric_counts_solved_seeds)
{
    char body[8192] = "";
    double acc[] = {0.95, 0.50, 0.92};
    for (int s = 0; s < 3; s++) {
        add_trial(body, sizeof body, "r", "lr1", "val_accuracy", 1, s + 1, 1000, 1, 1, acc[s], "ok");
        add_trial(body, sizeof body, "r", "lr2", "val_accuracy", 1, s + 1, 1000, 1, 1, 0.1, "ok");
    }
    char *dir = summary2_dir(body), **head = NULL;
    write_report(dir);
    int n = 0;
    char **r = configs_row(dir, "r", &head, &n);
    ck_assert_str_eq(field(head, r, n, "metric"), "test accuracy");
    ck_assert_str_eq(field(head, r, n, "solved"), "2");
    ck_assert_str_eq(field(head, r, n, "tuned"), "lr1 ×3");
    ck_assert_double_eq_tol(num_field(head, r, n, "mean"), (0.95 + 0.50 + 0.92) / 3, 1e-12);
    free_fields(r, n);
    free_fields(head, n);
    char *md = read_in(dir, "report.md"), *row = table_row(md, "r (baseline)");
    ck_assert_msg(strstr(row, "| 2/3 |"), "%s", row);
    free(row), free(md), free(dir);
}
END_TEST

/* Seeds solved against the baseline, paired by seed (exact McNemar, Holm
 * over the family). Baseline a solves all 6 seeds. b fails seeds 1-5 but
 * only just (0.89): discordant 5:0, p = 2/32 = 0.0625, not below 0.05.
 * c fails all 6: 6:0, p = 2/64 = 0.03125; Holm, m = 2: 0.03125 <= 0.05/2?
 * no (0.025), so nothing differs after the correction, though c alone is
 * below 0.05. d (a third comparison) solves 6 of 6 where a does: 0:0,
 * p = 1. Then with 10 seeds e fails 9 seeds where a solves: 2/1024. */
START_TEST(solved_counts_are_compared_with_the_baseline_by_seed)
{
    char body[16384] = "";
    for (int s = 1; s <= 6; s++) {
        add_trial(body, sizeof body, "a", "", "", 1, s, 1000, 1, 1, 0.95, "ok");
        add_trial(body, sizeof body, "b", "", "", 0, s, 500, 1, 1, s <= 5 ? 0.89 : 0.93, "ok");
        add_trial(body, sizeof body, "c", "", "", 0, s, 250, 1, 1, 0.30, "ok");
        add_trial(body, sizeof body, "d", "", "", 0, s, 750, 1, 1, 0.97, "ok");
    }
    char *dir = summary2_dir(body), **head = NULL;
    write_report(dir);
    int n = 0;
    static const struct { const char *g, *p, *differs; } want[] = {
        {"a", "", ""}, {"b", "0.0625", "false"}, {"c", "0.03125", "false"}, {"d", "1", "false"},
    };
    for (int i = 0; i < 4; i++) {
        char **r = configs_row(dir, want[i].g, &head, &n);
        ck_assert_ptr_nonnull(r);
        ck_assert_str_eq(field(head, r, n, "solved_p"), want[i].p);
        ck_assert_str_eq(field(head, r, n, "solved_differs_holm"), want[i].differs);
        free_fields(r, n);
    }
    free_fields(head, n);
    head = NULL, n = 0;
    char *md = read_in(dir, "report.md"), *row = table_row(md, "c");
    ck_assert_msg(strstr(row, "| 0/6; vs baseline 6:0, p 0.031 |"), "%s", row);
    free(row), free(md), free(dir);

    char body2[16384] = "";
    for (int s = 1; s <= 10; s++) {
        add_trial(body2, sizeof body2, "a", "", "", 1, s, 1000, 1, 1, 0.95, "ok");
        add_trial(body2, sizeof body2, "e", "", "", 0, s, 250, 1, 1, s == 1 ? 0.96 : 0.2, "ok");
    }
    dir = summary2_dir(body2);
    write_report(dir);
    char **r = configs_row(dir, "e", &head, &n);
    ck_assert_str_eq(field(head, r, n, "solved_p"), "0.00390625");   /* 9:0 */
    ck_assert_str_eq(field(head, r, n, "solved_differs_holm"), "true");
    free_fields(r, n);
    free_fields(head, n);
    md = read_in(dir, "report.md"), row = table_row(md, "e");
    ck_assert_msg(strstr(row, "| 1/10; vs baseline 9:0, p 0.0039, **differs** |"), "%s", row);
    free(row), free(md), free(dir);
}
END_TEST

/* The passkey table (report_eval.c) by hand: each trial's exact-match
 * share at a length is its mean over depths; mha's seeds 0.9, 0.7, 1.0
 * (mean 0.8667, sd 0.15275, half-width t(0.975, 2) sd / sqrt 3 = 0.3795);
 * mqa minus mha by seed -0.4, -0.3, -0.3: mean -0.3333, sd 0.057735,
 * half-width 0.1434, p = 0.0099 (t = -10 on 2 dof), one cell: resolved.
 * At length 200 every key is missed by both: 0 +- 0, not resolved. */
START_TEST(passkey_table_gives_intervals_and_paired_differences)
{
    char body[8192] = "";
    const double mha[3][2] = {{0.8, 1.0}, {0.6, 0.8}, {1.0, 1.0}};
    const double mqa[3][2] = {{0.5, 0.5}, {0.3, 0.5}, {0.6, 0.8}};
    for (int s = 1; s <= 3; s++) {
        add_trial(body, sizeof body, "mha", "", "", 1, s, 1000, 1, 1, 0.5, "ok");
        add_trial(body, sizeof body, "mqa", "", "", 0, s, 250, 1, 1, 0.5, "ok");
    }
    char *dir = summary2_dir(body);
    for (int s = 1; s <= 3; s++)
        for (int v = 0; v < 2; v++) {
            const double (*x)[2] = v ? mqa : mha;
            char path[4200], text[512];
            snprintf(path, sizeof path, "%s/%s_seed%d", dir, v ? "mqa" : "mha", s);
            mkdir(path, 0777);
            strcat(path, "/eval");
            mkdir(path, 0777);
            snprintf(text, sizeof text, "length,depth,examples,exact,digit_accuracy,loss\n"
                     "100,0,5,%.2f,0.9,0.1\n100,0.5,5,%.2f,0.9,0.1\n"
                     "200,0,5,0,0.1,5\n200,0.5,5,0,0.1,5\n", x[s - 1][0], x[s - 1][1]);
            free(al_test_write(path, "passkey.csv", text));
        }
    write_report(dir);
    char *md = read_in(dir, "report.md");
    char *a = table_row(strstr(md, "## Passkey retrieval"), "mha");
    char *b = strstr(md, "Exact-match accuracy minus mha's");
    ck_assert_msg(strstr(a, "| 0.867 ± 0.379 (0.900) | 0.000 ± 0.000 (0.100) |"), "%s", a);
    ck_assert_msg(b != NULL, "%s", md);
    ck_assert_msg(strstr(b, "Holm over the 2 cells below"), "%s", b);
    char *d = table_row(b, "mqa");
    ck_assert_msg(strstr(d, "| -0.333 [-0.477, -0.190] **resolved** | +0.000 [+0.000, +0.000] |"),
                  "%s", d);
    ck_assert_ptr_nonnull(strstr(b, "could change sign with other seeds"));
    free(a), free(d), free(md), free(dir);
}
END_TEST

/* Parameter counts that differ are called out, with the key that fixes it. */
START_TEST(unmatched_parameter_counts_are_called_out)
{
    char *dir = summary_dir(rows);
    write_report(dir);
    char *md = read_in(dir, "report.md");
    ck_assert_ptr_nonnull(strstr(md, "**Parameter counts differ** (850 to 2,000, 57.5 %)"));
    ck_assert_ptr_nonnull(strstr(md, "model.match_params"));
    free(md), free(dir);
}
END_TEST

START_TEST(accuracy_is_the_measure_when_every_config_has_one)
{
    char *dir = summary_dir(
        "a_seed1,a,mha,4,,,true,1,10,100,10,8,1.0,1.0,1.0,0.90,1,1,ok,\n"
        "b_seed1,b,mqa,1,,,true,1,10,50,10,8,1.2,1.2,1.2,0.95,1,1,ok,\n"
        "c_seed1,c,gqa,2,,,false,1,10,75,10,8,0.1,0.1,0.1,0.50,1,1,ok,\n");
    setenv("AL_GNUPLOT", "/nonexistent/gnuplot", 1);
    al_report_stats st;
    al_err e;
    ck_assert_msg(al_report_write(dir, &st, &e) == 0, "%s", e.msg);
    unsetenv("AL_GNUPLOT");
    ck_assert_int_eq(st.n_front, 1);   /* b: smallest cache, best accuracy */
    char *md = read_in(dir, "report.md");
    ck_assert_ptr_nonnull(strstr(md, "## Pareto front: val accuracy against"));
    char *r = table_row(md, "b");
    ck_assert_msg(strstr(r, "**yes**"), "%s", r);
    free(r);
    r = table_row(md, "c");
    ck_assert_msg(strstr(r, ", **no causal mask** |"), "%s", r);   /* the unmasked ablation */
    free(r);
    ck_assert_ptr_nonnull(strstr(md, "## The causal mask"));
    free(md), free(dir);
}
END_TEST

/* Curves average the seeds' metrics.csv at each step; tokens = step x
 * tokens_per_step. */
START_TEST(curves_average_seeds_per_step)
{
    char *dir = summary_dir(rows), sub[4200];
    static const char *const m[] = {"step,train_loss,val_loss\n0,,5.0\n100,1.9,2.0\n",
                                    "step,train_loss,val_loss\n0,,5.2\n100,2.1,2.2\n"};
    for (int i = 0; i < 2; i++) {
        snprintf(sub, sizeof sub, "%s/mha_seed%d", dir, i + 1);
        mkdir(sub, 0777);
        free(al_test_write(sub, "metrics.csv", m[i]));
    }
    setenv("AL_GNUPLOT", "/nonexistent/gnuplot", 1);
    al_report_stats st;
    al_err e;
    ck_assert_msg(al_report_write(dir, &st, &e) == 0, "%s", e.msg);
    unsetenv("AL_GNUPLOT");
    char *d = read_in(dir, "curves.dat"), *gp = read_in(dir, "curves.gp");
    ck_assert_msg(strstr(d, "# mha\n0 0 5.1 5 5.2\n100 6400 2.1 2 2.2\n"), "%s", d);
    ck_assert_ptr_nonnull(strstr(gp, "\"curves.dat\" index 0 using 1:3"));
    ck_assert_ptr_nonnull(strstr(gp, "title \"mha\""));
    free(d), free(gp), free(dir);
}
END_TEST

START_TEST(gnuplot_draws_png_and_svg_beside_its_script)
{
    if (al_test_run("command -v gnuplot", NULL) != 0) {
        fprintf(stderr, "skipped: gnuplot is not installed\n");
        return;
    }
    char *dir = summary_dir(rows);
    al_report_stats st;
    al_err e;
    ck_assert_msg(al_report_write(dir, &st, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(st.plots, AL_PLOTS_DRAWN);
    ck_assert(file_starts_with(dir, "tradeoff.png", "\x89PNG"));
    ck_assert(file_starts_with(dir, "curves.png", "\x89PNG"));
    ck_assert(file_starts_with(dir, "tradeoff.svg", "<?xml"));
    ck_assert(file_starts_with(dir, "tradeoff.gp", "# tradeoff.gp"));
    char *md = read_in(dir, "report.md");
    ck_assert_ptr_nonnull(strstr(md, "![val loss against KV-cache bytes per token](tradeoff.png)"));
    free(md), free(dir);
}
END_TEST

/* ------------------------------------------------------------ settings */

/* Columns the report does not know are the variants' settings, wherever
 * they stand: a made-up variant's n_foo (beside `variant`, as sweeps write
 * it) and foo_scale (last) show in the table and in configs.csv, in the
 * summary's order, blank ("–" in the table) for the variant without them. */
START_TEST(a_new_variants_settings_become_columns)
{
    static const char text[] =
        "trial,config,variant,n_foo,causal,seed,params,kv_bytes_per_token,val_loss,status,"
        "reason,foo_scale\n"
        "mha_seed1,mha,mha,,true,1,1000,4096,2.0,ok,,\n"
        "foo_seed1,foo,foo,3,true,1,900,1024,2.2,ok,,0.25\n";
    char *dir = al_test_tmpdir(), **head = NULL;
    free(al_test_write(dir, "summary.csv", text));
    write_report(dir);
    char *csv = read_in(dir, "configs.csv");
    ck_assert_msg(!strncmp(csv, "config,variant,n_foo,foo_scale,causal,n_layer,", 46), "%s", csv);
    free(csv);
    int n = 0;
    char **r = configs_row(dir, "foo", &head, &n);
    ck_assert_str_eq(field(head, r, n, "n_foo"), "3");
    ck_assert_str_eq(field(head, r, n, "foo_scale"), "0.25");
    free_fields(r, n);
    r = configs_row(dir, "mha", &head, &n);
    ck_assert_str_eq(field(head, r, n, "n_foo"), "");
    ck_assert_str_eq(field(head, r, n, "foo_scale"), "");
    free_fields(r, n);
    free_fields(head, n);
    char *md = read_in(dir, "report.md"), *row = table_row(md, "foo");
    ck_assert_msg(strstr(md, "| configuration | n_foo | foo_scale | n_layer |"), "%s", md);
    ck_assert_msg(strstr(row, "| foo | foo (n_foo 3, foo_scale 0.25) |"), "%s", row);
    free(row);
    row = detail_row(md, "foo");
    ck_assert_msg(strstr(row, "| foo | 3 | 0.25 | – |"), "%s", row);
    free(row);
    row = detail_row(md, "mha");
    ck_assert_msg(strstr(row, "| mha | – | – | – |"), "%s", row);
    free(row), free(md), free(dir);
}
END_TEST

/* ------------------------------------------------------------ errors */

START_TEST(bad_summaries_are_one_line_errors)
{
    al_report_stats st;
    al_err e;
    char *dir = al_test_tmpdir(), want[4300];
    ck_assert_int_eq(al_report_write(dir, &st, &e), -1);
    snprintf(want, sizeof want, "%s/summary.csv: cannot open", dir);
    ck_assert_msg(strstr(e.msg, want), "%s", e.msg);
    free(al_test_write(dir, "summary.csv", "trial,status,kv_bytes_per_token\nx,ok,1\n"));
    ck_assert_int_eq(al_report_write(dir, &st, &e), -1);
    snprintf(want, sizeof want, "%s/summary.csv:1: error: no column 'val_loss'", dir);
    ck_assert_msg(strstr(e.msg, want), "%s", e.msg);
    free(al_test_write(dir, "summary.csv",
                       "trial,status,kv_bytes_per_token,val_loss\nx,ok,1,2\ny,ok,1,abc\n"));
    ck_assert_int_eq(al_report_write(dir, &st, &e), -1);
    snprintf(want, sizeof want, "%s/summary.csv:3: error: column 'val_loss': 'abc' is not a number",
             dir);
    ck_assert_str_eq(e.msg, want);
    char cmd[4400], *out;
    snprintf(cmd, sizeof cmd, "%s report %s", al_test_binary(), dir);
    ck_assert_int_eq(al_test_run(cmd, &out), 2);
    ck_assert_msg(strstr(out, "'abc' is not a number"), "%s", out);
    free(out), free(dir);
}
END_TEST

Suite *report_suite(void)
{
    Suite *s = suite_create("report");
    TCase *tc = tcase_create("report");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, pareto_front_keeps_the_undominated_points);
    tcase_add_test(tc, the_front_is_by_memory_held_at_the_report_context);
    tcase_add_test(tc, report_aggregates_seeds_and_marks_the_front);
    tcase_add_test(tc, paired_interval_equals_a_hand_computation);
    tcase_add_test(tc, one_seed_reports_n_1_and_no_interval);
    tcase_add_test(tc, holm_adjusts_the_family_of_comparisons_with_the_baseline);
    tcase_add_test(tc, loss_slope_over_the_last_quarter_by_hand);
    tcase_add_test(tc, gap_to_the_baseline_over_the_last_quarter_by_hand);
    tcase_add_test(tc, recall_reports_the_median_step_to_solve);
    tcase_add_test(tc, trials_on_different_machines_are_called_out);
    tcase_add_test(tc, select_picks_the_argmin_per_seed);
    tcase_add_test(tc, accuracy_metric_counts_solved_seeds);
    tcase_add_test(tc, solved_counts_are_compared_with_the_baseline_by_seed);
    tcase_add_test(tc, passkey_table_gives_intervals_and_paired_differences);
    tcase_add_test(tc, unmatched_parameter_counts_are_called_out);
    tcase_add_test(tc, accuracy_is_the_measure_when_every_config_has_one);
    tcase_add_test(tc, curves_average_seeds_per_step);
    tcase_add_test(tc, gnuplot_draws_png_and_svg_beside_its_script);
    tcase_add_test(tc, a_new_variants_settings_become_columns);
    tcase_add_test(tc, bad_summaries_are_one_line_errors);
    suite_add_tcase(s, tc);
    return s;
}
