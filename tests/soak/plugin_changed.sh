#!/usr/bin/env bash
# plugin_changed.sh ATTNLAB PLUGIN - a sweep whose trials load a plugin
# (PLUGIN, the swa example, copied) after that plugin's file changed: the
# finished trials that load it are stale (a trial's identity holds the
# SHA-256 of every plugin file it loads, as `train --resume` checks), so
# they run again, into new trial directories (every trial here loads it:
# the file's plugins: list). The old results stay where they were, named
# by no row of summary.csv (which the report reads), so no configuration
# mixes seeds of the old build with the new. Unchanged, nothing runs again.
# bench-decode loads the file's plugins: and measures their variants.
set -euo pipefail
A=${1:?usage: plugin_changed.sh ATTNLAB PLUGIN}
P=${2:?usage: plugin_changed.sh ATTNLAB PLUGIN}
W=$(mktemp -d /tmp/attnlab-plugin-changed-XXXXXX)
trap 'rm -rf "$W"' EXIT
cd "$W"
export AL_GNUPLOT=/nonexistent/gnuplot   # no pictures needed
fail() { echo "plugin_changed: $*" >&2; exit 1; }

python3 - <<'PY'
import random
random.seed(11)
w = ["the ", "king ", "and ", "queen ", "of ", "sea ", ".\n"]
open("data.txt", "w").write("".join(random.choice(w) for _ in range(800)))
PY
cp "$P" libswa.so
cat >exp.yaml <<'YAML'
name: plugin-changed
plugins: [libswa.so]
data: {source: text, path: data.txt}
model: {n_layer: 1, d_model: 16, n_head: 2, seq_len: 16}
train: {steps: 4, batch_size: 2, eval_every: 2, eval_batches: 1, warmup_steps: 1, threads: 1}
sweep:
  seeds: 2
  grid:
    model.attention: [{variant: mha}, {variant: swa, window: 4}]
YAML
sweep() { "$A" sweep exp.yaml --out S --jobs 1 >"$1" 2>&1 || fail "sweep failed: $(tail -3 "$1")"; }
trials() { tail -n +2 S/summary.csv | cut -d, -f1 | sort; }

sweep log.1
grep -q "^sweep plugin-changed: 4 ok, 0 diverged, 0 failed, 0 kept from before" log.1 ||
    fail "first sweep: $(tail -1 log.1)"
before=$(trials)
sweep log.2
grep -q "0 ok, 0 diverged, 0 failed, 4 kept from before" log.2 || fail "unchanged: $(tail -1 log.2)"

printf 'rebuilt' >>libswa.so   # another file, still the same loadable plugin
sweep log.3
grep -q "^sweep plugin-changed: 4 ok, 0 diverged, 0 failed, 0 kept from before" log.3 ||
    fail "after the change: $(tail -1 log.3)"
after=$(trials)
[ "$(echo "$after" | wc -l)" -eq 4 ] || fail "summary.csv has not 4 trials: $after"
# every trial loads the plugin (the file's plugins: list), so none is kept
for t in $before; do
    echo "$after" | grep -qx "$t" && fail "trial $t kept its old result after the plugin changed"
    [ -f "S/$t/result.json" ] || fail "the old result of $t was not kept aside"
done
for t in $after; do
    grep -q '"status": *"ok"' "S/$t/result.json" || fail "$t has no new result"
done
grep -q "$(echo "$before" | head -1)" S/report.md && fail "report.md names an old trial"
sweep log.4
grep -q "0 ok, 0 diverged, 0 failed, 4 kept from before" log.4 || fail "again: $(tail -1 log.4)"
# bench-decode measures the variants of the file's plugins: too
"$A" bench-decode exp.yaml --variants "swa window=4; mha" --contexts 32 --tokens 2 --out b.csv \
    >bench.log 2>&1 || fail "bench-decode of the plugin's variant: $(tail -1 bench.log)"
grep -q '^"swa window=4",32,' b.csv || fail "bench-decode measured no swa: $(cat b.csv)"
echo "plugin_changed: 4 stale trials ran again beside their old results; the report has the new ones only"
