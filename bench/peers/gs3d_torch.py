#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch's CPU grid_sampler_3d_backward (aten, both outputs) on the f32/f64
grid_sampler3d_grad lines of problems/problems.txt: the peer for gradref's grid_sampler3d_grad.
The grid is uniform in [-1, 1], or with smooth1 the identity plus the small displacement
gradref-bench uses. Debian: python3-torch.

    gs3d_torch.py [threads] [--csv]      (--csv: problem,rate lines for plot_performance.py)
"""
import math
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
PROBLEMS = os.path.join(HERE, "..", "..", "problems", "problems.txt")


def parse(line):
    keys, words = {}, []
    for tok in line.split()[1:]:
        head = tok.rstrip("0123456789")
        if tok in ("f32", "f64", "f16", "bf16"):
            words.append(tok)
        elif head and head != tok and not tok.startswith("dims"):
            keys[head] = int(tok[len(head):])
        else:
            words.append(tok)
    return keys, words


def smooth_grid(N, D, H, W):
    z, y, x = torch.meshgrid(torch.linspace(0, 1, D), torch.linspace(0, 1, H),
                             torch.linspace(0, 1, W), indexing="ij")
    at = [x, y, z]
    out = torch.empty(N, D, H, W, 3)
    for n in range(N):
        for k in range(3):
            out[n, ..., k] = 2 * at[k] - 1 + 0.04 * torch.sin(6 * at[(k + 1) % 3] + n + k)
    return out


def main():
    args = [a for a in sys.argv[1:] if a != "--csv"]
    as_csv = "--csv" in sys.argv[1:]
    threads = int(args[0]) if args else 2
    torch.set_num_threads(threads)
    if as_csv:
        print("problem,rate")
    else:
        print(f"torch {torch.__version__}, {threads} thread(s), median of 5 runs")
    gen = torch.Generator().manual_seed(0)
    with open(PROBLEMS) as f:
        lines = [l.split("#")[0].strip() for l in f]
    for line in lines:
        if not line.startswith("grid_sampler3d_grad"):
            continue
        keys, words = parse(line)
        if "f32" not in words and "f64" not in words:
            continue  # aten's CPU kernel takes float and double
        dtype = torch.float64 if "f64" in words else torch.float32
        N, C, D, H, W = (keys.get(k, 1) for k in ("N", "C", "D", "H", "W"))
        x = (torch.rand(N, C, D, H, W, generator=gen) * 2 - 1).to(dtype)
        grad = (torch.rand(N, C, D, H, W, generator=gen) * 2 - 1).to(dtype)
        grid = smooth_grid(N, D, H, W) if keys.get("smooth") else \
            torch.rand(N, D, H, W, 3, generator=gen) * 2 - 1
        grid = grid.to(dtype)
        if "ndhwc" in words:
            x = x.contiguous(memory_format=torch.channels_last_3d)
            grad = grad.contiguous(memory_format=torch.channels_last_3d)
        times = []
        for _ in range(6):
            t0 = time.perf_counter()
            torch.ops.aten.grid_sampler_3d_backward(grad, x, grid, keys.get("interp", 0),
                                                    keys.get("pad", 0), bool(keys.get("ac", 0)),
                                                    [True, True])
            times.append(time.perf_counter() - t0)
        t = sorted(times[1:])[2]
        rate = N * C * D * H * W / t * 1e-6
        if as_csv:
            print(f'"{line}",{rate:.4f}')
        else:
            print(f"{line:64s} {t * 1e3:10.3f} ms {rate:10.2f} Mpc/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
