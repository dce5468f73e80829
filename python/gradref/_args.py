# SPDX-License-Identifier: Apache-2.0
"""The argument layer every operator module shares (_ops and each upstream dialect): Python
values checked and turned into the C ABI's (ints that fit their field, bools, enum names,
pads, the exec struct, output arrays), the C names of a message turned into the caller's,
and the only place the package calls the C library."""
import ctypes
import numbers
import re

from . import _arrays, _lib
from ._arrays import Arg, as_input, as_output, new_output

_c = _lib.lib


class Error(ValueError):
    """A gradref call failed: .status is the gradref_status value, .status_name its name
    ("GRADREF_ERR_SHAPE", ...), .message the library's message."""

    def __init__(self, status, message):
        self.status = int(status)
        self.status_name = _c.gradref_status_string(self.status).decode()
        self.message = message
        super().__init__("%s: %s" % (self.status_name, message))


def version():
    """The loaded library's version, "MAJOR.MINOR.PATCH"."""
    return _c.gradref_version().decode()


def library_path():
    """The file the package loaded libgradref from."""
    return _lib.path


# ---------------------------------------------------------------- calling C

# The C names a message may hold, as the Python caller spells them
EXEC_NAMES = {"exec.num_threads": "threads", "exec.precision": "precision"}
GS3D_NAMES = {"p.interpolation": "interpolation_mode", "p.padding": "padding_mode",
              "p.align_corners": "align_corners", "grad": "grad_output", "x": "input"}
ROPE_NAMES = {"p.seq_lens": "seq_len", "p.num_seqs": "len(seq_len)",
              "p.start_positions": "start_positions", "p.head_dim": "head_dim",
              "p.rotary_dim": "rotary_dim", "p.mode": "mode"}
CBD_NAMES = {"p.stride": "stride", "p.dilation": "dilate", "p.pad": "pad", "p.mode": "mode",
             "p.groups": "groups"}
C3F_NAMES = {"p.stride": "strides", "p.dilation": "dilations", "p.pad": "padding",
             "p.groups": "groups", "x": "input", "dy": "out_backprop"}


def python_names(message, names):
    """message with each C name (a field, or a tensor before '.', ' is' or ' and') replaced."""
    table = dict(EXEC_NAMES, **(names or {}))
    for c_name in sorted(table, key=len, reverse=True):
        pattern = r"(?<![\w.])" + re.escape(c_name) + \
            (r"(?=[\[.,;:)]|\s|$)" if "." in c_name else r"(?=[.\[;,]| is\b| and\b|$)")
        message = re.sub(pattern, table[c_name], message)
    return message


def _c_value(v):
    """An argument as the C call takes it: a struct by pointer, an array by its descriptor."""
    if isinstance(v, ctypes.Structure):
        return ctypes.byref(v)
    if isinstance(v, Arg):
        return v.ref
    return v


def call(entry, *args, names=None, hint=None):
    """gradref_<entry>(args) (structs passed by pointer, arrays by descriptor); a status other
    than GRADREF_OK raises Error with the library's message in the caller's names (names: C
    name -> Python name; hint: added to a shape error)."""
    status = getattr(_c, "gradref_" + entry)(*[_c_value(v) for v in args])
    if status != 0:
        message = python_names(_c.gradref_last_error().decode(errors="replace"), names)
        if hint and status == _lib.ERR_SHAPE:
            message += " (" + hint + ")"
        raise Error(status, message)


def query(entry, *args):
    """gradref_<entry>(args) for the entry points that answer a question (no status)."""
    return getattr(_c, "gradref_" + entry)(*[_c_value(v) for v in args])


def int64s(values):
    """A C array of int64_t (at least one element, so that an empty list has an address)."""
    values = list(values)
    return (ctypes.c_int64 * max(len(values), 1))(*values)


def int32s(values):
    values = list(values)
    return (ctypes.c_int32 * max(len(values), 1))(*values)


# ---------------------------------------------------------------- scalars and enums

