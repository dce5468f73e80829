#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The instruction mix of a kernel's loops, from the aarch64 disassembly, and llvm-mca's estimate.

    python3 scripts/insn_mix.py OBJECT FUNCTION [--mcpu tsv110] [--objdump aarch64-linux-gnu-objdump]

For each loop of FUNCTION in OBJECT (a backward branch inside the function: its target to the
branch), those with FMAs first and the innermost first among them, prints how many vector FMAs, other FP operations, loads, stores,
shuffles and others it holds, the FMA share, and, when llvm-mca is on PATH, the cycles per
iteration it estimates for that core (tsv110: LLVM's model of Kunpeng 920's core). A loop
that calls a function is marked: its estimate leaves the call out.
"""
import argparse
import re
import shutil
import subprocess
import sys

CLASSES = [
    ("fma", re.compile(r"^(fmla|fmls|fmadd|fmsub|fnmadd|fnmsub|sdot|udot|bfmmla|bfdot)$")),
    ("fp", re.compile(r"^f[a-z0-9]+$|^(scvtf|ucvtf|bfcvt[a-z0-9]*)$")),
    ("load", re.compile(r"^ld[a-z0-9]*$")),
    ("store", re.compile(r"^st[a-z0-9]*$")),
    ("shuffle", re.compile(r"^(dup|ins|zip[12]|uzp[12]|trn[12]|ext|tbl|tbx|rev[0-9]*|xtn2?|uxtl2?|sxtl2?|ushll2?|sshll2?)$")),
    ("branch", re.compile(r"^(b|bl|blr|br|ret|cbz|cbnz|tbz|tbnz|b\.[a-z]+)$")),
]


def classify(mnemonic, operands):
    if mnemonic == "mov" and "[" in operands and "v" in operands:
        return "shuffle"  # a lane move
    for name, pattern in CLASSES:
        if pattern.match(mnemonic):
            return name
    return "other"


def disassemble(objdump, obj, function):
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", obj], check=True,
                         capture_output=True, text=True).stdout
    insns, inside = [], False
    for line in out.splitlines():
        head = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if head:
            inside = head.group(1) == function
            continue
        if not inside:
            continue
        m = re.match(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
        if m:
            insns.append((int(m.group(1), 16), m.group(2), m.group(3).split("//")[0].strip()))
    return insns


def loops(insns):
    """(first, last) index pairs of backward branches' bodies, innermost (shortest) first."""
    at = {addr: i for i, (addr, _, _) in enumerate(insns)}
    found = []
    for i, (addr, mnem, ops) in enumerate(insns):
        if classify(mnem, ops) != "branch" or mnem in ("ret", "bl", "blr", "br"):
            continue
        target = re.search(r"\b([0-9a-f]+) <", ops)
        if target and int(target.group(1), 16) <= addr and int(target.group(1), 16) in at:
            found.append((at[int(target.group(1), 16)], i))
    fmas = lambda p: sum(classify(m, o) == "fma" for _, m, o in insns[p[0]:p[1] + 1])
    return sorted(set(found), key=lambda p: (fmas(p) == 0, p[1] - p[0]))


def mca(body, mcpu):
    if not shutil.which("llvm-mca"):
        return None
    text = "\n".join(f"{m} {o}" for _, m, o in body if classify(m, o) != "branch"
                     or m.startswith("b."))
    text = re.sub(r"\s+[0-9a-f]+ <[^>]*>", " .Lx", text) + "\n.Lx:\n"
    res = subprocess.run(["llvm-mca", "-mtriple=aarch64", f"-mcpu={mcpu}", "-iterations=200"],
                         input=text, capture_output=True, text=True)
    cycles = re.search(r"Total Cycles:\s+(\d+)", res.stdout)
    return int(cycles.group(1)) / 200 if cycles else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("object")
    ap.add_argument("function")
    ap.add_argument("--mcpu", default="tsv110")
    ap.add_argument("--objdump", default="aarch64-linux-gnu-objdump")
    ap.add_argument("--most", type=int, default=4, help="how many loops to print")
    a = ap.parse_args()
    insns = disassemble(a.objdump, a.object, a.function)
    if not insns:
        sys.exit(f"{a.function}: not in {a.object}")
    print(f"{a.function}: {len(insns)} instructions, "
          f"{sum(classify(m, o) == 'fma' for _, m, o in insns)} FMAs in all")
    for first, last in loops(insns)[:a.most]:
        body = insns[first:last + 1]
        counts = {}
        for _, m, o in body:
            counts[classify(m, o)] = counts.get(classify(m, o), 0) + 1
        calls = any(m in ("bl", "blr") for _, m, _ in body)
        share = counts.get("fma", 0) / len(body)
        est = mca(body, a.mcpu)
        mix = ", ".join(f"{counts.get(k, 0)} {k}" for k, _ in CLASSES) + f", {counts.get('other', 0)} other"
        print(f"  loop {body[0][0]:#x}-{body[-1][0]:#x}: {len(body)} instructions ({mix}); "
              f"FMA share {share:.0%}" + (f"; {est:.1f} cycles/iteration on {a.mcpu}" if est else "")
              + ("; calls a function" if calls else ""))


if __name__ == "__main__":
    main()
