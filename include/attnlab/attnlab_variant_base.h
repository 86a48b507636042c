/*
 * attnlab_variant_base.h - what every version of the variant interface
 * shares: settings, the shape a variant sees, parameter specs, the KV cache
 * handle, the plugin export macro, the settings-table check.
 * attnlab_variant.h (the interface, version 5) and attnlab_variant_v4.h
 * (version 4, for plugins not yet moved) both include it; so do the kernel
 * and cache helpers, which serve both.
 */
#ifndef ATTNLAB_VARIANT_BASE_H
#define ATTNLAB_VARIANT_BASE_H

#include <math.h>
#include <stddef.h>

#define AL_MAX_SETTINGS 8      /* settings one variant may declare */
#define AL_MAX_ATTN_PARAMS 16  /* parameter tensors one variant may own */

/* A variant's own setting under model.attention (e.g. n_kv_head). Values are
 * carried as double; AL_SET_INT settings are checked to be whole numbers. */
enum al_setting_kind { AL_SET_INT = 0, AL_SET_FLOAT = 1 };

typedef struct al_setting {
    const char *name;     /* key under model.attention */
    int kind;             /* enum al_setting_kind */
    double def;           /* default when not given (ignored if required) */
    int required;         /* 1: the key must be given */
    const char *help;     /* one line, shown by `attnlab variants` */
} al_setting;

/* How a layer turns positions into RoPE angles (model.rope_scaling,
 * model.rope_fraction; docs/rope.md). The kernels read it
 * (al_rope_apply_forward, al_kernels.h): a variant hands it on, never
 * interprets it, so every variant scales its RoPE parts the same way. */
enum al_rope_kind {
    AL_ROPE_NONE = 0,     /* plain RoPE */
    AL_ROPE_LINEAR = 1,   /* position interpolation: angles / factor */
    AL_ROPE_NTK = 2,      /* base * factor^(d/(d-2)), d the rotated width */
    AL_ROPE_YARN = 3      /* YaRN: per-pair ramp and attention temperature */
};

typedef struct al_rope {
    float base;           /* = rope_base */
    float fraction;       /* share of each RoPE part that rotates: 1 all, 0 none (NoPE) */
    int kind;             /* enum al_rope_kind */
    float factor;         /* scaling factor F (> 0; unused for AL_ROPE_NONE) */
    int original_seq_len; /* T0, YaRN's trained length L */
} al_rope;

/* Everything a variant may read about the model it lives in. */
typedef struct al_attn_shape {
    int d_model;          /* D */
    int n_head;           /* H, query heads */
    int d_head;           /* dh */
    int seq_len;          /* trained context length */
    int causal;           /* 1 unless the causal-mask ablation is on */
    float rope_base;      /* 10000 by default */
    float norm_eps;       /* RMSNorm epsilon, for variants with norms */
    double set[AL_MAX_SETTINGS]; /* settings, in the order of the variant's settings */
    /* Appended (after every member a plugin built earlier reads): the
     * layer's RoPE, rope.base == rope_base. A shape built by hand that
     * leaves it zeroed is plain full RoPE at rope_base (al_rope_of). */
    al_rope rope;
    /* Appended after rope (a plugin built before it reads the same prefix):
     * the training kernel of attention, enum al_attn_kernel (al_flash.h),
     * resolved from train.attention_kernel; 0, fused, in a shape built in
     * code. A variant hands it to al_attn_kernel_* and sizes its saved
     * activations by al_attn_kernel_saved_floats. */
    int attn_kernel;
} al_attn_shape;

/* How a parameter tensor is initialised. */
enum al_init {
    AL_INIT_NORMAL = 0,   /* normal(0, 0.02) */
    AL_INIT_RESID = 1,    /* normal(0, 0.02 / sqrt(2 * n_layer)): output projections */
    AL_INIT_ONES = 2,     /* norm weights */
    AL_INIT_ZEROS = 3,
    /* A state layer's per-head decay bias b (1-D, one per head): element j
     * of n is log(expm1(1 / tau_j)), tau_j = 4 * 64^(j / (n - 1)) tokens,
     * so that a = exp(-softplus(b)) = exp(-1 / tau_j) spans the decays
     * 0.78 .. 0.996 across heads (RetNet's multi-scale decays). */
    AL_INIT_DECAY = 4
};

/* The value AL_INIT_DECAY gives element j of n. */
static inline double al_init_decay_value(int j, int n)
{
    double tau = 4.0 * pow(64.0, n > 1 ? (double)j / (n - 1) : 0.5);
    return log(expm1(1.0 / tau));
}

/* One parameter tensor. Named without the layer prefix and without the
 * ".weight" suffix: "wq" becomes "blocks.{i}.attn.wq.weight". A 1-D tensor
 * has cols == 0. Weights are [out, in]. */
typedef struct al_param_spec {
    char name[32];
    int rows, cols;
    int init;             /* enum al_init */
} al_param_spec;

/* The KV cache of one layer. The core allocates it for a context length and
 * a storage dtype; the variant decides what one token's row holds
 * (kv_elems floats). Rows are converted on write and read (src/al_kvcache.h). */
typedef struct al_kv_cache al_kv_cache;

/* flags: backward() OVERWRITES dx and every dp[i] instead of adding to
 * them, so the core hands it unzeroed buffers and saves a pass over each.
 * Without it the core zeroes them before every backward(), so an
 * accumulating variant (the contract since version 1) stays correct. */
#define AL_VARIANT_WRITES_GRADS (1u << 0)

/* Name of the function a plugin shared object exports; it returns a table
 * terminated by NULL and writes the interface version it was built for. */
#define AL_PLUGIN_ENTRY "attnlab_plugin_variants"
#define AL_PLUGIN_EXPORT __attribute__((visibility("default")))

/* Ties a settings table to the enum that indexes it: one row per entry,
 * then the {NULL} row, or the build fails.
 *   enum { SET_WINDOW, SET_SINKS, N_SETTINGS };
 *   static const al_setting my_settings[] = {{"window", ...}, {"sinks", ...}, {NULL}};
 *   AL_SETTINGS_MATCH(my_settings, N_SETTINGS); */
#define AL_SETTINGS_MATCH(table, n)                                     \
    _Static_assert(sizeof(table) / sizeof((table)[0]) == (size_t)(n) + 1, \
                   #table ": one row per setting of the enum, then {NULL}")

/* Helpers for variants. */
static inline int al_set_int(const al_attn_shape *s, int i) { return (int)s->set[i]; }

#endif
