#!/usr/bin/python3
"""The PyTorch peer of attnlab-bench train: the same model and step in torch.

    /usr/bin/python3 scripts/bench_torch.py --shape tiny --variant mha \
        [--threads N] [--steps N] [--warmup N]

Prints one line of key=value pairs in attnlab-bench's format (impl=torch),
so scripts/bench can put the two side by side. The model follows README
"The model": byte vocabulary, tied embedding, pre-norm blocks with RMSNorm
(learned weight, eps 1e-5), RoPE (rotate-half, base 10000), explicit
attention (scores, causal mask, softmax, weighted values: no fused kernel),
MLP w2 . gelu_tanh(w1 . x), no biases; init normal(0, 0.02), output
projections normal(0, 0.02 / sqrt(2 n_layer)), norms 1. The step: AdamW
(betas 0.9/0.99, eps 1e-8, weight decay 0.1 on 2-D weights only),
clip_grad_norm_(1.0), mean cross-entropy over random byte batches, as
attnlab-bench does. Needs Debian's python3-torch (/usr/bin/python3).
"""
import argparse
import ctypes
import math
import resource
import statistics
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("bench_torch: torch is not installed (Debian: python3-torch, /usr/bin/python3)",
          file=sys.stderr)
    sys.exit(77)

SHAPES = {   # n_layer, d_model, n_head, d_head, seq_len, batch (as src/cmd/bench.c)
    "tiny": (2, 128, 4, 32, 128, 32),
    "small": (4, 256, 8, 32, 256, 16),
    "micro": (1, 64, 2, 32, 32, 4),
}
VARIANTS = {"mha": ("gqa", None), "gqa": ("gqa", 2), "mqa": ("gqa", 1), "mla": ("mla", None)}
D_LATENT, D_ROPE, VOCAB = 32, 16, 256


def corename():
    """openblas_get_corename() of the OpenBLAS torch loaded, or '?'."""
    try:
        with open("/proc/self/maps") as f:
            libs = {l.split()[-1] for l in f if "blas" in l and ".so" in l}
        for path in sorted(libs):
            lib = ctypes.CDLL(path)
            if hasattr(lib, "openblas_get_corename"):
                lib.openblas_get_corename.restype = ctypes.c_char_p
                return lib.openblas_get_corename().decode()
    except OSError:
        pass
    return "?"


