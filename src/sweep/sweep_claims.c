/*
 * sweep_claims.c - `sweep.claims`: the published claims a sweep puts to a
 * test, so that its report can set each beside what the run resolved.
 *
 *   claims:
 *     - claim: "TPA: lower loss than MHA at a cache 10x smaller"
 *       config: tpa                  # a configuration of this sweep
 *       versus: [mha, mqa]           # one or a list: one comparison each
 *       expect: better               # better | no_worse | worse (optional)
 *       margin: 0.01                 # no_worse only, in the report's metric
 *
 * A claim names configurations by the labels the sweep gives them (the
 * `group` column of summary.csv; `attnlab sweep FILE --dry-run` lists
 * them), checked here against the expanded trials so a typo is an error
 * at load time, not an empty row in a report an hour later. Claims change
 * no trial: they are not part of any trial's identity.
 */
#include "al_sweep_spec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const expect_names[] = {"", "better", "no_worse", "worse"};

const char *al_claim_expect_name(int expect)
{
    return expect > 0 && expect <= AL_CLAIM_WORSE ? expect_names[expect] : "";
}

int al_claim_expect_parse(const char *name)
{
    for (int k = 1; k <= AL_CLAIM_WORSE; k++)
        if (strcmp(name, expect_names[k]) == 0) return k;
    return -1;
}

static int has_group(const al_sweep *s, const char *label)
{
    for (int i = 0; i < s->n_trials; i++)
        if (strcmp(s->trials[i].group, label) == 0) return 1;
    return 0;
}

/* "a, b, c" of the sweep's configurations, in trial order, cut to fit. */
static void list_groups(const al_sweep *s, char *out, size_t n)
{
    out[0] = 0;
    for (int i = 0; i < s->n_trials; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = strcmp(s->trials[j].group, s->trials[i].group) == 0;
        if (seen) continue;
        size_t len = strlen(out);
        if (len + strlen(s->trials[i].group) + 8 >= n) {
            snprintf(out + len, n - len, ", ...");
            return;
        }
        snprintf(out + len, n - len, "%s%s", len ? ", " : "", s->trials[i].group);
    }
}

static int check_label(const al_sweep *s, const al_node *x, int i, const char *key, al_err *e)
{
    char known[400];
    if (x->kind != AL_NODE_SCALAR || !x->value[0])
        return al_node_errf(e, x, "'sweep.claims[%d].%s' must name a configuration", i, key);
    if (strlen(x->value) >= AL_SWEEP_ID_LEN)
        return al_node_errf(e, x, "'sweep.claims[%d].%s' is longer than %d characters", i, key,
                            AL_SWEEP_ID_LEN - 1);
    if (has_group(s, x->value)) return 0;
    list_groups(s, known, sizeof known);
    return al_node_errf(e, x, "'sweep.claims[%d].%s': no configuration '%.80s' in this sweep "
                        "(its configurations: %s)", i, key, x->value, known);
}

static int text_of(const al_node *x, int i, const char *key, char *out, size_t n, al_err *e)
{
    if (!x) return 0;
    if (x->kind != AL_NODE_SCALAR || !x->value[0])
        return al_node_errf(e, x, "'sweep.claims[%d].%s' must be a non-empty string", i, key);
    if (strlen(x->value) >= n)
        return al_node_errf(e, x, "'sweep.claims[%d].%s' is longer than %zu characters", i, key,
                            n - 1);
    snprintf(out, n, "%s", x->value);
    return 0;
}

static const char *const claim_keys[] = {"claim", "config", "versus", "expect", "margin", NULL};

static int check_keys(const al_node *m, int i, al_err *e)
{
    for (int k = 0; k < m->n; k++) {
        int j = 0;
        while (claim_keys[j] && strcmp(claim_keys[j], m->keys[k]) != 0) j++;
        if (!claim_keys[j])
            return al_errf(e, "%s:%d:%d: error: unknown key '%.80s' in 'sweep.claims[%d]' "
                           "(known: claim, config, versus, expect, margin)", m->file,
                           m->key_line[k], m->key_col[k], m->keys[k], i);
    }
    const char *need[] = {"claim", "config", "versus"};
    for (int k = 0; k < 3; k++)
        if (!al_node_get(m, need[k]))
            return al_node_errf(e, m, "'sweep.claims[%d]' needs '%s' (claim, config and versus "
                                "are required)", i, need[k]);
    return 0;
}

