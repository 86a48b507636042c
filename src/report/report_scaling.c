/*
 * report_scaling.c - the analysis of a sweep.scaling grid (report_scaling.h):
 * per design the grid of losses, its compute frontier, the power-law fit
 * with seed-bootstrap intervals, the gap to the baseline design (paired by
 * seed) measured and fitted, its extrapolation, the held-out check and the
 * verdict. The numerics are al_fit.h's; this file only gathers and rules.
 */
#include "report_scaling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "al_stats.h"

/* ------------------------------------------------------------ gathering */

/* A label part sweep.scaling added: "size<digits>" or "flops<number>". */
static int scaling_part(const char *p, size_t n)
{
    if (n > 4 && strncmp(p, "size", 4) == 0 && strspn(p + 4, "0123456789") == n - 4) return 1;
    return n > 5 && strncmp(p, "flops", 5) == 0 && strchr("0123456789.", p[5]) != NULL;
}

/* "mqa_size1_flops8.0e+12" -> "mqa": the group without its size and budget. */
static void design_name(char *out, size_t n, const char *group)
{
    size_t len = 0;
    out[0] = 0;
    for (const char *p = group; *p;) {
        size_t k = strcspn(p, "_");
        if (!scaling_part(p, k) && len + k + 2 < n) {
            if (len) out[len++] = '_';
            memcpy(out + len, p, k);
            out[len += k] = 0;
        }
        p += k + (p[k] == '_');
    }
    if (!out[0]) snprintf(out, n, "base");
}

static int scaling_row(const row *w)
{
    return al_report_row_ok(w) && w->selected && w->scaling_size >= 0 && w->scaling_flops > 0;
}

/* v into the sorted set xs[0..*n) (capacity cap); its index, -1 when full. */
static int set_add(double *xs, int *n, int cap, double v)
{
    int i = 0;
    while (i < *n && xs[i] < v) i++;
    if (i < *n && xs[i] == v) return i;
    if (*n == cap) return -1;
    memmove(xs + i + 1, xs + i, (size_t)(*n - i) * sizeof *xs);
    xs[i] = v;
    (*n)++;
    return i;
}

static int set_find(const double *xs, int n, double v)
{
    for (int i = 0; i < n; i++)
        if (xs[i] == v) return i;
    return -1;
}

static int design_of(scaling_analysis *S, const row *w)
{
    char name[256];
    design_name(name, sizeof name, w->group);
    for (int k = 0; k < S->n_design; k++)
        if (strcmp(S->d[k].name, name) == 0) return k;
    if (S->n_design == AL_SCALING_MAX_DESIGNS) return -1;
    scaling_design *d = &S->d[S->n_design];
    snprintf(d->name, sizeof d->name, "%s", name);
    d->is_base = w->baseline;
    return S->n_design++;
}

/* The axes (designs, sizes, budgets, seeds); 0, or -1 with S->skipped
 * saying which limit a grid passed. */
static int collect_axes(const al_report_analysis *A, scaling_analysis *S)
{
    for (int i = 0; i < A->sm.n; i++) {
        const row *w = &A->sm.rows[i];
        if (!scaling_row(w)) continue;
        if (design_of(S, w) < 0 || w->scaling_size >= AL_SCALING_MAX_SIZES ||
            set_add(S->C, &S->n_budget, AL_SCALING_MAX_BUDGETS, w->scaling_flops) < 0 ||
            set_add(S->seed, &S->n_seed, AL_SCALING_MAX_SEEDS, w->seed) < 0) {
            snprintf(S->skipped, sizeof S->skipped, "the grid is larger than the report "
                     "fits (at most %d designs, %d sizes, %d budgets, %d seeds)",
                     AL_SCALING_MAX_DESIGNS, AL_SCALING_MAX_SIZES, AL_SCALING_MAX_BUDGETS,
                     AL_SCALING_MAX_SEEDS);
            return -1;
        }
        if ((int)w->scaling_size + 1 > S->n_size) S->n_size = (int)w->scaling_size + 1;
    }
    return 0;
}

