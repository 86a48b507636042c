#!/usr/bin/env bash
# setup_scripts.sh SRCDIR BUILDDIR - what scripts/deps.sh promises a new
# user (README "Set-up"): a user without root and without a sudo that
# needs no password gets exit 2 and the exact apt-get command before
# anything else; AL_NO_INSTALL=1 installs nothing and goes on; optional
# packages only return 1; a compiler that cannot build a program is named
# with the packages to install; a half-made build folder is told from a
# valid one; scripts/run ends with the `export PATH=...` line that makes
# `attnlab` the clone's build/attnlab (docs/setup.md).
set -euo pipefail
S=${1:?usage: setup_scripts.sh SRCDIR BUILDDIR}
B=${2:?usage: setup_scripts.sh SRCDIR BUILDDIR}
W=$(mktemp -d /tmp/attnlab-setup-test-XXXXXX)
trap 'rm -rf "$W"' EXIT
fail() { echo "setup_scripts: $*" >&2; exit 1; }
chmod 755 "$W"
cp "$S/scripts/deps.sh" "$W/"
chmod 644 "$W/deps.sh"

# as a user without root and without sudo: setpriv from root, else ourselves
if [ "$(id -u)" -eq 0 ]; then
    command -v setpriv >/dev/null || { echo "setup_scripts: no setpriv; skipped" >&2; exit 77; }
    as_user() {
        setpriv --reuid=65534 --regid=65534 --clear-groups \
            env -i PATH=/usr/bin:/bin HOME="$W" "$@"
    }
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    echo "setup_scripts: this user has a password-less sudo; skipped" >&2; exit 77
else
    as_user() { env -i PATH=/usr/bin:/bin HOME="$W" "$@"; }
fi
rc=0
a=attnlab-no-such-package-a b=attnlab-no-such-package-b
out=$(as_user bash -c ". $W/deps.sh; al_ensure_packages bash $a $b; echo reached" 2>&1) || rc=$?
[ $rc -eq 2 ] || fail "a missing package without root: exit $rc: $out"
want="attnlab: missing packages: $a $b; as root, run: apt-get install $a $b"
want+="  (or set AL_NO_INSTALL=1 if you provide them yourself)"
[ "$out" = "$want" ] || fail "a missing package without root said: $out"
echo "without root or sudo: exit 2, one line with the apt-get command"

out=$(as_user env AL_NO_INSTALL=1 bash -c ". $W/deps.sh; al_ensure_packages $a; echo went on" 2>&1)
[ "$out" = "went on" ] || fail "AL_NO_INSTALL=1: $out"
rc=0
out=$(as_user bash -c ". $W/deps.sh; al_ensure_packages --optional $a" 2>&1) || rc=$?
[ $rc -eq 1 ] && [ -z "$out" ] || fail "an optional package: exit $rc: $out"
echo "AL_NO_INSTALL=1 goes on; optional packages return 1 quietly"

rc=0
out=$(CC=/bin/false bash -c ". $W/deps.sh; al_check_toolchain" 2>&1) || rc=$?
[ $rc -eq 2 ] && [[ "$out" == *"cannot build a program"*"(install gcc and libc6-dev)" ]] ||
    fail "CC=/bin/false: exit $rc: $out"
out=$(bash -c ". $W/deps.sh; al_check_toolchain; echo ok" 2>&1)
[ "$out" = ok ] || fail "this machine's toolchain: $out"
echo "a compiler that cannot build: exit 2 naming gcc and libc6-dev; this one builds"

mkdir -p "$W/half/meson-private"
: >"$W/half/meson-private/cmd_line.txt"
bash -c ". $W/deps.sh; al_build_dir_valid $W/half" && fail "a half-made build folder counted as valid"
bash -c ". $W/deps.sh; al_build_dir_valid $B" || fail "the build folder $B counted as invalid"
echo "a half-made build folder is told from a valid one"

# scripts/run ends with the line that puts build/ on PATH, and pasted into a
# shell it makes `attnlab` (as the docs write it) the clone's build/attnlab.
# A clone whose path needs quoting; deps.sh's installing and building
# replaced by nothing, the sweep by a stub that writes the report.
C="$W/a clone \$HOME \"q\""
mkdir -p "$C/scripts" "$C/build"
cp "$S/scripts/run" "$C/scripts/run"
{ cat "$S/scripts/deps.sh"; echo 'al_ensure_packages() { :; }; al_build() { :; }'; } \
    >"$C/scripts/deps.sh"
printf '#!/bin/sh\nmkdir -p results/default && echo "# report" >results/default/report.md\n' \
    >"$C/build/attnlab"
chmod +x "$C/scripts/run" "$C/build/attnlab"
out=$(cd / && "$C/scripts/run" 2>&1 >/dev/null) || fail "scripts/run with a stub sweep: $out"
last=$(printf '%s\n' "$out" | tail -n 1)
want="export PATH=\"$W/a clone \\\$HOME \\\"q\\\"/build:\$PATH\""
[ "$last" = "$want" ] || fail "scripts/run's last line: $last (want: $want)"
found=$(cd / && eval "$last" && command -v attnlab) || fail "after $last: no attnlab on PATH"
[ "$found" = "$C/build/attnlab" ] || fail "after $last, attnlab is $found, not $C/build/attnlab"
echo "scripts/run ends with: $last; pasted, attnlab is build/attnlab"
