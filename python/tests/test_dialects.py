# SPDX-License-Identifier: Apache-2.0
"""gradref.fbgemm and gradref.atb in their upstreams' own calls, each holding a port of the
upstream's test: FBGEMM's fbgemm_gpu/test/layout_transform_ops_test.py (split + cat references,
hypothesis-drawn sizes) and ATB's tests/apitest/kernelstest/mix/test_rope_grad.py golden (the
float16 formula, positions per sequence) with the opstest CSV's positive case."""
import numpy as np
import pytest

import gradref

torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402


def split_cat(go, widths):
    """FBGEMM's test reference: grad_output split along dim 1, each part flattened, concatenated."""
    return torch.cat([part.contiguous().view(-1) for part in torch.split(go, widths, dim=1)])


def test_fbgemm_worked_case():
    go = torch.arange(40, dtype=torch.float32).reshape(4, 10)
    want = [0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32, 3, 4, 5, 6, 7, 13, 14, 15, 16, 17, 23,
            24, 25, 26, 27, 33, 34, 35, 36, 37, 8, 9, 18, 19, 28, 29, 38, 39]
    out = gradref.fbgemm.recat_embedding_grad_output_mixed_D(go, [3, 5, 2])
    assert isinstance(out, torch.Tensor) and out.tolist() == want


@settings(max_examples=40, deadline=None)
@given(B=st.integers(1, 20), W=st.integers(1, 20), seed=st.integers(0, 2 ** 31))
def test_fbgemm_mixed_D_and_batch(B, W, seed):
    rng = np.random.default_rng(seed)
    dims = [int(v) for v in rng.integers(1, 10, size=W)]  # per rank: sums of per-feature D
    go = torch.from_numpy(rng.standard_normal((B, sum(dims))).astype(np.float32))
    want = split_cat(go, dims)
    got = gradref.fbgemm.recat_embedding_grad_output_mixed_D(go, dims)
    assert torch.equal(got, want)
    dim_t = torch.tensor(dims, dtype=torch.int64)
    cumsum_t = torch.from_numpy(np.cumsum([0] + dims)[:-1].astype(np.int64))
    got = gradref.fbgemm.recat_embedding_grad_output_mixed_D_batch(go.half(), dim_t, cumsum_t)
    assert torch.equal(got, split_cat(go.half(), dims))


@settings(max_examples=30, deadline=None)
@given(B=st.integers(1, 20), D=st.integers(2, 20), W=st.integers(1, 20),
       seed=st.integers(0, 2 ** 31))
def test_fbgemm_fixed_D(B, D, W, seed):
    rng = np.random.default_rng(seed)
    features = [int(v) for v in rng.integers(1, 20, size=W)]
    go = torch.from_numpy(rng.standard_normal((B, sum(features), D)).astype(np.float32))
    want = split_cat(go.view(B, -1), [f * D for f in features])
    assert torch.equal(gradref.fbgemm.recat_embedding_grad_output(go, features), want)


def test_fbgemm_checks_as_fbgemm():
    go = torch.zeros(2, 4, dtype=torch.bfloat16)
    with pytest.raises(gradref.Error, match="FBGEMM"):
        gradref.fbgemm.recat_embedding_grad_output_mixed_D(go, [1, 3])
    with pytest.raises(gradref.Error, match="contiguous"):
        gradref.fbgemm.recat_embedding_grad_output_mixed_D(torch.zeros(4, 2).t(), [1, 3])
    # strict=False: what gradref adds beyond FBGEMM
    out = gradref.fbgemm.recat_embedding_grad_output_mixed_D(go, [1, 3], strict=False)
    assert out.dtype == torch.bfloat16


