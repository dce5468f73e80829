/*
 * gradref: a C99 CPU library of neural-network backward operators.
 *
 * This is the only public header. Everything here is C99, extern "C", and depends only on
 * <stddef.h> and <stdint.h>. The conventions (descriptors, dtypes, errors, threads, workspace,
 * determinism, accuracy) are described in docs/api.md; each operator has its own page in docs/.
 *
 * Naming: functions, types and enum values are gradref_* / GRADREF_*. Tensor parameters keep
 * the names of the system each operator models (PyTorch's grad/x/grid, MegEngine's
 * filter/diff/grad, TensorFlow's x/dy/dw, ATB's q_embed_grad, FBGEMM's grad_output), so that
 * a port can be read against its upstream; each operator's doc page maps them. Every
 * operator has a twin gradref_<op>_workspace_size() that validates the same arguments and
 * reports the workspace for the default thread count (OMP_NUM_THREADS), for either precision;
 * a smaller workspace that still holds one thread's share runs the call on fewer threads.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
#ifndef GRADREF_H
#define GRADREF_H

#include <stddef.h>
#include <stdint.h>

#define GRADREF_VERSION_MAJOR 0
#define GRADREF_VERSION_MINOR 1
#define GRADREF_VERSION_PATCH 0
#define GRADREF_VERSION_NUMBER                                                                     \
  (GRADREF_VERSION_MAJOR * 10000 + GRADREF_VERSION_MINOR * 100 + GRADREF_VERSION_PATCH)
#define GRADREF_STRINGIFY_(x) #x
#define GRADREF_STRINGIFY(x)  GRADREF_STRINGIFY_(x)
#define GRADREF_VERSION_STRING                                                                     \
  GRADREF_STRINGIFY(GRADREF_VERSION_MAJOR)                                                         \
  "." GRADREF_STRINGIFY(GRADREF_VERSION_MINOR) "." GRADREF_STRINGIFY(GRADREF_VERSION_PATCH)

#if defined(_WIN32) && !defined(GRADREF_STATIC)
#  ifdef GRADREF_BUILDING_LIBRARY
#    define GRADREF_API __declspec(dllexport)
#  else
#    define GRADREF_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__) && __GNUC__ >= 4
#  define GRADREF_API __attribute__((visibility("default")))
#else
#  define GRADREF_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* Core types                                                                                  */
/* ------------------------------------------------------------------------------------------ */

#define GRADREF_MAX_DIMS 8

/* Element types. Values are fixed and never renumbered. */
typedef enum gradref_dtype {
    GRADREF_F32 = 0,
    GRADREF_F64 = 1,
    GRADREF_F16 = 2,  /* IEEE binary16 */
    GRADREF_BF16 = 3, /* bfloat16: the upper half of an f32 */
    GRADREF_I8 = 4,
    GRADREF_I32 = 5,
    GRADREF_I64 = 6
} gradref_dtype;

/* A tensor: logical shape plus element strides (as DLPack and PyTorch). Dimensions run
 * outermost first; each operator documents its logical order (e.g. N,C,D,H,W). A layout such
 * as NDHWC is just another set of strides over the same logical shape. The struct holds no
 * pointer but `data`, so a descriptor is a plain value. */
typedef struct gradref_tensor {
    void *data;    /* element [0,...,0], aligned to the element size; inputs are only read */
    int32_t dtype; /* gradref_dtype */
    int32_t ndim;  /* 0..GRADREF_MAX_DIMS */
    int64_t shape[GRADREF_MAX_DIMS];
    int64_t strides[GRADREF_MAX_DIMS]; /* in elements, >= 0 */
} gradref_tensor;

/* Status codes. GRADREF_OK is 0; values are fixed and never renumbered. On failure
 * gradref_last_error() tells the operator, the argument and the values. Every call checks its
 * tensors first: data non-NULL and aligned to the element size when the tensor has elements
 * (PARAM otherwise); strides of size-1 dims and of empty tensors are never used. */
