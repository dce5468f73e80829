# SPDX-License-Identifier: Apache-2.0
"""The golden CLI: round trips through .npy and .bin files on the upstream worked examples
(FBGEMM's recat examples, ATB RopeGrad), help texts, and bad input."""
import os
import subprocess
import sys

import numpy as np

import gradref
from conftest import same_bits


def cli(*args, cwd=None):
    env = dict(os.environ)
    # the package this process imported (the source tree's or an installed one)
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(gradref.__file__)))
    env["PYTHONPATH"] = package_dir + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "gradref"] + [str(a) for a in args],
                          capture_output=True, text=True, env=env, cwd=cwd)


def save(tmp_path, **arrays):
    paths = {}
    for name, a in arrays.items():
        paths[name] = tmp_path / (name + ".npy")
        np.save(paths[name], a)
    return ["--input=%s=%s" % (k, v) for k, v in paths.items()]


def test_help_lists_operators_and_attributes():
    r = cli("--help")
    assert r.returncode == 0
    for op in ("grid_sampler3d_grad", "recat_embedding_grad_output_mixed_D_batch", "rope_grad",
               "conv_backprop_data", "conv3d_backprop_filter"):
        assert op in r.stdout
    r = cli("rope_grad", "--help")
    assert r.returncode == 0 and "seq_len" in r.stdout and "q_embed_grad" in r.stdout
    assert cli("--version").stdout.strip() == gradref.version()


def test_recat_fbgemm_examples_round_trip(tmp_path):
    go3 = np.arange(1, 21, dtype=np.float32).reshape(2, 5, 2)
    r = cli("recat_embedding_grad_output", *save(tmp_path, grad_output=go3),
            "--attr", "num_features_per_rank=[2, 3]", "--out-dir", tmp_path / "fixed", "--bin")
    assert r.returncode == 0, r.stderr
    assert "wrote" in r.stdout and "out.npy" in r.stdout and "out.bin (80 bytes)" in r.stdout
    out = np.load(tmp_path / "fixed" / "out.npy")
    assert out.tolist() == [1, 2, 3, 4, 11, 12, 13, 14, 5, 6, 7, 8, 9, 10, 15, 16, 17, 18, 19, 20]
    raw = np.fromfile(tmp_path / "fixed" / "out.bin", dtype="<f4")
    same_bits(raw, out)

    go = np.arange(1, 11, dtype=np.float32).reshape(2, 5)
    want = [1, 2, 6, 7, 3, 4, 5, 8, 9, 10]
    r = cli("recat_embedding_grad_output_mixed_D", *save(tmp_path, grad_output=go),
            "--attr", "dim_sum_per_rank=[2,3]", "--out-dir", tmp_path / "mixed")
    assert r.returncode == 0, r.stderr
    assert np.load(tmp_path / "mixed" / "out.npy").tolist() == want
    r = cli("recat_embedding_grad_output_mixed_D_batch",
            *save(tmp_path, grad_output=go, dim_sum_per_rank=np.array([2, 3]),
                  cumsum_dim_sum_per_rank=np.array([0, 2])), "--out-dir", tmp_path / "batch")
    assert r.returncode == 0, r.stderr
    assert np.load(tmp_path / "batch" / "out.npy").tolist() == want


