#!/usr/bin/env bash
# sweep-through-slurm.sh ATTNLAB - a sweep through a real single-node Slurm
# (tests/slurm/local-slurm.sh: under a temporary directory, loopback only),
# checked against the same sweep run locally: the same trials with the same
# numbers (same thread count, so bit-identical). Then what is particular to
# Slurm: a finished sweep submits nothing; --no-wait returns at once and a
# later plain `attnlab sweep` collects; a task cancelled while it runs is
# recorded as killed with Slurm's state and is submitted again by the next
# run; --dry-run prints the batch script and submits nothing.
# Slurm is torn down however the script ends (exit, error, signal; a
# watchdog process covers SIGKILL of this script).
# Exit status: 0 passed, 1 failed, 77 skipped (meson's convention).
set -uo pipefail
attnlab=${1:?usage: sweep-through-slurm.sh ATTNLAB}
here=$(cd "$(dirname "$0")" && pwd)

skip() { echo "SKIP slurm sweep: $*"; exit 77; }
for p in munged slurmctld slurmd sbatch squeue scontrol scancel sinfo; do
    command -v "$p" >/dev/null || skip "$p not found (install Debian's slurm-wlm and munge)"
done
[ "$(id -u)" = 0 ] || skip "slurmd must run as root to start jobs"
[ -x /usr/bin/python3 ] || skip "/usr/bin/python3 missing"
# Debian 12's slurmd (22.05) initialises its cgroup plugin whatever
# ProctrackType and TaskPlugin say, and stops where no cgroup filesystem is
# mounted (a chroot, some containers); CgroupPlugin=disabled came later.
awk '$2 == "/sys/fs/cgroup" { found = 1 } END { exit !found }' /proc/mounts ||
    skip "no cgroup filesystem on /sys/fs/cgroup, which Debian 12's slurmd (22.05) needs"

