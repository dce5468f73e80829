# SPDX-License-Identifier: Apache-2.0
"""The golden CLI: python3 -m gradref OP --input NAME=FILE ... --attr KEY=VALUE ...
--out-dir DIR [--bin] [--out-dtype DTYPE]. OP is a top-level operator (conv_backprop_data) or a
module's call in its upstream's dialect (cann.conv3d_backprop_filter_v2,
megengine.convolution_backward_data, torch.convolution_backward, ...), with every attribute that
call takes. Inputs are .npy files, or raw .bin files (CANN's test data) as FILE.bin:DTYPE:SHAPE
(x.bin:float16:2,3,8,8,8). Writes every output as DIR/NAME.npy (and DIR/NAME.bin, the raw
little-endian C-order bytes CANN's operator test tools read) and prints what it wrote.

--f64 also writes each output computed in float64 from the same inputs (NAME_f64), and
--magnitude the sum of |term| and the number of terms per output element (NAME_magnitude,
NAME_count, and grid_sampler3d_grad's NAME_slack; gradref.precision), for an error bound.

python3 -m gradref compare ACTUAL GOLDEN [--standard cann|cann-ratio|mlu|bound] ... judges a
kernel's output against a golden by CANN's or MLU-OPS' acceptance standard (gradref.standards)
or by the error bound of any correct kernel (gradref.precision; GOLDEN the f64 golden), prints
the verdict and exits 1 when it fails."""
import argparse
import ast
import inspect
import os
import sys

from . import _args, _ops, atb, cann, fbgemm, megengine, precision, standards, tf, torch

# name: (function, inputs (a trailing "?" marks an optional one), attribute help, outputs).
# The top-level operators document their attributes here; a module's calls take every
# parameter of their signature that is not an input or an output array.
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
         "sparse": "DENSE (default) or GROUP",
         "format": "NCHW (default), NHWC, NCHW4 or NHWCD4",
         "stride": "int or per dim", "pad": "int, per dim, (begin, end) per dim, SAME or VALID",
         "dilate": "int or per dim", "grad_shape": "grad's spatial size when ambiguous",
         "qs8_scales": "(filter_scale, diff_scale, grad_scale): MegEngine's QuantizedS8 call",
         "out_dtype": "float32 for an F32 grad of F16/BF16 inputs"},
        ["grad"]),
    "conv3d_backprop_filter": (
        _ops.conv3d_backprop_filter, ["input", "out_backprop"],
        {"filter_sizes": "(kd, kh, kw, in/groups, out) (required)",
         "strides": "5 entries (TF) or 3 (required)",
         "padding": "SAME, VALID or explicit pads (required)",
         "data_format": "NDHWC or NCDHW (required)", "dilations": "5 entries or 3",
         "groups": "default in_channels / filter_sizes[3]",
         "mode": "CROSS_CORRELATION (default) or CONVOLUTION",
         "out_dtype": "float32 for CANN V2's F32 dw of F16/BF16 inputs"},
        ["dw"]),
    "atb.rope_grad": (atb.rope_grad, ["q_embed_grad", "k_embed_grad", "cos", "sin"], None,
                      ["q_grad", "k_grad"]),
    "cann.grid_sampler3d_grad": (cann.grid_sampler3d_grad, ["grad", "x", "grid"], None,
                                 ["dx", "dgrid"]),
    "cann.conv3d_backprop_filter_v2": (cann.conv3d_backprop_filter_v2, ["x", "out_backprop"],
                                       None, ["y"]),
    "fbgemm.recat_embedding_grad_output": (fbgemm.recat_embedding_grad_output, ["grad_output"],
                                           None, ["out"]),
    "fbgemm.recat_embedding_grad_output_mixed_D": (
        fbgemm.recat_embedding_grad_output_mixed_D, ["grad_output"], None, ["out"]),
    "fbgemm.recat_embedding_grad_output_mixed_D_batch": (
        fbgemm.recat_embedding_grad_output_mixed_D_batch,
        ["grad_output", "dim_sum_per_rank", "cumsum_dim_sum_per_rank"], None, ["out"]),
    "megengine.convolution_backward_data": (
        megengine.convolution_backward_data, ["filter", "diff", "src_for_shp?"], None, ["grad"]),
    "tf.conv3d_backprop_filter_v2": (tf.conv3d_backprop_filter_v2, ["input", "out_backprop"],
                                     None, ["output"]),
    "tf.conv2d_backprop_input": (tf.conv2d_backprop_input, ["filter", "out_backprop"], None,
                                 ["output"]),
    "tf.conv3d_backprop_input_v2": (tf.conv3d_backprop_input_v2, ["filter", "out_backprop"],
                                    None, ["output"]),
    "torch.grid_sampler_3d_backward": (torch.grid_sampler_3d_backward,
                                       ["grad_output", "input", "grid"], None,
                                       ["grad_input", "grad_grid"]),
    "torch.convolution_backward": (torch.convolution_backward,
                                   ["grad_output", "input", "weight"], None,
                                   ["grad_input", "grad_weight", "grad_bias"]),
    "torch.rotary_embedding_backward": (torch.rotary_embedding_backward,
                                        ["q_embed_grad", "k_embed_grad", "cos", "sin"], None,
                                        ["q_grad", "k_grad"]),
}
# a module call's parameters that are its output arrays (given in memory, not by the CLI)
_OUTPUT_PARAMS = {"grad", "dx", "dgrid", "y", "out"}
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


