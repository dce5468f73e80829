# SPDX-License-Identifier: Apache-2.0
"""The operators, with the parameter names and order of the systems they model."""
import ctypes
import numbers

from . import _arrays, _lib
from ._arrays import _numpy, as_input, as_output, new_output

lib = _lib.lib


class Error(ValueError):
    """A gradref call failed: .status is the gradref_status value, .status_name its name
    ("GRADREF_ERR_SHAPE", ...), .message the library's message."""

    def __init__(self, status, message):
        self.status = int(status)
        self.status_name = lib.gradref_status_string(self.status).decode()
        self.message = message
        super().__init__("%s: %s" % (self.status_name, message))


def version():
    """The loaded library's version, "MAJOR.MINOR.PATCH"."""
    return lib.gradref_version().decode()


def library_path():
    """The file the package loaded libgradref from."""
    return _lib.path


# The C names a message may hold, as the Python caller spells them
_EXEC_NAMES = {"exec.num_threads": "threads", "exec.precision": "precision"}
_GS3D_NAMES = {"p.interpolation": "interpolation_mode", "p.padding": "padding_mode",
               "p.align_corners": "align_corners", "grad": "grad_output", "x": "input"}
_ROPE_NAMES = {"p.seq_lens": "seq_len", "p.num_seqs": "len(seq_len)",
               "p.start_positions": "start_positions", "p.head_dim": "head_dim",
               "p.rotary_dim": "rotary_dim", "p.mode": "mode"}
_CBD_NAMES = {"p.stride": "stride", "p.dilation": "dilate", "p.pad": "pad", "p.mode": "mode",
              "p.groups": "groups"}
_C3F_NAMES = {"p.stride": "strides", "p.dilation": "dilations", "p.pad": "padding",
              "p.groups": "groups", "x": "input", "dy": "out_backprop"}


def _python_names(message, names):
    """message with each C name (a field, or a tensor before '.', ' is' or ' and') replaced."""
    import re
    table = dict(_EXEC_NAMES, **(names or {}))
    for c_name in sorted(table, key=len, reverse=True):
        pattern = r"(?<![\w.])" + re.escape(c_name) + \
            (r"(?=[\[.,;:)]|\s|$)" if "." in c_name else r"(?=[.\[;,]| is\b| and\b|$)")
        message = re.sub(pattern, table[c_name], message)
    return message


def _check(status, names=None, hint=None):
    if status != 0:
        message = _python_names(lib.gradref_last_error().decode(errors="replace"), names)
        if hint and status == _lib.ERR_SHAPE:
            message += " (" + hint + ")"
        raise Error(status, message)


def _int(value, name, minimum=None, bits=64):
    """An int that fits the C field it goes to (int64_t, or int32_t with bits=32): ctypes
    would wrap a larger one silently (2**32 + 3 read as 3)."""
    if type(value) is int and (minimum is None or value >= minimum) and \
            -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        return value  # the common case, without the abstract-class checks below
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("gradref: %s must be an int, not %s" % (name, type(value).__name__))
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError("gradref: %s is %d; it must be >= %d" % (name, value, minimum))
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise ValueError("gradref: %s is %d; it does not fit the library's %d-bit integer"
                         % (name, value, bits))
    return value


def _ints(values, name, bits=64):
    """A sequence of ints (list, tuple, 1-D integer array or tensor)."""
    if hasattr(values, "tolist") and not isinstance(values, (list, tuple)):
        values = values.tolist()
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError("gradref: %s must be a sequence of ints, not %s"
                        % (name, type(values).__name__))
    lo, hi = -(1 << (bits - 1)), 1 << (bits - 1)
    if all(type(v) is int and lo <= v < hi for v in values):
        return list(values)
    return [_int(v, "%s[%d]" % (name, i), bits=bits) for i, v in enumerate(values)]


def _bool(value, name):
    """True or False: a bool, 0 or 1, or "true"/"false" in any case (as shells and JSON write
    them); anything else is an error, not a truth value."""
    if value is True or value is False:
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(value, numbers.Integral) and int(value) in (0, 1):
        return bool(int(value))
    raise TypeError("gradref: %s must be True or False, not %r" % (name, value))


_PRECISIONS = {"default": _lib.PRECISION_DEFAULT, "high": _lib.PRECISION_HIGH,
               "hf32": _lib.PRECISION_HF32, "hf32_910b": _lib.PRECISION_HF32_910B,
               "megengine_default": _lib.PRECISION_MEGENGINE_DEFAULT}


def _exec(threads, precision, strict=False, padded_zeros=False):
    num_threads = 0 if threads is None else _int(threads, "threads", bits=32)
    if precision is None:
        code = _lib.PRECISION_DEFAULT
    elif isinstance(precision, str):
        if precision.lower() not in _PRECISIONS:
            raise ValueError("gradref: precision %r; use %s" % (precision, sorted(_PRECISIONS)))
        code = _PRECISIONS[precision.lower()]
    else:
        code = _int(precision, "precision", bits=32)
    if strict is not False and _bool(strict, "strict"):
        code |= _lib.STRICT_UPSTREAM
    if padded_zeros is not False and _bool(padded_zeros, "padded_zeros"):
        code |= _lib.PADDED_ZEROS
    return _lib.Exec(None, 0, num_threads, code)