. "$here/local-slurm.sh"
work=$(mktemp -d /tmp/attnlab-slurm-test-XXXXXX)
chmod 755 "$work"
sl=$work/slurm
cleanup() {
    kill $(jobs -p) 2>/dev/null
    al_slurm_down "$sl"
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
( while kill -0 $$ 2>/dev/null; do sleep 1; done; al_slurm_down "$sl"; rm -rf "$work" ) \
    </dev/null >/dev/null 2>&1 &

fail() {
    echo "FAIL: $*"
    for f in "$sl"/slurmctld.log "$sl"/slurmd.log; do
        [ -f "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }
    done
    exit 1
}
ms() { date +%s%3N; }
secs() { awk -v now="$(ms)" -v t0="$1" 'BEGIN { printf "%.1f\n", (now - t0) / 1000 }'; }   # no bc: nothing installs it

t0=$(ms)
al_slurm_up "$sl" || fail "could not bring up the local Slurm"
echo "local slurm: node idle $(secs "$t0") s after start"
export AL_SLURM_POLL_S=0.3

# ---- experiments: 2 variants x 2 seeds, tiny; and one trial that would
# train for hours, to cancel while it runs
/usr/bin/python3 -c 'import sys; sys.stdout.write("the cat sat on the mat, the dog ran far. " * 150)' \
    > "$work/text.txt"
cat > "$work/exp.yaml" <<EOF
data: {source: text, path: $work/text.txt}
model: {n_layer: 1, d_model: 32, n_head: 2, d_head: 16, seq_len: 16}
train: {steps: 30, batch_size: 4, eval_every: 10, eval_batches: 2, threads: 1}
sweep:
  name: slurmtest
  seeds: 2
  grid:
    model.attention: [{variant: mha}, {variant: mqa}]
EOF
sed -e 's/steps: 30/steps: 100000000/' -e 's/seeds: 2/seeds: 1/' -e 's/name: slurmtest/name: long/' \
    -e 's/, {variant: mqa}//' "$work/exp.yaml" > "$work/long.yaml"

# every trial with its status and numbers (not the wall-clock ones)
numbers() {
    /usr/bin/python3 - "$1/summary.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for r in sorted(rows, key=lambda r: r["trial"]):
    print(r["trial"], r["status"], r["final_train_loss"], r["val_loss"], r["best_val_loss"])
PY
}
submissions() { grep -c '"job_id"' "$1/slurm.json"; }

# ---- the same sweep locally and through Slurm
t0=$(ms)
"$attnlab" sweep "$work/exp.yaml" --out "$work/local" --jobs 2 > "$work/local.log" 2>&1 ||
    fail "local sweep: $(tail -n 5 "$work/local.log")"
t_local=$(secs "$t0")
t0=$(ms)
"$attnlab" sweep "$work/exp.yaml" --executor slurm --out "$work/onslurm" \
    > "$work/slurm.log" 2>&1 || fail "slurm sweep: $(tail -n 20 "$work/slurm.log")"
t_slurm=$(secs "$t0")
echo "4-trial sweep: local (2 at a time) $t_local s, through Slurm $t_slurm s"
[ "$(numbers "$work/local" | wc -l)" = 4 ] || fail "expected 4 trials: $(numbers "$work/local")"
[ "$(numbers "$work/local")" = "$(numbers "$work/onslurm")" ] ||
    fail "results differ: local
$(numbers "$work/local")
slurm
$(numbers "$work/onslurm")"
[ -f "$work/onslurm/report.md" ] || fail "no report.md after the Slurm sweep"
grep -q 'submitted batch job' "$work/slurm.log" || fail "no submission reported"

# ---- chained stages: the later stage goes in a second wave, once its
# upstream trials have ended ok; the same numbers as run locally
cat > "$work/staged.yaml" <<EOF
name: slurmstaged
data: {source: text, path: $work/text.txt}
model: {n_layer: 1, d_model: 32, n_head: 2, d_head: 16, seq_len: 16}
train: {steps: 30, batch_size: 4, eval_every: 10, eval_batches: 2, threads: 1, warmup_steps: 2}
stages:
  - name: base
    sweep: {seeds: 2}
  - name: up
    from: base
    convert: {to: mqa, method: mean}
    steps: [10]
EOF
"$attnlab" sweep "$work/staged.yaml" --out "$work/staged-local" --jobs 2 \
    > "$work/staged-local.log" 2>&1 || fail "local staged sweep: $(tail -n 5 "$work/staged-local.log")"
"$attnlab" sweep "$work/staged.yaml" --executor slurm --out "$work/staged-slurm" \
    > "$work/staged-slurm.log" 2>&1 || fail "staged sweep on Slurm: $(tail -n 20 "$work/staged-slurm.log")"
[ "$(numbers "$work/staged-local" | wc -l)" = 4 ] || fail "staged: $(numbers "$work/staged-local")"
[ "$(numbers "$work/staged-local")" = "$(numbers "$work/staged-slurm")" ] ||
    fail "staged results differ: local
$(numbers "$work/staged-local")
slurm
$(numbers "$work/staged-slurm")"
[ "$(submissions "$work/staged-slurm")" = 2 ] || fail "staged: not two waves: $(cat "$work/staged-slurm.log")"

# ---- a finished sweep submits nothing (and stays with Slurm by itself)
"$attnlab" sweep "$work/exp.yaml" --out "$work/onslurm" > "$work/again.log" 2>&1 ||
    fail "resumed sweep: $(tail -n 5 "$work/again.log")"
[ "$(submissions "$work/onslurm")" = 1 ] || fail "a finished sweep was submitted again"
grep -q '4 kept from before' "$work/again.log" || fail "resume: $(cat "$work/again.log")"

# ---- --no-wait, then a plain run collects
"$attnlab" sweep "$work/exp.yaml" --executor slurm --out "$work/nowait" --no-wait \
    > "$work/nowait.log" 2>&1 || fail "--no-wait: $(tail -n 5 "$work/nowait.log")"
grep -q '^submitted batch job [0-9]' "$work/nowait.log" || fail "--no-wait: $(cat "$work/nowait.log")"
"$attnlab" sweep "$work/exp.yaml" --out "$work/nowait" > "$work/collect.log" 2>&1 ||
    fail "collecting: $(tail -n 5 "$work/collect.log")"
[ "$(submissions "$work/nowait")" = 1 ] || fail "collecting submitted again"
[ "$(numbers "$work/local")" = "$(numbers "$work/nowait")" ] ||
    fail "collected results differ from the local run's"

# ---- a task cancelled while it runs: recorded, then submitted again
"$attnlab" sweep "$work/long.yaml" --executor slurm --out "$work/long" > "$work/long.log" 2>&1 &
follower=$!
# (cancelled once it trains: a signal that lands while the task is still being
# set up is only followed by SIGKILL after Slurm's KillWait, 30 s)
for _ in $(seq 1 300); do
    job=$(squeue -h -t RUNNING -n attnlab-long -o %i | head -n 1)
    [ -n "$job" ] && ls "$work"/long/*/progress >/dev/null 2>&1 && break
    sleep 0.1
done
[ -n "$job" ] || fail "the long trial never ran: $(cat "$work/long.log")"
scancel "$job"
for _ in $(seq 1 300); do kill -0 "$follower" 2>/dev/null || break; sleep 0.1; done
kill -0 "$follower" 2>/dev/null && fail "the sweep did not notice the cancelled task"
wait "$follower"
[ $? = 1 ] || fail "a cancelled trial should make the sweep exit 1: $(cat "$work/long.log")"
grep -q ',killed,"slurm task .* ended CANCELLED' "$work/long/summary.csv" ||
    fail "not recorded with Slurm's state: $(cat "$work/long/summary.csv")"
"$attnlab" sweep "$work/long.yaml" --out "$work/long" --no-wait > "$work/long2.log" 2>&1 ||
    fail "resubmission: $(cat "$work/long2.log")"
[ "$(submissions "$work/long")" = 2 ] || fail "the cancelled trial was not submitted again"
scancel -n attnlab-long

# ---- --dry-run
"$attnlab" sweep "$work/exp.yaml" --executor slurm --out "$work/dry" --dry-run \
    --slurm-arg=--partition=debug > "$work/dry.log" 2>&1 || fail "--dry-run: $(cat "$work/dry.log")"
grep -q '^#SBATCH --array=0-3$' "$work/dry.log" || fail "--dry-run: $(cat "$work/dry.log")"
grep -q "sbatch --parsable '--partition=debug'" "$work/dry.log" ||
    fail "--dry-run: --slurm-arg not shown: $(cat "$work/dry.log")"
[ ! -e "$work/dry/slurm.json" ] || fail "--dry-run submitted"

# ---- data-parallel training as a Slurm step, when attnlab has MPI. Open
# MPI keeps allocations until exit: no leak report for these ranks.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
sed -n '1,3p' "$work/exp.yaml" > "$work/dp.yaml"
srun --mpi=pmix -n 2 "$attnlab" train "$work/dp.yaml" --out "$work/dp" > "$work/dp.log" 2>&1
rc=$?
if grep -q 'built without MPI' "$work/dp.log"; then
    echo "data-parallel under srun: not tested (attnlab built without MPI)"
    dp=""
else
    [ $rc = 0 ] && grep -q 'ranks=2' "$work/dp.log" ||
        fail "srun --mpi=pmix -n 2 attnlab train: $(tail -n 5 "$work/dp.log")"
    srun -n 2 "$attnlab" train "$work/dp.yaml" --out "$work/dp2" > "$work/dp2.log" 2>&1 &&
        fail "srun without PMIx should be refused"
    grep -q 'started 2 ranks (SLURM_STEP_NUM_TASKS) without PMIx' "$work/dp2.log" ||
        fail "srun without PMIx: $(cat "$work/dp2.log")"
    dp=", data-parallel under srun --mpi=pmix"
fi

echo "PASS: the Slurm sweep equals the local one, chained stages too (in waves); resume," \
     "--no-wait and collect, cancel and resubmit, --dry-run$dp"
