# SPDX-License-Identifier: Apache-2.0
"""Huawei CANN's operators in CANN's own calls.

GridSampler3DGrad (hicann/ops-cv image/grid_sampler3_d_grad: op_graph proto, op_host def):

    inputs  grad [N, C, Do, Ho, Wo], x [N, C, Di, Hi, Wi], grid [N, Do, Ho, Wo, 3]
    attrs   interpolation_mode "bilinear" | "nearest", padding_mode "zeros" | "border" |
            "reflection", align_corners False
    outputs dx (like x), dgrid (like grid)

    grid_sampler3d_grad(grad, x, grid, interpolation_mode="bilinear", padding_mode="zeros",
                        align_corners=False, *, data_format="NCDHW") -> (dx, dgrid)

data_format "NDHWC" takes grad, x and dx as [N, D, H, W, C] (the kernel's storage format); aclnn's
int modes (0/1, 0/1/2) are accepted too. float16/bfloat16 are computed in float32 and rounded
once, as CANN casts them.

Conv3DBackpropFilterV2 (hicann/ops-nn conv/conv3d_backprop_filter_v2: op_graph proto, op_host
def, conv_backprop_filter_context_utils.cpp, conv_backprop_infershape.cpp):

    inputs  x, filter_size (the y shape, int list), out_backprop
    attrs   strides (5, data_format order), pads [front, back, top, bottom, left, right],
            dilations [1, 1, 1, 1, 1], groups 1, data_format "NDHWC", enable_hf32 False;
            private: padding, from_depthwise
    output  y, float32, in its own format (NCDHW, NDHWC or DHWCN)

    conv3d_backprop_filter_v2(x, filter_size, out_backprop, strides, pads,
                              dilations=(1, 1, 1, 1, 1), groups=1, data_format="NDHWC",
                              enable_hf32=False, *, y_format, from_depthwise=False,
                              padding="", soc="Ascend950", round_output=None) -> y

y's format is a property of CANN's output tensor, not an attribute: y_format is required, since
filter_size is read in its order (4 entries insert D = 1). CANN's group rule applies: groups 1
becomes x's channels / the filter's channels; another value must equal that quotient.
enable_hf32 rounds float32 x and out_backprop to HF32 (10 mantissa bits on Ascend950, 11 on
soc="Ascend910B"; float16/bfloat16 values are HF32 already); round_output (default: on with
enable_hf32, whatever x's dtype) also rounds y, as CANN's tests/assets/golden.py does, so the
call returns that golden. padding starting with "S" and the four H/W pads -1 is CANN's SAME.
from_depthwise, where CANN reads it (a 4-entry filter_size, y NCDHW or DHWCN), makes y's N and
C N*C output channels of one input channel (a depthwise filter): y is then shaped as CANN's
(N*C, 1, 1, H, W) or (1, H, W, 1, N*C).

conv3d_backprop_filter_to_v2(...) is the graph rule that rewrites Conv3DBackpropFilter into V2
and decides whether a Transpose follows (Conv3DBackpropFilterToV2FusionPass).
"""
from . import _args, _lib, _ops
from ._arrays import as_input, is_torch

__all__ = ["grid_sampler3d_grad", "GridSampler3DGrad", "conv3d_backprop_filter_v2",
           "Conv3DBackpropFilterV2", "conv3d_backprop_filter_to_v2"]

_NDHWC_TO_LOGICAL = (0, 4, 1, 2, 3)


def _view(a, order):
    """A numpy array or torch tensor with its dims taken in order (no copy)."""
    return a.permute(*order) if is_torch(a) else a.transpose(order)


def _empty(a, shape=None, dtype=None):
    """A new array of a's kind (and dtype unless given)."""
    shape = tuple(a.shape) if shape is None else tuple(shape)
    if is_torch(a):
        import torch
        return torch.empty(shape, dtype=a.dtype if dtype is None else dtype)
    import numpy as np
    return np.empty(shape, a.dtype if dtype is None else dtype)


def _format(value, allowed, name):
    fmt = value.upper() if isinstance(value, str) else value
    if fmt not in allowed:
        raise ValueError("gradref.cann: %s=%r; CANN takes %s" % (name, value, ", ".join(allowed)))
    return fmt


