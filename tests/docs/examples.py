#!/usr/bin/env python3
"""examples.py SRCDIR BUILDDIR [PAGE...] - the docs' shell examples, run as written.

Every fenced block of README.md and docs/*.md (or of the PAGEs given) whose
info string starts with sh, bash or console is an example (docs/README.md,
"Shell examples"): illustrative when the info string also says
`illustrative`, else runnable. The runnable blocks of a page run in the
page's order, each under `bash -e -o pipefail`, in one fresh folder per
page holding copies of experiments/, include/ and tests/data/ and a build/
whose `attnlab` is a shim in front of BUILDDIR's: it adds the options in
$AL_DOCS_SET to every `attnlab train` and `attnlab sweep` (tiny settings
by default, TINY below). build/ is first on PATH. Prints every example it
runs with its output and time, then the counts; exit 1 when an example
exits non-zero (the page's folder is then kept and named), or when no
page has a runnable example (a parser that finds none must not pass).
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

# A few steps and evaluations, a test split of a few windows (scoring the
# KJV's whole 3 % took most of a tiny trial), 2 seeds: the tour's sweep in
# seconds.
TINY = ("--set train.steps=6 --set train.warmup_steps=2 --set train.eval_every=3 "
        "--set train.eval_batches=2 --set data.test_fraction=0.002 --set sweep.seeds=2")
SHELLS = ("sh", "bash", "console")
FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})\s*([^`\s]*)\s*(.*)$")
BLOCK_TIMEOUT_S = 120

SHIM = """#!/bin/sh
# doc_examples' attnlab: the real program, with $AL_DOCS_SET added to
# train and sweep (tests/docs/examples.py).
case "$1" in
    train|sweep) exec '{real}' "$@" $AL_DOCS_SET ;;
    *) exec '{real}' "$@" ;;
esac
"""


def blocks(page):
    """(line, kind, code) of each shell block of page; kind is 'runnable'
    or 'illustrative'. A console block's code is its '$ ' lines."""
    lines = open(page, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, mark, lang, rest = m.groups()
        j = i + 1
        while j < len(lines) and not (lines[j].strip().startswith(mark) and
                                      not lines[j].strip()[len(mark):].strip()):
            j += 1
        body = [l[len(indent):] if l.startswith(indent) else l.lstrip() for l in lines[i + 1:j]]
        if lang in SHELLS:
            if lang == "console":
                body = [l[2:] for l in body if l.startswith("$ ")]
            kind = "illustrative" if "illustrative" in rest.split() else "runnable"
            yield i + 1, kind, "\n".join(body) + "\n"
        i = j + 1


def make_dir(src, build):
    """A fresh folder for one page: copies of what examples read, and the shim."""
    d = tempfile.mkdtemp(prefix="attnlab-docs-")
    for sub in ("experiments", "include", "tests/data"):
        shutil.copytree(os.path.join(src, sub), os.path.join(d, sub))
    bdir = os.path.join(d, "build")
    os.mkdir(bdir)
    for name in os.listdir(build):
        if name != "attnlab":
            os.symlink(os.path.join(build, name), os.path.join(bdir, name))
    shim = os.path.join(bdir, "attnlab")
    with open(shim, "w") as f:
        f.write(SHIM.format(real=os.path.join(build, "attnlab")))
    os.chmod(shim, 0o755)
    return d


def run_page(src, build, page, runnable, env):
    """Runs the page's runnable blocks in order; the number that failed (0 or 1)."""
    d = make_dir(src, build)
    env = dict(env, PATH=os.path.join(d, "build") + os.pathsep + env.get("PATH", ""))
    rel = os.path.relpath(page, src)
    for line, code in runnable:
        print(f"=== {rel}:{line}: runnable, in {d}")
        print("".join("    " + l + "\n" for l in code.rstrip("\n").split("\n")), end="")
        t0 = time.monotonic()
        try:
            r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=d, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=BLOCK_TIMEOUT_S)
            rc, out = r.returncode, r.stdout.decode("utf-8", "replace")
        except subprocess.TimeoutExpired as e:
            rc, out = "timeout", (e.stdout or b"").decode("utf-8", "replace")
        dt = time.monotonic() - t0
        shown = out.rstrip("\n").split("\n")
        if rc == 0 and len(shown) > 25:
            shown = shown[:10] + [f"... ({len(shown) - 20} lines)"] + shown[-10:]
        print("".join("  | " + l + "\n" for l in shown if l or len(shown) > 1), end="")
        if rc != 0:
            print(f"--- FAILED: exit {rc} after {dt:.1f} s; the folder is kept: {d}")
            return 1
        print(f"--- ok, {dt:.1f} s")
    shutil.rmtree(d)
    return 0


def main():
    if len(sys.argv) < 3:
        print("usage: examples.py SRCDIR BUILDDIR [PAGE...]", file=sys.stderr)
        return 2
    src, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    pages = [os.path.join(src, p) for p in sys.argv[3:]] or \
        [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))
    env = dict(os.environ)
    env.setdefault("AL_DOCS_SET", TINY)
    print(f"AL_DOCS_SET={env['AL_DOCS_SET']}")
    n_run = n_ill = failed = 0
    t0 = time.monotonic()
    for page in pages:
        bs = list(blocks(page))
        runnable = [(line, code) for line, kind, code in bs if kind == "runnable"]
        for line, kind, code in bs:
            if kind == "illustrative":
                first = code.split("\n", 1)[0]
                print(f"=== {os.path.relpath(page, src)}:{line}: illustrative: {first}")
        n_ill += len(bs) - len(runnable)
        n_run += len(runnable)
        if runnable:
            failed += run_page(src, build, page, runnable, env)
    print(f"doc_examples: {n_run} runnable examples in {len(pages)} pages, {failed} page(s) "
          f"failed; {n_ill} illustrative; {time.monotonic() - t0:.1f} s")
    if n_run == 0:
        print("doc_examples: no runnable example found")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
