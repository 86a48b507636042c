/*
 * sweep_spec.c - the `sweep` mapping: parse, check, expand into trials,
 * name them. See al_sweep_spec.h for the format and the identity rules.
 */
#include "al_sweep_spec.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "al_config_io.h"
#include "al_data.h"
#include "al_kvcache.h"
#include "al_model.h"
#include "al_plugin.h"
#include "al_registry.h"
#include "al_sha256.h"
#include "al_train.h"
#include "sweep_internal.h"

/* Everything the parse needs while the tree is alive. */
/* ------------------------------------------------------------ errors */

/* At key i of mapping m (a key names the same file as its value). */
static int at_key(al_err *e, const al_node *m, int i, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int at_key(al_err *e, const al_node *m, int i, const char *fmt, ...)
{
    char msg[AL_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return al_errf(e, "%s:%d:%d: error: %s", m->items[i]->file, m->key_line[i],
                   m->key_col[i], msg);
}

static const char *kind_name(int kind)
{
    return kind == AL_NODE_MAP ? "a mapping" : kind == AL_NODE_SEQ ? "a sequence" : "a scalar";
}

/* ------------------------------------------------------------ the schema */

/* Every configuration key path, from the printed schema (one row per key:
 * "| `model.n_head` | ..."), so the sweep checks paths against the same
 * tables the decoder uses. */
typedef struct schema {
    int n;
    char **paths;
} schema;

static void schema_load(schema *sc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    AL_ASSERT(f != NULL);
    al_config_print_schema(f);
    fclose(f);
    sc->n = 0;
    sc->paths = NULL;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        char *a = strchr(line, '`'), *b = a ? strchr(a + 1, '`') : NULL;
        if (!b) continue;
        sc->paths = realloc(sc->paths, (size_t)(sc->n + 1) * sizeof *sc->paths);
        AL_ASSERT(sc->paths != NULL);
        sc->paths[sc->n++] = strndup(a + 1, (size_t)(b - a - 1));
    }
    free(buf);
}

static void schema_free(schema *sc)
{
    for (int i = 0; i < sc->n; i++) free(sc->paths[i]);
    free(sc->paths);
}

/* A key, or a mapping above keys ("model", "model.attention"). */
static int schema_has(const schema *sc, const char *path)
{
    size_t n = strlen(path);
    for (int i = 0; i < sc->n; i++)
        if (strncmp(sc->paths[i], path, n) == 0 &&
            (sc->paths[i][n] == 0 || sc->paths[i][n] == '.'))
            return 1;
    return 0;
}

/* The closest key path (at most 3 edits), or one ending in the same key. */
static const char *schema_suggest(const schema *sc, const char *path)
{
    const char *best = NULL, *last = strrchr(path, '.');
    int best_d = 4;
    last = last ? last + 1 : path;
    for (int i = 0; i < sc->n; i++) {
        const char *p = sc->paths[i], *pl = strrchr(p, '.');
        int d = al_edit_distance(path, p);
        if (d >= best_d && strcmp(pl ? pl + 1 : p, last) == 0) d = 3;
        if (d < best_d) best = p, best_d = d;
    }
    return best;
}

/* ------------------------------------------------------------ parsing */

static int check_path(spec_ctx *C, const schema *sc, const al_node *m, int i)
{
    const char *p = m->keys[i];
    size_t n = strlen(p);
    if (n == 0 || p[0] == '.' || p[n - 1] == '.' || strstr(p, ".."))
        return at_key(C->e, m, i, "sweep axis '%s' is not a key path (names joined by '.')", p);
    if (strcmp(p, "sweep") == 0 || strncmp(p, "sweep.", 6) == 0 || strcmp(p, "stages") == 0 ||
        strncmp(p, "stages.", 7) == 0)
        return at_key(C->e, m, i, "sweep axis '%s': the sweep cannot sweep itself", p);
    if (schema_has(sc, p)) return 0;
    const char *dym = schema_suggest(sc, p);
    if (dym)
        return at_key(C->e, m, i, "sweep axis '%s' names no setting (did you mean '%s'?)", p,
                      dym);
    return at_key(C->e, m, i, "sweep axis '%s' names no setting (see 'attnlab keys')", p);
}

/* Two axes where one path is the other or lies under it. */
static int overlap(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b), n = na < nb ? na : nb;
    return strncmp(a, b, n) == 0 && (a[n] == 0 || a[n] == '.') && (b[n] == 0 || b[n] == '.');
}