def integer(value, name, minimum=None, bits=64):
    """An int that fits the C field it goes to (int64_t, or int32_t with bits=32): ctypes
    would wrap a larger one silently (2**32 + 3 read as 3)."""
    if type(value) is int and (minimum is None or value >= minimum) and \
            -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        return value  # the common case, without the abstract-class checks below
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("gradref: %s must be an int, not %s" % (name, type(value).__name__))
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError("gradref: %s is %d; it must be >= %d" % (name, value, minimum))
    if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise ValueError("gradref: %s is %d; it does not fit the library's %d-bit integer"
                         % (name, value, bits))
    return value


def integers(values, name, bits=64):
    """A sequence of ints (list, tuple, 1-D integer array or tensor)."""
    if hasattr(values, "tolist") and not isinstance(values, (list, tuple)):
        values = values.tolist()
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError("gradref: %s must be a sequence of ints, not %s"
                        % (name, type(values).__name__))
    lo, hi = -(1 << (bits - 1)), 1 << (bits - 1)
    if all(type(v) is int and lo <= v < hi for v in values):
        return list(values)
    return [integer(v, "%s[%d]" % (name, i), bits=bits) for i, v in enumerate(values)]


def boolean(value, name):
    """True or False: a bool, 0 or 1, or "true"/"false" in any case (as shells and JSON write
    them); anything else is an error, not a truth value."""
    if value is True or value is False:
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(value, numbers.Integral) and int(value) in (0, 1):
        return bool(int(value))
    raise TypeError("gradref: %s must be True or False, not %r" % (name, value))


def choice(value, table, name):
    """An enum argument given as an int or one of table's names."""
    if isinstance(value, str):
        key = value.lower()
        if key not in table:
            raise ValueError("gradref: %s=%r; use one of %s" % (name, value, sorted(table)))
        return table[key]
    return integer(value, name, bits=32)


def bf16_dtype(dtype):
    """Whether dtype= says that uint16 arrays hold bf16 bits."""
    if dtype is None:
        return False
    if dtype in ("bf16", "bfloat16"):
        return True
    raise ValueError("gradref: dtype=%r; the only value is \"bf16\" (uint16 arrays hold bf16 bits)"
                     % (dtype,))


# The enums by the names the Python calls take
INTERP = {"bilinear": _lib.INTERP_BILINEAR, "trilinear": _lib.INTERP_BILINEAR,
          "nearest": _lib.INTERP_NEAREST}
PADDING = {"zeros": _lib.PAD_ZEROS, "border": _lib.PAD_BORDER, "reflection": _lib.PAD_REFLECTION}
ROPE_MODES = {"atb": _lib.ROPE_ATB, "half": _lib.ROPE_HALF, "rotate_half": _lib.ROPE_HALF,
              "interleaved": _lib.ROPE_INTERLEAVED}
CONV_MODES = {"cross_correlation": _lib.CONV_CROSS_CORRELATION,
              "convolution": _lib.CONV_CONVOLUTION}
FORMATS = {"nchw": _lib.FORMAT_NCHW, "nhwc": _lib.FORMAT_NHWC, "ncdhw": _lib.FORMAT_NCDHW,
           "ndhwc": _lib.FORMAT_NDHWC, "dhwcn": _lib.FORMAT_DHWCN, "hwcn": _lib.FORMAT_HWCN}
PRECISIONS = {"default": _lib.PRECISION_DEFAULT, "high": _lib.PRECISION_HIGH,
              "hf32": _lib.PRECISION_HF32, "hf32_910b": _lib.PRECISION_HF32_910B,
              "megengine_default": _lib.PRECISION_MEGENGINE_DEFAULT}


TERMS = {"magnitudes": _lib.TERM_MAGNITUDES, "counts": _lib.TERM_COUNTS}


def terms_flag(terms):
    """The GRADREF_TERM_* flag of terms= (None, "magnitudes" or "counts")."""
    if terms is None:
        return 0
    if terms not in TERMS:
        raise ValueError("gradref: terms=%r; use \"magnitudes\" or \"counts\"" % (terms,))
    return TERMS[terms]