typedef enum gradref_status {
    GRADREF_OK = 0,
    GRADREF_ERR_NULL = 1,     /* a required pointer is NULL */
    GRADREF_ERR_DTYPE = 2,    /* unsupported dtype or dtypes that do not match */
    GRADREF_ERR_RANK = 3,     /* wrong number of dimensions */
    GRADREF_ERR_SHAPE = 4,    /* negative, inconsistent or mismatched sizes */
    GRADREF_ERR_STRIDE = 5,   /* negative stride, or an output whose elements overlap */
    GRADREF_ERR_PARAM = 6,    /* an attribute out of range (mode, stride, pad, seq_lens, ...) */
    GRADREF_ERR_OVERFLOW = 7, /* a size or offset does not fit in int64 / size_t */
    GRADREF_ERR_ALIAS = 8,    /* an output overlaps an input or another output */
    GRADREF_ERR_NO_MEMORY = 9,
    GRADREF_ERR_WORKSPACE = 10 /* reserved: a workspace smaller than one thread's share now runs
                                  the no-workspace path (docs/api.md) */
} gradref_status;

/* How floats are computed. DEFAULT and HIGH apply to every operator that does arithmetic. The
 * device modes reproduce a device's numerics and apply only where stated; the other arithmetic
 * operators refuse them (PARAM). recat and gradref_copy do no arithmetic and ignore precision,
 * device modes included. Every NaN an arithmetic operator stores is the canonical quiet NaN
 * (F32 0x7fc00000, F64 0x7ff8000000000000, F16 0x7e00, BF16 0x7fc0) on every path and
 * architecture; recat and gradref_copy keep NaN bits (docs/api.md). */
typedef enum gradref_precision {
    GRADREF_PRECISION_DEFAULT = 0, /* f16/bf16/f32 accumulate in f32, f64 in f64, ints in i32 */
    GRADREF_PRECISION_HIGH = 1,    /* every float dtype accumulates in f64 */
    /* conv3d_backprop_filter with F32 x and dy: each x and dy value rounded to HF32 before the
     * products (CANN's golden: 10 mantissa bits kept, ties away from zero; the default and
     * Ascend 950), f32 accumulation, F32 dw not rounded */
    GRADREF_PRECISION_HF32 = 2,
    GRADREF_PRECISION_HF32_910B = 3, /* the same keeping 11 mantissa bits (Ascend 910B) */
    /* conv_backprop_data with F16 or BF16: MegEngine's compute_mode DEFAULT, which accumulates
     * in the 16-bit grad element itself, in its naive kernel's order (docs/conv_backprop_data.md);
     * gradref's DEFAULT with an F16/BF16 grad is MegEngine's FLOAT32 (f32 sums rounded once) */
    GRADREF_PRECISION_MEGENGINE_DEFAULT = 4
} gradref_precision;

/* A flag OR'ed into gradref_exec.precision: strict upstream validation. The call then also
 * rejects what the upstream operator it is modelled on rejects (ATB's RopeGrad, CANN's
 * GridSampler3DGrad and Conv3DBackpropFilterV2, MegEngine's ConvolutionBackwardData, FBGEMM's
 * CPU recat; docs/api.md lists the rules), before anything is written. The results of the calls
 * it accepts do not change. The _workspace_size twins have no exec and validate as without it. */
#define GRADREF_STRICT_UPSTREAM 0x100

/* A flag OR'ed into gradref_exec.precision: padding taps multiplied as zeros. By default a tap
 * that falls in the padding is skipped, so an Inf or NaN in dy does not reach the dw elements
 * that only padding connects it to. TensorFlow, PyTorch and CANN compute dw from a zero-filled
 * input, where 0 * Inf and 0 * NaN are NaN: with this flag conv3d_backprop_filter gives those
 * elements NaN too (the canonical NaN), its other bits unchanged. The other operators have no
 * padding taps of that kind and ignore it. */
#define GRADREF_PADDED_ZEROS 0x200

