#!/usr/bin/python3
"""Turn scripts/bench's raw.txt into CSV files, report.md and verdicts.

    scripts/bench_report.py RAW.txt OUTDIR
    scripts/bench_report.py --scaling RAW.txt OUTDIR

raw.txt holds one measurement per line: a kind (machine, info, sgemm,
sgemm_best, train, decode, copy, recipe) and key=value pairs, as
attnlab-bench, bench_torch.py, bench-decode and `attnlab train` print them,
tagged by scripts/bench with env=, impl= or peer=, and round= (the repeat).
Every cell is summarised by the median of its repeats and their min-max;
every verdict is taken on medians. Standard library only (gnuplot, when
installed, draws the scaling picture).
"""
import csv
import os
import shlex
import shutil
import statistics
import subprocess
import sys

SHAPE_ORDER = {"micro": 0, "tiny": 1, "small": 2}
VARIANT_ORDER = {"mha": 0, "gqa": 1, "mqa": 2, "mla": 3}


# ------------------------------------------------------------ reading

def parse(path):
    rows = []
    with open(path) as f:
        for line in f:
            try:
                parts = shlex.split(line)
            except ValueError:
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
    except (KeyError, ValueError, TypeError):
        return None


class Spread:
    """The repeats of one figure: median, min, max, count."""

    def __init__(self, values):
        self.v = sorted(x for x in values if x is not None)

    def __bool__(self):
        return bool(self.v)

    @property
    def med(self):
        return statistics.median(self.v) if self.v else None

    def fmt(self, spec=".0f"):
        if not self.v:
            return ""
        if len(self.v) == 1:
            return format(self.v[0], spec)
        return f"{self.med:{spec}} [{self.v[0]:{spec}}-{self.v[-1]:{spec}}]"


def group(rows, keyf):
    out = {}
    for r in rows:
        out.setdefault(keyf(r), []).append(r)
    return out


def spread(rows, key):
    return Spread(num(r, key) for r in rows)


def fmt(x, spec):
    return "" if x is None else format(x, spec)


def write_csv(path, rows, keys):
    with open(path + ".tmp", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)
    os.replace(path + ".tmp", path)


