/*
 * mpi.c - the MPI side of attnlab: launch detection, the size check, and
 * the few collectives training and the mpi sweep executor use. Without
 * AL_HAVE_MPI every function is the single-rank case.
 */
#include "al_mpi.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#ifdef AL_HAVE_MPI
#include <mpi.h>
#endif

static struct {
    int inited, mpi, rank, size, local_size;
} D = {0, 0, 0, 1, 1};

/* ------------------------------------------------------------ launch */

/* How many ranks the launcher says it started, or 0 when no launcher is
 * seen. *var names the variable that said so. */
static long launcher_size(const char **var)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            *var = vars[i];
            return strtol(v, NULL, 10);
        }
    }
    /* Inside an srun step (not the batch script: its step id is one of
     * Slurm's special values near 2^32). */
    const char *step = getenv("SLURM_STEP_ID"), *n = getenv("SLURM_STEP_NUM_TASKS");
    if (step && n && *step >= '0' && *step <= '9' && strtol(step, NULL, 10) < 0xFFFFFFF0L) {
        *var = "SLURM_STEP_NUM_TASKS";
        return strtol(n, NULL, 10);
    }
    if (getenv("PMIX_RANK")) {
        *var = "PMIX_RANK";
        return -1;   /* a PMIx launch whose size only MPI knows */
    }
    return 0;
}

int al_mpi_available(void)
{
#ifdef AL_HAVE_MPI
    return 1;
#else
    return 0;
#endif
}

#ifdef AL_HAVE_MPI
static int mpi_start(long want, const char *var, al_err *e)
{
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) return al_errf(e, "MPI_Init failed");
    D.mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &D.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &D.size);
    if (want > 0 && D.size != want) {
        al_errf(e, "the launcher started %ld ranks (%s) but MPI_Comm_size is %d: it does not "
                "match this build's MPI; launch with this MPI's own mpirun, or srun "
                "--mpi=pmix under Slurm", want, var, D.size);
        MPI_Finalize();
        D.mpi = 0, D.rank = 0, D.size = 1;
        return -1;
    }
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, D.rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &D.local_size);
    MPI_Comm_free(&node);
    al_threads_set_local_size(D.local_size);   /* threads: 0 shares the node's cores */
    return 0;
}
#endif

int al_mpi_init(al_err *e)
{
    if (D.inited) return 0;
    const char *var = NULL;
    long want = launcher_size(&var);
    if (want == 0 || want == 1) {
        D.inited = 1;
        return 0;
    }
#ifdef AL_HAVE_MPI
#ifdef OPEN_MPI
    /* Open MPI starts only under its own mpirun or a PMIx server; anything
     * else aborts inside MPI_Init or runs N one-rank copies. */
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMIX_RANK"))
        return al_errf(e, "the launcher started %ld ranks (%s) without PMIx, which this "
                       "build's MPI (Open MPI) needs: launch with Open MPI's mpirun, or "
                       "srun --mpi=pmix under Slurm", want, var);
#endif
    if (mpi_start(want, var, e) != 0) return -1;
    D.inited = 1;
    return 0;
#else
    if (want < 0) {   /* PMIx without a size: nothing to check, one rank */
        D.inited = 1;
        return 0;
    }
    return al_errf(e, "the launcher started %ld ranks (%s) but this attnlab was built "
                   "without MPI: install libopenmpi-dev (Debian) and rebuild "
                   "(meson setup --reconfigure build -Dmpi=enabled)", want, var);
#endif
}

int al_mpi_rank(void) { return D.rank; }
int al_mpi_size(void) { return D.size; }
int al_mpi_local_size(void) { return D.local_size; }

void al_mpi_finalize(void)
{
#ifdef AL_HAVE_MPI
    if (D.mpi) MPI_Finalize();
#endif
    D.mpi = 0, D.rank = 0, D.size = 1, D.local_size = 1, D.inited = 0;
}

/* ------------------------------------------------------------ collectives */

void al_mpi_allreduce_sum(float *buf, size_t n)
{
#ifdef AL_HAVE_MPI
    if (!D.mpi || D.size == 1) return;
    /* MPI counts are int: large buffers go in chunks. */
    for (size_t off = 0; off < n; off += INT_MAX / 2) {
        size_t k = n - off < INT_MAX / 2 ? n - off : INT_MAX / 2;
        MPI_Allreduce(MPI_IN_PLACE, buf + off, (int)k, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
#else
    (void)buf, (void)n;
#endif
}

void al_mpi_allreduce_sum_d(double *buf, int n)
{
#ifdef AL_HAVE_MPI
    if (D.mpi && D.size > 1)
        MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
#else
    (void)buf, (void)n;
#endif
}

int al_mpi_same_u64(uint64_t v)
{
#ifdef AL_HAVE_MPI
    if (!D.mpi || D.size == 1) return 1;
    /* max(v) and max(~v) = ~min(v) in one call. */
    uint64_t mm[2] = {v, ~v};
    MPI_Allreduce(MPI_IN_PLACE, mm, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    return mm[0] == ~mm[1];
#else
    (void)v;
    return 1;
#endif
}

int al_mpi_agree(int failed, al_err *e)
{
    if (D.size == 1) return failed ? -1 : 0;
    double v[2] = {failed ? 1 : 0, D.rank == 0 && failed ? 1 : 0};
    al_mpi_allreduce_sum_d(v, 2);
    if (v[0] == 0) return 0;
    if (failed) {
        if (D.rank != 0 && v[1] > 0) e->msg[0] = 0;   /* rank 0 says it */
    } else if (D.rank == 0) {
        al_errf(e, "%.0f of %d ranks failed (see their messages)", v[0], D.size);
    } else {
        e->msg[0] = 0;
    }
    return -1;
}

void al_mpi_send_ints(int dest, int tag, const int *v, int n)
{
#ifdef AL_HAVE_MPI
    AL_ASSERT(D.mpi);
    MPI_Send(v, n, MPI_INT, dest, tag, MPI_COMM_WORLD);
#else
    (void)dest, (void)tag, (void)v, (void)n;
    AL_ASSERT(!"al_mpi_send_ints without MPI");
#endif
}

int al_mpi_recv_ints(int src, int tag, int *v, int n)
{
#ifdef AL_HAVE_MPI
    AL_ASSERT(D.mpi);
    MPI_Status st;
    MPI_Recv(v, n, MPI_INT, src < 0 ? MPI_ANY_SOURCE : src, tag, MPI_COMM_WORLD, &st);
    return st.MPI_SOURCE;
#else
    (void)src, (void)tag, (void)v, (void)n;
    AL_ASSERT(!"al_mpi_recv_ints without MPI");
    return -1;
#endif
}

int al_mpi_probe(int src, int tag)
{
#ifdef AL_HAVE_MPI
    AL_ASSERT(D.mpi);
    int flag = 0;
    MPI_Iprobe(src < 0 ? MPI_ANY_SOURCE : src, tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    return flag;
#else
    (void)src, (void)tag;
    AL_ASSERT(!"al_mpi_probe without MPI");
    return 0;
#endif
}