static int add_axis(spec_ctx *C, const schema *sc, const al_node *m, int i, int group)
{
    al_sweep *s = C->s;
    const al_node *v = m->items[i];
    if (s->n_axes == AL_SWEEP_MAX_AXES)
        return at_key(C->e, m, i, "too many sweep axes (at most %d)", AL_SWEEP_MAX_AXES);
    if (check_path(C, sc, m, i)) return -1;
    if (strlen(m->keys[i]) >= sizeof s->axes[0].path)
        return at_key(C->e, m, i, "sweep axis path is too long");
    if (v->kind != AL_NODE_SEQ)
        return al_node_errf(C->e, v, "sweep axis '%s' must be a list of values, got %s", m->keys[i],
                  kind_name(v->kind));
    if (v->n == 0) return al_node_errf(C->e, v, "sweep axis '%s' is empty", m->keys[i]);
    for (int a = 0; a < s->n_axes; a++)
        if (overlap(s->axes[a].path, m->keys[i]))
            return at_key(C->e, m, i, "sweep axis '%s' overlaps axis '%s' (line %d); "
                          "set one or the other", m->keys[i], s->axes[a].path,
                          s->axes[a].key_line);
    if (C->seeds && overlap("train.seed", m->keys[i]))
        return at_key(C->e, m, i, "sweep axis '%s' overlaps 'sweep.seeds'", m->keys[i]);
    al_sweep_axis *ax = &s->axes[s->n_axes++];
    snprintf(ax->path, sizeof ax->path, "%s", m->keys[i]);
    ax->key = v;
    ax->key_line = m->key_line[i];
    ax->key_col = m->key_col[i];
    ax->n = v->n;
    ax->group = group;
    ax->scaling = AL_SCALING_NONE;
    return 0;
}

/* An axis a stage adds (convert.to, convert.method, steps): values is a
 * non-empty sequence the stage built or took from its mapping. */
static int add_extra_axis(spec_ctx *C, const al_sweep_axis_in *x)
{
    al_sweep *s = C->s;
    AL_ASSERT(x->values->kind == AL_NODE_SEQ && x->values->n > 0);
    AL_ASSERT(s->n_axes < AL_SWEEP_MAX_AXES && strlen(x->path) < sizeof s->axes[0].path);
    al_sweep_axis *ax = &s->axes[s->n_axes++];
    snprintf(ax->path, sizeof ax->path, "%s", x->path);
    ax->key = x->values;
    ax->key_line = x->values->line;
    ax->key_col = x->values->col;
    ax->n = x->values->n;
    ax->group = -1;
    ax->scaling = AL_SCALING_NONE;
    return 0;
}

static int parse_grid(spec_ctx *C, const schema *sc, const al_node *g)
{
    if (g->kind != AL_NODE_MAP)
        return al_node_errf(C->e, g, "'sweep.grid' must be a mapping of key paths to lists, got %s",
                  kind_name(g->kind));
    for (int i = 0; i < g->n; i++)
        if (add_axis(C, sc, g, i, -1)) return -1;
    return 0;
}

static int parse_zip_group(spec_ctx *C, const schema *sc, const al_node *z)
{
    if (z->kind != AL_NODE_MAP)
        return al_node_errf(C->e, z, "'sweep.zip' must be a mapping of key paths to lists (or a list "
                  "of such mappings), got %s", kind_name(z->kind));
    if (z->n == 0) return al_node_errf(C->e, z, "'sweep.zip' group is empty");
    int g = C->n_groups++;
    for (int i = 0; i < z->n; i++) {
        if (add_axis(C, sc, z, i, g)) return -1;
        const al_sweep_axis *ax = &C->s->axes[C->s->n_axes - 1];
        if (i == 0) C->group_len[g] = ax->n;
        else if (ax->n != C->group_len[g])
            return at_key(C->e, z, i, "zip axis '%s' has %d values but '%s' has %d; zipped "
                          "axes move in lockstep and need equal lengths", z->keys[i], ax->n,
                          z->keys[0], C->group_len[g]);
    }
    return 0;
}

static int parse_zip(spec_ctx *C, const schema *sc, const al_node *z)
{
    if (z->kind != AL_NODE_SEQ) return parse_zip_group(C, sc, z);
    if (z->n == 0) return al_node_errf(C->e, z, "'sweep.zip' is empty");
    for (int i = 0; i < z->n; i++)
        if (parse_zip_group(C, sc, z->items[i])) return -1;
    return 0;
}

static int parse_u64_node(const al_node *x, uint64_t *v)
{
    char *end;
    if (x->kind != AL_NODE_SCALAR || x->quoted || x->value[0] < '0' || x->value[0] > '9')
        return -1;
    errno = 0;
    unsigned long long u = strtoull(x->value, &end, 10);
    if (*end || errno) return -1;
    *v = (uint64_t)u;
    return 0;
}

/* One count of seeds.rounds: an integer in [lo, 1000]. */
static int seq_count(spec_ctx *C, const al_node *m, const char *key, int lo, int *out)
{
    const al_node *x = al_node_get(m, key);
    uint64_t v;
    if (!x) return al_node_errf(C->e, m, "'sweep.seeds' in rounds needs '%s' (min: N, max: M, "
                                "until: resolved)", key);
    if (parse_u64_node(x, &v) || v < (uint64_t)lo || v > 1000)
        return al_node_errf(C->e, x, "'sweep.seeds.%s' must be an integer in [%d, 1000], got "
                            "'%.80s'", key, lo, x->kind == AL_NODE_SCALAR ? x->value : "...");
    *out = (int)v;
    return 0;
}

