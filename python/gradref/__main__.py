# SPDX-License-Identifier: Apache-2.0
"""The golden CLI: python3 -m gradref OP --input NAME=FILE.npy ... --attr KEY=VALUE ...
--out-dir DIR [--bin]. Writes every output as DIR/NAME.npy (and DIR/NAME.bin, the raw
little-endian C-order bytes CANN's operator test tools read) and prints what it wrote."""
import argparse
import ast
import os
import sys

from . import _ops

# name: (function, inputs, attributes with their help, outputs)
OPERATORS = {
    "grid_sampler3d_grad": (
        _ops.grid_sampler3d_grad, ["grad_output", "input", "grid"],
        {"interpolation_mode": "0/bilinear or 1/nearest (required)",
         "padding_mode": "0/zeros, 1/border or 2/reflection (required)",
         "align_corners": "True or False (required)",
         "output_mask": "(dx, dgrid) booleans, default (True, True)"},
        ["dx", "dgrid"]),
    "recat_embedding_grad_output": (
        _ops.recat_embedding_grad_output, ["grad_output"],
        {"num_features_per_rank": "list of ints summing to T (required)"}, ["out"]),
    "recat_embedding_grad_output_mixed_D": (
        _ops.recat_embedding_grad_output_mixed_D, ["grad_output"],
        {"dim_sum_per_rank": "list of ints summing to sumD (required)"}, ["out"]),
    "recat_embedding_grad_output_mixed_D_batch": (
        _ops.recat_embedding_grad_output_mixed_D_batch,
        ["grad_output", "dim_sum_per_rank", "cumsum_dim_sum_per_rank"], {}, ["out"]),
    "rope_grad": (
        _ops.rope_grad, ["q_embed_grad", "k_embed_grad", "cos", "sin"],
        {"seq_len": "ATB qSeqLen, list of ints summing to T (required)",
         "mode": "atb (default), half or interleaved",
         "head_dim": "default cos.shape[1]", "rotary_dim": "0 = head_dim",
         "start_positions": "list of ints, default all 0"},
        ["q_grad", "k_grad"]),
    "conv_backprop_data": (
        _ops.conv_backprop_data, ["filter", "diff"],
        {"mode": "CROSS_CORRELATION (default) or CONVOLUTION",
         "sparse": "DENSE (default) or GROUP", "format": "NCHW (default) or NHWC",
         "stride": "int or per dim", "pad": "int, per dim, or (begin, end) per dim",
         "dilate": "int or per dim", "grad_shape": "grad's spatial size when ambiguous",
         "qs8_scales": "(filter_scale, diff_scale, grad_scale): MegEngine's QuantizedS8 call",
         "out_dtype": "float32 for an F32 grad of F16/BF16 inputs"},
        ["grad"]),
    "conv3d_backprop_filter": (
        _ops.conv3d_backprop_filter, ["input", "out_backprop"],
        {"filter_sizes": "(kd, kh, kw, in/groups, out) (required)",
         "strides": "5 entries (TF) or 3 (required)",
         "padding": "SAME, VALID or explicit pads (required)",
         "data_format": "NDHWC (default) or NCDHW", "dilations": "5 entries or 3",
         "groups": "default in_channels / filter_sizes[3]",
         "out_dtype": "float32 for CANN V2's F32 dw of F16/BF16 inputs"},
        ["dw"]),
}
COMMON_ATTRS = {"dtype": "bf16: uint16 inputs hold bf16 bits", "threads": "int",
                "precision": "default or high; conv3d_backprop_filter also hf32 or hf32_910b, "
                             "conv_backprop_data megengine_default (recat moves bits: no effect)",
                "strict": "true or false: also reject what the upstream operator rejects"}


