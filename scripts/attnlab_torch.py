#!/usr/bin/python3
"""attnlab_torch.py - attnlab models in PyTorch, built from a checkpoint.

An independent implementation of the model spec in the README (and of MLA as
issue 3 writes it), for Debian's /usr/bin/python3 with python3-torch and
nothing else: the safetensors file is read by hand (struct + json). Each
layer's attention comes from the checkpoint's config: "layer_attention" (a
model.layer_attention stack, its items repeated over the layers), else
"attention" for every layer; "kv_share" S (model.kv_share, CLA) makes every
layer but the first of each group of S attend over that layer's K/V, with
no K/V projections of its own.

Command line:
  attnlab_torch.py score CHECKPOINT FILE [--seq-len T] [--batch B] [--rope-scaling K:F]
      mean next-token cross-entropy over FILE's bytes, windows as in
      `attnlab score`; the last line is `loss=<nats per byte> tokens=<count>`.
      Each layer's RoPE follows model.rope_scaling and rope_fraction (class
      Rope); --rope-scaling overrides the scaling as attnlab score's does.
  attnlab_torch.py grads CHECKPOINT FILE GRADS [--tol 1e-4]
      recompute the loss and every gradient that `attnlab grads` wrote to
      GRADS (same windows) with autograd in float64 and compare them: one
      line per tensor, then `grads ok ...` or `grads MISMATCH ...` (exit 1).
  attnlab_torch.py attention CHECKPOINT DIR [--tol 1e-5]
      recompute the attention probabilities that `attnlab attention` wrote
      to DIR (attention.csv over the tokens of tokens.csv) and compare them:
      `attention ok ...` or `attention MISMATCH ...` (exit 1). Entries the
      CSV leaves out (above the diagonal under the causal mask) must be 0.
  attnlab_torch.py batch JOBS
      run one of the commands above per line of JOBS in this process (torch
      loads once), each output preceded by `== <line>`; exit status: the
      worst of them.

In Python:
  from attnlab_torch import load_model
  model, meta = load_model("results/train/model.safetensors")
  logits = model(torch.tensor([[72, 101, 108, 108, 111]]))   # (B, T, vocab)
  probs = model.attention(torch.tensor([[72, 101, 108]]))    # per layer (B, H, T, T)
"""
import argparse
import csv
import json
import math
import shlex
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---------------------------------------------------------------- safetensors

_DTYPES = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
    "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
    "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool,
}