/* seeds: {min: N, max: M, until: resolved[, step: K]}: seeds 1..M,
 * trained in rounds (al_stats.h, "the sequential seeds rule"). */
static int parse_seed_rounds(spec_ctx *C, const al_node *x)
{
    static const char *const keys[] = {"min", "max", "until", "step", NULL};
    al_sweep *s = C->s;
    s->seq = (al_seq_plan){.step = 1, .alpha = 0.05};
    for (int i = 0; i < x->n; i++) {
        int k = 0;
        while (keys[k] && strcmp(keys[k], x->keys[i]) != 0) k++;
        if (!keys[k])
            return at_key(C->e, x, i, "unknown key '%.80s' in 'sweep.seeds' (known: min, max, "
                          "until, step)", x->keys[i]);
    }
    const al_node *u = al_node_get(x, "until");
    if (!u || u->kind != AL_NODE_SCALAR || strcmp(u->value, "resolved") != 0)
        return al_node_errf(C->e, u ? u : x, "'sweep.seeds' as a mapping needs 'until: "
                            "resolved' (or give a count or a list)");
    if (seq_count(C, x, "min", 2, &s->seq.min) || seq_count(C, x, "max", 2, &s->seq.max) ||
        (al_node_get(x, "step") && seq_count(C, x, "step", 1, &s->seq.step)))
        return -1;
    if (s->seq.max < s->seq.min)
        return al_node_errf(C->e, al_node_get(x, "max"), "'sweep.seeds.max' (%d) is below "
                            "'min' (%d)", s->seq.max, s->seq.min);
    if ((s->seq.max - s->seq.min + s->seq.step - 1) / s->seq.step + 1 > AL_SEQ_MAX_LOOKS)
        return al_node_errf(C->e, x, "'sweep.seeds': more than %d rounds; raise 'step'",
                            AL_SEQ_MAX_LOOKS);
    s->seq_on = 1;
    s->n_seeds = s->seq.max;
    s->seeds = al_malloc((size_t)s->n_seeds * sizeof *s->seeds);
    for (int i = 0; i < s->n_seeds; i++) s->seeds[i] = (uint64_t)i + 1;
    return 0;
}

/* seeds: [1, 2, 3], a count N (seeds 1..N), or rounds (above). */
static int parse_seeds(spec_ctx *C, const al_node *x)
{
    al_sweep *s = C->s;
    uint64_t v;
    C->seeds = x;
    if (x->kind == AL_NODE_MAP) return parse_seed_rounds(C, x);
    if (x->kind == AL_NODE_SCALAR) {
        if (parse_u64_node(x, &v) || v < 1 || v > 1000)
            return al_node_errf(C->e, x, "'sweep.seeds' must be a list of seeds or a count in [1, 1000], "
                      "got '%.80s'", x->value);
        s->n_seeds = (int)v;
        s->seeds = al_malloc(v * sizeof *s->seeds);
        for (int i = 0; i < s->n_seeds; i++) s->seeds[i] = (uint64_t)i + 1;
        return 0;
    }
    if (x->kind != AL_NODE_SEQ)
        return al_node_errf(C->e, x, "'sweep.seeds' must be a list of seeds or a count, got a mapping");
    if (x->n == 0) return al_node_errf(C->e, x, "'sweep.seeds' is empty");
    s->seeds = al_malloc((size_t)x->n * sizeof *s->seeds);
    for (int i = 0; i < x->n; i++) {
        const al_node *it = x->items[i];
        if (parse_u64_node(it, &v))
            return al_node_errf(C->e, it, "a seed must be a non-negative integer, got %s%.80s%s",
                      it->kind == AL_NODE_SCALAR ? "'" : "",
                      it->kind == AL_NODE_SCALAR ? it->value : kind_name(it->kind),
                      it->kind == AL_NODE_SCALAR ? "'" : "");
        for (int j = 0; j < i; j++)
            if (s->seeds[j] == v) return al_node_errf(C->e, it, "seed %llu is listed twice",
                                            (unsigned long long)v);
        s->seeds[s->n_seeds++] = v;
    }
    return 0;
}

