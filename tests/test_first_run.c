/*
 * test_first_run.c - what a first run tripped on (issue 41, item 5;
 * docs/first-run.md): one path rule for experiment files, every shipped
 * experiment dry-run from another working directory, the same model under
 * two names noted, true/false in every CSV, the report's main table
 * narrow and cheapest first, plots that say what they draw, and --help
 * texts without dangling fragments.
 */
#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "al_config_io.h"
#include "al_report.h"
#include "al_test.h"
#include "al_util.h"

/* ------------------------------------------------------------ helpers */

static int sh(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int sh(char **out, const char *fmt, ...)
{
    char cmd[16384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return al_test_run(cmd, out);
}

static __attribute__((noinline)) char *read_in(const char *dir, const char *name)
{
    char path[4200], *t = NULL;
    size_t n;
    al_err e;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ck_assert_msg(al_read_file(path, &t, &n, &e) == 0, "%s", e.msg);
    return t;
}

/* A text of n bytes from the repository's corpus (repeated if short). */
static char *write_corpus(const char *dir, const char *name, size_t n)
{
    char *src, *buf = malloc(n + 1);
    size_t len;
    al_err e;
    ck_assert_msg(al_read_file(al_test_corpus(), &src, &len, &e) == 0, "%s", e.msg);
    for (size_t i = 0; i < n; i++) buf[i] = src[i % len];
    buf[n] = 0;
    char *path = al_test_write(dir, name, buf);
    free(src), free(buf);
    return path;
}

static char *real(const char *path)
{
    char *r = realpath(path, NULL);
    ck_assert_msg(r != NULL, "realpath %s", path);
    return r;
}

static void mkdir_in(const char *dir, const char *name)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    ck_assert_int_eq(mkdir(p, 0777), 0);
}

static const char tiny_train[] =
    "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16}\n"
    "train: {steps: 4, batch_size: 2, eval_every: 2, eval_batches: 1, threads: 1,"
    " warmup_steps: 1}\n";

/* ------------------------------------------------------------ paths */

/* data.path in a file is the file's folder's: the run starts from another
 * working directory, and the config it writes names the file absolutely
 * (so `train --resume DIR` reads it from anywhere). */
START_TEST(a_relative_data_path_is_the_experiment_files_folders_from_any_cwd)
{
    char *dir = al_test_tmpdir(), *out, text[4096];
    mkdir_in(dir, "exp"), mkdir_in(dir, "elsewhere");
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/exp", dir);
    free(write_corpus(sub, "d.txt", 20000));
    snprintf(text, sizeof text, "data: {source: text, path: d.txt}\n%s", tiny_train);
    free(al_test_write(sub, "t.yaml", text));
    ck_assert_msg(sh(&out, "cd '%s/elsewhere' && '%s' train ../exp/t.yaml --out run", dir,
                     al_test_binary()) == 0, "%s", out);
    free(out);
    char run[4300], *rdir = real(dir);
    snprintf(run, sizeof run, "%s/elsewhere/run", dir);
    /* the run's config.yaml names the file from its own folder */
    char *cfg = read_in(run, "config.yaml");
    ck_assert_msg(strstr(cfg, "\n  path: \"../../exp/d.txt\"\n"), "%s", cfg);
    free(cfg);
    /* the run's own config.yaml trains again from yet another folder */
    ck_assert_msg(sh(&out, "cd / && '%s' train '%s/config.yaml' --out '%s/again'",
                     al_test_binary(), run, dir) == 0, "%s", out);
    free(out);
    /* moved with its data, the run's config still names the data */
    ck_assert_msg(sh(&out, "cd '%s' && mkdir moved && mv exp elsewhere moved/ && cd / && "
                     "'%s' train '%s/moved/elsewhere/run/config.yaml' --out '%s/again2'", dir,
                     al_test_binary(), dir, dir) == 0, "%s", out);
    free(out), free(rdir), free(dir);
}
END_TEST

/* A path given by --set is the command line's: the working directory's,
 * not the file's folder. */
START_TEST(a_set_path_is_the_working_directorys)
{
    char *dir = al_test_tmpdir(), *out, text[4096], sub[4200];
    mkdir_in(dir, "exp");
    snprintf(sub, sizeof sub, "%s/exp", dir);
    free(write_corpus(sub, "d.txt", 20000));
    snprintf(text, sizeof text, "data: {source: text}\n%s", tiny_train);
    free(al_test_write(sub, "t.yaml", text));
    ck_assert_msg(sh(&out, "cd '%s' && '%s' train exp/t.yaml --set data.path=exp/d.txt --out r1",
                     dir, al_test_binary()) == 0, "%s", out);
    free(out);
    /* d.txt is beside the file, not in the working directory */
    char *rdir = real(dir), want[4400];
    ck_assert_int_eq(sh(&out, "cd '%s' && '%s' train exp/t.yaml --set data.path=d.txt --out r2",
                        dir, al_test_binary()), 2);
    snprintf(want, sizeof want, "%s/d.txt", rdir);
    ck_assert_msg(strstr(out, want), "want '%s' in\n%s", want, out);
    free(out), free(rdir), free(dir);
}
END_TEST

/* In the decoder: data.path and train.init_from relative to the file's
 * folder, made absolute; absolute ones kept; --set's against the working
 * directory. */
START_TEST(path_keys_resolve_against_the_files_folder)
{
    char *dir = al_test_tmpdir(), sub[4200], want[4400], cwd[PATH_MAX];
    mkdir_in(dir, "sub");
    snprintf(sub, sizeof sub, "%s/sub", dir);
    char *path = al_test_write(sub, "x.yaml", "data: {path: ../t.txt}\n"
                                              "train: {init_from: m.safetensors}\n");
    char *rdir = real(dir);
    al_config c;
    al_err e;
    ck_assert_msg(al_config_load(path, NULL, 0, &c, &e) == 0, "%s", e.msg);
    snprintf(want, sizeof want, "%s/t.txt", rdir);   /* "sub/.." dropped */
    ck_assert_str_eq(c.data.path, want);
    snprintf(want, sizeof want, "%s/sub/m.safetensors", rdir);
    ck_assert_str_eq(c.train.init_from, want);
    const char *sets[] = {"data.path=/abs/t.txt", "train.init_from=m.safetensors"};
    ck_assert_msg(al_config_load(path, sets, 2, &c, &e) == 0, "%s", e.msg);
    ck_assert_str_eq(c.data.path, "/abs/t.txt");
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    snprintf(want, sizeof want, "%s/m.safetensors", cwd);
    ck_assert_str_eq(c.train.init_from, want);
    free(path), free(rdir), free(dir);
}
END_TEST

/* Every shipped experiment, dry-run from a folder that is not the
 * repository: a fresh clone runs each. A file that lists the example
 * plugin takes it from this build when the repository has no build/. */
START_TEST(every_shipped_experiment_dry_runs_from_another_cwd)
{
    char edir[4200], *dir = al_test_tmpdir(), shipped_swa[4400];
    snprintf(edir, sizeof edir, "%s/experiments", al_test_srcdir());
    snprintf(shipped_swa, sizeof shipped_swa, "%s/build/variants/examples/swa/libattnlab_swa.so",
             al_test_srcdir());
    DIR *d = opendir(edir);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 6 || strcmp(de->d_name + len - 5, ".yaml") != 0) continue;
        char file[4500], set[4600] = "", *text, *out;
        size_t tn;
        al_err e;
        snprintf(file, sizeof file, "%s/%s", edir, de->d_name);
        ck_assert_int_eq(al_read_file(file, &text, &tn, &e), 0);
        if (strstr(text, "\nplugins:") && access(shipped_swa, R_OK) != 0)
            snprintf(set, sizeof set, " --set 'plugins=[%s]'", AL_SWA_PLUGIN);
        free(text);
        int rc = sh(&out, "cd '%s' && '%s' sweep '%s' --dry-run --out '%s/r-%s'%s", dir,
                    al_test_binary(), file, dir, de->d_name, set);
        ck_assert_msg(rc == 0, "%s: exit %d\n%s", de->d_name, rc, out);
        free(out);
        n++;
    }
    closedir(d);
    ck_assert_int_ge(n, 10);
    free(dir);
}
END_TEST

