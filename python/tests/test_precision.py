# SPDX-License-Identifier: Apache-2.0
"""gradref.precision: the f64 golden, the terms and the error bound, held to properties a
tolerance cannot fake: any summation order of the same terms stays inside the bound, a dropped
tap that assert_close passes is flagged, and a correct result with heavy cancellation that
assert_close fails passes."""
import numpy as np
import pytest

import gradref
from gradref import precision

GEOMETRY = dict(format="NCW", stride=2, pad=1, dilate=1)


def conv_case(seed, oc=4, ic=3, k=3, n=2, o=9, i=18):
    rng = np.random.default_rng(seed)
    w = rng.uniform(-1, 1, (oc, ic, k)).astype(np.float32)
    d = rng.uniform(-1, 1, (n, oc, o)).astype(np.float32)
    return w, d, i


def conv_terms(w, d, i_size, stride=2, pad=1, dil=1):
    """Every product w[oc, c, k] * d[n, oc, o] reaching grad[n, c, i], as float64 lists."""
    n, oc, o_size = d.shape
    out = {}
    for b in range(n):
        for c in range(w.shape[1]):
            for i in range(i_size):
                t = []
                for q in range(oc):
                    for k in range(w.shape[2]):
                        num = i + pad - k * dil
                        if num % stride == 0 and 0 <= num // stride < o_size:
                            t.append(float(w[q, c, k]) * float(d[b, q, num // stride]))
                out[(b, c, i)] = t
    return out


def test_terms_match_the_products():
    w, d, i = conv_case(1)
    mag, count = precision.terms("conv_backprop_data", w, d, grad_shape=(i,), **GEOMETRY)
    gold = precision.f64(gradref.conv_backprop_data, w, d, grad_shape=(i,), **GEOMETRY)
    assert gold.dtype == np.float64
    for (b, c, x), t in conv_terms(w, d, i).items():
        assert count[b, c, x] == len(t)
        assert mag[b, c, x] == pytest.approx(sum(abs(v) for v in t), rel=1e-15, abs=0)
        assert gold[b, c, x] == pytest.approx(sum(t), rel=1e-13, abs=1e-15)


def _sum_in(order, values, acc):
    s = acc(0)
    for j in order:
        s = acc(s + acc(values[j]))  # each product rounded to the accumulator, then the sum
    return float(s)


@pytest.mark.parametrize("acc, name", [(np.float32, "float32"), (np.float16, "float16")])
def test_every_order_stays_in_the_bound(acc, name):
    """Random summation orders in float32 and float16 accumulation, each product rounded to
    the accumulator first (one more rounding than the bound's products need, which the
    input-rounding term covers)."""
    w, d, i = conv_case(2)
    mag, count = precision.terms("conv_backprop_data", w, d, grad_shape=(i,), **GEOMETRY)
    gold = precision.f64(gradref.conv_backprop_data, w, d, grad_shape=(i,), **GEOMETRY)
    bound = precision.error_bound(gold, mag, count, name, name, input_rounding=name)
    rng = np.random.default_rng(5)
    tight = 0.0
    for (b, c, x), t in conv_terms(w, d, i).items():
        for _ in range(20):
            got = _sum_in(rng.permutation(len(t)), t, acc)
            err = abs(got - gold[b, c, x])
            assert err <= bound[b, c, x], (b, c, x, err, bound[b, c, x])
            tight = max(tight, err / bound[b, c, x])
    assert tight > 0.01  # the bound is not vacuous for these sums


def test_gradref_itself_within_the_bound():
    w, d, i = conv_case(3, oc=16, ic=8, o=20, i=40)
    args = dict(grad_shape=(i,), **GEOMETRY)
    mag, count = precision.terms("conv_backprop_data", w, d, **args)
    gold = precision.f64(gradref.conv_backprop_data, w, d, **args)
    for dt in (np.float32, np.float16):
        got = gradref.conv_backprop_data(w.astype(dt), d.astype(dt), **args)
        gold_dt = precision.f64(gradref.conv_backprop_data, w.astype(dt), d.astype(dt), **args)
        name = np.dtype(dt).name
        v = precision.check_bound(got, gold_dt, precision.error_bound(
            gold_dt, mag, count, name))
        assert v.passed, v.report()
        assert v.metrics["largest error/bound"] < 1
    probabilistic = precision.error_bound(gold, mag, count, "float32", model="probabilistic")
    assert (probabilistic <= precision.error_bound(gold, mag, count, "float32")).all()


def test_dropped_tap_flagged_where_assert_close_passes():
    w, d, i = conv_case(4)
    w[:, :, 0] *= np.float32(4e-6)  # one small tap: dropping it moves grad by a few 1e-6
    args = dict(grad_shape=(i,), **GEOMETRY)
    gold = precision.f64(gradref.conv_backprop_data, w, d, **args)
    mag, count = precision.terms("conv_backprop_data", w, d, **args)
    buggy_w = w.copy()
    buggy_w[:, :, 0] = 0  # the bug: a kernel that skips tap 0
    buggy = gradref.conv_backprop_data(buggy_w, d, **args)
    gradref.testing.assert_close(buggy, gold.astype(np.float32))  # torch's tolerances pass it
    v = precision.check_bound(buggy, gold, precision.error_bound(gold, mag, count, "float32"))
    assert not v.passed and v.metrics["past the bound"] > 0
    assert "past the bound" in v.report()


def test_cancellation_passes_the_bound_where_assert_close_fails():
    rng = np.random.default_rng(6)
    w = rng.uniform(100, 1000, (2, 1, 1)).astype(np.float32)
    d = np.empty((1, 2, 64), np.float32)
    d[0, 0] = rng.uniform(-10, 10, 64).astype(np.float32)
    d[0, 1] = (-d[0, 0] * w[0, 0, 0] / w[1, 0, 0]).astype(np.float32)  # the sums nearly cancel
    args = dict(format="NCW", grad_shape=(64,))
    got = gradref.conv_backprop_data(w, d, **args)
    gold = precision.f64(gradref.conv_backprop_data, w, d, **args)
    with pytest.raises(AssertionError):
        gradref.testing.assert_close(got, gold.astype(np.float32))
    mag, count = precision.terms("conv_backprop_data", w, d, **args)
    v = precision.check_bound(got, gold, precision.error_bound(gold, mag, count, "float32"))
    assert v.passed, v.report()


def test_rope_terms_and_bound():
    rng = np.random.default_rng(7)
    t, d = 6, 8
    q = rng.uniform(-2, 2, (t, 2 * d)).astype(np.float16)
    k = rng.uniform(-2, 2, (t, d)).astype(np.float16)
    ang = rng.uniform(0, 6.3, (t, d))
    cos, sin = np.cos(ang).astype(np.float16), np.sin(ang).astype(np.float16)
    for mode in ("half", "interleaved", "atb"):
        kw = dict(mode=mode)
        got = gradref.rope_grad(q, k, cos, sin, [t], **kw)
        gold = precision.f64(gradref.rope_grad, q, k, cos, sin, [t], **kw)
        mag, count = precision.terms("rope_grad", q, k, cos, sin, [t], **kw)
        assert (count[0] == 2).all() and (mag[0] >= np.abs(gold[0])).all()
        # ATB rounds its weight and its product to F16 (two roundings in F16's unit)
        acc = "float16" if mode == "atb" else "float32"
        for out, g, m, n in zip(got, gold, mag, count):
            v = precision.check_bound(out, g, precision.error_bound(g, m, n, "float16", acc))
            assert v.passed, v.report()
            assert v.metrics["largest error/bound"] > 0.05  # not vacuous
    # the operator's default mode is ATB, and so is the terms'
    default = precision.terms("rope_grad", q, k, cos, sin, [t])
    atb = precision.terms("rope_grad", q, k, cos, sin, [t], mode="atb")
    assert all(np.array_equal(a, b) for x, y in zip(default, atb) for a, b in zip(x, y))
    with pytest.raises(ValueError):
        precision.terms("rope_grad", q, k, cos, sin, [t], mode="neox")


def test_rope_atb_terms_flag_a_wrong_weight():
    """F32 ATB with the partner's sign flipped in the back half (c + s' instead of c - s'), a
    bug assert_close's F32 tolerance misses where sin is small, is past the bound."""
    rng = np.random.default_rng(11)
    t, d = 64, 8
    q = rng.uniform(-2, 2, (t, d)).astype(np.float32)
    k = rng.uniform(-2, 2, (t, d)).astype(np.float32)
    cos = np.ones((t, d), np.float32)
    sin = np.full((t, d), 2.0 ** -21, np.float32)
    gold = precision.f64(gradref.rope_grad, q, k, cos, sin, [t])
    mag, count = precision.terms("rope_grad", q, k, cos, sin, [t])
    h = d // 2
    bug = q.astype(np.float64) * np.concatenate([cos[:, :h] + sin[:, h:],
                                                 cos[:, h:] + sin[:, :h]], axis=1)
    bug = bug.astype(np.float32)
    np.testing.assert_allclose(bug, gold[0], rtol=1.3e-6, atol=1e-5)  # torch's F32 tolerance
    v = precision.check_bound(bug, gold[0],
                              precision.error_bound(gold[0], mag[0], count[0], "float32"))
    assert not v.passed
    assert v.metrics["past the bound"] == t * h  # the back half, every element


def test_library_terms_from_any_dtype():
    """GRADREF_TERM_MAGNITUDES and _COUNTS: from F16 inputs, the F64 call on |inputs| and on
    ones, bit for bit (the reference loop's order), for both convolutions."""
    w, d, i = conv_case(8)
    args = dict(grad_shape=(i,), **GEOMETRY)
    w16, d16 = w.astype(np.float16), d.astype(np.float16)
    mag = gradref.conv_backprop_data(w16, d16, terms="magnitudes", **args)
    cnt = gradref.conv_backprop_data(w16, d16, terms="counts", **args)
    assert mag.dtype == np.float64 and cnt.dtype == np.float64
    a64 = [np.abs(v.astype(np.float64)) for v in (w16, d16)]
    assert np.array_equal(mag, gradref.conv_backprop_data(*a64, **args))
    assert np.array_equal(cnt, gradref.conv_backprop_data(*(np.ones_like(v) for v in a64),
                                                          **args))
    rng = np.random.default_rng(9)
    x = rng.uniform(-1, 1, (2, 3, 4, 5, 6)).astype(np.float16)
    dy = rng.uniform(-1, 1, (2, 4, 4, 5, 6)).astype(np.float16)
    c3f = dict(strides=1, padding="SAME", data_format="NCDHW")
    got = gradref.conv3d_backprop_filter(x, (3, 3, 3, 3, 4), dy, terms="magnitudes", **c3f)
    want = gradref.conv3d_backprop_filter(np.abs(x.astype(np.float64)), (3, 3, 3, 3, 4),
                                          np.abs(dy.astype(np.float64)), **c3f)
    assert got.dtype == np.float64 and np.array_equal(got, want)


def test_library_terms_refusals():
    w, d, i = conv_case(10)
    args = dict(grad_shape=(i,), **GEOMETRY)
    out = np.full((2, 3, i), 7.0, np.float32)
    with pytest.raises(gradref.Error) as e:  # a terms call writes F64
        gradref.conv_backprop_data(w, d, terms="counts", out=out, out_dtype="float32", **args)
    assert (out == 7.0).all()
    with pytest.raises(gradref.Error) as e:
        gradref.conv_backprop_data(w, d, terms="magnitudes", precision="high", **args)
    assert e.value.status_name == "GRADREF_ERR_PARAM"
    with pytest.raises(ValueError):
        gradref.conv_backprop_data(w, d, terms="sums", **args)
    from gradref import _args, _lib
    src = np.ones(4, np.float32)
    dst = np.zeros(4, np.float32)
    with pytest.raises(gradref.Error) as e:  # the data movers compute no terms
        _args.call("copy", _args.as_input(src, "src"), _args.as_output(dst, "out"),
                   _lib.Exec(None, 0, 1, _lib.TERM_MAGNITUDES))
    assert e.value.status_name == "GRADREF_ERR_PARAM" and (dst == 0).all()
    both = _lib.Exec(None, 0, 1, _lib.TERM_MAGNITUDES | _lib.TERM_COUNTS)
    with pytest.raises(gradref.Error):
        _args.call("copy", _args.as_input(src, "src"), _args.as_output(dst, "out"), both)


def test_recat_terms_have_the_output_shape():
    """recat moves values: the magnitude is |output| (its shape, not grad_output's) and no term
    rounds, so the bound is the output's subnormal half-spacing and the result meets it."""
    rng = np.random.default_rng(5)
    go = rng.uniform(-3, 3, (4, 9)).astype(np.float16)
    got = gradref.recat_embedding_grad_output_mixed_D(go, [2, 3, 4])
    gold = precision.f64(gradref.recat_embedding_grad_output_mixed_D, go, [2, 3, 4])
    mag, count = precision.terms("recat_embedding_grad_output_mixed_D", go, [2, 3, 4])
    assert mag.shape == got.shape and (count == 0).all()
    assert np.array_equal(mag, np.abs(gold))
    v = precision.check_bound(got, gold, precision.error_bound(gold, mag, count, "float16"))
    assert v.passed and v.metrics["largest error/bound"] == 0
    with pytest.raises(ValueError, match="terms exist for"):
        precision.terms("recat", go)



GS_MODES = [(i, p, a) for i in (0, 1) for p in (0, 1, 2) for a in (False, True)]


def gs_case(seed, dtype=np.float32, spread=1.2, n=1, c=3, size=(3, 4, 5), out=(2, 3, 2)):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c) + size).astype(dtype)
    grid = rng.uniform(-spread, spread, (n,) + out + (3,)).astype(dtype)
    go = rng.standard_normal((n, c) + out).astype(dtype)
    return go, x, grid


def _dgrid_magnitude(go, x, grid, align):
    """Σ over channels and in-range corners of |x| |g| times the two other axes' distances,
    times |the multiplier|: the trilinear dgrid's terms for zeros padding, in numpy."""
    go, x, grid = (a.astype(np.float64) for a in (go, x, grid))
    n, c, d, h, w = x.shape
    out = np.zeros(grid.shape)
    sizes = (w, h, d)
    for b in range(n):
        for p in np.ndindex(grid.shape[1:4]):
            i, mult = [], []
            for k in range(3):
                s = sizes[k]
                g = grid[(b,) + p + (k,)]
                i.append((g + 1) / 2 * (s - 1) if align else ((g + 1) * s - 1) / 2)
                mult.append((s - 1) / 2 if align else s / 2)
            lo = [int(np.floor(v)) for v in i]
            dist = [(lo[k] + 1 - i[k], i[k] - lo[k]) for k in range(3)]
            for corner in np.ndindex(2, 2, 2):  # (dz, dy, dx)
                z, y, xx = lo[2] + corner[0], lo[1] + corner[1], lo[0] + corner[2]
                if not (0 <= z < d and 0 <= y < h and 0 <= xx < w):
                    continue
                v = np.abs(x[b, :, z, y, xx] * go[(b, slice(None)) + p]).sum()
                wx, wy, wz = dist[0][corner[2]], dist[1][corner[1]], dist[2][corner[0]]
                out[(b,) + p] += v * np.array([wy * wz, wx * wz, wx * wy]) * np.array(mult)
    return out


def test_gs3d_terms_are_the_formulas():
    """dx's magnitude is the f64 operator on |grad_output| (its weights are >= 0), bit for bit;
    dgrid's is numpy's sum of |terms|; the counts add the terms' 5 roundings."""
    go, x, grid = gs_case(21)
    for align in (False, True):
        args = (0, 0, align)
        (dx_m, dg_m), (dx_n, dg_n) = precision.terms("grid_sampler3d_grad", go, x, grid, *args)
        assert dx_m.dtype == np.float64 and dg_n.dtype == np.float64
        want, _ = gradref.grid_sampler3d_grad(np.abs(go).astype(np.float64),
                                              x.astype(np.float64), grid.astype(np.float64),
                                              *args)
        assert np.array_equal(dx_m, want)
        np.testing.assert_allclose(dg_m, _dgrid_magnitude(go, x, grid, align), rtol=1e-12)
        assert set(np.unique(dx_n)) <= {0.0} | {float(k + 5) for k in range(1, 20)}
        assert set(np.unique(dg_n)) <= {0.0} | {float(3 * k + 5) for k in range(1, 9)}
    # one point inside, every corner in range: 8 voxels counted once (+5), dgrid 8 C + 5
    grid1 = np.full((1, 1, 1, 1, 3), 0.1, np.float32)
    (_, _), (dx_n, dg_n) = precision.terms("grid_sampler3d_grad", go[:, :, :1, :1, :1], x,
                                           grid1, 0, 0, False)
    assert (dx_n == 6).sum() == 8 * 3 and set(np.unique(dx_n)) == {0.0, 6.0}
    assert (dg_n == 8 * 3 + 5).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_gs3d_results_inside_the_bound(dtype):
    """gradref's own result, every mode and padding, grids in and far out of range: inside the
    bound with the coordinates' slack, and close to it somewhere (not vacuous)."""
    out = "float32" if dtype == np.float32 else "float16"
    tightest = 0.0
    for seed, (interp, pad, align) in enumerate(GS_MODES):
        for spread in (1.2, 3.0):
            go, x, grid = gs_case(100 + seed, dtype, spread)
            args = (go, x, grid, interp, pad, align)
            got = gradref.grid_sampler3d_grad(*args)
            gold = precision.f64(gradref.grid_sampler3d_grad, *args)
            mags, counts = precision.terms("grid_sampler3d_grad", *args)
            slack = precision.coordinate_slack(*args)
            for r, g, m, n, s in zip(got, gold, mags, counts, slack):
                b = precision.error_bound(g, m, n, out, slack=s)
                v = precision.check_bound(r, g, b)
                assert v.passed, (interp, pad, align, spread, v.report())
                tightest = max(tightest, v.metrics["largest error/bound"])
    assert tightest > 0.1


def test_gs3d_dx_in_any_order_inside_the_bound():
    """dx summed from its per-point contributions in random orders in float32 (each
    contribution rounded to float32 first) stays inside the bound without any slack."""
    go, x, grid = gs_case(31, out=(3, 3, 3))
    args = (0, 0, False)
    gold, _ = precision.f64(gradref.grid_sampler3d_grad, go, x, grid, *args)
    (mag, _), (count, _) = precision.terms("grid_sampler3d_grad", go, x, grid, *args)
    parts = []
    for p in np.ndindex(go.shape[2:]):  # each point's contributions alone, in f64
        one = np.zeros(go.shape, np.float64)
        one[(slice(None), slice(None)) + p] = go[(slice(None), slice(None)) + p]
        parts.append(gradref.grid_sampler3d_grad(one, x.astype(np.float64),
                                                 grid.astype(np.float64), *args)[0])
    parts = np.array(parts, np.float32)
    bound = precision.error_bound(gold, mag, count, "float32")
    rng = np.random.default_rng(3)
    for _ in range(20):
        acc = np.zeros(gold.shape, np.float32)
        for j in rng.permutation(len(parts)):
            acc = acc + parts[j]
        assert (np.abs(acc.astype(np.float64) - gold) <= bound).all()


def test_gs3d_bound_flags_a_border_gradient_bug():
    """Border padding: a point clipped on an axis has dgrid exactly 0 there (magnitude 0). A
    kernel that leaves 1e-6 there passes assert_close at torch's F32 tolerance; the bound
    flags every such element."""
    go, x, grid = gs_case(41, spread=3.0)
    args = (go, x, grid, 0, 1, False)
    gold = precision.f64(gradref.grid_sampler3d_grad, *args)[1]
    mag = precision.terms("grid_sampler3d_grad", *args)[0][1]
    count = precision.terms("grid_sampler3d_grad", *args)[1][1]
    slack = precision.coordinate_slack(*args)[1]
    clipped = np.abs(grid.astype(np.float64)) > 1.0
    assert clipped.any() and (mag[clipped] == 0).all()
    bug = gold.astype(np.float32)
    bug[clipped] = 1e-6
    np.testing.assert_allclose(bug, gold, rtol=1.3e-6, atol=1e-5)
    v = precision.check_bound(bug, gold, precision.error_bound(gold, mag, count, "float32",
                                                               slack=slack))
    assert v.metrics["past the bound"] == int(clipped.sum())


def test_c3f_any_order_and_gradref_inside_the_bound():
    """conv3d_backprop_filter: each dw element's products x dy summed in random float32 orders
    stay inside the bound, and so do gradref's own F32, F16 and HF32 results (HF32 with its
    inputs' rounding)."""
    rng = np.random.default_rng(13)
    n, c, o, w_in, k = 2, 2, 3, 12, 3
    x = rng.uniform(-1, 1, (n, c, 1, 1, w_in)).astype(np.float32)
    dy = rng.uniform(-1, 1, (n, o, 1, 1, w_in)).astype(np.float32)
    args = ((1, 1, k, c, o), dy)
    kw = dict(strides=1, padding="SAME", data_format="NCDHW")
    gold = precision.f64(gradref.conv3d_backprop_filter, x, *args, **kw)
    mag, count = precision.terms("conv3d_backprop_filter", x, dy, filter_sizes=args[0], **kw)
    bound = precision.error_bound(gold, mag, count, "float32")
    for kk in range(k):  # dw (kd, kh, kw, c, o): the products of tap kk
        for ci in range(c):
            for oi in range(o):
                t = [float(x[b, ci, 0, 0, p + kk - 1]) * float(dy[b, oi, 0, 0, p])
                     for b in range(n) for p in range(w_in) if 0 <= p + kk - 1 < w_in]
                assert count[0, 0, kk, ci, oi] == len(t)
                for _ in range(10):
                    got = _sum_in(rng.permutation(len(t)), t, np.float32)
                    assert abs(got - gold[0, 0, kk, ci, oi]) <= bound[0, 0, kk, ci, oi]
    for dt, prec, rounding in ((np.float32, None, None), (np.float16, None, None),
                               (np.float32, "hf32", "hf32")):
        xs, dys = x.astype(dt), dy.astype(dt)
        got = gradref.conv3d_backprop_filter(xs, args[0], dys, precision=prec, **kw)
        g = precision.f64(gradref.conv3d_backprop_filter, xs, args[0], dys, **kw)
        m, cnt = precision.terms("conv3d_backprop_filter", xs, dys, filter_sizes=args[0], **kw)
        b = precision.error_bound(g, m, cnt, np.dtype(got.dtype).name, input_rounding=rounding)
        v = precision.check_bound(got, g, b)
        assert v.passed, (dt, prec, v.report())


def test_the_worked_examples_run():
    """docs/precision.md's worked examples, one per operator, run as written."""
    import os
    import re
    doc = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "precision.md")
    text = open(doc).read().split("## One worked example per operator", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 5
    scope = {}
    for code in blocks:
        exec(compile(code, "precision.md", "exec"), scope)