def test_rope_atb_round_trip(tmp_path):
    # docs/rope_grad.md's worked example in ATB's mode
    cos = np.array([[1, 1, 1, 1], [1, 2, 3, 4]], np.float32)
    sin = np.array([[0, 0, 0, 0], [5, 6, 7, 8]], np.float32)
    q = np.array([[1, 2, 3, 4], [1, 10, 100, 1000]], np.float32)
    r = cli("rope_grad", *save(tmp_path, q_embed_grad=q, k_embed_grad=q, cos=cos, sin=sin),
            "--attr", "seq_len=[1, 1]", "--attr", "start_positions=[0, 1]",
            "--out-dir", tmp_path / "ex")
    assert r.returncode == 0, r.stderr
    assert np.load(tmp_path / "ex" / "q_grad.npy")[1].tolist() == [8, 100, -200, -2000]
    # ATB's own shape: F16, head 128, qSeqLen [3, 5], two heads; .bin is the raw f16
    rng = np.random.default_rng(1)
    q = rng.standard_normal((8, 256)).astype(np.float16)
    k = rng.standard_normal((8, 256)).astype(np.float16)
    c = rng.random((5, 128)).astype(np.float16)
    s = rng.random((5, 128)).astype(np.float16)
    r = cli("rope_grad", *save(tmp_path, q_embed_grad=q, k_embed_grad=k, cos=c, sin=s),
            "--attr", "seq_len=[3,5]", "--attr", "mode=atb", "--out-dir", tmp_path / "atb",
            "--bin")
    assert r.returncode == 0, r.stderr
    want_q, want_k = gradref.rope_grad(q, k, c, s, [3, 5], "atb")
    same_bits(np.load(tmp_path / "atb" / "q_grad.npy"), want_q)
    same_bits(np.fromfile(tmp_path / "atb" / "k_grad.bin", dtype="<f2").reshape(8, 256), want_k)


def test_bf16_through_uint16_files(tmp_path):
    go = (np.arange(6, dtype=np.float32).reshape(2, 3).view(np.uint32) >> 16).astype(np.uint16)
    r = cli("recat_embedding_grad_output_mixed_D", *save(tmp_path, grad_output=go),
            "--attr", "dim_sum_per_rank=[1,2]", "--attr", "dtype=bf16", "--out-dir", tmp_path)
    assert r.returncode == 0, r.stderr
    assert "bf16 bits in uint16" in r.stdout
    same_bits(np.load(tmp_path / "out.npy"), np.concatenate([go[:, :1].ravel(), go[:, 1:].ravel()]))


def test_bad_input_exits_with_the_library_message(tmp_path):
    go = np.zeros((2, 5), np.float32)
    r = cli("recat_embedding_grad_output_mixed_D", *save(tmp_path, grad_output=go),
            "--attr", "dim_sum_per_rank=[2,4]", "--out-dir", tmp_path / "o")
    assert r.returncode == 1
    assert "GRADREF_ERR_PARAM" in r.stderr and "sum to 6 but grad_output.shape[1] is 5" in r.stderr
    assert not (tmp_path / "o").exists()
    r = cli("conv_backprop_data", "--input", "filter=%s" % (tmp_path / "nope.npy"),
            "--input", "diff=%s" % (tmp_path / "nope.npy"), "--out-dir", tmp_path)
    assert r.returncode == 2 and "nope.npy" in r.stderr
    r = cli("rope_grad", *save(tmp_path, q_embed_grad=go), "--out-dir", tmp_path)
    assert r.returncode == 2 and "needs --input" in r.stderr
    r = cli("recat_embedding_grad_output_mixed_D", *save(tmp_path, grad_output=go),
            "--attr", "colour=blue", "--out-dir", tmp_path)
    assert r.returncode == 2 and "no attribute colour" in r.stderr
    assert cli("transpose_everything", "--out-dir", tmp_path).returncode == 2


