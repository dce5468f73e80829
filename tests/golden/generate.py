#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the golden fixtures under tests/golden/ from PyTorch (Debian: python3-torch).

CI never runs this: the fixtures are committed. Rerun it after changing a case:
    /usr/bin/python3 tests/golden/generate.py

Format (read by tests/golden.c): records of
    case <name>
    <key> <value> <value> ...      (integers, or element bits in hex for data keys)
    end
"""
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
BITS = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16,
        torch.float64: torch.int64}
NAMES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64"}


def hex_bits(t):
    width = t.element_size() * 2
    mask = (1 << (width * 4)) - 1
    return " ".join(format(int(v) & mask, "0%dx" % width) for v in t.reshape(-1).view(BITS[t.dtype]).tolist())


def special_values(n, dtype, gen):
    """Random values with the bit patterns a copy must keep: NaN payloads, -0, subnormals, inf."""
    x = torch.randn(n, generator=gen).to(dtype)
    bits = x.view(BITS[dtype])
    if dtype == torch.float16:
        specials = [0x7E01, 0xFC00, 0x8000, 0x0001, 0x7C01, 0x83FF]
    elif dtype == torch.bfloat16:
        specials = [0x7FC1, 0xFF80, 0x8000, 0x0001, 0x7F81, 0xFF81]
    else:
        specials = [0x7FC00001, 0xFF800000, 0x80000000, 0x00000001, 0x7F800001]
    width = 8 * x.element_size()
    for i, s in enumerate(specials):
        s &= (1 << width) - 1
        bits[(i * 7) % n] = s - (1 << width) if s >= 1 << (width - 1) else s  # as signed
    return x


def recat_reference(go2d, widths):
    """fbgemm_gpu's test reference: split(dim=1), flatten, cat."""
    return torch.cat([b.contiguous().view(-1) for b in go2d.split(widths, dim=1)])


def recat_cases(gen):
    out = []
    # mixed D, f16, an empty rank in the middle
    dims = [2, 0, 3, 1]
    go = special_values(3 * sum(dims), torch.float16, gen).view(3, sum(dims))
    out.append(("recat_mixed_f16", "mixed", go, dims, 1, recat_reference(go, dims)))
    # fixed D, f32: (B, T, D) = (2, 4, 3), features per rank [1, 0, 3]
    features = [1, 0, 3]
    go = special_values(2 * 4 * 3, torch.float32, gen).view(2, 4, 3)
    out.append(("recat_fixed_f32", "fixed", go, features, 3,
                recat_reference(go.view(2, 12), [f * 3 for f in features])))
    # batch variant, bf16, empty rank last
    dims = [1, 2, 5, 0]
    go = special_values(4 * sum(dims), torch.bfloat16, gen).view(4, sum(dims))
    out.append(("recat_batch_bf16", "batch", go, dims, 1, recat_reference(go, dims)))
    return out


def write_recat(path, cases):
    with open(path, "w") as f:
        f.write("# recat golden fixtures: PyTorch %s split+cat (tests/golden/generate.py)\n" % torch.__version__)
        for name, variant, go, dims, width, expected in cases:
            f.write("case %s\n" % name)
            f.write("variant %s\n" % variant)
            f.write("dtype %s\n" % NAMES[go.dtype])
            f.write("shape %s\n" % " ".join(str(s) for s in go.shape))
            f.write("split %s\n" % " ".join(str(d) for d in dims))
            f.write("input %s\n" % hex_bits(go))
            f.write("expected %s\n" % hex_bits(expected))
            f.write("end\n")


def positions(seq_lens, starts):
    return torch.cat([torch.arange(n) + s for n, s in zip(seq_lens, starts)])


