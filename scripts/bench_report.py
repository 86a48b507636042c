#!/usr/bin/python3
"""Turn scripts/bench's raw.txt into CSV files and report.md, and print the table.

    scripts/bench_report.py RAW.txt OUTDIR

raw.txt holds one measurement per line: a kind (sgemm, sgemm_best, train,
decode) and key=value pairs, as attnlab-bench, bench_torch.py and the decode
benchmark print them, tagged by scripts/bench with env= and impl=/peer=.
Standard library only.
"""
import csv
import os
import platform
import subprocess
import sys


def parse(path):
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if not parts or "=" in parts[0]:
                continue
            row = {"kind": parts[0]}
            for p in parts[1:]:
                if "=" in p:
                    k, v = p.split("=", 1)
                    row[k] = v
            if "peer" in row:   # the peer's configuration names its impl
                row["impl"] = "torch-" + row.pop("peer")
            rows.append(row)
    return rows


def num(row, key):
    try:
        return float(row[key])
    except (KeyError, ValueError):
        return None


def write_csv(path, rows, keys):
    with open(path + ".tmp", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)
    os.replace(path + ".tmp", path)


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        blas = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "libopenblas0-pthread"],
                              capture_output=True, text=True).stdout or "?"
    except OSError:
        blas = "?"
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, " \
           f"OpenBLAS {blas}"


def fmt(x, spec):
    return "" if x is None else format(x, spec)


def table(train, best, decode):
    """One line per (env, shape, variant, threads): attnlab beside its peers."""
    cells = {}
    for r in train:
        key = (r["env"], r["shape"], r["variant"], int(r["threads"]))
        cells.setdefault(key, {})[r.get("impl", "attnlab")] = r
    head = ["env", "shape", "variant", "thr", "core", "attnlab tok/s", "torch tok/s", "ratio",
            "torch tuned", "ratio", "GFLOP/s", "sgemm peak", "% peak", "RSS MiB",
            "need MiB", "RSS/need", "decode tok/s"]
    lines = [head]
    for key in sorted(cells, key=lambda k: (k[0], ["micro", "tiny", "small"].index(k[1])
                                            if k[1] in ("micro", "tiny", "small") else 9,
                                            k[2], k[3])):
        c = cells[key]
        a, t, tt = c.get("attnlab", {}), c.get("torch-installed", {}), c.get("torch-tuned", {})
        at, tk, tu = num(a, "tok_s"), num(t, "tok_s"), num(tt, "tok_s")
        peak = best.get((key[0], key[1], key[3]))
        gf = num(a, "model_gflops")
        rss, need = num(a, "rss_peak_mib"), num(a, "need_mib")
        dec = decode.get((key[0], key[2]))
        lines.append([key[0], key[1], key[2], str(key[3]), a.get("corename", ""),
                      fmt(at, ".0f"), fmt(tk, ".0f"),
                      fmt(at / tk if at and tk else None, ".2f"), fmt(tu, ".0f"),
                      fmt(at / tu if at and tu else None, ".2f"), fmt(gf, ".1f"),
                      fmt(peak, ".1f"), fmt(100 * gf / peak if gf and peak else None, ".0f"),
                      fmt(rss, ".0f"), fmt(need, ".0f"),
                      fmt(rss / need if rss and need else None, ".2f"), dec or ""])
    return lines


def markdown(lines):
    out = ["| " + " | ".join(lines[0]) + " |", "|" + "---|" * len(lines[0])]
    out += ["| " + " | ".join(l) + " |" for l in lines[1:]]
    return "\n".join(out)