def _bf16(dtype):
    if dtype is None:
        return False
    if dtype in ("bf16", "bfloat16"):
        return True
    raise ValueError("gradref: dtype=%r; the only value is \"bf16\" (uint16 arrays hold bf16 bits)"
                     % (dtype,))


def _choice(value, table, name):
    """An enum argument given as an int or one of table's names."""
    if isinstance(value, str):
        key = value.lower()
        if key not in table:
            raise ValueError("gradref: %s=%r; use one of %s" % (name, value, sorted(table)))
        return table[key]
    return _int(value, name, bits=32)


_ITEM_BYTES = {_lib.F32: 4, _lib.F64: 8, _lib.F16: 2, _lib.BF16: 2, _lib.I8: 1, _lib.I32: 4,
               _lib.I64: 8}


def _given_output(given, shape, codes, name, bf16, dense=False):
    """A caller's out= array as an output descriptor, refused unless it is exactly what the
    call writes: `shape`, one of the dtype `codes`, and (dense=True: the descriptor is rebuilt
    from its memory, so nothing else would catch a mismatch) dense row-major strides."""
    a = as_output(given, name, bf16)
    if tuple(a.shape) != tuple(int(v) for v in shape):
        raise Error(_lib.ERR_SHAPE, "out %s has shape %s; this call writes %s"
                    % (name, tuple(a.shape), tuple(int(v) for v in shape)))
    if a.code not in codes:
        names = " or ".join(_CODE_NAMES[c] for c in codes)
        raise Error(_lib.ERR_DTYPE, "out %s is %s; this call writes %s"
                    % (name, _CODE_NAMES[a.code], names))
    if dense:
        run = 1
        for n, s in zip(reversed(a.shape), reversed(a.strides)):
            if n > 1 and s != run:
                raise Error(_lib.ERR_STRIDE, "out %s has element strides %s; it must be dense "
                            "(row-major, as the call lays it out)" % (name, tuple(a.strides)))
            run *= n
    return a


_CODE_NAMES = dict(_arrays._NUMPY_NAMES)
_CODE_NAMES[_lib.BF16] = "bfloat16"


def _result(given, kind, shape, code, name, bf16, like=None, codes=None, dense=False):
    """The out= array if given (checked by _given_output against shape and codes, default
    (code,)), else a new one (a BF16 one in like's bfloat16 numpy dtype when it has one).
    A shape that cannot be allocated (broadcast inputs of a huge logical shape, sizes the
    library would refuse) raises Error, as the library would, not numpy's or torch's own."""
    if given is not None:
        return _given_output(given, shape, codes or (code,), name, bf16, dense)
    shape = [int(v) for v in shape]
    if any(v < 0 for v in shape):
        raise Error(_lib.ERR_SHAPE, "%s would have the negative shape %s: the arguments do not "
                    "fit together" % (name, tuple(shape)))
    nbytes = _ITEM_BYTES[code]
    for v in shape:
        nbytes *= v
    if nbytes >= 1 << 63:
        raise Error(_lib.ERR_OVERFLOW, "%s of shape %s would take %d bytes, more than int64 "
                    "holds" % (name, tuple(shape), nbytes))
    try:
        return new_output(kind, shape, code, like)
    except (MemoryError, ValueError, RuntimeError) as e:
        raise Error(_lib.ERR_NO_MEMORY, "%s of shape %s (%d bytes) could not be allocated: %s"
                    % (name, tuple(shape), nbytes, e)) from None


def _outs(out, n):
    if out is None:
        return (None,) * n
    if n == 1:
        return (out,)
    if not isinstance(out, (tuple, list)) or len(out) != n:
        raise TypeError("gradref: out must be a tuple of %d arrays (None for new ones)" % n)
    return tuple(out)


# ---------------------------------------------------------------- grid_sampler3d_grad

_INTERP = {"bilinear": _lib.INTERP_BILINEAR, "trilinear": _lib.INTERP_BILINEAR,
           "nearest": _lib.INTERP_NEAREST}
_PADDING = {"zeros": _lib.PAD_ZEROS, "border": _lib.PAD_BORDER,
            "reflection": _lib.PAD_REFLECTION}


def grid_sampler3d_grad(grad_output, input, grid, interpolation_mode, padding_mode,
                        align_corners, output_mask=(True, True), *, out=None, threads=None,
                        precision=None, strict=False, dtype=None):
    """PyTorch's grid_sampler_3d_backward / CANN GridSampler3DGrad: returns (dx, dgrid), each
    None when output_mask says so. interpolation_mode 0/"bilinear" or 1/"nearest";
    padding_mode 0/"zeros", 1/"border", 2/"reflection"."""
    bf16 = _bf16(dtype)
    p = _lib.GridSampler3dParams()
    p.interpolation = _choice(interpolation_mode, _INTERP, "interpolation_mode")
    p.padding = _choice(padding_mode, _PADDING, "padding_mode")
    p.align_corners = int(_bool(align_corners, "align_corners"))
    if output_mask == (True, True):
        mask = (True, True)
    else:
        mask = tuple(_bool(m, "output_mask[%d]" % i) for i, m in enumerate(output_mask))
        if len(mask) != 2:
            raise TypeError("gradref: output_mask must have two entries")
    g = as_input(grad_output, "grad_output", bf16)
    x = as_input(input, "input", bf16)
    gr = as_input(grid, "grid", bf16)
    out_dx, out_dgrid = _outs(out, 2)
    dx = _result(out_dx, g.kind, x.shape, x.code, "dx", bf16, g) if mask[0] else None
    dgrid = _result(out_dgrid, g.kind, gr.shape, gr.code, "dgrid", bf16, g) if mask[1] else None
    e = _exec(threads, precision, strict)
    _check(lib.gradref_grid_sampler3d_grad(ctypes.byref(p), g.ref, x.ref, gr.ref,
                                           dx.ref if dx else None, dgrid.ref if dgrid else None,
                                           ctypes.byref(e)), _GS3D_NAMES)
    return (dx.obj if dx else None, dgrid.obj if dgrid else None)