/* expect and margin into c: margin goes with no_worse and only with it. */
static int parse_expect(const al_node *m, int i, al_sweep_claim *c, al_err *e)
{
    const al_node *x = al_node_get(m, "expect"), *mg = al_node_get(m, "margin");
    if (x) {
        c->expect = x->kind == AL_NODE_SCALAR ? al_claim_expect_parse(x->value) : -1;
        if (c->expect < 0)
            return al_node_errf(e, x, "'sweep.claims[%d].expect' must be better, no_worse or "
                                "worse", i);
    }
    if (c->expect == AL_CLAIM_NO_WORSE && !mg)
        return al_node_errf(e, x, "'sweep.claims[%d]': expect no_worse needs a 'margin' (how "
                            "much worse still counts as the same quality, in the metric)", i);
    if (!mg) return 0;
    if (c->expect != AL_CLAIM_NO_WORSE)
        return al_node_errf(e, mg, "'sweep.claims[%d].margin' goes with expect: no_worse", i);
    char *end = NULL;
    c->margin = mg->kind == AL_NODE_SCALAR ? strtod(mg->value, &end) : NAN;
    if (!end || *end || !isfinite(c->margin) || c->margin <= 0 || c->margin > 1e6)
        return al_node_errf(e, mg, "'sweep.claims[%d].margin' must be a positive number (at "
                            "most 1e6), got '%.40s'", i, mg->value ? mg->value : "");
    return 0;
}

static int add_claim(al_sweep *s, const al_sweep_claim *c, const al_node *at, al_err *e)
{
    if (s->n_claims == AL_SWEEP_MAX_CLAIMS)
        return al_node_errf(e, at, "at most %d claim comparisons (counting each 'versus' "
                            "entry)", AL_SWEEP_MAX_CLAIMS);
    s->claims[s->n_claims++] = *c;
    return 0;
}

static int parse_claim(al_sweep *s, const al_node *m, int i, al_err *e)
{
    al_sweep_claim c;
    memset(&c, 0, sizeof c);
    if (m->kind != AL_NODE_MAP)
        return al_node_errf(e, m, "'sweep.claims[%d]' must be a mapping (claim, config, "
                            "versus, expect, margin)", i);
    if (check_keys(m, i, e) || parse_expect(m, i, &c, e)) return -1;
    const al_node *cfg = al_node_get(m, "config"), *vs = al_node_get(m, "versus");
    if (text_of(al_node_get(m, "claim"), i, "claim", c.text, sizeof c.text, e)) return -1;
    if (check_label(s, cfg, i, "config", e)) return -1;
    snprintf(c.config, sizeof c.config, "%s", cfg->value);
    int n = vs->kind == AL_NODE_SEQ ? vs->n : 1;
    if (n == 0) return al_node_errf(e, vs, "'sweep.claims[%d].versus' is empty", i);
    for (int k = 0; k < n; k++) {
        const al_node *v = vs->kind == AL_NODE_SEQ ? vs->items[k] : vs;
        if (check_label(s, v, i, "versus", e)) return -1;
        if (strcmp(v->value, c.config) == 0)
            return al_node_errf(e, v, "'sweep.claims[%d]' compares '%.80s' with itself", i,
                                v->value);
        snprintf(c.versus, sizeof c.versus, "%s", v->value);
        if (add_claim(s, &c, v, e)) return -1;
    }
    return 0;
}

static int parse_list(al_sweep *s, const al_node *list, al_err *e)
{
    if (!list) return 0;
    if (list->kind != AL_NODE_SEQ)
        return al_node_errf(e, list, "'sweep.claims' must be a list of claims");
    for (int i = 0; i < list->n; i++)
        if (parse_claim(s, list->items[i], i, e)) return -1;
    return 0;
}

int al_sweep_claims_load(al_sweep *s, al_err *e)
{
    s->n_claims = 0;
    if (parse_list(s, al_node_get(al_node_get(s->root, "sweep"), "claims"), e)) return -1;
    const al_node *stages = al_node_get(s->root, "stages");
    for (int k = 0; stages && stages->kind == AL_NODE_SEQ && k < stages->n; k++)
        if (parse_list(s, al_node_get(al_node_get(stages->items[k], "sweep"), "claims"), e))
            return -1;
    return 0;
}
