# SPDX-License-Identifier: Apache-2.0
"""Each dialect follows its upstream's argument rules (TensorFlow, aten, MegEngine, FBGEMM,
CANN), where an audit found gradref accepting what the upstream refuses or the reverse, and
multiplies the padding's zeros as its upstream does."""
import numpy as np
import pytest

import gradref


def test_padded_zeros_in_the_dialects():
    """dy NaN at a corner with pads (0, 1, 1): aten, TF and CANN give dW all NaN (0 * NaN from
    the zero-filled input); gradref's own default skips the padding (5 finite entries)."""
    x = np.ones((1, 1, 1, 3, 3), np.float32)
    dy = np.zeros((1, 1, 1, 3, 3), np.float32)
    dy[..., 0, 0] = np.nan
    own = gradref.conv3d_backprop_filter(x, [1, 3, 3, 1, 1], dy, [1] * 5, [(0, 0), (1, 1), (1, 1)],
                                         "NCDHW")
    assert np.isfinite(own).sum() == 5
    flagged = gradref.conv3d_backprop_filter(x, [1, 3, 3, 1, 1], dy, [1] * 5,
                                             [(0, 0), (1, 1), (1, 1)], "NCDHW",
                                             padded_zeros=True)
    assert np.isnan(flagged).all()
    _, gw, _ = gradref.torch.convolution_backward(dy, x, np.zeros((1, 1, 1, 3, 3), np.float32),
                                                  None, [1, 1, 1], [0, 1, 1], [1, 1, 1], False,
                                                  [0, 0, 0], 1, [False, True, False])
    assert np.isnan(gw).all()
    y = gradref.cann.conv3d_backprop_filter_v2(x, [1, 1, 1, 3, 3], dy, [1] * 5, [0, 0, 1, 1, 1, 1],
                                               data_format="NCDHW", y_format="NCDHW")
    assert np.isnan(y).all()
    xt, dyt = x.transpose(0, 2, 3, 4, 1), dy.transpose(0, 2, 3, 4, 1)
    tf_dw = gradref.tf.conv3d_backprop_filter_v2(xt, [1, 3, 3, 1, 1], dyt, [1] * 5, "SAME")
    assert np.isnan(tf_dw).all()


def test_tf_out_backprop_size_message():
    """P18: an out_backprop whose spatial size input_sizes does not give is TF's error, naming
    input_sizes' terms (ConvBackpropExtractAndVerifyDimension), not the C layer's grad_shape."""
    f = np.ones((3, 3, 4, 5), np.float32)
    dy = np.ones((2, 6, 7, 5), np.float32)
    with pytest.raises(ValueError, match="Size of out_backprop doesn't match computed: actual = "
                                         "6, computed = 7 spatial_dim: 1 input: 9 filter: 3"):
        gradref.tf.conv2d_backprop_input([2, 9, 7, 4], f, dy, [1] * 4, "VALID")
    with pytest.raises(ValueError, match="actual = 6, computed = 3 spatial_dim: 2 input: 6"):
        gradref.tf.conv2d_backprop_input([2, 4, 6, 7], np.ones((3, 3, 4, 5), np.float32),
                                         np.ones((2, 5, 6, 7), np.float32), [1, 1, 2, 2], "SAME",
                                         data_format="NCHW")


def test_upstream_argument_rules():
    """Each dialect accepts what its upstream accepts and refuses what it refuses (the audit's
    P3-P9, P16, P17): TF's strides/dilations, input_sizes, explicit_paddings and empty windows;
    MegEngine's compute_mode and blocked formats, and its QuantizedS32 grad; FBGEMM's empty
    call."""
    x = np.ones((1, 3, 3, 3, 2), np.float32)
    d = np.ones((1, 1, 1, 1, 4), np.float32)
    for strides in ([2, 1, 1, 1, 1], [1, 1, 1, 1, 7], [1, 1, 1]):
        with pytest.raises(ValueError, match="strides"):
            gradref.tf.conv3d_backprop_filter_v2(x, [3, 3, 3, 2, 4], d, strides, "VALID")
    with pytest.raises(ValueError, match="dilations"):
        gradref.tf.conv3d_backprop_filter_v2(x, [3, 3, 3, 2, 4], d, [1] * 5, "VALID",
                                             dilations=[3, 1, 1, 1, 1])
    f = np.ones((3, 3, 2, 4), np.float32)
    dy = np.ones((2, 1, 1, 4), np.float32)
    with pytest.raises(ValueError, match="same batch size"):
        gradref.tf.conv2d_backprop_input([3, 3, 3, 2], f, dy, [1] * 4, "VALID")
    with pytest.raises(ValueError, match="same out_depth"):
        gradref.tf.conv2d_backprop_input([2, 3, 3, 2], f, dy[..., :3], [1] * 4, "VALID")
    full = gradref.tf.conv2d_backprop_input([2, 3, 3, 2], f, dy, [1] * 4, "VALID")
    np.testing.assert_array_equal(gradref.tf.conv2d_backprop_input([3, 3], f, dy, [1] * 4,
                                                                   "VALID"), full)
    with pytest.raises(ValueError, match="must be empty"):
        gradref.tf.conv2d_backprop_input([2, 3, 3, 2], f, dy, [1] * 4, "VALID",
                                         explicit_paddings=[0] * 8)
    with pytest.raises(ValueError, match="batch or depth"):
        gradref.tf.conv2d_backprop_input([2, 3, 3, 2], f, dy, [1] * 4, "EXPLICIT",
                                         explicit_paddings=[0, 0, 0, 0, 0, 0, 1, 0])
    empty = gradref.tf.conv2d_backprop_input([1, 2, 2, 2], f, np.ones((1, 0, 0, 4), np.float32),
                                             [1] * 4, "VALID")  # input smaller than the kernel
    assert empty.shape == (1, 2, 2, 2) and not empty.any()
    w = np.ones((4, 4, 3, 3), np.float32)
    diff = np.ones((1, 4, 3, 3), np.float32)
    with pytest.raises(ValueError, match="FLOAT32"):
        gradref.megengine.convolution_backward_data(w, diff, compute_mode="FLOAT32")
    wi, di = np.ones((4, 4, 3, 3), np.int8), np.ones((1, 4, 3, 3), np.int8)
    s32 = gradref.megengine.convolution_backward_data(wi, di, qs8_scales=(0.5, 0.25))
    assert s32.dtype == np.int32
    np.testing.assert_array_equal(s32, gradref.megengine.convolution_backward_data(wi, di))
    w4, d4 = np.ones((4, 1, 3, 3, 4), np.float32), np.ones((1, 1, 3, 3, 4), np.float32)
    with pytest.raises(ValueError, match="dilation 1"):
        gradref.megengine.convolution_backward_data(w4, d4, dilate_h=2, format="NCHW4")
    w5, d5 = np.ones((1, 3, 3, 4, 4), np.float32), np.ones((1, 3, 1, 3, 4), np.float32)
    with pytest.raises(ValueError, match="CROSS_CORRELATION"):
        gradref.megengine.convolution_backward_data(w5, d5, mode="CONVOLUTION", format="NHWCD4")
    out = gradref.fbgemm.recat_embedding_grad_output_mixed_D(np.ones((0, 0), np.float32), [])
    assert out.shape == (0,) and out.dtype == np.float32
