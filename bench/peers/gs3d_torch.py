#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch's CPU grid_sampler_3d_backward (aten, both outputs) on the grid_sampler3d_grad lines
of problems/problems.txt: the peer for gradref's grid_sampler3d_grad. The grid is uniform in
[-1, 1], as in gradref-bench. Usage: gs3d_torch.py [threads] (Debian: python3-torch)."""
import sys
import time

import torch

PROBLEMS = [  # (interp, padding, align_corners, channels_last)
    (0, 0, 0, False),
    (0, 0, 0, True),
    (0, 2, 1, False),
    (1, 0, 0, False),
]


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    torch.set_num_threads(threads)
    N, C, D, H, W = 2, 32, 16, 64, 64
    print(f"torch {torch.__version__}, {threads} thread(s), median of 5 runs")
    gen = torch.Generator().manual_seed(0)
    for interp, padding, align, channels_last in PROBLEMS:
        x = torch.rand(N, C, D, H, W, generator=gen) * 2 - 1
        grad = torch.rand(N, C, D, H, W, generator=gen) * 2 - 1
        grid = torch.rand(N, D, H, W, 3, generator=gen) * 2 - 1
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last_3d)
            grad = grad.contiguous(memory_format=torch.channels_last_3d)
        times = []
        for _ in range(6):
            t0 = time.perf_counter()
            torch.ops.aten.grid_sampler_3d_backward(grad, x, grid, interp, padding, bool(align),
                                                    [True, True])
            times.append(time.perf_counter() - t0)
        t = sorted(times[1:])[2]
        name = (f"grid_sampler3d_grad N{N} C{C} D{D} H{H} W{W} interp{interp} pad{padding} "
                f"ac{align} f32 {'ndhwc' if channels_last else 'ncdhw'}")
        print(f"{name:64s} {t * 1e3:10.3f} ms {N * C * D * H * W / t * 1e-6:10.2f} Mpc/s")


if __name__ == "__main__":
    main()
