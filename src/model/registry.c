/*
 * registry.c - the attention variants known to this run.
 *
 * Built-ins come from one static NULL-terminated table, in the order they
 * are listed by `attnlab variants`; plugins are appended by the loader.
 */
#include "al_registry.h"

#include <math.h>
#include <string.h>

extern const al_variant_ops al_variant_mha;
extern const al_variant_ops al_variant_mqa;
extern const al_variant_ops al_variant_gqa;
extern const al_variant_ops al_variant_mla;
extern const al_variant_ops al_variant_gta;
extern const al_variant_ops al_variant_gla;
extern const al_variant_ops al_variant_tpa;
extern const al_variant_ops al_variant_local;

static const al_variant_ops *const builtins[] = {
    &al_variant_mha,
    &al_variant_mqa,
    &al_variant_gqa,
    &al_variant_mla,
    &al_variant_gta,
    &al_variant_gla,
    &al_variant_tpa,
    &al_variant_local,
    NULL,
};

#define MAX_VARIANTS 64
static const al_variant_ops *extra[MAX_VARIANTS];
static const char *extra_origin[MAX_VARIANTS];
static int n_extra;
/* Tables of an older interface version, copied whole-size: the members
 * that version predates are NULL here, never read from the plugin. */
static al_variant_ops upgraded[MAX_VARIANTS];

static int n_builtins(void)
{
    int n = 0;
    while (builtins[n]) n++;
    return n;
}

int al_variant_count(void) { return n_builtins() + n_extra; }

const al_variant_ops *al_variant_at(int i)
{
    int nb = n_builtins();
    if (i < 0 || i >= nb + n_extra) return NULL;
    return i < nb ? builtins[i] : extra[i - nb];
}

const char *al_variant_origin(int i)
{
    int nb = n_builtins();
    return i < nb ? "built-in" : extra_origin[i - nb];
}

const al_variant_ops *al_variant_find(const char *name)
{
    for (int i = 0; i < al_variant_count(); i++)
        if (strcmp(al_variant_at(i)->name, name) == 0) return al_variant_at(i);
    return NULL;
}

/* Names become YAML keys and values, trial ids and file names: 1 to
 * AL_NAME_LEN - 1 letters, digits, '_' or '-'. */
int al_variant_plain_name(const char *n)
{
    size_t len = n ? strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                "0123456789_-") : 0;
    return len > 0 && !n[len] && len < 64;
}

/* Members a table must have, and groups that go together (decode's
 * three, batched decode's two: all or none): the error names exactly the
 * members missing, "forward, kv_elems", so an author need not guess. */
static int missing_members(const al_variant_ops *o, const char *origin, al_err *e)
{
    const struct { const char *name; int set, group; } m[] = {
        {"params", !!o->params, 0}, {"act_floats", !!o->act_floats, 0},
        {"scratch_floats", !!o->scratch_floats, 0}, {"forward", !!o->forward, 0},
        {"backward", !!o->backward, 0}, {"kv_elems", !!o->kv_elems, 0},
        {"prefill", !!o->prefill, 1}, {"decode_scratch_floats", !!o->decode_scratch_floats, 1},
        {"decode", !!o->decode, 1},
        {"decode_batch_scratch_floats", !!o->decode_batch_scratch_floats, 2},
        {"decode_batch", !!o->decode_batch, 2},
    };
    enum { N = sizeof m / sizeof m[0] };
    int any[3] = {1, 0, 0};   /* group 0 is always required */
    for (int i = 0; i < N; i++) any[m[i].group] |= m[i].set;
    char list[256] = "";
    size_t len = 0;
    int n = 0;
    for (int i = 0; i < N; i++)
        if (any[m[i].group] && !m[i].set)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", n++ ? ", " : "",
                                    m[i].name);
    if (!n) return 0;
    return al_errf(e, "%s: variant '%s': its table is missing %s %s", origin, o->name,
                   n > 1 ? "the members" : "the member", list);
}

/* A plugin's settings table: at most AL_MAX_SETTINGS, each with a plain
 * name (not "variant", no two alike), a known kind and a finite default
 * (whole for an integer setting). */
