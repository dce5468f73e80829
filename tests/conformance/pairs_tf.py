# SPDX-License-Identifier: Apache-2.0
"""TensorFlow's CPU convolution gradients (tf.raw_ops) against gradref.tf."""
import numpy as np

import convcases as cc
import gradref
from harness import Pair, Refused, refusal

import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(2)
tf.config.threading.set_inter_op_parallelism_threads(1)

DTYPES = ["float32", "float16", "bfloat16"]


def _tf(fn, **kw):
    try:
        return [fn(**kw).numpy()]
    except (tf.errors.OpError, ValueError, TypeError) as e:
        raise refusal(e)


def _ours(fn, *args, **kw):
    try:
        return [fn(*args, **kw)]
    except (gradref.Error, ValueError, TypeError) as e:
        raise Refused(type(e).__name__ + ": " + str(e))


def _window(case, key):
    return [1] + case[key] + [1]


def _explicit(case):
    return [0, 0] + [v for b, e in zip(case["begin"], case["end"]) for v in (b, e)] + [0, 0]


def _input_sizes(case):
    return [case["n"]] + case["in"] + [case["c"]]


def _filter_sizes(case):
    return case["k"] + [case["c"] // case["groups"], case["o"]]


def filter_v2_ours(case, a):
    return _ours(gradref.tf.conv3d_backprop_filter_v2, cc.last(a["x"]), _filter_sizes(case),
                 cc.last(a["dy"]), _window(case, "s"), case["padding"], "NDHWC",
                 _window(case, "d"))


def filter_v2_theirs(case, a):
    return _tf(tf.raw_ops.Conv3DBackpropFilterV2, input=cc.last(a["x"]),
               filter_sizes=_filter_sizes(case), out_backprop=cc.last(a["dy"]),
               strides=_window(case, "s"), padding=case["padding"], data_format="NDHWC",
               dilations=_window(case, "d"))


def input_ours(case, a):
    fn = gradref.tf.conv2d_backprop_input if case["r"] == 2 else gradref.tf.conv3d_backprop_input_v2
    kw = {"explicit_paddings": _explicit(case)} if case["padding"] == "EXPLICIT" else {}
    return _ours(fn, _input_sizes(case), cc.filter_last(a["w"]), cc.last(a["dy"]),
                 _window(case, "s"), case["padding"], dilations=_window(case, "d"), **kw)


def input_theirs(case, a):
    kw = {"explicit_paddings": _explicit(case)} if case["padding"] == "EXPLICIT" else {}
    fn = tf.raw_ops.Conv2DBackpropInput if case["r"] == 2 else tf.raw_ops.Conv3DBackpropInputV2
    return _tf(fn, input_sizes=_input_sizes(case), filter=cc.filter_last(a["w"]),
               out_backprop=cc.last(a["dy"]), strides=_window(case, "s"),
               padding=case["padding"], dilations=_window(case, "d"), **kw)


def _depthwise_filter(case, w):
    """(C*M, 1, kh, kw) to TF's depthwise (kh, kw, C, M)."""
    m = case["o"] // case["c"]
    return np.ascontiguousarray(w.reshape((case["c"], m) + w.shape[2:]).transpose(2, 3, 0, 1))


def depthwise_ours(case, a):
    f = cc.filter_last(a["w"])  # (kh, kw, 1, C*M): groups = C
    kw = {"explicit_paddings": _explicit(case)} if case["padding"] == "EXPLICIT" else {}
    return _ours(gradref.tf.conv2d_backprop_input, _input_sizes(case), f, cc.last(a["dy"]),
                 _window(case, "s"), case["padding"], dilations=_window(case, "d"), **kw)


def depthwise_theirs(case, a):
    kw = {"explicit_paddings": _explicit(case)} if case["padding"] == "EXPLICIT" else {}
    return _tf(tf.raw_ops.DepthwiseConv2dNativeBackpropInput, input_sizes=_input_sizes(case),
               filter=_depthwise_filter(case, a["w"]), out_backprop=cc.last(a["dy"]),
               strides=_window(case, "s"), padding=case["padding"],
               dilations=_window(case, "d"), **kw)


def depthwise_filter_ours(case, a):
    """gradref's filter gradient with groups = C (one depth), in TF's (kh, kw, C, M)."""
    x3, dy3 = cc.last(a["x"])[:, None], cc.last(a["dy"])[:, None]  # NDHWC, D = 1
    sizes = [1] + case["k"] + [1, case["o"]]
    pads = [(0, 0)] + list(zip(case["begin"], case["end"]))
    try:
        dw = gradref.conv3d_backprop_filter(x3, sizes, dy3, [1] + case["s"], pads, "NDHWC",
                                            [1] + case["d"], case["c"])
    except (gradref.Error, ValueError, TypeError) as e:
        raise Refused(type(e).__name__ + ": " + str(e))
    return [dw.reshape(case["k"] + [case["c"], case["o"] // case["c"]])]


def depthwise_filter_theirs(case, a):
    kw = {"explicit_paddings": _explicit(case)} if case["padding"] == "EXPLICIT" else {}
    return _tf(tf.raw_ops.DepthwiseConv2dNativeBackpropFilter, input=cc.last(a["x"]),
               filter_sizes=case["k"] + [case["c"], case["o"] // case["c"]],
               out_backprop=cc.last(a["dy"]), strides=_window(case, "s"),
               padding=case["padding"], dilations=_window(case, "d"), **kw)


def depthwise_filter_truth(case, a):
    t, m, n = cc.filter_grad_truth(case, a)[0]  # (kh, kw, 1, C M)
    shape = case["k"] + [case["c"], case["o"] // case["c"]]
    return [(t.reshape(shape), m.reshape(shape), n)]


def _gen(r, paddings, **kw):
    return lambda rng: cc.gen(rng, r, paddings, **kw)


def _timing(r, n, c, o, size, k, fn_ours, fn_theirs):
    return cc.timing_case(r, n, c, o, size, k, "SAME") + (fn_ours, fn_theirs)


PAIRS = [
    Pair("conv3d_backprop_filter", "tensorflow-cpu",
         "tf.raw_ops.Conv3DBackpropFilterV2 (NDHWC)", "gradref.tf.conv3d_backprop_filter_v2",
         DTYPES, _gen(3, ["SAME", "VALID"]), cc.inputs, filter_v2_ours, filter_v2_theirs,
         lambda case, a: cc.filter_grad_truth(case, a),
         timing=_timing(3, 4, 32, 32, 16, 3, filter_v2_ours, filter_v2_theirs)),
    Pair("conv_backprop_data", "tensorflow-cpu",
         "tf.raw_ops.Conv2DBackpropInput (NHWC)", "gradref.tf.conv2d_backprop_input",
         DTYPES, _gen(2, ["SAME", "VALID", "EXPLICIT"]), cc.inputs, input_ours, input_theirs,
         lambda case, a: cc.input_grad_truth(case, a), specials=("dy",),
         timing=_timing(2, 8, 64, 64, 32, 3, input_ours, input_theirs)),
    Pair("conv_backprop_data", "tensorflow-cpu",
         "tf.raw_ops.Conv3DBackpropInputV2 (NDHWC)", "gradref.tf.conv3d_backprop_input_v2",
         DTYPES, _gen(3, ["SAME", "VALID"]), cc.inputs, input_ours, input_theirs,
         lambda case, a: cc.input_grad_truth(case, a), specials=("dy",),
         timing=_timing(3, 4, 32, 32, 16, 3, input_ours, input_theirs)),
    Pair("conv_backprop_data", "tensorflow-cpu",
         "tf.raw_ops.DepthwiseConv2dNativeBackpropInput (NHWC)",
         "gradref.tf.conv2d_backprop_input, groups = C", DTYPES,
         _gen(2, ["SAME", "VALID", "EXPLICIT"], depthwise=True), cc.inputs, depthwise_ours,
         depthwise_theirs, lambda case, a: cc.input_grad_truth(case, a), specials=("dy",)),
    Pair("conv3d_backprop_filter", "tensorflow-cpu",
         "tf.raw_ops.DepthwiseConv2dNativeBackpropFilter (NHWC)",
         "gradref.conv3d_backprop_filter, groups = C, one depth", DTYPES,
         _gen(2, ["SAME", "VALID", "EXPLICIT"], depthwise=True), cc.inputs,
         depthwise_filter_ours, depthwise_filter_theirs, depthwise_filter_truth),
]
