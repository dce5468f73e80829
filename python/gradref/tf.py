# SPDX-License-Identifier: Apache-2.0
"""TensorFlow's convolution gradients in TF's own calls (tensorflow/core/ops/nn_ops.cc, the
raw ops' argument order and defaults; kernels tensorflow/core/kernels/conv_grad_*.cc and
conv_grad_shape_utils.cc):

    conv3d_backprop_filter_v2(input, filter_sizes, out_backprop, strides, padding,
                              data_format="NDHWC", dilations=[1, 1, 1, 1, 1])
        -> filter gradient (kD, kH, kW, in/groups, out), input's dtype
    conv2d_backprop_input(input_sizes, filter, out_backprop, strides, padding,
                          use_cudnn_on_gpu=True, explicit_paddings=[], data_format="NHWC",
                          dilations=[1, 1, 1, 1])
        -> input gradient of input_sizes; filter (kH, kW, in/groups, out)
    conv3d_backprop_input_v2(input_sizes, filter, out_backprop, strides, padding,
                             data_format="NDHWC", dilations=[1, 1, 1, 1, 1])
        -> input gradient; filter (kD, kH, kW, in/groups, out)

strides and dilations have one entry per dim in data_format order (batch and channel 1);
padding "SAME" or "VALID" (TF's formula: out = ceil(in / stride), the odd pad at the end), and
for Conv2DBackpropInput "EXPLICIT" with explicit_paddings (a (before, after) pair per dim in
data_format order). The input gradients run through gradref's conv_backprop_data
(cross-correlation), the filter gradient through conv3d_backprop_filter; every dtype keeps TF's
rule (the output has the inputs' dtype; float16/bfloat16 summed in float32, rounded once).
Groups follow from the channel counts (input channels / the filter's in), as TF's shape code.
"""
from . import _args, _ops
from ._arrays import as_input

__all__ = ["conv3d_backprop_filter_v2", "Conv3DBackpropFilterV2", "conv2d_backprop_input",
           "Conv2DBackpropInput", "conv3d_backprop_input_v2", "Conv3DBackpropInputV2"]


def conv3d_backprop_filter_v2(input, filter_sizes, out_backprop, strides, padding,
                              data_format="NDHWC", dilations=(1, 1, 1, 1, 1), **kw):
    """TF Conv3DBackpropFilterV2: the filter gradient in TF's DHWIO layout; padding's zeros
    multiplied as TF does (padded_zeros=False skips them, gradref's default)."""
    kw.setdefault("padded_zeros", True)
    last = not (isinstance(data_format, str) and data_format.upper() == "NCDHW")
    _spatial(strides, "strides", last, 3)  # TF's rules (conv_grad_ops_3d.cc)
    _spatial(dilations, "dilations", last, 3)
    return _ops.conv3d_backprop_filter(input, filter_sizes, out_backprop, strides, padding,
                                       data_format, dilations, **kw)


Conv3DBackpropFilterV2 = conv3d_backprop_filter_v2


def _spatial(values, name, last, r):
    """TF's strides or dilations: r + 2 entries in data_format order, batch and channel 1
    (conv_grad_ops_3d.cc, conv_grad_input_ops.h, with TF's messages)."""
    vals = _args.integers(values, name)
    if len(vals) != r + 2:
        raise ValueError("gradref.tf: Sliding window %s field must specify %d dimensions"
                         % (name, r + 2))
    if vals[0] != 1 or vals[-1 if last else 1] != 1:
        raise ValueError("gradref.tf: Current implementation does not yet support %s in the "
                         "batch and depth dimensions (%s=%s)" % (name, name, vals))
    return vals[1:r + 1] if last else vals[2:]


