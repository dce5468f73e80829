# SPDX-License-Identifier: Apache-2.0
"""Every out=/y=/grad= array is checked against what the C call writes: its shape, its dtype and,
where the package rebuilds the descriptor from the array's memory (CANN's y, MegEngine's blocked
grad), its strides. Each output sits inside a larger buffer whose guard elements must stay
untouched, so a write past the array fails the test even without a sanitizer."""
import numpy as np
import pytest

import gradref

GUARD = 64


def guarded(shape, dtype=np.float32, fill=7.0):
    """(buffer, view): a view of `shape` with GUARD elements of `fill` on either side."""
    size = int(np.prod(shape))
    buf = np.full(size + 2 * GUARD, fill, dtype)
    return buf, buf[GUARD:GUARD + size].reshape(shape)


def guards_intact(buf, fill=7.0):
    return bool(np.all(buf[:GUARD] == fill) and np.all(buf[-GUARD:] == fill))


def cann_inputs():
    x = np.ones((1, 4, 6, 6, 4), np.float32)
    dy = np.ones((1, 4, 6, 6, 8), np.float32)
    return x, dy


def test_cann_y_smaller_than_filter_size_is_refused():
    x, dy = cann_inputs()
    buf, y = guarded((8, 3, 3, 3, 2))  # filter_size wants (8, 3, 3, 3, 4)
    with pytest.raises(gradref.Error, match="out y has shape"):
        gradref.cann.conv3d_backprop_filter_v2(x, [8, 3, 3, 3, 4], dy, [1] * 5, [1] * 6,
                                               y_format="NDHWC", y=y)
    assert guards_intact(buf) and np.all(y == 7.0)


def test_cann_y_of_another_shape_or_layout_is_refused():
    x, dy = cann_inputs()
    with pytest.raises(gradref.Error, match="out y has shape"):  # same size, another shape
        gradref.cann.conv3d_backprop_filter_v2(x, [8, 3, 3, 3, 4], dy, [1] * 5, [1] * 6,
                                               y_format="NDHWC", y=np.zeros((4, 3, 3, 3, 8),
                                                                             np.float32))
    strided = np.zeros((8, 3, 3, 3, 8), np.float32)[..., ::2]
    with pytest.raises(gradref.Error, match="dense"):
        gradref.cann.conv3d_backprop_filter_v2(x, [8, 3, 3, 3, 4], dy, [1] * 5, [1] * 6,
                                               y_format="NDHWC", y=strided)
    with pytest.raises(gradref.Error, match="float32"):
        gradref.cann.conv3d_backprop_filter_v2(x, [8, 3, 3, 3, 4], dy, [1] * 5, [1] * 6,
                                               y_format="NDHWC",
                                               y=np.zeros((8, 3, 3, 3, 4), np.float16))


def test_cann_y_that_fits_is_written_in_place():
    x, dy = cann_inputs()
    buf, y = guarded((8, 3, 3, 3, 4))
    want = gradref.cann.conv3d_backprop_filter_v2(x, [8, 3, 3, 3, 4], dy, [1] * 5, [1] * 6,
                                                  y_format="NDHWC")
    got = gradref.cann.conv3d_backprop_filter_v2(x, [8, 3, 3, 3, 4], dy, [1] * 5, [1] * 6,
                                                 y_format="NDHWC", y=y)
    assert got is y and guards_intact(buf)
    np.testing.assert_array_equal(y, want)


def blocked_case():
    w = np.ones((4, 1, 3, 3, 4), np.float32)
    d = np.ones((1, 1, 3, 3, 4), np.float32)
    return w, d


def test_megengine_blocked_grad_too_small_is_refused():
    w, d = blocked_case()
    for call in (lambda g: gradref.megengine.convolution_backward_data(
            w, d, g, stride_h=2, stride_w=2, format="NCHW4"),
            lambda g: gradref.conv_backprop_data(w, d, format="NCHW4", stride=2, out=g)):
        buf, small = guarded((1, 1, 5, 5, 4))
        with pytest.raises(gradref.Error):
            call(small)
        assert guards_intact(buf) and np.all(small == 7.0)


