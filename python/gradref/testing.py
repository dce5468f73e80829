# SPDX-License-Identifier: Apache-2.0
"""Comparing a kernel's result with a gradref golden.

assert_close(actual, golden) fails with a report of where and by how much they differ;
ulp_distance(a, b) counts representable values between them; hf32_round(a) rounds float32
values as CANN's golden emulates HF32. They take numpy arrays or torch tensors (any device:
they are moved to the CPU), and bf16 as torch.bfloat16 or as uint16 numpy arrays with
dtype="bf16".
"""
import sys
import numbers

# (rtol, atol) per dtype, as torch.testing.assert_close chooses them
DEFAULT_TOLERANCES = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
}


def _np():
    import numpy
    return numpy


def _as_numpy(x, bf16):
    """(float64 or integer values, dtype name, raw bits or None)."""
    np = _np()
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        if x.dtype == torch.bfloat16:
            bits = x.view(torch.int16).numpy().view(np.uint16)
            return _bf16_values(bits), "bfloat16", bits
        x = x.numpy()
    if isinstance(x, (numbers.Number, list, tuple)):
        x = np.asarray(x)
    if not isinstance(x, np.ndarray):
        raise TypeError("gradref.testing: expected a numpy array or torch tensor, not %s"
                        % type(x).__name__)
    if bf16 and x.dtype == np.uint16:
        return _bf16_values(x), "bfloat16", x
    name = x.dtype.name
    if name in DEFAULT_TOLERANCES:
        return x.astype(np.float64), name, x
    if x.dtype.kind in "iub":
        return x.astype(np.int64), name, None
    raise TypeError("gradref.testing: unsupported dtype %s" % x.dtype)


def _float64(x, dtype=None):
    """x's values as a float64 numpy array (dtype="bf16": uint16 arrays hold bf16 bits)."""
    return _as_numpy(x, dtype in ("bf16", "bfloat16"))[0].astype(_np().float64)


def _pair(actual, golden, dtype, error):
    """(actual values, its dtype name, golden values, its dtype name); `error` (an exception
    class) when their shapes differ."""
    bf16 = dtype in ("bf16", "bfloat16")
    a, a_name, _ = _as_numpy(actual, bf16)
    g, g_name, _ = _as_numpy(golden, bf16)
    if a.shape != g.shape:
        raise error("gradref: shapes differ: actual %s, golden %s" % (a.shape, g.shape))
    return a, a_name, g, g_name


def _bf16_values(bits):
    np = _np()
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def assert_close(actual, golden, rtol=None, atol=None, *, equal_nan=True, dtype=None, msg=None):
    """Raises AssertionError unless |actual - golden| <= atol + rtol * |golden| everywhere,
    with NaN matching NaN (equal_nan) and infinities matching exactly. rtol and atol default
    to torch.testing's values for the golden's dtype (DEFAULT_TOLERANCES; 0 for integers).
    The message gives the number and share of mismatches, the largest absolute and relative
    errors, and the worst element's index with both values."""
    np = _np()
    a, a_name, g, g_name = _pair(actual, golden, dtype, AssertionError)
    default = DEFAULT_TOLERANCES.get(g_name, (0.0, 0.0))
    rtol = default[0] if rtol is None else float(rtol)
    atol = default[1] if atol is None else float(atol)
    if a.dtype.kind == "i" and g.dtype.kind == "i":
        # exact unless the caller gives a tolerance (MegEngine's int8 tests allow +-1)
        diff = np.abs(a - g).astype(np.float64)
        bad = diff > atol + rtol * np.abs(g).astype(np.float64)
        rel = diff / np.maximum(np.abs(g), 1)
    else:
        a = a.astype(np.float64)
        g = g.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            diff = np.abs(a - g)
            rel = diff / np.abs(g)
        finite = np.isfinite(a) & np.isfinite(g)
        bad = np.zeros(a.shape, dtype=bool)
        bad[finite] = diff[finite] > atol + rtol * np.abs(g[finite])
        nan_a, nan_g = np.isnan(a), np.isnan(g)
        bad |= (nan_a != nan_g) if equal_nan else (nan_a | nan_g)
        inf = ~finite & ~nan_a & ~nan_g
        bad[inf] |= a[inf] != g[inf]
        diff = np.where(finite, diff, np.where(bad, np.inf, 0.0))
        rel = np.where(finite, np.nan_to_num(rel, nan=0.0, posinf=np.inf), diff)
    count = int(bad.sum())
    if count == 0:
        return
    total = bad.size
    masked = np.where(bad, diff, -1.0)
    worst = np.unravel_index(int(np.argmax(masked)), bad.shape) if bad.ndim else ()
    lines = [
        msg or "gradref.testing.assert_close: tensors are not close",
        "  mismatched elements: %d / %d (%.4g%%)" % (count, total, 100.0 * count / total),
        "  greatest absolute difference: %r at index %s (up to %r allowed)"
        % (float(np.max(np.where(bad, diff, 0.0))), tuple(int(i) for i in worst),
           atol + rtol * (abs(float(g[worst])) if np.isfinite(g[worst]) else 0.0)),
        "  greatest relative difference: %r" % float(np.max(np.where(bad, rel, 0.0))),
        "  actual[%s] = %r, golden[%s] = %r" % (tuple(int(i) for i in worst), _item(a, worst),
                                               tuple(int(i) for i in worst), _item(g, worst)),
        "  rtol=%g atol=%g (golden dtype %s, actual dtype %s)" % (rtol, atol, g_name, a_name),
    ]
    raise AssertionError("\n".join(lines))


