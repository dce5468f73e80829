# SPDX-License-Identifier: Apache-2.0
"""Properties over random problems (hypothesis): recat equals numpy's split-and-concatenate on
any layout and dtype; results do not depend on the layout of the inputs or the thread count."""
import numpy as np
import pytest

import gradref
from conftest import same_bits

hypothesis = pytest.importorskip("hypothesis", reason="python3-hypothesis is not installed")
from hypothesis import given, settings, strategies as st  # noqa: E402

DTYPES = ["float32", "float64", "float16", "int8", "int32", "int64"]


@st.composite
def recat_problem(draw):
    B = draw(st.integers(0, 6))
    split = draw(st.lists(st.integers(0, 5), min_size=1, max_size=5))
    dtype = draw(st.sampled_from(DTYPES))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    transpose = draw(st.booleans())
    return B, split, dtype, seed, transpose


@settings(max_examples=150, deadline=None)
@given(recat_problem())
def test_recat_is_split_and_concatenate(problem):
    B, split, dtype, seed, transpose = problem
    width = sum(split)
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=B * width * np.dtype(dtype).itemsize, dtype=np.uint8)
    go = raw.view(dtype).reshape(B, width)
    if transpose:  # the same values stored column-major
        go = np.ascontiguousarray(go.T).T
    want = np.concatenate([go[:, c:c + d].ravel() for c, d in
                           zip(np.cumsum([0] + split[:-1]), split)] + [np.zeros(0, dtype)])
    same_bits(gradref.recat_embedding_grad_output_mixed_D(go, split), want)


@st.composite
def rope_problem(draw):
    D = draw(st.sampled_from([2, 4, 8, 16, 64]))
    lens = draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    starts = [draw(st.integers(0, 3)) for _ in lens]
    heads = draw(st.integers(1, 3))
    mode = draw(st.sampled_from(["atb", "half", "interleaved"]))
    dtype = draw(st.sampled_from(["float32", "float64", "float16"]))
    return D, lens, starts, heads, mode, dtype, draw(st.integers(0, 2 ** 32 - 1))


@settings(max_examples=80, deadline=None)
@given(rope_problem())
def test_rope_layout_and_thread_invariance(problem):
    D, lens, starts, heads, mode, dtype, seed = problem
    rng = np.random.default_rng(seed)
    T, S = sum(lens), max(s + n for s, n in zip(starts, lens))
    q = rng.standard_normal((T, heads * D)).astype(dtype)
    k = rng.standard_normal((T, D)).astype(dtype)
    c = rng.random((S, D)).astype(dtype)
    s = rng.random((S, D)).astype(dtype)
    a = gradref.rope_grad(q, k, c, s, lens, mode, start_positions=starts, threads=1)
    qt = np.ascontiguousarray(q.T).T
    padded = np.zeros((S + 2, D + 3), dtype)
    padded[:S, :D] = c
    b = gradref.rope_grad(qt, k, padded[:S, :D], s, lens, mode, start_positions=starts, threads=3)
    same_bits(a[0], b[0])
    same_bits(a[1], b[1])