/* ------------------------------------------------------------ a real sweep */

/* The named column of a CSV's header; -1 if none. */
static int col_of(const char *head_line, const char *name)
{
    int col = 0;
    size_t n = strlen(name);
    for (const char *p = head_line; *p && *p != '\n'; col++) {
        if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\n' || !p[n])) return col;
        while (*p && *p != ',' && *p != '\n') p++;
        if (*p == ',') p++;
    }
    return -1;
}

/* Cell col of the line at p (no quoted commas in the cells read here). */
static void cell_of(const char *p, int col, char *out, size_t n)
{
    for (int c = 0; c < col && *p && *p != '\n'; c++) {
        while (*p && *p != ',' && *p != '\n') p++;
        if (*p == ',') p++;
    }
    size_t len = strcspn(p, ",\n");
    snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), p);
}

/* Every value of column name, each line after the header, must be one of
 * allowed (a list ending in NULL). */
static void column_is_one_of(const char *csv, const char *file, const char *name,
                             const char *const *allowed)
{
    int col = col_of(csv, name);
    ck_assert_msg(col >= 0, "%s: no column %s", file, name);
    for (const char *p = strchr(csv, '\n'); p && p[1]; p = strchr(p + 1, '\n')) {
        char v[64];
        cell_of(p + 1, col, v, sizeof v);
        int ok = 0;
        for (int i = 0; allowed[i]; i++) ok |= strcmp(v, allowed[i]) == 0;
        ck_assert_msg(ok, "%s: column %s has '%s'", file, name, v);
    }
}

