#!/usr/bin/env python3
"""links.py SRCDIR - every relative link in README.md and docs/*.md works.

A link [text](target) or [label]: target whose target is not a URL must
name a file or folder that exists (relative to the page), and a #anchor
must name a heading of the target page as GitHub makes anchors: the
heading's rendered text, lowercased, every character that is not a
letter, digit, space, '-' or '_' dropped, spaces turned into '-', and a
repeated anchor given -1, -2, ... in order (explicit <a name=...> and
id="..." anchors count too). Links inside code (fenced blocks and `spans`)
are not links. Prints every broken link as FILE:LINE: target: why, and
a count; exit 1 when any is broken.
"""
import glob
import os
import re
import sys

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
INLINE = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"|\sid=\"([^\"]+)\"")


def prose_lines(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if m:
            mark = m.group(1)
            if fence is None:
                fence = mark
                continue
            if mark[0] == fence[0] and len(mark) >= len(fence) and not line.strip()[len(mark):]:
                fence = None
                continue
        if fence is None:
            yield n, line


def strip_code_spans(line):
    return re.sub(r"(`+)(.+?)\1", "", line)


def slug(heading):
    """GitHub's anchor for a heading's source text."""
    t = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)    # links: their text
    t = re.sub(r"<[^>]+>", "", t)                             # inline HTML tags
    t = t.replace("`", "").replace("*", "")
    t = t.strip().lower()
    t = "".join(c for c in t if c.isalnum() or c in " -_")
    return t.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, out = {}, set()
        text = open(path, encoding="utf-8").read()
        for _, line in prose_lines(text):
            m = HEADING.match(line)
            if m:
                s = slug(m.group(2))
                k = seen.get(s, 0)
                seen[s] = k + 1
                out.add(s if k == 0 else f"{s}-{k}")
            for a, b in HTML_ANCHOR.findall(line):
                out.add(a or b)
        cache[path] = out
    return cache[path]


def targets(text):
    for n, line in prose_lines(text):
        m = REFDEF.match(line)
        if m:
            yield n, m.group(1)
            continue
        for m in INLINE.finditer(strip_code_spans(line)):
            yield n, m.group(1)


def check(src, page):
    bad = []
    text = open(page, encoding="utf-8").read()
    count = 0
    for n, target in targets(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):   # http:, mailto:, ...
            continue
        count += 1
        path, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        rel = os.path.relpath(page, src)
        if not os.path.exists(dest):
            bad.append(f"{rel}:{n}: {target}: no such file {os.path.relpath(dest, src)}")
            continue
        if anchor and dest.endswith(".md") and anchor not in anchors(dest):
            bad.append(f"{rel}:{n}: {target}: no heading of {os.path.relpath(dest, src)} "
                       f"has the anchor '#{anchor}'")
    return count, bad


def self_test():
    """The checker on a made-up page: it must pass what GitHub resolves and
    flag exactly the broken links (so a checker that finds nothing fails)."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        os.mkdir(os.path.join(d, "docs"))
        with open(os.path.join(d, "docs", "a.md"), "w") as f:
            f.write("# Title: `model.kv_share` (K/V)\n\n## Same\n\n## Same\n\n"
                    "[ok](#title-modelkv_share-kv) [ok](#same-1) [ok](../docs/a.md#same)\n"
                    "[bad](#same-2) [bad](b.md) [bad](a.md#nope) `[code](x.md)`\n"
                    "```sh\n[fenced](y.md)\n```\n[ref]: c.md\n[web](https://x.invalid/#q)\n")
        n, bad = check(d, os.path.join(d, "docs", "a.md"))
        got = sorted(b.split(": ")[1] for b in bad)
        want = ["#same-2", "a.md#nope", "b.md", "c.md"]
        if n != 7 or got != want:
            print(f"links: the checker itself is wrong: {n} links, flagged {got}, want 7 and {want}")
            return False
    return True


def main():
    if not self_test():
        return 1
    if len(sys.argv) != 2:
        print("usage: links.py SRCDIR", file=sys.stderr)
        return 2
    src = os.path.abspath(sys.argv[1])
    pages = [os.path.join(src, "README.md")] + sorted(glob.glob(os.path.join(src, "docs", "*.md")))
    total, broken = 0, []
    for page in pages:
        n, bad = check(src, page)
        total += n
        broken += bad
    for b in broken:
        print(b)
    print(f"links: {total} relative links in {len(pages)} pages, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
