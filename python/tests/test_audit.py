# SPDX-License-Identifier: Apache-2.0
"""What an audit found in the package and the CLI, one test each: the CLI runs
conv3d_backprop_filter, qs8_scales, out_dtype and lower-case booleans; assert_close honours
tolerances on integers and stays quiet on zeros; ints too wide for the C fields and non-boolean
flags are refused; an output too large to allocate is a gradref error; messages speak the
Python caller's names."""
import warnings

import numpy as np
import pytest

import gradref
from gradref import testing
from test_cli import cli, save


def conv3d_reference(x, dy, k):
    """dw (kd, kh, kw, cin, cout) of a stride-1 VALID NDHWC convolution, in float64."""
    n, d, h, w, cin = x.shape
    cout = dy.shape[-1]
    dw = np.zeros(tuple(k) + (cin, cout))
    for a in range(k[0]):
        for b in range(k[1]):
            for c in range(k[2]):
                patch = x[:, a:a + dy.shape[1], b:b + dy.shape[2], c:c + dy.shape[3], :]
                dw[a, b, c] = np.einsum("ndhwi,ndhwo->io", patch, dy)
    return dw


def test_cli_runs_conv3d_backprop_filter(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 5, 6, 3)).astype(np.float32)
    dy = rng.standard_normal((2, 3, 4, 5, 2)).astype(np.float32)
    r = cli("conv3d_backprop_filter", *save(tmp_path, input=x, out_backprop=dy),
            "--attr", "filter_sizes=[2,2,2,3,2]", "--attr", "strides=[1,1,1,1,1]",
            "--attr", "padding=VALID", "--attr", "data_format=NDHWC", "--out-dir", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    dw = np.load(tmp_path / "o" / "dw.npy")
    np.testing.assert_allclose(dw, conv3d_reference(x.astype(np.float64), dy, (2, 2, 2)),
                               rtol=1e-5, atol=1e-5)


def test_cli_f32_output_of_f16_inputs_and_lower_case_booleans(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 3, 3, 3, 2)).astype(np.float16)
    dy = rng.standard_normal((1, 2, 2, 2, 2)).astype(np.float16)
    r = cli("conv3d_backprop_filter", *save(tmp_path, input=x, out_backprop=dy),
            "--attr", "filter_sizes=[2,2,2,2,2]", "--attr", "strides=[1,1,1,1,1]",
            "--attr", "padding=VALID", "--attr", "data_format=NDHWC", "--attr", "out_dtype=float32", "--attr", "strict=false",
            "--out-dir", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    assert np.load(tmp_path / "o" / "dw.npy").dtype == np.float32
    g = rng.standard_normal((1, 1, 2, 2, 2)).astype(np.float32)
    inp = rng.standard_normal((1, 1, 3, 3, 3)).astype(np.float32)
    grid = rng.uniform(-1, 1, (1, 2, 2, 2, 3)).astype(np.float32)
    r = cli("grid_sampler3d_grad", *save(tmp_path, grad_output=g, input=inp, grid=grid),
            "--attr", "interpolation_mode=bilinear", "--attr", "padding_mode=zeros",
            "--attr", "align_corners=false", "--out-dir", tmp_path / "g")
    assert r.returncode == 0, r.stderr
    # strict=false is false: F64 channels-last, which strict CANN refuses, runs
    want = gradref.grid_sampler3d_grad(g, inp, grid, 0, 0, False)
    np.testing.assert_array_equal(np.load(tmp_path / "g" / "dx.npy"), want[0])


def test_cli_qs8_scales(tmp_path):
    f = np.array([[[[3]]]], dtype=np.int8)
    d = np.array([[[[5]]]], dtype=np.int8)
    r = cli("conv_backprop_data", *save(tmp_path, filter=f, diff=d),
            "--attr", "qs8_scales=(0.5, 0.5, 0.25)", "--out-dir", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    grad = np.load(tmp_path / "o" / "grad.npy")
    assert grad.dtype == np.int8 and grad.item() == 15  # 15 * 0.25 / 0.25


def test_cli_message_has_one_prefix(tmp_path):
    go = np.zeros((2, 5), dtype=np.float32)
    r = cli("recat_embedding_grad_output_mixed_D", *save(tmp_path, grad_output=go),
            "--attr", "dim_sum_per_rank=[2, 18446744073709551618]", "--out-dir", tmp_path)
    assert r.returncode == 2
    assert r.stderr.count("gradref:") == 1, r.stderr


def test_assert_close_integer_tolerances():
    a = np.array([1, 2, 3], dtype=np.int8)
    g = np.array([2, 2, 2], dtype=np.int8)
    testing.assert_close(a, g, rtol=0, atol=1)  # MegEngine's int8 test allows +-1
    with pytest.raises(AssertionError):
        testing.assert_close(a, g)
    with pytest.raises(AssertionError):
        testing.assert_close(np.array([0, 4], dtype=np.int32), np.array([0, 2], dtype=np.int32),
                             atol=1)


def test_assert_close_quiet_on_zero_golden():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        testing.assert_close(np.zeros(3, np.float32), np.zeros(3, np.float32))
        with pytest.raises(AssertionError):
            testing.assert_close(np.array([1.0, 0.0]), np.array([0.0, 0.0]))


@pytest.mark.parametrize("call", [
    lambda: gradref.rope_grad(*[np.zeros((3, 4), np.float32)] * 2,
                              *[np.zeros((3, 4), np.float32)] * 2, seq_len=[2 ** 32 + 3]),
    lambda: gradref.recat_embedding_grad_output_mixed_D(np.zeros((2, 5), np.float32),
                                                         [2 ** 64 + 2, 3]),
    lambda: gradref.recat_embedding_grad_output_mixed_D(np.zeros((2, 5), np.float32), [2, 3],
                                                         threads=2 ** 32 + 1),
    lambda: gradref.conv3d_backprop_filter(np.zeros((1, 2, 2, 2, 2), np.float32), [1, 1, 1, 1, 2],
                                           np.zeros((1, 2, 2, 2, 2), np.float32), [1] * 5,
                                           "VALID", "NDHWC", groups=2 ** 32 + 1),
])
def test_ints_too_wide_for_c_are_refused(call):
    with pytest.raises(ValueError, match="does not fit the library's"):
        call()


@pytest.mark.parametrize("kwargs", [{"align_corners": 2 ** 32}, {"strict": "yes"},
                                    {"strict": 2}, {"output_mask": (1, 7)}])
def test_flags_must_be_booleans(kwargs):
    args = dict(align_corners=False)
    args.update(kwargs)
    align = args.pop("align_corners")
    with pytest.raises(TypeError, match="must be True or False"):
        gradref.grid_sampler3d_grad(np.zeros((1, 1, 1, 1, 1), np.float32),
                                    np.zeros((1, 1, 1, 1, 1), np.float32),
                                    np.zeros((1, 1, 1, 1, 3), np.float32), 0, 0, align, **args)


def test_unallocatable_output_is_a_gradref_error():
    x = np.broadcast_to(np.zeros(1, np.float32), (1, 1, 1 << 20, 1 << 20, 1 << 20))
    with pytest.raises(gradref.Error) as e:
        gradref.grid_sampler3d_grad(np.zeros((1, 1, 1, 1, 1), np.float32), x,
                                    np.zeros((1, 1, 1, 1, 3), np.float32), 0, 0, False)
    assert e.value.status_name in ("GRADREF_ERR_NO_MEMORY", "GRADREF_ERR_OVERFLOW")
    assert "dx of shape" in e.value.message


def test_messages_use_python_names():
    q = np.zeros((3, 4), np.float32)
    with pytest.raises(gradref.Error) as e:
        gradref.rope_grad(q, q, q, q, seq_len=[2, 2], mode="half")
    assert "seq_len" in e.value.message and "p.seq_lens" not in e.value.message
    with pytest.raises(gradref.Error) as e:
        gradref.rope_grad(q, q, q, q, seq_len=[3], mode="half", threads=-1)
    assert "threads" in e.value.message and "exec.num_threads" not in e.value.message
    x = np.zeros((1, 3, 3, 3, 1), np.float32)
    with pytest.raises(gradref.Error) as e:
        gradref.conv3d_backprop_filter(x, [2, 2, 2, 1, 1], np.zeros((1, 1, 1, 1, 1), np.float32),
                                       [1] * 5, "VALID", "NDHWC")
    assert "out_backprop" in e.value.message and "filter_sizes=[2, 2, 2, 1, 1]" in e.value.message