class RMSNorm(torch.nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x, base=10000.0):
    """x (B, T, n, d): rotate-half RoPE at positions 0..T-1."""
    T, d = x.shape[1], x.shape[-1]
    inv = base ** (-torch.arange(0, d // 2, dtype=torch.float64) * 2.0 / d)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    cos = torch.cos(ang).float()[None, :, None, :]
    sin = torch.sin(ang).float()[None, :, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def linear(rows, cols):
    return torch.nn.Parameter(torch.empty(rows, cols))


def attend(q, k, v, scale):
    """Explicit causal attention. q (B, T, H, dqk), k (B, T, H, dqk), v (B, T, H, dv)."""
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    att = (q @ k.transpose(-2, -1)) * scale
    T = q.shape[2]
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
    y = att @ v
    return y.transpose(1, 2).reshape(q.shape[0], T, -1)


class GQA(torch.nn.Module):
    def __init__(self, D, H, dh, G):
        super().__init__()
        self.H, self.dh, self.G = H, dh, G
        self.wq, self.wk, self.wv = linear(H * dh, D), linear(G * dh, D), linear(G * dh, D)
        self.wo = linear(D, H * dh)
        self.wo.resid = True

    def forward(self, x):
        B, T, _ = x.shape
        q = rope((x @ self.wq.t()).view(B, T, self.H, self.dh))
        k = rope((x @ self.wk.t()).view(B, T, self.G, self.dh))
        v = (x @ self.wv.t()).view(B, T, self.G, self.dh)
        r = self.H // self.G   # query head h reads group h // r
        k, v = k.repeat_interleave(r, dim=2), v.repeat_interleave(r, dim=2)
        return attend(q, k, v, 1.0 / math.sqrt(self.dh)) @ self.wo.t()


class MLA(torch.nn.Module):
    def __init__(self, D, H, dh, dc=D_LATENT, dr=D_ROPE):
        super().__init__()
        self.H, self.dh, self.dr = H, dh, dr
        self.wq, self.wqr = linear(H * dh, D), linear(H * dr, D)
        self.wdkv, self.kv_norm, self.wkr = linear(dc, D), RMSNorm(dc), linear(dr, D)
        self.wuk, self.wuv, self.wo = linear(H * dh, dc), linear(H * dh, dc), linear(D, H * dh)
        self.wo.resid = True

    def forward(self, x):
        B, T, _ = x.shape
        H, dh, dr = self.H, self.dh, self.dr
        q = (x @ self.wq.t()).view(B, T, H, dh)
        qr = rope((x @ self.wqr.t()).view(B, T, H, dr))
        c = self.kv_norm(x @ self.wdkv.t())
        kr = rope((x @ self.wkr.t()).view(B, T, 1, dr)).expand(B, T, H, dr)
        kc = (c @ self.wuk.t()).view(B, T, H, dh)
        v = (c @ self.wuv.t()).view(B, T, H, dh)
        qf, kf = torch.cat([q, qr], -1), torch.cat([kc, kr], -1)
        return attend(qf, kf, v, 1.0 / math.sqrt(dh + dr)) @ self.wo.t()


class Block(torch.nn.Module):
    def __init__(self, D, H, dh, variant):
        super().__init__()
        kind, G = VARIANTS[variant]
        self.attn_norm, self.mlp_norm = RMSNorm(D), RMSNorm(D)
        self.attn = MLA(D, H, dh) if kind == "mla" else GQA(D, H, dh, G or H)
        self.w1, self.w2 = linear(4 * D, D), linear(D, 4 * D)
        self.w2.resid = True

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        h = F.gelu(self.mlp_norm(x) @ self.w1.t(), approximate="tanh")
        return x + h @ self.w2.t()


class Model(torch.nn.Module):
    def __init__(self, n_layer, D, H, dh, variant):
        super().__init__()
        self.tok_emb = linear(VOCAB, D)
        self.blocks = torch.nn.ModuleList(Block(D, H, dh, variant) for _ in range(n_layer))
        self.final_norm = RMSNorm(D)
        resid = 0.02 / math.sqrt(2 * n_layer)
        with torch.no_grad():
            for p in self.parameters():
                if p.dim() == 2:
                    p.normal_(0.0, resid if getattr(p, "resid", False) else 0.02)

    def forward(self, idx, tgt):
        x = self.tok_emb[idx]
        for b in self.blocks:
            x = b(x)
        logits = self.final_norm(x) @ self.tok_emb.t()   # tied head
        return F.cross_entropy(logits.view(-1, VOCAB), tgt.view(-1))


def flops_per_token(model, args):
    """attnlab-bench's formula: 6 N_matmul + 6 L H Tk (dqk + dv)."""
    L, D, H, dh, T, _ = SHAPES[args.shape]
    n2 = sum(p.numel() for p in model.parameters() if p.dim() == 2)
    dqk = dh + (D_ROPE if args.variant == "mla" else 0)
    return 6 * n2 + 6 * L * H * (T + 1) / 2 * (dqk + dh)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", choices=SHAPES, required=True)
    ap.add_argument("--variant", choices=VARIANTS, default="mha")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                    help="bf16: the forward under torch.autocast('cpu', dtype=torch.bfloat16)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    L, D, H, dh, T, B = SHAPES[args.shape]
    model = Model(L, D, H, dh, args.variant)
    decay = [p for p in model.parameters() if p.dim() == 2]
    rest = [p for p in model.parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99), eps=1e-8)
    times, losses = [], []
    for s in range(args.warmup + args.steps):
        idx = torch.randint(0, VOCAB, (B, T))
        tgt = torch.randint(0, VOCAB, (B, T))
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            loss = model(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if s >= args.warmup:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    tok, fpt = B * T / med, flops_per_token(model, args)
    params = sum(p.numel() for p in model.parameters())
    n2 = sum(p.numel() for p in model.parameters() if p.dim() == 2)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"train impl=torch shape={args.shape} variant={args.variant} threads={args.threads} "
          f"corename={corename()} precision={args.precision} steps={args.steps} step_s={med:.6f} tok_s={tok:.1f} "
          f"flops_per_token={fpt:.0f} model_gflops={tok * fpt / 1e9:.3f} params={params} "
          f"matmul_params={n2} rss_base_mib={base:.1f} rss_peak_mib={rss:.1f} "
          f"loss_first={losses[0]:.6f} loss_last={losses[-1]:.6f} torch={torch.__version__}")


if __name__ == "__main__":
    main()