def atb_golden(q, k, cos, sin, seq_lens):
    """ATB's kernelstest golden, per sequence and head, in float16."""
    head = 128
    rows = []
    for length in seq_lens:
        c, s = cos[:length], sin[:length]
        rows.append(c + torch.cat((s[:, head // 2:], -s[:, :head // 2]), dim=1))
    w = torch.cat(rows, dim=0)  # the weights of every token, in float16
    def apply(x):
        return torch.cat([x[:, n * head:(n + 1) * head] * w for n in range(x.shape[1] // head)],
                         dim=1)
    return apply(q), apply(k)


@pytest.mark.parametrize("seq_lens,hidden,max_seq", [([2, 1, 4, 4], 128, 64),  # the opstest CSV
                                                     ([7, 30, 1, 16], 1280, 32)])
def test_atb_rope_grad_golden(seq_lens, hidden, max_seq):
    g = torch.Generator().manual_seed(sum(seq_lens))
    tokens = sum(seq_lens)
    q = (torch.rand(tokens, hidden, generator=g) * 200 - 100).half()
    k = (torch.rand(tokens, hidden, generator=g) * 200 - 100).half()
    cos = (torch.rand(max_seq, 128, generator=g) * 2 - 1).half()
    sin = (torch.rand(max_seq, 128, generator=g) * 2 - 1).half()
    dq, dk = gradref.atb.rope_grad(q, k, cos, sin, seq_lens)
    wq, wk = atb_golden(q, k, cos, sin, seq_lens)
    assert torch.equal(dq.view(torch.int16), wq.view(torch.int16))
    assert torch.equal(dk.view(torch.int16), wk.view(torch.int16))


def test_atb_checks_as_atb():
    q = torch.zeros(4, 128, dtype=torch.float32)
    c = torch.zeros(8, 128, dtype=torch.float32)
    with pytest.raises(gradref.Error):
        gradref.atb.rope_grad(q, q, c, c, [4])  # ATB takes float16 only
    dq, _ = gradref.atb.rope_grad(q, q, c, c, [4], strict=False)
    assert dq.dtype == torch.float32


# ---- gradref.megengine: MegEngine's dnn/test/fallback/convolution.cpp CONVOLUTION_BACKWARD_DATA
# list (N, IC/G, OH, OW, OC/G, FH, FW, stride, pad, dilate, G), both modes

MEGENGINE_LIST = [(1, 3, 10, 13, 5, 1, 1, 1, 0, 1, 1), (1, 5, 24, 43, 11, 9, 3, 3, 12, 1, 2),
                  (1, 3, 10, 45, 2, 1, 1, 1, 0, 4, 3), (1, 3, 9, 12, 2, 4, 6, 1, 0, 1, 2),
                  (1, 4, 17, 32, 2, 3, 2, 5, 4, 4, 3), (1, 5, 24, 43, 11, 9, 3, 3, 12, 2, 2),
                  (1, 3, 20, 33, 3, 5, 7, 4, 15, 2, 3), (1, 4, 6, 7, 9, 3, 2, 2, 1, 3, 2)]


def megengine_case(run, rng, dt):
    n, icpg, oh, ow, ocpg, fh, fw, s, p, d, g = run
    ih = (oh - 1) * s + d * (fh - 1) + 1 - 2 * p
    iw = (ow - 1) * s + d * (fw - 1) + 1 - 2 * p
    filt = (rng.integers(-64, 65, size=(g, ocpg, icpg, fh, fw)) / 8).astype(dt)
    diff = (rng.integers(-64, 65, size=(n, g * ocpg, oh, ow)) / 8).astype(dt)
    return filt, diff, (n, g * icpg, ih, iw)


def megengine_scatter(filt, diff, grad_shape, s, p, d, mode, round16=None):
    """MegEngine's naive backward_data (dnn/src/naive/convolution/helper.h) as written: grad
    zeroed, the forward loop nest as a scatter; round16 rounds each sum (compute_mode DEFAULT
    on float16), else float64 sums."""
    g_, ocpg, icpg, fh_n, fw_n = filt.shape
    grad = np.zeros(grad_shape, np.float32 if round16 else np.float64)
    for n in range(diff.shape[0]):
        for oc in range(diff.shape[1]):
            grp = oc // ocpg
            for oh in range(diff.shape[2]):
                for ow in range(diff.shape[3]):
                    dv = np.float32(diff[n, oc, oh, ow])
                    for fh in range(fh_n):
                        for fw in range(fw_n):
                            kh = fh if mode == 0 else fh_n - 1 - fh
                            kw = fw if mode == 0 else fw_n - 1 - fw
                            ih, iw = oh * s + kh * d - p, ow * s + kw * d - p
                            if not (0 <= ih < grad_shape[2] and 0 <= iw < grad_shape[3]):
                                continue
                            w = filt[grp, oc % ocpg, :, fh, fw].astype(np.float32)
                            sl = (n, slice(grp * icpg, (grp + 1) * icpg), ih, iw)
                            if round16:
                                grad[sl] = round16(grad[sl] + w * dv)
                            else:
                                grad[sl] += w.astype(np.float64) * float(dv)
    return grad


def f16_ties_away(v):
    """float32 values rounded to float16 values as half.hpp does (ties away from zero; the
    inputs here stay in F16's normal range or are 0), returned as float32."""
    x = np.asarray(v, np.float32).view(np.uint32)
    ax = x & np.uint32(0x7fffffff)
    r = (ax + np.uint32(0x1000)) & np.uint32(0xffffe000)
    r = np.where(ax == 0, ax, r)
    return (r | (x & np.uint32(0x80000000))).view(np.float32)


@pytest.mark.parametrize("run", MEGENGINE_LIST)
@pytest.mark.parametrize("mode", [0, 1])
def test_megengine_list_float32(run, mode):
    rng = np.random.default_rng(sum(run) + mode)
    filt, diff, gshape = megengine_case(run, rng, np.float32)
    s, p, d = run[7], run[8], run[9]
    got = gradref.megengine.convolution_backward_data(
        filt, diff, None, "CONVOLUTION" if mode else "CROSS_CORRELATION", p, p, s, s, d, d,
        "GROUP", src_for_shp=np.empty(gshape, np.float32))
    want = megengine_scatter(filt, diff, gshape, s, p, d, mode)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("run", [MEGENGINE_LIST[0], MEGENGINE_LIST[3], MEGENGINE_LIST[7]])
def test_megengine_compute_mode_default_float16(run):
    rng = np.random.default_rng(sum(run))
    filt, diff, gshape = megengine_case(run, rng, np.float16)
    s, p, d = run[7], run[8], run[9]
    grad = np.zeros(gshape, np.float16)
    out = gradref.megengine.convolution_backward_data(filt, diff, grad, "CROSS_CORRELATION", p,
                                                      p, s, s, d, d, "GROUP")
    assert out is grad
    want = megengine_scatter(filt, diff, gshape, s, p, d, 0, f16_ties_away)
    np.testing.assert_array_equal(grad.astype(np.float32).view(np.uint32),
                                  want.view(np.uint32))
    # compute_mode FLOAT32: one rounding at the end (the default precision)
    f32 = gradref.megengine.convolution_backward_data(filt, diff, None, "CROSS_CORRELATION", p,
                                                      p, s, s, d, d, "GROUP", compute_mode="FLOAT32",
                                                      src_for_shp=grad)
    assert f32.dtype == np.float16


# MegEngine's blocked formats, built here by reshapes (not by the library's layout code)
def to_nchw4(a):  # (N, C, H, W) -> (N, C/4, H, W, 4)
    n, c, h, w = a.shape
    return np.ascontiguousarray(a.reshape(n, c // 4, 4, h, w).transpose(0, 1, 3, 4, 2))


def to_nhwcd4(a):  # (N, C, H, W) -> (N, H, C/4, W, 4)
    n, c, h, w = a.shape
    return np.ascontiguousarray(a.reshape(n, c // 4, 4, h, w).transpose(0, 3, 1, 4, 2))


def filter_blocked(w, fmt, grouped, dot):
    """The plain (OC, IC, FH, FW) or (G, OC/G, IC/G, FH, FW) filter in MegEngine's layout."""
    c = np.ascontiguousarray
    if fmt == "NCHW4":
        if grouped:
            g, o, i, fh, fw = w.shape
            return c(w.reshape(g, o, i // 4, 4, fh, fw).transpose(0, 1, 2, 4, 5, 3))
        o, i, fh, fw = w.shape
        return c(w.reshape(o, i // 4, 4, fh, fw).transpose(0, 1, 3, 4, 2))
    if grouped and w.shape[1] == 1 and w.shape[2] == 1:  # channel-wise (G/4, 1, FH, FW, 4)
        g, _, _, fh, fw = w.shape
        return c(w.reshape(g // 4, 4, 1, fh, fw).transpose(0, 2, 3, 4, 1))
    if not grouped:
        w = w[None]
    g, o, i, fh, fw = w.shape
    if dot:  # (G, OC/G/4, FH, FW, IC/G/4, 4oc, 4ic)
        out = w.reshape(g, o // 4, 4, i // 4, 4, fh, fw).transpose(0, 1, 5, 6, 3, 2, 4)
    else:  # (G, OC/G/4, FH, FW, IC/G, 4oc)
        out = w.reshape(g, o // 4, 4, i, fh, fw).transpose(0, 1, 4, 5, 3, 2)
    return c(out if grouped else out[0])


# NCHW4 has no channel-wise filter layout: that pair is not a case
@pytest.mark.parametrize("fmt, kind", [("NCHW4", "dense"), ("NCHW4", "group"),
                                       ("NHWCD4", "dense"), ("NHWCD4", "group"),
                                       ("NHWCD4", "chanwise")])
@pytest.mark.parametrize("dt", ["float32", "int8", "qs8"])
def test_megengine_blocked_formats(fmt, kind, dt):
    rng = np.random.default_rng(len(fmt) * 7 + len(kind) + len(dt))
    g, ocpg, icpg = {"dense": (1, 8, 4), "group": (2, 4, 8), "chanwise": (8, 1, 1)}[kind]
    wshape = (g * ocpg, icpg, 3, 2) if kind == "dense" else (g, ocpg, icpg, 3, 2)
    n, oh, ow = 2, 4, 5
    if dt == "float32":
        w = rng.standard_normal(wshape).astype(np.float32)
        dy = rng.standard_normal((n, g * ocpg, oh, ow)).astype(np.float32)
    else:
        w = rng.integers(-128, 128, wshape).astype(np.int8)
        dy = rng.integers(-128, 128, (n, g * ocpg, oh, ow)).astype(np.int8)
    scales = (0.02, 0.03, 0.05) if dt == "qs8" else None
    sparse = "DENSE" if kind == "dense" else "GROUP"
    to = to_nchw4 if fmt == "NCHW4" else to_nhwcd4
    plain = gradref.megengine.convolution_backward_data(
        w, dy, None, "CROSS_CORRELATION", 1, 0, 2, 1, sparse=sparse, qs8_scales=scales)
    got = gradref.megengine.convolution_backward_data(
        filter_blocked(w, fmt, kind != "dense", dt == "qs8"), to(dy), None,
        "CROSS_CORRELATION", 1, 0, 2, 1, sparse=sparse, format=fmt, qs8_scales=scales,
        src_for_shp=to(np.empty(plain.shape, plain.dtype)))
    np.testing.assert_array_equal(got, to(plain))
    # torch tensors in, torch out; a given grad is written in place
    out = torch.from_numpy(np.zeros_like(got))
    back = gradref.megengine.convolution_backward_data(
        torch.from_numpy(filter_blocked(w, fmt, kind != "dense", dt == "qs8")),
        torch.from_numpy(to(dy)), out, "CROSS_CORRELATION", 1, 0, 2, 1, sparse=sparse,
        format=fmt, qs8_scales=scales)
    assert back is out
    np.testing.assert_array_equal(out.numpy(), got)


def test_megengine_blocked_shape_errors():
    w = np.zeros((8, 1, 3, 3, 4), np.float32)  # NCHW4 dense: (OC, IC/4, FH, FW, 4)
    dy = np.zeros((1, 2, 5, 5, 4), np.float32)
    grad = gradref.megengine.convolution_backward_data(w, dy, format="NCHW4")
    assert grad.shape == (1, 1, 7, 7, 4)
    with pytest.raises(ValueError, match="NCHW4"):
        gradref.megengine.convolution_backward_data(w[..., :2], dy, format="NCHW4")
    with pytest.raises(ValueError, match="diff"):
        gradref.megengine.convolution_backward_data(w, dy[..., :2], format="NCHW4")