def rope_forward(x, c, s, mode, rotary):
    """Forward RoPE on (T, heads*D) rows with per-token tables c, s of shape (T, D)."""
    T, width = x.shape
    D = c.shape[1]
    x = x.view(T, width // D, D)
    c, s = c[:, None, :rotary], s[:, None, :rotary]
    xr, rest = x[..., :rotary], x[..., rotary:]
    if mode == 1:  # rotate_half (NeoX / LLaMA)
        h = rotary // 2
        rotated = torch.cat([-xr[..., h:], xr[..., :h]], dim=-1)
    else:  # interleaved (GPT-J rotate_every_two)
        rotated = torch.stack([-xr[..., 1::2], xr[..., ::2]], dim=-1).flatten(-2)
    return torch.cat([xr * c + rotated * s, rest], dim=-1).view(T, width)


def rope_case(name, gen, dtype, mode, seq_lens, starts, Hq, Hk, S, D, rotary):
    T = sum(seq_lens)
    q = torch.randn(T, Hq, generator=gen, dtype=torch.float64).to(dtype)
    k = torch.randn(T, Hk, generator=gen, dtype=torch.float64).to(dtype)
    cos = torch.rand(S, D, generator=gen, dtype=torch.float64).to(dtype)
    sin = torch.rand(S, D, generator=gen, dtype=torch.float64).to(dtype)  # halves differ
    pos = positions(seq_lens, starts)
    if mode == 0:  # ATB's golden: every operation in the 16-bit type
        h = D // 2
        w = cos + torch.cat([sin[:, h:], -sin[:, :h]], dim=1)
        wq = w[pos].repeat(1, Hq // D)
        wk = w[pos].repeat(1, Hk // D)
        dq, dk = q * wq, k * wk
    else:  # the exact adjoint, by autograd through the forward
        grads = []
        for g in (q, k):
            x = torch.zeros_like(g, requires_grad=True)
            rope_forward(x, cos[pos], sin[pos], mode, rotary).backward(g)
            grads.append(x.grad)
        dq, dk = grads
    return (name, dtype, mode, seq_lens, starts, (T, Hq, Hk, S, D, rotary),
            {"q_embed_grad": q, "k_embed_grad": k, "cos": cos, "sin": sin, "q_grad": dq, "k_grad": dk})


def rope_cases(gen):
    return [
        rope_case("rope_atb_f16", gen, torch.float16, 0, [2, 1, 3], [0, 0, 0], 16, 8, 4, 8, 8),
        rope_case("rope_atb_bf16", gen, torch.bfloat16, 0, [3, 2], [0, 0], 8, 16, 3, 8, 8),
        rope_case("rope_half_f64_partial", gen, torch.float64, 1, [2, 1, 3], [1, 0, 2], 16, 8, 6, 8, 6),
        rope_case("rope_interleaved_f32", gen, torch.float32, 2, [4, 2], [0, 3], 8, 8, 6, 8, 8),
    ]


def write_rope(path, cases):
    with open(path, "w") as f:
        f.write("# rope_grad golden fixtures: PyTorch %s (tests/golden/generate.py)\n" % torch.__version__)
        for name, dtype, mode, seq_lens, starts, dims, tensors in cases:
            f.write("case %s\n" % name)
            f.write("dtype %s\n" % NAMES[dtype])
            f.write("mode %d\n" % mode)
            f.write("dims %s\n" % " ".join(str(d) for d in dims))
            f.write("seq_lens %s\n" % " ".join(str(n) for n in seq_lens))
            f.write("start_positions %s\n" % " ".join(str(s) for s in starts))
            for key, t in tensors.items():
                f.write("%s %s\n" % (key, hex_bits(t.detach().contiguous())))
            f.write("end\n")


def grid_case(name, gen, dtype, modes, dims, reach):
    N, C, D, H, W, Do, Ho, Wo = dims
    x = (torch.rand(N, C, D, H, W, generator=gen, dtype=torch.float64) * 2 - 1).to(dtype)
    grad = (torch.rand(N, C, Do, Ho, Wo, generator=gen, dtype=torch.float64) * 2 - 1).to(dtype)
    grid = ((torch.rand(N, Do, Ho, Wo, 3, generator=gen, dtype=torch.float64) * 2 - 1) * reach).to(dtype)
    interp, padding, align = modes
    dx, dgrid = torch.ops.aten.grid_sampler_3d_backward(grad, x, grid, interp, padding, bool(align),
                                                        [True, True])
    return (name, dtype, modes, dims, {"grad": grad, "x": x, "grid": grid, "dx": dx, "dgrid": dgrid})


def grid_cases(gen):
    """aten's CPU kernel in the tensors' own dtype: F32 must match bit for bit."""
    return [
        grid_case("gs_bilinear_zeros_f32", gen, torch.float32, (0, 0, 0), (2, 3, 4, 5, 6, 3, 4, 5), 1.3),
        grid_case("gs_bilinear_reflection_ac_f32", gen, torch.float32, (0, 2, 1), (1, 2, 3, 4, 5, 4, 3, 5), 2.5),
        grid_case("gs_bilinear_border_f32", gen, torch.float32, (0, 1, 0), (2, 2, 5, 3, 4, 2, 3, 3), 1.5),
        grid_case("gs_bilinear_reflection_f64_ones", gen, torch.float64, (0, 2, 0), (1, 2, 1, 4, 1, 3, 2, 4), 3.0),
        grid_case("gs_bilinear_zeros_ac_f64", gen, torch.float64, (0, 0, 1), (2, 3, 3, 3, 3, 2, 2, 3), 1.2),
        grid_case("gs_nearest_border_ac_f64", gen, torch.float64, (1, 1, 1), (1, 3, 4, 4, 4, 3, 3, 3), 1.4),
        grid_case("gs_nearest_zeros_f32", gen, torch.float32, (1, 0, 0), (2, 2, 3, 5, 4, 2, 4, 3), 1.1),
    ]


def write_grid(path, cases):
    with open(path, "w") as f:
        f.write("# grid_sampler3d_grad golden fixtures: PyTorch %s aten.grid_sampler_3d_backward "
                "(tests/golden/generate.py)\n" % torch.__version__)
        for name, dtype, modes, dims, tensors in cases:
            f.write("case %s\n" % name)
            f.write("dtype %s\n" % NAMES[dtype])
            f.write("modes %s\n" % " ".join(str(m) for m in modes))
            f.write("dims %s\n" % " ".join(str(d) for d in dims))
            for key, t in tensors.items():
                f.write("%s %s\n" % (key, hex_bits(t.detach().contiguous())))
            f.write("end\n")


def conv_case(name, gen, rank, N, G, ICpg, OCpg, dims):
    """dims: per spatial dim (K, O, stride, dilation, pad, extra); grad size = minimal + extra."""
    sizes = []
    for K, O, s, d, p, extra in dims:
        sizes.append((O - 1) * s + d * (K - 1) + 1 - 2 * p + extra)
    weight = torch.rand(G * OCpg, ICpg, *[d[0] for d in dims], generator=gen, dtype=torch.float64) * 2 - 1
    diff = torch.rand(N, G * OCpg, *[d[1] for d in dims], generator=gen, dtype=torch.float64) * 2 - 1
    fn = {1: torch.nn.grad.conv1d_input, 2: torch.nn.grad.conv2d_input, 3: torch.nn.grad.conv3d_input}[rank]
    grad = fn([N, G * ICpg] + sizes, weight, diff, stride=[d[2] for d in dims],
              padding=[d[4] for d in dims], dilation=[d[3] for d in dims], groups=G)
    geometry = [rank, N, G, ICpg, OCpg] + [v for d in dims for v in d]
    return (name, geometry, {"filter": weight, "diff": diff, "grad": grad})


def conv_cases(gen):
    """torch.nn.grad.conv*d_input (cross-correlation) in f64."""
    return [
        conv_case("cbd_2d_groups_stride_dilation", gen, 2, 2, 2, 3, 2,
                  [(3, 4, 2, 2, 1, 1), (2, 5, 3, 1, 0, 2)]),
        conv_case("cbd_1d_pad_over_kernel", gen, 1, 1, 1, 4, 3, [(3, 7, 1, 3, 4, 0)]),
        conv_case("cbd_3d", gen, 3, 1, 1, 2, 3, [(2, 2, 2, 1, 0, 1), (3, 3, 1, 1, 1, 0), (1, 4, 2, 1, 0, 1)]),
        conv_case("cbd_2d_depthwise", gen, 2, 2, 4, 1, 1, [(3, 5, 1, 1, 1, 0), (3, 4, 2, 1, 1, 1)]),
    ]


def write_conv(path, cases):
    with open(path, "w") as f:
        f.write("# conv_backprop_data golden fixtures: PyTorch %s torch.nn.grad.conv*d_input, f64 "
                "(tests/golden/generate.py)\n" % torch.__version__)
        f.write("# geometry: rank N G IC/G OC/G, then per spatial dim K O stride dilation pad extra\n")
        for name, geometry, tensors in cases:
            f.write("case %s\n" % name)
            f.write("geometry %s\n" % " ".join(str(v) for v in geometry))
            for key, t in tensors.items():
                f.write("%s %s\n" % (key, hex_bits(t.detach().contiguous())))
            f.write("end\n")


def main():
    gen = torch.Generator().manual_seed(20261129)
    write_recat(os.path.join(HERE, "recat.txt"), recat_cases(gen))
    write_rope(os.path.join(HERE, "rope_grad.txt"), rope_cases(gen))
    write_grid(os.path.join(HERE, "grid_sampler3d_grad.txt"), grid_cases(gen))
    write_conv(os.path.join(HERE, "conv_backprop_data.txt"), conv_cases(gen))


if __name__ == "__main__":
    main()
