# SPDX-License-Identifier: Apache-2.0
"""FBGEMM's CPU recat ops (fbgemm-gpu-cpu) against gradref.fbgemm: data movers, so the
results must have the same bits."""
import numpy as np

import gradref
import harness
from harness import Pair, refusal

import torch
import fbgemm_gpu  # noqa: F401  (registers torch.ops.fbgemm)

torch.set_num_threads(2)
DTYPES = ["float32", "float16"]


def gen_mixed(rng):
    ranks = int(rng.integers(1, 5))
    return {"b": int(rng.integers(0, 6)), "dims": [int(v) for v in rng.integers(0, 9, ranks)],
            "seed": int(rng.integers(1 << 31))}


def gen_features(rng):
    ranks = int(rng.integers(1, 5))
    return {"b": int(rng.integers(0, 5)), "features": [int(v) for v in
                                                       rng.integers(0, 4, ranks)],
            "d": int(rng.integers(1, 9)), "seed": int(rng.integers(1 << 31))}


def inputs(case, dtype):
    rng = np.random.default_rng(case["seed"])
    shape = [case["b"], sum(case["dims"])] if "dims" in case else \
        [case["b"], sum(case["features"]), case["d"]]
    return {"g": harness.cast(rng.standard_normal(shape), dtype)}


def _call(fn, *args):
    try:
        r = fn(*args)
    except (gradref.Error, RuntimeError, ValueError, TypeError) as e:
        raise refusal(e)
    return [r.numpy() if isinstance(r, torch.Tensor) else r]


def _cumsum(dims):
    return torch.tensor(np.cumsum([0] + dims)[:-1], dtype=torch.int64)


PAIRS = [
    Pair("recat", "fbgemm-gpu-cpu", "torch.ops.fbgemm.recat_embedding_grad_output_mixed_D",
         "gradref.fbgemm.recat_embedding_grad_output_mixed_D", DTYPES, gen_mixed, inputs,
         lambda c, a: _call(gradref.fbgemm.recat_embedding_grad_output_mixed_D, a["g"],
                            c["dims"]),
         lambda c, a: _call(torch.ops.fbgemm.recat_embedding_grad_output_mixed_D,
                            torch.from_numpy(a["g"]), c["dims"]),
         lambda c, a: None, strided=False),
    Pair("recat", "fbgemm-gpu-cpu", "torch.ops.fbgemm.recat_embedding_grad_output_mixed_D_batch",
         "gradref.fbgemm.recat_embedding_grad_output_mixed_D_batch", DTYPES, gen_mixed, inputs,
         lambda c, a: _call(gradref.fbgemm.recat_embedding_grad_output_mixed_D_batch, a["g"],
                            np.array(c["dims"], np.int64),
                            np.cumsum([0] + c["dims"])[:-1].astype(np.int64)),
         lambda c, a: _call(torch.ops.fbgemm.recat_embedding_grad_output_mixed_D_batch,
                            torch.from_numpy(a["g"]), torch.tensor(c["dims"], dtype=torch.int64),
                            _cumsum(c["dims"])),
         lambda c, a: None, strided=False),
    Pair("recat", "fbgemm-gpu-cpu", "torch.ops.fbgemm.recat_embedding_grad_output",
         "gradref.fbgemm.recat_embedding_grad_output", DTYPES, gen_features, inputs,
         lambda c, a: _call(gradref.fbgemm.recat_embedding_grad_output, a["g"],
                            c["features"]),
         lambda c, a: _call(torch.ops.fbgemm.recat_embedding_grad_output,
                            torch.from_numpy(a["g"]), c["features"]),
         lambda c, a: None, strided=False),
]
