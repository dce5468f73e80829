# SPDX-License-Identifier: Apache-2.0
"""The written acceptance standards NPU kernels are judged by, against a golden
(docs/precision.md has the definitions and their sources):

- CANN's threshold standard: per output dtype a threshold T; MERE and MARE, the mean and the
  largest of |actual - golden| / (|golden| + 1e-7); the case passes when MERE < T and
  MARE < 10 T (cann_threshold).
- CANN's dual-benchmark ratio standard: the NPU's MARE, MERE and RMSE against the golden over a
  third-party device's, per case, within the level's limits on enough cases (cann_ratio).
- Cambricon MLU-OPS' evaluator: diff1 (relative L1), diff2 (relative L2), diff3 (the largest
  relative error, absolute below a floor), diff3_2 (the largest absolute error) and diff4 (the
  share of the distinct unequal pairs where the actual is below: a bias when 0 or 1) (mlu_check).

Each returns a Verdict: .passed, .metrics, .worst (the worst elements: flat index, actual,
golden, relative error) and .report(); bool(verdict) is .passed. Non-finite values are matched
first, as the standards' tools do: a NaN against a NaN and an infinity against the same one
pass and leave the metrics; any other pair with a NaN or an infinity fails the case.
"""
import math

from .testing import _pair

# CANN's thresholds per output dtype (the threshold standard)
CANN_THRESHOLDS = {
    "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -13, "hf32": 2.0 ** -11,
    "float8_e4m3": 2.0 ** -3, "float8_e5m2": 2.0 ** -2,
}
# CANN's ratio standard: the limits on (MARE, MERE, RMSE) ratios and the least case count
CANN_LEVELS = {"L0": ((10.0, 2.0, 2.0), 5000), "L1": ((5.0, 1.5, 1.5), 10000),
               "L2": ((2.0, 1.2, 1.2), 30000)}
# MLU-OPS' evaluator: diff3's floor below which the error is absolute, per dtype
MLU_DIFF3_FLOOR = {"float16": 1e-4, "bfloat16": 1e-4, "float32": 1e-6}
MLU_DEFAULT_THRESHOLDS = {"diff1": 3e-3, "diff2": 3e-3}


class Verdict:
    """A standard's answer on one case or a batch: passed, the metrics, the worst elements
    (flat index, actual, golden, relative error) and why a failing case failed."""

    def __init__(self, standard, passed, metrics, worst=(), reasons=(),
                 worst_label="relative error"):
        self.standard = standard
        self.worst_label = worst_label
        self.passed = bool(passed)
        self.metrics = dict(metrics)
        self.worst = list(worst)
        self.reasons = list(reasons)

    def __bool__(self):
        return self.passed

    def report(self):
        lines = ["%s: %s" % (self.standard, "PASS" if self.passed else "FAIL")]
        for k, v in self.metrics.items():
            lines.append("  %-10s %s" % (k, _fmt(v)))
        lines += ["  " + r for r in self.reasons]
        if self.worst:
            lines.append("  worst elements (index, actual, golden, %s):" % self.worst_label)
            lines += ["    %d  %.9g  %.9g  %.3e" % w for w in self.worst]
        return "\n".join(lines)

    def __repr__(self):
        return "Verdict(%s)" % self.report().replace("\n", "; ")


def _fmt(v):
    return "%.6g" % v if isinstance(v, float) else str(v)


def _values(actual, golden, dtype):
    """(actual, golden) as flat float64 arrays of one shape, and the golden's dtype name."""
    a, _, g, g_name = _pair(actual, golden, dtype, ValueError)
    return a.reshape(-1).astype("float64"), g.reshape(-1).astype("float64"), g_name


def _split_nonfinite(a, g):
    """(finite-pair mask, indices of non-finite pairs that do not match)."""
    import numpy as np
    finite = np.isfinite(a) & np.isfinite(g)
    both_nan = np.isnan(a) & np.isnan(g)
    same_inf = np.isinf(a) & (a == g)
    bad = np.flatnonzero(~finite & ~both_nan & ~same_inf)
    return finite, bad


