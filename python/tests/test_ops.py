# SPDX-License-Identifier: Apache-2.0
"""Every operator through the package: the committed PyTorch fixtures bit for bit (as the C
suites check them), numpy and torch inputs, contiguous, transposed and sliced views, every
float dtype, out= arguments, and the upstream examples."""
import numpy as np
import pytest

import gradref
from conftest import (KINDS, bits_array, ints, load_fixtures, same_bits, strided_view, to_kind,
                      to_numpy, torch)

LAYOUTS = ["contiguous", "transposed", "sliced"]


def layout(a, name, seed=0):
    if name == "contiguous":
        return a
    return strided_view(a, np.random.default_rng(seed), name)


def test_version():
    assert gradref.version() == gradref.__version__
    assert gradref.version().count(".") == 2


# ---------------------------------------------------------------- recat

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", load_fixtures("recat"), ids=lambda c: c["name"])
def test_recat_fixtures(case, kind):
    dt = case["dtype"]
    bf16 = dt == "bf16"
    go = bits_array(case["input"], dt, ints(case["shape"]))
    want = bits_array(case["expected"], dt, (go.size,))
    split = ints(case["split"])
    for i, name in enumerate(LAYOUTS):
        x = to_kind(layout(go, name, i), kind, bf16)
        dtype = "bf16" if bf16 else None
        if case["variant"] == "fixed":
            out = gradref.recat_embedding_grad_output(x, split, dtype=dtype)
        elif case["variant"] == "mixed":
            out = gradref.recat_embedding_grad_output_mixed_D(x, split, dtype=dtype)
        else:
            cum = np.concatenate([[0], np.cumsum(split)[:-1]]).astype(np.int64)
            d, c = np.array(split, dtype=np.int64), cum
            if kind == "torch":
                d, c = torch.from_numpy(d), torch.from_numpy(c)
            out = gradref.recat_embedding_grad_output_mixed_D_batch(x, d, c, dtype=dtype)
        assert type(out) is type(x)
        same_bits(to_numpy(out), want)


def test_recat_fbgemm_examples():
    """The worked examples of FBGEMM's documentation (fbgemm_ascend's calling example)."""
    go = np.arange(1, 21, dtype=np.float32).reshape(2, 5, 2)
    out = gradref.recat_embedding_grad_output(go, [2, 3])
    assert out.tolist() == [1, 2, 3, 4, 11, 12, 13, 14, 5, 6, 7, 8, 9, 10, 15, 16, 17, 18, 19, 20]
    go = np.arange(1, 11, dtype=np.float32).reshape(2, 5)
    want = [1, 2, 6, 7, 3, 4, 5, 8, 9, 10]
    assert gradref.recat_embedding_grad_output_mixed_D(go, [2, 3]).tolist() == want
    out = gradref.recat_embedding_grad_output_mixed_D_batch(go, np.array([2, 3]), np.array([0, 2]))
    assert out.tolist() == want


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int8", "int32", "int64"])
def test_recat_every_dtype_moves_bits(dtype):
    rng = np.random.default_rng(1)
    raw = rng.integers(0, 256, size=3 * 7 * np.dtype(dtype).itemsize, dtype=np.uint8)
    go = raw.view(dtype).reshape(3, 7)
    out = gradref.recat_embedding_grad_output_mixed_D(go, [3, 0, 4])
    want = np.concatenate([go[:, :3].ravel(), go[:, 3:].ravel()])
    same_bits(out, want)


