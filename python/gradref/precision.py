# SPDX-License-Identifier: Apache-2.0
"""Per-element error bounds no tolerance can fake (docs/precision.md):

- f64(fn, *args, **kw): an operator's result computed in float64 from its inputs (any dtype,
  converted exactly), the golden the error of any kernel is measured against;
- terms(name, *args, **kw): per output element, the sum of |term| in float64 and the count of
  roundings (for a sum of products, the number of products): conv_backprop_data,
  conv3d_backprop_filter, grid_sampler3d_grad, rope_grad (every mode) and the recat calls
  (which move values: no rounding), all the library's GRADREF_TERM_MAGNITUDES and
  GRADREF_TERM_COUNTS outputs; coordinate_slack(...) adds grid_sampler3d_grad's coordinates;
- error_bound(golden_f64, magnitude, count, ...): the largest error any correct kernel can make
  summing those terms in any order in an accumulation dtype and rounding once to the output
  dtype (Higham's gamma_n), or a probabilistic one (Higham and Mary's lambda sqrt(n) u);
- check_bound(actual, golden_f64, bound): the elements past it (each a bug: a correct kernel
  cannot be) and how tight the rest are.
"""
import math

from .standards import Verdict
from .testing import _float64, _np

# unit roundoff of each dtype's significand (HF32: 10 kept bits, 11 on Ascend 910B)
UNIT = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "float16": 2.0 ** -11,
        "bfloat16": 2.0 ** -8, "hf32": 2.0 ** -11, "hf32_910b": 2.0 ** -12}
# half the spacing of each dtype's subnormals: the absolute rounding error of a tiny result
TINY = {"float64": 2.0 ** -1075, "float32": 2.0 ** -150, "float16": 2.0 ** -25,
        "bfloat16": 2.0 ** -134}


def f64(fn, *arrays, dtype=None, **kw):
    """fn (a gradref operator: gradref.conv_backprop_data, gradref.torch.convolution_backward,
    ...) on float64 copies of its float array arguments: the exact-input golden. dtype="bf16"
    reads uint16 arrays as bf16 bits. Integer arrays (seq_len, split sizes) pass unchanged."""
    np = _np()
    bf16 = dtype in ("bf16", "bfloat16")

    def conv(a):
        if hasattr(a, "dtype") and str(a.dtype).replace("torch.", "") in (
                "float16", "float32", "float64", "bfloat16") or (bf16 and hasattr(a, "dtype")
                                                                 and a.dtype == np.uint16):
            return _float64(a, dtype)
        return a
    return fn(*[conv(a) for a in arrays], **{k: conv(v) for k, v in kw.items()})


RECAT = ("recat_embedding_grad_output", "recat_embedding_grad_output_mixed_D",
         "recat_embedding_grad_output_mixed_D_batch")
TERMS = ("conv_backprop_data", "conv3d_backprop_filter", "grid_sampler3d_grad",
         "rope_grad") + RECAT


def terms(name, *arrays, dtype=None, **kw):
    """(magnitude, count): per output element Σ|term| in float64 and the number of terms (for
    grid_sampler3d_grad, of roundings: its terms' own 5 included; docs/precision.md).
    name: "conv_backprop_data" (filter, diff, its keywords), "conv3d_backprop_filter" (input,
    out_backprop; filter_sizes, strides, padding, ... as keywords), "grid_sampler3d_grad"
    (grad_output, input, grid, the modes: ((dx, dgrid) magnitudes, (dx, dgrid) counts); see
    coordinate_slack too), "rope_grad" (q_embed_grad,
    k_embed_grad, cos, sin, seq_len, mode: "atb" as the operator by default, "half" or
    "interleaved"; two terms an element, none in the columns past rotary_dim, passed through),
    and the three recat calls (grad_output and their arguments: the
    output's values moved, count 0)."""
    from . import _ops
    if name == "conv_backprop_data":  # the library's GRADREF_TERM_* outputs
        return tuple(_ops.conv_backprop_data(*arrays[:2], dtype=dtype, terms=t, **kw)
                     for t in ("magnitudes", "counts"))
    if name == "conv3d_backprop_filter":
        kw = dict(kw)
        sizes = kw.pop("filter_sizes")
        return tuple(_ops.conv3d_backprop_filter(arrays[0], sizes, arrays[1], dtype=dtype,
                                                 terms=t, **kw) for t in ("magnitudes", "counts"))
    if name == "grid_sampler3d_grad":  # the library's: (dx, dgrid) each
        mag, count = (_ops.grid_sampler3d_grad(*arrays, dtype=dtype, terms=t, **kw)
                      for t in ("magnitudes", "counts"))
        return mag, count
    if name == "rope_grad":
        return _rope_terms(arrays, kw, dtype)
    if name in RECAT:  # the library's: values moved, each output element one input's
        mag, count = (getattr(_ops, name)(*arrays, dtype=dtype, terms=t, **kw)
                      for t in ("magnitudes", "counts"))
        return mag, count
    raise ValueError("gradref.precision.terms: no terms for %r; terms exist for %s"
                     % (name, ", ".join(TERMS)))


def _rope_terms(arrays, kw, dtype):
    """rope_grad's two terms an element, the library's: the adjoints' c g + s g' or c g - s g',
    and ATB's g (c + s') or g (c - s'), whose weight is a rounded sum (so g c and g s' are the
    terms, two roundings deep); the columns past rotary_dim pass g through (|g|, count 0)."""
    from . import _ops
    kw = dict(kw)
    mode = kw.pop("mode", arrays[5] if len(arrays) > 5 else "atb")  # rope_grad's default
    if mode not in ("atb", "half", "rotate_half", "interleaved"):
        raise ValueError("gradref.precision.terms: rope_grad's mode %r; atb, half or "
                         "interleaved" % (mode,))
    mag, count = (_ops.rope_grad(*arrays[:5], mode, dtype=dtype, terms=t, **kw)
                  for t in ("magnitudes", "counts"))
    return mag, count


