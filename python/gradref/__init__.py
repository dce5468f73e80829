# SPDX-License-Identifier: Apache-2.0
"""gradref: neural-network backward operators for the CPU, as golden references.

Every operator takes numpy arrays (any strides) or CPU torch tensors and returns results of
the same kind; the parameter names and order are those of the system it models:

    dx, dgrid = gradref.grid_sampler3d_grad(grad_output, x, grid, "bilinear", "zeros", False)
    gradref.testing.assert_close(npu_dx.cpu(), dx)

gradref.atb, gradref.cann, gradref.fbgemm, gradref.megengine, gradref.tf and gradref.torch take
those systems' own calls (names, argument order, defaults, layouts, checks).
See docs/python.md. numpy is imported only when an array is passed, so `import gradref` and
`gradref.version()` work in any Python 3.
"""
from ._ops import (Error, conv3d_backprop_filter, conv3d_dw_transpose_needed,
                   conv_backprop_data, copy, grid_sampler3d_grad, library_path,
                   recat_embedding_grad_output, recat_embedding_grad_output_mixed_D,
                   recat_embedding_grad_output_mixed_D_batch, rope_grad, version)
from . import testing  # noqa: E402
from . import standards  # noqa: E402  (CANN's and MLU-OPS' acceptance standards)
from . import precision  # noqa: E402  (f64 goldens, term magnitudes, error bounds)
from . import atb, cann, fbgemm, megengine, tf, torch  # noqa: E402  (each upstream's own call)

__version__ = version()

__all__ = [
    "Error", "version", "library_path", "testing", "standards", "precision", "copy", "atb", "cann",
    "fbgemm", "megengine",
    "tf", "torch",
    "grid_sampler3d_grad",
    "recat_embedding_grad_output", "recat_embedding_grad_output_mixed_D",
    "recat_embedding_grad_output_mixed_D_batch",
    "rope_grad",
    "conv_backprop_data",
    "conv3d_backprop_filter", "conv3d_dw_transpose_needed",
]