def _attributes(name):
    """An operator's attributes and their help: the table's, or a module call's signature."""
    fn, inputs, attrs, _ = OPERATORS[name]
    if attrs is not None:
        return dict(attrs, **COMMON_ATTRS)
    names = {i.rstrip("?") for i in inputs}
    out, forwards = {}, False
    for p in inspect.signature(fn).parameters.values():
        forwards |= p.kind == p.VAR_KEYWORD
        if p.name in names or p.name in _OUTPUT_PARAMS or p.kind == p.VAR_KEYWORD:
            continue
        out[p.name] = "(required)" if p.default is p.empty else "default %r" % (p.default,)
    for k, v in COMMON_ATTRS.items():  # what a call passes on to the top-level operator
        if forwards or k in out:
            out[k] = v if forwards and k not in out else out[k]
    return out


def _op_help(name):
    fn, inputs, _, outputs = OPERATORS[name]
    lines = ["usage: python3 -m gradref %s %s [--attr KEY=VALUE ...] --out-dir DIR [--bin] "
             "[--out-dtype DTYPE]" % (name, " ".join(
                 ("[--input %s=FILE]" if i.endswith("?") else "--input %s=FILE") % i.rstrip("?")
                 for i in inputs)), "",
             (fn.__doc__ or "").strip(), "",
             "inputs: " + ", ".join(i.rstrip("?") + (" (optional)" if i.endswith("?") else "")
                                    for i in inputs) +
             " (FILE.npy, or FILE.bin:DTYPE:SHAPE)",
             "outputs: " + ", ".join(outputs), "attributes:"]
    for k, v in _attributes(name).items():
        lines.append("  %-22s %s" % (k, v))
    return "\n".join(lines)


def _load(spec, np):
    """A .npy file, or FILE.bin:DTYPE:SHAPE (raw little-endian C-order, as CANN writes it;
    DTYPE bfloat16 gives its bits in uint16). Returns (array, is_bf16_bits)."""
    path, _, rest = spec.partition(".bin:")
    if not rest:
        return np.load(spec, allow_pickle=False), False
    dtype, _, shape = rest.partition(":")
    bf16 = dtype.lower() in ("bfloat16", "bf16")
    dt = np.dtype("<u2" if bf16 else dtype).newbyteorder("<")
    dims = tuple(int(v) for v in shape.split(",") if v.strip()) if shape else None
    a = np.fromfile(path + ".bin", dtype=dt)
    if dims is not None:
        a = a.reshape(dims)
    return a.astype(dt.newbyteorder("=")), bf16


def _convert(value, out_dtype, np):
    """A float result in out_dtype, rounded to nearest even by gradref.copy (bfloat16 as its
    bits in uint16)."""
    if out_dtype is None or value.dtype.kind != "f":
        return value
    bf16 = out_dtype.lower() in ("bfloat16", "bf16")
    out = np.empty(value.shape, np.uint16 if bf16 else out_dtype)
    if out.dtype == value.dtype:
        return value
    return _ops.copy(value, out, dtype="bf16" if bf16 else None)


def _write(args, name, value, bf16, np):
    path = os.path.join(args.out_dir, name + ".npy")
    np.save(path, value)
    print("wrote %s (%s, shape %s)" % (path, "bf16 bits in uint16" if bf16 and
                                       value.dtype == np.uint16 else value.dtype,
                                       tuple(value.shape)))
    if args.bin:
        raw = os.path.join(args.out_dir, name + ".bin")
        np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<")).tofile(raw)
        print("wrote %s (%d bytes)" % (raw, value.nbytes))


