#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the include graph of src/ and bench/: no cycle between files (a header and the .c file of the
same name count as one unit, so x.c including x.h is not a cycle), no include from common/ into
an operator's directory, and no include from a kernel file (*_avx2.c, *_avx512*.c, *_neon*.c,
*_sve.c, *_kernels.c) or a kernel header (*_simd.h, *_kernels.h, *_avx2.h, ...) up into its fast path
(*_fast.h, *_fast_impl.h). Exits 1 and says what it found otherwise.
    python3 scripts/include_graph.py"""
import glob
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SRC = os.path.join(ROOT, "src")
BENCH = os.path.join(ROOT, "bench")
KERNEL_FILE = re.compile(r"(_avx2|_avx512\w*|_neon\w*|_sve|_kernels)\.[ch]$|_simd\.h$")
FAST_HEADER = re.compile(r"_fast(_impl)?\.h$")


def includes(path):
    here = os.path.dirname(path)
    for m in re.finditer(r'^\s*#\s*include\s+"([^"]+)"', open(path, encoding="utf-8").read(), re.M):
        name = m.group(1)
        for base in (here, SRC):
            target = os.path.normpath(os.path.join(base, name))
            if os.path.exists(target):
                yield target
                break


def unit(path):
    return os.path.splitext(path)[0]


def main():
    files = sorted(glob.glob(os.path.join(SRC, "**", "*.[ch]"), recursive=True))
    files += sorted(glob.glob(os.path.join(BENCH, "*.[ch]")))
    problems = []
    graph = {}
    for f in files:
        rel = os.path.relpath(f, SRC)
        for t in includes(f):
            trel = os.path.relpath(t, SRC)
            if rel.startswith("common" + os.sep) and not trel.startswith("common" + os.sep):
                problems.append("%s includes %s: common/ must not depend on an operator" % (rel, trel))
            if KERNEL_FILE.search(rel) and FAST_HEADER.search(trel):
                problems.append("%s includes %s: a kernel must not depend on its fast path" % (rel, trel))
            if unit(f) != unit(t):
                graph.setdefault(unit(f), set()).add(unit(t))
    # cycles between units (depth-first search)
    state = {}
    stack = []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                cycle = stack[stack.index(v):] + [v]
                problems.append("cycle: " + " -> ".join(os.path.relpath(c, SRC) for c in cycle))
            elif v not in state:
                visit(v)
        stack.pop()
        state[u] = 2

    for u in sorted(graph):
        if u not in state:
            visit(u)
    for p in problems:
        print(p)
    print("%d files of src/ and bench/ read; %d problems in the include graph"
          % (len(files), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
