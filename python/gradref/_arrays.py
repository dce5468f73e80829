# SPDX-License-Identifier: Apache-2.0
"""numpy arrays and CPU torch tensors as gradref_tensor descriptors, without copies.

numpy has no bfloat16 of its own: an array whose dtype is named "bfloat16" (ml_dtypes', or any
compatible 2-byte extension dtype) is read as BF16, and so is a uint16 array read with
bf16=True (bf16 bits); bf16 results come back in the dtype that came in. torch.bfloat16 and
torch.float16 tensors are read in place.
"""
import sys

from . import _lib

_NUMPY_CODES = {"float32": _lib.F32, "float64": _lib.F64, "float16": _lib.F16,
                "int8": _lib.I8, "int32": _lib.I32, "int64": _lib.I64}
NUMPY_NAMES = {v: k for k, v in _NUMPY_CODES.items()}

def _torch():
    return sys.modules.get("torch")


def is_torch(x):
    t = _torch()
    return t is not None and isinstance(x, t.Tensor)


_TORCH_TABLES = []  # (dtype -> code, code -> dtype), built at the first torch argument


def _torch_codes():
    if not _TORCH_TABLES:
        t = _torch()
        codes = {t.float32: _lib.F32, t.float64: _lib.F64, t.float16: _lib.F16,
                 t.bfloat16: _lib.BF16, t.int8: _lib.I8, t.int32: _lib.I32, t.int64: _lib.I64}
        _TORCH_TABLES.append((codes, {v: k for k, v in codes.items()}))
    return _TORCH_TABLES[0][0]


def _torch_dtypes():
    _torch_codes()
    return _TORCH_TABLES[0][1]


_DIMS = _lib.ctypes.c_int64 * _lib.MAX_DIMS


class Arg:
    """One array argument: the object (kept alive for the call) and its descriptor."""

    def __init__(self, obj, kind, code, shape, strides, ptr):
        self.obj = obj
        self.kind = kind  # "numpy" or "torch"
        self.code = code
        self.shape = tuple(shape)  # numpy's and torch's sizes are ints already
        if len(self.shape) > _lib.MAX_DIMS:
            raise ValueError("gradref: an array of %d dims; at most %d"
                             % (len(self.shape), _lib.MAX_DIMS))
        self.strides = strides
        # one constructor call: ctypes field assignments one by one cost a microsecond each
        self.tensor = _lib.Tensor(ptr or None, code, len(self.shape), _DIMS(*self.shape),
                                  _DIMS(*self.strides))

    def permute(self, order):
        """The descriptor's dims taken in `order` (the object is not touched)."""
        shape = [self.tensor.shape[i] for i in order]
        self.strides = [self.strides[i] for i in order]
        self.tensor.shape = _DIMS(*shape)
        self.tensor.strides = _DIMS(*self.strides)

    def reshape_dims(self, dims):
        """The descriptor regrouped without a copy: dims lists, per new dim, (source dim, size,
        stride factor): a source dim of stride s split into (g, n/g) is (d, g, n/g) and
        (d, n/g, 1); a unit dim is (None, 1, 0)."""
        old = self.strides
        strides = [0 if d is None else old[d] * factor for d, _, factor in dims]
        t = self.tensor
        t.ndim = n = len(dims)
        t.shape[:n] = [size for _, size, _ in dims]
        t.strides[:n] = strides
        self.strides = strides

    def clone(self):
        """Another descriptor of the same object (regrouping one leaves the other)."""
        other = Arg.__new__(Arg)
        other.obj, other.kind, other.code, other.shape = self.obj, self.kind, self.code, self.shape
        other.strides = list(self.strides)
        other.tensor = _lib.Tensor.from_buffer_copy(self.tensor)
        return other

    @property
    def ref(self):
        import ctypes
        return ctypes.byref(self.tensor)


def is_bfloat16_dtype(dt):
    """Whether a numpy dtype is a bfloat16 extension (ml_dtypes.bfloat16 and compatibles),
    recognised by name and size without importing them."""
    return getattr(dt, "name", None) == "bfloat16" and getattr(dt, "itemsize", 0) == 2


_CODE_OF_DTYPE = {}  # (numpy dtype, bf16) -> code: a dtype's name costs a microsecond


