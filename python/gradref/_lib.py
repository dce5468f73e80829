# SPDX-License-Identifier: Apache-2.0
"""Finds libgradref and declares the C ABI of include/gradref.h with ctypes.

The struct layouts below mirror the header; python/tests/test_abi.py compiles a C program
against the header and compares every size and field offset with these declarations.
"""
import ctypes
import ctypes.util
import os

MAX_DIMS = 8

# gradref_dtype
F32, F64, F16, BF16, I8, I32, I64 = range(7)
# gradref_status
STATUS_NAMES = (
    "GRADREF_OK", "GRADREF_ERR_NULL", "GRADREF_ERR_DTYPE", "GRADREF_ERR_RANK",
    "GRADREF_ERR_SHAPE", "GRADREF_ERR_STRIDE", "GRADREF_ERR_PARAM", "GRADREF_ERR_OVERFLOW",
    "GRADREF_ERR_ALIAS", "GRADREF_ERR_NO_MEMORY", "GRADREF_ERR_WORKSPACE",
)
(OK, ERR_NULL, ERR_DTYPE, ERR_RANK, ERR_SHAPE, ERR_STRIDE, ERR_PARAM, ERR_OVERFLOW, ERR_ALIAS,
 ERR_NO_MEMORY, ERR_WORKSPACE) = range(11)
# gradref_precision
(PRECISION_DEFAULT, PRECISION_HIGH, PRECISION_HF32, PRECISION_HF32_910B,
 PRECISION_MEGENGINE_DEFAULT) = range(5)
STRICT_UPSTREAM = 0x100  # GRADREF_STRICT_UPSTREAM, OR'ed into gradref_exec.precision
PADDED_ZEROS = 0x200  # GRADREF_PADDED_ZEROS, likewise
TERM_MAGNITUDES = 0x400  # GRADREF_TERM_MAGNITUDES: each output element's sum of |term| (F64)
TERM_COUNTS = 0x800  # GRADREF_TERM_COUNTS: each output element's number of terms (F64)
MAX_THREADS = 1024  # GRADREF_MAX_THREADS
VERSION_MAJOR, VERSION_MINOR, VERSION_PATCH = 0, 1, 0
# gradref_format
(FORMAT_NCHW, FORMAT_NHWC, FORMAT_NCDHW, FORMAT_NDHWC, FORMAT_DHWCN, FORMAT_HWCN, FORMAT_NCHW4,
 FORMAT_NHWCD4, FORMAT_NHWCD4_DOT) = range(9)
# gradref_interp, gradref_padding (grid_sampler3d_grad)
INTERP_BILINEAR, INTERP_NEAREST = range(2)
PAD_ZEROS, PAD_BORDER, PAD_REFLECTION = range(3)
# gradref_conv_mode
CONV_CROSS_CORRELATION, CONV_CONVOLUTION = range(2)
# gradref_rope_mode
ROPE_ATB, ROPE_HALF, ROPE_INTERLEAVED = range(3)


class Tensor(ctypes.Structure):
    """gradref_tensor"""
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("strides", ctypes.c_int64 * MAX_DIMS),
    ]


class Exec(ctypes.Structure):
    """gradref_exec"""
    _fields_ = [
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        ("num_threads", ctypes.c_int32),
        ("precision", ctypes.c_int32),
    ]


class GridSampler3dParams(ctypes.Structure):
    """gradref_grid_sampler3d_params"""
    _fields_ = [
        ("interpolation", ctypes.c_int32),
        ("padding", ctypes.c_int32),
        ("align_corners", ctypes.c_int32),
    ]


class ConvParams(ctypes.Structure):
    """gradref_conv_params"""
    _fields_ = [
        ("mode", ctypes.c_int32),
        ("groups", ctypes.c_int32),
        ("stride", ctypes.c_int64 * 3),
        ("dilation", ctypes.c_int64 * 3),
        ("pad", ctypes.c_int64 * 6),
    ]


class Qs8Scales(ctypes.Structure):
    """gradref_qs8_scales"""
    _fields_ = [
        ("filter", ctypes.c_float),
        ("diff", ctypes.c_float),
        ("grad", ctypes.c_float),
    ]


class RopeParams(ctypes.Structure):
    """gradref_rope_params"""
    _fields_ = [
        ("mode", ctypes.c_int32),
        ("head_dim", ctypes.c_int32),
        ("rotary_dim", ctypes.c_int32),
        ("num_seqs", ctypes.c_int32),
        ("seq_lens", ctypes.POINTER(ctypes.c_int32)),
        ("start_positions", ctypes.POINTER(ctypes.c_int64)),
    ]