static double row_loss(const al_report_analysis *A, const row *w)
{
    return A->use_test && isfinite(w->test_loss) ? w->test_loss : w->val_loss;
}

static void fill_losses(const al_report_analysis *A, scaling_analysis *S)
{
    size_t cells = (size_t)S->n_size * S->n_budget * S->n_seed;
    for (int k = 0; k < S->n_design; k++) {
        S->d[k].loss = al_malloc(cells * sizeof(double));
        for (size_t c = 0; c < cells; c++) S->d[k].loss[c] = NAN;
    }
    for (int i = 0; i < A->sm.n; i++) {
        const row *w = &A->sm.rows[i];
        if (!scaling_row(w)) continue;
        scaling_design *d = &S->d[design_of(S, w)];
        int b = set_find(S->C, S->n_budget, w->scaling_flops);
        int k = set_find(S->seed, S->n_seed, w->seed);
        d->loss[((size_t)w->scaling_size * S->n_budget + b) * S->n_seed + k] = row_loss(A, w);
    }
}

/* ------------------------------------------------------------ per design */

static al_scaling_grid grid_of(const scaling_analysis *S, const scaling_design *d)
{
    return (al_scaling_grid){S->n_size, S->n_budget, S->n_seed, S->C, d->loss};
}

/* Seed means and t intervals of every (size, budget), and which size is
 * the frontier at each budget. */
static void cell_stats(const scaling_analysis *S, scaling_design *d)
{
    for (int s = 0; s < S->n_size; s++)
        for (int b = 0; b < S->n_budget; b++) {
            const double *v = d->loss + ((size_t)s * S->n_budget + b) * S->n_seed;
            double x[AL_SCALING_MAX_SEEDS];
            int n = 0;
            for (int k = 0; k < S->n_seed; k++)
                if (isfinite(v[k])) x[n++] = v[k];
            al_stat st;
            al_stat_of(x, n, &st);
            d->mean[s][b] = n ? st.mean : NAN;
            d->ci95[s][b] = n > 1 ? st.ci95 : 0;
        }
    al_scaling_grid g = grid_of(S, d);
    d->n_seed = al_scaling_seeds_present(&g);
    al_scaling_frontier(&g, NULL, S->n_seed, d->front);
    for (int b = 0; b < S->n_budget; b++) {
        d->front_size[b] = -1;
        for (int s = 0; s < S->n_size && d->front_size[b] < 0; s++)
            if (d->mean[s][b] == d->front[b]) d->front_size[b] = s;
    }
}

static void fit_design(const scaling_analysis *S, scaling_design *d, uint64_t rng)
{
    double cmax = S->C[S->n_budget - 1], at[3] = {cmax, 10 * cmax, 100 * cmax};
    al_scaling_grid g = grid_of(S, d);
    d->fit_ok = S->enough &&
                al_scaling_fit_design(&g, -1, at, 3, AL_SCALING_BOOT, rng, &d->fit) == 0;
    if (S->enough) al_scaling_heldout(&g, AL_SCALING_BOOT, rng, &d->ho);
    d->ho_failed = d->ho.ok && !d->ho.inside;
}

/* The gap to the baseline: measured on the frontiers, fitted with its
 * intervals at C_max, 10x, 100x and along the band, and its change. */
static void gap_design(const scaling_analysis *S, scaling_design *d, const scaling_design *base,
                       uint64_t rng)
{
    double cmax = S->C[S->n_budget - 1], at[3] = {cmax, 10 * cmax, 100 * cmax};
    for (int b = 0; b < S->n_budget; b++) d->gap_meas[b] = d->front[b] - base->front[b];
    if (!d->fit_ok || !base->fit_ok) return;
    al_scaling_grid g = grid_of(S, d), gb = grid_of(S, base);
    if (al_scaling_gap(&g, &gb, -1, at, 3, AL_SCALING_BOOT, rng, d->gap) ||
        al_scaling_gap_change(&g, &gb, cmax, 10 * cmax, AL_SCALING_BOOT, rng, &d->change))
        return;
    for (int i = 0; i < AL_SCALING_BAND; i += AL_SCALING_MAX_AT) {
        int n = AL_SCALING_BAND - i < AL_SCALING_MAX_AT ? AL_SCALING_BAND - i : AL_SCALING_MAX_AT;
        al_scaling_gap(&g, &gb, -1, S->band_C + i, n, AL_SCALING_BOOT, rng, d->band + i);
    }
}

