# SPDX-License-Identifier: Apache-2.0
"""The cost of a tiny call through the Python package, per operator: torch tensors in and out
(numpy with --numpy), one thread, the median of many calls in microseconds, beside the C call's
own time for the same problem (gradref-bench is not involved: the C time is the same call with
the Python layer's work done once, through ctypes). Run with Debian's python3:

    GRADREF_LIBRARY=build/libgradref.so PYTHONPATH=python /usr/bin/python3 scripts/python_overhead.py

Issue #29's target: every tiny call at most 50 us."""
import argparse
import statistics
import sys
import time

import numpy as np

import gradref

LIMIT_US = 50.0


def tiny_problems(kind):
    rng = np.random.default_rng(0)

    def arr(*shape, dtype=np.float32):
        a = rng.standard_normal(shape).astype(dtype)
        if kind == "torch":
            import torch
            return torch.from_numpy(a)
        return a

    g, inp, grid = arr(1, 2, 2, 2, 2), arr(1, 2, 3, 3, 3), arr(1, 2, 2, 2, 3) * 0.5
    yield "grid_sampler3d_grad", lambda: gradref.grid_sampler3d_grad(
        g, inp, grid, "bilinear", "zeros", align_corners=False, threads=1)
    filt, diff = arr(2, 2, 3, 3), arr(1, 2, 4, 4)
    yield "conv_backprop_data", lambda: gradref.conv_backprop_data(
        filt, diff, stride=1, pad=1, threads=1)
    x, dy = arr(1, 3, 4, 4, 2), arr(1, 2, 3, 3, 2)
    yield "conv3d_backprop_filter", lambda: gradref.conv3d_backprop_filter(
        x, [2, 2, 2, 2, 2], dy, [1, 1, 1, 1, 1], "VALID", "NDHWC", threads=1)
    q, k, c, s = arr(4, 16), arr(4, 16), arr(4, 8), arr(4, 8)
    yield "rope_grad", lambda: gradref.rope_grad(q, k, c, s, [4], "atb", head_dim=8, threads=1)
    go = arr(2, 4, 8)
    yield "recat_embedding_grad_output", lambda: gradref.recat_embedding_grad_output(
        go, [1, 3], threads=1)
    # the upstream modules' calls on the same tiny problems
    yield "cann.grid_sampler3d_grad", lambda: gradref.cann.grid_sampler3d_grad(
        g, inp, grid, threads=1)
    yield "cann.conv3d_backprop_filter_v2", lambda: gradref.cann.conv3d_backprop_filter_v2(
        x, [2, 2, 2, 2, 2], dy, [1] * 5, [0] * 6, y_format="NDHWC", threads=1)
    yield "tf.conv3d_backprop_filter_v2", lambda: gradref.tf.conv3d_backprop_filter_v2(
        x, [2, 2, 2, 2, 2], dy, [1] * 5, "VALID", threads=1)
    yield "tf.conv2d_backprop_input", lambda: gradref.tf.conv2d_backprop_input(
        [1, 6, 6, 2], arr(3, 3, 2, 2), arr(1, 4, 4, 2), [1, 1, 1, 1], "VALID", threads=1)
    yield "megengine.conv_bwd_data", lambda: gradref.megengine.convolution_backward_data(
        filt, diff, None, "CROSS_CORRELATION", 1, 1, threads=1)
    f4, d4 = arr(4, 1, 3, 3, 4), arr(1, 1, 4, 4, 4)
    yield "megengine.conv_bwd_data NCHW4", lambda: gradref.megengine.convolution_backward_data(
        f4, d4, format="NCHW4", threads=1)
    go4, x4, w4 = arr(1, 2, 4, 4), arr(1, 2, 6, 6), arr(2, 2, 3, 3)
    yield "torch.convolution_backward", lambda: gradref.torch.convolution_backward(
        go4, x4, w4, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, False],
        threads=1)
    yield "torch.grid_sampler_3d_backward", lambda: gradref.torch.grid_sampler_3d_backward(
        g, inp, grid, 0, 0, False, [True, True], threads=1)
    yield "atb.rope_grad", lambda: gradref.atb.rope_grad(
        q, k, c, s, [4], strict=False, head_dim=8, threads=1)


def median_us(fn, calls):
    fn()  # warm: first-call imports and caches
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--numpy", action="store_true", help="numpy arrays instead of torch tensors")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--check", action="store_true", help="exit 1 when a call is over the limit")
    args = ap.parse_args()
    kind = "numpy" if args.numpy else "torch"
    print("gradref %s, %s in and out, 1 thread, median of %d calls" % (gradref.version(), kind,
                                                                     args.calls))
    over = 0
    for name, fn in tiny_problems(kind):
        us = median_us(fn, args.calls)
        over += us > LIMIT_US
        print("%-30s %8.1f us%s" % (name, us, "  (over %g us)" % LIMIT_US if us > LIMIT_US else ""))
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
