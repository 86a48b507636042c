#!/usr/bin/python3
"""rope_ref.py - an independent PyTorch (float64) rotation for tests/test_rope.c.

Reads IN, a text file of cases; each case is one header line
    KIND FRACTION FACTOR T0 BASE POS0 T NH DIM
then T*NH*DIM numbers (token-major, then head, then element), and writes the
rotated numbers, one case per line, to OUT. Written from the papers'
formulas, not from attnlab's code:
  - rotate-half RoPE on the first n = 2*floor(FRACTION*DIM/2) elements of
    each head (complex view: z_i = x_i + j x_{i+n/2} times e^{j m theta_i}),
    theta_i = BASE^(-2i/n); the other elements pass through;
  - linear (position interpolation, Chen et al. 2023): m -> m / s;
  - ntk ("NTK-aware", bloc97): BASE -> BASE * s^(n/(n-2));
  - yarn (Peng et al. 2023, eq. 17-19 and section 3.4): wavelength
    lambda_i = 2 pi / theta_i, r = T0 / lambda_i, gamma(r) = 0 for r < 1,
    1 for r > 32, (r - 1)/31 between; h(theta) = (1 - gamma) theta / s +
    gamma theta; q and k scaled by sqrt(1/t) = 0.1 ln s + 1.
"""
import math
import sys

import torch


def rotate(x, kind, frac, s, T0, base, pos0):
    T, NH, D = x.shape
    n = 2 * int(math.floor(frac * D / 2 + 1e-9)) if frac < 1 else D
    if n == 0:
        return x.clone()
    half = n // 2
    i = torch.arange(half, dtype=torch.float64)
    if kind == "ntk":
        base = base * s ** (n / (n - 2))
    theta = torch.pow(torch.tensor(base, dtype=torch.float64), -2.0 * i / n)
    m = torch.arange(pos0, pos0 + T, dtype=torch.float64)
    scale = 1.0
    if kind == "linear":
        m = m / s
    elif kind == "yarn":
        lam = 2 * math.pi / theta
        r = T0 / lam
        gamma = torch.where(r < 1, torch.zeros_like(r),
                            torch.where(r > 32, torch.ones_like(r), (r - 1) / 31))
        theta = (1 - gamma) * theta / s + gamma * theta
        scale = 0.1 * math.log(s) + 1 if s > 1 else 1.0
    rot = torch.polar(torch.ones(T, half, dtype=torch.float64), m[:, None] * theta[None, :])
    z = torch.complex(x[..., :half], x[..., half:n]) * rot[:, None, :] * scale
    out = x.clone()
    out[..., :half], out[..., half:n] = z.real, z.imag
    return out


def main(path_in, path_out):
    tok = open(path_in).read().split()
    out, k = [], 0
    while k < len(tok):
        kind = tok[k]
        frac, s, T0, base = float(tok[k + 1]), float(tok[k + 2]), int(tok[k + 3]), float(tok[k + 4])
        pos0, T, NH, D = (int(v) for v in tok[k + 5:k + 9])
        k += 9
        x = torch.tensor([float(v) for v in tok[k:k + T * NH * D]], dtype=torch.float64)
        k += T * NH * D
        y = rotate(x.view(T, NH, D), kind, frac, s, T0, base, pos0)
        out.append(" ".join(f"{v:.17g}" for v in y.flatten().tolist()))
    with open(path_out, "w") as f:
        f.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
