# SPDX-License-Identifier: Apache-2.0
"""gradref.cann in CANN's own calls, each holding a port of CANN's own tests:
Conv3DBackpropFilterV2's tests/assets/golden.py (torch's convolution_backward in float32, pads
applied to x beforehand, HF32 simulated on the int32 view of inputs and output) and the aclnn
example; Conv3DBackpropFilterToV2FusionPass's unit tests
(tests/ut/op_graph/test_conv3d_backprop_filter_to_v2_fusion_pass.cpp, 32 AI cores); and
GridSampler3DGrad's ST executor (float16/bfloat16 upcast to float32 for aten's
grid_sampler_3d_backward, cast back)."""
import numpy as np
import pytest

import gradref

torch = pytest.importorskip("torch")


def simulate_hf32(a, soc="Ascend950"):
    """golden.py's simulate_hf32_precision: round half away from zero on the magnitude bits."""
    v = np.ascontiguousarray(a, np.float32).view(np.int32)
    if soc == "Ascend910B":
        v = ((v >> 11) + 1) >> 1 << 12
    else:
        v = ((v >> 12) + 1) >> 1 << 13
    return v.view(np.float32)


def golden_dw(x, dy, kshape, strides, pads, dilations, groups, hf32=None):
    """CANN golden.py for NCDHW x/dy: torch's weight gradient in float32 on x padded by pads
    ([front, back, top, bottom, left, right]); HF32 on inputs and output when asked."""
    x = np.asarray(x, np.float32)
    dy = np.asarray(dy, np.float32)
    if hf32:
        x, dy = simulate_hf32(x, hf32), simulate_hf32(dy, hf32)
    f, b, t, bo, le, r = pads
    xp = np.pad(x, ((0, 0), (0, 0), (f, b), (t, bo), (le, r)))
    w = torch.zeros(kshape, dtype=torch.float32)
    _, dw, _ = torch.ops.aten.convolution_backward(
        torch.from_numpy(dy), torch.from_numpy(xp), w, None, list(strides), [0, 0, 0],
        list(dilations), False, [0, 0, 0], groups, [False, True, False])
    dw = dw.numpy()
    return simulate_hf32(dw, hf32) if hf32 else dw


CASES = [  # x NCDHW, Cout, kernel, strides, pads, dilations, groups
    ((2, 4, 6, 7, 5), 6, (3, 3, 2), (1, 2, 1), (1, 0, 1, 1, 0, 1), (1, 1, 2), 1),
    ((1, 4, 5, 6, 6), 4, (2, 3, 3), (2, 1, 2), (0, 1, 2, 1, 1, 0), (1, 1, 1), 2),
    ((2, 3, 4, 5, 5), 6, (1, 2, 2), (1, 1, 1), (0, 0, 0, 0, 0, 0), (2, 1, 1), 3),
]


def _dy_shape(xs, cout, k, s, p, d):
    out = [(xs[2 + j] + p[2 * j] + p[2 * j + 1] - d[j] * (k[j] - 1) - 1) // s[j] + 1
           for j in range(3)]
    return (xs[0], cout) + tuple(out)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", ["float32", "float16", "hf32"])
@pytest.mark.parametrize("y_format", ["NCDHW", "NDHWC", "DHWCN"])
def test_conv3d_backprop_filter_v2_golden(case, dtype, y_format):
    xs, cout, k, s, p, d, g = case
    rng = np.random.default_rng(hash((case, dtype, y_format)) % 2**32)
    npdt = np.float16 if dtype == "float16" else np.float32
    x = rng.uniform(-1, 1, xs).astype(npdt)
    dy = rng.uniform(-1, 1, _dy_shape(xs, cout, k, s, p, d)).astype(npdt)
    cin_g = xs[1] // g
    want = golden_dw(x, dy, (cout, cin_g) + k, s, p, d, g, "Ascend950" if dtype == "hf32" else None)
    order = {"NCDHW": (0, 1, 2, 3, 4), "NDHWC": (0, 2, 3, 4, 1), "DHWCN": (2, 3, 4, 1, 0)}
    fsize = [((cout, cin_g) + k)[i] for i in order[y_format]]
    ndhwc = (0, 2, 3, 4, 1)
    y = gradref.cann.conv3d_backprop_filter_v2(
        np.ascontiguousarray(x.transpose(ndhwc)), fsize, np.ascontiguousarray(dy.transpose(ndhwc)),
        [1, s[0], s[1], s[2], 1], list(p), [1, d[0], d[1], d[2], 1], groups=g,
        enable_hf32=dtype == "hf32", y_format=y_format)
    assert y.dtype == np.float32 and list(y.shape) == fsize
    tol = 1e-4 if dtype == "float32" else 1e-3  # CANN's ST tolerances
    np.testing.assert_allclose(y, want.transpose(order[y_format]), rtol=tol, atol=tol)
    # NCDHW tensors and data_format="NCDHW": the same bits
    y2 = gradref.cann.conv3d_backprop_filter_v2(
        x, fsize, dy, [1, 1] + list(s), list(p), [1, 1] + list(d), groups=g,
        data_format="NCDHW", enable_hf32=dtype == "hf32", y_format=y_format)
    np.testing.assert_array_equal(y2, y)


