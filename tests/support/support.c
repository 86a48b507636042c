/*
 * support.c - the helpers every suite shares (al_test.h, al_test_model.h):
 * paths of the source tree, the binary and the shared corpus, temporary
 * files, running commands, tiny model configs, relative errors, and the
 * environment for tests under mpirun.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "al_test.h"
#include "al_test_model.h"
#include "al_registry.h"
#include "attnlab_variant_v4.h"

const char *al_test_corpus(void)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/kjv_genesis.txt", al_test_srcdir());
    return path;
}

const char *al_test_srcdir(void)
{
    const char *s = getenv("AL_SRCDIR");
    return s ? s : AL_SRCDIR_DEFAULT;
}

const char *al_test_binary(void)
{
    const char *s = getenv("AL_BINARY");
    return s ? s : AL_BINARY_DEFAULT;
}

/* The folders this test's process made: removed by the teardown when the
 * test passed. A failed test's process ends at once (Check's _exit, no
 * teardown, no atexit), so each path is named on stderr when it is made:
 * meson shows a test's stderr when it fails. */
#define MAX_TMPDIRS 64
static struct {
    char *path;
    pid_t pid;   /* the process that made it: a test's, or the runner's (shared fixtures) */
} tmpdirs[MAX_TMPDIRS];
static int n_tmpdirs;

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* Removes the folders this process made; those of the process it was
 * forked from (a fixture its tests share) stay for the next test. */
