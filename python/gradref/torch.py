# SPDX-License-Identifier: Apache-2.0
"""PyTorch's backward operators in PyTorch's own calls (aten/src/ATen/native/
native_functions.yaml, derivatives.yaml; the CPU kernels GridSampler.cpp, Convolution.cpp):

    grid_sampler_3d_backward(grad_output, input, grid, interpolation_mode, padding_mode,
                             align_corners, output_mask) -> (grad_input, grad_grid)
    convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
                         transposed, output_padding, groups, output_mask)
        -> (grad_input, grad_weight, grad_bias)

with aten's int enums (interpolation 0 bilinear, 1 nearest; padding 0 zeros, 1 border,
2 reflection) and output_mask booleans (None for a masked output). convolution_backward gives
grad_input (conv_backprop_data) for 1-D to 3-D, grad_weight (conv3d_backprop_filter, 1-D and
2-D as 3-D with unit dims; for a transposed convolution the same with input and grad_output
swapped) and grad_bias (grad_output summed over N and space in float64, rounded once); a
transposed convolution's grad_input (a forward convolution) is not there. Stride, padding and
dilation take one entry for every dim, as aten expands them. Unlike aten's CPU kernels, float16
and bfloat16 are summed in float32 and rounded once (aten rounds every operation in half
precision). grid_sampler_3d_backward always returns grad_grid, as aten computes it whatever
output_mask[1] says.

RoPE, whose backward PyTorch leaves to autograd, has its exact adjoints:

    rotary_embedding_backward(q_embed_grad, k_embed_grad, cos, sin, seq_len,
                              style="rotate_half", start_positions=None) -> (q_grad, k_grad)

style "rotate_half" is the adjoint of Hugging Face's apply_rotary_pos_emb
(q * cos + rotate_half(q) * sin, cos/sin (S, head_dim) with each half repeated), "interleaved"
that of the complex (pairwise) rotation of Meta's LLaMA apply_rotary_emb. Tokens are rows
(T, heads * head_dim) of the sequences of seq_len concatenated.
"""
from . import _args, _ops
from ._arrays import as_input, is_torch

__all__ = ["grid_sampler_3d_backward", "convolution_backward", "rotary_embedding_backward"]


def grid_sampler_3d_backward(grad_output, input, grid, interpolation_mode, padding_mode,
                             align_corners, output_mask=(True, True), **kw):
    """aten::grid_sampler_3d_backward: (grad_input, grad_grid); grad_input None when
    output_mask[0] is False, grad_grid always computed (aten's CPU kernel does)."""
    if len(output_mask) != 2:
        raise ValueError("gradref.torch: output_mask has 2 entries")
    mask = (_args.boolean(output_mask[0], "output_mask[0]"), True)
    return _ops.grid_sampler3d_grad(grad_output, input, grid, interpolation_mode, padding_mode,
                                    align_corners, mask, **kw)


def _conv_lists(stride, padding, dilation, output_padding, transposed, r):
    """aten's int lists: one entry expands to every spatial dim (expand_param_if_needed);
    output_padding belongs to transposed convolutions only."""
    def per_dim(values, name, minimum):
        vals = _args.integers([values] if isinstance(values, int) else values, name)
        if len(vals) == 1:
            vals = vals * r
        return _args.per_dim(vals, r, name, minimum)
    st, pd, dl = per_dim(stride, "stride", 1), per_dim(padding, "padding", 0), \
        per_dim(dilation, "dilation", 1)
    op = per_dim(output_padding, "output_padding", 0)
    if not transposed and any(op):
        raise ValueError("gradref.torch: output_padding %s: only transposed convolutions take "
                         "an output_padding" % (op,))
    return st, pd, dl


def _conv_params(st, pd, dl, groups, lead=0):
    """ConvParams of aten's lists (symmetric pads), with lead unit dims in front (the filter
    gradient runs as 3-D)."""
    one, zero = [1] * lead, [0] * lead
    return _args.conv_params(0, groups, one + list(st), one + list(dl),
                             [v for v in zero + list(pd) for _ in (0, 1)])


def _weight_grad(src, dy, w, lists, groups, e, bf16, kind):
    """dw from src (the convolution's input) and dy (its output gradient), shaped like w."""
    r = len(w.shape) - 2
    lead = 3 - r  # runs as 3-D: unit dims in front of the spatial ones
    p = _conv_params(*lists, groups, lead)
    gw = _args.result(None, kind, w.shape, w.code, "grad_weight", bf16, dy)
    x, d = src.clone(), dy.clone()
    for a in (x, d, gw):
        a.reshape_dims([(0, a.shape[0], 1), (1, a.shape[1], 1)] + [(None, 1, 0)] * lead +
                       [(2 + j, a.shape[2 + j], 1) for j in range(r)])
    _args.call("conv3d_backprop_filter", p, x, d, gw, e, names=_args.C3F_NAMES)
    return gw.obj