def test_recat_out_and_errors():
    go = np.arange(10, dtype=np.float32).reshape(2, 5)
    out = np.full(10, 7, dtype=np.float32)
    assert gradref.recat_embedding_grad_output_mixed_D(go, [2, 3], out=out) is out
    assert out.tolist() == [0, 1, 5, 6, 2, 3, 4, 7, 8, 9]
    out[...] = -1
    with pytest.raises(gradref.Error) as e:
        gradref.recat_embedding_grad_output_mixed_D(go, [2, 4], out=out)
    assert e.value.status == 6 and e.value.status_name == "GRADREF_ERR_PARAM"
    assert "sum to 6 but grad_output.shape[1] is 5" in e.value.message
    assert isinstance(e.value, ValueError)
    assert (out == -1).all()
    with pytest.raises(gradref.Error) as e:  # out of the wrong size
        gradref.recat_embedding_grad_output_mixed_D(go, [2, 3], out=np.zeros(9, np.float32))
    assert e.value.status_name == "GRADREF_ERR_SHAPE"
    high = gradref.recat_embedding_grad_output_mixed_D(go, [2, 3], precision="high", threads=1)
    assert high.tolist() == [0, 1, 5, 6, 2, 3, 4, 7, 8, 9]
    with pytest.raises(gradref.Error) as e:
        gradref.recat_embedding_grad_output_mixed_D(go, [2, 3], precision=5)
    assert e.value.status_name == "GRADREF_ERR_PARAM" and "precision is 5" in e.value.message
    with pytest.raises(TypeError):
        gradref.recat_embedding_grad_output_mixed_D(go.tolist(), [2, 3])
    with pytest.raises(TypeError):
        gradref.recat_embedding_grad_output_mixed_D(go, [2.0, 3])
    with pytest.raises(TypeError):
        gradref.recat_embedding_grad_output_mixed_D(go.astype(np.complex64), [2, 3])
    with pytest.raises(ValueError):  # a negative-stride output cannot be written in place
        gradref.recat_embedding_grad_output_mixed_D(go, [2, 3], out=np.zeros(10, np.float32)[::-1])
    # a negative-stride input is copied, with the same result
    rev = go[:, ::-1]
    same_bits(gradref.recat_embedding_grad_output_mixed_D(rev, [2, 3]),
              gradref.recat_embedding_grad_output_mixed_D(rev.copy(), [2, 3]))


def test_recat_inclusive_cumsum_is_explained():
    go = np.zeros((2, 5), np.float32)
    with pytest.raises(gradref.Error, match="inclusive prefix sum"):
        gradref.recat_embedding_grad_output_mixed_D_batch(go, np.array([2, 3]), np.array([2, 5]))


# ---------------------------------------------------------------- rope_grad

ROPE_MODES = {0: "atb", 1: "half", 2: "interleaved"}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", load_fixtures("rope_grad"), ids=lambda c: c["name"])
def test_rope_fixtures(case, kind):
    dt = case["dtype"]
    bf16 = dt == "bf16"
    T, Hq, Hk, S, D, rotary = ints(case["dims"])
    t = {k: bits_array(case[k], dt, shape) for k, shape in
         (("q_embed_grad", (T, Hq)), ("k_embed_grad", (T, Hk)), ("cos", (S, D)), ("sin", (S, D)),
          ("q_grad", (T, Hq)), ("k_grad", (T, Hk)))}
    for i, name in enumerate(LAYOUTS):
        args = [to_kind(layout(t[k], name, i), kind, bf16)
                for k in ("q_embed_grad", "k_embed_grad", "cos", "sin")]
        dq, dk = gradref.rope_grad(*args, ints(case["seq_lens"]), ROPE_MODES[int(case["mode"])],
                                   rotary_dim=rotary, start_positions=ints(case["start_positions"]),
                                   dtype="bf16" if bf16 else None, threads=1 + i)
        same_bits(to_numpy(dq), t["q_grad"])
        same_bits(to_numpy(dk), t["k_grad"])


def test_rope_worked_example():
    """docs/rope_grad.md: one head of 4, two one-token sequences, the second at position 1."""
    cos = np.array([[1, 1, 1, 1], [1, 2, 3, 4]], np.float32)
    sin = np.array([[0, 0, 0, 0], [5, 6, 7, 8]], np.float32)
    q = np.array([[1, 2, 3, 4], [1, 10, 100, 1000]], np.float32)
    k = np.array([[4, 3, 2, 1], [1, 10, 100, 1000]], np.float32)
    want = {"atb": [8, 100, -200, -2000], "half": [701, 8020, 295, 3940],
            "interleaved": [61, 15, 8300, 3300]}
    for mode, row in want.items():
        dq, dk = gradref.rope_grad(q, k, cos, sin, [1, 1], mode, start_positions=[0, 1])
        assert dq[1].tolist() == row and dk[1].tolist() == row
        assert dq[0].tolist() == q[0].tolist()


