# SPDX-License-Identifier: Apache-2.0
"""gradref as the golden of a kernel test, the way an NPU/GPU kernel author writes one: run
the operator on the device (here a numpy stand-in computed in float16 arithmetic), run the
same call through gradref, compare with gradref.testing.assert_close.

    PYTHONPATH=python GRADREF_LIBRARY=build/libgradref.so python3 examples/golden_test.py
"""
import numpy as np

import gradref


def device_rope_grad_atb(q, k, cos, sin, seq_len):
    """A stand-in for ATB's RopeGrad kernel: w = cos + (sin's halves swapped, one negated),
    every operation in float16 as the device does it."""
    h = cos.shape[1] // 2
    w = cos + np.concatenate([sin[:, h:], -sin[:, :h]], axis=1)
    pos = np.concatenate([np.arange(n) for n in seq_len])
    reps = q.shape[1] // cos.shape[1]
    return q * np.tile(w[pos], reps), k * np.tile(w[pos], reps)


def main():
    rng = np.random.default_rng(0)
    seq_len = [3, 5]                                    # ATB's qSeqLen
    q = rng.standard_normal((8, 256)).astype(np.float16)
    k = rng.standard_normal((8, 256)).astype(np.float16)
    cos = rng.random((5, 128)).astype(np.float16)
    sin = rng.random((5, 128)).astype(np.float16)

    golden_q, golden_k = gradref.rope_grad(q, k, cos, sin, seq_len, "atb")
    device_q, device_k = device_rope_grad_atb(q, k, cos, sin, seq_len)
    gradref.testing.assert_close(device_q, golden_q, rtol=0, atol=0)  # ATB mode is bit-exact
    gradref.testing.assert_close(device_k, golden_k, rtol=0, atol=0)
    print("rope_grad (ATB, f16, head 128): the device result equals the golden bit for bit")

    # a kernel with a bug in one element: the report says where and by how much
    device_q[5, 17] += np.float16(0.25)
    try:
        gradref.testing.assert_close(device_q, golden_q)
    except AssertionError as e:
        print("a wrong element is reported:\n" + str(e))
    else:
        raise SystemExit("the wrong element was not found")

    # FBGEMM's recat example; a bad split is a gradref.Error with the library's message
    go = np.arange(1, 11, dtype=np.float32).reshape(2, 5)
    print("recat:", gradref.recat_embedding_grad_output_mixed_D(go, [2, 3]).tolist())
    try:
        gradref.recat_embedding_grad_output_mixed_D(go, [2, 4])
    except gradref.Error as e:
        print("bad split ->", e.status_name, ":", e.message)
    print("python golden example: OK (gradref %s from %s)" % (gradref.version(),
                                                             gradref.library_path()))


if __name__ == "__main__":
    main()
