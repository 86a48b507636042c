/*
 * plugin.c - the plugin loader: dlopen, one entry point, version checks,
 * registration (al_plugin.h).
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "al_plugin.h"
#include "al_registry.h"

#define MAX_LOADED 32

/* Loaded plugins: the handle (to recognise a file loaded twice) and the
 * path, which the registry keeps as the variants' origin. Never freed: the
 * variants stay registered until the process ends. */
static struct {
    void *handle;
    char *path;
} loaded[MAX_LOADED];
static int n_loaded;

/* ------------------------------------------------------------ opening */

/* dlerror() repeats the path it was given; keep only what follows it. */
static const char *dl_reason(const char *dlpath)
{
    const char *why = dlerror();
    if (!why) return "unknown dlopen error";
    size_t n = strlen(dlpath);
    if (strncmp(why, dlpath, n) == 0 && why[n] == ':') why += n + 1;
    while (*why == ' ') why++;
    return why;
}

static int open_object(const char *path, void **h, al_err *e)
{
    struct stat st;
    if (strlen(path) >= PATH_MAX) return al_errf(e, "%.80s...: plugin path too long", path);
    if (stat(path, &st) != 0)
        return al_errf(e, "%s: cannot load plugin: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))   /* a FIFO would block dlopen */
        return al_errf(e, "%s: cannot load plugin: %s, not a regular file", path,
                       al_file_kind(st.st_mode));
    /* dlopen searches the library path for a name without a slash */
    char dlpath[PATH_MAX + 2];
    snprintf(dlpath, sizeof dlpath, "%s%s", strchr(path, '/') ? "" : "./", path);
    dlerror();
    *h = dlopen(dlpath, RTLD_NOW | RTLD_LOCAL);
    if (*h) return 0;
    const char *why = dl_reason(dlpath);
    if (strstr(why, "undefined symbol"))
        return al_errf(e, "%s: cannot load plugin: %s (a symbol this attnlab does not "
                       "export: built for another version?)", path, why);
    return al_errf(e, "%s: not a loadable shared object (%s)", path, why);
}

/* ------------------------------------------------------------ registering */

int al_plugin_register_entry(al_plugin_entry_fn entry, const char *origin, al_err *e)
{
    int version = -1;
    const al_variant *const *list = entry(&version);
    if (version < AL_VARIANT_API_MIN || version > AL_VARIANT_API_VERSION)
        return al_errf(e, "%s: plugin was built for variant interface version %d, "
                       "this attnlab has version %d (and accepts %d to %d)", origin, version,
                       AL_VARIANT_API_VERSION, AL_VARIANT_API_MIN, AL_VARIANT_API_VERSION);
    if (!list || !list[0]) return al_errf(e, "%s: plugin exports no variants", origin);
    int before = al_variant_count();
    for (int i = 0; list[i]; i++) {
        if (al_variant_register(list[i], origin, e)) {
            al_variant_truncate(before);
            return -1;
        }
    }
    return 0;
}

/* NULL when sym is a function symbol in its object's dynamic symbol
 * table (its ELF type, found by dladdr1), else what it is. */
static const char *symbol_kind(void *sym)
{
    Dl_info info;
    const ElfW(Sym) *es = NULL;
    if (!dladdr1(sym, &info, (void **)&es, RTLD_DL_SYMENT) || !es) return "not a known symbol";
    switch (ELF64_ST_TYPE(es->st_info)) {   /* the same bits in ELF32 */
    case STT_FUNC:
    case STT_GNU_IFUNC: return NULL;
    case STT_OBJECT: return "a data symbol";
    case STT_TLS: return "a thread-local data symbol";
    default: return "not a function symbol";
    }
}

static int register_variants(void *h, const char *origin, al_err *e)
{
    void *sym = dlsym(h, AL_PLUGIN_ENTRY);
    if (!sym)
        return al_errf(e, "%s: no entry point '%s' (not an attnlab plugin)", origin,
                       AL_PLUGIN_ENTRY);
    const char *kind = symbol_kind(sym);
    if (kind)   /* calling data would jump into it (a segfault at best) */
        return al_errf(e, "%s: entry point '%s' is %s, not a function (not an attnlab "
                       "plugin)", origin, AL_PLUGIN_ENTRY, kind);
    al_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);   /* POSIX: object to function pointer */
    return al_plugin_register_entry(entry, origin, e);
}

