# SPDX-License-Identifier: Apache-2.0
"""The operators, with the parameter names and order of the systems they model."""
import numbers

from ._args import (C3F_NAMES, CBD_NAMES, CONV_MODES, FORMATS, GS3D_NAMES, INTERP, PADDING,
                    ROPE_MODES, ROPE_NAMES, Error, bf16_dtype, boolean, call, choice,
                    execution, int32s, int64s, integer, integers, library_path, out_codes, outs,
                    pad_list, pads_same, per_dim, query, result, version)
from . import _lib
from ._arrays import _numpy, as_input, as_output

__all__ = ["Error", "version", "library_path", "grid_sampler3d_grad",
           "recat_embedding_grad_output", "recat_embedding_grad_output_mixed_D",
           "recat_embedding_grad_output_mixed_D_batch", "rope_grad", "conv_backprop_data",
           "conv3d_backprop_filter", "conv3d_dw_transpose_needed", "copy"]


# ---------------------------------------------------------------- grid_sampler3d_grad

def grid_sampler3d_grad(grad_output, input, grid, interpolation_mode, padding_mode,
                        align_corners, output_mask=(True, True), *, out=None, threads=None,
                        precision=None, strict=False, dtype=None, terms=None):
    """PyTorch's grid_sampler_3d_backward / CANN GridSampler3DGrad: returns (dx, dgrid), each
    None when output_mask says so. interpolation_mode 0/"bilinear" or 1/"nearest";
    padding_mode 0/"zeros", 1/"border", 2/"reflection". terms="magnitudes" ("counts") gives
    instead, in float64, each element's sum of |term| (its rounding count; docs/precision.md)."""
    bf16 = bf16_dtype(dtype)
    p = _lib.GridSampler3dParams()
    p.interpolation = choice(interpolation_mode, INTERP, "interpolation_mode")
    p.padding = choice(padding_mode, PADDING, "padding_mode")
    p.align_corners = int(boolean(align_corners, "align_corners"))
    if output_mask == (True, True):
        mask = (True, True)
    else:
        mask = tuple(boolean(m, "output_mask[%d]" % i) for i, m in enumerate(output_mask))
        if len(mask) != 2:
            raise TypeError("gradref: output_mask must have two entries")
    g = as_input(grad_output, "grad_output", bf16)
    x = as_input(input, "input", bf16)
    gr = as_input(grid, "grid", bf16)
    out_dx, out_dgrid = outs(out, 2)
    code = g.code if terms is None else _lib.F64
    dx = result(out_dx, g.kind, x.shape, code, "dx", bf16, g) if mask[0] else None
    dgrid = result(out_dgrid, g.kind, gr.shape, code, "dgrid", bf16, g) if mask[1] else None
    e = execution(threads, precision, strict, terms=terms)
    call("grid_sampler3d_grad", p, g, x, gr, dx, dgrid, e, names=GS3D_NAMES)
    return (dx.obj if dx else None, dgrid.obj if dgrid else None)


# ---------------------------------------------------------------- recat

def _recat_list(grad_output, values, name, entry, out, threads, precision, strict, dtype,
                terms):
    bf16 = bf16_dtype(dtype)
    go = as_input(grad_output, "grad_output", bf16)
    ranks = integers(values, name)
    arr = int64s(ranks)
    o = _recat_out(go, out, bf16, terms)
    e = execution(threads, precision, strict, terms=terms)
    call(entry, go, arr, len(ranks), o, e)
    return o.obj


def _recat_out(go, out, bf16, terms):
    """The 1-D out of grad_output's element count: its dtype, or float64 for terms="magnitudes"
    ("counts"): each element's |value| (0: a moved value is no rounding)."""
    numel = 1
    for s in go.shape:
        numel *= s
    return result(out, go.kind, (numel,), go.code if terms is None else _lib.F64, "out", bf16, go)


def recat_embedding_grad_output(grad_output, num_features_per_rank, *, out=None, threads=None,
                                precision=None, strict=False, dtype=None, terms=None):
    """FBGEMM recat_embedding_grad_output: grad_output (B, T, D), num_features_per_rank a list
    of ints summing to T; returns the 1-D re-laid gradient."""
    return _recat_list(grad_output, num_features_per_rank, "num_features_per_rank",
                       "recat_embedding_grad_output", out, threads, precision, strict,
                       dtype, terms)


