# SPDX-License-Identifier: Apache-2.0
"""The f64 truths the suite measures both sides against, written from the operators' formulas
(independent of gradref's C and of every upstream), and the per-element bound of a correct
kernel's error.

Convolutions are channels-first here: x (N, C, *S), w (O, C/g, *K), dy (N, O, *Q), pads the
begin pad of each spatial dim. The magnitude of an element is the same sum over |terms|
(the operator on |inputs|, exact for these linear sums)."""
import itertools

import numpy as np


def _tap_slices(tap, stride, dilation, begin, in_size, out_size):
    """Per dim, the output positions o with i = o*s + t*d - p inside the input, and those i."""
    outs, ins = [], []
    for t, s, d, p, n_in, n_out in zip(tap, stride, dilation, begin, in_size, out_size):
        lo = max(0, -(-(p - t * d) // s))
        hi = min(n_out - 1, (n_in - 1 + p - t * d) // s)
        if hi < lo:
            return None
        first = lo * s + t * d - p
        outs.append(slice(lo, hi + 1))
        ins.append(slice(first, first + (hi - lo) * s + 1, s))
    return tuple(outs), tuple(ins)


def conv_input_grad(w, dy, in_size, stride, dilation, begin, groups):
    """dx[n, c, i] = sum over the taps t and outputs o with o*s + t*d - p = i and the output
    channels of c's group of w[o_c, c mod C/g, t] * dy[n, o_c, o]."""
    w, dy = np.asarray(w, np.float64), np.asarray(dy, np.float64)
    n, o = dy.shape[:2]
    cg, og = w.shape[1], o // groups
    dx = np.zeros((n, cg * groups) + tuple(in_size))
    for tap in itertools.product(*(range(k) for k in w.shape[2:])):
        sl = _tap_slices(tap, stride, dilation, begin, in_size, dy.shape[2:])
        if sl is None:
            continue
        for g in range(groups):
            wt = w[(slice(g * og, (g + 1) * og), slice(None)) + tap]
            part = dy[(slice(None), slice(g * og, (g + 1) * og)) + sl[0]]
            dx[(slice(None), slice(g * cg, (g + 1) * cg)) + sl[1]] += \
                np.tensordot(wt, part, axes=([0], [1])).swapaxes(0, 1)
    return dx


def conv_filter_grad(x, dy, kernel, stride, dilation, begin, groups):
    """dw[o, c, t] = sum over n and the outputs o' with o'*s + t*d - p inside the input of
    x[n, g*C/g + c, o'*s + t*d - p] * dy[n, o, o']."""
    x, dy = np.asarray(x, np.float64), np.asarray(dy, np.float64)
    o = dy.shape[1]
    cg, og = x.shape[1] // groups, o // groups
    dw = np.zeros((o, cg) + tuple(kernel))
    for tap in itertools.product(*(range(k) for k in kernel)):
        sl = _tap_slices(tap, stride, dilation, begin, x.shape[2:], dy.shape[2:])
        if sl is None:
            continue
        for g in range(groups):
            xs = x[(slice(None), slice(g * cg, (g + 1) * cg)) + sl[1]]
            ds = dy[(slice(None), slice(g * og, (g + 1) * og)) + sl[0]]
            axes = [0] + list(range(2, xs.ndim))
            dw[(slice(g * og, (g + 1) * og), slice(None)) + tap] = \
                np.tensordot(ds, xs, axes=(axes, axes))
    return dw


# unit roundoff of each dtype's significand
UNIT = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "float16": 2.0 ** -11,
        "bfloat16": 2.0 ** -8}


# half the spacing of each dtype's subnormals: the absolute rounding error of a tiny result
TINY = {"float64": 2.0 ** -1075, "float32": 2.0 ** -150, "float16": 2.0 ** -25,
        "bfloat16": 2.0 ** -134}


def bound(truth, magnitude, terms, out_dtype, acc_dtype="float32", slack=0.0):
    """Worst-case error of any correct kernel that sums `terms` products of the given inputs
    in acc_dtype, in any order, and rounds once to out_dtype: gamma_n * sum|t| + u_out * |y|
    (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., section 3.1), plus the
    output's subnormal spacing and an operator's own slack (its terms' rounding)."""
    u = UNIT[acc_dtype]
    nu = terms * u
    gamma = nu / (1.0 - nu) if nu < 0.5 else np.inf
    u_out = UNIT[out_dtype] if UNIT[out_dtype] > u else 0.0
    inner = gamma * magnitude + slack
    return inner + u_out * (np.abs(truth) + inner) + TINY[out_dtype]
