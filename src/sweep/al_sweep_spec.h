/*
 * al_sweep_spec.h - a sweep: the experiment file's `sweep` mapping expanded
 * into trials, each a fully decoded al_config with a stable readable id.
 *
 *   sweep:
 *     name: kv_tradeoff            # results/<name>/ (default: the file's name)
 *     seeds: [1, 2, 3]             # or a count (3 = seeds 1, 2, 3); sets train.seed
 *                                  # or {min: 3, max: 10, until: resolved}: seeds
 *                                  # 1..10 trained in rounds (step: 1 seed a round)
 *                                  # until the report resolves every comparison
 *                                  # with the baseline (al_sweep_seq_trials)
 *     grid:                        # Cartesian product, first axis outermost
 *       model.attention:           # a mapping value replaces the whole subtree
 *         - {variant: mha}
 *         - {variant: gqa, n_kv_head: 2}
 *       train.lr: [1.0e-3, 3.0e-3]
 *     zip:                         # lockstep axes (equal lengths); a list of
 *       model.d_model: [64, 128]   # such mappings gives several zip groups
 *       model.n_head: [2, 4]
 *     exclude:                     # drop trials matching every entry of one item
 *       - {model.attention.variant: gqa, train.lr: 3.0e-3}
 *     select:                      # tuned-then-compared: per configuration and
 *       best_of: [train.lr]        # seed the report keeps the value of these axes
 *       by: val_loss               # with the best validation result
 *     baseline: {model.attention: {variant: mha}}   # paired differences against
 *                                  # this configuration (default: the first)
 *     scaling:                     # compute scaling (sweep_scaling.c, docs/scaling.md):
 *       sizes: [{d_model: 64, n_layer: 2}, {d_model: 96, n_layer: 3}]   # `model` keys
 *       flops: [2.0e+12, 8.0e+12]   # training budgets: each trial's train.flops
 *     claims:                      # published claims the report checks (sweep_claims.c)
 *       - {claim: "GTA: GQA's quality at half its cache", config: gta-kv4,
 *          versus: gqa-kv4, expect: no_worse, margin: 0.01}
 *
 * Expansion order: seeds outermost (a sweep cut short has seen every
 * configuration once), then the grid axes in file order, then
 * sweep.scaling's sizes and budgets, then zip groups. Under sweep.scaling
 * every trial is labelled by its size's index and budget
 * ("mqa_size1_flops8.0e+12_seed2") even when there is one of either, and
 * the baseline is a design (every size and budget of it).
 * Every trial's tree (the file, --set edits, the trial's values) goes
 * through al_config_decode, so every error names file:line:col: a value's
 * own position when it came from the sweep mapping.
 *
 * Configurations. Trials that differ only in their seed, and in the values
 * of the select axes, form one configuration (its `group` label, built
 * from the other axes); the report aggregates over its seeds.
 *
 * Identity. A trial's label is built from the values that vary, e.g.
 * "gqa-kv2_lr0.003_seed1". Its hash is FNV-1a over the resolved config
 * written as YAML, with train.threads and train.checkpoint_every left out
 * (how a trial is run, not what it is), and report.* (how it is shown).
 * Its id is the label, or "label-HASH" where the label alone would be
 * ambiguous: two trials of the sweep share it, or
 * the results directory already holds a trial of that label with another
 * hash (al_sweep_assign_ids, al_sweep_results.h). So an edited file never
 * reuses a result.
 * A train.init_from file's SHA-256 is part of the hash: another checkpoint
 * is another run.
 *
 * Stages (sweep_stage.c): instead of `sweep`, a list of stages whose later
 * members start from an earlier stage's checkpoints, converted:
 *
 *   stages:
 *     - name: base                 # the first stage: the file's config and
 *       sweep: {seeds: 3, grid: {model.attention: [...]}}   # its own sweep
 *     - name: uptrain
 *       from: base                 # an earlier stage
 *       where: {model.attention.variant: mha}   # which of its trials (default all)
 *       convert:                   # an axis each: model.attention, train.init_convert
 *         to: [{variant: gqa, n_kv_head: 2}, mqa]
 *         method: [mean, random]
 *       steps: [5%, 10%]           # axis train.steps: N, or P% of the upstream run's
 *       train: {warmup_steps: 5}   # data/model/train edits of the upstream config
 *       sweep: {grid: ..., zip: ..., exclude: ...}   # more axes; seeds are inherited
 *
 * A stage with `from` makes, for each trial u of that stage (that `where`
 * matches), one trial per combination of its axes, on u's config (its seed
 * included) with those edits; the trial starts from u's model.safetensors
 * (train.init_from, set by the worker), converted by train.init_convert.
 * Its hash includes u's hash, so a changed base gives new ids downstream.
 * Labels are "<stage>_[<u's configuration>_]<its values>_seed<N>" (u's part
 * only when the stage reads several configurations). Trials are listed
 * stage by stage; the runner starts one only once its upstream has ended
 * ok. The first stage may have `baseline`; `select` is not available.
 */
