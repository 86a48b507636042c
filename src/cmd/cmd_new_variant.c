/*
 * cmd_new_variant.c - `attnlab new-variant NAME --out DIR`: a plugin
 * skeleton, DIR/meson.build (on the installed attnlab-variant.pc) and
 * DIR/NAME.c (grouped-query attention with RoPE, every member of the
 * interface filled in), that builds as generated and passes
 * `attnlab check-variant` unchanged. The templates are the files
 * in src/cmd/templates/ (.in) with @name@ for NAME.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "al_cli.h"
#include "al_registry.h"
#include "new_variant_templates.h"

typedef struct new_args {
    const char *name, *out;
} new_args;

static const al_opt new_opts[] = {
    AL_ARG("NAME", new_args, name, AL_OPT_REQUIRED,
           "the variant's name (letters, digits, '_' or '-'): model.attention.variant"),
    {.name = "--out", .kind = AL_OPT_PATH, .meta = "DIR", AL_CLI_AT(new_args, out),
     .flags = AL_OPT_REQUIRED, .help = "where to write meson.build and NAME.c (made if missing)"},
    {0},
};

static const al_cli_spec new_spec = {
    "new-variant", new_opts,
    "Write a plugin skeleton for attention variant NAME: DIR/meson.build, which\n"
    "builds DIR/NAME.c against the installed SDK (attnlab-variant.pc), and\n"
    "DIR/NAME.c, grouped-query attention with RoPE in which every member of\n"
    "the interface is filled in and correct; comments mark what to change.\n"
    "It builds and passes `attnlab check-variant` as generated:\n"
    "  cd DIR && meson setup build && ninja -C build\n"
    "  attnlab check-variant --plugin build/libattnlab_NAME.so --variant NAME\n"
    "Refuses a built-in variant's NAME and to overwrite either file; writes\n"
    "both files or neither.\n",
};

/* template with every @name@ replaced by name (malloc'ed). */
static char *fill(const char *template, const char *name)
{
    static const char mark[] = "@name@";
    size_t n = strlen(template) + 1, k = strlen(name), m = sizeof mark - 1;
    for (const char *p = template; (p = strstr(p, mark)); p += m) n += k;
    char *out = malloc(n), *o = out;
    AL_ASSERT(out);
    for (const char *p = template, *q; ; p = q + m) {
        q = strstr(p, mark);
        size_t len = q ? (size_t)(q - p) : strlen(p);
        memcpy(o, p, len), o += len;
        if (!q) break;
        memcpy(o, name, k), o += k;
    }
    *o = 0;
    return out;
}

/* 0 when DIR/file does not exist; else -1 with the refusal in e. */
static int check_absent(const char *dir, const char *file, al_err *e)
{
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (stat(path, &st) != 0) return 0;
    snprintf(e->msg, sizeof e->msg, "new-variant: %.900s exists; not overwriting it", path);
    return -1;
}

static int write_new(const char *dir, const char *file, const char *text, al_err *e)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (al_write_atomic(path, text, strlen(text), e) != 0) return -1;
    printf("wrote %s\n", path);
    return 0;
}

/* Both files or neither: every refusal comes before the first write, and
 * a second write that fails takes the first file (and a folder this call
 * made) with it. */
static int write_skeleton(const char *dir, const char *name, al_err *e)
{
    char file[128], path[4096];
    struct stat st;
    int made_dir = stat(dir, &st) != 0;
    snprintf(file, sizeof file, "%s.c", name);
    if (check_absent(dir, file, e) || check_absent(dir, "meson.build", e)) return -1;
    if (al_mkdirs(dir, e) != 0) return -1;
    char *c = fill(al_template_c, name), *meson = fill(al_template_meson, name);
    int rc = write_new(dir, file, c, e);
    if (!rc && write_new(dir, "meson.build", meson, e) != 0) {
        snprintf(path, sizeof path, "%s/%s", dir, file);
        unlink(path);
        rc = -1;
    }
    if (rc && made_dir) rmdir(dir);
    free(c), free(meson);
    return rc;
}

int al_cmd_new_variant(int argc, char **argv)
{
    new_args a = {0};
    int rc = al_cli_parse(&new_spec, argc, argv, &a);
    if (rc != AL_CLI_GO) return rc;
    al_err e;
    if (!al_variant_plain_name(a.name)) {
        snprintf(e.msg, sizeof e.msg, "new-variant: NAME '%s' must be 1 to 63 letters, digits, "
                 "'_' or '-'", a.name);
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    }
    /* a plugin whose name a built-in holds is refused at load: its skeleton
     * could never run */
    if (al_variant_find(a.name)) {
        snprintf(e.msg, sizeof e.msg, "new-variant: NAME '%s' is a built-in variant's; choose "
                 "another (attnlab variants lists them)", a.name);
        return al_cli_fail(AL_EXIT_INPUT, e.msg);
    }
    return write_skeleton(a.out, a.name, &e) ? al_cli_fail(AL_EXIT_INPUT, e.msg) : 0;
}
