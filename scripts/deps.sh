# deps.sh - sourced by scripts/test and scripts/run: installs the Debian
# packages attnlab needs where they are missing (as root, or through a
# sudo that needs no password), checks that the compiler can build against
# them, and builds.
#
#   al_ensure_packages PKG...            required: exit 2 with the install
#                                        command when they cannot be installed
#   al_ensure_packages --optional PKG... returns 1 instead (tests that need
#                                        them skip)
#   al_check_toolchain                   exit 2 naming what the compiler lacks
#   al_build DIR [MESON OPTION...]       set up (anew when DIR is no valid
#                                        build folder) and build, quietly
#                                        unless something fails
#
# AL_NO_INSTALL=1: install nothing (for users who manage packages
# themselves); the toolchain check still says what is missing.

# Build tools and libraries: every build needs these. libc6-dev by name:
# it is only a Recommends of gcc, and apt-get --no-install-recommends would
# leave a compiler that cannot link a program.
# libdnnl-dev: oneDNN's bf16 matmul for train.precision bf16 (the build
# goes without it, -Ddnnl=auto, and then refuses bf16 runs).
AL_BUILD_PACKAGES=(gcc libc6-dev pkg-config meson ninja-build libopenblas-dev libyaml-dev
                   libjansson-dev libgsl-dev liblapacke-dev check libsubunit-dev libdnnl-dev)
# Run-time: plots and the default corpus.
AL_RUN_PACKAGES=(gnuplot-nox bible-kjv)
# Tests only: the PyTorch reference implementation, and procps (pgrep, pkill)
# for the tests that pause and resume processes.
AL_TEST_PACKAGES=(python3-torch python3-numpy python3-scipy procps)
# Optional, for running beyond one machine: MPI (data-parallel training,
# the mpi sweep executor; the build picks it up when present). Tests that
# need it skip with a message where it is missing.
AL_MPI_PACKAGES=(openmpi-bin libopenmpi-dev)
# Optional: a real single-node Slurm for the slurm executor's test, brought
# up under a temporary directory on loopback by tests/slurm/ (the test uses
# no system configuration; on a systemd host the packages' own services may
# start). The test skips with a message where they are missing.
AL_SLURM_PACKAGES=(slurm-wlm munge)
# Optional, tests: a real browser for the report page's test
# (tests/browser/): headless Chromium driven through chromedriver by
# Python's selenium. The test skips with a message where they are missing.
AL_BROWSER_PACKAGES=(chromium chromium-driver python3-selenium)
# Fuzzing only (scripts/fuzz): clang and its libFuzzer runtime. The test
# suites replay the fuzz corpora with the ordinary compiler; finding new
# inputs needs libFuzzer, which only clang has.
AL_FUZZ_PACKAGES=(clang libclang-rt-14-dev)

# The libraries by their pkg-config names, and the Debian package of each
# (what a non-Debian system must provide; what al_check_toolchain names).
AL_PKGCONFIG_LIBS=(openblas:libopenblas-dev yaml-0.1:libyaml-dev jansson:libjansson-dev
                   lapacke:liblapacke-dev gsl:libgsl-dev check:check)

al_ensure_packages() {
    local optional=0
    if [ "${1:-}" = --optional ]; then optional=1; shift; fi
    [ "${AL_NO_INSTALL:-0}" = 1 ] && return 0
    if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
        [ $optional = 1 ] && return 1
        if [ -z "${AL_NOTED_NOT_DEBIAN:-}" ]; then
            local names=()
            for x in "${AL_PKGCONFIG_LIBS[@]}"; do names+=("${x%%:*}"); done
            echo "attnlab: no dpkg/apt-get here: provide a C compiler, meson, ninja, pkg-config" \
                 "and these libraries (pkg-config names): ${names[*]}; going on to the build" >&2
            AL_NOTED_NOT_DEBIAN=1
        fi
        return 0
    fi
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo="sudo -n"
        elif [ $optional = 1 ]; then
            return 1
        else
            echo "attnlab: missing packages: ${missing[*]}; as root, run:" \
                 "apt-get install ${missing[*]}  (or set AL_NO_INSTALL=1 if you provide them" \
                 "yourself)" >&2
            exit 2
        fi
    fi
    echo "attnlab: installing ${missing[*]}" >&2
    if ! { $sudo apt-get update -qq >&2 &&
           DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
               "${missing[@]}" >&2; }; then
        [ $optional = 1 ] && return 1
        echo "attnlab: apt-get could not install ${missing[*]} (see above)" >&2
        exit 2
    fi
}

