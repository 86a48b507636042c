/*
 * memory.c - memory estimates in checked arithmetic, and the memory a
 * process may use (al_memory.h).
 */
#include "al_memory.h"

#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#include "al_gemm.h"
#include "al_size.h"
#include "al_tensors.h"

/* A variant's reported float count, checked against the limit every
 * reported size has. */
static int reported(const al_variant *v, const char *what, size_t n, int B, int T, al_err *e)
{
    if (n <= AL_MAX_REPORTED_FLOATS) return 0;
    return al_errf(e, "model.attention: variant '%s' reports %zu %s floats for a batch of %d x "
                   "%d tokens, more than the limit of %llu", v->name, n, what, B, T,
                   (unsigned long long)AL_MAX_REPORTED_FLOATS);
}

#define mad al_size_mad

/* The same layout as al_model_reserve: per layer 4 (B,T,D) + 2 (B,T) +
 * 2 (B,T,F) + its variant's; then 4 (B,T,D) + 2 (B,T) + (B,T,V) + (B,T,F) +
 * the widest layer's scratch (the layers share it). Per item of the layer
 * cycle, so a stack of 10^8 layers costs no loop over them. */
/* Under model.kv_share the same sum layer by layer: a consumer saves
 * share_act_floats, and the group K/V gradient (B,T,kv_elems) of the widest
 * consumer lies after the scratch. (A loop over the layers: a consumer's
 * place depends on both cycles.) */
static int shared_act_floats(const al_model_config *c, int d_ff, int B, int T, size_t *total,
                             al_err *e)
{
    size_t BT = (size_t)B * (size_t)T, D = (size_t)c->d_model, F = (size_t)d_ff;
    size_t V = (size_t)c->vocab_size, scratch = 0, dkv = 0, layers = 0, tail, one;
    size_t width_layer = 4 * D + 2 + 2 * F, width_tail = 4 * D + 2 + V + F;
    for (int l = 0; l < c->n_layer; l++) {
        const al_variant *v;
        void *ctx = al_attn_ctx_of(c, l % al_config_n_attn(c), &v);
        int consumer = al_config_kv_consumer(c, l);
        size_t attn = consumer ? v->share->act_floats(ctx, B, T) : v->train->act_floats(ctx, B, T);
        size_t sc = v->train->scratch_floats(ctx, B, T);
        size_t kv = consumer ? v->decode->kv_elems(ctx) : 0;
        v->fini(ctx);
        if (reported(v, "activation", attn, B, T, e) || reported(v, "scratch", sc, B, T, e) ||
            reported(v, "kv", kv, 1, 1, e))
            return -1;
        scratch = sc > scratch ? sc : scratch;
        if (mad(BT, kv, 0, &one)) goto overflow;
        dkv = one > dkv ? one : dkv;
        if (mad(BT, width_layer, attn, &one) || al_size_add(layers, one, &layers))
            goto overflow;
    }
    if (mad(BT, width_tail, scratch, &tail) || al_size_add(tail, dkv, &tail) ||
        al_size_add(layers, tail, total) || *total > SIZE_MAX / sizeof(float))
        goto overflow;
    return 0;
overflow:
    return al_errf(e, "'train.batch_size' x 'model.seq_len' (%d x %d): the activations of "
                   "%d layers overflow %zu bytes", B, T, c->n_layer, SIZE_MAX);
}