def read_safetensors(path):
    """Returns ({name: tensor}, metadata). Tensors of dtypes torch lacks
    (e.g. U64) are returned as raw bytes."""
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < 8:
        raise ValueError(f"{path}: not a safetensors file")
    (n,) = struct.unpack("<Q", buf[:8])
    if 8 + n > len(buf):
        raise ValueError(f"{path}: header length {n} does not fit the file")
    header = json.loads(buf[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = memoryview(buf)[8 + n:]
    out = {}
    for name, ent in header.items():
        b, e = ent["data_offsets"]
        if not 0 <= b <= e <= len(data):
            raise ValueError(f"{path}: tensor {name}: offsets out of range")
        dt = _DTYPES.get(ent["dtype"])
        if dt is None:
            out[name] = bytes(data[b:e])
        elif e == b:
            out[name] = torch.empty(ent["shape"], dtype=dt)
        else:
            out[name] = torch.frombuffer(bytearray(data[b:e]), dtype=dt).reshape(ent["shape"])
    return out, meta

# ---------------------------------------------------------------- the model


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Rope:
    """A layer's RoPE (docs/rope.md): rotate-half over the first
    n = 2 * floor(fraction * d / 2) elements of the last dim (element i
    pairs with i + n/2, GPT-NeoX's partial rotary), the rest passed through;
    frequencies theta_i = base^(-2i/n) changed by model.rope_scaling:
    linear theta_i / F; ntk base * F^(n/(n-2)); yarn (YaRN, Peng et al.
    2023, eq. 17-19) (1 - g) theta_i / F + g theta_i with the ramp g of
    r = T0 theta_i / (2 pi) between alpha 1 and beta 32, and the rotated
    elements times sqrt(1/t) = 0.1 ln F + 1. The layer's fraction is its
    layer_attention item's "rope_fraction", else the model's."""

    def __init__(self, cfg, a):
        self.base = cfg["rope_base"]
        self.fraction = float(a.get("rope_fraction", cfg.get("rope_fraction", 1.0)))
        sc = cfg.get("rope_scaling") or {}
        self.kind = sc.get("kind", "none")
        self.factor = float(sc.get("factor", 1.0))
        self.T0 = int(sc.get("original_seq_len", 0)) or cfg["seq_len"]

    def rotated(self, d):
        if self.fraction >= 1:
            return d - d % 2
        return 2 * int(math.floor(self.fraction * d / 2 + 1e-9)) if self.fraction > 0 else 0

    def inv_freq(self, n):
        i = torch.arange(n // 2, dtype=torch.float64)
        base, F_ = self.base, self.factor
        if self.kind == "ntk" and n > 2:
            base = base * F_ ** (n / (n - 2))
        theta = base ** (-2.0 * i / n)
        if self.kind == "linear":
            return theta / F_
        if self.kind == "yarn":
            r = self.T0 * theta / (2 * math.pi)
            g = ((r - 1.0) / (32.0 - 1.0)).clamp(0.0, 1.0)
            return (1 - g) * theta / F_ + g * theta
        return theta

    def mscale(self):
        return 0.1 * math.log(self.factor) + 1.0 if self.kind == "yarn" and self.factor > 1 else 1.0

    def __call__(self, x):
        """x (..., T, d) at positions 0..T-1."""
        T, n = x.shape[-2], self.rotated(x.shape[-1])
        if n == 0:
            return x
        half = n // 2
        ang = torch.arange(T, dtype=torch.float64)[:, None] * self.inv_freq(n)[None, :]
        cos = (ang.cos() * self.mscale()).to(x.dtype)
        sin = (ang.sin() * self.mscale()).to(x.dtype)
        x1, x2, rest = x[..., :half], x[..., half:n], x[..., n:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


def attend(q, k, v, scale, causal, visible=None):
    """q, k (B, H, T, dqk), v (B, H, T, dv) -> (B, H, T, dv), and the
    probabilities (B, H, T, T). visible (T, T), if given, is the mask
    itself (True: query i sees key j) and replaces the causal one."""
    s = (q @ k.transpose(-1, -2)) * scale
    if visible is not None:
        s = s.masked_fill(~visible, float("-inf"))
    elif causal:
        T = q.shape[-2]
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        s = s.masked_fill(mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return p @ v, p


def band(T, window, sinks, causal):
    """The local variant's mask, written out pair by pair: query i sees key
    j when j < sinks or j is among the last `window` positions up to i
    (|i - j| < window without the causal mask); never j > i when causal."""
    m = torch.zeros(T, T, dtype=torch.bool)
    for i in range(T):
        for j in range(T):
            near = (i - window < j <= i) if causal else abs(i - j) < window
            m[i, j] = (j < sinks or near) and (j <= i or not causal)
    return m


def linear(i, o):
    return nn.Linear(i, o, bias=False)


class GQA(nn.Module):
    """mha (G = H), mqa (G = 1), gqa (G = n_kv_head): query head h reads K/V
    group h // (H / G).

    Cross-layer K/V sharing ("kv_share", CLA): a consumer layer has no wk,
    wv; its forward gets the (k, v) its group's first layer made (kv_out)."""

    def __init__(self, cfg, a, groups, consumer=False):
        super().__init__()
        D, H, dh = cfg["d_model"], cfg["n_head"], cfg["d_head"]
        self.H, self.G, self.dh = H, groups, dh
        self.rope, self.causal = Rope(cfg, a), cfg["causal"]
        self.wq, self.wo = linear(D, H * dh), linear(H * dh, D)
        if not consumer:
            self.wk, self.wv = linear(D, groups * dh), linear(D, groups * dh)

    def kv(self, x):
        """RoPE'd keys and values, (B, G, T, dh) each."""
        B, T, _ = x.shape
        G, dh = self.G, self.dh
        k = self.rope(self.wk(x).view(B, T, G, dh).transpose(1, 2))
        return k, self.wv(x).view(B, T, G, dh).transpose(1, 2)

    def visible(self, T):
        return None   # the causal mask (or none)

    def forward(self, x, kv=None):
        B, T, _ = x.shape
        H, G, dh = self.H, self.G, self.dh
        self.kv_out = kv = self.kv(x) if kv is None else kv
        q = self.rope(self.wq(x).view(B, T, H, dh).transpose(1, 2))
        k = kv[0].repeat_interleave(H // G, dim=1)
        v = kv[1].repeat_interleave(H // G, dim=1)
        y, self.probs = attend(q, k, v, 1.0 / math.sqrt(dh), self.causal, self.visible(T))
        return self.wo(y.transpose(1, 2).reshape(B, T, H * dh))


class Local(GQA):
    """local: gqa (n_kv_head, 0 for n_head) over a sliding window of
    `window` positions plus the first `sinks` positions (StreamingLLM)."""

    def __init__(self, cfg, a, consumer=False):
        super().__init__(cfg, a, int(a.get("n_kv_head", 0)) or cfg["n_head"], consumer)
        self.window, self.sinks = int(a["window"]), int(a.get("sinks", 0))

    def visible(self, T):
        return band(T, self.window, self.sinks, self.causal)


class MLA(nn.Module):
    """DeepSeek-V2 multi-head latent attention:
    c = rmsnorm(wdkv x), k_r = rope(wkr x) shared by all heads, k_c = wuk c,
    v = wuv c; q = wq x, q_r = rope(wqr x), or with d_q_latent
    c_q = rmsnorm(wdq x), q = wuq c_q, q_r = rope(wqr c_q); score of head h
    (q_h . k_c,h + q_r,h . k_r) / sqrt(d_head + d_rope)."""

    def __init__(self, cfg, a):
        super().__init__()
        D, H, dh, eps = cfg["d_model"], cfg["n_head"], cfg["d_head"], cfg["norm_eps"]
        dc, dr, dq = a["d_latent"], a["d_rope"], a.get("d_q_latent", 0)
        self.H, self.dh, self.dr, self.dq = H, dh, dr, dq
        self.rope, self.causal = Rope(cfg, a), cfg["causal"]
        if dq:
            self.wdq, self.q_norm, self.wuq = linear(D, dq), RMSNorm(dq, eps), linear(dq, H * dh)
        else:
            self.wq = linear(D, H * dh)
        self.wqr = linear(dq or D, H * dr)
        self.wdkv, self.kv_norm, self.wkr = linear(D, dc), RMSNorm(dc, eps), linear(D, dr)
        self.wuk, self.wuv, self.wo = linear(dc, H * dh), linear(dc, H * dh), linear(H * dh, D)

    def forward(self, x):
        B, T, _ = x.shape
        H, dh, dr = self.H, self.dh, self.dr
        if self.dq:
            cq = self.q_norm(self.wdq(x))
            q, qr = self.wuq(cq), self.wqr(cq)
        else:
            q, qr = self.wq(x), self.wqr(x)
        q = q.view(B, T, H, dh).transpose(1, 2)
        qr = self.rope(qr.view(B, T, H, dr).transpose(1, 2))
        c = self.kv_norm(self.wdkv(x))
        kr = self.rope(self.wkr(x).unsqueeze(1))          # (B, 1, T, dr)
        kc = self.wuk(c).view(B, T, H, dh).transpose(1, 2)
        v = self.wuv(c).view(B, T, H, dh).transpose(1, 2)
        qf = torch.cat([q, qr], dim=-1)
        kf = torch.cat([kc, kr.expand(B, H, T, dr)], dim=-1)
        y, self.probs = attend(qf, kf, v, 1.0 / math.sqrt(dh + dr), self.causal)
        return self.wo(y.transpose(1, 2).reshape(B, T, H * dh))


class GTA(nn.Module):
    """Grouped-tied attention (Zadouri, Strauss, Dao 2025): G tied states
    s_g = wkv_g x of width d_head, each its group's value and, in its first
    half, the NoPE half of its key; the other half of every key is one RoPE
    key k_r = rope(wkr x) of width d_head/2 shared by all heads. Queries
    carry RoPE in their last half; score q_h . [s_g[:r] | k_r] / sqrt(d_head)."""

    def __init__(self, cfg, a):
        super().__init__()
        D, H, dh, G = cfg["d_model"], cfg["n_head"], cfg["d_head"], a["n_kv_head"]
        self.H, self.G, self.dh, self.r = H, G, dh, dh // 2
        self.rope, self.causal = Rope(cfg, a), cfg["causal"]
        self.wq, self.wkv = linear(D, H * dh), linear(D, G * dh)
        self.wkr, self.wo = linear(D, dh // 2), linear(H * dh, D)

    def forward(self, x):
        B, T, _ = x.shape
        H, G, dh, r = self.H, self.G, self.dh, self.r
        q = self.wq(x).view(B, T, H, dh).transpose(1, 2)
        q = torch.cat([q[..., :r], self.rope(q[..., r:])], dim=-1)
        s = self.wkv(x).view(B, T, G, dh).transpose(1, 2)      # (B, G, T, dh)
        kr = self.rope(self.wkr(x).unsqueeze(1))          # (B, 1, T, r)
        k = torch.cat([s[..., :r], kr.expand(B, G, T, r)], dim=-1)
        k, v = k.repeat_interleave(H // G, dim=1), s.repeat_interleave(H // G, dim=1)
        y, self.probs = attend(q, k, v, 1.0 / math.sqrt(dh), self.causal)
        return self.wo(y.transpose(1, 2).reshape(B, T, H * dh))


class TPA(nn.Module):
    """Tensor product attention (T6, Zhang et al. 2025, arXiv 2501.06425):
    per token, q_h = (1/R_Q) sum_r a_r[h] b_r with head factors a_r = W^a_r x
    (n_head) and feature factors b_r = W^b_r x (d_head), likewise k (R_K) and
    v (R_V); RoPE on the query and key feature factors; score of head h
    q_h . k_h / sqrt(d_head). wa_* rows are (head, rank), wb_* rows (rank,
    feature)."""

    RANKS = {"rank_q": 6, "rank_k": 2, "rank_v": 2}

    def __init__(self, cfg, a):
        super().__init__()
        D, H, dh = cfg["d_model"], cfg["n_head"], cfg["d_head"]
        self.H, self.dh = H, dh
        self.rope, self.causal = Rope(cfg, a), cfg["causal"]
        self.R = {n[-1]: int(a.get(n, d)) for n, d in self.RANKS.items()}
        for w in "qkv":
            setattr(self, "wa_" + w, linear(D, H * self.R[w]))
            setattr(self, "wb_" + w, linear(D, self.R[w] * dh))
        self.wo = linear(H * dh, D)

    def heads(self, x, w):
        """(B, H, T, dh) from the rank-R factors of x."""
        B, T, _ = x.shape
        R = self.R[w]
        A = getattr(self, "wa_" + w)(x).view(B, T, self.H, R)
        Bf = getattr(self, "wb_" + w)(x).view(B, T, R, self.dh).transpose(1, 2)
        if w != "v":
            Bf = self.rope(Bf)                     # (B, R, T, dh)
        return torch.einsum("bthr,brtd->bhtd", A, Bf) / R

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = self.heads(x, "q"), self.heads(x, "k"), self.heads(x, "v")
        y, self.probs = attend(q, k, v, 1.0 / math.sqrt(self.dh), self.causal)
        return self.wo(y.transpose(1, 2).reshape(B, T, self.H * self.dh))


class GLA(nn.Module):
    """Grouped latent attention (Zadouri, Strauss, Dao 2025): MLA's latent
    split into h_c latent heads, c_g = rmsnorm_g(wdkv_g x), each with its own
    norm weights; query head h reads latent head g = h // (H / h_c):
    k_c,h = wuk_h c_g, v_h = wuv_h c_g; one k_r = rope(wkr x) for all heads;
    queries and the score (q_h . k_c,h + q_r,h . k_r) / sqrt(d_head + d_rope)
    as MLA's. Written from the equations: per-head up-projections are
    applied to per-head copies of the latents (no absorption)."""

    def __init__(self, cfg, a):
        super().__init__()
        D, H, dh, eps = cfg["d_model"], cfg["n_head"], cfg["d_head"], cfg["norm_eps"]
        dc, dr, hc = a["d_latent"], a["d_rope"], a["n_latent_head"]
        dq = a.get("d_q_latent", 0)
        self.H, self.dh, self.dr, self.dq, self.dc, self.hc = H, dh, dr, dq, dc, hc
        self.rope, self.causal, self.eps = Rope(cfg, a), cfg["causal"], eps
        if dq:
            self.wdq, self.q_norm, self.wuq = linear(D, dq), RMSNorm(dq, eps), linear(dq, H * dh)
        else:
            self.wq = linear(D, H * dh)
        self.wqr = linear(dq or D, H * dr)
        self.wdkv, self.wkr = linear(D, hc * dc), linear(D, dr)
        self.kv_norm = RMSNorm(hc * dc, eps)   # latent head g's weights: [g*dc, (g+1)*dc)
        self.wuk, self.wuv, self.wo = linear(dc, H * dh), linear(dc, H * dh), linear(H * dh, D)

    def forward(self, x):
        B, T, _ = x.shape
        H, dh, dr, dc, hc = self.H, self.dh, self.dr, self.dc, self.hc
        if self.dq:
            cq = self.q_norm(self.wdq(x))
            q, qr = self.wuq(cq), self.wqr(cq)
        else:
            q, qr = self.wq(x), self.wqr(x)
        q = q.view(B, T, H, dh).transpose(1, 2)
        qr = self.rope(qr.view(B, T, H, dr).transpose(1, 2))
        c0 = self.wdkv(x).view(B, T, hc, dc)
        c = c0 * torch.rsqrt(c0.pow(2).mean(-1, keepdim=True) + self.eps)
        c = c * self.kv_norm.weight.view(hc, dc)
        ch = c.repeat_interleave(H // hc, dim=2)                   # (B, T, H, dc)
        kc = torch.einsum("bthc,hdc->bhtd", ch, self.wuk.weight.view(H, dh, dc))
        v = torch.einsum("bthc,hdc->bhtd", ch, self.wuv.weight.view(H, dh, dc))
        kr = self.rope(self.wkr(x).unsqueeze(1))          # (B, 1, T, dr)
        qf = torch.cat([q, qr], dim=-1)
        kf = torch.cat([kc, kr.expand(B, H, T, dr)], dim=-1)
        y, self.probs = attend(qf, kf, v, 1.0 / math.sqrt(dh + dr), self.causal)
        return self.wo(y.transpose(1, 2).reshape(B, T, H * dh))


class Linear(nn.Module):
    """linear (docs/state-layers.md): gated linear attention, a state layer,
    written as its recurrence, token by token. Per head h:
    q = wq_h x / sqrt(d_key), k = wk_h x, v = wv_h x,
    a = exp(-softplus(w_decay_h . x + b_decay_h)),
    S_t = a_t S_{t-1} + v_t k_t^T (S: d_head x d_key), o_t = S_t q_t,
    out = wo [o of every head]. probs: the equivalent attention matrix,
    q_i . k_j times the product of a over j < t <= i (j <= i), weights that
    are not probabilities."""

    def __init__(self, cfg, a):
        super().__init__()
        D, H, dh = cfg["d_model"], cfg["n_head"], cfg["d_head"]
        dk = int(a.get("d_key", 0)) or dh
        self.H, self.dk, self.dh = H, dk, dh
        self.wq, self.wk, self.wv = linear(D, H * dk), linear(D, H * dk), linear(D, H * dh)
        self.w_decay, self.wo = linear(D, H), linear(H * dh, D)
        self.b_decay = nn.Module()   # the checkpoint's "b_decay.weight", one per head
        self.b_decay.weight = nn.Parameter(torch.zeros(H))

    def forward(self, x):
        B, T, _ = x.shape
        H, dk, dh = self.H, self.dk, self.dh
        q = self.wq(x).view(B, T, H, dk) / math.sqrt(dk)
        k, v = self.wk(x).view(B, T, H, dk), self.wv(x).view(B, T, H, dh)
        loga = -F.softplus(self.w_decay(x) + self.b_decay.weight)       # (B, T, H)
        S, ys = x.new_zeros(B, H, dh, dk), []
        for t in range(T):
            S = loga[:, t].exp()[:, :, None, None] * S + v[:, t, :, :, None] * k[:, t, :, None, :]
            ys.append(torch.einsum("bhrk,bhk->bhr", S, q[:, t]))
        y = torch.stack(ys, dim=1)                                     # (B, T, H, dh)
        L = loga.cumsum(dim=1).transpose(1, 2)                         # (B, H, T)
        below = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        decay = torch.where(below, L[..., :, None] - L[..., None, :], -math.inf).exp()
        self.probs = torch.einsum("bihk,bjhk->bhij", q, k) * decay
        return self.wo(y.reshape(B, T, H * dh))


class Tensor(nn.Module):
    """One tensor the checkpoint names NAME.weight that is no linear map: a
    convolution's filters, a bias."""

    def __init__(self, *shape):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(*shape))


class DeltaNet(nn.Module):
    """Gated DeltaNet (Yang, Kautz, Hatamizadeh 2024, arXiv 2412.06464), in
    its recurrent form, token by token (attnlab trains the chunkwise form;
    this is the definition it must equal). Per head, dk = d_key (0: d_head):
    q, k, v = silu(conv(wq x)), silu(conv(wk x)), silu(conv(wv x)), the conv
    causal and depthwise of width `conv` (0: none), its filters stored as
    their difference from the identity (conv_q[c, conv-1] + 1 weighs the
    current input); q, k L2-normalised (eps 1e-6 under the root);
    beta = sigmoid(wbeta x), a = exp(-softplus(wdecay x + decay_bias));
    S = a S (I - beta k k^T) + beta v k^T, o = S q;
    y = rmsnorm_head(o) * o_norm * silu(wgate x); out = wo y."""

    def __init__(self, cfg, a):
        super().__init__()
        D, H, dh, eps = cfg["d_model"], cfg["n_head"], cfg["d_head"], cfg["norm_eps"]
        dk, W = int(a.get("d_key", 0)) or dh, int(a.get("conv", 4))
        self.H, self.dk, self.dh, self.W = H, dk, dh, W
        self.wq, self.wk, self.wv = linear(D, H * dk), linear(D, H * dk), linear(D, H * dh)
        if W:
            self.conv_q, self.conv_k = Tensor(H * dk, W), Tensor(H * dk, W)
            self.conv_v = Tensor(H * dh, W)
        self.wbeta, self.wdecay, self.decay_bias = linear(D, H), linear(D, H), Tensor(H)
        self.wgate, self.o_norm, self.wo = linear(D, H * dh), RMSNorm(dh, eps), linear(H * dh, D)

    def conv(self, x, filt):
        """x (B, T, C): out[t] = x[t] + sum_j filt[:, j] x[t - (W-1) + j]."""
        if not self.W:
            return x
        W, C = self.W, x.shape[-1]
        w = filt.weight.clone()
        w[:, W - 1] += 1
        y = F.conv1d(F.pad(x.transpose(1, 2), (W - 1, 0)), w.unsqueeze(1), groups=C)
        return y.transpose(1, 2)

    def forward(self, x):
        B, T, _ = x.shape
        H, dk, dh = self.H, self.dk, self.dh
        convs = (self.conv_q, self.conv_k, self.conv_v) if self.W else (None,) * 3
        q, k, v = (F.silu(self.conv(w(x), c)) for w, c in zip((self.wq, self.wk, self.wv), convs))
        q, k, v = q.view(B, T, H, dk), k.view(B, T, H, dk), v.view(B, T, H, dh)
        q = q * torch.rsqrt(q.pow(2).sum(-1, keepdim=True) + 1e-6)
        k = k * torch.rsqrt(k.pow(2).sum(-1, keepdim=True) + 1e-6)
        beta = torch.sigmoid(self.wbeta(x))                                  # (B, T, H)
        a = torch.exp(-F.softplus(self.wdecay(x) + self.decay_bias.weight))
        S = x.new_zeros(B, H, dh, dk)
        outs = []
        for t in range(T):
            kt, bt, at = k[:, t], beta[:, t, :, None, None], a[:, t, :, None, None]
            Sk = S @ kt.unsqueeze(-1)                                        # (B, H, dh, 1)
            S = at * (S - bt * Sk @ kt.unsqueeze(-2)) + bt * v[:, t].unsqueeze(-1) @ kt.unsqueeze(-2)
            outs.append((S @ q[:, t].unsqueeze(-1)).squeeze(-1))             # (B, H, dh)
        o = torch.stack(outs, dim=1)                                         # (B, T, H, dh)
        y = self.o_norm(o) * F.silu(self.wgate(x).view(B, T, H, dh))
        self.saved = (q.detach(), k.detach(), beta.detach(), a.detach())
        return self.wo(y.reshape(B, T, H * dh))

    @property
    def probs(self):
        """The last forward's equivalent attention matrix (B, H, T, T): the
        weight M[i, j] that output o_i gives value v_j, o_i = sum_j M[i, j] v_j,
        found by running the same recurrence on one-hot values e_j."""
        q, k, beta, a = self.saved
        B, T, H, dk = q.shape
        S = q.new_zeros(B, H, T, dk)
        rows = []
        for t in range(T):
            kt, bt, at = k[:, t], beta[:, t, :, None, None], a[:, t, :, None, None]
            e = q.new_zeros(B, H, T, 1)
            e[:, :, t] = 1
            S = at * (S - bt * (S @ kt.unsqueeze(-1)) @ kt.unsqueeze(-2)) + bt * e @ kt.unsqueeze(-2)
            rows.append((S @ q[:, t].unsqueeze(-1)).squeeze(-1))
        return torch.stack(rows, dim=2)


VARIANTS = {
    "mha": lambda cfg, a, consumer=False: GQA(cfg, a, cfg["n_head"], consumer),
    "mqa": lambda cfg, a, consumer=False: GQA(cfg, a, 1, consumer),
    "gqa": lambda cfg, a, consumer=False: GQA(cfg, a, a["n_kv_head"], consumer),
    "mla": MLA,
    "gta": GTA,
    "tpa": TPA,
    "gla": GLA,
    "local": Local,
    "linear": Linear,
    "deltanet": DeltaNet,
}


SHARING = ("mha", "mqa", "gqa", "local")   # variants with a consumer form


class MLP(nn.Module):
    def __init__(self, D, F_):
        super().__init__()
        self.w1, self.w2 = linear(D, F_), linear(F_, D)

    def forward(self, x):
        return self.w2(F.gelu(self.w1(x), approximate="tanh"))


def layer_attention(cfg, layer):
    """Layer `layer`'s attention mapping: the items of "layer_attention"
    (model.layer_attention) repeat over the layers; without it every layer
    has "attention"."""
    items = cfg.get("layer_attention")
    return items[layer % len(items)] if items else cfg["attention"]


def variant_label(cfg):
    """The variant, or a stack's variants joined by '/' ("gqa/mha"), then
    "-share2" under kv_share 2."""
    items = cfg.get("layer_attention") or [cfg["attention"]]
    share = f"-share{kv_share(cfg)}" if kv_share(cfg) > 1 else ""
    return "/".join(a["variant"] for a in items) + share


def kv_share(cfg):
    """model.kv_share: layers in consecutive groups of this many share the
    K/V of the group's first layer (absent in older checkpoints: 1)."""
    return int(cfg.get("kv_share", 1))


class Block(nn.Module):
    def __init__(self, cfg, a, consumer=False):
        super().__init__()
        D, eps = cfg["d_model"], cfg["norm_eps"]
        if a["variant"] not in VARIANTS:
            raise ValueError(f"variant '{a['variant']}' is not implemented here "
                             f"(known: {', '.join(VARIANTS)})")
        if consumer and a["variant"] not in SHARING:
            raise ValueError(f"variant '{a['variant']}' cannot share K/V (kv_share)")
        self.attn_norm, self.mlp_norm = RMSNorm(D, eps), RMSNorm(D, eps)
        self.attn = VARIANTS[a["variant"]](cfg, a, consumer) if consumer else \
            VARIANTS[a["variant"]](cfg, a)
        self.mlp = MLP(D, cfg["d_ff"])

    def forward(self, x, kv=None):
        h = self.attn_norm(x)
        x = x + (self.attn(h) if kv is None else self.attn(h, kv))
        return x + self.mlp(self.mlp_norm(x))


class AttnlabModel(nn.Module):
    """Byte-level GPT: tied embedding, pre-norm blocks, final RMSNorm.
    Parameter names are the checkpoint's tensor names."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg["vocab_size"], cfg["d_model"])
        S = kv_share(cfg)
        self.blocks = nn.ModuleList(Block(cfg, layer_attention(cfg, l), l % S != 0)
                                    for l in range(cfg["n_layer"]))
        self.final_norm = RMSNorm(cfg["d_model"], cfg["norm_eps"])

    def forward(self, idx):
        x, S, kv = self.tok_emb(idx), kv_share(self.cfg), None
        for l, b in enumerate(self.blocks):
            x = b(x, kv if l % S else None)   # a consumer: its group's first layer's K/V
            if S > 1 and l % S == 0:
                kv = b.attn.kv_out
        return self.final_norm(x) @ self.tok_emb.weight.T

    def attention(self, idx):
        """Every layer's attention probabilities over idx: a list of
        (B, H, T, T), row i of head h the weights query i gives each key."""
        with torch.no_grad():
            self(idx)
        return [b.attn.probs for b in self.blocks]


def load_model(path, dtype=torch.float64, rope_scaling=""):
    """The model in an attnlab checkpoint, and the file's metadata;
    rope_scaling "KIND:FACTOR" replaces the checkpoint's model.rope_scaling
    from its seq_len, as `attnlab score --rope-scaling`."""
    tensors, meta = read_safetensors(path)
    if "attnlab.config" not in meta:
        raise ValueError(f"{path}: no attnlab.config in __metadata__")
    cfg = json.loads(meta["attnlab.config"])
    if rope_scaling:
        kind, _, factor = rope_scaling.partition(":")
        cfg["rope_scaling"] = {"kind": kind, "factor": float(factor),
                               "original_seq_len": cfg["seq_len"]}
    model = AttnlabModel(cfg).to(dtype)
    model.load_state_dict({k: v.to(dtype) for k, v in tensors.items()}, strict=True)
    return model, meta

# ---------------------------------------------------------------- commands


def windows(path, T, vocab):
    """Inputs and targets (windows, T): window j feeds bytes [jT, jT+T) and
    predicts [jT+1, jT+T+1); a window that does not fit whole is dropped."""
    with open(path, "rb") as f:
        data = f.read()
    n = (len(data) - 1) // T if data else 0
    if n <= 0:
        raise ValueError(f"{path}: too short for one window of {T} tokens")
    b = torch.frombuffer(bytearray(data[:n * T + 1]), dtype=torch.uint8).long()
    if int(b.max()) >= vocab:
        raise ValueError(f"{path}: a byte is outside the vocabulary ({vocab})")
    return b[:n * T].view(n, T), b[1:n * T + 1].view(n, T)


def cmd_score(args):
    model, _ = load_model(args.checkpoint, rope_scaling=args.rope_scaling)
    T = args.seq_len or model.cfg["seq_len"]
    x, y = windows(args.file, T, model.cfg["vocab_size"])
    total = 0.0
    with torch.no_grad():
        for i in range(0, x.shape[0], args.batch):
            logits = model(x[i:i + args.batch])
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                     y[i:i + args.batch].reshape(-1), reduction="sum").item()
    print(f"variant={variant_label(model.cfg)} seq_len={T} windows={x.shape[0]}")
    print(f"loss={total / y.numel():.6f} tokens={y.numel()}")
    return 0


def rel_err(got, ref):
    den = max(ref.norm().item(), got.norm().item(), 1e-30)
    return (got - ref).norm().item() / den


def cmd_grads(args):
    model, _ = load_model(args.checkpoint)
    grads, meta = read_safetensors(args.grads)
    B, T = int(meta["attnlab.windows"]), int(meta["attnlab.seq_len"])
    x, y = windows(args.file, T, model.cfg["vocab_size"])
    logits = model(x[:B])
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y[:B].reshape(-1))
    loss.backward()
    params = dict(model.named_parameters())
    bad = sorted(set(params) ^ set(grads))
    if bad:
        print(f"grads MISMATCH: tensors only on one side: {', '.join(bad)}")
        return 1
    worst = 0.0
    for name, p in params.items():
        err = rel_err(grads[name].double(), p.grad)
        worst = max(worst, err)
        print(f"{name} rel_err={err:.3e}")
    lerr = abs(float(meta["attnlab.loss"]) - loss.item()) / abs(loss.item())
    ok = worst < args.tol and lerr < args.tol
    print(f"grads {'ok' if ok else 'MISMATCH'} tensors={len(params)} loss={loss.item():.9g} "
          f"loss_rel_err={lerr:.3e} max_rel_err={worst:.3e} tol={args.tol:g}")
    return 0 if ok else 1


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def cmd_attention(args):
    model, _ = load_model(args.checkpoint)
    tokens = [int(r["token"]) for r in read_csv(f"{args.dir}/tokens.csv")]
    probs = model.attention(torch.tensor([tokens]))
    T, seen, worst, rows = len(tokens), {}, 0.0, 0
    for r in read_csv(f"{args.dir}/attention.csv"):
        l, h, i, j = (int(r[c]) for c in ("layer", "head", "query", "key"))
        worst = max(worst, abs(float(r["p"]) - probs[l][0, h, i, j].item()))
        seen.setdefault((l, h), set()).add((i, j))
        rows += 1
    left = 0.0     # what the CSV leaves out must be zero
    for (l, h), have in seen.items():
        for i in range(T):
            for j in range(T):
                if (i, j) not in have:
                    left = max(left, abs(probs[l][0, h, i, j].item()))
    ok = rows > 0 and worst <= args.tol and left <= args.tol
    print(f"attention {'ok' if ok else 'MISMATCH'} heads={len(seen)} rows={rows} T={T} "
          f"max_abs_err={worst:.3e} max_left_out={left:.3e} tol={args.tol:g}")
    return 0 if ok else 1


def cmd_batch(args):
    worst = 0
    with open(args.jobs) as f:
        for line in f:
            if not line.strip():
                continue
            print(f"== {line.strip()}", flush=True)
            worst = max(worst, main(shlex.split(line)))
    return worst


def parser():
    p = argparse.ArgumentParser(prog="attnlab_torch.py",
                                description="attnlab models in PyTorch, from a checkpoint")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("score", help="mean next-token loss over a file")
    s.add_argument("checkpoint")
    s.add_argument("file")
    s.add_argument("--seq-len", type=int, default=0)
    s.add_argument("--batch", type=int, default=16)
    s.add_argument("--rope-scaling", default="", metavar="KIND:FACTOR")
    s.set_defaults(run=cmd_score)
    g = sub.add_parser("grads", help="compare `attnlab grads` output with autograd")
    g.add_argument("checkpoint")
    g.add_argument("file")
    g.add_argument("grads")
    g.add_argument("--tol", type=float, default=1e-4)
    g.set_defaults(run=cmd_grads)
    a = sub.add_parser("attention", help="compare `attnlab attention` output with torch")
    a.add_argument("checkpoint")
    a.add_argument("dir")
    a.add_argument("--tol", type=float, default=1e-5)
    a.set_defaults(run=cmd_attention)
    b = sub.add_parser("batch", help="run one command per line of a file")
    b.add_argument("jobs")
    b.set_defaults(run=cmd_batch)
    return p


def main(argv):
    try:
        args = parser().parse_args(argv)
        return args.run(args)
    except SystemExit as e:          # argparse errors, inside `batch` too
        return e.code if isinstance(e.code, int) else 2
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        print(f"attnlab_torch.py: error: {e}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