def write_text(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def markdown(lines):
    out = ["| " + " | ".join(lines[0]) + " |", "|" + "---|" * len(lines[0])]
    out += ["| " + " | ".join(str(c) for c in l) + " |" for l in lines[1:]]
    return "\n".join(out)


def plain(lines):
    w = [max(len(str(l[i])) for l in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(str(c).rjust(w[i]) for i, c in enumerate(l)) for l in lines)


def machine(rows):
    m = next((r for r in rows if r["kind"] == "machine"), {})
    cores = {r.get("env"): r.get("corename") for r in rows if r["kind"] == "info"}
    blas = ", ".join(f"`{e}` {c}" for e, c in sorted(cores.items()))
    return (f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores, OpenBLAS "
            f"{m.get('openblas', '?')}; OpenBLAS core per environment: {blas}"), cores


def copy_rate(rows):
    return statistics.median([num(r, "read_gbps") for r in rows if r["kind"] == "copy"] or [0]) or None


# ------------------------------------------------------------ sgemm

SPLITS = ["rows", "cols", "grid"]


def sgemm_section(rows):
    """One line per (env, shape, threads, kind, m, n, k) and the peaks."""
    lines = [["env", "shape", "thr", "core", "product", "m x n x k", "OpenBLAS threads",
              "rows", "cols", "grid", "pool (plan)", "pool / best"]]
    csv_rows, misses, checked = [], {}, {}
    cells = group([r for r in rows if r["kind"] == "sgemm"],
                  lambda r: (r["env"], r["shape"], int(r["threads"]), r.get("product", ""),
                             int(r["m"]), int(r["n"]), int(r["k"])))
    order = {"fwd": 0, "dinp": 1, "dw": 2}
    for key in sorted(cells, key=lambda k: (k[0], SHAPE_ORDER.get(k[1], 9), k[2],
                                            order.get(k[3], 9), k[4], k[5], k[6])):
        rs = cells[key]
        env, shape, t = key[0], key[1], key[2]
        blas, pool = spread(rs, "gflops"), spread(rs, "pool_gflops")
        splits = {s: spread(rs, s + "_gflops") for s in SPLITS}
        best = max([x.med for x in [blas] + list(splits.values()) if x] or [0])
        ratio = pool.med / best if pool and best else None
        plans = sorted({r.get("plan", "") for r in rs if r.get("plan")})
        prod, (m, n, k) = key[3], key[4:]
        lines.append([env, shape, t, rs[0].get("corename", ""), prod, f"{m}x{n}x{k}",
                      blas.fmt(".1f"),
                      splits["rows"].fmt(".1f"), splits["cols"].fmt(".1f"),
                      splits["grid"].fmt(".1f"),
                      pool.fmt(".1f") + (f" ({','.join(plans)})" if plans else ""),
                      fmt(ratio, ".2f")])
        csv_rows.append({"env": env, "shape": shape, "threads": t,
                         "corename": rs[0].get("corename"), "product": prod, "m": m,
                         "n": n, "k": k, "blas_gflops": fmt(blas.med, ".2f"),
                         "rows_gflops": fmt(splits["rows"].med, ".2f"),
                         "cols_gflops": fmt(splits["cols"].med, ".2f"),
                         "grid_gflops": fmt(splits["grid"].med, ".2f"),
                         "pool_gflops": fmt(pool.med, ".2f"), "plan": ",".join(plans),
                         "admitted": rs[0].get("admitted", ""),
                         "pool_over_best": fmt(ratio, ".3f"), "repeats": len(rs)})
        if t > 1 and shape in ("tiny", "small") and ratio is not None:
            checked[env] = checked.get(env, 0) + 1
            if ratio < 0.9:
                misses.setdefault(env, []).append(f"{env} {shape} {prod} {m}x{n}x{k}: pool "
                              f"{pool.med:.0f} vs best {best:.0f} GFLOP/s ({ratio:.2f}; "
                              f"admitted: {rs[0].get('admitted', '?')})")
    peaks = {}
    for key, rs in group([r for r in rows if r["kind"] == "sgemm_best"],
                         lambda r: (r["env"], r["shape"], int(r["threads"]))).items():
        peaks[key] = spread(rs, "gflops").med
    return lines, csv_rows, peaks, (checked, misses)


# ------------------------------------------------------------ training

def prec(r):
    """A training row's precision: rows from before the axis are f32."""
    return r.get("precision", "f32")


def precision_section(rows):
    """attnlab and each peer in f32 and bf16 side by side, per cell (medians)."""
    train = [r for r in rows if r["kind"] == "train"]
    if not any(prec(r) == "bf16" for r in train):
        return []
    cells = group(train, lambda r: (r["env"], r["shape"], r["variant"], int(r["threads"])))
    impls = ["attnlab", "torch-tuned", "torch-installed"]
    head = ["env", "shape", "variant", "thr", "oneDNN ISA"]
    for i in impls:
        head += [f"{i} f32", f"{i} bf16", "bf16/f32"]
    head += ["attnlab bf16 / torch-tuned bf16"]
    lines = [head]
    keys = sorted(cells, key=lambda k: (k[0], SHAPE_ORDER.get(k[1], 9),
                                        VARIANT_ORDER.get(k[2], 9), k[3]))
    for key in keys:
        by = group(cells[key], lambda r: (r.get("impl", "attnlab"), prec(r)))
        isa = next((r.get("isa") for r in cells[key] if r.get("isa")), "")
        line, med = list(key) + [isa], {}
        for i in impls:
            f, b = spread(by.get((i, "f32"), []), "tok_s"), spread(by.get((i, "bf16"), []), "tok_s")
            med[i] = b.med if b else None
            line += [f.fmt(), b.fmt(), fmt(b.med / f.med if f and b else None, ".2f")]
        a, t = med["attnlab"], med["torch-tuned"]
        lines.append(line + [fmt(a / t if a and t else None, ".2f")])
    return lines


def train_section(rows, peaks):
    # the f32 cells (the targets of the speed issues); bf16 has its own table
    cells = group([r for r in rows if r["kind"] == "train" and prec(r) == "f32"],
                  lambda r: (r["env"], r["shape"], r["variant"], int(r["threads"])))
    head = ["env", "shape", "variant", "thr", "core", "attnlab tok/s", "torch tuned",
            "ratio", "torch installed", "ratio", "GFLOP/s", "sgemm peak", "% peak",
            "attn share", "RSS/need"]
    lines, summary = [head], {}
    keys = sorted({(k[0], k[1], k[2], k[3]) for k in cells},
                  key=lambda k: (k[0], SHAPE_ORDER.get(k[1], 9), VARIANT_ORDER.get(k[2], 9), k[3]))
    for key in keys:
        rs = cells[key]
        by = group(rs, lambda r: r.get("impl", "attnlab"))
        a = by.get("attnlab", [])
        at, tu = spread(a, "tok_s"), spread(by.get("torch-tuned", []), "tok_s")
        ti = spread(by.get("torch-installed", []), "tok_s")
        gf, peak = spread(a, "model_gflops"), peaks.get((key[0], key[1], key[3]))
        pct = 100 * gf.med / peak if gf and peak else None
        share = spread(a, "attn_share")
        rss, need = spread(a, "rss_peak_mib").med, spread(a, "need_mib").med
        r_tu = at.med / tu.med if at and tu else None
        r_ti = at.med / ti.med if at and ti else None
        core = a[0].get("corename", "") if a else ""
        lines.append([key[0], key[1], key[2], key[3], core, at.fmt(), tu.fmt(), fmt(r_tu, ".2f"),
                      ti.fmt(), fmt(r_ti, ".2f"), gf.fmt(".1f"), fmt(peak, ".1f"),
                      fmt(pct, ".0f"), share.fmt(".2f"),
                      fmt(rss / need if rss and need else None, ".2f")])
        summary[key] = {"core": core, "tok": at, "ratio_tuned": r_tu, "pct": pct}
    return lines, summary


# ------------------------------------------------------------ decode

def decode_section(rows, copy):
    cells = group([r for r in rows if r["kind"] == "decode"],
                  lambda r: (r["env"], r["variant"], int(r.get("threads", 1)),
                             int(r.get("batch", 1)), int(r["context"])))
    head = ["env", "variant", "thr", "batch", "context", "tok/s", "cache B/token",
            "GB/s from cache", "cache bound tok/s", "of bound"]
    lines, summary, csv_rows = [head], {}, []
    for key in sorted(cells, key=lambda k: (k[0], VARIANT_ORDER.get(k[1], 9), k[2], k[3], k[4])):
        rs = cells[key]
        tok, bpt = spread(rs, "tok_s"), num(rs[0], "bytes_per_token")
        bound = copy * 1e9 / bpt if copy and bpt else None
        frac = tok.med / bound if tok and bound else None
        gbs = tok.med * bpt / 1e9 if tok and bpt else None
        lines.append([key[0], key[1], key[2], key[3], key[4], tok.fmt(".0f"), fmt(bpt, ".0f"),
                      fmt(gbs, ".2f"), fmt(bound, ".0f"), fmt(frac, ".3f")])
        summary[key] = {"tok": tok, "frac": frac}
        csv_rows.append({"env": key[0], "variant": key[1], "threads": key[2], "batch": key[3],
                         "context": key[4], "tok_s": fmt(tok.med, ".1f"),
                         "tok_s_min": fmt(tok.v[0] if tok else None, ".1f"),
                         "tok_s_max": fmt(tok.v[-1] if tok else None, ".1f"),
                         "bytes_per_token": fmt(bpt, ".0f"),
                         "weight_bytes": rs[0].get("weight_bytes", ""),
                         "copy_gbps": fmt(copy, ".2f"), "bound_tok_s": fmt(bound, ".1f"),
                         "fraction_of_bound": fmt(frac, ".3f"), "repeats": len(rs)})
    return lines, summary, csv_rows


# ------------------------------------------------------------ verdicts

def verdicts(sg, train, dec, recipe, cores):
    """(target, verdict, figures) for every target that the run measured."""
    out = []
    checked, misses = sg
    for env in sorted(checked):
        miss, n = misses.get(env, []), checked[env]
        out.append((f"env {env} ({cores.get(env, '?')}): pool rate within 10 % of the better of "
                    "OpenBLAS's threads and the best split, every product of tiny and small "
                    "(2+ threads)", "met" if not miss else f"missed in {len(miss)} of {n}",
                    "; ".join(miss) if miss else f"all {n} products >= 0.90"))
    two = [(k, v) for k, v in train.items() if k[3] >= 2 and v["ratio_tuned"] is not None]
    if two:
        bad = [f"{k[0]} {k[1]} {k[2]}: {v['ratio_tuned']:.2f}" for k, v in two
               if v["ratio_tuned"] < 1.3]
        low = min(two, key=lambda kv: kv[1]["ratio_tuned"])
        out.append((">= 1.3x the tuned peer at 2 threads, every variant (ratio of medians)",
                    "met" if not bad else f"missed in {len(bad)} of {len(two)}",
                    "; ".join(bad) if bad else
                    f"lowest {low[1]['ratio_tuned']:.2f} ({' '.join(map(str, low[0][:3]))})"))
    avx = [(k, v) for k, v in train.items()
           if k[1] == "small" and k[3] == 1 and v["pct"] is not None and v["core"] != "Haswell"]
    if avx:
        bad = [f"{k[0]} {k[2]} {v['pct']:.0f} %" for k, v in avx if v["pct"] < 78]
        out.append(("small, 1 thread, AVX-512 kernels: >= 78 % of the sgemm peak, every "
                    "variant (median)", "met" if not bad else f"missed in {len(bad)} of {len(avx)}",
                    "; ".join(f"{k[0]} {k[2]} {v['pct']:.0f} %" for k, v in avx)))
    d = [(k, v) for k, v in dec.items() if k[2] == 2 and k[3] == 1 and k[4] == 4096
         and v["frac"] is not None]
    if d:
        need = lambda var: 0.8 if var == "mha" else 0.5
        bad = [k for k, v in d if v["frac"] < need(k[1])]
        out.append(("decode at context 4,096, 2 threads: >= 50 % of the cache-read bound "
                    "(mha >= 80 %)", "met" if not bad else f"missed in {len(bad)} of {len(d)}",
                    "; ".join(f"{k[0]} {k[1]} {v['frac']:.2f}" for k, v in d)))
    sp = []
    for k, v in dec.items():
        if k[3] == 16 and k[4] == 1024 and k[1] in ("mqa", "mla"):
            one = dec.get((k[0], k[1], k[2], 1, 1024))
            if one and one["tok"] and v["tok"]:
                sp.append((k, v["tok"].med / one["tok"].med))
    if sp:
        bad = [x for x in sp if x[1] < 6]
        out.append(("decode batch 16 >= 6x batch 1 tokens/s, mqa and mla, context 1,024",
                    "met" if not bad else f"missed in {len(bad)} of {len(sp)}",
                    "; ".join(f"{k[0]} {k[1]} {k[2]} thr {x:.2f}x" for k, x in sorted(sp))))
    labels = {"recipe": "as written (batch 12, 2000 steps)",
              "batch24": "at batch 24 for 1000 steps (same tokens)"}
    for name, (val, wall, _) in sorted((recipe or {}).items()):
        ok = val.med <= 1.82 and wall.med <= 40
        out.append((f"experiments/nanogpt_cpu.yaml {labels.get(name, name)}: val <= 1.82 in "
                    "<= 40 s wall, 2 threads, the CPU's own kernels", "met" if ok else "missed",
                    f"val {val.fmt('.4f')}, wall {wall.fmt('.1f')} s"))
    return out


# ------------------------------------------------------------ main report

def report(raw, out):
    rows = parse(raw)
    mach, cores = machine(rows)
    copy = copy_rate(rows)
    sg_lines, sg_csv, peaks, sg_v = sgemm_section(rows)
    tr_lines, tr = train_section(rows, peaks)
    pr_lines = precision_section(rows)
    de_lines, de, de_csv = decode_section(rows, copy)
    rec = [r for r in rows if r["kind"] == "recipe"]
    recipe = {name: (spread(rs, "val_loss"), spread(rs, "wall_s"), spread(rs, "tokens_per_s"))
              for name, rs in group(rec, lambda r: r.get("name", "recipe")).items()}
    vs = verdicts(sg_v, tr, de, recipe, cores)
    repeats = max([int(r.get("round", 1)) for r in rows] or [1])

    train_rows = []
    for r in rows:
        if r["kind"] == "train":
            peak = peaks.get((r["env"], r["shape"], int(r["threads"])))
            gf = num(r, "model_gflops")
            r["sgemm_peak_gflops"] = fmt(peak, ".2f")
            r["fraction_of_sgemm"] = fmt(gf / peak if gf and peak else None, ".3f")
            r.setdefault("impl", "attnlab")
            train_rows.append(r)
    write_csv(os.path.join(out, "sgemm.csv"), sg_csv, list(sg_csv[0].keys()) if sg_csv else ["env"])
    write_csv(os.path.join(out, "train.csv"), train_rows,
              ["round", "env", "impl", "corename", "precision", "isa", "shape", "variant",
               "threads", "seq_len",
               "batch", "steps", "step_s", "cpu_s", "tok_s", "flops_per_token", "model_gflops",
               "sgemm_peak_gflops", "fraction_of_sgemm", "attn_share", "attn_flop_share",
               "params", "matmul_params", "rss_base_mib", "rss_peak_mib", "need_mib",
               "faults_per_step", "loss_first", "loss_last"])
    write_csv(os.path.join(out, "decode.csv"), de_csv,
              list(de_csv[0].keys()) if de_csv else ["env"])
    write_csv(os.path.join(out, "recipe.csv"), rec,
              ["round", "name", "env", "file", "threads", "val_loss", "best_val_loss", "train_loss",
               "tokens_per_s", "wall_s", "variant"])

    vlines = [["target", "verdict", "measured (medians)"]] + [list(v) for v in vs]
    text = ["# attnlab benchmark", "", f"Machine: {mach}", "",
            f"Every cell ran {repeats} time(s), one round after another (a cell's repeats are "
            "spread over the run; attnlab and its peers alternate). Figures are the median "
            "of the repeats with [min-max]; verdicts use medians.", "",
            "## Verdicts", "", markdown(vlines), "",
            "## Training", "",
            "Tokens/s: median of single steps after warm-up, per repeat. GFLOP/s = tokens/s x "
            "model FLOPs per token (6 N_matmul + 6 n_layer H (T+1)/2 (d_qk + d_v)); sgemm "
            "peak = the best rate of any way of running the model's forward products at B*T "
            "rows (OpenBLAS's own threads or a split of attnlab's pool), same environment "
            "and thread count; attn share = the variant's forward and backward over the "
            "step; RSS/need = peak resident set over the counted parameters, gradients, "
            "AdamW moments and activations.", "", markdown(tr_lines), ""]
    if pr_lines:
        text += ["## Training in bf16", "",
                 "Tokens/s, median [min-max], of the same cells in f32 and in bf16: attnlab's "
                 "`train.precision: bf16` (oneDNN matmul, bf16 operands, f32 accumulation; the "
                 "ISA oneDNN dispatched to), the peers under `torch.autocast(\"cpu\", "
                 "dtype=torch.bfloat16)`.", "", markdown(pr_lines), ""]
    if len(sg_lines) > 1:
        text += ["## Products (GFLOP/s)", "",
                 "Each product of the model at B*T rows: `fwd` out = x W^T, `dinp` dx = dout W, "
                 "`dw` dW = dout^T x. OpenBLAS threads = one call with OpenBLAS's own threads; "
                 "rows, cols, grid = attnlab's pool cut that way; pool = as attnlab runs it "
                 "(its plan, measured at first use, chosen among the splits that give the "
                 "reference split's bits).", "", markdown(sg_lines), ""]
    if len(de_lines) > 1:
        text += ["## Decode", "",
                 f"memcpy read bandwidth: {fmt(copy, '.2f')} GB/s. Tokens/s counts every "
                 "sequence of a batch; the cache bound is reading the KV cache once per token "
                 "at the copy bandwidth.", "", markdown(de_lines), ""]
    if rec:
        text += ["## nanoGPT CPU recipe", "",
                 "`attnlab train experiments/nanogpt_cpu.yaml --set train.threads=2`, the CPU's "
                 "own kernels; `batch24`: with `train.batch_size=24, steps=1000, "
                 "warmup_steps=50, lr=1.5e-3, min_lr=1.5e-4, eval_every=250, eval_batches=25`.",
                 "", markdown([["run", "val_loss", "wall s", "tokens/s"]] +
                              [[n, v.fmt(".4f"), w.fmt(".1f"), t.fmt(".0f")]
                               for n, (v, w, t) in sorted(recipe.items())]), ""]
    write_text(os.path.join(out, "report.md"), "\n".join(text))
    print(f"Machine: {mach}\n")
    print(plain(tr_lines))
    if pr_lines:
        print()
        print(plain(pr_lines))
    if len(de_lines) > 1:
        print()
        print(plain(de_lines))
    print("\nVerdicts (medians):")
    for t, v, m in vs:
        print(f"- {t}: {v.upper() if v == 'met' else v}\n    {m}")
    print(f"\nwritten: {out}/report.md, train.csv, sgemm.csv, decode.csv, recipe.csv, raw.txt")


# ------------------------------------------------------------ scaling

GNUPLOT = r'''# scaling.gp - written by scripts/bench_report.py; re-run with `gnuplot scaling.gp`
# in this directory. Columns of scaling.dat: see its header.
if (!exists("out_png")) out_png = "scaling.png"
if (!exists("out_svg")) out_svg = "scaling.svg"
variants = "%(variants)s"
do for [fmt in "png svg"] {
  if (fmt eq "png") { set terminal pngcairo noenhanced size 1500,460 font ",11"; set output out_png }
  else { set terminal svg noenhanced size 1500,460 dynamic font ",11"; set output out_svg }
  set multiplot layout 1,3 title "%(title)s"
  set logscale x 2
  set xlabel "seq_len T (tokens per step held at 4096)"
  set key top right
  set grid
  set logscale y
  set ylabel "tokens/s"
  set title "training (solid) and decode at context T (dashed)"
  plot for [i=1:words(variants)] "scaling.dat" index (i-1) using 1:2 with linespoints lw 2 lc i title word(variants, i)." train", \
       for [i=1:words(variants)] "scaling.dat" index (i-1) using 1:6 with linespoints dt 2 lc i title word(variants, i)." decode"
  unset logscale y
  set yrange [0:1]
  set ylabel "fraction"
  set title "attention's share of the training step"
  plot for [i=1:words(variants)] "scaling.dat" index (i-1) using 1:3 with linespoints lw 2 lc i title word(variants, i)." time", \
       for [i=1:words(variants)] "scaling.dat" index (i-1) using 1:4 with linespoints dt 2 lc i title word(variants, i)." FLOPs"
  set title "model FLOPs / sgemm peak (training)"
  plot for [i=1:words(variants)] "scaling.dat" index (i-1) using 1:5 with linespoints lw 2 lc i title word(variants, i)
  unset multiplot
  unset yrange
}
'''


def scaling(raw, out):
    rows = parse(raw)
    mach, cores = machine(rows)
    peaks = {(r["env"], int(r["threads"])): num(r, "gflops")
             for r in rows if r["kind"] == "sgemm_best"}
    # a cell is a variant under a kernel (train.attention_kernel): "mha/fused"
    train = group([r for r in rows if r["kind"] == "train"],
                  lambda r: (r["env"], r["variant"] + ("/" + r["kernel"] if r.get("kernel") else ""),
                             int(r["threads"]), int(r["seq_len"])))
    dec = group([r for r in rows if r["kind"] == "decode"],
                lambda r: (r["env"], r["variant"], int(r.get("threads", 1)), int(r["context"])))
    head = ["env", "variant", "thr", "T", "batch", "train tok/s", "attn share", "attn FLOP share",
            "GFLOP/s", "of peak", "decode tok/s", "peak RSS MiB"]
    lines, csv_rows = [head], []
    keys = sorted(train, key=lambda k: (k[0], VARIANT_ORDER.get(k[1].split("/")[0], 9), k[1], k[2], k[3]))
    for k in keys:
        rs = train[k]
        tok, share, gf = spread(rs, "tok_s"), spread(rs, "attn_share"), spread(rs, "model_gflops")
        peak = peaks.get((k[0], k[2]))
        d = spread(dec.get((k[0], k[1].split("/")[0], k[2], k[3]), []), "tok_s")
        frac = gf.med / peak if gf and peak else None
        fshare = num(rs[0], "attn_flop_share")
        lines.append([k[0], k[1], k[2], k[3], rs[0].get("batch", ""), tok.fmt(), share.fmt(".2f"),
                      fmt(fshare, ".2f"), gf.fmt(".1f"), fmt(frac, ".2f"), d.fmt(),
                      spread(rs, "rss_peak_mib").fmt(".0f")])
        csv_rows.append({"env": k[0], "corename": rs[0].get("corename"), "variant": k[1],
                         "threads": k[2], "seq_len": k[3], "batch": rs[0].get("batch"),
                         "train_tok_s": fmt(tok.med, ".1f"),
                         "train_tok_s_min": fmt(tok.v[0], ".1f"),
                         "train_tok_s_max": fmt(tok.v[-1], ".1f"),
                         "attn_share": fmt(share.med, ".4f"), "attn_flop_share": fmt(fshare, ".4f"),
                         "model_gflops": fmt(gf.med, ".2f"), "sgemm_peak_gflops": fmt(peak, ".2f"),
                         "fraction_of_peak": fmt(frac, ".4f"),
                         "decode_tok_s": fmt(d.med, ".1f"),
                         "decode_tok_s_min": fmt(d.v[0] if d else None, ".1f"),
                         "decode_tok_s_max": fmt(d.v[-1] if d else None, ".1f"),
                         "rss_peak_mib": fmt(spread(rs, "rss_peak_mib").med, ".1f"),
                         "repeats": len(rs)})
    write_csv(os.path.join(out, "scaling.csv"), csv_rows,
              list(csv_rows[0].keys()) if csv_rows else ["env"])
    # scaling.dat: one block per variant (first env and thread count), for gnuplot
    sel = [r for r in csv_rows if (r["env"], r["threads"]) == (csv_rows[0]["env"], csv_rows[0]["threads"])] if csv_rows else []
    variants = [v for v in sorted({r["variant"] for r in sel}, key=lambda v: VARIANT_ORDER.get(v, 9))]
    dat = ["# seq_len train_tok_s attn_share attn_flop_share fraction_of_peak decode_tok_s"]
    for v in variants:
        dat.append(f"# {v}")
        for r in sel:
            if r["variant"] == v:
                dat.append(" ".join(str(r[c]) if r[c] not in ("", None) else "NaN" for c in ("seq_len", "train_tok_s", "attn_share",
                                                            "attn_flop_share", "fraction_of_peak",
                                                            "decode_tok_s")))
        dat += ["", ""]
    write_text(os.path.join(out, "scaling.dat"), "\n".join(dat) + "\n")
    title = (f"attnlab, small width, env {sel[0]['env']} ({sel[0]['corename']}), "
             f"{sel[0]['threads']} threads" if sel else "attnlab")
    write_text(os.path.join(out, "scaling.gp"),
               GNUPLOT % {"variants": " ".join(variants), "title": title})
    plot = "no picture: gnuplot was not found (Debian: gnuplot-nox)"
    if shutil.which("gnuplot") and sel:
        res = subprocess.run(["gnuplot", "scaling.gp"], cwd=out, capture_output=True, text=True)
        plot = ("scaling.png, scaling.svg" if res.returncode == 0
                else f"gnuplot failed: {res.stderr.strip()[:300]}")
    repeats = max([int(r.get("round", 1)) for r in rows] or [1])
    text = ["# attnlab: cost against context length", "", f"Machine: {mach}", "",
            f"Training at seq_len T with batch 4096 / T (tokens per step held), the *small* "
            f"width (4 layers, d_model 256, 8 heads of 32), and decode (batch 1) at context "
            f"T; every cell {repeats} time(s), median [min-max]. attn share = the variant's "
            "forward and backward over the step; attn FLOP share = the model FLOPs inside it "
            "(its projections, the scores and the weighted values) over the step's; of peak = model GFLOP/s over the best sgemm rate of "
            "the small shape's products at the same thread count.", "",
            markdown(lines), "", f"Picture: {plot}", ""]
    write_text(os.path.join(out, "scaling.md"), "\n".join(text))
    print(f"Machine: {mach}\n")
    print(plain(lines))
    print(f"\nwritten: {out}/scaling.csv, scaling.md, scaling.dat, scaling.gp ({plot})")


def main():
    args = sys.argv[1:]
    if args and args[0] == "--scaling":
        if len(args) != 3:
            sys.exit("usage: bench_report.py --scaling RAW.txt OUTDIR")
        scaling(args[1], args[2])
        return
    if len(args) != 2:
        sys.exit("usage: bench_report.py [--scaling] RAW.txt OUTDIR")
    report(args[0], args[1])


if __name__ == "__main__":
    main()