def plain(lines):
    w = [max(len(l[i]) for l in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(c.rjust(w[i]) for i, c in enumerate(l)) for l in lines)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: bench_report.py RAW.txt OUTDIR")
    rows = parse(sys.argv[1])
    out = sys.argv[2]
    sgemm = [r for r in rows if r["kind"] == "sgemm"]
    bests = [r for r in rows if r["kind"] == "sgemm_best"]
    train = [r for r in rows if r["kind"] == "train"]
    decode = [r for r in rows if r["kind"] == "decode"]
    best = {(r["env"], r["shape"], int(r["threads"])): num(r, "gflops") for r in bests}
    for r in train:
        peak = best.get((r["env"], r["shape"], int(r["threads"])))
        gf = num(r, "model_gflops")
        r["sgemm_peak_gflops"] = fmt(peak, ".2f")
        r["fraction_of_sgemm"] = fmt(gf / peak if gf and peak else None, ".3f")
        r.setdefault("impl", "attnlab")
    write_csv(os.path.join(out, "sgemm.csv"), sgemm + bests,
              ["kind", "env", "corename", "shape", "threads", "m", "n", "k", "gflops",
               "pool_gflops"])
    write_csv(os.path.join(out, "train.csv"), train,
              ["env", "impl", "corename", "shape", "variant", "threads", "steps", "step_s",
               "tok_s", "flops_per_token", "model_gflops", "sgemm_peak_gflops",
               "fraction_of_sgemm", "params", "matmul_params", "rss_base_mib",
               "rss_peak_mib", "need_mib", "faults_per_step", "loss_first", "loss_last"])
    copy = next((num(r, "read_gbps") for r in rows if r["kind"] == "copy"), None)
    for r in decode:   # bytes read per token at the measured rate, against memcpy's
        tok, bpt, wb = num(r, "tok_s"), num(r, "bytes_per_token"), num(r, "weight_bytes")
        if tok and bpt:
            r["implied_gbps"] = f"{tok * bpt / 1e9:.2f}"
            if copy:
                r["copy_gbps"] = f"{copy:.2f}"
                r["bound_tok_s"] = f"{copy * 1e9 / bpt:.1f}"
                r["fraction_of_bound"] = f"{tok * bpt / 1e9 / copy:.3f}"
            if copy and wb:   # the parameters are read once per token as well
                r["bound_weights_tok_s"] = f"{copy * 1e9 / (bpt + wb):.1f}"
    dkeys = sorted({k for r in decode for k in r if k != "kind"})
    write_csv(os.path.join(out, "decode.csv"), decode, dkeys or ["variant", "tok_s"])
    dec = {}
    for r in decode:   # the longest context's tokens/s stands in the table
        k = (r.get("env", ""), r.get("variant", ""))
        if num(r, "tok_s") is None:
            continue
        if k not in dec or (num(r, "context") or 0) > (num(dec[k], "context") or 0):
            dec[k] = r
    dec = {k: f"{num(r, 'tok_s'):.0f}@{r.get('context', '?')}" for k, r in dec.items()}
    lines = table(train, best, dec)
    dlines = [["env", "variant", "context", "tok/s", "bytes/token", "GB/s", "copy GB/s",
               "bound tok/s", "of bound", "bound+weights tok/s"]]
    for r in decode:
        dlines.append([r.get("env", ""), r.get("variant", ""), r.get("context", ""),
                       r.get("tok_s", ""), r.get("bytes_per_token", ""), r.get("implied_gbps", ""),
                       r.get("copy_gbps", ""), r.get("bound_tok_s", ""),
                       r.get("fraction_of_bound", ""), r.get("bound_weights_tok_s", "")])
    copy_line = f"memcpy read bandwidth: {copy:.2f} GB/s" if copy else ""
    report = ["# attnlab benchmark", "", f"Machine: {machine()}", "",
              "Training tokens/s: median of single steps after warm-up. GFLOP/s = tokens/s x "
              "model FLOPs per token (6 N_matmul + 6 n_layer H (T+1)/2 (d_qk + d_v)); "
              "sgemm peak = best cblas_sgemm GFLOP/s over the model's forward products at "
              "B*T rows, same environment and thread count. RSS = peak resident set of the "
              "cell's process; need = parameters, gradients, AdamW moments and activations "
              "by count.", "", markdown(lines), "", copy_line, ""]
    if len(dlines) > 1:
        report += ["Decode: tokens/s against the bound of reading the KV cache once per token "
                   "at the copy bandwidth, and (bound+weights) of reading the cache and every "
                   "parameter once per token. Parameters that stay in the last-level cache "
                   "between tokens come faster, so a small cache can beat the second bound.",
                   "", markdown(dlines), ""]
    with open(os.path.join(out, "report.md.tmp"), "w") as f:
        f.write("\n".join(report))
    os.replace(os.path.join(out, "report.md.tmp"), os.path.join(out, "report.md"))
    print(plain(lines))
    if copy_line:
        print(copy_line)
    if len(dlines) > 1:
        print()
        print(plain(dlines))
    print(f"\nwritten: {out}/report.md, train.csv, sgemm.csv, decode.csv, raw.txt")


if __name__ == "__main__":
    main()
