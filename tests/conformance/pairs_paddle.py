# SPDX-License-Identifier: Apache-2.0
"""Paddle's grid_sample on 5-D inputs and its gradient (paddle.grad) against
gradref.torch.grid_sampler_3d_backward (Paddle keeps PyTorch's semantics), and its conv2d /
conv3d gradients (NCHW / NCDHW, groups, dilations, asymmetric pads) against gradref's own
calls."""
import numpy as np

import convcases as cc
import gradref
import gs3dcases as gc
from harness import Pair, Refused, refusal

import paddle

paddle.set_device("cpu")
DTYPES = ["float32"]  # its CPU conv3d and grid_sample kernels have no float16 or bfloat16


def _grads(go, x, grid, case):
    xt = paddle.to_tensor(x, stop_gradient=False)
    gt = paddle.to_tensor(grid, stop_gradient=False)
    y = paddle.nn.functional.grid_sample(xt, gt, mode=case["mode"],
                                         padding_mode=case["padding"],
                                         align_corners=case["align"])
    dx, dgrid = paddle.grad([y], [xt, gt], [paddle.to_tensor(go)], allow_unused=True)
    return [np.zeros_like(x) if dx is None else dx.numpy(),
            np.zeros_like(grid) if dgrid is None else dgrid.numpy()]


def theirs(case, a):
    try:
        return _grads(a["go"], a["x"], a["grid"], case)
    except (ValueError, RuntimeError, TypeError) as e:
        raise refusal(e)


def ours(case, a):
    try:
        return list(gradref.torch.grid_sampler_3d_backward(
            a["go"], a["x"], a["grid"], {"bilinear": 0, "nearest": 1}[case["mode"]],
            {"zeros": 0, "border": 1, "reflection": 2}[case["padding"]], case["align"]))
    except (gradref.Error, ValueError, TypeError) as e:
        raise Refused(type(e).__name__ + ": " + str(e))


def truth(case, a):
    return gc.truth(case, a, lambda go, x, grid: _grads(go, x, grid, case))


def conv_theirs(case, a):
    conv = paddle.nn.functional.conv2d if case["r"] == 2 else paddle.nn.functional.conv3d
    pads = [[0, 0], [0, 0]] + [[b, e] for b, e in zip(case["begin"], case["end"])]
    try:
        x = paddle.to_tensor(a["x"], stop_gradient=False)
        w = paddle.to_tensor(a["w"], stop_gradient=False)
        y = conv(x, w, stride=case["s"], padding=pads, dilation=case["d"],
                 groups=case["groups"])
        dx, dw = paddle.grad([y], [x, w], [paddle.to_tensor(a["dy"])])
        return [dx.numpy(), dw.numpy()]
    except (ValueError, RuntimeError, TypeError) as e:
        raise refusal(e)


PAIRS = [Pair("grid_sampler3d_grad", "paddlepaddle",
              "paddle.nn.functional.grid_sample + paddle.grad (5-D)",
              "gradref.torch.grid_sampler_3d_backward", DTYPES, gc.gen, gc.inputs, ours,
              theirs, truth, timing=gc.timing(ours, theirs), specials=("grid",)),
         Pair("conv_backprop_data + conv3d_backprop_filter", "paddlepaddle",
              "paddle.grad of conv2d / conv3d (NCHW)",
              "gradref.conv_backprop_data + gradref.conv3d_backprop_filter", DTYPES,
              lambda rng: cc.gen(rng, int(rng.integers(2, 4)), ["VALID", "EXPLICIT"]),
              cc.inputs, cc.ours_channels_first, conv_theirs, cc.channels_first_truth)]
