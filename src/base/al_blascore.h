/*
 * al_blascore.h - the matrix kernels that follow the CPU at hand. Debian's
 * OpenBLAS (0.3.21, DYNAMIC_ARCH) picks its kernel set from the CPU's
 * model at load time; on a CPU newer than the library it falls back to
 * its SSE3 "Prescott" kernels, five times below what an AVX-512 core does.
 * attnlab reads the CPU's ISA itself and, where OpenBLAS fell below it,
 * runs again (once, before any work) with OPENBLAS_CORETYPE set to the
 * best set this OpenBLAS has for that ISA.
 *
 * The choice is a pure function (al_blas_choose) of the ISA, OpenBLAS's
 * choice, the sets the library offers and the user's settings, so it is
 * tested by table on any CPU.
 */
#ifndef AL_BLASCORE_H
#define AL_BLASCORE_H

#include <stddef.h>

#include "al_util.h"

/* ISA bits: each one also says the OS saves the state it needs (XGETBV). */
enum {
    AL_ISA_SSE3 = 1u << 0,
    AL_ISA_AVX = 1u << 1,
    AL_ISA_AVX2 = 1u << 2,          /* with FMA3 */
    AL_ISA_AVX512 = 1u << 3,        /* F, CD, BW, DQ and VL: what SkylakeX's kernels use */
    AL_ISA_AVX512_BF16 = 1u << 4,
    AL_ISA_AMX = 1u << 5,           /* AMX-TILE with AMX-BF16 */
};

typedef struct al_cpu {
    unsigned isa;         /* AL_ISA_* */
    int family, model;    /* CPUID's, extended fields folded in */
    char vendor[13];
} al_cpu;

/* This CPU, from CPUID (and XGETBV for the OS's support). */
void al_cpu_read(al_cpu *c);

/* The environment a choice is made in. */
typedef struct al_blas_env {
    const char *chosen;            /* the set OpenBLAS chose (openblas_get_corename) */
    const char *const *offered;    /* the sets this OpenBLAS build has, NULL-terminated */
    const char *user_coretype;     /* OPENBLAS_CORETYPE as the user set it, or NULL */
    const char *override;          /* ATTNLAB_BLAS_CORE, or NULL */
} al_blas_env;

typedef struct al_blas_pick {
    char core[32];    /* the set to run with (OpenBLAS's spelling, from offered) */
    int reexec;       /* 1: run again with OPENBLAS_CORETYPE=core */
    char why[256];    /* what was chosen and why: the line to print when reexec */
} al_blas_pick;

/* Returns 0, or -1 with e naming ATTNLAB_BLAS_CORE when the override is
 * not a set this OpenBLAS has, or one this CPU cannot run. */
int al_blas_choose(const al_cpu *cpu, const al_blas_env *env, al_blas_pick *p, al_err *e);

/* The ISA bits a kernel set needs, and whether this names one at all. */
unsigned al_blas_core_needs(const char *core, int *known);

/* At the start of main, before any work: choose, and where the choice
 * differs from what OpenBLAS loaded, print p.why (unless ATTNLAB_BLAS_QUIET
 * is set) and exec argv again with OPENBLAS_CORETYPE set (once:
 * ATTNLAB_BLAS_REEXEC marks the second run).
 * Returns 0 to go on (also when exec failed: it says so and goes on with
 * the loaded set), or -1 with e set for a bad ATTNLAB_BLAS_CORE. */
int al_blas_follow_cpu(char **argv, al_err *e);

#endif
