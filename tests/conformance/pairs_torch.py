# SPDX-License-Identifier: Apache-2.0
"""PyTorch 2.x (PyPI) aten backward calls against gradref.torch."""
import numpy as np

import convcases as cc
import gradref
import gs3dcases as gc
from harness import Pair, Refused

import torch

torch.set_num_threads(2)

DTYPES = ["float32", "float16", "bfloat16"]
_INTERP = {"bilinear": 0, "nearest": 1}
_PAD = {"zeros": 0, "border": 1, "reflection": 2}


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a).view(np.uint16)).view(torch.bfloat16) \
        if a.dtype.name == "bfloat16" else torch.from_numpy(np.ascontiguousarray(a))


def _np(t, like):
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view(like)
    return t.numpy()


def _aten(fn, like, *args):
    try:
        with torch.no_grad():
            return [_np(r, like) for r in fn(*args) if r is not None]
    except (RuntimeError, ValueError, TypeError, NotImplementedError) as e:
        raise Refused(type(e).__name__ + ": " + str(e).split("\n")[0])


def _ours(fn, *args):
    try:
        return [r for r in fn(*args) if r is not None]
    except (gradref.Error, ValueError, TypeError) as e:
        raise Refused(type(e).__name__ + ": " + str(e))


def _gs_args(case):
    return _INTERP[case["mode"]], _PAD[case["padding"]], case["align"], [True, True]


def gs_ours(case, a):
    return _ours(gradref.torch.grid_sampler_3d_backward, a["go"], a["x"], a["grid"],
                 *_gs_args(case))


def gs_theirs(case, a):
    return _aten(torch.ops.aten.grid_sampler_3d_backward, a["x"].dtype, _t(a["go"]), _t(a["x"]),
                 _t(a["grid"]), *_gs_args(case))


def gs_truth(case, a):
    def call(go, x, grid):
        r = torch.ops.aten.grid_sampler_3d_backward(
            torch.from_numpy(go), torch.from_numpy(x), torch.from_numpy(grid), *_gs_args(case))
        return r[0].numpy(), r[1].numpy()
    return gc.truth(case, a, call)


def _conv_args(case):
    return (None, case["s"], case["begin"], case["d"], False, [0] * case["r"], case["groups"],
            [True, True, False])


def conv_ours(case, a):
    return _ours(gradref.torch.convolution_backward, a["dy"], a["x"], a["w"], *_conv_args(case))


def conv_theirs(case, a):
    return _aten(torch.ops.aten.convolution_backward, a["x"].dtype, _t(a["dy"]), _t(a["x"]),
                 _t(a["w"]), *_conv_args(case))


def conv_truth(case, a):
    return cc.input_grad_truth(case, a, layout_last=False) + \
        cc.filter_grad_truth(case, a, tf_layout=False)


def _conv_gen(rng):
    return cc.gen(rng, int(rng.integers(1, 4)), ["SYMMETRIC", "VALID"])


def _gs_timing():
    case = {"n": 2, "c": 16, "in": [16, 16, 16], "out": [16, 16, 16], "mode": "bilinear",
            "padding": "zeros", "align": False, "spread": 1.0, "seed": 7}
    return "N2 C16 16^3 -> 16^3 bilinear zeros", case, gs_ours, gs_theirs


def _conv_timing():
    label, case = cc.timing_case(2, 8, 64, 64, 32, 3, "SYMMETRIC")
    return label + " (dx and dw)", case, conv_ours, conv_theirs


PAIRS = [
    Pair("grid_sampler3d_grad", "torch", "torch.ops.aten.grid_sampler_3d_backward",
         "gradref.torch.grid_sampler_3d_backward", DTYPES, gc.gen, gc.inputs, gs_ours,
         gs_theirs, gs_truth, timing=_gs_timing()),
    Pair("conv_backprop_data + conv3d_backprop_filter", "torch",
         "torch.ops.aten.convolution_backward", "gradref.torch.convolution_backward", DTYPES,
         _conv_gen, cc.inputs, conv_ours, conv_theirs, conv_truth, timing=_conv_timing()),
]
