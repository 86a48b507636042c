/*
 * broken.c - plugins the loader must refuse, one per -D flag (tests/meson.build
 * builds each into its own shared object):
 *   BAD_PLUGIN_VERSION  the entry reports another interface version
 *   BAD_TABLE_VERSION   the entry is current but the table is not
 *   NO_ENTRY            no attnlab_plugin_variants symbol at all
 *   DUPLICATE           a new variant, then one named like a built-in
 *   UNDEFINED           calls a kernel the program does not export
 *   EMPTY               exports an empty table
 *   BAD_NAME            a variant name that cannot be a YAML value or file name
 *   DATA_ENTRY          attnlab_plugin_variants is a data symbol, not a function
 *   HUGE_SIZES          a variant whose size functions report SIZE_MAX/2 floats
 * The variant itself is a stub: the loader never calls it.
 */
#include <stdint.h>
#include <string.h>

#include "attnlab_variant.h"

static int stub_params(const void *ctx, al_param_spec *out)
{
    const al_attn_shape *s = ctx;
    out[0] = (al_param_spec){"w", s->d_model, s->d_model, AL_INIT_NORMAL};
    return 1;
}
#ifdef HUGE_SIZES
static size_t stub_floats(const void *ctx, int B, int T) { return SIZE_MAX / 2; }
static size_t stub_kv(const void *ctx) { return SIZE_MAX / 2; }
#else
static size_t stub_floats(const void *ctx, int B, int T) { return 1; }
static size_t stub_kv(const void *ctx) { return 1; }
#endif

#ifdef UNDEFINED
void al_kernel_from_the_future(float *out, int n);
#endif

static void stub_forward(const void *ctx, float *out, float *act, float *scratch,
                         const float *x, float *const *p, int B, int T)
{
    const al_attn_shape *s = ctx;
    memset(out, 0, (size_t)B * T * s->d_model * sizeof(float));
#ifdef UNDEFINED
    al_kernel_from_the_future(out, B * T * s->d_model);
#endif
}

static void stub_backward(const void *ctx, float *dx, float *const *dp, float *scratch,
                          const float *dout, const float *x, const float *act,
                          float *const *p, int B, int T)
{
}

#ifdef BAD_TABLE_VERSION
#define TABLE_VERSION (AL_VARIANT_API_VERSION + 41)
#else
#define TABLE_VERSION AL_VARIANT_API_VERSION
#endif

static const al_variant_train stub_train = {stub_params, stub_floats, stub_floats, stub_forward,
                                            stub_backward, 0};
static const al_variant_decode stub_decode = {.kv_elems = stub_kv};

#define STUB(NAME)                                                                    \
    {.api_version = TABLE_VERSION, .name = NAME, .description = "test stub",          \
     .train = &stub_train, .decode = &stub_decode}

static const al_variant first = STUB("tp_first");
static const al_variant dup = STUB("mha");

#ifdef DUPLICATE
static const al_variant *const variants[] = {&first, &dup, NULL};
#elif defined(EMPTY)
static const al_variant *const variants[] = {NULL};
#elif defined(BAD_NAME)
static const al_variant spaced = STUB("sliding window");
static const al_variant *const variants[] = {&spaced, NULL};
#else
static const al_variant *const variants[] = {&first, NULL};
#endif

#ifdef DATA_ENTRY
/* the entry point's name on a table of pointers (the header declares the
 * function, so the symbol gets its name from an asm label) */
AL_PLUGIN_EXPORT const void *const entry_as_data[4] __asm__("attnlab_plugin_variants") = {
    &first, &dup, variants, NULL};
#else
#ifdef NO_ENTRY
AL_PLUGIN_EXPORT const al_variant *const *attnlab_plugin_variantz(int *api_version);
AL_PLUGIN_EXPORT const al_variant *const *attnlab_plugin_variantz(int *api_version)
#else
AL_PLUGIN_EXPORT const al_variant *const *attnlab_plugin_variants(int *api_version)
#endif
{
#ifdef BAD_PLUGIN_VERSION
    *api_version = AL_VARIANT_API_VERSION + 7;
#else
    *api_version = AL_VARIANT_API_VERSION;
#endif
    (void)dup, (void)first;
    return variants;
}
#endif
