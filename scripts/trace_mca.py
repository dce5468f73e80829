#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""llvm-mca's estimate of the instructions an aarch64 program executed between two calls.

    python3 scripts/trace_mca.py PROGRAM MARKER [ARGS...] [--mcpu tsv110]

PROGRAM is a statically linked aarch64 executable that calls the function MARKER (noinline,
empty) before each call of the code to estimate, at least three times. It runs under
qemu-aarch64 with the executed blocks logged (`-d in_asm,exec,nochain`); the instructions run
between MARKER's second and third calls (the code warm, as in a loop) are written out in order
as straight-line code and given to llvm-mca. Prints their count and llvm-mca's total cycles:
branches cost as instructions, not as predictions, and every load hits the cache, so the figure
compares code paths (the executed path of a whole function with its branches, where
insn_mix.py estimates one loop body), not memory behaviour.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

TARGETED = re.compile(r"^(b|bl|b\.\w+|cbz|cbnz|tbz|tbnz|adr|adrp)\s")


def executed_blocks(log):
    """Each translated block's instructions by address, and the addresses in execution order."""
    blocks, order, current = {}, [], None
    with open(log) as f:
        for line in f:
            if line.startswith("IN:") or line.startswith("Trace"):
                current = None
                if line.startswith("Trace"):
                    order.append(int(line.split("[")[1].split("/")[1], 16))
                continue
            m = re.match(r"^0x([0-9a-f]+):\s+[0-9a-f]{8}\s+(.*)$", line)
            if m:
                if current is None:
                    current = int(m.group(1), 16)
                    blocks[current] = []
                blocks[current].append(m.group(2).strip())
    return blocks, order


def stream_between_calls(blocks, order, marker):
    calls = [i for i, pc in enumerate(order) if pc == marker]
    if len(calls) < 3:
        sys.exit(f"the marker ran {len(calls)} times; it must run at least 3")
    lines = []
    for pc in order[calls[1]:calls[2]]:
        for ins in blocks[pc]:
            if TARGETED.match(ins):  # absolute targets: any address assembles as '.'
                ins = re.sub(r"#0x[0-9a-f]+", ".", ins)
            lines.append(ins)
    return lines


def symbol_address(program, name):
    out = subprocess.run(["aarch64-linux-gnu-nm", program], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[2] == name:
            return int(fields[0], 16)
    sys.exit(f"{name} is not a symbol of {program}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("program")
    parser.add_argument("marker")
    parser.add_argument("args", nargs="*")
    parser.add_argument("--mcpu", default="tsv110")
    a = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log, code = os.path.join(tmp, "qemu.log"), os.path.join(tmp, "stream.s")
        subprocess.run(["qemu-aarch64", "-d", "in_asm,exec,nochain", "-D", log, a.program]
                       + a.args, check=True, stdout=subprocess.DEVNULL)
        blocks, order = executed_blocks(log)
        lines = stream_between_calls(blocks, order, symbol_address(a.program, a.marker))
        with open(code, "w") as f:
            f.write("\n".join(lines) + "\n")
        mca = subprocess.run(["llvm-mca", "-mtriple=aarch64", f"-mcpu={a.mcpu}",
                              "-iterations=1", code], capture_output=True, text=True, check=True)
    cycles = re.search(r"^Total Cycles:\s+(\d+)", mca.stdout, re.M)
    print(f"{len(lines)} instructions, {cycles.group(1) if cycles else '?'} cycles ({a.mcpu})")


if __name__ == "__main__":
    main()