static const char *const tf[] = {"true", "false", NULL};
static const char *const tf_blank[] = {"true", "false", "", NULL};

static char *run_twins_sweep(char **dir_out)
{
    char *dir = al_test_tmpdir(), text[8192], *out;
    char *data = write_corpus(dir, "d.txt", 30000);
    snprintf(text, sizeof text,
             "name: twins\n"
             "data: {source: text, path: d.txt}\n"
             "model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16}\n"
             "train: {steps: 4, batch_size: 2, eval_every: 2, eval_batches: 1, threads: 1,"
             " warmup_steps: 1}\n"
             "sweep:\n  grid:\n    model.attention: [{variant: mha}, {variant: gqa, n_kv_head: 2},"
             " {variant: mqa}]\n");
    char *path = al_test_write(dir, "exp.yaml", text);
    ck_assert_msg(sh(&out, "cd / && '%s' sweep '%s' --out '%s/r' --jobs 2", al_test_binary(),
                     path, dir) == 0, "%s", out);
    free(out), free(path), free(data);
    *dir_out = dir;
    char *r = malloc(4200);
    snprintf(r, 4200, "%s/r", dir);
    return r;
}

/* mha and gqa with n_kv_head = n_head are one model: summary.csv's model
 * hash says so, and report.md and index.html name both in one note. */