def test_rope_errors_leave_out_untouched():
    q = np.ones((3, 8), np.float32)
    cs = np.ones((4, 8), np.float32)
    outs = (np.full((3, 8), 5, np.float32), np.full((3, 8), 5, np.float32))
    with pytest.raises(gradref.Error) as e:
        gradref.rope_grad(q, q, cs, cs, [1, 1], "half", out=outs)
    assert e.value.status_name == "GRADREF_ERR_PARAM" and "sum to 2" in e.value.message
    assert (outs[0] == 5).all() and (outs[1] == 5).all()
    with pytest.raises(ValueError):
        gradref.rope_grad(q, q, cs, cs, [3], "sideways")
    with pytest.raises(TypeError):
        gradref.rope_grad(q, q, cs, cs, 3)
    gradref.rope_grad(q, q, cs, np.zeros_like(cs), [3], "half", out=outs)  # cos 1, sin 0
    assert (outs[0] == 1).all() and (outs[1] == 1).all()


# ---------------------------------------------------------------- grid_sampler3d_grad

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", load_fixtures("grid_sampler3d_grad"), ids=lambda c: c["name"])
def test_grid_sampler_fixtures(case, kind):
    dt = case["dtype"]
    interp, padding, align = ints(case["modes"])
    N, C, D, H, W, Do, Ho, Wo = ints(case["dims"])
    grad = bits_array(case["grad"], dt, (N, C, Do, Ho, Wo))
    x = bits_array(case["x"], dt, (N, C, D, H, W))
    grid = bits_array(case["grid"], dt, (N, Do, Ho, Wo, 3))
    for i, name in enumerate(LAYOUTS):
        args = [to_kind(layout(a, name, i), kind) for a in (grad, x, grid)]
        dx, dgrid = gradref.grid_sampler3d_grad(*args, interp, padding, bool(align))
        same_bits(to_numpy(dx), bits_array(case["dx"], dt, x.shape))
        same_bits(to_numpy(dgrid), bits_array(case["dgrid"], dt, grid.shape))


def test_grid_sampler_strings_masks_channels_last_and_out():
    rng = np.random.default_rng(3)
    grad = rng.standard_normal((2, 3, 2, 3, 4)).astype(np.float32)
    x = rng.standard_normal((2, 3, 3, 4, 5)).astype(np.float32)
    grid = (rng.random((2, 2, 3, 4, 3)) * 2.4 - 1.2).astype(np.float32)
    dx, dgrid = gradref.grid_sampler3d_grad(grad, x, grid, "bilinear", "reflection", True)
    dx1, none = gradref.grid_sampler3d_grad(grad, x, grid, 0, 2, True, output_mask=(True, False))
    assert none is None
    same_bits(dx1, dx)
    # NDHWC arrays viewed as (N, C, D, H, W): the same bits
    xl = np.ascontiguousarray(x.transpose(0, 2, 3, 4, 1)).transpose(0, 4, 1, 2, 3)
    gl = np.ascontiguousarray(grad.transpose(0, 2, 3, 4, 1)).transpose(0, 4, 1, 2, 3)
    out_dx = np.empty_like(xl)
    res = gradref.grid_sampler3d_grad(gl, xl, grid, "bilinear", "reflection", True,
                                      out=(out_dx, None))
    assert res[0] is out_dx
    same_bits(out_dx, dx)
    same_bits(res[1], dgrid)
    with pytest.raises(ValueError):
        gradref.grid_sampler3d_grad(grad, x, grid, "bicubic", "zeros", False)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32", "f64"])
def test_grid_sampler_dtypes_match_a_torch_reference(dtype):
    if torch is None:
        pytest.skip("python3-torch is not installed")
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
           "f64": torch.float64}[dtype]
    g = torch.Generator().manual_seed(4)
    grad = torch.randn(1, 2, 2, 3, 3, generator=g).to(tdt)
    x = torch.randn(1, 2, 3, 3, 4, generator=g).to(tdt)
    grid = (torch.rand(1, 2, 3, 3, 3, generator=g) * 2 - 1).to(tdt)
    dx, dgrid = gradref.grid_sampler3d_grad(grad, x, grid, "bilinear", "border", False)
    assert dx.dtype == tdt and isinstance(dx, torch.Tensor)
    # computed in f32 (f64 for f64) and rounded once: torch in f64, rounded, is within an ulp
    rdx, rdgrid = torch.ops.aten.grid_sampler_3d_backward(
        grad.double(), x.double(), grid.double(), 0, 1, False, [True, True])
    tol = {"f16": 2e-3, "bf16": 2e-2, "f32": 1e-5, "f64": 1e-12}[dtype]
    gradref.testing.assert_close(dx.double(), rdx, rtol=tol, atol=tol)
    gradref.testing.assert_close(dgrid.double(), rdgrid, rtol=tol, atol=tol)