static void remove_tmpdirs(void)
{
    int kept = 0;
    for (int i = 0; i < n_tmpdirs; i++) {
        if (tmpdirs[i].pid != getpid()) {
            tmpdirs[kept++] = tmpdirs[i];
            continue;
        }
        nftw(tmpdirs[i].path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
        free(tmpdirs[i].path);
    }
    n_tmpdirs = kept;
}

void al_test_remove_tmpdirs(void) { remove_tmpdirs(); }

char *al_test_tmpdir(void)
{
    char tmpl[] = "/tmp/attnlab-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    ck_assert_ptr_nonnull(d);
    fprintf(stderr, "test: folder %s (kept if this test fails)\n", d);
    if (n_tmpdirs < MAX_TMPDIRS) {
        tmpdirs[n_tmpdirs].path = strdup(d);
        tmpdirs[n_tmpdirs++].pid = getpid();
    }
    return strdup(d);
}

TCase *(al_test_tcase_create)(const char *name)
{
    TCase *tc = (tcase_create)(name);
    tcase_add_checked_fixture(tc, NULL, remove_tmpdirs);
    return tc;
}

char *al_test_write(const char *dir, const char *name, const char *text)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *path = malloc(n);
    snprintf(path, n, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    return path;
}

int al_test_run(const char *cmd, char **out)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    char full[8192];
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) { free(buf); return -1; }
    size_t r;
    while ((r = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += r;
        if (cap - len < 2) buf = realloc(buf, cap *= 2);
    }
    buf[len] = 0;
    int st = pclose(p);
    if (out) *out = buf; else free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int al_test_attnlab(const char *args, char **out)
{
    size_t n = strlen(al_test_binary()) + strlen(args) + 2;
    char *cmd = malloc(n);
    snprintf(cmd, n, "%s %s", al_test_binary(), args);
    int rc = al_test_run(cmd, out);
    free(cmd);
    return rc;
}

int al_test_attnlabf(char **out, const char *fmt, ...)
{
    char args[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    ck_assert_msg(n >= 0 && (size_t)n < sizeof args, "attnlab arguments too long: %d", n);
    return al_test_attnlab(args, out);
}

int al_test_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

void al_test_read_csv(const char *path, al_csv *t)
{
    al_err e;
    ck_assert_msg(al_csv_read(path, t, &e) == 0, "%s", e.msg);
}

/* ------------------------------------------------------------ tiny models */

int al_test_tiny_config(al_model_config *c, const al_variant *v, int n_layer,
                        int d_model, int n_head, int d_head, int seq_len, int vocab)
{
    memset(c, 0, sizeof *c);
    c->kv_share = 1;
    c->n_layer = n_layer;
    c->d_model = d_model;
    c->n_head = n_head;
    c->d_head = d_head;
    c->seq_len = seq_len;
    c->vocab_size = vocab;
    c->mlp_ratio = 2.0;
    c->norm_eps = 1e-5;
    c->rope_base = 10000;
    c->rope_fraction = 1.0;
    c->causal = 1;
    c->attn = v;
    snprintf(c->variant, sizeof c->variant, "%s", v->name);
    snprintf(c->kv_dtype, sizeof c->kv_dtype, "f32");
    static const double tries[] = {2, 1, 4, 8};
    for (int i = 0; v->settings && v->settings[i].name; i++) {
        c->attn_set[i] = v->settings[i].def;
        if (!v->settings[i].required) continue;
        for (int k = 0; k < 4; k++) {
            c->attn_set[i] = tries[k];
            al_model m;
            al_err e;
            if (al_model_init(&m, c, &e) == 0) {
                al_model_free(&m);
                break;
            }
        }
    }
    al_model m;
    al_err e;
    if (al_model_init(&m, c, &e) != 0) return -1;
    al_model_free(&m);
    return 0;
}

void *al_test_ctx(const al_variant *v, const al_attn_shape *s)
{
    char err[256] = "";
    void *ctx = al_variant_init(v, s, err, sizeof err);
    ck_assert_msg(ctx != NULL, "%s: %s", v->name, err);
    return ctx;
}

/* ------------------------------------------------------------ old tables */

const al_attn_shape *al_test_old_seen;

static int old_params(const al_attn_shape *s, al_param_spec *out)
{
    out[0] = (al_param_spec){"w", s->d_model, s->d_model, AL_INIT_NORMAL};
    return 1;
}
static size_t old_floats(const al_attn_shape *s, int B, int T) { return (size_t)B * T; }
static size_t old_kv(const al_attn_shape *s) { return (size_t)s->d_model + 1; }
static void old_forward(const al_attn_shape *s, float *out, float *act, float *scratch,
                        const float *x, float *const *p, int B, int T)
{
    al_test_old_seen = s;
}
static void old_backward(const al_attn_shape *s, float *dx, float *const *dp, float *scratch,
                         const float *dout, const float *x, const float *act, float *const *p,
                         int B, int T) {}
static size_t old_bscratch(const al_attn_shape *s, int context, int B) { return 1; }
static void old_batch(const al_attn_shape *s, float *out, float *scratch, const float *x,
                      float *const *p, al_kv_cache *const *caches, const int *pos, int B) {}

void *al_test_old_table(int version, const char *name)
{
    al_variant_ops full = {.api_version = version, .name = name, .params = old_params,
                           .act_floats = old_floats, .scratch_floats = old_floats,
                           .forward = old_forward, .backward = old_backward, .kv_elems = old_kv,
                           .decode_batch_scratch_floats = old_bscratch,
                           .decode_batch = old_batch};
    size_t size = al_variant_ops_size(version);
    ck_assert_uint_gt(size, 0);
    void *old = malloc(size);
    memcpy(old, &full, size);
    return old;
}

/* ------------------------------------------------------------ contexts */

enum { MAX_KEPT = 64 };
static struct kept {
    const al_variant *v;
    al_attn_shape s;
    void *ctx;
} kept[MAX_KEPT];
static int n_kept, next_out;

static void free_kept(void)
{
    for (int i = 0; i < n_kept; i++) kept[i].v->fini(kept[i].ctx);
    n_kept = 0;
}

const void *al_test_ctx_of(const al_variant *v, const al_attn_shape *s)
{
    for (int i = 0; i < n_kept; i++)
        if (kept[i].v == v && !memcmp(&kept[i].s, s, sizeof *s)) return kept[i].ctx;
    if (!n_kept && !next_out) atexit(free_kept);
    struct kept *k = &kept[n_kept < MAX_KEPT ? n_kept++ : next_out++ % MAX_KEPT];
    if (k->v) k->v->fini(k->ctx);   /* the oldest goes (a test holds no context long) */
    *k = (struct kept){v, *s, al_test_ctx(v, s)};
    return k->ctx;
}

/* ------------------------------------------------------------ mpirun */

/* Shared memory and loopback only; as root; more ranks than cores. Under
 * ASan, Open MPI's own allocations stay alive until exit: with leak_check
 * they are suppressed by library name (which needs slow full unwinding on
 * every malloc), otherwise leak detection is off for the ranks (attnlab's
 * own code on these paths is leak-checked by the one-process tests). */
const char *al_test_mpi_env(int leak_check)
{
    static char buf[2048];
    int n = snprintf(buf, sizeof buf,
                     "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                     "OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl=self,vader "
                     "OMPI_MCA_oob_tcp_if_include=lo ");
    if (leak_check)
        snprintf(buf + n, sizeof buf - n,
                 "OMPI_MCA_mca_base_component_disable_dlclose=1 "
                 "LSAN_OPTIONS=suppressions=%s/tests/lsan-mpi.supp:print_suppressions=0 "
                 "ASAN_OPTIONS=fast_unwind_on_malloc=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}",
                 al_test_srcdir());
    else
        snprintf(buf + n, sizeof buf - n,
                 "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0");
    return buf;
}


int al_test_stack_config(al_model_config *c, const al_variant *const *vs, int n_items,
                         int n_layer, int d_model, int n_head, int d_head, int seq_len,
                         int vocab)
{
    al_model_config one;
    AL_ASSERT(n_items >= 1 && n_items <= AL_MAX_LAYER_ATTN);
    for (int k = n_items - 1; k >= 0; k--) {   /* item 0 last: c keeps its fields */
        if (al_test_tiny_config(&one, vs[k], n_layer, d_model, n_head, d_head, seq_len, vocab))
            return -1;
        al_attn_config *a = &c->layer_attn[k];
        memset(a, 0, sizeof *a);
        memcpy(a->variant, one.variant, sizeof a->variant);
        a->attn = one.attn;
        memcpy(a->set, one.attn_set, sizeof a->set);
    }
    al_attn_config items[AL_MAX_LAYER_ATTN];
    memcpy(items, c->layer_attn, sizeof items);
    *c = one;
    memcpy(c->layer_attn, items, (size_t)n_items * sizeof items[0]);
    c->n_layer_attn = n_items;
    al_model m;
    al_err e;
    if (al_model_init(&m, c, &e) != 0) return -1;
    al_model_free(&m);
    return 0;
}

char *al_test_write_words(const char *dir, const char *const *words, int n_words, size_t size,
                          uint64_t seed)
{
    char *text = malloc(size + 1);
    size_t n = 0;
    uint64_t x = seed;
    while (n < size - 10) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        const char *w = words[(x >> 33) % (uint64_t)n_words];
        memcpy(text + n, w, strlen(w));
        n += strlen(w);
    }
    text[n] = 0;
    char *p = al_test_write(dir, "data.txt", text);
    free(text);
    return p;
}
