/*
 * report_rows.h - the analysis (struct al_report_analysis) and the rows it
 * is computed from: read by report_summary.c, computed by
 * report_analyze.c (with report_trend.c and report_rows.c), read by the
 * writers (report_md.c, report_configs.c, report_plot.c, report_stages.c,
 * report_eval.c, report_claims.c). Not a public interface: al_report.h is.
 *
 * A row is one trial of summary.csv. Trials are grouped into
 * configurations by the summary's `group` column (older summaries: `config`,
 * else the trial id without "_seedN"). Within a configuration each seed is
 * represented by one selected trial: the only one, or under sweep.select the
 * one with the best validation result (tuned-then-compared). Statistics are
 * over those selected trials, one per seed; paired differences pair them by
 * seed.
 *
 * Settings. Every column of the summary that is not one of the report's
 * own (report_summary.c) is a variant's setting (n_kv_head, d_latent, ...; older
 * summaries had n_kv_head, d_latent and d_rope for every trial): the report
 * carries them as written, in the summary's column order, without knowing
 * any variant or setting by name.
 */
#ifndef AL_REPORT_ROWS_H
#define AL_REPORT_ROWS_H

#include <math.h>
#include <string.h>

#include "al_csv.h"
#include "al_report.h"
#include "al_stats.h"
#include "al_sweep_spec.h"

#define DIR_LEN 4096
#define AL_SOLVED_ACCURACY 0.9   /* a recall task counts as solved from here */
/* A validation loss that fell more than this over the last quarter of
 * training (nats: the least-squares slope there times the quarter's steps,
 * mean over seeds) is "still improving": the ranking is then one of
 * learning speed. Per quarter of training, not per step, so that the verdict
 * does not change with the batch size or the number of steps alone. */
#define AL_STILL_IMPROVING_FALL 0.02
#define AL_SEEDS_NEEDED_CAP 10000

typedef struct row {
    const char *trial, *variant, *status, *reason, *tuned, *select_by;
    char config[256], group[256];
    double kv, params, params_to, n_layer, d_ff, seed;
    double kv_context, kv_at;   /* the whole cache at kv_context tokens (NaN: older summary) */
    double held;       /* the bytes it holds as the report compares them (al_report_held) */
    double tokens_per_step, train_loss, val_loss, best_val_loss, val_acc;
    double test_loss, test_acc, tok_s, wall_s, steps;
    /* the cost columns (docs/costs.md; NaN: an older summary) */
    double train_fpt, train_flops, decode_fpt, decode_bytes, intensity;
    double scaling_size, scaling_flops;   /* sweep.scaling's size index and budget (NaN: none) */
    const char *cpu, *blas_core, *threads;   /* where it ran ("" in older summaries) */
    const char *model;   /* the model's hash: equal for the same model ("": older summary) */
    const char *stage, *upstream;   /* its stage, and the trial it started from ("": none) */
    int causal;        /* 1, 0, or -1 when not given */
    int baseline;      /* the summary marks the baseline configuration's trials */
    int selected;      /* stands for its configuration and seed */
    double q;          /* its quality measure (the report's metric) */
} row;

typedef struct summary {
    al_csv t;
    int n;
    row *rows;         /* n, in the summary's order (row i is t's row i) */
    int n_set;         /* setting columns */
    int *set_col;      /* n_set column indices into t, in the summary's order */
    long held_context; /* the context of every row's kv_at, or 0: per token (al_report_held) */
} summary;

/* Setting k's name, and its cell in row w ("" when w's variant lacks it). */
static inline const char *al_report_setting_name(const summary *s, int k)
{
    return s->t.head[s->set_col[k]];
}

static inline const char *al_report_setting(const summary *s, const row *w, int k)
{
    return s->t.cells[w - s->rows][s->set_col[k]];
}

/* A configuration's numbers, one struct per section that reads them, so
 * that a section's code names what it depends on. Every one is filled by
 * the analysis (report_analyze.c); the writers only read them. */

/* Its quality over the selected trials: the configurations table,
 * configs.csv, the plots, the front. */
typedef struct group_quality {
    al_stat q, loss, acc;     /* the metric, loss and accuracy */
    al_stat val;              /* validation loss */
    double train_loss, tok_s; /* means */
} group_quality;

/* Paired against the baseline, by seed ("Paired differences"). */
typedef struct group_vs_base {
    al_stat delta;            /* the metric minus the baseline's */
    double p;                 /* two-sided p of its paired t test (NAN: < 2 pairs) */
    int resolved;             /* delta resolved after Holm over the family of comparisons
                                 with the baseline (sequential sweeps: by the rounds' rule) */
    int seeds_needed;         /* seeds for 80 % power at delta's mean and sd (0: none) */
} group_vs_base;

