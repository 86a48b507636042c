#!/usr/bin/env bash
# signals.sh ATTNLAB - SIGINT and SIGTERM at 10 named instants of a train
# run (the AL_FAULT points of al_util.h: a temp file just created, complete
# but not renamed, renamed; between a checkpoint's two files; mid-training;
# before the first checkpoint). At each, the run stops itself (SIGSTOP), the
# test sends the signal and lets it go on: it must exit 130 (SIGINT) or 143
# (SIGTERM) with one line saying how to resume, leave no *.tmp.* file, and
# `attnlab train --resume DIR` must then end with the same model.safetensors
# and the same metrics.csv (timing columns aside) as a run never
# interrupted, bit for bit. A stale temp file of the run's own names,
# planted before each resume, is gone after it.
set -euo pipefail
A=${1:?usage: signals.sh ATTNLAB}
W=$(mktemp -d /tmp/attnlab-signals-XXXXXX)
pid=
cleanup() {
    if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; fi
    rm -rf "$W"
}
trap cleanup EXIT
cd "$W"
fail() { echo "signals: $*" >&2; exit 1; }

python3 - <<'PY'
import random
random.seed(5)
w = ["the ", "king ", "and ", "queen ", "of ", "sea ", ".\n"]
open("data.txt", "w").write("".join(random.choice(w) for _ in range(800)))
PY
cat >tiny.yaml <<'YAML'
data: {source: text, path: data.txt}
model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16}
train: {steps: 12, batch_size: 2, eval_every: 4, eval_batches: 1, warmup_steps: 1,
        threads: 1, checkpoint_every: 4}
YAML
"$A" train tiny.yaml --out ref >log.ref 2>&1 || fail "the uninterrupted run failed: $(tail -1 log.ref)"
untimed() { cut -d, -f1-5 "$1"; }

stopped() {
    local p comm state
    { read -r p comm state _ </proc/"$1"/stat; } 2>/dev/null && [ "$state" = T ]
}

n=0
# instant SIG FAULT: a run that stops at FAULT gets SIG, then must exit
# 128+SIG cleanly and resume to the uninterrupted run's bytes.
instant() {
    local sig=$1 fault=$2 rc=0 want d
    n=$((n + 1))
    d=run$n
    AL_FAULT="$fault!stop" "$A" train tiny.yaml --out "$d" >"out.$n" 2>"err.$n" &
    pid=$!
    for _ in $(seq 1500); do stopped "$pid" && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.02; done
    stopped "$pid" || fail "instant $n ($fault): the run never reached it"
    kill -"$sig" "$pid"
    kill -CONT "$pid"
    { wait "$pid"; } 2>/dev/null || rc=$?
    pid=
    want=$([ "$sig" = INT ] && echo 130 || echo 143)
    [ "$rc" -eq "$want" ] || fail "instant $n ($fault, SIG$sig): exit $rc, not $want"
    ls -a "$d" | grep -q '\.tmp\.' && fail "instant $n ($fault): temp files left: $(ls "$d")"
    local how="resume with: attnlab train --resume $d"
    [ -f "$d/config.yaml" ] || how="nothing was saved yet; run the same command again"
    tail -1 "err.$n" | grep -Fxq "attnlab: $([ "$sig" = INT ] && echo interrupted || echo terminated) (SIG$sig); $how" ||
        fail "instant $n ($fault): last line: $(tail -1 "err.$n")"
    : >"$d/model.safetensors.tmp.4242424"   # as a killed run leaves: the next one removes it
    : >"$d/notes.tmp.1"                     # not a name of the run's: kept
    if [ -f "$d/config.yaml" ]; then
        "$A" train --resume "$d" >"resume.$n" 2>&1 || fail "instant $n ($fault): resume failed: $(tail -1 "resume.$n")"
    else
        "$A" train tiny.yaml --out "$d" >"resume.$n" 2>&1 || fail "instant $n ($fault): the rerun failed: $(tail -1 "resume.$n")"
    fi
    cmp -s "$d/model.safetensors" ref/model.safetensors ||
        fail "instant $n ($fault): the resumed model differs from the uninterrupted one"
    [ "$(untimed "$d/metrics.csv")" = "$(untimed ref/metrics.csv)" ] ||
        fail "instant $n ($fault): the resumed metrics.csv differs"
    [ -f "$d/notes.tmp.1" ] || fail "instant $n ($fault): a file not of the run's was removed"
    rm "$d/notes.tmp.1"
    ls -a "$d" | grep -q '\.tmp\.' && fail "instant $n ($fault): temp files after resume: $(ls "$d")"
    echo "instant $n: SIG$sig at $fault: exit $rc, resumed identical"
}

instant INT  "write:config.yaml"                   # before anything is saved
instant TERM "rename:metrics.csv"                  # the step-0 evaluation, complete, not in place
instant INT  "step:/step@2"                        # mid-training, no checkpoint yet
instant TERM "write:train_state.safetensors"       # the first checkpoint begun
instant INT  "rename:train_state.safetensors"      # its state complete, not in place
instant TERM "renamed:train_state.safetensors"     # between the state and the model file
instant INT  "write:model.safetensors"             # the model file begun
instant TERM "rename:model.safetensors@2"          # the second checkpoint's model, complete
instant INT  "write:metrics.csv@3"                 # an evaluation's rewrite begun
instant TERM "step:/step@11"                       # the last step, before the final save
[ "$n" -eq 10 ] || fail "ran $n instants, not 10"
echo "signals: 10 instants, each exit 130/143, no temp file, resume identical"