/* Flags OR'ed into gradref_exec.precision (with GRADREF_PRECISION_DEFAULT): instead of the
 * result, each output element's error terms (docs/precision.md), computed in f64 by the
 * reference loop from inputs of any dtype the call takes, into an F64 output:
 * GRADREF_TERM_MAGNITUDES the sum of |term| over the products the element sums,
 * GRADREF_TERM_COUNTS how many products it sums (a tap in the padding is no term). They bound
 * the error of any correct kernel. conv_backprop_data (not its QuantizedS8 call),
 * conv3d_backprop_filter, grid_sampler3d_grad (F64 dx and dgrid: the counts there include the 5
 * roundings inside each trilinear term), rope_grad (2 terms an element, none past rotary_dim)
 * and the recat calls (float grad_output: |value| and no term) take them; gradref_copy, the
 * QuantizedS8 call and both flags together are a PARAM error. Such a call
 * needs no workspace; the _workspace_size twins have no exec and validate as without the flags. */
#define GRADREF_TERM_MAGNITUDES 0x400
#define GRADREF_TERM_COUNTS     0x800

/* The most threads one call runs on. An explicit gradref_exec.num_threads above it is a PARAM
 * error; an OpenMP default above it is lowered to it. */
#define GRADREF_MAX_THREADS 1024

/* Execution options for one call. A NULL gradref_exec* means all defaults (zero-initialised).
 * The workspace must not overlap any tensor or array argument of the call. */
typedef struct gradref_exec {
    void *workspace;        /* caller scratch, or NULL: the call makes one allocation if needed */
    size_t workspace_bytes; /* size of workspace; see gradref_<op>_workspace_size() */
    int32_t num_threads;    /* 0: OpenMP default (OMP_NUM_THREADS), at most GRADREF_MAX_THREADS;
                               1..GRADREF_MAX_THREADS: that many; otherwise PARAM */
    int32_t precision;      /* gradref_precision */
} gradref_exec;

/* "GRADREF_OK", "GRADREF_ERR_SHAPE", ...; "GRADREF_ERR_UNKNOWN" for other values. Never NULL. */
GRADREF_API const char *gradref_status_string(gradref_status s);

/* The calling thread's message for its last failed call ("" if none). Successful calls leave
 * it as it was. The pointer stays valid until this thread's next failed call. */
GRADREF_API const char *gradref_last_error(void);

/* The library's version, "MAJOR.MINOR.PATCH" (compare with GRADREF_VERSION_STRING). */
GRADREF_API const char *gradref_version(void);

/* ------------------------------------------------------------------------------------------ */
/* Tensor helpers                                                                              */
/* ------------------------------------------------------------------------------------------ */

/* Fill *t as a contiguous (row-major) tensor of the given shape.
 * Errors: NULL (t, or shape with ndim > 0), RANK (ndim outside 0..8), DTYPE, SHAPE (negative
 * size), OVERFLOW (element count or byte size does not fit). *t is untouched on error. */
GRADREF_API gradref_status gradref_tensor_init(gradref_tensor *t, void *data, gradref_dtype dtype,
                                               int32_t ndim, const int64_t *shape);

typedef enum gradref_format {
    GRADREF_FORMAT_NCHW = 0,
    GRADREF_FORMAT_NHWC = 1,
    GRADREF_FORMAT_NCDHW = 2,
    GRADREF_FORMAT_NDHWC = 3,
    GRADREF_FORMAT_DHWCN = 4,
    GRADREF_FORMAT_HWCN = 5,
    /* MegEngine's channel-blocked 2-D formats (blocked descriptors, below) */
    GRADREF_FORMAT_NCHW4 = 6,     /* (N, C/4, H, W, 4) */
    GRADREF_FORMAT_NHWCD4 = 7,    /* (N, H, C/4, W, 4) */
    GRADREF_FORMAT_NHWCD4_DOT = 8 /* tensors as NHWCD4; filters in MegEngine's quantised layout */
} gradref_format;

/* Blocked descriptors. A dim d whose stride is negative is split into blocks of b elements:
 * element i along d sits at (i / b) * B + (i % b) * S, where B = -strides[d] >= 1 is the stride
 * of a whole block and, for the j-th such dim in dim order (j = 0, 1, ...), shape[ndim + j] = b
 * >= 1 (dividing shape[d]) and strides[ndim + j] = S >= 0 are read from the slot past the
 * logical dims (ndim + the number of blocked dims <= GRADREF_MAX_DIMS). This describes
 * MegEngine's NCHW4 and NHWCD4 tensors and filters with their logical shapes. Only
 * gradref_copy and conv_backprop_data (both calls) read blocked tensors; every other operator
 * refuses a negative stride (STRIDE). A valid descriptor without negative strides never has
 * its slots past ndim read. */