# ---------------------------------------------------------------- recat

def _recat_list(grad_output, values, name, fn, out, threads, precision, strict, dtype):
    bf16 = _bf16(dtype)
    go = as_input(grad_output, "grad_output", bf16)
    ranks = _ints(values, name)
    arr = (ctypes.c_int64 * max(len(ranks), 1))(*ranks)
    numel = 1
    for s in go.shape:
        numel *= s
    o = _result(out, go.kind, (numel,), go.code, "out", bf16, go)
    e = _exec(threads, precision, strict)
    _check(fn(go.ref, arr, len(ranks), o.ref, ctypes.byref(e)))
    return o.obj


def recat_embedding_grad_output(grad_output, num_features_per_rank, *, out=None, threads=None,
                                precision=None, strict=False, dtype=None):
    """FBGEMM recat_embedding_grad_output: grad_output (B, T, D), num_features_per_rank a list
    of ints summing to T; returns the 1-D re-laid gradient."""
    return _recat_list(grad_output, num_features_per_rank, "num_features_per_rank",
                       lib.gradref_recat_embedding_grad_output, out, threads, precision, strict,
                       dtype)


def recat_embedding_grad_output_mixed_D(grad_output, dim_sum_per_rank, *, out=None,
                                        threads=None, precision=None, strict=False, dtype=None):
    """FBGEMM recat_embedding_grad_output_mixed_D: grad_output (B, sumD), dim_sum_per_rank a
    list of ints summing to sumD."""
    return _recat_list(grad_output, dim_sum_per_rank, "dim_sum_per_rank",
                       lib.gradref_recat_embedding_grad_output_mixed_d, out, threads, precision,
                       strict, dtype)


def recat_embedding_grad_output_mixed_D_batch(grad_output, dim_sum_per_rank,
                                              cumsum_dim_sum_per_rank, *, out=None,
                                              threads=None, precision=None, strict=False,
                                              dtype=None):
    """FBGEMM recat_embedding_grad_output_mixed_D_batch: the split as int64 tensors; the cumsum
    is the exclusive prefix sum (FBGEMM's kernel reads it so)."""
    bf16 = _bf16(dtype)
    go = as_input(grad_output, "grad_output", bf16)
    d = as_input(dim_sum_per_rank, "dim_sum_per_rank")
    c = as_input(cumsum_dim_sum_per_rank, "cumsum_dim_sum_per_rank")
    numel = 1
    for s in go.shape:
        numel *= s
    o = _result(out, go.kind, (numel,), go.code, "out", bf16, go)
    e = _exec(threads, precision, strict)
    _check(lib.gradref_recat_embedding_grad_output_mixed_d_batch(go.ref, d.ref, c.ref, o.ref,
                                                                 ctypes.byref(e)))
    return o.obj


# ---------------------------------------------------------------- rope_grad

_ROPE_MODES = {"atb": _lib.ROPE_ATB, "half": _lib.ROPE_HALF, "rotate_half": _lib.ROPE_HALF,
               "interleaved": _lib.ROPE_INTERLEAVED}


def rope_grad(q_embed_grad, k_embed_grad, cos, sin, seq_len, mode="atb", *, head_dim=None,
              rotary_dim=0, start_positions=None, out=None, threads=None, precision=None,
              strict=False, dtype=None):
    """ATB RopeGrad (mode "atb", bit for bit) or the exact adjoint of rotate_half ("half") or
    interleaved ("interleaved") RoPE. q_embed_grad (T, Hq), k_embed_grad (T, Hk), cos and sin
    (S_max, head_dim); seq_len is ATB's qSeqLen (a list summing to T). Returns (q_grad, k_grad)."""
    bf16 = _bf16(dtype)
    q = as_input(q_embed_grad, "q_embed_grad", bf16)
    k = as_input(k_embed_grad, "k_embed_grad", bf16)
    c = as_input(cos, "cos", bf16)
    s = as_input(sin, "sin", bf16)
    lens = _ints(seq_len, "seq_len", bits=32)
    p = _lib.RopeParams()
    p.mode = _choice(mode, _ROPE_MODES, "mode")
    if head_dim is None:
        head_dim = c.shape[-1] if c.shape else 0
    p.head_dim = _int(head_dim, "head_dim", bits=32)
    p.rotary_dim = _int(rotary_dim, "rotary_dim", bits=32)
    p.num_seqs = len(lens)
    lens_arr = (ctypes.c_int32 * max(len(lens), 1))(*lens)
    p.seq_lens = lens_arr
    if start_positions is not None:
        starts = _ints(start_positions, "start_positions")
        if len(starts) != len(lens):
            raise ValueError("gradref: start_positions has %d entries but seq_len has %d"
                             % (len(starts), len(lens)))
        starts_arr = (ctypes.c_int64 * max(len(starts), 1))(*starts)
        p.start_positions = starts_arr
    out_q, out_k = _outs(out, 2)
    dq = _result(out_q, q.kind, q.shape, q.code, "q_grad", bf16, q)
    dk = _result(out_k, q.kind, k.shape, k.code, "k_grad", bf16, q)
    e = _exec(threads, precision, strict)
    _check(lib.gradref_rope_grad(ctypes.byref(p), q.ref, k.ref, c.ref, s.ref, dq.ref, dk.ref,
                                 ctypes.byref(e)), _ROPE_NAMES)
    return dq.obj, dk.obj