def grid_sampler3d_grad(grad, x, grid, interpolation_mode="bilinear", padding_mode="zeros",
                        align_corners=False, *, data_format="NCDHW", dx=None, dgrid=None,
                        threads=None, strict=True, dtype=None):
    """CANN GridSampler3DGrad: (dx, dgrid), dx in x's data_format."""
    fmt = _format(data_format, ("NCDHW", "NDHWC"), "data_format")
    if fmt == "NCDHW":
        return _ops.grid_sampler3d_grad(grad, x, grid, interpolation_mode, padding_mode,
                                        align_corners, out=(dx, dgrid), threads=threads,
                                        strict=strict, dtype=dtype)
    for a, name in ((grad, "grad"), (x, "x")):
        if len(a.shape) != 5:
            raise ValueError("gradref.cann: %s has %d dims; NDHWC is [N, D, H, W, C]"
                             % (name, len(a.shape)))
    dx = _empty(x) if dx is None else dx
    dgrid = _empty(grid) if dgrid is None else dgrid
    _ops.grid_sampler3d_grad(_view(grad, _NDHWC_TO_LOGICAL), _view(x, _NDHWC_TO_LOGICAL), grid,
                             interpolation_mode, padding_mode, align_corners,
                             out=(_view(dx, _NDHWC_TO_LOGICAL), dgrid), threads=threads,
                             strict=strict, dtype=dtype)
    return dx, dgrid


GridSampler3DGrad = grid_sampler3d_grad  # CANN's operator name

# y formats: the gradref_format code and where D sits in the format's order
_Y_FORMATS = {"NCDHW": (2, 2), "NDHWC": (3, 1), "DHWCN": (4, 0)}
# data formats: the spatial entries of a 5-entry list, the channel position
_DATA_FORMATS = {"NDHWC": (slice(1, 4), 4), "NCDHW": (slice(2, 5), 1)}
_HF32_BITS = {"ASCEND950": ("hf32", 10), "ASCEND910B": ("hf32_910b", 11)}


def _five(values, name, data_format, minimum):
    vals = _args.integers(values, name)
    if len(vals) != 5:
        raise ValueError("gradref.cann: %s has %d entries; CANN's are 5, in data_format (%s) "
                         "order" % (name, len(vals), data_format))
    spatial = vals[_DATA_FORMATS[data_format][0]]
    if vals[0] != 1 or vals[_DATA_FORMATS[data_format][1]] != 1:
        raise ValueError("gradref.cann: %s %s; the N and C entries must be 1 (%s order)"
                         % (name, vals, data_format))
    if any(v < minimum for v in spatial):
        raise ValueError("gradref.cann: %s %s; the D, H, W entries must be >= %d"
                         % (name, vals, minimum))
    return spatial


def _cann_groups(groups, cin, filter_c, cout):
    """CANN's group rule (conv_backprop_filter_context_utils.cpp), with its messages."""
    groups = _args.integer(groups, "groups")
    if groups <= 0:
        raise ValueError("gradref.cann: The value of groups must be greater than 0")
    if filter_c <= 0 or cin % filter_c:
        raise ValueError("gradref.cann: x_channel(%d) %% filter_channel(%d) != 0"
                         % (cin, filter_c))
    actual = cin // filter_c
    if groups == 1:
        groups = actual
    elif groups != actual:
        raise ValueError("gradref.cann: x_channel(%d) / filter_channel(%d) != groups(%d)"
                         % (cin, filter_c, groups))
    if groups > 65535:
        raise ValueError("gradref.cann: The value of groups must be in range: [1, 65535]")
    if cout % groups:
        raise ValueError("gradref.cann: out_channels(%d) %% groups(%d) != 0" % (cout, groups))
    return groups


# y formats: where N and C sit in the format's order
_Y_NC = {"NCDHW": (0, 1), "NDHWC": (0, 4), "DHWCN": (4, 3)}


def _y_shape(fs, y_format, from_depthwise):
    """CANN's y shape (its shape inference) from filter_size's entries: 4 entries insert D = 1;
    there, for an NCDHW or DHWCN y, from_depthwise makes N*C output channels of one input."""
    if len(fs) not in (4, 5):
        raise ValueError("gradref.cann: filter_size has %d entries; give 5 (or 4, D = 1)"
                         % len(fs))
    if len(fs) == 5:
        return list(fs)
    at = _Y_FORMATS[y_format][1]
    shape = fs[:at] + [1] + fs[at:]
    if from_depthwise and y_format != "NDHWC":
        n, c = _Y_NC[y_format]
        shape[n], shape[c] = shape[n] * shape[c], 1
    return shape