START_TEST(the_same_model_under_two_names_is_noted_in_both_reports)
{
    char *dir, *r = run_twins_sweep(&dir);
    char *sum = read_in(r, "summary.csv");
    int cm = col_of(sum, "model"), cg = col_of(sum, "group");
    ck_assert(cm >= 0 && cg >= 0);
    char mh[3][64] = {{0}}, grp[3][128] = {{0}};
    int i = 0;
    for (const char *p = strchr(sum, '\n'); p && p[1] && i < 3; p = strchr(p + 1, '\n'), i++) {
        cell_of(p + 1, cm, mh[i], sizeof mh[i]);
        cell_of(p + 1, cg, grp[i], sizeof grp[i]);
    }
    ck_assert_int_eq(i, 3);
    int mha = -1, gqa = -1, mqa = -1;
    for (int k = 0; k < 3; k++) {
        if (!strncmp(grp[k], "mha", 3)) mha = k;
        else if (!strncmp(grp[k], "gqa", 3)) gqa = k;
        else mqa = k;
    }
    ck_assert(mha >= 0 && gqa >= 0 && mqa >= 0);
    ck_assert_int_eq(strlen(mh[mha]), 16);
    ck_assert_str_eq(mh[mha], mh[gqa]);
    ck_assert_str_ne(mh[mha], mh[mqa]);
    char line[512];
    snprintf(line, sizeof line, "- %s and %s are the same model.\n",
             mha < gqa ? grp[mha] : grp[gqa], mha < gqa ? grp[gqa] : grp[mha]);
    char *md = read_in(r, "report.md"), *html = read_in(r, "index.html");
    const char *note = "The same model under more than one configuration.";
    ck_assert_msg(strstr(md, note) && strstr(md, line), "want '%s' in\n%s", line, md);
    snprintf(line, sizeof line, "%s and %s are the same model.",
             mha < gqa ? grp[mha] : grp[gqa], mha < gqa ? grp[gqa] : grp[mha]);
    ck_assert_msg(strstr(html, note) && strstr(html, line), "want '%s' in index.html", line);
    free(md), free(html), free(sum), free(r), free(dir);
}
END_TEST

/* One boolean convention, true/false, in summary.csv and configs.csv. */
START_TEST(every_boolean_in_the_sweeps_csvs_is_true_or_false)
{
    char *dir, *r = run_twins_sweep(&dir);
    char *sum = read_in(r, "summary.csv"), *cfg = read_in(r, "configs.csv");
    column_is_one_of(sum, "summary.csv", "baseline", tf);
    column_is_one_of(sum, "summary.csv", "causal", tf);
    static const char *const cfg_bools[] = {"causal", "resolved", "baseline", "front",
        "front_resolved", "resolved_holm", "still_improving", "same_machine",
        "solved_differs_holm", NULL};
    for (int i = 0; cfg_bools[i]; i++) column_is_one_of(cfg, "configs.csv", cfg_bools[i], tf_blank);
    free(sum), free(cfg), free(r), free(dir);
}
END_TEST

/* ------------------------------------------------------------ the report */

static const char header[] =
    "trial,config,group,baseline,variant,n_kv_head,causal,seed,params,kv_bytes_per_token,"
    "kv_context,kv_bytes_at_context,steps,tokens_per_step,final_train_loss,val_loss,"
    "best_val_loss,test_loss,tokens_per_s,wall_s,status,reason\n";

static char *summary_dir(const char *body)
{
    char *dir = al_test_tmpdir(), text[8192];
    snprintf(text, sizeof text, "%s%s", header, body);
    free(al_test_write(dir, "summary.csv", text));
    return dir;
}

static al_report_stats report_without_gnuplot(const char *dir)
{
    al_report_stats st;
    al_err e;
    setenv("AL_GNUPLOT", "/nonexistent/gnuplot", 1);
    int rc = al_report_write(dir, &st, &e);
    unsetenv("AL_GNUPLOT");
    ck_assert_msg(rc == 0, "%s", e.msg);
    return st;
}

/* Four configurations; twin1 and twin2 at one place (2048 bytes, 2.3). */
static const char four[] =
    "big_seed1,big,big,true,mha,4,true,1,1000,4096,64,262144,100,64,2,2.0,2.0,2.1,1000,1,ok,\n"
    "big_seed2,big,big,true,mha,4,true,2,1000,4096,64,262144,100,64,2,2.2,2.2,2.1,1000,1,ok,\n"
    "twin1_seed1,twin1,twin1,false,gqa,2,true,1,900,2048,64,131072,100,64,2,2.3,2.3,2.3,1000,1,ok,\n"
    "twin1_seed2,twin1,twin1,false,gqa,2,true,2,900,2048,64,131072,100,64,2,2.3,2.3,2.3,1000,1,ok,\n"
    "twin2_seed1,twin2,twin2,false,gqa,2,true,1,900,2048,64,131072,100,64,2,2.3,2.3,2.3,1000,1,ok,\n"
    "twin2_seed2,twin2,twin2,false,gqa,2,true,2,900,2048,64,131072,100,64,2,2.3,2.3,2.3,1000,1,ok,\n"
    "small_seed1,small,small,false,mqa,1,true,1,850,1024,64,65536,100,64,2,2.5,2.5,2.5,1000,1,ok,\n"
    "small_seed2,small,small,false,mqa,1,true,2,850,1024,64,65536,100,64,2,2.5,2.5,2.6,1000,1,ok,\n";