def _parse_value(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _pairs(items, what):
    out = {}
    for item in items or []:
        if "=" not in item:
            raise SystemExit("gradref: %s %r is not NAME=VALUE" % (what, item))
        k, v = item.split("=", 1)
        out[k.strip()] = v
    return out


def _op_help(name):
    fn, inputs, attrs, outputs = OPERATORS[name]
    lines = ["usage: python3 -m gradref %s %s [--attr KEY=VALUE ...] --out-dir DIR [--bin]"
             % (name, " ".join("--input %s=FILE.npy" % i for i in inputs)), "",
             (fn.__doc__ or "").strip(), "", "inputs: " + ", ".join(inputs),
             "outputs: " + ", ".join(outputs), "attributes:"]
    for k, v in list(attrs.items()) + list(COMMON_ATTRS.items()):
        lines.append("  %-22s %s" % (k, v))
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    top = argparse.ArgumentParser(
        prog="python3 -m gradref",
        description="Run a gradref operator on .npy inputs and write its outputs as goldens.",
        epilog="operators: " + ", ".join(OPERATORS) +
               ". 'python3 -m gradref OP --help' lists an operator's inputs and attributes.")
    top.add_argument("op", nargs="?", help="the operator")
    top.add_argument("--input", action="append", metavar="NAME=FILE.npy")
    top.add_argument("--attr", action="append", metavar="KEY=VALUE",
                     help="a Python literal (list, int, True) or a plain string")
    top.add_argument("--out-dir", metavar="DIR")
    top.add_argument("--bin", action="store_true", help="also write raw .bin files")
    top.add_argument("--version", action="store_true", help="print the library's version")
    if argv and argv[0] in OPERATORS and any(a in ("-h", "--help") for a in argv[1:]):
        print(_op_help(argv[0]))
        return 0
    args = top.parse_args(argv)
    if args.version:
        print(_ops.version())
        return 0
    if args.op is None:
        top.print_help()
        return 2
    if args.op not in OPERATORS:
        print("gradref: unknown operator %r; one of: %s" % (args.op, ", ".join(OPERATORS)),
              file=sys.stderr)
        return 2
    if not args.out_dir:
        print("gradref: --out-dir DIR is required", file=sys.stderr)
        return 2
    import numpy as np
    fn, inputs, attrs, outputs = OPERATORS[args.op]
    given = _pairs(args.input, "--input")
    missing = [i for i in inputs if i not in given]
    unknown = [k for k in given if k not in inputs]
    if missing or unknown:
        print("gradref: %s needs --input %s%s" % (
            args.op, ", ".join("%s=FILE.npy" % i for i in inputs),
            "; unknown: " + ", ".join(unknown) if unknown else ""), file=sys.stderr)
        return 2
    kwargs = {k: _parse_value(v) for k, v in _pairs(args.attr, "--attr").items()}
    bad = [k for k in kwargs if k not in attrs and k not in COMMON_ATTRS]
    if bad:
        print("gradref: %s has no attribute %s; it has %s" % (
            args.op, ", ".join(bad), ", ".join(list(attrs) + list(COMMON_ATTRS))),
            file=sys.stderr)
        return 2
    try:
        arrays = {i: np.load(given[i], allow_pickle=False) for i in inputs}
        result = fn(**arrays, **kwargs)  # inputs by name: their places differ per operator
    except _ops.Error as e:
        print("gradref: %s failed: %s" % (args.op, e), file=sys.stderr)
        return 1
    except (TypeError, ValueError, OSError) as e:
        text = str(e)
        text = text[len("gradref: "):] if text.startswith("gradref: ") else text
        print("gradref: %s: %s" % (args.op, text), file=sys.stderr)
        return 2
    if not isinstance(result, tuple):
        result = (result,)
    os.makedirs(args.out_dir, exist_ok=True)
    for name, value in zip(outputs, result):
        if value is None:
            continue
        path = os.path.join(args.out_dir, name + ".npy")
        np.save(path, value)
        print("wrote %s (%s, shape %s)" % (path, "bf16 bits in uint16" if
                                           kwargs.get("dtype") == "bf16" and value.dtype == np.uint16
                                           else value.dtype, tuple(value.shape)))
        if args.bin:
            raw = os.path.join(args.out_dir, name + ".bin")
            np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<")).tofile(raw)
            print("wrote %s (%d bytes)" % (raw, value.nbytes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