#ifndef AL_SWEEP_SPEC_H
#define AL_SWEEP_SPEC_H

#include <stdint.h>
#include "al_config.h"
#include "al_stats.h"
#include "al_yaml.h"

#define AL_SWEEP_MAX_AXES 32
/* At most this many trials: each holds a whole decoded config (~12 KB);
 * 100000 took 1.2 GB (and, when trials were named by comparing every
 * pair, most of an hour) to expand. Ten thousand expand in about a second
 * and are more than a day of CPU even at 10 s a trial. */
#define AL_SWEEP_MAX_TRIALS 10000
#define AL_SWEEP_ID_LEN 160

typedef struct al_sweep_axis {
    char path[256];           /* dotted key path */
    const al_node *key;       /* the axis (its values) in the sweep's tree */
    int key_line, key_col;    /* where the path is written */
    int n;                    /* number of values */
    int group;                /* -1: a grid axis; else its zip group */
    int scaling;              /* enum al_scaling_axis: sweep.scaling's sizes or budgets */
} al_sweep_axis;

/* sweep.scaling's two axes (sweep_scaling.c): a size sets each of its keys
 * under `model`, a budget sets train.flops. */
enum al_scaling_axis { AL_SCALING_NONE = 0, AL_SCALING_SIZE, AL_SCALING_FLOPS };

typedef struct al_sweep_trial {
    int index;                         /* in expansion order: the worker's --index */
    int stage;                         /* index into al_sweep.stages (0 without stages) */
    int upstream;                      /* the trial whose checkpoint it starts from, or -1 */
    uint64_t seed;                     /* train.seed */
    char label[AL_SWEEP_ID_LEN];       /* readable, from the varying values */
    char config[AL_SWEEP_ID_LEN];      /* the label without the seed */
    char group[AL_SWEEP_ID_LEN];       /* the configuration: config without the select axes */
    char tuned[AL_SWEEP_ID_LEN];       /* the select axes' values ("lr0.001"), or "" */
    uint64_t group_key;                /* equal for the trials of one configuration */
    uint64_t design_key;               /* group_key without sweep.scaling's axes: equal
                                          for one design at every size and budget */
    int baseline;                      /* 1: a trial of the baseline configuration (under
                                          sweep.scaling: of the baseline design) */
    int scaling_size;                  /* sweep.scaling: the size's index, else -1 */
    double scaling_flops;              /* ... and the budget (train.flops), else 0 */
    char id[AL_SWEEP_ID_LEN];          /* label or label-hash (al_sweep_assign_ids) */
    char hash[17];                     /* 16 hex digits of the resolved config */
    al_config cfg;                     /* decoded */
    size_t params, kv_elems_per_token; /* 0 when the data vocabulary is unknown */
    int kv_context;                    /* report.context, or model.seq_len */
    size_t kv_bytes_at_context;        /* f32, every layer's cache at kv_context */
    /* al_cost.h's figures (docs/costs.md): training at model.seq_len, one
     * decode step at kv_context (model.kv_dtype, batch 1) */
    double train_flops_per_token;
    double decode_flops_per_token, decode_bytes_per_token, arithmetic_intensity;
} al_sweep_trial;

/* The experiment file's top-level `eval` (sweep_eval.c): what the runner
 * scores each ok trial's checkpoint on after training (cmd/sweep_eval.c),
 * without retraining. Not part of any trial's identity.
 *
 *   eval:
 *     kv_dtypes: [f32, bf16, int8, int4]   # through the cache at each (default [f32])
 *     contexts: [256, 1024]                # window lengths (default: model.seq_len)
 *     by_position: true                    # loss per position bucket at each context
 *     buckets: 16                          # its buckets (default 16, at most the context)
 *     tokens: 16384                        # the first tokens of the test split scored
 *     passkey_lengths: [256, 512, 1024]    # passkey trials (data.source passkey): the
 *     passkey_depths: [0, 0.5]             # grid of score --passkey (defaults as its),
 *     passkey_examples: 20                 # on the test split of their filler
 *     kv_quant_residuals: [0, default]     # recall: int8 / int4 caches at each f32 residual
 *     mqar_examples: 200                   # recall: mqar trials' test examples
 *
 * A passkey trial gets the passkey grid only: its loss on plain text says
 * nothing of the task it learned. With kv_dtypes, kv_quant_residuals or
 * mqar_examples given, passkey and mqar trials also answer their examples
 * through each cache (<trial>/eval/recall.csv, recall_summary.csv; docs/
 * kv-quant-recall.md).
 */
