# SPDX-License-Identifier: Apache-2.0
"""The Python package with the real ml_dtypes.bfloat16 (a PyPI package, not Debian's: run by
scripts/conformance.sh in its environment; python/tests holds the stand-in's tests)."""
import ml_dtypes
import numpy as np

import gradref


def test_ml_dtypes_bfloat16_in_and_out():
    rng = np.random.default_rng(4)
    t, h, d = 5, 16, 8
    q = rng.standard_normal((t, h)).astype(ml_dtypes.bfloat16)
    k = rng.standard_normal((t, h)).astype(ml_dtypes.bfloat16)
    c = rng.standard_normal((t, d)).astype(ml_dtypes.bfloat16)
    s = rng.standard_normal((t, d)).astype(ml_dtypes.bfloat16)
    dq, dk = gradref.rope_grad(q, k, c, s, [t], "atb", head_dim=d)
    assert dq.dtype == q.dtype and dk.dtype == q.dtype
    bits = [a.view(np.uint16) for a in (q, k, c, s)]
    wq, wk = gradref.rope_grad(*bits, [t], "atb", head_dim=d, dtype="bf16")
    np.testing.assert_array_equal(dq.view(np.uint16), wq)
    np.testing.assert_array_equal(dk.view(np.uint16), wk)
