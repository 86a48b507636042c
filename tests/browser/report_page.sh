#!/usr/bin/env bash
# report_page.sh ATTNLAB SWA_PLUGIN SRCDIR OUTDIR - index.html in a real
# browser (docs/report-page.md). Two small real sweeps (seconds each), each
# page opened from file:// in headless Chromium by report_page.py, which
# fails on a console error or any request, and checks sorting, the trial
# links, the tooltips, the cost axes and the curve toggles:
#   default: mha, mqa, gqa, mla and a local window, 2 seeds, the cache
#     also at 64 tokens (where the local window caps it, so the two byte
#     axes place the points differently);
#   plugins: a plugin variant (swa) in a layer stack, a local:mqa stack,
#     evaluations through f32/int8/int4 caches, and the summary columns
#     other writers add (decode_bytes_per_token, train_flops,
#     decode_tokens_per_s: made up here) offered as cost axes.
# The pages and their screenshots stay in OUTDIR (paths printed).
# Exit 77 (skipped, saying why) without Chromium, chromedriver or selenium
# (scripts/test installs chromium, chromium-driver and python3-selenium).
set -euo pipefail
A=${1:?usage: report_page.sh ATTNLAB SWA_PLUGIN SRCDIR OUTDIR}
SWA=${2:?}
SRC=${3:?}
OUT=${4:?}
PY=/usr/bin/python3
CHROMIUM=${AL_CHROMIUM:-/usr/bin/chromium}
DRIVER=${AL_CHROMEDRIVER:-/usr/bin/chromedriver}

skip() { echo "report_page: skipped: $*"; exit 77; }
[ -x "$CHROMIUM" ] || skip "no Chromium at $CHROMIUM (Debian: apt-get install chromium)"
[ -x "$DRIVER" ] || skip "no chromedriver at $DRIVER (Debian: apt-get install chromium-driver)"
"$PY" -c 'import selenium' 2>/dev/null ||
    skip "no selenium for $PY (Debian: apt-get install python3-selenium)"

rm -rf "$OUT"
mkdir -p "$OUT"
cd "$OUT"
DATA="$SRC/tests/data/kjv_genesis.txt"
COMMON="data: {source: text, path: $DATA, val_fraction: 0.1, test_fraction: 0.1}
train: {steps: 40, batch_size: 4, eval_every: 10, eval_batches: 2, warmup_steps: 5, threads: 1}
report: {context: 64}"

cat >default.yaml <<YAML
name: default-tiny
description: The default sweep's comparison in miniature, for the report page's browser test.
$COMMON
model: {n_layer: 1, d_model: 16, n_head: 4, d_head: 4, seq_len: 16}
sweep:
  seeds: 2
  baseline: {model.attention: {variant: mha}}
  grid:
    model.attention:
      - {variant: mha}
      - {variant: mqa}
      - {variant: gqa, n_kv_head: 2}
      - {variant: mla, d_latent: 8, d_rope: 4}
      - {variant: local, window: 4}
YAML

cat >plugins.yaml <<YAML
name: plugins-stacks-int
description: A plugin variant in a layer stack, a local:mqa stack and int caches, for the report page's browser test.
plugins: [$SWA]
$COMMON
model: {n_layer: 2, d_model: 16, n_head: 4, d_head: 4, seq_len: 16}
eval: {kv_dtypes: [f32, int8, int4], contexts: [16], tokens: 512}
sweep:
  seeds: 2
  baseline: {model.layer_attention: [{variant: mha}, {variant: mha}]}
  grid:
    model.layer_attention:
      - [{variant: mha}, {variant: mha}]
      - [{variant: swa, window: 4}, {variant: mha}]
      - [{variant: local, window: 4}, {variant: mqa}]
YAML

sweep() {
    "$A" sweep "$1.yaml" --jobs 2 --out "$1" >"$1.log" 2>&1 || {
        tail -20 "$1.log"
        echo "report_page: the sweep $1.yaml failed"
        exit 1
    }
    [ -s "$1/index.html" ] || { echo "report_page: $1/index.html was not written"; exit 1; }
}

# The columns other writers add to summary.csv, made up from the cache
# sizes (all that matters here is that the page offers and draws them).
add_cost_columns() {
    "$PY" -c '
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
kv = rows[0].index("kv_bytes_per_token")
names = ["decode_bytes_per_token", "train_flops", "decode_tokens_per_s"]
for n in names:   # the writer may have the column already (blank): fill it in place
    if n not in rows[0]:
        rows[0].append(n)
        for r in rows[1:]:
            r.append("")
col = [rows[0].index(n) for n in names]
for i, r in enumerate(rows[1:], 1):
    b = float(r[kv] or 0)
    r += [""] * (len(rows[0]) - len(r))
    vals = ["%.0f" % (9 * b + 5000), "%.0f" % (1e12 + 3e8 * b), "%.1f" % (2e4 / (1 + b / 100) + i)]
    for c, v in zip(col, vals):
        r[c] = v
csv.writer(open(sys.argv[1], "w", newline="")).writerows(rows)
' "$1/summary.csv"
    "$A" report "$1" >/dev/null
}

sweep default
sweep plugins
add_cost_columns plugins
grep -q "Checkpoints through the cache" plugins/index.html ||
    { echo "report_page: the plugins page lacks the section on evaluations through the cache"; exit 1; }

for c in default plugins; do
    extra=(--must-move)
    [ $c = plugins ] && extra+=(--extra-costs)
    echo "report_page: case $c: $OUT/$c/index.html"
    "$PY" "$SRC/tests/browser/report_page.py" "$c/index.html" "$OUT/$c-page.png" "${extra[@]}"
done
