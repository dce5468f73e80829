# SPDX-License-Identifier: Apache-2.0
"""The package's ctypes declarations against include/gradref.h: a C program built from the
header prints every struct size and field offset, and every enumerator and integer constant,
and each must equal the ctypes declaration or the _lib constant of the same name."""
import os
import re
import shutil
import subprocess

import pytest

from gradref import _lib
from conftest import ROOT

HEADER_DIR = os.path.join(ROOT, "include")


def _compiler():
    for cc in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cc and shutil.which(cc):
            return cc
    return None


def header_constants():
    """Every enumerator of include/gradref.h and every #define of an integer there."""
    with open(os.path.join(HEADER_DIR, "gradref.h")) as f:
        text = f.read()
    names = re.findall(r"^\s+(GRADREF_[A-Z0-9_]+) = ", text, re.M)
    names += re.findall(r"^#define (GRADREF_[A-Z0-9_]+) (?:0x)?[0-9]+\s*$", text, re.M)
    assert len(names) > 40, names  # the regexes still find the header's constants
    return names


def test_struct_layouts_match_the_header(tmp_path):
    cc = _compiler()
    if cc is None:
        pytest.skip("no C compiler to read the header with")
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include "gradref.h"',
             'int main(void) {']
    for cname, struct in _lib.STRUCTS.items():
        lines.append('printf("%s size %%zu\\n", sizeof(%s));' % (cname, cname))
        for field, _ in struct._fields_:
            lines.append('printf("%s %s %%zu\\n", offsetof(%s, %s));'
                         % (cname, field, cname, field))
    constants = header_constants()
    for name in constants:
        lines.append('printf("%s value %%d\\n", (int)%s);' % (name, name))
    lines.append("return 0; }")
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c99", "-I", HEADER_DIR, str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    seen = 0
    for line in out.splitlines():
        name, what, value = line.split()
        value = int(value)
        if what == "value":  # GRADREF_X is _lib.X; a status is also its STATUS_NAMES index
            want = getattr(_lib, name[len("GRADREF_"):], None)
            assert want is not None, "%s is not declared in gradref/_lib.py" % name
            if name.startswith("GRADREF_ERR_") or name == "GRADREF_OK":
                assert _lib.STATUS_NAMES[value] == name
        elif what == "size":
            want = _lib.ctypes.sizeof(_lib.STRUCTS[name])
        else:
            want = getattr(_lib.STRUCTS[name], what).offset
        assert value == want, "%s %s: C says %d, ctypes %d" % (name, what, value, want)
        seen += 1
    assert seen == sum(len(s._fields_) + 1 for s in _lib.STRUCTS.values()) + len(constants)


def test_every_declared_function_is_in_the_header():
    with open(os.path.join(HEADER_DIR, "gradref.h")) as f:
        header = f.read()
    for name in _lib.PROTOTYPES:
        assert name + "(" in header, name


def test_library_not_found_says_what_it_tried(tmp_path):
    import sys
    env = dict(os.environ, GRADREF_LIBRARY=str(tmp_path / "missing.so"))
    code = ("import sys; sys.path.insert(0, %r)\n"
            "import ctypes.util; ctypes.util.find_library = lambda n: None\n"
            "try:\n  import gradref\nexcept ImportError as e:\n  print(e)\n"
            % os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert "GRADREF_LIBRARY: %s (no such file)" % (tmp_path / "missing.so") in out.stdout
