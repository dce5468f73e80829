# SPDX-License-Identifier: Apache-2.0
"""Random convolution problems (fixed seeds by the caller) and their channels-first inputs,
truths and channels-last views, shared by every convolution pair."""
import numpy as np

import gradref
import harness
import truth as tr


def _out_and_pads(rng, padding, n_in, k, s, d):
    span = (k - 1) * d + 1
    if padding == "SAME":  # TF: out = ceil(in / s), the odd pad at the end
        out = -(-n_in // s)
        total = max((out - 1) * s + span - n_in, 0)
        return out, total // 2, total - total // 2
    if padding == "VALID":
        b = e = 0
    else:  # explicit, symmetric when padding == "SYMMETRIC"
        b = int(rng.integers(0, 3))
        e = b if padding == "SYMMETRIC" else int(rng.integers(0, 3))
    return (n_in + b + e - span) // s + 1, b, e


def gen(rng, r, paddings, groups=True, dilation=True, depthwise=False, max_in=7):
    """One problem of rank r, or None when its output would be empty."""
    g = int(rng.choice([1, 1, 2, 3])) if groups else 1
    cg = int(rng.integers(1, 4))
    og = int(rng.integers(1, 4))
    if depthwise:
        g, cg = int(rng.integers(1, 5)), 1
    case = {"r": r, "n": int(rng.choice([0, 1, 1, 2, 3])) if rng.random() < 0.9 else 1,
            "groups": g, "c": g * cg, "o": g * og, "padding": str(rng.choice(paddings)),
            "in": [], "k": [], "s": [], "d": [], "begin": [], "end": [], "out": []}
    for _ in range(r):
        n_in, k = int(rng.integers(1, max_in + 1)), int(rng.integers(1, 4))
        s = int(rng.integers(1, 4))
        d = int(rng.integers(1, 3)) if dilation else 1
        out, b, e = _out_and_pads(rng, case["padding"], n_in, k, s, d)
        if out < 1:
            return None
        for key, v in zip(("in", "k", "s", "d", "begin", "end", "out"), (n_in, k, s, d, b, e, out)):
            case[key].append(v)
    case["seed"] = int(rng.integers(1 << 31))
    return case


def timing_case(r, n, c, o, size, k, padding):
    """A dense stride-1 problem with pads keeping the size: (label, case)."""
    case = {"r": r, "n": n, "c": c, "o": o, "groups": 1, "padding": padding, "in": [size] * r,
            "k": [k] * r, "s": [1] * r, "d": [1] * r, "begin": [k // 2] * r,
            "end": [k // 2] * r, "out": [size] * r, "seed": 7}
    return "N%d C%d O%d %s k%d" % (n, c, o, "x".join([str(size)] * r), k), case


def inputs(case, dtype):
    """x (N, C, *S), w (O, C/g, *K), dy (N, O, *Q): normal values rounded to dtype."""
    rng = np.random.default_rng(case["seed"])
    shapes = {"x": [case["n"], case["c"]] + case["in"],
              "w": [case["o"], case["c"] // case["groups"]] + case["k"],
              "dy": [case["n"], case["o"]] + case["out"]}
    return {k: harness.cast(rng.standard_normal(v), dtype) for k, v in shapes.items()}


def last(a):
    """channels-first to channels-last."""
    return np.ascontiguousarray(np.moveaxis(a, 1, -1))


def filter_last(w):
    """(O, C/g, *K) to TF's (*K, C/g, O)."""
    return np.ascontiguousarray(np.moveaxis(np.moveaxis(w, 0, -1), 0, -2))


def input_grad_truth(case, a, layout_last=True):
    """[(dx, magnitude, terms)] in channels-last (or first) order."""
    args = (case["in"], case["s"], case["d"], case["begin"], case["groups"])
    t = tr.conv_input_grad(a["w"], a["dy"], *args)
    m = tr.conv_input_grad(np.abs(a["w"].astype(np.float64)),
                           np.abs(a["dy"].astype(np.float64)), *args)
    terms = case["o"] // case["groups"] * int(np.prod(case["k"]))
    f = last if layout_last else (lambda v: v)
    return [(f(t), f(m), terms)]


def filter_grad_truth(case, a, tf_layout=True):
    """[(dw, magnitude, terms)] in TF's (*K, C/g, O) order (or (O, C/g, *K))."""
    args = (case["k"], case["s"], case["d"], case["begin"], case["groups"])
    t = tr.conv_filter_grad(a["x"], a["dy"], *args)
    m = tr.conv_filter_grad(np.abs(a["x"].astype(np.float64)),
                            np.abs(a["dy"].astype(np.float64)), *args)
    terms = max(1, case["n"] * int(np.prod(case["out"])))
    f = filter_last if tf_layout else (lambda v: v)
    return [(f(t), f(m), terms)]


def channels_first_truth(case, a):
    """[dx, dw] truths in channels-first order (NCHW, OIHW)."""
    return input_grad_truth(case, a, layout_last=False) + \
        filter_grad_truth(case, a, tf_layout=False)


def _unit3(values, r, fill):
    return [fill] * (3 - r) + list(values)


def ours_channels_first(case, a):
    """[dx (N, C, *S), dw (O, C/g, *K)] from gradref's own calls (NCHW, OIHW), or Refused."""
    r, g = case["r"], case["groups"]
    w = a["w"].reshape((g, case["o"] // g) + a["w"].shape[1:])
    try:
        dx = gradref.conv_backprop_data(w, a["dy"], sparse="GROUP", stride=case["s"],
                                        pad=list(zip(case["begin"], case["end"])),
                                        dilate=case["d"], grad_shape=a["x"].shape)
        lead = (1,) * (3 - r)
        x3 = a["x"].reshape(a["x"].shape[:2] + lead + a["x"].shape[2:])
        dy3 = a["dy"].reshape(a["dy"].shape[:2] + lead + a["dy"].shape[2:])
        sizes = _unit3(case["k"], r, 1) + [case["c"] // g, case["o"]]
        pads = _unit3(list(zip(case["begin"], case["end"])), r, (0, 0))
        dw = gradref.conv3d_backprop_filter(x3, sizes, dy3, _unit3(case["s"], r, 1), pads,
                                            "NCDHW", _unit3(case["d"], r, 1), g)
    except (gradref.Error, ValueError, TypeError) as e:
        raise harness.Refused(type(e).__name__ + ": " + str(e))
    dw = np.moveaxis(np.moveaxis(dw.reshape(tuple(case["k"]) + dw.shape[3:]), -1, 0), -1, 1)
    return [dx, np.ascontiguousarray(dw)]

