#!/usr/bin/env bash
# sweep-through-slurm.sh ATTNLAB - run a 4-trial sweep through a real
# single-node Slurm brought up under a temporary directory on loopback
# (tests/slurm/local-slurm.sh), and check it against the same sweep run
# locally: the same trials, the same numbers (same thread count, so
# bit-identical). Then the Slurm-specific behaviour: a resumed sweep
# submits nothing; --no-wait returns at once and a later run collects; a
# cancelled task is recorded with Slurm's reason and resubmitted by the next
# run; --dry-run prints the batch script. Slurm is torn down however the
# script ends (exit, error, signal; a watchdog covers SIGKILL).
# Exit status: 0 passed, 1 failed, 77 skipped (meson's convention).
set -uo pipefail
attnlab=${1:?usage: sweep-through-slurm.sh ATTNLAB}
here=$(cd "$(dirname "$0")" && pwd)

for p in munged slurmctld slurmd sbatch squeue scontrol sinfo; do
    if ! command -v "$p" >/dev/null; then
        echo "SKIP slurm sweep: $p not found (install Debian's slurm-wlm and munge)"
        exit 77
    fi
done
if [ ! -x /usr/bin/python3 ]; then echo "SKIP slurm sweep: /usr/bin/python3 missing"; exit 77; fi

. "$here/local-slurm.sh"
work=$(mktemp -d /tmp/attnlab-slurm-test-XXXXXX)
chmod 755 "$work"
sl=$work/slurm
cleanup() { al_slurm_down "$sl"; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
# If this script is killed outright, the watchdog still stops the daemons.
( while kill -0 $$ 2>/dev/null; do sleep 1; done; al_slurm_down "$sl"; rm -rf "$work" ) \
    </dev/null >/dev/null 2>&1 &

fail() {
    echo "FAIL: $*"
    for f in "$sl"/slurmctld.log "$sl"/slurmd.log; do
        [ -f "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }
    done
    exit 1
}

t0=$(date +%s.%N)
al_slurm_up "$sl" || fail "could not bring up the local Slurm"
printf 'slurm up in %.1f s (node idle)\n' "$(echo "$(date +%s.%N) - $t0" | bc)"

# ---- the experiment: 2 variants x 2 seeds, tiny
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

# trial,status and every number but wall-clock ones: equal for equal runs
trials() { cut -d, -f1 "$1/summary.csv" | tail -n +2 | sort; }
numbers() {
    /usr/bin/python3 - "$1/summary.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for r in sorted(rows, key=lambda r: r["trial"]):
    print(r["trial"], r["status"], r["final_train_loss"], r["val_loss"], r["best_val_loss"])
PY
}
elapsed() { echo "$(date +%s.%N) - $1" | bc; }

t0=$(date +%s.%N)
"$attnlab" sweep "$work/exp.yaml" --out "$work/local" --jobs 2 > "$work/local.log" 2>&1 ||
    fail "local sweep: $(tail -n 5 "$work/local.log")"
t_local=$(elapsed "$t0")

t0=$(date +%s.%N)
"$attnlab" sweep "$work/exp.yaml" --executor slurm --out "$work/onslurm" \
    > "$work/slurm.log" 2>&1 || fail "slurm sweep: $(tail -n 20 "$work/slurm.log")"
t_slurm=$(elapsed "$t0")
printf 'sweep of 4 trials: local (2 at a time) %.1f s, through Slurm %.1f s\n' "$t_local" "$t_slurm"

[ "$(trials "$work/local")" = "$(trials "$work/onslurm")" ] ||
    fail "trial sets differ: $(trials "$work/local") vs $(trials "$work/onslurm")"
[ "$(trials "$work/local" | wc -l)" = 4 ] || fail "expected 4 trials"
[ "$(numbers "$work/local")" = "$(numbers "$work/onslurm")" ] ||
    fail "results differ:\n$(numbers "$work/local")\nvs\n$(numbers "$work/onslurm")"
[ -f "$work/onslurm/report.md" ] || fail "no report.md after the slurm sweep"

# ---- resume: nothing left, nothing submitted
jobs_before=$(grep -c '"job_id"' "$work/onslurm/slurm.json")
"$attnlab" sweep "$work/exp.yaml" --executor slurm --out "$work/onslurm" > "$work/again.log" 2>&1 ||
    fail "resumed slurm sweep: $(tail -n 5 "$work/again.log")"
[ "$(grep -c '"job_id"' "$work/onslurm/slurm.json")" = "$jobs_before" ] ||
    fail "a finished sweep submitted again"

# ---- --no-wait, a cancelled task, collection and resubmission
"$attnlab" sweep "$work/exp.yaml" --executor slurm --out "$work/nowait" --no-wait \
    --slurm-arg=--begin=now+600 > "$work/nowait.log" 2>&1 ||
    fail "--no-wait: $(tail -n 5 "$work/nowait.log")"
job=$(sed -n 's/.*submitted batch job \([0-9]*\).*/\1/p' "$work/nowait.log")
[ -n "$job" ] || fail "--no-wait did not report the job id: $(cat "$work/nowait.log")"
scancel "${job}_1" || fail "scancel ${job}_1"
scontrol release "$job" >/dev/null 2>&1
scontrol update jobid="$job" starttime=now >/dev/null 2>&1 || fail "could not start $job"
"$attnlab" sweep "$work/exp.yaml" --out "$work/nowait" > "$work/collect.log" 2>&1
grep -q ',cancelled,\|,failed,' "$work/nowait/summary.csv" ||
    fail "the cancelled task was not recorded: $(cat "$work/nowait/summary.csv")"
grep -qi 'cancel' "$work/nowait/summary.csv" || fail "no Slurm reason recorded"
[ "$(grep -c ',ok,' "$work/nowait/summary.csv")" = 3 ] || fail "three tasks should have finished"
"$attnlab" sweep "$work/exp.yaml" --out "$work/nowait" > "$work/resubmit.log" 2>&1 ||
    fail "resubmission: $(tail -n 5 "$work/resubmit.log")"
[ "$(numbers "$work/local")" = "$(numbers "$work/nowait")" ] ||
    fail "after resubmission the results differ from the local run's"

# ---- --dry-run: the batch script, nothing submitted
"$attnlab" sweep "$work/exp.yaml" --executor slurm --out "$work/dry" --dry-run \
    --slurm-arg=--partition=debug > "$work/dry.log" 2>&1 || fail "--dry-run"
grep -q '^#SBATCH --array=0-3' "$work/dry.log" || fail "--dry-run: no array: $(cat "$work/dry.log")"
grep -q '^#SBATCH --partition=debug' "$work/dry.log" || fail "--dry-run: --slurm-arg not passed"
[ ! -e "$work/dry/slurm.json" ] || fail "--dry-run submitted"

echo "PASS: slurm sweep equals the local sweep; resume, --no-wait, cancel+resubmit, --dry-run"