# ---------------------------------------------------------------- conv_backprop_data

def conv_fixture_arrays(case):
    v = ints(case["geometry"])
    rank, N, G, ICpg, OCpg = v[:5]
    dims = [v[5 + 6 * j:11 + 6 * j] for j in range(rank)]
    K = [d[0] for d in dims]
    O = [d[1] for d in dims]
    sizes = [(o - 1) * d[2] + d[3] * (k - 1) + 1 - 2 * d[4] + d[5]
             for o, k, d in zip(O, K, dims)]
    f = bits_array(case["filter"], "f64", [G * OCpg, ICpg] + K)
    d = bits_array(case["diff"], "f64", [N, G * OCpg] + O)
    want = bits_array(case["grad"], "f64", [N, G * ICpg] + sizes)
    return rank, G, dims, f, d, want


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", load_fixtures("conv_backprop_data"), ids=lambda c: c["name"])
def test_conv_backprop_data_fixtures(case, kind):
    rank, G, dims, f, d, want = conv_fixture_arrays(case)
    kw = dict(stride=[x[2] for x in dims], dilate=[x[3] for x in dims], pad=[x[4] for x in dims],
              grad_shape=want.shape[2:])
    if G > 1:  # MegEngine's GROUP filter (G, OC/G, IC/G, k...)
        f = f.reshape((G, f.shape[0] // G) + f.shape[1:])
        kw["sparse"] = "GROUP"
    results = []
    for i, name in enumerate(LAYOUTS):
        args = [to_kind(layout(a, name, i), kind) for a in (f, d)]
        grad = to_numpy(gradref.conv_backprop_data(*args, **kw))
        # the C suite's tolerance: PyTorch sums in another order
        np.testing.assert_allclose(grad, want, rtol=1e-12, atol=1e-12)
        results.append(grad)
    for r in results[1:]:
        same_bits(r, results[0])


def test_conv_backprop_data_nhwc_int8_and_grad_shape():
    rng = np.random.default_rng(5)
    f = rng.integers(-128, 128, (4, 3, 3, 3), dtype=np.int8)        # (OC, IC, FH, FW)
    d = rng.integers(-128, 128, (2, 4, 5, 6), dtype=np.int8)        # (N, OC, OH, OW)
    g = gradref.conv_backprop_data(f, d, stride=2, pad=1, grad_shape=(10, 12))
    assert g.dtype == np.int32 and g.shape == (2, 3, 10, 12)
    # exact integer arithmetic against a direct scatter
    want = np.zeros((2, 3, 10 + 2, 12 + 2), np.int64)
    for oh in range(5):
        for ow in range(6):
            for kh in range(3):
                for kw in range(3):
                    want[:, :, 2 * oh + kh, 2 * ow + kw] += np.einsum(
                        "no,oc->nc", d[:, :, oh, ow].astype(np.int64),
                        f[:, :, kh, kw].astype(np.int64))
    assert (g == want[:, :, 1:11, 1:13]).all()
    # NHWC: diff (N, OH, OW, OC), filter (OC, FH, FW, IC), grad (N, IH, IW, IC)
    gl = gradref.conv_backprop_data(np.ascontiguousarray(f.transpose(0, 2, 3, 1)),
                                    np.ascontiguousarray(d.transpose(0, 2, 3, 1)), format="NHWC",
                                    stride=2, pad=1, grad_shape=(10, 12))
    assert gl.shape == (2, 10, 12, 3)
    same_bits(gl.transpose(0, 3, 1, 2), g)
    with pytest.raises(gradref.Error) as e:
        gradref.conv_backprop_data(f, d, stride=2, pad=1, grad_shape=(13, 12))
    assert e.value.status_name == "GRADREF_ERR_SHAPE"
    with pytest.raises(ValueError):
        gradref.conv_backprop_data(f, d, format="NCHW4")


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_conv_backprop_data_float_dtypes(dtype):
    rng = np.random.default_rng(6)
    f = rng.standard_normal((6, 2, 3)).astype(dtype)  # GROUP-free 1-D, groups via sparse below
    d = rng.standard_normal((2, 6, 7)).astype(dtype)
    g = gradref.conv_backprop_data(f.reshape(3, 2, 2, 3), d, sparse="GROUP", pad=(1, 0))
    assert g.dtype == dtype and g.shape == (2, 6, 8)
    out32 = np.empty((2, 6, 8), np.float32)
    if dtype == np.float16:  # F16 in, F32 out: the unrounded sums
        gradref.conv_backprop_data(f.reshape(3, 2, 2, 3), d, sparse="GROUP", pad=(1, 0), out=out32)
        same_bits(out32.astype(np.float16), g)


# ---------------------------------------------------------------- conv3d_backprop_filter

def test_conv3d_backprop_filter_against_torch_and_layouts():
    if torch is None:
        pytest.skip("python3-torch is not installed")
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 4, 5, 6, 7, generator=g, dtype=torch.float64)      # NCDHW
    w_shape = (6, 2, 2, 3, 3)                                             # groups 2
    dy = torch.randn(2, 6, 2, 6, 4, generator=g, dtype=torch.float64)
    ref = torch.nn.grad.conv3d_weight(x, w_shape, dy, stride=(2, 1, 2), padding=(0, 1, 1),
                                      dilation=(1, 1, 1), groups=2)
    dw = gradref.conv3d_backprop_filter(x, (2, 3, 3, 2, 6), dy, (1, 1, 2, 1, 2),
                                        [(0, 0), (1, 1), (1, 1)], data_format="NCDHW")
    assert isinstance(dw, torch.Tensor) and tuple(dw.shape) == (2, 3, 3, 2, 6)  # DHWIO
    gradref.testing.assert_close(dw.permute(4, 3, 0, 1, 2), ref, rtol=1e-12, atol=1e-12)
    # NDHWC numpy input, TF's 10 explicit_paddings: the same bits
    xl = np.ascontiguousarray(x.numpy().transpose(0, 2, 3, 4, 1))
    dyl = np.ascontiguousarray(dy.numpy().transpose(0, 2, 3, 4, 1))
    dwl = gradref.conv3d_backprop_filter(xl, (2, 3, 3, 2, 6), dyl, (1, 2, 1, 2, 1),
                                         [0, 0, 0, 0, 1, 1, 1, 1, 0, 0], "NDHWC", groups=2)
    same_bits(dwl, dw.numpy())


def test_conv3d_backprop_filter_hf32():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 5, 6, 4, 3)).astype(np.float32)     # NDHWC
    dy = rng.standard_normal((1, 3, 4, 2, 4)).astype(np.float32)    # VALID, stride 1
    for name, kept in (("hf32", 10), ("hf32_910b", 11)):
        dw = gradref.conv3d_backprop_filter(x, (3, 3, 3, 3, 4), dy, (1, 1, 1, 1, 1), "VALID", "NDHWC",
                                            precision=name)
        want = gradref.conv3d_backprop_filter(gradref.testing.hf32_round(x, kept), (3, 3, 3, 3, 4),
                                              gradref.testing.hf32_round(dy, kept),
                                              (1, 1, 1, 1, 1), "VALID", "NDHWC")
        same_bits(dw, want)
    bits = np.array([0x3f801000, 0xbf801000, 0x7f7fffff, 0xffffffff, 0x7fffffff, 0x7f800001],
                    dtype=np.uint32)
    got = gradref.testing.hf32_round(bits.view(np.float32)).view(np.uint32)
    assert got.tolist() == [0x3f802000, 0xbf802000, 0x7f800000, 0, 0x80000000, 0x7fc00000]
    with pytest.raises(gradref.Error, match="which takes F32 input and out_backprop"):
        gradref.conv3d_backprop_filter(x.astype(np.float16), (3, 3, 3, 3, 4),
                                       dy.astype(np.float16), (1, 1, 1, 1, 1), "VALID", "NDHWC",
                                       precision="hf32")


