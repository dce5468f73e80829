# SPDX-License-Identifier: Apache-2.0
"""MegEngine's ConvolutionBackwardData in MegEngine's own call: the operator's Param fields in
their order and with their defaults (MegEngine dnn/scripts/opr_param_defs.py,
pdef('Convolution', version=2): mode, pad_h, pad_w, stride_h, stride_w, dilate_h, dilate_w,
sparse, format, compute_mode), exec(filter, diff, grad) with grad given or shaped as the 3-input
ConvolutionBackwardData::make(filter, diff, src_for_shp) shapes it (src/opr/impl/dnn/
convolution.cpp):

    convolution_backward_data(filter, diff, grad=None, mode="CROSS_CORRELATION", pad_h=0,
                              pad_w=0, stride_h=1, stride_w=1, dilate_h=1, dilate_w=1,
                              sparse="DENSE", format="NCHW", compute_mode="DEFAULT", *,
                              src_for_shp=None, qs8_scales=None)

filter and diff in format's layout (NCHW: diff (N, OC, OH, OW), filter (OC, IC, FH, FW) or GROUP
(G, OC/G, IC/G, FH, FW); NHWC: diff (N, OH, OW, OC), filter (OC, FH, FW, IC) or (G, OC/G, FH, FW,
IC/G)). compute_mode "DEFAULT" on float16/bfloat16 is MegEngine's naive kernel bit for bit
(every term rounded into the 16-bit grad, gradref's precision "megengine_default"); "FLOAT32"
accumulates in f32 and rounds once (MegEngine takes FLOAT32 for Float16/BFloat16 only). Int8
gives Int32 sums; qs8_scales=(filter, diff, grad) scales give MegEngine's QuantizedS8 grad, and
(filter, diff) or (filter, diff, None) its default QuantizedS32 grad (the exact int32 sums, of
scale filter * diff). NCHW4 takes dilation 1 and NHWCD4 cross-correlation, as MegEngine. grad is written in place when given (MegEngine's
exec), else returned new. As MegEngine, the call is 2-D and validated by its rules (strict=True:
no float64, symmetric uint32 pads, grad of diff's dtype).
"""
from . import _ops

__all__ = ["convolution_backward_data", "ConvolutionBackwardData"]


def convolution_backward_data(filter, diff, grad=None, mode="CROSS_CORRELATION", pad_h=0,
                              pad_w=0, stride_h=1, stride_w=1, dilate_h=1, dilate_w=1,
                              sparse="DENSE", format="NCHW", compute_mode="DEFAULT", *,
                              src_for_shp=None, qs8_scales=None, strict=True, threads=None,
                              dtype=None):
    """MegEngine ConvolutionBackwardData: grad (the input gradient), in format's layout."""
    cm = compute_mode.upper() if isinstance(compute_mode, str) else compute_mode
    if cm not in ("DEFAULT", "FLOAT32", 0, 1):
        raise ValueError("gradref.megengine: compute_mode=%r; MegEngine has DEFAULT and FLOAT32"
                         % (compute_mode,))
    half = _is_16_bit(diff) or dtype in ("bf16", "bfloat16")
    if strict and cm in ("FLOAT32", 1) and not half:  # ConvolutionBase::deduce_dtype
        raise ValueError("gradref.megengine: compute_mode FLOAT32 is only available for "
                         "Float16/BFloat16 diff and filter (got %s)"
                         % (getattr(diff, "dtype", "?"),))
    if strict:
        _check_format_rules(format, mode, dilate_h, dilate_w)
    if qs8_scales is not None and (len(qs8_scales) == 2 or qs8_scales[-1] is None):
        qs8_scales = None  # QuantizedS8 -> QuantizedS32: the exact int32 sums, scale filter*diff
    precision = "megengine_default" if cm in ("DEFAULT", 0) and half and qs8_scales is None \
        else None
    grad_shape = None
    if grad is None and src_for_shp is not None:
        grad_shape = tuple(src_for_shp.shape)
    return _ops.conv_backprop_data(
        filter, diff, mode, sparse, format, (stride_h, stride_w), (pad_h, pad_w),
        (dilate_h, dilate_w), grad_shape=grad_shape, qs8_scales=qs8_scales, out=grad,
        threads=threads, precision=precision, strict=strict, dtype=dtype)


ConvolutionBackwardData = convolution_backward_data  # MegEngine's operator name


def _check_format_rules(fmt, mode, dilate_h, dilate_w):
    """MegEngine's blocked formats' own limits (dnn/src/common/convolution.cpp check_layout_fwd
    and the NCHW4/NHWCD4 naive kernels): NCHW4 takes dilation 1, NHWCD4 cross-correlation."""
    f = fmt.upper() if isinstance(fmt, str) else fmt
    m = mode.upper() if isinstance(mode, str) else mode
    if f == "NCHW4" and (dilate_h != 1 or dilate_w != 1):
        raise ValueError("gradref.megengine: format NCHW4 takes dilation 1 (got %d, %d)"
                         % (dilate_h, dilate_w))
    if f == "NHWCD4" and m not in ("CROSS_CORRELATION", 0):
        raise ValueError("gradref.megengine: format NHWCD4 takes mode CROSS_CORRELATION "
                         "(got %r)" % (mode,))


def _is_16_bit(x):
    """Whether x holds float16 or bfloat16 values (numpy, an extension dtype, or torch)."""
    name = str(getattr(x, "dtype", ""))
    return name in ("float16", "bfloat16", "torch.float16", "torch.bfloat16")
