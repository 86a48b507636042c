/*
 * test_report_html.c - index.html without a browser (the browser test is
 * tests/browser/report_page.sh): the markdown subset as HTML against
 * hand-written answers, escaping (a configuration named to break out of
 * the page's script and markup), the embedded data against the summary's
 * numbers, report.md's sections in the page in the same words, and the
 * links to the trials' folders only where those exist.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "al_report.h"
#include "al_test.h"
#include "report_mdhtml.h"

/* ------------------------------------------------------------ helpers */

/* What fn writes for md, as a malloc'ed string. */
static char *render(void (*fn)(FILE *, const char *, size_t), const char *md)
{
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&out, &n);
    fn(f, md, strlen(md));
    fclose(f);
    return out;
}

static void blocks_with_tables(FILE *f, const char *md, size_t n)
{
    al_md_blocks(f, md, n, 1);
}

static void expect_inline(const char *md, const char *want)
{
    char *got = render(al_md_inline, md);
    ck_assert_msg(strcmp(got, want) == 0, "inline %s:\n got  %s\n want %s", md, got, want);
    free(got);
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
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

/* ------------------------------------------------------------ markdown */

START_TEST(markdown_inline_matches_hand_written_html)
{
    expect_inline("**yes**", "<strong>yes</strong>");
    expect_inline("*seeds*: seeds in the statistics (a `+`: more)",
                  "<em>seeds</em>: seeds in the statistics (a <code>+</code>: more)");
    /* a slope's star is a literal, not emphasis */
    expect_inline("-0.0412* and +0.01*", "-0.0412* and +0.01*");
    expect_inline("a \\| b", "a | b");
    expect_inline("x < y & \"q\" 'r'", "x &lt; y &amp; &quot;q&quot; &#39;r&#39;");
    expect_inline("`<script>`", "<code>&lt;script&gt;</code>");
    expect_inline("[SVG](tradeoff.svg)", "<a href=\"tradeoff.svg\">SVG</a>");
    expect_inline("![a b](attention/m+m/layer0.png)",
                  "<a class=\"al-pic\" href=\"attention/m%2Bm/layer0.png\">picture: a b</a>");
    /* no scheme but http(s) becomes a link */
    expect_inline("[x](javascript:alert(1))", "[x](javascript:alert(1))");
    expect_inline("[x](https://a.org/?q=1&r=\"2\")",
                  "<a href=\"https://a.org/?q=1&amp;r=&quot;2&quot;\">x</a>");
    /* an emphasis left open is closed at the end of its text */
    expect_inline("**open *both", "**open *both");
}
END_TEST

START_TEST(markdown_blocks_match_hand_written_html)
{
    const char *md = "# Sweep report: t\n\nOne line\nand two.\n\n## Pareto front: a & b\n\n"
                     "| config | reason |\n| --- | ---: |\n| a | x \\| y |\n| `b|c` | **z** |\n\n"
                     "- one\n- *two*\n\n```text\n<b>## not a heading</b>\n```\n";
    char *got = render(blocks_with_tables, md);
    const char *want =
        "<h1 id=\"sweep-report-t\">Sweep report: t</h1>\n"
        "<p>One line\nand two.</p>\n"
        "<h2 id=\"pareto-front-a-b\">Pareto front: a &amp; b</h2>\n"
        "<table class=\"al-md\">\n"
        "<thead><tr><th>config</th><th>reason</th></tr></thead>\n"
        "<tr><td>a</td><td>x | y</td></tr>\n"
        "<tr><td><code>b|c</code></td><td><strong>z</strong></td></tr>\n"
        "</table>\n"
        "<ul>\n<li>one</li>\n<li><em>two</em></li>\n</ul>\n"
        "<pre><code>&lt;b&gt;## not a heading&lt;/b&gt;\n</code></pre>\n";
    ck_assert_msg(strcmp(got, want) == 0, "got:\n%s\nwant:\n%s", got, want);
    free(got);
    /* without tables: the rest unchanged, the table gone */
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&out, &n);
    al_md_blocks(f, md, strlen(md), 0);
    fclose(f);
    ck_assert_ptr_null(strstr(out, "<table"));
    ck_assert_ptr_nonnull(strstr(out, "<li><em>two</em></li>"));
    free(out);
}
END_TEST

/* ------------------------------------------------------------ the page */

static const char header[] =
    "trial,config,variant,causal,seed,params,kv_bytes_per_token,steps,tokens_per_step,"
    "final_train_loss,val_loss,best_val_loss,test_loss,tokens_per_s,wall_s,baseline,status,"
    "reason\n";

/* A baseline with two seeds (test loss 2.0, 2.2), a configuration named to
 * close the page's script and open markup (2.3, 2.6), and "small"
 * (1.9, 2.1): by hand, means 2.1, 2.45, 2.0; sample sds sqrt(0.02),
 * sqrt(0.045), sqrt(0.02). */
