# SPDX-License-Identifier: Apache-2.0
"""Runs every pair (gradref against one upstream call) over seeded random cases and writes
the report (docs/conformance.md). scripts/conformance.sh sets up the environment and calls it:

    python run.py [--cases N] [--only SUBSTRING] [--no-timing] [--out FILE]
"""
import argparse
import importlib
import importlib.metadata
import os
import pickle
import platform
import sys
import zlib

import numpy as np

import harness
import report

# each module: the distribution it tests (its version goes in the report)
MODULES = [("pairs_tf", "tensorflow-cpu"), ("pairs_jax", "jax"), ("pairs_torch", "torch"),
           ("pairs_fbgemm", "fbgemm-gpu-cpu"), ("pairs_paddle", "paddlepaddle"),
           ("pairs_mindspore", "mindspore")]


def _version(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def load_pairs(module, dist):
    """(pairs, (distribution, version or None, why not run))."""
    version = _version(dist)
    try:
        return importlib.import_module(module).PAIRS, (dist, version, "")
    except Exception as e:  # an upstream that cannot be had is a row saying why
        why = "%s: %s" % (type(e).__name__, str(e).split("\n")[0][:200])
        return [], (dist, version, why)


def run_pair(pair, dtype, cases):
    tally = harness.Tally()
    if dtype == "bfloat16" and harness.ml_dtypes is None:
        tally.findings.append(("not run", {}, "ml_dtypes is not installed"))
        return tally
    rng = np.random.default_rng(zlib.crc32((pair.call + dtype).encode()))
    done = 0
    while done < cases:
        case = pair.gen(rng)
        if case is None:
            continue
        harness.run_case(pair, case, dtype, tally)
        done += 1
    return tally


def time_pair(pair):
    label, case, ours, theirs = pair.timing
    arrays = pair.inputs(case, "float32")
    return (label, harness.best_ms(lambda: ours(case, arrays)),
            harness.best_ms(lambda: theirs(case, arrays)))


def run_module(module, dist, args):
    """Every pair of one upstream module; the results as plain data (for --save)."""
    pairs, package = load_pairs(module, dist)
    results, timings = [], []
    for pair in pairs:
        if args.only not in pair.call and args.only not in pair.operator:
            continue
        for dtype in pair.dtypes:
            print("%-24s %-52s %-8s" % (pair.operator[:24], pair.call[:52], dtype),
                  file=sys.stderr, end="", flush=True)
            tally = run_pair(pair, dtype, args.cases)
            results.append((pair.info(), dtype, tally))
            print(" %d cases, %d identical, %d/%d inside" % (
                tally.cases, tally.identical, tally.inside["gradref"], tally.inside["upstream"]),
                file=sys.stderr)
        if pair.timing and not args.no_timing:
            timings.append((pair.info(), time_pair(pair)))
    return {"package": package, "results": results, "timings": timings}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=200, help="cases per pair and dtype")
    ap.add_argument("--only", default="", help="run the pairs whose call contains this")
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--module", help="run one module (each upstream in its own process: "
                    "two that bundle oneDNN disturb each other)")
    ap.add_argument("--save", help="with --module: where its results go (pickle)")
    ap.add_argument("--report", nargs="*", help="saved results to render")
    ap.add_argument("--out", default=None, help="the report to write (default: stdout)")
    args = ap.parse_args()
    if args.module:
        data = run_module(args.module, dict(MODULES)[args.module], args)
        with open(args.save, "wb") as f:
            pickle.dump(data, f)
        return
    saved = []
    for name in args.report or []:
        with open(name, "rb") as f:
            saved.append(pickle.load(f))
    machine = {"cpu": _cpu(), "python": platform.python_version(),
               "gradref": __import__("gradref").version(), "cases": args.cases,
               "threads": os.cpu_count()}
    text = report.render(machine, [d["package"] for d in saved],
                         [r for d in saved for r in d["results"]],
                         [t for d in saved for t in d["timings"]])
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def _cpu():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


if __name__ == "__main__":
    main()
