# SPDX-License-Identifier: Apache-2.0
"""bfloat16 numpy dtypes (ml_dtypes and compatibles, recognised by name: a stand-in here, the
real ml_dtypes in tests/conformance/test_ml_dtypes.py), HF32 goldens in one call
(round_output=True) and hf32_round in the kind that came in."""
import numpy as np
import pytest

import gradref
from gradref.testing import hf32_round

try:
    import torch
except ImportError:  # pragma: no cover - CI installs python3-torch
    torch = None

class _BFloat16Name:
    """What gradref reads of ml_dtypes.bfloat16's numpy dtype: its name and size."""
    name = "bfloat16"
    itemsize = 2
    isnative = True
    str = "<V2"


_BFLOAT16 = _BFloat16Name()  # one object, as an extension dtype is


class BFloat16Array(np.ndarray):
    """A uint16 buffer whose dtype says bfloat16, as an extension dtype's array does."""

    @property
    def dtype(self):
        return _BFLOAT16


def as_named_bf16(bits):
    return np.ascontiguousarray(bits, dtype=np.uint16).view(BFloat16Array)


def test_bfloat16_named_dtype_reads_as_bf16():
    rng = np.random.default_rng(3)
    bits = (rng.integers(0, 1 << 16, size=(4, 6, 8)).astype(np.uint16) & 0x7f7f) | 0x3f00
    want = gradref.recat_embedding_grad_output(bits, [2, 4], dtype="bf16")
    assert want.dtype == np.uint16
    out = as_named_bf16(np.zeros(want.shape, np.uint16))
    got = gradref.recat_embedding_grad_output(as_named_bf16(bits), [2, 4], out=out)
    assert got is out
    np.testing.assert_array_equal(np.asarray(out).view(np.uint16), want)


def conv3d_case(rng):
    x = rng.standard_normal((2, 4, 5, 6, 3)).astype(np.float32)
    dy = rng.standard_normal((2, 3, 4, 5, 2)).astype(np.float32)
    return x, dy


@pytest.mark.parametrize("precision,kept", [("hf32", 10), ("hf32_910b", 11)])
def test_round_output_is_the_golden_in_one_call(precision, kept):
    x, dy = conv3d_case(np.random.default_rng(5))
    args = (x, [2, 2, 2, 3, 2], dy, [1, 1, 1, 1, 1], "VALID", "NDHWC")
    plain = gradref.conv3d_backprop_filter(*args, precision=precision)
    rounded = gradref.conv3d_backprop_filter(*args, precision=precision, round_output=True)
    np.testing.assert_array_equal(rounded.view(np.uint32), hf32_round(plain, kept).view(np.uint32))
    assert (rounded.view(np.uint32) & np.uint32((1 << (23 - kept)) - 1) == 0).all()
    if torch is not None:
        tr = gradref.conv3d_backprop_filter(torch.from_numpy(x), [2, 2, 2, 3, 2],
                                            torch.from_numpy(dy), [1, 1, 1, 1, 1], "VALID", "NDHWC",
                                            precision=precision, round_output=True)
        assert isinstance(tr, torch.Tensor)
        np.testing.assert_array_equal(tr.numpy().view(np.uint32), rounded.view(np.uint32))


def test_round_output_needs_an_hf32_precision():
    x, dy = conv3d_case(np.random.default_rng(6))
    with pytest.raises(ValueError, match="round_output"):
        gradref.conv3d_backprop_filter(x, [2, 2, 2, 3, 2], dy, [1, 1, 1, 1, 1], "VALID", "NDHWC",
                                       round_output=True)


@pytest.mark.skipif(torch is None, reason="python3-torch is not installed")
def test_hf32_round_keeps_the_kind():
    a = np.array([1.0, 1.0 + 2 ** -11, -3.5e-3, np.inf], np.float32)
    want = hf32_round(a)
    got = hf32_round(torch.from_numpy(a))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    np.testing.assert_array_equal(got.numpy().view(np.uint32), want.view(np.uint32))
    out = torch.zeros(4)
    assert hf32_round(a, out=out) is out
    np.testing.assert_array_equal(out.numpy().view(np.uint32), want.view(np.uint32))