#define EVIL "ev</script><b>il&'x"
static const char rows[] =
    "base_seed1,base,mha,true,1,1000,4096,100,64,1.9,2.0,2.0,2.0,1000,1.0,1,ok,\n"
    "base_seed2,base,mha,true,2,1000,4096,100,64,2.1,2.2,2.2,2.2,1000,1.0,1,ok,\n"
    EVIL "_seed1," EVIL ",mqa,true,1,900,1024,100,64,2.2,2.3,2.3,2.3,1000,1.0,0,ok,\n"
    EVIL "_seed2," EVIL ",mqa,true,2,900,1024,100,64,2.2,2.6,2.6,2.6,1000,1.0,0,ok,\n"
    "small_seed1,small,gqa,true,1,950,2048,100,64,2.0,1.9,1.9,1.9,1000,1.0,0,ok,\n"
    "small_seed2,small,gqa,true,2,950,2048,100,64,2.0,2.1,2.1,2.1,1000,1.0,0,ok,\n";

static char *page_dir(void)
{
    char *dir = al_test_tmpdir(), text[4096], sub[4200];
    snprintf(text, sizeof text, "%s%s", header, rows);
    free(al_test_write(dir, "summary.csv", text));
    /* one trial with its folder and config.yaml (no metrics.csv) */
    snprintf(sub, sizeof sub, "%s/small_seed1", dir);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    free(al_test_write(sub, "config.yaml", "model: {}\n"));
    setenv("AL_GNUPLOT", "/nonexistent/gnuplot", 1);
    al_report_stats st;
    al_err e;
    ck_assert_msg(al_report_write(dir, &st, &e) == 0, "%s", e.msg);
    unsetenv("AL_GNUPLOT");
    ck_assert_int_eq(st.n_configs, 3);
    return dir;
}

/* The JSON between <script ... id="al-data"> and its </script>. */
static json_t *page_json(const char *page)
{
    const char *a = strstr(page, "id=\"al-data\">");
    ck_assert_ptr_nonnull(a);
    a += strlen("id=\"al-data\">");
    const char *b = strstr(a, "</script>");
    ck_assert_ptr_nonnull(b);
    json_error_t err;
    json_t *j = json_loadb(a, (size_t)(b - a), 0, &err);
    ck_assert_msg(j != NULL, "the page's data is not JSON: %s", err.text);
    return j;
}

START_TEST(page_escapes_names_in_markup_and_data)
{
    char *dir = page_dir(), *page = read_in(dir, "index.html");
    /* exactly the page's own two script elements close */
    ck_assert_int_eq(count(page, "</script>"), 2);
    ck_assert_int_eq(count(page, "<b>il"), 0);
    ck_assert_ptr_nonnull(strstr(page, "ev&lt;/script&gt;&lt;b&gt;il&amp;&#39;x"));
    ck_assert_ptr_nonnull(strstr(page, "ev\\u003c/script\\u003e\\u003cb\\u003eil\\u0026'x"));
    /* nothing to fetch: no src or stylesheet link, and a policy that forbids it */
    ck_assert_ptr_null(strstr(page, " src="));
    ck_assert_ptr_null(strstr(page, "<link"));
    ck_assert_ptr_nonnull(strstr(page, "default-src 'none'"));
    json_t *j = page_json(page);
    json_t *cfgs = json_object_get(j, "configs");
    ck_assert_int_eq((int)json_array_size(cfgs), 3);
    int found = 0;
    for (size_t i = 0; i < json_array_size(cfgs); i++)
        found |= strcmp(json_string_value(json_object_get(json_array_get(cfgs, i), "name")),
                        EVIL) == 0;
    ck_assert_msg(found, "the name did not survive the escaping");
    json_decref(j);
    free(page);
    free(dir);
}
END_TEST

START_TEST(page_data_holds_the_summary_numbers)
{
    char *dir = page_dir(), *page = read_in(dir, "index.html");
    json_t *j = page_json(page);
    ck_assert_str_eq(json_string_value(json_object_get(j, "metric")), "test loss");
    const char *names[] = {"base", EVIL, "small"};
    double mean[] = {2.1, 2.45, 2.0}, kv[] = {4096, 1024, 2048};
    double sd[] = {sqrt(0.02), sqrt(0.045), sqrt(0.02)};
    json_t *cfgs = json_object_get(j, "configs");
    for (size_t i = 0; i < json_array_size(cfgs); i++) {
        json_t *c = json_array_get(cfgs, i);
        const char *name = json_string_value(json_object_get(c, "name"));
        int k = 0;
        while (k < 3 && strcmp(names[k], name)) k++;
        ck_assert_msg(k < 3, "unknown configuration %s", name);
        ck_assert_double_eq_tol(json_real_value(json_object_get(c, "q")), mean[k], 1e-9);
        /* 95 % half-width: t(0.975, 1) sd / sqrt(2), t from a table */
        ck_assert_double_eq_tol(json_real_value(json_object_get(c, "ci")),
                                12.706204736174705 * sd[k] / sqrt(2), 1e-6);
        ck_assert_double_eq(json_real_value(json_object_get(json_object_get(c, "cost"), "kv")),
                            kv[k]);
        ck_assert_int_eq(json_is_true(json_object_get(c, "base")), k == 0);
    }
    /* the cost axes: bytes per token only (no kv_bytes_at_context column) */
    json_t *costs = json_object_get(j, "costs");
    ck_assert_int_eq((int)json_array_size(costs), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(costs, 0), "key")), "kv");
    /* the table cell sorts by the same mean */
    ck_assert_ptr_nonnull(strstr(page, "<td data-v=\"2.4500000000000002\">2.4500 ± "));
    json_decref(j);
    free(page);
    free(dir);
}
END_TEST

