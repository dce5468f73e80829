# SPDX-License-Identifier: Apache-2.0
"""gradref.standards against cases computed by hand, and the compare CLI on .npy and CANN .bin
files."""
import math

import numpy as np
import pytest

from gradref import standards
from gradref.__main__ import main


def test_cann_threshold_by_hand():
    g = np.array([1.0, 2.0, 4.0, 0.0], np.float32)
    a = np.array([1.0001, 2.0, 4.0, 0.0], np.float32)
    v = standards.cann_threshold(a, g)
    rel = abs(float(np.float32(1.0001)) - 1.0) / (1.0 + 1e-7)
    assert v.metrics["T"] == 2.0 ** -13
    assert v.metrics["MARE"] == pytest.approx(rel, rel=1e-12)
    assert v.metrics["MERE"] == pytest.approx(rel / 4, rel=1e-12)
    assert v.passed and bool(v)
    # MERE = 1.25e-4 >= T = 1.22e-4 while MARE = 5e-4 < 10 T: fails by MERE alone
    v = standards.cann_threshold(np.array([1.0005, 2, 4, 0], np.float32), g)
    assert not v.passed
    assert any(r.startswith("MERE") for r in v.reasons)
    assert not any(r.startswith("MARE") for r in v.reasons)
    assert v.worst[0][0] == 0


def test_cann_threshold_dtypes_and_zero_golden():
    g = np.zeros(8, np.float16)
    a = g.copy()
    a[3] = np.float16(1e-7)  # rounds to a subnormal: relative error |a| / 1e-7 past 10 T
    v = standards.cann_threshold(a, g)
    assert v.metrics["T"] == 2.0 ** -10 and not v.passed
    assert standards.cann_threshold(a.astype(np.float32), g.astype(np.float32),
                                    "hf32").metrics["T"] == 2.0 ** -11
    with pytest.raises(ValueError):
        standards.cann_threshold(np.zeros(2, np.float64), np.zeros(2, np.float64))


def test_nonfinite_pairs():
    g = np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)
    assert standards.cann_threshold(g.copy(), g).passed
    assert standards.mlu_check(g.copy(), g).passed
    a = g.copy()
    a[1] = 3.0e38  # a finite value where the golden is +inf
    for v in (standards.cann_threshold(a, g), standards.mlu_check(a, g)):
        assert not v.passed and "NaN/Inf" in v.reasons[0] and "first at 1" in v.reasons[0]


def test_mlu_metrics_by_hand():
    g = np.array([1.0, -2.0, 3.0, 4.0], np.float32)
    a = np.array([1.1, -2.0, 3.0, 3.9], np.float32)
    m = standards.mlu_metrics(a, g)
    e0, e3 = float(np.float32(1.1)) - 1.0, 4.0 - float(np.float32(3.9))
    assert m["diff1"] == pytest.approx((e0 + e3) / (10 + 1e-9), rel=1e-12)
    assert m["diff2"] == pytest.approx(math.sqrt((e0 ** 2 + e3 ** 2) / (30 + 1e-9)), rel=1e-12)
    assert m["diff3"] == pytest.approx(e0 / (1 + 1e-9), rel=1e-12)
    assert m["diff3_2"] == pytest.approx(e0, rel=1e-12)
    assert m["diff4"] is None  # fewer than 100 distinct unequal pairs
    v = standards.mlu_check(a, g)
    assert not v.passed and "diff1" in v.reasons[0]
    assert standards.mlu_check(a, g, {"diff1": 0.03, "diff2": 0.03}).passed
    # diff3's floor: below 1e-6 (float32) the error is absolute
    small = standards.mlu_metrics(np.array([2e-7], np.float32), np.array([1e-7], np.float32))
    assert small["diff3"] == pytest.approx(float(np.float32(2e-7)) - float(np.float32(1e-7)))


def test_mlu_diff4_bias():
    g = np.linspace(1, 2, 400).astype(np.float32)
    up = g * np.float32(1 + 2 ** -20)
    v = standards.mlu_check(up, g, {"diff1": 1.0})
    assert v.metrics["diff4"] == 0.0 and not v.passed and "bias" in v.reasons[0]
    both = g.copy()
    both[::2] *= np.float32(1 + 2 ** -20)
    both[1::2] *= np.float32(1 - 2 ** -20)
    v = standards.mlu_check(both, g, {"diff1": 1.0})
    assert v.metrics["diff4"] == pytest.approx(0.5, abs=0.01) and v.passed


def test_cann_ratio_levels():
    rng = np.random.default_rng(3)
    golden = [rng.standard_normal(64) for _ in range(4)]
    third = [x + 1e-6 * rng.standard_normal(64) for x in golden]
    npu = [x + 2 * (t - x) for x, t in zip(golden, third)]  # twice the third party's error
    v = standards.cann_ratio(npu, golden, third, "L0", min_cases=4)
    assert v.passed
    assert v.metrics["MERE ratio"] == pytest.approx(2.0, rel=1e-6)
    v = standards.cann_ratio(npu, golden, third, "L1", min_cases=4)
    assert not v.passed and "4 of 4 cases" in v.reasons[0]
    v = standards.cann_ratio(npu, golden, third, "L0")  # 4 cases, L0 asks for 5000
    assert not v.passed and "at least 5000" in v.reasons[0]
    exact = standards.cann_ratio(golden[0], golden[0], golden[0], "L2", min_cases=1)
    assert exact.passed and exact.metrics["RMSE ratio"] == 1.0


def test_compare_cli(tmp_path, capsys):
    g = np.array([1.0, 2.0, 4.0, 0.5], np.float32)
    np.save(tmp_path / "g.npy", g)
    np.save(tmp_path / "a.npy", g * np.float32(1 + 2 ** -20))
    (g * np.float32(1.001)).astype("<f4").tofile(tmp_path / "bad.bin")
    assert main(["compare", str(tmp_path / "a.npy"), str(tmp_path / "g.npy")]) == 0
    assert "CANN threshold (float32): PASS" in capsys.readouterr().out
    bad = str(tmp_path / "bad.bin") + ":float32:4"
    assert main(["compare", bad, str(tmp_path / "g.npy")]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "worst elements" in out
    assert main(["compare", bad, str(tmp_path / "g.npy"), "--standard", "mlu",
                 "--threshold", "diff1=1e-2", "--threshold", "diff2=1e-2"]) == 0
    assert main(["compare", bad, str(tmp_path / "g.npy"), "--standard", "cann-ratio",
                 "--third-party", str(tmp_path / "a.npy"), "--min-cases", "1"]) == 1
    assert main(["compare", bad, str(tmp_path / "g.npy"), "--standard", "cann-ratio"]) == 2
