# SPDX-License-Identifier: Apache-2.0
"""MindSpore's CPU kernels of the Ascend operators' framework twins, through mindspore.vjp:
grid_sample on 5-D inputs (GridSampler3DGrad, as CANN's) against
gradref.cann.grid_sampler3d_grad in CANN's dialect (strict=False: the semantics, not CANN's
refusals), and Conv3D (Conv3DBackpropInput and Conv3DBackpropFilter: NCDHW, groups, dilations,
asymmetric pads) against gradref's own calls."""
import os

import convcases as cc
import gradref
import gs3dcases as gc
from harness import Pair, Refused, refusal

os.environ.setdefault("GLOG_v", "3")  # MindSpore's log level: errors only (Paddle reads it
import mindspore  # noqa: E402         # as glog's verbosity, so it is set here alone)
from mindspore import Tensor, ops  # noqa: E402

if hasattr(mindspore, "set_device"):
    mindspore.set_device("CPU")
else:
    mindspore.set_context(device_target="CPU")
DTYPES = ["float32", "float16"]  # its CPU kernel refuses bfloat16


def _grads(go, x, grid, case):
    def sample(xt, gt):
        return ops.grid_sample(xt, gt, mode=case["mode"], padding_mode=case["padding"],
                               align_corners=case["align"])

    _, vjp = mindspore.vjp(sample, Tensor(x), Tensor(grid))
    dx, dgrid = vjp(Tensor(go))
    return [dx.asnumpy(), dgrid.asnumpy()]


def theirs(case, a):
    try:
        return _grads(a["go"], a["x"], a["grid"], case)
    except (ValueError, RuntimeError, TypeError) as e:
        raise refusal(e)


def ours(case, a):
    try:
        return list(gradref.cann.grid_sampler3d_grad(a["go"], a["x"], a["grid"], case["mode"],
                                                     case["padding"], case["align"],
                                                     strict=False))
    except (gradref.Error, ValueError, TypeError) as e:
        raise Refused(type(e).__name__ + ": " + str(e))


def truth(case, a):
    return gc.truth(case, a, lambda go, x, grid: _grads(go, x, grid, case))


def conv_theirs(case, a):
    pads = tuple(v for b, e in zip(case["begin"], case["end"]) for v in (b, e))
    conv = ops.Conv3D(out_channel=case["o"], kernel_size=tuple(case["k"]), pad_mode="pad",
                      pad=pads, stride=tuple(case["s"]), dilation=tuple(case["d"]),
                      group=case["groups"])
    try:
        _, vjp = mindspore.vjp(lambda x, w: conv(x, w), Tensor(a["x"]), Tensor(a["w"]))
        return [t.asnumpy() for t in vjp(Tensor(a["dy"]))]
    except (ValueError, RuntimeError, TypeError) as e:
        raise refusal(e)


def _conv_timing():
    label, case = cc.timing_case(3, 2, 16, 16, 16, 3, "EXPLICIT")
    return label + " (dx and dw)", case, cc.ours_channels_first, conv_theirs


PAIRS = [Pair("grid_sampler3d_grad", "mindspore", "mindspore.vjp(ops.grid_sample) (5-D)",
              "gradref.cann.grid_sampler3d_grad", DTYPES, gc.gen, gc.inputs, ours, theirs,
              truth, timing=gc.timing(ours, theirs), specials=("grid",)),
         Pair("conv_backprop_data + conv3d_backprop_filter", "mindspore",
              "mindspore.vjp(ops.Conv3D) (NCDHW)",
              "gradref.conv_backprop_data + gradref.conv3d_backprop_filter", DTYPES,
              lambda rng: cc.gen(rng, 3, ["VALID", "EXPLICIT"]), cc.inputs,
              cc.ours_channels_first, conv_theirs, cc.channels_first_truth,
              timing=_conv_timing())]