def execution(threads, precision, strict=False, padded_zeros=False, terms=None):
    """The gradref_exec of a call: threads (None: the default), precision (a name of
    PRECISIONS or its code), the STRICT_UPSTREAM and PADDED_ZEROS flags, and terms (a
    GRADREF_TERM_* output: "magnitudes" or "counts")."""
    num_threads = 0 if threads is None else integer(threads, "threads", bits=32)
    if precision is None:
        code = _lib.PRECISION_DEFAULT
    elif isinstance(precision, str):
        if precision.lower() not in PRECISIONS:
            raise ValueError("gradref: precision %r; use %s" % (precision, sorted(PRECISIONS)))
        code = PRECISIONS[precision.lower()]
    else:
        code = integer(precision, "precision", bits=32)
    if strict is not False and boolean(strict, "strict"):
        code |= _lib.STRICT_UPSTREAM
    if padded_zeros is not False and boolean(padded_zeros, "padded_zeros"):
        code |= _lib.PADDED_ZEROS
    return _lib.Exec(None, 0, num_threads, code | terms_flag(terms))


# ---------------------------------------------------------------- convolution geometry

def per_dim(value, r, name, minimum):
    """An int for every one of r spatial dims, or r ints; each >= minimum."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        vals = [int(value)] * r
    else:
        vals = integers(value, name)
        if len(vals) != r:
            raise ValueError("gradref: %s has %d entries for %d spatial dims" % (name, len(vals), r))
    for v in vals:
        if v < minimum:
            raise ValueError("gradref: %s %s; each must be >= %d" % (name, vals, minimum))
    return vals


def pad_list(pad, r, name="pad"):
    """pad as an int, r symmetric pads, or 2r (begin, end) pads; returns 2r values."""
    if isinstance(pad, numbers.Integral) and not isinstance(pad, bool):
        return [int(pad)] * (2 * r)
    vals = []
    for v in pad:
        if isinstance(v, (tuple, list)):
            vals.extend(integers(v, name))
        else:
            vals.append(integer(v, name))
    if len(vals) == r:
        return [v for v in vals for _ in (0, 1)]
    if len(vals) == 2 * r:
        return vals
    raise ValueError("gradref: %s has %d values; give 1, %d (symmetric) or %d (begin, end per "
                     "dim)" % (name, len(vals), r, 2 * r))


def conv_params(mode, groups, stride, dilation, pads=None):
    """A gradref_conv_params from checked values (pads: 2r (begin, end) values, or none)."""
    p = _lib.ConvParams()
    p.mode, p.groups = mode, groups
    for j in range(len(stride)):
        p.stride[j], p.dilation[j] = stride[j], dilation[j]
    for j in range(len(pads or ())):
        p.pad[j] = pads[j]
    return p


def pads_same(p, input_size, kernel_size):
    """TF's SAME padding into p (gradref_conv_pads_same, from p's strides and dilations)."""
    r = len(input_size)
    call("conv_pads_same", p, r, int64s(input_size), int64s(kernel_size))


# ---------------------------------------------------------------- results

ITEM_BYTES = {_lib.F32: 4, _lib.F64: 8, _lib.F16: 2, _lib.BF16: 2, _lib.I8: 1, _lib.I32: 4,
              _lib.I64: 8}
CODE_NAMES = dict(_arrays.NUMPY_NAMES)
CODE_NAMES[_lib.BF16] = "bfloat16"
OUT_DTYPES = {"float32": _lib.F32, "f32": _lib.F32, "float64": _lib.F64, "f64": _lib.F64,
              "float16": _lib.F16, "f16": _lib.F16, "bfloat16": _lib.BF16, "bf16": _lib.BF16,
              "int32": _lib.I32, "i32": _lib.I32, "int8": _lib.I8, "i8": _lib.I8}


def given_output(given, shape, codes, name, bf16, dense=False):
    """A caller's out= array as an output descriptor, refused unless it is exactly what the
    call writes: `shape`, one of the dtype `codes`, and (dense=True: the descriptor is rebuilt
    from its memory, so nothing else would catch a mismatch) dense row-major strides."""
    a = as_output(given, name, bf16)
    if tuple(a.shape) != tuple(int(v) for v in shape):
        raise Error(_lib.ERR_SHAPE, "out %s has shape %s; this call writes %s"
                    % (name, tuple(a.shape), tuple(int(v) for v in shape)))
    if a.code not in codes:
        names = " or ".join(CODE_NAMES[c] for c in codes)
        raise Error(_lib.ERR_DTYPE, "out %s is %s; this call writes %s"
                    % (name, CODE_NAMES[a.code], names))
    if dense:
        run = 1
        for n, s in zip(reversed(a.shape), reversed(a.strides)):
            if n > 1 and s != run:
                raise Error(_lib.ERR_STRIDE, "out %s has element strides %s; it must be dense "
                            "(row-major, as the call lays it out)" % (name, tuple(a.strides)))
            run *= n
    return a


def result(given, kind, shape, code, name, bf16, like=None, codes=None, dense=False):
    """The out= array if given (checked by given_output against shape and codes, default
    (code,)), else a new one (a BF16 one in like's bfloat16 numpy dtype when it has one).
    A shape that cannot be allocated (broadcast inputs of a huge logical shape, sizes the
    library would refuse) raises Error, as the library would, not numpy's or torch's own."""
    if given is not None:
        return given_output(given, shape, codes or (code,), name, bf16, dense)
    shape = [int(v) for v in shape]
    if any(v < 0 for v in shape):
        raise Error(_lib.ERR_SHAPE, "%s would have the negative shape %s: the arguments do not "
                    "fit together" % (name, tuple(shape)))
    nbytes = ITEM_BYTES[code]
    for v in shape:
        nbytes *= v
    if nbytes >= 1 << 63:
        raise Error(_lib.ERR_OVERFLOW, "%s of shape %s would take %d bytes, more than int64 "
                    "holds" % (name, tuple(shape), nbytes))
    try:
        return new_output(kind, shape, code, like)
    except (MemoryError, ValueError, RuntimeError) as e:
        raise Error(_lib.ERR_NO_MEMORY, "%s of shape %s (%d bytes) could not be allocated: %s"
                    % (name, tuple(shape), nbytes, e)) from None


def outs(out, n):
    """out= of a call with n results, as n entries (None for new ones)."""
    if out is None:
        return (None,) * n
    if n == 1:
        return (out,)
    if not isinstance(out, (tuple, list)) or len(out) != n:
        raise TypeError("gradref: out must be a tuple of %d arrays (None for new ones)" % n)
    return tuple(out)


def out_code(out_dtype, default):
    """The output's dtype code: `default`, or out_dtype by name ("float32", "bf16", ...)."""
    if out_dtype is None:
        return default
    if hasattr(out_dtype, "name") and not isinstance(out_dtype, str):  # numpy or torch dtype
        out_dtype = str(out_dtype.name if hasattr(out_dtype, "name") else out_dtype)
    key = str(out_dtype).lower().replace("torch.", "")
    if key not in OUT_DTYPES:
        raise ValueError("gradref: out_dtype=%r; use one of %s" % (out_dtype, sorted(OUT_DTYPES)))
    return OUT_DTYPES[key]


def out_codes(out_dtype, default):
    """(the output's dtype code, the codes an out= array may have): without out_dtype, `default`
    (an F32 out= array also takes F16/BF16 results in f32)."""
    if out_dtype is not None:
        code = out_code(out_dtype, default)
        return code, (code,)
    return default, (default, _lib.F32) if default in (_lib.F16, _lib.BF16) else (default,)


def zeros_result(like, shape, *, out=None, out_dtype=None, dtype=None, **_):
    """A result of zeros in like's kind and dtype (out_dtype when given), or out= zeroed: for
    upstream calls that compute over nothing (empty windows, no ranks)."""
    bf16 = bf16_dtype(dtype)
    a = as_input(like, "like", bf16) if not isinstance(like, Arg) else like
    code, codes = out_codes(out_dtype, a.code)
    g = result(out, a.kind, shape, code, "grad", bf16, a, codes)
    g.obj[...] = 0
    return g.obj