def _parser():
    top = argparse.ArgumentParser(
        prog="python3 -m gradref",
        description="Run a gradref operator on .npy (or .bin) inputs and write its outputs as "
                    "goldens.",
        epilog="operators: " + ", ".join(OPERATORS) +
               ". 'python3 -m gradref OP --help' lists an operator's inputs and attributes.")
    top.add_argument("op", nargs="?", help="the operator")
    top.add_argument("--input", action="append", metavar="NAME=FILE")
    top.add_argument("--attr", action="append", metavar="KEY=VALUE",
                     help="a Python literal (list, int, True) or a plain string")
    top.add_argument("--out-dir", metavar="DIR")
    top.add_argument("--bin", action="store_true", help="also write raw .bin files")
    top.add_argument("--out-dtype", metavar="DTYPE",
                     help="write float outputs as float32, float16, bfloat16 or float64 "
                          "(rounded to nearest even)")
    top.add_argument("--f64", action="store_true",
                     help="also write each output computed in float64 (NAME_f64)")
    top.add_argument("--magnitude", action="store_true",
                     help="also write sum |term| and the term count per output element "
                          "(NAME_magnitude, NAME_count); operators: " +
                          ", ".join(precision.TERMS))
    top.add_argument("--version", action="store_true", help="print the library's version")
    return top


def _terms(op, inputs, arrays, kwargs):
    """precision.terms of the call: the inputs in their order, rope_grad's seq_len after them."""
    kw = dict(kwargs)
    dtype = kw.pop("dtype", None)
    positional = [arrays[i.rstrip("?")] for i in inputs if i.rstrip("?") in arrays]
    if op == "rope_grad" and "seq_len" in kw:
        positional.append(kw.pop("seq_len"))
    return precision.terms(op, *positional, dtype=dtype, **kw)


def _extra_outputs(args, inputs, outputs, arrays, kwargs, np):
    """(name, array) of the --f64 and --magnitude outputs."""
    fn = OPERATORS[args.op][0]
    extra = []
    if args.f64:
        kw = dict(kwargs)
        dtype = kw.pop("dtype", None)
        result = precision.f64(fn, dtype=dtype, **arrays, **kw)
        result = result if isinstance(result, tuple) else (result,)
        extra += [(n + "_f64", v) for n, v in zip(outputs, result) if v is not None]
    if args.magnitude:
        if args.op not in precision.TERMS:
            raise ValueError("--magnitude: %s has no terms; these do: %s"
                             % (args.op, ", ".join(precision.TERMS)))
        mag, count = _terms(args.op, inputs, arrays, kwargs)
        mag, count = (m if isinstance(m, tuple) else (m,) for m in (mag, count))
        for n, m, c in zip(outputs, mag, count):
            extra += [(n + "_magnitude", np.asarray(m)), (n + "_count", np.asarray(c))]
        if args.op == "grid_sampler3d_grad":  # and the sampling coordinates' share
            kw = {k: v for k, v in kwargs.items() if k != "output_mask"}
            slack = precision.coordinate_slack(*(arrays[i] for i in inputs), **kw)
            extra += [(n + "_slack", s) for n, s in zip(outputs, slack)]
    return extra


def _fail(message, code=2):
    print(message, file=sys.stderr)
    return code


def _compare_parser():
    p = argparse.ArgumentParser(
        prog="python3 -m gradref compare",
        description="Judge ACTUAL against GOLDEN (.npy, or FILE.bin:DTYPE:SHAPE) by an "
                    "acceptance standard; exit 1 when it fails.")
    p.add_argument("actual")
    p.add_argument("golden")
    p.add_argument("--standard", choices=("cann", "cann-ratio", "mlu", "bound"), default="cann")
    p.add_argument("--out-dtype", metavar="DTYPE",
                   help="cann: the threshold's dtype (" + ", ".join(standards.CANN_THRESHOLDS) +
                        "; default the golden's); bound: the output's (default the actual's)")
    p.add_argument("--magnitude", metavar="FILE", help="bound: sum |term| per element")
    p.add_argument("--count", metavar="FILE", help="bound: the number of terms per element")
    p.add_argument("--slack", metavar="FILE",
                   help="bound: an operator's own allowance (grid_sampler3d_grad's NAME_slack)")
    p.add_argument("--acc-dtype", default="float32", choices=("float32", "float16", "bfloat16",
                                                              "float64"),
                   help="bound: the accumulator's dtype (default float32)")
    p.add_argument("--input-rounding", choices=("hf32", "hf32_910b", "bfloat16", "float16"),
                   help="bound: the inputs are rounded to this first (HF32)")
    p.add_argument("--model", choices=("worst", "probabilistic"), default="worst",
                   help="bound: any order (default) or Higham and Mary's probabilistic bound")
    p.add_argument("--third-party", metavar="FILE", help="cann-ratio: the third party's output")
    p.add_argument("--level", choices=tuple(standards.CANN_LEVELS), default="L0")
    p.add_argument("--min-cases", type=int, metavar="N",
                   help="cann-ratio: judge fewer cases than the level asks for")
    p.add_argument("--threshold", action="append", metavar="DIFF=VALUE",
                   help="mlu: diff1=3e-3 (repeatable; default diff1 and diff2 at 3e-3)")
    return p