/* Recall tasks: seeds that reached AL_SOLVED_ACCURACY, and when. */
typedef struct group_solved {
    int seeds;                /* selected trials whose accuracy reached it */
    int only_base, only_this; /* seeds the baseline solved and this did not, and the other
                                 way round (paired) */
    double p;                 /* exact McNemar p of those (NAN: not a recall task, baseline) */
    int holm;                 /* solved counts differ after Holm over the family */
    double step;              /* median first eval step with accuracy >= 0.9 (NAN: none) */
    int step_n;               /* seeds that reached it */
} group_solved;

/* The costs a configuration's quality is plotted against, each plot with
 * its own Pareto front: bytes held (the trade-off plot, with the front's
 * resolution by seeds), bytes read per decoded token and training FLOPs
 * (report_plot.c). */
enum al_report_cost { AL_COST_HELD, AL_COST_READ, AL_COST_FLOPS, AL_REPORT_NCOSTS };

/* The bytes a trial's model holds to decode: every layer's cache and
 * state at the report context (kv_bytes_at_context) when every row of the
 * summary has it at one context, else (an older summary, or stages at
 * different lengths) its cache bytes per token, for every row alike (set
 * by al_report_summary_read). Per token is not what a model holds once a
 * layer is bounded: a state layer keeps 0 bytes per token and a fixed
 * state, a window stops growing, so a hybrid's place against mha moves
 * with the context (report.context). */
static inline double al_report_held(const row *w) { return w->held; }

/* A configuration's cost on axis k (NaN: the summary lacks it). */
static inline double al_report_cost_of(const row *w, int k)
{
    return k == AL_COST_HELD ? al_report_held(w)
         : k == AL_COST_READ ? w->decode_bytes : w->train_flops;
}

/* Its place on the Pareto front ("Pareto front", the trade-off plot). */
typedef struct group_front {
    int on;                   /* on the front (of the means) */
    int on_cost[AL_REPORT_NCOSTS];   /* on each cost's front (on_cost[AL_COST_HELD] == on) */
    int resolved;             /* its place on or off the front is beyond seed noise */
    int compared;             /* the comparisons that decide it (0: the cheapest front
                                 point, resolved from nothing: nothing to resolve) */
    char against[256];        /* else: the front configuration it is not resolved from */
} group_front;

/* "Has training ended?": the validation loss over the last quarter. */
typedef struct group_trend {
    double slope;             /* val loss per 100 steps, mean over seeds */
    double tail_fall;         /* -slope times the quarter's steps: nats, mean over seeds */
    int n;                    /* seeds in it */
} group_trend;

/* "Did the gaps move?": the gap to the baseline in validation loss, paired
 * by seed, at the first eval at or after 75 % of training (q) and at the
 * last one (end), and its change (end - q per seed): a gap that narrows is
 * partly one of learning speed. */
typedef struct group_gap {
    al_stat q, end, change;
    double q_step, end_step;  /* the steps of the first pair */
    int holm;                 /* the change is beyond noise, Holm over the family */
} group_gap;

typedef struct group {
    const row *first;
    int n, n_ok;              /* trials, and how many ended ok */
    int n_open;               /* seeds left out: a candidate has not finished */
    int is_base;
    int base;                 /* the index of the group it is compared with (its own when
                                 is_base): the baseline in its cell and, in a later stage
                                 with its own sweep.baseline, of its upstream configuration */
    const row *base_first;    /* that group's first row, which sorting does not move */
    group_quality quality;
    group_vs_base vs;
    group_solved solved;
    group_front front;
    group_trend trend;
    group_gap gap;
    char tuned[512];          /* under select: the values chosen and how often */
    char machine[512];        /* "cpu; core; threads" when its trials differ, else "" */
} group;

/* sweep.seeds: {min, max, until: resolved} (sweep.json), and where the
 * rounds stand: the sequential seeds decision. */
typedef struct report_rounds {
    int on;
    al_seq_plan plan;
    int looks;                /* looks the data reaches */
    int done;                 /* every comparison resolved, or the last look taken */
} report_rounds;

/* What sweep.json says of the sweep (absent: the directory's name alone). */
typedef struct report_marker {
    char name[256], file[DIR_LEN], description[512];
    char sets[2048];          /* " --set 'k=v'" for each */
    int n_claims;             /* sweep.claims (report_claims.c) */
    al_sweep_claim claims[AL_SWEEP_MAX_CLAIMS];
} report_marker;