/* Fill *t with the logical shape (N,C,H,W) for the 2-D formats or (N,C,D,H,W) for the 3-D ones
 * (4 or 5 entries of `shape`) and the strides of the memory order the format names. For a
 * filter, read N as the output channels and C as the input channels: DHWCN is TF's DHWIO.
 * NCHW4 and NHWCD4(_DOT) give blocked descriptors and need C divisible by 4 (SHAPE).
 * Errors as gradref_tensor_init, plus PARAM for an unknown format. */
GRADREF_API gradref_status gradref_tensor_init_format(gradref_tensor *t, void *data,
                                                      gradref_dtype dtype, gradref_format format,
                                                      const int64_t *shape);

/* dst[i] = src[i] for every logical index i: any two layouts of the same shape, converting the
 * dtype. Float to float and integer to float round to nearest even (once); integer to a wider
 * integer is exact. Float to integer and integer narrowing are DTYPE errors. Equal dtypes copy
 * bits (NaN payloads and -0 survive).
 * Errors: NULL, DTYPE, RANK/SHAPE (shapes differ), STRIDE (dst overlaps itself), OVERFLOW,
 * ALIAS (dst overlaps src), PARAM (bad exec). dst is untouched on error. */
GRADREF_API gradref_status gradref_copy(const gradref_tensor *src, const gradref_tensor *dst,
                                        const gradref_exec *exec);

/* ------------------------------------------------------------------------------------------ */
/* grid_sampler3d_grad: backward of 3-D grid_sample (docs/grid_sampler3d_grad.md)              */
/* ------------------------------------------------------------------------------------------ */
/* PyTorch grid_sampler_3d_backward / CANN GridSampler3DGrad. grad (N,C,Do,Ho,Wo) is dL/d(output),
 * x (N,C,Di,Hi,Wi) the sampled input, grid (N,Do,Ho,Wo,3) the sampling points (x->W, y->H,
 * z->D, normalised to [-1, 1]). dx (like x) and dgrid (like grid) are outputs; either may be
 * NULL to skip it. Any strides (NCDHW, NDHWC, views, zero-stride inputs). Dtypes F32, F64,
 * F16, BF16, all alike; F16/BF16 are computed in f32 and rounded once. A grid coordinate that
 * is NaN, infinite or beyond the int32 range after padding counts as out of bounds.
 * Errors: NULL, DTYPE, RANK, SHAPE, PARAM, STRIDE, OVERFLOW, ALIAS, NO_MEMORY.
 * Outputs are untouched on error. */
typedef enum gradref_interp {
    GRADREF_INTERP_BILINEAR = 0,
    GRADREF_INTERP_NEAREST = 1
} gradref_interp;
typedef enum gradref_padding {
    GRADREF_PAD_ZEROS = 0,
    GRADREF_PAD_BORDER = 1,
    GRADREF_PAD_REFLECTION = 2
} gradref_padding;

typedef struct gradref_grid_sampler3d_params {
    int32_t interpolation; /* gradref_interp: BILINEAR is trilinear on 3-D data */
    int32_t padding;       /* gradref_padding */
    int32_t align_corners; /* 0 or 1 */
} gradref_grid_sampler3d_params;

GRADREF_API gradref_status gradref_grid_sampler3d_grad(
    const gradref_grid_sampler3d_params *p, const gradref_tensor *grad, const gradref_tensor *x,
    const gradref_tensor *grid, const gradref_tensor *dx, const gradref_tensor *dgrid,
    const gradref_exec *exec);
/* The workspace such a call may use (see the top of this header). Validates like the call. */
GRADREF_API gradref_status gradref_grid_sampler3d_grad_workspace_size(
    const gradref_grid_sampler3d_params *p, const gradref_tensor *grad, const gradref_tensor *x,
    const gradref_tensor *grid, const gradref_tensor *dx, const gradref_tensor *dgrid,
    size_t *bytes);