def _numpy_code(a, name, bf16):
    dt = a.dtype
    try:
        return _CODE_OF_DTYPE[(dt, bf16)]
    except (KeyError, TypeError):  # TypeError: a dtype stand-in that does not hash
        pass
    code = None
    if is_bfloat16_dtype(dt) or (bf16 and dt.name == "uint16"):
        code = _lib.BF16
    elif dt.name in _NUMPY_CODES and dt.isnative:
        code = _NUMPY_CODES[dt.name]
    if code is not None:
        try:
            _CODE_OF_DTYPE[(dt, bf16)] = code
        except TypeError:
            pass
        return code
    hint = " (a uint16 array holds bf16 bits when you pass dtype=\"bf16\")" \
        if dt.name == "uint16" else ""
    raise TypeError("gradref: %s has numpy dtype %s; gradref takes float32, float64, float16, "
                    "int8, int32, int64 (native byte order) or bf16 bits in uint16%s"
                    % (name, dt, hint))


def _data_address(a):
    return a.__array_interface__["data"][0]


def _element_strides(a, address):
    """a's strides in elements, or None when one is negative or not a multiple of the item
    size, or the data (at address) is not aligned to it."""
    size = a.itemsize
    if address % size:
        return None
    out = []
    for s, n in zip(a.strides, a.shape):
        if n == 1:  # a stride that addresses nothing
            out.append(0)
            continue
        if s < 0 or s % size:
            return None
        out.append(s // size)
    return out


def as_input(x, name, bf16=False):
    """An input array; copied only when numpy's layout cannot be described (negative or
    fractional strides, misaligned data)."""
    return _as_arg(x, name, bf16, output=False)


def as_output(x, name, bf16=False):
    """A caller's out= array: written in place, so its layout must be describable."""
    return _as_arg(x, name, bf16, output=True)


def _as_arg(x, name, bf16, output):
    if isinstance(x, Arg):  # a module's descriptor, regrouped already
        return x
    if is_torch(x):
        return _torch_arg(x, name, output)
    np = _numpy()
    what = "out " + name if output else name
    if not isinstance(x, np.ndarray):
        raise TypeError("gradref: %s is a %s; pass a numpy array or a CPU torch tensor"
                        % (what, type(x).__name__))
    code = _numpy_code(x, name, bf16)
    if output and not x.flags.writeable:
        raise ValueError("gradref: out %s is read-only" % name)
    address = _data_address(x)
    strides = _element_strides(x, address)
    if strides is None and x.size > 0:
        if output:
            raise ValueError("gradref: out %s has strides %s bytes (item size %d) or misaligned "
                             "data; outputs need non-negative strides that are multiples of the "
                             "item size" % (name, x.strides, x.itemsize))
        x = np.array(x, copy=True, order="C")
        address = _data_address(x)
        strides = _element_strides(x, address)
    if strides is None:  # empty: no element is addressed
        strides = [0] * x.ndim
    return Arg(x, "numpy", code, x.shape, strides, address if x.size else 0)


def _torch_arg(t, name, output):
    if not t.is_cpu:
        raise TypeError("gradref: %s is on %s; gradref runs on the CPU (pass .cpu())"
                        % (name, t.device))
    code = _torch_codes().get(t.dtype)
    if code is None:
        raise TypeError("gradref: %s has torch dtype %s; gradref takes float32, float64, "
                        "float16, bfloat16, int8, int32 or int64" % (name, t.dtype))
    if t.layout != _torch().strided:
        raise TypeError("gradref: %s has layout %s; gradref takes strided tensors"
                        % (name, t.layout))
    if t.is_neg():
        if output:
            raise ValueError("gradref: out %s is a negated view" % name)
        t = t.resolve_neg()
    shape = t.shape
    strides = [0 if n == 1 else s for n, s in zip(shape, t.stride())]
    return Arg(t, "torch", code, shape, strides, t.data_ptr() if t.numel() else 0)


def _numpy():
    import numpy
    return numpy


def new_output(kind, shape, code, like=None):
    """A new contiguous array of `kind` for a result; a BF16 one in like's numpy dtype when
    that is a bfloat16 extension dtype (else uint16 bits)."""
    if kind == "torch":
        t = _torch()
        return as_output(t.empty(tuple(shape), dtype=_torch_dtypes()[code]), "result")
    np = _numpy()
    if code == _lib.BF16:
        a = np.empty(tuple(shape), dtype="uint16")
        dt = getattr(getattr(like, "obj", None), "dtype", None)
        if like is not None and like.kind == "numpy" and is_bfloat16_dtype(dt):
            a = a.view(dt)
        return as_output(a, "result", bf16=True)
    return as_output(np.empty(tuple(shape), dtype=NUMPY_NAMES[code]), "result")