/* A directory-safe name. */
static int good_name(const char *s)
{
    if (!s[0] || s[0] == '.' || strlen(s) >= AL_NAME_LEN) return 0;
    return s[strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-")] == 0;
}

static int parse_name(spec_ctx *C, const al_node *x)
{
    if (x->kind != AL_NODE_SCALAR || !good_name(x->value))
        return al_node_errf(C->e, x, "the experiment name must be letters, digits, '.', '_', '+' or "
                  "'-' (it names the results directory), at most %d characters, got %s%.80s%s",
                  AL_NAME_LEN - 1, x->kind == AL_NODE_SCALAR ? "'" : "",
                  x->kind == AL_NODE_SCALAR ? x->value : kind_name(x->kind),
                  x->kind == AL_NODE_SCALAR ? "'" : "");
    snprintf(C->s->name, sizeof C->s->name, "%s", x->value);
    return 0;
}

static int check_exclude_path(spec_ctx *C, const al_node *m, int i)
{
    const char *p = m->keys[i];
    if (strcmp(p, "seed") == 0 || strcmp(p, "train.seed") == 0) {
        if (C->seeds) return 0;
        return at_key(C->e, m, i, "exclude key '%s': the sweep has no seeds axis", p);
    }
    for (int a = 0; a < C->s->n_axes; a++) {
        size_t n = strlen(C->s->axes[a].path);
        if (strncmp(p, C->s->axes[a].path, n) == 0 && (p[n] == 0 || p[n] == '.')) return 0;
    }
    return at_key(C->e, m, i, "exclude key '%s' is not a sweep axis (nor under one)", p);
}

static int parse_exclude(spec_ctx *C, const al_node *x)
{
    if (x->kind != AL_NODE_SEQ)
        return al_node_errf(C->e, x, "'sweep.exclude' must be a list of mappings {key.path: value, "
                  "...}, got %s", kind_name(x->kind));
    for (int i = 0; i < x->n; i++) {
        const al_node *m = x->items[i];
        if (m->kind != AL_NODE_MAP || m->n == 0)
            return al_node_errf(C->e, m, "an exclude entry must be a non-empty mapping {key.path: "
                      "value, ...}, got %s", m->kind == AL_NODE_MAP ? "an empty one"
                      : kind_name(m->kind));
        for (int k = 0; k < m->n; k++)
            if (check_exclude_path(C, m, k)) return -1;
    }
    C->exclude = x;
    return 0;
}

/* ---- select: {best_of: [axis, ...], by: val_loss | best_val_loss | val_accuracy} */

static const char *const select_by_names[] = {"val_loss", "best_val_loss", "val_accuracy",
                                              NULL};

static int select_axis(spec_ctx *C, const al_node *x)
{
    al_sweep *s = C->s;
    if (x->kind != AL_NODE_SCALAR)
        return al_node_errf(C->e, x, "'sweep.select.best_of' lists sweep axes (key paths), "
                            "got %s", kind_name(x->kind));
    int a = 0;
    while (a < s->n_axes && strcmp(s->axes[a].path, x->value) != 0) a++;
    if (a == s->n_axes)
        return al_node_errf(C->e, x, "'sweep.select.best_of': '%.80s' is not a sweep axis "
                            "(select chooses among an axis's values)", x->value);
    for (int i = 0; i < s->n_select; i++)
        if (s->select_axis[i] == a)
            return al_node_errf(C->e, x, "'sweep.select.best_of' lists '%s' twice", x->value);
    C->select_node[s->n_select] = x;
    s->select_axis[s->n_select++] = a;
    return 0;
}

static int parse_select(spec_ctx *C, const al_node *x)
{
    al_sweep *s = C->s;
    if (x->kind != AL_NODE_MAP)
        return al_node_errf(C->e, x, "'sweep.select' must be a mapping such as {best_of: "
                            "[train.lr], by: val_loss}, got %s", kind_name(x->kind));
    snprintf(s->select_by, sizeof s->select_by, "val_loss");
    const al_node *best = NULL;
    for (int i = 0; i < x->n; i++) {
        const al_node *v = x->items[i];
        if (strcmp(x->keys[i], "best_of") == 0) {
            best = v;
        } else if (strcmp(x->keys[i], "by") == 0) {
            int k = 0;
            while (v->kind == AL_NODE_SCALAR && select_by_names[k] &&
                   strcmp(select_by_names[k], v->value) != 0) k++;
            if (v->kind != AL_NODE_SCALAR || !select_by_names[k])
                return al_node_errf(C->e, v, "'sweep.select.by' must be val_loss, "
                                    "best_val_loss or val_accuracy (never a test metric)");
            snprintf(s->select_by, sizeof s->select_by, "%s", v->value);
        } else {
            return at_key(C->e, x, i, "unknown key '%.80s' in 'sweep.select' (known: "
                          "best_of, by)", x->keys[i]);
        }
    }
    if (!best) return al_node_errf(C->e, x, "'sweep.select.best_of' is required: the axes "
                                   "to tune, e.g. [train.lr]");
    if (best->kind == AL_NODE_SCALAR) return select_axis(C, best);
    if (best->kind != AL_NODE_SEQ || best->n == 0)
        return al_node_errf(C->e, best, "'sweep.select.best_of' must be a non-empty list of "
                            "sweep axes");
    for (int i = 0; i < best->n; i++)
        if (select_axis(C, best->items[i])) return -1;
    return 0;
}

static int is_select_axis(const al_sweep *s, int a)
{
    for (int i = 0; i < s->n_select; i++)
        if (s->select_axis[i] == a) return 1;
    return 0;
}

/* ---- baseline: {key.path: value, ...} naming one configuration */

static int parse_baseline(spec_ctx *C, const al_node *x)
{
    const al_sweep *s = C->s;
    if (x->kind != AL_NODE_MAP || x->n == 0)
        return al_node_errf(C->e, x, "'sweep.baseline' must be a mapping of sweep axes to "
                            "values naming one configuration, e.g. {model.attention: "
                            "{variant: mha}}");
    for (int k = 0; k < x->n; k++) {
        const char *p = x->keys[k];
        int a = 0;
        for (; a < s->n_axes; a++) {
            size_t n = strlen(s->axes[a].path);
            if (strncmp(p, s->axes[a].path, n) == 0 && (p[n] == 0 || p[n] == '.')) break;
        }
        if (a == s->n_axes)
            return at_key(C->e, x, k, "baseline key '%s' is not a sweep axis (nor under "
                          "one)%s", p, strstr(p, "seed") ? "; every seed is compared" : "");
        if (is_select_axis(s, a))
            return at_key(C->e, x, k, "baseline key '%s' is a select axis: the tuned value "
                          "is chosen per seed", p);
    }
    C->baseline = x;
    return 0;
}

static const char *const sweep_keys[] = {"name", "description", "seeds", "grid", "zip",
                                         "exclude", "select", "baseline", "claims",
                                         "scaling", NULL};

static int check_sweep_keys(spec_ctx *C, const al_node *sw)
{
    for (int i = 0; i < sw->n; i++) {
        int k = 0, best = 99, bi = -1;
        while (sweep_keys[k] && strcmp(sweep_keys[k], sw->keys[i]) != 0) {
            int d = al_edit_distance(sweep_keys[k], sw->keys[i]);
            if (d < best) best = d, bi = k;
            k++;
        }
        if (sweep_keys[k]) continue;
        if (best <= 2)
            return at_key(C->e, sw, i, "unknown key '%.80s' in 'sweep' (did you mean '%s'?)",
                          sw->keys[i], sweep_keys[bi]);
        return at_key(C->e, sw, i, "unknown key '%.80s' in 'sweep' (known: name, description, "
                      "seeds, grid, zip, exclude, select, baseline, claims, scaling)", sw->keys[i]);
    }
    return 0;
}

/* Default name: the top-level `name`, else the file's base name. */
static int default_name(spec_ctx *C)
{
    const al_node *n = al_node_get(C->s->root, "name");
    if (n) return parse_name(C, n);
    const char *b = strrchr(C->s->file, '/');
    b = b ? b + 1 : C->s->file;
    size_t len = strcspn(b, ".");
    snprintf(C->s->name, sizeof C->s->name, "%.*s", (int)len, b);
    if (!good_name(C->s->name)) snprintf(C->s->name, sizeof C->s->name, "sweep");
    return 0;
}

static int parse_sweep(spec_ctx *C)
{
    schema sc;
    const al_node *sw = C->sweep, *x;
    if (default_name(C)) return -1;
    const al_node *d = al_node_get(C->s->root, "description");
    for (int i = 0; i < C->n_extra; i++) add_extra_axis(C, &C->extra[i]);
    if (!sw) return 0;
    if (sw->kind != AL_NODE_MAP)
        return al_node_errf(C->e, sw, "'sweep' must be a mapping (grid, zip, seeds, exclude, name), "
                  "got %s", kind_name(sw->kind));
    if (check_sweep_keys(C, sw)) return -1;
    if ((x = al_node_get(sw, "description"))) d = x;
    if (d && d->kind == AL_NODE_SCALAR)
        snprintf(C->s->description, sizeof C->s->description, "%s", d->value);
    if ((x = al_node_get(sw, "name")) && parse_name(C, x)) return -1;
    if ((x = al_node_get(sw, "seeds")) && parse_seeds(C, x)) return -1;
    schema_load(&sc);
    int rc = 0;
    if ((x = al_node_get(sw, "grid"))) rc = parse_grid(C, &sc, x);
    if (!rc && (x = al_node_get(sw, "zip"))) rc = parse_zip(C, &sc, x);
    schema_free(&sc);
    if (!rc && (x = al_node_get(sw, "scaling"))) rc = al_sweep_scaling_parse(C, x);
    if (!rc && (x = al_node_get(sw, "exclude"))) rc = parse_exclude(C, x);
    if (!rc && (x = al_node_get(sw, "select"))) rc = parse_select(C, x);
    if (!rc && (x = al_node_get(sw, "baseline"))) rc = parse_baseline(C, x);
    return rc;
}

/* ------------------------------------------------------------ expansion */

static int count_trials(const spec_ctx *C, int *total)
{
    double n = C->s->n_seeds ? C->s->n_seeds : 1;
    for (int a = 0; a < C->s->n_axes; a++)
        if (C->s->axes[a].group < 0) n *= C->s->axes[a].n;
    for (int g = 0; g < C->n_groups; g++) n *= C->group_len[g];
    if (n > AL_SWEEP_MAX_TRIALS)
        return al_node_errf(C->e, al_sweep_node(C), "the sweep expands to %.0f trials, at most %d", n,
                  AL_SWEEP_MAX_TRIALS);
    *total = (int)n;
    return 0;
}

/* Value index of every axis for combination k (seeds outermost, then grid
 * axes in order, then zip groups); *seed_i gets the seed's index. */
static void combination(const spec_ctx *C, int k, int *choice, int *seed_i)
{
    const al_sweep *s = C->s;
    int group_choice[AL_SWEEP_MAX_AXES];
    for (int g = C->n_groups - 1; g >= 0; g--) {
        group_choice[g] = k % C->group_len[g];
        k /= C->group_len[g];
    }
    for (int a = s->n_axes - 1; a >= 0; a--) {
        if (s->axes[a].group >= 0) {
            choice[a] = group_choice[s->axes[a].group];
            continue;
        }
        choice[a] = k % s->axes[a].n;
        k /= s->axes[a].n;
    }
    *seed_i = k;
}

/* The node at a dotted path, or NULL. */
/* A dotted path's node; a number indexes a list from 0, so an exclude item
 * can name one layer of a list axis (model.layer_attention.0.variant). */
static const al_node *node_at(const al_node *root, const char *path)
{
    char key[256], *end;
    const al_node *cur = root;
    for (const char *k = path; cur && *k;) {
        size_t len = strcspn(k, ".");
        snprintf(key, sizeof key, "%.*s", (int)len, k);
        long i = strtol(key, &end, 10);
        if (cur->kind == AL_NODE_SEQ && key[0] >= '0' && key[0] <= '9' && !*end)
            cur = i < cur->n ? cur->items[i] : NULL;
        else cur = al_node_get(cur, key);
        k += len + (k[len] == '.');
    }
    return cur;
}

static int parse_num(const char *s, double *v)
{
    char *end;
    if (!s[0]) return -1;
    *v = strtod(s, &end);
    return *end ? -1 : 0;
}

static int bool_of(const char *s)
{
    static const char *const w[] = {"false", "no", "off", "true", "yes", "on", NULL};
    for (int i = 0; w[i]; i++)
        if (strcasecmp(s, w[i]) == 0) return i >= 3;
    return -1;
}

/* Does tree node x match exclude value want? Numbers compare by value,
 * booleans by truth, mappings entry by entry (want's keys only). */
static int node_matches(const al_node *x, const al_node *want)
{
    if (!x || x->kind != want->kind) return 0;
    if (want->kind == AL_NODE_MAP) {
        for (int i = 0; i < want->n; i++)
            if (!node_matches(al_node_get(x, want->keys[i]), want->items[i])) return 0;
        return 1;
    }
    if (want->kind == AL_NODE_SEQ) {
        if (x->n != want->n) return 0;
        for (int i = 0; i < x->n; i++)
            if (!node_matches(x->items[i], want->items[i])) return 0;
        return 1;
    }
    double a, b;
    if (strcmp(x->value, want->value) == 0) return 1;
    if (!x->quoted && !want->quoted && parse_num(x->value, &a) == 0 &&
        parse_num(want->value, &b) == 0)
        return a == b;
    int ba = bool_of(x->value), bb = bool_of(want->value);
    return !x->quoted && !want->quoted && ba >= 0 && ba == bb;
}

/* Does the trial's tree match every entry of mapping m (no seeds)? */
static int node_matches_all(const al_node *tree, const al_node *m)
{
    for (int k = 0; k < m->n; k++)
        if (!node_matches(node_at(tree, m->keys[k]), m->items[k])) return 0;
    return 1;
}

static int excluded(spec_ctx *C, const al_node *tree, uint64_t seed)
{
    if (!C->exclude) return 0;
    for (int i = 0; i < C->exclude->n; i++) {
        const al_node *m = C->exclude->items[i];
        int all = 1;
        for (int k = 0; k < m->n && all; k++) {
            const char *p = m->keys[k];
            uint64_t v;
            if (strcmp(p, "seed") == 0 || strcmp(p, "train.seed") == 0)
                all = parse_u64_node(m->items[k], &v) == 0 && v == seed;
            else
                all = node_matches(node_at(tree, p), m->items[k]);
        }
        if (all) return C->exclude_hits[i]++, 1;
    }
    return 0;
}

/* An error at the node of a dotted path, else at the file. */
static int at_path(al_err *e, const al_node *tree, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int at_path(al_err *e, const al_node *tree, const char *path, const char *fmt, ...)
{
    char msg[AL_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const al_node *x = node_at(tree, path);
    if (x) return al_node_errf(e, x, "%s", msg);
    return al_errf(e, "%s: error: %s", tree->file, msg);
}

/* What training would find missing, found before anything is trained. */
static int check_data(const al_node *tree, const al_config *c, al_err *e)
{
    const char *init = c->train.init_from;
    if (init[0] && access(init, R_OK) != 0)
        return at_path(e, tree, "train.init_from", "'train.init_from' ('%s'): cannot read: %s",
                       init, strerror(errno));
    al_err why;
    if (al_data_check(&c->data, c->model.seq_len, &why) == 0) return 0;
    const char *at = al_data_vocab(&c->data) < 0 ? "data.source"
                     : !c->data.path[0] ? "data" : "data.path";
    return at_path(e, tree, at, "%s", why.msg);
}

/* The seed node for seed index i: the listed node, or the count's node
 * carrying the number (so an error still points into the file). */
static al_node *seed_node(const spec_ctx *C, int i)
{
    if (C->seeds->kind == AL_NODE_SEQ) return al_node_clone(C->seeds->items[i]);
    al_node *x = al_node_clone(C->seeds->kind == AL_NODE_MAP ? al_node_get(C->seeds, "max")
                                                             : C->seeds);
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)C->s->seeds[i]);
    free(x->value);
    x->value = strdup(buf);
    AL_ASSERT(x->value != NULL);
    return x;
}

/* The trial's tree: the file with this combination's values set. */
static int trial_tree(const spec_ctx *C, const int *choice, int seed_i, al_node **out)
{
    const al_sweep *s = C->s;
    al_node *tree = al_node_clone(s->root);
    for (int a = 0; a < s->n_axes; a++)
        if (al_sweep_scaling_set(tree, &s->axes[a], choice[a], C->e)) {
            al_node_free(tree);
            return -1;
        }
    if (s->n_seeds) {
        al_node *sv = seed_node(C, seed_i);
        int rc = al_node_set_path(tree, "train.seed", sv, 1, C->e);
        al_node_free(sv);
        if (rc) {
            al_node_free(tree);
            return -1;
        }
    }
    *out = tree;
    return 0;
}

/* A label from the values of the axes that vary: which = 0 every axis (the
 * trial's config), 1 all but the select axes (its configuration), 2 the
 * select axes alone (the tuned values). */
static void config_label(const al_sweep *s, const int *choice, int which, char *out, size_t n)
{
    out[0] = 0;
    for (int a = 0; a < s->n_axes; a++) {
        int scaling = s->axes[a].scaling != AL_SCALING_NONE;   /* named even alone */
        if ((s->axes[a].n < 2 && !scaling) || (which == 1 && is_select_axis(s, a)) ||
            (which == 2 && !is_select_axis(s, a)))
            continue;
        const char *p = s->axes[a].path, *last = strrchr(p, '.');
        size_t len = strlen(out);
        if (len && len + 1 < n) out[len] = '_', out[len + 1] = 0;   /* between axes */
        if (scaling) al_sweep_scaling_label(out, n, &s->axes[a], choice[a]);
        else al_sweep_value_label(out, n, last ? last + 1 : p, s->axes[a].key->items[choice[a]]);
    }
    if (!out[0] && which != 2) snprintf(out, n, "base");
}

/* Equal for the trials of one configuration: FNV-1a over the value
 * indices of the axes that are not selected (design: nor sweep.scaling's,
 * so equal for one design at every size and budget). */
static uint64_t group_key(const al_sweep *s, const int *choice, int design)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int a = 0; a < s->n_axes; a++)
        if (!is_select_axis(s, a) && !(design && s->axes[a].scaling))
            h = (h ^ (uint64_t)(choice[a] + 1)) * 0x100000001b3ULL;
    return h;
}