/* ------------------------------------------------------------------------------------------ */
/* Convolution parameters (both convolution operators)                                        */
/* ------------------------------------------------------------------------------------------ */
/* The spatial rank is the tensors' rank minus 2 (1, 2 or 3); entries past it are ignored. */
typedef enum gradref_conv_mode {
    GRADREF_CONV_CROSS_CORRELATION = 0,
    GRADREF_CONV_CONVOLUTION = 1
} gradref_conv_mode;

typedef struct gradref_conv_params {
    int32_t mode;        /* gradref_conv_mode; CONVOLUTION = filter flipped in every spatial dim */
    int32_t groups;      /* >= 1 (0 is read as 1) */
    int64_t stride[3];   /* per spatial dim, in order (D, H, W for 3-D); >= 1 */
    int64_t dilation[3]; /* >= 1 */
    int64_t pad[6];      /* begin, end per spatial dim in order: 2-D {top, bottom, left, right},
                            3-D {front, back, top, bottom, left, right}; >= 0 */
} gradref_conv_params;

/* TF/CANN "SAME" padding: for spatial dims 0..spatial_dims-1 (1 to 3), with p->stride and
 * p->dilation, sets p->pad so that out = ceil(in / stride); the odd pad goes to the end
 * (back/bottom/right). input_size and kernel_size hold spatial_dims sizes.
 * Errors: NULL, PARAM (spatial_dims, stride, dilation, a negative input or a kernel < 1),
 * OVERFLOW. *p is untouched on error. */
GRADREF_API gradref_status gradref_conv_pads_same(gradref_conv_params *p, int32_t spatial_dims,
                                                  const int64_t *input_size,
                                                  const int64_t *kernel_size);

/* ------------------------------------------------------------------------------------------ */
/* conv_backprop_data: MegEngine ConvolutionBackwardData (docs/conv_backprop_data.md)         */
/* ------------------------------------------------------------------------------------------ */
/* grad = dL/dx of a 1-D, 2-D or 3-D convolution y = conv(x, filter): filter (OC, IC/G, k...)
 * or grouped (G, OC/G, IC/G, k...), diff = dL/dy (N, OC, o...), grad (N, IC, i...) written
 * completely. grad's spatial size may be any i whose forward size
 * floor((i + pad_begin + pad_end - dilation*(k-1) - 1) / stride) + 1 is diff's; positions no
 * tap reaches are 0. Dtypes: filter and diff F32, F64, F16 or BF16 with grad alike (or F32 for
 * F16/BF16: the f32 sums unrounded, which MegEngine has no call for; its FLOAT32 compute mode keeps
 * diff's dtype); or I8 x I8 and I32 x I32 -> I32 (exact, modulo 2^32; I32 as TensorFlow's
 * int32 Conv2DBackpropInput, by the reference loop). Any strides (NCHW, NHWC, ...), and
 * blocked descriptors (MegEngine's NCHW4, NHWCD4: the call stages them in plain copies, counted
 * in its workspace; the bits are those of the plain call).
 * Errors: NULL, DTYPE, RANK, SHAPE, PARAM, STRIDE, OVERFLOW, ALIAS, NO_MEMORY.
 * grad is untouched on error. */
GRADREF_API gradref_status gradref_conv_backprop_data(const gradref_conv_params *p,
                                                      const gradref_tensor *filter,
                                                      const gradref_tensor *diff,
                                                      const gradref_tensor *grad,
                                                      const gradref_exec *exec);
/* The workspace such a call may use (see the top of this header). Validates like the call. */
GRADREF_API gradref_status gradref_conv_backprop_data_workspace_size(const gradref_conv_params *p,
                                                                     const gradref_tensor *filter,
                                                                     const gradref_tensor *diff,
                                                                     const gradref_tensor *grad,
                                                                     size_t *bytes);

/* QuantizedS8 grad (MegEngine's QuantizedS8 x QuantizedS8 -> QuantizedS8 backward data): I8
 * filter and diff holding QuantizedS8 values of the given scales, an I8 grad of scale
 * scales->grad. Each grad element's exact int32 sum acc (as the I8 -> I32 call gives it) is
 * requantised as MegEngine does: t = (float)acc * (filter * diff) in float, then
 * roundf(t / grad) (half away from zero), saturated to -128..127. Scales must be finite and
 * > 0 (PARAM). The rest as gradref_conv_backprop_data, its workspace included. */
