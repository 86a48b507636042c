#!/usr/bin/env bash
# scripts/check-layers must fail on what it exists to catch: in a made-up
# two-layer tree (low < high), an upward include, an upward call made
# through a hand-written declaration (no header: only the symbols show it),
# a cycle between two files of one layer, and a README whose order differs
# from meson's. A clean tree passes.
set -euo pipefail
check="$1"
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mk() {   # mk TREE: a clean two-layer tree with its archives
    local s="$1/src" b="$1/build"
    mkdir -p "$s/low" "$s/high" "$1/include/attnlab" "$1/variants" "$b/src"
    printf '1. `low/` - below\n2. `high/` - above\n' > "$s/README.md"
    printf "layer_names = ['low', 'high']\n" > "$s/meson.build"
    printf 'int sdk_x(void);\n' > "$1/include/attnlab/al_sdk.h"
    printf 'int low_a(void);\n' > "$s/low/al_low.h"
    printf 'int high_a(void);\n' > "$s/high/al_high.h"
    printf '#include "al_low.h"\nint low_a(void) { return 1; }\n' > "$s/low/a.c"
    printf 'int low_b(void) { return 2; }\n' > "$s/low/b.c"
    printf '#include "al_low.h"\n#include "al_high.h"\nint high_a(void) { return low_a(); }\n' \
        > "$s/high/a.c"
    printf 'int var_a(void) { return 3; }\n' > "$1/variants/v.c"
}
build() {   # build TREE: one archive per layer, as meson names them
    local s="$1/src" b="$1/build"
    for l in low high; do
        rm -f "$b/src/libattnlab_$l.a"
        objs=()
        for c in "$s/$l"/*.c; do
            o="$b/src/${l}_$(basename "$c").o"
            cc -c -I"$s/low" -I"$s/high" "$c" -o "$o"
            objs+=("$o")
        done
        ar rcs "$b/src/libattnlab_$l.a" "${objs[@]}"
    done
    cc -c "$1/variants/v.c" -o "$b/variants_v.c.o"
    ar rcs "$b/libattnlab_variants.a" "$b/variants_v.c.o"
}
expect_fail() {   # expect_fail TREE PATTERN WHAT
    if out=$(python3 "$check" "$1" "$1/build" 2>&1); then
        echo "FAIL: check-layers passed a tree with $3"; echo "$out"; exit 1
    fi
    grep -q -- "$2" <<<"$out" || { echo "FAIL: no '$2' for $3:"; echo "$out"; exit 1; }
    echo "ok: $3 refused"
}

mk "$t/clean"; build "$t/clean"
python3 "$check" "$t/clean" "$t/clean/build" >/dev/null || { echo "FAIL: clean tree refused"; exit 1; }
echo "ok: clean tree passes"

mk "$t/inc"; printf '#include "al_high.h"\nint low_b(void) { return 2; }\n' > "$t/inc/src/low/b.c"
build "$t/inc"
expect_fail "$t/inc" "layer 'low' includes 'al_high.h' of layer 'high' above it" "an upward include"

mk "$t/call"; printf 'int high_a(void);\nint low_b(void) { return high_a(); }\n' > "$t/call/src/low/b.c"
build "$t/call"
expect_fail "$t/call" "low/b.c calls high_a of high/a.c" "an upward call without a header"

mk "$t/cyc"
printf 'int low_b(void);\nint low_a(void) { return low_b(); }\n' > "$t/cyc/src/low/a.c"
printf 'int low_a(void);\nint low_b(void) { return low_a(); }\n' > "$t/cyc/src/low/b.c"
build "$t/cyc"
expect_fail "$t/cyc" "cycle between files: low/a.c -> low/b.c" "a cycle between files"

mk "$t/order"; build "$t/order"
printf '1. `high/` - above\n2. `low/` - below\n' > "$t/order/src/README.md"
expect_fail "$t/order" "write them in the same order" "a README order that differs from meson's"
