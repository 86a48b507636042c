/*
 * blascore.c - OpenBLAS's kernel set chosen for the CPU at hand
 * (al_blascore.h).
 */
#include "al_blascore.h"

#include <cpuid.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

char *openblas_get_corename(void);
char *openblas_get_config(void);

/* ------------------------------------------------------------ the CPU */

static unsigned long long xgetbv0(void)
{
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

void al_cpu_read(al_cpu *c)
{
    unsigned a = 0, b = 0, cx = 0, d = 0, max = 0;
    memset(c, 0, sizeof *c);
    if (!__get_cpuid(0, &max, &b, &cx, &d)) return;
    memcpy(c->vendor, &b, 4), memcpy(c->vendor + 4, &d, 4), memcpy(c->vendor + 8, &cx, 4);
    __get_cpuid(1, &a, &b, &cx, &d);
    int fam = (a >> 8) & 0xf, mod = (a >> 4) & 0xf;
    c->family = fam == 0xf ? fam + (int)((a >> 20) & 0xff) : fam;
    c->model = fam == 0x6 || fam == 0xf ? mod | (int)((a >> 12) & 0xf0) : mod;
    if (cx & bit_SSE3) c->isa |= AL_ISA_SSE3;
    /* AVX state saved by the OS (OSXSAVE, then XCR0's SSE and AVX bits) */
    unsigned long long xcr0 = (cx & bit_OSXSAVE) ? xgetbv0() : 0;
    int os_avx = (xcr0 & 0x6) == 0x6, os_avx512 = (xcr0 & 0xe6) == 0xe6;
    int os_amx = (xcr0 & 0x60000) == 0x60000;
    if ((cx & bit_AVX) && os_avx) c->isa |= AL_ISA_AVX;
    int fma = (cx & bit_FMA) != 0;
    if (max < 7) return;
    __get_cpuid_count(7, 0, &a, &b, &cx, &d);
    if ((b & bit_AVX2) && fma && os_avx) c->isa |= AL_ISA_AVX2;
    unsigned need512 = bit_AVX512F | bit_AVX512CD | bit_AVX512BW | bit_AVX512DQ | bit_AVX512VL;
    if ((b & need512) == need512 && os_avx512) c->isa |= AL_ISA_AVX512;
    if ((d & (1u << 24)) && (d & (1u << 22)) && os_amx) c->isa |= AL_ISA_AMX;  /* TILE, BF16 */
    __get_cpuid_count(7, 1, &a, &b, &cx, &d);
    if ((a & (1u << 5)) && (c->isa & AL_ISA_AVX512)) c->isa |= AL_ISA_AVX512_BF16;
}

/* ------------------------------------------------------------ kernel sets */

/* OpenBLAS 0.3.21's x86-64 sets, best first; tier orders them by the ISA
 * their kernels use (sets of one tier are equals). */
static const struct kset {
    const char *name;
    unsigned needs;
    int tier;
} sets[] = {
    {"Cooperlake", AL_ISA_AVX512 | AL_ISA_AVX512_BF16, 5},
    {"SkylakeX", AL_ISA_AVX512, 4},
    {"Haswell", AL_ISA_AVX2, 3},
    {"Zen", AL_ISA_AVX2, 3},
    {"Excavator", AL_ISA_AVX2, 3},
    {"SandyBridge", AL_ISA_AVX, 2},
    {"Steamroller", AL_ISA_AVX, 2},
    {"Piledriver", AL_ISA_AVX, 2},
    {"Bulldozer", AL_ISA_AVX, 2},
    {"Nehalem", AL_ISA_SSE3, 1},
    {"Dunnington", AL_ISA_SSE3, 1},
    {"Penryn", AL_ISA_SSE3, 1},
    {"Core2", AL_ISA_SSE3, 1},
    {"Prescott", AL_ISA_SSE3, 1},
    {NULL, 0, 0},
};

static const struct kset *kset_of(const char *name)
{
    for (const struct kset *k = sets; name && k->name; k++)
        if (strcasecmp(k->name, name) == 0) return k;
    return NULL;
}

unsigned al_blas_core_needs(const char *core, int *known)
{
    const struct kset *k = kset_of(core);
    *known = k != NULL;
    return k ? k->needs : 0;
}

/* The offered set named name (any case), or NULL. */
static const char *offered_as(const char *const *offered, const char *name)
{
    for (int i = 0; offered && offered[i]; i++)
        if (strcasecmp(offered[i], name) == 0) return offered[i];
    return NULL;
}

static const char *isa_name(unsigned isa)
{
    return isa & AL_ISA_AVX512 ? "AVX-512" : isa & AL_ISA_AVX2 ? "AVX2" : isa & AL_ISA_AVX ? "AVX"
           : "SSE3";
}

static void list_offered(char *out, size_t n, const char *const *offered)
{
    size_t len = 0;
    out[0] = 0;
    for (int i = 0; offered && offered[i] && len < n; i++)
        len += (size_t)snprintf(out + len, n - len, "%s%s", i ? ", " : "", offered[i]);
}

static int choose_override(const al_cpu *cpu, const al_blas_env *env, al_blas_pick *p, al_err *e)
{
    char have[256];
    const char *o = offered_as(env->offered, env->override);
    const struct kset *k = kset_of(o);
    list_offered(have, sizeof have, env->offered);
    if (!o || !k)
        return al_errf(e, "ATTNLAB_BLAS_CORE=%s: not a kernel set of this OpenBLAS (it has: %s)",
                       env->override, have);
    if ((cpu->isa & k->needs) != k->needs)
        return al_errf(e, "ATTNLAB_BLAS_CORE=%s: this CPU has no %s, which those kernels use; "
                       "choose one of: %s", env->override,
                       isa_name(k->needs & ~cpu->isa), have);
    snprintf(p->core, sizeof p->core, "%s", o);
    p->reexec = !env->chosen || strcasecmp(o, env->chosen) != 0;
    snprintf(p->why, sizeof p->why, "attnlab: using %s kernels (ATTNLAB_BLAS_CORE); OpenBLAS "
             "chose %s", o, env->chosen ? env->chosen : "none");
    return 0;
}

int al_blas_choose(const al_cpu *cpu, const al_blas_env *env, al_blas_pick *p, al_err *e)
{
    memset(p, 0, sizeof *p);
    snprintf(p->core, sizeof p->core, "%s", env->chosen ? env->chosen : "");
    if (env->override && *env->override) return choose_override(cpu, env, p, e);
    if (env->user_coretype && *env->user_coretype) {   /* the user's choice stands */
        snprintf(p->why, sizeof p->why, "attnlab: OPENBLAS_CORETYPE=%s is set: keeping "
                 "OpenBLAS's %s", env->user_coretype, p->core);
        return 0;
    }
    const struct kset *best = NULL, *now = kset_of(env->chosen);
    for (const struct kset *k = sets; k->name && !best; k++)
        if ((cpu->isa & k->needs) == k->needs && offered_as(env->offered, k->name)) best = k;
    if (!best || (now && now->tier >= best->tier)) return 0;   /* no better set to run */
    snprintf(p->core, sizeof p->core, "%s", offered_as(env->offered, best->name));
    p->reexec = 1;
    snprintf(p->why, sizeof p->why, "attnlab: OpenBLAS chose %s on this CPU (%s family %d "
             "model %d, %s); using %s kernels", env->chosen ? env->chosen : "no kernels",
             cpu->vendor, cpu->family, cpu->model, isa_name(cpu->isa), p->core);
    return 0;
}

/* ------------------------------------------------------------ following */

/* The sets this OpenBLAS build has: its gotoblas_<SET> tables. */
static void offered_sets(const char **out, int max)
{
    int n = 0;
    for (const struct kset *k = sets; k->name && n < max - 1; k++) {
        char sym[64];
        int len = snprintf(sym, sizeof sym, "gotoblas_");
        for (const char *c = k->name; *c && len < (int)sizeof sym - 1; c++)
            sym[len++] = (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
        sym[len] = 0;
        if (dlsym(RTLD_DEFAULT, sym)) out[n++] = k->name;
    }
    out[n] = NULL;
}

int al_blas_follow_cpu(char **argv, al_err *e)
{
    if (getenv("ATTNLAB_BLAS_REEXEC")) return 0;   /* the run that follows the choice */
    al_cpu cpu;
    const char *offered[32];
    al_blas_pick p;
    al_cpu_read(&cpu);
    offered_sets(offered, 32);
    al_blas_env env = {openblas_get_corename(), offered, getenv("OPENBLAS_CORETYPE"),
                       getenv("ATTNLAB_BLAS_CORE")};
    if (al_blas_choose(&cpu, &env, &p, e) != 0) return -1;
    if (!p.reexec) return 0;
    const char *was = getenv("OPENBLAS_CORETYPE");
    char saved[64] = "";
    if (was) snprintf(saved, sizeof saved, "%s", was);
    if (!getenv("ATTNLAB_BLAS_QUIET")) fprintf(stderr, "%s\n", p.why);
    setenv("OPENBLAS_CORETYPE", p.core, 1);
    setenv("ATTNLAB_BLAS_REEXEC", "1", 1);
    execv("/proc/self/exe", argv);
    fprintf(stderr, "attnlab: could not run again with %s kernels; going on with %s\n", p.core,
            env.chosen);
    if (was) setenv("OPENBLAS_CORETYPE", saved, 1);
    else unsetenv("OPENBLAS_CORETYPE");
    return 0;
}