def test_module_calls_with_bin_files(tmp_path):
    """cann.conv3d_backprop_filter_v2 from CANN's raw .bin inputs, its goldens in .npy and .bin,
    and an output dtype; the same as the module call."""
    rng = np.random.default_rng(12)
    x = rng.uniform(-1, 1, (1, 4, 4, 5, 2)).astype(np.float16)  # NDHWC
    dy = rng.uniform(-1, 1, (1, 3, 3, 4, 3)).astype(np.float16)
    x.tofile(tmp_path / "x.bin")
    dy.tofile(tmp_path / "dy.bin")
    r = cli("cann.conv3d_backprop_filter_v2",
            "--input", "x=%s:float16:1,4,4,5,2" % (tmp_path / "x.bin"),
            "--input", "out_backprop=%s:float16:1,3,3,4,3" % (tmp_path / "dy.bin"),
            "--attr", "filter_size=[2,2,2,2,3]", "--attr", "strides=[1,1,1,1,1]",
            "--attr", "pads=[0,0,0,0,0,0]", "--attr", "y_format=DHWCN",
            "--out-dir", tmp_path / "o", "--bin")
    assert r.returncode == 0, r.stderr
    want = gradref.cann.conv3d_backprop_filter_v2(x, [2, 2, 2, 2, 3], dy, [1] * 5, [0] * 6,
                                                  y_format="DHWCN")
    got = np.load(tmp_path / "o" / "y.npy")
    same_bits(got, want)
    raw = np.fromfile(tmp_path / "o" / "y.bin", dtype="<f4").reshape(want.shape)
    same_bits(raw, want)
    r = cli("cann.conv3d_backprop_filter_v2",
            "--input", "x=%s:float16:1,4,4,5,2" % (tmp_path / "x.bin"),
            "--input", "out_backprop=%s:float16:1,3,3,4,3" % (tmp_path / "dy.bin"),
            "--attr", "filter_size=[2,2,2,2,3]", "--attr", "strides=[1,1,1,1,1]",
            "--attr", "pads=[0,0,0,0,0,0]", "--attr", "y_format=DHWCN",
            "--out-dir", tmp_path / "h", "--out-dtype", "float16")
    assert r.returncode == 0, r.stderr
    same_bits(np.load(tmp_path / "h" / "y.npy"), want.astype(np.float16))
    r = cli("cann.conv3d_backprop_filter_v2", "--help")
    for attr in ("y_format", "from_depthwise", "enable_hf32", "pads", "soc"):
        assert attr in r.stdout
    r = cli("cann.conv3d_backprop_filter_v2", "--input", "x=%s" % (tmp_path / "o" / "y.npy"),
            "--input", "out_backprop=%s" % (tmp_path / "o" / "y.npy"), "--attr", "precision=high",
            "--out-dir", tmp_path / "e")
    assert r.returncode == 2 and "no attribute precision" in r.stderr