/* The rule (docs/scaling.md): the change of the gap from C_max to 10 C_max,
 * signed so that positive is away from zero, decides when its whole
 * interval lies on one side; "holds" when it lies within
 * AL_SCALING_HOLD_NATS either way; otherwise it cannot be told. */
static int verdict_of(const scaling_analysis *S, const scaling_design *d)
{
    if (d->is_base) return AL_SCALING_BASELINE;
    if (!S->enough || !d->fit_ok || !isfinite(d->change.lo) || !isfinite(d->gap[0].est))
        return AL_SCALING_CANNOT_TELL;
    double sg = d->gap[0].est < 0 ? -1 : 1;
    double lo = fmin(sg * d->change.lo, sg * d->change.hi);
    double hi = fmax(sg * d->change.lo, sg * d->change.hi);
    if (hi < 0) return AL_SCALING_CLOSES;
    if (lo > 0) return AL_SCALING_WIDENS;
    if (lo >= -AL_SCALING_HOLD_NATS && hi <= AL_SCALING_HOLD_NATS) return AL_SCALING_HOLDS;
    return AL_SCALING_CANNOT_TELL;
}

/* ------------------------------------------------------------ public */

const char *al_report_scaling_verdict_name(int verdict)
{
    static const char *const names[] = {"cannot tell", "closes", "holds", "widens",
                                        "baseline"};
    return verdict >= 0 && verdict <= AL_SCALING_BASELINE ? names[verdict] : "?";
}

/* The baseline first in the tables: the design the summary marks, else
 * the first. */
static void put_base_first(scaling_analysis *S)
{
    int b = 0;
    while (b < S->n_design && !S->d[b].is_base) b++;
    if (b == S->n_design) b = 0;
    scaling_design t = S->d[b];
    memmove(S->d + 1, S->d, (size_t)b * sizeof t);
    S->d[0] = t;
    for (int k = 0; k < S->n_design; k++) S->d[k].is_base = k == 0;
    S->base = 0;
}

scaling_analysis *al_report_scaling_analyze(const al_report_analysis *A)
{
    scaling_analysis *S = al_calloc(1, sizeof *S);
    snprintf(S->metric, sizeof S->metric, "%s", A->use_test ? "test loss" : "val loss");
    if (collect_axes(A, S) || S->n_design == 0) {
        if (!S->skipped[0]) return al_report_scaling_free(S), NULL;
        S->n_design = 0;
        return S;
    }
    S->enough = S->n_budget >= AL_SCALING_MIN_BUDGETS;
    double lo = log(S->C[0]), hi = log(100 * S->C[S->n_budget - 1]);
    for (int i = 0; i < AL_SCALING_BAND; i++)
        S->band_C[i] = exp(lo + (hi - lo) * i / (AL_SCALING_BAND - 1));
    fill_losses(A, S);
    put_base_first(S);
    /* one rng seed for every design: the resampled seeds are the same for
     * all, so every interval is paired across designs */
    uint64_t rng = 0x5ca11e5ULL;
    for (int k = 0; k < S->n_design; k++) cell_stats(S, &S->d[k]), fit_design(S, &S->d[k], rng);
    for (int k = 0; k < S->n_design; k++) {
        scaling_design *d = &S->d[k];
        if (!d->is_base) gap_design(S, d, &S->d[S->base], rng);
        d->verdict = verdict_of(S, d);
        d->base_ho_failed = !d->is_base && S->d[S->base].ho_failed;
    }
    return S;
}

void al_report_scaling_free(scaling_analysis *S)
{
    if (!S) return;
    for (int k = 0; k < S->n_design; k++) free(S->d[k].loss);
    free(S);
}