# Before meson: the compiler builds and links a program, and finds each
# library; what is missing is named by its package.
al_check_toolchain() {
    local cc="${CC:-cc}" t
    t=$(mktemp -d "${TMPDIR:-/tmp}/attnlab-cc-XXXXXX")
    printf 'int main(void) { return 0; }\n' > "$t/a.c"
    if ! $cc "$t/a.c" -o "$t/a" >"$t/log" 2>&1; then
        local why; why=$(head -1 "$t/log"); why=${why:-it failed without a message}
        echo "attnlab: the C compiler ($cc) cannot build a program: $why" \
             "(install gcc and libc6-dev)" >&2
        rm -rf "$t"
        exit 2
    fi
    rm -rf "$t"
    if ! command -v pkg-config >/dev/null 2>&1; then
        echo "attnlab: no pkg-config (install pkg-config)" >&2
        exit 2
    fi
    local missing=()
    for x in "${AL_PKGCONFIG_LIBS[@]}"; do
        if [ "${x%%:*}" = gsl ]; then   # found by header, as meson.build does
            echo '#include <gsl/gsl_cdf.h>' | $cc -E - >/dev/null 2>&1 || missing+=("${x#*:}")
        else
            pkg-config --exists "${x%%:*}" || missing+=("${x#*:}")
        fi
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "attnlab: the build lacks libraries; install: ${missing[*]}" >&2
        exit 2
    fi
}

# A folder meson can reconfigure: its private data and an introspection
# that answers (an interrupted first set-up leaves neither).
al_build_dir_valid() {
    [ -f "$1/meson-private/coredata.dat" ] && [ -f "$1/build.ninja" ] &&
        meson introspect "$1" --buildoptions >/dev/null 2>&1
}

# Runs CMD... quietly; on failure shows its last lines and what to read.
al_quiet() {
    local what="$1" log="$2"; shift 2
    if ! "$@" >"$log" 2>&1; then
        echo "attnlab: $what failed:" >&2
        tail -n 25 "$log" >&2
        echo "attnlab: $what's whole output: $log" >&2
        return 1
    fi
}

al_build() {
    local dir="$1"; shift
    al_check_toolchain
    if [ -e "$dir" ] && ! al_build_dir_valid "$dir"; then
        echo "attnlab: $dir is not a complete build folder (an interrupted or failed set-up?);" \
             "setting it up anew" >&2
        rm -rf "$dir"
    fi
    local log
    log=$(mktemp "${TMPDIR:-/tmp}/attnlab-setup-XXXXXX")
    if [ -d "$dir" ]; then
        if ! meson setup --reconfigure "$dir" "$@" >"$log" 2>&1; then
            # made by another meson version, or options it cannot change in place
            echo "attnlab: $dir could not be reconfigured ($(grep -m1 -i 'error' "$log" ||
                 tail -1 "$log")); setting it up anew" >&2
            rm -rf "$dir"
        fi
    fi
    if [ ! -d "$dir" ]; then
        al_quiet "meson setup" "$log" meson setup "$dir" "$@" || {
            [ -f "$dir/meson-logs/meson-log.txt" ] &&
                echo "attnlab: meson's log: $dir/meson-logs/meson-log.txt" >&2
            exit 1
        }
    fi
    rm -f "$log"
    al_quiet "the build (ninja -C $dir)" "$dir/ninja.log" ninja -C "$dir" || exit 1
}
