#!/usr/bin/env bash
# disk_full.sh ATTNLAB - a training run whose writes start failing.
#
# A run is stopped after its first checkpoint, then resumed where the next
# checkpoint cannot be written: in a tmpfs with less room left than one
# train state (a real "No space left on device"; when mount is allowed
# here), and under an RLIMIT_FSIZE smaller than one train state ("File too
# large", SIGXFSZ ignored as a shell would). Each time: exit 1 (a run-time
# failure, not bad input), one error line naming the file that could not
# be written, no temp file left, the previous checkpoint loadable (score)
# and resumable to the very end an uninterrupted run reaches (the final
# model.safetensors, byte for byte), and metrics.csv whole with every
# evaluation up to the checkpoint.
set -euo pipefail
A=${1:?usage: disk_full.sh ATTNLAB}
W=$(mktemp -d /tmp/attnlab-diskfull-XXXXXX)
mnt=
cleanup() {
    [ -n "$mnt" ] && umount "$mnt" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
cd "$W"
fail() { echo "disk_full: $*" >&2; exit 1; }

python3 -c '
import random
random.seed(5)
w = ["the ", "king ", "and ", "queen ", "of ", "sea ", ".\n"]
open("data.txt", "w").write("".join(random.choice(w) for _ in range(900)))'
cat >run.yaml <<EOF
data: {source: text, path: $W/data.txt}
model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16}
train: {steps: 12, batch_size: 2, eval_every: 2, eval_batches: 1, warmup_steps: 1,
        threads: 1, checkpoint_every: 4}
EOF
"$A" train run.yaml --out full >/dev/null 2>&1 || fail "the uninterrupted run failed"
state_bytes=$(stat -c %s full/train_state.safetensors)

# check DIR HOW: DIR holds a run stopped at step 4 whose resume (by the
# command HOW, which limits the writes) has just failed.
check() {
    local dir=$1 how=$2 rc=0
    $how "$A" train --resume "$dir" >"$dir.log" 2>&1 || rc=$?
    [ $rc -eq 1 ] || fail "$how: exit $rc, not 1 (a run-time failure)"
    # progress lines (one per evaluation), then the error: one line
    tail -1 "$dir.log" | grep -Eq "^$dir/train_state\.safetensors: write failed: (No space left \
on device|File too large)$" || fail "$how: the error does not name the file: $(cat "$dir.log")"
    [ "$(grep -vc '^train step' "$dir.log")" -eq 1 ] || fail "$how: more than one error line"
    [ -z "$(find "$dir" -name '*.tmp.*')" ] || fail "$how: a temp file was left: $(ls "$dir")"
    # what was there is whole: the checkpoint loads, metrics.csv has its rows
    "$A" score "$dir/model.safetensors" data.txt >/dev/null 2>&1 ||
        fail "$how: the previous checkpoint does not load"
    python3 - "$dir/metrics.csv" <<'EOF' || fail "$how: metrics.csv is not whole"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
assert rows[0][0] == "step" and all(len(r) == 7 for r in rows), rows
assert [int(r[0]) for r in rows[1:]][:3] == [0, 2, 4], rows
EOF
    # and resumable: elsewhere, the run ends as one never interrupted
    rm -rf again && cp -r "$dir" again
    "$A" train --resume again >/dev/null 2>&1 || fail "$how: the checkpoint does not resume"
    cmp -s again/model.safetensors full/model.safetensors ||
        fail "$how: the resumed run ends differently"
    echo "disk_full: $how: $(tail -1 "$dir.log")"
}

# A file-size limit below one train state; SIGXFSZ ignored, so the write
# fails with EFBIG rather than killing the process.
fsize() { (trap '' XFSZ; exec prlimit --fsize=$((state_bytes / 2)) "$@"); }
"$A" train run.yaml --out limited --stop-after 4 >/dev/null 2>&1 || fail "the first part failed"
used_k=$(du -sk limited | cut -f1)
check limited fsize
# ... and with SIGXFSZ at its default (it would kill the process with no
# message): attnlab ignores it itself (issue 26), so the same clear error
fsize_raw() { (trap - XFSZ; exec prlimit --fsize=$((state_bytes / 2)) "$@"); }
"$A" train run.yaml --out limited2 --stop-after 4 >/dev/null 2>&1 || fail "the first part failed"
check limited2 fsize_raw

# A tmpfs with room for the run so far and about half a train state more.
mkdir small
if mount -t tmpfs -o size=$(( (used_k + state_bytes / 2048) / 4 * 4 + 8 ))k tmpfs small \
        2>/dev/null; then
    mnt=$W/small
    "$A" train run.yaml --out small/run --stop-after 4 >/dev/null 2>&1 || fail "the first part failed"
    plain() { "$@"; }
    check small/run plain
else
    echo "disk_full: mount is not allowed here: tmpfs skipped, RLIMIT_FSIZE only"
fi
