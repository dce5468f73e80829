# SPDX-License-Identifier: Apache-2.0
"""What every pair shares: a Pair (operator, upstream, call, dtypes, cases), running a case on
both sides, the comparison against the f64 truth, the per-pair tally and the timing."""
import re
import time

import numpy as np

import truth as tr

try:
    import ml_dtypes
except ImportError:  # the requirements pin it; without it the bf16 rows say so
    ml_dtypes = None


def np_dtype(name):
    if name == "bfloat16":
        return ml_dtypes.bfloat16
    return np.dtype(name)


def cast(a, dtype):
    """An f64 array rounded to dtype (the inputs both sides and the truth read)."""
    return np.asarray(a, np.float64).astype(np_dtype(dtype))


class Refused(Exception):
    """One side does not take the case (its own error), with its message."""


def refusal(e):
    """Refused for an upstream's exception: its class and the first line of its message."""
    return Refused(type(e).__name__ + ": " + str(e).split("\n")[0][:200])


class Pair:
    """One operator against one upstream call.

    gen(rng) -> case (a dict), or None to draw again; inputs(case, dtype) -> dict of arrays;
    ours / theirs(case, arrays) -> list of result arrays (raise Refused when a side rejects
    the case); truth(case, arrays) -> list of (f64 result, magnitude, terms) or None where
    the side's results must be bit-identical (data movers). specials: the inputs that a
    quarter of the cases poison with NaN and infinities (where the upstream defines the
    result); strided: whether half the cases hand gradref strided views of its inputs (the
    same values, every other element of a buffer twice as long in the last dim).
    """

    def __init__(self, operator, upstream, call, ours_call, dtypes, gen, inputs, ours, theirs,
                 truth, timing=None, specials=(), strided=True):
        self.operator, self.upstream = operator, upstream
        self.call, self.ours_call, self.dtypes = call, ours_call, dtypes
        self.gen, self.inputs, self.ours, self.theirs = gen, inputs, ours, theirs
        self.truth, self.timing = truth, timing
        self.specials, self.strided = specials, strided

    def info(self):
        """What the report needs of the pair (plain data)."""
        return {"operator": self.operator, "upstream": self.upstream, "call": self.call,
                "ours_call": self.ours_call}


class Tally:
    """Per pair and dtype: cases, refusals, identical results, results inside the bound, and
    each side's error against the truth relative to the terms' magnitude."""

    def __init__(self):
        self.cases = self.identical = 0
        self.refused = {"gradref": 0, "upstream": 0, "both": 0}
        self.inside = {"gradref": 0, "upstream": 0}
        self.err = {"gradref": [0.0, 0.0, 0], "upstream": [0.0, 0.0, 0]}  # max, sum sq, count
        self.findings, self.kinds = [], {}

    def note(self, kind, case, why=""):
        """A finding for the report: the first three of each kind (refusals by message)."""
        key = (kind, why.split(":")[0] if kind.startswith("refused") else "")
        self.kinds[key] = self.kinds.get(key, 0) + 1
        if self.kinds[key] <= 3:
            self.findings.append((kind, case, why))

    def add_error(self, side, rel):
        e = self.err[side]
        if rel.size:
            e[0] = max(e[0], float(np.max(rel)))
            e[1] += float(np.sum(rel * rel))
            e[2] += rel.size

    def rms(self, side):
        e = self.err[side]
        return (e[1] / e[2]) ** 0.5 if e[2] else 0.0


def _f64(a):
    return np.asarray(a).astype(np.float64)


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype.itemsize != b.dtype.itemsize:
        return False
    return a.tobytes() == b.tobytes()


def _side(fn, case, arrays):
    try:
        return [np.asarray(r) for r in fn(case, arrays)], None
    except Refused as e:
        return None, re.sub(r"\{\{function_node [^}]*\}\} ", "", str(e))[:160]


def _poisoned(arrays, names, seed):
    """Copies of the named float inputs with up to two elements each NaN, +inf or -inf."""
    rng = np.random.default_rng(seed)
    out = dict(arrays)
    for name in names:
        a = np.array(arrays[name])
        if a.size:
            flat = a.reshape(-1)
            for i in rng.integers(0, a.size, 2):
                flat[i] = rng.choice([np.nan, np.inf, -np.inf])
            out[name] = a
    return out


def _strided(a):
    """a's values as a view every other element of a buffer twice as long in the last dim."""
    a = np.asarray(a)
    if a.ndim == 0 or a.dtype.kind not in "fiu":
        return a
    buf = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
    buf[..., ::2] = a
    return buf[..., ::2]


def _inside(r, t, lim):
    """Per element: r within lim of t; where t is NaN or infinite, r of the same class."""
    r = _f64(r)
    special = ~np.isfinite(t)
    same_class = (np.isnan(r) & np.isnan(t)) | (r == t)
    err = np.abs(r - t)
    err[np.isnan(err)] = np.inf
    ok = np.where(special, same_class, err <= lim)
    return ok, np.where(special, np.where(same_class, 0.0, np.inf), err)


def run_case(pair, case, dtype, tally):
    """One case on both sides; records the outcome in tally."""
    arrays = pair.inputs(case, dtype)
    if pair.specials and case["seed"] % 4 == 3:
        arrays = _poisoned(arrays, pair.specials, case["seed"])
    mine = arrays
    if pair.strided and case["seed"] % 2:
        mine = {k: _strided(v) for k, v in arrays.items()}
    ours, why_ours = _side(pair.ours, case, mine)
    theirs, why_theirs = _side(pair.theirs, case, arrays)
    tally.cases += 1
    if ours is None or theirs is None:
        key = "both" if ours is None and theirs is None else \
            ("gradref" if ours is None else "upstream")
        tally.refused[key] += 1
        if key != "both":
            tally.note("refused by " + key, case, why_ours or why_theirs)
        return
    same = len(ours) == len(theirs) and all(_same_bits(a, b) for a, b in zip(ours, theirs))
    tally.identical += same
    truths = pair.truth(case, arrays)
    if truths is None:  # a data mover: only identical counts
        if not same:
            tally.note("different bits", case)
        return
    for side, res in (("gradref", ours), ("upstream", theirs)):
        inside, worst = True, 0.0
        for r, (t, mag, terms, *slack) in zip(res, truths):
            if r.shape != t.shape:
                inside, worst = False, float("inf")
                continue
            out_dtype = r.dtype.name if r.dtype.name in tr.UNIT else dtype
            lim = tr.bound(t, mag, terms, out_dtype, slack=slack[0] if slack else 0.0)
            ok, err = _inside(r, t, lim)
            inside &= bool(np.all(ok))
            scale = np.where(np.isfinite(mag) & (mag > 0), mag, 1.0)
            rel = np.where(err > 0, err / scale, 0.0).ravel()
            tally.add_error(side, rel)
            worst = max(worst, float(rel.max())) if rel.size else worst
        tally.inside[side] += inside
        if not inside:
            tally.note(side + " outside the bound", case, "max error %.1e of sum|terms|" % worst)


def best_ms(fn, repeats=5):
    """The fastest of `repeats` calls, in milliseconds (after one warm-up call)."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3