/* Every "## " heading of report.md is a section heading of the page, and
 * report.md's sentences are there in the same words. */
START_TEST(page_has_every_section_of_report_md)
{
    char *dir = page_dir(), *page = read_in(dir, "index.html"), *md = read_in(dir, "report.md");
    int n = 0;
    for (const char *p = md; (p = strstr(p, "\n## ")); p++, n++) {
        char title[256], want[300];
        snprintf(title, sizeof title, "%.*s", (int)strcspn(p + 4, "\n"), p + 4);
        char *h = NULL;
        size_t hn = 0;
        FILE *f = open_memstream(&h, &hn);
        al_md_inline(f, title, strlen(title));
        fclose(f);
        snprintf(want, sizeof want, "\">%s</h2>", h);
        ck_assert_msg(strstr(page, want), "no section %s in the page", title);
        free(h);
    }
    ck_assert_int_ge(n, 4);
    ck_assert_ptr_nonnull(strstr(page, "A difference that is not resolved could change sign with "
                                       "other seeds: do not read a ranking into it."));
    free(page);
    free(md);
    free(dir);
}
END_TEST

START_TEST(page_links_only_the_trial_folders_that_exist)
{
    char *dir = page_dir(), *page = read_in(dir, "index.html");
    ck_assert_ptr_nonnull(strstr(page, "<a href=\"small_seed1/\">small_seed1</a>"));
    ck_assert_ptr_nonnull(strstr(page, "<a href=\"small_seed1/config.yaml\">config.yaml</a>"));
    ck_assert_ptr_null(strstr(page, "small_seed1/metrics.csv"));
    ck_assert_ptr_null(strstr(page, "href=\"small_seed2/"));
    ck_assert_ptr_null(strstr(page, "href=\"base_seed1/"));
    free(page);
    free(dir);
}
END_TEST

/* summary.csv is hand-editable: a name that is not UTF-8 still gives a
 * page whose data parses (its stray bytes as '?'). */
START_TEST(page_survives_a_name_that_is_not_utf8)
{
    char *dir = al_test_tmpdir(), text[1024];
    snprintf(text, sizeof text, "%s%s", header,
             "a_seed1,a,mha,true,1,1000,4096,100,64,1.9,2.0,2.0,2.0,1000,1.0,1,ok,\n"
             "b\xff_seed1,b\xff,mqa,true,1,900,1024,100,64,2.2,2.3,2.3,2.3,1000,1.0,0,ok,\n");
    free(al_test_write(dir, "summary.csv", text));
    setenv("AL_GNUPLOT", "/nonexistent/gnuplot", 1);
    al_report_stats st;
    al_err e;
    ck_assert_msg(al_report_write(dir, &st, &e) == 0, "%s", e.msg);
    unsetenv("AL_GNUPLOT");
    char *page = read_in(dir, "index.html");
    json_t *j = page_json(page);
    json_t *cfgs = json_object_get(j, "configs");
    ck_assert_int_eq((int)json_array_size(cfgs), 2);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(cfgs, 1), "name")), "b?");
    json_decref(j);
    free(page);
    free(dir);
}
END_TEST

Suite *report_html_suite(void)
{
    Suite *s = suite_create("report_html");
    TCase *t = tcase_create("markdown");
    tcase_add_test(t, markdown_inline_matches_hand_written_html);
    tcase_add_test(t, markdown_blocks_match_hand_written_html);
    suite_add_tcase(s, t);
    t = tcase_create("page");
    tcase_add_test(t, page_escapes_names_in_markup_and_data);
    tcase_add_test(t, page_data_holds_the_summary_numbers);
    tcase_add_test(t, page_has_every_section_of_report_md);
    tcase_add_test(t, page_links_only_the_trial_folders_that_exist);
    tcase_add_test(t, page_survives_a_name_that_is_not_utf8);
    suite_add_tcase(s, t);
    return s;
}
