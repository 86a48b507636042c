/*
 * sweep_exec.c - which executors there are and whether one can run here.
 */
#include "al_sweep_exec.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "al_mpi.h"

static const char *const names[] = {"local", "slurm", "mpi"};
_Static_assert(sizeof names / sizeof names[0] == AL_EXEC_N, "one name per executor");

const char *al_sweep_executor_name(int x)
{
    AL_ASSERT(x >= 0 && x < AL_EXEC_N);
    return names[x];
}

int al_sweep_executor_parse(const char *name)
{
    for (int i = 0; i < AL_EXEC_N; i++)
        if (strcmp(name, names[i]) == 0) return i;
    return -1;
}

/* Whether prog is an executable file in a PATH directory. */
static int on_path(const char *prog)
{
    const char *path = getenv("PATH");
    char buf[4096];
    while (path && *path) {
        size_t n = strcspn(path, ":");
        snprintf(buf, sizeof buf, "%.*s/%s", (int)n, n ? path : ".", prog);
        if (access(buf, X_OK) == 0) return 1;
        path += n + (path[n] == ':');
    }
    return 0;
}

static int check_slurm(al_err *e)
{
    static const char *const progs[] = {"sbatch", "squeue", "scontrol", NULL};
    for (int i = 0; progs[i]; i++)
        if (!on_path(progs[i]))
            return al_errf(e, "the slurm executor needs Slurm's commands sbatch, squeue and "
                           "scontrol on this machine, and '%s' is not on PATH: install "
                           "slurm-client (Debian) or load your cluster's Slurm module",
                           progs[i]);
    return 0;
}

static int check_mpi(al_err *e)
{
    if (!al_mpi_available())
        return al_errf(e, "the mpi executor needs attnlab built with MPI: install "
                       "libopenmpi-dev and openmpi-bin (Debian), then meson setup "
                       "--reconfigure build -Dmpi=enabled && ninja -C build");
    if (al_mpi_size() < 2)
        return al_errf(e, "the mpi executor runs under an MPI launcher with at least 2 ranks: "
                       "mpirun -np N attnlab sweep FILE --executor mpi (one trial per rank "
                       "at a time)");
    return 0;
}

int al_sweep_executor_check(int x, al_err *e)
{
    if (x == AL_EXEC_SLURM) return check_slurm(e);
    if (x == AL_EXEC_MPI) return check_mpi(e);
    return 0;
}