/* The cost figures of a trial: an earlier trial's when only the seed
 * differs (counting a layer without FLOP members runs it: six seeds of a
 * DeltaNet stack would run it six times at load). */
static int trial_costs(spec_ctx *C, al_sweep_trial *t)
{
    char *key = C->cost_keys[t->index];
    al_sweep_config_hash(&t->cfg, 1, key);
    for (int j = 0; j < t->index; j++) {
        const al_sweep_trial *u = &C->s->trials[j];
        if (strcmp(C->cost_keys[j], key) != 0 || u->kv_context != t->kv_context) continue;
        t->train_flops_per_token = u->train_flops_per_token;
        t->decode_flops_per_token = u->decode_flops_per_token;
        t->decode_bytes_per_token = u->decode_bytes_per_token;
        t->arithmetic_intensity = u->arithmetic_intensity;
        return 0;
    }
    return al_sweep_trial_costs(t, C->e);
}

/* Decode, check and measure one trial; a decode error gets the trial's
 * label appended so that a value's line reads in context. */
static int trial_decode(spec_ctx *C, const al_node *tree, al_sweep_trial *t)
{
    al_err *e = C->e;
    if (al_config_decode(tree, &t->cfg, e) || check_data(tree, &t->cfg, e)) goto fail;
    snprintf(t->cfg.file, sizeof t->cfg.file, "%s", C->s->file);
    for (int i = 0; i < C->n_plugins; i++)
        if (al_plugin_note(&t->cfg, C->plugins[i], e)) goto fail;
    if (al_train_resolve(&t->cfg, al_data_vocab(&t->cfg.data), e)) goto fail;
    t->seed = t->cfg.train.seed;
    t->params = al_model_param_count(&t->cfg.model, e);
    if (!t->params) goto fail;
    t->kv_elems_per_token = al_model_kv_elems_per_token(&t->cfg.model);
    t->kv_context = t->cfg.report.context ? t->cfg.report.context : t->cfg.model.seq_len;
    t->kv_bytes_at_context = al_model_kv_bytes_at(&t->cfg.model, AL_KV_F32, t->kv_context);
    if (trial_costs(C, t)) goto fail;
    al_sweep_config_hash(&t->cfg, 0, t->hash);
    return 0;
fail:
    if (C->s->n_axes || C->s->n_seeds) {
        size_t len = strlen(e->msg);
        snprintf(e->msg + len, sizeof e->msg - len, " (in trial '%s')", t->label);
    }
    return -1;
}