# ---------------------------------------------------------------- convolutions

_CONV_MODES = {"cross_correlation": _lib.CONV_CROSS_CORRELATION,
               "convolution": _lib.CONV_CONVOLUTION}
_CHANNELS_FIRST = {"ncw": 1, "nchw": 2, "ncdhw": 3}
_CHANNELS_LAST = {"nwc": 1, "nhwc": 2, "ndhwc": 3}


def _per_dim(value, r, name, minimum):
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        vals = [int(value)] * r
    else:
        vals = _ints(value, name)
        if len(vals) != r:
            raise ValueError("gradref: %s has %d entries for %d spatial dims" % (name, len(vals), r))
    for v in vals:
        if v < minimum:
            raise ValueError("gradref: %s %s; each must be >= %d" % (name, vals, minimum))
    return vals


def _pads(pad, r, name="pad"):
    """pad as an int, r symmetric pads, or 2r (begin, end) pads; returns 2r values."""
    if isinstance(pad, numbers.Integral) and not isinstance(pad, bool):
        return [int(pad)] * (2 * r)
    vals = []
    for v in pad:
        if isinstance(v, (tuple, list)):
            vals.extend(_ints(v, name))
        else:
            vals.append(_int(v, name))
    if len(vals) == r:
        return [v for v in vals for _ in (0, 1)]
    if len(vals) == 2 * r:
        return vals
    raise ValueError("gradref: %s has %d values; give 1, %d (symmetric) or %d (begin, end per "
                     "dim)" % (name, len(vals), r, 2 * r))


def _named_pads(p, pad, r, input_size, kernel_size):
    """TF's "SAME" (gradref_conv_pads_same, from p's strides and dilations) or "VALID" into p;
    SAME needs the input's spatial size."""
    mode = pad.upper()
    if mode == "VALID":
        return
    if mode != "SAME":
        raise ValueError("gradref: pad=%r; use \"SAME\", \"VALID\" or numbers" % (pad,))
    if input_size is None:
        raise ValueError("gradref: pad=\"SAME\" needs grad's size: pass grad_shape or out")
    ins = (ctypes.c_int64 * r)(*input_size)
    kk = (ctypes.c_int64 * r)(*kernel_size)
    _check(lib.gradref_conv_pads_same(ctypes.byref(p), r, ins, kk))


def _permuted(arg, order):
    """arg's descriptor with its dims taken in `order` (a view, no copy)."""
    arg.permute(order)
    return arg


_OUT_DTYPES = {"float32": _lib.F32, "f32": _lib.F32, "float64": _lib.F64, "f64": _lib.F64,
               "float16": _lib.F16, "f16": _lib.F16, "bfloat16": _lib.BF16, "bf16": _lib.BF16,
               "int32": _lib.I32, "i32": _lib.I32, "int8": _lib.I8, "i8": _lib.I8}


def _out_codes(out_dtype, default):
    """(the output's dtype code, the codes an out= array may have): without out_dtype, `default`
    (an F32 out= array also takes F16/BF16 results in f32)."""
    if out_dtype is not None:
        code = _out_code(out_dtype, default)
        return code, (code,)
    return default, (default, _lib.F32) if default in (_lib.F16, _lib.BF16) else (default,)


def _out_code(out_dtype, default):
    """The output's dtype code: `default`, or out_dtype by name ("float32", "bf16", ...)."""
    if out_dtype is None:
        return default
    if hasattr(out_dtype, "name") and not isinstance(out_dtype, str):  # numpy or torch dtype
        out_dtype = str(out_dtype.name if hasattr(out_dtype, "name") else out_dtype)
    key = str(out_dtype).lower().replace("torch.", "")
    if key not in _OUT_DTYPES:
        raise ValueError("gradref: out_dtype=%r; use one of %s" % (out_dtype, sorted(_OUT_DTYPES)))
    return _OUT_DTYPES[key]