typedef struct gradref_qs8_scales {
    float filter, diff, grad;
} gradref_qs8_scales;

GRADREF_API gradref_status gradref_conv_backprop_data_qs8(
    const gradref_conv_params *p, const gradref_qs8_scales *scales, const gradref_tensor *filter,
    const gradref_tensor *diff, const gradref_tensor *grad, const gradref_exec *exec);
GRADREF_API gradref_status gradref_conv_backprop_data_qs8_workspace_size(
    const gradref_conv_params *p, const gradref_qs8_scales *scales, const gradref_tensor *filter,
    const gradref_tensor *diff, const gradref_tensor *grad, size_t *bytes);

/* Fill *t with a 2-D convolution filter of the logical shape (OC, IC, FH, FW) (ndim 4, dense)
 * or (G, OC/G, IC/G, FH, FW) (ndim 5, grouped) laid out as MegEngine's `format` lays filters:
 *   NCHW        (OC, IC, FH, FW)              grouped (G, OC/G, IC/G, FH, FW)
 *   NHWC        (OC, FH, FW, IC)              grouped (G, OC/G, FH, FW, IC/G)
 *   NCHW4       (OC, IC/4, FH, FW, 4)         grouped (G, OC/G, IC/G/4, FH, FW, 4)
 *   NHWCD4      (OC/4, FH, FW, IC, 4)         grouped (G, OC/G/4, FH, FW, IC/G, 4)
 *   NHWCD4_DOT  (OC/4, FH, FW, IC/4, 4oc, 4ic) grouped (G, OC/G/4, FH, FW, IC/G/4, 4oc, 4ic)
 * and for NHWCD4(_DOT) channel-wise filters (grouped, OC/G = IC/G = 1): (G/4, 1, FH, FW, 4).
 * The last 4 of NCHW4 blocks input channels, of NHWCD4 output channels (groups when
 * channel-wise). Errors: NULL, RANK (ndim not 4 or 5), SHAPE (negative size, or a blocked
 * channel count not divisible by 4), PARAM (another format), DTYPE, OVERFLOW. *t is untouched
 * on error. */
GRADREF_API gradref_status gradref_conv_filter_init_format(gradref_tensor *t, void *data,
                                                           gradref_dtype dtype,
                                                           gradref_format format, int32_t ndim,
                                                           const int64_t *shape);

/* ------------------------------------------------------------------------------------------ */
/* conv3d_backprop_filter: TF/CANN Conv3DBackpropFilter(V2) (docs/conv3d_backprop_filter.md)  */
/* ------------------------------------------------------------------------------------------ */
/* dw = dL/dw of a 3-D convolution: x (N, Cin, Di, Hi, Wi), dy (N, Cout, Do, Ho, Wo), dw
 * (Cout, Cin/G, kD, kH, kW) written completely; any strides (x/dy NCDHW or NDHWC; dw CANN's
 * NCDHW, NDHWC or DHWCN = TF's DHWIO through gradref_tensor_init_format). Each dw element is
 * the sum over (n, od, oh, ow) in a fixed blocked order (the doc gives it and its error bound).
 * Dtypes: x and dy F32, F64, F16 or BF16; dw alike, or F32 for F16/BF16 (CANN V2).
 * Errors: NULL, DTYPE, RANK, SHAPE, PARAM, STRIDE, OVERFLOW, ALIAS, NO_MEMORY.
 * dw is untouched on error. */
GRADREF_API gradref_status gradref_conv3d_backprop_filter(const gradref_conv_params *p,
                                                          const gradref_tensor *x,
                                                          const gradref_tensor *dy,
                                                          const gradref_tensor *dw,
                                                          const gradref_exec *exec);
/* The workspace such a call may use (see the top of this header). Validates like the call. */
GRADREF_API gradref_status gradref_conv3d_backprop_filter_workspace_size(
    const gradref_conv_params *p, const gradref_tensor *x, const gradref_tensor *dy,
    const gradref_tensor *dw, size_t *bytes);