def _bound_verdict(args, actual, golden, dtype, np):
    """precision.check_bound of ACTUAL against the f64 GOLDEN and its terms' bound."""
    if not (args.magnitude and args.count):
        raise ValueError("bound needs --magnitude FILE and --count FILE")
    mag, _ = _load(args.magnitude, np)
    count, _ = _load(args.count, np)
    out = args.out_dtype or ("bfloat16" if dtype == "bf16" else str(actual.dtype))
    if out not in precision.UNIT or out not in precision.TINY:
        raise ValueError("bound: --out-dtype %s; one of float64, float32, float16, bfloat16"
                         % out)
    slack = _load(args.slack, np)[0] if args.slack else 0.0
    bound = precision.error_bound(golden, mag, count, out, args.acc_dtype,
                                  input_rounding=args.input_rounding, model=args.model,
                                  slack=slack)
    return precision.check_bound(actual, golden, bound, dtype=dtype)


def compare(argv):
    """python3 -m gradref compare: prints a standard's verdict; 0 pass, 1 fail, 2 misuse."""
    args = _compare_parser().parse_args(argv)
    import numpy as np
    try:
        a, a_bits = _load(args.actual, np)
        g, g_bits = _load(args.golden, np)
        dtype = "bf16" if a_bits or g_bits else None
        if args.standard == "cann":
            v = standards.cann_threshold(a, g, args.out_dtype, dtype=dtype)
        elif args.standard == "bound":
            v = _bound_verdict(args, a, g, dtype, np)
        elif args.standard == "mlu":
            limits = {k: float(x) for k, x in _pairs(args.threshold, "--threshold").items()}
            v = standards.mlu_check(a, g, limits or None, dtype=dtype)
        else:
            if not args.third_party:
                return _fail("gradref compare: cann-ratio needs --third-party FILE")
            t, _ = _load(args.third_party, np)
            v = standards.cann_ratio(a, g, t, args.level, dtype=dtype, min_cases=args.min_cases)
    except (ValueError, TypeError, OSError) as e:
        return _fail("gradref compare: %s" % e)
    print(v.report())
    return 0 if v.passed else 1


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "compare":
        return compare(argv[1:])
    top = _parser()
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
        return _fail("gradref: unknown operator %r; one of: %s" % (args.op, ", ".join(OPERATORS)))
    if not args.out_dir:
        return _fail("gradref: --out-dir DIR is required")
    import numpy as np
    fn, inputs, _, outputs = OPERATORS[args.op]
    required = [i for i in inputs if not i.endswith("?")]
    names = [i.rstrip("?") for i in inputs]
    given = _pairs(args.input, "--input")
    missing = [i for i in required if i not in given]
    unknown = [k for k in given if k not in names]
    if missing or unknown:
        return _fail("gradref: %s needs --input %s%s" % (
            args.op, ", ".join("%s=FILE" % i for i in required),
            "; unknown: " + ", ".join(unknown) if unknown else ""))
    kwargs = {k: _parse_value(v) for k, v in _pairs(args.attr, "--attr").items()}
    attrs = _attributes(args.op)
    bad = [k for k in kwargs if k not in attrs]
    if bad:
        return _fail("gradref: %s has no attribute %s; it has %s" % (
            args.op, ", ".join(bad), ", ".join(attrs)))
    try:
        arrays = {}
        for k in names:
            if k in given:
                arrays[k], bits = _load(given[k], np)
                if bits:
                    kwargs.setdefault("dtype", "bf16")
        result = fn(**arrays, **kwargs)  # inputs by name: their places differ per operator
        if not isinstance(result, tuple):
            result = (result,)
        result = [None if v is None else _convert(np.asarray(v), args.out_dtype, np)
                  for v in result]
        extra = _extra_outputs(args, inputs, outputs, arrays, kwargs, np)
    except _args.Error as e:
        return _fail("gradref: %s failed: %s" % (args.op, e), 1)
    except (TypeError, ValueError, OSError) as e:
        text = str(e)
        text = text[len("gradref: "):] if text.startswith("gradref: ") else text
        return _fail("gradref: %s: %s" % (args.op, text))
    os.makedirs(args.out_dir, exist_ok=True)
    bf16 = kwargs.get("dtype") == "bf16" or str(args.out_dtype).lower() in ("bfloat16", "bf16")
    for name, value in zip(outputs, result):
        if value is not None:
            _write(args, name, value, bf16, np)
    for name, value in extra:
        _write(args, name, value, False, np)
    return 0


if __name__ == "__main__":
    sys.exit(main())
