# SPDX-License-Identifier: Apache-2.0
"""PyTorch 2.x (PyPI) aten backward calls against gradref.torch."""
import numpy as np

import convcases as cc
import gradref
import gs3dcases as gc
from harness import Pair, Refused, refusal

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
        raise refusal(e)


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


def _conv_gen(rng):
    return cc.gen(rng, int(rng.integers(1, 4)), ["SYMMETRIC", "VALID"])


def _conv_timing():
    label, case = cc.timing_case(2, 8, 64, 64, 32, 3, "SYMMETRIC")
    return label + " (dx and dw)", case, conv_ours, conv_theirs


# ---------------------------------------------------------------- rope_grad

def rope_gen(rng):
    """1 to 3 sequences of 1 to 8 tokens, 1-4 q heads and 1-2 k heads of 8, 16 or 32 elements,
    HF's rotate_half or the interleaved (LLaMA, GPT-J) style."""
    lens = [int(v) for v in rng.integers(1, 9, int(rng.integers(1, 4)))]
    return {"lens": lens, "hq": int(rng.integers(1, 5)), "hk": int(rng.integers(1, 3)),
            "d": int(rng.choice([8, 16, 32])), "style": str(rng.choice(["rotate_half",
                                                                          "interleaved"])),
            "seed": int(rng.integers(1 << 30))}


def rope_inputs(case, dtype):
    """The output gradients and the cos/sin table (max length x head_dim) as HF builds it
    (inv_freq = 10000^(-2i/d); rotate_half: the frequencies repeated as two halves,
    interleaved: each repeated twice), rounded to dtype."""
    from harness import cast
    rng = np.random.default_rng(case["seed"])
    t, d = sum(case["lens"]), case["d"]
    inv = 10000.0 ** (-np.arange(0, d, 2) / d)
    ang = np.outer(np.arange(max(case["lens"])), inv)
    ang = np.concatenate([ang, ang], 1) if case["style"] == "rotate_half" else \
        np.repeat(ang, 2, 1)
    return {"qg": cast(rng.uniform(-2, 2, (t, case["hq"] * d)), dtype),
            "kg": cast(rng.uniform(-2, 2, (t, case["hk"] * d)), dtype),
            "cos": cast(np.cos(ang), dtype), "sin": cast(np.sin(ang), dtype)}


def rope_ours(case, a):
    return _ours(gradref.torch.rotary_embedding_backward, a["qg"], a["kg"], a["cos"], a["sin"],
                 case["lens"], case["style"])


def _rotate(x, style):
    if style == "rotate_half":  # HF transformers' rotate_half
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)
    x1, x2 = x[..., 0::2], x[..., 1::2]  # GPT-J's rotate_every_two
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def _rope_autograd(case, qg, kg, cos, sin):
    """The forward x * cos + rotate(x) * sin at each token's position, differentiated by
    autograd at the given output gradients (tensors of one dtype)."""
    d = case["d"]
    pos = torch.cat([torch.arange(n) for n in case["lens"]])
    c, s = cos[pos].unsqueeze(1), sin[pos].unsqueeze(1)
    grads = []
    for g in (qg, kg):
        x = torch.zeros(g.shape[0], g.shape[1] // d, d, dtype=g.dtype, requires_grad=True)
        y = x * c + _rotate(x, case["style"]) * s
        y.backward(g.reshape(y.shape))
        grads.append(x.grad.reshape(g.shape))
    return grads


def rope_theirs(case, a):
    try:
        r = _rope_autograd(case, _t(a["qg"]), _t(a["kg"]), _t(a["cos"]), _t(a["sin"]))
        return [_np(x, a["qg"].dtype) for x in r]
    except (RuntimeError, ValueError, TypeError) as e:
        raise refusal(e)


def rope_truth(case, a):
    """The same autograd in float64; the magnitudes |c||g| + |s||g'| (two terms)."""
    f = [torch.from_numpy(np.asarray(a[k], np.float64)) for k in ("qg", "kg", "cos", "sin")]
    exact = [x.numpy() for x in _rope_autograd(case, *f)]
    mode = "half" if case["style"] == "rotate_half" else "interleaved"
    mag, _ = gradref.precision.terms("rope_grad", *(np.asarray(a[k], np.float64) for k in
                                                    ("qg", "kg", "cos", "sin")),
                                     case["lens"], mode=mode)
    return [(e, m, 2) for e, m in zip(exact, mag)]


PAIRS = [
    Pair("grid_sampler3d_grad", "torch", "torch.ops.aten.grid_sampler_3d_backward",
         "gradref.torch.grid_sampler_3d_backward", DTYPES, gc.gen, gc.inputs, gs_ours,
         gs_theirs, gs_truth, timing=gc.timing(gs_ours, gs_theirs), specials=("grid",)),
    Pair("conv_backprop_data + conv3d_backprop_filter", "torch",
         "torch.ops.aten.convolution_backward", "gradref.torch.convolution_backward", DTYPES,
         _conv_gen, cc.inputs, conv_ours, conv_theirs, cc.channels_first_truth,
         timing=_conv_timing()),
    Pair("rope_grad", "torch", "autograd of HF's rotate_half / GPT-J's interleaved RoPE",
         "gradref.torch.rotary_embedding_backward", DTYPES, rope_gen, rope_inputs, rope_ours,
         rope_theirs, rope_truth, specials=("qg", "kg")),
]
