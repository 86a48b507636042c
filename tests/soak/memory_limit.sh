#!/usr/bin/env bash
# memory_limit.sh ATTNLAB - sizes under `ulimit -v`: a run whose estimate
# (al_memory.h) does not fit what the limit leaves is refused before any
# allocation (exit 2, one line naming the key and the bytes, no directory
# made); one that fits trains (exit 0); none ends in SIGABRT, a hang or
# "out of memory". `kv` counts a model of 10^8 layers without building its
# tensor table. Skipped (77) under ASan, whose shadow memory needs
# terabytes of address space.
set -euo pipefail
A=${1:?usage: memory_limit.sh ATTNLAB}
if [ "${AL_SANITIZED:-0}" = 1 ]; then
    echo "memory_limit: skipped: ASan reserves terabytes of address space, ulimit -v cannot apply"
    exit 77
fi
W=$(mktemp -d /tmp/attnlab-memory-XXXXXX)
trap 'rm -rf "$W"' EXIT
cd "$W"
fail() { echo "memory_limit: $*" >&2; exit 1; }
# OpenBLAS's own threads, started before main, need more address space
# than the limit leaves (and its allocator waits forever when it fails)
export OPENBLAS_NUM_THREADS=1
LIMIT_KB=300000

python3 - <<'PY'
import random
random.seed(13)
w = ["the ", "king ", "and ", "queen ", "of ", "sea ", ".\n"]
open("data.txt", "w").write("".join(random.choice(w) for _ in range(3000)))
PY
printf 'data: {source: text, path: data.txt}\nmodel: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16}\ntrain: {steps: 2, batch_size: 2, eval_every: 1, eval_batches: 1, warmup_steps: 0, threads: 1}\n' >t.yaml

limited() { (ulimit -v "$LIMIT_KB"; exec timeout 120 "$A" "$@"); }

n_ok=0 n_refused=0
for b in 2 500 1000 1500 2000 2500 2700 2900 3100 5000 100000 2147483647; do
    rc=0
    limited train t.yaml --out "run$b" --set train.batch_size=$b >"out.$b" 2>&1 || rc=$?
    case $rc in
    0) n_ok=$((n_ok + 1)) ;;
    2) n_refused=$((n_refused + 1))
       [ "$(wc -l <"out.$b")" -eq 1 ] || fail "batch $b: not one line: $(cat "out.$b")"
       grep -Eq "^t\.yaml: 'train\.batch_size' \($b\) x 'model\.seq_len' \(16\): .* need [0-9]+ bytes .*, more than the [0-9]+ bytes .* of what ulimit -v \([0-9]+ bytes\) leaves" "out.$b" ||
           fail "batch $b: $(cat "out.$b")"
       [ -e "run$b" ] && fail "batch $b: refused, but run$b was made" ;;
    *) fail "batch $b: exit $rc: $(tail -2 "out.$b")" ;;
    esac
    echo "batch $b: exit $rc $(tail -1 "out.$b" | cut -c1-120)"
done
[ $n_ok -ge 3 ] && [ $n_refused -ge 3 ] || fail "$n_ok trained, $n_refused refused: the limit does not bite where expected"

rc=0
limited train t.yaml --out deep --set model.n_layer=16384 --set model.d_model=16384 >out.deep 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "^t\.yaml: 'model\.n_layer' (16384) x 'model\.d_model' (16384): 52777099214848 parameters" out.deep ||
    fail "n_layer and d_model at their largest: exit $rc: $(cat out.deep)"
rc=0
limited kv t.yaml --set model.n_layer=16384 >out.kv 2>&1 || rc=$?
[ $rc -eq 0 ] && grep -q "^parameters: 50860048$" out.kv || fail "kv of 16384 layers: exit $rc: $(cat out.kv)"
echo "memory_limit: under ulimit -v $LIMIT_KB KiB: $n_ok batches trained, $n_refused refused with the key and the bytes; kv counted 16384 layers"
