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
what gradref has: grad_input (conv_backprop_data) for 1-D to 3-D and grad_weight
(conv3d_backprop_filter, 1-D and 2-D as 3-D with unit dims), not transposed convolutions and not
grad_bias (output_mask[2] must be False). Unlike aten's CPU kernels, float16 and bfloat16 are
summed in float32 and rounded once (aten rounds every operation in half precision).

RoPE, whose backward PyTorch leaves to autograd, has its exact adjoints:

    rotary_embedding_backward(q_embed_grad, k_embed_grad, cos, sin, seq_len,
                              style="rotate_half", start_positions=None) -> (q_grad, k_grad)

style "rotate_half" is the adjoint of Hugging Face's apply_rotary_pos_emb
(q * cos + rotate_half(q) * sin, cos/sin (S, head_dim) with each half repeated), "interleaved"
that of the complex (pairwise) rotation of Meta's LLaMA apply_rotary_emb. Tokens are rows
(T, heads * head_dim) of the sequences of seq_len concatenated.
"""
import ctypes

from . import _lib, _ops
from ._arrays import as_input

__all__ = ["grid_sampler_3d_backward", "convolution_backward", "rotary_embedding_backward"]


def grid_sampler_3d_backward(grad_output, input, grid, interpolation_mode, padding_mode,
                             align_corners, output_mask=(True, True), **kw):
    """aten::grid_sampler_3d_backward: (grad_input, grad_grid)."""
    return _ops.grid_sampler3d_grad(grad_output, input, grid, interpolation_mode, padding_mode,
                                    align_corners, output_mask, **kw)


def convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
                         transposed, output_padding, groups, output_mask, *, threads=None,
                         precision=None, strict=False, dtype=None, padded_zeros=True):
    """aten::convolution_backward: (grad_input, grad_weight, None); grad_weight multiplies the
    padding's zeros as aten does (padded_zeros=False skips them, gradref's default)."""
    del bias_sizes, output_padding  # only for grad_bias and transposed convolutions
    if transposed:
        raise ValueError("gradref.torch: transposed convolutions are not supported")
    mask = [bool(m) for m in output_mask]
    if len(mask) != 3:
        raise ValueError("gradref.torch: output_mask has 3 entries")
    if mask[2]:
        raise ValueError("gradref.torch: gradref gives grad_input and grad_weight; pass "
                         "output_mask[2] = False (grad_bias is grad_output summed over N and "
                         "the spatial dims)")
    bf16 = _ops._bf16(dtype)
    go = as_input(grad_output, "grad_output", bf16)
    w = as_input(weight, "weight", bf16)
    r = len(go.shape) - 2
    if r < 1 or r > 3 or len(w.shape) != r + 2 or len(input.shape) != r + 2:
        raise ValueError("gradref.torch: grad_output, input and weight have %d, %d and %d dims; "
                         "give 3 to 5, all alike" % (len(go.shape), len(input.shape),
                                                     len(w.shape)))
    g = _ops._int(groups, "groups", 1, bits=32)
    if w.shape[0] % g:
        raise ValueError("gradref.torch: groups=%d does not divide the %d output channels"
                         % (g, w.shape[0]))
    p = _lib.ConvParams()
    p.groups = g
    st = _ops._per_dim(stride, r, "stride", 1)
    pd = _ops._per_dim(padding, r, "padding", 0)
    dl = _ops._per_dim(dilation, r, "dilation", 1)
    lead = 3 - r  # grad_weight runs as 3-D: unit dims in front of the spatial ones
    for j in range(3):
        k = j - lead
        p.stride[j] = st[k] if k >= 0 else 1
        p.dilation[j] = dl[k] if k >= 0 else 1
        p.pad[2 * j] = p.pad[2 * j + 1] = pd[k] if k >= 0 else 0
    e = _ops._exec(threads, precision, strict)
    grad_input = grad_weight = None
    if mask[1]:
        x = as_input(input, "input", bf16)
        gw = _ops._result(None, go.kind, w.shape, w.code, "grad_weight", bf16, go)
        unit = [(None, 1, 0)] * lead
        dy = go.clone() if mask[0] else go
        for a in (x, dy, gw):
            a.reshape_dims([(0, a.shape[0], 1), (1, a.shape[1], 1)] + unit +
                           [(2 + j, a.shape[2 + j], 1) for j in range(r)])
        ew = _ops._exec(threads, precision, strict, padded_zeros)
        _ops._check(_lib.lib.gradref_conv3d_backprop_filter(ctypes.byref(p), x.ref, dy.ref,
                                                            gw.ref, ctypes.byref(ew)),
                    _ops._C3F_NAMES)
        grad_weight = gw.obj
    if mask[0]:
        p = _lib.ConvParams()  # conv_backprop_data's spatial dims are the call's own
        p.groups = g
        for j in range(r):
            p.stride[j], p.dilation[j] = st[j], dl[j]
            p.pad[2 * j] = p.pad[2 * j + 1] = pd[j]
        gi = _ops._result(None, go.kind, tuple(input.shape), w.code, "grad_input", bf16, go)
        ocpg = w.shape[0] // g
        w.reshape_dims([(0, g, ocpg), (0, ocpg, 1)] +
                       [(1 + j, w.shape[1 + j], 1) for j in range(r + 1)])
        _ops._check(_lib.lib.gradref_conv_backprop_data(ctypes.byref(p), w.ref, go.ref, gi.ref,
                                                        ctypes.byref(e)), _ops._CBD_NAMES)
        grad_input = gi.obj
    return grad_input, grad_weight, None


def rotary_embedding_backward(q_embed_grad, k_embed_grad, cos, sin, seq_len,
                              style="rotate_half", start_positions=None, **kw):
    """The exact adjoint of RoPE: (q_grad, k_grad) from the gradients of the rotated q and k."""
    modes = {"rotate_half": "half", "interleaved": "interleaved"}
    if style not in modes:
        raise ValueError("gradref.torch: style=%r; use rotate_half or interleaved" % (style,))
    return _ops.rope_grad(q_embed_grad, k_embed_grad, cos, sin, seq_len, modes[style],
                          start_positions=start_positions, **kw)
