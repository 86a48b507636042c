#!/usr/bin/env bash
# kill9.sh ATTNLAB - the kill -9 soak.
#
# A small sweep (3 trials, checkpoints every 10 steps, 2 workers at a time)
# is run again and again into one results directory, each time killed with
# SIGKILL at another instant of its life, and resumed by the next run:
# the runner at start-up and while it writes summary.csv and the report,
# workers while they write a checkpoint (between its two files too),
# metrics.csv and result.json, and mid-training (the worker, or the runner
# while a worker is paused). The instants are named points in the code
# (AL_FAULT, al_util.h), so they are hit exactly on any machine, however
# loaded. After every kill each JSON file parses, summary.csv is whole and
# every model.safetensors loads. At the end every trial is present once,
# and summary.csv (timing columns aside), every result's losses, every
# metrics.csv (timing columns aside) and every final model.safetensors
# equal those of a sweep never interrupted, bit for bit.
set -euo pipefail
A=${1:?usage: kill9.sh ATTNLAB}
W=$(mktemp -d /tmp/attnlab-kill9-XXXXXX)
runner=
cleanup() {
    if [ -n "$runner" ]; then kill -9 "$runner" $(children "$runner") 2>/dev/null || true; fi
    rm -rf "$W"
}
trap cleanup EXIT
export AL_GNUPLOT=/nonexistent/gnuplot   # the plots are not what is soaked here
cd "$W"

fail() {
    echo "kill9: $*" >&2
    for f in log.*; do [ -f "$f" ] && { echo "--- $f" >&2; tail -5 "$f" >&2; }; done
    exit 1
}

python3 - <<'EOF'
import random
random.seed(7)
words = ["the ", "king ", "and ", "queen ", "of ", "a ", "land ", "sea ", "shall ", ".\n"]
open("data.txt", "w").write("".join(random.choice(words) for _ in range(2500)))
EOF
cat >soak.yaml <<'EOF'
name: soak
data: {source: text, path: data.txt}
model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16}
train: {steps: 80, batch_size: 4, eval_every: 20, eval_batches: 2, warmup_steps: 5,
        threads: 1, checkpoint_every: 10}
sweep:
  grid:
    model.attention: [{variant: mha}, {variant: mqa}, {variant: mla, d_latent: 8, d_rope: 4}]
EOF
sweep() { { "$A" sweep soak.yaml --jobs 2 --out "$@"; } 2>&1; }

sweep ref >log.ref 2>&1 || fail "the uninterrupted sweep failed"

# ---------------------------------------------------------------- checks

# After a kill: whatever is on disk is whole.
check_files() {
    python3 - S <<'EOF' || fail "instant $n: a file is not whole"
import csv, glob, json, os, sys
d = sys.argv[1]
for p in glob.glob(d + "/*.json") + glob.glob(d + "/*/*.json"):
    json.load(open(p))
if os.path.exists(d + "/summary.csv"):
    rows = list(csv.reader(open(d + "/summary.csv")))
    assert rows[0][0] == "trial" and len(rows) == 4, rows
    assert len({r[0] for r in rows[1:]}) == 3, "a trial listed twice"
EOF
    for m in S/*/model.safetensors; do
        [ -f "$m" ] || continue
        "$A" score "$m" data.txt >/dev/null 2>&1 || fail "instant $n: $m does not load"
    done
}

# The children of pid, and whether a process is stopped.
children() { cat /proc/"$1"/task/*/children 2>/dev/null || true; }
stopped() {
    local pid comm state
    { read -r pid comm state _ </proc/"$1"/stat; } 2>/dev/null && [ "$state" = T ]
}