def _relative(a, g, finite, eps):
    """|a - g| / (|g| + eps) on the finite pairs, 0 elsewhere."""
    import numpy as np
    rel = np.zeros(a.shape)
    rel[finite] = np.abs(a[finite] - g[finite]) / (np.abs(g[finite]) + eps)
    return rel


def _worst(a, g, rel, mask, k=5):
    import numpy as np
    idx = np.flatnonzero(mask)
    order = idx[np.argsort(-rel[idx], kind="stable")[:k]]
    return [(int(i), float(a[i]), float(g[i]), float(rel[i])) for i in order]


def cann_metrics(actual, golden, dtype=None):
    """MARE, MERE (relative errors |a - g| / (|g| + 1e-7)) and RMSE over the finite pairs."""
    import numpy as np
    a, g, _ = _values(actual, golden, dtype)
    finite, _ = _split_nonfinite(a, g)
    rel = _relative(a, g, finite, 1e-7)
    n = int(finite.sum())
    if n == 0:
        return {"MARE": 0.0, "MERE": 0.0, "RMSE": 0.0}
    return {"MARE": float(rel[finite].max()), "MERE": float(rel[finite].mean()),
            "RMSE": float(math.sqrt(np.mean((a[finite] - g[finite]) ** 2)))}


def cann_threshold(actual, golden, out_dtype=None, *, dtype=None):
    """CANN's threshold standard on one case: MERE < T and MARE < 10 T, T by the output dtype
    (out_dtype: a CANN_THRESHOLDS name; default the golden's dtype, which must then be
    float16, bfloat16 or float32)."""
    a, g, g_name = _values(actual, golden, dtype)
    key = str(out_dtype or g_name).lower().replace("torch.", "")
    key = {"bf16": "bfloat16", "f16": "float16", "f32": "float32", "half": "float16",
           "float": "float32", "hifloat32": "hf32"}.get(key, key)
    if key not in CANN_THRESHOLDS:
        raise ValueError("gradref.standards: no CANN threshold for %r; give out_dtype, one of %s"
                         % (key, sorted(CANN_THRESHOLDS)))
    t = CANN_THRESHOLDS[key]
    finite, bad = _split_nonfinite(a, g)
    rel = _relative(a, g, finite, 1e-7)
    m = cann_metrics(a, g)
    reasons = []
    if len(bad):
        reasons.append("%d NaN/Inf elements do not match the golden (first at %d)"
                       % (len(bad), int(bad[0])))
    if not m["MERE"] < t:
        reasons.append("MERE %.3e >= T %.3e" % (m["MERE"], t))
    if not m["MARE"] < 10 * t:
        reasons.append("MARE %.3e >= 10 T %.3e" % (m["MARE"], 10 * t))
    metrics = {"T": t, "MERE": m["MERE"], "MARE": m["MARE"], "elements": a.size}
    return Verdict("CANN threshold (%s)" % key, not reasons, metrics,
                   _worst(a, g, rel, finite), reasons)


def _ratio(npu, third):
    """npu / third; a third-party error of 0 gives 1 when the NPU's is 0 too, else inf."""
    if third > 0:
        return npu / third
    return 1.0 if npu == 0 else math.inf


