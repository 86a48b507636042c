# deps.sh - sourced by scripts/test and scripts/run: installs the Debian
# packages attnlab needs where they are missing (as root, or through sudo).
# Usage: al_ensure_packages PKG...

al_ensure_packages() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "attnlab: installing ${missing[*]}" >&2
    $sudo apt-get update -qq >&2 &&
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
            "${missing[@]}" >&2
}

# Build tools and libraries: every build needs these.
# libdnnl-dev: oneDNN's bf16 matmul for train.precision bf16 (the build
# goes without it, -Ddnnl=auto, and then refuses bf16 runs).
AL_BUILD_PACKAGES=(gcc pkg-config meson ninja-build libopenblas-dev libyaml-dev
                   libjansson-dev libgsl-dev liblapacke-dev check libsubunit-dev libdnnl-dev)
# Run-time: plots and the default corpus.
AL_RUN_PACKAGES=(gnuplot-nox bible-kjv)
# Tests only: the PyTorch reference implementation.
AL_TEST_PACKAGES=(python3-torch python3-numpy python3-scipy)
# Optional, for running beyond one machine: MPI (data-parallel training,
# the mpi sweep executor; the build picks it up when present). Tests that
# need it skip with a message where it is missing.
AL_MPI_PACKAGES=(openmpi-bin libopenmpi-dev)
# Optional: a real single-node Slurm for the slurm executor's test, brought
# up under a temporary directory on loopback by tests/slurm/ (the test uses
# no system configuration; on a systemd host the packages' own services may
# start). The test skips with a message where they are missing.
AL_SLURM_PACKAGES=(slurm-wlm munge)
# Fuzzing only (scripts/fuzz): clang and its libFuzzer runtime. The test
# suites replay the fuzz corpora with the ordinary compiler; finding new
# inputs needs libFuzzer, which only clang has.
AL_FUZZ_PACKAGES=(clang libclang-rt-14-dev)