static int expand_one(spec_ctx *C, int k, int *kept)
{
    al_sweep *s = C->s;
    int choice[AL_SWEEP_MAX_AXES], seed_i;
    al_node *tree;
    combination(C, k, choice, &seed_i);
    if (trial_tree(C, choice, seed_i, &tree)) return -1;
    uint64_t seed_v = s->n_seeds ? s->seeds[seed_i] : 0;
    if (excluded(C, tree, seed_v)) {
        al_node_free(tree);
        s->n_excluded++;
        return 0;
    }
    al_sweep_trial *t = &s->trials[*kept];
    memset(t, 0, sizeof *t);
    t->index = *kept;
    t->upstream = -1;
    config_label(s, choice, 0, t->config, 96);
    config_label(s, choice, 1, t->group, 96);
    config_label(s, choice, 2, t->tuned, 96);
    t->group_key = group_key(s, choice, 0);
    t->design_key = group_key(s, choice, 1);
    al_sweep_scaling_mark(s, choice, t);
    t->baseline = C->baseline && node_matches_all(tree, C->baseline);
    snprintf(t->label, sizeof t->label, "%s", t->config);   /* for errors */
    if (s->n_seeds)
        snprintf(t->label, sizeof t->label, "%.130s_seed%llu", t->config,
                 (unsigned long long)seed_v);
    int rc = trial_decode(C, tree, t);
    if (rc == 0) memcpy(C->choices[*kept], choice, sizeof choice);
    if (rc == 0 && C->trees) C->trees[*kept] = tree;
    else al_node_free(tree);
    if (rc == 0) (*kept)++;
    return rc;
}