def conv_backprop_data(filter, diff, mode="CROSS_CORRELATION", sparse="DENSE", format="NCHW",
                       stride=1, pad=0, dilate=1, *, grad_shape=None, qs8_scales=None, out=None,
                       out_dtype=None, threads=None, precision=None, strict=False, dtype=None):
    """MegEngine ConvolutionBackwardData: grad = dL/dx from filter and diff = dL/dy, 1-D to 3-D.
    format "NCHW" (also NCW, NCDHW) or "NHWC" (NWC, NDHWC) lays out diff, grad and filter as
    MegEngine does (NHWC filter (OC, FH, FW, IC)); sparse "GROUP" takes a (G, OC/G, IC/G, ...)
    filter. pad is an int, one per dim (symmetric, as MegEngine), (begin, end) per dim, or
    TF's "SAME" (which needs grad_shape or out) or "VALID".
    grad_shape gives grad's spatial size (or whole shape) when stride > 1 leaves it ambiguous.
    I8 filter and diff give an I32 grad; F16/BF16 give their own dtype, or out_dtype="float32"
    (an F32 grad, as out= an F32 array does). qs8_scales =
    (filter_scale, diff_scale, grad_scale) makes it MegEngine's QuantizedS8 call: I8 inputs of
    those scales, an I8 grad requantised to grad_scale."""
    bf16 = _bf16(dtype)
    fmt = format.lower() if isinstance(format, str) else format
    if fmt in _BLOCKED:
        return _conv_backprop_data_blocked(
            filter, diff, mode, sparse, fmt, stride, pad, dilate, grad_shape, qs8_scales, out,
            out_dtype, threads, precision, strict, bf16)
    f = as_input(filter, "filter", bf16)
    d = as_input(diff, "diff", bf16)
    r = len(d.shape) - 2
    if r < 1 or r > 3:
        raise ValueError("gradref: diff has %d dims; it must have 3, 4 or 5" % len(d.shape))
    if fmt in _CHANNELS_FIRST:
        last = False
    elif fmt in _CHANNELS_LAST:
        last = True
    else:
        raise ValueError("gradref: format=%r; use NCHW (NCW, NCDHW), NHWC (NWC, NDHWC), NCHW4 "
                         "or NHWCD4" % (format,))
    grouped = _choice(sparse, {"dense": 0, "group": 1}, "sparse") == 1
    p = _lib.ConvParams()
    p.mode = _choice(mode, _CONV_MODES, "mode")
    st = _per_dim(stride, r, "stride", 1)
    dl = _per_dim(dilate, r, "dilate", 1)
    named = isinstance(pad, str)
    pd = [0] * (2 * r) if named else _pads(pad, r)
    for j in range(r):
        p.stride[j], p.dilation[j] = st[j], dl[j]
        p.pad[2 * j], p.pad[2 * j + 1] = pd[2 * j], pd[2 * j + 1]
    if last:  # logical (N, C, spatial...) views of channels-last arrays
        _permuted(d, [0, r + 1] + list(range(1, r + 1)))
        lead = 1 if grouped else 0
        order = list(range(lead + 1)) + [lead + 1 + r] + list(range(lead + 1, lead + 1 + r))
        if f.tensor.ndim == len(order):
            _permuted(f, order)
    fs = [f.tensor.shape[i] for i in range(f.tensor.ndim)]
    if grouped:
        if len(fs) != r + 3:
            raise ValueError("gradref: a GROUP filter has %d dims, here %d" % (r + 3, len(fs)))
        icpg, ks, groups = fs[2], fs[3:], fs[0]
    else:
        if len(fs) != r + 2:
            raise ValueError("gradref: a DENSE filter has %d dims, here %d" % (r + 2, len(fs)))
        icpg, ks, groups = fs[1], fs[2:], 1
    p.groups = _int(groups, "the filter's group count", bits=32)
    n = d.tensor.shape[0]
    if grad_shape is None and out is not None and len(out.shape) == r + 2:
        grad_shape = tuple(out.shape)  # stride > 1 leaves grad's size to the out= array
    gs = None
    if grad_shape is not None:
        gs = _ints(grad_shape, "grad_shape")
        if len(gs) == r + 2:
            gs = gs[2:] if not last else gs[1:r + 1]
        if len(gs) != r:
            raise ValueError("gradref: grad_shape has %d entries; give %d (spatial) or %d"
                             % (len(gs), r, r + 2))
    if named:
        _named_pads(p, pad, r, gs, ks)
        pd = [p.pad[j] for j in range(2 * r)]
    spatial = gs if gs is not None else [
        (d.tensor.shape[2 + j] - 1) * st[j] + dl[j] * (ks[j] - 1) + 1 - pd[2 * j] - pd[2 * j + 1]
        for j in range(r)]
    if qs8_scales is not None:
        sc = tuple(float(v) for v in qs8_scales)
        if len(sc) != 3:
            raise TypeError("gradref: qs8_scales is (filter_scale, diff_scale, grad_scale)")
        scales = _lib.Qs8Scales(*sc)
        out_code, codes = f.code, (f.code,)  # I8
    else:
        out_code, codes = _out_codes(out_dtype, _lib.I32 if f.code == _lib.I8 else f.code)
    c = groups * icpg
    shape = [n] + spatial + [c] if last else [n, c] + spatial
    g = _result(out, d.kind, shape, out_code, "grad", bf16, d, codes)
    if last:
        _permuted(g, [0, r + 1] + list(range(1, r + 1)))
    e = _exec(threads, precision, strict)
    hint = None if grad_shape is None else "grad is shaped by grad_shape=%r" % (grad_shape,)
    if qs8_scales is not None:
        _check(lib.gradref_conv_backprop_data_qs8(ctypes.byref(p), ctypes.byref(scales), f.ref,
                                                  d.ref, g.ref, ctypes.byref(e)), _CBD_NAMES,
               hint)
    else:
        _check(lib.gradref_conv_backprop_data(ctypes.byref(p), f.ref, d.ref, g.ref,
                                              ctypes.byref(e)), _CBD_NAMES, hint)
    return g.obj


