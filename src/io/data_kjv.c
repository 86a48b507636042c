/*
 * data_kjv.c - the "kjv" source: the King James Bible as bytes, built from
 * Debian's bible-kjv package into a checked cache file (al_kjv.h).
 */
#include "al_kjv.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "al_data.h"
#include "al_sha256.h"
#include "al_spawn.h"

#define KJV_RANGE "Gen1:1-Rev22:21"
#define KJV_HINT "install it with: apt-get install bible-kjv"

/* ------------------------------------------------------------ running bible */

/* Run `program -f -p /usr/lib Gen1:1-Rev22:21` (no shell), with stdin and
 * stderr on /dev/null; its standard output into *out. */
static int run_bible(const char *program, char **out, size_t *n, al_err *e)
{
    const char *const argv[] = {program, "-f", "-p", "/usr/lib", KJV_RANGE, NULL};
    al_spawn_opts so = {.argv = argv, .in = AL_SPAWN_NULL, .out = AL_SPAWN_CAPTURE,
                        .err = AL_SPAWN_NULL};
    al_proc p;
    al_err sub;
    if (al_spawn_run(&so, &p, &sub) == 0) {
        *out = p.out;
        *n = p.out_n;
        return 0;
    }
    free(p.out);
    if (p.missing)
        return al_errf(e, "kjv: the '%s' program is not installed; " KJV_HINT, program);
    if (!p.reaped || (WIFEXITED(p.wst) && WEXITSTATUS(p.wst) == 0))
        return al_errf(e, "kjv: %s", sub.msg);   /* not started, or its output unread */
    return al_errf(e, "kjv: '%s -f -p /usr/lib " KJV_RANGE "' failed (status %d): is the text "
                   "package missing? " KJV_HINT, program,
                   WIFEXITED(p.wst) ? WEXITSTATUS(p.wst) : -1);
}

/* ------------------------------------------------------------ the corpus */

/* Length of a line's chapter key ("1Cor13" of "1Cor13:4 Charity ..."), or 0
 * when the line is not "<book><chapter>:<verse> <text>". */
static size_t chapter_key(const char *line, size_t len, size_t *text_at)
{
    const char *sp = memchr(line, ' ', len);
    const char *colon = sp ? memchr(line, ':', (size_t)(sp - line)) : NULL;
    if (!colon || colon == line || !isdigit((unsigned char)colon[-1])) return 0;
    *text_at = (size_t)(sp - line) + 1;
    return (size_t)(colon - line);
}

/* bible -f output -> verse text one per line, a blank line between
 * chapters. Each line loses its reference (at least 3 bytes) and gains at
 * most a blank line, so the output (and its NUL) fits in n + 1 bytes. */
static int to_corpus(const char *raw, size_t n, char **out, size_t *outn, al_err *e)
{
    char *o = al_malloc(n + 1), prev[32] = "";
    size_t len = 0, prevlen = 0;
    long lineno = 0;
    for (size_t i = 0; i < n; lineno++) {
        const char *line = raw + i, *nl = memchr(line, '\n', n - i);
        size_t ll = nl ? (size_t)(nl - line) : n - i, at = 0;
        size_t k = chapter_key(line, ll, &at);
        if (k == 0 || k >= sizeof prev) {
            free(o);
            return al_errf(e, "kjv: line %ld of bible's output is not '<book><chapter>:<verse> "
                           "<text>'", lineno + 1);
        }
        if (prevlen && (k != prevlen || memcmp(prev, line, k) != 0)) o[len++] = '\n';
        memcpy(prev, line, k);
        prevlen = k;
        memcpy(o + len, line + at, ll - at);
        len += ll - at;
        o[len++] = '\n';
        i += ll + 1;
    }
    o[len] = 0;   /* like al_read_file: NUL beyond the data */
    *out = o;
    *outn = len;
    return 0;
}

static int is_expected(const char *buf, size_t n)
{
    char hex[65];
    if (n != AL_KJV_SIZE) return 0;
    al_sha256_hex(buf, n, hex);
    return strcmp(hex, AL_KJV_SHA256) == 0;
}

static int build(const char *program, char **out, size_t *n, al_err *e)
{
    char *raw = NULL;
    size_t rawn = 0;
    if (run_bible(program, &raw, &rawn, e) != 0) return -1;
    int rc = to_corpus(raw, rawn, out, n, e);
    free(raw);
    if (rc != 0) return -1;
    if (is_expected(*out, *n)) return 0;
    char hex[65];
    al_sha256_hex(*out, *n, hex);
    free(*out);
    return al_errf(e, "kjv: '%s' gave %zu bytes with SHA-256 %.16s..., expected %d bytes "
                   "with %.16s... (the text of Debian's bible-kjv 4.38)", program, *n, hex,
                   AL_KJV_SIZE, AL_KJV_SHA256);
}

int al_kjv_corpus(const char *dir, const char *program, char **out, size_t *n, al_err *e)
{
    char path[4200];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, AL_KJV_FILE) >= sizeof path)
        return al_errf(e, "kjv: cache directory path too long: %s", dir);
    if (al_read_file(path, out, n, NULL) == 0) {
        if (is_expected(*out, *n)) return 0;
        free(*out);   /* damaged or from another build: make it again */
    }
    if (build(program, out, n, e) != 0) return -1;
    if (al_mkdirs(dir, e) != 0 || al_write_atomic(path, *out, *n, e) != 0) {
        free(*out);
        return -1;
    }
    return 0;
}

int al_kjv_cache_dir(char *buf, size_t n, al_err *e)
{
    const char *v = getenv("ATTNLAB_CACHE"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    size_t need;
    if (v && v[0]) need = (size_t)snprintf(buf, n, "%s", v);
    else if (x && x[0]) need = (size_t)snprintf(buf, n, "%s/attnlab", x);
    else if (h && h[0]) need = (size_t)snprintf(buf, n, "%s/.cache/attnlab", h);
    else return al_errf(e, "kjv: no cache directory: set ATTNLAB_CACHE (or HOME)");
    if (need >= n) return al_errf(e, "kjv: cache directory path too long");
    return 0;
}

/* ------------------------------------------------------------ the source */

static int kjv_open(al_data *d, const al_data_config *c, int seq_len, al_err *e)
{
    char dir[AL_PATH_LEN], *buf;
    size_t n;
    if (al_kjv_cache_dir(dir, sizeof dir, e) != 0) return -1;
    if (al_kjv_corpus(dir, "bible", &buf, &n, e) != 0) return -1;
    d->bytes = (unsigned char *)buf;
    d->n = n;
    return al_data_text_split(d, "kjv", c->val_fraction, c->test_fraction, seq_len, e);
}

static int kjv_vocab(const al_data_config *c) { return 256; }

const al_data_source al_data_kjv = {
    .name = "kjv",
    .vocab = kjv_vocab,
    .open = kjv_open,
    .batch = al_data_text_batch,
    .close = al_data_text_close,
    .example = al_data_text_example,
};