/* ------------------------------------------------------------ public */

static int expand_all(spec_ctx *C)
{
    al_sweep *s = C->s;
    int total = 0, kept = 0;
    if (count_trials(C, &total)) return -1;
    s->trials = al_calloc((size_t)total, sizeof *s->trials);
    C->choices = al_calloc((size_t)total, sizeof *C->choices);
    C->cost_keys = al_calloc((size_t)total, sizeof *C->cost_keys);
    if (C->trees_out) *C->trees_out = C->trees = al_calloc((size_t)total, sizeof *C->trees);
    C->n_total = total;
    C->exclude_hits = al_calloc((size_t)(C->exclude ? C->exclude->n : 0) + 1, sizeof(int));
    int rc = 0;
    for (int k = 0; k < total && !rc; k++) rc = expand_one(C, k, &kept);
    /* an item that drops nothing is a typo or a value no axis takes: the
     * trials it meant to drop would run (and cost) unseen */
    for (int i = 0; !rc && C->exclude && i < C->exclude->n; i++)
        if (!C->exclude_hits[i])
            rc = al_node_errf(C->e, C->exclude->items[i], "this exclude item matches no trial of "
                              "the sweep (its values must equal an axis's, key by key)");
    free(C->exclude_hits), C->exclude_hits = NULL;
    if (rc) return -1;
    s->n_trials = kept;
    if (kept == 0)
        return al_node_errf(C->e, C->exclude ? C->exclude : al_sweep_node(C), "every trial is excluded "
                  "(%d of %d)", s->n_excluded, total);
    if (al_sweep_check_select(C) || al_sweep_finish_names(C) || al_sweep_mark_baseline(C)) return -1;
    al_sweep_finish_groups(s);
    return 0;
}