def test_conv_backprop_data_megengine_default():
    # a 1x1 convolution, two output channels: grad = 2048 * 1 + 1 * 1 = 2049, a tie in F16
    # (spacing 2): MegEngine's DEFAULT mode rounds it away from zero after the second term, the
    # default rounds the f32 sum once to even
    f = np.array([2048, 1], dtype=np.float16).reshape(2, 1, 1, 1)
    d = np.ones((1, 2, 1, 1), dtype=np.float16)
    assert gradref.conv_backprop_data(f, d).item() == 2048
    assert gradref.conv_backprop_data(f, d, precision="megengine_default").item() == 2050
    with pytest.raises(gradref.Error, match="which takes F16 or BF16"):
        gradref.conv_backprop_data(f.astype(np.float32), d.astype(np.float32),
                                   precision="megengine_default")


def test_conv_backprop_data_qs8():
    # 1x1, one channel each: grad = requant(w * d) = roundf(w * d * 1 * 1 / 2), saturated
    w = np.array([5, -5, 127, -128, 3], dtype=np.int8)
    d = np.array([1, 1, 127, 127, 1], dtype=np.int8)
    got = [gradref.conv_backprop_data(w[i].reshape(1, 1, 1, 1), d[i].reshape(1, 1, 1, 1),
                                      qs8_scales=(1.0, 1.0, 2.0)).item() for i in range(5)]
    assert got == [3, -3, 127, -128, 2]  # ties away from zero, then saturation
    raw = gradref.conv_backprop_data(w[:1].reshape(1, 1, 1, 1), d[:1].reshape(1, 1, 1, 1))
    assert raw.dtype == np.int32 and raw.item() == 5
    with pytest.raises(gradref.Error, match="a QuantizedS8 scale is finite and > 0"):
        gradref.conv_backprop_data(w[:1].reshape(1, 1, 1, 1), d[:1].reshape(1, 1, 1, 1),
                                   qs8_scales=(1.0, 0.0, 2.0))