/* CANN Conv3DBackpropFilterToV2FusionPass: 1 when a Transpose follows Conv3DBackpropFilterV2,
 * that is dw_format (a gradref_format) is NDHWC or DHWCN, shape_known is nonzero, core_count
 * > 0, and din * cin * cout <= core_count * 32 * 32 * 4 (din > 1) or (core_count / 2) * 32 * 32
 * (din == 1); otherwise 0. din is x's depth (Di), cin the per-group input channel count, cout
 * the output channel count. */
GRADREF_API int32_t gradref_conv3d_dw_transpose_needed(int32_t dw_format, int64_t din, int64_t cin,
                                                       int64_t cout, int64_t core_count,
                                                       int32_t shape_known);

/* CANN Conv3DBackpropFilterV2's output y as a dw descriptor: y's shape is filter_size in the
 * order of y's format (NCDHW, NDHWC or DHWCN; 5 entries, or 4 with D = 1 inserted at the
 * format's D position, as CANN's shape inference does). *t gets the logical dw
 * (Cout, Cin/G, kD, kH, kW) over y's memory. from_depthwise nonzero applies CANN's attribute of
 * that name where CANN reads it (a 4-entry filter_size, y NCDHW or DHWCN; elsewhere it is
 * ignored, as CANN does): y's N and C entries are read as N*C output channels of one input
 * channel each (N <- N*C, C <- 1), so a depthwise filter (kH, kW, in, multiplier) in DHWCN gives
 * output channel i*multiplier + m; pass groups = x's channels then. Errors: NULL, RANK
 * (filter_size_len not 4 or 5), SHAPE (a negative entry), PARAM (another format), DTYPE,
 * OVERFLOW. *t is untouched on error. */
GRADREF_API gradref_status gradref_conv3d_filter_init_cann(
    gradref_tensor *t, void *data, gradref_dtype dtype, gradref_format format,
    int32_t filter_size_len, const int64_t *filter_size, int32_t from_depthwise);

/* ------------------------------------------------------------------------------------------ */
/* recat: FBGEMM recat_embedding_grad_output* (docs/recat.md)                                  */
/* ------------------------------------------------------------------------------------------ */
/* For rank r with column width ds_r starting at column C_r = ds_0 + ... + ds_{r-1} of a
 * (B, G) gradient:  out[B*C_r + b*ds_r + d] = grad_output[b, C_r + d].
 * out is 1-D with numel(grad_output) elements and the same dtype. Every dtype is moved as bits.
 * grad_output and out may have any strides. Stricter than FBGEMM: num_ranks >= 1, every entry
 * >= 0 and the entries sum to the row width (PARAM otherwise).
 * Errors: NULL, DTYPE (out's dtype differs), RANK, SHAPE (out.shape[0] != numel), PARAM,
 * STRIDE, OVERFLOW, ALIAS (also when the rank list lies inside out: it is read while out is
 * written). out is untouched on error. No workspace is used. */

/* Fixed D: grad_output (B, T, D); rank r owns num_features_per_rank[r] features, so
 * ds_r = num_features_per_rank[r] * D; the entries sum to T. */
GRADREF_API gradref_status gradref_recat_embedding_grad_output(const gradref_tensor *grad_output,
                                                               const int64_t *num_features_per_rank,
                                                               int32_t num_ranks,
                                                               const gradref_tensor *out,
                                                               const gradref_exec *exec);
GRADREF_API gradref_status gradref_recat_embedding_grad_output_workspace_size(
    const gradref_tensor *grad_output, const int64_t *num_features_per_rank, int32_t num_ranks,
    const gradref_tensor *out, size_t *bytes);

/* Mixed D: grad_output (B, sumD); ds_r = dim_sum_per_rank[r]; the entries sum to sumD. */
GRADREF_API gradref_status gradref_recat_embedding_grad_output_mixed_d(
    const gradref_tensor *grad_output, const int64_t *dim_sum_per_rank, int32_t num_ranks,
    const gradref_tensor *out, const gradref_exec *exec);
GRADREF_API gradref_status gradref_recat_embedding_grad_output_mixed_d_workspace_size(
    const gradref_tensor *grad_output, const int64_t *dim_sum_per_rank, int32_t num_ranks,
    const gradref_tensor *out, size_t *bytes);