def test_megengine_blocked_grad_larger_valid_shape_takes_its_size():
    """Stride 2 leaves grad 7x7 or 8x8: an 8x8 grad is computed at 8x8, as the plain call's."""
    w, d = blocked_case()
    buf, g = guarded((1, 1, 8, 8, 4), fill=np.nan)
    gradref.megengine.convolution_backward_data(w, d, g, stride_h=2, stride_w=2, format="NCHW4")
    assert np.all(np.isnan(buf[:GUARD])) and np.all(np.isnan(buf[-GUARD:]))
    plain = gradref.conv_backprop_data(np.ascontiguousarray(w.transpose(0, 4, 2, 3, 1)
                                                            .reshape(4, 4, 3, 3)),
                                       np.ascontiguousarray(d.transpose(0, 1, 4, 2, 3)
                                                            .reshape(1, 4, 3, 3)),
                                       stride=2, grad_shape=(8, 8))
    np.testing.assert_array_equal(g.transpose(0, 1, 4, 2, 3).reshape(1, 4, 8, 8), plain)


def test_megengine_nhwcd4_grad_checked_too():
    w = np.ones((1, 3, 3, 4, 4), np.float32)  # NHWCD4 dense filter (OC/4, FH, FW, IC, 4)
    d = np.ones((1, 3, 1, 3, 4), np.float32)
    buf, g = guarded((1, 5, 1, 5, 4))
    want = gradref.conv_backprop_data(w, d, format="NHWCD4")
    gradref.conv_backprop_data(w, d, format="NHWCD4", out=g)
    assert guards_intact(buf)
    np.testing.assert_array_equal(g, want)
    buf, wrong = guarded((1, 5, 5, 1, 4))  # NCHW4's order
    with pytest.raises(gradref.Error):
        gradref.conv_backprop_data(w, d, format="NHWCD4", out=wrong)
    assert guards_intact(buf)


@pytest.mark.parametrize("op", ["gs3d", "rope", "recat", "cbd", "c3f"])
def test_plain_outputs_of_a_wrong_shape_or_dtype_are_refused(op):
    rng = np.random.default_rng(3)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    calls = {
        "gs3d": (lambda out: gradref.grid_sampler3d_grad(
            f32(1, 2, 2, 2, 2), f32(1, 2, 3, 3, 3), f32(1, 2, 2, 2, 3), "bilinear", "zeros",
            False, out=(out, None)), (1, 2, 3, 3, 3)),
        "rope": (lambda out: gradref.rope_grad(f32(3, 8), f32(3, 8), f32(4, 8), f32(4, 8), [3],
                                               "half", out=(out, None)), (3, 8)),
        "recat": (lambda out: gradref.recat_embedding_grad_output_mixed_D(
            f32(2, 5), [2, 3], out=out), (10,)),
        "cbd": (lambda out: gradref.conv_backprop_data(f32(2, 3, 3, 3), f32(1, 2, 4, 4),
                                                       out=out), (1, 3, 6, 6)),
        "c3f": (lambda out: gradref.conv3d_backprop_filter(
            f32(1, 3, 3, 3, 2), [2, 2, 2, 2, 2], f32(1, 2, 2, 2, 2), [1] * 5, "VALID",
            "NDHWC", out=out), (2, 2, 2, 2, 2)),
    }
    call, shape = calls[op]
    good = np.zeros(shape, np.float32)
    call(good)
    bad_shape = (shape[0] + 1,) + tuple(shape[1:])
    with pytest.raises(gradref.Error, match="has shape"):
        call(np.zeros(bad_shape, np.float32))
    with pytest.raises(gradref.Error, match="float64"):
        call(np.zeros(shape, np.float64))


def test_out_dtype_and_out_array_must_agree():
    f = np.ones((2, 3, 3, 3), np.float16)
    d = np.ones((1, 2, 4, 4), np.float16)
    out32 = np.zeros((1, 3, 6, 6), np.float32)
    gradref.conv_backprop_data(f, d, out=out32)  # an F32 grad of F16 inputs
    assert np.all(out32 == gradref.conv_backprop_data(f, d, out_dtype="float32"))
    with pytest.raises(gradref.Error, match="float16"):
        gradref.conv_backprop_data(f, d, out_dtype="float16", out=out32)

