# SPDX-License-Identifier: Apache-2.0
"""gradref.tf and gradref.torch in their upstreams' own calls. PyTorch: autograd of
torch.nn.functional.grid_sample and conv{1,2,3}d and of the Hugging Face / Meta rotary
embeddings (the forward of each gradient, as torch's own gradcheck-style tests do). TF: its
conv_ops_test / conv_ops_3d_test gradient cases (conv2d_backprop_input on SAME, VALID and
EXPLICIT, NHWC and NCHW; Conv3DBackpropInputV2 and Conv3DBackpropFilterV2 on NDHWC), with the
forward they are the gradients of written here through torch in float64."""
import numpy as np
import pytest

import gradref

torch = pytest.importorskip("torch")
F = torch.nn.functional


@pytest.mark.parametrize("interp,pad,ac", [(0, 0, False), (0, 2, True), (1, 1, False)])
def test_torch_grid_sampler_3d_backward(interp, pad, ac):
    g = torch.Generator().manual_seed(interp * 7 + pad)
    x = torch.randn(2, 3, 4, 5, 6, dtype=torch.float64, generator=g, requires_grad=True)
    grid = (torch.rand(2, 3, 4, 2, 3, dtype=torch.float64, generator=g) * 2.2 - 1.1)
    grid.requires_grad_(True)
    modes = ["bilinear", "nearest"][interp], ["zeros", "border", "reflection"][pad]
    y = F.grid_sample(x, grid, mode=modes[0], padding_mode=modes[1], align_corners=ac)
    go = torch.randn(y.shape, dtype=torch.float64, generator=g)
    y.backward(go)
    dx, dgrid = gradref.torch.grid_sampler_3d_backward(go, x.detach(), grid.detach(), interp,
                                                       pad, ac, [True, True])
    torch.testing.assert_close(dx, x.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dgrid, grid.grad, rtol=1e-12, atol=1e-12)
    none, only = gradref.torch.grid_sampler_3d_backward(go, x.detach(), grid.detach(), interp,
                                                         pad, ac, [False, True])
    assert none is None and torch.equal(only, dgrid)
    # aten's CPU kernel computes grad_grid whatever output_mask[1] says
    dx2, dgrid2 = gradref.torch.grid_sampler_3d_backward(go, x.detach(), grid.detach(), interp,
                                                         pad, ac, [True, False])
    assert torch.equal(dx2, dx) and torch.equal(dgrid2, dgrid)


@pytest.mark.parametrize("r,groups,stride,pad,dil", [(1, 1, 2, 1, 1), (2, 2, 1, 1, 2),
                                                      (2, 1, 2, 0, 1), (3, 3, 1, 1, 1)])