def conv3d_backprop_filter_v2(x, filter_size, out_backprop, strides, pads,
                              dilations=(1, 1, 1, 1, 1), groups=1, data_format="NDHWC",
                              enable_hf32=False, *, y_format, from_depthwise=False, padding="",
                              soc="Ascend950", round_output=None, y=None, threads=None,
                              strict=True, dtype=None, padded_zeros=True):
    """CANN Conv3DBackpropFilterV2: y = dL/dw (float32) in y_format, shaped by filter_size."""
    fmt = _format(data_format, tuple(_DATA_FORMATS), "data_format")
    yfmt = _format(y_format, tuple(_Y_FORMATS), "y_format")
    bf16 = _args.bf16_dtype(dtype)
    xa = as_input(x, "x", bf16)
    dya = as_input(out_backprop, "out_backprop", bf16)
    if len(xa.shape) != 5 or len(dya.shape) != 5:
        raise ValueError("gradref.cann: x and out_backprop must be 5-D (%s)" % fmt)
    if fmt == "NDHWC":
        xa.permute(_NDHWC_TO_LOGICAL)
        dya.permute(_NDHWC_TO_LOGICAL)
    given = _args.integers(filter_size, "filter_size")
    depthwise = _args.boolean(from_depthwise, "from_depthwise")
    shape = _y_shape(given, yfmt, depthwise)
    out = _args.result(y, xa.kind, shape, _lib.F32, "y", False, dense=True)
    _args.call("conv3d_filter_init_cann", out, out.tensor.data, out.code, _Y_FORMATS[yfmt][0],
               len(given), _args.int64s(given), 1 if depthwise else 0)
    cin, cout, filter_c = xa.tensor.shape[1], out.tensor.shape[0], out.tensor.shape[1]
    p = _lib.ConvParams()
    p.groups = _cann_groups(groups, cin, filter_c, cout)
    st = _five(strides, "strides", fmt, 1)
    dl = _five(dilations, "dilations", fmt, 1)
    for j in range(3):
        p.stride[j], p.dilation[j] = st[j], dl[j]
    pd = _args.integers(pads, "pads")
    if len(pd) != 6:
        raise ValueError("gradref.cann: pads has %d entries; CANN's are [front, back, top, "
                         "bottom, left, right]" % len(pd))
    if str(padding).upper().startswith("S") and pd[2:] == [-1] * 4:  # CANN's ReCalPaddings
        _args.pads_same(p, [xa.tensor.shape[2 + j] for j in range(3)],
                        [out.tensor.shape[2 + j] for j in range(3)])
    else:
        for j in range(6):
            p.pad[j] = pd[j]
    precision, kept = None, None
    if _args.boolean(enable_hf32, "enable_hf32"):
        key = str(soc).upper()
        if key not in _HF32_BITS:
            raise ValueError("gradref.cann: soc=%r; HF32 knows Ascend950 and Ascend910B" % (soc,))
        precision, kept = _HF32_BITS[key]
        if xa.code != _lib.F32:  # HF32 reads float32 x; golden.py still rounds y (below)
            precision = None
    e = _args.execution(threads, precision, strict, padded_zeros)
    _args.call("conv3d_backprop_filter", p, xa, dya, out, e, names=_args.C3F_NAMES,
               hint="y is shaped by filter_size=%r in %s" % (shape, yfmt))
    if kept is not None and (round_output is None or _args.boolean(round_output, "round_output")):
        from .testing import hf32_round
        hf32_round(out.obj, kept, out=out.obj)
    return out.obj


Conv3DBackpropFilterV2 = conv3d_backprop_filter_v2  # CANN's operator name


def conv3d_backprop_filter_to_v2(x_shape, x_format, y_shape, y_format, core_count,
                                 soc="Ascend950"):
    """CANN's Conv3DBackpropFilterToV2FusionPass on a Conv3DBackpropFilter node: returns
    (operator, perm): "Conv3DBackpropFilterV2" on Ascend950 (else the node stays
    "Conv3DBackpropFilter"), and the Transpose perm that follows V2 ((0, 2, 3, 4, 1) to NDHWC,
    (2, 3, 4, 1, 0) to DHWCN) or None. A -1 in a shape is unknown (no Transpose)."""
    if not str(soc).startswith("Ascend950"):
        return "Conv3DBackpropFilter", None
    xf = _format(x_format, ("NCDHW", "NDHWC", "DHWCN"), "x_format")
    yf = _format(y_format, tuple(_Y_FORMATS), "y_format")
    xs, ys = _args.integers(x_shape, "x_shape"), _args.integers(y_shape, "y_shape")
    if len(xs) != 5 or len(ys) != 5:
        raise ValueError("gradref.cann: x_shape and y_shape have 5 entries")
    if yf == "NCDHW":
        return "Conv3DBackpropFilterV2", None
    cin, cout = (ys[4], ys[0]) if yf == "NDHWC" else (ys[3], ys[4])
    di = xs[{"NDHWC": 1, "DHWCN": 0, "NCDHW": 2}[xf]]
    known = all(v >= 0 for v in xs + ys)
    need = _ops.conv3d_dw_transpose_needed(yf, di, cin, cout, core_count, known)
    return "Conv3DBackpropFilterV2", ((0, 2, 3, 4, 1) if yf == "NDHWC" else
                                      (2, 3, 4, 1, 0)) if need else None
