/*
 * test_attnmap.c - the files of an attention map (src/model/attnmap.c): the CSV
 * holds exactly the model's probabilities for the selected layers and
 * heads, the gnuplot pictures are PNGs of the documented size with one
 * panel per head (counted in the SVG gnuplot drew: one embedded image per
 * heatmap), labels with quotes and backslashes survive gnuplot, and a
 * missing gnuplot is reported, not fatal.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "al_attnmap.h"
#include "al_registry.h"
#include "al_test.h"
#include "al_test_model.h"

static void model256(al_model *m, int causal)
{
    al_model_config c;
    al_err e;
    ck_assert_int_eq(al_test_tiny_config(&c, al_variant_find("gqa"), 2, 32, 4, 8, 32, 256), 0);
    c.causal = causal;
    ck_assert_msg(al_model_init(m, &c, &e) == 0, "%s", e.msg);
    al_model_init_weights(m, 3);
    for (int i = 0; i < m->n_tensors; i++)
        if (strstr(m->tensors[i].name, ".attn.w"))
            for (size_t j = 0; j < m->tensors[i].numel; j++)
                m->params[m->tensors[i].offset + j] *= 30.0f;
}

static char *slurp(const char *dir, const char *name, size_t *n)
{
    char path[4200];
    al_err e;
    char *buf = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int rc = al_read_file(path, &buf, &len, &e);
    ck_assert_msg(rc == 0, "%s", e.msg);
    if (n) *n = len;
    return buf;
}

static int count(const char *s, const char *needle)
{
    int k = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle)) k++;
    return k;
}

static int exists(const char *dir, const char *name)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* Width and height from a PNG's IHDR chunk (bytes 16..23, big-endian). */
static void png_size(const char *dir, const char *name, int *w, int *h)
{
    size_t n;
    unsigned char *b = (unsigned char *)slurp(dir, name, &n);
    ck_assert_uint_ge(n, 24);
    ck_assert(memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0 && memcmp(b + 12, "IHDR", 4) == 0);
    *w = (b[16] << 24) | (b[17] << 16) | (b[18] << 8) | b[19];
    *h = (b[20] << 24) | (b[21] << 16) | (b[22] << 8) | b[23];
    free(b);
}

typedef struct fixture {
    al_model m;
    char *dir;
    int tokens[64], T, layers[1], heads[3];
    al_attnmap a;
} fixture;

/* Layer 1, heads 0, 2, 3 of the tokens of text. */
static void setup(fixture *f, const char *text, int causal, int log_scale)
{
    al_err e;
    model256(&f->m, causal);
    f->dir = al_test_tmpdir();
    f->T = (int)strlen(text);
    for (int i = 0; i < f->T; i++) f->tokens[i] = (unsigned char)text[i];
    f->layers[0] = 1;
    f->heads[0] = 0, f->heads[1] = 2, f->heads[2] = 3;
    f->a = (al_attnmap){.dir = f->dir, .title = "a \"quoted\" \\ title", .tokens = f->tokens,
                        .T = f->T, .layers = f->layers, .heads = f->heads, .n_layers = 1,
                        .n_heads = 3, .log_scale = log_scale};
    ck_assert_int_eq(al_attention_forward(&f->m, f->tokens, f->T, &e), 0);
    ck_assert_msg(al_attnmap_write(&f->m, &f->a, &e) == 0, "%s", e.msg);
}

static void teardown(fixture *f)
{
    al_model_free(&f->m);
    free(f->dir);
}