def test_torch_convolution_backward(r, groups, stride, pad, dil):
    g = torch.Generator().manual_seed(r * 10 + groups)
    conv = [None, F.conv1d, F.conv2d, F.conv3d][r]
    x = torch.randn((2, 3 * groups) + (7,) * r, dtype=torch.float64, generator=g,
                    requires_grad=True)
    w = torch.randn((2 * groups, 3) + (3,) * r, dtype=torch.float64, generator=g,
                    requires_grad=True)
    b = torch.randn(2 * groups, dtype=torch.float64, generator=g, requires_grad=True)
    y = conv(x, w, b, stride, pad, dil, groups)
    go = torch.randn(y.shape, dtype=torch.float64, generator=g)
    y.backward(go)
    gi, gw, gb = gradref.torch.convolution_backward(
        go, x.detach(), w.detach(), None, [stride] * r, [pad] * r, [dil] * r, False, [0] * r,
        groups, [True, True, False])
    assert gb is None
    torch.testing.assert_close(gi, x.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gw, w.grad, rtol=1e-12, atol=1e-12)
    # aten's one-entry lists, expanded to every dim; grad_bias
    gi1, gw1, gb = gradref.torch.convolution_backward(
        go, x.detach(), w.detach(), [2 * groups], [stride], [pad], [dil], False, [0], groups,
        [True, True, True])
    assert torch.equal(gi1, gi) and torch.equal(gw1, gw)
    torch.testing.assert_close(gb, b.grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("r,groups,stride,pad,opad", [(1, 1, 2, 1, 1), (2, 2, 2, 1, 0),
                                                       (3, 1, 1, 0, 0)])
def test_torch_transposed_weight_and_bias(r, groups, stride, pad, opad):
    """A transposed convolution's grad_weight (the filter gradient with input and grad_output
    swapped) and grad_bias against autograd of conv_transpose; its grad_input is refused."""
    g = torch.Generator().manual_seed(40 + r)
    tconv = [None, F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d][r]
    x = torch.randn((2, 2 * groups) + (5,) * r, dtype=torch.float64, generator=g)
    w = torch.randn((2 * groups, 3) + (3,) * r, dtype=torch.float64, generator=g,
                    requires_grad=True)
    b = torch.randn(3 * groups, dtype=torch.float64, generator=g, requires_grad=True)
    y = tconv(x, w, b, stride, pad, opad, groups)
    go = torch.randn(y.shape, dtype=torch.float64, generator=g)
    y.backward(go)
    gi, gw, gb = gradref.torch.convolution_backward(
        go, x, w.detach(), [3 * groups], [stride] * r, [pad] * r, [1] * r, True, [opad] * r,
        groups, [False, True, True])
    assert gi is None
    torch.testing.assert_close(gw, w.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(gb, b.grad, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="forward convolution"):
        gradref.torch.convolution_backward(go, x, w.detach(), None, [stride] * r, [pad] * r,
                                           [1] * r, True, [opad] * r, groups,
                                           [True, True, False])


def test_torch_convolution_backward_argument_rules():
    """aten refuses output_padding without transposed, non-boolean masks and mixed dtypes."""
    x = torch.randn(1, 2, 5, 5)
    w = torch.randn(3, 2, 3, 3)
    go = torch.randn(1, 3, 3, 3)
    call = gradref.torch.convolution_backward
    with pytest.raises(ValueError, match="output_padding"):
        call(go, x, w, None, [1], [0], [1], False, [1, 0], 1, [True, True, False])
    with pytest.raises(TypeError, match="output_mask"):
        call(go, x, w, None, [1], [0], [1], False, [0], 1, [True, 2, False])
    with pytest.raises(TypeError, match="should be the same"):
        call(go, x.double(), w, None, [1], [0], [1], False, [0], 1, [False, True, False])
    with pytest.raises(TypeError, match="should be the same"):  # grad_weight masked: still
        call(go, x.double(), w, None, [1], [0], [1], False, [0], 1, [True, False, False])


def rotate_half(t):
    h = t.shape[-1] // 2
    return torch.cat((-t[..., h:], t[..., :h]), dim=-1)


@pytest.mark.parametrize("style", ["rotate_half", "interleaved"])
def test_torch_rotary_embedding_backward(style):
    g = torch.Generator().manual_seed(len(style))
    seq_len, heads, d = [3, 5], 2, 8
    T = sum(seq_len)
    theta = torch.rand(6, d // 2, dtype=torch.float64, generator=g) * 3
    if style == "rotate_half":  # Hugging Face: each half of cos/sin repeated
        cos, sin = torch.cat((theta.cos(),) * 2, -1), torch.cat((theta.sin(),) * 2, -1)
    else:  # Meta LLaMA: pairs (2i, 2i+1) rotated by theta_i
        cos, sin = theta.cos().repeat_interleave(2, -1), theta.sin().repeat_interleave(2, -1)
    pos = torch.cat([torch.arange(n) for n in seq_len])
    q = torch.randn(T, heads, d, dtype=torch.float64, generator=g, requires_grad=True)
    k = torch.randn(T, 1, d, dtype=torch.float64, generator=g, requires_grad=True)

    def rope(t):
        c, s = cos[pos][:, None], sin[pos][:, None]
        if style == "rotate_half":
            return t * c + rotate_half(t) * s
        pairs = torch.view_as_complex(t.reshape(T, t.shape[1], d // 2, 2).contiguous())
        rot = torch.polar(torch.ones_like(theta[pos]), theta[pos])[:, None]
        return torch.view_as_real(pairs * rot).reshape(t.shape)

    gq = torch.randn(T, heads, d, dtype=torch.float64, generator=g)
    gk = torch.randn(T, 1, d, dtype=torch.float64, generator=g)
    (rope(q) * gq).sum().add((rope(k) * gk).sum()).backward()
    dq, dk = gradref.torch.rotary_embedding_backward(gq.reshape(T, -1), gk.reshape(T, -1), cos,
                                                     sin, seq_len, style)
    torch.testing.assert_close(dq, q.grad.reshape(T, -1), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(dk, k.grad.reshape(T, -1), rtol=1e-12, atol=1e-12)


def _tf_forward_grad_input(x_shape, w_hwio, dy, strides, pads, dil, channels_last):
    """The TF input gradient through torch autograd of the forward conv (float64)."""
    r = len(x_shape) - 2
    perm = (0, r + 1) + tuple(range(1, r + 1))
    xs = [x_shape[i] for i in perm] if channels_last else list(x_shape)
    x = torch.zeros(xs, dtype=torch.float64, requires_grad=True)
    w = torch.from_numpy(w_hwio).permute((r + 1, r) + tuple(range(r)))
    groups = xs[1] // w.shape[1]
    xp = F.pad(x, [p for pair in reversed(pads) for p in pair])
    y = [None, F.conv1d, F.conv2d, F.conv3d][r](xp, w, None, strides, 0, dil, groups)
    g = torch.from_numpy(dy)
    if channels_last:
        g = g.permute(perm)
    y.backward(g)
    out = x.grad
    if channels_last:
        out = out.permute((0,) + tuple(range(2, r + 2)) + (1,))
    return out.numpy()


def _same(i, k, s, d):
    ke = (k - 1) * d + 1
    need = max(0, (-(-i // s) - 1) * s + ke - i)
    return (need // 2, need - need // 2)


@pytest.mark.parametrize("padding", ["SAME", "VALID", "EXPLICIT"])
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
@pytest.mark.parametrize("stride,dil,groups", [(1, 1, 1), (2, 1, 2), (1, 2, 1)])
def test_tf_conv2d_backprop_input(padding, data_format, stride, dil, groups):
    rng = np.random.default_rng(stride * 3 + dil + groups)
    n, h, w, cin, cout, k = 2, 7, 6, 4, 6, 3
    last = data_format == "NHWC"
    x_shape = [n, h, w, cin] if last else [n, cin, h, w]
    filt = rng.standard_normal((k, k, cin // groups, cout))
    if padding == "SAME":
        pads = [_same(h, k, stride, dil), _same(w, k, stride, dil)]
    elif padding == "VALID":
        pads = [(0, 0), (0, 0)]
    else:
        pads = [(1, 2), (2, 0)]
    oh = (h + sum(pads[0]) - (k - 1) * dil - 1) // stride + 1
    ow = (w + sum(pads[1]) - (k - 1) * dil - 1) // stride + 1
    dy = rng.standard_normal([n, oh, ow, cout] if last else [n, cout, oh, ow])
    ones = [1, stride, stride, 1] if last else [1, 1, stride, stride]
    dils = [1, dil, dil, 1] if last else [1, 1, dil, dil]
    explicit = ([0, 0] + [p for pair in pads for p in pair] + [0, 0] if last else
                [0, 0, 0, 0] + [p for pair in pads for p in pair])
    got = gradref.tf.conv2d_backprop_input(x_shape, filt, dy, ones, padding,
                                           explicit_paddings=explicit if padding == "EXPLICIT"
                                           else [], data_format=data_format, dilations=dils)
    want = _tf_forward_grad_input(x_shape, filt, dy, (stride, stride), pads, (dil, dil), last)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("stride", [1, 2])
def test_tf_conv2d_backprop_input_int32(stride):
    """TF's CPU kernel takes int32 (P13): the sums wrap as int32 arithmetic does, which is the
    exact sum modulo 2^32 in any order. The model: int64 products and sums (numpy wraps them
    modulo 2^64), then the low 32 bits."""
    rng = np.random.default_rng(13 + stride)
    n, h, w, cin, cout, k = 2, 6, 7, 4, 5, 3
    filt = rng.integers(-2**31, 2**31, size=(k, k, cin, cout), dtype=np.int64).astype(np.int32)
    oh, ow = -(-h // stride), -(-w // stride)
    pads = [_same(h, k, stride, 1), _same(w, k, stride, 1)]
    dy = rng.integers(-2**31, 2**31, size=(n, oh, ow, cout), dtype=np.int64).astype(np.int32)
    got = gradref.tf.conv2d_backprop_input([n, h, w, cin], filt, dy, [1, stride, stride, 1],
                                           "SAME")
    assert got.dtype == np.int32
    acc = np.zeros((n, h + sum(pads[0]), w + sum(pads[1]), cin), np.int64)
    with np.errstate(over="ignore"):
        for kh in range(k):
            for kw in range(k):
                part = np.einsum("nhwo,io->nhwi", dy.astype(np.int64),
                                 filt[kh, kw].astype(np.int64))
                acc[:, kh:kh + stride * oh:stride, kw:kw + stride * ow:stride] += part
    want = acc[:, pads[0][0]:pads[0][0] + h, pads[1][0]:pads[1][0] + w].astype(np.int32)
    np.testing.assert_array_equal(got, want)


def test_tf_conv3d_backprop_input_and_filter_v2():
    rng = np.random.default_rng(11)
    x_shape, k, s = [1, 5, 6, 4, 2], 3, 2
    filt = rng.standard_normal((k, k, k, 2, 3))
    pads = [_same(v, k, s, 1) for v in x_shape[1:4]]
    out = [-(-v // s) for v in x_shape[1:4]]
    dy = rng.standard_normal([1] + out + [3])
    got = gradref.tf.conv3d_backprop_input_v2(x_shape, filt, dy, [1, s, s, s, 1], "SAME")
    want = _tf_forward_grad_input(x_shape, filt, dy, (s, s, s), pads, (1, 1, 1), True)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    x = rng.standard_normal(x_shape)
    dw = gradref.tf.conv3d_backprop_filter_v2(x, [k, k, k, 2, 3], dy, [1, s, s, s, 1], "SAME")
    xt = torch.from_numpy(x).permute(0, 4, 1, 2, 3)
    w = torch.zeros(3, 2, k, k, k, dtype=torch.float64, requires_grad=True)
    y = F.conv3d(F.pad(xt, [p for pair in reversed(pads) for p in pair]), w, None, s)
    y.backward(torch.from_numpy(dy).permute(0, 4, 1, 2, 3))
    np.testing.assert_allclose(dw, w.grad.permute(2, 3, 4, 1, 0).numpy(), rtol=1e-12,
                               atol=1e-12)