def recat_embedding_grad_output_mixed_D(grad_output, dim_sum_per_rank, *, out=None,
                                        threads=None, precision=None, strict=False, dtype=None,
                                        terms=None):
    """FBGEMM recat_embedding_grad_output_mixed_D: grad_output (B, sumD), dim_sum_per_rank a
    list of ints summing to sumD."""
    return _recat_list(grad_output, dim_sum_per_rank, "dim_sum_per_rank",
                       "recat_embedding_grad_output_mixed_d", out, threads, precision,
                       strict, dtype, terms)


def recat_embedding_grad_output_mixed_D_batch(grad_output, dim_sum_per_rank,
                                              cumsum_dim_sum_per_rank, *, out=None,
                                              threads=None, precision=None, strict=False,
                                              dtype=None, terms=None):
    """FBGEMM recat_embedding_grad_output_mixed_D_batch: the split as int64 tensors; the cumsum
    is the exclusive prefix sum (FBGEMM's kernel reads it so)."""
    bf16 = bf16_dtype(dtype)
    go = as_input(grad_output, "grad_output", bf16)
    d = as_input(dim_sum_per_rank, "dim_sum_per_rank")
    c = as_input(cumsum_dim_sum_per_rank, "cumsum_dim_sum_per_rank")
    o = _recat_out(go, out, bf16, terms)
    e = execution(threads, precision, strict, terms=terms)
    call("recat_embedding_grad_output_mixed_d_batch", go, d, c, o, e)
    return o.obj


# ---------------------------------------------------------------- rope_grad

def rope_grad(q_embed_grad, k_embed_grad, cos, sin, seq_len, mode="atb", *, head_dim=None,
              rotary_dim=0, start_positions=None, out=None, threads=None, precision=None,
              strict=False, dtype=None, terms=None):
    """ATB RopeGrad (mode "atb", bit for bit) or the exact adjoint of rotate_half ("half") or
    interleaved ("interleaved") RoPE. q_embed_grad (T, Hq), k_embed_grad (T, Hk), cos and sin
    (S_max, head_dim); seq_len is ATB's qSeqLen (a list summing to T). Returns (q_grad, k_grad).
    terms="magnitudes" ("counts") gives instead, in float64, each element's sum of |term| (2 an
    element, none past rotary_dim; docs/precision.md)."""
    bf16 = bf16_dtype(dtype)
    q = as_input(q_embed_grad, "q_embed_grad", bf16)
    k = as_input(k_embed_grad, "k_embed_grad", bf16)
    c = as_input(cos, "cos", bf16)
    s = as_input(sin, "sin", bf16)
    lens = integers(seq_len, "seq_len", bits=32)
    p = _lib.RopeParams()
    p.mode = choice(mode, ROPE_MODES, "mode")
    if head_dim is None:
        head_dim = c.shape[-1] if c.shape else 0
    p.head_dim = integer(head_dim, "head_dim", bits=32)
    p.rotary_dim = integer(rotary_dim, "rotary_dim", bits=32)
    p.num_seqs = len(lens)
    lens_arr = int32s(lens)
    p.seq_lens = lens_arr
    if start_positions is not None:
        starts = integers(start_positions, "start_positions")
        if len(starts) != len(lens):
            raise ValueError("gradref: start_positions has %d entries but seq_len has %d"
                             % (len(starts), len(lens)))
        starts_arr = int64s(starts)
        p.start_positions = starts_arr
    out_q, out_k = outs(out, 2)
    code = q.code if terms is None else _lib.F64
    dq = result(out_q, q.kind, q.shape, code, "q_grad", bf16, q)
    dk = result(out_k, q.kind, k.shape, code, "k_grad", bf16, q)
    e = execution(threads, precision, strict, terms=terms)
    call("rope_grad", p, q, k, c, s, dq, dk, e, names=ROPE_NAMES)
    return dq.obj, dk.obj


# ---------------------------------------------------------------- convolutions

_CHANNELS_FIRST = {"ncw": 1, "nchw": 2, "ncdhw": 3}
_CHANNELS_LAST = {"nwc": 1, "nhwc": 2, "ndhwc": 3}


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
    pads_same(p, input_size, kernel_size)


