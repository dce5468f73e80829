# SPDX-License-Identifier: Apache-2.0
"""FBGEMM's recat ops in FBGEMM's own call: torch.ops.fbgemm.<name>(...) with the same names,
argument order and checks (pytorch/FBGEMM fbgemm_gpu/src/layout_transform_ops/
layout_transform_ops_cpu.cpp, read at 71d6f8b22):

    recat_embedding_grad_output_mixed_D_batch(Tensor grad_output, Tensor dim_sum_per_rank,
                                              Tensor cumsum_dim_sum_per_rank) -> Tensor
    recat_embedding_grad_output_mixed_D(Tensor grad_output, int[] dim_sum_per_rank) -> Tensor
    recat_embedding_grad_output(Tensor grad_output, int[] num_features_per_rank) -> Tensor

Each returns the 1-D re-laid gradient of grad_output's kind and dtype. As FBGEMM, grad_output
must be contiguous float32 or float16 (strict=False lifts that: any strides, and bfloat16 and
float64, which gradref also moves bit for bit); cumsum_dim_sum_per_rank is the exclusive int64
prefix FBGEMM's test builds (np.cumsum([0] + dims)[:-1]), not torchrec's inclusive int32 buffer.
"""
from . import _args, _ops

__all__ = ["recat_embedding_grad_output", "recat_embedding_grad_output_mixed_D",
           "recat_embedding_grad_output_mixed_D_batch"]


def _empty(grad_output, ranks):
    """FBGEMM's loops run zero times for no ranks over an empty grad_output: an empty result
    (gradref's C call wants at least one rank)."""
    numel = 1
    for n in grad_output.shape:
        numel *= n
    if len(ranks) or numel != 0:
        return None
    return _args.zeros_result(grad_output, (0,))


def recat_embedding_grad_output(grad_output, num_features_per_rank, *, strict=True, **kw):
    """fbgemm::recat_embedding_grad_output: grad_output (B, T, D)."""
    empty = _empty(grad_output, list(num_features_per_rank))
    if empty is not None:
        return empty
    return _ops.recat_embedding_grad_output(grad_output, num_features_per_rank, strict=strict,
                                            **kw)


def recat_embedding_grad_output_mixed_D(grad_output, dim_sum_per_rank, *, strict=True, **kw):
    """fbgemm::recat_embedding_grad_output_mixed_D: grad_output (B, sum of D)."""
    empty = _empty(grad_output, list(dim_sum_per_rank))
    if empty is not None:
        return empty
    return _ops.recat_embedding_grad_output_mixed_D(grad_output, dim_sum_per_rank, strict=strict,
                                                    **kw)


def recat_embedding_grad_output_mixed_D_batch(grad_output, dim_sum_per_rank,
                                              cumsum_dim_sum_per_rank, *, strict=True, **kw):
    """fbgemm::recat_embedding_grad_output_mixed_D_batch: the widths and their exclusive prefix
    as int64 tensors (or arrays)."""
    return _ops.recat_embedding_grad_output_mixed_D_batch(
        grad_output, dim_sum_per_rank, cumsum_dim_sum_per_rank, strict=strict, **kw)