STRUCTS = {
    "gradref_tensor": Tensor,
    "gradref_exec": Exec,
    "gradref_grid_sampler3d_params": GridSampler3dParams,
    "gradref_conv_params": ConvParams,
    "gradref_rope_params": RopeParams,
    "gradref_qs8_scales": Qs8Scales,
}

_P = ctypes.POINTER
_T = _P(Tensor)
_E = _P(Exec)
_SZ = _P(ctypes.c_size_t)
_I64 = _P(ctypes.c_int64)
_S = ctypes.c_int  # gradref_status

# name: (restype, argtypes)
PROTOTYPES = {
    "gradref_status_string": (ctypes.c_char_p, [ctypes.c_int]),
    "gradref_last_error": (ctypes.c_char_p, []),
    "gradref_version": (ctypes.c_char_p, []),
    "gradref_copy": (_S, [_T, _T, _E]),
    "gradref_grid_sampler3d_grad": (_S, [_P(GridSampler3dParams), _T, _T, _T, _T, _T, _E]),
    "gradref_grid_sampler3d_grad_workspace_size":
        (_S, [_P(GridSampler3dParams), _T, _T, _T, _T, _T, _SZ]),
    "gradref_conv_backprop_data": (_S, [_P(ConvParams), _T, _T, _T, _E]),
    "gradref_conv_backprop_data_workspace_size": (_S, [_P(ConvParams), _T, _T, _T, _SZ]),
    "gradref_conv_backprop_data_qs8": (_S, [_P(ConvParams), _P(Qs8Scales), _T, _T, _T, _E]),
    "gradref_conv_backprop_data_qs8_workspace_size":
        (_S, [_P(ConvParams), _P(Qs8Scales), _T, _T, _T, _SZ]),
    "gradref_conv3d_backprop_filter": (_S, [_P(ConvParams), _T, _T, _T, _E]),
    "gradref_conv3d_backprop_filter_workspace_size": (_S, [_P(ConvParams), _T, _T, _T, _SZ]),
    "gradref_conv_pads_same": (_S, [_P(ConvParams), ctypes.c_int32, _I64, _I64]),
    "gradref_conv3d_dw_transpose_needed":
        (ctypes.c_int32, [ctypes.c_int32, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                          ctypes.c_int64, ctypes.c_int32]),
    "gradref_tensor_init_format": (_S, [_T, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, _I64]),
    "gradref_conv_filter_init_format":
        (_S, [_T, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int32, _I64]),
    "gradref_conv3d_filter_init_cann":
        (_S, [_T, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int32, _I64,
              ctypes.c_int32]),
    "gradref_rope_grad": (_S, [_P(RopeParams), _T, _T, _T, _T, _T, _T, _E]),
    "gradref_recat_embedding_grad_output": (_S, [_T, _I64, ctypes.c_int32, _T, _E]),
    "gradref_recat_embedding_grad_output_mixed_d": (_S, [_T, _I64, ctypes.c_int32, _T, _E]),
    "gradref_recat_embedding_grad_output_mixed_d_batch": (_S, [_T, _T, _T, _T, _E]),
}


def _candidates():
    """Where the library may be, in the order they are tried."""
    env = os.environ.get("GRADREF_LIBRARY")
    if env:  # the caller's choice is final: a golden must not come from another build
        yield "GRADREF_LIBRARY", env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        from . import _install  # written by `cmake --install`
        yield "the installed library", _install.LIBRARY
    except ImportError:
        pass
    for name in ("libgradref.so", "libgradref.so.0", "libgradref.dylib", "gradref.dll"):
        yield "next to the package", os.path.join(here, name)
    found = ctypes.util.find_library("gradref")
    yield "the system loader", found or "libgradref.so.0"


def _load():
    tried = []
    for how, path in _candidates():
        if how != "the system loader" and not os.path.exists(path):
            tried.append("%s: %s (no such file)" % (how, path))
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s: %s (%s)" % (how, path, e))
    raise ImportError(
        "gradref: cannot load libgradref. Tried:\n  " + "\n  ".join(tried) +
        "\nBuild it (cmake -S . -B build && cmake --build build) and set "
        "GRADREF_LIBRARY=build/libgradref.so, or install it with cmake --install build.")


lib, path = _load()
for _name, (_res, _args) in PROTOTYPES.items():
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args