def _explicit_pads(padding, explicit_paddings, r, last):
    """TF's CheckValidPadding: EXPLICIT takes one non-negative (before, after) pair per dim,
    zero for batch and depth; the other paddings take none. Returns the spatial pairs, flat."""
    ep = _args.integers(explicit_paddings, "explicit_paddings")
    if padding != "EXPLICIT":
        if ep:
            raise ValueError("gradref.tf: explicit_paddings attribute must be empty if the "
                             "padding attribute is not EXPLICIT")
        return None
    if len(ep) != 2 * (r + 2):
        raise ValueError("gradref.tf: explicit_paddings attribute must contain %d values, but "
                         "got: %d" % (2 * (r + 2), len(ep)))
    if any(v < 0 for v in ep):
        raise ValueError("gradref.tf: All elements of explicit_paddings must be nonnegative")
    channel = 2 * (r + 1) if last else 2
    if ep[0] or ep[1] or ep[channel] or ep[channel + 1]:
        raise ValueError("gradref.tf: Nonzero explicit padding in the batch or depth dimensions "
                         "is not supported")
    return ep[2:2 + 2 * r] if last else ep[4:]


def _backprop_input(r, input_sizes, filter, out_backprop, strides, padding, explicit_paddings,
                    data_format, dilations, kw):
    formats = {2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}[r]
    fmt = data_format.upper() if isinstance(data_format, str) else data_format
    if fmt not in formats:
        raise ValueError("gradref.tf: data_format=%r; use %s" % (data_format, " or ".join(formats)))
    last = fmt == formats[0]
    label = "Conv2DBackpropInput" if r == 2 else "Conv3DBackpropInputV2"
    st = _spatial(strides, "strides", last, r)
    dl = _spatial(dilations, "dilations", last, r)
    f = as_input(filter, "filter", _args.bf16_dtype(kw.get("dtype")))
    dy = as_input(out_backprop, "out_backprop", _args.bf16_dtype(kw.get("dtype")))
    if len(dy.shape) != r + 2:
        raise ValueError("gradref.tf: %s: out_backprop must be %d-dimensional" % (label, r + 2))
    sizes = _input_sizes(input_sizes, r, last, f, dy, label)
    if len(f.shape) != r + 2:
        raise ValueError("gradref.tf: filter has %d dims; TF's is (%s, in, out)"
                         % (len(f.shape), ", ".join("kD kH kW".split()[3 - r:])))
    in_channels = sizes[-1] if last else sizes[1]
    fin = f.shape[r]
    if fin <= 0 or in_channels % fin:
        raise ValueError("gradref.tf: %s: input depth must be evenly divisible by filter depth "
                         "(%d, %d)" % (label, in_channels, fin))
    groups = in_channels // fin
    out_channels = f.shape[r + 1]
    if out_channels != dy.shape[-1 if last else 1]:
        raise ValueError("gradref.tf: %s: filter and out_backprop must have the same out_depth "
                         "(%d, %d)" % (label, out_channels, dy.shape[-1 if last else 1]))
    if out_channels % groups:
        raise ValueError("gradref.tf: filter out channels %d not divisible by the %d groups"
                         % (out_channels, groups))
    # TF's (k..., in/g, out) as MegEngine's grouped filter, a view: (G, OC/G, IC/G, k...), or
    # channels-last (G, OC/G, k..., IC/G)
    ocpg = out_channels // groups
    spatial_dims = [(j, f.shape[j], 1) for j in range(r)]
    ic = [(r, fin, 1)]
    f.reshape_dims([(r + 1, groups, ocpg), (r + 1, ocpg, 1)] +
                   (spatial_dims + ic if last else ic + spatial_dims))
    pad = padding.upper() if isinstance(padding, str) else padding
    if pad not in ("SAME", "VALID") and (pad != "EXPLICIT" or r != 2):
        raise ValueError("gradref.tf: padding=%r; use SAME, VALID%s" % (
            padding, " or EXPLICIT" if r == 2 else ""))
    explicit = _explicit_pads(pad, explicit_paddings, r, last)
    spatial = sizes[1:r + 1] if last else sizes[2:]
    ks = [f.shape[j] for j in range(r)]
    if _empty_windows(spatial, ks, st, dl, pad, explicit, dy, last):
        return _args.zeros_result(dy, sizes, **kw)
    _check_out_sizes(label, spatial, ks, st, dl, pad, explicit, dy, last)
    return _ops.conv_backprop_data(f, dy, "CROSS_CORRELATION", "GROUP",
                                   formats[0] if last else formats[1], st,
                                   pad if explicit is None else explicit, dl,
                                   grad_shape=spatial, **kw)


