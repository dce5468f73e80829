#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Lists the functions longer than a limit (80 lines by default): the C functions of src/,
from the line that opens a top-level definition to its closing brace (clang-format puts both
at column 0), and every Python function or method of the repository (python/, scripts/,
tests/, bench/), from its def to its last line. The reference loops (*_ref.c,
cbd_megengine.c) mirror their doc pages' formulas and are exempt. Exits 1 when any other
function is longer: scripts/test.sh keeps it so.
    python3 scripts/function_lengths.py [LIMIT]"""
import ast
import glob
import os
import re
import sys

EXEMPT = re.compile(r"(_ref\.c|cbd_megengine\.c)$")


def functions(path):
    """(name, first line, last line) of each top-level function definition: a line at column 0
    that opens a signature (an identifier, then a parenthesis on this line or a wrapped one;
    not an all-capitals name, which is a macro's use), whose signature ends with "{" before any
    ";", through the next "}" at column 0."""
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if re.match(r"^[A-Za-z_][\w \*]*\(", line) and not line.startswith(("typedef", "struct")) \
                and not line.rstrip().endswith(";") and not re.match(r"^[A-Z][A-Z0-9_]*\(", line):
            j = i
            while j < len(lines) and not lines[j].rstrip().endswith("{") \
                    and not lines[j].rstrip().endswith(";"):
                j += 1
            if j < len(lines) and lines[j].rstrip().endswith("{"):
                k = j + 1
                while k < len(lines) and lines[k] != "}":
                    k += 1
                name = re.search(r"(\w+)\s*\(", line)
                yield (name.group(1) if name else "?"), i + 1, k + 1
                i = k + 1
                continue
        i += 1


def python_functions(path):
    """(name, first line, last line) of each function and method of a Python file."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            yield node.name, first, node.end_lineno


def python_files(root):
    for pattern in ("python/**/*.py", "scripts/**/*.py", "tests/**/*.py", "bench/**/*.py"):
        for path in glob.glob(os.path.join(root, pattern), recursive=True):
            if "/build" not in os.path.relpath(path, root):
                yield path


def main():
    limit = int(sys.argv[1]) if len(sys.argv) > 1 else 80
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    long_ones = []
    for path in sorted(glob.glob(os.path.join(root, "src", "**", "*.[ch]"), recursive=True)):
        if EXEMPT.search(path):
            continue
        for name, first, last in functions(path):
            if last - first + 1 > limit:
                long_ones.append((last - first + 1, os.path.relpath(path, root), first, name))
    for path in sorted(set(python_files(root))):
        for name, first, last in python_functions(path):
            if last - first + 1 > limit:
                long_ones.append((last - first + 1, os.path.relpath(path, root), first, name))
    for n, path, first, name in sorted(long_ones, reverse=True):
        print("%s:%d: %s is %d lines (limit %d)" % (path, first, name, n, limit))
    print("%d functions over %d lines outside the reference loops" % (len(long_ones), limit))
    return 1 if long_ones else 0


if __name__ == "__main__":
    sys.exit(main())
