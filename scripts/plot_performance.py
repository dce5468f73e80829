#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Draws docs/performance.svg from gradref-bench --csv files, and prints the thread-scaling
table (1 -> 2 threads) of docs/performance.md.

    build/bench/gradref-bench -t 2 --csv > bench-2t.csv
    build/bench/gradref-bench -t 1 --csv > bench-1t.csv
    /usr/bin/python3 bench/peers/gs3d_torch.py 2 --csv > torch-2t.csv
    /usr/bin/python3 scripts/plot_performance.py bench-2t.csv bench-1t.csv \
        --peer torch-2t.csv [-o docs/performance.svg]

One panel per operator; one bar group per problem; one colour per machine (and ISA level).
A bar is gradref's rate over its same-run baseline (oneDNN for the convolutions, PyTorch's
rate where a CSV gives one, a plain copy of the same bytes for the data movers): the line at
1 is the baseline. The hatched bar beside it is the same with a NULL workspace. Only rows at
the largest thread count in the files are drawn. Needs Debian's python3-matplotlib.
"""
import argparse
import collections
import csv
import sys

OPERATORS = ["recat", "rope", "grid_sampler3d_grad", "conv_backprop_data",
             "conv3d_backprop_filter"]


def read_rows(paths):
    rows = []
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                row["threads"] = int(row["threads"])
                for key in ("ms", "ms_null_workspace", "rate", "baseline", "ratio"):
                    row[key] = float(row[key])
                rows.append(row)
    return rows


def add_peer(rows, path):
    """Rates of a peer measured apart (gs3d_torch.py --csv) as the baseline of the rows of the
    same problem that have none."""
    with open(path, newline="") as f:
        peer = {r["problem"]: float(r["rate"]) for r in csv.DictReader(f)}
    for r in rows:
        if r["baseline"] == 0 and peer.get(r["problem"], 0) > 0:
            r["baseline"] = peer[r["problem"]]
            r["ratio"] = r["rate"] / r["baseline"]


def short(problem, op):
    text = problem[len(op):].strip() if problem.startswith(op) else problem
    return text if len(text) <= 34 else text[:32] + "…"


def scaling_table(rows):
    """Markdown: per machine, ISA and problem, the 1- and 2-thread times and the speed-up."""
    by = collections.defaultdict(dict)
    for r in rows:
        by[(r["machine"], r["isa"], r["problem"])][r["threads"]] = r["ms"]
    lines = ["| machine | ISA | problem | 1 thread ms | 2 threads ms | speed-up |",
             "|---|---|---|---|---|---|"]
    for (machine, isa, problem), t in sorted(by.items()):
        if 1 in t and 2 in t:
            lines.append("| %s | %s | %s | %.3f | %.3f | %.2f× |"
                         % (machine, isa, problem, t[1], t[2], t[1] / t[2]))
    return "\n".join(lines) if len(lines) > 2 else ""


def plot(rows, out):
    import matplotlib
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "gradref"  # stable ids: the file diffs cleanly
    import matplotlib.pyplot as plt

    top = max(r["threads"] for r in rows)
    rows = [r for r in rows if r["threads"] == top and r["baseline"] > 0]
    ops = [op for op in OPERATORS if any(r["operator"] == op for r in rows)]
    series = sorted({(r["machine"], r["isa"]) for r in rows})
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, axes = plt.subplots(len(ops), 1, figsize=(11, 3.2 * len(ops)), squeeze=False)
    for ax, op in zip(axes[:, 0], ops):
        problems = [p for p in dict.fromkeys(r["problem"] for r in rows if r["operator"] == op)]
        width = 0.8 / (2 * len(series))
        for s, (machine, isa) in enumerate(series):
            for k, problem in enumerate(problems):
                match = [r for r in rows if r["problem"] == problem and r["machine"] == machine
                         and r["isa"] == isa]
                if not match:
                    continue
                r = match[0]
                x = k - 0.4 + (2 * s + 0.5) * width
                label = "%s, %s" % (machine, isa) if k == 0 else None
                ax.bar(x, r["ratio"], width, color=colours[s % len(colours)], label=label)
                null_ratio = r["ratio"] * r["ms"] / r["ms_null_workspace"]
                ax.bar(x + width, null_ratio, width, color="none",
                       edgecolor=colours[s % len(colours)], hatch="//",
                       label="(hatched: NULL workspace)" if k == 0 and s == 0 else None)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(problems)))
        ax.set_xticklabels([short(p, op) for p in problems], rotation=12, fontsize=7)
        baseline = "oneDNN" if op.startswith("conv") else (
            "PyTorch" if op == "grid_sampler3d_grad" else "copy of the same bytes")
        ax.set_ylabel("× " + baseline)
        ax.set_title("%s, %d thread(s)" % (op, top), fontsize=10)
        ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(out, metadata={"Date": None})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="+", help="gradref-bench --csv output files")
    ap.add_argument("-o", "--output", default="docs/performance.svg")
    ap.add_argument("--peer", action="append", default=[],
                    help="problem,rate CSV of a peer timed apart (bench/peers/gs3d_torch.py)")
    args = ap.parse_args(argv)
    rows = read_rows(args.csv)
    for path in args.peer:
        add_peer(rows, path)
    if not rows:
        print("plot_performance: no rows in %s" % ", ".join(args.csv), file=sys.stderr)
        return 1
    plot(rows, args.output)
    print("wrote %s" % args.output)
    table = scaling_table(rows)
    if table:
        print()
        print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