int al_model_act_floats(const al_model_config *c, int d_ff, int B, int T, size_t *total,
                        al_err *e)
{
    if (c->kv_share > 1) return shared_act_floats(c, d_ff, B, T, total, e);
    size_t BT = (size_t)B * (size_t)T, D = (size_t)c->d_model, F = (size_t)d_ff;
    size_t V = (size_t)c->vocab_size, scratch = 0, cyc = 0, rest = 0, layers, tail;
    int n_items = al_config_n_attn(c);
    size_t width_layer = 4 * D + 2 + 2 * F, width_tail = 4 * D + 2 + V + F;   /* < 2^35 */
    for (int k = 0; k < n_items; k++) {
        const al_variant *v;
        void *ctx = al_attn_ctx_of(c, k, &v);
        size_t attn = v->train->act_floats(ctx, B, T), sc = v->train->scratch_floats(ctx, B, T);
        size_t one;
        v->fini(ctx);
        if (reported(v, "activation", attn, B, T, e) || reported(v, "scratch", sc, B, T, e))
            return -1;
        scratch = sc > scratch ? sc : scratch;
        if (mad(BT, width_layer, attn, &one) || al_size_add(cyc, one, &cyc))
            goto overflow;
        if (k < c->n_layer % n_items) rest += one;   /* <= cyc: no overflow */
    }
    if (mad((size_t)(c->n_layer / n_items), cyc, rest, &layers) ||
        mad(BT, width_tail, scratch, &tail) || al_size_add(layers, tail, total) ||
        *total > SIZE_MAX / sizeof(float))
        goto overflow;
    return 0;
overflow:
    return al_errf(e, "'train.batch_size' x 'model.seq_len' (%d x %d): the activations of "
                   "%d layers overflow %zu bytes", B, T, c->n_layer, SIZE_MAX);
}

#define sat_mul al_size_sat_mul
#define sat_add al_size_sat_add

uint64_t al_batch_bytes_lower(const al_model_config *c, int B, int T)
{
    uint64_t BT = (uint64_t)B * (uint64_t)T, D = (uint64_t)c->d_model;
    uint64_t F = (uint64_t)al_config_d_ff(c), V = (uint64_t)c->vocab_size;
    uint64_t layer = sat_mul(BT, 4 * D + 2 + 2 * F), tail = sat_mul(BT, 4 * D + 2 + V + F);
    return sat_mul(sat_add(sat_mul((uint64_t)c->n_layer, layer), tail), sizeof(float));
}

int al_train_estimate(const al_model_config *c, int B, int T, al_mem_estimate *m, al_err *e)
{
    size_t kv, acts;
    if (al_model_counts(c, &m->n_params, &kv, e) != 0) return -1;
    if (al_model_act_floats(c, al_config_d_ff(c), B, T, &acts, e) != 0) return -1;
    m->params = (uint64_t)m->n_params * 16 +   /* weights, gradients, AdamW m and v */
                ((uint64_t)c->n_layer * (4 + AL_MAX_ATTN_PARAMS) + 2) * sizeof(al_tensor);
    /* the activations, the model's token buffers and the loop's (in, tgt, w) */
    m->acts = (uint64_t)acts * sizeof(float) + (uint64_t)B * T * (2 * sizeof(int) + 12);
    m->total = m->params + m->acts;   /* each < 2^62: no overflow */
    return 0;
}

/* Bytes of address space in use (/proc/self/statm's first field). */
static uint64_t in_use(void)
{
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%lu", &pages) != 1) pages = 0;
    if (f) fclose(f);
    return (uint64_t)pages * (uint64_t)sysconf(_SC_PAGESIZE);
}

uint64_t al_memory_available(uint64_t max_memory, int threads, char *what, size_t n)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    uint64_t have = max_memory ? max_memory : pages > 0 && size > 0
                                              ? (uint64_t)pages * (uint64_t)size : UINT64_MAX;
    snprintf(what, n, "%s", max_memory ? "train.max_memory" : "the machine's memory");
    struct rlimit r;
    if (getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY) {
        /* a buffer for each worker and one for the calling thread (OpenBLAS maps
         * them on first use and spins forever when it cannot), and room for
         * the threads' stacks and malloc's arenas */
        uint64_t workers = threads > 1 ? (uint64_t)threads : 0;   /* and the caller */
        /* OpenBLAS's own threads, started when it loads, map their buffers
         * as they start: joined first, they are in in_use() on every run.
         * Read while they may still be starting, the figure moved by a
         * buffer from run to run, and advice read off a low one was refused
         * (or hung in OpenBLAS) on the next (CI, stop 50). */
        al_blas_threads_stop();
        uint64_t used = in_use() + (workers + 1) * AL_BLAS_BUFFER_BYTES +
                        workers * AL_THREAD_STACK_BYTES;
        uint64_t left = r.rlim_cur > used ? r.rlim_cur - used : 0;
        if (left < have) {
            have = left;
            snprintf(what, n, "what ulimit -v (%llu bytes) leaves beside OpenBLAS's buffers",
                     (unsigned long long)r.rlim_cur);
        }
    }
    return have;
}