def _permuted(arg, order):
    """arg's descriptor with its dims taken in `order` (a view, no copy)."""
    arg.permute(order)
    return arg


def conv_backprop_data(filter, diff, mode="CROSS_CORRELATION", sparse="DENSE", format="NCHW",
                       stride=1, pad=0, dilate=1, *, grad_shape=None, qs8_scales=None, out=None,
                       out_dtype=None, threads=None, precision=None, strict=False, dtype=None,
                       terms=None):
    """MegEngine ConvolutionBackwardData: grad = dL/dx from filter and diff = dL/dy, 1-D to 3-D.
    format "NCHW" (also NCW, NCDHW) or "NHWC" (NWC, NDHWC) lays out diff, grad and filter as
    MegEngine does (NHWC filter (OC, FH, FW, IC)); sparse "GROUP" takes a (G, OC/G, IC/G, ...)
    filter. pad is an int, one per dim (symmetric, as MegEngine), (begin, end) per dim, or
    TF's "SAME" (which needs grad_shape or out) or "VALID".
    grad_shape gives grad's spatial size (or whole shape) when stride > 1 leaves it ambiguous.
    I8 filter and diff give an I32 grad; F16/BF16 give their own dtype, or out_dtype="float32"
    (an F32 grad, as out= an F32 array does). qs8_scales =
    (filter_scale, diff_scale, grad_scale) makes it MegEngine's QuantizedS8 call: I8 inputs of
    those scales, an I8 grad requantised to grad_scale. terms="magnitudes" ("counts") gives
    instead each grad element's sum of |w d| (number of products) in float64
    (GRADREF_TERM_MAGNITUDES, docs/precision.md)."""
    bf16 = bf16_dtype(dtype)
    fmt = format.lower() if isinstance(format, str) else format
    if fmt in _BLOCKED:
        if terms is not None:
            raise ValueError("gradref: terms= takes the NCHW and NHWC families, not %s" % format)
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
    grouped = choice(sparse, {"dense": 0, "group": 1}, "sparse") == 1
    p = _lib.ConvParams()
    p.mode = choice(mode, CONV_MODES, "mode")
    st = per_dim(stride, r, "stride", 1)
    dl = per_dim(dilate, r, "dilate", 1)
    named = isinstance(pad, str)
    pd = [0] * (2 * r) if named else pad_list(pad, r)
    for j in range(r):
        p.stride[j], p.dilation[j] = st[j], dl[j]
        p.pad[2 * j], p.pad[2 * j + 1] = pd[2 * j], pd[2 * j + 1]
    if last:  # logical (N, C, spatial...) views of channels-last arrays
        _permuted(d, [0, r + 1] + list(range(1, r + 1)))
        lead = 1 if grouped else 0
        order = list(range(lead + 1)) + [lead + 1 + r] + list(range(lead + 1, lead + 1 + r))
        if f.tensor.ndim == len(order):
            _permuted(f, order)
    icpg, ks, groups = _filter_geometry(f, r, grouped)
    p.groups = integer(groups, "the filter's group count", bits=32)
    n = d.tensor.shape[0]
    if grad_shape is None and out is not None and len(out.shape) == r + 2:
        grad_shape = tuple(out.shape)  # stride > 1 leaves grad's size to the out= array
    gs = _grad_spatial(grad_shape, r, last)
    if named:
        _named_pads(p, pad, r, gs, ks)
        pd = [p.pad[j] for j in range(2 * r)]
    spatial = gs if gs is not None else [
        (d.tensor.shape[2 + j] - 1) * st[j] + dl[j] * (ks[j] - 1) + 1 - pd[2 * j] - pd[2 * j + 1]
        for j in range(r)]
    scales, out_code, codes = _grad_dtype(qs8_scales, out_dtype, f.code)
    if terms is not None:
        out_code, codes = _lib.F64, (_lib.F64,)
    c = groups * icpg
    shape = [n] + spatial + [c] if last else [n, c] + spatial
    g = result(out, d.kind, shape, out_code, "grad", bf16, d, codes)
    if last:
        _permuted(g, [0, r + 1] + list(range(1, r + 1)))
    hint = None if grad_shape is None else "grad is shaped by grad_shape=%r" % (grad_shape,)
    _run_conv_backprop_data(p, scales, f, d, g, execution(threads, precision, strict,
                                                          terms=terms), hint)
    return g.obj