def test_conv3d_backprop_filter_v2_aclnn_example():
    # examples/test_aclnn_conv3d_backprop_filter_v2.cpp: ones, 1x1x1 kernel, every dW 2*343
    ones = np.ones((2, 2, 7, 7, 7), np.float16)
    y = gradref.cann.conv3d_backprop_filter_v2(ones, [2, 2, 1, 1, 1], ones, [1, 1, 1, 1, 1],
                                               [0] * 6, data_format="NCDHW", y_format="NCDHW")
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, np.full((2, 2, 1, 1, 1), 686, np.float32))


def test_conv3d_backprop_filter_v2_groups_and_depthwise():
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 4, (2, 4, 5, 5, 5)).astype(np.float32)
    dy = rng.integers(-3, 4, (2, 8, 3, 3, 3)).astype(np.float32)
    # groups=1 with a filter of 2 input channels: CANN makes it 4 / 2 = 2 groups
    implicit = gradref.cann.conv3d_backprop_filter_v2(
        x, [8, 2, 3, 3, 3], dy, [1] * 5, [0] * 6, data_format="NCDHW", y_format="NCDHW")
    explicit = gradref.cann.conv3d_backprop_filter_v2(
        x, [8, 2, 3, 3, 3], dy, [1] * 5, [0] * 6, groups=2, data_format="NCDHW",
        y_format="NCDHW")
    np.testing.assert_array_equal(implicit, explicit)
    np.testing.assert_array_equal(implicit, golden_dw(x, dy, (8, 2, 3, 3, 3), (1, 1, 1),
                                                      (0,) * 6, (1, 1, 1), 2))
    with pytest.raises(ValueError, match=r"x_channel\(4\) / filter_channel\(2\) != groups\(4\)"):
        gradref.cann.conv3d_backprop_filter_v2(x, [8, 2, 3, 3, 3], dy, [1] * 5, [0] * 6,
                                               groups=4, data_format="NCDHW", y_format="NCDHW")
    with pytest.raises(TypeError):
        gradref.cann.conv3d_backprop_filter_v2(x, [8, 2, 3, 3, 3], dy, [1] * 5, [0] * 6)


def test_from_depthwise_where_cann_reads_it():
    """A 4-entry filter_size with y NCDHW or DHWCN: N*C output channels of one input, y shaped
    as CANN's; with 5 entries or an NDHWC y CANN ignores the attribute, and so does gradref."""
    rng = np.random.default_rng(31)
    x = rng.integers(-3, 4, (2, 4, 5, 5, 5)).astype(np.float32)
    dy = rng.integers(-3, 4, (2, 8, 5, 3, 3)).astype(np.float32)
    want = golden_dw(x, dy, (8, 1, 1, 3, 3), (1, 1, 1), (0,) * 6, (1, 1, 1), 4)
    call = lambda fs, yf, dw: gradref.cann.conv3d_backprop_filter_v2(  # noqa: E731
        x, fs, dy, [1] * 5, [0] * 6, data_format="NCDHW", y_format=yf, from_depthwise=dw)
    y = call([4, 2, 3, 3], "NCDHW", True)  # (N, C, H, W) = (in, multiplier, kh, kw)
    assert y.shape == (8, 1, 1, 3, 3)
    np.testing.assert_array_equal(y, want)
    y = call([3, 3, 4, 2], "DHWCN", True)  # TF's depthwise (kh, kw, in, multiplier)
    assert y.shape == (1, 3, 3, 1, 8)
    np.testing.assert_array_equal(y, want.transpose(2, 3, 4, 1, 0))
    np.testing.assert_array_equal(call([8, 1, 1, 3, 3], "NCDHW", True),
                                  call([8, 1, 1, 3, 3], "NCDHW", False))
    np.testing.assert_array_equal(call([8, 3, 3, 1], "NDHWC", True),
                                  call([8, 3, 3, 1], "NDHWC", False))