def _item(x, index):
    v = x[index]
    return v.item() if hasattr(v, "item") else v


_BITS = {"float16": ("uint16", 16), "bfloat16": ("uint16", 16), "float32": ("uint32", 32),
         "float64": ("uint64", 64)}


def ulp_distance(a, b, *, dtype=None):
    """How many representable values of the common dtype (f16, bf16, f32 or f64) lie between
    a and b, element by element (0 when equal, +0 and -0 count as 1 apart; NaN gives -1)."""
    np = _np()
    bf16 = dtype in ("bf16", "bfloat16")
    _, an, ab = _as_numpy(a, bf16)
    _, bn, bb = _as_numpy(b, bf16)
    if an != bn or an not in _BITS:
        raise TypeError("gradref.testing.ulp_distance: both must be one float dtype, not %s and "
                        "%s" % (an, bn))
    udt, width = _BITS[an]
    sign = np.uint64(1) << np.uint64(width - 1)
    ka = _ordered(np.ascontiguousarray(ab).view(udt).astype(np.uint64), sign)
    kb = _ordered(np.ascontiguousarray(bb).view(udt).astype(np.uint64), sign)
    dist = np.where(ka > kb, ka - kb, kb - ka)
    dist = np.minimum(dist, np.uint64(2 ** 63 - 1)).astype(np.int64)
    va, _, _ = _as_numpy(a, bf16)
    vb, _, _ = _as_numpy(b, bf16)
    return np.where(np.isnan(va) | np.isnan(vb), -1, dist)


def _ordered(u, sign):
    """Bit patterns mapped onto one ordered line: negatives below positives, -0 just below +0."""
    np = _np()
    neg = (u & sign) != 0
    mag = u & ~sign
    return np.where(neg, sign - np.uint64(1) - mag, sign + mag)


def hf32_round(a, kept_bits=10, out=None):
    """float32 values rounded to HF32 as CANN's golden does (simulate_hf32_precision on the
    int32 view): kept_bits 10 (the default and Ascend 950) or 11 (Ascend 910B). Ties round away
    from zero, carries run into the exponent; a NaN is quieted first (0x7fffffff still wraps
    to -0, 0xffffffff to +0, as the golden's integers do). gradref's HF32 precisions round x and dy this way;
    the golden also rounds its float32 output, which gradref leaves to this function (or to
    conv3d_backprop_filter's round_output=True). Returns the kind that came in: a float32 torch
    tensor for a torch tensor, else a numpy float32 array; out= (a float32 array or tensor of
    a's shape, a itself included) receives the values instead."""
    np = _np()
    if kept_bits not in (10, 11):
        raise ValueError("gradref.testing.hf32_round: kept_bits is %r, not 10 or 11" % (kept_bits,))
    torch = sys.modules.get("torch")
    is_torch = torch is not None and isinstance(a, torch.Tensor)
    src = a.detach().cpu().numpy() if is_torch else a
    v = np.array(src, dtype=np.float32, copy=True).view(np.uint32)
    # a NaN is quieted first, as the golden's values are on their way through float64
    v = np.where((v & np.uint32(0x7fffffff)) > np.uint32(0x7f800000), v | np.uint32(0x400000), v)
    cut = 23 - kept_bits
    v = (v + np.uint32(1 << (cut - 1))) & np.uint32((0xffffffff >> cut) << cut)
    r = v.view(np.float32)
    if out is not None:
        if torch is not None and isinstance(out, torch.Tensor):
            out.copy_(torch.from_numpy(r.reshape(tuple(out.shape))))
        else:
            out[...] = r.reshape(out.shape)
        return out
    return torch.from_numpy(r) if is_torch else r