def test_strict_upstream():
    rng = np.random.default_rng(10)
    q = rng.uniform(-2, 2, (11, 128)).astype(np.float16)
    cs = rng.uniform(-1, 1, (64, 128)).astype(np.float16)
    plain = gradref.rope_grad(q, q, cs, cs, [2, 1, 4, 4])
    strict = gradref.rope_grad(q, q, cs, cs, [2, 1, 4, 4], strict=True)
    same_bits(plain[0], strict[0])
    with pytest.raises(gradref.Error, match="RopeGrad takes F16 only") as e:
        gradref.rope_grad(q.astype(np.float32), q.astype(np.float32), cs.astype(np.float32),
                          cs.astype(np.float32), [2, 1, 4, 4], strict=True)
    assert e.value.status_name == "GRADREF_ERR_DTYPE"
    go = rng.standard_normal((4, 6)).astype(np.float64)
    gradref.recat_embedding_grad_output_mixed_D(go, [2, 4])
    with pytest.raises(gradref.Error, match="FBGEMM takes F32 and F16"):
        gradref.recat_embedding_grad_output_mixed_D(go, [2, 4], strict=True)


def test_conv3d_backprop_filter_same_valid_and_helper():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 5, 5, 5, 3)).astype(np.float32)     # NDHWC
    dy = rng.standard_normal((1, 3, 3, 3, 4)).astype(np.float32)    # SAME, stride 2
    dw = gradref.conv3d_backprop_filter(x, (3, 3, 3, 3, 4), dy, (1, 2, 2, 2, 1), "SAME", "NDHWC")
    # SAME with stride 2 on 5 gives pads 1, 1: the explicit call agrees bit for bit
    same_bits(dw, gradref.conv3d_backprop_filter(x, (3, 3, 3, 3, 4), dy, (2, 2, 2),
                                                 [(1, 1)] * 3, "NDHWC"))
    dyv = rng.standard_normal((1, 2, 2, 2, 4)).astype(np.float32)
    dwv = gradref.conv3d_backprop_filter(x, (3, 3, 3, 3, 4), dyv, (1, 2, 2, 2, 1), "VALID", "NDHWC")
    assert dwv.shape == (3, 3, 3, 3, 4)
    with pytest.raises(gradref.Error) as e:
        gradref.conv3d_backprop_filter(x, (3, 3, 3, 3, 4), dyv, (1, 2, 2, 2, 1), "SAME", "NDHWC")
    assert e.value.status_name == "GRADREF_ERR_SHAPE"
    assert gradref.conv3d_dw_transpose_needed("NDHWC", 4, 16, 32, 32) is True
    assert gradref.conv3d_dw_transpose_needed("NCDHW", 4, 16, 32, 32) is False
    assert gradref.conv3d_dw_transpose_needed("DHWCN", 1, 1024, 1024, 32) is False


