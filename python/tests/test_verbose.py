# SPDX-License-Identifier: Apache-2.0
"""GRADREF_VERBOSE through the package: the library reads it when it loads, so each case runs
in a fresh interpreter and reads its stderr."""
import os
import subprocess
import sys

SCRIPT = """
import numpy as np
import gradref
w = np.ones((4, 4, 3, 3), np.float32)
d = np.ones((2, 4, 6, 6), np.float32)
gradref.conv_backprop_data(w, d, pad=1, threads=1)
"""


def run(verbose):
    env = dict(os.environ)
    env.pop("GRADREF_VERBOSE", None)
    if verbose is not None:
        env["GRADREF_VERBOSE"] = verbose
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    return [line for line in done.stderr.splitlines() if line.startswith("gradref_verbose,")]


def test_one_line_per_call():
    lines = run("1")
    assert len(lines) == 1
    fields = lines[0].split(",")
    assert len(fields) == 10
    assert fields[1:3] == ["conv_backprop_data", "phases"]
    assert fields[4:6] == ["1", "DEFAULT"]
    assert "filter:F32:4x4x3x3:36x9x3x1" in fields[6]
    assert float(fields[9]) >= 0


def test_silent_unset_or_zero():
    assert run(None) == []
    assert run("0") == []