def _input_grad(go, w, input_shape, lists, groups, e, bf16):
    r = len(w.shape) - 2
    p = _conv_params(*lists, groups)  # conv_backprop_data's spatial dims are the call's own
    gi = _args.result(None, go.kind, tuple(input_shape), w.code, "grad_input", bf16, go)
    wv = w.clone()
    ocpg = w.shape[0] // groups
    wv.reshape_dims([(0, groups, ocpg), (0, ocpg, 1)] +
                    [(1 + j, w.shape[1 + j], 1) for j in range(r + 1)])
    _args.call("conv_backprop_data", p, wv, go, gi, e, names=_args.CBD_NAMES)
    return gi.obj


def _bias_grad(grad_output, bias_sizes, channels):
    """grad_bias: grad_output summed over the batch and spatial dims, in float64 and rounded
    once to grad_output's dtype (aten sums in its accumulation type)."""
    if bias_sizes is not None and list(bias_sizes) not in ([channels], []):
        raise ValueError("gradref.torch: bias_sizes %s; the bias has %d entries"
                         % (list(bias_sizes), channels))
    dims = tuple(d for d in range(len(grad_output.shape)) if d != 1)
    if is_torch(grad_output):
        return grad_output.double().sum(dims).to(grad_output.dtype)
    return grad_output.astype("float64").sum(axis=dims).astype(grad_output.dtype)


def convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
                         transposed, output_padding, groups, output_mask, *, threads=None,
                         precision=None, strict=False, dtype=None, padded_zeros=True):
    """aten::convolution_backward: (grad_input, grad_weight, grad_bias), None where output_mask
    says so. grad_weight multiplies the padding's zeros as aten does (padded_zeros=False skips
    them, gradref's default). Transposed: grad_weight and grad_bias (its grad_input is a forward
    convolution, which gradref does not have)."""
    if len(output_mask) != 3:
        raise ValueError("gradref.torch: output_mask has 3 entries")
    mask = [_args.boolean(m, "output_mask[%d]" % i) for i, m in enumerate(output_mask)]
    transposed = _args.boolean(transposed, "transposed")
    bf16 = _args.bf16_dtype(dtype)
    go, x, w = (as_input(a, n, bf16) for a, n in ((grad_output, "grad_output"),
                                                     (input, "input"), (weight, "weight")))
    r = len(go.shape) - 2
    if r < 1 or r > 3 or len(w.shape) != r + 2 or len(x.shape) != r + 2:
        raise ValueError("gradref.torch: grad_output, input and weight have %d, %d and %d dims; "
                         "give 3 to 5, all alike" % (len(go.shape), len(x.shape), len(w.shape)))
    if not go.code == x.code == w.code:
        raise TypeError("gradref.torch: Input type (%s) and weight type (%s) should be the same "
                        "as grad_output's (%s)" % (_args.CODE_NAMES[x.code],
                                                   _args.CODE_NAMES[w.code],
                                                   _args.CODE_NAMES[go.code]))
    g = _args.integer(groups, "groups", 1, bits=32)
    out_channels = w.shape[1] * g if transposed else w.shape[0]
    if w.shape[0] % g:  # (out, in/g, k...), transposed (in, out/g, k...)
        raise ValueError("gradref.torch: groups=%d does not divide weight.shape[0] = %d"
                         % (g, w.shape[0]))
    lists = _conv_lists(stride, padding, dilation, output_padding, transposed, r)
    e = _args.execution(threads, precision, strict, padded_zeros)
    grad_input = grad_weight = grad_bias = None
    if mask[1]:  # transposed: the roles of input and grad_output swapped
        grad_weight = _weight_grad(go, x, w, lists, g, e, bf16, go.kind) if transposed else \
            _weight_grad(x, go, w, lists, g, e, bf16, go.kind)
    if mask[0]:
        if transposed:
            raise ValueError("gradref.torch: grad_input of a transposed convolution is a forward "
                             "convolution, which gradref does not compute; pass output_mask[0] "
                             "= False")
        grad_input = _input_grad(go, w, input.shape, lists, g, _args.execution(threads, precision,
                                                                            strict), bf16)
    if mask[2]:
        grad_bias = _bias_grad(grad_output, bias_sizes, out_channels)
    return grad_input, grad_weight, grad_bias


def rotary_embedding_backward(q_embed_grad, k_embed_grad, cos, sin, seq_len,
                              style="rotate_half", start_positions=None, **kw):
    """The exact adjoint of RoPE: (q_grad, k_grad) from the gradients of the rotated q and k."""
    modes = {"rotate_half": "half", "interleaved": "interleaved"}
    if style not in modes:
        raise ValueError("gradref.torch: style=%r; use rotate_half or interleaved" % (style,))
    return _ops.rope_grad(q_embed_grad, k_embed_grad, cos, sin, seq_len, modes[style],
                          start_positions=start_positions, **kw)