# MegEngine's channel-blocked formats: the C format codes, and where the logical (N, C, H, W)
# sizes sit in the physical array (C given as its blocks)
_BLOCKED = {"nchw4": (_lib.FORMAT_NCHW4, (0, 1, 2, 3)),
            "nhwcd4": (_lib.FORMAT_NHWCD4, (0, 2, 1, 3))}


def _zeros_result(like, shape, *, out=None, out_dtype=None, dtype=None, **_):
    """A result of zeros in like's kind and dtype (out_dtype when given), or out= zeroed: for
    upstream calls that compute over nothing (empty windows, no ranks)."""
    bf16 = _bf16(dtype)
    a = as_input(like, "like", bf16) if not isinstance(like, _arrays.Arg) else like
    code, codes = _out_codes(out_dtype, a.code)
    g = _result(out, a.kind, shape, code, "grad", bf16, a, codes)
    g.obj[...] = 0
    return g.obj


def _dense_arg(x, name, bf16):
    """An input whose memory is dense row-major (copied when it is not)."""
    a = as_input(x, name, bf16)
    want, run = [], 1
    for n in reversed(a.shape):
        want.append(run)
        run *= n
    want.reverse()
    if all(n <= 1 or s == w for n, s, w in zip(a.shape, a.strides, want)):
        return a
    dense = x.contiguous() if a.kind == "torch" else _numpy().ascontiguousarray(a.obj)
    return as_input(dense, name, bf16)


def _blocked(a, name, init, code, *args):
    """a's descriptor rebuilt by a C layout helper (init: gradref_tensor_init_format or
    gradref_conv_filter_init_format) over its dense memory."""
    arr = (ctypes.c_int64 * len(args[-1]))(*args[-1])
    _check(init(a.ref, a.tensor.data, a.code, code, *args[:-1], arr))
    return a


def _blocked_filter_logical(fs, fmt, grouped, dot, name="filter"):
    """MegEngine's physical filter shape in a blocked format -> (logical shape, C format)."""
    def bad(want):
        raise ValueError("gradref: a %s %s %s filter has the shape %s; got %s"
                         % ("GROUP" if grouped else "DENSE", fmt.upper(),
                            "(QuantizedS8)" if dot else "", want, tuple(fs)))
    last = fs[-1] if fs else 0
    if fmt == "nchw4":
        if grouped:
            if len(fs) != 6 or last != 4:
                bad("(G, OC/G, IC/G/4, FH, FW, 4)")
            return [fs[0], fs[1], fs[2] * 4, fs[3], fs[4]], 6
        if len(fs) != 5 or last != 4:
            bad("(OC, IC/4, FH, FW, 4)")
        return [fs[0], fs[1] * 4, fs[2], fs[3]], 6
    code = _lib.FORMAT_NHWCD4_DOT if dot else _lib.FORMAT_NHWCD4
    if grouped and len(fs) == 5:  # channel-wise (G/4, 1, FH, FW, 4)
        if fs[1] != 1 or last != 4:
            bad("(G/4, 1, FH, FW, 4)")
        return [fs[0] * 4, 1, 1, fs[2], fs[3]], code
    if dot:
        if grouped:
            if len(fs) != 7 or fs[5:] != [4, 4]:
                bad("(G, OC/G/4, FH, FW, IC/G/4, 4, 4)")
            return [fs[0], fs[1] * 4, fs[4] * 4, fs[2], fs[3]], code
        if len(fs) != 6 or fs[4:] != [4, 4]:
            bad("(OC/4, FH, FW, IC/4, 4, 4)")
        return [fs[0] * 4, fs[3] * 4, fs[1], fs[2]], code
    if grouped:
        if len(fs) != 6 or last != 4:
            bad("(G, OC/G/4, FH, FW, IC/G, 4) or channel-wise (G/4, 1, FH, FW, 4)")
        return [fs[0], fs[1] * 4, fs[4], fs[2], fs[3]], code
    if len(fs) != 5 or last != 4:
        bad("(OC/4, FH, FW, IC, 4)")
    return [fs[0] * 4, fs[3], fs[1], fs[2]], code


