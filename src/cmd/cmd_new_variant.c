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
    "Refuses to overwrite either file.\n",
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

static int write_new(const char *dir, const char *file, const char *text, al_err *e)
{
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (stat(path, &st) == 0) {
        snprintf(e->msg, sizeof e->msg, "new-variant: %.900s exists; not overwriting it", path);
        return -1;
    }
    if (al_write_atomic(path, text, strlen(text), e) != 0) return -1;
    printf("wrote %s\n", path);
    return 0;
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
    if (al_mkdirs(a.out, &e) != 0) return al_cli_fail(AL_EXIT_INPUT, e.msg);
    char file[128];
    snprintf(file, sizeof file, "%s.c", a.name);
    char *c = fill(al_template_c, a.name), *meson = fill(al_template_meson, a.name);
    rc = write_new(a.out, file, c, &e) || write_new(a.out, "meson.build", meson, &e);
    free(c), free(meson);
    return rc ? al_cli_fail(AL_EXIT_INPUT, e.msg) : 0;
}