static int expand(spec_ctx *C)
{
    int rc = expand_all(C);
    free(C->choices);
    free(C->cost_keys);
    C->choices = NULL;
    C->cost_keys = NULL;
    return rc;
}

int al_sweep_expand(al_sweep *s, const al_node *sw, const al_sweep_axis_in *extra, int n_extra,
                    const char *const *plugins, int n_plugins, al_node ***trees, al_err *e)
{
    spec_ctx C = {.s = s, .plugins = plugins, .n_plugins = n_plugins, .e = e, .sweep = sw,
                  .extra = extra, .n_extra = n_extra, .trees_out = trees};
    if (trees) *trees = NULL;   /* expand allocates them */
    if (parse_sweep(&C) == 0 && expand(&C) == 0) return 0;
    for (int i = 0; C.trees && i < C.n_total; i++) al_node_free(C.trees[i]);
    if (trees) free(*trees), *trees = NULL;
    return -1;
}

int al_sweep_tree_matches(const al_node *tree, const al_node *map)
{
    return node_matches_all(tree, map);
}

int al_sweep_seq_trials(const al_sweep *s, int n)
{
    int k = 0;
    while (k < s->n_trials && s->trials[k].seed <= (uint64_t)n) k++;
    return k;
}

void al_sweep_free(al_sweep *s)
{
    al_node_free(s->root);
    free(s->seeds);
    free(s->trials);
    memset(s, 0, sizeof *s);
}

