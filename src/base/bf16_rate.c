/*
 * bf16_rate.c - whether bf16 products pay on this CPU (al_bf16.h): bf16
 * and f32 product rates measured on the run's own shape class, cached per
 * CPU model and class.
 *
 * Why: without AMX, an Intel core's bf16 dot products (vdpbf16ps) have
 * the peak of its f32 FMAs, and oneDNN's bf16 matmul then runs at about
 * half of OpenBLAS's SkylakeX sgemm; AMD Zen 4/5 run vdpbf16ps at twice
 * the f32 rate. A researcher who asks for bf16 for speed should hear when
 * it cannot give any.
 */
#include "al_bf16.h"
#include "al_gemm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int openblas_get_num_threads(void);
void openblas_set_num_threads(int n);

/* Measure for at least this long per precision (after one warm-up call). */
#define RATE_SECONDS 0.004

/* The class of a shape: each side rounded up to a power of two (at most
 * 4096), so runs of nearby shapes share a measurement. */
static int class_of(int n)
{
    int c = 8;
    while (c < n && c < 4096) c *= 2;
    return c;
}

/* The product itself, bf16 (oneDNN) or f32 (OpenBLAS): measured directly,
 * not through al_sgemm_here, which sends small products to f32. */
static void rate_product(int precision, int M, int N, int K, const float *A, const float *B,
                         float *C)
{
    if (precision == AL_PRECISION_BF16)
        al_bf16_gemm(CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, B, K, 0.0f, C, N);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, B, K, 0.0f, C,
                    N);
}

static double rate_once(int precision, int M, int N, int K, const float *A, const float *B,
                        float *C)
{
    rate_product(precision, M, N, K, A, B, C);
    double t0 = al_now(), t;
    long reps = 0;
    do {
        rate_product(precision, M, N, K, A, B, C);
        reps++;
    } while ((t = al_now() - t0) < RATE_SECONDS);
    return 2.0 * M * N * K * reps / t / 1e9;
}

/* The cache: one line per (CPU model, class): "M N K bf16 f32 model". */
static void cache_path(char *out, size_t n)
{
    const char *dir = getenv("ATTNLAB_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (dir && *dir) snprintf(out, n, "%s/bf16-rates", dir);
    else if (xdg && *xdg) snprintf(out, n, "%s/attnlab/bf16-rates", xdg);
    else if (home && *home) snprintf(out, n, "%s/.cache/attnlab/bf16-rates", home);
    else out[0] = 0;
}

static int cache_find(const char *text, const char *cpu, al_bf16_rates *r)
{
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        int M, N, K, at = 0;
        double b, f;
        if (sscanf(l, "%d %d %d %lf %lf %n", &M, &N, &K, &b, &f, &at) != 5 || !at) continue;
        size_t len = strcspn(l + at, "\n");
        if (M == r->M && N == r->N && K == r->K && len == strlen(cpu) &&
            !strncmp(l + at, cpu, len) && b > 0 && f > 0) {
            r->bf16 = b, r->f32 = f, r->cached = 1;
            return 1;
        }
    }
    return 0;
}

static void cache_add(const char *path, const char *old, const char *cpu, const al_bf16_rates *r)
{
    char dir[4096], line[512];
    al_err ignore;
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) return;
    *slash = 0;
    if (al_mkdirs(dir, &ignore) != 0) return;   /* a cache is a convenience: no error */
    int n = snprintf(line, sizeof line, "%d %d %d %.3f %.3f %s\n", r->M, r->N, r->K, r->bf16,
                     r->f32, cpu);
    size_t lo = old ? strlen(old) : 0;
    char *text = al_malloc(lo + (size_t)n + 1);
    if (lo) memcpy(text, old, lo);
    memcpy(text + lo, line, (size_t)n + 1);
    al_write_atomic(path, text, lo + (size_t)n, &ignore);
    free(text);
}

/* AL_BF16_RATES="B,F" stands for a measurement (tests of the note). */
static int rates_from_env(al_bf16_rates *r)
{
    const char *v = getenv("AL_BF16_RATES");
    return v && sscanf(v, "%lf,%lf", &r->bf16, &r->f32) == 2;
}

void al_bf16_rates_of(int M, int N, int K, al_bf16_rates *r)
{
    char cpu[128], path[4200], *text = NULL;
    size_t len;
    al_err ignore;
    memset(r, 0, sizeof *r);
    r->M = class_of(M), r->N = class_of(N), r->K = class_of(K);
    if (rates_from_env(r)) return;
    al_cpu_model(cpu, sizeof cpu);
    cache_path(path, sizeof path);
    if (path[0] && al_read_file(path, &text, &len, &ignore) == 0 && cache_find(text, cpu, r)) {
        free(text);
        return;
    }
    float *A = al_calloc((size_t)r->M * r->K, sizeof(float));
    float *B = al_calloc((size_t)r->N * r->K, sizeof(float));
    float *C = al_malloc((size_t)r->M * r->N * sizeof(float));
    for (size_t i = 0; i < (size_t)r->M * r->K; i++) A[i] = (float)((i * 7919) % 97) / 97.0f;
    for (size_t i = 0; i < (size_t)r->N * r->K; i++) B[i] = (float)((i * 104729) % 89) / 89.0f;
    /* one thread each, as the pool runs both (oneDNN's team is one thread) */
    int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
    /* alternating, the best of three rounds each: another process taking
     * the core can only lower a round, and it should not decide a note */
    for (int round = 0; round < 3; round++) {
        r->f32 = fmax(r->f32, rate_once(AL_PRECISION_F32, r->M, r->N, r->K, A, B, C));
        r->bf16 = fmax(r->bf16, rate_once(AL_PRECISION_BF16, r->M, r->N, r->K, A, B, C));
    }
    openblas_set_num_threads(blas_threads);
    free(A), free(B), free(C);
    if (path[0]) cache_add(path, text, cpu, r);
    free(text);
}

int al_bf16_pays(const al_bf16_rates *r) { return r->bf16 > r->f32; }

void al_bf16_note(const al_bf16_rates *r, char *out, size_t n)
{
    snprintf(out, n, "attnlab: bf16 products are no faster than f32 on this CPU (%.1f against "
             "%.1f GFLOP/s for m %d, n %d, k %d, one thread%s); going on in bf16 as asked "
             "(double-rate bf16 needs AMD Zen 4/5 or Intel AMX)", r->bf16, r->f32, r->M, r->N,
             r->K, r->cached ? ", measured before" : "");
}
