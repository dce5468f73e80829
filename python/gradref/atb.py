# SPDX-License-Identifier: Apache-2.0
"""Huawei ATB's RopeGrad in ATB's own call (hicann/ascend-transformer-boost, read at ddcc8b622:
include/atb/train_op_params.h `struct RopeGradParam { std::vector<int32_t> qSeqLen; ... }`,
src/ops/ops_train/rope_grad/rope_grad_operation.cpp, the kernel
src/kernels/mixkernels/rope_grad/op_kernel/rope_grad.cpp):

    RopeGradOperation(RopeGradParam{qSeqLen}):
        inputs  q_embed_grad [nTokens, hiddenSize], k_embed_grad [nTokens, hiddenSize],
                cos [maxSeqLen, 128], sin [maxSeqLen, 128]      (float16, ND)
        outputs q_grad, k_grad                                    (their shapes and dtype)

rope_grad(q_embed_grad, k_embed_grad, cos, sin, qSeqLen) returns (q_grad, k_grad) bit for bit:
per token of sequence i at position p within it, head n, j < 64,
q_grad[n*128 + j] = q[n*128 + j] * fp16(cos[p][j] + sin[p][j + 64]) and
q_grad[n*128 + j + 64] = q[n*128 + j + 64] * fp16(cos[p][j + 64] - sin[p][j]), in float16. ATB's
checks apply (float16 only, head size 128, equal q and k shapes, at least one sequence, each
no longer than cos; no cap on their number, in ATB or here); strict=False lifts them (float32,
bfloat16, other head sizes). This is ATB's
formula, not the adjoint of a rotary embedding: gradref.rope_grad's modes "half" and
"interleaved" give that.
"""
from . import _ops

__all__ = ["rope_grad", "RopeGrad"]


def rope_grad(q_embed_grad, k_embed_grad, cos, sin, qSeqLen, *, strict=True, **kw):
    """ATB RopeGrad: (q_grad, k_grad) from the two embedding gradients, cos and sin (indexed by
    each sequence's own positions) and qSeqLen, the sequences' lengths."""
    return _ops.rope_grad(q_embed_grad, k_embed_grad, cos, sin, qSeqLen, "atb", strict=strict,
                          **kw)


RopeGrad = rope_grad  # ATB's operation name