/* The table's header line in report.md under "## Configurations". */
static int main_table_columns(const char *md)
{
    const char *p = strstr(md, "## Configurations\n\n| ");
    ck_assert_ptr_nonnull(p);
    p = strchr(p, '|');
    int n = 0;
    for (; *p && *p != '\n'; p++) n += *p == '|';
    return n - 1;
}

/* At most 11 columns (10 and the recall tasks' solved), cheapest first by
 * the cache at the report context, then by loss; the rest in a second
 * table, named in the first's legend. */
START_TEST(the_main_table_is_narrow_and_cheapest_first)
{
    char *dir = summary_dir(four);
    report_without_gnuplot(dir);
    char *md = read_in(dir, "report.md");
    ck_assert_int_le(main_table_columns(md), 11);
    const char *t = strstr(md, "## Configurations\n");
    const char *s = strstr(t, "\n| small |"), *w1 = strstr(t, "\n| twin1 |"),
               *w2 = strstr(t, "\n| twin2 |"), *b = strstr(t, "\n| big (baseline) |");
    ck_assert_msg(s && w1 && w2 && b && s < w1 && w1 < w2 && w2 < b, "%s", t);
    ck_assert_ptr_nonnull(strstr(md, "## More about each configuration\n\n| configuration |"));
    ck_assert_ptr_nonnull(strstr(t, "*More about each configuration*"));
    /* the sd and the slope moved to the second table */
    const char *more = strstr(md, "## More about each configuration");
    char *head = strndup(t, (size_t)(more - t));
    ck_assert_ptr_null(strstr(head, "| sd |"));
    ck_assert_ptr_nonnull(strstr(more, "| sd |"));
    free(head), free(md), free(dir);
}
END_TEST

/* Older summaries wrote baseline as 1/0: still read; anything else is an
 * error naming the column. */
START_TEST(old_one_zero_booleans_are_still_read)
{
    char body[sizeof four];
    snprintf(body, sizeof body, "%s", four);
    for (char *p = body; (p = strstr(p, ",true,")) != NULL;) memcpy(p, ",1,   ", 6);
    for (char *p = body; (p = strstr(p, ",false,")) != NULL;) memcpy(p, ",0,    ", 7);
    /* the padding (spaces) is not a value: rebuild without it */
    char clean[sizeof four];
    size_t o = 0;
    for (const char *p = body; *p; p++)
        if (*p != ' ') clean[o++] = *p;
    clean[o] = 0;
    char *dir = summary_dir(clean);
    report_without_gnuplot(dir);
    char *md = read_in(dir, "report.md");
    ck_assert_msg(strstr(md, "## Paired differences against the baseline (big)"), "%s", md);
    free(md), free(dir);
    dir = summary_dir("a_seed1,a,a,yes,mha,4,true,1,1,4,,,1,1,1,2,2,2,1,1,ok,\n");
    al_report_stats st;
    al_err e;
    ck_assert_int_eq(al_report_write(dir, &st, &e), -1);
    ck_assert_msg(strstr(e.msg, "column 'baseline': 'yes' is not true or false"), "%s", e.msg);
    free(dir);
}
END_TEST

/* One configuration alone is the cheapest front point: nothing to resolve
 * it from, so the plot does not call it resolved from its neighbours. */
