# SPDX-License-Identifier: Apache-2.0
"""The package's layers, read from its source: _args is the only module that calls the C
library, and no module reaches into another's private names (the dialect modules use _args
and the public operators of _ops)."""
import ast
import os

import gradref
from gradref import _args, _lib

PACKAGE = os.path.dirname(gradref.__file__)


def modules():
    for name in sorted(os.listdir(PACKAGE)):
        if name.endswith(".py"):
            path = os.path.join(PACKAGE, name)
            yield name, ast.parse(open(path, encoding="utf-8").read(), path)


def attributes(tree):
    """(object name, attribute) of every `name.attribute` in tree."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            yield node.value.id, node.attr


def test_only_args_calls_the_library():
    for name, tree in modules():
        if name in ("_args.py", "_lib.py"):
            continue
        for obj, attr in attributes(tree):
            assert not (obj == "_lib" and attr == "lib"), "%s calls C through _lib.lib" % name
            assert not attr.startswith("gradref_"), "%s calls %s.%s" % (name, obj, attr)
            if name != "_arrays.py":  # which makes the descriptors call() passes
                assert attr != "byref", "%s passes ctypes pointers itself" % name


def test_no_module_uses_another_ones_private_names():
    package_modules = {n[:-3] for n, _ in modules()}
    for name, tree in modules():
        for obj, attr in attributes(tree):
            if obj in package_modules and attr.startswith("_") and not attr.startswith("__"):
                raise AssertionError("%s uses %s.%s" % (name, obj, attr))


def test_every_entry_point_the_package_calls_is_declared():
    """call() and query() name entry points by their suffix: each such literal in the package
    is a declared prototype."""
    for name, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(
                    node.func, "attr", None)) in ("call", "query") and node.args and \
                    isinstance(node.args[0], ast.Constant):
                assert "gradref_" + node.args[0].value in _lib.PROTOTYPES, \
                    "%s calls gradref_%s, which _lib does not declare" % (name, node.args[0].value)


def test_call_raises_in_python_names_and_leaves_the_struct():
    p = _args.conv_params(_lib.CONV_CROSS_CORRELATION, 1, [1, 1], [1, 1], [5, 6, 7, 8])
    try:
        _args.call("conv_pads_same", p, 2, _args.int64s([4, -1]), _args.int64s([3, 3]),
                   names={"input_size": "grad_shape"})
    except _args.Error as err:
        assert err.status == _lib.ERR_PARAM and err.status_name == "GRADREF_ERR_PARAM"
        assert "grad_shape[1] is -1" in err.message, err.message
    else:
        raise AssertionError("a negative input size was accepted")
    assert list(p.pad)[:4] == [5, 6, 7, 8]
    assert _args.query("conv3d_dw_transpose_needed", _lib.FORMAT_NCDHW, 1, 1, 1, 1, 1) in (0, 1)