START_TEST(attention_csv_holds_the_selected_probabilities_and_nothing_masked)
{
    for (int causal = 1; causal >= 0; causal--) {
        fixture f;
        setup(&f, "In the beginning", causal, 0);
        int T = f.T, H = f.m.cfg.n_head;
        float *P = malloc((size_t)H * T * T * sizeof *P);
        al_attention_layer(&f.m, 1, T, P);
        char *csv = slurp(f.dir, "attention.csv", NULL);
        ck_assert(strncmp(csv, "layer,head,query,key,p\n", 23) == 0);
        int rows = 0, l, h, i, j;
        float p;
        for (size_t at = 23; csv[at]; at += strcspn(csv + at, "\n") + 1, rows++) {
            const char *s = csv + at;
            ck_assert_int_eq(sscanf(s, "%d,%d,%d,%d,%g", &l, &h, &i, &j, &p), 5);
            ck_assert_int_eq(l, 1);
            ck_assert(h == 0 || h == 2 || h == 3);
            ck_assert(!causal || j <= i);
            ck_assert_float_eq(p, P[((size_t)h * T + i) * T + j]);   /* %.9g round-trips */
        }
        ck_assert_int_eq(rows, 3 * (causal ? T * (T + 1) / 2 : T * T));
        char *tok = slurp(f.dir, "tokens.csv", NULL);
        ck_assert_ptr_nonnull(strstr(tok, "position,token,text\n0,73,\"I\"\n1,110,\"n\"\n"
                                          "2,32,\"\u2423\"\n"));
        ck_assert(!exists(f.dir, "layer0.gp") && exists(f.dir, "layer1.gp"));
        char *dat = slurp(f.dir, "layer1.dat", NULL);
        ck_assert_int_eq(count(dat, "# layer 1 head"), 3);
        ck_assert_int_eq(count(dat, " -1"), causal ? 3 * T * (T - 1) / 2 : 0);
        char *gp = slurp(f.dir, "layer1.gp", NULL);   /* unmasked: next-token scores */
        ck_assert_int_eq(count(gp, "set title \"head 2: next "), !causal);
        ck_assert_int_eq(count(gp, "set arrow 1 "), !causal);
        free(gp);
        free(csv), free(tok), free(dat), free(P);
        teardown(&f);
    }
}
END_TEST

START_TEST(pictures_are_pngs_of_the_documented_size_with_one_panel_per_head)
{
    fixture f;
    /* quotes, a backslash and a newline among the axis labels */
    setup(&f, "He said \"a\\b\"\nok", 1, 0);
    char *gp = slurp(f.dir, "layer1.gp", NULL);
    ck_assert_int_eq(count(gp, "\n  plot "), 3);
    ck_assert_ptr_nonnull(strstr(gp, "set cbrange [0:1]"));
    ck_assert_ptr_nonnull(strstr(gp, "\"\\\"\" 8"));   /* the quote at position 8 */
    int rc = al_attnmap_plot(&f.a);
    if (rc == 1) {
        fprintf(stderr, "attnmap: gnuplot not installed; pictures not checked\n");
        free(gp), teardown(&f);
        return;
    }
    char *log = exists(f.dir, "gnuplot.log") ? slurp(f.dir, "gnuplot.log", NULL) : NULL;
    ck_assert_msg(rc == 0, "gnuplot failed: %s", log ? log : "");
    free(log);
    /* 3 heads: 2 columns, 2 rows; T = 16 gives the 220 px minimum area */
    int w, h, ew, eh;
    png_size(f.dir, "layer1.png", &w, &h);
    al_attnmap_png_size(3, f.T, &ew, &eh);
    ck_assert_int_eq(ew, 2 * (220 + 110));
    ck_assert_int_eq(eh, 2 * (220 + 90) + 30);
    ck_assert_int_eq(w, ew);
    ck_assert_int_eq(h, eh);
    char *svg = slurp(f.dir, "layer1.svg", NULL);
    ck_assert_int_eq(count(svg, "<image"), 3);
    ck_assert_ptr_nonnull(strstr(svg, "head 2"));
    free(svg), free(gp);
    teardown(&f);
    /* 48 tokens: 576 px area, still labelled; 49: positions instead */
    al_attnmap_png_size(9, 48, &ew, &eh);
    ck_assert_int_eq(ew, 3 * (576 + 110));
    ck_assert_int_eq(eh, 3 * (576 + 90) + 30);
}
END_TEST