#define AL_EVAL_MAX_DTYPES 8
#define AL_EVAL_MAX_CONTEXTS 8
#define AL_EVAL_DEFAULT_TOKENS 16384
#define AL_EVAL_DECODE_TOKENS 32         /* eval.decode.tokens default: steps timed */
#define AL_EVAL_DECODE_REPEATS 5         /* eval.decode.repeats default: the median's runs */
#define AL_EVAL_MQAR_EXAMPLES 200        /* eval.mqar_examples default (at most data.test_examples) */

typedef struct al_sweep_eval {
    int on;                              /* the file has `eval` */
    int n_dtypes, dtypes[AL_EVAL_MAX_DTYPES];       /* al_kv_dtype */
    int n_contexts, contexts[AL_EVAL_MAX_CONTEXTS]; /* 0: the trial's model.seq_len */
    int by_position, buckets;
    long tokens;
    int n_pk_lengths, pk_lengths[AL_EVAL_MAX_CONTEXTS];
    int n_pk_depths;
    double pk_depths[AL_EVAL_MAX_CONTEXTS];
    long pk_examples;                    /* 0: score --passkey's default */
    /* recall through the caches (score_recall.c, docs/kv-quant-recall.md):
     * passkey and mqar trials' examples through f32 and each of kv_dtypes,
     * int8 / int4 at each of kv_quant_residuals */
    int recall;                          /* kv_dtypes, kv_quant_residuals or mqar_examples given */
    int n_residuals, residuals[AL_EVAL_MAX_DTYPES];   /* tokens, or -1: "default" */
    long mqar_examples;                  /* 0: AL_EVAL_MQAR_EXAMPLES */
    int score;                           /* score the test split (any key but decode) */
    struct {                             /* eval.decode: measured decode speed */
        int on;
        int n_contexts, contexts[AL_EVAL_MAX_CONTEXTS];
        int n_batches, batches[AL_EVAL_MAX_CONTEXTS];
        int tokens, repeats;
    } decode;
} al_sweep_eval;

#define AL_SWEEP_MAX_STAGES 16
#define AL_SWEEP_MAX_CLAIMS 32         /* comparisons, after expanding `versus` lists */

/* What a claim says of `config` against `versus` (sweep_claims.c). */
enum al_claim_expect {
    AL_CLAIM_ANY = 0,                  /* no direction: the difference is reported */
    AL_CLAIM_BETTER,                   /* config's quality is better */
    AL_CLAIM_NO_WORSE,                 /* config is worse by less than `margin` */
    AL_CLAIM_WORSE
};

typedef struct al_sweep_claim {
    char text[256];                    /* the claim as the paper states it */
    char config[AL_SWEEP_ID_LEN];      /* a configuration (the report's group) */
    char versus[AL_SWEEP_ID_LEN];      /* the configuration it is compared with */
    int expect;                        /* enum al_claim_expect */
    double margin;                     /* AL_CLAIM_NO_WORSE: in the report's metric */
} al_sweep_claim;

typedef struct al_sweep_stage {
    char name[AL_NAME_LEN];
    int from;                          /* the stage it starts from, or -1 */
    int first, n;                      /* its trials: trials[first .. first + n) */
} al_sweep_stage;

typedef struct al_sweep {
    char file[AL_PATH_LEN];
    char file_sha256[65];              /* of the bytes read: a worker checks it */
    char name[AL_NAME_LEN];
    char description[256];
    al_node *root;                     /* the file with --set applied (owned) */
    int n_axes;
    al_sweep_axis axes[AL_SWEEP_MAX_AXES];
    int n_seeds;                       /* 0: no seeds axis (train.seed as given) */
    int seq_on;                        /* seeds: {min, max, until: resolved} */
    al_seq_plan seq;                   /* its rounds (n_seeds = seq.max, seeds 1..max) */
    uint64_t *seeds;                   /* owned */
    int n_excluded;                    /* trials dropped by exclude */
    int n_select;                      /* select.best_of: axes tuned per configuration */
    int select_axis[AL_SWEEP_MAX_AXES];/* their indices in axes */
    char select_by[32];                /* val_loss, best_val_loss or val_accuracy */
    int n_trials;
    al_sweep_trial *trials;            /* owned */
    int n_stages;                      /* 0: a plain sweep */
    al_sweep_stage stages[AL_SWEEP_MAX_STAGES];
    int n_claims;
    al_sweep_claim claims[AL_SWEEP_MAX_CLAIMS];
    al_sweep_eval eval;
} al_sweep;