def test_enable_hf32_rounds_y_of_16_bit_inputs_too():
    """golden.py rounds y to HF32 whenever enable_hf32 is set; float16 inputs are HF32 already."""
    rng = np.random.default_rng(32)
    x = rng.uniform(-1, 1, (1, 2, 4, 4, 4)).astype(np.float16)
    dy = rng.uniform(-1, 1, (1, 3, 2, 2, 2)).astype(np.float16)
    args = (x, [3, 2, 3, 3, 3], dy, [1] * 5, [0] * 6)
    plain = gradref.cann.conv3d_backprop_filter_v2(*args, data_format="NCDHW", y_format="NCDHW")
    y = gradref.cann.conv3d_backprop_filter_v2(*args, data_format="NCDHW", y_format="NCDHW",
                                               enable_hf32=True)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, simulate_hf32(plain))
    assert not np.array_equal(y, plain)


def test_conv3d_backprop_filter_v2_same_and_910b():
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (1, 2, 5, 6, 7)).astype(np.float32)
    dy = rng.uniform(-1, 1, (1, 3, 3, 3, 4)).astype(np.float32)
    # CANN's SAME: padding "SAME" and the H/W pads -1
    y = gradref.cann.conv3d_backprop_filter_v2(x, [3, 2, 3, 3, 3], dy, [1, 1, 2, 2, 2],
                                               [-1] * 6, data_format="NCDHW", y_format="NCDHW",
                                               padding="SAME")
    pads = []
    for i, k, s in zip((5, 6, 7), (3, 3, 3), (2, 2, 2)):
        need = max(0, (-(-i // s) - 1) * s + k - i)
        pads += [need // 2, need - need // 2]
    np.testing.assert_allclose(y, golden_dw(x, dy, (3, 2, 3, 3, 3), (2, 2, 2), pads, (1, 1, 1), 1),
                               rtol=1e-5, atol=1e-5)
    y = gradref.cann.conv3d_backprop_filter_v2(x, [3, 2, 3, 3, 3], dy, [1, 1, 2, 2, 2],
                                               pads, data_format="NCDHW", y_format="NCDHW",
                                               enable_hf32=True, soc="Ascend910B")
    np.testing.assert_allclose(y, golden_dw(x, dy, (3, 2, 3, 3, 3), (2, 2, 2), pads, (1, 1, 1), 1,
                                            "Ascend910B"), rtol=1e-3, atol=1e-3)
    assert np.array_equal(simulate_hf32(y, "Ascend910B"), y)  # the output rounded too


# (x_shape, x_format, y_shape, y_format, cores, soc) -> (operator, Transpose?)
FUSION_UT = [
    ((2, 256, 16, 16, 16), "NCDHW", (128, 256, 3, 3, 3), "NCDHW", 32, "Ascend950", False),  # noTransposeCase
    ((2, 32, 1, 16, 16), "NCDHW", (2, 3, 3, 1, 32), "DHWCN", 32, "Ascend950", True),  # dhwcFormatCase
    ((2, 256, 16, 16, 16), "NCDHW", (128, 3, 3, 3, 256), "NDHWC", 32, "Ascend950", False),  # shapeLimitExceeded
    ((2, 32, 1, 16, 16), "NCDHW", (2, 3, 3, 3, 32), "NDHWC", 32, "Ascend950", True),  # diEqualsOneNeedTranspose
    ((2, 256, 1, 16, 16), "NCDHW", (256, 3, 3, 3, 256), "NDHWC", 32, "Ascend950", False),  # diEqualsOne limit
    ((2, 32, 32, 16, 16), "NCDHW", (128, 3, 3, 3, 32), "NDHWC", 32, "Ascend950", True),  # boundary3D
    ((2, 128, 1, 16, 16), "NCDHW", (128, 3, 3, 3, 128), "NDHWC", 32, "Ascend950", True),  # boundary2D
    ((2, 1, 16, 16, 32), "NDHWC", (2, 3, 3, 3, 32), "NDHWC", 32, "Ascend950", True),  # xNdhwcFormatCase
    ((1, 16, 16, 32, 2), "DHWCN", (2, 3, 3, 3, 32), "NDHWC", 32, "Ascend950", True),  # xDhwcnFormatCase
    ((2, 32, 1, 16, 16), "NCDHW", (2, 3, 3, 3, 32), "NDHWC", 0, "Ascend950", False),  # coreCountZero
    ((2, -1, 1, 16, 16), "NCDHW", (2, 3, 3, 3, 32), "NDHWC", 32, "Ascend950", False),  # dynamic shape
]


@pytest.mark.parametrize("case", FUSION_UT)
def test_conv3d_backprop_filter_to_v2_fusion_pass(case):
    xs, xf, ys, yf, cores, soc, transpose = case
    op, perm = gradref.cann.conv3d_backprop_filter_to_v2(xs, xf, ys, yf, cores, soc)
    assert op == "Conv3DBackpropFilterV2"
    assert (perm is not None) == transpose
    if perm is not None:
        assert perm == ((0, 2, 3, 4, 1) if yf == "NDHWC" else (2, 3, 4, 1, 0))


@pytest.mark.parametrize("soc", ["Ascend910_93", "MC62CM12A"])
def test_conv3d_backprop_filter_to_v2_unsupported_platform(soc):
    assert gradref.cann.conv3d_backprop_filter_to_v2(
        (2, 32, 1, 16, 16), "NCDHW", (2, 3, 3, 3, 32), "NDHWC", 32, soc) == \
        ("Conv3DBackpropFilter", None)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("modes", [("bilinear", "zeros", False), ("nearest", "reflection", True),
                                   ("bilinear", "border", True)])
def test_grid_sampler3d_grad_st_executor(dtype, modes):
    rng = np.random.default_rng(len(dtype) + len(modes[0]) + len(modes[1]))
    npdt = np.float16 if dtype == "float16" else np.float32
    x = rng.uniform(-100, 100, (2, 3, 4, 5, 6)).astype(npdt)
    grid = rng.uniform(-1, 1, (2, 3, 4, 5, 3)).astype(npdt)
    grad = rng.uniform(-1, 1, (2, 3, 3, 4, 5)).astype(npdt)
    dx, dgrid = gradref.cann.grid_sampler3d_grad(grad, x, grid, *modes)
    interp = {"bilinear": 0, "nearest": 1}[modes[0]]
    pad = {"zeros": 0, "border": 1, "reflection": 2}[modes[1]]
    t = [torch.from_numpy(a.astype(np.float32)) for a in (grad, x, grid)]
    wdx, wdgrid = torch.ops.aten.grid_sampler_3d_backward(*t, interp, pad, modes[2], [True, True])
    assert dx.dtype == npdt and dgrid.dtype == npdt
    tol = 1e-4 if dtype == "float32" else 2e-3
    np.testing.assert_allclose(dx.astype(np.float32), wdx.numpy().astype(npdt), rtol=tol,
                               atol=tol * 100)
    np.testing.assert_allclose(dgrid.astype(np.float32), wdgrid.numpy().astype(npdt), rtol=tol,
                               atol=tol * 100)
    # NDHWC storage: grad, x and dx [N, D, H, W, C]; the same bits
    nd = (0, 2, 3, 4, 1)
    dxl, dgridl = gradref.cann.grid_sampler3d_grad(
        np.ascontiguousarray(grad.transpose(nd)), np.ascontiguousarray(x.transpose(nd)), grid,
        *modes, data_format="NDHWC")
    np.testing.assert_array_equal(dxl, dx.transpose(nd))
    np.testing.assert_array_equal(dgridl, dgrid)


def test_conv3d_backprop_filter_v2_attribute_checks():
    x = np.zeros((1, 2, 4, 4, 4), np.float32)
    dy = np.zeros((1, 2, 4, 4, 4), np.float32)
    call = gradref.cann.conv3d_backprop_filter_v2
    with pytest.raises(ValueError, match="N and C entries must be 1"):
        call(x, [2, 2, 1, 1, 1], dy, [1, 2, 1, 1, 1], [0] * 6, data_format="NCDHW",
             y_format="NCDHW")
    with pytest.raises(ValueError, match="5, in data_format"):
        call(x, [2, 2, 1, 1, 1], dy, [1, 1, 1], [0] * 6, data_format="NCDHW", y_format="NCDHW")
    with pytest.raises(ValueError, match="front, back"):
        call(x, [2, 2, 1, 1, 1], dy, [1] * 5, [0] * 3, data_format="NCDHW", y_format="NCDHW")
    with pytest.raises(ValueError, match="y_format"):
        call(x, [2, 2, 1, 1, 1], dy, [1] * 5, [0] * 6, data_format="NCDHW", y_format="HWCN")
    with pytest.raises(ValueError, match="greater than 0"):
        call(x, [2, 2, 1, 1, 1], dy, [1] * 5, [0] * 6, groups=0, data_format="NCDHW",
             y_format="NCDHW")