START_TEST(log_scale_and_long_sequences_change_the_script)
{
    fixture f;
    setup(&f, "0123456789abcdefghijklmnopqrstuv", 1, 1);   /* 32 tokens */
    char *gp = slurp(f.dir, "layer1.gp", NULL);
    ck_assert_ptr_nonnull(strstr(gp, "set logscale cb"));
    ck_assert_ptr_nonnull(strstr(gp, "set cbrange [1e-4:1]"));
    ck_assert_ptr_nonnull(strstr(gp, "\"v\" 31"));   /* labelled: 12 * 32 <= 576 */
    free(gp);
    teardown(&f);
    setup(&f, "0123456789abcdefghijklmnopqrstuv0123456789abcdefg", 1, 0);   /* 49 */
    gp = slurp(f.dir, "layer1.gp", NULL);
    ck_assert_ptr_null(strstr(gp, "\"v\" 31"));
    ck_assert_ptr_nonnull(strstr(gp, "set xtics 0,6 out nomirror"));
    free(gp);
    teardown(&f);
}
END_TEST

START_TEST(a_missing_gnuplot_is_reported_and_leaves_the_scripts)
{
    fixture f;
    setup(&f, "abc", 1, 0);
    setenv("AL_GNUPLOT", "/nonexistent/gnuplot", 1);
    int rc = al_attnmap_plot(&f.a);
    unsetenv("AL_GNUPLOT");
    ck_assert_int_eq(rc, 1);
    ck_assert(exists(f.dir, "layer1.gp") && !exists(f.dir, "layer1.png"));
    teardown(&f);
}
END_TEST

START_TEST(heads_csv_and_table_list_the_selected_heads)
{
    fixture f;
    al_err e;
    setup(&f, "abcabcabc", 1, 0);
    al_head_stats st[8];
    memset(st, 0, sizeof st);
    st[4 + 2] = (al_head_stats){1.5, 2.25, 0.125, 0.75, 0.0625};
    st[4 + 3].induction = 0.9;
    ck_assert_int_eq(al_heads_write_csv(f.dir, &f.m, &f.a, st, &e), 0);
    char *csv = slurp(f.dir, "heads.csv", NULL);
    ck_assert_str_eq(csv, "layer,head,entropy,distance,first_token,prev_token,induction\n"
                          "1,0,0.000000,0.000000,0.000000,0.000000,0.000000\n"
                          "1,2,1.500000,2.250000,0.125000,0.750000,0.062500\n"
                          "1,3,0.000000,0.000000,0.000000,0.000000,0.900000\n");
    char *out;
    size_t n;
    FILE *mem = open_memstream(&out, &n);
    al_heads_print(mem, &f.m, &f.a, st);
    fclose(mem);
    ck_assert_int_eq(count(out, "\n"), 4);
    ck_assert_ptr_nonnull(strstr(out, "    1    2    1.500     2.25   0.125   0.750     0.062  "
                                      "previous-token\n"));
    ck_assert_ptr_nonnull(strstr(out, "0.900  induction\n"));
    free(out), free(csv);
    teardown(&f);
}
END_TEST

Suite *attnmap_suite(void)
{
    Suite *s = suite_create("attnmap");
    TCase *tc = tcase_create("attnmap");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, attention_csv_holds_the_selected_probabilities_and_nothing_masked);
    tcase_add_test(tc, pictures_are_pngs_of_the_documented_size_with_one_panel_per_head);
    tcase_add_test(tc, log_scale_and_long_sequences_change_the_script);
    tcase_add_test(tc, a_missing_gnuplot_is_reported_and_leaves_the_scripts);
    tcase_add_test(tc, heads_csv_and_table_list_the_selected_heads);
    suite_add_tcase(s, tc);
    return s;
}
