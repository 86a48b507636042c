/*
 * score_passkey.c - `attnlab score --passkey`: a checkpoint's accuracy on
 * the passkey task (data_passkey.c) over a fixed grid of window lengths x
 * depths, which may run past the trained length; FILE is the filler.
 *
 * Cell (L, depth) holds examples 0 .. N-1 of the test stream of data.seed
 * --seed (default 1, train.seed's default), each L tokens with the statement at that depth,
 * so a cell is the same for every model of one seed. Exact-match is greedy
 * decoding's: the argmax at each of the 5 digit positions, teacher-forced,
 * is the key's digit (greedy decoding reproduces all 5 exactly when every
 * teacher-forced argmax is right, and fails at the first one that is not,
 * so the two agree); digit accuracy is the share of digit positions whose
 * teacher-forced argmax is right, and loss the mean cross-entropy on them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_data.h"
#include "al_score.h"

#define PK_BATCH 8

typedef struct pk_cell {
    int L;
    double depth;
    int n, exact, digits;    /* examples, all 5 right, digit positions right */
    double loss;             /* summed over examples of their mean digit loss */
} pk_cell;

static int argmax(const float *x, int V)
{
    int best = 0;
    for (int v = 1; v < V; v++)
        if (x[v] > x[best]) best = v;
    return best;
}

/* Examples i0 .. i0 + B - 1 of cell c, scored. */
static void score_batch(al_model *m, const al_score_in *s, uint64_t seed, pk_cell *c, long i0,
                        int B, int *in, int *tgt, float *w)
{
    int L = c->L, V = m->cfg.vocab_size;
    for (int b = 0; b < B; b++)
        al_passkey_make((const unsigned char *)s->bytes, s->n, seed, i0 + b, L, c->depth,
                        in + (size_t)b * L, tgt + (size_t)b * L, w + (size_t)b * L);
    c->loss += al_model_forward(m, in, tgt, w, B, L) * B;
    for (int b = 0; b < B; b++) {
        int right = 0;
        for (int t = L - AL_PASSKEY_DIGITS; t < L; t++) {
            size_t at = (size_t)b * L + t;
            right += argmax(m->logits + at * V, V) == tgt[at];
        }
        c->digits += right;
        c->exact += right == AL_PASSKEY_DIGITS;
        c->n++;
    }
}

static int score_cell(al_score_in *s, uint64_t seed, int examples, pk_cell *c, al_err *e)
{
    int B = examples < PK_BATCH ? examples : PK_BATCH, L = c->L;
    if (al_model_reserve(&s->m, B, L, e) != 0) return -1;
    int *in = al_malloc((size_t)B * L * sizeof(int)), *tgt = al_malloc((size_t)B * L * sizeof(int));
    float *w = al_malloc((size_t)B * L * sizeof(float));
    for (long i = 0; i < examples; i += B) {
        int b = (int)(examples - i < B ? examples - i : B);
        score_batch(&s->m, s, seed, c, i, b, in, tgt, w);
    }
    free(in), free(tgt), free(w);
    return 0;
}

static void print_cells(FILE *f, const pk_cell *c, int n)
{
    fputs("length,depth,examples,exact,digit_accuracy,loss\n", f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%d,%.6g,%d,%.6f,%.6f,%.6f\n", c[i].L, c[i].depth, c[i].n,
                (double)c[i].exact / c[i].n, (double)c[i].digits / (AL_PASSKEY_DIGITS * c[i].n),
                c[i].loss / c[i].n);
}

static int write_csv(const char *dir, const pk_cell *c, int n, al_err *e)
{
    char path[AL_PATH_LEN + 32], tmp[AL_PATH_LEN + 64];
    snprintf(path, sizeof path, "%s/passkey.csv", dir);
    if (al_mkdirs(dir, e) != 0) return -1;
    FILE *f = al_open_atomic(path, tmp, sizeof tmp, e);
    if (!f) return -1;
    print_cells(f, c, n);
    return al_commit_atomic(f, tmp, path, e);
}

int al_score_passkey(al_score_in *s, const al_passkey_grid *g, FILE *print, const char *out,
                     al_err *e)
{
    int nl = g->n_lengths, nd = g->n_depths, T = s->m.cfg.seq_len;
    int lengths[AL_PASSKEY_MAX_GRID] = {T, 2 * T, 4 * T};
    double depths[AL_PASSKEY_MAX_GRID] = {0, 0.25, 0.5, 0.75};
    if (nl) memcpy(lengths, g->lengths, sizeof lengths);
    else nl = 3;
    if (nd) memcpy(depths, g->depths, sizeof depths);
    else nd = 4;
    for (int i = 0; i < nl; i++)
        if (lengths[i] < al_passkey_min_len())
            return al_errf(e, "--lengths: %d is shorter than a passkey example (at least %d "
                           "tokens)", lengths[i], al_passkey_min_len());
    if (s->m.cfg.vocab_size != 256)
        return al_errf(e, "--passkey: the checkpoint's vocabulary is %d, not bytes (256)",
                       s->m.cfg.vocab_size);
    uint64_t seed = al_passkey_seed(g->seed ? (uint64_t)g->seed : 1, AL_SPLIT_TEST);
    pk_cell *c = al_calloc((size_t)(nl * nd), sizeof *c);
    int rc = 0;
    for (int i = 0; i < nl && !rc; i++)
        for (int j = 0; j < nd && !rc; j++) {
            c[i * nd + j] = (pk_cell){.L = lengths[i], .depth = depths[j]};
            rc = score_cell(s, seed, g->examples ? g->examples : 20, &c[i * nd + j], e);
        }
    if (!rc && print) print_cells(print, c, nl * nd);
    if (!rc && out) rc = write_csv(out, c, nl * nd, e);
    free(c);
    return rc;
}