static int check_settings(const al_variant_ops *ops, const char *origin, al_err *e)
{
    int n = 0;
    while (ops->settings && ops->settings[n].name && n <= AL_MAX_SETTINGS) n++;
    if (n > AL_MAX_SETTINGS)
        return al_errf(e, "%s: variant '%s' declares more than %d settings",
                       origin, ops->name, AL_MAX_SETTINGS);
    for (int i = 0; i < n; i++) {
        const al_setting *s = &ops->settings[i];
        if (!al_variant_plain_name(s->name) || strcmp(s->name, "variant") == 0)
            return al_errf(e, "%s: variant '%s': setting %d must be named by 1 to 63 letters, "
                           "digits, '_' or '-' (and not 'variant')", origin, ops->name, i + 1);
        for (int j = 0; j < i; j++)
            if (strcmp(ops->settings[j].name, s->name) == 0)
                return al_errf(e, "%s: variant '%s' declares setting '%s' twice", origin,
                               ops->name, s->name);
        if (s->kind != AL_SET_INT && s->kind != AL_SET_FLOAT)
            return al_errf(e, "%s: variant '%s': setting '%s' has kind %d, not AL_SET_INT "
                           "or AL_SET_FLOAT", origin, ops->name, s->name, s->kind);
        if (!s->required && (!isfinite(s->def) || (s->kind == AL_SET_INT &&
                             (s->def != floor(s->def) || fabs(s->def) > 1e9))))
            return al_errf(e, "%s: variant '%s': setting '%s' has default %g, not a finite "
                           "%s", origin, ops->name, s->name, s->def,
                           s->kind == AL_SET_INT ? "whole number" : "number");
    }
    return 0;
}

/* A name from a plugin for a message: control and non-ASCII bytes as '?',
 * at most 80 characters, so that the message stays one line. */
static const char *printable(char *out, size_t n, const char *s)
{
    size_t i = 0;
    for (; s && s[i] && i + 1 < n; i++)
        out[i] = (unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e ? '?' : s[i];
    out[i] = 0;
    return out;
}

int al_variant_register(const al_variant_ops *ops, const char *origin, al_err *e)
{
    size_t size = al_variant_ops_size(ops->api_version);
    char name[81];
    /* Members are only ever appended, so every version (1 on) starts with
     * api_version and name; a table that claims no version has no layout
     * at all, and nothing past api_version is read. */
    if (size == 0 && ops->api_version < 1)
        return al_errf(e, "%s: a variant table claims interface version %d, this attnlab "
                       "has version %d (and accepts %d to %d)", origin, ops->api_version,
                       AL_VARIANT_API_VERSION, AL_VARIANT_API_MIN, AL_VARIANT_API_VERSION);
    if (size == 0)
        return al_errf(e, "%s: variant '%s' was built for interface version %d, "
                       "this attnlab has version %d (and accepts %d to %d)", origin,
                       ops->name ? printable(name, sizeof name, ops->name) : "?",
                       ops->api_version, AL_VARIANT_API_VERSION, AL_VARIANT_API_MIN,
                       AL_VARIANT_API_VERSION);
    if (!al_variant_plain_name(ops->name))
        return al_errf(e, "%s: variant name '%s' must be 1 to 63 letters, digits, '_' or "
                       "'-'", origin, ops->name ? printable(name, sizeof name, ops->name)
                                                : "(null)");
    al_variant_ops whole;   /* an older table's later members read as NULL, never past it */
    memset(&whole, 0, sizeof whole);
    memcpy(&whole, ops, size);
    if (missing_members(&whole, origin, e)) return -1;
    if (check_settings(ops, origin, e)) return -1;
    for (int i = 0; i < al_variant_count(); i++)
        if (strcmp(al_variant_at(i)->name, ops->name) == 0)
            return al_errf(e, "%s: variant '%s' is already registered by %s",
                           origin, ops->name, al_variant_origin(i));
    if (n_extra == MAX_VARIANTS)
        return al_errf(e, "%s: too many variants (at most %d plugins)", origin, MAX_VARIANTS);
    if (size < sizeof *ops) {
        memset(&upgraded[n_extra], 0, sizeof upgraded[n_extra]);
        memcpy(&upgraded[n_extra], ops, size);
        ops = &upgraded[n_extra];
    }
    extra[n_extra] = ops;
    extra_origin[n_extra] = origin;
    n_extra++;
    return 0;
}

int al_variant_n_settings(const al_variant_ops *ops)
{
    int n = 0;
    if (ops->settings)
        while (ops->settings[n].name) n++;
    return n;
}

int al_variant_setting_index(const al_variant_ops *ops, const char *key)
{
    for (int i = 0; i < al_variant_n_settings(ops); i++)
        if (strcmp(ops->settings[i].name, key) == 0) return i;
    return -1;
}

/* The plugin loader registers a plugin's tables one by one; when a later
 * one is refused it drops the earlier ones, so a plugin loads whole or not
 * at all. Built-ins are never dropped. */
void al_variant_truncate(int count)
{
    int nb = n_builtins();
    AL_ASSERT(count >= nb && count <= nb + n_extra);
    n_extra = count - nb;
}
