#!/usr/bin/env bash
# run_dir_lock.sh ATTNLAB - two `attnlab train` processes on one --out
# directory: while the first runs (paused mid-training at a named instant,
# AL_FAULT in al_util.h, holding the directory's lock), a second one is
# refused with exit 2 and one line, whether it asks for the directory plain
# (it is not empty), with --force (it is locked: the line names the first's
# pid) or with --resume (locked too); a `sweep` into it is refused as well.
# The first then finishes with exit 0 and its directory equals that of the
# same run made alone (config.yaml, model.safetensors, metrics.csv timing
# columns aside), and once it has ended the directory is free again.
set -euo pipefail
A=${1:?usage: run_dir_lock.sh ATTNLAB}
W=$(mktemp -d /tmp/attnlab-lock-XXXXXX)
pid=
cleanup() {
    if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; fi
    rm -rf "$W"
}
trap cleanup EXIT
cd "$W"
fail() { echo "run_dir_lock: $*" >&2; exit 1; }

python3 - <<'PY'
import random
random.seed(9)
w = ["the ", "king ", "and ", "queen ", "of ", "sea ", ".\n"]
open("data.txt", "w").write("".join(random.choice(w) for _ in range(800)))
PY
printf 'data: {source: text, path: data.txt}\nmodel: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16}\ntrain: {steps: 8, batch_size: 2, eval_every: 4, eval_batches: 1, warmup_steps: 1, threads: 1, checkpoint_every: 4}\n' >a.yaml
sed 's/seq_len: 16/seq_len: 8/' a.yaml >b.yaml   # another run: its files would not match
(printf 'name: s\n'; cat b.yaml) >s.yaml
"$A" train a.yaml --out alone >/dev/null 2>&1 || fail "the run alone failed"
untimed() { cut -d, -f1-5 "$1"; }
stopped() {
    local p comm state
    { read -r p comm state _ </proc/"$1"/stat; } 2>/dev/null && [ "$state" = T ]
}

AL_FAULT='step:/step@6!stop' "$A" train a.yaml --out D >first.out 2>first.err &
pid=$!
for _ in $(seq 1500); do stopped "$pid" && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.02; done
stopped "$pid" || fail "the first run never paused"

# second ARGS... PATTERN: refused with exit 2 and one line matching PATTERN
second() {
    local pattern=${*: -1} rc=0
    "$A" "${@:1:$#-1}" >second.out 2>&1 || rc=$?
    [ "$rc" -eq 2 ] || fail "'${*:1:$#-1}': exit $rc, not 2: $(cat second.out)"
    [ "$(wc -l <second.out)" -eq 1 ] || fail "'${*:1:$#-1}': not one line: $(cat second.out)"
    grep -Eq "$pattern" second.out || fail "'${*:1:$#-1}': $(cat second.out)"
    echo "refused: ${*:1:$#-1}: $(cat second.out)"
}
second train b.yaml --out D "^D: holds a run already; continue a stopped one with 'attnlab train --resume D'"
second train b.yaml --out D --force "^D: in use by another run \\(attnlab pid $pid\\)"
second train --resume D "^D: in use by another run \\(attnlab pid $pid\\)"
second sweep s.yaml --out D "^attnlab: D: not empty and not a sweep's results directory"

kill -CONT "$pid"
rc=0
{ wait "$pid"; } 2>/dev/null || rc=$?
pid=
[ "$rc" -eq 0 ] || fail "the first run ended with exit $rc: $(tail -1 first.err)"
cmp -s D/config.yaml alone/config.yaml || fail "D/config.yaml is not the first run's"
cmp -s D/model.safetensors alone/model.safetensors || fail "D/model.safetensors is not the first run's"
[ "$(untimed D/metrics.csv)" = "$(untimed alone/metrics.csv)" ] || fail "D/metrics.csv is not the first run's"
# the lock went with the first process: --force may now replace the run
"$A" train b.yaml --out D --force >force.out 2>&1 || fail "--force after the first run ended: $(tail -1 force.out)"
grep -q "^attnlab: train: --force: replacing what D holds$" force.out || fail "--force did not say so"
echo "run_dir_lock: the second process refused 4 ways; the first run intact"
