# SPDX-License-Identifier: Apache-2.0
"""Random 3-D grid_sample problems, shared by the PyTorch and Paddle pairs.

The truth is the upstream's own call in float64 on the rounded inputs. dx is linear in
grad_output with nonnegative weights, so the same call on |grad_output| gives its magnitude
exactly; dgrid's terms are grad_output * x * a weight derivative, whose absolute sum over the
8 corners is at most 2 * scale * max|x| * sum_c |grad_output| (scale = (size - 1) / 2 with
align_corners, size / 2 without). Both add the coordinates' float32 rounding (a slack)."""
import numpy as np

import harness

MODES = ["bilinear", "nearest"]
PADDINGS = ["zeros", "border", "reflection"]


def timing(ours, theirs):
    """The timing row's (label, case, ours, theirs): one problem for every pair."""
    case = {"n": 2, "c": 16, "in": [16, 16, 16], "out": [16, 16, 16], "mode": "bilinear",
            "padding": "zeros", "align": False, "spread": 1.0, "seed": 7}
    return "N2 C16 16^3 -> 16^3 bilinear zeros", case, ours, theirs


def gen(rng):
    case = {"n": int(rng.choice([0, 1, 1, 2])) if rng.random() < 0.9 else 1,
            "c": int(rng.integers(1, 5)), "in": [int(v) for v in rng.integers(1, 6, 3)],
            "out": [int(v) for v in rng.integers(1, 5, 3)],
            "mode": str(rng.choice(MODES)), "padding": str(rng.choice(PADDINGS)),
            "align": bool(rng.integers(0, 2)), "spread": float(rng.choice([0.9, 1.2, 3.0])),
            "seed": int(rng.integers(1 << 31))}
    return case


def inputs(case, dtype):
    """x (N, C, D, H, W), grid (N, D', H', W', 3) in [-spread, spread], grad_output."""
    rng = np.random.default_rng(case["seed"])
    n, c = case["n"], case["c"]
    grid = rng.uniform(-case["spread"], case["spread"], [n] + case["out"] + [3])
    return {"x": harness.cast(rng.standard_normal([n, c] + case["in"]), dtype),
            "grid": harness.cast(grid, dtype),
            "go": harness.cast(rng.standard_normal([n, c] + case["out"]), dtype)}


def truth(case, a, call_f64):
    """[(dx, |dx| terms, n), (dgrid, bound of its terms, n)] from call_f64(go, x, grid) ->
    (dx, dgrid) in float64."""
    go, x, grid = (np.asarray(a[k], np.float64) for k in ("go", "x", "grid"))
    dx, dgrid = call_f64(go, x, grid)
    dx_mag, _ = call_f64(np.abs(go), x, grid)
    n = len(go)
    size = np.array(case["in"][::-1], np.float64)  # grid's (x, y, z) index (W, H, D)
    scale = (size - 1) / 2 if case["align"] else size / 2
    per_point = np.abs(go).sum(axis=1)  # (N, D', H', W')
    xmax = np.abs(x).reshape(n, -1).max(axis=1) if x.size else np.zeros(n)
    dgrid_mag = 2 * scale * (xmax.reshape(n, 1, 1, 1) * per_point)[..., None]
    if case["mode"] == "nearest":
        dgrid_mag = np.zeros_like(dgrid_mag)
    corners = 8 if case["mode"] == "bilinear" else 1
    slack = _coordinate_slack(go, x, grid, dx, dgrid, call_f64)
    return [(dx, dx_mag, corners * int(np.prod(case["out"])), slack[0]),
            (dgrid, dgrid_mag, 8 * case["c"], slack[1])]


def _coordinate_slack(go, x, grid, dx, dgrid, call_f64):
    """Both sides compute the sampling coordinates in float32 from the grid: 4 times the
    truth's change when each grid axis moves by 8 float32 ulps (its first-order sensitivity
    to that rounding) is added to the bound."""
    slack = [np.zeros_like(dx), np.zeros_like(dgrid)]
    with np.errstate(invalid="ignore"):  # NaN and infinite coordinates (specials)
        return _slack_axes(go, x, grid, dx, dgrid, call_f64, slack)


def _slack_axes(go, x, grid, dx, dgrid, call_f64, slack):
    """_coordinate_slack's sum over the three grid axes."""
    for axis in range(3):
        moved = grid.copy()
        moved[..., axis] += 8 * 2.0 ** -24 * (np.abs(grid[..., axis]) + 1)
        for i, r in enumerate(call_f64(go, x, moved)):
            slack[i] += 4 * np.abs(r - (dx, dgrid)[i])
    return slack