def _check_out_sizes(label, spatial, ks, st, dl, pad, explicit, dy, last):
    """TF's ConvBackpropExtractAndVerifyDimension (read in tensorflow core/kernels/
    conv_grad_shape_utils.cc): out_backprop's spatial sizes must be those input_sizes, the filter,
    strides, dilations and padding give (GetWindowedOutputSizeVerboseV2), with TF's message."""
    dys = dy.shape[1:-1] if last else dy.shape[2:]
    for j, (size, k, s, d) in enumerate(zip(spatial, ks, st, dl)):
        k_eff = (k - 1) * d + 1
        if pad == "SAME":
            computed = (size + s - 1) // s
        elif pad == "VALID":
            computed = (size - k_eff + s) // s
        else:
            computed = (size + explicit[2 * j] + explicit[2 * j + 1] - k_eff + s) // s
        if dys[j] != computed:
            raise ValueError("gradref.tf: %s: Size of out_backprop doesn't match computed: "
                             "actual = %d, computed = %d spatial_dim: %d input: %d filter: %d "
                             "output: %d stride: %d dilation: %d"
                             % (label, dys[j], computed, j + (1 if last else 2), size, k, dys[j],
                                s, d))


def _empty_windows(spatial, ks, st, dl, pad, explicit, dy, last):
    """TF's degenerate case: an input smaller than the dilated kernel has no window
    (GetWindowedOutputSize: (in + pads - k_eff + stride) / stride, truncated, is 0), out_backprop
    is empty there and the input gradient is zeros."""
    dys = dy.shape[1:-1] if last else dy.shape[2:]
    for j, (size, k, s, d) in enumerate(zip(spatial, ks, st, dl)):
        pads = 0 if explicit is None else explicit[2 * j] + explicit[2 * j + 1]
        if pad == "SAME" or dys[j] != 0:
            continue
        if int((size + pads - (k - 1) * d - 1 + s) / s) == 0:
            return True
    return False


def _input_sizes(input_sizes, r, last, f, dy, label):
    """TF's input_sizes: the whole input shape, or for Conv2DBackpropInput (H, W) with the
    batch from out_backprop and the depth from the filter; the batch must be out_backprop's."""
    sizes = _args.integers(input_sizes, "input_sizes")
    if r == 2 and len(sizes) == 2:
        n, c = dy.shape[0 if last else 0], f.shape[2]
        sizes = [n] + sizes + [c] if last else [n, c] + sizes
    if len(sizes) != r + 2:
        raise ValueError("gradref.tf: %s: input_sizes must be %d-dimensional%s, got %d" % (
            label, r + 2, " (or 2: H, W)" if r == 2 else "", len(sizes)))
    if sizes[0] != dy.shape[0]:
        raise ValueError("gradref.tf: %s: input and out_backprop must have the same batch size, "
                         "input batch: %d outbackprop batch: %d" % (label, sizes[0], dy.shape[0]))
    return sizes


def conv2d_backprop_input(input_sizes, filter, out_backprop, strides, padding,
                          use_cudnn_on_gpu=True, explicit_paddings=(), data_format="NHWC",
                          dilations=(1, 1, 1, 1), **kw):
    """TF Conv2DBackpropInput: the input gradient of shape input_sizes (data_format order)."""
    del use_cudnn_on_gpu  # a GPU switch: the CPU result does not depend on it
    return _backprop_input(2, input_sizes, filter, out_backprop, strides, padding,
                           explicit_paddings, data_format, dilations, kw)


Conv2DBackpropInput = conv2d_backprop_input


def conv3d_backprop_input_v2(input_sizes, filter, out_backprop, strides, padding,
                             data_format="NDHWC", dilations=(1, 1, 1, 1, 1), **kw):
    """TF Conv3DBackpropInputV2: the input gradient of shape input_sizes (data_format order)."""
    return _backprop_input(3, input_sizes, filter, out_backprop, strides, padding, (),
                           data_format, dilations, kw)


Conv3DBackpropInputV2 = conv3d_backprop_input_v2