def _filter_geometry(f, r, grouped):
    """(input channels per group, kernel sizes, groups) of a logical DENSE or GROUP filter."""
    fs = [f.tensor.shape[i] for i in range(f.tensor.ndim)]
    if grouped:
        if len(fs) != r + 3:
            raise ValueError("gradref: a GROUP filter has %d dims, here %d" % (r + 3, len(fs)))
        return fs[2], fs[3:], fs[0]
    if len(fs) != r + 2:
        raise ValueError("gradref: a DENSE filter has %d dims, here %d" % (r + 2, len(fs)))
    return fs[1], fs[2:], 1


def _grad_spatial(grad_shape, r, last):
    """grad_shape's r spatial sizes (it gives them alone or in the whole shape), or None."""
    if grad_shape is None:
        return None
    gs = integers(grad_shape, "grad_shape")
    if len(gs) == r + 2:
        gs = gs[2:] if not last else gs[1:r + 1]
    if len(gs) != r:
        raise ValueError("gradref: grad_shape has %d entries; give %d (spatial) or %d"
                         % (len(gs), r, r + 2))
    return gs


def _grad_dtype(qs8_scales, out_dtype, filter_code):
    """(QuantizedS8 scales or None, grad's dtype code, the codes an out= array may have)."""
    if qs8_scales is None:
        default = _lib.I32 if filter_code == _lib.I8 else filter_code
        return (None,) + out_codes(out_dtype, default)
    sc = tuple(float(v) for v in qs8_scales)
    if len(sc) != 3:
        raise TypeError("gradref: qs8_scales is (filter_scale, diff_scale, grad_scale)")
    return _lib.Qs8Scales(*sc), filter_code, (filter_code,)  # I8


def _run_conv_backprop_data(p, scales, f, d, g, e, hint=None):
    if scales is not None:
        call("conv_backprop_data_qs8", p, scales, f, d, g, e, names=CBD_NAMES, hint=hint)
    else:
        call("conv_backprop_data", p, f, d, g, e, names=CBD_NAMES, hint=hint)