START_TEST(the_cheapest_point_is_not_called_resolved_from_neighbours)
{
    char *dir = summary_dir(
        "solo_seed1,solo,solo,true,mha,4,true,1,1000,4096,64,262144,100,64,2,2.0,2.0,2.1,1000,1,ok,\n"
        "solo_seed2,solo,solo,true,mha,4,true,2,1000,4096,64,262144,100,64,2,2.2,2.2,2.3,1000,1,ok,\n");
    report_without_gnuplot(dir);
    char *gp = read_in(dir, "tradeoff.gp"), *dat = read_in(dir, "tradeoff.dat");
    ck_assert_msg(!strstr(gp, "resolved from its front neighbours"), "%s", gp);
    ck_assert_msg(strstr(gp, "cheapest on the front"), "%s", gp);
    ck_assert_msg(strstr(dat, "\"solo\" 1 2 1 2\n"), "%s", dat);
    free(gp), free(dat), free(dir);
    /* with neighbours: the cheapest is class 2, a resolved one class 1 */
    dir = summary_dir(four);
    report_without_gnuplot(dir);
    dat = read_in(dir, "tradeoff.dat");
    ck_assert_msg(strstr(dat, "\"small\" 1 2 1 2\n"), "%s", dat);
    free(dat), free(dir);
}
END_TEST

/* Points at one place share one label; the y axis names the test loss. */
START_TEST(coincident_points_share_a_label_and_the_axis_says_test_loss)
{
    char *dir = summary_dir(four);
    report_without_gnuplot(dir);
    char *gp = read_in(dir, "tradeoff.gp"), *dat = read_in(dir, "tradeoff.dat");
    ck_assert_msg(strstr(dat, " \"twin1 / twin2\" ") && strstr(dat, " \"\" "), "%s", dat);
    ck_assert_msg(strstr(gp, "set ylabel \"test loss (nats/token)\""), "%s", gp);
    free(gp), free(dat), free(dir);
}
END_TEST

/* A colour "#rrggbb" dark enough to read on white (relative luminance at
 * most 0.6: gnuplot's default yellow #f0e442 is 0.86). */
static int readable(const char *hex)
{
    unsigned r, g, b;
    if (sscanf(hex, "#%2x%2x%2x", &r, &g, &b) != 3) return 0;
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255 <= 0.6;
}

static void every_curve_coloured(const char *gp)
{
    int lines = 0;
    for (const char *p = gp; (p = strstr(p, "with linespoints")) != NULL; p++, lines++) {
        const char *c = strstr(p, "lc rgb \"");
        const char *eol = strchr(p, '\n');
        ck_assert_msg(c && (!eol || c < eol), "a curve without its colour:\n%s", gp);
        ck_assert_msg(readable(c + 8), "colour %.7s is hard to read", c + 8);
    }
    ck_assert_int_ge(lines, 1);
}

static void write_metrics(const char *dir, const char *trial, const char *text)
{
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/%s", dir, trial);
    mkdir(sub, 0777);
    free(al_test_write(sub, "metrics.csv", text));
}

/* Same tokens per step everywhere: one panel (by step), each curve with
 * its band from the lowest to the highest seed and a readable colour;
 * different tokens per step: both panels. */