def test_module_calls_torch_and_megengine(tmp_path):
    rng = np.random.default_rng(13)
    go, x, w = (rng.standard_normal(s) for s in ((2, 4, 5, 5), (2, 3, 7, 7), (4, 3, 3, 3)))
    r = cli("torch.convolution_backward",
            *save(tmp_path, grad_output=go, input=x, weight=w),
            "--attr", "bias_sizes=None", "--attr", "stride=[1,1]", "--attr", "padding=[0,0]",
            "--attr", "dilation=[1,1]", "--attr", "transposed=False",
            "--attr", "output_padding=[0,0]", "--attr", "groups=1",
            "--attr", "output_mask=[True,True,False]", "--out-dir", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    gi, gw, _ = gradref.torch.convolution_backward(go, x, w, None, [1, 1], [0, 0], [1, 1], False,
                                                   [0, 0], 1, [True, True, False])
    same_bits(np.load(tmp_path / "o" / "grad_input.npy"), gi)
    same_bits(np.load(tmp_path / "o" / "grad_weight.npy"), gw)
    assert not (tmp_path / "o" / "grad_bias.npy").exists()
    f = rng.integers(-5, 5, (8, 1, 3, 3, 4)).astype(np.float32)  # NCHW4 (OC, IC/4, FH, FW, 4)
    d = rng.integers(-5, 5, (1, 2, 4, 4, 4)).astype(np.float32)
    r = cli("megengine.convolution_backward_data", *save(tmp_path, filter=f, diff=d),
            "--attr", "format=NCHW4", "--out-dir", tmp_path / "m")
    assert r.returncode == 0, r.stderr
    same_bits(np.load(tmp_path / "m" / "grad.npy"),
              gradref.megengine.convolution_backward_data(f, d, format="NCHW4"))


def test_f64_and_magnitude_goldens_and_the_bound(tmp_path):
    """--f64 and --magnitude write the f64 golden and the terms of the call, the same arrays
    as gradref.precision's; compare --standard bound passes the library's F16 result and
    fails one with a term dropped."""
    rng = np.random.default_rng(3)
    w = rng.uniform(-1, 1, (4, 3, 3)).astype(np.float16)
    d = rng.uniform(-1, 1, (2, 4, 9)).astype(np.float16)
    attrs = ["--attr", "format=NCW", "--attr", "stride=2", "--attr", "pad=1",
             "--attr", "grad_shape=(18,)"]
    r = cli("conv_backprop_data", *save(tmp_path, filter=w, diff=d), *attrs, "--f64",
            "--magnitude", "--out-dir", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    kw = dict(format="NCW", stride=2, pad=1, grad_shape=(18,))
    gold = gradref.precision.f64(gradref.conv_backprop_data, w, d, **kw)
    mag, count = gradref.precision.terms("conv_backprop_data", w, d, **kw)
    same_bits(np.load(out / "grad_f64.npy"), gold)
    same_bits(np.load(out / "grad_magnitude.npy"), mag)
    same_bits(np.load(out / "grad_count.npy"), count)
    bound = ["--standard", "bound", "--magnitude", out / "grad_magnitude.npy",
             "--count", out / "grad_count.npy"]
    r = cli("compare", out / "grad.npy", out / "grad_f64.npy", *bound)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "past the bound 0" in r.stdout
    bug = gradref.conv_backprop_data(w, d, **kw).astype(np.float64)
    bug[0, 0, 5] -= float(w[0, 0, 0]) * float(d[0, 0, 3])  # grad[0, 0, 5]'s term of tap 0
    np.save(tmp_path / "bug.npy", bug.astype(np.float16))
    r = cli("compare", tmp_path / "bug.npy", out / "grad_f64.npy", *bound)
    assert r.returncode == 1 and "past the bound" in r.stdout
    r = cli("compare", out / "grad.npy", out / "grad_f64.npy", "--standard", "bound")
    assert r.returncode == 2 and "--magnitude" in r.stderr
    go = np.ones((1, 1, 1, 1, 1), np.float32)
    x = np.ones((1, 1, 2, 2, 2), np.float32)
    grid = np.zeros((1, 1, 1, 1, 3), np.float32)
    r = cli("torch.grid_sampler_3d_backward", *save(tmp_path, grad_output=go, input=x,
                                                    grid=grid),
            "--attr", "interpolation_mode=0", "--attr", "padding_mode=0",
            "--attr", "align_corners=False", "--magnitude", "--out-dir", tmp_path / "gs")
    assert r.returncode == 2 and "has no terms" in r.stderr  # a module call: none


def test_grid_sampler_bound_through_the_cli(tmp_path):
    """grid_sampler3d_grad's --magnitude also writes the coordinates' slack; compare with it
    passes the library's own F16 dgrid."""
    rng = np.random.default_rng(9)
    go = rng.standard_normal((1, 2, 2, 2, 3)).astype(np.float16)
    x = rng.standard_normal((1, 2, 3, 4, 5)).astype(np.float16)
    grid = rng.uniform(-1.3, 1.3, (1, 2, 2, 3, 3)).astype(np.float16)
    r = cli("grid_sampler3d_grad", *save(tmp_path, grad_output=go, input=x, grid=grid),
            "--attr", "interpolation_mode=bilinear", "--attr", "padding_mode=reflection",
            "--attr", "align_corners=True", "--f64", "--magnitude", "--out-dir", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "o"
    for name in ("dx", "dgrid"):
        assert (out / (name + "_slack.npy")).exists()
        r = cli("compare", out / (name + ".npy"), out / (name + "_f64.npy"), "--standard",
                "bound", "--magnitude", out / (name + "_magnitude.npy"), "--count",
                out / (name + "_count.npy"), "--slack", out / (name + "_slack.npy"))
        assert r.returncode == 0, r.stdout + r.stderr
