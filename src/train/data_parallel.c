/*
 * data_parallel.c - data-parallel training of one model over the ranks of al_mpi.
 *
 * Why the N-rank run equals the 1-rank run: every rank draws the whole
 * global batch from the same RNG stream (cheap: token windows), so the
 * stream stays identical everywhere; rank r trains on rows
 * [r*B/N, (r+1)*B/N). The loss is a (weighted) mean, so the global loss is
 * sum_r share_r * loss_r with share_r = (weight of r's rows) / (weight of
 * all rows), and likewise the gradient. Each rank scales its gradient by
 * its share; one allreduce of the flat gradient buffer sums them.
 */
#include "al_data_parallel.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "al_model.h"

int al_dp_check_batch(int batch_size, al_err *e)
{
    int n = al_mpi_size();
    if (batch_size % n != 0)
        return al_errf(e, "'train.batch_size' (%d) must be divisible by the number of "
                       "MPI ranks (%d): every rank trains on an equal slice of the batch",
                       batch_size, n);
    return 0;
}

/* Summed as al_xent_forward sums its weights. */
static double weight_sum(const float *w, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += w[i];
    return s;
}

double al_dp_share(const float *w, int B, int T, int rank, int size)
{
    int b = B / size;
    if (!w) return (double)b / B;
    double all = weight_sum(w, (size_t)B * T);
    if (all == 0) return 0;
    return weight_sum(w + (size_t)rank * b * T, (size_t)b * T) / all;
}

double al_dp_forward_backward(al_model *m, const int *in, const int *tgt, const float *w,
                              int B, int T)
{
    int n = al_mpi_size(), r = al_mpi_rank();
    if (n == 1) {
        double loss = al_model_forward(m, in, tgt, w, B, T);
        if (isfinite(loss)) al_model_backward(m);
        return loss;
    }
    int b = B / n;
    size_t off = (size_t)r * b * T;
    double share = al_dp_share(w, B, T, r, n);
    double loss = al_model_forward(m, in + off, tgt + off, w ? w + off : NULL, b, T);
    /* A slice without weight has loss 0 and gradient 0; share is 0 too, and
     * 0 * NaN must not poison the sum. */
    double part = share == 0 ? 0 : share * loss;
    al_mpi_allreduce_sum_d(&part, 1);
    if (!isfinite(part)) return part;
    al_model_backward(m);
    cblas_sscal((int)m->n_params, (float)share, m->grads, 1);
    al_mpi_allreduce_sum(m->grads, m->n_params);
    return part;
}

/* ------------------------------------------------------------ replicas */

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001b3ULL;
    return h;
}

uint64_t al_dp_checksum(const al_model *m)
{
    return fnv1a(0xcbf29ce484222325ULL, m->params, m->n_params * sizeof(float));
}

int al_dp_check_replicas(al_model *m, const al_rng *rng, int step, al_err *e)
{
    if (al_mpi_size() == 1) return 0;
    const char *perturb = getenv("AL_DIST_TEST_PERTURB");
    if (perturb && step > 0 && atoi(perturb) == al_mpi_rank()) m->params[0] += 1e-3f;
    uint64_t h = fnv1a(al_dp_checksum(m), rng->s, sizeof rng->s);
    if (al_mpi_same_u64(h)) return 0;
    return al_errf(e, "data-parallel replicas differ at step %d: the parameters or the data "
                   "stream are not identical on all %d ranks (rank %d checksum %016llx)",
                   step, al_mpi_size(), al_mpi_rank(), (unsigned long long)h);
}