int al_plugin_load(const char *path, al_err *e)
{
    if (!path || !path[0]) return al_errf(e, "plugin path is empty");
    void *h;
    if (open_object(path, &h, e)) return -1;
    for (int i = 0; i < n_loaded; i++) {
        if (loaded[i].handle == h) {   /* the same file again (dlopen counts it) */
            dlclose(h);
            return 0;
        }
    }
    if (n_loaded == MAX_LOADED) {
        dlclose(h);
        return al_errf(e, "%s: too many plugins (at most %d)", path, MAX_LOADED);
    }
    char *origin = strdup(path);
    AL_ASSERT(origin != NULL);
    if (register_variants(h, origin, e)) {
        dlclose(h);
        free(origin);
        return -1;
    }
    loaded[n_loaded].handle = h;
    loaded[n_loaded++].path = origin;
    return 0;
}

/* ------------------------------------------------------------ configs */

/* path relative to the directory of `file` (no directory: as given). */
static int relative_to(char *out, size_t n, const char *file, const char *path)
{
    const char *slash = file ? strrchr(file, '/') : NULL;
    int len;
    if (path[0] == '/' || !slash) len = snprintf(out, n, "%s", path);
    else len = snprintf(out, n, "%.*s/%s", (int)(slash - file), file, path);
    return len < 0 || (size_t)len >= n ? -1 : 0;
}

static int load_listed_one(al_node *x, al_err *e)
{
    char joined[PATH_MAX], abs[PATH_MAX];
    al_err sub;
    if (relative_to(joined, sizeof joined, x->file, x->value) != 0)
        return al_errf(e, "%s:%d:%d: error: plugin path too long", x->file, x->line, x->col);
    if (!realpath(joined, abs)) {
        const char *why = strerror(errno);
        if (strcmp(joined, x->value) == 0)
            return al_errf(e, "%s:%d:%d: error: plugin '%.300s': %s", x->file, x->line,
                           x->col, x->value, why);
        return al_errf(e, "%s:%d:%d: error: plugin '%.300s': %s (looked for '%.300s')",
                       x->file, x->line, x->col, x->value, why, joined);
    }
    if (al_plugin_load(abs, &sub) != 0)
        return al_errf(e, "%s:%d:%d: error: %s", x->file, x->line, x->col, sub.msg);
    free(x->value);
    x->value = strdup(abs);
    AL_ASSERT(x->value != NULL);
    return 0;
}

int al_plugin_load_listed(al_node *root, al_err *e)
{
    al_node *list = root && root->kind == AL_NODE_MAP ? al_node_get(root, "plugins") : NULL;
    if (!list || list->kind != AL_NODE_SEQ) return 0;
    for (int i = 0; i < list->n; i++) {
        al_node *x = list->items[i];
        if (x->kind != AL_NODE_SCALAR || !x->value[0]) continue;
        if (load_listed_one(x, e) != 0) return -1;
    }
    return 0;
}

int al_plugin_note(al_config *c, const char *path, al_err *e)
{
    char abs[PATH_MAX];
    if (!realpath(path, abs)) return al_errf(e, "%s: %s", path, strerror(errno));
    for (int i = 0; i < c->n_plugins; i++)
        if (strcmp(c->plugins[i], abs) == 0) return 0;
    if (c->n_plugins == AL_MAX_PLUGINS)
        return al_errf(e, "%s: a config names at most %d plugins", path, AL_MAX_PLUGINS);
    if (strlen(abs) >= AL_PATH_LEN)
        return al_errf(e, "%s: plugin path too long (at most %d bytes)", path, AL_PATH_LEN - 1);
    memset(c->plugins[c->n_plugins], 0, AL_PATH_LEN);
    memcpy(c->plugins[c->n_plugins++], abs, strlen(abs));
    return 0;
}