# ---------------------------------------------------------------- exec, copy

def test_threads_precision_and_copy():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((4, 7)).astype(np.float32)
    out = np.empty((7, 4), np.float16).T
    assert gradref.copy(x, out, threads=2) is out
    same_bits(out, x.astype(np.float16))
    bf = np.empty((4, 7), np.uint16)
    gradref.copy(x, bf, dtype="bf16")
    assert np.abs((bf.astype(np.uint32) << 16).view(np.float32) - x).max() < 0.01
    q = rng.standard_normal((3, 8)).astype(np.float32)
    cs = rng.random((3, 8)).astype(np.float32)
    a = gradref.rope_grad(q, q, cs, cs, [3], "half", precision="high", threads=3)
    b = gradref.rope_grad(q, q, cs, cs, [3], "half", precision=1, threads=1)
    same_bits(a[0], b[0])
    with pytest.raises(gradref.Error) as e:
        gradref.rope_grad(q, q, cs, cs, [3], "half", threads=2000)
    assert "threads is 2000" in e.value.message
    with pytest.raises(ValueError):
        gradref.rope_grad(q, q, cs, cs, [3], "half", precision="extreme")
    with pytest.raises(TypeError):
        gradref.rope_grad(q, q, cs, cs, [3], "half", threads="2")


def test_conv3d_backprop_filter_convolution_mode():
    """mode="CONVOLUTION" (the filter flipped in every spatial dim): the gradient of the stored
    filter is the cross-correlation's, flipped."""
    rng = np.random.default_rng(21)
    x = rng.standard_normal((2, 5, 6, 4, 3))    # NDHWC
    dy = rng.standard_normal((2, 3, 4, 2, 4))
    xc = gradref.conv3d_backprop_filter(x, (3, 3, 3, 3, 4), dy, (1, 1, 1, 1, 1), "VALID", "NDHWC")
    cv = gradref.conv3d_backprop_filter(x, (3, 3, 3, 3, 4), dy, (1, 1, 1, 1, 1), "VALID", "NDHWC",
                                        mode="CONVOLUTION")
    same_bits(cv, np.ascontiguousarray(xc[::-1, ::-1, ::-1]))
    with pytest.raises(TypeError, match="data_format"):
        gradref.conv3d_backprop_filter(x, (3, 3, 3, 3, 4), dy, (1, 1, 1, 1, 1), "VALID")


def test_conv_backprop_data_same_and_valid():
    """pad="SAME" is TF's (out = ceil(in / stride), the odd pad at the end) for grad's size,
    "VALID" no pads; both the explicit call's bits."""
    rng = np.random.default_rng(22)
    w = rng.standard_normal((4, 3, 3, 3))
    dy = rng.standard_normal((2, 4, 4, 3))   # SAME with stride 2: grad 7 x 6 gives 4 x 3
    same = gradref.conv_backprop_data(w, dy, stride=2, pad="SAME", grad_shape=(7, 6))
    # TF: need = (out - 1) * s + k - in: H 6 + 3 - 7 = 2 -> (1, 1); W 4 + 3 - 6 = 1 -> (0, 1)
    same_bits(same, gradref.conv_backprop_data(w, dy, stride=2, pad=[(1, 1), (0, 1)],
                                               grad_shape=(7, 6)))
    out = np.empty_like(same)
    assert gradref.conv_backprop_data(w, dy, stride=2, pad="same", out=out) is out
    same_bits(out, same)
    valid = gradref.conv_backprop_data(w, dy, stride=2, pad="VALID")
    same_bits(valid, gradref.conv_backprop_data(w, dy, stride=2, pad=0))
    with pytest.raises(ValueError, match="grad_shape"):
        gradref.conv_backprop_data(w, dy, stride=2, pad="SAME")