n=0
# instant WHO FAULT: a run killed at the named point FAULT. WHO says what
# must have died: the runner (its exit status is then 137), a worker (the
# runner records it killed by signal 9), either (result.json is written by
# the worker, or by the runner for a worker that died without one), or a
# worker after its result was in place (the runner keeps the result; the
# worker never said "ok").
instant() {
    local who=$1 fault=$2 rc=0
    n=$((n + 1))
    AL_FAULT=$fault sweep S >"log.$n" 2>&1 || rc=$?
    case $who in
    runner) [ $rc -eq 137 ] || fail "instant $n ($fault): the runner was not killed (exit $rc)" ;;
    worker) grep -q "killed by signal 9" "log.$n" ||
                fail "instant $n ($fault): no worker was killed (exit $rc)" ;;
    either) [ $rc -eq 137 ] || grep -q "killed by signal 9" "log.$n" ||
                fail "instant $n ($fault): nothing was killed (exit $rc)" ;;
    result) [ $rc -eq 0 ] && ! grep -qs ": ok$" S/*/log.txt ||
                fail "instant $n ($fault): no worker died after its result (exit $rc)" ;;
    esac
    check_files
}

# paused KILL FAULT: a run whose workers stop (SIGSTOP) at FAULT; the test
# then SIGKILLs, from outside, each stopped worker (KILL=worker) or the
# runner (KILL=runner, and the paused worker must die with it).
paused() {
    local what=$1 fault=$2 rc=0 killed=0
    n=$((n + 1))
    AL_FAULT="$fault!stop" "$A" sweep soak.yaml --jobs 2 --out S >"log.$n" 2>&1 &
    runner=$!   # attnlab itself, not a subshell: its children are the workers
    for _ in $(seq 3000); do
        kill -0 "$runner" 2>/dev/null || break
        for c in $(children "$runner"); do
            stopped "$c" || continue
            killed=$((killed + 1))
            if [ "$what" = worker ]; then
                kill -9 "$c"
            else
                kill -9 "$runner"
                for _ in $(seq 500); do [ -d /proc/"$c" ] || break; sleep 0.01; done
                [ -d /proc/"$c" ] && fail "instant $n: worker $c outlived the runner"
                break 2
            fi
        done
        sleep 0.02
    done
    if [ $killed -eq 0 ] && kill -0 "$runner" 2>/dev/null; then
        kill -9 "$runner" $(children "$runner")
        fail "instant $n ($fault): no worker paused within a minute"
    fi
    { wait "$runner"; } 2>/dev/null || rc=$?   # (bash would announce the kill)
    runner=
    [ $killed -gt 0 ] || fail "instant $n ($fault): no worker paused (exit $rc)"
    [ "$what" = worker ] || [ $rc -eq 137 ] || fail "instant $n: the runner survived (exit $rc)"
    check_files
}

# ---------------------------------------------------------------- the instants

instant runner 'rename:sweep.json'                  # start-up: the marker not in place
instant runner 'renamed:sweep.json'                 # the marker in place, nothing started
instant runner 'rename:trial.json'                  # preparing the first trial
instant worker 'write:train_state.safetensors'      # the first checkpoint begun
instant worker 'rename:train_state.safetensors@2'   # a checkpoint's state complete, not in place
instant worker 'renamed:train_state.safetensors@2'  # between a checkpoint's two files
instant worker 'rename:model.safetensors'           # its model file complete, not in place
paused runner 'renamed:model.safetensors'           # the runner, a worker paused after a checkpoint
paused worker 'step:/step@7'                        # workers mid-training
paused runner 'step:/step@3'                        # the runner, a worker paused mid-training
instant worker 'write:metrics.csv@2'                # an evaluation's metrics begun
instant worker 'rename:metrics.csv'                 # ... complete, not in place
instant either 'write:result.json'                  # training done, the result not written
instant either 'rename:result.json'                 # the result complete, not in place
instant result 'renamed:result.json'                # the result in place, the worker not gone
instant runner 'write:summary.csv'                  # every trial done: the summary begun
instant runner 'rename:summary.csv'                 # ... complete, not in place
instant runner 'renamed:summary.csv'                # ... in place, the report not begun
instant runner 'write:report.md'                    # the report begun
instant runner 'rename:report.md'                   # ... complete, not in place
[ $n -ge 20 ] || fail "only $n instants"

# ---------------------------------------------------------------- the end

sweep S >log.final 2>&1 || fail "the final resume failed"
grep -q "0 ok, 0 diverged, 0 failed, 3 kept from before" log.final ||
    fail "the final resume trained again: $(tail -1 log.final)"
python3 - <<'EOF' || fail "the resumed sweep differs from the uninterrupted one"
import csv, json
def rows(d):   # summary.csv without tokens_per_s and wall_s
    r = list(csv.reader(open(d + "/summary.csv")))
    i, j = r[0].index("tokens_per_s"), r[0].index("wall_s")
    return [[x for k, x in enumerate(row) if k not in (i, j)] for row in r]
a, b = rows("ref"), rows("S")
assert a == b, (a, b)
assert len({r[0] for r in b[1:]}) == len(b) - 1 == 3, "a trial missing or listed twice"
status = b[0].index("status")
for r in b[1:]:
    assert r[status] == "ok", r
    x, y = (json.load(open(d + "/" + r[0] + "/result.json")) for d in ("ref", "S"))
    for k in ("status", "steps_done", "final_train_loss", "val_loss", "best_val_loss",
              "val_accuracy"):
        assert x[k] == y[k], (r[0], k, x[k], y[k])
    m = [[l.split(",")[:5] for l in open(d + "/" + r[0] + "/metrics.csv")] for d in ("ref", "S")]
    assert m[0] == m[1], (r[0], "metrics.csv")
EOF
for t in ref/*/model.safetensors; do
    cmp -s "$t" "S/${t#ref/}" || fail "${t#ref/} differs from the uninterrupted run's"
done
left=$(find S -name '*.tmp.*' | head -3)
[ -z "$left" ] || fail "temp files left behind: $left"
echo "kill9: $n kills survived; the resumed sweep equals the uninterrupted one bit for bit"