def _conv_backprop_data_blocked(filter, diff, mode, sparse, fmt, stride, pad, dilate, grad_shape,
                                qs8_scales, out, out_dtype, threads, precision, strict, bf16):
    """conv_backprop_data on MegEngine's NCHW4 (N, C/4, H, W, 4) or NHWCD4 (N, H, C/4, W, 4)
    arrays, the filter in that format's layout (NHWCD4 with QuantizedS8: its dot layout)."""
    code, where = _BLOCKED[fmt]
    d = _dense_arg(diff, "diff", bf16)
    ds = list(d.shape)
    if len(ds) != 5 or ds[4] != 4:
        raise ValueError("gradref: an %s diff is (%s, 4); got %s" % (
            fmt.upper(), "N, C/4, H, W" if fmt == "nchw4" else "N, H, C/4, W", tuple(ds)))
    n, cb, h, w = (ds[i] for i in where)
    _blocked(d, "diff", lib.gradref_tensor_init_format, code, [n, cb * 4, h, w])
    grouped = _choice(sparse, {"dense": 0, "group": 1}, "sparse") == 1
    f = _dense_arg(filter, "filter", bf16)
    logical, fcode = _blocked_filter_logical(list(f.shape), fmt, grouped, qs8_scales is not None)
    _blocked(f, "filter", lib.gradref_conv_filter_init_format, fcode, len(logical), logical)
    p = _lib.ConvParams()
    p.mode = _choice(mode, _CONV_MODES, "mode")
    st, dl, pd = _per_dim(stride, 2, "stride", 1), _per_dim(dilate, 2, "dilate", 1), _pads(pad, 2)
    for j in range(2):
        p.stride[j], p.dilation[j] = st[j], dl[j]
        p.pad[2 * j], p.pad[2 * j + 1] = pd[2 * j], pd[2 * j + 1]
    groups = logical[0] if grouped else 1
    icpg, ks = (logical[2], logical[3:]) if grouped else (logical[1], logical[2:])
    p.groups = _int(groups, "the filter's group count", bits=32)
    spatial = [(o - 1) * st[j] + dl[j] * (ks[j] - 1) + 1 - pd[2 * j] - pd[2 * j + 1]
               for j, o in enumerate((h, w))]
    if grad_shape is None and out is not None and len(out.shape) == 5:
        grad_shape = [out.shape[i] for i in where]  # stride > 1: grad's size is out's
    if grad_shape is not None:
        gs = _ints(grad_shape, "grad_shape")
        spatial = gs[-2:] if len(gs) == 2 else [gs[i] for i in where[2:]] if len(gs) == 5 \
            else gs[2:]
    if qs8_scales is not None:
        sc = tuple(float(v) for v in qs8_scales)
        if len(sc) != 3:
            raise TypeError("gradref: qs8_scales is (filter_scale, diff_scale, grad_scale)")
        out_code, codes = f.code, (f.code,)
    else:
        out_code, codes = _out_codes(out_dtype, _lib.I32 if f.code == _lib.I8 else f.code)
    c = groups * icpg
    if c % 4:
        raise ValueError("gradref: grad has %d channels; %s needs a multiple of 4"
                         % (c, fmt.upper()))
    phys = [n, c // 4, spatial[0], spatial[1], 4] if fmt == "nchw4" else \
        [n, spatial[0], c // 4, spatial[1], 4]
    g = _result(out, d.kind, phys, out_code, "grad", bf16, d, codes, dense=True)
    _blocked(g, "grad", lib.gradref_tensor_init_format, code, [n, c] + list(spatial))
    e = _exec(threads, precision, strict)
    if qs8_scales is not None:
        scales = _lib.Qs8Scales(*sc)
        _check(lib.gradref_conv_backprop_data_qs8(ctypes.byref(p), ctypes.byref(scales), f.ref,
                                                  d.ref, g.ref, ctypes.byref(e)), _CBD_NAMES)
    else:
        _check(lib.gradref_conv_backprop_data(ctypes.byref(p), f.ref, d.ref, g.ref,
                                              ctypes.byref(e)), _CBD_NAMES)
    return g.obj


def _tf_spatial(values, name, data_format, minimum):
    """TF's 5-entry list (batch and channel entries 1) or 3 spatial entries."""
    if isinstance(values, numbers.Integral) and not isinstance(values, bool):
        return [int(values)] * 3
    vals = _ints(values, name)
    if len(vals) == 5:
        vals = vals[1:4] if data_format == "ndhwc" else vals[2:5]
    if len(vals) != 3:
        raise ValueError("gradref: %s has %d entries; give 5 (TF) or 3" % (name, len(vals)))
    for v in vals:
        if v < minimum:
            raise ValueError("gradref: %s %s; each must be >= %d" % (name, vals, minimum))
    return vals


def conv3d_backprop_filter(input, filter_sizes, out_backprop, strides, padding,
                           data_format=None, dilations=(1, 1, 1, 1, 1), groups=None, *,
                           mode="CROSS_CORRELATION", out=None, out_dtype=None, threads=None,
                           precision=None, strict=False, dtype=None, round_output=False,
                           padded_zeros=False):
    """TensorFlow Conv3DBackpropFilterV2: dw for input and out_backprop in data_format
    ("NDHWC" or "NCDHW", required), returned in TF's filter layout (kd, kh, kw, in/groups, out);
    mode="CONVOLUTION" gives the flipped filter's gradient.
    filter_sizes is that shape; strides and dilations have 5 entries (or 3 spatial); padding
    is "SAME", "VALID", or explicit pads: 3 (begin, end) pairs, or 5 pairs in data_format
    order as TF's explicit_paddings. groups defaults to in_channels / filter_sizes[3].
    F16/BF16 inputs give their own dtype, or out_dtype="float32" (CANN V2's F32 dw; out= an
    F32 array does the same). precision="hf32" (or "hf32_910b") with round_output=True is CANN's
    HF32 golden in one call: the F32 dw rounded to HF32 too (gradref.testing.hf32_round), in
    place. padded_zeros=True multiplies the padding's zeros as TF, PyTorch and CANN do (a
    non-finite out_backprop that meets the padding makes NaN; the default skips such taps)."""
    bf16 = _bf16(dtype)
    if data_format is None:  # NCDHW arrays read as NDHWC can fit and give a wrong dw
        raise TypeError("gradref: conv3d_backprop_filter needs data_format=\"NDHWC\" or "
                        "\"NCDHW\" (gradref.tf.conv3d_backprop_filter_v2 has TF's NDHWC "
                        "default)")
    fmt = data_format.lower() if isinstance(data_format, str) else None
    if fmt not in ("ndhwc", "ncdhw"):
        raise ValueError("gradref: data_format=%r; use \"NDHWC\" or \"NCDHW\"" % (data_format,))
    x = as_input(input, "input", bf16)
    dy = as_input(out_backprop, "out_backprop", bf16)
    if len(x.shape) != 5 or len(dy.shape) != 5:
        raise ValueError("gradref: input and out_backprop must be 5-D")
    if fmt == "ndhwc":
        _permuted(x, [0, 4, 1, 2, 3])
        _permuted(dy, [0, 4, 1, 2, 3])
    ks = _ints(filter_sizes, "filter_sizes")
    if len(ks) != 5:
        raise ValueError("gradref: filter_sizes has %d entries; TF's is (kd, kh, kw, in, out)"
                         % len(ks))
    cin = x.tensor.shape[1]
    if groups is None:
        groups = cin // ks[3] if ks[3] > 0 and cin % ks[3] == 0 else 1
    p = _lib.ConvParams()
    p.mode = _choice(mode, _CONV_MODES, "mode")
    p.groups = _int(groups, "groups", 1, bits=32)
    st = _tf_spatial(strides, "strides", fmt, 1)
    dl = _tf_spatial(dilations, "dilations", fmt, 1)
    for j in range(3):
        p.stride[j], p.dilation[j] = st[j], dl[j]
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "SAME":
            ins = (ctypes.c_int64 * 3)(*[x.tensor.shape[2 + j] for j in range(3)])
            kk = (ctypes.c_int64 * 3)(*ks[:3])
            _check(lib.gradref_conv_pads_same(ctypes.byref(p), 3, ins, kk))
        elif mode != "VALID":
            raise ValueError("gradref: padding=%r; use \"SAME\", \"VALID\" or explicit pads"
                             % (padding,))
    else:
        flat = _pads(padding, 5 if len(list(_flatten(padding))) == 10 else 3, "padding")
        if len(flat) == 10:
            flat = flat[2:8] if fmt == "ndhwc" else flat[4:10]
        for j in range(6):
            p.pad[j] = flat[j]
    code, codes = _out_codes(out_dtype, x.code)
    w = _result(out, x.kind, ks, code, "out", bf16, x, codes)
    _permuted(w, [4, 3, 0, 1, 2])  # DHWIO -> (Cout, Cin/G, kd, kh, kw)
    e = _exec(threads, precision, strict, padded_zeros)
    _check(lib.gradref_conv3d_backprop_filter(ctypes.byref(p), x.ref, dy.ref, w.ref,
                                              ctypes.byref(e)), _C3F_NAMES,
           "dw is shaped by filter_sizes=%r" % (list(ks),))
    if _bool(round_output, "round_output"):
        kept = {_lib.PRECISION_HF32: 10, _lib.PRECISION_HF32_910B: 11}.get(
            e.precision & ~(_lib.STRICT_UPSTREAM | _lib.PADDED_ZEROS))
        if kept is None or w.code != _lib.F32:
            raise ValueError("gradref: round_output=True rounds an F32 dw to HF32: it takes "
                             "precision=\"hf32\" or \"hf32_910b\" and an F32 output")
        from .testing import hf32_round
        hf32_round(w.obj, kept, out=w.obj)
    return w.obj


def _flatten(values):
    for v in values:
        if isinstance(v, (tuple, list)):
            yield from v
        else:
            yield v


_FORMATS = {"nchw": _lib.FORMAT_NCHW, "nhwc": _lib.FORMAT_NHWC, "ncdhw": _lib.FORMAT_NCDHW,
            "ndhwc": _lib.FORMAT_NDHWC, "dhwcn": _lib.FORMAT_DHWCN, "hwcn": _lib.FORMAT_HWCN}


def conv3d_dw_transpose_needed(dw_format, din, cin, cout, core_count, shape_known=True):
    """CANN Conv3DBackpropFilterToV2FusionPass: True when a Transpose follows
    Conv3DBackpropFilterV2 for this dw format ("NDHWC", "DHWCN", ...), x depth din, per-group
    input channels cin, output channels cout and AI core count."""
    fmt = _choice(dw_format, _FORMATS, "dw_format")
    return bool(lib.gradref_conv3d_dw_transpose_needed(
        fmt, _int(din, "din"), _int(cin, "cin"), _int(cout, "cout"),
        _int(core_count, "core_count"), 1 if shape_known else 0))


def copy(src, out, *, threads=None, precision=None, dtype=None):
    """out[...] = src[...] between any two layouts of one shape, converting the dtype (round
    to nearest even; equal dtypes copy bits). Returns out."""
    bf16 = _bf16(dtype)
    s = as_input(src, "src", bf16)
    d = as_output(out, "out", bf16)
    e = _exec(threads, precision)
    _check(lib.gradref_copy(s.ref, d.ref, ctypes.byref(e)))
    return d.obj