/* sweep_load.c: load the --plugin files, then FILE, apply the --set
 * assignments, load the plugins the file lists, parse its stages or its
 * sweep mapping, expand and decode every trial (each config names every
 * plugin it was decoded with). On error s is left empty (nothing to free)
 * and e holds one line "file:line:col: error: ...". The rest is
 * sweep_spec.c's. */
int al_sweep_load(const char *path, const char *const *sets, int n_sets,
                  const char *const *plugins, int n_plugins, al_sweep *s, al_err *e);
void al_sweep_free(al_sweep *s);

/* sweep_claims.c: the `claims` list of the file's sweep mapping (or of each
 * stage's), checked against the configurations s expanded to; called by
 * al_sweep_load once the trials exist. The names of al_claim_expect as a
 * file writes them, and back (-1: unknown). */
int al_sweep_claims_load(al_sweep *s, al_err *e);
const char *al_claim_expect_name(int expect);
int al_claim_expect_parse(const char *name);
/* sweep_eval.c: the file's top-level `eval` into s->eval (called by
 * al_sweep_load once the trials exist: every trial must read text, and
 * the test split must hold a window of every context). */
int al_sweep_eval_load(al_sweep *s, al_err *e);
/* A sweep in rounds: how many of its trials (a prefix: seeds are the
 * outermost axis) have a seed <= n. The runner trains one round by
 * running the sweep with n_trials cut to this; indices and ids stay
 * those of the whole sweep, so a later round or a resume finds them. */
int al_sweep_seq_trials(const al_sweep *s, int n);

/* Hash of a resolved config (threads, checkpoint_every and, with no_seed,
 * the seeds left out) as 16 hex digits into out[17]. */
void al_sweep_config_hash(const al_config *c, int no_seed, char *out);
/* Hash of the model alone (its keys as a checkpoint stores them), as 16
 * hex digits into out[17]: equal for two configurations that are the same
 * model. mha, mqa and gqa count as gqa with their K/V heads (mha: n_head,
 * mqa: 1; one implementation, gqa_family.h), and a model.layer_attention
 * list of one repeated attention as that attention. summary.csv's `model`
 * column; the report names configurations that share one. */
void al_sweep_model_hash(const al_model_config *m, char *out);

/* One attention as trial ids name it: the variant, then each setting that
 * differs from its default, abbreviated as in labels ("gqa-kv2", "mha"). */
void al_sweep_attn_label(char *out, size_t n, const al_attn_config *a);
/* The model's attention: its variant name for model.attention, else the
 * items of model.layer_attention by al_sweep_attn_label joined by sep
 * ("gqa-kv2/mha" in the report, "gqa-kv2+mha" in trial ids), then "-share2"
 * under model.kv_share 2. */
void al_sweep_stack_label(char *out, size_t n, const al_model_config *m, const char *sep);

/* sweep_costs.c: a decoded trial's cost figures (al_sweep_trial), from
 * its resolved config. */
int al_sweep_trial_costs(al_sweep_trial *t, al_err *e);
/* The work of `steps` of t's training, for a sweep's ETA: its training
 * FLOPs in thousands (at least 1 a step; 1 without a cost figure). Steps alone made a stage of
 * fine-tunes at 4x the length look as cheap a step as the base stage's,
 * and long_context's ETA half the time it took. */
long al_sweep_trial_work(const al_sweep_trial *t, long steps);
/* The work of t's `eval` after training, in the same units: the forward
 * FLOPs of what it scores (each context's tokens once per kv dtype, once
 * more by position; a passkey trial's grid, every key a window of its
 * length). Left out: recall through the caches and eval.decode (small
 * beside these). Scoring through a cache runs a step a token, slower a
 * FLOP than training's batched products, so this is a lower bound: it was
 * about a third of long_context's fine-tunes' wall time that the ETA did
 * not count. */
long al_sweep_trial_eval_work(const al_sweep_eval *v, const al_sweep_trial *t);
/* The FLOPs trial t trains: its train_flops_per_token times the tokens of
 * the steps it ran (steps_done; the planned steps before a result). */
double al_sweep_trial_train_flops(const al_sweep_trial *t, int steps_done);

#endif
