# SPDX-License-Identifier: Apache-2.0
"""gradref.testing: assert_close's defaults and report, NaN/Inf matching, ulp_distance."""
import numpy as np
import pytest

from gradref import testing
from conftest import torch


def test_assert_close_report():
    golden = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    actual = golden.copy()
    actual[1, 2] = 6.5
    actual[0, 1] = 2.00001
    with pytest.raises(AssertionError) as e:
        testing.assert_close(actual, golden)
    text = str(e.value)
    assert "mismatched elements: 1 / 6 (16.67%)" in text
    assert "greatest absolute difference: 0.5 at index (1, 2)" in text
    assert "greatest relative difference: 0.0833" in text
    assert "actual[(1, 2)] = 6.5, golden[(1, 2)] = 6.0" in text
    assert "rtol=1.3e-06 atol=1e-05 (golden dtype float32" in text
    testing.assert_close(actual, golden, rtol=0.1)


def test_defaults_per_dtype_and_integers():
    g = np.array([1.0, 100.0], np.float16)
    testing.assert_close(np.array([1.0, 100.0625], np.float16), g)  # within rtol 1e-3
    with pytest.raises(AssertionError):
        testing.assert_close(g * np.float16(1.01), g)
    with pytest.raises(AssertionError):
        testing.assert_close(np.array([1, 2]), np.array([1, 3]))
    testing.assert_close(np.array([1, 2], np.int32), np.array([1, 2], np.int64))
    bits = np.array([0x3f80, 0x4000], np.uint16)      # bf16 1.0, 2.0
    testing.assert_close(bits, np.array([1.0, 2.0], np.float32), dtype="bf16", rtol=0, atol=0)


def test_nan_and_inf_matching():
    g = np.array([np.nan, np.inf, -np.inf, 1.0])
    testing.assert_close(g.copy(), g)
    for bad in ([1.0, np.inf, -np.inf, 1.0], [np.nan, -np.inf, -np.inf, 1.0],
                [np.nan, np.inf, -np.inf, np.nan]):
        with pytest.raises(AssertionError):
            testing.assert_close(np.array(bad), g)
    with pytest.raises(AssertionError):
        testing.assert_close(g.copy(), g, equal_nan=False)


def test_shape_mismatch():
    with pytest.raises(AssertionError, match="shapes differ"):
        testing.assert_close(np.zeros(3), np.zeros(4))


def test_ulp_distance():
    one = np.float32(1.0)
    nxt = np.nextafter(one, np.float32(2))
    assert testing.ulp_distance(np.array([nxt]), np.array([one])).tolist() == [1]
    assert testing.ulp_distance(np.array([-0.0], np.float32), np.array([0.0], np.float32)).tolist() == [1]
    assert testing.ulp_distance(np.array([-1e-45], np.float32),
                                np.array([1e-45], np.float32)).tolist() == [3]
    assert testing.ulp_distance(np.array([np.nan]), np.array([1.0])).tolist() == [-1]
    h = np.array([1.0, 1000.0], np.float16)
    assert testing.ulp_distance(h, np.nextafter(h, np.float16(np.inf))).tolist() == [1, 1]
    d = np.array([-2.0, 3.0])
    assert testing.ulp_distance(d, d).tolist() == [0, 0]
    assert testing.ulp_distance(np.array([0x3f80], np.uint16), np.array([0x3f82], np.uint16),
                                dtype="bf16").tolist() == [2]
    with pytest.raises(TypeError):
        testing.ulp_distance(np.zeros(2, np.float32), np.zeros(2, np.float64))


def test_torch_tensors():
    if torch is None:
        pytest.skip("python3-torch is not installed")
    a = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    testing.assert_close(a, a.clone())
    b = a.clone()
    b[1] = 2.5
    with pytest.raises(AssertionError, match="golden dtype bfloat16"):
        testing.assert_close(b, a)
    assert testing.ulp_distance(a, b).tolist() == [0, 32]