/* The analysis: everything the report shows, computed without writing a
 * file (al_report_analyze). Owns sm and g. */
struct al_report_analysis {
    char dir[DIR_LEN];
    summary sm;
    group *g;                 /* n_groups, largest cache first (the tables show them
                                 cheapest first: al_report_table_order) */
    int n_groups, n_front, n_ok;
    int use_acc;              /* the metric is accuracy (every configuration has one) */
    int use_test;             /* ... on the test split (else validation: no test split) */
    int any_select;
    char metric[64];          /* "test loss", "test accuracy", "val loss", ... */
    report_marker mk;
    report_rounds seq;
    struct scaling_analysis *scaling;   /* sweep.scaling's fits (report_scaling.h), or NULL */
    struct al_report_files *files;      /* what the writers opened (report_files.h) */
};

/* report_summary.c: DIR/summary.csv into s (-1 with e naming file:line when
 * it is missing or malformed; free s with al_report_summary_free either
 * way), and DIR/sweep.json into mk and seq (absent or unreadable: the
 * directory's name, no claims, no rounds). */
int al_report_summary_read(const char *dir, summary *s, al_err *e);
void al_report_summary_free(summary *s);
void al_report_read_marker(const char *dir, report_marker *mk, report_rounds *seq);

/* report_configs.c: configs.csv, atomically. */
int al_report_write_configs(const al_report_analysis *A, al_err *e);

/* report_rows.c: the pairs by seed every paired comparison uses: rows
 * ia[k] of a and ib[k] of b, both selected, with the same (not NaN) seed;
 * ia and ib hold A->sm.n; returns the number of pairs. */
int al_report_seed_pairs(const al_report_analysis *A, const group *a, const group *b, int *ia,
                         int *ib);
/* a's metric minus b's, paired by seed over the seeds both have. */
void al_report_paired(const al_report_analysis *A, const group *a, const group *b, al_stat *d);
/* ... and whether each solved the task (accuracy >= AL_SOLVED_ACCURACY),
 * paired the same way: *only_a seeds a solved and b did not, *only_b the
 * other way round. */
void al_report_solved_pairs(const al_report_analysis *A, const group *a, const group *b,
                            int *only_a, int *only_b);

static inline int al_report_still_improving(const group_trend *t)
{
    return t->n && t->tail_fall > AL_STILL_IMPROVING_FALL;
}

/* Drawn and on the front: not an unmasked model (its loss is not
 * comparable), and one with a mean. */
static inline int al_report_drawable(const group *g)
{
    return g->first->causal != 0 && !isnan(g->quality.q.mean);
}

static inline int al_report_row_ok(const row *w)
{
    return w->status[0] == 'o' && w->status[1] == 'k' && !w->status[2];
}

/* A trial a per-checkpoint table counts: ended ok and, in a tuned sweep,
 * the learning rate selected. */
static inline int al_report_row_counts(const row *w) { return al_report_row_ok(w) && w->selected; }

/* The context every bytes-held figure is at, or 0: per token. */
static inline long al_report_held_context(const al_report_analysis *A)
{
    return A->sm.held_context;
}

/* Baselines in the report: 1, or more where a later stage has its own
 * sweep.baseline or sweep.scaling marks one per cell (group.base). */
static inline int al_report_n_bases(const al_report_analysis *A)
{
    int n = 0;
    for (int k = 0; k < A->n_groups; k++) n += A->g[k].is_base;
    return n;
}

/* A paired table's row name: g's, and " (vs BASE)" when the report has
 * more than one baseline. */
static inline const char *al_report_vs_name(const al_report_analysis *A, const group *g,
                                            char *buf, size_t n)
{
    /* two writes, so that a buffer shorter than both names cuts the second
     * (as -Wformat-truncation reads it, no single call can overflow) */
    size_t len = (size_t)snprintf(buf, n, "%s", g->first->group);
    if (al_report_n_bases(A) > 1 && len < n)
        snprintf(buf + len, n - len, " (vs %s)", A->g[g->base].first->group);
    return buf;
}

/* The index of w's group in A (its `group` name), or -1. */
static inline int al_report_group_of(const al_report_analysis *A, const row *w)
{
    for (int k = 0; k < A->n_groups; k++)
        if (strcmp(A->g[k].first->group, w->group) == 0) return k;
    return -1;
}

#endif