def cann_ratio(actual, golden, third_party, level="L0", *, dtype=None, min_cases=None):
    """CANN's dual-benchmark ratio standard over a batch: each case's (MARE, MERE, RMSE) of the
    NPU (actual) against the golden over the third party's must be within the level's limits
    (CANN_LEVELS), on at least the level's case count (min_cases overrides it, for a run short
    of it; the verdict says so). actual, golden, third_party: arrays (one case) or sequences
    of arrays (a batch)."""
    limits, need = CANN_LEVELS[level]
    need = need if min_cases is None else int(min_cases)
    cases = _cases(actual, golden, third_party)
    worst_ratio, failing, first = [0.0, 0.0, 0.0], 0, None
    for i, (a, g, t) in enumerate(cases):
        npu, ref = cann_metrics(a, g, dtype), cann_metrics(t, g, dtype)
        r = [_ratio(npu[k], ref[k]) for k in ("MARE", "MERE", "RMSE")]
        worst_ratio = [max(x, y) for x, y in zip(worst_ratio, r)]
        if any(x > lim for x, lim in zip(r, limits)):
            failing += 1
            first = i if first is None else first
    reasons = []
    if failing:
        reasons.append("%d of %d cases past the %s limits %s (first: case %d)"
                       % (failing, len(cases), level, limits, first))
    if len(cases) < need:
        reasons.append("%d cases; %s asks for at least %d" % (len(cases), level, need))
    metrics = {"cases": len(cases), "MARE ratio": worst_ratio[0], "MERE ratio": worst_ratio[1],
               "RMSE ratio": worst_ratio[2]}
    return Verdict("CANN ratio %s" % level, not reasons, metrics, (), reasons)


def _cases(actual, golden, third_party):
    if hasattr(golden, "shape") and not isinstance(golden, (list, tuple)):
        return [(actual, golden, third_party)]
    if not len(actual) == len(golden) == len(third_party):
        raise ValueError("gradref.standards: %d actual, %d golden and %d third-party cases"
                         % (len(actual), len(golden), len(third_party)))
    return list(zip(actual, golden, third_party))


def mlu_metrics(actual, golden, *, dtype=None):
    """MLU-OPS' diff1, diff2, diff3, diff3_2 and diff4 (None below 100 distinct unequal pairs)
    over the finite pairs, as its evaluator computes them."""
    import numpy as np
    a, g, g_name = _values(actual, golden, dtype)
    finite, _ = _split_nonfinite(a, g)
    a, g = a[finite], g[finite]
    err = np.abs(a - g)
    floor = MLU_DIFF3_FLOOR.get(g_name, 0.0)
    ratio = np.where(np.abs(g) < floor, err, err / (np.abs(g) + 1e-9))
    pairs = {(x, y) for x, y in zip(a.tolist(), g.tolist()) if x != y}
    below = sum(1 for x, y in pairs if x < y)
    return {"diff1": float(err.sum() / (np.abs(g).sum() + 1e-9)),
            "diff2": float(math.sqrt(((a - g) ** 2).sum() / ((g ** 2).sum() + 1e-9))),
            "diff3": float(ratio.max()) if ratio.size else 0.0,
            "diff3_2": float(err.max()) if err.size else 0.0,
            "diff4": below / len(pairs) if len(pairs) >= 100 else None}


def mlu_check(actual, golden, thresholds=None, *, dtype=None):
    """MLU-OPS' verdict: each diff in thresholds (default diff1 and diff2 at 3e-3; MLU-OPS sets
    them per operator) at most its threshold, diff4 (when it has 100 distinct unequal pairs)
    strictly between 0 and 1, and every NaN/Inf matched."""
    a, g, _ = _values(actual, golden, dtype)
    thresholds = dict(MLU_DEFAULT_THRESHOLDS if thresholds is None else thresholds)
    m = mlu_metrics(a, g)
    finite, bad = _split_nonfinite(a, g)
    reasons = []
    if len(bad):
        reasons.append("%d NaN/Inf elements do not match the golden (first at %d)"
                       % (len(bad), int(bad[0])))
    for k, t in thresholds.items():
        if k not in m or k == "diff4":
            raise ValueError("gradref.standards: no threshold for %r; diff1, diff2, diff3, "
                             "diff3_2" % (k,))
        if m[k] > t:
            reasons.append("%s %.3e > %.3e" % (k, m[k], t))
    if m["diff4"] is not None and m["diff4"] in (0.0, 1.0):
        reasons.append("diff4 %.0f: every unequal element is %s the golden (a bias)"
                       % (m["diff4"], "above" if m["diff4"] == 0 else "below"))
    rel = _relative(a, g, finite, 1e-9)
    return Verdict("MLU-OPS", not reasons, m, _worst(a, g, rel, finite), reasons)