/* Mixed D with the split given as tensors: dim_sum_per_rank and cumsum_dim_sum_per_rank are
 * I64, 1-D, of length W >= 1 (any stride); cumsum must be the EXCLUSIVE prefix sum of
 * dim_sum_per_rank (C_0 = 0). An inclusive or I32 prefix, as torchrec builds, is rejected
 * (PARAM or DTYPE) with a message saying so. */
GRADREF_API gradref_status gradref_recat_embedding_grad_output_mixed_d_batch(
    const gradref_tensor *grad_output, const gradref_tensor *dim_sum_per_rank,
    const gradref_tensor *cumsum_dim_sum_per_rank, const gradref_tensor *out,
    const gradref_exec *exec);
GRADREF_API gradref_status gradref_recat_embedding_grad_output_mixed_d_batch_workspace_size(
    const gradref_tensor *grad_output, const gradref_tensor *dim_sum_per_rank,
    const gradref_tensor *cumsum_dim_sum_per_rank, const gradref_tensor *out, size_t *bytes);

/* ------------------------------------------------------------------------------------------ */
/* rope_grad: ATB RopeGrad and the exact RoPE adjoints (docs/rope_grad.md)                    */
/* ------------------------------------------------------------------------------------------ */
/* q_embed_grad (T, Hq) and k_embed_grad (T, Hk) are the gradients at the rotated q and k, with
 * Hq and Hk multiples of head_dim (Hq != Hk is GQA); cos and sin are (S_max, head_dim); q_grad
 * and k_grad are outputs shaped like their inputs. Token rows are the sequences of seq_lens
 * concatenated; token t of sequence b sits at position start_positions[b] + t (0 + t when
 * start_positions is NULL) and uses that row of cos and sin. Every head of q and k is done.
 * Dtypes: F32, F64, F16, BF16, all six tensors alike.
 * Errors: NULL, DTYPE, RANK (a tensor not 2-D), SHAPE (sizes that disagree), PARAM (mode,
 * head_dim, rotary_dim, num_seqs, seq_lens, start_positions, exec), STRIDE, OVERFLOW, ALIAS
 * (also when seq_lens or start_positions lies inside an output: both are read while the
 * outputs are written).
 * Outputs are untouched on error. */
typedef enum gradref_rope_mode {
    GRADREF_ROPE_ATB = 0,        /* ATB RopeGrad's formula, bit for bit: NOT the adjoint of RoPE */
    GRADREF_ROPE_HALF = 1,       /* exact adjoint of rotate_half RoPE (NeoX, LLaMA) */
    GRADREF_ROPE_INTERLEAVED = 2 /* exact adjoint of interleaved RoPE (GPT-J) */
} gradref_rope_mode;

typedef struct gradref_rope_params {
    int32_t mode;                   /* gradref_rope_mode; see docs/rope_grad.md */
    int32_t head_dim;               /* even, >= 2 (ATB uses 128) */
    int32_t rotary_dim;             /* 0 = head_dim; else even <= head_dim, rest passes through */
    int32_t num_seqs;               /* entries of seq_lens (ATB qSeqLen), >= 1 */
    const int32_t *seq_lens;        /* each > 0; their sum must equal T */
    const int64_t *start_positions; /* NULL or num_seqs offsets into cos/sin rows */
} gradref_rope_params;

GRADREF_API gradref_status gradref_rope_grad(
    const gradref_rope_params *p, const gradref_tensor *q_embed_grad,
    const gradref_tensor *k_embed_grad, const gradref_tensor *cos, const gradref_tensor *sin,
    const gradref_tensor *q_grad, const gradref_tensor *k_grad, const gradref_exec *exec);
/* Reports 0 bytes: rope_grad needs no workspace. Validates like gradref_rope_grad. */
GRADREF_API gradref_status gradref_rope_grad_workspace_size(
    const gradref_rope_params *p, const gradref_tensor *q_embed_grad,
    const gradref_tensor *k_embed_grad, const gradref_tensor *cos, const gradref_tensor *sin,
    const gradref_tensor *q_grad, const gradref_tensor *k_grad, size_t *bytes);

#ifdef __cplusplus
}
#endif

#endif /* GRADREF_H */
