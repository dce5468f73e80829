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
from . import _ops

__all__ = ["grid_sampler_3d_backward", "convolution_backward", "rotary_embedding_backward"]


def grid_sampler_3d_backward(grad_output, input, grid, interpolation_mode, padding_mode,
                             align_corners, output_mask=(True, True), **kw):
    """aten::grid_sampler_3d_backward: (grad_input, grad_grid)."""
    return _ops.grid_sampler3d_grad(grad_output, input, grid, interpolation_mode, padding_mode,
                                    align_corners, output_mask, **kw)


def _unit_dims(a, r):
    """An (N, C, spatial...) array of r spatial dims as 3 (unit dims in front)."""
    for _ in range(3 - r):
        a = a.unsqueeze(2) if hasattr(a, "unsqueeze") else a[:, :, None]
    return a


def convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
                         transposed, output_padding, groups, output_mask, **kw):
    """aten::convolution_backward: (grad_input, grad_weight, None)."""
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
    r = len(input.shape) - 2
    if r < 1 or r > 3:
        raise ValueError("gradref.torch: input has %d dims; give 3 to 5" % len(input.shape))
    st = _ops._per_dim(stride, r, "stride", 1)
    pd = _ops._per_dim(padding, r, "padding", 0)
    dl = _ops._per_dim(dilation, r, "dilation", 1)
    grad_input = grad_weight = None
    if mask[0]:
        g = int(groups)
        if g < 1 or weight.shape[0] % g:
            raise ValueError("gradref.torch: groups=%r does not divide the %d output channels"
                             % (groups, weight.shape[0]))
        grouped = weight.reshape((g, weight.shape[0] // g) + tuple(weight.shape[1:]))
        grad_input = _ops.conv_backprop_data(
            grouped, grad_output, "CROSS_CORRELATION", "GROUP", "NCHW", st, pd, dl,
            grad_shape=tuple(input.shape), **kw)
    if mask[1]:
        ks = list(weight.shape[2:])
        kshape = [1] * (3 - r) + ks
        w = _ops.conv3d_backprop_filter(
            _unit_dims(input, r), kshape + [weight.shape[1], weight.shape[0]],
            _unit_dims(grad_output, r), [1] * (3 - r) + st, [(0, 0)] * (3 - r) +
            [(p, p) for p in pd], "NCDHW", [1] * (3 - r) + dl, groups, **kw)
        w = w.permute(4, 3, 0, 1, 2) if hasattr(w, "permute") else w.transpose(4, 3, 0, 1, 2)
        grad_weight = w.reshape(tuple(weight.shape))
    return grad_input, grad_weight, None


def rotary_embedding_backward(q_embed_grad, k_embed_grad, cos, sin, seq_len,
                              style="rotate_half", start_positions=None, **kw):
    """The exact adjoint of RoPE: (q_grad, k_grad) from the gradients of the rotated q and k."""
    modes = {"rotate_half": "half", "interleaved": "interleaved"}
    if style not in modes:
        raise ValueError("gradref.torch: style=%r; use rotate_half or interleaved" % (style,))
    return _ops.rope_grad(q_embed_grad, k_embed_grad, cos, sin, seq_len, modes[style],
                          start_positions=start_positions, **kw)
