/*
 * checkpoint_diff.c - a refused resume names every key that differs between
 * the saved run's config and the current one, with both values (a key one
 * side lacks as its row's default: train.precision is written only when not
 * f32), not just the first.
 */
#include "checkpoint_diff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_keys.h"

/* The resolved-config YAML (two-space indents, "key: value", "key:" opening a
 * mapping, "- item" in a list) as "path=value" lines, without the keys a
 * resume may change. Returns the line count; lines are malloc'ed. */
static int flatten_yaml(const char *yaml, char ***out)
{
    static const char *const may_change[] = {"train.checkpoint_every", "train.max_memory", NULL};
    char stack[8][128], line[4400];
    int n = 0, cap = 64, item[9] = {0};   /* "- " items seen at each level */
    char **lines = al_malloc(cap * sizeof *lines);
    for (const char *p = yaml; *p;) {
        size_t len = strcspn(p, "\n");
        snprintf(line, sizeof line, "%.*s", (int)len, p);
        p += len + (p[len] == '\n');
        len = strlen(line);
        int ind = (int)strspn(line, " "), lev = ind / 2 < 8 ? ind / 2 : 7;
        char *key = line + ind, *colon = key[0] == '-' ? NULL : strstr(key, ": "), path[1200] = "";
        int opens = !colon && len > 0 && line[len - 1] == ':';
        if (opens) line[len - 1] = 0;
        if (colon) *colon = 0;
        for (int i = 0; i < lev; i++)
            snprintf(path + strlen(path), sizeof path - strlen(path), "%s.", stack[i]);
        if (key[0] == '-' && path[0])   /* item i of a list: "plugins[1]" */
            snprintf(path + strlen(path) - 1, sizeof path - strlen(path) + 1, "[%d]",
                     item[lev]++);
        else
            snprintf(path + strlen(path), sizeof path - strlen(path), "%s", key);
        if (opens) snprintf(stack[lev], sizeof stack[lev], "%s", key), item[lev + 1] = 0;
        if (opens || !key[0]) continue;
        int skip = 0;
        for (int i = 0; may_change[i]; i++) skip |= strcmp(path, may_change[i]) == 0;
        if (skip) continue;
        if (n == cap) lines = realloc(lines, (cap *= 2) * sizeof *lines);
        AL_ASSERT(lines != NULL);
        size_t need = strlen(path) + 4400;
        lines[n] = al_malloc(need);
        snprintf(lines[n++], need, "%s=%s", path,
                 colon ? colon + 2 : key[0] == '-' && key[1] ? key + 2 : "");
    }
    *out = lines;
    return n;
}

static void free_lines(char **l, int n)
{
    for (int i = 0; i < n; i++) free(l[i]);
    free(l);
}

/* The value of key path in lines l[0..n) ("path=value"), or NULL. */
static const char *value_of(char *const *l, int n, const char *path, size_t len)
{
    for (int i = 0; i < n; i++)
        if (strncmp(l[i], path, len) == 0 && l[i][len] == '=') return l[i] + len + 1;
    return NULL;
}

/* A key absent from one side: its row's default when it has one (a quiet
 * key is written only when it differs, train.precision), else "(absent)". */
static void absent_text(char *out, size_t n, const char *path, size_t len)
{
    char top[64];
    const char *dot = memchr(path, '.', len);
    snprintf(out, n, "(absent)");
    if (!dot || (size_t)(dot - path) >= sizeof top) return;
    snprintf(top, sizeof top, "%.*s", (int)(dot - path), path);
    const key_spec *t = al_cfg_key(al_cfg_top_keys, top), *k;
    char key[128];
    snprintf(key, sizeof key, "%.*s", (int)(len - (size_t)(dot + 1 - path)), dot + 1);
    if (t && t->type == K_MAP && (k = al_cfg_key(t->sub, key)) && k->def && k->type != K_MAP)
        snprintf(out, n, "%s (the default)", k->def[0] ? k->def : "\"\"");
}

/* "'key' saved X, now Y" for the key of line x (from side a) when side b
 * differs, appended to msg; 1 when it differs. */
static int diff_key(const char *x, char *const *b, int nb, int a_is_saved, char *msg, size_t n)
{
    size_t k = strcspn(x, "=");
    const char *other = value_of(b, nb, x, k), *mine = x + k + 1;
    if (other && strcmp(other, mine) == 0) return 0;
    char gone[160];
    absent_text(gone, sizeof gone, x, k);
    const char *sv = a_is_saved ? mine : other ? other : gone;
    const char *nw = a_is_saved ? (other ? other : gone) : mine;
    size_t l = strlen(msg);
    if (l < 700)
        snprintf(msg + l, n - l, "%s'%.*s' saved %.120s, now %.120s", l ? "; " : "", (int)k, x,
                 sv, nw);
    else if (msg[l - 1] != '.')
        snprintf(msg + l, n - l, "; ...");
    return 1;
}

/* The saved config against the current one: every key that differs, with
 * both values (a key absent from one side as its default). */
int al_checkpoint_config_diff(const char *path, const char *saved, const char *now, al_err *e)
{
    char **a, **b, msg[800] = "";
    int na = flatten_yaml(saved, &a), nb = flatten_yaml(now, &b), n = 0;
    for (int i = 0; i < na; i++)   /* the saved text may be corrupt: keep errors one line */
        for (unsigned char *q = (unsigned char *)a[i]; *q; q++)
            if (*q < 0x20 || *q > 0x7e) *q = '?';
    for (int i = 0; i < na; i++) n += diff_key(a[i], b, nb, 1, msg, sizeof msg);
    for (int i = 0; i < nb; i++)
        if (!value_of(a, na, b[i], strcspn(b[i], "="))) n += diff_key(b[i], a, na, 0, msg, sizeof msg);
    free_lines(a, na);
    free_lines(b, nb);
    if (!n) return 0;
    return al_errf(e, "%s: cannot resume: %d key%s differ%s from the saved run: %s", path, n,
                   n == 1 ? "" : "s", n == 1 ? "s" : "", msg);
}

