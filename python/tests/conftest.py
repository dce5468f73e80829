# SPDX-License-Identifier: Apache-2.0
"""Shared helpers: the committed PyTorch fixtures, array kinds (numpy, torch), layouts."""
import os

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "golden")

try:
    import torch
except ImportError:  # pragma: no cover - CI installs python3-torch
    torch = None

KINDS = ["numpy", pytest.param("torch", marks=pytest.mark.skipif(
    torch is None, reason="python3-torch is not installed: the torch paths are not tested"))]

BITS = {"f32": (np.float32, np.uint32), "f64": (np.float64, np.uint64),
        "f16": (np.float16, np.uint16), "bf16": (np.uint16, np.uint16)}


def load_fixtures(name):
    """The records of tests/golden/<name>.txt as dicts of strings (see generate.py)."""
    cases, cur = [], None
    with open(os.path.join(GOLDEN, name + ".txt")) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, _, rest = line.partition(" ")
            if key == "case":
                cur = {"name": rest}
            elif key == "end":
                cases.append(cur)
            else:
                cur[key] = rest
    return cases


def ints(text):
    return [int(v) for v in text.split()]


def bits_array(text, dtype_name, shape):
    """An array of the fixture's dtype (bf16 as uint16 bits) from its hex element bits."""
    value_type, bit_type = BITS[dtype_name]
    raw = np.array([int(v, 16) for v in text.split()], dtype=np.uint64).astype(bit_type)
    return raw.view(value_type).reshape(shape)


def to_kind(a, kind, bf16=False):
    """a (numpy) as the given kind: numpy unchanged, torch a CPU tensor (bf16 bits as
    torch.bfloat16)."""
    if kind == "numpy":
        return a
    t = torch.from_numpy(a.view(np.int16) if bf16 else a)  # keeps a's strides
    return t.view(torch.bfloat16) if bf16 else t


def to_numpy(x, bf16=False):
    if torch is not None and isinstance(x, torch.Tensor):
        if x.dtype == torch.bfloat16:
            return x.view(torch.int16).numpy().view(np.uint16)
        return x.numpy()
    return x


def same_bits(a, b):
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    assert a.tobytes() == b.tobytes()


def strided_view(a, rng, kind="sliced"):
    """The same values as a in another layout: a transposed copy viewed back ("transposed"),
    or a padded buffer sliced ("sliced")."""
    if kind == "transposed":
        perm = rng.permutation(a.ndim)
        inverse = np.argsort(perm)
        return np.ascontiguousarray(a.transpose(perm)).transpose(inverse)
    pad = [(0, int(rng.integers(0, 3))) for _ in range(a.ndim)]
    big = np.zeros([s + p[1] for s, p in zip(a.shape, pad)], dtype=a.dtype)
    view = big[tuple(slice(0, s) for s in a.shape)]
    view[...] = a
    return view
