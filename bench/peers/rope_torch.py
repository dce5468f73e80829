#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch's eager backward of rotate_half RoPE (autograd through the HF-style forward), timed
on the bench problem `rope T16384 Hq4096 Hk1024 D128`: the peer for gradref's rope_grad.
Usage: rope_torch.py [threads] (Debian: apt-get install python3-torch)."""
import sys
import time

import torch


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    torch.set_num_threads(threads)
    T, Hq, Hk, D, N = 16384, 4096, 1024, 128, 16
    print(f"torch {torch.__version__}, {threads} thread(s), median of 5 runs")
    for dtype in (torch.float32, torch.float16):
        pos = torch.arange(T) % (T // N)
        cos = torch.rand(T // N, D).to(dtype)[pos][:, None, :]
        sin = torch.rand(T // N, D).to(dtype)[pos][:, None, :]
        q = torch.randn(T, Hq // D, D).to(dtype).requires_grad_()
        k = torch.randn(T, Hk // D, D).to(dtype).requires_grad_()
        gq, gk = torch.randn_like(q), torch.randn_like(k)
        yq = q * cos + rotate_half(q) * sin
        yk = k * cos + rotate_half(k) * sin
        times = []
        for _ in range(6):
            q.grad = k.grad = None
            t0 = time.perf_counter()
            torch.autograd.backward([yq, yk], [gq, gk], retain_graph=True)
            times.append(time.perf_counter() - t0)
        times = sorted(times[1:])
        t = times[len(times) // 2]
        moved = 2 * T * (Hq + Hk) * q.element_size()
        name = f"rope T{T} Hq{Hq} Hk{Hk} D{D} {'f32' if dtype == torch.float32 else 'f16'} half"
        print(f"{name:56s} {t * 1e3:10.3f} ms {moved / t * 1e-9:10.2f} GB/s")


if __name__ == "__main__":
    main()
