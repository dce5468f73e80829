# SPDX-License-Identifier: Apache-2.0
"""docs/conformance.md from the suite's tallies."""
import triage

HEAD = """# Conformance: gradref against the upstream implementations

Written by `sh scripts/conformance.sh` (tests/conformance/); do not edit by hand. Each row runs
{cases} seeded random cases of one operator through gradref (in the upstream's dialect) and
through the upstream's own CPU call, and measures both against an f64 truth computed from the
same rounded inputs by the operator's formula (tests/conformance/truth.py).

- **identical**: the two results have the same bits.
- **inside bound**: every element's error against the truth is within what any correct kernel
  may make: gamma_n * sum|terms| + u_out * |y| for n terms summed in float32 in any order and
  one rounding to the output dtype (Higham, *Accuracy and Stability of Numerical Algorithms*,
  2nd ed., section 3.1). An upstream that sums in half precision falls outside it by design;
  gradref never may.
- **max / RMS error**: |result - truth| / sum|terms| over every element of every case.
- **refused**: cases a side rejected with its own error (gradref / upstream / both).

Half the cases hand gradref strided views of its inputs (the same values, every other element
of a buffer twice as long in the last dimension; not the recat calls, which FBGEMM requires
contiguous). A quarter of the cases of the grid_sampler3d_grad pairs (the grid), the RoPE pair
(the incoming gradients) and TensorFlow's input-gradient pairs (dy) hold NaN and infinities;
where the truth is NaN or infinite, a result is inside the bound when it is of the same class
(NaN, or the same infinity).

Machine: {cpu}; Python {python}; gradref {gradref}; {threads} threads.

## Upstreams

| distribution | version | status |
|---|---|---|
"""


def _fmt(v):
    return "0" if v == 0 else ("inf" if v == float("inf") else "%.1e" % v)


def _row(pair, dtype, t):
    ran = t.cases - sum(t.refused.values())
    return "| %s | %s | %s | %s | %d | %d/%d/%d | %d | %s | %s | %s / %s | %s / %s |\n" % (
        pair["operator"], pair["call"], pair["ours_call"], dtype, t.cases, t.refused["gradref"],
        t.refused["upstream"], t.refused["both"], t.identical,
        "%d/%d" % (t.inside["gradref"], ran) if t.err["gradref"][2] or ran == 0 else "exact",
        "%d/%d" % (t.inside["upstream"], ran) if t.err["gradref"][2] or ran == 0 else "exact",
        _fmt(t.err["gradref"][0]), _fmt(t.rms("gradref")), _fmt(t.err["upstream"][0]),
        _fmt(t.rms("upstream")))


def _case_text(case):
    keys = [k for k in case if k != "seed"]
    return ", ".join("%s=%s" % (k, case[k]) for k in keys) or "-"


def _findings(results):
    lines = []
    for pair, dtype, t in results:
        if not t.findings:
            continue
        lines.append("\n### %s, %s\n\n" % (pair["call"], dtype))
        seen = {}
        for kind, case, why in t.findings:
            key = (kind, why.split(":")[0] if why and "refused" in kind else "")
            seen[key] = seen.get(key, 0) + 1
            if seen[key] <= 2:
                lines.append("- %s: %s%s\n" % (kind, _case_text(case),
                                                ("; " + why) if why else ""))
    return lines


def render(machine, packages, results, timings):
    out = [HEAD.format(**machine)]
    for dist, version, why in packages:
        out.append("| %s | %s | %s |\n" % (dist, version or "not installed",
                                            why or "ran"))
    out.append("\n## Results\n\n| operator | upstream call | gradref call | dtype | cases | "
               "refused | identical | gradref inside bound | upstream inside bound | "
               "gradref max / RMS error | upstream max / RMS error |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|\n")
    out += [_row(p, d, t) for p, d, t in results]
    out.append("\n## Differences found, triaged\n\n")
    out.append(triage.TEXT)
    out.append("\n## Cases behind the refusals and differences (two of each kind)\n")
    out += _findings(results) or ["\nNone.\n"]
    if timings:
        out.append("\n## Timing (float32, best of 5 after a warm-up, milliseconds)\n\n"
                   "| operator | upstream call | problem | gradref | upstream | upstream / "
                   "gradref |\n|---|---|---|---|---|---|\n")
        for pair, (label, ours, theirs) in timings:
            out.append("| %s | %s | %s | %.3f | %.3f | %.2f |\n" % (
                pair["operator"], pair["call"], label, ours, theirs, theirs / ours))
    return "".join(out)