START_TEST(curves_draw_one_panel_at_one_batch_size_with_the_seeds_spread)
{
    char *dir = summary_dir(four);
    static const char *const trials[] = {"big_seed1", "big_seed2", "twin1_seed1", "twin1_seed2",
                                         "twin2_seed1", "twin2_seed2", "small_seed1",
                                         "small_seed2"};
    for (int i = 0; i < 8; i++)
        write_metrics(dir, trials[i], i % 2 ? "step,train_loss,val_loss\n0,,5.2\n100,2.1,2.2\n"
                                            : "step,train_loss,val_loss\n0,,5.0\n100,1.9,2.0\n");
    report_without_gnuplot(dir);
    char *d = read_in(dir, "curves.dat"), *gp = read_in(dir, "curves.gp");
    ck_assert_msg(strstr(d, "\n100 6400 2.1 2 2.2\n"), "%s", d);
    ck_assert_msg(!strstr(gp, "multiplot"), "%s", gp);
    ck_assert_msg(strstr(gp, "using 1:4:5 with filledcurves"), "%s", gp);
    every_curve_coloured(gp);
    free(d), free(gp), free(dir);
    /* big trains twice the tokens per step */
    char body[sizeof four];
    snprintf(body, sizeof body, "%s", four);
    char *twin = strstr(body, "twin1");
    for (char *p = body; (p = strstr(p, ",100,64,")) != NULL && p < twin; p++)
        p[5] = '9';   /* big's 64 tokens per step become 94 */
    dir = summary_dir(body);
    for (int i = 0; i < 8; i++)
        write_metrics(dir, trials[i], "step,train_loss,val_loss\n0,,5.0\n100,1.9,2.0\n");
    report_without_gnuplot(dir);
    gp = read_in(dir, "curves.gp");
    ck_assert_msg(strstr(gp, "set multiplot layout 1,2"), "%s", gp);
    ck_assert_msg(strstr(gp, "set xlabel \"tokens trained\""), "%s", gp);
    every_curve_coloured(gp);
    free(gp), free(dir);
}
END_TEST

/* ------------------------------------------------------------ --help */

/* Every subcommand's --help: exit 0, no option said to be ignored or
 * unused, and no dangling fragment (a line that opens with "(" right
 * after a sentence ended). */
START_TEST(every_help_text_reads_whole)
{
    char *top;
    ck_assert_int_eq(al_test_attnlab("--help", &top), 0);
    const char *p = strstr(top, "commands:\n");
    ck_assert_ptr_nonnull(p);
    int n = 0;
    char names[33][32];
    for (p = strchr(p, '\n') + 1; *p == ' ' && n < 32; p = strchr(p, '\n') + 1) {
        sscanf(p, "%31s", names[n++]);
        if (!strchr(p, '\n')) break;
    }
    snprintf(names[n++], sizeof names[0], "grads");   /* not listed, but has --help */
    ck_assert_int_ge(n, 15);
    for (int i = 0; i < n; i++) {
        char args[128], *out;
        snprintf(args, sizeof args, "%.31s --help", names[i]);
        ck_assert_msg(al_test_attnlab(args, &out) == 0, "%s: %s", args, out);
        ck_assert_msg(!strstr(out, "ignored") && !strstr(out, "unused") &&
                      !strstr(out, "accepted and"), "%s:\n%s", args, out);
        for (const char *l = out; (l = strchr(l, '\n')) != NULL; l++) {
            const char *prev_end = l - 1;
            if (l[1] == '(' && prev_end >= out && *prev_end == '.')
                ck_abort_msg("%s: a fragment after a sentence: '%.60s'", args, l + 1);
        }
        free(out);
    }
    free(top);
}
END_TEST

Suite *first_run_suite(void)
{
    Suite *s = suite_create("first_run");
    TCase *tc = tcase_create("first_run");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, a_relative_data_path_is_the_experiment_files_folders_from_any_cwd);
    tcase_add_test(tc, a_set_path_is_the_working_directorys);
    tcase_add_test(tc, path_keys_resolve_against_the_files_folder);
    tcase_add_test(tc, every_shipped_experiment_dry_runs_from_another_cwd);
    tcase_add_test(tc, the_same_model_under_two_names_is_noted_in_both_reports);
    tcase_add_test(tc, every_boolean_in_the_sweeps_csvs_is_true_or_false);
    tcase_add_test(tc, the_main_table_is_narrow_and_cheapest_first);
    tcase_add_test(tc, old_one_zero_booleans_are_still_read);
    tcase_add_test(tc, the_cheapest_point_is_not_called_resolved_from_neighbours);
    tcase_add_test(tc, coincident_points_share_a_label_and_the_axis_says_test_loss);
    tcase_add_test(tc, curves_draw_one_panel_at_one_batch_size_with_the_seeds_spread);
    tcase_add_test(tc, every_help_text_reads_whole);
    suite_add_tcase(s, tc);
    return s;
}
