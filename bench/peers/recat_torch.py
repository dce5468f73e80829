#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The upstream reference for recat, timed in PyTorch: cat of the flattened column blocks
(fbgemm_gpu's layout_transform_ops_test.py computes exactly this). FBGEMM's own CPU kernel is
one memcpy per (rank, row) under at::parallel_for; without fbgemm_gpu installed, this is the
peer we can run. Usage: recat_torch.py [threads] (Debian: apt-get install python3-torch)."""
import sys
import time

import torch

PROBLEMS = [
    ("recat B16384 dims128,256,64,512,0,128,256,64 f32", 16384, [128, 256, 64, 512, 0, 128, 256, 64], torch.float32),
    ("recat B16384 dims128,256,64,512,0,128,256,64 f16", 16384, [128, 256, 64, 512, 0, 128, 256, 64], torch.float16),
]


def recat(go, dims):
    return torch.cat([block.contiguous().view(-1) for block in go.split(dims, dim=1)])


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    torch.set_num_threads(threads)
    print(f"torch {torch.__version__}, {threads} thread(s), median of 15 runs")
    for name, batch, dims, dtype in PROBLEMS:
        go = torch.randn(batch, sum(dims)).to(dtype)
        recat(go, dims)
        times = []
        for _ in range(15):
            t0 = time.perf_counter()
            recat(go, dims)
            times.append(time.perf_counter() - t0)
        times.sort()
        t = times[len(times) // 2]
        moved = 2 * go.numel() * go.element_size()
        print(f"{name:56s} {t * 1e3:10.3f} ms {moved / t * 1e-9:10.2f} GB/s")


if __name__ == "__main__":
    main()