# MegEngine's channel-blocked formats: the C format codes, and where the logical (N, C, H, W)
# sizes sit in the physical array (C given as its blocks)
_BLOCKED = {"nchw4": (_lib.FORMAT_NCHW4, (0, 1, 2, 3)),
            "nhwcd4": (_lib.FORMAT_NHWCD4, (0, 2, 1, 3))}


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
    call(init, a, a.tensor.data, a.code, code, *args[:-1], int64s(args[-1]))
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
    _blocked(d, "diff", "tensor_init_format", code, [n, cb * 4, h, w])
    grouped = choice(sparse, {"dense": 0, "group": 1}, "sparse") == 1
    f = _dense_arg(filter, "filter", bf16)
    logical, fcode = _blocked_filter_logical(list(f.shape), fmt, grouped, qs8_scales is not None)
    _blocked(f, "filter", "conv_filter_init_format", fcode, len(logical), logical)
    p = _lib.ConvParams()
    p.mode = choice(mode, CONV_MODES, "mode")
    st, dl, pd = per_dim(stride, 2, "stride", 1), per_dim(dilate, 2, "dilate", 1), pad_list(pad, 2)
    for j in range(2):
        p.stride[j], p.dilation[j] = st[j], dl[j]
        p.pad[2 * j], p.pad[2 * j + 1] = pd[2 * j], pd[2 * j + 1]
    groups = logical[0] if grouped else 1
    icpg, ks = (logical[2], logical[3:]) if grouped else (logical[1], logical[2:])
    p.groups = integer(groups, "the filter's group count", bits=32)
    spatial = [(o - 1) * st[j] + dl[j] * (ks[j] - 1) + 1 - pd[2 * j] - pd[2 * j + 1]
               for j, o in enumerate((h, w))]
    if grad_shape is None and out is not None and len(out.shape) == 5:
        grad_shape = [out.shape[i] for i in where]  # stride > 1: grad's size is out's
    if grad_shape is not None:
        gs = integers(grad_shape, "grad_shape")
        spatial = gs[-2:] if len(gs) == 2 else [gs[i] for i in where[2:]] if len(gs) == 5 \
            else gs[2:]
    scales, out_code, codes = _grad_dtype(qs8_scales, out_dtype, f.code)
    c = groups * icpg
    if c % 4:
        raise ValueError("gradref: grad has %d channels; %s needs a multiple of 4"
                         % (c, fmt.upper()))
    phys = [n, c // 4, spatial[0], spatial[1], 4] if fmt == "nchw4" else \
        [n, spatial[0], c // 4, spatial[1], 4]
    g = result(out, d.kind, phys, out_code, "grad", bf16, d, codes, dense=True)
    _blocked(g, "grad", "tensor_init_format", code, [n, c] + list(spatial))
    _run_conv_backprop_data(p, scales, f, d, g, execution(threads, precision, strict))
    return g.obj


def _tf_spatial(values, name, data_format, minimum):
    """TF's 5-entry list (batch and channel entries 1) or 3 spatial entries."""
    if isinstance(values, numbers.Integral) and not isinstance(values, bool):
        return [int(values)] * 3
    vals = integers(values, name)
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
                           padded_zeros=False, terms=None):
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
    non-finite out_backprop that meets the padding makes NaN; the default skips such taps).
    terms="magnitudes" ("counts") gives instead each dw element's sum of |x dy| (number of
    products) in float64 (GRADREF_TERM_MAGNITUDES, docs/precision.md)."""
    bf16 = bf16_dtype(dtype)
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
    ks = integers(filter_sizes, "filter_sizes")
    if len(ks) != 5:
        raise ValueError("gradref: filter_sizes has %d entries; TF's is (kd, kh, kw, in, out)"
                         % len(ks))
    cin = x.tensor.shape[1]
    if groups is None:
        groups = cin // ks[3] if ks[3] > 0 and cin % ks[3] == 0 else 1
    p = _lib.ConvParams()
    p.mode = choice(mode, CONV_MODES, "mode")
    p.groups = integer(groups, "groups", 1, bits=32)
    st = _tf_spatial(strides, "strides", fmt, 1)
    dl = _tf_spatial(dilations, "dilations", fmt, 1)
    for j in range(3):
        p.stride[j], p.dilation[j] = st[j], dl[j]
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "SAME":
            pads_same(p, [x.tensor.shape[2 + j] for j in range(3)], ks[:3])
        elif mode != "VALID":
            raise ValueError("gradref: padding=%r; use \"SAME\", \"VALID\" or explicit pads"
                             % (padding,))
    else:
        flat = pad_list(padding, 5 if len(list(_flatten(padding))) == 10 else 3, "padding")
        if len(flat) == 10:
            flat = flat[2:8] if fmt == "ndhwc" else flat[4:10]
        for j in range(6):
            p.pad[j] = flat[j]
    code, codes = out_codes(out_dtype, x.code) if terms is None else (_lib.F64, (_lib.F64,))
    w = result(out, x.kind, ks, code, "out", bf16, x, codes)
    _permuted(w, [4, 3, 0, 1, 2])  # DHWIO -> (Cout, Cin/G, kd, kh, kw)
    e = execution(threads, precision, strict, padded_zeros, terms)
    call("conv3d_backprop_filter", p, x, dy, w, e, names=C3F_NAMES,
         hint="dw is shaped by filter_sizes=%r" % (list(ks),))
    if boolean(round_output, "round_output"):
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


def conv3d_dw_transpose_needed(dw_format, din, cin, cout, core_count, shape_known=True):
    """CANN Conv3DBackpropFilterToV2FusionPass: True when a Transpose follows
    Conv3DBackpropFilterV2 for this dw format ("NDHWC", "DHWCN", ...), x depth din, per-group
    input channels cin, output channels cout and AI core count."""
    fmt = choice(dw_format, FORMATS, "dw_format")
    return bool(query("conv3d_dw_transpose_needed", fmt, integer(din, "din"),
                      integer(cin, "cin"), integer(cout, "cout"),
                      integer(core_count, "core_count"), 1 if shape_known else 0))


def copy(src, out, *, threads=None, precision=None, dtype=None):
    """out[...] = src[...] between any two layouts of one shape, converting the dtype (round
    to nearest even; equal dtypes copy bits). Returns out."""
    bf16 = bf16_dtype(dtype)
    s = as_input(src, "src", bf16)
    d = as_output(out, "out", bf16)
    e = execution(threads, precision)
    call("copy", s, d, e)
    return d.obj
