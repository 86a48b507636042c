/*
 * report_rows.h - the report's working state, shared by report.c (reads
 * summary.csv, groups, statistics, report.md, configs.csv), report_plot.c
 * (the pictures) and report_stages.c (a staged sweep's section). Not a
 * public interface: al_report.h is.
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
 * own (report.c) is a variant's setting (n_kv_head, d_latent, ...; older
 * summaries had n_kv_head, d_latent and d_rope for every trial): the report
 * carries them as written, in the summary's column order, without knowing
 * any variant or setting by name.
 */
#ifndef AL_REPORT_ROWS_H
#define AL_REPORT_ROWS_H

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
    double tokens_per_step, train_loss, val_loss, best_val_loss, val_acc;
    double test_loss, test_acc, tok_s, wall_s, steps;
    const char *cpu, *blas_core, *threads;   /* where it ran ("" in older summaries) */
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

typedef struct group {
    const row *first;
    int n, n_ok;              /* trials, and how many ended ok */
    int n_open;               /* seeds left out: a candidate has not finished */
    al_stat q, loss, acc;     /* the metric, loss and accuracy over the selected trials */
    al_stat val;              /* validation loss over them */
    double train_loss, tok_s;
    int is_base;
    al_stat delta;            /* the metric minus the baseline's, paired by seed */
    int front;                /* on the Pareto front (of the means) */
    int resolved;             /* its place on or off the front is beyond seed noise */
    char against[256];        /* else: the front configuration it is not resolved from */
    int solved;               /* seeds whose accuracy reached AL_SOLVED_ACCURACY */
    char tuned[512];          /* under select: the values chosen and how often */
    double p;                 /* two-sided p of the paired t test of delta (NAN: < 2 pairs) */
    int resolved_holm;        /* delta resolved after Holm over the family of comparisons
                                 with the baseline (sequential sweeps: by the rounds' rule) */
    int seeds_needed;         /* seeds for 80 % power at delta's mean and sd (0: none) */
    double slope;             /* val loss per 100 steps over the last quarter, mean over seeds */
    double tail_fall;         /* -slope times the quarter's steps: nats, mean over seeds */
    int slope_n;              /* seeds in it */
    int solved_only_base;     /* seeds the baseline solved and this did not (paired) */
    int solved_only_this;     /* ... and the other way round */
    double solved_p;          /* exact McNemar p of those (NAN: not a recall task, baseline) */
    int solved_holm;          /* solved counts differ after Holm over the family */
    double solved_step;       /* median first eval step with accuracy >= 0.9 (NAN: none) */
    /* The gap to the baseline in validation loss, paired by seed, at the
     * first eval at or after 75 % of training (gap_q) and at the last one
     * (gap_end), and its change between the two (gap_end - gap_q per seed):
     * a gap that narrows is partly one of learning speed. */
    al_stat gap_q, gap_end, gap_change;
    double gap_q_step, gap_end_step;   /* the steps of the first pair */
    int gap_holm;             /* the change is beyond noise, Holm over the family */
    int solved_step_n;        /* seeds that reached it */
    char machine[512];        /* "cpu; core; threads" when its trials differ, else "" */
} group;

typedef struct report {
    const char *dir;
    summary sm;
    group *g;
    int n_groups, n_front, n_ok, plots;
    int use_acc;              /* the metric is accuracy (every configuration has one) */
    int use_test;             /* ... on the test split (else validation: no test split) */
    int any_select;
    char metric[64];          /* "test loss", "test accuracy", "val loss", ... */
    char name[256], file[DIR_LEN], description[512];
    char sets[2048];          /* " --set 'k=v'" for each, from sweep.json */
    int n_claims;             /* sweep.claims, from sweep.json (report_claims.c) */
    al_sweep_claim claims[AL_SWEEP_MAX_CLAIMS];
    int seq_on;               /* sweep.seeds: {min, max, until: resolved} (sweep.json) */
    al_seq_plan seq;
    int seq_looks;            /* looks the data reaches */
    int seq_done;             /* every comparison resolved, or the last look taken */
} report;

/* report_configs.c: configs.csv, atomically. */
int al_report_write_configs(const report *R, al_err *e);

/* report_rows.c: the pairs by seed every paired comparison uses: rows
 * ia[k] of a and ib[k] of b, both selected, with the same (not NaN) seed;
 * ia and ib hold R->sm.n; returns the number of pairs. */
int al_report_seed_pairs(const report *R, const group *a, const group *b, int *ia, int *ib);
/* a's metric minus b's, paired by seed over the seeds both have. */
void al_report_paired(const report *R, const group *a, const group *b, al_stat *d);
/* ... and whether each solved the task (accuracy >= AL_SOLVED_ACCURACY),
 * paired the same way: *only_a seeds a solved and b did not, *only_b the
 * other way round. */
void al_report_solved_pairs(const report *R, const group *a, const group *b, int *only_a,
                            int *only_b);

static inline int al_report_still_improving(const group *g)
{
    return g->slope_n && g->tail_fall > AL_STILL_IMPROVING_FALL;
}

static inline int al_report_row_ok(const row *w) { return w->status[0] == 'o' && w->status[1] == 'k' && !w->status[2]; }

#endif