def coordinate_slack(grad_output, input, grid, interpolation_mode, padding_mode, align_corners,
                     *, dtype=None, ulps=8, factor=4):
    """grid_sampler3d_grad's (dx, dgrid) slack for the sampling coordinates, which a correct
    kernel computes from the grid in float32 (a few roundings; CANN does so for every dtype):
    factor times the f64 result's change when each grid axis moves by ulps float32 units
    (ulps 2^-24 (|g| + 1)) either way, the larger side, summed over the axes. A first-order
    estimate (the results are piecewise smooth in the grid): add it to error_bound's slack."""
    np = _np()
    from . import _ops
    go, x, g = (_float64(a, dtype) for a in (grad_output, input, grid))
    args = (interpolation_mode, padding_mode, align_corners)
    base = _ops.grid_sampler3d_grad(go, x, g, *args)
    slack = [np.zeros_like(b) for b in base]
    with np.errstate(invalid="ignore"):
        for axis in range(3):
            step = ulps * 2.0 ** -24 * (np.abs(g[..., axis]) + 1)
            change = [np.zeros_like(b) for b in base]
            for sign in (1, -1):
                moved = g.copy()
                moved[..., axis] += sign * step
                for i, r in enumerate(_ops.grid_sampler3d_grad(go, x, moved, *args)):
                    change[i] = np.fmax(change[i], np.abs(r - base[i]))
            for i in range(2):
                slack[i] += factor * np.nan_to_num(change[i], nan=0.0, posinf=0.0)
    return tuple(slack)


def gamma(n, u):
    """Higham's gamma_n = n u / (1 - n u) (infinite once n u >= 1/2)."""
    nu = n * u
    return _np().where(nu < 0.5, nu / (1.0 - _np().minimum(nu, 0.5)), math.inf)


def error_bound(golden_f64, magnitude, count, out_dtype, acc_dtype="float32", *,
                input_rounding=None, model="worst", lam=1.0, slack=0.0):
    """Per element, the largest |actual - golden| of a correct kernel that forms each term as a
    product of the given inputs (after rounding them to input_rounding, as HF32 does: "hf32",
    "hf32_910b", "bfloat16", "float16"; None: used as given), sums the count terms in
    acc_dtype in any order and rounds once to out_dtype:

        model "worst":         gamma_n(u_acc) Σ|t|              (Higham, Accuracy and Stability
                                                                of Numerical Algorithms, 3.1)
        model "probabilistic": (exp(lam sqrt(n) u + n u^2 / (1 - u)) - 1) Σ|t|   (Higham and
                               Mary, SIAM J. Sci. Comput. 41(5), 2019: holds with probability at
                               least 1 - 2 exp(-lam^2 (1 - u)^2 / 2) per sum)

    plus (2 u_in + u_in^2) Σ|t| for the inputs' rounding, an operator's own slack (such as
    coordinate_slack's), u_out (|y| + that) for the output's rounding and the output's
    subnormal spacing."""
    np = _np()
    y = np.abs(np.asarray(golden_f64, np.float64))
    mag = np.asarray(magnitude, np.float64)
    n = np.asarray(count, np.float64)
    u = UNIT[acc_dtype]
    if model == "worst":
        g = gamma(n, u)
    elif model == "probabilistic":
        g = np.expm1(lam * np.sqrt(n) * u + n * u * u / (1.0 - u))
    else:
        raise ValueError("gradref.precision.error_bound: model %r; worst or probabilistic"
                         % (model,))
    inner = g * mag + np.asarray(slack, np.float64)
    if input_rounding is not None:
        ui = UNIT[input_rounding]
        inner = inner + (2 * ui + ui * ui) * mag
    u_out = UNIT[out_dtype] if UNIT[out_dtype] > u else 0.0
    return inner + u_out * (y + inner) + TINY[out_dtype]


def check_bound(actual, golden_f64, bound, *, dtype=None, worst=5):
    """A Verdict: the elements whose error passes the bound (none for a correct kernel; each is a
    bug), and the tightness of the rest (the largest and the median error / bound)."""
    np = _np()
    a = _float64(actual, dtype).reshape(-1)
    g = np.asarray(golden_f64, np.float64)
    b = np.broadcast_to(np.asarray(bound, np.float64), g.shape).reshape(-1)
    g = g.reshape(-1)
    if a.shape != g.shape:
        raise ValueError("gradref.precision.check_bound: actual has %d elements, the golden %d"
                         % (a.size, g.size))
    finite = np.isfinite(a) & np.isfinite(g)
    same = (np.isnan(a) & np.isnan(g)) | (np.isinf(a) & (a == g))
    err = np.where(finite, np.abs(a - g), np.where(same, 0.0, np.inf))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(b > 0, err / b, np.where(err > 0, np.inf, 0.0))
    past = np.flatnonzero(err > b)
    order = np.argsort(-ratio, kind="stable")[:worst]
    metrics = {"elements": int(a.size), "past the bound": int(past.size),
               "largest error/bound": float(ratio.max()) if ratio.size else 0.0,
               "median error/bound": float(np.median(ratio)) if ratio.size else 0.0}
    reasons = ["%d elements past the bound (first at %d)" % (past.size, int(past[0]))] \
        if past.size else []
    rows = [(int(i), float(a[i]), float(g[i]), float(ratio[i])) for i in order]
    return Verdict("error bound", not past.size, metrics, rows, reasons, "error / bound")
