# SPDX-License-Identifier: Apache-2.0
"""JAX's vjp of lax.conv_general_dilated (XLA's CPU convolution, NCHW / OIHW, 1 to 3 dims,
groups, dilations, asymmetric pads) against gradref's own calls."""
import os

import numpy as np

import convcases as cc
from harness import Pair, refusal

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true "
                      "intra_op_parallelism_threads=2")
import jax  # noqa: E402
from jax import lax  # noqa: E402

DTYPES = ["float32", "float16", "bfloat16"]
_NAMES = {1: ("NCH", "OIH", "NCH"), 2: ("NCHW", "OIHW", "NCHW"),
          3: ("NCDHW", "OIDHW", "NCDHW")}


_COMPILED = {}


def _gradients(case):
    """The jitted (x, w, dy) -> (dx, dw) of one geometry (compiled once: what a JAX user
    times)."""
    key = repr([case[k] for k in ("r", "groups", "s", "d", "begin", "end")])
    if key not in _COMPILED:
        pads = list(zip(case["begin"], case["end"]))

        def forward(x, w):
            return lax.conv_general_dilated(x, w, case["s"], pads, rhs_dilation=case["d"],
                                            dimension_numbers=_NAMES[case["r"]],
                                            feature_group_count=case["groups"])
        _COMPILED[key] = jax.jit(lambda x, w, dy: jax.vjp(forward, x, w)[1](dy))
    return _COMPILED[key]


def theirs(case, a):
    try:
        dx, dw = _gradients(case)(a["x"], a["w"], a["dy"])
        return [np.asarray(dx), np.asarray(dw)]
    except (TypeError, ValueError, RuntimeError) as e:
        raise refusal(e)


def ours(case, a):
    return cc.ours_channels_first(case, a)


def _gen(rng):
    return cc.gen(rng, int(rng.integers(1, 4)), ["VALID", "EXPLICIT"])


def _timing():
    label, case = cc.timing_case(2, 8, 64, 64, 32, 3, "EXPLICIT")
    return label + " (dx and dw)", case, ours, theirs


PAIRS = [Pair("conv_backprop_data + conv3d_backprop_filter", "jax",
              "jax.vjp(lax.conv_general_dilated) (NCHW)",
              "gradref.conv_backprop_data + gradref.conv3d_backprop_filter", DTYPES, _gen,
              cc.inputs, ours, theirs, cc.channels_first_truth, timing=_timing())]
